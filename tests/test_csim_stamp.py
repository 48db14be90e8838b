"""The deployed driver runs only a C-simulation binary it verified: the one it compiled, as its stamp
`<binary>.sha256` records it (the binary's sha256 and that of its sources, headers, flags and $CXX). A binary
replaced by something else, newer than every source or not, is never run; it is compiled anew."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ming_py.contract import ming_cxx
from ming_py.runtime import ming_backends
from ming_py.runtime import ming_driver

BINARY = Path("deploy") / "csim" / "tiny_cnn_csim"


@pytest.fixture(scope="module")
def compiler(tmp_path_factory) -> Path:
    """$CXX for every run of the module: g++, or, where $MING_TEST_NO_COMPILE names a marker, a compiler that
    leaves the marker and fails (the same $CXX either way: the stamp records it)."""
    cxx = tmp_path_factory.mktemp("compiler") / "cxx"
    cxx.write_text('#!/bin/sh\nif [ -n "$MING_TEST_NO_COMPILE" ]; then touch "$MING_TEST_NO_COMPILE"; '
                   'echo "error: the stand-in compiler" >&2; exit 1; fi\nexec g++ "$@"\n')
    cxx.chmod(0o755)
    return cxx


@pytest.fixture(scope="module")
def compiled(example_build, compiler, tmp_path_factory) -> Path:
    """A copy of OUT whose C-simulation was compiled and run once by run.py (the module's one real compile)."""
    out = tmp_path_factory.mktemp("csim_stamp") / "out"
    shutil.copytree(example_build, out)
    np.save(out.parent / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    result = run_py(out, out.parent / "x.npy", out.parent / "y.npy", env=os.environ | {"CXX": str(compiler)})
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture
def out(compiled, tmp_path, monkeypatch, compiler) -> Path:
    out = tmp_path / "out"
    shutil.copytree(compiled, out)
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    monkeypatch.setenv("CXX", str(compiler))
    return out


@pytest.fixture
def no_compiler(compiler, tmp_path) -> tuple[dict, Path]:
    """(environment whose $CXX records being called and fails, its marker)."""
    marker = tmp_path / "compiler-was-called"
    return os.environ | {"CXX": str(compiler), "MING_TEST_NO_COMPILE": str(marker)}, marker


def run_py(out: Path, x: Path, y: Path, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(out / "deploy" / "run.py"), "--backend", "csim", "--input", str(x),
                           "--output", str(y)], capture_output=True, text=True, env=env)


def replace_by_script(binary: Path, marker: Path) -> None:
    """The binary replaced by a script that leaves `marker` when run, newer than every source."""
    binary.unlink()
    binary.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    binary.chmod(0o755)


def test_the_stamp_records_the_binary_it_compiled(out):
    binary = out / BINARY
    stamp = ming_cxx.stamp_path(binary)
    assert stamp.name == "tiny_cnn_csim.sha256"
    fd = ming_cxx.open_stamped(binary, ming_cxx.csim_inputs(out / "deploy", ming_driver.read_metadata(
        out / "deploy")["csim"]))
    assert fd is not None
    os.close(fd)


def test_a_stamped_binary_is_run_without_compiling(out, tmp_path, no_compiler):
    env, marker = no_compiler
    before = (out / BINARY).stat()
    result = run_py(out, tmp_path / "x.npy", tmp_path / "y.npy", env=env)
    assert result.returncode == 0, result.stderr
    assert not marker.exists() and (tmp_path / "y.npy").exists()
    after = (out / BINARY).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_binary_replaced_by_a_script_is_not_run(out, tmp_path, no_compiler):
    """Before: the script, newer than every source, was run as the C-simulation. After: it differs from its
    stamp, so the driver compiles anew (here with a compiler that fails) and never runs it."""
    env, compiler_called = no_compiler
    ran = tmp_path / "script-was-run"
    replace_by_script(out / BINARY, ran)
    result = run_py(out, tmp_path / "x.npy", tmp_path / "y.npy", env=env)
    assert result.returncode == 2 and "the generated C++ did not compile" in result.stderr, result.stderr
    assert compiler_called.exists() and not ran.exists()


def test_a_binary_without_its_stamp_is_not_run(out, tmp_path, no_compiler):
    env, compiler_called = no_compiler
    ran = tmp_path / "script-was-run"
    replace_by_script(out / BINARY, ran)
    ming_cxx.stamp_path(out / BINARY).unlink()
    run_py(out, tmp_path / "x.npy", tmp_path / "y.npy", env=env)
    assert compiler_called.exists() and not ran.exists()


def test_a_changed_header_compiles_anew_whatever_the_times(out, tmp_path, no_compiler):
    env, compiler_called = no_compiler
    header = next((out / "hls").glob("*.h"))
    stat = (out / BINARY).stat()
    header.write_text(header.read_text() + "\n// changed\n")
    os.utime(header, (stat.st_atime - 100, stat.st_mtime - 100))  # older than the binary
    result = run_py(out, tmp_path / "x.npy", tmp_path / "y.npy", env=env)
    assert result.returncode == 2 and compiler_called.exists(), result.stderr


def test_a_binary_replaced_after_it_was_verified_is_not_run(out, tmp_path):
    """Every run checks the stamp again and executes the very file it hashed."""
    accelerator = ming_driver.Accelerator(out / "deploy", "csim")
    ran = tmp_path / "script-was-run"
    replace_by_script(out / BINARY, ran)
    with pytest.raises(ming_driver.DeployError, match="changed since it was compiled"):
        accelerator.run(np.zeros((1, 3, 16, 16), np.float32))
    assert not ran.exists()


def test_the_bytes_verified_are_the_bytes_run_even_if_the_file_changes_in_place(out, tmp_path, monkeypatch):
    """The binary rewritten in place (same inode) between its check and its exec: what runs is the sealed copy of
    the bytes that matched the stamp, never the new content."""
    accelerator = ming_driver.Accelerator(out / "deploy", "csim")
    ran = tmp_path / "script-was-run"
    run = subprocess.run

    def rewrite_then_run(*args, **kwargs):
        with open(out / BINARY, "r+b") as binary:
            binary.write(f"#!/bin/sh\ntouch '{ran}'\n".encode())
            binary.truncate()
        return run(*args, **kwargs)

    monkeypatch.setattr(ming_backends.subprocess, "run", rewrite_then_run)
    outputs = accelerator.run(np.zeros((1, 3, 16, 16), np.float32))
    assert not ran.exists() and outputs


def test_the_descriptor_run_is_a_sealed_copy(out):
    binary = out / BINARY
    fd = ming_cxx.open_stamped(binary, ming_cxx.csim_inputs(out / "deploy", ming_driver.read_metadata(
        out / "deploy")["csim"]))
    try:
        assert os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:")
        assert os.pread(fd, 1 << 30, 0) == binary.read_bytes()
        writable = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY)
        try:
            with pytest.raises(PermissionError):
                os.write(writable, b"changed")
        finally:
            os.close(writable)
    finally:
        os.close(fd)


def test_a_stamp_that_cannot_be_removed_is_one_line(out, tmp_path, no_compiler):
    env, _ = no_compiler
    stamp = ming_cxx.stamp_path(out / BINARY)
    stamp.unlink()
    stamp.mkdir()
    result = run_py(out, tmp_path / "x.npy", tmp_path / "y.npy", env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip() == (f"error: cannot remove the stale stamp {stamp} (Is a directory): remove it "
                                     "yourself, or copy the build to a directory you can write in")


def test_the_inputs_are_hashed_once_per_accelerator(out, monkeypatch):
    calls = []
    hash_inputs = ming_cxx.csim_inputs
    monkeypatch.setattr(ming_cxx, "csim_inputs", lambda *args: calls.append(args) or hash_inputs(*args))
    ming_driver.Accelerator(out / "deploy", "csim")
    assert len(calls) == 1
