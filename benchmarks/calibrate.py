"""Calibration of the cost model: LUT, FF, DSP48E2 and carry figures of every datapath primitive the emitted HLS C++
contains, synthesized with yosys for the UltraScale+ fabric (KV260, Alveo) and written to ming_py/primitives.json,
the table the cost model reads (`ming_py.primitives`).

    sudo apt-get install yosys                    # the Debian package; yosys 0.23 made the committed table
    python benchmarks/calibrate.py                # synthesize every primitive, print them, write the table
    python benchmarks/calibrate.py --only counter # one primitive (its entry of the table is replaced)
    python benchmarks/calibrate.py --check        # exit 1 if a figure differs from the committed table

Not part of CI (no yosys there); a few minutes on two cores. Each primitive is a parametrised Verilog model in
benchmarks/calibration/<source>.v (operators shared by several in common.v), written after the C++ it stands for
(ming_numerics.h, ming_stream.h, emit/templates/process/*.j2; each file names what it follows), at the widths the
C++ gives: its masks and types, constants of the process as parameters (folded), per-channel ROM values as inputs.
Every model registers its inputs and its outputs, so the logic measured lies between registers.

Flow: `read_verilog common.v <source>.v; chparam ...; synth_xilinx -family xcup -flatten -noiopad -noclkbuf
-nowidelut -widemux 9 [-nodsp]; setattr -mod -unset keep_hierarchy; flatten; stat`, yosys's DSP48E2 inference on
(`-nodsp` for the fabric variants), out of context (`-noiopad -noclkbuf`: no I/O or clock buffers).
* `-nowidelut`: yosys 0.23's wide-LUT mapping (LUT7/LUT8 of LUT pairs and MUXF7/F8, by its abc script) is erratic:
  an 8-bit counter came out as 8 LUT6 driving 32 MUXF7, which no CLB can place, a 32:1 multiplexer as 168 LUTs and
  184 MUXFs against 97 LUTs without it. `-widemux 9` maps multiplexers of 9 inputs or more to LUT6 + MUXF7 + MUXF8
  as Vivado does (16:1 x 8 bits: 32 LUT6, 16 MUXF7, 8 MUXF8; from 5 inputs on it built an 8:1 multiplexer of 4
  LUTs and 3 MUXFs a bit, where abc takes 3 LUTs). One exception: the table lane's ROM, which `-widemux` turns into
  a tree of multiplexers with constant leaves (400 MUXFs); it keeps yosys's default mapping, which builds each
  output bit of 4 LUT6, 2 MUXF7 and a MUXF8 (Vivado's 256 x 1 ROM). Every entry records its command.
* Adders that feed adders are `ming_add` instances (common.v), kept apart until after synthesis, as Vitis HLS
  instantiates an operator per `+`: yosys's alumacc would merge them into one multi-operand $macc, which yosys 0.23
  maps to carry-save full adders in LUTs (an 8-term adder tree: 336 LUTs instead of 148).

Constants of a process that change the logic (a fixed-point requantizer's multiplier and shift) are calibrated at
representative settings, the values of the published models (`constants`): the entry's figures are those of the
setting with the most device LUTs (`chosen`), every setting's under `settings`.

Figures per entry (or per point of a sweep):
* lut: LUT1..LUT6 and INV (a LUT1) cells. MUXF7/F8 are not LUTs (`muxf7`, `muxf8`; `muxf9`, LUTRAM `lutram`,
  `srl` and `bram` only when present);
* carry_route_through: the carry chain's sum inputs yosys takes straight from a register, a port or a DSP48E2 (x + 1
  of a counter); on the device each is a LUT in front of the CARRY8, which `lut` does not count;
* ff: FDRE/FDSE/FDCE/FDPE of the datapath's own registers (an accumulator, a counter, a buffer). The input and
  output registers each model adds, recognized by the `io_register` attribute of their wires, are `io_ff`,
  subtracted from the total (total = ff + io_ff);
* dsp: DSP48E2 cells as yosys infers them. Where that differs from the operand tiling of AMD UG579 (the DSP48E2
  multiplies 27 x 18 bits, two's complement: an unsigned operand needs one bit more, a wider one is split over
  several slices), `dsp_chosen` is the UG579 count, `dsp_note` says why and `dsp_source` cites it; `lut` then
  includes yosys's fabric adders of its extra partial products;
* carry8: yosys 0.23 maps carry chains to CARRY4 (`carry4`); a chain of k CARRY4 is ceil(k / 2) CARRY8;
* levels: LUTs on the longest path between registers (the method of benchmarks/control_luts.py; a DSP48E2 and the
  carry chain count as no level).
The figures are yosys's, not Vivado's (its multiplier in LUTs, a shift-add array without Booth recoding, takes 116
LUTs for 8 x 8 bits); they compare the primitives with each other, which the cost model needs, and the vendor
report gives the truth. Sweeps (`points`, keyed by the swept value) size what grows with a width or a count; the
adder tree's points are fitted by least squares as lut = base + per_term * terms.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from netlist_figures import figures, parameters  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "benchmarks" / "calibration"
COMMON = MODELS / "common.v"
TABLE = ROOT / "ming_py" / "primitives.json"

FAMILY = "xcup"
SYNTH = f"synth_xilinx -family {FAMILY} -flatten -noiopad -noclkbuf"
MAPPING = "-nowidelut -widemux 9"  # see the module docstring
DSP_SOURCE = ("AMD UG579 (UltraScale Architecture DSP Slice): the DSP48E2 multiplier is 27 x 18 bits, two's "
              "complement; a wider product is tiled over several slices")


@dataclass(frozen=True)
class Product:
    """A multiplication of the datapath: operand widths and signedness, for the UG579 tiling."""

    a_bits: int
    a_signed: bool
    b_bits: int
    b_signed: bool

    def __str__(self) -> str:
        def operand(bits, signed):
            return f"{bits}-bit {'signed' if signed else 'unsigned'}"
        return f"{operand(self.a_bits, self.a_signed)} x {operand(self.b_bits, self.b_signed)}"


@dataclass(frozen=True)
class Primitive:
    name: str
    source: str  # benchmarks/calibration/<source>.v, whose top module has the same name
    models: str  # what the model is, one line
    params: tuple[tuple[str, int], ...] = ()  # parameters set with chparam
    sweep: tuple[str, tuple[int, ...]] | None = None  # (parameter, values): one synthesis per value
    fabric: bool = False  # -nodsp: products in LUTs
    mapping: str = MAPPING
    products: tuple[Product, ...] = ()  # for the DSP48E2 count of AMD UG579 (none for fabric variants)
    # representative constants of the process, parameter settings that change the logic: one synthesis each, the
    # entry's figures those of the setting with the most device LUTs (each setting's under `settings`)
    constants: tuple[tuple[tuple[str, int], ...], ...] = ()

    @property
    def command(self) -> str:
        return " ".join(filter(None, (SYNTH, self.mapping, "-nodsp" if self.fabric else "")))

    def points(self) -> list[dict[str, int]]:
        """The parameter settings to synthesize, one per point of the sweep or per setting of the constants (one
        without either)."""
        if self.constants:
            return [dict(self.params, **dict(setting)) for setting in self.constants]
        if self.sweep is None:
            return [dict(self.params)]
        parameter, values = self.sweep
        return [dict(self.params, **{parameter: value}) for value in values]


SIGNED_8 = Product(8, True, 8, True)
LEAN_PRODUCT = Product(24, False, 27, False)
LEAN_MODEL = ("ming::requantize_lean: |acc| clamped to limit (24 bits), a 24 x 27-bit product, the whole part "
              "(11 bits) and the fraction's distance from one half against a band from an 11-bit priority encoder, "
              "sign, zero point, saturation")

FIXED_POINT_MODEL = ("ming::requantize_fixed_point (TFLite) at the C++'s widths: a 32 x 31-bit product (63 bits), "
                     "its quotient by 2^shift (the low 32 bits) plus one where the remainder reaches the threshold "
                     "(2^(shift-1), +-2^30 with double rounding), zero point, saturation")
# The constants of the fixed-point requantizer where the C++ passes them (FROM_ROMS 0): (multiplier, shift, double
# rounding) of every process of the published models (tests/data/published/) that takes them as constants: the
# three ADDs of MLPerf Tiny's ResNet-8 (pretrainedResnet_quant.tflite; TFLite's ADD rounds twice), the averages over
# the whole map of ResNet-8 (8 x 8), VWW (vww_96_int8, 3 x 3), KWS (kws_ref_model, 25 x 5) and MobileNet v1 0.25
# (4 x 4; TOSA's reciprocal rounds once). The product by a constant and the constant threshold change the logic a
# little with them (169 to 197 LUTs); the entry charges the most, so no process is under-charged.
FIXED_POINT_CONSTANTS = tuple(
    (("MULTIPLIER", multiplier), ("SHIFT", shift), ("DOUBLE_ROUND", double_round))
    for multiplier, shift, double_round in (
        (1098017566, 48, 1), (1140768826, 48, 1), (1835721671, 49, 1),
        (1073741825, 36, 0), (1908874355, 34, 0), (1099511628, 37, 0), (1073741825, 34, 0)))

NARROW_PRODUCT = Product(18, True, 26, False)
NARROW_WIDE_PRODUCT = Product(27, True, 26, False)
NARROW_MODEL = ("ming::requantize_narrow (TFLite's rule, proved): the accumulator clamped to constants and centred "
                "(18 bits), an 18 x 26-bit product (multiplier from a ROM), the rounding of the accumulator's sign "
                "(two 48-bit ROM values, a 2:1 select) added, a constant shift (wiring), zero point, saturation")

BILINEAR_PRODUCTS = (Product(9, True, 11, True), Product(9, True, 11, True), Product(19, True, 11, True))
BILINEAR_MODEL = ("one lane of a bilinear resize (process/bilinear.cpp.j2, ming::bilinear): the four int8 neighbours "
                  "chosen from the line buffer's four banks by the parities of their rows and columns (four 8-bit 4:1 "
                  "multiplexers), each row across as (v0 << 10) + (v1 - v0) * wx1 (a 9 x 11-bit product, 18 bits), "
                  "the rows down as "
                  "(top << 10) + (bottom - top) * wy1 (a 19 x 11-bit product, 28 bits), the rounding half away from "
                  "zero and the shift by 20 (weights 11-bit inputs)")

PRIMITIVES = (
    Primitive("mac_product_fabric", "mac_product", "int8 x int8 -> int16 MAC product in LUTs (BIND_OP impl=fabric)",
              fabric=True),
    Primitive("mac_product_dsp", "mac_product", "int8 x int8 -> int16 MAC product in a DSP48E2 (BIND_OP impl=dsp)",
              products=(SIGNED_8,)),
    Primitive("mac_pair_dsp", "mac_pair",
              "ming::multiply_pair, per pair of MAC lanes: w_high * 2^18 + w_low (27 bits) times x in one DSP48E2, "
              "the 34-bit product split into an 18-bit and a 16-bit product (AMD WP486)",
              products=(Product(27, True, 8, True),)),
    Primitive("adder_tree", "adder_tree",
              "one MAC lane: a tree of adders over TERMS int16 products (each adder one bit wider than its operands) "
              "and the 32-bit accumulate acc = (first ? bias : acc) + sum; acc is the ff",
              sweep=("TERMS", (1, 2, 4, 8, 16, 32))),
    Primitive("requant_lean_dsp", "requant_lean", LEAN_MODEL + "; the shift a constant of the process (wiring)",
              params=(("SHIFT", 34),), products=(LEAN_PRODUCT,)),
    Primitive("requant_lean_dsp_shift_by_channel", "requant_lean",
              LEAN_MODEL + "; the shift from a per-channel ROM (barrel shifters and masks)",
              params=(("SHIFT_BY_CHANNEL", 1),), products=(LEAN_PRODUCT,)),
    Primitive("requant_lean_fabric", "requant_lean",
              LEAN_MODEL + "; the 24 x 27-bit product in LUTs (Multiplier::fabric), a constant shift",
              params=(("SHIFT", 34),), fabric=True),
    Primitive("requant_exact", "requant_exact",
              "ming::requantize, the exact float32 emulation, at the C++'s widths (int32 acc, 24-bit mantissa, "
              "9-bit exponent, a 48-bit product): two normalizations to 24 significant bits (bit_length, variable rne shifts), a "
              "25 x 24-bit product, the exponent's shift, sign, zero point, saturation",
              products=(Product(25, False, 24, False),)),
    Primitive("requant_fixed_point", "requant_fixed_point",
              FIXED_POINT_MODEL + "; multiplier and shift constants of the process (TFLite's ADD, MUL and average "
              "over the whole map): a product by a constant, the threshold a constant by the sign, the shift wiring",
              params=(("FROM_ROMS", 0),), constants=FIXED_POINT_CONSTANTS, products=(Product(32, True, 32, True),)),
    Primitive("requant_fixed_point_rom", "requant_fixed_point",
              FIXED_POINT_MODEL + "; multiplier and shift from ROMs (per channel after a MAC, by the valid count "
              "of a window's average): the quotient and the remainder's mask variable shifts, the threshold a variable "
              "power of two",
              params=(("FROM_ROMS", 1),), products=(Product(32, True, 32, True),)),
    # The Add and Sub models' parameters (their defaults: chparam takes no negative value) are the constants of the
    # residual Adds of tests/data/converted/resnet.onnx (a ResNet in tf2onnx's QDQ form, frontends.onnx_model):
    # numerics.add_constants of its second, which onnxruntime runs as QLinearAdd in the uint8 domain (scales
    # 0.027871711 zp 8 + 0.012513576 zp -11 -> 0.013043448 zp -128: MA = 8962540 << 2, MB = 16095665, F = -13200810
    # << 9 at the binary point 2^-24), numerics.float_add_constants of its first, which onnxruntime leaves in float
    # (0.016052917 zp -128 + 0.025116825 zp -62 -> 0.018626614 zp -128: no alignment, x_shift 25, divisor
    # 10000087). The mantissas are inputs of both models.
    Primitive("requant_narrow_dsp", "requant_narrow", NARROW_MODEL + "; the product and the rounding in a DSP48E2",
              params=(("OPERAND_BITS", 18),), products=(NARROW_PRODUCT,)),
    Primitive("requant_narrow_fabric", "requant_narrow",
              NARROW_MODEL + "; the product and the rounding in LUTs (Multiplier::fabric)",
              params=(("OPERAND_BITS", 18),), fabric=True),
    Primitive("requant_narrow_wide_dsp", "requant_narrow",
              NARROW_MODEL.replace("(18 bits), an 18", "(27 bits), a 27") + "; the product over two DSP48E2",
              params=(("OPERAND_BITS", 27),), products=(NARROW_WIDE_PRODUCT,)),
    Primitive("requant_narrow_wide_fabric", "requant_narrow",
              NARROW_MODEL.replace("(18 bits), an 18", "(27 bits), a 27") + "; the product and the rounding in LUTs "
              "(Multiplier::fabric)", params=(("OPERAND_BITS", 27),), fabric=True),
    Primitive("requant_add", "requant_add",
              "ming::add_requant<26, 24, 33> (QLinearAdd) at the C++'s widths: the offset, two 9 x 24-bit products "
              "(mantissas of the float32 ratios, their exponents wiring), inner = rn24(b' * MB + F) and outer = "
              "rn24(a' * MA + inner) (two signed round_to_float32, mask and add, of 34 and 35-bit magnitudes), the "
              "rounding at the constant shift, saturation, the offset",
              products=(Product(9, True, 24, False), Product(9, True, 24, False))),
    Primitive("requant_add_float", "requant_add_float",
              "ming::add_float_requant<0, 0, 25, 24> (Sub, unfused Add) at the C++'s widths: two 9 x 25-bit "
              "signed dequantize products (Sub negates one mantissa), their signed round_to_float32 (32-bit "
              "magnitudes), the aligned sum rounded to float32 (33-bit magnitude), its magnitude clamped and shifted "
              "(59 bits), a 10-step restoring division by the constant divisor (written out), the remainder against "
              "the band of bit_length(y0), sign, zero point, saturation",
              products=(Product(9, True, 25, True), Product(9, True, 25, True))),
    Primitive("requant_mul", "requant_mul",
              "ming::mul_requant (QLinearMul) at the C++'s widths: a 9 x 9 and a 16 x 24-bit product, two "
              "round_to_float32 (40 and 55-bit magnitudes, mask and add), the zero point at the constant shift, the "
              "rounding, saturation, the offset",
              products=(Product(9, True, 9, True), Product(16, False, 24, False))),
    # The exact AveragePool over windows (numerics.WindowAverageConstants, onnxruntime's float32 chain in integers),
    # per lane: a term per window element, a step of the chain per element after the first, one output stage. The
    # widths are a 3 x 3 window's (every partial sum below 2 * 9 * 2^32); the mantissa and the row's constants are
    # inputs, so the figures hold for any scales; the output stage's thresholds are a ROM outside the model.
    Primitive("average_term", "average_term",
              "ming::average_term (AveragePool over windows, one element): rn24((x - x_zp) * mantissa), a 9 x "
              "24-bit product (the float32 input scale's mantissa, an input) and its signed round_to_float32 "
              "(32-bit magnitude, mask and add) to a 33-bit term (ming::widths::average_term)",
              products=(Product(9, True, 24, False),)),
    Primitive("average_add", "average_add",
              "ming::average_add<9> (AveragePool over windows, one step of the chain): rn24(sum + addend), a "
              "38-bit signed partial sum and a 38-bit addend (a term or a column's sum, at the partial sums' width "
              "as the C++ takes it), their 39-bit sum's signed round_to_float32 (38-bit magnitude, mask and add) "
              "to the 38-bit sum"),
    Primitive("average_level", "average_level",
              "ming::average_level (AveragePool over windows, the output stage): the 38-bit sum clamped to the "
              "row's [low, high] less low (u), u >> drop (a barrel shifter to 16 bits), a 16 x 26-bit product "
              "plus the offset, its bits from 24 up clamped to 0 .. 255 (the address of the thresholds' ROM, "
              "outside the model, read the next cycle; u and k wait in 46 pipeline flip-flops), the 38-bit "
              "unsigned compare u < T, k - (u < T) + qmin (ming::widths::average_level<9>)",
              products=(Product(16, False, 26, False),)),
    Primitive("requant_shift", "requant_shift",
              "ming::requantize_shift (an average by a power of two): the offset, a rounding shift by a constant "
              "(a compare of the bits shifted out with one half and an increment), zero point, saturation"),
    Primitive("max_int8", "max_int8",
              "one max-pooling lane per window element, or one lane of an element-wise MAXIMUM: an 8-bit signed "
              "compare and a 2:1 multiplexer"),
    Primitive("min_int8", "min_int8",
              "one lane of an element-wise MINIMUM: an 8-bit signed compare and a 2:1 multiplexer"),
    Primitive("table_lane", "table_lane",
              "one table lane: a 256 x 8-bit ROM of constant (pseudo-random) contents in LUTs, indexed by x + 128",
              mapping=""),
    Primitive("bilinear_lane_dsp", "bilinear_lane",
              BILINEAR_MODEL + "; the three products in DSP48E2 (BIND_OP impl=dsp)", products=BILINEAR_PRODUCTS),
    Primitive("bilinear_lane_fabric", "bilinear_lane", BILINEAR_MODEL + "; the three products in LUTs (for "
              "comparison: the bilinear kind binds its products to DSPs)", fabric=True),
    Primitive("mux_int8", "mux_int8",
              "an 8-bit INPUTS:1 multiplexer with its select (a channel permutation's output lane)",
              sweep=("INPUTS", (2, 4, 8, 16, 32, 64))),
    Primitive("counter", "counter",
              "a loop counter of WIDTH bits with an enable, wrapping at LIMIT = 2^WIDTH - 2 (its own register is "
              "the ff; no reset: the loop's initialization is the FDRE's reset pin)",
              sweep=("WIDTH", (1, 2, 3, 4, 6, 8, 10, 12, 16, 20, 24, 32))),
    Primitive("unpack_axis", "unpack_axis",
              "ming::unpack_axis with LANES lanes: the LANES + 7 value buffer filled from a 64-bit word at a "
              "variable offset and shifted down by LANES, its counters (values held, words, trips) and framing "
              "flags for a 224 x 224 x 3 image; the streams' handshakes are not modelled",
              sweep=("LANES", (1, 2, 4, 8, 16, 32, 64))),
    Primitive("pack_axis", "pack_axis",
              "ming::pack_axis with LANES lanes: the LANES + 7 value buffer filled from a token at a variable "
              "offset and shifted down by 8, the word with the image's last values, its counters (values held, "
              "tokens, words, trips), TLAST/TUSER, for a 224 x 224 x 3 image; the streams' handshakes are not "
              "modelled",
              sweep=("LANES", (1, 2, 4, 8, 16, 32, 64))),
    Primitive("weight_load", "weight_load",
              "the load of weights in URAM: a process's load loop (trip, beat and row counters, the row register of "
              "the BEATS - 1 64-bit beats before a row's last with a clock enable per beat, the URAM write port's "
              "address, word (the held beats and the arriving last one) and enable) and the weight loader's loop "
              "over its beats, for ROWS = 4096 rows (one URAM deep)",
              sweep=("BEATS", (1, 2, 4, 8, 16, 32, 64))),
)


def by_name() -> dict[str, Primitive]:
    return {p.name: p for p in PRIMITIVES}


# --- DSP48E2 tiling (AMD UG579) -----------------------------------------------------------------------------------

def port_slices(bits: int, signed: bool, port: int) -> int:
    """Slices an operand needs on a `port`-bit two's complement multiplier input: the low pieces carry port - 1
    bits (unsigned), the top one `port` bits if the operand is signed."""
    if signed:
        return 1 if bits <= port else 1 + math.ceil((bits - port) / (port - 1))
    return math.ceil(bits / (port - 1))


def dsp48e2_tiles(product: Product) -> int:
    """DSP48E2 slices of one product: the better of the two ways to put it on the 27 x 18-bit multiplier."""
    def tiles(first, second):
        return port_slices(*first, 27) * port_slices(*second, 18)
    a, b = (product.a_bits, product.a_signed), (product.b_bits, product.b_signed)
    return min(tiles(a, b), tiles(b, a))


def dsp_fields(primitive: Primitive, inferred: int) -> dict:
    """dsp_chosen, dsp_note and dsp_source where yosys's count differs from the UG579 tiling."""
    if primitive.fabric:
        return {}
    chosen = sum(dsp48e2_tiles(p) for p in primitive.products)
    if chosen == inferred:
        return {}
    shapes = "; ".join(f"{p}: {dsp48e2_tiles(p)}" for p in primitive.products)
    note = (f"yosys infers {inferred} DSP48E2: its mul2dsp cuts a product too wide for one slice into pieces of at "
            f"most 18 bits on either port and adds the partial products in fabric (counted in lut); UG579 tiling "
            f"(the better way onto the 27 x 18-bit multiplier): {shapes}")
    return {"dsp_chosen": chosen, "dsp_note": note, "dsp_source": DSP_SOURCE}


