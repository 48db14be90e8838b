"""Converters' idioms rewritten into the int8 QDQ forms onnxruntime's quantizer writes, exactly.

tf2onnx (from an int8 TFLite model) and other exporters write a few patterns `quantize_static` never does;
each is rewritten into its quantize_static equivalent, which computes the same values:

* a dense layer as MatMul followed by an Add of its dequantized int32 bias: one Gemm with that bias as C
  (onnxruntime's MatMulAddFusion makes the same Gemm before its QDQ fusions);
* Squeeze and Unsqueeze (around pooling, Conv1D): a Reshape to the same static shape.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def rewrite_converter_idioms(model: onnx.ModelProto) -> None:
    """Rewrite, in place, the idioms above (the model's batch is already fixed to 1)."""
    _squeezes_to_reshapes(model)
    _dense_layers(model.graph, _static_shapes(model))


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
    shapes = _static_shapes(model)
    for position, node in enumerate(list(graph.node)):
        if node.op_type not in ("Squeeze", "Unsqueeze") or node.output[0] not in shapes:
            continue
        shape_name = f"{node.name}_shape"
        graph.initializer.append(numpy_helper.from_array(np.array(shapes[node.output[0]], np.int64), shape_name))
        reshape = helper.make_node("Reshape", [node.input[0], shape_name], [node.output[0]], name=node.name)
        graph.node.remove(node)
        graph.node.insert(position, reshape)


def _static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    inferred = onnx.shape_inference.infer_shapes(model)
    values = list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)
    shapes = {}
    for value in values:
        dims = value.type.tensor_type.shape.dim
        if value.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            shapes[value.name] = tuple(d.dim_value for d in dims)
    return shapes
