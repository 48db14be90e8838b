"""Writes int8 QDQ ONNX models of ImageNet-class networks as users make them: float graphs with random weights and
non-trivial BatchNormalization statistics, prepared by `onnxruntime.quantization.quant_pre_process` (shape
inference, Conv + BatchNormalization folded) and quantized by `quantize_static` (QDQ, int8 activations and
weights, per-channel weights) on a few seeded random images. The output is deterministic.

Networks (NCHW input 1x3xRxR):

* `mobilenet_v1` — MobileNetV1, width multiplier α (default 0.5 at 160): depthwise-separable blocks with ReLU6
  (Clip), global average pool, a 1x1 Conv classifier and a Flatten, as the TensorFlow original ends;
* `mobilenet_v2` — MobileNetV2 (default 1.0 at 224): inverted residuals (expansion 6) with ReLU6, residual Adds,
  the last 1x1 conv of 1280 channels (more above α 1), global average pool, Flatten and Gemm, as torchvision;
* `resnet18`, `resnet34` — ResNet (default 224): 7x7 stem, 3x3 maxpool, basic blocks with strided 1x1
  projection shortcuts, global average pool, Flatten and Gemm;
* `tiny_yolo` — a tiny-YOLOv3-shaped detector (default half the channels of tiny-YOLOv3 at 320): 3x3 convs with
  LeakyRelu(0.1), five 2x2 maxpools and a stride-1 one (right-bottom padded, as darknet exports it), two heads
  of raw 1x1 convs (255 channels) at R/32 and R/16, the second fed by a 2x nearest Resize of a 1x1 conv
  concatenated with the R/16 feature map. No decoding. `float_model(..., activation=...)` swaps LeakyRelu for
  another of ELEMENTWISE (tiny_yolo_models.py writes one detector per activation with this builder and `quantize`).

The classifiers have 1000 classes unless --classes says otherwise. `--width` scales every layer's channels
(MobileNet's α; for ResNet and the detector a fraction of the real network's channels); `--small` also scales
MobileNetV2's last 1x1 conv by α below 1 (the real network keeps 1280), so that the small variants stay small.

    .venv/bin/python tests/generators/imagenet_models.py mobilenet_v1 --width 0.5 --resolution 160 -o m.onnx
    .venv/bin/python tests/generators/imagenet_models.py --committed   # the small variants in tests/data/imagenet
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from detector_models import _Builder as GraphBuilder  # noqa: E402
from imagenet_variants import SEED, main as variants_main  # noqa: E402

CALIBRATION_IMAGES = 4
# the element-wise activations a detector's blocks may have: name -> (ONNX op, attributes)
ELEMENTWISE = {
    "leaky": ("LeakyRelu", {"alpha": 0.1}),
    "hardswish": ("HardSwish", {}),
    "tanh": ("Tanh", {}),
    "hardsigmoid": ("HardSigmoid", {}),
}


class _Builder(GraphBuilder):
    """detector_models.py's graph builder (nodes, initializers, fresh names, seeded random weights) with the
    layers of these networks."""

    def conv(self, x: str, cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1,
             bias: bool = False, stem: str = "conv") -> str:
        fan_in = cin // groups * kernel * kernel
        weights = self.rng.standard_normal((cout, cin // groups, kernel, kernel)) * np.sqrt(2.0 / fan_in)
        inputs = [x, self.constant(f"{stem}_w", weights.astype(np.float32))]
        if bias:
            inputs.append(self.constant(f"{stem}_b", (self.rng.standard_normal(cout) * 0.1).astype(np.float32)))
        return self.node("Conv", inputs, stem, kernel_shape=[kernel, kernel], strides=[stride, stride],
                         pads=[kernel // 2] * 4, group=groups)

    def batch_norm(self, x: str, channels: int) -> str:
        """Statistics far from the identity, as a trained network has them."""
        rng = self.rng
        gamma, beta = rng.uniform(0.5, 1.5, channels), rng.standard_normal(channels) * 0.2
        mean, variance = rng.standard_normal(channels) * 0.3, rng.uniform(0.5, 2.0, channels)
        return self.node("BatchNormalization", [x] + [self.constant(stem, v.astype(np.float32)) for stem, v in
                                                      (("gamma", gamma), ("beta", beta), ("mean", mean),
                                                       ("var", variance))], epsilon=1e-5)

    def conv_bn(self, x: str, cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1,
                activation: str | None = "relu") -> str:
        y = self.batch_norm(self.conv(x, cin, cout, kernel, stride, groups), cout)
        return self.activation(y, activation)

    def activation(self, x: str, kind: str | None) -> str:
        if kind == "relu":
            return self.node("Relu", [x])
        if kind == "relu6":
            return self.node("Clip", [x, self.constant("zero", np.float32(0)), self.constant("six", np.float32(6))])
        if kind in ELEMENTWISE:
            op, attributes = ELEMENTWISE[kind]
            return self.node(op, [x], **attributes)
        return x

    def classifier(self, x: str, channels: int, classes: int, as_conv: bool) -> str:
        """Global average pool, then a 1x1 Conv and a Flatten (TensorFlow) or a Flatten and a Gemm (PyTorch)."""
        pooled = self.node("GlobalAveragePool", [x])
        if as_conv:
            return self.node("Flatten", [self.conv(pooled, channels, classes, 1, bias=True, stem="logits")])
        weights = self.rng.standard_normal((classes, channels)) * np.sqrt(1.0 / channels)
        return self.node("Gemm", [self.node("Flatten", [pooled]),
                                  self.constant("fc_w", weights.astype(np.float32)),
                                  self.constant("fc_b", (self.rng.standard_normal(classes) * 0.1).astype(np.float32))],
                         "fc", transB=1)


def _divisible(value: float, divisor: int = 8) -> int:
    """torchvision's _make_divisible: the nearest multiple of `divisor`, never 10% below `value`."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def mobilenet_v1(b: _Builder, x: str, width: float, classes: int, small: bool) -> list[str]:
    def channels(c):
        return max(4, int(c * width))

    y = b.conv_bn(x, 3, channels(32), 3, 2, activation="relu6")
    cin = channels(32)
    for cout, stride in ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1), (512, 1),
                         (512, 1), (512, 1), (1024, 2), (1024, 1)):
        y = b.conv_bn(y, cin, cin, 3, stride, groups=cin, activation="relu6")
        y = b.conv_bn(y, cin, channels(cout), 1, activation="relu6")
        cin = channels(cout)
    return [b.classifier(y, cin, classes, as_conv=True)]


