"""`ming csim`: compile the generated C++ with g++ (cached by content) and run it on one image or N stacked.

The host side does exactly what the deployed system does: quantize a float
input, reorder it to the stream's raster order (row, column, channel), run the
accelerator, reorder the output back and run the host tail (e.g. Softmax).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import hmac
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from .errors import MingError
from .contract.ming_json import read_json
from .weights_ddr import DDR_FILE
from .weights_load import WEIGHTS_FILE
from .options import build_metadata
from .cache import not_only_yours, open_lock, private_dir
from .emit.hls import STATIC_HEADERS
from .progress import Progress
from .contract import ming_host
from .contract.ming_cxx import CSIM_FLAGS, compile_program
from .contract.ming_errors import DeployError
from .contract.ming_ports import Port, input_images

# -Wno-unused-label: what ming_stream.h's pragma says, which g++ does not keep in a precompiled header
CXX_FLAGS = CSIM_FLAGS + ("-Wall", "-Wextra", "-Wno-unused-label")
# Concurrent C-simulation: one thread per dataflow process, FIFOs bounded by their depth
# (see ming_hls_stream.h); the binary exits with DEADLOCK_EXIT_CODE and a report on a deadlock.
CONCURRENT_FLAGS = ("-DMING_CSIM_CONCURRENT", "-pthread")
DEADLOCK_EXIT_CODE = 3
# The port check (see ming_check.h): a pipelined iteration needing more memory or stream ports than
# the pragmas give ends the binary with PORT_CONFLICT_EXIT_CODE and one "ming port check:" line. Its
# instrumented accesses triple g++'s time at -O2 (tiny_cnn: 5.1 s instead of 1.8 s); at -O1, which the last
# -O option sets, it takes 3.9 s and the run it serves stays as fast (0.04 s an image).
CHECK_PORTS_FLAGS = ("-DMING_CHECK_PORTS", "-O1")
PORT_CONFLICT_EXIT_CODE = 3
# The stream trace (ming_hls_stream.h, `ming_py.trace`): every token written to a stream, recorded in the file
# $MING_TRACE_FILE names; sequential mode only.
TRACE_FLAGS = ("-DMING_TRACE_STREAMS",)
# "ming port check: <function> <array or stream> <file>:<line of the PIPELINE pragma> <counts>"
_CONFLICT_LINE = re.compile(r"^ming port check: (?P<function>\S+) (?P<resource>.+) (?P<file>[^\s:]+):(?P<line>\d+) "
                            r"(?P<detail>\d+ .*)$")
_LABEL_LINE = re.compile(r"^\s*(?P<label>[A-Za-z_]\w*):\s*$")
# An array no pragma named is reported by where it is declared; its declaration tells its name.
_UNNAMED_ARRAY = re.compile(r"^array declared at (?P<file>[^\s:]+):(?P<line>\d+)$")
_ARRAY_DECLARATION = re.compile(r"ming::Array<.*>\s+(?P<name>[A-Za-z_]\w*)\s*[=;{]")


class CsimDeadlock(MingError):
    """The concurrent C-simulation deadlocked: every process waits on a FIFO.

    `report` holds one line per blocked process, e.g.
    "  split waits to write to split_to_add (full, 1/1)".
    """

    def __init__(self, message: str, report: list[str]):
        super().__init__(message)
        self.report = report


class PortConflict(MingError):
    """An iteration of a pipelined loop needs more ports of an array or stream than its pragmas give.

    `process` is the model's name of the process (the C++ function's name for the AXI adapters),
    `resource` the array or stream, `loop` the pipelined loop's label, `detail` the counts, e.g.
    "3 accesses (3 reads, 0 writes) per iteration to bank (0,1), 2 ports".
    """

    def __init__(self, process: str, resource: str, loop: str, location: str, detail: str):
        super().__init__(f"port conflict in {process}, loop {loop} ({location}): {resource}: {detail}")
        self.process, self.resource, self.loop, self.location, self.detail = process, resource, loop, location, detail


WEIGHTS_VARIABLE = "MING_WEIGHTS_FILE"  # the testbench's weights.bin (emit/templates/testbench.cpp.j2)
DDR_WEIGHTS_VARIABLE = "MING_WEIGHTS_DDR_FILE"  # the testbench's weights_ddr.bin (`ming_py.weights_ddr`)


def cache_dir() -> Path:
    return private_dir("csim")


# The cache of C-simulation binaries: <cache>/csim/<key>/<model>_csim, beside it <model>_csim.sha256, the
# sha256 of the binary as ming compiled it. The key hashes the compiler's identity (the resolved $CXX and
# its --version), the flags and the sources, so a changed compiler or mode compiles anew. Before a cached
# binary runs, it is hashed and compared with its record; a binary that differs (tampered with, truncated)
# or has no record is compiled again into place. What runs is the very file that was hashed: the verified
# descriptor is executed through /proc/self/fd (Linux); elsewhere its path, which is safe because every
# directory of the cache is the user's own and nobody else can write in it (cache.private_dir).
RECORD_SUFFIX = ".sha256"
KEY_VERSION = b"ming csim cache 2"


@functools.lru_cache(maxsize=None)
def _compiler_identity(cxx: str) -> tuple[str, str, str]:
    """(the path $CXX resolves to, its real path, its --version output), once per process and $CXX."""
    compiler = shutil.which(cxx)
    if compiler is None:
        raise MingError(f"no C++ compiler found (CXX={cxx}); install g++ or set CXX to a C++ compiler")
    try:
        result = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MingError(f"the C++ compiler {compiler} (CXX={cxx}) does not run ({exc}); install g++ or set CXX "
                        "to a working C++ compiler") from None
    return compiler, os.path.realpath(compiler), result.stdout + result.stderr


def csim_flags(concurrent: bool = False, check_ports: bool = False, trace: bool = False) -> tuple[str, ...]:
    return (CXX_FLAGS + (CONCURRENT_FLAGS if concurrent else ()) + (CHECK_PORTS_FLAGS if check_ports else ())
            + (TRACE_FLAGS if trace else ()))


def csim_key(hls_dir: Path, model: str, concurrent: bool = False, check_ports: bool = False,
             trace: bool = False) -> str:
    """The cache key of the C-simulation of `hls_dir`: compiler, flags, model and sources."""
    digest = hashlib.sha256(KEY_VERSION + b"\0")
    for part in (*_compiler_identity(os.environ.get("CXX", "g++")), model,
                 *csim_flags(concurrent, check_ports, trace)):
        digest.update(part.encode() + b"\0")
    digest.update(b"\0")
    for path in sorted(p for p in hls_dir.iterdir() if p.suffix in (".cpp", ".h")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def record_path(binary: Path) -> Path:
    """Where the sha256 of `binary` as ming compiled it is kept."""
    return binary.with_name(binary.name + RECORD_SUFFIX)


def compile_csim(hls_dir: Path, model: str, progress: Progress, concurrent: bool = False,
                 check_ports: bool = False) -> Path:
    """The testbench binary for `hls_dir`, compiled once per compiler, mode and source tree, and verified
    against the record of what ming compiled before it is handed out (see `open_csim`)."""
    binary, fd = open_csim(hls_dir, model, progress, concurrent, check_ports)
    os.close(fd)
    return binary


def open_csim(hls_dir: Path, model: str, progress: Progress, concurrent: bool = False,
              check_ports: bool = False, seconds: float | None = None, trace: bool = False) -> tuple[Path, int]:
    """The testbench binary for `hls_dir` and a read-only descriptor of the file that was verified (or just
    compiled, within `seconds` if given): its sha256 equals the record written when ming compiled it. The caller
    closes it. trace=True: the binary records every stream's tokens (TRACE_FLAGS)."""
    cache_dir()  # refuses a cache another user can write in, before anything is read from it
    key = csim_key(hls_dir, model, concurrent, check_ports, trace)
    lock = open_lock(private_dir("locks"), f"csim-{key}.lock")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one compile per key at a time; verification sees no half-written record
        binary = private_dir("csim", key) / f"{model}_csim"
        fd, problem = _verified(binary)
        if fd is not None:
            progress.note(f"using the cached C-simulation binary {binary}")
            return binary, fd
        if problem:
            progress.note(f"the cached C-simulation binary {binary} {problem}; compiling it again")
        _compile(hls_dir, model, binary, csim_flags(concurrent, check_ports, trace), concurrent, check_ports, progress,
                 seconds)
        fd = _open_binary(binary, private=True)
        if fd is None:
            raise MingError(f"the C-simulation binary {binary} is not a regular file of yours after compiling it; "
                            "remove it and run again")
        try:
            _write_record(binary, _sha256(fd))
        except BaseException:
            os.close(fd)
            raise
        return binary, fd
    finally:
        os.close(lock)


