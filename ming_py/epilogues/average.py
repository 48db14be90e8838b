"""The requantization of a window's (or the whole map's) sum of int8 values to their int8 average:
onnxruntime's AveragePool / GlobalAveragePool rules (`AverageRequant`) and TFLite's AVERAGE_POOL_2D
(`FixedPointAverage`)."""

from __future__ import annotations

import numpy as np

from ming_py import numerics
from ming_py.array_layout import Dim, array
from ming_py.ir import AverageRequant, FixedPointAverage

from .base import EpilogueRule, register


def average_shift(e: AverageRequant) -> numerics.ShiftRequant | None:
    """The rounding shift an average's requantization is when its multiplier is a power of two."""
    return numerics.average_shift(e.x_scale, e.x_zero_point, e.y_scale, e.zero_point, e.count, e.global_pool,
                                  e.exclude_padding)


def _by_valid_count(e) -> bool:
    """Whether the divisor depends on the output position (padding left out of a window's count)."""
    return e.exclude_padding and not e.global_pool


@register
class OnnxAverage(EpilogueRule):
    ir_type = AverageRequant

    def golden(self, e, result, context):
        if e.global_pool:
            return numerics.gap_requant(result, e.count, e.x_scale, e.x_zero_point, e.y_scale, e.zero_point)
        if e.exclude_padding:
            # padded positions hold the zero point: drop them from the sum and from the divisor
            valid = context.valid()
            return numerics.avgpool_requant(result - (e.count - valid) * e.x_zero_point, valid, e.x_scale,
                                            e.x_zero_point, e.y_scale, e.zero_point)
        return numerics.avgpool_requant(result, e.count, e.x_scale, e.x_zero_point, e.y_scale, e.zero_point)

    def reads_inputs(self):
        return False

    def arrays(self, e, spec):
        if not _by_valid_count(e):
            return {}
        return {role: array(role, bits, (Dim(e.count + 1),), rom=True)
                for role, bits in (("divisor_multiplier", 64), ("divisor_shift", 32))}

    def datapath(self, e):
        if average_shift(e) is not None:
            return "shift"
        if e.global_pool:
            multiplier = numerics.ort_gap_multiplier(e.x_scale, e.y_scale, e.count)
            return "lean" if numerics.lean_requant(multiplier) is not None else "exact"
        return "average"

    def emit(self, e, view, constant):
        view.extra.update(zero_point=e.zero_point, x_zero_point=e.x_zero_point, count=e.count)
        shift = average_shift(e)
        if shift is not None:  # a power-of-two multiplier
            view.epilogue = "shift"
            view.extra.update(offset=shift.offset, shift=shift.shift, zero_point=shift.zero_point)
        elif e.global_pool:
            multiplier = numerics.ort_gap_multiplier(e.x_scale, e.y_scale, e.count)
            lean = numerics.lean_requant(multiplier)
            view.epilogue = "requantize_global"
            view.extra["lean"] = lean is not None
            if lean is not None:
                view.extra.update(mantissa=lean.mantissa, shift=lean.shift, limit=lean.limit)
            else:
                mantissa, exponent = numerics.float32_parts(multiplier)
                view.extra.update(mantissa=int(mantissa), exponent=int(exponent))
        elif e.exclude_padding:
            view.epilogue = "average_valid"
            points = [numerics.avgpool_fixed_point(e.x_scale, e.y_scale, max(d, 1)) for d in range(e.count + 1)]
            constant("divisor_multiplier", "int64_t", np.array([f.multiplier for f in points]),
                     "fixed-point x_scale / (y_scale * valid) by number of valid window positions")
            constant("divisor_shift", "int32_t", np.array([f.shift for f in points], dtype=np.int32),
                     "matching right shifts")
        else:
            point = numerics.avgpool_fixed_point(e.x_scale, e.y_scale, e.count)
            view.epilogue = "average"
            view.extra.update(multiplier=point.multiplier, shift=point.shift)


@register
class TfliteAverage(EpilogueRule):
    """TOSA's Q30 reciprocal of the number of valid window elements: by that number in a window process, a
    constant of the code over the whole map."""

    ir_type = FixedPointAverage

    def golden(self, e, result, context):
        valid = context.valid()
        return numerics.fixed_point_requantize(result, e.multiplier.astype(np.int64)[valid],
                                               e.shift.astype(np.int64)[valid], e.double_round, e.zero_point,
                                               e.qmin, e.qmax)

    def reads_inputs(self):
        return False

    def arrays(self, e, spec):
        if not spec.process_kind.line_buffer:  # every window is the whole map
            return {}
        return {role: array(role, bits, (Dim(len(e.multiplier)),), rom=True)
                for role, bits in (("divisor_multiplier", 32), ("divisor_shift", 8))}

    def datapath(self, e):
        return "fixed point 32 x 32"

    def emit(self, e, view, constant):
        view.extra.update(zero_point=e.zero_point, double_round=e.double_round, qmin=e.qmin, qmax=e.qmax)
        if not view.spec.process_kind.line_buffer:  # every window holds the whole map
            count = len(e.multiplier) - 1
            view.epilogue = "fixed_point_scalar"
            view.extra.update(multiplier=int(e.multiplier[count]), shift=int(e.shift[count]))
        else:
            view.epilogue = "fixed_point_average"
            constant("divisor_multiplier", "int32_t", e.multiplier.astype(np.int32),
                     "TOSA's Q30 reciprocal of the number of valid window elements, by that number")
            constant("divisor_shift", "uint8_t", e.shift.astype(np.uint8), "matching right shifts")
