"""The board flow of a design that streams weights from DDR (`ming_py.weights_ddr`): the Vivado block design (the
accelerator's AXI masters through SmartConnects into the HP ports the DMA leaves, its control port behind the PS's
master), the deployment package (weights_ddr.bin, accelerator.json's "weights_ddr", the README) and the PYNQ driver
(one buffer filled once, each port's pointer registers written, then ap_start with auto-restart), run here against a
fake overlay in front of the C-simulation; and the Alveo flow (each AXI master placed in the board's bank by
link.cfg, the system C-simulation reading the package's weights, the XRT driver's buffers and one run per image
against a fake pyxrt)."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

from ming_py.boards import load_board
from ming_py.build import build
from ming_py.emit.vivado import vivado_files
from ming_py.contract.ming_errors import DeployError
from ming_py.errors import MingError
from ming_py.options import BuildOptions
from ming_py.runtime.ming_backends import AP_START, AUTO_RESTART, CONTROL_OFFSET, pointer_registers, pointer_writes
from ming_py.runtime.ming_driver import Accelerator
from ming_py.weights_ddr import weight_ports
from test_deploy import FAKE_PYNQ, _deploy_copy, _images, _reference
from test_vivado_project import FAKE_VITIS_HLS, calls_of, cells, interface_links, properties_of, reachable, run_script

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "tiny_cnn.onnx"
# four streamed processes (tests/test_ddr_weights.py): four ports, three of them at an offset
DDR_PINS = {"conv1.weights": "ddr", "conv1.unroll.oc": 8, "conv2.weights": "ddr", "conv3.weights": "ddr",
            "conv3.unroll.oc": 2, "fc.weights": "ddr", "fc.unroll.n": 2}
PHYSICAL = 0x1_2340_0000  # above 4 GB, as PS DDR on a Zynq UltraScale+ may be: both pointer halves matter

# The fake overlay's accelerator: its register map as PYNQ reads it from the .hwh (Vitis HLS's s_axilite map:
# control at 0x00, each 64-bit pointer as <port>_1 and <port>_2, a reserved word after each), and every write.
FAKE_ACCELERATOR = '''
plain_allocate = allocate

class Accelerator:
    def __init__(self): self.writes = []
    def write(self, offset, value): self.writes.append((offset, value))

def hls_registers(ports):
    registers = {"CTRL": {"address_offset": 0, "size": 32}}
    for index, port in enumerate(ports):
        registers[f"{port}_1"] = {"address_offset": 0x10 + 12 * index, "size": 32}
        registers[f"{port}_2"] = {"address_offset": 0x14 + 12 * index, "size": 32}
    return registers

class StreamingOverlay(Overlay):
    PHYSICAL = 0
    allocated = []
    def __init__(self, bitfile):
        super().__init__(bitfile)
        meta = json.loads((pathlib.Path(bitfile).parent / "accelerator.json").read_text())
        self.accelerator = Accelerator()
        ports = [array["port"] for array in meta["weights_ddr"]["arrays"]]
        self.ip_dict = {"accelerator": {"registers": hls_registers(ports)}}

def streaming_allocate(shape, dtype):
    buffer = plain_allocate(shape, dtype)
    buffer.physical_address = StreamingOverlay.PHYSICAL
    StreamingOverlay.allocated.append(buffer)
    return buffer
'''


@pytest.fixture(scope="module")
def ddr_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddr_deploy") / "out"
    design = build(str(EXAMPLE), out, BuildOptions(settings=dict(DDR_PINS)))
    return out, design.graph, design.stream_graph


def _streamed(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())["totals"]["weights_ddr"]


# ---- the deployment package ------------------------------------------------------------------------------------

def test_the_package_holds_the_weights_and_says_where_each_port_reads(ddr_out):
    out, graph, _ = ddr_out
    deploy = out / "deploy"
    assert (deploy / "weights_ddr.bin").read_bytes() == (out / "hls" / "weights_ddr.bin").read_bytes()
    streamed, meta = _streamed(out), json.loads((deploy / "accelerator.json").read_text())["weights_ddr"]
    assert {key: meta[key] for key in ("file", "bytes", "sha256", "bytes_per_image")} == \
        {key: streamed[key] for key in ("file", "bytes", "sha256", "bytes_per_image")}
    assert meta["accelerator"] == "accelerator"
    assert [(a["process"], a["port"], a["bundle"], a["offset_bytes"]) for a in meta["arrays"]] == \
        [(a["process"], a["port"], f"gmem_{a['port']}", a["offset_bytes"]) for a in streamed["arrays"]]
    assert len({a["offset_bytes"] for a in meta["arrays"]}) == 4


def test_the_readme_says_the_design_streams_weights_and_how_many_bytes_per_image(ddr_out):
    out, _, _ = ddr_out
    readme = (out / "deploy" / "README.md").read_text()
    per_image = _streamed(out)["bytes_per_image"]
    assert f"The design streams weights from DDR: every image reads {per_image:,} bytes of `weights_ddr.bin`" in readme
    assert "auto-restart" in readme and "| `weights_ddr.bin` |" in readme


def test_the_csim_backend_gives_the_simulation_the_weights_of_the_package(ddr_out, tmp_path):
    out, graph, _ = ddr_out
    deploy = _deploy_copy(out, tmp_path / "deploy")
    x = _images(graph, 3, seed=5)
    (y,) = Accelerator(deploy, "csim").run(x).values()
    assert np.array_equal(y, _reference(graph, x))


def test_a_damaged_weights_file_is_refused_in_one_line(ddr_out, tmp_path):
    out, _, _ = ddr_out
    deploy = _deploy_copy(out, tmp_path / "deploy")
    (deploy / "weights_ddr.bin").write_bytes(b"\0" * 16)
    with pytest.raises(DeployError, match=r"weights_ddr.bin is not this build's weights"):
        Accelerator(deploy, "csim")


def test_accelerator_json_with_a_part_past_the_file_is_refused(ddr_out, tmp_path):
    out, _, _ = ddr_out
    meta = json.loads((out / "deploy" / "accelerator.json").read_text())
    meta["weights_ddr"]["arrays"][-1]["offset_bytes"] = meta["weights_ddr"]["bytes"]
    deploy = _deploy_copy(out, tmp_path / "deploy", weights_ddr=meta["weights_ddr"])
    with pytest.raises(DeployError, match=r"'weights_ddr.arrays\[3\]' ends at byte .* past the"):
        Accelerator(deploy, "csim")


# ---- the PYNQ driver -------------------------------------------------------------------------------------------

@pytest.mark.unit
def test_a_64_bit_pointer_is_written_low_half_then_high_half_at_the_buffer_plus_its_offset():
    registers = {"CTRL": {"address_offset": 0}, "a_1": {"address_offset": 0x10}, "a_2": {"address_offset": 0x14},
                 "b_1": {"address_offset": 0x1C}, "b_2": {"address_offset": 0x20}}
    streamed = {"arrays": [{"port": "a", "offset_bytes": 0}, {"port": "b", "offset_bytes": 0x300}]}
    assert pointer_writes(registers, streamed, 0x1_8000_0000) == [
        (0x10, 0x8000_0000), (0x14, 0x1), (0x1C, 0x8000_0300), (0x20, 0x1)]
    assert pointer_registers({"a": {"address_offset": 0x10}}, "a") == (0x10, None)
    with pytest.raises(DeployError, match="above the 32-bit pointer a"):
        pointer_writes({"a": {"address_offset": 0x10}}, {"arrays": [{"port": "a", "offset_bytes": 0}]}, 1 << 32)
    with pytest.raises(DeployError, match="no register of the weights pointer c .*CTRL, a_1"):
        pointer_registers(registers, "c")


@pytest.fixture
def fake_streaming_pynq(ddr_out, tmp_path, monkeypatch):
    """The deploy dir of the DDR build with a .bit/.hwh pair, and a fake pynq whose overlay's accelerator records
    its register writes and whose buffers lie at PHYSICAL."""
    out, graph, _ = ddr_out
    deploy = _deploy_copy(out, tmp_path / "deploy")
    (deploy / "tiny_cnn.bit").write_bytes(b"")
    (deploy / "tiny_cnn.hwh").write_text("")
    fake = FAKE_PYNQ + FAKE_ACCELERATOR + "\nOverlay, allocate = StreamingOverlay, streaming_allocate\n"
    (tmp_path / "pynq.py").write_text(fake)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pynq", raising=False)
    # the fake DMA runs the testbench, which reads the weights from this file as the hardware reads the buffer
    monkeypatch.setenv("MING_WEIGHTS_DDR_FILE", str(deploy / "weights_ddr.bin"))
    import pynq

    monkeypatch.setattr(pynq.StreamingOverlay, "PHYSICAL", PHYSICAL)
    monkeypatch.setattr(pynq.StreamingOverlay, "allocated", [])
    return deploy, graph, pynq


def test_the_pynq_driver_fills_one_buffer_writes_every_pointer_then_starts_with_auto_restart(fake_streaming_pynq):
    deploy, graph, pynq = fake_streaming_pynq
    accelerator = Accelerator(deploy, "pynq")
    weights, *image_buffers = pynq.StreamingOverlay.allocated
    assert bytes(weights) == (deploy / "weights_ddr.bin").read_bytes() and not image_buffers
    arrays = json.loads((deploy / "accelerator.json").read_text())["weights_ddr"]["arrays"]
    pointers = []
    for index, array in enumerate(arrays):
        address = PHYSICAL + array["offset_bytes"]
        pointers += [(0x10 + 12 * index, address & 0xFFFF_FFFF), (0x14 + 12 * index, address >> 32)]
    writes = accelerator.backend.overlay.accelerator.writes
    assert writes == pointers + [(CONTROL_OFFSET, AP_START | AUTO_RESTART)]  # offsets before the start
    assert AP_START | AUTO_RESTART == 0x81
    x = _images(graph, 4, seed=7)
    assert np.array_equal(accelerator.run(x, batch=2)[graph.outputs[0].name], _reference(graph, x))
    assert len(writes) == 2 * len(arrays) + 1  # started once, at load: it restarts itself image after image


# ---- the Vivado block design -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ddr_block_design(ddr_out, tmp_path_factory):
    """The DDR design's block design for the KV260, the script run through the Vivado stubs: (board, trace, the
    report's weights_ddr)."""
    board = load_board("kv260")
    source, _, stream_graph = ddr_out
    out = tmp_path_factory.mktemp(f"ddr_vivado_{board.name}") / "out"
    for path, text in vivado_files(stream_graph, board, False, _streamed(source)).items():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_text(text)
    (out / "hls").mkdir()
    fake = out.parent / "bin" / "vitis_hls"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(FAKE_VITIS_HLS)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    run, trace = run_script(out, board=board)
    assert run.returncode == 0, run.stderr
    return board, trace, _streamed(source)


