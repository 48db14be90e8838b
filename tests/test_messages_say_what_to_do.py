"""Refusals at the command line are one line that names the tensor, op or setting concerned as the user wrote
it, and what to do."""

from __future__ import annotations

import subprocess
import sys

import tflite_models

SKIP = "input_split_to_block1_add"  # residual_block's skip FIFO, which deadlocks at depth 3


def ming(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ming_py.cli", *map(str, args)], capture_output=True, text=True)


def error_line(result: subprocess.CompletedProcess) -> str:
    """The one error line of a refused command (progress lines aside)."""
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("ming: error: ")]
    return line.removeprefix("ming: error: ")


def _dynamic_model(tmp_path, on_input: bool):
    b = tflite_models.TfliteBuilder(seed=1)
    x = b.input((1, 8, 8, 3))
    y = b.conv(x, 4, name="conv")
    if on_input:
        b.tensors[x.index].shapeSignature = [1, -1, -1, 3]
    else:
        b.tensors[y.index].shapeSignature = [1, -16, 8, 4]
    path = tmp_path / "dynamic.tflite"
    path.write_bytes(b.build([y], "dynamic"))
    return path


def test_a_dynamic_tflite_shape_is_printed_as_plain_numbers_with_what_to_do(tmp_path):
    line = error_line(ming("build", _dynamic_model(tmp_path, on_input=False), "-o", tmp_path / "out"))
    assert line.startswith("tensor 'conv_out' (written by CONV_2D) has a dynamic shape [1, -16, 8, 4]"), line
    assert "np." not in line and "convert the model with every dimension fixed" in line
    line = error_line(ming("build", _dynamic_model(tmp_path, on_input=True), "-o", tmp_path / "out"))
    assert line.startswith("tensor 'input' has a dynamic shape [1, -1, -1, 3]") and "np." not in line, line


def test_a_deadlocking_depth_from_a_settings_file_names_the_file_and_key(quantized, tmp_path):
    settings = tmp_path / "depths.json"
    settings.write_text(f'{{"{SKIP}.depth": 3}}')
    line = error_line(ming("build", quantized("residual_block"), "--dsp", "20%", "--settings", settings, "-q",
                           "-o", tmp_path / "out"))
    assert line.startswith(f"settings file {settings}: {SKIP}.depth: 3: the design deadlocks with it"), line
    assert "--set" not in line
