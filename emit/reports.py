"""Reports, the topology as MLIR, and the host-side metadata of a build.

They name processes and channels as the stream graph does (after the model's nodes);
`cpp_name` is the identifier of the same thing in the generated C++.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from ming_py import __version__
from ming_py.boards import Board
from ming_py.dataflow import Schedule, StreamGraph
from ming_py.process_spec import process_spec, schedule_spec
from ming_py.kinds import trip_counts, unrollable
from ming_py.contract.ming_host import words_per_image
from ming_py.array_layout import ArrayPlan
from ming_py.epilogues import lane_datapath
from ming_py.storage import plan_arrays

from .environment import environment
from .hls import pipeline_loops
from .identifiers import comment_text, cpp_names, mlir_string

def report(graph: StreamGraph, schedule: Schedule, board: Board, solution=None) -> dict:
    """Per-process kind, loop bounds, schedule and buffers; with the ILP's estimates (`solution`: its `costs` and
    `totals`, as a saved design's `Estimates` holds them) also those."""
    names = cpp_names(graph)
    nodes = []
    pipelines = pipeline_loops(graph, schedule)
    for p, pipeline in zip(graph.processes, pipelines):
        sched = schedule.of(p.name)
        unroll = {loop: sched.factor(loop) for loop in unrollable(p)}
        arrays = _arrays(graph, schedule, p)
        nodes.append({
            "name": p.name, "cpp_name": names.processes[p.name], "source": p.source, "kind": p.kind,
            "inputs": list(p.inputs), "outputs": list(p.outputs),
            "window": _window_json(p.window) if p.window is not None else None,
            "loop_bounds": trip_counts(graph, p) | _pixel_loops(graph, p),
            "pipeline": {key: pipeline[key] for key in ("loop", "trip_count", "ii")},
            "schedule": {"unroll": unroll, "lanes_in": [schedule.lanes_of(c) for c in p.inputs],
                         "lanes_out": [schedule.lanes_of(c) for c in p.outputs]},
            "requantization": lane_datapath(p.epilogue, arrays),
        } | (p.params.to_json() if p.params is not None else {}))
        nodes[-1] |= {"buffers_bits": {role: a.bits for role, a in arrays.items()},
                      "buffers": [_array_json(role, a) for role, a in arrays.items()]}
        if solution is not None:
            cost = solution.costs[p.name]
            nodes[-1] |= {"cycles": cost.cycles, "fill_cycles": cost.fill, "dsp": cost.dsp, "bram18k": cost.bram18k,
                          "uram": cost.uram, "lut": cost.lut, "ff": cost.ff,
                          "resources_by_primitive": _by_primitive(cost.parts)}
            nodes[-1]["schedule"]["storage"] = dict(sched.storage)
        if p.weights is not None:
            nodes[-1]["schedule"]["multipliers"] = sched.multipliers
        if sched.requantizers:
            nodes[-1]["schedule"]["requantizers"] = sched.requantizers
        if sched.bands > 1:
            nodes[-1]["schedule"]["bands"] = sched.bands
        image = _image_fifo(graph, schedule, p)
        if image is not None:
            nodes[-1]["image_fifo"] = image
    channels = [{"name": c.name, "cpp_name": names.channels[c.name], "producer": c.producer, "consumer": c.consumer,
                 "shape": [c.channels, c.height, c.width], "lanes": schedule.lanes_of(c.name),
                 "fifo_depth": schedule.depth_of(c.name), "fifo_storage": vars(schedule.fifo_of(c.name))}
                for c in graph.channels.values()]
    arrays = [a for p in graph.processes for a in _arrays(graph, schedule, p).values()]
    totals = {
        "processes": len(graph.processes), "channels": len(graph.channels),
        "buffers_bits": sum(a.bits for a in arrays),
        "weights_bits": sum(a.bits for a in arrays if a.rom),
        "image_fifos": [n["image_fifo"]["channel"] for n in nodes if "image_fifo" in n],
    }
    if solution is not None:
        totals |= solution.totals
    return {"ming_version": __version__, "model": graph.name, "cpp_name": names.model, "top": names.top,
            "board": board.name, "part": board.part, "clock_mhz": board.clock_mhz, "nodes": nodes,
            "channels": channels, "outputs": record(graph), "totals": totals}


