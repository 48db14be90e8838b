"""Fidelity of the ILP's latency model against the cycle-level simulation, and FIFO sizes.

For every test network at several DSP budgets on the KV260: the modelled
latency (report.json totals.estimated_cycles), the simulated one (`ming simulate`), their
relative difference, and the FIFO bits of the sized design before and after
`--fifo minimal` (with the simulated latency of each).

    python benchmarks/fidelity.py [--shares 5%,20%,100%]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import tempfile  # noqa: E402

import zoo  # noqa: E402

from ming_py.build import BuildOptions, design  # noqa: E402
from ming_py.ilp.explore import explore  # noqa: E402
from ming_py.line_buffers import build_stream_graph  # noqa: E402
from ming_py.pipeline import lift  # noqa: E402

NETWORKS = ["residual_block", "two_residual_stages", "dw_separable", "lenet", "tiny_cnn", "concat_branches"]


def totals_and_fifo_bits(graph, options):
    board, solution, _ = explore(build_stream_graph(graph), options)
    data = json.loads(design(graph, board, solution=solution).files["report.json"])
    bits = sum(c["fifo_depth"] * c["lanes"] * 8 for c in data["channels"])
    return data["totals"], bits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shares", default="5%,20%,100%")
    args = parser.parse_args()
    header = (f"{'network':<22} {'DSP':>5} {'model':>8} {'simulated':>9} {'|error|':>8} "
              f"{'FIFO bits':>10} {'minimal':>8} {'sim (minimal)':>13}")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        for name in NETWORKS:
            graph = lift(zoo.quantized_model(name, Path(tmp)))
            for share in args.shares.split(","):
                sized, sized_bits = totals_and_fifo_bits(graph, BuildOptions(limits={"dsp": share}))
                small, small_bits = totals_and_fifo_bits(graph, BuildOptions(limits={"dsp": share},
                                                                             minimal_fifos=True))
                error = abs(sized["estimated_cycles"] - sized["cycles"]) / sized["cycles"]
                print(f"{name:<22} {share:>5} {sized['estimated_cycles']:>8,} {sized['cycles']:>9,} {error:>7.1%} "
                      f"{sized_bits:>10,} {small_bits:>8,} {small['cycles']:>13,}", flush=True)


if __name__ == "__main__":
    main()
