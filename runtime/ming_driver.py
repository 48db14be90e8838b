"""Driver of an accelerator built by ming: batches of float images in, float outputs out.

`Accelerator(deploy_dir, backend)` reads `accelerator.json` beside this file. `run(x)` does on the host
exactly what `ming reference` does around the integer network: it quantizes the float input
(onnxruntime's QuantizeLinear), lays every image out as 64-bit bus words (`ming_host.pack_images`),
moves the batch through the accelerator in transfers of whole images, unpacks, and runs the float tail
(e.g. Softmax) on all the images of a transfer at once (`batch_outputs`). An image's output record holds
every output of the model, each in its own whole words, in the order of the metadata's "outputs"; `run`
splits it by their word counts and gives the outputs by name, in the model's order. The backends move the words:

* ``pynq``: the bitstream's AXI DMA on a Zynq board, one MM2S and one S2MM transfer per batch (the DMA
  puts TLAST on a transfer's last word; the accelerator closes its output packet there);
* ``xrt``: the data-mover kernels of an Alveo xclbin (memory to stream, stream to memory);
* ``csim``: the C-simulation of the same C++, compiled with g++ on first use. For a Zynq build it models
  the DMA: the beats the MM2S channel would send (TLAST on the transfer's last word) go to the testbench,
  and the beats that come back are taken as S2MM takes them, up to TLAST, checking the length and the
  framing flag. For an Alveo build it runs the data-mover kernels themselves around the accelerator.

Needs numpy, and on the board PYNQ (Zynq) or pyxrt (Alveo); the csim backend needs g++.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

try:
    from . import ming_host  # inside the ming package
except ImportError:
    import ming_host  # in OUT/deploy, beside this file

METADATA = "accelerator.json"
BACKENDS = ("pynq", "xrt", "csim")
DEFAULT_BACKEND = {"zynq_axis_dma": "pynq", "alveo_xrt": "xrt"}
# g++ flags of the C-simulation (MING_CSIM selects ming's stand-ins for the Vitis headers)
CSIM_FLAGS = ("-std=c++17", "-O2", "-DMING_CSIM")
# One beat of the testbench's --axis files: 64-bit data, TKEEP, TLAST, TUSER, padding to 16 bytes.
AXIS_BEAT = np.dtype([("data", "<u8"), ("keep", "u1"), ("last", "u1"), ("user", "u1"), ("pad", "V5")])
DMA_TIMEOUT_SECONDS = 10.0
# int8 values of an output the host tail takes at once: all the images of a transfer for a classifier, a few
# for a large map, whose int64 temporaries then stay in the CPU's cache and below glibc's 128 KiB mmap
# threshold (larger ones are fresh pages, zeroed by the kernel at every call: slower than a loop over images)
TAIL_CHUNK_VALUES = 1 << 14
# The element types a model input may have: what `ming reference` and `ming csim` take (options.load_input
# is this module's load_input).
INPUT_DTYPES = ("float32", "int8", "uint8")
QUANTIZERS = ("onnxruntime", "tflite")
HOST_OP_KINDS = ("softmax", "quantize", "dequantize", "reshape", "transpose", "tflite_softmax", "tflite_quantize",
                 "tflite_requantize", "table", "add", "sub", "mul", "div", "rsub", "rdiv")
INPUT_HOST_OP_KINDS = ("reshape", "transpose", "dequantize", "tflite_quantize", "tflite_requantize")
_CONSTANT_HOST_OPS = ("add", "sub", "mul", "div", "rsub", "rdiv")
CSIM_MODES = {"zynq_axis_dma": "axis", "alveo_xrt": "memory"}
REBUILD = "run `ming build` again"
# The most int8 values an image puts on a port, as `ming build` bounds them (ming_py.limits, mirrored here: the
# driver runs without ming): one map holds at most MAX_MAP_VALUES (2**24), the output record, every output of the
# model together, at most the MAX_STREAMED_VALUES an image streams in all. Metadata stating more is not ming's,
# and the buffers it would size (values / 8 words per image) are refused before any is allocated.
MAX_MAP_VALUES = 2**24
MAX_RECORD_VALUES = 24_000_000
# The file names the metadata may give: C identifiers (model, kernels, the overlay's DMA), plain file names
# (no directory, no leading dot), and the exact shapes of the C-simulation's paths that emit/deploy.py writes.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.+-]*"
_PLAIN_NAME = re.compile(_NAME)
_CSIM_BINARY = re.compile(rf"csim/{_NAME}")  # in deploy/csim/
_CSIM_SOURCE = re.compile(rf"\.\./{_NAME}/{_NAME}\.cpp")  # in a directory of the build beside deploy/
_CSIM_INCLUDE = re.compile(rf"\.\./{_NAME}")
# JSON files ming reads (accelerator.json, host.json, report.json, a calibration or settings file) nest at most
# 6 levels; 64 is far past them and far below the depth at which Python's recursive json parser exhausts the
# interpreter's stack (about 1000), so a hostile nesting is refused by a flat scan before the parser sees it.
MAX_JSON_DEPTH = 64
# The largest JSON file read whole: accelerator.json with a model's float tables is tens of KB, report.json of a
# large design a few MB.
MAX_JSON_BYTES = 64 * 2**20
# The most digits of a whole number in a JSON file read: ming's own are at most 20 (64 bits); Python refuses to
# convert more than 4,300 with advice for programmers, so a longer one is refused here in the reader's words.
MAX_JSON_INT_DIGITS = 1000
# A string runs to its closing quote or, unterminated, to the end of the text (the parser then refuses it): every
# quote starts a match that cannot fail, so the scan is linear whatever the escapes.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_JSON_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_JSON_SCAN_CHUNK = 1 << 20  # brackets counted at once: a few MB of numpy temporaries whatever the file's size


class DeployError(Exception):
    """A problem a user can fix, stated in one line."""


@dataclass(frozen=True)
class Port:
    """One side of the accelerator: the model's tensor, its quantization and its bus layout."""

    onnx_name: str
    onnx_shape: tuple
    array_shape: tuple  # the accelerator's layout of the tensor
    stream_shape: tuple  # (C, H, W) of the map on the stream
    scale: float
    zero_point: int
    values: int  # int8 values per image
    words: int  # 64-bit bus words per image
    dtype: str = "float32"  # the model's element type here: "float32", "int8" or "uint8"
    permutation: tuple = ()  # the model's array -> the accelerator's layout (ming_host.accelerator_input)
    host_ops: tuple = ()  # the steps after the accelerator (outputs)
    quantizer: str = "onnxruntime"  # whose rounding quantizes a float input (ming_host.QUANTIZERS)
    index: int = 0  # an output's place among the model's outputs

    @classmethod
    def of(cls, data: dict) -> "Port":
        c, h, w = data["stream_shape"]
        return cls(data["onnx_name"], tuple(data["onnx_shape"]), tuple(data["array_shape"]), (c, h, w), data["scale"],
                   data["zero_point"], c * h * w, data["words"], data["dtype"],
                   tuple(data["permutation"]), tuple(map(ming_host.HostOp.of, data.get("host_ops", ()))),
                   data.get("quantizer", "onnxruntime"), data.get("index", 0))

    @property
    def image_shape(self) -> tuple:
        """The shape of one image: the model's shape without its batch dimension of 1."""
        return self.onnx_shape[1:] if len(self.onnx_shape) > 1 and self.onnx_shape[0] == 1 else self.onnx_shape


