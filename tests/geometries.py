"""Generated layer geometries: one- to three-layer int8 models in every frontend, built, scheduled, C-simulated
and compared bit for bit with `ming reference` and the framework.

A `Case` is a model (its input map and layers), a frontend (ONNX QDQ or QOperator with int8 or uint8
activations, per-tensor or per-channel weights, quantized by onnxruntime's `quantize_static`; or a TFLite
flatbuffer written directly, as tests/tflite_models.py does) and a schedule (ming's default, a random one
drawn by tests/emit_helpers.random_schedule, or the ILP's under `--set` pins). `check_case(case, tmp)` runs it:

    the framework (onnxruntime with its default graph optimizations; LiteRT's BUILTIN_REF kernels)
        == `ming reference` (ming_py/reference.py)
        == the C-simulation of the built design (ming_py.csim.run_csim, one thread per process)

on a random input and an extreme one (every value at the ends of the input's int8/uint8 range), and returns an
`Outcome`: equal, refused (a MingError before anything ran: an unsupported geometry), differs (which
comparison, on which input, how many values) or crashed (any other exception, a failed or deadlocked
C-simulation, a C-simulated counter leaving its declared width).

`cases(frontend=..., family=...)` is the hypothesis strategy; tests/test_generated_geometries.py runs a fixed
seed of it in CI and benchmarks/geometries.py runs more on demand.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
import traceback
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

import tflite_models
import zoo
from ming_py.ort_session import onnxruntime_session

ONNX_FRONTENDS = ("qdq_int8", "qdq_uint8", "qoperator_int8", "qoperator_uint8")
FRONTENDS = ONNX_FRONTENDS + ("tflite",)
# the layer a case is drawn around; every case has one, other layers may stand before or after it
FAMILIES = ("conv", "depthwise", "maxpool", "avgpool", "dense", "global_avgpool", "join")
SCHEDULES = ("default", "random", "ilp")
QUANT_FORMATS = {"qdq_int8": ("QDQ", "QInt8"), "qdq_uint8": ("QDQ", "QUInt8"),
                 "qoperator_int8": ("QOperator", "QInt8"), "qoperator_uint8": ("QOperator", "QUInt8")}

# the most values one map of a generated model holds (the import, the ILP and g++ take the time of a case,
# a few seconds; the C-simulation of such maps well under one)
MAX_VALUES = 24_576
MAX_SIDE = 128
PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 61, 67, 127)

Padding = Union[str, tuple[int, int, int, int]]  # "same", "valid", or (top, left, bottom, right)


# ---- layers ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Conv:
    """A convolution: `groups` groups (1: a full conv), or depthwise (`multiplier` outputs per input channel:
    ONNX Conv with group = channels, TFLite DEPTHWISE_CONV_2D with depth_multiplier)."""

    out_channels: int = 8
    kernel: tuple[int, int] = (3, 3)
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    padding: Padding = "valid"
    groups: int = 1
    depthwise: bool = False
    multiplier: int = 1
    relu: bool = False


@dataclass(frozen=True)
class Pool:
    """MaxPool or AveragePool (`count_include_pad` and `ceil_mode` for ONNX only)."""

    kind: str = "max"  # "max" | "avg"
    kernel: tuple[int, int] = (2, 2)
    stride: tuple[int, int] = (2, 2)
    padding: Padding = "valid"
    count_include_pad: int = 0
    ceil_mode: int = 0


@dataclass(frozen=True)
class Dense:
    """Gemm (ONNX, after a Flatten of a map) or FULLY_CONNECTED (TFLite, after a RESHAPE of a map)."""

    units: int = 10
    relu: bool = False


@dataclass(frozen=True)
class GlobalAvg:
    """GlobalAveragePool (ONNX) or MEAN over H and W (TFLite) as "mean"; an average pool as large as the
    map as "window"."""

    style: str = "mean"


@dataclass(frozen=True)
class Join:
    """Two branches of the same map (each zero layers, i.e. the map itself, or one), added or concatenated."""

    kind: str = "add"  # "add" | "concat"
    left: tuple = ()
    right: tuple = ()
    relu: bool = False


Layer = Union[Conv, Pool, Dense, GlobalAvg, Join]


@dataclass(frozen=True)
class Case:
    """One generated test: a model in a frontend and the schedule it is built with.

    `shape` is the input map (channels, height, width), or (features,) for a vector. `schedule`: "default"
    (one lane, nothing unrolled), "random" (`emit_helpers.random_schedule` choosing by `schedule_seed` and
    `policy`, see `Chooser`: lanes and unroll factors up to `max_factor`, multipliers, shared requantizers, FIFO
    depths, and line buffers in BRAM or URAM), "ilp" (the ILP's design under `--set` pins drawn by
    `schedule_seed`, or `pins`). Where branches meet, the FIFOs are those ming sizes for the schedule."""

    frontend: str
    shape: tuple[int, ...]
    layers: tuple
    per_channel: bool = True
    schedule: str = "default"
    schedule_seed: int = 0
    policy: str = "uniform"
    max_factor: int = 8
    family: str = ""
    pins: tuple[tuple[str, int | str], ...] = ()  # "ilp": these `--set` pins instead of drawn ones

    def describe(self) -> str:
        quant = "" if self.frontend == "tflite" else (" pc" if self.per_channel else " pt")
        layers = " -> ".join(describe_layer(layer) for layer in self.layers)
        sched = self.schedule if self.schedule == "default" else \
            f"{self.schedule}({self.schedule_seed}{'' if self.policy == 'uniform' else ', ' + self.policy}" \
            f"{f', max {self.max_factor}' if self.schedule == 'random' else ''})"
        if self.pins:
            sched = "ilp, --set " + " ".join(f"{k}={v}" for k, v in self.pins)
        return f"{self.frontend}{quant} {'x'.join(map(str, self.shape))}: {layers} [{sched}]"


def _pair_text(pair) -> str:
    return f"{pair[0]}x{pair[1]}"


def _pad_text(padding: Padding) -> str:
    return padding if isinstance(padding, str) else "p" + "/".join(map(str, padding))


def describe_layer(layer) -> str:
    if isinstance(layer, Conv):
        what = f"dw*{layer.multiplier}" if layer.depthwise else \
            (f"conv{layer.out_channels}" + (f" g{layer.groups}" if layer.groups > 1 else ""))
        extra = (f" s{_pair_text(layer.stride)}" if layer.stride != (1, 1) else "") + \
                (f" d{_pair_text(layer.dilation)}" if layer.dilation != (1, 1) else "")
        return f"{what} {_pair_text(layer.kernel)}{extra} {_pad_text(layer.padding)}{' relu' if layer.relu else ''}"
    if isinstance(layer, Pool):
        extra = (" cip" if layer.count_include_pad else "") + (" ceil" if layer.ceil_mode else "")
        return (f"{layer.kind}pool {_pair_text(layer.kernel)} s{_pair_text(layer.stride)} "
                f"{_pad_text(layer.padding)}{extra}")
    if isinstance(layer, Dense):
        return f"dense{layer.units}{' relu' if layer.relu else ''}"
    if isinstance(layer, GlobalAvg):
        return f"gap({layer.style})"
    if isinstance(layer, Join):
        def branch(layers):
            return " -> ".join(describe_layer(x) for x in layers) or "id"
        return f"{layer.kind}[{branch(layer.left)} | {branch(layer.right)}]{' relu' if layer.relu else ''}"
    raise TypeError(layer)


# ---- geometry ------------------------------------------------------------------------------------------

def _span(kernel: int, dilation: int) -> int:
    return (kernel - 1) * dilation + 1


def same_pads(size: int, kernel: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """TFLite's (and ONNX SAME_UPPER's) padding: ceil(size / stride) outputs, the odd pad at the end."""
    out = -(-size // stride)
    total = max((out - 1) * stride + _span(kernel, dilation) - size, 0)
    return total // 2, total - total // 2


def pads_of(layer, height: int, width: int) -> tuple[int, int, int, int]:
    padding = layer.padding
    if padding == "valid":
        return (0, 0, 0, 0)
    if padding == "same":
        dilation = getattr(layer, "dilation", (1, 1))
        top, bottom = same_pads(height, layer.kernel[0], layer.stride[0], dilation[0])
        left, right = same_pads(width, layer.kernel[1], layer.stride[1], dilation[1])
        return (top, left, bottom, right)
    return tuple(padding)


def _out_size(size: int, pad: int, kernel: int, stride: int, dilation: int, ceil_mode: int) -> int:
    room = size + pad - _span(kernel, dilation)
    if room < 0:
        return 0
    return (-(-room // stride) if ceil_mode else room // stride) + 1


def window_output(layer, height: int, width: int) -> tuple[int, int]:
    top, left, bottom, right = pads_of(layer, height, width)
    dilation = getattr(layer, "dilation", (1, 1))
    ceil_mode = getattr(layer, "ceil_mode", 0)
    return (_out_size(height, top + bottom, layer.kernel[0], layer.stride[0], dilation[0], ceil_mode),
            _out_size(width, left + right, layer.kernel[1], layer.stride[1], dilation[1], ceil_mode))


def output_shape(layer, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape after `layer` of a map (C, H, W) or vector (F,); ValueError if the layer does not fit."""
    if isinstance(layer, Dense):
        return (layer.units,)
    if len(shape) != 3:
        raise ValueError(f"{describe_layer(layer)} needs a map, not a vector")
    channels, height, width = shape
    if isinstance(layer, GlobalAvg):
        return (channels,)  # only a dense layer follows (TFLite's MEAN leaves a vector)
    if isinstance(layer, Join):
        left, right = shape, shape
        for inner in layer.left:
            left = output_shape(inner, left)
        for inner in layer.right:
            right = output_shape(inner, right)
        if left[1:] != right[1:] or (layer.kind == "add" and left != right):
            raise ValueError(f"branches of {left} and {right} do not {layer.kind}")
        return (left[0] + right[0] if layer.kind == "concat" else left[0], *left[1:])
    oh, ow = window_output(layer, height, width)
    if oh < 1 or ow < 1:
        raise ValueError(f"{describe_layer(layer)} does not fit a {height}x{width} map")
    if isinstance(layer, Pool):
        return (channels, oh, ow)
    if layer.depthwise:
        return (channels * layer.multiplier, oh, ow)
    if channels % layer.groups or layer.out_channels % layer.groups:
        raise ValueError(f"{layer.groups} groups do not divide {channels} -> {layer.out_channels}")
    return (layer.out_channels, oh, ow)


