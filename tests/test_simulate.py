"""Cycle-level simulation of built designs (ming_py.simulate): the loops of ming_py.process_spec with blocking FIFOs."""

from __future__ import annotations

import copy
import json
import random
import time
from bisect import bisect_left, bisect_right

import numpy as np
import pytest

import zoo
from ming_py.build import BuildOptions, build
from ming_py.adapters import AXIS_VALUES_PER_WORD, PIPELINE_DEPTH, pack_adapter, pack_loop, unpack_adapter, unpack_loop
from ming_py.dataflow import Channel, Port, Process, Schedule, StreamGraph, Window
from ming_py.process_spec import loop_of, schedule_spec
from ming_py.simulate import SimResult, as_json, process_loop, simulate, simulate_dir, simulate_schedule
from test_unit_dse import requant

NETWORKS = ["tiny_cnn", "lenet", "residual_block", "two_residual_stages", "dw_separable"]
GENEROUS = 10**6


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


def _split_outputs(report: dict) -> set[str]:
    """The channels out of a split: the heads of branches that meet again."""
    kinds = {n["name"]: n["kind"] for n in report["nodes"]}
    return {c["name"] for c in report["channels"] if kinds.get(c["producer"]) == "split"}


def _with_depths(report: dict, depth: int, **others: int) -> dict:
    """The report with every FIFO `depth` deep but the channels named in `others`."""
    result = copy.deepcopy(report)
    for c in result["channels"]:
        c["fifo_depth"] = others.get(c["name"], depth)
    return result


def _loops(report: dict) -> dict:
    """Every loop of the design by process name, the ports' adapters included."""
    specs = {c["name"]: c for c in report["channels"]}
    loops = {n["name"]: process_loop(n, specs) for n in report["nodes"]}
    for c in report["channels"]:
        values = _tokens(c) * c["lanes"]
        if c["producer"] == "input":
            loops["input"] = unpack_loop(values, c["lanes"])
        if c["consumer"] == "output":
            loops["output"] = pack_loop(values, c["lanes"])
    return loops


# ---------------------------------------------------------------------------
# Hand-computed designs
# ---------------------------------------------------------------------------

def _rescale(name: str, inp: str, out: str) -> dict:
    return {"name": name, "kind": "rescale", "inputs": [inp], "outputs": [out], "window": None,
            "schedule": {"unroll": {}}}


def _channel(name: str, producer: str, consumer: str, depth: int, shape=(4, 1, 2), lanes: int = 2) -> dict:
    return {"name": name, "producer": producer, "consumer": consumer, "shape": list(shape), "lanes": lanes,
            "fifo_depth": depth}


# input -> a -> b -> output, 2 pixels of 4 values in tokens of 2 lanes: 4 tokens on every channel.
# input (unpack_axis, depth 4): one word of 8 values in iteration 0, a token in each of iterations 0-3.
# a, b (rescale, depth 2): one iteration per token, reading it and writing its result.
# output (pack_axis, depth 4): reads a token in each of iterations 0-3, its one word is complete in the last.
HAND_REPORT = {
    "nodes": [_rescale("a", "input_to_a", "a_to_b"), _rescale("b", "a_to_b", "b_to_output")],
    "channels": [_channel("input_to_a", "input", "a", 1), _channel("a_to_b", "a", "b", 1),
                 _channel("b_to_output", "b", "output", 2)],
}