def mobilenet_v2(b: _Builder, x: str, width: float, classes: int, small: bool) -> list[str]:
    cin = _divisible(32 * width)
    y = b.conv_bn(x, 3, cin, 3, 2, activation="relu6")
    for expansion, cout, repeats, first_stride in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                                                    (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        cout = _divisible(cout * width)
        for repeat in range(repeats):
            stride = first_stride if repeat == 0 else 1
            hidden = int(round(cin * expansion))
            z = b.conv_bn(y, cin, hidden, 1, activation="relu6") if expansion != 1 else y
            z = b.conv_bn(z, hidden, hidden, 3, stride, groups=hidden, activation="relu6")
            z = b.conv_bn(z, hidden, cout, 1, activation=None)
            y = b.node("Add", [y, z], "residual") if stride == 1 and cin == cout else z
            cin = cout
    last = _divisible(1280 * (width if small else max(1.0, width)))
    y = b.conv_bn(y, cin, last, 1, activation="relu6")
    return [b.classifier(y, last, classes, as_conv=False)]


def _resnet(blocks: tuple[int, ...]):
    def network(b: _Builder, x: str, width: float, classes: int, small: bool) -> list[str]:
        def channels(c):
            return max(4, int(c * width))

        y = b.conv_bn(x, 3, channels(64), 7, 2)
        y = b.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
        cin = channels(64)
        for stage, repeats in enumerate(blocks):
            cout = channels(64 << stage)
            for repeat in range(repeats):
                stride = 2 if stage > 0 and repeat == 0 else 1
                z = b.conv_bn(y, cin, cout, 3, stride)
                z = b.conv_bn(z, cout, cout, 3, activation=None)
                shortcut = b.conv_bn(y, cin, cout, 1, stride, activation=None) if stride != 1 or cin != cout else y
                y = b.node("Relu", [b.node("Add", [z, shortcut], "residual")])
                cin = cout
        return [b.classifier(y, cin, classes, as_conv=False)]

    return network


def tiny_yolo(b: _Builder, x: str, width: float, activation: str = "leaky") -> list[str]:
    """tiny-YOLOv3 (darknet's yolov3-tiny.cfg) with every layer's channels times `width` and `activation` (one of
    ELEMENTWISE) after every block; 255 = 3 x (5 + 80)."""
    def channels(c):
        return max(2, int(c * width))

    y, cin = x, 3
    route = None
    for number, cout in enumerate((16, 32, 64, 128, 256, 512)):
        y = b.conv_bn(y, cin, channels(cout), 3, activation=activation)
        cin = channels(cout)
        if number == 4:
            route, route_channels = y, cin
        if number < 5:
            y = b.node("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
        else:  # darknet's size-2 stride-1 maxpool keeps the map by padding right and bottom
            y = b.node("MaxPool", [y], kernel_shape=[2, 2], strides=[1, 1], pads=[0, 0, 1, 1])
    y = b.conv_bn(y, cin, channels(1024), 3, activation=activation)
    neck = b.conv_bn(y, channels(1024), channels(256), 1, activation=activation)
    big = b.conv_bn(neck, channels(256), channels(512), 3, activation=activation)
    head_large = b.conv(big, channels(512), 255, 1, bias=True, stem="head_large")
    up = b.conv_bn(neck, channels(256), channels(128), 1, activation=activation)
    up = b.node("Resize", [up, "", b.constant("scales", np.array([1, 1, 2, 2], np.float32))], "upsample",
                mode="nearest")
    y = b.node("Concat", [up, route], "route", axis=1)
    y = b.conv_bn(y, channels(128) + route_channels, channels(256), 3, activation=activation)
    head_small = b.conv(y, channels(256), 255, 1, bias=True, stem="head_small")
    return [head_large, head_small]


NETWORKS = {"mobilenet_v1": mobilenet_v1, "mobilenet_v2": mobilenet_v2, "resnet18": _resnet((2, 2, 2, 2)),
            "resnet34": _resnet((3, 4, 6, 3)), "tiny_yolo": tiny_yolo}


def float_model(network: str, width: float, resolution: int, classes: int = 1000, small: bool = False,
                activation: str = "leaky") -> onnx.ModelProto:
    """`classes` and `small` shape the classifiers, `activation` the detector."""
    b = _Builder(SEED)
    if network == "tiny_yolo":
        outputs = tiny_yolo(b, "input", width, activation)
    else:
        outputs = NETWORKS[network](b, "input", width, classes, small)
    names = ["logits"] if len(outputs) == 1 else ["head_large", "head_small"]
    for tensor, name in zip(outputs, names):
        b.nodes.append(helper.make_node("Identity", [tensor], [name], name=f"{name}_output"))
    graph = helper.make_graph(
        b.nodes, network, [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, resolution, resolution])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in names], b.initializers)
    opset = 14 if activation == "hardswish" and network == "tiny_yolo" else 13  # HardSwish needs 14
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


