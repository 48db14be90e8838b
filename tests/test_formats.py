"""uint8 activations and the QOperator format (frontends/onnx_formats.py): ming rewrites them into int8 QDQ
and must equal onnxruntime run on the original file bit for bit; the C-simulation must equal ming."""

from __future__ import annotations

import logging

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

import converted_onnx
import zoo
from emit_helpers import csim
from ming_py import reference
from ming_py.boards import load_board
from ming_py.build import design
from ming_py.cli import main
from ming_py.frontends import onnx_formats
from ming_py.errors import MingError
from ming_py.output import write_tree
from ming_py.pipeline import lift
from ming_py.contract import ming_host
from ming_py.runtime.ming_driver import Accelerator
from ming_py.ort_session import onnxruntime_session

logging.getLogger().setLevel(logging.ERROR)  # onnxruntime's quantizer warns on every call

FORMATS = {  # (quant_format, activation_type, weight_type)
    "qdq_u8_s8": ("QDQ", "QUInt8", "QInt8"),
    "qdq_u8_u8": ("QDQ", "QUInt8", "QUInt8"),  # per-channel uint8 weights are symmetric: zero point 128
    "qop_s8_s8": ("QOperator", "QInt8", "QInt8"),
    "qop_u8_s8": ("QOperator", "QUInt8", "QInt8"),
    "qop_u8_u8": ("QOperator", "QUInt8", "QUInt8"),  # QLinearConv's per-channel weights are int8 even so
}
CASES = [  # every model in two formats or more, every format on several ops
    ("conv_relu", "qdq_u8_s8"), ("add_conv_branches", "qdq_u8_s8"), ("conv_flatten_gemm", "qdq_u8_s8"),
    ("tiny_cnn", "qdq_u8_s8"),
    ("dw_separable", "qdq_u8_u8"), ("concat_branches", "qdq_u8_u8"), ("conv_gap", "qdq_u8_u8"),
    ("conv_flatten_matmul", "qdq_u8_u8"),
    ("tiny_cnn", "qop_s8_s8"), ("add_conv_branches", "qop_s8_s8"), ("conv_avgpool2", "qop_s8_s8"),
    ("conv_flatten_matmul", "qop_s8_s8"), ("concat_branches", "qop_s8_s8"),
    ("tiny_cnn", "qop_u8_s8"), ("conv_gap", "qop_u8_s8"), ("concat_branches", "qop_u8_s8"),
    ("conv_flatten_gemm", "qop_u8_s8"), ("dw_separable", "qop_u8_s8"), ("conv_avgpool2", "qop_u8_s8"),
    ("conv_relu", "qop_u8_u8"), ("add_conv_branches", "qop_u8_u8"),
]
SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def formats(tmp_path_factory):
    """formats(name, format) -> (path, lifted graph) of the per-channel model quantized in that format."""
    directory = tmp_path_factory.mktemp("formats")
    cache = {}

    def build(name: str, form: str):
        if (name, form) not in cache:
            path = zoo.quantized_model(name, directory, True, *FORMATS[form])
            cache[name, form] = path, lift(path)
        return cache[name, form]

    return build


def _session(model) -> ort.InferenceSession:
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return onnxruntime_session(data)


def _onnxruntime(model, x: np.ndarray) -> np.ndarray:
    session = _session(model)
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def _assert_equals_onnxruntime(graph, model, x: np.ndarray) -> None:
    ours = reference.run(graph, x)[graph.outputs[0].name]
    expected = _onnxruntime(model, x)
    assert ours.dtype == expected.dtype and ours.shape == expected.shape
    assert np.array_equal(ours, expected), f"{np.count_nonzero(ours != expected)} of {ours.size} differ"


@pytest.mark.parametrize("name,form", CASES)
def test_reference_equals_onnxruntime_on_the_original_file(formats, name, form):
    path, graph = formats(name, form)
    for seed in SEEDS:
        _assert_equals_onnxruntime(graph, path, zoo.random_input(name, seed))


@pytest.mark.parametrize("name,form", [("tiny_cnn", "qop_u8_s8"), ("add_conv_branches", "qdq_u8_u8"),
                                       ("conv_gap", "qop_s8_s8")])
