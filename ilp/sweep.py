"""`ming sweep`: the build's exploration (`explore`: the ILP, then FIFO sizing) at several budgets and targets,
as a table, CSV, JSON and a cycles-vs-DSP plot.

Each row's resources are the build's, FIFOs included; its latency and interval the cycle-level simulation's (the
build's headline, by which the targets are met), with the model's latency beside them. The CSV and JSON are
byte-identical for identical runs: the time each point took goes to the terminal only.

The three files go to their own directory (`-o`, default `sweep/`), written like a build's OUT
(`ming_py.output.write_tree`): a new, empty or former sweep/build directory only, replaced atomically,
never through a symbolic link, never over a file ming did not write.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import time
from dataclasses import replace
from pathlib import Path

from matplotlib.ticker import LogFormatter

from ming_py.errors import MingError
from ming_py.line_buffers import build_stream_graph
from ming_py.options import TARGET_OPTIONS, target_board
from ming_py.output import check_output, output_lock, replace_tree
from ming_py.progress import Progress

from .budget import OPTIONS, RESOURCES, UNITS, Budget
from .explore import FifosOverBudget, explore
from .objectives import TargetMissed
from .search import SearchStopped
from .solve import NoDesignFits

COLUMNS = ("dsp_budget", "bram18k_budget", "uram_budget", "lut_budget", "target_fps", "target_latency_us",
           "status", "cycles", "latency_us", "estimated_cycles", "interval_cycles", "fps", "roofline_cycles", "ratio",
           "dsp", "bram18k", "uram", "lut", "fifo_bram18k", "fifo_lut")
# the status of a point without a design, by what explore raised (any other error stops the sweep)
FAILURES = {NoDesignFits: "infeasible", TargetMissed: "target missed", SearchStopped: "unsolved",
            FifosOverBudget: "FIFOs over budget"}
NO_TARGETS = {"fps": [None], "latency_us": [None]}
ROOFLINE_LABEL = "roofline: MACs / MAC lanes the budget holds"
# Each point is one exploration (the ILP, then FIFO sizing): about 4 s on examples/tiny_cnn.onnx, 7 s and more
# on the benchmark networks, so 1000 points already run for hours. The points are written only when the whole
# sweep is done, so a longer sweep is better split into several.
MAX_POINTS = 1000


def check_point_count(lists: dict[str, str | None], targets: dict[str, str | list | None]) -> None:
    """The sweep's points, counted from its lists before any is built (`lists`: resource -> comma-separated
    budgets; `targets`: "fps"/"latency_us" -> comma-separated or checked targets), are at most MAX_POINTS."""
    lengths = {OPTIONS[r]: _length(spec) for r, spec in lists.items()} | \
        {TARGET_OPTIONS[t]: _length(spec) for t, spec in targets.items()}
    count = math.prod(lengths.values())
    if count > MAX_POINTS:
        given = " x ".join(f"{n:,} {option}" for option, n in lengths.items() if n > 1)
        raise MingError(f"ming sweep: {given} values make {count:,} points, more than the {MAX_POINTS:,} one sweep "
                        "takes (each point is an ILP solve of seconds to minutes); give shorter lists or split the "
                        "sweep into several runs")


def _length(spec: str | list | None) -> int:
    if spec is None or spec == [None]:
        return 1
    return len(spec) if isinstance(spec, list) else len([v for v in str(spec).split(",") if v.strip()]) or 1


def budget_points(lists: dict[str, str | None]) -> list[dict[str, str | None]]:
    """Every combination of the comma-separated budgets given per resource."""
    axes = {r: [v.strip() for v in spec.split(",") if v.strip()] if spec else [None] for r, spec in lists.items()}
    return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]


def sweep_points(lists: dict[str, str | None], targets: dict[str, list[float | None]]) -> list[tuple]:
    """(limits, target fps, target latency in us) of every budget combination × fps target × latency target."""
    check_point_count(lists, targets)
    return list(itertools.product(budget_points(lists), targets["fps"], targets["latency_us"]))


def run_sweep(model: str | Path, options, lists: dict[str, str | None], out_dir: Path, progress: Progress,
              inputs: list[str | Path] = (), targets: dict[str, list[float | None]] | None = None) -> list[dict]:
    """The sweep's rows; sweep.csv, sweep.json and sweep.png written as the directory `out_dir` (checked, and
    locked, before the import; `inputs`: the settings files, which it must not hold either). `targets`: the
    checked lists {"fps": [...], "latency_us": [...]} (`options.target_list`), [None] for no target."""
    points = sweep_points(lists, targets or NO_TARGETS)
    out = check_output(out_dir, [model, *inputs])
    with output_lock(out):
        rows, files = _sweep(model, options, lists, points, progress, targets or NO_TARGETS)
        replace_tree(files, out)
    progress.note(f"wrote sweep.csv, sweep.json and sweep.png to {out}")
    return rows


def _sweep(model: str | Path, options, lists: dict[str, str | None], points: list[tuple], progress: Progress,
           targets: dict[str, list[float | None]] = NO_TARGETS) -> tuple[list[dict], dict[str, str | bytes]]:
    from ming_py.pipeline import lift  # the frontends load IREE: only once a model is to be imported

    board = target_board(options)
    with progress.step(f"importing {Path(model).name} through IREE"):
        graph = lift(model, options.name)
    stream_graph = build_stream_graph(graph)
    table = Table(progress, lists, targets, len(points))
    rows = []
    for limits, fps, latency_us in points:
        started = time.perf_counter()
        row = sweep_row(stream_graph, replace(options, limits=limits, target_fps=fps, target_latency_us=latency_us))
        rows.append(row)
        table.row(row, time.perf_counter() - started)
    title = f"{graph.name} on {board.name}"
    files = {"sweep.csv": to_csv(rows),
             "sweep.json": json.dumps({"model": graph.name, "board": board.name, "clock_mhz": board.clock_mhz,
                                       "objective": options.objective, "points": rows}, indent=2) + "\n",
             "sweep.png": plot(rows, title, board.clock_mhz)}
    return rows, files


def sweep_row(stream_graph, options) -> dict:
    """One point: what `ming build` with `options` would choose, FIFOs included; a status when nothing fits."""
    board = target_board(options)
    budget = Budget.of(board, options.limits)
    row = {f"{r}_budget": getattr(budget, r) for r in RESOURCES} | \
        {"target_fps": options.target_fps, "target_latency_us": options.target_latency_us}
    try:
        _, solution, _ = explore(stream_graph, options)
    except tuple(FAILURES) as failure:
        return row | {"status": FAILURES[type(failure)]}
    return row | {"status": solution.status} | measured(solution.totals, board.clock_mhz)


def measured(totals: dict, clock_mhz: float) -> dict:
    """A design's figures in the sweep's columns (resources with the FIFOs, as the build reports them; latency and
    interval the cycle-level simulation's, as the build's headline)."""
    interval = totals["interval_cycles"]
    return {"cycles": totals["cycles"], "latency_us": totals["latency_us"],
            "estimated_cycles": totals["estimated_cycles"], "interval_cycles": interval,
            "fps": round(clock_mhz * 1e6 / max(interval, 1), 1), "roofline_cycles": totals["roofline_cycles"],
            "ratio": round(totals["cycles"] / max(totals["roofline_cycles"], 1), 2)} | \
        {key: totals[key] for key in ("dsp", "bram18k", "uram", "lut", "fifo_bram18k", "fifo_lut")}


def to_csv(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: row.get(k, "") for k in COLUMNS})
    return buffer.getvalue()


class Table:
    """The terminal table: one row per point as it is done, with the seconds it took and a progress bar."""

    # (row key, heading, width, format) of the figures of a design
    MEASURED = (("cycles", "cycles", 9, ","), ("interval_cycles", "interval", 9, ","),
                ("latency_us", "latency us", 10, ".1f"), ("fps", "fps", 10, ",.0f"),
                ("roofline_cycles", "roofline", 9, ","), ("ratio", "ratio", 6, ".2f"), ("dsp", "DSP", 5, ""),
                ("bram18k", "BRAM18K", 7, ""), ("uram", "URAM", 5, ""), ("lut", "LUT", 7, ","))

    def __init__(self, progress: Progress, lists: dict[str, str | None], targets: dict[str, list], total: int):
        self.quiet, self.total, self.done = progress.quiet, total, 0
        shown = [r for r in RESOURCES if r in ("dsp", "bram18k") or lists.get(r)]
        self.inputs = [(f"{r}_budget", f"{UNITS[r]} budget", 11, "") for r in shown]
        wanted = [(t, heading) for t, heading in (("fps", "target fps"), ("latency_us", "target us"))
                  if targets[t] != [None]]
        self.inputs += [(f"target_{t}", heading, 10, ",.10g") for t, heading in wanted]
        if not self.quiet:
            print(" ".join(f"{heading:>{width}}" for _, heading, width, _ in self.inputs + list(self.MEASURED)) +
                  f" {'seconds':>7}", flush=True)

    def row(self, row: dict, seconds: float) -> None:
        self.done += 1
        if self.quiet:
            return
        given = " ".join(_cell(row[key], width, spec) for key, _, width, spec in self.inputs)
        if "cycles" in row:
            result = " ".join(_cell(row[key], width, spec) for key, _, width, spec in self.MEASURED)
        else:
            result = f"{row['status']:<{sum(width + 1 for _, _, width, _ in self.MEASURED) - 1}}"
        bar = int(20 * self.done / self.total)
        print(f"{given} {result} {seconds:>7.1f}   [{'#' * bar}{'.' * (20 - bar)}] {self.done}/{self.total}",
              flush=True)


def _cell(value, width: int, spec: str) -> str:
    return f"{'' if value is None else format(value, spec):>{width}}"


def plot(rows: list[dict], title: str, clock_mhz: float | None = None) -> bytes:
    """The cycles-vs-DSP plot (`figure`) as PNG bytes, without the matplotlib version (identical runs, identical
    bytes)."""
    buffer = io.BytesIO()
    figure(rows, title, clock_mhz).savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def figure(rows: list[dict], title: str, clock_mhz: float | None = None):
    """Latency and interval against the DSP budget, one colour per budget of the second resource that varies,
    with the roofline; the rows with targets in a panel of their own, against the DSP the design uses (with the
    targets in cycles at `clock_mhz` when given)."""
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI; 0.4 s to import: only to plot

    feasible = [r for r in rows if "cycles" in r]
    untargeted = [r for r in feasible if not _targeted(r)]
    targeted = [r for r in feasible if _targeted(r)]
    panels = [p for p in (untargeted, targeted) if p] or [[]]
    result = Figure(figsize=(7 * len(panels), 5.5), dpi=100, layout="constrained")
    result.suptitle(title)
    for axis, panel in zip(result.subplots(1, len(panels), squeeze=False)[0], panels):
        if not panel:
            axis.text(0.5, 0.5, "no design fits any point", ha="center", va="center", transform=axis.transAxes)
        elif panel is targeted:
            _targets_panel(axis, panel, clock_mhz)
        else:
            _budgets_panel(axis, panel)
        axis.set_ylabel("cycles")
        axis.grid(True, which="both", alpha=0.3)
    return result


def _targeted(row: dict) -> bool:
    return row["target_fps"] is not None or row["target_latency_us"] is not None


def _budgets_panel(axis, rows: list[dict]) -> None:
    """One colour per value of the line axis; latency solid with circles, interval dashed with squares."""
    line_axis = next((key for key in ("bram18k_budget", "lut_budget", "uram_budget")
                      if len({r[key] for r in rows}) > 1), None)
    handles = []
    groups = _groups(rows, [line_axis] if line_axis else [])
    for index, (values, line) in enumerate(groups):
        line = sorted(line, key=lambda r: r["dsp_budget"])
        colour, name = f"C{index}", _budget_name(line_axis, *values)
        budgets = [r["dsp_budget"] for r in line]
        axis.plot(budgets, [r["cycles"] for r in line], "o-", color=colour, label=f"latency ({name})",
                  **_drawn_under(index, len(groups)))
        axis.plot(budgets, [r["interval_cycles"] for r in line], "s--", color=colour, label=f"interval ({name})",
                  **_drawn_under(index, len(groups)))
        axis.plot(budgets, [r["roofline_cycles"] for r in line], ":", color="grey", label=f"roofline ({name})")
        if line_axis is not None:
            handles.append(_key(name, color=colour))
    handles += [_key("latency", marker="o"), _key("interval", marker="s", linestyle="--"),
                _key(ROOFLINE_LABEL, color="grey", linestyle=":")]
    _log_scales(axis, [r["dsp_budget"] for r in rows])
    axis.set_xlabel("DSP budget")
    axis.legend(handles=handles, fontsize=8, ncols=2, loc="upper center", bbox_to_anchor=(0.5, -0.15))


def _targets_panel(axis, rows: list[dict], clock_mhz: float | None) -> None:
    """The designs meeting each target: latency and interval against the DSP they use, the target's bound in
    cycles as a dotted level of its colour."""
    handles = []
    groups = _groups(rows, ["target_fps", "target_latency_us"])
    for index, (target, line) in enumerate(groups):
        colour, name = f"C{index}", _target_name(*target)
        used = [r["dsp"] for r in line]
        axis.plot(used, [r["cycles"] for r in line], "o", color=colour, label=f"latency ({name})",
                  **_drawn_under(index, len(groups)))
        axis.plot(used, [r["interval_cycles"] for r in line], "s", color=colour, mfc="none",
                  label=f"interval ({name})", **_drawn_under(index, len(groups)))
        for bound in _target_bounds(clock_mhz, *target):
            axis.axhline(bound, color=colour, linestyle=":", linewidth=1)
        handles.append(_key(name, color=colour))
    handles += [_key("latency", marker="o", linestyle="none"),
                _key("interval", marker="s", linestyle="none", mfc="none"),
                _key("target in cycles", linestyle=":")]
    _log_scales(axis, [r["dsp"] for r in rows])
    axis.set_xlabel("DSP used (designs meeting the targets)")
    axis.legend(handles=handles, fontsize=8, ncols=2, loc="upper center", bbox_to_anchor=(0.5, -0.15))


def _drawn_under(index: int, count: int) -> dict:
    """The marker size and line width of the `index`-th of `count` lines: larger for earlier lines (up to 3
    steps), so that a line under a later one with the same figures shows around it; matplotlib's for the last."""
    larger = min(count - 1 - index, 3)
    return {"markersize": 6 + 2 * larger, "linewidth": 1.5 + 0.75 * larger}


