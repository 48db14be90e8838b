"""`frontends.ort_kernels` names the kernel onnxruntime runs for each Add: checked against the graph onnxruntime's
default CPU session optimizes, on every zoo model with an Add and the converter-made ones."""

from __future__ import annotations

from pathlib import Path

import onnx
import onnxruntime
import pytest

import zoo
from frontends.ort_kernels import qlinear_kernels
from ming_py.ort_session import onnxruntime_session

CONVERTED = Path(__file__).parent / "data" / "converted"
WITH_ADD = [name for name in sorted(zoo.MODELS) if "Add" in {n.op_type for n in zoo.MODELS[name].build().graph.node}]


def optimized_kernels(path: Path, folder: Path) -> dict[str, str]:
    """Per Add, what onnxruntime made of it: QLinearAdd of its output type, or a float Add."""
    options = onnxruntime.SessionOptions()
    options.optimized_model_filepath = str(folder / "optimized.onnx")
    options.log_severity_level = 3
    onnxruntime_session(str(path), options)
    model = onnx.load(str(folder / "optimized.onnx"))
    types = {i.name: i.data_type for i in model.graph.initializer}
    found = {}
    for node in model.graph.node:
        if node.op_type == "QLinearAdd":  # its type: its output zero point's
            found[node.name] = {onnx.TensorProto.INT8: "int8", onnx.TensorProto.UINT8: "uint8"}[types[node.input[7]]]
        elif node.op_type == "Add":
            found[node.name] = "float"
    return found


@pytest.mark.parametrize("per_channel", [False, True], ids=["pt", "pc"])
@pytest.mark.parametrize("name", WITH_ADD)
def test_qlinear_kernels_are_onnxruntimes(tmp_path, name, per_channel):
    path = zoo.quantized_model(name, tmp_path, per_channel=per_channel)
    expected = optimized_kernels(path, tmp_path)
    ours = qlinear_kernels(onnx.load(str(path)))
    assert ours == {n: k for n, k in expected.items() if n in ours} and set(expected) <= set(ours)


@pytest.mark.parametrize("name", ["resnet.onnx", "resnet_nchw.onnx"])
def test_qlinear_kernels_of_converter_made_models_are_onnxruntimes(tmp_path, name):
    expected = optimized_kernels(CONVERTED / name, tmp_path)
    ours = qlinear_kernels(onnx.load(str(CONVERTED / name)))
    residual = {n: k for n, k in ours.items() if n in expected}
    assert residual and residual == {n: expected[n] for n in residual}
