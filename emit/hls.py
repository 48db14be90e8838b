"""HLS C++ emission: StreamGraph + Schedule -> a Vitis HLS project (jinja2 templates).

Every process becomes one C++ function (templates in `templates/process/`), the
channels become `hls::stream`s of the scheduled lane width and FIFO depth, and
the constants (weights in each process's loop order, `ProcessKind.weight_rows`; each
epilogue rule's constants, `EpilogueRule.emit`) go to `<model>_weights.h`. Identifiers and file
names come from `identifiers.cpp_names`; comments and strings quote the model's
own names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ming_py import __version__
from ming_py.boards import Board
from ming_py.array_layout import ArrayPlan
from ming_py.dataflow import Process, Schedule, StreamGraph
from ming_py.process_spec import ProcessSpec, Loop, loop_of, schedule_spec
from ming_py.epilogues import CppScalar, EpilogueValues, rule_of
from ming_py.kinds import kind_of, unrollable
from ming_py.storage import plan_arrays
from ming_py.kinds.streamed import DDR_BURST_LATENCY
from ming_py.weights_ddr import (DDR_FILE, DDR_MAX_BURST, DDR_READ_OUTSTANDING, ddr_bundle, streamed_arrays,
                                 streamed_bands, streamed_rows)
from ming_py.weights_load import WEIGHTS_FILE, loaded_arrays, loaded_rows

from .environment import TEMPLATES, environment
from .identifiers import CppNames, c_string, comment_text, cpp_names
from .layouts import check_layouts

STATIC_HEADERS = ("ming_stream.h", "ming_widths.h", "ming_numerics.h", "ming_window.h", "ming_hls_stream.h", "ming_check.h")


@dataclass
class CConstant:
    name: str
    ctype: str
    array: np.ndarray
    comment: str
    loaded: bool = False  # a RAM the weight port fills at start (`ming_py.weights_load`): declared, not initialized

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
    spec: ProcessSpec
    loop: Loop
    storage: dict[str, ArrayPlan]  # role -> layout; local arrays are named by their role
    window: object = None
    in_pixels: int = 0
    multipliers: str = "dsp"  # ming_py.kinds.window.MULTIPLIERS
    arrays: dict[str, str] = field(default_factory=dict)  # role -> C++ constant array
    weight_stream: str = ""  # the stream its weights arrive on: at start in URAM (`weights_load`), per image from DDR
    kind_values: object = None  # its kind's own values (`ProcessKind.view_values`), or None
    epilogue_values: EpilogueValues | None = None  # its epilogue rule's (`EpilogueRule.emit`), or None

    @property
    def epilogue(self) -> str:
        """The template of its epilogue's C++ call (emit/templates/epilogues/<epilogue>.j2; "": none)."""
        return self.epilogue_values.template if self.epilogue_values else ""

    @property
    def scalars(self) -> tuple[CppScalar, ...]:
        """The named scalars its epilogue's C++ call passes, declared at the top of its function."""
        return self.epilogue_values.cpp_scalars() if self.epilogue_values else ()

    def factor(self, loop: str) -> int:
        return self.spec.factor(loop)

    @property
    def streams(self) -> list[str]:
        """The arguments of its call in the dataflow region."""
        return self.inputs + self.outputs + ([self.weight_stream] if self.weight_stream else [])

    @property
    def trip_count(self) -> int:
        """Iterations of its pipelined loop (the shared requantizers' last turns included)."""
        return self.loop.iterations


def emit_hls(graph: StreamGraph, schedule: Schedule, board: Board) -> dict[str, str]:
    """The files of OUT/hls/, as {relative path: text}."""
    env = environment()
    names = cpp_names(graph)
    views, constants = [], []
    for process in graph.processes:
        view, consts = _process_view(graph, schedule, process, names)
        views.append(view)
        constants += consts
    model = _model_view(graph, schedule, names, views)
    code = [process_code(env, process, view) for process, view in zip(graph.processes, views)]
    # in dataflow order: the processes' in the graph's order, a process's in its outputs' order
    internal = [graph.channels[name] for p in graph.processes for name in p.outputs
                if graph.channels[name].consumer != "output"]
    channels = [{"name": names.channels[c.name], "label": c_string(c.name), "lanes": schedule.lanes_of(c.name),
                 "depth": schedule.depth_of(c.name), "impl": schedule.fifo_of(c.name).impl} for c in internal]
    context = {"model": model, "processes": views, "process_code": code, "channels": channels, "constants": constants,
               "loaded_constants": any(c.loaded for c in constants),
               "version": __version__, "board": board, "ip": ip_identity(names.model, board)}
    name = names.model
    # every process's pipelined loop as report.json states it, for check_csynth.tcl to check after synthesis
    planned_loops = pipeline_loops(graph, schedule)
    files = {
        f"{name}.cpp": _tidy(env.get_template("model.cpp.j2").render(context)),
        f"{name}.h": env.get_template("model.h.j2").render(context),
        f"{name}_weights.h": env.get_template("weights.h.j2").render(context),
        f"{name}_tb.cpp": env.get_template("testbench.cpp.j2").render(context),
        "run_hls.tcl": env.get_template("run_hls.tcl.j2").render(context),
        "check_csynth.tcl": env.get_template("check_csynth.tcl.j2").render(context | {"planned_loops": planned_loops}),
    }
    for header in STATIC_HEADERS:
        files[header] = (TEMPLATES / header).read_text()
    return files


