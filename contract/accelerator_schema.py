"""accelerator.json, described once: every section and field with its type, whether it must be there and the
values it may take, and the checks of how fields agree with each other.

The compiler writes the file from these names and checks what it writes (`written_problem`); the driver checks
what it reads (`accelerator_problem`) before anything runs, as `ming csim` checks host.json, the host part
(`host_problem`). A problem is one line naming the field, None when there is none.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

try:
    from . import ming_host  # inside the ming package
except ImportError:
    import ming_host  # in OUT/deploy, beside this file

METADATA = "accelerator.json"
REBUILD = "run `ming build` again"
INTERFACES = ("zynq_axis_dma", "alveo_xrt")
CSIM_MODES = {"zynq_axis_dma": "axis", "alveo_xrt": "memory"}
# The element types a model input may have: what `ming reference` and `ming csim` take
INPUT_DTYPES = ("float32", "int8", "uint8")
QUANTIZERS = ("onnxruntime", "tflite")
HOST_OP_KINDS = ("softmax", "quantize", "dequantize", "reshape", "transpose", "tflite_softmax", "tflite_quantize",
                 "tflite_requantize", "table", "add", "sub", "mul", "div", "rsub", "rdiv")
INPUT_HOST_OP_KINDS = ("reshape", "transpose", "dequantize", "tflite_quantize", "tflite_requantize")
CONSTANT_HOST_OPS = ("add", "sub", "mul", "div", "rsub", "rdiv")
# The most int8 values an image puts on a port, as `ming build` bounds them (ming_py.limits, mirrored here: the
# driver runs without ming): one map holds at most MAX_MAP_VALUES (2**24), the output record, every output of the
# model together, at most the MAX_STREAMED_VALUES an image streams in all. Metadata stating more is not ming's,
# and the buffers it would size (values / 8 words per image) are refused before any is allocated.
MAX_MAP_VALUES = 2**24
MAX_RECORD_VALUES = 24_000_000
# The file names the metadata may give: C identifiers (model, kernels, the overlay's DMA), plain file names
# (no directory, no leading dot), and the exact shapes of the C-simulation's paths that emit/deploy.py writes.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.+-]*"
CSIM_BINARY = re.compile(rf"csim/{_NAME}")  # in deploy/csim/
CSIM_SOURCE = re.compile(rf"\.\./{_NAME}/{_NAME}\.cpp")  # in a directory of the build beside deploy/
CSIM_INCLUDE = re.compile(rf"\.\./{_NAME}")

SHAPE, NUMBER, INTEGER, LIST, TEXT, OBJECT = "a shape", "a number", "an integer", "a list", "a string", "an object"
ANY = "any value"


@dataclass(frozen=True)
class Field:
    """One field of a section. `missing` is the problem when it is absent (and `required`) or not of its `kind`
    (or empty, where `nonempty`); `wrong` the problem when it is of its kind but not among `choices`, not a
    full match of `pattern` or not `within(value)`. Both are formatted with where (the field's path), value,
    kind, choices (listed) and expected (`choices` joined by "or")."""

    kind: str
    required: bool = True
    nonempty: bool = False
    choices: tuple = ()
    pattern: re.Pattern | None = None
    within: object = None  # a test of the value's range
    section: dict | None = None  # the fields of an object, or of each object of a list
    missing: str = "'{where}' is missing or not {kind}"
    wrong: str = "'{where}' is {value!r}, not one of {choices}"


def _scale_in_range(value) -> bool:  # a float32 number above 0 (normal: no underflow to 0 or overflow to inf)
    return float(np.finfo(np.float32).tiny) <= value <= float(np.finfo(np.float32).max)


# The accelerator's values are int8 whatever the model's type: a uint8 model's zero points are shifted into int8
# by the frontend (onnx_formats), so every zero point of the metadata lies in int8's range.
_SCALE = Field(NUMBER, within=_scale_in_range, wrong="'{where}' is {value!r}, not a finite float32 number above 0")
_ZERO_POINT = Field(INTEGER, within=lambda value: ming_host.INT8_MIN <= value <= ming_host.INT8_MAX,
                    wrong=f"'{{where}}' is {{value}}, outside int8's range {ming_host.INT8_MIN}..{ming_host.INT8_MAX}")

HOST_OP = {  # a step before or after the accelerator (ming_host.HostOp.as_data)
    "kind": Field(TEXT, choices=HOST_OP_KINDS), "axis": Field(INTEGER), "scale": _SCALE, "zero_point": _ZERO_POINT,
    "shape": Field(SHAPE), "input_zero_point": Field(INTEGER, required=False, within=_ZERO_POINT.within,
                                                     wrong=_ZERO_POINT.wrong),
    "values": Field(LIST, required=False, missing="'{where}' is not a list of numbers"),
    "axes": Field(ANY, required=False),  # a permutation of the shape's axes: `_transpose_problem`
}
INPUT_HOST_OP = HOST_OP | {"kind": Field(TEXT, choices=INPUT_HOST_OP_KINDS)}
PORT = {
    "onnx_shape": Field(SHAPE), "array_shape": Field(SHAPE), "stream_shape": Field(SHAPE), "words": Field(INTEGER),
    "scale": _SCALE, "zero_point": _ZERO_POINT,
    "onnx_name": Field(TEXT, within=bool, wrong="'{where}' is empty"),
    "dtype": Field(TEXT, choices=INPUT_DTYPES), "permutation": Field(LIST),
    "quantizer": Field(ANY, required=False, choices=QUANTIZERS),
}
INPUT = PORT | {"host_ops": Field(LIST, required=False, section=INPUT_HOST_OP, missing="'{where}' is not a list")}
OUTPUT = PORT | {"index": Field(INTEGER), "host_ops": Field(LIST, section=HOST_OP)}
WEIGHTS = {  # where the build keeps weights in URAM (ming_py.weights_load.load_report)
    "file": Field(TEXT, pattern=re.compile(_NAME), wrong="'{where}' is {value!r}, not a plain file name"),
    "bytes": Field(INTEGER), "sha256": Field(TEXT),
    # what the reports say of the load; the driver reads none of them
    "words": Field(INTEGER, required=False), "port": Field(TEXT, required=False),
    "load_cycles": Field(INTEGER, required=False), "load_us": Field(NUMBER, required=False),
    "first_image_simulated_cycles": Field(INTEGER, required=False), "arrays": Field(LIST, required=False),
    "dma": Field(TEXT, required=False, pattern=IDENTIFIER, wrong="'{where}' is {value!r}, not an identifier"),
    "kernel": Field(TEXT, required=False, pattern=IDENTIFIER, wrong="'{where}' is {value!r}, not an identifier"),
}
_IDENTIFIER = Field(TEXT, pattern=IDENTIFIER, wrong="'{where}' is {value!r}, not an identifier")
_COUNT = Field(INTEGER, within=lambda value: value >= 0, wrong="'{where}' is {value!r}, not an integer of at least 0")
WEIGHTS_DDR_ARRAY = {  # one streamed port of the accelerator: the m_axi pointer `port`, in its own `bundle`
    "process": Field(TEXT), "port": _IDENTIFIER, "bundle": _IDENTIFIER, "offset_bytes": _COUNT, "words": _COUNT,
    "argument": Field(INTEGER, required=False, within=lambda value: value >= 0,
                      wrong="'{where}' is {value!r}, not an integer of at least 0"),  # Alveo: the kernel's argument
}
WEIGHTS_DDR = {  # where weights stream from DDR (ming_py.weights_ddr): one buffer of `file`, a pointer per array
    "file": Field(TEXT, pattern=re.compile(_NAME), wrong="'{where}' is {value!r}, not a plain file name"),
    "bytes": _COUNT, "sha256": Field(TEXT), "bytes_per_image": _COUNT,
    # the overlay's attribute of the accelerator (Zynq: its control registers), or its kernel (Alveo)
    "accelerator": Field(TEXT, required=False, pattern=IDENTIFIER, wrong=_IDENTIFIER.wrong),
    "kernel": Field(TEXT, required=False, pattern=IDENTIFIER, wrong=_IDENTIFIER.wrong),
    "arrays": Field(LIST, nonempty=True, section=WEIGHTS_DDR_ARRAY, missing="'{where}' is missing or empty"),
}
HOST = {  # host.json, and the same fields of accelerator.json
    "model": Field(TEXT, nonempty=True, pattern=IDENTIFIER, missing="no model name",
                   wrong="'{where}' is {value!r}, not a C identifier (the stem of hls/<model>.cpp)"),
    "graph": Field(ANY, required=False), "top": Field(ANY, required=False), "board": Field(ANY, required=False),
    "model_file": Field(ANY, required=False),
    "interface": Field(ANY, required=False, choices=INTERFACES),
    "input": Field(OBJECT, section=INPUT, missing="no 'input' object"),
    "outputs": Field(LIST, nonempty=True, section=OUTPUT, missing="no 'outputs' list"),
    "weights": Field(OBJECT, required=False, section=WEIGHTS),
}
CSIM = {  # the C-simulation in place of the hardware: its binary in deploy/csim/, compiled from the build
    "mode": Field(ANY, choices=tuple(CSIM_MODES.values()), wrong="'{where}' is {value!r}, not {expected!r}"),
    "binary": Field(ANY, pattern=CSIM_BINARY, wrong="'{where}' is {value!r}, not csim/<file name> (a file of "
                                                    "deploy/csim/)"),
    "sources": Field(LIST, nonempty=True, pattern=CSIM_SOURCE, missing="'{where}' is missing or not a list",
                     wrong="'{where}' holds {value!r}, not a path of the shape ../<directory>/<file>.cpp inside the "
                           "build"),
    "include": Field(LIST, pattern=CSIM_INCLUDE, missing="'{where}' is missing or not a list",
                     wrong="'{where}' holds {value!r}, not a path of the shape ../<directory> inside the build"),
}
_DEPLOY_FILE = "'{where}' is {value!r}, not a plain file name ending %s (a file of deploy/)"
ACCELERATOR = HOST | {
    "interface": Field(ANY, choices=INTERFACES),
    "target": Field(TEXT),
    "max_transfer_bytes": Field(INTEGER, within=lambda value: value >= 1, missing="'{where}' is {value!r}, not a "
                                "positive integer", wrong="'{where}' is {value!r}, not a positive integer"),
    "clock_mhz": Field(NUMBER, required=False, within=lambda value: value > 0,
                       missing="'{where}' is {value!r}, not a number above 0",
                       wrong="'{where}' is {value!r}, not a number above 0"),
    "csim": Field(OBJECT, section=CSIM),
    "weights_ddr": Field(OBJECT, required=False, section=WEIGHTS_DDR),
}
ZYNQ = ACCELERATOR | {  # the bitstream and its AXI DMA, reached through PYNQ
    "bitstream": Field(ANY, pattern=re.compile(rf"{_NAME}\.bit"), wrong=_DEPLOY_FILE % ".bit"),
    "dma": Field(ANY, pattern=IDENTIFIER, wrong="'{where}' is {value!r}, not an identifier"),
}
KERNELS = {role: Field(ANY, pattern=IDENTIFIER, wrong="'{where}' is {value!r}, not an identifier")
           for role in ("mm2s", "s2mm")}
ALVEO = ACCELERATOR | {  # the xclbin and its data-mover kernels, reached through XRT
    "xclbin": Field(ANY, pattern=re.compile(rf"{_NAME}\.xclbin"), wrong=_DEPLOY_FILE % ".xclbin"),
    "kernels": Field(OBJECT, section=KERNELS),
}
SECTIONS = {"zynq_axis_dma": ZYNQ, "alveo_xrt": ALVEO}


# ---- checking a document against the fields --------------------------------------------------------------

def _is(value: object, kind: str) -> bool:
    if kind == ANY:
        return True
    if kind == SHAPE:
        return isinstance(value, list) and all(_is(d, INTEGER) and d >= 0 for d in value)
    if kind == INTEGER:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == NUMBER:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return isinstance(value, {LIST: list, OBJECT: dict}.get(kind, str))


def _message(template: str, where: str, field: Field, value: object) -> str:
    return template.format(where=where, value=value, kind=field.kind, choices=", ".join(field.choices),
                           expected=" or ".join(field.choices))


def _type_problem(section: dict, key: str, field: Field, where: str) -> str | None:
    if key not in section:  # a field of any type states what it must be, missing or not
        template = field.wrong if field.kind == ANY else field.missing
        return _message(template, where, field, None) if field.required else None
    value = section[key]
    if not _is(value, field.kind) or (field.nonempty and not value):
        return _message(field.missing, where, field, value)
    return None


def _value_problem(value: object, field: Field, where: str) -> str | None:
    items = value if field.kind == LIST and field.pattern else [value]
    for item in items:
        if (field.choices and item not in field.choices) or (field.within and not field.within(item)) or \
                (field.pattern and not (isinstance(item, str) and field.pattern.fullmatch(item))):
            return _message(field.wrong, where, field, item)
    return None


def section_problem(section: object, fields: dict, where: str = "") -> str | None:
    """What is wrong with the fields of `section` (at the path `where`) taken one by one: first any missing or
    of the wrong type, then any out of range, then the sections inside it; None when nothing is."""
    if not isinstance(section, dict):
        return f"no '{where}' object"
    paths = {key: f"{where}.{key}" if where else key for key in fields}
    present = [key for key in fields if key in section]
    return next(filter(None, (*(_type_problem(section, key, fields[key], paths[key]) for key in fields),
                              *(_value_problem(section[key], fields[key], paths[key]) for key in present),
                              *(_inner_problem(section[key], fields[key], paths[key]) for key in present))), None)


def _inner_problem(value: object, field: Field, where: str) -> str | None:
    if field.section is None:
        return None
    if field.kind == OBJECT:
        return section_problem(value, field.section, where)
    return next(filter(None, (section_problem(item, field.section, f"{where}[{number}]")
                              for number, item in enumerate(value))), None)


def undeclared_fields(section: object, fields: dict, where: str = "") -> list[str]:
    """The paths of the keys in `section` (and the sections inside it) that `fields` does not declare."""
    if not isinstance(section, dict):
        return []
    found = []
    for key, value in section.items():
        path, field = f"{where}.{key}" if where else key, fields.get(key)
        if field is None:
            found.append(path)
        elif field.section is not None:
            items = [(path, value)] if field.kind == OBJECT else [(f"{path}[{n}]", v) for n, v in enumerate(value)]
            found += [name for item_path, item in items for name in undeclared_fields(item, field.section, item_path)]
    return found


# ---- how the fields agree -----------------------------------------------------------------------------------

def host_problem(host: object) -> str | None:
    """What is missing, malformed or inconsistent in the host side of the metadata (host.json, and the same
    fields of accelerator.json): None when every field has its type, range and agrees with the others."""
    if not isinstance(host, dict):
        return "no model name"
    problem = section_problem(host, HOST) or _input_steps_problem(host["input"]) or \
        _port_problem(host["input"], "input")
    if problem:
        return problem
    outputs = host["outputs"]
    for index, output in enumerate(outputs):
        name = f"outputs[{index}]"
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


def accelerator_problem(meta: object, deploy_dir: Path | None) -> str | None:
    """What is wrong with accelerator.json in `deploy_dir` (`host_problem`, the fields of its interface, the
    transfer limit and the C-simulation's paths), None when nothing is. Without `deploy_dir` (the file not yet
    written), the paths are checked by their shape alone."""
    problem = host_problem(meta)
    if problem:
        return problem
    interface = meta.get("interface")
    if interface not in SECTIONS:
        return f"'interface' is {interface!r}, not one of {', '.join(INTERFACES)}"
    problem = section_problem(meta, SECTIONS[interface])
    if problem:
        return problem
    limit = meta["max_transfer_bytes"]
    image_bytes = 8 * max(meta["input"]["words"], sum(output["words"] for output in meta["outputs"]))
    if limit < image_bytes:
        return f"'max_transfer_bytes' is {limit}, less than one image's {image_bytes} bytes"
    return _weights_ddr_problem(meta.get("weights_ddr"), interface) or csim_problem(meta["csim"], deploy_dir,
                                                                         CSIM_MODES[interface])


def _weights_ddr_problem(streamed: dict | None, interface: str) -> str | None:
    """The host's way to the accelerator is there (Zynq: "accelerator"; Alveo: "kernel" and every array's
    "argument"), and every streamed array's part lies inside weights_ddr.bin (16-byte words)."""
    if streamed is None:
        return None
    needed = ["weights_ddr.accelerator"] if interface == "zynq_axis_dma" else ["weights_ddr.kernel"] + [
        f"weights_ddr.arrays[{index}].argument" for index in range(len(streamed["arrays"]))]
    present = {f"weights_ddr.{key}" for key in streamed} | {
        f"weights_ddr.arrays[{index}].{key}" for index, array in enumerate(streamed["arrays"]) for key in array}
    missing = [path for path in needed if path not in present]
    if missing:
        return f"'{missing[0]}' is missing (the {interface} host reaches the accelerator through it)"
    for index, array in enumerate(streamed["arrays"]):
        if array["offset_bytes"] + 16 * array["words"] > streamed["bytes"]:
            return (f"'weights_ddr.arrays[{index}]' ends at byte {array['offset_bytes'] + 16 * array['words']}, "
                    f"past the {streamed['bytes']} bytes of '{streamed['file']}'")
    return None


