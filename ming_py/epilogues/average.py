"""The requantization of a window's (or the whole map's) int8 values to their int8 average: onnxruntime's
GlobalAveragePool rule (`AverageRequant`), its QLinearAveragePool over windows (`WindowAverage`) and TFLite's
AVERAGE_POOL_2D (`FixedPointAverage`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ming_py import numerics
from ming_py.array_layout import Dim, array, spread
from ming_py.ir import AverageRequant, FixedPointAverage, WindowAverage

from .base import (FIXED_POINT, INPUT_ZERO_POINT, OUTPUT_QMIN, OUTPUT_ZERO_POINT, EpilogueRule, EpilogueValues,
                   FixedPointValues, ShiftValues, register, rom_word)


@dataclass(frozen=True)
class GlobalAverageValues(EpilogueValues):
    """onnxruntime's GlobalAveragePool: the sum less `count` input zero points, times one multiplier (lean: its
    mantissa, shift and limit; else exact: its mantissa and exponent)."""

    scalars = (INPUT_ZERO_POINT, ("shift", "REQUANT_SHIFT", "int", "the lean datapath's shift"), OUTPUT_ZERO_POINT)

    zero_point: int
    x_zero_point: int
    count: int
    lean: bool
    mantissa: int
    shift: int | None = None
    limit: int | None = None
    exponent: int | None = None


@dataclass(frozen=True)
class WindowAverageValues(EpilogueValues):
    """onnxruntime's AveragePool over windows (`numerics.WindowAverageConstants`); one divisor's level
    constants (low .. offset) where `rows` is 1, else from the `average_constants` ROM."""

    scalars = (INPUT_ZERO_POINT, OUTPUT_QMIN)

    x_zero_point: int
    mantissa: int
    last: int
    qmin: int
    rows: int
    by_columns: bool
    low: int | None = None
    high: int | None = None
    drop: int | None = None
    ratio: int | None = None
    offset: int | None = None


def average_shift(e: AverageRequant) -> numerics.ShiftRequant | None:
    """The rounding shift a global average's requantization is when its multiplier is a power of two."""
    return numerics.average_shift(e.x_scale, e.x_zero_point, e.y_scale, e.zero_point, e.count)


@register
class OnnxAverage(EpilogueRule):
    ir_type = AverageRequant

    def golden(self, e, result, context):
        return numerics.gap_requant(result, e.count, e.x_scale, e.x_zero_point, e.y_scale, e.zero_point)

    def reads_inputs(self):
        return False

    def arrays(self, e, spec):
        return {}

    def datapath(self, e):
        if average_shift(e) is not None:
            return "shift"
        multiplier = numerics.ort_gap_multiplier(e.x_scale, e.y_scale, e.count)
        return "lean" if numerics.lean_requant(multiplier) is not None else "exact"

    def emit(self, e, view, constant):
        shift = average_shift(e)
        if shift is not None:  # a power-of-two multiplier
            return ShiftValues("shift", shift.shift, shift.zero_point, shift.offset)
        multiplier = numerics.ort_gap_multiplier(e.x_scale, e.y_scale, e.count)
        lean = numerics.lean_requant(multiplier)
        if lean is not None:
            return GlobalAverageValues("requantize_global", e.zero_point, e.x_zero_point, e.count, True, lean.mantissa,
                                       shift=lean.shift, limit=lean.limit)
        mantissa, exponent = numerics.float32_parts(multiplier)
        return GlobalAverageValues("requantize_global", e.zero_point, e.x_zero_point, e.count, False, int(mantissa),
                                   exponent=int(exponent))


def _window_rows(e: WindowAverage, valid: np.ndarray) -> np.ndarray:
    """The constants' row of each window: its divisor's."""
    return np.searchsorted(e.constants.divisors, valid) if e.exclude_padding else np.zeros(valid.shape, np.int64)


