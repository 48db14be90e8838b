"""The saved design (OUT/design/, `ming_py.design_file`): every kind of process, every epilogue and host step
read back as written, byte for byte; a design edited into something ming cannot use refused in one line naming
the field. Hand-made stream graphs: no model, no IREE, no compiler."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import types
import typing
from pathlib import Path

import numpy as np
import pytest

from ming_py import design_file, ir
from ming_py.dataclass_codec import Arrays, DecodeError, decode, encode
from ming_py.dataflow import Port, ProcessSchedule, Schedule
from ming_py.design_checks import EPILOGUE_DTYPES
from ming_py.design_file import Estimates, ModelFile, SavedDesign, VerificationImage, design_files, read_design
from ming_py.errors import MingError
from ming_py.ilp.cost import Cost
from ming_py.kinds import kind_of
from ming_py.contract.ming_host import HostOp
from ming_py.verify import IMAGES
from test_unit_processes import CASES, graph_of

pytestmark = pytest.mark.unit

EPILOGUES = typing.get_args(ir.Epilogue)


def example_of(kind, seed: int = 0):
    """A value of the annotated type `kind`, every field of a dataclass filled: a field added later is covered."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return example_of(next(a for a in args if a is not type(None)), seed)
    if dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        return kind(**{f.name: example_of(hints[f.name], seed + i) for i, f in enumerate(dataclasses.fields(kind))})
    if origin is tuple:
        return tuple(example_of(args[0], seed + i) for i in range(2)) if args and args[-1] is Ellipsis else \
            tuple(example_of(a, seed + i) for i, a in enumerate(args))
    return {int: seed + 3, float: seed + 0.1, str: f"s{seed}", bool: seed % 2 == 0, np.float32: np.float32(seed / 7),
            np.ndarray: np.arange(seed, seed + 6, dtype=np.int32).reshape(2, 3), tuple: (seed, seed + 0.5)}[kind]


TOTALS = {"cycles": 11, "latency_us": 0.044, "interval_cycles": 9, "estimated_cycles": 10,
          "estimated_latency_us": 0.04, "throughput_cycles": 8, "roofline_cycles": 2, "macs": 64, "dsp": 1,
          "bram18k": 0, "uram": 0, "lut": 300,
          "solver": {"rule": "fastest", "objective": "fastest", "status": "optimal", "variables": 4, "constraints": 3,
                     "budget": {"dsp": 5, "bram18k": 4, "uram": 0, "lut": 1000}}}


def epilogue_of(kind):
    """An example epilogue of the class `kind`, its arrays of the element types ming writes."""
    example = example_of(kind)
    for name, dtype in EPILOGUE_DTYPES.get(kind.__name__, {}).items():
        setattr(example, name, getattr(example, name).astype(dtype))
    return example


def saved_of(case, epilogue=None) -> SavedDesign:
    graph, process = graph_of(case.kind, case.ins, case.outs, case.win, case.params)
    process.weights = np.arange(-8, 8, dtype=np.int8)
    process.epilogue = epilogue
    host = (HostOp("dequantize", scale=0.5, zero_point=-3), HostOp("softmax", axis=1),
            HostOp("add", shape=(1, 1), values=(np.float32(0.1),)))
    graph.outputs = tuple(dataclasses.replace(port, host_ops=host) for port in graph.outputs)
    graph.input = dataclasses.replace(graph.input, host_ops=(HostOp("tflite_quantize", scale=0.25, zero_point=1),),
                                      dtype="uint8", quantizer="tflite")
    lanes = dict(zip(process.inputs, case.lanes_in)) | dict(zip(process.outputs, case.lanes_out))
    multipliers = kind_of(case.kind).multiplier_choices(dict(case.unroll))[0]
    schedule = Schedule({"p": ProcessSchedule(case.unroll, (("line_buffer", "lutram"),), multipliers, 0)}, lanes,
                        {name: 4 for name in graph.channels})
    cost = Cost(10, 2, 1, 0, 0, 300, 200, (1, 2), ((3, 4),), (("lut", "adder", 12.5),))
    estimates = Estimates({"p": cost}, TOTALS, design_file.schedule_fingerprint(schedule), "kv260")
    raw, expected = (sum(graph.channels[port.channel].values for port in ports)
                     for ports in ((graph.input,), graph.outputs))
    images = {name: VerificationImage(bytes(i % 256 for i in range(raw)), b"\x80\x7f" * (expected // 2) +
                                      b"\x00" * (expected % 2)) for name in IMAGES}
    return SavedDesign(graph, schedule, "kv260", 250.0, estimates, {"p": "sliding_window"}, images,
                       ModelFile("/m/model.onnx", "ab" * 32))


def written(saved: SavedDesign, out: Path) -> Path:
    for name, content in design_files(saved).items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return out


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_every_kind_of_process_reads_back_as_written(case, tmp_path):
    saved = saved_of(case)
    files = design_files(saved)
    again = read_design(written(saved, tmp_path))
    assert design_files(again) == files
    process, port = again.stream_graph.processes[0], again.stream_graph.outputs[0]
    assert process.weights.dtype == np.int8 and isinstance(process.inputs, tuple)
    assert process.params == case.params and type(process.params) is type(case.params)
    assert port.host_ops[2].values == (np.float32(0.1),) and isinstance(port.host_ops[2].shape, tuple)
    assert again.schedule == saved.schedule and again.estimates == saved.estimates
    assert again.images == saved.images and again.model_file == saved.model_file


@pytest.mark.parametrize("epilogue", EPILOGUES, ids=lambda kind: kind.__name__)
def test_every_epilogue_reads_back_with_its_types(epilogue, tmp_path):
    saved = saved_of(CASES[0], epilogue_of(epilogue))
    again = read_design(written(saved, tmp_path))
    assert design_files(again) == design_files(saved)
    before, after = saved.stream_graph.processes[0].epilogue, again.stream_graph.processes[0].epilogue
    assert type(after) is epilogue
    for f in dataclasses.fields(epilogue):
        assert _same(getattr(before, f.name), getattr(after, f.name)), f.name


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b)
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name))
                                          for f in dataclasses.fields(a))
    return type(a) is type(b) and a == b


