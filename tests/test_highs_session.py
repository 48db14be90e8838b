"""One HiGHS child per search (`ilp.search.HighsSession`): each run gives what a fresh HiGHS on the model with the
same candidates fixed gives, and a child that dies is one clear error that leaves no scratch folder behind."""

from __future__ import annotations

import tempfile

import pulp
import pytest

from ming_py.errors import MingError
from ming_py.ilp import search

pytestmark = pytest.mark.unit


def _knapsack() -> tuple[pulp.LpProblem, list[pulp.LpVariable]]:
    """Pick one of each pair, the pair's weights within a budget; the least cost."""
    problem = pulp.LpProblem("knapsack", pulp.LpMinimize)
    xs = [pulp.LpVariable(f"x_{i}", cat="Binary") for i in range(8)]
    costs, weights = [9, 4, 7, 3, 8, 2, 6, 5], [1, 5, 2, 6, 1, 7, 3, 4]
    for i in range(0, 8, 2):
        problem += xs[i] + xs[i + 1] == 1, f"one_{i}"
    problem += pulp.lpSum(w * x for w, x in zip(weights, xs)) <= 16, "budget"
    problem += pulp.lpSum(c * x for c, x in zip(costs, xs))
    return problem, xs


def test_each_run_of_a_session_equals_a_fresh_session_with_its_own_fixings():
    problem, xs = _knapsack()
    requests = [dict(relax=True), dict(zero=xs[1:3]), dict(), dict(zero=[xs[5]], cutoff=30.5), dict(zero=xs[::2])]
    with search.HighsSession(problem) as highs:
        shared = [highs.run(100, **request) for request in requests]
    for request, run in zip(requests, shared):
        with search.HighsSession(problem) as highs:
            assert highs.run(100, **request) == run
    assert shared[2].status == "optimal" and shared[4].status == "infeasible"


def test_a_child_that_dies_is_one_clear_error_and_leaves_no_scratch_folder(tmp_path, monkeypatch):
    dying = tmp_path / "dying.py"
    dying.write_text("import sys\nsys.exit(3)\n")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(search, "HIGHS_WORKER", str(dying))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    problem, _ = _knapsack()
    with pytest.raises(MingError, match="^the HiGHS run failed: exit status 3$"):
        with search.HighsSession(problem) as highs:
            highs.run(100)
    assert list(scratch.iterdir()) == []
