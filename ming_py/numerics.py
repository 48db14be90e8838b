"""Integer numerics contract of ming: the ONE place where rounding and saturation live.

Every rule below was established empirically against onnxruntime 1.32 (CPU execution
provider, default ``SessionOptions``, x86-64 with AVX2/FMA/AVX512-VNNI) on QDQ models
produced by ``onnxruntime.quantization.quantize_static`` (int8 activations and weights)
and cross-checked with the ORT / MLAS source.  See ``docs/numerics.md`` for the
evidence and the measured residual table.

Conventions
-----------
* Tensors are numpy arrays of any shape; per-channel quantities (multipliers, zero
  points) must already be broadcast-shaped by the caller (e.g. ``m.reshape(1, C, 1, 1)``).
* "rne" = round half to even, "sat" = clamp to ``[qmin, qmax]``.
* Integer rules use int64 arithmetic only, so they translate 1:1 to C++ / HLS
  (``int64_t`` products, shifts, a count-leading-zeros, compares).
* Functions whose name starts with ``ort_`` and ends with ``_reference`` are float32
  emulations of ORT's *float* kernels.  They are bit-exact with ORT and serve as the
  golden model where the integer rule has a (measured, <= 1 LSB) residual.

Rule summary (details in each docstring)
----------------------------------------
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

import dataclasses
import functools
from typing import NamedTuple, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

# The host-side rules (also shipped to the board in a build's deploy package) live in ming_host.
from ming_py.contract.ming_host import ort_dequantize_linear, ort_quantize_linear, saturate

__all__ = [
    "INT8_MIN", "INT8_MAX",
    "bit_length", "round_shift_half_even", "round_shift_half_up", "saturate",
    "float32_parts", "ort_conv_multiplier", "ort_gemm_multiplier", "ort_gap_multiplier",
    "requantize", "requantize_float_reference",
    "FixedPoint", "to_fixed_point", "fixed_point_rescale",
    "add_requant", "AddConstants", "add_constants", "add_fused_requant",
    "FloatAddConstants", "float_add_constants", "add_float_requant", "ort_float_add_reference", "mul_multiplier", "mul_parts", "round_to_float32", "mul_requant",
    "gap_requant", "WindowAverageConstants", "window_average_constants",
    "window_average_terms", "window_average_sum", "window_average_level", "AVERAGE_BY_COLUMNS", "AVERAGE_BY_ROWS",
    "float_average_domain_offset",
    "rescale_fixed_point", "rescale", "rescale_table", "apply_table",
    "fma_float32", "ort_dequantize_linear", "ort_quantize_linear",
    "ort_qlinear_add_reference", "ort_qlinear_avgpool_reference", "ort_qlinear_mul_reference",
    "ORT_X86_DOMAIN_OFFSET", "LeanRequant", "lean_requant", "lean_channels", "lean_magnitude", "requantize_lean",
    "NarrowRequant", "requantize_narrow", "narrow_fixed_point", "narrow_float32", "requant_thresholds",
    "narrow_constants", "narrow_sum_residue", "least_reaching",
]

INT8_MIN = -128
INT8_MAX = 127
I32_MIN = -(1 << 31)
I32_MAX = (1 << 31) - 1

#: On x86-64 with default SessionOptions ORT's ``QDQS8ToU8Transformer`` rewrites every
#: int8 Q->DQ pair whose Q has a single consumer to uint8 (value + 128, zero point + 128)
#: before fusing, so QLinearAdd / QLinearAveragePool run in the uint8 domain.  This
#: matters for the float kernels, which add the (shifted) zero point in float.
ORT_X86_DOMAIN_OFFSET = 128

ArrayLike = npt.ArrayLike
IntArray = npt.NDArray[np.int64]

_F32 = np.float32


# ---------------------------------------------------------------------------
# Integer primitives
# ---------------------------------------------------------------------------
def _i64(x: ArrayLike) -> IntArray:
    return np.asarray(x, dtype=np.int64)


def _f32_scalar(v: ArrayLike) -> np.float32:
    """A per-tensor scale as a float32 scalar (accepts shape () or (1,) arrays)."""
    return _F32(np.asarray(v, dtype=_F32).reshape(()))


def bit_length(a: ArrayLike) -> IntArray:
    """Number of significant bits of non-negative int64 values (0 -> 0).

    Integer-only (binary search with shifts) = ``64 - clz64(a)`` in C++.
    """
    x = _i64(a).copy()
    if np.any(x < 0):
        raise ValueError("bit_length expects non-negative values")
    n = np.zeros(x.shape, np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        m = (x >> s) != 0
        n += np.where(m, s, 0)
        x = np.where(m, x >> s, x)
    return n + (x != 0)


def round_shift_half_even(v: ArrayLike, shift: ArrayLike) -> IntArray:
    """``rne(v / 2**shift)`` for int64 ``v`` (any sign) and ``shift >= 0``.

    Exact for ``|v| <= 2**62``; shifts >= 63 give 0 (|v|/2**63 <= 0.5 rounds to 0).
    C++: ``q = v >> s; r = v - (q << s); q += (r > h) || (r == h && (q & 1))`` with
    ``h = 1 << (s-1)`` (arithmetic shift = floor).
    """
    v = _i64(v)
    s = _i64(shift)
    if np.any(s < 0):
        raise ValueError("shift must be >= 0")
    s_ok = np.clip(s, 1, 62)
    q = v >> s_ok
    r = v - (q << s_ok)
    half = np.left_shift(np.int64(1), s_ok - 1)
    up = (r > half) | ((r == half) & ((q & 1) == 1))
    res = q + up.astype(np.int64)
    res = np.where(s == 0, v, res)
    return np.where(s >= 63, np.int64(0), res)


def round_shift_half_up(v: ArrayLike, shift: ArrayLike) -> IntArray:
    """``floor(v / 2**shift + 1/2)`` (round half towards +inf), ``1 <= shift <= 62``."""
    v = _i64(v)
    s = _i64(shift)
    return (v + np.left_shift(np.int64(1), s - 1)) >> s


# ---------------------------------------------------------------------------
# float32 multipliers (ORT's exact op order)
# ---------------------------------------------------------------------------
def float32_parts(m: ArrayLike) -> Tuple[IntArray, IntArray]:
    """Split float32 values ``m >= 0`` into ``(mant, exp)`` with ``m == mant * 2**exp``.

    Normal numbers: ``mant`` in ``[2**23, 2**24)``; subnormals: ``mant < 2**23``,
    ``exp = -149``; zero: ``mant = 0``.  Integer-only (bit fields of the IEEE word).
    """
    f = np.asarray(m, dtype=_F32)
    if np.any(~np.isfinite(f)) or np.any(f < 0) or np.any(np.signbit(f) & (f == 0)):
        raise ValueError("multiplier must be finite and >= +0")
    bits = f.view(np.uint32).astype(np.int64)
    e_field = (bits >> 23) & 0xFF
    frac = bits & 0x7FFFFF
    mant = np.where(e_field == 0, frac, frac | 0x800000)
    exp = np.where(e_field == 0, -149, e_field - 150)
    return mant.astype(np.int64), exp.astype(np.int64)


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


# ---------------------------------------------------------------------------
# The lean requantization datapath (what the emitted C++ runs)
# ---------------------------------------------------------------------------
# From this magnitude of rne(acc * M) on, every int8 or uint8 output saturates whatever its zero point.
LEAN_SATURATING = 512
LEAN_LIMIT_BITS = 24  # |acc| up to the limit converts to float32 exactly
LEAN_MANTISSA_BITS = 27  # a mantissa scaled to a common shift still fits a DSP48E2's 27-bit port


@dataclasses.dataclass(frozen=True)
class LeanRequant:
    """Constants of :func:`requantize_lean` for one float32 multiplier ``M = mantissa * 2**-shift``:
    ``limit`` is the least ``|acc|`` whose output saturates (``|rne(f32(acc * M))| >= 512``)."""

    mantissa: int
    shift: int
    limit: int


def lean_requant(multiplier: ArrayLike) -> LeanRequant | None:
    """The lean datapath's constants for `multiplier`, or None where its argument does not hold
    (``limit >= 2**24``, so float32(acc) may round, or ``M >= 2**23``)."""
    return _lean_requant(np.asarray(multiplier, _F32).reshape(1).tobytes())[0]


def lean_channels(multipliers: ArrayLike) -> tuple[LeanRequant, ...] | None:
    """The lean constants of every channel, or None if one channel has none. Where the mantissas,
    scaled to the largest shift, fit 27 bits, every channel gets that shift: the datapath's shift
    is then wiring, not a barrel shifter (scaling P, the half and the band by the same power of two
    changes no comparison)."""
    return _lean_channels(np.asarray(multipliers, _F32).reshape(-1).tobytes())


@functools.lru_cache(maxsize=None)
def _lean_channels(multipliers: bytes) -> tuple[LeanRequant, ...] | None:
    constants = _lean_requant(multipliers)
    if any(c is None for c in constants):
        return None
    common = max(c.shift for c in constants)
    if all(c.mantissa << (common - c.shift) < 1 << LEAN_MANTISSA_BITS for c in constants):
        constants = [LeanRequant(c.mantissa << (common - c.shift), common, c.limit) for c in constants]
    return tuple(constants)


@functools.lru_cache(maxsize=None)
def _lean_requant(multipliers: bytes) -> tuple[LeanRequant | None, ...]:
    """Per float32 multiplier, its lean constants or None: the magnitude is monotonic in |acc|, so every
    channel's least saturating |acc| is bisected at once."""
    m = np.frombuffer(multipliers, _F32)
    mant, exp = float32_parts(m)
    top = (1 << LEAN_LIMIT_BITS) - 1
    valid = (mant != 0) & (exp < 0)
    valid &= _saturates(np.full(m.shape, top), m, valid)
    low, high = np.zeros(m.shape, np.int64), np.full(m.shape, top, np.int64)
    while np.any(low < high):
        mid = (low + high) // 2
        saturated = _saturates(mid, m, valid)
        high, low = np.where(saturated, mid, high), np.where(saturated | (low >= high), low, mid + 1)
    return tuple(LeanRequant(int(a), int(-e), int(limit)) if ok else None
                 for a, e, limit, ok in zip(mant, exp, low, valid))


