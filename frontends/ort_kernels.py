"""Which kernel onnxruntime's default CPU session runs for each Add and AveragePool of a QDQ model, from the
graph alone.

On x86 (`session.qdqisint8allowed` 0) onnxruntime first gives every consumer of a shared DequantizeLinear its
own copy (EnsureUniqueDQForNodeUnit), then rewrites an int8 QuantizeLinear -> DequantizeLinear pair to uint8
where the QuantizeLinear's output reaches exactly one consumer (QDQS8ToU8Transformer). A QDQ Add becomes
QLinearAdd only where its two inputs and its output then have one type: that type's kernel. Elsewhere (a
residual Add whose input has fan-out) it runs in float, DQ -> Add -> Q. AveragePool likewise becomes
QLinearAveragePool. Sub has no QLinear kernel; a QOperator QLinearAdd or QLinearAveragePool runs as it is written. docs/numerics.md §4.1; tests/test_eltwise.py checks this against the graph
onnxruntime optimizes.
"""

from __future__ import annotations

import onnx
from onnx import TensorProto

from .onnx_formats import element_types

FLOAT = "float"
_TYPES = {TensorProto.INT8: "int8", TensorProto.UINT8: "uint8"}


def qlinear_kernels(model: onnx.ModelProto) -> dict[str, str]:
    """Per Add, AveragePool, QLinearAdd or QLinearAveragePool node name (and a Relu's right after an Add):
    "uint8" or "int8" (the QLinear kernel of that type) or "float"."""
    graph = model.graph
    producers = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.output}
    types = element_types(model)

    def reach(tensor: str) -> int:
        """Consumers of `tensor` once every shared DequantizeLinear reading it is copied per consumer."""
        readers = consumers.get(tensor, [])
        if any(r.op_type != "DequantizeLinear" for r in readers) or tensor in outputs:
            return 2
        return sum(len(consumers.get(r.output[0], [])) + (r.output[0] in outputs) for r in readers)

    def dequantized_type(dequantize: onnx.NodeProto) -> str | None:
        source = dequantize.input[0]
        kind = _TYPES.get(types.get(source))
        quantize = producers.get(source)
        if kind == "int8" and quantize is not None and quantize.op_type == "QuantizeLinear" and reach(source) == 1:
            return "uint8"
        return kind

    def quantized_type(add: onnx.NodeProto) -> str | None:
        readers = consumers.get(add.output[0], [])
        if len(readers) == 1 and readers[0].op_type == "Relu":  # folded into a QuantizeLinear at its minimum
            readers = consumers.get(readers[0].output[0], [])
        if len(readers) != 1 or readers[0].op_type != "QuantizeLinear":
            return None
        output = readers[0].output[0]
        kind = _TYPES.get(types.get(output))
        return "uint8" if kind == "int8" and reach(output) == 1 else kind

    kernels = {}
    for node in graph.node:
        if node.op_type in ("QLinearAdd", "QLinearAveragePool"):
            kernels[node.name] = _TYPES.get(types.get(node.output[0]), FLOAT)
        elif node.op_type in ("Add", "AveragePool"):
            inputs = [producers.get(name) for name in node.input]
            if any(p is None or p.op_type != "DequantizeLinear" for p in inputs):
                kernels[node.name] = FLOAT
                continue
            found = {dequantized_type(p) for p in inputs} | {quantized_type(node)}
            kernels[node.name] = found.pop() if len(found) == 1 and None not in found else FLOAT
            for reader in consumers.get(node.output[0], []):  # IREE may name the sum after a Relu it fuses
                if reader.op_type == "Relu":
                    kernels[reader.name] = kernels[node.name]
    return kernels

