"""Fault injection at the frontends: damaged, hand-edited and hostile models (TFLite and ONNX).

Every case is what the user sees from `ming analyze`/`ming build`: exit status 2, one line
`ming: error: ...` naming the tensor, node or opset and what to do, no traceback, nothing else on
stderr (no MLIR diagnostics, no numpy warnings). Most cases fail in validation, before IREE runs;
the crash-isolation cases run the native converters in their child process on purpose.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import flatbuffers
import numpy as np
import onnx
import pytest
from ai_edge_litert import schema_py_generated as schema
from onnx import TensorProto, helper, numpy_helper

import tflite_models
from ming_py.frontends import iree_compile, isolated, tflite_model, tflite_tables
from ming_py.frontends.layout import channels_first
from ming_py.errors import MingError
from ming_py.ir import Graph, GraphInput, GraphOutput, TensorInfo
from ming_py.pipeline import lift
from test_faults import EXAMPLE, ming as run_ming



def ming(*args, env=None) -> subprocess.CompletedProcess:
    return run_ming(*args, env=env, timeout=300)


def assert_refused(result: subprocess.CompletedProcess, *fragments: str) -> str:
    """Exit 2, exactly one stderr line `ming: error: ...` holding every fragment; no traceback."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and "Warning" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ming: error: "), lines[0]
    assert "loc(" not in lines[0], lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


# --- TFLite: corrupted flatbuffers, made from tests/tflite_models' builders -------------------------------------


def tiny() -> schema.ModelT:
    """tiny_conv unpacked: tensors 0 input, 1 conv1_weights, 2 conv1_bias, 3 conv1_out; one CONV_2D."""
    return schema.ModelT.InitFromPackedBuf(bytearray(tflite_models.tiny_conv()), 0)


def pack(model: schema.ModelT) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _buffer_out_of_range(m):
    m.subgraphs[0].tensors[1].buffer = 999


def _no_conv_options(m):
    m.subgraphs[0].operators[0].builtinOptions, m.subgraphs[0].operators[0].builtinOptionsType = None, 0


def _wrong_options_type(m):
    m.subgraphs[0].operators[0].builtinOptions = schema.AddOptionsT()
    m.subgraphs[0].operators[0].builtinOptionsType = schema.BuiltinOptions.AddOptions


def _weights_unquantized(m):
    m.subgraphs[0].tensors[1].quantization = None


def _output_index_out_of_range(m):
    m.subgraphs[0].operators[0].outputs = [99]


def _input_index_out_of_range(m):
    m.subgraphs[0].operators[0].inputs = [0, 99, 2]


def _opcode_out_of_range(m):
    m.subgraphs[0].operators[0].opcodeIndex = 7


def _model_output_out_of_range(m):
    m.subgraphs[0].outputs = [42]


def _zero_scales(m):
    for tensor in m.subgraphs[0].tensors:
        if tensor.quantization is not None:
            tensor.quantization.scale = [0.0] * len(tensor.quantization.scale)


def _nan_weight_scale(m):
    m.subgraphs[0].tensors[1].quantization.scale[3] = float("nan")


def _negative_output_scale(m):
    m.subgraphs[0].tensors[3].quantization.scale = [-0.02]


def _no_outputs(m):
    m.subgraphs[0].outputs = []


def _zero_input_dimension(m):
    m.subgraphs[0].tensors[0].shape = [1, 0, 8, 3]


def _non_utf8_name(m):
    m.subgraphs[0].tensors[3].name = b"conv\xff_out"


def _truncated_weights(m):
    m.buffers[m.subgraphs[0].tensors[1].buffer].data = m.buffers[m.subgraphs[0].tensors[1].buffer].data[:10]


def _per_channel_mismatch(m):
    m.subgraphs[0].tensors[1].quantization.scale = [0.01] * 5
    m.subgraphs[0].tensors[1].quantization.zeroPoint = [0] * 5


