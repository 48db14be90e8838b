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

from .onnx_converters import _static_shapes

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
    shapes = _static_shapes(model)
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
        if axes:
            _widen(graph, conv, weights, array, axes, shapes[conv.input[0]], initializers)


def _check_weights(label: str, channels, kernel) -> None:
    """Refuse, before they are made, int8 weights to the map's end past the weights ming holds on chip."""
    size = math.prod(channels) * math.prod(kernel)
    if size > MAX_WEIGHT_BYTES:
        raise MingError(f"{label}: its one window position stops short of the map's end, and its window to the "
                        f"map's end ({'x'.join(map(str, kernel))}) takes {size / 2 ** 20:,.1f} MiB of weights; ming "
                        f"handles up to {MAX_WEIGHT_BYTES // 2 ** 20} MiB (all weights are held on chip); crop the "
                        "map to the window before the layer")


def _zero_points(dequantize: onnx.NodeProto, out_channels: int, initializers) -> np.ndarray:
    """The weights' zero point per output channel (0 without one)."""
    if len(dequantize.input) < 3 or not dequantize.input[2]:
        return np.zeros(out_channels, np.int64)
    value = numpy_helper.to_array(initializers[dequantize.input[2]]).reshape(-1).astype(np.int64)
    return np.broadcast_to(value, (out_channels,)) if value.size == 1 else value


def _widen(graph: onnx.GraphProto, conv: onnx.NodeProto, dequantize: onnx.NodeProto, array: np.ndarray,
           axes: list[int], in_shape, initializers) -> None:
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
    zero_points = _zero_points(dequantize, array.shape[0], initializers)
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
