"""A stream copied to several consumers (`line_buffers.streaming` inserts one where a map has several),
each output carrying all channels or a range of them (`SplitRoutes`, a Split or a grouped conv's
groups): one token of the input and of every output per iteration."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from ming_py.dataflow import KindParams
from ming_py.loops import Access

from .base import DataMovement, one_lane_count, pixel_positions, register


@dataclass(frozen=True)
class SplitRoutes(KindParams):
    """The input channels each output of a split carries: per output, (first channel, channels). A split whose
    outputs all carry every channel has none (its `Process.params` is None)."""

    routes: tuple[tuple[int, int], ...]

    def __post_init__(self):
        if not self.routes:
            raise ValueError("split routes: none given (a split whose outputs carry every channel has no routes)")
        for index, route in enumerate(self.routes):
            if len(route) != 2 or not all(isinstance(v, numbers.Integral) for v in route) \
                    or route[0] < 0 or route[1] < 1:
                raise ValueError(f"split route {index}: (first channel >= 0, channels >= 1) expected, found {route!r}")

    @property
    def firsts(self) -> tuple[int, ...]:
        return tuple(first for first, _ in self.routes)

    def to_json(self) -> dict:
        return {"routes": [list(route) for route in self.routes]}

    @classmethod
    def from_json(cls, node: dict) -> SplitRoutes | None:
        routes = node.get("routes")
        return cls(tuple(tuple(route) for route in routes)) if routes else None


@dataclass(frozen=True)
class SplitValues:
    """Per output, its first token and tokens of a pixel (empty: every output carries every channel)."""

    routes: tuple[tuple[int, int], ...]


@register
class Split(DataMovement):
    name = "split"
    template = "split"
    pipeline_label = "tokens"
    params_type = SplitRoutes

    def lane_options(self, unroll, ins, outs, params, limit):
        return one_lane_count(ins, outs, limit, params.firsts if params else ())

    def lanes_problem(self, spec):
        if spec.params and any(first % lanes for first, lanes in zip(spec.params.firsts, spec.lanes_out)):
            return (f"split: lanes {spec.lanes_out} do not divide the first channels of its outputs "
                    f"{list(spec.params.firsts)}")
        return ""

    def positions(self, spec):
        firsts = [first // lanes for first, lanes in zip(spec.params.firsts, spec.lanes_out)] if spec.params \
            else [0] * len(spec.tokens_out)
        return pixel_positions(spec, (Access(0, 1, t) for t in spec.tokens_in),
                               (Access(first, 1, t) for first, t in zip(firsts, spec.tokens_out)))

    def counters(self, spec, epilogue):
        return {"t": spec.tokens_in[0] - 1} if spec.params else {}  # the token's place in its pixel, for the ranges

    def view_values(self, spec, process, lanes_in, lanes_out):
        if not process.params:
            return SplitValues(())
        return SplitValues(tuple((first // lanes, count // lanes)
                                 for (first, count), lanes in zip(process.params.routes, lanes_out)))
