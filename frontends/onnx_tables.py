"""Element-wise activations between DequantizeLinear and QuantizeLinear as 256-entry tables.

`DQ -> op -> Q` on int8 values is a function of the 256 values its input can take (of each channel's 256
where a constant input varies per channel, such as PRelu's slope). ming does not interpret the float
arithmetic: it runs a copy of the three nodes (attributes and constant inputs included) in an onnxruntime
session with default options on every int8 value and keeps what comes out, so the table is onnxruntime's
own kernel, including its QDQ fusions (QLinearSigmoid, QLinearLeakyRelu build their lookup tables the same
way).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

from ming_py.ort_session import onnxruntime_session
from ming_py.errors import MingError

# Unary element-wise ONNX ops (with constant extra inputs at most) that become tables after a DequantizeLinear.
TABLE_OPS = frozenset({
    "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "Softplus",
    "ThresholdedRelu", "Exp", "Erf", "Abs", "Neg", "Reciprocal", "Sin", "Cos", "BatchNormalization",
})
PROBE_INPUT = "ming_probe"


@dataclass(frozen=True, eq=False)
class NodeTable:
    """onnxruntime's `Q(op(DQ(x)))` for every int8 x: `values[group, x + 128]`, one group per channel along
    the model's `axis` of the node's input (one group for all when no channel differs)."""

    op: str
    values: np.ndarray  # int8 [groups, 256]
    axis: int | None  # the model's axis the groups run along (None: one group)
    shape: tuple[int, ...]  # the node's input shape in the model
    x_scale: np.float32
    x_zero_point: int
    y_scale: np.float32
    y_zero_point: int


# Binary ops that are tables where one operand is a constant (a scalar or per-channel vector); with two maps they
# are the add/mul processes. Add and Mul also take the constant first.
CONSTANT_OPERAND_OPS = frozenset({"Add", "Sub", "Mul", "Div"})
COMMUTATIVE = frozenset({"Add", "Mul"})


def node_tables(model: onnx.ModelProto) -> dict[str, NodeTable]:
    """The table of every node of TABLE_OPS, and of every binary op of CONSTANT_OPERAND_OPS with a constant
    operand, by node name; a node that is not between a per-tensor int8 DequantizeLinear and its only
    consumer, a QuantizeLinear, stops with its name."""
    graph = _Inferred(model)
    tables = {}
    for node in model.graph.node:
        if node.op_type in TABLE_OPS:
            tables[node.name] = _table(graph, node)
        elif node.op_type in CONSTANT_OPERAND_OPS and (unary := _with_constant_operand(graph, node)) is not None:
            tables[node.name] = _table(graph, unary)
    return tables


def _with_constant_operand(graph: _Inferred, node: onnx.NodeProto) -> onnx.NodeProto | None:
    """The node with its map first and its constant second (a copy with the operands swapped where the
    constant comes first and the op commutes), or None when it does not combine a map with a constant."""
    constant = [graph.is_constant(name) for name in node.input]
    if constant == [False, True]:
        return node
    if constant == [True, False] and node.op_type in COMMUTATIVE:
        swapped = onnx.NodeProto()
        swapped.CopyFrom(node)
        swapped.input[0], swapped.input[1] = node.input[1], node.input[0]
        return swapped
    if constant == [True, False]:
        raise MingError(f"node '{node.name}' ({node.op_type}) takes a constant first and a map second; ming "
                        f"tabulates {node.op_type} with the constant second")
    return None


class _Inferred:
    """The model's graph with inferred shapes and element types, and who produces and reads each tensor."""

    def __init__(self, model: onnx.ModelProto):
        self.model = model
        inferred = onnx.shape_inference.infer_shapes(model)
        self.types = {v.name: v.type.tensor_type for v in
                      list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)}
        self.initializers = {i.name: i for i in model.graph.initializer}
        self.producers = {out: node for node in model.graph.node for out in node.output}
        self.graph_outputs = {o.name for o in model.graph.output}
        self.constant: dict[str, bool] = {}  # tensor -> computed from initializers alone

    def shape(self, name: str) -> tuple[int, ...] | None:
        if name in self.initializers:
            return tuple(self.initializers[name].dims)
        kind = self.types.get(name)
        if kind is None or not kind.HasField("shape") or any(not d.HasField("dim_value") for d in kind.shape.dim):
            return None
        return tuple(d.dim_value for d in kind.shape.dim)

    def element_type(self, name: str) -> int:
        if name in self.initializers:
            return self.initializers[name].data_type
        kind = self.types.get(name)
        return kind.elem_type if kind is not None else TensorProto.UNDEFINED

    def consumers(self, name: str) -> list[onnx.NodeProto]:
        return [n for n in self.model.graph.node if name in n.input]

    def quantization(self, node: onnx.NodeProto, where: str) -> tuple[np.float32, int]:
        """(scale, zero point) of a per-tensor QuantizeLinear or DequantizeLinear."""
        zero_point = self._scalar(node.input[2], where) if len(node.input) > 2 and node.input[2] else 0
        return np.float32(self._scalar(node.input[1], where)), int(zero_point)

    def _scalar(self, name: str, where: str) -> np.ndarray:
        if name not in self.initializers or int(np.prod(self.initializers[name].dims)) != 1:
            raise MingError(f"{where}: its quantization must be per tensor with constant scale and zero point")
        return onnx.numpy_helper.to_array(self.initializers[name]).reshape(())

    def is_constant(self, name: str) -> bool:
        """Whether the tensor is computed from initializers alone."""
        if name not in self.constant:
            node = self.producers.get(name)
            self.constant[name] = name in self.initializers or \
                (node is not None and all(self.is_constant(n) for n in node.input if n))
        return self.constant[name]

    def constant_nodes(self, names: list[str], where: str) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
        """The nodes and initializers computing the tensors `names` from constants alone."""
        nodes: list[onnx.NodeProto] = []
        initializers: dict[str, onnx.TensorProto] = {}
        pending = [n for n in names if n]
        while pending:
            name = pending.pop()
            if name in self.initializers:
                initializers[name] = self.initializers[name]
            elif name in self.producers:
                node = self.producers[name]
                if all(node is not n for n in nodes):
                    nodes.append(node)
                    pending += [n for n in node.input if n]
            else:
                raise MingError(f"{where}: input '{name}' is not a constant; ming tabulates element-wise ops "
                                "whose other inputs are constants")
        order = [n for n in self.model.graph.node if any(n is m for m in nodes)]
        return order, list(initializers.values())


