"""A process's pipelined loop as data: its positions in order, where each position reads and writes its
tokens, and the loop's pipeline depth (`ming_py.process_spec` says how every process kind builds its loop).

The emitted C++ runs this loop, `ilp/cost.py` charges it and `ming simulate` steps through it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class Access:
    """Tokens moved at iterations first, first + stride, ... of a position (`count` of them)."""

    first: int = 0
    stride: int = 1
    count: int = 0

    def offsets(self) -> range:
        return range(self.first, self.first + self.stride * self.count, self.stride)

    @property
    def last(self) -> int:
        return self.first + self.stride * (self.count - 1)


@dataclass(frozen=True)
class Position:
    iterations: int
    reads: tuple[Access, ...]   # per input
    writes: tuple[Access, ...]  # per output


@dataclass(frozen=True)
class Loop:
    """A process's pipelined loop: its positions in order (run-length: (repeat, position)). Its writes happen
    `write_delay` iterations after their place in the positions (shared requantizers take a token's lanes in the
    iterations after its reduction ends), and the loop runs that many iterations after its last position."""

    depth: int
    runs: tuple[tuple[int, Position], ...]
    write_delay: int = 0

    @cached_property
    def iterations(self) -> int:
        return sum(n * p.iterations for n, p in self.runs) + self.write_delay

    @cached_property
    def cycles(self) -> int:
        """Cycles of one image with every token there when the loop wants it."""
        return self.iterations + self.depth

    @cached_property
    def fill(self) -> int:
        """Cycles from the loop's start to its first output token."""
        done = 0
        for n, p in self.runs:
            writes = [a.first for a in p.writes if a.count]
            if writes:
                return done + min(writes) + self.write_delay + 1 + self.depth
            done += n * p.iterations
        return self.cycles

    @cached_property
    def drain(self) -> int:
        """Cycles from its last input token to its last output token."""
        last_read = last_write = None
        done = 0
        for n, p in self.runs:
            reads = [a.last for a in p.reads if a.count]
            writes = [a.last for a in p.writes if a.count]
            if reads:
                last_read = done + (n - 1) * p.iterations + max(reads)
            if writes:
                last_write = done + (n - 1) * p.iterations + max(writes)
            done += n * p.iterations
        return max(last_write + self.write_delay - last_read, 0) + self.depth

    def token_iterations(self, side: str, index: int, tokens: list[int]) -> list[int]:
        """The iteration in which each of `tokens` (ascending token numbers of one image) of input or
        output `index` moves (`side` "reads" or "writes")."""
        result = []
        wanted = iter(tokens)
        token = next(wanted, None)
        moved = done = 0  # tokens before the run, iterations before the run
        delay = self.write_delay if side == "writes" else 0
        for n, p in self.runs:
            access = getattr(p, side)[index]
            while token is not None and token < moved + n * access.count:
                position, nth = divmod(token - moved, access.count)
                result.append(done + position * p.iterations + access.first + nth * access.stride + delay)
                token = next(wanted, None)
            moved += n * access.count
            done += n * p.iterations
        if token is not None:
            raise ValueError(f"token {token} of {side} {index}: the loop moves only {moved}")
        return result


def merged(positions):
    """Runs of equal positions; an item may already be a run (count, position)."""
    run, count = None, 0
    for item in positions:
        n, p = item if isinstance(item, tuple) else (1, item)
        if p is run or p == run:
            count += n
            continue
        if run is not None:
            yield count, run
        run, count = p, n
    if run is not None:
        yield count, run
