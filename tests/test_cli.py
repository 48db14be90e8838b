"""The `ming` command line: analyze, reference, and clear one-line errors on bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import zoo


def ming(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ming_py.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd)


def assert_clean_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_analyze_json_lists_every_kernel(quantized):
    result = ming("analyze", quantized("lenet"), "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [r["name"] for r in rows] == ["conv1", "pool1", "conv2", "pool2", "fc1", "fc2"]
    for row in rows:
        assert {"name", "kind", "stride", "dilation", "macs", "out_shape"} <= row.keys()
        assert row["kind"] in ("parallel", "reduction", "sliding_window")
    conv1 = rows[0]
    assert conv1["kind"] == "sliding_window" and conv1["macs"] > 0 and conv1["stride"] == [1, 1]
    assert rows[1]["macs"] == 0 and rows[1]["stride"] == [2, 2]


def test_analyze_table_names_the_layers(quantized):
    result = ming("analyze", quantized("dw_separable"))
    assert result.returncode == 0, result.stderr
    assert "dw1" in result.stdout and "sliding_window" in result.stdout and "MACs" in result.stdout


def test_reference_matches_onnxruntime_through_the_cli(quantized, tmp_path):
    model = quantized("conv3x3_s2", per_channel=True)
    x = zoo.random_input("conv3x3_s2", seed=3)
    np.save(tmp_path / "x.npy", x)
    result = ming("reference", model, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy")
    assert result.returncode == 0, result.stderr
    y = np.load(tmp_path / "y.npy")
    expected = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert y.dtype == np.float32 and y.shape == expected.shape
    assert np.array_equal(y, expected)


def test_missing_model(tmp_path):
    assert_clean_error(ming("analyze", tmp_path / "nope.onnx"), "nope.onnx", "not found")


def test_not_an_onnx_file(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\x01 certainly not protobuf" * 10)
    assert_clean_error(ming("analyze", bad), "not a valid ONNX model")


def _save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _conv_graph(input_dims, op="Conv"):
    weight = numpy_helper.from_array(np.ones((2, 3, 3, 3), np.float32), "w")
    node = helper.make_node(op, ["x", "w"] if op == "Conv" else ["x"], ["y"], name="layer1")
    return helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_dims)],
                             [helper.make_tensor_value_info("y", TensorProto.FLOAT, [input_dims[0], 2, 6, 6])],
                             [weight] if op == "Conv" else [])


def test_float_model_is_rejected(tmp_path):
    path = _save(_conv_graph([1, 3, 8, 8]), tmp_path / "float.onnx")
    assert_clean_error(ming("analyze", path), "not quantized", "quantize_static")


def test_dynamic_shape_is_rejected(tmp_path):
    path = _save(_conv_graph(["N", 3, 8, 8]), tmp_path / "dynamic.onnx")
    assert_clean_error(ming("analyze", path), "'x'", "dynamic")


def test_batch_larger_than_one_is_rejected(tmp_path):
    path = _save(_conv_graph([4, 3, 8, 8]), tmp_path / "batch.onnx")
    assert_clean_error(ming("analyze", path), "batch 4")


def test_unsupported_op_names_the_node(tmp_path):
    path = _save(_conv_graph([1, 3, 8, 8], op="Sigmoid"), tmp_path / "sigmoid.onnx")
    assert_clean_error(ming("analyze", path), "'layer1'", "Sigmoid", "not supported")


def test_grouped_convolution_names_the_node(quantized):
    assert_clean_error(ming("analyze", quantized("conv_grouped")), "conv3x3_g2", "group=2")


def test_uint8_activations_are_rejected(tmp_path):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    float_path = tmp_path / "f.onnx"
    onnx.save(zoo.MODELS["conv3x3_same"].build(), str(float_path))
    data = iter(zoo.calibration_data("conv3x3_same"))

    class Reader(CalibrationDataReader):
        def get_next(self):
            return next(data, None)

    out = tmp_path / "u8.onnx"
    quantize_static(str(float_path), str(out), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    assert_clean_error(ming("analyze", out), "UINT8", "QInt8")


def test_reference_input_errors(quantized, tmp_path):
    model = quantized("conv1x1")
    assert_clean_error(ming("reference", model, "--input", tmp_path / "missing.npy", "--output", tmp_path / "y.npy"),
                       "missing.npy")
    np.save(tmp_path / "wrong.npy", np.zeros((1, 2, 3), np.float32))
    assert_clean_error(ming("reference", model, "--input", tmp_path / "wrong.npy", "--output", tmp_path / "y.npy"),
                       "shape")
    assert not (tmp_path / "y.npy").exists()
