"""ShuffleNetV1 units as onnxruntime's quantize_static writes them per tensor in int8 QDQ, and the AveragePool they
hold on its own.

The unit's 3x3 stride-2 AveragePool shortcut reads the map its grouped 1x1 conv reads too: that int8 tensor has
two consumers, so a default x86 session leaves it int8, fuses no QLinearAveragePool and runs DQ -> AveragePool ->
Q in float. Its float32 kernel sums a window in its own order (MLAS's vector kernel: each column down the rows
first), divides as pool_functors.h does where ceil_mode meets count_include_pad, and quantizes with the zero point
added after rounding (frontends/ort_kernels.py `float_averages`, docs/numerics.md §1.5). `ming reference` equals
onnxruntime and the C-simulation equals `ming reference`, over the geometries that change that kernel: padding in
and out of the divisor, ceil_mode, maps of odd and even size, whole NCHWc channel blocks, opset 19 and later. The
pool alone, with its input's scale as quantize_static gives it, has exact ties that show each of those rules.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import zoo
from test_architectures import _assert_equal, _onnxruntime
from emit_helpers import csim_outputs
from ming_py import numerics, reference
from ming_py.errors import MingError
from ming_py.frontends.ort_kernels import nchwc_block_size
from ming_py.ir import WindowAverage
from ming_py.pipeline import lift
from ming_py.ort_session import onnxruntime_session

SEEDS = range(3)


def _unit(g: zoo._Graph, x: str, prefix: str, cout: int, stride: int, pool: dict) -> str:
    """ShuffleNetV1's unit: grouped 1x1 conv, channel shuffle, 3x3 depthwise, grouped 1x1 conv; stride 2
    concatenates it with the AveragePool `pool` of the input, stride 1 adds the input back."""
    cin, bottleneck = g.shapes[x][1], cout // 4
    h = g.relu(g.conv(x, f"{prefix}_g1", bottleneck, kernel=1, group=2), f"{prefix}_relu1")
    h = g.channel_shuffle(h, f"{prefix}_shuffle", 2)
    h = g.conv(h, f"{prefix}_dw", bottleneck, stride=stride, pads=1, group=bottleneck)
    h = g.conv(h, f"{prefix}_g2", cout - cin if stride == 2 else cout, kernel=1, group=2)
    if stride == 2:
        shortcut = g._pool("AveragePool", x, f"{prefix}_shortcut", 3, 2, **pool)
        return g.relu(g.concat([shortcut, h], f"{prefix}_concat"), f"{prefix}_relu")
    return g.relu(g.add(x, h, f"{prefix}_add"), f"{prefix}_relu")


# name -> (map size, stem channels, a ReLU after the stem (zero point -128), AveragePool attributes, opset); 12
# channels are no whole NCHWc block on any x86 CPU (8 or 16 channels), 16 are on every one
VARIANTS = {
    "even_map": (8, 12, True, dict(pads=1, count_include_pad=0), 17),
    "odd_map": (9, 12, True, dict(pads=1, count_include_pad=0), 17),
    "pads_counted": (9, 12, True, dict(pads=1, count_include_pad=1), 17),
    "ceil_mode": (8, 12, True, dict(pads=0, count_include_pad=1, ceil_mode=1), 17),
    "shifted_zero_point": (9, 12, False, dict(pads=1, count_include_pad=0), 17),
    "nchwc_blocks": (8, 16, False, dict(pads=1, count_include_pad=0), 17),
    "opset_21": (9, 12, False, dict(pads=1, count_include_pad=0), 21),
}


def _shufflenet(size: int, stem: int, stem_relu: bool, pool: dict, opset: int) -> onnx.ModelProto:
    """Stem conv, a stride-2 unit (the AveragePool shortcut), a stride-1 unit (the residual Add), then a Split
    whose halves are concatenated again, one of them through a 1x1 conv: the whole map is the output."""
    g = zoo._Graph("shufflenet_v1_unit", (1, 3, size, size))
    h = g.conv("x", "stem", stem, pads=1)
    h = g.relu(h, "stem_relu") if stem_relu else h
    h = _unit(g, _unit(g, h, "unit0", 2 * stem, 2, pool), "unit1", 2 * stem, 1, pool)
    kept, other = g.split(h, "split", [stem, stem])
    model = g.finish(g.concat([g.relu(g.conv(other, "tail", stem, kernel=1), "tail_relu"), kept], "join"))
    model.opset_import[0].version = opset
    return model


@pytest.fixture(scope="module")
def shufflenet(tmp_path_factory):
    """shufflenet(variant) -> (path, graph) of the variant quantized per tensor in int8 QDQ, built once."""
    directory, cache = tmp_path_factory.mktemp("shufflenet_qdq"), {}

    def build(variant: str):
        if variant not in cache:
            size, *rest = VARIANTS[variant]
            path = zoo.quantize_float_model(_shufflenet(size, *rest), directory / f"{variant}.onnx", (1, 3, size, size))
            cache[variant] = path, lift(path)
        return cache[variant]

    return build


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_reference_equals_onnxruntime(shufflenet, variant):
    path, graph = shufflenet(variant)
    size = VARIANTS[variant][0]
    for seed in SEEDS:
        x = np.random.default_rng(seed).standard_normal((1, 3, size, size)).astype(np.float32)
        _assert_equal(reference.run(graph, x), _onnxruntime(path, x))


@pytest.mark.parametrize("variant", ["even_map", "ceil_mode"])
def test_csim_equals_reference(shufflenet, tmp_path, variant):
    path, graph = shufflenet(variant)
    size = VARIANTS[variant][0]
    x = np.random.default_rng(11).standard_normal((1, 3, size, size)).astype(np.float32)
    _assert_equal(csim_outputs(graph, tmp_path / "out", x, check_ports=True), reference.run(graph, x))


# The pool alone: x -> Q -> DQ, read by the AveragePool and by a MaxPool (the fan-out that keeps the pool in float),
# both quantized again with x's scale and zero point. name -> (input shape, AveragePool attributes, opset)
POOLS = {
    "3x3_s2_p1_excluded": ((1, 12, 12, 12), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4), 17),
    "3x3_s2_p1_counted_odd": ((1, 12, 13, 13), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4,
                                                    count_include_pad=1), 17),
    "3x3_s1_p1": ((1, 12, 12, 12), dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1] * 4), 17),
    "2x2_s2": ((1, 12, 12, 12), dict(kernel_shape=[2, 2], strides=[2, 2]), 17),
    "5x5_s1_p2": ((1, 12, 12, 12), dict(kernel_shape=[5, 5], strides=[1, 1], pads=[2] * 4), 17),
    "2x3_asymmetric": ((1, 12, 12, 12), dict(kernel_shape=[2, 3], strides=[1, 2], pads=[0, 1, 1, 1]), 17),
    "3x3_s3_generic_kernel": ((1, 12, 12, 12), dict(kernel_shape=[3, 3], strides=[3, 3], pads=[1] * 4), 17),
    "ceil_mode_counted": ((1, 12, 12, 12), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1,
                                                count_include_pad=1), 17),
    "nchwc_blocks": ((1, 16, 12, 12), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4), 17),
    "opset_19": ((1, 12, 12, 12), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4), 19),
}


def _pool_model(shape, attributes: dict, opset: int, scale: np.float32, zero_point: int) -> onnx.ModelProto:
    constant = numpy_helper.from_array
    initializers = [constant(np.array(scale, np.float32), "s"), constant(np.array(zero_point, np.int8), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="x_q"),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="x_dq"),
             helper.make_node("AveragePool", ["xd"], ["p"], name="pool", **attributes),
             helper.make_node("QuantizeLinear", ["p", "s", "z"], ["pq"], name="p_q"),
             helper.make_node("DequantizeLinear", ["pq", "s", "z"], ["average"], name="p_dq"),
             helper.make_node("MaxPool", ["xd"], ["m"], name="side", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("QuantizeLinear", ["m", "s", "z"], ["mq"], name="m_q"),
             helper.make_node("DequantizeLinear", ["mq", "s", "z"], ["maximum"], name="m_dq")]
    graph = helper.make_graph(nodes, "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("average", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("maximum", TensorProto.FLOAT, None)], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = zoo.IR_VERSION
    shapes = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.output}
    for output in model.graph.output:
        output.CopyFrom(shapes[output.name])
    return model


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """pool(case) -> (path, graph, inputs): the pool model of `case` with a random scale and an odd zero point
    (ties round apart in the two domains), quantized inputs over the whole int8 range, built once."""
    directory, cache = tmp_path_factory.mktemp("float_pools"), {}

    def build(case: str):
        if case not in cache:
            shape, attributes, opset = POOLS[case]
            rng = np.random.default_rng(sorted(POOLS).index(case))
            scale = np.float32(np.exp(rng.uniform(np.log(0.005), np.log(0.2))))
            zero_point = int(rng.integers(-30, 30)) | 1
            path = directory / f"{case}.onnx"
            onnx.save(_pool_model(shape, attributes, opset, scale, zero_point), str(path))
            levels = rng.integers(-128, 128, size=(4, *shape[1:]))
            inputs = [((levels[i:i + 1] - zero_point) * scale).astype(np.float32) for i in range(len(levels))]
            cache[case] = path, lift(path), inputs
        return cache[case]

    return build


@pytest.mark.parametrize("case", sorted(POOLS))
def test_float_average_pool_equals_onnxruntime(pool, case):
    path, graph, inputs = pool(case)
    for x in inputs:
        _assert_equal(reference.run(graph, x), _onnxruntime(path, x))


def test_float_average_pool_csim_equals_reference(pool, tmp_path):
    """The process sums each window's columns first (`ming::average_add` down a column, then across)."""
    _, graph, inputs = pool("3x3_s2_p1_excluded")
    (average,) = [n.epilogue for n in graph.nodes if isinstance(getattr(n, "epilogue", None), WindowAverage)]
    assert average.columns == 3
    _assert_equal(csim_outputs(graph, tmp_path / "out", inputs[0], check_ports=True), reference.run(graph, inputs[0]))


