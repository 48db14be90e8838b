"""TFLite int8 models through IREE's TOSA input: `ming reference` and the C-simulation of the built
accelerator must equal TFLite's reference kernels (the builtin reference op resolver) bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter, OpResolverType

import tflite_models
from emit_helpers import csim
from ming_py import reference
from ming_py.errors import MingError
from ming_py.ir import FixedPointAdd, FixedPointAverage, FixedPointRequant
from ming_py.pipeline import lift

MODELS = {
    "tiny_conv": tflite_models.tiny_conv,
    "conv_stack": tflite_models.conv_stack,
    "conv_stack_per_tensor": lambda: tflite_models.conv_stack(per_channel=False),
    "residual": tflite_models.residual,
    "pooled": tflite_models.pooled,
    "pooled_window": lambda: tflite_models.pooled(global_pool=False),
    "classifier": tflite_models.classifier,
    "classifier_float_io": lambda: tflite_models.classifier(float_io=True),
    "mobilenet": tflite_models.mobilenet,
    "resnet8": tflite_models.resnet8,
    "autoencoder": tflite_models.autoencoder,
    "global_mean": tflite_models.global_mean,
    "inception": tflite_models.inception,
}


@pytest.fixture(scope="module")
def tflite(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tflite")
    cache = {}

    def build(name):
        if name not in cache:
            path = directory / f"{name}.tflite"
            path.write_bytes(MODELS[name]())
            cache[name] = (path, lift(path))
        return cache[name]

    return build


def tflite_reference(path, x: np.ndarray) -> np.ndarray:
    interpreter = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def model_input(graph, seed: int) -> np.ndarray:
    shape, rng = graph.inputs[0].onnx_shape, np.random.default_rng(seed)
    if graph.inputs[0].dtype == "float32":
        return (rng.standard_normal(shape) * 2).astype(np.float32)
    return rng.integers(-128, 128, shape).astype(np.int8)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_reference_equals_tflite_reference_kernels(tflite, name):
    path, graph = tflite(name)
    for seed in range(4):
        x = model_input(graph, seed)
        ours = reference.run(graph, x)[graph.outputs[0].name]
        expected = tflite_reference(path, x)
        assert ours.dtype == expected.dtype and ours.shape == expected.shape
        assert np.array_equal(ours, expected), f"{np.count_nonzero(ours != expected)} of {ours.size} differ"


@pytest.mark.parametrize("name", ["conv_stack", "pooled_window", "classifier_float_io", "mobilenet", "resnet8",
                                  "autoencoder", "global_mean", "inception"])
def test_csim_equals_tflite_reference_kernels(tflite, tmp_path, name):
    path, graph = tflite(name)
    x = model_input(graph, 11)
    assert np.array_equal(csim(graph, tmp_path / "out", x, check_ports=True), tflite_reference(path, x))


def test_every_layer_is_read_as_tflite_arithmetic(tflite):
    kinds = {type(k.epilogue) for name in MODELS for k in tflite(name)[1].kernels()}
    assert {FixedPointRequant, FixedPointAdd, FixedPointAverage} <= kinds
    conv = next(k for k in tflite("tiny_conv")[1].kernels())
    assert conv.epilogue.double_round and np.all(conv.epilogue.shift > 31)


def test_nhwc_input_is_a_host_permutation_and_int8_is_taken_as_is(tflite):
    _, graph = tflite("tiny_conv")
    port = graph.inputs[0]
    assert (port.dtype, port.onnx_shape, port.permutation) == ("int8", (1, 8, 8, 3), (0, 3, 1, 2))
    assert graph.shape_of(port.tensor) == (1, 3, 8, 8)  # channels first inside ming


def test_symbolic_batch_is_fixed_with_a_note(tmp_path):
    builder = tflite_models.TfliteBuilder(seed=1)
    x = builder.input((1, 8, 8, 3), symbolic_batch=True)
    path = tmp_path / "symbolic.tflite"
    path.write_bytes(builder.build([builder.conv(x, 4)], "symbolic"))
    graph = lift(path)
    assert any("symbolic batch" in note for note in graph.notes)
    x = model_input(graph, 0)
    assert np.array_equal(reference.run(graph, x)[graph.outputs[0].name], tflite_reference(path, x))


def test_float_input_and_output_are_converted_on_the_host_as_tflite_does(tmp_path):
    path = tmp_path / "float_io.tflite"
    path.write_bytes(tflite_models.float_io())
    graph = lift(path)
    port = graph.inputs[0]
    assert (port.dtype, port.quantizer, graph.outputs[0].dtype) == ("float32", "tflite", "float32")
    rng = np.random.default_rng(3)
    for scale in (1.0, 4.0):  # some values round half away from zero, some saturate
        images = (rng.standard_normal((1, 8, 8, 3)) * scale).astype(np.float32)
        ours = reference.run(graph, images)[graph.outputs[0].name]
        expected = tflite_reference(path, images)
        assert ours.dtype == expected.dtype == np.float32 and np.array_equal(ours, expected)
    half = np.float32(graph.inputs[0].scale) * np.float32(2.5)  # a tie: TFLite rounds it away from zero
    assert np.array_equal(reference.run(graph, np.full((1, 8, 8, 3), half, np.float32))[graph.outputs[0].name],
                          tflite_reference(path, np.full((1, 8, 8, 3), half, np.float32)))


@pytest.mark.parametrize("content, message", [
    (b"not a flatbuffer at all", "not a TFLite flatbuffer"),
    (b"\xff\xff\x00\x00TFL3" + b"\xff" * 8, "not a valid TFLite model"),
    (b"\x00\x00\x00\x00TFL3" + b"\xff" * 8, "model has 0 subgraphs"),
])
def test_a_damaged_file_is_one_clear_error(tmp_path, content, message):
    path = tmp_path / "bad.tflite"
    path.write_bytes(content)
    with pytest.raises(MingError, match=message):
        lift(path)


@pytest.mark.unit
@pytest.mark.parametrize("scale", [0.01, 0.05, 0.2, 1.0, 4.0])
def test_host_softmax_equals_tflite_softmax(tmp_path, scale):
    from ming_py.contract.ming_host import tflite_softmax

    builder = tflite_models.TfliteBuilder(seed=8)
    logits = builder.input((1, 10), scale=scale)
    path = tmp_path / "softmax.tflite"
    path.write_bytes(builder.build([builder.softmax(logits)], "softmax"))
    rng = np.random.default_rng(int(scale * 100))
    for row in range(200):
        x = rng.integers(-128, 128, (1, 10)).astype(np.int8)
        if row % 4 == 0:  # near-ties and a dominant logit
            x = np.clip(x // 16 + 100 * (row % 8 == 0), -128, 127).astype(np.int8)
        assert np.array_equal(tflite_softmax(x, np.float32(scale), 1.0), tflite_reference(path, x)), x


def test_boundary_ops_inside_the_model_are_refused(tmp_path):
    builder = tflite_models.TfliteBuilder(seed=9)
    x = builder.input((1, 16))
    y = builder.fully_connected(builder.softmax(builder.fully_connected(x, 16)), 4)
    path = tmp_path / "inner_softmax.tflite"
    path.write_bytes(builder.build([y], "inner_softmax"))
    with pytest.raises(MingError, match=r"\(SOFTMAX\) is supported only as the model's"):
        lift(path)


@pytest.mark.parametrize("seed", range(6))
def test_dense_layers_round_as_litert_reference_kernels(tmp_path, seed):
    """LiteRT's reference FULLY_CONNECTED rounds f32(acc) * f32(multiplier) half away from zero, where TOSA
    (and CONV_2D) round twice in fixed point: every int8 input value of a dense layer, where the rules
    differ on several outputs."""
    builder = tflite_models.TfliteBuilder(seed=seed)
    x = builder.input((1, 2))
    path = tmp_path / "dense.tflite"
    path.write_bytes(builder.build([builder.fully_connected(x, 64)], "dense"))
    graph = lift(path)
    assert graph.kernels()[0].epilogue.float32
    for value in range(-128, 128):
        x = np.full((1, 2), value, np.int8)
        assert np.array_equal(reference.run(graph, x)[graph.outputs[0].name], tflite_reference(path, x))


def test_cli_builds_a_tflite_model_and_its_accelerator_equals_tflite(tmp_path):
    """`ming build model.tflite`, then the C-simulation and the deployment driver on int8 .npy files;
    two builds are byte-identical."""
    import subprocess
    import sys

    model = tmp_path / "ds_cnn.tflite"
    model.write_bytes(tflite_models.classifier())
    runs = []
    for out in ("out", "again"):
        result = subprocess.run([sys.executable, "-m", "ming_py.cli", "build", str(model), "--board", "kv260",
                                 "-o", str(tmp_path / out), "--quiet"], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        runs.append({p.relative_to(tmp_path / out): p.read_bytes()
                     for p in sorted((tmp_path / out).rglob("*")) if p.is_file()})
    assert runs[0] == runs[1]
    x = np.random.default_rng(21).integers(-128, 128, (1, 12, 8, 1)).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    expected = tflite_reference(model, x)
    for command in (["csim", str(tmp_path / "out")], ["deploy", str(tmp_path / "out"), "--backend", "csim"]):
        result = subprocess.run([sys.executable, "-m", "ming_py.cli", *command, "--input", str(tmp_path / "x.npy"),
                                 "--output", str(tmp_path / "y.npy")], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        y = np.load(tmp_path / "y.npy")
        assert y.dtype == np.int8 and np.array_equal(y.reshape(expected.shape), expected), command[0]


# Made by the TFLite converter from Keras models (tests/generators/converted_models.py)
CONVERTER_MADE = Path(__file__).parent / "data" / "converted"


@pytest.mark.parametrize("name", ["ds_cnn.tflite", "autoencoder.tflite"])
def test_a_converter_made_model_equals_tflite_reference_kernels(name):
    path = CONVERTER_MADE / name
    graph = lift(path)
    for seed in range(3):
        x = model_input(graph, seed)
        assert np.array_equal(reference.run(graph, x)[graph.outputs[0].name], tflite_reference(path, x))


def test_a_converter_made_ds_cnn_streams_equal_to_tflite_reference_kernels(tmp_path):
    """IREE makes 2-d tensors both of DS-CNN's one-channel input map (H x W) and of its maps one wide (H x C):
    the first keeps its layout, the second becomes channels first, and the build streams both."""
    path = CONVERTER_MADE / "ds_cnn.tflite"
    graph = lift(path)
    x = model_input(graph, 11)
    assert np.array_equal(csim(graph, tmp_path / "out", x, check_ports=True), tflite_reference(path, x))
