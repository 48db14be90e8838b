"""Exact widths in every datapath function a process calls (emit/templates/ming_numerics.h).

* No 64-bit integer type (int64_t, uint64_t, long long, an LL literal, a 64-bit ap_int) in any function reachable
  from the process and epilogue templates: the header is parsed, the functions the templates call collected, and
  their callees (functions, types and typedefs of the header) followed transitively. Synthesis builds an operator at
  its type's width, whatever values it carries: an int64_t sum is a 64-bit adder.
* The checked classes of ming_widths.h end a C-simulation with one line naming the declaration when a value leaves
  its width (an argument outside a function's documented domain), instead of wrapping around.
* ming::add_requant at its process's constants' bit lengths (the template arguments the compiler writes) is wide
  enough for every int8 pair of random scale sets (a width too narrow aborts the run).
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from ming_py import numerics as nx  # noqa: E402
from ming_py.epilogues.binary import add_constant_bits  # noqa: E402

TEMPLATES = ROOT / "emit" / "templates"
NUMERICS_H = TEMPLATES / "ming_numerics.h"
CXX = shutil.which("g++")

SIXTY_FOUR_BITS = re.compile(r"\b(?:u?int64_t|long\s+long|U?INT64_C)\b|\b\d+[uU]?LL\b|\bap_u?int\s*<\s*64\s*>")
# Functions of the header that hold no datapath: compile-time width arithmetic.
COMPILE_TIME = {"float32_ceiling"}


def _code(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _balanced(text: str, start: int) -> int:
    """The index after the brace block opening at or after `start`."""
    depth, i = 0, text.index("{", start)
    while True:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
        if depth == 0:
            return i


def _entities(code: str) -> dict[str, str]:
    """name -> the text of its definitions (functions and their specializations, structs, typedefs), without their
    template parameter lists (compile-time constants)."""
    entities: dict[str, str] = {}
    definition = re.compile(r"^[\t ]*(?:template\s*<[^;{]*?>\s*)?(?:(?:inline|static|constexpr)[\t ]+)*"
                            r"(?!(?:return|template|if|else|for|while|switch)\b)[\w:<>,()\t ]+\b(\w+)[\t ]*"
                            r"(?:<[^;{()\n]*>)?\s*\([^;{]*\)"
                            r"\s*(?:const\s*)?\{", re.M)
    for found in definition.finditer(code):
        end = _balanced(code, found.end() - 1)
        entities[found.group(1)] = entities.get(found.group(1), "") + code[found.start():end]
    for found in re.finditer(r"^(?:template\s*<[^;{]*?>\s*)?struct\s+(\w+)[^;{]*\{", code, re.M):
        end = _balanced(code, found.end() - 1)
        entities[found.group(1)] = entities.get(found.group(1), "") + code[found.start():end]
    for found in re.finditer(r"^\s*typedef\s+([^;]*?)\b(\w+)\s*;", code, re.M):
        entities[found.group(2)] = entities.get(found.group(2), "") + found.group(0)
    for found in re.finditer(r"^\s*(?:template\s*<[^;{]*?>\s*)?using\s+(\w+)\s*=\s*([^;]*);", code, re.M):
        entities[found.group(1)] = entities.get(found.group(1), "") + found.group(0)
    return {name: re.sub(r"template\s*<[^;{]*?>", "", text) for name, text in entities.items()
            if name not in COMPILE_TIME}


def _called_by_templates() -> set[str]:
    names = set()
    for template in sorted((TEMPLATES / "process").glob("*.j2")) + sorted((TEMPLATES / "epilogues").glob("*.j2")):
        names |= set(re.findall(r"ming::(\w+)", template.read_text()))
    return names


def reachable_functions() -> dict[str, str]:
    text = NUMERICS_H.read_text()
    for block in re.findall(r"namespace widths \{.*?\n\}  // namespace widths", text, re.S):
        text = text.replace(block, "")
    entities = _entities(_code(text))
    todo = sorted(_called_by_templates() & set(entities))
    reached: dict[str, str] = {}
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached[name] = entities[name]
        todo += [n for n in re.findall(r"\b\w+\b", entities[name]) if n in entities and n not in reached]
    return reached


@pytest.mark.unit
def test_the_parser_finds_the_datapath_functions():
    reached = reachable_functions()
    for name in ("requantize", "requantize_i32", "requantize_lean", "lean_product", "requantize_narrow",
                 "NarrowProduct", "narrow_add", "mul_narrow", "mul_requant", "mul_requant_i32", "add_requant",
                 "add_requant_i32", "add_float_requant", "add_float_requant_i32", "average_term", "average_add",
                 "average_level", "requantize_fixed_point", "mul_fixed_point", "multiply_pair", "bilinear",
                 "bilinear_across", "requantize_shift", "requantize_half_away", "round_to_float32",
                 "round_to_float32_signed", "round_shift_bits", "bit_length_bits"):
        assert name in reached, name
    # and it sees a 64-bit type where one is
    assert SIXTY_FOUR_BITS.search("inline int64_t f(int a) { return a; }")
    assert SIXTY_FOUR_BITS.search("x = 1LL << s;") and SIXTY_FOUR_BITS.search("ap_uint<64> w;")
    assert not SIXTY_FOUR_BITS.search("ming::int_for<-kMax, kMax> v = a * b;")


@pytest.mark.unit
def test_no_64_bit_type_in_a_function_a_process_calls():
    wide = {name: sorted(set(m.group(0) for m in SIXTY_FOUR_BITS.finditer(text)))
            for name, text in reachable_functions().items() if SIXTY_FOUR_BITS.search(text)}
    assert wide == {}, f"64-bit integer types in datapath functions (give each value its range's width): {wide}"


def _compile(tmp_path: Path, name: str, source: str) -> Path:
    program = tmp_path / f"{name}.cpp"
    program.write_text(source)
    exe = tmp_path / name
    built = subprocess.run([CXX, "-std=c++14", "-O1", "-DMING_CSIM", f"-I{TEMPLATES}", str(program), "-o", str(exe)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    return exe


@pytest.mark.skipif(CXX is None, reason="g++ not available")
def test_an_argument_outside_the_domain_ends_the_simulation_with_one_line(tmp_path):
    exe = _compile(tmp_path, "outside", '#include <cstdio>\n#include "ming_numerics.h"\n'
                   "int main(int argc, char**) {\n"
                   "  // a mantissa of 25 bits: numerics.float32_parts gives 24\n"
                   "  std::printf(\"%d\\n\", ming::requantize(1000, (1 << 24) + argc, -30, 0));\n}\n")
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode != 0 and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and re.fullmatch(r"ming csim: \w+: 16777217 does not fit the ap_uint<24> declared at "
                                            r"line \d+", lines[0]), run.stderr


@pytest.mark.skipif(CXX is None, reason="g++ not available")
def test_add_requant_at_its_constants_bit_lengths_fits_every_pair(tmp_path):
    """The template arguments the compiler writes (add_constant_bits) give widths that hold every intermediate of
    every int8 pair, and the result equals numerics', for random scale sets (a width too narrow aborts)."""
    rng = np.random.default_rng(41)
    sets = []
    for _ in range(40):
        sa, sb, sy = (np.float32(v) for v in np.exp(rng.uniform(np.log(1e-3), np.log(0.5), 3)))
        if rng.random() < 0.3:
            sb = np.float32(sa * 2.0 ** float(rng.uniform(-12, 12)))
        za, zb, zy = (int(z) for z in rng.integers(-128, 128, 3))
        offset = nx.ORT_X86_DOMAIN_OFFSET if rng.random() < 0.8 else 0
        try:
            c = nx.add_constants(sa, za, sb, zb, sy, zy, offset)
        except ValueError:
            continue
        sets.append((c, (sa, za, sb, zb, sy, zy, offset)))
    calls = "\n".join(
        f"  for (int a = -128; a < 128; a++) for (int b = -128; b < 128; b++) std::printf(\"%d\\n\", "
        f"ming::add_requant<{', '.join(map(str, add_constant_bits(c)))}>(a, b, {c.a_multiplier}, {c.b_multiplier}, "
        f"{c.fixed}, {c.shift}, {c.offset}));" for c, _ in sets)
    exe = _compile(tmp_path, "add_bits", f'#include <cstdio>\n#include "ming_numerics.h"\nint main() {{\n{calls}\n}}\n')
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    got = np.array(run.stdout.split(), np.int64).reshape(len(sets), 256, 256)
    values = np.arange(-128, 128)
    a, b = np.meshgrid(values, values, indexing="ij")
    for k, (_, (sa, za, sb, zb, sy, zy, offset)) in enumerate(sets):
        want = nx.add_requant(a, sa, za, b, sb, zb, sy, zy, domain_offset=offset)
        assert np.array_equal(got[k], want), (sa, za, sb, zb, sy, zy, offset)
    assert len(sets) >= 30


