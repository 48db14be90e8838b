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
refused by name.
"""

from __future__ import annotations

import math

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from ming_py.errors import MingError

SHAPE_OPS = frozenset({"SHAPE", "STRIDED_SLICE", "PACK", "GATHER"})  # ming takes them only folded
_INTEGER_TYPES = {schema.TensorType.INT32: np.int32, schema.TensorType.INT64: np.int64}
_OP_NAMES = {value: name for name, value in vars(schema.BuiltinOperator).items() if not name.startswith("_")}
_REEXPORT = "re-export the model with the TFLite converter"


def fold_shape_arithmetic(model: schema.ModelT) -> None:
    """Replace every SHAPE_OPS op, and every CONCATENATION of integer vectors, by the constant it computes;
    then give each RESHAPE the output shape of its constant target shape."""
    graph = model.subgraphs[0]
    kept = []
    for operator in graph.operators:
        kind = op_name(model, operator)
        if kind in SHAPE_OPS or (kind == "CONCATENATION" and _is_integer(graph.tensors[operator.outputs[0]])):
            _store(model, operator.outputs[0], _evaluate(model, operator, kind))
        else:
            kept.append(operator)
    graph.operators = kept
    for operator in graph.operators:
        if op_name(model, operator) == "RESHAPE":
            _settle_reshape(model, operator)


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


def _store(model: schema.ModelT, index: int, value: np.ndarray) -> None:
    """Tensor `index` becomes the constant `value` (in a buffer of its own)."""
    tensor = model.subgraphs[0].tensors[index]
    buffer = schema.BufferT()
    buffer.data = np.frombuffer(np.ascontiguousarray(value).tobytes(), dtype=np.uint8).copy()
    model.buffers.append(buffer)
    tensor.buffer = len(model.buffers) - 1
    tensor.shape = list(value.shape)
    tensor.shapeSignature = None


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
