"""report.json states each process's pipelined loop (its label in the emitted C++, trip count and planned II),
and the vendor scripts refuse a build that misses what the report claims: run_hls.tcl reads the csynth reports
after synthesis and stops on a loop that missed its II or trip count, a missing loop or a clock period over the
target; build_bitstream.tcl stops on negative post-route WNS or WHS or a resource over 100 % of the device and
then copies nothing to deploy/. The vendor tools are tclsh stubs that hand back reports in the vendors' layout,
built from a real `ming build` of the test networks."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

import architectures
import tflite_models
import zoo
from emit_helpers import random_schedule
from ming_py.boards import load_board
from ming_py.build import design
from ming_py.emit.environment import TEMPLATES
from ming_py.emit.hls import PLANNED_II
from ming_py.kinds import kind_of, registered
from ming_py.line_buffers import build_stream_graph
from ming_py.output import write_tree
from ming_py.pipeline import lift
from tcl_stubs import Synthesis, csynth_files, run_hls_script, write_csynth
from test_bilinear_resize import between_convs
from test_vivado_project import MET, SMALL, build_tree, calls_of, run_script

MODEL = "tiny_cnn"
PROCESS_TEMPLATES = sorted(path.name.removesuffix(".cpp.j2") for path in (TEMPLATES / "process").glob("*.cpp.j2"))


def _pad_before_add(g):
    a = g.pad(g.relu(g.conv("x", "conv1", 4, pads=0), "relu"), "pad", (1, 2, 1, 0))  # 6x6 -> 8x8
    return g.add(a, g.conv("x", "conv1x1", 4, kernel=1), "add")


@pytest.fixture(scope="module")
def networks(lifted, tmp_path_factory):
    """Lifted test networks that use every process template between them: name -> Graph."""
    folder = tmp_path_factory.mktemp("report_checks")
    graphs = {name: lifted(name) for name in ("tiny_cnn", "conv_gap", "add_identity", "concat_branches")}
    compared = folder / "compared_branches.tflite"  # TFLite's MAXIMUM and MINIMUM
    compared.write_bytes(tflite_models.compared_branches())
    graphs["compared_branches"] = lift(compared)
    graphs["transpose_conv"] = lift(Path(__file__).parent / "data" / "keras" / "transpose_conv.tflite")  # depth to space
    graphs["bilinear_resize"] = between_convs(3, 3, 4, 4, 2, 2)  # built in the IR (test_bilinear_resize.py)
    for name in ("mobilenet_v3_small", "shufflenet_v2", "yolo_tiny"):
        graphs[name] = lift(architectures.quantized(name, "qdq_int8", folder))
    pad = zoo._Graph("pad_before_add", (1, 4, 8, 8))
    graphs["pad_before_add"] = lift(zoo.quantize_float_model(pad.finish(_pad_before_add(pad)),
                                                             folder / "pad_before_add.onnx", (1, 4, 8, 8)))
    return graphs


def function_body(cpp: str, name: str) -> str:
    """The body of the C++ function `static void name(...)` in `cpp`, up to its closing brace."""
    start = cpp.index(f"static void {name}(")
    depth, i = 0, cpp.index("{", start)
    for j in range(i, len(cpp)):
        depth += {"{": 1, "}": -1}.get(cpp[j], 0)
        if depth == 0:
            return cpp[i:j + 1]
    raise AssertionError(f"{name}: no closing brace")


def pipelined_loops(body: str) -> list[tuple[str, str, str]]:
    """(label, loop bound, II) of every labelled loop `for (... it = 0; it < BOUND; it++)` whose first statement
    is a PIPELINE pragma."""
    return re.findall(r"^[ \t]*(\w+):[ \t]*\n[ \t]*for \([^;]*\bit = 0; it < (\w+); it\+\+\) \{[ \t]*\n"
                      r"[ \t]*HLS_PRAGMA\(PIPELINE II=(\d+)\)", body, flags=re.M)


def test_every_template_labels_one_pipelined_loop_as_the_report_names_it():
    labels = {template: kind.pipeline_label for kind in registered().values() for template in kind.templates}
    assert sorted(labels) == PROCESS_TEMPLATES  # every template serves a kind, and every kind has one
    for kind in registered().values():
        for template in kind.templates:  # kinds sharing a template share its label
            assert labels[template] == kind.pipeline_label, kind.name
    for template in PROCESS_TEMPLATES:
        text = (TEMPLATES / "process" / f"{template}.cpp.j2").read_text()
        assert text.count("HLS_PRAGMA(PIPELINE") == 1, template
        assert pipelined_loops(text) == [(labels[template], "ITERATIONS", str(PLANNED_II))], template
        assert "ITERATIONS = {{ p.trip_count }};" in text, template


@pytest.mark.parametrize("scheduled", [False, True], ids=["default", "random_schedule"])
def test_each_report_label_is_the_pipelined_loop_of_its_process_function(networks, scheduled):
    """For every process of the test networks, report.json's pipeline names a loop label inside the process's
    function in the emitted .cpp, the loop pipelined at the planned II, and the trip count is its ITERATIONS."""
    seen = set()
    for name, graph in networks.items():
        schedule = random_schedule(build_stream_graph(graph), random.Random(name)) if scheduled else None
        result = design(graph, load_board("kv260"), schedule)
        report = json.loads(result.files["report.json"])
        cpp = result.files[f"hls/{report['cpp_name']}.cpp"]
        for node, process in zip(report["nodes"], result.stream_graph.processes):
            body = function_body(cpp, node["cpp_name"])
            pipeline = node["pipeline"]
            assert pipelined_loops(body) == [(pipeline["loop"], "ITERATIONS", str(pipeline["ii"]))], node["name"]
            assert re.search(rf"\bITERATIONS = {pipeline['trip_count']};", body), node["name"]
            assert pipeline["ii"] == PLANNED_II and pipeline["trip_count"] > 0
            seen.add(kind_of(process.kind).template)
    # the networks exercise every template of weights on chip (tests/test_ddr_weights.py those streamed from DDR)
    assert sorted(seen) == sorted({kind.template for kind in registered().values()})


def planned_loops(check_csynth: str) -> list[tuple[str, ...]]:
    """check_csynth.tcl's planned loops: (function, label, II, trip count), and the allowed pipeline depth where
    the process's weights stream from DDR."""
    block = re.search(r"^set planned_loops \{\n(.*?)^\}$", check_csynth, flags=re.M | re.S).group(1)
    lines = [re.fullmatch(r"  \{(\w+) (\w+) (\d+) (\d+)(?: (\d+))?\}", line) for line in block.splitlines()]
    return [tuple(group for group in line.groups() if group is not None) for line in lines]


