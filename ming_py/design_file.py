"""The saved design, OUT/design/: what `ming emit` needs to write a build's files again and verify them without
the model (docs/design_format.md describes every field).

design/design.json holds the document (`SavedDesign`, through `dataclass_codec`), design/arrays/N.npy its numpy
arrays and byte strings; both are deterministic, so an unchanged design is written byte for byte the same.
Reading it back (`read_design`) checks everything a hand edit may have broken: the format and version, every
field's type, the array files (regular files, no symbolic links, within the size limits), then the design as
a whole (`ming_py.design_checks`); what fails is one line naming the field.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .dataclass_codec import Arrays, DecodeError, decode, encode
from .dataflow import Schedule, StreamGraph
from .design_checks import design_problems
from .errors import MingError
from .ilp.cost import Cost
from .contract.ming_json import read_json, read_regular
from .limits import MAX_MAP_VALUES, MAX_STREAMED_VALUES, MAX_WEIGHT_BYTES

FORMAT = "ming-design"
# 2: totals hold the simulated headline and the estimated_cycles and estimated_latency_us of the model;
# 3: a cost holds its pushes and row_gaps (the latency model's back-pressure rows);
# 4: a cost holds its first_lags (its first output token waits for its input at the producer's pace)
VERSION = 4
DIRECTORY = "design"
DOCUMENT = "design.json"
MAX_ARRAY_VALUES = max(MAX_WEIGHT_BYTES, MAX_MAP_VALUES)
_ARRAY_NAME = re.compile(r"arrays/[0-9]{1,6}\.npy")
_NPY_HEADER_BYTES = 4096


@dataclass(frozen=True)
class VerificationImage:
    """One image the build is verified on: its raw int8 input and the golden model's output record, both in
    stream order (`ming_py.sample.image_record`)."""

    raw_input: bytes
    expected: bytes


@dataclass(frozen=True)
class ModelFile:
    """Where the model was built from and its sha256 (host.json's "model_file")."""

    path: str
    sha256: str

    @classmethod
    def of(cls, model: Path) -> "ModelFile":
        return cls(str(model.resolve()), hashlib.sha256(model.read_bytes()).hexdigest())


@dataclass
class Estimates:
    """What the report takes of the ILP's solution, made for the schedule whose fingerprint is `schedule_sha256`
    (`schedule_fingerprint`) on `board`: an edited schedule or another board leaves them out."""

    costs: dict[str, Cost]
    totals: dict
    schedule_sha256: str
    board: str


@dataclass
class SavedDesign:
    """Everything the emit and verify steps need: the stream graph, its schedule, the board, the ILP's estimates,
    each kernel's class (report.json's "class"), the verification images and the model file."""

    stream_graph: StreamGraph
    schedule: Schedule
    board: str
    clock_mhz: float
    estimates: Estimates | None = None
    classes: dict[str, str] = field(default_factory=dict)
    images: dict[str, VerificationImage] = field(default_factory=dict)
    model_file: ModelFile | None = None


def schedule_fingerprint(schedule: Schedule) -> str:
    """The sha256 of the schedule's JSON form."""
    data = encode(schedule, Schedule, Arrays())
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def design_files(saved: SavedDesign) -> dict[str, str | bytes]:
    """design/design.json and design/arrays/*.npy of `saved`."""
    arrays = Arrays()
    document = {"format": FORMAT, "version": VERSION} | encode(saved, SavedDesign, arrays)
    files = {f"{DIRECTORY}/{DOCUMENT}": readable_json(document) + "\n"}
    return files | {f"{DIRECTORY}/{name}": data for name, data in arrays.files.items()}


def readable_json(data, level: int = 0) -> str:
    """`data` as JSON indented by one space a level, each list of plain values on one line (for editing)."""
    pad, inner = " " * level, " " * (level + 1)
    if isinstance(data, dict) and data and not (len(data) == 1 and isinstance(next(iter(data.values())), str)):
        items = (f"{inner}{json.dumps(key)}: {readable_json(value, level + 1)}" for key, value in data.items())
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(data, list) and any(isinstance(value, dict) and value or
                                       isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value)
                                       for value in data):
        return "[\n" + ",\n".join(inner + readable_json(value, level + 1) for value in data) + f"\n{pad}]"
    return json.dumps(data)


def max_arrays_bytes() -> int:
    """The bytes of all the array files of one design: its weights (`MAX_WEIGHT_BYTES`), its epilogues' arrays (a
    few int32 per channel or a table of 256 values per group, taken as much again) and each verification image's
    input map and output record; it bounds the memory an edited design can make `ming emit` read."""
    from .verify import IMAGES  # the images the build saves

    return 2 * MAX_WEIGHT_BYTES + len(IMAGES) * (MAX_MAP_VALUES + MAX_STREAMED_VALUES)


class _DirectoryArrays(Arrays):
    """The arrays of a saved design on disk, each read when the document names it, within a budget of bytes
    for them all (`max_arrays_bytes`)."""

    def __init__(self, directory: Path, budget: int):
        super().__init__({}, MAX_ARRAY_VALUES)
        self.directory = directory
        self.budget = budget

    def get(self, name: str, path: str):
        if not _ARRAY_NAME.fullmatch(name):
            raise DecodeError(path, f"{name!r} is no array file name (arrays/N.npy)")
        if name not in self.files:
            try:
                self.files[name] = read_regular(self.directory / name, MAX_ARRAY_VALUES * 8 + _NPY_HEADER_BYTES,
                                                follow_symlinks=False)
            except (OSError, ValueError) as error:
                raise DecodeError(path, f"{name}: {getattr(error, 'strerror', None) or error}") from None
            self.budget -= len(self.files[name])
            if self.budget < 0:
                raise DecodeError(path, f"{name}: the design's arrays hold more than {max_arrays_bytes():,} bytes "
                                        "in all")
        return super().get(name, path)


def read_design(out: Path) -> SavedDesign:
    """The saved design of the build OUT, checked; MingError (one line naming the field) when it cannot be used."""
    directory = out / DIRECTORY
    document_path = directory / DOCUMENT
    where = f"{document_path}"
    for place in (directory, directory / "arrays"):
        if place.is_symlink():
            raise MingError(f"{place}: is a symbolic link; a saved design holds regular files only "
                            "(build again with `ming build`)")
    if not document_path.exists() and not document_path.is_symlink():
        raise MingError(f"{out}: holds no saved design ({DIRECTORY}/{DOCUMENT}); build it with `ming build`")
    try:
        document = read_json(document_path, follow_symlinks=False)
    except (OSError, ValueError) as error:
        raise MingError(f"{where}: cannot be read ({getattr(error, 'strerror', None) or error}); "
                        "build again with `ming build`") from None
    try:
        saved = _decode(document, directory)
    except DecodeError as error:
        raise MingError(f"{where}: {error}; correct the field or build again with `ming build`") from None
    problems = design_problems(saved)
    if problems:
        raise MingError(f"{where}: {problems[0]}; correct it or build again with `ming build`")
    return saved


def _decode(document, directory: Path) -> SavedDesign:
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise DecodeError("format", f"expected {FORMAT!r} (this is no saved ming design)")
    if document.get("version") != VERSION:
        raise DecodeError("version", f"{document.get('version')!r} is not version {VERSION}, the one this ming "
                                     "reads")
    rest = {k: v for k, v in document.items() if k not in ("format", "version")}
    return decode(rest, SavedDesign, _DirectoryArrays(directory, max_arrays_bytes()))
