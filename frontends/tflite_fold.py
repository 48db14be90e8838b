"""Shape arithmetic of a TFLite model, evaluated in the flatbuffer before the TOSA conversion.

A Keras 3 model exported with a symbolic batch computes the target shape of a Flatten, Reshape or
UpSampling2D at run time: SHAPE -> STRIDED_SLICE -> PACK or CONCATENATION (GATHER in some exports)
-> RESHAPE. Once the batch is fixed (`tflite_model.fix_symbolic_batch`) each of these values is a
constant. `fold_shape_arithmetic` evaluates them with numpy, following TFLite's kernels
(tensorflow/lite/kernels/shape.cc, strided_slice.cc with reference_ops::StridedSlice, pack.cc,
concatenation.cc, gather.cc), stores each result as a constant tensor and removes the op; then every
RESHAPE whose target shape is now constant gets the output shape it computes (the converter writes a
placeholder such as [1, 1, 12, 16] for an output whose signature was [-1, -1, 12, 16]).
What does not fold (a shape read from a dimension still symbolic, an op over values of a map) is
refused by name; a STRIDED_SLICE of an int8 map (Keras' `x[..., a:b]`) is no shape arithmetic and stays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from ming_py.errors import MingError

SHAPE_OPS = frozenset({"SHAPE", "STRIDED_SLICE", "PACK", "GATHER"})  # ming folds them (a STRIDED_SLICE of a map stays)
_INTEGER_TYPES = {schema.TensorType.INT32: np.int32, schema.TensorType.INT64: np.int64}
_OP_NAMES = {value: name for name, value in vars(schema.BuiltinOperator).items() if not name.startswith("_")}
_REEXPORT = "re-export the model with the TFLite converter"


def fold_shape_arithmetic(model: schema.ModelT, signatures: dict[int, list[int]] | None = None) -> None:
    """Replace every SHAPE_OPS op, and every CONCATENATION of integer vectors, by the constant it computes;
    then give each RESHAPE the output shape of its constant target shape, and the ops after it the shapes
    that follows (`_settle_dims`). `signatures`: the shape signatures as the model wrote them, of the tensors
    whose symbolic leading dim was taken for a batch of 1 (`tflite_model.fix_symbolic_batch`)."""
    graph = model.subgraphs[0]
    kept = []
    for operator in graph.operators:
        kind = op_name(model, operator)
        output = graph.tensors[operator.outputs[0]]
        if kind == "STRIDED_SLICE" and not _is_integer(output):
            kept.append(operator)  # a slice of a map (Keras' x[..., a:b]): a channel slice, taken as it is
        elif kind in SHAPE_OPS or (kind == "CONCATENATION" and _is_integer(output)):
            store_constant(model, operator.outputs[0], _evaluate(model, operator, kind))
        else:
            kept.append(operator)
    graph.operators = kept
    for operator in graph.operators:
        kind = op_name(model, operator)
        if kind == "RESHAPE":
            _settle_reshape(model, operator)
        else:
            _settle_dims(model, operator, kind, signatures or {})


def op_name(model: schema.ModelT, operator) -> str:
    code = model.operatorCodes[operator.opcodeIndex]
    return _OP_NAMES.get(max(code.builtinCode, code.deprecatedBuiltinCode), str(code.builtinCode))


def constant(model: schema.ModelT, index: int) -> np.ndarray | None:
    """The value of an integer tensor that has data, or None."""
    tensor = model.subgraphs[0].tensors[index]
    data = model.buffers[tensor.buffer].data
    if tensor.type not in _INTEGER_TYPES or data is None or len(data) == 0:
        return None
    shape = [int(d) for d in (tensor.shape if tensor.shape is not None else [])]
    return np.frombuffer(bytes(bytearray(data)), dtype=_INTEGER_TYPES[tensor.type]).reshape(shape)


def int8_constant(model: schema.ModelT, index: int) -> np.ndarray | None:
    """The value of an int8 tensor that has all its data (constant filters), or None (computed or of another
    type: left to the import)."""
    tensor = model.subgraphs[0].tensors[index]
    data = model.buffers[tensor.buffer].data
    if tensor.type != schema.TensorType.INT8 or data is None or len(data) != int(np.prod(tensor.shape)):
        return None
    return np.frombuffer(bytes(bytearray(data)), np.int8).reshape([int(d) for d in tensor.shape])


def zero_offset(tensor) -> bool:
    """Whether the tensor's quantization has no zero point other than 0: an int8 0 in its data is the real 0
    (filled filter taps add nothing)."""
    q = tensor.quantization
    return q is None or q.zeroPoint is None or not np.any(np.asarray(q.zeroPoint))


def tensor_name(tensor) -> str:
    return (tensor.name or b"").decode(errors="backslashreplace")


def _is_integer(tensor) -> bool:
    return tensor.type in _INTEGER_TYPES


def _label(model: schema.ModelT, operator, kind: str) -> str:
    return f"node '{tensor_name(model.subgraphs[0].tensors[operator.outputs[0]])}' ({kind})"


def _evaluate(model: schema.ModelT, operator, kind: str) -> np.ndarray:
    """The op's value; operands numpy cannot combine (shapes that do not stack, an axis out of range) are
    refused naming the node."""
    label = _label(model, operator, kind)
    output = model.subgraphs[0].tensors[operator.outputs[0]]
    if not _is_integer(output):
        raise MingError(f"{label}: ming takes {kind} only as int32/int64 shape arithmetic, which it folds to "
                        "constants (the shape computations Keras writes); this one computes a tensor of another "
                        "type (compute the map with the supported ops instead)")
    try:
        return _computed(model, operator, kind, label)
    except (ValueError, IndexError, TypeError, OverflowError) as error:  # numpy's AxisError is both of the first
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:160]
        raise MingError(f"{label}: its constant operands do not fold ({reason}); {_REEXPORT}") from None


def _computed(model: schema.ModelT, operator, kind: str, label: str) -> np.ndarray:
    graph = model.subgraphs[0]
    output = graph.tensors[operator.outputs[0]]
    if kind == "SHAPE":
        return _shape_of(graph.tensors[operator.inputs[0]], label).astype(_INTEGER_TYPES[output.type])
    values = [constant(model, index) for index in operator.inputs]
    if any(value is None for value in values):
        raise MingError(f"{label} reads a value known only at run time; ming folds shape arithmetic on static "
                        "shapes (export the model with a static input shape)")
    options = operator.builtinOptions
    if kind == "STRIDED_SLICE":
        result = strided_slice(*values, options or schema.StridedSliceOptionsT(), label)
    elif kind == "PACK":
        result = np.stack(values, axis=options.axis if options is not None else 0)
    elif kind == "GATHER":
        result = gather(*values, options or schema.GatherOptionsT(), label)
    else:  # CONCATENATION
        result = np.concatenate([np.atleast_1d(v) for v in values], axis=options.axis)
    return np.asarray(result).astype(_INTEGER_TYPES[output.type])


def _shape_of(tensor, label: str) -> np.ndarray:
    signature = tensor.shapeSignature if tensor.shapeSignature is not None else tensor.shape
    dims = [int(d) for d in (signature if signature is not None else [])]
    if any(d < 0 for d in dims):
        raise MingError(f"{label} reads the shape {dims} of a tensor with a dimension other than the batch left "
                        "symbolic; export the model with static shapes")
    return np.array(dims, dtype=np.int64)


def strided_slice(data: np.ndarray, begin: np.ndarray, end: np.ndarray, strides: np.ndarray,
                  options, label: str = "STRIDED_SLICE") -> np.ndarray:
    """TFLite's STRIDED_SLICE (begin, end and shrink masks, `offset`); ellipsis and new-axis masks are refused."""
    if options.ellipsisMask or options.newAxisMask:
        raise MingError(f"{label}: a strided slice with an ellipsis or new-axis mask is not folded; export the "
                        "model with static shapes")
    begin, end, strides = (np.asarray(v, np.int64).reshape(-1) for v in (begin, end, strides))
    if not len(begin) == len(end) == len(strides) <= data.ndim or not strides.all():
        raise MingError(f"{label}: begin, end and strides of lengths {len(begin)}, {len(end)}, {len(strides)} "
                        f"(a zero stride?) do not slice a rank-{data.ndim} tensor")
    index, shrunk = [], []
    for axis, (first, last, step) in enumerate(zip(begin.tolist(), end.tolist(), strides.tolist())):
        if options.offset:
            last += first
        if options.shrinkAxisMask >> axis & 1:
            position = first + data.shape[axis] if first < 0 else first
            if not 0 <= position < data.shape[axis]:
                raise MingError(f"{label}: index {first} is outside axis {axis} of size {data.shape[axis]}")
            index.append(position)
            shrunk.append(axis)
            continue
        index.append(slice(None if options.beginMask >> axis & 1 else first,
                            None if options.endMask >> axis & 1 else last, step))
    return data[tuple(index)]


