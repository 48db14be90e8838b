"""TFLite's element-wise int8 ops as 256-entry tables, taken from LiteRT's own kernels.

An int8 activation (LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU, ELU, PRELU, RELU, RELU6, RELU_N1_TO_1) and a MUL
by a constant are functions of the 256 values their input can take (of each channel's 256 where a constant
operand varies per channel, such as PRELU's alpha). ming does not read the integer code TOSA lowers them to:
it copies the operator (options and constant operands included) into a one-op model, runs it with LiteRT's
reference op resolver (`OpResolverType.BUILTIN_REF`) on every int8 value and keeps what comes out. ELU, which
that resolver lacks, runs in LiteRT's builtin kernel instead (a table LiteRT fills in float,
`PopulateLookupTable`). LiteRT runs in one child process for all of a model's tables (`litert_probe`, bounded
by `isolated`); its answer is checked before use. The lifter puts the table in place of the node's generics
(`lift_generic._mapped`).
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import math
import re
import sys
from dataclasses import dataclass

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

from ming_py.errors import MingError

from . import isolated
from .litert_probe import MAX_PROBE_RANK, MAX_TABLE_CHANNELS
from .onnx_tables import NodeTable
from .tflite_fold import op_name, operator_code, tensor_name

# Unary int8 activations whose table replaces their lowering.
TABLE_OPS = frozenset({"LOGISTIC", "TANH", "HARD_SWISH", "LEAKY_RELU", "ELU", "PRELU", "RELU", "RELU6",
                       "RELU_N1_TO_1"})
# Binary ops that are tables where one operand is a constant; with two maps they are integer kernels.
CONSTANT_OPERAND_OPS = frozenset({"MUL"})
# Ops tosa-converter-for-tflite cannot lower for int8 (ELU: "'tosa.exp' op requires the same element type"):
# the converter sees an op of one input that TOSA lowers to one table generic instead; the lifter replaces
# that generic's table with LiteRT's all the same.
STAND_INS = {"ELU": "TANH"}
# LiteRT's reference resolver has no ELU: its builtin kernel (the only op that may fall back to it)
_BUILTIN_KERNEL_OPS = frozenset({"ELU"})
# the child program (`python -m ...`): a module attribute, so that a test can put a failing one in its place
PROBE_COMMAND = (sys.executable, "-m", "ming_py.frontends.litert_probe")
WHAT = "LiteRT's kernels"
_STARTED = re.compile(r"^probe ([0-9]{1,9})$", re.MULTILINE)  # the child's note as it starts a probe


@dataclass(frozen=True)
class _Probe:
    """One node's one-op model and what its table needs besides LiteRT's output."""

    name: str  # the node's output tensor
    where: str  # "node 'name' (KIND)", for messages
    kind: str
    model: bytes  # the one-op flatbuffer
    probe_shape: tuple[int, ...]  # (256, ...) with the channel axis kept
    axis: int | None
    shape: tuple[int, ...]  # the node's input shape in the model
    x_quantization: tuple[np.float32, int]
    y_quantization: tuple[np.float32, int]

    @property
    def groups(self) -> int:
        return math.prod(self.probe_shape[1:])


def node_tables(model: schema.ModelT, source: str = "the model") -> dict[str, NodeTable]:
    """The table of every TABLE_OPS node and every MUL by a constant, by the name of its output tensor (the
    node name IREE keeps as the location of its generics). `source` names the model in messages."""
    probes = _probes(model)
    if not probes:
        return {}
    return {probe.name: _table(probe, values) for probe, values in zip(probes, _run_isolated(probes, source))}


def _probes(model: schema.ModelT) -> list[_Probe]:
    graph = model.subgraphs[0]
    constant = _constant_tensors(model)
    probes = []
    for operator in graph.operators:
        kind = op_name(model, operator)
        if kind in TABLE_OPS:
            probes.append(_probe(model, operator, 0, constant))
        elif kind in CONSTANT_OPERAND_OPS:
            flags = [index in constant for index in operator.inputs]
            if flags in ([False, True], [True, False]):
                probes.append(_probe(model, operator, flags.index(False), constant))
    return probes


def with_stand_ins(model: schema.ModelT) -> schema.ModelT:
    """The model with each op of `STAND_INS` replaced by its stand-in (for the TOSA converter only; the
    model itself is left as it is)."""
    graph = model.subgraphs[0]
    if not any(op_name(model, operator) in STAND_INS for operator in graph.operators):
        return model
    converted, subgraph = copy.copy(model), copy.copy(graph)
    converted.subgraphs, converted.operatorCodes = [subgraph], list(model.operatorCodes)
    subgraph.operators = [_stand_in(converted, operator) for operator in graph.operators]
    return converted


def _stand_in(model: schema.ModelT, operator):
    stand_in = STAND_INS.get(op_name(model, operator))
    if stand_in is None:
        return operator
    index = operator_code(model, stand_in, 2)
    replaced = copy.copy(operator)
    replaced.opcodeIndex, replaced.builtinOptionsType, replaced.builtinOptions = index, 0, None
    return replaced


def _constant_tensors(model: schema.ModelT) -> set[int]:
    graph = model.subgraphs[0]
    return {i for i, t in enumerate(graph.tensors)
            if model.buffers[t.buffer].data is not None and len(model.buffers[t.buffer].data)}


def _quantization(tensor, where: str) -> tuple[np.float32, int]:
    q = tensor.quantization
    if tensor.type != schema.TensorType.INT8 or q is None or q.scale is None or len(q.scale) != 1:
        raise MingError(f"{where}: tensor '{tensor_name(tensor)}' is not int8 quantized per tensor; ming tabulates "
                        "int8 element-wise ops (convert the model with full integer quantization)")
    return np.float32(q.scale[0]), int(q.zeroPoint[0])


def _probe(model: schema.ModelT, operator, map_position: int, constant: set[int]) -> _Probe:
    graph = model.subgraphs[0]
    kind = op_name(model, operator)
    output = graph.tensors[operator.outputs[0]]
    where = f"node '{tensor_name(output)}' ({kind})"
    source = graph.tensors[operator.inputs[map_position]]
    x_quantization, y_quantization = _quantization(source, where), _quantization(output, where)
    shape = tuple(int(d) for d in source.shape)
    if len(shape) > MAX_PROBE_RANK or any(d < 1 for d in shape):
        raise MingError(f"{where}: its input has shape {list(shape)}; ming tabulates element-wise ops on tensors of "
                        f"at most {MAX_PROBE_RANK} positive dimensions (re-export the model with the TFLite converter)")
    others = [i for position, i in enumerate(operator.inputs) if position != map_position and i >= 0]
    if any(i not in constant for i in others):
        raise MingError(f"{where}: an operand other than its input is computed; ming tabulates element-wise ops "
                        "whose other operands are constants")
    axis = _channel_axis(shape, [tuple(int(d) for d in graph.tensors[i].shape) for i in others], where)
    if axis is not None and shape[axis] > MAX_TABLE_CHANNELS:
        raise MingError(f"{where}: its constant operands differ along {shape[axis]} channels; ming tabulates at "
                        f"most {MAX_TABLE_CHANNELS} channels (256 bytes of table each) per node")
    probe_shape = (256,) + tuple(shape[a] if a == axis else 1 for a in range(1, len(shape)))
    return _Probe(tensor_name(output), where, kind, _probe_model(model, operator, map_position, probe_shape),
                  probe_shape, axis, shape, x_quantization, y_quantization)


def _table(probe: _Probe, values: np.ndarray) -> NodeTable:
    values, axis = values.reshape(256, probe.groups).T, probe.axis
    if np.all(values == values[:1]):
        values, axis = values[:1], None
    return NodeTable(probe.kind, np.ascontiguousarray(values, dtype=np.int8), axis, probe.shape,
                     *probe.x_quantization, *probe.y_quantization)


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


def _run_isolated(probes: list[_Probe], source: str) -> list[np.ndarray]:
    """LiteRT's int8 output of every probe, for every int8 value along its first axis, from one child process;
    a crash there is named by the probe it was running."""
    request = json.dumps({"probes": [{"model": base64.b64encode(p.model).decode(), "shape": list(p.probe_shape),
                                      "resolvers": _resolvers(p.kind)} for p in probes]}).encode()

    def site(stderr: str) -> str | None:
        started = _STARTED.findall(stderr)
        index = int(started[-1]) if started else -1
        return probes[index].where if 0 <= index < len(probes) else None

    answer = isolated.run(list(PROBE_COMMAND), WHAT, source, stdin=request, site=site)
    return _checked_answer(answer, probes, source)


def _resolvers(kind: str) -> list[str]:
    return ["BUILTIN_REF", "BUILTIN_WITHOUT_DEFAULT_DELEGATES"] if kind in _BUILTIN_KERNEL_OPS else ["BUILTIN_REF"]


def _checked_answer(answer: bytes, probes: list[_Probe], source: str) -> list[np.ndarray]:
    """The child's answer, taken only in the form it must have: one entry per probe, each its int8 output of
    exactly the probe's size or LiteRT's refusal (a MingError naming the node)."""
    malformed = MingError(f"{WHAT} answered in an unexpected form on {source}; the model is probably malformed "
                          "(check that LiteRT loads it)")
    try:
        entries = json.loads(answer)
    except (ValueError, RecursionError):  # not JSON (or not UTF-8), or nested past the parser's depth
        raise malformed from None
    if not isinstance(entries, list) or len(entries) != len(probes):
        raise malformed
    outputs = []
    for probe, entry in zip(probes, entries):
        if isinstance(entry, dict) and set(entry) == {"error"} and isinstance(entry["error"], str):
            raise MingError(f"{probe.where}: LiteRT's {_kernel(probe.kind)} refuses it on int8 values "
                            f"({_printable(entry['error'])}); re-convert the model with the TFLite converter's full "
                            "integer quantization")
        if not (isinstance(entry, dict) and set(entry) == {"values"} and isinstance(entry["values"], str)):
            raise malformed
        try:
            data = base64.b64decode(entry["values"], validate=True)
        except binascii.Error:
            raise malformed from None
        if len(data) != math.prod(probe.probe_shape):
            raise malformed
        outputs.append(np.frombuffer(data, dtype=np.int8))
    return outputs


def _kernel(kind: str) -> str:
    return "builtin kernel" if kind in _BUILTIN_KERNEL_OPS else "reference kernel"


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else " " for c in text.strip())[:160]


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