def _compile(hls_dir: Path, model: str, binary: Path, flags: tuple[str, ...], concurrent: bool, check_ports: bool,
             progress: Progress, seconds: float | None = None) -> None:
    if os.path.lexists(binary) and not binary.is_symlink() and not binary.is_file():
        raise MingError(f"the cached C-simulation binary {binary} is not a file; remove it, ming compiles it again")
    record_path(binary).unlink(missing_ok=True)  # no record while the binary changes
    modes = [name for name, on in (("concurrent", concurrent), ("port check", check_ports)) if on]
    mode = f" ({', '.join(modes)})" if modes else ""
    with progress.step(f"compiling the C-simulation{mode} with {os.environ.get('CXX', 'g++')}"):
        try:
            compile_program([hls_dir / f"{model}.cpp", hls_dir / f"{model}_tb.cpp"], [hls_dir],
                            flags + precompiled_headers(hls_dir, flags), binary, seconds)
        except DeployError as exc:
            raise MingError(str(exc)) from None
        except OSError as exc:
            raise MingError(f"cannot write the C-simulation binary {binary} ({exc.strerror}); set MING_CACHE_DIR "
                            "to a writable directory of your own") from None


# The ming headers every design includes (emit/hls.py STATIC_HEADERS), precompiled once per compiler, flags and
# header contents (g++ -x c++-header) into <cache>/pch/<key>/ming_csim_pch.h.gch, beside a record of its sha256
# like a binary's: a translation unit then loads them instead of parsing them (on tiny_cnn, 7.8 s of g++ in the
# port-check mode become 5.5 s). Only the C-simulation uses it; the sources stand alone (Vitis reads them so).
PCH_HEADER = "ming_csim_pch.h"
PCH_INCLUDES = ("ming_stream.h", "ming_numerics.h", "ming_window.h")  # with what they include
PCH_KEPT = 8  # precompiled header sets kept in the cache, the most recently made


