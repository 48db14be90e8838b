"""Fault injection on the deployment package: its metadata is data, not instructions.

An edited or damaged OUT/deploy/accelerator.json or OUT/host.json stops `run.py`, `ming deploy` and `ming csim`
in one line before anything runs (no compile, no file written outside the build); the input is checked by one
policy everywhere; an interrupted compile leaves no process, staging binary or temporary file; an output is
complete or absent, never short.

One `ming build` of examples/tiny_cnn.onnx per module, copied per test; the C-simulation is compiled once (the
`compiled` fixture). Every other case runs with CXX set to a stand-in compiler that records being called and
fails, so a check that let a case through to the compiler shows up as a failure, not as a 20 s compile.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from ming_py.errors import MingError
from ming_py import options
from ming_py.contract import ming_cxx, ming_npy, ming_ports
from ming_py.runtime import ming_driver
from ming_py.contract.ming_errors import DeployError
from test_faults import ming

REBUILD = "run `ming build` again"


def assert_one_line(result: subprocess.CompletedProcess, code: int, prefix: str, *fragments: str) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code, result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(prefix), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def compiled(example_build, tmp_path_factory) -> Path:
    """A copy of OUT whose deploy/csim/ holds the compiled C-simulation (the one real compile of the module)."""
    out = tmp_path_factory.mktemp("faults_deploy_compiled") / "out"
    shutil.copytree(example_build, out)
    x = out.parent / "x.npy"
    np.save(x, np.zeros((1, 3, 16, 16), np.float32))
    result = run_py(out, "--backend", "csim", "--input", x, "--output", out.parent / "y.npy")
    assert result.returncode == 0, result.stderr
    assert (out / "deploy" / "csim" / "tiny_cnn_csim").is_file()
    return out


@pytest.fixture
def no_compiler(tmp_path) -> tuple[dict, Path]:
    """(environment whose CXX records being called in a marker file and fails, the marker)."""
    marker = tmp_path / "compiler-was-called"
    cxx = tmp_path / "failing-cxx"
    cxx.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && {{ echo stand-in 1.0; exit 0; }}\ntouch '{marker}'\n"
                   "echo 'error: the stand-in compiler' >&2\nexit 1\n")
    cxx.chmod(0o755)
    return os.environ | {"CXX": str(cxx), "PYTHONDONTWRITEBYTECODE": "1"}, marker


def run_py(out: Path, *args, env=None, **kwargs) -> subprocess.CompletedProcess:
    env = env or os.environ | {"PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, str(out / "deploy" / "run.py"), *map(str, args)], capture_output=True,
                           text=True, env=env, **kwargs)


def copy_build(example_build: Path, tmp_path: Path) -> Path:
    out = tmp_path / "build" / "out"
    shutil.copytree(example_build, out, symlinks=True)
    return out


def edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def setter(*keys_and_value):
    *keys, last, value = keys_and_value

    def change(data):
        for key in keys:
            data = data[key]
        data[last] = value
    return change


# --- 1. paths of accelerator.json and host.json ---------------------------------------------------------------

PATH_EDITS = [
    ("binary_is_run_py", setter("csim", "binary", "run.py"), "'csim.binary'"),
    ("binary_is_a_build_file", setter("csim", "binary", "ming_driver.py"), "'csim.binary'"),
    ("binary_absolute", setter("csim", "binary", "/tmp/ming_evil_csim"), "'csim.binary'"),
    ("binary_climbs_out", setter("csim", "binary", "../../evil_csim"), "'csim.binary'"),
    ("binary_climbs_out_of_csim", setter("csim", "binary", "csim/../../evil_csim"), "'csim.binary'"),
    ("binary_in_a_subdirectory", setter("csim", "binary", "csim/sub/evil"), "'csim.binary'"),
    ("binary_hidden", setter("csim", "binary", "csim/.tiny_cnn_csim"), "'csim.binary'"),
    ("source_absolute", setter("csim", "sources", ["/etc/hostname"]), "'csim.sources'"),
    ("source_outside", setter("csim", "sources", ["../../outside/evil.cpp"]), "'csim.sources'"),
    ("source_dotdot_inside", setter("csim", "sources", ["../hls/../../evil.cpp"]), "'csim.sources'"),
    ("source_not_cpp", setter("csim", "sources", ["../hls/tiny_cnn.h"]), "'csim.sources'"),
    ("no_sources", setter("csim", "sources", []), "'csim.sources'"),
    ("include_absolute", setter("csim", "include", ["/usr/include"]), "'csim.include'"),
    ("include_outside", setter("csim", "include", ["../.."]), "'csim.include'"),
    ("bitstream_outside", setter("bitstream", "../../evil.bit"), "'bitstream'"),
    ("bitstream_absolute", setter("bitstream", "/tmp/evil.bit"), "'bitstream'"),
    ("dma_not_an_identifier", setter("dma", "__import__('os')"), "'dma'"),
    ("csim_not_an_object", setter("csim", "csim/x"), "'csim'"),
]


@pytest.mark.parametrize("change, field", [p[1:] for p in PATH_EDITS], ids=[p[0] for p in PATH_EDITS])
def test_accelerator_json_paths_stay_inside_the_build(example_build, tmp_path, no_compiler, change, field):
    """Before: "binary": "run.py" compiled over deploy/run.py; an absolute or ../ binary or source wrote or
    compiled outside deploy/. After: one line naming the field, before any compile; nothing written."""
    env, marker = no_compiler
    out = copy_build(example_build, tmp_path)
    edit(out / "deploy" / "accelerator.json", change)
    before = tree(out)
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    result = run_py(out, "--backend", "csim", "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy", env=env)
    assert_one_line(result, 2, "error: ", "accelerator.json", field, REBUILD)
    assert not marker.exists() and tree(out) == before
    assert not (tmp_path / "y.npy").exists() and not Path("/tmp/ming_evil_csim").exists()
    assert not (tmp_path / "build" / "evil_csim").exists() and not (tmp_path / "evil_csim").exists()


@pytest.mark.parametrize("link", ["deploy/csim", "hls"])
def test_a_symlink_leading_out_of_the_build_is_refused(example_build, tmp_path, no_compiler, link):
    """deploy/csim -> a directory outside (the binary would land there), hls -> sources outside the build."""
    env, marker = no_compiler
    out = copy_build(example_build, tmp_path)
    outside = tmp_path / "outside"
    if link == "hls":
        shutil.move(out / "hls", outside)
    else:
        outside.mkdir()
    (out / link).symlink_to(outside, target_is_directory=True)
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    result = run_py(out, "--backend", "csim", "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy", env=env)
    assert_one_line(result, 2, "error: ", "leads out of", "symbolic link", REBUILD)
    assert not marker.exists()
    assert sorted(p.name for p in outside.iterdir()) == ([] if link == "deploy/csim" else
                                                         sorted(p.name for p in (example_build / "hls").iterdir()))


def test_compile_csim_checks_the_paths_itself(example_build, tmp_path):
    """compile_csim (also used apart from Accelerator) refuses a binary outside deploy/csim before compiling."""
    out = copy_build(example_build, tmp_path)
    meta = json.loads((out / "deploy" / "accelerator.json").read_text())
    with pytest.raises(DeployError, match=r"'csim.binary' is 'run.py'.*run `ming build` again"):
        ming_cxx.compile_csim(out / "deploy", meta["csim"] | {"binary": "run.py"})
    assert (out / "deploy" / "run.py").read_bytes() == (example_build / "deploy" / "run.py").read_bytes()


@pytest.mark.parametrize("model", ["../evil", "/tmp/evil", "hls/../x", "tiny cnn", ""])
def test_host_json_model_is_a_plain_name(example_build, tmp_path, no_compiler, model):
    """Before: "model": "../evil" made `ming csim` compile ../evil.cpp and write the binary outside its cache.
    After: one line naming 'model', nothing compiled, the cache untouched."""
    env, marker = no_compiler
    out = copy_build(example_build, tmp_path)
    (out / "evil.cpp").write_text("int main() { return 0; }\n")
    (out / "evil_tb.cpp").write_text("\n")
    edit(out / "host.json", setter("model", model))
    cache = tmp_path / "cache"
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    result = ming("csim", out, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy",
                  env=env | {"MING_CACHE_DIR": str(cache)})
    assert_one_line(result, 2, "ming: error: ", "host.json", "model" if model else "no model name", REBUILD)
    assert not marker.exists() and not (tmp_path / "y.npy").exists()
    assert not cache.exists() or not any(cache.rglob("*csim*"))


# --- 2. every number of the metadata -------------------------------------------------------------------------

def _output(*keys_and_value):
    return setter("outputs", 0, *keys_and_value)


def _delete(key):
    return lambda data: data.pop(key)


NUMBER_EDITS = [
    ("stream_shape_values", setter("input", "stream_shape", [3, 16, 8]), "'input.onnx_shape'"),
    ("stream_shape_rank", setter("input", "stream_shape", [768]), "'input.stream_shape'"),
    ("stream_shape_zero", setter("input", "stream_shape", [0, 16, 16]), "'input.stream_shape'"),
    ("words", setter("input", "words", 95), "'input.words' is 95, not 96"),
    ("words_text", setter("input", "words", "96"), "'input.words' is missing or not an integer"),
    ("output_words", _output("words", 3), "'outputs[0].words' is 3, not 2"),
    ("array_shape", _output("array_shape", [11]), "'outputs[0].array_shape'"),
    ("onnx_shape", setter("input", "onnx_shape", [1, 3, 16, 17]), "'input.onnx_shape'"),
    ("scale_zero", setter("input", "scale", 0), "'input.scale' is 0"),
    ("scale_negative", setter("input", "scale", -1), "'input.scale' is -1"),
    ("scale_overflows_float32", setter("input", "scale", 1e39), "'input.scale'"),
    ("scale_underflows_float32", setter("input", "scale", 1e-50), "'input.scale'"),
    ("scale_nan", setter("input", "scale", float("nan")), "'input.scale' is missing or not a number"),
    ("scale_bool", setter("input", "scale", True), "'input.scale' is missing or not a number"),
    ("output_scale_zero", _output("scale", 0.0), "'outputs[0].scale' is 0.0"),
    ("zero_point_huge", setter("input", "zero_point", 10 ** 9), "'input.zero_point' is 1000000000, outside int8"),
    ("zero_point_below", setter("input", "zero_point", -129), "'input.zero_point' is -129"),
    ("output_zero_point", _output("zero_point", 128), "'outputs[0].zero_point' is 128"),
    ("max_transfer_zero", setter("max_transfer_bytes", 0), "'max_transfer_bytes' is 0, not a positive integer"),
    ("max_transfer_negative", setter("max_transfer_bytes", -8), "'max_transfer_bytes' is -8"),
    ("max_transfer_float", setter("max_transfer_bytes", 1e6), "'max_transfer_bytes' is 1000000.0"),
    ("max_transfer_bool", setter("max_transfer_bytes", True), "'max_transfer_bytes' is True"),
    ("max_transfer_missing", _delete("max_transfer_bytes"), "'max_transfer_bytes' is None"),
    ("max_transfer_below_an_image", setter("max_transfer_bytes", 100), "less than one image's 768 bytes"),
    ("interface", setter("interface", "usb"), "'interface' is 'usb'"),
    ("csim_mode", setter("csim", "mode", "memory"), "'csim.mode' is 'memory'"),
    ("dtype", setter("input", "dtype", "float64"), "'input.dtype' is 'float64'"),
    ("quantizer", setter("input", "quantizer", "numpy"), "'input.quantizer' is 'numpy'"),
    ("permutation", setter("input", "permutation", [0, 0, 1, 2]), "'input.permutation'"),
    ("permutation_text", setter("input", "permutation", ["a"]), "'input.permutation'"),
    ("index", _output("index", 5), "'index' values are [5]"),
    ("host_op_kind", _output("host_ops", 0, "kind", "eval"), "'outputs[0].host_ops[0].kind' is 'eval'"),
    ("host_op_axis", _output("host_ops", 0, "axis", 7), "'outputs[0].host_ops[0].axis' is 7"),
    ("host_op_scale", _output("host_ops", 1, "scale", 0), "'outputs[0].host_ops[1].scale' is 0"),
    ("host_op_zero_point", _output("host_ops", 2, "zero_point", 300), "'outputs[0].host_ops[2].zero_point' is 300"),
    ("host_op_reshape", _output("host_ops", 3, "shape", [1, 11]), "'outputs[0].host_ops[3].shape'"),
    ("host_op_missing_field", _output("host_ops", 0, {"kind": "softmax"}), "'outputs[0].host_ops[0].axis'"),
    ("host_ops_not_a_list", _output("host_ops", {}), "'outputs[0].host_ops' is missing or not a list"),
    ("outputs_not_a_list", setter("outputs", {}), "no 'outputs' list"),
    ("input_not_an_object", setter("input", []), "no 'input' object"),
    ("onnx_name_number", setter("input", "onnx_name", 5), "'input.onnx_name' is missing or not a string"),
    ("clock", setter("clock_mhz", -200), "'clock_mhz' is -200"),
    ("target", _delete("target"), "'target' is missing"),
    ("top_level_list", lambda data: data.clear() or data.update({"model": []}), "no model name"),
]


@pytest.mark.parametrize("change, message", [e[1:] for e in NUMBER_EDITS], ids=[e[0] for e in NUMBER_EDITS])
def test_every_number_of_accelerator_json_is_checked_before_anything_runs(example_build, tmp_path, no_compiler, change,
                                                                         message):
    """Before: edited shapes, scales, zero points and limits gave silently different outputs or a traceback.
    After: one line naming the field, exit 2, before the compile; no output written."""
    env, marker = no_compiler
    out = copy_build(example_build, tmp_path)
    edit(out / "deploy" / "accelerator.json", change)
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    result = run_py(out, "--backend", "csim", "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy", env=env)
    assert_one_line(result, 2, "error: ", "accelerator.json", message, REBUILD)
    assert not marker.exists() and not (tmp_path / "y.npy").exists() and not (out / "deploy" / "csim").exists()


def test_accelerator_json_that_is_no_object_is_one_line(example_build, tmp_path, no_compiler):
    env, _ = no_compiler
    out = copy_build(example_build, tmp_path)
    for text in ("[1, 2]", "null", '"text"', "{"):
        (out / "deploy" / "accelerator.json").write_text(text)
        np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
        result = run_py(out, "--backend", "csim", "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy",
                        env=env)
        assert_one_line(result, 2, "error: ", "accelerator.json")


@pytest.mark.parametrize("change, message", [
    (setter("input", "scale", 0), "'input.scale' is 0"),
    (setter("input", "zero_point", 10 ** 9), "'input.zero_point' is 1000000000"),
    (setter("input", "stream_shape", [3, 16, 8]), "'input.onnx_shape'"),
    (setter("input", "words", 95), "'input.words' is 95, not 96"),
    (_output("host_ops", 0, "kind", "exec"), "'outputs[0].host_ops[0].kind' is 'exec'"),
], ids=["scale", "zero_point", "stream_shape", "words", "host_op"])
def test_every_number_of_host_json_is_checked_before_csim_compiles(example_build, tmp_path, no_compiler, change,
                                                                    message):
    env, marker = no_compiler
    out = copy_build(example_build, tmp_path)
    edit(out / "host.json", change)
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    result = ming("csim", out, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy",
                  env=env | {"MING_CACHE_DIR": str(tmp_path / "cache")})
    assert_one_line(result, 2, "ming: error: ", "not a complete ming build (host.json: ", message, REBUILD)
    assert not marker.exists() and not (tmp_path / "y.npy").exists()


def test_ming_deploy_reports_damaged_metadata_in_one_line(example_build, tmp_path, no_compiler):
    env, marker = no_compiler
    out = copy_build(example_build, tmp_path)
    edit(out / "deploy" / "accelerator.json", setter("input", "scale", -1))
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    result = ming("deploy", out, "--backend", "csim", "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy",
                  env=env)
    assert_one_line(result, 2, "ming: error: ", "'input.scale' is -1", REBUILD)
    assert not marker.exists() and not (tmp_path / "y.npy").exists()


# --- 3. the input policy -------------------------------------------------------------------------------------

BAD_INPUTS = {
    "float64": (np.zeros((1, 3, 16, 16)), "input is float64; give float32"),
    "float16": (np.zeros((1, 3, 16, 16), np.float16), "input is float16"),
    "int32": (np.zeros((1, 3, 16, 16), np.int32), "input is int32"),
    "bool": (np.zeros((1, 3, 16, 16), bool), "input is bool"),
    "complex": (np.zeros((1, 3, 16, 16), np.complex64), "input is complex64"),
    "datetime": (np.zeros((1, 3, 16, 16), "datetime64[s]"), "input is datetime64[s]"),
    "structured": (np.zeros((1, 3, 16, 16), [("a", "<f4")]), "input is [('a', '<f4')]"),
    "str": (np.full((1, 3, 16, 16), "a"), "input is <U1"),
    "bytes": (np.full((1, 3, 16, 16), b"a"), "input is |S1"),
    "void": (np.zeros((1, 3, 16, 16), "V4"), "input is |V4"),
    "object": (np.full((1, 3, 16, 16), None, object), "holds Python objects; save a float32 array"),
    "empty": (np.zeros((0, 3, 16, 16), np.float32), "input has shape (0, 3, 16, 16), no values"),
    "nan": (np.full((1, 3, 16, 16), np.nan, np.float32), "input has 768 non-finite values"),
}


def _write_input(path: Path, kind: str) -> None:
    if kind == "garbage":
        path.write_bytes(b"\x80\x04garbage that is no .npy")
    elif kind == "npz":
        with open(path, "wb") as file:
            np.savez(file, x=np.zeros((1, 3, 16, 16), np.float32))
    else:
        np.save(path, BAD_INPUTS[kind][0], allow_pickle=True)


INPUT_CASES = [(kind, message) for kind, (_, message) in BAD_INPUTS.items()] + [
    ("garbage", "not a .npy array; save the input with numpy.save"),
    ("npz", "not a .npy array; save the input with numpy.save")]


@pytest.mark.parametrize("kind, message", INPUT_CASES, ids=[c[0] for c in INPUT_CASES])
def test_run_py_takes_what_ming_reference_takes(example_build, tmp_path, no_compiler, kind, message):
    """Before: run.py ran float64, bool, datetime, complex, ... inputs and wrote outputs, and suggested
    allow_pickle for a garbage file. After: the same one line as `ming csim`/`ming reference`, before compiling
    (all three read the file knowing the model's input, as `ming csim` and run.py do)."""
    env, marker = no_compiler
    out = copy_build(example_build, tmp_path)
    x = tmp_path / "x.npy"
    _write_input(x, kind)
    result = run_py(out, "--backend", "csim", "--input", x, "--output", tmp_path / "y.npy", env=env)
    line = assert_one_line(result, 2, "error: ", message)
    assert "allow_pickle" not in line
    assert not marker.exists() and not (tmp_path / "y.npy").exists()
    port = ming_ports.Port.of(json.loads((out / "host.json").read_text())["input"])
    with pytest.raises(MingError) as ming_error:
        options.load_input(x, port)
    with pytest.raises(DeployError) as deploy_error:
        ming_npy.load_input(x, port)
    assert str(ming_error.value) == str(deploy_error.value) == line.removeprefix("error: ")


@pytest.mark.unit
@pytest.mark.parametrize("dtype", ["float32", ">f4", "int8", "uint8", "float64", "float16", "int16", "int32",
                                   "int64", "uint16", "bool", "complex64", "datetime64[s]", "timedelta64[s]",
                                   "U1", "S1", "V4", [("a", "<f4")], [("a", "i1")]])
def test_the_driver_and_ming_refuse_the_same_dtypes(tmp_path, dtype):
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 4), dtype))
    outcomes = []
    for load, error in ((options.load_input, MingError), (ming_npy.load_input, DeployError)):
        try:
            outcomes.append(str(load(x).dtype))
        except error as exc:
            outcomes.append(str(exc))
    assert outcomes[0] == outcomes[1]
    assert (outcomes[0] in ("float32", "int8", "uint8")) == (np.dtype(dtype).name in ("float32", "int8", "uint8")
                                                              and np.dtype(dtype).fields is None)