CORRUPTIONS = {  # before: SIGSEGV / traceback / wrong model built; after: one line with these fragments
    "buffer_out_of_range": (_buffer_out_of_range, ["conv1_weights", "buffer index 999"]),
    "no_conv_options": (_no_conv_options, ["node 'conv1_out' (CONV_2D)", "no builtin options"]),
    "wrong_options_type": (_wrong_options_type, ["node 'conv1_out' (CONV_2D)", "another op's type"]),
    "weights_unquantized": (_weights_unquantized, ["conv1_weights", "without quantization"]),
    "output_index_out_of_range": (_output_index_out_of_range, ["(CONV_2D)", "output 0", "index 99"]),
    "input_index_out_of_range": (_input_index_out_of_range, ["node 'conv1_out' (CONV_2D)", "input 1", "index 99"]),
    "opcode_out_of_range": (_opcode_out_of_range, ["opcode index 7"]),
    "model_output_out_of_range": (_model_output_out_of_range, ["output tensor index 42"]),
    "zero_scales": (_zero_scales, ["tensor 'input'", "scale 0.0", "finite and positive"]),
    "nan_weight_scale": (_nan_weight_scale, ["tensor 'conv1_weights'", "scale nan"]),
    "negative_output_scale": (_negative_output_scale, ["tensor 'conv1_out'", "scale -0.02"]),
    "no_outputs": (_no_outputs, ["model has no outputs"]),
    "zero_input_dimension": (_zero_input_dimension, ["tensor 'input'", "zero dimension [1, 0, 8, 3]"]),
    "non_utf8_name": (_non_utf8_name, ["tensor 3", "conv\\xff_out", "not UTF-8"]),
    "truncated_weights": (_truncated_weights, ["conv1_weights", "10 bytes"]),
    "per_channel_mismatch": (_per_channel_mismatch, ["conv1_weights", "5 per-channel scales"]),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_a_corrupted_tflite_model_is_one_line_naming_the_field(tmp_path, case):
    corrupt, fragments = CORRUPTIONS[case]
    model = tiny()
    corrupt(model)
    path = tmp_path / f"{case}.tflite"
    path.write_bytes(pack(model))
    assert_refused(ming("analyze", path), *fragments)


@pytest.mark.unit
def test_a_corrupted_tflite_model_fails_in_validation_before_any_conversion(tmp_path, monkeypatch):
    """Every corruption above is caught before the TOSA converter or IREE runs (fast, and nothing native
    reads a damaged flatbuffer)."""
    def no_conversion(*args, **kwargs):
        raise AssertionError("the converter ran")

    monkeypatch.setattr(tflite_model, "import_to_linalg", no_conversion)
    for case, (corrupt, fragments) in sorted(CORRUPTIONS.items()):
        model = tiny()
        corrupt(model)
        path = tmp_path / f"{case}.tflite"
        path.write_bytes(pack(model))
        with pytest.raises(MingError) as error:
            lift(path)
        assert all(fragment in str(error.value) for fragment in fragments), (case, str(error.value))


def test_build_of_a_zero_scale_tflite_model_is_refused_and_writes_nothing(tmp_path):
    """Before: `ming build` built it, an accelerator whose every output is -128."""
    model = tiny()
    _zero_scales(model)
    path = tmp_path / "zero.tflite"
    path.write_bytes(pack(model))
    assert_refused(ming("build", path, "-q", "-o", tmp_path / "out"), "scale 0.0")
    assert not (tmp_path / "out").exists()


# --- TFLite: unreadable files -------------------------------------------------------------------------------------


def test_a_directory_named_like_a_model_is_one_line(tmp_path):
    (tmp_path / "model.tflite").mkdir()
    (tmp_path / "model.onnx").mkdir()
    assert_refused(ming("analyze", tmp_path / "model.tflite"), "is a directory")
    assert_refused(ming("analyze", tmp_path / "model.onnx"), "is a directory")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-000 file")
def test_an_unreadable_model_file_is_one_line(tmp_path):
    for name in ("model.tflite", "model.onnx"):
        path = tmp_path / name
        path.write_bytes(tflite_models.tiny_conv() if name.endswith("tflite") else EXAMPLE.read_bytes())
        path.chmod(0)
        assert_refused(ming("analyze", path), "cannot read the model", "permissions")


@pytest.mark.unit
def test_a_read_error_is_one_message(tmp_path, monkeypatch):
    """The permission case as root: the read itself fails."""
    path = tmp_path / "model.tflite"
    path.write_bytes(tflite_models.tiny_conv())

    def denied(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(MingError, match="cannot read the model \\(Permission denied\\); check its permissions"):
        lift(path)


# --- crash isolation: the native converters run in a child process ----------------------------------------------


def test_a_tosa_converter_crash_is_one_line_and_ming_survives(tmp_path):
    """The flatbuffer that used to kill ming with SIGSEGV (an operator output index out of range), handed
    past the validator straight to the conversion: the child dies, ming reports it."""
    model = tiny()
    _output_index_out_of_range(model)
    path = tmp_path / "crash.tflite"
    with pytest.raises(MingError) as error:
        tflite_model.import_to_linalg(model, path)
    message = str(error.value)
    assert f"the TFLite converter crashed on {path} (signal SEGV)" in message, message
    assert isolated.MEMORY_VARIABLE in message


def test_a_tosa_converter_error_is_its_first_line_without_mlir_locations(tmp_path, capfd):
    """Missing options past the validator: the converter's MLIR diagnostics stay in the child."""
    model = tiny()
    _no_conv_options(model)
    with pytest.raises(MingError) as error:
        tflite_model.import_to_linalg(model, tmp_path / "m.tflite")
    message = str(error.value)
    assert "the TFLite converter failed on" in message and "'conv1_out'" in message, message
    assert "dilation_h_factor" in message and "loc(" not in message, message
    out, err = capfd.readouterr()
    assert "loc(" not in err and "error" not in err, err


def _fake_tool(tmp_path: Path, body: str) -> str:
    tool = tmp_path / "fake-iree-compile"
    tool.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    tool.chmod(0o755)
    return str(tool)


def test_an_iree_compile_crash_is_one_line(tmp_path, monkeypatch):
    tool = _fake_tool(tmp_path, """
        import os, signal
        os.kill(os.getpid(), signal.SIGSEGV)
    """)
    monkeypatch.setattr(iree_compile.binaries, "find_tool", lambda name: tool)
    with pytest.raises(MingError, match=r"iree-compile crashed on model.onnx \(signal SEGV\)"):
        iree_compile.lower(b"", (), "model.onnx")


def test_iree_compile_past_its_time_limit_says_which_variable_allows_more(tmp_path, monkeypatch):
    tool = _fake_tool(tmp_path, """
        import time
        time.sleep(60)
    """)
    monkeypatch.setattr(iree_compile.binaries, "find_tool", lambda name: tool)
    monkeypatch.setenv(isolated.SECONDS_VARIABLE, "1")
    with pytest.raises(MingError, match=r"did not finish model.onnx within 1 s; .*MING_IMPORT_SECONDS"):
        iree_compile.lower(b"", (), "model.onnx")


def test_iree_compile_past_its_memory_limit_says_which_variable_allows_more(tmp_path, monkeypatch):
    tool = _fake_tool(tmp_path, """
        block = bytearray(2 ** 31)
    """)
    monkeypatch.setattr(iree_compile.binaries, "find_tool", lambda name: tool)
    monkeypatch.setenv(isolated.MEMORY_VARIABLE, "512")
    with pytest.raises(MingError, match=r"ran out of memory on model.onnx \(limit 512 MiB\); .*MING_IMPORT_MEMORY_MB"):
        iree_compile.lower(b"", (), "model.onnx")


def test_an_iree_compile_error_is_its_first_line_without_locations(tmp_path, monkeypatch):
    tool = _fake_tool(tmp_path, """
        import sys
        sys.stderr.write('loc("conv1"("model.onnx":1:2)): error: failed to legalize operation\\n'
                         'loc("conv1"("model.onnx":1:2)): note: see current operation\\n')
        sys.exit(1)
    """)
    monkeypatch.setattr(iree_compile.binaries, "find_tool", lambda name: tool)
    with pytest.raises(MingError) as error:
        iree_compile.lower(b"", (), "model.onnx")
    assert str(error.value) == "IREE could not lower model.onnx: at 'conv1': failed to legalize operation"


@pytest.mark.parametrize("value", ["lots", "0", "-5"])
def test_a_bad_limit_variable_is_one_line(tmp_path, value):
    path = tmp_path / "tiny.tflite"
    path.write_bytes(tflite_models.tiny_conv())
    env = dict(os.environ, MING_IMPORT_SECONDS=value)
    assert_refused(ming("analyze", path, env=env), f"MING_IMPORT_SECONDS='{value}'", "positive whole number")


def test_a_sigsegv_sent_to_the_converter_child_is_one_line_from_the_cli(tmp_path):
    """A valid model through the CLI, its converter child killed with SIGSEGV as it starts (a wrapper
    around the converter module, in the CLI's own process): exit 2 and one line."""
    path = tmp_path / "tiny.tflite"
    path.write_bytes(tflite_models.tiny_conv())
    script = textwrap.dedent(f"""
        import os, signal, subprocess, sys
        from ming_py.frontends import isolated
        real = subprocess.run
        def run(command, *args, **kwargs):
            if "ming_py.frontends.tosa_convert" in command:
                command = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]
            return real(command, *args, **kwargs)
        isolated.subprocess.run = run
        from ming_py.cli import main
        sys.exit(main(["analyze", {str(path)!r}]))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert_refused(result, f"the TFLite converter crashed on {path} (signal SEGV)")


def two_tables() -> schema.ModelT:
    """HARD_SWISH then MUL by a constant: two tables, filled by LiteRT in one child process."""
    builder = tflite_models.TfliteBuilder(seed=9)
    x = builder.input((1, 4, 4, 3), scale=0.05, zero_point=-10)
    y = builder.mul(builder.elementwise(x, "HARD_SWISH", 0.03, -50), np.array([0.5, -1.0, 2.0]), 0.02, 0)
    return schema.ModelT.InitFromPackedBuf(bytearray(builder.build([y], "two_tables")), 0)


@pytest.mark.unit
def test_a_litert_crash_while_filling_tables_is_one_line_naming_the_node(monkeypatch):
    """The table child (`litert_probe`) as it is, but dying with SIGSEGV in its second probe, as LiteRT would on
    a hostile operator: one line naming that node, and ming survives."""
    script = textwrap.dedent("""
        import os, signal, sys
        from ming_py.frontends import litert_probe
        real, calls = litert_probe.run_probe, []
        def run_probe(*args):
            calls.append(args)
            if len(calls) == 2:
                os.kill(os.getpid(), signal.SIGSEGV)
            return real(*args)
        litert_probe.run_probe = run_probe
        sys.exit(litert_probe.main())
    """)
    monkeypatch.setattr(tflite_tables, "PROBE_COMMAND", (sys.executable, "-c", script))
    with pytest.raises(MingError) as error:
        tflite_tables.node_tables(two_tables(), "m.tflite")
    message = str(error.value)
    assert message.startswith("node 'mul_out' (MUL): LiteRT's kernels crashed on m.tflite (signal SEGV)"), message
    assert "\n" not in message and isolated.MEMORY_VARIABLE in message


@pytest.mark.unit
@pytest.mark.parametrize("answer", ["not json", "[]", '[{"values": "AAAA"}, {"values": "AAAA"}]',
                                   '[{"values": "?"}, {"values": "?"}]', '[{"error": 5}, {"error": 5}]',
                                   '{"values": []}', "[" * 50_000])
def test_an_answer_of_the_table_child_out_of_form_is_refused(monkeypatch, answer):
    """Whatever the child writes (it runs native code on the model) is checked, not trusted: a wrong count of
    entries, a table of the wrong size, not base64, not text."""
    script = f"import sys; sys.stdin.buffer.read(); sys.stdout.write({answer!r})"
    monkeypatch.setattr(tflite_tables, "PROBE_COMMAND", (sys.executable, "-c", script))
    with pytest.raises(MingError, match=r"^LiteRT's kernels answered in an unexpected form on m.tflite"):
        tflite_tables.node_tables(two_tables(), "m.tflite")


@pytest.mark.unit
@pytest.mark.parametrize("role", ["input", "output"])
def test_a_channels_last_port_without_the_models_rank_is_refused(role):
    """A 2-d L x C tensor (moved to C x L) for a (1, L, C) model port: no host permutation maps the one onto the
    other, so it is refused instead of passing channels-last values on as they are."""
    graph = Graph("g", tensors={"t": TensorInfo("t", (10, 4), "i8")})
    if role == "input":
        graph.inputs = [GraphInput("x", "t", (1, 10, 4), 0.1, 0)]
    else:
        graph.outputs = [GraphOutput("y", "t", (1, 10, 4), 0.1, 0)]
    with pytest.raises(MingError, match=rf"^model {role} '[xy]' of shape \[1, 10, 4\] reaches ming as a 2-d"):
        channels_first(graph)


def test_a_valid_tflite_model_still_converts_under_the_default_bounds(tmp_path):
    path = tmp_path / "tiny.tflite"
    path.write_bytes(tflite_models.tiny_conv())
    result = ming("analyze", path)
    assert result.returncode == 0 and result.stderr == "", result.stderr


# --- ONNX -----------------------------------------------------------------------------------------------------


def example() -> onnx.ModelProto:
    return onnx.load(str(EXAMPLE))


def _set_initializer(model, name, value):
    for i, tensor in enumerate(model.graph.initializer):
        if tensor.name == name:
            array = numpy_helper.to_array(tensor)
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(np.full(array.shape, value, array.dtype),
                                                                        name))
            return
    raise KeyError(name)


def _opset(version, domain=""):
    def change(model):
        if domain:
            model.opset_import.append(helper.make_opsetid(domain, version))
        else:
            model.opset_import[0].version = version
    return change


def _zero_input_dimension_onnx(model):
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 0


def _no_outputs_onnx(model):
    del model.graph.output[:]


ONNX_CASES = {
    "opset_99": (_opset(99), ["opset 99 of ai.onnx", f"the {onnx.defs.onnx_opset_version()} the installed onnx"]),
    "ml_opset_77": (_opset(77, "ai.onnx.ml"), ["opset 77 of ai.onnx.ml", "supports"]),
    "zero_input_scale": (lambda m: _set_initializer(m, "x_scale", 0.0),
                         ["node 'x_QuantizeLinear' (QuantizeLinear)", "scale 0.0", "'x_scale'"]),
    "nan_weight_scale": (lambda m: _set_initializer(m, "conv1.w_scale", np.nan),
                         ["node 'conv1.w_DequantizeLinear' (DequantizeLinear)", "scale nan"]),
    "negative_scale": (lambda m: _set_initializer(m, "relu1_out_scale", -0.5), ["scale -0.5", "relu1_out_scale"]),
    "infinite_scale": (lambda m: _set_initializer(m, "relu1_out_scale", np.inf), ["scale inf"]),
    "zero_input_dimension": (_zero_input_dimension_onnx, ["tensor 'x'", "zero dimension [1, 3, 0, 16]"]),
    "no_outputs": (_no_outputs_onnx, ["model has no outputs"]),
}


@pytest.mark.parametrize("case", sorted(ONNX_CASES))
def test_a_broken_onnx_model_is_one_line_naming_the_node_or_opset(tmp_path, case):
    change, fragments = ONNX_CASES[case]
    model = example()
    change(model)
    path = tmp_path / f"{case}.onnx"
    onnx.save(model, str(path))
    assert_refused(ming("analyze", path), *fragments)


def test_a_zero_scale_in_a_qoperator_model_names_the_node(tmp_path):
    """A QLinearConv whose weight scale is 0: before, numpy warnings and a nan bias check."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])
    constants = [
        numpy_helper.from_array(np.float32(0.05), "x_scale"), numpy_helper.from_array(np.int8(0), "x_zp"),
        numpy_helper.from_array(np.ones((2, 1, 3, 3), np.int8), "w"),
        numpy_helper.from_array(np.zeros(2, np.float32), "w_scale"),
        numpy_helper.from_array(np.zeros(2, np.int8), "w_zp"),
        numpy_helper.from_array(np.float32(0.1), "y_scale"), numpy_helper.from_array(np.int8(0), "y_zp"),
        numpy_helper.from_array(np.zeros(2, np.int32), "b"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"], name="quantize"),
        helper.make_node("QLinearConv", ["xq", "x_scale", "x_zp", "w", "w_scale", "w_zp", "y_scale", "y_zp", "b"],
                         ["yq"], name="qconv", pads=[1, 1, 1, 1]),
        helper.make_node("DequantizeLinear", ["yq", "y_scale", "y_zp"], ["y"], name="dequantize"),
    ]
    model = helper.make_model(helper.make_graph(nodes, "qop", [x], [y], constants),
                              opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "qop.onnx"
    onnx.save(model, str(path))
    assert_refused(ming("analyze", path), "node 'qconv' (QLinearConv)", "scale 0.0", "'w_scale'")


def test_a_non_utf8_onnx_name_is_one_line(tmp_path):
    data = EXAMPLE.read_bytes()
    name = example().graph.node[0].name.encode()
    path = tmp_path / "names.onnx"
    path.write_bytes(data.replace(name, name[:-1] + b"\xff"))
    assert_refused(ming("analyze", path), "not UTF-8", "\\xff")
