"""The narrow datapath of TFLite's requantization: one DSP48E2 product of the centred, clamped accumulator and a
26-bit multiplier, a rounding per sign of the accumulator and a constant shift. `narrow_constants` derives the
constants from the rule's thresholds and proves them equal to `tflite_rules.fixed_point_requantize` (or LiteRT's
float rounding) over every int32 accumulator."""
from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import numpy as np

from ming_py.numerics.integers import (_F32, I32_MAX, I32_MIN, INT8_MAX, INT8_MIN, ArrayLike, IntArray, _i64,
    least_reaching)
from ming_py.numerics.onnxruntime_rules import requantize
from ming_py.numerics.tflite_rules import fixed_point_requantize


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
