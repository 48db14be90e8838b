"""Token-level simulation of built designs (ming_py.simulate)."""

from __future__ import annotations

import copy
import json
import time

import pytest

import zoo
from ming_py.build import BuildOptions, build
from ming_py.simulate import (PIPELINE_DEPTH, SimResult, _Channel, _first_word_token, _pack_program, _program,
                              _unpack_program, as_json, simulate,
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
    # input (unpack, 8 values in one word, 2 lanes): pipeline depth 0-3, then a token per iteration: tokens at
    #   4, 6 (FIFO depth 1: token 0 read at 5), 8 (token 1 read at 7) and 17 (token 2 read at 16).
    # a: overhead 0-1, reads at 5 and 7, lookup 1 + 4 = 5 cycles (8-12), write at 13;
    #   overhead 14-15, reads at 16 and 18, lookup 19-23, write at 24.
    # b: overhead 0-1, read at 14, lookup 15-19, write at 20; overhead 21-22, read at 25, lookup 26-30, write at 31.
    # output (pack, 4 lanes, one word): reads at 21 and 32, the word written in that iteration, pipeline depth
    #   33-36 -> 37 cycles, the first (and only) word also at 37.
    result = simulate(HAND_REPORT)
    assert result.deadlock is None and result.completed
    assert result.cycles == 37
    assert result.first_output_cycles == 37
    assert result.stalls == {"input": {"read": 0, "write": 10}, "a": {"read": 5, "write": 0},
                             "b": {"read": 14, "write": 0}, "output": {"read": 31, "write": 0}}
    assert result.busy == {"input": 8, "a": 20, "b": 18, "output": 6}
    assert result.finish == {"input": 18, "a": 25, "b": 32, "output": 37}
    assert result.fifo_peak == {"input_to_a": 1, "a_to_b": 1, "b_to_output": 1}
    assert result.output_tokens == {"b_to_output": 2}


def test_hand_computed_deeper_fifo_removes_the_stall():
    report = copy.deepcopy(HAND_REPORT)
    report["channels"][0]["fifo_depth"] = 4
    result = simulate(report)
    # the input writes its tokens at 4-7 unhindered: a reads at 5, 6, 15, 16 and everything ends 2 cycles earlier
    assert result.stalls["input"]["write"] == 0
    assert result.cycles == 35
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
    # input (6 values in one word) writes token 0 at 4 (after its pipeline depth) and token 1 at 6 (a read
    # token 0 at 5), then waits for a, which has waited on b_to_a since 6; b waits on a_to_b from 2, the output
    # port from 0: stuck from cycle 7 on
    result = simulate(report)
    assert result.deadlock is not None and not result.completed
    assert sorted(result.deadlock) == sorted([
        "input waits to write to input_to_a (full, 1/1)",
        "a waits to read from b_to_a (empty, 0/1)",
        "b waits to read from a_to_b (empty, 0/1)",
        "output waits to read from b_to_output (empty, 0/1)",
    ])
    assert result.cycles == 7
    assert result.first_output_cycles is None
    assert result.stalls["a"] == {"read": 4, "write": 0}
    assert result.stalls["input"] == {"read": 0, "write": 1}
    assert result.stalls["output"] == {"read": 7, "write": 0}
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
    output_done = None
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
                    out_reads.append((t, ch))
            elif kind == "w":
                written[ch.name] += 1
        for c in channels:
            peak[c] = max(peak[c], written[c] - read[c])
        t += 1
        if pos["output"] == len(steps["output"]) and output_done is None:
            output_done = t
    first_word = out_reads[_first_word_token(out_reads[0][1])][0] + 1 + PIPELINE_DEPTH
    return {"cycles": output_done, "first": first_word,
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
