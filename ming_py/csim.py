"""`ming csim`: compile the generated C++ with g++ (cached by content) and run it on a float input.

The host side does exactly what the deployed system does: quantize the float
input, reorder it to the stream's raster order (row, column, channel), run the
accelerator, reorder the output back and run the host tail (e.g. Softmax).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from . import numerics, reference
from .ir import HostOp, MingError
from .options import build_metadata, check_input
from .output import cache_root
from .progress import Progress

CXX_FLAGS = ("-std=c++17", "-O2", "-Wall", "-Wextra")
# Concurrent C-simulation: one thread per dataflow process, FIFOs bounded by their depth
# (see hls_stream.h); the binary exits with DEADLOCK_EXIT_CODE and a report on a deadlock.
CONCURRENT_FLAGS = ("-DMING_CSIM_CONCURRENT", "-pthread")
DEADLOCK_EXIT_CODE = 3


class CsimDeadlock(MingError):
    """The concurrent C-simulation deadlocked: every process waits on a FIFO.

    `report` holds one line per blocked process, e.g.
    "  split waits to write to split_to_add (full, 1/1)".
    """

    def __init__(self, message: str, report: list[str]):
        super().__init__(message)
        self.report = report


def cache_dir() -> Path:
    return cache_root() / "csim"


def compile_csim(hls_dir: Path, model: str, progress: Progress, concurrent: bool = False) -> Path:
    """The testbench binary for `hls_dir`, compiled once per distinct source tree and mode."""
    flags = (CXX_FLAGS + CONCURRENT_FLAGS) if concurrent else CXX_FLAGS
    sources = sorted(p for p in hls_dir.iterdir() if p.suffix in (".cpp", ".h"))
    digest = hashlib.sha256(" ".join(flags).encode())
    for path in sources:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    binary = cache_dir() / digest.hexdigest()[:24] / f"{model}_csim"
    if binary.exists():
        progress.note(f"using the cached C-simulation binary {binary}")
        return binary
    compiler = shutil.which(os.environ.get("CXX", "g++"))
    if compiler is None:
        raise MingError("no C++ compiler found; install g++ (or set CXX)")
    binary.parent.mkdir(parents=True, exist_ok=True)
    staging = binary.with_suffix(f".tmp{os.getpid()}")
    mode = " (concurrent)" if concurrent else ""
    try:
        with progress.step(f"compiling the C-simulation{mode} with {Path(compiler).name}"):
            result = subprocess.run([compiler, *flags, "-I", str(hls_dir), str(hls_dir / f"{model}.cpp"),
                                     str(hls_dir / f"{model}_tb.cpp"), "-o", str(staging)],
                                    capture_output=True, text=True)
        if result.returncode != 0:
            first = next((line for line in result.stderr.splitlines() if "error" in line), result.stderr[:200])
            raise MingError(f"the generated C++ did not compile: {first.strip()}")
        staging.rename(binary)  # atomic: a concurrent csim sees no binary or a complete one
    finally:
        staging.unlink(missing_ok=True)  # an interrupted or failed compile leaves nothing in the cache
    return binary


def to_stream_order(array: np.ndarray, stream_shape: list[int]) -> np.ndarray:
    """(C, H, W) array -> values in raster order (row, column, channel)."""
    return array.reshape(stream_shape).transpose(1, 2, 0).reshape(-1)


def from_stream_order(values: np.ndarray, stream_shape: list[int]) -> np.ndarray:
    c, h, w = stream_shape
    return values.reshape(h, w, c).transpose(2, 0, 1)


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


def run_csim(out_dir: str | Path, x: np.ndarray, progress: Progress | None = None,
             concurrent: bool = False) -> np.ndarray:
    """C-simulate the build in `out_dir` on the float input `x`.

    concurrent=False: Vitis-style sequential csim (processes one after another, unbounded FIFOs).
    concurrent=True: one thread per process over FIFOs of the scheduled depth; a deadlock
    raises CsimDeadlock (the binary reports it within about MING_CSIM_DEADLOCK_SECONDS).
    """
    progress = progress or Progress(quiet=True)
    out_dir = Path(out_dir)
    host = build_metadata(out_dir)
    inp, out = host["input"], host["output"]
    x = np.asarray(x, dtype=np.float32)
    check_input(x, inp["onnx_shape"])
    binary = compile_csim(out_dir / "hls", host["model"], progress, concurrent)
    q = numerics.ort_quantize_linear(x, inp["scale"], inp["zero_point"]).astype(np.int8)
    with tempfile.TemporaryDirectory() as tmp:
        in_file, out_file = Path(tmp) / "input.bin", Path(tmp) / "output.bin"
        to_stream_order(q, inp["stream_shape"]).astype(np.int8).tofile(in_file)
        with progress.step("running the C-simulation"):
            result = subprocess.run([str(binary), str(in_file), str(out_file)], capture_output=True, text=True)
        if result.returncode == DEADLOCK_EXIT_CODE:
            raise deadlock_from(result.stderr)
        if result.returncode != 0:
            raise MingError(f"C-simulation failed: {(result.stderr.strip().splitlines() or ['(no message)'])[-1]}")
        values = np.fromfile(out_file, dtype=np.int8).astype(np.int64)
    y = from_stream_order(values, out["stream_shape"]).reshape(out["array_shape"])
    ops = tuple(HostOp(op["kind"], op["axis"], op["scale"], op["zero_point"], tuple(op["shape"]))
                for op in out["host_ops"])
    return reference.host_tail(y, out["scale"], out["zero_point"], ops).reshape(out["onnx_shape"])
