"""The cost model's datapath figures are the calibrated table's (ming_py/primitives.json, written by
benchmarks/calibrate.py with yosys): a constant that differs from the table fails here."""

from __future__ import annotations

import math

import pytest

from ming_py import primitives
from ming_py.epilogues import lane_cost
from ming_py.epilogues.base import LANE_PRIMITIVES, LEAN_IN_FABRIC
from ming_py.ilp.cost import HLS_LUT_OVERHEAD, MAC_PRODUCT, mac_lane

pytestmark = pytest.mark.unit

TABLE = primitives.TABLE["primitives"]


def device(entry: dict) -> int:
    """A mapped primitive's LUTs on the device: its LUT cells and carry-chain route-throughs."""
    return entry["lut"] + entry.get("carry_route_through", 0)


def test_every_cost_primitive_is_in_the_table():
    named = set(LANE_PRIMITIVES.values()) | {LEAN_IN_FABRIC} | {p for p, _ in MAC_PRODUCT.values()}
    named |= {"adder_tree", "counter", "mux_int8", "max_int8", "min_int8", "unpack_axis", "pack_axis"}
    assert named <= set(TABLE), named - set(TABLE)


@pytest.mark.parametrize("datapath", sorted(LANE_PRIMITIVES))
def test_a_requantization_lane_costs_its_synthesized_datapath(datapath):
    entry = TABLE[LANE_PRIMITIVES[datapath]]
    assert lane_cost(datapath, "dsp") == (device(entry), entry.get("dsp_chosen", entry["dsp"]))


@pytest.mark.parametrize("datapath", ["lean", "lean, shift by channel"])
def test_a_lean_lane_with_fabric_multipliers_builds_its_product_in_luts(datapath):
    """The fabric product replaces the DSP product: its LUTs are the fabric model's less the DSP model's."""
    lut, dsp = lane_cost(datapath, "fabric")
    extra = device(TABLE[LEAN_IN_FABRIC]) - device(TABLE["requant_lean_dsp"])
    assert (lut, dsp) == (device(TABLE[LANE_PRIMITIVES[datapath]]) + extra, 0)


@pytest.mark.parametrize("multipliers", sorted(MAC_PRODUCT))
def test_a_mac_lane_costs_its_synthesized_product_and_adder_term(multipliers):
    name, lanes = MAC_PRODUCT[multipliers]
    entry = TABLE[name]
    lut, dsp = mac_lane(multipliers)
    assert lut == pytest.approx(device(entry) / lanes + TABLE["adder_tree"]["per_term"])
    assert dsp == entry.get("dsp_chosen", entry["dsp"]) / lanes


def test_counters_and_multiplexers_cost_their_calibrated_points():
    counter = {int(b): device(p) for b, p in TABLE["counter"]["points"].items()}
    for bits, lut in counter.items():
        assert primitives.counter_lut(bits) == lut
    widest = max(counter)
    assert primitives.counter_lut(widest + 5) == counter[widest]  # capped at the widest recorded
    mux = {int(n): device(p) for n, p in TABLE["mux_int8"]["points"].items()}
    for n, lut in mux.items():
        assert primitives.mux_lut(n) == lut


def test_the_hls_overhead_is_finn_rs_factor():
    assert HLS_LUT_OVERHEAD == 1.1  # FINN-R (Blott et al. 2018), FINN's lut_estimation c1
    assert math.isclose(primitives.adder_tree_lut(4), TABLE["adder_tree"]["base"] + 4 * TABLE["adder_tree"]["per_term"],
                        abs_tol=0.5)
