"""Sanity tests for the model zoo (tests/zoo.py) and examples/tiny_cnn.onnx."""

from __future__ import annotations

import logging
import pathlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import zoo
from ming_py.ort_session import onnxruntime_session

# onnxruntime's quantizer logs a "consider pre-processing" warning per call.
logging.getLogger().setLevel(logging.ERROR)

NAMES = sorted(zoo.MODELS)
QDQ = {"QuantizeLinear", "DequantizeLinear"}
EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def _session(model) -> ort.InferenceSession:
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return onnxruntime_session(data)


def _assert_qdq_around_compute_nodes(model: onnx.ModelProto) -> None:
    """Every non-Q/DQ node reads float tensors only through DequantizeLinear and
    writes only into QuantizeLinear (constant attribute-like inputs excepted)."""
    g = model.graph
    producer = {o: n for n in g.node for o in n.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    inits = {t.name: t for t in g.initializer}
    graph_outputs = {o.name for o in g.output}
    compute = [n for n in g.node if n.op_type not in QDQ]
    assert compute, "no compute nodes"
    for n in compute:
        for idx, name in enumerate(n.input):
            if not name:
                continue
            if n.op_type == "Clip" and idx > 0:          # min/max scalars stay float
                assert name in inits, (n.name, name)
                continue
            if name in inits and inits[name].data_type == onnx.TensorProto.INT64:  # Reshape shape
                continue
            p = producer.get(name)
            assert p is not None and p.op_type == "DequantizeLinear", \
                f"{n.op_type} {n.name!r} input {idx} ({name}) is not fed by DequantizeLinear"
        for name in n.output:
            assert name not in graph_outputs, f"{n.name!r} writes a float graph output"
            cs = consumers.get(name, [])
            assert cs and all(c.op_type == "QuantizeLinear" for c in cs), \
                f"{n.op_type} {n.name!r} output {name} is not (only) consumed by QuantizeLinear"
    # The graph input is quantized, the graph output dequantized.
    assert all(c.op_type == "QuantizeLinear" for c in consumers["x"])
    assert producer["y"].op_type == "DequantizeLinear"
    # Weights are stored as int8 (bias as int32), never as float initializers feeding compute.
    for n in g.node:
        if n.op_type == "DequantizeLinear" and n.input[0] in inits:
            assert inits[n.input[0]].data_type in (onnx.TensorProto.INT8, onnx.TensorProto.INT32)


# ---------------------------------------------------------------------------
# Float models
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_registry_covers_requirements():
    assert len(NAMES) >= 30
    for required in ("residual_block", "dw_separable", "lenet", "two_residual_stages", "tiny_cnn"):
        assert required in zoo.MODELS
    convs = [n for m in zoo.MODELS.values() for n in m.build().graph.node if n.op_type == "Conv"]
    defaults = {"strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0], "group": 1}
    attrs = [{**defaults, **{a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}} for n in convs]
    kernels = {tuple(a["kernel_shape"]) for a in attrs}
    assert {(1, 1), (3, 3), (5, 5), (7, 7), (10, 4)} <= kernels
    assert {1, 2} <= {a["strides"][0] for a in attrs}
    assert {1, 2} <= {a["dilations"][0] for a in attrs}
    assert any(len(set(a["pads"])) > 1 for a in attrs)                  # asymmetric pads
    assert {1, 2} <= {a["group"] for a in attrs}                          # plain + grouped
    assert any(a["group"] > 2 for a in attrs)                             # depthwise
    ops = {n.op_type for m in zoo.MODELS.values() for n in m.build().graph.node}
    assert {"Conv", "Relu", "Clip", "MaxPool", "AveragePool", "GlobalAveragePool", "Add", "Concat",
            "Flatten", "Reshape", "Gemm", "MatMul", "Softmax"} <= ops


@pytest.mark.unit
@pytest.mark.parametrize("name", NAMES)
def test_float_model(name):
    zm = zoo.MODELS[name]
    m = zm.build()
    assert m.SerializeToString() == zm.build().SerializeToString()       # deterministic
    assert m.ir_version == 8 and [(o.domain, o.version) for o in m.opset_import] == [("", 17)]
    onnx.checker.check_model(m, full_check=True)
    assert [i.name for i in m.graph.input] == ["x"] and [o.name for o in m.graph.output] == ["y"]
    in_dims = tuple(d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim)
    assert in_dims == zm.input_shape and zm.input_shape[0] == 1
    assert len(zm.input_shape) in (2, 4)
    if len(zm.input_shape) == 4:
        assert max(zm.input_shape[2:]) <= 16 and zm.input_shape[1] <= 16
    names = [n.name for n in m.graph.node]
    assert all(names) and len(set(names)) == len(names), names
    x = zoo.random_input(name, 0)
    assert x.dtype == np.float32 and x.shape == zm.input_shape
    assert np.array_equal(x, zoo.random_input(zm, 0)) and not np.array_equal(x, zoo.random_input(name, 1))
    y = _session(m).run(None, {"x": x})[0]
    assert y.shape == zoo.output_shape(name) and np.isfinite(y).all()
    # He-like init keeps activations in a sane range.
    assert 1e-2 < np.abs(y).max() < 100


# ---------------------------------------------------------------------------
# Quantized models
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("per_channel", [False, True], ids=["pt", "pc"])
@pytest.mark.parametrize("name", NAMES)
def test_quantized_model(name, per_channel, tmp_path):
    zm = zoo.MODELS[name]
    path = zoo.quantized_model(name, tmp_path / "a", per_channel=per_channel)
    assert path == tmp_path / "a" / f"{name}{'_pc' if per_channel else ''}.onnx"
    again = zoo.quantized_model(name, tmp_path / "b", per_channel=per_channel)
    assert path.read_bytes() == again.read_bytes(), "quantization is not deterministic"

    q = onnx.load(path)
    onnx.checker.check_model(q, full_check=True)
    _assert_qdq_around_compute_nodes(q)

    # Node names of compute nodes survive quantization.
    float_names = {n.name for n in zm.build().graph.node}
    assert {n.name for n in q.graph.node if n.op_type not in QDQ} <= float_names

    if per_channel:  # conv/gemm weights get a per-output-channel scale vector
        inits = {t.name: t for t in q.graph.initializer}
        dq_w = [n for n in q.graph.node if n.op_type == "DequantizeLinear"
                and n.input[0] in inits and inits[n.input[0]].data_type == onnx.TensorProto.INT8]
        assert any(len(inits[n.input[1]].dims) == 1 and inits[n.input[1]].dims[0] > 1 for n in dq_w)

    sess = _session(path)
    x = zoo.random_input(name, 0)
    y = sess.run(None, {"x": x})[0]
    assert y.dtype == np.float32 and y.shape == zoo.output_shape(name)
    assert np.isfinite(y).all()

    # On calibration data (no saturation) the int8 model tracks the float one.
    fsess = _session(zm.build())
    for feed in zoo.calibration_data(name)[:2]:
        yq, yf = sess.run(None, feed)[0], fsess.run(None, feed)[0]
        assert np.abs(yq - yf).max() <= 0.1 * np.abs(yf).max() + 1e-6


# ---------------------------------------------------------------------------
# The README example
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_example_files():
    model_path, input_path = EXAMPLES / "tiny_cnn.onnx", EXAMPLES / "input.npy"
    q = onnx.load(model_path)
    onnx.checker.check_model(q, full_check=True)
    _assert_qdq_around_compute_nodes(q)
    x = np.load(input_path)
    assert x.dtype == np.float32 and x.shape == zoo.MODELS["tiny_cnn"].input_shape
    y = _session(model_path).run(None, {"x": x})[0]
    assert y.shape == (1, 10) and np.isfinite(y).all()
    assert abs(float(y.sum()) - 1.0) < 0.05                              # softmax output


@pytest.mark.unit
def test_example_matches_zoo(tmp_path):
    """examples/tiny_cnn.onnx is the zoo's per-channel tiny_cnn (same graph, same weights, 8-bit)."""
    committed = onnx.load(EXAMPLES / "tiny_cnn.onnx")
    tiny = zoo.MODELS["tiny_cnn"]
    fresh = onnx.load(zoo.quantize_float_model(tiny.build(), tmp_path / "tiny.onnx", tiny.input_shape,
                                               per_channel=True, options={}))
    assert [(n.op_type, n.name) for n in committed.graph.node] == [(n.op_type, n.name) for n in fresh.graph.node]
    a = {t.name: onnx.numpy_helper.to_array(t) for t in committed.graph.initializer}
    b = {t.name: onnx.numpy_helper.to_array(t) for t in fresh.graph.initializer}
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
