"""Latency and resource models of one process under one candidate schedule.

Both come from the process's own descriptions, the ones the emitted C++ is generated from:
its pipelined loop (`ming_py.kernel`: iterations of each position, where tokens are read and
written, pipeline depth) and its storage plan (`ming_py.storage`: every array's banks, words and
memory). Cycles are for one image. A process is a pipeline stage of the dataflow region:
`cycles` is how long its loop runs per image with every token there when wanted (iterations +
depth; the slowest stage sets the throughput), `fill` how long after its start it writes its first
output token (fills add up along a path; MING §IV-C, Stream-HLS §3), `progress` when it writes the
output tokens at 1/K, ..., K/K of an image at its own pace and `lags` how long after the input token
each of those waits for arrives it can write it (the ILP chains these along the channels). `ming simulate` steps through the same loops with
blocking FIFOs.
The top function's AXI adapters (`unpack_axis`, `pack_axis`: max(words, tokens) iterations plus
their depth) are counted in the process they feed or drain, the stage they form with it; with several
outputs the output writer's `pack_axis` of each, and the ILP adds that they run one after the other.

Resources (DSP48E2, BRAM18K, URAM, LUT, FF):
* DSP: one int8 multiply-accumulate lane per DSP48E2, none in LUT fabric (48 LUTs a lane, and the
  lean requantization's product in LUTs too: 430 a lane), half a DSP48E2 for two lanes sharing their
  input (AMD WP486; 10 LUTs a lane split the result) -- the schedule's `multipliers`, bound by BIND_OP;
  each requantization lane (24 x 27-bit product of `ming::requantize_lean`, two 31-bit products of
  `ming::add_requant`, one 32 x 31-bit of `ming::avgpool_requant`) costs 2 DSPs, the exact float32
  emulation `ming::requantize` (a channel without a lean datapath) 3; an average whose multiplier is a
  power of two (the datapath "shift": `ming::requantize_shift`, a rounding shift) none. Adders and
  comparators are LUTs.
  The figures per datapath are `ming_py.epilogues.base.LANE_COST`; each epilogue rule names its datapath.
* Memories: the storage plan's own count (`ming_py.storage`).
* LUT/FF of logic: a per-process control base, 12 LUTs per MAC lane (adder tree), per requantization
  lane 200 for the lean datapath with a shift constant to the process (abs and clamp, a 48-bit
  fraction compare, an 11-bit priority encoder, sign, zero point, saturation), 450 when the shift
  varies by channel (a 51-bit barrel shifter and masks), 1,200 for the exact emulation (two 64-bit
  normalizations); the kind's own datapath (`ProcessKind.logic_lut`: a channel permutation's output
  multiplexers); FF = 1.5 x logic LUT plus the registers
  of the storage plan. Rough by intent: the ILP needs the trend, the vendor report gives the truth.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass

from ming_py.adapters import pack_adapter, unpack_adapter
from ming_py.dataflow import Process, StreamGraph
from ming_py.kernel import kernel_spec, loop_of
from ming_py.kinds import trip_counts
from ming_py.array_layout import memory_cost
from ming_py.epilogues import lane_cost, rule_of
from ming_py.storage import plan_arrays

CONTROL_LUT = 300
LUT_PER_MAC = 12
# (LUT beyond the adder tree, DSP) of one MAC lane by multiplier: an 8 x 8-bit signed product in LUTs,
# or half a DSP48E2 and the split of its result (AMD WP486)
MAC_LANE = {"dsp": (0, 1.0), "fabric": (48, 0.0), "dsp_pair": (10, 0.5)}
def mac_lanes_within(budget) -> int:
    """The most MAC lanes a budget could hold: two per DSP48E2 (pairs) and the rest in its LUTs (the roofline
    is total MACs over these; a lower bound on the cycles of any design within the budget)."""
    fabric_lane = LUT_PER_MAC + MAC_LANE["fabric"][0]
    return round(budget.dsp / MAC_LANE["dsp_pair"][1]) + budget.lut // fabric_lane
PROGRESS_SAMPLES = 10  # points of each process's progress curve in the latency model


@dataclass(frozen=True)
class Choice:
    """A candidate schedule of one process."""

    unroll: tuple[tuple[str, int], ...]
    lanes_in: tuple[int, ...]
    lanes_out: tuple[int, ...]
    line_buffer_in: str = "bram"  # "bram" | "uram" (weights are ROMs: BRAM or LUTRAM, URAM has no init)
    multipliers: str = "dsp"  # ming_py.kinds.window.MULTIPLIERS
    requantizers: int = 0  # shared requantizers (`ming_py.kinds.base.shared_requantizers`); 0: one per lane

    def factor(self, loop: str) -> int:
        return dict(self.unroll).get(loop, 1)


@dataclass(frozen=True)
class Cost:
    cycles: int
    fill: int
    dsp: int
    bram18k: int
    uram: int
    lut: int
    ff: int
    # own-pace cycle of the write of the output tokens at 1/K, 2/K, ..., K/K of an image (K = PROGRESS_SAMPLES)
    progress: tuple[int, ...] = ()
    # per input: cycles from the arrival of its token at j/K to the write of the output token at j/K
    lags: tuple[tuple[int, ...], ...] = ()

    @property
    def vector(self) -> tuple[int, ...]:
        """Every latency figure, for comparing candidates."""
        return (self.cycles, self.fill) + self.progress + sum(self.lags, ())


def choice_spec(graph: StreamGraph, p: Process, choice: Choice):
    return kernel_spec(graph, p, choice.unroll, choice.lanes_in, choice.lanes_out, choice.requantizers)


def process_cost(graph: StreamGraph, p: Process, choice: Choice) -> Cost:
    spec = choice_spec(graph, p, choice)
    loop = loop_of(spec)
    cycles, fill = _with_adapters(graph, p, choice, loop.cycles, loop.fill, loop.drain)
    datapath = rule_of(p.epilogue).datapath(p.epilogue)
    requant_lanes = spec.requant_lanes if datapath is not None else 0
    requant_lut, requant_dsp = lane_cost(datapath, choice.multipliers) if requant_lanes else (0, 0)
    bram, uram, memory_lut, registers = memory_cost(plan_arrays(spec, p.epilogue, choice.line_buffer_in))
    mac_lut, mac_dsp = MAC_LANE[choice.multipliers]
    logic = CONTROL_LUT + (LUT_PER_MAC + mac_lut) * spec.macs + requant_lut * requant_lanes \
        + spec.process_kind.logic_lut(spec)
    dsp = math.ceil(mac_dsp * spec.macs) + requant_dsp * requant_lanes
    progress, lags = _progress(graph, p, choice, loop)
    return Cost(cycles, fill, dsp, bram, uram, logic + memory_lut, int(1.5 * logic) + registers,
                progress, lags)


def samples(tokens: int) -> list[int]:
    """The token numbers at 1/K, 2/K, ..., K/K of `tokens`."""
    return [math.ceil(j * tokens / PROGRESS_SAMPLES) - 1 for j in range(1, PROGRESS_SAMPLES + 1)]


@functools.lru_cache(maxsize=None)
def input_fractions(graph: StreamGraph, p: Process) -> tuple[tuple[float, ...], ...]:
    """Per input, the share of its tokens read before the output token at j/K is written (j = 1..K): what
    the output at j/K waits for, from the geometry alone (the loop with one lane and no unrolling), so the
    same for every candidate and the ILP can chain it linearly."""
    trips = trip_counts(graph, p)
    ones = tuple((loop, 1) for loop in trips)
    loop = loop_of(kernel_spec(graph, p, ones, (1,) * len(p.inputs), (1,) * len(p.outputs)))
    writes = loop.token_iterations("writes", 0, samples(graph.channels[p.outputs[0]].values))
    fractions = []
    for i, channel in enumerate(p.inputs):
        tokens = graph.channels[channel].values
        reads = loop.token_iterations("reads", i, list(range(tokens)))
        fractions.append(tuple(bisect.bisect_right(reads, w) / tokens for w in writes))
    return tuple(fractions)


def _progress(graph: StreamGraph, p: Process, choice: Choice, loop) -> tuple[tuple[int, ...], tuple]:
    """The progress curve of the process at its own pace and, per input, the lag from the arrival of the
    input token the output token at j/K waits for (`input_fractions`) to that output token's write."""
    def tokens(channel, lanes):
        return graph.channels[channel].values // lanes

    offset = sum(unpack_adapter(graph.channels[c].values, lanes).fill
                 for c, lanes in zip(p.inputs, choice.lanes_in) if c == graph.input.channel)
    writes = loop.token_iterations("writes", 0, samples(tokens(p.outputs[0], choice.lanes_out[0])))
    progress = tuple(offset + w + loop.depth for w in writes)
    lags = []
    for i, (channel, lanes, shares) in enumerate(zip(p.inputs, choice.lanes_in, input_fractions(graph, p))):
        count = tokens(channel, lanes)
        reads = loop.token_iterations("reads", i, [max(math.ceil(s * count) - 1, 0) for s in shares])
        lags.append(tuple(w - r + loop.depth + 1 for w, r in zip(writes, reads)))
    return progress, tuple(lags)


