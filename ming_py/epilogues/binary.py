"""Two int8 values with their own scales combined into an int8 result: onnxruntime's Add and Sub
(`AddRequant`) and Mul (`MulRequant`), and TFLite's ADD (`FixedPointAdd`) and MUL (`FixedPointMul`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ming_py import numerics
from ming_py.array_layout import Dim, array, spread
from ming_py.ir import AddRequant, FixedPointAdd, FixedPointMul, MulRequant

from .base import (FIXED_POINT, NARROW_SCALARS, OUTPUT_QMAX, OUTPUT_QMIN, OUTPUT_ZERO_POINT, EpilogueRule, EpilogueValues,
                   FixedPointValues, register)

A_ZERO_POINT = ("a_zero_point", "A_ZERO_POINT", "int32_t", "")
B_ZERO_POINT = ("b_zero_point", "B_ZERO_POINT", "int32_t", "")


@dataclass(frozen=True)
class AddValues(EpilogueValues):
    """onnxruntime's QLinearAdd (`ming::add_requant`, `numerics.AddConstants`); `swap`: its first operand, the
    map, is `b`."""

    fused: ClassVar[bool] = True
    scalars = (("shift", "REQUANT_SHIFT", "int", "QLinearAdd's rounding shift"), OUTPUT_QMIN, OUTPUT_QMAX)
    qmin: int
    qmax: int
    swap: bool
    a_multiplier: int
    b_multiplier: int
    fixed: int
    shift: int
    offset: int
    constant_bits: tuple[int, int, int]  # `add_constant_bits`


@dataclass(frozen=True)
class FloatAddValues(EpilogueValues):
    """onnxruntime's float DQ -> Add/Sub -> Q (`ming::add_float_requant`, `numerics.float_add_constants`)."""

    fused: ClassVar[bool] = False
    scalars = (A_ZERO_POINT, B_ZERO_POINT, ("x_shift", "SUM_SHIFT", "int", "left shift of |sum| before the division "
                                                                           "by the output scale"),
               OUTPUT_ZERO_POINT, OUTPUT_QMIN, OUTPUT_QMAX)
    qmin: int
    qmax: int
    a_zero_point: int
    b_zero_point: int
    zero_point: int
    a_mantissa: int
    a_align: int
    b_mantissa: int
    b_align: int
    x_shift: int
    x_limit: int
    divisor: int
    divisor_bits: int


@dataclass(frozen=True)
class MulValues(EpilogueValues):
    """onnxruntime's Mul (`ming::mul_requant`, `numerics.mul_parts`)."""

    scalars = (A_ZERO_POINT, B_ZERO_POINT, ("shift", "REQUANT_SHIFT", "int", "the multiplier is mantissa * "
                                                                             "2^-REQUANT_SHIFT"), OUTPUT_ZERO_POINT)

    a_zero_point: int
    b_zero_point: int
    mantissa: int
    shift: int
    zero_point: int
    domain_offset: int


@dataclass(frozen=True)
class FixedPointMulValues(EpilogueValues):
    """TFLite's MUL: the product of the values plus their offsets, requantized by the narrow datapath (`narrow`,
    with the residues of its two roundings) or in fixed point as written (`multiplier`, `shift`; None where
    narrow)."""

    scalars = (("shift", "REQUANT_SHIFT", "int", "right shift of the 64-bit product"),) + NARROW_SCALARS + \
        (OUTPUT_ZERO_POINT, OUTPUT_QMIN, OUTPUT_QMAX)
    a_offset: int
    b_offset: int
    multiplier: int | None
    shift: int | None
    zero_point: int
    double_round: bool
    qmin: int
    qmax: int
    narrow: numerics.NarrowRequant | None
    narrow_roundings: tuple[int, int] | None


def _fused(e: AddRequant) -> bool:
    """Whether onnxruntime runs the Add as QLinearAdd (fused QDQ) or in float: Sub always in float, an Add as
    the frontend found (`AddRequant.kernel`)."""
    return not e.subtract and e.kernel != "float"


def _domain_offset(e: AddRequant) -> int:
    """QLinearAdd's zero points and outputs are in its own type: uint8 values are int8 ones plus 128."""
    return numerics.ORT_X86_DOMAIN_OFFSET if e.kernel == "uint8" else 0


@register
class OnnxAdd(EpilogueRule):
    ir_type = AddRequant

    def golden(self, e, result, context):
        a, b = result
        return numerics.add_requant(a, e.a_scale, e.a_zero_point, b, e.b_scale, e.b_zero_point, e.y_scale,
                                    e.zero_point, e.qmin, e.qmax, subtract=e.subtract, fused=_fused(e),
                                    swap=context.span_scalar == (0,), domain_offset=_domain_offset(e))

    def reads_inputs(self):
        return True

    def arrays(self, e, spec):
        return {}

    def datapath(self, e):
        return "sum of two products" if _fused(e) else "float sum"

    def emit(self, e, view, constant):
        if not _fused(e):  # onnxruntime's float DQ -> Add/Sub -> Q
            c = numerics.float_add_constants(e.a_scale, e.b_scale, e.y_scale, e.subtract)
            return FloatAddValues("add", e.qmin, e.qmax, e.a_zero_point, e.b_zero_point, e.zero_point, c.a_mantissa,
                                  c.a_align, c.b_mantissa, c.b_align, c.x_shift, c.x_limit, c.divisor,
                                  int(c.divisor).bit_length())
        # QLinearAdd: onnxruntime's kernel takes the map first when the other operand is the broadcast one
        swap = view.spec.process_kind.name == "broadcast" and view.spec.vector_input == 0
        scales = [(e.a_scale, e.a_zero_point), (e.b_scale, e.b_zero_point)]
        (sa, za), (sb, zb) = scales[::-1] if swap else scales
        c = numerics.add_constants(sa, za, sb, zb, e.y_scale, e.zero_point, _domain_offset(e))
        return AddValues("add", e.qmin, e.qmax, swap, c.a_multiplier, c.b_multiplier, c.fixed, c.shift, c.offset,
                         add_constant_bits(c))