def test_an_input_of_the_wrong_type_for_the_model_is_refused_before_compiling(example_build, tmp_path, no_compiler):
    env, marker = no_compiler
    out = copy_build(example_build, tmp_path)
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.int8))
    result = run_py(out, "--backend", "csim", "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy", env=env)
    assert_one_line(result, 2, "error: ", "input is int8, the model takes float32; save x.astype(numpy.float32)")
    np.save(tmp_path / "x.npy", np.zeros((2, 5), np.float32))
    result = run_py(out, "--backend", "csim", "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy", env=env)
    assert_one_line(result, 2, "error: ", "input has shape (2, 5)")
    assert not marker.exists()


READ_ONLY = textwrap.dedent("""
    import errno, os, runpy, sys
    deploy = os.path.realpath(sys.argv[1])
    real_open, real_mkdir = os.open, os.mkdir
    def refused(path):
        return os.path.realpath(path).startswith(deploy + os.sep) and True
    def read_only_open(path, flags, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and refused(path):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)
    def read_only_mkdir(path, *args, **kwargs):
        if refused(path):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_mkdir(path, *args, **kwargs)
    os.open, os.mkdir = read_only_open, read_only_mkdir
    sys.argv = [os.path.join(deploy, "run.py"), *sys.argv[2:]]
    runpy.run_path(sys.argv[0], run_name="__main__")
""")


