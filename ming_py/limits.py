"""The sizes ming handles, checked on the lifted graph before any stage that walks the image.

Past the frontend, several stages do work per token of one image rather than per position class:
FIFO sizing (`line_buffers/fifo.py`: the iteration of every token of every channel, composed along
the branches) and the cycle simulator (`ming_py/simulate.py`: the write and read cycle of every token
of every channel, for each FIFO configuration `ming build` tries). Their time and memory grow with the
values an image streams, so a model whose maps are too large would run for hours or exhaust the
memory before saying anything. `check_limits` computes the figures from the graph alone (shapes and
constants, nothing per element) and refuses, in one line naming the tensor and the figure, what is past:

  MAX_MAP_VALUES       values of one map (C x H x W of one tensor)
  MAX_STREAMED_VALUES  values the stream graph carries per image: every activation map once per
                       consumer (a map read by several nodes passes a split), i.e. the tokens FIFO
                       sizing and the simulator walk on the one-lane schedule
  MAX_WEIGHT_BYTES     bytes of the model's constants (weights, biases), all held on chip
  MAX_NODES            nodes of the graph (processes the ILP schedules)

and `check_fifo_bits` the FIFO storage once it is sized (MAX_FIFO_BITS). Before sizing, the FIFO bits are
bounded by the values streamed: no FIFO is sized past its whole map (or 16 pixels of a map smaller
than that) plus its pipelines' lag, so MAX_STREAMED_VALUES keeps them near 8 x 2.4e7 = 1.9e8 bits.

The limits come from timing `ming build` (one core, the default kv260 budget) on a one-conv model (3x3
conv, 3 -> 8 channels, pads 1; tests/test_faults_bounds.py builds it) at growing square inputs:

  input        values streamed   wall time   peak RSS
  3x256x256    7.2e5             8.4 s       0.26 GB
  3x512x512    2.9e6             30 s        0.51 GB
  3x1024x1024  1.2e7             87 s        1.5 GB
  3x1472x1472  2.4e7             245 s (*)   2.8 GB
  3x2048x2048  4.6e7             1196 s (*)  5.1 GB

(*) sharing the machine's two cores with another build or tests. Memory grows by about 105 bytes per value streamed (the simulator keeps a write
and a read cycle per token of every channel, FIFO sizing an iteration per token), time a little faster
than linearly (the ILP's cost model and the simulations it runs walk every token of the ports). So
MAX_STREAMED_VALUES = 2.4e7 keeps a build within about 10 minutes and 4 GB; MAX_MAP_VALUES (2**24) is
below it so that one huge map is named as such. The benchmark networks (benchmarks/networks.py) stay well
inside: vgg13_224 streams 1.4e7 values, mobilenet_v1_224 5.2e6.

Nodes: the recursive graph walks (FIFO sizing's `need`, `split_latency`) take two Python frames per node
of depth against the interpreter's 1000, and the ILP (HiGHS, no time limit) grows quickly with processes: a
chain of 1x1 convs on 8x8x8 maps built in 68 s with 25 nodes and 429 s with 50. MAX_NODES = 400 keeps
the walks safe; it does not bound the solver's time (the benchmark networks have 18 to 38 nodes).
"""

from __future__ import annotations

import math

from .errors import MingError
from .ir import Graph, Kernel, Reshape, node_inputs

# Measured (module docstring): ~105 bytes of `ming build` per value streamed per image.
MAX_STREAMED_VALUES = 24_000_000
MAX_MAP_VALUES = 16_777_216  # 2**24: e.g. 16 x 1024 x 1024
MAX_WEIGHT_BYTES = 64 * 2 ** 20  # more than any supported board holds on chip (U250: 455 Mbit)
MAX_NODES = 400
MAX_FIFO_BITS = 2 ** 30  # twice the on-chip memory of the largest supported board
# The most values one constant the ONNX frontend folds (shape arithmetic, anchor grids) may have, counted from
# its inputs' shapes before it is computed: 2**24 (64 MiB as float32), twenty times the whole on-chip memory of
# the KV260 (288 BRAM18K x 18,432 bits + 64 URAM x 294,912 bits = 24.2 Mbit, DESIGN.md), so no constant the
# accelerator or its host tail can use comes near it; a subgraph that computes more is a model error.
MAX_FOLDED_VALUES = 1 << 24
WHY_TOKENS = "the simulator and FIFO sizing walk every token"


def _values(shape) -> int:
    return math.prod(int(d) for d in shape)


