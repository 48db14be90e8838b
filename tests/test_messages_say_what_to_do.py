"""Refusals at the command line are one line that names the tensor, op or setting concerned as the user wrote
it, and what to do."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

import tflite_models
import zoo
from ming_py import reference
from ming_py.pipeline import lift
from ming_py.ort_session import onnxruntime_session

SKIP = "input_split_to_block1_add"  # residual_block's skip FIFO, which deadlocks at depth 3


def ming(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ming_py.cli", *map(str, args)], capture_output=True, text=True)


def error_line(result: subprocess.CompletedProcess) -> str:
    """The one error line of a refused command (progress lines aside)."""
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("ming: error: ")]
    return line.removeprefix("ming: error: ")


def _dynamic_model(tmp_path, on_input: bool):
    b = tflite_models.TfliteBuilder(seed=1)
    x = b.input((1, 8, 8, 3))
    y = b.conv(x, 4, name="conv")
    if on_input:
        b.tensors[x.index].shapeSignature = [1, -1, -1, 3]
    else:
        b.tensors[y.index].shapeSignature = [1, -16, 8, 4]
    path = tmp_path / "dynamic.tflite"
    path.write_bytes(b.build([y], "dynamic"))
    return path


def test_a_dynamic_tflite_shape_is_printed_as_plain_numbers_with_what_to_do(tmp_path):
    line = error_line(ming("build", _dynamic_model(tmp_path, on_input=False), "-o", tmp_path / "out"))
    assert line.startswith("tensor 'conv_out' (written by CONV_2D) has a dynamic shape [1, -16, 8, 4]"), line
    assert "np." not in line and "convert the model with every dimension fixed" in line
    line = error_line(ming("build", _dynamic_model(tmp_path, on_input=True), "-o", tmp_path / "out"))
    assert line.startswith("tensor 'input' has a dynamic shape [1, -1, -1, 3]") and "np." not in line, line


def test_a_deadlocking_depth_from_a_settings_file_names_the_file_and_key(quantized, tmp_path):
    settings = tmp_path / "depths.json"
    settings.write_text(f'{{"{SKIP}.depth": 3}}')
    line = error_line(ming("build", quantized("residual_block"), "--dsp", "20%", "--settings", settings, "-q",
                           "-o", tmp_path / "out"))
    assert line.startswith(f"settings file {settings}: {SKIP}.depth: 3: the design deadlocks with it"), line
    assert "--set" not in line


def _unnamed(model):
    """The model with every node's name empty, as PyTorch's and tf2onnx's exports leave many."""
    for node in model.graph.node:
        node.name = ""
    return model


def _conv_leaky_relu(tmp_path):
    """A QDQ detector stem like tiny YOLOv3's: Conv -> LeakyRelu -> MaxPool -> Conv -> LeakyRelu, nodes unnamed."""
    g = zoo._Graph("leaky", (1, 3, 16, 16))
    h = g.unary(g.conv("x", "conv1", 8, pads=1), "LeakyRelu", "leaky1", alpha=0.1)
    h = g.unary(g.conv(g.maxpool(h, "pool1"), "conv2", 8, pads=1), "LeakyRelu", "leaky2", alpha=0.1)
    path = zoo.quantize_float_model(g.finish(h), tmp_path / "named.onnx", (1, 3, 16, 16))
    onnx.save(_unnamed(onnx.load(path)), tmp_path / "unnamed.onnx")
    return tmp_path / "unnamed.onnx"


def test_unnamed_nodes_compile_and_equal_onnxruntime(tmp_path):
    path = _conv_leaky_relu(tmp_path)
    graph = lift(path)
    session = onnxruntime_session(str(path))
    for seed in range(2):
        x = np.random.default_rng(seed).standard_normal((1, 3, 16, 16)).astype(np.float32)
        (expected,) = session.run(None, {"x": x})
        assert np.array_equal(reference.run(graph, x)["y"], expected)


def test_an_unnamed_node_is_named_by_its_output_tensor(tmp_path):
    node = helper.make_node("Softsign", ["x"], ["softsign_out"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("softsign_out", TensorProto.FLOAT, [1, 3, 8, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "softsign.onnx")
    line = error_line(ming("analyze", tmp_path / "softsign.onnx"))
    assert "node 'softsign_out' (Softsign)" in line and "''" not in line, line


def test_a_split_of_rows_names_the_models_op_and_what_ming_takes(tmp_path):
    b = tflite_models.TfliteBuilder(seed=3)
    x = b.conv(b.input((1, 8, 8, 3)), 4, name="conv")
    path = tmp_path / "rows.tflite"
    path.write_bytes(b.build(b.split(x, [1] * 8, axis=1), "rows"))
    line = error_line(ming("analyze", path))
    assert line.startswith("node 'split_0' (SPLIT): this slice is not supported;") and "split the channels" in line


def test_a_setting_from_a_file_that_the_design_refuses_names_the_file(quantized, tmp_path):
    settings = tmp_path / "depths.json"
    settings.write_text(f'{{"{SKIP}": {{"depth": 0}}}}')
    line = error_line(ming("build", quantized("residual_block"), "--settings", settings, "-q", "-o", tmp_path / "out"))
    assert line.startswith(f"settings file {settings}: {SKIP}.depth=0: a FIFO depth is at least 1"), line
