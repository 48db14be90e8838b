"""The calibrated primitive table (ming_py/primitives.json, written by benchmarks/calibrate.py with yosys) and its
loader: the table loads, holds every primitive the loader names with non-negative integer figures, and lists the
same primitives as the calibration script; the loader's look-ups behave. No test runs yosys (CI has none). The
AveragePool models (benchmarks/calibration/average_*.v) are simulated with Icarus Verilog against numerics' rules,
skipped where iverilog is not on the PATH."""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ming_py import numerics, primitives

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


# --- the AveragePool models against the Python rules (Icarus Verilog) -----------------------------------------------

MODELS = REPO / "benchmarks" / "calibration"
# (x_scale, x_zp, y_scale, y_zp) of the windows' constants: ordinary scales, the widest mantissa (2^24 - 1) with a
# zero point at the far end (the largest terms and bound), equal scales, a coarse output (clamped sums)
AVERAGE_SCALES = (
    (0.02, -3, 0.015, 5),
    (float(np.nextafter(np.float32(0.125), np.float32(0))), 127, 0.2, -7),
    (1 / 255, -128, 1 / 255, -128),
    (0.05, 0, 0.2, 0),
    (3.7e-3, 40, 1.1e-2, 12),
)
AVERAGE_DIVISORS = (9, 6, 4)


def hex_words(fields: list[tuple[int, np.ndarray]]) -> list[str]:
    """One hex word per vector: the fields (width, values; two's complement) concatenated, the first highest."""
    total = sum(width for width, _ in fields)
    words = []
    for values in zip(*(values.tolist() for _, values in fields)):
        word = 0
        for (width, _), value in zip(fields, values):
            word = (word << width) | (int(value) & ((1 << width) - 1))
        words.append(f"{word:0{(total + 3) // 4}x}")
    return words


def simulate(tmp_path: Path, source: str, fields: dict[str, tuple[int, np.ndarray]], instances: list[str],
             outputs: list[str], latency: int, extra: str = "") -> np.ndarray:
    """Run benchmarks/calibration/<source>.v (with common.v) in Icarus Verilog: the testbench holds each vector
    (`fields`: name -> (width, values), signed wires the instances connect by name) for `latency` clock edges, then
    prints `outputs` (expressions, e.g. `dut0.y`); returns them as an int64 array [vectors, outputs]."""
    names = list(fields)
    total = sum(width for width, _ in fields.values())
    count = len(next(iter(fields.values()))[1])
    (tmp_path / "vectors.hex").write_text("\n".join(hex_words([fields[n] for n in names])) + "\n")
    wires, position = [], total
    for name in names:
        width = fields[name][0]
        wires.append(f"  wire signed [{width - 1}:0] {name} = vector[{position - 1}:{position - width}];")
        position -= width
    shown = ", ".join(outputs)
    bench = "\n".join([
        "module bench;",
        "  reg clk = 0;",
        f"  reg [{total - 1}:0] vectors [0:{count - 1}];",
        f"  reg [{total - 1}:0] vector;",
        *wires,
        extra,
        *instances,
        "  integer i, out;",
        "  initial begin",
        f'    $readmemh("{tmp_path / "vectors.hex"}", vectors);',
        f'    out = $fopen("{tmp_path / "out.txt"}", "w");',
        f"    for (i = 0; i < {count}; i = i + 1) begin",
        "      vector = vectors[i];",
        f"      repeat ({latency}) begin #1 clk = 1; #1 clk = 0; end",
        f'      $fdisplay(out, "{" ".join(["%0d"] * len(outputs))}", {shown});',
        "    end",
        "    $fclose(out);",
        "    $finish;",
        "  end",
        "endmodule",
    ])
    (tmp_path / "bench.v").write_text(bench + "\n")
    binary = tmp_path / "bench.vvp"
    subprocess.run(["iverilog", "-g2005", "-s", "bench", "-o", str(binary), str(MODELS / "common.v"),
                    str(MODELS / f"{source}.v"), str(tmp_path / "bench.v")], check=True, capture_output=True)
    subprocess.run(["vvp", "-n", str(binary)], check=True, capture_output=True, cwd=tmp_path)
    lines = (tmp_path / "out.txt").read_text().split("\n")[:count]
    return np.array([[int(v) for v in line.split()] for line in lines], np.int64).reshape(count, len(outputs))


