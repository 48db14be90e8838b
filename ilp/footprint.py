"""What "least resources" means: the order in which the default rule (`--objective frugal`) and the targets
(`--target-fps`, `--target-latency-us`) rank the designs they may choose from.

A design's footprint is, first, its largest share of the budget over DSP, BRAM18K, URAM and LUT (what it
uses, the FIFO memory set aside for it included, over the user's budget of that resource), rounded up to
whole steps of 0.1 % (the cost model's estimates are no finer); then, between designs as large, the sum of
those shares (each process's share of each resource in 1/100,000 of the budget). A resource whose budget is
0 is not counted. So the design that leaves most of the board's fullest resource free is kept, and of those
the one that takes least of the others.

The ILP minimises `WEIGHT x largest + total`, which ranks designs exactly as the pair (largest, total) does:
`weight` exceeds any total a design within the budget can have. All figures are integers, so a design one
unit better is a better design and the search's proofs (cutoff at value - 0.5) hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from .budget import RESOURCES, Budget
from .cost import Cost

SCORE_SCALE = 100_000  # shares in 1/100,000 of the budget, so that the objective is integral
LARGEST_STEP = 100  # the largest share in steps of 100/100,000 = 0.1 % of the budget


@dataclass(frozen=True, order=True)
class Footprint:
    largest: int  # the largest share over the resources, in steps of LARGEST_STEP / SCORE_SCALE, rounded up
    total: int  # the processes' shares summed over processes and resources, in 1 / SCORE_SCALE

    def report(self) -> dict[str, float]:
        """As report.json gives it: the largest share in percent of the budget, the shares' sum in budgets."""
        return {"largest_share_percent": round(100 * self.largest * LARGEST_STEP / SCORE_SCALE, 1),
                "share_sum": round(self.total / SCORE_SCALE, 5)}


def counted(budget: Budget) -> tuple[str, ...]:
    """The resources a footprint counts: those the budget holds any of."""
    return tuple(r for r in RESOURCES if getattr(budget, r) > 0)


def shares(cost: Cost | dict[str, int], budget: Budget) -> dict[str, int]:
    """A process's (or the FIFOs') share of each counted resource of the budget, in 1/SCORE_SCALE."""
    def amount(r: str) -> int:
        return cost[r] if isinstance(cost, dict) else getattr(cost, r)

    return {r: round(SCORE_SCALE * amount(r) / getattr(budget, r)) for r in counted(budget)}


def resource_score(cost: Cost, budget: Budget) -> int:
    """A candidate's shares of the budget summed over the resources (a unit of a resource the budget holds
    few of counts more), in 1/SCORE_SCALE: its part of a footprint's total."""
    return sum(shares(cost, budget).values())


def largest_steps(share_sums: Iterable[int]) -> int:
    """The largest of a design's per-resource shares, in whole LARGEST_STEPs rounded up."""
    return math.ceil(max(share_sums, default=0) / LARGEST_STEP)


def footprint(costs: Iterable[Cost], budget: Budget, reserved: dict[str, int] | None = None) -> Footprint:
    """The footprint of a design whose processes cost `costs`, with `reserved` (FIFO memory) set aside, within
    the user's `budget`."""
    costs = list(costs)
    held = shares(dict.fromkeys(RESOURCES, 0) | (reserved or {}), budget)
    per_process = [shares(c, budget) for c in costs]
    sums = [held[r] + sum(s[r] for s in per_process) for r in counted(budget)]
    return Footprint(largest_steps(sums), sum(sum(s.values()) for s in per_process))


def weight(processes: int, budget: Budget) -> int:
    """A weight on `largest` above any `total` of a design within the budget (each resource's shares sum to
    at most SCORE_SCALE, plus half a unit of rounding per process)."""
    return len(counted(budget)) * (SCORE_SCALE + processes) + 1


def objective_value(fp: Footprint, processes: int, budget: Budget) -> int:
    """The integral objective the ILP minimises for a footprint."""
    return weight(processes, budget) * fp.largest + fp.total
