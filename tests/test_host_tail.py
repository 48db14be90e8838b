"""The host tail runs on a whole batch at once (issue 27): for every image it equals the same tail run on that
image alone, bit for bit, whatever the batch (the softmax kinds, dequantizing, quantizing, reshaping and the
layout permutation), and the driver's `batch_outputs` splits a batch's output records into the model's
outputs as the per-image tail does."""

from __future__ import annotations

import numpy as np
import pytest

from ming_py.contract import ming_host, ming_ports
from ming_py.runtime import ming_driver
from ming_py.contract.ming_host import HostOp

pytestmark = pytest.mark.unit

BATCHES = (1, 3, 64)
# (input scale, input zero point): small and large logit steps, so softmax rows run from flat to one-hot
QUANTIZATIONS = ((0.004, -3), (0.0366, 3), (0.2, -128), (1.5, 127))


def output_port(image_shape, host_ops=(), dtype="float32", permutation=(), scale=0.0366, zero_point=3,
                onnx_shape=None) -> ming_ports.Port:
    """An output whose accelerator values are one (C, H, W) map per image, `image_shape` in its layout."""
    values = int(np.prod(image_shape))
    onnx_shape = tuple(onnx_shape or image_shape)
    return ming_ports.Port("y", onnx_shape, tuple(image_shape), (values, 1, 1), scale, zero_point, values,
                            ming_host.words_per_image(values), dtype, tuple(permutation), tuple(host_ops))


def int8_images(images: int, shape, seed: int) -> np.ndarray:
    """Random int8 values, with ties at the maximum in some rows (the softmax's max subtraction and sums)."""
    rng = np.random.default_rng(seed)
    q = rng.integers(-128, 128, (images,) + tuple(shape)).astype(np.int8)
    q[::2, ..., :2] = 127
    return q


def assert_batch_equals_images(q: np.ndarray, port: ming_ports.Port) -> None:
    batch = ming_host.model_output_of_images(q, port)
    alone = np.stack([ming_host.model_output(image, port) for image in q])
    assert batch.dtype == alone.dtype and batch.shape == alone.shape
    assert batch.tobytes() == alone.tobytes()  # bit for bit, signed zeros included


@pytest.mark.parametrize("images", BATCHES)
@pytest.mark.parametrize("scale, zero_point", QUANTIZATIONS)
@pytest.mark.parametrize("shape, axis", [((10,), 0), ((1, 10), -1), ((1, 10), 1), ((1, 6, 2, 3), 1),
                                         ((1, 6, 2, 3), -2)])
def test_onnx_qlinear_softmax_of_a_batch_equals_each_image(images, scale, zero_point, shape, axis):
    ops = (HostOp("softmax", axis=axis), HostOp("quantize", scale=1 / 256, zero_point=-128),
           HostOp("dequantize", scale=1 / 256, zero_point=-128), HostOp("reshape", shape=(1,) + shape))
    port = output_port(shape, ops, scale=scale, zero_point=zero_point, onnx_shape=(1,) + shape)
    assert_batch_equals_images(int8_images(images, shape, seed=images), port)


@pytest.mark.parametrize("images", BATCHES)
@pytest.mark.parametrize("scale, zero_point", QUANTIZATIONS)
@pytest.mark.parametrize("beta", [1.0, 0.5])
@pytest.mark.parametrize("shape, dtype", [((1, 10), "int8"), ((10,), "uint8"), ((1, 3, 12), "float32")])
def test_tflite_softmax_of_a_batch_equals_each_image(images, scale, zero_point, beta, shape, dtype):
    ops = (HostOp("tflite_softmax", scale=beta),)
    if dtype == "float32":  # a float model output: the int8 softmax dequantized (1/256, -128)
        ops += (HostOp("dequantize", scale=1 / 256, zero_point=-128),)
    port = output_port(shape, ops, dtype, scale=scale, zero_point=zero_point)
    assert_batch_equals_images(int8_images(images, shape, seed=images + 1), port)


