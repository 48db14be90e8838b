"""What makes a decoded saved design (`ming_py.design_file.SavedDesign`) unusable, checked before anything is
emitted from it: its sizes past `ming_py.limits`, its stream graph inconsistent (channels, windows, each kind's
parameters against the maps they act on), its schedule invalid, its clock, verification images, host metadata
or ILP estimates malformed. Each problem is one line naming the field.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import numpy as np

from ming_py.boards import load_board

from .dataflow import Process, StreamGraph, Window
from .process_spec import validate_schedule
from .kinds import kind_of
from .kinds.bilinear import table_problem
from .limits import MAX_FIFO_BITS, MAX_MAP_VALUES, MAX_NODES, MAX_STREAMED_VALUES
from .options import CLOCK_MHZ

# the kinds whose process may have no params: a split whose outputs all carry every channel
_PARAMS_OPTIONAL = ("split",)


def design_problems(saved) -> list[str]:
    """The problems of `saved`, a decoded `design_file.SavedDesign` (this module does not import it: that one
    calls this). Every check in order, stopping at the first group that finds a problem (later checks rely on earlier
    ones: a schedule is only checked against a consistent graph)."""
    for check in (_graph_problems, _array_problems, _process_problems, _schedule_problems, _clock_problems,
                  _image_problems, _host_problems, _estimate_problems):
        problems = check(saved)
        if problems:
            return problems
    return []


def _graph_problems(saved) -> list[str]:
    graph = saved.stream_graph
    names = {p.name for p in graph.processes} | {"input", "output"}
    problems = [f"stream_graph.channels.{c.name}: {which} {getattr(c, which)!r} is no process"
                for c in graph.channels.values() for which in ("producer", "consumer")
                if getattr(c, which) not in names]
    problems += [f"stream_graph.processes: {p.name}: channel {c!r} is not in stream_graph.channels"
                 for p in graph.processes for c in p.inputs + p.outputs if c not in graph.channels]
    problems += [f"stream_graph: port channel {port.channel!r} is not in stream_graph.channels"
                 for port in (graph.input, *graph.outputs) if port.channel not in graph.channels]
    problems += [f"stream_graph.channels.{c.name}: {dim} {getattr(c, dim)} (at least 1)"
                 for c in graph.channels.values() for dim in ("channels", "height", "width") if getattr(c, dim) < 1]
    if len(graph.processes) > MAX_NODES:
        problems.append(f"stream_graph.processes: {len(graph.processes)} processes, more than {MAX_NODES}")
    if problems:
        return problems
    values = [c.values for c in graph.channels.values()]
    if max(values, default=0) > MAX_MAP_VALUES or sum(values) > MAX_STREAMED_VALUES:
        problems.append(f"stream_graph.channels: maps of {max(values, default=0):,} values, {sum(values):,} in all "
                        f"(each at most {MAX_MAP_VALUES:,}, at most {MAX_STREAMED_VALUES:,} in all)")
    return problems


# the element type of every array of a process, as `ming build` writes it (the frontends' epilogues)
WEIGHTS_DTYPE = np.int8
EPILOGUE_DTYPES = {
    "AccRequant": {"bias": np.int32, "w_scale": np.float32},
    "LookupTable": {"table": np.int8},
    "FixedPointRequant": {"bias": np.int32, "multiplier": np.int32, "shift": np.int32},
    "FixedPointAdd": {"a_table": np.int32, "b_table": np.int32},
    "FixedPointAverage": {"multiplier": np.int32, "shift": np.int32},
}


def _array_problems(saved) -> list[str]:
    """Every array of the graph of the element type ming writes for it (no silent cast of an edited one)."""
    problems = []
    for index, process in enumerate(saved.stream_graph.processes):
        where = f"stream_graph.processes[{index}]"
        if process.weights is not None and process.weights.dtype != WEIGHTS_DTYPE:
            problems.append(f"{where}.weights: {process.weights.dtype} values, not int8")
        epilogue = process.epilogue
        if epilogue is None:
            continue
        for name, dtype in _epilogue_arrays(epilogue).items():
            array = getattr(epilogue, name)
            if array.dtype != dtype:
                problems.append(f"{where}.epilogue.{name}: {array.dtype} values, not {np.dtype(dtype)}")
    return problems


def _epilogue_arrays(epilogue) -> dict[str, type]:
    """The array fields of an epilogue and their element types (a new one must be named in EPILOGUE_DTYPES)."""
    arrays = [f.name for f in dataclasses.fields(epilogue) if isinstance(getattr(epilogue, f.name), np.ndarray)]
    declared = EPILOGUE_DTYPES.get(type(epilogue).__name__, {})
    return {name: declared.get(name) for name in arrays}


def _process_problems(saved) -> list[str]:
    graph = saved.stream_graph
    problems = []
    for index, process in enumerate(graph.processes):
        where = f"stream_graph.processes[{index}] ({process.name})"
        problem = _kind_problem(process) or _window_problem(graph, process) or _params_problem(graph, process)
        if problem:
            problems.append(f"{where}: {problem}")
    return problems


def _kind_problem(process: Process) -> str:
    try:
        kind = kind_of(process.kind)
    except ValueError as error:
        return str(error)
    if kind.needs_window and process.window is None:
        return f"a {process.kind} process needs its window"
    return ""


def _window_problem(graph: StreamGraph, process: Process) -> str:
    window = process.window
    if window is None:
        return ""
    pairs = {"kernel": window.kernel, "stride": window.stride, "dilation": window.dilation}
    small = [f"{name} {list(value)}" for name, value in pairs.items() if min(value) < 1]
    sizes = ("in_channels", "in_height", "in_width", "out_channels", "out_height", "out_width", "groups")
    small += [f"{name} {getattr(window, name)}" for name in sizes if getattr(window, name) < 1]
    if small:
        return f"window: {', '.join(small)} (each at least 1)"
    if min(window.pads) < 0:
        return f"window: pads {list(window.pads)} (each at least 0)"
    if window.in_channels % window.groups or window.out_channels % window.groups:
        return (f"window: {window.groups} groups do not divide its {window.in_channels} input and "
                f"{window.out_channels} output channels")
    return _window_shape_problem(graph, process, window)


def _window_shape_problem(graph: StreamGraph, process: Process, window: Window) -> str:
    """The window's input and output maps are those of the process's first input and output channel."""
    for side, names in (("in", process.inputs), ("out", process.outputs)):
        if not names:
            continue
        channel = graph.channels[names[0]]
        window_shape = tuple(getattr(window, f"{side}_{dim}") for dim in ("channels", "height", "width"))
        if window_shape != (channel.channels, channel.height, channel.width):
            return (f"window: {side}put map {list(window_shape)}, but channel {channel.name} is "
                    f"{[channel.channels, channel.height, channel.width]}")
    return ""


def _params_problem(graph: StreamGraph, process: Process) -> str:
    params_type = kind_of(process.kind).params_type
    if process.params is None:
        if params_type is None or process.kind in _PARAMS_OPTIONAL:
            return _split_problem(graph, process, None) if process.kind == "split" else ""
        return f"params: a {process.kind} process needs its {params_type.__name__}"
    if params_type is None or not isinstance(process.params, params_type):
        expected = params_type.__name__ if params_type else "null"
        return f"params: a {process.kind} process's params are {expected}, found {type(process.params).__name__}"
    check = {"permute": _permute_problem, "split": _split_problem, "bilinear": _bilinear_problem}.get(process.kind)
    return check(graph, process, process.params) if check else ""


def _shapes(graph: StreamGraph, names) -> list[tuple[int, int, int]]:
    return [(graph.channels[n].channels, graph.channels[n].height, graph.channels[n].width) for n in names]


def _first_shape(graph: StreamGraph, names) -> tuple[int, int, int]:
    """The (channels, height, width) of the first of `names`; zeros where there is none."""
    return (_shapes(graph, names[:1]) or [(0, 0, 0)])[0]


def _permute_problem(graph: StreamGraph, process: Process, params) -> str:
    channels = _first_shape(graph, process.inputs)[0]
    if sorted(params.order) != list(range(channels)):
        return f"params.order: not a permutation of the input's {channels} channels"
    if any(shape[0] != channels for shape in _shapes(graph, process.outputs)):
        return f"params.order: the output does not carry the input's {channels} channels"
    return ""


def _split_problem(graph: StreamGraph, process: Process, params) -> str:
    channels = _first_shape(graph, process.inputs)[0]
    outputs = _shapes(graph, process.outputs)
    if params is None:
        if any(shape[0] != channels for shape in outputs):
            return f"params: null, but not every output carries the input's {channels} channels"
        return ""
    if len(params.routes) != len(outputs):
        return f"params.routes: {len(params.routes)} routes for {len(outputs)} outputs"
    for index, ((first, count), shape) in enumerate(zip(params.routes, outputs)):
        if first + count > channels or count != shape[0]:
            return (f"params.routes[{index}]: channels {first} .. {first + count - 1} of {channels}, for an output "
                    f"of {shape[0]} channels")
    return ""


def _bilinear_problem(graph: StreamGraph, process: Process, params) -> str:
    _, in_height, in_width = _first_shape(graph, process.inputs)
    _, out_height, out_width = _first_shape(graph, process.outputs)
    if (len(params.rows), len(params.cols)) != (out_height, out_width):
        return (f"params: {len(params.rows)} row and {len(params.cols)} column entries for an output of "
                f"{out_height} x {out_width}")
    problem = table_problem(params.rows, in_height, "row", "y") or table_problem(params.cols, in_width, "column", "x")
    return f"params: {problem}" if problem else ""


def _schedule_problems(saved) -> list[str]:
    graph, schedule = saved.stream_graph, saved.schedule
    fifo_bits = sum(schedule.depth_of(c) * schedule.lanes_of(c) * 8 for c in graph.channels)
    if fifo_bits > MAX_FIFO_BITS or min(schedule.depths.values(), default=2) < 1:
        return [f"schedule.depths: FIFOs of {fifo_bits:,} bits in all (each depth at least 1, at most "
                f"{MAX_FIFO_BITS:,} bits in all)"]
    return [f"schedule: {problem}" for problem in validate_schedule(graph, schedule)]


def _clock_problems(saved) -> list[str]:
    low, high = CLOCK_MHZ
    if not low <= saved.clock_mhz <= high:  # also false for NaN
        return [f"clock_mhz: {saved.clock_mhz!r} (a number from {low:g} to {high:g}, as --clock takes)"]
    return []


def _image_problems(saved) -> list[str]:
    from .verify import IMAGES  # the golden model's images: loaded only once a design reads well

    if set(saved.images) != set(IMAGES):
        return [f"images: {sorted(saved.images)}, not the images {sorted(IMAGES)} ming verifies on"]
    graph = saved.stream_graph
    raw_bytes = graph.channels[graph.input.channel].values
    expected_bytes = sum(graph.channels[port.channel].values for port in graph.outputs)
    for name, image in saved.images.items():
        if (len(image.raw_input), len(image.expected)) != (raw_bytes, expected_bytes):
            return [f"images.{name}: {len(image.raw_input)} input and {len(image.expected)} expected bytes, not "
                    f"the {raw_bytes} and {expected_bytes} the input and output streams carry"]
    return []


def _host_problems(saved) -> list[str]:
    """The ports' metadata as deploy/accelerator.json would carry it, checked with the driver's schema."""
    from ming_py.contract.accelerator_schema import written_problem
    from ming_py.emit.deploy import accelerator_metadata

    board = replace(load_board(saved.board), clock_mhz=saved.clock_mhz)
    problem = written_problem(accelerator_metadata(saved.stream_graph, board))
    return [f"stream_graph ports: {problem}"] if problem else []


# what the reports read of the ILP's totals whenever there are estimates (report.md.j2, settings.yaml; the
# headline `cycles` and `latency_us` are the emitted design's simulation's)
_TOTALS = ("estimated_cycles", "estimated_latency_us", "throughput_cycles", "roofline_cycles", "macs", "dsp", "bram18k",
           "uram", "lut")
_SOLVER = {"rule": str, "objective": str, "status": str, "variables": int, "constraints": int}
_BUDGET = ("dsp", "bram18k", "uram", "lut")


def _estimate_problems(saved) -> list[str]:
    """The ILP's estimates hold a cost for every process and the totals the reports read."""
    estimates = saved.estimates
    if estimates is None:
        return []
    processes = {p.name for p in saved.stream_graph.processes}
    if set(estimates.costs) != processes:
        odd = sorted(processes ^ set(estimates.costs))[0]
        return [f"estimates.costs: not one cost per process ({odd!r}); remove \"estimates\" or build again"]
    problem = _totals_problem(estimates.totals)
    return [f"estimates.totals.{problem}: missing or malformed; remove \"estimates\" or build again"] if problem else []


def _totals_problem(totals: dict) -> str:
    number = (int, float)
    bad = [key for key in _TOTALS if not _is(totals.get(key), number)]
    solver = totals.get("solver")
    if bad or not isinstance(solver, dict):
        return (bad or ["solver"])[0]
    bad = [key for key, kind in _SOLVER.items() if not _is(solver.get(key), kind)]
    budget = solver.get("budget")
    if bad or not isinstance(budget, dict):
        return f"solver.{(bad or ['budget'])[0]}"
    bad = [key for key in _BUDGET if not _is(budget.get(key), number)]
    return f"solver.budget.{bad[0]}" if bad else ""


def _is(value, kind) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)