# The high-performance ports the weights get (HP0 is the DMA's): (port, its clock pin, the property that opens it)
WEIGHT_HP = {"kv260": [("S_AXI_HP1_FPD", "saxihp1_fpd_aclk", "PSU__USE__S_AXI_GP3"),
                       ("S_AXI_HP2_FPD", "saxihp2_fpd_aclk", "PSU__USE__S_AXI_GP4"),
                       ("S_AXI_HP3_FPD", "saxihp3_fpd_aclk", "PSU__USE__S_AXI_GP5")]}


def test_every_weight_master_reaches_one_hp_port_and_the_ports_share_the_words(ddr_block_design):
    """Each streamed port reaches one weight HP port and no other; the busiest port carries at most 4/3 of the
    least a busiest port can carry (the array read most, or an even share of the words an image)."""
    board, trace, streamed = ddr_block_design
    ps = board.zynq.processing_system
    links = interface_links(trace)
    interconnects = {name: vlnv for name, vlnv in cells(trace).items() if vlnv == "xilinx.com:ip:smartconnect"}
    ports = WEIGHT_HP[board.name]
    assert len(streamed["arrays"]) == 4 and weight_ports(board).count == len(ports)
    carried = dict.fromkeys((f"zynq_ps/{port}" for port, _, _ in ports), 0)
    for array in streamed["arrays"]:
        reached = {pin for pin in reachable(links, f"accelerator/m_axi_gmem_{array['port']}", interconnects)
                   if pin.startswith("zynq_ps/")}
        assert len(reached) == 1 and reached <= carried.keys(), array["port"]
        carried[reached.pop()] += array["words_per_image"]
    words = [array["words_per_image"] for array in streamed["arrays"]]
    assert all(carried.values()) and max(carried.values()) <= 4 / 3 * max(max(words), sum(words) / len(ports))
    weight_ports_reached = {f"zynq_ps/{port}" for port, _, _ in ports}
    for port in ("axi_dma/M_AXI_MM2S", "axi_dma/M_AXI_S2MM"):  # the DMA keeps HP0 to itself
        assert not weight_ports_reached & reachable(links, port, interconnects)
    control = reachable(links, f"zynq_ps/{ps.master_port}", interconnects)
    assert {"accelerator/s_axi_control", "axi_dma/S_AXI_LITE"} <= control
    for name in interconnects:  # as many ports as connected
        config = properties_of(trace, name)
        used = {p.split("/")[1] for link in links for p in link if p.startswith(f"{name}/")}
        assert int(config["CONFIG.NUM_SI"]) == len({p for p in used if p.startswith("S")})
        assert int(config["CONFIG.NUM_MI"]) == len({p for p in used if p.startswith("M")})
    config = properties_of(trace, "zynq_ps")
    assert all(config[f"CONFIG.{enable}"] == "1" for _, _, enable in ports)
    clocked = {pin for args in calls_of(trace, "connect_bd_net") if args[0] == f"pin:zynq_ps/{ps.clock_pin}"
               for pin in args[1:]}
    assert {f"pin:zynq_ps/{clock}" for _, clock, _ in ports} <= clocked
    assert {f"pin:weights_to_hp{hp}/aclk" for hp in (1, 2, 3)} <= clocked
    assert calls_of(trace, "assign_bd_address") == [[]]  # the masters' DDR and the control port's address


