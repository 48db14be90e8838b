"""Ownership of OUT, checked when ming acts: ming removes or replaces only the files it wrote.

An adversarial user's findings, one section each: `ming sweep -o` writing over the user's files, files put
in OUT while a build runs, inputs inside OUT, a rebuild that fails half-way, files opened through symbolic
links, an early Ctrl-C, and messages for odd paths. Each case asserts the exit code or the exception, the
one line, and what is left on disk, byte for byte.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ming_py import output
from ming_py.errors import MingError
from ming_py.output import MARKER, check_output, output_lock, staging_paths, write_tree
from test_faults import EXAMPLE, NEW, OLD, assert_one_line, ming

SWEEP_FILES = {MARKER, "sweep.csv", "sweep.json", "sweep.png"}


def tree(root: Path) -> dict[str, bytes]:
    """Every file under root (relative path -> content), the marker included; a symbolic link as its target."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            found[str(path.relative_to(root))] = b"-> " + os.fsencode(os.readlink(path))
        elif path.is_file():
            found[str(path.relative_to(root))] = path.read_bytes()
    return found


def written(files: dict[str, str], tmp_path: Path, name: str = "reference") -> dict[str, bytes]:
    """The tree write_tree(files) gives (the marker with its list included)."""
    write_tree(files, tmp_path / name)
    return tree(tmp_path / name)


def leftovers(out: Path) -> list[Path]:
    return [p for p in staging_paths(out) if os.path.lexists(p)]


def unprivileged() -> list[str]:
    """A command prefix that runs as an ordinary user would (root writes anywhere: drop that capability)."""
    return ["setpriv", "--bounding-set=-dac_override", "--inh-caps=-dac_override"] if os.geteuid() == 0 else []


WRITE = """
import sys
from pathlib import Path
from ming_py.errors import MingError
from ming_py.output import write_tree
try:
    write_tree({"report.json": "new report\\n", "hls/top.cpp": "// new\\n", "host.json": "{}\\n"}, Path(sys.argv[1]))
except MingError as exc:
    print(exc, file=sys.stderr)
    sys.exit(2)
"""


def write_unprivileged(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*unprivileged(), sys.executable, "-c", WRITE, str(out)], capture_output=True, text=True)


# --- 1. ming sweep -o: its own directory, written like a build's OUT --------------------------------------------

def _users_sweep_files(directory: Path) -> dict[str, bytes]:
    """What the finding's user had where sweep wrote: their sweep.csv, a sweep.json symlink, a sweep.png dir."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sweep.csv").write_text("my,table\n")
    (directory.parent / "precious.json").write_text("precious\n")
    (directory / "sweep.json").symlink_to(directory.parent / "precious.json")
    (directory / "sweep.png").mkdir()
    (directory / "sweep.png" / "keep.txt").write_text("keep\n")
    return tree(directory)


@pytest.fixture(scope="module")
def default_sweep(tmp_path_factory):
    """One `ming sweep` without -o in a directory holding the user's sweep.csv/json/png."""
    cwd = tmp_path_factory.mktemp("sweep_cwd")
    mine = _users_sweep_files(cwd)
    result = ming("sweep", EXAMPLE, "--dsp", "10%,100%", "-q", cwd=cwd)
    return cwd, mine, result


