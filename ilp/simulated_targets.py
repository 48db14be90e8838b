"""The targets (--target-fps, --target-latency-us) checked where they are measured: on the cycle-level
simulation of the design with its sized FIFOs (`ming_py.simulate`: its latency, and its steady-state interval
`interval_cycles`). The ILP's model charges only part of the back-pressure (the row gaps of a producer its consumer waits
out), so the design it says meets a target may miss it in simulation; the exploration then solves again with the target rescaled by what the simulation showed (the
model's figure for the design times target / simulated), at most RETRIES times, and keeps the first design
that meets it, or stops naming how far the best one found misses. Where the model is pessimistic instead (it
proves no design meets a latency target the fastest design meets in simulation), the search starts from the
fastest design's simulation."""

from __future__ import annotations

import math
from collections.abc import Callable

from ming_py.boards import Board
from ming_py.simulate import SimResult

from .objectives import TargetMissed, Targets
from .search import SearchStopped
from .solve import Solution

# Solves after the first with tightened targets: each takes as long as a build's exploration
RETRIES = 4

Found = tuple[Solution, SimResult]  # a design and its simulation
Design = Callable[[Targets], Found]


def meeting_targets(design: Design, fastest: Callable[[], Found], targets: Targets, board: Board,
                    no_design: tuple[type[Exception], ...] = ()) -> Found:
    """The first of the designs `design` gives for `targets`, then for targets rescaled by each miss, whose
    simulation meets `targets`; TargetMissed naming the best design's miss when none of 1 + RETRIES does.

    Where the model proves no design meets a latency target, its estimate may still be pessimistic: the
    `fastest` design is simulated, and if it meets the targets the search goes on from the targets scaled up
    by its simulation, the fastest design kept should no cheaper one meet them. `no_design`: what else
    `design` raises when it finds no design (besides TargetMissed and SearchStopped), ending the search."""
    no_design = (TargetMissed, SearchStopped) + no_design
    kept: list[Found] = []  # the fastest design, where the search starts from it
    try:
        found = design(targets)
    except TargetMissed:
        if targets.latency_us is None:  # the interval's bound is exact: no loop runs faster than its cycles
            raise
        kept = [_fastest_meeting(fastest, targets, board)]
        given = rescaled(targets, targets, board, *kept[0])
        if given is None:
            return kept[0]
        try:
            found = design(given)
        except no_design:
            return kept[0]
        return _rescaled_search(design, found, given, targets, board, kept, no_design)
    return _rescaled_search(design, found, targets, targets, board, kept, no_design)


def _fastest_meeting(fastest: Callable[[], Found], asked: Targets, board: Board) -> Found:
    """The fastest design, which meets the targets in simulation; else TargetMissed naming its miss."""
    solution, simulated = fastest()
    if shortfall(asked, board, simulated) > 1:
        raise TargetMissed(missed(asked, board, simulated, "the fastest design")) from None
    return solution, simulated


def _rescaled_search(design: Design, found: Found, targets: Targets, asked: Targets, board: Board,
                     kept: list[Found], no_design: tuple[type[Exception], ...]) -> Found:
    """From `found` (the design for `targets`, what the ILP was given first), the first design whose simulation
    meets `asked`, each next one solved with the targets rescaled by the last one's miss."""
    def miss(design_found: Found) -> float:
        return shortfall(asked, board, design_found[1])

    tried = kept + [found]
    for _ in range(RETRIES):
        if miss(found) <= 1:
            return found
        targets = rescaled(targets, asked, board, *found)
        if targets is None:
            break
        try:
            found = design(targets)
        except no_design:  # no design closer to the targets: the best found stands
            break
        tried.append(found)
    if miss(found) <= 1:  # the last one solved
        return found
    best = min(tried, key=miss)
    if miss(best) <= 1:
        return best
    raise TargetMissed(missed(asked, board, best[1], f"the best of {len(tried)} designs, the targets rescaled "
                                                     "after each miss" if len(tried) > 1 else "no other design found"))


def target_cycles(targets: Targets, board: Board) -> dict[str, float]:
    """The targets in cycles at the board's clock: the latency and the interval they allow."""
    cycles = {}
    if targets.latency_us is not None:
        cycles["latency"] = targets.latency_us * board.clock_mhz
    if targets.fps is not None:
        cycles["interval"] = board.clock_mhz * 1e6 / targets.fps
    return cycles


def _simulated(simulated: SimResult) -> dict[str, int]:
    return {"latency": simulated.cycles, "interval": simulated.interval_cycles}


def shortfall(targets: Targets, board: Board, simulated: SimResult) -> float:
    """The simulated figures over the targets' bounds, the worst of them: at most 1 when every target is met."""
    figures = _simulated(simulated)
    return max(figures[name] / bound for name, bound in target_cycles(targets, board).items())


def rescaled(targets: Targets, asked: Targets, board: Board, solution: Solution, simulated: SimResult) \
        -> Targets | None:
    """`targets` (what the ILP was last given for `solution`) with each bound set to the model's figure for it times
    asked / simulated: lower where the simulation missed the target (and at least a cycle below the model's
    figure), higher where every target is met (a pessimistic model); None when a bound falls below a cycle."""
    bounds = target_cycles(asked, board)
    figures = _simulated(simulated)
    model = {"latency": solution.totals["cycles"], "interval": solution.totals["throughput_cycles"]}
    every_met = all(figures[name] <= bound for name, bound in bounds.items())
    latency_us, fps = targets.latency_us, targets.fps
    for name, bound in bounds.items():
        if figures[name] <= bound and not every_met:
            continue
        limit = math.floor(model[name] * bound / figures[name])
        if figures[name] > bound:
            limit = min(limit, model[name] - 1)
        if limit < 1:
            return None
        # half a cycle past the limit: the model floors the cycles a target implies back to `limit`
        if name == "latency":
            latency_us = (limit + 0.5) / board.clock_mhz
        else:
            fps = board.clock_mhz * 1e6 / (limit + 0.5)
    return Targets(fps, latency_us)


def missed(asked: Targets, board: Board, simulated: SimResult, tried: str) -> str:
    """One line: how far the best design's simulation misses each target, and what to do."""
    bounds = target_cycles(asked, board)
    clock = f"{board.clock_mhz:g} MHz"
    parts = []
    if "latency" in bounds and simulated.cycles > bounds["latency"]:
        over = simulated.cycles / bounds["latency"] - 1
        parts.append(f"--target-latency-us {asked.latency_us:g}: the best design takes "
                     f"{simulated.cycles / board.clock_mhz:,.2f} us in the cycle-level simulation "
                     f"({simulated.cycles:,} cycles at {clock}, the target {math.floor(bounds['latency']):,}), "
                     f"{100 * over:.1f} % over")
    if "interval" in bounds and simulated.interval_cycles > bounds["interval"]:
        interval = simulated.interval_cycles
        sustained = board.clock_mhz * 1e6 / interval
        short = 1 - sustained / asked.fps
        parts.append(f"--target-fps {asked.fps:g}: the best design sustains "
                     f"{sustained:,.1f} images/s in the cycle-level simulation (one image "
                     f"per {interval:,} cycles at {clock}, the target {math.floor(bounds['interval']):,}), "
                     f"{100 * short:.1f} % short")
    return (f"{'; '.join(parts)} ({tried}); "
            "relax the target or raise the budget")
