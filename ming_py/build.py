"""`ming build`: model -> Vitis HLS project, reports and host metadata, written atomically."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ming_py.boards import Board, load_board
from ming_py.classify import classify
from ming_py.emit.hls import emit_hls
from ming_py.emit.reports import dataflow_mlir, host_metadata, report, report_json, report_markdown
from ming_py.line_buffers import build_stream_graph

from .dataflow import Schedule, StreamGraph, validate_schedule
from .ir import Graph, MingError
from .pipeline import lift
from .progress import Progress


@dataclass
class Design:
    graph: Graph
    stream_graph: StreamGraph
    schedule: Schedule
    board: Board
    files: dict[str, str]


def design(graph: Graph, board: Board, schedule: Schedule | None = None) -> Design:
    """Every output file of a build, in memory."""
    stream_graph = build_stream_graph(graph)
    schedule = schedule or Schedule()
    problems = validate_schedule(stream_graph, schedule)
    if problems:
        raise MingError(f"invalid schedule: {problems[0]}")
    data = report(stream_graph, schedule, board)
    kinds = {k.name: classify(k).kind for k in graph.kernels()}
    for node in data["nodes"]:
        node["class"] = kinds.get(node["name"], "data_movement")
    files = {f"hls/{name}": text for name, text in emit_hls(stream_graph, schedule, board).items()}
    files |= {
        "report.json": report_json(data),
        "report.md": report_markdown(data),
        "dataflow.mlir": dataflow_mlir(stream_graph, schedule),
        "host.json": host_metadata(stream_graph, board),
    }
    return Design(graph, stream_graph, schedule, board, files)


def write_tree(files: dict[str, str], out: Path) -> None:
    """Write all files, then swap them in: OUT is either the old tree or the complete new one."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for relative, text in sorted(files.items()):
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else os.remove(out)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def build(model: str | Path, board_name: str, out: str | Path, schedule: Schedule | None = None,
          progress: Progress | None = None) -> Design:
    progress = progress or Progress(quiet=True)
    board = load_board(board_name)
    with progress.step(f"importing {Path(model).name} through IREE"):
        graph = lift(model)
    with progress.step(f"building the streaming design for {board.name}"):
        result = design(graph, board, schedule)
    with progress.step(f"writing {out}"):
        write_tree(result.files, Path(out))
    progress.note(f"wrote {len(result.files)} files to {out} ({len(result.stream_graph.processes)} processes, "
                  f"{len(result.stream_graph.channels)} channels) in {progress.elapsed():.1f} s")
    return result
