"""`ming build`: model -> Vitis HLS project, reports and host metadata, written atomically."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from ming_py.boards import Board
from ming_py.classify import classify
from ming_py.emit.alveo import alveo_files
from ming_py.emit.deploy import deploy_files
from ming_py.emit.hls import emit_hls
from ming_py.emit.vivado import vivado_files
from ming_py.emit.reports import dataflow_mlir, host_metadata, report, report_json, report_markdown
from ming_py.ilp import Budget, Solution, solve
from ming_py.ilp.pins import resolve
from ming_py.line_buffers import build_stream_graph
from ming_py.line_buffers.fifo import DEFAULT_PIXELS, FifoPlan, fifo_memory, reservation_plan

from .dataflow import Schedule, StreamGraph
from .errors import MingError
from .ir import Graph
from .pipeline import lift
from .progress import Progress
from .options import check_design, check_model, target_board
from .output import check_output, output_lock, replace_tree
from .kernel import KernelSpec, kernel_spec, validate_schedule
from .limits import check_fifo_bits
from .sample import sample_files
from .simulate import simulate


@dataclass
class Design:
    graph: Graph
    stream_graph: StreamGraph
    schedule: Schedule
    board: Board
    files: dict[str, str | bytes]  # relative path -> text (binary: the testbench's sample)
    solution: Solution | None = None


def design(graph: Graph, board: Board, schedule: Schedule | None = None, solution: Solution | None = None) -> Design:
    """Every output file of a build, in memory."""
    stream_graph = build_stream_graph(graph)
    schedule = schedule or (solution.schedule if solution else Schedule())
    problems = validate_schedule(stream_graph, schedule)
    if problems:
        raise MingError(f"invalid schedule: {problems[0]}")
    data = report(stream_graph, schedule, board, solution)
    simulated = simulate(data)
    data["totals"] |= {"simulated_cycles": simulated.cycles,
                       "simulated_first_output_cycles": simulated.first_output_cycles,
                       "simulated_deadlock": simulated.deadlock}
    kinds = {k.name: classify(k).kind for k in graph.kernels()}
    for node in data["nodes"]:
        node["class"] = kinds.get(node["name"], "data_movement")
    files = {f"hls/{name}": text for name, text in emit_hls(stream_graph, schedule, board).items()}
    files |= sample_files(graph, stream_graph)
    files |= deploy_files(stream_graph, board)
    if board.interface == "zynq_axis_dma":
        files |= vivado_files(stream_graph, board)
    else:
        files |= alveo_files(stream_graph, board)
    files |= {
        "report.json": report_json(data),
        "report.md": report_markdown(data),
        "dataflow.mlir": dataflow_mlir(stream_graph, schedule),
        "host.json": host_metadata(stream_graph, board),
    }
    return Design(graph, stream_graph, schedule, board, files, solution)


@dataclass(frozen=True)
class BuildOptions:
    """What a user chooses for a build besides the model."""

    board: str = "kv260"
    limits: dict[str, str | None] = field(default_factory=dict)  # resource -> "N" | "P%"
    objective: str = "latency"
    settings: dict[str, int] = field(default_factory=dict)  # PROCESS.unroll.LOOP / CHANNEL.depth pins
    clock_mhz: float | None = None
    minimal_fifos: bool = False  # shrink FIFOs to the least depth that keeps the simulated latency


def explore(graph: Graph, options: BuildOptions) -> tuple[Board, Solution]:
    """The ILP-chosen schedule of `graph` under the options' budget and pins."""
    board = target_board(options)
    stream_graph = build_stream_graph(graph)
    pins = resolve(options.settings, stream_graph)
    budget = Budget.of(board, options.limits)
    reservation = reservation_plan(stream_graph)
    reserved_bits = reservation.bits(DEFAULT_PIXELS)
    check_fifo_bits(reserved_bits)
    fifo = _fifo_totals(reserved_bits)
    # sized FIFOs hold whole pixels whatever the lanes, so their memory is known before the ILP runs
    reserved = {"bram18k": fifo["fifo_bram18k"], "lut": fifo["fifo_lut"]}
    solution = solve(stream_graph, board, budget, options.objective, pins.unroll, reserved=reserved)
    lanes = {c: solution.schedule.lanes_of(c) for c in stream_graph.channels}
    specs = schedule_specs(stream_graph, solution)
    plan = FifoPlan(stream_graph, specs, {name: spec.depth for name, spec in specs.items()})
    least_pixels = decoupling_pixels(stream_graph, solution, board, budget, plan, reservation, pins.depths)
    solution.schedule = replace(solution.schedule, depths=plan.depths(least_pixels) | pins.depths)
    if options.minimal_fifos:
        solution.schedule = minimal_fifos(stream_graph, solution, board, set(pins.depths))
    fifo = _fifo_totals({c: solution.schedule.depth_of(c) * lanes[c] * 8 for c in stream_graph.channels})
    totals = solution.totals
    totals |= fifo | {"bram18k": totals["bram18k"] + fifo["fifo_bram18k"], "lut": totals["lut"] + fifo["fifo_lut"]}
    totals["solver"]["budget"] = vars(budget)
    check_fifo_budget(stream_graph, solution, budget, pins.depths)
    check_completes(stream_graph, solution, board, plan.depths(least_pixels), pins.depths)
    return board, solution