@pytest.mark.skipif(CXX is None, reason="g++ not available")
def test_add_float_requant_at_its_constants_fits_every_pair(tmp_path):
    """ming::add_float_requant (Sub, unfused Add) at the template arguments the compiler writes (the alignments, the
    shift and the divisor's bit length) holds every intermediate of every int8 pair and equals numerics'."""
    rng = np.random.default_rng(43)
    sets = []
    for _ in range(60):
        sa, sb, sy = (np.float32(v) for v in np.exp(rng.uniform(np.log(1e-3), np.log(0.5), 3)))
        if rng.random() < 0.3:
            sb = np.float32(sa * 2.0 ** float(rng.uniform(-20, 20)))
        za, zb, zy = (int(z) for z in rng.integers(-128, 128, 3))
        subtract = bool(rng.random() < 0.5)
        try:
            c = nx.float_add_constants(sa, sb, sy, subtract)
        except ValueError:
            continue
        sets.append((c, (sa, za, sb, zb, sy, zy, subtract)))
    calls = "\n".join(
        f"  for (int a = -128; a < 128; a++) for (int b = -128; b < 128; b++) std::printf(\"%d\\n\", "
        f"ming::add_float_requant<{c.a_align}, {c.b_align}, {c.x_shift}, {int(c.divisor).bit_length()}>(a, {za}, b, "
        f"{zb}, {c.a_mantissa}, {c.a_align}, {c.b_mantissa}, {c.b_align}, {c.x_shift}, {c.x_limit}, {c.divisor}, "
        f"{zy}));" for c, (_, za, _, zb, _, zy, _) in sets)
    exe = _compile(tmp_path, "float_add_bits",
                   f'#include <cstdio>\n#include "ming_numerics.h"\nint main() {{\n{calls}\n}}\n')
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    got = np.array(run.stdout.split(), np.int64).reshape(len(sets), 256, 256)
    values = np.arange(-128, 128)
    a, b = np.meshgrid(values, values, indexing="ij")
    for k, (_, (sa, za, sb, zb, sy, zy, subtract)) in enumerate(sets):
        want = nx.add_requant(a, sa, za, b, sb, zb, sy, zy, subtract=subtract, fused=False)
        assert np.array_equal(got[k], want), (sa, za, sb, zb, sy, zy, subtract)
    assert len(sets) >= 40