# --- yosys --------------------------------------------------------------------------------------------------------

def yosys_version() -> str:
    return subprocess.run(["yosys", "-V"], capture_output=True, text=True, check=True).stdout.strip()


def run_yosys(primitive: Primitive, params: dict[str, int]) -> tuple[dict[str, int], dict]:
    """(cell counts of `stat`, the flattened netlist) of one synthesis."""
    top = primitive.source
    with tempfile.TemporaryDirectory() as tmp:
        stat, netlist = Path(tmp) / "stat.txt", Path(tmp) / "netlist.json"
        script = "; ".join([
            f"read_verilog {COMMON} {MODELS / (top + '.v')}",
            *(f"chparam -set {name} {value} {top}" for name, value in sorted(params.items())),
            f"{primitive.command} -top {top}",
            "setattr -mod -unset keep_hierarchy", "flatten", "opt_clean",
            f"tee -q -o {stat} stat", f"write_json {netlist}",
        ])
        run = subprocess.run(["yosys", "-q", "-p", script], capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"yosys failed on {primitive.name} {params}:\n{run.stderr[-3000:]}")
        return parse_stat(stat.read_text()), json.loads(netlist.read_text())["modules"][top]


def parse_stat(text: str) -> dict[str, int]:
    """Cell type -> count from the `stat` report."""
    cells = text.split("Number of cells:", 1)[1]
    return {kind: int(count) for kind, count in re.findall(r"^\s+(\S+)\s+(\d+)\s*$", cells, re.MULTILINE)}


