"""Element-wise activations as 256-entry tables computed by onnxruntime: the golden model equals onnxruntime on
every int8 value and on whole networks, and the C-simulation of the table processes equals the golden model."""

from __future__ import annotations

import json
import math
import random
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import zoo
from emit_helpers import csim, random_schedule, stream_graph_of
from ming_py import reference
from ming_py.boards import load_board
from ming_py.build import BuildOptions, build, design
from ming_py.csim import run_csim
from ming_py.dataflow import ProcessSchedule, Schedule
from ming_py.frontends.onnx_tables import TABLE_OPS
from ming_py.ilp.cost import Choice, process_cost
from ming_py.errors import MingError
from ming_py.ir import LookupTable
from ming_py.kinds import kind_of
from ming_py.pipeline import lift
from ming_py.simulate import simulate
from ming_py.ort_session import onnxruntime_session

ATTRIBUTES = {"LeakyRelu": {"alpha": 0.1}, "Elu": {"alpha": 0.7}, "ThresholdedRelu": {"alpha": 0.3}}
# op, per-channel PRelu, one-slope PRelu
CASES = sorted(TABLE_OPS - {"PRelu"}) + ["PRelu", "PRelu_scalar"]
PER_CHANNEL = ("PRelu", "BatchNormalization")
# a binary op with a constant operand: op, per channel or one value, the constant first
CONSTANT_CASES = {"Mul_channel": ("Mul", True, False), "Add_scalar": ("Add", False, False),
                  "Sub_channel": ("Sub", True, False), "Div_scalar": ("Div", False, False),
                  "Mul_channel_first": ("Mul", True, True), "Add_channel_first": ("Add", True, True)}
NETWORK_CASES = ["Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "LeakyRelu", "PRelu", "PRelu_scalar", "Elu",
                 "Softplus", "Exp", "Abs", "BatchNormalization", *CONSTANT_CASES]


def _activation(g: zoo._Graph, x: str, case: str) -> str:
    if case.startswith("PRelu"):
        return g.prelu(x, "act", per_channel=case == "PRelu")
    if case == "BatchNormalization":
        return g.batchnorm(x, "act")
    if case in CONSTANT_CASES:
        op, per_channel, first = CONSTANT_CASES[case]
        shape = (g.shapes[x][1], 1, 1) if per_channel else (1,)
        constant = g._init("act.constant", g.rng.uniform(0.5, 2.0, shape).astype(np.float32))
        return g._node(op, "act", [constant, x] if first else [x, constant], g.shapes[x])
    return g.unary(x, case, "act", **ATTRIBUTES.get(case, {}))


def _onnxruntime(path, x: np.ndarray) -> np.ndarray:
    session = onnxruntime_session(str(path))
    return session.run(None, {"x": x})[0]


def _tables(graph) -> list[LookupTable]:
    return [k.epilogue for k in graph.kernels() if isinstance(k.epilogue, LookupTable)]


def _every_int8_value(path, channels: int) -> np.ndarray:
    """A float input whose quantization holds each of the 256 int8 values once per channel (16 x 16 maps)."""
    initializers = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(path)).graph.initializer}
    scale, zero_point = np.float32(initializers["x_scale"]), int(initializers["x_zero_point"])
    values = (np.arange(-128, 128, dtype=np.float64) - zero_point) * np.float64(scale)
    return np.broadcast_to(values.astype(np.float32).reshape(1, 1, 16, 16), (1, channels, 16, 16)).copy()


