"""Converters' idioms rewritten into the int8 QDQ forms onnxruntime's quantizer writes, exactly.

tf2onnx (from an int8 TFLite model) and other exporters write a few patterns `quantize_static` never does;
each is rewritten into its quantize_static equivalent, which computes the same values:

* a dense layer as MatMul followed by an Add of its dequantized int32 bias: one Gemm with that bias as C
  (onnxruntime's MatMulAddFusion makes the same Gemm before its QDQ fusions);
* Squeeze and Unsqueeze (around pooling, Conv1D): a Reshape to the same static shape;
* an input's Reshape that only inserts unit axes followed by a Transpose (Conv1D's EXPAND_DIMS and layout
  change): the Transpose of the input first, then the Reshape, so that the Transpose is host layout;
* shape arithmetic (Keras 3's Flatten: Shape -> Slice -> Concat -> Reshape; PyTorch's `x.view(x.size(0), -1,
  k)`: Shape -> Gather -> Unsqueeze -> Concat -> Reshape; tf2onnx's anchor grids: Range, Cast, Expand, Tile,
  ConstantOfShape over the batch): with the batch fixed, its values are constants. Folding repeats until
  nothing changes (a Reshape folded to a static shape gives the next Shape its value). A folded value is
  bounded (`FOLD_LIMIT`): a node whose result would be larger stops the build with its name instead of
  allocating it.

Before any of that, `constants_as_initializers` takes what PyTorch's TorchScript exporter writes around its
QDQ pairs: Constant nodes (scales, zero points), a zero point made by ConstantOfShape -> Cast, Identity
nodes, and a Cast to the type its input already has between QuantizeLinear and DequantizeLinear.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from ming_py.errors import MingError
from ming_py.limits import MAX_FOLDED_VALUES

from .onnx_formats import element_types

# integer operators of shape arithmetic, folded where their inputs are constants
SHAPE_OPS = frozenset({"Shape", "Cast", "Slice", "Concat", "Gather", "Unsqueeze", "Squeeze", "Add", "Sub", "Mul",
                       "Div", "ReduceProd", "Identity"})


# operators folded where every input is a constant (never QuantizeLinear or DequantizeLinear: they stay the
# model's quantization)
CONSTANT_OPS = SHAPE_OPS | {"Constant", "ConstantOfShape", "Reshape", "Range", "Expand", "Tile", "Equal", "Where",
                            "Neg", "Floor", "Ceil", "Min", "Max"}

FOLD_LIMIT = MAX_FOLDED_VALUES  # the most values of one folded constant (ming_py/limits.py says why)


def constants_as_initializers(model: onnx.ModelProto) -> None:
    """Fold, in place, every node of `CONSTANT_OPS` whose inputs are constants into an initializer, and drop
    Identity nodes and Casts to their input's own type (their readers read the input)."""
    graph = model.graph
    if not any(n.op_type in CONSTANT_OPS for n in graph.node):
        return
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    outputs = {o.name for o in graph.output}
    types = element_types(model) if any(n.op_type == "Cast" for n in graph.node) else {}  # shape inference
    for node in list(graph.node):
        if node.op_type in CONSTANT_OPS and all(name in constants for name in node.input if name):
            value = _fold(node, constants, model.opset_import)
            constants[node.output[0]] = value
            graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
            graph.node.remove(node)
        elif (node.op_type == "Identity" or (node.op_type == "Cast" and _cast_type(node) == types.get(node.input[0]))) \
                and node.output[0] not in outputs:
            _bypass(graph, node)


def _cast_type(node: onnx.NodeProto) -> int | None:
    return next((a.i for a in node.attribute if a.name == "to"), None)


def _bypass(graph: onnx.GraphProto, node: onnx.NodeProto) -> None:
    """Remove a node that passes its one input through: its readers read that input."""
    source, target = node.input[0], node.output[0]
    for reader in graph.node:
        for i, name in enumerate(reader.input):
            if name == target:
                reader.input[i] = source
    graph.node.remove(node)


