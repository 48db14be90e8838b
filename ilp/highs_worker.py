"""HiGHS runs of one MPS model, as a child process of `ilp.search.HighsSession` (so that an interrupted ming stops
it).

    python -P ilp/highs_worker.py MODEL.mps

Run as a script (it imports only highspy), so that a child does not import the ILP package. It reads the model
once, then answers requests, one JSON line each on stdin: {"nodes": N, "cutoff": X or null, "relax": bool,
"zero": [columns whose upper bound is 0 for this run], "options": {HiGHS options for this run only}}, with one
JSON line on stdout: the status ("optimal", "infeasible" or "stopped"), objective, bound and, by column name, the
values and reduced costs. Each run starts from the model as read with only its own columns fixed, its own options
set and the solver cleared, so it gives what a fresh HiGHS on that model gives.

On one thread with HiGHS's fixed seed: the same requests give the same answers on every run and machine."""

from __future__ import annotations

import json
import os
import sys

import highspy

# whole objectives (cycles, resource scores): a design 0.5 within the bound is proven optimal. Without probing
# (presolve rule 15) and root restarts: probing each one-hot binary through the dense budget and latency rows took
# most of presolve (10 of 11 s on mobilenet_v1_025_96's frugal model), and each restart presolved again; without
# them benchmarks/dse_scale.py's MLPerf Tiny networks explore in 12-56 % less time to the same designs
OPTIONS = {"output_flag": False, "threads": 1, "random_seed": 0, "mip_rel_gap": 0.0, "mip_abs_gap": 0.5,
           "presolve_rule_off": 1 << 15, "mip_allow_restart": False}


def _set(highs: highspy.Highs, options: dict) -> None:
    for option, value in options.items():
        highs.setOptionValue(option, value)


class Worker:
    def __init__(self, model: str):
        self.highs = highspy.Highs()
        _set(self.highs, OPTIONS)
        self.highs.readModel(model)
        lp = self.highs.getLp()
        self.names = list(lp.col_names_)
        self.column = {name: i for i, name in enumerate(self.names)}
        self.lower, self.upper = list(lp.col_lower_), list(lp.col_upper_)

    def run(self, nodes: int, cutoff: float | None, relax: bool, zero: list[str], options: dict) -> dict:
        highs = self.highs
        fixed = [self.column[name] for name in zero]
        for i in fixed:
            highs.changeColBounds(i, self.lower[i], 0.0)
        _set(highs, options)
        highs.setOptionValue("mip_max_nodes", nodes)
        highs.setOptionValue("objective_bound", cutoff if cutoff is not None else highspy.kHighsInf)
        highs.setOptionValue("solve_relaxation", relax)
        highs.clearSolver()
        try:
            highs.run()
            return self._result(relax)
        finally:
            for i in fixed:
                highs.changeColBounds(i, self.lower[i], self.upper[i])
            if options:  # this run's own: back to the usual ones
                highs.resetOptions()
                _set(highs, OPTIONS)

    def _result(self, relax: bool) -> dict:
        highs = self.highs
        status = highs.modelStatusToString(highs.getModelStatus())
        info = highs.getInfo()
        solution = highs.getSolution()
        found = info.primal_solution_status == 2
        result = {"status": "optimal" if status == "Optimal" else
                  "infeasible" if status in ("Infeasible", "Objective bound") else "stopped",
                  "objective": info.objective_function_value if found else None,
                  "bound": None if relax else info.mip_dual_bound}
        if found:
            result["values"] = dict(zip(self.names, solution.col_value))
            result["reduced"] = dict(zip(self.names, solution.col_dual)) if relax else {}
        return result


def main(argv: list[str]) -> None:
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # what HiGHS itself prints (its banner): not among the answers
    worker = Worker(argv[0])
    for line in sys.stdin:
        request = json.loads(line)
        result = worker.run(request["nodes"], request["cutoff"], request["relax"], request["zero"],
                            request.get("options", {}))
        answers.write(json.dumps(result) + "\n")
        answers.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