@pytest.mark.unit
def test_hand_computed_chain_with_fifos_of_one_token():
    # input: writes token 0 in 0 + 4 = 4; token 1 needs a's read of token 0 (cycle 5) before it: issued in 2
    #   instead of 1, written in 6; likewise tokens 2, 3 in 8, 10 (issues 4, 6): finish 6 + 1 + 4 = 11.
    # a: reads token 0 in 5 (pushed from 0), writes it in 7; reads 1 in 7 (issue 6 pushed by 1), writes 9;
    #   reads 2 in 9, writes 11; reads 3 in 11, writes 13: read stalls 5 + 1 + 1 + 1, finish 11 + 1 + 2 = 14.
    #   Its writes never wait: b reads token k - 1 in 8, 10, 12 (issues pushed by its reads), before them.
    # b: reads in 8, 10, 12, 14, writes in 10, 12, 14, 16: read stalls 8 + 1 + 1 + 1, finish 17.
    # output: reads in 11, 13, 15, 17: read stalls 11 + 1 + 1 + 1; its word leaves in 17 + 4, 22 cycles.
    result = simulate(HAND_REPORT)
    assert result.deadlock is None and result.completed
    assert result.cycles == 22
    assert result.first_output_cycles == 22
    assert result.stalls == {"input": {"read": 0, "write": 3}, "a": {"read": 8, "write": 0},
                             "b": {"read": 11, "write": 0}, "output": {"read": 14, "write": 0}}
    assert result.finish == {"input": 11, "a": 14, "b": 17, "output": 22}
    assert result.busy == {"input": 8, "a": 6, "b": 6, "output": 8}  # iterations + depth of each loop
    assert result.fifo_peak == {"input_to_a": 1, "a_to_b": 1, "b_to_output": 1}
    assert result.fifo_need == {"input_to_a": 1, "a_to_b": 1, "b_to_output": 1}
    assert result.output_tokens == {"b_to_output": 4}


@pytest.mark.unit
def test_hand_computed_chain_with_deep_fifos():
    # every process now moves a token per cycle once its first one is there:
    # input writes in 4-7 (finish 8); a reads in 5-8 and writes in 7-10 (finish 11); b reads in 8-11 and
    # writes in 10-13 (finish 14); output reads in 11-14, its word leaves in 14 + 4: 19 cycles
    result = simulate(_with_depths(HAND_REPORT, 4))
    assert result.cycles == result.first_output_cycles == 19
    assert result.stalls == {"input": {"read": 0, "write": 0}, "a": {"read": 5, "write": 0},
                             "b": {"read": 8, "write": 0}, "output": {"read": 11, "write": 0}}
    assert result.finish == {"input": 8, "a": 11, "b": 14, "output": 19}
    # a token is read the cycle after it was written: one in each FIFO at a time, but the next one is written
    # in the cycle that read happens, before the slot it frees is free again
    assert result.fifo_peak == {"input_to_a": 1, "a_to_b": 1, "b_to_output": 1}
    assert result.fifo_need == {"input_to_a": 2, "a_to_b": 2, "b_to_output": 2}


@pytest.mark.unit
def test_a_write_waits_for_its_slot_depth_cycles_after_its_issue():
    # b (rescale, depth 2) writes into a FIFO of one token that `output` reads late: output reads token k in
    # the cycle after its write at the earliest, so b's write of token k + 1 waits for that read
    report = _with_depths(HAND_REPORT, 4, b_to_output=1)
    result = simulate(report)
    # b: writes 0 in 10 (issue 8); write 1 needs output's read of 0 (11) before it: written in 12, issue 10
    #   instead of 9 (read of a's token 1, written in 8, happens in 9 before the push); likewise writes in 14, 16
    assert result.stalls["b"] == {"read": 8, "write": 3}
    assert result.finish["b"] == 17
    assert result.cycles == 22


@pytest.mark.unit
def test_hand_deadlock():
    # a cycle: a (add) needs b's output, b (split) needs a's output; nothing ever reaches the output port
    report = {
        "nodes": [
            {"name": "a", "kind": "add", "inputs": ["input_to_a", "b_to_a"], "outputs": ["a_to_b"],
             "schedule": {"unroll": {}}},
            {"name": "b", "kind": "split", "inputs": ["a_to_b"], "outputs": ["b_to_a", "b_to_output"],
             "schedule": {"unroll": {}}},
        ],
        "channels": [_channel(name, producer, consumer, 1, shape=(2, 1, 3))
                     for name, producer, consumer in [("input_to_a", "input", "a"), ("b_to_a", "b", "a"),
                                                      ("a_to_b", "a", "b"), ("b_to_output", "b", "output")]],
    }
    # input writes token 0 in 4; a reads it in 5 (pushed from 0) and waits for b_to_a; input's token 1 then
    # waits for that read: issued in 2, written in 6, and token 2 waits for a read that never comes (issue 3).
    # b and the output port wait from cycle 0. Stuck from cycle 5 (a's clock) on.
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
    assert result.stalls == {"input": {"read": 0, "write": 1 + 2}, "a": {"read": 5, "write": 0},
                             "b": {"read": 5, "write": 0}, "output": {"read": 5, "write": 0}}
    assert result.finish == {}
    data = as_json(result)
    assert json.loads(json.dumps(data)) == data