def test_csim_equals_reference(formats, tmp_path, name, form):
    _, graph = formats(name, form)
    x = zoo.random_input(name, 3)
    assert np.array_equal(csim(graph, tmp_path / "out", x), reference.run(graph, x)[graph.outputs[0].name])


# ---- the QOperator rewrite against onnxruntime itself ------------------------------------------------


def _conv_then(op: str):
    """A float model: a 3x3 conv followed by `op` (Sigmoid, LeakyRelu, or Mul with a second conv)."""
    def build() -> onnx.ModelProto:
        g = zoo._Graph(f"conv_{op.lower()}", (1, 4, 8, 8))
        h = g.conv("x", "conv", 6, pads=1)
        if op == "Mul":
            return g.finish(g._node("Mul", "mul", [h, g.conv("x", "conv_b", 6, pads=1)], g.shapes[h]))
        attributes = {"alpha": 0.2} if op == "LeakyRelu" else {}
        return g.finish(g._node(op, op.lower(), [h], g.shapes[h], **attributes))

    return build


REWRITTEN = {  # model -> the QOperator ops quantize_static writes for it
    "tiny_cnn": {"QLinearConv", "QGemm", "QLinearSoftmax"},
    "conv_flatten_matmul": {"QLinearConv", "QLinearMatMul"},
    "add_conv_branches": {"QLinearConv", "QLinearAdd"},
    "concat_branches": {"QLinearConv", "QLinearConcat"},
    "conv_avgpool3_p1": {"QLinearConv", "QLinearAveragePool"},
    "conv_gap": {"QLinearConv", "QLinearGlobalAveragePool"},
    "conv_sigmoid": {"QLinearConv", "QLinearSigmoid"},
    "conv_leakyrelu": {"QLinearConv", "QLinearLeakyRelu"},
    "conv_mul": {"QLinearConv", "QLinearMul"},
}
def _resize_and_pad() -> onnx.ModelProto:
    """conv, nearest Resize x2, Pad with a non-zero value, conv: data movement on quantized values, which
    QOperator models do on the int8/uint8 tensors themselves."""
    g = zoo._Graph("resize_pad", (1, 4, 6, 6))
    h = g.resize(g.conv("x", "conv", 6, pads=1), "upsample")
    return g.finish(g.conv(g.pad(h, "pad", value=0.5), "conv2", 4))


FLOAT_MODELS = {"conv_sigmoid": _conv_then("Sigmoid"), "conv_leakyrelu": _conv_then("LeakyRelu"),
                "conv_mul": _conv_then("Mul"), "resize_pad": _resize_and_pad}


def _qoperator(name: str, directory, activation_type: str) -> onnx.ModelProto:
    float_model = FLOAT_MODELS[name]() if name in FLOAT_MODELS else zoo.MODELS[name].build()
    shape = tuple(d.dim_value for d in float_model.graph.input[0].type.tensor_type.shape.dim)
    path = zoo.quantize_float_model(float_model, directory / f"{name}_{activation_type}.onnx", shape, True,
                                    quant_format="QOperator", activation_type=activation_type)
    return onnx.load(str(path))


@pytest.mark.unit
@pytest.mark.parametrize("activation_type", ["QUInt8", "QInt8"])
@pytest.mark.parametrize("name", sorted(REWRITTEN))
def test_qdq_rewrite_equals_the_qoperator_model_in_onnxruntime(tmp_path, name, activation_type):
    """onnxruntime fuses the rewrite's DequantizeLinear -> op -> QuantizeLinear back into the same kernels. (Its
    int8 QDQ Add runs in the uint8 domain, its int8 QLinearAdd in the int8 one, where float ties may fall
    apart: docs/numerics.md, section 4; ming equals the QLinearAdd file, test above.)"""
    model = _qoperator(name, tmp_path, activation_type)
    ops = {n.op_type for n in model.graph.node}
    assert REWRITTEN[name] <= ops
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    onnx_formats.qoperator_to_qdq(rewritten)
    onnx.checker.check_model(rewritten)
    assert not {n.op_type for n in rewritten.graph.node} & set(onnx_formats.FLOAT_OPS)
    if activation_type == "QInt8" and "QLinearAdd" in ops:
        return
    shape = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
    for seed in SEEDS:
        x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
        assert np.array_equal(_onnxruntime(rewritten, x), _onnxruntime(model, x))


