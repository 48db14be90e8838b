"""Writes tests/data/converted/*.onnx: small int8 Keras models converted as edge teams convert them.

Each model is a Keras network with random weights and non-trivial BatchNorm statistics, quantized by
`tf.lite.TFLiteConverter` (full-integer, int8 input and output, a representative dataset), then converted to
ONNX by tf2onnx's TFLite path (`tf2onnx.convert.from_tflite`), once as it comes (NHWC input with a Transpose
after it) and once with `inputs_as_nchw`. The files are small and committed, so the tests need neither
TensorFlow nor tf2onnx:

    python -m venv /tmp/tf && /tmp/tf/bin/pip install tensorflow-cpu tf2onnx onnx
    /tmp/tf/bin/python tests/generators/converted_models.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf2onnx  # noqa: E402
from tensorflow import keras  # noqa: E402
from tensorflow.keras import layers  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "data" / "converted"
SEED = 7


def _conv_bn(x, filters, kernel, strides=1, activation="relu", depthwise=False):
    if depthwise:
        x = layers.DepthwiseConv2D(kernel, strides=strides, padding="same", use_bias=False)(x)
    else:
        x = layers.Conv2D(filters, kernel, strides=strides, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    return layers.Activation(activation)(x) if activation else x


def resnet() -> keras.Model:
    """ResNet-8-shaped: residual Adds followed by a Relu, a strided shortcut, pooling, Flatten, Dense, Softmax."""
    inputs = keras.Input((16, 16, 3))
    x = _conv_bn(inputs, 8, 3)
    y = _conv_bn(x, 8, 3)
    y = _conv_bn(y, 8, 3, activation=None)
    x = layers.Activation("relu")(layers.Add()([x, y]))
    y = _conv_bn(x, 16, 3, strides=2)
    y = _conv_bn(y, 16, 3, activation=None)
    shortcut = layers.Conv2D(16, 1, strides=2)(x)
    x = layers.Activation("relu")(layers.Add()([shortcut, y]))
    x = layers.AveragePooling2D(8)(x)
    x = layers.Flatten()(x)
    return keras.Model(inputs, layers.Dense(10, activation="softmax")(x))


def ds_cnn() -> keras.Model:
    """Keyword-spotting-shaped (DS-CNN): a 49x10 spectrogram, depthwise-separable blocks, maps 1 wide."""
    inputs = keras.Input((49, 10, 1))
    x = _conv_bn(inputs, 16, (10, 4), strides=(2, 2))
    for _ in range(2):
        x = _conv_bn(x, 16, 3, depthwise=True)
        x = _conv_bn(x, 16, 1)
    x = layers.Conv2D(16, (1, 5), strides=(1, 5), padding="valid")(x)  # the width shrinks to 1
    x = layers.Activation("relu")(layers.BatchNormalization()(x))
    x = _conv_bn(x, 16, (3, 1), depthwise=True)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(12, activation="softmax")(x))


def conv1d() -> keras.Model:
    """A 1-D time-series net: Conv1D as TFLite writes it (EXPAND_DIMS, CONV_2D on maps 1 high, SQUEEZE)."""
    inputs = keras.Input((32, 6))
    x = layers.Conv1D(12, 5, padding="same", activation="relu")(inputs)
    x = layers.Conv1D(12, 3, strides=2, padding="same", activation="relu")(x)
    x = layers.MaxPooling1D(2)(x)
    return keras.Model(inputs, layers.Dense(4)(layers.Flatten()(x)))


def mobilenet() -> keras.Model:
    """MobileNetV1-shaped: depthwise-separable blocks with Relu6, global pooling, a 1x1 classifier."""
    inputs = keras.Input((24, 24, 3))
    x = _conv_bn(inputs, 8, 3, strides=2, activation="relu6")
    for filters, strides in ((16, 1), (16, 2)):
        x = _conv_bn(x, 8, 3, strides=strides, activation="relu6", depthwise=True)
        x = _conv_bn(x, filters, 1, activation="relu6")
    x = layers.GlobalAveragePooling2D(keepdims=True)(x)
    x = layers.Conv2D(2, 1)(x)
    x = layers.Reshape((2,))(x)
    return keras.Model(inputs, layers.Softmax()(x))


def autoencoder() -> keras.Model:
    """The anomaly-detection autoencoder's shape: Dense layers with Relu (MatMul + Add of the bias)."""
    inputs = keras.Input((64,))
    x = inputs
    for units in (32, 16, 8, 16, 32):
        x = layers.Dense(units)(x)
        x = layers.Activation("relu")(layers.BatchNormalization()(x))
    return keras.Model(inputs, layers.Dense(64)(x))


MODELS = {"resnet": resnet, "ds_cnn": ds_cnn, "conv1d": conv1d, "mobilenet": mobilenet, "autoencoder": autoencoder}


def _randomize_statistics(model: keras.Model, rng: np.random.Generator) -> None:
    """BatchNorm statistics and biases as a trained model has them (Keras initializes them to the identity and 0)."""
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            gamma, beta, mean, variance = layer.get_weights()
            layer.set_weights([rng.uniform(0.5, 1.5, gamma.shape), rng.normal(0, 0.2, beta.shape),
                               rng.normal(0, 0.2, mean.shape), rng.uniform(0.5, 2.0, variance.shape)])
        elif getattr(layer, "use_bias", False):
            kernel, bias = layer.get_weights()
            layer.set_weights([kernel, rng.normal(0, 0.2, bias.shape)])


def to_tflite(model: keras.Model, rng: np.random.Generator) -> bytes:
    shape = (1,) + tuple(model.input_shape[1:])
    samples = [rng.normal(0, 1, shape).astype(np.float32) for _ in range(32)]
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([s] for s in samples)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    return converter.convert()


def to_onnx(tflite: bytes, nchw: bool) -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.tflite"
        path.write_bytes(tflite)
        interpreter = tf.lite.Interpreter(model_path=str(path))
        names = [d["name"] for d in interpreter.get_input_details()]
        ranks = [len(d["shape"]) for d in interpreter.get_input_details()]
        nchw_inputs = [n for n, rank in zip(names, ranks) if rank == 4] if nchw else None
        model, _ = tf2onnx.convert.from_tflite(str(path), opset=13, inputs_as_nchw=nchw_inputs)
    return model.SerializeToString()


def main(names: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names or list(MODELS):
        tf.keras.utils.set_random_seed(SEED)
        rng = np.random.default_rng(SEED)
        model = MODELS[name]()
        _randomize_statistics(model, rng)
        tflite = to_tflite(model, rng)
        (OUT / f"{name}.tflite").write_bytes(tflite)
        (OUT / f"{name}.onnx").write_bytes(to_onnx(tflite, nchw=False))
        if len(model.input_shape) == 4:
            (OUT / f"{name}_nchw.onnx").write_bytes(to_onnx(tflite, nchw=True))
        print(name, "written")


if __name__ == "__main__":
    main(sys.argv[1:])
