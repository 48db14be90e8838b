"""The default design against the fastest one: how much of the KV260 each takes, and what the slack buys.

For each model, on the KV260's default budget (the build's: 90 % of the DSP, BRAM and URAM and 70 % of the LUTs
its block design leaves, `ilp/budget.py`), with the FIFO memory the build reserves before its ILP:

* fastest -- `--objective latency`;
* 1 %     -- the least resources within 1 % of the fastest design's latency (the default before it took 10 %);
* default -- the least resources within 10 % of it (`--objective frugal`, FRUGAL_SLACK);

each as its estimated latency and its DSP, LUT and BRAM18K in percent of the KV260 (the device's figures, not
the budget: the budget is a share of what the platform leaves), and the CPU seconds of each ILP (ming's and its HiGHS runs';
the default's includes its search for the fastest design). Then, for `--curve` models, the
latency-resource curve: the least-resource design (`--target-latency-us`) at 1.0, 1.02, 1.05, 1.1, 1.2, 1.5,
2 and 4 times the fastest design's latency, which shows whether a design a little slower than the fastest is
much smaller.

    python benchmarks/default_design.py [--models example,mnist,ds_cnn,resnet8,vww] [--curve mnist,example]

Models: the README's example (examples/tiny_cnn.onnx); an MNIST CNN shaped like Keras' "simple MNIST
convnet" (28x28x1, conv 3x3 32 + ReLU, max pool, conv 3x3 64 + ReLU, max pool, a 10-way dense layer; seeded
weights, quantized per channel by onnxruntime's static quantizer as the tests' zoo does); and three published
MLPerf Tiny models (tests/data/published): DS-CNN keyword spotting, ResNet-8 (CIFAR-10), MobileNetV1-0.25
visual wake words.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import zoo  # noqa: E402

from ming_py.boards import load_board  # noqa: E402
from ming_py.ilp import Budget, solve  # noqa: E402
from ming_py.ilp.fifos import FifoCharge  # noqa: E402
from ming_py.ilp.objectives import FRUGAL_SLACK, Targets  # noqa: E402
from ming_py.line_buffers import build_stream_graph  # noqa: E402
from ming_py.line_buffers.fifo import DEEPEST_PIXELS, DEFAULT_PIXELS, reservation_plan  # noqa: E402
from ming_py.pipeline import lift  # noqa: E402

PUBLISHED = ROOT / "tests" / "data" / "published"
MODELS = {"example": ROOT / "examples" / "tiny_cnn.onnx", "mnist": None,
          "ds_cnn": PUBLISHED / "kws_ref_model.tflite", "resnet8": PUBLISHED / "pretrainedResnet_quant.tflite",
          "vww": PUBLISHED / "vww_96_int8.tflite"}
CURVE = (1.0, 1.02, 1.05, 1.1, 1.2, 1.5, 2.0, 4.0)
BOARD = "kv260"


def mnist_cnn(directory: Path) -> Path:
    """Keras' simple MNIST convnet's layers, seeded weights, int8 QDQ per channel."""
    g = zoo._Graph("mnist_cnn", (1, 1, 28, 28))
    h = g.maxpool(g.relu(g.conv("x", "conv1", 32, kernel=3), "relu1"), "pool1")
    h = g.maxpool(g.relu(g.conv(h, "conv2", 64, kernel=3), "relu2"), "pool2")
    out = g.gemm(g.flatten(h, "flatten"), "dense", 10)
    return zoo.quantize_float_model(g.finish(out), directory / "mnist_cnn.onnx", (1, 1, 28, 28), per_channel=True)


def cpu_seconds() -> float:
    """This process's CPU time and its waited-for children's (the HiGHS runs)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def reserved_fifos(graph) -> dict:
    """`solve`'s FIFO arguments as `ming build` gives them where a design fits beside them (`ilp.explore`): the
    memory set aside before the ILP, and each candidate's charge for its lanes."""
    fifos = FifoCharge(reservation_plan(graph), (DEFAULT_PIXELS, DEEPEST_PIXELS))
    return {"reserved": fifos.reserved(), "fifos": fifos}


