"""Cycle-level (token-level) simulation of a built design, from its report.json alone.

Every process of the dataflow region is modelled as the sequential program its
template (emit/templates/process/*.j2) runs, with these costs:

* each token read or written takes one cycle (the II=1 token loops of
  ``read_pixel``/``write_pixel``);
* each pipelined compute loop takes ``ceil(trip count / unrolled iterations)``
  cycles plus a pipeline depth of ``PIPELINE_DEPTH`` (4) cycles;
* each iteration of a non-pipelined outer loop (the pixel / window-position
  loop) costs ``ITERATION_OVERHEAD`` (2) cycles, charged at its start.

FIFOs are bounded (the channel's ``fifo_depth`` in tokens). A read blocks while the
FIFO is empty, a write while it is full; a token written in cycle ``t`` can be
read in cycle ``t + 1`` and a slot freed by a read in cycle ``t`` can be
written in cycle ``t + 1``. The accelerator's input port is an unpack stage
the top function's ``ming::unpack_axis``, the output port its ``ming::pack_axis``:
pipelined loops of one iteration per cycle that move at most one 64-bit word
(8 values) and one token each, with a value buffer between the two widths (the
same rules as the templates); the unpack loop starts after its pipeline depth,
the pack loop's last word leaves its pipeline depth after its last iteration.

Cycles are numbered from 0. ``SimResult.cycles`` is the number of cycles up to
and including the one in which the output port writes its last word;
``first_output_cycles`` the same for its first word.

How it runs: instead of stepping every cycle, each process keeps its own clock
and runs ahead as far as the timestamps it knows allow: reading token k needs
k's write time (``read = max(now, write + 1)``), writing token k into a FIFO of
depth D needs the read time of token k - D (``write = max(now, read + 1)``).
This is a max-plus evaluation of exactly the blocking semantics above (same
times as a cycle-by-cycle simulation), and because a process reads/writes at
most one token per cycle, a run of n consecutive tokens has the closed form
``time_j = max(now + j, other_side_j + 1)``, so a whole pixel moves in one
step. When no process can advance and some are unfinished, the design is
deadlocked.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .dataflow import WINDOW_KINDS

PIPELINE_DEPTH = 4
ITERATION_OVERHEAD = 2
AXIS_VALUES_PER_WORD = 8  # int8 values per 64-bit AXI4-Stream word

_DELAY, _READ, _WRITE = 0, 1, 2


@dataclass
class SimResult:
    cycles: int                      # output port received its last value (cycle count), or the deadlock cycle
    first_output_cycles: int | None  # output port received its first value (cycle count)
    stalls: dict[str, dict[str, int]]  # process -> {"read": blocked on empty, "write": blocked on full}
    fifo_peak: dict[str, int]        # channel -> max occupancy in tokens
    deadlock: list[str] | None       # "<process> waits to <read from|write to> <channel> (<empty|full>, n/depth)"
    busy: dict[str, int]             # process -> cycles not blocked
    finish: dict[str, int] = field(default_factory=dict)         # process -> cycle count when it finished
    output_tokens: dict[str, int] = field(default_factory=dict)  # output channel -> tokens the port received
    timed_out: bool = False          # stopped at max_cycles
    # channel -> the least depth with which every token is written in the same cycle (see `_need`)
    fifo_need: dict[str, int] = field(default_factory=dict)

    @property
    def completed(self) -> bool:
        return self.deadlock is None and not self.timed_out


def as_json(result: SimResult) -> dict:
    return {"cycles": result.cycles, "first_output_cycles": result.first_output_cycles,
            "completed": result.completed, "timed_out": result.timed_out,
            "stalls": result.stalls, "fifo_peak": result.fifo_peak, "deadlock": result.deadlock,
            "busy": result.busy, "finish": result.finish, "output_tokens": result.output_tokens}


class _Channel:
    __slots__ = ("name", "depth", "shape", "tokens", "lanes", "w", "r", "producer", "consumer", "ends")

    def __init__(self, spec: dict):
        self.name = spec["name"]
        self.depth = int(spec["fifo_depth"])
        if self.depth < 1:
            raise ValueError(f"channel {self.name}: depth {self.depth} < 1")
        c, h, w = self.shape = tuple(int(x) for x in spec["shape"])
        self.lanes = int(spec["lanes"])
        self.tokens = (c // self.lanes) * h * w
        self.w: list[int] = []  # write cycle of every token written so far
        self.r: list[int] = []  # read cycle of every token read so far
        self.producer = None    # _Process
        self.consumer = None
        self.ends = (spec.get("producer"), spec.get("consumer"))  # names in the report


class _Process:
    __slots__ = ("name", "gen", "t", "op", "left", "stall_r", "stall_w", "done")

    def __init__(self, name: str, gen):
        self.name, self.gen = name, gen
        self.t = 0
        self.op = None
        self.left = 0
        self.stall_r = self.stall_w = 0
        self.done = False


def _cdiv(a: int, b: int) -> int:
    return -(-a // max(b, 1))


def _loop(trip: int, unrolled: int) -> int:
    """Cycles of a pipelined loop (II=1) of `trip` iterations, `unrolled` per pipeline iteration."""
    return _cdiv(trip, unrolled) + PIPELINE_DEPTH


# ---------------------------------------------------------------------------
# Process programs: generators of (_DELAY, cycles, 0) / (_READ|_WRITE, channel, tokens)
# ---------------------------------------------------------------------------

def _window_program(node: dict, cin: _Channel, cout: _Channel):
    w = node["window"]
    kind = node["kind"]
    unroll = node["schedule"].get("unroll", {})
    c_in, h_in, w_in = w["in_channels"], w["in_height"], w["in_width"]
    c_out, h_out, w_out = w["out_channels"], w["out_height"], w["out_width"]
    (k_h, k_w), (s_h, s_w), (d_h, d_w) = w["kernel"], w["stride"], w["dilation"]
    pad_t, pad_l, pad_b, pad_r = w["pads"]
    lanes_in, lanes_out = cin.lanes, cout.lanes
    k = k_h * k_w
    if kind == "conv":
        compute = _cdiv(c_out, unroll.get("oc", 1)) * _cdiv(c_in, unroll.get("ic", 1)) * _cdiv(k, unroll.get("k", 1))
    else:
        compute = _cdiv(c_out, unroll.get("c", 1)) * _cdiv(k, unroll.get("k", 1))
    # mac / reduce (the window is fetched inside it), then the write loop's pipeline fill before its first token
    window_cycles = compute + PIPELINE_DEPTH + PIPELINE_DEPTH
    tokens_in, tokens_out = c_in // lanes_in, c_out // lanes_out
    overhead = (_DELAY, ITERATION_OVERHEAD, 0)
    read, write = (_READ, cin, tokens_in), (_WRITE, cout, tokens_out)
    compute_op = (_DELAY, window_cycles, 0)
    for pr in range(pad_t + h_in + pad_b):
        r = pr - pad_t
        top = pr - (k_h - 1) * d_h
        row_ok = top >= 0 and top % s_h == 0 and top // s_h < h_out
        for pc in range(pad_l + w_in + pad_r):
            yield overhead
            c = pc - pad_l
            if 0 <= r < h_in and 0 <= c < w_in:
                yield read
            left = pc - (k_w - 1) * d_w
            if row_ok and left >= 0 and left % s_w == 0 and left // s_w < w_out:
                yield compute_op
                yield write


def _pointwise_program(node: dict, cin: _Channel, cout: _Channel):
    w = node["window"]
    unroll = node["schedule"].get("unroll", {})
    c_in, h_in, w_in = w["in_channels"], w["in_height"], w["in_width"]
    c_out, h_out, w_out = w["out_channels"], w["out_height"], w["out_width"]
    s_h, s_w = w["stride"]
    # mac, then the requantizing write loop's pipeline fill before its first token
    compute = _cdiv(c_out, unroll.get("oc", 1)) * _cdiv(c_in, unroll.get("ic", 1)) + PIPELINE_DEPTH + PIPELINE_DEPTH
    overhead = (_DELAY, ITERATION_OVERHEAD, 0)
    read, write = (_READ, cin, c_in // cin.lanes), (_WRITE, cout, c_out // cout.lanes)
    compute_op = (_DELAY, compute, 0)
    for r in range(h_in):
        row_ok = r % s_h == 0 and r // s_h < h_out
        for c in range(w_in):
            yield overhead
            yield read
            if row_ok and c % s_w == 0 and c // s_w < w_out:
                yield compute_op
                yield write


def _dense_program(node: dict, cin: _Channel, cout: _Channel):
    unroll = node["schedule"].get("unroll", {})
    c, h, w = cin.shape
    k = node.get("loop_bounds", {}).get("k", c * h * w)
    n = node.get("loop_bounds", {}).get("n", cout.tokens * cout.lanes)
    yield (_READ, cin, k // cin.lanes)
    yield (_DELAY, _cdiv(n, unroll.get("n", 1)) * _cdiv(k, unroll.get("k", 1)) + PIPELINE_DEPTH + PIPELINE_DEPTH, 0)
    yield (_WRITE, cout, n // cout.lanes)


def _global_avgpool_program(node: dict, cin: _Channel, cout: _Channel):
    unroll = node["schedule"].get("unroll", {})
    c, h, w = cin.shape
    c_out = cout.shape[0]
    overhead = (_DELAY, ITERATION_OVERHEAD, 0)
    read = (_READ, cin, c // cin.lanes)
    accumulate = (_DELAY, _loop(c, unroll.get("c", 1)), 0)
    for _ in range(h * w):
        yield overhead
        yield read
        yield accumulate
    yield (_DELAY, PIPELINE_DEPTH, 0)  # the requantizing write loop's pipeline fill
    yield (_WRITE, cout, c_out // cout.lanes)


def _elementwise_program(node: dict, ins: list[_Channel], outs: list[_Channel]):
    """add / rescale / concat / split: per pixel read every input, compute (add, rescale), write every output."""
    kind = node["kind"]
    _, h, w = outs[0].shape
    c_out = outs[0].shape[0]
    body = [(_DELAY, ITERATION_OVERHEAD, 0)]
    body += [(_READ, ch, ch.shape[0] // ch.lanes) for ch in ins]
    if kind in ("add", "rescale"):
        body.append((_DELAY, _loop(c_out, outs[0].lanes), 0))
    body += [(_WRITE, ch, ch.shape[0] // ch.lanes) for ch in outs]
    body = [op for op in body if op[2] or op[0] == _DELAY]
    for _ in range(h * w):
        yield from body


def _runs(steps):
    """Consecutive equal ops merged: (kind, channel, tokens) or (_DELAY, cycles, 0)."""
    op = None
    for kind, arg in steps:
        if op is not None and op[0] == kind and (kind == _DELAY or op[1] is arg):
            op = (kind, op[1] + 1, 0) if kind == _DELAY else (kind, arg, op[2] + 1)
            continue
        if op is not None:
            yield op
        op = (kind, 1, 0) if kind == _DELAY else (kind, arg, 1)
    if op is not None:
        yield op


def _unpack_program(ch: _Channel):
    """The AXI input port (``ming::unpack_axis``): a pipelined loop, one iteration per cycle after its
    pipeline depth, reading a word whenever fewer than L values wait and writing a token whenever L do;
    the AXI words are always there (the DMA streams at line rate)."""
    values, lanes = ch.tokens * ch.lanes, ch.lanes
    words = _cdiv(values, AXIS_VALUES_PER_WORD)

    def steps():
        held = read = 0
        for _ in range(max(words, ch.tokens)):
            if held < lanes and read < words:
                held += min(AXIS_VALUES_PER_WORD, values - AXIS_VALUES_PER_WORD * read)
                read += 1
            if held >= lanes:
                held -= lanes
                yield _WRITE, ch
            else:
                yield _DELAY, None

    yield (_DELAY, PIPELINE_DEPTH, 0)
    yield from _runs(steps())


def _pack_program(ch: _Channel):
    """The AXI output port (``ming::pack_axis``): a pipelined loop, one iteration per cycle, reading a
    token whenever fewer than 8 values wait and writing a word whenever 8 (or the image's last values)
    do; its last word leaves its pipeline depth after the last iteration."""
    values, lanes = ch.tokens * ch.lanes, ch.lanes

    def steps():
        held = tokens = 0
        while tokens < ch.tokens or held:
            if held < AXIS_VALUES_PER_WORD and tokens < ch.tokens:
                held += lanes
                tokens += 1
                yield _READ, ch
            else:
                yield _DELAY, None
            if held >= AXIS_VALUES_PER_WORD or tokens == ch.tokens:
                held -= min(held, AXIS_VALUES_PER_WORD)

    yield from _runs(steps())
    yield (_DELAY, PIPELINE_DEPTH, 0)


def _first_word_token(ch: _Channel) -> int:
    """The token whose read completes the first output word (pack_axis writes it in that iteration)."""
    return _cdiv(min(AXIS_VALUES_PER_WORD, ch.tokens * ch.lanes), ch.lanes) - 1


def _program(node: dict, ins: list[_Channel], outs: list[_Channel]):
    kind = node["kind"]
    if kind in WINDOW_KINDS:
        return _window_program(node, ins[0], outs[0])
    if kind == "pointwise":
        return _pointwise_program(node, ins[0], outs[0])
    if kind == "dense":
        return _dense_program(node, ins[0], outs[0])
    if kind == "global_avgpool":
        return _global_avgpool_program(node, ins[0], outs[0])
    if kind in ("add", "rescale", "concat", "split"):
        return _elementwise_program(node, ins, outs)
    raise ValueError(f"process {node['name']}: unknown kind {kind!r}")


# ---------------------------------------------------------------------------
# The scheduler
# ---------------------------------------------------------------------------

def _run(p: _Process, max_cycles: int) -> bool:
    """Advance `p` as far as the known timestamps allow. True if it made progress."""
    t = p.t
    progressed = False
    gen = p.gen
    while True:
        op = p.op
        if op is None:
            try:
                op = next(gen)
            except StopIteration:
                p.done = True
                p.t = t
                return True
            p.op = op
            p.left = op[2]
        kind = op[0]
        if kind == _DELAY:
            t += op[1]
            p.op = None
            progressed = True
            if t > max_cycles:
                p.t = t
                return progressed
            continue
        ch = op[1]
        if kind == _READ:
            k0 = len(ch.r)
            n = min(p.left, len(ch.w) - k0)
            if n <= 0:
                p.t = t
                return progressed
            if n == 1:
                rt = ch.w[k0] + 1
                if rt < t:
                    rt = t
                ch.r.append(rt)
                p.stall_r += rt - t
                t = rt + 1
            else:
                # write times strictly increase, so read j of the run is max(t + j, write_j + 1)
                rs = [x + 1 if x + 1 > t + j else t + j for j, x in enumerate(ch.w[k0:k0 + n])]
                ch.r.extend(rs)
                end = rs[-1] + 1
                p.stall_r += end - (t + n)
                t = end
        else:  # _WRITE
            k0 = len(ch.w)
            depth = ch.depth
            n = min(p.left, len(ch.r) + depth - k0)
            if n <= 0:
                p.t = t
                return progressed
            # token k waits for the read of token k - depth; those reads strictly increase, so
            # write j of the run is max(t + j, read_{k0 + j - depth} + 1)
            free = depth - k0 if k0 < depth else 0
            if free >= n:
                ws = list(range(t, t + n))
            elif free > 0:
                ws = list(range(t, t + free))
                ws += [x + 1 if x + 1 > t + j else t + j for j, x in enumerate(ch.r[:n - free], free)]
            else:
                ws = [x + 1 if x + 1 > t + j else t + j for j, x in enumerate(ch.r[k0 - depth:k0 - depth + n])]
            ch.w.extend(ws)
            end = ws[-1] + 1
            p.stall_w += end - (t + n)
            t = end
        p.left -= n
        progressed = True
        if p.left == 0:
            p.op = None
        if t > max_cycles:
            p.t = t
            return progressed


def simulate(report: dict, max_cycles: int = 10**9) -> SimResult:
    """Simulate the design described by a parsed report.json."""
    channels = {spec["name"]: _Channel(spec) for spec in report["channels"]}
    processes: list[_Process] = []
    for node in report["nodes"]:
        ins = [channels[c] for c in node["inputs"]]
        outs = [channels[c] for c in node["outputs"]]
        p = _Process(node["name"], _program(node, ins, outs))
        for ch in ins:
            ch.consumer = p
        for ch in outs:
            ch.producer = p
        processes.append(p)
    in_ports, out_ports = [], []
    for ch in channels.values():
        for side, end, port_name in (("producer", ch.producer, "input"), ("consumer", ch.consumer, "output")):
            if end is None and ch.ends[side == "consumer"] not in (None, port_name):
                raise ValueError(f"channel {ch.name}: {side} {ch.ends[side == 'consumer']!r} is not a process")
        if ch.producer is None:
            port = _Process("input", _unpack_program(ch))
            ch.producer = port
            in_ports.append(port)
        if ch.consumer is None:
            port = _Process("output", _pack_program(ch))
            ch.consumer = port
            out_ports.append((port, ch))
    everyone = in_ports + processes + [p for p, _ in out_ports]
    names = [p.name for p in everyone]
    if len(set(names)) != len(names):  # a process named like a port: keep the port names unique
        for i, (p, _) in enumerate(out_ports):
            p.name = f"{p.name}:{i}" if names.count(p.name) > 1 else p.name
        for i, p in enumerate(in_ports):
            p.name = f"{p.name}:{i}" if names.count(p.name) > 1 else p.name

    # who to wake after a process moved tokens on a channel: the other end
    neighbours: dict[int, list[_Process]] = {id(p): [] for p in everyone}
    for ch in channels.values():
        neighbours[id(ch.producer)].append(ch.consumer)
        neighbours[id(ch.consumer)].append(ch.producer)

    queue = deque(everyone)
    queued = {id(p) for p in everyone}
    timed_out = False
    while queue:
        p = queue.popleft()
        queued.discard(id(p))
        if p.done:
            continue
        if _run(p, max_cycles):
            if p.t > max_cycles:
                timed_out = True
                break
            for q in neighbours[id(p)]:
                if not q.done and id(q) not in queued:
                    queued.add(id(q))
                    queue.append(q)

    blocked = [p for p in everyone if not p.done]
    deadlock = None
    end = max((p.t for p in everyone), default=0)
    if blocked and not timed_out:
        deadlock = []
        for p in blocked:
            kind, ch = p.op[0], p.op[1]
            n = len(ch.w) - len(ch.r)
            if kind == _READ:
                deadlock.append(f"{p.name} waits to read from {ch.name} (empty, {n}/{ch.depth})")
                p.stall_r += end - p.t
            else:
                deadlock.append(f"{p.name} waits to write to {ch.name} (full, {n}/{ch.depth})")
                p.stall_w += end - p.t
            p.t = end

    first, last = None, 0
    output_tokens = {}
    for port, ch in out_ports:
        output_tokens[ch.name] = len(ch.r)
        k = _first_word_token(ch)
        if len(ch.r) > k:
            word = ch.r[k] + 1 + PIPELINE_DEPTH
            first = word if first is None else min(first, word)
        if port.done:
            last = max(last, port.t)
    if deadlock is not None or timed_out:
        cycles = min(end, max_cycles) if timed_out else end
    else:
        cycles = last

    return SimResult(
        cycles=int(cycles), first_output_cycles=first,
        stalls={p.name: {"read": p.stall_r, "write": p.stall_w} for p in everyone},
        fifo_peak={name: _peak(ch) for name, ch in channels.items()},
        deadlock=deadlock,
        busy={p.name: p.t - p.stall_r - p.stall_w for p in everyone},
        finish={p.name: p.t for p in everyone if p.done},
        output_tokens=output_tokens, timed_out=timed_out,
        fifo_need={name: _need(ch) for name, ch in channels.items()})


def _peak(ch: _Channel) -> int:
    """Max over cycles of (tokens written up to t) - (tokens read up to t)."""
    if not ch.w:
        return 0
    w = np.asarray(ch.w, dtype=np.int64)
    r = np.asarray(ch.r, dtype=np.int64)
    read_by = np.searchsorted(r, w, side="right")
    return int((np.arange(1, len(w) + 1) - read_by).max())


def _need(ch: _Channel) -> int:
    """The least depth D with which no write of this run waits: token k may be written in cycle w_k only
    once token k - D was read before it (r_{k-D} < w_k), i.e. D >= k + 1 - (reads before w_k).

    Every FIFO shrunk to this at once leaves the whole run cycle for cycle the same: the simulation is
    the least solution of max-plus inequalities, a smaller depth only tightens the FIFO inequalities,
    and the old times satisfy the tightened ones."""
    if not ch.w:
        return 1
    w = np.asarray(ch.w, dtype=np.int64)
    r = np.asarray(ch.r, dtype=np.int64)
    read_before = np.searchsorted(r, w, side="left")
    return max(1, int((np.arange(1, len(w) + 1) - read_before).max()))


def simulate_dir(out_dir, max_cycles: int = 10**9) -> SimResult:
    """Simulate the design built in OUT_DIR (reads OUT_DIR/report.json)."""
    report = json.loads((Path(out_dir) / "report.json").read_text())
    return simulate(report, max_cycles)
