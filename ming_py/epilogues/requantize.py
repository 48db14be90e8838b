"""The requantization of a MAC process's int32 accumulators to int8: onnxruntime's QLinearConv/QGemm rule
(`AccRequant`) and TFLite's fixed-point rule (`FixedPointRequant`, TOSA RESCALE)."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from ming_py import numerics
from ming_py.array_layout import Dim, array, spread
from ming_py.ir import AccRequant, FixedPointRequant

from .base import (FIXED_POINT, OUTPUT_ZERO_POINT, EpilogueRule, EpilogueValues, FixedPointValues, ShiftValues, per_tile,
                   register, rom_word)

_BIAS_COMMENT = "int32 bias with the input zero-point correction folded in, [output tile][lane]"
_LEAN_COMMENTS = {
    "mantissa": "requantization multiplier float32(x_scale * w_scale / y_scale) = mantissa * 2^-shift, "
                "scaled to the common shift where one fits",
    "shift": "requantization shift",
    "limit": "least |accumulator| whose output saturates (ming::requantize_lean clamps to it)",
}


@dataclass(frozen=True)
class RequantizeValues(EpilogueValues):
    """onnxruntime's requantization by the lean datapath (`lean`) or the exact float32 emulation."""

    scalars = (("shift", "REQUANT_SHIFT", "int", "the lean datapath's shift, common to every channel"),
               OUTPUT_ZERO_POINT)

    zero_point: int
    lean: bool
    shift: int | None = None  # the lean datapath's shift where all channels share it (else from the `shift` ROM)


@functools.lru_cache(maxsize=4096)
def lean_channels(e: AccRequant):
    """`numerics.lean_channels` of an epilogue's multipliers, computed once per epilogue (the cost model asks for
    every candidate schedule of its process)."""
    return numerics.lean_channels(e.multipliers)


@functools.lru_cache(maxsize=4096)
def power_of_two(e: AccRequant) -> int | None:
    """`numerics.power_of_two_shift` of an epilogue's multipliers: the rounding shift that requantizes every
    channel, or None."""
    return numerics.power_of_two_shift(e.multipliers)


def per_tile_arrays(constants: tuple[tuple[str, int], ...], spec) -> dict:
    """Per-output-channel constants `[tiles][lanes]`: one word per output tile holds its lanes' constants. The
    requantization's are read by the requantizers: with shared ones, one word per turn, `[tiles x turns]
    [requantizers]` (the same order of channels)."""
    def layout(role, bits):
        rows, lanes = (spec.tokens_out[0], spec.lanes_out[0]) if role == "bias" else \
            (spec.tokens_out[0] * spec.requant_steps, spec.requant_lanes)
        return array(role, bits, (Dim(rows), spread(lanes, lanes, "reshape")), rom=True)

    return {role: layout(role, bits) for role, bits in constants}


@register
class OnnxRequant(EpilogueRule):
    """onnxruntime's rule (`numerics.requantize`), computed by the lean datapath (`ming::requantize_lean`:
    a 24 x 27-bit product and a shift) where every channel has one (`numerics.lean_channels`), else by the
    exact float32 emulation (`ming::requantize`)."""

    ir_type = AccRequant

    def golden(self, e, result, context):
        acc = result + context.per_channel(e.bias.astype(np.int64))
        multiplier = context.per_channel(numerics.ort_conv_multiplier(e.x_scale, e.w_scale, e.y_scale))
        return numerics.requantize(acc, multiplier, e.zero_point, e.qmin, e.qmax)

    def reads_inputs(self):
        return False

    @staticmethod
    def constants(e) -> tuple[tuple[str, int], ...]:
        """(role, bits) of its per-channel constants: none beyond the bias where every multiplier is one power of
        two (a rounding shift); the lean datapath's (a shift common to all channels is a constant of the code, not
        a table) where every channel has them; else the exact emulation's."""
        if power_of_two(e) is not None:
            return (("bias", 32),)
        lean = lean_channels(e)
        if lean is None:
            return ("bias", 32), ("mantissa", 32), ("exponent", 32)
        if len({c.shift for c in lean}) == 1:
            return ("bias", 32), ("mantissa", 32), ("limit", 32)
        return ("bias", 32), ("mantissa", 32), ("shift", 8), ("limit", 32)

    def arrays(self, e, spec):
        return per_tile_arrays(self.constants(e), spec)

    def datapath(self, e):
        if power_of_two(e) is not None:
            return "shift"
        roles = [role for role, _ in self.constants(e)]
        return "exact" if "exponent" in roles else "lean, shift by channel" if "shift" in roles else "lean"

    def emit(self, e, view, constant):
        lanes = view.out_lanes[0]
        constant("bias", "int32_t", per_tile(e.bias.astype(np.int32), lanes), _BIAS_COMMENT)
        shift = power_of_two(e)
        if shift is not None:
            return ShiftValues("requantize_shift", shift, e.zero_point)
        lean = lean_channels(e)
        if lean is not None:
            ctypes = {"mantissa": "uint32_t", "shift": "uint8_t", "limit": "uint32_t"}
            for role in view.arrays:
                if role in ctypes:
                    values = np.array([getattr(c, role) for c in lean], dtype=ctypes[role].removesuffix("_t"))
                    constant(role, ctypes[role], per_tile(values, view.spec.requant_lanes), _LEAN_COMMENTS[role])
            common_shift = None if "shift" in view.arrays else lean[0].shift
            return RequantizeValues("requantize", e.zero_point, True, common_shift)
        mantissa, exponent = numerics.float32_parts(e.multipliers)
        constant("mantissa", "int32_t", per_tile(mantissa.astype(np.int32), view.spec.requant_lanes),
                 "requantization multiplier float32(x_scale * w_scale / y_scale) = mantissa * 2^exponent "
                 "(exact float32 emulation: some channel's multiplier is below 2^-15)")
        constant("exponent", "int32_t", per_tile(exponent.astype(np.int32), view.spec.requant_lanes),
                 "requantization exponent")
        return RequantizeValues("requantize", e.zero_point, False)