def timed_solve(graph, board, budget, reserved, **how):
    began = cpu_seconds()
    solution = solve(graph, board, budget, **reserved, **how)
    return solution, cpu_seconds() - began


def shares(solution, board) -> str:
    t = solution.totals
    return (f"{t['cycles']:>8,} {100 * t['dsp'] / board.dsp:>5.1f} {100 * t['lut'] / board.lut:>5.1f} "
            f"{100 * t['bram18k'] / board.bram18k:>5.1f}")


def compare(name: str, graph, board, budget, reserved) -> None:
    fastest, fastest_s = timed_solve(graph, board, budget, reserved, objective="latency")
    near, near_s = timed_solve(graph, board, budget, reserved, objective="frugal", slack=0.01)
    default, default_s = timed_solve(graph, board, budget, reserved, objective="frugal")
    assert default.totals["solver"]["fastest"]["cycles"] == fastest.totals["cycles"]
    macs = fastest.totals["macs"]
    print(f"{name:<9} {len(graph.processes):>5} {macs:>11,} | {shares(fastest, board)} | {shares(near, board)} | "
          f"{shares(default, board)} | {fastest_s:>6.1f} {near_s:>6.1f} {default_s:>6.1f}  {default.status}",
          flush=True)


def curve(name: str, graph, board, budget, reserved) -> None:
    fastest = solve(graph, board, budget, "latency", **reserved)
    print(f"\n{name}: the least-resource design at each latency bound (fastest: "
          f"{fastest.totals['cycles']:,} cycles)")
    print(f"{'bound':>6} {'cycles':>9} {'DSP':>5} {'LUT':>7} {'BRAM18K':>7} {'DSP%':>5} {'LUT%':>5} {'BRAM%':>5} "
          f"{'largest share of the budget %':>30}")
    for factor in CURVE:
        bound_us = factor * fastest.totals["cycles"] / board.clock_mhz
        design = solve(graph, board, budget, **reserved, targets=Targets(latency_us=bound_us))
        t = design.totals
        print(f"{factor:>6.2f} {t['cycles']:>9,} {t['dsp']:>5} {t['lut']:>7,} {t['bram18k']:>7} "
              f"{100 * t['dsp'] / board.dsp:>5.1f} {100 * t['lut'] / board.lut:>5.1f} "
              f"{100 * t['bram18k'] / board.bram18k:>5.1f} "
              f"{t['solver']['footprint']['largest_share_percent']:>30}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated, of: " + ", ".join(MODELS))
    parser.add_argument("--curve", default="mnist,example", help="models to give the latency-resource curve of")
    args = parser.parse_args()
    board = load_board(BOARD)
    budget = Budget.of(board)
    wanted, curves = args.models.split(","), [m for m in args.curve.split(",") if m]
    print(f"{BOARD}: {board.dsp} DSP, {board.lut:,} LUT, {board.bram18k} BRAM18K; budget {budget.dsp} DSP, "
          f"{budget.lut:,} LUT, {budget.bram18k} BRAM18K. Designs: cycles, then DSP/LUT/BRAM18K in % of the "
          f"board; default = least resources within {100 * FRUGAL_SLACK:g} % of the fastest; ILP CPU seconds.")
    head = f"{'cycles':>8} {'DSP%':>5} {'LUT%':>5} {'BRAM%':>5}"
    print(f"{'model':<9} {'procs':>5} {'MACs':>11} | {'fastest':^26} | {'within 1 %':^26} | {'default (10 %)':^26} | "
          f"{'ILP s: fastest, 1 %, default':<28}")
    print(f"{'':<9} {'':>5} {'':>11} | {head} | {head} | {head} |")
    with tempfile.TemporaryDirectory() as tmp:
        graphs = {}
        for name in dict.fromkeys(wanted + curves):
            path = MODELS[name] or mnist_cnn(Path(tmp))
            graph = build_stream_graph(lift(path))
            graphs[name] = graph, reserved_fifos(graph)
            if name in wanted:
                compare(name, graph, board, budget, graphs[name][1])
        for name in curves:
            curve(name, graphs[name][0], board, budget, graphs[name][1])


if __name__ == "__main__":
    main()
