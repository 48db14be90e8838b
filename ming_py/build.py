"""`ming build`: model -> Vitis HLS project, reports and host metadata, written atomically."""

from __future__ import annotations

import json
from dataclasses import dataclass
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
from .output import check_output, output_lock, replace_tree
from .kernel import validate_schedule
from .sample import sample_files
from .simulate import simulate_schedule


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
    simulated = simulate_schedule(stream_graph, schedule)
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
    if solution is not None:
        files["settings.yaml"] = settings_yaml(data)
    return Design(graph, stream_graph, schedule, board, files, solution)


def keep_requantization_as_written(graph: Graph) -> None:
    """TFLite's requantization by its rule as written, not the narrow datapath (`BuildOptions.narrow_requant`)."""
    for kernel in graph.kernels():
        if isinstance(kernel.epilogue, (FixedPointRequant, FixedPointMul)):
            kernel.epilogue.narrow = False


def build(model: str | Path, out: str | Path, options: BuildOptions = BuildOptions(),
          progress: Progress | None = None, inputs: list[str | Path] = ()) -> Design:
    """`inputs`: the files read besides the model (--settings), which OUT must not hold either."""
    progress = progress or Progress(quiet=True)
    check_design(options)  # every option fails before the slow import
    check_model(model)
    out = check_output(out, [model, *inputs])
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
