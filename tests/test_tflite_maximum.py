"""TFLite's MAXIMUM and MINIMUM (Keras' Maximum and Minimum layers, tf.maximum, tf.minimum): the compare of two int8
maps of one scale and zero point becomes a `max` or `min` process (an int8 compare and select per lane, no
requantization); a compare with a constant becomes a table. `ming reference` and the C-simulation must equal LiteRT's
reference kernels (BUILTIN_REF) on every value; IREE's rescales around the compare must be identities, or the build
stops with one line naming the node."""

from __future__ import annotations

import random

import numpy as np
import pytest

import tflite_models
from emit_helpers import csim, random_schedule, stream_graph_of
from test_keras_tflite import assert_reference_and_csim_equal_litert
from test_tflite import model_input
from ming_py import primitives, reference
from ming_py.errors import MingError
from ming_py.ir import Arg, Kernel, LookupTable, Op
from ming_py.pipeline import lift
from ming_py.contract.ming_host import accelerator_input

OPS = {"MAXIMUM": "max", "MINIMUM": "min"}


def with_constant(kind, constant) -> bytes:
    """A CONV_2D, then `kind` of its map and a constant (quantized as the map), then a 1x1 CONV_2D."""
    b = tflite_models.TfliteBuilder(seed=6)
    x = b.conv(b.input((1, 5, 5, 3)), 8, activation=None, name="conv")
    y = b.extremum(x, np.asarray(constant, np.float32), kind, name=kind.lower())
    return b.build([b.conv(y, 4, kernel=1, name="head")], "with_constant")


def _kernel_input_values(graph, kernel: Kernel, seed: int) -> list[np.ndarray]:
    """The int8 values `ming reference` gives the kernel's inputs on the model input of `seed`."""
    port = graph.inputs[0]
    values = {port.tensor: accelerator_input(model_input(graph, seed), port).reshape(graph.shape_of(port.tensor))}
    reference.run_integer(graph, values)
    return [values[o.tensor] for o in kernel.inputs]


@pytest.mark.parametrize("kind", sorted(OPS))
def test_the_compare_of_two_maps_is_one_kernel_equal_to_litert_reference_kernels(tmp_path, kind):
    path = tmp_path / "model.tflite"
    path.write_bytes(tflite_models.compared_branches([kind]))
    graph = lift(path)
    (kernel,) = [k for k in graph.kernels() if k.op == OPS[kind]]
    assert kernel.epilogue is None and kernel.payload == Op(OPS[kind], (Arg(0), Arg(1)))
    producers = {k.output.tensor: k.source for k in graph.kernels()}
    assert sorted(producers[o.tensor] for o in kernel.inputs) == ["left_out", "right_out"]
    assert not any(isinstance(k.epilogue, LookupTable) for k in graph.kernels())
    a, b = _kernel_input_values(graph, kernel, 0)
    assert (a > b).any() and (b > a).any()  # the compare keeps values of either map
    assert [p.kind for p in stream_graph_of(graph).processes if p.source == kernel.source] == [OPS[kind]]
    assert_reference_and_csim_equal_litert(graph, path, tmp_path)


def test_maximum_and_minimum_of_the_same_maps_under_random_schedules(tmp_path):
    """Keras' Maximum and Minimum of two branches, concatenated: both processes read the two branches' splits, and
    the C-simulation equals `ming reference` whatever lanes the schedule gives them."""
    path = tmp_path / "model.tflite"
    path.write_bytes(tflite_models.compared_branches(seed=7))
    graph = lift(path)
    stream_graph = stream_graph_of(graph)
    assert sorted(p.kind for p in stream_graph.processes if p.kind in ("max", "min")) == ["max", "min"]
    assert_reference_and_csim_equal_litert(graph, path, tmp_path)
    x = model_input(graph, 3)
    (expected,) = reference.run(graph, x).values()
    for seed in range(2):
        schedule = random_schedule(stream_graph, random.Random(seed))
        y = csim(graph, tmp_path / f"scheduled_{seed}", x, schedule)
        assert np.array_equal(y.reshape(expected.shape), expected), schedule


@pytest.mark.parametrize("kind, constant, groups", [("MAXIMUM", 0.0, 1), ("MINIMUM", 0.25, 1),
                                                    ("MINIMUM", np.linspace(-0.5, 0.5, 8).reshape(1, 1, 1, 8), 8)],
                         ids=["max_zero", "min_scalar", "min_per_channel"])
