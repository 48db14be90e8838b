"""Emission and C-simulation: the generated HLS C++, compiled with g++, equals `ming reference` bit for bit."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import onnx
import pytest

import zoo
from emit_helpers import csim, random_schedule, stream_graph_of
from ming_py.dataflow import ProcessSchedule, Schedule
from ming_py.kinds import kind_of, trip_counts
from ming_py.kinds.window import MULTIPLIERS
from ming_py import reference

MODELS = sorted(zoo.MODELS)
NETWORKS = ["residual_block", "two_residual_stages", "dw_separable", "lenet", "tiny_cnn", "concat_branches",
            "conv_avgpool3_p1", "conv_flatten_matmul"]


def reference_output(graph, x):
    return reference.run(graph, x)[graph.outputs[0].name]


@pytest.mark.parametrize("name", MODELS)
def test_csim_equals_reference(lifted, tmp_path, name):
    graph = lifted(name, per_channel=True)
    for seed in (0, 1):
        x = zoo.random_input(name, seed)
        got = csim(graph, tmp_path / "out", x)
        assert got.dtype == np.float32
        assert np.array_equal(got, reference_output(graph, x))


@pytest.mark.parametrize("name", MODELS)
def test_csim_under_random_schedules_fits_the_ports(lifted, tmp_path, name):
    """Every kernel under random valid schedules: the port-checked C-simulation (every bank within its
    ports and every stream moved at most once per pipelined iteration, else PortConflict) equals the
    reference bit for bit."""
    graph = lifted(name)
    stream_graph = stream_graph_of(graph)
    rng = random.Random(name)
    x = zoo.random_input(name, 7)
    expected = reference_output(graph, x)
    for trial in range(2 if name in NETWORKS else 1):
        schedule = random_schedule(stream_graph, rng)
        got = csim(graph, tmp_path / f"out{trial}", x, schedule, check_ports=True)
        assert np.array_equal(got, expected), schedule


@pytest.mark.parametrize("multipliers", MULTIPLIERS)
def test_every_multiplier_choice_is_bit_exact(lifted, tmp_path, multipliers):
    """tiny_cnn with every MAC process on one multiplier choice (two lanes where pairs are tried, one where
    single DSPs are, which pairs replace at even lanes): the port-checked C-simulation equals the reference,
    and each product is bound as chosen."""
    graph = lifted("tiny_cnn")
    stream_graph = stream_graph_of(graph)
    schedule = random_schedule(stream_graph, random.Random(5))
    width = 1 if multipliers == "dsp" else 2
    lanes = {name: width if c.channels % width == 0 else 1 for name, c in stream_graph.channels.items()}
    processes = {}
    for p in stream_graph.processes:
        tied = {"oc": lanes[p.outputs[0]], "n": lanes[p.outputs[0]], "ic": lanes[p.inputs[0]],
                "c": lanes[p.inputs[0]], "k": lanes[p.inputs[0]] if p.kind == "dense" else 1}
        unroll = tuple((loop, tied.get(loop, 1)) for loop in trip_counts(stream_graph, p))
        choices = kind_of(p.kind).multiplier_choices(dict(unroll))
        chosen = multipliers if multipliers in choices else choices[0]
        processes[p.name] = ProcessSchedule(unroll, multipliers=chosen)
    schedule = Schedule(processes, lanes, schedule.depths)
    x = zoo.random_input("tiny_cnn", 11)
    got = csim(graph, tmp_path / "out", x, schedule, check_ports=True)
    assert np.array_equal(got, reference_output(graph, x))
    cpp = next((tmp_path / "out" / "hls").glob("tiny_cnn.cpp")).read_text()
    if multipliers == "dsp_pair":
        assert "ming::multiply_pair(" in cpp and "BIND_OP" not in cpp.split("static void fc(")[1]
    else:
        assert f"op=mul impl={multipliers})" in cpp and "multiply_pair(" not in cpp.split("#include")[-1]
    # the requantization's product goes with the MACs: into the fabric, or DSPs
    assert ("requantize_lean<ming::Multiplier::fabric>(" in cpp) == (multipliers == "fabric")


def test_buffers_scale_with_width_only(tmp_path):
    """A conv at 32x32 and at 224x224: only line buffers grow, and only with the width."""
    from onnx import TensorProto, helper, numpy_helper

    from ming_py.build import design
    from ming_py.boards import load_board
    from ming_py.pipeline import lift

    def build(size: int):
        rng = np.random.default_rng(0)
        w = numpy_helper.from_array((rng.standard_normal((16, 3, 3, 3)) * 0.3).astype(np.float32), "w")
        graph = helper.make_graph(
            [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"], name="relu")], "single_conv",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, size, size])], [w])
        path = zoo.quantize_float_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                                        tmp_path / f"conv{size}.onnx", (1, 3, size, size))
        return json.loads(design(lift(path), load_board("kv260")).files["report.json"])

    small, large = build(32), build(224)
    for a, b in zip(small["nodes"], large["nodes"]):
        for buffer_a, buffer_b in zip(a["buffers"], b["buffers"]):
            assert buffer_a["name"] == buffer_b["name"]
            if buffer_a["role"] == "line_buffer":
                copies, rows, width, tokens, lanes = buffer_a["shape"]
                assert buffer_b["shape"] == [copies, rows, 224, tokens, lanes] and width == 32
            else:
                assert buffer_a["shape"] == buffer_b["shape"], buffer_a["name"]


def test_generated_cpp_is_warning_free(lifted, tmp_path):
    from ming_py.boards import load_board
    from ming_py.build import design
    from ming_py.output import write_tree

    for name in ("two_residual_stages", "lenet", "conv_avgpool3_p1", "concat_branches", "relu_clip_kept"):
        out = tmp_path / name
        write_tree(design(lifted(name), load_board("kv260")).files, out)
        hls = out / "hls"
        result = subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-DMING_CSIM", "-fsyntax-only", "-I", str(hls),
                                 str(hls / f"{name}.cpp"), str(hls / f"{name}_tb.cpp")], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr


def test_dataflow_mlir_parses_back(lifted):
    from iree.compiler import ir

    from ming_py.boards import load_board
    from ming_py.build import design

    result = design(lifted("two_residual_stages"), load_board("kv260"))
    context = ir.Context()
    context.allow_unregistered_dialects = True
    module = ir.Module.parse(result.files["dataflow.mlir"], context)
    region = module.body.operations[0]
    ops = list(region.regions[0].blocks[0].operations)
    processes = [op for op in ops if op.operation.name == "dfg.process"]
    channels = [op for op in ops if op.operation.name == "dfg.channel"]
    assert len(processes) == len(result.stream_graph.processes)
    assert len(channels) == len(result.stream_graph.channels)
    names = {str(op.attributes["name"]).strip('"') for op in processes}
    assert {p.name for p in result.stream_graph.processes} == names


def test_every_intermediate_stream_has_one_producer_and_one_consumer(lifted):
    stream_graph = stream_graph_of(lifted("two_residual_stages"))
    producers = [c for p in stream_graph.processes for c in p.outputs]
    consumers = [c for p in stream_graph.processes for c in p.inputs]
    assert len(producers) == len(set(producers)) and len(consumers) == len(set(consumers))
    assert any(p.kind == "split" for p in stream_graph.processes)


def test_flatten_into_dense_permutes_weights_instead_of_buffering(lifted):
    stream_graph = stream_graph_of(lifted("conv_flatten_gemm"))
    kinds = [p.kind for p in stream_graph.processes]
    assert kinds == ["conv", "dense"]  # no reorder process
    dense = stream_graph.processes[1]
    assert dense.weights.shape == (dense.weights.shape[0], stream_graph.channels[dense.inputs[0]].values)


def ming(*args):
    return subprocess.run([sys.executable, "-m", "ming_py.cli", *map(str, args)], capture_output=True, text=True)


def test_build_is_deterministic(quantized, tmp_path):
    model = quantized("residual_block")
    for out in ("a", "b"):
        assert ming("build", model, "--board", "kv260", "-o", tmp_path / out, "-q").returncode == 0
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert files_a == files_b and files_a
    for relative in files_a:
        assert (tmp_path / "a" / relative).read_bytes() == (tmp_path / "b" / relative).read_bytes(), relative


def test_build_and_csim_through_the_cli(quantized, tmp_path):
    model = quantized("lenet")
    build = ming("build", model, "--board", "kv260", "-o", tmp_path / "out")
    assert build.returncode == 0, build.stderr
    assert "importing" in build.stderr and "wrote" in build.stderr
    for expected in ("hls/lenet.cpp", "hls/lenet.h", "hls/lenet_tb.cpp", "hls/ming_hls_stream.h", "hls/run_hls.tcl",
                     "report.json", "report.md", "dataflow.mlir"):
        assert (tmp_path / "out" / expected).is_file(), expected
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["board"] == "kv260" and {"nodes", "totals"} <= data.keys()
    assert {"name", "kind", "schedule", "buffers_bits"} <= data["nodes"][0].keys()
    x = zoo.random_input("lenet", 5)
    np.save(tmp_path / "x.npy", x)
    run = ming("csim", tmp_path / "out", "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy", "-q")
    assert run.returncode == 0 and run.stderr == "", run.stderr
    ref = ming("reference", model, "--input", tmp_path / "x.npy", "--output", tmp_path / "r.npy")
    assert ref.returncode == 0
    assert np.array_equal(np.load(tmp_path / "y.npy"), np.load(tmp_path / "r.npy"))
    tcl = (tmp_path / "out" / "hls" / "run_hls.tcl").read_text()
    assert "xck26-sfvc784-2LV-c" in tcl and "set_top lenet_top" in tcl


def test_failed_build_leaves_no_output(tmp_path_factory, tmp_path):
    model = zoo.quantize_float_model(zoo.rows_and_columns_swapped(), tmp_path_factory.mktemp("refused") / "swap.onnx",
                                     (1, 4, 8, 8))
    result = ming("build", model, "-o", tmp_path / "out")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) >= 1
    assert "error" in result.stderr.strip().splitlines()[-1] and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()
    assert not any(tmp_path.iterdir())


def test_unknown_board(quantized, tmp_path):
    result = ming("build", quantized("conv1x1"), "--board", "nope", "-o", tmp_path / "out")
    assert result.returncode == 2 and "known boards" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("shape, kernel, pads, strides", [((1, 2, 1, 8), (1, 3), [0, 1, 0, 1], [1, 1]),
                                                ((1, 2, 8, 1), (3, 1), [1, 0, 1, 0], [1, 1]),
                                                ((1, 2, 8, 3), (2, 3), [0, 0, 0, 0], [1, 1]),
                                                ((1, 2, 4, 5), (1, 5), [0, 0, 0, 0], [1, 5])],
                         ids=["one_high", "one_wide", "to_one_wide", "strided_to_one_wide"])
def test_maps_one_high_or_one_wide_are_ordinary_maps(tmp_path, shape, kernel, pads, strides):
    """IREE drops the unit axis of such maps (1-D nets, the end of a keyword-spotting net); ming streams them
    as maps of one row or one column."""
    from onnx import TensorProto, helper, numpy_helper

    from ming_py.parity import onnxruntime_outputs
    from ming_py.pipeline import lift

    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.normal(0, 0.3, (4, 2) + kernel).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.normal(0, 0.3, (4, 4, 1, 1)).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], name="conv", pads=pads, strides=strides),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "w2"], ["y"], name="pointwise")]
    graph = helper.make_graph(nodes, "maps", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w1, w2])
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    path = zoo.quantize_float_model(model, tmp_path / "maps.onnx", shape)
    graph = lift(path)
    x = (rng.standard_normal(shape) * zoo.INPUT_SCALE).astype(np.float32)
    assert np.array_equal(csim(graph, tmp_path / "out", x), onnxruntime_outputs(path, x)[0])
