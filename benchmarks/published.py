"""The published models of tests/data/published built as published on a board: a table of each model's ops, its
build's self-check, whether ming reference equals LiteRT's reference kernels, its latency and its resources.

    python benchmarks/published.py [--board kv260] [--only vww]

ming reference is compared with LiteRT (BUILTIN_REF) on two random inputs and an extremes input of the model's own
input type (int8 or uint8). Exit code 1 when a model fails to build, its check fails or a value differs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from test_keras_tflite import litert_reference  # noqa: E402

from ming_py import reference  # noqa: E402
from ming_py.build import BuildOptions, build  # noqa: E402
from ming_py.errors import MingError  # noqa: E402
from ming_py.frontends.tflite_fold import op_name  # noqa: E402
from ming_py.frontends.tflite_model import load_tflite  # noqa: E402
from ming_py.pipeline import lift  # noqa: E402

PUBLISHED = HERE.parent / "tests" / "data" / "published"


def op_summary(path: Path) -> str:
    model = load_tflite(path)
    counts = Counter(op_name(model, op) for op in model.subgraphs[0].operators)
    return ", ".join(f"{name} x{count}" if count > 1 else name for name, count in sorted(counts.items()))


def model_inputs(graph) -> list[np.ndarray]:
    port = graph.inputs[0]
    dtype = np.dtype(port.dtype if port.dtype in ("int8", "uint8") else "int8")
    low, high = np.iinfo(dtype).min, np.iinfo(dtype).max
    rng = [np.random.default_rng(seed) for seed in (0, 1, 2)]
    return [rng[0].integers(low, high + 1, port.onnx_shape).astype(dtype),
            rng[1].integers(low, high + 1, port.onnx_shape).astype(dtype),
            np.where(rng[2].random(port.onnx_shape) < 0.5, low, high).astype(dtype)]


def equals_litert(path: Path, graph) -> tuple[int, int]:
    """(differing values, values) of ming reference against LiteRT's reference kernels."""
    differing = values = 0
    for x in model_inputs(graph):
        ours, theirs = reference.run(graph, x), litert_reference(path, x)
        for output in graph.outputs:
            expected = theirs[output.name]
            differing += int(np.count_nonzero(np.asarray(ours[output.name]) != expected))
            values += expected.size
    return differing, values


def row(path: Path, board: str) -> tuple[list[str], bool]:
    started = time.perf_counter()
    graph = lift(path)
    differing, values = equals_litert(path, graph)
    with tempfile.TemporaryDirectory(prefix="ming-published-") as scratch:
        try:
            design = build(path, Path(scratch) / "out", BuildOptions(board=board))
        except MingError as error:
            return [path.stem, op_summary(path), f"no: {error}", f"{values - differing}/{values}"] + [""] * 6, False
    report = json.loads(design.files["report.json"])
    totals, verified = report["totals"], report["verification"]["equal"]
    cells = [path.stem, op_summary(path), "verified" if verified else "FAILED", f"{values - differing}/{values}",
             f"{totals['estimated_cycles']:,} / {totals['cycles']:,}", f"{totals['latency_us']:,.1f}",
             f"{totals['dsp']}", f"{totals['bram18k']}", f"{totals['uram']}", f"{totals['lut']:,}",
             f"{time.perf_counter() - started:.0f}"]
    return cells, verified and differing == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="kv260")
    parser.add_argument("--only", default="", help="the models whose file names contain this text")
    args = parser.parse_args()
    header = ["model", "ops", "build", "reference == LiteRT", "cycles est. / sim.", "latency us", "DSP", "BRAM18K",
              "URAM", "LUT", "s"]
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header), flush=True)
    good = True
    for path in sorted(PUBLISHED.glob("*.tflite")):
        if args.only in path.name:
            cells, ok = row(path, args.board)
            good &= ok
            print("| " + " | ".join(cells) + " |", flush=True)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