def least_squares(points: dict[str, dict]) -> tuple[float, float]:
    """(base, per_term) of lut = base + per_term * terms over the points."""
    xs = [int(terms) for terms in points]
    ys = [point["lut"] for point in points.values()]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
    return mean_y - slope * mean_x, slope


def shared_parameters(settings: list[dict[str, int]], swept: str | None) -> dict[str, int]:
    """The parameters every point has with the same value, but the swept one."""
    first, *rest = settings
    return {name: value for name, value in first.items()
            if name != swept and all(other.get(name) == value for other in rest)}


def entry(primitive: Primitive, measured: list[tuple[dict[str, int], dict[str, int]]]) -> dict:
    """The table's entry of a primitive from the (figures, parameters) of its points, in the order of `points()`."""
    parameter = primitive.sweep[0] if primitive.sweep else None
    common = {"models": primitive.models, "source": f"benchmarks/calibration/{primitive.source}.v",
              "command": primitive.command, "params": shared_parameters([p for _, p in measured], parameter)}
    results = [f for f, _ in measured]
    if primitive.constants:
        return {**costliest_setting(primitive, measured), **common}
    if parameter is None:
        (result,) = results
        return {**result, **dsp_fields(primitive, result["dsp"]), **common}
    points = {str(value): result for value, result in zip(primitive.sweep[1], results)}
    swept = {**common, "sweep": parameter, "points": points}
    if primitive.name == "adder_tree":
        base, per_term = least_squares(points)
        swept.update(base=round(base, 2), per_term=round(per_term, 3))
    return swept


