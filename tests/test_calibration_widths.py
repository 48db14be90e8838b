"""The yosys models of benchmarks/calibration/ are synthesized at the widths the C++ gives each datapath function.

Convention (how a model and its C++ are tied together):
* The C++ (emit/templates/ming_numerics.h) declares the value bounds of each datapath function in a struct of
  `namespace ming::widths` named after the function's model (`ming::widths::average_term`, or a template over a
  constant of the process such as the window: `ming::widths::average_add<Window>`), its types as
  `ming::int_for<LO, HI>` / `ming::uint_for<MAX>` of those bounds, and one `static constexpr int NAME_BITS` per
  width the hardware has (`= Type::width`).
* The model (benchmarks/calibration/<name>.v) names that struct, at the template arguments it is calibrated at,
  in a line `// widths: ming::widths::average_add<9>`, and takes every one of its widths as a module parameter
  `parameter integer NAME_BITS = <literal>` (or a localparam), with the same name and value, used by its wires;
  calibrate.py never sets them (chparam).
This test compiles a small program that prints the C++ values and compares them with the model's, both ways: a
width the C++ has is in the model, a width in the model is the C++'s.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import calibrate  # noqa: E402

TEMPLATES = ROOT / "emit" / "templates"
NUMERICS_H = TEMPLATES / "ming_numerics.h"
MODELS = ROOT / "benchmarks" / "calibration"
CXX = shutil.which("g++")

WIDTHS_LINE = re.compile(r"^// widths: (ming::widths::(\w+)(<[^>]*>)?)\s*$", re.M)
MODEL_WIDTH = re.compile(r"\b(?:parameter|localparam)\s+integer\s+(\w+_BITS)\s*=\s*(-?\d+)\s*[,;)\n]")
CXX_STRUCT = re.compile(r"(?:template\s*<[^>]*>\s*)?struct\s+(\w+)\s*\{(.*?)\n\};", re.S)
CXX_WIDTH = re.compile(r"static\s+constexpr\s+int\s+(\w+_BITS)\s*=")

# Models of ming_numerics.h functions without a widths struct, and why.
NOT_TIED = {
    # its types are ap_int of the process's template arguments (OperandBits, LevelBits), which the model sweeps
    "requant_narrow": "widths are template arguments of the process (OperandBits, LevelBits), which the model's "
                      "OPERAND_BITS sweeps",
}


def _models() -> dict[str, str]:
    return {path.stem: path.read_text() for path in sorted(MODELS.glob("*.v")) if path.stem != "common"}


def _tied_models() -> dict[str, tuple[str, str, dict[str, int]]]:
    """model -> (C++ struct as the model names it, struct name, the model's widths)."""
    tied = {}
    for name, text in _models().items():
        found = WIDTHS_LINE.search(text)
        if found:
            tied[name] = (found.group(1), found.group(2), {m.group(1): int(m.group(2)) for m in
                                                           MODEL_WIDTH.finditer(text)})
    return tied


def _cxx_structs() -> dict[str, list[str]]:
    """struct of namespace ming::widths -> its NAME_BITS members, from the header's text."""
    text = NUMERICS_H.read_text()
    structs = {}
    for block in re.findall(r"namespace widths \{(.*?)\n\}  // namespace widths", text, re.S):
        for found in CXX_STRUCT.finditer(block):
            structs[found.group(1)] = CXX_WIDTH.findall(found.group(2))
    return structs


@pytest.mark.unit
def test_every_model_of_a_numerics_function_names_its_widths():
    """A model that stands for a function of ming_numerics.h names the C++ struct of its widths."""
    untied = [name for name, text in _models().items()
              if "ming_numerics.h" in text.splitlines()[0] and not WIDTHS_LINE.search(text) and name not in NOT_TIED]
    assert untied == [], f"models without a `// widths: ming::widths::...` line: {untied}"


@pytest.mark.unit
def test_every_widths_struct_has_its_model():
    structs = _cxx_structs()
    assert structs, "no struct in namespace ming::widths of ming_numerics.h"
    claimed = {struct for _, struct, _ in _tied_models().values()}
    assert sorted(set(structs) - claimed - set(NOT_TIED)) == [], "C++ widths no calibration model takes"
    for name, (_, struct, widths) in _tied_models().items():
        assert struct in structs, f"{name}.v names ming::widths::{struct}, which ming_numerics.h does not declare"
        assert sorted(structs[struct]) == sorted(widths), (
            f"{name}.v: its *_BITS parameters {sorted(widths)} are not the C++'s {sorted(structs[struct])}")


@pytest.mark.unit
def test_model_widths_are_used_and_never_swept():
    for name, (_, _, widths) in _tied_models().items():
        text = _models()[name]
        for width in widths:
            assert len(re.findall(rf"\b{width}\b", text)) >= 2, f"{name}.v declares {width} and never uses it"
    for primitive in calibrate.PRIMITIVES:
        if primitive.source in _tied_models():
            set_here = {parameter for parameter, _ in primitive.params}
            set_here |= {primitive.sweep[0]} if primitive.sweep else set()
            assert not set_here & set(_tied_models()[primitive.source][2]), (
                f"calibrate.py sets a width of {primitive.name}: the C++ fixes it")


@pytest.mark.skipif(CXX is None, reason="g++ not available")
def test_model_widths_equal_the_cxx_widths(tmp_path):
    """Each model's *_BITS equal the C++ struct's, evaluated by g++ (csim and the Vitis types share the bounds)."""
    tied = _tied_models()
    assert tied, "no model names its C++ widths"
    lines = [f'  std::printf("{name} {width} %d\\n", static_cast<int>({struct}::{width}));'
             for name, (struct, _, widths) in sorted(tied.items()) for width in sorted(widths)]
    source = TEMPLATES / "ming_numerics.h"
    program = tmp_path / "widths.cpp"
    program.write_text(f'#include <cstdio>\n#include "{source.name}"\nint main() {{\n' + "\n".join(lines) + "\n}\n")
    exe = tmp_path / "widths"
    built = subprocess.run([CXX, "-std=c++14", "-DMING_CSIM", f"-I{TEMPLATES}", str(program), "-o", str(exe)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    printed = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    cxx = {(name, width): int(value) for name, width, value in (line.split() for line in printed if line)}
    model = {(name, width): value for name, (_, _, widths) in tied.items() for width, value in widths.items()}
    assert model == cxx
