"""The default design (`--objective frugal`): the least resources within FRUGAL_SLACK (10 %) of the fastest
design's latency, checked by brute force over every design of a small chain (conv 3x3 -> 1x1 conv -> max pool).

Checked against docs/design-space.md ("Which design the ILP picks"): the fastest design (`--objective latency`) is the
least latency of every design in the candidate space; the default design's latency is within 10 % of it; no
design within 10 % has a smaller footprint (its largest share of the budget over DSP/BRAM18K/URAM/LUT, FIFOs
included, in steps of 0.1 %; then the sum of the shares); a latency target gets the least footprint among the
designs meeting it. The designs are enumerated from `candidates` (every valid schedule of a process) and timed
by `estimate`, the latency model the ILP's constraints encode. No model, no IREE, no compiler.
"""

from __future__ import annotations

import functools
import itertools
import math

import pytest

from ming_py.boards import load_board
from ming_py.dataflow import StreamGraph
from ming_py.ilp import Budget, candidates, estimate, process_cost, solve
from ming_py.ilp.footprint import Footprint, footprint
from ming_py.ilp.objectives import FRUGAL_SLACK, RULES, Targets
from test_unit_dse import chain as unit_dse_chain

pytestmark = pytest.mark.unit

C0, C1, C2, H, W = 4, 8, 8, 8, 8
RESERVED = {"bram18k": 2, "lut": 300}  # FIFO memory set aside before the ILP, as `explore` does
# budgets of few DSPs and few LUTs, more of both, the whole board's DSPs: the first two have designs within
# the slack with a smaller sum of shares but a larger largest share than the least footprint
BUDGETS = {"dsp-poor": Budget(dsp=24, bram18k=288, uram=64, lut=12000),
           "balanced": Budget(dsp=60, bram18k=288, uram=64, lut=20000),
           "dsp-rich": Budget(dsp=1248, bram18k=288, uram=64, lut=12000)}


@functools.lru_cache(maxsize=None)
def chain() -> StreamGraph:
    """input (4x8x8) -> conv 3x3 pad 1 (8) -> 1x1 conv (8) -> max pool 2x2 stride 2 -> output (8x4x4)."""
    return unit_dse_chain(C0, C1, C2, H, W, seed=11)


@functools.lru_cache(maxsize=None)
def every_design(budget_name: str) -> list[tuple[int, Footprint]]:
    """(latency, footprint) of every design of the chain that fits the budget beside the reserved FIFOs: one
    candidate per process, each channel's lanes its producer's output and its consumer's input parallelism."""
    graph, budget = chain(), BUDGETS[budget_name]
    options = {p.name: [(c, process_cost(graph, p, c)) for c in candidates(graph, p)] for p in graph.processes}
    designs = []
    for picks in itertools.product(*options.values()):
        chosen = dict(zip(options, picks))
        if any(chosen[ch.consumer][0].lanes_in[0] != chosen[ch.producer][0].lanes_out[0]
               for ch in graph.channels.values() if ch.producer in chosen and ch.consumer in chosen):
            continue
        costs = {name: cost for name, (_, cost) in chosen.items()}
        if any(sum(getattr(c, r) for c in costs.values()) + RESERVED.get(r, 0) > getattr(budget, r)
               for r in ("dsp", "bram18k", "uram", "lut")):
            continue
        latency = estimate(graph, costs, {name: choice for name, (choice, _) in chosen.items()})[1]
        designs.append((latency, footprint(costs.values(), budget, RESERVED)))
    return designs


@functools.lru_cache(maxsize=None)
def solved(budget_name: str, objective: str = "frugal", latency_us: float | None = None):
    targets = Targets(latency_us=latency_us) if latency_us is not None else None
    return solve(chain(), load_board("kv260"), BUDGETS[budget_name], objective, reserved=RESERVED, targets=targets)


def footprint_of(solution, budget_name: str) -> Footprint:
    return footprint(solution.costs.values(), BUDGETS[budget_name], RESERVED)


@pytest.mark.parametrize("budget_name", BUDGETS)
def test_the_latency_objective_is_the_fastest_design(budget_name):
    fastest = min(latency for latency, _ in every_design(budget_name))
    result = solved(budget_name, "latency")
    assert result.status == "optimal"
    assert result.totals["cycles"] == fastest
    assert result.totals["solver"]["rule"] == RULES["latency"]


@pytest.mark.parametrize("budget_name", BUDGETS)
def test_the_default_is_within_the_slack_of_the_fastest(budget_name):
    fastest = min(latency for latency, _ in every_design(budget_name))
    limit = math.floor(fastest * (1 + FRUGAL_SLACK))
    result = solved(budget_name)
    assert FRUGAL_SLACK == 0.10
    assert result.totals["cycles"] <= limit
    solver = result.totals["solver"]
    assert solver["fastest"]["cycles"] == fastest and solver["latency_limit_cycles"] == limit
    assert solver["fastest"]["latency_us"] == round(fastest / load_board("kv260").clock_mhz, 3)
    assert "within 10 % of the fastest design's latency" in solver["rule"]
    assert f"({fastest:,} cycles, optimal): at most {limit:,} cycles" in solver["rule"]


@pytest.mark.parametrize("budget_name", BUDGETS)
def test_no_design_within_the_slack_has_a_smaller_footprint(budget_name):
    fastest = min(latency for latency, _ in every_design(budget_name))
    limit = math.floor(fastest * (1 + FRUGAL_SLACK))
    least = min(fp for latency, fp in every_design(budget_name) if latency <= limit)
    result = solved(budget_name)
    assert result.status == "optimal"
    assert footprint_of(result, budget_name) == least
    assert result.totals["solver"]["footprint"] == least.report()
    # the rule bites: the default design is smaller than the fastest one, and slower
    fastest_design = solved(budget_name, "latency")
    assert footprint_of(fastest_design, budget_name) > least
    assert result.totals["cycles"] > fastest_design.totals["cycles"]


@pytest.mark.parametrize("budget_name", ["dsp-poor", "balanced"])
def test_the_footprint_ranks_the_largest_share_first(budget_name):
    """Among the designs within the slack, some with a smaller sum of shares have a larger largest share: the
    order the default uses is not the sum alone, and the chosen design has the least largest share."""
    fastest = min(latency for latency, _ in every_design(budget_name))
    near = [fp for latency, fp in every_design(budget_name) if latency <= math.floor(fastest * (1 + FRUGAL_SLACK))]
    chosen = footprint_of(solved(budget_name), budget_name)
    assert chosen.largest == min(fp.largest for fp in near)
    assert any(fp.total < chosen.total for fp in near)


def test_a_latency_target_gets_the_least_footprint_meeting_it():
    board = load_board("kv260")
    fastest = min(latency for latency, _ in every_design("dsp-poor"))
    target_us = 1.5 * fastest / board.clock_mhz
    least = min(fp for latency, fp in every_design("dsp-poor") if latency <= math.floor(target_us * board.clock_mhz))
    result = solved("dsp-poor", latency_us=target_us)
    assert result.totals["cycles"] <= target_us * board.clock_mhz
    assert footprint_of(result, "dsp-poor") == least
    assert result.totals["solver"]["rule"].startswith("the least resources (the least largest share")


def test_the_default_design_is_the_same_on_every_run():
    first = solved("dsp-poor", "latency")  # the run the tests above share (solve's default objective), and a fresh one
    again = solve(chain(), load_board("kv260"), BUDGETS["dsp-poor"], reserved=RESERVED)
    assert first.choices == again.choices and first.totals == again.totals