def input_images(x, port: Port) -> np.ndarray:
    """`x` as (images, *image shape) for the input `port`: the model's own shape is one image. `x` is float
    (taken as float32; a model whose input is int8 or uint8 quantizes it as TFLite's QUANTIZE does) with only
    finite values, or has the model's own integer type (`ming_host.input_type_problem`)."""
    x = np.asarray(x)
    if x.dtype.kind == "f" and x.dtype.fields is None:
        x = x.astype(np.float32)
    problem = ming_host.input_type_problem(x, port.dtype, port.scale, port.zero_point)
    if problem:
        raise DeployError(problem)
    shape = port.image_shape
    if x.shape == port.onnx_shape:
        images = x.reshape((1,) + shape)
    elif x.shape[1:] == shape and x.shape[0] > 0:
        images = x
    else:
        raise DeployError(f"input has shape {x.shape}; the model takes {port.onnx_shape} (one image) or "
                          f"(N, {', '.join(map(str, shape))}) for N images")
    bad = int(images.size - np.count_nonzero(np.isfinite(images))) if images.dtype == np.float32 else 0
    if bad:
        raise DeployError(f"input has {bad} non-finite values (NaN or Inf); int8 quantization needs finite inputs")
    return images


class Accelerator:
    """The accelerator of one build, driven through one backend."""

    def __init__(self, deploy_dir: str | Path | None = None, backend: str | None = None):
        self.deploy_dir = Path(deploy_dir or Path(__file__).resolve().parent)
        self.meta = read_metadata(self.deploy_dir)
        self.input = Port.of(self.meta["input"])
        self.outputs = [Port.of(data) for data in self.meta["outputs"]]  # in the order of the output record
        self.record_words = sum(port.words for port in self.outputs)
        name = backend or DEFAULT_BACKEND[self.meta["interface"]]
        if name not in BACKENDS:
            raise DeployError(f"--backend {name}: choose one of {', '.join(BACKENDS)}")
        self.backend_name = name
        self.backend = _BACKENDS[name](self)
        self.timing = Timing()

    @property
    def max_images_per_transfer(self) -> int:
        limit = self.meta.get("max_transfer_bytes")
        words = max(self.input.words, self.record_words)
        return max(1, limit // (8 * words)) if limit else 1 << 30

    def images_per_transfer(self, images: int, batch: int | None) -> int:
        """`batch` (default: all `images`) within the DMA's transfer limit."""
        if batch is not None and batch < 1:
            raise DeployError(f"--batch {batch}: give a positive number of images per transfer")
        return min(batch or images, self.max_images_per_transfer)

    def images(self, x: np.ndarray) -> np.ndarray:
        """`x` as (images, *image shape): the model's own shape is one image."""
        return input_images(x, self.input)

    def run(self, x: np.ndarray, batch: int | None = None) -> dict[str, np.ndarray]:
        """The model's outputs (by name, in the model's order) for the images in `x`, `batch` images per
        transfer (all of them by default): float, or int8 where the model's output is int8."""
        images = self.images(x)
        batch = self.images_per_transfer(len(images), batch)
        batches = [self._run_batch(images[i:i + batch]) for i in range(0, len(images), batch)]
        one_image = np.asarray(x).shape == self.input.onnx_shape
        outputs = {}
        for port in sorted(self.outputs, key=lambda port: port.index):
            y = np.concatenate([outputs_of_batch[port.onnx_name] for outputs_of_batch in batches])
            outputs[port.onnx_name] = y.reshape(port.onnx_shape) if one_image else y
        return outputs

    def _run_batch(self, images: np.ndarray) -> dict[str, np.ndarray]:
        start = time.perf_counter()
        try:
            q = ming_host.accelerator_input(images, self.input)
        except ValueError as exc:
            raise DeployError(f"input: {exc}") from None
        words_in, words_out = self.backend.buffers(len(images))
        ming_host.pack_images(q.reshape((len(images),) + self.input.stream_shape), self.input.stream_shape, words_in)
        packed = time.perf_counter()
        self.backend.run(len(images))
        moved = time.perf_counter()
        outputs = batch_outputs(words_out.reshape(len(images), self.record_words), self.outputs)
        self.timing.add(len(images), packed - start, moved - packed, time.perf_counter() - moved)
        return outputs


def batch_outputs(records: np.ndarray, ports: list[Port]) -> dict[str, np.ndarray]:
    """The outputs of a batch (by name, each with the images on axis 0) from its output records (images x
    record words): each output's words in turn (`ports` in the record's order), unpacked and run through the
    host tail many images at once, as many as make TAIL_CHUNK_VALUES values (at least one)."""
    outputs, first = {}, 0
    for port in ports:
        words = records[:, first:first + port.words]
        step = max(1, TAIL_CHUNK_VALUES // port.values)
        outputs[port.onnx_name] = np.concatenate([_outputs_of_images(words[i:i + step], port)
                                                  for i in range(0, len(words), step)])
        first += port.words
    return outputs


def _outputs_of_images(words: np.ndarray, port: Port) -> np.ndarray:
    """The output `port` of the images whose words are `words` (images x the port's words), stacked on axis 0,
    each in the model's shape without its batch dimension."""
    maps = ming_host.unpack_images(words, port.stream_shape)
    q = maps.reshape((len(maps),) + port.array_shape)
    return ming_host.model_output_of_images(q, port).reshape((len(maps),) + port.image_shape)


def read_json(path, max_bytes: int = MAX_JSON_BYTES, follow_symlinks: bool = True) -> object:
    """The JSON document in the regular file `path`, read whole up to `max_bytes` (`read_regular`). OSError when it
    cannot be read; ValueError (one line) when it is no regular file, larger, not UTF-8 or not JSON
    (`json_document`)."""
    return json_document(read_regular(path, max_bytes, follow_symlinks).decode("utf-8"))


def read_regular(path, max_bytes: int, follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file `path`, at most `max_bytes`; opened without blocking, so a FIFO or a device is
    refused before anything is read from it. OSError when it cannot be opened; ValueError (one line) when it is no
    regular file or larger."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | \
        (0 if follow_symlinks else getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(path, flags)
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # checked before fdopen, which refuses a directory in its own words
        os.close(fd)
        raise ValueError("not a regular file")
    with os.fdopen(fd, "rb") as file:
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"larger than {max_bytes:,} bytes")
    return data


def json_document(text: str, allow_nan: bool = True, object_pairs_hook=None) -> object:
    """`text` parsed as JSON; ValueError for a document nested deeper than MAX_JSON_DEPTH (counted by a flat
    scan of the brackets outside strings, before the recursive parser runs) and, unless `allow_nan`, for the
    constants NaN, Infinity and -Infinity."""
    brackets = np.frombuffer(_JSON_NOT_BRACKET.sub("", _JSON_STRING.sub("", text)).encode("ascii"), np.uint8)
    depth = 0
    for start in range(0, len(brackets), _JSON_SCAN_CHUNK):
        chunk = brackets[start:start + _JSON_SCAN_CHUNK]
        depths = depth + np.cumsum(np.where((chunk == ord("[")) | (chunk == ord("{")), 1, -1), dtype=np.int64)
        if depths.max() > MAX_JSON_DEPTH:
            raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
        depth = int(depths[-1])

    def no_constant(name: str):
        raise ValueError(f"{name} is not a number JSON allows")

    return json.loads(text, object_pairs_hook=object_pairs_hook, parse_int=bounded_int,
                      **({} if allow_nan else {"parse_constant": no_constant}))


def bounded_int(digits: str) -> int:
    """A whole number of a JSON file, refused (ValueError) above MAX_JSON_INT_DIGITS digits."""
    check_digits(digits)
    return int(digits)


def check_digits(number: str) -> None:
    """ValueError for a number written with more than MAX_JSON_INT_DIGITS digits (a JSON or YAML scalar)."""
    count = sum(character.isdigit() for character in number)
    if count > MAX_JSON_INT_DIGITS:
        raise ValueError(f"a number of {count:,} digits, more than the {MAX_JSON_INT_DIGITS:,} of any value ming "
                         "reads")


def read_metadata(deploy_dir: Path) -> dict:
    """The build's `accelerator.json` in `deploy_dir`, every field checked (`accelerator_problem`): the
    metadata is data, and a damaged or edited value stops here, before anything runs."""
    deploy_dir = Path(deploy_dir)
    try:
        meta = read_json(deploy_dir / METADATA)
    except OSError as exc:
        raise DeployError(f"{deploy_dir / METADATA}: cannot read the build's metadata ({exc.strerror or exc})") \
            from None
    except ValueError as exc:
        raise DeployError(f"{deploy_dir / METADATA}: cannot read the build's metadata ({' '.join(str(exc).split())})") \
            from None
    problem = accelerator_problem(meta, deploy_dir)
    if problem:
        raise DeployError(f"{deploy_dir / METADATA}: {problem}; the metadata was damaged or edited: {REBUILD}")
    return meta


# ---- the metadata's checks (host.json's are a part: ming's options.build_metadata uses host_problem) ------

_SHAPE, _NUMBER, _INTEGER, _LIST, _TEXT, _OBJECT = "a shape", "a number", "an integer", "a list", "a string", \
    "an object"
_PORT_FIELDS = {"onnx_shape": _SHAPE, "array_shape": _SHAPE, "stream_shape": _SHAPE, "words": _INTEGER,
                "scale": _NUMBER, "zero_point": _INTEGER, "onnx_name": _TEXT, "dtype": _TEXT, "permutation": _LIST}
_OUTPUT_FIELDS = _PORT_FIELDS | {"index": _INTEGER, "host_ops": _LIST}
_HOST_OP_FIELDS = {"kind": _TEXT, "axis": _INTEGER, "scale": _NUMBER, "zero_point": _INTEGER, "shape": _SHAPE}


def host_problem(host: object) -> str | None:
    """What is missing, malformed or inconsistent in the host side of the metadata (host.json, and the same
    fields of accelerator.json): None when every field has its type, range and agrees with the others."""
    if not isinstance(host, dict) or not isinstance(host.get("model"), str) or not host["model"]:
        return "no model name"
    if not _IDENTIFIER.fullmatch(host["model"]):
        return f"'model' is {host['model']!r}, not a C identifier (the stem of hls/<model>.cpp)"
    if "interface" in host and host["interface"] not in DEFAULT_BACKEND:
        return f"'interface' is {host['interface']!r}, not one of {', '.join(DEFAULT_BACKEND)}"
    problem = _fields_problem(host.get("input"), _PORT_FIELDS, "input") or _input_steps_problem(host["input"]) \
        or _port_problem(host["input"], "input")
    if problem:
        return problem
    outputs = host.get("outputs")
    if not isinstance(outputs, list) or not outputs:
        return "no 'outputs' list"
    for index, output in enumerate(outputs):
        name = f"outputs[{index}]"
        problem = _fields_problem(output, _OUTPUT_FIELDS, name)
        if problem:
            return problem
        for number, op in enumerate(output["host_ops"]):
            problem = _fields_problem(op, _HOST_OP_FIELDS, f"{name}.host_ops[{number}]")
            if problem:
                return problem
        problem = _port_problem(output, name) or _host_ops_problem(output, name)
        if problem:
            return problem
    record = sum(math.prod(output["stream_shape"]) for output in outputs)
    if record > MAX_RECORD_VALUES:
        return (f"the outputs' 'stream_shape's hold {record:,} values per image, more than the {MAX_RECORD_VALUES:,} "
                f"a ming build streams")
    indexes = sorted(output["index"] for output in outputs)
    if indexes != list(range(len(outputs))):
        return f"the outputs' 'index' values are {indexes}, not {list(range(len(outputs)))}"
    names = [output["onnx_name"] for output in outputs]
    if len(set(names)) != len(names):
        return f"two outputs share an 'onnx_name' ({names})"
    return None


def accelerator_problem(meta: object, deploy_dir: Path) -> str | None:
    """What is wrong with accelerator.json in `deploy_dir` (`host_problem`, the transfer limit, the hardware
    files and the C-simulation's paths), None when nothing is."""
    problem = host_problem(meta)
    if problem:
        return problem
    interface = meta.get("interface")
    if interface not in DEFAULT_BACKEND:
        return f"'interface' is {interface!r}, not one of {', '.join(DEFAULT_BACKEND)}"
    if not isinstance(meta.get("target"), str):
        return "'target' is missing or not a string"
    limit = meta.get("max_transfer_bytes")
    if not _is(limit, _INTEGER) or limit < 1:
        return f"'max_transfer_bytes' is {limit!r}, not a positive integer"
    image_bytes = 8 * max(meta["input"]["words"], sum(output["words"] for output in meta["outputs"]))
    if limit < image_bytes:
        return f"'max_transfer_bytes' is {limit}, less than one image's {image_bytes} bytes"
    if "clock_mhz" in meta and (not _is(meta["clock_mhz"], _NUMBER) or meta["clock_mhz"] <= 0):
        return f"'clock_mhz' is {meta['clock_mhz']!r}, not a number above 0"
    if interface == "zynq_axis_dma":
        problem = _name_problem(meta, "bitstream", ".bit") or _identifier_problem(meta.get("dma"), "dma")
    else:
        problem = _name_problem(meta, "xclbin", ".xclbin")
        kernels = meta.get("kernels")
        if not problem and not isinstance(kernels, dict):
            problem = "'kernels' is missing or not an object"
        for role in ("mm2s", "s2mm"):
            problem = problem or _identifier_problem(kernels.get(role), f"kernels.{role}")
    return problem or csim_problem(meta.get("csim"), deploy_dir, CSIM_MODES[interface])


def csim_problem(csim: object, deploy_dir: Path, mode: str | None = None) -> str | None:
    """What is wrong with the metadata's "csim" paths: the binary must be a plain file name in deploy/csim/,
    the sources and include directories `../<directory>/...` of the build around deploy/, all of them
    staying inside the build once symbolic links are followed."""
    if not isinstance(csim, dict):
        return "'csim' is missing or not an object"
    if csim.get("mode") not in CSIM_MODES.values() or (mode is not None and csim["mode"] != mode):
        return f"'csim.mode' is {csim.get('mode')!r}, not {mode or ' or '.join(CSIM_MODES.values())!r}"
    deploy_dir = Path(deploy_dir)
    deploy_real = deploy_dir.resolve()
    build_real = deploy_real.parent
    binary = csim.get("binary")
    if not isinstance(binary, str) or not _CSIM_BINARY.fullmatch(binary):
        return f"'csim.binary' is {binary!r}, not csim/<file name> (a file of deploy/csim/)"
    csim_dir = deploy_dir / "csim"
    if csim_dir.is_symlink() or (deploy_dir / binary).is_symlink() or \
            (deploy_dir / binary).resolve() != deploy_real / binary:
        return f"'csim.binary' {binary} leads out of {deploy_dir / 'csim'} (a symbolic link)"
    for key, pattern, shape in (("sources", _CSIM_SOURCE, "../<directory>/<file>.cpp"),
                                ("include", _CSIM_INCLUDE, "../<directory>")):
        paths = csim.get(key)
        if not isinstance(paths, list) or (key == "sources" and not paths):
            return f"'csim.{key}' is missing or not a list"
        for path in paths:
            if not isinstance(path, str) or not pattern.fullmatch(path):
                return f"'csim.{key}' holds {path!r}, not a path of the shape {shape} inside the build"
            real = (deploy_dir / path).resolve()
            if real != build_real and build_real not in real.parents:
                return f"'csim.{key}' {path} leads out of the build {build_real} (a symbolic link)"
    return None


def _fields_problem(section: object, fields: dict, name: str) -> str | None:
    if not isinstance(section, dict):
        return f"no '{name}' object"
    for key, kind in fields.items():
        if not _is(section.get(key), kind):
            return f"'{name}.{key}' is missing or not {kind}"
    return None


def _is(value: object, kind: str) -> bool:
    if kind == _SHAPE:
        return isinstance(value, list) and all(_is(d, _INTEGER) and d >= 0 for d in value)
    if kind == _INTEGER:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _NUMBER:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return isinstance(value, {_LIST: list, _OBJECT: dict}.get(kind, str))


def _scale_problem(value: float, name: str) -> str | None:
    low, high = float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max)
    if not low <= value <= high:  # a float32 number above 0 (normal: no underflow to 0 or overflow to inf)
        return f"'{name}' is {value!r}, not a finite float32 number above 0"
    return None


def _zero_point_problem(value: int, name: str) -> str | None:
    # The accelerator's values are int8 whatever the model's type: a uint8 model's zero points are shifted
    # into int8 by the frontend (onnx_formats), so every zero point of the metadata lies in int8's range.
    low, high = ming_host.INT8_MIN, ming_host.INT8_MAX
    return None if low <= value <= high else f"'{name}' is {value}, outside int8's range {low}..{high}"


def _input_steps_problem(port: dict) -> str | None:
    """What is wrong with the input's host steps (optional: none where absent): their fields, kinds, the shapes
    they give and their zero points."""
    steps = port.get("host_ops", [])
    if not isinstance(steps, list):
        return "'input.host_ops' is not a list"
    for number, op in enumerate(steps):
        where = f"input.host_ops[{number}]"
        problem = _fields_problem(op, _HOST_OP_FIELDS, where)
        if problem:
            return problem
        if op["kind"] not in INPUT_HOST_OP_KINDS:
            return f"'{where}.kind' is {op['kind']!r}, not one of {', '.join(INPUT_HOST_OP_KINDS)}"
        problem = _zero_point_problem(op["zero_point"], f"{where}.zero_point") or \
            _zero_point_problem(op.get("input_zero_point", 0), f"{where}.input_zero_point") or \
            _scale_problem(op["scale"], f"{where}.scale")
        if problem:
            return problem
        if op["kind"] == "transpose" and not _port_shape(dict(port, host_ops=steps[:number + 1])):
            shape = _port_shape(dict(port, host_ops=steps[:number]))
            return f"'{where}.axes' is {op.get('axes')!r}, not a permutation of the {len(shape)} axes of {shape}"
    return None


def _port_shape(port: dict) -> list:
    """The shape the port's permutation reorders: the model's, or the last of the input's layout steps'."""
    shape = list(port["onnx_shape"])
    for op in port.get("host_ops", []) if "index" not in port else []:
        if op["kind"] == "reshape":
            shape = list(op["shape"])
        elif op["kind"] == "transpose":
            axes = op.get("axes")
            if not isinstance(axes, list) or sorted(a if _is(a, _INTEGER) else -1 for a in axes) != \
                    list(range(len(shape))):
                return []
            shape = [shape[a] for a in axes]
    return shape


def _port_problem(port: dict, name: str) -> str | None:
    """Ranges and consistency of one port's numbers (their types are checked)."""
    if not port["onnx_name"]:
        return f"'{name}.onnx_name' is empty"
    if port["dtype"] not in INPUT_DTYPES:
        return f"'{name}.dtype' is {port['dtype']!r}, not one of {', '.join(INPUT_DTYPES)}"
    if port.get("quantizer", "onnxruntime") not in QUANTIZERS:
        return f"'{name}.quantizer' is {port.get('quantizer')!r}, not one of {', '.join(QUANTIZERS)}"
    stream = port["stream_shape"]
    if len(stream) != 3 or 0 in stream:
        return f"'{name}.stream_shape' is {stream}, not three positive sizes (C, H, W)"
    values = math.prod(stream)
    if values > MAX_MAP_VALUES:
        return f"'{name}.stream_shape' is {stream}: {values:,} values per image, more than the {MAX_MAP_VALUES:,} of " \
            "any map of a ming build"
    layout_shape = _port_shape(port)
    for key, shape in (("onnx_shape", port["onnx_shape"]), ("array_shape", port["array_shape"]),
                       ("host_ops", layout_shape)):
        # an array of one value may be a scalar (IREE folds a 1 x 1 port)
        if (key != "array_shape" and not shape) or 0 in shape or math.prod(shape) != values:
            what = f"'{name}.{key}' is {shape}" if key != "host_ops" else f"'{name}.host_ops' give the shape {shape}"
            return f"{what}: its {math.prod(shape)} values are not the {values} of 'stream_shape' {stream}"
    if port["words"] != ming_host.words_per_image(values):
        return (f"'{name}.words' is {port['words']}, not {ming_host.words_per_image(values)} (the {values} values "
                f"of 'stream_shape' {stream}, {ming_host.VALUES_PER_WORD} to a word)")
    permutation = port["permutation"]
    if permutation and sorted(p if _is(p, _INTEGER) else -1 for p in permutation) != \
            list(range(len(layout_shape))):
        return f"'{name}.permutation' is {permutation}, not a permutation of the {len(layout_shape)} axes"
    return _scale_problem(port["scale"], f"{name}.scale") or \
        _zero_point_problem(port["zero_point"], f"{name}.zero_point")


def _host_ops_problem(port: dict, name: str) -> str | None:
    shape = port["array_shape"]
    for number, op in enumerate(port["host_ops"]):
        where = f"{name}.host_ops[{number}]"
        if op["kind"] not in HOST_OP_KINDS:
            return f"'{where}.kind' is {op['kind']!r}, not one of {', '.join(HOST_OP_KINDS)}"
        if op["kind"] in ("softmax", "tflite_softmax") and not -len(shape) <= op["axis"] < len(shape):
            return f"'{where}.axis' is {op['axis']}, not an axis of the shape {shape}"
        if op["kind"] == "reshape":
            if not op["shape"] or 0 in op["shape"] or math.prod(op["shape"]) != math.prod(shape):
                return f"'{where}.shape' is {op['shape']}, not a shape of {math.prod(shape)} values"
            shape = op["shape"]
        if op["kind"] == "transpose":
            axes = op.get("axes")
            if not isinstance(axes, list) or sorted(a if _is(a, _INTEGER) else -1 for a in axes) != \
                    list(range(len(shape))):
                return f"'{where}.axes' is {axes!r}, not a permutation of the {len(shape)} axes of {shape}"
            shape = [shape[a] for a in axes]
        problem = _float_step_problem(op, where, shape) or _scale_problem(op["scale"], f"{where}.scale") or \
            _zero_point_problem(op["zero_point"], f"{where}.zero_point") or \
            _zero_point_problem(op.get("input_zero_point", 0), f"{where}.input_zero_point")
        if problem:
            return problem
    return None


def _float_step_problem(op: dict, where: str, shape: list) -> str | None:
    """What is wrong with a float post-processing step (`ming_host.HostOp`) on values of `shape`."""
    values = op.get("values", [])
    if not isinstance(values, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                               for v in values):  # inf where onnxruntime's Exp overflows
        return f"'{where}.values' is not a list of numbers"
    if op["kind"] == "table" and len(values) != 256:
        return f"'{where}.values' has {len(values)} numbers, not the 256 of an int8 table"
    if op["kind"] in _CONSTANT_HOST_OPS:
        if len(values) != math.prod(op["shape"]):
            return (f"'{where}.values' has {len(values)} numbers, not the {math.prod(op['shape'])} of shape "
                    f"{op['shape']}")
        if len(op["shape"]) > len(shape) or any(c not in (1, s) for c, s in zip(op["shape"][::-1], shape[::-1])):
            return f"'{where}.shape' {op['shape']} does not broadcast to the values' shape {shape}"
    return None


def _name_problem(meta: dict, key: str, suffix: str) -> str | None:
    value = meta.get(key)
    if not isinstance(value, str) or not _PLAIN_NAME.fullmatch(value) or not value.endswith(suffix):
        return f"'{key}' is {value!r}, not a plain file name ending {suffix} (a file of deploy/)"
    return None


def _identifier_problem(value: object, key: str) -> str | None:
    if not isinstance(value, str) or not _IDENTIFIER.fullmatch(value):
        return f"'{key}' is {value!r}, not an identifier"
    return None


# ---- the input file and the output files --------------------------------------------------------------------

def load_input(path, port: Port | None = None) -> np.ndarray:
    """The array in the .npy file `path`, as `ming reference` and `ming csim` take it: float32 (no NaN or
    Inf; either byte order), int8 or uint8, at least one value. Anything else is refused in one line:
    float64, float16, other integers, bool, complex, datetime, strings, structured and object arrays,
    .npz archives and files that are not .npy. Given the model's input `port`, an integer array the model
    does not take is refused with the conversion it takes (`ming_host.input_type_problem`)."""
    if not Path(path).is_file():
        raise DeployError(f"{path}: input file not found")
    x = _read_npy(path)
    integers = x.dtype.fields is None and x.dtype.kind in "iu"
    if port is not None and integers and x.size:
        problem = ming_host.input_type_problem(x, port.dtype, port.scale, port.zero_point)
        if problem:
            raise DeployError(f"{path}: {problem}")
    if x.dtype.fields is None and x.dtype in (np.int8, np.uint8):
        pass
    elif integers:
        raise DeployError(f"{path}: input is {x.dtype}; give float32 images (x.astype(numpy.float32)), which every "
                          "model takes (one whose input is int8 or uint8 quantizes them with its input's scale and "
                          "zero point), or such a model's own values as x.astype(numpy.int8) or numpy.uint8")
    elif x.dtype.fields is not None or x.dtype.kind != "f" or x.dtype.itemsize != 4:
        raise DeployError(f"{path}: input is {x.dtype}; give float32 as onnxruntime takes it (or int8/uint8 for a "
                          "model with such an input); save x.astype(numpy.float32)")
    if x.size == 0:
        raise DeployError(f"{path}: input has shape {x.shape}, no values; give at least one image")
    if x.dtype.kind == "f":
        x = x.astype(np.float32)
        bad = int(x.size - np.count_nonzero(np.isfinite(x)))
        if bad:
            raise DeployError(f"{path}: input has {bad} non-finite values (NaN or Inf); int8 quantization needs "
                              "finite inputs")
    return x


def _read_npy(path) -> np.ndarray:
    not_npy = DeployError(f"{path}: not a .npy array; save the input with numpy.save")
    try:
        with open(path, "rb") as file:
            if file.read(len(np.lib.format.MAGIC_PREFIX)) != np.lib.format.MAGIC_PREFIX:
                raise not_npy
            file.seek(0)
            return np.lib.format.read_array(file, allow_pickle=False)
    except DeployError:
        raise
    except OSError as exc:
        raise DeployError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:
        if "allow_pickle" in str(exc):
            raise DeployError(f"{path}: holds Python objects; save a float32 array with numpy.save") from None
        raise not_npy from None
    except Exception:  # numpy raises several unrelated types for a damaged header or data
        raise not_npy from None


def output_names(meta: dict) -> list[str]:
    """The model's outputs in its own order (the metadata lists them in the order of the output record)."""
    return [data["onnx_name"] for data in sorted(meta["outputs"], key=lambda data: data["index"])]


class Timing:
    """Seconds spent packing (quantize, pack), in the accelerator (transfer to completion) and unpacking
    (unpack, float tail), over `images` images."""

    def __init__(self):
        self.images, self.pack, self.accelerator, self.unpack = 0, 0.0, 0.0, 0.0

    def add(self, images: int, pack: float, accelerator: float, unpack: float) -> None:
        self.images += images
        self.pack += pack
        self.accelerator += accelerator
        self.unpack += unpack


def weight_words(accelerator) -> np.ndarray | None:
    """The words of deploy/weights.bin where the build keeps weights in URAM (accelerator.json's "weights"):
    the accelerator's weight port takes them once after the bitstream is loaded. None without weights in URAM."""
    weights = accelerator.meta.get("weights")
    if not weights:
        return None
    path = accelerator.deploy_dir / weights["file"]
    try:
        data = path.read_bytes()
    except OSError:
        raise DeployError(f"{path} is missing: copy the whole deploy/ directory of the build") from None
    if len(data) != weights["bytes"] or hashlib.sha256(data).hexdigest() != weights["sha256"]:
        raise DeployError(f"{path} is not this build's weights (its size or sha256 differs from accelerator.json)")
    return np.frombuffer(data, dtype="<u8")


class PynqBackend:
    """The bitstream's AXI DMA (no scatter-gather): one MM2S and one S2MM transfer per batch."""

    def __init__(self, accelerator: Accelerator):
        try:
            from pynq import Overlay, allocate
        except ImportError:
            raise DeployError(f"the pynq backend needs PYNQ ({accelerator.meta['target']}); on this machine "
                              "use --backend csim") from None
        bitstream = accelerator.deploy_dir / accelerator.meta["bitstream"]
        if not bitstream.is_file() or not bitstream.with_suffix(".hwh").is_file():
            raise DeployError(f"{bitstream.name} and {bitstream.with_suffix('.hwh').name} must be in "
                              f"{accelerator.deploy_dir}: run vivado/build_bitstream.tcl on the build machine and "
                              "copy deploy/ to the board")
        self.overlay = Overlay(str(bitstream))
        self.dma = getattr(self.overlay, accelerator.meta["dma"])
        self.allocate = allocate
        self._load_weights(accelerator)
        self.input_words, self.record_words = accelerator.input.words, accelerator.record_words
        self.images = 0

    def _load_weights(self, accelerator) -> None:
        """The weights in URAM through the weight DMA, once after the bitstream is loaded (which resets them)."""
        words = weight_words(accelerator)
        if words is None:
            return
        dma = getattr(self.overlay, accelerator.meta["weights"]["dma"])
        buffer = self.allocate(shape=(len(words),), dtype=np.uint64)
        buffer[:] = words
        dma.sendchannel.transfer(buffer)
        _wait(dma.sendchannel, "MM2S (weights)", len(words))
        buffer.freebuffer()

    def buffers(self, images: int):
        if images != self.images:  # physically contiguous buffers, kept while the batch size stays
            self.words_in = self.allocate(shape=(images * self.input_words,), dtype=np.uint64)
            self.words_out = self.allocate(shape=(images * self.record_words,), dtype=np.uint64)
            self.images = images
        return self.words_in, self.words_out

    def run(self, images: int) -> None:
        channels = ((self.dma.sendchannel, "MM2S (input)", images * self.input_words),
                    (self.dma.recvchannel, "S2MM (output)", images * self.record_words))
        self.dma.recvchannel.transfer(self.words_out)  # S2MM first: the accelerator may answer at once
        self.dma.sendchannel.transfer(self.words_in)  # flushes the buffer from the CPU caches
        for channel, name, words in channels:
            _wait(channel, name, words)
        received = self.dma.recvchannel.transferred  # the S2MM length register: bytes up to TLAST
        if received != self.words_out.nbytes:
            raise DeployError(f"the accelerator's output packet ended after {received} of {self.words_out.nbytes} "
                              "bytes: the bitstream is not this build's, or its input was framed wrongly")


def _wait(channel, name: str, words: int) -> None:
    """PYNQ's wait (error check, cache invalidation, received length) once the channel is idle, with a time
    limit instead of PYNQ's endless wait for a transfer that never finishes."""
    deadline = time.monotonic() + DMA_TIMEOUT_SECONDS
    while not channel.idle and not channel.error:
        if time.monotonic() > deadline:
            raise DeployError(f"the DMA's {name} transfer of {words} words did not finish in "
                              f"{DMA_TIMEOUT_SECONDS:g} s: the accelerator stalled (is the bitstream this build's? "
                              "reload the overlay)")
    try:
        channel.wait()
    except RuntimeError as exc:
        raise DeployError(f"the DMA's {name} transfer failed: {exc}") from None


class XrtBackend:
    """The xclbin's data movers on an Alveo card: memory to stream, the free-running accelerator, stream to
    memory; one run of each per batch."""

    def __init__(self, accelerator: Accelerator):
        try:
            import pyxrt
        except ImportError:
            raise DeployError("the xrt backend needs XRT's Python bindings (source /opt/xilinx/xrt/setup.sh); on "
                              "this machine use --backend csim") from None
        xclbin = accelerator.deploy_dir / accelerator.meta["xclbin"]
        if not xclbin.is_file():
            raise DeployError(f"{xclbin.name} is not in {accelerator.deploy_dir}: run `make` in vitis/ first")
        kernels = accelerator.meta["kernels"]
        self.pyxrt = pyxrt
        self.device = pyxrt.device(int(os.environ.get("MING_XRT_DEVICE", "0")))
        uuid = self.device.load_xclbin(pyxrt.xclbin(str(xclbin)))
        self.mm2s = pyxrt.kernel(self.device, uuid, kernels["mm2s"])
        self.s2mm = pyxrt.kernel(self.device, uuid, kernels["s2mm"])
        self.input_words, self.record_words = accelerator.input.words, accelerator.record_words
        self.images = 0
        self._load_weights(accelerator, uuid)

    def _load_weights(self, accelerator, uuid) -> None:
        """The weights in URAM through the weights' mover kernel, once after the xclbin is loaded."""
        words = weight_words(accelerator)
        if words is None:
            return
        mover = self.pyxrt.kernel(self.device, uuid, accelerator.meta["weights"]["kernel"])
        bo = self.pyxrt.bo(self.device, words.nbytes, self.pyxrt.bo.normal, mover.group_id(0))
        np.frombuffer(bo.map(), dtype=np.uint64)[:] = words
        bo.sync(self.pyxrt.xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE)
        self._start(mover, {0: bo, 2: len(words)}).wait()

    def buffers(self, images: int):
        if images != self.images:
            self.bo_in = self.pyxrt.bo(self.device, images * self.input_words * 8, self.pyxrt.bo.normal,
                                       self.mm2s.group_id(0))
            self.bo_out = self.pyxrt.bo(self.device, images * self.record_words * 8, self.pyxrt.bo.normal,
                                        self.s2mm.group_id(1))
            self.words_in = np.frombuffer(self.bo_in.map(), dtype=np.uint64)
            self.words_out = np.frombuffer(self.bo_out.map(), dtype=np.uint64)
            self.images = images
        return self.words_in, self.words_out

    def run(self, images: int) -> None:
        sync = self.pyxrt.xclBOSyncDirection
        self.bo_in.sync(sync.XCL_BO_SYNC_BO_TO_DEVICE)
        receive = self._start(self.s2mm, {1: self.bo_out, 2: images})
        send = self._start(self.mm2s, {0: self.bo_in, 2: images})
        send.wait()
        receive.wait()
        self.bo_out.sync(sync.XCL_BO_SYNC_BO_FROM_DEVICE)

    def _start(self, kernel, args: dict):
        run = self.pyxrt.run(kernel)
        for index, value in args.items():  # the stream argument is the platform's, not the host's
            run.set_arg(index, value)
        run.start()
        return run


class CsimBackend:
    """The C-simulation of this build's C++ in place of the hardware (see the module doc)."""

    def __init__(self, accelerator: Accelerator):
        self.input_words, self.record_words = accelerator.input.words, accelerator.record_words
        self.csim = accelerator.meta["csim"]
        # the binary, and its inputs' sha256: what every run checks the stamp against
        self.binary, self.inputs = compile_csim(accelerator.deploy_dir, self.csim)
        self.images = 0
        self.environment = None  # the testbench's weights.bin, where weights are in URAM
        if weight_words(accelerator) is not None:
            weights = accelerator.deploy_dir / accelerator.meta["weights"]["file"]
            self.environment = os.environ | {"MING_WEIGHTS_FILE": str(weights.resolve())}

    def buffers(self, images: int):
        if images != self.images:
            self.words_in = np.zeros(images * self.input_words, dtype=np.uint64)
            self.words_out = np.zeros(images * self.record_words, dtype=np.uint64)
            self.images = images
        return self.words_in, self.words_out

    def run(self, images: int) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            sent, received = Path(tmp) / "in", Path(tmp) / "out"
            if self.csim["mode"] == "axis":
                mm2s_beats(self.words_in).tofile(sent)
                self._simulate(["--axis", str(sent), str(received)])
                self.words_out[:] = s2mm_words(np.fromfile(received, dtype=AXIS_BEAT), len(self.words_out))
            else:  # the data-mover kernels are in the simulation: it takes and gives device memory
                self.words_in.astype("<u8").tofile(sent)
                self._simulate([str(sent), str(received), str(images)])
                words = np.fromfile(received, dtype="<u8")
                if len(words) != len(self.words_out):
                    raise DeployError(f"the C-simulation wrote {len(words)} words, not {len(self.words_out)}")
                self.words_out[:] = words

    def _simulate(self, args: list) -> None:
        """Runs the very bytes that were verified against the stamp (`open_stamped`)."""
        fd = open_stamped(self.binary, self.inputs)
        if fd is None:
            raise DeployError(f"{self.binary} or its sources changed since it was compiled (they differ from its "
                              f"stamp {stamp_path(self.binary).name}); run again to compile it anew")
        try:
            how = {"executable": f"/proc/self/fd/{fd}", "pass_fds": (fd,)} if os.path.isdir("/proc/self/fd") else {}
            result = subprocess.run([str(self.binary), *args], capture_output=True, text=True, env=self.environment,
                                    **how)
        finally:
            os.close(fd)
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise DeployError(f"the C-simulation failed: {last}")


def check_output_paths(paths: list, names: list[str]) -> None:
    """`--output` once per model output, in the model's order (`names`), or once as an .npz archive; none of
    them a directory or a symbolic link."""
    for path in paths:
        check_destination(path)
    if len(paths) == len(names) or (len(paths) == 1 and str(paths[0]).endswith(".npz")):
        return
    listed = ", ".join(repr(name) for name in names)
    raise DeployError(f"--output given {len(paths)} times; the model has {len(names)} outputs ({listed}): give "
                      "--output once per output in this order, or one .npz path")


def check_destination(path) -> None:
    """An output path is neither a symbolic link (outputs are renamed into place) nor a directory."""
    if os.path.islink(path):
        raise DeployError(f"--output {path}: is a symbolic link; give the path of a regular file (outputs are "
                          "written beside it and renamed into place, never through a link)")
    if os.path.isdir(path):
        raise DeployError(f"--output {path}: is a directory; give a file name such as {Path(path) / 'y.npy'}")


def save_outputs(paths: list, outputs: dict[str, np.ndarray]) -> None:
    """Each output (by name, in the model's order) to its own .npy path (numpy.save's name: .npy added when
    missing), or all of them to one .npz archive whose keys are the output names (what numpy.load of it gives).

    Atomically: each file is written to a new temporary file in its directory (O_EXCL) and renamed into
    place once all are complete, so a full disk or an interrupt leaves the old files (or none), never a
    short one. A destination that is a symbolic link is refused (DeployError), not written through."""
    if len(paths) == 1 and str(paths[0]).endswith(".npz"):
        def write_archive(file):
            with zipfile.ZipFile(file, "w") as archive:  # numpy.savez's layout; any name is a key
                for name, y in outputs.items():
                    with archive.open(f"{name}.npy", "w") as member:
                        np.lib.format.write_array(member, np.asanyarray(y), allow_pickle=False)

        writes = [(Path(paths[0]), write_archive)]
    else:
        writes = [(Path(str(path) if str(path).endswith(".npy") else f"{path}.npy"),
                   lambda file, y=y: np.lib.format.write_array(file, np.asanyarray(y), allow_pickle=False))
                  for path, y in zip(paths, outputs.values())]
    staged = []
    try:
        for destination, write in writes:
            check_destination(destination)
            staged.append((_write_new(destination, write), destination))
        for temporary, destination in staged:
            check_destination(destination)
            try:
                os.replace(temporary, destination)
            except OSError as exc:
                raise DeployError(f"--output {destination}: cannot write ({exc.strerror or exc})") from None
    finally:
        for temporary, _ in staged:
            Path(temporary).unlink(missing_ok=True)


def _write_new(destination: Path, write) -> Path:
    """A new file beside `destination` (O_EXCL, the umask's permissions) holding what `write` writes."""
    fd = path = None
    try:
        while fd is None:
            path = destination.with_name(f".{destination.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                continue
        with os.fdopen(fd, "wb") as file:
            fd = -1  # the file object owns it now
            write(file)
            file.flush()
            os.fsync(file.fileno())
        return path
    except BaseException as exc:
        if fd is not None:
            if fd >= 0:
                os.close(fd)
            path.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise DeployError(f"--output {destination}: cannot write ({exc.strerror or exc})") from None
        raise


def mm2s_beats(words: np.ndarray) -> np.ndarray:
    """The beats an AXI DMA MM2S transfer of `words` sends: whole words, TLAST on the transfer's last."""
    beats = np.zeros(len(words), dtype=AXIS_BEAT)
    beats["data"] = words
    beats["keep"] = 0xFF
    beats["last"][-1] = 1
    return beats


def s2mm_words(beats: np.ndarray, length: int) -> np.ndarray:
    """What an AXI DMA S2MM transfer of `length` words stores from `beats`, or the error it would end in."""
    ends = np.flatnonzero(beats["last"][:length])
    if len(ends) == 0:
        raise DeployError(f"no TLAST in the first {length} output words: the S2MM transfer would never finish")
    if ends[0] != length - 1:
        raise DeployError(f"TLAST after {ends[0] + 1} of {length} output words: the S2MM transfer would end early")
    if len(beats) != length:
        raise DeployError(f"the accelerator sent {len(beats)} words for a transfer of {length}")
    if (beats["keep"] != 0xFF).any():
        raise DeployError("an output word is not whole (TKEEP): the DMA would store it short")
    if beats["user"].any():
        raise DeployError("the accelerator flagged wrongly framed input (TUSER): TLAST in the middle of an image")
    return beats["data"]


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


_BACKENDS = {"pynq": PynqBackend, "xrt": XrtBackend, "csim": CsimBackend}
