"""TFLite models whose inputs and outputs are uint8, int8 or float32, as the converter writes them
(tests/data/tflite_interfaces, written by tests/generators/tflite_interfaces.py): the 9 combinations of input and
output type, per-channel and per-tensor, a Softmax before a uint8 output, an input RESHAPE (a vector viewed as a
map) and TRANSPOSE (a channels-first input), an output RESHAPE and TRANSPOSE, two outputs of different types.

The boundary's QUANTIZE, DEQUANTIZE and SOFTMAX and the input's layout ops run on the host (`tflite_boundary`,
`ming_host`): every model builds (the build verifies its C++ against `ming reference`), `ming reference` equals
LiteRT's reference kernels (BUILTIN_REF) on every value of every output, and so does the C-simulation of the build
given the array as the user passes it (uint8, int8 or float32 in the model's own shape, or float images for an
integer input, which the host quantizes as TFLite's QUANTIZE does). A QUANTIZE that is not the converter's shift
by 128 runs TFLite's Requantize on the host, equal to LiteRT on every one of the 256 input values."""

from __future__ import annotations

import json
from pathlib import Path

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter

import tflite_models
from test_cli import ming
from test_keras_tflite import assert_equal_outputs, litert_reference
from ming_py import reference
from ming_py.build import build
from ming_py.csim import run_csim
from ming_py.errors import MingError
from ming_py.frontends.tflite_boundary import _quantization, _requantize
from ming_py.frontends.tflite_model import load_tflite
from ming_py.pipeline import lift
from ming_py.contract import ming_host
from ming_py.runtime.ming_driver import Accelerator

DATA = Path(__file__).parent / "data" / "tflite_interfaces"
MODELS = sorted(p.name for p in DATA.glob("*.tflite"))


def _flatbuffer(model: schema.ModelT) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def model_arrays(path: Path, seeds=(0, 1, 2)):
    """Arrays as a user passes them to the model: its input's own type and shape, random, then the ends of the
    type's range."""
    detail = Interpreter(model_path=str(path)).get_input_details()[0]
    shape, dtype = tuple(detail["shape"]), detail["dtype"]
    for seed in seeds:
        rng = np.random.default_rng(seed)
        if dtype == np.float32:
            yield (rng.standard_normal(shape) * 2).astype(np.float32)
        else:
            info = np.iinfo(dtype)
            yield rng.integers(info.min, info.max + 1, shape).astype(dtype)
    if dtype != np.float32:
        info = np.iinfo(dtype)
        yield np.where(np.random.default_rng(9).random(shape) < 0.5, info.min, info.max).astype(dtype)


