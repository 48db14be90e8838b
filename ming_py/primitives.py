"""The calibrated cost of the datapath primitives of the emitted HLS C++, for the cost model.

`primitives.json` (next to this module) holds, for every primitive the generated C++ is built of -- a MAC lane's
product and adder tree, each requantization datapath, a max-pooling (or MAXIMUM, MINIMUM) lane, a table lane, a
multiplexer, a loop counter, the AXI adapters -- its LUTs, flip-flops, DSP48E2 slices, carry chains and LUT levels
as yosys synthesizes a Verilog model of it for the UltraScale+ fabric (`synth_xilinx -family xcup`). Regenerate it,
and read how each figure is measured, with

    python benchmarks/calibrate.py          # needs yosys (sudo apt-get install yosys)
    python benchmarks/calibrate.py --check  # exit 1 if a figure differs from the committed table

An entry has `lut` (LUT cells; `carry_route_through` more LUTs the device puts in front of a carry chain where
yosys wires it straight), `ff` (the datapath's own registers; `io_ff` the model's input and output registers),
`dsp` (`dsp_chosen` where yosys's DSP48E2 tiling differs from AMD UG579's), `carry8`, `muxf7`, `muxf8` (not LUTs)
and `levels` (LUTs on the longest path between registers), with `models` (what was synthesized), `source`,
`command` and `params`; a primitive swept over a width or a count has them per point under `points`, keyed by the
swept value. The figures are yosys's, comparable with each other rather than equal to Vivado's.
"""

from __future__ import annotations

import bisect
import functools
import json
from pathlib import Path

PRIMITIVES = (
    "mac_product_fabric", "mac_product_dsp", "mac_pair_dsp", "adder_tree",
    "requant_lean_dsp", "requant_lean_dsp_shift_by_channel", "requant_lean_fabric", "requant_exact",
    "requant_fixed_point", "requant_fixed_point_rom", "requant_narrow_dsp", "requant_narrow_fabric",
    "requant_narrow_wide_dsp", "requant_narrow_wide_fabric", "requant_add", "requant_add_float", "requant_mul",
    "average_term", "average_add", "average_level", "requant_shift", "max_int8", "min_int8", "table_lane",
    "bilinear_lane_dsp", "bilinear_lane_fabric", "mux_int8", "counter", "unpack_axis", "pack_axis", "weight_load",
)

TABLE: dict = json.loads(Path(__file__).with_name("primitives.json").read_text())


def primitive(name: str) -> dict:
    """The table's entry of a primitive (KeyError for an unknown name)."""
    return TABLE["primitives"][name]


def points(name: str) -> dict[int, dict]:
    """The figures of a swept primitive by the swept value (counter: bits, mux_int8: inputs, ...)."""
    return {int(value): figures for value, figures in primitive(name)["points"].items()}


@functools.lru_cache(maxsize=None)
def _sorted_points(name: str) -> tuple[tuple[int, ...], tuple[dict, ...]]:
    """A swept primitive's recorded values in order, and their figures (the cost model asks for them per candidate)."""
    by_value = points(name)
    recorded = tuple(sorted(by_value))
    return recorded, tuple(by_value[v] for v in recorded)


def _at_least(name: str, value: int) -> dict:
    """The point at the smallest recorded value >= `value`, the largest one beyond them."""
    recorded, figures = _sorted_points(name)
    return figures[min(bisect.bisect_left(recorded, value), len(recorded) - 1)]


def device_luts(figures: dict) -> int:
    """The LUTs a mapped primitive takes on the device: its LUT cells and the route-through LUTs of carry-chain
    inputs yosys wires straight from a register (`carry_route_through`)."""
    return figures["lut"] + figures.get("carry_route_through", 0)


def lut(name: str) -> int:
    """LUTs of a primitive that is not swept."""
    return device_luts(primitive(name))


def counter_lut(bits: int) -> int:
    """LUTs of a loop counter of `bits` bits (its compare with the limit, increment and wrap)."""
    return device_luts(_at_least("counter", bits))


def mux_lut(n: int) -> int:
    """LUTs of an int8 n:1 multiplexer."""
    return device_luts(_at_least("mux_int8", n))


def adapter_lut(name: str, lanes: int) -> int:
    """LUTs of an AXI adapter (`unpack_axis`, `pack_axis`) at `lanes` lanes."""
    return device_luts(_at_least(name, lanes))


def weight_load(beats: int) -> dict:
    """The figures of the load of weights in URAM for rows of `beats` 64-bit beats (a process's load loop and the
    weight loader's loop over its beats)."""
    return _at_least("weight_load", beats)


def adder_tree_per_term() -> float:
    """LUTs one more product adds to a MAC lane's adder tree (the fit over the swept term counts)."""
    return primitive("adder_tree")["per_term"]


def adder_tree_base() -> float:
    """LUTs of a MAC lane's accumulate (`acc = (first ? bias : acc) + sum`) beyond its adder tree's terms."""
    return primitive("adder_tree")["base"]


def adder_tree_lut(terms: int) -> int:
    """LUTs of one lane's adder tree over `terms` products and its accumulator: base + per_term * terms."""
    return round(adder_tree_base() + adder_tree_per_term() * terms)


def dsp(name: str) -> int:
    """DSP48E2 slices of a primitive: the UG579 tiling where it differs from yosys's inference, else yosys's."""
    entry = primitive(name)
    return entry.get("dsp_chosen", entry["dsp"])
