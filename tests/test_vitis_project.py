"""The Vitis HLS project of a build checks itself: the testbench compares every output value with
`hls/expected.bin`, run_hls.tcl feeds it the sample and calls the Vitis commands as documented (run here
through tclsh with stub procedures), and Vitis compiles the real headers, never ming's stand-ins."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

import zoo
from ming_py import reference
from ming_py.boards import load_board
from ming_py.build import design
from ming_py.csim import from_stream_order, to_stream_order
from ming_py.output import write_tree
from tcl_stubs import csynth_files, run_hls_script, write_csynth


@pytest.fixture(scope="module")
def project(lifted, tmp_path_factory):
    """tiny_cnn built for the KV260: (OUT, its design)."""
    out = tmp_path_factory.mktemp("vitis") / "out"
    result = design(lifted("tiny_cnn"), load_board("kv260"))
    write_tree(result.files, out)
    return out, result


@pytest.fixture(scope="module")
def testbench(project, tmp_path_factory):
    out, _ = project
    binary = tmp_path_factory.mktemp("tb") / "tiny_cnn_tb"
    hls = out / "hls"
    subprocess.run(["g++", "-std=c++17", "-O2", "-DMING_CSIM", "-I", str(hls), str(hls / "tiny_cnn.cpp"),
                    str(hls / "tiny_cnn_tb.cpp"), "-o", str(binary)], check=True)
    return binary


def test_expected_output_is_the_reference_for_the_sample_input(project):
    """expected.bin is `ming reference` (the integer golden model) for input.bin, both in stream order."""
    out, result = project
    graph, stream_graph = result.graph, result.stream_graph
    channel = lambda name: stream_graph.channels[name]
    shape = lambda c: [c.channels, c.height, c.width]
    inp, outp = channel(stream_graph.input.channel), channel(stream_graph.outputs[0].channel)
    x = np.fromfile(out / "hls" / "input.bin", dtype=np.int8).astype(np.int64)
    assert x.size == inp.values and len(set(x.tolist())) > 100  # spread over the int8 range
    q = from_stream_order(x, shape(inp)).reshape(graph.shape_of(graph.inputs[0].tensor))
    y = reference.run_integer(graph, {graph.inputs[0].tensor: q})[graph.outputs[0].tensor]
    expected = np.fromfile(out / "hls" / "expected.bin", dtype=np.int8)
    assert np.array_equal(expected, to_stream_order(y, shape(outp)).astype(np.int8))


def test_testbench_passes_on_the_expected_output(project, testbench, tmp_path):
    hls = project[0] / "hls"
    run = subprocess.run([str(testbench), str(hls / "input.bin"), str(tmp_path / "y.bin"), str(hls / "expected.bin")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("PASS: all 10 output values equal")
    assert (tmp_path / "y.bin").read_bytes() == (hls / "expected.bin").read_bytes()


@pytest.mark.parametrize("index", [0, 9])
def test_testbench_fails_on_any_differing_value(project, testbench, tmp_path, index):
    hls = project[0] / "hls"
    wrong = bytearray((hls / "expected.bin").read_bytes())
    wrong[index] ^= 0x01
    (tmp_path / "wrong.bin").write_bytes(bytes(wrong))
    run = subprocess.run([str(testbench), str(hls / "input.bin"), str(tmp_path / "y.bin"), str(tmp_path / "wrong.bin")],
                         capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.startswith(f"FAIL: 1 of 10 output values differ from {tmp_path / 'wrong.bin'} (first: value {index} ")


def test_testbench_refuses_a_short_expected_file(project, testbench, tmp_path):
    hls = project[0] / "hls"
    (tmp_path / "short.bin").write_bytes((hls / "expected.bin").read_bytes()[:-1])
    run = subprocess.run([str(testbench), str(hls / "input.bin"), str(tmp_path / "y.bin"), str(tmp_path / "short.bin")],
                         capture_output=True, text=True)
    assert run.returncode == 1 and "cannot read 10 values" in run.stderr


def vitis_calls(hls: Path, *tclargs: str) -> list[list[str]]:
    """The Vitis commands run_hls.tcl calls with `-tclargs tclargs`, each as its list of words; synthesis
    reports every loop as report.json plans it."""
    reports = write_csynth(Path(tempfile.mkdtemp()) / "csynth",
                           csynth_files(json.loads((hls.parent / "report.json").read_text())))
    run, calls = run_hls_script(hls, *tclargs, reports=reports)
    if run.returncode != 0:
        raise RuntimeError(run.stderr.strip())
    return calls


def test_tcl_sets_up_the_project_from_the_build(project):
    out, result = project
    hls, board = out / "hls", result.board
    calls = vitis_calls(hls)
    head = calls[:9]
    assert head == [
        ["open_project", "-reset", "tiny_cnn_prj"],
        ["set_top", json.loads((out / "host.json").read_text())["top"]],
        ["add_files", "tiny_cnn.cpp", "-cflags", "-std=c++17"],
        ["add_files", "-tb", "tiny_cnn_tb.cpp", "-cflags", "-std=c++17"],
        ["add_files", "-tb", "input.bin"],
        ["add_files", "-tb", "expected.bin"],
        ["open_solution", "-reset", "solution1", "-flow_target", "vivado"],
        ["set_part", board.part],
        ["create_clock", "-period", str(board.clock_period_ns), "-name", "default"],
    ]
    assert f"void {head[1][1]}(" in (hls / "tiny_cnn.h").read_text()  # the top function the header declares
    for call in calls:
        if call[0] == "add_files":
            assert (hls / next(w for w in call[1:] if not w.startswith("-") and w != "-std=c++17")).is_file()
    assert calls[9:] == [["csynth_design"]]  # synthesis alone by default


def test_tcl_simulations_compare_with_the_expected_output(project):
    hls = project[0] / "hls"
    calls = vitis_calls(hls, "cosim", "csim")
    steps = [c for c in calls if c[0].endswith("_design")]
    argv = ["-argv", "input.bin output.bin expected.bin"]
    assert steps == [["csim_design", *argv], ["csynth_design"], ["cosim_design", *argv]]
    assert vitis_calls(hls, "csim")[9:] == [["csim_design", *argv]]  # C simulation needs no synthesis


@pytest.mark.parametrize("step,flow", [("export", []), ("impl", ["-flow", "impl"])])
def test_tcl_exports_a_named_ip(project, step, flow):
    hls = project[0] / "hls"
    calls = vitis_calls(hls, step)
    assert calls[9] == ["csynth_design"]
    assert calls[10] == ["export_design", *flow, "-format", "ip_catalog", "-rtl", "verilog", "-vendor", "ming",
                         "-library", "hls", "-ipname", "tiny_cnn", "-version", "0.1", "-display_name",
                         "tiny_cnn (ming)", "-description",
                         "tiny_cnn: int8 streaming dataflow accelerator for kv260, generated by ming 0.1.0"]
    assert len(calls) == 11


def test_tcl_refuses_an_unknown_step(project):
    with pytest.raises(RuntimeError, match="unknown step 'sim': use csim, synth, cosim, export or impl"):
        vitis_calls(project[0] / "hls", "csim", "sim")


def _included(hls: Path, *flags: str, vitis: Path) -> set[str]:
    """The headers the model's translation unit includes (g++ -M), with `vitis` standing in for Vitis's include
    directory."""
    run = subprocess.run(["g++", "-std=c++17", "-M", *flags, "-I", str(vitis), "-I", str(hls), str(hls / "tiny_cnn.cpp")],
                         capture_output=True, text=True, check=True)
    return {Path(word).name + (" (vitis)" if Path(word).parent == vitis else "")
            for word in run.stdout.replace("\\\n", " ").split()[1:]}


def test_vitis_compiles_its_own_headers_and_ming_csim_the_stand_ins(project, tmp_path):
    """Without MING_CSIM (Vitis csim, cosim and synthesis, with or without __SYNTHESIS__) the sources include
    Vitis's hls_stream.h and ap_axi_sdata.h and none of ming's stand-ins; `ming csim`'s -DMING_CSIM the reverse."""
    hls = project[0] / "hls"
    vitis = tmp_path / "vitis_include"
    vitis.mkdir()
    for header in ("hls_stream.h", "ap_axi_sdata.h", "ap_int.h"):
        (vitis / header).write_text(f"#pragma once\n// {header}\n")  # distinct: #pragma once compares contents
    for flags in ((), ("-D__SYNTHESIS__",)):
        included = _included(hls, *flags, vitis=vitis)
        assert {"hls_stream.h (vitis)", "ap_axi_sdata.h (vitis)"} <= included
        assert not {"ming_hls_stream.h", "ming_check.h"} & included
    included = _included(hls, "-DMING_CSIM", vitis=vitis)
    assert "ming_hls_stream.h" in included and not any("(vitis)" in name for name in included)


def test_the_stand_in_refuses_to_be_compiled_without_ming_csim(project, tmp_path):
    source = tmp_path / "tu.cpp"
    source.write_text('#include "ming_hls_stream.h"\n')
    run = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-I", str(project[0] / "hls"), str(source)],
                         capture_output=True, text=True)
    assert run.returncode != 0 and "compile with -DMING_CSIM" in run.stderr