@pytest.mark.unit
def test_max_cycles_stops():
    result = simulate(HAND_REPORT, max_cycles=10)
    assert result.timed_out and not result.completed and result.deadlock is None
    assert result.cycles == 10


@pytest.mark.unit
def test_lanes_that_do_not_match_the_unroll_factors_are_refused():
    report = copy.deepcopy(HAND_REPORT)
    report["channels"][1]["lanes"] = 4
    with pytest.raises(ValueError, match="process a: rescale: lanes"):
        simulate(report)


def _unpack_closed_form(values: int, lanes: int) -> tuple[int, int]:
    """(cycles, fill) of unpack_axis: max(words, tokens) iterations; a token leaves once its L values are in."""
    words, tokens = -(-values // AXIS_VALUES_PER_WORD), values // lanes
    return max(words, tokens) + PIPELINE_DEPTH, -(-lanes // AXIS_VALUES_PER_WORD) + PIPELINE_DEPTH


def _pack_closed_form(values: int, lanes: int) -> int:
    """Cycles of pack_axis: max(words, tokens) iterations, one more when the final token completes two words."""
    words, tokens = -(-values // AXIS_VALUES_PER_WORD), values // lanes
    completed_by_last = words - (values - lanes) // AXIS_VALUES_PER_WORD
    return max(words, tokens + max(completed_by_last - 1, 0)) + PIPELINE_DEPTH


@pytest.mark.unit
@pytest.mark.parametrize("lanes", [1, 2, 3, 5, 8, 12, 16, 24])
def test_adapters_charged_from_their_loops_take_the_closed_form_cycles(lanes):
    for tokens in (1, 2, 3, 7, 40):
        values = lanes * tokens
        unpack, charged = unpack_loop(values, lanes), unpack_adapter(values, lanes)
        assert (charged.cycles, charged.fill) == (unpack.cycles, unpack.fill) == _unpack_closed_form(values, lanes)
        pack, charged = pack_loop(values, lanes), pack_adapter(values, lanes)
        reads = [i for i, reads in enumerate(_iteration_events(pack)) if reads]
        assert charged.cycles == pack.cycles == _pack_closed_form(values, lanes)
        assert charged.drain == pack.iterations - reads[-1] + PIPELINE_DEPTH


# ---------------------------------------------------------------------------
# References: every process stepped cycle by cycle, and the least solution of the inequalities
# ---------------------------------------------------------------------------

def _iteration_events(loop) -> list[list[tuple[bool, int]]]:
    """Every iteration of the loop with its token moves in order: (is_write, input or output index), reads
    first; a write `loop.write_delay` iterations after its place (shared requantizers), into the next
    positions and the iterations after the last."""
    iterations = [[] for _ in range(loop.iterations)]
    done = 0
    for repeat, position in loop.runs:
        for _ in range(repeat):
            for offset in range(position.iterations):
                iterations[done + offset] += [(False, i) for i, a in enumerate(position.reads) if offset in a.offsets()]
                iterations[done + offset + loop.write_delay] += [(True, o) for o, a in enumerate(position.writes)
                                                                 if offset in a.offsets()]
            done += position.iterations
    return [sorted(events) for events in iterations]


def _expanded(report: dict) -> dict:
    """name -> (pipeline depth, iterations as lists of (is_write, channel name)), ports included."""
    ends = {n["name"]: (n["inputs"], n["outputs"]) for n in report["nodes"]}
    for c in report["channels"]:
        if c["producer"] == "input":
            ends["input"] = ([], [c["name"]])
        if c["consumer"] == "output":
            ends["output"] = ([c["name"]], [])
    expanded = {}
    for name, loop in _loops(report).items():
        ins, outs = ends[name]
        iterations = [[(write, (outs if write else ins)[i]) for write, i in it] for it in _iteration_events(loop)]
        expanded[name] = (loop.depth, iterations)
    return expanded


def _stepped(report: dict) -> dict:
    """Every process steps its own clock one cycle at a time through every iteration of its loop: in each
    cycle it takes its next token move if the FIFO's occupancy allows it (a read in the issue cycle, a
    write `depth` cycles later), or stalls. A write's check looks ahead of the issue, so no single clock can
    step all processes: each waits, and lets the others go on, while the token it reads has not been
    written or the read that frees its write's slot has not happened."""
    processes = _expanded(report)
    fifo_depth = {c["name"]: c["fifo_depth"] for c in report["channels"]}
    written = {c: [] for c in fifo_depth}
    read = {c: [] for c in fifo_depth}
    state = {name: {"iteration": 0, "event": 0, "clock": 0, "read": 0, "write": 0, "finish": None, "waits": None}
             for name in processes}

    def step(name: str) -> bool:
        depth, iterations = processes[name]
        s = state[name]
        if s["iteration"] == len(iterations):
            s["finish"] = s["clock"] + depth
            return False
        events = iterations[s["iteration"]]
        if s["event"] == len(events):
            s["iteration"], s["event"], s["clock"] = s["iteration"] + 1, 0, s["clock"] + 1
            return True
        write, ch = events[s["event"]]
        k = len(written[ch]) if write else len(read[ch])
        if (write and k - fifo_depth[ch] >= len(read[ch])) or (not write and k >= len(written[ch])):
            s["waits"] = "write" if write else "read"
            return False
        if write:
            cycle = s["clock"] + depth
            free = k - bisect_left(read[ch], cycle) < fifo_depth[ch]
        else:
            cycle = s["clock"]
            free = bisect_left(written[ch], cycle) - k > 0
        if free:
            (written if write else read)[ch].append(cycle)
            s["event"] += 1
        else:
            s["clock"] += 1
            s["write" if write else "read"] += 1
        return True

    moved = True
    while moved:
        moved = False
        for name in processes:
            while step(name):
                moved = True
    end = max(s["clock"] if s["finish"] is None else s["finish"] for s in state.values())
    for s in state.values():
        if s["finish"] is None:
            s[s["waits"]] += end - s["clock"]
    out = _output_channel(report)
    first_token = -(-min(8, _tokens(out) * out["lanes"]) // out["lanes"]) - 1
    reads_out = read[out["name"]]
    return {
        "deadlocked": any(s["finish"] is None for s in state.values()),
        "cycles": state["output"]["finish"] or end,
        "first": reads_out[first_token] + 1 + PIPELINE_DEPTH if len(reads_out) > first_token else None,
        "stalls": {name: {"read": s["read"], "write": s["write"]} for name, s in state.items()},
        "finish": {name: s["finish"] for name, s in state.items() if s["finish"] is not None},
        "fifo_peak": {c: max((bisect_right(written[c], t) - bisect_right(read[c], t) for t in range(end + 1)),
                             default=0) for c in fifo_depth},
    }


def _least_finish(report: dict) -> dict | None:
    """Each process's finish in the least solution of the inequalities of ming_py.simulate, by iterating them
    from below over all events at once (no event waits for another); None when they have no solution (the
    times then grow without bound)."""
    processes = _expanded(report)
    fifo_depth = {c["name"]: c["fifo_depth"] for c in report["channels"]}
    unknown = -(10**12)
    written = {c["name"]: [unknown] * _tokens(c) for c in report["channels"]}
    read = {c["name"]: [unknown] * _tokens(c) for c in report["channels"]}
    # Bellman-Ford: a longest path visits each event (iteration or token move) at most once, and every sweep
    # extends the settled paths by at least one edge, so more sweeps than events mean a positive cycle.
    nodes = sum(len(iterations) + sum(map(len, iterations)) for _, iterations in processes.values())
    finish = {}
    changed, sweeps = True, 0
    while changed:
        changed, sweeps = False, sweeps + 1
        if sweeps > nodes + 1:
            return None
        for name, (depth, iterations) in processes.items():
            pushes = 0
            moved = {c: 0 for c in fifo_depth}
            for i, events in enumerate(iterations):
                for write, ch in events:
                    issue = i + pushes
                    k = moved[ch]
                    moved[ch] += 1
                    if write:
                        earliest = read[ch][k - fifo_depth[ch]] + 1 - depth if k >= fifo_depth[ch] else issue
                    else:
                        earliest = written[ch][k] + 1
                    pushes += max(earliest - issue, 0)
                    time_ = (written if write else read)[ch]
                    new = i + pushes + (depth if write else 0)
                    changed |= time_[k] != new
                    time_[k] = new
            finish[name] = len(iterations) + pushes + depth
    return finish


def _assert_matches_stepping(report: dict) -> None:
    ref = _stepped(report)
    result = simulate(report)
    assert (result.deadlock is not None) == ref["deadlocked"]
    assert result.cycles == ref["cycles"]
    assert result.first_output_cycles == ref["first"]
    assert result.stalls == ref["stalls"]
    assert result.finish == ref["finish"]
    assert result.fifo_peak == ref["fifo_peak"]


@pytest.mark.unit
@pytest.mark.parametrize("depths", [{}, {"a_to_b": 4}, {"input_to_a": 3, "b_to_output": 1}])
def test_engine_matches_cycle_stepping_by_hand(depths):
    _assert_matches_stepping(_with_depths(HAND_REPORT, 1, **depths))


@pytest.mark.parametrize("name", ["tiny_cnn", "residual_block", "dw_separable"])
def test_engine_matches_cycle_stepping(built, name):
    _, report = built(name)
    skips = {c: GENEROUS for c in _split_outputs(report)}
    for variant in (report, _with_depths(report, 1, **skips), _with_depths(report, 2, **skips),
                    _with_depths(report, GENEROUS)):
        _assert_matches_stepping(variant)


def test_deadlock_cycle_matches_cycle_stepping(built):
    _, report = built("residual_block")
    small = _with_depths(report, GENEROUS, **{_skip_channel(report): 1})
    assert simulate(small).deadlock is not None
    _assert_matches_stepping(small)


@pytest.mark.parametrize("name", ["residual_block", "dw_separable"])
def test_deadlocks_exactly_when_the_inequalities_have_no_solution(built, name):
    """The look-ahead of a write's slot check (ming_py.simulate) stops no design here that could run."""
    _, report = built(name)
    rng = random.Random(name)
    outcomes = set()
    for _ in range(12):
        variant = copy.deepcopy(report)
        for c in variant["channels"]:
            c["fifo_depth"] = rng.choice([1, 2, 3, 5, 8, 20, 300])
        result, least = simulate(variant), _least_finish(variant)
        outcomes.add(result.deadlock is None)
        assert (result.deadlock is None) == (least is not None)
        assert least is None or result.finish == least
    assert outcomes == {True, False} or name == "dw_separable"  # a chain cannot deadlock


@pytest.mark.parametrize("name", NETWORKS)
def test_fifos_shrunk_to_their_need_keep_every_cycle(built, name):
    """`fifo_need` (what `ming build --fifo minimal` takes): all FIFOs shrunk to it at once, every token moves
    in the same cycle as before, on the built depths and on random ones."""
    _, report = built(name)
    rng = random.Random(name)
    variants = [_with_depths(report, GENEROUS)]
    for _ in range(6):
        variant = copy.deepcopy(report)
        for c in variant["channels"]:
            c["fifo_depth"] = rng.choice([1, 2, 4, 9, 30, 300])
        variants.append(variant)
    for variant in variants:
        before = simulate(variant)
        if before.deadlock is not None:
            continue
        after = simulate(_with_depths(variant, 1, **before.fifo_need))
        assert after.deadlock is None
        assert (after.cycles, after.finish, after.stalls) == (before.cycles, before.finish, before.stalls)
        assert after.fifo_need == before.fifo_need


# ---------------------------------------------------------------------------
# Built designs
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["tiny_cnn", "lenet", "dw_separable", "residual_block", "two_residual_stages"])
def test_zoo_design_completes_with_its_built_fifos(built, name):
    out, report = built(name)
    start = time.perf_counter()
    result = simulate_dir(out)
    assert time.perf_counter() - start < 1.0
    assert isinstance(result, SimResult)
    assert result.deadlock is None, result.deadlock
    assert result.completed
    assert result.cycles > result.first_output_cycles > 0
    assert report["totals"]["cycles"] == result.cycles  # the headline is the simulated latency
    assert report["totals"]["interval_cycles"] == result.interval_cycles
    for channel in report["channels"]:
        assert 0 < result.fifo_peak[channel["name"]] <= channel["fifo_depth"], channel["name"]
        assert result.fifo_need[channel["name"]] <= channel["fifo_depth"], channel["name"]
    out_channel = _output_channel(report)
    assert result.output_tokens == {out_channel["name"]: _tokens(out_channel)}
    data = as_json(result)
    assert {"cycles", "first_output_cycles", "stalls", "fifo_peak", "deadlock"} <= set(data)
    assert json.loads(json.dumps(data)) == data


@pytest.mark.parametrize("name", NETWORKS)
def test_loops_take_their_loop_cycles_unless_they_stall(built, name):
    """With generous FIFOs: every loop is busy for exactly `Loop.cycles` (iterations + depth, what the cost
    model charges), so one that never stalls finishes then; the others only later by their stalls."""
    _, report = built(name)
    result = simulate(_with_depths(report, GENEROUS))
    assert result.completed
    loops = _loops(report)
    assert set(result.finish) == set(loops) == set(result.busy) == set(result.stalls)
    for process, loop in loops.items():
        stalls = result.stalls[process]
        assert result.busy[process] == loop.cycles, process
        assert result.finish[process] == loop.cycles + stalls["read"] + stalls["write"], process
        assert stalls["write"] == 0, process  # no FIFO is ever full
    never_stalled = [p for p in loops if result.stalls[p] == {"read": 0, "write": 0}]
    assert "input" in never_stalled
    for process in never_stalled:
        assert result.finish[process] == loops[process].cycles


def test_a_first_process_that_waits_for_nothing_takes_its_loop_cycles(built):
    # tiny_cnn's first conv starts with a padding row: its first input token is there before it wants it
    _, report = built("tiny_cnn")
    result = simulate(_with_depths(report, GENEROUS))
    first = next(c["consumer"] for c in report["channels"] if c["producer"] == "input")
    assert result.stalls[first] == {"read": 0, "write": 0}
    assert result.finish[first] == _loops(report)[first].cycles


def _pool_then_dense(c: int, h: int, w: int, c_out: int) -> StreamGraph:
    """input (c x h x w) -> global max pool -> 1x1 conv (c_out): the conv's first token is the pool's last."""
    channels = {"x": Channel("x", "input", "pool", c, h, w), "g": Channel("g", "pool", "fc", c, 1, 1),
                "y": Channel("y", "fc", "output", c_out, 1, 1)}
    processes = [Process("pool", "global_maxpool", "pool", ("x",), ("g",)),
                 Process("fc", "pointwise", "fc", ("g",), ("y",), Window(c, 1, 1, c_out, 1, 1),
                         weights=np.ones((c_out, c), np.int8), epilogue=requant(c_out, 1))]
    return StreamGraph("late", processes, channels, Port("x", (1, c, h, w), "x", (1, c, h, w), 0.1, 0),
                       (Port("y", (1, c_out, 1, 1), "y", (1, c_out, 1, 1), 0.1, 0),))


@pytest.mark.unit
def test_a_loop_is_occupied_from_its_first_token_not_from_cycle_0():
    # the 1x1 conv waits a whole image for the pool's maxima, then reads them (c iterations) and runs its
    # c * c_out MACs unstalled: in a stream of images that wait overlaps the previous image, so the interval is
    # the conv's loop alone
    c, h, w, c_out = 4, 8, 8, 128
    graph = _pool_then_dense(c, h, w, c_out)
    result = simulate_schedule(graph, Schedule())
    dense = loop_of(schedule_spec(graph, graph.processes[1], Schedule()))
    assert result.completed and result.start["fc"] > c * h * w
    assert result.interval_cycles == c + c * c_out + dense.depth == dense.cycles
    assert result.interval_cycles < max(result.finish.values())  # each loop counted from cycle 0


@pytest.mark.parametrize("name", ["tiny_cnn", "residual_block"])
def test_more_parallelism_is_not_slower(built, name):
    slow, fast = (_with_depths(built(name, share)[1], GENEROUS) for share in ("5%", "100%"))
    slow, fast = simulate(slow), simulate(fast)
    assert slow.completed and fast.completed
    assert fast.cycles <= slow.cycles


def test_small_skip_fifo_deadlocks_and_a_huge_one_completes(built):
    _, report = built("residual_block")
    skip = _skip_channel(report)
    result = simulate(_with_depths(report, GENEROUS, **{skip: 1}))
    assert result.deadlock is not None
    assert any(f"waits to write to {skip} (full, 1/1)" in line for line in result.deadlock), result.deadlock
    assert result.first_output_cycles is None
    assert 0 < result.cycles < 1000

    huge = {c["name"]: c["fifo_depth"] for c in report["channels"]} | {skip: GENEROUS}
    result = simulate(_with_depths(report, 1, **huge))
    assert result.deadlock is None and result.completed
    assert result.output_tokens[_output_channel(report)["name"]] == _tokens(_output_channel(report))


def test_deeper_fifos_are_not_slower(built):
    _, report = built("two_residual_stages")
    running = _with_depths(report, 2, **{c: GENEROUS for c in _split_outputs(report)})
    assert simulate(running).completed
    assert simulate(_with_depths(report, GENEROUS)).cycles <= simulate(running).cycles


# ---------------------------------------------------------------------------
# A large design
# ---------------------------------------------------------------------------

def _mobilenet_like_report(size: int = 96, width: int = 20) -> dict:
    """A MobileNetV1-like report at one lane everywhere: a strided 3x3 conv, 13 depthwise-separable blocks,
    global average pool and a 10-way dense layer (29 processes)."""
    blocks = [(2, 1), (4, 2), (4, 1), (8, 2), (8, 1), (16, 2)] + [(16, 1)] * 5 + [(32, 2), (32, 1)]
    nodes, channels = [], []

    def add(name, kind, source, shape_in, shape_out, unroll, kernel=1, stride=1):
        (c_in, h_in, w_in), (c_out, h_out, w_out) = shape_in, shape_out
        window = None
        if kind in ("conv", "depthwise", "pointwise"):
            pad = kernel // 2
            window = {"in_channels": c_in, "in_height": h_in, "in_width": w_in, "out_channels": c_out,
                      "out_height": h_out, "out_width": w_out, "kernel": [kernel, kernel], "stride": [stride, stride],
                      "dilation": [1, 1], "pads": [pad] * 4, "pad_value": 0}
        nodes.append({"name": name, "kind": kind, "inputs": [source], "outputs": [f"{name}_out"], "window": window,
                      "schedule": {"unroll": {loop: 1 for loop in unroll}}})
        channels.append({"name": f"{name}_out", "producer": name, "consumer": None, "shape": list(shape_out),
                         "lanes": 1, "fifo_depth": 2 * c_out})
        return f"{name}_out", shape_out

    channels.append({"name": "x", "producer": "input", "consumer": None, "shape": [3, size, size], "lanes": 1,
                     "fifo_depth": 6})
    half = size // 2
    h, shape = add("conv0", "conv", "x", (3, size, size), (width // 2, half, half), ("oc", "ic", "k"), 3, 2)
    for i, (factor, stride) in enumerate(blocks, start=1):
        c, side = shape[0], shape[1] // stride
        h, shape = add(f"dw{i}", "depthwise", h, shape, (c, side, side), ("c", "k"), 3, stride)
        h, shape = add(f"pw{i}", "pointwise", h, shape, (width * factor, side, side), ("oc", "ic"))
    h, shape = add("gap", "global_avgpool", h, shape, (shape[0], 1, 1), ("c",))
    add("fc", "dense", h, shape, (10, 1, 1), ("n", "k"))
    consumers = {n["inputs"][0]: n["name"] for n in nodes}
    for c in channels:
        c["consumer"] = consumers.get(c["name"], "output")
    return {"nodes": nodes, "channels": channels}


@pytest.mark.unit
def test_a_96x96_mobilenet_like_design_simulates_in_seconds():
    report = _mobilenet_like_report()
    events = 2 * sum(_tokens(c) for c in report["channels"])
    assert events > 10**6
    start = time.perf_counter()
    result = simulate(report)
    seconds = time.perf_counter() - start
    assert result.completed
    assert seconds < 10, f"{events:,} token moves in {seconds:.1f} s"