def test_sweep_without_o_writes_a_sweep_directory_and_keeps_the_users_files(default_sweep):
    cwd, mine, result = default_sweep
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert {k: v for k, v in tree(cwd).items() if not k.startswith("sweep/")} == mine
    assert (cwd.parent / "precious.json").read_text() == "precious\n"
    assert {p.name for p in (cwd / "sweep").iterdir()} == SWEEP_FILES
    assert (cwd / "sweep" / MARKER).read_bytes().endswith(b"files:\nsweep.csv\nsweep.json\nsweep.png\n")
    assert (cwd / "sweep" / "sweep.csv").read_text().startswith("dsp_budget,")
    assert (cwd / "sweep" / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert leftovers(cwd / "sweep") == []


def test_sweep_help_names_the_default_directory():
    result = ming("sweep", "--help")
    assert result.returncode == 0 and result.stderr == ""
    assert "directory for sweep.csv/json/png (default: sweep;" in " ".join(result.stdout.split())


@pytest.mark.parametrize("where", ["results", "."])
def test_sweep_refuses_a_directory_of_the_users_before_the_import(tmp_path, where):
    mine = _users_sweep_files(tmp_path / "results")
    if where == ".":
        result = ming("sweep", EXAMPLE, "--dsp", "10%", "-q", "-o", ".", cwd=tmp_path / "results")
        assert_one_line(result.stderr, "ming: error: -o .: is the current directory or one of its parents")
    else:
        result = ming("sweep", EXAMPLE, "--dsp", "10%", "-q", "-o", "results", cwd=tmp_path)
        assert_one_line(result.stderr, f"ming: error: -o results: is not empty and was not written by ming "
                                       f"(no {MARKER}); pass a new or empty directory")
    assert result.returncode == 2
    assert tree(tmp_path / "results") == mine
    assert (tmp_path / "precious.json").read_text() == "precious\n"


def test_sweep_on_a_full_disk_is_one_line_and_leaves_no_empty_file(tmp_path, monkeypatch):
    from ming_py.ilp import sweep
    from ming_py.progress import Progress

    files = {"sweep.csv": "dsp_budget\n", "sweep.json": "{}\n", "sweep.png": b"\x89PNG"}
    monkeypatch.setattr(sweep, "_sweep", lambda *args: ([], files))
    real = output._write_file

    def full_disk(dir_fd, name, data, path):
        if name == "sweep.csv":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(dir_fd, name, data, path)

    monkeypatch.setattr(output, "_write_file", full_disk)
    out = tmp_path / "sweep"
    with pytest.raises(MingError) as error:
        sweep.run_sweep(EXAMPLE, None, {}, out, Progress(quiet=True))
    new, _ = staging_paths(out)
    assert str(error.value) == f"-o {out}: cannot write {new / 'sweep.csv'} (No space left on device)"
    assert not os.path.lexists(out) and leftovers(out) == []


def test_sweep_into_a_former_sweep_replaces_only_its_files(tmp_path, monkeypatch):
    from ming_py.ilp import sweep
    from ming_py.progress import Progress

    out = tmp_path / "sweep"
    monkeypatch.setattr(sweep, "_sweep", lambda *args: ([], {"sweep.csv": "1\n", "sweep.json": "{}\n",
                                                               "sweep.png": b"png1"}))
    sweep.run_sweep(EXAMPLE, None, {}, out, Progress(quiet=True))
    monkeypatch.setattr(sweep, "_sweep", lambda *args: ([], {"sweep.csv": "2\n", "sweep.json": "{}\n",
                                                               "sweep.png": b"png2"}))
    sweep.run_sweep(EXAMPLE, None, {}, out, Progress(quiet=True))
    assert {k: v for k, v in tree(out).items() if k != MARKER} == \
        {"sweep.csv": b"2\n", "sweep.json": b"{}\n", "sweep.png": b"png2"}


# --- 2. what appears in OUT while a build runs survives, named ----------------------------------------------------

def _during_the_build(monkeypatch, action) -> None:
    """Run `action` once the staging tree is written, before the swap (while the import and the ILP would run)."""
    real = output._write_staging

    def staging(*args, **kwargs):
        real(*args, **kwargs)
        action()

    monkeypatch.setattr(output, "_write_staging", staging)


@pytest.mark.unit
def test_a_file_put_in_out_during_the_build_survives_and_is_named(tmp_path, monkeypatch):
    out = tmp_path / "out"
    write_tree(OLD, out)
    old = tree(out)
    _during_the_build(monkeypatch, lambda: (out / "hls" / "notes.txt").write_text("mine\n"))
    with pytest.raises(MingError) as error:
        write_tree(NEW, out)
    assert str(error.value) == (f"-o {out}: {out / 'hls' / 'notes.txt'} was not written by ming; ming removes only "
                                f"what it wrote: move it out of {out} (or remove it) and build again")
    assert tree(out) == old | {"hls/notes.txt": b"mine\n"}
    assert leftovers(out) == []


@pytest.mark.unit
def test_a_symlink_put_in_out_during_the_build_survives_and_is_named(tmp_path, monkeypatch):
    out = tmp_path / "out"
    write_tree(OLD, out)
    old = tree(out)

    def plant():
        (out / "link").symlink_to(EXAMPLE)
        (out / "data").mkdir()
        (out / "data" / "a.csv").write_text("a\n")

    _during_the_build(monkeypatch, plant)
    with pytest.raises(MingError, match=rf"^-o {out}: {out / 'data'} and 1 more entry were not written by ming"):
        write_tree(NEW, out)
    assert tree(out) == old | {"link": b"-> " + os.fsencode(EXAMPLE), "data/a.csv": b"a\n"}
    assert leftovers(out) == []


@pytest.mark.unit
def test_an_out_created_by_someone_else_during_the_build_is_refused(tmp_path, monkeypatch):
    out = tmp_path / "out"

    def create():
        out.mkdir()
        (out / "theirs.txt").write_text("theirs\n")

    _during_the_build(monkeypatch, create)
    with pytest.raises(MingError) as error:
        write_tree(NEW, out)
    assert str(error.value) == (f"-o {out}: is not empty and was not written by ming (no {MARKER}); pass a new or "
                                "empty directory")
    assert tree(out) == {"theirs.txt": b"theirs\n"} and leftovers(out) == []


@pytest.mark.unit
def test_an_empty_out_created_during_the_build_is_replaced(tmp_path, monkeypatch):
    out = tmp_path / "out"
    reference = written(NEW, tmp_path)
    _during_the_build(monkeypatch, out.mkdir)
    write_tree(NEW, out)
    assert tree(out) == reference and leftovers(out) == []


@pytest.mark.unit
def test_an_out_created_between_the_check_and_the_rename_is_left_alone(tmp_path, monkeypatch):
    out = tmp_path / "out"
    real = output._rename

    def create_first(a, b):
        if b == out and not out.exists():
            out.mkdir()
            (out / "theirs.txt").write_text("theirs\n")
        return real(a, b)

    monkeypatch.setattr(output, "_rename", create_first)
    with pytest.raises(MingError) as error:
        write_tree(NEW, out)
    assert str(error.value) == (f"-o {out}: was created by someone else while the build ran; ming left it as it "
                                "is, pass another -o or build again")
    assert tree(out) == {"theirs.txt": b"theirs\n"} and leftovers(out) == []


@pytest.mark.unit
def test_a_file_put_in_out_between_the_check_and_the_swap_is_kept_and_named(tmp_path, monkeypatch):
    out = tmp_path / "out"
    write_tree(OLD, out)
    real = output._exchange

    def plant_first(a, b):
        (out / "hls" / "late.txt").write_text("late\n")
        return real(a, b)

    monkeypatch.setattr(output, "_exchange", plant_first)
    _, old = staging_paths(out)
    with pytest.raises(MingError) as error:
        write_tree(NEW, out)
    assert str(error.value) == (f"-o {out}: the new build is in place, but {old / 'hls' / 'late.txt'} was not "
                                "written by ming "
                                f"(put in {out} while the build ran) and kept in {old}: move what you need out of "
                                f"{old}, then remove it")
    assert tree(out) == written(NEW, tmp_path)
    monkeypatch.undo()
    assert tree(old) == {MARKER: output.manifest(OLD), "hls/late.txt": b"late\n"}
    with pytest.raises(MingError) as error:  # the next build does not remove it either
        write_tree(NEW, out)
    assert str(error.value) == (f"{old}: left by an earlier build into {out}; {old / 'hls' / 'late.txt'} was not "
                                "written by ming: "
                                f"move what you need out of {old}, then remove it and build again")
    assert (old / "hls" / "late.txt").read_text() == "late\n"


def test_a_file_of_the_users_in_a_former_build_stops_the_cli_before_the_import(tmp_path):
    out = tmp_path / "out"
    write_tree(OLD, out)
    (out / "hls" / "notes.txt").write_text("mine\n")
    os.symlink(EXAMPLE, out / "model.onnx")
    before = tree(out)
    result = ming("build", EXAMPLE, "-q", "-o", out)
    assert result.returncode == 2
    assert_one_line(result.stderr, f"ming: error: -o {out}: {out / 'hls' / 'notes.txt'} and 1 more entry were not "
                                   "written by ming")
    assert tree(out) == before and leftovers(out) == []


@pytest.mark.unit
def test_a_marker_that_is_a_symlink_or_lists_no_files_does_not_make_out_mings(tmp_path):
    real = tmp_path / "real"
    write_tree(OLD, real)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    (out / MARKER).symlink_to(real / MARKER)
    with pytest.raises(MingError, match="is not empty and was not written by ming"):
        write_tree(NEW, out)
    (out / MARKER).unlink()
    (out / MARKER).write_text("This directory was written by `ming build`; ming replaces it on the next build "
                              "into it.\n")  # an earlier ming's marker: no list of its files
    with pytest.raises(MingError, match=f"earlier ming whose {MARKER} does not list its files"):
        write_tree(NEW, out)
    assert (out / "notes.txt").read_text() == "mine\n"


# --- 3. inputs inside OUT -----------------------------------------------------------------------------------------

def test_a_settings_file_inside_out_is_refused(tmp_path):
    out = tmp_path / "out"
    write_tree(OLD, out)
    model = tmp_path / "m.onnx"
    model.write_bytes(EXAMPLE.read_bytes())
    (out / "pins.json").write_text("{}\n")
    before = tree(out)
    for command in ("build", "sweep"):
        result = ming(command, "m.onnx", "-q", "-o", "out", "--settings", "out/pins.json", cwd=tmp_path)
        assert result.returncode == 2
        assert_one_line(result.stderr, "ming: error: -o out: holds the input out/pins.json; pass a directory that "
                                       "does not contain the build's inputs")
        assert tree(out) == before and leftovers(out) == []


def test_a_symlink_to_the_model_inside_out_is_refused_and_kept(tmp_path):
    out = tmp_path / "out"
    write_tree(OLD, out)
    (out / "model.onnx").symlink_to(EXAMPLE)
    before = tree(out)
    result = ming("build", out / "model.onnx", "-q", "-o", out)
    assert result.returncode == 2
    assert_one_line(result.stderr, f"-o {out}: holds the input {out / 'model.onnx'}")
    assert tree(out) == before


@pytest.mark.unit
def test_inputs_are_checked_as_given_and_resolved(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "pins.json").write_text("{}")
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "link.json").symlink_to(tmp_path / "real" / "pins.json")
    with pytest.raises(MingError, match="holds the input"):  # resolved: real/pins.json is in real/
        check_output(tmp_path / "real", [tmp_path / "alias" / "pins.json"])
    with pytest.raises(MingError, match="holds the input"):  # as given: out/link.json is in out/
        check_output(tmp_path / "out", [tmp_path / "out" / "link.json"])
    assert check_output(tmp_path / "new", [tmp_path / "alias" / "pins.json"]) == tmp_path / "new"


