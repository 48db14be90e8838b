"""A channel permutation (a ShuffleNet channel shuffle, a Transpose of channels): a pixel's tokens are read
into one of two pixel registers while the previous pixel's permuted tokens are written from the other;
one trailing position writes the last pixel."""

from __future__ import annotations

from dataclasses import dataclass

from ming_py import primitives
from ming_py.dataflow import KindParams
from ming_py.array_layout import Dim, array, spread
from ming_py.loops import Access, Position

from .base import DataMovement, one_lane_count, register


@dataclass(frozen=True)
class PermuteOrder(KindParams):
    """Output channel c of a permute is input channel order[c]."""

    order: tuple[int, ...]

    def __post_init__(self):
        if sorted(self.order) != list(range(len(self.order))):
            raise ValueError(f"permute order {self.order!r}: a permutation of 0 .. {len(self.order) - 1} expected")

    def to_json(self) -> dict:
        """Nothing: report.json does not carry the order, which the loop does not depend on."""
        return {}

    @classmethod
    def from_json(cls, node: dict) -> None:
        """None: report.json does not carry the order (`to_json`)."""
        return None


@dataclass(frozen=True)
class PermuteValues:
    """Where each output channel arrives: (token, lane)."""

    sources: tuple[tuple[int, int], ...]


@register
class Permute(DataMovement):
    name = "permute"
    template = "permute"
    pipeline_label = "tokens"
    params_type = PermuteOrder

    def lane_options(self, unroll, ins, outs, params, limit):
        return one_lane_count(ins, outs, limit)

    def positions(self, spec):
        _, h, w = spec.inputs[0]
        tokens_in, tokens_out = spec.tokens_in[0], spec.tokens_out[0]
        reads, writes = Access(0, 1, tokens_in), Access(0, 1, tokens_out)
        yield Position(tokens_in, (reads,), (Access(),))
        if h * w > 1:
            yield h * w - 1, Position(max(tokens_in, tokens_out), (reads,), (writes,))
        yield Position(tokens_out, (Access(),), (writes,))

    def arrays(self, spec, epilogue, line_buffer_memory, constants):
        """The two pixels `[2][tokens][lanes]` are registers, each written from one input lane."""
        tokens, lanes = spec.tokens_out[0], spec.lanes_out[0]
        pixel = array("pixel", 8, (Dim(2, "complete", factor=2), spread(tokens, tokens, "partition"),
                                   spread(lanes, lanes, "partition")), rom=False)
        return {"pixel": pixel} | constants

    def logic_lut(self, spec):
        """Its output multiplexers: each of its L_out int8 outputs selects among the 2 x T_out register places
        (two pixels, T_out tokens) its channel comes from."""
        return spec.lanes_out[0] * primitives.mux_lut(2 * spec.tokens_out[0])

    def counters(self, spec, epilogue):
        channels, h, w = spec.inputs[0]
        return {"token": channels // spec.lanes_in[0] - 1, "pixel_count": h * w - 1, "half": 1}

    def view_values(self, spec, process, lanes_in, lanes_out):
        return PermuteValues(tuple(divmod(c, lanes_in[0]) for c in process.params.order))