def rewrite_converter_idioms(model: onnx.ModelProto) -> None:
    """Rewrite, in place, the idioms above (the model's batch is already fixed to 1)."""
    _fold_shape_arithmetic(model)
    _squeezes_to_reshapes(model)
    _transpose_inputs_first(model)
    _dense_layers(model.graph, static_shapes(model))


def _transpose_inputs_first(model: onnx.ModelProto) -> None:
    """input -> Reshape (unit axes) -> Transpose becomes input -> Transpose -> Reshape where that is the same."""
    graph = model.graph
    initializers = {i.name for i in graph.initializer}
    shapes = static_shapes(model)
    for value in [v for v in graph.input if v.name not in initializers]:
        readers = [n for n in graph.node if value.name in n.input]
        if len(readers) != 1 or readers[0].op_type != "Reshape" or value.name not in shapes:
            continue
        reshape = readers[0]
        transposes = [n for n in graph.node if reshape.output[0] in n.input]
        if len(transposes) != 1 or transposes[0].op_type != "Transpose" or transposes[0].output[0] not in shapes:
            continue
        transpose = transposes[0]
        perm = next((list(a.ints) for a in transpose.attribute if a.name == "perm"), None)
        first = _input_permutation(shapes[value.name], shapes[reshape.output[0]], perm)
        if first is None:
            continue
        # input -> Transpose(first) -> Reshape(to the Transpose's output shape)
        moved = f"{value.name}_transposed"
        shape_name = f"{reshape.name}_transposed_shape"
        graph.initializer.append(numpy_helper.from_array(np.array(shapes[transpose.output[0]], np.int64),
                                                         shape_name))
        position = list(graph.node).index(reshape)
        graph.node.remove(reshape)
        graph.node.remove(transpose)
        graph.node.insert(position, helper.make_node("Reshape", [moved, shape_name], [transpose.output[0]],
                                                     name=reshape.name))
        graph.node.insert(position, helper.make_node("Transpose", [value.name], [moved], name=transpose.name,
                                                     perm=first))


def _input_permutation(shape, unit_shape, perm) -> list[int] | None:
    """The permutation of `shape` (keeping the batch axis first) whose result, reshaped, is `unit_shape`
    (`shape` with unit axes inserted) transposed by `perm`; None if there is none."""
    if perm is None or int(np.prod(shape)) != int(np.prod(unit_shape)):
        return None
    index = np.arange(int(np.prod(shape)))
    wanted = index.reshape(unit_shape).transpose(perm).reshape(-1)
    for order in itertools.permutations(range(1, len(shape))):
        candidate = [0, *order]
        if np.array_equal(index.reshape(shape).transpose(candidate).reshape(-1), wanted):
            return candidate
    return None


def _fold_shape_arithmetic(model: onnx.ModelProto) -> None:
    """Replace each shape computation by its constant value: a Shape (or Size) of a static shape, and every node of
    CONSTANT_OPS whose inputs are then constants; again until nothing changes (shape inference gives the
    output of a Reshape whose shape was just folded a static shape, which the next Shape reads)."""
    graph = model.graph
    while any(n.op_type in ("Shape", "Size") for n in graph.node) and _fold_once(model):
        pass


def _fold_once(model: onnx.ModelProto) -> bool:
    """One pass of `_fold_shape_arithmetic`; whether it folded anything."""
    graph = model.graph
    shapes = static_shapes(model)
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    folded = False
    for node in list(graph.node):
        if node.op_type == "Shape" and node.input[0] in shapes:
            value = np.array(shapes[node.input[0]], np.int64)
            start, end = (next((a.i for a in node.attribute if a.name == key), None) for key in ("start", "end"))
            value = value[start:end]
        elif node.op_type == "Size" and node.input[0] in shapes:
            value = np.array(int(np.prod(shapes[node.input[0]], dtype=np.int64)), np.int64)
        elif node.op_type in CONSTANT_OPS and node.op_type != "Shape" and node.input \
                and all(name in constants for name in node.input if name):
            value = _fold(node, constants, model.opset_import)
        else:
            continue
        constants[node.output[0]] = value
        graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
        graph.node.remove(node)
        folded = True
    return folded


