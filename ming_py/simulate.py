"""Cycle-level (token-level) simulation of a built design, from its report.json alone.

Every process runs the loop `ming_py.process_spec` describes (`spec_from_report`, `loop_of`): one
flattened loop pipelined at II=1, whose iterations read and write tokens at fixed offsets of each
position, with a pipeline depth. The accelerator's ports are loops of the same kind with depth
``PIPELINE_DEPTH``: the input port (the top function's ``ming::unpack_axis``) writes a token in
each iteration whose value buffer holds L values (it reads a 64-bit word of 8 values whenever it
holds fewer than L; the words are always there, the DMA streams at line rate), the output port
(``ming::pack_axis``) reads a token in each iteration in which it holds fewer than 8 values and
writes a word, `depth` cycles later like any write, in each iteration that completes one. With
several outputs the output port runs their ``pack_axis`` loops one after the other, in the order of
the output record (`record_loop`).

Cycles are numbered from 0. For every loop:

* iteration i issues in cycle s_i: s_0 = 0 and s_i >= s_{i-1} + 1 (II=1);
* reading token k of a channel in iteration i needs w_k + 1 <= s_i (a token written in cycle w is
  readable from w + 1); the read happens in r_k = s_i;
* writing token k in iteration i happens `depth` cycles later, in w_k = s_i + depth, and needs its
  FIFO slot: r_{k-D} + 1 <= w_k for a FIFO of depth D (reading token k - D in cycle r frees its
  slot from r + 1);
* a read or write that cannot happen stalls the whole pipeline: s_i is pushed later until the
  constraint holds (s_i = max(s_i, w_k + 1) for a read, max(s_i, r_{k-D} + 1 - depth) for a write).
  The events of an iteration are taken reads first, then writes, each in input/output order, and
  a push by a later event does not move an earlier event of the same iteration (an approximation:
  the hardware stalls the iteration as a whole);
* the loop finishes in cycle s_last + depth, so it takes s_last + 1 + depth cycles: without
  stalls exactly `Loop.cycles` (iterations + depth), the cycles `ming_py.ilp.cost` charges. The two
  differ only by the stalls a design's FIFOs and neighbours cause.

``SimResult.cycles`` is the number of cycles up to and including the one in which the output
port writes its last word, ``first_output_cycles`` the same for its first word. ``interval_cycles`` is
the steady-state interval as this one image shows it: the longest any loop (ports included) is
occupied by the image, from its start to its finish, where its start is the cycle its first iteration
would issue in had it run unstalled up to its first read or write (the wait for the image's first token
is not the loop's: in a stream of images it overlaps the previous image); at least every loop's
`Loop.cycles`, and more where the loop stalls mid-image on its neighbours. A loop restarts on the next image only once it finished this one, so images
cannot follow each other faster than that loop lets them. A process's
stalls are the cycles its pipeline was pushed, counted as "read" or "write" by the kind of event
that pushed it; its busy cycles are the rest, `Loop.cycles` for every loop that finishes.

How it runs: instead of stepping every cycle, each process keeps its own clock and runs ahead,
event (token) by event, as far as the times it knows allow: a read needs token k's write time, a
write the read time of token k - D. Iterations without events only move the clock, and a run of
equal positions costs only its events. A process that cannot go on waits until the other end of
the channel moves. This computes the least times that satisfy the rules above, in an order in
which every time depends only on times already known.

When every unfinished process waits, the design is deadlocked; ``cycles`` is then the latest
clock reached (a process's finish, or the cycle its waiting iteration would issue in), and the
waiting processes' stalls run up to it. A write's slot check looks `depth` cycles past its
iteration's issue, so a write whose freeing read waits, through other processes, on a later
iteration of the writer itself would be reported as a deadlock although the inequalities have a
solution (the hardware stalls only once the write is due). tests/test_simulate.py checks on zoo
designs with random FIFO depths that deadlocks are reported exactly when the inequalities have no
solution.
"""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .adapters import AXIS_VALUES_PER_WORD, PIPELINE_DEPTH, record_loop, unpack_loop
from .errors import MingError
from .dataflow import Schedule, StreamGraph
from .process_spec import loop_of, schedule_spec, spec_from_report
from .loops import Loop, Position
from .simulate_report import KINDS, MALFORMED, malformed_reason, read_report

