"""Run a frontend tool (the TFLite -> TOSA converter, iree-compile, LiteRT's kernels filling TFLite's tables) in
a child process with bounds.

These tools are native code that a malformed model can crash (SIGSEGV inside the TOSA
converter), loop in or blow up in memory. Each runs in its own process, so that ming
survives any of these and reports one line naming the model and what to do:

  MING_IMPORT_MEMORY_MB  the child's address-space limit (RLIMIT_AS) in MiB; default half the
                         physical memory, at least 4096 and at most 32768. A small int8 CNN converts in
                         under 512 MiB of address space (iree-compile's thread stacks and malloc arenas
                         included; it needs more on machines with many cores, hence the floor); the bound
                         keeps a runaway conversion away from the OOM killer and swap.
  MING_IMPORT_SECONDS    the child's wall-clock limit in seconds; default 600. MLPerf Tiny-sized models
                         convert in seconds; the bound ends a hung conversion.

An address-space limit ming inherits (`ulimit -v`, `prlimit --as`) caps the child's: a process cannot
raise its limits past the hard one it was given, and ming keeps within the soft one it was started under.

The child's stderr (MLIR diagnostics included) is captured and never reaches ming's own
stderr; a failure is reported by its first error line, without MLIR `loc(...)` prefixes.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
from collections.abc import Callable

from ming_py.errors import MingError

MEMORY_VARIABLE = "MING_IMPORT_MEMORY_MB"
SECONDS_VARIABLE = "MING_IMPORT_SECONDS"
DEFAULT_SECONDS = 600
# what a tool says when the address-space limit stops it (an allocation, a thread stack, a library mapping)
_OUT_OF_MEMORY = ("MemoryError", "bad_alloc", "out of memory", "Cannot allocate memory", "failed to allocate",
                  "pthread_create failed", "failed to map segment", "Resource temporarily unavailable")
# what to do when a tool fails on a model ming rewrote
_REPORT = ("please report it to the ming developers with the model; meanwhile, a model exported with a static "
           "batch of 1 and static shapes needs less of that rewrite")
_LOCATION = re.compile(r'^\s*loc\((?:"([^"]*)")?.*?\):\s*')


def _default_memory_mb() -> int:
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2 ** 20
    except (ValueError, OSError):
        physical = 8192
    return min(max(physical // 2, 4096), 32768)


def _positive(variable: str, default: int) -> int:
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise MingError(f"{variable}={text!r} is not a positive whole number; unset it or set e.g. "
                        f"{variable}={default}")
    return value


def memory_mb() -> int:
    """The child's address-space limit in MiB: the one asked for (or the default), within the inherited one."""
    return clamp_to_inherited(_positive(MEMORY_VARIABLE, _default_memory_mb()),
                              resource.getrlimit(resource.RLIMIT_AS))


def clamp_to_inherited(memory: int, inherited: tuple[int, int]) -> int:
    """`memory` MiB, lowered to the inherited (soft, hard) RLIMIT_AS in bytes where that is lower."""
    bounds = [limit // 2 ** 20 for limit in inherited if limit != resource.RLIM_INFINITY]
    return min([memory, *bounds])


def seconds() -> int:
    return _positive(SECONDS_VARIABLE, DEFAULT_SECONDS)


def _limit(memory: int):
    def apply() -> None:  # in the child, before exec
        resource.setrlimit(resource.RLIMIT_AS, (memory * 2 ** 20, memory * 2 ** 20))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash leaves no core file behind
    return apply


def first_error(stderr: str) -> str:
    """The first error line of a tool's stderr, its MLIR location reduced to the node name it carries."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    line = next((line for line in lines if "error" in line.lower()), lines[-1] if lines else "")
    match = _LOCATION.match(line)
    if match:
        name = match.group(1)
        line = line[match.end():].removeprefix("error: ")
        if name and "/" not in name and not name.endswith((".tflite", ".onnx", ".mlir")):
            line = f"at '{name}': {line}"
    elif ": error: " in line:  # "<stdin>:3:5: error: ...", "-:3:5: error: ..." or "conv1: error: ..."
        where, line = line.split(": error: ", 1)
        if where and not re.search(r"(^<stdin>|^-|:\d+:\d+)$", where) and "/" not in where:
            line = f"at '{where.strip(chr(34))}': {line}"
    line = line.removeprefix("error: ")
    return line[:200]


def run(command: list[str], what: str, model: str, stdin: bytes = b"",
        site: Callable[[str], str | None] | None = None, rewritten: str = "") -> bytes:
    """`command`'s stdout; a crash, the time or memory bound, or a failure as one MingError line. `site` reads
    from the child's stderr where it was (a node it names), which then starts the line. `rewritten`: what ming
    changed in the model before the tool read it (nothing: the tool read the model as the user wrote it); a
    crash or failure on a rewritten model says so and does not blame the model."""
    memory, limit = memory_mb(), seconds()
    try:
        result = subprocess.run(command, input=stdin, capture_output=True, timeout=limit,
                                preexec_fn=_limit(memory))
    except subprocess.TimeoutExpired as exc:
        raise MingError(_at(site, exc.stderr) + f"{what} did not finish {model} within {limit} s; if the model is "
                        f"large, allow more with {SECONDS_VARIABLE}=<seconds>") from None
    except OSError as exc:
        raise MingError(f"cannot run {what} ({exc.strerror or exc}); reinstall ming's dependencies") from None
    if result.returncode == 0:
        return result.stdout
    stderr = result.stderr.decode(errors="replace")
    at = _at(site, result.stderr)
    if any(marker in stderr for marker in _OUT_OF_MEMORY):
        raise MingError(f"{at}{what} ran out of memory on {model} (limit {memory} MiB); if the model is large, "
                        f"allow more with {MEMORY_VARIABLE}=<MiB>")
    if result.returncode < 0 and rewritten:
        name = signal.Signals(-result.returncode).name.removeprefix("SIG")
        raise MingError(f"{at}{what} crashed (signal {name}) on ming's rewrite of {model}, not on the model as "
                        f"written: ming {rewritten} before the conversion; {_REPORT}")
    if rewritten:
        raise MingError(f"{at}{what} failed on ming's rewrite of {model} ({first_error(stderr) or f'exit status {result.returncode}'}); "
                        f"ming {rewritten} before the conversion; {_REPORT}")
    if result.returncode < 0:
        name = signal.Signals(-result.returncode).name.removeprefix("SIG")
        raise MingError(f"{at}{what} crashed on {model} (signal {name}); the model is probably malformed: check "
                        f"that its framework loads it, or, if it is large, allow more memory with "
                        f"{MEMORY_VARIABLE}=<MiB> (now {memory})")
    raise MingError(f"{at}{what} failed on {model}: {first_error(stderr) or f'exit status {result.returncode}'}")


def _at(site: Callable[[str], str | None] | None, stderr: bytes | None) -> str:
    where = site((stderr or b"").decode(errors="replace")) if site is not None else None
    return f"{where}: " if where else ""