@pytest.fixture(scope="module")
def built(lifted, tmp_path_factory):
    """tiny_cnn built for the KV260 and written out: (OUT, report.json)."""
    out = tmp_path_factory.mktemp("tiny") / "out"
    result = design(lifted(MODEL), load_board("kv260"))
    write_tree(result.files, out)
    return out, json.loads((out / "report.json").read_text())


def test_check_csynth_plans_the_loops_report_json_states_and_output_is_deterministic(built, lifted):
    out, report = built
    check_csynth = (out / "hls" / "check_csynth.tcl").read_text()
    assert planned_loops(check_csynth) == [(n["cpp_name"], n["pipeline"]["loop"], str(n["pipeline"]["ii"]),
                                            str(n["pipeline"]["trip_count"])) for n in report["nodes"]]
    assert "source check_csynth.tcl" in (out / "hls" / "run_hls.tcl").read_text()
    again = design(lifted(MODEL), load_board("kv260")).files
    assert again["hls/check_csynth.tcl"] == check_csynth
    assert again["report.json"] == (out / "report.json").read_text()
    assert list(report["nodes"][0]["pipeline"]) == ["loop", "trip_count", "ii"]


def synthesize(out: Path, tmp_path: Path, synthesis: Synthesis | None = None, reflow: bool = False, step="export"):
    """run_hls.tcl with `-tclargs step`, csynth_design handing back reports of `synthesis`: (process, calls)."""
    report = json.loads((out / "report.json").read_text())
    reports = write_csynth(tmp_path / "csynth", csynth_files(report, synthesis, reflow))
    return run_hls_script(out / "hls", step, reports=reports)


def error_lines(run) -> list[str]:
    """The lines of the Tcl error message (tclsh's stack trace after it left off)."""
    return run.stderr.split("\n    while executing")[0].splitlines()


