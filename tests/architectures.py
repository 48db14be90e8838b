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
    layers: Callable[[zoo._Graph], str | list[str]]  # builds the float model's layers, returns its outputs
    what: str  # what the network exercises, for the coverage table

    def shape(self, size: int | None = None) -> tuple[int, ...]:
        """The input shape, with maps of `size` x `size` if given."""
        return self.input_shape if size is None else (*self.input_shape[:2], size, size)

    def build(self, size: int | None = None) -> onnx.ModelProto:
        """The float model (input maps of `size` x `size` if given)."""
        g = zoo._Graph(self.name, self.shape(size))
        return g.finish(self.layers(g))


ARCHITECTURES: dict[str, Architecture] = {}

# Formats in which onnxruntime's quantizer leaves part of an architecture in float, and the node ming names
# when it refuses the model: the QOperator writer has no quantized HardSwish, so the squeeze-and-excitation's
# GlobalAveragePool reads the float HardSwish output.
LEFT_IN_FLOAT = {("mobilenet_v3_small", "qoperator_int8"): "block2_act_b",
                 ("mobilenet_v3_small", "qoperator_uint8"): "block2_act_b"}

# quantize_static's format and activation type per format (int8 weights, per channel)
FORMATS = {
    "qdq_int8": {"quant_format": "QDQ", "activation_type": "QInt8"},
    "qdq_uint8": {"quant_format": "QDQ", "activation_type": "QUInt8"},
    "qoperator_int8": {"quant_format": "QOperator", "activation_type": "QInt8"},
    "qoperator_uint8": {"quant_format": "QOperator", "activation_type": "QUInt8"},
}


def _architecture(name: str, input_shape: tuple[int, ...], what: str):
    def register(fn: Callable[[zoo._Graph], str | list[str]]):
        ARCHITECTURES[name] = Architecture(name, input_shape, fn, what)
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


def _leaky(g: zoo._Graph, x: str, name: str) -> str:
    return g.unary(x, "LeakyRelu", name, alpha=0.1)


