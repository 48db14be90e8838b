"""The deterministic search over a `Model`: the LP relaxation, a RENS incumbent, reduced-cost fixing and the proving
MIP, each a HiGHS run limited by branch-and-bound nodes (never wall-clock time); then, among as good designs, the
thriftiest."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pulp

from ming_py.errors import MingError

from .budget import RESOURCES, Budget
from .scratch import scratch_folder
from .cost import Choice, Cost
from .footprint import largest_steps
from .footprint import shares as resource_shares
from .model import Model


# Branch-and-bound nodes of the proving MIP run, the search's only limit, the same on every machine: at most
# NODE_LIMIT, fewer for larger models so that nodes x candidates stays within NODE_WORK
NODE_LIMIT = 100_000
NODE_WORK = 8_000_000
# HiGHS rather than CBC: on resnet8_32 at 20 % of the KV260's DSPs it proves a design 0.5 % faster optimal in
# 24 s where CBC stopped at a 13 % gap after 41 s; at 100 %, 10 s against 20 s
# Nodes of the MIP run that only looks for a good incumbent (RENS): HEURISTIC_NODES, fewer for larger models so
# that nodes x columns stays within NODE_WORK, at least a tenth: on ResNet-56 (113 processes, 50,757 columns) its
# 1,000 nodes took 93 s
HEURISTIC_NODES = 1_000
NEAR_LANES = 2  # `improve`'s neighbourhood: lanes within this factor of the design's
# `improve`'s root heuristics: the root reduced-cost heuristic and RINS find its designs; without HiGHS's own RENS
# and feasibility jump the root node takes 2.6 s rather than 4.5 on mobilenet_v1_025_96 and finds the optimum,
# 41,600 cycles (41,630 with them), 2.4 s rather than 3.9 on vww_96_int8 (44,521, the optimum 44,511)
NEAR_HEURISTICS = {"mip_heuristic_run_rens": False, "mip_heuristic_run_feasibility_jump": False}
# The proving MIP runs on models of at most this many processes: its branch and bound grows with the chain of
# processes the latency rows tie, from 1-5 s on the 10-17 processes of the MLPerf Tiny ResNet, DS-CNN and
# autoencoder to 12-26 s a proof on MobileNetV1-0.25 (29 processes) and minutes, stopped at its node limit, on
# the Keras MobileNets (77); beyond it the design is `improve`'s, its gap bounded by the LP relaxation
PROVEN_PROCESSES = 20
# run as a script, not `-m ming_py.ilp.highs_worker`: the package import would load the whole ILP into each child;
# -P keeps the script's folder (this package's modules) off the child's import path
HIGHS_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "highs_worker.py")


class SearchStopped(MingError):
    """The search reached its node limit before it found any design."""


@dataclass
class _Run:
    """One MIP (or LP) run."""

    status: str  # "optimal" | "infeasible" | "stopped"
    objective: float | None = None
    bound: float | None = None
    values: dict[str, float] | None = None  # None when it found no solution
    reduced: dict[str, float] = field(default_factory=dict)


@dataclass
class Search:
    """The outcome of the whole search."""

    status: str  # "optimal" | "feasible" | "infeasible" | "unsolved"
    picked: dict[str, int] | None = None
    value: int = 0
    bound: float = 0.0
    then: object = None  # `run_search`'s `then` of `picked`

    def describe(self) -> str:
        if self.status == "optimal":
            return "optimal"
        gap = 100.0 * (self.value - self.bound) / max(self.value, 1)
        return f"feasible (gap {gap:.1f}%)" if gap >= 0.1 else f"feasible (gap {gap:.2g}%)"


def run_search(model: Model, node_limit: int, incumbent: dict[str, int] | None = None,
               then: Callable[[dict[str, int], Abandon], object] | None = None, abandon: Abandon | None = None,
               fallback: Callable[[], dict[str, int] | None] | None = None) -> Search:
    """Branch and bound in deterministic steps, all with HiGHS (one `HighsSession`: the model is handed over once):

    1. the LP relaxation: a lower bound, reduced costs, and infeasibility proven when it has none;
    2. an incumbent from a small node-limited MIP over the candidates the LP solution uses (RENS, Berthold
       2014), or the given one where that is better;
    3. on models of at most PROVEN_PROCESSES processes, reduced-cost fixing (a candidate whose reduced cost lifts
       the LP bound to the incumbent's value cannot be in a better design), candidates too slow for it
       (`Model.too_slow`), and the MIP over what is left with the incumbent as cutoff: when it finds no better
       design, the incumbent is optimal. On larger models, a large neighbourhood search from the incumbent
       (`improve`) whose design stands, its gap bounded by the LP's.
    The objective is integral, so a better design is at least one unit better (cutoff value - 0.5).
    `incumbent`: a design known to fit, the one to beat when the heuristics find none better.
    `then`: what comes next, a function of the design found (and of an `Abandon` that adopts its HiGHS sessions), whose
    result the outcome carries (`Search.then`). It starts on the incumbent while the proving MIP runs (the two on
    two cores) and is kept where the incumbent stands, as it does on most models; else it is abandoned and runs
    again on the better design. So the outcome is the same as running it after, sooner. `abandon`: stops this
    search's HiGHS runs (it is another's `then`). `fallback`: a design found another way, asked for only where the
    proving MIP stopped at its node limit, and kept where it is better than what the MIP found.
    """
    ahead = None
    try:
        with HighsSession(model.problem, abandon) as highs:
            relaxation = highs.run(node_limit, relax=True)
            if relaxation.status == "infeasible":
                return Search("infeasible")
            if relaxation.values is None:  # the LP stopped without a solution (HiGHS gave up on its numbers)
                raise _RelaxationFailed
            lower = relaxation.objective
            unused = [x for x in model.variables() if relaxation.values.get(x.name, 0.0) <= 1e-6]
            picked = model.picked(highs.run(_heuristic_nodes(model), zero=unused).values)
            if incumbent is not None and (picked is None or model.value_of(incumbent) < model.value_of(picked)):
                picked = incumbent
            better = None
            if picked is None:
                unaided = highs.run(node_limit)
            elif len(model.pick) > PROVEN_PROCESSES:
                picked = improve(model, highs, picked)
                value = model.value_of(picked)
            else:
                value = model.value_of(picked)
                hopeless = [x for x in unused if lower + relaxation.reduced.get(x.name, 0.0) > value - 0.5]
                if model.goal == "latency":
                    hopeless = list(dict.fromkeys(hopeless + model.too_slow(value - 1)))
                highs.ask(node_limit, cutoff=value - 0.5, zero=hopeless)
                ahead = _Ahead(then, picked) if then is not None else None
                better = highs.answer()
        if picked is None:  # `then` runs once the session's child has ended
            search = _conclude(model, unaided, None, lower)
        elif better is None:  # not proven: bounded by the relaxation (the objective is integral)
            search = Search("optimal" if value - lower < 1 else "feasible", picked, value, min(lower, value))
        elif better.status == "infeasible":
            search = Search("optimal", picked, value, value)
        else:
            search = _conclude(model, better, (picked, value), lower)
        stopped = picked is None or better is not None  # a MIP stopped at its limit, not a proof left out
        if fallback is not None and search.status in ("feasible", "unsolved") and stopped:
            search = _or_fallback(model, search, fallback(), lower)
        if ahead is not None and search.picked == picked:
            search.then, ahead = ahead.result(), None
            return search
    except _RelaxationFailed:  # nothing proven: the incumbent or the fallback's design, if any
        search = Search("unsolved") if incumbent is None else \
            Search("feasible", incumbent, model.value_of(incumbent), 0.0)
        search = _or_fallback(model, search, fallback() if fallback is not None else None, 0.0)
    finally:
        if ahead is not None:
            ahead.abandon()
    return _followed(search, then)


def _heuristic_nodes(model: Model) -> int:
    return min(HEURISTIC_NODES, max(HEURISTIC_NODES // 10, NODE_WORK // len(model.variables())))


def improve(model: Model, highs: HighsSession, picked: dict[str, int]) -> dict[str, int]:
    """A better design than `picked` where one is near it (large neighbourhood search, Shaw 1998; Pisinger and
    Ropke 2010): every process at once, among its candidates whose lanes are within a factor NEAR_LANES of the
    design's, searched by a MIP at its root node only (HiGHS's root heuristics, NEAR_HEURISTICS) with the design
    as cutoff. The optima of mobilenet_v1_025_96 and vww_96_int8 differ from RENS's designs in 15 processes, each
    by a factor of 2 (resources move across the network): this finds 41,600 cycles (the optimum) and 44,521 (the
    optimum 44,511) in 2.4-2.6 s, where windows of 8 consecutive processes searched in turn with the others kept
    found 41,873 and 46,845 (5 % off) in 5-9 s. A node-limited HiGHS run: deterministic."""
    far = [x for name, xs in model.pick.items() for j, x in enumerate(xs)
           if not _near(model.options[name][j], model.options[name][picked[name]])]
    found = model.picked(highs.run(1, cutoff=model.value_of(picked) - 0.5, zero=far, options=NEAR_HEURISTICS).values)
    return found if found is not None and model.value_of(found) < model.value_of(picked) else picked


def _near(candidate: Choice, design: Choice) -> bool:
    """Whether every lane count of `candidate` is within a factor NEAR_LANES of `design`'s."""
    return all(mine / NEAR_LANES <= lanes <= mine * NEAR_LANES for lanes, mine in
               zip(candidate.lanes_in + candidate.lanes_out, design.lanes_in + design.lanes_out))