REQUANT_ADD_WIDTHS = ("SHIFTED_BITS", "MA_BITS", "MB_BITS", "FIXED_BITS", "A_PRODUCT_BITS", "B_PRODUCT_BITS",
                      "INNER_SUM_BITS", "INNER_MAGNITUDE_BITS", "INNER_BITS", "OUTER_SUM_BITS", "OUTER_MAGNITUDE_BITS",
                      "OUTER_BITS", "LEVEL_BITS")


def _trailing_zeros(value: int) -> int:
    return (value & -value).bit_length() - 1 if value else 0


@pytest.mark.skipif(CXX is None or shutil.which("iverilog") is None, reason="g++ and Icarus Verilog needed")
def test_the_requant_add_model_at_the_cxx_widths_computes_qlinear_add(tmp_path):
    """benchmarks/calibration/requant_add.v with the C++'s widths at a process's constants (ming::widths::
    requant_add<bit lengths>) and those constants as its parameters == numerics' QLinearAdd on random pairs."""
    from test_primitives import simulate  # noqa: PLC0415 (the Icarus testbench of the calibration models)
    rng = np.random.default_rng(44)
    sets = []
    while len(sets) < 4:
        sa, sb, sy = (np.float32(v) for v in np.exp(rng.uniform(np.log(1e-3), np.log(0.5), 3)))
        za, zb, zy = (int(z) for z in rng.integers(-128, 128, 3))
        c = nx.add_constants(sa, za, sb, zb, sy, zy, nx.ORT_X86_DOMAIN_OFFSET)
        sets.append((c, (sa, za, sb, zb, sy, zy)))
    printed = "\n".join(
        f'  std::printf("{" ".join(["%d"] * len(REQUANT_ADD_WIDTHS))}\\n", '
        + ", ".join(f"ming::widths::requant_add<{', '.join(map(str, add_constant_bits(c)))}>::{w}"
                    for w in REQUANT_ADD_WIDTHS) + ");" for c, _ in sets)
    exe = _compile(tmp_path, "add_widths",
                   f'#include <cstdio>\n#include "ming_numerics.h"\nint main() {{\n{printed}\n}}\n')
    widths = [list(map(int, line.split())) for line in subprocess.run([str(exe)], capture_output=True, text=True,
                                                                       check=True).stdout.splitlines()]
    a = np.concatenate([rng.integers(-128, 128, 1500), [-128, 127, -128, 127]])
    b = np.concatenate([rng.integers(-128, 128, 1500), [-128, 127, 127, -128]])
    instances = []
    for k, (c, _) in enumerate(sets):
        a_exp, b_exp, f_exp = (_trailing_zeros(int(v)) for v in (c.a_multiplier, c.b_multiplier, c.fixed))
        parameters = {"A_EXP": a_exp, "B_EXP": b_exp, "FIXED_MANTISSA": int(c.fixed) >> f_exp, "FIXED_EXP": f_exp,
                      "SHIFT": c.shift, "OFFSET": c.offset, **dict(zip(REQUANT_ADD_WIDTHS, widths[k]))}
        assert int(c.a_multiplier) >> a_exp < 1 << 24 and int(c.b_multiplier) >> b_exp < 1 << 24
        mantissas = f"24'd{int(c.a_multiplier) >> a_exp}", f"24'd{int(c.b_multiplier) >> b_exp}"
        instances.append(f"  requant_add #({', '.join(f'.{n}({v})' for n, v in parameters.items())}) dut{k}("
                         f".clk(clk), .a(a), .b(b), .a_mantissa({mantissas[0]}), .b_mantissa({mantissas[1]}), .y());")
    got = simulate(tmp_path, "requant_add", {"a": (8, a), "b": (8, b)}, instances,
                   [f"dut{k}.y" for k in range(len(sets))], 2)
    for k, (_, (sa, za, sb, zb, sy, zy)) in enumerate(sets):
        want = nx.add_requant(a, sa, za, b, sb, zb, sy, zy)
        np.testing.assert_array_equal(got[:, k], want, err_msg=f"set {k}")
