"""Fault injection on ming's cache and on what ming reads back: tampered C-simulation binaries, a shared cache
dir, planted lock symlinks, an unusable cache dir, a damaged report.json under `ming simulate`.

What runs from the cache must be what ming compiled: a cached binary is hashed and compared with the record
written when it was compiled before it runs, and the key names the compiler and the flags. The cache's
directories are the user's own (cache.private_dir), so another user can neither plant a binary nor a lock.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from ming_py import csim
from ming_py.cache import open_lock, private_dir
from ming_py.csim import compile_csim, csim_key, open_csim, record_path
from ming_py.errors import MingError
from ming_py.output import output_lock
from ming_py.progress import Progress
from ming_py.simulate import simulate_dir

from test_faults import REPO, assert_one_line, ming

INPUT = REPO / "examples" / "input.npy"
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


class Notes(Progress):
    """A quiet Progress that keeps its notes."""

    def __init__(self):
        super().__init__(quiet=True)
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)


@pytest.fixture
def fake_compile(monkeypatch):
    """compile_program replaced by one that writes a small script (mode 0775, as a umask of 002 gives), atomically
    like the real one; the list of the binaries it wrote."""
    compiled: list[Path] = []

    def compile_program(sources, includes, flags, binary, seconds=None):
        staging = binary.with_name(f".{binary.name}.{os.getpid()}")
        staging.write_text(genuine_script(flags))
        staging.chmod(0o775)
        staging.replace(binary)
        compiled.append(binary)

    monkeypatch.setattr(csim, "compile_program", compile_program)
    return compiled


def genuine_script(flags) -> str:
    return f"#!/bin/sh\necho genuine {' '.join(flags)}\n"


@pytest.fixture
def hls(tmp_path) -> Path:
    directory = tmp_path / "hls"
    directory.mkdir()
    (directory / "m.cpp").write_text("int f() { return 1; }\n")
    (directory / "m_tb.cpp").write_text("int main() { return 0; }\n")
    (directory / "m.h").write_text("int f();\n")
    return directory


def fake_compiler(path: Path, version: str) -> Path:
    path.write_text(f"#!/bin/sh\necho '{version}'\n")
    path.chmod(0o755)
    return path


# --- A: cached binaries are verified before they run ---------------------------------------------------------------

def test_a_tampered_or_unrecorded_cached_binary_is_compiled_again_not_run(cache, fake_compile, hls, tmp_path):
    progress = Notes()
    binary = compile_csim(hls, "m", progress)
    assert fake_compile == [binary] and binary.is_relative_to(cache / "csim")
    genuine = binary.read_bytes()
    assert record_path(binary).read_text().strip() == hashlib.sha256(genuine).hexdigest()
    assert stat.S_IMODE(binary.stat().st_mode) == 0o700  # whatever the umask gave it
    assert compile_csim(hls, "m", progress) == binary and len(fake_compile) == 1
    assert progress.notes[-1] == f"using the cached C-simulation binary {binary}"

    marker = tmp_path / "tampered_binary_ran"
    for tamper, why in [
        (lambda: binary.write_text(f"#!/bin/sh\ntouch {marker}\n"), "differs from what ming compiled"),
        (lambda: record_path(binary).unlink(), "has no record of what ming compiled"),
        (lambda: record_path(binary).write_text("not a digest\n"), "has no record of what ming compiled"),
        (lambda: (binary.unlink(), binary.symlink_to(tmp_path / "elsewhere")),
         "is not a regular file of yours that only you can write"),
    ]:
        (tmp_path / "elsewhere").write_bytes(genuine)  # a symlink to an identical file is refused all the same
        compiled = len(fake_compile)
        tamper()
        path, fd = open_csim(hls, "m", progress)
        try:
            assert path == binary and len(fake_compile) == compiled + 1, why
            assert progress.notes[-1] == f"the cached C-simulation binary {binary} {why}; compiling it again"
            assert not binary.is_symlink() and binary.read_bytes() == genuine
            assert record_path(binary).read_text().strip() == hashlib.sha256(genuine).hexdigest()
            command, how = csim.csim_command(path, fd)
            run = subprocess.run(command, capture_output=True, text=True, **how)
            assert run.stdout.startswith("genuine") and not marker.exists()
        finally:
            os.close(fd)
    assert not list(binary.parent.glob(".*"))  # no staging file left beside it


def test_the_key_names_the_compiler_and_the_flags(cache, fake_compile, hls, tmp_path, monkeypatch):
    compilers = tmp_path / "bin"
    compilers.mkdir()
    monkeypatch.setenv("CXX", str(fake_compiler(compilers / "c++-a", "c++ A 1.0")))
    a = compile_csim(hls, "m", Notes())
    assert compile_csim(hls, "m", Notes()) == a and len(fake_compile) == 1
    monkeypatch.setenv("CXX", str(fake_compiler(compilers / "c++-b", "c++ B 1.0")))
    b = compile_csim(hls, "m", Notes())
    assert b != a and len(fake_compile) == 2
    # the same $CXX, upgraded: a new process sees a new --version (it is cached per process)
    fake_compiler(compilers / "c++-b", "c++ B 2.0")
    csim._compiler_identity.cache_clear()
    upgraded = compile_csim(hls, "m", Notes())
    assert upgraded not in (a, b) and len(fake_compile) == 3
    # $CXX found on PATH by name: the key holds the path it resolves to
    monkeypatch.setenv("PATH", f"{compilers}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CXX", "c++-a")
    assert csim_key(hls, "m") == a.parent.name
    # the flags: each mode its own binary
    modes = {compile_csim(hls, "m", Notes(), concurrent=c, check_ports=p) for c in (False, True) for p in (False, True)}
    assert len(modes) == 4
    for binary in modes:
        assert binary.read_text() == genuine_script(csim.csim_flags(
            "-DMING_CSIM_CONCURRENT" in binary.read_text(), "-DMING_CHECK_PORTS" in binary.read_text()))


@pytest.mark.unit
def test_a_missing_compiler_is_one_line(cache, fake_compile, hls, monkeypatch):
    monkeypatch.setenv("CXX", "no-such-c++-compiler")
    with pytest.raises(MingError) as error:
        compile_csim(hls, "m", Notes())
    assert "no C++ compiler found" in str(error.value) and "\n" not in str(error.value)
    assert fake_compile == []


@needs_gxx
def test_ming_csim_recompiles_a_tampered_binary_instead_of_running_it(example_build, tmp_path):
    first = ming("csim", example_build, "--input", INPUT, "--output", tmp_path / "y1.npy")
    assert first.returncode == 0, first.stderr
    binary = csim.cache_dir() / csim_key(example_build / "hls", "tiny_cnn", concurrent=True) / "tiny_cnn_csim"
    assert binary.is_file()
    marker = tmp_path / "tampered_binary_ran"
    y = np.load(tmp_path / "y1.npy")
    # a binary that writes wrong numbers (and leaves a marker)
    binary.write_text(f"#!/bin/sh\ntouch {marker}\nexec {sys.executable} -c 'import sys; "
                      f"open(sys.argv[2], \"wb\").write(bytes({y.size}))' \"$@\"\n")
    second = ming("csim", example_build, "--input", INPUT, "--output", tmp_path / "y2.npy")
    assert second.returncode == 0, second.stderr
    assert f"the cached C-simulation binary {binary} differs from what ming compiled; compiling it again" \
        in second.stderr
    assert not marker.exists()
    assert np.array_equal(np.load(tmp_path / "y2.npy"), y)


@needs_gxx
def test_what_runs_is_the_file_that_was_verified(example_build, tmp_path):
    """A binary swapped after the check (there is no window: the verified descriptor is what runs)."""
    path, fd = open_csim(example_build / "hls", "tiny_cnn", Notes(), concurrent=False)
    try:
        genuine = path.read_bytes()
        marker = tmp_path / "swapped_binary_ran"
        swapped = path.with_name(".swap")
        swapped.write_text(f"#!/bin/sh\ntouch {marker}\n")
        swapped.chmod(0o700)
        swapped.replace(path)
        command, how = csim.csim_command(path, fd)
        hls = example_build / "hls"
        run = subprocess.run([*command, str(hls / "input.bin"), str(tmp_path / "y.bin"), str(hls / "expected.bin")],
                             capture_output=True, text=True, **how)
        assert run.returncode == 0 and run.stdout.startswith("PASS"), run.stderr
        assert not marker.exists()
    finally:
        os.close(fd)
    path.write_bytes(genuine)  # put it back for the other tests of this session


# --- B: a shared cache dir; planted lock symlinks ------------------------------------------------------------------

def _nobody():
    if os.geteuid() != 0:
        pytest.skip("needs root: it plants files as the user nobody")
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("needs the user nobody")


def _as(user, command: list[str], input: bytes | None = None) -> None:
    subprocess.run(command, input=input, check=True, user=user.pw_uid, group=user.pw_gid, extra_groups=[],
                   cwd="/", capture_output=True)


@pytest.mark.parametrize("shared", ["mode_1777", "owned_by_nobody"])
def test_a_cache_dir_another_user_can_write_is_refused_and_nothing_planted_runs(example_build, tmp_path, shared):
    nobody = _nobody()
    root = Path(tempfile.mkdtemp(prefix="ming-shared-cache-", dir="/tmp"))
    try:
        if shared == "mode_1777":
            root.chmod(0o1777)
        else:
            root.chmod(0o755)
            os.chown(root, nobody.pw_uid, nobody.pw_gid)
        key = csim_key(example_build / "hls", "tiny_cnn", concurrent=True)  # what `ming csim` uses by default
        binary = root / "csim" / key / "tiny_cnn_csim"
        marker = tmp_path / "planted_binary_ran"
        planted = f"#!/bin/sh\ntouch {marker}\n".encode()
        _as(nobody, ["mkdir", "-p", str(binary.parent)])
        _as(nobody, ["sh", "-c", f"cat > {binary} && chmod 755 {binary}"], planted)
        # even a record that matches: the cache's privacy is what keeps it out, not the hash
        _as(nobody, ["sh", "-c", f"cat > {record_path(binary)}"], hashlib.sha256(planted).hexdigest().encode())
        assert binary.stat().st_uid == nobody.pw_uid
        result = ming("csim", example_build, "--input", INPUT, "--output", tmp_path / "y.npy",
                      env=os.environ | {"MING_CACHE_DIR": str(root)})
        assert result.returncode == 2
        why = "can be written by other users" if shared == "mode_1777" else "belongs to another user"
        assert_one_line(result.stderr, f"ming's cache directory {root}", why, "MING_CACHE_DIR")
        assert not marker.exists() and not (tmp_path / "y.npy").exists()
    finally:
        shutil.rmtree(root)


def test_a_subdirectory_of_the_cache_planted_by_another_user_is_refused(example_build, tmp_path):
    nobody = _nobody()
    root = Path(tempfile.mkdtemp(prefix="ming-cache-", dir="/tmp"))  # root's own, 0700: only root could plant
    try:
        (root / "csim").mkdir()
        os.chown(root / "csim", nobody.pw_uid, nobody.pw_gid)
        result = ming("csim", example_build, "--input", INPUT, "--output", tmp_path / "y.npy",
                      env=os.environ | {"MING_CACHE_DIR": str(root)})
        assert result.returncode == 2
        assert_one_line(result.stderr, f"{root / 'csim'}", "belongs to another user")
    finally:
        shutil.rmtree(root)


def test_a_planted_lock_symlink_is_not_followed(cache, fake_compile, hls, tmp_path):
    victim = tmp_path / "elsewhere" / "victim"
    victim.parent.mkdir()
    locks = private_dir("locks")
    # the C-simulation's lock
    (locks / f"csim-{csim_key(hls, 'm')}.lock").symlink_to(victim)
    with pytest.raises(MingError) as error:
        compile_csim(hls, "m", Notes())
    assert "cannot open the lock" in str(error.value) and "\n" not in str(error.value)
    assert not victim.exists() and fake_compile == []
    # a build's lock on its OUT
    out = tmp_path / "out"
    (locks / (hashlib.sha256(str(out).encode()).hexdigest()[:32] + ".lock")).symlink_to(victim)
    with pytest.raises(MingError) as error:
        with output_lock(out):
            pass
    assert "cannot open the lock" in str(error.value) and not victim.exists()
    # any name, and a symlink to a file that exists is not opened either
    victim.write_text("keep\n")
    (locks / "any.lock").symlink_to(victim)
    with pytest.raises(MingError):
        open_lock(locks, "any.lock")
    assert victim.read_text() == "keep\n"


# --- C: an unusable cache dir --------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["a_file", "below_a_file", "csim_is_a_file", "a_symlink", "group_writable",
                                  "unwritable"])
def test_an_unusable_cache_dir_is_one_line(example_build, tmp_path, case):
    if case == "unwritable" and os.geteuid() == 0:
        pytest.skip("root writes in a directory of mode 0500 all the same")
    root = tmp_path / "cache"
    expected = {"a_file": "is not a directory", "below_a_file": "cannot create", "csim_is_a_file": "is not a directory",
                "a_symlink": "is a symbolic link", "group_writable": "can be written by other users",
                "unwritable": "cannot create"}[case]
    if case == "a_file":
        root.write_text("not a directory\n")
    elif case == "below_a_file":
        (tmp_path / "file").write_text("not a directory\n")
        root = tmp_path / "file" / "cache"
    elif case == "csim_is_a_file":
        root.mkdir(mode=0o700)
        (root / "csim").write_text("not a directory\n")
    elif case == "a_symlink":
        (tmp_path / "real").mkdir(mode=0o700)
        root.symlink_to(tmp_path / "real")
    elif case == "group_writable":
        root.mkdir()
        root.chmod(0o770)
    else:
        root.mkdir()
        root.chmod(0o500)
    result = ming("csim", example_build, "--input", INPUT, "--output", tmp_path / "y.npy",
                  env=os.environ | {"MING_CACHE_DIR": str(root)})
    assert result.returncode == 2
    assert_one_line(result.stderr, "ming: error:", expected, "MING_CACHE_DIR")
    assert not (tmp_path / "y.npy").exists()


# --- D: a damaged report.json --------------------------------------------------------------------------------------

def _report(example_build: Path) -> dict:
    return json.loads((example_build / "report.json").read_text())


def _channel_of(report: dict, i: int) -> dict:
    return report["channels"][i]


DAMAGED = {  # name: (change of the report as built, or its whole text; fragments of the one line)
    "a_list": ("[]", ["not a ming report", "found a list"]),
    "empty_object": ("{}", ["nodes: missing"]),
    "no_nodes": (lambda r: r.pop("nodes"), ["nodes: missing"]),
    "nodes_empty": (lambda r: r.update(nodes=[]), ["nodes: no processes"]),
    "nodes_an_object": (lambda r: r.update(nodes={}), ["nodes: a list of processes expected, found an object"]),
    "node_a_number": (lambda r: r["nodes"].__setitem__(0, 7), ["nodes[0]: an object expected, found a number"]),
    "node_without_kind": (lambda r: r["nodes"][1].pop("kind"), ["nodes[1]: missing field 'kind'"]),
    "unknown_kind": (lambda r: r["nodes"][0].update(kind="fft"), ["nodes[0] (conv1).kind: unknown kind 'fft'"]),
    "input_not_a_channel": (lambda r: r["nodes"][1].update(inputs=["nowhere"]),
                            ["nodes[1] (pool1).inputs[0]: no channel named 'nowhere'"]),
    "window_missing": (lambda r: r["nodes"][0].pop("window"), ["nodes[0] (conv1)", "needs its \"window\""]),
    "window_field_a_string": (lambda r: r["nodes"][0]["window"].update(kernel="3x3"),
                              ["nodes[0] (conv1).window.kernel: a list of 2 numbers expected"]),
    "window_unknown_field": (lambda r: r["nodes"][0]["window"].update(size=3),
                             ["nodes[0] (conv1).window.size: not a field of a window"]),
    "unroll_a_list": (lambda r: r["nodes"][0]["schedule"].update(unroll=[8]),
                      ["nodes[0] (conv1).schedule.unroll: an object expected, found a list"]),
    "lanes_disagree": (lambda r: r["nodes"][0]["schedule"]["unroll"].update(oc=4), ["nodes[0] (conv1): conv: lanes"]),
    "channel_without_shape": (lambda r: _channel_of(r, 0).pop("shape"), ["channels[0]: missing field 'shape'"]),
    "depth_a_string": (lambda r: _channel_of(r, 0).update(fifo_depth="2"),
                       ["channels[0] (conv1_to_pool1).fifo_depth: a number expected, found a string"]),
    "depth_zero": (lambda r: _channel_of(r, 0).update(fifo_depth=0), ["fifo_depth: 0 is less than 1"]),
    "shape_of_two": (lambda r: _channel_of(r, 0).update(shape=[8, 16]), ["channels[0] (conv1_to_pool1).shape"]),
    "lanes_do_not_divide": (lambda r: _channel_of(r, 0).update(lanes=3), ["lanes: 3 does not divide its 8 channels"]),
    "output_not_a_channel": (lambda r: r["outputs"][0].update(channel="nowhere"),
                             ["outputs[0].channel: no channel named 'nowhere'"]),
    "tokens_disagree": (lambda r: _channel_of(r, 0).update(shape=[8, 8, 8]), ["tokens"]),
    "not_json": ("{\"nodes\": [", ["not valid JSON", "line 1"]),
    "not_utf8": (b"\xff\xfe{}", ["not UTF-8 text"]),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_report_is_one_line_naming_the_file_and_the_field(example_build, tmp_path, case):
    change, fragments = DAMAGED[case]
    out = tmp_path / "out"
    out.mkdir()
    report = out / "report.json"
    if isinstance(change, bytes):
        report.write_bytes(change)
    elif isinstance(change, str):
        report.write_text(change)
    else:
        content = _report(example_build)
        change(content)
        report.write_text(json.dumps(content))
    with pytest.raises(MingError) as error:
        simulate_dir(out)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{report}: "), message
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.parametrize("text", ["[]", "{}", "{\"nodes\": [{}], \"channels\": []}", "null", "{\"nodes\": ["])
def test_ming_simulate_on_a_damaged_report_is_one_line(tmp_path, text):
    (tmp_path / "report.json").write_text(text)
    result = ming("simulate", tmp_path)
    assert result.returncode == 2
    assert_one_line(result.stderr, "ming: error:", str(tmp_path / "report.json"), "ming build")


def test_the_built_report_still_simulates(example_build):
    assert simulate_dir(example_build).completed