def test_a_compare_with_a_constant_is_a_table_equal_to_litert_reference_kernels(tmp_path, kind, constant, groups):
    """tf.maximum(x, 0.0) and the like: the compare of one map with a scalar or per-channel constant, tabulated
    exactly (per channel where the constant varies along the channels)."""
    path = tmp_path / "model.tflite"
    path.write_bytes(with_constant(kind, constant))
    graph = lift(path)
    assert not any(k.op in OPS.values() for k in graph.kernels())
    (table,) = [k.epilogue for k in graph.kernels() if isinstance(k.epilogue, LookupTable)]
    assert table.groups == groups and table.function == kind
    assert_reference_and_csim_equal_litert(graph, path, tmp_path)


@pytest.mark.parametrize("rescaled", ["output", "input"])
def test_operands_quantized_differently_are_refused_naming_the_node(tmp_path, rescaled):
    """LiteRT's kernel compares raw int8 values, right only for one scale and zero point throughout: the TFLite
    converter refuses anything else, naming the node, in one line."""
    b = tflite_models.TfliteBuilder(seed=5)
    x = b.input((1, 6, 5, 3))
    left = b.conv(x, 8, activation=None, name="left")
    right = b.conv(x, 8, activation=None, name="right")
    b.share_quantization([left, right])
    y = b.extremum(left, right, "MAXIMUM", name="maximum")
    quantization = b.tensors[(y if rescaled == "output" else right).index].quantization
    quantization.scale = [quantization.scale[0] * 1.5]
    path = tmp_path / "model.tflite"
    path.write_bytes(b.build([b.conv(y, 4, kernel=1, name="head")], "rescaled"))
    with pytest.raises(MingError, match=r"'maximum_out': 'tfl\.maximum' op quantization parameters violate the same "
                                        r"scale constraint") as error:
        lift(path)
    assert "\n" not in str(error.value)


# ---- the lifter's proof, on IREE's generics written by hand ----------------------------------------------------

CHAINS = """
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @chains(%x: tensor<4x4xi8>, %w: tensor<4x4xi32>) -> (tensor<4x4xi32>, tensor<4x4xi32>, tensor<4x4xi8>) {{
  %e = tensor.empty() : tensor<4x4xi32>
  %n = tensor.empty() : tensor<4x4xi8>
  %0 = linalg.generic {{indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}}
      ins(%x : tensor<4x4xi8>) outs(%e : tensor<4x4xi32>) {{
  ^bb0(%in: i8, %out: i32):
    %v = arith.extsi %in : i8 to i32
    linalg.yield %v : i32
  }} -> tensor<4x4xi32>
  %1 = linalg.generic {{indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}}
      ins(%x : tensor<4x4xi8>) outs(%e : tensor<4x4xi32>) {{
  ^bb0(%in: i8, %out: i32):
    %c = arith.constant {shift} : i32
    %v = arith.extsi %in : i8 to i32
    %s = arith.addi %v, %c : i32
    linalg.yield %s : i32
  }} -> tensor<4x4xi32>
  %2 = linalg.generic {{indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}}
      ins(%w : tensor<4x4xi32>) outs(%n : tensor<4x4xi8>) {{
  ^bb0(%in: i32, %out: i8):
    %c = arith.constant {output_shift} : i32
    %lo = arith.constant -128 : i32
    %hi = arith.constant 127 : i32
    %s = arith.addi %in, %c : i32
    %l = arith.maxsi %s, %lo : i32
    %h = arith.minsi %l, %hi : i32
    %t = arith.trunci %h : i32 to i8
    linalg.yield %t : i8
  }} -> tensor<4x4xi8>
  return %0, %1, %2 : tensor<4x4xi32>, tensor<4x4xi32>, tensor<4x4xi8>
}}
"""


