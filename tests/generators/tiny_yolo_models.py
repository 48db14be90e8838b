"""Writes tests/data/detectors/tiny_yolo_*.onnx: small int8 QDQ detectors shaped like tiny-YOLOv3, one per
element-wise activation between their convolutions.

The network is imagenet_models.py's `tiny_yolo` at 1/32 of tiny-YOLOv3's channels, with LeakyRelu(alpha=0.1)
as in YOLO, or HardSwish, Tanh, HardSigmoid after every Conv + BatchNormalization: MaxPools, two heads, a 2x
nearest Resize of the deeper map and a Concat of it with a shallower block's output (the skip, which feeds a
MaxPool too), quantized by imagenet_models.py's `quantize` (QDQ, int8 activations and weights, per-channel
weights). The quantizer wraps LeakyRelu and HardSwish in DequantizeLinear -> op -> QuantizeLinear; it leaves
Tanh and HardSigmoid float, and the MaxPool or Resize after them, quantized only after it. Input 64x64, except
`tiny_yolo_leaky_32.onnx` (32x32: its deep map is 1x1, so the upsampling broadcasts one pixel). Run with
ming's venv (onnx, onnxruntime only):

    .venv/bin/python tests/generators/tiny_yolo_models.py [tiny_yolo_leaky.onnx ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

from imagenet_models import ELEMENTWISE, float_model, quantize  # this script's folder leads sys.path

OUT = Path(__file__).resolve().parents[1] / "data" / "detectors"
WIDTH = 1 / 32
# file -> (activation, input size); at 32 the deep map is 1x1 and IREE writes its upsampling as a broadcast
MODELS = {f"tiny_yolo_{activation}.onnx": (activation, 64) for activation in ELEMENTWISE}
MODELS["tiny_yolo_leaky_32.onnx"] = ("leaky", 32)


def main(names=tuple(MODELS)) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names:
        activation, size = MODELS[name]
        path = quantize(float_model("tiny_yolo", WIDTH, size, activation=activation), OUT / name)
        print(path.name, path.stat().st_size, "bytes", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:] or tuple(MODELS))
