"""One HiGHS child per search (`ilp.search.HighsSession`): each run gives what a fresh HiGHS on the model with the
same candidates fixed gives, and a child that dies is one clear error that leaves no scratch folder behind."""

from __future__ import annotations

import itertools
import tempfile

import pulp
import pytest

from ming_py.errors import MingError
from ming_py.ilp import search

pytestmark = pytest.mark.unit


COSTS, WEIGHTS, CAPACITY = [9, 4, 7, 3, 8, 2, 6, 5], [1, 5, 2, 6, 1, 7, 3, 4], 16


def _knapsack() -> tuple[pulp.LpProblem, list[pulp.LpVariable]]:
    """Pick one of each pair, the pair's weights within a budget; the least cost."""
    problem = pulp.LpProblem("knapsack", pulp.LpMinimize)
    xs = [pulp.LpVariable(f"x_{i}", cat="Binary") for i in range(8)]
    for i in range(0, 8, 2):
        problem += xs[i] + xs[i + 1] == 1, f"one_{i}"
    problem += pulp.lpSum(w * x for w, x in zip(WEIGHTS, xs)) <= CAPACITY, "budget"
    problem += pulp.lpSum(c * x for c, x in zip(COSTS, xs))
    return problem, xs


def test_each_run_of_a_session_equals_a_fresh_session_with_its_own_fixings():
    problem, xs = _knapsack()
    requests = [dict(relax=True), dict(zero=xs[1:3], options={"presolve": "off", "time_limit": 0.0}),
                dict(), dict(zero=[xs[5]], cutoff=30.5), dict(zero=xs[::2])]
    with search.HighsSession(problem) as highs:
        shared = [highs.run(100, **request) for request in requests]
    for request, run in zip(requests, shared):
        with search.HighsSession(problem) as highs:
            assert highs.run(100, **request) == run
    # a run's own options end with it: the run after the one stopped at once by its time limit is solved
    assert shared[1].status == "stopped" and shared[2].status == "optimal" and shared[4].status == "infeasible"


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


class _Knapsack:
    """`run_search`'s view of a model (`ilp.model.Model`): the knapsack above, the heuristic's design replaced by
    `rens` (the optimum, or a worse one, which the proving MIP beats)."""

    goal = "cost"

    def __init__(self, rens: dict[str, int]):
        self.problem, self.xs = _knapsack()
        self.pick = {f"pair{i}": self.xs[2 * i:2 * i + 2] for i in range(4)}
        self.rens, self.heuristic = rens, True

    def variables(self):
        return self.xs

    def picked(self, values):
        if values is None:
            return None
        if self.heuristic:  # the first design asked for is the heuristic's
            self.heuristic = False
            return self.rens
        return {f"pair{i}": next(j for j in (0, 1) if values[self.xs[2 * i + j].name] > 0.5) for i in range(4)}

    def value_of(self, picked):
        return _total(COSTS, picked)

    def fits(self, picked):
        return _total(WEIGHTS, picked) <= CAPACITY


def _total(figures: list[int], design: dict[str, int]) -> int:
    """The sum of a design's figures (costs or weights): pair i's candidate j is figure 2i + j."""
    return sum(figures[2 * int(name[-1]) + j] for name, j in design.items())


def _cheapest() -> dict[str, int]:
    """The knapsack's optimum, by enumeration."""
    designs = [dict(zip(("pair0", "pair1", "pair2", "pair3"), js)) for js in itertools.product((0, 1), repeat=4)]
    return min((d for d in designs if _total(WEIGHTS, d) <= CAPACITY), key=lambda d: _total(COSTS, d))


@pytest.mark.parametrize("standing", [True, False])
def test_what_follows_a_search_is_what_follows_its_design_whether_the_incumbent_stands_or_is_beaten(standing):
    called = []

    def then(picked, abandon):
        called.append(dict(picked))
        return sorted(picked.items())

    best = _cheapest()
    rens = best if standing else {name: 1 - j for name, j in best.items()}  # costlier (24 for 20), and fits
    found = search.run_search(_Knapsack(rens), 100, then=then)
    assert found.status == "optimal" and found.picked == best and found.then == sorted(best.items())
    assert called == ([best] if standing else [rens, best])  # started on the incumbent while the proof ran


def test_an_abandoned_session_fails_with_one_clear_error():
    problem, _ = _knapsack()
    abandon = search.Abandon()
    abandon()
    with pytest.raises(MingError, match="^the HiGHS run failed: killed by signal 9$"):
        with search.HighsSession(problem, abandon) as highs:
            highs.run(100)


class _StoppedProof:
    """A HiGHS session whose proving MIP stops at its node limit having found nothing better than the incumbent:
    the LP's bound is 18, the proof's 19, and every candidate is in the LP's solution."""

    def __init__(self, problem, abandon=None):
        self.names = [x.name for x in problem.variables()]
        self.runs = [search._Run("optimal", 18.0, None, dict.fromkeys(self.names, 0.5)),  # the relaxation
                     search._Run("optimal", 0.0, None, dict.fromkeys(self.names, 1.0)),  # the heuristic's (rens)
                     search._Run("stopped", None, 19.0)]

    def __enter__(self):
        return self

    def __exit__(self, *error):
        pass

    def run(self, node_limit, relax=False, cutoff=None, zero=()):
        return self.runs.pop(0)

    def ask(self, node_limit, relax=False, cutoff=None, zero=()):
        pass

    def answer(self):
        return self.runs.pop(0)