def shapes_of(case: Case) -> list[tuple[int, ...]]:
    shapes = [tuple(case.shape)]
    for layer in case.layers:
        shapes.append(output_shape(layer, shapes[-1]))
    return shapes


def valid_case(case: Case, max_values: int = MAX_VALUES) -> bool:
    try:
        shapes = shapes_of(case)
    except ValueError:
        return False
    return all(math.prod(s) <= max_values for s in shapes) and _frontend_allows(case)


def _walk(layers):
    for layer in layers:
        yield layer
        if isinstance(layer, Join):
            yield from _walk(layer.left)
            yield from _walk(layer.right)


def _frontend_allows(case: Case) -> bool:
    """What each format can express: TFLite pads SAME or VALID, its pools have no count_include_pad or
    ceil_mode; ONNX pools pad less than their window (onnxruntime's rule) and take ceil_mode only where
    onnxruntime and the formula agree (no window starting in the end padding)."""
    if case.frontend == "tflite":
        return all(isinstance(layer.padding, str) for layer in _walk(case.layers) if isinstance(layer, (Conv, Pool))) \
            and not any(layer.count_include_pad or layer.ceil_mode for layer in _walk(case.layers)
                        if isinstance(layer, Pool))
    return _onnx_pools_allowed(case.layers, tuple(case.shape))


def _onnx_pools_allowed(layers, shape) -> bool:
    for layer in layers:
        if isinstance(layer, Join) and not (_onnx_pools_allowed(layer.left, shape) and
                                            _onnx_pools_allowed(layer.right, shape)):
            return False
        if isinstance(layer, Pool):
            top, left, bottom, right = pads_of(layer, shape[1], shape[2])
            if max(top, bottom) >= layer.kernel[0] or max(left, right) >= layer.kernel[1]:
                return False
            if layer.ceil_mode:
                oh, ow = window_output(layer, shape[1], shape[2])
                if (oh - 1) * layer.stride[0] >= shape[1] + top or (ow - 1) * layer.stride[1] >= shape[2] + left:
                    return False
        shape = output_shape(layer, shape)
    return True


# ---- strategies ------------------------------------------------------------------------------------------

def sides(low: int = 1, high: int = MAX_SIDE):
    """A map side: one pixel, small ones, primes, powers of two and their neighbours (a counter of 0..2^k - 1
    is k bits: 2^k - 1 positions and one more overflow it), any up to `high`."""
    special = [s for s in (1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 15, 16, 17, 31, 32, 33, 61, 63, 64, 127, 128) +
               PRIMES if low <= s <= high]
    return st.one_of(st.sampled_from(special), st.integers(low, min(high, 24)), st.integers(low, high))


def channel_counts(high: int = 64):
    return st.one_of(st.sampled_from([c for c in (1, 2, 3, 4, 5, 7, 8, 12, 16, 24, 32, 64, 128) if c <= high]),
                     st.integers(1, high))


def out_channel_counts(high: int = 32):
    """A layer's output channels: rarely one (a one-channel map inside a network is refused by name)."""
    return st.one_of(st.sampled_from([c for c in (1, 2, 3, 4, 5, 7, 8, 12, 16, 24, 32, 64) if c <= high]),
                     st.integers(2, high))


