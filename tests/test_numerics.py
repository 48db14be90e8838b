"""Tests of ming_py.numerics: integer properties + bit-exactness / residual vs onnxruntime.

ORT tests build tiny float models with onnx.helper, quantize them with
``quantize_static`` (QDQ, int8 activations and weights), run them with
``ming_py.ort_session.onnxruntime_session`` (the CPU provider, default
SessionOptions but exact int8 products on CPUs without VNNI), read scales / zero points from the model initializers and compare with
numpy integer arithmetic + ming_py.numerics.  Inputs are fed as exactly representable
floats ``(q - zx) * sx`` so ORT's input QuantizeLinear reproduces the int8 values ``q``,
and outputs are mapped back with ``round(y / sy) + zy`` (exact: checked).

Residual bounds (docs/numerics.md; measured vs ORT and vs the ORT-exact references on
1e7-5e8 elements).  Hard bound everywhere: max |diff| <= 1 LSB.  Measured worst mismatch
rates (per scale category):
* Add (add_requant):                    0 (bit-exact since the float32 kernels are emulated; asserted ==)
* AveragePool (window_average_level):   0 (ORT's float32 sum emulated addition by addition; asserted ==)
* Concat / rescale (fixed point):       1.0e-6 for non power-of-two scale ratios
A test sample of n elements may show at most ``rate*n + 4*sqrt(rate*n) + 1`` mismatches
(the measured rate plus a 4-sigma Poisson sampling allowance).  Conv / Gemm / MatMul /
GAP / MaxPool / table-based rescale and the float references are asserted ``==``.
"""
from __future__ import annotations

import sys
import zlib
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ming_py import numerics as nm  # noqa: E402

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,  # noqa: E402
                                      quantize_static)

import zoo  # noqa: E402
from ming_py.ort_session import onnxruntime_session

ort.set_default_logger_severity(3)
F32 = np.float32

# measured worst-case mismatch rates of the integer rules (see module docstring)
_RATE_RESCALE_RANDOM = 1.0e-6


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
class _Reader(CalibrationDataReader):
    def __init__(self, feeds):
        self.feeds, self.i = list(feeds), 0

    def get_next(self):
        if self.i >= len(self.feeds):
            return None
        self.i += 1
        return self.feeds[self.i - 1]


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _model(nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _quantize(tmp_path, m, feeds, per_channel=False, name="m"):
    src, dst = tmp_path / f"{name}_f.onnx", tmp_path / f"{name}_q.onnx"
    onnx.save(m, str(src))
    quantize_static(str(src), str(dst), _Reader(feeds), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=per_channel,
                    **zoo.QUANTIZE_OPTIONS)
    return onnx.load(str(dst))


def _inits(m):
    return {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}


def _dq(m, tensor):
    """(q, scale, zero_point) of the DequantizeLinear producing ``tensor``."""
    inits = _inits(m)
    n = next(n for n in m.graph.node if tensor in n.output)
    assert n.op_type == "DequantizeLinear", n.op_type
    return inits.get(n.input[0]), inits[n.input[1]], inits[n.input[2]]


def _q_after(m, tensor):
    """(scale, zero_point) of the QuantizeLinear consuming ``tensor`` (Relu/Clip skipped)."""
    inits = _inits(m)
    while True:
        n = next(n for n in m.graph.node if tensor in n.input)
        if n.op_type in ("Relu", "Clip"):
            tensor = n.output[0]
            continue
        assert n.op_type == "QuantizeLinear", n.op_type
        return F32(inits[n.input[1]]), int(inits[n.input[2]])


def _node(m, op):
    return next(n for n in m.graph.node if n.op_type == op)


def _attr(n, name, default):
    for a in n.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


class _IntSession:
    """Run a QDQ model with float I/O on exact int8 values (default SessionOptions)."""

    def __init__(self, m, tmp_path=None, int8_allowed=False):
        so = ort.SessionOptions()
        if int8_allowed:
            so.add_session_config_entry("session.qdqisint8allowed", "1")
        opt_path = None
        if tmp_path is not None:
            opt_path = str(tmp_path / f"opt_{id(self)}.onnx")
            so.optimized_model_filepath = opt_path
        self.sess = onnxruntime_session(m.SerializeToString(), so)
        self.ops = [n.op_type for n in onnx.load(opt_path).graph.node] if opt_path else []
        inits = _inits(m)
        alias = {i.name: i.name for i in m.graph.input}
        for n in m.graph.node:
            if n.op_type in ("Flatten", "Reshape") and n.input[0] in alias:
                alias[n.output[0]] = alias[n.input[0]]
        self.inp = {alias[n.input[0]]: (F32(inits[n.input[1]]), int(inits[n.input[2]]))
                    for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] in alias}
        outs = {o.name for o in m.graph.output}
        self.out = {n.output[0]: (F32(inits[n.input[1]]), int(inits[n.input[2]]))
                    for n in m.graph.node if n.op_type == "DequantizeLinear" and n.output[0] in outs}

    def run(self, *qs):
        names = [i.name for i in self.sess.get_inputs()]
        feeds = {}
        for nme, q in zip(names, qs):
            s, z = self.inp[nme]
            feeds[nme] = ((np.asarray(q, np.int64) - z).astype(F32) * s).astype(F32)
        res = []
        for o, y in zip(self.sess.get_outputs(), self.sess.run(None, feeds)):
            s, z = self.out[o.name]
            v = y.astype(np.float64) / np.float64(s)
            r = np.rint(v)
            assert np.all(np.abs(v - r) < 1e-3)
            res.append(r.astype(np.int64) + z)
        return res


