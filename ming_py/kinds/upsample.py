"""Nearest-neighbour upsampling by whole factors (Resize, Upsample): one output pixel per position, a token
per iteration; the first copy of an input pixel in the first copy of its row reads the pixel's tokens as
it writes them, its other copies come from the pixel and row buffers."""

from __future__ import annotations

from dataclasses import dataclass

from ming_py.array_layout import ArrayPlan, Dim, array, spread
from ming_py.loops import Access, Position

from .base import DataMovement, one_lane_count, register


def upsample_factors(spec) -> tuple[int, int]:
    """(rows, columns) an upsample process repeats each input pixel."""
    (_, h, w), (_, out_h, out_w) = spec.inputs[0], spec.outputs[0]
    return out_h // h, out_w // w


@dataclass(frozen=True)
class UpsampleValues:
    factors: tuple[int, int]  # `upsample_factors`


@register
class Upsample(DataMovement):
    name = "upsample"
    template = "upsample"
    pipeline_label = "tokens"

    def lane_options(self, unroll, ins, outs, params, limit):
        return one_lane_count(ins, outs, limit)

    def positions(self, spec):
        (_, h, w), (_, out_h, out_w) = spec.inputs[0], spec.outputs[0]
        rows, cols = out_h // h, out_w // w
        tokens = spec.tokens_out[0]
        arriving = Position(tokens, (Access(0, 1, tokens),), (Access(0, 1, tokens),))
        repeated = Position(tokens, (Access(),), (Access(0, 1, tokens),))
        for _ in range(h):
            for _ in range(w):
                yield arriving
                if cols > 1:
                    yield cols - 1, repeated
            if rows > 1:
                yield (rows - 1) * out_w, repeated

    def arrays(self, spec, epilogue, line_buffer_memory, constants):
        """The pixel buffer `[tokens][lanes]` (registers: the copies of a pixel in the row being read follow
        it by a pixel's tokens, too close to read back from RAM) and the row buffer `[W_in][tokens][lanes]`
        (a token is one word, written once in the row's first copy and read once in each later one)."""
        (_, _, w), tokens, lanes = spec.inputs[0], spec.tokens_in[0], spec.lanes_in[0]
        rows, cols = upsample_factors(spec)
        arrays = {}
        if cols > 1:
            arrays["pixel"] = ArrayPlan("pixel", 8, (Dim(tokens, "complete", factor=tokens),
                                                     spread(lanes, lanes, "reshape")), rom=False, memory="register")
        if rows > 1:
            arrays["row_buffer"] = array("row_buffer", 8, (Dim(w), Dim(tokens), spread(lanes, lanes, "reshape")),
                                         rom=False)
        return arrays | constants

    def view_values(self, spec, process, lanes_in, lanes_out):
        return UpsampleValues(upsample_factors(spec))

    def counters(self, spec, epilogue):
        rows, cols = upsample_factors(spec)
        return {"row_copy": rows - 1, "col": spec.inputs[0][2] - 1, "col_copy": cols - 1, "t": spec.tokens_in[0] - 1}

    def describe(self, process, ins, outs, shapes):
        factors = f"{outs[0].height // ins[0].height}x{outs[0].width // ins[0].width}"
        return f"{process.name} ({process.source}): nearest upsample {factors}: {shapes}"
