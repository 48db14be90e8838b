"""Design-space exploration: the ILP's schedule of a model under the user's budget and pins, then the FIFO
depths, sized on the loop descriptions (`line_buffers.fifo`) and deepened or shrunk by the cycle-level
simulation (`ming_py.simulate`); no design the simulation says deadlocks leaves here. The targets are checked on
that simulation (`simulated_targets`), and the design's headline latency (totals `cycles`, `latency_us`,
`interval_cycles`) is the simulated one; the model's figures are kept as `estimated_cycles` and
`estimated_latency_us`."""

from __future__ import annotations

from dataclasses import replace

from ming_py.array_layout import fifo_storage
from ming_py.boards import Board
from ming_py.dataflow import Schedule, StreamGraph
from ming_py.errors import MingError
from ming_py.process_spec import ProcessSpec
from ming_py.limits import check_fifo_bits
from ming_py.line_buffers.fifo import DEEPEST_PIXELS, DEFAULT_PIXELS, FifoPlan, reservation_plan
from ming_py.options import BuildOptions, target_board
from ming_py.simulate import SimResult, headline, simulate_schedule

from .budget import Budget, limits, what_bounds, with_weight_port
from .fifos import FifoCharge
from .cost import choice_spec
from .pins import Pins, resolve
from .objectives import TargetMissed, Targets
from .simulated_targets import meeting_targets
from .search import SearchStopped
from .solve import NoDesignFits, Solution, solve

# the solver rule's end where the design was solved again with the unroll factors of one first found
UNROLLS_KEPT = ("; solved again with the unroll factors of a design first found kept, after the FIFOs sized for "
                "the design first chosen took more memory than the search had set aside for them")
SIZED_PIXELS = (DEFAULT_PIXELS, 4, 8, DEEPEST_PIXELS)  # the least pixels every FIFO holds, as the sizing tries them
REPAIRS = 3  # times a design is solved again with more memory set aside for its FIFOs, at most


def explore(stream_graph: StreamGraph, options: BuildOptions) -> tuple[Board, Solution, SimResult]:
    """The ILP-chosen schedule of `stream_graph` under the options' budget and pins, with its simulated
    latency as the headline, and that simulation; with targets, one whose simulation meets them (else
    TargetMissed)."""
    board = target_board(options)
    pins = resolve(options.settings, stream_graph, board)
    budget = Budget.of(board, options.limits)
    # sized FIFOs hold whole pixels whatever the lanes, so their memory is known before the ILP runs
    reservation = reservation_plan(stream_graph)
    check_fifo_bits(reservation.bits(DEFAULT_PIXELS))
    known: dict = {}  # the candidates and their costs, computed once for every solve below

    def design(targets: Targets, objective: str = options.objective) -> tuple[Solution, SimResult]:
        return _budgeted_design(stream_graph, board, budget, replace(options, objective=objective), pins,
                                reservation, targets, known)

    targets = Targets(options.target_fps, options.target_latency_us)
    if targets:
        solution, simulated = meeting_targets(design, lambda: design(Targets(), "latency"), targets, board,
                                              (FifosOverBudget,))
    else:
        solution, simulated = design(targets)
    solution.totals = with_simulated_headline(solution.totals, simulated, board.clock_mhz)
    return board, solution, simulated


def _budgeted_design(stream_graph, board, budget, options, pins, reservation: FifoPlan,
                     targets, known: dict) -> tuple[Solution, SimResult]:
    """The sized design and its simulation. The ILP sets memory aside for FIFOs as deep as its latency model
    assumes (DEEPEST_PIXELS, `cost.starved_cover`), so that the sizing may deepen them wherever the simulation
    gains (and as the least, DEFAULT_PIXELS); where no design fits beside those or meets the targets, for the least
    FIFOs alone. The one-lane FIFOs' memory is set aside, and each candidate charged for what its lanes add
    (`ilp.fifos`)."""
    try:
        deep = FifoCharge(reservation, (DEFAULT_PIXELS, DEEPEST_PIXELS))
        return _reserving(stream_graph, board, budget, options, pins, deep, targets, known)
    except (NoDesignFits, TargetMissed):
        least = FifoCharge(reservation, (DEFAULT_PIXELS,))
        return _reserving(stream_graph, board, budget, options, pins, least, targets, known)


