"""TFLite frontend: check the model, import it through IREE's TOSA input, lift it into a Graph.

Phases (DESIGN.md, "Frontend facts"):
  TFLite flatbuffer --(tosa-converter-for-tflite, MLIR bytecode)--> TOSA
      --(iree-compile --iree-input-type=tosa --compile-to=global-optimization)--> integer linalg
      --(lift.Lifter; layout.channels_first)--> ming Graph.
TFLite's int8 arithmetic arrives as integer code (TOSA RESCALE lowered to
64-bit multiply, rounding and shift), which the lifter reads as TFLite's
fixed-point requantization (`fixed_point`). A symbolic batch is fixed to 1
in the flatbuffer's shape signatures before the conversion.
"""

from __future__ import annotations

import io
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema
from iree.compiler import ir

from ming_py.ir import FixedPointRequant, Graph, GraphOutput, HostOp, MingError

from .layout import channels_first
from . import iree_compile
from .lift import Lifter, ModelPort

ACCELERATED_OPS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "AVERAGE_POOL_2D", "MEAN",
                             "CONCATENATION", "MAX_POOL_2D", "RESHAPE", "PAD"})
BOUNDARY_OPS = frozenset({"QUANTIZE", "DEQUANTIZE", "SOFTMAX"})  # on the host, at the input or the output
SUPPORTED_OPS = ACCELERATED_OPS | BOUNDARY_OPS
IREE_FLAGS = (
    "--iree-input-type=tosa",
    "--compile-to=global-optimization",
    "--mlir-print-debuginfo",
)
_OP_NAMES = {value: name for name, value in vars(schema.BuiltinOperator).items() if not name.startswith("_")}
_TYPE_NAMES = {value: name for name, value in vars(schema.TensorType).items() if not name.startswith("_")}


def load_tflite(path: Path) -> schema.ModelT:
    if not path.is_file():
        raise MingError(f"{path}: file not found; pass the path of an int8 .tflite model")
    data = path.read_bytes()
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise MingError(f"{path}: not a TFLite flatbuffer (no TFL3 identifier)")
    try:
        return schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    except Exception as exc:  # a damaged flatbuffer raises from deep inside the generated reader
        raise MingError(f"{path}: not a valid TFLite model ({type(exc).__name__})") from None


def op_name(model: schema.ModelT, operator) -> str:
    code = model.operatorCodes[operator.opcodeIndex]
    return _OP_NAMES.get(max(code.builtinCode, code.deprecatedBuiltinCode), str(code.builtinCode))


def check_supported(model: schema.ModelT) -> None:
    if len(model.subgraphs or []) != 1:
        raise MingError(f"model has {len(model.subgraphs or [])} subgraphs; ming compiles single-graph models")
    graph = model.subgraphs[0]
    if len(graph.inputs) != 1:
        raise MingError(f"model has {len(graph.inputs)} inputs; ming compiles single-input CNNs")
    for index, operator in enumerate(graph.operators or []):
        kind = op_name(model, operator)
        if kind not in SUPPORTED_OPS:
            output = graph.tensors[operator.outputs[0]].name.decode() if operator.outputs else str(index)
            raise MingError(f"node '{output}' ({kind}) is not supported; supported TFLite ops: "
                            + ", ".join(sorted(SUPPORTED_OPS)))
    for index in list(graph.inputs) + list(graph.outputs):
        tensor = graph.tensors[index]
        if tensor.type not in (schema.TensorType.INT8, schema.TensorType.FLOAT32):
            raise MingError(f"tensor '{tensor.name.decode()}' is {_TYPE_NAMES.get(tensor.type, tensor.type)}; "
                            "ming compiles int8 models (int8 or float32 inputs and outputs)")
    if not any(t.type == schema.TensorType.INT8 for t in graph.tensors):
        raise MingError("model is not quantized (no int8 tensor); convert it with full integer quantization")