def costliest_setting(primitive: Primitive, measured: list[tuple[dict[str, int], dict[str, int]]]) -> dict:
    """The figures of the setting of a primitive's constants with the most device LUTs (LUT cells and carry
    route-throughs; the first of equals), and every setting's figures under `settings` with its constants."""
    swept = [name for name, _ in primitive.constants[0]]
    settings = [{**figures, "constants": {name: params[name] for name in swept}} for figures, params in measured]
    costliest = max(settings, key=lambda f: f["lut"] + f["carry_route_through"])
    figures = {key: value for key, value in costliest.items() if key != "constants"}
    return {**figures, **dsp_fields(primitive, figures["dsp"]), "chosen": costliest["constants"],
            "settings": settings}


# --- the table ------------------------------------------------------------------------------------------------------

def calibrate(primitives: list[Primitive], workers: int) -> dict[str, dict]:
    """Entries of the given primitives, synthesizing all their points `workers` at a time."""
    jobs = [(p, params) for p in primitives for params in p.points()]
    jobs.reverse()  # the sweeps' widest points, the slowest, start first

    def measure(job):
        primitive, params = job
        stat, module = run_yosys(primitive, params)
        return figures(stat, module), parameters(module)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(measure, jobs))[::-1]
    entries, start = {}, 0
    for primitive in primitives:
        count = len(primitive.points())
        entries[primitive.name] = entry(primitive, results[start:start + count])
        start += count
    return entries


