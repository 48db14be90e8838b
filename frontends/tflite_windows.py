"""TFLite windows over a map one row high (or one column wide) with SAME padding, rewritten in the flatbuffer as
the one row (column) of their window that reads the map.

On an axis of size 1, SAME padding gives one output position whose window reads the map at one tap:
padded index `pad_before` = ((K - 1) * dilation) // 2, tap `pad_before / dilation` (none where that is not a
whole number); every other tap reads padding, which LiteRT's reference kernels skip (conv.h,
depthwise_conv.h, pooling.h test each tap against the image: a skipped tap adds nothing to a sum, to a maximum
or to an average's count). So CONV_2D and DEPTHWISE_CONV_2D become the same op with their filters' one row
(zero where no tap reads the map), MAX_POOL_2D and AVERAGE_POOL_2D a window of that one row, each of stride 1
and dilation 1 along the axis: equal value for value. IREE would otherwise lower the window over the padded
rows as a reduction over an axis it drops from the output, which no stream carries.
"""

from __future__ import annotations

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from .tflite_fold import int8_constant, op_name, store_constant, tensor_like, tensor_name

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
    if filters is None:
        return
    tap = before // max(dilation, 1)
    row = np.take(filters, [tap], axis=axis) if before % max(dilation, 1) == 0 else \
        np.zeros_like(np.take(filters, [0], axis=axis))
    one = tensor_like(model, filters_tensor, f"{tensor_name(graph.tensors[operator.outputs[0]])}/tap{axis}", [])
    store_constant(model, one, np.ascontiguousarray(row))
    operator.inputs = [operator.inputs[0], one] + list(operator.inputs[2:])
    if axis == 1:
        options.strideH, options.dilationHFactor = 1, 1
    else:
        options.strideW, options.dilationWFactor = 1, 1