@pytest.mark.parametrize("case,columns", [("3x3_s2_p1_excluded", 3), ("3x3_s3_generic_kernel", 0),
                                          ("nchwc_blocks", 0), ("opset_19", 0), ("ceil_mode_counted", 0)])
def test_the_window_order_is_onnxruntimes_kernel(pool, tmp_path, case, columns):
    """MLAS's vector kernel sums by columns, its generic kernel, the NCHWc kernel (onnxruntime's optimized graph
    holds the pool in the NCHWc domain exactly where ming expects it), AveragePool-19 and ceil_mode with
    count_include_pad by rows."""
    path, graph, _ = pool(case)
    (average,) = [n.epilogue for n in graph.nodes if isinstance(getattr(n, "epilogue", None), WindowAverage)]
    assert average.columns == columns
    options = onnxruntime.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    options.log_severity_level = 3
    onnxruntime_session(str(path), options)
    domains = {n.domain for n in onnx.load(str(tmp_path / "optimized.onnx")).graph.node if n.op_type == "AveragePool"}
    channels = POOLS[case][0][1]
    assert domains == ({"com.microsoft.nchwc"} if channels % nchwc_block_size() == 0 and POOLS[case][2] < 19 else {""})


def test_a_float_pool_whose_ceil_mode_window_runs_past_its_pads_is_refused_by_name(tmp_path):
    """pool_functors.h divides such a window by its elements inside the padded map, not a divisor ming has."""
    path = tmp_path / "overhang.onnx"
    attributes = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4, ceil_mode=1, count_include_pad=1)
    onnx.save(_pool_model((1, 8, 10, 10), attributes, 17, np.float32(0.02), 1), str(path))
    with pytest.raises(MingError, match=r"^node 'pool' \(AveragePool, ceil_mode=1, count_include_pad=1, .* export "
                                        r"the pool with ceil_mode=0 or without pads$"):
        lift(path)


@pytest.mark.unit
def test_window_sum_by_columns_is_mlas_vector_kernel_order():
    """`window_average_sum` with `columns` follows float32 additions down each column, then across, as
    MlasPool2DVectorKernel does; row-major order gives another sum for some windows."""
    rng = np.random.default_rng(5)
    scale, zero_point = np.float32(0.0173), 3
    mantissa, exponent = (int(v) for v in numerics.float32_parts(scale))
    elements = [rng.integers(-128, 128, 4096) for _ in range(9)]
    values = [((e - zero_point) * scale).astype(np.float32) for e in elements]
    columns = [values[c] + values[c + 3] + values[c + 6] for c in range(3)]  # numpy float32: each addition rounded
    expected = (columns[0] + columns[1]) + columns[2]
    ours = numerics.window_average_sum(elements, mantissa, zero_point, columns=3)
    assert np.array_equal(np.ldexp(ours.astype(np.float64), exponent).astype(np.float32), expected)
    assert not np.array_equal(ours, numerics.window_average_sum(elements, mantissa, zero_point))
