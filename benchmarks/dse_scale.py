"""How the design-space exploration scales with the network: its time, its result and its memory, network by network.

For each network, on its board with the build's default budget and the frugal default, in a child process of its
own so that its peak memory is its own: its processes and the ILP's candidates (summed over the processes, after
`candidates_and_costs` keeps the Pareto-optimal ones), the seconds of the import (`lift`), of the exploration
(`steps.explore`) and of the build without the import and the C simulation (`steps` stream, explore, save and
emit), the solver's status, the objective and its gap to the best known, the estimated and the simulated cycles
and their difference, and the peak resident memory.

The frugal design's objective is two figures: the fastest design's latency (which the default is within 10 % of)
and the chosen design's footprint (its largest share of the budget, then the sum of its shares: `ilp/footprint.py`),
each lower is better. benchmarks/dse_best_known.json keeps, per network, the best of each ever measured and which
tree measured it when; the gap columns are (this run - best known) / best known in %, for the fastest latency, the
footprint's largest share and its sum of shares.

    python benchmarks/dse_scale.py [--cases small|large|all] [--only NAME] [--record] [--json FILE]

`small`: MLPerf Tiny: the networks shaped like its reference models (benchmarks/networks.py) and the published ones
(tests/data/published), on the KV260; `large`: the Keras MobileNets (tests/data/keras) on the KV260,
MobileNetV1-1.0 at 224x224 and ResNet-56 (113 processes, too many for the KV260's LUTs) on the U50. `--only` keeps
the networks whose name holds NAME; `--record` writes into dse_best_known.json the figures of this run that beat
the best known.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import multiprocessing
import queue as queue_module
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import networks  # noqa: E402

from ming_py import steps  # noqa: E402
from ming_py.options import BuildOptions  # noqa: E402
from ming_py.pipeline import lift  # noqa: E402

BEST_KNOWN = Path(__file__).resolve().parent / "dse_best_known.json"
PUBLISHED = ROOT / "tests" / "data" / "published"
KERAS = ROOT / "tests" / "data" / "keras"


@dataclass(frozen=True)
class Network:
    name: str
    source: str | Path  # a benchmarks/networks.py name, or a model file
    board: str = "kv260"

    def model(self, folder: Path) -> Path:
        return self.source if isinstance(self.source, Path) else networks.quantized(self.source, folder)


CASES = {
    "small": [Network(name, name)
              for name in ("resnet8_32", "ds_cnn_49x10", "mobilenet_v1_025_96", "autoencoder_640")] +
             [Network(name, PUBLISHED / f"{name}.tflite")
              for name in ("vww_96_int8", "kws_ref_model", "pretrainedResnet_quant")],
    "large": [Network(name, KERAS / f"{name}.tflite") for name in ("mobilenet_v2", "mobilenet_v3_small")] +
             [Network("mobilenet_v1_224", "mobilenet_v1_224", "u50"), Network("resnet56_32", "resnet56_32", "u50")],
}


def measure(model: Path, board: str, queue) -> None:
    """One network, in its own process: its figures into `queue`."""
    try:
        candidates = count_candidates()
        began = time.perf_counter()
        graph = lift(model)
        imported = time.perf_counter() - began
        began = time.perf_counter()
        streamed = steps.stream(graph)
        explore_began = time.perf_counter()
        explored = steps.explore(streamed, BuildOptions(board=board))
        explore_seconds = time.perf_counter() - explore_began
        solution = explored.solution
        saved = steps.save(streamed, explored.board, solution=solution, model=model)
        design = steps.emit(saved, graph, solution, explored.simulated)
        build_seconds = time.perf_counter() - began
    except Exception as error:  # a refused model or a failure: the row says so and the table goes on
        queue.put({"status": f"{type(error).__name__}: {error}"})
        return
    totals, simulated = solution.totals, design.report["totals"]
    solver = totals["solver"]
    queue.put({"processes": len(streamed.stream_graph.processes), "candidates": candidates[-1] if candidates else None,
               "import_s": round(imported, 2), "dse_s": round(explore_seconds, 2),
               "build_s": round(build_seconds, 2), "status": solution.status,
               "fastest_cycles": solver["fastest"]["cycles"], "footprint": solver["footprint"],
               "estimated_cycles": totals.get("estimated_cycles", totals["cycles"]),
               "simulated_cycles": simulated.get("simulated_cycles", simulated["cycles"]),
               "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024})


def count_candidates() -> list[int]:
    """The candidates' count of each call of `candidates_and_costs` the exploration makes (it may solve twice,
    the second time with more FIFO memory reserved), taken as the ILP makes them rather than made again."""
    solve = importlib.import_module("ming_py.ilp.solve")  # the module, which `ming_py.ilp.solve` (a function) hides
    counts: list[int] = []
    made = solve.candidates_and_costs

    def counting(*args, **kwargs):
        options, costs = made(*args, **kwargs)
        counts.append(sum(map(len, options.values())))
        return options, costs

    solve.candidates_and_costs = counting
    return counts


def run_case(model: Path, board: str) -> dict:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=measure, args=(model, board, queue))
    process.start()
    while True:
        try:
            row = queue.get(timeout=5)
            break
        except queue_module.Empty:
            if not process.is_alive():  # it died before it could say why (killed, out of memory)
                row = {"status": f"the measuring process ended with code {process.exitcode}"}
                break
    process.join()
    return row


def gaps(row: dict, best: dict | None) -> dict[str, float | None]:
    """(this run - best known) / best known in %, for the fastest latency and the footprint's two figures."""
    best = best or {}
    ours = {"fastest_cycles": row["fastest_cycles"], "largest_share_percent": row["footprint"]["largest_share_percent"],
            "share_sum": row["footprint"]["share_sum"]}
    known = {"fastest_cycles": best.get("fastest", {}).get("cycles")} | \
        {k: best.get("footprint", {}).get(k) for k in ("largest_share_percent", "share_sum")}
    return {k: None if not known[k] else round(100 * (ours[k] - known[k]) / known[k], 2) for k in ours}


