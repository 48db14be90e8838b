"""OUT/vivado/build_bitstream.tcl of every Zynq board, run through tclsh with a stub procedure for each Vivado
command: the trace of calls shows the project, the block design (processing system, DMA, accelerator, what
connects to what) and the flow, in order; the HLS export runs a fake vitis_hls for real, and the bitstream
and hardware handoff the stubs leave where Vivado would are really copied to OUT/deploy once the post-route
reports (tests/test_report_checks.py checks their refusals) show a design that meets timing and fits."""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path

import pytest

from ming_py.boards import all_boards, load_board
from ming_py.emit.vivado import vivado_files
from ming_py.errors import MingError
from ming_py.line_buffers import build_stream_graph
from tcl_stubs import RECORDER, VIVADO_REPORT_STUBS, read_trace, run_tcl, timing_summary_report, utilization_report

MODEL = "tiny_cnn"
IP_DIR = Path("hls", f"{MODEL}_prj", "solution1", "impl", "ip")
ZYNQ_BOARDS = [b for b in all_boards() if b.interface == "zynq_axis_dma"]

# Actions are recorded; queries return their arguments tagged with the kind of object they stand for.
# create_project, set_property top and create_bd_design remember where Vivado would write the run's
# results, and wait_on_run leaves a bitstream and a hardware handoff there; the post-route reports are
# the fixtures of tcl_stubs.VIVADO_REPORT_STUBS.
VIVADO_STUBS = r"""
foreach command {update_ip_catalog create_bd_cell apply_bd_automation connect_bd_intf_net connect_bd_net
                 assign_bd_address validate_bd_design save_bd_design add_files update_compile_order launch_runs} {
  proc $command {args} "record $command {*}\$args"
}
foreach {command kind} {get_bd_cells cell get_bd_pins pin get_bd_intf_pins intf_pin get_runs run get_files file} {
  proc $command {args} "return \[lmap name \$args {string cat $kind: \$name}\]"
}
proc current_project {} { return project }
proc current_fileset {} { return fileset }
proc get_board_parts {args} { return [lindex $args end] }
proc get_ipdefs {args} { return [lindex $args end] }
proc create_project {args} {
  record create_project {*}$args
  lassign [lsearch -all -inline -not -exact $args -force] ::project_name ::project_dir
  file mkdir $::project_dir
}
proc create_bd_design {name} {
  record create_bd_design $name
  set ::bd $name
}
proc set_property {args} {
  record set_property {*}$args
  if {[lindex $args 0] eq "top"} { set ::top [lindex $args 1] }
}
proc make_wrapper {args} {
  record make_wrapper {*}$args
  return [file join $::project_dir $::project_name.gen sources_1 bd $::bd hdl ${::bd}_wrapper.v]
}
proc get_property {name object} {
  if {$name eq "PROGRESS" && $object eq "run:impl_1"} { return $::impl_progress }
  error "stub get_property: no $name of $object"
}
proc write_file {path text} {
  file mkdir [file dirname $path]
  set f [open $path w]
  puts -nonewline $f $text
  close $f
}
proc wait_on_run {args} {
  record wait_on_run {*}$args
  write_file [file join $::project_dir $::project_name.runs impl_1 $::top.bit] "bitstream of $::top"
  write_file [file join $::project_dir $::project_name.gen sources_1 bd $::bd hw_handoff $::bd.hwh] "handoff of $::bd"
}
rename exec real_exec
proc exec {args} {
  record exec [pwd] {*}$args
  real_exec {*}$args
}
"""

# Stands in for Vitis HLS: exports the IP package (component.xml) below the directory it runs in.
FAKE_VITIS_HLS = f"""#!/bin/sh
echo "fake vitis_hls $*"
[ "$*" = "-f run_hls.tcl -tclargs export" ] || exit 2
mkdir -p {MODEL}_prj/solution1/impl/ip
echo '<spirit:component/>' > {MODEL}_prj/solution1/impl/ip/component.xml
"""
FAILING_VITIS_HLS = "#!/bin/sh\necho 'ERROR: [HLS 200-70] fake failure' >&2\nexit 1\n"


@pytest.fixture(scope="module")
def stream_graph(lifted):
    return build_stream_graph(lifted(MODEL))


