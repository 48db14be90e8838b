"""The `ming` command line: analyze, reference, and clear one-line errors on bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import zoo
from ming_py.ort_session import onnxruntime_session


def ming(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ming_py.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd)


def assert_clean_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_analyze_json_lists_every_kernel(quantized):
    result = ming("analyze", quantized("lenet"), "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [r["name"] for r in rows] == ["conv1", "pool1", "conv2", "pool2", "fc1", "fc2"]
    for row in rows:
        assert {"name", "class", "stride", "dilation", "macs", "out_shape"} <= row.keys()
        assert row["class"] in ("parallel", "reduction", "sliding_window")
    conv1 = rows[0]
    assert conv1["class"] == "sliding_window" and conv1["macs"] > 0 and conv1["stride"] == [1, 1]
    assert rows[1]["macs"] == 0 and rows[1]["stride"] == [2, 2]


def test_analyze_table_names_the_layers(quantized):
    result = ming("analyze", quantized("dw_separable"))
    assert result.returncode == 0, result.stderr
    assert "dw1" in result.stdout and "sliding_window" in result.stdout and "MACs" in result.stdout


def test_reference_matches_onnxruntime_through_the_cli(quantized, tmp_path):
    model = quantized("conv3x3_s2", per_channel=True)
    x = zoo.random_input("conv3x3_s2", seed=3)
    np.save(tmp_path / "x.npy", x)
    result = ming("reference", model, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy")
    assert result.returncode == 0, result.stderr
    y = np.load(tmp_path / "y.npy")
    expected = onnxruntime_session(str(model)).run(None, {"x": x})[0]
    assert y.dtype == np.float32 and y.shape == expected.shape
    assert np.array_equal(y, expected)


def test_reference_takes_stacked_images_like_csim(quantized, tmp_path):
    """N images stacked on a first axis give N stacked outputs, each the one-image result."""
    model = quantized("conv3x3_s2", per_channel=True)
    images = [zoo.random_input("conv3x3_s2", seed=s) for s in (4, 5, 6)]
    np.save(tmp_path / "x.npy", np.concatenate(images))
    result = ming("reference", model, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy")
    assert result.returncode == 0, result.stderr
    y = np.load(tmp_path / "y.npy")
    session = onnxruntime_session(str(model))
    expected = np.stack([session.run(None, {"x": x})[0][0] for x in images])
    assert y.shape == expected.shape and np.array_equal(y, expected)


def test_missing_model(tmp_path):
    assert_clean_error(ming("analyze", tmp_path / "nope.onnx"), "nope.onnx", "not found")


def test_not_an_onnx_file(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\x01 certainly not protobuf" * 10)
    assert_clean_error(ming("analyze", bad), "not a valid ONNX model")


def _save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _conv_graph(input_dims, op="Conv"):
    weight = numpy_helper.from_array(np.ones((2, 3, 3, 3), np.float32), "w")
    node = helper.make_node(op, ["x", "w"] if op == "Conv" else ["x"], ["y"], name="layer1")
    return helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_dims)],
                             [helper.make_tensor_value_info("y", TensorProto.FLOAT, [input_dims[0], 2, 6, 6])],
                             [weight] if op == "Conv" else [])


def test_float_model_is_rejected(tmp_path):
    path = _save(_conv_graph([1, 3, 8, 8]), tmp_path / "float.onnx")
    assert_clean_error(ming("analyze", path), "not quantized", "quantize_static")


def test_dynamic_shape_is_rejected(tmp_path):
    path = _save(_conv_graph([1, 3, "H", 8]), tmp_path / "dynamic.onnx")
    assert_clean_error(ming("analyze", path), "'x'", "dynamic")


def test_symbolic_batch_is_compiled_as_one_with_a_note(quantized, tmp_path):
    import onnx

    model = onnx.load(str(quantized("conv3x3_same")))
    for value in (model.graph.input[0], model.graph.output[0]):
        value.type.tensor_type.shape.dim[0].dim_param = "N"
    onnx.save(model, str(tmp_path / "symbolic.onnx"))
    result = ming("analyze", tmp_path / "symbolic.onnx")
    assert result.returncode == 0, result.stderr
    assert "ming: note: 'x' has a symbolic batch dimension 'N'; compiled for batch 1" in result.stderr


def test_batch_larger_than_one_is_rejected(tmp_path):
    path = _save(_conv_graph([4, 3, 8, 8]), tmp_path / "batch.onnx")
    assert_clean_error(ming("analyze", path), "batch 4")


def test_unsupported_op_names_the_node(tmp_path):
    path = _save(_conv_graph([1, 3, 8, 8], op="Softsign"), tmp_path / "softsign.onnx")
    assert_clean_error(ming("analyze", path), "'layer1'", "Softsign", "not supported")


def test_transposition_across_pixels_names_the_node(tmp_path):
    path = zoo.quantize_float_model(zoo.rows_and_columns_swapped(), tmp_path / "swap.onnx", (1, 4, 8, 8))
    assert_clean_error(ming("analyze", path), "'swap_hw'", "Transpose", "moves values between pixels")


def test_int16_activations_are_rejected(tmp_path):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    float_path = tmp_path / "f.onnx"
    onnx.save(zoo.MODELS["conv3x3_same"].build(), str(float_path))
    data = iter(zoo.calibration_data("conv3x3_same"))

    class Reader(CalibrationDataReader):
        def get_next(self):
            return next(data, None)

    out = tmp_path / "i16.onnx"
    quantize_static(str(float_path), str(out), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt16, weight_type=QuantType.QInt8)
    assert_clean_error(ming("analyze", out), "INT16", "QInt8 or QUInt8")


def test_reference_input_errors(quantized, tmp_path):
    model = quantized("conv1x1")
    assert_clean_error(ming("reference", model, "--input", tmp_path / "missing.npy", "--output", tmp_path / "y.npy"),
                       "missing.npy")
    np.save(tmp_path / "wrong.npy", np.zeros((1, 2, 3), np.float32))
    assert_clean_error(ming("reference", model, "--input", tmp_path / "wrong.npy", "--output", tmp_path / "y.npy"),
                       "shape")
    assert not (tmp_path / "y.npy").exists()


def _not_onnx(tmp_path):
    """A model file the import would refuse: an option error instead shows that options are checked first."""
    path = tmp_path / "model.onnx"
    path.write_bytes(b"not protobuf")
    return path


@pytest.mark.parametrize("args, message", [
    (["--dsp", "150%"], "--dsp 150%: the kv260 has 1248 DSP; give at most 100% or 1248"),
    (["--bram", "289"], "--bram 289: the kv260 leaves 284 BRAM18K to a design (288 less 4 its platform keeps)"),
    (["--uram", "101%"], "--uram 101%: the kv260 has 64 URAM"),
    (["--board", "pynq-z2", "--lut", "60000"], "--lut 60000: the pynq-z2 leaves 46,680 LUT to a design"),
    (["--dsp", "inf"], "--dsp inf: give a whole count (300) or a share of the board (20%)"),
    (["--dsp", "1e400"], "--dsp 1e400: give a whole count"),
    (["--dsp", "nan"], "--dsp nan: give a whole count"),
    (["--dsp", ""], "--dsp '': give a whole count"),
    (["--dsp=-5%"], "--dsp -5%: must not be negative"),
    (["--dsp", "-5%"], "argument --dsp: expected one argument; see `ming build --help`"),
    (["--clock", "nan"], "--clock nan: give the clock in MHz, a number from 1 to 1000"),
    (["--clock", "inf"], "--clock inf: give the clock in MHz"),
    (["--clock", "1e-300"], "--clock 1e-300: give the clock in MHz"),
    (["--clock", "0"], "--clock 0: give the clock in MHz"),
    (["--clock=-5"], "--clock -5: give the clock in MHz"),
    (["--set", "conv2.unroll.oc=true"], "--set: conv2.unroll.oc=true is not an integer"),
    (["--set", "conv2.oc=8"], "'conv2.oc' is not a setting"),
    (["--objective", "fastest"], "invalid choice: 'fastest'"),
])
def test_build_options_are_checked_before_the_import(tmp_path, args, message):
    result = ming("build", _not_onnx(tmp_path), *args, "-o", tmp_path / "out")
    assert_clean_error(result, message)
    assert not (tmp_path / "out").exists()


def test_a_setting_given_twice_in_a_file_is_refused_before_the_import(tmp_path):
    pins = tmp_path / "pins.json"
    pins.write_text('{"conv2": {"unroll": {"oc": 8}}, "conv2.unroll.oc": 4}')
    assert_clean_error(ming("build", _not_onnx(tmp_path), "--settings", pins, "-o", tmp_path / "out"),
                       "pins.json: conv2.unroll.oc is given twice")
    pins.write_text('{"conv2": {"unroll": {"oc": true}}}')
    assert_clean_error(ming("build", _not_onnx(tmp_path), "--settings", pins, "-o", tmp_path / "out"),
                       "pins.json: conv2.unroll.oc=true is not an integer")


@pytest.mark.parametrize("args, message", [
    (["--dsp", "5%,150%"], "--dsp 150%: the kv260 has 1248 DSP"),
    (["--bram", "10%,,20%"], "--bram 10%,,20%: an empty budget in the list"),
    (["--lut", "1e3"], "--lut 1e3: give a whole count"),
    (["--clock", "inf"], "--clock inf: give the clock in MHz"),
    (["-o", "model.onnx/sweep"], "model.onnx is not a directory"),
])
def test_sweep_options_are_checked_before_the_import(tmp_path, args, message):
    assert_clean_error(ming("sweep", _not_onnx(tmp_path), *args, cwd=tmp_path), message)
    assert not (tmp_path / "sweep").exists() and not (tmp_path / "sweep.csv").exists()


@pytest.mark.parametrize("x, message", [
    (np.array([[0.5, np.nan, np.inf, -np.inf]], np.float32),
     "input has 3 non-finite values (NaN or Inf); int8 quantization needs finite inputs"),
    (np.zeros((1, 4), np.float64), "input is float64; give float32 as onnxruntime takes it"),
    (np.zeros((1, 4), np.int64), "input is int64"),
    (np.array([None, 1.0], object), "holds Python objects"),
])
def test_reference_and_csim_refuse_a_bad_input_at_once(tmp_path, x, message):
    np.save(tmp_path / "x.npy", x, allow_pickle=True)
    io = ("--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy")
    assert_clean_error(ming("reference", _not_onnx(tmp_path), *io), message)
    assert_clean_error(ming("csim", _fake_build(tmp_path), *io), message)  # before compiling its broken C++
    assert not (tmp_path / "y.npy").exists()


def _fake_build(tmp_path, host: str | None = None):
    build = tmp_path / "build"
    (build / "hls").mkdir(parents=True)
    for name in ("net.cpp", "net_tb.cpp"):
        (build / "hls" / name).write_text("this is no C++")
    host = host or json.dumps({
        "model": "net",
        "input": {"onnx_name": "x", "onnx_shape": [1, 4], "array_shape": [4], "stream_shape": [4, 1, 1], "words": 1,
                  "scale": 0.1, "zero_point": 0, "dtype": "float32", "permutation": []},
        "outputs": [{"onnx_name": "y", "onnx_shape": [1, 4], "array_shape": [4], "stream_shape": [4, 1, 1],
                     "words": 1, "scale": 0.1, "zero_point": 0, "dtype": "float32", "permutation": [], "index": 0,
                     "host_ops": []}]})
    (build / "host.json").write_text(host)
    return build


def test_csim_checks_input_and_output_before_compiling(tmp_path):
    build = _fake_build(tmp_path)  # any compile would fail on this C++
    np.save(tmp_path / "nan.npy", np.array([[0.5, np.nan, 0, 0]], np.float32))
    np.save(tmp_path / "x.npy", np.zeros((1, 4), np.float32))
    assert_clean_error(ming("csim", build, "--input", tmp_path / "nan.npy", "--output", tmp_path / "y.npy"),
                       "input has 1 non-finite values")
    assert_clean_error(ming("csim", build, "--input", tmp_path / "x.npy", "--output", tmp_path / "no" / "y.npy"),
                       "--output", "does not exist; create it first")
    assert_clean_error(ming("csim", build, "--input", tmp_path / "x.npy", "--output", tmp_path),
                       "is a directory")


@pytest.mark.parametrize("host, message", [
    ("{", "not a complete ming build (host.json: Expecting property name"),
    ("{}", "not a complete ming build (host.json: no model name)"),
    ('{"model": "net", "input": {}}', "not a complete ming build (host.json: no 'outputs' list"),
    ('{"model": "net", "input": {}, "outputs": [{}]}', "not a complete ming build (host.json: 'input.onnx_shape' is missing"),
])
def test_csim_of_a_damaged_build_is_one_line(tmp_path, host, message):
    np.save(tmp_path / "x.npy", np.zeros((1, 4), np.float32))
    assert_clean_error(ming("csim", _fake_build(tmp_path, host), "--input", tmp_path / "x.npy",
                            "--output", tmp_path / "y.npy"), message)


def test_csim_of_a_build_without_hls_is_one_line(tmp_path):
    build = _fake_build(tmp_path)
    for name in ("net.cpp", "net_tb.cpp"):
        (build / "hls" / name).unlink()
    (build / "hls").rmdir()
    np.save(tmp_path / "x.npy", np.zeros((1, 4), np.float32))
    assert_clean_error(ming("csim", build, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy"),
                       "not a complete ming build (no hls/net.cpp)")


def test_reference_checks_its_output_before_running(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1, 4), np.float32))
    assert_clean_error(ming("reference", _not_onnx(tmp_path), "--input", tmp_path / "x.npy",
                            "--output", tmp_path / "missing" / "y.npy"), "--output", "does not exist")


def _commands() -> dict:
    """The parser's subcommands by name (from the parser itself, so a new command is covered at once)."""
    import argparse

    from ming_py.cli import _parser

    action = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.unit
