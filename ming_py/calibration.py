"""Calibration factors: how the vendor tools' resources relate to the cost model's, per primitive.

`ming compare OUT --write-calibration FILE` fits them to a build's reports; a later `ming build
--calibration FILE` multiplies each planned amount of a primitive by its factor. The file is JSON:

    {"format": "ming-calibration/1", "board": "kv260", "part": "...",
     "from": {"hls": true, "vivado": true, "processes": 6},
     "factors": {"lut": {"mac": 1.12, "control": 0.91, "process": 1.05}, "ff": {...}, "dsp": {...},
                 "bram18k": {...}, "uram": {...}}}

A resource's primitives are those of report.json's `resources_by_primitive`; "process" is the
factor of a process figure not split by primitive and the fallback for a primitive the file does
not name. A resource or primitive the reports held no evidence for is absent (factor 1.0).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from .errors import MingError
from .contract.ming_json import json_document, read_regular

FORMAT = "ming-calibration/1"
RESOURCES = ("dsp", "lut", "ff", "bram18k", "uram")
FALLBACK = "process"
LOWEST, HIGHEST = 0.25, 4.0
# What a factor in a file may be: fitting gives [LOWEST, HIGHEST]; a hand-edited factor a thousand times off is a
# mistake, and within this range every calibrated amount stays a finite number far from overflow.
FACTOR_RANGE = (1e-3, 1e3)
# Weight of the pull toward 1.0 against the data's own (see _penalty_weights)
RIDGE = 1e-3
MAX_BYTES = 1 << 20
DIGITS = 4


@dataclass(frozen=True)
class Calibration:
    """A loaded calibration file: factors as ((resource, ((primitive, factor), ...)), ...), sorted."""

    factors: tuple[tuple[str, tuple[tuple[str, float], ...]], ...]
    path: Path
    digest: str  # sha256 of the file's bytes
    board: str | None = None
    part: str | None = None

    @cached_property
    def _table(self) -> dict[str, dict[str, float]]:
        return {resource: dict(by_primitive) for resource, by_primitive in self.factors}

    def factor(self, resource: str, primitive: str) -> float:
        """The primitive's factor, else the resource's "process" factor, else 1.0."""
        by_primitive = self._table.get(resource, {})
        return by_primitive.get(primitive, by_primitive.get(FALLBACK, 1.0))


def load_calibration(path: str | Path) -> Calibration:
    path = Path(path)
    data = _read_regular(path)
    document = _parse(data, path)
    factors = _checked_factors(document, path)
    board, part = (_optional_text(document, key, path) for key in ("board", "part"))
    return Calibration(factors=factors, path=path, digest=hashlib.sha256(data).hexdigest(), board=board, part=part)


def _read_regular(path: Path, follow: bool = True) -> bytes:
    """The bytes of a regular file of at most MAX_BYTES (a FIFO or a device is refused before anything is read
    from it: `ming_json.read_regular`, the reader of every JSON file ming reads)."""
    try:
        return read_regular(path, MAX_BYTES, follow_symlinks=follow)
    except FileNotFoundError:
        raise MingError(f"{path}: no such calibration file") from None
    except OSError as exc:
        raise MingError(f"{path}: cannot read the calibration file ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise MingError(f"{path}: {exc}, so not a ming calibration file") from None


def _parse(data: bytes, path: Path) -> dict:
    try:
        document = json_document(data.decode("utf-8"), allow_nan=False)
    except (UnicodeDecodeError, ValueError) as exc:
        raise MingError(f"{path}: not a ming calibration file (not JSON: {_one_line(exc)})") from None
    if not isinstance(document, dict):
        raise MingError(f"{path}: not a ming calibration file (a JSON {type(document).__name__}, not an object)")
    if document.get("format") != FORMAT:
        raise MingError(f"{path}: not a ming calibration file (format {document.get('format')!r}, expected "
                        f"{FORMAT!r})")
    return document


def _checked_factors(document: dict, path: Path) -> tuple:
    factors = document.get("factors")
    if not isinstance(factors, dict):
        raise MingError(f"{path}: \"factors\" must be an object of resources ({', '.join(RESOURCES)})")
    checked = []
    for resource, by_primitive in sorted(factors.items()):
        if resource not in RESOURCES:
            raise MingError(f"{path}: unknown resource {resource!r} in \"factors\" (expected {', '.join(RESOURCES)})")
        if not isinstance(by_primitive, dict):
            raise MingError(f"{path}: factors.{resource} must be an object of primitive: factor")
        checked.append((resource, tuple((primitive, _checked_factor(value, f"{resource}.{primitive}", path))
                                        for primitive, value in sorted(by_primitive.items()))))
    return tuple(checked)


def _checked_factor(value, name: str, path: Path) -> float:
    low, high = FACTOR_RANGE
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:  # NaN fails
        shown = json.dumps(value) if not isinstance(value, int) or abs(value) < 10 ** 20 else "an integer of " \
            f"{len(str(abs(value)))} digits"
        raise MingError(f"{path}: factor {name} is {shown}: factors are numbers from {low:g} to {high:g} "
                        "(fitted ones from 0.25 to 4); correct it, or write the file again with ming compare "
                        "--write-calibration")
    return float(value)


def _optional_text(document: dict, key: str, path: Path) -> str | None:
    value = document.get(key)
    if value is not None and not isinstance(value, str):
        raise MingError(f"{path}: \"{key}\" must be a string")
    return value


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


# --- fitting ------------------------------------------------------------------------------------------------

def planned_by_primitive(node: dict, resource: str) -> dict[str, float]:
    """A process's planned amount of a resource per primitive; the whole figure as "process" where report.json
    does not split it."""
    split = (node.get("resources_by_primitive") or {}).get(resource)
    if split:
        return {primitive: float(amount) for primitive, amount in split.items()}
    return {FALLBACK: float(node.get(resource) or 0)}


def fit(report: dict, achieved: dict) -> dict[str, dict[str, float]]:
    """Per resource, the factors f >= 0 (clamped to [0.25, 4]) that minimize, over the processes with an achieved
    figure, (achieved - sum over primitives of f * planned)^2, pulled toward 1.0 where the data does not decide.

    `achieved`: process name -> resource -> the achieved amount (None or absent: not known)."""
    return {resource: _fit_resource(report["nodes"], achieved, resource) for resource in RESOURCES}


def _fit_resource(nodes: list[dict], achieved: dict, resource: str) -> dict[str, float]:
    rows = [(planned_by_primitive(node, resource), achieved[node["name"]][resource]) for node in nodes
            if (achieved.get(node["name"]) or {}).get(resource) is not None]
    primitives = sorted({primitive for planned, _ in rows for primitive, amount in planned.items() if amount > 0})
    if not primitives:
        return {}
    planned = np.array([[split.get(primitive, 0.0) for primitive in primitives] for split, _ in rows])
    target = np.array([float(value) for _, value in rows])
    factors = dict(zip(primitives, _regularized_fit(planned, target)))
    if FALLBACK not in factors:
        factors[FALLBACK] = _single_factor(planned.sum(axis=1), target)
    return {primitive: round(float(value), DIGITS) for primitive, value in sorted(factors.items())}


def _single_factor(planned: np.ndarray, target: np.ndarray) -> float:
    """The one factor for the whole process figures: the fallback for primitives these reports did not hold."""
    return float(np.clip(planned @ target / (planned @ planned), LOWEST, HIGHEST))


def _penalty_weights(planned: np.ndarray) -> np.ndarray:
    """The pull of each primitive's factor toward 1.0: RIDGE x (its planned amount over all processes) x (the mean
    planned amount of a process), which is RIDGE times what the data weighs for a primitive spread evenly.

    Weighing by the amount itself (not its square) makes primitives the data cannot tell apart (always in the same
    proportion) share one factor, and leaves a primitive no process separates at 1.0."""
    totals = planned.sum(axis=0)
    return RIDGE * totals * totals.sum() / len(planned)


def _regularized_fit(planned: np.ndarray, target: np.ndarray) -> np.ndarray:
    weights = _penalty_weights(planned)
    hessian = planned.T @ planned + np.diag(weights)
    linear = planned.T @ target + weights
    lower, upper = np.full(len(weights), LOWEST), np.full(len(weights), HIGHEST)
    return _box_quadratic_minimum(hessian, linear, lower, upper)


def _box_quadratic_minimum(hessian: np.ndarray, linear: np.ndarray, lower: np.ndarray,
                           upper: np.ndarray) -> np.ndarray:
    """argmin 1/2 x'Hx - c'x over lower <= x <= upper for a positive definite H: a primal active-set method
    started at 1.0 (a bound is held while its multiplier has the right sign, released otherwise)."""
    n = len(linear)
    x = np.clip(np.ones(n), lower, upper)
    held = np.zeros(n, dtype=bool)
    tolerance = 1e-12 * max(1.0, float(np.abs(hessian).max()), float(np.abs(linear).max()))
    for _ in range(20 * n + 20):
        free = ~held
        target = x.copy()
        if free.any():
            rhs = linear[free] - hessian[np.ix_(free, ~free)] @ x[~free]
            target[free] = np.linalg.solve(hessian[np.ix_(free, free)], rhs)
        step = target - x
        blocking = _first_bound(x, step, lower, upper, free)
        if blocking is None:
            x = target
            gradient = hessian @ x - linear
            wrong = held & (((x <= lower) & (gradient < -tolerance)) | ((x >= upper) & (gradient > tolerance)))
            if not wrong.any():
                break
            held[int(np.argmax(np.abs(gradient) * wrong))] = False
        else:
            index, fraction = blocking
            x = x + fraction * step
            x[index] = lower[index] if step[index] < 0 else upper[index]
            held[index] = True
    return np.clip(x, lower, upper)


def _first_bound(x, step, lower, upper, free) -> tuple[int, float] | None:
    """The first free variable the step from x would take past a bound, and the fraction of the step to it."""
    first = None
    for i in np.flatnonzero(free):
        if step[i] < 0 and x[i] + step[i] < lower[i]:
            fraction = (lower[i] - x[i]) / step[i]
        elif step[i] > 0 and x[i] + step[i] > upper[i]:
            fraction = (upper[i] - x[i]) / step[i]
        else:
            continue
        if first is None or fraction < first[1]:
            first = (int(i), float(fraction))
    return first


def document(report: dict, factors: dict, hls: bool, vivado: bool, processes: int) -> dict:
    """The calibration file's content."""
    return {"format": FORMAT, "board": report.get("board"), "part": report.get("part"),
            "from": {"hls": hls, "vivado": vivado, "processes": processes}, "factors": factors}


# --- writing ------------------------------------------------------------------------------------------------

def write_calibration(path: str | Path, data: dict) -> None:
    """Write `data` (sorted keys) to `path` through a temporary file in its directory and a rename: never over a
    file that is not a calibration file, never through a symbolic link."""
    path = Path(path)
    _check_replaceable(path)
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    temporary = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    try:
        _write_new(temporary, text.encode("utf-8"))
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise MingError(f"{path}: cannot write the calibration file ({exc.strerror})") from None
    _sync_directory(path.parent)


def _check_replaceable(path: Path) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise MingError(f"{path}: no directory {path.parent} to write the calibration file in") from None
        return
    if stat.S_ISLNK(mode):
        raise MingError(f"{path}: a symbolic link; ming writes no calibration file through one (give the path "
                        f"itself)")
    if not stat.S_ISREG(mode):
        raise MingError(f"{path}: not a regular file; ming writes the calibration file only as a new file or over "
                        f"its own")
    if not _is_calibration(path):
        raise MingError(f"{path}: exists and is not a ming calibration file; ming overwrites only its own (move it "
                        f"or choose another path)")


def _is_calibration(path: Path) -> bool:
    try:
        _parse(_read_regular(path, follow=False), path)
    except MingError:
        return False
    return True


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
