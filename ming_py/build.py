"""`ming build`: model -> Vitis HLS project, reports and host metadata, written atomically (the steps of
`ming_py.steps`); `ming emit`: the same files again from the design a build saved (OUT/design/)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ming_py.boards import Board, load_board
from ming_py.ilp import Solution

from .dataflow import Schedule
from .design_file import DIRECTORY, DOCUMENT, SavedDesign, design_files, read_design, schedule_fingerprint
from .errors import MingError
from .ir import FixedPointMul, FixedPointRequant, Graph
from .progress import Progress
from .options import BuildOptions, check_design, check_model
from .output import check_output, output_lock, replace_tree, write_tree
from .process_spec import validate_schedule
from .simulate import SimResult, simulate_schedule
from . import steps
from .steps import Design, Streamed, emit, save, stream
from .verify import NOT_VERIFIED, VerificationFailed, verify_design, verify_seconds


def design(graph: Graph, board: Board, schedule: Schedule | None = None, solution: Solution | None = None,
           model: Path | None = None) -> Design:
    """Every output file of a build of `graph`, in memory: the steps stream, save and emit."""
    return design_of(stream(graph), board, schedule, solution, model)


def design_of(streamed: Streamed, board: Board, schedule: Schedule | None = None, solution: Solution | None = None,
              model: Path | None = None, simulated: SimResult | None = None) -> Design:
    """Every output file of a design whose stream graph is built: `schedule` (else the solution's, else none
    unrolled) checked, then the steps save and emit; `model`: the file host.json names; `simulated`: the
    schedule's cycle-level simulation where the exploration made it."""
    schedule = schedule or (solution.schedule if solution else Schedule())
    problems = validate_schedule(streamed.stream_graph, schedule)
    if problems:
        raise MingError(f"invalid schedule: {problems[0]}")
    return emit(save(streamed, board, schedule, solution, model), streamed.graph, solution, simulated)


def keep_requantization_as_written(graph: Graph) -> None:
    """TFLite's requantization by its rule as written, not the narrow datapath (`BuildOptions.narrow_requant`)."""
    for kernel in graph.kernels():
        if isinstance(kernel.epilogue, (FixedPointRequant, FixedPointMul)):
            kernel.epilogue.narrow = False


def build(model: str | Path, out: str | Path, options: BuildOptions = BuildOptions(),
          progress: Progress | None = None, inputs: list[str | Path] = (), verify: bool = True,
          keep_failed: str | Path | None = None) -> Design:
    """`inputs`: the files read besides the model (--settings), which OUT must not hold either.

    verify: C-simulate the emitted C++ and compare it with the golden model (`ming_py.verify`) before anything is
    written; a difference raises VerificationFailed and leaves OUT as it was, and writes the failing design to
    `keep_failed` (a directory like OUT) if given."""
    progress = progress or Progress(quiet=True)
    check_design(options)  # every option fails before the slow import
    check_model(model)
    out = check_output(out, [model, *inputs])
    seconds = verify_seconds() if verify else None
    if keep_failed is not None:
        keep_failed = check_output(keep_failed, [model, *inputs, out])
        if keep_failed == out:
            raise MingError(f"--keep-failed {keep_failed}: is OUT itself; pass another directory")
    from .pipeline import lift  # the frontends load IREE: only once a model is to be imported

    with output_lock(out):
        with progress.step(f"importing {Path(model).name} through IREE"):
            graph = lift(model, options.name)
            if not options.narrow_requant:
                keep_requantization_as_written(graph)
        for note in graph.notes:
            progress.note(f"note: {note}")
        with progress.step(f"choosing parallelism for {options.board} (ILP)"):
            explored = steps.explore(stream(graph), options)
        board, solution = explored.board, explored.solution
        progress.note(f"ILP: {solution.status}, {solution.totals['solver']['variables']} variables, "
                      f"solved in {solution.solve_seconds:.2f} s")
        with progress.step("emitting HLS C++ and reports"):
            result = design_of(explored.streamed, board, solution=solution, model=Path(model),
                               simulated=explored.simulated)
        if verify:
            _verify(result, progress, seconds, keep_failed, [model, *inputs])
        else:
            result.record_verification(NOT_VERIFIED)
        with progress.step(f"writing {out}"):
            replace_tree(result.files, out)
    totals = json.loads(result.files["report.json"])["totals"]
    progress.note(f"simulated {totals['cycles']:,} cycles ({totals['latency_us']:.1f} us at {board.clock_mhz:g} MHz; "
                  f"the model estimated {totals['estimated_cycles']:,}), "
                  f"{totals['dsp']} DSP, {totals['bram18k']} BRAM18K, {totals['uram']} URAM, {totals['lut']:,} LUT")
    progress.note(f"wrote {len(result.files)} files to {out} ({len(result.stream_graph.processes)} processes, "
                  f"{len(result.stream_graph.channels)} channels) in {progress.elapsed():.1f} s")
    return result


