"""Convolutions whose stride is larger than their window, with a single output position (along one axis or
both) that leaves the map's last rows or columns unread: in TFLite and in ONNX (QDQ and QOperator), with one
input channel or several, VALID or padded, dilated, depthwise (and two positions beside them). Each is built,
C-simulated and equal to `ming reference` and the framework, bit for bit (tests/geometries.py); the ONNX
rewrite alone (`onnx_windows`) gives what onnxruntime computes for the original."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from geometries import Case, Conv, check_case
from ming_py.errors import MingError
from ming_py.frontends.onnx_windows import whole_map_windows
from ming_py.limits import MAX_WEIGHT_BYTES
from ming_py.ort_session import onnxruntime_session

SINGLE_WINDOWS = {
    "tflite_3x3_stride_6_on_8x8_one_channel": Case("tflite", (1, 8, 8), (Conv(4, (3, 3), (6, 6)),)),
    "tflite_3x3_stride_6x1_on_8x9_one_channel": Case("tflite", (1, 8, 9), (Conv(4, (3, 3), (6, 1)),)),
    "tflite_3x3_stride_8_same_on_8x8": Case("tflite", (3, 8, 8), (Conv(4, (3, 3), (8, 8), padding="same"),)),
    "tflite_2x2_dilated_2_stride_5_on_5x5": Case("tflite", (2, 5, 5), (Conv(4, (2, 2), (5, 5), (2, 2)),)),
    "tflite_depthwise_3x3_stride_6_on_8x8": Case(
        "tflite", (3, 8, 8), (Conv(3, (3, 3), (6, 6), depthwise=True, groups=3),)),
    "qdq_3x3_stride_6_on_8x8": Case("qdq_int8", (2, 8, 8), (Conv(4, (3, 3), (6, 6)),)),
    "qdq_3x3_stride_6_on_8x8_one_channel": Case("qdq_int8", (1, 8, 8), (Conv(4, (3, 3), (6, 6)),)),
    "qdq_3x3_stride_6x1_on_8x9": Case("qdq_int8", (2, 8, 9), (Conv(4, (3, 3), (6, 1)),)),
    "qdq_3x3_stride_8_padded_on_8x8": Case("qdq_int8", (3, 8, 8), (Conv(4, (3, 3), (8, 8), padding=(1, 1, 1, 1)),)),
    "qdq_3x3_stride_7_padded_on_8x8": Case("qdq_int8", (3, 8, 8), (Conv(4, (3, 3), (7, 7), padding=(1, 1, 1, 1)),)),
    "qdq_2x2_dilated_2_stride_5_on_5x5": Case("qdq_int8", (2, 5, 5), (Conv(4, (2, 2), (5, 5), (2, 2)),)),
    "qoperator_3x3_stride_6_on_8x8": Case("qoperator_int8", (2, 8, 8), (Conv(4, (3, 3), (6, 6)),)),
    # a strided 1x1 conv on a 2x2 map: its one position reads the map's first pixel only
    "tflite_1x1_stride_2_on_2x2": Case("tflite", (4, 2, 2), (Conv(4, (1, 1), (2, 2)),)),
    "qdq_1x1_stride_2_on_2x2": Case("qdq_int8", (4, 2, 2), (Conv(4, (1, 1), (2, 2)),)),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SINGLE_WINDOWS))
def test_a_single_window_short_of_the_map_equals_reference_and_framework(name, tmp_path):
    case = SINGLE_WINDOWS[name]
    outcome = check_case(case, tmp_path)
    assert outcome.status == "equal", f"{name}: {case.describe()}: {outcome}"


def _onnx_conv(in_shape, kernel, strides, dilations, pads, weight_zero_point) -> onnx.ModelProto:
    """input -> QDQ -> Conv (int8 weights behind a DequantizeLinear, 4 output channels) -> output; power-of-two
    scales, so that every product and sum is exact in float32 whatever the order."""
    rng = np.random.default_rng(7)
    channels = in_shape[1]
    initializers = [numpy_helper.from_array(np.float32(2 ** -4), "s"), numpy_helper.from_array(np.int8(0), "z"),
                    numpy_helper.from_array(rng.integers(-60, 60, (4, channels, *kernel)).astype(np.int8), "w"),
                    numpy_helper.from_array(np.float32(2 ** -7), "ws"),
                    numpy_helper.from_array(np.int8(weight_zero_point), "wz")]
    nodes = [helper.make_node("QuantizeLinear", ["input", "s", "z"], ["xq"], name="xq"),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="xd"),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], name="wd"),
             helper.make_node("Conv", ["xd", "wd"], ["y"], name="conv", kernel_shape=list(kernel),
                              strides=list(strides), dilations=list(dilations), pads=list(pads))]
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("input", TensorProto.FLOAT, in_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _onnxruntime(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = onnxruntime_session(model.SerializeToString())
    return session.run(None, {"input": x})[0]


@pytest.mark.unit
@pytest.mark.parametrize("in_shape, kernel, strides, dilations, pads, weight_zero_point", [
    ((1, 2, 8, 8), (3, 3), (6, 6), (1, 1), (0, 0, 0, 0), 0),
    ((1, 1, 8, 9), (3, 3), (6, 1), (1, 1), (0, 0, 0, 0), 0),
    ((1, 3, 8, 8), (3, 3), (8, 8), (1, 1), (1, 1, 1, 1), 3),
    ((1, 2, 5, 5), (2, 2), (5, 5), (2, 2), (0, 0, 0, 0), -2),
])
def test_the_onnx_window_to_the_map_end_computes_what_onnxruntime_computes(in_shape, kernel, strides, dilations,
                                                                          pads, weight_zero_point):
    model = _onnx_conv(in_shape, kernel, strides, dilations, pads, weight_zero_point)
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    whole_map_windows(rewritten)
    conv = next(n for n in rewritten.graph.node if n.op_type == "Conv")
    attributes = {a.name: list(a.ints) for a in conv.attribute}
    padded = [in_shape[2 + axis] + pads[axis] + pads[2 + axis] for axis in range(2)]
    assert attributes["kernel_shape"] == [p if s > 1 else k for p, s, k in zip(padded, strides, kernel)]
    x = np.random.default_rng(1).standard_normal(in_shape).astype(np.float32) * 3
    expected, ours = _onnxruntime(model, x), _onnxruntime(rewritten, x)
    assert expected.shape == ours.shape and np.array_equal(expected, ours)


@pytest.mark.unit
def test_a_window_to_the_end_of_a_large_map_is_refused_before_its_weights_are_made():
    model = _onnx_conv((1, 16, 2048, 2048), (3, 3), (4096, 4096), (1, 1), (0, 0, 0, 0), 0)
    with pytest.raises(MingError) as error:
        whole_map_windows(model)
    assert str(error.value) == (
        "node 'conv' (Conv): its one window position stops short of the map's end, and its window to the map's end "
        f"(2048x2048) takes 256.0 MiB of weights; ming handles up to {MAX_WEIGHT_BYTES // 2 ** 20} MiB (all weights "
        "are held on chip); crop the map to the window before the layer")


def _with_weight_quantization(scale, zero_point, opset: int = 13, **attributes) -> onnx.ModelProto:
    """A 3x3 Conv of stride 6 on an 8x8 map (4 output channels, 4 input channels) whose weights' DequantizeLinear
    has the scale and zero point given (None: no zero point; ("constant", value): the output of a Constant node)
    and the attributes given."""
    model = _onnx_conv((1, 4, 8, 8), (3, 3), (6, 6), (1, 1), (0, 0, 0, 0), 0)
    graph = model.graph
    kept = [i for i in graph.initializer if i.name not in ("ws", "wz")]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    inputs = ["w"]
    for name, value in (("ws", scale), ("wz", zero_point)):
        if value is None:
            continue
        if isinstance(value, tuple):  # ("constant", array): computed by a Constant node
            graph.node.insert(0, helper.make_node("Constant", [], [name], name=f"{name}_node",
                                                  value=numpy_helper.from_array(np.asarray(value[1]))))
        else:
            graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
        inputs.append(name)
    dequantize = next(n for n in graph.node if n.name == "wd")
    dequantize.CopyFrom(helper.make_node("DequantizeLinear", inputs, ["wd"], name="wd", **attributes))
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("", opset))
    return model


SCALE, PER_CHANNEL_SCALES = np.float32(2 ** -7), np.float32([2 ** -7, 2 ** -6, 2 ** -8, 2 ** -5])
ZERO_POINTS = np.int8([3, -2, 0, 5])


@pytest.mark.unit
@pytest.mark.parametrize("scale, zero_point, opset, attributes", [
    (SCALE, ("constant", np.int8(2)), 13, {}),
    (("constant", SCALE), np.int8(2), 13, {}),
    (PER_CHANNEL_SCALES, ZERO_POINTS, 13, {"axis": 1}),
    (PER_CHANNEL_SCALES, ZERO_POINTS, 13, {}),  # DequantizeLinear's axis is 1 unless given
    (np.full((4, 4, 3, 1), SCALE), np.full((4, 4, 3, 1), np.int8(2)), 21, {"axis": 3, "block_size": 3}),
], ids=["computed_zero_point", "computed_scale", "per_input_channel", "default_axis", "blocked"])
def test_a_window_whose_weight_quantization_the_widening_cannot_keep_is_left_as_it_was(scale, zero_point, opset,
                                                                                       attributes):
    model = _with_weight_quantization(scale, zero_point, opset, **attributes)
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    whole_map_windows(rewritten)
    assert rewritten == model


@pytest.mark.unit
@pytest.mark.parametrize("scale, zero_point, attributes", [
    (SCALE, None, {}),
    (PER_CHANNEL_SCALES, ZERO_POINTS, {"axis": 0}),
    (PER_CHANNEL_SCALES, ZERO_POINTS, {"axis": -4}),
    (np.float32([SCALE]), np.int8([-3]), {}),
], ids=["no_zero_point", "per_output_channel", "per_output_channel_negative_axis", "one_element_vectors"])
def test_a_window_widened_with_its_weight_quantization_computes_what_onnxruntime_computes(scale, zero_point,
                                                                                         attributes):
    model = _with_weight_quantization(scale, zero_point, **attributes)
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    whole_map_windows(rewritten)
    conv = next(n for n in rewritten.graph.node if n.op_type == "Conv")
    assert {a.name: list(a.ints) for a in conv.attribute}["kernel_shape"] == [8, 8]
    x = np.random.default_rng(2).standard_normal((1, 4, 8, 8)).astype(np.float32) * 3
    assert np.array_equal(_onnxruntime(model, x), _onnxruntime(rewritten, x))
