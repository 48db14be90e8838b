"""The images a build is verified on; the sample one, the build carries for the Vitis testbench as `hls/input.bin`
and `hls/expected.bin` (`image_record`: a deterministic int8 input uniform over the range, and the golden model's
output record for it, both raw in stream order).

run_hls.tcl's steps csim and cosim (`MING_HLS_STEPS="csim cosim" vitis-run --mode hls --tcl run_hls.tcl`, or
`vitis_hls -f run_hls.tcl -tclargs csim cosim`) run the testbench on the input and compare every output value
with the expected one, so a C or RTL simulation that differs from `ming reference` fails.
"""

from __future__ import annotations

import numpy as np

from .csim import to_stream_order
from .dataflow import StreamGraph
from .ir import Graph
from .reference import run_integer

SEED = 0


def sample_input(graph: Graph) -> np.ndarray:
    return np.random.default_rng(SEED).integers(-128, 128, size=graph.shape_of(graph.inputs[0].tensor), dtype=np.int64)


def extreme_input(graph: Graph) -> np.ndarray:
    """An input at the ends of the int8 range, to drive accumulators and requantizers to saturation: its first
    third of values (in the graph tensor's order: whole channels of a map) 127, its second third -128, the rest
    -128 or 127 at random."""
    shape = graph.shape_of(graph.inputs[0].tensor)
    flat = np.where(np.random.default_rng(SEED + 1).random(int(np.prod(shape))) < 0.5, -128, 127)
    third = flat.size // 3
    flat[:third], flat[third:2 * third] = 127, -128
    return flat.reshape(shape).astype(np.int64)


def image_record(graph: Graph, stream_graph: StreamGraph, q: np.ndarray) -> tuple[bytes, bytes]:
    """The raw input of the int8 graph input `q` and the golden model's output record for it, in stream order."""
    values = run_integer(graph, {graph.inputs[0].tensor: q})

    def raw(array: np.ndarray, port) -> bytes:
        c = stream_graph.channels[port.channel]
        return to_stream_order(array, [c.channels, c.height, c.width]).astype(np.int8).tobytes()

    expected = b"".join(raw(values[graph.outputs[port.index].tensor], port) for port in stream_graph.outputs)
    return raw(q, stream_graph.input), expected