def _table(graph: _Inferred, node: onnx.NodeProto) -> NodeTable:
    where = f"node '{node.name}' ({node.op_type})"
    dequantize = graph.producers.get(node.input[0])
    readers = graph.consumers(node.output[0])
    floats = [f"'{r.name}' ({r.op_type})" for r in readers if r.op_type != "QuantizeLinear"]
    if dequantize is None or dequantize.op_type != "DequantizeLinear" or len(readers) != 1 \
            or readers[0].op_type != "QuantizeLinear" or node.output[0] in graph.graph_outputs:
        also = f" (it feeds {', '.join(floats)} in float)" if floats else ""
        raise MingError(f"{where} must read a DequantizeLinear and feed only a QuantizeLinear{also}; quantize the "
                        "model to int8 QDQ with onnxruntime.quantization.quantize_static")
    quantize = readers[0]
    if graph.element_type(dequantize.input[0]) != TensorProto.INT8:
        raise MingError(f"{where} reads {TensorProto.DataType.Name(graph.element_type(dequantize.input[0]))} "
                        "values; ming needs int8 (activation_type=QuantType.QInt8)")
    x_quantization, y_quantization = graph.quantization(dequantize, where), graph.quantization(quantize, where)
    shape = graph.shape(node.input[0])
    axis = _channel_axis(graph, node, shape, where)
    groups = shape[axis] if axis is not None else 1
    probe_shape = _probe_shape(shape, axis, where)
    values = _run(graph, node, dequantize, quantize, probe_shape, where).reshape(256, groups).T
    if np.all(values == values[:1]):
        values, axis = values[:1], None
    return NodeTable(node.op_type, np.ascontiguousarray(values, dtype=np.int8), axis, shape or (), *x_quantization,
                     *y_quantization)


