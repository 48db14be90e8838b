"""ImageNet-class networks as the TFLite converter writes them (full-integer int8, tests/generators/
imagenet_tflite_models.py), at small width and resolution: MobileNetV1 and MobileNetV2 of keras.applications,
ResNet-18 and the tiny-YOLOv3-shaped detector. ming reference equals LiteRT's reference kernels on every value of
every output, and `ming build --board kv260` verifies its own C++ against ming reference."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from test_keras_tflite import assert_equal_outputs, litert_reference, reference_kernels_model
from test_tflite import model_input
from ming_py import reference
from ming_py.build import build
from ming_py.ir import Concat, Upsample
from ming_py.options import BuildOptions
from ming_py.pipeline import lift

IMAGENET = Path(__file__).resolve().parent / "data" / "imagenet"
MODELS = ["mobilenet_v1_0125_64.tflite", "mobilenet_v2_010_64.tflite", "resnet18_00625_64.tflite",
          "tiny_yolo_00625_64.tflite"]


@pytest.mark.parametrize("name", MODELS)
def test_an_imagenet_tflite_model_equals_litert_reference_kernels(tmp_path, name):
    path = IMAGENET / name
    graph, runnable = lift(path), reference_kernels_model(path, tmp_path)
    for seed in range(2):
        x = model_input(graph, seed)
        result = reference.run(graph, x)
        assert_equal_outputs({o.name: result[o.name] for o in graph.outputs}, litert_reference(runnable, x))


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_an_imagenet_tflite_model_builds_verified_for_the_kv260(tmp_path, name):
    design = build(IMAGENET / name, tmp_path / "out", BuildOptions(board="kv260"))
    verification = json.loads(design.files["report.json"])["verification"]
    assert verification["verified"] and verification["equal"], verification


def test_the_detectors_route_is_a_2x_upsample_of_the_deep_map_concatenated_with_the_shallow_one():
    graph = lift(IMAGENET / "tiny_yolo_00625_64.tflite")
    (upsample,) = [n for n in graph.nodes if isinstance(n, Upsample)]
    (concat,) = [n for n in graph.nodes if isinstance(n, Concat)]
    assert upsample.factors == (1, 2, 2) and graph.shape_of(upsample.output) == (8, 4, 4)
    assert concat.inputs[0] == upsample.output and graph.shape_of(concat.output) == (24, 4, 4)
    assert sorted(np.prod(o.onnx_shape) for o in graph.outputs) == [255 * 2 * 2, 255 * 4 * 4]
