"""An average whose requantization multiplier is a power of two (a GlobalAveragePool or AveragePool over 2^k
values whose input and output scales are equal) is a rounding shift: `ming::requantize_shift`, no product and
no DSP48E2, bit-exact with the average's own rule."""

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
            rule = numerics.average_shift(scale, x_zp, scale, y_zp, count, global_pool=True)
            assert rule.shift == count.bit_length() - 1
            window_sum = acc + count * x_zp
            expected = numerics.gap_requant(window_sum, count, scale, x_zp, scale, y_zp)
            got = numerics.requantize_shift(window_sum + rule.offset, rule.shift, rule.zero_point)
            assert np.array_equal(got, expected), (x_zp, y_zp)


@pytest.mark.unit
@pytest.mark.parametrize("count", [2, 4, 8, 16, 64])
def test_an_average_pool_by_a_power_of_two_is_its_shift_for_every_sum(count):
    scale = np.float32(0.25)
    acc = np.arange(-255 * count, 255 * count + 1)
    for x_zp in (-128, -7, 0, 127):
        for y_zp in ZERO_POINTS:  # added before the rounding: odd zero points move the ties
            rule = numerics.average_shift(scale, x_zp, scale, y_zp, count, global_pool=False)
            window_sum = acc + count * x_zp
            expected = numerics.avgpool_requant(window_sum, count, scale, x_zp, scale, y_zp)
            got = numerics.requantize_shift(window_sum + rule.offset, rule.shift, rule.zero_point)
            assert np.array_equal(got, expected), (x_zp, y_zp)


@pytest.mark.unit
def test_other_multipliers_and_padding_excluded_are_no_shift():
    s = np.float32(0.05)
    assert numerics.average_shift(s, 0, s, 0, 12, global_pool=True) is None  # 1/12
    assert numerics.average_shift(s, 0, np.float32(0.07), 0, 16, global_pool=True) is None
    assert numerics.average_shift(s, 0, s, 0, 9, global_pool=False) is None
    assert numerics.average_shift(s, 0, s, 0, 4, global_pool=False, exclude_padding=True) is None
    assert numerics.average_shift(s, 0, s, 0, 1 << 17, global_pool=True) is None  # float32(acc) may round
    assert numerics.average_shift(s, 0, np.float32(s / 4), 0, 2, global_pool=True) is None  # 2^1: no right shift


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
    assert "ming::requantize_shift(acc[t][l] + " in cpp and ", 6, " in cpp.split("ming::requantize_shift(")[1]
    assert _requantization_dsp(graph, "global_avgpool") == 0
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((1, 3, 8, 8)).astype(np.float32)
        expected = reference.run(graph, x)[graph.outputs[0].name]
        assert np.array_equal(csim(graph, tmp_path / f"out{seed}", x, check_ports=True), expected)


def test_an_average_pool_over_four_is_a_shift_without_dsp(lifted, tmp_path):
    graph = lifted("conv_avgpool2")  # 2 x 2 windows, the output scale the input's
    built = design(graph, load_board("kv260"))
    cpp = built.files["hls/conv_avgpool2.cpp"]
    assert "ming::requantize_shift(acc[u] + " in cpp and "avgpool_requant" not in cpp.split("#include")[-1]
    assert _requantization_dsp(graph, "avgpool") == 0
    x = zoo.random_input("conv_avgpool2", 3)
    assert np.array_equal(csim(graph, tmp_path / "out", x), reference.run(graph, x)[graph.outputs[0].name])
