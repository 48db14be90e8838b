"""Legacy uint8 TFLite models (TF1 quantization-aware training, `inference_type=tf.uint8`) rewritten in the
flatbuffer into the int8 model that computes the same integers shifted by -128, before the TOSA conversion.

A uint8 tensor q with zero point z holds the values of the int8 tensor q - 128 with zero point z - 128 and the
same scale. LiteRT's uint8 reference kernels compute on q - z (or on maxima, copies and window sums), so the
int8 kernels on the shifted tensors give the shifted results, op by op:

* CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED (reference_ops::Conv, DepthwiseConv with
  kAwayFromZero rounding, FullyConnected): acc = sum (x - zx)(w - zw) + bias, requantized by
  MultiplyByQuantizedMultiplier with x_scale * w_scale / y_scale, + y_zero_point, clamped. The int8 kernels
  take weights with zero point 0, so the weights become w - zw. That is int8 only where the weights lie
  within 127 of their zero point; TF1's asymmetric weights span up to [-255, 255] (in Coral's MobileNetV1
  63 of 463,856 weights leave int8). Then each weight is written as the sum of int8 parts (`int8_parts`:
  a = clip(w - zw, -128, 127), b = the rest, and a third, 1, where a weight is 255 above a zero point 0), and
  the kernel sums the products of every part: a convolution or dense layer reads its input followed again by
  the input channels where a later part is not 0, in aligned blocks of 8 (SLICEs of the channels and a
  CONCATENATION, same quantization: copies), with weights [a | b of those channels | ...]; a depthwise
  convolution reads its input with every column repeated once per part (RESIZE_NEAREST_NEIGHBOR by 1 x P, the
  padding made explicit by a PAD of the zero point after it) through a window P times as wide with stride
  P * s along the columns, the parts at the copies of each tap. Every accumulator is the model's, the bias
  and the requantization are unchanged.
  LiteRT's int8 reference FULLY_CONNECTED rounds in float where the uint8 one rounds in fixed point: `finish`
  gives the dense layers of a uint8 model the fixed-point rule back.
* MAX_POOL_2D, RESHAPE, SQUEEZE, EXPAND_DIMS, PAD (of the zero point), CONCATENATION of inputs quantized as
  its output: maxima and copies, the same on shifted values.
* ADD (reference_ops::Add): the same fixed-point sum of (x - zero point) << 20 as the int8 kernel.
* AVERAGE_POOL_2D: uint8 rounds sum / n half up (the sum is never negative), int8 half away from zero on
  the shifted sum (TOSA's reciprocal 2^shift / n + 1 does it); no multiplier rounds the ties of both signs up
  where n is not a power of 2. `finish` has the average sum the uint8 values (`FixedPointAverage.domain`: + 128
  per valid element, the zero point less 128), checked against the uint8 rule on every sum of every number of
  valid elements (refused by name where it differs).
* SOFTMAX at an output (the host's, `ming_host.tflite_softmax`): uint8 output scale 1/256, zero point 0 is the
  int8 one of zero point -128; the differences to the maximum do not change.
* QUANTIZE (uint8 to uint8 requantization, float to uint8 at the input) and DEQUANTIZE: on q - z.
Any other op reading or writing a uint8 tensor is refused by name. The model's uint8 input and outputs
become int8 ones whose values the host shifts (`GraphInput/GraphOutput.dtype == "uint8"`), so `ming
reference`, the C-simulation and the deployed accelerator take and give the model's own uint8 arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from ming_py.errors import MingError
from ming_py.ir import FixedPointAverage, FixedPointRequant, Graph
from ming_py import numerics

from .tflite_fold import int32_constant, new_operator, op_name, store_constant, tensor_like, tensor_name

MAC_OPS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"})
# ops whose uint8 and int8 reference kernels agree on shifted values (the module's docstring)
SHIFTABLE_OPS = MAC_OPS | frozenset({"MAX_POOL_2D", "AVERAGE_POOL_2D", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "PAD",
                                     "CONCATENATION", "ADD", "SOFTMAX", "QUANTIZE", "DEQUANTIZE"})
_UINT8, _INT8 = schema.TensorType.UINT8, schema.TensorType.INT8
_RECONVERT = "re-convert the model to int8 with the TFLite converter's full integer quantization"


@dataclass(frozen=True)
class LegacyUint8:
    """What the rewrite leaves for after the lifting: the model's ports that were uint8, its dense layers and
    its average pools (by output tensor name, the lifted kernels' `source`)."""

    inputs: frozenset[str] = frozenset()
    outputs: frozenset[str] = frozenset()
    dense: frozenset[str] = frozenset()
    average_pools: frozenset[str] = frozenset()

    def finish(self, graph: Graph) -> Graph:
        """The lifted graph of the rewritten model as the uint8 model's: uint8 ports, the uint8 kernels'
        rounding (see the module's docstring)."""
        if self == LegacyUint8():  # an int8 model
            return graph
        graph.inputs = [replace(i, dtype="uint8") if i.name in self.inputs else i for i in graph.inputs]
        graph.outputs = [replace(o, dtype="uint8") if o.name in self.outputs and o.dtype == "int8" else o
                         for o in graph.outputs]
        for kernel in graph.kernels():
            if kernel.source in self.dense and isinstance(kernel.epilogue, FixedPointRequant):
                kernel.epilogue.float32 = False  # reference_ops::FullyConnected (uint8) rounds in fixed point
        for kernel in graph.kernels():
            if kernel.source in self.average_pools and isinstance(kernel.epilogue, FixedPointAverage):
                kernel.epilogue = uint8_average(kernel.epilogue, kernel.source)
        return graph


def uint8_average(average: FixedPointAverage, node: str) -> FixedPointAverage:
    """`average` on the model's own uint8 values (`domain` 128), as LiteRT's uint8 AVERAGE_POOL_2D divides them,
    (sum + n / 2) / n, checked for every number n of valid elements on every sum of n values; the node is refused
    where TOSA's reciprocal of n does not give it."""
    uint8 = replace(average, domain=128)
    for count in range(1, len(average.multiplier)):
        if average.multiplier[count] == 0:
            continue
        sums = np.arange(0, 255 * count + 1, dtype=np.int64)
        expected = np.clip((sums + count // 2) // count - 128, average.qmin, average.qmax)
        ours = numerics.fixed_point_requantize(sums, int(average.multiplier[count]), int(average.shift[count]),
                                               average.double_round, average.zero_point - 128, average.qmin,
                                               average.qmax)
        if not np.array_equal(ours, expected):
            raise MingError(f"node '{node}' (AVERAGE_POOL_2D): TOSA's reciprocal of {count} divides "
                            f"{int(np.count_nonzero(ours != expected))} of the {sums.size} sums of {count} uint8 "
                            f"values otherwise than LiteRT's uint8 kernel; {_RECONVERT}")
    return uint8


def legacy_uint8_as_int8(model: schema.ModelT) -> LegacyUint8:
    """Rewrite a uint8 model in place into the int8 model of the same integers shifted by -128 (see the module's
    docstring); a model where no op computes on uint8 (`is_legacy_uint8`) is left as it is."""
    graph = model.subgraphs[0]
    if not is_legacy_uint8(model):
        return LegacyUint8()
    _check_ops(model)
    _check_quantization(model)
    macs = [op for op in graph.operators if op_name(model, op) in MAC_OPS and _reads_uint8(graph, op)]
    weights = {id(op): _centered_weights(model, op) for op in macs}
    ports = LegacyUint8(
        inputs=frozenset(tensor_name(graph.tensors[i]) for i in graph.inputs if graph.tensors[i].type == _UINT8),
        outputs=frozenset(tensor_name(graph.tensors[i]) for i in graph.outputs if graph.tensors[i].type == _UINT8),
        dense=frozenset(tensor_name(graph.tensors[op.outputs[0]]) for op in macs
                        if op_name(model, op) == "FULLY_CONNECTED"),
        average_pools=frozenset(tensor_name(graph.tensors[op.outputs[0]]) for op in graph.operators
                                if op_name(model, op) == "AVERAGE_POOL_2D" and _reads_uint8(graph, op)))
    weight_indices = {op.inputs[1] for op in macs}
    for index, tensor in enumerate(graph.tensors):
        if tensor.type == _UINT8 and index not in weight_indices:
            _shift(model, index)
    rewritten = []
    for operator in graph.operators:
        if id(operator) in weights:
            rewritten.extend(_with_int8_weights(model, operator, weights[id(operator)]))
        else:
            rewritten.append(operator)
    graph.operators = _in_dependency_order(graph, rewritten)
    return ports


def _reads_uint8(graph, operator) -> bool:
    return graph.tensors[operator.inputs[0]].type == _UINT8


def _in_dependency_order(graph, operators: list) -> list:
    """`operators` reordered (stably) so that each comes after the ops writing its inputs: a doubled map is
    written by a CONCATENATION put before the flatten that reads it."""
    written = {i for op in operators for i in op.outputs}
    ready = {i for i in range(len(graph.tensors)) if i not in written}
    ordered, pending = [], list(operators)
    while pending:
        position = next(k for k, op in enumerate(pending) if all(i < 0 or i in ready for i in op.inputs))
        op = pending.pop(position)
        ordered.append(op)
        ready.update(op.outputs)
    return ordered


def is_legacy_uint8(model: schema.ModelT) -> bool:
    """Whether an op computes on uint8 tensors (a legacy model). An int8 model whose uint8 input or outputs are
    only converted by a QUANTIZE next to them (TF2's `inference_input_type=tf.uint8`) is not: its boundary is
    the host's (`tflite_model.split_host_boundary`)."""
    graph = model.subgraphs[0]
    return any(op_name(model, op) not in _CONVERSIONS and any(
        graph.tensors[i].type == _UINT8 for i in (*op.inputs, *op.outputs) if i >= 0) for op in graph.operators)


_CONVERSIONS = frozenset({"QUANTIZE", "DEQUANTIZE"})


# ---- checks -------------------------------------------------------------------------------------


def _label(model: schema.ModelT, operator) -> str:
    graph = model.subgraphs[0]
    return f"node '{tensor_name(graph.tensors[operator.outputs[0]])}' ({op_name(model, operator)})"


def _check_ops(model: schema.ModelT) -> None:
    graph = model.subgraphs[0]
    for operator in graph.operators:
        kind = op_name(model, operator)
        touched = [graph.tensors[i] for i in (*operator.inputs, *operator.outputs) if i >= 0]
        if kind not in SHIFTABLE_OPS and any(t.type == _UINT8 for t in touched):
            raise MingError(f"{_label(model, operator)} computes on uint8 tensors; ming takes legacy uint8 models "
                            f"with {', '.join(sorted(SHIFTABLE_OPS))} ({_RECONVERT})")
        if kind == "CONCATENATION" and any(t.type == _UINT8 for t in touched) and \
                len({_quantization(t) for t in touched}) > 1:
            raise MingError(f"{_label(model, operator)} rescales its uint8 inputs (LiteRT's uint8 concatenation "
                            "rounds in float); ming takes a uint8 concatenation whose inputs are quantized as its "
                            f"output ({_RECONVERT})")
        if kind in MAC_OPS and graph.tensors[operator.inputs[0]].type == _UINT8 and \
                graph.tensors[operator.inputs[1]].type != _UINT8:
            raise MingError(f"{_label(model, operator)} multiplies uint8 inputs by weights that are not uint8; "
                            f"ming takes legacy uint8 models with uint8 weights ({_RECONVERT})")


def _check_quantization(model: schema.ModelT) -> None:
    for tensor in model.subgraphs[0].tensors:
        if tensor.type != _UINT8:
            continue
        q = tensor.quantization
        scales = [] if q is None or q.scale is None else list(q.scale)
        zero_points = [] if q is None or q.zeroPoint is None else [int(z) for z in q.zeroPoint]
        if len(scales) != 1 or len(zero_points) != 1:
            raise MingError(f"tensor '{tensor_name(tensor)}' is uint8 without one scale and zero point; ming takes "
                            f"uint8 tensors quantized per tensor ({_RECONVERT})")
        if not 0 <= zero_points[0] <= 255:
            raise MingError(f"tensor '{tensor_name(tensor)}' has a uint8 zero point {zero_points[0]} outside "
                            "0..255; the flatbuffer is damaged or hand-edited")


def _quantization(tensor) -> tuple:
    q = tensor.quantization
    if q is None or q.scale is None:
        return ()
    return tuple(float(np.float32(s)) for s in q.scale), tuple(int(z) for z in (q.zeroPoint or []))


# ---- the shift ----------------------------------------------------------------------------------


def _shift(model: schema.ModelT, index: int) -> None:
    """Tensor `index` (uint8) as int8: zero point - 128, constant values - 128, a quantization of its own."""
    tensor = model.subgraphs[0].tensors[index]
    shifted = schema.QuantizationParametersT()
    shifted.scale = [float(s) for s in tensor.quantization.scale]
    shifted.zeroPoint = [int(tensor.quantization.zeroPoint[0]) - 128]
    shifted.quantizedDimension = 0
    tensor.quantization, tensor.type = shifted, _INT8
    data = model.buffers[tensor.buffer].data
    if data is not None and len(data):
        values = np.frombuffer(bytes(bytearray(data)), np.uint8).astype(np.int16) - 128
        store_constant(model, index, values.astype(np.int8).reshape([int(d) for d in tensor.shape]))


# ---- weights ------------------------------------------------------------------------------------


def _centered_weights(model: schema.ModelT, operator) -> np.ndarray:
    """The uint8 weights of a MAC op less their zero point (int64, the tensor's shape)."""
    tensor = model.subgraphs[0].tensors[operator.inputs[1]]
    data = model.buffers[tensor.buffer].data
    if data is None or len(data) == 0:
        raise MingError(f"{_label(model, operator)}: its weights are not constant; ming multiplies activations by "
                        "constant weights")
    values = np.frombuffer(bytes(bytearray(data)), np.uint8).reshape([int(d) for d in tensor.shape])
    return values.astype(np.int64) - int(tensor.quantization.zeroPoint[0])


def _weights_tensor(model: schema.ModelT, operator, name: str, values: np.ndarray) -> int:
    """A new int8 weights tensor of the op's weight scale and zero point 0 holding `values`."""
    graph = model.subgraphs[0]
    old = graph.tensors[operator.inputs[1]]
    quantization = schema.QuantizationParametersT()
    quantization.scale, quantization.zeroPoint = [float(old.quantization.scale[0])], [0]
    quantization.quantizedDimension = 0
    index = tensor_like(model, old, name, list(values.shape))
    graph.tensors[index].type, graph.tensors[index].quantization = _INT8, quantization
    store_constant(model, index, values.astype(np.int8))
    return index


def _with_int8_weights(model: schema.ModelT, operator, centered: np.ndarray) -> list:
    """The MAC op with int8 weights of zero point 0 and the ops that feed it (see the module's docstring)."""
    graph = model.subgraphs[0]
    name = tensor_name(graph.tensors[operator.outputs[0]])
    if centered.min() >= -128 and centered.max() <= 127:
        operator.inputs[1] = _weights_tensor(model, operator, f"{name}/weights_int8", centered)
        return [operator]
    parts = int8_parts(centered)
    if op_name(model, operator) == "DEPTHWISE_CONV_2D":
        return _depthwise_over_repeated_columns(model, operator, parts, name)
    return _over_channels_again(model, operator, parts, name)


def int8_parts(centered: np.ndarray) -> list[np.ndarray]:
    """int8 arrays summing to `centered` (|values| <= 255): clip(w, -128, 127), then the clipped rest while one is
    left. Two parts but where a weight is 255 above its zero point (zero point 0): 127 + 127 + 1."""
    parts, rest = [], centered
    while not parts or rest.any():
        parts.append(np.clip(rest, -128, 127))
        rest = rest - parts[-1]
    return parts


def _over_channels_again(model: schema.ModelT, operator, parts, name: str) -> list:
    """A CONV_2D or FULLY_CONNECTED reading its input followed again, for every part after the first, by the
    channels where that part has a nonzero weight, in aligned blocks (`_blocks_of`; a SLICE per run of them, the
    whole input where all are; CONCATENATION along the channels), with weights [a | b of those channels | ...]."""
    graph = model.subgraphs[0]
    a = parts[0]
    dense = op_name(model, operator) == "FULLY_CONNECTED"
    flatten = _flatten_into(model, operator) if dense else None
    reader = operator if flatten is None else flatten
    source = graph.tensors[reader.inputs[0]]
    shape = [int(d) for d in source.shape]
    if dense:
        if int(np.prod(shape[1:])) != a.shape[1] or (operator.builtinOptions is not None and
                                                     operator.builtinOptions.keepNumDims):
            raise MingError(f"{_label(model, operator)}: its input {shape} is not one row of its {a.shape[1]} "
                            f"weights; {_RECONVERT}")
        parts = [part.reshape([a.shape[0]] + shape[1:]) for part in parts]
    channels = shape[-1]
    pieces, ops, weights, slices = [reader.inputs[0]], [], [parts[0]], {}
    for part in parts[1:]:
        again = _blocks_of(np.flatnonzero(np.any(part.reshape(-1, channels) != 0, axis=0)), channels)
        weights.append(part[..., again])
        for start, stop in _runs(again):
            if (start, stop) not in slices:
                slices[start, stop] = _channel_slice(model, reader.inputs[0], start, stop, name, ops)
            pieces.append(slices[start, stop])
    weights = np.concatenate(weights, axis=-1)
    widened = tensor_like(model, source, f"{name}/channels_again", shape[:-1] + [weights.shape[-1]])
    options = schema.ConcatenationOptionsT()
    options.axis, options.fusedActivationFunction = len(shape) - 1, schema.ActivationFunctionType.NONE
    ops.append(new_operator(model, "CONCATENATION", pieces, widened, options))
    reader.inputs[0] = widened
    if flatten is not None:  # the flatten of the widened map: a longer row
        row = [1, int(np.prod(weights.shape[1:]))]
        graph.tensors[flatten.outputs[0]].shape = row
        graph.tensors[flatten.outputs[0]].shapeSignature = None
        if len(flatten.inputs) > 1:
            flatten.inputs[1] = int32_constant(model, f"{name}/channels_again/shape", row)
        if flatten.builtinOptions is not None and flatten.builtinOptions.newShape is not None:
            flatten.builtinOptions.newShape = row
    if dense:
        weights = weights.reshape(weights.shape[0], -1)
    operator.inputs[1] = _weights_tensor(model, operator, f"{name}/weights_split", weights)
    return ops + [operator]


def _channel_slice(model: schema.ModelT, index: int, start: int, stop: int, name: str, ops: list) -> int:
    """Channels start..stop of tensor `index`: the tensor itself where they are all, else a SLICE (added to `ops`)."""
    source = model.subgraphs[0].tensors[index]
    shape = [int(d) for d in source.shape]
    if stop - start == shape[-1]:
        return index
    piece = tensor_like(model, source, f"{name}/channels_{start}_{stop}", shape[:-1] + [stop - start])
    begin = int32_constant(model, f"{name}/channels_{start}_{stop}/begin", [0] * (len(shape) - 1) + [start])
    size = int32_constant(model, f"{name}/channels_{start}_{stop}/size", shape[:-1] + [stop - start])
    ops.append(new_operator(model, "SLICE", [index, begin, size], piece, schema.SliceOptionsT()))
    return piece


LANE_BLOCK = 8  # channels read again in whole aligned blocks of this many


def _blocks_of(channels_needed: np.ndarray, channels: int) -> np.ndarray:
    """The channels to read again: every aligned block of LANE_BLOCK channels holding a needed one, all of them
    where `channels` is no multiple of LANE_BLOCK. Streams carry channels in lanes that divide their channel
    counts: single channels read again would leave the widened input, and every stream tied to it, one lane
    wide."""
    block = LANE_BLOCK if channels % LANE_BLOCK == 0 else channels
    starts = np.unique(channels_needed // block) * block
    return (starts[:, None] + np.arange(block)).reshape(-1)


def _runs(indices: np.ndarray) -> list[tuple[int, int]]:
    """The runs of consecutive values of sorted `indices`, as (start, stop)."""
    runs: list[tuple[int, int]] = []
    for i in (int(v) for v in indices):
        if runs and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    return runs


def _flatten_into(model: schema.ModelT, operator):
    """The RESHAPE (a flatten) that writes the dense layer's input and nothing else reads, or None: the map's
    channels are taken again before it, so that the flatten stays the one ming streams into a dense layer (its
    weights permuted to the map's order)."""
    graph = model.subgraphs[0]
    index = operator.inputs[0]
    producer = next((op for op in graph.operators if index in op.outputs), None)
    readers = [op for op in graph.operators if index in op.inputs]
    if producer is None or op_name(model, producer) != "RESHAPE" or readers != [operator] or index in graph.outputs \
            or len(graph.tensors[producer.inputs[0]].shape) < 2:
        return None
    return producer


def _same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TFLite's SAME padding (low, high) of one axis (ComputePaddingHeightWidth)."""
    out = (size + stride - 1) // stride
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def _depthwise_over_repeated_columns(model: schema.ModelT, operator, parts, name: str) -> list:
    """A DEPTHWISE_CONV_2D over its input with every column repeated P times (P parts) and padded, a window P times
    as wide, stride P * s along the columns, the tap (kh, kw) of part p at column P * kw * dilation + p."""
    graph = model.subgraphs[0]
    options = operator.builtinOptions
    source = graph.tensors[operator.inputs[0]]
    _, height, width, channels = [int(d) for d in source.shape]
    copies = len(parts)
    _, kernel_h, kernel_w, out_channels = parts[0].shape
    dilation_h, dilation_w = max(options.dilationHFactor, 1), max(options.dilationWFactor, 1)
    span_h, span_w = (kernel_h - 1) * dilation_h + 1, (kernel_w - 1) * dilation_w + 1
    if options.padding == schema.Padding.SAME:
        top, bottom = _same_padding(height, span_h, options.strideH)
        left, right = _same_padding(width, span_w, options.strideW)
    else:
        top = bottom = left = right = 0
    weights = np.zeros((1, kernel_h, copies * span_w, out_channels), np.int64)
    for kw in range(kernel_w):
        for copy, part in enumerate(parts):
            weights[:, :, copies * kw * dilation_w + copy] = part[:, :, kw]
    label = f"{name}/columns_{copies}_times"
    repeated = tensor_like(model, source, label, [1, height, copies * width, channels])
    resize = schema.ResizeNearestNeighborOptionsT()
    resize.alignCorners, resize.halfPixelCenters = False, False
    size = int32_constant(model, f"{label}/size", [height, copies * width])
    padded = tensor_like(model, source, f"{label}/padded",
                         [1, height + top + bottom, copies * (width + left + right), channels])
    pads = int32_constant(model, f"{label}/pads", [0, 0, top, bottom, copies * left, copies * right, 0, 0])
    graph.tensors[pads].shape = [4, 2]
    ops = [new_operator(model, "RESIZE_NEAREST_NEIGHBOR", [operator.inputs[0], size], repeated, resize),
           new_operator(model, "PAD", [repeated, pads], padded, schema.PadOptionsT())]
    options.padding, options.strideW, options.dilationWFactor = schema.Padding.VALID, copies * options.strideW, 1
    operator.inputs[0] = padded
    operator.inputs[1] = _weights_tensor(model, operator, f"{name}/weights_split", weights)
    return ops + [operator]