def process_code(env, process: Process, view: ProcessView) -> str:
    """The C++ function of a process from its kind's template, checked to lay out every array of its storage
    plan (`emit.layouts`)."""
    code = env.get_template(f"process/{view.template}.cpp.j2").render(p=view)
    check_layouts(process.name, view.name, code, view.storage, view.arrays)
    return code


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


def _model_view(graph: StreamGraph, schedule: Schedule, names: CppNames, views: list[ProcessView]) -> dict:
    inp = graph.channels[graph.input.channel]
    parts = {part.process: part for part in loaded_arrays(loaded_rows(graph, schedule))}
    streamed = {part.process: part
                for part in streamed_arrays(streamed_rows(graph, schedule), streamed_bands(graph, schedule))}
    outputs = [_output_view(graph, schedule, names, port, values)
               for port, values in zip(graph.outputs, names.output_values)]
    return {
        "name": names.model, "title": comment_text(graph.name), "top": names.top, "dataflow": names.dataflow,
        "input_values": names.input_values, "write_outputs": names.write_outputs,
        "summary": f"{len(graph.processes)} processes, {len(graph.channels)} channels; "
                   f"{_shape_text(inp)} int8 in, {' + '.join(o.shape_text for o in outputs)} int8 out.",
        "input_channel": names.channels[inp.name], "input_label": c_string(inp.name),
        "in_lanes": schedule.lanes_of(inp.name), "in_depth": schedule.depth_of(inp.name), "in_values": inp.values,
        "in_impl": schedule.fifo_of(inp.name).impl,
        "in_shape_text": _shape_text(inp),
        "in_scale": f"{graph.input.scale:.9g}", "in_zero_point": graph.input.zero_point,
        "outputs": outputs,
        "load_weights": names.load_weights,
        # the loaded processes' weight streams in the loader's order, with their beats (`ming_py.weights_load`)
        "loaded": [{"stream": v.weight_stream, "label": c_string(p.name), "words": parts[p.name].words}
                   for p, v in zip(graph.processes, views) if p.name in parts],
        "weight_words": sum(part.words for part in parts.values()), "weights_file": WEIGHTS_FILE,
        # the processes whose weights stream from DDR, each with its m_axi port (`ming_py.weights_ddr`)
        "streamed": [{"stream": v.weight_stream, "port": names.arrays[p.name]["weights"],
                      "bundle": ddr_bundle(names.arrays[p.name]["weights"]), "label": c_string(p.name),
                      "words": streamed[p.name].words, "bands": streamed[p.name].bands,
                      "first_word": streamed[p.name].first_word}
                     for p, v in zip(graph.processes, views) if p.name in streamed],
        "ddr_words": sum(part.words for part in streamed.values()), "ddr_file": DDR_FILE,
        "ddr_latency": DDR_BURST_LATENCY, "ddr_burst": DDR_MAX_BURST, "ddr_outstanding": DDR_READ_OUTSTANDING,
    }


@dataclass
class OutputView:
    """One output of the accelerator, in the order of the output record, as the templates need it."""

    channel: str  # C++ stream variable
    label: str
    lanes: int
    depth: int
    impl: str  # its FIFO's BIND_STORAGE impl (`Schedule.fifo_of`)
    count: int  # int8 values per image
    count_name: str  # its constexpr in <model>.h
    shape_text: str
    scale: str
    zero_point: int
    title: str


def _output_view(graph: StreamGraph, schedule: Schedule, names: CppNames, port, count_name: str) -> OutputView:
    channel = graph.channels[port.channel]
    return OutputView(names.channels[channel.name], c_string(channel.name), schedule.lanes_of(channel.name),
                      schedule.depth_of(channel.name), schedule.fifo_of(channel.name).impl, channel.values,
                      count_name, _shape_text(channel),
                      f"{port.scale:.9g}", port.zero_point,
                      comment_text(f"'{port.onnx_name}' (model output {port.index})"))


