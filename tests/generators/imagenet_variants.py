"""What the ImageNet-class generators share (imagenet_models.py writes ONNX, imagenet_tflite_models.py TFLite):
the networks' full sizes, the small variants committed for the tests, the seed and the command line. Imports no
framework, so that each generator's own environment can load it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "data" / "imagenet"
SEED = 44
# network -> (width, resolution) of the network as published (the detector at half tiny-YOLOv3's channels)
DEFAULTS = {"mobilenet_v1": (0.5, 160), "mobilenet_v2": (1.0, 224), "resnet18": (1.0, 224),
            "resnet34": (1.0, 224), "tiny_yolo": (0.5, 320)}
# the small variants committed for the tests: file stem -> (network, width, resolution, classes)
COMMITTED = {
    "mobilenet_v1_0125_64": ("mobilenet_v1", 0.125, 64, 10),
    "mobilenet_v2_010_64": ("mobilenet_v2", 0.1, 64, 10),
    "resnet18_00625_64": ("resnet18", 0.0625, 64, 10),
    "tiny_yolo_00625_64": ("tiny_yolo", 0.0625, 64, 0),
}

# write(network, width, resolution, classes, small, path)
Writer = Callable[[str, float, int, int, bool, Path], None]


def main(argv: list[str] | None, description: str, suffix: str, write: Writer) -> None:
    """`NETWORK [--width W] [--resolution R] [--classes N] [--small] -o FILE`, or `--committed`: the small
    variants into OUT, as STEM + `suffix`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("network", nargs="?", choices=sorted(DEFAULTS))
    parser.add_argument("--width", type=float, help="channel multiplier (default: the network's)")
    parser.add_argument("--resolution", type=int, help="input side R (default: the network's)")
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--small", action="store_true", help="scale MobileNetV2's last conv by α below 1 too")
    parser.add_argument("-o", "--output", type=Path)
    parser.add_argument("--committed", action="store_true", help=f"write the small variants into {OUT}")
    args = parser.parse_args(argv)
    if args.committed:
        OUT.mkdir(parents=True, exist_ok=True)
        for stem, (network, width, resolution, classes) in COMMITTED.items():
            write(network, width, resolution, classes, True, OUT / f"{stem}{suffix}")
        return
    if not args.network or not args.output:
        parser.error("give a network and -o OUTPUT, or --committed")
    width, resolution = DEFAULTS[args.network]
    write(args.network, args.width or width, args.resolution or resolution, args.classes, args.small, args.output)