def average_constants():
    for x_scale, x_zp, y_scale, y_zp in AVERAGE_SCALES:
        c = numerics.window_average_constants(np.float32(x_scale), x_zp, np.float32(y_scale), y_zp, 9,
                                              list(AVERAGE_DIVISORS))
        assert c is not None, (x_scale, x_zp, y_scale, y_zp)
        yield c


needs_iverilog = pytest.mark.skipif(shutil.which("iverilog") is None or shutil.which("vvp") is None,
                                    reason="Icarus Verilog (iverilog, vvp) is not on the PATH")


@needs_iverilog
def test_the_average_models_compute_the_python_rules(tmp_path):
    """average_term, average_add and average_level (benchmarks/calibration) simulated: == numerics'
    window_average_terms, the chain's step round_to_float32(sum + term) and window_average_level, on the
    constants of window_average_constants for a few scale sets, their rows, and random and edge values."""
    rng = np.random.default_rng(20240611)
    constants = list(average_constants())

    # average_term: every int8 x, each set's mantissa and the extremes, a zero point per instance
    zero_points = sorted({c.x_zero_point for c in constants} | {-128, 127})
    mantissas = sorted({c.mantissa for c in constants} | {1 << 23, (1 << 24) - 1})
    x = np.tile(np.arange(-128, 128, dtype=np.int64), len(mantissas))
    mantissa = np.repeat(np.array(mantissas, np.int64), 256)
    instances = [f"  average_term #(.X_ZERO_POINT({zp})) dut{i}(.clk(clk), .x(x), .mantissa(mantissa), .term());"
                 for i, zp in enumerate(zero_points)]
    (tmp_path / "term").mkdir()
    terms = simulate(tmp_path / "term", "average_term", {"x": (8, x), "mantissa": (24, mantissa)}, instances,
                     [f"dut{i}.term" for i in range(len(zero_points))], 2)
    for i, zp in enumerate(zero_points):
        expected = np.array([numerics.window_average_terms(v, m, zp) for v, m in zip(x, mantissa)])
        np.testing.assert_array_equal(terms[:, i], expected, err_msg=f"x_zp {zp}")

    # average_add: chains of 9 terms of the sets (the real partial sums), float32-valued sums against float32
    # terms (ties of the rounding), and raw sums, within the 38-bit register's contract |sum| < 1.5 * 2^36
    sums, adds = [], []
    for c in constants:
        elements = rng.integers(-128, 128, (9, 400))
        elements[:, :100] = np.where(rng.random((9, 100)) < 0.5, -128, 127)  # the largest sums
        total = numerics.window_average_terms(elements[0], c.mantissa, c.x_zero_point)
        for element in elements[1:]:
            term = numerics.window_average_terms(element, c.mantissa, c.x_zero_point)
            sums.append(total)
            adds.append(term)
            total = numerics.round_to_float32(total + term)
    limit = 3 << 35
    raw = rng.integers(-limit, limit, 3000)
    exponents = rng.integers(0, 37, 3000)
    sums += [numerics.round_to_float32(raw), raw, numerics.round_to_float32(raw >> exponents)]
    adds += [numerics.round_to_float32(rng.integers(-(1 << 32), 1 << 32, 3000) >> rng.integers(0, 33, 3000))] * 3
    sum_in, term_in = np.concatenate(sums), np.concatenate(adds)
    (tmp_path / "add").mkdir()
    added = simulate(tmp_path / "add", "average_add", {"sum": (38, sum_in), "addend": (38, term_in)},
                     ["  average_add dut(.clk(clk), .sum(sum), .addend(addend), .next());"], ["dut.next"], 2)
    np.testing.assert_array_equal(added[:, 0], numerics.round_to_float32(sum_in + term_in))

    # average_level: per set and row, sums around every threshold and the clamps, random sums in and beyond
    # [low, high], the 38-bit extremes; one more row, its offset lowered by 3 * 2^24, has estimates below 0 (the
    # clamp at 0, which proved constants do not reach). The testbench is the thresholds' ROM, addressed by the
    # model's address register.
    lowered = dataclasses.replace(constants[0], offset=constants[0].offset - (3 << 24))
    pairs = [(c, r) for c in constants for r in range(len(AVERAGE_DIVISORS))] + [(lowered, 0)]
    assert len(pairs) <= 16  # the testbench's 4-bit row select
    rows, table = [], []
    for c, r in pairs:
        low, high = int(c.low[r]), int(c.high[r])
        edges = np.concatenate([c.thresholds[r] + low + delta for delta in (-1, 0)])
        edges = np.concatenate([edges, [low - 1, low, low + 1, high - 1, high, high + 1, -(1 << 37),
                                        (1 << 37) - 1, -c.bound, c.bound]])
        inside = rng.integers(low, high + 1, 1500)
        anywhere = rng.integers(-(1 << 37), 1 << 37, 200)
        total = np.concatenate([edges, inside, numerics.round_to_float32(inside), anywhere])
        rows.append((len(table), c, r, total))
        table.append(c.thresholds[r])
    select = np.concatenate([np.full(len(total), index) for index, _, _, total in rows])
    fields = {name: (width, np.concatenate([np.full(len(total), int(getattr(c, name)[r]))
                                            for _, c, r, total in rows]))
              for name, width in (("low", 38), ("high", 38), ("drop", 5), ("ratio", 26), ("offset", 41))}
    fields = {"sum": (38, np.concatenate([total for *_, total in rows])), **fields, "select": (4, select)}
    (tmp_path / "level").mkdir()
    (tmp_path / "level" / "rom.hex").write_text(
        "\n".join(f"{int(v) & ((1 << 39) - 1):010x}" for v in np.concatenate(table)) + "\n")
    rom = "\n".join([
        f"  reg [38:0] rom [0:{256 * len(table) - 1}];",
        f'  initial $readmemh("{tmp_path / "level" / "rom.hex"}", rom);',
        "  wire [7:0] address;",
        "  wire signed [38:0] threshold = rom[{select[3:0], address}];",
    ])
    instance = ("  average_level #(.LAST(255), .QMIN(-128)) dut(.clk(clk), .sum(sum), .low(low), .high(high), "
                ".drop(drop[4:0]), .ratio(ratio[25:0]), .offset(offset), .address(address), "
                ".threshold(threshold), .y());")
    levels = simulate(tmp_path / "level", "average_level", fields, [instance], ["dut.y"], 3, extra=rom)
    expected = np.concatenate([numerics.window_average_level(total, r, c) for _, c, r, total in rows])
    assert all(c.last == 255 and c.qmin == -128 for c in constants)
    np.testing.assert_array_equal(levels[:, 0], expected)