def check_fifo_budget(graph: StreamGraph, solution: Solution, budget: Budget, pinned: dict[str, int]) -> None:
    """Stops when the FIFOs take the design past its BRAM18K or LUT budget, naming the deepest pinned FIFO."""
    totals = solution.totals
    for resource, unit in (("bram18k", "BRAM18K"), ("lut", "LUTs")):
        if totals[resource] <= getattr(budget, resource):
            continue
        used = f"the design needs {totals[resource]:,} {unit} of its budget of {getattr(budget, resource):,}"
        if pinned:
            channel = max(pinned, key=lambda c: pinned[c] * solution.schedule.lanes_of(c))
            raise MingError(f"--set {channel}.depth={pinned[channel]}: with it {used}; give a smaller depth")
        raise MingError(f"the FIFOs ming sized take the design past its budget ({used}); raise the "
                        f"{unit} budget or lower another")


def check_completes(graph: StreamGraph, solution: Solution, board: Board, sized: dict[str, int],
                    pinned: dict[str, int]) -> None:
    """Stops unless the cycle-level simulation of the design runs to the end: naming the pinned FIFO that
    deadlocks it and the least depth with which it completes, or (with ming's own depths) as a bug."""
    schedule = solution.schedule
    result = simulate(report(graph, schedule, board, solution))
    if result.deadlock is None:
        return
    for channel in sorted(pinned, key=lambda c: (not any(c in line for line in result.deadlock), c)):
        least = _least_completing_depth(graph, solution, board, channel, pinned[channel], sized[channel])
        if least is not None:
            wait = next((line for line in result.deadlock if channel in line), result.deadlock[0])
            raise MingError(f"--set {channel}.depth={pinned[channel]}: the design deadlocks with it "
                            f"(ming simulate: {wait}); the least depth that completes is {least}")
    if pinned:
        raise MingError(f"the pinned FIFO depths deadlock the design (ming simulate: {result.deadlock[0]}); "
                        f"remove the .depth settings")
    raise MingError(f"the FIFO depths ming sized deadlock the design (ming simulate: {result.deadlock[0]}); "
                    f"this is a bug in ming: please report it with the model")


def _least_completing_depth(graph: StreamGraph, solution: Solution, board: Board, channel: str, pinned: int,
                            sized: int) -> int | None:
    """The least depth of `channel` above `pinned` with which the design completes, the other depths kept;
    None if not even the whole tensor or ming's own depth does."""
    def completes(depth: int) -> bool:
        schedule = replace(solution.schedule, depths=solution.schedule.depths | {channel: depth})
        return simulated_cycles(graph, schedule, board, solution) is not None

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
    return _fifo_totals(plan.bits(least_pixels))


def _fifo_totals(bits: dict[str, int]) -> dict[str, int]:
    memory = [fifo_memory(b) for b in bits.values()]
    return {"fifo_bits": sum(bits.values()), "fifo_bram18k": sum(m[0] for m in memory),
            "fifo_lut": sum(m[1] for m in memory)}