def _process_view(graph: StreamGraph, schedule: Schedule, p: Process,
                  names: CppNames) -> tuple[ProcessView, list[CConstant]]:
    ins = [graph.channels[c] for c in p.inputs]
    outs = [graph.channels[c] for c in p.outputs]
    sched = schedule.of(p.name)
    lanes_in, lanes_out = [schedule.lanes_of(c) for c in p.inputs], [schedule.lanes_of(c) for c in p.outputs]
    spec = schedule_spec(graph, p, schedule)
    kind = kind_of(p.kind)
    storage = plan_arrays(spec, p.epilogue, sched.storage_of("line_buffer"), sched.storage_of("weights"))
    loaded = "weights" in storage and storage["weights"].loaded
    streamed = spec.ddr_weights
    shapes = f"{' + '.join(_shape_text(c) for c in ins)} -> {_shape_text(outs[0])}"
    view = ProcessView(
        name=names.processes[p.name], label=c_string(p.name), kind=p.kind,
        template=kind.streamed_template if streamed else kind.template,
        comment=comment_text(kind.describe(p, ins, outs, shapes)),
        inputs=[names.channels[c] for c in p.inputs], outputs=[names.channels[c] for c in p.outputs],
        in_lanes=lanes_in, out_lanes=lanes_out,
        unroll=[(loop, sched.factor(loop)) for loop in unrollable(p)], spec=spec, loop=loop_of(spec),
        storage=storage, window=p.window,
        in_pixels=ins[0].pixels, multipliers=sched.multipliers, arrays=names.arrays[p.name],
        weight_stream=names.weight_streams[p.name] if loaded or streamed else "",
        kind_values=kind.template_values(spec, p, lanes_in, lanes_out))
    constants: list[CConstant] = []

    def constant(role: str, ctype: str, array: np.ndarray, comment: str, loaded: bool = False) -> None:
        constants.append(CConstant(view.arrays[role], ctype, array, comment_text(f"{p.name}: {comment}"), loaded))

    if p.weights is not None and not streamed:
        where = (" in URAM, loaded at start from the weight port (weights.bin)" if loaded else "")
        constant("weights", "int8_t", kind.weight_rows(p.weights, spec).astype(np.int8),
                 f"weights {kind.weights_layout(p)}, one row of every weight a fold step multiplies{where}", loaded)
    view.epilogue_values = rule_of(p.epilogue).emit(p.epilogue, view, constant)
    for role, (ctype, values, comment) in kind.constant_tables(spec, p).items():
        constant(role, ctype, values, comment)
    return view, constants


# The label of the one pipelined loop of each process template is its kind's `pipeline_label` (emit/templates/
# process/<template>.cpp.j2: the line before the `for` over ITERATIONS whose body opens with the PIPELINE pragma;
# tests/test_report_checks.py holds the two together). Vitis HLS names the loop so in its reports
# (SummaryOfLoopLatency/<label>, in the function's report or in that of the module <function>_Pipeline_<label>);
# run_hls.tcl looks it up there.
PLANNED_II = 1  # every process loop is pipelined at II=1 (ming_py/process_spec.py)


def pipeline_loops(graph: StreamGraph, schedule: Schedule) -> list[dict]:
    """Per process, in the graph's order, its pipelined loop as the emitted C++ has it: the C++ function, the
    loop's label, the planned initiation interval, the trip count (`loop_of(...).iterations`, the ITERATIONS
    of the template) and, where its weights stream from DDR, the deepest pipeline its buffers allow
    (`StreamedLoop.allowed_depth`; None otherwise)."""
    names = cpp_names(graph)
    loops = []
    for p in graph.processes:
        spec = schedule_spec(graph, p, schedule)
        kind = kind_of(p.kind)
        loops.append({"function": names.processes[p.name], "loop": kind.pipeline_label,
                      "trip_count": loop_of(spec).iterations, "ii": PLANNED_II,
                      "depth": kind.streamed(spec).allowed_depth if spec.ddr_weights else None})
    return loops


def _shape_text(channel) -> str:
    return f"{channel.channels}x{channel.height}x{channel.width}"


def _c_initializer(array: np.ndarray, width: int = 110) -> str:
    """A nested C initializer, wrapped to `width` columns."""
    if array.ndim == 1:
        items = [str(int(v)) for v in array]
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
