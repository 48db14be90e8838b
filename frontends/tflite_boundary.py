"""A TFLite model's boundary as converters write it, moved out of the model to the host.

The converter writes the model's input and output types (`inference_input_type`, `inference_output_type`) as ops
next to the ports: a QUANTIZE float -> int8 or uint8 -> int8 right after a float or uint8 input, a DEQUANTIZE or a
QUANTIZE int8 -> uint8 right before a float or uint8 output (after the SOFTMAX where the model ends in one). Models
also view their input in another shape or order before the first layer: a RESHAPE of a vector into a map (TFLite
Micro's micro_speech), a TRANSPOSE of a channels-first input (PyTorch models converted to TFLite), EXPAND_DIMS and
SQUEEZE. `split_host_boundary` takes these ops, in chains of any length and order, out of the flatbuffer before
the import: the accelerator takes and gives int8 maps, and the host (`contract/ming_host.py`) runs them on the
model's own arrays with TFLite's arithmetic (`tflite_quantize`, `tflite_requantize`, `tflite_softmax`), so `ming
reference`, the C-simulation and the deployed driver take and give what LiteRT does.

uint8 values are held shifted into int8 (v - 128, zero points likewise): a QUANTIZE uint8 <-> int8 that keeps the
scale and moves the zero point by 128 (what the converter writes) is that shift, any other QUANTIZE of integers
the host's `tflite_requantize` (TFLite's Requantize, bit-exact); a DEQUANTIZE and a QUANTIZE of its floats (a
boundary between types written in float) are TFLite's DEQUANTIZE and QUANTIZE on the host. The host folds an
input TRANSPOSE into the input's permutation (`GraphInput.permutation`, as ONNX input transposes are); a RESHAPE
stays a step of its own. An output's steps run in the model's layout: the host first moves the accelerator's
channels-first map back to NHWC where a step needs it (a RESHAPE, a TRANSPOSE, a Softmax over channels).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from ming_py.errors import MingError
from ming_py.ir import Graph, GraphOutput, HostOp
from ming_py.contract.ming_host import INTEGER_OFFSETS, LAYOUT_STEPS, graph_layout_shape

from .facts import ModelPort
from .tflite_fold import op_name, tensor_name

INPUT_LAYOUT_OPS = frozenset({"RESHAPE", "EXPAND_DIMS", "SQUEEZE", "TRANSPOSE"})
OUTPUT_CHAIN_OPS = frozenset({"QUANTIZE", "DEQUANTIZE", "SOFTMAX"})
_PORT_TYPES = {schema.TensorType.FLOAT32: "float32", schema.TensorType.INT8: "int8",
               schema.TensorType.UINT8: "uint8"}
_INTEGER_TYPES = (schema.TensorType.INT8, schema.TensorType.UINT8)
SOFTMAX_OUTPUT = (float(np.float32(1 / 256)), -128)  # an int8 Softmax's output quantization


@dataclass(frozen=True)
class InputBoundary:
    """The model's input and the host steps that make the accelerator's int8 input of it."""

    port: ModelPort  # the model's own input
    dtype: str  # its type: "float32", "int8" or "uint8"
    quantization: tuple[float, int] | None = None  # the model's values' (int8-shifted); None: the accelerator's
    host_ops: tuple[HostOp, ...] = ()  # in the model's order (ming_host.accelerator_input)


@dataclass(frozen=True)
class OutputBoundary:
    """A model output and the host steps that make it of the accelerator's int8 output."""

    port: ModelPort  # the model's own output
    dtype: str  # its type: "float32", "int8" or "uint8"
    host_ops: tuple[HostOp, ...] = ()  # in the model's order (ming_host.host_tail)


@dataclass(frozen=True)
class HostBoundary:
    """The model's input and every output (in the model's order), each with its steps moved to the host."""

    input: InputBoundary
    outputs: tuple[OutputBoundary, ...]


