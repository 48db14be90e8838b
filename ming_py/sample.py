"""The sample image every build carries for the Vitis testbench: `hls/input.bin` and `hls/expected.bin`.

`vitis_hls -f run_hls.tcl -tclargs csim cosim` runs the testbench on the input and compares every output
value with the expected one, so a C or RTL simulation that differs from `ming reference` fails.
"""

from __future__ import annotations

import numpy as np

from .csim import to_stream_order
from .dataflow import StreamGraph
from .ir import Graph
from .reference import run_integer

SEED = 0


def sample_files(graph: Graph, stream_graph: StreamGraph) -> dict[str, bytes]:
    """A deterministic int8 input, uniform over the int8 range, and the accelerator's int8 output record for
    it from the golden model (each output's values in turn, in the record's order); both raw, in stream
    order (row, column, channel)."""
    graph_input = graph.inputs[0]
    q = np.random.default_rng(SEED).integers(-128, 128, size=graph.shape_of(graph_input.tensor), dtype=np.int64)
    values = run_integer(graph, {graph_input.tensor: q})

    def raw(array: np.ndarray, port) -> bytes:
        c = stream_graph.channels[port.channel]
        return to_stream_order(array, [c.channels, c.height, c.width]).astype(np.int8).tobytes()

    expected = b"".join(raw(values[graph.outputs[port.index].tensor], port) for port in stream_graph.outputs)
    return {"hls/input.bin": raw(q, stream_graph.input), "hls/expected.bin": expected}
