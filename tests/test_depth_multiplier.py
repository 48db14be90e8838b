"""Depthwise convolutions with a depth multiplier M (output channel o reads input channel o // M): TFLite's
DEPTHWISE_CONV_2D with depthMultiplier M and ONNX's Conv with group = C_in and C_out = M * C_in.

IREE leaves TFLite's multiplier form quantized (`depthwise_conv_2d_nhwc_hwcm_q`): its sums carry the zero points,
acc + (x - x_zp) * w, over ... x C x M, collapsed into the C * M channels before the bias and the RESCALE. The
frontend takes the input's zero point into the bias (the padding holds it, so the correction is one per channel)
and the C x M axes into a grouped convolution's output (C groups of one input channel and M outputs); with one
input channel it is a plain convolution. The published case is TFLite Micro's micro_speech keyword spotter
(tests/data/published), as published: its input RESHAPE of the 1x1960 vector into a 1x49x40x1 map runs on the host.
`ming reference` and the C-simulation equal LiteRT's reference kernels (BUILTIN_REF) bit for bit, and so they do on small geometries of every kind (one input channel or several,
multipliers 2 to 8, square and rectangular kernels and strides, SAME and VALID, maps one row or one column high,
a window as large as the map) under random schedules; the ONNX equivalents equal onnxruntime.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

import tflite_models
from test_tflite import tflite_reference as litert
import zoo
from emit_helpers import csim, random_schedule, stream_graph_of
from ming_py import reference
from ming_py.build import BuildOptions
from ming_py.ilp.explore import explore
from ming_py.errors import MingError
from ming_py.frontends import tflite_fold
from ming_py.ir import Arg, Const, Op
from ming_py.line_buffers import build_stream_graph
from ming_py.parity import onnxruntime_outputs
from ming_py.pipeline import lift

MICRO_SPEECH = Path(__file__).resolve().parent / "data" / "published" / "micro_speech_quantized.tflite"


def int8_input(graph, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, graph.inputs[0].onnx_shape).astype(np.int8)


def _output(graph, x: np.ndarray) -> np.ndarray:
    return reference.run(graph, x)[graph.outputs[0].name]


# ---- micro_speech ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def micro_speech():
    return MICRO_SPEECH, lift(MICRO_SPEECH)


def test_micro_speech_is_a_depth_multiplier_behind_an_input_reshape_the_host_runs(micro_speech):
    path, graph = micro_speech
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAs(path.read_bytes(), 0))
    subgraph = model.subgraphs[0]
    ops = [tflite_fold.op_name(model, op) for op in subgraph.operators]
    assert ops == ["RESHAPE", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "SOFTMAX"]
    assert list(subgraph.tensors[subgraph.inputs[0]].shape) == [1, 1960]
    assert subgraph.operators[1].builtinOptions.depthMultiplier == 8
    port = graph.inputs[0]
    assert (port.name, port.onnx_shape, port.dtype) == ("Reshape_1", (1, 1960), "int8")
    assert [(op.kind, op.shape) for op in port.host_ops] == [("reshape", (1, 49, 40, 1))]


def test_micro_speech_reference_equals_litert_reference_kernels(micro_speech):
    path, graph = micro_speech
    for seed in range(4):
        x = int8_input(graph, seed)
        assert np.array_equal(_output(graph, x), litert(path, x))


def test_micro_speech_takes_the_input_zero_point_into_the_bias(micro_speech):
    """One input channel: a plain convolution 1 -> 8 whose sums are of x * w as the stream carries x; the model's
    sums of (x + 128) * w differ by 128 * sum(w) per channel, which the bias holds."""
    path, graph = micro_speech
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAs(path.read_bytes(), 0))
    tensors = {t.name.decode(): t for t in model.subgraphs[0].tensors}

    def values(name, dtype):
        return np.frombuffer(bytes(model.buffers[tensors[name].buffer].data), dtype).astype(np.int64)

    weights, bias = values("first_weights/read", np.int8).reshape(10, 8, 8), values("Conv2D_bias", np.int32)
    conv = next(k for k in graph.kernels() if k.op == "conv")
    assert conv.payload == Op("add", (Arg(2), Op("mul", (Arg(0), Arg(1))))) and len(conv.inputs) == 2
    assert np.array_equal(conv.epilogue.bias, bias + 128 * weights.sum(axis=(0, 1)))
    process = next(p for p in stream_graph_of(graph).processes if p.name == conv.name)
    assert (process.kind, process.window.in_channels, process.window.out_channels) == ("conv", 1, 8)


def test_micro_speech_csim_equals_litert_reference_kernels(micro_speech, tmp_path):
    """The build's schedule, every process in its own thread over FIFOs of the built depths, ports checked."""
    path, graph = micro_speech
    _, solution, _ = explore(build_stream_graph(graph), BuildOptions())
    x = np.stack([int8_input(graph, seed)[0] for seed in (7, 8, 9)])
    expected = np.concatenate([litert(path, image[None]) for image in x])
    got = csim(graph, tmp_path / "out", x, solution.schedule, concurrent=True, check_ports=True)
    assert np.array_equal(got, expected)


# ---- TFLite geometries ------------------------------------------------------------------------------------

