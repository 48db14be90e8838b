"""The DSE benchmark networks: float models from seeded random weights, int8 QDQ-quantized.

* ``resnet24_32`` -- 24 3x3 convolutions at 32x32: three stages (16, 32, 64
  channels) of an entry conv, three residual blocks and an exit conv, max-pools
  between stages, global average pool, a 10-way Gemm;
* ``vgg13_224`` -- VGG-13's ten convolutions and five max-pools at 224x224; the
  classifier is a global average pool and one 512 -> 1000 Gemm (VGG's 120 M
  weight fully connected head cannot sit in on-chip ROMs);
* ``mobilenet_v1_224`` -- MobileNetV1-1.0 at 224x224: a strided 3x3 conv, 13
  depthwise-separable blocks with ReLU6, global average pool, 1000-way Gemm;

and three shaped like MLPerf Tiny's reference models (batch norm folded away,
no final softmax, no dropout):

* ``resnet8_32`` -- ResNet-8 for CIFAR-10 (image classification) at 32x32x3: a
  3x3 conv (16) + ReLU, three residual stages of one block of two 3x3 convs (16,
  32, 64 channels; stages 2 and 3 open with a stride-2 3x3 conv and a stride-2
  1x1 projection on the skip), global average pool (Keras' 8x8 AveragePooling2D
  on the 8x8 map), a 10-way Gemm.  Pads are TF 'same': [0, 0, 1, 1] for the
  stride-2 3x3 convs, 1 on every side for the others;
* ``ds_cnn_49x10`` -- DS-CNN (keyword spotting) on 49x10x1 MFCCs: a 10x4 conv
  (64), stride 2, TF 'same' pads [4, 1, 5, 1] (-> 25x5) + ReLU, four
  depthwise-separable blocks (3x3 depthwise + ReLU, 1x1 conv 64 + ReLU), global
  average pool (Keras' 25x5 AveragePooling2D), a 12-way Gemm;
* ``mobilenet_v1_025_96`` -- MobileNetV1 alpha 0.25 at 96x96x3 (visual wake
  words): ``mobilenet_v1_224``'s layers (symmetric pads of 1, ReLU6) with a
  quarter of the channels (8, 16, 32, 32, 64, 64, 128, 128 x5, 256, 256) and a
  2-way Gemm;
* ``autoencoder_640`` -- the anomaly-detection autoencoder (machine sounds) on
  640 log-mel values: Gemm 128 + ReLU four times, a Gemm 8 + ReLU bottleneck,
  Gemm 128 + ReLU four times and a 640-way Gemm;

and two large ones to bound the ILP's time and memory:

* ``resnet56_32`` -- ResNet-56 for CIFAR-10 at 32x32x3: ``resnet8_32``'s
  layers with nine blocks a stage instead of one (the stride-2 block and its
  1x1 projection open stages 2 and 3), 0.85 M weights and 113 processes (each
  block's two convs, its add and the fork of its input). Its least parallel
  design needs 91,000 LUTs, most of them the processes' control, more than the
  KV260's budget: it is explored on the U50;

* ``convstack_1024`` -- two 3x3 convs (3 -> 8 -> 8, pads 1, ReLU) at 1024x1024, a
  global average pool and a 10-way Gemm (1.9e7 values streamed per image, within
  ming's 2.4e7: ming_py/limits.py).

The layer builder and the quantizer are the test zoo's (tests/zoo.py), so the
models are built exactly like the test models: same calibration, byte-identical
files on every run.

    python benchmarks/networks.py OUT_DIR   # writes every network's .onnx file
"""

from __future__ import annotations

import math
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import zoo  # noqa: E402

MOBILENET_BLOCKS = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + \
    [(1024, 2), (1024, 1)]
VGG13_STAGES = [64, 128, 256, 512, 512]