# --- 4. a failed rebuild leaves OUT as it was, or names what is left -----------------------------------------------

@pytest.mark.unit
def test_a_read_only_directory_in_out_stops_the_rebuild_before_the_swap(tmp_path):
    out = tmp_path / "out"
    write_tree(OLD, out)
    old = tree(out)
    os.chmod(out / "hls", 0o555)
    try:
        result = write_unprivileged(out)
        again = write_unprivileged(out)
    finally:
        os.chmod(out / "hls", 0o755)
    assert result.returncode == 2 and again.returncode == 2
    assert_one_line(result.stderr, f"-o {out}: cannot remove the previous build's files from {out / 'hls'} "
                                   f"(permission denied); make it writable (chmod u+w {out / 'hls'}) and build again")
    assert again.stderr == result.stderr
    assert tree(out) == old and leftovers(out) == []
    assert write_unprivileged(out).returncode == 0


@pytest.mark.unit
def test_a_previous_tree_that_cannot_be_removed_after_the_swap_is_named(tmp_path, monkeypatch):
    out = tmp_path / "out"
    write_tree(OLD, out)
    _, old = staging_paths(out)
    real = os.unlink

    def refuse(path, *args, **kwargs):
        if path == "top.cpp" and kwargs.get("dir_fd") is not None:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", refuse)
    with pytest.raises(MingError) as error:
        write_tree(NEW, out)
    assert str(error.value) == (f"-o {out}: the new build is in place, but the previous one in {old} could not be "
                                f"removed (Permission denied: {old / 'hls' / 'top.cpp'}); make it writable "
                                f"(chmod -R u+w {old}) and the next build removes it")
    monkeypatch.undo()
    assert tree(out) == written(NEW, tmp_path)
    assert (old / "hls" / "top.cpp").read_text() == "// old\n"
    write_tree(NEW, out)
    assert tree(out) == written(NEW, tmp_path) and leftovers(out) == []


