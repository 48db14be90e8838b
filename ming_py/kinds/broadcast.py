"""A map and a per-channel vector (or a scalar) combined at every pixel: Add, Sub or Mul where one operand
is broadcast (squeeze-and-excitation's scale, a bias). The vector's tokens go into an array once per
image; then one map token in and one out per iteration, the map token t of every pixel combined with
the vector's token t."""

from __future__ import annotations

from ming_py.array_layout import Dim, array, spread
from ming_py.loops import Access, Position

from ming_py.dataflow import divisors

from .base import MUL_STAGES, REQUANT_STAGES, DataMovement, one_lane_count, register


@register
class Broadcast(DataMovement):
    name = "broadcast"
    template = "broadcast"
    pipeline_label = "tokens"

    def counters(self, spec, epilogue):
        return {"t": spec.tokens_out[0] - 1}

    def lane_options(self, unroll, ins, outs, params, limit):
        if min(c.channels for c in ins) == 1:  # a scalar: one token of one lane
            for lanes in divisors(outs[0].channels):
                if lanes <= limit:
                    yield tuple(1 if c.channels == 1 else lanes for c in ins), (lanes,)
        else:
            yield from one_lane_count(ins, outs, limit)

    def lanes_match(self, spec):
        v = spec.vector_input
        return spec.lanes_in[1 - v] == spec.lanes_out[0] and \
            spec.lanes_in[v] == (1 if spec.inputs[v][0] == 1 else spec.lanes_out[0])

    def pipeline_depth(self, terms):
        return 3 + max(REQUANT_STAGES, MUL_STAGES)  # the vector's register read, then the deeper datapath

    def positions(self, spec):
        v = spec.vector_input
        _, h, w = spec.outputs[0]
        reads = [Access(), Access()]
        reads[v] = Access(0, 1, spec.tokens_in[v])
        yield Position(spec.tokens_in[v], tuple(reads), (Access(),))
        reads = [Access(), Access()]
        reads[1 - v] = Access(0, 1, spec.tokens_in[1 - v])
        yield h * w, Position(spec.tokens_out[0], tuple(reads), (Access(0, 1, spec.tokens_out[0]),))

    def arrays(self, spec, epilogue, line_buffer_memory, constants):
        """The per-channel vector, written once per image and read at every pixel."""
        v = spec.vector_input
        lanes = spec.lanes_in[v]
        vector = array("vector", 8, (Dim(spec.tokens_in[v]), spread(lanes, lanes, "reshape")), rom=False)
        return {"vector": vector} | constants
