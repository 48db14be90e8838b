"""Resource budgets: the board's resources, each optionally limited by the user."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ming_py.boards import Board
from ming_py.ir import MingError

RESOURCES = ("dsp", "bram18k", "uram", "lut")


@dataclass(frozen=True)
class Budget:
    dsp: int
    bram18k: int
    uram: int
    lut: int

    @staticmethod
    def of(board: Board, fractions: dict[str, str | None] | None = None) -> Budget:
        """The board's resources, each optionally limited to `N` units or `P%` of the board."""
        fractions = fractions or {}
        full = {"dsp": board.dsp, "bram18k": board.bram18k, "uram": board.uram, "lut": board.lut}
        return Budget(**{r: _limit(fractions.get(r), full[r], r) for r in RESOURCES})


def _limit(spec: str | None, full: int, resource: str) -> int:
    if spec is None:
        return full
    text = str(spec).strip()
    try:
        value = float(text[:-1]) * full / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise MingError(f"--{resource.replace('bram18k', 'bram')} {spec}: give a count (300) or a share (20%)") from None
    if value < 0:
        raise MingError(f"--{resource} {spec}: must not be negative")
    return int(math.floor(value))