@needs_iverilog
@pytest.mark.parametrize("real, operand_bits", [((0.0031, 0.0047, 0.0022, 0.0039), 18),
                                                ((0.00031, 0.00047, 0.00022, 0.00039), 27)])
def test_the_narrow_requantization_model_computes_the_tflite_rule(tmp_path, real, operand_bits):
    """requant_narrow (benchmarks/calibration) simulated with the constants numerics.narrow_fixed_point proves for a
    layer's Q31 multipliers (double rounding, so the two roundings differ) == numerics.fixed_point_requantize at
    every threshold and its neighbours, on random accumulators and at the int32 ends."""
    rng = np.random.default_rng(8)
    real = np.array(real)
    exponent = np.floor(np.log2(real)).astype(np.int64) + 1
    multiplier, shift = np.round(real * np.exp2(31 - exponent)).astype(np.int64), 31 - exponent
    zp = -5
    c = numerics.narrow_fixed_point(multiplier, shift, True, zp)
    assert c is not None and c.operand_bits == operand_bits

    def rule(acc):
        return numerics.fixed_point_requantize(acc, multiplier[:, None], shift[:, None], True, zp)

    t = numerics.requant_thresholds(rule, len(real), -128, 127)
    acc = np.concatenate([t - 1, t, rng.integers(c.low - 1000, c.high + 1000, (len(real), 300)),
                          np.tile([numerics.I32_MIN, -1, 0, numerics.I32_MAX], (len(real), 1))], axis=1)
    fields = {"acc": (32, acc.reshape(-1))}
    for name, values in (("multiplier", c.multipliers), ("rounding_negative", c.roundings_negative),
                         ("rounding", c.roundings)):
        fields[name] = (48 if name.startswith("rounding") else 26,
                        np.broadcast_to(np.array(values, np.int64)[:, None], acc.shape).reshape(-1))
    instance = (f"  requant_narrow #(.OPERAND_BITS({operand_bits}), .SHIFT({c.shift}), .LOW({c.low}), .HIGH({c.high}), .CENTER({c.center}), "
                f".ZERO_POINT({zp})) dut(.clk(clk), .acc(acc), .multiplier(multiplier), "
                f".rounding_negative(rounding_negative), .rounding(rounding), .y());")
    y = simulate(tmp_path, "requant_narrow", fields, [instance], ["dut.y"], 2)
    np.testing.assert_array_equal(y[:, 0], rule(acc).reshape(-1))
