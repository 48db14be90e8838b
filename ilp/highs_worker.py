"""One HiGHS run of an MPS model, as a child process of `ilp.search._mip` (so that an interrupted ming stops it).

    python -P ilp/highs_worker.py MODEL.mps RESULT.json NODES [CUTOFF] [--relax]

Run as a script (it imports only highspy), so that a child does not import the ILP package.

On one thread with HiGHS's fixed seed: the same model gives the same answer on every run and machine. Writes
the status ("optimal", "infeasible" or "stopped"), objective, bound and, by column name, the values and reduced
costs."""

from __future__ import annotations

import json
import sys

import highspy

# whole objectives (cycles, resource scores): a design 0.5 within the bound is proven optimal
OPTIONS = {"output_flag": False, "threads": 1, "random_seed": 0, "mip_rel_gap": 0.0, "mip_abs_gap": 0.5}


def run(model: str, nodes: int, cutoff: float | None, relax: bool) -> dict:
    highs = highspy.Highs()
    for option, value in OPTIONS.items():
        highs.setOptionValue(option, value)
    highs.setOptionValue("mip_max_nodes", nodes)
    if cutoff is not None:
        highs.setOptionValue("objective_bound", cutoff)
    if relax:
        highs.setOptionValue("solve_relaxation", True)
    highs.readModel(model)
    highs.run()
    status = highs.modelStatusToString(highs.getModelStatus())
    info = highs.getInfo()
    solution = highs.getSolution()
    found = info.primal_solution_status == 2
    result = {"status": "optimal" if status == "Optimal" else
              "infeasible" if status in ("Infeasible", "Objective bound") else "stopped",
              "objective": info.objective_function_value if found else None,
              "bound": None if relax else info.mip_dual_bound}
    if found:
        names = highs.getLp().col_names_
        result["values"] = dict(zip(names, solution.col_value))
        result["reduced"] = dict(zip(names, solution.col_dual)) if relax else {}
    return result


def main(argv: list[str]) -> None:
    relax = "--relax" in argv
    model, out, nodes, *cutoff = [a for a in argv if a != "--relax"]
    result = run(model, int(nodes), float(cutoff[0]) if cutoff else None, relax)
    with open(out, "w") as file:
        json.dump(result, file)


if __name__ == "__main__":
    main(sys.argv[1:])
