"""The caches that spare a rebuild IREE's lowering and the C-simulation's compile the ming headers: what they
give back is what was put in, a damaged entry is made again and never used, and they remove only their own files.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ming_py import csim
from ming_py.frontends import lowered_cache
from ming_py.progress import Progress

from test_faults import REPO

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


@pytest.fixture
def tool(tmp_path) -> str:
    path = tmp_path / "iree-compile"
    path.write_text("#!/bin/sh\n")
    return str(path)


@pytest.mark.unit
def test_the_key_names_the_tool_the_flags_and_the_source(tool, tmp_path):
    key = lowered_cache.key(tool, ("--a",), b"module")
    assert key == lowered_cache.key(tool, ("--a",), b"module")
    assert key != lowered_cache.key(tool, ("--b",), b"module")
    assert key != lowered_cache.key(tool, ("--a",), b"module ")
    other = tmp_path / "other-iree-compile"
    other.write_text("#!/bin/sh\n")
    assert key != lowered_cache.key(str(other), ("--a",), b"module")
    Path(tool).write_text("#!/bin/sh\n# rebuilt\n")  # another size: another binary
    assert key != lowered_cache.key(tool, ("--a",), b"module")


@pytest.mark.unit
def test_a_stored_text_comes_back_and_a_damaged_one_does_not(cache, tool):
    entry = lowered_cache.key(tool, (), b"module")
    assert lowered_cache.load(entry) is None
    lowered_cache.store(entry, "func.func @main() ü\n")
    assert lowered_cache.load(entry) == "func.func @main() ü\n"
    path = cache / "lowered" / f"{entry}.mlir"
    path.write_bytes(path.read_bytes().replace(b"main", b"evil"))
    assert lowered_cache.load(entry) is None
    path.write_bytes(path.read_bytes()[:-3])  # truncated
    assert lowered_cache.load(entry) is None
    lowered_cache.store(entry, "func.func @main()\n")
    assert lowered_cache.load(entry) == "func.func @main()\n"


@pytest.mark.unit
def test_an_entry_that_is_a_link_is_not_read(cache, tool, tmp_path):
    entry = lowered_cache.key(tool, (), b"module")
    lowered_cache.store(entry, "real\n")
    planted = tmp_path / "planted.mlir"
    text = b"planted\n"
    planted.write_bytes(hashlib.sha256(text).hexdigest().encode() + b"\n" + text)
    path = cache / "lowered" / f"{entry}.mlir"
    path.unlink()
    path.symlink_to(planted)
    assert lowered_cache.load(entry) is None


@pytest.mark.unit
def test_pruning_removes_the_oldest_entries_and_nothing_else(cache, tool, monkeypatch):
    monkeypatch.setattr(lowered_cache, "MAX_BYTES", 250)
    folder = cache / "lowered"
    folder.mkdir(parents=True, mode=0o700)
    foreign = folder / "notes.txt"
    foreign.write_text("x" * 1000)
    entries = [lowered_cache.key(tool, (str(i),), b"m") for i in range(4)]
    for i, entry in enumerate(entries):
        lowered_cache.store(entry, f"{i}" * 60)
        os.utime(folder / f"{entry}.mlir", (1_000_000 + i, 1_000_000 + i))  # made one after the other
    kept = [entry for entry in entries if lowered_cache.load(entry) is not None]
    assert kept == entries[-2:]  # 125 bytes each, with its sha256 line
    assert foreign.read_text() == "x" * 1000


@pytest.mark.unit
def test_an_unusable_cache_directory_only_misses(tmp_path, monkeypatch, tool):
    (tmp_path / "file").write_text("in the way\n")
    monkeypatch.setenv("MING_CACHE_DIR", str(tmp_path / "file" / "cache"))
    entry = lowered_cache.key(tool, (), b"module")
    lowered_cache.store(entry, "text\n")
    assert lowered_cache.load(entry) is None


def test_a_second_lift_reads_the_lowered_model_from_the_cache(cache, monkeypatch):
    from ming_py.frontends import isolated
    from ming_py.pipeline import lift
    from ming_py.reference import run

    model = REPO / "examples" / "tiny_cnn.onnx"
    x = np.load(REPO / "examples" / "input.npy")
    first = lift(model)
    (cached,) = (cache / "lowered").iterdir()

    def refuse(command, *args, **kwargs):
        raise AssertionError(f"ran {command[0]}")

    monkeypatch.setattr(isolated, "run", refuse)
    second = lift(model)
    assert [o.name for o in second.outputs] == [o.name for o in first.outputs]
    for name, y in run(first, x).items():
        assert np.array_equal(run(second, x)[name], y)
    cached.write_bytes(cached.read_bytes().replace(b"linalg", b"lunalg", 1))
    with pytest.raises(AssertionError, match="iree-compile"):
        lift(model)  # a damaged entry is lowered again


@needs_gxx
def test_the_csim_loads_precompiled_headers_and_a_damaged_one_is_made_again(cache, example_build, tmp_path):
    hls = example_build / "hls"
    flags = csim.csim_flags()
    include = csim.precompiled_headers(hls, flags)
    assert include[0] == "-include"
    header = Path(include[1])
    compiled = header.with_name(header.name + ".gch")
    assert csim.record_path(compiled).read_text().strip() == hashlib.sha256(compiled.read_bytes()).hexdigest()
    made = compiled.stat().st_mtime_ns
    assert csim.precompiled_headers(hls, flags) == include and compiled.stat().st_mtime_ns == made  # kept
    compiled.write_bytes(compiled.read_bytes()[:1000])
    assert csim.precompiled_headers(hls, flags) == include
    assert csim.record_path(compiled).read_text().strip() == hashlib.sha256(compiled.read_bytes()).hexdigest()
    assert compiled.stat().st_size > 1000
    # g++ uses it (-Winvalid-pch would say otherwise), and the sources compile without it too
    source = tmp_path / "uses.cpp"
    source.write_text('#include "ming_numerics.h"\nint main() { return 0; }\n')
    result = subprocess.run(["g++", *flags, "-Winvalid-pch", "-Werror", *include, "-I", str(hls), "-c", str(source),
                             "-o", str(tmp_path / "uses.o")], capture_output=True, text=True)
    assert result.returncode == 0 and "pch" not in result.stderr, result.stderr
    assert csim.precompiled_headers(hls, csim.csim_flags(check_ports=True)) != include  # per flags


@needs_gxx
def test_an_interrupted_or_failed_precompile_leaves_nothing_and_the_compile_goes_on(cache, example_build,
                                                                                  monkeypatch):
    def failing(sources, includes, flags, binary, seconds=None):
        raise csim.DeployError("g++ failed")

    monkeypatch.setattr(csim, "compile_program", failing)
    assert csim.precompiled_headers(example_build / "hls", csim.csim_flags()) == ()
    assert [p for p in (cache / "pch").rglob("*") if p.is_file()] == []

    def interrupted(sources, includes, flags, binary, seconds=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(csim, "compile_program", interrupted)
    with pytest.raises(KeyboardInterrupt):
        csim.precompiled_headers(example_build / "hls", csim.csim_flags())
    assert [p for p in (cache / "pch").rglob("*") if p.is_file()] == []
    monkeypatch.undo()
    monkeypatch.setenv("MING_CACHE_DIR", str(cache))
    binary = csim.compile_csim(example_build / "hls", "tiny_cnn", Progress(quiet=True))
    assert binary.is_file()