STUCK, MOVED, PAST_LIMIT = range(3)  # what `_advance` did


@dataclass
class SimResult:
    cycles: int                      # output port received its last value (cycle count), or the deadlock cycle
    first_output_cycles: int | None  # output port received its first value (cycle count)
    stalls: dict[str, dict[str, int]]  # process -> {"read": cycles pushed by reads, "write": by writes}
    fifo_peak: dict[str, int]        # channel -> max occupancy in tokens
    deadlock: list[str] | None       # "<process> waits to <read from|write to> <channel> (<empty|full>, n/depth)"
    busy: dict[str, int]             # process -> cycles not stalled
    finish: dict[str, int] = field(default_factory=dict)         # process -> cycle count when it finished
    output_tokens: dict[str, int] = field(default_factory=dict)  # output channel -> tokens the port received
    timed_out: bool = False          # stopped at max_cycles
    # channel -> the least depth with which every token is written in the same cycle (see `_need`)
    fifo_need: dict[str, int] = field(default_factory=dict)
    start: dict[str, int] = field(default_factory=dict)  # process -> its start (module docstring: interval_cycles)

    @property
    def completed(self) -> bool:
        return self.deadlock is None and not self.timed_out

    @property
    def interval_cycles(self) -> int:
        """The steady-state interval (module docstring): the longest a loop is occupied by the image."""
        return max((finish - self.start[name] for name, finish in self.finish.items()), default=0)


HEADLINE = ("cycles", "latency_us", "interval_cycles")  # the keys of `headline`


def headline(result: SimResult, clock_mhz: float) -> dict:
    """A design's headline figures (report.json's totals): its simulated latency in cycles and in us at the
    clock, and its simulated steady-state interval."""
    return {"cycles": result.cycles, "latency_us": round(result.cycles / clock_mhz, 3),
            "interval_cycles": result.interval_cycles}


def as_json(result: SimResult) -> dict:
    return {"cycles": result.cycles, "first_output_cycles": result.first_output_cycles,
            "interval_cycles": result.interval_cycles,
            "completed": result.completed, "timed_out": result.timed_out,
            "stalls": result.stalls, "fifo_peak": result.fifo_peak, "deadlock": result.deadlock,
            "busy": result.busy, "finish": result.finish, "output_tokens": result.output_tokens}


