"""The AveragePool datapath: onnxruntime's float32 window sum emulated in integers (each float32 addition a rounding
at a fixed binary point) and the rest of its rule (divide, rescale, zero point, round, clamp) as thresholds found
by a 16 x 26-bit estimate and one compare, proved at every breakpoint by `window_average_constants`."""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from ming_py.numerics.integers import (INT8_MAX, INT8_MIN, ArrayLike, IntArray, _f32_scalar, float32_parts, _i64,
    least_reaching, round_to_float32)
from ming_py.numerics.onnxruntime_rules import ORT_X86_DOMAIN_OFFSET, ort_average_level


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


def _thresholds(bound: int, exponent: int, divisor: int, y_scale, y_zp, qmin, qmax, domain_offset) -> IntArray:
    """``T[k]`` for levels 1 .. qmax - qmin: the least sum in ``[-bound, bound + 1]`` with a level >= k
    (``bound + 1``: none below the bound reaches it), by bisection over the monotonic level."""
    wanted = np.arange(1, qmax - qmin + 1, dtype=np.int64)
    return least_reaching(lambda total: ort_average_level(total, exponent, divisor, y_scale, y_zp, qmin, qmax,
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