def gather(params: np.ndarray, indices: np.ndarray, options, label: str = "GATHER") -> np.ndarray:
    """TFLite's GATHER without batch dimensions."""
    if options.batchDims:
        raise MingError(f"{label}: a gather with batch dimensions is not folded")
    axis = options.axis + params.ndim if options.axis < 0 else options.axis
    if not 0 <= axis < params.ndim or np.any((indices < 0) | (indices >= params.shape[axis])):
        raise MingError(f"{label}: indices {np.asarray(indices).tolist()} are outside axis {options.axis} of "
                        f"a {list(params.shape)} tensor")
    return np.take(params, indices, axis=axis)


def store_constant(model: schema.ModelT, index: int, value: np.ndarray) -> None:
    """Tensor `index` becomes the constant `value` (in a buffer of its own)."""
    tensor = model.subgraphs[0].tensors[index]
    buffer = schema.BufferT()
    buffer.data = np.frombuffer(np.ascontiguousarray(value).tobytes(), dtype=np.uint8).copy()
    model.buffers.append(buffer)
    tensor.buffer = len(model.buffers) - 1
    tensor.shape = list(value.shape)
    tensor.shapeSignature = None


# ops whose output has the shape of their first input (element-wise, tables, the host boundary)
_SAME_SHAPE_OPS = frozenset({"LOGISTIC", "TANH", "HARD_SWISH", "LEAKY_RELU", "ELU", "PRELU", "RELU", "RELU6",
                             "RELU_N1_TO_1", "QUANTIZE", "DEQUANTIZE", "SOFTMAX", "ADD", "MUL", "MAXIMUM",
                             "MINIMUM"})


