"""TFLite's element-wise int8 ops as 256-entry tables, taken from LiteRT's own reference kernels.

An int8 activation (LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU, ELU, PRELU, RELU, RELU6, RELU_N1_TO_1) and a MUL
by a constant are functions of the 256 values their input can take (of each channel's 256 where a constant
operand varies per channel, such as PRELU's alpha). ming does not read the integer code TOSA lowers them to:
it copies the operator (options and constant operands included) into a one-op model, runs it with LiteRT's
reference op resolver (`OpResolverType.BUILTIN_REF`, the arithmetic TFLite Micro runs) on every int8 value
and keeps what comes out. The lifter puts the table in place of the node's generics (`lift_generic._mapped`).
"""

from __future__ import annotations

import copy

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

from ming_py.errors import MingError

from .onnx_tables import NodeTable

# Unary int8 activations whose table replaces their lowering.
TABLE_OPS = frozenset({"LOGISTIC", "TANH", "HARD_SWISH", "LEAKY_RELU", "ELU", "PRELU", "RELU", "RELU6",
                       "RELU_N1_TO_1"})
# Binary ops that are tables where one operand is a constant; with two maps they are integer kernels.
CONSTANT_OPERAND_OPS = frozenset({"MUL"})
# Ops tosa-converter-for-tflite cannot lower for int8 (ELU: "'tosa.exp' op requires the same element type"):
# the converter sees an op of one input that TOSA lowers to one table generic instead; the lifter replaces
# that generic's table with LiteRT's all the same.
STAND_INS = {"ELU": "TANH"}
_OP_NAMES = {value: name for name, value in vars(schema.BuiltinOperator).items() if not name.startswith("_")}


def node_tables(model: schema.ModelT) -> dict[str, NodeTable]:
    """The table of every TABLE_OPS node and every MUL by a constant, by the name of its output tensor (the
    node name IREE keeps as the location of its generics)."""
    graph = model.subgraphs[0]
    constant = _constant_tensors(model)
    tables = {}
    for operator in graph.operators:
        kind = _op_name(model, operator)
        if kind in TABLE_OPS:
            tables[_name(graph.tensors[operator.outputs[0]])] = _table(model, operator, 0, constant)
        elif kind in CONSTANT_OPERAND_OPS:
            flags = [index in constant for index in operator.inputs]
            if flags in ([False, True], [True, False]):
                tables[_name(graph.tensors[operator.outputs[0]])] = _table(model, operator, flags.index(False),
                                                                           constant)
    return tables


def with_stand_ins(model: schema.ModelT) -> schema.ModelT:
    """The model with each op of `STAND_INS` replaced by its stand-in (for the TOSA converter only; the
    model itself is left as it is)."""
    graph = model.subgraphs[0]
    if not any(_op_name(model, operator) in STAND_INS for operator in graph.operators):
        return model
    converted, subgraph = copy.copy(model), copy.copy(graph)
    converted.subgraphs, converted.operatorCodes = [subgraph], list(model.operatorCodes)
    subgraph.operators = [_stand_in(converted, operator) for operator in graph.operators]
    return converted


def _stand_in(model: schema.ModelT, operator):
    stand_in = STAND_INS.get(_op_name(model, operator))
    if stand_in is None:
        return operator
    builtin = getattr(schema.BuiltinOperator, stand_in)
    codes = model.operatorCodes
    index = next((i for i, c in enumerate(codes) if max(c.builtinCode, c.deprecatedBuiltinCode) == builtin), None)
    if index is None:
        code = schema.OperatorCodeT()
        code.builtinCode, code.deprecatedBuiltinCode, code.version = builtin, min(builtin, 127), 2
        codes.append(code)
        index = len(codes) - 1
    replaced = copy.copy(operator)
    replaced.opcodeIndex, replaced.builtinOptionsType, replaced.builtinOptions = index, 0, None
    return replaced


def _op_name(model: schema.ModelT, operator) -> str:
    code = model.operatorCodes[operator.opcodeIndex]
    return _OP_NAMES.get(max(code.builtinCode, code.deprecatedBuiltinCode), str(code.builtinCode))


def _name(tensor) -> str:
    return (tensor.name or b"").decode(errors="backslashreplace")


def _constant_tensors(model: schema.ModelT) -> set[int]:
    graph = model.subgraphs[0]
    return {i for i, t in enumerate(graph.tensors)
            if model.buffers[t.buffer].data is not None and len(model.buffers[t.buffer].data)}


def _quantization(tensor, where: str) -> tuple[np.float32, int]:
    q = tensor.quantization
    if tensor.type != schema.TensorType.INT8 or q is None or q.scale is None or len(q.scale) != 1:
        raise MingError(f"{where}: tensor '{_name(tensor)}' is not int8 quantized per tensor; ming tabulates int8 "
                        "element-wise ops (convert the model with full integer quantization)")
    return np.float32(q.scale[0]), int(q.zeroPoint[0])