@pytest.mark.parametrize("op", ["Sigmoid", "LeakyRelu"])
def test_qlinear_activations_become_tables_equal_to_onnxruntime(tmp_path, op):
    """QLinearSigmoid / QLinearLeakyRelu become DequantizeLinear -> op -> QuantizeLinear, which ming compiles as
    a table onnxruntime computes: the QOperator file's outputs, bit for bit."""
    model = _qoperator(f"conv_{op.lower()}", tmp_path, "QUInt8")
    path = _save(model, tmp_path / "qoperator.onnx")
    onnx_formats.qoperator_to_qdq(model)
    by_output = {o: n for n in model.graph.node for o in n.output}
    node = next(n for n in model.graph.node if n.op_type == op)
    assert by_output[node.input[0]].op_type == "DequantizeLinear"
    assert [n.op_type for n in model.graph.node if node.output[0] in n.input] == ["QuantizeLinear"]
    graph = lift(path)
    assert any(k.op == "table" for k in graph.kernels())
    for seed in SEEDS:
        _assert_equals_onnxruntime(graph, path, np.random.default_rng(seed).standard_normal(
            [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]).astype(np.float32))


@pytest.mark.parametrize("activation_type", ["QUInt8", "QInt8"])
def test_qoperator_resize_and_pad_on_quantized_values(tmp_path, activation_type):
    """A QOperator model resizes and pads its quantized tensors directly (the pad value quantized too): ming reads
    both through the tensor's quantization and equals the QOperator file."""
    model = _qoperator("resize_pad", tmp_path, activation_type)
    assert {"Resize", "Pad"} <= {n.op_type for n in model.graph.node}
    path = _save(model, tmp_path / "qoperator.onnx")
    graph = lift(path)
    for seed in SEEDS:
        _assert_equals_onnxruntime(graph, path, np.random.default_rng(seed).standard_normal((1, 4, 6, 6))
                                   .astype(np.float32))


def test_an_older_opset_is_raised_to_13_for_per_channel_dequantization(tmp_path):
    path = zoo.quantized_model("conv_flatten_gemm", tmp_path, True, *FORMATS["qop_u8_s8"])
    model = onnx.load(str(path))
    next(o for o in model.opset_import if o.domain == "").version = 11
    graph = lift(_save(model, tmp_path / "opset11.onnx"))
    for seed in SEEDS:
        _assert_equals_onnxruntime(graph, tmp_path / "opset11.onnx", zoo.random_input("conv_flatten_gemm", seed))


# ---- mixed types, weight zero points, integer model inputs and outputs -------------------------------


def test_mixed_int8_and_uint8_tensors(tmp_path):
    """Every other activation quantized to uint8 in an int8 QDQ model (zero point + 128: the same values)."""
    model = onnx.load(str(zoo.quantized_model("tiny_cnn", tmp_path, True)))
    initializers = {t.name: t for t in model.graph.initializer}
    quantizers = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    for node in quantizers[::2]:
        zero_point = initializers[node.input[2]]
        shifted = numpy_helper.to_array(zero_point).astype(np.int16) + 128
        zero_point.CopyFrom(numpy_helper.from_array(shifted.astype(np.uint8), zero_point.name))
    onnx.save(model, str(tmp_path / "mixed.onnx"))
    types = {t.data_type for t in initializers.values() if t.name.endswith("zero_point")}
    assert {onnx.TensorProto.INT8, onnx.TensorProto.UINT8} <= types
    graph = lift(tmp_path / "mixed.onnx")
    for seed in SEEDS:
        _assert_equals_onnxruntime(graph, tmp_path / "mixed.onnx", zoo.random_input("tiny_cnn", seed))


