"""What onnxruntime computes: its float32 multipliers in its own op order, its requantization as an exact integer
rule, its lookup tables, and the float32 emulations of its float kernels that define the golden numbers.

Every rule below was established empirically against onnxruntime 1.32 (CPU execution
provider, default ``SessionOptions``, x86-64 with AVX2/FMA/AVX512-VNNI) on QDQ models
produced by ``onnxruntime.quantization.quantize_static`` (int8 activations and weights)
and cross-checked with the ORT / MLAS source.  See ``docs/numerics.md`` for the
evidence and the measured residual table.

Rule summary (details in each docstring)
----------------------------------------
The integer forms named "exact via" below, other than ``requantize`` and ``gap_requant``, are datapaths: they live in
``datapath`` and ``average_datapath``.

* Conv / Gemm / MatMul (QLinearConv, QGemm, QLinearMatMul):
  ``y = sat(rne(f32(f32(acc) * M)) + zy)`` with ``M = f32(f32(sx * sw[c]) / sy)``;
  :func:`requantize` reproduces it bit-exactly with integers only.
* GlobalAveragePool (QLinearGlobalAveragePool, and AveragePool whose kernel covers the
  whole image without padding): same float requantization with
  ``M = f32(sx / f32(sy * f32(N)))`` applied to ``sum(x) - N*zx``; exact via
  :func:`gap_requant`.
* Add (QLinearAdd): ORT's two float32 fmas (zero point in float, before rounding); exact via
  :func:`add_requant` (:func:`add_fused_requant`).  Sub and unfused Adds (float ``DQ -> op -> Q``): exact via
  :func:`add_requant` with ``subtract``/``fused=False`` (:func:`add_float_requant`).
* AveragePool (QLinearAveragePool): ORT sums the dequantized values in float32, element by element in the
  window's row-major order, divides, and adds the output zero point before rounding (its output is not a
  function of the integer window sum); exact via :func:`window_average_sum` (each float32 addition in
  integers) and :func:`window_average_level` (the rest, a monotonic function of the sum, by thresholds).
  Where onnxruntime fuses no QLinearAveragePool (an int8 input with fan-out on x86: DQ -> AveragePool -> Q in
  float) the float32 kernel it picks sums the window in its own order (``AVERAGE_BY_COLUMNS`` for MLAS's vector
  kernel) and MlasQuantizeLinear adds the output zero point after rounding
  (:func:`float_average_domain_offset`); exact by the same two functions.
* Mul (QLinearMul): ``y = sat(rne(f32(f32(f32(P) * R) + zy')))`` with ``P = (a-za)*(b-zb)``,
  ``R = f32(f32(sa*sb)/sy)``, the zero point added in float before rounding; exact via :func:`mul_requant`.
* Concat (QLinearConcat), DQ->Q chains, standalone float Relu/Clip: a 256-entry table
  built from ``MlasQuantizeLinear(f32(sx*(x-zx)))``; :func:`rescale_table` is exact,
  :func:`rescale` (fixed point) is within 1 LSB.
* MaxPool: exact integer max over the valid window (padding never wins).

Caveat: these are the rules of the *fused* QLinear kernels.  With default options on x86,
ORT's ``QDQS8ToU8Transformer`` converts an int8 Q->DQ pair to uint8 only when the Q has a
single consumer; a tensor with fan-out (e.g. a residual input) then blocks the fusion of
its producer/consumers, which ORT runs as float ``DQ -> op -> Q`` instead (within 1 LSB
of these rules, not bit-exact for Conv).  See docs/numerics.md section 4.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import numpy.typing as npt

from ming_py.numerics.integers import (_F32, INT8_MAX, INT8_MIN, ArrayLike, IntArray, bit_length, _f32_scalar,
    float32_parts, _i64, round_shift_half_even, round_shift_half_up)
# The host-side rules (also shipped to the board in a build's deploy package) live in ming_host.
from ming_py.contract.ming_host import ort_dequantize_linear, ort_quantize_linear, saturate


#: On x86-64 with default SessionOptions ORT's ``QDQS8ToU8Transformer`` rewrites every
#: int8 Q->DQ pair whose Q has a single consumer to uint8 (value + 128, zero point + 128)
#: before fusing, so QLinearAdd / QLinearAveragePool run in the uint8 domain.  This
#: matters for the float kernels, which add the (shifted) zero point in float.
ORT_X86_DOMAIN_OFFSET = 128


# ---------------------------------------------------------------------------
# float32 multipliers (ORT's exact op order)
# ---------------------------------------------------------------------------
def ort_conv_multiplier(x_scale: ArrayLike, w_scale: ArrayLike, y_scale: ArrayLike) -> npt.NDArray[np.float32]:
    """``M[c] = f32(f32(x_scale * w_scale[c]) / y_scale)`` -- float32, this op order.

    ORT ``QLinearConv::ComputeOutputScale``: ``X_scale * W_scale[i] / Y_scale`` in float
    (left to right).  QLinearMatMul uses the same order.  Empirically the alternatives
    ``sx*(sw/sy)``, ``(sx/sy)*sw`` and a float64 multiplier each disagree with ORT on
    some outputs while this one never does (docs/numerics.md).
    """
    sx = _f32_scalar(x_scale)
    sy = _f32_scalar(y_scale)
    sw = np.asarray(w_scale, dtype=_F32)
    return ((sx * sw).astype(_F32) / sy).astype(_F32)


def ort_gemm_multiplier(a_scale: ArrayLike, b_scale: ArrayLike, y_scale: ArrayLike,
                        alpha: float = 1.0) -> npt.NDArray[np.float32]:
    """QGemm (``contrib_ops/cpu/quantization/quant_gemm.cc``): ``f32(f32(f32(alpha*sa)*sb)/sy)``.

    With ``alpha == 1`` (what quantize_static produces) this equals
    :func:`ort_conv_multiplier`.
    """
    sa = _f32_scalar(a_scale)
    sy = _f32_scalar(y_scale)
    sb = np.asarray(b_scale, dtype=_F32)
    return (((_F32(alpha) * sa) * sb).astype(_F32) / sy).astype(_F32)


def ort_gap_multiplier(x_scale: ArrayLike, y_scale: ArrayLike, image_size: int) -> np.float32:
    """MLAS ``CheckQLinearGlobalAveragePoolScaleAndSize``: ``f32(sx / f32(sy * f32(N)))``.

    ORT rejects results outside ``[2**-32, 256)`` and ``N >= 2**24``.
    """
    sx = _f32_scalar(x_scale)
    sy = _f32_scalar(y_scale)
    m = _F32(sx / _F32(sy * _F32(int(image_size))))
    if int(image_size) >= 1 << 24 or not (2.0 ** -32 <= float(m) < 256.0):
        raise ValueError("QLinearGlobalAveragePool parameters out of ORT's range")
    return m


def mul_multiplier(a_scale: ArrayLike, b_scale: ArrayLike, y_scale: ArrayLike) -> np.float32:
    """MLAS ``MlasQLinearMul``: ``R = f32(f32(ScaleA * ScaleB) / ScaleC)`` (C++, left to right)."""
    return _F32(ort_conv_multiplier(a_scale, b_scale, y_scale))


# ---------------------------------------------------------------------------
# Conv / Gemm / MatMul / GAP requantization (bit-exact, integer only)
# ---------------------------------------------------------------------------
def requantize_float_reference(acc: ArrayLike, multiplier: ArrayLike, zero_point: ArrayLike,
                               qmin: int = INT8_MIN, qmax: int = INT8_MAX) -> np.ndarray:
    """The float formula ORT executes (MLAS ``MlasRequantizeOutput`` / ConvSym kernels).

    ``y = sat(rne(f32(f32(acc) * M)) + zp)``: ``cvtdq2ps`` (acc -> float32, rne),
    ``mulps``, clamp to ``[qmin-zp, qmax-zp]``, ``cvtps2dq`` (rne), integer ``+ zp``.
    Kept for documentation and tests; use :func:`requantize` in the compiler.
    """
    a = _i64(acc).astype(_F32)
    with np.errstate(over="ignore"):
        v = (a * np.asarray(multiplier, _F32)).astype(_F32)
    zp = _i64(zero_point)
    v = np.clip(v.astype(np.float64), qmin - zp, qmax - zp)             # float clamp, as MLAS
    return saturate(np.rint(v).astype(np.int64) + zp, qmin, qmax)


def requantize(acc: ArrayLike, multiplier: ArrayLike, zero_point: ArrayLike,
               qmin: int = INT8_MIN, qmax: int = INT8_MAX, half_away: bool = False) -> np.ndarray:
    """Bit-exact integer emulation of ORT's float32 requantization.

    Rule (ORT, verified ``==`` on every element): ``y = sat(rne(f32(f32(acc) * M)) + zp)``
    where ``acc`` is the int32 accumulator ``sum((x - zx) * w) + bias_int32`` and ``M`` the
    float32 multiplier (:func:`ort_conv_multiplier`).  The zero point is added *after*
    rounding (``rne(v) + zp``, not ``rne(v + zp)``; they differ at exact ties with odd zp).

    Integer algorithm (int64 only; maps 1:1 to C++):

    1. ``M = m * 2**e`` with 24-bit mantissa ``m`` (:func:`float32_parts`).
    2. ``a = |acc|``; emulate ``float32(acc)``: if ``bitlen(a) > 24`` round ``a`` to 24
       significant bits with rne: ``a = rne(a >> d) << d`` with ``d = bitlen(a) - 24``.
    3. ``P = (a >> d) * m`` (< 2**49), exponent ``E = d + e``; round ``P`` to 24
       significant bits with rne (the float32 product), ``E += d2``.
    4. ``|y| = rne(P * 2**E)``: ``P << E`` if ``E >= 0`` (saturating) else
       ``round_shift_half_even(P, -E)``; rne is odd-symmetric so the sign is re-applied.
    5. ``y = sat(sign * |y| + zp)``.

    ``multiplier`` must be float32-representable, >= 0; ``|acc| < 2**62`` (ORT's
    accumulators are int32).  Returns int8 (uint8 if ``qmin >= 0``).

    ``half_away``: step 4 rounds half away from zero (``std::round``), as LiteRT's reference
    FULLY_CONNECTED does (``y = sat(round(f32(f32(acc) * M)) + zp)``).
    """
    acc = _i64(acc)
    if np.any(np.abs(acc) >= (1 << 62)):
        raise ValueError("|acc| must be < 2**62")
    mant, exp = float32_parts(multiplier)
    neg = acc < 0
    a = np.abs(acc)
    d1 = np.maximum(bit_length(a) - 24, 0)
    a_m = round_shift_half_even(a, d1)                    # float32(|acc|) = a_m * 2**d1
    p = a_m * mant                                        # exact, < 2**49
    d2 = np.maximum(bit_length(p) - 24, 0)
    p_m = round_shift_half_even(p, d2)                    # float32 product mantissa (<= 2**24)
    e_tot = d1 + d2 + exp                                 # value = p_m * 2**e_tot
    big = np.int64(1) << 40                               # anything > |qmin|,|qmax| + |zp|
    pos = np.where(e_tot > 16, np.where(p_m > 0, big, 0), p_m << np.clip(e_tot, 0, 16))
    fraction_rounding = round_shift_half_up if half_away else round_shift_half_even  # on magnitudes
    mag = np.where(e_tot >= 0, pos, fraction_rounding(p_m, np.maximum(-e_tot, 1)))
    y = np.where(neg, -mag, mag) + _i64(zero_point)
    return saturate(y, qmin, qmax)


def gap_requant(window_sum: ArrayLike, count: int, x_scale: ArrayLike, x_zp: int,
                y_scale: ArrayLike, y_zp: int, qmin: int = INT8_MIN, qmax: int = INT8_MAX) -> np.ndarray:
    """GlobalAveragePool, bit-exact: ``requantize(sum(x) - N*zx, f32(sx/f32(sy*N)), zy)``.

    MLAS ``MlasQLinearGlobalAveragePoolNchw/Nhwc`` accumulates the raw int8 values in
    int32, adds the bias ``-zx*N`` and calls the float requantization of
    :func:`requantize`.  ORT also routes ``AveragePool`` with ``kernel == spatial shape``
    and zero pads here (``fallback_to_global`` in ``qlinear_pool.cc``) -- use this rule
    for that case, not :func:`window_average_level`.  ``window_sum`` = sum of raw int8 values.
    """
    n = int(count)
    m = ort_gap_multiplier(x_scale, y_scale, n)
    return requantize(_i64(window_sum) - n * int(x_zp), m, int(y_zp), qmin, qmax)


# ---------------------------------------------------------------------------
# AveragePool: the orders ORT sums a window in, and its output level of a float32 sum
# ---------------------------------------------------------------------------
# The orders in which onnxruntime's float32 AveragePool kernels sum a window (`window_average_sum`). MLAS's
# vector kernel (mlas/lib/pooling.cpp, MlasPool2DVectorKernel: every 2-D pool of opset <= 18 with a stride of at
# most 2 along the width, no kernel side over 32 and the padded width within its 2,045-float reduction buffer)
# adds each input column down the window's rows first, then the column sums across the window.
AVERAGE_BY_COLUMNS = "columns"
# MLAS's generic kernel (MlasPool2DKernel), the NCHWc kernel (MlasNchwcPool, what onnxruntime's NchwcTransformer
# turns a pool of whole channel blocks into), the opset-19 reference loop (AveragePool2DTask in
# providers/cpu/nn/pool_functors.h, also what opset 7-18 run with ceil_mode and count_include_pad together) and
# qlinear_pool.cc add the window's elements in row-major order.
AVERAGE_BY_ROWS = "rows"


def float_average_domain_offset(y_zp: int) -> int:
    """The `domain_offset` of :func:`window_average_constants` that gives a float AveragePool's output: DQ ->
    AveragePool -> Q, which onnxruntime runs where it fuses no QLinearAveragePool, quantizes the float32 average
    by MlasQuantizeLinear, ``sat(rne(f32(a / sy)) + zy)`` (the zero point added after rounding). With
    ``zy + offset = 0`` the QLinearAveragePool finish ``nearbyintf(f32(f32(a / sy) + f32(zy + offset))) - offset``
    adds an exact 0.0 before rounding and ``zy`` after it: the same output."""
    return -int(y_zp)


def ort_average_level(total: ArrayLike, exponent: int, divisor: int, y_scale: np.float32, y_zp: int,
                       qmin: int, qmax: int, domain_offset: int) -> IntArray:
    """onnxruntime's output level (``y - qmin``) for float32 sums ``total * 2**exponent``: ``f32(s / d)``,
    ``f32(. / sy)``, ``f32(. + zy')``, ``nearbyintf``, clamp."""
    s = np.ldexp(np.asarray(total, np.float64), int(exponent)).astype(_F32)
    a = (s / _F32(divisor)).astype(_F32)
    v = ((a / y_scale).astype(_F32) + _F32(int(y_zp) + domain_offset)).astype(_F32)
    y = np.clip(np.rint(v.astype(np.float64)), qmin + domain_offset, qmax + domain_offset)
    return y.astype(np.int64) - domain_offset - qmin


# ---------------------------------------------------------------------------
# Tables (Concat inputs, DQ->Q chains, standalone Relu/Clip)
# ---------------------------------------------------------------------------
def rescale_table(x_scale: ArrayLike, x_zp: int, y_scale: ArrayLike, y_zp: int,
                  lo: Optional[float] = None, hi: Optional[float] = None,
                  qmin: int = INT8_MIN, qmax: int = INT8_MAX) -> np.ndarray:
    """ORT-exact 256-entry table ``T[x + 128]`` for int8 ``x`` (compile-time constant).

    ``T[x] = sat(rne(f32(clip(f32(sx * f32(x - zx)), lo, hi) / sy)) + zy)`` -- exactly
    ``QlinearBuildLookupTable`` (QLinearConcat) and the unfused ``DQ -> [Relu|Clip] ->
    QuantizeLinear`` chain (``lo=0`` for Relu, ``lo, hi`` for Clip).  The hardware only
    indexes a 256x8 ROM, so this is the preferred exact implementation for Concat
    rescaling and standalone Relu/Clip.  Also equals ``clip(T_noclip[x], Q(lo), Q(hi))``
    because quantization is monotonic.
    """
    x = np.arange(-128, 128, dtype=np.int64)
    v = ort_dequantize_linear(x, x_scale, x_zp)
    if lo is not None:
        v = np.maximum(v, _F32(lo))
    if hi is not None:
        v = np.minimum(v, _F32(hi))
    return ort_quantize_linear(v, y_scale, y_zp, qmin, qmax)


def apply_table(x: ArrayLike, table: np.ndarray) -> np.ndarray:
    """``table[x + 128]`` for int8-valued ``x``."""
    return table[_i64(x) + 128]


# ---------------------------------------------------------------------------
# Bit-exact float32 references of ORT's float kernels (golden model)
# ---------------------------------------------------------------------------
def fma_float32(a: ArrayLike, b: ArrayLike, c: ArrayLike) -> npt.NDArray[np.float32]:
    """float32 ``fma(a, b, c)`` with a single rounding (rne), vectorised.

    ``a*b`` is exact in float64 (24+24 bits); ``s = a*b + c`` in float64 with TwoSum
    error ``e``.  ``f32(s)`` is the correctly rounded result unless ``s`` is exactly a
    float32 midpoint and ``e != 0``, in which case the sign of ``e`` picks the side.
    """
    a64 = np.asarray(a, _F32).astype(np.float64)
    b64 = np.asarray(b, _F32).astype(np.float64)
    c64 = np.asarray(c, _F32).astype(np.float64)
    p = a64 * b64
    s = p + c64
    bb = s - p
    e = (p - (s - bb)) + (c64 - bb)
    r = s.astype(_F32)
    r64 = r.astype(np.float64)
    toward = np.where(s > r64, np.inf, -np.inf).astype(_F32)
    nb = np.nextafter(r, toward)
    mid = (r64 + nb.astype(np.float64)) * 0.5
    is_mid = (s != r64) & (s == mid) & (e != 0)
    go_nb = is_mid & (np.sign(e) == np.sign(nb.astype(np.float64) - r64))
    go_r = is_mid & ~go_nb
    out = np.where(go_nb, nb, r)
    return np.where(go_r, r, out).astype(_F32)


def ort_float_add_reference(a: ArrayLike, a_scale: ArrayLike, a_zp: int, b: ArrayLike, b_scale: ArrayLike,
                            b_zp: int, y_scale: ArrayLike, y_zp: int, subtract: bool = False) -> np.ndarray:
    """onnxruntime's unfused ``DQ -> Add/Sub -> Q`` in float32: ``Q(f32(DQ(a) +/- DQ(b)))``."""
    da, db = ort_dequantize_linear(a, a_scale, a_zp), ort_dequantize_linear(b, b_scale, b_zp)
    return ort_quantize_linear((da - db if subtract else da + db).astype(_F32), y_scale, y_zp)


def ort_qlinear_add_reference(a: ArrayLike, a_scale: ArrayLike, a_zp: int, b: ArrayLike, b_scale: ArrayLike,
                              b_zp: int, y_scale: ArrayLike, y_zp: int,
                              domain_offset: int = ORT_X86_DOMAIN_OFFSET) -> np.ndarray:
    """Bit-exact float32 model of ``MlasQLinearAddKernelAvx2Helper`` (same-shape inputs).

    ``rA = f32(sA/sY)``, ``rB = f32(sB/sY)``,
    ``F = f32(zY' - fma(rA, zA', f32(rB*zB')))`` (GCC contracts ``rA*zA + rB*zB``),
    ``y' = sat(rne(fma(a', rA, fma(b', rB, F))))`` with ``v' = v + domain_offset``.
    ``domain_offset=128``: default x86 session (inputs rewritten to uint8 by
    ``QDQS8ToU8Transformer``); ``0``: ``session.qdqisint8allowed=1`` (int8 kernel).
    Verified ``==`` on 39M elements for each domain.  (A scalar-broadcast operand takes a
    mul+add instead of fma path in MLAS and is not modelled here.)
    """
    off = int(domain_offset)
    sy = _f32_scalar(y_scale)
    ra = _F32(_f32_scalar(a_scale) / sy)
    rb = _F32(_f32_scalar(b_scale) / sy)
    zc = _F32(int(y_zp) + off)
    fixed = _F32(zc - fma_float32(ra, _F32(int(a_zp) + off), _F32(rb * _F32(int(b_zp) + off))))
    af = (_i64(a) + off).astype(_F32)
    bf = (_i64(b) + off).astype(_F32)
    t = fma_float32(af, ra, fma_float32(bf, rb, fixed))
    y = np.clip(np.rint(t.astype(np.float64)), -32768, 32767).astype(np.int64)  # cvtps2dq, packs
    y = np.clip(y, INT8_MIN + off, INT8_MAX + off) - off
    return saturate(y)


def ort_qlinear_mul_reference(a: ArrayLike, a_scale: ArrayLike, a_zp: int, b: ArrayLike, b_scale: ArrayLike,
                              b_zp: int, y_scale: ArrayLike, y_zp: int,
                              domain_offset: int = ORT_X86_DOMAIN_OFFSET) -> np.ndarray:
    """Float32 model of ``MlasQLinearMulKernel`` (qlmul.cpp, SSE2 path): int16 differences, their int32
    product, ``cvtepi32_ps``, ``mul_ps`` by ``R``, ``add_ps`` of the zero point (no fma), ``cvtps2dq``,
    saturating packs.  Verified ``==`` on every int8 pair (tests/test_eltwise.py)."""
    off = int(domain_offset)
    ratio = mul_multiplier(a_scale, b_scale, y_scale)
    product = ((_i64(a) - int(a_zp)) * (_i64(b) - int(b_zp))).astype(_F32)
    t = ((product * ratio).astype(_F32) + _F32(int(y_zp) + off)).astype(_F32)
    y = np.clip(np.rint(t.astype(np.float64)), INT8_MIN + off, INT8_MAX + off).astype(np.int64)
    return saturate(y - off)


def ort_qlinear_avgpool_reference(x: ArrayLike, x_scale: ArrayLike, x_zp: int, y_scale: ArrayLike, y_zp: int,
                                  kernel_shape: Sequence[int], strides: Sequence[int] = (1, 1),
                                  pads: Sequence[int] = (0, 0, 0, 0), count_include_pad: int = 0,
                                  domain_offset: int = ORT_X86_DOMAIN_OFFSET) -> np.ndarray:
    """Bit-exact float32 model of ORT QLinearAveragePool, 2-D NCHW (``qlinear_pool.cc``).

    Per output: ``acc = 0.0f; acc = f32(acc + f32(sx * f32(x - zx)))`` over the valid
    window in row-major order; ``acc = f32(acc / f32(d))``;
    ``y' = sat(nearbyintf(f32(f32(acc / sy) + f32(zy'))))``, ``zy' = zy + domain_offset``.
    Kernel == image with zero pads is routed to the GAP rule, like ORT.
    """
    x = _i64(x)
    n, c, h, w = x.shape
    kh, kw = (int(k) for k in kernel_shape)
    sh, sw = (int(s) for s in strides)
    pt, pl, pb, pr = (int(p) for p in pads)
    if (kh, kw) == (h, w) and not any((pt, pl, pb, pr)):
        return gap_requant(x.sum(axis=(2, 3), keepdims=True), h * w, x_scale, x_zp, y_scale, y_zp)
    off = int(domain_offset)
    xd = ort_dequantize_linear(x, x_scale, x_zp)
    sy = _f32_scalar(y_scale)
    oh = (h + pt + pb - kh) // sh + 1
    ow = (w + pl + pr - kw) // sw + 1
    y = np.zeros((n, c, oh, ow), np.int64)
    for i in range(oh):
        hs = i * sh - pt
        he, hs = min(hs + kh, h), max(hs, 0)
        for j in range(ow):
            ws = j * sw - pl
            we, ws = min(ws + kw, w), max(ws, 0)
            acc = np.zeros((n, c), _F32)
            for hh in range(hs, he):
                for ww in range(ws, we):
                    acc = (acc + xd[:, :, hh, ww]).astype(_F32)
            d = kh * kw if count_include_pad else (he - hs) * (we - ws)
            acc = (acc / _F32(d)).astype(_F32)
            v = ((acc / sy).astype(_F32) + _F32(int(y_zp) + off)).astype(_F32)
            q = np.clip(np.rint(v.astype(np.float64)), INT8_MIN + off, INT8_MAX + off)
            y[:, :, i, j] = q.astype(np.int64) - off
    return saturate(y)
