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
    """A deterministic int8 input, uniform over the int8 range, and the accelerator's int8 output for it
    from the golden model; both raw, in stream order (row, column, channel)."""
    graph_input, graph_output = graph.inputs[0], graph.outputs[0]
    q = np.random.default_rng(SEED).integers(-128, 128, size=graph.shape_of(graph_input.tensor), dtype=np.int64)
    result = run_integer(graph, {graph_input.tensor: q})[graph_output.tensor]

    def raw(values: np.ndarray, port) -> bytes:
        c = stream_graph.channels[port.channel]
        return to_stream_order(values, [c.channels, c.height, c.width]).astype(np.int8).tobytes()

    return {"hls/input.bin": raw(q, stream_graph.input), "hls/expected.bin": raw(result, stream_graph.output)}