def schedule_specs(graph: StreamGraph, solution: Solution) -> dict[str, KernelSpec]:
    """Each process's loop spec under the chosen schedule."""
    return {p.name: kernel_spec(graph, p, c.unroll, c.lanes_in, c.lanes_out)
            for p in graph.processes for c in (solution.choices[p.name],)}


def simulated_cycles(graph: StreamGraph, schedule: Schedule, board: Board, solution: Solution) -> int | None:
    """The cycle-level simulation's latency of a schedule; None when it deadlocks."""
    result = simulate(report(graph, schedule, board, solution))
    return None if result.deadlock else result.cycles


def decoupling_pixels(graph: StreamGraph, solution: Solution, board: Board, budget: Budget, plan: FifoPlan,
                      reservation: FifoPlan, pinned: dict[str, int]) -> int:
    """The least pixels every FIFO holds: doubled while the simulated latency drops by 2% and the budget (for
    the FIFOs of `reservation`, as the ILP reserved them) allows."""

    def cycles(pixels: int) -> int | None:
        depths = plan.depths(pixels) | pinned
        return simulated_cycles(graph, replace(solution.schedule, depths=depths), board, solution)

    best, best_cycles = DEFAULT_PIXELS, cycles(DEFAULT_PIXELS)
    for pixels in (4, 8, 16):
        fifo = fifo_cost(reservation, pixels)
        if solution.totals["bram18k"] + fifo["fifo_bram18k"] > budget.bram18k or \
                solution.totals["lut"] + fifo["fifo_lut"] > budget.lut:
            break
        trial = cycles(pixels)
        if best_cycles is None or trial is None or trial > 0.98 * best_cycles:
            break
        best, best_cycles = pixels, trial
    return best


def minimal_fifos(graph: StreamGraph, solution: Solution, board: Board, pinned: set[str]) -> Schedule:
    """Every unpinned FIFO shrunk to the least depth with which no write of the design's simulation waits
    longer than it did.

    One simulation gives all depths, and with them every token moves in the same cycle as before (see
    `simulate._need`), so the simulated latency is kept exactly. A deadlocked design keeps its depths."""
    schedule = solution.schedule
    result = simulate(report(graph, schedule, board, solution))
    if result.deadlock is not None:
        return schedule
    depths = {c: schedule.depth_of(c) if c in pinned else min(schedule.depth_of(c), result.fifo_need[c])
              for c in graph.channels}
    return replace(schedule, depths=depths)


def build(model: str | Path, out: str | Path, options: BuildOptions = BuildOptions(),
          progress: Progress | None = None, inputs: list[str | Path] = ()) -> Design:
    """`inputs`: the files read besides the model (--settings), which OUT must not hold either."""
    progress = progress or Progress(quiet=True)
    check_design(options)  # every option fails before the slow import
    check_model(model)
    out = check_output(out, [model, *inputs])
    with output_lock(out):
        with progress.step(f"importing {Path(model).name} through IREE"):
            graph = lift(model)
        for note in graph.notes:
            progress.note(f"note: {note}")
        with progress.step(f"choosing parallelism for {options.board} (ILP)"):
            board, solution = explore(graph, options)
        progress.note(f"ILP: {solution.status}, {solution.totals['solver']['variables']} variables, "
                      f"solved in {solution.solve_seconds:.2f} s")
        with progress.step("emitting HLS C++ and reports"):
            result = design(graph, board, solution=solution)
        with progress.step(f"writing {out}"):
            replace_tree(result.files, out)
    totals = solution.totals
    simulated = json.loads(result.files["report.json"])["totals"]["simulated_cycles"]
    progress.note(f"estimated {totals['cycles']:,} cycles ({totals['latency_us']:.1f} us at {board.clock_mhz:g} MHz; "
                  f"simulated {simulated:,}), "
                  f"{totals['dsp']} DSP, {totals['bram18k']} BRAM18K, {totals['uram']} URAM, {totals['lut']:,} LUT")
    progress.note(f"wrote {len(result.files)} files to {out} ({len(result.stream_graph.processes)} processes, "
                  f"{len(result.stream_graph.channels)} channels) in {progress.elapsed():.1f} s")
    return result
