"""Element-wise activations a QDQ quantizer left in float before a MaxPool or a nearest Resize, given the
quantization of what follows so that they become tables.

onnxruntime's `quantize_static` (QDQ) quantizes only the ops it has int8 kernels for: Tanh, HardSigmoid,
Softplus, Elu and the like stay float, and so does a MaxPool or Resize reading them, quantized only after it:
`DQ -> Tanh -> MaxPool -> Q`. MaxPool takes a maximum and a nearest Resize copies values; quantization is
monotone, so quantizing each activation value first with that Q's scale and zero point (`DQ -> Tanh -> Q ->
DQ -> MaxPool -> Q`) gives the same int8 results bit for bit. An activation read so by several such
consumers, or also by its own QuantizeLinear, gets a copy per consumer: each copy feeds one QuantizeLinear,
the form `onnx_tables` tabulates; so does one read by several QuantizeLinears (a quantizer's dedicated QDQ
pair per consumer).
"""

from __future__ import annotations

import onnx
from onnx import helper

from .onnx_formats import FreshNames

# consumers whose result, quantized, equals the result computed on values quantized the same way
_ORDER_KEEPING_OPS = frozenset({"MaxPool", "Resize"})


def quantize_float_activations(model: onnx.ModelProto, unary_ops: frozenset[str]) -> None:
    """Rewrite every node of `unary_ops` that reads a DequantizeLinear and feeds a float MaxPool or nearest
    Resize quantized by one QuantizeLinear, or several QuantizeLinears (module docstring)."""
    graph = model.graph
    names = FreshNames(graph)
    for node in list(graph.node):
        if node.op_type not in unary_ops or len([o for o in node.output if o]) != 1 or \
                not _reads_dequantized(graph, node):
            continue
        readers = _readers(graph, node.output[0])
        moved = [reader for reader in readers if _quantized_after(graph, reader)]
        for reader in moved:
            _give_own_activation(graph, node, reader, names)
        for quantize in [r for r in readers if r.op_type == "QuantizeLinear"][1:]:  # a QDQ pair per consumer
            _give_own_copy(graph, node, quantize, names)
        if moved and not _readers(graph, node.output[0]) and node.output[0] not in _outputs(graph):
            graph.node.remove(node)


def _give_own_copy(graph: onnx.GraphProto, node: onnx.NodeProto, quantize: onnx.NodeProto, names) -> None:
    """A copy of `node` that `quantize` reads instead of `node`."""
    copy = _copy(node, quantize, names)
    quantize.input[0] = copy.output[0]
    graph.node.insert(list(graph.node).index(quantize), copy)


def _copy(node: onnx.NodeProto, reader: onnx.NodeProto, names) -> onnx.NodeProto:
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    copy.name = names.fresh(f"{node.name}_for_{reader.name}")
    copy.output[0] = names.fresh(f"{node.output[0]}_for_{reader.name}")
    return copy


def _give_own_activation(graph: onnx.GraphProto, node: onnx.NodeProto, reader: onnx.NodeProto, names) -> None:
    """A copy of `node` quantized by `reader`'s QuantizeLinear and dequantized back, in front of `reader`."""
    (quantize,) = _readers(graph, reader.output[0])
    parameters = list(quantize.input[1:])
    copy = _copy(node, reader, names)
    quantized, dequantized = names.fresh(f"{copy.output[0]}_quantized"), names.fresh(f"{copy.output[0]}_dequantized")
    added = [copy,
             helper.make_node("QuantizeLinear", [copy.output[0], *parameters], [quantized],
                              name=names.fresh(f"{copy.name}_QuantizeLinear")),
             helper.make_node("DequantizeLinear", [quantized, *parameters], [dequantized],
                              name=names.fresh(f"{copy.name}_DequantizeLinear"))]
    # the same quantization as `quantize`'s: its attributes (output type, axis, saturation), the axis to dequantize
    added[1].attribute.extend(quantize.attribute)
    added[2].attribute.extend(a for a in quantize.attribute if a.name in ("axis", "block_size"))
    for position, name in enumerate(reader.input):
        if name == node.output[0]:
            reader.input[position] = dequantized
    at = list(graph.node).index(reader)
    for offset, new in enumerate(added):
        graph.node.insert(at + offset, new)


def _reads_dequantized(graph: onnx.GraphProto, node: onnx.NodeProto) -> bool:
    producer = next((n for n in graph.node if node.input[0] in n.output), None)
    return producer is not None and producer.op_type == "DequantizeLinear"


def _quantized_after(graph: onnx.GraphProto, reader: onnx.NodeProto) -> bool:
    """`reader` is a MaxPool (no indices) or nearest Resize whose one result only a QuantizeLinear reads."""
    if reader.op_type not in _ORDER_KEEPING_OPS or len([o for o in reader.output if o]) != 1:
        return False
    if reader.op_type == "Resize" and _string_attribute(reader, "mode", "nearest") != "nearest":
        return False
    readers = _readers(graph, reader.output[0])
    return len(readers) == 1 and readers[0].op_type == "QuantizeLinear" \
        and reader.output[0] not in _outputs(graph)


def _string_attribute(node: onnx.NodeProto, name: str, default: str) -> str:
    return next((a.s.decode() for a in node.attribute if a.name == name), default)


def _readers(graph: onnx.GraphProto, tensor: str) -> list[onnx.NodeProto]:
    return [n for n in graph.node if tensor in n.input]


def _outputs(graph: onnx.GraphProto) -> set[str]:
    return {v.name for v in graph.output}