def test_a_board_whose_ports_are_narrower_than_the_streamed_word_gets_no_block_design_with_weights(ddr_out):
    source, _, stream_graph = ddr_out
    with pytest.raises(MingError, match="pynq-z2's 64-bit DDR ports are narrower"):
        vivado_files(stream_graph, load_board("pynq-z2"), False, _streamed(source))


def test_two_streamed_ports_land_on_hp1_and_hp2_the_one_read_most_on_hp1(ddr_out):
    source, _, stream_graph = ddr_out
    streamed = _streamed(source)
    smaller, larger = sorted(streamed["arrays"][:2], key=lambda array: array["words_per_image"])
    assert smaller["words_per_image"] < larger["words_per_image"]
    script = vivado_files(stream_graph, load_board("kv260"), False, streamed | {"arrays": [smaller, larger]})
    first, second = larger, smaller
    nets = [line for line in next(iter(script.values())).splitlines() if line.startswith("connect_bd_intf_net")]
    net = "connect_bd_intf_net [get_bd_intf_pins {}] [get_bd_intf_pins {}]".format
    assert {net(f"accelerator/m_axi_gmem_{first['port']}", "weights_to_hp1/S00_AXI"),
            net(f"accelerator/m_axi_gmem_{second['port']}", "weights_to_hp2/S00_AXI"),
            net("weights_to_hp1/M00_AXI", "zynq_ps/S_AXI_HP1_FPD"),
            net("weights_to_hp2/M00_AXI", "zynq_ps/S_AXI_HP2_FPD")} <= set(nets)
    assert not any("weights_to_hp3" in line or "S_AXI_HP3_FPD" in line for line in nets)