def _by_primitive(parts) -> dict[str, dict[str, int]]:
    """resource -> primitive -> planned amount before any calibration (what `ming compare` fits factors to)."""
    table: dict[str, dict[str, float]] = {}
    for resource, primitive, amount in parts:
        table.setdefault(resource, {})
        table[resource][primitive] = table[resource].get(primitive, 0) + amount
    return {resource: {primitive: round(amount) for primitive, amount in by.items()} for resource, by in table.items()}


def record(graph: StreamGraph) -> list[dict]:
    """An image's output record: the accelerator's outputs in the order it sends them, each in its own
    whole 64-bit words from `first_word` on (`index`: its place among the model's outputs)."""
    entries, first = [], 0
    for port in graph.outputs:
        c = graph.channels[port.channel]
        words = words_per_image(c.values)
        entries.append({"name": port.onnx_name, "index": port.index, "channel": c.name,
                        "shape": [c.channels, c.height, c.width], "values": c.values, "words": words,
                        "first_word": first})
        first += words
    return entries


def record_words(graph: StreamGraph) -> int:
    """64-bit words of an image's output record."""
    return sum(entry["words"] for entry in record(graph))


def _window_json(window) -> dict:
    """The window's geometry; its groups only where there are several (a grouped convolution)."""
    fields = asdict(window)
    if fields["groups"] == 1:
        del fields["groups"]
    return fields


def _arrays(graph: StreamGraph, schedule: Schedule, p) -> dict[str, ArrayPlan]:
    """The process's arrays as the storage plan lays them out for this schedule."""
    spec = schedule_spec(graph, p, schedule)
    sched = schedule.of(p.name)
    return plan_arrays(spec, p.epilogue, sched.storage_of("line_buffer"), sched.storage_of("weights"))


def _image_fifo(graph: StreamGraph, schedule: Schedule, p) -> dict | None:
    """A broadcast process's map FIFO where it holds the whole map: the vector the map is combined with is
    computed from every pixel of the map's own source (squeeze-and-excitation)."""
    if p.kind != "broadcast":
        return None
    v = process_spec(graph, p, (), (1, 1), (1,)).vector_input
    channel = graph.channels[p.inputs[1 - v]]
    if schedule.depth_of(channel.name) * schedule.lanes_of(channel.name) < channel.values:
        return None
    return {"channel": channel.name, "fifo_depth": schedule.depth_of(channel.name),
            "holds": f"the whole {channel.channels}x{channel.height}x{channel.width} map ({channel.values} values): "
                     f"the vector {p.inputs[v]} it is combined with needs every pixel before the first one can be"}


def _array_json(role: str, a: ArrayPlan) -> dict:
    return {"name": role, "role": role, "shape": list(a.shape), "element_bits": a.element_bits,
            "memory": a.memory, "banks": a.banks, "words_per_bank": a.words, "word_bits": a.word_bits}


def _pixel_loops(graph: StreamGraph, p) -> dict[str, int]:
    first = graph.channels[p.inputs[0]]
    if p.window is not None:
        return {"rows": p.window.padded_height, "cols": p.window.padded_width}
    return {"pixels": first.pixels}


def report_json(data: dict) -> str:
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def report_markdown(data: dict) -> str:
    rows = []
    for n in data["nodes"]:
        rows.append(n | {
            "name_text": _with_cpp_name(n),
            "loop_bounds_text": ", ".join(f"{k}={v}" for k, v in n["loop_bounds"].items()),
            "unroll_text": ", ".join(f"{k}={v}" for k, v in n["schedule"]["unroll"].items()) or "-",
            "lanes_text": f"{','.join(map(str, n['schedule']['lanes_in']))} / "
                          f"{','.join(map(str, n['schedule']['lanes_out']))}",
            "buffers_text": ", ".join(f"{k} {v:,}" for k, v in n["buffers_bits"].items()),
        })
    channels = [c | {"name_text": _with_cpp_name(c)} for c in data["channels"]]
    return environment().get_template("report.md.j2").render(report=data | {"nodes": rows, "channels": channels})


