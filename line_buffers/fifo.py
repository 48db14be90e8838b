"""FIFO depths that keep reconverging dataflow graphs from deadlocking (MING §IV-C).

Where a `split` feeds branches that meet again (a residual Add, a Concat), the branch with the line
buffers delivers a token to the join only after the split has produced many; all that time the split
keeps writing the short branch, whose FIFO must hold those tokens or the split blocks, the long branch
starves and the join waits forever. How many it must hold is read off the loops the processes run, the
loop description (`ming_py.process_spec.loop_of`) the emitted C++, the cost model and `ming simulate` share:
in which iteration a loop reads every input token and writes every output token. From it, for every
token a process writes, the input tokens it has read by then; composed along a branch, the tokens of
the split's output that a channel needs before it can carry n tokens (`Dependences.need`). For every
output token of a join, the split must have run the iterations its longest branch needs, and meanwhile
wrote to each shorter branch's head all the tokens of those iterations, of which that branch has taken
only what its own part of the join's token needs: the most that ever waits, over the whole image, is
the head's depth (StreamTensor §5.3's token model, evaluated at every token rather than the first,
since behind 1x1 convs, strides and upsamples the lag grows along rows).

The same counts size the FIFOs of a model's outputs: the accelerator sends an image's outputs one after
the other on its one output stream, so each output's FIFO holds what its producer makes while the
outputs before it are sent (`record_tokens`, in the order `record_order`). Every other FIFO holds at
least two pixels: a process writes a pixel's tokens in a burst after computing it and its consumer
reads them in a burst, so with less the two serialise. `ming build` then deepens all FIFOs (4, 8, 16
pixels) while the cycle-level simulation says it pays and the budget allows (a strided consumer reads in
bursts of rows: tiny_cnn at 5% of the KV260's DSPs runs 18% faster with 8 pixels than with 2); `--fifo
minimal` shrinks every depth to the least with which, in one simulation, no write waits (the simulated
latency is kept exactly). Whatever the depths, `ming build` simulates the design and emits none that
deadlocks.

Before the ILP has chosen lanes, the same model runs on the one-lane schedule (`unit_specs`: a token is
one value): the memory every design's FIFOs take at least, which the ILP sets aside, and what a FIFO carried in
more lanes takes (`FifoPlan.depth_in_lanes`), which it charges to the candidates choosing them (`ilp.fifos`).
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from ming_py.dataflow import Channel, StreamGraph
from ming_py.process_spec import ProcessSpec, Loop, depth_bound, process_spec, loop_of

MIN_DEPTH = 2
DEFAULT_PIXELS = 2  # pixels every FIFO holds at least, so bursts overlap
DEEPEST_PIXELS = 16  # the most pixels the build's sizing gives every FIFO (`ilp.explore.decoupling_pixels`)
SLACK_PIXELS = 1  # the pixel a join holds while waiting for its other input


def unit_specs(graph: StreamGraph) -> dict[str, ProcessSpec]:
    """Every process on the one-lane schedule (no unrolling; always valid): a token is one value."""
    return {p.name: process_spec(graph, p, (), (1,) * len(p.inputs), (1,) * len(p.outputs)) for p in graph.processes}


def token_iterations(loop: Loop, side: str, index: int) -> np.ndarray:
    """The iteration in which `loop` moves each token of input or output `index` (`side` "reads" or
    "writes"), in token order (`Loop.token_iterations` for every token at once)."""
    parts, done = [], 0
    for repeat, position in loop.runs:
        access = getattr(position, side)[index]
        if access.count:
            starts = done + position.iterations * np.arange(repeat, dtype=np.int64)
            parts.append((starts[:, None] + (access.first + access.stride * np.arange(access.count))).ravel())
        done += repeat * position.iterations
    iterations = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return iterations + loop.write_delay if side == "writes" else iterations


class Dependences:
    """Token counts of a stream graph under a schedule (`specs`, one per process)."""

    def __init__(self, graph: StreamGraph, specs: dict[str, ProcessSpec]):
        self.graph = graph
        self.specs = specs
        self._producers = {c: p for p in graph.processes for c in p.outputs}
        self._need: dict[tuple[str, str], np.ndarray | None] = {}

    @cached_property
    def _loops(self) -> dict[str, Loop]:
        return {name: loop_of(spec) for name, spec in self.specs.items()}

    def writes(self, process: str, output: int) -> np.ndarray:
        return token_iterations(self._loops[process], "writes", output)

    def read_before_write(self, process: str, output: int, input_: int) -> np.ndarray:
        """Per n = 0..tokens of output `output`, the tokens of input `input_` the process has read once it
        has written n: those read in or before the iteration of the n-th write (an iteration takes its
        reads before its writes)."""
        reads = token_iterations(self._loops[process], "reads", input_)
        counts = np.searchsorted(reads, self.writes(process, output), side="right")
        return np.concatenate(([0], counts))

    def need(self, source: str, channel: str) -> np.ndarray | None:
        """Per n = 0..tokens of `channel`, the tokens of channel `source` that must have been carried before
        `channel` can carry n; None if `source` does not feed it."""
        key = (source, channel)
        if key not in self._need:
            self._need[key] = self._compose(source, channel)
        return self._need[key]

    def tokens_per_pixel(self, channel: str) -> int:
        return self.graph.channels[channel].channels // self.lanes(channel)

    def tokens(self, channel: str) -> int:
        """Tokens of one image."""
        return self.tokens_per_pixel(channel) * self.graph.channels[channel].pixels

    def lanes(self, channel: str) -> int:
        c = self.graph.channels[channel]
        for name, slots, side in ((c.producer, "outputs", "lanes_out"), (c.consumer, "inputs", "lanes_in")):
            if name in self.specs:
                return getattr(self.specs[name], side)[getattr(self.graph.process(name), slots).index(channel)]
        raise ValueError(f"channel {channel} joins no process")

    def _compose(self, source: str, channel: str) -> np.ndarray | None:
        if channel == source:
            return np.arange(self.tokens(channel) + 1)
        producer = self._producers.get(channel)
        if producer is None:  # the accelerator input
            return None
        output = producer.outputs.index(channel)
        needs = [upstream[self.read_before_write(producer.name, output, slot)]
                 for slot, c in enumerate(producer.inputs) if (upstream := self.need(source, c)) is not None]
        return np.maximum.reduce(needs) if needs else None


def waiting_tokens(deps: Dependences) -> dict[tuple[str, str], np.ndarray]:
    """Per head channel of a split and join of its branches, the tokens waiting in the head when the join
    has written each of its output tokens, at the least the branch must have taken by then (on the longest
    branch: none)."""
    graph, waiting = deps.graph, {}
    for split, join, heads in _diverging(graph):
        writes = {h: deps.writes(split.name, split.outputs.index(h)) for hs in heads.values() for h in hs}
        taken, needed_iterations = {}, []
        for slot, hs in heads.items():
            read = deps.read_before_write(join.name, 0, slot)[1:]
            for h in hs:
                taken[h] = deps.need(h, join.inputs[slot])[read]
                needed_iterations.append(np.concatenate(([0], writes[h] + 1))[taken[h]])
        longest = np.maximum.reduce(needed_iterations)  # the split's iterations each join token waits for
        for h, tokens in taken.items():
            written = np.searchsorted(writes[h], longest, side="left")  # in the iterations before
            waiting[h, join.name] = written - tokens
    return waiting


def skip_tokens(deps: Dependences) -> dict[str, int]:
    """Per head channel of a split, the most tokens that wait in it at once, over the whole image."""
    most: dict[str, int] = {}
    for (head, _), waiting in waiting_tokens(deps).items():
        most[head] = max(most.get(head, 0), int(waiting.max()))
    return most


def record_order(graph: StreamGraph) -> list[int]:
    """The order in which an image's outputs leave the accelerator (indexes into `graph.outputs`): by when
    each is complete, the input tokens its last token needs, then the deepest pipeline to it (both
    whatever the schedule), then the model's order. The output writer sends all of an output before the
    next, so every later output's FIFO holds what its producer makes meanwhile (`record_tokens`); the
    order in which they finish keeps that least."""
    deps = Dependences(graph, unit_specs(graph))
    source = graph.channels[graph.input.channel].producer
    depths = {p.name: depth_bound(p.kind) for p in graph.processes}

    def completion(index: int) -> tuple[int, int, int]:
        channel = graph.outputs[index].channel
        return (int(deps.need(graph.input.channel, channel)[-1]),
                split_latency(graph, graph.channels[channel], source, depths), index)

    return sorted(range(len(graph.outputs)), key=completion)


def record_tokens(deps: Dependences) -> dict[str, int]:
    """Per output channel, the tokens its FIFO must hold while the output writer sends the outputs before
    it in the record: all its producer makes from the input tokens those outputs need, plus the slack, at
    most the whole output. With less, the producer would stop, and with it the processes it shares with
    the output being sent (a split feeding both) before that output is complete (only outputs that need
    more than nothing)."""
    graph, held, sent = deps.graph, {}, 0  # sent: input tokens the outputs sent so far need
    for port in graph.outputs:
        need = deps.need(graph.input.channel, port.channel)
        made = int(np.searchsorted(need, sent, side="right")) - 1 if sent else 0
        if made:
            held[port.channel] = min(made + SLACK_PIXELS * deps.tokens_per_pixel(port.channel), len(need) - 1)
        sent = max(sent, int(need[-1]))
    return held


def required_tokens(deps: Dependences) -> dict[str, int]:
    """Per channel, the tokens its FIFO must hold for the branches' lags and for the outputs sent before
    its own (only channels that need some)."""
    skips = {h: min(n + SLACK_PIXELS * deps.tokens_per_pixel(h), deps.tokens(h)) for h, n in skip_tokens(deps).items()
             if n > 0}
    record = record_tokens(deps)
    return {name: max(skips.get(name, 0), record.get(name, 0)) for name in sorted(skips.keys() | record.keys())}


def depths_in_pixels(graph: StreamGraph) -> dict[str, int]:
    """`required_tokens` in whole pixels, whatever the schedule (on the one-lane schedule)."""
    deps = Dependences(graph, unit_specs(graph))
    return {name: math.ceil(n / graph.channels[name].channels) for name, n in required_tokens(deps).items()}


def latency_tokens(graph: StreamGraph, latency: dict[str, int]) -> dict[str, int]:
    """Per channel, the tokens its FIFO must hold besides `required_tokens` for the pipeline depths
    (`latency`, cycles per process) on the long branch: for so many cycles after taking a token a
    process has not written what it makes of it, while the split goes on writing the short branch, at most
    one token a cycle."""
    extra: dict[str, int] = {}
    for split, join, heads in _diverging(graph):
        lags = {slot: split_latency(graph, graph.channels[join.inputs[slot]], split.name, latency) for slot in heads}
        longest = max(lags.values())
        for slot, lag in lags.items():
            for head in heads[slot]:
                if longest > lag:
                    extra[head] = max(extra.get(head, 0), longest - lag)
    return extra


def split_latency(graph: StreamGraph, channel: Channel, split: str, latency: dict[str, int],
                  _known: dict[str, int | None] | None = None) -> int | None:
    """Pipeline cycles from `split` to `channel` along the deepest path; None if `split` does not feed it.
    Each channel is visited once (`_known`): following every path would take 2**n steps behind n
    residual blocks."""
    known = {} if _known is None else _known
    if channel.name in known:
        return known[channel.name]
    if channel.producer == split:
        known[channel.name] = 0
        return 0
    producer = next((p for p in graph.processes if p.name == channel.producer), None)
    if producer is None:
        known[channel.name] = None
        return None
    upstream = [split_latency(graph, graph.channels[c], split, latency, known) for c in producer.inputs]
    upstream = [n for n in upstream if n is not None]
    known[channel.name] = latency[producer.name] + max(upstream) if upstream else None
    return known[channel.name]


def _diverging(graph: StreamGraph):
    """(split, join, {join input slot: the split's heads on its paths}) wherever at least two of a join's
    inputs are fed by a split through disjoint heads (where they share one, a nearer split separates
    them)."""
    processes = {p.name: p for p in graph.processes}
    for split in (p for p in graph.processes if p.kind == "split"):
        known: dict[str, frozenset[str]] = {}  # per channel, once per split
        for join in (p for p in graph.processes if len(p.inputs) > 1):
            heads = {slot: _branch_heads(graph, split.name, c, processes, known) for slot, c in enumerate(join.inputs)}
            heads = {slot: h for slot, h in heads.items() if h}
            sets = list(heads.values())
            if len(heads) < 2 or any(a & b for i, a in enumerate(sets) for b in sets[i + 1:]):
                continue
            yield split, join, {slot: sorted(h) for slot, h in heads.items()}


def _branch_heads(graph: StreamGraph, split: str, channel_name: str, processes: dict, known: dict) -> frozenset[str]:
    """The split's output channels on the paths that end in `channel_name`; each channel visited once
    (`known`), not once per path."""
    if channel_name in known:
        return known[channel_name]
    channel = graph.channels[channel_name]
    if channel.producer == split:
        heads = frozenset({channel.name})
    else:
        producer = processes.get(channel.producer)
        heads = frozenset() if producer is None else \
            frozenset().union(*(_branch_heads(graph, split, c, processes, known) for c in producer.inputs))
    known[channel_name] = heads
    return heads


class FifoPlan:
    """The FIFO depths of a stream graph under a schedule (`specs`) and pipeline depths (`latency`)."""

    def __init__(self, graph: StreamGraph, specs: dict[str, ProcessSpec], latency: dict[str, int]):
        self.graph = graph
        self.deps = Dependences(graph, specs)
        self.required = required_tokens(self.deps)
        self.extra = latency_tokens(graph, latency)

    def depths(self, least_pixels: int = DEFAULT_PIXELS) -> dict[str, int]:
        """Depth in tokens of every channel holding at least `least_pixels` pixels."""
        return {name: self.depth_in_lanes(name, 1, least_pixels) for name in self.graph.channels}

    def bits(self, least_pixels: int = DEFAULT_PIXELS) -> dict[str, int]:
        return {name: depth * self.deps.lanes(name) * 8 for name, depth in self.depths(least_pixels).items()}

    def depth_in_lanes(self, name: str, lanes: int, least_pixels: int = DEFAULT_PIXELS) -> int:
        """The depth in tokens of channel `name` carried in `lanes` times the plan's lanes (more than one: of a
        one-lane plan, `reservation_plan`): its tokens spread over the lanes (the pixels it holds, what the branches'
        lags and the record need) and its pipeline-depth tokens (one a cycle, `latency_tokens`) as they are."""
        values = max(least_pixels * self.deps.tokens_per_pixel(name), self.required.get(name, 0))
        return max(MIN_DEPTH, math.ceil(values / lanes)) + self.extra.get(name, 0)


def reservation_plan(graph: StreamGraph) -> FifoPlan:
    """The FIFOs' plan whatever the schedule, for the memory the ILP reserves: on the one-lane schedule, with
    the pipeline depths at their deepest."""
    return FifoPlan(graph, unit_specs(graph), {p.name: depth_bound(p.kind) for p in graph.processes})


def fifo_bits(graph: StreamGraph, least_pixels: int = DEFAULT_PIXELS) -> dict[str, int]:
    """Storage of every channel's sized FIFO in bits whatever the schedule (`reservation_plan`)."""
    return reservation_plan(graph).bits(least_pixels)