# ---- the Alveo flow --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def alveo_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddr_alveo") / "out"
    design = build(str(EXAMPLE), out, BuildOptions(board="u55c", settings=dict(DDR_PINS)))
    return out, design.graph


def test_link_cfg_places_every_weight_master_in_the_boards_bank(alveo_out):
    out, _ = alveo_out
    link = (out / "vitis" / "link.cfg").read_text().splitlines()
    bank = load_board("u55c").alveo.memory
    ports = [array["port"] for array in _streamed(out)["arrays"]]
    assert [line for line in link if line.startswith("sp=tiny_cnn_top_1.")] == \
        [f"sp=tiny_cnn_top_1.m_axi_gmem_{port}:{bank}" for port in ports]
    meta = json.loads((out / "deploy" / "accelerator.json").read_text())["weights_ddr"]
    assert meta["kernel"] == "tiny_cnn_top" and [a["argument"] for a in meta["arrays"]] == [2, 3, 4, 5]


def test_the_system_csim_of_the_alveo_flow_reads_the_packages_weights(alveo_out, tmp_path):
    out, graph = alveo_out
    deploy = _deploy_copy(out, tmp_path / "deploy")
    x = _images(graph, 3, seed=9)
    (y,) = Accelerator(deploy, "csim").run(x).values()
    assert np.array_equal(y, _reference(graph, x))



