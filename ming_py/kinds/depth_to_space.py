"""Depth to space by a block b (TFLite's DEPTH_TO_SPACE, a transposed convolution's phases): input pixel (y, x)
carries b*b*C channels in the order (dy, dx, c), and its block (dy, dx) is output pixel (y*b + dy, x*b + dx).

One token per iteration, in two phases per input row. While the row arrives, each of its pixels' b*b*C / lanes
tokens is read in turn: the first b*C / lanes (dy = 0) are output pixels (y*b, x*b + dx) and are written in the
iteration that reads them; the rest (dy >= 1) go to the row buffer. Then the b - 1 output rows y*b + dy >= 1
are written from the row buffer while nothing is read. The row buffer holds W * (b - 1) * b * C int8 values,
`[W][b - 1][b][tokens][lanes]`, a word per token, written once and read once.

Iterations per image: H * W * b * (2b - 1) * C / lanes (b*b*C / lanes per arriving pixel, b*C / lanes per
output pixel of the b - 1 buffered rows)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ming_py.array_layout import Dim, array, spread
from ming_py.loops import Access, Position

from .base import DataMovement, one_lane_count, register


def depth_to_space_block(spec) -> int:
    """The block b of a depth-to-space process: its output is b times as high as its input."""
    (_, h, _), (_, out_h, _) = spec.inputs[0], spec.outputs[0]
    return out_h // h


def write_read_distance(spec) -> int:
    """The fewest iterations between a token's store in the row buffer and its read: the last pixel's first
    buffered tokens (dy = 1), read in the first buffered output row b*T (W + b - 2) iterations later (b*T the
    tokens of an output pixel's block of b, T = C / lanes)."""
    block, width = depth_to_space_block(spec), spec.inputs[0][2]
    return block * spec.tokens_out[0] * (width + block - 2)


@dataclass(frozen=True)
class DepthToSpaceValues:
    block: int
    distance: int  # `write_read_distance`


@register
class DepthToSpace(DataMovement):
    name = "depth_to_space"
    template = "depth_to_space"
    pipeline_label = "tokens"

    def lane_options(self, unroll, ins, outs, params, limit):
        return one_lane_count(ins, outs, limit)  # lanes divide C, hence b*b*C: a token is one block's

    def positions(self, spec):
        (_, h, w) = spec.inputs[0]
        block = depth_to_space_block(spec)
        tokens = spec.tokens_out[0]  # of an output pixel; an input pixel has block * block of them
        arriving = block * block * tokens
        # a pixel of the arriving row: every token read, the first block * tokens (dy = 0) written as read
        pixel = Position(arriving, (Access(0, 1, arriving),), (Access(0, 1, block * tokens),))
        buffered = Position(tokens, (Access(),), (Access(0, 1, tokens),))  # an output pixel from the row buffer
        for _ in range(h):
            yield w, pixel
            if block > 1:
                yield (block - 1) * block * w, buffered

    def arrays(self, spec, epilogue, line_buffer_memory, constants):
        """The row buffer `[W][b - 1][b][tokens][lanes]` (the blocks dy >= 1 of the arriving row, a token per
        word): one write per iteration while the row arrives, one read per iteration while its rows dy >= 1 are
        written, never both; LUTRAM or BRAM by its size (`ming_py.array_layout.array`)."""
        block = depth_to_space_block(spec)
        if block == 1:
            return dict(constants)
        (_, _, w), tokens, lanes = spec.inputs[0], spec.tokens_out[0], spec.lanes_in[0]
        row_buffer = array("row_buffer", 8, (Dim(w), Dim(block - 1), Dim(block), Dim(tokens),
                                             spread(lanes, lanes, "reshape")), rom=False)
        return {"row_buffer": row_buffer} | constants

    def view_values(self, spec, process, lanes_in, lanes_out):
        return DepthToSpaceValues(depth_to_space_block(spec), write_read_distance(spec))

    def counters(self, spec, epilogue):
        """The token in its output pixel, the pixel in its block (dx), the buffered row (dy - 1, where there
        are several) and the input pixel in its row; none for a block of 1 (a copy)."""
        block = depth_to_space_block(spec)
        if block == 1:
            return {}
        slot = {"slot": block - 2} if block > 2 else {}
        return {"t": spec.tokens_out[0] - 1, "dx": block - 1, **slot, "col": spec.inputs[0][2] - 1}

    def describe(self, process, ins, outs, shapes):
        block = math.isqrt(ins[0].channels // outs[0].channels)
        return f"{process.name} ({process.source}): depth to space, block {block}: {shapes}"
