"""Writes int8 QDQ ONNX files of one small CNN, quantized in PyTorch the ways PyTorch users quantize, into OUT_DIR.

The network (input 1x3x32x32): Conv2d(3,8,3,pad 1)+BN+ReLU, Conv2d(8,8,3,pad 1)+BN, residual Add, ReLU,
MaxPool2d(2), Conv2d(8,16,3,stride 2,pad 1)+BN+ReLU, AdaptiveAvgPool2d(1), Flatten, Linear(16,10), with random
weights (seed 0) and non-trivial BatchNorm statistics. Each file is what the flow exports, untouched:

- pt2e_xnnpack.onnx: PT2E post-training quantization (`torch.export.export` -> `prepare_pt2e` with
  XNNPACKQuantizer, per-channel symmetric -> calibration -> `convert_pt2e`), then `torch.onnx.export(dynamo=True)`.
  BatchNorm is folded, weights are int8 per-channel (axis 0) DequantizeLinear, biases stay float, and
  AdaptiveAvgPool2d exports as ReduceMean.
- pt2e_xnnpack_int32_bias.onnx: the same with the conv/linear biases annotated by a DerivedQuantizationSpec
  (int32, scale input_scale * weight_scale), so that they export as int32 DequantizeLinear.
- pt2e_x86.onnx: PT2E with X86InductorQuantizer (uint8 activations, Conv+Add fused: no Q/DQ on the conv output
  that feeds the Add, float Linear output), int32 biases as above.
- eager_ptq.onnx, eager_qat.onnx: eager mode (QuantStub/DeQuantStub, fuse_modules, `prepare` or
  `prepare_qat`, calibration, `convert`, x86 engine) exported by TorchScript (`dynamo=False`, opset 17): uint8
  activations, int32 biases, identity Casts between QuantizeLinear and DequantizeLinear, Constant nodes.
- fake_quant.onnx, fake_quant_int_bias.onnx: a hand-written model calling `torch.fake_quantize_per_tensor_affine`
  and `torch.fake_quantize_per_channel_affine` (BatchNorm folded by hand), TorchScript export at opset 17:
  QuantizeLinear/DequantizeLinear pairs, float biases (in the second, float multiples of input_scale *
  weight_scale, as fake quantization cannot express an int32 bias).

Needs torch 2.13 (CPU), torchao, onnx, onnxscript, and executorch for XNNPACKQuantizer (without it, torchao's
test copy of the same quantizer is used):

    python -m venv /tmp/torch && /tmp/torch/bin/pip install torch torchao onnx onnxscript executorch
    /tmp/torch/bin/python tests/generators/torch_models.py OUT_DIR [NAME ...]

The files are deterministic (byte-identical from run to run with the same package versions) and committed in
tests/data/torch/. ming takes the eager and fake_quant_int_bias files as written (equal to onnxruntime,
tests/test_converted_onnx.py) and refuses the others by name: a float bias (onnxruntime runs that conv in
float), and PT2E's ReduceMean (onnxruntime runs it in float).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch
import torch.ao.quantization as tq
import torch.nn.functional as F
from torch import nn

warnings.filterwarnings("ignore")
SEED = 0
SHAPE = (1, 3, 32, 32)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1, self.relu1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()
        self.conv2, self.bn2, self.relu2 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv3, self.bn3, self.relu3 = nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU()
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x, add=torch.add):
        x = self.relu1(self.bn1(self.conv1(x)))
        x = self.relu2(add(x, self.bn2(self.conv2(x))))
        x = self.relu3(self.bn3(self.conv3(self.pool(x))))
        return self.fc(torch.flatten(self.gap(x), 1))


def network() -> Net:
    """The float network, in eval mode, with BatchNorm statistics as a trained network has them."""
    torch.manual_seed(SEED)
    net = Net()
    for bn in (net.bn1, net.bn2, net.bn3):
        n = bn.num_features
        bn.weight.data = torch.rand(n) + 0.5
        bn.bias.data = torch.randn(n) * 0.2
        bn.running_mean = torch.randn(n) * 0.2
        bn.running_var = torch.rand(n) * 1.5 + 0.5
    return net.eval()


def samples(count: int = 32) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(SEED + 1)
    return [torch.randn(SHAPE, generator=generator) for _ in range(count)]


# ---- PT2E -----------------------------------------------------------------------------------------------------


def _xnnpack_quantizer():
    try:
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer, get_symmetric_quantization_config)
    except ImportError:
        from torchao.testing.pt2e._xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))


def _x86_quantizer():
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as x86
    return x86.X86InductorQuantizer().set_global(x86.get_default_x86_inductor_quantization_config())


def _bias_qparams(observers):
    activation, weight = observers
    scale = (activation.calculate_qparams()[0] * weight.calculate_qparams()[0]).to(torch.float32)
    return scale, torch.zeros_like(scale, dtype=torch.int32)


def _int32_biases(inner):
    """`inner`, with each conv/linear bias annotated int32 with scale input_scale * weight_scale."""
    from torchao.quantization.pt2e.quantizer import DerivedQuantizationSpec, Quantizer

    class Int32Biases(Quantizer):
        def annotate(self, model):
            inner.annotate(model)
            for node in model.graph.nodes:
                annotation = node.meta.get("quantization_annotation")
                if node.target not in (torch.ops.aten.conv2d.default, torch.ops.aten.linear.default) \
                        or annotation is None or len(node.args) < 3 or node.args[2] is None:
                    continue
                x, w, b = node.args[:3]
                per_channel = getattr(annotation.input_qspec_map.get(w), "qscheme", None) in (
                    torch.per_channel_symmetric, torch.per_channel_affine)
                annotation.input_qspec_map[b] = DerivedQuantizationSpec(
                    derived_from=[(x, node), (w, node)], derive_qparams_fn=_bias_qparams, dtype=torch.int32,
                    quant_min=-2**31, quant_max=2**31 - 1, ch_axis=0 if per_channel else None,
                    qscheme=torch.per_channel_symmetric if per_channel else torch.per_tensor_symmetric)
            return model

        def validate(self, model):
            inner.validate(model)

    return Int32Biases()


def pt2e(quantizer) -> bytes:
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    example = (torch.randn(SHAPE),)
    prepared = prepare_pt2e(torch.export.export(network(), example).module(), quantizer)
    with torch.no_grad():
        for sample in samples():
            prepared(sample)
    model = torch.onnx.export(convert_pt2e(prepared), example, dynamo=True, verbose=False).model_proto
    for entry in (*model.graph.node, *model.graph.value_info, *model.graph.input, *model.graph.output,
                  *model.graph.initializer):
        del entry.metadata_props[:]  # stack traces with this file's absolute path
    return model.SerializeToString()


# ---- eager mode -----------------------------------------------------------------------------------------------


class Eager(nn.Module):
    def __init__(self, net: Net):
        super().__init__()
        self.quant, self.dequant, self.net = tq.QuantStub(), tq.DeQuantStub(), net
        self.add = nn.quantized.FloatFunctional()

    def forward(self, x):
        return self.dequant(self.net(self.quant(x), add=self.add.add))


def eager(qat: bool) -> bytes:
    torch.backends.quantized.engine = "x86"
    model = Eager(network())
    groups = [["net.conv1", "net.bn1", "net.relu1"], ["net.conv2", "net.bn2"], ["net.conv3", "net.bn3", "net.relu3"]]
    if qat:
        model = tq.fuse_modules_qat(model.train(), groups)
        model.qconfig = tq.get_default_qat_qconfig("x86")
        tq.prepare_qat(model, inplace=True)
    else:
        model = tq.fuse_modules(model, groups)
        model.qconfig = tq.get_default_qconfig("x86")
        tq.prepare(model, inplace=True)
    with torch.no_grad():
        for sample in samples():
            model(sample)
    return _torchscript(tq.convert(model.eval()))


def _torchscript(model: nn.Module) -> bytes:
    import io
    buffer = io.BytesIO()
    torch.onnx.export(model, (torch.randn(SHAPE),), buffer, dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"])
    return buffer.getvalue()


# ---- fake quantization in forward ----------------------------------------------------------------------------


class FakeQuant(nn.Module):
    """BatchNorm folded into the convs; int8 per-tensor activations (min/max), int8 per-channel symmetric weights."""

    POINTS = ("x", "conv1", "conv2", "add", "pool", "conv3", "gap", "flatten", "fc")

    def __init__(self, net: Net, int_bias: bool):
        super().__init__()
        layers = ((net.conv1, net.bn1), (net.conv2, net.bn2), (net.conv3, net.bn3), (net.fc, None))
        for i, (layer, bn) in enumerate(layers):
            w, b = layer.weight.detach(), layer.bias.detach()
            if bn is not None:
                s = bn.weight.detach() / torch.sqrt(bn.running_var + bn.eps)
                w, b = w * s[:, None, None, None], (b - bn.running_mean) * s + bn.bias.detach()
            self.register_buffer(f"w{i}", w.clone())
            self.register_buffer(f"b{i}", b.clone())
        self.int_bias = int_bias
        self.ranges: dict[str, tuple[float, float]] | None = {}
        self.qparams: dict[str, tuple[float, int]] = {}

    def act(self, point: str, t: torch.Tensor) -> torch.Tensor:
        if self.ranges is not None:  # calibrating
            low, high = self.ranges.get(point, (0.0, 0.0))
            self.ranges[point] = (min(low, t.min().item()), max(high, t.max().item()))
            return t
        scale, zero_point = self.qparams[point]
        return torch.fake_quantize_per_tensor_affine(t, scale, zero_point, -128, 127)

    def weight(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        w, b = getattr(self, f"w{i}"), getattr(self, f"b{i}")
        if self.ranges is not None:
            return w, b
        w = torch.fake_quantize_per_channel_affine(w, getattr(self, f"ws{i}"), getattr(self, f"wz{i}"), 0, -128, 127)
        return w, getattr(self, f"bq{i}") if self.int_bias else b

    def forward(self, x):
        x = self.act("x", x)
        x = self.act("conv1", F.relu(F.conv2d(x, *self.weight(0), padding=1)))
        y = self.act("conv2", F.conv2d(x, *self.weight(1), padding=1))
        x = self.act("add", F.relu(x + y))
        x = self.act("pool", F.max_pool2d(x, 2))
        x = self.act("conv3", F.relu(F.conv2d(x, *self.weight(2), stride=2, padding=1)))
        x = self.act("flatten", torch.flatten(self.act("gap", F.adaptive_avg_pool2d(x, 1)), 1))
        return self.act("fc", F.linear(x, *self.weight(3)))

    def calibrate(self) -> FakeQuant:
        with torch.no_grad():
            for sample in samples():
                self(sample)
        for point, (low, high) in self.ranges.items():
            scale = (high - low) / 255
            self.qparams[point] = (scale, max(-128, min(127, round(-128 - low / scale))))
        for same, source in (("pool", "add"), ("flatten", "gap")):  # max pooling and flattening keep the scale
            self.qparams[same] = self.qparams[source]
        self.ranges = None
        for i, x in enumerate(("x", "conv1", "pool", "flatten")):
            w = getattr(self, f"w{i}")
            scale = w.abs().amax(dim=tuple(range(1, w.dim()))) / 127
            self.register_buffer(f"ws{i}", scale)
            self.register_buffer(f"wz{i}", torch.zeros_like(scale, dtype=torch.int32))
            bias_scale = (self.qparams[x][0] * scale).float()
            self.register_buffer(f"bq{i}", torch.round(getattr(self, f"b{i}") / bias_scale) * bias_scale)
        return self


def fake_quant(int_bias: bool) -> bytes:
    return _torchscript(FakeQuant(network(), int_bias).calibrate().eval())


MODELS = {
    "pt2e_xnnpack": lambda: pt2e(_xnnpack_quantizer()),
    "pt2e_xnnpack_int32_bias": lambda: pt2e(_int32_biases(_xnnpack_quantizer())),
    "pt2e_x86": lambda: pt2e(_int32_biases(_x86_quantizer())),
    "eager_ptq": lambda: eager(qat=False),
    "eager_qat": lambda: eager(qat=True),
    "fake_quant": lambda: fake_quant(int_bias=False),
    "fake_quant_int_bias": lambda: fake_quant(int_bias=True),
}


def main(args: list[str]) -> None:
    if not args:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR [NAME ...]; names: {', '.join(MODELS)}")
    out = Path(args[0])
    out.mkdir(parents=True, exist_ok=True)
    for name in args[1:] or list(MODELS):
        (out / f"{name}.onnx").write_bytes(MODELS[name]())
        print(name, "written")


if __name__ == "__main__":
    main(sys.argv[1:])
