"""TFLite windows over a map one row high (or one column wide) with SAME padding, rewritten in the flatbuffer as
the one row (column) of their window that reads the map.

On an axis of size 1, SAME padding gives one output position whose window reads the map at one tap:
padded index `pad_before` = ((K - 1) * dilation) // 2, tap `pad_before / dilation` (none where that is not a
whole number); every other tap reads padding, which LiteRT's reference kernels skip (conv.h,
depthwise_conv.h, pooling.h test each tap against the image: a skipped tap adds nothing to a sum, to a maximum
or to an average's count). So CONV_2D and DEPTHWISE_CONV_2D become the same op with their filters' one row
(zero where no tap reads the map, for filters of zero point 0), MAX_POOL_2D and AVERAGE_POOL_2D a window of
that one row, each of stride 1 and dilation 1 along the axis: equal value for value. IREE would otherwise
lower the window over the padded rows as a reduction over an axis it drops from the output, which no stream
carries.
"""

from __future__ import annotations

import math

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from ming_py.errors import MingError
from ming_py.limits import MAX_WEIGHT_BYTES

from .tflite_fold import int8_constant, op_name, store_constant, tensor_like, tensor_name, zero_offset

_FILTERED = {"CONV_2D": (schema.Conv2DOptionsT,), "DEPTHWISE_CONV_2D": (schema.DepthwiseConv2DOptionsT,)}
_POOLS = ("MAX_POOL_2D", "AVERAGE_POOL_2D")


def unit_axis_windows_as_one_tap(model: schema.ModelT) -> None:
    """Every conv, depthwise conv and pool with SAME padding over an axis of size 1 (rows or columns) read
    through the one tap of its window on that axis."""
    graph = model.subgraphs[0]
    for operator in graph.operators:
        kind = op_name(model, operator)
        if kind not in _FILTERED and kind not in _POOLS or operator.builtinOptions is None:
            continue
        options = operator.builtinOptions
        shape = graph.tensors[operator.inputs[0]].shape
        if options.padding != schema.Padding.SAME or shape is None or len(shape) != 4:
            continue
        for axis in (1, 2):
            if int(shape[axis]) == 1 and _window(model, operator, kind, axis) > 1:
                _one_tap(model, operator, kind, axis)


def _window(model: schema.ModelT, operator, kind: str, axis: int) -> int:
    options = operator.builtinOptions
    if kind in _POOLS:
        return options.filterHeight if axis == 1 else options.filterWidth
    filters = model.subgraphs[0].tensors[operator.inputs[1]]
    return int(filters.shape[axis]) if filters.shape is not None and len(filters.shape) == 4 else 1


def _one_tap(model: schema.ModelT, operator, kind: str, axis: int) -> None:
    options = operator.builtinOptions
    size = _window(model, operator, kind, axis)
    dilation = 1
    if kind in _FILTERED:
        dilation = options.dilationHFactor if axis == 1 else options.dilationWFactor
    before = ((size - 1) * max(dilation, 1)) // 2
    if kind in _POOLS:
        if axis == 1:
            options.filterHeight, options.strideH = 1, 1
        else:
            options.filterWidth, options.strideW = 1, 1
        return
    graph = model.subgraphs[0]
    filters_tensor = graph.tensors[operator.inputs[1]]
    filters = int8_constant(model, operator.inputs[1])
    reads_the_map = before % max(dilation, 1) == 0
    if filters is None or not (reads_the_map or zero_offset(filters_tensor)):
        return
    tap = before // max(dilation, 1)
    row = np.take(filters, [tap], axis=axis) if reads_the_map else \
        np.zeros_like(np.take(filters, [0], axis=axis))
    one = tensor_like(model, filters_tensor, f"{tensor_name(graph.tensors[operator.outputs[0]])}/tap{axis}", [])
    store_constant(model, one, np.ascontiguousarray(row))
    operator.inputs = [operator.inputs[0], one] + list(operator.inputs[2:])
    if axis == 1:
        options.strideH, options.dilationHFactor = 1, 1
    else:
        options.strideW, options.dilationWFactor = 1, 1