def _squeeze_excite(g: zoo._Graph, x: str, prefix: str) -> str:
    """MobileNetV3's squeeze-and-excitation: global average pool, 1x1 reduce + ReLU, 1x1 expand, HardSigmoid
    gate, times the map."""
    channels = g.shapes[x][1]
    h = g.relu(g.conv(g.gap(x, f"{prefix}_squeeze"), f"{prefix}_reduce", max(channels // 4, 4), kernel=1),
               f"{prefix}_relu")
    gate = g.unary(g.conv(h, f"{prefix}_expand", channels, kernel=1), "HardSigmoid", f"{prefix}_gate")
    return g.mul(x, gate, f"{prefix}_excite")


def _bneck(g: zoo._Graph, x: str, prefix: str, hidden: int, cout: int, kernel: int, stride: int,
           activation: str, se: bool) -> str:
    """MobileNetV3's block: 1x1 expansion, k x k depthwise, optional squeeze-and-excitation, linear 1x1
    projection, residual add when the shape is kept."""
    def act(h: str, name: str) -> str:
        return g.relu(h, name) if activation == "relu" else g.unary(h, "HardSwish", name)

    cin = g.shapes[x][1]
    h = act(g.conv(x, f"{prefix}_expand", hidden, kernel=1), f"{prefix}_act_a") if hidden != cin else x
    h = act(g.conv(h, f"{prefix}_dw", hidden, kernel=kernel, stride=stride, pads=kernel // 2, group=hidden),
            f"{prefix}_act_b")
    if se:
        h = _squeeze_excite(g, h, f"{prefix}_se")
    h = g.conv(h, f"{prefix}_project", cout, kernel=1)
    return g.add(h, x, f"{prefix}_add") if stride == 1 and cin == cout else h


@_architecture("mobilenet_v3_small", (1, 3, 16, 16), "HardSwish, squeeze-and-excitation (HardSigmoid, Mul)")
def _(g):
    h = g.unary(g.conv("x", "stem", 8, stride=2, pads=1), "HardSwish", "stem_hswish")
    h = _bneck(g, h, "block0", 8, 8, 3, 2, "relu", se=True)
    h = _bneck(g, h, "block1", 24, 12, 3, 1, "relu", se=False)
    h = _bneck(g, h, "block2", 24, 12, 5, 1, "hswish", se=True)
    h = g.unary(g.conv(h, "head", 24, kernel=1), "HardSwish", "head_hswish")
    h = g.unary(g.gemm(g.flatten(g.gap(h, "gap"), "flatten"), "fc", 32), "HardSwish", "fc_hswish")
    return g.gemm(h, "classifier", 10)


def _shuffle_unit(g: zoo._Graph, x: str, prefix: str, cout: int, stride: int) -> str:
    """ShuffleNetV2's unit: stride 1 splits the channels in two halves (one passes, the other runs 1x1, 3x3
    depthwise, 1x1), stride 2 runs both branches on the whole map; concatenation, then a shuffle of 2 groups."""
    half = cout // 2
    if stride == 1:
        keep, x = g.split(x, f"{prefix}_split", [g.shapes[x][1] // 2] * 2)
    else:
        keep = g.conv(x, f"{prefix}_left_dw", g.shapes[x][1], stride=2, pads=1, group=g.shapes[x][1])
        keep = g.relu(g.conv(keep, f"{prefix}_left_pw", half, kernel=1), f"{prefix}_left_relu")
    h = g.relu(g.conv(x, f"{prefix}_pw1", half, kernel=1), f"{prefix}_relu1")
    h = g.conv(h, f"{prefix}_dw", half, stride=stride, pads=1, group=half)
    h = g.relu(g.conv(h, f"{prefix}_pw2", half, kernel=1), f"{prefix}_relu2")
    return g.channel_shuffle(g.concat([keep, h], f"{prefix}_concat"), f"{prefix}_shuffle", 2)


@_architecture("shufflenet_v2", (1, 3, 16, 16), "channel split and shuffle, grouped 1x1 convs")
def _(g):
    h = g.relu(g.conv("x", "stem", 8, stride=2, pads=1), "stem_relu")
    h = _shuffle_unit(g, h, "unit0", 16, stride=2)
    h = _shuffle_unit(g, h, "unit1", 16, stride=1)
    h = g.relu(g.conv(h, "grouped", 16, kernel=1, group=4), "grouped_relu")
    return g.gemm(g.flatten(g.gap(h, "gap"), "flatten"), "classifier", 10)


def _shuffle_v1_unit(g: zoo._Graph, x: str, prefix: str, cout: int, stride: int, groups: int = 2) -> str:
    """ShuffleNetV1's unit: grouped 1x1 conv, channel shuffle, 3x3 depthwise, grouped 1x1 conv; stride 2
    concatenates it with a 3x3 average pool of the input (the shortcut), stride 1 adds the input back."""
    cin = g.shapes[x][1]
    bottleneck = cout // 4
    h = g.relu(g.conv(x, f"{prefix}_g1", bottleneck, kernel=1, group=groups), f"{prefix}_relu1")
    h = g.channel_shuffle(h, f"{prefix}_shuffle", groups)
    h = g.conv(h, f"{prefix}_dw", bottleneck, stride=stride, pads=1, group=bottleneck)
    h = g.conv(h, f"{prefix}_g2", cout - cin if stride == 2 else cout, kernel=1, group=groups)
    if stride == 2:
        shortcut = g.avgpool(x, f"{prefix}_shortcut", kernel=3, stride=2, pads=1)
        return g.relu(g.concat([shortcut, h], f"{prefix}_concat"), f"{prefix}_relu")
    return g.relu(g.add(x, h, f"{prefix}_add"), f"{prefix}_relu")


@_architecture("shufflenet_v1", (1, 3, 16, 16), "AveragePool shortcut, residual Add, grouped 1x1 convs")
def _(g):
    h = g.relu(g.conv("x", "stem", 8, stride=2, pads=1), "stem_relu")  # 8 x 8
    h = _shuffle_v1_unit(g, h, "unit0", 16, stride=2)  # 4 x 4
    h = _shuffle_v1_unit(g, h, "unit1", 16, stride=1)
    return g.gemm(g.flatten(g.gap(h, "gap"), "flatten"), "classifier", 10)


@_architecture("yolo_tiny", (1, 3, 16, 16), "LeakyRelu, Resize, Concat, two outputs")
def _(g):
    h = g.maxpool(_leaky(g, g.conv("x", "conv0", 8, pads=1), "leaky0"), "pool0")
    route = _leaky(g, g.conv(h, "conv1", 16, pads=1), "leaky1")  # 8 x 8
    h = _leaky(g, g.conv(g.maxpool(route, "pool1"), "conv2", 32, pads=1), "leaky2")  # 4 x 4
    coarse = g.conv(h, "head_coarse", 12, kernel=1)
    h = g.resize(_leaky(g, g.conv(h, "lateral", 8, kernel=1), "leaky3"), "upsample", scales=(2, 2))
    h = _leaky(g, g.conv(g.concat([h, route], "route"), "conv3", 16, pads=1), "leaky4")
    return [coarse, g.conv(h, "head_fine", 12, kernel=1)]


@_architecture("unet", (1, 3, 16, 16), "encoder-decoder: Resize, skip Concat")
def _(g):
    e1 = g.relu(g.conv("x", "enc1", 8, pads=1), "enc1_relu")  # 16 x 16
    e2 = g.relu(g.conv(g.maxpool(e1, "down1"), "enc2", 16, pads=1), "enc2_relu")  # 8 x 8
    h = g.relu(g.conv(g.maxpool(e2, "down2"), "bottleneck", 16, pads=1), "bottleneck_relu")  # 4 x 4
    h = g.concat([g.resize(h, "up2"), e2], "skip2")
    h = g.relu(g.conv(h, "dec2", 16, pads=1), "dec2_relu")
    h = g.concat([g.resize(h, "up1"), e1], "skip1")
    h = g.relu(g.conv(h, "dec1", 8, pads=1), "dec1_relu")
    return g.conv(h, "segment", 4, kernel=1)


def quantized(name: str, fmt: str, directory: pathlib.Path, per_channel: bool = True,
              size: int | None = None) -> pathlib.Path:
    """Architecture `name` quantized in format `fmt` (a key of FORMATS) at <directory>/<name>_<fmt>.onnx
    (<name>_<size>_<fmt>.onnx with input maps of `size` x `size`)."""
    arch = ARCHITECTURES[name]
    out = pathlib.Path(directory) / f"{name}{'' if size is None else f'_{size}'}_{fmt}.onnx"
    return zoo.quantize_float_model(arch.build(size), out, arch.shape(size), per_channel, **FORMATS[fmt])
