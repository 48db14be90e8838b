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
from ming_py.kernel import kernel_spec
from ming_py.ir import (
    AccRequant,
    AddRequant,
    AverageRequant,
    FixedPointAdd,
    FixedPointAverage,
    FixedPointRequant,
)
from ming_py.storage import ArrayPlan, plan_arrays, requant_datapath

REQUANTIZING = (AccRequant, AddRequant, AverageRequant, FixedPointRequant, FixedPointAdd, FixedPointAverage)

from .hls import _environment
from .identifiers import comment_text, cpp_names, mlir_string

def report(graph: StreamGraph, schedule: Schedule, board: Board, solution=None) -> dict:
    """Per-process kind, loop bounds, schedule and buffers; with an ILP solution also its estimates."""
    names = cpp_names(graph)
    nodes = []
    for p in graph.processes:
        sched = schedule.of(p.name)
        unroll = {loop: sched.factor(loop) for loop in p.unrollable}
        nodes.append({
            "name": p.name, "cpp_name": names.processes[p.name], "source": p.source, "kind": p.kind,
            "inputs": list(p.inputs), "outputs": list(p.outputs),
            "window": _window_json(p.window) if p.window is not None else None,
            "loop_bounds": graph.trip_counts(p) | _pixel_loops(graph, p),
            "schedule": {"unroll": unroll, "lanes_in": [schedule.lanes_of(c) for c in p.inputs],
                         "lanes_out": [schedule.lanes_of(c) for c in p.outputs]},
            "requantization": requant_datapath(p.epilogue) if isinstance(p.epilogue, REQUANTIZING) else None,
        } | ({"routes": [list(route) for route in p.routes]} if p.routes else {}))
        arrays = _arrays(graph, schedule, p)
        nodes[-1] |= {"buffers_bits": {role: a.bits for role, a in arrays.items()},
                      "buffers": [_array_json(role, a) for role, a in arrays.items()]}
        if solution is not None:
            cost = solution.costs[p.name]
            nodes[-1] |= {"cycles": cost.cycles, "fill_cycles": cost.fill, "dsp": cost.dsp, "bram18k": cost.bram18k,
                          "uram": cost.uram, "lut": cost.lut, "ff": cost.ff}
            nodes[-1]["schedule"]["storage"] = dict(sched.storage)
        if p.weights is not None:
            nodes[-1]["schedule"]["multipliers"] = sched.multipliers
    channels = [{"name": c.name, "cpp_name": names.channels[c.name], "producer": c.producer, "consumer": c.consumer,
                 "shape": [c.channels, c.height, c.width], "lanes": schedule.lanes_of(c.name),
                 "fifo_depth": schedule.depth_of(c.name)} for c in graph.channels.values()]
    arrays = [a for p in graph.processes for a in _arrays(graph, schedule, p).values()]
    totals = {
        "processes": len(graph.processes), "channels": len(graph.channels),
        "buffers_bits": sum(a.bits for a in arrays),
        "weights_bits": sum(a.bits for a in arrays if a.rom),
    }
    if solution is not None:
        totals |= solution.totals
    return {"ming_version": __version__, "model": graph.name, "cpp_name": names.model, "top": names.top,
            "board": board.name, "part": board.part, "clock_mhz": board.clock_mhz, "nodes": nodes,
            "channels": channels, "totals": totals}


def _window_json(window) -> dict:
    """The window's geometry; its groups only where there are several (a grouped convolution)."""
    fields = asdict(window)
    if fields["groups"] == 1:
        del fields["groups"]
    return fields


def _arrays(graph: StreamGraph, schedule: Schedule, p) -> dict[str, ArrayPlan]:
    """The process's arrays as the storage plan lays them out for this schedule."""
    sched = schedule.of(p.name)
    spec = kernel_spec(graph, p, sched.unroll, [schedule.lanes_of(c) for c in p.inputs],
                       [schedule.lanes_of(c) for c in p.outputs])
    return plan_arrays(spec, p.epilogue, sched.storage_of("line_buffer"))


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
    return _environment().get_template("report.md.j2").render(report=data | {"nodes": rows, "channels": channels})


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
                          "unroll": [(loop, schedule.of(p.name).factor(loop)) for loop in p.unrollable]})
    model = {"title": comment_text(graph.name), "name": mlir_string(graph.name),
             "cpp_name": cpp_attribute(graph.name, names.model),
             "input": mlir_string(graph.input.channel), "output": mlir_string(graph.output.channel)}
    return _environment().get_template("dataflow.mlir.j2").render(
        model=model, channels=channels, processes=processes, version=__version__)


def host_metadata(graph: StreamGraph, board: Board) -> str:
    """host.json: what the host needs around the accelerator (`host_data`)."""
    return json.dumps(host_data(graph, board), indent=2) + "\n"


def host_data(graph: StreamGraph, board: Board) -> dict:
    """What the host needs around the accelerator: quantization, layouts, the float tail."""
    def port(p, channel):
        c = graph.channels[channel]
        return {"onnx_name": p.onnx_name, "onnx_shape": list(p.onnx_shape), "array_shape": list(p.array_shape),
                "stream_shape": [c.channels, c.height, c.width], "scale": p.scale, "zero_point": p.zero_point,
                "dtype": p.dtype, "permutation": list(p.permutation), "quantizer": p.quantizer}

    names = cpp_names(graph)
    return {
        # "model" is the stem of the C++ file names (hls/<model>.cpp, <model>_tb.cpp), "graph" the model's own name
        "model": names.model, "graph": graph.name, "top": names.top, "board": board.name,
        "interface": board.interface,
        "input": port(graph.input, graph.input.channel),
        "output": port(graph.output, graph.output.channel) | {
            "host_ops": [{"kind": op.kind, "axis": op.axis, "scale": op.scale, "zero_point": op.zero_point,
                          "shape": list(op.shape)} for op in graph.output.host_ops]},
    }