def written_problem(meta: dict) -> str | None:
    """What is wrong with accelerator.json as the compiler is about to write it: a field the schema does not
    declare, or any problem the driver would find (`accelerator_problem`, paths by their shape)."""
    undeclared = undeclared_fields(meta, SECTIONS.get(meta.get("interface"), ACCELERATOR))
    if undeclared:
        return f"'{undeclared[0]}' is not a field of {METADATA}"
    return accelerator_problem(meta, None)


def csim_problem(csim: object, deploy_dir: Path | None, mode: str | None = None) -> str | None:
    """What is wrong with the metadata's "csim" paths: the binary must be a plain file name in deploy/csim/,
    the sources and include directories `../<directory>/...` of the build around deploy/, all of them
    staying inside the build once symbolic links are followed (checked when `deploy_dir` is given)."""
    if not isinstance(csim, dict):
        return "'csim' is missing or not an object"
    fields = CSIM if mode is None else CSIM | {"mode": Field(ANY, choices=(mode,), wrong=CSIM["mode"].wrong)}
    problem = section_problem(csim, fields, "csim")
    if problem or deploy_dir is None:
        return problem
    deploy_dir = Path(deploy_dir)
    deploy_real = deploy_dir.resolve()
    build_real = deploy_real.parent
    binary = csim["binary"]
    if (deploy_dir / "csim").is_symlink() or (deploy_dir / binary).is_symlink() or \
            (deploy_dir / binary).resolve() != deploy_real / binary:
        return f"'csim.binary' {binary} leads out of {deploy_dir / 'csim'} (a symbolic link)"
    for key in ("sources", "include"):
        for path in csim[key]:
            real = (deploy_dir / path).resolve()
            if real != build_real and build_real not in real.parents:
                return f"'csim.{key}' {path} leads out of the build {build_real} (a symbolic link)"
    return None


