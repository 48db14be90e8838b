"""Resource-constrained choice of every process's parallelism (MING §IV-C, Eq. 1).

Each process picks exactly one candidate (one-hot binaries over divisor unroll
factors, MING's unroll constraint). A channel's lane count is its producer's
output parallelism and must equal its consumer's input parallelism (MING's
stream constraint). DSP, BRAM18K, URAM and LUT sums stay within the budget.

Objective `latency` models a pipelined dataflow (Stream-HLS §3, CODO §VI): a
process starts when its producers have emitted their first outputs
(start_v >= start_u + fill_u), finishes no sooner than its own work allows
(finish_v >= start_v + cycles_v, so the slowest process sets the pace), and
writes the output token at j/K of an image no sooner than its own pace allows
nor than the producer's token at j/K plus the process's lag (K points of a
progress curve: a consumer that takes its input in bursts, such as a strided
or folded window, waits for the rows it needs); minimise the finish of the
process feeding the output (with several outputs, of the output record: the
writer sends them one after the other). Objective `sum` is MING's
original sum of process cycles. Among equally fast designs the cheaper is kept
(`_thrifty`). The default, `frugal`, finds the fastest design's latency, then the
least resources (`footprint`: the largest share of the budget, then the sum of the
shares) among the designs within FRUGAL_SLACK of it.

The search (`_search`) is deterministic: HiGHS on one thread with its fixed seed, limited by
branch-and-bound nodes and never by wall-clock time, so the same model and
options give the same design on every run and machine. The status says
"optimal" only when the search proved it, else "feasible (gap x%)" against the
best lower bound; "no design fits" only when infeasibility is proven.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace

import pulp

from ming_py.adapters import pack_adapter
from ming_py.boards import Board
from ming_py.calibration import Calibration
from ming_py.dataflow import ProcessSchedule, Schedule, StreamGraph, divisors
from ming_py.errors import MingError
from ming_py.epilogues import rule_of
from ming_py.kernel import kernel_spec
from ming_py.kinds import kind_of, trip_counts
from ming_py.kinds.base import shared_requantizers
from ming_py.kinds.window import whole_groups
from ming_py.storage import plan_arrays

from .budget import RESOURCES, UNITS, Budget, what_bounds, with_weight_port
from .pins import Pins, line_buffer_memory
from .scratch import scratch_folder
from .cost import (PROGRESS_SAMPLES, Choice, Cost, input_fractions, mac_lanes_within, process_cost,
                   storage_plan)
from .footprint import (LARGEST_STEP, Footprint, counted, footprint, largest_steps, objective_value,
                        weight)
from .footprint import shares as resource_shares

MAX_UNROLL = 64  # per loop; beyond it an int8 layer of a small CNN gains nothing
# The largest weight array per bank the ILP may move from BRAM to LUTRAM: one BRAM18K's bits, 288 LUTs as a
# 64-bit-a-LUT ROM (`ming_py.array_layout`); larger ones cost more LUTs than a BRAM18K saves is worth.
LUTRAM_WEIGHT_BITS = 18_432
# Branch-and-bound nodes of the proving MIP run, the search's only limit, the same on every machine: at most
# NODE_LIMIT, fewer for larger models so that nodes x candidates stays within NODE_WORK
NODE_LIMIT = 100_000
NODE_WORK = 8_000_000
# HiGHS rather than CBC: on resnet8_32 at 20 % of the KV260's DSPs it proves a design 0.5 % faster optimal in
# 24 s where CBC stopped at a 13 % gap after 41 s; at 100 %, 10 s against 20 s
HEURISTIC_NODES = 1_000  # nodes of each MIP run that only looks for a good incumbent
# The most cycles a target may imply (an interval, a latency): the whole numbers a double holds exactly
MAX_TARGET_CYCLES = 2 ** 53


class NoDesignFits(MingError):
    """Proven: no design fits the budget."""


class SearchStopped(MingError):
    """The search reached its node limit before it found any design."""


@dataclass
class Solution:
    schedule: Schedule
    choices: dict[str, Choice]
    costs: dict[str, Cost]
    status: str
    solve_seconds: float
    objective: str
    budget: Budget
    totals: dict = field(default_factory=dict)


def candidates(graph: StreamGraph, process, pins: Pins | None = None, uram: bool = False,
               weight_memories: tuple[str, ...] = ("bram",)) -> list[Choice]:
    """Every valid schedule of one process (lanes tied to the parallelism they feed) that keeps its pins, its
    weights in each of `weight_memories` (`weight_options`)."""
    pins = pins or Pins()
    unroll_pins = pins.unroll.get(process.name, {})
    kind = kind_of(process.kind)
    trips = trip_counts(graph, process)
    ins = [graph.channels[c] for c in process.inputs]
    outs = [graph.channels[c] for c in process.outputs]
    loops = list(trips)
    options = [[unroll_pins[loop]] if loop in unroll_pins else [d for d in divisors(trips[loop]) if d <= MAX_UNROLL]
               for loop in loops]
    memories = ["bram", "uram"] if uram and kind.line_buffer else ["bram"]
    if process.name in pins.line_buffers:
        memories = [m for m in memories if m == pins.line_buffers[process.name]]
    multiplier_pin = pins.multipliers.get(process.name)
    requantizers = pins.requantizers.get(process.name)
    result = []
    for factors in itertools.product(*options):
        unroll = dict(zip(loops, factors))
        if not whole_groups(process.window, unroll):
            continue
        for lanes_in, lanes_out in kind.lane_options(unroll, ins, outs, process.params, MAX_UNROLL):
            if not kind.static_banks(unroll.get("k", 1), lanes_in[0]):
                continue
            sharing = _requantizer_options(graph, process, unroll, lanes_in, lanes_out, requantizers)
            weights = weight_options(graph, process, unroll, lanes_in, lanes_out, pins, weight_memories)
            for memory in memories:
                if memory == "uram" and process.name in pins.line_buffers and \
                        line_buffer_memory(graph, process, tuple(unroll.items()), lanes_in, lanes_out, memory) != memory:
                    continue  # the pinned URAM holds this schedule's line buffer only where it is too large for LUTRAM
                for multipliers in kind.multiplier_choices(unroll):
                    if multiplier_pin is not None and multipliers != multiplier_pin:
                        continue
                    for count in sharing:
                        for weight_memory in weights:
                            result.append(Choice(tuple(unroll.items()), lanes_in, lanes_out, memory, multipliers,
                                                 count, weight_memory))
    return result


def weight_options(graph: StreamGraph, process, unroll, lanes_in, lanes_out, pins: Pins,
                   offered: tuple[str, ...]) -> tuple[str, ...]:
    """Where a candidate's weights may go: the pinned memory, else "bram" (a ROM where its size puts it: LUTRAM
    when small, else BRAM) and, among `offered`, for weights that would take BRAM: URAM, and LUTRAM where they are
    small (at most one BRAM18K's bits a bank: LUTRAM_WEIGHT_BITS)."""
    if process.weights is None:
        return ("bram",)
    if process.name in pins.weights:
        return (pins.weights[process.name],)
    if offered == ("bram",):
        return offered
    spec = kernel_spec(graph, process, tuple(unroll.items()), lanes_in, lanes_out)
    rom = plan_arrays(spec, process.epilogue)["weights"]
    if rom.memory != "bram":
        return ("bram",)
    return tuple(m for m in offered if m != "lutram" or rom.bits <= LUTRAM_WEIGHT_BITS * rom.banks)


def loaded_weight_memories(graph: StreamGraph, budget: Budget, calibration) -> tuple[str, ...]:
    """The weight memories the ILP may choose beyond ROMs where their size puts them: URAM (loaded at start
    through the weight port, `ming_py.weights_load`) and LUTRAM, offered only where the smallest design with
    ROM weights needs more BRAM than the budget holds, so that every design that fits with ROMs keeps them (no
    weight port, nothing to load). A pinned process's weights go where its pin says (`weight_options`)."""
    if smallest_design(graph, calibration)["bram18k"] <= budget.bram18k:
        return ("bram",)
    return ("bram", "lutram") + (("uram",) if budget.uram > 0 else ())


def _less(budget: Budget, taken: dict[str, int]) -> Budget:
    return replace(budget, **{r: getattr(budget, r) - v for r, v in taken.items()})


def weight_port_reservation(graph: StreamGraph, board: Board, budget: Budget, calibration,
                            pins: Pins | None = None) -> dict[str, int]:
    """What the weight port's DMA takes (the board's `[weight_port]`) where the design may have URAM weights (the
    ILP may choose them, `loaded_weight_memories`, or a pin puts them there), set aside before the ILP chooses;
    nothing where every weight stays a ROM."""
    pinned = pins is not None and "uram" in pins.weights.values()
    if not board.weight_port or not (pinned or "uram" in loaded_weight_memories(graph, budget, calibration)):
        return {}
    return {r: getattr(board.weight_port, r) for r in RESOURCES if getattr(board.weight_port, r)}


def _requantizer_options(graph: StreamGraph, process, unroll, lanes_in, lanes_out,
                         pinned: int | None) -> tuple[int, ...]:
    """One requantizer per lane (0), and the fewest that can take the lanes in turn: a requantizer count between
    them would only save a few cycles of pipeline depth. A pinned count where the lanes allow it (0, or the
    lanes themselves: one per lane)."""
    if rule_of(process.epilogue).datapath(process.epilogue) is None:
        return (0,)
    shared = shared_requantizers(kernel_spec(graph, process, tuple(unroll.items()), lanes_in, lanes_out))
    if pinned is None:
        return (0,) + shared[:1]
    if pinned in (0, lanes_out[0]):
        return (0,)
    return (pinned,) if pinned in shared else ()


@dataclass(frozen=True)
class Targets:
    """What the design must achieve: images per second (from its steady-state interval) and the latency of
    one image, both at the board's clock."""

    fps: float | None = None
    latency_us: float | None = None

    def __bool__(self) -> bool:
        return self.fps is not None or self.latency_us is not None


class TargetMissed(MingError):
    """Proven: no design within the budget meets the targets."""


def solve(graph: StreamGraph, board: Board, budget: Budget, objective: str = "latency", pins: Pins | None = None,
          node_limit: int | None = None, reserved: dict[str, int] | None = None,
          calibration: Calibration | None = None, targets: Targets | None = None,
          slack: float | None = None) -> Solution:
    """The design `objective` (or, with `targets`, the least-resource design meeting them) picks within `budget`
    (the user's), of which `reserved` (FIFO memory) is already taken:

    * latency: the fastest design (then, as fast, the one whose fullest resource is emptiest: `_thrifty`);
    * frugal: the fastest design's latency, then the least resources among designs within `slack` of it
      (FRUGAL_SLACK, 10 %, unless a comparison asks for another);
    * sum: MING's sum of process cycles;
    * targets: the least resources among designs whose interval and latency meet them.
    Least resources: the least `footprint` (the largest share of the budget over its resources, FIFOs
    included, in steps of 0.1 %; then the sum of the shares).

    Deterministic: the same graph, budget and pins give the same design on every machine and every run
    (HiGHS on one thread, limited by branch-and-bound nodes, never by wall-clock time)."""
    if objective not in OBJECTIVES:
        raise MingError(f"unknown objective {objective!r}; use {', '.join(OBJECTIVES)}")
    started = time.perf_counter()
    reserved = {r: v for r, v in (reserved or {}).items() if v}
    port = weight_port_reservation(graph, board, _less(budget, reserved), calibration, pins)
    budget = with_weight_port(board, budget, port)
    available = _less(budget, reserved)
    options, costs = _candidates_and_costs(graph, pins or Pins(), available, calibration)
    if any(sum(min(getattr(c, r) for c in costs[name]) for name in costs) > getattr(available, r)
           for r in RESOURCES):  # every process at its least: a proof without the ILP
        raise _no_design_fits(graph, board, budget, reserved, calibration, port)
    options, costs = _affordable(options, costs, available)
    if node_limit is None:
        node_limit = min(NODE_LIMIT, max(1_000, NODE_WORK // sum(map(len, options.values()))))
    measured: dict = {}  # frugal: the fastest design it was measured against
    if targets:
        model, picked, status, rule = _meet(graph, board, options, costs, available, targets, node_limit, reserved)
    else:
        model = _Model(graph, options, costs, available, "sum" if objective == "sum" else "latency")
        search = _decided(_search(model, node_limit), graph, board, budget, reserved, calibration, node_limit, pins,
                          port)
        picked, status = _thrifty(model, search.picked) if objective == "latency" else search.picked, search.describe()
        rule = RULES[objective]
        if objective == "frugal":
            fastest = model.describe(picked, reserved)
            fastest["latency_us"] = round(fastest["cycles"] / board.clock_mhz, 3)
            model, picked, status, rule, limit = _frugal(model, picked, status, node_limit, reserved,
                                                         FRUGAL_SLACK if slack is None else slack)
            measured = {"fastest": fastest, "latency_limit_cycles": limit}
    chosen = {name: model.options[name][j] for name, j in picked.items()}  # the frugal and targets' models keep fewer
    chosen_costs = {name: model.costs[name][j] for name, j in picked.items()}
    size = {"variables": len(model.problem.variables()), "constraints": len(model.problem.constraints),
            "rule": rule} | measured
    if model.goal == "resources":
        size["footprint"] = model.footprint(picked).report()
    if targets:
        size["targets"] = {k: v for k, v in vars(targets).items() if v is not None}
    if port:
        size["weight_port_reserved"] = port
    if calibration is not None:
        size["calibration"] = {"file": calibration.path.name, "sha256": calibration.digest}
    return _solution(graph, board, chosen, chosen_costs, "target" if targets else objective, available, status,
                     time.perf_counter() - started, size)


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


def _decided(search: _Search, graph, board, budget, reserved, calibration, node_limit, pins: Pins | None,
             port: dict[str, int]) -> _Search:
    """The search's outcome, or the error that it found no design."""
    if search.status == "infeasible" and pins is not None and pins.pinned:
        raise NoDesignFits("no design keeps the pinned settings within the budget: a channel's lanes are its "
                           "producer's output factor and its consumer's input factor, so pin both alike or "
                           "leave one to the ILP")
    if search.status == "infeasible":
        raise _no_design_fits(graph, board, budget, reserved, calibration, port)
    if search.picked is None:
        raise SearchStopped(f"the ILP found no design within its limit of {node_limit:,} branch-and-bound nodes; "
                            f"loosen the budget or pin some unroll factors (--set)")
    return search


def _frugal(fastest: _Model, picked: dict[str, int], status: str, node_limit: int, reserved: dict[str, int],
            slack: float):
    """(model, picked, status, rule, latency limit): the least-resource design within `slack` of the
    fastest one's latency (`picked`, which is one of them and starts the search), in the model of the
    candidates such a design may hold."""
    cycles = fastest.value_of(picked)
    limit = math.floor(cycles * (1 + slack))
    options, costs = _fast_enough(fastest.graph, fastest.options, fastest.costs, limit)
    model = _Model(fastest.graph, options, costs, fastest.budget, "resources", latency_limit=limit, reserved=reserved)
    start = _descend(model, {name: options[name].index(fastest.options[name][j]) for name, j in picked.items()})
    search = _search(model, node_limit, incumbent=start)
    if search.picked is None:  # the search proved nothing about `start`, which still meets the rule's bound
        search = _Search("feasible", start, model.value_of(start), 0.0)
    rule = f"{frugal_rule(slack)} ({cycles:,} cycles, {status}): at most {limit:,} cycles"
    return model, search.picked, search.describe(), rule, limit


def _fast_enough(graph, options, costs, limit: int):
    """The candidates a design of latency <= `limit` may hold (`_Model.too_slow`)."""
    earliest = earliest_starts(graph, costs)
    return _keep(options, costs, lambda name, c: earliest[name] + c.progress[-1] <= limit)


def _keep(options, costs, wanted):
    """The candidates (and their costs) for which `wanted(process name, cost)` holds."""
    kept = {name: [j for j, c in enumerate(costs[name]) if wanted(name, c)] for name in options}
    return ({name: [options[name][j] for j in kept[name]] for name in options},
            {name: [costs[name][j] for j in kept[name]] for name in costs})


def _target_model(graph, board, options, costs, budget, targets: Targets, reserved: dict[str, int]) -> _Model:
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
        options, costs = _keep(options, costs, lambda name, c: c.cycles <= interval)
    limit = None if targets.latency_us is None else \
        _target_cycles(targets.latency_us * board.clock_mhz, "--target-latency-us", targets.latency_us, board)
    if limit is not None:
        options, costs = _fast_enough(graph, options, costs, limit)
    return _Model(graph, options, costs, budget, "resources", latency_limit=limit, reserved=reserved)


def _target_cycles(cycles: float, option: str, value: float, board: Board) -> int:
    """The whole cycles a target implies (an interval, a latency), refused past MAX_TARGET_CYCLES."""
    if not math.isfinite(cycles) or cycles > MAX_TARGET_CYCLES:
        raise MingError(f"{option} {value:g}: implies {cycles:g} cycles at {board.clock_mhz:g} MHz, more than the "
                        f"{MAX_TARGET_CYCLES:,} a schedule counts exactly; give a {'higher' if option == '--target-fps' else 'lower'} "
                        "target")
    return math.floor(cycles)


def _meet(graph, board: Board, options, costs, budget: Budget, targets: Targets, node_limit: int,
          reserved: dict[str, int]):
    """(model, picked, status, rule): the least-resource design meeting the targets, or TargetMissed naming
    the best figure the budget allows."""
    model = _target_model(graph, board, options, costs, budget, targets, reserved)
    search = _search(model, node_limit) if all(model.options.values()) else _Search("infeasible")
    wanted = " and ".join(f"{option} {value:g}" for option, value in
                          (("--target-fps", targets.fps), ("--target-latency-us", targets.latency_us))
                          if value is not None)
    if search.picked is not None:
        return model, search.picked, search.describe(), f"{LEAST_RESOURCES} among designs meeting {wanted}"
    if search.status != "infeasible":
        raise SearchStopped(f"the ILP found no design meeting {wanted} within its limit of {node_limit:,} "
                            "branch-and-bound nodes; relax the targets or pin some unroll factors (--set)")
    best = _best_achievable(_Model(graph, options, costs, budget, "interval" if targets.latency_us is None
                                   else "latency"), board, node_limit)
    raise TargetMissed(f"{wanted}: no design within the budget meets it; {best}")


def _best_achievable(best: _Model, board: Board, node_limit: int) -> str:
    """The best figure of a missed target within the budget: the least interval or latency."""
    search = _search(best, node_limit)
    if search.picked is None:
        return "raise the budget"
    value = best.value_of(search.picked)
    if best.goal == "interval":
        return f"the fastest within it sustains {_fps(board, value)} (one image per {value:,} cycles)"
    return (f"the fastest within it takes {value / board.clock_mhz:,.2f} us ({value:,} cycles at "
            f"{board.clock_mhz:g} MHz)")


def _fps(board: Board, cycles: int) -> str:
    return f"{board.clock_mhz * 1e6 / max(cycles, 1):,.0f} images/s"


def _candidates_and_costs(graph: StreamGraph, pins: Pins, budget: Budget, calibration):
    weight_memories = loaded_weight_memories(graph, budget, calibration)
    options = {p.name: candidates(graph, p, pins, budget.uram > 0, weight_memories) for p in graph.processes}
    for name, choices in options.items():
        if not choices:
            pinned = f" and {pins.requantizers[name]} requantizers" if name in pins.requantizers else ""
            raise MingError(f"process {name}: the pinned settings{pinned} leave no valid schedule (shared "
                            f"requantizers need lanes / requantizers <= the iterations of a reduction; multipliers "
                            f"dsp_pair need an even unroll of the loop that shares the input; a line buffer in URAM "
                            f"needs lanes few enough that it is too large for LUTRAM)")
    costs = {}
    for name in list(options):
        all_costs = [process_cost(graph, graph.process(name), c, calibration) for c in options[name]]
        options[name], costs[name] = _pareto(options[name], all_costs)
    return options, costs


def _affordable(options, costs, budget: Budget):
    """The candidates that fit the budget beside every other process at its least (the others cannot)."""
    least = {r: {name: min(getattr(c, r) for c in costs[name]) for name in costs} for r in RESOURCES}
    spare = {r: getattr(budget, r) - sum(least[r].values()) for r in RESOURCES}
    return _keep(options, costs, lambda name, c: all(getattr(c, r) - least[r][name] <= spare[r] for r in RESOURCES))


def _no_design_fits(graph: StreamGraph, board: Board, budget: Budget, reserved: dict[str, int], calibration,
                    port: dict[str, int]) -> NoDesignFits:
    """The budget, what the smallest design needs of it, and for each resource it lacks which limit bounds it
    (the default share, the user's option or what the platform keeps) and how to lift it."""
    needs = smallest_design(graph, calibration)
    fifos = f"; the FIFOs need {_describe(reserved)} of it" if reserved else ""
    with_fifos = " with its FIFOs" if reserved else ""
    needs = {r: v + reserved.get(r, 0) for r, v in needs.items()}
    short = [r for r in RESOURCES if needs[r] > getattr(budget, r)]
    bounds = "".join(f"; {what_bounds(board, r, getattr(budget, r), port.get(r, 0))}" for r in short)
    return NoDesignFits(f"no design fits the budget ({_describe(vars(budget))}{fifos}); "
                        f"the smallest design needs {_describe(needs)}{with_fifos}{bounds}")


class _Model:
    """The ILP: one-hot candidates per process, lanes tied per channel, budget rows, and its goal:
    "latency" (the latency model's output finish), "sum" (of process cycles), "interval" (the slowest process)
    or "resources" (the least `footprint` within the user's budget, `budget` plus the `reserved` FIFO memory),
    the last optionally with the latency model bounded by `latency_limit`."""

    def __init__(self, graph: StreamGraph, options, costs, budget: Budget, goal: str, latency_limit: int | None = None,
                 reserved: dict[str, int] | None = None):
        self.graph, self.options, self.costs, self.budget = graph, options, costs, budget
        self.goal, self.latency_limit = goal, latency_limit
        self.reserved = reserved or {}
        self.whole = replace(budget, **{r: getattr(budget, r) + v for r, v in self.reserved.items()})
        problem = pulp.LpProblem("ming_dse", pulp.LpMinimize)
        self.pick = {name: [pulp.LpVariable(f"x_{i}_{j}", cat="Binary") for j in range(len(choices))]
                     for i, (name, choices) in enumerate(options.items())}
        for name, xs in self.pick.items():
            problem += pulp.lpSum(xs) == 1, f"one_{name}"
        self.timing = self._timing_classes(problem)
        for c, channel in enumerate(graph.channels.values()):
            if channel.producer in self.pick and channel.consumer in self.pick:
                self._tie_lanes(problem, c, channel)
        for resource in RESOURCES:
            problem += (pulp.lpSum(self.total(name, resource) for name in self.pick) <= getattr(budget, resource),
                        f"budget_{resource}")
        if goal == "latency":
            problem += self._latency(graph, problem)
        elif goal == "sum":
            problem += pulp.lpSum(self.timed(name, lambda c: c.cycles) for name in self.pick)
        elif goal == "interval":
            interval = pulp.LpVariable("interval", lowBound=0, cat="Integer")
            for name in self.pick:
                problem += interval >= self.timed(name, lambda c: c.cycles), f"interval_{name}"
            problem += interval
        else:
            if latency_limit is not None:
                problem += self._latency(graph, problem) <= latency_limit, "latency_limit"
            problem += self._footprint(problem)
        self.problem = problem

    def _footprint(self, problem):
        """`footprint.objective_value` of the chosen design: an integer `largest` no less than every resource's
        share (the FIFOs' included) in LARGEST_STEPs, weighted above the processes' shares summed."""
        self.shares = {name: [resource_shares(c, self.whole) for c in self.costs[name]] for name in self.pick}
        held = resource_shares(dict.fromkeys(RESOURCES, 0) | self.reserved, self.whole)
        largest = pulp.LpVariable("largest_share", lowBound=0, cat="Integer")
        for r in counted(self.whole):
            used = pulp.lpSum(x * s[r] for name, xs in self.pick.items() for x, s in zip(xs, self.shares[name]))
            problem += LARGEST_STEP * largest >= held[r] + used, f"largest_{r}"
        total = pulp.lpSum(x * sum(s.values()) for name, xs in self.pick.items()
                           for x, s in zip(xs, self.shares[name]))
        return weight(len(self.pick), self.whole) * largest + total

    def footprint(self, picked: dict[str, int]) -> Footprint:
        """A design's footprint within the user's budget (its processes and the reserved FIFO memory)."""
        return footprint((self.costs[name][j] for name, j in picked.items()), self.whole, self.reserved)

    def _timing_classes(self, problem) -> dict[str, list[tuple[pulp.LpVariable, Cost]]]:
        """Per process, a variable per distinct timing (cycles, fill, progress curve, lags) weighing as much as
        the candidates with it: the timing constraints name these rather than every candidate (the same LP
        with fewer non-zeros: candidates differing only in their multipliers or resources share a timing;
        resnet8_32 has 1,365 timings for 4,714 candidates)."""
        classes = {}
        for i, (name, xs) in enumerate(self.pick.items()):
            members: dict[tuple, tuple[Cost, list]] = {}
            for x, c in zip(xs, self.costs[name]):
                timing = (c.cycles, c.fill, tuple(c.progress), tuple(map(tuple, c.lags)))
                members.setdefault(timing, (c, []))[1].append(x)
            classes[name] = []
            for k, (cost, group) in enumerate(members.values()):
                timing = group[0]
                if len(group) > 1:
                    timing = pulp.LpVariable(f"timing_{i}_{k}", lowBound=0, upBound=1)
                    problem += pulp.lpSum(group) == timing, f"timing_{i}_{k}"
                classes[name].append((timing, cost))
        return classes

    def timed(self, name: str, figure):
        """The chosen candidate's `figure(cost)` of a timing figure, through its timing class."""
        return pulp.lpSum(t * figure(c) for t, c in self.timing[name])

    def too_slow(self, bound: float) -> list:
        """The candidates no design of latency <= `bound` within the budget holds, by propagation to a fixed
        point: an image is done no sooner than every process wrote its last token, a process starts no sooner
        than the least fills of the paths into it allow, and a candidate must fit the budget beside every
        other process at the least it needs to be that fast (domain propagation)."""
        alive, costs = {name: list(range(len(xs))) for name, xs in self.pick.items()}, self.costs
        while all(costs.values()):
            fast = _fast_enough(self.graph, alive, costs, bound)
            kept = _affordable(*fast, self.budget) if all(fast[1].values()) else fast
            if kept[0] == alive:
                break
            alive, costs = kept
        survivors = {name: set(indices) for name, indices in alive.items()}
        return [x for name, xs in self.pick.items() for j, x in enumerate(xs) if j not in survivors[name]]

    def _tie_lanes(self, problem, c: int, channel) -> None:
        """A channel's lanes: per lane count, the producer's candidates giving it weigh as much as the
        consumer's taking it. Where there are several counts, a binary per count names the chosen one:
        the same LP, but branching on it splits the designs by lanes (all of a skeleton's candidates at
        once) rather than one candidate at a time (with CBC, resnet8_32 at 100 %: 37 s to 20 s, proven)."""
        choices = sorted(self._lanes_choices(self.graph, channel).items())
        for lanes, (made, taken) in choices:
            problem += pulp.lpSum(made) == pulp.lpSum(taken), f"lanes_{channel.name}_{lanes}"
            if len(choices) > 1:
                problem += pulp.lpSum(made) == pulp.LpVariable(f"y_{c}_{lanes}", cat="Binary"), \
                    f"named_{channel.name}_{lanes}"

    def total(self, name: str, attribute: str):
        return self.sample(name, lambda c: getattr(c, attribute))

    def _lanes_choices(self, graph: StreamGraph, channel) -> dict[int, tuple[list, list]]:
        """Per lane count, the producer's and the consumer's candidates that give it. Tying each count's
        two sums (rather than the two weighted lane sums) keeps the LP from mixing 1 and 3 lanes into 2."""
        out = graph.process(channel.producer).outputs.index(channel.name)
        into = graph.process(channel.consumer).inputs.index(channel.name)
        by_lanes: dict[int, tuple[list, list]] = {}
        for x, choice in zip(self.pick[channel.producer], self.options[channel.producer]):
            by_lanes.setdefault(choice.lanes_out[out], ([], []))[0].append(x)
        for x, choice in zip(self.pick[channel.consumer], self.options[channel.consumer]):
            by_lanes.setdefault(choice.lanes_in[into], ([], []))[1].append(x)
        return by_lanes

    def _latency(self, graph: StreamGraph, problem):
        """Pipelined dataflow: a process starts when its inputs' first tokens arrive and finishes no sooner
        than its own work allows. In between, its progress curve (the output token at j/K of an image,
        K = PROGRESS_SAMPLES) is no earlier than its own pace allows, from its start and from the previous
        point, nor than the matching input token's arrival plus the process's lag. Integer start and finish
        times make the objective integral, so a bound within 0.5 of the incumbent proves it."""
        start = {name: pulp.LpVariable(f"s_{i}", lowBound=0, cat="Integer") for i, name in enumerate(self.pick)}
        finish = {name: pulp.LpVariable(f"f_{i}", lowBound=0, cat="Integer") for i, name in enumerate(self.pick)}
        point = {name: [pulp.LpVariable(f"t_{i}_{j}", lowBound=0) for j in range(PROGRESS_SAMPLES)]
                 for i, name in enumerate(self.pick)}
        done = pulp.LpVariable("output_finish", lowBound=0, cat="Integer")
        for name in self.pick:
            problem += finish[name] >= start[name] + self.timed(name, lambda c: c.cycles), f"work_{name}"
            curve = [self.timed(name, lambda c, j=j: c.progress[j]) for j in range(PROGRESS_SAMPLES)]
            for j, at in enumerate(curve):
                problem += point[name][j] >= start[name] + at, f"pace_{name}_{j}"
                if j:
                    step = self.timed(name, lambda c, j=j: c.progress[j] - c.progress[j - 1])
                    problem += point[name][j] >= point[name][j - 1] + step, f"step_{name}_{j}"
            tail = self.timed(name, lambda c: c.cycles - c.progress[-1])
            problem += finish[name] >= point[name][-1] + tail, f"tail_{name}"
            problem += done >= point[name][-1], f"written_{name}"
        for channel in graph.channels.values():
            if channel.producer not in self.pick:
                continue
            if channel.consumer in self.pick:
                consumer, producer = channel.consumer, channel.producer
                problem += (start[consumer] >= start[producer] + self.timed(producer, lambda c: c.fill),
                            f"fill_{channel.name}")
                into = graph.process(consumer).inputs.index(channel.name)
                first = start[producer] + self.timed(producer, lambda c: c.fill)
                shares = input_fractions(graph, graph.process(consumer))[into]
                for j, share in enumerate(shares):
                    lag = self.timed(consumer, lambda c, j=j: c.lags[into][j])
                    arrival = at_share([first] + point[producer], share)
                    problem += point[consumer][j] >= arrival + lag, f"lag_{channel.name}_{j}"
            else:
                problem += done >= finish[channel.producer], f"out_{channel.name}"
        if len(graph.outputs) > 1:
            problem += done >= self._record(graph, problem, finish), "record"
        return done

    def _record(self, graph: StreamGraph, problem, finish):
        """When the output writer has sent an image's record: each output once its producer finished and
        the writer has sent the outputs before it and its own words."""
        first, *later = [graph.channels[port.channel] for port in graph.outputs]
        sent = finish[first.producer]
        for k, channel in enumerate(later, 1):
            writing = pulp.lpSum(x * writer_cycles(graph, channel, choice)
                                 for x, choice in zip(self.pick[channel.producer], self.options[channel.producer]))
            at = pulp.LpVariable(f"record_{k}", lowBound=0)
            problem += at >= finish[channel.producer], f"record_{k}_made"
            problem += at >= sent + writing, f"record_{k}_sent"
            sent = at
        return sent

    def sample(self, name: str, figure):
        """The chosen candidate's `figure(cost)`."""
        return pulp.lpSum(x * figure(c) for x, c in zip(self.pick[name], self.costs[name]))

    def variables(self) -> list:
        return [x for xs in self.pick.values() for x in xs]

    def picked(self, values: dict[str, float] | None) -> dict[str, int] | None:
        """The design the solver's values describe; None unless they are one (it also reports the values of
        a search that stopped before it found any design)."""
        if values is None or any(0.0001 < values.get(x.name, 0.0) < 0.9999 for x in self.variables()):
            return None
        picked = {}
        for name, xs in self.pick.items():
            ones = [j for j, x in enumerate(xs) if values.get(x.name, 0.0) >= 0.9999]
            if len(ones) != 1:
                return None
            picked[name] = ones[0]
        return picked if self.fits(picked) and self._lanes_agree(picked) else None

    def _lanes_agree(self, picked: dict[str, int]) -> bool:
        for channel in self.graph.channels.values():
            if channel.producer in picked and channel.consumer in picked:
                producer, consumer = self.graph.process(channel.producer), self.graph.process(channel.consumer)
                made = self.options[producer.name][picked[producer.name]].lanes_out[producer.outputs.index(channel.name)]
                taken = self.options[consumer.name][picked[consumer.name]].lanes_in[consumer.inputs.index(channel.name)]
                if made != taken:
                    return False
        return True

    def value_of(self, picked: dict[str, int]) -> int:
        """The objective of a design, as the ILP counts it."""
        costs = {name: self.costs[name][j] for name, j in picked.items()}
        if self.goal == "sum":
            return sum(c.cycles for c in costs.values())
        if self.goal == "interval":
            return max(c.cycles for c in costs.values())
        if self.goal == "resources":
            return objective_value(self.footprint(picked), len(self.pick), self.whole)
        return self.latency_of(picked)

    def latency_of(self, picked: dict[str, int]) -> int:
        return estimate(self.graph, {name: self.costs[name][j] for name, j in picked.items()},
                        {name: self.options[name][j] for name, j in picked.items()})[1]

    def fits(self, picked: dict[str, int]) -> bool:
        within = all(sum(getattr(self.costs[name][j], r) for name, j in picked.items()) <= getattr(self.budget, r)
                     for r in RESOURCES)
        return within and (self.latency_limit is None or self.latency_of(picked) <= self.latency_limit)

    def describe(self, picked: dict[str, int], reserved: dict[str, int]) -> dict[str, int]:
        """A design's latency and resources (with the `reserved` FIFO memory), as report.json gives them."""
        used = {r: sum(getattr(self.costs[name][j], r) for name, j in picked.items()) + reserved.get(r, 0)
                for r in RESOURCES}
        return {"cycles": self.latency_of(picked)} | used


@dataclass
class _Run:
    """One MIP (or LP) run."""

    status: str  # "optimal" | "infeasible" | "stopped"
    objective: float | None = None
    bound: float | None = None
    values: dict[str, float] | None = None  # None when it found no solution
    reduced: dict[str, float] = field(default_factory=dict)


@dataclass
class _Search:
    """The outcome of the whole search."""

    status: str  # "optimal" | "feasible" | "infeasible" | "unsolved"
    picked: dict[str, int] | None = None
    value: int = 0
    bound: float = 0.0

    def describe(self) -> str:
        if self.status == "optimal":
            return "optimal"
        gap = 100.0 * (self.value - self.bound) / max(self.value, 1)
        return f"feasible (gap {gap:.1f}%)" if gap >= 0.1 else f"feasible (gap {gap:.2g}%)"


def _search(model: _Model, node_limit: int, incumbent: dict[str, int] | None = None) -> _Search:
    """Branch and bound in deterministic steps, all with HiGHS:

    1. the LP relaxation: a lower bound, reduced costs, and infeasibility proven when it has none;
    2. an incumbent from a small node-limited MIP over the candidates the LP solution uses (RENS, Berthold
       2014), or the given one where that is better;
    3. reduced-cost fixing (a candidate whose reduced cost lifts the LP bound to the incumbent's value
       cannot be in a better design), candidates too slow for it (`_Model.too_slow`), and the MIP over what
       is left with the incumbent as cutoff: when
       it finds no better design, the incumbent is optimal.
    The objective is integral, so a better design is at least one unit better (cutoff value - 0.5).
    `incumbent`: a design known to fit, the one to beat when the heuristics find none better.
    """
    relaxation = _mip(model.problem, node_limit, relax=True)
    if relaxation.status == "infeasible":
        return _Search("infeasible")
    lower = relaxation.objective
    unused = [x for x in model.variables() if relaxation.values.get(x.name, 0.0) <= 1e-6]
    picked = model.picked(_with_zero(unused, lambda: _mip(model.problem, HEURISTIC_NODES)).values)
    if incumbent is not None and (picked is None or model.value_of(incumbent) < model.value_of(picked)):
        picked = incumbent
    if picked is None:
        return _conclude(model, _mip(model.problem, node_limit), None, lower)
    value = model.value_of(picked)
    hopeless = [x for x in unused if lower + relaxation.reduced.get(x.name, 0.0) > value - 0.5]
    if model.goal == "latency":
        hopeless = list(dict.fromkeys(hopeless + model.too_slow(value - 1)))
    better = _with_zero(hopeless, lambda: _mip(model.problem, node_limit, cutoff=value - 0.5))
    if better.status == "infeasible":
        return _Search("optimal", picked, value, value)
    return _conclude(model, better, (picked, value), lower)


def _with_zero(variables: list, run) -> _Run:
    """`run()` with `variables` fixed to 0."""
    for x in variables:
        x.upBound = 0
    try:
        return run()
    finally:
        for x in variables:
            x.upBound = 1


def _conclude(model: _Model, run: _Run, incumbent: tuple[dict[str, int], int] | None, lower: float) -> _Search:
    """The search's outcome from its last MIP run and the incumbent it was given."""
    if run.status == "infeasible" and incumbent is None:
        return _Search("infeasible")
    picked = model.picked(run.values)
    best = (picked, model.value_of(picked)) if picked is not None else incumbent
    if best is None:
        return _Search("unsolved")
    if run.status == "optimal":
        return _Search("optimal", best[0], best[1], best[1])
    bound = max(lower, run.bound if run.bound is not None else lower)
    return _Search("feasible", best[0], best[1], min(bound, best[1]))


def _mip(problem: pulp.LpProblem, node_limit: int, relax: bool = False, cutoff: float | None = None) -> _Run:
    """HiGHS on one thread with its fixed seed (deterministic), as a child process (`ilp.highs_worker`) that
    `subprocess.run` kills when ming is interrupted; its files live in a scratch folder (`ilp.scratch`) that is
    removed on every way out."""
    with scratch_folder() as folder:
        model_file, result_file = os.path.join(folder, "model.mps"), os.path.join(folder, "result.json")
        variables, names, _, _ = problem.writeMPS(model_file, rename=1)
        command = [sys.executable, "-m", "ming_py.ilp.highs_worker", model_file, result_file, str(node_limit),
                   *([str(cutoff)] if cutoff is not None else []), *(["--relax"] if relax else [])]
        run = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if run.returncode != 0 or not os.path.exists(result_file):
            last = (run.stderr.strip().splitlines() or [f"exit status {run.returncode}"])[-1]
            raise MingError(f"the HiGHS run failed: {last}")
        with open(result_file) as f:
            result = json.load(f)
    original = {renamed: name for name, renamed in names.items()}
    values = {original[k]: v for k, v in result["values"].items()} if "values" in result else None
    reduced = {original[k]: v for k, v in result.get("reduced", {}).items()}
    if result["status"] == "infeasible":
        return _Run("infeasible")
    return _Run(result["status"], result["objective"], result["bound"] if result["status"] != "optimal"
                else result["objective"], values, reduced)


def _thrifty(model: _Model, picked: dict[str, int]) -> dict[str, int]:
    """Among designs as fast, prefer the cheaper: each process in turn takes the candidate with its
    lanes that leaves the design's fullest resource emptiest (then uses the least share of the budget)
    without slowing the design or breaking the budget. So MACs move to the LUT fabric only where the DSPs
    run out, never to fill the LUTs of a design the DSPs could carry."""
    value = model.value_of(picked)
    for name in model.pick:
        lanes = _lanes_of(model.options[name][picked[name]])
        others = {r: sum(getattr(model.costs[n][j], r) for n, j in picked.items() if n != name) for r in RESOURCES}

        def fullest(cost: Cost) -> float:
            return max((others[r] + getattr(cost, r)) / max(getattr(model.budget, r), 1) for r in RESOURCES)

        ranked = sorted((j for j, choice in enumerate(model.options[name]) if _lanes_of(choice) == lanes),
                        key=lambda j: (fullest(model.costs[name][j]), _share(model.costs[name][j], model.budget), j))
        for j in ranked:
            trial = picked | {name: j}
            if j == picked[name] or (model.fits(trial) and model.value_of(trial) <= value):
                picked = trial
                break
    return picked


def _descend(model: _Model, picked: dict[str, int]) -> dict[str, int]:
    """A cheaper design to start the least-resource search from: each process in turn takes the candidate with
    its lanes that gives the design the least footprint and keeps it within the budget and the latency limit."""
    held = resource_shares(dict.fromkeys(RESOURCES, 0) | model.reserved, model.whole)
    for name in model.pick:
        lanes = _lanes_of(model.options[name][picked[name]])
        others = {r: held[r] + sum(model.shares[n][j][r] for n, j in picked.items() if n != name) for r in held}

        def key(j: int) -> tuple:
            mine = model.shares[name][j]
            return largest_steps(others[r] + mine[r] for r in others), sum(mine.values()), j

        ranked = sorted((j for j, choice in enumerate(model.options[name]) if _lanes_of(choice) == lanes), key=key)
        for j in ranked:
            if j == picked[name] or model.fits(picked | {name: j}):
                picked = picked | {name: j}
                break
    return picked


def _lanes_of(choice: Choice) -> tuple:
    return choice.lanes_in, choice.lanes_out


def _share(cost: Cost, budget: Budget) -> float:
    return sum(getattr(cost, r) / max(getattr(budget, r), 1) for r in RESOURCES)


def smallest_design(graph: StreamGraph, calibration: Calibration | None = None) -> dict[str, int]:
    """Resources of the least parallel design (every factor and lane 1), each at the multipliers that
    need least of it: what any build needs."""
    needs = dict.fromkeys(RESOURCES, 0)
    for p in graph.processes:
        ones = tuple((loop, 1) for loop in trip_counts(graph, p))
        costs = [process_cost(graph, p, Choice(ones, (1,) * len(p.inputs), (1,) * len(p.outputs), multipliers=m),
                              calibration)
                 for m in kind_of(p.kind).multiplier_choices(dict(ones))]
        for r in RESOURCES:
            needs[r] += min(getattr(c, r) for c in costs)
    return needs


def _describe(needs: dict[str, int]) -> str:
    return ", ".join(f"{UNITS[r]} {v}" for r, v in needs.items())


def _pareto(choices: list[Choice], costs: list[Cost]) -> tuple[list[Choice], list[Cost]]:
    """Drop candidates another candidate with the same lanes beats or ties on every cost."""
    def vector(cost: Cost) -> tuple[int, ...]:
        return cost.vector + tuple(getattr(cost, r) for r in RESOURCES)

    kept: list[int] = []
    for i, (choice, cost) in enumerate(zip(choices, costs)):
        group = (choice.lanes_in, choice.lanes_out)
        mine = vector(cost)
        dominated = False
        for j in kept:
            if (choices[j].lanes_in, choices[j].lanes_out) == group and \
                    all(a <= b for a, b in zip(vector(costs[j]), mine)):
                dominated = True
                break
        if not dominated:
            kept = [j for j in kept if not ((choices[j].lanes_in, choices[j].lanes_out) == group and
                                            all(b <= a for a, b in zip(vector(costs[j]), mine)))]
            kept.append(i)
    return [choices[i] for i in kept], [costs[i] for i in kept]


def schedule_of(graph: StreamGraph, chosen: dict[str, Choice]) -> Schedule:
    processes = {}
    lanes = {}
    for name, choice in chosen.items():
        process = graph.process(name)
        processes[name] = ProcessSchedule(choice.unroll, tuple(sorted(storage_plan(process, choice, graph).items())),
                                          choice.multipliers, choice.requantizers)
        lanes.update(zip(process.outputs, choice.lanes_out))
        for channel, count in zip(process.inputs, choice.lanes_in):
            lanes.setdefault(channel, count)  # the accelerator input: its consumer's parallelism
    return Schedule(processes, lanes)


def _solution(graph, board, chosen, costs, objective, budget, status, seconds, size) -> Solution:
    throughput, latency = estimate(graph, costs, chosen)
    macs = sum(_macs(graph, p) for p in graph.processes)
    totals = {r: sum(getattr(c, r) for c in costs.values()) for r in RESOURCES + ("ff",)}
    totals |= {"cycles": latency, "latency_us": round(latency / board.clock_mhz, 3), "throughput_cycles": throughput,
               "roofline_cycles": math.ceil(macs / max(mac_lanes_within(budget), 1)), "macs": macs,
               # no wall-clock time here: build outputs are byte-identical run to run (it is printed instead)
               "solver": {"status": status, "objective": objective, "budget": vars(budget)} | size}
    return Solution(schedule_of(graph, chosen), chosen, costs, status, seconds, objective, budget, totals)


def estimate(graph: StreamGraph, costs: dict[str, Cost], choices: dict[str, Choice]) -> tuple[int, int]:
    """(throughput cycles, end-to-end latency) under the ILP's latency model (see `_Model._latency`)."""
    start = {name: 0 for name in costs}
    point: dict[str, list[int]] = {}
    finishes: dict[str, float] = {}
    latency = written = 0
    for p in graph.processes:  # topological order
        cost = costs[p.name]
        curve = []
        for j, at in enumerate(cost.progress):
            times = [start[p.name] + at]
            if j:
                times.append(curve[-1] + at - cost.progress[j - 1])
            for i, (c, shares) in enumerate(zip(p.inputs, input_fractions(graph, p))):
                producer = graph.channels[c].producer
                if producer in costs:
                    first = start[producer] + costs[producer].fill
                    times.append(at_share([first] + point[producer], shares[j]) + cost.lags[i][j])
            curve.append(max(times))
        point[p.name] = curve
        written = max(written, curve[-1])
        finish = finishes[p.name] = max(start[p.name] + cost.cycles, curve[-1] + cost.cycles - cost.progress[-1])
        for channel in p.outputs:
            consumer = graph.channels[channel].consumer
            if consumer in start:
                start[consumer] = max(start[consumer], start[p.name] + cost.fill)
            else:
                latency = max(latency, finish)
    first, *later = [graph.channels[port.channel] for port in graph.outputs]
    sent = finishes[first.producer]
    for channel in later:
        sent = max(finishes[channel.producer], sent + writer_cycles(graph, channel, choices[channel.producer]))
    return max(c.cycles for c in costs.values()), math.ceil(max(latency, sent, written))


def earliest_starts(graph: StreamGraph, costs: dict[str, list[Cost]]) -> dict[str, int]:
    """A lower bound on each process's start in any design: the longest path of its producers' least fills."""
    start = dict.fromkeys(costs, 0)
    for p in graph.processes:  # topological order
        fill = min(c.fill for c in costs[p.name])
        for channel in p.outputs:
            consumer = graph.channels[channel].consumer
            if consumer in start:
                start[consumer] = max(start[consumer], start[p.name] + fill)
    return start


def writer_cycles(graph: StreamGraph, channel, choice: Choice) -> int:
    """The output writer's cycles for one image of the accelerator output `channel` (its `pack_axis`)."""
    producer = graph.process(channel.producer)
    return pack_adapter(channel.values, choice.lanes_out[producer.outputs.index(channel.name)]).cycles


def at_share(curve: list, share: float):
    """A progress curve's time at `share` of the tokens: `curve` holds the first token's time and the
    times at 1/K, ..., K/K; in between, linear (a linear expression of ILP variables, or a number)."""
    position = share * PROGRESS_SAMPLES
    below = min(int(position), PROGRESS_SAMPLES - 1)
    weight = position - below
    if weight <= 0:
        return curve[below]
    return curve[below] * (1 - weight) + curve[below + 1] * weight


def _macs(graph: StreamGraph, p) -> int:
    return kind_of(p.kind).macs_per_image(p.window, trip_counts(graph, p))