"""Time and memory of the resource ILP, and the estimate against `ming simulate`, on the DSE benchmark networks.

For each case (network of benchmarks/networks.py, board, budget, objective or target), in a child process of
its own so that its peak memory is its own: the ILP's seconds (`Solution.solve_seconds`: candidates, costs and
the search), its status, the estimated latency and the simulated one (and their difference), the peak
resident memory of the whole exploration (import aside), and the seconds of `--fifo minimal` (one simulation
of the design).

    python benchmarks/ilp_time.py [--cases small|large|all] [--models DIR]

`small`: the MLPerf-Tiny-shaped networks (ResNet-8, DS-CNN, MobileNetV1-0.25 at 96x96, the autoencoder) on
the KV260 at 100/20/5 % of its DSPs with the frugal default, and at 1/4 of the fastest design's throughput
(`--target-fps`); `large`: MobileNetV1-1.0 at 224x224 on the U50 and the 1024x1024 conv stack on the KV260.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import networks  # noqa: E402

from ming_py.boards import load_board  # noqa: E402
from ming_py.build import BuildOptions  # noqa: E402
from ming_py.ilp.explore import explore, minimal_fifos  # noqa: E402
from ming_py.line_buffers import build_stream_graph  # noqa: E402
from ming_py.pipeline import lift  # noqa: E402
from ming_py.simulate import simulate_schedule  # noqa: E402

SMALL = ["resnet8_32", "ds_cnn_49x10", "mobilenet_v1_025_96", "autoencoder_640"]
CASES = {
    "small": [(name, "kv260", {"dsp": share}, None) for name in SMALL for share in ("100%", "20%", "5%")] +
             [(name, "kv260", {}, 4) for name in SMALL],
    "large": [("mobilenet_v1_224", "u50", {}, None), ("convstack_1024", "kv260", {}, None)],
}


def measure(model: Path, board: str, limits: dict, fraction: int | None, queue) -> None:
    """One case, in its own process: its figures into `queue`."""
    began = time.perf_counter()
    options = BuildOptions(board=board, limits=limits)
    try:
        graph = build_stream_graph(lift(model))
        began = time.perf_counter()
        if fraction is not None:  # a throughput target: 1/fraction of the fastest design's
            _, fastest, _ = explore(graph, BuildOptions(board=board, limits=limits, objective="latency"))
            fps = fastest.totals["interval_cycles"]  # the simulated interval, what targets are checked on
            options = BuildOptions(board=board, limits=limits,
                                   target_fps=load_board(board).clock_mhz * 1e6 / fps / fraction)
            began = time.perf_counter()
        _, solution, _ = explore(graph, options)
    except Exception as error:  # a refused model or a failure: the row says so and the table goes on
        queue.put({"status": f"{type(error).__name__}: {error}"[:60], "ilp": time.perf_counter() - began})
        return
    stream_graph = build_stream_graph(graph)
    simulated = simulate_schedule(stream_graph, solution.schedule).cycles
    fifo_began = time.perf_counter()
    minimal_fifos(stream_graph, solution, set())
    queue.put({"status": solution.status, "ilp": solution.solve_seconds, "cycles": solution.totals["estimated_cycles"],
               "simulated": simulated, "fifo": time.perf_counter() - fifo_began,
               "memory_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024})


def run_case(model: Path, board: str, limits: dict, fraction: int | None) -> dict:
    queue = multiprocessing.get_context("spawn").Queue()
    process = multiprocessing.get_context("spawn").Process(target=measure, args=(model, board, limits, fraction,
                                                                                 queue))
    process.start()
    row = queue.get()
    process.join()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", choices=("small", "large", "all"), default="small")
    parser.add_argument("--models", type=Path, help="where the .onnx files are kept (default: a temporary folder)")
    args = parser.parse_args()
    cases = CASES["small"] + CASES["large"] if args.cases == "all" else CASES[args.cases]
    header = (f"{'network':<20} {'board':<6} {'design':<10} {'ILP s':>7} {'status':<24} {'cycles':>10} "
              f"{'simulated':>10} {'est-sim %':>9} {'peak MB':>8} {'fifo min s':>10}")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.models or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for name, board, limits, fraction in cases:
            model = networks.quantized(name, folder)
            design = f"fps/{fraction}" if fraction else (",".join(f"{k} {v}" for k, v in limits.items()) or "board")
            row = run_case(model, board, limits, fraction)
            if "cycles" in row:
                error = 100 * (row["cycles"] - row["simulated"]) / max(row["simulated"], 1)
                figures = (f"{row['cycles']:>10,} {row['simulated']:>10,} {error:>+9.1f} {row['memory_mb']:>8,} "
                           f"{row['fifo']:>10.2f}")
            else:
                figures = ""
            print(f"{name:<20} {board:<6} {design:<10} {row['ilp']:>7.2f} {row['status']:<24} {figures}", flush=True)


if __name__ == "__main__":
    main()
