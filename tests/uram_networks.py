"""ImageNet-size edge networks whose weights outgrow the KV260's BRAM (288 BRAM18K, 5.3 Mbit): they fit only
with weights in URAM (`ming_py.weights_load`) or LUTRAM. Float models from seeded random weights, built with
the test zoo's layer builder (tests/zoo.py) and quantized by onnxruntime's quantizer (int8 QDQ, per-channel
weights); `benchmarks/uram_networks.py` builds them for the KV260, and tests/test_uram_weights.py a small
network of the same blocks.

    import uram_networks
    path = uram_networks.quantized("mobilenet_v2_035", tmp_path)            # 128 x 128, 1000 classes
    path = uram_networks.quantized("mobilenet_v2_035", tmp_path, size=32, classes=10, width=0.25)
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Callable

import onnx

import zoo


def divisible(channels: float, divisor: int = 8) -> int:
    """MobileNet's `_make_divisible`: the nearest multiple of `divisor`, never below 90 % of `channels`."""
    result = max(divisor, int(channels + divisor / 2) // divisor * divisor)
    return result + divisor if result < 0.9 * channels else result


def _inverted_residual(g: zoo._Graph, x: str, prefix: str, cout: int, stride: int, expand: int,
                       kernel: int = 3) -> str:
    """MobileNetV2's (and EfficientNet-lite's MBConv) block: 1x1 expansion + ReLU6 (none at expand 1),
    k x k depthwise + ReLU6, linear 1x1 projection, the residual add where the shape is kept."""
    cin = g.shapes[x][1]
    hidden = cin * expand
    h = g.clip(g.conv(x, f"{prefix}_expand", hidden, kernel=1), f"{prefix}_relu6a") if expand != 1 else x
    h = g.clip(g.conv(h, f"{prefix}_dw", hidden, kernel=kernel, stride=stride, pads=kernel // 2, group=hidden),
               f"{prefix}_relu6b")
    h = g.conv(h, f"{prefix}_project", cout, kernel=1)
    return g.add(h, x, f"{prefix}_add") if stride == 1 and cin == cout else h


def _classifier(g: zoo._Graph, h: str, classes: int) -> str:
    return g.gemm(g.flatten(g.gap(h, "gap"), "flatten"), "classifier", classes)


# MobileNetV2 (Sandler et al. 2018, Table 2): expansion t, channels c, repeats n, first stride s
MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))


def mobilenet_v2(g: zoo._Graph, width: float, classes: int) -> str:
    """MobileNetV2 at width multiplier `width`: stem 3x3/2, the seven stages, a 1x1 head of 1280 channels (kept
    at widths below 1, as the reference implementation does), global average pool, the classifier."""
    h = g.clip(g.conv("x", "stem", divisible(32 * width), stride=2, pads=1), "stem_relu6")
    block = 0
    for t, c, n, s in MOBILENET_V2:
        for i in range(n):
            h = _inverted_residual(g, h, f"block{block}", divisible(c * width), s if i == 0 else 1, t)
            block += 1
    head = divisible(1280 * width) if width > 1.0 else 1280
    h = g.clip(g.conv(h, "head", head, kernel=1), "head_relu6")
    return _classifier(g, h, classes)


def _fire(g: zoo._Graph, x: str, prefix: str, squeeze: int, expand: int) -> str:
    """SqueezeNet's fire module: 1x1 squeeze + ReLU, then 1x1 and 3x3 expansions + ReLU, concatenated."""
    s = g.relu(g.conv(x, f"{prefix}_squeeze", squeeze, kernel=1), f"{prefix}_squeeze_relu")
    e1 = g.relu(g.conv(s, f"{prefix}_expand1x1", expand, kernel=1), f"{prefix}_expand1x1_relu")
    e3 = g.relu(g.conv(s, f"{prefix}_expand3x3", expand, kernel=3, pads=1), f"{prefix}_expand3x3_relu")
    return g.concat([e1, e3], f"{prefix}_concat")


