"""TFLite's TRANSPOSE_CONV as a convolution of its phases and a DEPTH_TO_SPACE, rewritten in the flatbuffer.

A transposed convolution of stride s writes output o = s * i + k - pad from input i and tap k
(tensorflow/lite/kernels/internal/reference/integer_ops/transpose_conv.h). Output s * m + r (phase r) takes
the taps k = k0 + s * t with k0 = (r + pad) mod s, from input m + q - t with q = (r + pad) div s: per phase
an ordinary correlation over the input, on a window common to all phases (taps a phase does not have are
zero weights). So the op is one CONV_2D with s * s * O output channels, phase (ry, rx) in channels
(ry * s + rx) * O + o, on the input padded by a PAD, followed by DEPTH_TO_SPACE with block s, which moves
each phase to its pixels. Every output value sums the same products as LiteRT's kernel and is requantized
with the same per-channel multiplier (the phase channels repeat the weight scales and the bias), so the
result is equal value for value. Refused by name: different strides along rows and columns, an output size
that is not s times the phase grid, a window that would need cropping.
"""

from __future__ import annotations

import math

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from ming_py.errors import MingError
from ming_py.limits import MAX_WEIGHT_BYTES

from .tflite_fold import (constant, int32_constant, new_operator, op_name, store_constant, tensor_like,
                          tensor_name)

_REEXPORT = "re-export the model with Conv2DTranspose(padding='same')"


def transpose_convs_as_phases(model: schema.ModelT) -> None:
    """Every TRANSPOSE_CONV replaced by PAD, CONV_2D and DEPTH_TO_SPACE, whose outputs are named after its own
    (`<name>/padded`, `<name>/phases`, then `<name>` itself)."""
    graph = model.subgraphs[0]
    kept = []
    for operator in graph.operators:
        kept.extend(_as_phases(model, operator) if op_name(model, operator) == "TRANSPOSE_CONV" else [operator])
    graph.operators = kept


