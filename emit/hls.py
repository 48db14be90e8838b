"""HLS C++ emission: StreamGraph + Schedule -> a Vitis HLS project (jinja2 templates).

Every process becomes one C++ function (templates in `templates/process/`), the
channels become `hls::stream`s of the scheduled lane width and FIFO depth, and
the constants (weights in each process's loop order, the integer requantization
constants of `ming_py.numerics`) go to `<model>_weights.h`. Identifiers and file
names come from `identifiers.cpp_names`; comments and strings quote the model's
own names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import numpy as np

from ming_py import __version__, numerics
from ming_py.boards import Board
from ming_py.array_layout import ArrayPlan
from ming_py.dataflow import Process, Schedule, StreamGraph
from ming_py.kernel import KernelSpec, Loop, kernel_spec, loop_of
from ming_py.kinds import kind_of, unrollable
from ming_py.storage import average_shift, plan_arrays
from ming_py.ir import (
    AccRequant,
    AddRequant,
    AverageRequant,
    FixedPointAdd,
    FixedPointAverage,
    FixedPointRequant,
    LookupTable,
    MulRequant,
    Rescale,
)

from .identifiers import CppNames, c_string, comment_text, cpp_names, markdown_cell

TEMPLATES = Path(__file__).resolve().parent / "templates"
STATIC_HEADERS = ("ming_stream.h", "ming_numerics.h", "ming_hls_stream.h", "ming_check.h")


@dataclass
class CConstant:
    name: str
    ctype: str
    array: np.ndarray
    comment: str

    @property
    def dims(self) -> str:
        return "".join(f"[{n}]" for n in self.array.shape)

    @property
    def values(self) -> str:
        return _c_initializer(self.array)


@dataclass
class ProcessView:
    """What a process template needs, with every number and identifier already decided."""

    name: str  # the C++ function
    label: str  # the process's own name, escaped for a string literal
    kind: str
    template: str
    comment: str
    inputs: list[str]  # C++ stream variables
    outputs: list[str]
    in_lanes: list[int]
    out_lanes: list[int]
    unroll: list[tuple[str, int]]
    spec: KernelSpec
    loop: Loop
    storage: dict[str, ArrayPlan]  # role -> layout; local arrays are named by their role
    window: object = None
    in_pixels: int = 0
    multipliers: str = "dsp"  # ming_py.kinds.window.MULTIPLIERS
    epilogue: str = ""
    arrays: dict[str, str] = field(default_factory=dict)  # role -> C++ constant array
    extra: dict = field(default_factory=dict)  # the kind's own values (`ProcessKind.view_values`) and the epilogue's

    def factor(self, loop: str) -> int:
        return dict(self.unroll).get(loop, 1)

    def __getattr__(self, name):  # epilogue constants (zero_point, mantissa, ...)
        extra = self.__dict__.get("extra", {})
        if name in extra:
            return extra[name]
        raise AttributeError(name)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=False, lstrip_blocks=False)
    env.filters["md"] = lambda value: markdown_cell(str(value))
    return env


def emit_hls(graph: StreamGraph, schedule: Schedule, board: Board) -> dict[str, str]:
    """The files of OUT/hls/, as {relative path: text}."""
    env = _environment()
    names = cpp_names(graph)
    views, constants = [], []
    for process in graph.processes:
        view, consts = _process_view(graph, schedule, process, names)
        views.append(view)
        constants += consts
    model = _model_view(graph, schedule, names)
    internal = [c for c in graph.channels.values() if c.producer != "input" and c.consumer != "output"]
    channels = [{"name": names.channels[c.name], "label": c_string(c.name), "lanes": schedule.lanes_of(c.name),
                 "depth": schedule.depth_of(c.name)} for c in internal]
    context = {"model": model, "processes": views, "channels": channels, "constants": constants,
               "version": __version__, "board": board, "ip": ip_identity(names.model, board)}
    name = names.model
    # every process's pipelined loop as report.json states it, for run_hls.tcl to check after synthesis
    planned_loops = pipeline_loops(graph, schedule)
    files = {
        f"{name}.cpp": _tidy(env.get_template("model.cpp.j2").render(context)),
        f"{name}.h": env.get_template("model.h.j2").render(context),
        f"{name}_weights.h": env.get_template("weights.h.j2").render(context),
        f"{name}_tb.cpp": env.get_template("testbench.cpp.j2").render(context),
        "run_hls.tcl": env.get_template("run_hls.tcl.j2").render(context | {"planned_loops": planned_loops}),
    }
    for header in STATIC_HEADERS:
        files[header] = (TEMPLATES / header).read_text()
    return files


def ip_identity(model: str, board: Board) -> dict[str, str]:
    """The exported IP's VLNV (vendor:library:name:version) and catalog texts: the model names the IP,
    ming's major.minor version versions it."""
    major, minor = __version__.split(".")[:2]
    return {"vendor": "ming", "library": "hls", "name": model, "version": f"{major}.{minor}",
            "display_name": f"{model} (ming)",
            "description": f"{model}: int8 streaming dataflow accelerator for {board.name}, generated by ming {__version__}"}