def split_host_boundary(model: schema.ModelT) -> HostBoundary:
    """Remove the input's chain (QUANTIZE, RESHAPE, TRANSPOSE, EXPAND_DIMS, SQUEEZE, each the only reader of the
    tensor before it) up to its last int8 tensor, which becomes the accelerator's input, and every output's chain
    (SOFTMAX, QUANTIZE of integers, DEQUANTIZE); the host runs them."""
    graph = model.subgraphs[0]
    graph.inputs, graph.outputs = [int(i) for i in graph.inputs], [int(i) for i in graph.outputs]
    boundary = HostBoundary(_split_input(model), tuple(_split_output(model, p) for p in range(len(graph.outputs))))
    _check_accelerator_ports(model)
    return boundary


def _port(graph, index: int) -> ModelPort:
    tensor = graph.tensors[index]
    return ModelPort(tensor_name(tensor), tuple(int(d) for d in tensor.shape))


def _quantization(tensor) -> tuple[float, int]:
    """The tensor's per-tensor scale and zero point, a uint8 one shifted into int8."""
    q = tensor.quantization
    if q is None or q.scale is None or len(q.scale) != 1:
        raise MingError(f"tensor '{tensor_name(tensor)}' is not quantized per tensor; ming takes one scale and zero "
                        "point at the model's input and outputs (convert the model with full integer quantization)")
    offset = INTEGER_OFFSETS.get(_PORT_TYPES.get(tensor.type), 0)
    return float(np.float32(q.scale[0])), int(q.zeroPoint[0]) - offset


def _only_reader(graph, index: int):
    """The one operator reading tensor `index` as its first input, if no other reads it and it is no output."""
    readers = [op for op in graph.operators if index in op.inputs]
    if len(readers) != 1 or index in graph.outputs or readers[0].inputs[0] != index or \
            list(readers[0].inputs).count(index) != 1:
        return None
    return readers[0]


def _writer(graph, index: int):
    return next((op for op in graph.operators if index in op.outputs), None)


# ---- the input ----------------------------------------------------------------------------------------------


def _input_chain(model: schema.ModelT) -> list:
    """The ops after the model's input the host runs, in order, up to the last that writes int8 and needs the
    host: reshapes that only add or drop axes of size 1 at the chain's end stay the accelerator's (a Conv1D's
    EXPAND_DIMS)."""
    chain = _input_ops(model)
    tensors = model.subgraphs[0].tensors
    while chain and tensors[chain[-1].inputs[0]].type == schema.TensorType.INT8 and \
            op_name(model, chain[-1]) in INPUT_LAYOUT_OPS - {"TRANSPOSE"} and \
            not _host_layout(tensors[chain[-1].inputs[0]], tensors[chain[-1].outputs[0]], "RESHAPE"):
        chain.pop()
    return chain


def _input_ops(model: schema.ModelT) -> list:
    """The ops after the model's input the host can run, in order, up to the last that writes int8."""
    graph = model.subgraphs[0]
    index, chain, cut = graph.inputs[0], [], 0
    while (op := _only_reader(graph, index)) is not None:
        kind, source, out = op_name(model, op), graph.tensors[index], graph.tensors[op.outputs[0]]
        if kind == "QUANTIZE" and not (source.type in _PORT_TYPES and out.type == schema.TensorType.INT8):
            break
        if kind == "DEQUANTIZE" and not (source.type in _INTEGER_TYPES and out.type == schema.TensorType.FLOAT32):
            break
        if kind not in ("QUANTIZE", "DEQUANTIZE") and (kind not in INPUT_LAYOUT_OPS or out.type != source.type):
            break
        chain.append(op)
        index = op.outputs[0]
        if out.type == schema.TensorType.INT8:
            cut = len(chain)
    return chain[:cut]


