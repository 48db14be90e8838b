"""TFLite's DEPTH_TO_SPACE as a model writes it: as the model's output, and into one channel (C = b * b), before a
convolution or as the output: `ming reference` and the C-simulation equal LiteRT's reference kernels on every
value; a reshape that
moves values between pixels is refused naming the op the model has."""

from __future__ import annotations

import numpy as np
import pytest

import tflite_models
from emit_helpers import csim_outputs
from test_split_parts import _assert_reference_equals, _litert
from ming_py.pipeline import lift
from ming_py.errors import MingError
from ming_py.frontends.layout import channels_first
from ming_py.ir import Graph, GraphOutput, Reshape, TensorInfo


def _depth_to_space(channels: int, block: int, conv_after: bool) -> bytes:
    b = tflite_models.TfliteBuilder(seed=4)
    x = b.conv(b.input((1, 4, 4, 3)), channels, name="phases")
    y = b.depth_to_space(x, block, name="d2s")
    return b.build([b.conv(y, 4, name="after") if conv_after else y], "depth_to_space")


@pytest.mark.parametrize("channels,block,conv_after", [(8, 2, False), (8, 2, True), (4, 2, True), (4, 2, False),
                                                       (9, 3, True), (18, 3, False)])
def test_depth_to_space_equals_litert(tmp_path, channels, block, conv_after):
    path = tmp_path / "d2s.tflite"
    path.write_bytes(_depth_to_space(channels, block, conv_after))
    _assert_reference_equals(path, _litert, lambda shape, rng: rng.integers(-128, 128, shape).astype(np.int8))


@pytest.mark.slow
@pytest.mark.parametrize("channels,block,conv_after", [(8, 2, False), (4, 2, True)])
def test_depth_to_space_csim_equals_litert(tmp_path, channels, block, conv_after):
    path = tmp_path / "d2s.tflite"
    path.write_bytes(_depth_to_space(channels, block, conv_after))
    graph = lift(path)
    x = np.random.default_rng(11).integers(-128, 128, graph.inputs[0].onnx_shape).astype(np.int8)
    expected = _litert(path, x)
    ours = csim_outputs(graph, tmp_path / "out", x)
    assert set(ours) == set(expected)
    for name, y in expected.items():
        assert np.array_equal(ours[name].reshape(y.shape), y), name


@pytest.mark.unit
def test_a_reshape_between_pixels_is_refused_naming_the_models_op():
    graph = Graph("g", tensors={"a": TensorInfo("a", (4, 4, 8), "i8"), "b": TensorInfo("b", (8, 8, 2), "i8")})
    graph.nodes = [Reshape("d2s_reshape", "d2s_out", "a", "b")]
    graph.outputs = [GraphOutput("d2s_out", "b", (1, 8, 8, 2), 0.1, 0)]
    with pytest.raises(MingError, match=r"^node 'd2s_out' \(DEPTH_TO_SPACE\) reshapes an H x W x C map"):
        channels_first(graph, op_types={"d2s_out": "DEPTH_TO_SPACE"})
