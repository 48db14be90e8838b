"""Token-level simulation of built designs (ming_py.simulate)."""

from __future__ import annotations

import copy
import json
import time

import pytest

import zoo
from ming_py.build import BuildOptions, build
from ming_py.simulate import (SimResult, _Channel, _pack_program, _program, _unpack_program, as_json, simulate,
                              simulate_dir)

NETWORKS = ["tiny_cnn", "lenet", "residual_block", "two_residual_stages", "dw_separable"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """built(name, dsp="20%") -> (out_dir, parsed report.json), each design built once."""
    root = tmp_path_factory.mktemp("sim")
    cache = {}

    def get(name: str, dsp: str = "20%"):
        key = (name, dsp)
        if key not in cache:
            model = zoo.quantized_model(name, root)
            out = root / f"{name}_{dsp.rstrip('%')}"
            build(model, out, BuildOptions(limits={"dsp": dsp}))
            cache[key] = out, json.loads((out / "report.json").read_text())
        return cache[key]

    return get


def _output_channel(report: dict) -> dict:
    return next(c for c in report["channels"] if c["consumer"] == "output")


def _tokens(channel: dict) -> int:
    c, h, w = channel["shape"]
    return c // channel["lanes"] * h * w


def _skip_channel(report: dict) -> str:
    """The channel from a split straight into an `add` (the residual bypass)."""
    kinds = {n["name"]: n["kind"] for n in report["nodes"]}
    return next(c["name"] for c in report["channels"]
                if kinds.get(c["producer"]) == "split" and kinds.get(c["consumer"]) == "add")


# ---------------------------------------------------------------------------
# A hand-computed design
# ---------------------------------------------------------------------------

def _rescale(name: str, inp: str, out: str) -> dict:
    return {"name": name, "kind": "rescale", "inputs": [inp], "outputs": [out], "window": None,
            "loop_bounds": {"pixels": 2}, "schedule": {"unroll": {}, "lanes_in": [], "lanes_out": []}}


HAND_REPORT = {
    "nodes": [_rescale("a", "input_to_a", "a_to_b"), _rescale("b", "a_to_b", "b_to_output")],
    "channels": [
        {"name": "input_to_a", "producer": "input", "consumer": "a", "shape": [4, 1, 2], "lanes": 2, "fifo_depth": 1},
        {"name": "a_to_b", "producer": "a", "consumer": "b", "shape": [4, 1, 2], "lanes": 4, "fifo_depth": 1},
        {"name": "b_to_output", "producer": "b", "consumer": "output", "shape": [4, 1, 2], "lanes": 4, "fifo_depth": 2},
    ],
}


def test_hand_computed_two_processes():
    # input (unpack, 2 lanes): 1 idle cycle then a write per token: tokens at 1, 3, 5 and (FIFO depth 1:
    #   token 3 waits for a's read of token 2 at 13) 14.
    # a: overhead 0-1, reads at 2 and 4 (token 1 written at 3), lookup 1 + 4 = 5 cycles (5-9), write at 10;
    #   overhead 11-12, reads at 13 and 15 (token 3 written at 14), lookup 16-20, write at 21.
    # b: overhead 0-1, read at 11, lookup 12-16, write at 17; overhead 18-19, read at 22, lookup 23-27, write at 28.
    # output (pack, 4 lanes): read at 18, values 18-21; read at 29, values 29-32 -> 33 cycles, first at cycle 18.
    result = simulate(HAND_REPORT)
    assert result.deadlock is None and result.completed
    assert result.cycles == 33
    assert result.first_output_cycles == 19
    assert result.stalls == {"input": {"read": 0, "write": 7}, "a": {"read": 2, "write": 0},
                             "b": {"read": 11, "write": 0}, "output": {"read": 25, "write": 0}}
    assert result.busy == {"input": 8, "a": 20, "b": 18, "output": 8}
    assert result.finish == {"input": 15, "a": 22, "b": 29, "output": 33}
    assert result.fifo_peak == {"input_to_a": 1, "a_to_b": 1, "b_to_output": 1}
    assert result.output_tokens == {"b_to_output": 2}


def test_hand_computed_deeper_fifo_removes_the_stall():
    report = copy.deepcopy(HAND_REPORT)
    report["channels"][0]["fifo_depth"] = 4
    result = simulate(report)
    # token 3 now arrives at 7: a reads it at 14, everything after moves one cycle earlier
    assert result.stalls["input"]["write"] == 0
    assert result.cycles == 32
    assert result.fifo_peak["input_to_a"] == 2


def test_hand_deadlock():
    # a cycle: a (add) needs b's output, b (split) needs a's output; nothing ever reaches the output port
    report = {
        "nodes": [
            {"name": "a", "kind": "add", "inputs": ["input_to_a", "b_to_a"], "outputs": ["a_to_b"],
             "schedule": {"unroll": {}}},
            {"name": "b", "kind": "split", "inputs": ["a_to_b"], "outputs": ["b_to_a", "b_to_output"],
             "schedule": {"unroll": {}}},
        ],
        "channels": [
            {"name": "input_to_a", "producer": "input", "consumer": "a", "shape": [2, 1, 3], "lanes": 2, "fifo_depth": 1},
            {"name": "b_to_a", "producer": "b", "consumer": "a", "shape": [2, 1, 3], "lanes": 2, "fifo_depth": 1},
            {"name": "a_to_b", "producer": "a", "consumer": "b", "shape": [2, 1, 3], "lanes": 2, "fifo_depth": 1},
            {"name": "b_to_output", "producer": "b", "consumer": "output", "shape": [2, 1, 3], "lanes": 2,
             "fifo_depth": 1},
        ],
    }
    # input writes token 0 at 1 and token 1 at 3 (a read token 0 at 2), then from 5 waits for a, which has
    # waited on b_to_a since 3; b waits on a_to_b from 2, the output port from 0: stuck from cycle 5 on
    result = simulate(report)
    assert result.deadlock is not None and not result.completed
    assert sorted(result.deadlock) == sorted([
        "input waits to write to input_to_a (full, 1/1)",
        "a waits to read from b_to_a (empty, 0/1)",
        "b waits to read from a_to_b (empty, 0/1)",
        "output waits to read from b_to_output (empty, 0/1)",
    ])
    assert result.cycles == 5
    assert result.first_output_cycles is None
    assert result.stalls["a"] == {"read": 2, "write": 0}
    assert result.stalls["input"] == {"read": 0, "write": 0}
    assert result.stalls["output"] == {"read": 5, "write": 0}
    data = as_json(result)
    assert json.loads(json.dumps(data)) == data


def test_max_cycles_stops():
    result = simulate(HAND_REPORT, max_cycles=10)
    assert result.timed_out and not result.completed and result.deadlock is None


# ---------------------------------------------------------------------------
# A cycle-by-cycle reference: the batched engine must give the same times
# ---------------------------------------------------------------------------

def _stepped(report: dict) -> dict:
    """Naive simulation, one cycle at a time, of the same per-process programs."""
    channels = {c["name"]: _Channel(c) for c in report["channels"]}
    procs = []
    for node in report["nodes"]:
        procs.append([node["name"], list(_program(node, [channels[c] for c in node["inputs"]],
                                                  [channels[c] for c in node["outputs"]]))])
    for spec in report["channels"]:
        if spec["producer"] == "input":
            procs.insert(0, ["input", list(_unpack_program(channels[spec["name"]]))])
        if spec["consumer"] == "output":
            procs.append(["output", list(_pack_program(channels[spec["name"]]))])
    # expand to unit steps: ("d",) one busy cycle, ("r", ch) / ("w", ch) one token
    steps = {}
    for name, ops in procs:
        unit = []
        for kind, arg, n in ops:
            unit += [("d", None)] * arg if kind == 0 else [("r" if kind == 1 else "w", arg)] * n
        steps[name] = unit
    pos = {name: 0 for name in steps}
    written = {c: 0 for c in channels}
    read = {c: 0 for c in channels}
    peak = {c: 0 for c in channels}
    stalls = {name: {"read": 0, "write": 0} for name in steps}
    out_reads = []
    t = 0
    while any(pos[n] < len(steps[n]) for n in steps):
        moves, blocked = [], []
        for name, unit in steps.items():
            if pos[name] == len(unit):
                continue
            kind, ch = unit[pos[name]]
            if kind == "d":
                moves.append((name, None, None))
            elif kind == "r":
                if written[ch.name] - read[ch.name] > 0:
                    moves.append((name, "r", ch))
                else:
                    blocked.append((name, "read"))
            elif written[ch.name] - read[ch.name] < ch.depth:
                moves.append((name, "w", ch))
            else:
                blocked.append((name, "write"))
        if not moves:  # stuck from this cycle on: the deadlock cycle (stalls count the cycles before it)
            return {"deadlock_cycle": t, "stalls": stalls}
        for name, side in blocked:
            stalls[name][side] += 1
        for name, kind, ch in moves:
            pos[name] += 1
            if kind == "r":
                read[ch.name] += 1
                if name == "output":
                    out_reads.append((t, ch.lanes))
            elif kind == "w":
                written[ch.name] += 1
        for c in channels:
            peak[c] = max(peak[c], written[c] - read[c])
        t += 1
    return {"cycles": max(r + lanes for r, lanes in out_reads), "first": out_reads[0][0] + 1,
            "stalls": stalls, "fifo_peak": peak}


def test_batched_engine_matches_cycle_stepping_by_hand():
    ref = _stepped(HAND_REPORT)
    result = simulate(HAND_REPORT)
    assert (result.cycles, result.first_output_cycles, result.stalls, result.fifo_peak) == \
        (ref["cycles"], ref["first"], ref["stalls"], ref["fifo_peak"])


@pytest.mark.parametrize("name", ["tiny_cnn", "residual_block"])
def test_batched_engine_matches_cycle_stepping(built, name):
    _, report = built(name)
    for depths in ("built", "tight"):
        r = copy.deepcopy(report)
        if depths == "tight":  # depth 1 everywhere but the skip FIFO: lots of blocking
            skip = _skip_channel(r) if name == "residual_block" else None
            for c in r["channels"]:
                if c["name"] != skip:
                    c["fifo_depth"] = 1
        ref = _stepped(r)
        result = simulate(r)
        assert result.deadlock is None
        assert result.cycles == ref["cycles"]
        assert result.first_output_cycles == ref["first"]
        assert result.stalls == ref["stalls"]
        assert result.fifo_peak == ref["fifo_peak"]


def test_deadlock_cycle_matches_cycle_stepping(built):
    _, report = built("residual_block")
    r = copy.deepcopy(report)
    next(c for c in r["channels"] if c["name"] == _skip_channel(r))["fifo_depth"] = 1
    ref = _stepped(r)
    result = simulate(r)
    assert result.deadlock is not None
    assert result.cycles == ref["deadlock_cycle"]
    assert result.stalls == ref["stalls"]


# ---------------------------------------------------------------------------
# Built designs
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", NETWORKS)
def test_zoo_design_completes(built, name):
    out, report = built(name)
    start = time.perf_counter()
    result = simulate_dir(out)
    assert time.perf_counter() - start < 1.0
    assert isinstance(result, SimResult)
    assert result.deadlock is None, result.deadlock
    assert result.completed
    assert result.cycles > result.first_output_cycles > 0
    for channel in report["channels"]:
        assert 0 < result.fifo_peak[channel["name"]] <= channel["fifo_depth"], channel["name"]
    out_channel = _output_channel(report)
    assert result.output_tokens == {out_channel["name"]: _tokens(out_channel)}
    processes = {n["name"] for n in report["nodes"]} | {"input", "output"}
    assert set(result.stalls) == processes == set(result.busy)
    for p in processes:
        assert result.busy[p] > 0
        assert result.busy[p] + result.stalls[p]["read"] + result.stalls[p]["write"] == result.finish[p]
    data = as_json(result)
    assert {"cycles", "first_output_cycles", "stalls", "fifo_peak", "deadlock"} <= set(data)
    assert json.loads(json.dumps(data)) == data


@pytest.mark.parametrize("name", ["tiny_cnn", "residual_block"])
def test_more_parallelism_is_not_slower(built, name):
    slow = simulate(built(name, "5%")[1])
    fast = simulate(built(name, "100%")[1])
    assert slow.completed and fast.completed
    assert fast.cycles <= slow.cycles


def test_small_skip_fifo_deadlocks_and_a_huge_one_completes(built):
    _, report = built("residual_block")
    skip = _skip_channel(report)
    small = copy.deepcopy(report)
    next(c for c in small["channels"] if c["name"] == skip)["fifo_depth"] = 1
    result = simulate(small)
    assert result.deadlock is not None
    assert any(f"waits to write to {skip} (full, 1/1)" in line for line in result.deadlock), result.deadlock
    assert result.first_output_cycles is None
    assert 0 < result.cycles < 1000

    huge = copy.deepcopy(report)
    next(c for c in huge["channels"] if c["name"] == skip)["fifo_depth"] = 10**6
    result = simulate(huge)
    assert result.deadlock is None and result.completed
    assert result.output_tokens[_output_channel(report)["name"]] == _tokens(_output_channel(report))


def test_deeper_fifos_are_not_slower(built):
    _, report = built("two_residual_stages")
    deep = copy.deepcopy(report)
    for c in deep["channels"]:
        c["fifo_depth"] = 10**6
    assert simulate(deep).cycles <= simulate(report).cycles