def _split_input(model: schema.ModelT) -> InputBoundary:
    graph = model.subgraphs[0]
    index = graph.inputs[0]
    tensor = graph.tensors[index]
    dtype = _PORT_TYPES.get(tensor.type, "int8")
    boundary = InputBoundary(_port(graph, index), dtype,
                             _quantization(tensor) if tensor.type in _INTEGER_TYPES else None)
    steps = []
    for op in _input_chain(model):
        kind, source, out = op_name(model, op), graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
        if kind == "QUANTIZE" and source.type == schema.TensorType.FLOAT32 and boundary.quantization is None:
            boundary = replace(boundary, quantization=_quantization(out))  # the float input's (the host's)
        elif kind == "QUANTIZE" and source.type == schema.TensorType.FLOAT32:  # after a DEQUANTIZE
            steps.append(HostOp("tflite_quantize", scale=_quantization(out)[0], zero_point=_quantization(out)[1]))
        elif kind == "QUANTIZE":
            steps += _requantize(_quantization(source), out)
        elif kind == "DEQUANTIZE":
            scale, zero_point = _quantization(source)
            steps.append(HostOp("dequantize", scale=scale, zero_point=zero_point))
        else:
            steps.append(_layout_step(model, op, kind))
        graph.operators.remove(op)
        graph.inputs = [op.outputs[0]]
    return replace(boundary, host_ops=tuple(steps))


def _requantize(quantization: tuple[float, int], out) -> list[HostOp]:
    """TFLite's QUANTIZE of integers of `quantization` into the tensor `out`: nothing where it only shifts
    uint8 to int8 or back (the same scale, the zero point moved with the values), else TFLite's Requantize with
    the input's scale over the output's, in double."""
    scale, zero_point = _quantization(out)
    if (scale, zero_point) == quantization:
        return []
    effective = float(np.float64(quantization[0]) / np.float64(scale))
    return [HostOp("tflite_requantize", scale=effective, zero_point=zero_point, input_zero_point=quantization[1])]


def _layout_step(model: schema.ModelT, op, kind: str) -> HostOp:
    graph = model.subgraphs[0]
    out = graph.tensors[op.outputs[0]]
    if kind != "TRANSPOSE":
        return HostOp("reshape", shape=tuple(int(d) for d in out.shape))
    perm = graph.tensors[op.inputs[1]]
    data = model.buffers[perm.buffer].data
    if data is None or not len(data):
        raise MingError(f"node '{tensor_name(out)}' (TRANSPOSE): its permutation is not a constant; ming runs an "
                        "input's TRANSPOSE on the host by a constant permutation")
    dtype = np.int64 if perm.type == schema.TensorType.INT64 else np.int32
    rank = len(graph.tensors[op.inputs[0]].shape)
    return HostOp("transpose", axes=tuple(int(a) % rank for a in np.frombuffer(bytes(data), dtype)))


# ---- the outputs --------------------------------------------------------------------------------------------


def _output_chain(model: schema.ModelT, position: int) -> list:
    """The ops before output `position` the host can run, in the model's order, each writing a tensor no other
    op reads: a SOFTMAX (after layout ops only: it takes the accelerator's quantization), QUANTIZEs of integers,
    a DEQUANTIZE (last, or before a QUANTIZE of its floats), and RESHAPEs and TRANSPOSEs (`_host_layout`)
    anywhere."""
    graph = model.subgraphs[0]
    index, chain, softmax = graph.outputs[position], [], False
    while (op := _writer(graph, index)) is not None:
        kind = op_name(model, op)
        source, out = graph.tensors[op.inputs[0]], graph.tensors[index]
        quantizes_float = bool(chain) and op_name(model, chain[0]) == "QUANTIZE" and \
            graph.tensors[chain[0].inputs[0]].type == schema.TensorType.FLOAT32
        if any(index in o.inputs for o in graph.operators if o not in chain) or graph.outputs.count(index) > 1 or \
                (kind == "DEQUANTIZE" and not (quantizes_float or _only_layout(model, chain))) or \
                (softmax and kind not in INPUT_LAYOUT_OPS) or \
                (kind == "QUANTIZE" and not (source.type in _PORT_TYPES and out.type in _INTEGER_TYPES)) or \
                (kind != "DEQUANTIZE" and quantizes_float) or \
                (kind in INPUT_LAYOUT_OPS and not _host_layout(source, out, kind)) or \
                (kind in INPUT_LAYOUT_OPS and _writes_repeat(model, op.inputs[0])) or \
                kind not in OUTPUT_CHAIN_OPS | INPUT_LAYOUT_OPS:
            break
        chain.insert(0, op)
        index = op.inputs[0]
        softmax = softmax or kind == "SOFTMAX"
    return chain


