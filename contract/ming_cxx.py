"""Compiling C++ with g++ (or $CXX) atomically, and the C-simulation binary of a build compiled once and kept
with a stamp of what it was compiled from: what `ming csim` and the driver's csim backend share.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
from pathlib import Path

try:
    from .accelerator_schema import METADATA, REBUILD, csim_problem  # inside the ming package
    from .ming_errors import DeployError
except ImportError:
    from accelerator_schema import METADATA, REBUILD, csim_problem  # in OUT/deploy, beside this file
    from ming_errors import DeployError

# g++ flags of the C-simulation (MING_CSIM selects ming's stand-ins for the Vitis headers)
CSIM_FLAGS = ("-std=c++17", "-O2", "-DMING_CSIM")


def compile_csim(deploy_dir: Path, csim: dict) -> tuple[Path, str]:
    """(the C-simulation binary named in the metadata, its inputs' sha256 `csim_inputs`), the binary compiled
    unless it matches its stamp (`stamp_path`): the sha256 of the binary this driver compiled and of what it
    compiled it from. A binary without a stamp, one that differs from it (stale, truncated, swapped) and one whose
    sources, headers, flags or $CXX changed is compiled anew. The stamp guards against a binary that no longer
    matches its sources, not against someone who can write the deploy folder: they can edit this driver too."""
    deploy_dir = Path(deploy_dir)
    problem = csim_problem(csim, deploy_dir)
    if problem:
        raise DeployError(f"{deploy_dir / METADATA}: {problem}; the metadata was damaged or edited: {REBUILD}")
    binary = deploy_dir / csim["binary"]
    missing = [s for s in csim["sources"] if not (deploy_dir / s).is_file()]
    if missing:
        raise DeployError(f"the C-simulation needs {deploy_dir / missing[0]}: copy the whole build directory, not "
                          "deploy/ alone")
    inputs = csim_inputs(deploy_dir, csim)
    if stamped_bytes(binary, inputs) is not None:
        return binary, inputs
    _remove_stamp(binary)  # no stamp while the binary changes
    compile_program([deploy_dir / s for s in csim["sources"]], [deploy_dir / d for d in csim["include"]],
                    CSIM_FLAGS, binary)
    fd = _open_regular(binary)
    if fd is None:
        raise DeployError(f"{binary} is not a regular file after compiling it; remove it and run again")
    try:
        _write_stamp(binary, hashlib.sha256(_read_all(fd)).hexdigest(), inputs)
    finally:
        os.close(fd)
    return binary, inputs


STAMP_SUFFIX = ".sha256"


def stamp_path(binary: Path) -> Path:
    """Where the stamp of a compiled binary is kept: `<binary>.sha256`, the binary's sha256 and its inputs'."""
    return binary.with_name(binary.name + STAMP_SUFFIX)


def _remove_stamp(binary: Path) -> None:
    stamp = stamp_path(binary)
    try:
        stamp.unlink(missing_ok=True)
    except OSError as exc:
        raise DeployError(f"cannot remove the stale stamp {stamp} ({exc.strerror or exc}): remove it yourself, or "
                          "copy the build to a directory you can write in") from None


def csim_inputs(deploy_dir: Path, csim: dict) -> str:
    """The sha256 of what the C-simulation is compiled from: $CXX, the flags, every source and every header of
    its include directories (names and contents; one that is no regular file counts as unreadable)."""
    deploy_dir = Path(deploy_dir)
    digest = hashlib.sha256()
    for part in (os.environ.get("CXX", "g++"), *CSIM_FLAGS, *csim["include"]):
        digest.update(part.encode() + b"\0")
    files = [deploy_dir / s for s in csim["sources"]]
    files += [h for d in csim["include"] for h in sorted((deploy_dir / d).glob("*.h"))]
    for path in files:
        fd = _open_regular(path, follow_symlinks=True)
        try:
            content = b"unreadable" if fd is None else _read_all(fd)
            digest.update(str(path.relative_to(deploy_dir)).encode() + b"\0" + content + b"\0")
        except (OSError, ValueError):
            digest.update(b"unreadable\0")
        finally:
            if fd is not None:
                os.close(fd)
    return digest.hexdigest()


def stamped_bytes(binary: Path, inputs: str) -> bytes | None:
    """The bytes of `binary`, read once, when it is a regular file (not through a symbolic link) whose sha256 and
    inputs (`csim_inputs`) are those its stamp records; None otherwise."""
    try:
        stamp = stamp_path(binary).read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return None
    fd = _open_regular(binary)
    if fd is None:
        return None
    try:
        content = _read_all(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    digest = hashlib.sha256(content).hexdigest()
    if len(stamp) == 2 and secrets.compare_digest(stamp[1], inputs) and secrets.compare_digest(stamp[0], digest):
        return content
    return None


def open_stamped(binary: Path, inputs: str) -> int | None:
    """A read-only descriptor to execute (as /proc/self/fd/N) holding exactly the bytes of `binary` that matched
    its stamp (`stamped_bytes`): a sealed in-memory copy, which no later change of the file reaches; None when
    the binary does not match. Where memfd_create or /proc is missing, the binary's own descriptor (opened after
    the check)."""
    content = stamped_bytes(binary, inputs)
    if content is None:
        return None
    if not hasattr(os, "memfd_create") or not os.path.isdir("/proc/self/fd"):
        return _open_regular(binary)
    return _sealed_copy(content, binary.name)


def _sealed_copy(content: bytes, name: str) -> int:
    """A read-only descriptor of a new in-memory file holding `content`, sealed against any change."""
    import fcntl

    writable = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(writable, view):]
        fcntl.fcntl(writable, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
        # executed through a read-only descriptor: one open for writing would make exec fail (ETXTBSY)
        return os.open(f"/proc/self/fd/{writable}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(writable)


def _open_regular(path: Path, follow_symlinks: bool = False) -> int | None:
    """A read-only descriptor of `path` when it is a regular file (opened without blocking: a FIFO is refused, not
    waited on), else None."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    if stat.S_ISREG(os.fstat(fd).st_mode):
        return fd
    os.close(fd)
    return None


