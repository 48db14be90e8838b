"""The constants and decompositions ming derives to compute onnxruntime's rules exactly in DSPs and fabric: the lean
requantization (one product, a compare, no normalization), a power-of-two multiplier as a rounding shift, the
fixed-point rescale, the integer forms of Add/Sub (two roundings at a fixed binary point, or a short division) and of
Mul. Each is proved equal to its rule in `onnxruntime_rules` where its constants are given."""
from __future__ import annotations

import dataclasses
import functools
from typing import Optional, Tuple

import numpy as np
import numpy.typing as npt

from ming_py.numerics.integers import (_F32, I32_MAX, I32_MIN, INT8_MAX, INT8_MIN, ArrayLike, IntArray, bit_length,
    _f32_scalar, float32_parts, _i64, round_shift_half_even, round_shift_half_up, round_to_float32)
from ming_py.numerics.onnxruntime_rules import (ORT_X86_DOMAIN_OFFSET, fma_float32, ort_gap_multiplier, requantize,
    saturate)


# ---------------------------------------------------------------------------
# The lean requantization (`ming::requantize_lean`)
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
# Fixed point (int32 multiplier + right shift): rescale within 1 LSB
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


# ---------------------------------------------------------------------------
# Add and Sub
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


# ---------------------------------------------------------------------------
# Mul (`ming::mul_requant`)
# ---------------------------------------------------------------------------
#: The multipliers `mul_requant` takes (``2**-24 <= R < 2**15``): the product stays below 2**31 (ORT's
#: cvtps2dq would wrap above it) and every intermediate fits int64.
MUL_MULTIPLIER_RANGE = (2.0 ** -24, 2.0 ** 15)


def mul_parts(multiplier: ArrayLike) -> Tuple[int, int]:
    """``(mantissa, shift)`` with ``R = mantissa * 2**-shift`` (24-bit mantissa); raises ValueError outside
    ``MUL_MULTIPLIER_RANGE``."""
    r = _f32_scalar(multiplier)
    if not (MUL_MULTIPLIER_RANGE[0] <= float(r) < MUL_MULTIPLIER_RANGE[1]):
        raise ValueError(f"Mul multiplier {float(r):.6g} outside [2^-24, 2^15)")
    mant, exp = float32_parts(r)
    return int(mant), int(-exp)


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