def _reserving(stream_graph, board, budget, options, pins, fifos: FifoCharge, targets,
               known: dict) -> tuple[Solution, SimResult]:
    """The sized design with the FIFO memory of `fifos` set aside; where the sized FIFOs take it past its budget
    (depths for the chosen lanes and loops, deepened until the simulation completes), solved again (`_repaired`)
    with what they took set aside, less what the design's candidates were charged for them (so that design no
    longer fits), at most REPAIRS times: the design solved again may need other FIFOs."""
    reserved = fifos.reserved()
    try:
        return _sized_design(stream_graph, board, budget, options, pins, fifos, reserved, targets, known)
    except FifosOverBudget as over:
        if pins.depths or over.fifo is None:
            raise
        failed = over
    for _ in range(REPAIRS):
        charged = fifos.total(failed.solution.choices)
        reserved = {r: max(v, failed.fifo[f"fifo_{r}"] - charged[r]) for r, v in reserved.items()}
        try:
            return _repaired(stream_graph, board, budget, options, pins, fifos, reserved, targets, known,
                             failed.solution)
        except FifosOverBudget as over:
            failed = over
    raise failed


def _repaired(stream_graph, board, budget, options, pins, fifos: FifoCharge, reserved, targets, known: dict,
              overshot: Solution) -> tuple[Solution, SimResult]:
    """The sized design with `reserved` set aside, after the design `overshot` took its FIFOs past the budget: with
    the unroll factors of the fastest design (the frugal objective's) kept, else those of `overshot`, else (no
    design with them fits or meets the targets) over every unroll factor."""
    for unrolls in _first_unrolls(overshot):
        try:
            solution, simulated = _sized_design(stream_graph, board, budget, options, _unrolls_kept(pins, unrolls),
                                                fifos, reserved, targets, {})
        except (NoDesignFits, FifosOverBudget, TargetMissed, SearchStopped):
            continue
        solution.totals["solver"]["rule"] += UNROLLS_KEPT
        return solution, simulated
    return _sized_design(stream_graph, board, budget, options, pins, fifos, reserved, targets, known)


def _first_unrolls(solution: Solution) -> list[dict[str, dict[str, int]]]:
    """The unroll factors to solve again with: the fastest design's (frugal), then the chosen design's."""
    chosen = {name: dict(process.unroll) for name, process in solution.schedule.processes.items()}
    fastest = solution.fastest_unrolls
    return [chosen] if fastest in (None, chosen) else [fastest, chosen]


def _unrolls_kept(pins: Pins, unrolls: dict[str, dict[str, int]]) -> Pins:
    """`pins` with every process's unroll factors `unrolls` (a design's, which kept the pinned ones): the search
    again over little more than the processes' memories, multipliers and requantizers, a small ILP where the
    search over every unroll factor of a large network stops at its node limit after minutes."""
    return replace(pins, unroll=unrolls)


def _fifos_fit(processes: dict[str, int], fifo: dict[str, int], budget: Budget) -> bool:
    """Whether the processes' BRAM18K and LUTs and the FIFOs' (`fifo_cost`) fit within `budget`."""
    return all(processes[r] + fifo[f"fifo_{r}"] <= getattr(budget, r) for r in ("bram18k", "lut"))


def with_simulated_headline(totals: dict, simulated: SimResult, clock_mhz: float) -> dict:
    """The solver's totals with the simulated latency and interval as `cycles`, `latency_us` and
    `interval_cycles`, and the model's latency moved to `estimated_cycles` and `estimated_latency_us`."""
    result = {}
    for key, value in totals.items():
        if key == "cycles":
            result |= headline(simulated, clock_mhz) | {"estimated_cycles": value,
                                                        "estimated_latency_us": totals["latency_us"]}
        elif key != "latency_us":
            result[key] = value
    return result