def test_the_document_is_deterministic_and_versioned():
    saved = saved_of(CASES[1], epilogue_of(ir.AccRequant))
    files = design_files(saved)
    assert design_files(saved) == files
    document = json.loads(files["design/design.json"])
    assert (document["format"], document["version"]) == ("ming-design", 4)
    assert all(name.startswith("design/arrays/") for name in files if name.endswith(".npy"))


def _edit(out: Path, change) -> None:
    path = out / "design" / "design.json"
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


def _process(document) -> dict:
    return document["stream_graph"]["processes"][0]


EDITS = [
    ("version", lambda d: d.update(version=1), "version: 1 is not version 4"),
    ("format", lambda d: d.update(format="other"), "format: expected 'ming-design'"),
    ("wrong type", lambda d: d["schedule"]["processes"]["p"].update(unroll=[["oc", "2"]]),
     r"schedule\.processes\.p\.unroll\[0\]\[1\]: expected int, got a string"),
    ("bool for int", lambda d: d["schedule"]["lanes"].update(in0=True), r"schedule\.lanes\.in0: expected int"),
    ("unknown field", lambda d: _process(d).update(colour="red"), r"processes\[0\]\.colour: is no field of Process"),
    ("missing field", lambda d: _process(d).pop("kind"), r"processes\[0\]\.kind: is missing"),
    ("epilogue type", lambda d: _process(d).update(epilogue={"type": "Nothing"}), r"epilogue: expected an object"),
    ("array name", lambda d: _process(d).update(weights={"array": "../host.json"}), "is no array file name"),
    ("absent array", lambda d: _process(d).update(weights={"array": "arrays/99.npy"}), "arrays/99.npy: No such file"),
    ("invalid unroll", lambda d: d["schedule"]["processes"]["p"].update(unroll=[["oc", 3], ["ic", 1], ["k", 1]]),
     "schedule: p: unroll oc=3 does not divide"),
    ("unknown producer", lambda d: d["stream_graph"]["channels"]["in0"].update(producer="ghost"),
     "producer 'ghost' is no process"),
    ("huge map", lambda d: d["stream_graph"]["channels"]["in0"].update(height=10 ** 9), "maps of"),
    ("zero depth", lambda d: d["schedule"]["depths"].update(in0=0), "each depth at least 1"),
]


@pytest.mark.parametrize("label, change, message", EDITS, ids=[e[0] for e in EDITS])
def test_an_edit_ming_cannot_use_is_refused_naming_the_field(label, change, message, tmp_path):
    out = written(saved_of(CASES[0]), tmp_path)
    _edit(out, change)
    with pytest.raises(MingError, match=message) as refused:
        read_design(out)
    assert "\n" not in str(refused.value) and "ming build" in str(refused.value)


def test_an_oversize_array_is_refused(tmp_path, monkeypatch):
    out = written(saved_of(CASES[0]), tmp_path)
    monkeypatch.setattr(design_file, "MAX_ARRAY_VALUES", 15)
    with pytest.raises(MingError, match=r"weights: arrays/\d+\.npy: larger than|holds 16 values, more than 15"):
        read_design(out)


