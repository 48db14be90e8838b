"""Keras 3 models as the TFLite converter writes them (tests/data/keras, written by
tests/generators/keras_tflite_models.py): every file ming accepts (`ACCEPTED`) gives a `ming reference` and a
C-simulation equal to LiteRT's reference kernels on every value of every output, and every other file is refused
with one line naming its op. Small models check the edges of the structural forms: a MEAN over a 1 x 1 map that
requantizes, a TILE that is not a repeat."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter, OpResolverType

import tflite_models
from emit_helpers import csim_outputs
from test_tflite import model_input
from ming_py import reference
from ming_py.errors import MingError
from ming_py.frontends.tflite_model import _flatbuffer, load_tflite, op_name
from ming_py.ir import LookupTable, Permute, Slice, Upsample
from ming_py.pipeline import lift

KERAS = Path(__file__).parent / "data" / "keras"
ACCEPTED = (
    "binary_classifier.tflite",
    "conv1d_flatten.tflite",
    "efficientnet_lite_block.tflite",
    "flatten_dense.tflite",
    "grouped_conv.tflite",
    "grouped_conv_output.tflite",
    "grouped_conv_shapes.tflite",
    "kws_conv1d.tflite",
    "maximum_minimum.tflite",
    "mobilenet_v2.tflite",
    "mobilenet_v3_small.tflite",
    "mobilenet_v3_small_minimalistic.tflite",
    "one_value_regressor.tflite",
    "resnet_v2_shortcut.tflite",
    "segmentation_head.tflite",
    "shufflenet_block.tflite",
    "strided_subsample_input.tflite",
    "transpose_conv.tflite",
    "two_head_detector.tflite",
    "two_head_detector_float_io.tflite",
)
REFUSED = tuple(sorted({p.name for p in KERAS.glob("*.tflite")} - set(ACCEPTED)))


@pytest.fixture(scope="module")
def keras_model(tmp_path_factory):
    """(the file, what LiteRT's reference kernels run, ming's graph) of a tests/data/keras model, lifted once."""
    directory = tmp_path_factory.mktemp("keras")
    cache = {}

    def load(name):
        if name not in cache:
            path = KERAS / name
            cache[name] = (path, reference_kernels_model(path, directory), lift(path))
        return cache[name]

    return load


def reference_kernels_model(path: Path, directory: Path) -> Path:
    """The model for LiteRT's BUILTIN_REF resolver: the file itself, or for a model with TILE a copy whose TILE
    operator code says version 2. The resolver registers TILE up to version 2 and refuses the converter's
    int8 version 3 at allocation; the kernel (tensorflow/lite/kernels/tile.cc) copies values the same way at
    every version. LiteRT's default kernels are no substitute: their optimized CONV_2D already differs from
    the reference one (13 of 18,432 values of two_head_detector's first conv on a random input)."""
    model = load_tflite(path)
    tile = schema.BuiltinOperator.TILE
    codes = [c for c in model.operatorCodes if max(c.builtinCode, c.deprecatedBuiltinCode) == tile]
    if not codes:
        return path
    for code in codes:
        code.version = 2
    copy = directory / path.name
    copy.write_bytes(_flatbuffer(model))
    return copy


def litert_reference(path: Path, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every output of LiteRT's reference kernels, by name."""
    interpreter = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return {d["name"]: interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()}


def assert_equal_outputs(ours: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert list(ours) == list(expected)
    for name, y in expected.items():
        assert ours[name].dtype == y.dtype and ours[name].shape == y.shape, name
        assert np.array_equal(ours[name], y), f"{name}: {np.count_nonzero(ours[name] != y)} of {y.size} differ"


def assert_reference_and_csim_equal_litert(graph, path: Path, tmp_path: Path) -> None:
    """`ming reference` on 4 inputs and the C-simulation on one == LiteRT's reference kernels, every value."""
    for seed in range(4):
        x = model_input(graph, seed)
        result = reference.run(graph, x)
        assert_equal_outputs({o.name: result[o.name] for o in graph.outputs}, litert_reference(path, x))
    x = model_input(graph, 11)
    assert_equal_outputs(csim_outputs(graph, tmp_path / "out", x), litert_reference(path, x))


@pytest.mark.parametrize("name", ACCEPTED)
def test_reference_equals_litert_reference_kernels(keras_model, name):
    _, runnable, graph = keras_model(name)
    for seed in range(4):
        x = model_input(graph, seed)
        result = reference.run(graph, x)
        assert_equal_outputs({o.name: result[o.name] for o in graph.outputs}, litert_reference(runnable, x))


@pytest.mark.parametrize("name", ACCEPTED)
def test_csim_equals_litert_reference_kernels(keras_model, tmp_path, name):
    _, runnable, graph = keras_model(name)
    x = model_input(graph, 11)
    expected = litert_reference(runnable, x)
    ours = csim_outputs(graph, tmp_path / "out", x, check_ports=True)
    assert_equal_outputs({n: y.reshape(expected[n].shape) for n, y in ours.items()}, expected)


def test_every_model_not_accepted_is_refused_naming_its_op():
    assert set(ACCEPTED) <= {p.name for p in KERAS.glob("*.tflite")}
    for name in REFUSED:
        path = KERAS / name
        with pytest.raises(MingError) as error:
            lift(path)
        message = str(error.value)
        ops = {op_name(m, o) for m in [load_tflite(path)] for o in m.subgraphs[0].operators}
        assert "\n" not in message and any(f"({op})" in message for op in ops), message


def test_upsampling2d_is_one_nearest_upsample_of_rows_and_columns(keras_model):
    _, _, graph = keras_model("two_head_detector.tflite")
    (upsample,) = [n for n in graph.nodes if isinstance(n, Upsample)]
    assert upsample.factors == (1, 2, 2)
    assert graph.shape_of(upsample.input) == (16, 6, 6) and graph.shape_of(upsample.output) == (16, 12, 12)


def test_conv1d_maps_are_channels_first_and_the_input_a_host_permutation(keras_model):
    _, _, graph = keras_model("kws_conv1d.tflite")
    port = graph.inputs[0]
    assert (port.onnx_shape, port.permutation) == ((1, 49, 10), (2, 0, 1))
    convs = [k for k in graph.kernels() if k.op == "conv"]
    assert [graph.shape_of(k.output.tensor) for k in convs] == [(24, 49), (32, 25), (32, 25)]


def test_a_grouped_convolution_is_one_convolution_per_group_of_channel_slices(keras_model):
    _, _, graph = keras_model("grouped_conv.tflite")
    slices = [n for n in graph.nodes if isinstance(n, Slice)]
    assert len({s.input for s in slices}) == 1 and sorted(s.start for s in slices) == [0, 4, 8, 12]
    readers = [k for k in graph.kernels() if {o.tensor for o in k.inputs} & {s.output for s in slices}]
    assert len(readers) == 4 and all(k.op == "conv" for k in readers)


def test_a_channel_shuffle_and_splits_are_permutes_and_slices_of_channels(keras_model):
    _, _, graph = keras_model("shufflenet_block.tflite")
    permutes = [n for n in graph.nodes if isinstance(n, Permute)]
    # Reshape (8, 8, g, 24 / g) -> Permute -> Reshape: output channel c is input channel (c % g) * 24 / g + c // g
    assert sorted(p.order for p in permutes) == sorted(
        tuple((c % g) * (24 // g) + c // g for c in range(24)) for g in (2, 3))
    assert all(graph.shape_of(p.output) == (24, 8, 8) for p in permutes)
    # SPLIT in halves of 12; SPLIT_V into 8 and 16, the 8 read only as its channels 2:6 and :2 (slices of the map)
    assert sorted((s.start, graph.shape_of(s.output)[0]) for s in graph.nodes if isinstance(s, Slice)) == [
        (0, 2), (0, 12), (2, 4), (8, 16), (12, 12)]


@pytest.mark.parametrize("name, shape", [("flatten_dense.tflite", (8, 4, 4)), ("conv1d_flatten.tflite", (8, 13))])
def test_a_flatten_in_pixel_major_order_is_a_permute_of_the_channel_major_one(keras_model, name, shape):
    _, _, graph = keras_model(name)
    (permute,) = [n for n in graph.nodes if isinstance(n, Permute)]
    assert graph.shape_of(permute.input) == (int(np.prod(shape)),)
    # TFLite's element (pixel p, channel c) at p * C + c, ming's at c * P + p
    channels, pixels = shape[0], int(np.prod(shape[1:]))
    assert permute.order == tuple(c * pixels + p for p in range(pixels) for c in range(channels))


# ---- small models of the edges -------------------------------------------------------------------------------


def _mean_over_one_pixel(scale_factor: float, zero_point_shift: int) -> bytes:
    """A conv to a 1 x 1 map, then MEAN over it whose output scale is `scale_factor` times its input's and
    whose zero point is `zero_point_shift` above (Keras keeps both equal)."""
    b = tflite_models.TfliteBuilder(seed=21)
    x = b.input((1, 3, 3, 4))
    x = b.conv(x, 8, padding="valid", name="conv")
    y = b.mean(x, name="gap")
    scale, zero_point = b.quant[x.index]
    quantization = b.tensors[y.index].quantization
    quantization.scale, quantization.zeroPoint = [scale * scale_factor], [zero_point + zero_point_shift]
    b.quant[y.index] = (scale * scale_factor, zero_point + zero_point_shift)
    return b.build([b.fully_connected(y, 5, name="dense")], "mean_over_one_pixel")


@pytest.mark.parametrize("scale_factor, zero_point_shift", [(1.0, 0), (0.37, 3), (2.5, 7)])
def test_mean_over_a_1x1_map_is_its_requantization(tmp_path, scale_factor, zero_point_shift):
    """Keras' MEAN over a 1 x 1 map is the identity (no node); another is a table of its requantization."""
    path = tmp_path / "mean.tflite"
    path.write_bytes(_mean_over_one_pixel(scale_factor, zero_point_shift))
    graph = lift(path)
    tables = [k for k in graph.kernels() if isinstance(k.epilogue, LookupTable)]
    assert len(tables) == (scale_factor != 1.0)
    assert_reference_and_csim_equal_litert(graph, path, tmp_path)


def _tiled(multiples: list[int]) -> bytes:
    """A conv whose map TILE copies whole (not value by value), then a 1x1 conv."""
    b = tflite_models.TfliteBuilder(seed=22)
    x = b.conv(b.input((1, 4, 4, 3)), 8, name="conv")
    tiled = x.calibration.reshape(b.calibration, 4, 4, 8)
    tiled = np.tile(tiled, [1] + multiples[1:])
    y = b._same_quant("tiled", x, tiled)
    b._op("TILE", [x.index, b._int32_constant("multiples", multiples)], [y.index])
    return b.build([b.conv(y, 4, kernel=1, name="head")], "tiled")


def test_a_tile_that_is_not_a_repeat_is_refused_by_name(tmp_path):
    path = tmp_path / "tiled.tflite"
    path.write_bytes(_tiled([1, 1, 2, 1]))
    with pytest.raises(MingError, match=r"^node 'tiled' \(TILE\): ming takes TILE only as a repeat") as error:
        lift(path)
    assert "\n" not in str(error.value)


def test_a_shape_of_a_symbolic_dimension_is_refused_by_name(tmp_path):
    b = tflite_models.TfliteBuilder(seed=23)
    x = b.conv(b.input((1, 4, 4, 3), symbolic_batch=True), 8, name="conv")
    b.tensors[x.index].shapeSignature = [-1, -1, 4, 8]
    shape = b._tensor("conv_shape", (4,), tflite_models.INT32)
    b._op("SHAPE", [x.index], [shape])
    flat = b._same_quant("flat", x, x.calibration.reshape(b.calibration, -1))
    b._op("RESHAPE", [x.index, shape], [flat.index])
    path = tmp_path / "shape.tflite"
    path.write_bytes(b.build([flat], "shape"))
    with pytest.raises(MingError, match=r"^node 'conv_shape' \(SHAPE\) reads the shape"):
        lift(path)


def _conv1d_by_hand() -> bytes:
    """Conv1D as older converters write it, with the ops themselves: EXPAND_DIMS -> CONV_2D on a map 1 high ->
    SQUEEZE, twice (the second strided); the model's output is the N x L x C map."""
    b = tflite_models.TfliteBuilder(seed=24)
    x = b.input((1, 16, 4))
    for index, (channels, stride) in enumerate([(8, 1), (6, 2)]):
        expanded = b._same_quant(f"expanded_{index}", x, x.calibration[:, None])
        b._op("EXPAND_DIMS", [x.index, b._int32_constant(f"axis_{index}", 1)], [expanded.index],
              schema.BuiltinOptions.ExpandDimsOptions, schema.ExpandDimsOptionsT())
        y = b.conv(expanded, channels, kernel=(1, 3), stride=stride, name=f"conv_{index}")
        x = b._same_quant(f"squeezed_{index}", y, y.calibration[:, 0])
        options = schema.SqueezeOptionsT()
        options.squeezeDims = [1]
        b._op("SQUEEZE", [y.index], [x.index], schema.BuiltinOptions.SqueezeOptions, options)
    return b.build([x], "conv1d_by_hand")


def test_expand_dims_and_squeeze_are_reshapes_around_a_conv1d(tmp_path):
    path = tmp_path / "conv1d.tflite"
    path.write_bytes(_conv1d_by_hand())
    graph = lift(path)
    assert (graph.outputs[0].onnx_shape, graph.outputs[0].permutation) == ((1, 8, 6), (2, 0, 1))
    assert_reference_and_csim_equal_litert(graph, path, tmp_path)