class _RelaxationFailed(Exception):
    """The LP relaxation stopped without a solution."""


def _followed(search: Search, then) -> Search:
    """`search` carrying `then` of its design."""
    if then is not None and search.picked is not None:
        search.then = then(search.picked, Abandon())
    return search


class Abandon:
    """Stops the HiGHS sessions of a computation whose result is no longer wanted: their children are killed (each
    session's run then fails) and sessions that start after are killed at once."""

    def __init__(self):
        self._lock = threading.Lock()
        self._children: list[subprocess.Popen] = []
        self.abandoned = False

    def adopt(self, child: subprocess.Popen) -> None:
        with self._lock:
            self._children.append(child)
            if self.abandoned:
                child.kill()

    def __call__(self) -> None:
        with self._lock:
            self.abandoned = True
            for child in self._children:
                child.kill()


class _Ahead:
    """`then(picked)` on a thread of its own, started while the proving MIP runs."""

    def __init__(self, then, picked: dict[str, int]):
        self._abandon = Abandon()
        self._outcome: list = []
        self._thread = threading.Thread(target=self._run, args=(then, picked), daemon=True)
        self._thread.start()

    def _run(self, then, picked) -> None:
        try:
            self._outcome.append((True, then(picked, self._abandon)))
        except BaseException as error:  # given to the caller of `result`
            self._outcome.append((False, error))

    def result(self):
        self._thread.join()
        done, value = self._outcome[0]
        if not done:
            raise value
        return value

    def abandon(self) -> None:
        self._abandon()
        self._thread.join()


