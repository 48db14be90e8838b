"""Parity of the activation tables with onnxruntime on larger maps: per table op, conv (4 -> 16 channels) ->
op -> conv (16 -> 8) on 32 x 32 maps, quantized per channel, over `--inputs` random inputs of three
spreads; prints the output values that differ from onnxruntime's.

    python benchmarks/table_parity.py [--inputs 30]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import zoo  # noqa: E402

from ming_py.frontends.onnx_tables import TABLE_OPS  # noqa: E402
from ming_py.pipeline import lift  # noqa: E402
from ming_py.reference import run as reference_run  # noqa: E402
from ming_py.ort_session import onnxruntime_session  # noqa: E402

SHAPE = (1, 4, 32, 32)


def model(case: str, directory: Path) -> Path:
    g = zoo._Graph(f"parity_{case}", SHAPE)
    h = g.conv("x", "conv1", 16, pads=1)
    h = g.prelu(h, "act", per_channel=case == "PRelu") if case.startswith("PRelu") else g.unary(h, case, "act")
    return zoo.quantize_float_model(g.finish(g.conv(h, "conv2", 8, pads=1)), directory / f"{case}.onnx", SHAPE,
                                    per_channel=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=30)
    args = parser.parse_args()
    print(f"{'op':<16} {'outputs':>9} {'differ':>7}")
    differ = outputs = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in sorted(TABLE_OPS) + ["PRelu_scalar"]:
            path = model(case, Path(tmp))
            graph = lift(path)
            session = onnxruntime_session(str(path))
            case_differ = case_outputs = 0
            for seed in range(args.inputs):
                x = (np.random.default_rng(seed).standard_normal(SHAPE) * (1 + seed % 3)).astype(np.float32)
                expected = session.run(None, {"x": x})[0]
                case_differ += int(np.sum(reference_run(graph, x)["y"] != expected))
                case_outputs += expected.size
            print(f"{case:<16} {case_outputs:>9} {case_differ:>7}", flush=True)
            differ, outputs = differ + case_differ, outputs + case_outputs
    print(f"{'all':<16} {outputs:>9} {differ:>7}")


if __name__ == "__main__":
    main()