@pytest.mark.parametrize("which", ["design.json", "arrays/0.npy", "arrays"])
def test_a_symbolic_link_in_the_design_is_refused(which, tmp_path):
    out = written(saved_of(CASES[0]), tmp_path / "out")
    path = out / "design" / which
    target = tmp_path / "elsewhere"
    os.rename(path, target)
    path.symlink_to(target)
    with pytest.raises(MingError, match="symbolic link|Too many levels|not a regular file|cannot be read|arrays/0"):
        read_design(out)


def test_a_missing_design_says_how_to_make_one(tmp_path):
    with pytest.raises(MingError, match="holds no saved design.*ming build"):
        read_design(tmp_path)


def test_a_union_of_dataclasses_names_its_class():
    arrays = Arrays()
    data = encode(example_of(ir.Rescale), ir.Epilogue | None, arrays)
    assert data["type"] == "Rescale"
    assert type(decode(data, ir.Epilogue | None, arrays)) is ir.Rescale
    with pytest.raises(DecodeError, match="x_scale: expected float32, got a string"):
        decode(data | {"x_scale": "big"}, ir.Epilogue | None, arrays)


def test_a_port_without_host_steps_reads_back():
    port = Port("c", (1, 2, 3), "x", (1, 3, 2), 0.5, -1)
    arrays = Arrays()
    assert decode(encode(port, Port, arrays), Port, arrays) == port


def _dataclasses_of(kind, found: dict) -> dict:
    """Every dataclass a saved design holds, by name."""
    for arg in typing.get_args(kind):
        _dataclasses_of(arg, found)
    if dataclasses.is_dataclass(kind) and kind.__name__ not in found:
        found[kind.__name__] = kind
        for hint in typing.get_type_hints(kind).values():
            _dataclasses_of(hint, found)
        for subclass in kind.__subclasses__():  # a kind's parameters (`KindParams`)
            _dataclasses_of(subclass, found)
    return found


def test_the_format_page_names_every_field():
    page = (Path(__file__).resolve().parent.parent / "docs" / "design_format.md").read_text()
    missing = [f"{name}.{f.name}" for name, kind in _dataclasses_of(SavedDesign, {}).items()
               for f in dataclasses.fields(kind) if not re.search(rf"\b{f.name}\b", page)]
    assert missing == []


def _window(document) -> dict:
    return _process(document)["window"]


def _case(name: str):
    return next(case for case in CASES if repr(case) == name)


GRAPH_EDITS = [  # edits that decode but describe nothing ming can emit
    ("no images", "conv3x3_folded", lambda d: d.update(images={}), r"images: \[\], not the images"),
    ("short image", "conv3x3_folded", lambda d: d["images"].pop("extremes"), "images:"),
    ("zero clock", "conv3x3_folded", lambda d: d.update(clock_mhz=0), "clock_mhz: 0 .a number from 1 to 1000"),
    ("NaN clock", "conv3x3_folded", lambda d: d.update(clock_mhz=float("nan")), "clock_mhz: nan"),
    ("zero groups", "conv3x3_folded", lambda d: _window(d).update(groups=0), r"window: groups 0 \(each at least 1\)"),
    ("zero stride", "conv3x3_folded", lambda d: _window(d).update(stride=[0, 1]), r"window: stride \[0, 1\]"),
    ("zero dilation", "conv3x3_folded", lambda d: _window(d).update(dilation=[1, 0]), r"window: dilation \[1, 0\]"),
    ("groups not dividing", "conv3x3_folded", lambda d: _window(d).update(groups=3), "3 groups do not divide"),
    ("window off its map", "conv3x3_folded", lambda d: _window(d).update(in_height=5),
     r"window: input map \[4, 5, 6\], but channel"),
    ("zero channels", "conv3x3_folded", lambda d: d["stream_graph"]["channels"]["in0"].update(channels=0),
     r"channels\.in0: channels 0 \(at least 1\)"),
    ("unknown kind", "conv3x3_folded", lambda d: _process(d).update(kind="fft"), "unknown process kind 'fft'"),
    ("permute without order", "permute", lambda d: _process(d).update(params=None),
     "a permute process needs its PermuteOrder"),
    ("permute order too short", "permute", lambda d: _process(d)["params"].update(order=[1, 0]),
     "params.order: not a permutation of the input's 4 channels"),
    ("permute order invalid", "permute", lambda d: _process(d)["params"].update(order=[1, 1, 2, 3]),
     r"processes\[0\]\.params: permute order"),
    ("split route past the input", "split_routes", lambda d: _process(d)["params"].update(routes=[[0, 2], [4, 4]]),
     r"params\.routes\[1\]: channels 4 \.\. 7 of 6"),
    ("split routes too few", "split_routes", lambda d: _process(d)["params"].update(routes=[[0, 2]]),
     "1 routes for 2 outputs"),
    ("split without routes", "split_routes", lambda d: _process(d).update(params=None),
     "not every output carries the input's 6 channels"),
    ("bilinear table short", "bilinear_2x", lambda d: _process(d)["params"]["rows"].pop(),
     "5 row and 8 column entries for an output of 6 x 8"),
    ("bilinear without tables", "bilinear_2x", lambda d: _process(d).update(params=None),
     "needs its BilinearTables"),
    ("params of another kind", "conv3x3_folded", lambda d: _process(d).update(params={"type": "PermuteOrder",
                                                                                         "order": [0]}),
     "a conv process's params are null, found PermuteOrder"),
    ("output permutation", "conv3x3_folded", lambda d: d["stream_graph"]["outputs"][0].update(permutation=[0, 2, 1]),
     r"outputs\[0\]\.permutation"),
    ("estimates totals", "conv3x3_folded", lambda d: d["estimates"]["totals"].pop("estimated_latency_us"),
     r"estimates\.totals\.estimated_latency_us: missing or malformed"),
    ("estimates solver", "conv3x3_folded", lambda d: d["estimates"]["totals"].pop("solver"),
     r"estimates\.totals\.solver: missing"),
    ("estimates costs", "conv3x3_folded", lambda d: d["estimates"].update(costs={}),
     r"estimates\.costs: not one cost per process"),
]