def record(best_known: dict, name: str, row: dict, tree: str, date: str) -> bool:
    """`row`'s figures into `best_known` where they beat the best known: the fastest latency, and the footprint as
    the ILP ranks footprints (the largest share, then the sum). True if any did."""
    entry = best_known.setdefault(name, {})
    improved = False
    if "cycles" not in entry.get("fastest", {}) or row["fastest_cycles"] < entry["fastest"]["cycles"]:
        entry["fastest"] = {"cycles": row["fastest_cycles"], "tree": tree, "date": date}
        improved = True
    footprint = row["footprint"]
    rank = (footprint["largest_share_percent"], footprint["share_sum"])
    known = entry.get("footprint")
    if known is None or rank < (known["largest_share_percent"], known["share_sum"]):
        entry["footprint"] = {"largest_share_percent": rank[0], "share_sum": rank[1], "tree": tree, "date": date}
        improved = True
    return improved


def tree_name() -> str:
    """The worktree's branch and commit, "+changes" where it has uncommitted ones outside benchmarks/ and docs/
    (which the figures do not depend on)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    changed = "+changes" if git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks",
                                ":!docs") else ""
    return f"{git('rev-parse', '--abbrev-ref', 'HEAD')}@{git('rev-parse', '--short', 'HEAD')}{changed}"


HEADER = (f"{'network':<22} {'format':<6} {'board':<5} {'procs':>5} {'cands':>6} {'import s':>8} {'DSE s':>7} "
          f"{'build s':>7} {'status':<19} {'fastest':>9} {'gap %':>6} {'largest %':>9} {'gap %':>6} {'sum':>7} "
          f"{'gap %':>6} {'estimated':>10} {'simulated':>10} {'est-sim %':>9} {'peak MB':>7}")


def line(name: str, model: Path, board: str, row: dict) -> str:
    head = f"{name:<22} {model.suffix[1:]:<6} {board:<5}"
    if "fastest_cycles" not in row:
        return f"{head} {row['status']}"
    gap = {k: "" if v is None else f"{v:+.1f}" for k, v in row["gap_percent"].items()}
    error = 100 * (row["estimated_cycles"] - row["simulated_cycles"]) / max(row["simulated_cycles"], 1)
    candidates = "" if row["candidates"] is None else f"{row['candidates']:,}"
    return (f"{head} {row['processes']:>5} {candidates:>6} {row['import_s']:>8.2f} {row['dse_s']:>7.2f} "
            f"{row['build_s']:>7.2f} {row['status']:<19} {row['fastest_cycles']:>9,} {gap['fastest_cycles']:>6} "
            f"{row['footprint']['largest_share_percent']:>9.1f} {gap['largest_share_percent']:>6} "
            f"{row['footprint']['share_sum']:>7.3f} {gap['share_sum']:>6} {row['estimated_cycles']:>10,} "
            f"{row['simulated_cycles']:>10,} {error:>+9.1f} {row['peak_mb']:>7,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", choices=("small", "large", "all"), default="small")
    parser.add_argument("--only", metavar="NAME", help="only the networks whose name holds NAME")
    parser.add_argument("--record", action="store_true", help=f"keep the better figures in {BEST_KNOWN.name}")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the rows to FILE")
    parser.add_argument("--models", type=Path, help="where the generated .onnx files are kept (default: a temporary "
                                                    "folder)")
    args = parser.parse_args()
    cases = CASES["small"] + CASES["large"] if args.cases == "all" else CASES[args.cases]
    cases = [c for c in cases if args.only is None or args.only in c.name]
    best_known = json.loads(BEST_KNOWN.read_text()) if BEST_KNOWN.exists() else {}
    tree, date = tree_name(), datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    rows = []
    print(HEADER)
    print("-" * len(HEADER))
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.models or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for case in cases:
            model = case.model(folder)
            row = {"network": case.name, "format": model.suffix[1:], "board": case.board} | run_case(model, case.board)
            if "fastest_cycles" in row:
                row["gap_percent"] = gaps(row, best_known.get(case.name))
                if args.record:
                    record(best_known, case.name, row, tree, date)
            rows.append(row)
            print(line(case.name, model, case.board, row), flush=True)
    if args.record:
        BEST_KNOWN.write_text(json.dumps(best_known, indent=2, sort_keys=True) + "\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
