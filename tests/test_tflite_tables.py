"""TFLite's element-wise int8 ops: the activations and MUL by a constant as tables taken from LiteRT's reference
kernels (`frontends.tflite_tables`), MUL of two maps in TFLite's fixed-point rule (`FixedPointMul`). `ming
reference` and the C-simulation must equal LiteRT's reference kernels bit for bit, on every int8 value."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter, OpResolverType

import tflite_models
from emit_helpers import csim
from ming_py import numerics, reference
from ming_py.epilogues import rule_of
from ming_py.errors import MingError
from ming_py.frontends import litert_probe, tflite_tables
from ming_py.frontends.tflite_tables import node_tables
from ming_py.ir import FixedPointMul, LookupTable
from ming_py.pipeline import lift
from test_tflite import model_input, tflite_reference

# (input scale, input zero point, output scale, output zero point)
SCALES = [(0.02, -3, 0.015, -20), (0.1, 40, 0.05, -128), (0.005, -128, 0.01, 7)]
ACTIVATIONS = ["LOGISTIC", "TANH", "HARD_SWISH", "LEAKY_RELU", "RELU", "RELU6", "RELU_N1_TO_1"]


def every_value(channels: int) -> np.ndarray:
    """A (1, 16, 16, channels) int8 input holding each of the 256 values once in every channel."""
    values = np.arange(-128, 128, dtype=np.int8).reshape(1, 16, 16, 1)
    return np.ascontiguousarray(np.broadcast_to(values, (1, 16, 16, channels)))


def write(tmp_path, builder, outputs, name):
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(builder.build(outputs, name))
    return path


def litert(path, x, resolver=OpResolverType.BUILTIN_REF) -> np.ndarray:
    if resolver == OpResolverType.BUILTIN_REF:
        return tflite_reference(path, x)
    interpreter = Interpreter(model_path=str(path), experimental_op_resolver_type=resolver)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def assert_equal_on(path, x, resolver=OpResolverType.BUILTIN_REF):
    graph = lift(path)
    ours = reference.run(graph, x)[graph.outputs[0].name]
    expected = litert(path, x, resolver)
    assert ours.shape == expected.shape and ours.dtype == expected.dtype
    assert np.array_equal(ours, expected), f"{np.count_nonzero(ours != expected)} of {ours.size} differ"
    return graph


def tables_of(graph) -> list[LookupTable]:
    return [k.epilogue for k in graph.kernels() if isinstance(k.epilogue, LookupTable)]


def parsed(data: bytes):
    return tflite_models.schema.ModelT.InitFromPackedBuf(bytearray(data), 0)


@pytest.mark.unit
def test_tables_are_litert_reference_kernels_keyed_by_output_tensor():
    """HARD_SWISH then MUL by a per-channel constant: each node's table, by its output tensor's name, composes
    to what LiteRT's reference kernels compute for the two nodes on every int8 value."""
    builder = tflite_models.TfliteBuilder(seed=9)
    x = builder.input((1, 16, 16, 3), scale=0.05, zero_point=-10)
    z = builder.mul(builder.elementwise(x, "HARD_SWISH", 0.03, -50), np.array([0.5, -1.0, 2.0]), 0.02, 0)
    data = builder.build([z], "two_tables")
    tables = node_tables(parsed(data))
    assert set(tables) == {"hard_swish_out", "mul_out"}
    swish, scaled = tables["hard_swish_out"], tables["mul_out"]
    assert (swish.values.shape, swish.axis, scaled.values.shape, scaled.axis) == ((1, 256), None, (3, 256), 3)
    interpreter = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    x_values = every_value(3)
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x_values)
    interpreter.invoke()
    expected = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    swished = swish.values[0].astype(np.int64)[x_values.astype(np.int64) + 128]
    composed = scaled.values[np.arange(3), swished + 128]
    assert np.array_equal(composed, expected)


@pytest.mark.unit
def test_a_constant_varying_along_two_axes_is_refused():
    builder = tflite_models.TfliteBuilder(seed=10)
    x = builder.input((1, 4, 4, 3), scale=0.05, zero_point=0)
    y = builder.mul(x, np.arange(12, dtype=np.float32).reshape(4, 1, 3), 0.1, 0)
    with pytest.raises(MingError, match=r"node 'mul_out' \(MUL\): its constant operands vary along axes \[1, 3\]"):
        node_tables(parsed(builder.build([y], "two_axes")))