@pytest.mark.parametrize("reflow", [False, True], ids=["vitis_layout", "reflowed"])
def test_synthesis_as_planned_goes_on_to_export(built, tmp_path, reflow):
    out, report = built
    run, calls = synthesize(out, tmp_path, reflow=reflow)
    assert run.returncode == 0, run.stderr
    print(run.stdout)
    assert run.stdout.splitlines() == [f"C synthesis as planned: {len(report['nodes'])} process loops at their II "
                                       f"and trip counts, estimated clock period 3.600 ns (target 5.00 ns)"]
    assert [c[0] for c in calls][-2:] == ["csynth_design", "export_design"]


@pytest.mark.parametrize("reflow", [False, True], ids=["vitis_layout", "reflowed"])
@pytest.mark.parametrize("index", [0, 3], ids=["outlined_loop", "loop_in_function"])
def test_a_loop_at_ii_2_stops_before_export(built, tmp_path, reflow, index):
    """A loop Vitis HLS pipelines at II 2 stops the script with the process's function and loop named, whether
    the loop is its own module (<function>_Pipeline_<label>) or stays in the function's report."""
    out, report = built
    node = report["nodes"][index]
    function, label = node["cpp_name"], node["pipeline"]["loop"]
    run, calls = synthesize(out, tmp_path, Synthesis(ii={function: "2"}), reflow)
    assert run.returncode != 0
    print(error_lines(run))
    module = f"{function}_Pipeline_{label}" if index % 2 == 0 else function
    assert error_lines(run)[1:] == [f"{function}: loop {label} at II 2, planned 1 ({module}_csynth.xml)"]
    assert "export_design" not in [c[0] for c in calls]


def test_every_missed_claim_is_one_line_per_process(built, tmp_path):
    out, report = built
    f = [n["cpp_name"] for n in report["nodes"]]
    labels = {n["cpp_name"]: n["pipeline"]["loop"] for n in report["nodes"]}
    trips = report["nodes"][1]["pipeline"]["trip_count"]
    synthesis = Synthesis(ii={f[0]: "-", f[2]: "3"}, trip_count={f[1]: str(trips - 1), f[2]: "7"},
                          clock_ns={f[2]: 5.412}, missing_loop=(f[3],), missing_module=(f[4],))
    run, calls = synthesize(out, tmp_path, synthesis)
    assert run.returncode != 0
    lines = error_lines(run)
    assert lines[0] == f"C synthesis misses what report.json plans (reports in {MODEL}_prj/solution1/syn/report):"
    assert lines[1:] == [
        f"{f[0]}: loop {labels[f[0]]} is not pipelined (PipelineII '-' in {f[0]}_Pipeline_{labels[f[0]]}_csynth.xml)",
        f"{f[1]}: loop {labels[f[1]]} runs '{trips - 1}' iterations, planned {trips} ({f[1]}_csynth.xml)",
        f"{f[2]}: loop {labels[f[2]]} at II 3, planned 1 ({f[2]}_Pipeline_{labels[f[2]]}_csynth.xml); loop "
        f"{labels[f[2]]} runs '7' iterations, planned {report['nodes'][2]['pipeline']['trip_count']} "
        f"({f[2]}_Pipeline_{labels[f[2]]}_csynth.xml); estimated clock period 5.412 ns exceeds the target 5.00 ns",
        f"{f[3]}: no loop {labels[f[3]]} in {f[3]}_csynth.xml or {f[3]}_Pipeline_*_csynth.xml",
        f"{f[4]}: no report {f[4]}_csynth.xml",
        f"{report['top']}: estimated clock period 5.412 ns exceeds the target 5.00 ns",
    ]
    assert len(report["nodes"]) > 5 and "export_design" not in [c[0] for c in calls]


def test_a_design_over_the_clock_target_stops(built, tmp_path):
    out, report = built
    run, _ = synthesize(out, tmp_path, Synthesis(top_clock_ns=5.05), step="synth")
    assert run.returncode != 0
    assert error_lines(run)[1:] == [f"{report['top']}: estimated clock period 5.050 ns exceeds the target 5.00 ns"]


def test_no_synthesis_report_stops(built):
    out, _ = built
    run, calls = run_hls_script(out / "hls", "synth")
    assert run.returncode != 0
    assert error_lines(run) == [f"C synthesis wrote no {MODEL}_prj/solution1/syn/report/csynth.xml"]


def test_csim_alone_reads_no_synthesis_report(built):
    out, _ = built
    run, calls = run_hls_script(out / "hls", "csim")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "" and "csynth_design" not in [c[0] for c in calls]