def _with_adapters(graph: StreamGraph, p: Process, choice: Choice, cycles: int, fill: int,
                   drain: int) -> tuple[int, int]:
    """(cycles, fill) of the process with the top function's AXI adapters it talks to, as one pipeline
    stage: the unpack adapter feeds it `fill` cycles late and bounds its finish by `drain` (its cycles
    from the last input token to the last output token) after its own end; the pack adapter starts at
    its first output and ends its own drain after its last."""
    for channel, lanes in zip(p.inputs, choice.lanes_in):
        if channel == graph.input.channel:
            unpack = unpack_adapter(graph.channels[channel].values, lanes)
            cycles = max(unpack.fill + cycles, unpack.cycles + drain)
            fill += unpack.fill
    outputs = {port.channel for port in graph.outputs}
    for channel, lanes in zip(p.outputs, choice.lanes_out):
        if channel in outputs:
            pack = pack_adapter(graph.channels[channel].values, lanes)
            cycles = max(cycles + pack.drain, fill + pack.cycles)
    return cycles, fill


def storage_plan(p: Process, choice: Choice, graph: StreamGraph) -> dict[str, str]:
    """The memory of each array of the process that is not registers ("lutram", "bram" or "uram")."""
    spec = choice_spec(graph, p, choice)
    return {role: a.memory for role, a in plan_arrays(spec, p.epilogue, choice.line_buffer_in).items()
            if a.memory != "register"}