def _read_all(fd: int) -> bytes:
    chunks, offset = [], 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _write_stamp(binary: Path, binary_digest: str, inputs: str) -> None:
    """The stamp, written atomically (a reader finds none or the whole one) through a staging file created anew
    (O_EXCL), so a file planted at its name is replaced, never written through."""
    stamp = stamp_path(binary)
    staging = stamp.with_name(f".{stamp.name}.{os.getpid()}")
    try:
        staging.unlink(missing_ok=True)
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "w", encoding="ascii") as file:
            file.write(f"{binary_digest} {inputs}\n")
        staging.replace(stamp)
    except OSError as exc:
        raise DeployError(f"cannot write {stamp} ({exc.strerror or exc}): copy the build to a directory you can "
                          "write in") from None
    finally:
        staging.unlink(missing_ok=True)


def compile_program(sources: list, includes: list, flags: tuple, binary: Path, seconds: float | None = None) -> None:
    """g++ (or $CXX) `sources` into `binary`, atomically: whoever runs it meanwhile finds no binary or a
    complete one, and a failed, interrupted or (after `seconds`) stopped compile leaves none.

    The compiler runs in a process group of its own with a private TMPDIR (and -pipe): on any exception,
    KeyboardInterrupt and ming's Interrupted included, the whole group (cc1plus, as, ld) is killed and
    waited for, and the staging binary and the temporary directory are removed."""
    compiler = shutil.which(os.environ.get("CXX", "g++"))
    if compiler is None:
        raise DeployError("no C++ compiler found; install g++ (or set CXX)")
    binary = Path(binary)
    staging = binary.with_name(f".{binary.name}.{os.getpid()}")
    try:
        binary.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755))
    except OSError as exc:
        raise DeployError(f"cannot write the C-simulation binary in {binary.parent} ({exc.strerror or exc}): "
                          "copy the build to a directory you can write in") from None
    process = temporary = None
    try:
        temporary = tempfile.mkdtemp(prefix="ming-cxx-")
        command = [compiler, "-pipe", *flags, *(f"-I{d}" for d in includes), *map(str, sources), "-o", str(staging)]
        # SIGINT/SIGTERM held back while Popen starts the compiler (an exception inside Popen would lose the
        # child), delivered once `process` is known; the compiler itself starts with them unblocked.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       start_new_session=True, env=os.environ | {"TMPDIR": temporary},
                                       preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK, held))
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        try:
            _, stderr = process.communicate(timeout=seconds)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            raise DeployError(f"compiling {binary.name} took more than {seconds:g} s; stopped") from None
        if process.returncode != 0:
            if "No space left on device" in stderr:
                raise DeployError(f"no space left on the device while compiling {binary.name} (in "
                                  f"{binary.parent} or the temporary directory); free some space and run again")
            first = next((line for line in stderr.splitlines() if "error" in line), stderr[:200])
            raise DeployError(f"the generated C++ did not compile: {first.strip()}")
        staging.replace(binary)
    except BaseException:
        if process is not None and process.returncode is None:
            _kill_group(process)
        raise
    finally:
        staging.unlink(missing_ok=True)
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _kill_group(process: subprocess.Popen) -> None:
    """Kill `process` and every process of its group (it leads one: start_new_session), and reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    while True:
        try:
            process.wait()
            break
        except BaseException:  # a second interrupt while reaping: reap anyway, the first one propagates
            continue
