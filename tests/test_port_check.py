"""The C-simulation port check (emit/templates/ming_check.h) on small hand-written programs.

The programs in port_check_programs/ use the generated code's conventions (ming::Array, HLS_PRAGMA,
hls::stream, a weights header's ROM views); -D options choose a variant. Compiled with
-DMING_CHECK_PORTS, a variant whose pipelined iteration needs more ports than its pragmas give exits
with code 3 and one line naming the function, the array or stream and the PIPELINE pragma's place;
every other variant exits 0 with the output of the normal build, which compiles warning-free.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).resolve().parent / "port_check_programs"
TEMPLATES = Path(__file__).resolve().parents[1] / "emit" / "templates"
HEADERS = ("ming_stream.h", "ming_widths.h", "ming_check.h", "ming_hls_stream.h")
CXX = shutil.which("g++")
CXX_FLAGS = ("-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-DMING_CSIM")
CHECK = ("-DMING_CHECK_PORTS",)
CONCURRENT = ("-DMING_CSIM_CONCURRENT", "-pthread")
CONFLICT_EXIT_CODE = 3

pytestmark = pytest.mark.skipif(CXX is None, reason="g++ not available")

# (program, -D options, compiler flags) that fit their ports.
FITTING = [
    ("reads.cpp", ("CYCLIC",), ()),
    ("reads.cpp", ("RESHAPED",), ()),
    ("reads.cpp", ("REGISTERS",), ()),
    ("reads.cpp", ("READS_PER_ITERATION=1",), ()),
    ("reads.cpp", ("READS_PER_ITERATION=2",), ()),
    ("reads.cpp", ("READS_PER_ITERATION=1", "ONE_PORT"), ()),
    ("reads.cpp", ("CYCLIC", "READS_PER_ITERATION=6"), ()),
    ("accumulate.cpp", (), ()),
    ("accumulate.cpp", ("STORAGE_S2P",), ()),
    ("streams.cpp", (), ()),
    ("rom.cpp", (), ()),
    ("dataflow.cpp", (), ()),
    ("dataflow.cpp", (), CONCURRENT),
    ("adapters.cpp", (), ()),
]
# (program, -D options, compiler flags, function, array or stream, loop label, detail) that need more ports.
CONFLICTS = [
    ("reads.cpp", (), (), "table_sum", "table", "sum_elements",
     "3 accesses (3 reads, 0 writes) per iteration, 2 ports"),
    ("reads.cpp", ("READS_PER_ITERATION=2", "ONE_PORT"), (), "table_sum", "table", "sum_elements",
     "2 accesses (2 reads, 0 writes) per iteration, 1 port"),
    ("reads.cpp", ("CYCLIC", "READS_PER_ITERATION=9"), (), "table_sum", "table", "sum_elements",
     "3 accesses (3 reads, 0 writes) per iteration to bank (0), 2 ports"),
    ("reads.cpp", ("CYCLIC", "ROTATED"), (), "table_sum", "table", "sum_elements",
     "3 accesses (3 reads, 0 writes) per iteration to bank (0), 2 ports (line 40 selects its bank at run time)"),
    ("accumulate.cpp", ("STORAGE_1P",), (), "histogram", "bins", "count_values",
     "2 accesses (1 read, 1 write) per iteration, 1 port"),
    ("streams.cpp", ("TWO_READS",), (), "pair_sums", "in", "add_pairs", "2 reads per iteration, 1 read port"),
    ("rom.cpp", ("UNSHAPED",), (), "products", "weights_demo", "rows",
     "3 accesses (3 reads, 0 writes) per iteration, 2 ports"),
    ("dataflow.cpp", ("CONFLICT",), (), "consume", "buffer", "differences",
     "3 accesses (2 reads, 1 write) per iteration, 2 ports"),
    ("dataflow.cpp", ("CONFLICT",), CONCURRENT, "consume", "buffer", "differences",
     "3 accesses (2 reads, 1 write) per iteration, 2 ports"),
]


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """build(program, defines, *flags) -> the binary, compiled once per variant with -Werror when a test first
    asks for it (a checked build takes g++ a second or two; compiled on demand, xdist workers split the
    variants between them instead of each compiling all)."""
    work = tmp_path_factory.mktemp("port_check")
    for header in HEADERS:
        shutil.copy(TEMPLATES / header, work)
    for source in PROGRAMS.iterdir():
        shutil.copy(source, work)

    def compile_variant(variant: tuple[str, tuple[str, ...], tuple[str, ...]]) -> Path:
        program, defines, flags = variant
        binary = work / "_".join([Path(program).stem, *defines, *(f.strip("-") for f in flags)]).replace("=", "")
        result = subprocess.run([CXX, *CXX_FLAGS, *flags, *(f"-D{d}" for d in defines), f"-I{work}",
                                 str(work / program), "-o", str(binary)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        return binary

    binaries = {}

    def binary_of(program: str, defines: tuple[str, ...], *flags: str) -> Path:
        variant = (program, defines, flags)
        if variant not in binaries:
            binaries[variant] = compile_variant(variant)
        return binaries[variant]

    return binary_of


def variant_id(program: str, defines: tuple[str, ...], flags: tuple[str, ...], *_) -> str:
    return "-".join([Path(program).stem, *defines, *(["concurrent"] if flags else [])])


def run(binary: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)


def pipeline_line(program: str, loop: str) -> int:
    """The line of the PIPELINE pragma of the loop labelled `loop` in `program`."""
    lines = (PROGRAMS / program).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{loop}:"))
    return next(i for i in range(start, len(lines)) if "HLS_PRAGMA(PIPELINE" in lines[i]) + 1


@pytest.mark.parametrize("program, defines, flags", FITTING, ids=[variant_id(*v) for v in FITTING])
def test_fitting_variants_pass_with_the_normal_output(build, program, defines, flags):
    normal = run(build(program, defines, *flags))
    checked = run(build(program, defines, *CHECK, *flags))
    assert normal.returncode == 0, normal.stderr
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout == normal.stdout and checked.stderr == ""


@pytest.mark.parametrize("program, defines, flags, function, name, loop, detail", CONFLICTS,
                         ids=[variant_id(*v) for v in CONFLICTS])
def test_a_conflict_names_the_function_resource_and_loop(build, program, defines, flags, function, name, loop,
                                                         detail):
    assert run(build(program, defines, *flags)).returncode == 0  # the normal build runs as ever
    checked = run(build(program, defines, *CHECK, *flags))
    assert checked.returncode == CONFLICT_EXIT_CODE, checked.stderr
    expected = f"ming port check: {function} {name} {program}:{pipeline_line(program, loop)} {detail}"
    assert checked.stderr.splitlines() == [expected]


def test_a_pragma_naming_no_array_is_an_error_not_a_conflict(build):
    checked = run(build("misuse.cpp", (), *CHECK))
    assert checked.returncode not in (0, CONFLICT_EXIT_CODE)
    (line,) = checked.stderr.splitlines()
    assert line.startswith("ming port check: error: HLS_PRAGMA(ARRAY_PARTITION variable=third type=complete dim=1)")
    assert "variable=third names no array: the array declared last is second" in line


@pytest.mark.parametrize("flags", [(), CHECK], ids=["normal", "checked"])
def test_array_types(build, flags):
    """static_types.cpp: the plain array types outside the check, const arrays under it."""
    assert run(build("static_types.cpp", (), *flags)).returncode == 0
