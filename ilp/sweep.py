"""`ming sweep`: the DSE at several budgets, as a table, CSV, JSON and a latency-vs-DSP plot.

The three files go to their own directory (`-o`, default `sweep/`), written like a build's OUT
(`ming_py.output.write_tree`): a new, empty or former sweep/build directory only, replaced atomically,
never through a symbolic link, never over a file ming did not write.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import sys
from pathlib import Path

from ming_py.line_buffers import build_stream_graph
from ming_py.options import target_board
from ming_py.output import check_output, output_lock, replace_tree
from ming_py.progress import Progress

from .budget import Budget
from .pins import resolve
from .solve import NoDesignFits, SearchStopped, solve

COLUMNS = ("dsp_budget", "bram18k_budget", "uram_budget", "lut_budget", "status", "cycles", "latency_us",
           "throughput_cycles", "roofline_cycles", "ratio", "dsp", "bram18k", "uram", "lut", "solve_seconds")


def budget_points(lists: dict[str, str | None]) -> list[dict[str, str | None]]:
    """Every combination of the comma-separated budgets given per resource."""
    axes = {r: [v.strip() for v in spec.split(",") if v.strip()] if spec else [None] for r, spec in lists.items()}
    return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]


def run_sweep(model: str | Path, options, lists: dict[str, str | None], out_dir: Path,
              progress: Progress, inputs: list[str | Path] = ()) -> list[dict]:
    """The sweep's rows; sweep.csv, sweep.json and sweep.png written as the directory `out_dir` (checked, and
    locked, before the import; `inputs`: the settings files, which it must not hold either)."""
    out = check_output(out_dir, [model, *inputs])
    with output_lock(out):
        rows, files = _sweep(model, options, lists, progress)
        replace_tree(files, out)
    progress.note(f"wrote sweep.csv, sweep.json and sweep.png to {out}")
    return rows


def _sweep(model: str | Path, options, lists: dict[str, str | None],
           progress: Progress) -> tuple[list[dict], dict[str, str | bytes]]:
    from ming_py.pipeline import lift  # the frontends load IREE: only once a model is to be imported

    board = target_board(options)
    with progress.step(f"importing {Path(model).name} through IREE"):
        graph = lift(model)
    stream_graph = build_stream_graph(graph)
    pins = resolve(options.settings, stream_graph)
    points = budget_points(lists)
    rows = []
    _print_header(progress)
    for index, limits in enumerate(points, start=1):
        budget = Budget.of(board, limits)
        row = {"dsp_budget": budget.dsp, "bram18k_budget": budget.bram18k, "uram_budget": budget.uram,
               "lut_budget": budget.lut}
        try:
            solution = solve(stream_graph, board, budget, options.objective, pins, calibration=options.calibration)
        except NoDesignFits:
            row |= {"status": "infeasible"}
        except SearchStopped:
            row |= {"status": "unsolved"}
        else:
            t = solution.totals
            row |= {"status": solution.status, "cycles": t["cycles"], "latency_us": t["latency_us"],
                    "throughput_cycles": t["throughput_cycles"], "roofline_cycles": t["roofline_cycles"],
                    "ratio": round(t["cycles"] / max(t["roofline_cycles"], 1), 2), "dsp": t["dsp"],
                    "bram18k": t["bram18k"], "uram": t["uram"], "lut": t["lut"],
                    "solve_seconds": round(solution.solve_seconds, 3)}
        rows.append(row)
        _print_row(progress, row, index, len(points))
    files = {"sweep.csv": to_csv(rows),
             "sweep.json": json.dumps({"model": graph.name, "board": board.name, "objective": options.objective,
                                       "points": rows}, indent=2) + "\n",
             "sweep.png": plot(rows, f"{graph.name} on {board.name}")}
    return rows, files


def to_csv(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: row.get(k, "") for k in COLUMNS})
    return buffer.getvalue()


def _print_header(progress: Progress) -> None:
    if not progress.quiet:
        print(f"{'DSP budget':>10} {'BRAM budget':>11} {'cycles':>10} {'latency us':>10} {'roofline':>9} "
              f"{'ratio':>6} {'DSP':>5} {'BRAM18K':>7} {'URAM':>5} {'LUT':>7}", flush=True)


def _print_row(progress: Progress, row: dict, index: int, total: int) -> None:
    if progress.quiet:
        return
    if "cycles" not in row:
        text = f"{row['dsp_budget']:>10} {row['bram18k_budget']:>11} {row['status']:>10}"
    else:
        text = (f"{row['dsp_budget']:>10} {row['bram18k_budget']:>11} {row['cycles']:>10,} {row['latency_us']:>10.1f} "
                f"{row['roofline_cycles']:>9,} {row['ratio']:>6.2f} {row['dsp']:>5} {row['bram18k']:>7} "
                f"{row['uram']:>5} {row['lut']:>7,}")
    done = int(20 * index / total)
    print(f"{text}   [{'#' * done}{'.' * (20 - done)}] {index}/{total}", flush=True)
    sys.stdout.flush()


def plot(rows: list[dict], title: str) -> bytes:
    """The latency-vs-DSP plot as PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    feasible = sorted((r for r in rows if "cycles" in r), key=lambda r: r["dsp_budget"])
    figure, axis = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    if feasible:
        budgets = [r["dsp_budget"] for r in feasible]
        axis.plot(budgets, [r["cycles"] for r in feasible], "o-", label="estimated latency")
        axis.plot(budgets, [r["roofline_cycles"] for r in feasible], "--", color="grey", label="roofline (MACs / MAC lanes the budget holds)")
        for r in feasible:
            axis.annotate(f"{r['bram18k']} BRAM", (r["dsp_budget"], r["cycles"]), textcoords="offset points",
                          xytext=(4, 6), fontsize=8)
        axis.set_xscale("log")
        axis.set_yscale("log")
    axis.set_xlabel("DSP budget")
    axis.set_ylabel("cycles per image")
    axis.set_title(title)
    axis.grid(True, which="both", alpha=0.3)
    axis.legend()
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(figure)
    return buffer.getvalue()