def build_tree(out: Path, stream_graph, board, vitis_hls: str = FAKE_VITIS_HLS) -> None:
    """OUT with the board's vivado/ files, an hls/ directory and a fake vitis_hls in OUT/../bin."""
    for path, text in vivado_files(stream_graph, board).items():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_text(text)
    (out / "hls").mkdir()
    fake = out.parent / "bin" / "vitis_hls"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(vitis_hls)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)


# A routed design that meets timing and fits every device: (WNS, WHS) and used LUT, FF, BRAM tiles, URAM, DSP.
MET = ("0.412", "0.010")
SMALL = {"LUT": 9480, "FF": 12715, "BRAM": 9.5, "URAM": 0, "DSP": 17}


def run_script(out: Path, progress: str = "100%", jobs: str | None = None, board=None, slack=MET, used=SMALL):
    """Sources OUT/vivado/build_bitstream.tcl after the stubs, from a directory of its own, the post-route
    reports showing `slack` (WNS, WHS) and `used` on the board's device: (the finished process, the trace of
    calls)."""
    elsewhere = out.parent / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    trace = elsewhere / "trace"
    script = elsewhere / "stub_vivado.tcl"
    timing, utilization = elsewhere / "timing.rpt", elsewhere / "utilization.rpt"
    board = board or load_board("kv260")
    timing.write_text(timing_summary_report(*slack, part=board.part))
    utilization.write_text(utilization_report(board, used))
    script.write_text(f"set ::trace_path {{{trace}}}\nset ::impl_progress {{{progress}}}\n"
                      f"set ::timing_fixture {{{timing}}}\nset ::utilization_fixture {{{utilization}}}\n"
                      f"{RECORDER}{VIVADO_STUBS}{VIVADO_REPORT_STUBS}"
                      f"source {{{out / 'vivado' / 'build_bitstream.tcl'}}}\n")
    # the stub HLS tool and the system's own directories only: an installed vitis-run or vitis_hls is not run
    env = {**os.environ, "PATH": os.pathsep.join([str(out.parent / "bin"), "/usr/bin", "/bin"])}
    env.pop("MING_VIVADO_JOBS", None)
    if jobs is not None:
        env["MING_VIVADO_JOBS"] = jobs
    return run_tcl(script, elsewhere, env), read_trace(trace)


@pytest.fixture(scope="module", params=ZYNQ_BOARDS, ids=lambda b: b.name)
def built(request, stream_graph, tmp_path_factory):
    """A fresh OUT for one Zynq board, the script run once: (board, OUT, trace)."""
    board = request.param
    out = tmp_path_factory.mktemp(board.name) / "out"
    build_tree(out, stream_graph, board)
    run, trace = run_script(out, board=board)
    assert run.returncode == 0, run.stderr
    return board, out, trace


def calls_of(trace, command: str) -> list[list[str]]:
    return [call[1:] for call in trace if call[0] == command]


def properties_of(trace, cell: str) -> dict[str, str]:
    """The CONFIG properties `set_property -dict` gives `cell`, in one dict."""
    values = {}
    for args in calls_of(trace, "set_property"):
        if args[0] == "-dict" and args[2] == f"cell:{cell}":
            words = args[1].split()
            values.update(zip(words[::2], words[1::2]))
    return values


def cells(trace) -> dict[str, str]:
    """name -> VLNV of every block design cell."""
    created = calls_of(trace, "create_bd_cell")
    assert all(args[:3] == ["-type", "ip", "-vlnv"] for args in created)
    return {args[4]: args[3] for args in created}


def nets(trace) -> list[list[str]]:
    """Every connect_bd_net as its list of pins (cell/pin)."""
    result = []
    for args in calls_of(trace, "connect_bd_net"):
        assert all(a.startswith("pin:") for a in args), args
        result.append([a.removeprefix("pin:") for a in args])
    return result


def interface_links(trace) -> set[frozenset[str]]:
    links = set()
    for args in calls_of(trace, "connect_bd_intf_net"):
        assert len(args) == 2 and all(a.startswith("intf_pin:") for a in args), args
        links.add(frozenset(a.removeprefix("intf_pin:") for a in args))
    return links


