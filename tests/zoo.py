"""A zoo of small, deterministic, int8 QDQ-quantized CNNs for the tests.

Every model is built in float with ``onnx.helper`` (opset 17, ir_version 8, one
input ``"x"`` float32 with batch 1, one output ``"y"``) from seeded random
weights (He-like init so activations stay O(1)), then quantized with
``onnxruntime.quantization.quantize_static`` (QDQ format, int8 activations and
weights; 7-bit weights on CPUs where onnxruntime's int8 kernels saturate, see
``QUANTIZE_OPTIONS``) calibrated on 8 seeded standard-normal samples.

The same call always writes a byte-identical ``.onnx`` file.

Usage::

    import zoo
    path = zoo.quantized_model("conv3x3_same", tmp_path, per_channel=True)
    x = zoo.random_input("conv3x3_same", seed=0)

Notes on what onnxruntime's QDQ quantizer does with these graphs (default
options, as used here):

* A Relu or Clip whose input is produced by another quantized node with no
  other consumer is *removed*: the producer's output simply takes the
  activation's quantization params (zero point -128 for ReLU ranges), so
  ``conv -> relu`` becomes ``conv -> Q -> DQ``.  A Relu/Clip whose input has
  several consumers is kept as ``DQ -> Relu -> Q`` (see ``relu_clip_kept``).
  A Relu/Clip reading the (float) graph input would be left entirely
  unquantized, which is why the zoo has no such model.
* Bias of Conv/Gemm is stored as int32 (scale = x_scale * w_scale) behind a
  DequantizeLinear.
* MaxPool, AveragePool, Flatten and Reshape reuse their input's scale/zero
  point for their output.  GlobalAveragePool and Add get their own output
  scale; Concat's output reuses one input's scale (the other input must be
  requantized); Softmax output is quantized with scale 1/255, zero point -128.
* A tensor consumed by several nodes (e.g. ``x`` in ``add_identity``) gets a
  single shared Q -> DQ pair.
"""

from __future__ import annotations

import importlib.util
import pathlib
import tempfile
import zlib
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ming_py.ort_session import saturates

OPSET = 17
IR_VERSION = 8
CALIB_SEED = 1234
CALIB_SAMPLES = 8
INPUT_SCALE = 1.0

_REPO = pathlib.Path(__file__).resolve().parent.parent
_EXAMPLE_SCRIPT = _REPO / "examples" / "make_example.py"


@dataclass(frozen=True)
class ZooModel:
    name: str
    input_shape: tuple[int, ...]          # (1, C, H, W) or (1, F)
    build: Callable[[], onnx.ModelProto]  # the float model
    tags: frozenset[str]                  # hand-given tags + lower-cased op types


# --------------------------------------------------------------------------
# Graph builder with shape tracking
# --------------------------------------------------------------------------

def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


