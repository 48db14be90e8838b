"""Writes int8 .tflite files of small Keras networks, quantized by the real TFLite converter, into OUT_DIR.

Each model is built in Keras with random weights (seeded) and non-trivial BatchNorm statistics (gamma, beta,
moving mean and variance set to seeded random values), then converted by `tf.lite.TFLiteConverter.from_keras_model`
with full-integer quantization: `Optimize.DEFAULT`, a representative dataset of 32 seeded random inputs,
`TFLITE_BUILTINS_INT8` only, int8 input and output (float32 in the *_float_io file). ALPHA, the width multiplier
of the keras.applications networks, is 0.15 to keep each file near 300 KB (see ALPHA below). The files are what
the converter writes, untouched:

- mobilenet_v2.tflite: `keras.applications.MobileNetV2(alpha=ALPHA)`, 32x32x3, 10 classes: inverted residual
  blocks (1x1 expand, depthwise 3x3, ReLU6 fused into the convs, the ZeroPadding2D before the strided depthwise
  convs folded into them: no PAD), 1x1 linear projection, residual ADD, the 1280-wide last 1x1 conv, a global
  average pool over a 1x1 map (MEAN), FULLY_CONNECTED and SOFTMAX.
- mobilenet_v3_small_minimalistic.tflite: `keras.applications.MobileNetV3Small(minimalistic=True, alpha=ALPHA)`,
  32x32x3: ReLU only, no squeeze-excite, 3x3 kernels; the head is GlobalAveragePooling2D(keepdims=True) on a 1x1
  map (MEAN), 1x1 convs, and a Flatten that the converter writes for a dynamic batch (SHAPE, STRIDED_SLICE, PACK,
  RESHAPE) before SOFTMAX.
- mobilenet_v3_small.tflite: the full `MobileNetV3Small(alpha=ALPHA)`, 32x32x3: HARD_SWISH, 5x5 depthwise convs,
  squeeze-excite blocks (MEAN with keepdims, 1x1 conv + ReLU, then the hard-sigmoid ReLU6(x + 3) / 6 written as a
  1x1 conv with the + 3 in its bias and ReLU6 fused, a MUL by the constant 1/6) whose gate is multiplied into the
  feature map by a broadcasting MUL; the same Flatten as above.
- efficientnet_lite_block.tflite: an EfficientNet-Lite-like stem and three MBConv blocks on 32x32x3: Conv,
  DepthwiseConv (3x3 and a strided 5x5), squeeze-excite (GlobalAveragePooling2D(keepdims=True) -> Conv 1x1 ->
  ReLU -> Conv 1x1 -> sigmoid (LOGISTIC) -> Multiply: a broadcasting MUL), the 1x1 projection and a residual ADD,
  then a pooled FULLY_CONNECTED and SOFTMAX.
- two_head_detector.tflite: a YOLO-tiny-like detector on 48x48x3: Conv + BatchNorm + LeakyReLU(0.1) stacks
  (LEAKY_RELU), MAX_POOL_2D, a route that upsamples the deep map by UpSampling2D (nearest; Keras 3 writes it as
  `ops.repeat`, which the converter lowers for a dynamic batch to EXPAND_DIMS, TILE (version 3, which LiteRT's
  BUILTIN_REF resolver does not register), SHAPE, STRIDED_SLICE, CONCATENATION of int32 shapes and RESHAPE) and
  concatenates it with a shallower map (CONCATENATION), two 1x1 conv heads: two outputs, which the converter
  writes in the order 12x12 head, 6x6 head (the Keras model's order reversed).
- two_head_detector_float_io.tflite: the same detector with float32 input and outputs (the converter adds a
  QUANTIZE after the input and a DEQUANTIZE before each output); everything else is int8.
- kws_conv1d.tflite: a Conv1D keyword-spotting net on a (49, 10) MFCC input: three Conv1D + BatchNorm + ReLU
  (each EXPAND_DIMS, CONV_2D on a map 1 high, RESHAPE), one strided, GlobalAveragePooling1D (MEAN over 25 steps),
  FULLY_CONNECTED (Dense), SOFTMAX.
- shufflenet_block.tflite: ShuffleNetV2-like units on 16x16x3: a channel split in halves (`ops.split`: SPLIT), a
  1x1 / depthwise 3x3 / 1x1 branch, CONCATENATION, the channel shuffle Reshape -> Permute -> Reshape (RESHAPE,
  TRANSPOSE, RESHAPE), a split into 8 and 16 channels (SPLIT_V), slices of channels (`x[..., 2:6]`:
  STRIDED_SLICE of the map), a second shuffle in 3 groups, MEAN, FULLY_CONNECTED, SOFTMAX.
- grouped_conv.tflite: a ResNeXt-like block on 16x16x3: a 3x3 Conv2D in 4 groups (one CONV_2D whose filters
  have 4 input channels), 1x1 convs, a residual ADD.
- flatten_dense.tflite: Conv, MaxPooling2D to 4x4x8, Flatten (RESHAPE, in TFLite's pixel-major order) -> Dense
  -> Dense.
- conv1d_flatten.tflite: two strided Conv1D on a (49, 10) input flattened (13 x 8) into Dense.
- maximum_minimum.tflite: two Conv + BatchNorm maps combined by Maximum and Minimum (MAXIMUM, MINIMUM; the
  converter gives their inputs and output one scale), CONCATENATION.
- dense_to_map.tflite: a decoder's start, Dense reshaped into a 4x4x4 map and convolved.
- transpose_conv.tflite: Conv2DTranspose upsampling by 2 (TRANSPOSE_CONV).
- resnet_v2_shortcut.tflite: Keras ResNetV2's block2 (pre-activation BatchNorm + ReLU, 1x1, ZeroPadding2D + strided
  3x3, 1x1, ADD) whose shortcut, where the block strides, is `MaxPooling2D(1, strides=2)` (a MAX_POOL_2D with a 1x1
  window: a strided subsample), on 15x15 and 8x8 maps; MEAN, FULLY_CONNECTED.
- strided_subsample_input.tflite: MaxPooling2D(1, strides=2) on the input, AveragePooling2D(1, strides=(1, 2),
  padding='same') after a conv.
- binary_classifier.tflite: GlobalAveragePooling2D into Dense(1, activation='sigmoid') (FULLY_CONNECTED to one
  unit, LOGISTIC) and Dense(1, activation='tanh'): two one-value outputs.
- one_value_regressor.tflite: TFLite Micro's hello_world shape, Dense 1 -> 16 -> 16 -> 1, then hard-swish
  (HARD_SWISH): a one-value input and output.
- grouped_conv_shapes.tflite: Conv2D(groups=g) on a map one row high: 8 groups of one channel, 2 groups feeding an
  ADD, 4 groups into a MaxPooling2D, and 4 groups as the model's output.
- grouped_conv_output.tflite: a 3x3 Conv2D in 4 groups as the model's last layer.
- ssd_head.tflite: SSD's box and class heads on two feature maps, each Reshape((-1, 4)) or Reshape((-1, classes))
  (SHAPE, STRIDED_SLICE, PACK, RESHAPE for a symbolic batch), CONCATENATION along the anchors: two outputs.
- ssd_flat_head.tflite: the same heads flattened with the batch (`ops.reshape(x, (-1, 4))`: shapes [-1, 4] whose
  -1 is no batch), concatenated along axis 0, LOGISTIC on the class scores.
- segmentation_head.tflite: a strided encoder, UpSampling2D(interpolation='bilinear') (RESIZE_BILINEAR with
  half-pixel centres), CONCATENATION with the skip, a 1x1 classifier per pixel.

Needs tensorflow-cpu (2.21, Keras 3):

    python -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow-cpu
    /tmp/tfenv/bin/python tests/generators/keras_tflite_models.py tests/data/keras [NAME ...]

The seeds are fixed (`keras.utils.set_random_seed` before each model is built, a numpy Generator for the
statistics and the representative dataset) and the Keras session is cleared between models (layer names, which
become tensor names, do not depend on which models ran before), so the files are byte-identical from run to run
with the same package versions (tensorflow-cpu 2.21.0, Keras 3.15.1), whether all or some are written. They are
committed in tests/data/keras/.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_DETERMINISTIC_OPS", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402
from tensorflow.keras import layers  # noqa: E402

SEED = 11
# The width multiplier of the keras.applications networks: 0.35 (MobileNetV2's smallest published width) writes
# 646 KB for MobileNetV2 and 0.75 writes 1.3 MB for MobileNetV3Small, as their last 1x1 convs keep 1280 and 1024
# channels at any alpha below 1 and per-channel quantization parameters take 12 bytes a channel. At 0.15 the files
# are about 300 KB and the topology (every block, the fixed-width head) is the published one.
ALPHA = 0.15


def mobilenet_v2() -> keras.Model:
    return keras.applications.MobileNetV2(alpha=ALPHA, input_shape=(32, 32, 3), weights=None, classes=10)


def mobilenet_v3_small_minimalistic() -> keras.Model:
    return keras.applications.MobileNetV3Small(input_shape=(32, 32, 3), alpha=ALPHA, minimalistic=True,
                                               weights=None, classes=10, include_preprocessing=False)


def mobilenet_v3_small() -> keras.Model:
    return keras.applications.MobileNetV3Small(input_shape=(32, 32, 3), alpha=ALPHA, minimalistic=False,
                                               weights=None, classes=10, include_preprocessing=False)


def _conv_bn(x, filters, kernel, strides=1, activation="relu6", depthwise=False):
    if depthwise:
        x = layers.DepthwiseConv2D(kernel, strides=strides, padding="same", use_bias=False)(x)
    else:
        x = layers.Conv2D(filters, kernel, strides=strides, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    return layers.Activation(activation)(x) if activation else x


def _mbconv(x, expand, out, kernel=3, strides=1, se_ratio=0.25):
    """EfficientNet's MBConv: 1x1 expand, depthwise, squeeze-excite with a sigmoid gate, 1x1 projection, Add."""
    channels = x.shape[-1]
    inputs = x
    x = _conv_bn(x, channels * expand, 1)
    x = _conv_bn(x, None, kernel, strides=strides, depthwise=True)
    squeeze = max(1, int(channels * se_ratio))
    s = layers.GlobalAveragePooling2D(keepdims=True)(x)
    s = layers.Conv2D(squeeze, 1, activation="relu")(s)
    s = layers.Conv2D(channels * expand, 1, activation="sigmoid")(s)
    x = layers.Multiply()([x, s])
    x = _conv_bn(x, out, 1, activation=None)
    if strides == 1 and channels == out:
        x = layers.Add()([x, inputs])
    return x


