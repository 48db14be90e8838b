"""Latency and resource models of one process under one candidate schedule.

Both come from the process's own descriptions, the ones the emitted C++ is generated from:
its pipelined loop (`ming_py.process_spec`: iterations of each position, where tokens are read and
written, pipeline depth) and its storage plan (`ming_py.storage`: every array's banks, words and
memory). Cycles are for one image. A process is a pipeline stage of the dataflow region:
`cycles` is how long its loop runs per image with every token there when wanted (iterations +
depth; the slowest stage sets the throughput), `fill` how long after its start it writes its first
output token (fills add up along a path; MING §IV-C, Stream-HLS §3), `progress` when it writes the
output tokens at 1/K, ..., K/K of an image at its own pace, `lags` how long after the input token
each of those waits for arrives it can write it, and `first_lags` the same for its first output token (the ILP
chains these along the channels). `ming simulate` steps through the same loops with blocking FIFOs.
The top function's AXI adapters (`unpack_axis`, `pack_axis`: max(words, tokens) iterations plus
their depth) are counted in the process they feed or drain, the stage they form with it; with several
outputs the output writer's `pack_axis` of each, and the ILP adds that they run one after the other.

Resources (DSP48E2, BRAM18K, URAM, LUT, FF), per primitive (`resources`, named in report.json's
"resources_by_primitive" and fitted by `ming compare --write-calibration`):
* Every datapath figure is a yosys synthesis (`synth_xilinx -family xcup`) of a Verilog model of what the
  C++ computes, rerun with `python benchmarks/calibrate.py` into ming_py/primitives.json (`ming_py.primitives`):
  - "mac": per MAC lane its int8 product by the schedule's `multipliers` (a DSP48E2, LUT fabric, or half a
    DSP48E2 for two lanes sharing their input, AMD WP486) and its adder tree term; per accumulator lane the
    accumulate;
  - "requantizer": per requantizer (one per output lane, or the fewer shared ones) its datapath
    (`ming_py.epilogues.base.lane_datapath`: a fixed-point multiplier and shift as constants or from ROMs, as the
    process's arrays have them; `LANE_PRIMITIVES`; the DSPs of wide products where yosys tiles them poorly from
    AMD UG579, recorded in the table), and for shared ones a select per latched accumulator bit;
  - "control": every counter register of the loop (`ming_py.kinds.base.control_counters`) by its width;
  - "logic": the kind's own datapath (`ProcessKind.logic_lut`: max-pool comparators, average adders, a channel
    permutation's multiplexers);
  - "adapter": the top function's AXI adapters (`unpack_axis`, `pack_axis`) by their lanes, in the process they
    feed or drain;
  - "loader": for weights in URAM, the process's load loop and its share of the weight distributor
    (`ming_py.weights_load.loader_cost`); the load itself runs once at start and is not charged per image;
  - "ddr_port": for weights streamed from DDR, the process's m_axi read adapter and fetch loop
    (`ming_py.weights_ddr.ddr_port_cost`; its read buffer, request FIFO and fetch stream go to "memory").
  What Vitis HLS adds around a synthesized datapath (pipeline enables, handshakes, binding) is FINN-R's
  factor 1.1 on LUTs (Blott et al., TRETS 2018: FINN's `lut_estimation`, c1 = 1.1).
* "memory": the storage plan's own count (`ming_py.storage`): BRAM18K, URAM, LUTRAM and registers.
* FF: 1.5 per logic LUT for the pipeline registers HLS inserts, plus the registers of the storage plan and of
  the counters. Rough by intent: `ming compare` reads what Vitis and Vivado achieved, and
  `--calibration` scales each primitive by the factors fitted from it.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from dataclasses import dataclass

from ming_py import primitives, weights_load
from ming_py.adapters import pack_adapter, pack_loop, unpack_adapter
from ming_py.calibration import Calibration
from ming_py.dataflow import Process, StreamGraph
from ming_py.process_spec import process_spec, loop_of
from ming_py.kinds import trip_counts
from ming_py.kinds.base import control_counters
from ming_py.line_buffers.fifo import DEEPEST_PIXELS
from ming_py.array_layout import memory_cost
from ming_py.epilogues import lane_cost, lane_datapath
from ming_py.errors import MingError
from ming_py.storage import plan_arrays
from ming_py.weights_ddr import ddr_port_cost, pass_words

HLS_LUT_OVERHEAD = 1.1  # FINN-R's c1: LUTs of an HLS datapath over its synthesized logic
FF_PER_LOGIC_LUT = 1.5
LATCH_SELECT_LUT = 1  # per latched accumulator bit of shared requantizers: load or shift (a LUT6 2:1 select)
# the calibrated product of one MAC lane by multiplier, and the DSP48E2 share of a lane
MAC_PRODUCT = {"dsp": ("mac_product_dsp", 1), "fabric": ("mac_product_fabric", 1), "dsp_pair": ("mac_pair_dsp", 2)}


def mac_lane(multipliers: str) -> tuple[float, float]:
    """(LUT, DSP) of one MAC lane's product and adder tree term."""
    primitive, lanes = MAC_PRODUCT[multipliers]
    return (primitives.lut(primitive) / lanes + primitives.adder_tree_per_term(),
            primitives.dsp(primitive) / lanes)