def table_text(table: dict) -> str:
    return json.dumps(table, indent=1, sort_keys=True) + "\n"


def load_table() -> dict | None:
    return json.loads(TABLE.read_text()) if TABLE.exists() else None


def rows(entries: dict[str, dict]) -> list[tuple[str, dict]]:
    """(label, figures) of every entry and every point, in the order of PRIMITIVES."""
    out = []
    for name in (p.name for p in PRIMITIVES if p.name in entries):
        item = entries[name]
        if "settings" in item:
            out.extend((f"{name} " + " ".join(f"{k}={v}" for k, v in setting["constants"].items()), setting)
                       for setting in item["settings"])
            out.append((f"{name} (the most LUTs)", item))
        elif "points" in item:
            out.extend((f"{name} {item['sweep']}={value}", point)
                       for value, point in sorted(item["points"].items(), key=lambda pair: int(pair[0])))
        else:
            out.append((name, item))
    return out


def print_table(entries: dict[str, dict]) -> None:
    print(f"{'primitive':40} {'LUT':>6} {'route':>5} {'FF':>5} {'io FF':>6} {'DSP':>6} {'CARRY8':>6} {'MUXF7':>5} "
          f"{'MUXF8':>5} {'levels':>6}")
    for label, f in rows(entries):
        dsp = f"{f['dsp']}" if "dsp_chosen" not in f else f"{f['dsp']}->{f['dsp_chosen']}"
        print(f"{label:40} {f['lut']:6} {f['carry_route_through']:5} {f['ff']:5} {f['io_ff']:6} {dsp:>6} "
              f"{f['carry8']:6} {f['muxf7']:5} {f['muxf8']:5} {f['levels']:6}")
    if "adder_tree" in entries:
        tree = entries["adder_tree"]
        print(f"adder_tree fit: lut = {tree['base']} + {tree['per_term']} * terms")