def _writes_repeat(model: schema.ModelT, index: int) -> bool:
    """Whether a TILE writes tensor `index`: the RESHAPE after it is a part of the repeat the accelerator's
    upsampling is (EXPAND_DIMS -> TILE -> RESHAPE), not a step of the host."""
    writer = _writer(model.subgraphs[0], index)
    return writer is not None and op_name(model, writer) == "TILE"


def _host_layout(source, out, kind: str) -> bool:
    """Whether the host runs this layout op before an output: a TRANSPOSE, or a RESHAPE that regroups axes (one
    that only adds or drops axes of size 1 the accelerator streams as it is: a Flatten of a 1 x 1 map)."""
    squeezed = [tuple(int(d) for d in t.shape if d != 1) for t in (source, out)]
    return kind == "TRANSPOSE" or squeezed[0] != squeezed[1]


def _split_output(model: schema.ModelT, position: int) -> OutputBoundary:
    graph = model.subgraphs[0]
    model_tensor = graph.tensors[graph.outputs[position]]
    boundary = OutputBoundary(_port(graph, graph.outputs[position]), _PORT_TYPES.get(model_tensor.type, "int8"))
    chain = _output_chain(model, position)
    if not chain:
        return boundary
    quantization, steps = _quantization(graph.tensors[chain[0].inputs[0]]), []
    for op in chain:
        kind, out = op_name(model, op), graph.tensors[op.outputs[0]]
        if kind == "SOFTMAX":
            if _quantization(out) != SOFTMAX_OUTPUT:
                raise MingError(f"node '{tensor_name(out)}' (SOFTMAX): an int8 Softmax output has scale 1/256 and "
                                "zero point -128")
            steps.append(HostOp("tflite_softmax", scale=float(np.float32(op.builtinOptions.beta))))
            quantization = SOFTMAX_OUTPUT
        elif kind == "QUANTIZE" and graph.tensors[op.inputs[0]].type == schema.TensorType.FLOAT32:
            quantization = _quantization(out)  # after the DEQUANTIZE before it
            steps.append(HostOp("tflite_quantize", scale=quantization[0], zero_point=quantization[1]))
        elif kind == "QUANTIZE":
            steps += _requantize(quantization, out)
            quantization = _quantization(out)
        elif kind in INPUT_LAYOUT_OPS:
            steps.append(_layout_step(model, op, kind))
        else:  # DEQUANTIZE
            steps.append(HostOp("dequantize", scale=quantization[0], zero_point=quantization[1]))
        graph.operators.remove(op)
    graph.outputs[position] = chain[0].inputs[0]
    values = [op for op in steps if op.kind not in LAYOUT_STEPS]
    if [op.kind for op in values] == ["dequantize"]:
        steps.remove(values[0])  # with the accelerator's own quantization: the host's at a float output's end
    return replace(boundary, host_ops=tuple(steps))


def _only_layout(model: schema.ModelT, ops: list) -> bool:
    return all(op_name(model, op) in INPUT_LAYOUT_OPS for op in ops)


def _check_accelerator_ports(model: schema.ModelT) -> None:
    """The accelerator's input is int8 (or float, quantized inside); a uint8 one needs its QUANTIZE to int8."""
    graph = model.subgraphs[0]
    tensor = graph.tensors[graph.inputs[0]]
    if tensor.type == schema.TensorType.UINT8:
        readers = [op for op in graph.operators if graph.inputs[0] in op.inputs]
        ops = ", ".join(f"'{tensor_name(graph.tensors[op.outputs[0]])}' ({op_name(model, op)})" for op in readers)
        raise MingError(f"input '{tensor_name(tensor)}' is uint8 and read by {ops or 'no op'}; ming takes a uint8 "
                        "input through the one QUANTIZE to int8 the converter writes after it (convert the model "
                        "with inference_input_type=tf.uint8 and full integer quantization)")