def test_the_script_runs_the_whole_flow_in_order(built):
    board, out, trace = built
    order = [call[0] for call in trace]
    first, last = order.index, lambda command: len(order) - 1 - order[::-1].index(command)
    assert order[:3] == ["exec", "create_project", "set_property"] and trace[2][1] == "board_part"
    assert (first("update_ip_catalog") < first("create_bd_design") < first("create_bd_cell")
            < first("apply_bd_automation"))
    assert last("create_bd_cell") < first("connect_bd_intf_net") and last("create_bd_cell") < first("connect_bd_net")
    assert max(last("connect_bd_intf_net"), last("connect_bd_net")) < first("assign_bd_address")
    assert order[first("assign_bd_address"):] == [
        "assign_bd_address", "validate_bd_design", "save_bd_design", "make_wrapper", "add_files", "set_property",
        "update_compile_order", "launch_runs", "wait_on_run", "open_run", "report_timing_summary",
        "report_utilization", "report_utilization"]


def test_the_project_targets_the_board(built):
    board, out, trace = built
    project_dir = out / "vivado" / f"{MODEL}_vivado"
    assert calls_of(trace, "create_project") == [["-force", f"{MODEL}_vivado", str(project_dir), "-part", board.part]]
    project_properties = [args[:2] for args in calls_of(trace, "set_property") if args[-1] == "project"]
    expected = [["board_part", board.zynq.board_part]]
    if board.zynq.board_connections:
        expected.append(["board_connections", board.zynq.board_connections])
    expected.append(["ip_repo_paths", str(out / IP_DIR)])
    assert project_properties == expected
    if board.name == "kv260":
        assert expected[1] == ["board_connections",
                               "som240_1_connector xilinx.com:kv260_carrier:som240_1_connector:1.3"]


def test_the_accelerator_is_the_exported_hls_ip(built):
    board, out, trace = built
    assert calls_of(trace, "exec") == [[str(out / "hls"), "vitis_hls", "-f", "run_hls.tcl", "-tclargs", "export",
                                        ">@stdout", "2>@stderr"]]
    assert (out / IP_DIR / "component.xml").is_file()
    assert cells(trace)["accelerator"] == f"ming:hls:{MODEL}:0.1"
    assert calls_of(trace, "update_ip_catalog") == [[]]


def test_the_processing_system_takes_the_board_preset_and_the_kernel_clock(built):
    board, out, trace = built
    ps = board.zynq.processing_system
    assert cells(trace)["zynq_ps"] == ps.vlnv
    (automation,) = [args for args in calls_of(trace, "apply_bd_automation") if args[-1] == "cell:zynq_ps"]
    assert automation[:3] == ["-rule", ps.automation_rule, "-config"]
    assert 'apply_board_preset "1"' in automation[3]
    assert ('make_external "FIXED_IO, DDR"' in automation[3]) == (ps.name == "processing_system7")
    config = properties_of(trace, "zynq_ps")
    assert float(config.pop(f"CONFIG.{ps.clock_property}")) == board.clock_mhz
    assert config == {f"CONFIG.{key}": value for key, value in ps.enable}


def test_the_dma_is_simple_64_bit_with_the_widest_length_register(built):
    board, out, trace = built
    assert cells(trace)["axi_dma"] == "xilinx.com:ip:axi_dma"
    config = properties_of(trace, "axi_dma")
    expected = {"c_include_sg": "0", "c_sg_length_width": "26", "c_include_mm2s": "1", "c_include_s2mm": "1",
                "c_m_axis_mm2s_tdata_width": "64", "c_s_axis_s2mm_tdata_width": "64",
                "c_m_axi_mm2s_data_width": "64", "c_m_axi_s2mm_data_width": "64",
                "c_include_mm2s_dre": "0", "c_include_s2mm_dre": "0",
                "c_addr_width": str(board.zynq.processing_system.address_bits)}
    assert {k: config.get(f"CONFIG.{k}") for k in expected} == expected
    assert board.zynq.processing_system.address_bits == (32 if board.family == "Zynq-7000" else 64)
    for direction in ("mm2s", "s2mm"):
        assert int(config[f"CONFIG.c_{direction}_burst_size"]) in (16, 32, 64, 128, 256)