@register
class OnnxMul(EpilogueRule):
    ir_type = MulRequant

    def golden(self, e, result, context):
        a, b = result
        return numerics.mul_requant(a, e.a_zero_point, b, e.b_zero_point, e.multiplier, e.zero_point, e.qmin, e.qmax)

    def reads_inputs(self):
        return True

    def arrays(self, e, spec):
        return {}

    def datapath(self, e):
        return "float32 product"

    def emit(self, e, view, constant):
        mantissa, shift = numerics.mul_parts(e.multiplier)
        return MulValues("mul", e.a_zero_point, e.b_zero_point, mantissa, shift, e.zero_point,
                         numerics.ORT_X86_DOMAIN_OFFSET)


@register
class TfliteAdd(EpilogueRule):
    """Each input scaled to int32 by a table of its 256 values, the int32 sum requantized in fixed point."""

    ir_type = FixedPointAdd

    def golden(self, e, result, context):
        a, b = result
        tables = e.a_table.astype(np.int64), e.b_table.astype(np.int64)
        total = numerics.wrap_i32(tables[0][a + 128] + tables[1][b + 128])
        return numerics.fixed_point_requantize(total, e.multiplier, e.shift, e.double_round, e.zero_point, e.qmin,
                                               e.qmax)

    def reads_inputs(self):
        return True

    def arrays(self, e, spec):
        """A copy of each input's table per lane `[lanes][256]` (a ROM bank each, one read per iteration)."""
        lanes = spec.lanes_in[0]
        return {role: array(role, 32, (spread(lanes, lanes, "partition"), Dim(256)), rom=True)
                for role in ("a_table", "b_table")}

    def datapath(self, e):
        return FIXED_POINT

    def emit(self, e, view, constant):
        lanes = view.out_lanes[0]
        for role, table in (("a_table", e.a_table), ("b_table", e.b_table)):
            constant(role, "int32_t", np.tile(table.astype(np.int32), (lanes, 1)),
                     f"input {role[0]} scaled to int32 for every int8 value (index + 128), TFLite's "
                     "(x - zero point) << 20 rescaled; one copy per lane")
        return FixedPointValues("fixed_point", e.zero_point, e.double_round, e.qmin, e.qmax, multiplier=e.multiplier,
                                shift=e.shift)


@register
class TfliteMul(EpilogueRule):
    """The product of the two inputs less their zero points (a 10 x 10-bit product: each factor is in -255..255),
    requantized in fixed point (LiteRT's reference `MulElementwise`: MultiplyByQuantizedMultiplier, then the
    output zero point): by the narrow datapath where `numerics.narrow_fixed_point` proves one equal to that rule
    (the product, within +-65,025, is its accumulator), else by the rule as written."""

    ir_type = FixedPointMul

    def golden(self, e, result, context):
        a, b = result
        product = (a + e.a_offset) * (b + e.b_offset)
        return numerics.fixed_point_requantize(product, e.multiplier, e.shift, e.double_round, e.zero_point, e.qmin,
                                               e.qmax)

    def reads_inputs(self):
        return True

    def arrays(self, e, spec):
        return {}

    def datapath(self, e):
        narrow = _narrow_mul(e)
        if narrow is None:
            return FIXED_POINT
        return "narrow" if narrow.operand_bits == numerics.NARROW_OPERAND_BITS else "narrow, 27-bit operand"

    def emit(self, e, view, constant):
        narrow = _narrow_mul(e)
        roundings = None if narrow is None else \
            tuple(numerics.narrow_sum_residue(r) for r in (narrow.roundings_negative[0], narrow.roundings[0]))
        as_written = (None, None) if narrow else (e.multiplier, e.shift)
        return FixedPointMulValues("fixed_point_mul", e.a_offset, e.b_offset, *as_written, e.zero_point,
                                   e.double_round, e.qmin, e.qmax, narrow, roundings)


def _narrow_mul(e: FixedPointMul) -> numerics.NarrowRequant | None:
    """The narrow constants of a MUL's one requantization (cached by its constants), None where not proved or
    the build keeps the rule as written (`e.narrow`)."""
    if not e.narrow:
        return None
    return numerics.narrow_fixed_point([e.multiplier], [e.shift], e.double_round, e.zero_point, e.qmin, e.qmax)


def add_constant_bits(c: numerics.AddConstants) -> tuple[int, int, int]:
    """The bit lengths of QLinearAdd's constants (ratios, |fixed|): `ming::add_requant`'s template arguments, which
    give each of its intermediates the width of its range (ming::widths::requant_add)."""
    return int(c.a_multiplier).bit_length(), int(c.b_multiplier).bit_length(), abs(int(c.fixed)).bit_length()
