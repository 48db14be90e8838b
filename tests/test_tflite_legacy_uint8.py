"""Legacy uint8 TFLite models (TF1 quantization-aware training, `inference_type=tf.uint8`), compiled as the int8
model of the same integers shifted by -128 (`frontends/tflite_uint8.py`), equal to LiteRT's uint8 reference
kernels (`BUILTIN_REF`) value for value:

- the rewrite itself, on LiteRT's own kernels: single-op uint8 CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED
  models whose weights lie up to 255 from their zero point, over geometries (kernel, stride, dilation, padding,
  odd and even sizes, depth multiplier), against the rewritten int8 flatbuffer;
- Coral's published MobileNetV1 0.25 (tests/data/published/mobilenet_v1_0.25_128_quant.tflite) on two images and
  on random and extreme inputs, every kernel's output compared with LiteRT's tensor of the same name, and built
  as published;
- a TF1 quantization-aware model made by the real converter (tests/generators/legacy_uint8_models.py: padded
  conv and depthwise on inputs of zero point 128, ADD, MAX_POOL_2D, an AVERAGE_POOL_2D with windows of 4, 6 and
  9 elements, CONCATENATION, FULLY_CONNECTED behind a flatten, SOFTMAX), every kernel compared, C-simulated and
  built on the KV260, and its float-input/output variant (QUANTIZE to uint8, DEQUANTIZE on the host);
- uint8 ops without an exact int8 form refused by name.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from ming_py.errors import MingError
from ming_py.frontends.tflite_fold import op_name
from ming_py.frontends.tflite_uint8 import LegacyUint8, legacy_uint8_as_int8

DATA = Path(__file__).resolve().parent / "data"
CORAL = DATA / "published" / "mobilenet_v1_0.25_128_quant.tflite"
CNN = DATA / "legacy" / "legacy_uint8_cnn.tflite"
CNN_FLOAT_IO = DATA / "legacy" / "legacy_uint8_cnn_float_io.tflite"
IMAGES = (DATA / "legacy" / "coral_cat_128.npy", DATA / "legacy" / "coral_bird_128.npy")


# ---- LiteRT ---------------------------------------------------------------------------------------


def _interpreter(model: Path | bytes, x: np.ndarray) -> Interpreter:
    source = {"model_path": str(model)} if isinstance(model, Path) else {"model_content": model}
    interpreter = Interpreter(**source, experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                              experimental_preserve_all_tensors=True)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return interpreter


def litert_outputs(model: Path | bytes, x: np.ndarray) -> dict[str, np.ndarray]:
    interpreter = _interpreter(model, x)
    return {d["name"]: interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()}


def litert_tensors(model: Path, x: np.ndarray) -> dict[str, np.ndarray]:
    interpreter = _interpreter(model, x)
    return {d["name"]: interpreter.get_tensor(d["index"]) for d in interpreter.get_tensor_details()}


# ---- the rewrite on LiteRT's own kernels (no IREE) -----------------------------------------------


def _tensor(name: str, dtype: int, shape, scale: float | None = None, zero_point: int = 0, buffer: int = 0):
    tensor = schema.TensorT()
    tensor.name, tensor.type, tensor.shape, tensor.buffer = name.encode(), dtype, list(shape), buffer
    if scale is not None:
        tensor.quantization = schema.QuantizationParametersT()
        tensor.quantization.scale, tensor.quantization.zeroPoint = [scale], [zero_point]
    return tensor


def _buffer(values: np.ndarray | None = None):
    buffer = schema.BufferT()
    if values is not None:
        buffer.data = np.frombuffer(np.ascontiguousarray(values).tobytes(), np.uint8).copy()
    return buffer


def _packed(model: schema.ModelT) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _out_size(size: int, kernel: int, stride: int, dilation: int, same: bool) -> int:
    return -(-size // stride) if same else (size - (kernel - 1) * dilation - 1) // stride + 1


def single_op_uint8_model(kind: str, size: tuple[int, int], channels: int, kernel: tuple[int, int] = (1, 1),
                          stride: int = 1, dilation: int = 1, same: bool = True, multiplier: int = 1,
                          out_channels: int = 4, seed: int = 0, outliers: int | None = None,
                          zero_point: int = 40) -> bytes:
    """A uint8 CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED as TF1's converter writes one: input zero point 100,
    weights over all of 0..255 with `zero_point` 40 (up to 215 from it), int32 bias, output zero point 120. With
    `outliers`, the weights lie within 127 of the zero point but for that many of them (255: 215 above it)."""
    rng = np.random.default_rng(seed)
    (h, w), (kh, kw) = size, kernel
    if kind == "FULLY_CONNECTED":
        in_shape, w_shape = [1, h * w * channels], [out_channels, h * w * channels]
        out_shape, options = [1, out_channels], schema.FullyConnectedOptionsT()
    else:
        out_h, out_w = (_out_size(n, k, stride, dilation, same) for n, k in ((h, kh), (w, kw)))
        depthwise = kind == "DEPTHWISE_CONV_2D"
        out_channels = channels * multiplier if depthwise else out_channels
        in_shape, out_shape = [1, h, w, channels], [1, out_h, out_w, out_channels]
        w_shape = [1, kh, kw, out_channels] if depthwise else [out_channels, kh, kw, channels]
        options = schema.DepthwiseConv2DOptionsT() if depthwise else schema.Conv2DOptionsT()
        options.padding = schema.Padding.SAME if same else schema.Padding.VALID
        options.strideH = options.strideW = stride
        options.dilationHFactor = options.dilationWFactor = dilation
        if depthwise:
            options.depthMultiplier = multiplier
    if outliers is None:
        weights = rng.integers(0, 256, w_shape).astype(np.uint8)
        weights.reshape(-1)[:2] = (0, 255)
    else:
        weights = rng.integers(0, zero_point + 128, w_shape).astype(np.uint8)
        weights.reshape(-1)[rng.choice(weights.size, outliers, replace=False)] = 255
    taps = int(np.prod(w_shape[1:])) if kind != "DEPTHWISE_CONV_2D" else kh * kw
    bias = rng.integers(-3000, 3000, out_shape[-1]).astype(np.int32)
    model = schema.ModelT()
    model.version, model.buffers = 3, [_buffer(), _buffer(weights), _buffer(bias)]
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = getattr(schema.BuiltinOperator, kind)
    code.version = 2 if kind == "DEPTHWISE_CONV_2D" else 1
    model.operatorCodes = [code]
    graph = schema.SubGraphT()
    graph.tensors = [_tensor("input", schema.TensorType.UINT8, in_shape, 0.02, 100),
                     _tensor("weights", schema.TensorType.UINT8, w_shape, 0.01, zero_point, 1),
                     _tensor("bias", schema.TensorType.INT32, [out_shape[-1]], 0.0002, 0, 2),
                     _tensor("output", schema.TensorType.UINT8, out_shape, 0.0002 * 60 * np.sqrt(taps), 120)]
    operator = schema.OperatorT()
    operator.opcodeIndex, operator.inputs, operator.outputs = 0, [0, 1, 2], [3]
    operator.builtinOptionsType = getattr(schema.BuiltinOptions, type(options).__name__.removesuffix("T"))
    operator.builtinOptions = options
    graph.operators, graph.inputs, graph.outputs = [operator], [0], [3]
    model.subgraphs = [graph]
    return _packed(model)


def rewritten(model: bytes) -> bytes:
    unpacked = schema.ModelT.InitFromPackedBuf(bytearray(model), 0)
    legacy_uint8_as_int8(unpacked)
    return _packed(unpacked)


def _assert_rewrite_exact(model: bytes, seeds=range(3)) -> None:
    shape = schema.ModelT.InitFromPackedBuf(bytearray(model), 0).subgraphs[0].tensors[0].shape
    int8 = rewritten(model)
    inputs = [np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8) for seed in seeds]
    inputs += [np.full(shape, 255, np.uint8), np.zeros(shape, np.uint8)]
    for x in inputs:
        (expected,), (ours,) = litert_outputs(model, x).values(), litert_outputs(int8, (x - 128).view(np.int8)).values()
        assert ours.dtype == np.int8 and ours.shape == expected.shape
        assert np.array_equal(ours.astype(np.int64) + 128, expected), \
            f"{np.count_nonzero(ours.astype(np.int64) + 128 != expected)} of {expected.size} differ"


WINDOWS = [(kind, size, kernel, stride, dilation, same)
           for kind in ("CONV_2D", "DEPTHWISE_CONV_2D")
           for size, kernel, stride, dilation, same in itertools.product(
               ((7, 8), (6, 5)), ((3, 3), (1, 1), (2, 3), (5, 1)), (1, 2), (1, 2), (True, False))
           if (size[0] - (kernel[0] - 1) * dilation) >= 1 and (size[1] - (kernel[1] - 1) * dilation) >= 1]


@pytest.mark.unit
@pytest.mark.parametrize("kind,size,kernel,stride,dilation,same", WINDOWS)
def test_split_weights_equal_litert_uint8_window_kernels(kind, size, kernel, stride, dilation, same):
    _assert_rewrite_exact(single_op_uint8_model(kind, size, 3, kernel, stride, dilation, same))


@pytest.mark.unit
@pytest.mark.parametrize("multiplier", (1, 2, 3))
def test_split_weights_equal_litert_uint8_depthwise_with_depth_multiplier(multiplier):
    _assert_rewrite_exact(single_op_uint8_model("DEPTHWISE_CONV_2D", (6, 7), 2, (3, 3), 2, 1, True, multiplier))


@pytest.mark.unit
@pytest.mark.parametrize("size,channels", (((1, 1), 40), ((3, 2), 5)))
def test_split_weights_equal_litert_uint8_fully_connected(size, channels):
    _assert_rewrite_exact(single_op_uint8_model("FULLY_CONNECTED", size, channels, out_channels=7))


@pytest.mark.unit
@pytest.mark.parametrize("kind", ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"))
@pytest.mark.parametrize("outliers", (1, 3, 7))
def test_split_weights_with_few_outliers_equal_litert_uint8_kernels(kind, outliers):
    """Only some input channels are read again (runs of them sliced), as in published models."""
    for seed in range(3):
        model = single_op_uint8_model(kind, (5, 6), 9, (3, 3) if kind != "FULLY_CONNECTED" else (1, 1), seed=seed,
                                      outliers=outliers, out_channels=6)
        _assert_rewrite_exact(model)


@pytest.mark.unit
@pytest.mark.parametrize("kind", ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"))
def test_weights_255_above_a_zero_point_0_split_in_three_equal_litert_uint8_kernels(kind):
    model = single_op_uint8_model(kind, (5, 6), 8, (3, 3) if kind != "FULLY_CONNECTED" else (1, 1), seed=4,
                                  zero_point=0)
    assert sum(t.name.endswith(b"weights_split") for t in
               schema.ModelT.InitFromPackedBuf(bytearray(rewritten(model)), 0).subgraphs[0].tensors) == 1
    _assert_rewrite_exact(model)


@pytest.mark.unit
def test_weights_within_int8_of_their_zero_point_are_centered_not_split():
    model = schema.ModelT.InitFromPackedBuf(bytearray(CNN.read_bytes()), 0)
    before = [op_name(model, op) for op in model.subgraphs[0].operators]
    legacy_uint8_as_int8(model)
    graph = model.subgraphs[0]
    after = [op_name(model, op) for op in graph.operators]
    used = {i for op in graph.operators for i in (*op.inputs, *op.outputs) if i >= 0}
    assert not any(graph.tensors[i].type == schema.TensorType.UINT8 for i in used)
    # the 3x3 conv and the dense layer read some input channels again (SLICE, CONCATENATION), the depthwise conv
    # its columns twice (RESIZE_NEAREST_NEIGHBOR, PAD); the 1x1 conv's weights (zero point 128) are only centered
    added = {kind: after.count(kind) - before.count(kind) for kind in set(after)}
    assert added.pop("CONCATENATION") == 2 and added.pop("RESIZE_NEAREST_NEIGHBOR") == added.pop("PAD") == 1
    added.pop("SLICE", None)  # the channels read again, where they are not all
    assert not any(added.values())
    pointwise = _operator(model, "Relu6_1;add_2;Conv2D_1;Const_51")
    weights = graph.tensors[pointwise.inputs[1]]
    assert weights.type == schema.TensorType.INT8 and list(weights.shape) == [8, 1, 1, 8]
    assert list(weights.quantization.zeroPoint) == [0]


def _uint8_port_model():
    """TF2's `inference_input_type=tf.uint8`: a QUANTIZE from the uint8 input, int8 everywhere else."""
    model = schema.ModelT()
    model.version, model.buffers = 3, [_buffer()]
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.QUANTIZE
    model.operatorCodes = [code]
    graph = schema.SubGraphT()
    graph.tensors = [_tensor("input", schema.TensorType.UINT8, [1, 4], 0.5, 128),
                     _tensor("output", schema.TensorType.INT8, [1, 4], 0.5, 0)]
    operator = schema.OperatorT()
    operator.opcodeIndex, operator.inputs, operator.outputs = 0, [0], [1]
    graph.operators, graph.inputs, graph.outputs = [operator], [0], [1]
    model.subgraphs = [graph]
    return model


