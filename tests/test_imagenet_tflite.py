"""ImageNet-class networks as the TFLite converter writes them (full-integer int8, tests/generators/
imagenet_tflite_models.py), at small width and resolution: MobileNetV1 and MobileNetV2 of keras.applications,
ResNet-18 and the tiny-YOLOv3-shaped detector. ming reference equals LiteRT's reference kernels on every value of
every output, on two inputs that give different outputs (test_imagenet_models.py builds them for the KV260)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from test_keras_tflite import assert_equal_outputs, litert_reference, reference_kernels_model
from test_tflite import model_input
from ming_py import reference
from ming_py.ir import Concat, Upsample
from ming_py.pipeline import lift

IMAGENET = Path(__file__).resolve().parent / "data" / "imagenet"
MODELS = ["mobilenet_v1_0125_64.tflite", "mobilenet_v2_010_64.tflite", "resnet18_00625_64.tflite",
          "tiny_yolo_00625_64.tflite"]


@pytest.mark.parametrize("name", MODELS)
def test_an_imagenet_tflite_model_equals_litert_reference_kernels(tmp_path, name):
    path = IMAGENET / name
    graph, runnable = lift(path), reference_kernels_model(path, tmp_path)
    expected = []
    for seed in range(2):
        x = model_input(graph, seed)
        result = reference.run(graph, x)
        expected.append(litert_reference(runnable, x))
        assert_equal_outputs({o.name: result[o.name] for o in graph.outputs}, expected[-1])
    # a model whose maps die after a few layers gives one output for every input, and the second input checks
    # nothing the first did not
    for output, y in expected[0].items():
        differing = np.count_nonzero(y != expected[1][output])
        assert differing > y.size / 3, f"{output}: only {differing} of {y.size} values differ between the inputs"


def test_the_detectors_route_is_a_2x_upsample_of_the_deep_map_concatenated_with_the_shallow_one():
    graph = lift(IMAGENET / "tiny_yolo_00625_64.tflite")
    (upsample,) = [n for n in graph.nodes if isinstance(n, Upsample)]
    (concat,) = [n for n in graph.nodes if isinstance(n, Concat)]
    assert upsample.factors == (1, 2, 2) and graph.shape_of(upsample.output) == (8, 4, 4)
    assert concat.inputs[0] == upsample.output and graph.shape_of(concat.output) == (24, 4, 4)
    assert sorted(np.prod(o.onnx_shape) for o in graph.outputs) == [255 * 2 * 2, 255 * 4 * 4]