# --- build_bitstream.tcl -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def stream_graph(lifted):
    return build_stream_graph(lifted(MODEL))


def implement(stream_graph, tmp_path: Path, board_name: str = "kv260", slack=MET, used=SMALL):
    out = tmp_path / "out"
    board = load_board(board_name)
    build_tree(out, stream_graph, board)
    run, trace = run_script(out, board=board, slack=slack, used=used)
    return out, run, trace


@pytest.mark.parametrize("board_name", ["kv260", "pynq-z2"])
def test_a_routed_design_that_meets_timing_and_fits_is_deployed(stream_graph, tmp_path, board_name):
    out, run, trace = implement(stream_graph, tmp_path, board_name)
    assert run.returncode == 0, run.stderr
    project = out / "vivado" / f"{MODEL}_vivado"
    assert calls_of(trace, "open_run") == [["impl_1"]]
    assert calls_of(trace, "report_timing_summary") == [["-file", str(project / "timing_summary_routed.rpt")]]
    assert calls_of(trace, "report_utilization") == [["-file", str(project / "utilization_routed.rpt")],
                                                      ["-hierarchical", "-hierarchical_depth", "7", "-file",
                                                       str(project / "utilization_hierarchical_routed.rpt")]]
    board = load_board(board_name)
    shares = [f"LUT {100 * SMALL['LUT'] / board.lut:.1f} %", f"FF {100 * SMALL['FF'] / board.ff:.1f} %",
              f"BRAM {100 * SMALL['BRAM'] / (board.bram18k / 2):.1f} %"]
    shares += ["URAM 0.0 %"] if board.uram else []  # a 7-series report has no URAM row
    shares += [f"DSP {100 * SMALL['DSP'] / board.dsp:.1f} %"]
    summary = f"Post-route: WNS {MET[0]} ns, WHS {MET[1]} ns, {', '.join(shares)}"
    print(summary)
    assert summary in run.stdout.splitlines()
    assert sorted(p.name for p in (out / "deploy").iterdir()) == [f"{MODEL}.bit", f"{MODEL}.hwh"]


@pytest.mark.parametrize("slack,lines", [
    (("-0.187", "0.010"), ["WNS -0.187 ns: the routed design misses setup timing"]),
    (("0.412", "-0.021"), ["WHS -0.021 ns: the routed design misses hold timing"]),
    (("-0.187", "-0.021"), ["WNS -0.187 ns: the routed design misses setup timing",
                            "WHS -0.021 ns: the routed design misses hold timing"]),
    (("NA", "0.010"), ["WNS NA: no setup slack in {timing}"]),
], ids=["setup", "hold", "both", "untimed"])
def test_negative_slack_stops_and_deploys_nothing(stream_graph, tmp_path, slack, lines):
    out, run, trace = implement(stream_graph, tmp_path, slack=slack)
    assert run.returncode != 0
    project = out / "vivado" / f"{MODEL}_vivado"
    timing, utilization = project / "timing_summary_routed.rpt", project / "utilization_routed.rpt"
    message = error_lines(run)
    print(message)
    assert message[0] == (f"the routed design is not deployable, nothing copied to deploy/ (see {timing} and "
                          f"{utilization}):")
    assert message[1:] == [line.format(timing=timing) for line in lines]
    assert not (out / "deploy").exists()
    assert trace[-1][0] == "report_utilization"


@pytest.mark.parametrize("resource", ["LUT", "FF", "BRAM", "URAM", "DSP"])
def test_a_resource_over_the_device_stops_and_deploys_nothing(stream_graph, tmp_path, resource):
    board = load_board("kv260")
    available = {"LUT": board.lut, "FF": board.ff, "BRAM": board.bram18k / 2, "URAM": board.uram, "DSP": board.dsp}
    used = SMALL | {resource: available[resource] + 1}
    out, run, _ = implement(stream_graph, tmp_path, used=used)
    assert run.returncode != 0
    over = f"{resource} {used[resource]:g} of {available[resource]:g}: over 100 % of the device"
    assert error_lines(run)[1:] == [over]
    assert not (out / "deploy").exists()
    at_limit = SMALL | {resource: available[resource]}
    out, run, _ = implement(stream_graph, tmp_path / "at_limit", used=at_limit)
    assert run.returncode == 0, run.stderr  # 100 % fits
    assert f"{resource} 100.0 %" in run.stdout
