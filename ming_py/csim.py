"""`ming csim`: compile the generated C++ with g++ (cached by content) and run it on a float input.

The host side does exactly what the deployed system does: quantize the float
input, reorder it to the stream's raster order (row, column, channel), run the
accelerator, reorder the output back and run the host tail (e.g. Softmax).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from .ir import MingError
from .options import build_metadata, check_input
from .cache import private_dir
from .progress import Progress
from .runtime import ming_host
from .runtime.ming_driver import CSIM_FLAGS, DeployError, Port, compile_program

CXX_FLAGS = CSIM_FLAGS + ("-Wall", "-Wextra")
# Concurrent C-simulation: one thread per dataflow process, FIFOs bounded by their depth
# (see ming_hls_stream.h); the binary exits with DEADLOCK_EXIT_CODE and a report on a deadlock.
CONCURRENT_FLAGS = ("-DMING_CSIM_CONCURRENT", "-pthread")
DEADLOCK_EXIT_CODE = 3
# The port check (see ming_check.h): a pipelined iteration needing more memory or stream ports than
# the pragmas give ends the binary with PORT_CONFLICT_EXIT_CODE and one "ming port check:" line.
CHECK_PORTS_FLAGS = ("-DMING_CHECK_PORTS",)
PORT_CONFLICT_EXIT_CODE = 3
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


def cache_dir() -> Path:
    return private_dir("csim")


def compile_csim(hls_dir: Path, model: str, progress: Progress, concurrent: bool = False,
                 check_ports: bool = False) -> Path:
    """The testbench binary for `hls_dir`, compiled once per distinct source tree and mode."""
    flags = CXX_FLAGS + (CONCURRENT_FLAGS if concurrent else ()) + (CHECK_PORTS_FLAGS if check_ports else ())
    sources = sorted(p for p in hls_dir.iterdir() if p.suffix in (".cpp", ".h"))
    digest = hashlib.sha256(" ".join(flags).encode())
    for path in sources:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    binary = cache_dir() / digest.hexdigest()[:24] / f"{model}_csim"
    if binary.exists():
        progress.note(f"using the cached C-simulation binary {binary}")
        return binary
    modes = [name for name, on in (("concurrent", concurrent), ("port check", check_ports)) if on]
    mode = f" ({', '.join(modes)})" if modes else ""
    with progress.step(f"compiling the C-simulation{mode} with {os.environ.get('CXX', 'g++')}"):
        try:
            compile_program([hls_dir / f"{model}.cpp", hls_dir / f"{model}_tb.cpp"], [hls_dir], flags, binary)
        except DeployError as exc:
            raise MingError(str(exc)) from None
    return binary


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
        nodes = json.loads((out_dir / "report.json").read_text(encoding="utf-8")).get("nodes", [])
    except (OSError, ValueError):
        return cpp_name
    return next((n["name"] for n in nodes if isinstance(n, dict) and n.get("cpp_name") == cpp_name), cpp_name)


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
    """C-simulate the build in `out_dir` on the float input `x`: the model's outputs by name, in the model's
    order, as `ming reference` gives them.

    concurrent=False: Vitis-style sequential csim (processes one after another, unbounded FIFOs).
    concurrent=True: one thread per process over FIFOs of the scheduled depth; a deadlock
    raises CsimDeadlock (the binary reports it within about MING_CSIM_DEADLOCK_SECONDS).
    check_ports=True: also check that no pipelined iteration needs more ports of an array or a
    stream than the pragmas give (see ming_check.h); the first conflict raises PortConflict.
    """
    progress = progress or Progress(quiet=True)
    out_dir = Path(out_dir)
    host = build_metadata(out_dir)
    inp = host["input"]
    x = np.asarray(x)
    if inp["dtype"] == "float32" and x.dtype.kind == "f":
        x = x.astype(np.float32)
    check_input(x, inp["onnx_shape"], inp["dtype"])
    binary = compile_csim(out_dir / "hls", host["model"], progress, concurrent, check_ports)
    q = ming_host.accelerator_input(x, Port.of(inp))
    with tempfile.TemporaryDirectory() as tmp:
        in_file, out_file = Path(tmp) / "input.bin", Path(tmp) / "output.bin"
        to_stream_order(q, inp["stream_shape"]).astype(np.int8).tofile(in_file)
        with progress.step("running the C-simulation"):
            result = subprocess.run([str(binary), str(in_file), str(out_file)], capture_output=True, text=True)
        conflict = port_conflict_from(result.stderr, out_dir) if check_ports else None
        if conflict is not None and result.returncode == PORT_CONFLICT_EXIT_CODE:
            raise conflict
        if result.returncode == DEADLOCK_EXIT_CODE:
            raise deadlock_from(result.stderr)
        if result.returncode != 0:
            raise MingError(f"C-simulation failed: {(result.stderr.strip().splitlines() or ['(no message)'])[-1]}")
        values = np.fromfile(out_file, dtype=np.int8).astype(np.int64)
    return split_record(values, [Port.of(out) for out in host["outputs"]])


def split_record(values: np.ndarray, ports: list[Port]) -> dict[str, np.ndarray]:
    """The model's outputs (by name, in the model's order) from one image's output values: each output's in
    turn, in the record's order (`ports`)."""
    outputs, first = {}, 0
    for port in ports:
        y = from_stream_order(values[first:first + port.values], port.stream_shape).reshape(port.array_shape)
        outputs[port.onnx_name] = ming_host.model_output(y, port)
        first += port.values
    return {port.onnx_name: outputs[port.onnx_name] for port in sorted(ports, key=lambda port: port.index)}
