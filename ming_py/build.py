"""`ming build`: model -> Vitis HLS project, reports and host metadata, written atomically."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from ming_py.boards import Board
from ming_py.classify import classify
from ming_py.emit.alveo import alveo_files
from ming_py.emit.deploy import deploy_files
from ming_py.emit.folding import settings_yaml
from ming_py.emit.hls import emit_hls
from ming_py.emit.vivado import vivado_files
from ming_py.emit.reports import dataflow_mlir, host_metadata, report, report_json, report_markdown
from ming_py.ilp import Solution
from ming_py.ilp.explore import explore
from ming_py.line_buffers import build_stream_graph

from .dataflow import Schedule, StreamGraph
from .errors import MingError
from .ir import FixedPointMul, FixedPointRequant, Graph
from .progress import Progress
from .options import BuildOptions, check_design, check_model
from .output import check_output, output_lock, replace_tree, write_tree
from .kernel import validate_schedule
from .sample import sample_files
from .weights_load import WEIGHTS_FILE, load_ends, load_report, loaded_arrays, loaded_rows, weights_image
from .simulate import simulate_schedule
from .verify import NOT_VERIFIED, VerificationFailed, verify_design, verify_seconds


@dataclass
class Design:
    graph: Graph
    stream_graph: StreamGraph
    schedule: Schedule
    board: Board
    files: dict[str, str | bytes]  # relative path -> text (binary: the testbench's sample)
    solution: Solution | None = None
    report: dict = field(default_factory=dict)  # report.json's data

    def record_verification(self, verification: dict) -> None:
        """report.json's "verification" (its first key) and report.md's account of it."""
        self.report = {"verification": verification} | {k: v for k, v in self.report.items() if k != "verification"}
        self.files["report.json"] = report_json(self.report)
        self.files["report.md"] = report_markdown(self.report)

    def record_model_file(self, model: Path) -> None:
        """host.json's "model_file": where the model was and its sha256, for `ming csim --trace` and its verdict."""
        host = json.loads(self.files["host.json"])
        host["model_file"] = {"path": str(model.resolve()), "sha256": hashlib.sha256(model.read_bytes()).hexdigest()}
        self.files["host.json"] = json.dumps(host, indent=2) + "\n"


def design(graph: Graph, board: Board, schedule: Schedule | None = None, solution: Solution | None = None) -> Design:
    """Every output file of a build, in memory."""
    stream_graph = build_stream_graph(graph)
    schedule = schedule or (solution.schedule if solution else Schedule())
    problems = validate_schedule(stream_graph, schedule)
    if problems:
        raise MingError(f"invalid schedule: {problems[0]}")
    data = report(stream_graph, schedule, board, solution)
    simulated = simulate_schedule(stream_graph, schedule)
    data["totals"] |= {"simulated_cycles": simulated.cycles,
                       "simulated_first_output_cycles": simulated.first_output_cycles,
                       "simulated_deadlock": simulated.deadlock}
    kinds = {k.name: classify(k).kind for k in graph.kernels()}
    for node in data["nodes"]:
        node["class"] = kinds.get(node["name"], "data_movement")
    files = {f"hls/{name}": text for name, text in emit_hls(stream_graph, schedule, board).items()}
    files |= sample_files(graph, stream_graph)
    files |= weight_files(stream_graph, schedule, board, data)
    files |= deploy_files(stream_graph, board, data["totals"].get("weights_load"))
    if board.interface == "zynq_axis_dma":
        files |= vivado_files(stream_graph, board, "weights_load" in data["totals"])
    else:
        files |= alveo_files(stream_graph, board, data["totals"].get("weights_load", {}).get("words", 0))
    files |= {
        "report.json": report_json(data),
        "report.md": report_markdown(data),
        "dataflow.mlir": dataflow_mlir(stream_graph, schedule),
        "host.json": host_metadata(stream_graph, board, data["totals"].get("weights_load")),
    }
    if solution is not None:
        files["settings.yaml"] = settings_yaml(data)
    return Design(graph, stream_graph, schedule, board, files, solution, data)


def weight_files(stream_graph, schedule: Schedule, board: Board, data: dict) -> dict[str, bytes]:
    """hls/weights.bin and deploy/weights.bin where weights are in URAM (`ming_py.weights_load`), recorded in the
    report's totals ("weights_load"): nothing otherwise."""
    rows = loaded_rows(stream_graph, schedule)
    if not rows:
        return {}
    image = weights_image(rows)
    parts = loaded_arrays(rows)
    first = simulate_schedule(stream_graph, schedule, starts=load_ends(parts))
    if first.deadlock:  # the loader depends on no image stream: a deadlock here is a bug of ming's
        raise MingError(f"the first image after the weight load deadlocks: {first.deadlock[0]}")
    # the first image after reset, its processes waiting for their weights (the cycle-level simulation)
    data["totals"]["weights_load"] = load_report(parts, image, board.clock_mhz) | {
        "first_image_simulated_cycles": first.cycles}
    return {f"hls/{WEIGHTS_FILE}": image, f"deploy/{WEIGHTS_FILE}": image}


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
            board, solution = explore(graph, options)
        progress.note(f"ILP: {solution.status}, {solution.totals['solver']['variables']} variables, "
                      f"solved in {solution.solve_seconds:.2f} s")
        with progress.step("emitting HLS C++ and reports"):
            result = design(graph, board, solution=solution)
            result.record_model_file(Path(model))
        if verify:
            _verify(result, progress, seconds, keep_failed, [model, *inputs])
        else:
            result.record_verification(NOT_VERIFIED)
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