class _Channel:
    __slots__ = ("name", "depth", "shape", "tokens", "lanes", "w", "r", "producer", "consumer", "ends")

    def __init__(self, name: str, depth: int, shape: tuple[int, int, int], lanes: int, ends: tuple):
        self.name = name
        self.depth = depth
        if self.depth < 1:
            raise ValueError(f"channel {self.name}: depth {self.depth} < 1")
        c, h, w = self.shape = shape
        self.lanes = lanes
        self.tokens = (c // self.lanes) * h * w
        self.w = array("q")  # write cycle of every token written so far
        self.r = array("q")  # read cycle of every token read so far
        self.producer = None  # _Process
        self.consumer = None
        self.ends = ends  # (producer, consumer) names in the design

    @classmethod
    def from_report(cls, spec: dict) -> _Channel:
        return cls(spec["name"], int(spec["fifo_depth"]), tuple(int(x) for x in spec["shape"]), int(spec["lanes"]),
                   (spec.get("producer"), spec.get("consumer")))

    @property
    def values(self) -> int:
        return self.tokens * self.lanes


# ---------------------------------------------------------------------------
# Loops as programs of events
# ---------------------------------------------------------------------------

def _moves(position: Position, inputs: list[_Channel], outputs: list[_Channel], write_delay: int = 0) -> list:
    """The position's token moves as (iteration offset, is_write, index, channel), its writes `write_delay` later."""
    moves = [(offset, 0, i, channel) for i, (access, channel) in enumerate(zip(position.reads, inputs))
             for offset in access.offsets()]
    moves += [(offset + write_delay, 1, i, channel) for i, (access, channel) in enumerate(zip(position.writes, outputs))
              for offset in access.offsets()]
    return moves


def _ordered(moves: list) -> tuple:
    """Moves in the order they are taken: (iteration offset, channel, is_write), by iteration, reads before
    writes, inputs and outputs in order."""
    return tuple((offset, channel, bool(write)) for offset, write, _, channel in sorted(moves, key=lambda m: m[:3]))


def _events(position: Position, inputs: list[_Channel], outputs: list[_Channel]) -> tuple:
    return _ordered(_moves(position, inputs, outputs))


def _program(loop: Loop, inputs: list[_Channel], outputs: list[_Channel]) -> tuple:
    """((repeat, iterations, events), ...): the loop's runs of equal positions with their events."""
    if loop.write_delay:
        return _delayed_program(loop, inputs, outputs)
    events = {}
    program = []
    for repeat, position in loop.runs:
        if position not in events:
            events[position] = _events(position, inputs, outputs)
        program.append((repeat, position.iterations, events[position]))
    return tuple(program)


def _delayed_program(loop: Loop, inputs: list[_Channel], outputs: list[_Channel]) -> tuple:
    """The program of a loop whose writes are `write_delay` iterations after their place: a write that passes
    its position's end moves into the next position (and the last ones into the iterations after the last
    position). Once a position passes on what it received, every further one of its run is the same."""
    delay = loop.write_delay
    program, carried = [], ()  # carried: writes moved into the next position, offsets from its start

    def instance(position: Position, carried: tuple) -> tuple[tuple, tuple]:
        moves = _moves(position, inputs, outputs, delay) + list(carried)
        inside = [m for m in moves if m[0] < position.iterations]
        later = tuple((m[0] - position.iterations,) + m[1:] for m in moves if m[0] >= position.iterations)
        return _ordered(inside), later

    for repeat, position in loop.runs:
        done = 0
        while done < repeat:
            events, later = instance(position, carried)
            steady = later == carried  # the next instances receive what this one did: all the same
            count = repeat - done if steady else 1
            program.append((count, position.iterations, events))
            carried, done = later, done + count
    program.append((1, delay, _ordered(list(carried))))
    return tuple(program)


def _tokens_moved(loop: Loop, side: str, index: int) -> int:
    return sum(repeat * getattr(position, side)[index].count for repeat, position in loop.runs)


def _first_word_token(ch: _Channel) -> int:
    """The token whose read completes the first output word (pack_axis writes it in that iteration)."""
    return -(-min(AXIS_VALUES_PER_WORD, ch.values) // ch.lanes) - 1


def process_loop(node: dict, channels: dict[str, dict]) -> Loop:
    """The loop of a report's process (`node` from "nodes", `channels` by name)."""
    if node["kind"] not in KINDS:
        raise ValueError(f"process {node['name']}: unknown kind {node['kind']!r}")
    try:
        return loop_of(spec_from_report(node, channels))
    except ValueError as e:
        raise ValueError(f"process {node['name']}: {e}") from None


# ---------------------------------------------------------------------------
# Processes and the scheduler
# ---------------------------------------------------------------------------

class _Process:
    __slots__ = ("name", "depth", "program", "channels", "neighbours", "run", "repeat", "event", "base", "pushes",
                 "stall_read", "stall_write", "done", "finish", "waiting", "waiting_to_write", "queued", "start")

    def __init__(self, name: str, loop: Loop, inputs: list[_Channel], outputs: list[_Channel]):
        self.name, self.depth = name, loop.depth
        self.program = _program(loop, inputs, outputs)
        self.channels = inputs + outputs
        self.run = self.repeat = self.event = 0  # the next event: program[run], its repeat, its index
        self.base = 0    # the first iteration of the current position
        self.pushes = 0  # cycles the pipeline was pushed so far: iteration i issues in cycle i + pushes
        self.stall_read = self.stall_write = 0
        self.done = False
        self.finish = 0
        self.waiting: _Channel | None = None  # the channel whose other end it waits for
        self.waiting_to_write = False
        self.neighbours: tuple[tuple[_Channel, _Process], ...] = ()  # (channel, its other end)
        self.queued = False
        self.start: int | None = None  # set by its first event (`_take_events`)

    @property
    def clock(self) -> int:
        """The cycle it finished in (cycle count), or in which its next event's iteration would issue."""
        if self.done:
            return self.finish
        if self.run < len(self.program):
            _, _, events = self.program[self.run]
            if self.event < len(events):
                return self.base + events[self.event][0] + self.pushes
        return self.base + self.pushes

    def can_go_on(self) -> bool:
        ch = self.waiting
        if ch is None:
            return True
        if self.waiting_to_write:
            return len(ch.w) - ch.depth < len(ch.r)
        return len(ch.r) < len(ch.w)


def _advance(p: _Process, max_cycles: int) -> int:
    """Take `p`'s events as far as the known times allow: STUCK, MOVED or PAST_LIMIT (max_cycles)."""
    program, depth = p.program, p.depth
    moved = False
    p.waiting = None
    while p.run < len(program):
        repeats, iterations, events = program[p.run]
        if not events:  # iterations that only pass time
            p.base += (repeats - p.repeat) * iterations
            p.repeat = repeats
        while p.repeat < repeats:
            start = p.event
            if not _take_events(p, events, depth):
                return MOVED if moved or p.event > start else STUCK
            moved = True
            p.event, p.repeat, p.base = 0, p.repeat + 1, p.base + iterations
            if p.base + p.pushes > max_cycles:
                return PAST_LIMIT
        p.run, p.repeat = p.run + 1, 0
    p.done = True
    p.finish = p.base + p.pushes + depth  # s_last + 1 + depth
    return PAST_LIMIT if p.finish > max_cycles else MOVED


def _take_events(p: _Process, events: tuple, depth: int) -> bool:
    """Take the events of the current position from p.event on; False if one has to wait. The process's first
    event sets its start (`SimResult.start`)."""
    base, pushes = p.base, p.pushes
    stall_read = stall_write = 0
    index, count = p.event, len(events)
    starting = p.start is None
    blocked = None
    while index < count:
        offset, ch, write = events[index]
        issue = base + offset + pushes
        if write:
            written = ch.w
            freeing = len(written) - ch.depth  # the token whose read frees this write's slot
            if freeing >= 0:
                if freeing >= len(ch.r):
                    blocked = ch
                    break
                late = ch.r[freeing] + 1 - depth - issue
                if late > 0:
                    pushes += late
                    stall_write += late
                    issue += late
            written.append(issue + depth)
        else:
            read = ch.r
            k = len(read)
            if k >= len(ch.w):
                blocked = ch
                break
            late = ch.w[k] + 1 - issue
            if late > 0:
                pushes += late
                stall_read += late
                issue += late
            read.append(issue)
        index += 1
        if starting:  # the cycle iteration 0 issues in, had the loop run unstalled up to its first token
            p.start, starting = pushes, False
    p.event, p.pushes = index, pushes
    p.stall_read += stall_read
    p.stall_write += stall_write
    if blocked is not None:
        p.waiting, p.waiting_to_write = blocked, write
        return False
    return True


def _processes(nodes, channels: dict[str, _Channel], record: list[str]):
    """The design's processes (`nodes`: (name, loop, input channels, output channels) in order) and the ports'
    adapters: (input ports, processes, output ports)."""
    processes = []
    for name, loop, input_names, output_names in nodes:
        inputs = [channels[c] for c in input_names]
        outputs = [channels[c] for c in output_names]
        for side, chans in (("reads", inputs), ("writes", outputs)):
            for index, ch in enumerate(chans):
                moved = _tokens_moved(loop, side, index)
                if moved != ch.tokens:
                    raise ValueError(f"process {name} {side[:-1]}s {moved} tokens of {ch.name}, "
                                     f"which carries {ch.tokens}")
        p = _Process(name, loop, inputs, outputs)
        for ch in inputs:
            ch.consumer = p
        for ch in outputs:
            ch.producer = p
        processes.append(p)
    in_ports = []
    for ch in channels.values():
        for side, end, port_name in (("producer", ch.producer, "input"), ("consumer", ch.consumer, "output")):
            if end is None and ch.ends[side == "consumer"] not in (None, port_name):
                raise ValueError(f"channel {ch.name}: {side} {ch.ends[side == 'consumer']!r} is not a process")
        if ch.producer is None:
            ch.producer = _Process("input", unpack_loop(ch.values, ch.lanes), [], [ch])
            in_ports.append(ch.producer)
    # the output record: the design's outputs in order, or (a report without them) every channel no process reads
    recorded = [channels[name] for name in record] or [ch for ch in channels.values() if ch.consumer is None]
    out_ports = [_Process("output", record_loop([(ch.values, ch.lanes) for ch in recorded]), recorded, [])]
    for ch in recorded:
        ch.consumer = out_ports[0]
    for p in in_ports + processes + out_ports:
        p.neighbours = tuple((ch, ch.consumer if ch.producer is p else ch.producer) for ch in p.channels)
    names = [p.name for p in in_ports + processes + out_ports]
    if len(set(names)) != len(names):  # a process named like a port: keep the port names unique
        for ports in (in_ports, out_ports):
            for i, p in enumerate(ports):
                p.name = f"{p.name}:{i}" if names.count(p.name) > 1 else p.name
    return in_ports, processes, out_ports


def _run_all(everyone: list[_Process], max_cycles: int) -> bool:
    """Advance every process until all finished or all wait; True if one passed max_cycles."""
    queue = deque(everyone)
    for p in everyone:
        p.queued = True
    while queue:
        p = queue.popleft()
        p.queued = False
        if p.done:
            continue
        status = _advance(p, max_cycles)
        if status == PAST_LIMIT:
            return True
        if status == STUCK:
            continue
        for ch, other in p.neighbours:
            if other.waiting is ch and not other.queued and other.can_go_on():
                other.queued = True
                queue.append(other)
    return False


def simulate(report: dict, max_cycles: int = 10**9) -> SimResult:
    """Simulate the design described by a parsed report.json."""
    channels = {spec["name"]: _Channel.from_report(spec) for spec in report["channels"]}
    specs = {c["name"]: c for c in report["channels"]}
    nodes = [(node["name"], process_loop(node, specs), node["inputs"], node["outputs"]) for node in report["nodes"]]
    record = [output["channel"] for output in report.get("outputs", ())]
    return _simulate(channels, nodes, record, max_cycles)


def simulate_schedule(graph: StreamGraph, schedule: Schedule, max_cycles: int = 10**9,
                      starts: dict[str, int] | None = None) -> SimResult:
    """Simulate a design from the build's own stream graph and schedule (what its report.json states); `starts`:
    the cycle before which a process issues no iteration (the end of its weight load, `ming_py.weights_load`:
    the first image after reset)."""
    channels = {name: _Channel(name, schedule.depth_of(name), (c.channels, c.height, c.width),
                               schedule.lanes_of(name), (c.producer, c.consumer))
                for name, c in graph.channels.items()}
    nodes = []
    for p in graph.processes:
        spec = schedule_spec(graph, p, schedule)
        nodes.append((p.name, loop_of(spec), p.inputs, p.outputs))
    return _simulate(channels, nodes, [port.channel for port in graph.outputs], max_cycles, starts)


def _simulate(channels: dict[str, _Channel], nodes, record: list[str], max_cycles: int,
              starts: dict[str, int] | None = None) -> SimResult:
    in_ports, processes, out_ports = _processes(nodes, channels, record)
    for p in processes:
        p.pushes = (starts or {}).get(p.name, 0)  # iteration i issues in cycle i + pushes
    everyone = in_ports + processes + out_ports
    timed_out = _run_all(everyone, max_cycles)

    end = max(p.clock for p in everyone)
    deadlock = None
    if not timed_out and not all(p.done for p in everyone):
        deadlock = []
        for p in everyone:
            if p.done:
                continue
            ch = p.waiting
            held = len(ch.w) - len(ch.r)
            if p.waiting_to_write:
                deadlock.append(f"{p.name} waits to write to {ch.name} (full, {held}/{ch.depth})")
                p.stall_write += end - p.clock
            else:
                deadlock.append(f"{p.name} waits to read from {ch.name} (empty, {held}/{ch.depth})")
                p.stall_read += end - p.clock
    time = {p.name: p.clock if p.done or timed_out else end for p in everyone}

    first = None
    for port in out_ports:
        ch = port.channels[0]  # the record's first output
        k = _first_word_token(ch)
        if len(ch.r) > k:
            word = ch.r[k] + 1 + PIPELINE_DEPTH
            first = word if first is None else min(first, word)
    if timed_out:
        cycles = min(end, max_cycles)
    elif deadlock is not None:
        cycles = end
    else:
        cycles = max(port.finish for port in out_ports)

    return SimResult(
        cycles=int(cycles), first_output_cycles=first,
        stalls={p.name: {"read": p.stall_read, "write": p.stall_write} for p in everyone},
        fifo_peak={name: _peak(ch) for name, ch in channels.items()},
        deadlock=deadlock,
        busy={p.name: time[p.name] - p.stall_read - p.stall_write for p in everyone},
        finish={p.name: p.finish for p in everyone if p.done},
        output_tokens={ch.name: len(ch.r) for port in out_ports for ch in port.channels},
        timed_out=timed_out,
        fifo_need={name: _need(ch) for name, ch in channels.items()},
        start={p.name: p.start for p in everyone if p.done})


def _times(cycles: array) -> np.ndarray:
    return np.frombuffer(cycles, dtype=np.int64) if len(cycles) else np.zeros(0, dtype=np.int64)


def _peak(ch: _Channel) -> int:
    """Max over cycles of (tokens written up to t) - (tokens read up to t)."""
    if not ch.w:
        return 0
    read_by = np.searchsorted(_times(ch.r), _times(ch.w), side="right")
    return int((np.arange(1, len(ch.w) + 1) - read_by).max())


def _need(ch: _Channel) -> int:
    """The least depth D with which no write of this run waits: token k may be written in cycle w_k only
    once token k - D was read before it (r_{k-D} < w_k), i.e. D >= k + 1 - (reads before w_k).

    Every FIFO shrunk to this at once leaves the whole run cycle for cycle the same: the simulation's
    times are the least solution of the max-plus inequalities of the module docstring, a smaller depth
    only tightens the FIFO inequalities (the least solution cannot get earlier), and the old times
    satisfy the tightened ones (so they stay the least). That the shrunk run finds them, rather than
    stopping at a write's look-ahead (module docstring), tests/test_simulate.py checks on zoo designs."""
    if not ch.w:
        return 1
    read_before = np.searchsorted(_times(ch.r), _times(ch.w), side="left")
    return max(1, int((np.arange(1, len(ch.w) + 1) - read_before).max()))


def simulate_dir(out_dir, max_cycles: int = 10**9) -> SimResult:
    """Simulate the design built in OUT_DIR (reads OUT_DIR/report.json).

    A report that cannot be read, is not JSON or lacks what the simulation needs raises MingError: one line
    naming the file and the field."""
    path = Path(out_dir) / "report.json"
    report = read_report(path)
    try:
        return simulate(report, max_cycles)
    except MALFORMED as exc:  # what check_report cannot see: e.g. token counts of processes and channels disagree
        raise MingError(f"{path}: {malformed_reason(exc)}; rebuild with `ming build`") from None