@pytest.fixture(scope="module")
def single_op(tmp_path_factory):
    """The model x -> Q -> DQ -> op -> Q -> DQ -> y of a case (input 1 x C x 16 x 16), quantized and lifted once
    (quantize_static quantizes an op alone in a model only when asked to)."""
    directory = tmp_path_factory.mktemp("single_op")
    cache = {}

    def build(case: str):
        if case not in cache:
            channels = 4 if case in PER_CHANNEL else 1
            g = zoo._Graph(f"table_{case}", (1, channels, 16, 16))
            model = g.finish(_activation(g, "x", case))
            options = {"op_types_to_quantize": [model.graph.node[0].op_type], **zoo.QUANTIZE_OPTIONS}
            path = zoo.quantize_float_model(model, directory / f"{case}.onnx", (1, channels, 16, 16),
                                            options=options)
            cache[case] = path, lift(path), channels
        return cache[case]

    return build


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    """conv -> op -> conv (8 channels in the middle), quantized per channel and lifted once."""
    directory = tmp_path_factory.mktemp("network")
    cache = {}

    def build(case: str):
        if case not in cache:
            g = zoo._Graph(f"net_{case}", (1, 4, 8, 8))
            h = _activation(g, g.conv("x", "conv1", 8, pads=1), case)
            model = g.finish(g.conv(h, "conv2", 4, pads=1))
            path = zoo.quantize_float_model(model, directory / f"{case}.onnx", (1, 4, 8, 8), per_channel=True)
            cache[case] = path, lift(path)
        return cache[case]

    return build


@pytest.mark.parametrize("case", CASES)
def test_every_int8_value_equals_onnxruntime(single_op, case):
    """The op reads the quantized model input directly, which holds every int8 value (in every channel):
    the golden model's output equals onnxruntime's on all of them, through one table kernel."""
    path, graph, channels = single_op(case)
    x = _every_int8_value(path, channels)
    assert [k.op for k in graph.kernels()] == ["table"]
    assert [t.groups for t in _tables(graph)] == [channels]
    expected = _onnxruntime(path, x)
    assert len(np.unique(expected)) > 1
    assert np.array_equal(reference.run(graph, x)["y"], expected)


@pytest.mark.parametrize("case", NETWORK_CASES)
def test_network_equals_onnxruntime(network, case):
    path, graph = network(case)
    assert [k.op for k in graph.kernels()] == ["conv", "table", "conv"]
    for seed in range(4):
        x = np.random.default_rng(seed).standard_normal((1, 4, 8, 8)).astype(np.float32)
        assert np.array_equal(reference.run(graph, x)["y"], _onnxruntime(path, x)), seed


@pytest.mark.parametrize("case", sorted(CONSTANT_CASES))
def test_a_constant_operand_makes_a_table(network, case):
    """Add, Sub, Mul and Div of a map and a constant (quantized by quantize_static behind a DequantizeLinear):
    one table per channel where the constant is per channel."""
    _, graph = network(case)
    table, = _tables(graph)
    assert table.function == CONSTANT_CASES[case][0]
    assert table.groups == (8 if CONSTANT_CASES[case][1] else 1)


def test_a_constant_first_operand_of_sub_is_refused(tmp_path):
    g = zoo._Graph("sub_first", (1, 4, 8, 8))
    h = g.conv("x", "conv1", 8, pads=1)
    constant = g._init("act.constant", np.full((8, 1, 1), 0.5, np.float32))
    model = g.finish(g.conv(g._node("Sub", "act", [constant, h], g.shapes[h]), "conv2", 4, pads=1))
    path = zoo.quantize_float_model(model, tmp_path / "sub_first.onnx", (1, 4, 8, 8))
    with pytest.raises(MingError, match=r"node 'act' \(Sub\) takes a constant first"):
        lift(path)


def test_per_channel_slope_gives_one_table_per_channel(network):
    _, graph = network("PRelu")
    table, = _tables(graph)
    assert table.groups == 8 and table.function == "PRelu"
    assert len({row.tobytes() for row in table.table}) == 8
    _, scalar = network("PRelu_scalar")
    assert _tables(scalar)[0].groups == 1


