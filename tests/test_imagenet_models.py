"""ImageNet-class networks quantized as users quantize them (onnxruntime's quantize_static, QDQ, per-channel int8;
tests/generators/imagenet_models.py), at small width and resolution: MobileNetV1, MobileNetV2, ResNet-18 and a
tiny-YOLOv3-shaped detector. ming reference equals onnxruntime bit for bit, and `ming build --board kv260`
verifies its own C++ against ming reference, for these and for their TFLite forms (test_imagenet_tflite.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from test_imagenet_tflite import MODELS as TFLITE_MODELS
from ming_py import parity
from ming_py.build import build
from ming_py.options import BuildOptions
from ming_py.pipeline import lift

IMAGENET = Path(__file__).resolve().parent / "data" / "imagenet"
MODELS = ["mobilenet_v1_0125_64.onnx", "mobilenet_v2_010_64.onnx", "resnet18_00625_64.onnx",
          "tiny_yolo_00625_64.onnx"]


def _generator():
    path = Path(__file__).resolve().parent / "generators" / "imagenet_models.py"
    spec = importlib.util.spec_from_file_location("imagenet_models", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _image(path: Path, seed: int) -> np.ndarray:
    """A seeded normalized image (mean 0, deviation 1), as the models were calibrated on."""
    shape = [d.dim_value for d in onnx.load(str(path)).graph.input[0].type.tensor_type.shape.dim]
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("name", MODELS)
def test_an_imagenet_model_equals_onnxruntime(name):
    path = IMAGENET / name
    graph = lift(path)
    for seed in range(2):
        result = parity.compare(graph, path, _image(path, seed))
        assert result.exact == result.total, f"{result.total - result.exact} of {result.total} differ"


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS + TFLITE_MODELS)
def test_an_imagenet_model_builds_verified_for_the_kv260(tmp_path, name):
    design = build(IMAGENET / name, tmp_path / "out", BuildOptions(board="kv260"))
    verification = json.loads(design.files["report.json"])["verification"]
    assert verification["verified"] and verification["equal"], verification


# At 32x32 the classifiers' last map is 1x1: IREE folds the global average pool's mean over one value into an
# elementwise generic that adds the input to a filled zero and keeps the divisor as an operand it never reads
@pytest.mark.parametrize("network, width", [("mobilenet_v1", 0.125), ("mobilenet_v2", 0.1), ("resnet18", 0.0625)])
def test_a_global_average_pool_of_a_one_by_one_map_equals_onnxruntime(tmp_path, network, width):
    generator = _generator()
    path = generator.quantize(generator.float_model(network, width, 32, 10, small=True), tmp_path / "m.onnx")
    graph = lift(path)
    result = parity.compare(graph, path, _image(path, 0))
    assert result.exact == result.total, f"{result.total - result.exact} of {result.total} differ"


def test_parameter_bytes_count_the_int8_weights_and_int32_biases_not_the_zero_points():
    """MobileNetV1 0.125 at 64 with 10 classes: 57,432 int8 initializers, of which 1,408 are zero points (per
    channel, and the activations'); 1,378 int32 biases (and as many int32 zero points of theirs)."""
    model = onnx.load(str(IMAGENET / "mobilenet_v1_0125_64.onnx"))
    assert _generator().parameter_bytes(model) == (56_024, 1_378 * 4)
