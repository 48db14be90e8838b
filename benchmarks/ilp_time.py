"""Time of the resource ILP and of `--fifo minimal` on the DSE benchmark networks.

For each network of benchmarks/networks.py on its board and budget, and for each
MIP engine: the ILP's wall-clock seconds, its status, the estimated cycles, and
the seconds of `--fifo minimal` (one simulation of the design). `cbc` is ming's
search as shipped; `highs` runs the same search (`ilp.solve._search`) with
HiGHS (highspy through PuLP, one thread) in place of CBC for every LP and MIP,
for comparison only (highspy is not a dependency of ming).

    python benchmarks/ilp_time.py [--solvers cbc,highs] [--models DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
import tempfile
import time
from pathlib import Path

import pulp

sys.path.insert(0, str(Path(__file__).resolve().parent))

import networks  # noqa: E402

from ming_py.build import BuildOptions, explore  # noqa: E402
from ming_py.ilp.explore import minimal_fifos  # noqa: E402
from ming_py.errors import MingError  # noqa: E402
from ming_py.line_buffers import build_stream_graph  # noqa: E402
from ming_py.pipeline import lift  # noqa: E402

solve_module = importlib.import_module("ming_py.ilp.solve")

CASES = [  # network, board, budget
    ("resnet24_32", "kv260", {}),
    ("resnet24_32", "kv260", {"dsp": "20%"}),
    ("vgg13_224", "zcu102", {}),
    ("mobilenet_v1_224", "u50", {"dsp": "30%"}),
]


def highs_run(problem: pulp.LpProblem, node_limit: int, relax: bool = False, cutoff: float | None = None):
    """`ilp.solve._cbc`'s contract, answered by HiGHS."""
    options = {"mip_max_nodes": node_limit} | ({"objective_bound": cutoff} if cutoff is not None else {})
    try:
        problem.solve(pulp.HiGHS(msg=False, threads=1, gapRel=0, gapAbs=0.5, mip=not relax, **options))
    except KeyError:  # a status PuLP does not map (node limit); the model has the answer
        pass
    highs = problem.solverModel
    status = highs.modelStatusToString(highs.getModelStatus())
    info = highs.getInfo()
    solution = highs.getSolution()
    values = {v.name: solution.col_value[v.index] for v in problem.variables()}
    reduced = {v.name: solution.col_dual[v.index] for v in problem.variables()}
    objective = info.objective_function_value
    if status == "Optimal":
        return solve_module._Run("optimal", objective, objective, values, reduced)
    if status in ("Infeasible", "Objective bound"):
        return solve_module._Run("infeasible")
    found = info.primal_solution_status == 2
    return solve_module._Run("stopped", objective, info.mip_dual_bound, values if found else None, reduced)


@contextlib.contextmanager
def engine(name: str):
    if name == "cbc":
        yield
        return
    original = solve_module._cbc
    solve_module._cbc = highs_run
    try:
        yield
    finally:
        solve_module._cbc = original


def measure(graph, board: str, limits: dict, solver: str) -> dict:
    row = {"solver": solver}
    began = time.perf_counter()
    try:
        with engine(solver):
            target, solution = explore(graph, BuildOptions(board=board, limits=limits))
    except MingError as error:
        return row | {"ilp": time.perf_counter() - began, "status": str(error).split(";")[0][:40]}
    stream_graph = build_stream_graph(graph)
    began = time.perf_counter()
    minimal_fifos(stream_graph, solution, set())
    return row | {"ilp": solution.solve_seconds, "status": solution.status, "cycles": solution.totals["cycles"],
                  "fifo": time.perf_counter() - began}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--solvers", default="cbc,highs")
    parser.add_argument("--models", type=Path, help="where the .onnx files are kept (default: a temporary folder)")
    args = parser.parse_args()
    header = (f"{'network':<18} {'board':<7} {'budget':<10} {'solver':<6} {'ILP s':>7} {'status':<40} "
              f"{'cycles':>10} {'fifo min s':>10}")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.models or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        graphs = {}
        for name, board, limits in CASES:
            if name not in graphs:
                graphs[name] = lift(networks.quantized(name, folder))
            budget = ",".join(f"{k} {v}" for k, v in limits.items()) or "board"
            for solver in args.solvers.split(","):
                row = measure(graphs[name], board, limits, solver)
                cycles = f"{row['cycles']:>10,}" if "cycles" in row else f"{'':>10}"
                fifo = f"{row['fifo']:>10.2f}" if "fifo" in row else f"{'':>10}"
                print(f"{name:<18} {board:<7} {budget:<10} {solver:<6} {row['ilp']:>7.2f} {row['status']:<40} "
                      f"{cycles} {fifo}", flush=True)


if __name__ == "__main__":
    main()
