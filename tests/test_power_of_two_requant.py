"""An average whose requantization multiplier is a power of two (a GlobalAveragePool over 2^k values whose input
and output scales are equal) is a rounding shift: `ming::requantize_shift`, no product and no DSP48E2, bit-exact
with the average's own rule. (An AveragePool over windows is onnxruntime's float32 sum, never a shift.)"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import zoo
from emit_helpers import csim, stream_graph_of
from ming_py import numerics, reference
from ming_py.boards import load_board
from ming_py.build import design
from ming_py.ilp.cost import Choice, process_cost
from ming_py.pipeline import lift

ZERO_POINTS = (-128, -53, -5, 0, 3, 127)


@pytest.mark.parametrize("count", [1, 2, 4, 16, 64, 1024, 4096])
def test_a_global_average_by_a_power_of_two_is_its_shift_for_every_sum(count):
    scale = np.float32(0.0371)
    acc = np.arange(-255 * count, 255 * count + 1)
    for x_zp in (-128, -7, 0, 127):
        for y_zp in ZERO_POINTS:
            rule = numerics.average_shift(scale, x_zp, scale, y_zp, count)
            assert rule.shift == count.bit_length() - 1
            window_sum = acc + count * x_zp
            expected = numerics.gap_requant(window_sum, count, scale, x_zp, scale, y_zp)
            got = numerics.requantize_shift(window_sum + rule.offset, rule.shift, rule.zero_point)
            assert np.array_equal(got, expected), (x_zp, y_zp)


@pytest.mark.unit
def test_other_multipliers_are_no_shift():
    s = np.float32(0.05)
    assert numerics.average_shift(s, 0, s, 0, 12) is None  # 1/12
    assert numerics.average_shift(s, 0, np.float32(0.07), 0, 16) is None
    assert numerics.average_shift(s, 0, s, 0, 1 << 17) is None  # float32(acc) may round
    assert numerics.average_shift(s, 0, np.float32(s / 4), 0, 2) is None  # 2^1: no right shift


@pytest.fixture(scope="module")
def gap_over_64(tmp_path_factory) -> pathlib.Path:
    """conv -> ReLU -> GlobalAveragePool over 8 x 8, its output scale made its input's: multiplier 2^-6."""
    g = zoo._Graph("gap_over_64", (1, 3, 8, 8))
    model = g.finish(g.gap(g.relu(g.conv("x", "conv1", 8, pads=1), "relu1"), "gap"))
    path = zoo.quantize_float_model(model, tmp_path_factory.mktemp("gap") / "gap_over_64.onnx", (1, 3, 8, 8))
    quantized = onnx.load(str(path))
    (gap,) = [n for n in quantized.graph.node if n.op_type == "GlobalAveragePool"]
    (dequantize,) = [n for n in quantized.graph.node if n.output[0] == gap.input[0]]
    (quantize,) = [n for n in quantized.graph.node if n.input[0] == gap.output[0]]
    scales = {i.name: i for i in quantized.graph.initializer}
    scales[quantize.input[1]].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(scales[dequantize.input[1]]),
                                                               quantize.input[1]))
    onnx.save(quantized, str(path))
    return path


def _requantization_dsp(graph, kind: str) -> int:
    """The DSP48E2s the cost model charges the process of `kind` for its requantization (one lane)."""
    stream_graph = stream_graph_of(graph)
    (p,) = [p for p in stream_graph.processes if p.kind == kind]
    choice = Choice((), (1,) * len(p.inputs), (1,) * len(p.outputs))
    return process_cost(stream_graph, p, choice).dsp


def test_a_global_average_over_a_power_of_two_map_is_a_shift_without_dsp(gap_over_64, tmp_path):
    graph = lift(gap_over_64)
    built = design(graph, load_board("kv260"))
    cpp = built.files["hls/gap_over_64.cpp"]
    assert "constexpr int REQUANT_SHIFT = 6;" in cpp
    assert "ming::requantize_shift(acc[t][l] + " in cpp and ", REQUANT_SHIFT, " in cpp.split("ming::requantize_shift(")[1]
    assert _requantization_dsp(graph, "global_avgpool") == 0
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((1, 3, 8, 8)).astype(np.float32)
        expected = reference.run(graph, x)[graph.outputs[0].name]
        assert np.array_equal(csim(graph, tmp_path / f"out{seed}", x, check_ports=True), expected)


