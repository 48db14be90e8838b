"""Resource budgets: what the board leaves to a design, each resource optionally limited by the user.

A budget is taken of what a design may use (`Board.usable`): the device's figure less what the board's platform
keeps (an Alveo shell's static region, `[reserved]` in the board file; nothing on the Zynq boards). `--dsp 20%`
is 20 % of that, a count may not exceed it, and the default shares below apply to it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from ming_py.boards import Board
from ming_py.errors import MingError

RESOURCES = ("dsp", "bram18k", "uram", "lut")
OPTIONS = {"dsp": "--dsp", "bram18k": "--bram", "uram": "--uram", "lut": "--lut"}
UNITS = {"dsp": "DSP", "bram18k": "BRAM18K", "uram": "URAM", "lut": "LUT"}
# The share of the usable figure a design may take of a resource the user does not limit: all of the hard blocks
# (DSP, BRAM, URAM), 70 % of the LUTs, the headroom Vivado's placer and router need at 200+ MHz once
# the fabric takes multipliers (`--lut 100%` lifts it)
DEFAULT_SHARES = {"lut": 70}


@dataclass(frozen=True)
class Budget:
    dsp: int
    bram18k: int
    uram: int
    lut: int

    @staticmethod
    def of(board: Board, fractions: dict[str, str | None] | None = None) -> Budget:
        """What the board leaves to a design, each resource optionally limited to `N` units or `P%` of it."""
        fractions = fractions or {}
        return Budget(**{r: _limit(fractions.get(r), board, r) for r in RESOURCES})


def _limit(spec: str | int | None, board: Board, resource: str) -> int:
    """`spec` as a count of the board's usable `resource`: None is its default share; refused unless within 0 and
    the usable figure."""
    usable = board.usable(resource)
    if spec is None:
        return usable * DEFAULT_SHARES.get(resource, 100) // 100
    option = f"{OPTIONS[resource]} {_shown(spec)}"
    value, share = _parse(spec, option)
    if value < 0:
        raise MingError(f"{option}: must not be negative; give a count (300) or a share (20%)")
    if value > (100 if share else usable):
        raise MingError(f"{option}: {_left_to_a_design(board, resource)}; give at most 100% or {usable}")
    return math.floor(value * usable / 100) if share else int(value)


def _left_to_a_design(board: Board, resource: str) -> str:
    unit, usable, reserved = UNITS[resource], board.usable(resource), getattr(board.reserved, resource)
    if not reserved:
        return f"the {board.name} has {usable} {unit}"
    return (f"the {board.name} leaves {usable:,} {unit} to a design ({getattr(board, resource):,} less "
            f"{reserved:,} its shell keeps)")


_COUNT = re.compile(r"[+-]?[0-9]+")
_SHARE = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))%")


def _parse(spec: str | int, option: str) -> tuple[Fraction, bool]:
    """(value, is a share): a whole count or a finite decimal percentage, nothing else (no inf, nan, 1e3)."""
    if isinstance(spec, int) and not isinstance(spec, bool):
        return Fraction(spec), False
    text = str(spec).strip()
    if _COUNT.fullmatch(text):
        return Fraction(int(text)), False
    share = _SHARE.fullmatch(text)
    if share:
        return Fraction(share.group(1)), True
    raise MingError(f"{option}: give a whole count (300) or a share of the board (20%)")


def _shown(spec: str | int) -> str:
    return str(spec).strip() or "''"
