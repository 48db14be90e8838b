"""Latency and resource models of one process under one candidate schedule.

The models follow the loop structure of the templates in emit/templates/process/
(each pipelined loop at II=1); their constants are stated where they are used.
Cycles are for one image. A process is a pipeline stage of the dataflow region:
`cycles` is how long it is busy per image (the slowest stage sets the
throughput), `fill` how long after its first input it emits its first output
(fills add up along a path; MING §IV-C, Stream-HLS §3) and `drain` how long it
still works after its last input arrived (the outputs of the bottom padding rows,
or a dense layer's whole computation).
The top function's AXI adapters (`unpack_axis`, `pack_axis`: max(words,
tokens) iterations plus their depth) are counted in the process they feed or
drain, the stage they form with it.

Resources (DSP48E2, BRAM18K, URAM, LUT, FF) follow DESIGN.md's anchors:
* DSP: one int8 multiply-accumulate lane per DSP48E2 (no INT8 packing, WP486
  would halve it); each requantization lane (24 x 24-bit product of
  `ming::requantize`, two 31-bit products of `ming::add_requant`, one 32 x 31-bit
  of `ming::avgpool_requant`) costs 2 DSPs. Adders and comparators are LUTs.
* BRAM18K: 18,432 bits, two ports of up to 36 bits (2048 x 9 holds 2048 int8);
  URAM: 294,912 bits, two 72-bit ports (4096 x 72 holds 36,864 int8 packed 9 to
  a word). A cyclically partitioned array needs one bank per partition; int8
  weights read in parallel are packed 4 to a 36-bit BRAM word so one port serves
  4 lanes. Weights are ROMs, and URAM cannot be initialised by the bitstream, so
  they live in BRAM (or LUTRAM when tiny); large line buffers may go to URAM.
  Arrays whose banks hold under 1,024 bits each go to LUTRAM/registers.
* LUT/FF: a per-process control base, 12 LUTs per MAC lane (adder tree), 150
  per requantization lane, LUTRAM at 64 bits per LUT; FF = 1.5 x LUT. Rough by
  intent: the ILP needs the trend, the vendor report gives the truth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ming_py.dataflow import WINDOW_KINDS, Process, StreamGraph
from ming_py.ir import AccRequant, AddRequant, AverageRequant

PIPELINE_DEPTH = 4  # cycles from a pipelined loop's first iteration to its first result
LOOP_OVERHEAD = 2  # cycles per iteration of an outer (not pipelined) loop: exit test and index update
BRAM18K_BITS = 18_432
LUTRAM_MAX_BITS = 1_024
CONTROL_LUT = 300
LUT_PER_MAC = 12
LUT_PER_REQUANT = 150
DSP_PER_REQUANT = 2
AXIS_VALUES_PER_WORD = 8  # int8 values per 64-bit AXI4-Stream word


@dataclass(frozen=True)
class Choice:
    """A candidate schedule of one process."""

    unroll: tuple[tuple[str, int], ...]
    lanes_in: tuple[int, ...]
    lanes_out: tuple[int, ...]
    line_buffer_in: str = "bram"  # "bram" | "uram" (weights are ROMs: BRAM or LUTRAM, URAM has no init)

    def factor(self, loop: str) -> int:
        return dict(self.unroll).get(loop, 1)


@dataclass(frozen=True)
class Cost:
    cycles: int
    fill: int
    drain: int
    dsp: int
    bram18k: int
    uram: int
    lut: int
    ff: int


def bram_blocks(elements: int, banks: int) -> int:
    """BRAM18K (2048 x 9) for `elements` int8 values in `banks` cyclic partitions; 0 if LUTRAM suffices."""
    if math.ceil(elements / banks) * 8 <= LUTRAM_MAX_BITS:  # every bank is tiny
        return 0
    return banks * math.ceil(math.ceil(elements / banks) / 2048)


def packed_blocks(elements: int, parallel_reads: int, memory: str) -> int:
    """Blocks for a ROM of int8 values read `parallel_reads` at a time, packed into wide words.

    BRAM18K: 4 int8 per 36-bit port, 512 words deep; URAM: 9 int8 per 72-bit port,
    4096 words. Each bank serves one word per cycle on one port; two banks share a
    block (its two ports) when both fit in its depth.
    """
    per_word, depth = (4, 512) if memory == "bram" else (9, 4096)
    banks = math.ceil(parallel_reads / per_word)
    words_per_bank = math.ceil(elements / (banks * per_word))
    if 2 * words_per_bank <= depth:
        return math.ceil(banks / 2)
    return banks * math.ceil(words_per_bank / depth)


def lutram_luts(bits: int) -> int:
    return math.ceil(bits / 64)


def process_cost(graph: StreamGraph, p: Process, choice: Choice) -> Cost:
    ins = [graph.channels[c] for c in p.inputs]
    outs = [graph.channels[c] for c in p.outputs]
    out = outs[0]
    read = sum(c.channels // lanes for c, lanes in zip(ins, choice.lanes_in))  # cycles per input pixel
    write = sum(c.channels // lanes for c, lanes in zip(outs, choice.lanes_out))  # per output pixel
    requant_lanes = choice.lanes_out[0] if _has_requant(p) else 0
    # compute processes requantize while writing: one pipelined loop over the output tokens
    write_output = out.channels // choice.lanes_out[0] + PIPELINE_DEPTH
    macs = 0
    if p.kind in WINDOW_KINDS or p.kind == "pointwise":
        w = p.window
        k = w.window_size
        if p.kind == "conv":
            macs = choice.factor("oc") * choice.factor("ic") * choice.factor("k")
            compute = (w.out_channels // choice.factor("oc")) * (w.in_channels // choice.factor("ic")) \
                * (k // choice.factor("k"))
        elif p.kind == "pointwise":
            macs = choice.factor("oc") * choice.factor("ic")
            compute = (w.out_channels // choice.factor("oc")) * (w.in_channels // choice.factor("ic"))
        else:
            macs = choice.factor("c") * choice.factor("k") if p.kind == "depthwise" else 0
            compute = (w.out_channels // choice.factor("c")) * (k // choice.factor("k"))
        compute += PIPELINE_DEPTH  # the window is fetched inside this loop (conv: during its first channel tile)
        per_output = compute + write_output  # the position loop's overhead is counted per position below
        positions = w.padded_height * w.padded_width if p.kind != "pointwise" else w.in_height * w.in_width
        outputs = w.out_height * w.out_width
        cycles = w.in_height * w.in_width * read + outputs * per_output + positions * LOOP_OVERHEAD
        # first output: the rows and columns the first window needs, then one output's work
        rows = max((w.kernel[0] - 1) * w.dilation[0] + 1 - w.pads[0], 1)
        cols = max((w.kernel[1] - 1) * w.dilation[1] + 1 - w.pads[1], 1)
        fill = ((rows - 1) * w.in_width + cols) * (read + LOOP_OVERHEAD) + per_output
        after_last_input, positions_after = _outputs_after_last_input(p)
        drain = after_last_input * per_output + positions_after * LOOP_OVERHEAD
    elif p.kind == "dense":
        k_total = ins[0].values
        macs = choice.factor("n") * choice.factor("k")
        compute = (out.channels // choice.factor("n")) * (k_total // choice.factor("k")) + PIPELINE_DEPTH
        cycles = ins[0].pixels * read + compute + write_output
        fill = cycles  # nothing comes out before the whole input is in
        drain = cycles - ins[0].pixels * read
    elif p.kind == "global_avgpool":
        accumulate = ins[0].channels // choice.factor("c") + PIPELINE_DEPTH
        cycles = ins[0].pixels * (read + accumulate) + write_output
        fill = cycles
        drain = accumulate + write_output
    else:  # add, rescale, concat, split: one pixel at a time
        compute = out.channels // choice.lanes_out[0] + PIPELINE_DEPTH if p.kind in ("add", "rescale") else 0
        per_pixel = read + compute + write + LOOP_OVERHEAD
        cycles = out.pixels * per_pixel
        fill = drain = per_pixel
    cycles, fill, drain = _with_adapters(graph, p, choice, cycles, fill, drain)
    dsp = macs + DSP_PER_REQUANT * requant_lanes
    bram, uram, lut = _memories(p, choice)
    lut += CONTROL_LUT + LUT_PER_MAC * macs + LUT_PER_REQUANT * requant_lanes
    return Cost(int(cycles), int(fill), int(drain), int(dsp), int(bram), int(uram), int(lut), int(1.5 * lut))


@dataclass(frozen=True)
class Adapter:
    """An AXI4-Stream adapter of the top function (`ming::unpack_axis` / `pack_axis`): one pipelined
    loop (II=1) moving at most one 64-bit word and one token per iteration."""

    cycles: int  # trip count + pipeline depth
    fill: int    # unpack: cycles to its first token (the process behind it starts then)
    drain: int   # pack: cycles from reading its last token to its last word


def unpack_adapter(values: int, lanes: int) -> Adapter:
    """Words -> tokens: max(words, tokens) iterations; a token leaves as soon as its last value arrived."""
    words, tokens = -(-values // AXIS_VALUES_PER_WORD), values // lanes
    first_token = -(-lanes // AXIS_VALUES_PER_WORD)  # iterations until L values are in
    return Adapter(max(words, tokens) + PIPELINE_DEPTH, first_token + PIPELINE_DEPTH, 0)


def pack_adapter(values: int, lanes: int) -> Adapter:
    """Tokens -> words: max(words, tokens) iterations, one more when the final token completes two words
    (one write per cycle); the last token is read in the iteration its buffer has room for it."""
    words, tokens = -(-values // AXIS_VALUES_PER_WORD), values // lanes
    completed_by_last = words - (values - lanes) // AXIS_VALUES_PER_WORD
    trips = max(words, tokens + max(completed_by_last - 1, 0))
    last_read = _pack_last_read(values, lanes)
    return Adapter(trips + PIPELINE_DEPTH, 0, trips - last_read + PIPELINE_DEPTH)


def _pack_last_read(values: int, lanes: int) -> int:
    """The iteration of pack_axis that reads the last token (it reads while fewer than 8 values wait)."""
    held = read = 0
    for i in range(values // lanes + values):
        if held < AXIS_VALUES_PER_WORD:
            held += lanes
            read += 1
            if read == values // lanes:
                return i
        held -= min(held, AXIS_VALUES_PER_WORD)
    raise AssertionError("unreachable")


def _with_adapters(graph: StreamGraph, p: Process, choice: Choice, cycles: int, fill: int,
                   drain: int) -> tuple[int, int, int]:
    """The process with the top function's AXI adapters it talks to, as one pipeline stage: the unpack
    adapter feeds it `fill` cycles late and bounds its finish by its own cycles; the pack adapter starts at
    its first output and ends `drain` after its last (the chain rule of the ILP's latency model)."""
    for channel, lanes in zip(p.inputs, choice.lanes_in):
        if channel == graph.input.channel:
            unpack = unpack_adapter(graph.channels[channel].values, lanes)
            cycles = max(unpack.fill + cycles, unpack.cycles + drain)
            fill += unpack.fill
    for channel, lanes in zip(p.outputs, choice.lanes_out):
        if channel == graph.output.channel:
            pack = pack_adapter(graph.channels[channel].values, lanes)
            cycles = max(cycles + pack.drain, fill + pack.cycles)
            drain += pack.drain
    return cycles, fill, drain


def _outputs_after_last_input(p: Process) -> tuple[int, int]:
    """(outputs computed at or after the last input pixel, padded positions visited after it)."""
    w = p.window
    if p.kind == "pointwise":
        last_kept = (w.in_height - 1) % w.stride[0] == 0 and (w.in_width - 1) % w.stride[1] == 0
        return int(last_kept), 0
    last_row, last_col = w.pads[0] + w.in_height - 1, w.pads[1] + w.in_width - 1  # padded coordinates
    after = 0
    for oh in range(w.out_height):
        row = oh * w.stride[0] + (w.kernel[0] - 1) * w.dilation[0]
        if row < last_row:
            continue
        for ow in range(w.out_width):
            col = ow * w.stride[1] + (w.kernel[1] - 1) * w.dilation[1]
            after += (row, col) >= (last_row, last_col)
    positions = w.pads[3] + w.pads[2] * w.padded_width
    return after, positions


def _has_requant(p: Process) -> bool:
    return isinstance(p.epilogue, (AccRequant, AddRequant, AverageRequant))


def storage_plan(p: Process, choice: Choice) -> dict[str, str]:
    """The memory each BRAM-worthy array is bound to ("bram", "uram" or "lutram")."""
    plan = {}
    for buffer in p.buffers:
        if buffer.role == "weights":
            per_bank = buffer.total_bits / math.ceil(_weight_reads(choice) / 4)
            plan[buffer.name] = "lutram" if per_bank <= LUTRAM_MAX_BITS else "bram"
        elif buffer.role in ("line_buffer", "row_buffer"):
            in_bram = bram_blocks(buffer.total_bits // 8, _banks(p, choice))
            plan[buffer.name] = choice.line_buffer_in if in_bram else "lutram"
    return plan


def _memories(p: Process, choice: Choice) -> tuple[int, int, int]:
    """(BRAM18K, URAM, LUT) of the process's arrays under `choice`."""
    bram = uram = lut = 0
    plan = storage_plan(p, choice)
    for buffer in p.buffers:
        bits = buffer.total_bits
        memory = plan.get(buffer.name, "lutram")
        if memory == "lutram":
            lut += lutram_luts(bits)
        elif buffer.role == "weights":
            bram += packed_blocks(bits // 8, _weight_reads(choice), "bram")
        elif memory == "uram":
            banks = _banks(p, choice)
            uram += banks * math.ceil(math.ceil(bits / 8 / banks) / 36_864)
        else:
            bram += bram_blocks(bits // 8, _banks(p, choice))
    return bram, uram, lut


def _weight_reads(choice: Choice) -> int:
    """Weights read per cycle: the product of the unroll factors (each MAC lane reads its own)."""
    return math.prod(f for _, f in choice.unroll)


def _banks(p: Process, choice: Choice) -> int:
    """Cyclic partitions of a line/row buffer: the unrolled input reads and the input lanes."""
    unrolled = {"conv": "ic", "pointwise": "ic", "dense": "k"}.get(p.kind, "c")
    return max(choice.factor(unrolled), choice.lanes_in[0])