def same_pads(g, x: str, kernel, stride) -> list[int]:
    """TF/Keras padding='same' for a conv on tensor `x`: [top, left, bottom, right], the odd pixel at the end."""
    _, _, h, w = g.shapes[x]
    pads = []
    for size, k, s in zip((h, w), zoo._pair(kernel), zoo._pair(stride)):
        total = max((math.ceil(size / s) - 1) * s + k - size, 0)
        pads.append((total // 2, total - total // 2))
    (top, bottom), (left, right) = pads
    return [top, left, bottom, right]


def resnet8(g, blocks: int = 1, widths: tuple[int, int, int] = (16, 32, 64)) -> str:
    """ResNet-8; ResNet-(6 `blocks` + 2) with `blocks` residual blocks a stage, of `widths` channels."""
    h = g.relu(g.conv("x", "conv0", widths[0], pads=same_pads(g, "x", 3, 1)), "conv0_relu")
    for stage, channels in enumerate(widths, start=1):
        for block in range(blocks):
            h = residual_block(g, h, channels, 2 if stage > 1 and block == 0 else 1,
                               f"s{stage}" if blocks == 1 else f"s{stage}_b{block + 1}")
    return g.gemm(g.flatten(g.gap(h, "gap"), "flatten"), "fc", 10)


def residual_block(g, h: str, channels: int, stride: int, name: str) -> str:
    """Two 3x3 convs beside the block's input (through a 1x1 projection where the block is strided), added."""
    branch = g.relu(g.conv(h, f"{name}_conv1", channels, stride=stride, pads=same_pads(g, h, 3, stride)),
                    f"{name}_relu1")
    branch = g.conv(branch, f"{name}_conv2", channels, pads=same_pads(g, branch, 3, 1))
    skip = h if stride == 1 else g.conv(h, f"{name}_proj", channels, kernel=1, stride=stride,
                                        pads=same_pads(g, h, 1, stride))
    return g.relu(g.add(branch, skip, f"{name}_add"), f"{name}_relu2")


def ds_cnn(g) -> str:
    h = g.relu(g.conv("x", "conv0", 64, kernel=(10, 4), stride=2, pads=same_pads(g, "x", (10, 4), 2)), "conv0_relu")
    for i in range(1, 5):
        c = g.shapes[h][1]
        h = g.relu(g.conv(h, f"dw{i}", c, pads=same_pads(g, h, 3, 1), group=c), f"dw{i}_relu")
        h = g.relu(g.conv(h, f"pw{i}", 64, kernel=1), f"pw{i}_relu")
    return g.gemm(g.flatten(g.gap(h, "gap"), "flatten"), "fc", 12)


def autoencoder(g) -> str:
    h = "x"
    for i, width in enumerate([128] * 4 + [8] + [128] * 4, start=1):
        h = g.relu(g.gemm(h, f"fc{i}", width), f"fc{i}_relu")
    return g.gemm(h, "fc_out", 640)


def convstack(g) -> str:
    h = "x"
    for i in range(1, 3):
        h = g.relu(g.conv(h, f"conv{i}", 8, pads=1), f"conv{i}_relu")
    return g.gemm(g.flatten(g.gap(h, "gap"), "flatten"), "fc", 10)


def resnet24(g) -> str:
    h = "x"
    for stage, channels in enumerate((16, 32, 64), start=1):
        if stage > 1:
            h = g.maxpool(h, f"pool{stage}")
        h = g.relu(g.conv(h, f"s{stage}_entry", channels, pads=1), f"s{stage}_entry_relu")
        for block in range(1, 4):
            name = f"s{stage}_b{block}"
            branch = g.relu(g.conv(h, f"{name}_conv1", channels, pads=1), f"{name}_relu1")
            branch = g.conv(branch, f"{name}_conv2", channels, pads=1)
            h = g.relu(g.add(branch, h, f"{name}_add"), f"{name}_relu2")
        h = g.relu(g.conv(h, f"s{stage}_exit", channels, pads=1), f"s{stage}_exit_relu")
    return g.gemm(g.flatten(g.gap(h, "gap"), "flatten"), "fc", 10)


def vgg13(g) -> str:
    h = "x"
    for stage, channels in enumerate(VGG13_STAGES, start=1):
        for layer in (1, 2):
            h = g.relu(g.conv(h, f"conv{stage}_{layer}", channels, pads=1), f"relu{stage}_{layer}")
        h = g.maxpool(h, f"pool{stage}")
    return g.gemm(g.flatten(g.gap(h, "gap"), "flatten"), "fc", 1000)


def mobilenet_v1(g, alpha: float = 1.0, classes: int = 1000) -> str:
    h = g.clip(g.conv("x", "conv0", int(32 * alpha), stride=2, pads=1), "conv0_relu6")
    for i, (channels, stride) in enumerate(MOBILENET_BLOCKS, start=1):
        c = g.shapes[h][1]
        h = g.clip(g.conv(h, f"dw{i}", c, stride=stride, pads=1, group=c), f"dw{i}_relu6")
        h = g.clip(g.conv(h, f"pw{i}", int(channels * alpha), kernel=1), f"pw{i}_relu6")
    return g.gemm(g.flatten(g.gap(h, "gap"), "flatten"), "fc", classes)


NETWORKS = {
    "resnet8_32": (resnet8, (1, 3, 32, 32)),
    "ds_cnn_49x10": (ds_cnn, (1, 1, 49, 10)),
    "mobilenet_v1_025_96": (partial(mobilenet_v1, alpha=0.25, classes=2), (1, 3, 96, 96)),
    "autoencoder_640": (autoencoder, (1, 640)),
    "convstack_1024": (convstack, (1, 3, 1024, 1024)),
    "resnet56_32": (partial(resnet8, blocks=9), (1, 3, 32, 32)),
    "resnet24_32": (resnet24, (1, 3, 32, 32)),
    "vgg13_224": (vgg13, (1, 3, 224, 224)),
    "mobilenet_v1_224": (mobilenet_v1, (1, 3, 224, 224)),
}


def float_model(name: str):
    layers, shape = NETWORKS[name]
    g = zoo._Graph(name, shape)
    return g.finish(layers(g))


def quantized(name: str, directory: Path) -> Path:
    """`<directory>/<name>.onnx`, quantized per channel; reused when it is already there."""
    path = Path(directory) / f"{name}.onnx"
    if not path.exists():
        zoo.quantize_float_model(float_model(name), path, NETWORKS[name][1], per_channel=True)
    return path


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
    for name in NETWORKS:
        print(quantized(name, out))


if __name__ == "__main__":
    main()