def _input_steps_problem(port: dict) -> str | None:
    """What is wrong with the shapes the input's host steps give (their fields are checked)."""
    steps = port.get("host_ops", [])
    for number, op in enumerate(steps):
        if op["kind"] == "transpose" and not _port_shape(dict(port, host_ops=steps[:number + 1])):
            shape = _port_shape(dict(port, host_ops=steps[:number]))
            return (f"'input.host_ops[{number}].axes' is {op.get('axes')!r}, not a permutation of the {len(shape)} "
                    f"axes of {shape}")
    return None


def _is_permutation(axes: object, rank: int) -> bool:
    return isinstance(axes, list) and sorted(a if _is(a, INTEGER) else -1 for a in axes) == list(range(rank))


def _port_shape(port: dict) -> list:
    """The shape the port's permutation reorders: the model's, or the last of the input's layout steps'."""
    shape = list(port["onnx_shape"])
    for op in port.get("host_ops", []) if "index" not in port else []:
        if op["kind"] == "reshape":
            shape = list(op["shape"])
        elif op["kind"] == "transpose":
            if not _is_permutation(op.get("axes"), len(shape)):
                return []
            shape = [shape[a] for a in op["axes"]]
    return shape


def _port_problem(port: dict, name: str) -> str | None:
    """How one port's shapes, word count and permutation agree (their types and ranges are checked)."""
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
    if permutation and not _is_permutation(permutation, len(layout_shape)):
        return f"'{name}.permutation' is {permutation}, not a permutation of the {len(layout_shape)} axes"
    return None