@pytest.mark.parametrize("images", BATCHES)
@pytest.mark.parametrize("dtype", ["float32", "int8", "uint8"])
def test_float_softmax_and_quantize_of_a_batch_equal_each_image(images, dtype):
    """The float Softmax onnxruntime runs when the quantized values are the model's output (int8 or uint8),
    or a Softmax whose float output is the model's (float32)."""
    ops = (HostOp("softmax", axis=1),) + ((HostOp("quantize", scale=1 / 256, zero_point=-128),)
                                          if dtype != "float32" else ())
    port = output_port((1, 10), ops + (HostOp("reshape", shape=(10, 1)),), dtype, onnx_shape=(10, 1))
    assert_batch_equals_images(int8_images(images, (1, 10), seed=images + 2), port)


@pytest.mark.parametrize("images", BATCHES)
@pytest.mark.parametrize("dtype", ["float32", "int8", "uint8"])
@pytest.mark.parametrize("permutation", [(), (0, 3, 1, 2)])
def test_dequantize_and_permutation_of_a_batch_equal_each_image(images, dtype, permutation):
    onnx_shape = (1, 4, 5, 8) if permutation else (1, 8, 4, 5)
    port = output_port((1, 8, 4, 5), dtype=dtype, permutation=permutation, onnx_shape=onnx_shape)
    assert_batch_equals_images(int8_images(images, (1, 8, 4, 5), seed=images + 3), port)


@pytest.mark.parametrize("chunk_values", [ming_driver.TAIL_CHUNK_VALUES, 20, 1])
def test_batch_outputs_split_the_records_as_each_image_alone(monkeypatch, chunk_values):
    """Two outputs in one record (a softmax and an NHWC map): each unpacked and run through its tail, many
    images at once (all of them, or chunks of 2 and 1 images: `chunk_values`), equals the tail of each image's
    own values."""
    monkeypatch.setattr(ming_driver, "TAIL_CHUNK_VALUES", chunk_values)
    classes = output_port((1, 10), (HostOp("tflite_softmax", scale=1.0),), "int8")
    stream = (8, 4, 5)
    features = ming_ports.Port("features", (1, 4, 5, 8), (1, 8, 4, 5), stream, 0.02, -7, 160, 20,
                                permutation=(0, 3, 1, 2), index=1)
    images = 5
    logits, maps = int8_images(images, (10, 1, 1), seed=4), int8_images(images, stream, seed=5)
    records = np.concatenate([packed(logits, classes), packed(maps, features)], axis=1)
    outputs = ming_driver.batch_outputs(records, [classes, features])
    for port, values in ((classes, logits), (features, maps)):
        alone = [ming_host.model_output(image.reshape(port.array_shape), port).reshape(port.image_shape)
                 for image in values]
        assert outputs[port.onnx_name].tobytes() == np.stack(alone).tobytes()
        assert outputs[port.onnx_name].shape == (images,) + port.image_shape


def packed(maps: np.ndarray, port: ming_ports.Port) -> np.ndarray:
    """int8 maps (images, C, H, W) as the bus words of each image (images x words)."""
    words = np.zeros(len(maps) * port.words, np.uint64)
    ming_host.pack_images(maps, port.stream_shape, words)
    return words.reshape(len(maps), port.words)


def test_an_axis_outside_the_image_is_refused():
    port = output_port((1, 10), (HostOp("softmax", axis=2), HostOp("quantize", scale=1 / 256, zero_point=-128)),
                       "int8")
    with pytest.raises(ValueError, match="axis 2 is not an axis of an image of shape"):
        ming_host.model_output_of_images(int8_images(3, (1, 10), seed=6), port)


def test_the_reciprocals_leading_zeros_are_int_bit_length():
    """tflite_softmax's reciprocal counts leading zeros of the row sums with numpy (float64 exponents): equal to
    Python's int.bit_length at and beside every power of two of int32, and 0."""
    values = [0] + [v for bit in range(31) for v in ((1 << bit) - 1, 1 << bit, (1 << bit) + 1)] + [(1 << 31) - 1]
    x = np.array(values, np.int64).reshape(-1, 1)
    assert ming_host._bit_length(x).reshape(-1).tolist() == [v.bit_length() for v in values]
