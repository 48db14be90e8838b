"""Resource-constrained choice of every process's parallelism (MING §IV-C, Eq. 1).

Each process picks exactly one candidate (one-hot binaries over divisor unroll
factors, MING's unroll constraint). A channel's lane count is its producer's
output parallelism and must equal its consumer's input parallelism (MING's
stream constraint). DSP, BRAM18K, URAM and LUT sums stay within the budget.

Objective `latency` models a pipelined dataflow (Stream-HLS §3, CODO §VI): a
process starts when its producers have emitted their first outputs
(start_v >= first_u, with first_u >= start_u + fill_u and no sooner than the input
its first output waits for arrives at its producer's pace plus its first lag),
finishes no sooner than its own work allows
(finish_v >= start_v + cycles_v, so the slowest process sets the pace), and
writes the output token at j/K of an image no sooner than its own pace allows
nor than the producer's token at j/K plus the process's lag (K points of a
progress curve: a consumer that takes its input in bursts, such as a strided
or folded window, waits for the rows it needs); minimise the finish of the
process feeding the output (with several outputs, of the output record: the
writer sends them one after the other). Objective `sum` is MING's
original sum of process cycles. Among equally fast designs the cheaper is kept
(`search.thrifty`). The default, `frugal`, finds the fastest design's latency, then the
least resources (`footprint`: the largest share of the budget, then the sum of the
shares) among the designs within FRUGAL_SLACK of it.

The search (`search.run_search`) is deterministic: HiGHS on one thread with its fixed seed, limited by
branch-and-bound nodes and never by wall-clock time, so the same model and
options give the same design on every run and machine. The status says
"optimal" only when the search proved it, else "feasible (gap x%)" against the
best lower bound; "no design fits" only when infeasibility is proven.

This module is the entry (`solve`) and its outcome (`Solution`, `schedule_of`); the candidates of each process
are in candidates.py, the MIP model in model.py, the search in search.py, the objectives and targets in
objectives.py.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

from ming_py.boards import Board
from ming_py.calibration import Calibration
from ming_py.dataflow import ProcessSchedule, Schedule, StreamGraph
from ming_py.errors import MingError
from ming_py.kinds import kind_of, trip_counts
from ming_py.weights_ddr import board_ddr_problem, ddr_bytes_per_cycle

from .budget import OPTIONS, RESOURCES, UNITS, Budget, what_bounds, with_weight_port
from .pins import Pins
from .cost import Choice, Cost, mac_lanes_within, storage_plan
from .search import NODE_LIMIT, NODE_WORK, Search, SearchStopped, run_search, thrifty
from .candidates import affordable, candidates_and_costs, loaded_weight_memories, least_needs, weight_port_reservation
from .objectives import (FRUGAL_SLACK, OBJECTIVES, RULES, Targets, frugal, frugal_rule_met, latency_model,
                         least_interval, meet_targets)
from .fifos import FifoCharge, charged, uncharged
from .model import Model, estimate


class NoDesignFits(MingError):
    """Proven: no design fits the budget; `ddr_withheld`: among candidates none of which streams its weights from
    DDR though the board could, `bands_withheld`: none of which takes its map in bands though it could (`solve`
    searches again offering them)."""

    ddr_withheld = False
    bands_withheld = False


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
    fastest_unrolls: dict[str, dict[str, int]] | None = None  # frugal: the fastest design's, by process


def _less(budget: Budget, taken: dict[str, int]) -> Budget:
    return replace(budget, **{r: getattr(budget, r) - v for r, v in taken.items()})


def solve(graph: StreamGraph, board: Board, budget: Budget, objective: str = "latency", pins: Pins | None = None,
          node_limit: int | None = None, reserved: dict[str, int] | None = None,
          calibration: Calibration | None = None, targets: Targets | None = None,
          slack: float | None = None, known: dict | None = None, fifos: FifoCharge | None = None) -> Solution:
    """The design `objective` (or, with `targets`, the least-resource design meeting them) picks within `budget`
    (the user's), of which `reserved` (FIFO memory) is already taken, each candidate charged for the memory its lanes
    add to the FIFOs (`fifos`, `ilp.fifos`):

    * latency: the fastest design (then, as fast, the one whose fullest resource is emptiest: `thrifty`);
    * frugal: the fastest design's latency, then the least resources among designs within `slack` of it
      (FRUGAL_SLACK, 10 %, unless a comparison asks for another);
    * sum: MING's sum of process cycles;
    * targets: the least resources among designs whose interval and latency meet them.
    `known`: the candidates of earlier solves of the same graph, pins and calibration (`candidates_and_costs`).
    Least resources: the least `footprint` (the largest share of the budget over its resources, FIFOs
    included, in steps of 0.1 %; then the sum of the shares).

    Weights from DDR (`ming_py.weights_ddr`) are offered where they outgrow the chip, and else only where no design
    keeps them all on chip: the search runs once more, offering them, where the first proves no design fits. So
    every design that fits on chip is the one it was without DDR. Likewise streamed loops in bands of their maps
    (`ming_py.kinds.streamed`): offered only where no design fits with the streamed loops taking whole maps.

    Deterministic: the same graph, budget and pins give the same design on every machine and every run
    (HiGHS on one thread, limited by branch-and-bound nodes, never by wall-clock time)."""
    if objective not in OBJECTIVES:
        raise MingError(f"unknown objective {objective!r}; use {', '.join(OBJECTIVES)}")
    arguments = (graph, board, budget, objective, pins, node_limit, reserved, calibration, targets, slack, known, fifos)
    offer_ddr = bands = False
    proof = None
    while True:
        try:
            return _solve(*arguments, offer_ddr=offer_ddr, bands=bands)
        except NoDesignFits as error:
            if error.ddr_withheld:
                offer_ddr = True
            elif error.bands_withheld:
                bands = True
            else:
                raise
            proof = error
        except SearchStopped:
            if proof is None:
                raise
            raise proof from None  # the search offering more stopped at its node limit: the proof without it stands


def _solve(graph: StreamGraph, board: Board, budget: Budget, objective: str, pins: Pins | None, node_limit: int | None,
           reserved: dict[str, int] | None, calibration: Calibration | None, targets: Targets | None,
           slack: float | None, known: dict | None, fifos: FifoCharge | None, offer_ddr: bool, bands: bool) -> Solution:
    """`solve`, weights from DDR offered where they outgrow the chip or (`offer_ddr`) wherever a process can
    stream them, the streamed loops in bands of their maps where `bands`."""
    started = time.perf_counter()
    reserved = {r: v for r, v in (reserved or {}).items() if v}
    port = weight_port_reservation(graph, board, _less(budget, reserved), calibration, pins)
    budget = with_weight_port(board, budget, port)
    available = _less(budget, reserved)
    streams = board_ddr_problem(board) is None
    options, costs = candidates_and_costs(graph, pins or Pins(), available, calibration, known, streams, offer_ddr,
                                          bands)
    costs = charged(options, costs, fifos)
    # where no design fits, whether a search offering weights from DDR to the processes not pinned may find one, or
    # one offering bands to the processes that may stream theirs
    pinned = (pins or Pins()).weights
    withheld = streams and "ddr" not in loaded_weight_memories(graph, available, calibration, streams, offer_ddr) \
        and any(p.weights is not None and kind_of(p.kind).streamed_template and p.name not in pinned
                for p in graph.processes)
    bands_withheld = not bands and any(kind_of(graph.process(name).kind).streamed_maps and c.weights == "ddr"
                                       for name, choices in options.items() for c in choices)
    try:
        if any(least > getattr(budget, r) for r, least in _least_design(costs, reserved).items()):
            raise _no_design_fits(board, budget, reserved, port, costs)  # a proof without the ILP
        return _searched(graph, board, budget, objective, pins, node_limit, reserved, calibration, targets, slack,
                         started, port, available, options, costs, fifos)
    except NoDesignFits as error:
        error.ddr_withheld, error.bands_withheld = withheld, bands_withheld
        raise


def _searched(graph, board, budget, objective, pins, node_limit, reserved, calibration, targets, slack, started,
              port, available, options, costs, fifos) -> Solution:
    """The design the search picks among the candidates (`solve`)."""
    given = costs  # what a proof that no design fits rests on
    options, costs = affordable(options, costs, available)
    if not all(options.values()):  # a process none of whose candidates fits beside the others at their least
        raise _no_design_fits(board, budget, reserved, port, given)
    if node_limit is None:
        node_limit = min(NODE_LIMIT, max(1_000, NODE_WORK // sum(map(len, options.values()))))
    measured: dict = {}  # frugal: the fastest design it was measured against
    fastest_unrolls = None  # frugal: that design's unroll factors
    if targets:
        model, picked, status, rule = meet_targets(graph, board, options, costs, available, targets, node_limit,
                                                   reserved)
    else:
        rate, interval = ddr_bytes_per_cycle(board), None
        if objective == "sum":
            model = Model(graph, options, costs, available, "sum", ddr_rate=rate)
        else:
            model, interval = latency_model(graph, options, costs, available, rate, node_limit)
        if interval is not None and interval.status == "infeasible":
            _decided(interval, board, budget, reserved, node_limit, pins, port, given)
        slack = FRUGAL_SLACK if slack is None else slack

        def least_resources(fastest: dict[str, int], abandon, fastest_model: Model = model):
            return frugal(fastest_model, fastest, node_limit, reserved, slack, abandon)

        then = least_resources if objective == "frugal" else None
        # the design whose slowest process is fastest: the incumbent where it was found first, else the fallback
        start = None if interval is None else interval.picked
        fallback = None if objective == "sum" or interval is not None else \
            (lambda: least_interval(graph, options, costs, available, rate, node_limit).picked)
        search = _decided(run_search(model, node_limit, start, then, fallback=fallback), board, budget, reserved,
                          node_limit, pins, port, given)
        picked, status = thrifty(model, search.picked) if objective == "latency" else search.picked, search.describe()
        rule = RULES[objective]
        if objective == "frugal":
            fastest_unrolls = {name: dict(model.options[name][j].unroll) for name, j in picked.items()}
            fastest = model.describe(picked, reserved)
            fastest["latency_us"] = round(fastest["cycles"] / board.clock_mhz, 3)
            model, least, limit = search.then
            rule = frugal_rule_met(slack, fastest["cycles"], status, limit)
            picked, status = least.picked, least.describe()
            measured = {"fastest": fastest, "latency_limit_cycles": limit}
    chosen = {name: model.options[name][j] for name, j in picked.items()}  # the frugal and targets' models keep fewer
    chosen_costs = {name: uncharged(name, chosen[name], model.costs[name][j], fifos)
                    for name, j in picked.items()}
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
                     time.perf_counter() - started, size, fastest_unrolls)


def _decided(search: Search, board, budget, reserved, node_limit, pins: Pins | None, port: dict[str, int],
             costs: dict[str, list[Cost]]) -> Search:
    """The search's outcome, or the error that it found no design."""
    if search.status == "infeasible" and pins is not None and pins.pinned:
        raise NoDesignFits("no design keeps the pinned settings within the budget: a channel's lanes are its "
                           "producer's output factor and its consumer's input factor, so pin both alike or "
                           "leave one to the ILP")
    if search.status == "infeasible":
        raise _no_design_fits(board, budget, reserved, port, costs)
    if search.picked is None:
        raise SearchStopped(f"the ILP found no design within its limit of {node_limit:,} branch-and-bound nodes; "
                            f"loosen the budget or pin some unroll factors (--set)")
    return search


def _least_design(costs: dict[str, list[Cost]], reserved: dict[str, int]) -> dict[str, int]:
    """Per resource, the least any design of these candidates needs: every process at its least of it, and the
    FIFOs' `reserved`."""
    return {r: sum(least.values()) + reserved.get(r, 0) for r, least in least_needs(costs).items()}


def _no_design_fits(board: Board, budget: Budget, reserved: dict[str, int], port: dict[str, int],
                    costs: dict[str, list[Cost]]) -> NoDesignFits:
    """The budget, the least any design of the candidates `costs` needs of it (`_least_design`: the bound the
    proof rests on), and for each resource it exceeds which limit bounds it (the default share, the user's option
    or what the platform keeps) and how to lift it; where each resource fits alone, that the ILP found no
    combination fits, and which options may lift the resources the candidates trade."""
    needs = _least_design(costs, reserved)
    fifos = f"; the FIFOs need {_describe(reserved)} of it" if reserved else ""
    with_fifos = " with the FIFOs" if reserved else ""
    short = [r for r in RESOURCES if needs[r] > getattr(budget, r)]
    reason = "".join(f"; {what_bounds(board, r, getattr(budget, r), port.get(r, 0))}" for r in short) or \
        f"; each fits the budget alone, but no design fits them all at once{_lifting(board, budget, reserved, port, costs)}"
    return NoDesignFits(f"no design fits the budget ({_describe(vars(budget))}{fifos}); every design needs at least "
                        f"{_describe(needs)}{with_fifos} (each process at its least of each){reason}")


def _lifting(board: Board, budget: Budget, reserved: dict[str, int], port: dict[str, int],
             costs: dict[str, list[Cost]]) -> str:
    """The budget options that may lift a combination no design fits, in words: those of the resources the board
    has more of whose limit some design of the candidates would exceed (every process at its most, the FIFOs
    added: below the limit, it binds no design)."""
    most = {r: sum(max(getattr(c, r) for c in cs) for cs in costs.values()) + reserved.get(r, 0) for r in RESOURCES}
    room = {r: board.usable(r) - port.get(r, 0) for r in RESOURCES}
    lifted = [f"{OPTIONS[r]} (at most {room[r]:,})" for r in RESOURCES if getattr(budget, r) < min(most[r], room[r])]
    if not lifted:
        return f", and the {board.name} leaves no more to a design"
    return ": raise " + (f"{', '.join(lifted[:-1])} or {lifted[-1]}" if len(lifted) > 1 else lifted[0])


def _describe(needs: dict[str, int]) -> str:
    return ", ".join(f"{UNITS[r]} {v}" for r, v in needs.items())


def schedule_of(graph: StreamGraph, chosen: dict[str, Choice]) -> Schedule:
    processes = {}
    lanes = {}
    for name, choice in chosen.items():
        process = graph.process(name)
        processes[name] = ProcessSchedule(choice.unroll, tuple(sorted(storage_plan(process, choice, graph).items())),
                                          choice.multipliers, choice.requantizers, choice.bands)
        lanes.update(zip(process.outputs, choice.lanes_out))
        for channel, count in zip(process.inputs, choice.lanes_in):
            lanes.setdefault(channel, count)  # the accelerator input: its consumer's parallelism
    return Schedule(processes, lanes)


def _solution(graph, board, chosen, costs, objective, budget, status, seconds, size,
              fastest_unrolls: dict | None = None) -> Solution:
    throughput, latency = estimate(graph, costs, chosen)
    macs = sum(_macs(graph, p) for p in graph.processes)
    totals = {r: sum(getattr(c, r) for c in costs.values()) for r in RESOURCES + ("ff",)}
    totals |= {"cycles": latency, "latency_us": round(latency / board.clock_mhz, 3), "throughput_cycles": throughput,
               "roofline_cycles": math.ceil(macs / max(mac_lanes_within(budget), 1)), "macs": macs,
               # no wall-clock time here: build outputs are byte-identical run to run (it is printed instead)
               "solver": {"status": status, "objective": objective, "budget": vars(budget)} | size}
    return Solution(schedule_of(graph, chosen), chosen, costs, status, seconds, objective, budget, totals,
                    fastest_unrolls)


def _macs(graph: StreamGraph, p) -> int:
    return kind_of(p.kind).macs_per_image(p.window, trip_counts(graph, p))