def test_built_design_simulates_costs_and_csims_as_one(network, tmp_path):
    """`ming build` (the ILP's schedule) of the per-channel PRelu network: the table process takes in
    `ming simulate` the busy cycles its cost says, its ROM is the plan's, and the C-simulation of the build
    equals onnxruntime."""
    path, graph = network("PRelu")
    out = tmp_path / "build"
    build(path, out, BuildOptions())
    report = json.loads((out / "report.json").read_text())
    node = next(n for n in report["nodes"] if n["kind"] == "table")
    lanes = node["schedule"]["lanes_in"][0]
    assert simulate(report).busy[node["name"]] == node["cycles"] == 8 * 8 * 8 // lanes + 2
    per_lane = 8 // lanes
    assert node["bram18k"] == (lanes * math.ceil(per_lane * 256 / 2048) if per_lane > 1 else 0)  # else LUTs
    x = np.random.default_rng(5).standard_normal((1, 4, 8, 8)).astype(np.float32)
    assert np.array_equal(run_csim(out, x, check_ports=True)["y"], _onnxruntime(path, x))


def test_csim_with_the_default_schedule(network, tmp_path):
    _, graph = network("Sigmoid")
    for seed in (0, 1):
        x = np.random.default_rng(seed).standard_normal((1, 4, 8, 8)).astype(np.float32)
        assert np.array_equal(csim(graph, tmp_path / "out", x, check_ports=True), reference.run(graph, x)["y"])


def test_csim_of_per_channel_tables_with_fewer_lanes_than_channels(network, tmp_path):
    """Each lane holds the tables of the channels it carries ([lane][token of a pixel][value]); the
    port-checked C-simulation equals the golden model under schedules of one or two lanes (8 channels)."""
    _, graph = network("PRelu")
    stream_graph = stream_graph_of(graph)
    table = next(p for p in stream_graph.processes if p.kind == "table")
    rng = random.Random(3)
    for trial in range(2):
        schedule = random_schedule(stream_graph, rng, max_factor=2)
        assert schedule.lanes_of(table.inputs[0]) < 8
        x = np.random.default_rng(trial).standard_normal((1, 4, 8, 8)).astype(np.float32)
        got = csim(graph, tmp_path / f"out{trial}", x, schedule, check_ports=True)
        assert np.array_equal(got, reference.run(graph, x)["y"]), schedule


def test_per_channel_table_between_dense_layers(tmp_path):
    """Gemm -> PRelu (a slope per output) -> Gemm: the tables run along the vector's only axis, which streams
    as channels; golden model == onnxruntime, C-simulation with two lanes == golden model."""
    g = zoo._Graph("dense_prelu", (1, 4, 8, 8))
    h = g.gemm(g.flatten(g.gap(g.conv("x", "conv1", 8, pads=1), "gap"), "flatten"), "fc1", 12)
    path = zoo.quantize_float_model(g.finish(g.gemm(g.prelu(h, "act"), "fc2", 10)), tmp_path / "dense.onnx",
                                    (1, 4, 8, 8), per_channel=True)
    graph = lift(path)
    assert [(t.groups, t.channel_dim) for t in _tables(graph)] == [(12, 0)]
    for seed in range(4):
        x = np.random.default_rng(seed).standard_normal((1, 4, 8, 8)).astype(np.float32)
        assert np.array_equal(reference.run(graph, x)["y"], _onnxruntime(path, x)), seed
    stream_graph = stream_graph_of(graph)
    table = next(p for p in stream_graph.processes if p.kind == "table")
    rng = random.Random(1)
    schedule = next(s for s in iter(lambda: random_schedule(stream_graph, rng, max_factor=2), None)
                    if s.lanes_of(table.inputs[0]) == 2)
    assert np.array_equal(csim(graph, tmp_path / "out", x, schedule, check_ports=True), reference.run(graph, x)["y"])


def test_csim_on_every_int8_value(single_op, tmp_path):
    path, graph, channels = single_op("PRelu")
    x = _every_int8_value(path, channels)
    assert np.array_equal(csim(graph, tmp_path / "out", x, check_ports=True), _onnxruntime(path, x))