def phase_taps(kernel: int, stride: int, pad: int) -> tuple[int, np.ndarray]:
    """(low padding, taps): taps[r, j] is the tap of the transposed kernel that phase r applies at window
    position j of a correlation over the input padded by `low` (-1: none)."""
    phases = []
    for r in range(stride):
        k0, q = (r + pad) % stride, (r + pad) // stride
        phases.append([(q - t, k0 + stride * t) for t in range(-(-(kernel - k0) // stride))])  # (offset, tap)
    offsets = [a for phase in phases for a, _ in phase]
    low, window = -min(offsets), max(offsets) - min(offsets) + 1
    taps = np.full((stride, window), -1, np.int64)
    for r, phase in enumerate(phases):
        for offset, tap in phase:
            taps[r, offset + low] = tap
    return low, taps


def _as_phases(model: schema.ModelT, operator) -> list:
    graph = model.subgraphs[0]
    output = graph.tensors[operator.outputs[0]]
    label = f"node '{tensor_name(output)}' (TRANSPOSE_CONV)"
    options = operator.builtinOptions or schema.TransposeConvOptionsT()
    stride = options.strideH
    if options.strideW != stride or stride < 1:
        raise MingError(f"{label}: strides {options.strideH}x{options.strideW}; ming takes a transposed convolution "
                        "with one stride along rows and columns (re-export it with equal strides)")
    weights_tensor, source = graph.tensors[operator.inputs[1]], graph.tensors[operator.inputs[2]]
    weights = _int8_constant(model, operator.inputs[1], label)
    out_channels, kernel_h, kernel_w, in_channels = weights.shape
    (_, height, width, _), (_, out_h, out_w, _) = source.shape, output.shape
    output_shape = constant(model, operator.inputs[0])
    written = [int(d) for d in output_shape.reshape(-1)] if output_shape is not None else None
    if written != [int(d) for d in output.shape]:
        raise MingError(f"{label}: its output_shape operand {written} is not the shape of its output "
                        f"{[int(d) for d in output.shape]}; re-export the model with a static output shape")
    if out_h % stride or out_w % stride:
        raise MingError(f"{label}: an output of {out_h}x{out_w} is not {stride} times a grid of phases; {_REEXPORT}")
    geometry = [_axis(size, out_size, kernel, stride, options.padding, label)
                for size, out_size, kernel in ((height, out_h, kernel_h), (width, out_w, kernel_w))]
    (low_h, taps_h, high_h), (low_w, taps_w, high_w) = geometry
    _check_phase_weights(label, stride, (out_channels, taps_h.shape[1], taps_w.shape[1], in_channels))
    phase_weights = np.zeros((stride, stride, out_channels, taps_h.shape[1], taps_w.shape[1], in_channels), np.int8)
    for ry in range(stride):
        for rx in range(stride):
            for jy, ky in enumerate(taps_h[ry]):
                for jx, kx in enumerate(taps_w[rx]):
                    if ky >= 0 and kx >= 0:
                        phase_weights[ry, rx, :, jy, jx] = weights[:, ky, kx]
    phase_count = stride * stride
    name = tensor_name(output)
    new_weights = tensor_like(model, weights_tensor, f"{name}/phase_weights", [])
    store_constant(model, new_weights, phase_weights.reshape(phase_count * out_channels, *phase_weights.shape[3:]))
    graph.tensors[new_weights].quantization = _repeated(weights_tensor.quantization, phase_count)
    new_bias = tensor_like(model, schema.TensorT(), f"{name}/phase_bias", [])
    graph.tensors[new_bias].type = schema.TensorType.INT32
    if len(operator.inputs) > 3 and operator.inputs[3] >= 0:
        bias = _bias(model, operator.inputs[3], label)
        quantization = _repeated(graph.tensors[operator.inputs[3]].quantization, phase_count)
    else:  # LiteRT's int8 CONV_2D needs one: zeros on the scale the product of the input's and the weights'
        bias = np.zeros(out_channels, np.int32)
        quantization = _repeated(_bias_quantization(source, weights_tensor, out_channels), phase_count)
    store_constant(model, new_bias, np.tile(bias, phase_count))
    graph.tensors[new_bias].quantization = quantization
    padded = tensor_like(model, source, f"{name}/padded", [1, height + low_h + high_h, width + low_w + high_w,
                                                           in_channels])
    pads = int32_constant(model, f"{name}/pads", [0, 0, low_h, high_h, low_w, high_w, 0, 0])
    graph.tensors[pads].shape = [4, 2]
    phases = tensor_like(model, output, f"{name}/phases", [1, out_h // stride, out_w // stride,
                                                            phase_count * out_channels])
    conv_options = schema.Conv2DOptionsT()
    conv_options.padding, conv_options.strideH, conv_options.strideW = schema.Padding.VALID, 1, 1
    conv_options.dilationHFactor = conv_options.dilationWFactor = 1
    conv_options.fusedActivationFunction = options.fusedActivationFunction
    depth_options = schema.DepthToSpaceOptionsT()
    depth_options.blockSize = stride
    return [new_operator(model, "PAD", [operator.inputs[2], pads], padded, schema.PadOptionsT()),
            new_operator(model, "CONV_2D", [padded, new_weights, new_bias], phases, conv_options, version=3),
            new_operator(model, "DEPTH_TO_SPACE", [phases], operator.outputs[0], depth_options)]


def _check_phase_weights(label: str, stride: int, phase_shape: tuple[int, int, int, int]) -> None:
    """Refuse, before they are made, phase weights (stride x stride copies of an [O, H, W, I] window) past the
    weights ming holds on chip."""
    size = stride * stride * math.prod(phase_shape)
    if size > MAX_WEIGHT_BYTES:
        raise MingError(f"{label}: as a convolution of its {stride}x{stride} phases its weights take "
                        f"{size / 2 ** 20:,.1f} MiB; ming handles up to {MAX_WEIGHT_BYTES // 2 ** 20} MiB (all weights "
                        "are held on chip); use a smaller stride (an upsampling before the convolution)")


def _axis(size: int, out_size: int, kernel: int, stride: int, padding: int, label: str):
    """(low padding, taps per phase, high padding) of one spatial axis."""
    if padding == schema.Padding.SAME:  # LiteRT's ComputePaddingHeightWidth over the output size
        grid = (out_size + stride - 1) // stride
        pad = max((grid - 1) * stride + kernel - out_size, 0) // 2
    else:
        pad = 0
    low, taps = phase_taps(kernel, stride, pad)
    high = out_size // stride + taps.shape[1] - 1 - low - size
    if high < 0:
        raise MingError(f"{label}: its phases would read {-high} rows or columns fewer than the input has; ming "
                        f"takes transposed convolutions whose output covers the input ({_REEXPORT})")
    return low, taps, high


def _int8_constant(model: schema.ModelT, index: int, label: str) -> np.ndarray:
    tensor = model.subgraphs[0].tensors[index]
    data = model.buffers[tensor.buffer].data
    if tensor.type != schema.TensorType.INT8 or data is None or len(tensor.shape) != 4:
        raise MingError(f"{label}: its weights are not a constant int8 [O, H, W, I] tensor; convert the model with "
                        "full integer quantization")
    return np.frombuffer(bytes(bytearray(data)), np.int8).reshape([int(d) for d in tensor.shape])


def _bias(model: schema.ModelT, index: int, label: str) -> np.ndarray:
    value = constant(model, index)
    if value is None or value.dtype != np.int32:
        raise MingError(f"{label}: its bias is not a constant int32 vector; convert the model with full integer "
                        "quantization")
    return value.reshape(-1)


def _bias_quantization(source, weights, channels: int):
    quantization = schema.QuantizationParametersT()
    weight_scales = np.broadcast_to(np.asarray(weights.quantization.scale, np.float64), (channels,))
    quantization.scale = [float(np.float32(source.quantization.scale[0] * s)) for s in weight_scales]
    quantization.zeroPoint, quantization.quantizedDimension = [0] * channels, 0
    return quantization


def _repeated(quantization, times: int):
    """Per-channel quantization parameters repeated for each phase (per-tensor ones kept)."""
    if quantization is None or quantization.scale is None or len(quantization.scale) <= 1:
        return quantization
    repeated = schema.QuantizationParametersT()
    repeated.scale = list(quantization.scale) * times
    repeated.zeroPoint = list(quantization.zeroPoint if quantization.zeroPoint is not None else
                              [0] * len(quantization.scale)) * times
    repeated.quantizedDimension = quantization.quantizedDimension
    return repeated