class _Graph:
    """Tiny helper: adds named nodes + seeded initializers, tracks NCHW shapes."""

    def __init__(self, name: str, input_shape: Sequence[int]):
        self.name = name
        self.rng = np.random.default_rng(zlib.crc32(name.encode()))
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.shapes: dict[str, tuple[int, ...]] = {"x": tuple(input_shape)}
        self.input_shape = tuple(input_shape)

    # -- helpers -----------------------------------------------------------
    def _init(self, name: str, arr: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def _node(self, op: str, name: str, inputs: list[str], shape: tuple[int, ...], **attrs) -> str:
        out = f"{name}_out"
        assert out not in self.shapes, f"duplicate node name {name}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        self.shapes[out] = tuple(shape)
        return out

    # -- ops ---------------------------------------------------------------
    def conv(self, x: str, name: str, cout: int, kernel=3, stride=1, pads=None,
             dilation=1, group=1, bias=True) -> str:
        n, cin, h, w = self.shapes[x]
        kh, kw = _pair(kernel)
        sh, sw = _pair(stride)
        dh, dw = _pair(dilation)
        if pads is None or pads == "same":  # symmetric "same" for odd kernels / stride 1
            pads = [dh * (kh - 1) // 2, dw * (kw - 1) // 2] * 2 if pads == "same" else [0, 0, 0, 0]
        elif isinstance(pads, int):
            pads = [pads] * 4
        pads = [int(p) for p in pads]  # [top, left, bottom, right]
        assert cin % group == 0 and cout % group == 0
        fan_in = (cin // group) * kh * kw
        wt = self.rng.standard_normal((cout, cin // group, kh, kw)) * np.sqrt(2.0 / fan_in)
        inputs = [x, self._init(f"{name}.weight", wt.astype(np.float32))]
        if bias:
            inputs.append(self._init(f"{name}.bias", (self.rng.standard_normal(cout) * 0.1).astype(np.float32)))
        oh = (h + pads[0] + pads[2] - dh * (kh - 1) - 1) // sh + 1
        ow = (w + pads[1] + pads[3] - dw * (kw - 1) - 1) // sw + 1
        assert oh > 0 and ow > 0, (name, oh, ow)
        return self._node("Conv", name, inputs, (n, cout, oh, ow), kernel_shape=[kh, kw],
                          strides=[sh, sw], dilations=[dh, dw], pads=pads, group=group)

    def relu(self, x: str, name: str) -> str:
        return self._node("Relu", name, [x], self.shapes[x])

    def unary(self, x: str, op: str, name: str, **attrs) -> str:
        """An element-wise op of one input (Sigmoid, Tanh, LeakyRelu(alpha=...), ...)."""
        return self._node(op, name, [x], self.shapes[x], **attrs)

    def prelu(self, x: str, name: str, per_channel: bool = True) -> str:
        """PRelu with a seeded slope per channel (axis 1: shape C x 1 x 1 for maps) or one for all (shape 1)."""
        shape = self.shapes[x]
        slope_shape = (shape[1],) + (1,) * (len(shape) - 2) if per_channel else (1,)
        slope = self.rng.uniform(0.05, 0.5, slope_shape).astype(np.float32)
        return self._node("PRelu", name, [x, self._init(f"{name}.slope", slope)], self.shapes[x])

    def batchnorm(self, x: str, name: str) -> str:
        """BatchNormalization left unfused (inference), seeded per-channel scale, bias, mean and variance."""
        channels = self.shapes[x][1]
        params = [self.rng.uniform(0.5, 1.5, channels), self.rng.uniform(-0.3, 0.3, channels),
                  self.rng.uniform(-0.2, 0.2, channels), self.rng.uniform(0.5, 2.0, channels)]
        inputs = [self._init(f"{name}.{p}", v.astype(np.float32)) for p, v in zip(("scale", "bias", "mean", "var"), params)]
        return self._node("BatchNormalization", name, [x, *inputs], self.shapes[x])

    def clip(self, x: str, name: str, lo: float = 0.0, hi: float = 6.0) -> str:
        mn = self._init(f"{name}.min", np.array(lo, dtype=np.float32))
        mx = self._init(f"{name}.max", np.array(hi, dtype=np.float32))
        return self._node("Clip", name, [x, mn, mx], self.shapes[x])

    def _pool(self, op: str, x: str, name: str, kernel, stride, pads, **attrs) -> str:
        n, c, h, w = self.shapes[x]
        kh, kw = _pair(kernel)
        sh, sw = _pair(stride)
        pads = [pads] * 4 if isinstance(pads, int) else list(pads)
        rounding = np.ceil if attrs.get("ceil_mode") else np.floor
        oh = int(rounding((h + pads[0] + pads[2] - kh) / sh)) + 1
        ow = int(rounding((w + pads[1] + pads[3] - kw) / sw)) + 1
        return self._node(op, name, [x], (n, c, oh, ow), kernel_shape=[kh, kw],
                          strides=[sh, sw], pads=pads, **attrs)

    def maxpool(self, x: str, name: str, kernel=2, stride=2, pads=0, ceil_mode=0) -> str:
        return self._pool("MaxPool", x, name, kernel, stride, pads, **({"ceil_mode": 1} if ceil_mode else {}))

    def avgpool(self, x: str, name: str, kernel=2, stride=2, pads=0, count_include_pad=0) -> str:
        return self._pool("AveragePool", x, name, kernel, stride, pads, count_include_pad=count_include_pad)

    def gap(self, x: str, name: str) -> str:
        n, c, _, _ = self.shapes[x]
        return self._node("GlobalAveragePool", name, [x], (n, c, 1, 1))

    def global_max_pool(self, x: str, name: str) -> str:
        n, c, _, _ = self.shapes[x]
        return self._node("GlobalMaxPool", name, [x], (n, c, 1, 1))

    def resize(self, x: str, name: str, scales=(2, 2), sizes: bool = False, mode: str = "nearest",
               **attrs) -> str:
        """Resize rows and columns by `scales`, given as the node's scales or (`sizes`) its output size;
        `attrs`: coordinate_transformation_mode, nearest_mode."""
        n, c, h, w = self.shapes[x]
        shape = (n, c, int(h * scales[0]), int(w * scales[1]))
        if sizes:
            inputs = [x, "", "", self._init(f"{name}.sizes", np.array(shape, dtype=np.int64))]
        else:
            inputs = [x, "", self._init(f"{name}.scales", np.array([1, 1, *scales], dtype=np.float32))]
        return self._node("Resize", name, inputs, shape, mode=mode, **attrs)

    def pad(self, x: str, name: str, pads=(1, 1, 1, 1), value: float | None = None, mode: str = "constant") -> str:
        """Pad rows and columns by `pads` (top, left, bottom, right) with `value` (default 0)."""
        n, c, h, w = self.shapes[x]
        top, left, bottom, right = pads
        inputs = [x, self._init(f"{name}.pads", np.array([0, 0, top, left, 0, 0, bottom, right], dtype=np.int64))]
        if value is not None:
            inputs.append(self._init(f"{name}.value", np.array(value, dtype=np.float32)))
        return self._node("Pad", name, inputs, (n, c, h + top + bottom, w + left + right), mode=mode)

    def add(self, a: str, b: str, name: str) -> str:
        assert self.shapes[a] == self.shapes[b], (self.shapes[a], self.shapes[b])
        return self._node("Add", name, [a, b], self.shapes[a])

    def _broadcast(self, a: str, b: str) -> tuple[int, ...]:
        """ONNX's broadcast of two shapes of one rank (each dim equal, or 1 on one side)."""
        sa, sb = self.shapes[a], self.shapes[b]
        assert len(sa) == len(sb) and all(x == y or 1 in (x, y) for x, y in zip(sa, sb)), (sa, sb)
        return tuple(max(x, y) for x, y in zip(sa, sb))

    def add_broadcast(self, a: str, b: str, name: str) -> str:
        """Add where one operand broadcasts (a per-channel vector (1, C, 1, 1) or a scalar)."""
        return self._node("Add", name, [a, b], self._broadcast(a, b))

    def sub(self, a: str, b: str, name: str) -> str:
        return self._node("Sub", name, [a, b], self._broadcast(a, b))

    def mul(self, a: str, b: str, name: str) -> str:
        return self._node("Mul", name, [a, b], self._broadcast(a, b))

    def vector(self, x: str, name: str) -> str:
        """A (1, C) tensor reshaped to (1, C, 1, 1), which broadcasts over a (1, C, H, W) map."""
        n, c = self.shapes[x]
        shape = self._init(f"{name}.shape", np.array([n, c, 1, 1], dtype=np.int64))
        return self._node("Reshape", name, [x, shape], (n, c, 1, 1))

    def se_block(self, x: str, prefix: str, reduced: int, gate: str | None = "clip") -> str:
        """Squeeze-and-excitation: GlobalAveragePool -> 1x1 conv -> Relu -> 1x1 conv -> gate, times `x`.
        `gate` is the activation that makes the per-channel vector: "clip" (Clip(0, 6)), "relu" or None."""
        channels = self.shapes[x][1]
        h = self.gap(x, f"{prefix}_squeeze")
        h = self.relu(self.conv(h, f"{prefix}_reduce", reduced, kernel=1), f"{prefix}_relu")
        h = self.conv(h, f"{prefix}_expand", channels, kernel=1)
        if gate == "clip":
            h = self.clip(h, f"{prefix}_gate", 0.0, 6.0)
        elif gate == "relu":
            h = self.relu(h, f"{prefix}_gate")
        return self.mul(x, h, f"{prefix}_excite")

    def concat(self, xs: list[str], name: str) -> str:
        shapes = [self.shapes[x] for x in xs]
        out = list(shapes[0])
        out[1] = sum(s[1] for s in shapes)
        return self._node("Concat", name, xs, tuple(out), axis=1)

    def channel_shuffle(self, x: str, name: str, groups: int) -> str:
        """ShuffleNet's shuffle: Reshape (N, C, H, W) -> (N, g, C/g, H, W), Transpose (0, 2, 1, 3, 4), Reshape back."""
        n, c, h, w = self.shapes[x]
        grouped = self._init(f"{name}.grouped_shape", np.array([n, groups, c // groups, h, w], dtype=np.int64))
        r = self._node("Reshape", f"{name}_reshape", [x, grouped], (n, groups, c // groups, h, w))
        t = self._node("Transpose", f"{name}_transpose", [r], (n, c // groups, groups, h, w), perm=[0, 2, 1, 3, 4])
        flat = self._init(f"{name}.shape", np.array([n, c, h, w], dtype=np.int64))
        return self._node("Reshape", name, [t, flat], (n, c, h, w))

    def transpose(self, x: str, name: str, perm: Sequence[int]) -> str:
        return self._node("Transpose", name, [x], tuple(self.shapes[x][a] for a in perm), perm=list(perm))

    def split(self, x: str, name: str, sizes: Sequence[int]) -> list[str]:
        """Split along the channels into pieces of `sizes` (one output tensor each)."""
        n, c, h, w = self.shapes[x]
        assert sum(sizes) == c, (sizes, c)
        outs = [f"{name}_out{i}" for i in range(len(sizes))]
        split = self._init(f"{name}.split", np.array(sizes, dtype=np.int64))
        self.nodes.append(helper.make_node("Split", [x, split], outs, name=name, axis=1))
        for out, size in zip(outs, sizes):
            self.shapes[out] = (n, size, h, w)
        return outs

    def slice_channels(self, x: str, name: str, start: int, stop: int) -> str:
        """Channels [start, stop) with an ONNX Slice."""
        n, _, h, w = self.shapes[x]
        starts = self._init(f"{name}.starts", np.array([start], dtype=np.int64))
        ends = self._init(f"{name}.ends", np.array([stop], dtype=np.int64))
        axes = self._init(f"{name}.axes", np.array([1], dtype=np.int64))
        return self._node("Slice", name, [x, starts, ends, axes], (n, stop - start, h, w))

    def flatten(self, x: str, name: str) -> str:
        s = self.shapes[x]
        return self._node("Flatten", name, [x], (s[0], int(np.prod(s[1:]))), axis=1)

    def reshape(self, x: str, name: str) -> str:
        s = self.shapes[x]
        shape = self._init(f"{name}.shape", np.array([1, -1], dtype=np.int64))
        return self._node("Reshape", name, [x, shape], (s[0], int(np.prod(s[1:]))))

    def gemm(self, x: str, name: str, nout: int) -> str:
        n, k = self.shapes[x]
        wt = self.rng.standard_normal((nout, k)) * np.sqrt(2.0 / k)
        b = self.rng.standard_normal(nout) * 0.1
        return self._node("Gemm", name, [x, self._init(f"{name}.weight", wt.astype(np.float32)),
                                         self._init(f"{name}.bias", b.astype(np.float32))],
                          (n, nout), transB=1)

    def matmul(self, x: str, name: str, nout: int) -> str:
        n, k = self.shapes[x]
        wt = self.rng.standard_normal((k, nout)) * np.sqrt(2.0 / k)
        return self._node("MatMul", name, [x, self._init(f"{name}.weight", wt.astype(np.float32))], (n, nout))

    def softmax(self, x: str, name: str) -> str:
        return self._node("Softmax", name, [x], self.shapes[x], axis=1)

    # -- finish ------------------------------------------------------------
    def finish(self, out: str | Sequence[str]) -> onnx.ModelProto:
        """Rename tensor ``out`` to ``"y"`` and wrap everything into a checked ModelProto. Several outputs
        (a list) become ``"y0"``, ``"y1"``, ... in that order, and layers may read them too."""
        outs = [out] if isinstance(out, str) else list(out)
        names = ["y"] if isinstance(out, str) else [f"y{i}" for i in range(len(outs))]
        renamed = dict(zip(outs, names))
        for node in self.nodes:
            for i, o in enumerate(node.output):
                if o in renamed:
                    node.output[i] = renamed[o]
            for i, v in enumerate(node.input):
                if v in renamed:
                    if isinstance(out, str):
                        raise ValueError("the graph output must not be consumed inside the graph")
                    node.input[i] = renamed[v]
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(self.input_shape))],
            [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(self.shapes[o]))
             for o, name in renamed.items()],
            initializer=self.inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="ming-zoo")
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model, full_check=True)
        return model


# --------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------

MODELS: dict[str, ZooModel] = {}
_OUTPUT_SHAPES: dict[str, tuple[int, ...]] = {}

def _register(name: str, input_shape: tuple[int, ...], tags: Sequence[str]):
    """Decorator: ``fn(g: _Graph) -> output tensor name`` becomes a ZooModel."""

    def deco(fn: Callable[[_Graph], str]):
        def build() -> onnx.ModelProto:
            g = _Graph(name, input_shape)
            return g.finish(fn(g))

        _add(name, input_shape, build, tags)
        return fn

    return deco


def _add(name: str, input_shape: tuple[int, ...], build: Callable[[], onnx.ModelProto],
         tags: Sequence[str]) -> None:
    assert name not in MODELS, name
    model = build()
    ops = {n.op_type for n in model.graph.node}
    _OUTPUT_SHAPES[name] = tuple(d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim)
    MODELS[name] = ZooModel(name=name, input_shape=tuple(input_shape), build=build,
                            tags=frozenset(tags) | {o.lower() for o in ops})


# ---- single convolutions -------------------------------------------------

@_register("conv1x1", (1, 4, 8, 8), ["conv", "single"])
def _(g):
    return g.conv("x", "conv1x1", 8, kernel=1)


@_register("conv3x3_valid", (1, 3, 10, 10), ["conv", "single"])
def _(g):
    return g.conv("x", "conv3x3_valid", 6, kernel=3, pads=0)


@_register("conv3x3_same", (1, 3, 8, 8), ["conv", "single"])
def _(g):
    return g.conv("x", "conv3x3_same", 8, kernel=3, pads="same")


@_register("conv3x3_s2", (1, 4, 9, 9), ["conv", "single", "stride"])
def _(g):
    return g.conv("x", "conv3x3_s2", 8, kernel=3, stride=2, pads=1)


@_register("conv3x3_nobias", (1, 4, 8, 8), ["conv", "single", "nobias"])
def _(g):
    return g.conv("x", "conv3x3_nobias", 8, kernel=3, pads=1, bias=False)


@_register("conv3x3_d2", (1, 4, 10, 10), ["conv", "single", "dilation"])
def _(g):
    return g.conv("x", "conv3x3_d2", 8, kernel=3, dilation=2, pads="same")


@_register("conv3x3_asym_pad", (1, 4, 8, 8), ["conv", "single", "asym_pad"])
def _(g):
    return g.conv("x", "conv3x3_asym_pad", 8, kernel=3, pads=[0, 1, 1, 2])


@_register("conv5x5_same", (1, 3, 12, 12), ["conv", "single"])
def _(g):
    return g.conv("x", "conv5x5_same", 8, kernel=5, pads="same")


@_register("conv5x5_s2_d2", (1, 3, 16, 16), ["conv", "single", "stride", "dilation"])
def _(g):
    return g.conv("x", "conv5x5_s2_d2", 6, kernel=5, stride=2, dilation=2, pads=4)


@_register("conv7x7_s2", (1, 3, 16, 16), ["conv", "single", "stride"])
def _(g):
    return g.conv("x", "conv7x7_s2", 8, kernel=7, stride=2, pads=3)


@_register("conv10x4_rect", (1, 2, 16, 8), ["conv", "single", "rect"])
def _(g):
    return g.conv("x", "conv10x4_rect", 4, kernel=(10, 4), pads=0)


@_register("conv10x4_rect_s2_asym", (1, 2, 16, 10), ["conv", "single", "rect", "stride", "asym_pad"])
def _(g):
    return g.conv("x", "conv10x4_s2_asym", 4, kernel=(10, 4), stride=(2, 1), pads=[1, 0, 2, 1])


@_register("conv_grouped", (1, 4, 8, 8), ["conv", "single", "grouped"])
def _(g):
    return g.conv("x", "conv3x3_g2", 8, kernel=3, pads=1, group=2)


@_register("conv_depthwise", (1, 8, 8, 8), ["conv", "single", "depthwise"])
def _(g):
    return g.conv("x", "dwconv3x3", 8, kernel=3, pads=1, group=8)


@_register("conv_depthwise_s2_asym", (1, 8, 8, 8), ["conv", "single", "depthwise", "stride", "asym_pad"])
def _(g):
    return g.conv("x", "dwconv3x3_s2", 8, kernel=3, stride=2, pads=[0, 0, 1, 1], group=8)


@_register("conv_depthwise5x5_d2", (1, 6, 12, 12), ["conv", "single", "depthwise", "dilation"])
def _(g):
    return g.conv("x", "dwconv5x5_d2", 6, kernel=5, dilation=2, pads="same", group=6)


@_register("conv_relu", (1, 4, 8, 8), ["conv", "single", "activation"])
def _(g):
    return g.relu(g.conv("x", "conv3x3", 8, kernel=3, pads=1), "relu")


@_register("conv_clip6", (1, 4, 8, 8), ["conv", "single", "activation"])
def _(g):
    return g.clip(g.conv("x", "conv3x3", 8, kernel=3, pads=1), "clip6", 0.0, 6.0)


# Relu/Clip whose input tensor has a second consumer cannot be folded into the
# producer's output quantization, so the quantizer keeps them (DQ -> Relu -> Q).
@_register("relu_clip_kept", (1, 4, 8, 8), ["activation", "conv", "concat"])
def _(g):
    t = g.conv("x", "conv3x3", 6, kernel=3, pads=1)
    return g.concat([g.relu(t, "relu"), g.clip(t, "clip6", 0.0, 6.0)], "concat")


# ---- pooling -------------------------------------------------------------

@_register("conv_maxpool2", (1, 4, 8, 8), ["conv", "pool", "maxpool"])
def _(g):
    return g.maxpool(g.conv("x", "conv3x3", 8, pads=1), "pool1", kernel=2, stride=2)


@_register("conv_maxpool3_s2_p1", (1, 4, 9, 9), ["conv", "pool", "maxpool"])
def _(g):
    return g.maxpool(g.conv("x", "conv3x3", 8, pads=1), "pool1", kernel=3, stride=2, pads=1)


@_register("conv_avgpool2", (1, 4, 8, 8), ["conv", "pool", "avgpool"])
def _(g):
    return g.avgpool(g.conv("x", "conv3x3", 8, pads=1), "pool1", kernel=2, stride=2)


@_register("conv_avgpool3_p1", (1, 4, 8, 8), ["conv", "pool", "avgpool"])
def _(g):
    return g.avgpool(g.conv("x", "conv3x3", 8, pads=1), "pool1", kernel=3, stride=1, pads=1,
                     count_include_pad=0)


@_register("conv_gap", (1, 4, 8, 8), ["conv", "pool", "gap"])
def _(g):
    return g.gap(g.conv("x", "conv3x3", 8, pads=1), "gap")


# ---- branches ------------------------------------------------------------

@_register("add_identity", (1, 8, 8, 8), ["add", "residual"])
def _(g):
    h = g.relu(g.conv("x", "conv3x3", 8, pads=1), "relu")
    return g.add(h, "x", "add")


@_register("add_conv_branches", (1, 4, 8, 8), ["add", "residual"])
def _(g):
    a = g.relu(g.conv("x", "conv3x3", 8, pads=1), "relu")
    b = g.conv("x", "conv1x1", 8, kernel=1)
    return g.add(a, b, "add")


@_register("concat_branches", (1, 4, 8, 8), ["concat"])
def _(g):
    a = g.relu(g.conv("x", "conv3x3", 6, pads=1), "relu")
    b = g.conv("x", "conv1x1", 4, kernel=1)
    return g.concat([a, b], "concat")


# ---- fully connected -----------------------------------------------------

@_register("conv_flatten_gemm", (1, 3, 8, 8), ["conv", "fc", "gemm"])
def _(g):
    h = g.relu(g.conv("x", "conv3x3_s2", 4, stride=2, pads=1), "relu")
    return g.gemm(g.flatten(h, "flatten"), "fc", 10)


@_register("conv_flatten_matmul", (1, 3, 8, 8), ["conv", "fc", "matmul"])
def _(g):
    h = g.relu(g.conv("x", "conv3x3_s2", 4, stride=2, pads=1), "relu")
    return g.matmul(g.flatten(h, "flatten"), "fc", 10)


@_register("conv_reshape_gemm", (1, 3, 8, 8), ["conv", "fc", "gemm", "reshape"])
def _(g):
    h = g.conv("x", "conv3x3_s2", 4, stride=2, pads=1)
    return g.gemm(g.reshape(h, "reshape"), "fc", 10)


@_register("mlp", (1, 32), ["fc", "gemm"])
def _(g):
    h = g.relu(g.gemm("x", "fc1", 16), "relu")
    return g.gemm(h, "fc2", 10)


# ---- networks ------------------------------------------------------------

def _residual_block(g: _Graph, x: str, prefix: str, cout: int, stride: int = 1) -> str:
    cin = g.shapes[x][1]
    h = g.relu(g.conv(x, f"{prefix}_conv1", cout, stride=stride, pads=1), f"{prefix}_relu1")
    h = g.conv(h, f"{prefix}_conv2", cout, pads=1)
    skip = x
    if stride != 1 or cin != cout:
        skip = g.conv(x, f"{prefix}_proj", cout, kernel=1, stride=stride)
    return g.relu(g.add(h, skip, f"{prefix}_add"), f"{prefix}_relu2")


@_register("residual_block", (1, 8, 8, 8), ["network", "residual", "add"])
def _(g):
    return _residual_block(g, "x", "block1", 8)


@_register("two_residual_stages", (1, 8, 8, 8), ["network", "residual", "add", "stride"])
def _(g):
    h = _residual_block(g, "x", "stage1", 8)
    return _residual_block(g, h, "stage2", 16, stride=2)


@_register("dw_separable", (1, 8, 8, 8), ["network", "depthwise", "conv"])
def _(g):
    h = "x"
    for i, (cout, stride) in enumerate([(16, 1), (16, 2)], start=1):
        c = g.shapes[h][1]
        h = g.relu(g.conv(h, f"dw{i}", c, kernel=3, stride=stride, pads=1, group=c), f"dw{i}_relu")
        h = g.relu(g.conv(h, f"pw{i}", cout, kernel=1), f"pw{i}_relu")
    return h


@_register("lenet", (1, 1, 16, 16), ["network", "conv", "maxpool", "fc", "softmax"])
def _(g):
    h = g.maxpool(g.relu(g.conv("x", "conv1", 6, kernel=5, pads=2), "relu1"), "pool1")   # 6x8x8
    h = g.maxpool(g.relu(g.conv(h, "conv2", 16, kernel=5, pads=0), "relu2"), "pool2")    # 16x2x2
    h = g.relu(g.gemm(g.flatten(h, "flatten"), "fc1", 32), "relu3")
    return g.softmax(g.gemm(h, "fc2", 10), "softmax")


# ---- a model ming refuses (not registered: every zoo model compiles) ----------

def rows_and_columns_swapped() -> onnx.ModelProto:
    """A Transpose between two convs that swaps rows and columns: it moves values between pixels."""
    g = _Graph("rows_and_columns_swapped", (1, 4, 8, 8))
    h = g.transpose(g.conv("x", "conv1", 4, kernel=3, pads=1), "swap_hw", [0, 1, 3, 2])
    return g.finish(g.conv(h, "conv2", 4, kernel=1))


# ---- the README example (builder lives in examples/make_example.py) -------

def _load_example_module():
    spec = importlib.util.spec_from_file_location("ming_examples_make_example", _EXAMPLE_SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


_example = _load_example_module()
_add("tiny_cnn", tuple(_example.INPUT_SHAPE), _example.build_tiny_cnn,
     ["network", "example", "conv", "maxpool", "fc", "softmax"])


# --------------------------------------------------------------------------
# Public helpers
# --------------------------------------------------------------------------

def _get(model: ZooModel | str) -> ZooModel:
    return MODELS[model] if isinstance(model, str) else model


def output_shape(model: ZooModel | str) -> tuple[int, ...]:
    """Expected shape of output ``"y"``."""
    return _OUTPUT_SHAPES[_get(model).name]


def random_input(model: ZooModel | str, seed: int) -> np.ndarray:
    """Seeded float32 input (standard normal * INPUT_SCALE) of the model's input shape."""
    shape = _get(model).input_shape
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * INPUT_SCALE).astype(np.float32)


def calibration_data(model: ZooModel | str) -> list[dict[str, np.ndarray]]:
    """The 8 seeded samples used to calibrate every quantized model."""
    shape = _get(model).input_shape
    rng = np.random.default_rng(CALIB_SEED)
    return [{"x": (rng.standard_normal(shape) * INPUT_SCALE).astype(np.float32)}
            for _ in range(CALIB_SAMPLES)]


# quantize_static's options for every test model: int8 QDQ; 7-bit weights where ORT's kernels would
# saturate, so that "bit-exact with onnxruntime" compares with exact integer arithmetic on every CPU.
QUANTIZE_OPTIONS = {"reduce_range": saturates()}  # ming_py.ort_session: x86 without VNNI


def quantize_float_model(model: onnx.ModelProto, out: pathlib.Path, input_shape: Sequence[int],
                         per_channel: bool = False, seed: int = CALIB_SEED,
                         options: dict | None = None, quant_format: str = "QDQ", activation_type: str = "QInt8",
                         weight_type: str = "QInt8") -> pathlib.Path:
    """Quantize a float model (input "x") at ``out``, calibrated on seeded random data: int8 QDQ by default;
    ``quant_format`` names a ``QuantFormat`` ("QDQ", "QOperator"), the types name ``QuantType``s ("QInt8",
    "QUInt8")."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    rng = np.random.default_rng(seed)
    data = [{"x": (rng.standard_normal(tuple(input_shape)) * INPUT_SCALE).astype(np.float32)}
            for _ in range(CALIB_SAMPLES)]

    class _Reader(CalibrationDataReader):
        def __init__(self):
            self._it = iter(data)

        def get_next(self):
            return next(self._it, None)

    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        float_path = pathlib.Path(tmp) / "float.onnx"
        onnx.save(model, str(float_path))
        quantize_static(str(float_path), str(out), _Reader(), quant_format=QuantFormat[quant_format],
                        activation_type=QuantType[activation_type], weight_type=QuantType[weight_type],
                        per_channel=per_channel, **(QUANTIZE_OPTIONS if options is None else options))
    return out


def quantized_model(name: str, directory: pathlib.Path, per_channel: bool = False, quant_format: str = "QDQ",
                    activation_type: str = "QInt8", weight_type: str = "QInt8") -> pathlib.Path:
    """Quantize float model ``name`` to ``<directory>/<name>[_pc][_<format>_<types>].onnx`` (int8 QDQ has no
    format suffix) and return the path."""
    zm = MODELS[name]
    formats = (quant_format, activation_type, weight_type)
    suffix = "" if formats == ("QDQ", "QInt8", "QInt8") else "_" + "_".join(formats)
    out = pathlib.Path(directory) / f"{name}{'_pc' if per_channel else ''}{suffix}.onnx"
    return quantize_float_model(zm.build(), out, zm.input_shape, per_channel, quant_format=quant_format,
                                activation_type=activation_type, weight_type=weight_type)