def test_the_alveo_build_stops_on_a_streamed_loop_deeper_than_its_buffers_allow(alveo_out, tmp_path):
    """v++ -c's csynth of a streamed loop one stage deeper than check_csynth.tcl's allowed depth fails the
    accelerator's .xo rule and deletes the .xo."""
    from tcl_stubs import Synthesis, csynth_files
    from test_alveo_project import make_accelerator_xo
    from test_report_checks import planned_loops

    out, _ = alveo_out
    streamed = [loop for loop in planned_loops((out / "hls" / "check_csynth.tcl").read_text()) if len(loop) == 5]
    function, label, _, _, allowed = streamed[0]
    deeper = Synthesis(depth={function: str(int(allowed) + 1)})
    report = json.loads((out / "report.json").read_text())
    run = make_accelerator_xo(out / "vitis", tmp_path, csynth_files(report, deeper))
    assert run.returncode != 0
    assert (f"{function}: loop {label} at pipeline depth {int(allowed) + 1}, deeper than the {allowed} its buffers "
            "allow") in run.stderr
    assert not (tmp_path / "out" / "vitis" / "tiny_cnn_top.hw.xo").exists()

# A stand-in for pyxrt that records buffers, syncs and kernel starts (no data moves).
FAKE_PYXRT = """
events = []
class ert_cmd_state:
    ERT_CMD_STATE_COMPLETED, ERT_CMD_STATE_TIMEOUT = "completed", "timeout"
stalled = set()  # kernels whose runs never complete
class xclBOSyncDirection:
    XCL_BO_SYNC_BO_TO_DEVICE, XCL_BO_SYNC_BO_FROM_DEVICE = "to_device", "from_device"
class xclbin:
    def __init__(self, path): pass
class device:
    def __init__(self, index): pass
    def load_xclbin(self, binary): return "uuid"
class kernel:
    def __init__(self, device, uuid, name): self.name = name
    def group_id(self, index): return f"bank of {self.name} argument {index}"
class bo:
    normal = 0
    def __init__(self, device, size, flags, group):
        self.data, self.group = bytearray(size), group
    def map(self): return memoryview(self.data)
    def sync(self, direction): events.append(("sync", self.group, bytes(self.data), direction))
class run:
    def __init__(self, kernel): self.kernel, self.args = kernel, {}
    def set_arg(self, index, value): self.args[index] = value
    def start(self): events.append(("start", self.kernel.name, dict(self.args), id(self)))
    def wait(self, timeout_ms):
        events.append(("wait", self.kernel.name, id(self)))
        return ert_cmd_state.ERT_CMD_STATE_TIMEOUT if self.kernel.name in stalled else ert_cmd_state.ERT_CMD_STATE_COMPLETED
"""