def test_a_read_only_deploy_directory_is_one_line(example_build, tmp_path, no_compiler):
    """deploy/ cannot be written (a read-only mount; simulated, as the tests may run as root): the csim
    binary cannot be made. Before: a PermissionError traceback. After: one line."""
    env, marker = no_compiler
    out = copy_build(example_build, tmp_path)
    (tmp_path / "read_only.py").write_text(READ_ONLY)
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    result = subprocess.run([sys.executable, str(tmp_path / "read_only.py"), str(out / "deploy"), "--backend", "csim",
                             "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")],
                            capture_output=True, text=True, env=env)
    assert_one_line(result, 2, "error: ", "cannot write the C-simulation binary in", "Permission denied",
                    "copy the build to a directory you can write in")
    assert not marker.exists() and not (tmp_path / "y.npy").exists() and not (out / "deploy" / "csim").exists()


# --- 4. leftovers: interrupted compiles, short outputs ----------------------------------------------------------

SLOW_COMPILER = """#!/bin/sh
[ "$1" = --version ] && { echo stand-in 1.0; exit 0; }
echo partial > "${TMPDIR:-/tmp}/ccFAKE$$.s"
sleep 300 &
echo $! > '{pids}'
wait
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait_for(predicate, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def slow_compiler(tmp_path) -> tuple[dict, Path, Path]:
    """(environment whose CXX runs a grandchild and leaves a temporary file until killed, the file its
    grandchild's pid goes to, the TMPDIR it is given)."""
    pids, tmp = tmp_path / "compiler.pid", tmp_path / "tmp"
    tmp.mkdir()
    cxx = tmp_path / "slow-cxx"
    cxx.write_text(SLOW_COMPILER.replace("{pids}", str(pids)))
    cxx.chmod(0o755)
    return os.environ | {"CXX": str(cxx), "TMPDIR": str(tmp), "PYTHONDONTWRITEBYTECODE": "1"}, pids, tmp


def _terminated_while_compiling(command: list[str], env: dict, pids: Path) -> tuple[subprocess.CompletedProcess, int]:
    """`command` run until the slow compiler's grandchild started, then sent SIGTERM: (its result, the
    grandchild's pid)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert _wait_for(lambda: pids.exists() and pids.read_text().strip())
        grandchild = int(pids.read_text())
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    return subprocess.CompletedProcess(process.args, process.returncode, "", stderr), grandchild


def test_sigterm_during_the_csim_compile_leaves_nothing(example_build, tmp_path, slow_compiler):
    """Before: run.py died at once; the compiler's children ran on, its temporary files and the staging
    binary deploy/csim/.tiny_cnn_csim.<pid> stayed. After: exit 143 in one line, the compiler's process group
    killed and reaped, no staging binary, no temporary file."""
    env, pids, tmp = slow_compiler
    out = copy_build(example_build, tmp_path)
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    result, grandchild = _terminated_while_compiling([sys.executable, str(out / "deploy" / "run.py"), "--backend",
                                                      "csim", "--input", str(tmp_path / "x.npy"), "--output",
                                                      str(tmp_path / "y.npy")], env, pids)
    assert_one_line(result, 128 + signal.SIGTERM, "error: terminated")
    assert _wait_for(lambda: not _alive(grandchild), 5.0), "the compiler's child still runs"
    assert list(tmp.iterdir()) == []
    assert list((out / "deploy" / "csim").iterdir()) == [] and not (tmp_path / "y.npy").exists()


def test_sigterm_to_ming_csim_during_the_compile_leaves_nothing(example_build, tmp_path, slow_compiler):
    """ming's Interrupted (a BaseException) reaches compile_program: the same clean-up as run.py's."""
    env, pids, tmp = slow_compiler
    out = copy_build(example_build, tmp_path)
    cache = tmp_path / "cache"
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    result, grandchild = _terminated_while_compiling([sys.executable, "-m", "ming_py.cli", "csim", str(out), "-q",
                                                      "--input", str(tmp_path / "x.npy"), "--output",
                                                      str(tmp_path / "y.npy")],
                                                     env | {"MING_CACHE_DIR": str(cache)}, pids)
    assert result.returncode == 128 + signal.SIGTERM, result.stderr
    assert "Traceback" not in result.stderr
    assert _wait_for(lambda: not _alive(grandchild), 5.0), "the compiler's child still runs"
    assert list(tmp.iterdir()) == []
    assert [p for p in (cache / "csim").rglob("*") if p.is_file()] == [] and not (tmp_path / "y.npy").exists()


def test_keyboard_interrupt_during_compile_program_kills_the_group(tmp_path, slow_compiler, monkeypatch):
    env, pids, tmp = slow_compiler
    for key in ("CXX", "TMPDIR"):
        monkeypatch.setenv(key, env[key])
    binary = tmp_path / "bin" / "program"

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(KeyboardInterrupt):
            ming_cxx.compile_program([tmp_path / "a.cpp"], [], ("-O2",), binary)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert _wait_for(lambda: not _alive(int(pids.read_text())), 5.0)
    assert list(tmp.iterdir()) == [] and list(binary.parent.iterdir()) == []


def test_the_real_compile_uses_pipe_and_a_private_tmpdir(compiled, tmp_path):
    """The one real compile of the module (the `compiled` fixture) left no staging binary beside the binary."""
    assert sorted(p.name for p in (compiled / "deploy" / "csim").iterdir()) == ["tiny_cnn_csim", "tiny_cnn_csim.sha256"]


FULL_DISK = textwrap.dedent("""
    import resource, runpy, sys
    deploy = sys.argv[1]
    sys.path.insert(0, deploy)
    import ming_npy  # the module run.py writes the outputs with
    real = ming_npy.save_outputs
    def on_a_full_disk(*args, **kwargs):  # the run went through; from here on no file grows past 64 bytes
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
        return real(*args, **kwargs)
    ming_npy.save_outputs = on_a_full_disk
    sys.argv = [deploy + "/run.py", *sys.argv[2:]]
    runpy.run_path(sys.argv[0], run_name="__main__")
""")


@pytest.mark.parametrize("outputs", [["y.npy"], ["y.npz"]])
def test_a_full_disk_leaves_the_old_output_not_a_short_one(compiled, tmp_path, outputs):
    """Once the accelerator has run, a file-size limit of 64 bytes makes every write of the output fail as a
    full disk would (EFBIG for ENOSPC). Before: y.npy was left truncated. After: one line, the old y.npy
    intact, no temporary file."""
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    (tmp_path / "full_disk.py").write_text(FULL_DISK)
    targets = [tmp_path / name for name in outputs]
    for target in targets:
        target.write_bytes(b"the user's old output\n")
    result = subprocess.run([sys.executable, str(tmp_path / "full_disk.py"), str(compiled / "deploy"), "--backend",
                             "csim", "--input", str(tmp_path / "x.npy"), *[a for t in targets for a in ("--output", t)]],
                            capture_output=True, text=True, env=os.environ | {"PYTHONDONTWRITEBYTECODE": "1"})
    assert_one_line(result, 2, "error: ", f"--output {targets[0]}: cannot write (File too large)")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["x.npy", "full_disk.py", *outputs])
    assert all(t.read_bytes() == b"the user's old output\n" for t in targets)


@pytest.mark.unit
def test_a_failed_write_of_the_second_output_leaves_neither(tmp_path, monkeypatch):
    """save_outputs (the driver's, and options' on top of it) renames only once every file is complete."""
    calls = []
    real = np.lib.format.write_array

    def fail_second(file, array, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            file.write(b"\x93NUMPY")
            raise OSError(28, "No space left on device")
        return real(file, array, **kwargs)

    monkeypatch.setattr(np.lib.format, "write_array", fail_second)
    paths = [tmp_path / "a.npy", tmp_path / "b.npy"]
    outputs = {"a": np.zeros(3, np.float32), "b": np.ones(3, np.float32)}
    with pytest.raises(MingError, match=rf"^--output {re.escape(str(paths[1]))}: cannot write \(No space left on "):
        options.save_outputs(paths, outputs)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.unit
def test_outputs_replace_old_files_whole(tmp_path):
    paths = [tmp_path / "a.npy", tmp_path / "b"]
    paths[0].write_text("old")
    ming_npy.save_outputs(paths, {"a": np.arange(3, dtype=np.float32), "b": np.ones(2, np.int8)})
    assert np.array_equal(np.load(paths[0]), np.arange(3, dtype=np.float32))
    assert np.array_equal(np.load(tmp_path / "b.npy"), np.ones(2, np.int8))  # numpy.save's name, as before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy", "b.npy"]
    mode = (tmp_path / "a.npy").stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask


def test_an_output_that_is_a_symlink_is_refused(example_build, tmp_path, no_compiler):
    """Never written through: run.py, `ming deploy` and `ming csim` refuse a symbolic link as --output, before
    running; the link's target keeps its bytes."""
    env, marker = no_compiler
    out = copy_build(example_build, tmp_path)
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    link = tmp_path / "y.npy"
    link.symlink_to(target)
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    io = ("--input", tmp_path / "x.npy", "--output", link)
    assert_one_line(run_py(out, "--backend", "csim", *io, env=env), 2, "error: ", "is a symbolic link")
    assert_one_line(ming("deploy", out, "--backend", "csim", *io, env=env), 2, "ming: error: ", "is a symbolic link")
    assert_one_line(ming("csim", out, *io, env=env | {"MING_CACHE_DIR": str(tmp_path / "cache")}), 2,
                    "ming: error: ", "is a symbolic link")
    with pytest.raises(DeployError, match="is a symbolic link"):
        ming_npy.save_outputs([link], {"y": np.zeros(10, np.float32)})
    assert target.read_text() == "keep me\n" and link.is_symlink() and not marker.exists()


# --- 5. the README matches run.py ----------------------------------------------------------------------------

def test_the_readme_states_what_run_py_accepts(example_build):
    readme = (example_build / "deploy" / "README.md").read_text()
    usage = readme.split("```sh\n", 1)[1].split("```", 1)[0]
    run_py_text = (example_build / "deploy" / "run.py").read_text()
    for option in re.findall(r'add_argument\("(--[a-z]+)"', run_py_text):
        assert option in usage, option
    for backend in ming_driver.BACKENDS:
        assert backend in usage
    for refused in ("float64", "float16", "bool", "complex", "datetime", "object", "empty", "symbolic link"):
        assert refused in readme, refused
    assert "numpy.save" in readme and "x.astype(numpy.float32)" in readme and REBUILD in readme


def test_a_full_disk_during_the_compile_is_named(tmp_path, monkeypatch):
    """Before: "the generated C++ did not compile: ... No space left on device", read as a bug in the C++.
    After: one line saying the disk is full and what to do, no staging binary left."""
    cxx = tmp_path / "full-disk-cxx"
    cxx.write_text("#!/bin/sh\necho 'cc1plus: fatal error: error writing to /tmp/ccX.s: No space left on device' >&2\n"
                   "exit 1\n")
    cxx.chmod(0o755)
    monkeypatch.setenv("CXX", str(cxx))
    binary = tmp_path / "bin" / "program"
    with pytest.raises(ming_driver.DeployError, match=r"^no space left on the device while compiling program"):
        ming_cxx.compile_program([tmp_path / "a.cpp"], [], ("-O2",), binary)
    assert list(binary.parent.iterdir()) == []