def _probe_shape(shape, axis, where) -> tuple[int, ...]:
    """The probe input: the 256 int8 values along the batch axis (batch 1 in the model), each a single
    position with every channel where the table differs per channel, so that an op reading its channel axis
    by position (BatchNormalization) finds it where the model has it."""
    if not shape:
        return (256,)
    if shape[0] != 1 or axis == 0:
        raise MingError(f"{where}: its input {shape} has no batch axis of 1 to tabulate along; ming compiles "
                        "batch-1 models")
    return (256,) + tuple(shape[a] if a == axis else 1 for a in range(1, len(shape)))


def _channel_axis(graph: _Inferred, node: onnx.NodeProto, shape, where) -> int | None:
    """The one axis of the node's input along which its constant inputs vary (None: none varies)."""
    if node.op_type == "BatchNormalization":  # scale, bias, mean and variance index axis 1
        per_channel = any(int(np.prod(graph.shape(name) or (1,))) > 1 for name in node.input[1:] if name)
        return 1 if per_channel else None
    varying = set()
    for name in node.input[1:]:
        if not name:
            continue
        constant = graph.shape(name)
        if constant is None or (int(np.prod(constant)) > 1 and shape is None):
            raise MingError(f"{where}: the shape of input '{name}' is unknown; export the model with static shapes")
        if int(np.prod(constant)) == 1:
            continue
        if len(constant) > len(shape):
            raise MingError(f"{where}: input '{name}' broadcasts the result beyond the input's shape")
        aligned = (1,) * (len(shape) - len(constant)) + tuple(constant)
        if any(size not in (1, full) for size, full in zip(aligned, shape)):
            raise MingError(f"{where}: input '{name}' of shape {constant} does not broadcast to {shape}")
        varying |= {a for a, size in enumerate(aligned) if size > 1}
    if len(varying) > 1:
        raise MingError(f"{where}: its constant inputs vary along several axes {sorted(varying)}; ming tabulates "
                        "per-tensor and per-channel element-wise ops")
    return varying.pop() if varying else None


def _run(graph: _Inferred, node, dequantize, quantize, probe_shape, where) -> np.ndarray:
    """The int8 output of DQ -> node -> Q in onnxruntime for every int8 value along the probe's batch axis."""
    constants = [n for n in list(node.input[1:]) + list(dequantize.input[1:]) + list(quantize.input[1:]) if n]
    nodes, initializers = graph.constant_nodes(constants, where)
    probe_dequantize = onnx.NodeProto()
    probe_dequantize.CopyFrom(dequantize)
    probe_dequantize.input[0] = PROBE_INPUT
    probe = helper.make_graph(
        nodes + [probe_dequantize, node, quantize], f"{node.name}_table",
        [helper.make_tensor_value_info(PROBE_INPUT, TensorProto.INT8, list(probe_shape))],
        [helper.make_tensor_value_info(quantize.output[0], TensorProto.INT8, list(probe_shape))],
        initializer=initializers)
    model = helper.make_model(probe, opset_imports=graph.model.opset_import, ir_version=graph.model.ir_version)
    values = np.arange(-128, 128, dtype=np.int8).reshape((256,) + (1,) * (len(probe_shape) - 1))
    try:
        session = onnxruntime_session(model.SerializeToString())
        return np.asarray(session.run(None, {PROBE_INPUT: np.broadcast_to(values, probe_shape).copy()})[0])
    except Exception as error:  # onnxruntime raises its own exception types
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise MingError(f"{where}: onnxruntime cannot run it on int8 values ({first[:160]})") from None