def _conv_int(x, w, b=None, strides=(1, 1), pads=(0, 0, 0, 0), group=1):
    x, w = np.asarray(x, np.int64), np.asarray(w, np.int64)
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    pt, pl, pb, pr = pads
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr), np.int64)
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    sh, sw = strides
    oh, ow = (h + pt + pb - kh) // sh + 1, (wd + pl + pr - kw) // sw + 1
    out = np.zeros((n, m, oh, ow), np.int64)
    mg = m // group
    for g in range(group):
        xg, wg = xp[:, g * cg:(g + 1) * cg], w[g * mg:(g + 1) * mg]
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
                out[:, g * mg:(g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch, wg[:, :, i, j])
    if b is not None:
        out += np.asarray(b, np.int64).reshape(1, m, 1, 1)
    return out


def _window_average(x, sx, zx, sy, zy, k, strides, pads, cip, domain_offset=nm.ORT_X86_DOMAIN_OFFSET):
    """numerics' exact AveragePool (`window_average_sum`, `window_average_level`) on NCHW int8 `x`: the window
    elements in row-major order (padding holds zx), each window's divisor its unpadded count (or the kernel size
    with count_include_pad)."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (pt, pl, pb, pr) = k, strides, pads
    oh, ow = (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
    padded = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=zx)
    ones = np.pad(np.ones((h, w), np.int64), ((pt, pb), (pl, pr)))
    elements, valid = [], np.zeros((oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            elements.append(padded[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw])
            valid += ones[i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
    divisor = np.full(valid.shape, kh * kw) if cip else valid
    divisors = sorted({int(d) for d in divisor.reshape(-1)})
    c_ = nm.window_average_constants(sx, zx, sy, zy, kh * kw, divisors, domain_offset=domain_offset)
    total = nm.window_average_sum(elements, c_.mantissa, zx)
    return nm.window_average_level(total, np.searchsorted(divisors, divisor), c_)


def _maxpool_int(x, k, strides, pads):
    (kh, kw), (sh, sw), (pt, pl, pb, pr) = k, strides, pads
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=-(1 << 20))
    oh, ow = (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
    out = np.full((n, c, oh, ow), -(1 << 20), np.int64)
    for i in range(kh):
        for j in range(kw):
            out = np.maximum(out, xp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw])
    return out


def _per_channel(mult, c):
    """Broadcast a per-tensor or per-channel multiplier over NCHW channel axis 1."""
    return np.broadcast_to(np.asarray(mult, F32).ravel(), (c,)).reshape(1, c, 1, 1)


def _assert_residual(name, got, ref, rate):
    """Print the measured residual and check it against the measured rate of the rule."""
    d = np.abs(np.asarray(got, np.int64) - np.asarray(ref, np.int64))
    mism, mx = int((d > 0).sum()), int(d.max())
    allowed = rate * d.size + 4.0 * np.sqrt(rate * d.size) + 1.0
    print(f"[residual] {name}: elements={d.size} mismatches={mism} rate={mism / d.size:.2e} "
          f"exact={100 * (1 - mism / d.size):.4f}% max|diff|={mx} LSB (allowed {allowed:.1f})")
    assert mx <= 1, f"{name}: max |diff| {mx} LSB"
    assert mism <= allowed, f"{name}: {mism} mismatches > {allowed:.1f}"


def _rne_fraction(fr: Fraction) -> int:
    fl = fr.numerator // fr.denominator
    rem = fr - fl
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2 == 1):
        return fl + 1
    return fl


# ---------------------------------------------------------------------------
# integer primitives
# ---------------------------------------------------------------------------
@pytest.mark.unit
def test_bit_length_and_round_shift():
    rng = np.random.default_rng(0)
    a = np.concatenate([rng.integers(0, 2 ** 62, 5000), [0, 1, 2, 3, 2 ** 24 - 1, 2 ** 24, 2 ** 62 - 1]])
    assert np.array_equal(nm.bit_length(a), [int(v).bit_length() for v in a])
    v = np.concatenate([rng.integers(-2 ** 40, 2 ** 40, 3000), rng.integers(-64, 64, 1000)])
    s = np.concatenate([rng.integers(0, 45, 3000), rng.integers(0, 4, 1000)])
    got = nm.round_shift_half_even(v, s)
    want = [_rne_fraction(Fraction(int(x), 2 ** int(k))) for x, k in zip(v, s)]
    assert np.array_equal(got, want)
    # exact ties go to even, both signs
    assert list(nm.round_shift_half_even([5, 7, -5, -7, 6, -6], 1)) == [2, 4, -2, -4, 3, -3]
    assert list(nm.round_shift_half_up([5, -5, 3], 1)) == [3, -2, 2]


@pytest.mark.unit
def test_float32_parts_roundtrip():
    rng = np.random.default_rng(1)
    m = np.concatenate([np.exp(rng.uniform(-80, 40, 10000)), [1e-45, 2.0 ** -149, 2.0 ** -126, 1.0, 0.0]]).astype(F32)
    mant, exp = nm.float32_parts(m)
    back = np.array([Fraction(int(a)) * Fraction(2) ** int(e) for a, e in zip(mant, exp)], dtype=object)
    assert all(Fraction(float(x)) == y for x, y in zip(m, back))
    assert np.all((mant < 2 ** 24) & ((mant >= 2 ** 23) | (m < 2.0 ** -126)))


# ---------------------------------------------------------------------------
# requantize == float32 formula (property tests)
# ---------------------------------------------------------------------------
def _check_requant(acc, mult, zp, qmin=-128, qmax=127):
    a = nm.requantize(acc, mult, zp, qmin, qmax)
    b = nm.requantize_float_reference(acc, mult, zp, qmin, qmax)
    bad = np.nonzero(a != b)
    assert bad[0].size == 0, (np.asarray(acc)[bad][:5], np.asarray(mult)[bad][:5])
    return a.size


@pytest.mark.unit
def test_requantize_matches_float32_random():
    rng = np.random.default_rng(2)
    n = 1_500_000
    acc = rng.integers(-2 ** 31, 2 ** 31, n)
    small = rng.random(n) < 0.6
    acc[small] = rng.integers(-2 ** 20, 2 ** 20, int(small.sum()))
    mult = np.exp(rng.uniform(np.log(1e-10), np.log(1e-1), n)).astype(F32)
    zp = rng.integers(-128, 128, n)
    total = _check_requant(acc, mult, zp)
    # wide output range: every rounding decision is visible (no saturation)
    total += _check_requant(acc, mult, 0, -2 ** 31, 2 ** 31 - 1)
    print(f"[requantize] random pairs: {total} elements equal")


@pytest.mark.unit
def test_requantize_matches_float32_near_ties():
    rng = np.random.default_rng(3)
    n = 1_000_000
    mult = np.exp(rng.uniform(np.log(1e-9), np.log(1.0), n)).astype(F32)
    k = rng.integers(-3000, 3000, n)
    acc = np.rint((k + 0.5) / mult.astype(np.float64)).astype(np.int64) + rng.integers(-2, 3, n)
    acc = np.clip(acc, -2 ** 31, 2 ** 31 - 1)
    total = _check_requant(acc, mult, 0, -2 ** 31, 2 ** 31 - 1)
    total += _check_requant(acc, mult, rng.integers(-128, 128, n))
    # power-of-two multipliers: exact .5 ties, odd zero points (zp added after rounding)
    m2 = (2.0 ** rng.integers(-30, 0, n)).astype(F32)
    a2 = rng.integers(-2 ** 31, 2 ** 31, n) >> rng.integers(0, 31, n)
    total += _check_requant(a2, m2, 0, -2 ** 31, 2 ** 31 - 1)
    total += _check_requant(a2, m2, rng.integers(-128, 128, n) | 1)
    print(f"[requantize] near-tie / exact-tie pairs: {total} elements equal")


@pytest.mark.unit
def test_requantize_edge_cases():
    base = [0, 1, 2, 3, 2 ** 24 - 1, 2 ** 24, 2 ** 24 + 1, 2 ** 24 + 2, 2 ** 24 + 3, 2 ** 25 + 1, 2 ** 25 + 3,
            2 ** 25 + 6, 2 ** 30 + 65, 12345677, 16777217, 33554435, 2 ** 31 - 1, 2 ** 31 - 64, 2 ** 31 - 65]
    accs = np.array(sorted({s * v for v in base for s in (1, -1)} | {-2 ** 31}), np.int64)
    mults = np.array([0.0, 2.0 ** -149, 1e-45, 2.0 ** -126, 2.0 ** -40, 1e-10, 2.0 ** -24, 5.960464e-08,
                      0.4999999701976776, 0.5, 0.50000006, 1.0 - 2.0 ** -24, 1.0, 1.0 + 2.0 ** -23, 1.5, 3.0,
                      255.0, 2.0 ** 20, 3.4e38], F32)
    a, m = np.meshgrid(accs, mults, indexing="ij")
    total = 0
    for zp in (-128, -127, -1, 0, 1, 126, 127):
        total += _check_requant(a, m, zp)
    total += _check_requant(a, m, 0, -2 ** 31, 2 ** 31 - 1)
    total += _check_requant(a, m, 3, 0, 255)           # uint8 output range
    assert nm.requantize(0, F32(0.3), -128).dtype == np.int8
    assert nm.requantize(5, F32(1.0), 0, 0, 255).dtype == np.uint8
    with pytest.raises(ValueError):
        nm.requantize(1, F32(-1.0), 0)
    print(f"[requantize] edge grid: {total} elements equal")


@pytest.mark.unit
def test_ort_multipliers_op_order():
    sx, sw, sy = F32(0.0123), np.array([0.0031, 0.071], F32), F32(0.0456)
    assert np.array_equal(nm.ort_conv_multiplier(sx, sw, sy), ((sx * sw).astype(F32) / sy).astype(F32))
    assert np.array_equal(nm.ort_gemm_multiplier(sx, sw, sy), nm.ort_conv_multiplier(sx, sw, sy))
    assert nm.ort_gap_multiplier(sx, sy, 49) == F32(sx / F32(sy * F32(49)))


# ---------------------------------------------------------------------------
# fixed point
# ---------------------------------------------------------------------------
@pytest.mark.unit
def test_fixed_point():
    rng = np.random.default_rng(4)
    for r in np.exp(rng.uniform(np.log(1e-9), np.log(1e3), 2000)):
        fp = nm.to_fixed_point(float(r))
        assert 2 ** 30 <= fp.multiplier < 2 ** 31
        assert abs(fp.real - r) <= r * 2.0 ** -31
    fp = nm.to_fixed_point(1.0 - 2.0 ** -40)          # rounds up to 2**31 -> renormalised
    assert fp.multiplier == 2 ** 30 and fp.real == 1.0
    x = rng.integers(-2 ** 31 + 1, 2 ** 31, 3000)
    fp = nm.to_fixed_point(0.0123456789)
    got = nm.fixed_point_rescale(x, fp)
    want = [_rne_fraction(Fraction(int(v) * fp.multiplier, 2 ** fp.shift)) for v in x]
    assert np.array_equal(got, want)
    got = nm.fixed_point_rescale(x, fp, pre_round_offset=-7)
    assert np.array_equal(got, [_rne_fraction(Fraction(int(v) * fp.multiplier, 2 ** fp.shift) - 7) for v in x])
    half = nm.FixedPoint(1 << 30, 31)                  # exactly 0.5
    assert list(nm.fixed_point_rescale([1, 3, 5, -1, -3], half)) == [0, 2, 2, 0, -2]
    assert list(nm.fixed_point_rescale([1, 3, 5, -1, -3], half, "half_up")) == [1, 2, 3, 0, -1]
    assert list(nm.fixed_point_rescale([1, 3], half, pre_round_offset=1)) == [2, 2]  # rne(1.5), rne(2.5)


@pytest.mark.unit
def test_fma_float32_is_correctly_rounded():
    rng = np.random.default_rng(5)
    a, b, c = (rng.standard_normal(3000).astype(F32) for _ in range(3))
    c[:1000] *= F32(1e-12)
    r = nm.fma_float32(a, b, c)
    for i in range(3000):
        ex = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
        lo = np.nextafter(r[i], F32(-np.inf))
        hi = np.nextafter(r[i], F32(np.inf))
        d = abs(Fraction(float(r[i])) - ex)
        assert d <= abs(Fraction(float(lo)) - ex) and d <= abs(Fraction(float(hi)) - ex)


# ---------------------------------------------------------------------------
# ORT: Conv / Gemm / MatMul  (bit-exact)
# ---------------------------------------------------------------------------
_CONV_CASES = {
    "k1": dict(cin=32, cout=32, k=1),
    "k1_pairs": dict(cin=2, cout=64, k=1, H=256, pairs=True),
    "k3": dict(cin=16, cout=32, k=3, pad=1),
    "k5": dict(cin=8, cout=16, k=5, pad=2),
    "dw3": dict(cin=32, cout=32, k=3, pad=1, group=32),
    "dw5_s2": dict(cin=16, cout=16, k=5, pad=2, group=16, stride=2),
    "group4": dict(cin=16, cout=32, k=3, pad=1, group=4),
    "s2": dict(cin=16, cout=32, k=3, pad=1, stride=2),
    "nobias": dict(cin=16, cout=32, k=3, pad=1, bias=False),
    "relu": dict(cin=16, cout=32, k=3, pad=1, relu=True),
    "k1_relu": dict(cin=64, cout=64, k=1, relu=True),
    "dw3_relu": dict(cin=32, cout=32, k=3, pad=1, group=32, relu=True),
    "cin3": dict(cin=3, cout=16, k=3, pad=1),
}


@pytest.mark.unit
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("case", list(_CONV_CASES))
def test_conv_bit_exact(tmp_path, case, per_channel):
    cfg = dict(_CONV_CASES[case])
    cin, cout, k = cfg["cin"], cfg["cout"], cfg["k"]
    group, stride, pad, hh = cfg.get("group", 1), cfg.get("stride", 1), cfg.get("pad", 0), cfg.get("H", 12)
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    w = (rng.standard_normal((cout, cin // group, k, k)) * 0.3).astype(F32)
    w *= rng.uniform(0.05, 2.0, size=(cout, 1, 1, 1)).astype(F32)          # very different channel ranges
    inits, ins = [numpy_helper.from_array(w, "W")], ["X", "W"]
    if cfg.get("bias", True):
        inits.append(numpy_helper.from_array((rng.standard_normal(cout) * 0.5).astype(F32), "B"))
        ins.append("B")
    relu = cfg.get("relu", False)
    nodes = [helper.make_node("Conv", ins, ["C" if relu else "Y"], kernel_shape=[k, k], strides=[stride] * 2,
                              pads=[pad] * 4, group=group)]
    if relu:
        nodes.append(helper.make_node("Relu", ["C"], ["Y"]))
    m = _model(nodes, [_vi("X", [None, cin, hh, hh])], [_vi("Y", [None] * 4)], inits)
    feeds = [{"X": rng.standard_normal((1, cin, hh, hh)).astype(F32)} for _ in range(4)]
    qm = _quantize(tmp_path, m, feeds, per_channel, case)
    sess = _IntSession(qm, tmp_path)
    assert "QLinearConv" in sess.ops, sess.ops

    conv = _node(qm, "Conv")
    _, sx, zx = _dq(qm, conv.input[0])
    wq, sw, zw = _dq(qm, conv.input[1])
    assert np.all(zw == 0)                                               # symmetric weights
    bq = _dq(qm, conv.input[2])[0] if len(conv.input) > 2 else None
    sy, zy = _q_after(qm, conv.output[0])
    if relu:
        assert zy == -128                                               # Relu folded into the output range
    mult = nm.ort_conv_multiplier(sx, sw, sy)
    mult = np.broadcast_to(mult, (cout,)).reshape(1, cout, 1, 1)

    if cfg.get("pairs"):          # every (x0, x1) int8 pair: all reachable accumulators
        a, b = np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij")
        xs = [np.stack([a, b])[None]]
    else:
        zxi = int(zx)
        xs = [rng.integers(-128, 128, size=(4, cin, hh, hh)),                       # full range, saturating
              np.clip(np.rint(rng.standard_normal((4, cin, hh, hh)) * 25) + zxi, -128, 127),
              np.clip(np.rint(rng.standard_normal((4, cin, hh, hh)) * 6) + zxi, -128, 127)]
    n_el = sat = 0
    for xq in xs:
        xq = xq.astype(np.int64)
        y = sess.run(xq)[0]
        acc = _conv_int(xq - int(zx), wq, bq, (stride, stride), (pad,) * 4, group)
        ref = nm.requantize(acc, mult, zy)
        assert np.array_equal(ref, y), f"{int((ref != y).sum())} mismatches"
        n_el += y.size
        sat += int(((y == -128) | (y == 127)).sum())
    print(f"[conv {case} {'pc' if per_channel else 'pt'}] {n_el} elements bit-exact "
          f"({100 * sat / n_el:.1f}% saturated)")


@pytest.mark.unit
def test_conv_exact_ties_zero_point_after_rounding(tmp_path):
    """Power-of-two scales make f32(acc)*M land exactly on .5: ORT rounds half-even and
    adds the (odd) output zero point after rounding."""
    rng = np.random.default_rng(6)
    c, mo = 8, 16
    sx, sw, sy = F32(2.0 ** -5), F32(2.0 ** -6), F32(2.0 ** -8)     # M = 2**-3
    zx, zy = 3, -7
    wq = rng.integers(-4, 5, size=(mo, c, 3, 3)).astype(np.int8)
    bq = rng.integers(-200, 200, size=(mo,)).astype(np.int32)
    arr = numpy_helper.from_array
    inits = [arr(wq, "wq"), arr(np.array(sw, F32), "sw"), arr(np.array(0, np.int8), "zw"), arr(bq, "bq"),
             arr(np.array(sx * sw, F32), "sb"), arr(np.array(0, np.int32), "zb"), arr(np.array(sx, F32), "sx"),
             arr(np.array(zx, np.int8), "zx"), arr(np.array(sy, F32), "sy"), arr(np.array(zy, np.int8), "zy")]
    nodes = [helper.make_node("QuantizeLinear", ["X", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"]),
             helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"]),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "sy", "zy"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["Y"])]
    qm = _model(nodes, [_vi("X", [None, c, 10, 10])], [_vi("Y", [None] * 4)], inits)
    sess = _IntSession(qm, tmp_path)
    assert "QLinearConv" in sess.ops
    x = zx + rng.integers(-25, 26, size=(8, c, 10, 10))
    x[0] = rng.integers(-128, 128, size=(c, 10, 10))                   # one saturating image
    y = sess.run(x)[0]
    acc = _conv_int(x - zx, wq, bq, pads=(1, 1, 1, 1))
    m = nm.ort_conv_multiplier(sx, sw, sy)
    v = (acc.astype(F32) * m).astype(np.float64)
    n_ties = int((v - np.floor(v) == 0.5).sum())
    assert n_ties > 500
    assert np.array_equal(nm.requantize(acc, m, zy), y)
    wrong = np.clip(np.rint(v + zy), -128, 127)                         # zp before rounding: differs
    assert np.any(wrong != y)
    print(f"[conv ties] {y.size} elements bit-exact, {n_ties} exact .5 ties")


def _gemm_like(tmp_path, kind, per_channel, k, n, seed):
    rng = np.random.default_rng(seed)
    if kind == "gemm":
        w = (rng.standard_normal((n, k)) * rng.uniform(0.05, 2.0, size=(n, 1))).astype(F32)
        bias = (rng.standard_normal(n) * .5).astype(F32)
        inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(bias, "B")]
        op = helper.make_node("Gemm", ["F", "W", "B"], ["Y"], transB=1)
    else:
        w = (rng.standard_normal((k, n)) * rng.uniform(0.05, 2.0, size=(1, n))).astype(F32)
        inits = [numpy_helper.from_array(w, "W")]
        op = helper.make_node("MatMul", ["F", "W"], ["Y"])
    m = _model([helper.make_node("Flatten", ["X"], ["F"], axis=1), op], [_vi("X", [None, k, 1, 1])],
               [_vi("Y", [None, n])], inits)
    feeds = [{"X": rng.standard_normal((4, k, 1, 1)).astype(F32)} for _ in range(6)]
    return _quantize(tmp_path, m, feeds, per_channel, f"{kind}{k}"), rng


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("kind", ["gemm", "matmul"])
def test_gemm_matmul_bit_exact(tmp_path, kind, per_channel):
    total = 0
    for k, n, seed in ((2, 64, 0), (150, 48, 1)):
        qm, rng = _gemm_like(tmp_path, kind, per_channel, k, n, seed)
        sess = _IntSession(qm, tmp_path)
        assert ("QGemm" if kind == "gemm" else "QLinearMatMul") in sess.ops, sess.ops
        op = _node(qm, "Gemm" if kind == "gemm" else "MatMul")
        _, sx, zx = _dq(qm, op.input[0])
        wq, sw, _ = _dq(qm, op.input[1])
        sy, zy = _q_after(qm, op.output[0])
        if k == 2:
            a, b = np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij")
            xq = np.stack([a.ravel(), b.ravel()], 1)
        else:
            xq = rng.integers(-128, 128, size=(4000, k))
            xq[::2] = np.clip(np.rint(rng.standard_normal((2000, k)) * 20) + int(zx), -128, 127)
        y = sess.run(xq.reshape(len(xq), k, 1, 1))[0]
        wk = wq.astype(np.int64).T if kind == "gemm" else wq.astype(np.int64)       # [K, N]
        acc = (xq - int(zx)) @ wk
        if kind == "gemm":
            acc = acc + _dq(qm, op.input[2])[0].astype(np.int64)
        mult = nm.ort_gemm_multiplier(sx, sw, sy) if kind == "gemm" else nm.ort_conv_multiplier(sx, sw, sy)
        ref = nm.requantize(acc, np.broadcast_to(mult, (n,)).reshape(1, n), zy)
        assert np.array_equal(ref, y), f"{int((ref != y).sum())} mismatches"
        total += y.size
    print(f"[{kind} {'pc' if per_channel else 'pt'}] {total} elements bit-exact")


def test_large_accumulator_rounded_to_float32(tmp_path):
    """|acc| > 2**24: ORT converts the int32 accumulator to float32 (cvtdq2ps) before
    scaling.  Inputs are crafted to hit accumulators where that rounding changes y."""
    k, n = 32768, 16  # long enough for |acc| > 2**24 with 7-bit weights too
    rng = np.random.default_rng(7)
    w = rng.standard_normal(k).astype(F32)
    inits = [numpy_helper.from_array(np.tile(w, (n, 1)), "W"), numpy_helper.from_array(np.full(n, .25, F32), "B")]
    m = _model([helper.make_node("Flatten", ["X"], ["F"], axis=1),
                helper.make_node("Gemm", ["F", "W", "B"], ["Y"], transB=1)],
               [_vi("X", [None, k, 1, 1])], [_vi("Y", [None, n])], inits)
    al = np.where(w > 0, 3.0, -3.0).astype(F32).reshape(1, k, 1, 1)
    qm = _quantize(tmp_path, m, [{"X": al}, {"X": -al}, {"X": rng.standard_normal((2, k, 1, 1)).astype(F32)}])
    op = _node(qm, "Gemm")
    _, sx, zx = _dq(qm, op.input[0])
    wq, sw, _ = _dq(qm, op.input[1])
    b = int(_dq(qm, op.input[2])[0][0])
    sy, zy = _q_after(qm, op.output[0])
    wv, zx = wq[0].astype(np.int64), int(zx)
    mult = nm.ort_gemm_multiplier(sx, sw, sy)
    amax = int((np.where(wv > 0, 127 - zx, -128 - zx) * wv).sum()) + b
    cand = np.arange(1 << 24, min(amax, int((127 - zy) / float(mult))), dtype=np.int64)
    f32_first = np.rint((cand.astype(F32) * mult).astype(F32))
    exact_first = np.rint((cand.astype(np.float64) * float(mult)).astype(F32))
    targets = cand[f32_first != exact_first][:40]
    assert len(targets) >= 10
    xs = []
    for t in targets:                        # greedy: start from the max accumulator, walk down to t
        d = np.where(wv > 0, 127 - zx, -128 - zx)
        r = amax - int(t)
        for i in np.argsort(-np.abs(wv), kind="stable"):
            a = abs(int(wv[i]))
            if a and r:
                step = min(r // a, 255)
                d[i] -= step if wv[i] > 0 else -step
                r -= step * a
        assert r == 0
        xs.append(d + zx)
    xs = np.array(xs)
    acc = (xs - zx) @ wv + b
    assert np.array_equal(acc, targets)
    y = _IntSession(qm).run(xs.reshape(len(xs), k, 1, 1))[0]
    ref = nm.requantize(acc, mult, zy)
    assert np.array_equal(ref[:, None].repeat(n, 1), y)
    alt = np.clip(np.rint((acc.astype(np.float64) * float(mult)).astype(F32)) + zy, -128, 127)
    assert np.any(alt != y[:, 0])                                        # no pre-rounding of acc: wrong
    print(f"[large acc] {len(targets)} crafted accumulators in [2^24, {targets.max()}] bit-exact")


# ---------------------------------------------------------------------------
# ORT: Add / AveragePool / GlobalAveragePool / Concat / MaxPool / Relu / Clip
# ---------------------------------------------------------------------------
def _hand_qdq(op, in_params, out_param, in_shapes, attrs=None, extra_inits=(), extra_inputs=()):
    """Single-op QDQ model exactly as quantize_static lays it out (Q->DQ->op->Q->DQ)."""
    nodes, inits, inputs, op_in = [], list(extra_inits), [], []
    arr = numpy_helper.from_array
    for i, ((s, z), shp) in enumerate(zip(in_params, in_shapes)):
        inputs.append(_vi(f"X{i}", shp))
        inits += [arr(np.array(s, F32), f"s{i}"), arr(np.array(z, np.int8), f"z{i}")]
        nodes += [helper.make_node("QuantizeLinear", [f"X{i}", f"s{i}", f"z{i}"], [f"q{i}"]),
                  helper.make_node("DequantizeLinear", [f"q{i}", f"s{i}", f"z{i}"], [f"d{i}"])]
        op_in.append(f"d{i}")
    s, z = out_param
    inits += [arr(np.array(s, F32), "sy"), arr(np.array(z, np.int8), "zy")]
    nodes += [helper.make_node(op, op_in + list(extra_inputs), ["o"], **(attrs or {})),
              helper.make_node("QuantizeLinear", ["o", "sy", "zy"], ["qo"]),
              helper.make_node("DequantizeLinear", ["qo", "sy", "zy"], ["Y"])]
    return _model(nodes, inputs, [_vi("Y", None)], inits)


@pytest.mark.unit
def test_add(tmp_path):
    """QLinearAdd: float reference bit-exact; integer rule within the measured bound."""
    a, b = np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij")
    a, b = a.reshape(1, 256, 16, 16), b.reshape(1, 256, 16, 16)
    shp = [1, 256, 16, 16]
    rng = np.random.default_rng(8)
    m = _model([helper.make_node("Add", ["A", "B"], ["Y"])], [_vi("A", shp), _vi("B", shp)], [_vi("Y", shp)], [])
    feeds = [{"A": (rng.standard_normal(shp) * 3).astype(F32), "B": (rng.standard_normal(shp) * .7).astype(F32)}
             for _ in range(3)]
    qm = _quantize(tmp_path, m, feeds, name="add")
    add = _node(qm, "Add")
    _, sa, za = _dq(qm, add.input[0])
    _, sb, zb = _dq(qm, add.input[1])
    sy, zy = _q_after(qm, add.output[0])
    param_sets = [(sa, int(za), sb, int(zb), sy, zy)]
    # more scale sets through the same QDQ pattern: random, residual-like, exact power-of-two ties
    for i in range(7):
        if i % 3 == 2:
            s0 = F32(2.0 ** rng.integers(-8, -3))
            ss = (s0, F32(s0 * 2.0 ** rng.integers(-2, 3)), F32(s0 * 2.0 ** rng.integers(-1, 3)))
        else:
            ss = tuple(F32(v) for v in np.exp(rng.uniform(np.log(1e-3), np.log(.5), 3)))
        zs = [int(v) for v in rng.integers(-40, 40, 3)]
        param_sets.append((ss[0], zs[0], ss[1], zs[1], ss[2], -128 if i == 3 else zs[2]))
    got_int, got_ref, want = [], [], []
    for j, (sa_, za_, sb_, zb_, sy_, zy_) in enumerate(param_sets):
        model = qm if j == 0 else _hand_qdq("Add", [(sa_, za_), (sb_, zb_)], (sy_, zy_), [shp, shp])
        sess = _IntSession(model, tmp_path)
        assert "QLinearAdd" in sess.ops, sess.ops
        y = sess.run(a, b)[0]
        want.append(y)
        got_ref.append(nm.ort_qlinear_add_reference(a, sa_, za_, b, sb_, zb_, sy_, zy_))
        got_int.append(nm.add_requant(a, sa_, za_, b, sb_, zb_, sy_, zy_))
    want = np.concatenate(want)
    assert np.array_equal(np.concatenate(got_ref), want)
    assert np.array_equal(np.concatenate(got_int), want)  # add_requant is bit-exact (tests/test_eltwise.py)
    # the s8 kernel (session.qdqisint8allowed=1) is modelled by domain_offset=0
    sa_, za_, sb_, zb_, sy_, zy_ = param_sets[1]
    y8 = _IntSession(_hand_qdq("Add", [(sa_, za_), (sb_, zb_)], (sy_, zy_), [shp, shp]), int8_allowed=True).run(a, b)[0]
    assert np.array_equal(nm.ort_qlinear_add_reference(a, sa_, za_, b, sb_, zb_, sy_, zy_, domain_offset=0), y8)
    assert np.array_equal(nm.add_requant(a, sa_, za_, b, sb_, zb_, sy_, zy_, domain_offset=0), y8)


@pytest.mark.unit
def test_avgpool_output_is_not_a_function_of_the_window_sum():
    """Why the exact AveragePool follows each float32 addition (`window_average_sum`) rather than the integer
    window sum: onnxruntime sums the dequantized float32 values window element by element, rounding each partial
    sum, so two windows with the same integer sum can give different outputs (2x2 windows, equal in/out scales),
    and the integer rule follows it."""
    rng = np.random.default_rng(0)
    ambiguous = 0
    for _ in range(5):
        sx, zx = F32(rng.uniform(0.01, 0.1)), int(rng.integers(-128, 128))
        x = rng.integers(-128, 128, (1, 1, 2, 4000)).astype(np.int64)
        y = nm.ort_qlinear_avgpool_reference(x, sx, zx, sx, zx, (2, 2), (2, 2))
        assert np.array_equal(_window_average(x, sx, zx, sx, zx, (2, 2), (2, 2), (0, 0, 0, 0), 0), y)
        sums = x.reshape(1, 1, 2, 2000, 2).sum(axis=(2, 4)).reshape(-1)
        outputs: dict[int, set] = {}
        for total, out in zip(sums.tolist(), y.reshape(-1).tolist()):
            outputs.setdefault(total, set()).add(out)
        ambiguous += sum(len(v) > 1 for v in outputs.values())
    assert ambiguous > 0


_POOL_CASES = [((2, 2), (2, 2), (0, 0, 0, 0), 0), ((3, 3), (1, 1), (1, 1, 1, 1), 0), ((3, 3), (1, 1), (1, 1, 1, 1), 1),
               ((3, 3), (2, 2), (1, 1, 1, 1), 0), ((3, 3), (2, 2), (0, 1, 0, 1), 1), ((5, 5), (1, 1), (2, 2, 2, 2), 0),
               ((1, 3), (1, 1), (0, 1, 0, 1), 0), ((2, 3), (2, 1), (0, 0, 0, 0), 0)]


@pytest.mark.unit
def test_avgpool_quantize_static(tmp_path):
    """Conv -> AveragePool (-> Relu) from quantize_static (same in/out scale, and a folded Relu giving a different
    output scale with zp=-128): numerics' AveragePool == onnxruntime on every value."""
    rng = np.random.default_rng(9)
    c, hh = 8, 12
    w = (rng.standard_normal((c, c, 1, 1)) * .5).astype(F32)
    for relu in (False, True):
        nodes = [helper.make_node("Conv", ["X", "W"], ["A"]),
                 helper.make_node("AveragePool", ["A"], ["P" if relu else "Y"], kernel_shape=[3, 3], pads=[1] * 4)]
        if relu:
            nodes.append(helper.make_node("Relu", ["P"], ["Y"]))
        m = _model(nodes, [_vi("X", [None, c, hh, hh])], [_vi("Y", [None] * 4)], [numpy_helper.from_array(w, "W")])
        qm = _quantize(tmp_path, m, [{"X": rng.standard_normal((2, c, hh, hh)).astype(F32)} for _ in range(3)],
                       name=f"avg{relu}")
        sess = _IntSession(qm, tmp_path)
        assert "QLinearAveragePool" in sess.ops and "QLinearConv" in sess.ops, sess.ops
        conv, pool = _node(qm, "Conv"), _node(qm, "AveragePool")
        _, sx, zx = _dq(qm, conv.input[0])
        wq, sw, _ = _dq(qm, conv.input[1])
        sa, za = _q_after(qm, conv.output[0])
        _, sp, zp = _dq(qm, pool.input[0])
        sy, zy = _q_after(qm, pool.output[0])
        assert (F32(sp), int(zp)) == (sa, za)
        assert (sy == sa) != relu
        x = rng.integers(-128, 128, size=(8, c, hh, hh))
        y = sess.run(x)[0]
        a = nm.requantize(_conv_int(x - int(zx), wq), _per_channel(nm.ort_conv_multiplier(sx, sw, sa), c), za)
        ref = nm.ort_qlinear_avgpool_reference(a, sa, za, sy, zy, (3, 3), (1, 1), (1, 1, 1, 1), 0)
        assert np.array_equal(ref, y)
        assert np.array_equal(_window_average(a, sa, za, sy, zy, (3, 3), (1, 1), (1, 1, 1, 1), 0), y)


@pytest.mark.unit
@pytest.mark.parametrize("same_scale", [True, False], ids=["same_scale", "diff_scale"])
def test_avgpool_configs(tmp_path, same_scale):
    """QLinearAveragePool over 8 geometries (padding in and out of the divisor, strides, 1-high windows), random
    scales, in the uint8 domain of a default session and the int8 domain (session.qdqisint8allowed=1):
    numerics' AveragePool and the float reference == onnxruntime on every value."""
    rng = np.random.default_rng(10 + same_scale)
    values = 0
    for k, st, pads, cip in _POOL_CASES:
        for trial in range(3):
            sx, zx = F32(np.exp(rng.uniform(np.log(.005), np.log(.2)))), int(rng.integers(-30, 30))
            sy, zy = (sx, zx) if same_scale else (F32(sx * rng.uniform(.3, 3)), int(rng.choice([-128, 5, -17])))
            shp = [4, 16, 12, 12]
            x = rng.integers(-128, 128, size=shp)
            model = _hand_qdq("AveragePool", [(sx, zx)], (sy, zy), [shp],
                              dict(kernel_shape=list(k), strides=list(st), pads=list(pads), count_include_pad=cip))
            int8 = trial == 2
            sess = _IntSession(model, tmp_path, int8_allowed=int8)
            assert "QLinearAveragePool" in sess.ops, sess.ops
            y = sess.run(x)[0]
            offset = 0 if int8 else nm.ORT_X86_DOMAIN_OFFSET
            assert np.array_equal(nm.ort_qlinear_avgpool_reference(x, sx, zx, sy, zy, k, st, pads, cip,
                                                                   domain_offset=offset), y)
            assert np.array_equal(_window_average(x, sx, zx, sy, zy, k, st, pads, cip, domain_offset=offset), y)
            values += y.size
    assert values > 100_000


# the unit tier checks the first 250 of the full suite's 2,000 sets (the same draws: one seed, the same order)
@pytest.mark.parametrize("sets", [pytest.param(250, marks=pytest.mark.unit, id="250-sets"),
                                  pytest.param(2000, id="2000-sets")])
def test_window_average_constants_prove_every_random_scale_set(sets):
    """`window_average_constants` proves its estimate (or declines) for 2,000 random scale sets, windows and
    divisors; where it gives constants, the datapath equals the float32 reference on random windows, the largest
    sums and the sums at every threshold."""
    rng = np.random.default_rng(12)
    declined = 0
    for _ in range(sets):
        sx = F32(np.exp(rng.uniform(np.log(1e-4), np.log(10.0))))
        sy = F32(sx * np.exp(rng.uniform(np.log(0.05), np.log(20.0))))
        zx, zy = (int(z) for z in rng.integers(-128, 128, 2))
        window = int(rng.choice([2, 4, 9, 25, 49]))
        d = int(rng.integers(1, window + 1))
        c = nm.window_average_constants(sx, zx, sy, zy, window, (d,))
        if c is None:
            declined += 1
            continue
        elements = rng.integers(-128, 128, (window, 64))
        elements[:, 0], elements[:, 1] = 127, -128
        total = nm.window_average_sum(list(elements), c.mantissa, zx)
        edges = c.thresholds[0, 1:c.last + 1] + c.low[0]
        total = np.concatenate([total, np.clip(np.concatenate([edges, edges - 1]), 1 - c.bound, c.bound - 1)])
        want = nm.ort_average_level(total, c.exponent, d, sy, zy, -128, 127, nm.ORT_X86_DOMAIN_OFFSET) - 128
        assert np.array_equal(nm.window_average_level(total, np.zeros(total.shape, np.int64), c), want)
    assert declined == 0


@pytest.mark.unit
def test_global_average_pool(tmp_path):
    """QLinearGlobalAveragePool (and AveragePool with kernel == image) are bit-exact."""
    rng = np.random.default_rng(11)
    c, hh = 16, 7
    w = (rng.standard_normal((c, c, 1, 1)) * .5).astype(F32)
    m = _model([helper.make_node("Conv", ["X", "W"], ["A"]), helper.make_node("GlobalAveragePool", ["A"], ["Y"])],
               [_vi("X", [None, c, hh, hh])], [_vi("Y", [None] * 4)], [numpy_helper.from_array(w, "W")])
    qm = _quantize(tmp_path, m, [{"X": rng.standard_normal((2, c, hh, hh)).astype(F32)} for _ in range(3)], name="gap")
    sess = _IntSession(qm, tmp_path)
    assert "QLinearGlobalAveragePool" in sess.ops, sess.ops
    conv, gap = _node(qm, "Conv"), _node(qm, "GlobalAveragePool")
    _, sx, zx = _dq(qm, conv.input[0])
    wq, sw, _ = _dq(qm, conv.input[1])
    sa, za = _q_after(qm, conv.output[0])
    sy, zy = _q_after(qm, gap.output[0])
    x = rng.integers(-128, 128, size=(32, c, hh, hh))
    y = sess.run(x)[0]
    a = nm.requantize(_conv_int(x - int(zx), wq), _per_channel(nm.ort_conv_multiplier(sx, sw, sa), c), za)
    got = nm.gap_requant(a.astype(np.int64).sum((2, 3), keepdims=True), hh * hh, sa, za, sy, zy)
    assert np.array_equal(got, y)
    n = y.size
    for hw, (sx, zx, sy, zy) in zip([(1, 1), (3, 4), (13, 13), (16, 2)],
                                    [(.05, 3, .004, -7), (.011, -20, .02, 9), (.2, 0, .0005, 31), (.03, -5, .03, -5)]):
        shp = [4, 24, *hw]
        x = rng.integers(-128, 128, size=shp)
        for op, attrs in (("GlobalAveragePool", {}), ("AveragePool", dict(kernel_shape=list(hw)))):
            y = _IntSession(_hand_qdq(op, [(sx, zx)], (sy, zy), [shp], attrs)).run(x)[0]
            assert np.array_equal(nm.gap_requant(x.sum((2, 3), keepdims=True), hw[0] * hw[1], sx, zx, sy, zy), y)
            n += y.size
    print(f"[gap] {n} elements bit-exact")


@pytest.mark.unit
def test_concat(tmp_path):
    """QLinearConcat: rescale_table bit-exact, fixed-point rescale within bound."""
    rng = np.random.default_rng(12)
    shp = [1, 256, 2, 2]
    m = _model([helper.make_node("Concat", ["A", "B"], ["Y"], axis=1)], [_vi("A", shp), _vi("B", shp)],
               [_vi("Y", [1, 512, 2, 2])], [])
    feeds = [{"A": (rng.standard_normal(shp) * 3).astype(F32), "B": (rng.standard_normal(shp) * .7).astype(F32)}
             for _ in range(3)]
    qm = _quantize(tmp_path, m, feeds, name="concat")
    cat = _node(qm, "Concat")
    params = [(_dq(qm, t)[1], int(_dq(qm, t)[2])) for t in cat.input]
    sy, zy = _q_after(qm, cat.output[0])
    sets = [(params, (sy, zy))]
    for _ in range(20):
        ss = [F32(v) for v in np.exp(rng.uniform(np.log(.003), np.log(.3), 3))]
        zs = [int(v) for v in rng.integers(-40, 40, 3)]
        sets.append((((ss[0], zs[0]), (ss[1], zs[1])), (ss[2], zs[2])))
    xa = np.tile(np.arange(-128, 128).reshape(1, 256, 1, 1), (1, 1, 2, 2))
    xb = np.roll(xa, 17, axis=1)
    got_t, got_fp, want = [], [], []
    for j, (ins, (sy_, zy_)) in enumerate(sets):
        model = qm if j == 0 else _hand_qdq("Concat", list(ins), (sy_, zy_), [shp, shp], dict(axis=1))
        sess = _IntSession(model, tmp_path)
        assert "QLinearConcat" in sess.ops, sess.ops
        want.append(sess.run(xa, xb)[0])
        got_t.append(np.concatenate([nm.apply_table(x, nm.rescale_table(s, z, sy_, zy_))
                                     for x, (s, z) in zip((xa, xb), ins)], 1))
        got_fp.append(np.concatenate([nm.rescale(x, s, z, sy_, zy_) for x, (s, z) in zip((xa, xb), ins)], 1))
    want = np.concatenate(want)
    assert np.array_equal(np.concatenate(got_t), want)
    _assert_residual("Concat rescale (fixed point) vs ORT", np.concatenate(got_fp), want, _RATE_RESCALE_RANDOM)


@pytest.mark.unit
def test_maxpool_exact(tmp_path):
    rng = np.random.default_rng(13)
    c, hh = 8, 11
    w = (rng.standard_normal((c, c, 1, 1)) * .5).astype(F32)
    for k, st, pads in (((2, 2), (2, 2), (0, 0, 0, 0)), ((3, 3), (2, 2), (1, 1, 1, 1))):
        m = _model([helper.make_node("Conv", ["X", "W"], ["A"]),
                    helper.make_node("MaxPool", ["A"], ["Y"], kernel_shape=list(k), strides=list(st), pads=list(pads))],
                   [_vi("X", [None, c, hh, hh])], [_vi("Y", [None] * 4)], [numpy_helper.from_array(w, "W")])
        feeds = [{"X": rng.standard_normal((2, c, hh, hh)).astype(F32)} for _ in range(3)]
        qm = _quantize(tmp_path, m, feeds, name="mp")
        sess = _IntSession(qm, tmp_path)
        assert "QLinearConv" in sess.ops and any("MaxPool" in o for o in sess.ops), sess.ops
        conv, mp = _node(qm, "Conv"), _node(qm, "MaxPool")
        _, sx, zx = _dq(qm, conv.input[0])
        wq, sw, _ = _dq(qm, conv.input[1])
        sa, za = _q_after(qm, conv.output[0])
        assert _q_after(qm, mp.output[0]) == (sa, za)                   # MaxPool keeps the scale
        x = rng.integers(-128, 128, size=(8, c, hh, hh))
        y = sess.run(x)[0]
        a = nm.requantize(_conv_int(x - int(zx), wq), _per_channel(nm.ort_conv_multiplier(sx, sw, sa), c), za)
        assert np.array_equal(_maxpool_int(a.astype(np.int64), k, st, pads), y)


@pytest.mark.unit
def test_standalone_relu_clip_tables(tmp_path):
    """DQ -> Relu/Clip -> Q that ORT cannot fuse runs in float; the 256-entry table is exact.
    (Relu with output zp=-128 is removed by ORT; the table is the same.)"""
    rng = np.random.default_rng(14)
    shp = [1, 256, 1, 1]
    x = np.arange(-128, 128).reshape(shp)
    lo, hi = numpy_helper.from_array(np.array(0, F32), "lo"), numpy_helper.from_array(np.array(6, F32), "hi")
    for i in range(12):
        sx, sy = (F32(v) for v in np.exp(rng.uniform(np.log(.003), np.log(.3), 2)))
        zx, zy = int(rng.integers(-40, 40)), [-128, int(rng.integers(-100, 40))][i % 2]
        y = _IntSession(_hand_qdq("Relu", [(sx, zx)], (sy, zy), [shp])).run(x)[0]
        assert np.array_equal(nm.apply_table(x, nm.rescale_table(sx, zx, sy, zy, lo=0.0)), y)
        y = _IntSession(_hand_qdq("Clip", [(sx, zx)], (sy, zy), [shp], extra_inits=[lo, hi],
                                  extra_inputs=["lo", "hi"])).run(x)[0]
        assert np.array_equal(nm.apply_table(x, nm.rescale_table(sx, zx, sy, zy, lo=0.0, hi=6.0)), y)