@pytest.mark.parametrize("command", [None, *_commands()])
def test_every_command_prints_its_help_with_the_defaults(command):
    """`ming --help` and `ming CMD --help`: exit 0, the usage on stdout, nothing on stderr, and every option that
    has a default (not None, False or an empty list) states it as "default: VALUE"."""
    result = ming(*([command] if command else []), "--help")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert result.stdout.startswith(f"usage: ming{' ' + command if command else ''} ")
    assert "-h, --help" in result.stdout
    if command is None:
        assert all(name in result.stdout for name in _commands())
        return
    text = " ".join(result.stdout.split())  # argparse wraps the help text at any space
    defaults = [a for a in _commands()[command]._actions
                if a.option_strings and a.help != "==SUPPRESS==" and a.default not in (None, False, [], "==SUPPRESS==")]
    for action in defaults:
        assert f"default: {action.default}" in text, action.option_strings
    if command in ("build", "sweep"):
        assert "default: kv260" in text and "default: frugal" in text
    assert "%(" not in text and "%%" not in text


FOREIGN_MODELS = [  # (file, its first bytes or None for a directory, what the message names, how to export)
    ("model.h5", b"\x89HDF\r\n\x1a\n" + bytes(range(40)), "a Keras model", "tf.lite.TFLiteConverter.from_keras_model"),
    ("model.keras", b"PK\x03\x04 junk that is no zip", "a Keras model", "tf2onnx"),
    ("model.pt", b"PK\x03\x04" + bytes(range(60)), "a PyTorch model", "torch.onnx.export"),
    ("model.pth", b"\x80\x02}q\x00(X\x05\x00\x00\x00", "a PyTorch model", "quantize_static"),
    ("frozen.pb", b"\n\x0c\n\x05input\x12\x0bPlaceholder", "a TensorFlow SavedModel or graph",
     "tf.lite.TFLiteConverter.from_saved_model"),
    ("exported.savedmodel", None, "a TensorFlow SavedModel or graph", "tf2onnx"),
    ("weights.onnx", b"\x89HDF\r\n\x1a\n" + bytes(20), "a Keras model", "tf.lite.TFLiteConverter"),  # by content
]