def test_the_xrt_driver_fills_a_buffer_per_port_in_its_bank_and_runs_the_accelerator_once_per_image(
        alveo_out, tmp_path, monkeypatch):
    out, graph = alveo_out
    deploy, pyxrt = _fake_xrt(out, tmp_path, monkeypatch)

    accelerator = Accelerator(deploy)
    data = (deploy / "weights_ddr.bin").read_bytes()
    arrays = json.loads((deploy / "accelerator.json").read_text())["weights_ddr"]["arrays"]
    assert pyxrt.events == [("sync", f"bank of tiny_cnn_top argument {a['argument']}",
                             data[a["offset_bytes"]:a["offset_bytes"] + 16 * a["words"]], "to_device")
                            for a in arrays]
    pyxrt.events.clear()
    accelerator.run(_images(graph, 3))
    starts = [(name, sorted(args)) for kind, name, args, _ in _starts(pyxrt.events)]
    pointers = [a["argument"] for a in arrays]
    assert starts == [("s2mm", [1, 2])] + [("tiny_cnn_top", pointers)] * 3 + [("mm2s", [0, 2])]
    buffers = [args for kind, name, args, _ in _starts(pyxrt.events) if name == "tiny_cnn_top"]
    assert all(run_args[index].group == f"bank of tiny_cnn_top argument {index}"
               for run_args in buffers for index in pointers)


def _fake_xrt(out, tmp_path, monkeypatch):
    """A deploy folder of `out` with a stand-in xclbin, and FAKE_PYXRT imported as pyxrt."""
    deploy = _deploy_copy(out, tmp_path / "deploy")
    (deploy / "tiny_cnn.xclbin").write_bytes(b"")
    (tmp_path / "pyxrt.py").write_text(FAKE_PYXRT)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pyxrt", raising=False)
    import pyxrt
    return deploy, pyxrt


def _starts(events):
    return [event for event in events if event[0] == "start"]


def test_the_xrt_driver_keeps_a_bounded_ring_of_accelerator_runs(alveo_out, tmp_path, monkeypatch):
    """A batch of more images than RUNS_IN_FLIGHT restarts each run only after it ended, in image order, with the
    input mover started once the first runs are queued."""
    out, graph = alveo_out
    deploy, pyxrt = _fake_xrt(out, tmp_path, monkeypatch)
    from ming_py.runtime import ming_backends
    monkeypatch.setattr(ming_backends, "RUNS_IN_FLIGHT", 2)

    accelerator = Accelerator(deploy)
    pyxrt.events.clear()
    accelerator.run(_images(graph, 5))
    kernels = [name for kind, name, *_ in _starts(pyxrt.events)]
    assert kernels == ["s2mm", "tiny_cnn_top", "tiny_cnn_top", "mm2s"] + ["tiny_cnn_top"] * 3
    runs = [run for kind, name, _, run in _starts(pyxrt.events) if name == "tiny_cnn_top"]
    assert len(set(runs)) == 2 and runs == [runs[0], runs[1]] * 2 + [runs[0]]
    for position, event in enumerate(pyxrt.events):  # a run starts again only after it ended
        if event[0] == "start" and event[1] == "tiny_cnn_top":
            before = pyxrt.events[:position]
            assert before.count(("wait", "tiny_cnn_top", event[3])) == \
                sum(e[0] == "start" and e[-1] == event[3] for e in before)


def test_the_xrt_driver_stops_with_an_error_where_a_run_does_not_complete(alveo_out, tmp_path, monkeypatch):
    out, graph = alveo_out
    deploy, pyxrt = _fake_xrt(out, tmp_path, monkeypatch)
    accelerator = Accelerator(deploy)
    pyxrt.stalled.add("tiny_cnn_top")
    with pytest.raises(DeployError, match="the run of the accelerator did not complete within"):
        accelerator.run(_images(graph, 2))
