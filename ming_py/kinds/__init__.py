"""The process kinds of the streaming dataflow IR, one module each, and the registry the back end asks
(`kind_of`). See `ming_py.kinds.base.ProcessKind` for the aspects every kind defines."""

from __future__ import annotations

from ming_py.dataflow import GROUP_LOOP, Process, StreamGraph

# each module registers its kinds
from . import (bilinear, broadcast, concat, dense, depth_to_space, eltwise, global_pool, pad, permute, pointwise, split,
               table, upsample, window)
from .base import ASPECTS, ProcessSpec, ProcessKind, kind_of, registered

__all__ = ["ASPECTS", "ProcessSpec", "ProcessKind", "kind_of", "registered", "trip_counts", "unrollable",
           "MAC_KINDS", "WINDOW_GEOMETRY_KINDS",
           # the kind modules
           "bilinear", "broadcast", "concat", "dense", "depth_to_space", "eltwise", "global_pool", "pad", "permute",
           "pointwise", "split", "table", "upsample", "window"]

# the kinds that multiply weights, and those that carry a `Window`
MAC_KINDS = tuple(name for name, kind in registered().items() if kind.mac)
WINDOW_GEOMETRY_KINDS = tuple(name for name, kind in registered().items() if kind.needs_window)


def unrollable(process: Process) -> tuple[str, ...]:
    """The loops of a process a schedule may unroll: a grouped conv's groups first, then its kind's."""
    grouped = process.window is not None and process.window.groups > 1
    return (GROUP_LOOP,) * grouped + kind_of(process.kind).unrollable


def trip_counts(graph: StreamGraph, process: Process) -> dict[str, int]:
    """Trip count of each unrollable loop of a process."""
    return kind_of(process.kind).trip_counts(process.window, [graph.channels[c] for c in process.inputs],
                                             [graph.channels[c] for c in process.outputs])
