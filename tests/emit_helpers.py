"""Helpers for the emission tests: build a design in memory, C-simulate it, draw random schedules."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np

from ming_py.boards import load_board
from ming_py.build import design
from ming_py.output import write_tree
from ming_py.csim import run_csim
from ming_py.dataflow import ProcessSchedule, Schedule, StreamGraph, divisors
from ming_py.epilogues import rule_of
from ming_py.process_spec import process_spec
from ming_py.kinds import kind_of, trip_counts
from ming_py.kinds.base import shared_requantizers
from ming_py.line_buffers import build_stream_graph


def csim_outputs(graph, out: Path, x: np.ndarray, schedule: Schedule | None = None, concurrent: bool = False,
                 check_ports: bool = False) -> dict[str, np.ndarray]:
    """Every output of the C-simulation of `graph` (by name, in the model's order) under `schedule`."""
    result = design(graph, load_board("kv260"), schedule)
    write_tree(result.files, out)
    return run_csim(out, x, concurrent=concurrent, check_ports=check_ports)


def csim(graph, out: Path, x: np.ndarray, schedule: Schedule | None = None, concurrent: bool = False,
         check_ports: bool = False) -> np.ndarray:
    """The output of the C-simulation of a single-output `graph`."""
    (y,) = csim_outputs(graph, out, x, schedule, concurrent, check_ports).values()
    return y


LANE_KEEPING = ("depthwise", "maxpool", "avgpool", "float_avgpool", "global_avgpool", "global_maxpool", "add", "mul",
                "max", "min", "broadcast", "rescale", "table", "concat", "split", "upsample", "depth_to_space", "pad",
                "permute", "bilinear")


def random_schedule(stream_graph: StreamGraph, rng: random.Random, max_factor: int = 8) -> Schedule:
    """A valid schedule with random divisor lanes, unroll factors, multipliers, shared requantizers and FIFO depths. Lanes are the
    parallelism a process consumes and produces (conv: ic in, oc out; depthwise and pooling: c both
    ways; element-wise: one lane count throughout), so they are drawn per group of tied channels; a dense
    layer's k tile is its input token; a grouped conv's tiles stay in one group (lanes dividing a group's
    channels) and a split's lanes divide where its outputs start."""
    group = {name: name for name in stream_graph.channels}

    def root(name):
        while group[name] != name:
            name = group[name]
        return name

    for p in stream_graph.processes:
        if p.kind in LANE_KEEPING:
            for channel in p.inputs + p.outputs:
                group[root(channel)] = root(p.inputs[0])
    common = {}
    for name, c in sorted(stream_graph.channels.items()):
        common[root(name)] = math.gcd(common.get(root(name), 0), c.channels)
    for p in stream_graph.processes:
        if p.window is not None and p.window.groups > 1:
            for channel, channels in ((p.inputs[0], p.window.in_channels), (p.outputs[0], p.window.out_channels)):
                common[root(channel)] = math.gcd(common[root(channel)], channels // p.window.groups)
        for first in (p.params.firsts if p.kind == "split" and p.params else ()):
            common[root(p.inputs[0])] = math.gcd(common[root(p.inputs[0])], first)
    group_lanes = {r: rng.choice([d for d in divisors(g) if d <= max_factor]) for r, g in sorted(common.items())}
    lanes = {name: group_lanes[root(name)] for name in stream_graph.channels}
    processes = {}
    for p in stream_graph.processes:
        trips = trip_counts(stream_graph, p)
        tied = {"g": 1, "oc": lanes[p.outputs[0]], "n": lanes[p.outputs[0]], "ic": lanes[p.inputs[0]],
                "c": lanes[p.inputs[0]]}
        if p.kind == "dense":
            tied["k"] = lanes[p.inputs[0]]  # a k tile is an input token (the dense kind's static_banks)
        unroll = tuple((loop, tied[loop] if loop in tied else rng.choice([d for d in divisors(trip) if d <= max_factor]))
                       for loop, trip in trips.items())
        multipliers = rng.choice(kind_of(p.kind).multiplier_choices(dict(unroll)))
        spec = process_spec(stream_graph, p, unroll, [lanes[c] for c in p.inputs], [lanes[c] for c in p.outputs])
        shared = shared_requantizers(spec) if rule_of(p.epilogue).datapath(p.epilogue) is not None else ()
        processes[p.name] = ProcessSchedule(unroll, multipliers=multipliers, requantizers=rng.choice((0,) + shared))
    depths = {name: rng.choice([1, 2, 3, 16]) for name in stream_graph.channels}
    return Schedule(processes, lanes, depths)


def stream_graph_of(graph) -> StreamGraph:
    return build_stream_graph(graph)
