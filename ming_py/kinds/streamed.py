"""The loop of a process whose weights stream from DDR (`ming_py.weights_ddr`): the whole input taken, then per
output-channel tile a compute over every output pixel while the next tile's weights arrive, then the buffered outputs
written; the kinds that stream (pointwise, conv, dense) build their positions, counters and template values from
it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ming_py.loops import Access, Position

DDR_WORD_BYTES = 16  # a 128-bit word of the m_axi port (the KV260's HP ports are 128 bits wide, AMD UG1085 ch. 35)
# Cycles from a burst's read request to its first word: the default `latency` of Vitis HLS's m_axi interface
# (AMD UG1399, "INTERFACE pragma: latency"), the figure the emitted pragma states.
DDR_BURST_LATENCY = 64
STREAMED_KINDS = ("pointwise", "conv", "dense")


def words_per_row(lanes: int) -> int:
    return math.ceil(lanes / DDR_WORD_BYTES)


def tile_words(spec) -> int:
    """128-bit words of one output tile's weights: its reduction tiles' rows, each padded to whole words."""
    return spec.reduction_tiles * words_per_row(spec.macs)


def streamed_problem(spec) -> str:
    """What keeps a spec from streaming its weights from DDR ("": nothing)."""
    if spec.kind not in STREAMED_KINDS:
        return f"a {spec.kind} process cannot stream its weights from DDR (only {', '.join(STREAMED_KINDS)})"
    if spec.requantizers:
        return "weights from DDR take one requantizer per output lane (set requantizers=0)"
    w = spec.window
    if spec.kind == "pointwise" and (w.groups > 1 or w.stride != (1, 1)):
        return "weights from DDR serve a 1x1 conv of one group and stride 1"
    if spec.kind == "conv" and (w.groups > 1 or w.dilation != (1, 1) or spec.factor("k") > 1):
        return "weights from DDR serve a conv of one group and dilation 1, its window not unrolled (unroll k=1)"
    return ""


@dataclass(frozen=True)
class StreamedLoop:
    """The phases of a streamed process's loop, in iterations: take the input (`inputs` tokens) while tile 0's
    weights arrive (`load`), compute each output tile (`compute` iterations) while the next tile's arrive
    (`tile`, the last tile its compute alone: `last`), then write the buffered outputs (`outputs` tokens, 0 where the
    compute writes them) at the end of a phase of at least `settle` iterations (`write`): an output is read from
    its buffer only after its write there, `settle` (the pipeline depth) cycles after its iteration, has landed.
    The input buffer is safe the same way: every input token is read `load` >= DDR_BURST_LATENCY iterations
    after its write."""

    inputs: int
    compute: int
    tiles: int
    tile_words: int
    words_per_row: int
    outputs: int
    settle: int = 0

    @property
    def fetch(self) -> int:
        return self.tile_words + DDR_BURST_LATENCY

    @property
    def load(self) -> int:
        return max(self.inputs, self.fetch)

    @property
    def tile(self) -> int:
        return max(self.compute, self.fetch)

    @property
    def last(self) -> int:
        """The last tile's phase: its compute, two iterations at least (whether an iteration ends its phase is
        known one iteration ahead)."""
        return max(self.compute, 2)

    @property
    def first_tile(self) -> int:
        return self.last if self.tiles == 1 else self.tile

    @property
    def write(self) -> int:
        return max(self.outputs, self.settle) if self.outputs else 0

    @property
    def write_lead(self) -> int:
        """Iterations of the write phase before its first output."""
        return self.write - self.outputs

    @property
    def longest(self) -> int:
        """The longest phase."""
        return max(self.load, self.tile, self.write)


def streamed_loop(spec, inputs: int, compute: int, outputs: int) -> StreamedLoop:
    return StreamedLoop(inputs, compute, spec.tokens_out[0], tile_words(spec), words_per_row(spec.macs), outputs,
                        spec.depth)


def streamed_positions(phases: StreamedLoop, tile_writes: Access):
    """The positions of a streamed process's loop (`ming_py.loops`): the input taken, the tiles (writing
    `tile_writes` each), the buffered outputs written."""
    yield Position(phases.load, (Access(0, 1, phases.inputs),), (Access(),))
    if phases.tiles > 1:
        yield phases.tiles - 1, Position(phases.tile, (Access(),), (tile_writes,))
    yield Position(phases.last, (Access(),), (tile_writes,))
    if phases.outputs:
        yield Position(phases.write, (Access(),), (Access(phases.write_lead, 1, phases.outputs),))


def streamed_counters(phases: StreamedLoop) -> dict[str, int]:
    """The counters a streamed loop's phases and fetch declare (`ProcessKind.counters`)."""
    return {"i": phases.longest - 1, "end": phases.longest - 2, "tile": phases.tiles - 1,
            "fetch_row": phases.tile_words // phases.words_per_row - 1, "fetch_word": phases.words_per_row - 1,
            "half": 1, "fill": 1}
