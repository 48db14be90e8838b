"""Channel concatenation of maps of one size: per pixel, the inputs' tokens one after the other, each
written on at once."""

from __future__ import annotations

from ming_py.loops import Access

from .base import DataMovement, one_lane_count, pixel_positions, register


@register
class Concat(DataMovement):
    name = "concat"
    template = "concat"
    pipeline_label = "tokens"

    def counters(self, spec, epilogue):
        return {"t": spec.tokens_out[0] - 1}

    def lane_options(self, unroll, ins, outs, params, limit):
        return one_lane_count(ins, outs, limit)

    def positions(self, spec):
        offsets = [0]
        for t in spec.tokens_in:
            offsets.append(offsets[-1] + t)
        return pixel_positions(spec, (Access(o, 1, t) for o, t in zip(offsets, spec.tokens_in)),
                               (Access(0, 1, t) for t in spec.tokens_out))