def reachable(links: set[frozenset[str]], start: str, through: dict[str, str]) -> set[str]:
    """The interface pins a transaction from `start` reaches: along the links and, inside an interconnect
    cell (name -> VLNV in `through`), from any slave port S<nn>_AXI to any master port M<nn>_AXI."""
    seen, frontier = {start}, [start]
    while frontier:
        pin = frontier.pop()
        cell, port = pin.split("/")
        nxt = {other for link in links if pin in link for other in link}
        if cell in through and port.startswith("S"):
            nxt |= {p for link in links for p in link if p.startswith(f"{cell}/M")}
        frontier += nxt - seen
        seen |= nxt
    return seen


def test_streams_run_through_the_accelerator_and_the_dma_reaches_the_ps_ports(built):
    board, out, trace = built
    ps = board.zynq.processing_system
    links = interface_links(trace)
    assert frozenset({"axi_dma/M_AXIS_MM2S", "accelerator/s_axis"}) in links
    assert frozenset({"accelerator/m_axis", "axi_dma/S_AXIS_S2MM"}) in links
    interconnects = {name: vlnv for name, vlnv in cells(trace).items()
                     if vlnv in ("xilinx.com:ip:smartconnect", "xilinx.com:ip:axi_interconnect")}
    master, slave = f"zynq_ps/{ps.master_port}", f"zynq_ps/{ps.slave_port}"
    assert "axi_dma/S_AXI_LITE" in reachable(links, master, interconnects)
    assert slave not in reachable(links, master, interconnects)
    for port in ("axi_dma/M_AXI_MM2S", "axi_dma/M_AXI_S2MM"):
        assert slave in reachable(links, port, interconnects)
        assert "axi_dma/S_AXI_LITE" not in reachable(links, port, interconnects)
    for name in interconnects:  # as many ports as connected
        config = properties_of(trace, name)
        used = {p.split("/")[1] for link in links for p in link if p.startswith(f"{name}/")}
        assert int(config["CONFIG.NUM_SI"]) == len({p for p in used if p.startswith("S")})
        assert int(config["CONFIG.NUM_MI"]) == len({p for p in used if p.startswith("M")})
    assert calls_of(trace, "assign_bd_address") == [[]]


def test_every_clock_and_reset_pin_is_driven_from_the_processing_system(built):
    board, out, trace = built
    ps = board.zynq.processing_system
    clock_pins = {"xilinx.com:ip:axi_dma": ["s_axi_lite_aclk", "m_axi_mm2s_aclk", "m_axi_s2mm_aclk"],
                  f"ming:hls:{MODEL}:0.1": ["ap_clk"], "xilinx.com:ip:smartconnect": ["aclk"],
                  "xilinx.com:ip:proc_sys_reset": ["slowest_sync_clk"],
                  ps.vlnv: [ps.master_clock_pin, ps.slave_clock_pin]}
    reset_pins = {"xilinx.com:ip:axi_dma": ["axi_resetn"], f"ming:hls:{MODEL}:0.1": ["ap_rst_n"],
                  "xilinx.com:ip:smartconnect": ["aresetn"], "xilinx.com:ip:proc_sys_reset": ["ext_reset_in"],
                  ps.vlnv: []}
    driver = {}
    for net in nets(trace):
        for pin in net[1:]:
            assert pin not in driver, f"{pin} is on two nets"
            driver[pin] = net[0]
    created = cells(trace)
    for cell, vlnv in created.items():
        for pin in clock_pins[vlnv]:
            assert driver.get(f"{cell}/{pin}") == f"zynq_ps/{ps.clock_pin}", f"{cell}/{pin}"
        for pin in reset_pins[vlnv]:
            source = driver.get(f"{cell}/{pin}", "")
            if vlnv == "xilinx.com:ip:proc_sys_reset":
                assert source == f"zynq_ps/{ps.reset_pin}"
            else:
                assert created.get(source.split("/")[0]) == "xilinx.com:ip:proc_sys_reset", f"{cell}/{pin}"
                assert source.split("/")[1] in ("peripheral_aresetn", "interconnect_aresetn")