def _sized_design(stream_graph, board, budget, options, pins, fifos: FifoCharge, reserved,
                  targets, known: dict) -> tuple[Solution, SimResult]:
    """The ILP's schedule with `reserved` FIFO memory set aside and the candidates charged for their FIFOs' lanes
    (`fifos`), its FIFOs sized and checked to complete and fit, and its simulation."""
    solution = solve(stream_graph, board, budget, options.objective, pins, reserved=reserved,
                     calibration=options.calibration, targets=targets, known=known, fifos=fifos)
    port = solution.totals["solver"].get("weight_port_reserved", {})
    budget = with_weight_port(board, budget, port)  # the budget the ILP chose within
    lanes = {c: solution.schedule.lanes_of(c) for c in stream_graph.channels}
    specs = schedule_specs(stream_graph, solution)
    plan = FifoPlan(stream_graph, specs, {name: spec.depth for name, spec in specs.items()})
    least_pixels, simulated = decoupling_pixels(stream_graph, solution, budget, plan, pins.depths)
    solution.schedule = replace(solution.schedule, depths=plan.depths(least_pixels) | pins.depths)
    if options.minimal_fifos:
        solution.schedule = minimal_fifos(stream_graph, solution, set(pins.depths), simulated)
        simulated = simulate_schedule(stream_graph, solution.schedule)
    fifo = _fifo_totals({c: (solution.schedule.depth_of(c), lanes[c]) for c in stream_graph.channels})
    totals = solution.totals
    totals |= fifo | {"bram18k": totals["bram18k"] + fifo["fifo_bram18k"], "lut": totals["lut"] + fifo["fifo_lut"]}
    totals["solver"]["budget"] = vars(budget)
    totals["solver"]["limits"] = limits(board, budget, port)
    check_fifo_budget(stream_graph, solution, budget, pins.depths, fifo, board, pins.depth_origins)
    check_completes(stream_graph, solution, simulated, plan.depths(least_pixels), pins.depths, pins.depth_origins)
    return solution, simulated


class FifosOverBudget(MingError):
    """The FIFOs the design needs take it past its budget; `fifo` holds what ming's own sizes took
    (None when a pinned depth did)."""

    def __init__(self, message: str, fifo: dict[str, int] | None = None, solution: Solution | None = None):
        super().__init__(message)
        self.fifo, self.solution = fifo, solution


def check_fifo_budget(graph: StreamGraph, solution: Solution, budget: Budget, pinned: dict[str, int],
                      fifo: dict[str, int] | None = None, board: Board | None = None,
                      origins: dict[str, str] | None = None) -> None:
    """Stops when the FIFOs take the design past its BRAM18K or LUT budget (the weight port's DMA set aside where
    the ILP did), naming the deepest pinned FIFO, or else which limit bounds the budget (with `board`)."""
    totals = solution.totals
    port = totals.get("solver", {}).get("weight_port_reserved", {})
    for resource, unit in (("bram18k", "BRAM18K"), ("lut", "LUTs")):
        if totals[resource] <= getattr(budget, resource):
            continue
        used = f"the design needs {totals[resource]:,} {unit} of its budget of {getattr(budget, resource):,}"
        if pinned:
            channel = max(pinned, key=lambda c: pinned[c] * solution.schedule.lanes_of(c))
            raise FifosOverBudget(f"{_pinned(channel, pinned, origins)}: with it {used}; give a smaller depth")
        bound = f" ({what_bounds(board, resource, getattr(budget, resource), port.get(resource, 0))})" if board else ""
        raise FifosOverBudget(f"the FIFOs ming sized take the design past its budget ({used}); raise the "
                              f"{unit} budget{bound} or lower another", fifo, solution)


def _pinned(channel: str, pinned: dict[str, int], origins: dict[str, str] | None) -> str:
    """A pinned FIFO depth as the user gave it (on the command line or in a settings file)."""
    return (origins or {}).get(channel, f"--set {channel}.depth={pinned[channel]}")


def check_completes(graph: StreamGraph, solution: Solution, result: SimResult, sized: dict[str, int],
                    pinned: dict[str, int], origins: dict[str, str] | None = None) -> None:
    """The design's cycle-level simulation (`result`) must run to the end: else stops naming the pinned FIFO
    that deadlocks it and the least depth with which it completes, or (with ming's own depths) as a bug."""
    if result.deadlock is None:
        return
    for channel in sorted(pinned, key=lambda c: (not any(c in line for line in result.deadlock), c)):
        least = _least_completing_depth(graph, solution, channel, pinned[channel], sized[channel])
        if least is not None:
            wait = next((line for line in result.deadlock if channel in line), result.deadlock[0])
            raise MingError(f"{_pinned(channel, pinned, origins)}: the design deadlocks with it "
                            f"(ming simulate: {wait}); the least depth that completes is {least}")
    if pinned:
        raise MingError(f"the pinned FIFO depths deadlock the design (ming simulate: {result.deadlock[0]}); "
                        f"remove the .depth settings")
    raise MingError(f"the FIFO depths ming sized deadlock the design (ming simulate: {result.deadlock[0]}); "
                    f"this is a bug in ming: please report it with the model")


