"""A build checks itself: the C++ it emits is compiled and C-simulated, concurrently over FIFOs of the built
depths, on the sample image and on an image at the ends of the int8 range, and every output value is compared
with the golden model (`ming reference`). A difference, a deadlock or a wrong AXI4-Stream framing stops the
build: nothing is installed at OUT.

The run is bounded: compile and images together within `MING_VERIFY_SECONDS` (default 900 s).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .csim import DEADLOCK_EXIT_CODE, csim_command, deadlock_from, open_csim
from .dataflow import StreamGraph
from .emit.identifiers import cpp_names
from .errors import MingError
from .progress import Progress
from .sample import extreme_input, sample_input

SECONDS_VARIABLE = "MING_VERIFY_SECONDS"
DEFAULT_SECONDS = 900.0

# The images a build is verified on: name in report.json -> (what it is, the graph input it is).
IMAGES = {"sample": ("hls/input.bin: int8 values uniform over the range (seed 0)", sample_input),
          "extremes": ("int8 extremes: a third of the values 127, a third -128, a third either at random",
                       extreme_input)}


class VerificationFailed(MingError):
    """The emitted C++ does not compute what the golden model computes (or deadlocks, or frames its output
    wrongly): the build stops with exit code 3."""

    exit_code = 3


@dataclass(frozen=True)
class ImageCheck:
    image: str  # a key of IMAGES
    values: int  # output values compared
    differing: int  # of them, how many differ (all of them when the run failed)
    problem: str = ""  # the first difference, or why the run failed; "" when every value is equal

    @property
    def equal(self) -> bool:
        return not self.problem


@dataclass(frozen=True)
class Verification:
    checks: tuple[ImageCheck, ...]
    located: str = ""  # where the first differing stream is (`ming_py.trace`), when the values differ

    @property
    def equal(self) -> bool:
        return all(check.equal for check in self.checks)

    def as_report(self) -> dict:
        """report.json's "verification"."""
        return {"verified": True, "equal": self.equal, "values": sum(c.values for c in self.checks),
                "images": [{"name": c.image, "input": IMAGES[c.image][0], "values": c.values, "differing": c.differing,
                            "equal": c.equal} | ({"first_difference": c.problem} if c.problem else {})
                           for c in self.checks]} | ({"located": self.located} if self.located else {})

    def failure(self) -> str:
        """One line: the first image that failed, what differs, and where."""
        check = next(c for c in self.checks if not c.equal)
        where = f"; {self.located}" if self.located else ""
        return (f"the generated C++ does not compute what ming reference computes: image '{check.image}': "
                f"{check.problem}{where}")


NOT_VERIFIED = {"verified": False, "reason": "built with --no-verify: the C++ was not C-simulated"}


def verify_seconds() -> float:
    text = os.environ.get(SECONDS_VARIABLE)
    if text is None:
        return DEFAULT_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds <= 86400:
        raise MingError(f"{SECONDS_VARIABLE}={text!r}: give the seconds the build's verification may take "
                        "(more than 0, at most 86400)")
    return seconds


def verify_design(design, progress: Progress, seconds: float | None = None) -> Verification:
    """C-simulate `design` (a `ming_py.steps.Design`) on the sample and the extreme image and compare every output
    value with the golden model's (the saved design's images); where the values differ and the design has its
    graph, the first differing stream is located."""
    seconds = verify_seconds() if seconds is None else seconds
    deadline = time.monotonic() + seconds
    graph, stream_graph = design.graph, design.stream_graph
    images = {name: (design.saved.images[name].raw_input, design.saved.images[name].expected) for name in IMAGES}
    model = cpp_names(stream_graph).model
    with tempfile.TemporaryDirectory(prefix="ming-verify-") as tmp:
        hls = Path(tmp) / "hls"
        hls.mkdir()
        for name, content in design.files.items():
            if name.startswith("hls/"):
                (hls / name.removeprefix("hls/")).write_bytes(content if isinstance(content, bytes) else
                                                              content.encode())
        binary, fd = open_csim(hls, model, progress, concurrent=True, seconds=_left(deadline, seconds))
        try:
            with progress.step(f"verifying the C++: C-simulation of {len(images)} images against ming reference"):
                checks = tuple(_check_image(name, raw_input, expected, stream_graph, binary, fd, Path(tmp),
                                            _left(deadline, seconds), seconds)
                               for name, (raw_input, expected) in images.items())
        finally:
            os.close(fd)
        verification = Verification(checks)
        if verification.equal:
            return verification
        if graph is None:  # emitted from a saved design: no golden model to trace against
            return verification
        first = next(check.image for check in checks if not check.equal)
        _left(deadline, seconds)
        return Verification(checks, _locate(hls, model, design, IMAGES[first][1](graph), progress))


def _left(deadline: float, seconds: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise _too_long(seconds)
    return left


def _too_long(seconds: float) -> MingError:
    return MingError(f"the build's verification took more than {seconds:g} s ({SECONDS_VARIABLE}); raise it, or "
                     "build with --no-verify and run `ming csim` yourself")


def _check_image(image: str, raw_input: bytes, expected: bytes, stream_graph: StreamGraph, binary: Path, fd: int,
                 tmp: Path, seconds: float, budget: float) -> ImageCheck:
    in_file, out_file = tmp / f"{image}.in.bin", tmp / f"{image}.out.bin"
    in_file.write_bytes(raw_input)
    command, how = csim_command(binary, fd, tmp / "hls")
    try:
        result = subprocess.run([*command, str(in_file), str(out_file)], capture_output=True, text=True,
                                timeout=seconds, **how)
    except subprocess.TimeoutExpired:
        raise _too_long(budget) from None
    values = len(expected)
    if result.returncode == DEADLOCK_EXIT_CODE:
        blocked = deadlock_from(result.stderr).report
        first = f": {len(blocked)} processes blocked, first {blocked[0].strip()}" if blocked else ""
        return ImageCheck(image, values, values, f"the concurrent C-simulation deadlocks{first} (`ming csim` on the "
                          "kept design lists them all)")
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["(no message)"])[-1]
        return ImageCheck(image, values, values, f"the C-simulation failed: {last}")
    got = np.frombuffer(out_file.read_bytes(), dtype=np.int8)
    want = np.frombuffer(expected, dtype=np.int8)
    differing = np.flatnonzero(got != want)
    if not differing.size:
        return ImageCheck(image, values, 0)
    index = int(differing[0])
    return ImageCheck(image, values, int(differing.size),
                      f"{differing.size} of {values} output values differ (first: {_record_place(stream_graph, index)}: "
                      f"expected {want[index]}, got {got[index]})")


def _record_place(stream_graph: StreamGraph, index: int) -> str:
    """Where value `index` of an output record is: the output, its row, column and channel."""
    for port in stream_graph.outputs:
        c = stream_graph.channels[port.channel]
        if index < c.values:
            pixel, channel = divmod(index, c.channels)
            row, column = divmod(pixel, c.width)
            return f"output '{port.onnx_name}' row {row}, column {column}, channel {channel}"
        index -= c.values
    return f"value {index} past the record"


def _locate(hls: Path, model: str, design, q: np.ndarray, progress: Progress) -> str:
    """The first stream whose tokens differ from the golden model's tensor for the graph input `q`, as one phrase
    ("" if none does)."""
    from .trace import locate

    try:
        divergence = locate(hls, model, design.graph, design.stream_graph, q, progress)
    except MingError as failure:  # the traced run failed where every stream it wrote is right
        return f"the traced C-simulation: {failure}"
    return f"first differing stream: {divergence}" if divergence is not None else ""