class _RandomImages(CalibrationDataReader):
    """A few seeded images, normalized as ImageNet preprocessing leaves them (mean 0, deviation 1)."""

    def __init__(self, resolution: int):
        rng = np.random.default_rng(SEED)
        self.images = iter([{"input": rng.standard_normal((1, 3, resolution, resolution)).astype(np.float32)}
                            for _ in range(CALIBRATION_IMAGES)])

    def get_next(self):
        return next(self.images, None)


def quantize(model: onnx.ModelProto, out: Path) -> Path:
    resolution = model.graph.input[0].type.tensor_type.shape.dim[2].dim_value
    with tempfile.TemporaryDirectory() as tmp:
        float_path, prepared = Path(tmp) / "float.onnx", Path(tmp) / "prepared.onnx"
        onnx.save(model, str(float_path))
        quant_pre_process(str(float_path), str(prepared))
        quantize_static(str(prepared), str(out), _RandomImages(resolution), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True)
    return out


def multiply_accumulates(model: onnx.ModelProto) -> int:
    """The MACs of one image: every Conv's and Gemm's output values times the products each sums."""
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    weights = {i.name: list(i.dims) for i in model.graph.initializer}
    weights.update({n.output[0]: weights[n.input[0]] for n in model.graph.node
                    if n.op_type == "DequantizeLinear" and n.input[0] in weights})
    total = 0
    for node in model.graph.node:
        if node.op_type in ("Conv", "Gemm"):
            per_output = int(np.prod(weights[node.input[1]][1:]))  # Conv: cin/groups*k*k; Gemm (transB): K
            total += int(np.prod(shapes[node.output[0]])) * per_output
    return total


def parameter_bytes(model: onnx.ModelProto) -> tuple[int, int]:
    """(weight bytes, bias bytes): the quantized initializers DequantizeLinear nodes feed to a Conv's, Gemm's or
    MatMul's weight input (int8) and to a Conv's or Gemm's bias (int32), each initializer once; scales and zero
    points are not counted."""
    initializers = {i.name: i for i in model.graph.initializer}
    dequantized = {n.output[0]: initializers[n.input[0]] for n in model.graph.node
                   if n.op_type == "DequantizeLinear" and n.input[0] in initializers}
    weights, biases = {}, {}
    for node in model.graph.node:
        if node.op_type not in ("Conv", "Gemm", "MatMul"):
            continue
        for position, name in enumerate(node.input):
            if name in dequantized:
                initializer = dequantized[name]
                (biases if position == 2 else weights)[initializer.name] = numpy_helper.to_array(initializer).nbytes
    return sum(weights.values()), sum(biases.values())


def describe(path: Path) -> str:
    model = onnx.load(str(path))
    weights, biases = parameter_bytes(model)
    return (f"{path.name}: {path.stat().st_size} bytes, {weights} weight bytes (int8), {biases} bias bytes (int32), "
            f"{multiply_accumulates(model)} MACs")


def write(network: str, width: float, resolution: int, classes: int, small: bool, out: Path) -> None:
    quantize(float_model(network, width, resolution, classes, small), out)
    print(describe(out), file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    variants_main(argv, __doc__.split("\n\n")[0], ".onnx", write)


if __name__ == "__main__":
    main()
