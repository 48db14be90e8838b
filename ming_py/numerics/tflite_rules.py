"""What TFLite (and TOSA's RESCALE) computes: the int32 fixed-point requantization of its int8 kernels
(MultiplyByQuantizedMultiplier with double rounding). LiteRT's FULLY_CONNECTED float rounding is
`onnxruntime_rules.requantize` with ``half_away``."""
from __future__ import annotations

import numpy as np

from ming_py.numerics.integers import INT8_MAX, INT8_MIN, ArrayLike, IntArray, _i64


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