def litert_quantized(path: Path, images: np.ndarray) -> np.ndarray:
    """Float images as an integer input takes them: TFLite's QUANTIZE, half away from zero, with the input's own
    scale and zero point, saturated to its type (computed here, independently of ming_host)."""
    detail = Interpreter(model_path=str(path)).get_input_details()[0]
    scale, zero_point = detail["quantization"]
    scaled = (images.astype(np.float32) / np.float32(scale)).astype(np.float64)
    info = np.iinfo(detail["dtype"])
    return np.clip(np.sign(scaled) * np.floor(np.abs(scaled) + 0.5) + zero_point, info.min, info.max) \
        .astype(detail["dtype"])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(graph, build directory) of a model, lifted and built (verified) once."""
    cache = {}

    def load(name):
        if name not in cache:
            out = tmp_path_factory.mktemp(Path(name).stem) / "out"
            design = build(DATA / name, out)
            verification = json.loads(design.files["report.json"])["verification"]
            assert verification["verified"] and verification["equal"], verification
            cache[name] = lift(DATA / name), out
        return cache[name]

    return load


def test_the_corpus_has_every_interface_the_converter_writes():
    types = set()
    for name in MODELS:
        graph = model_of(name).subgraphs[0]
        types |= {(graph.tensors[graph.inputs[0]].type, graph.tensors[o].type) for o in graph.outputs}
    integers = {schema.TensorType.UINT8, schema.TensorType.INT8, schema.TensorType.FLOAT32}
    assert types == {(a, b) for a in integers for b in integers}


def model_of(name: str) -> schema.ModelT:
    return load_tflite(DATA / name)


@pytest.mark.parametrize("name", MODELS)
def test_reference_equals_litert_reference_kernels(name):
    path = DATA / name
    graph = lift(path)
    for x in model_arrays(path):
        result = reference.run(graph, x)
        assert_equal_outputs({o.name: result[o.name] for o in graph.outputs}, litert_reference(path, x))


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_the_build_verifies_and_its_csim_equals_litert_on_the_users_array(built, name):
    path = DATA / name
    graph, out = built(name)
    x = next(model_arrays(path, seeds=(5,)))
    assert_equal_outputs(run_csim(out, x), litert_reference(path, x))
    if x.dtype != np.float32:  # float images given to an integer input: quantized as TFLite's QUANTIZE does
        images = (np.random.default_rng(6).standard_normal(x.shape) * 3).astype(np.float32)
        assert_equal_outputs(run_csim(out, images), litert_reference(path, litert_quantized(path, images)))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["permute_input_uint8_uint8.tflite", "reshape_input_uint8_float.tflite",
                                  "two_outputs_mixed.tflite"])
def test_the_deployed_driver_takes_a_batch_of_the_models_arrays(built, name):
    path = DATA / name
    _, out = built(name)
    arrays = list(model_arrays(path, seeds=(7, 8, 9)))
    batch = np.concatenate(arrays)  # N images stacked on the batch axis
    outputs = Accelerator(out / "deploy", "csim").run(batch)
    for image, x in enumerate(arrays):
        expected = litert_reference(path, x)
        assert_equal_outputs({n: y[image][None] for n, y in outputs.items()}, expected)


def test_an_input_transpose_is_the_hosts_permutation_and_a_reshape_its_step():
    graph = lift(DATA / "permute_input_uint8_uint8.tflite")
    port = graph.inputs[0]
    # NCHW in, TRANSPOSE to NHWC, then NHWC to ming's channels first: the model's array as it is
    assert (port.onnx_shape, port.dtype, port.permutation, port.host_ops) == ((1, 3, 16, 16), "uint8", (), ())
    graph = lift(DATA / "reshape_input_uint8_float.tflite")
    port = graph.inputs[0]
    assert (port.onnx_shape, port.permutation) == ((1, 256), (0, 3, 1, 2))
    assert [(op.kind, op.shape) for op in port.host_ops] == [("reshape", (1, 16, 16, 1))]
    assert not any(k.source.startswith("functional_1/reshape") for k in graph.kernels())


# ---- a QUANTIZE that is not a shift: TFLite's Requantize ---------------------------------------------------


def quantize_model(in_type, in_quantization, out_type, out_quantization) -> bytes:
    """A model of one QUANTIZE of a 256-value vector from `in_type` to `out_type`."""
    model = schema.ModelT()
    model.version = 3
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.QUANTIZE
    code.version = 1
    model.operatorCodes = [code]
    model.buffers = [schema.BufferT() for _ in range(3)]
    tensors = []
    for index, (kind, (scale, zero_point)) in enumerate(((in_type, in_quantization), (out_type, out_quantization))):
        tensor = schema.TensorT()
        tensor.shape, tensor.type, tensor.buffer, tensor.name = [1, 256], kind, index + 1, f"t{index}".encode()
        tensor.quantization = schema.QuantizationParametersT()
        tensor.quantization.scale, tensor.quantization.zeroPoint = [scale], [zero_point]
        tensors.append(tensor)
    operator = schema.OperatorT()
    operator.opcodeIndex, operator.inputs, operator.outputs = 0, [0], [1]
    operator.builtinOptionsType = schema.BuiltinOptions.QuantizeOptions
    operator.builtinOptions = schema.QuantizeOptionsT()
    graph = schema.SubGraphT()
    graph.tensors, graph.inputs, graph.outputs, graph.operators = tensors, [0], [1], [operator]
    model.subgraphs = [graph]
    return _flatbuffer(model)


U8, I8 = schema.TensorType.UINT8, schema.TensorType.INT8
REQUANTIZATIONS = [  # (input type, scale, zero point, output type, scale, zero point)
    (U8, 0.0305, 132, I8, 0.0305, 4),  # the converter's shift: a plain shift by 128
    (U8, 0.0305, 132, I8, 0.0217, -3),  # narrower
    (U8, 1 / 255, 0, I8, 0.0117, 9),  # wider
    (I8, 0.00390625, -128, U8, 0.00390625, 0),  # the converter's shift after a Softmax
    (I8, 0.05, -7, U8, 0.11, 140),
    (I8, 0.02, 3, I8, 0.02, -5),  # only the zero point
    (I8, 0.5, 0, I8, 0.001, 0),  # saturating
    (U8, 0.3, 17, I8, 0.3 * 2 ** -20, 0),
]


@pytest.mark.parametrize("case", REQUANTIZATIONS)
def test_the_hosts_requantize_equals_litert_on_every_value(tmp_path, case):
    in_type, in_scale, in_zero, out_type, out_scale, out_zero = case
    path = tmp_path / "quantize.tflite"
    path.write_bytes(quantize_model(in_type, (in_scale, in_zero), out_type, (out_scale, out_zero)))
    model = load_tflite(path)
    source, out = model.subgraphs[0].tensors
    steps = _requantize(_quantization(source), out)
    x = np.arange(256, dtype=np.uint8) if in_type == U8 else np.arange(-128, 128).astype(np.int8)
    values = x.astype(np.int64) - (128 if in_type == U8 else 0)
    for op in steps:
        values = ming_host.tflite_requantize(values, op.scale, op.input_zero_point, op.zero_point)
    ours = ming_host.model_integers(values, "uint8" if out_type == U8 else "int8")
    (expected,) = litert_reference(path, x[None]).values()
    assert np.array_equal(ours, expected[0]), f"{np.count_nonzero(ours != expected[0])} of 256 differ"
    shift = (in_scale, in_zero - (128 if in_type == U8 else 0)) == (out_scale, out_zero - (128 if out_type == U8
                                                                                           else 0))
    assert (steps == []) == shift


def requantized_boundary(tmp_path: Path) -> Path:
    """cnn_uint8_uint8 with its input's and output's uint8 quantization changed: the converter's QUANTIZE ops
    after the input and before the output then requantize instead of shifting."""
    model = model_of("cnn_uint8_uint8.tflite")
    graph = model.subgraphs[0]
    for index, scale_factor, zero_point in ((graph.inputs[0], 1.37, 100), (graph.outputs[0], 0.61, 90)):
        q = graph.tensors[index].quantization
        q.scale, q.zeroPoint = [float(np.float32(q.scale[0] * scale_factor))], [zero_point]
    path = tmp_path / "requantized_boundary.tflite"
    path.write_bytes(_flatbuffer(model))
    return path


def test_a_boundary_quantize_that_is_not_a_shift_runs_tflites_requantize_on_the_host(tmp_path):
    path = requantized_boundary(tmp_path)
    graph = lift(path)
    assert [op.kind for op in graph.inputs[0].host_ops] == ["tflite_requantize"]
    assert [op.kind for op in graph.outputs[0].host_ops] == ["tflite_requantize"]
    for x in model_arrays(path, seeds=range(6)):
        result = reference.run(graph, x)
        assert_equal_outputs({o.name: result[o.name] for o in graph.outputs}, litert_reference(path, x))


# ---- what ming refuses ---------------------------------------------------------------------------------------


def test_a_uint8_quantize_inside_the_model_is_refused_by_name(tmp_path):
    """The output's QUANTIZE to uint8 left inside: the model's output made the int8 tensor before it."""
    model = model_of("cnn_int8_uint8.tflite")
    graph = model.subgraphs[0]
    quantize = next(op for op in graph.operators if graph.outputs[0] in op.outputs)
    graph.outputs = [quantize.inputs[0]]
    path = tmp_path / "inner_quantize.tflite"
    path.write_bytes(_flatbuffer(model))
    with pytest.raises(MingError, match=r"node 'StatefulPartitionedCall_1:0' \(QUANTIZE\) is supported only") as error:
        lift(path)
    assert "\n" not in str(error.value)


@pytest.mark.slow
def test_a_uint8_input_given_int8_values_is_refused_with_the_conversion(built):
    _, out = built("cnn_uint8_uint8.tflite")
    x = next(model_arrays(DATA / "cnn_uint8_uint8.tflite"))
    with pytest.raises(MingError) as error:
        run_csim(out, (x.astype(np.int16) - 128).astype(np.int8))
    message = str(error.value)
    assert "\n" not in message and "the model takes uint8 values" in message, message
    with pytest.raises(MingError, match="the model takes uint8 values"):
        run_csim(out, x.astype(np.int32) + 1000)


def test_ming_reference_takes_the_models_uint8_array_and_refuses_int8_with_the_conversion(tmp_path):
    path = DATA / "reshape_input_uint8_float.tflite"
    x = next(model_arrays(path))
    np.save(tmp_path / "x.npy", x)
    result = ming("reference", path, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy")
    assert result.returncode == 0, result.stderr
    (expected,) = litert_reference(path, x).values()
    assert np.array_equal(np.load(tmp_path / "y.npy"), expected)
    np.save(tmp_path / "wrong.npy", (x.astype(np.int16) - 128).astype(np.int8))
    result = ming("reference", path, "--input", tmp_path / "wrong.npy", "--output", tmp_path / "y.npy")
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert len(errors) == 1 and "input is int8, the model takes uint8 values (scale" in errors[0], result.stderr


def with_dequantize_quantize_pairs(tmp_path: Path) -> Path:
    """requantized_boundary's QUANTIZE ops of integers each made a DEQUANTIZE to float32 and a QUANTIZE of the
    floats (how older converters wrote a boundary between types)."""
    model = load_tflite(requantized_boundary(tmp_path))
    graph = model.subgraphs[0]
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.DEQUANTIZE
    code.version = 2
    model.operatorCodes.append(code)
    for quantize in [op for op in graph.operators if op.opcodeIndex == graph.operators[0].opcodeIndex]:
        source = graph.tensors[quantize.inputs[0]]
        floats = schema.TensorT()
        floats.shape, floats.type, floats.name = list(source.shape), schema.TensorType.FLOAT32, source.name + b"/f"
        model.buffers.append(schema.BufferT())
        floats.buffer = len(model.buffers) - 1
        graph.tensors.append(floats)
        dequantize = schema.OperatorT()
        dequantize.opcodeIndex, dequantize.inputs = len(model.operatorCodes) - 1, [quantize.inputs[0]]
        dequantize.outputs = [len(graph.tensors) - 1]
        quantize.inputs = [len(graph.tensors) - 1]
        graph.operators.insert(graph.operators.index(quantize), dequantize)
    path = tmp_path / "dequantize_quantize.tflite"
    path.write_bytes(_flatbuffer(model))
    return path


def test_dequantize_quantize_pairs_at_the_boundary_run_on_the_host(tmp_path):
    path = with_dequantize_quantize_pairs(tmp_path)
    graph = lift(path)
    assert [op.kind for op in graph.inputs[0].host_ops] == ["dequantize", "tflite_quantize"]
    assert [op.kind for op in graph.outputs[0].host_ops] == ["dequantize", "tflite_quantize"]
    for x in model_arrays(path, seeds=range(6)):
        result = reference.run(graph, x)
        assert_equal_outputs({o.name: result[o.name] for o in graph.outputs}, litert_reference(path, x))


def test_a_softmax_over_a_maps_channels_runs_on_the_host_in_the_models_layout(tmp_path):
    """A per-pixel classifier's SOFTMAX before the output: the host moves the accelerator's channels-first map
    back to NHWC before TFLite's Softmax over the last axis, the channels."""
    builder = tflite_models.TfliteBuilder(seed=3)
    y = builder.softmax(builder.conv(builder.input((1, 6, 6, 3)), 8, activation=None))
    path = tmp_path / "pixel_softmax.tflite"
    path.write_bytes(builder.build([y], "pixel_softmax"))
    graph = lift(path)
    assert [op.kind for op in graph.outputs[0].host_ops] == ["reshape", "transpose", "tflite_softmax"]
    for seed in range(3):
        x = np.random.default_rng(seed).integers(-128, 128, (1, 6, 6, 3)).astype(np.int8)
        result = reference.run(graph, x)
        assert_equal_outputs({o.name: result[o.name] for o in graph.outputs}, litert_reference(path, x))