@pytest.mark.parametrize("lanes", [1, 2, 8])
def test_rom_cost_is_the_emitted_array(network, lanes):
    """The ILP charges the table ROM the emitted C++ declares: one bank per lane of 8 / lanes tables of 256
    bytes (BRAM18K as 9 x 2048), one table a lane in LUTs (32 LUT6 for 256 x 8 bits), and report.json lists that
    array."""
    _, graph = network("PRelu")
    stream_graph = stream_graph_of(graph)
    table = next(p for p in stream_graph.processes if p.kind == "table")
    conv1 = next(p for p in stream_graph.processes if table.inputs[0] in p.outputs)
    conv2 = next(p for p in stream_graph.processes if table.outputs[0] in p.inputs)
    unroll = {conv1.name: (("oc", lanes),), conv2.name: (("ic", lanes),)}
    schedule = Schedule({name: ProcessSchedule(loops, multipliers=kind_of("conv").multiplier_choices(dict(loops))[0])
                         for name, loops in unroll.items()}, {table.inputs[0]: lanes, table.outputs[0]: lanes})
    built = design(graph, load_board("kv260"), schedule)
    per_lane = 8 // lanes
    shape = [lanes, per_lane, 256] if per_lane > 1 else [lanes, 256]
    header = next(text for name, text in built.files.items() if name.endswith("_weights.h"))
    assert re.search(r"int8_t act_table" + "".join(rf"\[{n}\]" for n in shape) + " =", header)
    cost = process_cost(stream_graph, table, Choice((), (lanes,), (lanes,)))
    memory_luts = sum(n for resource, part, n in cost.parts if (resource, part) == ("lut", "memory"))
    assert (cost.bram18k, memory_luts) == ((lanes * math.ceil(per_lane * 256 / 2048), 0) if per_lane > 1 else
                                           (0, lanes * 32))
    assert cost.dsp == 0
    node = next(n for n in json.loads(built.files["report.json"])["nodes"] if n["kind"] == "table")
    assert node["buffers"][0]["shape"] == shape
    assert node["buffers"][0]["memory"] == ("bram" if per_lane > 1 else "lutram")


def _activation_before_a_float_pool(path, pool: str) -> None:
    """x -> QDQ -> Sigmoid -> `pool` in float -> QDQ: the pool quantized only after it."""
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quantize"),
         helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="dequantize"),
         helper.make_node("Sigmoid", ["d"], ["a"], name="act"),  # at an output it runs on the host (onnx_tail)
         helper.make_node(pool, ["a"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("QuantizeLinear", ["p", "s", "z"], ["pq"], name="pool_quantize"),
         helper.make_node("DequantizeLinear", ["pq", "s", "z"], ["y"], name="pool_dequantize")],
        "bare", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 2, 2])],
        initializer=[numpy_helper.from_array(np.array(0.05, np.float32), "s"),
                     numpy_helper.from_array(np.array(0, np.int8), "z")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))


def test_activation_without_quantize_after_it_is_refused(tmp_path):
    path = tmp_path / "bare.onnx"
    _activation_before_a_float_pool(path, "AveragePool")  # an average of quantized values is not quantized
    with pytest.raises(MingError, match=r"node 'act' \(Sigmoid\) must read a DequantizeLinear and feed only a "
                                        "QuantizeLinear"):
        lift(path)


def test_activation_before_a_float_maxpool_takes_the_quantization_after_it(tmp_path):
    path = tmp_path / "bare.onnx"
    _activation_before_a_float_pool(path, "MaxPool")
    graph = lift(path)
    assert [n.op for n in graph.kernels()] == ["table", "maxpool"]
    session = onnxruntime_session(str(path))
    x = (np.random.default_rng(0).standard_normal((1, 2, 4, 4)) * 4).astype(np.float32)
    (expected,) = session.run(None, {"x": x})
    assert np.array_equal(reference.run(graph, x)["y"], expected)