def _conclude(model: Model, run: _Run, incumbent: tuple[dict[str, int], int] | None, lower: float) -> Search:
    """The search's outcome from its last MIP run and the incumbent it was given."""
    if run.status == "infeasible" and incumbent is None:
        return Search("infeasible")
    picked = model.picked(run.values)
    best = (picked, model.value_of(picked)) if picked is not None else incumbent
    if best is None:
        return Search("unsolved")
    if run.status == "optimal":
        return Search("optimal", best[0], best[1], best[1])
    bound = max(lower, run.bound if run.bound is not None else lower)
    return Search("feasible", best[0], best[1], min(bound, best[1]))


def _or_fallback(model: Model, search: Search, design: dict[str, int] | None, lower: float) -> Search:
    """`search`, or the `design` found another way where that fits and is better."""
    if design is None or not model.fits(design):
        return search
    value = model.value_of(design)
    if search.picked is not None and value >= search.value:
        return search
    return Search("feasible", design, value, min(max(search.bound, lower), value))


def _exit(status: int | None) -> str:
    if status is None:
        return "it stopped answering"
    return f"killed by signal {-status}" if status < 0 else f"exit status {status}"


class HighsSession:
    """HiGHS on one thread with its fixed seed (deterministic), in a child process (`ilp/highs_worker.py`) that
    reads the model once and then solves it as often as asked, each time with other candidates fixed to 0.
    The child is killed on every way out of the `with` block but the normal one (an interrupted ming stops
    it); the model file lives in a scratch folder (`ilp.scratch`) removed on every way out."""

    def __init__(self, problem: pulp.LpProblem, abandon: Abandon | None = None):
        self.problem = problem
        self.abandon = abandon

    def __enter__(self) -> HighsSession:
        self._scratch = scratch_folder()
        folder = self._scratch.__enter__()
        try:
            model_file = os.path.join(folder, "model.mps")
            _, names, _, _ = self.problem.writeMPS(model_file, rename=1)
            self.renamed = names
            self.original = {renamed: name for name, renamed in names.items()}
            self.errors = os.path.join(folder, "errors.txt")
            with open(self.errors, "w") as errors:
                self.child = subprocess.Popen([sys.executable, "-P", HIGHS_WORKER, model_file], stdin=subprocess.PIPE,
                                              stdout=subprocess.PIPE, stderr=errors, text=True)
            if self.abandon is not None:
                self.abandon.adopt(self.child)
        except BaseException:
            self._scratch.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, kind, error, trace) -> None:
        try:
            if kind is None:
                self.child.stdin.close()  # no more requests: the child ends
                self.child.wait()
        finally:
            if self.child.returncode is None:  # an error, or interrupted while the child ends
                self.child.kill()
                self.child.wait()
            with contextlib.suppress(BrokenPipeError):
                self.child.stdin.close()
            self.child.stdout.close()
            self._scratch.__exit__(kind, error, trace)

    def run(self, node_limit: int, relax: bool = False, cutoff: float | None = None, zero: list = (),
            options: dict | None = None) -> _Run:
        """One run with the `zero` variables fixed to 0 and HiGHS's `options` for this run only."""
        self.ask(node_limit, relax, cutoff, zero, options)
        return self.answer()

    def ask(self, node_limit: int, relax: bool = False, cutoff: float | None = None, zero: list = (),
            options: dict | None = None) -> None:
        """Starts a run (`run`) whose outcome `answer` waits for."""
        request = {"nodes": node_limit, "cutoff": cutoff, "relax": relax,
                   "zero": [self.renamed[x.name] for x in zero], "options": options or {}}
        try:
            self.child.stdin.write(json.dumps(request) + "\n")
            self.child.stdin.flush()
        except BrokenPipeError:
            pass  # the child is gone: `answer` says why

    def answer(self) -> _Run:
        """The outcome of the run `ask` started."""
        line = self.child.stdout.readline()
        if not line:
            try:
                status = self.child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                status = None
            self.child.kill()
            with open(self.errors) as errors:
                told = errors.read().strip().splitlines()
            raise MingError(f"the HiGHS run failed: {told[-1] if told else _exit(status)}")
        result = json.loads(line)
        if result["status"] == "infeasible":
            return _Run("infeasible")
        values = {self.original[k]: v for k, v in result["values"].items()} if "values" in result else None
        reduced = {self.original[k]: v for k, v in result.get("reduced", {}).items()}
        return _Run(result["status"], result["objective"], result["bound"] if result["status"] != "optimal"
                    else result["objective"], values, reduced)