def emit_build(out: str | Path, board: str | None = None, progress: Progress | None = None, verify: bool = True,
               keep_failed: str | Path | None = None) -> Design:
    """`ming emit OUT`: every file of the build OUT written again from its saved design, for `board` if given
    (else the saved one), verified as `ming build` verifies (without the model: no stream is located where the
    values differ). A design whose schedule was edited is checked as it is read (`read_design`) and refused
    if the cycle-level simulation deadlocks; its reports leave out the ILP's estimates, made for another
    schedule."""
    progress = progress or Progress(quiet=True)
    out = check_output(out)
    seconds = verify_seconds() if verify else None
    if keep_failed is not None:
        keep_failed = check_output(keep_failed, [out])
        if keep_failed == out:
            raise MingError(f"--keep-failed {keep_failed}: is OUT itself; pass another directory")
    with output_lock(out):
        result = _emitted(out, board, progress)
        if verify:
            _verify(result, progress, seconds, keep_failed, [])
        else:
            result.record_verification(NOT_VERIFIED)
        with progress.step(f"writing {out}"):
            replace_tree(result.files, out)
    progress.note(f"wrote {len(result.files)} files to {out} in {progress.elapsed():.1f} s")
    return result


def _emitted(out: Path, board: str | None, progress: Progress) -> Design:
    """The files of the saved design of OUT, read, checked and emitted. A failure past the checks is ming's own
    where the design is as ming wrote it (raised as it is); in an edited design, one line asking for a new build."""
    read = None
    try:
        read = read_design(out)
        saved = _current_estimates(_on_board(read, board), progress)
        simulated = check_no_deadlock(saved)
        with progress.step("emitting HLS C++ and reports from the saved design"):
            return emit(saved, simulated=simulated)
    except MingError:
        raise
    except Exception as error:
        if read is not None and _as_written(out, read):
            raise
        what = " ".join(f"{type(error).__name__}: {error}".split())
        raise MingError(f"{out / DIRECTORY / DOCUMENT}: ming cannot emit this edited design ({what}); "
                        "build it again with `ming build`") from None


def _as_written(out: Path, saved: SavedDesign) -> bool:
    """Whether OUT/design/ holds exactly the files ming writes for `saved` (no hand edit shows)."""
    return all((out / name).is_file() and (out / name).read_bytes() ==
               (content if isinstance(content, bytes) else content.encode())
               for name, content in design_files(saved).items())


def _on_board(saved: SavedDesign, board: str | None) -> SavedDesign:
    """The saved design for `board` at its default clock (the saved one: as it is)."""
    if board is None:
        return saved
    target = load_board(board)
    if target.name == saved.board:
        return saved
    return replace(saved, board=target.name, clock_mhz=target.clock_mhz)


def _current_estimates(saved: SavedDesign, progress: Progress) -> SavedDesign:
    """The design without the ILP's estimates where they were made for another schedule or board."""
    estimates = saved.estimates
    if estimates is None:
        return saved
    if estimates.schedule_sha256 != schedule_fingerprint(saved.schedule):
        progress.note("note: the schedule is not the one the ILP chose: the reports leave out its estimates "
                      "and settings.yaml")
    elif estimates.board != saved.board:
        progress.note("note: the design was explored for another board: the reports leave out the ILP's estimates "
                      "and settings.yaml")
    else:
        return saved
    return replace(saved, estimates=None)


def check_no_deadlock(saved: SavedDesign) -> SimResult:
    """The cycle-level simulation of the design (`ming simulate` on its build); MingError if it deadlocks."""
    result = simulate_schedule(saved.stream_graph, saved.schedule)
    if result.deadlock is not None:
        raise MingError(f"the saved design deadlocks (ming simulate: {result.deadlock[0]}); deepen the FIFO it "
                        "names in schedule.depths or build again with `ming build`")
    return result


def _verify(result: Design, progress: Progress, seconds: float, keep_failed: Path | None, inputs: list) -> None:
    """The build's self-check (`ming_py.verify`), recorded in the reports; a design that fails it is written to
    `keep_failed` if given, and raises VerificationFailed."""
    verification = verify_design(result, progress, seconds)
    result.record_verification(verification.as_report())
    if not verification.equal:
        if keep_failed is not None:
            write_tree(result.files, keep_failed, inputs)
        kept = f"; the design is in {keep_failed}" if keep_failed is not None else \
            "; nothing was written (--keep-failed DIR writes the design)"
        raise VerificationFailed(verification.failure() + kept)
    values = sum(check.values for check in verification.checks)
    progress.note(f"verified: the C-simulation equals ming reference on {len(verification.checks)} images "
                  f"({values:,} output values)")