@pytest.mark.unit
def test_parameters_litert_refuses_are_one_line_naming_the_node():
    """LiteRT's int8 LOGISTIC requires the output scale 1/256: its refusal, named."""
    builder = tflite_models.TfliteBuilder(seed=11)
    x = builder.input((1, 4, 4, 2), scale=0.05, zero_point=0)
    y = builder._output("sigmoid", x.calibration, 0.01, 0)
    builder._op("LOGISTIC", [x.index], [y.index])
    with pytest.raises(MingError, match=r"^node 'sigmoid' \(LOGISTIC\): LiteRT's reference kernel refuses it") as error:
        node_tables(parsed(builder.build([y], "bad_logistic")))
    assert "\n" not in str(error.value) and "1. / 256" in str(error.value)


@pytest.mark.unit
def test_a_constant_of_more_channels_than_ming_tabulates_is_refused_before_litert_runs(monkeypatch):
    """A MUL by a constant of 4097 channels would make LiteRT run a 256 x 4097 probe (a hostile width, a
    256 x width one): refused by name first."""
    builder = tflite_models.TfliteBuilder(seed=12)
    channels = litert_probe.MAX_TABLE_CHANNELS + 1
    x = builder.input((1, 1, 1, channels), scale=0.05, zero_point=0)
    y = builder.mul(x, np.linspace(-1, 1, channels, dtype=np.float32), 0.05, 0)
    monkeypatch.setattr(tflite_tables.isolated, "run", lambda *args, **kwargs: pytest.fail("LiteRT ran"))
    with pytest.raises(MingError, match=rf"^node 'mul_out' \(MUL\): its constant operands differ along {channels} "
                                        r"channels; ming tabulates at most 4096"):
        node_tables(parsed(builder.build([y], "wide")))


@pytest.mark.unit
def test_only_elu_falls_back_from_the_reference_resolver(monkeypatch):
    """The child may run LiteRT's builtin kernel only for ELU (the reference resolver has no ELU); every other
    op gets the reference resolver alone, and a probe so restricted reports the missing op rather than
    falling back."""
    builder = tflite_models.TfliteBuilder(seed=13)
    x = builder.input((1, 4, 4, 2), scale=0.04, zero_point=10)
    y = builder.elementwise(builder.elementwise(x, "ELU", 0.02, 30), "TANH")
    requests = []
    real = tflite_tables.isolated.run

    def recorded(command, what, model, stdin, site):
        requests.append(litert_probe.parse_request(stdin))
        return real(command, what, model, stdin, site)

    monkeypatch.setattr(tflite_tables.isolated, "run", recorded)
    assert set(node_tables(parsed(builder.build([y], "elu_tanh")))) == {"elu_out", "tanh_out"}
    (probes,) = requests
    assert [resolvers for _, _, resolvers in probes] == [("BUILTIN_REF", "BUILTIN_WITHOUT_DEFAULT_DELEGATES"),
                                                         ("BUILTIN_REF",)]
    elu_model, shape, _ = probes[0]
    assert "Didn't find op" in litert_probe.run_probe(elu_model, shape, ("BUILTIN_REF",))["error"]


@pytest.mark.unit
@pytest.mark.parametrize("request_text", [
    b"[]", b'{"probes": [{"model": "AAAA", "shape": [256, 4097], "resolvers": ["BUILTIN_REF"]}]}',
    b'{"probes": [{"model": "AAAA", "shape": [255], "resolvers": ["BUILTIN_REF"]}]}',
    b'{"probes": [{"model": "AAAA", "shape": [256], "resolvers": ["BUILTIN"]}]}',
    b'{"probes": [{"model": "A?AA", "shape": [256], "resolvers": ["BUILTIN_REF"]}]}',
    b'{"probes": [{"model": "AAAA", "shape": [256, true], "resolvers": ["BUILTIN_REF"]}]}'])