def narrow_channels(e: FixedPointRequant) -> numerics.NarrowRequant | None:
    """`numerics.narrow_fixed_point` (or `narrow_float32`, both cached by their constants) of an epilogue; None
    where the proof fails or the build keeps the rule as written (`e.narrow`, `BuildOptions.narrow_requant`)."""
    if not e.narrow:
        return None
    if e.float32:
        return numerics.narrow_float32(e.float_multipliers, e.zero_point, e.qmin, e.qmax)
    return numerics.narrow_fixed_point(e.multiplier, e.shift, e.double_round, e.zero_point, e.qmin, e.qmax)


@register
class TfliteRequant(EpilogueRule):
    """TFLite's rule: a Q31 multiplier and a shift per channel (`numerics.fixed_point_requantize`), or LiteRT's
    FULLY_CONNECTED rounding in float32 (`float32`); computed by the narrow datapath (`ming::requantize_narrow`:
    an 18 x 26-bit product and a rounding in one DSP48E2, or 27 x 26 bits in two) where `numerics.narrow_constants` proves one equal to
    it, else by the rule as written."""

    ir_type = FixedPointRequant
    multiplier_roms = ("multiplier", "shift")  # per channel, [output tile][lane] (the narrow datapath's differ)

    def golden(self, e, result, context):
        acc = numerics.wrap_i32(result + context.per_channel(e.bias.astype(np.int64)))  # TOSA adds the bias in int32
        if e.float32:
            return numerics.requantize(acc, context.per_channel(e.float_multipliers), e.zero_point, e.qmin, e.qmax,
                                       half_away=True)
        return numerics.fixed_point_requantize(acc, context.per_channel(e.multiplier.astype(np.int64)),
                                               context.per_channel(e.shift.astype(np.int64)), e.double_round,
                                               e.zero_point, e.qmin, e.qmax)

    def reads_inputs(self):
        return False

    @staticmethod
    def constants(e) -> tuple[tuple[str, int], ...]:
        narrow = narrow_channels(e)
        if narrow is not None:
            bits = narrow.rounding_bits
            return (("bias", 32), ("multiplier", numerics.NARROW_MULTIPLIER_BITS), ("rounding_negative", bits),
                    ("rounding", bits))
        if e.float32:
            return ("bias", 32), ("mantissa", 32), ("exponent", 32)
        return ("bias", 32), ("multiplier", 32), ("shift", 8)

    def arrays(self, e, spec):
        return per_tile_arrays(self.constants(e), spec)

    def datapath(self, e):
        narrow = narrow_channels(e)
        if narrow is not None:
            return "narrow" if narrow.operand_bits == numerics.NARROW_OPERAND_BITS else "narrow, 27-bit operand"
        return "exact" if e.float32 else FIXED_POINT  # the float32 emulation rounds half away

    def emit(self, e, view, constant):
        lanes = view.out_lanes[0]
        constant("bias", "int32_t", per_tile(e.bias.astype(np.int32), lanes), _BIAS_COMMENT)
        narrow = narrow_channels(e)
        values = FixedPointValues("fixed_point", e.zero_point, e.double_round, e.qmin, e.qmax, narrow=narrow)
        if narrow is not None:
            self._emit_narrow(narrow, view, constant)
            return values
        if e.float32:
            mantissa, exponent = numerics.float32_parts(e.float_multipliers)
            constant("mantissa", "int32_t", per_tile(mantissa.astype(np.int32), view.spec.requant_lanes),
                     "float32(multiplier * 2^-shift) = mantissa * 2^exponent (LiteRT's FULLY_CONNECTED rounds "
                     "f32(acc) times it half away from zero)")
            constant("exponent", "int32_t", per_tile(exponent.astype(np.int32), view.spec.requant_lanes), "its exponent")
            return dataclasses.replace(values, template="fixed_point_float")
        requant_lanes = view.spec.requant_lanes
        constant("multiplier", "int32_t", per_tile(e.multiplier.astype(np.int32), requant_lanes),
                 "TFLite's Q31 requantization multiplier, [output tile][lane]")
        constant("shift", "uint8_t", per_tile(e.shift.astype(np.uint8), requant_lanes),
                 "right shift of the 64-bit product (31 + TFLite's right shift), [output tile][lane]")
        return values

    @staticmethod
    def _emit_narrow(narrow: numerics.NarrowRequant, view, constant) -> None:
        lanes = view.spec.requant_lanes
        constant("multiplier", "uint32_t", per_tile(np.array(narrow.multipliers, np.uint32), lanes),
                 f"multiplier of ming::requantize_narrow (< 2^{numerics.NARROW_MULTIPLIER_BITS}), proved equal to "
                 f"TFLite's rule over every int32 accumulator (numerics.narrow_constants), [output tile][lane]")
        for role, values, comment in (
                ("rounding_negative", narrow.roundings_negative, "rounding added to the product of a negative "
                                                                 "accumulator"),
                ("rounding", narrow.roundings, "rounding added to the product of a non-negative accumulator")):
            reduced = np.array([numerics.narrow_sum_residue(r) for r in values], np.int64)
            word = "int32_t" if narrow.rounding_bits <= 32 else rom_word(reduced)
            constant(role, word, per_tile(reduced, lanes),
                     f"{comment} (modulo 2^{numerics.NARROW_SUM_BITS}, the DSP48E2's P register), "
                     f"[output tile][lane]")