# ---- the graph's ports ----------------------------------------------------------------------------------------


def with_host_boundary(graph: Graph, model: schema.ModelT, boundary: HostBoundary) -> Graph:
    """The model's own input and outputs: their names, shapes, types, quantization and host steps."""
    subgraph = model.subgraphs[0]
    scale, zero_point = boundary.input.quantization or _quantization(subgraph.tensors[subgraph.inputs[0]])
    graph.inputs = [_with_input_boundary(replace(i, scale=scale, zero_point=zero_point), boundary.input)
                    for i in graph.inputs]
    graph.outputs = [_with_output_boundary(output, subgraph.tensors[index], output_boundary)
                     for output, index, output_boundary in zip(graph.outputs, subgraph.outputs, boundary.outputs)]
    return graph


def _with_input_boundary(graph_input, boundary: InputBoundary):
    steps = boundary.host_ops
    graph_input = replace(graph_input, name=boundary.port.name, onnx_shape=boundary.port.shape, dtype=boundary.dtype,
                          quantizer="tflite" if boundary.dtype == "float32" else graph_input.quantizer)
    layout = [op for op in steps if op.kind in LAYOUT_STEPS]
    if any(op.kind != "transpose" for op in layout):
        return replace(graph_input, host_ops=_simplified(steps))
    permutation = graph_input.permutation or tuple(range(len(boundary.port.shape)))
    for op in reversed(layout):  # x -> transpose(A) -> transpose(P) is x -> transpose(A[P])
        permutation = tuple(op.axes[a] for a in permutation)
    identity = permutation == tuple(range(len(permutation)))
    return replace(graph_input, host_ops=tuple(op for op in steps if op.kind not in LAYOUT_STEPS),
                   permutation=() if identity else permutation)


def _with_output_boundary(output: GraphOutput, tensor, boundary: OutputBoundary) -> GraphOutput:
    scale, zero_point = _quantization(tensor)
    steps = boundary.host_ops
    if any(op.kind in LAYOUT_STEPS for op in steps) or \
            (output.permutation and any(op.kind == "tflite_softmax" for op in steps)):
        steps = _in_model_layout(output) + steps
        output = replace(output, permutation=())
    return replace(output, name=boundary.port.name, onnx_shape=boundary.port.shape, scale=scale,
                   zero_point=zero_point, host_ops=_simplified(steps), dtype=boundary.dtype)


def _simplified(steps: tuple[HostOp, ...]) -> tuple[HostOp, ...]:
    """`steps` with each run of transposes one transpose (none where they cancel) and each run of reshapes the
    last one."""
    result: list[HostOp] = []
    for op in steps:
        last = result[-1] if result else None
        if last is not None and last.kind == op.kind == "transpose":
            result[-1] = replace(last, axes=tuple(last.axes[a] for a in op.axes))
        elif last is not None and last.kind == op.kind == "reshape":
            result[-1] = op
        else:
            result.append(op)
        if result[-1].kind == "transpose" and result[-1].axes == tuple(range(len(result[-1].axes))):
            result.pop()
    return tuple(result)


def _in_model_layout(output: GraphOutput) -> tuple[HostOp, ...]:
    """The host steps that give the accelerator's output the layout of the model's tensor it comes from (NHWC;
    the steps after it, a Softmax over channels or the model's RESHAPE and TRANSPOSE, are the model's)."""
    steps = (HostOp("reshape", shape=graph_layout_shape(output.onnx_shape, output.permutation)),)
    if output.permutation:
        steps += (HostOp("transpose", axes=tuple(int(a) for a in np.argsort(output.permutation))),)
    return steps
