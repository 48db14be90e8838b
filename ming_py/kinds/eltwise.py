"""Two maps of one shape combined value by value: Add and Sub (`add`), Mul (`mul`), TFLite's MAXIMUM (`max`)
and MINIMUM (`min`). One token of each input and of the output per iteration."""

from __future__ import annotations

from ming_py import primitives
from ming_py.loops import Access

from .base import MUL_STAGES, REQUANT_STAGES, DataMovement, one_lane_count, pixel_positions, register


class Eltwise(DataMovement):
    template = "eltwise"
    pipeline_label = "tokens"

    def counters(self, spec, epilogue):
        return {}

    def lane_options(self, unroll, ins, outs, params, limit):
        return one_lane_count(ins, outs, limit)

    def positions(self, spec):
        return pixel_positions(spec, (Access(0, 1, t) for t in spec.tokens_in),
                               (Access(0, 1, t) for t in spec.tokens_out))


@register
class Add(Eltwise):
    name = "add"

    def pipeline_depth(self, terms):
        return 2 + REQUANT_STAGES


@register
class Mul(Eltwise):
    name = "mul"

    def pipeline_depth(self, terms):
        return 2 + MUL_STAGES


class Extremum(Eltwise):
    """The greater (`max`) or smaller (`min`) of two int8 values of one scale, per lane: an 8-bit signed compare
    and a 2:1 select (no requantization, no DSP), the calibrated primitive `primitive` (ming_py/primitives.json,
    benchmarks/calibration/<primitive>.v). LiteRT's reference MAXIMUM and MINIMUM compare the raw int8 values."""

    template = "extremum"
    primitive: str = None

    def pipeline_depth(self, terms):
        return 3  # the stream reads, the compare and select (two LUT levels), the write

    def logic_lut(self, spec):
        return spec.lanes_out[0] * primitives.lut(self.primitive)


@register
class Maximum(Extremum):
    name = "max"
    primitive = "max_int8"


@register
class Minimum(Extremum):
    name = "min"
    primitive = "min_int8"