def efficientnet_lite_block() -> keras.Model:
    inputs = keras.Input((32, 32, 3))
    x = _conv_bn(inputs, 16, 3, strides=2)
    x = _mbconv(x, 4, 16)  # residual
    x = _mbconv(x, 4, 24, kernel=5, strides=2)  # no residual
    x = _mbconv(x, 4, 24)  # residual
    x = _conv_bn(x, 64, 1)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(10, activation="softmax")(x))


def _conv_leaky(x, filters, kernel):
    x = layers.Conv2D(filters, kernel, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    return layers.LeakyReLU(negative_slope=0.1)(x)


def two_head_detector() -> keras.Model:
    inputs = keras.Input((48, 48, 3))
    x = _conv_leaky(inputs, 8, 3)
    x = layers.MaxPooling2D(2)(x)  # 24
    x = _conv_leaky(x, 16, 3)
    x = layers.MaxPooling2D(2)(x)  # 12
    route = _conv_leaky(x, 32, 3)
    x = layers.MaxPooling2D(2)(route)  # 6
    x = _conv_leaky(x, 64, 3)
    x = _conv_leaky(x, 32, 1)
    head1 = layers.Conv2D(18, 1, name="head_6x6")(_conv_leaky(x, 64, 3))
    y = _conv_leaky(x, 16, 1)
    y = layers.UpSampling2D(2, interpolation="nearest")(y)  # 12
    y = layers.Concatenate()([y, route])
    head2 = layers.Conv2D(18, 1, name="head_12x12")(_conv_leaky(y, 32, 3))
    return keras.Model(inputs, [head1, head2])


def kws_conv1d() -> keras.Model:
    inputs = keras.Input((49, 10))
    x = layers.Conv1D(24, 3, padding="same", use_bias=False)(inputs)
    x = layers.Activation("relu")(layers.BatchNormalization()(x))
    x = layers.Conv1D(32, 3, strides=2, padding="same", use_bias=False)(x)
    x = layers.Activation("relu")(layers.BatchNormalization()(x))
    x = layers.Conv1D(32, 3, padding="same", use_bias=False)(x)
    x = layers.Activation("relu")(layers.BatchNormalization()(x))
    x = layers.GlobalAveragePooling1D()(x)
    x = layers.Dense(12)(x)
    return keras.Model(inputs, layers.Softmax()(x))


def _shuffle(x, groups):
    """ShuffleNet's channel shuffle as Keras writes it: Reshape -> Permute -> Reshape (TFLite's TRANSPOSE)."""
    height, width, channels = x.shape[1:]
    x = layers.Reshape((height, width, groups, channels // groups))(x)
    x = layers.Permute((1, 2, 4, 3))(x)
    return layers.Reshape((height, width, channels))(x)


def shufflenet_block() -> keras.Model:
    inputs = keras.Input((16, 16, 3))
    x = _conv_bn(inputs, 24, 3, strides=2, activation="relu")  # 8x8x24
    keep, branch = keras.ops.split(x, 2, axis=-1)  # SPLIT
    branch = _conv_bn(branch, 12, 1, activation="relu")
    branch = _conv_bn(branch, None, 3, depthwise=True, activation=None)
    branch = _conv_bn(branch, 12, 1, activation="relu")
    x = _shuffle(layers.Concatenate()([keep, branch]), 2)
    keep, branch = keras.ops.split(x, [8], axis=-1)  # SPLIT_V, 8 and 16 channels
    branch = _conv_bn(branch, 16, 1, activation="relu")
    x = layers.Concatenate()([branch, keep[..., 2:6], keep[..., :2]])  # STRIDED_SLICE of the channels
    x = _shuffle(_conv_bn(x, 24, 1, activation="relu"), 3)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(10, activation="softmax")(x))


def grouped_conv() -> keras.Model:
    """A ResNeXt-like block: 1x1, a 3x3 convolution in 4 groups (one CONV_2D with 4-channel filters), 1x1, Add."""
    inputs = keras.Input((16, 16, 3))
    x = _conv_bn(inputs, 16, 3, activation="relu")
    y = _conv_bn(x, 16, 1, activation="relu")
    y = layers.Conv2D(16, 3, padding="same", groups=4, use_bias=False)(y)
    y = layers.Activation("relu")(layers.BatchNormalization()(y))
    y = _conv_bn(y, 16, 1, activation=None)
    x = layers.Activation("relu")(layers.Add()([x, y]))
    return keras.Model(inputs, _conv_bn(x, 8, 1, strides=2, activation="relu"))


def flatten_dense() -> keras.Model:
    """Flatten of a 4x4x8 map into Dense (pixel-major, TFLite's order)."""
    inputs = keras.Input((16, 16, 3))
    x = _conv_bn(inputs, 8, 3, strides=2, activation="relu")
    x = layers.MaxPooling2D(2)(x)  # 4x4x8
    x = layers.Dense(32, activation="relu")(layers.Flatten()(x))
    return keras.Model(inputs, layers.Dense(10)(x))


def dense_to_map() -> keras.Model:
    """A decoder's start: Dense reshaped into a 4x4x4 map, then a convolution."""
    inputs = keras.Input((16,))
    x = layers.Dense(64, activation="relu")(inputs)
    x = layers.Reshape((4, 4, 4))(x)
    return keras.Model(inputs, _conv_bn(x, 8, 3, activation="relu"))


def conv1d_flatten() -> keras.Model:
    """Conv1D as the converter writes it (EXPAND_DIMS, CONV_2D on a map 1 high, RESHAPE) flattened into Dense."""
    inputs = keras.Input((49, 10))
    x = layers.Conv1D(16, 3, strides=2, padding="same", activation="relu")(inputs)
    x = layers.Conv1D(8, 3, strides=2, padding="same", activation="relu")(x)
    return keras.Model(inputs, layers.Dense(12)(layers.Flatten()(x)))


def maximum_minimum() -> keras.Model:
    inputs = keras.Input((16, 16, 3))
    x = _conv_bn(inputs, 16, 3, activation=None)
    y = _conv_bn(inputs, 16, 1, activation=None)
    return keras.Model(inputs, layers.Concatenate()([layers.Maximum()([x, y]), layers.Minimum()([x, y])]))


def transpose_conv() -> keras.Model:
    """A decoder step: Conv2DTranspose (TRANSPOSE_CONV) upsampling by 2."""
    inputs = keras.Input((8, 8, 3))
    x = _conv_bn(inputs, 16, 3, activation="relu")
    x = layers.Conv2DTranspose(8, 3, strides=2, padding="same", activation="relu")(x)
    return keras.Model(inputs, _conv_bn(x, 8, 1, activation=None))


def segmentation_head() -> keras.Model:
    """An FPN/U-Net-like decoder step: a strided encoder, UpSampling2D(interpolation='bilinear') (RESIZE_BILINEAR
    with half-pixel centres), Concatenate with the skip, a per-pixel classifier."""
    inputs = keras.Input((16, 16, 3))
    skip = _conv_bn(inputs, 8, 3, activation="relu")
    x = _conv_bn(skip, 16, 3, strides=2, activation="relu")
    x = _conv_bn(x, 16, 3, activation="relu")
    x = layers.UpSampling2D(2, interpolation="bilinear")(x)
    x = layers.Concatenate()([x, skip])
    return keras.Model(inputs, layers.Conv2D(4, 1)(_conv_bn(x, 8, 3, activation="relu")))


def _resnet_v2_block(x, filters, stride):
    """Keras ResNetV2's block2 without a conv shortcut: pre-activation, the shortcut a MaxPooling2D(1, strides)
    (a strided subsample) where the block strides, 1x1, ZeroPadding2D + 3x3 at the stride, 1x1, Add."""
    preact = layers.Activation("relu")(layers.BatchNormalization(epsilon=1.001e-5)(x))
    shortcut = layers.MaxPooling2D(1, strides=stride)(x) if stride > 1 else x
    y = _conv_bn(preact, filters, 1, activation="relu")
    y = layers.ZeroPadding2D(((1, 1), (1, 1)))(y)
    y = layers.Conv2D(filters, 3, strides=stride, use_bias=False)(y)
    y = layers.Activation("relu")(layers.BatchNormalization(epsilon=1.001e-5)(y))
    y = layers.Conv2D(x.shape[-1], 1)(y)
    return layers.Add()([shortcut, y])


def resnet_v2_shortcut() -> keras.Model:
    """ResNetV2's strided blocks (the last block of each stack, `MaxPooling2D(1, strides=2)` as the shortcut),
    one of them at the map's odd size, and a subsampled input."""
    inputs = keras.Input((15, 15, 3))
    x = _conv_bn(inputs, 16, 3, activation=None)
    x = _resnet_v2_block(x, 8, 2)  # 8x8
    x = _resnet_v2_block(x, 8, 1)
    x = _resnet_v2_block(x, 8, 2)  # 4x4
    x = layers.GlobalAveragePooling2D()(layers.Activation("relu")(layers.BatchNormalization()(x)))
    return keras.Model(inputs, layers.Dense(10)(x))


def strided_subsample_input() -> keras.Model:
    """MaxPooling2D(1, strides=2) and AveragePooling2D(1, strides=(1, 2), padding='same') straight on the input."""
    inputs = keras.Input((9, 12, 3))
    x = layers.MaxPooling2D(1, strides=2)(inputs)  # 5x6
    x = _conv_bn(x, 8, 3, activation="relu")
    x = layers.AveragePooling2D(1, strides=(1, 2), padding="same")(x)  # 5x3
    return keras.Model(inputs, _conv_bn(x, 8, 1, activation=None))


def binary_classifier() -> keras.Model:
    """A binary classifier's head: GlobalAveragePooling2D, Dense(1, activation='sigmoid') (FULLY_CONNECTED to one
    unit, LOGISTIC); beside it a one-unit tanh score (Dense(1, activation='tanh'))."""
    inputs = keras.Input((8, 8, 3))
    x = _conv_bn(inputs, 8, 3, strides=2, activation="relu")
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, [layers.Dense(1, activation="sigmoid")(x), layers.Dense(1, activation="tanh")(x)])


def one_value_regressor() -> keras.Model:
    """TFLite Micro's hello_world shape (1 -> 16 -> 16 -> 1) with a hard-swish output: one-value tensors at both
    ends."""
    inputs = keras.Input((1,))
    x = layers.Dense(16, activation="relu")(inputs)
    x = layers.Dense(16, activation="relu")(x)
    return keras.Model(inputs, layers.Activation("hard_swish")(layers.Dense(1)(x)))


def grouped_conv_shapes() -> keras.Model:
    """Grouped convolutions where the groups' results are the model's output, one channel per group, on a map
    one row high, and feeding a pool and an Add."""
    inputs = keras.Input((1, 16, 8))
    x = layers.Conv2D(8, 3, padding="same", groups=8, use_bias=False)(inputs)  # one channel per group, 1 row
    x = layers.Activation("relu")(layers.BatchNormalization()(x))
    y = layers.Conv2D(8, (1, 3), padding="same", groups=2)(x)
    x = layers.Add()([x, y])
    x = layers.MaxPooling2D((1, 2))(layers.Conv2D(16, (1, 3), padding="same", groups=4, activation="relu")(x))
    return keras.Model(inputs, layers.Conv2D(8, (1, 3), padding="same", groups=4)(x))


def grouped_conv_output() -> keras.Model:
    """A ResNeXt-like map whose last layer, the model's output, is a 3x3 convolution in 4 groups."""
    inputs = keras.Input((8, 8, 3))
    x = _conv_bn(inputs, 16, 3, activation="relu")
    return keras.Model(inputs, layers.Conv2D(8, 3, padding="same", groups=4)(x))


def ssd_head() -> keras.Model:
    """SSD-MobileNet's head on two feature maps (8x8 and 4x4): per map a box conv (anchors x 4) and a class conv
    (anchors x classes), each reshaped to [-1, N, 4] or [-1, N, classes] and concatenated over the maps along
    the anchors, two outputs (raw boxes, class logits); the converter writes the reshapes for a symbolic batch."""
    anchors, classes = 3, 5
    inputs = keras.Input((16, 16, 3))
    x = _conv_bn(inputs, 16, 3, strides=2)
    x = _conv_bn(x, None, 3, depthwise=True)
    first = _conv_bn(x, 16, 1)  # 8x8
    x = _conv_bn(first, None, 3, strides=2, depthwise=True)
    second = _conv_bn(x, 24, 1)  # 4x4
    boxes, scores = [], []
    for feature in (first, second):
        boxes.append(layers.Reshape((-1, 4))(layers.Conv2D(anchors * 4, 1)(feature)))
        scores.append(layers.Reshape((-1, classes))(layers.Conv2D(anchors * classes, 1)(feature)))
    return keras.Model(inputs, [layers.Concatenate(axis=1)(boxes), layers.Concatenate(axis=1)(scores)])


def ssd_flat_head() -> keras.Model:
    """The SSD head with the batch merged into the anchors (`ops.reshape(x, (-1, 4))`, as TensorFlow's object
    detection API flattens box encodings): the converter writes [-1, 4] (the -1 no batch) for the reshapes,
    their CONCATENATION along axis 0, and the sigmoid (LOGISTIC) of the class scores."""
    anchors, classes = 3, 5
    inputs = keras.Input((16, 16, 3))
    x = _conv_bn(inputs, 16, 3, strides=2)
    first = _conv_bn(x, 16, 1)  # 8x8
    x = _conv_bn(first, None, 3, strides=2, depthwise=True)
    second = _conv_bn(x, 24, 1)  # 4x4
    boxes, scores = [], []
    for feature in (first, second):
        boxes.append(keras.ops.reshape(layers.Conv2D(anchors * 4, 1)(feature), (-1, 4)))
        scores.append(keras.ops.reshape(layers.Conv2D(anchors * classes, 1)(feature), (-1, classes)))
    scores = layers.Activation("sigmoid")(keras.ops.concatenate(scores, axis=0))
    return keras.Model(inputs, [keras.ops.concatenate(boxes, axis=0), scores])


# name -> (builder, float input and output)
MODELS = {
    "mobilenet_v2": (mobilenet_v2, False),
    "mobilenet_v3_small_minimalistic": (mobilenet_v3_small_minimalistic, False),
    "mobilenet_v3_small": (mobilenet_v3_small, False),
    "efficientnet_lite_block": (efficientnet_lite_block, False),
    "two_head_detector": (two_head_detector, False),
    "two_head_detector_float_io": (two_head_detector, True),
    "kws_conv1d": (kws_conv1d, False),
    "shufflenet_block": (shufflenet_block, False),
    "grouped_conv": (grouped_conv, False),
    "flatten_dense": (flatten_dense, False),
    "dense_to_map": (dense_to_map, False),
    "conv1d_flatten": (conv1d_flatten, False),
    "maximum_minimum": (maximum_minimum, False),
    "transpose_conv": (transpose_conv, False),
    "segmentation_head": (segmentation_head, False),
    "resnet_v2_shortcut": (resnet_v2_shortcut, False),
    "strided_subsample_input": (strided_subsample_input, False),
    "binary_classifier": (binary_classifier, False),
    "one_value_regressor": (one_value_regressor, False),
    "grouped_conv_shapes": (grouped_conv_shapes, False),
    "grouped_conv_output": (grouped_conv_output, False),
    "ssd_head": (ssd_head, False),
    "ssd_flat_head": (ssd_flat_head, False),
}


def _randomize_statistics(model: keras.Model, rng: np.random.Generator) -> None:
    """BatchNorm statistics and biases as a trained model has them (Keras initializes them to the identity and 0)."""
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            weights = layer.get_weights()
            if len(weights) != 4:
                raise ValueError(f"{layer.name}: expected gamma, beta, mean, variance")
            gamma, beta, mean, variance = weights
            layer.set_weights([rng.uniform(0.5, 1.5, gamma.shape), rng.normal(0, 0.2, beta.shape),
                               rng.normal(0, 0.2, mean.shape), rng.uniform(0.5, 2.0, variance.shape)])
        elif getattr(layer, "use_bias", False) and len(layer.get_weights()) == 2:
            kernel, bias = layer.get_weights()
            layer.set_weights([kernel, rng.normal(0, 0.2, bias.shape)])


def to_tflite(model: keras.Model, rng: np.random.Generator, float_io: bool = False, images: int = 32) -> bytes:
    """Full-integer int8 quantization calibrated on `images` seeded inputs of mean 0 and deviation 1."""
    shape = (1,) + tuple(model.input_shape[1:])
    samples = [rng.normal(0, 1, shape).astype(np.float32) for _ in range(images)]
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([s] for s in samples)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if not float_io:
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    return converter.convert()


def use_one_thread() -> None:
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)


def seeded_tflite(build: Callable[[], keras.Model], seed: int, float_io: bool = False, images: int = 32,
                  set_statistics: Callable[[keras.Model, np.random.Generator], None] = _randomize_statistics) -> bytes:
    """`build()`'s model with weights and statistics drawn from `seed`, converted by `to_tflite`; the Keras session
    is cleared after it, so that layer names do not depend on the models built before."""
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    model = build()
    set_statistics(model, rng)
    tflite = to_tflite(model, rng, float_io, images)
    keras.backend.clear_session()
    return tflite


def main(out: Path, names: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    use_one_thread()
    for name in names or list(MODELS):
        build, float_io = MODELS[name]
        tflite = seeded_tflite(build, SEED, float_io)
        (out / f"{name}.tflite").write_bytes(tflite)
        print(f"{name}: {len(tflite)} bytes")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR [NAME ...]  (names: {', '.join(MODELS)})")
    main(Path(sys.argv[1]), sys.argv[2:])