def test_weights_with_a_zero_point_are_centered_where_they_fit_int8(tmp_path):
    """uint8 weights moved by +-10 with their zero points: the same weights for onnxruntime; ming multiplies
    w - zero point (int8) with zero point 0."""
    path = zoo.quantized_model("conv_flatten_gemm", tmp_path, True, *FORMATS["qdq_u8_u8"])
    model = onnx.load(str(path))
    initializers = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    weights = "conv3x3_s2.weight_quantized"
    w, z = initializers[weights].astype(np.int16), initializers["conv3x3_s2.weight_zero_point"].astype(np.int16)
    per_channel = w.reshape(len(w), -1)
    move = np.where(per_channel.max(axis=1) <= 245, 10, np.where(per_channel.min(axis=1) >= 10, -10, 0))
    assert move.any()
    for name, values in ((weights, w + move.reshape(-1, 1, 1, 1)), ("conv3x3_s2.weight_zero_point", z + move)):
        tensor = next(t for t in model.graph.initializer if t.name == name)
        tensor.CopyFrom(numpy_helper.from_array(values.astype(np.uint8), name))
    onnx.save(model, str(tmp_path / "moved.onnx"))
    graph = lift(tmp_path / "moved.onnx")
    conv = next(k for k in graph.kernels() if k.source == "conv3x3_s2")
    centered = graph.constants[conv.inputs[1].tensor].astype(np.int16).reshape(w.shape)
    assert np.array_equal(centered, w - z[:, None, None, None])
    for seed in SEEDS:
        _assert_equals_onnxruntime(graph, tmp_path / "moved.onnx", zoo.random_input("conv_flatten_gemm", seed))


@pytest.fixture(scope="module")
def uint8_io(tmp_path_factory):
    """tiny_cnn as QOperator uint8 with uint8 input (NHWC, then a Transpose) and uint8 output (the Softmax's
    quantized values), as converters keep quantized inputs and outputs."""
    directory = tmp_path_factory.mktemp("uint8_io")
    source = zoo.quantized_model("tiny_cnn", directory, True, *FORMATS["qop_u8_s8"])
    path = converted_onnx.converter_style(source, directory / "tiny_cnn_uint8_io.onnx", symbolic_batch=False,
                                          fused_relu=False, dead_channel_bias=False)
    return path, lift(path)


def test_uint8_model_input_and_output(uint8_io):
    path, graph = uint8_io
    model = onnx.load(str(path))
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.UINT8
    assert model.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.UINT8
    assert (graph.inputs[0].dtype, graph.outputs[0].dtype) == ("uint8", "uint8")
    for seed in SEEDS:
        x = converted_onnx.model_input(path, seed)
        assert x.dtype == np.uint8
        _assert_equals_onnxruntime(graph, path, x)


@pytest.mark.unit
def test_uint8_input_is_shifted_on_the_host_and_checked():
    assert np.array_equal(ming_host.model_input_values(np.array([0, 128, 255], np.uint8), 1.0, 0, "uint8"),
                          [-128, 0, 127])
    assert np.array_equal(ming_host.host_tail(np.array([-128, 0, 127]), 1.0, 0, (), "uint8"),
                          np.array([0, 128, 255], np.uint8))
    for wrong in (np.array([-1, 3], np.int8), np.array([256], np.int32)):
        with pytest.raises(ValueError, match="the model takes uint8 values"):
            ming_host.model_input_values(wrong, 1.0, 0, "uint8")
    # float images are quantized with the input's scale and zero point (0 here: 128 in uint8), as TFLite does
    assert ming_host.model_input_values(np.array([0.5, -0.5, 1.5, 300.0], np.float32), 1.0, 0, "uint8").tolist() == \
        [1, -1, 2, 127]