def _tidy(text: str) -> str:
    """Collapse the blank lines template control flow leaves behind (runs of them, and before a closing brace)."""
    lines = [line.rstrip() for line in text.splitlines()]
    out: list[str] = []
    for line in lines:
        if line.strip() == "}" and out and not out[-1]:
            out.pop()
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip() + "\n"


def _model_view(graph: StreamGraph, schedule: Schedule, names: CppNames) -> dict:
    inp = graph.channels[graph.input.channel]
    outputs = [_output_view(graph, schedule, names, port, values)
               for port, values in zip(graph.outputs, names.output_values)]
    return {
        "name": names.model, "title": comment_text(graph.name), "top": names.top, "dataflow": names.dataflow,
        "input_values": names.input_values, "write_outputs": names.write_outputs,
        "summary": f"{len(graph.processes)} processes, {len(graph.channels)} channels; "
                   f"{_shape_text(inp)} int8 in, {' + '.join(o.shape_text for o in outputs)} int8 out.",
        "input_channel": names.channels[inp.name], "input_label": c_string(inp.name),
        "in_lanes": schedule.lanes_of(inp.name), "in_depth": schedule.depth_of(inp.name), "in_values": inp.values,
        "in_shape_text": _shape_text(inp),
        "in_scale": f"{graph.input.scale:.9g}", "in_zero_point": graph.input.zero_point,
        "outputs": outputs,
    }


@dataclass
class OutputView:
    """One output of the accelerator, in the order of the output record, as the templates need it."""

    channel: str  # C++ stream variable
    label: str
    lanes: int
    depth: int
    count: int  # int8 values per image
    count_name: str  # its constexpr in <model>.h
    shape_text: str
    scale: str
    zero_point: int
    title: str


def _output_view(graph: StreamGraph, schedule: Schedule, names: CppNames, port, count_name: str) -> OutputView:
    channel = graph.channels[port.channel]
    return OutputView(names.channels[channel.name], c_string(channel.name), schedule.lanes_of(channel.name),
                      schedule.depth_of(channel.name), channel.values, count_name, _shape_text(channel),
                      f"{port.scale:.9g}", port.zero_point,
                      comment_text(f"'{port.onnx_name}' (model output {port.index})"))


