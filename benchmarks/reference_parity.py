"""Parity of `ming reference` with onnxruntime on the test zoo.

Prints, per model and quantization granularity, the largest difference in
output LSBs and the share of output elements that are bit-exact, over
`--inputs` random inputs.

    python benchmarks/reference_parity.py [--inputs 20] [--models lenet,residual_block]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import zoo  # noqa: E402

from ming_py import parity  # noqa: E402
from ming_py.ir import MingError  # noqa: E402
from ming_py.pipeline import lift  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=20)
    parser.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    args = parser.parse_args()
    names = [n for n in args.models.split(",") if n] or list(zoo.MODELS)
    print(f"{'model':<26} {'weights':<12} {'bit-exact expected':<19} {'max |diff| LSB':>14} {'% exact':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for per_channel in (False, True):
                path = zoo.quantized_model(name, Path(tmp), per_channel)
                granularity = "per-channel" if per_channel else "per-tensor"
                try:
                    graph = lift(path)
                except MingError as exc:
                    print(f"{name:<26} {granularity:<12} rejected: {exc}")
                    continue
                result = parity.Parity(0, 0, 0)
                for seed in range(args.inputs):
                    result = result.merge(parity.compare(graph, path, zoo.random_input(name, seed)))
                expected = "yes" if zoo.MODELS[name].bit_exact else "no"
                print(f"{name:<26} {granularity:<12} {expected:<19} {result.max_lsb:>14} "
                      f"{result.exact_percent:>8.2f}%")


if __name__ == "__main__":
    main()