# MobileNet's later layers: many channels over a small map, 3x3 windows (most often SAME, stride 1 or 2). With
# the most lanes and shared requantizers a loop then runs its drain past the map's last position: the regime
# of a counter's width (MobileNetV1-0.25's 6x6 depthwise).
LATE_CHANNELS = (16, 24, 32, 48, 64, 96, 128)
LATE_SIDES = (3, 3, 5, 6, 6, 7, 7, 2, 4, 8, 12, 14)  # MobileNet's last maps at 96 to 224 pixels most often


def _kernels(draw, high: int = 11, square_bias: bool = True) -> tuple[int, int]:
    kh = draw(st.one_of(st.sampled_from([1, 2, 3, 3, 5, 7]), st.integers(1, high)))
    if square_bias and draw(st.booleans()):
        return kh, kh
    kw = draw(st.one_of(st.sampled_from([1, 2, 3, 5]), st.integers(1, high)))
    return kh, kw


def _padding(draw, frontend: str, kernel, dilation=(1, 1), pool: bool = False) -> Padding:
    modes = ["same", "valid"] if frontend == "tflite" else ["same", "valid", "symmetric", "asymmetric"]
    mode = draw(st.sampled_from(modes))
    if mode in ("same", "valid"):
        return mode
    span = (_span(kernel[0], dilation[0]), _span(kernel[1], dilation[1]))
    limit = (kernel[0] - 1, kernel[1] - 1) if pool else (span[0], span[1])
    limit = (min(limit[0], 4), min(limit[1], 4))
    if mode == "symmetric":
        ph, pw = draw(st.integers(0, limit[0])), draw(st.integers(0, limit[1]))
        return (ph, pw, ph, pw)
    return (draw(st.integers(0, limit[0])), draw(st.integers(0, limit[1])),
            draw(st.integers(0, limit[0])), draw(st.integers(0, limit[1])))