# (input channels, multiplier, kernel, stride, padding, height, width)
TFLITE_CASES = {
    "c1_m8_10x8_s2_same": (1, 8, (10, 8), 2, "same", 13, 11),  # micro_speech's layer, smaller
    "c2_m3_3x3_s2_valid": (2, 3, (3, 3), 2, "valid", 7, 7),
    "c4_m2_5x3_s2x1_same": (4, 2, (5, 3), (2, 1), "same", 9, 6),
    "c3_m4_1x3_one_row": (3, 4, (1, 3), 1, "same", 1, 9),
    "c2_m2_3x1_one_column": (2, 2, (3, 1), 1, "same", 6, 1),
    "c1_m2_whole_map": (1, 2, (2, 2), 2, "valid", 2, 2),  # one output pixel: a dense layer
}


def depthwise_model(channels, multiplier, kernel, stride, padding, height, width, seed=0) -> bytes:
    builder = tflite_models.TfliteBuilder(seed=seed)
    x = builder.input((1, height, width, channels))
    y = builder.conv(x, None, kernel=kernel, stride=stride, padding=padding, depthwise=True,
                     depth_multiplier=multiplier)
    return builder.build([y], "depth_multiplier")


@pytest.fixture(scope="module")
def tflite_case(tmp_path_factory):
    directory = tmp_path_factory.mktemp("depth_multiplier")
    cache = {}

    def build(name):
        if name not in cache:
            path = directory / f"{name}.tflite"
            path.write_bytes(depthwise_model(*TFLITE_CASES[name]))
            cache[name] = path, lift(path)
        return cache[name]

    return build


@pytest.mark.parametrize("name", sorted(TFLITE_CASES))
def test_tflite_reference_and_csim_equal_litert_reference_kernels(tflite_case, tmp_path, name):
    path, graph = tflite_case(name)
    for seed in range(2):
        x = int8_input(graph, seed)
        assert np.array_equal(_output(graph, x), litert(path, x)), seed
    x = int8_input(graph, 5)
    schedule = random_schedule(stream_graph_of(graph), random.Random(name))
    assert np.array_equal(csim(graph, tmp_path / "out", x, schedule, check_ports=True), litert(path, x)), schedule


def test_several_input_channels_are_groups_of_one(tflite_case):
    """C x M sums: a grouped convolution's C x M x H x W output, C groups of one input channel and M outputs,
    requantized over both channel axes (channel c * M + m)."""
    _, graph = tflite_case("c2_m3_3x3_s2_valid")
    conv = next(k for k in graph.kernels() if k.op == "conv")
    assert graph.shape_of(conv.output.tensor) == (2, 3, 3, 3)
    assert len(conv.epilogue.channel_dims) == 2 and conv.epilogue.bias.shape == (6,)
    process = next(p for p in stream_graph_of(graph).processes if p.name == conv.name)
    window = process.window
    assert (process.kind, window.groups, window.in_channels, window.out_channels) == ("conv", 2, 2, 6)
    assert process.weights.shape == (6, 1, 9)


def test_a_zero_point_left_in_a_multiply_accumulate_is_refused(tflite_case):
    """Every multiply-accumulate process computes acc + x * w of the values as they are: a kernel whose body
    still subtracts a zero point is refused by name rather than computed without it."""
    _, graph = tflite_case("c1_m8_10x8_s2_same")
    conv = next(k for k in graph.kernels() if k.op == "conv")
    conv.payload = Op("add", (Arg(2), Op("mul", (Op("sub", (Arg(0), Const(-3))), Arg(1)))))
    try:
        with pytest.raises(MingError, match="is not acc \\+ x \\* w"):
            build_stream_graph(graph)
    finally:
        conv.payload = Op("add", (Arg(2), Op("mul", (Arg(0), Arg(1)))))


# ---- ONNX ---------------------------------------------------------------------------------------------------

# (input channels, multiplier, kernel, stride, pads [top, left, bottom, right] or one for all, height, width)
ONNX_CASES = {
    "c1_m8_10x8_s2": (1, 8, (10, 8), 2, [4, 3, 5, 3], 13, 11),
    "c3_m4_3x2_s2": (3, 4, (3, 2), 2, 0, 7, 6),
    "c4_m2_1x3_one_row": (4, 2, (1, 3), 1, [0, 1, 0, 1], 1, 9),
    "c2_m5_whole_map": (2, 5, 3, 1, 0, 3, 3),
}


@pytest.mark.parametrize("name", sorted(ONNX_CASES))
def test_onnx_reference_and_csim_equal_onnxruntime(tmp_path, name):
    channels, multiplier, kernel, stride, pads, height, width = ONNX_CASES[name]
    shape = (1, channels, height, width)
    g = zoo._Graph(name, shape)
    out = g.conv("x", "dw", channels * multiplier, kernel=kernel, stride=stride, pads=pads, group=channels)
    path = zoo.quantize_float_model(g.finish(out), tmp_path / f"{name}.onnx", shape, per_channel=True)
    graph = lift(path)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    expected = onnxruntime_outputs(path, x)[0]
    assert np.array_equal(_output(graph, x), expected)
    schedule = random_schedule(stream_graph_of(graph), random.Random(name))
    assert np.array_equal(csim(graph, tmp_path / "out", x, schedule, check_ports=True), expected), schedule