def _fold(node: onnx.NodeProto, constants: dict[str, np.ndarray], opsets) -> np.ndarray:
    """The node's constant output, refused by name where it would hold more than FOLD_LIMIT values (counted
    from its inputs' shapes before anything is computed)."""
    _check_dimensions(node, constants)
    size = _folded_size(node, constants)
    if size is not None and size > FOLD_LIMIT:
        raise MingError(f"node '{node.name}' ({node.op_type}) computes a constant of {size:,} values, more than "
                        f"the {FOLD_LIMIT:,} ming folds; check its inputs (a shape computed for a dynamic batch "
                        "or size must give batch 1 and the model's static size)")
    value = _evaluate(node, constants, opsets)
    if value.size > FOLD_LIMIT:
        raise MingError(f"node '{node.name}' ({node.op_type}) computes a constant of {value.size:,} values, more "
                        f"than the {FOLD_LIMIT:,} ming folds; check its inputs")
    return value


# the input of each op that is a shape or a count of repeats, whose entries must not be negative
_DIMENSION_INPUTS = {"ConstantOfShape": 0, "Tile": 1, "Expand": 1}


def _check_dimensions(node: onnx.NodeProto, constants: dict[str, np.ndarray]) -> None:
    index = _DIMENSION_INPUTS.get(node.op_type)
    if index is None or index >= len(node.input) or not node.input[index]:
        return
    dims = constants[node.input[index]].reshape(-1)
    if dims.dtype.kind in "iu" and (dims < 0).any():
        raise MingError(f"node '{node.name}' ({node.op_type}) gets the negative dimensions {dims.tolist()} from "
                        f"'{node.input[index]}'; make them the model's static sizes (a shape computed for a "
                        "dynamic batch or size must give batch 1)")


# elementwise ops whose output has the broadcast shape of their inputs (numpy's rule, which ONNX follows)
_BROADCAST_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Equal", "Where", "Min", "Max"})


def _count(shape) -> int:
    return math.prod(int(d) for d in shape)


def _broadcast_shape(shapes) -> list[int]:
    rank = max((len(s) for s in shapes), default=0)
    padded = [[1] * (rank - len(s)) + [int(d) for d in s] for s in shapes]
    # an empty axis stays empty (numpy broadcasts 0 against 1 to 0); an upper bound where the shapes do not broadcast
    return [0 if 0 in dims else max(dims) for dims in zip(*padded)]


def _attribute(node: onnx.NodeProto, name: str, default: int) -> int:
    return next((a.i for a in node.attribute if a.name == name), default)


def _folded_size(node: onnx.NodeProto, constants: dict[str, np.ndarray]) -> int | None:
    """How many values the node's output has (or at most has), from its inputs' shapes and, for the ops that
    take a shape or a count, the values of that input; None where the inputs are malformed (onnx's evaluator
    then names the problem)."""
    values = [constants[name] if name else None for name in node.input]
    shapes = [v.shape for v in values if v is not None]
    try:
        if node.op_type in _BROADCAST_OPS:
            return _count(_broadcast_shape(shapes))
        if node.op_type == "ConstantOfShape":
            return _count(values[0].reshape(-1)) if values else 1
        if node.op_type == "Tile":
            return values[0].size * _count(values[1].reshape(-1))
        if node.op_type == "Expand":
            return _count(_broadcast_shape([values[0].shape, [int(d) for d in values[1].reshape(-1)]]))
        if node.op_type == "Range":
            start, limit, delta = (float(v.reshape(())) for v in values[:3])
            return max(int(np.ceil((limit - start) / delta)), 0) if delta else None
        if node.op_type == "Concat":
            return sum(_count(s) for s in shapes)
        if node.op_type == "Gather":  # the data's other axes for each index
            axis = _attribute(node, "axis", 0)
            axis += values[0].ndim if axis < 0 else 0
            if not 0 <= axis < values[0].ndim:
                return None
            return values[0].size // max(values[0].shape[axis], 1) * values[1].size
        if node.op_type == "Shape":
            return len(shapes[0])
        if node.op_type == "Constant":  # its value is already in the model
            return None
        # the others (casts, reshapes, slices, reductions, unary maps) give at most their largest input
        return max((_count(s) for s in shapes), default=1)
    except (TypeError, ValueError, IndexError, OverflowError, AttributeError):
        return None


