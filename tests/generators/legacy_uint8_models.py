"""Writes a legacy uint8 .tflite model made the TF1 way: a `tf.compat.v1` graph with fake-quantization nodes
(`tf.quantization.fake_quant_with_min_max_vars` on the weights and after every layer, as quantization-aware
training leaves them), converted by `tf.compat.v1.lite.TFLiteConverter.from_session` with
`inference_type=tf.uint8` and `quantized_input_stats`: uint8 input, activations and output, asymmetric uint8
weights with zero points, int32 biases. Weights and biases are seeded random values; the file is what the
converter writes, untouched.

- legacy_uint8_cnn.tflite, 16x16x3 input in [-1, 1] (zero point 128):
  CONV_2D 3x3 SAME (the padded input's zero point is 128) without activation, DEPTHWISE_CONV_2D 3x3 SAME stride 2
  + ReLU6 (its input's zero point is not 0 either), a 1x1 CONV_2D + ReLU6 branch with weights quantized over a
  range symmetric about 0 (zero point 128) added back (ADD), MAX_POOL_2D 2x2
  and AVERAGE_POOL_2D 3x3 SAME stride 2 (border windows of 4 and 6 elements, inner ones of 9) of the sum,
  CONCATENATION of the two pools (one range, so one quantization), RESHAPE, FULLY_CONNECTED to 10 and SOFTMAX.
- legacy_uint8_cnn_float_io.tflite: the same network with float32 input and output
  (`inference_input_type=inference_output_type=tf.float32`): the converter adds a QUANTIZE to uint8 after the
  input and a DEQUANTIZE before the output.

    /work/tfenv/bin/python tests/generators/legacy_uint8_models.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

SEED = 7


def _fake_quant(x, low: float, high: float):
    return tf.quantization.fake_quant_with_min_max_vars(x, low, high, num_bits=8)


def _weights(rng, shape, scale: float, symmetric: bool = False):
    """Seeded weights, fake-quantized over their own (asymmetric) range as QAT's weight quantizer does, or over
    a range symmetric about 0 (zero point 128: the weights less it are int8)."""
    values = (rng.standard_normal(shape) * scale + (0 if symmetric else scale / 3)).astype(np.float32)
    if symmetric:
        bound = float(np.abs(values).max())
        return _fake_quant(tf.constant(values), -bound, bound)
    return _fake_quant(tf.constant(values), float(values.min()), float(values.max()))


def _bias(rng, channels: int):
    return tf.constant((rng.standard_normal(channels) * 0.1).astype(np.float32))


def legacy_uint8_cnn(float_io: bool = False) -> bytes:
    rng = np.random.default_rng(SEED)
    graph = tf.Graph()
    with graph.as_default():
        image = tf.compat.v1.placeholder(tf.float32, [1, 16, 16, 3], name="input")
        x = _fake_quant(image, -1.0, 127 / 128)
        x = tf.nn.conv2d(x, _weights(rng, (3, 3, 3, 8), 0.3), [1, 1, 1, 1], "SAME") + _bias(rng, 8)
        x = _fake_quant(x, -4.0, 4.0)
        y = tf.nn.depthwise_conv2d(x, _weights(rng, (3, 3, 8, 1), 0.4), [1, 2, 2, 1], "SAME") + _bias(rng, 8)
        y = _fake_quant(tf.nn.relu6(y), 0.0, 6.0)
        z = tf.nn.conv2d(y, _weights(rng, (1, 1, 8, 8), 0.3, symmetric=True), [1, 1, 1, 1], "VALID") + _bias(rng, 8)
        z = _fake_quant(tf.nn.relu6(z), 0.0, 6.0)
        s = _fake_quant(y + z, 0.0, 10.0)
        pooled_max = tf.nn.max_pool2d(s, 2, 2, "VALID")
        pooled_avg = _fake_quant(tf.nn.avg_pool2d(s, 3, 2, "SAME"), 0.0, 10.0)
        c = _fake_quant(tf.concat([pooled_max, pooled_avg], axis=3), 0.0, 10.0)
        flat = tf.reshape(c, [1, 4 * 4 * 16])
        logits = tf.matmul(flat, _weights(rng, (256, 10), 0.1)) + _bias(rng, 10)
        logits = _fake_quant(logits, -8.0, 8.0)
        output = tf.nn.softmax(logits, name="output")
        with tf.compat.v1.Session(graph=graph) as session:
            converter = tf.compat.v1.lite.TFLiteConverter.from_session(session, [image], [output])
            converter.inference_type = tf.uint8
            converter.quantized_input_stats = {"input": (128.0, 128.0)}  # real = (q - mean) / std
            if float_io:
                converter.inference_input_type = converter.inference_output_type = tf.float32
            return converter.convert()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR")
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    (out / "legacy_uint8_cnn.tflite").write_bytes(legacy_uint8_cnn())
    (out / "legacy_uint8_cnn_float_io.tflite").write_bytes(legacy_uint8_cnn(float_io=True))
