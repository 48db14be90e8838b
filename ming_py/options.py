"""Checks of what the user gives on the command line, made before any slow work (the model import, g++).

Every check raises MingError with one line that names the option or file and says what to do.
"""

from __future__ import annotations

import math
import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ming_py.boards import Board, check_clock, load_board
from ming_py.ilp.budget import OPTIONS, Budget
from ming_py.ilp.pins import check_key, check_value

from .calibration import Calibration
from .errors import MingError
from .contract.ming_json import read_json
from .model_files import foreign_model_problem
from .contract import accelerator_schema, ming_host, ming_npy
from .contract.ming_errors import DeployError

# The board database gives no fabric maximum; HLS tools accept any period, so this only refuses nonsense.
CLOCK_MHZ = (1.0, 1000.0)
OBJECTIVES = ("frugal", "latency", "sum")
TARGET_OPTIONS = {"fps": "--target-fps", "latency_us": "--target-latency-us"}
# The targets' range, in images per second and in microseconds: at the fastest --clock (1000 MHz) either end
# implies at most 1e15 cycles (an interval or a latency), a whole number a double still holds exactly (< 2**53);
# 1e-6 fps is an image every 11.6 days and 1e12 fps a thousand per cycle, so no design is refused for the range.
TARGET_RANGE = (1e-6, 1e12)


@dataclass(frozen=True)
class BuildOptions:
    """What a user chooses for a build besides the model."""

    board: str = "kv260"
    limits: dict[str, str | None] = field(default_factory=dict)  # resource -> "N" | "P%"
    objective: str = "frugal"
    settings: dict[str, int | str] = field(default_factory=dict)  # pins (ilp.pins): PROCESS.unroll.LOOP, ...
    clock_mhz: float | None = None
    minimal_fifos: bool = False  # shrink FIFOs to the least depth that keeps the simulated latency
    calibration: Calibration | None = None  # per-primitive resource factors (`ming compare --write-calibration`)
    target_fps: float | None = None  # images per second the design must sustain (its steady-state interval)
    target_latency_us: float | None = None  # the longest an image may take through the design
    name: str | None = None  # the design's name (top function, files, IP, bitstream); default: the model file's
    narrow_requant: bool = True  # TFLite's requantization by the proved narrow datapath (False: as written)


def clock_mhz(value: str | float | None) -> float | None:
    """The --clock value in MHz: a finite number within CLOCK_MHZ, or None for the board's clock."""
    if value is None:
        return None
    low, high = CLOCK_MHZ
    shown = str(value).strip() or "''"
    try:
        mhz = float(value)
    except (TypeError, ValueError):
        mhz = math.nan
    if isinstance(value, bool) or not low <= mhz <= high:  # also false for NaN
        raise MingError(f"--clock {shown}: give the clock in MHz, a number from {low:g} to {high:g}")
    return mhz


def target_board(options) -> Board:
    """The board of a BuildOptions, at the options' clock (checked) where one is given."""
    board = load_board(options.board)
    mhz = clock_mhz(options.clock_mhz)
    return board if mhz is None else replace(board, clock_mhz=mhz)


def check_design(options) -> Board:
    """The board of a BuildOptions after checking its budget, clock, objective and settings' form."""
    board = target_board(options)
    check_clock(board)
    Budget.of(board, options.limits)
    if options.objective not in OBJECTIVES:
        raise MingError(f"--objective {options.objective}: choose {' or '.join(OBJECTIVES)}")
    for key, value in options.settings.items():
        check_key(key, "settings")
        check_value(key, value, "settings")
    for name, option in TARGET_OPTIONS.items():
        target(getattr(options, f"target_{name}"), option)
    return board


def design_name(value: str | None) -> str | None:
    """A --name value: letters, digits and _ - . (the file and identifier it names are made of it), or None."""
    if value is None:
        return None
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", value) or not re.search(r"[A-Za-z0-9]", value):
        raise MingError(f"--name {value!r}: give 1 to 64 letters, digits, _, - or ., e.g. --name kws_v2")
    return value


def target(value: str | float | None, option: str) -> float | None:
    """A --target-fps / --target-latency-us value: a number within TARGET_RANGE, or None."""
    if value is None:
        return None
    shown = str(value).strip()[:40] or "''"
    number = bounded_number(value, *TARGET_RANGE)
    if number is None:
        low, high = TARGET_RANGE
        raise MingError(f"{option} {shown}: give a positive number from {low:g} to {high:g}, e.g. {option} 1000")
    return number


def bounded_number(value, low: float, high: float) -> float | None:
    """`value` (a number, or its text) as a float when it lies within [low, high]; None otherwise (not a number,
    NaN, or out of range, however many digits it has: the range is checked before any conversion can overflow)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)  # text never overflows: a huge figure reads as inf
        except ValueError:
            return None
    if not isinstance(value, (int, float, np.integer, np.floating)) or not low <= value <= high:  # NaN fails too
        return None
    return float(value)


def target_list(spec: str | None, option: str) -> list[float | None]:
    """`ming sweep`'s comma-separated targets ("100,1000,10000"), each checked; [None] when not given."""
    if spec is None:
        return [None]
    values = str(spec).split(",")
    if any(not v.strip() for v in values):
        raise MingError(f"{option} {spec}: an empty target in the list; separate targets by single commas, "
                        "e.g. 100,1000,10000")
    return [target(v.strip(), option) for v in values]


