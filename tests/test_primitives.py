"""The calibrated primitive table (ming_py/primitives.json, written by benchmarks/calibrate.py with yosys) and its
loader: the table loads, holds every primitive the loader names with non-negative integer figures, and lists the
same primitives as the calibration script; the loader's look-ups behave. No test runs yosys (CI has none)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from ming_py import primitives

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
FIGURES = ("lut", "carry_route_through", "ff", "io_ff", "dsp", "carry4", "carry8", "muxf7", "muxf8", "levels")


def calibration_script():
    """benchmarks/calibrate.py imported by path (its main() alone runs yosys)."""
    spec = importlib.util.spec_from_file_location("ming_calibrate_benchmark", REPO / "benchmarks" / "calibrate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def figure_sets(entry: dict) -> list[dict]:
    return list(entry["points"].values()) if "points" in entry else [entry]


def test_the_table_records_the_tool_and_the_command():
    assert primitives.TABLE["tool"].startswith("Yosys ")
    assert primitives.TABLE["command"].startswith("synth_xilinx -family xcup -flatten")
    assert primitives.TABLE["family"] == "xcup"


@pytest.mark.parametrize("name", primitives.PRIMITIVES)
def test_every_primitive_has_non_negative_integer_figures(name):
    entry = primitives.primitive(name)
    assert entry["source"].startswith("benchmarks/calibration/") and (REPO / entry["source"]).is_file()
    for figures in figure_sets(entry):
        for key in FIGURES:
            value = figures[key]
            assert isinstance(value, int) and not isinstance(value, bool) and value >= 0, (name, key, value)
    if "dsp_chosen" in entry:
        assert isinstance(entry["dsp_chosen"], int) and entry["dsp_chosen"] >= 0
        assert entry["dsp_note"] and entry["dsp_source"]


def test_the_table_holds_exactly_the_loaders_primitives():
    assert sorted(primitives.TABLE["primitives"]) == sorted(primitives.PRIMITIVES)


def test_the_calibration_script_lists_the_tables_primitives():
    script = calibration_script()
    assert [p.name for p in script.PRIMITIVES] == list(primitives.PRIMITIVES)
    assert sorted(p.name for p in script.PRIMITIVES) == sorted(primitives.TABLE["primitives"])


def test_counter_luts_do_not_decrease_with_the_width():
    luts = [primitives.counter_lut(bits) for bits in range(1, 41)]
    assert luts == sorted(luts)
    widest = max(primitives.points("counter"))
    assert primitives.counter_lut(widest + 8) == primitives.device_luts(primitives.points("counter")[widest])


def test_lookups_take_the_next_recorded_point():
    counters = primitives.points("counter")
    assert primitives.counter_lut(5) == primitives.device_luts(counters[min(b for b in counters if b >= 5)])
    muxes = primitives.points("mux_int8")
    assert primitives.mux_lut(3) == primitives.device_luts(muxes[4])
    assert primitives.mux_lut(1000) == primitives.device_luts(muxes[max(muxes)])


def test_adder_tree_is_its_fit():
    tree = primitives.primitive("adder_tree")
    assert tree["per_term"] > 0
    for terms in (1, 8, 32):
        assert primitives.adder_tree_lut(terms) == round(tree["base"] + tree["per_term"] * terms)


def test_dsp_prefers_the_chosen_figure():
    for name in primitives.PRIMITIVES:
        entry = primitives.primitive(name)
        if "points" not in entry:
            assert primitives.dsp(name) == entry.get("dsp_chosen", entry["dsp"])
    assert primitives.dsp("mac_product_dsp") == 1
    assert primitives.dsp("mac_product_fabric") == 0
    assert primitives.dsp("requant_shift") == 0


def test_the_ug579_tiling():
    script = calibration_script()
    assert script.dsp48e2_tiles(script.Product(8, True, 8, True)) == 1
    assert script.dsp48e2_tiles(script.Product(27, True, 8, True)) == 1
    assert script.dsp48e2_tiles(script.Product(24, False, 27, False)) == 2
    assert script.dsp48e2_tiles(script.Product(32, True, 32, True)) == 4
