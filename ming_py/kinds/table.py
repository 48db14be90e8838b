"""A function of one int8 value looked up in a 256-entry table per lane: a requantization between two
scales (`rescale`: DequantizeLinear -> QuantizeLinear) or an activation (`table`: Sigmoid, HardSwish,
LeakyRelu, ...; one table per channel where the function differs by channel)."""

from __future__ import annotations

from dataclasses import dataclass

from ming_py.array_layout import Dim, array, spread
from ming_py.ir import LookupTable
from ming_py.loops import Access

from .base import DataMovement, one_lane_count, pixel_positions, register


def tables_per_lane(spec, epilogue) -> int:
    """The 256-entry tables each lane holds: one, or with a table per channel, one for each channel the lane
    carries (the tokens of a pixel)."""
    return spec.tokens_in[0] if isinstance(epilogue, LookupTable) and epilogue.groups > 1 else 1


@dataclass(frozen=True)
class TableValues:
    tables_per_lane: int  # `tables_per_lane`


class TableKind(DataMovement):
    template = "table"
    pipeline_label = "tokens"

    def lane_options(self, unroll, ins, outs, params, limit):
        return one_lane_count(ins, outs, limit)

    def pipeline_depth(self, terms):
        return 2  # a stream read, a table read

    def positions(self, spec):
        return pixel_positions(spec, (Access(0, 1, t) for t in spec.tokens_in),
                               (Access(0, 1, t) for t in spec.tokens_out))

    def arrays(self, spec, epilogue, line_buffer_memory, constants):
        """`[lanes][tables per lane][256]`: a ROM bank per lane, holding the table of every channel the lane
        carries (lane l of the t-th token of a pixel carries channel t * lanes + l), one read per iteration. One
        table a lane sits in LUTs: 256 x 8 bits is 32 LUT6, four 64 x 1 ROMs a bit that the slice's MUXF7s and
        MUXF8s choose among (yosys `synth_xilinx -family xcup` of a 256 x 8 case ROM: 32 LUT6, 16 MUXF7, 8 MUXF8;
        AMD UG574, "Multiplexers"), far less of the chip than the BRAM18K it would take; a table per channel
        (256 words each) takes BRAM."""
        lanes, per_lane = spec.lanes_in[0], tables_per_lane(spec, epilogue)
        per_lane_dims = (Dim(per_lane),) if per_lane > 1 else ()
        table = array("table", 8, (spread(lanes, lanes, "partition"), *per_lane_dims, Dim(256)), rom=True,
                      large="lutram" if per_lane == 1 else "bram")
        return {"table": table} | constants

    def view_values(self, spec, process, lanes_in, lanes_out):
        return TableValues(tables_per_lane(spec, process.epilogue))

    def counters(self, spec, epilogue):
        tables = tables_per_lane(spec, epilogue)
        return {"token": tables - 1} if tables > 1 else {}  # a table per channel: the token of the pixel


@register
class Rescale(TableKind):
    name = "rescale"


@register
class Table(TableKind):
    name = "table"
