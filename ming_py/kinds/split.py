"""A stream copied to several consumers (`line_buffers.streaming` inserts one where a map has several),
each output carrying all channels or a range of them (`Process.routes`, a Split or a grouped conv's
groups): one token of the input and of every output per iteration."""

from __future__ import annotations

from ming_py.loops import Access

from .base import DataMovement, one_lane_count, pixel_positions, register


@register
class Split(DataMovement):
    name = "split"
    template = "split"
    pipeline_label = "tokens"

    def lane_options(self, unroll, ins, outs, routes, limit):
        return one_lane_count(ins, outs, routes, limit)

    def positions(self, spec):
        firsts = [first // lanes for (first, _), lanes in zip(spec.routes, spec.lanes_out)] \
            or [0] * len(spec.tokens_out)
        return pixel_positions(spec, (Access(0, 1, t) for t in spec.tokens_in),
                               (Access(first, 1, t) for first, t in zip(firsts, spec.tokens_out)))

    def counters(self, spec, epilogue):
        return {"t": spec.tokens_in[0] - 1} if spec.routes else {}  # the token's place in its pixel, for the ranges

    def view_values(self, spec, process, lanes_in, lanes_out):
        """Per output, its first token and tokens of a pixel (none: every output carries every channel)."""
        if not process.routes:
            return {}
        return {"routes": [(first // lanes, count // lanes) for (first, count), lanes in zip(process.routes, lanes_out)]}
