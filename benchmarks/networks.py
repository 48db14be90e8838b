"""The DSE benchmark networks: float models from seeded random weights, int8 QDQ-quantized.

* ``resnet24_32`` -- 24 3x3 convolutions at 32x32: three stages (16, 32, 64
  channels) of an entry conv, three residual blocks and an exit conv, max-pools
  between stages, global average pool, a 10-way Gemm;
* ``vgg13_224`` -- VGG-13's ten convolutions and five max-pools at 224x224; the
  classifier is a global average pool and one 512 -> 1000 Gemm (VGG's 120 M
  weight fully connected head cannot sit in on-chip ROMs);
* ``mobilenet_v1_224`` -- MobileNetV1-1.0 at 224x224: a strided 3x3 conv, 13
  depthwise-separable blocks with ReLU6, global average pool, 1000-way Gemm.

The layer builder and the quantizer are the test zoo's (tests/zoo.py), so the
models are built exactly like the test models: same calibration, byte-identical
files on every run.

    python benchmarks/networks.py OUT_DIR   # writes the three .onnx files
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import zoo  # noqa: E402

MOBILENET_BLOCKS = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + \
    [(1024, 2), (1024, 1)]
VGG13_STAGES = [64, 128, 256, 512, 512]


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


def mobilenet_v1(g) -> str:
    h = g.clip(g.conv("x", "conv0", 32, stride=2, pads=1), "conv0_relu6")
    for i, (channels, stride) in enumerate(MOBILENET_BLOCKS, start=1):
        c = g.shapes[h][1]
        h = g.clip(g.conv(h, f"dw{i}", c, stride=stride, pads=1, group=c), f"dw{i}_relu6")
        h = g.clip(g.conv(h, f"pw{i}", channels, kernel=1), f"pw{i}_relu6")
    return g.gemm(g.flatten(g.gap(h, "gap"), "flatten"), "fc", 1000)


NETWORKS = {
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