def _settle_dims(model: schema.ModelT, operator, kind: str, signatures: dict[int, list[int]]) -> None:
    """An op's output shape from its inputs' static shapes where its signature left a dim symbolic: a
    CONCATENATION sums them along its axis, a SQUEEZE drops its axes, an element-wise op keeps its input's.

    A symbolic leading dim is the batch only until a RESHAPE merges the batch into another axis (SSD's box heads
    reshaped to [-1, 4] and concatenated along the anchors): there the converter writes [-1, 4] and a
    placeholder [1, 4], and the batch of 1 would say 1 row where the RESHAPE (settled from its target) gives
    N. The shapes written after a settled RESHAPE are replaced by those its inputs give; a shape the
    signature contradicts, and the other ops, stay as written."""
    graph = model.subgraphs[0]
    index = operator.outputs[0]
    output = graph.tensors[index]
    signature = signatures.get(index, output.shapeSignature)
    if signature is None or not any(int(d) < 0 for d in signature) or \
            kind not in _SAME_SHAPE_OPS | {"CONCATENATION", "SQUEEZE"}:
        return
    inputs = [graph.tensors[i] for i in operator.inputs if i >= 0]
    if any(t.shapeSignature is not None and any(int(d) < 0 for d in t.shapeSignature) for t in inputs):
        return  # an input still open: nothing to settle from
    shape = _settled_shape(operator, kind, [[int(d) for d in t.shape] for t in inputs])
    if shape is None or len(shape) != len(signature) or \
            any(int(d) >= 0 and int(d) != size for d, size in zip(signature, shape)):
        return  # the signature says otherwise: left to the converter's own check
    output.shape = shape
    output.shapeSignature = list(shape)


def _settled_shape(operator, kind: str, shapes: list[list[int]]) -> list[int] | None:
    shape = list(shapes[0])
    if kind == "CONCATENATION":
        axis = operator.builtinOptions.axis if operator.builtinOptions is not None else 0
        axis = axis + len(shape) if axis < 0 else axis
        if not 0 <= axis < len(shape) or any(len(s) != len(shape) for s in shapes):
            return None
        shape[axis] = sum(s[axis] for s in shapes)
    elif kind == "SQUEEZE":
        dims = list(operator.builtinOptions.squeezeDims or []) if operator.builtinOptions is not None else []
        dims = [d + len(shape) if d < 0 else d for d in dims] or [a for a, size in enumerate(shape) if size == 1]
        shape = [size for a, size in enumerate(shape) if a not in dims]
    elif kind in ("ADD", "MUL", "MAXIMUM", "MINIMUM") and any(s != shape for s in shapes):
        return None  # a broadcast: not settled here
    return shape