@pytest.mark.unit
def test_an_int8_model_with_uint8_ports_is_left_to_the_host_boundary():
    model = _uint8_port_model()
    graph = model.subgraphs[0]
    assert legacy_uint8_as_int8(model) == LegacyUint8()  # nothing to finish after the lifting
    assert [t.type for t in graph.tensors] == [schema.TensorType.UINT8, schema.TensorType.INT8]
    assert graph.tensors[0].quantization.zeroPoint == [128] and len(graph.operators) == 1


# ---- the published Coral model ----------------------------------------------------------------------


def _kernels_equal_litert(graph, path: Path, x: np.ndarray) -> int:
    """Every kernel whose output is a uint8 tensor of the model equals LiteRT's (+128); how many there are."""
    from ming_py import reference

    theirs = litert_tensors(path, x)
    values = {graph.inputs[0].tensor: reference.accelerator_input(x, graph.inputs[0]).reshape(
        graph.shape_of(graph.inputs[0].tensor))}
    reference.run_integer(graph, values)
    compared = 0
    for kernel in graph.kernels():
        tensor = theirs.get(kernel.source)
        if tensor is None or tensor.dtype != np.uint8:
            continue
        expected = tensor[0].transpose(2, 0, 1) if tensor.ndim == 4 else tensor[0]
        ours = values[kernel.output.tensor].astype(np.int64).reshape(expected.shape) + 128
        assert np.array_equal(ours, expected), \
            f"{kernel.name}: {np.count_nonzero(ours != expected)} of {expected.size} differ"
        compared += 1
    return compared