def short_windows_to_the_map_end(model: schema.ModelT) -> None:
    """Every CONV_2D and DEPTHWISE_CONV_2D with one output position along an axis whose window stops short of
    the map's end (a stride larger than the window on a map a little larger than it: a 3x3 window of stride 6
    on an 8x8 map), with no padding (VALID, or SAME that pads nothing), and filters of zero point 0 (as int8
    filters are), rewritten with that axis's taps spread to dilation 1 and zero filters up to the map's end,
    stride 1, VALID: the one position sums the same products, and the layer is a window as large as the map,
    which IREE lowers whatever the map's channels."""
    graph = model.subgraphs[0]
    for operator in graph.operators:
        if op_name(model, operator) not in _FILTERED or operator.builtinOptions is None:
            continue
        shape = graph.tensors[operator.inputs[0]].shape
        filters = int8_constant(model, operator.inputs[1])
        if shape is None or len(shape) != 4 or filters is None or filters.ndim != 4 \
                or not zero_offset(graph.tensors[operator.inputs[1]]):
            continue
        options = operator.builtinOptions
        axes = [axis for axis in (1, 2) if _short_of_the_end(options, axis, int(shape[axis]), filters.shape[axis])]
        if axes and (options.padding == schema.Padding.VALID or not any(
                _same_padding(options, axis, int(shape[axis]), filters.shape[axis]) for axis in (1, 2))):
            _to_the_map_end(model, operator, filters, axes, shape)


def _stride_dilation(options, axis: int) -> tuple[int, int]:
    if axis == 1:
        return max(options.strideH, 1), max(options.dilationHFactor, 1)
    return max(options.strideW, 1), max(options.dilationWFactor, 1)


def _same_padding(options, axis: int, size: int, taps: int) -> int:
    """The rows (columns) SAME padding adds along `axis` (LiteRT's ComputePaddingHeightWidth)."""
    stride, dilation = _stride_dilation(options, axis)
    return max((-(-size // stride) - 1) * stride + dilation * (taps - 1) + 1 - size, 0)


def _short_of_the_end(options, axis: int, size: int, taps: int) -> bool:
    """Whether the window has one position along `axis` that reads the map without padding and stops before
    its end (SAME pads nothing where the window is no larger than the map and one position covers it)."""
    stride, dilation = _stride_dilation(options, axis)
    extent = dilation * (taps - 1) + 1
    if options.padding == schema.Padding.SAME:
        one_position = -(-size // stride) == 1
    else:
        one_position = (size - extent) // stride == 0
    return one_position and extent < size


def _to_the_map_end(model: schema.ModelT, operator, filters: np.ndarray, axes: list[int], shape) -> None:
    options = operator.builtinOptions
    kernel = list(filters.shape)
    taps = [np.arange(n) for n in filters.shape]
    for axis in axes:
        stride, dilation = _stride_dilation(options, axis)
        taps[axis] = taps[axis] * dilation
        kernel[axis] = int(shape[axis])
        if axis == 1:
            options.strideH, options.dilationHFactor = 1, 1
        else:
            options.strideW, options.dilationWFactor = 1, 1
    graph = model.subgraphs[0]
    label = f"node '{tensor_name(graph.tensors[operator.outputs[0]])}' ({op_name(model, operator)})"
    if math.prod(kernel) > MAX_WEIGHT_BYTES:
        raise MingError(f"{label}: its one window position stops short of the map's end, and its window to the "
                        f"map's end ({kernel[1]}x{kernel[2]}) takes {math.prod(kernel) / 2 ** 20:,.1f} MiB of "
                        f"weights; ming handles up to {MAX_WEIGHT_BYTES // 2 ** 20} MiB (all weights are held on "
                        "chip); crop the map to the window before the layer")
    options.padding = schema.Padding.VALID  # SAME padded nothing (`short_windows_to_the_map_end`)
    widened = np.zeros(kernel, np.int8)
    widened[np.ix_(*taps)] = filters
    name = f"{tensor_name(graph.tensors[operator.outputs[0]])}/to_the_map_end"
    whole = tensor_like(model, graph.tensors[operator.inputs[1]], name, [])
    store_constant(model, whole, widened)
    operator.inputs = [operator.inputs[0], whole] + list(operator.inputs[2:])