@pytest.mark.parametrize("label, case, change, message", GRAPH_EDITS, ids=[e[0] for e in GRAPH_EDITS])
def test_an_edit_inconsistent_with_the_graph_is_refused(label, case, change, message, tmp_path):
    out = written(saved_of(_case(case)), tmp_path)
    _edit(out, change)
    with pytest.raises(MingError, match=message) as refused:
        read_design(out)
    assert "\n" not in str(refused.value) and "ming build" in str(refused.value)


@pytest.mark.parametrize("epilogue, field", [(kind, name) for kind in EPILOGUES
                                             for name in EPILOGUE_DTYPES.get(kind.__name__, {})] + [(None, "weights")])
def test_an_array_of_another_element_type_is_refused(epilogue, field, tmp_path):
    saved = saved_of(CASES[0], epilogue_of(epilogue) if epilogue else None)
    process = saved.stream_graph.processes[0]
    owner = process.epilogue if epilogue else process
    setattr(owner, field, getattr(owner, field).astype(np.float64))
    with pytest.raises(MingError, match=rf"{field}: float64 values, not"):
        read_design(written(saved, tmp_path))


@pytest.mark.parametrize("edited", [False, True])
def test_a_failure_emitting_an_edited_design_is_one_line(edited, tmp_path, monkeypatch):
    from ming_py import build
    from ming_py.output import write_tree

    out = tmp_path / "out"
    write_tree(design_files(saved_of(CASES[0])), out, [])
    if edited:
        _edit(out, lambda document: None)  # the same design, no longer as ming writes it

    def failing(saved, **_):
        raise KeyError("latency_us")

    monkeypatch.setattr(build, "emit", failing)
    if not edited:  # ming's own design: its failure stays visible
        with pytest.raises(KeyError):
            build.emit_build(out, verify=False)
        return
    with pytest.raises(MingError, match=r"design\.json: ming cannot emit this edited design \(KeyError: "
                                        r"'latency_us'\); build it again with `ming build`"):
        build.emit_build(out, verify=False)


def test_the_arrays_of_a_design_are_read_within_a_budget_for_them_all(tmp_path, monkeypatch):
    saved = saved_of(CASES[0])
    out = written(saved, tmp_path)
    in_all = sum(len(content) for name, content in design_files(saved).items() if name.endswith(".npy"))
    monkeypatch.setattr(design_file, "max_arrays_bytes", lambda: in_all)
    read_design(out)
    monkeypatch.setattr(design_file, "max_arrays_bytes", lambda: in_all - 1)
    with pytest.raises(MingError, match=rf"the design's arrays hold more than {in_all - 1:,} bytes in all"):
        read_design(out)


def test_a_schedule_of_an_unknown_kind_is_a_problem_not_an_exception():
    from ming_py.process_spec import validate_schedule

    saved = saved_of(CASES[0])
    saved.stream_graph.processes[0].kind = "fft"
    assert validate_schedule(saved.stream_graph, saved.schedule)[0] == "p: unknown process kind 'fft'"