def fix_symbolic_batch(model: schema.ModelT) -> list[str]:
    """Batch 1 where the shape signature leaves the batch dimension open (-1), with a note per model input."""
    graph = model.subgraphs[0]
    notes = []
    for index, tensor in enumerate(graph.tensors):
        signature = tensor.shapeSignature
        if signature is not None and len(signature) > 1 and signature[0] == -1:
            tensor.shapeSignature = [1] + list(signature[1:])
            tensor.shape = [1] + list(tensor.shape[1:])
            if index in graph.inputs:
                notes.append(f"'{tensor.name.decode()}' has a symbolic batch dimension; compiled for batch 1")
    for tensor in graph.tensors:
        if tensor.shapeSignature is not None and any(d < 0 for d in tensor.shapeSignature):
            raise MingError(f"tensor '{tensor.name.decode()}' has a dynamic shape {list(tensor.shapeSignature)}; "
                            "convert the model with static shapes")
    return notes


@dataclass(frozen=True)
class OutputBoundary:
    """A model output's final SOFTMAX and DEQUANTIZE, moved out of the model to the host."""

    port: ModelPort | None = None  # the model's output, if the host computes it
    dequantized: bool = False  # the model's output is float
    softmax_beta: float | None = None  # the output ends with a Softmax, run on the host
    softmax_output: tuple[float, int] = (1.0, 0)


@dataclass(frozen=True)
class HostBoundary:
    """A float input's QUANTIZE and every output's boundary, moved out of the model to the host."""

    input: ModelPort | None = None  # the float input, if the model quantized it
    outputs: tuple[OutputBoundary, ...] = ()  # in the model's order


def _quantization(tensor) -> tuple[float, int]:
    q = tensor.quantization
    if q is None or q.scale is None or len(q.scale) != 1:
        raise MingError(f"tensor '{tensor.name.decode()}' is not quantized per tensor")
    return float(np.float32(q.scale[0])), int(q.zeroPoint[0])


def split_host_boundary(model: schema.ModelT) -> HostBoundary:
    """Remove a QUANTIZE that reads the float input and, for every output, a DEQUANTIZE that writes it
    and a SOFTMAX before: the host does them (TFLite's rounding, `ming_host.tflite_quantize`), the
    accelerator takes and gives int8."""
    graph = model.subgraphs[0]
    boundary = HostBoundary()
    first = next((op for op in graph.operators if graph.inputs[0] in op.inputs), None)
    if first is not None and op_name(model, first) == "QUANTIZE" and \
            graph.tensors[graph.inputs[0]].type == schema.TensorType.FLOAT32:
        boundary = replace(boundary, input=_port(graph, graph.inputs[0]))
        graph.inputs = [first.outputs[0]]  # its quantization is the accelerator input's
        graph.operators.remove(first)
    outputs = [_split_output(model, position) for position in range(len(graph.outputs))]
    return replace(boundary, outputs=tuple(outputs))


def _split_output(model: schema.ModelT, position: int) -> OutputBoundary:
    """The host side of output `position`: its DEQUANTIZE and a SOFTMAX before it taken out of the graph."""
    graph = model.subgraphs[0]
    boundary = OutputBoundary()

    def last_op():
        return next((op for op in graph.operators if graph.outputs[position] in op.outputs), None)

    last = last_op()
    if last is not None and op_name(model, last) == "DEQUANTIZE":
        boundary = replace(boundary, port=_port(graph, graph.outputs[position]), dequantized=True)
        graph.outputs[position] = last.inputs[0]
        graph.operators.remove(last)
    last = last_op()
    if last is not None and op_name(model, last) == "SOFTMAX":
        if _quantization(graph.tensors[last.outputs[0]]) != (float(np.float32(1 / 256)), -128):
            raise MingError(f"node '{graph.tensors[last.outputs[0]].name.decode()}' (SOFTMAX): an int8 Softmax "
                            "output has scale 1/256 and zero point -128")
        beta = float(np.float32(last.builtinOptions.beta))
        boundary = replace(boundary, softmax_beta=beta, port=boundary.port or _port(graph, graph.outputs[position]),
                           softmax_output=_quantization(graph.tensors[last.outputs[0]]))
        graph.outputs[position] = last.inputs[0]
        graph.operators.remove(last)
    return boundary


