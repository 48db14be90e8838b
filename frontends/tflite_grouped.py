"""TFLite's grouped CONV_2D with one channel per group, in or out, rewritten in the flatbuffer as one convolution
over the whole map.

A CONV_2D whose filters [O, H, W, 1] read one channel of a C-channel input (Keras' `Conv2D(O, groups=C)`) is C
groups of one channel: output channel o reads input channel o // (O / C), as DEPTHWISE_CONV_2D with depth
multiplier O / C does (tensorflow/lite/kernels/internal/reference/integer_ops/depthwise_conv.h). IREE lowers the
grouped form as C convolutions of one-channel maps and a concatenation, which a stream cannot carry (a map of
one channel per group); the depthwise form is one convolution over the map. The filters become [1, H, W, O]
(the same values, output channel last) with their per-channel scales along that axis; every output sums the
same products and is requantized with the same multiplier, so the result is equal value for value.

A CONV_2D of G groups with one output channel each (filters [G, H, W, C / G]) gives G one-channel maps, which
no stream carries either: it becomes the CONV_2D over all C channels whose filter o is group o's filter on its
channels and zero on the others (TFLite's int8 filters are symmetric, zero point 0: a zero weight adds
nothing to the sum), the same sums and multipliers at C / (C / G) = G times the multiplications.
"""

from __future__ import annotations

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from .tflite_fold import int8_constant, new_operator, op_name, store_constant, tensor_like, tensor_name, zero_offset


def one_channel_groups_as_whole_convs(model: schema.ModelT) -> None:
    """Every CONV_2D of one input channel per group (at least two groups) replaced by its DEPTHWISE_CONV_2D,
    every one of one output channel per group by the full CONV_2D of its filters, zero outside their group."""
    graph = model.subgraphs[0]
    for position, operator in enumerate(graph.operators):
        if _has_one_channel_groups(model, operator):
            graph.operators[position] = _as_depthwise(model, operator)
        elif _has_one_output_per_group(model, operator):
            _as_full_conv(model, operator)


def _has_one_output_per_group(model: schema.ModelT, operator) -> bool:
    if op_name(model, operator) != "CONV_2D":
        return False
    tensors = model.subgraphs[0].tensors
    source, weights = tensors[operator.inputs[0]], tensors[operator.inputs[1]]
    if source.shape is None or weights.shape is None or len(source.shape) != 4 or len(weights.shape) != 4:
        return False
    channels, out_channels, per_group = int(source.shape[3]), int(weights.shape[0]), int(weights.shape[3])
    return 1 < per_group < channels and channels == out_channels * per_group \
        and int8_constant(model, operator.inputs[1]) is not None and zero_offset(weights)


def _as_full_conv(model: schema.ModelT, operator) -> None:
    graph = model.subgraphs[0]
    weights_tensor = graph.tensors[operator.inputs[1]]
    filters = int8_constant(model, operator.inputs[1])  # [G, H, W, C / G]
    groups, height, width, per_group = filters.shape
    full = np.zeros((groups, height, width, groups * per_group), np.int8)
    for group in range(groups):
        full[group, :, :, group * per_group:(group + 1) * per_group] = filters[group]
    whole = tensor_like(model, weights_tensor, f"{tensor_name(graph.tensors[operator.outputs[0]])}/whole", [])
    store_constant(model, whole, full)
    operator.inputs = [operator.inputs[0], whole] + list(operator.inputs[2:])


def _has_one_channel_groups(model: schema.ModelT, operator) -> bool:
    if op_name(model, operator) != "CONV_2D" or operator.builtinOptions is None:
        return False
    tensors = model.subgraphs[0].tensors
    source, weights = tensors[operator.inputs[0]], tensors[operator.inputs[1]]
    if source.shape is None or weights.shape is None or len(source.shape) != 4 or len(weights.shape) != 4:
        return False
    channels, (out_channels, _, _, per_group) = int(source.shape[3]), (int(d) for d in weights.shape)
    return per_group == 1 and channels > 1 and out_channels % channels == 0 \
        and int8_constant(model, operator.inputs[1]) is not None


def _as_depthwise(model: schema.ModelT, operator):
    graph = model.subgraphs[0]
    source, weights_tensor = graph.tensors[operator.inputs[0]], graph.tensors[operator.inputs[1]]
    filters = int8_constant(model, operator.inputs[1])  # [O, H, W, 1]
    depthwise = tensor_like(model, weights_tensor, f"{tensor_name(graph.tensors[operator.outputs[0]])}/depthwise",
                            [])
    store_constant(model, depthwise, np.ascontiguousarray(filters.transpose(3, 1, 2, 0)))  # [1, H, W, O]
    quantization = weights_tensor.quantization
    if quantization is not None:
        moved = schema.QuantizationParametersT()
        moved.scale, moved.zeroPoint = quantization.scale, quantization.zeroPoint
        moved.quantizedDimension = 3 if quantization.scale is not None and len(quantization.scale) > 1 else 0
        graph.tensors[depthwise].quantization = moved
    conv = operator.builtinOptions
    options = schema.DepthwiseConv2DOptionsT()
    options.padding, options.strideH, options.strideW = conv.padding, conv.strideH, conv.strideW
    options.dilationHFactor, options.dilationWFactor = conv.dilationHFactor, conv.dilationWFactor
    options.fusedActivationFunction = conv.fusedActivationFunction
    options.depthMultiplier = filters.shape[0] // int(source.shape[3])
    inputs = [operator.inputs[0], depthwise] + list(operator.inputs[2:])
    return new_operator(model, "DEPTHWISE_CONV_2D", inputs, operator.outputs[0], options, version=3)
