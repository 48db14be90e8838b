"""Resource budgets: what the board leaves to a design, each resource optionally limited by the user.

A budget is taken of what a design may use (`Board.usable`): the device's figure less what the board's platform
keeps (`[reserved]` in the board file: an Alveo shell's static region; on a Zynq board the DMA, SmartConnects and
reset of ming's block design). `--dsp 20%` is 20 % of that, a count may not exceed it, and the default shares
below apply to it. `limits` says, per resource, which of these bounds a budget (for report.json and for the
error a budget no design fits gives).
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
# The share of the usable figure a design may take of a resource the user does not limit (`--dsp/--bram/--uram/--lut
# 100%` lifts it): Vivado's placer and router need room beyond what a design uses.
# - LUT 70 %: the fabric also takes the multipliers and the routing between them; above it designs at 200+ MHz
#   congest (AMD's report_failfast, UG949 UltraFast Design Methodology Guide, flags LUT above 70 %).
# - DSP, BRAM18K and URAM 90 %: hard blocks sit in columns; a full column makes the placer spread a process's
#   banks and cascades over distant sites. report_failfast flags DSP and block RAM above 80 %; ming takes 90 %,
#   one block in ten left free, between that guideline and the models that only just fit the small boards
#   (`--bram 80% --dsp 80% --uram 80%` asks for a design within it).
DEFAULT_SHARES = {"dsp": 90, "bram18k": 90, "uram": 90, "lut": 70}


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
        return default_limit(board, resource)
    option = f"{OPTIONS[resource]} {_shown(spec)}"
    value, share = _parse(spec, option)
    if value < 0:
        raise MingError(f"{option}: must not be negative; give a count (300) or a share (20%)")
    if value > (100 if share else usable):
        raise MingError(f"{option}: {_left_to_a_design(board, resource)}; give at most 100% or {usable}")
    return math.floor(value * usable / 100) if share else int(value)


def default_limit(board: Board, resource: str, weight_port: int = 0) -> int:
    """The default share of what the board leaves to a design of `resource` (less `weight_port`, what the weight
    port's DMA takes where the design has one), rounded down."""
    return (board.usable(resource) - weight_port) * DEFAULT_SHARES[resource] // 100


def with_weight_port(board: Board, budget: Budget, port: dict[str, int]) -> Budget:
    """`budget` with the weight port's DMA (`port`: resource -> count) taken from what the board leaves, as the
    platform's own blocks are: a default share or the whole is taken of the rest; a smaller limit the user gave
    stays, unless it reaches into the DMA's blocks."""
    def limit(resource: str) -> int:
        given, taken = getattr(budget, resource), port.get(resource, 0)
        left = board.usable(resource) - taken
        by = _set_by(board, resource, given)
        return default_limit(board, resource, taken) if by == "default" else left if by == "all" else min(given, left)

    return Budget(**{r: limit(r) for r in RESOURCES}) if port else budget


def limits(board: Board, budget: Budget, weight_port: dict[str, int] | None = None) -> dict[str, dict]:
    """Per resource, how `budget` came about: the device's figure, what the platform keeps (the board's
    `[reserved]`), the weight port's DMA where it was set aside (`weight_port`), what is left to a design, the
    budget, its share of what is left and what set it ("default": DEFAULT_SHARES; "all": everything left;
    "option": a smaller `--dsp/--bram/--uram/--lut`)."""
    port = weight_port or {}
    result = {}
    for r in RESOURCES:
        limit, taken = getattr(budget, r), port.get(r, 0)
        left = board.usable(r) - taken
        entry = {"device": getattr(board, r), "platform": getattr(board.reserved, r)}
        if taken:
            entry["weight_port"] = taken
        by = _set_by(board, r, limit, taken)
        entry |= {"usable": left, "budget": limit, "set_by": by, "share_percent": _percent(limit, left)}
        if by == "default":
            entry["default_share_percent"] = DEFAULT_SHARES[r]
        result[r] = entry
    return result


def _set_by(board: Board, resource: str, limit: int, weight_port: int = 0) -> str:
    if limit == default_limit(board, resource, weight_port) and DEFAULT_SHARES[resource] < 100:
        return "default"
    return "all" if limit == board.usable(resource) - weight_port else "option"


def _percent(part: int, whole: int) -> float:
    return round(100 * part / whole, 1) if whole else 0.0


def what_bounds(board: Board, resource: str, limit: int, weight_port: int = 0) -> str:
    """Which limit bounds `resource` at `limit` (with `weight_port` set aside for the weight port's DMA) and how to
    lift it, in words (for "no design fits")."""
    unit, option = UNITS[resource], OPTIONS[resource]
    left = board.usable(resource) - weight_port
    kept = _kept(board, resource, weight_port)
    by = _set_by(board, resource, limit, weight_port)
    if by == "default":
        return (f"{unit} {limit:,} is the default {DEFAULT_SHARES[resource]} % of the {left:,} the {board.name} "
                f"leaves to a design{kept}, headroom for place and route: {option} 100% lifts it to {left:,}")
    if by == "option":
        return f"{unit} {limit:,} is what {option} allows: raise it (at most 100% or {left:,})"
    return f"{unit} {limit:,} is all the {board.name} leaves to a design{kept}"


def _kept(board: Board, resource: str, weight_port: int = 0) -> str:
    """What the platform keeps of the device's `resource`, in words: "" when it keeps nothing."""
    reserved = getattr(board.reserved, resource)
    if not reserved and not weight_port:
        return ""
    kept = f"{reserved:,} its platform keeps" + (f" and {weight_port:,} the weight port's DMA" if weight_port else "")
    return f" ({getattr(board, resource):,} less {kept})"


def _left_to_a_design(board: Board, resource: str) -> str:
    unit, usable, reserved = UNITS[resource], board.usable(resource), getattr(board.reserved, resource)
    if not reserved:
        return f"the {board.name} has {usable} {unit}"
    return (f"the {board.name} leaves {usable:,} {unit} to a design ({getattr(board, resource):,} less "
            f"{reserved:,} its platform keeps)")


# A budget's digits before any decimal point: past the board's figure a count is refused by its size, but past
# 1,000 digits int() would meet Python's 4,300-digit conversion limit first (the JSON reader's bound)
MAX_BUDGET_DIGITS = 1000
_COUNT = re.compile(r"[+-]?[0-9]+")
_SHARE = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))%")


def _parse(spec: str | int, option: str) -> tuple[Fraction, bool]:
    """(value, is a share): a whole count or a finite decimal percentage, nothing else (no inf, nan, 1e3)."""
    if isinstance(spec, int) and not isinstance(spec, bool):
        return Fraction(spec), False
    text = str(spec).strip()
    digits = sum(character.isdigit() for character in text.partition(".")[0])
    if digits > MAX_BUDGET_DIGITS:
        raise MingError(f"{option}: a figure of {digits:,} digits; give a whole count (300) or a share of the board "
                        "(20%)")
    if _COUNT.fullmatch(text):
        return Fraction(int(text)), False
    share = _SHARE.fullmatch(text)
    if share:
        return Fraction(share.group(1)), True
    raise MingError(f"{option}: give a whole count (300) or a share of the board (20%)")


SHOWN_CHARS = 40  # of a figure quoted in an error: enough to recognise it, short enough for one line


def _shown(spec: str | int) -> str:
    text = str(spec).strip() or "''"
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}..."
