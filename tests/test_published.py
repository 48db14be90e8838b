"""Published int8 models (tests/data/published, each with its source), built as their authors publish them: `ming
build` verifies its own C++ against ming reference, and ming reference equals LiteRT's reference kernels.

MLPerf Tiny's visual-wake-words MobileNetV1-0.25 at 96x96 is the network whose 6x6 depthwise layer, with shared
requantizers, once overflowed its row counter (the build now stops on such C++ instead of exiting 0)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ming_py import reference
from ming_py.build import build
from ming_py.pipeline import lift
from test_keras_tflite import assert_equal_outputs, litert_reference

PUBLISHED = Path(__file__).resolve().parent / "data" / "published"
# the models built as published (micro_speech's input RESHAPE runs on the host)
AS_PUBLISHED = ("vww_96_int8.tflite", "pretrainedResnet_quant.tflite", "kws_ref_model.tflite",
                "micro_speech_quantized.tflite")


def _inputs(graph, seeds=(0, 1)):
    shape = graph.inputs[0].onnx_shape
    yield from (np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8) for seed in seeds)
    yield np.where(np.random.default_rng(2).random(shape) < 0.5, -128, 127).astype(np.int8)


@pytest.mark.slow
@pytest.mark.parametrize("name", AS_PUBLISHED)
def test_a_published_model_builds_verified_and_equals_litert(tmp_path, name):
    path = PUBLISHED / name
    graph = lift(path)
    for x in _inputs(graph):
        result = reference.run(graph, x)
        assert_equal_outputs({o.name: result[o.name] for o in graph.outputs}, litert_reference(path, x))
    design = build(path, tmp_path / "out")
    verification = json.loads(design.files["report.json"])["verification"]
    assert verification["verified"] and verification["equal"], verification