def _foreign(tmp_path, name, content):
    path = tmp_path / name
    if content is None:
        path.mkdir()
        (path / "saved_model.pb").write_bytes(b"\x08\x01")
    else:
        path.write_bytes(content)
    return path


CHECKED_BEFORE_THE_IMPORT = ("build", "sweep", "reference")
# every foreign model under every command: one command per model in the unit tier (each command in turn, so the
# tier still sees every model and every command), the other pairs in the full suite (each pair is a child ming)
FOREIGN_RUNS = [pytest.param(model, command, marks=[pytest.mark.unit] if i % 3 == j else [], id=f"{model[0]}-{command}")
                for i, model in enumerate(FOREIGN_MODELS) for j, command in enumerate(CHECKED_BEFORE_THE_IMPORT)]


@pytest.mark.parametrize("model, command", FOREIGN_RUNS)
def test_a_model_ming_does_not_take_is_named_with_how_to_export_it(tmp_path, model, command):
    """Before: "not a valid ONNX model (Error parsing message ... Wire format was corrupt)" (a directory: "file
    not found"). After: one line naming the kind of model, what ming takes, and how to export to it; before the
    import, for `ming build`, `ming sweep` and `ming reference`."""
    name, content, kind, how = model
    path = _foreign(tmp_path, name, content)
    np.save(tmp_path / "x.npy", np.zeros((1, 4), np.float32))
    args = {"build": ["build", path, "-o", tmp_path / "out"], "sweep": ["sweep", path, "-o", tmp_path / "sweep"],
            "reference": ["reference", path, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy"]}
    assert_clean_error(ming(*args[command]), f"{path}: {kind}", "ming takes int8-quantized ONNX (QDQ or QOperator) "
                       "and int8 TFLite models", how)
    assert not any((tmp_path / written).exists() for written in ("out", "sweep", "y.npy"))


@pytest.mark.parametrize("name, content, kind, how", FOREIGN_MODELS[::3], ids=[m[0] for m in FOREIGN_MODELS[::3]])
def test_the_frontend_names_a_model_ming_does_not_take(tmp_path, name, content, kind, how):
    """`ming analyze` reaches the frontend (no check before it): the same line, not a protobuf parse error."""
    result = ming("analyze", _foreign(tmp_path, name, content))
    assert_clean_error(result, kind, how)
    assert "Wire format" not in result.stderr


def test_a_tflite_model_is_read_whatever_its_name(tmp_path):
    """A TFLite flatbuffer named .bin is recognized by its identifier (TFL3), not parsed as ONNX."""
    import tflite_models

    path = tmp_path / "model.bin"
    path.write_bytes(tflite_models.tiny_conv())
    result = ming("analyze", path, "--json")
    assert result.returncode == 0, result.stderr
    assert [row["op"] for row in json.loads(result.stdout)] == ["conv"]


def test_junk_that_is_no_model_says_what_ming_takes(tmp_path):
    junk = tmp_path / "model.bin"
    junk.write_bytes(b"\x00\x01 certainly not protobuf" * 10)
    assert_clean_error(ming("analyze", junk), "not a valid ONNX model", "ming takes int8-quantized ONNX (QDQ or "
                       "QOperator) and int8 TFLite models (.tflite)")


def _integer_build(tmp_path, dtype: str, zero_point: int):
    """A build (whose C++ would not compile) of a model whose input is `dtype`, scale 1/255, `zero_point`
    (shifted into int8 for uint8, as the metadata holds it)."""
    host = json.loads(_fake_build(tmp_path / "first").joinpath("host.json").read_text())
    host["input"] |= {"dtype": dtype, "scale": 1 / 255, "zero_point": zero_point}
    return _fake_build(tmp_path, json.dumps(host)), host["input"]


CONVERSIONS = [  # (model input dtype, its zero point in int8, the array given, the conversion it is told)
    ("int8", -128, np.array([[0, 17, 200, 255]], np.uint8), "(x.astype(numpy.int16) - 128).astype(numpy.int8)"),
    ("int8", 15, np.array([[0, 17, 200, 255]], np.uint8), "x.astype(numpy.float32)"),
    ("int8", 15, np.array([[-128, 0, 5, 127]], np.int64), "x.astype(numpy.int8)"),
    ("int8", -128, np.array([[0, 17, 200, 255]], np.int64), "(x.astype(numpy.int16) - 128).astype(numpy.int8)"),
    ("int8", -128, np.array([[-300, 0, 5, 1000]], np.int32), "x.astype(numpy.float32)"),
    ("uint8", -128, np.array([[-128, 0, 5, 127]], np.int8), "(x.astype(numpy.int16) + 128).astype(numpy.uint8)"),
    ("float32", 0, np.array([[-128, 0, 5, 127]], np.int8), "x.astype(numpy.float32)"),
    ("float32", 0, np.array([[0, 17, 200, 255]], np.uint8), "x.astype(numpy.float32)"),
    ("float32", 0, np.array([[-300, 0, 5, 1000]], np.int64), "x.astype(numpy.float32)"),
]


@pytest.mark.unit
@pytest.mark.parametrize("dtype, zero_point, x, conversion", CONVERSIONS,
                         ids=[f"{c[0]}-zp{c[1]}-{c[2].dtype}-{c[2].max()}" for c in CONVERSIONS])
def test_an_input_of_another_type_is_told_a_conversion_the_model_takes(tmp_path, dtype, zero_point, x, conversion):
    """Before: a uint8 image for an int8 model with zero point -128 was told x.astype(numpy.int8) (200 becomes
    -56), an int64 array to give float32, which such a model refused. After: `ming csim` and run.py's loader
    refuse it in one line, before compiling, naming a conversion that the model then takes."""
    from ming_py.contract import ming_npy, ming_ports

    build, port = _integer_build(tmp_path, dtype, zero_point)
    np.save(tmp_path / "x.npy", x)
    result = ming("csim", build, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy")
    assert_clean_error(result, f"input is {x.dtype}", f"save {conversion}")
    if dtype != "float32":
        assert f"zero point {zero_point + (128 if dtype == 'uint8' else 0)}" in result.stderr
    if x.dtype in (np.uint8, np.int8) and dtype != "float32":  # never the plain cast that wraps values
        assert f"x.astype(numpy.{dtype})" not in result.stderr
    converted = eval(conversion, {"numpy": np, "x": x})
    np.save(tmp_path / "converted.npy", converted)
    taken = ming_npy.load_input(tmp_path / "converted.npy", ming_ports.Port.of(port))
    images = ming_ports.input_images(taken, ming_ports.Port.of(port))  # what run.py and `ming csim` check
    assert images.shape == (1, 4)
    if "128" in conversion:  # the shift keeps the real values: same scale, zero points 128 apart
        assert np.array_equal(converted.astype(np.int64) - (zero_point + (128 if dtype == "uint8" else 0)),
                              x.astype(np.int64) - (zero_point + (128 if dtype == "int8" else 0)))


@pytest.mark.unit
def test_float_images_for_an_int8_model_are_quantized_as_tflite_does():
    """round(x / scale) + zero point, halves away from zero (std::round), saturated: TFLite's QUANTIZE."""
    from ming_py.contract import ming_host

    scale = np.float32(0.5)
    x = np.array([0.25, -0.25, 0.75, -0.75, 100.0, -100.0, 0.0], np.float32)
    q = ming_host.model_input_values(x, scale, 3, "int8")
    assert q.tolist() == [4, 2, 5, 1, 127, -128, 3]
    # uint8 model, zero point 128 (3 + 128 is 131 in its own terms, held as 3): the accelerator's int8 values
    assert ming_host.model_input_values(x, scale, 3, "uint8").tolist() == q.tolist()
    assert ming_host.model_input_values(np.array([5], np.int8), scale, 3, "int8").tolist() == [5]


def test_reference_quantizes_float_images_for_an_int8_model_and_names_the_uint8_shift(tmp_path):
    """`ming reference` on a TFLite model taking int8 (scale 1/255, zero point -128): float32 images give what
    TFLite gives on their quantization; a uint8 image is told the zero-point shift."""
    import tflite_models
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    model = tmp_path / "pixels.tflite"
    model.write_bytes(tflite_models.tiny_conv(scale=1 / 255, zero_point=-128))
    pixels = np.random.default_rng(2).integers(0, 256, (1, 8, 8, 3)).astype(np.uint8)
    np.save(tmp_path / "float.npy", (pixels / np.float32(255)).astype(np.float32))
    np.save(tmp_path / "uint8.npy", pixels)
    result = ming("reference", model, "--input", tmp_path / "float.npy", "--output", tmp_path / "y.npy")
    assert result.returncode == 0, result.stderr
    interpreter = Interpreter(model_path=str(model), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], (pixels.astype(np.int16) - 128).astype(np.int8))
    interpreter.invoke()
    assert np.array_equal(np.load(tmp_path / "y.npy"),
                          interpreter.get_tensor(interpreter.get_output_details()[0]["index"]))
    assert_clean_error(ming("reference", model, "--input", tmp_path / "uint8.npy", "--output", tmp_path / "y2.npy"),
                       "input is uint8", "zero point -128", "save (x.astype(numpy.int16) - 128).astype(numpy.int8)")