def precompiled_headers(hls_dir: Path, flags: tuple[str, ...]) -> tuple[str, ...]:
    """("-include", the precompiled header) for compiling `hls_dir`'s sources with `flags`, made if missing; ()
    where it cannot be made (the compile then parses the headers itself, as it would anyway)."""
    if not all((hls_dir / name).is_file() for name in STATIC_HEADERS):
        return ()  # not a tree ming emitted
    digest = hashlib.sha256(b"ming pch 1\0")
    for part in (*_compiler_identity(os.environ.get("CXX", "g++")), *flags, *PCH_INCLUDES):
        digest.update(part.encode() + b"\0")
    headers = {name: (hls_dir / name).read_bytes() for name in STATIC_HEADERS}
    for name, text in headers.items():
        digest.update(name.encode() + b"\0" + text + b"\0")
    key = digest.hexdigest()[:32]
    lock = open_lock(private_dir("locks"), f"pch-{key}.lock")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        folder = private_dir("pch", key)
        header, compiled = folder / PCH_HEADER, folder / f"{PCH_HEADER}.gch"
        fd, _ = _verified(compiled)
        if fd is None:
            fd = _precompile(folder, header, compiled, headers, flags)
            if fd is None:
                return ()
            _forget_old_headers(folder.parent)
        os.close(fd)
        return ("-include", str(header))
    finally:
        os.close(lock)


