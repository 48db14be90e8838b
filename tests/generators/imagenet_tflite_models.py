"""Writes int8 .tflite files of ImageNet-class networks as users make them: Keras networks with seeded random
weights and BatchNorm statistics as training leaves them, converted by the real TFLite converter with full-integer
quantization (keras_tflite_models.py's `to_tflite`: `Optimize.DEFAULT`, a representative dataset of seeded random
images, `TFLITE_BUILTINS_INT8` only, int8 input and output). The files are what the converter writes, untouched.
The TFLite forms of imagenet_models.py's ONNX networks (NHWC input 1xRxRx3):

* `mobilenet_v1` — `keras.applications.MobileNet(alpha=α)` (default 0.5 at 160): depthwise-separable blocks with
  ReLU6, the ZeroPadding2D before each strided depthwise conv, GlobalAveragePooling2D(keepdims=True), Dropout, a
  1x1 Conv classifier, Reshape and softmax;
* `mobilenet_v2` — `keras.applications.MobileNetV2(alpha=α)` (default 1.0 at 224): inverted residuals (the
  ZeroPadding2D before each strided depthwise conv), the last 1x1 conv of 1280 channels at any α up to 1, global
  average pool, Dense with softmax; `--small` replaces that head by the same layers with the last conv's channels
  times α below 1 (keras.applications has no option for it), so that the small variants stay small;
* `resnet18`, `resnet34` — ResNet with basic blocks (default 224), built from layers as Keras' ResNet50 is:
  ZeroPadding2D(3) + 7x7 stride-2 stem, ZeroPadding2D(1) + 3x3 stride-2 MaxPooling2D, each strided 3x3 conv after
  a ZeroPadding2D(1), the others 'same', strided 1x1 projection shortcuts, global average pool, Dense with
  softmax;
* `tiny_yolo` — the tiny-YOLOv3-shaped detector (default half the channels of tiny-YOLOv3 at 320): 3x3 Conv +
  BatchNorm + LeakyReLU(0.1), five 2x2 MaxPooling2D and a stride-1 one ('same': padded right and bottom, as
  darknet), two heads of raw 1x1 convs (255 channels) at R/32 and R/16, the second fed by UpSampling2D(2) (nearest)
  of a 1x1 conv concatenated with the R/16 feature map.

`--width` scales every layer's channels (MobileNet's α; for ResNet and the detector a fraction of the real
network's channels, at least 4 and 2 as imagenet_models.py), `--resolution` the input side. The classifiers have
1000 classes unless --classes says otherwise.

Needs tensorflow-cpu (2.21, Keras 3), which is no ming dependency; run it with the Python of a separate venv:

    python -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow-cpu
    /tmp/tfenv/bin/python tests/generators/imagenet_tflite_models.py resnet18 --width 1 --resolution 224 -o r.tflite
    /tmp/tfenv/bin/python tests/generators/imagenet_tflite_models.py --committed   # the small variants

Each BatchNorm's moving mean and variance are those of its input on seeded calibration images, set in order
(each from the activations the BatchNorms before it give) and perturbed a little, with random gamma and beta:
every layer then normalizes its input as in a trained network, and the ReLUs keep about half their values.
Statistics drawn at random instead, far from the real ones, leave the maps dead after a few layers and the output
the same for every input.

The seeds are fixed (keras_tflite_models.py's `seeded_tflite`: `keras.utils.set_random_seed` before each model is
built, a numpy Generator for the statistics and the representative dataset, the Keras session cleared after each
model), TensorFlow runs on one thread, so the files are byte-identical from run to run with the same package
versions (tensorflow-cpu 2.21.0, Keras 3.15.1). The small variants are committed in tests/data/imagenet/.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
# keras_tflite_models sets TensorFlow's environment (deterministic ops, no log) before it imports it
from keras_tflite_models import _randomize_statistics, seeded_tflite, use_one_thread  # noqa: E402
from imagenet_variants import SEED, main as variants_main  # noqa: E402
from keras.src.applications.mobilenet_v2 import _make_divisible  # noqa: E402
from tensorflow import keras  # noqa: E402
from tensorflow.keras import layers  # noqa: E402

CALIBRATION_IMAGES = 8


def mobilenet_v1(inputs: keras.Input, width: float, classes: int, small: bool) -> keras.Model:
    return keras.applications.MobileNet(input_tensor=inputs, alpha=width, weights=None, classes=classes)


def mobilenet_v2(inputs: keras.Input, width: float, classes: int, small: bool) -> keras.Model:
    model = keras.applications.MobileNetV2(input_tensor=inputs, alpha=width, weights=None, classes=classes)
    if not small or width >= 1:
        return model
    # keras.applications' blocks, then its head with the last 1x1 conv's 1280 channels times α
    x = model.get_layer("block_16_project_BN").output
    x = _conv_bn(x, _make_divisible(1280 * width, 8), 1, activation="relu6")
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(classes, activation="softmax")(x))


def _conv_bn(x, filters: int, kernel: int, stride: int = 1, activation: str | None = "relu"):
    """Conv + BatchNorm (+ activation); a strided conv wider than 1 pads symmetrically first, as PyTorch and
    Keras' ResNet50 do, the others are 'same'."""
    if stride > 1 and kernel > 1:
        x = layers.ZeroPadding2D(kernel // 2)(x)
        x = layers.Conv2D(filters, kernel, strides=stride, padding="valid", use_bias=False)(x)
    else:
        x = layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization(epsilon=1e-5)(x)
    if activation == "leaky":
        return layers.LeakyReLU(negative_slope=0.1)(x)
    return layers.Activation(activation)(x) if activation else x


def _resnet(blocks: tuple[int, ...]):
    def network(inputs: keras.Input, width: float, classes: int, small: bool) -> keras.Model:
        def channels(c):
            return max(4, int(c * width))

        x = _conv_bn(inputs, channels(64), 7, 2)
        x = layers.MaxPooling2D(3, strides=2)(layers.ZeroPadding2D(1)(x))
        for stage, repeats in enumerate(blocks):
            filters = channels(64 << stage)
            for repeat in range(repeats):
                stride = 2 if stage > 0 and repeat == 0 else 1
                y = _conv_bn(x, filters, 3, stride)
                y = _conv_bn(y, filters, 3, activation=None)
                if stride != 1 or x.shape[-1] != filters:
                    x = _conv_bn(x, filters, 1, stride, activation=None)
                x = layers.Activation("relu")(layers.Add()([y, x]))
        x = layers.GlobalAveragePooling2D()(x)
        return keras.Model(inputs, layers.Dense(classes, activation="softmax")(x))

    return network


def tiny_yolo(inputs: keras.Input, width: float, classes: int, small: bool) -> keras.Model:
    """darknet's yolov3-tiny.cfg with every layer's channels times `width`; 255 = 3 x (5 + 80)."""
    def channels(c):
        return max(2, int(c * width))

    x = inputs
    for number, filters in enumerate((16, 32, 64, 128, 256, 512)):
        x = _conv_bn(x, channels(filters), 3, activation="leaky")
        if number == 4:
            route = x
        x = layers.MaxPooling2D(2, strides=2 if number < 5 else 1, padding="valid" if number < 5 else "same")(x)
    x = _conv_bn(x, channels(1024), 3, activation="leaky")
    neck = _conv_bn(x, channels(256), 1, activation="leaky")
    big = _conv_bn(neck, channels(512), 3, activation="leaky")
    head_large = layers.Conv2D(255, 1, name="head_large")(big)
    up = layers.UpSampling2D(2, interpolation="nearest")(_conv_bn(neck, channels(128), 1, activation="leaky"))
    y = _conv_bn(layers.Concatenate()([up, route]), channels(256), 3, activation="leaky")
    head_small = layers.Conv2D(255, 1, name="head_small")(y)
    return keras.Model(inputs, [head_large, head_small])


NETWORKS = {"mobilenet_v1": mobilenet_v1, "mobilenet_v2": mobilenet_v2, "resnet18": _resnet((2, 2, 2, 2)),
            "resnet34": _resnet((3, 4, 6, 3)), "tiny_yolo": tiny_yolo}


def _calibrate_statistics(model: keras.Model, rng: np.random.Generator) -> None:
    """keras_tflite_models.py's random BatchNorm gamma and beta and biases; each BatchNorm's moving mean and
    variance those of its input on seeded images (mean 0, deviation 1), with the BatchNorms before it already set,
    moved by a tenth of a deviation and scaled by up to 25%."""
    _randomize_statistics(model, rng)
    images = rng.normal(0, 1, (CALIBRATION_IMAGES,) + tuple(model.input_shape[1:])).astype(np.float32)
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            activations = np.asarray(keras.Model(model.inputs, layer.input)(images, training=False))
            axes = tuple(range(activations.ndim - 1))
            mean, variance = activations.mean(axis=axes), activations.var(axis=axes)
            gamma, beta, _, _ = layer.get_weights()
            layer.set_weights([gamma, beta, mean + rng.normal(0, 0.1, mean.shape) * np.sqrt(variance),
                               variance * rng.uniform(0.8, 1.25, variance.shape)])


def write(network: str, width: float, resolution: int, classes: int, small: bool, out: Path) -> None:
    def build():
        return NETWORKS[network](keras.Input((resolution, resolution, 3)), width, classes, small)

    tflite = seeded_tflite(build, SEED, images=CALIBRATION_IMAGES, set_statistics=_calibrate_statistics)
    out.write_bytes(tflite)
    print(f"{out.name}: {len(tflite)} bytes", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    use_one_thread()
    variants_main(argv, __doc__.split("\n\n")[0], ".tflite", write)


if __name__ == "__main__":
    main()