def test_bitstream_and_handoff_are_copied_side_by_side_into_deploy(built):
    board, out, trace = built
    assert calls_of(trace, "validate_bd_design") == [[]]
    assert calls_of(trace, "make_wrapper") == [["-files", "file:system.bd", "-top"]]
    wrapper = out / "vivado" / f"{MODEL}_vivado" / f"{MODEL}_vivado.gen" / "sources_1" / "bd" / "system" / "hdl"
    assert calls_of(trace, "add_files") == [["-norecurse", str(wrapper / "system_wrapper.v")]]
    assert ["top", "system_wrapper", "fileset"] in calls_of(trace, "set_property")
    assert calls_of(trace, "launch_runs") == [["impl_1", "-to_step", "write_bitstream", "-jobs", "4"]]
    assert calls_of(trace, "wait_on_run") == [["impl_1"]]
    assert (out / "deploy" / f"{MODEL}.bit").read_text() == "bitstream of system_wrapper"
    assert (out / "deploy" / f"{MODEL}.hwh").read_text() == "handoff of system"
    assert sorted(p.name for p in (out / "deploy").iterdir()) == [f"{MODEL}.bit", f"{MODEL}.hwh"]


def test_an_exported_ip_is_not_exported_again(stream_graph, tmp_path):
    out = tmp_path / "out"
    build_tree(out, stream_graph, load_board("kv260"))
    first, trace = run_script(out)
    assert first.returncode == 0, first.stderr
    assert len(calls_of(trace, "exec")) == 1 and "fake vitis_hls" in first.stdout
    again, trace = run_script(out, jobs="7")
    assert again.returncode == 0, again.stderr
    assert calls_of(trace, "exec") == [] and "fake vitis_hls" not in again.stdout
    assert calls_of(trace, "launch_runs") == [["impl_1", "-to_step", "write_bitstream", "-jobs", "7"]]


def test_a_failed_export_stops_the_script(stream_graph, tmp_path):
    out = tmp_path / "out"
    build_tree(out, stream_graph, load_board("kv260"), vitis_hls=FAILING_VITIS_HLS)
    run, trace = run_script(out)
    assert run.returncode != 0
    assert f"did not export {out / IP_DIR / 'component.xml'}" in run.stderr
    assert "fake failure" in run.stderr
    assert [call[0] for call in trace] == ["exec"]


def test_an_unfinished_implementation_stops_the_script(stream_graph, tmp_path):
    out = tmp_path / "out"
    build_tree(out, stream_graph, load_board("pynq-z2"))
    run, trace = run_script(out, progress="42%", board=load_board("pynq-z2"))
    assert run.returncode != 0 and "implementation stopped at 42%" in run.stderr
    assert trace[-1][0] == "wait_on_run"
    assert not (out / "deploy").exists()


def test_a_clock_above_the_pl_limit_is_refused(stream_graph):
    board = load_board("kv260")
    too_fast = dataclasses.replace(board, clock_mhz=board.zynq.pl_clock_max_mhz + 50)
    with pytest.raises(MingError) as error:
        vivado_files(stream_graph, too_fast)
    message = str(error.value)
    assert "\n" not in message
    assert all(word in message for word in ("kv260", "350 MHz", "300 MHz", "--clock"))
    at_limit = dataclasses.replace(board, clock_mhz=board.zynq.pl_clock_max_mhz)
    assert "CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ {300}" in vivado_files(stream_graph, at_limit)[
        "vivado/build_bitstream.tcl"]


def test_a_board_without_a_zynq_table_is_refused(stream_graph):
    alveo = next(b for b in all_boards() if b.zynq is None)
    with pytest.raises(MingError, match=f"board {alveo.name} has no \\[zynq\\] table"):
        vivado_files(stream_graph, alveo)


def test_the_header_names_the_board_and_how_to_run(stream_graph):
    board = load_board("kv260")
    text = vivado_files(stream_graph, board)["vivado/build_bitstream.tcl"]
    header = text[: text.index("\nset ")]
    for fact in ("vivado -mode batch -source build_bitstream.tcl", board.part, board.zynq.board_part, "200 MHz",
                 "2022.2", "kv260_som and kv260_carrier", "XHub", "[Board 49-71]"):
        assert fact in header, fact