# SqueezeNet 1.1 (torchvision's squeezenet1_1): (squeeze, expand) per fire module, a max pool before 3 and 5
SQUEEZENET_FIRES = ((16, 64), (16, 64), (32, 128), (32, 128), (48, 192), (48, 192), (64, 256), (64, 256))


def squeezenet_1_1(g: zoo._Graph, width: float, classes: int) -> str:
    """SqueezeNet 1.1: 3x3/2 conv + ReLU, max pool 3/2, fire 2-3, max pool, fire 4-5, max pool, fire 6-9,
    1x1 classifier conv + ReLU, global average pool (channels scaled by `width`)."""
    h = g.relu(g.conv("x", "conv1", divisible(64 * width), stride=2), "conv1_relu")
    h = g.maxpool(h, "pool1", kernel=3, stride=2, ceil_mode=1)
    for i, (squeeze, expand) in enumerate(SQUEEZENET_FIRES):
        if i in (2, 4):
            h = g.maxpool(h, f"pool{i // 2 + 1}", kernel=3, stride=2, ceil_mode=1)
        h = _fire(g, h, f"fire{i + 2}", divisible(squeeze * width), divisible(expand * width))
    h = g.relu(g.conv(h, "conv10", classes, kernel=1), "conv10_relu")
    return g.flatten(g.gap(h, "gap"), "flatten")


# EfficientNet-lite0 (Tan & Le 2019, Table 1; lite: ReLU6, no squeeze-and-excitation, stem and head kept):
# expansion, channels, repeats, first stride, kernel
EFFICIENTNET_LITE = ((1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3), (6, 112, 3, 1, 5),
                     (6, 192, 4, 2, 5), (6, 320, 1, 1, 3))


def efficientnet_lite(g: zoo._Graph, width: float, classes: int) -> str:
    """EfficientNet-lite at width multiplier `width`: stem 3x3/2 of 32 channels, MBConv stages (3x3 and 5x5
    depthwise, ReLU6, no squeeze-and-excitation), a 1x1 head of 1280 channels, global average pool, the
    classifier."""
    h = g.clip(g.conv("x", "stem", 32, stride=2, pads=1), "stem_relu6")
    block = 0
    for t, c, n, s, k in EFFICIENTNET_LITE:
        for i in range(n):
            h = _inverted_residual(g, h, f"block{block}", divisible(c * width), s if i == 0 else 1, t, k)
            block += 1
    h = g.clip(g.conv(h, "head", 1280, kernel=1), "head_relu6")
    return _classifier(g, h, classes)


@dataclass(frozen=True)
class Network:
    name: str
    layers: Callable[[zoo._Graph, float, int], str]
    width: float  # the network's width multiplier
    what: str

    def build(self, size: int = 128, classes: int = 1000, width: float | None = None) -> onnx.ModelProto:
        g = zoo._Graph(self.name, (1, 3, size, size))
        return g.finish(self.layers(g, self.width if width is None else width, classes))


NETWORKS = {
    "mobilenet_v2_035": Network("mobilenet_v2_035", mobilenet_v2, 0.35, "MobileNetV2-0.35"),
    "squeezenet_1_1": Network("squeezenet_1_1", squeezenet_1_1, 1.0, "SqueezeNet 1.1"),
    "efficientnet_lite": Network("efficientnet_lite", efficientnet_lite, 0.35, "EfficientNet-lite-style (width 0.35)"),
}


def quantized(name: str, directory: pathlib.Path, size: int = 128, classes: int = 1000,
              width: float | None = None) -> pathlib.Path:
    """Network `name` as an int8 QDQ model (per-channel weights) at <directory>/<name>_<size>.onnx."""
    network = NETWORKS[name]
    out = pathlib.Path(directory) / f"{name}_{size}.onnx"
    return zoo.quantize_float_model(network.build(size, classes, width), out, (1, 3, size, size), per_channel=True)