def mac_lanes_within(budget) -> int:
    """The most MAC lanes a budget could hold: two per DSP48E2 (pairs) and the rest in its LUTs (the roofline
    is total MACs over these; a lower bound on the cycles of any design within the budget)."""
    _, pair_dsp = mac_lane("dsp_pair")
    fabric_lut, _ = mac_lane("fabric")
    return round(budget.dsp / pair_dsp) + int(budget.lut // (HLS_LUT_OVERHEAD * fabric_lut))


PROGRESS_SAMPLES = 10  # points of each process's progress curve in the latency model


@dataclass(frozen=True)
class Choice:
    """A candidate schedule of one process."""

    unroll: tuple[tuple[str, int], ...]
    lanes_in: tuple[int, ...]
    lanes_out: tuple[int, ...]
    line_buffer_in: str = "bram"  # "bram" | "uram"
    multipliers: str = "dsp"  # ming_py.kinds.window.MULTIPLIERS
    requantizers: int = 0  # shared requantizers (`ming_py.kinds.base.shared_requantizers`); 0: one per lane
    # `ming_py.storage.WEIGHT_MEMORIES`: "bram" (a ROM where its size puts it), "lutram" (a ROM in LUTs),
    # "uram" (no bitstream init, UG573: loaded at start through the weight port, `ming_py.weights_load`) or "ddr"
    # (streamed a tile at a time every image, `ming_py.weights_ddr`: its own loop)
    weights: str = "bram"
    bands: int = 1  # weights from DDR: bands of rows the map is taken in, the weights fetched once per band

    def factor(self, loop: str) -> int:
        return dict(self.unroll).get(loop, 1)

    @property
    def loop_form(self) -> tuple[bool, int]:
        """What shapes its loop beyond the unroll factors and lanes: (weights streamed from DDR, bands)."""
        return self.weights == "ddr", self.bands


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
    # (resource, primitive, planned amount before calibration): what the totals above are made of
    parts: tuple[tuple[str, str, float], ...] = ()
    # per input: cycles from the arrival of its token at k/K (its producer's own progress point) to the write of
    # the first output token of the progress curve that follows its read (`samples_after`)
    pushes: tuple[tuple[int, ...], ...] = ()
    # per output: the cycles it writes nothing between two of its rows, summed up to the input token its consumer's
    # output token at j/K waits for (`row_gaps`)
    row_gaps: tuple[tuple[int, ...], ...] = ()
    # per input: cycles from the arrival of the input token the first output token waits for (`first_fractions`)
    # to that token's write
    first_lags: tuple[int, ...] = ()

    @property
    def vector(self) -> tuple[int, ...]:
        """Every latency figure, for comparing candidates."""
        return (self.cycles, self.fill) + self.progress + sum(self.lags, ()) + sum(self.pushes, ()) + \
            sum(self.row_gaps, ()) + self.first_lags


def choice_spec(graph: StreamGraph, p: Process, choice: Choice):
    return process_spec(graph, p, choice.unroll, choice.lanes_in, choice.lanes_out, choice.requantizers,
                        *choice.loop_form)


def process_cost(graph: StreamGraph, p: Process, choice: Choice, calibration: Calibration | None = None,
                 timings: dict | None = None) -> Cost:
    """The candidate's cost; `timings` keeps the loop and timing of each (unroll, lanes, requantizers) of the
    process already costed: candidates that differ only in their memories or multipliers share them."""
    key = (choice.unroll, choice.lanes_in, choice.lanes_out, choice.requantizers, choice.loop_form)
    timing = None if timings is None else timings.get(key)
    if timing is None:
        spec = choice_spec(graph, p, choice)
        loop = loop_of(spec)
        timing = (spec, loop.iterations, _with_adapters(graph, p, choice, loop.cycles, loop.fill, loop.drain),
                  _progress(graph, p, choice, loop), row_gaps(graph, p, choice, loop))
        if timings is not None:
            timings[key] = timing
    spec, iterations, (cycles, fill), (progress, lags, pushes, first_lags), gaps = timing
    parts = resources(graph, p, choice, spec, iterations)
    totals = {r: 0.0 for r in ("dsp", "bram18k", "uram", "lut", "ff")}
    for resource, primitive, amount in parts:
        totals[resource] += amount * (calibration.factor(resource, primitive) if calibration else 1.0)
    _check_finite(p, totals)
    return Cost(cycles, fill, *(math.ceil(totals[r] - 1e-9) for r in ("dsp", "bram18k", "uram", "lut", "ff")),
                progress, lags, parts, pushes, gaps, first_lags)


def _check_finite(p: Process, totals: dict[str, float]) -> None:
    """The calibrated amounts are numbers ming can round (a factor's product may not be)."""
    for resource, total in totals.items():
        if not math.isfinite(total):
            raise MingError(f"process {p.name}: its calibrated {resource} is not finite ({total:g}); check the "
                            "calibration file's factors (ming compare --write-calibration writes them)")


def resources(graph: StreamGraph, p: Process, choice: Choice, spec, trip_count: int):
    """(resource, primitive, amount) of a process under a schedule: see the module's docstring."""
    lut = {}
    mac_lut, mac_dsp = mac_lane(choice.multipliers)
    if spec.macs:
        lut["mac"] = mac_lut * spec.macs + primitives.adder_tree_base() * spec.lanes_out[0]
    arrays = plan_arrays(spec, p.epilogue, choice.line_buffer_in, choice.weights)
    datapath = lane_datapath(p.epilogue, arrays)
    requant_lut, requant_dsp = lane_cost(datapath, choice.multipliers) if datapath is not None else (0, 0)
    if datapath is not None:
        lut["requantizer"] = requant_lut * spec.requant_lanes
        if spec.requant_steps > 1:
            lut["requantizer"] += LATCH_SELECT_LUT * 32 * spec.lanes_out[0]
    counters = control_counters(spec, p.epilogue, trip_count)
    lut["control"] = sum(primitives.counter_lut(bits(m)) for m in counters if m > 0)
    logic = spec.process_kind.logic_lut(spec)
    if logic:
        lut["logic"] = logic
    adapters = _adapter_lut(graph, p, choice)
    if adapters:
        lut["adapter"] = adapters
    bram, uram, memory_lut, registers = memory_cost(arrays)
    loader = weights_load.loader_cost(arrays["weights"]) if "weights" in arrays and arrays["weights"].loaded else None
    if loader is not None:
        lut["loader"] = loader.lut
        memory_lut += loader.fifo_lut
        registers += loader.ff
    if choice.weights == "ddr":
        port = ddr_port_cost(pass_words(spec), spec.bands)
        lut["ddr_port"] = port.lut
        memory_lut += port.lutram
        registers += port.ff
        bram += port.bram18k
    parts = [("lut", primitive, HLS_LUT_OVERHEAD * amount) for primitive, amount in lut.items()]
    parts += [("lut", "memory", memory_lut), ("bram18k", "memory", bram), ("uram", "memory", uram)]
    parts += [("dsp", "mac", math.ceil(mac_dsp * spec.macs)), ("dsp", "requantizer", requant_dsp * spec.requant_lanes),
              ("dsp", "logic", spec.process_kind.logic_dsp(spec))]
    parts += [("ff", primitive, FF_PER_LOGIC_LUT * amount) for primitive, amount in lut.items()]
    parts += [("ff", "memory", registers), ("ff", "control", sum(bits(m) for m in counters if m > 0))]
    return tuple((resource, primitive, amount) for resource, primitive, amount in parts if amount)


def bits(maximum: int) -> int:
    return max(maximum.bit_length(), 1)


def _adapter_lut(graph: StreamGraph, p: Process, choice: Choice) -> int:
    """LUTs of the AXI adapters the process talks to (`unpack_axis` feeding it, `pack_axis` draining it)."""
    outputs = {port.channel for port in graph.outputs}
    unpack = sum(primitives.adapter_lut("unpack_axis", lanes)
                 for c, lanes in zip(p.inputs, choice.lanes_in) if c == graph.input.channel)
    return unpack + sum(primitives.adapter_lut("pack_axis", lanes)
                        for c, lanes in zip(p.outputs, choice.lanes_out) if c in outputs)


def samples(tokens: int) -> list[int]:
    """The token numbers at 1/K, 2/K, ..., K/K of `tokens`."""
    return [math.ceil(j * tokens / PROGRESS_SAMPLES) - 1 for j in range(1, PROGRESS_SAMPLES + 1)]


@functools.lru_cache(maxsize=None)
def _unit_loop_writes(graph: StreamGraph, p: Process, streamed: bool = False, bands: int = 1):
    """The process's loop with one lane and no unrolling (its geometry alone, and whether its weights stream from
    DDR: `streamed`, its map in `bands` bands), and the iterations at which it writes its output tokens at 1/K, ...,
    K/K."""
    ones = tuple((loop, 1) for loop in trip_counts(graph, p))
    loop = loop_of(process_spec(graph, p, ones, (1,) * len(p.inputs), (1,) * len(p.outputs), ddr_weights=streamed,
                                bands=bands))
    return loop, loop.token_iterations("writes", 0, samples(graph.channels[p.outputs[0]].values))


@functools.lru_cache(maxsize=None)
def _shares_read(graph: StreamGraph, p: Process, streamed: bool = False, bands: int = 1) -> tuple[tuple[float, ...], ...]:
    """Per input, the share of its tokens read before the first output token, then before the output tokens at
    1/K, ..., K/K, are written: from the geometry alone (the loop with one lane and no unrolling, and whether its
    weights stream from DDR: `streamed`, in `bands`)."""
    loop, writes = _unit_loop_writes(graph, p, streamed, bands)
    first = loop.token_iterations("writes", 0, [0])[0]
    shares = []
    for i, channel in enumerate(p.inputs):
        tokens = graph.channels[channel].values
        reads = loop.token_iterations("reads", i, list(range(tokens)))
        shares.append(tuple(bisect.bisect_right(reads, w) / tokens for w in [first] + writes))
    return tuple(shares)


@functools.lru_cache(maxsize=None)
def input_fractions(graph: StreamGraph, p: Process, streamed: bool = False,
                    bands: int = 1) -> tuple[tuple[float, ...], ...]:
    """Per input, the share of its tokens read before the output token at j/K is written (j = 1..K): what
    the output at j/K waits for, from the geometry alone (the loop with one lane and no unrolling), so the
    same for every candidate (of its loop's form: weights `streamed` from DDR or not, in `bands`) and the ILP can
    chain it linearly."""
    return tuple(shares[1:] for shares in _shares_read(graph, p, streamed, bands))


@functools.lru_cache(maxsize=None)
def first_fractions(graph: StreamGraph, p: Process, streamed: bool = False, bands: int = 1) -> tuple[float, ...]:
    """Per input, the share of its tokens read before the first output token is written: what the process's
    first output waits for, from the geometry alone like `input_fractions` (a window's first rows, a
    reduction's whole input)."""
    return tuple(shares[0] for shares in _shares_read(graph, p, streamed, bands))


@functools.lru_cache(maxsize=None)
def samples_after(graph: StreamGraph, p: Process, streamed: bool = False,
                  bands: int = 1) -> tuple[tuple[int | None, ...], ...]:
    """Per input, for its token at k/K (k = 1..K, the token its producer's progress curve times), the first
    point j of the process's own progress curve written after its read; None if none is. From the geometry
    alone (the loop with one lane and no unrolling), like `input_fractions`: the ILP pairs these points."""
    loop, writes = _unit_loop_writes(graph, p, streamed, bands)
    after = []
    for i, channel in enumerate(p.inputs):
        reads = loop.token_iterations("reads", i, samples(graph.channels[channel].values))
        after.append(tuple(j if (j := bisect.bisect_left(writes, r)) < len(writes) else None for r in reads))
    return tuple(after)


def _progress(graph: StreamGraph, p: Process, choice: Choice, loop) -> tuple[tuple[int, ...], tuple, tuple, tuple]:
    """The progress curve of the process at its own pace and, per input, the lag from the arrival of the
    input token the output token at j/K waits for (`input_fractions`) to that output token's write, the
    `_pushes`, and per input the same lag for the first output token (`first_fractions`)."""
    def tokens(channel, lanes):
        return graph.channels[channel].values // lanes

    offset = sum(unpack_adapter(graph.channels[c].values, lanes).fill
                 for c, lanes in zip(p.inputs, choice.lanes_in) if c == graph.input.channel)
    sampled = samples(tokens(p.outputs[0], choice.lanes_out[0]))
    writes = loop.token_iterations("writes", 0, sampled)
    paced = _output_pace(graph, p, choice, loop, sampled, writes)
    progress = tuple(offset + w + loop.depth + late for w, late in zip(writes, paced))
    lags, first_lags = [], []
    first_write = loop.token_iterations("writes", 0, [0])[0]
    for i, (channel, lanes, shares, first) in enumerate(zip(p.inputs, choice.lanes_in,
                                                            input_fractions(graph, p, *choice.loop_form),
                                                            first_fractions(graph, p, *choice.loop_form))):
        count = tokens(channel, lanes)
        reads = loop.token_iterations("reads", i, [max(math.ceil(s * count) - 1, 0) for s in (first,) + shares])
        first_lags.append(first_write - reads[0] + loop.depth + 1)
        lags.append(tuple(w - r + loop.depth + 1 for w, r in zip(writes, reads[1:])))
    return progress, tuple(lags), _pushes(graph, p, choice, loop, writes), tuple(first_lags)


def row_gaps(graph: StreamGraph, p: Process, choice: Choice, loop) -> tuple[tuple[int, ...], ...]:
    """Per output, the cycles between the last token of a row and the first of the next (a strided window
    writes nothing while it reads the rows it skips), summed over the rows before the input token its
    consumer's output token at j/K waits for (`input_fractions`); () for an output the accelerator sends.
    Through a FIFO of a few pixels its consumer runs dry in these (`starved_rows`)."""
    gaps = []
    for out, (channel, lanes) in enumerate(zip(p.outputs, choice.lanes_out)):
        c = graph.channels[channel]
        consumer = next((q for q in graph.processes if q.name == c.consumer), None)
        if consumer is None:
            gaps.append(())
            continue
        per_row = c.values // lanes // c.height
        ends = [per_row * (row + 1) - 1 for row in range(c.height - 1)]
        last, first = (loop.token_iterations("writes", out, tokens) for tokens in (ends, [e + 1 for e in ends]))
        summed = list(itertools.accumulate(b - a for a, b in zip(last, first)))
        counts = starved_rows(graph, consumer)[consumer.inputs.index(channel)]
        gaps.append(tuple(summed[n - 1] if n else 0 for n in counts))
    return tuple(gaps)


@functools.lru_cache(maxsize=None)
def starved_rows(graph: StreamGraph, p: Process) -> tuple[tuple[int, ...], ...]:
    """Per input, the rows of its producer that end before the input token the output token at j/K waits for
    (`input_fractions`): the gaps between them its FIFO may leave the process waiting in, from the geometry alone."""
    rows = []
    for channel, shares in zip(p.inputs, input_fractions(graph, p)):
        c = graph.channels[channel]
        per_row = c.values // c.height
        rows.append(tuple(min(max(math.ceil(s * c.values) - 1, 0) // per_row, c.height - 1) for s in shares))
    return tuple(rows)


def starved_cover(graph: StreamGraph, channel: str) -> float:
    """The share of its consumer's cycles that the FIFO keeps it busy through a gap of its producer, at the
    deepest the build's sizing may make it (DEEPEST_PIXELS pixels): so the row holds for every design the build
    emits, a lower bound on its latency, whatever depth the sizing then picks. A consumer streaming its weights from
    DDR reads its input faster than its cycles over the pixels (it buffers the map before its tiles): the same share
    leaves it a looser bound, still a lower one, and `Model._starved` and `estimate` take the same."""
    c = graph.channels[channel]
    return DEEPEST_PIXELS / (c.height * c.width)


def _pushes(graph: StreamGraph, p: Process, choice: Choice, loop, writes: list[int]) -> tuple[tuple[int, ...], ...]:
    """Per input, from the arrival of its token at k/K to the write of the progress point that follows its read
    (`samples_after`): the producer's point needs no interpolation, and the wait of the tokens between two of
    the process's own points shows."""
    pushes = []
    after_reads = samples_after(graph, p, *choice.loop_form)
    for i, (channel, lanes, after) in enumerate(zip(p.inputs, choice.lanes_in, after_reads)):
        reads = loop.token_iterations("reads", i, samples(graph.channels[channel].values // lanes))
        pushes.append(tuple(0 if j is None else writes[j] - r + loop.depth + 1 for j, r in zip(after, reads)))
    return tuple(pushes)


def _output_pace(graph: StreamGraph, p: Process, choice: Choice, loop, sampled: list[int], writes: list[int]):
    """Per sampled output token, how much later than its own pace the process writes it because the output
    port's `pack_axis` takes it later (a token of more than 8 lanes is several 64-bit words): the adapter
    starts with the first token and reads the others at its own pace. (A token that waits for its input is
    not later for it: the adapter is ahead by then.)"""
    channel = p.outputs[0]
    if channel not in {port.channel for port in graph.outputs}:
        return [0] * len(sampled)
    pack = pack_loop(graph.channels[channel].values, choice.lanes_out[0])
    first_write = loop.token_iterations("writes", 0, [0])[0]
    first_read, *reads = pack.token_iterations("reads", 0, [0] + sampled)
    return [max(first_write + r - first_read - w, 0) for w, r in zip(writes, reads)]


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
    """The memory of each array of the process that is not registers ("lutram", "bram" or "uram"); for weights
    streamed from DDR, "weights": "ddr" (no array holds them all) and "line_buffer": the memory chosen for the map
    buffers of its loop where they are too large for LUTRAM (the setting that places them, `ilp.pins`)."""
    spec = choice_spec(graph, p, choice)
    plan = {role: a.memory for role, a in plan_arrays(spec, p.epilogue, choice.line_buffer_in, choice.weights).items()
            if a.memory != "register"}
    if choice.weights != "ddr":
        return plan
    placed = choice.line_buffer_in in (plan.get("in_map"), plan.get("out_map"))
    return plan | {"weights": "ddr"} | ({"line_buffer": choice.line_buffer_in} if placed else {})
