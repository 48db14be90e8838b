"""The integer primitives ming's numerics are written in: int8/int32 bounds, rounding shifts, a bit length, the
fields of a float32, rounding to float32's 24 significant bits at a fixed binary point, and a vectorised bisection
over a monotonic rule. Each maps 1:1 to C++ (int64 products, shifts, a count-leading-zeros, compares)."""
from __future__ import annotations

from typing import Tuple

import numpy as np
import numpy.typing as npt

INT8_MIN = -128
INT8_MAX = 127
I32_MIN = -(1 << 31)
I32_MAX = (1 << 31) - 1

ArrayLike = npt.ArrayLike
IntArray = npt.NDArray[np.int64]

_F32 = np.float32


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


def round_to_float32(v: ArrayLike) -> IntArray:
    """``v`` rounded to 24 significant bits, half to even (sign-symmetric): the float32 of ``v * 2**k`` in
    units of ``2**k``, for any fixed ``k``."""
    v = _i64(v)
    mag = np.abs(v)
    d = np.maximum(bit_length(mag) - 24, 0)
    rounded = round_shift_half_even(mag, d) << d
    return np.where(v < 0, -rounded, rounded)


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