def thrifty(model: Model, picked: dict[str, int]) -> dict[str, int]:
    """Among designs as fast, prefer the cheaper: each process in turn takes the candidate with its
    lanes that leaves the design's fullest resource emptiest (then uses the least share of the budget)
    without slowing the design or breaking the budget. So MACs move to the LUT fabric only where the DSPs
    run out, never to fill the LUTs of a design the DSPs could carry."""
    value = model.value_of(picked)
    for name in model.pick:
        lanes = _lanes_of(model.options[name][picked[name]])
        others = {r: sum(getattr(model.costs[n][j], r) for n, j in picked.items() if n != name) for r in RESOURCES}

        def fullest(cost: Cost) -> float:
            return max((others[r] + getattr(cost, r)) / max(getattr(model.budget, r), 1) for r in RESOURCES)

        ranked = sorted((j for j, choice in enumerate(model.options[name]) if _lanes_of(choice) == lanes),
                        key=lambda j: (fullest(model.costs[name][j]), _share(model.costs[name][j], model.budget), j))
        for j in ranked:
            trial = picked | {name: j}
            if j == picked[name] or (model.fits(trial) and model.value_of(trial) <= value):
                picked = trial
                break
    return picked


def descend(model: Model, picked: dict[str, int]) -> dict[str, int]:
    """A cheaper design to start the least-resource search from: each process in turn takes the candidate with
    its lanes that gives the design the least footprint and keeps it within the budget and the latency limit."""
    held = resource_shares(dict.fromkeys(RESOURCES, 0) | model.reserved, model.whole)
    for name in model.pick:
        lanes = _lanes_of(model.options[name][picked[name]])
        others = {r: held[r] + sum(model.shares[n][j][r] for n, j in picked.items() if n != name) for r in held}

        def key(j: int) -> tuple:
            mine = model.shares[name][j]
            return largest_steps(others[r] + mine[r] for r in others), sum(mine.values()), j

        ranked = sorted((j for j, choice in enumerate(model.options[name]) if _lanes_of(choice) == lanes), key=key)
        for j in ranked:
            if j == picked[name] or model.fits(picked | {name: j}):
                picked = picked | {name: j}
                break
    return picked


def _lanes_of(choice: Choice) -> tuple:
    return choice.lanes_in, choice.lanes_out


def _share(cost: Cost, budget: Budget) -> float:
    return sum(getattr(cost, r) / max(getattr(budget, r), 1) for r in RESOURCES)