@pytest.mark.unit
@pytest.mark.parametrize("shift", [0, 1, 4, 7, 12, 15])
def test_a_conv_multiplier_of_a_power_of_two_is_its_shift_for_every_accumulator(shift):
    """onnxruntime's rule with the multiplier 2^-k equals the rounding shift by k: every accumulator up to 2^16 and
    around the lean limit (below it float32(acc) is exact, from it on both saturate), random ones and int32's
    extremes."""
    multiplier = np.float32(2.0 ** -shift)
    assert numerics.power_of_two_shift(np.full(5, multiplier)) == shift
    limit = numerics.lean_requant(multiplier).limit
    near = np.arange(-4096, 4097)
    acc = np.concatenate([np.arange(-2 ** 16, 2 ** 16 + 1), limit + near, -limit + near,
                          np.random.default_rng(shift).integers(-2 ** 31, 2 ** 31, 100_000), [-2 ** 31, 2 ** 31 - 1]])
    for zero_point in ZERO_POINTS:
        expected = numerics.requantize(acc, multiplier, zero_point)
        assert np.array_equal(numerics.requantize_shift(acc, shift, zero_point), expected), zero_point


@pytest.mark.unit
def test_other_conv_multipliers_are_no_shift():
    assert numerics.power_of_two_shift(np.float32([0.25, 0.125])) is None  # two shifts
    assert numerics.power_of_two_shift(np.float32([0.25, 0.3])) is None
    assert numerics.power_of_two_shift(np.float32([2.0 ** -16])) is None  # the limit reaches 2^24


def power_of_two_scales(path: pathlib.Path) -> None:
    """Every scale of a QDQ model rounded to a power of two, each bias's the product of its input's and weights'."""
    model = onnx.load(str(path))
    initializers = {i.name: i for i in model.graph.initializer}

    def set_scale(name: str, value) -> None:
        initializers[name].CopyFrom(numpy_helper.from_array(np.asarray(value, np.float32), name))

    for name, tensor in initializers.items():
        if name.endswith("scale"):
            set_scale(name, 2.0 ** np.round(np.log2(numpy_helper.to_array(tensor))))
    produced = {o: n for n in model.graph.node for o in n.output}
    for conv in (n for n in model.graph.node if n.op_type == "Conv" and len(n.input) == 3):
        x_scale, w_scale, b_scale = (numpy_helper.to_array(initializers[produced[i].input[1]]) for i in conv.input)
        set_scale(produced[conv.input[2]].input[1], x_scale * w_scale)
    onnx.save(model, str(path))


def test_a_conv_whose_multipliers_are_one_power_of_two_requantizes_by_a_shift_without_dsp(tmp_path):
    g = zoo._Graph("pow2_conv", (1, 3, 8, 8))
    model = g.finish(g.relu(g.conv("x", "conv1", 8, pads=1), "relu1"))
    path = zoo.quantize_float_model(model, tmp_path / "pow2_conv.onnx", (1, 3, 8, 8))
    power_of_two_scales(path)
    graph = lift(path)
    (p,) = stream_graph_of(graph).processes
    assert numerics.power_of_two_shift(p.epilogue.multipliers) is not None
    cpp = design(graph, load_board("kv260")).files["hls/pow2_conv.cpp"]
    assert "ming::requantize_shift(acc[u], " in cpp and "requantize_lean" not in cpp.split("#include")[-1]
    assert _requantization_dsp(graph, "conv") == 1  # the one MAC lane's DSP48E2, none for the requantization
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((1, 3, 8, 8)).astype(np.float32)
        expected = reference.run(graph, x)[graph.outputs[0].name]
        assert np.array_equal(csim(graph, tmp_path / f"out{seed}", x, check_ports=True), expected)
