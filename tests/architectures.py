"""The edge-CNN families users bring, small enough for CI: float models from seeded random weights, built
with the test zoo's layer builder (tests/zoo.py) and quantized by its `quantize_float_model` in each format
onnxruntime's quantizer writes (QDQ int8, QDQ uint8, QOperator).

    import architectures
    path = architectures.quantized("mobilenet_v2", "qdq_uint8", tmp_path)
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Callable

import onnx

import zoo


@dataclass(frozen=True)
class Architecture:
    name: str
    input_shape: tuple[int, ...]
    build: Callable[[], onnx.ModelProto]  # the float model
    what: str  # what the network exercises, for the coverage table


ARCHITECTURES: dict[str, Architecture] = {}

# quantize_static's format and activation type per format (int8 weights, per channel)
FORMATS = {
    "qdq_int8": {"quant_format": "QDQ", "activation_type": "QInt8"},
    "qdq_uint8": {"quant_format": "QDQ", "activation_type": "QUInt8"},
    "qoperator_int8": {"quant_format": "QOperator", "activation_type": "QInt8"},
    "qoperator_uint8": {"quant_format": "QOperator", "activation_type": "QUInt8"},
}


def _architecture(name: str, input_shape: tuple[int, ...], what: str):
    def register(fn: Callable[[zoo._Graph], str]):
        def build() -> onnx.ModelProto:
            g = zoo._Graph(name, input_shape)
            return g.finish(fn(g))

        ARCHITECTURES[name] = Architecture(name, input_shape, build, what)
        return fn

    return register


def _inverted_residual(g: zoo._Graph, x: str, prefix: str, cout: int, stride: int, expand: int) -> str:
    """MobileNetV2's block: 1x1 expansion + ReLU6, 3x3 depthwise + ReLU6, linear 1x1 projection, and the
    residual add when the shape is kept."""
    cin = g.shapes[x][1]
    hidden = cin * expand
    h = g.clip(g.conv(x, f"{prefix}_expand", hidden, kernel=1), f"{prefix}_relu6a")
    h = g.clip(g.conv(h, f"{prefix}_dw", hidden, stride=stride, pads=1, group=hidden), f"{prefix}_relu6b")
    h = g.conv(h, f"{prefix}_project", cout, kernel=1)
    return g.add(h, x, f"{prefix}_add") if stride == 1 and cin == cout else h


@_architecture("mobilenet_v2", (1, 3, 16, 16), "ReLU6, inverted residuals, depthwise")
def _(g):
    h = g.clip(g.conv("x", "stem", 8, stride=2, pads=1), "stem_relu6")
    for i, (cout, stride) in enumerate([(8, 1), (12, 2), (12, 1)]):
        h = _inverted_residual(g, h, f"block{i}", cout, stride, expand=2 if i else 1)
    h = g.clip(g.conv(h, "head", 24, kernel=1), "head_relu6")
    return g.gemm(g.flatten(g.gap(h, "gap"), "flatten"), "classifier", 10)


def quantized(name: str, fmt: str, directory: pathlib.Path, per_channel: bool = True) -> pathlib.Path:
    """Architecture `name` quantized in format `fmt` (a key of FORMATS) at <directory>/<name>_<fmt>.onnx."""
    arch = ARCHITECTURES[name]
    out = pathlib.Path(directory) / f"{name}_{fmt}.onnx"
    return zoo.quantize_float_model(arch.build(), out, arch.input_shape, per_channel, **FORMATS[fmt])