@pytest.mark.unit
def test_a_leftover_old_tree_that_cannot_be_removed_is_named(tmp_path):
    out = tmp_path / "out"
    write_tree(NEW, out)
    current = tree(out)
    _, old = staging_paths(out)
    write_tree(OLD, tmp_path / "stale")
    os.rename(tmp_path / "stale", old)
    os.chmod(old / "hls", 0o555)
    try:
        result = write_unprivileged(out)
    finally:
        os.chmod(old / "hls", 0o755)
    assert result.returncode == 2
    assert_one_line(result.stderr, f"{old}: left by an earlier build into {out} and cannot be removed (Permission "
                                   f"denied: {old / 'hls' / 'sub'}); make it writable (chmod -R u+w {old}) or remove "
                                   "it, then build again")
    assert tree(out) == current
    assert write_unprivileged(out).returncode == 0 and leftovers(out) == []


# --- 5. files are created, never opened through a symbolic link ---------------------------------------------------

@pytest.mark.unit
def test_a_symlink_planted_in_the_staging_tree_is_not_written_through(tmp_path, monkeypatch):
    out = tmp_path / "out"
    new, _ = staging_paths(out)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    real = os.mkdir

    def plant(path, *args, **kwargs):
        real(path, *args, **kwargs)
        if Path(path).name == "hls":
            os.symlink(victim, new / "hls" / "top.cpp")

    monkeypatch.setattr(os, "mkdir", plant)
    with pytest.raises(MingError) as error:
        write_tree(NEW, out)
    assert str(error.value) == f"-o {out}: cannot write {new / 'hls' / 'top.cpp'} (File exists)"
    assert victim.read_text() == "precious\n"
    assert not os.path.lexists(out)
    assert os.readlink(new / "hls" / "top.cpp") == str(victim)  # not ming's: left, and named by the next build
    monkeypatch.undo()
    with pytest.raises(MingError) as error:
        write_tree(NEW, out)
    assert str(error.value) == (f"{new}: left by an earlier build into {out}; {new / 'hls' / 'top.cpp'} was not "
                                f"written by ming: move what you need out of {new}, then remove it and build again")