def differences(committed: dict, measured: dict[str, dict]) -> list[str]:
    """What differs between the committed entries and the measured ones."""
    lines = []
    for name, now in sorted(measured.items()):
        before = committed.get("primitives", {}).get(name)
        if before is None:
            lines.append(f"{name}: not in the committed table")
            continue
        for label, (old, new) in sorted(flat_differences(before, now).items()):
            lines.append(f"{name} {label}: committed {old}, measured {new}")
    return lines


def flat_differences(old, new, prefix: str = "") -> dict[str, tuple]:
    """Dotted key -> (old, new) of every leaf value that differs between two nested dicts."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = {}
        for key in sorted(set(old) | set(new)):
            out.update(flat_differences(old.get(key), new.get(key), f"{prefix}.{key}" if prefix else key))
        return out
    return {} if old == new else {prefix: (old, new)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="re-synthesize and exit 1 if an entry differs from the committed table")
    parser.add_argument("--only", metavar="NAME", choices=[p.name for p in PRIMITIVES],
                        help="one primitive only")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="yosys runs at a time")
    args = parser.parse_args(argv)
    if shutil.which("yosys") is None:
        print("yosys is not on the PATH (sudo apt-get install yosys)", file=sys.stderr)
        return 1
    primitives = [by_name()[args.only]] if args.only else list(PRIMITIVES)
    tool = yosys_version()
    started = time.monotonic()
    entries = calibrate(primitives, args.jobs)
    print_table(entries)
    print(f"{sum(len(p.points()) for p in primitives)} syntheses in {time.monotonic() - started:.0f} s ({tool})")
    committed = load_table()
    if args.check:
        if committed is None:
            print(f"no committed table at {TABLE}", file=sys.stderr)
            return 1
        if committed.get("tool") != tool:
            print(f"note: the table was made with {committed.get('tool')}, this is {tool}", file=sys.stderr)
        found = differences(committed, entries)
        for line in found:
            print(line, file=sys.stderr)
        print("differs from the committed table" if found else "matches the committed table")
        return 1 if found else 0
    kept = committed["primitives"] if committed and args.only else {}
    table = {"tool": tool, "command": SYNTH, "family": FAMILY, "primitives": {**kept, **entries}}
    TABLE.write_text(table_text(table))
    print(f"wrote {TABLE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