@st.composite
def conv_layers(draw, frontend: str, channels: int, depthwise: bool | None = None, late: bool = False,
                stem: bool = False):
    """A Conv over `channels` input channels: full, grouped or depthwise (multiplier 1-8); `late`: a 3x3 (or 1x1,
    5x5) window of stride 1 or 2, as MobileNet's later layers."""
    kind = draw(st.sampled_from(["full", "grouped", "depthwise"])) if depthwise is None else \
        ("depthwise" if depthwise else draw(st.sampled_from(["full", "full", "grouped"])))
    dilation = (1, 1)
    if late:
        # (a 1x1 depthwise conv is a per-channel scale, not a window: IREE lowers it so, ming refuses it)
        kernel = draw(st.sampled_from([(3, 3), (3, 3), (5, 5)] if kind == "depthwise" else
                                      [(3, 3), (3, 3), (3, 3), (1, 1), (1, 1), (5, 5)]))
        stride = draw(st.sampled_from([(1, 1), (2, 2)]))
        padding = draw(st.sampled_from(["same", "same", "valid"] if frontend == "tflite" else
                                       ["same", "same", "valid", (1, 1, 1, 1), (0, 0, 1, 1)]))
    else:
        kernel = _kernels(draw)
        stride = draw(st.sampled_from([(1, 1), (2, 2), (1, 2), (2, 1), (3, 3), (4, 4)]) |
                      st.tuples(st.integers(1, 4), st.integers(1, 4)))
        if draw(st.integers(0, 3)) == 0:
            dilation = draw(st.tuples(st.integers(1, 3), st.integers(1, 3)))
        padding = _padding(draw, frontend, kernel, dilation)
    relu = draw(st.booleans())
    if kind == "depthwise":
        multiplier = 1 if late else draw(st.sampled_from([1, 1, 2, 8]) | st.integers(1, 8))
        if stem:
            multiplier = draw(st.sampled_from([2, 4, 8, 8]) | st.integers(1, 8))
        multiplier = max(1, min(multiplier, 256 // channels))  # at most 256 output channels
        return Conv(channels * multiplier, kernel, stride, dilation, padding, channels, True, multiplier, relu)
    if kind == "grouped":
        groups = draw(st.sampled_from([d for d in range(1, channels + 1) if channels % d == 0]))
        per_group = draw(st.integers(1, 4))
        return Conv(groups * per_group, kernel, stride, dilation, padding, groups, False, 1, relu)
    return Conv(draw(st.sampled_from(LATE_CHANNELS) if late else out_channel_counts(32)), kernel, stride, dilation,
                padding, 1, False, 1, relu)


@st.composite
def pool_layers(draw, frontend: str, kind: str | None = None):
    kind = kind or draw(st.sampled_from(["max", "avg"]))
    kernel = _kernels(draw, high=8)
    if kernel == (1, 1):
        kernel = (1, 2)  # a 1x1 pool is an identity: IREE folds it away
    stride = draw(st.sampled_from([kernel, (1, 1), (2, 2)]) | st.tuples(st.integers(1, 4), st.integers(1, 4)))
    padding = _padding(draw, frontend, kernel, pool=True)
    count_include_pad = ceil_mode = 0
    if frontend != "tflite":
        if kind == "avg":
            count_include_pad = draw(st.integers(0, 1))
        ceil_mode = draw(st.integers(0, 1)) if draw(st.integers(0, 2)) == 0 else 0
    return Pool(kind, kernel, stride, padding, count_include_pad, ceil_mode)


@st.composite
def window_layers(draw, frontend: str, channels: int):
    which = draw(st.sampled_from(["conv", "depthwise", "maxpool", "avgpool"]))
    if which in ("maxpool", "avgpool"):
        return draw(pool_layers(frontend, which[:3]))
    return draw(conv_layers(frontend, channels, depthwise=which == "depthwise"))


def _same_grid_conv(layer, out_channels: int, relu: bool):
    """A full conv whose output grid is the window layer's (its kernel, stride, dilation and padding)."""
    return Conv(out_channels, layer.kernel, layer.stride, getattr(layer, "dilation", (1, 1)), layer.padding,
                1, False, 1, relu)


@st.composite
def join_layers(draw, frontend: str, shape: tuple[int, int, int]):
    """Add or Concat of two branches: a window layer, and the map itself (where the window keeps the shape)
    or a conv (full or depthwise) with the same output grid."""
    channels = shape[0]
    kind = draw(st.sampled_from(["add", "concat"]))
    # a pool shortcut beside a conv (ShuffleNet's average pool, Inception's max pool) most often
    left = draw(st.one_of(pool_layers(frontend, "avg"), pool_layers(frontend), window_layers(frontend, channels)))
    try:
        left_shape = output_shape(left, shape)
    except ValueError:
        left_shape = None
    options = ["conv"]
    if left_shape is not None and left_shape[1:] == shape[1:] and (kind == "concat" or left_shape == shape):
        options.append("identity")
    if left_shape is not None and left_shape[0] % channels == 0:
        options.append("depthwise")
    right_kind = draw(st.sampled_from(options))
    relu = draw(st.booleans())
    if right_kind == "identity":
        right = ()
    else:
        out = left_shape[0] if (kind == "add" and left_shape) else draw(out_channel_counts(32))
        if right_kind == "depthwise":
            multiplier = (left_shape[0] // channels) if kind == "add" else draw(st.integers(1, 4))
            right = (Conv(channels * multiplier, left.kernel, left.stride, getattr(left, "dilation", (1, 1)),
                          left.padding, channels, True, multiplier, draw(st.booleans())),)
        else:
            right = (_same_grid_conv(left, out, draw(st.booleans())),)
    if draw(st.booleans()):
        left, right = right, (left,)
        return Join(kind, left, right, relu)
    return Join(kind, (left,), right, relu)


def _pre_layer(draw, frontend: str, channels: int):
    """A shape-keeping conv before the focus layer (its input a quantized activation, as in a network)."""
    kernel = draw(st.sampled_from([(1, 1), (3, 3)]))
    return Conv(draw(out_channel_counts(32)), kernel, (1, 1), (1, 1), "same", 1, False, 1, draw(st.booleans()))


@st.composite
def _post_layer(draw, frontend: str, shape):
    if len(shape) == 1:
        return Dense(draw(st.integers(1, 24)), draw(st.booleans()))
    which = draw(st.sampled_from(["conv1x1", "window", "gap", "dense"]))
    if which == "conv1x1":
        return Conv(draw(out_channel_counts(32)), (1, 1), draw(st.sampled_from([(1, 1), (2, 2)])), (1, 1), "valid",
                    1, False, 1, draw(st.booleans()))
    if which == "window":
        return draw(window_layers(frontend, shape[0]))
    if which == "gap":
        return GlobalAvg(draw(st.sampled_from(["mean", "window"])))
    return Dense(draw(st.integers(1, 24)), draw(st.booleans()))


@st.composite
def _focus(draw, family: str, frontend: str, channels: int, shape_hint, regime: str = "any"):
    if family == "conv":
        return draw(conv_layers(frontend, channels, depthwise=False, late=regime == "late"))
    if family == "depthwise":
        return draw(conv_layers(frontend, channels, depthwise=True, late=regime == "late", stem=regime == "stem"))
    if family in ("maxpool", "avgpool"):
        return draw(pool_layers(frontend, family[:3]))
    if family == "dense":
        return Dense(draw(st.integers(1, 32)), draw(st.booleans()))
    if family == "global_avgpool":
        return GlobalAvg(draw(st.sampled_from(["mean", "window"])))
    return draw(join_layers(frontend, shape_hint))


def _minimum_side(layer, axis: int) -> int:
    """The least input side on which `layer` has an output (its padding as drawn: SAME always fits)."""
    if isinstance(layer, Join):
        return max([_minimum_side(x, axis) for x in layer.left + layer.right] or [1])
    if not isinstance(layer, (Conv, Pool)):
        return 1
    if layer.padding == "same":
        return 1
    pad = 0 if layer.padding == "valid" else layer.padding[axis] + layer.padding[axis + 2]
    return max(_span(layer.kernel[axis], getattr(layer, "dilation", (1, 1))[axis]) - pad, 1)


@st.composite
def cases(draw, frontend: str | None = None, family: str | None = None, schedule: str | None = None,
          max_values: int = MAX_VALUES):
    """A `Case`: a focus layer of `family` (drawn if None), maybe a conv before it and a layer after it, over an
    input map that fits it, in `frontend`, under a schedule."""
    frontend = frontend or draw(st.sampled_from(FRONTENDS))
    family = family or draw(st.sampled_from(FAMILIES))
    vector_input = family == "dense" and draw(st.integers(0, 2)) == 0
    # regimes of a conv or depthwise focus layer: "late" (MobileNet's later layers, above), "stem" (a depthwise
    # conv straight on a one- to three-channel input, as a keyword spotter's or a grayscale net's first layer,
    # most often with a depth multiplier), or anything
    regime = draw(st.sampled_from({"conv": ["late", "late", "any"], "depthwise": ["late", "late", "stem", "any"]}
                                  .get(family, ["any"])))
    late = regime == "late"
    if late:
        channels = draw(st.sampled_from(LATE_CHANNELS if family == "depthwise" else LATE_CHANNELS[:5]))
    elif regime == "stem":
        channels = draw(st.sampled_from([1, 1, 2, 3]))
    else:
        channels = draw(channel_counts(128 if family == "depthwise" else 32))
    pre = draw(st.booleans()) and not vector_input and regime != "stem"
    focus_channels = channels
    pre_layer = None
    if pre:
        pre_layer = _pre_layer(draw, frontend, channels)
        focus_channels = pre_layer.out_channels
        if (late or family == "depthwise") and draw(st.booleans()):  # keep many channels
            pre_layer = Conv(channels, pre_layer.kernel, (1, 1), (1, 1), "same", 1, False, 1, pre_layer.relu)
            focus_channels = channels
    if vector_input:
        shape = (channels * draw(st.sampled_from([1, 2, 4, 8])),)
        focus = draw(_focus(family, frontend, focus_channels, None))
    else:
        if family == "join":
            # a join's branches need the map's shape: draw the sides first, then the layers that fit
            height, width = draw(sides(1, 48)), draw(sides(1, 48))
            focus = draw(_focus(family, frontend, focus_channels, (focus_channels, height, width)))
            height = max(height, _minimum_side(focus, 0))
            width = max(width, _minimum_side(focus, 1))
        else:
            focus = draw(_focus(family, frontend, focus_channels, None, regime))
            side = st.sampled_from(LATE_SIDES) if late else sides()
            height = draw(side)
            width = height if late and draw(st.integers(0, 3)) else draw(side)  # MobileNet's maps are square
            height, width = max(height, _minimum_side(focus, 0)), max(width, _minimum_side(focus, 1))
            if family == "global_avgpool" or family == "dense":
                height, width = min(height, 32), min(width, 32)
        # keep each map within max_values: shrink the larger side first
        while channels * height * width > max_values or focus_channels * height * width > max_values:
            if height >= width and height > _minimum_side(focus, 0):
                height = max(_minimum_side(focus, 0), height // 2)
            elif width > _minimum_side(focus, 1):
                width = max(_minimum_side(focus, 1), width // 2)
            else:
                break
        shape = (channels, height, width)
    if pre_layer is None and frontend != "tflite" and not isinstance(focus, (Conv, Dense)):
        # onnxruntime's quantizer leaves a pool of the float input in float (a graph of pools alone unquantized)
        pre_layer = Conv(channels, (1, 1), (1, 1), (1, 1), "same", 1, False, 1, draw(st.booleans()))
    layers = ([pre_layer] if pre_layer else []) + [focus]
    if len(layers) + (1 if isinstance(focus, Join) else 0) < 3 and draw(st.booleans()):
        try:
            after = output_shape(focus, output_shape(pre_layer, shape) if pre_layer else shape)
            layers.append(draw(_post_layer(frontend, after)))
        except ValueError:
            pass
    # the late regime most often under the most lanes and the fewest shared requantizers (the longest drain)
    schedules = ["default", "random", "random", "random", "ilp"] if not late else ["random"] * 4 + ["ilp"]
    policy = draw(st.sampled_from(["drain", "drain", "edges"] if late else POLICIES))
    case = Case(frontend=frontend, shape=shape, layers=tuple(layers),
                per_channel=True if frontend == "tflite" else draw(st.booleans()),
                schedule=schedule or draw(st.sampled_from(schedules)),
                schedule_seed=draw(st.integers(0, 2 ** 16)), policy=policy,
                max_factor=draw(st.sampled_from([8, 8, 16])), family=family)
    # a post layer that does not fit is dropped; anything else that does not fit is not drawn
    if not valid_case(case, max_values) and len(case.layers) > 1 and not isinstance(case.layers[-1], Join) \
            and case.layers[-1] is not focus:
        case = Case(**{**case.__dict__, "layers": case.layers[:-1]})
    assume(valid_case(case, max_values))
    return case


# ---- model builders --------------------------------------------------------------------------------------

def _model_seed(case: Case) -> int:
    return zlib.crc32(repr((case.shape, case.layers)).encode())


def onnx_float_model(case: Case):
    """The float ONNX model of `case` (zoo's layer builder: seeded He-like weights, opset 17)."""
    g = zoo._Graph(f"geometry_{_model_seed(case):08x}", (1, *case.shape))
    counter = iter(range(1000))

    def layer(x: str, spec) -> str:
        index = next(counter)
        shape = g.shapes[x]
        if isinstance(spec, Dense):
            if len(shape) != 2:
                x = g.flatten(x, f"flatten{index}")
            y = g.gemm(x, f"fc{index}", spec.units)
            return g.relu(y, f"relu{index}") if spec.relu else y
        if isinstance(spec, GlobalAvg):
            if spec.style == "mean":
                return g.gap(x, f"gap{index}")
            return g._pool("AveragePool", x, f"gap{index}", shape[2:], (1, 1), 0)
        if isinstance(spec, Join):
            left, right = x, x
            for inner in spec.left:
                left = layer(left, inner)
            for inner in spec.right:
                right = layer(right, inner)
            y = g.add(left, right, f"add{index}") if spec.kind == "add" else g.concat([left, right], f"concat{index}")
            return g.relu(y, f"relu{index}") if spec.relu else y
        pads = list(pads_of(spec, shape[2], shape[3]))
        if isinstance(spec, Pool):
            attrs = {"ceil_mode": 1} if spec.ceil_mode else {}
            if spec.kind == "max":
                return g._pool("MaxPool", x, f"maxpool{index}", spec.kernel, spec.stride, pads, **attrs)
            return g._pool("AveragePool", x, f"avgpool{index}", spec.kernel, spec.stride, pads,
                           count_include_pad=spec.count_include_pad, **attrs)
        group = shape[1] if spec.depthwise else spec.groups
        y = g.conv(x, f"{'dw' if spec.depthwise else 'conv'}{index}", spec.out_channels, kernel=spec.kernel,
                   stride=spec.stride, pads=pads, dilation=spec.dilation, group=group)
        return g.relu(y, f"relu{index}") if spec.relu else y

    x = "x"
    for spec in case.layers:
        x = layer(x, spec)
    return g.finish(x)


def onnx_model(case: Case, directory: Path) -> Path:
    """`case` quantized by onnxruntime's quantize_static in its format (int8 weights, per tensor or channel)."""
    quant_format, activation_type = QUANT_FORMATS[case.frontend]
    return zoo.quantize_float_model(onnx_float_model(case), Path(directory) / "model.onnx", (1, *case.shape),
                                    per_channel=case.per_channel, quant_format=quant_format,
                                    activation_type=activation_type)


def _float_windows(x: np.ndarray, kernel, stride, dilation, pads, value: float, out_hw) -> np.ndarray:
    """Windows [N, OH, OW, C, KH, KW] of an NHWC batch padded with `value`."""
    top, left, bottom, right = pads
    padded = np.pad(x, [(0, 0), (top, bottom), (left, right), (0, 0)], constant_values=value)
    rows = np.arange(out_hw[0])[:, None] * stride[0] + np.arange(kernel[0])[None, :] * dilation[0]
    cols = np.arange(out_hw[1])[:, None] * stride[1] + np.arange(kernel[1])[None, :] * dilation[1]
    # [N, OH, KH, OW, KW, C] -> [N, OH, OW, C, KH, KW]
    windows = padded[:, rows[:, :, None, None], cols[None, None, :, :], :]
    return windows.transpose(0, 1, 3, 5, 2, 4)


class GeometryTflite(tflite_models.TfliteBuilder):
    """TfliteBuilder with the geometries the generated cases draw: non-square kernels and strides, dilation,
    groups, depth multipliers."""

    def conv_layer(self, x, spec: Conv, name: str):
        n, h, w, c = x.calibration.shape
        pads = pads_of(spec, h, w)
        oh, ow = window_output(spec, h, w)
        windows = _float_windows(x.calibration, spec.kernel, spec.stride, spec.dilation, pads, 0.0, (oh, ow))
        kh, kw = spec.kernel
        if spec.depthwise:
            channels = c * spec.multiplier
            w_index, w_float, w_scale = self._weights(f"{name}_weights", (1, kh, kw, channels), 3, True)
            out = np.einsum("nhwcij,ijcm->nhwcm", windows, w_float[0].reshape(kh, kw, c, spec.multiplier))
            out = out.reshape(n, oh, ow, channels)
        else:
            channels, groups = spec.out_channels, spec.groups
            w_index, w_float, w_scale = self._weights(f"{name}_weights", (channels, kh, kw, c // groups), 0, True)
            grouped = windows.reshape(n, oh, ow, groups, c // groups, kh, kw)
            weights = w_float.reshape(groups, channels // groups, kh, kw, c // groups)
            out = np.einsum("nhwgcij,goijc->nhwgo", grouped, weights).reshape(n, oh, ow, channels)
        b_index, b_float = self._bias(f"{name}_bias", x, w_scale, channels)
        y = self._activation(f"{name}_out", (out + b_float).astype(np.float32), "relu" if spec.relu else None)
        schema = tflite_models.schema
        if spec.depthwise:
            options = schema.DepthwiseConv2DOptionsT()
            options.depthMultiplier = spec.multiplier
            kind, options_type = "DEPTHWISE_CONV_2D", schema.BuiltinOptions.DepthwiseConv2DOptions
        else:
            options = schema.Conv2DOptionsT()
            kind, options_type = "CONV_2D", schema.BuiltinOptions.Conv2DOptions
        options.padding = schema.Padding.SAME if spec.padding == "same" else schema.Padding.VALID
        options.strideH, options.strideW = spec.stride
        options.dilationHFactor, options.dilationWFactor = spec.dilation
        options.fusedActivationFunction = tflite_models.ACTIVATIONS["relu" if spec.relu else None]
        self._op(kind, [x.index, w_index, b_index], [y.index], options_type, options)
        return y

    def dense_layer(self, x, spec: Dense, name: str):
        """FULLY_CONNECTED with per-tensor weights and a per-tensor bias scale, as the converter writes it (with a
        bias scale per unit LiteRT reads no scale and may refuse the layer in its preparation)."""
        y = self.fully_connected(x, spec.units, activation="relu" if spec.relu else None, name=name)
        bias = self.tensors[self.operators[-1].inputs[2]].quantization
        bias.scale, bias.zeroPoint = bias.scale[:1], bias.zeroPoint[:1]
        return y

    def pool_layer(self, x, spec: Pool, name: str):
        n, h, w, c = x.calibration.shape
        pads = pads_of(spec, h, w)
        oh, ow = window_output(spec, h, w)
        windows = _float_windows(x.calibration, spec.kernel, spec.stride, (1, 1), pads, np.nan, (oh, ow))
        out = np.nanmean(windows, axis=(-2, -1)) if spec.kind == "avg" else np.nanmax(windows, axis=(-2, -1))
        y = self._same_quant(f"{name}_out", x, out.astype(np.float32))
        schema = tflite_models.schema
        options = schema.Pool2DOptionsT()
        options.padding = schema.Padding.SAME if spec.padding == "same" else schema.Padding.VALID
        options.strideH, options.strideW = spec.stride
        options.filterHeight, options.filterWidth = spec.kernel
        options.fusedActivationFunction = tflite_models.ACTIVATIONS[None]
        self._op("AVERAGE_POOL_2D" if spec.kind == "avg" else "MAX_POOL_2D", [x.index], [y.index],
                 schema.BuiltinOptions.Pool2DOptions, options)
        return y


def tflite_model(case: Case, directory: Path) -> Path:
    """`case` as an int8 TFLite flatbuffer (per-channel conv weights, per-tensor dense weights, int8 input and
    output), written directly."""
    b = GeometryTflite(seed=_model_seed(case))
    shape = case.shape
    x = b.input((1, *shape[1:], shape[0]) if len(shape) == 3 else (1, shape[0]))
    counter = iter(range(1000))

    def layer(x, spec):
        index = next(counter)
        if isinstance(spec, Dense):
            if len(x.shape) != 2:
                x = b.reshape(x, (1, math.prod(x.shape[1:])), name=f"flatten{index}")
            return b.dense_layer(x, spec, f"fc{index}")
        if isinstance(spec, GlobalAvg):
            if spec.style == "mean":
                return b.mean(x, name=f"mean{index}")
            return b.pool_layer(x, Pool("avg", tuple(x.shape[1:3]), (1, 1), "valid"), f"gap{index}")
        if isinstance(spec, Join):
            left, right = x, x
            for inner in spec.left:
                left = layer(left, inner)
            for inner in spec.right:
                right = layer(right, inner)
            activation = "relu" if spec.relu else None
            if spec.kind == "add":
                return b.add(left, right, activation=activation, name=f"add{index}")
            _share_concat_quantization(b, left, right, spec)
            y = b.concat([left, right], axis=-1, name=f"concat{index}")
            if spec.relu:  # int8 CONCATENATION has no fused activation: a RELU after it
                y = b.elementwise(y, "RELU", name=f"relu{index}")
            return y
        if isinstance(spec, Pool):
            return b.pool_layer(x, spec, f"pool{index}")
        return b.conv_layer(x, spec, f"conv{index}")

    for spec in case.layers:
        x = layer(x, spec)
    path = Path(directory) / "model.tflite"
    path.write_bytes(b.build([x], "geometry"))
    return path


def _share_concat_quantization(b: GeometryTflite, left, right, spec: Join) -> None:
    """TFLite's int8 CONCATENATION keeps one scale for its inputs: a conv branch takes the other branch's (a
    pool and the map itself keep their input's), two conv branches one covering both."""
    if b.quant[left.index] == b.quant[right.index]:
        return
    convs = [t for t, branch in ((left, spec.left), (right, spec.right)) if branch and isinstance(branch[-1], Conv)]
    if len(convs) == 2:
        b.share_quantization([left, right])
        return
    (conv,) = convs
    other = right if conv is left else left
    scale, zero_point = b.quant[other.index]
    quantization = b.tensors[conv.index].quantization
    quantization.scale, quantization.zeroPoint = [float(scale)], [zero_point]
    b.quant[conv.index] = (scale, zero_point)


def write_model(case: Case, directory: Path) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    return tflite_model(case, directory) if case.frontend == "tflite" else onnx_model(case, directory)


# ---- inputs and the framework ------------------------------------------------------------------------------

def inputs(case: Case, graph) -> dict[str, np.ndarray]:
    """A random input and an extreme one (every value at an end of the input's quantized range)."""
    port = graph.inputs[0]
    shape = port.onnx_shape
    rng = np.random.default_rng(_model_seed(case) ^ 0x5EED)
    signs = rng.integers(0, 2, shape).astype(bool)
    if port.dtype == "int8":
        return {"random": rng.integers(-128, 128, shape).astype(np.int8),
                "extreme": np.where(signs, 127, -128).astype(np.int8)}
    return {"random": (rng.standard_normal(shape) * 1.5).astype(np.float32),
            "extreme": np.where(signs, 1e4, -1e4).astype(np.float32)}


def framework_outputs(case: Case, path: Path, x: np.ndarray) -> list[np.ndarray]:
    """onnxruntime with its default graph optimizations, or LiteRT's reference kernels."""
    if case.frontend == "tflite":
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        interpreter = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        interpreter.allocate_tensors()
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
        interpreter.invoke()
        return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]

    session = onnxruntime_session(str(path))
    return session.run(None, {session.get_inputs()[0].name: x})


# ---- schedules ---------------------------------------------------------------------------------------------

POLICIES = ("uniform", "edges", "drain")


class Chooser:
    """`random.Random`'s `choice` for `emit_helpers.random_schedule`: uniform, or ("edges") among the first,
    second and last of the choices (one lane, two, the most; one requantizer per lane, the fewest shared, the
    most shared), or ("drain") the last (the most lanes; `random_design` then unrolls nothing else and shares
    the fewest requantizers, the longest drain after the last position)."""

    def __init__(self, seed: int, policy: str = "uniform"):
        self.rng = random.Random(seed)
        self.policy = policy

    def choice(self, options):
        options = list(options)
        if self.policy == "drain":
            return options[-1]
        if self.policy == "edges" and len(options) > 3:
            options = [options[0], options[1], options[-1]]
        return self.rng.choice(options)


def _longest_drain(stream_graph, schedule):
    """`schedule` with nothing unrolled but the lanes and the fewest requantizers each MAC process's lanes can
    share (each takes lanes / requantizers iterations per output token)."""
    from dataclasses import replace

    from ming_py.dataflow import Schedule
    from ming_py.epilogues import rule_of
    from ming_py.process_spec import process_spec
    from ming_py.kinds.base import shared_requantizers

    processes = {}
    for p in stream_graph.processes:
        current = schedule.of(p.name)
        tied = set(LANE_LOOPS) | ({"k"} if p.kind == "dense" else set())
        unroll = tuple((loop, factor if loop in tied else 1) for loop, factor in current.unroll)
        lanes_in = [schedule.lanes_of(c) for c in p.inputs]
        lanes_out = [schedule.lanes_of(c) for c in p.outputs]
        shared = ()
        if rule_of(p.epilogue).datapath(p.epilogue) is not None:
            shared = shared_requantizers(process_spec(stream_graph, p, unroll, lanes_in, lanes_out))
        processes[p.name] = replace(current, unroll=unroll, requantizers=shared[0] if shared else 0)
    return Schedule(processes, schedule.lanes, schedule.depths)


def _has_joins(stream_graph) -> bool:
    return any(len(p.inputs) > 1 or len(p.outputs) > 1 for p in stream_graph.processes)


def random_design(graph, case: Case):
    """The design under `emit_helpers.random_schedule` (lanes, unroll factors, multipliers, shared requantizers,
    FIFO depths) and a random line-buffer memory; where branches meet, the FIFOs ming sizes for that schedule
    (`FifoPlan`), since a random depth there may deadlock the design as it would in hardware."""
    from dataclasses import replace

    from emit_helpers import random_schedule
    from ming_py.boards import load_board
    from ming_py.build import design
    from ming_py.dataflow import Schedule
    from ming_py.process_spec import schedule_spec
    from ming_py.kinds import kind_of
    from ming_py.line_buffers import build_stream_graph
    from ming_py.storage import plan_arrays

    chooser = Chooser(case.schedule_seed, case.policy)
    stream_graph = build_stream_graph(graph)
    schedule = random_schedule(stream_graph, chooser, max_factor=case.max_factor)
    if case.policy == "drain":
        schedule = _longest_drain(stream_graph, schedule)
    processes = dict(schedule.processes)
    for p in stream_graph.processes:
        if kind_of(p.kind).line_buffer:
            memory = chooser.choice(["bram", "uram"])
            spec = schedule_spec(stream_graph, p, schedule)
            storage = {role: a.memory for role, a in plan_arrays(spec, p.epilogue, memory).items()
                       if a.memory != "register"}
            processes[p.name] = replace(processes[p.name], storage=tuple(sorted(storage.items())))
    schedule = _sized_fifos(stream_graph, Schedule(processes, schedule.lanes, schedule.depths))
    return design(graph, load_board("kv260"), schedule)


# loops whose factors are the lanes of a channel (as emit_helpers.random_schedule ties them)
LANE_LOOPS = ("g", "oc", "ic", "c", "n")


def ilp_pins(stream_graph, case: Case) -> dict[str, int | str]:
    """`--set` pins drawn by the case's seed: per process maybe an unroll factor of one loop, fabric
    multipliers (MAC kinds), a line buffer in URAM or BRAM; the ILP chooses the rest."""
    from ming_py.dataflow import divisors
    from ming_py.kinds import kind_of, trip_counts

    chooser = Chooser(case.schedule_seed, case.policy)
    pins: dict[str, int | str] = {}
    for p in stream_graph.processes:
        kind = kind_of(p.kind)
        trips = trip_counts(stream_graph, p)
        # a loop whose factor is a channel's lanes is tied to its neighbour's: pinning one alone may leave the
        # ILP nothing (NoDesignFits), so only a window's own loop (k: its elements) is pinned
        free = sorted(loop for loop in trips if loop not in LANE_LOOPS and not (p.kind == "dense" and loop == "k"))
        if free and chooser.choice([False, True]):
            loop = chooser.choice(free)
            pins[f"{p.name}.unroll.{loop}"] = chooser.choice([d for d in divisors(trips[loop]) if d <= 16])
        if kind.mac and chooser.choice([False, True]):
            pins[f"{p.name}.multipliers"] = "fabric"
        if kind.line_buffer and chooser.choice([False, True]):
            memory = chooser.choice(["bram", "uram"])
            pins[f"{p.name}.line_buffer"] = memory if memory == "bram" or _uram_holds(stream_graph, p) else "bram"
    return pins


def _uram_holds(stream_graph, process) -> bool:
    """Whether URAM may hold the process's line buffer (at one lane; smaller ones sit in LUTRAM, where a URAM pin
    is refused)."""
    from ming_py.ilp.pins import line_buffer_memory
    from ming_py.kinds import trip_counts

    ones = tuple((loop, 1) for loop in trip_counts(stream_graph, process))
    return line_buffer_memory(stream_graph, process, ones, (1,) * len(process.inputs), (1,) * len(process.outputs),
                              "uram") == "uram"


def ilp_design(graph, case: Case):
    from ming_py.build import design
    from ming_py.ilp.explore import explore
    from ming_py.line_buffers import build_stream_graph
    from ming_py.options import BuildOptions

    pins = dict(case.pins) if case.pins else ilp_pins(build_stream_graph(graph), case)
    board, solution, _ = explore(build_stream_graph(graph), BuildOptions(settings=pins))
    return design(graph, board, solution=solution)


def _sized_fifos(stream_graph, schedule):
    """`schedule` with the FIFO depths ming sizes for it (`FifoPlan`) where branches meet: a shallower FIFO
    there may deadlock the design, in the C-simulation as in hardware."""
    from ming_py.dataflow import Schedule
    from ming_py.process_spec import schedule_spec
    from ming_py.line_buffers.fifo import FifoPlan

    if not _has_joins(stream_graph):
        return schedule
    specs = {p.name: schedule_spec(stream_graph, p, schedule) for p in stream_graph.processes}
    depths = FifoPlan(stream_graph, specs, {name: spec.depth for name, spec in specs.items()}).depths(1)
    return Schedule(schedule.processes, schedule.lanes, depths)


def default_design(graph, case: Case):
    """One lane everywhere, nothing unrolled (FIFOs sized where branches meet)."""
    from ming_py.boards import load_board
    from ming_py.build import design
    from ming_py.dataflow import Schedule
    from ming_py.line_buffers import build_stream_graph

    return design(graph, load_board("kv260"), _sized_fifos(build_stream_graph(graph), Schedule()))


DESIGNS = {"default": default_design, "random": random_design, "ilp": ilp_design}


# ---- the check ---------------------------------------------------------------------------------------------

@dataclass
class Difference:
    comparison: str  # "reference != framework" | "csim != reference"
    input: str  # "random" | "extreme"
    values: int  # how many values differ
    total: int

    def __str__(self) -> str:
        return f"{self.comparison} on the {self.input} input: {self.values} of {self.total} values"


@dataclass
class Outcome:
    status: str  # "equal" | "refused" | "differs" | "crashed"
    stage: str = ""  # where it was refused or crashed: model, import, reference, framework, schedule, csim
    detail: str = ""
    differences: list[Difference] = field(default_factory=list)
    seconds: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)  # seconds per stage

    def __str__(self) -> str:
        if self.status == "differs":
            return "differs: " + "; ".join(map(str, self.differences))
        if self.status in ("refused", "crashed"):
            return f"{self.status} ({self.stage}): {self.detail}"
        return self.status


BUG_MARKERS = ("bug in ming", "please report")


def _diff(comparison: str, name: str, ours: list[np.ndarray], theirs: list[np.ndarray]) -> list[Difference]:
    found = []
    if len(ours) != len(theirs):
        return [Difference(f"{comparison} (outputs: {len(ours)} vs {len(theirs)})", name, 0, 0)]
    for a, b in zip(ours, theirs):
        a, b = np.asarray(a), np.asarray(b)
        if a.size != b.size or a.dtype != b.dtype:
            found.append(Difference(f"{comparison} ({a.dtype}{a.shape} vs {b.dtype}{b.shape})", name, b.size, b.size))
            continue
        count = int(np.count_nonzero(a.reshape(-1) != b.reshape(-1)))
        if count:
            found.append(Difference(comparison, name, count, int(b.size)))
    return found


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def check_case(case: Case, tmpdir: Path, keep: bool = False) -> Outcome:
    """Build `case` in `tmpdir`, run the framework, `ming reference` and the C-simulation on a random and an
    extreme input, and say what it found (never raises for what the case shows)."""
    from ming_py import reference
    from ming_py.csim import run_csim
    from ming_py.errors import MingError
    from ming_py.output import write_tree
    from ming_py.pipeline import lift

    start = time.monotonic()
    tmpdir = Path(tmpdir)
    stages: dict[str, float] = {}
    mark = [start]

    def lap(stage: str) -> None:
        now = time.monotonic()
        stages[stage] = stages.get(stage, 0.0) + now - mark[0]
        mark[0] = now

    def done(outcome: Outcome) -> Outcome:
        outcome.seconds = time.monotonic() - start
        outcome.stages = stages
        return outcome

    def crashed(stage: str, exc: BaseException) -> Outcome:
        detail = _one_line(exc)
        if not isinstance(exc, MingError):
            frames = traceback.extract_tb(exc.__traceback__)
            if frames:
                detail += f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})"
        return done(Outcome("crashed", stage, detail))

    try:
        path = write_model(case, tmpdir / "model")
    except Exception as exc:  # noqa: BLE001 - the generator's own failure is a failure too
        return crashed("model", exc)
    lap("model")
    try:
        graph = lift(path)
    except MingError as exc:
        if any(m in str(exc) for m in BUG_MARKERS):
            return crashed("import", exc)
        return done(Outcome("refused", "import", _one_line(exc)))
    except Exception as exc:  # noqa: BLE001
        return crashed("import", exc)
    lap("import")
    xs = inputs(case, graph)
    differences: list[Difference] = []
    expected = {}
    for name, x in xs.items():
        try:
            ours = reference.run(graph, x)
        except Exception as exc:  # noqa: BLE001
            return crashed("reference", exc)
        expected[name] = [ours[o.name] for o in graph.outputs]
        try:
            theirs = framework_outputs(case, path, x)
        except Exception as exc:  # noqa: BLE001
            return crashed("framework", exc)
        differences += _diff("reference != framework", name, expected[name], theirs)
    lap("reference")
    try:
        built = DESIGNS[case.schedule](graph, case)
    except MingError as exc:
        if any(m in str(exc) for m in BUG_MARKERS) or str(exc).startswith("invalid schedule"):
            return crashed("schedule", exc)
        return done(Outcome("refused", "schedule", _one_line(exc), differences))
    except Exception as exc:  # noqa: BLE001
        return crashed("schedule", exc)
    lap("schedule")
    out = tmpdir / "out"
    try:
        write_tree(built.files, out)
        stacked = np.concatenate(list(xs.values()))
        simulated = run_csim(out, stacked, concurrent=True)
    except Exception as exc:  # noqa: BLE001 - a failed C-simulation (g++, a width, a deadlock) is a failure
        return crashed("csim", exc)
    lap("csim")
    for i, name in enumerate(xs):
        ours = [simulated[o.name][i] for o in graph.outputs]
        differences += _diff("csim != reference", name, ours, expected[name])
    if not keep:
        import shutil

        shutil.rmtree(out, ignore_errors=True)
    return done(Outcome("differs" if differences else "equal", differences=differences))



# ---- drawing cases outside a test ----------------------------------------------------------------------------

@contextlib.contextmanager
def _without_local_constants():
    """Hypothesis sometimes draws integers from the constants in the source of the project's modules loaded at
    the time (hypothesis.internal.conjecture.providers): the same seed would draw other cases after an edit of
    any module, or in a process that imported another set of modules (a pytest-xdist worker). The draw here
    uses hypothesis' own constants only."""
    try:
        from hypothesis.internal.conjecture import providers
        original, cache = providers._get_local_constants, providers.CONSTANTS_CACHE
    except (ImportError, AttributeError):  # another hypothesis: test_the_ci_draw_is_fixed says so
        yield
        return
    providers._get_local_constants = lambda: providers.Constants()
    cache.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = original
        cache.cache.clear()


def draw_cases(seed: int, count: int, frontend: str | None = None, family: str | None = None,
               schedule: str | None = None, max_values: int = MAX_VALUES) -> list[Case]:
    """`count` cases of the strategy, the same for the same seed (and hypothesis version): case i is the
    first example hypothesis generates under `@seed(seed * 100003 + i)` after the strategy's simplest (which it always
    tries first), without its database. One run per case: the examples of one run are mutations of each
    other."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    cases_drawn: list[Case] = []
    for index in range(count):
        drawn: list[Case] = []

        @hypothesis_seed(seed * 100_003 + index)
        @settings(max_examples=2, database=None, phases=[Phase.generate], deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(cases(frontend, family, schedule, max_values))
        def collect(case):
            drawn.append(case)

        with _without_local_constants():
            collect()
        cases_drawn.append(drawn[-1])
    return cases_drawn