def _with_cpp_name(entry: dict) -> str:
    """A process's or channel's name, and its C++ identifier where that differs."""
    name, cpp_name = entry["name"], entry["cpp_name"]
    return name if cpp_name == name else f"{name} (C++ {cpp_name})"


def dataflow_mlir(graph: StreamGraph, schedule: Schedule) -> str:
    """SSA values are named by the C++ identifiers (valid MLIR names); `name` attributes hold the graph's
    names, and a `cpp_name` attribute the identifier where it differs."""
    names = cpp_names(graph)

    def cpp_attribute(name: str, cpp_name: str) -> str:
        return "" if cpp_name == name else f', cpp_name = "{cpp_name}"'

    channels = [{"value": names.channels[c.name], "name": mlir_string(c.name),
                 "cpp_name": cpp_attribute(c.name, names.channels[c.name]), "channels": c.channels,
                 "height": c.height, "width": c.width, "lanes": schedule.lanes_of(c.name),
                 "depth": schedule.depth_of(c.name)} for c in graph.channels.values()]
    processes = []
    for p in graph.processes:
        operands = [f"%{names.channels[c]}" for c in p.inputs + p.outputs]
        processes.append({"name": mlir_string(p.name), "cpp_name": cpp_attribute(p.name, names.processes[p.name]),
                          "kind": p.kind, "source": mlir_string(p.source), "operands": operands,
                          "types": ["!dfg.stream<i8>"] * len(operands), "num_inputs": len(p.inputs),
                          "unroll": [(loop, schedule.of(p.name).factor(loop)) for loop in unrollable(p)]})
    model = {"title": comment_text(graph.name), "name": mlir_string(graph.name),
             "cpp_name": cpp_attribute(graph.name, names.model), "input": mlir_string(graph.input.channel),
             "outputs": [mlir_string(port.channel) for port in graph.outputs]}
    return environment().get_template("dataflow.mlir.j2").render(
        model=model, channels=channels, processes=processes, version=__version__)


def host_metadata(graph: StreamGraph, board: Board, weights: dict | None = None) -> str:
    """host.json: what the host needs around the accelerator (`host_data`)."""
    return json.dumps(host_data(graph, board, weights), indent=2) + "\n"


def host_data(graph: StreamGraph, board: Board, weights: dict | None = None) -> dict:
    """What the host needs around the accelerator: quantization, layouts, the float tail of every output.

    "outputs" are in the order of an image's output record (see `record`): the host splits a record into
    the outputs by their `words` and puts each at its `index` among the model's outputs."""
    def port(p):
        c = graph.channels[p.channel]
        return {"onnx_name": p.onnx_name, "onnx_shape": list(p.onnx_shape), "array_shape": list(p.array_shape),
                "stream_shape": [c.channels, c.height, c.width], "words": words_per_image(c.values),
                "scale": p.scale, "zero_point": p.zero_point, "dtype": p.dtype, "permutation": list(p.permutation),
                "quantizer": p.quantizer}

    names = cpp_names(graph)
    return {
        # "model" is the stem of the C++ file names (hls/<model>.cpp, <model>_tb.cpp), "graph" the model's own name
        "model": names.model, "graph": graph.name, "top": names.top, "board": board.name,
        "interface": board.interface,
        # the input's host steps (TFLite's QUANTIZE of integers, RESHAPE, TRANSPOSE after it) where it has any
        "input": port(graph.input) | ({"host_ops": [op.as_data() for op in graph.input.host_ops]}
                                      if graph.input.host_ops else {}),
        "outputs": [port(p) | {"index": p.index, "host_ops": [op.as_data() for op in p.host_ops]}
                    for p in graph.outputs],
    } | ({"weights": weights} if weights else {})