def _with_host_boundary(graph: Graph, model: schema.ModelT, boundary: HostBoundary) -> Graph:
    """The model's own input and outputs: their quantization, and the float ones the host converts."""
    subgraph = model.subgraphs[0]
    scale, zero_point = _quantization(subgraph.tensors[subgraph.inputs[0]])
    graph.inputs = [replace(i, scale=scale, zero_point=zero_point) for i in graph.inputs]
    if boundary.input is not None:
        graph.inputs = [replace(i, name=boundary.input.name, dtype="float32", quantizer="tflite")
                        for i in graph.inputs]
    graph.outputs = [_with_output_boundary(output, subgraph.tensors[index], output_boundary)
                     for output, index, output_boundary in zip(graph.outputs, subgraph.outputs, boundary.outputs)]
    return graph


def _with_output_boundary(output: GraphOutput, tensor, boundary: OutputBoundary) -> GraphOutput:
    scale, zero_point = _quantization(tensor)
    output = replace(output, scale=scale, zero_point=zero_point)
    if boundary.port is None:
        return output
    host_ops: tuple[HostOp, ...] = ()
    if boundary.softmax_beta is not None:
        host_ops = (HostOp("tflite_softmax", scale=boundary.softmax_beta),)
        if boundary.dequantized:
            scale, zero_point = boundary.softmax_output
            host_ops += (HostOp("dequantize", scale=scale, zero_point=zero_point),)
    return replace(output, name=boundary.port.name, onnx_shape=boundary.port.shape, host_ops=host_ops,
                   dtype="float32" if boundary.dequantized else "int8")


def _flatbuffer(model: schema.ModelT) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def import_to_linalg(model: schema.ModelT, path: Path) -> str:
    """The model as integer linalg-on-tensors MLIR text, through TOSA bytecode."""
    import tosa_converter_for_tflite as converter

    tosa = io.BytesIO()
    with tempfile.TemporaryDirectory(prefix="ming-") as scratch:  # the converter reads a file
        staged = Path(scratch) / "model.tflite"
        staged.write_bytes(_flatbuffer(model))
        try:  # with locations: IREE keeps each op's TFLite output tensor name, which names ming's kernels
            converter.tflite_flatbuffer_to_tosa_mlir(str(staged), tosa, converter.TosaConverterOutputFormat.Bytecode,
                                                     converter.TosaConverterDebugInfo.Enable)
        except RuntimeError as exc:
            raise MingError(f"{path}: TOSA conversion failed ({str(exc).splitlines()[0][:160]})") from None
    return iree_compile.lower(tosa.getvalue(), IREE_FLAGS)


def _port(graph, index: int) -> ModelPort:
    tensor = graph.tensors[index]
    return ModelPort(tensor.name.decode(), tuple(int(d) for d in tensor.shape))


def import_tflite(path: str | Path) -> Graph:
    path = Path(path)
    model = load_tflite(path)
    check_supported(model)
    notes = fix_symbolic_batch(model)
    boundary = split_host_boundary(model)
    graph = model.subgraphs[0]
    for operator in graph.operators:
        if op_name(model, operator) in BOUNDARY_OPS:
            raise MingError(f"node '{graph.tensors[operator.outputs[0]].name.decode()}' ({op_name(model, operator)}) "
                            "is supported only as the model's first (QUANTIZE) or last (SOFTMAX, DEQUANTIZE) op")
    text = import_to_linalg(model, path)
    name = (model.description or b"").decode() or path.stem
    op_types = {graph.tensors[op.outputs[0]].name.decode(): op_name(model, op) for op in graph.operators}
    with ir.Context() as context:
        module = ir.Module.parse(text, context)
        lifted = Lifter(name, [_port(graph, i) for i in graph.inputs], [_port(graph, i) for i in graph.outputs],
                        op_types, notes).run(module)
    return _with_host_boundary(_reference_rounding(channels_first(lifted), op_types), model, boundary)


def _reference_rounding(graph: Graph, op_types: dict[str, str]) -> Graph:
    """TOSA rounds every requantization the same way (TFLite's MultiplyByQuantizedMultiplier); LiteRT's
    reference FULLY_CONNECTED rounds f32(acc) * f32(multiplier) half away from zero instead (measured
    equal on every output in tests/test_tflite.py). ming follows the reference kernels."""
    for kernel in graph.kernels():
        if op_types.get(kernel.source) == "FULLY_CONNECTED" and isinstance(kernel.epilogue, FixedPointRequant):
            kernel.epilogue.float32 = True
    return graph

