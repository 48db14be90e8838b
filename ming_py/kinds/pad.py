"""Padding of rows and columns with a constant (a Pad no window absorbs): one padded position per output
pixel, a token per iteration; an input pixel's tokens are read as they are written, a border pixel's are
the pad value. Its `Window` is a 1x1 window over the padded map."""

from __future__ import annotations

from ming_py.loops import Access, Position

from .base import DataMovement, one_lane_count, register


@register
class Pad(DataMovement):
    name = "pad"
    needs_window = True
    template = "pad"
    pipeline_label = "tokens"

    def lane_options(self, unroll, ins, outs, params, limit):
        return one_lane_count(ins, outs, limit)

    def positions(self, spec):
        w, tokens = spec.window, spec.tokens_out[0]
        inside = Position(tokens, (Access(0, 1, tokens),), (Access(0, 1, tokens),))
        border = Position(tokens, (Access(),), (Access(0, 1, tokens),))
        top, left, bottom, right = w.pads
        if top:
            yield top * w.padded_width, border
        for _ in range(w.in_height):
            if left:
                yield left, border
            yield w.in_width, inside
            if right:
                yield right, border
        if bottom:
            yield bottom * w.padded_width, border

    def counters(self, spec, epilogue):
        return {"row": spec.window.padded_height - 1, "col": spec.window.padded_width - 1, "t": spec.tokens_in[0] - 1}

    def describe(self, process, ins, outs, shapes):
        w = process.window
        return f"{process.name} ({process.source}): pad {'/'.join(map(str, w.pads))} (t/l/b/r) with " \
               f"{w.pad_value}: {shapes}"
