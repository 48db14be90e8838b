"""Two maps of one shape combined value by value: Add and Sub (`add`), Mul (`mul`). One token of each
input and of the output per iteration."""

from __future__ import annotations

from ming_py.loops import Access

from .base import MUL_STAGES, REQUANT_STAGES, DataMovement, one_lane_count, pixel_positions, register


class Eltwise(DataMovement):
    template = "eltwise"
    pipeline_label = "tokens"

    def counters(self, spec, epilogue):
        return ()

    def lane_options(self, unroll, ins, outs, routes, limit):
        return one_lane_count(ins, outs, routes, limit)

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
