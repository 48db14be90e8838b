"""The top function's AXI4-Stream adapters (`ming::unpack_axis`, `ming::pack_axis` in ming_stream.h) as
loops: the one description the simulator runs and the cost model charges.

Each adapter is one loop pipelined at II=1 with a pipeline depth of PIPELINE_DEPTH, moving at most one
64-bit word (AXIS_VALUES_PER_WORD int8 values, the host's packing) and one token per iteration.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .loops import Access, Loop, Position
from .contract.ming_host import VALUES_PER_WORD as AXIS_VALUES_PER_WORD

PIPELINE_DEPTH = 4


def run_lengths(positions) -> tuple[tuple[int, Position], ...]:
    """Equal positions in a row as (repeat, position) runs."""
    runs: list[list] = []
    for position in positions:
        if runs and runs[-1][1] == position:
            runs[-1][0] += 1
        else:
            runs.append([1, position])
    return tuple((repeat, position) for repeat, position in runs)


@functools.lru_cache(maxsize=None)
def unpack_loop(values: int, lanes: int) -> Loop:
    """The input port (``ming::unpack_axis``): max(words, tokens) iterations, each reading a word while
    fewer than L values are held and writing a token once L are."""
    idle, writes = Position(1, (), (Access(),)), Position(1, (), (Access(0, 1, 1),))
    words = -(-values // AXIS_VALUES_PER_WORD)

    def iterations():  # one at a time into the runs: no list of every iteration
        held = read = 0
        for _ in range(max(words, values // lanes)):
            if held < lanes and read < words:
                held += min(AXIS_VALUES_PER_WORD, values - AXIS_VALUES_PER_WORD * read)
                read += 1
            if held >= lanes:
                held -= lanes
                yield writes
            else:
                yield idle
    return Loop(PIPELINE_DEPTH, run_lengths(iterations()))


@functools.lru_cache(maxsize=None)
def pack_loop(values: int, lanes: int) -> Loop:
    """The output port of one output (``ming::pack_axis``): one iteration per cycle, reading a token while
    fewer than 8 values are held and writing a word once 8 (or the image's last values) are."""
    return record_loop([(values, lanes)])


def record_loop(parts: list[tuple[int, int]]) -> Loop:
    """The output port of a record of outputs, (values, lanes) of each in record order: the ``pack_axis``
    loop of each in turn, reading from its own channel; a loop's pipeline drains (PIPELINE_DEPTH idle
    iterations) before the next starts."""
    idle = Position(1, (Access(),) * len(parts), ())

    def iterations():  # one at a time into the runs: no list of every iteration
        for index, (values, lanes) in enumerate(parts):
            if index:
                yield from [idle] * PIPELINE_DEPTH
            reads = Position(1, tuple(Access(0, 1, int(i == index)) for i in range(len(parts))), ())
            for read in _pack_reads(values, lanes):
                yield reads if read else idle
    return Loop(PIPELINE_DEPTH, run_lengths(iterations()))


def _pack_reads(values: int, lanes: int):
    """Per iteration of ``pack_axis``, whether it reads a token (a generator)."""
    tokens = values // lanes
    held = read = 0
    while read < tokens or held:
        if held < AXIS_VALUES_PER_WORD and read < tokens:
            held += lanes
            read += 1
            yield True
        else:
            yield False
        if held >= AXIS_VALUES_PER_WORD or read == tokens:
            held -= min(held, AXIS_VALUES_PER_WORD)


@dataclass(frozen=True)
class Adapter:
    """What the cost model charges for an adapter, read off its loop."""

    cycles: int  # trip count + pipeline depth
    fill: int    # unpack: cycles to its first token (the process behind it starts then)
    drain: int   # pack: cycles from reading its last token to its last word


def unpack_adapter(values: int, lanes: int) -> Adapter:
    loop = unpack_loop(values, lanes)
    return Adapter(loop.cycles, loop.fill, 0)


def pack_adapter(values: int, lanes: int) -> Adapter:
    loop = pack_loop(values, lanes)
    last_read, done = 0, 0
    for repeat, position in loop.runs:
        if any(access.count for access in position.reads):
            last_read = done + repeat - 1
        done += repeat
    return Adapter(loop.cycles, 0, loop.iterations - last_read + PIPELINE_DEPTH)