def _process_view(graph: StreamGraph, schedule: Schedule, p: Process,
                  names: CppNames) -> tuple[ProcessView, list[CConstant]]:
    ins = [graph.channels[c] for c in p.inputs]
    outs = [graph.channels[c] for c in p.outputs]
    sched = schedule.of(p.name)
    lanes_in, lanes_out = [schedule.lanes_of(c) for c in p.inputs], [schedule.lanes_of(c) for c in p.outputs]
    spec = kernel_spec(graph, p, sched.unroll, lanes_in, lanes_out)
    kind = kind_of(p.kind)
    shapes = f"{' + '.join(_shape_text(c) for c in ins)} -> {_shape_text(outs[0])}"
    view = ProcessView(
        name=names.processes[p.name], label=c_string(p.name), kind=p.kind, template=kind.template,
        comment=comment_text(kind.describe(p, ins, outs, shapes)),
        inputs=[names.channels[c] for c in p.inputs], outputs=[names.channels[c] for c in p.outputs],
        in_lanes=lanes_in, out_lanes=lanes_out,
        unroll=[(loop, sched.factor(loop)) for loop in unrollable(p)], spec=spec, loop=loop_of(spec),
        storage=plan_arrays(spec, p.epilogue, sched.storage_of("line_buffer")), window=p.window,
        in_pixels=ins[0].pixels, multipliers=sched.multipliers, arrays=names.arrays[p.name],
        extra=kind.view_values(spec, p, lanes_in, lanes_out))
    constants: list[CConstant] = []

    def constant(role: str, ctype: str, array: np.ndarray, comment: str) -> None:
        constants.append(CConstant(view.arrays[role], ctype, array, comment_text(f"{p.name}: {comment}")))

    if p.weights is not None:
        constant("weights", "int8_t", kind.weight_rows(p.weights, spec).astype(np.int8),
                 f"weights {kind.weights_layout(p)}, one row of every weight a fold step multiplies")
    _epilogue(view, p, constant)
    return view, constants


# The label of the one pipelined loop of each process template is its kind's `pipeline_label` (emit/templates/
# process/<template>.cpp.j2: the line before the `for` over ITERATIONS whose body opens with the PIPELINE pragma;
# tests/test_report_checks.py holds the two together). Vitis HLS names the loop so in its reports
# (SummaryOfLoopLatency/<label>, in the function's report or in that of the module <function>_Pipeline_<label>);
# run_hls.tcl looks it up there.
PLANNED_II = 1  # every process loop is pipelined at II=1 (ming_py/kernel.py)


def pipeline_loops(graph: StreamGraph, schedule: Schedule) -> list[dict]:
    """Per process, in the graph's order, its pipelined loop as the emitted C++ has it: the C++ function, the
    loop's label, the planned initiation interval and the trip count (`loop_of(...).iterations`, the
    ITERATIONS of the template)."""
    names = cpp_names(graph)
    loops = []
    for p in graph.processes:
        sched = schedule.of(p.name)
        spec = kernel_spec(graph, p, sched.unroll, [schedule.lanes_of(c) for c in p.inputs],
                           [schedule.lanes_of(c) for c in p.outputs])
        loops.append({"function": names.processes[p.name], "loop": kind_of(p.kind).pipeline_label,
                      "trip_count": loop_of(spec).iterations, "ii": PLANNED_II})
    return loops


def _per_tile(values: np.ndarray, lanes: int) -> np.ndarray:
    """Per-output-channel constants as [output tile][lane]."""
    return values.reshape(-1, lanes)


def _shape_text(channel) -> str:
    return f"{channel.channels}x{channel.height}x{channel.width}"


