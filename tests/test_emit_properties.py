"""Property test: single conv/pool layers of random geometry C-simulate exactly like `ming reference`."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import zoo
from emit_helpers import csim, random_schedule, stream_graph_of
from ming_py import parity, reference
from ming_py.pipeline import lift


@st.composite
def layers(draw):
    op = draw(st.sampled_from(["conv", "depthwise", "maxpool", "avgpool"]))
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    if op != "conv" and kh * kw == 1:  # a 1x1 depthwise conv or pool is element-wise: IREE lowers it so
        kw = 2
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) if op in ("conv", "depthwise") else (1, 1)
    pad_limit = (kh - 1, kw - 1) if op in ("maxpool", "avgpool") else (2, 2)
    pads = [draw(st.integers(0, pad_limit[0])), draw(st.integers(0, pad_limit[1])),
            draw(st.integers(0, pad_limit[0])), draw(st.integers(0, pad_limit[1]))]
    channels = draw(st.integers(2, 6))
    out_channels = channels if op != "conv" else draw(st.integers(2, 6))
    span_h, span_w = dilation[0] * (kh - 1) + 1, dilation[1] * (kw - 1) + 1
    # output maps of at least 2 x 2 (IREE folds unit dims; ming rejects those maps with a clear error)
    height = draw(st.integers(max(span_h + stride[0] - pads[0] - pads[2], 2), 12))
    width = draw(st.integers(max(span_w + stride[1] - pads[1] - pads[3], 2), 12))
    count_include_pad = draw(st.integers(0, 1))
    per_channel = draw(st.booleans())
    return dict(op=op, kernel=(kh, kw), stride=stride, dilation=dilation, pads=pads, channels=channels,
                out_channels=out_channels, height=height, width=width, count_include_pad=count_include_pad,
                per_channel=per_channel)


def layer_model(spec):
    rng = np.random.default_rng(0)
    c, oc = spec["channels"], spec["out_channels"]
    kh, kw = spec["kernel"]
    inits, nodes = [], []
    x = "x"
    if spec["op"] in ("maxpool", "avgpool"):  # pools read a quantized activation, as in a real network
        inits.append(numpy_helper.from_array((rng.standard_normal((c, c, 1, 1)) * 0.5).astype(np.float32), "w0"))
        nodes.append(helper.make_node("Conv", ["x", "w0"], ["a"], name="pre"))
        x = "a"
    attrs = dict(kernel_shape=[kh, kw], strides=list(spec["stride"]), pads=spec["pads"])
    if spec["op"] in ("conv", "depthwise"):
        group = c if spec["op"] == "depthwise" else 1
        shape = (oc, c // group, kh, kw)
        inits += [numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32), "w"),
                  numpy_helper.from_array((rng.standard_normal(oc) * 0.1).astype(np.float32), "b")]
        nodes.append(helper.make_node("Conv", [x, "w", "b"], ["y"], name="layer", group=group,
                                      dilations=list(spec["dilation"]), **attrs))
    elif spec["op"] == "maxpool":
        nodes.append(helper.make_node("MaxPool", [x], ["y"], name="layer", **attrs))
    else:
        nodes.append(helper.make_node("AveragePool", [x], ["y"], name="layer",
                                      count_include_pad=spec["count_include_pad"], **attrs))
    graph = helper.make_graph(nodes, "layer", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, c, spec["height"], spec["width"]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    import onnx

    return onnx.shape_inference.infer_shapes(model)


@settings(max_examples=14, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          derandomize=True)
@given(spec=layers())
def test_single_layer_csim_equals_reference(tmp_path_factory, spec):
    tmp = tmp_path_factory.mktemp("layer")
    shape = (1, spec["channels"], spec["height"], spec["width"])
    path = zoo.quantize_float_model(layer_model(spec), tmp / "layer.onnx", shape, spec["per_channel"])
    graph = lift(path)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    expected = reference.run(graph, x)[graph.outputs[0].name]
    if spec["op"] in ("conv", "depthwise", "maxpool"):
        result = parity.compare(graph, path, x)
        assert result.exact == result.total, spec
    assert np.array_equal(csim(graph, tmp / "default", x), expected), spec
    schedule = random_schedule(stream_graph_of(graph), random.Random(3))
    assert np.array_equal(csim(graph, tmp / "scheduled", x, schedule), expected), (spec, schedule)