def _groups(rows: list[dict], keys: list[str]) -> list[tuple[tuple, list[dict]]]:
    """(values of `keys`, rows with them) in the order of the values; one group when there is no key."""
    def values(row: dict) -> tuple:
        return tuple(row[k] for k in keys)

    return [(v, [r for r in rows if values(r) == v]) for v in sorted({values(r) for r in rows}, key=_none_first)]


def _none_first(values: tuple) -> tuple:
    return tuple((v is not None, v or 0) for v in values)


def _budget_name(key: str | None, value: int | None = None) -> str:
    return "" if key is None else f"{UNITS[key.removesuffix('_budget')]} budget {value:,}"


def _target_name(fps: float | None, latency_us: float | None) -> str:
    wanted = [] if fps is None else [f"fps ≥ {fps:g}"]
    return ", ".join(wanted + ([] if latency_us is None else [f"latency ≤ {latency_us:g} us"]))


def _target_bounds(clock_mhz: float | None, fps: float | None, latency_us: float | None) -> list[float]:
    """The targets in cycles at the clock: the interval `fps` allows, the latency `latency_us` allows."""
    if clock_mhz is None:
        return []
    return [bound for bound in (clock_mhz * 1e6 / fps if fps else None, latency_us * clock_mhz if latency_us else None)
            if bound is not None]


def _key(label: str, color: str = "black", marker: str = "", linestyle: str = "-", **style):
    """A legend entry not drawn in the plot."""
    from matplotlib.lines import Line2D

    return Line2D([], [], color=color, marker=marker, linestyle=linestyle, label=label, **style)


def _log_scales(axis, xs: list[int]) -> None:
    """Log axes; symlog on x when a budget or a design has no DSP (log cannot show 0)."""
    if min(xs) > 0:
        axis.set_xscale("log")
    else:
        axis.set_xscale("symlog", linthresh=1)
        axis.set_xlim(-0.5, 2 * max(max(xs), 1))  # matplotlib's margins are linear, too narrow on symlog
    axis.set_yscale("log")
    for ticks in (axis.xaxis, axis.yaxis):
        ticks.set_major_formatter(PlainLog())
        ticks.set_minor_formatter(PlainLog(labelOnlyBase=False))


class PlainLog(LogFormatter):
    """The ticks LogFormatter labels, as plain numbers (400 and 1,000,000, not 4 × 10² and 1e+06)."""

    def __call__(self, x, pos=None):
        label = super().__call__(x, pos)
        return f"{x:,.0f}" if label and x >= 1 else label
