"""An ONNX Conv with one output position along an axis whose window stops short of the (padded) map's end,
rewritten as the same Conv with a window that reaches it.

A stride larger than the window over a map only a little larger than it (a 3x3 kernel, stride 6, on an 8x8
map: one 1x1 output) leaves the map's last rows or columns unread. IREE drops the output's unit axis and
then infers the input's extent from the window alone, which fails to lower. Along such an axis the Conv is
rewritten with the window's taps spread to dilation 1 and zero weights (the weights' zero point) up to the
padded map's end, stride 1: the one output position sums the same products, and the layer becomes the window
as large as the map that TFLite models give (a dense layer, or a window over padding).
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ming_py.errors import MingError
from ming_py.limits import MAX_WEIGHT_BYTES

from .onnx_converters import static_shapes

_SPATIAL = 2  # a Conv over N x C x H x W


def _ints(node: onnx.NodeProto, name: str, default: list[int]) -> list[int]:
    return next((list(a.ints) for a in node.attribute if a.name == name), default)


def _auto_pad(node: onnx.NodeProto) -> str:
    value = next((a.s for a in node.attribute if a.name == "auto_pad"), b"NOTSET")
    return value.decode()


def _short_axes(node: onnx.NodeProto, in_shape, kernel) -> list[int]:
    """The spatial axes along which the Conv has one output position that does not reach the padded map's end."""
    strides = _ints(node, "strides", [1] * _SPATIAL)
    dilations = _ints(node, "dilations", [1] * _SPATIAL)
    pads = _ints(node, "pads", [0] * 2 * _SPATIAL)
    axes = []
    for axis in range(_SPATIAL):
        padded = in_shape[2 + axis] + pads[axis] + pads[_SPATIAL + axis]
        extent = dilations[axis] * (kernel[axis] - 1) + 1
        if padded > extent and (padded - extent) // strides[axis] == 0:
            axes.append(axis)
    return axes


def whole_map_windows(model: onnx.ModelProto) -> None:
    """Rewrite, in place, every Conv with int8 weights (DequantizeLinear of an initializer) that has a short
    axis (module docstring)."""
    graph = model.graph
    shapes = static_shapes(model)
    producers = {out: node for node in graph.node for out in node.output}
    initializers = {i.name: i for i in graph.initializer}
    for conv in [n for n in graph.node if n.op_type == "Conv"]:
        weights = producers.get(conv.input[1])
        if conv.input[0] not in shapes or len(shapes[conv.input[0]]) != 2 + _SPATIAL or _auto_pad(conv) \
                not in ("NOTSET", "VALID") or weights is None or weights.op_type != "DequantizeLinear" \
                or weights.input[0] not in initializers:
            continue
        array = numpy_helper.to_array(initializers[weights.input[0]])
        if array.ndim != 2 + _SPATIAL:
            continue
        axes = _short_axes(conv, shapes[conv.input[0]], array.shape[2:])
        zero_points = _zero_points(weights, array.shape[0], initializers) if axes else None
        if zero_points is not None:
            _widen(graph, conv, weights, array, axes, shapes[conv.input[0]], zero_points, initializers)


def _check_weights(label: str, channels, kernel) -> None:
    """Refuse, before they are made, int8 weights to the map's end past the weights ming holds on chip."""
    size = math.prod(channels) * math.prod(kernel)
    if size > MAX_WEIGHT_BYTES:
        raise MingError(f"{label}: its one window position stops short of the map's end, and its window to the "
                        f"map's end ({'x'.join(map(str, kernel))}) takes {size / 2 ** 20:,.1f} MiB of weights; ming "
                        f"handles up to {MAX_WEIGHT_BYTES // 2 ** 20} MiB (all weights are held on chip); crop the "
                        "map to the window before the layer")


def _zero_points(dequantize: onnx.NodeProto, out_channels: int, initializers) -> np.ndarray | None:
    """The weights' zero point per output channel (0 without one), or None where the widened weights could not
    keep the quantization: a scale or zero point computed rather than an initializer, blocks, or an axis other
    than the output channels'."""
    if _attribute(dequantize, "block_size", 0):
        return None
    parameters = [name for name in dequantize.input[1:3] if name]
    if not parameters or any(name not in initializers for name in parameters):
        return None
    axis = _attribute(dequantize, "axis", 1) % (2 + _SPATIAL)
    values = [numpy_helper.to_array(initializers[name]) for name in parameters]
    if not all((v.size == 1 and v.ndim <= 1) or (v.shape == (out_channels,) and axis == 0) for v in values):
        return None
    if len(values) < 2:
        return np.zeros(out_channels, np.int64)
    return np.broadcast_to(values[1].reshape(-1).astype(np.int64), (out_channels,))


def _attribute(node: onnx.NodeProto, name: str, default: int) -> int:
    return next((a.i for a in node.attribute if a.name == name), default)


def _widen(graph: onnx.GraphProto, conv: onnx.NodeProto, dequantize: onnx.NodeProto, array: np.ndarray,
           axes: list[int], in_shape, zero_points: np.ndarray, initializers) -> None:
    strides = _ints(conv, "strides", [1] * _SPATIAL)
    dilations = _ints(conv, "dilations", [1] * _SPATIAL)
    pads = _ints(conv, "pads", [0] * 2 * _SPATIAL)
    kernel = list(array.shape[2:])
    taps = [np.arange(k) for k in kernel]
    for axis in axes:
        taps[axis] = taps[axis] * dilations[axis]
        kernel[axis] = in_shape[2 + axis] + pads[axis] + pads[_SPATIAL + axis]
        strides[axis] = dilations[axis] = 1
    _check_weights(f"node '{conv.name}' (Conv)", array.shape[:2], kernel)
    widened = np.empty((*array.shape[:2], *kernel), array.dtype)
    widened[...] = zero_points.astype(array.dtype).reshape(-1, 1, 1, 1)
    widened[np.ix_(range(array.shape[0]), range(array.shape[1]), *taps)] = array
    name = f"{conv.name or conv.output[0]}_whole_map_weights"
    graph.initializer.append(numpy_helper.from_array(widened, name))
    dequantized = helper.make_node("DequantizeLinear", [name, *dequantize.input[1:]], [f"{name}_dequantized"],
                                   name=f"{name}_dequantize")
    dequantized.attribute.extend(dequantize.attribute)
    graph.node.insert(list(graph.node).index(conv), dequantized)
    conv.input[1] = dequantized.output[0]
    kept = [a for a in conv.attribute if a.name not in ("kernel_shape", "strides", "dilations")]
    del conv.attribute[:]
    conv.attribute.extend(kept + [helper.make_attribute("kernel_shape", kernel),
                                  helper.make_attribute("strides", strides),
                                  helper.make_attribute("dilations", dilations)])
    if not any(dequantize.output[0] in n.input for n in graph.node):
        graph.node.remove(dequantize)
        if not any(dequantize.input[0] in n.input for n in graph.node):
            graph.initializer.remove(initializers[dequantize.input[0]])