def _table(model: schema.ModelT, operator, map_position: int, constant: set[int]) -> NodeTable:
    graph = model.subgraphs[0]
    kind = _op_name(model, operator)
    output = graph.tensors[operator.outputs[0]]
    where = f"node '{_name(output)}' ({kind})"
    source = graph.tensors[operator.inputs[map_position]]
    x_quantization, y_quantization = _quantization(source, where), _quantization(output, where)
    shape = tuple(int(d) for d in source.shape)
    others = [i for position, i in enumerate(operator.inputs) if position != map_position and i >= 0]
    if any(i not in constant for i in others):
        raise MingError(f"{where}: an operand other than its input is computed; ming tabulates element-wise ops "
                        "whose other operands are constants")
    axis = _channel_axis(shape, [tuple(int(d) for d in graph.tensors[i].shape) for i in others], where)
    groups = shape[axis] if axis is not None else 1
    probe_shape = (256,) + tuple(shape[a] if a == axis else 1 for a in range(1, len(shape)))
    values = _run(model, operator, map_position, probe_shape, where).reshape(256, groups).T
    if np.all(values == values[:1]):
        values, axis = values[:1], None
    return NodeTable(kind, np.ascontiguousarray(values, dtype=np.int8), axis, shape, *x_quantization, *y_quantization)


def _channel_axis(shape: tuple[int, ...], constants: list[tuple[int, ...]], where: str) -> int | None:
    """The one axis of the input along which the constant operands vary (None: none varies)."""
    varying = set()
    for constant in constants:
        if int(np.prod(constant)) == 1:
            continue
        aligned = (1,) * (len(shape) - len(constant)) + constant
        if len(constant) > len(shape) or any(size not in (1, full) for size, full in zip(aligned, shape)):
            raise MingError(f"{where}: a constant operand of shape {list(constant)} does not broadcast to the "
                            f"input's {list(shape)}")
        varying |= {a for a, size in enumerate(aligned) if size > 1}
    if len(varying) > 1 or varying == {0}:
        raise MingError(f"{where}: its constant operands vary along axes {sorted(varying)}; ming tabulates "
                        "per-tensor and per-channel element-wise ops")
    return varying.pop() if varying else None


def _run(model: schema.ModelT, operator, map_position: int, probe_shape, where: str) -> np.ndarray:
    """The int8 output of the operator in LiteRT's reference kernels for every int8 value along the probe's
    first axis. An op the reference resolver lacks (ELU) runs in LiteRT's builtin kernel without delegates:
    its int8 kernel is a table LiteRT itself fills in float (`PopulateLookupTable`), as a reference one would."""
    from ai_edge_litert.interpreter import OpResolverType

    probe = _probe_model(model, operator, map_position, probe_shape)
    values = np.broadcast_to(np.arange(-128, 128, dtype=np.int8).reshape((256,) + (1,) * (len(probe_shape) - 1)),
                             probe_shape).copy()
    try:
        try:
            return _invoke(probe, values, OpResolverType.BUILTIN_REF)
        except (RuntimeError, ValueError) as error:
            if "Didn't find op" not in str(error):
                raise
            return _invoke(probe, values, OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    except (RuntimeError, ValueError) as error:  # LiteRT refuses the op's parameters in its Prepare
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise MingError(f"{where}: LiteRT's reference kernel refuses it on int8 values ({first[:160]}); "
                        "re-convert the model with the TFLite converter's full integer quantization") from None


def _invoke(probe: bytes, values: np.ndarray, resolver) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=probe, experimental_op_resolver_type=resolver)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], values)
    interpreter.invoke()
    return np.asarray(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]))


def _probe_model(model: schema.ModelT, operator, map_position: int, probe_shape) -> bytes:
    """A one-op model: the operator on an int8 input of `probe_shape` (with the input's quantization), its
    constant operands copied."""
    graph = model.subgraphs[0]
    tensors, buffers, inputs = [], [schema.BufferT()], []
    for position, index in enumerate(operator.inputs):
        tensor = _copy(graph.tensors[index])
        if position == map_position:
            tensor.shape, tensor.shapeSignature, tensor.buffer = list(probe_shape), None, 0
        else:
            buffer = schema.BufferT()
            buffer.data = model.buffers[graph.tensors[index].buffer].data
            buffers.append(buffer)
            tensor.buffer = len(buffers) - 1
        tensors.append(tensor)
        inputs.append(len(tensors) - 1)
    output = _copy(graph.tensors[operator.outputs[0]])
    output.shape, output.shapeSignature, output.buffer = list(probe_shape), None, 0
    tensors.append(output)
    probe = schema.OperatorT()
    probe.opcodeIndex, probe.inputs, probe.outputs = 0, inputs, [len(tensors) - 1]
    probe.builtinOptionsType, probe.builtinOptions = operator.builtinOptionsType, operator.builtinOptions
    subgraph = schema.SubGraphT()
    subgraph.tensors, subgraph.operators = tensors, [probe]
    subgraph.inputs, subgraph.outputs = [inputs[map_position]], [len(tensors) - 1]
    single = schema.ModelT()
    single.version, single.subgraphs, single.buffers = 3, [subgraph], buffers
    single.operatorCodes = [model.operatorCodes[operator.opcodeIndex]]
    builder = flatbuffers.Builder(1024)
    builder.Finish(single.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _copy(tensor):
    copy = schema.TensorT()
    copy.name, copy.type, copy.quantization = tensor.name, tensor.type, tensor.quantization
    copy.shape = list(tensor.shape) if tensor.shape is not None else []
    return copy