def _saturates(a: IntArray, m: npt.NDArray[np.float32], valid: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Whether ``|rne(f32(a * m))|`` reaches LEAN_SATURATING (False where not `valid`)."""
    safe = np.where(valid, m, _F32(0))
    return valid & (requantize(a, safe, 0, I32_MIN, I32_MAX) >= LEAN_SATURATING)


def lean_magnitude(a: ArrayLike, mantissa: ArrayLike, shift: ArrayLike) -> IntArray:
    """``rne(f32(a * M))`` for ``0 <= a <= limit`` without normalizing: with ``P = a * mantissa``
    (exact), ``y0 = P >> shift`` and ``d`` the distance of the fraction from one half, float32 rounds
    ``P`` at bit ``t = shift + bitlen(y0) - 24`` first, which moves the fraction to exactly one half
    when ``|d| <= 2**(t-1)`` (ties of that rounding go to the even neighbour, away from the half), and
    the final rne then rounds that half to even. So the result is ``y0 + 1`` when ``d`` exceeds the
    band, ``y0 + (y0 odd)`` inside it, else ``y0``: a multiply, a compare and a 10-bit priority encoder
    instead of two normalizations."""
    a, mantissa, shift = _i64(a), _i64(mantissa), _i64(shift)
    p = a * mantissa
    y0 = p >> shift
    d = (p & ((np.int64(1) << shift) - 1)) - (np.int64(1) << (shift - 1))
    t = shift + bit_length(y0) - 24
    band = np.where(t >= 1, np.int64(1) << np.maximum(t - 1, 0), 0)
    up = (d > band) | ((np.abs(d) <= band) & ((y0 & 1) == 1))
    return y0 + up.astype(np.int64)


def requantize_lean(acc: ArrayLike, mantissa: ArrayLike, shift: ArrayLike, limit: ArrayLike,
                    zero_point: ArrayLike, qmin: int = INT8_MIN, qmax: int = INT8_MAX) -> np.ndarray:
    """:func:`requantize` as the emitted datapath computes it (`ming::requantize_lean`), equal to it
    wherever :func:`lean_requant` gave the constants (tests/test_lean_requant.py proves it over every
    accumulator value): ``|acc|`` is clamped to ``limit`` (beyond it the output saturates either way),
    then :func:`lean_magnitude`, the sign and the zero point."""
    acc = _i64(acc)
    mag = lean_magnitude(np.minimum(np.abs(acc), _i64(limit)), mantissa, shift)
    return saturate(np.where(acc < 0, -mag, mag) + _i64(zero_point), qmin, qmax)


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
# A power-of-two multiplier: a rounding shift, no product
# ---------------------------------------------------------------------------
SHIFT_MAX = 62  # round_shift_half_even's exact range


def requantize_shift(acc: ArrayLike, shift: ArrayLike, zero_point: ArrayLike, qmin: int = INT8_MIN,
                     qmax: int = INT8_MAX) -> IntArray:
    """Requantization by the multiplier ``2**-shift``: ``sat(rne(acc / 2**shift) + zp)``, a rounding shift by a
    constant (wiring, a compare and an increment) and no product."""
    return saturate(round_shift_half_even(_i64(acc), shift) + _i64(zero_point), qmin, qmax)


def power_of_two_shift(multipliers: ArrayLike) -> int | None:
    """The shift `k` where every channel's float32 multiplier is ``2**-k``, one `k` for all, and the lean
    datapath's argument holds (its limit below ``2**24``); else None. Then :func:`requantize` equals
    :func:`requantize_shift` by `k` for every int32 accumulator: below the limit ``float32(acc)`` is exact and
    so is its product by ``2**-k``, leaving one rne; from the limit on both saturate (both are monotonic in
    ``acc``, and they agree at the limit)."""
    shifts = set()
    for m in np.asarray(multipliers, _F32).reshape(-1):
        mantissa, exponent = (int(v) for v in float32_parts(m))
        if mantissa == 0 or mantissa & (mantissa - 1) or lean_requant(m) is None:
            return None
        shifts.add(-(exponent + mantissa.bit_length() - 1))
    if len(shifts) != 1:
        return None
    (shift,) = shifts
    return shift if 0 <= shift <= SHIFT_MAX else None


@dataclasses.dataclass(frozen=True)
class ShiftRequant:
    """An average's requantization as :func:`requantize_shift` of ``window_sum + offset``."""

    offset: int
    shift: int
    zero_point: int


def average_shift(x_scale: ArrayLike, x_zp: int, y_scale: ArrayLike, y_zp: int, count: int) -> ShiftRequant | None:
    """A global average's requantization (:func:`gap_requant`: the sum of ``count`` int8 values in, int8 out) as a
    shift where its multiplier is a power of two ``2**-s``, else None: ``requantize(acc, M)``,
    ``acc = sum - count * x_zp``, with the float32 ``M = 2**-s`` is ``rne(acc * 2**-s) + zp`` wherever
    ``float32(acc)`` is exact: ``|acc| <= 255 * count < 2**24``."""
    mantissa, exponent = (int(v) for v in float32_parts(ort_gap_multiplier(x_scale, y_scale, count)))
    shift = -(exponent + mantissa.bit_length() - 1)
    exact = 255 * count < 1 << 24 and mantissa != 0 and mantissa & (mantissa - 1) == 0
    if not (exact and 0 <= shift <= SHIFT_MAX):
        return None
    return ShiftRequant(-count * int(x_zp), shift, int(y_zp))


# ---------------------------------------------------------------------------
# Fixed point (int32 multiplier + right shift)
# ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class FixedPoint:
    """``real ~= multiplier * 2**-shift``; ``multiplier`` in ``[2**30, 2**31)`` (int32)."""

    multiplier: int
    shift: int

    @property
    def real(self) -> float:
        return float(self.multiplier) * 2.0 ** (-self.shift)


def to_fixed_point(real_multiplier: float, bits: int = 31) -> FixedPoint:
    """Nearest ``FixedPoint`` with a ``bits``-bit multiplier (default fits int32).

    ``real = f * 2**e`` (frexp, f in [0.5, 1)); ``multiplier = rne(f * 2**bits)``
    (renormalised if it rounds up to ``2**bits``); ``shift = bits - e``.  Relative error
    <= 2**-(bits+1).  Requires ``0 < real`` and a resulting shift in ``[1, 62]``.
    """
    r = float(real_multiplier)
    if not (r > 0.0) or not np.isfinite(r):
        raise ValueError("real multiplier must be positive and finite")
    f, e = np.frexp(r)
    m = int(round(float(f) * 2.0 ** bits))
    if m == 1 << bits:
        m >>= 1
        e += 1
    fp = FixedPoint(m, int(bits - e))
    if not (1 <= fp.shift <= 62):
        raise ValueError(f"multiplier {r} out of fixed-point range (shift {fp.shift})")
    return fp


def fixed_point_rescale(x: ArrayLike, fp: FixedPoint, rounding: str = "half_even",
                        pre_round_offset: ArrayLike = 0) -> IntArray:
    """``round(x * multiplier / 2**shift + pre_round_offset)`` in int64.

    ``rounding``: ``"half_even"`` (default, what ORT's float ``nearbyint``/``cvtps2dq``
    do at exact ties) or ``"half_up"``.  ``pre_round_offset`` is an integer added
    before rounding (as ``offset << shift``): ORT's float kernels for Add and
    AveragePool add the output zero point before rounding.  Needs ``|x| < 2**31``.
    """
    x = _i64(x)
    if np.any(np.abs(x) >= (1 << 31)):
        raise ValueError("|x| must be < 2**31")
    v = x * np.int64(fp.multiplier) + (_i64(pre_round_offset) << np.int64(fp.shift))
    if rounding == "half_even":
        return round_shift_half_even(v, fp.shift)
    if rounding == "half_up":
        return round_shift_half_up(v, fp.shift)
    raise ValueError(rounding)


# ---------------------------------------------------------------------------
# Add
# ---------------------------------------------------------------------------
#: Every intermediate of the Add rules stays below this (int64 with a sign and a spare bit).
ADD_BOUND = 1 << 61


@dataclasses.dataclass(frozen=True)
class AddConstants:
    """Constants of :func:`add_fused_requant` (QLinearAdd), in units of ``2**-shift``: ``a_multiplier`` and
    ``b_multiplier`` are the float32 ratios ``rA``, ``rB`` (24-bit mantissas at that binary point), ``fixed``
    ORT's float32 constant ``F`` (signed), ``offset`` the domain the kernel runs in (128: uint8)."""

    a_multiplier: int
    b_multiplier: int
    fixed: int
    shift: int
    offset: int


def _units(v: np.float32, shift: int) -> int:
    """The float32 ``v`` in units of ``2**-shift`` (exact integer; raises if it is not)."""
    mant, exp = (int(t) for t in float32_parts(abs(v)))
    if mant == 0:
        return 0
    if exp + shift < 0:
        raise ValueError("not an integer at this binary point")
    return (-1 if v < 0 else 1) * (mant << (exp + shift))


def _lsb_exponent(v: np.float32) -> int:
    mant, exp = (int(t) for t in float32_parts(abs(v)))
    return exp if mant else 0


def add_constants(a_scale: ArrayLike, a_zp: int, b_scale: ArrayLike, b_zp: int, y_scale: ArrayLike, y_zp: int,
                  domain_offset: int = ORT_X86_DOMAIN_OFFSET) -> AddConstants:
    """The float32 constants of ``MlasQLinearAddKernelAvx2Helper`` as integers: ``rA = f32(sA/sY)``,
    ``rB = f32(sB/sY)``, ``F = f32(zY' - fma(rA, zA', f32(rB*zB')))`` (``v' = v + domain_offset``), all at
    the binary point ``2**-shift`` of their least significant bits.  Raises ValueError where an intermediate
    of :func:`add_fused_requant` would reach 2**61 (ratios more than ~2^28 apart)."""
    off = int(domain_offset)
    sy = _f32_scalar(y_scale)
    ra = _F32(_f32_scalar(a_scale) / sy)
    rb = _F32(_f32_scalar(b_scale) / sy)
    fixed = _F32(_F32(int(y_zp) + off) - fma_float32(ra, _F32(int(a_zp) + off), _F32(rb * _F32(int(b_zp) + off))))
    if not (np.isfinite(ra) and np.isfinite(rb) and np.isfinite(fixed)) or ra <= 0 or rb <= 0:
        raise ValueError("Add scale ratios must be positive and finite")
    shift = max(0, -_lsb_exponent(ra), -_lsb_exponent(rb), -_lsb_exponent(fixed))
    c = AddConstants(_units(ra, shift), _units(rb, shift), _units(fixed, shift), shift, off)
    if shift > 62 or max(256 * c.a_multiplier, 256 * c.b_multiplier, abs(c.fixed)) >= ADD_BOUND // 4:
        raise ValueError(f"Add scale ratios {float(ra):.6g}, {float(rb):.6g} too far apart for the integer rule")
    return c


def add_fused_requant(a: ArrayLike, b: ArrayLike, constants: AddConstants, qmin: int = INT8_MIN,
                      qmax: int = INT8_MAX) -> np.ndarray:
    """QLinearAdd (``MlasQLinearAddKernelAvx2Helper``), bit-exact, in integers: with the constants of
    :func:`add_constants` (units of ``2**-shift``), ``a' = a + offset``, ``b' = b + offset``:

    ``inner = rn24(b' * MB + F)`` (the inner fma), ``outer = rn24(a' * MA + inner)`` (the outer fma),
    ``y' = sat(rne(outer / 2**shift))`` to ``[qmin + offset, qmax + offset]`` (cvtps2dq, saturating packs),
    ``y = y' - offset``.  ``rn24`` = :func:`round_to_float32` (24 significant bits, half to even, at a fixed
    binary point): every fma is one exact integer sum and one rounding.  Hardware (``ming::add_requant``):
    two 9 x 24-bit products (the multipliers' trailing zeros are wiring), two mask-and-add roundings, a
    rounding at the constant ``shift``."""
    c = constants
    inner = round_to_float32((_i64(b) + c.offset) * np.int64(c.b_multiplier) + np.int64(c.fixed))
    outer = round_to_float32((_i64(a) + c.offset) * np.int64(c.a_multiplier) + inner)
    y = np.clip(round_shift_half_even(outer, c.shift), qmin + c.offset, qmax + c.offset)
    return saturate(y - c.offset, qmin, qmax)


@dataclasses.dataclass(frozen=True)
class FloatAddConstants:
    """Constants of :func:`add_float_requant` (unfused ``Q(f32(DQ(a) +/- DQ(b)))``): ``DQ(a) = f32(sA * (a -
    zA))`` is ``rn24((a - zA) * a_mantissa)`` in units of ``2**eA``; both are aligned to the smaller unit by
    ``a_align``/``b_align`` (``b_mantissa`` negative for Sub); the float32 sum ``X`` (in that unit) is divided
    by ``sY``: ``q = (|X| << x_shift) / (divisor * 2**25)``, with ``|X|`` first clamped to ``x_limit`` (from
    there on the output saturates)."""

    a_mantissa: int
    a_align: int
    b_mantissa: int
    b_align: int
    x_shift: int
    x_limit: int
    divisor: int


#: |rne(f32(x / sY))| of the float Add rule is computed up to this (from it on every int8 output saturates)
FLOAT_ADD_QUOTIENT_BITS = 10


def float_add_constants(a_scale: ArrayLike, b_scale: ArrayLike, y_scale: ArrayLike,
                        subtract: bool = False) -> FloatAddConstants:
    """The integers of :func:`add_float_requant`; raises ValueError where its intermediates would reach
    2**61 (input scales more than 2^28 apart, or an output scale 2^29 above them)."""
    (ma, ea), (mb, eb), (my, ey) = (tuple(int(t) for t in float32_parts(_f32_scalar(s)))
                                    for s in (a_scale, b_scale, y_scale))
    if not (ma and mb and my):
        raise ValueError("Add/Sub scales must be positive")
    unit = min(ea, eb)
    g = unit - ey
    x_shift, divisor = max(g + 25, 0), my << max(-g - 25, 0)
    top = divisor << (25 + FLOAT_ADD_QUOTIENT_BITS)  # q >= 2**10
    x_limit = (top >> x_shift) + 1
    c = FloatAddConstants(ma, ea - unit, -mb if subtract else mb, eb - unit, x_shift, x_limit, divisor)
    if (max(ea, eb) - unit > 28 or top >= ADD_BOUND or x_shift > 58
            or (x_limit << x_shift) >= ADD_BOUND):
        raise ValueError("Add/Sub scales too far apart for the integer rule")
    return c


def add_float_requant(a: ArrayLike, a_zp: int, b: ArrayLike, b_zp: int, constants: FloatAddConstants,
                      y_zp: int, qmin: int = INT8_MIN, qmax: int = INT8_MAX) -> np.ndarray:
    """Unfused Add and Sub, bit-exact with onnxruntime's float ``DQ -> Add/Sub -> Q``
    ``y = sat(rne(f32(f32(DQ(a) +/- DQ(b)) / sY)) + zY)`` (``MlasQuantizeLinear``: zero point after rounding),
    in integers (constants :func:`float_add_constants`):

    1. ``DA = rn24((a - zA) * mA) << a_align``, ``DB = +/-rn24((b - zB) * mB) << b_align`` (the two
       DequantizeLinear products), ``X = rn24(DA + DB)`` (the float32 sum; exact integer sum first);
    2. ``N = min(|X|, x_limit) << x_shift`` and ``D = divisor``: ``q = |x / sY| = N / (D * 2**25)``;
       ``y0 = floor(q)`` (a 10-bit quotient: restoring division, 10 compare-subtracts), remainder
       ``r = N - y0 * D * 2**25``;
    3. ``f32(q)`` rounds to 24 significant bits: ``u/2 = 2**(bitlen(y0) - 25)``; it equals ``y0 + 1/2`` exactly
       when ``|frac - 1/2| <= u/2`` (both ties go to ``y0 + 1/2``, whose mantissa is even), so
       ``rne(f32(q)) = y0 + (r > D * (2**24 + 2**bl))`` for even ``y0`` and
       ``y0 + (r >= D * (2**24 - 2**bl))`` for odd ``y0`` (``bl = bitlen(y0)``);
    4. the sign of ``X`` back (rne and float32 rounding are odd-symmetric), ``+ zY``, saturation.
    """
    c = constants
    da = round_to_float32((_i64(a) - int(a_zp)) * np.int64(c.a_mantissa)) << np.int64(c.a_align)
    db = round_to_float32((_i64(b) - int(b_zp)) * np.int64(c.b_mantissa)) << np.int64(c.b_align)
    x = round_to_float32(da + db)
    n = np.minimum(np.abs(x), np.int64(c.x_limit)) << np.int64(c.x_shift)
    unit = np.int64(c.divisor) << np.int64(25)
    y0 = np.minimum(n // unit, np.int64(1 << FLOAT_ADD_QUOTIENT_BITS))
    r = n - y0 * unit
    band = np.int64(c.divisor) << bit_length(y0)
    half = np.int64(c.divisor) << np.int64(24)
    odd = (y0 & 1) == 1
    up = np.where(odd, r >= half - band, r > half + band) & (y0 < (1 << FLOAT_ADD_QUOTIENT_BITS))
    k = y0 + up.astype(np.int64)
    return saturate(np.where(x < 0, -k, k) + int(y_zp), qmin, qmax)


def add_requant(a: ArrayLike, a_scale: ArrayLike, a_zp: int, b: ArrayLike, b_scale: ArrayLike, b_zp: int,
                y_scale: ArrayLike, y_zp: int, qmin: int = INT8_MIN, qmax: int = INT8_MAX,
                subtract: bool = False, fused: Optional[bool] = None, swap: bool = False,
                domain_offset: int = ORT_X86_DOMAIN_OFFSET) -> np.ndarray:
    """Add and Sub of two int8 tensors, bit-exact with onnxruntime:

    * ``fused`` (default for Add): QLinearAdd, :func:`add_fused_requant` (zero point in float before
      rounding, uint8 domain with ``domain_offset=128``).  ``swap``: the kernel's first operand is ``b``
      (ORT swaps the operands when ``a`` is the broadcast one: per-channel vector or scalar first), which
      changes the order of its two fmas.  Same shape and broadcast run the same arithmetic (the broadcast
      span's ``F + b'*rB`` is contracted to an fma, measured).
    * not fused (always for Sub: ORT has no QLinearSub; Adds whose QDQ ORT leaves unfused, e.g. residual
      Adds with fan-out): :func:`add_float_requant`, ``Q(f32(DQ(a) +/- DQ(b)))``.
    """
    if fused is None:
        fused = not subtract
    if subtract or not fused:
        constants = float_add_constants(a_scale, b_scale, y_scale, subtract)
        return add_float_requant(a, a_zp, b, b_zp, constants, y_zp, qmin, qmax)
    if swap:
        a, a_scale, a_zp, b, b_scale, b_zp = b, b_scale, b_zp, a, a_scale, a_zp
    constants = add_constants(a_scale, a_zp, b_scale, b_zp, y_scale, y_zp, domain_offset)
    return add_fused_requant(a, b, constants, qmin, qmax)


def ort_float_add_reference(a: ArrayLike, a_scale: ArrayLike, a_zp: int, b: ArrayLike, b_scale: ArrayLike,
                            b_zp: int, y_scale: ArrayLike, y_zp: int, subtract: bool = False) -> np.ndarray:
    """onnxruntime's unfused ``DQ -> Add/Sub -> Q`` in float32: ``Q(f32(DQ(a) +/- DQ(b)))``."""
    da, db = ort_dequantize_linear(a, a_scale, a_zp), ort_dequantize_linear(b, b_scale, b_zp)
    return ort_quantize_linear((da - db if subtract else da + db).astype(_F32), y_scale, y_zp)


# ---------------------------------------------------------------------------
# Mul (QLinearMul), bit-exact
# ---------------------------------------------------------------------------
#: The multipliers `mul_requant` takes (``2**-24 <= R < 2**15``): the product stays below 2**31 (ORT's
#: cvtps2dq would wrap above it) and every intermediate fits int64.
MUL_MULTIPLIER_RANGE = (2.0 ** -24, 2.0 ** 15)


def mul_multiplier(a_scale: ArrayLike, b_scale: ArrayLike, y_scale: ArrayLike) -> np.float32:
    """MLAS ``MlasQLinearMul``: ``R = f32(f32(ScaleA * ScaleB) / ScaleC)`` (C++, left to right)."""
    return _F32(ort_conv_multiplier(a_scale, b_scale, y_scale))


def mul_parts(multiplier: ArrayLike) -> Tuple[int, int]:
    """``(mantissa, shift)`` with ``R = mantissa * 2**-shift`` (24-bit mantissa); raises ValueError outside
    ``MUL_MULTIPLIER_RANGE``."""
    r = _f32_scalar(multiplier)
    if not (MUL_MULTIPLIER_RANGE[0] <= float(r) < MUL_MULTIPLIER_RANGE[1]):
        raise ValueError(f"Mul multiplier {float(r):.6g} outside [2^-24, 2^15)")
    mant, exp = float32_parts(r)
    return int(mant), int(-exp)


def round_to_float32(v: ArrayLike) -> IntArray:
    """``v`` rounded to 24 significant bits, half to even (sign-symmetric): the float32 of ``v * 2**k`` in
    units of ``2**k``, for any fixed ``k``."""
    v = _i64(v)
    mag = np.abs(v)
    d = np.maximum(bit_length(mag) - 24, 0)
    rounded = round_shift_half_even(mag, d) << d
    return np.where(v < 0, -rounded, rounded)


def mul_requant(a: ArrayLike, a_zp: int, b: ArrayLike, b_zp: int, multiplier: ArrayLike, y_zp: int,
                qmin: int = INT8_MIN, qmax: int = INT8_MAX,
                domain_offset: int = ORT_X86_DOMAIN_OFFSET) -> np.ndarray:
    """Integer rule for QLinearMul, bit-exact (``MlasQLinearMulKernel``, SSE2 and NEON alike):

    ``P = (a - zA) * (b - zB)`` (int32, exact in float32), ``y' = sat(rne(f32(f32(f32(P) * R) + f32(zY'))))``,
    ``y = y' - off``, with ``R = mul_multiplier(sA, sB, sY)`` and ``zY' = zY + off``.  ``off`` is the domain
    the kernel runs in: 128 in a default x86 session (``QDQS8ToU8Transformer`` turns the int8 tensors into
    uint8), 0 with ``session.qdqisint8allowed=1`` or on ARM; ``P`` does not depend on it, the float add of
    the zero point does.  The output zero point is added *before* rounding, in float.

    Integer form, in units of ``2**-shift`` (``R = mantissa * 2**-shift``): ``V = rn24(P * mantissa)`` is the
    float32 product, ``W = rn24(V + (zY' << shift))`` the float32 sum (both sums exact in int64),
    ``y' = rne(W / 2**shift)``; ``rn24`` rounds to 24 significant bits, half to even
    (:func:`round_to_float32`). In hardware a float32 rounding at a fixed binary point is a mask and an
    add: the mask is the leading-one smear of the bits above the 24th, no barrel shifter and no
    normalization (``ming::mul_requant``).
    """
    mantissa, shift = mul_parts(multiplier)
    off = int(domain_offset)
    product = (_i64(a) - int(a_zp)) * (_i64(b) - int(b_zp))
    v = round_to_float32(product * np.int64(mantissa))
    w = round_to_float32(v + (np.int64(int(y_zp) + off) << np.int64(shift)))
    return saturate(round_shift_half_even(w, shift) - off, qmin, qmax)


# ---------------------------------------------------------------------------
# AveragePool over windows: onnxruntime's float32 chain, emulated in integers
# ---------------------------------------------------------------------------
AVERAGE_ESTIMATE_SHIFT = 24  # the binary point of the level estimate's product
AVERAGE_ESTIMATE_BITS = 16  # the clamped sum's bits that product takes
AVERAGE_RATIO_LIMIT = 1 << 26  # the estimate's multiplier fits one DSP48E2 port with those 16 bits
AVERAGE_OFFSET_LIMIT = 1 << 40  # and its sum 42 bits


@dataclasses.dataclass(frozen=True)
class WindowAverageConstants:
    """The integer form of onnxruntime's QLinearAveragePool (``qlinear_pool.cc``) over windows.

    In units of ``2**exponent`` (``x_scale = mantissa * 2**exponent``) every float32 value of the kernel's sum
    is an integer: a window element is ``term(x) = rn24((x - zx) * mantissa)`` (the float32 product
    ``sx * (x - zx)``), and each partial sum ``s = rn24(s + term)`` (:func:`round_to_float32`), in the
    window's row-major order. The rest (``/ d``, ``/ sy``, ``+ zy'``, ``nearbyintf``, clamp) is a
    monotonic function of the final sum, so per divisor ``d`` (a row) it is given by its thresholds: ``T[k]``
    is the least sum whose output level (from ``qmin``) is at least ``k``. The datapath finds the level as
    ``k = clamp(((U >> drop) * ratio + offset) >> AVERAGE_ESTIMATE_SHIFT, 0, last) - (U < T'[k])`` on
    ``U = clamp(s, low, high) - low`` (``T' = T - low``): the estimate ``k`` is the level or one above
    it, which :func:`window_average_constants` proves at every breakpoint of both step functions.
    """

    mantissa: int
    exponent: int
    x_zero_point: int
    bound: int  # every partial sum's magnitude is below it
    divisors: tuple[int, ...]  # per row
    low: np.ndarray  # [rows] int64
    high: np.ndarray
    drop: np.ndarray
    ratio: np.ndarray
    offset: np.ndarray
    thresholds: np.ndarray  # [rows][256] int64: T' by level, 0 at level 0, unused levels past the last
    qmin: int
    last: int  # the highest level: qmax - qmin


def window_average_terms(x: ArrayLike, mantissa: int, x_zp: int) -> IntArray:
    """The float32 ``sx * (x - zx)`` of each window element in units of ``2**exponent``."""
    return round_to_float32((_i64(x) - int(x_zp)) * np.int64(mantissa))


def window_average_sum(elements: Sequence[ArrayLike], mantissa: int, x_zp: int, columns: int = 0) -> IntArray:
    """onnxruntime's float32 sum of the dequantized window elements, in units of ``2**exponent``, each addition
    ``s = rn24(s + term)``. `elements` are the window's in row-major order; `columns` 0 sums them in that order
    (``qlinear_pool.cc``, and the float kernels of `AVERAGE_BY_ROWS`); `columns` W > 0 sums each of the
    window's W columns down its rows, then those column sums left to right (`AVERAGE_BY_COLUMNS`). Padded
    elements hold ``zx`` (a term of 0, which leaves a sum as it is, as onnxruntime skips them)."""
    terms = [window_average_terms(element, mantissa, x_zp) for element in elements]
    if not columns:
        return _float32_chain(terms)
    return _float32_chain([_float32_chain(terms[column::columns]) for column in range(columns)])


def _float32_chain(terms: Sequence[IntArray]) -> IntArray:
    """The float32 sum of `terms` in their order, each addition rounded: ``s = rn24(s + term)``."""
    total = terms[0]
    for term in terms[1:]:
        total = round_to_float32(total + term)
    return total


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


def _ort_average_level(total: ArrayLike, exponent: int, divisor: int, y_scale: np.float32, y_zp: int,
                       qmin: int, qmax: int, domain_offset: int) -> IntArray:
    """onnxruntime's output level (``y - qmin``) for float32 sums ``total * 2**exponent``: ``f32(s / d)``,
    ``f32(. / sy)``, ``f32(. + zy')``, ``nearbyintf``, clamp."""
    s = np.ldexp(np.asarray(total, np.float64), int(exponent)).astype(_F32)
    a = (s / _F32(divisor)).astype(_F32)
    v = ((a / y_scale).astype(_F32) + _F32(int(y_zp) + domain_offset)).astype(_F32)
    y = np.clip(np.rint(v.astype(np.float64)), qmin + domain_offset, qmax + domain_offset)
    return y.astype(np.int64) - domain_offset - qmin


def _thresholds(bound: int, exponent: int, divisor: int, y_scale, y_zp, qmin, qmax, domain_offset) -> IntArray:
    """``T[k]`` for levels 1 .. qmax - qmin: the least sum in ``[-bound, bound + 1]`` with a level >= k
    (``bound + 1``: none below the bound reaches it), by bisection over the monotonic level."""
    wanted = np.arange(1, qmax - qmin + 1, dtype=np.int64)
    return least_reaching(lambda total: _ort_average_level(total, exponent, divisor, y_scale, y_zp, qmin, qmax,
                                                           domain_offset), wanted, -bound, bound + 1)


def window_average_constants(x_scale: ArrayLike, x_zp: int, y_scale: ArrayLike, y_zp: int, window: int,
                             divisors: Sequence[int], qmin: int = INT8_MIN, qmax: int = INT8_MAX,
                             domain_offset: int = ORT_X86_DOMAIN_OFFSET) -> WindowAverageConstants | None:
    """The constants of :class:`WindowAverageConstants` for windows of `window` elements and each divisor
    (a window's count of unpadded elements, or the kernel size), or None where no estimate of the
    datapath's widths is proved (an output scale finer than a quarter of the input's over the divisor, or
    scales far outside float32's normal range)."""
    sx, sy = _f32_scalar(x_scale), _f32_scalar(y_scale)
    mantissa, exponent = (int(v) for v in float32_parts(sx))
    if mantissa < (1 << 23) or not np.isfinite(sy) or sy <= 0 or exponent < -120 or exponent > 100:
        return None
    largest = int(np.abs(window_average_terms(np.arange(-128, 128), mantissa, x_zp)).max())
    bound = 2 * window * largest + 1
    rows = []
    for d in divisors:
        thresholds = _thresholds(bound, exponent, d, sy, y_zp, qmin, qmax, domain_offset)
        row = _estimate(thresholds, bound, float(d) * float(sy) / 2.0 ** exponent)
        if row is None:
            return None
        rows.append(row)
    low, high, drop, ratio, offset, table = (np.array([r[i] for r in rows], np.int64) for i in range(6))
    return WindowAverageConstants(mantissa, exponent, int(x_zp), bound, tuple(int(d) for d in divisors), low,
                                  high, drop, ratio, offset, table, int(qmin), int(qmax - qmin))


def window_average_level(total: ArrayLike, row: ArrayLike, c: WindowAverageConstants) -> IntArray:
    """The datapath's output (``qmin`` + level) for chain sums `total` of windows of divisor row `row`."""
    row = _i64(row)
    low, high = c.low[row], c.high[row]
    u = np.clip(_i64(total), low, high) - low
    k = _level_estimate(u, c.drop[row], c.ratio[row], c.offset[row], c.last)
    return k - (u < c.thresholds[row, k]) + c.qmin


def _level_estimate(u, drop, ratio, offset, last) -> IntArray:
    """The level, or the one above it, of clamped sums `u` (less their row's low): a 16 x 26-bit product."""
    return np.clip(((u >> drop) * ratio + offset) >> AVERAGE_ESTIMATE_SHIFT, 0, last)


def _estimate(thresholds: IntArray, bound: int, step: float):
    """(low, high, drop, ratio, offset, T'[256]) of one divisor whose output levels are `step` units of the
    sum apart, proved: the datapath's level equals the thresholds' at every breakpoint of both its estimate
    and the thresholds (both step functions of U, so equal everywhere), or None."""
    # a sum is within (-bound, bound): the levels one reaches have thresholds in (-bound + 1, bound - 1]
    inside = (thresholds > 1 - bound) & (thresholds < bound)
    thresholds = np.clip(thresholds, 1 - bound, bound)
    last = len(thresholds)
    low = int(thresholds[0]) - 1
    width = min(int(thresholds[-1]), bound - 1) - low
    table = np.concatenate(([0], thresholds - low, np.full(255 - last, width + 1))).astype(np.int64)
    drop = max(0, width.bit_length() - AVERAGE_ESTIMATE_BITS)
    ratio = round((1 << AVERAGE_ESTIMATE_SHIFT) * (1 << drop) / step)
    # the estimate reaches level k half a step before k's threshold, anchored at a level the sums reach
    anchor = int(np.flatnonzero(inside)[np.count_nonzero(inside) // 2]) + 1 if inside.any() else 1
    offset = round((1 << AVERAGE_ESTIMATE_SHIFT) * (anchor + 0.5 - table[anchor] / step))
    if not 0 < ratio < AVERAGE_RATIO_LIMIT or abs(offset) >= AVERAGE_OFFSET_LIMIT:
        return None

    def level(u):
        k = _level_estimate(u, drop, ratio, offset, last)
        return k - (u < table[k])

    # the least U reaching each estimate k = 1 .. last, and the thresholds: where either step function steps
    reach = (-((-(np.arange(1, last + 1, dtype=np.int64) << AVERAGE_ESTIMATE_SHIFT) + offset) // ratio)) << drop
    least = max(1 - bound - low, 0)  # the least U of a sum
    points = np.concatenate(([least, width], table[1:last + 1], table[1:last + 1] - 1, reach, reach - 1))
    points = points[(points >= least) & (points <= width)]
    if not np.array_equal(level(points), np.searchsorted(table[1:last + 1], points, side="right")):
        return None
    return low, low + width, drop, ratio, offset, table


# ---------------------------------------------------------------------------
# Rescale (Concat inputs, DQ->Q chains, standalone Relu/Clip)
# ---------------------------------------------------------------------------
def rescale_fixed_point(x_scale: ArrayLike, y_scale: ArrayLike, bits: int = 31) -> FixedPoint:
    """``to_fixed_point(sx / sy)`` (float64 of the float32 scales)."""
    sx = float(_f32_scalar(x_scale))
    sy = float(_f32_scalar(y_scale))
    return to_fixed_point(sx / sy, bits)


def rescale(x: ArrayLike, x_scale: ArrayLike, x_zp: int, y_scale: ArrayLike, y_zp: int,
            qmin: int = INT8_MIN, qmax: int = INT8_MAX) -> np.ndarray:
    """Integer rule for a pure requantization (QLinearConcat input, DQ->Q):

    ``y = sat(rne((x - zx) * M / 2**s) + zy)`` with ``(M, s) = rescale_fixed_point(sx, sy)``.

    ORT (``QlinearBuildLookupTable`` + ``MlasQuantizeLinear``) computes
    ``sat(rne(f32(f32(sx*(x-zx)) / sy)) + zy)``: zero point added after rounding.  If
    ``(sx, zx) == (sy, zy)`` ORT copies (and so does this rule).  Residual <= 1 LSB: at
    near-ties, and at exact ties when ``sx/sy`` is a power of two (ORT's two float
    roundings decide the side).  For a bit-exact result use :func:`rescale_table`.
    """
    if _f32_scalar(x_scale) == _f32_scalar(y_scale) and int(x_zp) == int(y_zp):
        return saturate(_i64(x), qmin, qmax)
    fp = rescale_fixed_point(x_scale, y_scale)
    return saturate(fixed_point_rescale(_i64(x) - int(x_zp), fp) + int(y_zp), qmin, qmax)


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


# ---------------------------------------------------------------------------
# TFLite / TOSA fixed-point requantization (int8 TFLite models)
# ---------------------------------------------------------------------------


def fixed_point_scale(x: ArrayLike, multiplier: ArrayLike, shift: ArrayLike, double_round: bool) -> IntArray:
    """TOSA's apply_scale_32 (RESCALE with scale32), the arithmetic of TFLite's MultiplyByQuantizedMultiplier:
    ``(x * multiplier + 2^(shift-1) [+/- 2^30 if double_round and shift > 31]) >> shift``, truncated to int32.
    """
    x, multiplier, shift = _i64(x), _i64(multiplier), _i64(shift)
    rounding = np.int64(1) << (shift - 1)
    if double_round:
        rounding = rounding + np.where(shift > 31, np.where(x >= 0, 1 << 30, -(1 << 30)), 0)
    return wrap_i32((x * multiplier + rounding) >> shift)


def wrap_i32(x: ArrayLike) -> IntArray:
    """Two's complement wrap-around to int32 (MLIR's trunci)."""
    return ((_i64(x) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def fixed_point_requantize(acc: ArrayLike, multiplier: ArrayLike, shift: ArrayLike, double_round: bool,
                           zero_point: int, qmin: int = INT8_MIN, qmax: int = INT8_MAX) -> IntArray:
    """int32 accumulator (bias included) -> int8 as TFLite's int8 kernels requantize."""
    return np.clip(wrap_i32(fixed_point_scale(acc, multiplier, shift, double_round) + zero_point), qmin, qmax)


# ---------------------------------------------------------------------------
# The narrow datapath of TFLite's requantization (what the emitted C++ runs)
# ---------------------------------------------------------------------------
# g(acc) = sat((((clamp(acc, low, high) - center) * M + (acc < 0 ? R_neg : R_pos)) >> shift) + zp): one DSP48E2
# multiply (27 x 18 bits, two's complement: AMD UG579) of the 18-bit centred accumulator and the 26-bit unsigned M,
# the rounding added in its post-adder, the 48-bit P register. Two roundings because TFLite's double rounding (and
# LiteRT's rounding half away from zero) depends on the accumulator's sign.
NARROW_OPERAND_BITS = 18  # the centred, clamped accumulator, signed: one DSP48E2
# where a layer's accumulators span more: 27 bits, a 27 x 26-bit product tiled over two DSP48E2 (UG579)
NARROW_WIDE_OPERAND_BITS = 27
NARROW_MULTIPLIER_BITS = 26  # unsigned, so it fits the 27-bit signed port
NARROW_SUM_BITS = 48  # the DSP48E2's P register
NARROW_MAX_SHIFT = 46


@dataclasses.dataclass(frozen=True)
class NarrowRequant:
    """Constants of :func:`requantize_narrow` for the channels of one layer: per channel a multiplier and the
    roundings of negative and non-negative accumulators; one shift, clamp [low, high] and center for all."""

    multipliers: tuple[int, ...]
    roundings_negative: tuple[int, ...]
    roundings: tuple[int, ...]
    shift: int
    low: int
    high: int
    center: int
    operand_bits: int = NARROW_OPERAND_BITS  # of the centred accumulator

    @property
    def rounding_bits(self) -> int:
        """Bits of the roundings as two's complement numbers, at most the sum's (the DSP48E2 adds them modulo
        2^48: :func:`narrow_sum_residue`)."""
        widest = max(int(r if r >= 0 else ~r).bit_length() for r in self.roundings + self.roundings_negative) + 1
        return min(widest, NARROW_SUM_BITS)

    @property
    def level_bits(self) -> int:
        """Bits of the shifted sum (before the zero point) as two's complement numbers: it is monotone in the
        clamped accumulator, so its extremes are at low and high."""
        ends = [((edge - self.center) * m + r) >> self.shift for edge in (self.low, self.high)
                for m, negative, positive in zip(self.multipliers, self.roundings_negative, self.roundings)
                for r in (negative, positive)]
        return max(int(v if v >= 0 else ~v).bit_length() for v in ends) + 1


def narrow_sum_residue(value: int) -> int:
    """`value` modulo 2^48 as a signed 48-bit number: what the DSP48E2's P register adds (a rounding so reduced
    gives the same sum wherever the sum itself fits, which :func:`narrow_constants` proves)."""
    half = 1 << (NARROW_SUM_BITS - 1)
    return (int(value) + half) % (1 << NARROW_SUM_BITS) - half


def requantize_narrow(acc: ArrayLike, multiplier: ArrayLike, rounding_negative: ArrayLike, rounding: ArrayLike,
                      shift: int, low: int, high: int, center: int, zero_point: int, qmin: int = INT8_MIN,
                      qmax: int = INT8_MAX) -> IntArray:
    """The narrow datapath (`ming::requantize_narrow`): ``sat((((clamp(acc, low, high) - center) * multiplier +
    (acc < 0 ? rounding_negative : rounding)) >> shift) + zero_point)``, equal to TFLite's rule wherever
    :func:`narrow_fixed_point` or :func:`narrow_float32` gave the constants (tests/test_fixed_point_narrow.py)."""
    acc = _i64(acc)
    operand = np.clip(acc, low, high) - center
    added = np.where(acc < 0, _i64(rounding_negative), _i64(rounding))
    return np.clip(((operand * _i64(multiplier) + added) >> shift) + zero_point, qmin, qmax)


def narrow_fixed_point(multiplier: ArrayLike, shift: ArrayLike, double_round: bool, zero_point: int,
                       qmin: int = INT8_MIN, qmax: int = INT8_MAX) -> NarrowRequant | None:
    """Narrow constants equal to :func:`fixed_point_requantize` over every int32 accumulator, or None where the
    proof fails (the rule is not monotone over int32, or no constants fit the widths)."""
    m = np.ascontiguousarray(multiplier, np.int64).reshape(-1)
    s = np.ascontiguousarray(shift, np.int64).reshape(-1)
    return _narrow_fixed_point(m.tobytes(), s.tobytes(), bool(double_round), int(zero_point), int(qmin), int(qmax))


def narrow_float32(multipliers: ArrayLike, zero_point: int, qmin: int = INT8_MIN,
                   qmax: int = INT8_MAX) -> NarrowRequant | None:
    """Narrow constants equal to LiteRT's FULLY_CONNECTED float rounding (:func:`requantize` with ``half_away``)
    over every int32 accumulator, or None where the proof fails."""
    m = np.ascontiguousarray(multipliers, _F32).reshape(-1)
    return _narrow_float32(m.tobytes(), int(zero_point), int(qmin), int(qmax))


@functools.lru_cache(maxsize=1024)
def _narrow_fixed_point(multiplier: bytes, shift: bytes, double_round: bool, zero_point: int, qmin: int,
                        qmax: int) -> NarrowRequant | None:
    m = np.frombuffer(multiplier, np.int64).reshape(-1, 1)
    s = np.frombuffer(shift, np.int64).reshape(-1, 1)
    # Monotone premise: a Q31 multiplier (0 <= M < 2^31, so the products below stay exact in int64) whose real value
    # is below one (M < 2^s), and no int32 wrap-around of the scaled value plus the zero point at either end of int32
    # (the unwrapped rule is monotone: for each sign of acc an increasing affine map and a floor; at the sign change
    # double rounding keeps f(-1) <= 0 = f(0)).
    if np.any(m < 0) or np.any(m >= 1 << 31) or np.any(s < 2) or np.any(s > 62) or np.any(m >= np.int64(1) << s):
        return None
    ends = np.array([[I32_MIN, I32_MAX]], np.int64)
    rounding = (np.int64(1) << (s - 1)) + (np.where(ends >= 0, 1 << 30, -(1 << 30)) * (s > 31) if double_round else 0)
    unwrapped = ((ends * m + rounding) >> s) + zero_point
    if np.any(unwrapped < I32_MIN) or np.any(unwrapped > I32_MAX):
        return None
    return narrow_constants(requant_thresholds(
        lambda acc: fixed_point_requantize(acc, m, s, double_round, zero_point, qmin, qmax), len(m), qmin, qmax),
        zero_point, qmin, qmax)


@functools.lru_cache(maxsize=1024)
def _narrow_float32(multipliers: bytes, zero_point: int, qmin: int, qmax: int) -> NarrowRequant | None:
    m = np.frombuffer(multipliers, _F32).reshape(-1, 1)
    if not np.all(np.isfinite(m)) or np.any(m < 0) or np.any(m >= 1):  # f32(acc), the product, the rounding:
        return None                                                    # monotone for M >= 0
    return narrow_constants(requant_thresholds(
        lambda acc: requantize(acc, m, zero_point, qmin, qmax, half_away=True), len(m), qmin, qmax),
        zero_point, qmin, qmax)


def least_reaching(rule, wanted: IntArray, first: int, last: int) -> IntArray:
    """The least x in [first, last) with ``rule(x) >= wanted`` (`last` where none is), element by element of
    `wanted`, for a `rule` non-decreasing in x that maps an array shaped as `wanted` to outputs; all at once by
    bisection (`rule` never sees `last`)."""
    low = np.full(np.shape(wanted), first, np.int64)
    high = np.full(np.shape(wanted), last, np.int64)  # invariant: rule(high) >= wanted, or high == last
    while np.any(low < high):
        open_ = low < high
        mid = (low + high) >> 1
        reached = rule(mid) >= wanted
        high = np.where(open_ & reached, mid, high)
        low = np.where(open_ & ~reached, mid + 1, low)
    return low


def requant_thresholds(rule, channels: int, qmin: int, qmax: int) -> IntArray:
    """[channel, level - qmin - 1]: the least int32 accumulator whose output reaches each level in (qmin, qmax]
    (2^31 where none does) of a rule monotone non-decreasing over int32 (`rule` maps a [channels, levels] array of
    accumulators to outputs)."""
    levels = np.broadcast_to(np.arange(qmin + 1, qmax + 1, dtype=np.int64), (channels, qmax - qmin))
    return least_reaching(rule, levels, I32_MIN, I32_MAX + 1)


def narrow_constants(thresholds: IntArray, zero_point: int, qmin: int, qmax: int) -> NarrowRequant | None:
    """The narrow datapath's constants for the rule whose thresholds are given (:func:`requant_thresholds`), or
    None.

    Proof: the rule f and g are monotone non-decreasing over int32 (g is for each sign of acc, and across zero
    because R_neg <= R_pos), so g == f iff at every threshold t of a level l, g(t) >= l and g(t - 1) < l (for the
    points within int32). With low = t(qmin + 1) - 1 and high = t(qmax) (over the channels, clamped into int32) the
    clamp moves none of those points. For a shift s they are linear in (M, R) with x = t - center:
    R >= (l - zp) 2^s - x M, R <= (l - zp) 2^s - (x - 1) M - 1, each on the R of its point's sign; integer
    roundings exist iff F(M) = max over both signs of (max lower bound - min upper bound) <= 0, and F is convex in
    M. The least s at which every channel has a multiplier below 2^26 is the shift (wiring); each channel takes its
    least such multiplier. The center puts [low, high] in 18 bits (one DSP48E2), else in 27 (two)."""
    low = max(int(thresholds[:, 0].min()) - 1, I32_MIN)
    high = min(int(thresholds[:, -1].max()), I32_MAX)
    for bits in (NARROW_OPERAND_BITS, NARROW_WIDE_OPERAND_BITS):
        center = _center(low, high, bits)
        constants = None if center is None else _narrow_at(thresholds, zero_point, qmin, qmax, low, high, center)
        if constants is not None:
            return dataclasses.replace(constants, operand_bits=bits)
    return None


def _narrow_at(thresholds: IntArray, zero_point: int, qmin: int, qmax: int, low: int, high: int,
               center: int) -> NarrowRequant | None:
    levels = np.arange(qmin + 1, qmax + 1, dtype=np.int64) - zero_point
    # below this shift even M = 1 climbs the levels faster than the steepest channel (a start, not a premise)
    steepest = int((thresholds[:, -1] - thresholds[:, 0]).min()) // max(qmax - qmin, 1)
    first = max(steepest.bit_length() - 2, 0)
    shifts = np.arange(first, min(first + NARROW_MULTIPLIER_BITS + 4, NARROW_MAX_SHIFT + 1))
    windows = _multiplier_windows(thresholds, levels, shifts)  # [shift, channel] each
    points = _points(thresholds, center)
    for index in np.flatnonzero((windows[0] <= windows[1]).all(axis=1)):
        scaled = levels << shifts[index]
        multipliers = _least_multipliers(points, scaled, windows[0][index], windows[1][index])
        if np.any(multipliers == 0):
            continue
        negative, positive = _roundings(points, scaled, multipliers)
        if np.any(negative > positive):
            continue
        sums = [(edge - center) * multipliers + r for edge in (low, high) for r in (negative, positive)]
        if np.abs(np.concatenate(sums)).max() >= 1 << (NARROW_SUM_BITS - 1):
            return None
        return NarrowRequant(tuple(int(v) for v in multipliers), tuple(int(v) for v in negative),
                             tuple(int(v) for v in positive), int(shifts[index]), low, high, center)
    return None


def _center(low: int, high: int, bits: int) -> int | None:
    """A center within int32 that puts [low, high] into `bits` signed bits, with as many low zero bits as can be
    (its subtraction then leaves them alone), or None."""
    half = 1 << (bits - 1)
    for zeros in range(bits, -1, -1):
        center = (((low + high) // 2) >> zeros) << zeros
        for c in (center, center + (1 << zeros)):
            if low - c >= -half and high - c < half and I32_MIN <= c <= I32_MAX:
                return c
    return None


_NONE = np.int64(-1) << 62


def _sides(thresholds: IntArray):
    """Per sign of the accumulator (negative, non-negative): which thresholds t bound the rounding from below
    (g(t) >= l, t of that sign) and which from above (g(t - 1) < l, t - 1 of that sign), [channel, level]."""
    return ((thresholds < 0, thresholds < 1), (thresholds >= 0, thresholds >= 1))


class _Points(NamedTuple):
    """The points of the thresholds t [channel, level] as the datapath sees them: the centred accumulators of
    g(t) >= l and of g(t - 1) < l, and which of them bound the rounding of each sign (:func:`_sides`)."""

    reaching: IntArray
    below: IntArray
    sides: tuple


def _points(thresholds: IntArray, center: int) -> _Points:
    return _Points(thresholds - center, thresholds - 1 - center, _sides(thresholds))


def _bounds(points: _Points, scaled_levels: IntArray, multipliers: IntArray):
    """Per sign (negative, non-negative accumulators): the rounding's greatest lower bound and least upper bound
    (+-2^62 where its sign has none), shaped as `multipliers` ([channel]; `scaled_levels` [1, level])."""
    mul = multipliers[..., None]
    lower = scaled_levels - points.reaching * mul  # g(t) >= l
    upper = scaled_levels - points.below * mul - 1  # g(t - 1) < l
    return [(np.max(np.where(t_side, lower, _NONE), axis=-1), np.min(np.where(u_side, upper, -_NONE), axis=-1))
            for t_side, u_side in points.sides]


def _multiplier_windows(thresholds: IntArray, levels: IntArray, shifts: IntArray):
    """([shift, channel], [shift, channel]): the least and the greatest M in [1, 2^26) that F(M) <= 0 allows (see
    :func:`narrow_constants`) by four of its pairs of bounds alone: per sign, a lower bound of its first or last
    threshold against an upper bound of its last or first. A necessary condition: every M with F(M) <= 0 is in its
    window, and most shifts have an empty one (least > greatest)."""
    least = np.ones((len(shifts), len(thresholds)), np.int64)
    greatest = np.full_like(least, (1 << NARROW_MULTIPLIER_BITS) - 1)
    rows = np.arange(len(thresholds))
    for prefix, (t_side, u_side) in zip((True, False), _sides(thresholds)):
        (t_first, t_last), (u_first, u_last) = _first_last(t_side, prefix), _first_last(u_side, prefix)
        for i, j in ((t_first, u_last), (t_last, u_first)):
            present = (i >= 0) & (j >= 0)
            i, j = np.maximum(i, 0), np.maximum(j, 0)
            # lower(i) <= upper(j):  a M <= b  with  a = x_j - 1 - x_i,  b = (l_j - l_i) 2^s - 1
            a = np.where(present, thresholds[rows, j] - 1 - thresholds[rows, i], 0)
            b = np.where(present, ((levels[j] - levels[i])[None, :] << shifts[:, None]) - 1, 0)
            divisor = np.where(a == 0, 1, np.abs(a))
            greatest = np.where(a > 0, np.minimum(greatest, b // divisor), greatest)
            least = np.where(a < 0, np.maximum(least, -(b // divisor)), least)  # M >= ceil(-b / -a)
            least = np.where((a == 0) & (b < 0), greatest + 1, least)
    return least, greatest


def _first_last(side: IntArray, prefix: bool):
    """Per channel: the first and the last level where `side` holds (a prefix of the levels, or a suffix), -1 where
    it holds at none."""
    count = side.sum(axis=1)
    first, last = (0, count - 1) if prefix else (side.shape[1] - count, side.shape[1] - 1)
    return np.where(count > 0, first, -1), np.where(count > 0, last, -1)


def _least_multipliers(points: _Points, scaled_levels: IntArray, least: IntArray, greatest: IntArray) -> IntArray:
    """[channel]: the least M in [least, greatest] with F(M) <= 0 (see :func:`narrow_constants`), 0 where there is
    none: the least minimizer of the convex F by bisection on its forward difference, then the least M below it
    where F <= 0 (F does not increase there); every channel at once. [least, greatest] holds every M with F(M) <= 0
    (:func:`_multiplier_windows`), so the bisections take the bits of its width, not 26."""
    def excess(multiplier: IntArray) -> IntArray:
        (ln, un), (lp, up) = _bounds(points, scaled_levels, multiplier)
        return np.maximum(ln - un, lp - up)

    empty = least > greatest
    low, high = least.copy(), np.where(empty, least, greatest)
    top = high.copy()
    while np.any(low < high):
        open_, mid = low < high, (low + high) >> 1
        rising = excess(np.minimum(mid + 1, top)) >= excess(mid)
        high, low = np.where(open_ & rising, mid, high), np.where(open_ & ~rising, mid + 1, low)
    feasible_somewhere = ~empty & (excess(low) <= 0)
    high, low = low, least.copy()
    while np.any(low < high):
        open_, mid = low < high, (low + high) >> 1
        feasible = excess(mid) <= 0
        high, low = np.where(open_ & feasible, mid, high), np.where(open_ & ~feasible, mid + 1, low)
    return np.where(feasible_somewhere, low, 0)


def _roundings(points: _Points, scaled_levels: IntArray, multipliers: IntArray):
    """(R_neg, R_pos) per channel: R_neg its least value, R_pos its greatest (so R_neg <= R_pos wherever they can
    be); a side bounded on one end only takes the other side's value where its bound allows, else that bound."""
    (ln, un), (lp, up) = _bounds(points, scaled_levels, multipliers)
    unbounded = -_NONE
    preferred_positive = np.where(up < unbounded, up, np.where(lp > _NONE, lp, unbounded))
    negative = np.where(ln > _NONE, ln, np.minimum(un, preferred_positive))
    positive = np.where(up < unbounded, up, np.maximum(lp, negative))
    return negative, positive
