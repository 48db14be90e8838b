"""Pooling over the whole map (GlobalAveragePool, GlobalMaxPool, a ReduceMean over rows and columns): a
running maximum or sum per channel while the map streams in, then the pixel out."""

from __future__ import annotations

from ming_py import primitives
from ming_py.array_layout import array, spread, Dim
from ming_py.loops import Access, Position

from .base import REQUANT_STAGES, Unweighted, adder_tree, per_pixel_tokens, register
from .window import POOL_DEPTH


class GlobalPool(Unweighted):
    unrollable = ("c",)
    needs_window = False
    line_buffer = False
    template = "global_pool"
    pipeline_label = "channels"
    accumulator_bits: int = None

    def trip_counts(self, window, ins, outs):
        return {"c": ins[0].channels}

    def lane_options(self, unroll, ins, outs, params, limit):
        yield (unroll["c"],), (unroll["c"],)

    def lanes_match(self, spec):
        return spec.lanes_in[0] == spec.factor("c") == spec.lanes_out[0]

    def static_banks(self, unroll_k, lanes_in):
        return True

    def summed_terms(self, spec):
        return 1

    def tokens_in(self, spec):
        return per_pixel_tokens(spec)

    def reduction_tiles(self, spec):
        raise ValueError(f"a {self.name} process reduces over the whole map, not a fold")

    def positions(self, spec):
        c, h, w = spec.inputs[0]
        tokens_in, tokens_out = spec.tokens_in[0], spec.tokens_out[0]
        for _ in range(h * w):
            yield Position(tokens_in, (Access(0, 1, tokens_in),), (Access(),))
        yield Position(tokens_out, (Access(),), (Access(0, 1, tokens_out),))

    def arrays(self, spec, epilogue, line_buffer_memory, constants):
        """Its epilogue's constants (a requantization's per channel; an average's divisor is a constant of the
        code, every window being the whole map), then one accumulator per channel `[tokens][lanes]`."""
        tokens, lanes = spec.tokens_in[0], spec.lanes_in[0]
        return constants | {"acc": array("acc", self.accumulator_bits, (Dim(tokens), spread(lanes, lanes, "reshape")),
                                         rom=False)}

    def counters(self, spec, epilogue):
        _, h, w = spec.inputs[0]
        return {"pixel": h * w - 1, "t": spec.tokens_in[0] - 1}

    def view_values(self, spec, process, lanes_in, lanes_out):
        return None

    def describe(self, process, ins, outs, shapes):
        return f"{process.name} ({process.source}): {self.name}: {shapes}"


@register
class GlobalAvgPool(GlobalPool):
    name = "global_avgpool"
    accumulator_bits = 32  # an int32 sum

    def pipeline_depth(self, terms):
        return POOL_DEPTH + adder_tree(terms) + REQUANT_STAGES

    def logic_lut(self, spec):
        return spec.lanes_in[0] * primitives.adder_tree_lut(1)  # a running sum per lane


@register
class GlobalMaxPool(GlobalPool):
    name = "global_maxpool"
    accumulator_bits = 8  # a running int8 maximum

    def pipeline_depth(self, terms):
        return POOL_DEPTH + adder_tree(terms)

    def logic_lut(self, spec):
        return spec.lanes_in[0] * primitives.lut("max_int8")  # a running maximum per lane
