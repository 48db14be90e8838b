"""The loop of every process, described once: what its emitted C++ runs, what `ilp/cost.py` charges
and what `ming simulate` steps through.

Every process is one flattened loop pipelined at II=1 (emit/templates/process/*.cpp.j2). Its
iterations are grouped by *position*: a padded input position of a sliding window, an input
pixel of a 1x1 conv or an element-wise process, an output pixel of an upsample or pad process (or
an input pixel of a depth-to-space process as its row arrives),
the input vector and the fold of a dense layer.
In each position the loop reads the position's input tokens (at most one per iteration and input,
spread evenly over the position, the way a producer running at the same pace writes them) and
writes output tokens at fixed iterations, and it spends `max(tokens read, fold steps, 1)`
iterations there.

Each kind builds its positions itself (`ming_py.kinds`); this module runs them into a `Loop` and
checks a schedule against them.
"""

from __future__ import annotations

from .dataflow import Schedule, StreamGraph, Window
from .kinds import ProcessSpec, kind_of, trip_counts
from .loops import Loop, merged

__all__ = ["ProcessSpec", "Loop", "depth_bound", "process_spec", "loop_of", "schedule_spec", "spec_from_report", "validate_schedule"]


def loop_of(spec: ProcessSpec) -> Loop:
    spec.check()
    return Loop(spec.depth, tuple(merged(spec.process_kind.loop_positions(spec))), spec.requant_delay)


def depth_bound(kind: str) -> int:
    """The deepest a kind's loop gets under any schedule."""
    return kind_of(kind).depth_bound


def process_spec(graph, process, unroll, lanes_in, lanes_out, requantizers: int = 0,
                 ddr_weights: bool = False, bands: int = 1) -> ProcessSpec:
    """The spec of a process of a `StreamGraph` under a schedule (`ddr_weights`: its weights streamed from DDR, its
    map taken in `bands` bands of rows)."""
    shape = lambda name: (graph.channels[name].channels, graph.channels[name].height, graph.channels[name].width)
    params_type = kind_of(process.kind).params_type
    if process.params is not None and (params_type is None or not isinstance(process.params, params_type)):
        expected = params_type.__name__ if params_type else "none"
        raise ValueError(f"{process.name}: a {process.kind} process's params are {expected}, found "
                         f"{type(process.params).__name__}")
    return ProcessSpec(process.kind, tuple(shape(c) for c in process.inputs), tuple(shape(c) for c in process.outputs),
                      tuple(unroll), tuple(lanes_in), tuple(lanes_out), process.window, requantizers, process.params,
                      ddr_weights, bands)


def schedule_spec(graph, process, schedule: Schedule) -> ProcessSpec:
    """The spec of a process under a design's `Schedule`."""
    sched = schedule.of(process.name)
    return process_spec(graph, process, sched.unroll, [schedule.lanes_of(c) for c in process.inputs],
                       [schedule.lanes_of(c) for c in process.outputs], sched.requantizers,
                       sched.storage_of("weights") == "ddr", sched.bands)


def spec_from_report(node: dict, channels: dict[str, dict]) -> ProcessSpec:
    """The spec of a process from report.json (`node` from "nodes", `channels` by name from "channels")."""
    window = node.get("window")
    if window is not None:
        window = Window(**{k: tuple(v) if isinstance(v, list) else v for k, v in window.items()})
    schedule = node["schedule"]
    return ProcessSpec(node["kind"], tuple(tuple(channels[c]["shape"]) for c in node["inputs"]),
                      tuple(tuple(channels[c]["shape"]) for c in node["outputs"]),
                      tuple(schedule.get("unroll", {}).items()),
                      tuple(channels[c]["lanes"] for c in node["inputs"]),
                      tuple(channels[c]["lanes"] for c in node["outputs"]), window, schedule.get("requantizers", 0),
                      _params_from_report(node), schedule.get("storage", {}).get("weights") == "ddr",
                      schedule.get("bands", 1))


def _params_from_report(node: dict):
    """The parameters of a process's kind from its report.json node (`to_json` of its `params_type`)."""
    params_type = kind_of(node["kind"]).params_type
    return None if params_type is None else params_type.from_json(node)


def validate_schedule(graph: StreamGraph, schedule: Schedule) -> list[str]:
    """Problems that make a schedule invalid for `graph` (empty when valid)."""
    problems = []
    for process in graph.processes:
        try:
            problems += _unroll_problems(graph, process, schedule)
        except ValueError as error:  # an unknown kind
            problems.append(f"{process.name}: {error}")
    if not problems:
        for process in graph.processes:
            try:
                problems += _process_problems(graph, process, schedule)
            except ValueError as error:  # its spec cannot be made or checked
                problems.append(f"{process.name}: {error}")
    for name, channel in graph.channels.items():
        lanes = schedule.lanes_of(name)
        if lanes < 1 or channel.channels % lanes:
            problems.append(f"channel {name}: {lanes} lanes do not divide its {channel.channels} channels")
        if schedule.depth_of(name) < 1:
            problems.append(f"channel {name}: FIFO depth must be at least 1")
    return problems


def _unroll_problems(graph: StreamGraph, process, schedule: Schedule) -> list[str]:
    trips = trip_counts(graph, process)
    problems = []
    for loop, factor in schedule.of(process.name).unroll:
        if loop not in trips:
            problems.append(f"{process.name}: loop '{loop}' cannot be unrolled (choose from {sorted(trips)})")
        elif factor < 1 or trips[loop] % factor:
            problems.append(f"{process.name}: unroll {loop}={factor} does not divide its trip count {trips[loop]}")
    return problems


def _process_problems(graph: StreamGraph, process, schedule: Schedule) -> list[str]:
    """What the process's kind says of its spec and multipliers under `schedule`."""
    sched = schedule.of(process.name)
    schedule_spec(graph, process, schedule).check()
    choices = kind_of(process.kind).multiplier_choices(dict(sched.unroll))
    if sched.multipliers not in choices:
        return [f"{process.name}: multipliers '{sched.multipliers}' (choose from {', '.join(choices)})"]
    return []
