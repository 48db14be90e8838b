"""Fault injection: `-o` at dangerous places, signals at every moment of a build, concurrent builds.

Each case asserts what the user sees (exit code, one line, no traceback) and what
is left on disk (nothing of the user's lost, OUT the old tree or the complete new
one, no staging directories, no temporary files, no child processes).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ming_py import output
from ming_py.errors import MingError
from ming_py.output import MARKER, check_output, output_lock, staging_paths, write_tree

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "tiny_cnn.onnx"
OLD = {"report.json": "old report\n", "hls/top.cpp": "// old\n", "hls/sub/deep.txt": "old deep\n"}
NEW = {"report.json": "new report\n", "hls/top.cpp": "// new\n", "host.json": "{}\n"}


def ming(*args, **options) -> subprocess.CompletedProcess:
    """`python -m ming_py.cli ARGS` (a bytes argument passed as it is, e.g. a path that is not UTF-8); `options`
    go to subprocess.run (cwd, env, timeout)."""
    return subprocess.run([sys.executable, "-m", "ming_py.cli", *(a if isinstance(a, bytes) else str(a) for a in args)],
                          capture_output=True, text=True, **options)


def start_ming(*args, cwd=None, env=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ming_py.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd, env=env)


def assert_one_line(stderr: str, *fragments: str) -> None:
    lines = stderr.strip().splitlines()
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def tree(root: Path) -> dict[str, bytes]:
    """Every file under root (relative path -> content), the marker included."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def encoded(files: dict[str, str]) -> dict[str, bytes]:
    return {name: text.encode() for name, text in files.items()}


def user_files(directory: Path) -> dict[str, bytes]:
    directory.mkdir(parents=True, exist_ok=True)
    files = {"notes.txt": "my notes\n", "data/table.csv": "a,b\n1,2\n"}
    for name, text in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    return encoded(files)


def leftovers(out: Path) -> list[Path]:
    return [p for p in staging_paths(out) if os.path.lexists(p)]


# --- -o at dangerous places ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("where", [".", "..", "../.."])
def test_current_directory_and_its_parents_are_refused(tmp_path, where):
    cwd = tmp_path / "a" / "b" / "work"
    mine = user_files(cwd)
    model = cwd / "m.onnx"
    model.write_bytes(EXAMPLE.read_bytes())
    result = ming("build", "m.onnx", "-q", "-o", where, cwd=cwd)
    assert result.returncode == 2
    assert_one_line(result.stderr, f"-o {where}", "current directory")
    assert {k: v for k, v in tree(cwd).items() if k != "m.onnx"} == mine
    assert model.read_bytes() == EXAMPLE.read_bytes()


def test_a_regular_file_is_refused(tmp_path):
    target = tmp_path / "f"
    target.write_text("precious\n")
    result = ming("build", EXAMPLE, "-q", "-o", target)
    assert result.returncode == 2
    assert_one_line(result.stderr, "not a directory")
    assert target.read_text() == "precious\n"


def test_the_directory_of_the_model_is_refused(tmp_path):
    project = tmp_path / "proj"
    mine = user_files(project)
    (project / "m.onnx").write_bytes(EXAMPLE.read_bytes())
    result = ming("build", project / "m.onnx", "-q", "-o", project)
    assert result.returncode == 2
    assert_one_line(result.stderr, "holds the input")
    assert (project / "m.onnx").read_bytes() == EXAMPLE.read_bytes()
    assert all((project / name).read_bytes() == content for name, content in mine.items())


def test_a_directory_ming_did_not_write_is_refused(tmp_path):
    mine = user_files(tmp_path / "results")
    result = ming("build", EXAMPLE, "-q", "-o", tmp_path / "results")
    assert result.returncode == 2
    assert_one_line(result.stderr, "not empty", MARKER)
    assert tree(tmp_path / "results") == mine


def test_a_symbolic_link_is_refused(tmp_path):
    mine = user_files(tmp_path / "real")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    result = ming("build", EXAMPLE, "-q", "-o", tmp_path / "link")
    assert result.returncode == 2
    assert_one_line(result.stderr, "symbolic link")
    assert tree(tmp_path / "real") == mine


