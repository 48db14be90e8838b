"""QDQ models as converters write them (tf2onnx from an int8 TFLite model), made from the zoo's.

`converter_style` rewrites a `quantize_static` model the way tf2onnx's output
differs from it, one option per difference:

* ``int8_io``: the model takes and gives int8, or uint8 where it quantizes to
  uint8 (the input's QuantizeLinear and the output's DequantizeLinear are gone);
* ``nhwc_input``: the input is NHWC, followed by a Transpose to NCHW (on the
  int8 values, or on the float input when ``int8_io`` is off);
* ``nhwc_output``: a Transpose back to NHWC writes the output;
* ``symbolic_batch``: the batch dimension of input and output is ``unk__``;
* ``fused_relu``: a Relu between each Conv/Gemm and a QuantizeLinear whose zero
  point is -128 (exact, as TFLite's fused activations are);
* ``dead_channel_bias``: the first Conv's first channel gets a bias of -2^30,
  as trained models have on dead channels (its output saturates).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

import zoo


def converter_style(source, target, *, int8_io=True, nhwc_input=True, nhwc_output=False, symbolic_batch=True,
                    fused_relu=True, dead_channel_bias=True):
    model = onnx.load(str(source))
    graph = model.graph
    if fused_relu:
        _fuse_relus(graph)
    if dead_channel_bias:
        _dead_channel_bias(graph)
    if int8_io:
        _int8_input(graph)
        _int8_output(graph)
    if nhwc_input:
        _nhwc_input(graph)
    if nhwc_output:
        _nhwc_output(graph)
    if symbolic_batch:
        for value in (graph.input[0], graph.output[0]):
            value.type.tensor_type.shape.dim[0].dim_param = "unk__"
    del graph.value_info[:]
    onnx.checker.check_model(model)
    onnx.save(model, str(target))
    return target


def model_input(path, seed: int) -> np.ndarray:
    """A seeded input as the converted model takes it (int8, uint8 or float32, its own shape)."""
    value = onnx.load(str(path)).graph.input[0]
    shape = [d.dim_value or 1 for d in value.type.tensor_type.shape.dim]
    rng = np.random.default_rng(seed)
    if value.type.tensor_type.elem_type == onnx.TensorProto.INT8:
        return rng.integers(-128, 128, shape).astype(np.int8)
    if value.type.tensor_type.elem_type == onnx.TensorProto.UINT8:
        return rng.integers(0, 256, shape).astype(np.uint8)
    return (rng.standard_normal(shape) * zoo.INPUT_SCALE).astype(np.float32)


def _initializer(graph, name):
    return next((i for i in graph.initializer if i.name == name), None)


def _producer(graph, tensor):
    return next((n for n in graph.node if tensor in n.output), None)


def _consumers(graph, tensor):
    return [n for n in graph.node if tensor in n.input]


def _fuse_relus(graph):
    for node in list(graph.node):
        if node.op_type not in ("Conv", "Gemm", "MatMul"):
            continue
        readers = _consumers(graph, node.output[0])
        if len(readers) != 1 or readers[0].op_type != "QuantizeLinear":
            continue
        zero_point = _initializer(graph, readers[0].input[2])
        if zero_point is None or int(numpy_helper.to_array(zero_point)) != -128:
            continue
        activated = node.output[0] + "_relu"
        readers[0].input[0] = activated
        position = list(graph.node).index(node) + 1
        graph.node.insert(position, helper.make_node("Relu", [node.output[0]], [activated],
                                                     name=node.name + "_relu"))


def _dead_channel_bias(graph):
    conv = next(n for n in graph.node if n.op_type in ("Conv", "Gemm") and len(n.input) > 2)
    dequantize = _producer(graph, conv.input[2])
    bias = _initializer(graph, dequantize.input[0])
    values = numpy_helper.to_array(bias).copy()
    values[0] = -(2 ** 30)
    bias.CopyFrom(numpy_helper.from_array(values, bias.name))


def _int8_input(graph):
    x = graph.input[0]
    quantize = _consumers(graph, x.name)[0]
    assert quantize.op_type == "QuantizeLinear"
    graph.node.remove(quantize)
    x.name = quantize.output[0]
    x.type.tensor_type.elem_type = _initializer(graph, quantize.input[2]).data_type


def _int8_output(graph):
    y = graph.output[0]
    dequantize = _producer(graph, y.name)
    if dequantize is None or dequantize.op_type != "DequantizeLinear":
        return  # a float tail (Softmax) stays
    graph.node.remove(dequantize)
    y.name = dequantize.input[0]
    y.type.tensor_type.elem_type = _initializer(graph, dequantize.input[2]).data_type


def _nhwc_input(graph):
    x = graph.input[0]
    dims = x.type.tensor_type.shape.dim
    if len(dims) != 4:
        return
    n, c, h, w = (d.dim_value for d in dims)
    nchw = x.name + "_nchw"
    for node in _consumers(graph, x.name):
        node.input[list(node.input).index(x.name)] = nchw
    graph.node.insert(0, helper.make_node("Transpose", [x.name], [nchw], name="input_to_nchw", perm=[0, 3, 1, 2]))
    for dim, value in zip(dims, (n, h, w, c)):
        dim.dim_value = value


def _nhwc_output(graph):
    y = graph.output[0]
    dims = y.type.tensor_type.shape.dim
    n, c, h, w = (d.dim_value for d in dims)
    nchw = y.name + "_nchw"
    _producer(graph, y.name).output[0] = nchw
    for node in _consumers(graph, y.name):
        node.input[list(node.input).index(y.name)] = nchw
    graph.node.append(helper.make_node("Transpose", [nchw], [y.name], name="output_to_nhwc", perm=[0, 2, 3, 1]))
    for dim, value in zip(dims, (n, h, w, c)):
        dim.dim_value = value