def _precompile(folder: Path, header: Path, compiled: Path, headers: dict[str, bytes],
                flags: tuple[str, ...]) -> int | None:
    """A descriptor of `compiled`, the headers precompiled into it and recorded; None where g++ could not. A failed
    or interrupted compile leaves `folder` empty."""
    try:
        for name, text in headers.items():
            _write_private(folder / name, text)
        _write_private(header, "".join(f'#include "{name}"\n' for name in PCH_INCLUDES).encode())
        compile_program([header], [], flags + ("-x", "c++-header"), compiled)
        fd = _open_binary(compiled, private=True)
        if fd is not None:
            _write_record(compiled, _sha256(fd))
            return fd
    except DeployError:
        pass
    except BaseException:
        _empty(folder)
        raise
    _empty(folder)
    return None


def _empty(folder: Path) -> None:
    for entry in folder.iterdir():
        if entry.is_file() or entry.is_symlink():
            entry.unlink(missing_ok=True)


def _write_private(path: Path, data: bytes) -> None:
    """`data` as the file `path` in a private cache folder, replacing what is there (never through a link)."""
    staging = path.with_name(f".{path.name}.{os.getpid()}")
    with open(os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600), "wb") as file:
        file.write(data)
    os.replace(staging, path)


def _forget_old_headers(folder: Path) -> None:
    """All but the PCH_KEPT most recently made precompiled header sets of the cache's `folder` removed (only
    folders named as this cache names them)."""
    kept = sorted((entry.stat().st_mtime_ns, entry.name) for entry in folder.iterdir()
                  if re.fullmatch(r"[0-9a-f]{32}", entry.name) and entry.is_dir() and not entry.is_symlink())
    for _, name in kept[:-PCH_KEPT]:
        shutil.rmtree(folder / name, ignore_errors=True)


def _open_binary(binary: Path, private: bool = False) -> int | None:
    """A read-only descriptor of `binary` if it is a regular file of this user's that nobody else can write
    (never through a symbolic link), else None. private=True first makes a file of the user's mode 0700
    (a binary just compiled gets the umask's mode)."""
    try:
        fd = os.open(binary, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    info = os.fstat(fd)
    if private and stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid():
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o700)
            info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or not_only_yours(info):
        os.close(fd)
        return None
    return fd


def _sha256(fd: int) -> str:
    digest, offset = hashlib.sha256(), 0
    while chunk := os.pread(fd, 1 << 20, offset):
        digest.update(chunk)
        offset += len(chunk)
    return digest.hexdigest()