def _settle_reshape(model: schema.ModelT, operator) -> None:
    """The output shape of a RESHAPE from its constant target shape (its `-1` resolved)."""
    graph = model.subgraphs[0]
    label = _label(model, operator, "RESHAPE")
    source, output = graph.tensors[operator.inputs[0]], graph.tensors[operator.outputs[0]]
    if len(operator.inputs) > 1 and operator.inputs[1] >= 0:
        target = constant(model, operator.inputs[1])
        if target is None:
            raise MingError(f"{label}: its target shape is computed at run time from values ming cannot fold; "
                            "export the model with static shapes")
    elif operator.builtinOptions is not None and operator.builtinOptions.newShape is not None:
        target = np.asarray(operator.builtinOptions.newShape)
    else:
        return  # the output tensor's own shape is the target
    shape = reshaped(list(source.shape), [int(d) for d in np.asarray(target).reshape(-1)], label)
    output.shape = shape
    output.shapeSignature = list(shape)


def reshaped(shape: list[int], target: list[int], label: str = "RESHAPE") -> list[int]:
    """`target` with its one `-1` resolved so that it holds as many elements as `shape`."""
    size, known = math.prod(shape), math.prod(d for d in target if d != -1)
    unknown = target.count(-1)
    if unknown > 1 or any(d < -1 for d in target) or known == 0 or \
            (unknown == 0 and known != size) or (unknown == 1 and size % known):
        raise MingError(f"{label}: a {shape} tensor cannot be reshaped to {target}; re-export the model "
                        "with the TFLite converter")
    return [size // known if d == -1 else d for d in target]


# ---- RESIZE_NEAREST_NEIGHBOR (and RESIZE_BILINEAR at factor 1) as Keras' repeats ----------------------------

RESIZE_OPS = frozenset({"RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR"})


@dataclass(frozen=True)
class Resizes:
    """What `resizes_as_repeats` wrote: each TILE's output name -> the resize's output name (the node's name),
    and per bilinear resize (by that name) its row and column tables (`bilinear_tables`)."""

    tiles: dict[str, str]
    bilinear: dict[str, tuple[tuple, tuple]]


def resizes_as_repeats(model: schema.ModelT) -> Resizes:
    """Every resize by whole factors written as Keras' UpSampling2D writes it (per axis: EXPAND_DIMS after
    the axis, TILE along the new axis, RESHAPE into the axis), which the frontend lifts as one `Upsample`:
    a nearest resize where it copies each input pixel, a bilinear one as the stand-in of the map's shape that
    the frontend replaces by its interpolation (its tables returned); a resize by 1 x 1 as a RESHAPE to its
    own shape. The other resizes are refused by name."""
    graph = model.subgraphs[0]
    kept, tiles, bilinear = [], {}, {}
    for operator in graph.operators:
        kind = op_name(model, operator)
        if kind not in RESIZE_OPS:
            kept.append(operator)
            continue
        factors = _resize_factors(model, operator, kind)
        written = _repeats(model, operator, factors)
        name = tensor_name(graph.tensors[operator.outputs[0]])
        tiles |= {tensor_name(graph.tensors[op.outputs[0]]): name for op in written if op_name(model, op) == "TILE"}
        if kind == "RESIZE_BILINEAR" and factors != (1, 1):
            (_, height, width, _), (_, out_h, out_w, _) = (graph.tensors[i].shape
                                                            for i in (operator.inputs[0], operator.outputs[0]))
            options = operator.builtinOptions or schema.ResizeBilinearOptionsT()
            flags = bool(options.alignCorners), bool(options.halfPixelCenters)
            bilinear[name] = (bilinear_tables(int(height), int(out_h), *flags),
                              bilinear_tables(int(width), int(out_w), *flags))
        kept.extend(written)
    graph.operators = kept
    return Resizes(tiles, bilinear)


def bilinear_tables(in_size: int, out_size: int, align_corners: bool,
                    half_pixel_centers: bool) -> tuple[tuple[int, int, int, int], ...]:
    """Per output index, (i0, i1, weight of i0, weight of i1) in 1/1024 as LiteRT's int8 RESIZE_BILINEAR
    computes them (tensorflow/lite/kernels/internal/reference/resize_bilinear.h: ResizeBilinearInteger and
    ComputeInterpolationValuesInteger, C++ integer division toward zero)."""
    def divide(a: int, b: int) -> int:  # C++'s, toward zero
        quotient = abs(a) // b
        return quotient if a >= 0 else -quotient

    scale = divide(1024 * in_size + out_size // 2, out_size)
    if align_corners and out_size > 1:
        scale = divide(1024 * (in_size - 1) + (out_size - 1) // 2, out_size - 1)
    tables = []
    for index in range(out_size):
        scaled = index * scale + scale // 2 - 512 if half_pixel_centers else index * scale
        low, high = max(divide(scaled, 1024), 0), min(divide(scaled + 1023, 1024), in_size - 1)
        fraction = scaled - 1024 * low
        tables.append((low, high, 1024 - fraction, fraction))
    return tuple(tables)


def nearest_indices(in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool) -> np.ndarray:
    """The input index each output index reads in LiteRT's RESIZE_NEAREST_NEIGHBOR, in float32 as
    tensorflow/lite/kernels/internal/reference/resize_nearest_neighbor.h (GetNearestNeighbor) computes it."""
    if align_corners and out_size > 1:
        scale = np.float32(in_size - 1) / np.float32(out_size - 1)
    else:
        scale = np.float32(in_size) / np.float32(out_size)
    offset = np.float32(0.5 if half_pixel_centers else 0.0)
    positions = (np.arange(out_size, dtype=np.float32) + offset) * scale
    rounded = np.where(positions >= 0, np.floor(positions + np.float32(0.5)), np.ceil(positions - np.float32(0.5)))
    index = (rounded if align_corners else np.floor(positions)).astype(np.int64)  # TfLiteRound: half away from 0
    index = np.minimum(index, in_size - 1)
    return np.maximum(index, 0) if half_pixel_centers else index


def _resize_factors(model: schema.ModelT, operator, kind: str) -> tuple[int, int]:
    """(rows, columns) the resize repeats each pixel by; anything else refused naming the node."""
    graph = model.subgraphs[0]
    label = _label(model, operator, kind)
    source, output = graph.tensors[operator.inputs[0]], graph.tensors[operator.outputs[0]]
    if _quantization_of(source) != _quantization_of(output):
        raise MingError(f"{label}: its input and output quantization differ ({_quantization_of(source)} vs "
                        f"{_quantization_of(output)}); TFLite's int8 resize keeps its input's (re-convert the model)")
    size = constant(model, operator.inputs[1])
    shape = [int(d) for d in (source.shape if source.shape is not None else [])]
    if size is None or size.size != 2 or len(shape) != 4:
        raise MingError(f"{label}: ming resizes 4-d NHWC maps to a constant size; {_REEXPORT}")
    (h, w), (out_h, out_w) = shape[1:3], [int(d) for d in size.reshape(-1)]
    options = operator.builtinOptions
    align, half = (bool(options.alignCorners), bool(options.halfPixelCenters)) if options is not None else (False, False)
    if out_h % h or out_w % w or out_h < h or out_w < w:
        raise MingError(f"{label}: resizes {h}x{w} to {out_h}x{out_w}; ming takes only upsampling by whole factors "
                        "(resize to a whole multiple of the map's height and width)")
    factors = out_h // h, out_w // w
    if kind == "RESIZE_BILINEAR":
        if align and half:
            raise MingError(f"{label}: align_corners and half_pixel_centers together; LiteRT refuses the pair "
                            f"({_REEXPORT})")
        for axis, (n, m) in enumerate(((h, out_h), (w, out_w))):
            if max(low for low, *_ in bilinear_tables(n, m, align, half)) > n - 1:
                raise MingError(f"{label}: resizing {n} to {m} {('rows', 'columns')[axis]}, LiteRT's 10-bit scale "
                                f"reads past the last {('row', 'column')[axis]} of the map; resize by a power of 2 "
                                "or a smaller map")
        return factors
    for axis, (n, m, f) in enumerate(((h, out_h, factors[0]), (w, out_w, factors[1]))):
        if not np.array_equal(nearest_indices(n, m, align, half), np.arange(m) // f):
            raise MingError(f"{label}: with align_corners={align} and half_pixel_centers={half}, LiteRT's nearest "
                            f"resize of {n} to {m} along {('rows', 'columns')[axis]} is not a repeat of each pixel "
                            "by a whole factor; ming takes only such repeats (export with align_corners=False)")
    return factors


def _quantization_of(tensor) -> tuple[list[float], list[int]]:
    q = tensor.quantization
    if q is None or q.scale is None:
        return [], []
    return [float(np.float32(s)) for s in q.scale], [int(z) for z in (q.zeroPoint if q.zeroPoint is not None else [])]


def _repeats(model: schema.ModelT, operator, factors: tuple[int, int]) -> list:
    """The ops that repeat rows by factors[0], then columns by factors[1], into the resize's output."""
    graph = model.subgraphs[0]
    output = graph.tensors[operator.outputs[0]]
    name, shape = tensor_name(output), [int(d) for d in graph.tensors[operator.inputs[0]].shape]
    current, ops = operator.inputs[0], []
    repeated = [(axis, factor) for axis, factor in ((1, factors[0]), (2, factors[1])) if factor > 1]
    for position, (axis, factor) in enumerate(repeated):
        expanded = shape[:axis + 1] + [1] + shape[axis + 1:]
        tiled = shape[:axis + 1] + [factor] + shape[axis + 1:]
        shape = shape[:axis] + [shape[axis] * factor] + shape[axis + 1:]
        label = f"{name}/{('rows', 'columns')[axis - 1]}"
        expanded_index = tensor_like(model, output, f"{label}/expanded", expanded)
        tiled_index = tensor_like(model, output, f"{label}/tiled", tiled)
        last = position == len(repeated) - 1
        result = operator.outputs[0] if last else tensor_like(model, output, f"{label}/repeated", shape)
        multiples = [factor if a == axis + 1 else 1 for a in range(5)]
        ops += [_operator(model, "EXPAND_DIMS", [current, int32_constant(model, f"{label}/axis", [axis + 1])],
                          expanded_index),
                _operator(model, "TILE", [expanded_index, int32_constant(model, f"{label}/multiples", multiples)],
                          tiled_index),
                _operator(model, "RESHAPE", [tiled_index, int32_constant(model, f"{label}/shape", shape)], result)]
        current = result
    if not ops:  # 1 x 1: the map itself
        ops.append(_operator(model, "RESHAPE", [current, int32_constant(model, f"{name}/shape", shape)], operator.outputs[0]))
    return ops


def tensor_like(model: schema.ModelT, tensor, name: str, shape: list[int]) -> int:
    """A new tensor of `tensor`'s type and quantization, named `name`, of `shape`."""
    graph = model.subgraphs[0]
    new = schema.TensorT()
    new.name, new.type, new.quantization, new.shape = name.encode(), tensor.type, tensor.quantization, list(shape)
    model.buffers.append(schema.BufferT())
    new.buffer = len(model.buffers) - 1
    graph.tensors.append(new)
    return len(graph.tensors) - 1


def int32_constant(model: schema.ModelT, name: str, values: list[int]) -> int:
    index = tensor_like(model, schema.TensorT(), name, [len(values)])
    tensor = model.subgraphs[0].tensors[index]
    tensor.type, tensor.quantization = schema.TensorType.INT32, None
    store_constant(model, index, np.asarray(values, np.int32))
    return index


def operator_code(model: schema.ModelT, kind: str, version: int) -> int:
    """The index of `kind`'s operator code in the model, added (at `version`) where the model has none."""
    builtin = getattr(schema.BuiltinOperator, kind)
    codes = model.operatorCodes
    index = next((i for i, c in enumerate(codes) if max(c.builtinCode, c.deprecatedBuiltinCode) == builtin), None)
    if index is not None:
        return index
    code = schema.OperatorCodeT()
    code.builtinCode, code.deprecatedBuiltinCode, code.version = builtin, min(builtin, 127), version
    codes.append(code)
    return len(codes) - 1


def new_operator(model: schema.ModelT, kind: str, inputs: list[int], output: int, options, version: int = 1):
    """A new `kind` operator reading `inputs` into `output`, with its builtin `options` (a schema `...OptionsT`)."""
    new = schema.OperatorT()
    new.opcodeIndex, new.inputs, new.outputs = operator_code(model, kind, version), list(inputs), [output]
    new.builtinOptionsType = getattr(schema.BuiltinOptions, type(options).__name__.removesuffix("T"))
    new.builtinOptions = options
    return new


def _operator(model: schema.ModelT, kind: str, inputs: list[int], output: int):
    """One of the ops a repeat is written with (EXPAND_DIMS, TILE, RESHAPE)."""
    options = {"EXPAND_DIMS": schema.ExpandDimsOptionsT, "TILE": schema.TileOptionsT,
               "RESHAPE": schema.ReshapeOptionsT}[kind]()
    if kind == "RESHAPE":
        options.newShape = [int(d) for d in constant(model, inputs[1])]
    return new_operator(model, kind, inputs, output, options)
