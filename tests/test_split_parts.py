"""A split into parts of one channel (TFLite SPLIT and SPLIT_V along the channel axis, however written; ONNX
Split): `ming reference` equals LiteRT's reference kernels and onnxruntime on every value of every part."""

from __future__ import annotations

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter, OpResolverType

import tflite_models
import zoo
from ming_py import reference
from ming_py.framework_tensors import ModelTensor, in_ming_layout
from ming_py.pipeline import lift
from ming_py.ort_session import onnxruntime_session

SEEDS = range(3)


def _tflite_split(sizes, axis, rows) -> bytes:
    b = tflite_models.TfliteBuilder(seed=3)
    x = b.conv(b.input((1, rows, 8, 3)), sum(sizes), name="conv")
    return b.build(b.split(x, list(sizes), axis=axis), "split")


def _onnx_split(sizes) -> object:
    g = zoo._Graph("split", (1, 3, 8, 8))
    x = g.relu(g.conv("x", "conv", sum(sizes), pads=1), "relu")
    return g.finish(g.split(x, "split", list(sizes)))


def _litert(path, x) -> dict[str, np.ndarray]:
    interpreter = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return {d["name"]: interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()}


def _onnxruntime(path, x) -> dict[str, np.ndarray]:
    session = onnxruntime_session(str(path))
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {session.get_inputs()[0].name: x})))


def _assert_reference_equals(path, framework, make_input) -> None:
    graph = lift(path)
    for seed in SEEDS:
        x = make_input(graph.inputs[0].onnx_shape, np.random.default_rng(seed))
        ours, theirs = reference.run(graph, x), framework(path, x)
        assert list(ours) == list(theirs)
        for name, y in theirs.items():
            assert ours[name].shape == y.shape and np.array_equal(ours[name], y), name


@pytest.mark.parametrize("sizes,axis,rows", [((1, 1, 1, 1), -1, 8), ((1, 1, 1, 1), 3, 8), ((1, 2, 1), 3, 8),
                                             ((1, 1, 1, 1), -1, 1), ((3, 1), 3, 1)])
def test_tflite_split_into_one_channel_parts_equals_litert(tmp_path, sizes, axis, rows):
    path = tmp_path / "split.tflite"
    path.write_bytes(_tflite_split(sizes, axis, rows))
    _assert_reference_equals(path, _litert, lambda shape, rng: rng.integers(-128, 128, shape).astype(np.int8))


@pytest.mark.parametrize("sizes", [(1, 1, 1, 1), (1, 2, 1), (3, 1), (1, 3)])
def test_onnx_split_into_one_channel_parts_equals_onnxruntime(tmp_path, sizes):
    path = tmp_path / "split.onnx"
    zoo.quantize_float_model(_onnx_split(sizes), path, (1, 3, 8, 8))
    _assert_reference_equals(path, _onnxruntime, lambda shape, rng: rng.standard_normal(shape).astype(np.float32))


@pytest.mark.unit
@pytest.mark.parametrize("height,width", [(8, 8), (4, 6), (1, 8)])
def test_a_one_channel_tflite_map_is_compared_in_its_own_layout(height, width):
    """A TFLite part of one channel, (1, H, W, 1), is ming's (1, H, W): the same values, not the transpose."""
    part = np.arange(height * width, dtype=np.int8).reshape(1, height, width, 1)
    tensor = ModelTensor("split_0", "int8", 0.1, 0, channels_last=True)
    assert np.array_equal(in_ming_layout(part, tensor, (1, height, width)), part.reshape(1, height, width))
