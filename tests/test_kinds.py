"""The process-kind registry: every kind defines every aspect, a kind that leaves one out is refused when it
registers, and every kind's own descriptions agree with each other on a hand-built process."""

from __future__ import annotations

import math

import pytest

from ming_py.dataflow import Channel, Process, StreamGraph, Port, Window
from ming_py.emit.environment import TEMPLATES
from ming_py.process_spec import process_spec, loop_of
from ming_py.kinds import ASPECTS, registered, trip_counts
from ming_py.kinds.base import ProcessKind, register
from ming_py.kinds.bilinear import BilinearTables
from ming_py.kinds.permute import PermuteOrder
from ming_py.storage import plan_arrays

pytestmark = pytest.mark.unit

KINDS = sorted(registered())


@pytest.mark.parametrize("name", KINDS)
def test_every_kind_defines_every_aspect(name):
    kind = registered()[name]
    assert kind.name == name
    for aspect in ASPECTS:
        assert getattr(type(kind), aspect) is not getattr(ProcessKind, aspect), f"{name} lacks {aspect}"
    assert (TEMPLATES / "process" / f"{kind.template}.cpp.j2").is_file()
    assert set(kind.multiplier_choices({loop: 2 for loop in kind.unrollable})) <= {"dsp", "fabric", "dsp_pair"}


def test_a_kind_missing_an_aspect_is_refused_at_registration():
    class Half(ProcessKind):
        name = "half"
        unrollable = ()

    with pytest.raises(TypeError, match="does not define .*needs_window"):
        register(Half)
    assert "half" not in registered()


def test_a_kind_registered_twice_is_refused():
    with pytest.raises(TypeError, match="registered twice"):
        register(type(registered()["conv"]))


def test_the_templates_are_the_kinds_templates():
    templates = {path.name.removesuffix(".cpp.j2") for path in (TEMPLATES / "process").glob("*.cpp.j2")}
    assert templates == {template for kind in registered().values() for template in kind.templates}


def _process(name: str) -> tuple[StreamGraph, Process]:
    """A small process of kind `name`: 4 channels of 6 x 6 in (two such inputs for add, mul, max and min, a map and a
    4-vector for broadcast), the kind's own output shape."""
    window = None
    ins, out = [(4, 6, 6)], (4, 6, 6)
    kwargs = {}
    if name in ("conv", "depthwise", "maxpool", "avgpool", "float_avgpool"):
        window = Window(4, 6, 6, 4, 6, 6, kernel=(3, 3), pads=(1, 1, 1, 1))
    elif name == "pointwise":
        window = Window(4, 6, 6, 8, 6, 6)
        out = (8, 6, 6)
    elif name == "pad":
        window = Window(4, 6, 6, 4, 8, 8, pads=(1, 1, 1, 1))
        out = (4, 8, 8)
    elif name == "dense":
        out = (10, 1, 1)
    elif name in ("global_avgpool", "global_maxpool"):
        out = (4, 1, 1)
    elif name == "upsample":
        out = (4, 12, 12)
    elif name == "depth_to_space":
        out = (1, 12, 12)
    elif name == "bilinear":
        from test_bilinear_resize import litert_axis

        out = (4, 12, 12)
        kwargs["params"] = BilinearTables(litert_axis(6, 12), litert_axis(6, 12))
    elif name in ("add", "mul", "max", "min"):
        ins = [(4, 6, 6), (4, 6, 6)]
    elif name == "broadcast":
        ins = [(4, 6, 6), (4, 1, 1)]
    elif name == "concat":
        ins, out = [(4, 6, 6), (4, 6, 6)], (8, 6, 6)
    elif name == "permute":
        kwargs["params"] = PermuteOrder((3, 2, 1, 0))
    channels = {f"in{i}": Channel(f"in{i}", "input", "p", *shape) for i, shape in enumerate(ins)}
    channels["out"] = Channel("out", "p", "output", *out)
    process = Process("p", name, "node", tuple(channels)[:-1], ("out",), window=window, **kwargs)
    port = Port("in0", ins[0], "x", ins[0], 1.0, 0)
    return StreamGraph("g", [process], channels, port, (Port("out", out, "y", out, 1.0, 0),)), process


@pytest.mark.parametrize("name", KINDS)
def test_each_kinds_loop_moves_every_token_once(name):
    """On the one-lane schedule and on the widest lanes its options allow, the loop a kind builds reads
    every input token and writes every output token of an image exactly once, in order."""
    graph, process = _process(name)
    kind = registered()[name]
    trips = trip_counts(graph, process)
    ins = [graph.channels[c] for c in process.inputs]
    outs = [graph.channels[c] for c in process.outputs]
    schedules = [(tuple((loop, 1) for loop in trips), (1,) * len(ins), (1,) * len(outs))]
    widest = {loop: trip for loop, trip in trips.items()}
    if name == "dense":
        widest["k"] = 4
    for lanes_in, lanes_out in kind.lane_options(widest, ins, outs, process.params, 64):
        if kind.static_banks(widest.get("k", 1), lanes_in[0]):
            schedules.append((tuple(widest.items()), lanes_in, lanes_out))
    assert len(schedules) > 1, "no lane option for the widest unroll"
    for unroll, lanes_in, lanes_out in schedules:
        spec = process_spec(graph, process, unroll, lanes_in, lanes_out)
        loop = loop_of(spec)
        for side, channels, lanes in (("reads", ins, lanes_in), ("writes", outs, lanes_out)):
            for index, (channel, width) in enumerate(zip(channels, lanes)):
                tokens = channel.values // width
                moved = loop.token_iterations(side, index, list(range(tokens)))
                assert len(moved) == tokens
                assert moved == sorted(moved) and len(set(moved)) == tokens  # one token per iteration and port
                assert moved[-1] < loop.iterations
                with pytest.raises(ValueError):
                    loop.token_iterations(side, index, [tokens])  # and no more
        assert loop.iterations >= max(c.values // w for c, w in zip(ins + outs, lanes_in + lanes_out))
        assert loop.depth == kind.pipeline_depth(kind.summed_terms(spec)) <= kind.depth_bound
        assert spec.macs == (math.prod(f for _, f in unroll) if kind.mac else 0)
        arrays = plan_arrays(spec)
        assert ("weights" in arrays) == kind.mac
        assert ("line_buffer" in arrays) == kind.line_buffer


@pytest.mark.parametrize("name", KINDS)
def test_the_simulator_reads_the_same_design_from_the_graph_and_from_report_json(name):
    """`simulate_schedule` (the build's own graph and schedule) and `simulate` (report.json) agree."""
    from ming_py.boards import load_board
    from ming_py.dataflow import Schedule
    from ming_py.emit.reports import report
    from ming_py.simulate import simulate, simulate_schedule

    graph, process = _process(name)
    schedule = Schedule(depths={c: 3 for c in graph.channels})
    from_graph, from_report = simulate_schedule(graph, schedule), simulate(report(graph, schedule, load_board("kv260")))
    assert from_graph.deadlock is None and from_graph.cycles > 0
    assert from_graph == from_report
