"""Writes tests/data/detectors/tiny_yolo_*.onnx: small int8 QDQ detectors shaped like tiny-YOLOv3.

Blocks of Conv + BatchNormalization + an element-wise activation (LeakyRelu(alpha=0.1) as in YOLO, or
HardSwish, Tanh, HardSigmoid), MaxPools, two heads, a 2x nearest Resize of the deeper map and a Concat of it
with a shallower block's output (the skip, which feeds a MaxPool too). Random seeded weights and
BatchNormalization statistics; `quant_pre_process` folds the BatchNormalizations into the convolutions and
`quantize_static` quantizes the rest (QDQ, int8 activations and weights, per-channel weights) on seeded
standard-normal inputs. The quantizer wraps LeakyRelu and HardSwish in DequantizeLinear -> op ->
QuantizeLinear; it leaves Tanh and HardSigmoid float, and the MaxPool or Resize after them, quantized only
after it. Input 64x64, except `tiny_yolo_leaky_32.onnx` (32x32: its deep map is 1x1, so the upsampling
broadcasts one pixel). Run with ming's venv (onnx, onnxruntime only):

    .venv/bin/python tests/generators/tiny_yolo_models.py [tiny_yolo_leaky.onnx ...]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process

OUT = Path(__file__).resolve().parents[1] / "data" / "detectors"
SEED = 44
# the activation of every block: its name in the files -> (ONNX op, attributes)
ACTIVATIONS = {
    "leaky": ("LeakyRelu", {"alpha": 0.1}),
    "hardswish": ("HardSwish", {}),
    "tanh": ("Tanh", {}),
    "hardsigmoid": ("HardSigmoid", {}),
}
# file -> (activation, input size); at 32 the deep map is 1x1 and IREE writes its upsampling as a broadcast
MODELS = {f"tiny_yolo_{activation}.onnx": (activation, 64) for activation in ACTIVATIONS}
MODELS["tiny_yolo_leaky_32.onnx"] = ("leaky", 32)


class _Builder:
    """Nodes, initializers and fresh names of one float graph."""

    def __init__(self, seed: int, activation: str, attributes: dict):
        self.nodes, self.initializers = [], []
        self.rng = np.random.default_rng(seed)
        self.count = 0
        self.activation, self.attributes = activation, attributes

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def constant(self, stem: str, value) -> str:
        name = self.name(stem)
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs, stem: str | None = None, **attributes) -> str:
        name = self.name(stem or op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [name], name=name, **attributes))
        return name

    def conv(self, x: str, cin: int, cout: int, kernel: int, stem: str, bias: bool = False) -> str:
        weights = self.rng.standard_normal((cout, cin, kernel, kernel)) / np.sqrt(cin * kernel * kernel)
        inputs = [x, self.constant(f"{stem}_w", weights.astype(np.float32))]
        if bias:
            inputs.append(self.constant(f"{stem}_b", (self.rng.standard_normal(cout) * 0.1).astype(np.float32)))
        return self.node("Conv", inputs, stem, kernel_shape=[kernel, kernel], pads=[kernel // 2] * 4)

    def block(self, x: str, cin: int, cout: int, kernel: int, stem: str) -> str:
        """Conv (no bias) + BatchNormalization + the activation."""
        y = self.conv(x, cin, cout, kernel, stem)
        statistics = [self.constant(f"{stem}_{part}", value.astype(np.float32)) for part, value in (
            ("gamma", 1 + 0.2 * self.rng.standard_normal(cout)), ("beta", 0.2 * self.rng.standard_normal(cout)),
            ("mean", 0.1 * self.rng.standard_normal(cout)), ("var", 1 + 0.2 * self.rng.random(cout)))]
        y = self.node("BatchNormalization", [y] + statistics, f"{stem}_bn", epsilon=1e-5)
        return self.node(self.activation, [y], f"{stem}_act", **self.attributes)

    def maxpool(self, x: str, stride: int) -> str:
        if stride == 1:  # tiny-YOLOv3's last pool keeps the size: 2x2 window, right and bottom padding
            return self.node("MaxPool", [x], kernel_shape=[2, 2], strides=[1, 1], pads=[0, 0, 1, 1])
        return self.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])


def tiny_yolo(activation: str, attributes: dict, size: int) -> onnx.ModelProto:
    """tiny-YOLOv3's layers at 8-32 channels: five blocks each followed by a 2x2 MaxPool of stride 2 (at a
    64x64 input: maps 32, 16, 8, 4, 2), the fifth block's output (4x4) kept for the skip; a block and the 2x2
    MaxPool of stride 1 padded right and bottom; the route block; the deep head (2x2) and, from the route, a
    1x1 block upsampled 2x (nearest Resize) and concatenated with the skip before the shallow head (4x4). Each
    head has 3 anchors of 4 + 1 + 2 classes."""
    b = _Builder(SEED, activation, attributes)
    x, cin = "input", 3
    for number, cout in enumerate((8, 8, 16, 16, 24)):
        skip = b.block(x, cin, cout, 3, f"conv{number}")
        x, cin = b.maxpool(skip, 2), cout
    route = b.block(b.block(b.maxpool(b.block(x, 24, 32, 3, "conv5"), 1), 32, 32, 3, "conv6"), 32, 16, 1, "conv7")
    heads = 3 * (4 + 1 + 2)
    deep = b.conv(b.block(route, 16, 32, 3, "conv8"), 32, heads, 1, "head_deep", bias=True)
    up = b.node("Resize", [b.block(route, 16, 8, 1, "conv9"), "", b.constant("scales", np.array(
        [1, 1, 2, 2], np.float32))], "upsample", mode="nearest")
    joined = b.node("Concat", [up, skip], "route", axis=1)
    shallow = b.conv(b.block(joined, 8 + 24, 24, 3, "conv10"), 24, heads, 1, "head_shallow", bias=True)
    b.nodes.append(helper.make_node("Identity", [deep], ["deep"], name="deep_output"))
    b.nodes.append(helper.make_node("Identity", [shallow], ["shallow"], name="shallow_output"))
    graph = helper.make_graph(
        b.nodes, "tiny_yolo", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("deep", TensorProto.FLOAT, [1, heads, size // 32, size // 32]),
         helper.make_tensor_value_info("shallow", TensorProto.FLOAT, [1, heads, size // 16, size // 16])],
        b.initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])  # HardSwish needs 14


def quantize(model: onnx.ModelProto, out: Path, samples: int = 8) -> Path:
    """BatchNormalization folded, then int8 QDQ (per-channel weights) calibrated on seeded standard-normal inputs."""
    rng = np.random.default_rng(SEED)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    data = iter([{"input": rng.standard_normal(shape).astype(np.float32)} for _ in range(samples)])

    class Reader(CalibrationDataReader):
        def get_next(self):
            return next(data, None)

    with tempfile.TemporaryDirectory() as tmp:
        float_path, folded = Path(tmp) / "float.onnx", Path(tmp) / "folded.onnx"
        onnx.save(model, str(float_path))
        quant_pre_process(str(float_path), str(folded), skip_symbolic_shape=True)  # folds each BatchNormalization into its Conv
        quantize_static(str(folded), str(out), Reader(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True)
    return out


def main(names=tuple(MODELS)) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names:
        activation, size = MODELS[name]
        path = quantize(tiny_yolo(*ACTIVATIONS[activation], size), OUT / name)
        print(path.name, path.stat().st_size, "bytes", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:] or tuple(MODELS))
