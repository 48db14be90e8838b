"""tiny-YOLOv3-shaped QDQ detectors with element-wise activations between their convolutions, as onnxruntime's
`quantize_static` writes them: LeakyRelu and HardSwish wrapped in DequantizeLinear -> op -> QuantizeLinear,
Tanh and HardSigmoid left float with the MaxPool or Resize after them (`onnx_float_activations`). Each activation
feeds a MaxPool, a 1x1 convolution, a nearest Resize or a skip Concat. At a 32x32 input the upsampled map is
1x1, which IREE broadcasts.

The models in tests/data/detectors/tiny_yolo_*.onnx come from tests/generators/tiny_yolo_models.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from emit_helpers import csim_outputs
from ming_py import reference
from ming_py.pipeline import lift
from test_onnx_shape_subgraphs import assert_bitwise_equal, model_input, onnxruntime_outputs

DETECTORS = Path(__file__).parent / "data" / "detectors"
ACTIVATIONS = {"leaky": "LeakyRelu", "hardswish": "HardSwish", "tanh": "Tanh", "hardsigmoid": "HardSigmoid"}


def _path(name: str) -> Path:
    return DETECTORS / f"tiny_yolo_{name}.onnx"


@pytest.mark.parametrize("name", ["tanh", "hardsigmoid"])
def test_the_quantizer_leaves_these_activations_float_before_maxpool_and_resize(name):
    graph = onnx.load(str(_path(name))).graph
    activations = {n.output[0] for n in graph.node if n.op_type == ACTIVATIONS[name]}
    float_readers = {n.op_type for n in graph.node if activations & set(n.input)}
    assert {"MaxPool", "Resize", "QuantizeLinear"} <= float_readers


@pytest.mark.parametrize("name", sorted(ACTIVATIONS) + ["leaky_32"])
def test_reference_equals_onnxruntime_bit_for_bit(name):
    path = _path(name)
    graph = lift(path)
    kinds = {getattr(node, "op", None) or type(node).__name__ for node in graph.nodes}
    assert kinds >= {"table", "maxpool", "conv", "Upsample", "Concat"}
    for seed in range(3):
        x = model_input(path, seed)
        assert_bitwise_equal(reference.run(graph, x), onnxruntime_outputs(path, x))


@pytest.mark.parametrize("name", ["leaky", "leaky_32"])
def test_c_simulation_equals_onnxruntime_bit_for_bit(name, tmp_path):
    path = _path(name)
    x = np.concatenate([model_input(path, seed) for seed in (10, 11)])
    ours = csim_outputs(lift(path), tmp_path, x)
    theirs = [onnxruntime_outputs(path, image[None]) for image in x]
    assert_bitwise_equal(ours, {k: np.concatenate([t[k] for t in theirs]) for k in theirs[0]})


@pytest.mark.slow
def test_ming_build_verifies_the_tanh_detector(tmp_path):
    ming = str(Path(sys.executable).parent / "ming")
    result = subprocess.run([ming, "build", str(_path("tanh")), "--board", "kv260", "-o", str(tmp_path / "out")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "verified: the C-simulation equals ming reference" in result.stderr