def check_budget_lists(board: Board, lists: dict[str, str | None]) -> None:
    """Every budget of `ming sweep`'s comma-separated lists (resource -> "5%,20%,100%")."""
    for resource, spec in lists.items():
        if spec is None:
            continue
        values = str(spec).split(",")
        if any(not v.strip() for v in values):
            raise MingError(f"{OPTIONS[resource]} {spec}: an empty budget in the list; separate budgets by single "
                            "commas, e.g. 5%,20%,100%")
        for value in values:
            Budget.of(board, {resource: value})


def check_model(path: Path) -> None:
    """`path` is a file, and not a model ming does not take (Keras, PyTorch, TensorFlow: `model_files`)."""
    problem = foreign_model_problem(path)
    if problem:
        raise MingError(problem)
    if Path(path).is_dir():
        raise MingError(f"{path}: is a directory; pass the path of an int8 QDQ .onnx or int8 .tflite model")
    if not Path(path).is_file():
        raise MingError(f"{path}: file not found; pass the path of an int8 QDQ .onnx or int8 .tflite model")


def check_output_file(path: Path) -> None:
    """`path` can be written: not a directory or a symbolic link (the driver's rule: outputs are renamed into
    place, never written through a link), in an existing directory ming may write in."""
    path = Path(path)
    try:
        ming_npy.check_destination(path)
    except DeployError as exc:
        raise MingError(str(exc)) from None
    directory = path.parent
    if directory.exists() and not directory.is_dir():
        raise MingError(f"--output {path}: {directory} is not a directory")
    if not directory.is_dir():
        raise MingError(f"--output {path}: the directory {directory} does not exist; create it first")
    problem = _write_problem(directory)
    if problem:
        raise MingError(f"--output {path}: cannot write in {directory} ({problem})")


def _write_problem(directory: Path) -> str | None:
    """Why no file can be created in `directory` (tried, since permissions alone miss read-only mounts)."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


def load_input(path: Path, port=None) -> np.ndarray:
    """The array in the .npy file `path`, as the model's runtime takes it: float32 (no NaN or Inf), or int8 or
    uint8 for a model whose input is int8 or uint8, and not empty. The policy is the deployment driver's
    (`ming_npy.load_input`), so `ming reference`, `ming csim` and OUT/deploy/run.py refuse the same files;
    given the model's input `port` (a Port or GraphInput), an integer array it does not take is refused with
    the conversion it takes."""
    try:
        return ming_npy.load_input(path, port)
    except DeployError as exc:
        raise MingError(str(exc)) from None


def check_finite(x: np.ndarray, where: str | None = None) -> None:
    bad = int(np.size(x) - np.count_nonzero(np.isfinite(x)))
    if bad:
        prefix = f"{where}: " if where else ""
        raise MingError(f"{prefix}input has {bad} non-finite values (NaN or Inf); int8 quantization needs finite "
                        "inputs")


def check_output_files(paths: list[Path]) -> None:
    """Every `--output` can be written (`check_output_file`)."""
    for path in paths:
        check_output_file(path)


def check_output_count(paths: list[Path], names: list[str]) -> None:
    """`--output` once per model output (`names`, in the model's order) or once as an .npz archive."""
    try:
        ming_npy.check_output_paths(paths, names)
    except DeployError as exc:
        raise MingError(str(exc)) from None


def save_outputs(paths: list[Path], outputs: dict[str, np.ndarray]) -> None:
    """The model's outputs (float32, or int8/uint8 as the model gives them) to the `--output` paths, one .npy per
    output in the model's order or one .npz archive of all."""
    arrays = {name: y if y.dtype in (np.int8, np.uint8) else y.astype(np.float32) for name, y in outputs.items()}
    try:  # atomically: a temporary file beside each path, renamed into place (see ming_npy.save_outputs)
        ming_npy.save_outputs(paths, arrays)
    except DeployError as exc:
        raise MingError(str(exc)) from None


def check_input(x: np.ndarray, port) -> None:
    """`x` has the shape of the model's input `port` (a GraphInput or a Port) and an element type it takes: float
    (finite values; quantized by the model, or by the host as TFLite's QUANTIZE does for a model whose input is
    int8 or uint8), or the model's own int8/uint8 (`ming_host.input_type_problem`)."""
    if list(x.shape) != list(port.onnx_shape):
        raise MingError(f"input has shape {tuple(x.shape)}, the model takes {tuple(port.onnx_shape)}")
    problem = ming_host.input_type_problem(x, port.dtype, port.scale, port.zero_point)
    if problem:
        raise MingError(problem)
    if x.dtype.kind == "f":
        check_finite(x)


def build_metadata(build_dir: Path) -> dict:
    """host.json of the complete build in `build_dir`: every field csim reads, and the C++ it compiles."""
    host_file = build_dir / "host.json"
    if not host_file.is_file():
        raise MingError(f"{build_dir}: not a ming build directory (no host.json); run `ming build` first")

    def incomplete(why: str) -> MingError:
        return MingError(f"{build_dir}: not a complete ming build ({why}); run `ming build` again")

    try:
        host = read_json(host_file)
    except (OSError, ValueError) as exc:
        raise incomplete(f"host.json: {str(exc).splitlines()[0][:80]}") from None
    problem = _host_problem(host)
    if problem:
        raise incomplete(f"host.json: {problem}")
    for source in (f"{host['model']}.cpp", f"{host['model']}_tb.cpp"):
        if not (build_dir / "hls" / source).is_file():
            raise incomplete(f"no hls/{source}")
    return host


def _host_problem(host: object) -> str | None:
    """What is missing, malformed or inconsistent in a host.json, None when every field csim reads has its
    type and range and agrees with the others (the driver's checks of the same fields: `accelerator_schema.host_problem`;
    "model" must be a C identifier, as it names hls/<model>.cpp and the cached binary)."""
    return accelerator_schema.host_problem(host)