def _read_record(binary: Path) -> str | None:
    try:
        fd = os.open(record_path(binary), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        text = os.read(fd, 256).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    return text if re.fullmatch(r"[0-9a-f]{64}", text) else None


def _verified(binary: Path) -> tuple[int | None, str | None]:
    """(a descriptor of `binary` whose content matches its record, None) or (None, why it cannot be used;
    None when there is no binary at all)."""
    if not os.path.lexists(binary):
        return None, None
    fd = _open_binary(binary)
    if fd is None:
        return None, "is not a regular file of yours that only you can write"
    recorded = _read_record(binary)
    if recorded is not None and hmac.compare_digest(recorded, _sha256(fd)):
        return fd, None
    os.close(fd)
    if recorded is None:
        return None, "has no record of what ming compiled"
    return None, "differs from what ming compiled"


def _write_record(binary: Path, digest: str) -> None:
    """The record of `binary`, written atomically: a reader finds the old record, none, or the new one."""
    record = record_path(binary)
    staging = record.with_name(f".{record.name}.{os.getpid()}")
    try:
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, f"{digest}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(staging, record)
    except OSError as exc:
        raise MingError(f"cannot write {record} ({exc.strerror}); set MING_CACHE_DIR to a writable directory of "
                        "your own") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(staging)


@contextlib.contextmanager
def _closing(fd: int):
    try:
        yield fd
    finally:
        os.close(fd)


def csim_command(binary: Path, fd: int, hls_dir: Path | None = None) -> tuple[list[str], dict]:
    """The command line start and subprocess arguments that run the verified descriptor `fd` of `binary`; where
    `hls_dir` holds weights.bin (weights in URAM, `ming_py.weights_load`) the testbench loads it through the
    weight port ($MING_WEIGHTS_FILE)."""
    how = weights_environment(hls_dir)
    if os.path.isdir("/proc/self/fd"):
        return [str(binary)], how | {"executable": f"/proc/self/fd/{fd}", "pass_fds": (fd,)}
    return [str(binary)], how


def weights_environment(hls_dir: Path | None) -> dict:
    """{"env": ...} naming the build's weights.bin and weights_ddr.bin for the testbench, where it has them; else
    nothing."""
    if hls_dir is None:
        return {}
    files = {variable: Path(hls_dir) / name for variable, name in ((WEIGHTS_VARIABLE, WEIGHTS_FILE),
                                                                   (DDR_WEIGHTS_VARIABLE, DDR_FILE))}
    found = {variable: str(path.resolve()) for variable, path in files.items() if path.is_file()}
    return {"env": os.environ | found} if found else {}


def to_stream_order(array: np.ndarray, stream_shape: list[int]) -> np.ndarray:
    """(C, H, W) array -> values in raster order (row, column, channel)."""
    return ming_host.to_stream_order(array, stream_shape).reshape(-1)


def from_stream_order(values: np.ndarray, stream_shape: list[int]) -> np.ndarray:
    """Values in raster order -> (C, H, W) array."""
    return ming_host.from_stream_order(values, stream_shape)[0]


def deadlock_from(stderr: str) -> CsimDeadlock:
    """The CsimDeadlock of a concurrent C-simulation that exited with DEADLOCK_EXIT_CODE."""
    lines = stderr.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("deadlock:")), None)
    if start is None:
        return CsimDeadlock(f"C-simulation deadlocked: {(stderr.strip().splitlines() or ['(no report)'])[-1]}", [])
    report = []
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        report.append(line)
    return CsimDeadlock("\n".join([lines[start], *report]), report)


def port_conflict_from(stderr: str, out_dir: Path) -> PortConflict | None:
    """The PortConflict a port-checked C-simulation reported on stderr, None if it reported none."""
    found = next((m for m in map(_CONFLICT_LINE.match, stderr.splitlines()) if m), None)
    if found is None:
        return None
    location = f"{found['file']}:{found['line']}"
    loop = loop_label(out_dir / "hls" / found["file"], int(found["line"])) or location
    return PortConflict(process_name(out_dir, found["function"]), resource_name(out_dir, found["resource"]), loop,
                        location, found["detail"])


def process_name(out_dir: Path, cpp_name: str) -> str:
    """The model's name of the process whose C++ function is `cpp_name` (report.json's nodes)."""
    try:
        report = read_json(out_dir / "report.json")
    except (OSError, ValueError):
        return cpp_name
    nodes = report.get("nodes") if isinstance(report, dict) else None
    if not isinstance(nodes, list):
        return cpp_name
    return next((n["name"] for n in nodes if isinstance(n, dict) and n.get("cpp_name") == cpp_name
                 and isinstance(n.get("name"), str)), cpp_name)


def resource_name(out_dir: Path, reported: str) -> str:
    """The array or stream's name: an array no pragma named is reported by where it is declared."""
    unnamed = _UNNAMED_ARRAY.match(reported)
    if unnamed is None:
        return reported
    lines, line = _source_lines(out_dir / "hls" / unnamed["file"]), int(unnamed["line"])
    found = _ARRAY_DECLARATION.search(lines[line - 1]) if 0 < line <= len(lines) else None
    return found["name"] if found else reported


def _source_lines(source: Path) -> list[str]:
    try:
        return source.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []


def loop_label(source: Path, line: int) -> str | None:
    """The label nearest before `line` (1-based) of `source`: the loop its PIPELINE pragma is in."""
    lines = _source_lines(source)[:line]
    return next((m["label"] for m in map(_LABEL_LINE.match, reversed(lines)) if m), None)


def run_csim(out_dir: str | Path, x: np.ndarray, progress: Progress | None = None,
             concurrent: bool = False, check_ports: bool = False) -> dict[str, np.ndarray]:
    """C-simulate the build in `out_dir` on the input `x`: the model's outputs by name, in the model's order, as
    `ming reference` gives them.

    `x` is one image in the model's input shape, or N images stacked on a first axis (as OUT/deploy/run.py
    takes them); each output then comes back in the model's output shape, or as N stacked. Its element type is
    float (quantized as the model does; a model whose input is int8 or uint8 quantizes it with that input's
    scale and zero point as TFLite's QUANTIZE does) or the model's own int8/uint8 (`ming_ports.input_images`).

    concurrent=False: Vitis-style sequential csim (processes one after another, unbounded FIFOs).
    concurrent=True: one thread per process over FIFOs of the scheduled depth; a deadlock
    raises CsimDeadlock (the binary reports it within about MING_CSIM_DEADLOCK_SECONDS).
    check_ports=True: also check that no pipelined iteration needs more ports of an array or a
    stream than the pragmas give (see ming_check.h); the first conflict raises PortConflict.
    """
    progress = progress or Progress(quiet=True)
    out_dir = Path(out_dir)
    host = build_metadata(out_dir)
    port = Port.of(host["input"])
    try:
        images = input_images(x, port)
    except DeployError as exc:
        raise MingError(str(exc)) from None
    one_image = np.asarray(x).shape == port.onnx_shape
    outputs = [Port.of(out) for out in host["outputs"]]
    binary, fd = open_csim(out_dir / "hls", host["model"], progress, concurrent, check_ports)
    results = []
    with _closing(fd), tempfile.TemporaryDirectory() as tmp:
        in_file, out_file = Path(tmp) / "input.bin", Path(tmp) / "output.bin"
        command, how = csim_command(binary, fd, out_dir / "hls")
        count = f" on {len(images)} images" if len(images) > 1 else ""
        with progress.step(f"running the C-simulation{count}"):
            for image in images:
                q = ming_host.accelerator_input(image.reshape(port.onnx_shape), port)
                to_stream_order(q, port.stream_shape).astype(np.int8).tofile(in_file)
                out_file.unlink(missing_ok=True)
                result = subprocess.run([*command, str(in_file), str(out_file)], capture_output=True, text=True,
                                        **how)
                conflict = port_conflict_from(result.stderr, out_dir) if check_ports else None
                if conflict is not None and result.returncode == PORT_CONFLICT_EXIT_CODE:
                    raise conflict
                if result.returncode == DEADLOCK_EXIT_CODE:
                    raise deadlock_from(result.stderr)
                if result.returncode != 0:
                    raise MingError(f"C-simulation failed: "
                                    f"{(result.stderr.strip().splitlines() or ['(no message)'])[-1]}")
                values = np.fromfile(out_file, dtype=np.int8).astype(np.int64)
                results.append(split_record(values, outputs))
    if one_image:
        return results[0]
    by_name = {port.onnx_name: port for port in outputs}
    return {name: np.stack([result[name].reshape(by_name[name].image_shape) for result in results])
            for name in results[0]}


def split_record(values: np.ndarray, ports: list[Port]) -> dict[str, np.ndarray]:
    """The model's outputs (by name, in the model's order) from one image's output values: each output's in
    turn, in the record's order (`ports`)."""
    outputs, first = {}, 0
    for port in ports:
        y = from_stream_order(values[first:first + port.values], port.stream_shape).reshape(port.array_shape)
        outputs[port.onnx_name] = ming_host.model_output(y, port)
        first += port.values
    return {port.onnx_name: outputs[port.onnx_name] for port in sorted(ports, key=lambda port: port.index)}
