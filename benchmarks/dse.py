"""Design-space exploration on the KV260 at 100%, 20% and 5% of its DSPs (as MING's Table IV).

For each test network and a single Conv+ReLU (3->16 channels, 3x3) at 32x32 and
224x224, prints the estimated cycles, the roofline (total MACs / DSP budget),
their ratio, the resources used, the ILP solve time and the time of a whole
`ming build` (import, ILP, emission, writing).

    python benchmarks/dse.py [--shares 100%,20%,5%] [--board kv260]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import zoo  # noqa: E402

from ming_py.build import BuildOptions, build  # noqa: E402

NETWORKS = ["residual_block", "two_residual_stages", "dw_separable", "lenet", "tiny_cnn"]


def single_conv(size: int, directory: Path) -> Path:
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array((rng.standard_normal((16, 3, 3, 3)) * 0.27).astype(np.float32), "w")
    bias = numpy_helper.from_array((rng.standard_normal(16) * 0.1).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"], name="relu")], f"conv_relu_{size}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, size, size])], [weight, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return zoo.quantize_float_model(model, directory / f"conv_relu_{size}.onnx", (1, 3, size, size))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shares", default="100%,20%,5%")
    parser.add_argument("--board", default="kv260")
    args = parser.parse_args()
    header = (f"{'model':<22} {'DSP share':>9} {'cycles':>10} {'roofline':>9} {'ratio':>6} {'DSP':>5} "
              f"{'BRAM18K':>7} {'URAM':>4} {'LUT':>7} {'ILP s':>6} {'build s':>7}")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        models = [(name, zoo.quantized_model(name, tmp)) for name in NETWORKS]
        models += [(f"conv3x3_3to16_{s}x{s}", single_conv(s, tmp)) for s in (32, 224)]
        for name, path in models:
            for share in args.shares.split(","):
                began = time.perf_counter()
                result = build(path, tmp / "out", BuildOptions(board=args.board, limits={"dsp": share}))
                seconds = time.perf_counter() - began
                t = result.solution.totals
                ratio = t["cycles"] / max(t["roofline_cycles"], 1)
                print(f"{name:<22} {share:>9} {t['cycles']:>10,} {t['roofline_cycles']:>9,} {ratio:>6.2f} "
                      f"{t['dsp']:>5} {t['bram18k']:>7} {t['uram']:>4} {t['lut']:>7,} "
                      f"{result.solution.solve_seconds:>6.2f} {seconds:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
