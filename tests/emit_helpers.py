"""Helpers for the emission tests: build a design in memory, C-simulate it, draw random schedules."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from ming_py.boards import load_board
from ming_py.build import design
from ming_py.output import write_tree
from ming_py.csim import run_csim
from ming_py.dataflow import ProcessSchedule, Schedule, StreamGraph, divisors
from ming_py.line_buffers import build_stream_graph


def csim(graph, out: Path, x: np.ndarray, schedule: Schedule | None = None, concurrent: bool = False) -> np.ndarray:
    result = design(graph, load_board("kv260"), schedule)
    write_tree(result.files, out)
    return run_csim(out, x, concurrent=concurrent)


def random_schedule(stream_graph: StreamGraph, rng: random.Random, max_factor: int = 8) -> Schedule:
    """A valid schedule with random divisor unroll factors, lanes and FIFO depths."""
    processes = {}
    for p in stream_graph.processes:
        trips = stream_graph.trip_counts(p)
        unroll = tuple((loop, rng.choice([d for d in divisors(trip) if d <= max_factor]))
                       for loop, trip in trips.items())
        processes[p.name] = ProcessSchedule(unroll)
    lanes = {name: rng.choice([d for d in divisors(c.channels) if d <= max_factor])
             for name, c in stream_graph.channels.items()}
    depths = {name: rng.choice([1, 2, 3, 16]) for name in stream_graph.channels}
    return Schedule(processes, lanes, depths)


def stream_graph_of(graph) -> StreamGraph:
    return build_stream_graph(graph)
