"""What the search optimises beyond the model's goal: the objectives and the rules they report, the frugal design
(the least resources within a slack of the fastest design's latency) and the least-resource design meeting
images-per-second and latency targets."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ming_py.boards import Board
from ming_py.errors import MingError
from ming_py.weights_ddr import ddr_bytes_per_cycle

from .budget import Budget
from .search import Abandon, Search, SearchStopped, descend, run_search
from .candidates import fast_enough, keep_candidates
from .model import Model, design_latency


# The most cycles a target may imply (an interval, a latency): the whole numbers a double holds exactly
MAX_TARGET_CYCLES = 2 ** 53


@dataclass(frozen=True)
class Targets:
    """What the design must achieve: images per second (from its steady-state interval) and the latency of
    one image, both at the board's clock."""

    fps: float | None = None
    latency_us: float | None = None

    def __bool__(self) -> bool:
        return self.fps is not None or self.latency_us is not None


class TargetMissed(MingError):
    """Proven: no design within the budget meets the targets. `best` words the best figure the budget allows
    (a whole search of its own): called only when the message is shown, since a caller that tries other targets
    next throws the message away."""

    def __init__(self, message: str, best: Callable[[], str] | None = None):
        super().__init__(message)
        self._best = best

    def __str__(self) -> str:
        if self._best is not None:
            best, self._best = self._best, None
            try:
                self.args = (f"{self.args[0]}; {best()}",)
            except MingError:  # the search for the figure failed: the message without it
                pass
        return super().__str__()

    def __reduce__(self):
        return type(self), (str(self),)


OBJECTIVES = ("frugal", "latency", "sum")
# The default design may be this much slower than the fastest: on small models the fastest design's latency is
# set by streaming the input in and its last layers out, and the designs within a few percent of it take a
# fraction of its DSPs and LUTs (benchmarks/default_design.py)
FRUGAL_SLACK = 0.10
LEAST_RESOURCES = ("the least resources (the least largest share of the budget over DSP, BRAM18K, URAM and LUT, "
                   "FIFOs included, in steps of 0.1 %; then the least sum of the shares)")


def frugal_rule(slack: float) -> str:
    return f"{LEAST_RESOURCES} among designs within {100 * slack:g} % of the fastest design's latency"


RULES = {"latency": "the fastest design (among as fast ones, the one whose fullest resource is emptiest)",
         "sum": "the least sum of process cycles (MING's objective)",
         "frugal": frugal_rule(FRUGAL_SLACK)}


def frugal(fastest: Model, picked: dict[str, int], node_limit: int, reserved: dict[str, int], slack: float,
           abandon: Abandon | None = None) -> tuple[Model, Search, int]:
    """(model, search, latency limit): the least-resource design within `slack` of the fastest one's latency
    (`picked`, which is one of them and starts the search), in the model of the candidates such a design may
    hold. `abandon`: stops its HiGHS runs (`search.run_search`)."""
    limit = math.floor(fastest.value_of(picked) * (1 + slack))
    options, costs = fast_enough(fastest.graph, fastest.options, fastest.costs, limit)
    model = Model(fastest.graph, options, costs, fastest.budget, "resources", latency_limit=limit, reserved=reserved,
                  ddr_rate=fastest.ddr_rate)
    start = descend(model, {name: options[name].index(fastest.options[name][j]) for name, j in picked.items()})
    search = run_search(model, node_limit, incumbent=start, abandon=abandon)
    if search.picked is None:  # the search proved nothing about `start`, which still meets the rule's bound
        search = Search("feasible", start, model.value_of(start), 0.0)
    return model, search, limit


def least_interval(graph, options, costs, budget: Budget, ddr_rate: float | None, node_limit: int) -> Search:
    """The search for the design whose slowest process is fastest, among the candidates within `budget`. Where
    processes wait for their whole input (a layer streaming its weights from DDR buffers its map), the latency is a
    sum of such processes' cycles, which this design keeps short, and the latency MIP finds such designs late: the
    latency search's fallback where it stops at its node limit, and the bound of its big-M rows
    (`latency_model`)."""
    return run_search(Model(graph, options, costs, budget, "interval", ddr_rate=ddr_rate), node_limit)


def latency_model(graph, options, costs, budget: Budget, ddr_rate: float | None, node_limit: int) \
        -> tuple[Model, Search | None]:
    """The latency model of the candidates and, where a process holds both kinds (weights on chip and from DDR),
    the search of `least_interval` (found first; its status proves no design fits where none does): the model is
    then for designs no slower than that one, so that the big-M of the rows of the kind not picked is its latency
    plus a process's largest figure (`Model._big_m`) rather than the latency of every design, a sum over every
    process's slowest candidate: 1.8e9 cycles on ResNet-18 at 224, whose LP HiGHS's dual simplex gave up on, and
    4.4e8 on the KV260 detector at 320, whose proving MIP ran 381 of its 1,000 nodes in 900 s, against all of them
    in 88 s with the smaller big-M."""
    if not any(len({choice.weights == "ddr" for choice in choices}) > 1 for choices in options.values()):
        return Model(graph, options, costs, budget, "latency", ddr_rate=ddr_rate), None
    interval = least_interval(graph, options, costs, budget, ddr_rate, node_limit)
    bound = None if interval.picked is None else design_latency(graph, options, costs, interval.picked)
    return Model(graph, options, costs, budget, "latency", ddr_rate=ddr_rate, latency_bound=bound), interval