def _outputs_equal_litert(graph, path: Path, x: np.ndarray) -> None:
    from ming_py import reference

    result = reference.run(graph, x)
    for name, expected in litert_outputs(path, x).items():
        assert result[name].dtype == np.uint8 and result[name].shape == expected.shape
        assert np.array_equal(result[name], expected), f"{name}: {np.count_nonzero(result[name] != expected)} differ"


def _extreme_inputs(shape):
    yield from (np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8) for seed in (0, 1))
    yield np.where(np.random.default_rng(2).random(shape) < 0.5, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def coral():
    from ming_py.pipeline import lift

    return lift(CORAL)


def test_coral_mobilenet_equals_litert_on_two_images(coral):
    assert coral.inputs[0].dtype == "uint8" and coral.outputs[0].dtype == "uint8"
    for image in IMAGES:
        x = np.load(image)
        _outputs_equal_litert(coral, CORAL, x)
        assert _kernels_equal_litert(coral, CORAL, x) == len(list(coral.kernels())) == 29


def test_coral_mobilenet_equals_litert_on_random_and_extreme_inputs(coral):
    for x in _extreme_inputs(coral.inputs[0].onnx_shape):
        _outputs_equal_litert(coral, CORAL, x)
        assert _kernels_equal_litert(coral, CORAL, x) == 29


@pytest.mark.slow
def test_coral_mobilenet_builds_verified_as_published(tmp_path):
    """MobileNetV1 0.25 with its weights split (615,704 int8 weights) needs more BRAM than the KV260 has
    without URAM weights; it is built for the U250."""
    from ming_py.build import build
    from ming_py.options import BuildOptions

    design = build(CORAL, tmp_path / "out", BuildOptions(board="u250"))
    verification = json.loads(design.files["report.json"])["verification"]
    assert verification["verified"] and verification["equal"], verification


# ---- the TF1 quantization-aware model -------------------------------------------------------------


@pytest.fixture(scope="module")
def cnn():
    from ming_py.pipeline import lift

    return lift(CNN)


def test_legacy_cnn_equals_litert_kernel_by_kernel(cnn):
    for x in [*_extreme_inputs(cnn.inputs[0].onnx_shape), np.zeros(cnn.inputs[0].onnx_shape, np.uint8)]:
        _outputs_equal_litert(cnn, CNN, x)
        assert _kernels_equal_litert(cnn, CNN, x) == len(list(cnn.kernels())) == 7


def test_legacy_cnn_csim_equals_litert(cnn, tmp_path):
    from emit_helpers import csim_outputs

    x = np.random.default_rng(5).integers(0, 256, cnn.inputs[0].onnx_shape).astype(np.uint8)
    ours = csim_outputs(cnn, tmp_path / "out", x)
    for name, expected in litert_outputs(CNN, x).items():
        assert ours[name].dtype == np.uint8 and np.array_equal(ours[name], expected)


def test_legacy_cnn_with_float_io_equals_litert_kernel_by_kernel():
    """QUANTIZE to uint8 at the input and DEQUANTIZE after the output's SOFTMAX, on the host."""
    from ming_py import reference
    from ming_py.pipeline import lift

    graph = lift(CNN_FLOAT_IO)
    assert graph.inputs[0].dtype == graph.outputs[0].dtype == "float32"
    for seed in range(3):
        x = np.random.default_rng(seed).uniform(-1.2, 1.2, graph.inputs[0].onnx_shape).astype(np.float32)
        (name, expected), = litert_outputs(CNN_FLOAT_IO, x).items()
        assert np.array_equal(reference.run(graph, x)[name], expected)
        assert _kernels_equal_litert(graph, CNN_FLOAT_IO, x) == 7


@pytest.mark.slow
def test_legacy_cnn_builds_verified_on_the_kv260(tmp_path):
    from ming_py.build import build

    design = build(CNN, tmp_path / "out")
    verification = json.loads(design.files["report.json"])["verification"]
    assert verification["verified"] and verification["equal"], verification


# ---- refusals -----------------------------------------------------------------------------------


def _edited(edit) -> bytes:
    model = schema.ModelT.InitFromPackedBuf(bytearray(CNN.read_bytes()), 0)
    edit(model)
    return _packed(model)


def _operator(model, name: str):
    graph = model.subgraphs[0]
    return next(op for op in graph.operators if graph.tensors[op.outputs[0]].name.decode() == name)


@pytest.mark.unit
def test_a_uint8_op_without_an_exact_int8_form_is_refused_by_name():
    def softmax_as_logistic(model):
        operator = _operator(model, "output")
        code = schema.OperatorCodeT()
        code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.LOGISTIC
        code.version = 1
        model.operatorCodes.append(code)
        operator.opcodeIndex, operator.builtinOptionsType, operator.builtinOptions = len(model.operatorCodes) - 1, 0, None

    model = schema.ModelT.InitFromPackedBuf(bytearray(_edited(softmax_as_logistic)), 0)
    with pytest.raises(MingError, match=r"node 'output' \(LOGISTIC\) computes on uint8 tensors"):
        legacy_uint8_as_int8(model)


@pytest.mark.unit
def test_a_uint8_concatenation_that_rescales_is_refused_by_name():
    def rescaled_input(model):
        graph = model.subgraphs[0]
        tensor = graph.tensors[_operator(model, "MaxPool2d").outputs[0]]
        tensor.quantization.scale = [tensor.quantization.scale[0] * 2]

    model = schema.ModelT.InitFromPackedBuf(bytearray(_edited(rescaled_input)), 0)
    with pytest.raises(MingError, match=r"node 'concat' \(CONCATENATION\) rescales its uint8 inputs"):
        legacy_uint8_as_int8(model)