def _materialized(shift: int, output_shift: int, op: str = "max"):
    """The lifter's `_materialize` of IREE's form of a MAXIMUM (or MINIMUM) named 'cmp': input a rescaled to int32
    as it is, input b with `shift` added, the compare's result plus `output_shift`, clamped and truncated to int8.
    The lifted graph, or the MingError raised."""
    from iree.compiler import ir

    from ming_py.frontends.facts import FrontendFacts
    from ming_py.frontends.lift import Lifter
    from ming_py.frontends.lift_values import ChainStep, IntChain, IntExtremum

    lifter = Lifter("g", [], [], FrontendFacts(op_types={"cmp": {"max": "MAXIMUM", "min": "MINIMUM"}[op]}))
    a, b = (lifter.builder.new_tensor(name, (4, 4), "i8") for name in ("a", "b"))
    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        module = ir.Module.parse(CHAINS.format(shift=shift, output_shift=output_shift))
        generics = [op for op in module.body.operations[0].regions[0].blocks[0].operations
                    if op.operation.name == "linalg.generic"]
        same, shifted, back = (ChainStep(g.regions[0].blocks[0], 0, (), dtype, "cmp", "test")
                               for g, dtype in zip(generics, ("i32", "i32", "i8")))
        extremum = IntExtremum(IntChain(a, None, (same,)), IntChain(b, None, (shifted,)), (4, 4), op, "cmp")
        try:
            lifter._materialize(IntChain(extremum, None, (back,)), "test")
        except MingError as error:
            return error
    return lifter.graph


@pytest.mark.parametrize("op", ["max", "min"])
def test_identity_rescales_leave_the_compare_of_the_int8_tensors(op):
    graph = _materialized(0, 0, op)
    (kernel,) = graph.kernels()
    assert (kernel.op, kernel.source, kernel.epilogue, kernel.payload) == (op, "cmp", None, Op(op, (Arg(0), Arg(1))))
    assert [o.tensor for o in kernel.inputs] == ["a", "b"] and graph.tensors[kernel.output.tensor].dtype == "i8"


@pytest.mark.parametrize("shift, output_shift", [(3, 0), (0, -1), (0, 200)], ids=["input", "output", "clamped"])
def test_a_rescale_that_is_no_identity_is_refused_naming_the_node(shift, output_shift):
    """An input or the output moved by a zero point (or all clamped away) is not LiteRT's compare of raw values."""
    error = _materialized(shift, output_shift)
    assert isinstance(error, MingError)
    assert str(error) == ("node 'cmp' (MAXIMUM) has inputs quantized differently from its output; ming takes "
                          "MAXIMUM/MINIMUM with equal scales and zero points, as the TFLite converter writes them")


# ---- the process kinds ------------------------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize("kind, primitive", [("max", "max_int8"), ("min", "min_int8")])
def test_a_compare_lane_costs_its_synthesized_compare_and_select(kind, primitive):
    """Per output lane one yosys-synthesized 8-bit compare and 2:1 select (benchmarks/calibration/<primitive>.v),
    no DSP, no memory; one token in from each map and one out per iteration."""
    from ming_py.dataflow import Channel, Port, Process, StreamGraph
    from ming_py.ilp.cost import HLS_LUT_OVERHEAD, Choice, process_cost
    from ming_py.process_spec import process_spec, loop_of

    entry = primitives.primitive(primitive)
    assert (entry["lut"], entry["dsp"], entry["levels"]) == (14, 0, 2)
    assert entry["source"] == f"benchmarks/calibration/{primitive}.v"
    channels = {name: Channel(name, *ends, 8, 3, 5) for name, ends in
                (("in0", ("input", "p")), ("in1", ("input", "p")), ("out", ("p", "output")))}
    process = Process("p", kind, "node", ("in0", "in1"), ("out",))
    port = Port("in0", (8, 3, 5), "x", (8, 3, 5), 1.0, 0)
    graph = StreamGraph("g", [process], channels, port, (Port("out", (8, 3, 5), "y", (8, 3, 5), 1.0, 0),))
    for lanes in (1, 4, 8):
        cost = process_cost(graph, process, Choice((), (lanes, lanes), (lanes,)))
        parts = {(resource, name): amount for resource, name, amount in cost.parts}
        assert parts[("lut", "logic")] == pytest.approx(HLS_LUT_OVERHEAD * lanes * primitives.lut(primitive))
        assert cost.dsp == cost.bram18k == cost.uram == 0
        loop = loop_of(process_spec(graph, process, (), (lanes, lanes), (lanes,)))
        assert loop.iterations == 3 * 5 * 8 // lanes