@pytest.mark.unit
def test_a_symlink_in_place_of_a_staging_directory_is_refused(tmp_path):
    out = tmp_path / "out"
    new, _ = staging_paths(out)
    (tmp_path / "elsewhere").mkdir()
    new.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(MingError) as error:
        write_tree(NEW, out)
    assert str(error.value) == (f"{new}: is in the way of ming's staging directory and was not written by ming; "
                                "move it away, then build again")
    assert list((tmp_path / "elsewhere").iterdir()) == [] and not os.path.lexists(out)


# --- 6. a signal in the first moments of ming ----------------------------------------------------------------------

def _until_numpy_loads(process: subprocess.Popen) -> None:
    """Wait until ming's first heavy import (numpy, through the IR) is under way."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if "_multiarray_umath" in Path(f"/proc/{process.pid}/maps").read_text():
                return
        except OSError:
            pass
        time.sleep(0.0005)
    pytest.fail("ming did not import numpy")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_ming_starts_is_one_line(tmp_path, signum):
    for delay in (0.0, 0.005, 0.02, 0.05, 0.1):
        process = subprocess.Popen([sys.executable, "-m", "ming_py.cli", "analyze", str(EXAMPLE)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _until_numpy_loads(process)
        time.sleep(delay)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
        assert (process.returncode, stderr) == (128 + signum, f"ming: interrupted ({signal.Signals(signum).name})\n"), \
            delay


# --- 7. messages ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["build", "sweep"])
def test_a_path_under_a_regular_file_names_the_file(tmp_path, command):
    (tmp_path / "afile").write_text("precious\n")
    result = ming(command, EXAMPLE, "-q", "-o", "afile/sub", cwd=tmp_path)
    assert result.returncode == 2
    assert_one_line(result.stderr, f"ming: error: -o afile/sub: {tmp_path / 'afile'} is not a directory; pass a path "
                                   "in a directory")
    assert (tmp_path / "afile").read_text() == "precious\n"


def test_paths_that_are_not_utf8_are_one_line(tmp_path):
    result = ming("build", b"m\xff.onnx", "-q", "-o", b"out\xff", cwd=tmp_path)
    assert result.returncode == 2
    assert_one_line(result.stderr, "ming: error: m\\xff.onnx: file not found")
    Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"f\xff"))).write_text("x")
    result = ming("build", EXAMPLE, "-q", "-o", b"f\xff/sub", cwd=tmp_path)
    assert result.returncode == 2
    assert_one_line(result.stderr, f"ming: error: -o f\\xff/sub: {tmp_path}/f\\xff is not a directory")


def test_a_sweep_with_paths_that_are_not_utf8(tmp_path):
    os.symlink(EXAMPLE, os.path.join(os.fsencode(tmp_path), b"m\xff.onnx"))
    result = ming("sweep", b"m\xff.onnx", "--dsp", "100%", "-o", b"out\xff", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "codec" not in result.stderr + result.stdout
    assert "m\\xff.onnx" in result.stdout + result.stderr
    out = Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"out\xff")))
    assert {p.name for p in out.iterdir()} == SWEEP_FILES


@pytest.mark.unit
def test_the_lock_of_an_out_that_is_not_utf8(tmp_path):
    out = Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"out\xff")))
    with output_lock(check_output(out)):
        pass


def test_a_reader_that_leaves_the_pipe_early_is_no_traceback():
    """Before: `ming boards | head -0` ended in a BrokenPipeError traceback when Python flushed stdout at exit.
    After: no output on stderr and the exit code of a process ended by SIGPIPE."""
    process = subprocess.Popen([sys.executable, "-m", "ming_py.cli", "boards"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    process.stdout.close()  # long before ming, still starting, writes its table
    stderr = process.stderr.read()
    assert process.wait(timeout=60) == 128 + signal.SIGPIPE
    assert stderr == ""
