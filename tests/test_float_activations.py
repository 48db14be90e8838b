"""`onnx_float_activations.quantize_float_activations`: an element-wise activation left float before a MaxPool
or nearest Resize gets the QuantizeLinear after it, a copy per such consumer, and onnxruntime's results stay
the same bit for bit."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ming_py.frontends.onnx_float_activations import quantize_float_activations
from ming_py.frontends.onnx_tables import TABLE_OPS
from ming_py.ort_session import onnxruntime_session

pytestmark = pytest.mark.unit


def _qdq(graph_nodes: list, tensor: str, scale: float, zero_point: int, stem: str) -> tuple[str, list]:
    """`tensor` quantized and dequantized with its own named parameters."""
    initializers = [numpy_helper.from_array(np.float32(scale), f"{stem}_scale"),
                    numpy_helper.from_array(np.int8(zero_point), f"{stem}_zero_point")]
    graph_nodes += [helper.make_node("QuantizeLinear", [tensor, f"{stem}_scale", f"{stem}_zero_point"],
                                     [f"{stem}_q"], name=f"{stem}_Q"),
                    helper.make_node("DequantizeLinear", [f"{stem}_q", f"{stem}_scale", f"{stem}_zero_point"],
                                     [f"{stem}_dq"], name=f"{stem}_DQ")]
    return f"{stem}_dq", initializers


def _model(activation: str) -> onnx.ModelProto:
    """x -> QDQ -> activation, read by its own QDQ (an output), by a MaxPool and by a nearest Resize, both
    float and quantized after; the three outputs float."""
    nodes, initializers = [], []
    x, more = _qdq(nodes, "x", 0.05, 3, "input")
    initializers += more
    nodes.append(helper.make_node(activation, [x], ["act"], name="act"))
    own, more = _qdq(nodes, "act", 0.01, -5, "own")
    initializers += more
    nodes.append(helper.make_node("MaxPool", ["act"], ["pooled"], name="pool", kernel_shape=[2, 2],
                                  strides=[1, 1], pads=[0, 0, 1, 1]))
    pooled, more = _qdq(nodes, "pooled", 0.013, 7, "pooled")
    initializers += more
    initializers.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"))
    nodes.append(helper.make_node("Resize", ["act", "", "scales"], ["resized"], name="resize", mode="nearest"))
    resized, more = _qdq(nodes, "resized", 0.011, -2, "resized")
    initializers += more
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in
               ((own, [1, 2, 4, 4]), (pooled, [1, 2, 4, 4]), (resized, [1, 2, 8, 8]))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                              outputs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def _run(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    session = onnxruntime_session(model.SerializeToString())
    return session.run(None, {"x": x})


@pytest.mark.parametrize("activation", ["Tanh", "HardSigmoid", "Softplus", "Elu", "HardSwish"])
def test_each_float_consumer_gets_its_own_quantized_activation_and_the_results_stay(activation):
    model = _model(activation)
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    quantize_float_activations(rewritten, TABLE_OPS)
    onnx.checker.check_model(rewritten)
    nodes = {n.name: n for n in rewritten.graph.node}
    copies = [n for n in rewritten.graph.node if n.op_type == activation]
    assert len(copies) == 3 and "act" in nodes  # the original keeps its own QuantizeLinear
    for copy in copies:
        (reader,) = [n for n in rewritten.graph.node if copy.output[0] in n.input]
        assert reader.op_type == "QuantizeLinear"
    for consumer, quantize in (("pool", "pooled_Q"), ("resize", "resized_Q")):
        dequantize = next(n for n in rewritten.graph.node if n.output[0] == nodes[consumer].input[0])
        assert dequantize.op_type == "DequantizeLinear" and dequantize.input[1:] == nodes[quantize].input[1:]
    x = (np.random.default_rng(0).standard_normal((1, 2, 4, 4)) * 3).astype(np.float32)
    for ours, theirs in zip(_run(rewritten, x), _run(model, x)):
        assert np.array_equal(ours.view(np.uint32), theirs.view(np.uint32))


def test_an_activation_only_float_consumers_read_is_replaced_by_its_copies():
    model = _model("Tanh")
    model.graph.output.remove(model.graph.output[0])
    for name in ("own_Q", "own_DQ"):
        model.graph.node.remove(next(n for n in model.graph.node if n.name == name))
    quantize_float_activations(model, TABLE_OPS)
    assert "act" not in {n.name for n in model.graph.node}
    assert len([n for n in model.graph.node if n.op_type == "Tanh"]) == 2


def test_a_float_consumer_not_quantized_after_is_left_as_it_is():
    model = _model("Tanh")
    pooled_q = next(n for n in model.graph.node if n.name == "pooled_Q")
    model.graph.node.remove(pooled_q)
    model.graph.node.remove(next(n for n in model.graph.node if n.name == "pooled_DQ"))
    model.graph.output[1].name = "pooled"
    quantize_float_activations(model, TABLE_OPS)
    pool = next(n for n in model.graph.node if n.name == "pool")
    assert pool.input[0] == "act"
    assert len([n for n in model.graph.node if n.op_type == "Tanh"]) == 2  # the Resize's copy only


@pytest.mark.parametrize("activation", ["LeakyRelu", "Tanh"])
def test_an_activation_several_quantize_linears_read_gets_a_copy_for_each_but_the_first(activation):
    model = _model(activation)
    nodes = [n for n in model.graph.node if n.name not in ("pool", "resize", "pooled_Q", "pooled_DQ",
                                                                "resized_Q", "resized_DQ")]
    second, initializers = _qdq(nodes, "act", 0.02, 4, "second")
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    model.graph.initializer.extend(initializers)
    del model.graph.output[1:]
    model.graph.output.append(helper.make_tensor_value_info(second, TensorProto.FLOAT, [1, 2, 4, 4]))
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    quantize_float_activations(rewritten, TABLE_OPS)
    copies = [n for n in rewritten.graph.node if n.op_type == activation]
    assert len(copies) == 2
    for copy in copies:
        (reader,) = [n for n in rewritten.graph.node if copy.output[0] in n.input]
        assert reader.op_type == "QuantizeLinear"
    x = (np.random.default_rng(1).standard_normal((1, 2, 4, 4)) * 3).astype(np.float32)
    for ours, theirs in zip(_run(rewritten, x), _run(model, x)):
        assert np.array_equal(ours.view(np.uint32), theirs.view(np.uint32))