def test_the_child_runs_no_request_out_of_form(request_text):
    with pytest.raises(ValueError):
        litert_probe.parse_request(request_text)


@pytest.mark.parametrize("scales", SCALES)
@pytest.mark.parametrize("kind", ACTIVATIONS)
def test_activation_equals_litert_reference_on_every_value(tmp_path, kind, scales):
    x_scale, x_zero_point, y_scale, y_zero_point = scales
    builder = tflite_models.TfliteBuilder(seed=1)
    x = builder.input((1, 16, 16, 2), scale=x_scale, zero_point=x_zero_point)
    path = write(tmp_path, builder, [builder.elementwise(x, kind, y_scale, y_zero_point)], kind.lower())
    graph = assert_equal_on(path, every_value(2))
    assert [t.function for t in tables_of(graph)] == [kind]


def test_elu_takes_litert_builtin_kernel_where_the_reference_resolver_has_none(tmp_path):
    """tosa-converter-for-tflite cannot lower int8 ELU and LiteRT's reference resolver has no ELU: the converter
    gets a stand-in, the table comes from LiteRT's builtin kernel (a table LiteRT fills itself)."""
    builder = tflite_models.TfliteBuilder(seed=2)
    x = builder.input((1, 16, 16, 2), scale=0.04, zero_point=10)
    path = write(tmp_path, builder, [builder.elementwise(x, "ELU", 0.02, 30)], "elu")
    graph = assert_equal_on(path, every_value(2), OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    assert [t.function for t in tables_of(graph)] == ["ELU"]


@pytest.mark.parametrize("scales", SCALES)
def test_prelu_has_a_table_per_channel(tmp_path, scales):
    x_scale, x_zero_point, y_scale, y_zero_point = scales
    builder = tflite_models.TfliteBuilder(seed=3)
    x = builder.input((1, 16, 16, 4), scale=x_scale, zero_point=x_zero_point)
    alpha = np.array([-0.5, 0.1, 0.25, 1.5], np.float32).reshape(1, 1, 4)
    path = write(tmp_path, builder, [builder.prelu(x, alpha, y_scale, y_zero_point)], "prelu")
    graph = assert_equal_on(path, every_value(4))
    (table,) = tables_of(graph)
    assert table.groups == (1 if x_zero_point == -128 else 4)  # no negative input: alpha changes nothing


@pytest.mark.parametrize("scales", SCALES)
@pytest.mark.parametrize("constant", [np.float32(1 / 6), np.array([0.5, -2.0, 0.1, 3.0], np.float32)],
                         ids=["scalar", "per_channel"])
def test_mul_by_a_constant_is_a_table(tmp_path, scales, constant):
    """Keras' hard_sigmoid writes x * 1/6 as MUL by a constant: element-wise, so a table (one per channel
    where the constant is a vector)."""
    x_scale, x_zero_point, y_scale, y_zero_point = scales
    builder = tflite_models.TfliteBuilder(seed=4)
    x = builder.input((1, 16, 16, 4), scale=x_scale, zero_point=x_zero_point)
    path = write(tmp_path, builder, [builder.mul(x, np.asarray(constant), y_scale, y_zero_point)], "mul_constant")
    graph = assert_equal_on(path, every_value(4))
    (table,) = tables_of(graph)
    assert table.function == "MUL" and table.groups == (1 if np.ndim(constant) == 0 else 4)


@pytest.mark.parametrize("scales", SCALES)
def test_mul_of_a_map_by_itself_on_every_value(tmp_path, scales):
    x_scale, x_zero_point, y_scale, y_zero_point = scales
    builder = tflite_models.TfliteBuilder(seed=5)
    x = builder.input((1, 16, 16, 2), scale=x_scale, zero_point=x_zero_point)
    path = write(tmp_path, builder, [builder.mul(x, x, y_scale * 4, y_zero_point)], "square")
    graph = assert_equal_on(path, every_value(2))
    assert [type(k.epilogue) for k in graph.kernels()] == [FixedPointMul]


def next_column(builder, x):
    """A depthwise 1 x 2 convolution whose output is each value's right neighbour, exactly: weights (0, 127) at
    scale 1/127, no bias, the input's quantization (|x - zero point| * 127 * (1/127 in float32) rounds back to
    the integer)."""
    channels = x.shape[-1]
    weights = np.zeros((1, 1, 2, channels), np.int8)
    weights[0, 0, 1] = 127
    w_scale = np.full(channels, 1 / 127, np.float32)
    w_index = builder._tensor("shift_weights", weights.shape, tflite_models.INT8, w_scale, np.zeros(channels, np.int64),
                              weights, axis=3)
    x_scale, zero_point = builder.quant[x.index]
    b_index = builder._tensor("shift_bias", (channels,), tflite_models.INT32, (np.float64(x_scale) * w_scale)
                              .astype(np.float32), np.zeros(channels, np.int64), np.zeros(channels, np.int32))
    y = builder._output("shift_out", x.calibration, x_scale, zero_point)
    options = tflite_models.schema.DepthwiseConv2DOptionsT()
    options.padding, options.depthMultiplier = tflite_models.schema.Padding.SAME, 1
    options.strideH = options.strideW = options.dilationHFactor = options.dilationWFactor = 1
    builder._op("DEPTHWISE_CONV_2D", [x.index, w_index, b_index], [y.index],
                tflite_models.schema.BuiltinOptions.DepthwiseConv2DOptions, options)
    return y


@pytest.mark.parametrize("scales", SCALES)
def test_mul_of_two_maps_on_every_pair_of_values(tmp_path, scales):
    """MUL(x, x's right neighbour) on a map whose even columns hold every value and the odd ones every value
    again: each of the 65,536 pairs of int8 values is multiplied once."""
    x_scale, x_zero_point, y_scale, y_zero_point = scales
    builder = tflite_models.TfliteBuilder(seed=5)
    x = builder.input((1, 256, 512, 2), scale=x_scale, zero_point=x_zero_point)
    neighbour = next_column(builder, x)
    product = builder.mul(x, neighbour, y_scale * 4, y_zero_point)
    values = np.zeros((1, 256, 512, 2), np.int8)
    values[0, :, 0::2] = np.arange(-128, 128, dtype=np.int8).reshape(256, 1, 1)
    values[0, :, 1::2] = np.arange(-128, 128, dtype=np.int8).reshape(1, 256, 1)
    shifted = write(tmp_path, builder, [neighbour], "neighbour")
    assert np.array_equal(tflite_reference(shifted, values)[0, :, :-1], values[0, :, 1:])
    graph = assert_equal_on(write(tmp_path, builder, [product], "pairs"), values)
    assert [type(k.epilogue) for k in graph.kernels()][-1] == FixedPointMul


def squeeze_excitation(activation=None, gate_first=False, seed=6) -> bytes:
    """conv -> the SE gate (global average pool, 1x1 conv, LOGISTIC) -> MUL of the map by its (1, 1, 1, C) gate
    -> MUL by the conv's output (two maps), as EfficientNet's blocks write it."""
    builder = tflite_models.TfliteBuilder(seed=seed)
    x = builder.input((1, 8, 8, 3))
    y = builder.conv(x, 8, activation="relu6")
    gate = builder.elementwise(builder.conv(builder.pool(y, 8), 8, kernel=1, activation=None), "LOGISTIC")
    scaled = builder.mul(*((gate, y) if gate_first else (y, gate)), activation=activation, name="excite")
    return builder.build([builder.mul(scaled, y, name="product")], "squeeze_excitation")


@pytest.mark.parametrize("activation, gate_first", [(None, False), ("relu6", False), (None, True)])
def test_squeeze_and_excitation_mul_broadcasts_the_gate(tmp_path, activation, gate_first):
    path = tmp_path / "se.tflite"
    path.write_bytes(squeeze_excitation(activation, gate_first))
    graph = lift(path)
    kinds = [type(k.epilogue) for k in graph.kernels()]
    assert kinds.count(FixedPointMul) == 2 and kinds.count(LookupTable) == 1
    for seed in range(4):
        x = model_input(graph, seed)
        ours, expected = reference.run(graph, x)[graph.outputs[0].name], tflite_reference(path, x)
        assert np.array_equal(ours, expected), f"{np.count_nonzero(ours != expected)} of {ours.size} differ"


def test_activation_reading_a_computed_operand_is_refused(tmp_path):
    builder = tflite_models.TfliteBuilder(seed=7)
    x = builder.input((1, 8, 8, 4))
    y = builder.conv(x, 4, activation=None)
    slope = builder.conv(x, 4, activation=None, name="slope")
    index = builder._tensor("prelu_out", (1, 8, 8, 4), tflite_models.INT8, np.float32(0.05), 0)
    builder._op("PRELU", [y.index, slope.index], [index])
    path = write(tmp_path, builder, [tflite_models.Tensor(index, y.calibration)], "prelu_computed")
    with pytest.raises(MingError, match=r"node 'prelu_out' \(PRELU\): an operand other than its input is computed"):
        lift(path)


def assert_cpp_equals_golden_on_every_pair(cases, calls: str, tmp_path, name: str) -> None:
    """The C++ `calls` (one printf per case, of int8 `a` and `b`) == each case's golden rule on all 65,536 pairs."""
    from test_cpp_numerics import CXXFLAGS, _compile

    exe = _compile('#include <cstdio>\n#include "ming_numerics.h"\nint main() {\n'
                   "  for (int x = -128; x < 128; x++)\n    for (int y = -128; y < 128; y++) {\n"
                   "    const int8_t a = static_cast<int8_t>(x), b = static_cast<int8_t>(y);\n"
                   f"{calls}\n    }}\n}}\n", tmp_path, name, CXXFLAGS)
    ours = np.array(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split(), np.int64)
    a, b = np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij")
    rule = rule_of(cases[0])
    golden = np.stack([rule.golden(e, (a.reshape(-1), b.reshape(-1)), None) for e in cases], axis=1).reshape(-1)
    assert np.array_equal(ours, golden)


@pytest.mark.parametrize("double_round", [True, False])
def test_cpp_mul_equals_the_golden_rule_on_every_pair(tmp_path, double_round):
    """ming::mul_fixed_point == TfliteMul's golden rule on all 65,536 pairs of int8 values, for zero points at
    both ends and multipliers with shifts on both sides of 31."""
    cases = [FixedPointMul(128, -127, 1_518_500_250, 38, -128, double_round),
             FixedPointMul(3, -40, 2_147_483_647, 45, 5, double_round, -20, 90),
             FixedPointMul(-127, 128, 1_073_741_824, 30, 127, double_round)]
    calls = "\n".join(
        f"    std::printf(\"%d\\n\", ming::mul_fixed_point<{str(e.double_round).lower()}>(a, b, {e.a_offset}, "
        f"{e.b_offset}, {e.multiplier}, {e.shift}, {e.zero_point}, {e.qmin}, {e.qmax}));" for e in cases)
    assert_cpp_equals_golden_on_every_pair(cases, calls, tmp_path, "mul_fixed_point")


@pytest.mark.parametrize("double_round", [True, False])
def test_cpp_narrow_mul_equals_the_golden_rule_on_every_pair(tmp_path, double_round):
    """ming::mul_narrow, with the constants numerics.narrow_fixed_point proves, == TfliteMul's golden rule on all
    65,536 pairs of int8 values; a multiplier of one (not below one) keeps the rule as written."""
    from ming_py.epilogues.binary import _narrow_mul

    cases = [FixedPointMul(128, -127, 1_518_500_250, 38, -128, double_round),
             FixedPointMul(3, -40, 2_147_483_647, 45, 5, double_round, -20, 90),
             FixedPointMul(-10, 7, 1_234_567_890, 40, 12, double_round)]
    assert _narrow_mul(FixedPointMul(-127, 128, 1_073_741_824, 30, 127, double_round)) is None
    narrow = [_narrow_mul(e) for e in cases]
    assert all(n is not None for n in narrow)
    assert _narrow_mul(FixedPointMul(3, -40, 2_147_483_647, 45, 5, double_round, narrow=False)) is None
    calls = "\n".join(
        f"    std::printf(\"%d\\n\", ming::mul_narrow<ming::Multiplier::dsp, {n.operand_bits}, {n.level_bits}>(a, b, "
        f"{e.a_offset}, {e.b_offset}, {n.multipliers[0]}u, {numerics.narrow_sum_residue(n.roundings_negative[0])}LL, "
        f"{numerics.narrow_sum_residue(n.roundings[0])}LL, {n.shift}, {n.low}, {n.high}, {n.center}, {e.zero_point}, "
        f"{e.qmin}, {e.qmax}));" for e, n in zip(cases, narrow))
    assert_cpp_equals_golden_on_every_pair(cases, calls, tmp_path, "mul_narrow")


# ---- C-simulation: one model per op family -------------------------------------------------------------------


def activations_model() -> bytes:
    builder = tflite_models.TfliteBuilder(seed=8)
    x = builder.input((1, 8, 8, 3))
    y = builder.elementwise(builder.conv(x, 8, activation=None), "HARD_SWISH", 0.03, -60)
    y = builder.elementwise(builder.conv(y, 8, activation=None, name="conv2"), "LEAKY_RELU", 0.02, -90, alpha=0.1)
    y = builder.prelu(y, np.linspace(-0.5, 0.5, 8, dtype=np.float32).reshape(1, 1, 8), 0.02, -10)
    return builder.build([builder.mul(y, np.float32(1 / 6), 0.004, -128)], "activations")


@pytest.mark.parametrize("model", [activations_model, lambda: squeeze_excitation(gate_first=True)],
                         ids=["tables", "mul"])
def test_csim_equals_litert_reference_kernels(tmp_path, model):
    path = tmp_path / "model.tflite"
    path.write_bytes(model())
    graph = lift(path)
    x = model_input(graph, 11)
    assert np.array_equal(csim(graph, tmp_path / "out", x, check_ports=True), tflite_reference(path, x))


GENERIC = """
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%a: tensor<4x4x{t}>, %b: tensor<4x4x{t}>, %init: tensor<4x4x{r}>) -> tensor<4x4x{r}> {{
  %0 = linalg.generic {{indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}}
      ins(%a, %b : tensor<4x4x{t}>, tensor<4x4x{t}>) outs(%init : tensor<4x4x{r}>) {{
  ^bb0(%x: {t}, %y: {t}, %out: {r}):
{body}
  }} -> tensor<4x4x{r}>
  return %0 : tensor<4x4x{r}>
}}
"""
I32_PRODUCT = "    %p = arith.muli %x, %y : i32\n    linalg.yield %p : i32"
NARROWED_PRODUCT = ("    %p = arith.muli %x, %y : i32\n    %n = arith.trunci %p : i32 to i16\n"
                    "    %w = arith.extsi %n : i16 to i32\n    linalg.yield %w : i32")
I8_PRODUCT = "    %p = arith.muli %x, %y : i8\n    linalg.yield %p : i8"


@pytest.mark.parametrize("body, types, is_product", [(I32_PRODUCT, ("i32", "i32"), True),
                                                      (NARROWED_PRODUCT, ("i32", "i32"), False),
                                                      (I8_PRODUCT, ("i8", "i8"), False)],
                         ids=["i32", "truncated_to_i16", "i8"])
def test_only_an_i32_body_is_taken_as_the_exact_product_of_two_chains(body, types, is_product):
    """The casts the payload reader drops must not hide a product that wraps: a muli truncated to i16 or done
    in i8 is no exact int32 product of the two inputs."""
    from iree.compiler import ir

    from ming_py.frontends.lift_generic import GenericMixin
    from ming_py.frontends.lift_values import IntTensor, IntProduct
    from ming_py.frontends.mlir_attrs import access_map
    from ming_py.ir import PARALLEL

    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        module = ir.Module.parse(GENERIC.format(t=types[0], r=types[1], body=body))
        generic = next(op for op in module.body.operations[0].regions[0].blocks[0].operations
                       if op.operation.name == "linalg.generic")
        maps = [access_map(a, "test") for a in generic.attributes["indexing_maps"]]
        product = GenericMixin._int_product(None, [IntTensor("a"), IntTensor("b")], maps, (PARALLEL, PARALLEL),
                                            (4, 4), generic.regions[0].blocks[0], "test")
    assert isinstance(product, IntProduct) == is_product