@register
class OnnxWindowAverage(EpilogueRule):
    """onnxruntime's float32 sum of each window's elements in its kernel's order (`WindowAverage.columns`), each a
    chain of float32 additions in the lane (`ming::average_term`, `ming::average_add`), and the level its
    divisor's thresholds give (`ming::average_level`; `numerics.WindowAverageConstants`)."""

    ir_type = WindowAverage

    def golden(self, e, result, context):
        c = e.constants
        total = numerics.window_average_sum(result, c.mantissa, c.x_zero_point, e.columns)
        return numerics.window_average_level(total, _window_rows(e, context.valid()), c)

    def reads_inputs(self):
        return True

    def arrays(self, e, spec):
        lanes, rows = spec.lanes_out[0], len(e.constants.divisors)
        bits = int(e.constants.thresholds.max()).bit_length()
        plans = {"average_thresholds": array("average_thresholds", bits,
                                             (spread(lanes, lanes, "partition"), Dim(rows), Dim(256)), rom=True)}
        if rows > 1:
            plans["average_rows"] = array("average_rows", 8, (Dim(e.count + 1),), rom=True)
            plans["average_constants"] = array("average_constants", 42, (Dim(rows), spread(5, 5, "partition")),
                                               rom=True)
        return plans

    def datapath(self, e):
        return "float average"

    def emit(self, e, view, constant):
        c = e.constants
        rows = len(c.divisors)
        values = WindowAverageValues("window_average", c.x_zero_point, c.mantissa, c.last, c.qmin, rows, e.columns > 0)
        if rows == 1:
            values = dataclasses.replace(values, low=int(c.low[0]), high=int(c.high[0]), drop=int(c.drop[0]),
                                         ratio=int(c.ratio[0]), offset=int(c.offset[0]))
        lanes = view.out_lanes[0]
        thresholds = np.broadcast_to(c.thresholds, (lanes, *c.thresholds.shape))
        constant("average_thresholds", rom_word(thresholds), thresholds,
                 "onnxruntime's AveragePool: by divisor, the least window sum (less the row's low) reaching each "
                 "output level; one copy per lane")
        if rows > 1:
            by_valid = np.zeros(e.count + 1, np.uint8)
            by_valid[list(c.divisors)] = np.arange(rows)
            constant("average_rows", "uint8_t", by_valid, "the row of a window's divisor by its unpadded elements")
            level_constants = np.stack([c.low, c.high, c.drop, c.ratio, c.offset], axis=1)
            constant("average_constants", rom_word(level_constants), level_constants,
                     "per divisor: low, high, drop, ratio and offset of ming::average_level")
        return values


@register
class TfliteAverage(EpilogueRule):
    """TOSA's Q30 reciprocal of the number of valid window elements: by that number in a window process, a
    constant of the code over the whole map."""

    ir_type = FixedPointAverage
    multiplier_roms = ("divisor_multiplier", "divisor_shift")  # by the valid count, in a window process

    def golden(self, e, result, context):
        valid = context.valid()
        return numerics.fixed_point_requantize(np.asarray(result, np.int64) + e.domain * valid,
                                               e.multiplier.astype(np.int64)[valid],
                                               e.shift.astype(np.int64)[valid], e.double_round,
                                               e.zero_point - e.domain, e.qmin, e.qmax)

    def reads_inputs(self):
        return False

    def arrays(self, e, spec):
        if not spec.process_kind.line_buffer:  # every window is the whole map
            return {}
        return {role: array(role, bits, (Dim(len(e.multiplier)),), rom=True)
                for role, bits in (("divisor_multiplier", 32), ("divisor_shift", 8))}

    def datapath(self, e):
        return FIXED_POINT

    def emit(self, e, view, constant):
        values = FixedPointValues("fixed_point_average", e.zero_point - e.domain, e.double_round, e.qmin, e.qmax,
                                  domain=e.domain)
        if "divisor_multiplier" not in view.arrays:  # every window holds the whole map: constants of the code
            count = len(e.multiplier) - 1
            return dataclasses.replace(values, template="fixed_point_scalar", multiplier=int(e.multiplier[count]),
                                       shift=int(e.shift[count]), domain=e.domain * count)
        constant("divisor_multiplier", "int32_t", e.multiplier.astype(np.int32),
                 "TOSA's Q30 reciprocal of the number of valid window elements, by that number")
        constant("divisor_shift", "uint8_t", e.shift.astype(np.uint8), "matching right shifts")
        return values
