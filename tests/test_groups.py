"""Grouped convolutions, channel shuffles and channel splits (ResNeXt, RegNet, ShuffleNet).

The golden model equals onnxruntime bit for bit on the original models, and the port-checked C-simulation of
the emitted C++ equals the golden model bit for bit under the ILP's schedule and under schedules that tile the
groups both ways (inside one group, whole groups at once).
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Callable

import numpy as np
import pytest

import zoo
from emit_helpers import csim, random_schedule, stream_graph_of
from ming_py import reference
from ming_py.boards import load_board
from ming_py.build import BuildOptions
from ming_py.ilp.explore import explore
from ming_py.line_buffers import build_stream_graph
from ming_py.classify import classify
from ming_py.dataflow import Schedule
from ming_py.ilp import Budget, Choice, process_cost, solve
from ming_py.ilp.candidates import candidates
from ming_py.process_spec import process_spec, loop_of
from ming_py.kinds import kind_of
from ming_py.parity import onnxruntime_outputs
from ming_py.storage import plan_arrays

SEEDS = (0, 1, 2)


def _single(cin: int, cout: int, kernel: int, stride: int, group: int, size: int = 8):
    def build(g: zoo._Graph) -> str:
        return g.conv("x", "gconv", cout, kernel=kernel, stride=stride, pads=kernel // 2, group=group)
    return (1, cin, size, size), build


def _chain(g: zoo._Graph) -> str:
    """Grouped convs of every shape: 3x3 with groups 2 and 4 (stride 1 and 2), 1x1 with groups 4, and one input
    channel per group (8 groups of 1 -> 2)."""
    h = g.relu(g.conv("x", "c1", 16, kernel=3, pads=1, group=2), "r1")
    h = g.relu(g.conv(h, "c2", 16, kernel=3, stride=2, pads=1, group=4), "r2")
    h = g.relu(g.conv(h, "c3", 8, kernel=1, group=4), "r3")
    return g.conv(h, "c4", 16, kernel=3, pads=1, group=8)


def _shuffle_folded(g: zoo._Graph) -> str:
    """A shuffle read by a 1x1 conv only: folded into its weights."""
    h = g.channel_shuffle(g.conv("x", "conv1", 8, kernel=3, pads=1), "shuffle", 2)
    return g.conv(h, "conv2", 8, kernel=1)


def _shuffle_kept(g: zoo._Graph) -> str:
    """A shuffle read by a depthwise conv: a permute process."""
    h = g.channel_shuffle(g.conv("x", "conv1", 8, kernel=1, group=2), "shuffle", 4)
    return g.conv(h, "dw", 8, kernel=3, pads=1, group=8)


def _shuffle_into_dense(g: zoo._Graph) -> str:
    """A shuffle read by a dense layer (through a Flatten): folded into its weights."""
    h = g.channel_shuffle(g.conv("x", "conv1", 8, kernel=1), "shuffle", 2)
    return g.gemm(g.flatten(h, "flatten"), "fc", 10)


def _split_concat(g: zoo._Graph) -> str:
    """Three unequal pieces, the middle one through a conv, concatenated in another order."""
    a, b, c = g.split(g.conv("x", "conv1", 8, kernel=1), "split", [2, 4, 2])
    return g.concat([c, g.conv(b, "conv2", 4, kernel=3, pads=1), a], "concat")


def _slice_channels(g: zoo._Graph) -> str:
    h = g.slice_channels(g.conv("x", "conv1", 8, kernel=1), "middle", 2, 6)
    return g.conv(h, "conv2", 4, kernel=3, pads=1)


def _unit_strided(g: zoo._Graph, x: str, name: str, cout: int) -> str:
    """ShuffleNetV2's downsampling unit: both branches strided, concatenated and shuffled."""
    c = g.shapes[x][1]
    left = g.conv(x, f"{name}_left_dw", c, kernel=3, stride=2, pads=1, group=c)
    left = g.relu(g.conv(left, f"{name}_left_pw", cout // 2, kernel=1), f"{name}_left_relu")
    right = g.relu(g.conv(x, f"{name}_right_pw1", cout // 2, kernel=1), f"{name}_right_relu1")
    right = g.conv(right, f"{name}_right_dw", cout // 2, kernel=3, stride=2, pads=1, group=cout // 2)
    right = g.relu(g.conv(right, f"{name}_right_pw2", cout // 2, kernel=1), f"{name}_right_relu2")
    return g.channel_shuffle(g.concat([left, right], f"{name}_concat"), f"{name}_shuffle", 2)


def _unit_split(g: zoo._Graph, x: str, name: str) -> str:
    """ShuffleNetV2's basic unit: half the channels pass, the other half goes through 1x1 -> dw 3x3 -> 1x1."""
    half = g.shapes[x][1] // 2
    passed, branch = g.split(x, f"{name}_split", [half, half])
    branch = g.relu(g.conv(branch, f"{name}_pw1", half, kernel=1), f"{name}_relu1")
    branch = g.conv(branch, f"{name}_dw", half, kernel=3, pads=1, group=half)
    branch = g.relu(g.conv(branch, f"{name}_pw2", half, kernel=1), f"{name}_relu2")
    return g.channel_shuffle(g.concat([passed, branch], f"{name}_concat"), f"{name}_shuffle", 2)


def _shufflenet(g: zoo._Graph) -> str:
    h = g.relu(g.conv("x", "stem", 8, kernel=3, pads=1), "stem_relu")
    h = _unit_split(g, _unit_strided(g, h, "unit1", 16), "unit2")
    return g.gemm(g.flatten(g.gap(h, "gap"), "flatten"), "fc", 10)


MODELS: dict[str, tuple[tuple[int, ...], Callable[[zoo._Graph], str]]] = {
    "grouped_g2_3x3": _single(8, 8, 3, 1, 2),
    "grouped_g4_3x3_s2": _single(8, 16, 3, 2, 4, size=9),
    "grouped_g4_1x1": _single(8, 16, 1, 1, 4),
    "grouped_g2_1x1_s2": _single(8, 8, 1, 2, 2),
    "grouped_one_output_per_group": _single(8, 4, 3, 1, 4),
    "grouped_one_input_per_group": _single(4, 8, 3, 1, 4),
    "grouped_chain": ((1, 8, 8, 8), _chain),
    "shuffle_folded": ((1, 8, 8, 8), _shuffle_folded),
    "shuffle_kept": ((1, 8, 8, 8), _shuffle_kept),
    "shuffle_into_dense": ((1, 8, 4, 4), _shuffle_into_dense),
    "split_concat": ((1, 8, 8, 8), _split_concat),
    "slice_channels": ((1, 8, 8, 8), _slice_channels),
    "shufflenet": ((1, 3, 16, 16), _shufflenet),
}


def _input(name: str, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(MODELS[name][0]).astype(np.float32)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """model(name, per_channel=False) -> the quantized model's path, built once."""
    directory = tmp_path_factory.mktemp("groups")
    cache = {}

    def build(name: str, per_channel: bool = False):
        if (name, per_channel) not in cache:
            shape, body = MODELS[name]
            g = zoo._Graph(name, shape)
            path = directory / f"{name}{'_pc' if per_channel else ''}.onnx"
            cache[name, per_channel] = zoo.quantize_float_model(g.finish(body(g)), path, shape, per_channel)
        return cache[name, per_channel]

    return build


@pytest.fixture(scope="module")
def graph_of(model):
    from ming_py.pipeline import lift

    cache = {}

    def build(name: str, per_channel: bool = False):
        if (name, per_channel) not in cache:
            cache[name, per_channel] = lift(model(name, per_channel))
        return cache[name, per_channel]

    return build


def _reference(graph, x: np.ndarray) -> np.ndarray:
    return reference.run(graph, x)[graph.outputs[0].name]


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_reference_equals_onnxruntime(model, graph_of, name, per_channel):
    graph = graph_of(name, per_channel)
    for seed in SEEDS:
        x = _input(name, seed)
        expected = onnxruntime_outputs(model(name, per_channel), x)[0]
        got = _reference(graph, x)
        assert np.array_equal(got, expected), f"seed {seed}: {np.count_nonzero(got != expected)} values differ"
        assert len(np.unique(expected)) > 4  # not a saturated, degenerate output


def test_grouped_conv_keeps_its_group_loop(graph_of):
    """IREE's grouped conv (a group loop dim shared by the activation, the weights and the output) is lifted as
    one integer kernel over the group, classified as a sliding window whose group dim no reduction crosses,
    and streamed as one conv process over all groups."""
    graph = graph_of("grouped_g2_3x3")
    kernel, = graph.kernels()
    assert kernel.op == "conv" and kernel.dims[:2] == (2, 4)  # 2 groups of 4 output channels
    c = classify(kernel)
    assert c.kernel_class == "sliding_window" and c.group_dims == (0,) and c.stride == (1, 1)
    process, = stream_graph_of(graph).processes
    assert (process.kind, process.window.groups, process.weights.shape) == ("conv", 2, (8, 4, 9))
    assert [e.single_dim() for e in kernel.inputs[0].map.results[:2]] == [0, 4]  # group, channel in the group


def _routes_and_order(p) -> tuple[tuple, tuple]:
    """A split's routes (sorted) and a permute's order, empty for the other kinds."""
    routes = tuple(sorted(p.params.routes)) if p.kind == "split" and p.params else ()
    return routes, p.params.order if p.kind == "permute" else ()


def test_layers_around_groups_are_streamed_as_expected(graph_of):
    kinds = {name: [(p.kind, p.window.groups if p.window else None, *_routes_and_order(p))
                    for p in stream_graph_of(graph_of(name)).processes]
             for name in ("grouped_g4_1x1", "shuffle_folded", "shuffle_into_dense", "shuffle_kept", "split_concat",
                          "slice_channels")}
    assert kinds["grouped_g4_1x1"] == [("pointwise", 4, (), ())]
    assert [k for k, *_ in kinds["shuffle_folded"]] == ["conv", "pointwise"]  # the shuffle costs nothing
    assert [k for k, *_ in kinds["shuffle_into_dense"]] == ["pointwise", "dense"]
    assert ("permute", None, (), (0, 2, 4, 6, 1, 3, 5, 7)) in kinds["shuffle_kept"]
    assert ("split", None, ((0, 2), (2, 4), (6, 2)), ()) in kinds["split_concat"]
    assert ("split", None, ((2, 4),), ()) in kinds["slice_channels"]


def test_folded_shuffle_permutes_the_weights(graph_of):
    """The 1x1 conv after a folded shuffle reads the unshuffled stream: its weights' input channels are permuted
    by the shuffle's inverse."""
    graph = graph_of("shuffle_folded")
    conv2 = next(k for k in graph.kernels() if k.name == "conv2")
    weights = graph.constants[next(o.tensor for o in conv2.inputs if o.tensor in graph.constants)]
    process = stream_graph_of(graph).process("conv2")
    shuffle = (0, 4, 1, 5, 2, 6, 3, 7)  # output channel c of the shuffle is its input channel shuffle[c]
    assert np.array_equal(process.weights[:, shuffle], weights.reshape(8, 8))


def test_candidates_tile_inside_a_group_or_whole_groups(graph_of):
    graph = stream_graph_of(graph_of("grouped_chain"))
    c1 = graph.process("c1")  # 2 groups, 8 output and 4 input channels each
    choices = candidates(graph, c1)
    assert {c.factor("g") for c in choices} == {1, 2}
    for choice in choices:
        g, oc, ic = choice.factor("g"), choice.factor("oc"), choice.factor("ic")
        assert g == 1 or (oc, ic) == (8, 4)
        assert (choice.lanes_in, choice.lanes_out) == ((g * ic,), (g * oc,))
    spec = process_spec(graph, c1, (("g", 2), ("oc", 8), ("ic", 4), ("k", 9)), (8,), (16,))
    assert spec.fold == 1 and spec.macs == 576  # every MAC of an output position in one iteration


def test_ilp_unrolls_among_groups_when_the_budget_allows(graph_of):
    graph = stream_graph_of(graph_of("grouped_chain"))
    board = load_board("kv260")
    large = solve(graph, board, Budget.of(board, {}))
    small = solve(graph, board, Budget.of(board, {"dsp": "5%"}))
    assert large.choices["c2"].factor("g") > 1  # all of c2's groups in one token
    assert small.totals["cycles"] > large.totals["cycles"]
    assert small.totals["dsp"] <= Budget.of(board, {"dsp": "5%"}).dsp


def test_permute_costs_what_its_loop_runs(graph_of):
    """The permute process holds two pixels in registers and writes a pixel while it reads the next: (pixels + 1)
    x tokens iterations, which the ILP charges, and no DSP or BRAM."""
    graph = stream_graph_of(graph_of("shuffle_kept"))
    permute = next(p for p in graph.processes if p.kind == "permute")
    for lanes in (1, 2, 4, 8):
        spec = process_spec(graph, permute, (), (lanes,), (lanes,))
        loop = loop_of(spec)
        assert loop.iterations == (64 + 1) * (8 // lanes)
        cost = process_cost(graph, permute, Choice((), (lanes,), (lanes,)))
        assert (cost.cycles, cost.dsp, cost.bram18k) == (loop.cycles, 0, 0)
        pixels = plan_arrays(spec)["pixel"]
        assert pixels.memory == "register" and pixels.bits == 2 * 8 * 8 and cost.ff >= pixels.bits


SCHEDULES = {
    "ilp": {},
    # every tile inside one group: c1 2 of a group's 8 output channels from 2 of its 4 input channels, ...
    "inside_groups": {"c1.unroll.g": 1, "c1.unroll.oc": 2, "c1.unroll.ic": 2, "c2.unroll.g": 1,
                      "c2.unroll.oc": 2, "c3.unroll.g": 1, "c4.unroll.oc": 2},
    # whole groups at once, every group of c2 in one token
    "whole_groups": {"c1.unroll.g": 2, "c2.unroll.g": 4, "c3.unroll.g": 4},
}


def _every_multiplier(graph, schedule: Schedule) -> Schedule:
    """The schedule with the processes' multipliers taking turns through their choices (pairs of lanes in one
    DSP48E2 wherever an even number of lanes shares an input)."""
    processes = {}
    for turn, process in enumerate(graph.processes):
        sched = schedule.of(process.name)
        choices = kind_of(process.kind).multiplier_choices(dict(sched.unroll))
        processes[process.name] = replace(sched, multipliers=choices[turn % len(choices)])
    return replace(schedule, processes=processes)


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_grouped_chain_csim_equals_reference(graph_of, tmp_path, schedule):
    graph = graph_of("grouped_chain", per_channel=True)
    _, solution, _ = explore(build_stream_graph(graph), BuildOptions(limits={"dsp": "50%"}, settings=SCHEDULES[schedule]))
    for key, factor in SCHEDULES[schedule].items():
        process, _, loop = key.split(".")
        assert solution.schedule.of(process).factor(loop) == factor
    chosen = solution.schedule if schedule == "ilp" else _every_multiplier(stream_graph_of(graph), solution.schedule)
    x = _input("grouped_chain", 4)
    got = csim(graph, tmp_path / "out", x, chosen, concurrent=True, check_ports=True)
    assert np.array_equal(got, _reference(graph, x))


@pytest.mark.parametrize("name", ["shuffle_into_dense", "shuffle_kept", "split_concat", "slice_channels", "shufflenet"])
def test_csim_equals_reference(graph_of, tmp_path, name):
    """Under the ILP's schedule and a random one (random lanes, factors, multipliers and FIFO depths)."""
    graph = graph_of(name)
    _, solution, _ = explore(build_stream_graph(graph), BuildOptions())
    x = _input(name, 5)
    expected = _reference(graph, x)
    # the built FIFO depths, every process in its own thread: a deadlock would stop it
    assert np.array_equal(csim(graph, tmp_path / "ilp", x, solution.schedule, concurrent=True, check_ports=True),
                          expected)
    schedule = random_schedule(stream_graph_of(graph), random.Random(name))
    got = csim(graph, tmp_path / "random", x, schedule, check_ports=True)
    assert np.array_equal(got, expected), schedule