def frugal_rule_met(slack: float, fastest: int, status: str, limit: int) -> str:
    """The frugal rule as a design met it: the fastest design's cycles and status, and the latency limit."""
    return f"{frugal_rule(slack)} ({fastest:,} cycles, {status}): at most {limit:,} cycles"


def _target_model(graph, board, options, costs, budget, targets: Targets, reserved: dict[str, int]) -> Model:
    """The least-resource model under the targets: candidates slower than the interval leave it."""
    if targets.fps is not None:
        interval = _target_cycles(board.clock_mhz * 1e6 / targets.fps, "--target-fps", targets.fps, board)
        if board.clock_mhz * 1e6 / (interval + 1) >= targets.fps:  # the division rounded down a whole cycle
            interval += 1
        slowest = max(options, key=lambda name: min(c.cycles for c in costs[name]))
        best = min(c.cycles for c in costs[slowest])
        if best > interval:
            raise TargetMissed(f"--target-fps {targets.fps:g}: no design reaches it; process {slowest} alone needs "
                               f"{best:,} cycles an image, {_fps(board, best)} at {board.clock_mhz:g} MHz")
        options, costs = keep_candidates(options, costs, lambda name, c: c.cycles <= interval)
    limit = None if targets.latency_us is None else \
        _target_cycles(targets.latency_us * board.clock_mhz, "--target-latency-us", targets.latency_us, board)
    if limit is not None:
        options, costs = fast_enough(graph, options, costs, limit)
    return Model(graph, options, costs, budget, "resources", latency_limit=limit, reserved=reserved,
                 ddr_rate=ddr_bytes_per_cycle(board))


def _target_cycles(cycles: float, option: str, value: float, board: Board) -> int:
    """The whole cycles a target implies (an interval, a latency), refused past MAX_TARGET_CYCLES."""
    if not math.isfinite(cycles) or cycles > MAX_TARGET_CYCLES:
        raise MingError(f"{option} {value:g}: implies {cycles:g} cycles at {board.clock_mhz:g} MHz, more than the "
                        f"{MAX_TARGET_CYCLES:,} a schedule counts exactly; give a {'higher' if option == '--target-fps' else 'lower'} "
                        "target")
    return math.floor(cycles)


def meet_targets(graph, board: Board, options, costs, budget: Budget, targets: Targets, node_limit: int,
          reserved: dict[str, int]):
    """(model, picked, status, rule): the least-resource design meeting the targets, or TargetMissed naming
    the best figure the budget allows."""
    model = _target_model(graph, board, options, costs, budget, targets, reserved)
    search = run_search(model, node_limit) if all(model.options.values()) else Search("infeasible")
    wanted = " and ".join(f"{option} {value:g}" for option, value in
                          (("--target-fps", targets.fps), ("--target-latency-us", targets.latency_us))
                          if value is not None)
    if search.picked is not None:
        return model, search.picked, search.describe(), f"{LEAST_RESOURCES} among designs meeting {wanted}"
    if search.status != "infeasible":
        raise SearchStopped(f"the ILP found no design meeting {wanted} within its limit of {node_limit:,} "
                            "branch-and-bound nodes; relax the targets or pin some unroll factors (--set)")
    raise TargetMissed(f"{wanted}: no design within the budget meets it",
                       lambda: _best_achievable(graph, board, options, costs, budget, targets, node_limit))


def _best_achievable(graph, board: Board, options, costs, budget: Budget, targets: Targets, node_limit: int) -> str:
    """The best figure of a missed target within the budget: the least interval or latency."""
    rate = ddr_bytes_per_cycle(board)
    best = Model(graph, options, costs, budget, "interval", ddr_rate=rate) if targets.latency_us is None else \
        latency_model(graph, options, costs, budget, rate, node_limit)[0]
    search = run_search(best, node_limit)
    if search.picked is None:
        return "raise the budget"
    value = best.value_of(search.picked)
    if best.goal == "interval":
        return f"the fastest within it sustains {_fps(board, value)} (one image per {value:,} cycles)"
    return (f"the fastest within it takes {value / board.clock_mhz:,.2f} us ({value:,} cycles at "
            f"{board.clock_mhz:g} MHz)")


def _fps(board: Board, cycles: int) -> str:
    return f"{board.clock_mhz * 1e6 / max(cycles, 1):,.0f} images/s"
