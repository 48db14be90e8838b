"""ONNX models as converters write them (tf2onnx from int8 TFLite, PyTorch's exporters from its quantization
flows): symbolic batch, NHWC input and output Transposes, int8 input and output, Relu fused before
QuantizeLinear, huge biases on dead channels, Constant nodes and identity Casts around the QDQ pairs.
ming folds what is exact and must equal onnxruntime bit for bit, and refuses the rest by name."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest

import converted_onnx
import zoo
from emit_helpers import csim
from ming_py import parity
from ming_py.errors import MingError
from ming_py.pipeline import lift
from ming_py.ort_session import inexact

MODELS = ["tiny_cnn", "residual_block", "conv_maxpool2", "mlp", "lenet"]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    directory = tmp_path_factory.mktemp("converted")
    cache = {}

    def build(name, per_channel=True, **options):
        key = (name, per_channel, tuple(sorted(options.items())))
        if key not in cache:
            source = zoo.quantized_model(name, directory, per_channel=per_channel)
            target = directory / f"{name}_{len(cache)}_converted.onnx"
            cache[key] = converted_onnx.converter_style(source, target, **options)
        return cache[key]

    return build


@pytest.mark.parametrize("name", MODELS)
def test_converted_model_equals_onnxruntime(converted, name):
    model = converted(name)
    graph = lift(model)
    for seed in range(3):
        x = converted_onnx.model_input(model, seed)
        result = parity.compare(graph, model, x)
        assert result.exact == result.total, f"{result.total - result.exact} of {result.total} differ"


def test_int8_input_and_output_are_taken_and_given_as_they_are(converted):
    model = converted("tiny_cnn", nhwc_output=False)
    graph = lift(model)
    assert (graph.inputs[0].dtype, graph.outputs[0].dtype) == ("int8", "int8")
    x = converted_onnx.model_input(model, 0)
    assert x.dtype == np.int8
    y = list(__import__("ming_py.reference", fromlist=["run"]).run(graph, x).values())[0]
    assert y.dtype == np.int8


def test_symbolic_batch_is_compiled_as_one_with_a_note(converted):
    graph = lift(converted("tiny_cnn"))
    assert graph.inputs[0].onnx_shape[0] == 1
    assert any("symbolic batch dimension 'unk__'" in note for note in graph.notes)


def test_input_transpose_is_a_host_permutation_not_hardware(converted):
    graph = lift(converted("tiny_cnn"))
    assert graph.inputs[0].permutation == (0, 3, 1, 2)
    assert graph.inputs[0].onnx_shape[-1] == 3  # the model's own NHWC shape
    assert all(k.op != "elementwise" for k in graph.kernels())


@pytest.mark.parametrize("int8_io", [True, False], ids=["int8", "float"])
def test_output_transpose_is_folded(converted, int8_io):
    model = converted("conv3x3_same", int8_io=int8_io, nhwc_output=True)
    graph = lift(model)
    assert graph.outputs[0].permutation == (0, 3, 1, 2)
    for seed in range(2):
        result = parity.compare(graph, model, converted_onnx.model_input(model, seed))
        assert result.exact == result.total


@pytest.mark.parametrize("name", ["tiny_cnn", "residual_block"])
def test_csim_of_a_converted_model_equals_onnxruntime(converted, tmp_path, name):
    model = converted(name, nhwc_output=name == "residual_block")
    graph = lift(model)
    x = converted_onnx.model_input(model, 5)
    expected = parity.onnxruntime_outputs(model, x)[0]
    y = csim(graph, tmp_path / "out", x)
    assert y.dtype == expected.dtype and y.shape == expected.shape
    assert np.array_equal(y, expected)


def test_a_relu_that_changes_the_output_is_refused(converted, tmp_path):
    model = onnx.load(str(converted("conv3x3_same", fused_relu=False, dead_channel_bias=False)))
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    quantize = next(n for n in model.graph.node if conv.output[0] in n.input)
    quantize.input[0] = "conv_relu_out"
    model.graph.node.insert(list(model.graph.node).index(conv) + 1,
                            onnx.helper.make_node("Relu", [conv.output[0]], ["conv_relu_out"], name="the_relu"))
    onnx.save(model, str(tmp_path / "relu.onnx"))
    with pytest.raises(MingError, match=r"node 'the_relu' \(Relu\) before QuantizeLinear clamps"):
        lift(tmp_path / "relu.onnx")


# Made by tf2onnx from int8 TFLite models of Keras networks (tests/generators/converted_models.py): dense
# layers as MatMul + Add of the dequantized int32 bias, Squeeze after the pooling, a float Relu or Clip between
# each layer and its QuantizeLinear (residual Adds included), int8 input and output, a float Softmax, a
# single-channel NHWC input reshaped to NCHW, maps 1 wide (DS-CNN's end), Conv1D (Unsqueeze, Transposes and
# maps 1 high) and Keras 3's Flatten (Shape -> Slice -> Concat -> Reshape after a Transpose).
CONVERTER_MADE = ["resnet.onnx", "resnet_nchw.onnx", "ds_cnn.onnx", "ds_cnn_nchw.onnx", "mobilenet.onnx",
                  "mobilenet_nchw.onnx", "autoencoder.onnx", "conv1d.onnx"]
CONVERTED = Path(__file__).parent / "data" / "converted"
# PyTorch's flows (tests/generators/torch_models.py, torch 2.13): eager-mode PTQ and QAT through TorchScript
# (Constant nodes, ConstantOfShape zero points, uint8 -> uint8 Casts between QuantizeLinear and
# DequantizeLinear), and fake quantization in forward with int32-valued biases.
TORCH = Path(__file__).parent / "data" / "torch"
TORCH_TAKEN = ["eager_ptq.onnx", "eager_qat.onnx", "fake_quant_int_bias.onnx"]


@pytest.mark.parametrize("model", [CONVERTED / name for name in CONVERTER_MADE] +
                         [TORCH / name for name in TORCH_TAKEN], ids=lambda path: f"{path.parent.name}/{path.name}")
def test_a_converter_made_model_equals_onnxruntime(model):
    graph = lift(model)
    for seed in range(3):
        result = parity.compare(graph, model, converted_onnx.model_input(model, seed))
        if result.exact != result.total and inexact(str(model)):
            pytest.skip(inexact(str(model)))  # the comparison's reference is not exact on this CPU
        assert result.exact == result.total, f"{result.total - result.exact} of {result.total} differ"


def test_a_dense_layer_written_as_matmul_and_bias_add_is_one_gemm():
    graph = lift(CONVERTED / "autoencoder.onnx")
    assert [k.op for k in graph.kernels()] == ["gemm"] * 6


@pytest.mark.parametrize("model", [CONVERTED / name for name in ("resnet.onnx", "autoencoder.onnx", "ds_cnn.onnx",
                                                                  "conv1d.onnx")] + [TORCH / "eager_qat.onnx"],
                         ids=lambda path: f"{path.parent.name}/{path.name}")
def test_csim_of_a_converter_made_model_equals_onnxruntime(tmp_path, model):
    graph = lift(model)
    x = converted_onnx.model_input(model, 3)
    expected = parity.onnxruntime_outputs(model, x)[0]
    simulated = csim(graph, tmp_path / "out", x)
    if not np.array_equal(simulated, expected) and inexact(str(model)):
        pytest.skip(inexact(str(model)))  # the comparison's reference is not exact on this CPU
    assert np.array_equal(simulated, expected)


def test_long_framework_names_give_short_process_names_and_pin_either_way():
    from ming_py.ilp.pins import resolve
    from ming_py.line_buffers import build_stream_graph

    graph = build_stream_graph(lift(CONVERTED / "resnet.onnx"))
    assert all(len(p.name) <= 40 for p in graph.processes)
    conv = next(p for p in graph.processes if p.kind == "conv" and len(p.source) > 40)
    assert conv.name.startswith("conv") and ";" in conv.source  # TFLite's joined tensor names, kept as the source
    by_name = resolve({f"{conv.name}.unroll.oc": 2}, graph)
    assert resolve({f"{conv.source}.unroll.oc": 2}, graph).unroll == by_name.unroll == {conv.name: {"oc": 2}}



@pytest.mark.parametrize("name, message", [
    # fake quantization cannot give a bias its int32 scale: onnxruntime then runs the conv in float
    ("fake_quant.onnx", "bias of /Conv is not an int32 multiple of input*weight scale"),
    # PT2E through the dynamo exporter writes AdaptiveAvgPool2d(1) as ReduceMean, which onnxruntime runs in float
    ("pt2e_xnnpack.onnx", "node 'node_mean' (ReduceMean) is not supported: onnxruntime runs a quantized "
                          "ReduceMean in float"),
    ("pt2e_x86.onnx", "export a mean over the spatial axes as GlobalAveragePool"),
])
def test_a_pytorch_export_ming_cannot_equal_is_refused_by_name(name, message):
    with pytest.raises(MingError, match=re.escape(message)):
        lift(TORCH / name)