def _host_ops_problem(port: dict, name: str) -> str | None:
    """How an output's steps agree with the shapes they are given (their fields are checked)."""
    shape = port["array_shape"]
    for number, op in enumerate(port["host_ops"]):
        where = f"{name}.host_ops[{number}]"
        if op["kind"] in ("softmax", "tflite_softmax") and not -len(shape) <= op["axis"] < len(shape):
            return f"'{where}.axis' is {op['axis']}, not an axis of the shape {shape}"
        if op["kind"] == "reshape":
            if not op["shape"] or 0 in op["shape"] or math.prod(op["shape"]) != math.prod(shape):
                return f"'{where}.shape' is {op['shape']}, not a shape of {math.prod(shape)} values"
            shape = op["shape"]
        if op["kind"] == "transpose":
            if not _is_permutation(op.get("axes"), len(shape)):
                return f"'{where}.axes' is {op.get('axes')!r}, not a permutation of the {len(shape)} axes of {shape}"
            shape = [shape[a] for a in op["axes"]]
        problem = _float_step_problem(op, where, shape)
        if problem:
            return problem
    return None


def _float_step_problem(op: dict, where: str, shape: list) -> str | None:
    """What is wrong with a float post-processing step (`ming_host.HostOp`) on values of `shape`."""
    values = op.get("values", [])
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return f"'{where}.values' is not a list of numbers"  # inf allowed: where onnxruntime's Exp overflows
    if op["kind"] == "table" and len(values) != 256:
        return f"'{where}.values' has {len(values)} numbers, not the 256 of an int8 table"
    if op["kind"] in CONSTANT_HOST_OPS:
        if len(values) != math.prod(op["shape"]):
            return (f"'{where}.values' has {len(values)} numbers, not the {math.prod(op['shape'])} of shape "
                    f"{op['shape']}")
        if len(op["shape"]) > len(shape) or any(c not in (1, s) for c, s in zip(op["shape"][::-1], shape[::-1])):
            return f"'{where}.shape' {op['shape']} does not broadcast to the values' shape {shape}"
    return None