def _epilogue(view: ProcessView, p: Process, constant) -> None:
    """The epilogue's template values; its constant arrays go to `constant(role, ctype, array, comment)`."""
    e = p.epilogue
    if isinstance(e, AccRequant):
        lanes = view.out_lanes[0]
        view.extra["zero_point"] = e.zero_point
        constant("bias", "int32_t", _per_tile(e.bias.astype(np.int32), lanes),
                 "int32 bias with the input zero-point correction folded in, [output tile][lane]")
        lean = numerics.lean_channels(e.multipliers)
        view.epilogue = "requantize"
        view.extra["lean"] = lean is not None
        if lean is not None:
            ctypes = {"mantissa": "uint32_t", "shift": "uint8_t", "limit": "uint32_t"}
            for role in view.arrays:
                if role in ctypes:
                    values = np.array([getattr(c, role) for c in lean], dtype=ctypes[role].removesuffix("_t"))
                    constant(role, ctypes[role], _per_tile(values, lanes), _LEAN_COMMENTS[role])
            if "shift" not in view.arrays:
                view.extra["shift"] = lean[0].shift
        else:
            mantissa, exponent = numerics.float32_parts(e.multipliers)
            constant("mantissa", "int32_t", _per_tile(mantissa.astype(np.int32), lanes),
                     "requantization multiplier float32(x_scale * w_scale / y_scale) = mantissa * 2^exponent "
                     "(exact float32 emulation: some channel's multiplier is below 2^-15)")
            constant("exponent", "int32_t", _per_tile(exponent.astype(np.int32), lanes), "requantization exponent")
    elif isinstance(e, FixedPointRequant):
        lanes = view.out_lanes[0]
        view.epilogue = "fixed_point"
        view.extra.update(zero_point=e.zero_point, double_round=e.double_round, qmin=e.qmin, qmax=e.qmax)
        constant("bias", "int32_t", _per_tile(e.bias.astype(np.int32), lanes),
                 "int32 bias with the input zero-point correction folded in, [output tile][lane]")
        if e.float32:
            view.epilogue = "fixed_point_float"
            mantissa, exponent = numerics.float32_parts(e.float_multipliers)
            constant("mantissa", "int32_t", _per_tile(mantissa.astype(np.int32), lanes),
                     "float32(multiplier * 2^-shift) = mantissa * 2^exponent (LiteRT's FULLY_CONNECTED rounds "
                     "f32(acc) times it half away from zero)")
            constant("exponent", "int32_t", _per_tile(exponent.astype(np.int32), lanes), "its exponent")
            return
        constant("multiplier", "int32_t", _per_tile(e.multiplier.astype(np.int32), lanes),
                 "TFLite's Q31 requantization multiplier, [output tile][lane]")
        constant("shift", "uint8_t", _per_tile(e.shift.astype(np.uint8), lanes),
                 "right shift of the 64-bit product (31 + TFLite's right shift), [output tile][lane]")
    elif isinstance(e, AverageRequant):
        view.extra.update(zero_point=e.zero_point, x_zero_point=e.x_zero_point, count=e.count)
        shift = average_shift(e)
        if shift is not None:  # a power-of-two multiplier
            view.epilogue = "shift"
            view.extra.update(offset=shift.offset, shift=shift.shift, zero_point=shift.zero_point)
        elif e.global_pool:
            multiplier = numerics.ort_gap_multiplier(e.x_scale, e.y_scale, e.count)
            lean = numerics.lean_requant(multiplier)
            view.epilogue = "requantize_global"
            view.extra["lean"] = lean is not None
            if lean is not None:
                view.extra.update(mantissa=lean.mantissa, shift=lean.shift, limit=lean.limit)
            else:
                mantissa, exponent = numerics.float32_parts(multiplier)
                view.extra.update(mantissa=int(mantissa), exponent=int(exponent))
        elif e.exclude_padding:
            view.epilogue = "average_valid"
            points = [numerics.avgpool_fixed_point(e.x_scale, e.y_scale, max(d, 1)) for d in range(e.count + 1)]
            constant("divisor_multiplier", "int64_t", np.array([f.multiplier for f in points]),
                     "fixed-point x_scale / (y_scale * valid) by number of valid window positions")
            constant("divisor_shift", "int32_t", np.array([f.shift for f in points], dtype=np.int32),
                     "matching right shifts")
        else:
            point = numerics.avgpool_fixed_point(e.x_scale, e.y_scale, e.count)
            view.epilogue = "average"
            view.extra.update(multiplier=point.multiplier, shift=point.shift)
    elif isinstance(e, FixedPointAverage):
        view.extra.update(zero_point=e.zero_point, double_round=e.double_round, qmin=e.qmin, qmax=e.qmax)
        if p.kind == "global_avgpool":  # every window holds the whole map
            count = len(e.multiplier) - 1
            view.epilogue = "fixed_point_scalar"
            view.extra.update(multiplier=int(e.multiplier[count]), shift=int(e.shift[count]))
        else:
            view.epilogue = "fixed_point_average"
            constant("divisor_multiplier", "int32_t", e.multiplier.astype(np.int32),
                     "TOSA's Q30 reciprocal of the number of valid window elements, by that number")
            constant("divisor_shift", "uint8_t", e.shift.astype(np.uint8), "matching right shifts")
    elif isinstance(e, FixedPointAdd):
        lanes = view.out_lanes[0]
        view.epilogue = "fixed_point"
        view.extra.update(zero_point=e.zero_point, double_round=e.double_round, qmin=e.qmin, qmax=e.qmax,
                          multiplier=e.multiplier, shift=e.shift)
        for role, table in (("a_table", e.a_table), ("b_table", e.b_table)):
            constant(role, "int32_t", np.tile(table.astype(np.int32), (lanes, 1)),
                     f"input {role[0]} scaled to int32 for every int8 value (index + 128), TFLite's "
                     "(x - zero point) << 20 rescaled; one copy per lane")
    elif isinstance(e, AddRequant):
        a, b = numerics.add_fixed_points(e.a_scale, e.b_scale, e.y_scale)
        view.epilogue = "add"
        view.extra.update(a_zero_point=e.a_zero_point, b_zero_point=e.b_zero_point, a_multiplier=a.multiplier,
                          b_multiplier=-b.multiplier if e.subtract else b.multiplier, shift=a.shift,
                          zero_point=e.zero_point)
    elif isinstance(e, MulRequant):
        mantissa, shift = numerics.mul_parts(e.multiplier)
        view.epilogue = "mul"
        view.extra.update(a_zero_point=e.a_zero_point, b_zero_point=e.b_zero_point, mantissa=mantissa, shift=shift,
                          zero_point=e.zero_point, domain_offset=numerics.ORT_X86_DOMAIN_OFFSET)
    elif isinstance(e, (Rescale, LookupTable)):
        if isinstance(e, Rescale):
            tables = np.clip(numerics.rescale_table(e.x_scale, e.x_zero_point, e.y_scale, e.zero_point), e.qmin,
                             e.qmax)[None]
            what = f"DequantizeLinear -> QuantizeLinear, clamped to [{e.qmin}, {e.qmax}],"
        else:
            tables, what = e.table, f"DequantizeLinear -> {e.function} -> QuantizeLinear"
        lanes, per_lane = view.out_lanes[0], view.tables_per_lane
        # lane l of the t-th token of a pixel carries channel t * lanes + l
        channels = np.broadcast_to(tables, (per_lane * lanes, 256)) if len(tables) == 1 else tables
        rom = channels.reshape(per_lane, lanes, 256).transpose(1, 0, 2).reshape(view.storage["table"].shape)
        layout = "one copy per lane" if len(tables) == 1 else \
            "[lane][token of a pixel][value]: the table of each channel the lane carries"
        constant("table", "int8_t", rom.astype(np.int8),
                 f"onnxruntime's {what} for every int8 value (index + 128); {layout}")
    elif p.kind in ("maxpool", "global_maxpool"):
        view.epilogue = "max"


_LEAN_COMMENTS = {
    "mantissa": "requantization multiplier float32(x_scale * w_scale / y_scale) = mantissa * 2^-shift, "
                "scaled to the common shift where one fits",
    "shift": "requantization shift",
    "limit": "least |accumulator| whose output saturates (ming::requantize_lean clamps to it)",
}


def _c_initializer(array: np.ndarray, width: int = 110) -> str:
    """A nested C initializer, wrapped to `width` columns."""
    if array.ndim == 1:
        items = [str(int(v)) + ("LL" if array.dtype == np.int64 else "") for v in array]
        lines, line = [], ""
        for item in items:
            piece = item + ", "
            if len(line) + len(piece) > width:
                lines.append(line.rstrip())
                line = ""
            line += piece
        lines.append(line.rstrip().rstrip(","))
        if len(lines) == 1:
            return "{" + lines[0] + "}"
        return "{\n    " + "\n    ".join(lines) + "}"
    inner = [_c_initializer(sub, width) for sub in array]
    if all("\n" not in i for i in inner) and sum(len(i) + 2 for i in inner) < width:
        return "{" + ", ".join(inner) + "}"
    return "{\n    " + ",\n    ".join(i.replace("\n", "\n    ") for i in inner) + "}"