@pytest.mark.parametrize("better", [True, False])
def test_a_design_found_another_way_replaces_an_unproven_one_only_where_it_is_better(better, monkeypatch):
    monkeypatch.setattr(search, "HighsSession", _StoppedProof)
    best = _cheapest()
    rens = {name: 1 - j for name, j in best.items()}  # 24 for the optimum's 20
    other = best if better else {"pair0": 0, "pair1": 1, "pair2": 0, "pair3": 0}  # 20, or 26 (it fits)
    assert _total(WEIGHTS, other) <= CAPACITY
    found = search.run_search(_Knapsack(rens), 100, then=lambda picked, abandon: dict(picked),
                              fallback=lambda: other)
    assert found.status == "feasible" and found.bound == 19.0
    assert found.picked == found.then == (best if better else rens)
    assert found.value == _total(COSTS, found.picked)


class _FailedRelaxation(_StoppedProof):
    """A HiGHS session whose LP relaxation stops without a solution (its dual simplex gave up on the numbers)."""

    def __init__(self, problem, abandon=None):
        self.runs = [search._Run("stopped")]


@pytest.mark.parametrize("given", ["nothing", "incumbent", "fallback", "both"])
def test_a_search_whose_relaxation_fails_keeps_the_better_design_given_or_finds_none(given, monkeypatch):
    monkeypatch.setattr(search, "HighsSession", _FailedRelaxation)
    best = _cheapest()
    other = {"pair0": 0, "pair1": 1, "pair2": 0, "pair3": 0}  # 26 for the optimum's 20 (it fits)
    incumbent = best if given in ("incumbent", "both") else None
    fallback = (lambda: other) if given in ("fallback", "both") else None
    found = search.run_search(_Knapsack(None), 100, incumbent, lambda picked, abandon: dict(picked),
                              fallback=fallback)
    kept = incumbent or (other if fallback else None)
    assert (found.status, found.picked, found.then) == (("feasible", kept, kept) if kept else ("unsolved", None, None))


def test_a_design_found_another_way_is_not_asked_for_where_the_search_proved_its_own():
    asked = []
    found = search.run_search(_Knapsack(_cheapest()), 100, fallback=lambda: asked.append(True))
    assert found.status == "optimal" and found.picked == _cheapest() and asked == []


class _Lanes:
    """A candidate's lane counts, as `search.improve` reads them (`ilp.cost.Choice`)."""

    def __init__(self, lanes: int):
        self.lanes_in = self.lanes_out = (lanes,)


class _Chain:
    """`run_search`'s view of a model with more processes than the proof is run on: each process picks 1, 2 or 4
    lanes (cost 6, 5, 1; weight 1, 2, 4) within a budget of weight 2 a process. The heuristic's design is every
    process at 1 lane (6 a process); the best design near it every process at 2 (5); the optimum a third of them
    at 4 lanes and the rest at 1 (4.33)."""

    goal = "cost"

    def __init__(self):
        processes = search.PROVEN_PROCESSES + 4
        self.problem = pulp.LpProblem("chain", pulp.LpMinimize)
        self.pick = {f"p{i}": [pulp.LpVariable(f"x_{i}_{j}", cat="Binary") for j in range(3)]
                     for i in range(processes)}
        self.options = {name: [_Lanes(1), _Lanes(2), _Lanes(4)] for name in self.pick}
        for name, xs in self.pick.items():
            self.problem += pulp.lpSum(xs) == 1, f"one_{name}"
        self.problem += pulp.lpSum(w * x for xs in self.pick.values() for w, x in zip((1, 2, 4), xs)) \
            <= 2 * processes, "budget"
        self.problem += pulp.lpSum(c * x for xs in self.pick.values() for c, x in zip((6, 5, 1), xs))
        self.heuristic = True

    def variables(self):
        return [x for xs in self.pick.values() for x in xs]

    def picked(self, values):
        if values is None:
            return None
        if self.heuristic:
            self.heuristic = False
            return dict.fromkeys(self.pick, 0)
        return {name: next(j for j, x in enumerate(xs) if values[x.name] > 0.5) for name, xs in self.pick.items()}

    def value_of(self, picked):
        return sum((6, 5, 1)[j] for j in picked.values())


def test_a_model_beyond_the_proof_takes_the_better_design_near_the_heuristics_within_the_relaxations_bound():
    model = _Chain()
    rens = dict.fromkeys(model.pick, 0)
    found = search.run_search(model, 100)
    assert model.value_of(found.picked) < model.value_of(rens)
    assert all(j <= 1 for j in found.picked.values())  # lanes within a factor of 2 of the heuristic's
    assert sum((1, 2, 4)[j] for j in found.picked.values()) <= 2 * len(model.pick)
    assert found.bound <= found.value == model.value_of(found.picked)
    # the optimum is not near, and no proof was run: the best design near, bounded by the relaxation
    assert found.status == "feasible" and found.value == 5 * len(model.pick) and found.bound < found.value