def _evaluate(node: onnx.NodeProto, constants: dict[str, np.ndarray], opsets) -> np.ndarray:
    """The node's output on constant inputs, at the model's own opset (Squeeze's axes moved to an input)."""
    inputs = [name for name in node.input if name]
    single = helper.make_graph(
        [node], "fold", [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(constants[n].dtype),
                                                       constants[n].shape) for n in inputs],
        [helper.make_tensor_value_info(node.output[0], TensorProto.UNDEFINED, None)])
    model = helper.make_model(single, opset_imports=list(opsets))
    (value,) = ReferenceEvaluator(model).run(None, {n: constants[n] for n in inputs})
    return np.asarray(value)


def _dense_layers(graph: onnx.GraphProto, shapes: dict[str, tuple[int, ...]]) -> None:
    producers = {out: node for node in graph.node for out in node.output}
    initializers = {i.name: i for i in graph.initializer}
    for add in [n for n in graph.node if n.op_type == "Add"]:
        matmul = producers.get(add.input[0])
        bias = producers.get(add.input[1])
        if matmul is None or matmul.op_type != "MatMul" or bias is None or bias.op_type != "DequantizeLinear":
            continue
        if sum(matmul.output[0] in n.input for n in graph.node) != 1 or not _is_int32_vector(bias, initializers) \
                or len(shapes.get(matmul.input[0], ())) != 2:
            continue
        weights = producers.get(matmul.input[1])
        if weights is None or weights.op_type != "DequantizeLinear" or weights.input[0] not in initializers \
                or len(initializers[weights.input[0]].dims) != 2:
            continue
        gemm = helper.make_node("Gemm", [matmul.input[0], matmul.input[1], add.input[1]], [add.output[0]],
                                name=matmul.name)
        graph.node.remove(matmul)
        position = list(graph.node).index(add)  # where the bias is defined too
        graph.node.remove(add)
        graph.node.insert(position, gemm)


def _is_int32_vector(dequantize: onnx.NodeProto, initializers: dict[str, onnx.TensorProto]) -> bool:
    tensor = initializers.get(dequantize.input[0])
    return tensor is not None and tensor.data_type == TensorProto.INT32 and len(tensor.dims) == 1


def _squeezes_to_reshapes(model: onnx.ModelProto) -> None:
    graph = model.graph
    if not any(n.op_type in ("Squeeze", "Unsqueeze") for n in graph.node):
        return
    shapes = static_shapes(model)
    for position, node in enumerate(list(graph.node)):
        if node.op_type not in ("Squeeze", "Unsqueeze") or node.output[0] not in shapes:
            continue
        shape_name = f"{node.name}_shape"
        graph.initializer.append(numpy_helper.from_array(np.array(shapes[node.output[0]], np.int64), shape_name))
        reshape = helper.make_node("Reshape", [node.input[0], shape_name], [node.output[0]], name=node.name)
        graph.node.remove(node)
        graph.node.insert(position, reshape)


def static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """The shape of every value whose dimensions shape inference gives as numbers, by name."""
    inferred = onnx.shape_inference.infer_shapes(model)
    values = list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)
    shapes = {}
    for value in values:
        dims = value.type.tensor_type.shape.dim
        if value.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            shapes[value.name] = tuple(d.dim_value for d in dims)
    return shapes