def _shape(shape) -> str:
    dims = list(shape)
    while len(dims) > 1 and dims[0] == 1:  # the batch
        dims = dims[1:]
    return "x".join(str(int(d)) for d in dims)


def _node_output(node) -> str:
    return node.output.tensor if isinstance(node, Kernel) else node.output


def map_figures(graph: Graph) -> dict[str, int]:
    """Per streamed activation tensor, the values it carries per image counted once per consumer (a
    Reshape's output is its input's stream, counted with it)."""
    alias = {}
    for node in graph.nodes:
        if isinstance(node, Reshape):
            alias[node.output] = alias.get(node.input, node.input)
    consumers: dict[str, int] = {}
    for node in graph.nodes:
        if isinstance(node, Reshape):
            continue
        for tensor in node_inputs(node):
            if tensor in graph.tensors:
                tensor = alias.get(tensor, tensor)
                consumers[tensor] = consumers.get(tensor, 0) + 1
    for output in graph.outputs:
        tensor = alias.get(output.tensor, output.tensor)
        consumers[tensor] = consumers.get(tensor, 0) + 1
    return {name: _values(info.shape) * max(consumers.get(name, 0), 1)
            for name, info in graph.tensors.items() if name not in alias}


def figures(graph: Graph) -> dict[str, object]:
    """The figures `check_limits` checks: the largest map (tensor, values), the values streamed per
    image, the constants' bytes and the node count."""
    largest = max(graph.tensors.values(), key=lambda info: _values(info.shape), default=None)
    return {
        "largest_map": (largest.name, _values(largest.shape)) if largest else (None, 0),
        "streamed_values": sum(map_figures(graph).values()),
        "weight_bytes": sum(int(array.nbytes) for array in graph.constants.values()),
        "nodes": len(graph.nodes),
    }


def _describe(graph: Graph, tensor: str) -> str:
    info = graph.tensors[tensor]
    for graph_input in graph.inputs:
        if graph_input.tensor == tensor:
            return f"input '{graph_input.name}' is {_shape(graph_input.onnx_shape)}"
    for node in graph.nodes:
        if _node_output(node) == tensor:
            return f"the output of '{node.source or node.name}' is {_shape(info.shape)}"
    return f"tensor '{tensor}' is {_shape(info.shape)}"


def check_limits(graph: Graph) -> None:
    """Refuse, in one MingError line naming the limit and the figure, a graph past the sizes ming handles
    (module docstring). Only shapes and constants' sizes are read."""
    if len(graph.nodes) > MAX_NODES:
        raise MingError(f"the model has {len(graph.nodes)} nodes; ming handles up to {MAX_NODES} (every node is a "
                        "process the ILP schedules); split the model")
    weight_bytes = sum(int(array.nbytes) for array in graph.constants.values())
    if weight_bytes > MAX_WEIGHT_BYTES:
        raise MingError(f"the model's weights take {weight_bytes / 2 ** 20:.1f} MiB; ming handles up to "
                        f"{MAX_WEIGHT_BYTES // 2 ** 20} MiB (all weights are held on chip); prune or split the model")
    for name, info in graph.tensors.items():
        values = _values(info.shape)
        if values > MAX_MAP_VALUES:
            raise MingError(f"{_describe(graph, name)} ({values:.1e} values per image); ming handles maps up to "
                            f"{MAX_MAP_VALUES} values ({WHY_TOKENS}); feed a smaller image or tiles of it")
    streamed = sum(map_figures(graph).values())
    if streamed > MAX_STREAMED_VALUES:
        raise MingError(f"the model streams {streamed:.1e} values per image over its {len(graph.tensors)} maps; "
                        f"ming handles up to {MAX_STREAMED_VALUES:.1e} ({WHY_TOKENS}); feed a smaller image "
                        "or tiles of it")


def check_fifo_bits(bits: dict[str, int]) -> None:
    """Refuse sized FIFOs (`line_buffers.fifo.fifo_bits`: channel -> bits) past MAX_FIFO_BITS in all, in one
    line naming the largest."""
    total = sum(bits.values())
    if total > MAX_FIFO_BITS:
        channel = max(bits, key=bits.get)
        raise MingError(f"the FIFOs need {total:.1e} bits (the largest, {channel}, {bits[channel]:.1e}); ming handles "
                        f"up to {MAX_FIFO_BITS:.1e} bits, more than the largest board's on-chip memory; feed a "
                        "smaller image")
