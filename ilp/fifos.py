"""The FIFO memory the search accounts for. The FIFOs of the one-lane schedule (`line_buffers.fifo.reservation_plan`)
are set aside before it chooses (`solve`'s `reserved`); a FIFO carried in more lanes holds the same values in fewer,
wider words, and a wide FIFO takes more (a LUT per bit of its width in shift registers, a BRAM18K per 36 bits however
shallow it is: `array_layout.fifo_storage`). That part depends on the lanes a candidate chooses, so it is charged to
the candidate: each process pays, for every channel whose lanes it sets (its outputs, and the accelerator input for
the process reading it), what the FIFO takes in its lanes beyond the one-lane FIFO's memory."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ming_py.array_layout import fifo_storage
from ming_py.dataflow import StreamGraph
from ming_py.line_buffers.fifo import FifoPlan

from .cost import Choice, Cost


@dataclass(frozen=True)
class FifoCharge:
    """The FIFOs of `plan` (a one-lane plan) holding at least `least_pixels` pixels, charged by their lanes."""

    plan: FifoPlan
    least_pixels: int
    _known: dict = field(default_factory=dict, compare=False, repr=False)

    def of(self, graph: StreamGraph, name: str, choice: Choice) -> dict[str, int]:
        """The BRAM18K and LUTs charged to process `name`'s candidate `choice`."""
        outputs, inputs = self._channels(graph, name)
        charged = [self._beyond_one_lane(c, choice.lanes_out[i]) for i, c in outputs] + \
            [self._beyond_one_lane(c, choice.lanes_in[i]) for i, c in inputs]
        return {"bram18k": sum(c[0] for c in charged), "lut": sum(c[1] for c in charged)}

    def _channels(self, graph: StreamGraph, name: str) -> tuple[list, list]:
        """(slot, channel) of the outputs of process `name`, and of its inputs no process makes."""
        if name not in self._known:
            made = {p.name for p in graph.processes}
            process = graph.process(name)
            self._known[name] = (list(enumerate(process.outputs)),
                                 [(i, c) for i, c in enumerate(process.inputs) if graph.channels[c].producer not in made])
        return self._known[name]

    def _beyond_one_lane(self, channel: str, lanes: int) -> tuple[int, int]:
        """What the FIFO of `channel` takes in `lanes` lanes beyond what it takes in one (never less)."""
        key = (channel, lanes)
        if key not in self._known:
            one = fifo_storage(self.plan.depth_in_lanes(channel, 1, self.least_pixels), 8)
            wide = fifo_storage(self.plan.depth_in_lanes(channel, lanes, self.least_pixels), 8 * lanes)
            self._known[key] = (max(0, wide.bram18k - one.bram18k), max(0, wide.lut - one.lut))
        return self._known[key]


def charged(graph: StreamGraph, options: dict[str, list[Choice]], costs: dict[str, list[Cost]],
            fifos: FifoCharge | None) -> dict[str, list[Cost]]:
    """Every candidate's cost with its FIFO charge."""
    if fifos is None:
        return costs
    return {name: [_plus(cost, fifos.of(graph, name, choice), 1) for choice, cost in zip(options[name], costs[name])]
            for name in costs}


def uncharged(graph: StreamGraph, name: str, choice: Choice, cost: Cost, fifos: FifoCharge | None) -> Cost:
    """A chosen candidate's own cost, its FIFO charge taken off (the sized FIFOs are counted apart)."""
    return cost if fifos is None else _plus(cost, fifos.of(graph, name, choice), -1)


def _plus(cost: Cost, charge: dict[str, int], sign: int) -> Cost:
    if not any(charge.values()):
        return cost
    return replace(cost, **{r: getattr(cost, r) + sign * v for r, v in charge.items()})
