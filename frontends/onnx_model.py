"""ONNX frontend: check the model, import it through IREE, lift it into a Graph.

Phases (DESIGN.md, "Frontend facts"):
  ONNX --(iree onnx_importer, node names kept as locations)--> torch dialect
       --(iree-compile --compile-to=global-optimization
          --iree-global-opt-enable-qdq-to-integer-math)--> linalg on tensors
       --(lift.Lifter)--> ming Graph.
The global-optimization phase is the latest one that still has whole-tensor
`linalg.generic`s (no dispatch regions yet) and already folds QDQ around convs
and matmuls into i8 x i8 -> i32 bodies.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import onnx
from iree.compiler import ir
from iree.compiler.extras import onnx_importer
from iree.compiler.tools import binaries

from ming_py.ir import Graph, MingError

from .lift import Lifter

SUPPORTED_OPS = frozenset({
    "Conv", "Gemm", "MatMul", "MaxPool", "AveragePool", "GlobalAveragePool", "Relu", "Clip",
    "Add", "Concat", "Flatten", "Reshape", "Softmax", "QuantizeLinear", "DequantizeLinear", "Identity",
})

IREE_FLAGS = (
    "--iree-input-type=onnx",
    "--compile-to=global-optimization",
    "--iree-global-opt-enable-qdq-to-integer-math",
    "--mlir-print-debuginfo",
)


def load_onnx(path: Path) -> onnx.ModelProto:
    if not path.is_file():
        raise MingError(f"{path}: file not found; pass the path of an int8 QDQ .onnx model")
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as exc:  # onnx raises several unrelated types for bad files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MingError(f"{path}: not a valid ONNX model ({first[:120]})") from None
    return model


def check_supported(model: onnx.ModelProto) -> None:
    """Reject what ming cannot compile, naming the node and what to do."""
    graph = model.graph
    initializers = {i.name for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializers]
    if len(inputs) != 1:
        raise MingError(f"model has {len(inputs)} inputs; ming compiles single-input CNNs")
    for value in list(inputs) + list(graph.output):
        dims = value.type.tensor_type.shape.dim
        if any(not d.HasField("dim_value") or d.dim_value <= 0 for d in dims):
            raise MingError(f"tensor '{value.name}' has a dynamic shape; export the model with static shapes "
                            "(batch 1)")
        if dims and dims[0].dim_value != 1:
            raise MingError(f"tensor '{value.name}' has batch {dims[0].dim_value}; ming compiles batch 1 "
                            "(re-export with batch size 1)")
    for node in graph.node:
        if node.domain not in ("", "ai.onnx"):
            raise MingError(f"node '{node.name}' ({node.domain}.{node.op_type}) is not supported; "
                            "export a QDQ model with standard ONNX ops")
        if node.op_type not in SUPPORTED_OPS:
            raise MingError(f"node '{node.name}' ({node.op_type}) is not supported; supported ops: "
                            + ", ".join(sorted(SUPPORTED_OPS)))
    for node in graph.node:
        if node.op_type == "Conv":
            group = next((a.i for a in node.attribute if a.name == "group"), 1)
            weight = _initializer_behind(graph, node.input[1])
            depthwise = weight is not None and weight.dims[1] == 1
            if group > 1 and not depthwise:
                raise MingError(f"node '{node.name}' (Conv, group={group}) is a grouped convolution; ming supports "
                                "group=1 and depthwise (group=channels) convolutions")
    if not any(n.op_type == "QuantizeLinear" for n in graph.node):
        raise MingError("model is not quantized (no QuantizeLinear); quantize it to int8 QDQ with "
                        "onnxruntime.quantization.quantize_static")
    for node in graph.node:
        if node.op_type == "QuantizeLinear" and len(node.input) > 2:
            zero_point = next((i for i in graph.initializer if i.name == node.input[2]), None)
            if zero_point is not None and zero_point.data_type != onnx.TensorProto.INT8:
                raise MingError(f"node '{node.name}' quantizes to {onnx.TensorProto.DataType.Name(zero_point.data_type)}; "
                                "ming needs int8 (activation_type=QuantType.QInt8)")


def _initializer_behind(graph: onnx.GraphProto, name: str) -> onnx.TensorProto | None:
    """The initializer feeding `name`, looking through a DequantizeLinear."""
    producers = {out: node for node in graph.node for out in node.output}
    if name in producers and producers[name].op_type == "DequantizeLinear":
        name = producers[name].input[0]
    return next((i for i in graph.initializer if i.name == name), None)


def import_to_linalg(model: onnx.ModelProto) -> str:
    """The model as linalg-on-tensors MLIR text (with ONNX node names as locations)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    context = ir.Context()
    info = onnx_importer.ModelInfo(inferred)
    module = info.create_module(context=context).operation
    onnx_importer.NodeImporter.define_function(info.main_graph, module).import_all()
    torch_mlir = module.get_asm(enable_debug_info=True)
    result = subprocess.run([binaries.find_tool("iree-compile"), "-", *IREE_FLAGS, "-o", "-"],
                            input=torch_mlir.encode(), capture_output=True)
    if result.returncode != 0:
        message = next((line for line in result.stderr.decode().splitlines() if "error" in line),
                       "iree-compile failed")
        raise MingError(f"IREE could not lower the model: {message.strip()[:200]}")
    return result.stdout.decode()


def import_onnx(path: str | Path) -> Graph:
    path = Path(path)
    model = load_onnx(path)
    check_supported(model)
    text = import_to_linalg(model)
    with ir.Context() as context:
        module = ir.Module.parse(text, context)
        def shape(value):
            return tuple(d.dim_value for d in value.type.tensor_type.shape.dim)

        inputs = {i.name: shape(i) for i in model.graph.input}
        outputs = [o.name for o in model.graph.output]
        op_types = {node.name: node.op_type for node in model.graph.node}
        return Lifter(model.graph.name or path.stem, inputs, outputs, [shape(o) for o in model.graph.output],
                      op_types).run(module)