def _least_completing_depth(graph: StreamGraph, solution: Solution, channel: str, pinned: int,
                            sized: int) -> int | None:
    """The least depth of `channel` above `pinned` with which the design completes, the other depths kept;
    None if not even the whole tensor or ming's own depth does."""
    def completes(depth: int) -> bool:
        schedule = replace(solution.schedule, depths=solution.schedule.depths | {channel: depth})
        return simulated_cycles(graph, schedule) is not None

    tokens = graph.channels[channel].values // solution.schedule.lanes_of(channel)
    high = next((d for d in sorted({sized, tokens + 1}) if d > pinned and completes(d)), None)
    if high is None:
        return None
    low = pinned  # deadlocks
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if completes(middle) else (middle, high)
    return high


def fifo_cost(plan: FifoPlan, least_pixels: int = DEFAULT_PIXELS) -> dict[str, int]:
    """Bits of all of `plan`'s FIFOs holding at least `least_pixels` pixels and the BRAM18K / LUTs they take."""
    return _fifo_totals({c: (depth, plan.deps.lanes(c)) for c, depth in plan.depths(least_pixels).items()})


def _fifo_totals(shapes: dict[str, tuple[int, int]]) -> dict[str, int]:
    """Of FIFOs given as (depth, lanes): their bits and the BRAM18K / LUTs they take (`array_layout.fifo_storage`)."""
    memory = [fifo_storage(depth, 8 * lanes) for depth, lanes in shapes.values()]
    return {"fifo_bits": sum(depth * lanes * 8 for depth, lanes in shapes.values()),
            "fifo_bram18k": sum(m.bram18k for m in memory), "fifo_lut": sum(m.lut for m in memory)}


def schedule_specs(graph: StreamGraph, solution: Solution) -> dict[str, ProcessSpec]:
    """Each process's loop spec under the chosen schedule."""
    return {p.name: choice_spec(graph, p, solution.choices[p.name]) for p in graph.processes}


def simulated_cycles(graph: StreamGraph, schedule: Schedule) -> int | None:
    """The cycle-level simulation's latency of a schedule; None when it deadlocks."""
    result = simulate_schedule(graph, schedule)
    return None if result.deadlock else result.cycles


def decoupling_pixels(graph: StreamGraph, solution: Solution, budget: Budget, plan: FifoPlan,
                      pinned: dict[str, int]) -> tuple[int, SimResult]:
    """The least pixels every FIFO holds, and the design's simulation with them: doubled while the simulated
    latency drops by 2% and the budget allows the FIFOs of `plan` (the design's) holding them."""

    def simulated(pixels: int) -> SimResult:
        depths = plan.depths(pixels) | pinned
        return simulate_schedule(graph, replace(solution.schedule, depths=depths))

    best, best_run = DEFAULT_PIXELS, simulated(DEFAULT_PIXELS)
    for pixels in SIZED_PIXELS[1:]:
        if not _fifos_fit(solution.totals, fifo_cost(plan, pixels), budget):
            break
        trial = simulated(pixels)
        if best_run.deadlock or trial.deadlock or trial.cycles > 0.98 * best_run.cycles:
            break
        best, best_run = pixels, trial
    return best, best_run


def minimal_fifos(graph: StreamGraph, solution: Solution, pinned: set[str], result: SimResult | None = None) \
        -> Schedule:
    """Every unpinned FIFO shrunk to the least depth with which no write of the design's simulation (`result`,
    else made here) waits longer than it did.

    One simulation gives all depths, and with them every token moves in the same cycle as before (see
    `simulate._need`), so the simulated latency is kept exactly. A deadlocked design keeps its depths."""
    schedule = solution.schedule
    result = simulate_schedule(graph, schedule) if result is None else result
    if result.deadlock is not None:
        return schedule
    depths = {c: schedule.depth_of(c) if c in pinned else min(schedule.depth_of(c), result.fifo_need[c])
              for c in graph.channels}
    return replace(schedule, depths=depths)
