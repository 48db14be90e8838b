"""The design-space exploration (`ming_py.ilp`) over a small chain built by hand: conv 3x3 -> 1x1 conv ->
max pool. No model, no IREE, no compiler; HiGHS (the ILP solver, not a compiler) runs as a child process.

Checked against docs/design-space.md: the chosen design keeps every resource within the
budget, and its schedule is valid (unroll factors divide their trip counts, a channel's lanes are its
producer's output parallelism and its consumer's input parallelism); a tighter DSP budget never gives a faster
design; a budget without DSPs moves every multiplier into the fabric; a budget nothing fits is refused; the
cost model charges a process the cycles of its loop and the DSPs of its multipliers (one per MAC lane, half
for a pair sharing its input, none in fabric, two per lean requantization lane).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from ming_py import numerics
from ming_py.boards import load_board
from ming_py.dataflow import Channel, Port, Process, StreamGraph, Window
from ming_py.ilp import Budget, Choice, process_cost, solve
from ming_py.ir import AccRequant
from ming_py.process_spec import process_spec, loop_of

pytestmark = pytest.mark.unit

BOARD = "kv260"
C0, C1, C2, H, W = 8, 16, 16, 8, 8
LUT = 8000  # few enough LUTs that fabric multipliers cannot stand in for every DSP
DSP_BUDGETS = (1248, 60, 20, 8)  # the whole KV260, then tighter and tighter


def requant(channels: int, seed: int) -> AccRequant:
    rng = np.random.default_rng(seed)
    return AccRequant(bias=rng.integers(-500, 500, channels).astype(np.int32), x_scale=np.float32(0.05),
                      w_scale=rng.uniform(0.005, 0.02, channels).astype(np.float32), y_scale=np.float32(0.1),
                      zero_point=-3, channel_dims=(1,))


def chain(c0: int = C0, c1: int = C1, c2: int = C2, h: int = H, w: int = W, seed: int = 7) -> StreamGraph:
    """input (c0 x h x w) -> conv 3x3 pad 1 (c1) -> 1x1 conv (c2) -> max pool 2x2 stride 2 -> output (c2 x h/2 x w/2);
    by default 8x8x8 -> 16 -> 16 -> 16x4x4."""
    rng = np.random.default_rng(seed)
    channels = {"x": Channel("x", "input", "conv", c0, h, w), "a": Channel("a", "conv", "pw", c1, h, w),
                "b": Channel("b", "pw", "pool", c2, h, w), "y": Channel("y", "pool", "output", c2, h // 2, w // 2)}
    processes = [
        Process("conv", "conv", "conv", ("x",), ("a",), Window(c0, h, w, c1, h, w, (3, 3), pads=(1, 1, 1, 1)),
                weights=rng.integers(-127, 128, (c1, c0, 9)).astype(np.int8), epilogue=requant(c1, 1)),
        Process("pw", "pointwise", "pw", ("a",), ("b",), Window(c1, h, w, c2, h, w),
                weights=rng.integers(-127, 128, (c2, c1)).astype(np.int8), epilogue=requant(c2, 2)),
        Process("pool", "maxpool", "pool", ("b",), ("y",), Window(c2, h, w, c2, h // 2, w // 2, (2, 2), (2, 2))),
    ]
    return StreamGraph("chain", processes, channels, Port("x", (1, c0, h, w), "x", (1, c0, h, w), 0.05, 0),
                       (Port("y", (1, c2, h // 2, w // 2), "y", (1, c2, h // 2, w // 2), 0.1, -3),))


# trip counts of each process's unrollable loops, from its geometry (docs/design-space.md: conv oc, ic, k;
# 1x1 conv oc, ic; pooling c, k)
TRIPS = {"conv": {"oc": C1, "ic": C0, "k": 9}, "pw": {"oc": C2, "ic": C1}, "pool": {"c": C2, "k": 4}}
MACS = H * W * C1 * C0 * 9 + H * W * C2 * C1  # multiply-accumulates of one image


def budget(dsp: int) -> Budget:
    board = load_board(BOARD)
    return Budget(dsp=dsp, bram18k=board.bram18k, uram=board.uram, lut=LUT)


@functools.lru_cache(maxsize=None)
def solution(dsp: int):
    return solve(chain(), load_board(BOARD), budget(dsp))


@pytest.mark.parametrize("dsp", DSP_BUDGETS)
def test_the_design_keeps_every_resource_within_the_budget(dsp):
    result = solution(dsp)
    limit = budget(dsp)
    for resource in ("dsp", "bram18k", "uram", "lut"):
        used = sum(getattr(cost, resource) for cost in result.costs.values())
        assert used <= getattr(limit, resource), resource
        assert result.totals[resource] == used, resource


@pytest.mark.parametrize("dsp", DSP_BUDGETS)
def test_the_schedule_is_valid_for_the_graph(dsp):
    graph, result = chain(), solution(dsp)
    schedule = result.schedule
    assert set(schedule.processes) == {p.name for p in graph.processes}
    for p in graph.processes:
        unroll = dict(schedule.of(p.name).unroll)
        assert set(unroll) <= set(TRIPS[p.name])
        for loop, factor in unroll.items():
            assert factor >= 1 and TRIPS[p.name][loop] % factor == 0, (p.name, loop, factor)
        choice = result.choices[p.name]
        assert dict(choice.unroll) == unroll
        # a channel's lanes are what its producer writes and its consumer reads
        assert list(choice.lanes_in) == [schedule.lanes_of(c) for c in p.inputs]
        assert list(choice.lanes_out) == [schedule.lanes_of(c) for c in p.outputs]
        # and the loop of that schedule exists (loop_of checks the lane ties)
        spec = process_spec(graph, p, tuple(unroll.items()), choice.lanes_in, choice.lanes_out)
        assert loop_of(spec).iterations > 0
    for name, channel in graph.channels.items():
        assert channel.channels % schedule.lanes_of(name) == 0


def test_a_tighter_dsp_budget_never_gives_fewer_cycles():
    results = [solution(dsp) for dsp in DSP_BUDGETS]
    assert all(r.status == "optimal" for r in results), [r.status for r in results]
    cycles = [r.totals["cycles"] for r in results]
    assert all(a <= b for a, b in zip(cycles, cycles[1:])), cycles
    # the budgets do bite: the design at 8 DSPs is slower than the one at the whole board's
    assert cycles[-1] > cycles[0]
    dsps = [r.totals["dsp"] for r in results]
    assert all(used <= limit for used, limit in zip(dsps, DSP_BUDGETS))


@pytest.mark.parametrize("dsp", DSP_BUDGETS)
def test_the_latency_estimate_is_bounded_below_by_the_slowest_process_and_the_roofline(dsp):
    result = solution(dsp)
    totals = result.totals
    assert totals["macs"] == MACS
    slowest = max(cost.cycles for cost in result.costs.values())
    assert totals["throughput_cycles"] == slowest
    assert totals["cycles"] >= slowest
    assert totals["cycles"] >= totals["roofline_cycles"] >= 1
    assert totals["latency_us"] == pytest.approx(totals["cycles"] / load_board(BOARD).clock_mhz, abs=1e-3)


def test_a_budget_without_dsps_moves_every_multiplier_into_the_fabric():
    board = load_board(BOARD)
    result = solve(chain(), board, Budget(dsp=0, bram18k=board.bram18k, uram=board.uram, lut=board.lut * 7 // 10))
    assert result.totals["dsp"] == 0
    for name in ("conv", "pw"):
        assert result.schedule.of(name).multipliers == "fabric"
        assert result.costs[name].dsp == 0


def test_a_budget_nothing_fits_is_refused_with_the_smallest_design():
    with pytest.raises(Exception, match="no design fits"):
        solve(chain(), load_board(BOARD), Budget(dsp=0, bram18k=0, uram=0, lut=100))


def test_a_process_between_two_processes_costs_the_cycles_and_fill_of_its_loop():
    """docs/design-space.md: cycles = iterations + pipeline depth, fill = cycles to the first output token; the
    AXI adapters are charged only to the processes at the ports, so the middle process's cost is its loop's."""
    graph = chain()
    pw = graph.process("pw")
    for oc, ic in ((1, 1), (4, 2), (16, 16)):
        choice = Choice((("oc", oc), ("ic", ic)), (ic,), (oc,))
        loop = loop_of(process_spec(graph, pw, choice.unroll, choice.lanes_in, choice.lanes_out))
        cost = process_cost(graph, pw, choice)
        assert (cost.cycles, cost.fill) == (loop.cycles, loop.fill)
        assert len(cost.progress) == 10 and all(a <= b for a, b in zip(cost.progress, cost.progress[1:]))
        assert cost.progress[-1] <= cost.cycles


@pytest.mark.parametrize("multipliers, dsp_per_mac", [("dsp", 1.0), ("dsp_pair", 0.5), ("fabric", 0.0)])
def test_dsps_of_a_mac_process_by_multiplier(multipliers, dsp_per_mac):
    """docs/design-space.md: one DSP48E2 per MAC lane, half for two lanes multiplying the same input, none in
    fabric; two per lean requantization lane (none when the multipliers are in fabric: its product goes there
    too)."""
    graph = chain()
    conv = graph.process("conv")
    assert numerics.lean_channels(conv.epilogue.multipliers) is not None  # the lean datapath
    unroll = (("oc", 4), ("ic", 2), ("k", 3))
    choice = Choice(unroll, (2,), (4,), multipliers=multipliers)
    macs = math.prod(f for _, f in unroll)
    requant_dsp = 0 if multipliers == "fabric" else 2 * 4
    cost = process_cost(graph, conv, choice)
    assert cost.dsp == math.ceil(dsp_per_mac * macs) + requant_dsp
    # fabric multipliers cost LUTs instead
    if multipliers == "fabric":
        assert cost.lut > process_cost(graph, conv, Choice(unroll, (2,), (4,), multipliers="dsp")).lut


def test_more_mac_lanes_never_take_more_cycles():
    graph = chain()
    conv = graph.process("conv")
    cycles = [process_cost(graph, conv, Choice((("oc", oc), ("ic", ic), ("k", k)), (ic,), (oc,))).cycles
              for oc, ic, k in ((1, 1, 1), (2, 1, 1), (2, 2, 3), (4, 8, 9), (16, 8, 9))]
    assert all(a >= b for a, b in zip(cycles, cycles[1:])), cycles
    assert cycles[0] > cycles[-1]


def test_candidates_kept_across_solves_equal_the_ones_computed_afresh():
    """An exploration's solves (targets retried, FIFO memory reserved anew) share the candidates and costs of the
    first: a budget that offers the weights the same memories gives the same ones, computed once."""
    from ming_py.ilp.candidates import candidates_and_costs
    from ming_py.ilp.pins import Pins

    graph, known = chain(), {}
    first = candidates_and_costs(graph, Pins(), budget(400), None, known)
    again = candidates_and_costs(graph, Pins(), budget(40), None, known)
    assert again is first and len(known) == 1
    assert candidates_and_costs(graph, Pins(), budget(40), None) == first


def test_the_pareto_filter_keeps_exactly_the_candidates_no_other_beats_or_ties_first():
    """Of each lanes' candidates, those no other one beats or ties on every cost; of exact ties the first: the
    definition, pair by pair, over random costs with many ties and dominations, in more than one block of rows."""
    from ming_py.ilp.candidates import _PARETO_BLOCK, _pareto
    from ming_py.ilp.cost import Cost

    rng = np.random.default_rng(7)
    count = 2 * _PARETO_BLOCK + 17
    choices = [Choice((("k", 1),), (int(rng.integers(1, 3)),), (1,)) for _ in range(count)]
    pool = rng.integers(0, 3, (24, 8))  # (cycles, fill, dsp, bram18k, uram, lut, two progress points): many ties
    costs = [Cost(*map(int, pool[k][:6]), ff=i, progress=tuple(map(int, pool[k][6:])))
             for i, k in enumerate(rng.integers(0, len(pool), count))]

    def vector(cost):
        return cost.vector + (cost.dsp, cost.bram18k, cost.uram, cost.lut)

    def beaten(i):
        return any(j != i and choices[j].lanes_in == choices[i].lanes_in and
                   all(a <= b for a, b in zip(vector(costs[j]), vector(costs[i]))) and
                   (vector(costs[j]) != vector(costs[i]) or j < i) for j in range(count))

    expected = [i for i in range(count) if not beaten(i)]
    kept_choices, kept_costs = _pareto(choices, costs)
    assert kept_costs == [costs[i] for i in expected] and kept_choices == [choices[i] for i in expected]
    assert 1 < len(expected) < count