def test_uint8_io_through_the_cli_and_the_deploy_driver(uint8_io, tmp_path):
    path, graph = uint8_io
    x = converted_onnx.model_input(path, 7)
    expected = _onnxruntime(path, x)
    np.save(tmp_path / "x.npy", x)
    assert main(["reference", str(path), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")]) == 0
    y = np.load(tmp_path / "y.npy")
    assert y.dtype == np.uint8 and np.array_equal(y, expected)
    out = tmp_path / "out"
    write_tree(design(graph, load_board("kv260")).files, out)
    images = np.stack([converted_onnx.model_input(path, seed)[0] for seed in (7, 8, 9)])
    (y,) = Accelerator(out / "deploy", "csim").run(images).values()
    assert y.dtype == np.uint8
    assert np.array_equal(y, np.concatenate([_onnxruntime(path, image[None]) for image in images]))


# ---- what is still refused, by name ------------------------------------------------------------------


def _save(model: onnx.ModelProto, path) -> str:
    onnx.save(model, str(path))
    return str(path)


@pytest.mark.unit
def test_asymmetric_uint8_weights_beyond_int8_are_refused(tmp_path):
    """Per-tensor uint8 weights are asymmetric; the quantizer's range depends on its version (onnxruntime 1.32
    keeps them within 0..127), so the test sets the full 0..255 span the format allows."""
    path = zoo.quantized_model("conv_relu", tmp_path, False, *FORMATS["qdq_u8_u8"])
    model = onnx.load(str(path))
    weights = next(i for i in model.graph.initializer if i.name == "conv3x3.weight_quantized")
    values = numpy_helper.to_array(weights).copy()
    values.flat[:2] = 0, 255
    weights.CopyFrom(numpy_helper.from_array(values, weights.name))
    with pytest.raises(MingError, match=r"node 'conv3x3' \(Conv\): its weights 'conv3x3.weight_quantized' minus "
                                        r"their zero point span \[-?\d+, \d+\], beyond int8"):
        lift(_save(model, tmp_path / "full_span.onnx"))


@pytest.mark.unit
def test_qgemm_alpha_and_channels_last_pooling_are_refused(tmp_path):
    model = _qoperator("tiny_cnn", tmp_path, "QUInt8")
    gemm = next(n for n in model.graph.node if n.op_type == "QGemm")
    gemm.attribute.append(helper.make_attribute("alpha", 0.5))
    with pytest.raises(MingError, match=rf"node '{gemm.name}' \(com.microsoft.QGemm\) has alpha=0.5"):
        lift(_save(model, tmp_path / "alpha.onnx"))
    model = _qoperator("conv_gap", tmp_path, "QUInt8")
    pool = next(n for n in model.graph.node if n.op_type == "QLinearGlobalAveragePool")
    next(a for a in pool.attribute if a.name == "channels_last").i = 1
    with pytest.raises(MingError, match=rf"node '{pool.name}' \(com.microsoft.QLinearGlobalAveragePool\) has "
                                        "channels_last=1"):
        lift(_save(model, tmp_path / "channels_last.onnx"))


@pytest.mark.unit
def test_other_quantized_operators_are_refused_by_name(tmp_path):
    model = _qoperator("conv_gap", tmp_path, "QUInt8")
    pool = next(n for n in model.graph.node if n.op_type == "QLinearGlobalAveragePool")
    pool.op_type = "QLinearReduceMean"
    with pytest.raises(MingError, match=rf"node '{pool.name}' \(com.microsoft.QLinearReduceMean\) is not supported; "
                                        "ming takes these quantized operators: QGemm, QLinearAdd"):
        lift(_save(model, tmp_path / "reduce_mean.onnx"))


@pytest.mark.unit
def test_integer_arithmetic_on_quantized_tensors_is_refused(tmp_path):
    model = _qoperator("conv_relu", tmp_path, "QUInt8")
    conv = next(n for n in model.graph.node if n.op_type == "QLinearConv")
    relu = helper.make_node("Relu", [conv.input[0]], ["x_relu"], name="integer_relu")
    conv.input[0] = "x_relu"
    model.graph.node.insert(list(model.graph.node).index(conv), relu)
    with pytest.raises(MingError, match=r"node 'integer_relu' \(Relu\) reads the quantized tensor 'x_quantized'"):
        lift(_save(model, tmp_path / "relu.onnx"))


@pytest.mark.unit
def test_dynamic_quantization_is_refused(tmp_path):
    from onnxruntime.quantization import quantize_dynamic

    float_path = _save(zoo.MODELS["conv_relu"].build(), tmp_path / "float.onnx")
    quantize_dynamic(float_path, str(tmp_path / "dynamic.onnx"))
    with pytest.raises(MingError, match=r"node '.*' \((DynamicQuantizeLinear|ConvInteger)\) computes with "
                                        "dynamically quantized integers"):
        lift(tmp_path / "dynamic.onnx")
