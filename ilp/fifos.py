"""The FIFO memory the search accounts for. The FIFOs of the one-lane schedule (`line_buffers.fifo.reservation_plan`)
are set aside before it chooses (`solve`'s `reserved`); a FIFO carried in more lanes holds the same values in fewer,
wider words, and a wide FIFO takes more (a LUT per bit of its width in shift registers, a BRAM18K per 36 bits however
shallow it is: `array_layout.fifo_storage`). That part depends on the lanes a candidate chooses, so it is charged to
the candidate: each process pays, for every channel whose lanes it sets (its outputs, and the accelerator input for
the process reading it), what the FIFO takes in its lanes beyond the one-lane FIFO's memory.

The sizing gives every FIFO two pixels, then deepens them while the simulation gains and the budget allows
(`ilp.explore.decoupling_pixels`); a FIFO may go to shift registers at two pixels and to BRAM at sixteen. So where
the search allows for several depths (`pixels`), it sets aside and charges per FIFO the most of each resource over
them: the design fits with its FIFOs at any of those depths."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ming_py.array_layout import fifo_storage
from ming_py.line_buffers.fifo import FifoPlan

from .cost import Choice, Cost


@dataclass(frozen=True)
class FifoCharge:
    """The FIFOs of `plan` (a one-lane plan) holding at least each of `pixels` pixels, charged by their lanes."""

    plan: FifoPlan
    pixels: tuple[int, ...]
    _known: dict = field(default_factory=dict, compare=False, repr=False)

    def reserved(self) -> dict[str, int]:
        """The BRAM18K and LUTs set aside for the one-lane FIFOs: per FIFO the most of each over `pixels`."""
        memory = [self._one_lane(channel) for channel in self.plan.graph.channels]
        return {"bram18k": sum(m[0] for m in memory), "lut": sum(m[1] for m in memory)}

    def of(self, name: str, choice: Choice) -> dict[str, int]:
        """The BRAM18K and LUTs charged to process `name`'s candidate `choice`."""
        outputs, inputs = self._channels(name)
        charged = [self._beyond_one_lane(c, choice.lanes_out[i]) for i, c in outputs] + \
            [self._beyond_one_lane(c, choice.lanes_in[i]) for i, c in inputs]
        return {"bram18k": sum(c[0] for c in charged), "lut": sum(c[1] for c in charged)}

    def total(self, choices: dict[str, Choice]) -> dict[str, int]:
        """What a design (`choices`, by process) is charged in all."""
        charges = [self.of(name, choice) for name, choice in choices.items()]
        return {r: sum(c[r] for c in charges) for r in ("bram18k", "lut")}

    def _channels(self, name: str) -> tuple[list, list]:
        """(slot, channel) of the outputs of process `name`, and of its inputs no process makes."""
        if name not in self._known:
            graph = self.plan.graph
            made = {p.name for p in graph.processes}
            process = graph.process(name)
            outside = [(i, c) for i, c in enumerate(process.inputs) if graph.channels[c].producer not in made]
            self._known[name] = (list(enumerate(process.outputs)), outside)
        return self._known[name]

    def _beyond_one_lane(self, channel: str, lanes: int) -> tuple[int, int]:
        """What the FIFO of `channel` takes in `lanes` lanes beyond what it takes in one (never less), per resource
        the most over `pixels`."""
        key = (channel, lanes)
        if key not in self._known:
            wide = [fifo_storage(self.plan.depth_in_lanes(channel, lanes, p), 8 * lanes) for p in self.pixels]
            one = self._one_lane(channel)
            self._known[key] = (max(0, max(w.bram18k for w in wide) - one[0]),
                                max(0, max(w.lut for w in wide) - one[1]))
        return self._known[key]

    def _one_lane(self, channel: str) -> tuple[int, int]:
        one = [fifo_storage(self.plan.depth_in_lanes(channel, 1, p), 8) for p in self.pixels]
        return max(m.bram18k for m in one), max(m.lut for m in one)


def charged(options: dict[str, list[Choice]], costs: dict[str, list[Cost]],
            fifos: FifoCharge | None) -> dict[str, list[Cost]]:
    """Every candidate's cost with its FIFO charge."""
    if fifos is None:
        return costs
    return {name: [_plus(cost, fifos.of(name, choice), 1) for choice, cost in zip(options[name], costs[name])]
            for name in costs}


def uncharged(name: str, choice: Choice, cost: Cost, fifos: FifoCharge | None) -> Cost:
    """A chosen candidate's own cost, its FIFO charge taken off (the sized FIFOs are counted apart)."""
    return cost if fifos is None else _plus(cost, fifos.of(name, choice), -1)


def _plus(cost: Cost, charge: dict[str, int], sign: int) -> Cost:
    if not any(charge.values()):
        return cost
    return replace(cost, **{r: getattr(cost, r) + sign * v for r, v in charge.items()})
