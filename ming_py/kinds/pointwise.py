"""The 1x1 conv (stride allowed, no padding): one position per input pixel, whose tokens go into one of
two pixel registers while the previous pixel's fold reads the other; its fold is
(G/U_g) x (C_out/U_oc) x (C_in/U_ic), grouped as a conv's (`ming_py.kinds.window`)."""

from __future__ import annotations

import math

from ming_py.array_layout import Dim, array, spread
from .base import REQUANT_STAGES, ProcessKind, adder_tree, per_pixel_tokens, register
from .streamed import StreamedLoop, band_pixels, map_loop

from .window import (MAC_DEPTH, grouped_lanes, reduction_counters, grouped_lanes_match, grouped_layout, grouped_trips,
                     grouped_weight_rows, groups_text, mac_arrays, mac_multipliers, streamed_map_buffers,
                     streamed_mac_arrays, window_positions)


@register
class Pointwise(ProcessKind):
    name = "pointwise"
    unrollable = ("oc", "ic")
    needs_window = True
    line_buffer = False
    mac = True
    shares_requantizer = True
    template = "pointwise"
    streamed_template = "pointwise_ddr"
    streamed_maps = True
    pipeline_label = "pixels"

    def trip_counts(self, window, ins, outs):
        return grouped_trips(window)

    def lane_options(self, unroll, ins, outs, params, limit):
        return grouped_lanes(unroll, limit)

    def lanes_match(self, spec):
        return grouped_lanes_match(spec)

    def multiplier_choices(self, unroll):
        return mac_multipliers(unroll, "oc")

    def static_banks(self, unroll_k, lanes_in):
        return True

    def summed_terms(self, spec):
        return spec.factor("ic")

    def pipeline_depth(self, terms):
        return MAC_DEPTH + adder_tree(terms) + REQUANT_STAGES

    def tokens_in(self, spec):
        return per_pixel_tokens(spec)

    def macs(self, spec):
        return math.prod(f for _, f in spec.unroll)

    def macs_per_image(self, window, trips):
        return window.out_height * window.out_width * math.prod(trips.values())

    def reduction_tiles(self, spec):
        w = spec.window
        return w.in_channels // w.groups // spec.factor("ic")

    def positions(self, spec):
        return window_positions(spec)

    def streamed(self, spec) -> StreamedLoop:
        return map_loop(spec, in_order=True)  # its pixels' tokens read in the order they arrived

    def streamed_registers(self, spec):
        pixels, _ = band_pixels(spec)
        return {"pixel": pixels - 1, "token": spec.tokens_in[0] - 1, "ic_tile": spec.reduction_tiles - 1}

    def arrays(self, spec, epilogue, line_buffer_memory, constants):
        c_in, lanes = spec.inputs[0][0], spec.lanes_in[0]
        if spec.ddr_weights:
            pixels, _ = band_pixels(spec)
            return streamed_mac_arrays(spec, streamed_map_buffers(spec, (Dim(pixels),), line_buffer_memory),
                                       constants)
        pixel = array("pixel", 8, (Dim(2, "complete", factor=2), Dim(c_in // lanes), spread(lanes, lanes, "reshape")),
                      rom=False)
        return mac_arrays(spec, {"pixel": pixel}, constants)

    def logic_lut(self, spec):
        return 0

    def counters(self, spec, epilogue):
        w, tokens_in = spec.window, spec.tokens_in[0]
        pixel = {"row": w.in_height, "col": w.in_width - 1, "row_phase": w.stride[0] - 1, "col_phase": w.stride[1] - 1,
                 "half": 1}
        fold = {"step": spec.fold - 1, "token": tokens_in - 1, "gap": spec.fold // tokens_in - 1}
        return pixel | fold | reduction_counters(spec)

    def view_values(self, spec, process, lanes_in, lanes_out):
        return None

    def describe(self, process, ins, outs, shapes):
        w = process.window
        return f"{process.name} ({process.source}): 1x1 conv, stride {w.stride[0]}x{w.stride[1]}{groups_text(w)}: " \
               f"{shapes}"

    def weight_rows(self, weights, spec):
        return grouped_weight_rows(weights, spec)

    def weights_layout(self, process):
        return f"[out channel][{grouped_layout(process)}]"