def test_a_path_under_a_file_is_a_clean_error(tmp_path):
    (tmp_path / "f").write_text("precious\n")
    result = ming("build", EXAMPLE, "-q", "-o", tmp_path / "f" / "out")
    assert result.returncode == 2
    assert_one_line(result.stderr, f"{tmp_path / 'f'} is not a directory")
    assert (tmp_path / "f").read_text() == "precious\n"


def test_a_read_only_directory_is_a_clean_error(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0o555)
    # root writes anywhere: drop the capability that lets it, as an ordinary user would be
    unprivileged = ["setpriv", "--bounding-set=-dac_override", "--inh-caps=-dac_override"] if os.geteuid() == 0 else []
    result = subprocess.run([*unprivileged, sys.executable, "-m", "ming_py.cli", "build", str(EXAMPLE), "-q", "-o",
                             str(locked / "out")], capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert_one_line(result.stderr, "permission denied")
    assert list(locked.iterdir()) == []


def test_an_empty_directory_and_a_former_build_are_replaced(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    assert ming("build", EXAMPLE, "-q", "-o", out).returncode == 0
    first = tree(out)
    assert MARKER in first and "hls/tiny_cnn.cpp" in first
    (out / "hls" / "tiny_cnn.cpp").write_text("// edited\n")  # ming's own file, edited: replaced
    result = ming("build", EXAMPLE, "-q", "-o", out)
    assert result.returncode == 0, result.stderr
    assert tree(out) == first
    assert leftovers(out) == []
    for i in range(50):  # what a Vitis run inside OUT/hls leaves: not ming's, so a rebuild stops and keeps it
        (out / "hls" / "proj" / f"f{i}.log").parent.mkdir(parents=True, exist_ok=True)
        (out / "hls" / "proj" / f"f{i}.log").write_text("log\n")
    vitis = tree(out)
    result = ming("build", EXAMPLE, "-q", "-o", out)
    assert result.returncode == 2
    assert_one_line(result.stderr, f"{out / 'hls' / 'proj'} was not written by ming", "move it out")
    assert tree(out) == vitis and leftovers(out) == []


@pytest.mark.unit
def test_check_output_unit_cases(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "model.onnx").write_text("m")
    with pytest.raises(MingError, match="current directory"):
        check_output(".")
    with pytest.raises(MingError, match="current directory"):
        check_output(tmp_path.parent)
    with pytest.raises(MingError, match="holds the input"):
        check_output(tmp_path / "proj" / "x" / "..", [tmp_path / "proj" / "model.onnx"])
    with pytest.raises(MingError, match="file system root"):
        check_output("/")
    assert check_output("new/out") == tmp_path / "new" / "out"


# --- mode ---------------------------------------------------------------------------------------------------------

@pytest.mark.unit
def test_out_gets_the_umask_mode_and_a_rebuild_keeps_it(tmp_path):
    previous = os.umask(0o027)
    try:
        write_tree(NEW, tmp_path / "out")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o750
    os.chmod(tmp_path / "out", 0o711)
    write_tree(OLD, tmp_path / "out")
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o711


# --- interruptions of the swap, at every step (SIGKILL: no cleanup runs) ------------------------------------------

KILLER = textwrap.dedent("""
    import json, os, signal, sys
    from pathlib import Path
    from ming_py import output

    out, moment, n, files = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
    calls = [0]

    def kill_on_call(original):
        def wrapper(*args, **kwargs):
            calls[0] += 1
            if calls[0] == n:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(*args, **kwargs)
        return wrapper

    if moment == "no-exchange":
        output._exchange = lambda a, b: False
        moment = "os-rename"
    target = {"write": (output, "_write_file"), "rename": (output, "_rename"), "os-rename": (os, "rename"),
              "exchange": (output, "_exchange"), "remove": (os, "unlink")}[moment]
    setattr(target[0], target[1], kill_on_call(getattr(*target)))
    output.write_tree(files, out)
""")


def _kill_during(out: Path, moment: str, n: int, files: dict[str, str]) -> int:
    result = subprocess.run([sys.executable, "-c", KILLER, str(out), moment, str(n), json.dumps(files)],
                            capture_output=True, text=True)
    return result.returncode


def _old_tree(out: Path) -> dict[str, bytes]:
    write_tree(OLD | {f"hls/run/{i}.log": "x" for i in range(30)}, out)
    return tree(out)


def _new_tree(tmp_path: Path) -> dict[str, bytes]:
    """The tree write_tree(NEW) gives, the marker (its list of files) included."""
    write_tree(NEW, tmp_path / "reference_new")
    return tree(tmp_path / "reference_new")


@pytest.mark.unit
@pytest.mark.parametrize("moment,calls", [("write", 1), ("write", 3), ("exchange", 1), ("rename", 1),
                                          ("no-exchange", 1), ("no-exchange", 2), ("remove", 1), ("remove", 20)])
def test_sigkill_at_any_moment_leaves_the_old_or_the_new_tree(tmp_path, moment, calls):
    out = tmp_path / "out"
    old = _old_tree(out)
    new = _new_tree(tmp_path)
    code = _kill_during(out, moment, calls, NEW)
    assert code == -signal.SIGKILL
    if moment == "no-exchange" and calls == 2:
        # without an atomic exchange (not Linux) the two renames leave a moment with OUT missing:
        # the old tree waits beside it and the next build puts it back first
        assert not out.exists() and leftovers(out)
    else:
        assert tree(out) in (old, new)
    write_tree(NEW, out)  # the next build cleans up what the killed one left
    assert tree(out) == new
    assert leftovers(out) == []


@pytest.mark.unit
def test_a_staging_directory_ming_did_not_write_is_not_removed(tmp_path):
    out = tmp_path / "out"
    fresh, _ = staging_paths(out)
    mine = user_files(fresh)
    with pytest.raises(MingError, match="not written by ming"):
        write_tree(NEW, out)
    assert tree(fresh) == mine and not out.exists()


# --- real signals -------------------------------------------------------------------------------------------------

def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, command name) of every live descendant of `pid`."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                name = (entry / "comm").read_text().strip()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = (int(fields[1]), name)
    found, frontier = [], {pid}
    while frontier:
        level = [(p, parents[p][1]) for p in parents if parents[p][0] in frontier]
        found += level
        frontier = {p for p, _ in level}
    return found


def _wait_for_child(process: subprocess.Popen, names: tuple[str, ...], timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        hits = [pid for pid, name in _children(process.pid) if name.startswith(names)]
        if hits:
            return hits
        if process.poll() is not None:
            break
        time.sleep(0.005)
    pytest.fail(f"no {names} child appeared; ming ended with {process.poll()}")


def _gone(pids: list[int], timeout: float = 5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                alive.append(pid)
        if not alive:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_import_ends_iree_compile_and_keeps_out(tmp_path, signum):
    out = tmp_path / "out"
    old = _old_tree(out)
    # an empty cache, so that the model is lowered (not read from the cache of lowered models)
    process = start_ming("build", EXAMPLE, "-o", out, env=dict(os.environ, MING_CACHE_DIR=str(tmp_path / "cache")))
    compilers = _wait_for_child(process, ("iree-compile",))
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signum
    assert_one_line(stderr.split(" failed\n")[-1], "interrupted", signal.Signals(signum).name)
    assert _gone(compilers), "iree-compile outlived ming"
    assert tree(out) == old and leftovers(out) == []


def test_sigterm_while_the_old_tree_is_removed(tmp_path):
    """A Vitis project inside OUT/hls holds thousands of files; a signal while they go leaves OUT complete."""
    reference = tmp_path / "reference"
    assert ming("build", EXAMPLE, "-q", "-o", reference).returncode == 0
    out = tmp_path / "out"
    files = {name: content for name, content in tree(reference).items() if name != MARKER}
    write_tree(files | {f"hls/proj/{i % 40}/{i}.log": "x" for i in range(6000)}, out)
    process = start_ming("build", EXAMPLE, "-q", "-o", out)
    _, old = staging_paths(out)
    deadline = time.monotonic() + 60
    while not old.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.0005)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    if process.returncode:
        assert process.returncode == 128 + signal.SIGTERM
        assert_one_line(stderr, "interrupted")
    assert tree(out) == tree(reference)  # the new tree is complete whether or not the signal came in time
    assert ming("build", EXAMPLE, "-q", "-o", out).returncode == 0
    assert tree(out) == tree(reference) and leftovers(out) == []


def test_sigterm_during_the_csim_compile_ends_gxx_and_leaves_no_temporary_file(tmp_path):
    out = tmp_path / "out"
    assert ming("build", EXAMPLE, "-q", "-o", out).returncode == 0
    cache = tmp_path / "cache"
    env = os.environ | {"MING_CACHE_DIR": str(cache)}
    process = subprocess.Popen([sys.executable, "-m", "ming_py.cli", "csim", str(out), "--input",
                                str(REPO / "examples" / "input.npy"), "--output", str(tmp_path / "y.npy")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    compilers = _wait_for_child(process, ("g++", "cc1plus"))
    time.sleep(0.2)  # let g++ start its own children too
    compilers += [pid for pid, _ in _children(process.pid)]
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM
    assert "Traceback" not in stderr and "interrupted" in stderr
    assert _gone(compilers), "the compiler outlived ming"
    assert not (tmp_path / "y.npy").exists()
    assert [p for p in cache.rglob("*") if p.is_file() and p.suffix != ".lock"] == []


# --- concurrent builds --------------------------------------------------------------------------------------------

def test_a_build_into_a_locked_out_stops_at_once(tmp_path):
    out = tmp_path / "out"
    old = _old_tree(out)
    with output_lock(check_output(out)):
        result = ming("build", EXAMPLE, "-q", "-o", out)
    assert result.returncode == 2
    assert_one_line(result.stderr, "another ming build")
    assert tree(out) == old


def test_two_concurrent_builds_into_one_out(tmp_path):
    reference = tmp_path / "reference"
    assert ming("build", EXAMPLE, "-q", "-o", reference).returncode == 0
    out = tmp_path / "out"
    builds = [start_ming("build", EXAMPLE, "-q", "-o", out) for _ in range(3)]
    results = [(b.wait(timeout=120), b.stderr.read()) for b in builds]
    assert all(code in (0, 2) for code, _ in results), results
    assert any(code == 0 for code, _ in results)
    for code, stderr in results:
        if code == 2:
            assert_one_line(stderr, "another ming build")
    assert tree(out) == tree(reference) and leftovers(out) == []


@pytest.mark.unit
def test_a_full_disk_while_writing_is_one_line_and_keeps_out(tmp_path, monkeypatch):
    out = tmp_path / "out"
    old = _old_tree(out)
    written = output._write_file

    def full_disk(dir_fd, name, data, path):
        if path.name == "top.cpp":
            raise OSError(28, os.strerror(28), str(path))
        return written(dir_fd, name, data, path)

    monkeypatch.setattr(output, "_write_file", full_disk)
    with pytest.raises(MingError, match="No space left"):
        write_tree(NEW, out)
    assert tree(out) == old and leftovers(out) == []


@pytest.mark.unit
@pytest.mark.parametrize("victim", ["top.cpp", "host.json"])
def test_an_interrupt_while_writing_removes_the_staging_tree(tmp_path, monkeypatch, victim):
    from ming_py.interrupt import Interrupted

    out = tmp_path / "out"
    old = _old_tree(out)
    written = output._write_file

    def interrupted(dir_fd, name, data, path):
        if path.name == victim:
            raise Interrupted(signal.SIGTERM)
        return written(dir_fd, name, data, path)

    monkeypatch.setattr(output, "_write_file", interrupted)
    with pytest.raises(Interrupted):
        write_tree(NEW, out)
    assert tree(out) == old and leftovers(out) == []
