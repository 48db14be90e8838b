"""The dense layer (Gemm, MatMul, a window as large as its map): its input vector (every pixel of the
map, in stream order) goes into a row buffer, then its fold (N/U_n) x (K/U_k) reads one token of it per
iteration."""

from __future__ import annotations

import math

from ming_py.array_layout import Dim, array, spread
from ming_py.dataflow import divisors
from ming_py.loops import Access, Position

from .base import REQUANT_STAGES, ProcessKind, adder_tree, register
from .streamed import StreamedLoop, streamed_loop

from .window import MAC_DEPTH, mac_arrays, streamed_mac_arrays, mac_multipliers, tiled_weight_rows


@register
class Dense(ProcessKind):
    name = "dense"
    unrollable = ("n", "k")  # outputs, inputs
    needs_window = False
    line_buffer = False
    mac = True
    shares_requantizer = True
    template = "dense"
    streamed_template = "dense_ddr"
    pipeline_label = "vector"

    def trip_counts(self, window, ins, outs):
        return {"n": outs[0].channels, "k": ins[0].values}

    def lane_options(self, unroll, ins, outs, params, limit):
        for lanes in divisors(ins[0].channels):
            if lanes <= limit:
                yield (lanes,), (unroll["n"],)

    def lanes_match(self, spec):
        return spec.lanes_out[0] == spec.factor("n")

    def multiplier_choices(self, unroll):
        return mac_multipliers(unroll, "n")

    def static_banks(self, unroll_k, lanes_in):
        """It reads one word of its input vector per iteration, so its k tile must be the input token."""
        return unroll_k == lanes_in

    def summed_terms(self, spec):
        return spec.factor("k")

    def pipeline_depth(self, terms):
        return MAC_DEPTH + adder_tree(terms) + REQUANT_STAGES

    def tokens_in(self, spec):
        (c, h, w), = spec.inputs
        return (c * h * w // spec.lanes_in[0],)

    def macs(self, spec):
        return math.prod(f for _, f in spec.unroll)

    def macs_per_image(self, window, trips):
        return trips["n"] * trips["k"]

    def reduction_tiles(self, spec):
        return math.prod(spec.inputs[0]) // spec.factor("k")

    def positions(self, spec):
        tokens_in = spec.tokens_in[0]
        tile = spec.reduction_tiles
        yield Position(tokens_in + spec.fold, (Access(0, 1, tokens_in),),
                       (Access(tokens_in + tile - 1, tile, spec.tokens_out[0]),))

    def arrays(self, spec, epilogue, line_buffer_memory, constants):
        """The input vector `[tokens][lanes]`: a token written per iteration, then one read per iteration."""
        lanes = spec.lanes_in[0]
        row_buffer = array("row_buffer", 8, (Dim(spec.tokens_in[0]), spread(lanes, lanes, "reshape")), rom=False)
        if spec.ddr_weights:
            return streamed_mac_arrays(spec, {"row_buffer": row_buffer}, constants)
        return mac_arrays(spec, {"row_buffer": row_buffer}, constants)

    def logic_lut(self, spec):
        return 0

    def counters(self, spec, epilogue):
        return {"k_tile": spec.reduction_tiles - 1, "n_tile": spec.tokens_out[0] - 1}

    def view_values(self, spec, process, lanes_in, lanes_out):
        return None

    def streamed(self, spec) -> StreamedLoop:
        """With weights from DDR: the input vector taken, then each output tile's reduction, its token written at
        its end (in stream order already)."""
        return streamed_loop(spec, spec.tokens_in[0], spec.reduction_tiles, 0)

    def streamed_tile_writes(self, spec):
        return Access(spec.reduction_tiles - 1, 1, 1)

    def streamed_registers(self, spec):
        return {"token": spec.tokens_in[0] - 1, "k_tile": spec.reduction_tiles - 1}

    def describe(self, process, ins, outs, shapes):
        return f"{process.name} ({process.source}): dense: {shapes}"

    def weight_rows(self, weights, spec):
        return tiled_weight_rows(weights, spec, "n", "k")

    def weights_layout(self, process):
        return "[output][input, in stream order (row, column, channel)]"
