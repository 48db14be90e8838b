"""C++ numerics (emit/templates/ming_numerics.h) == ming_py.numerics, bit for bit.

A small C++ driver includes ``ming_numerics.h``, reads rows of int64 arguments from a
binary file and writes one int64 result per row.  Each test generates random and edge-case
arguments (ties, saturation, |acc| > 2**24, negative values, shifts 0 / 1 / 62 / >= 63,
tiny and huge float32 multipliers), computes the expected values with the numpy functions
of ``ming_py.numerics`` and asserts exact equality on >= 200k cases per function.

Also: the headers compile warning-free with -Wconversion -Wsign-conversion -pedantic,
ming_numerics.h includes only <cstdint> and uses no floats / builtins / heap, an
-fsanitize=undefined build shows no UB on arbitrary (out-of-contract) arguments, and the
C-simulation ``ming_hls_stream.h`` stand-in behaves as specified (abort naming the stream on an
empty read, leftover warning behind MING_CSIM_CHECK_LEFTOVER=1).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ming_py import numerics as nx  # noqa: E402

TEMPLATES = Path(__file__).parents[1] / "emit" / "templates"
NUMERICS_H = TEMPLATES / "ming_numerics.h"
STREAM_H = TEMPLATES / "ming_hls_stream.h"
CXX = shutil.which("g++")
CXXFLAGS = ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", "-DMING_CSIM"]
STRICT_FLAGS = ["-std=c++17", "-Wall", "-Wextra", "-Wconversion", "-Wsign-conversion", "-Wshadow",
                "-pedantic", "-Werror", "-DMING_CSIM"]
MIN_CASES = 200_000
I64_MIN = np.iinfo(np.int64).min
I64_MAX = np.iinfo(np.int64).max
I32_MIN = np.iinfo(np.int32).min
I32_MAX = np.iinfo(np.int32).max

pytestmark = pytest.mark.skipif(CXX is None, reason="g++ not available")

# name -> (arity, C++ expression over the row r[0..arity-1])
FUNCTIONS = {
    "saturate": (3, "ming::saturate(r[0], r[1], r[2])"),
    "bit_length": (1, "ming::bit_length(static_cast<uint64_t>(r[0]))"),
    "round_shift_half_even": (2, "ming::round_shift_half_even(r[0], I(r[1]))"),
    "round_shift_half_up": (2, "ming::round_shift_half_up(r[0], I(r[1]))"),
    "requantize": (6, "ming::requantize(r[0], r[1], I32(r[2]), I32(r[3]), I32(r[4]), I32(r[5]))"),
    "requantize_default": (4, "ming::requantize(r[0], r[1], I32(r[2]), I32(r[3]))"),
    "requantize_i32": (6, "ming::requantize_i32(r[0], r[1], I32(r[2]), I32(r[3]), I32(r[4]), I32(r[5]))"),
    "fixed_point_rescale": (4, "ming::fixed_point_rescale(r[0], r[1], I(r[2]), r[3])"),
    "fixed_point_rescale_default": (3, "ming::fixed_point_rescale(r[0], r[1], I(r[2]))"),
    # add_requant at the widest constants numerics.add_constants gives (tests/test_numerics_widths.py: narrower)
    "add_requant": (9, "ming::add_requant<51, 51, 59>(I32(r[0]), I32(r[1]), r[2], r[3], r[4], I(r[5]), I32(r[6]), "
                       "I32(r[7]), I32(r[8]))"),
    "add_requant_default": (7, "ming::add_requant<51, 51, 59>(I32(r[0]), I32(r[1]), r[2], r[3], r[4], I(r[5]), "
                               "I32(r[6]))"),
    "add_requant_i32": (9, "ming::add_requant_i32<51, 51, 59>(I32(r[0]), I32(r[1]), r[2], r[3], r[4], I(r[5]), "
                           "I32(r[6]), I32(r[7]), I32(r[8]))"),
    # at the widest constants numerics.float_add_constants gives (tests/test_numerics_widths.py: the compiler's)
    "add_float_requant": (14, "ming::add_float_requant<28, 28, 58, 26>(I32(r[0]), I32(r[1]), I32(r[2]), I32(r[3]), "
                              "r[4], I(r[5]), r[6], I(r[7]), I(r[8]), r[9], r[10], I32(r[11]), I32(r[12]), "
                              "I32(r[13]))"),
    "average_term": (3, "ming::average_term(static_cast<int8_t>(r[0]), I32(r[1]), static_cast<uint32_t>(r[2]))"),
    "average_add": (2, "ming::average_add<9>(r[0], r[1])"),  # a 3 x 3 window
    # r[8 ..] is the row's 256 thresholds
    "average_level": (8 + 256, "ming::average_level<9>(r[0], r[1], r[2], I(r[3]), r[4], r[5], r + 8, I32(r[6]), "
                               "I32(r[7]))"),
    "requantize_shift": (5, "ming::requantize_shift(r[0], I(r[1]), I32(r[2]), I32(r[3]), I32(r[4]))"),
    "requantize_narrow": (11, "ming::requantize_narrow(I32(r[0]), static_cast<uint32_t>(r[1]), r[2], r[3], I(r[4]), "
                              "I32(r[5]), I32(r[6]), I32(r[7]), I32(r[8]), I32(r[9]), I32(r[10]))"),
    "requantize_narrow_wide": (11, "ming::requantize_narrow<ming::Multiplier::dsp, 27>(I32(r[0]), "
                                   "static_cast<uint32_t>(r[1]), r[2], r[3], I(r[4]), I32(r[5]), I32(r[6]), I32(r[7]), "
                                   "I32(r[8]), I32(r[9]), I32(r[10]))"),
    # exhaustive over int8 pairs in tests/test_eltwise.py; here for the UB fuzz
    "mul_requant_i32": (10, "ming::mul_requant_i32(I32(r[0]), I32(r[1]), I32(r[2]), I32(r[3]), "
                            "static_cast<uint32_t>(r[4]), I(r[5]), I32(r[6]), I32(r[7]), I32(r[8]), I32(r[9]))"),
}

# Argument columns that are C++ `int` / `int32_t` (kept in range by the UB fuzz test).
NARROW_ARGS = {
    "round_shift_half_even": {1}, "round_shift_half_up": {1},
    "requantize": {2, 3, 4, 5}, "requantize_default": {2, 3}, "requantize_i32": {2, 3, 4, 5},
    "fixed_point_rescale": {2}, "fixed_point_rescale_default": {2},
    "add_requant": {0, 1, 5, 6, 7, 8}, "add_requant_default": {0, 1, 5, 6}, "add_requant_i32": {0, 1, 5, 6, 7, 8},
    "add_float_requant": {0, 1, 2, 3, 5, 7, 8, 11, 12, 13},
    "average_term": {0, 1, 2}, "average_add": set(), "average_level": set(range(264)),
    "mul_requant_i32": {0, 1, 2, 3, 5, 6, 7, 8, 9},
    "requantize_shift": {1, 2, 3, 4},
    "requantize_narrow": {0, 1, 4, 5, 6, 7, 8, 9, 10}, "requantize_narrow_wide": {0, 1, 4, 5, 6, 7, 8, 9, 10},
}


def _driver_source() -> str:
    entries = ",\n".join(
        f'    {{"{name}", {arity}, [](const int64_t* r) -> int64_t {{ return static_cast<int64_t>({expr}); }}}}'
        for name, (arity, expr) in FUNCTIONS.items())
    return f"""
#include "ming_numerics.h"
#include <cstdio>
#include <cstring>
#include <vector>

static int I(int64_t v) {{ return static_cast<int>(v); }}
static int32_t I32(int64_t v) {{ return static_cast<int32_t>(v); }}

struct Fn {{ const char* name; std::size_t arity; int64_t (*f)(const int64_t*); }};
static const Fn kFns[] = {{
{entries}
}};

int main(int argc, char** argv) {{
    if (argc != 4) {{ std::fprintf(stderr, "usage: driver FUNC IN OUT\\n"); return 2; }}
    const Fn* fn = nullptr;
    for (const Fn& e : kFns) if (std::strcmp(e.name, argv[1]) == 0) fn = &e;
    if (fn == nullptr) {{ std::fprintf(stderr, "unknown function %s\\n", argv[1]); return 2; }}
    std::FILE* fi = std::fopen(argv[2], "rb");
    if (fi == nullptr) return 3;
    std::vector<int64_t> in;
    int64_t buf[4096];
    std::size_t got;
    while ((got = std::fread(buf, sizeof(int64_t), 4096, fi)) > 0) in.insert(in.end(), buf, buf + got);
    std::fclose(fi);
    if (in.size() % fn->arity != 0) {{ std::fprintf(stderr, "bad input size\\n"); return 4; }}
    const std::size_t n = in.size() / fn->arity;
    std::vector<int64_t> out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = fn->f(&in[i * fn->arity]);
    std::FILE* fo = std::fopen(argv[3], "wb");
    if (fo == nullptr) return 5;
    if (n != 0 && std::fwrite(out.data(), sizeof(int64_t), n, fo) != n) return 6;
    std::fclose(fo);
    return 0;
}}
"""


STREAM_TEST_SRC = r"""
#include "ming_hls_stream.h"
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

struct Pix { int8_t v[4]; bool last; };

static_assert(!std::is_copy_constructible<hls::stream<int>>::value, "non-copyable");
static_assert(!std::is_copy_assignable<hls::stream<int>>::value, "non-assignable");
static_assert(std::is_same<hls::stream<Pix, 8>::value_type, Pix>::value, "value_type");

#define CHECK(c) do { if (!(c)) { std::fprintf(stderr, "CHECK failed line %d: %s\n", __LINE__, #c); return 1; } } while (0)

static void produce(hls::stream<int>& s, int n) { for (int i = 0; i < n; ++i) s.write(i); }
static void produce_pix(hls::stream<Pix>& s, int n) {
    for (int i = 0; i < n; ++i) {
        Pix p{};
        for (int c = 0; c < 4; ++c) p.v[c] = static_cast<int8_t>(i * 4 + c - 64);
        p.last = (i == n - 1);
        s << p;
    }
}

static int basic() {
    hls::stream<int> s("basic_s");
    CHECK(s.empty()); CHECK(s.size() == 0); CHECK(!s.full());
    CHECK(std::strcmp(s.name(), "basic_s") == 0);
    int x = -1;
    CHECK(!s.read_nb(x)); CHECK(x == -1); CHECK(s.reads() == 0);
    produce(s, 5);
    CHECK(s.size() == 5); CHECK(!s.empty()); CHECK(s.writes() == 5);
    CHECK(s.read() == 0);
    s.read(x); CHECK(x == 1);
    s >> x; CHECK(x == 2);
    CHECK(s.read_nb(x)); CHECK(x == 3);
    CHECK(s.write_nb(42));
    s << 43;
    CHECK(s.size() == 3);
    CHECK(s.read() == 4); CHECK(s.read() == 42); CHECK(s.read() == 43);
    CHECK(s.empty()); CHECK(s.size() == 0);
    CHECK(s.reads() == 7); CHECK(s.writes() == 7);
    CHECK(!s.read_nb(x)); CHECK(x == 3); CHECK(s.reads() == 7);

    hls::stream<int> u;
    CHECK(std::strcmp(u.name(), "unnamed") == 0);
    u.set_name("renamed");
    CHECK(std::strcmp(u.name(), "renamed") == 0);

    hls::stream<Pix, 4> d("deep");          // DEPTH is a synthesis hint: still unbounded here
    produce_pix(d, 100);                    // binds to hls::stream<Pix>&
    CHECK(d.size() == 100); CHECK(!d.full());
    for (int i = 0; i < 100; ++i) {
        Pix p = d.read();
        for (int c = 0; c < 4; ++c) CHECK(p.v[c] == static_cast<int8_t>(i * 4 + c - 64));
        CHECK(p.last == (i == 99));
    }
    CHECK(d.empty());
    hls::stream<int, 2> named2 = "implicit_name";
    CHECK(std::strcmp(named2.name(), "implicit_name") == 0);
    std::printf("OK\n");
    return 0;
}

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    const char* mode = argv[1];
    if (std::strcmp(mode, "basic") == 0) return basic();
    if (std::strcmp(mode, "empty_named") == 0) {
        hls::stream<int> s("my_fifo_xyz");
        s.write(1);
        int a = s.read();
        int b = s.read();                   // one read too many -> abort
        std::printf("unreachable %d %d\n", a, b);
        return 0;
    }
    if (std::strcmp(mode, "empty_unnamed") == 0) {
        hls::stream<int> s;
        int v = 0;
        s >> v;
        std::printf("unreachable %d\n", v);
        return 0;
    }
    if (std::strcmp(mode, "leftover") == 0) {
        hls::stream<int> s("left_fifo");
        s.write(7);
        s.write(8);
        return 0;
    }
    return 2;
}
"""


def _compile(src: str, out_dir: Path, name: str, flags: list[str]) -> Path:
    cpp = out_dir / f"{name}.cpp"
    cpp.write_text(src)
    exe = out_dir / name
    proc = subprocess.run([CXX, *flags, f"-I{TEMPLATES}", str(cpp), "-o", str(exe)],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == "", f"compile {name} failed:\n{proc.stderr}"
    return exe


class _Driver:
    def __init__(self, exe: Path, work: Path):
        self.exe = exe
        self.work = work
        self.cases: dict[str, int] = {}

    def run(self, fn: str, *cols, check_stderr: bool = False) -> np.ndarray:
        arity = FUNCTIONS[fn][0]
        assert len(cols) == arity, fn
        n = max(np.size(c) for c in cols)
        rows = np.empty((n, arity), np.int64)
        for j, c in enumerate(cols):
            rows[:, j] = np.broadcast_to(np.asarray(c, dtype=np.int64).reshape(-1) if np.size(c) > 1
                                         else np.asarray(c, dtype=np.int64).reshape(()), (n,))
        fin, fout = self.work / f"{fn}.in", self.work / f"{fn}.out"
        rows.tofile(fin)
        proc = subprocess.run([str(self.exe), fn, str(fin), str(fout)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{fn}: rc={proc.returncode}\n{proc.stderr[-2000:]}"
        if check_stderr:
            assert "runtime error" not in proc.stderr, f"{fn}: UBSan\n{proc.stderr[-3000:]}"
        out = np.fromfile(fout, dtype=np.int64)
        assert out.shape == (n,)
        self.cases[fn] = self.cases.get(fn, 0) + n
        return out


@pytest.fixture(scope="session")
def cpp_work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cpp_numerics")


# MING_AP_INT_INCLUDE=<directory of ap_int.h> (AMD's HLS_arbitrary_Precision_Types, or a Vitis install) runs the
# driver's functions as synthesis computes them: the ap_int types of ming_widths.h instead of the checked classes.
AP_INT_INCLUDE = os.environ.get("MING_AP_INT_INCLUDE")
VITIS_TYPES_FLAGS = ["-std=c++14", "-O2", "-w", f"-I{AP_INT_INCLUDE}"]


@pytest.fixture(scope="session")
def driver(cpp_work) -> _Driver:
    flags = VITIS_TYPES_FLAGS if AP_INT_INCLUDE else CXXFLAGS
    return _Driver(_compile(_driver_source(), cpp_work, "driver", flags), cpp_work)


def _assert_equal(fn: str, got: np.ndarray, want, args: dict) -> None:
    want = np.asarray(want).astype(np.int64).reshape(-1)
    if not np.array_equal(got, want):
        bad = np.flatnonzero(got != want)
        i = int(bad[0])
        detail = {k: (np.asarray(v).reshape(-1)[i] if np.size(v) > 1 else v) for k, v in args.items()}
        pytest.fail(f"{fn}: {bad.size} / {got.size} mismatches; first at {i}: {detail} "
                    f"C++={got[i]} numpy={want[i]}")


def _loguniform_f32(rng, lo: float, hi: float, n: int) -> np.ndarray:
    return np.exp(rng.uniform(np.log(lo), np.log(hi), n)).astype(np.float32)


def _random_bits_i64(rng, n: int) -> np.ndarray:
    """Random int64 with a uniformly distributed bit length (and sign)."""
    v = rng.integers(I64_MIN, I64_MAX, n, dtype=np.int64, endpoint=True)
    return v >> rng.integers(0, 64, n)


# ---------------------------------------------------------------------------
# header hygiene
# ---------------------------------------------------------------------------
def _code_only(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


@pytest.mark.unit
def test_numerics_header_is_hls_friendly():
    code = _code_only(NUMERICS_H.read_text())
    # ming_widths.h: the exact-width integers (ap_int under Vitis, checked classes in csim)
    assert re.findall(r"#\s*include\s*(\S+)", code) == ["<cstdint>", '"ming_widths.h"']
    forbidden = re.findall(r"\b(float|double|long double|__builtin\w*|new|delete|malloc|free|"
                           r"static\s+int|goto|throw|std::\w+)\b", code)
    assert forbidden == [], forbidden
    assert "while" not in re.findall(r"\b\w+\b", code), "no data-dependent loops"


@pytest.mark.parametrize("header", [NUMERICS_H, STREAM_H], ids=lambda p: p.name)
def test_headers_compile_warning_free(cpp_work, header):
    cpp = cpp_work / f"inc_{header.stem}.cpp"
    extra = ("\nint8_t f(int32_t a) { return ming::requantize(a, 1 << 23, -3, 1); }\n"
             if header == NUMERICS_H else
             "\nint g() { hls::stream<int> s(\"x\"); s << 1; return s.read(); }\n")
    cpp.write_text(f'#include "{header.name}"\n#include "{header.name}"\n' + extra)  # guard check
    for std in ("-std=c++14", "-std=c++17", "-std=c++20"):      # Vitis HLS front end defaults to C++14
        flags = [std if f.startswith("-std") else f for f in STRICT_FLAGS]
        proc = subprocess.run([CXX, *flags, "-O2", f"-I{TEMPLATES}", "-c", str(cpp), "-o", os.devnull],
                              capture_output=True, text=True)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr


# ---------------------------------------------------------------------------
# integer primitives
# ---------------------------------------------------------------------------
def test_bit_length(driver):
    rng = np.random.default_rng(1)
    v = np.abs(_random_bits_i64(rng, 250_000))
    v[v < 0] = I64_MAX                                   # abs(INT64_MIN)
    k = np.arange(63)
    edges = np.concatenate([[0, 1, 2, 3, I64_MAX], (np.int64(1) << k), (np.int64(1) << k) - 1,
                            (np.int64(1) << k) + 1])
    v = np.concatenate([edges, v]).astype(np.int64)
    _assert_equal("bit_length", driver.run("bit_length", v), nx.bit_length(v), {"a": v})
    # uint64 values >= 2**63 (C++ only; numpy's version is int64): bit length 64
    u = np.array([1 << 63, (1 << 64) - 1, (1 << 63) + 12345], dtype=np.uint64).view(np.int64)
    assert driver.run("bit_length", u).tolist() == [64, 64, 64]
    assert driver.cases["bit_length"] >= MIN_CASES


def test_saturate(driver):
    rng = np.random.default_rng(2)
    total = 0
    for qmin, qmax in [(-128, 127), (0, 255), (-128, -128), (-5, 90), (I32_MIN, I32_MAX)]:
        v = np.concatenate([rng.integers(-400, 400, 30_000), _random_bits_i64(rng, 20_000),
                            [I64_MIN, I64_MAX, qmin, qmax, qmin - 1, qmax + 1]])
        _assert_equal("saturate", driver.run("saturate", v, qmin, qmax), nx.saturate(v, qmin, qmax),
                      {"v": v, "qmin": qmin, "qmax": qmax})
        total += v.size
    assert total >= 250_000


def test_round_shift_half_even(driver):
    rng = np.random.default_rng(3)
    n = 100_000
    # full int64 range (numpy's wrapping int64 result is reproduced even for |v| > 2**62)
    v1, s1 = _random_bits_i64(rng, n), rng.integers(0, 71, n)
    # exact ties: v = k * 2**s + 2**(s-1) (also wrapping), both parities of k
    s2 = rng.integers(1, 63, n)
    k2 = rng.integers(-(1 << 20), 1 << 20, n) >> rng.integers(0, 20, n)
    v2 = (k2 << s2) + (np.int64(1) << (s2 - 1))
    # near ties, small values, small shifts
    s3 = rng.integers(0, 8, n)
    v3 = rng.integers(-1000, 1000, n)
    s4 = rng.integers(1, 63, n)
    v4 = (np.int64(1) << (s4 - 1)) + rng.integers(-2, 3, n)
    v4 = np.where(rng.random(n) < 0.5, -v4, v4)
    edge_v = np.array([0, 1, -1, 2, -2, 3, -3, I64_MIN, I64_MAX, I64_MIN + 1, 1 << 62, -(1 << 62),
                       (1 << 62) - 1, -(1 << 62) + 1, (1 << 61), -(1 << 61)], np.int64)
    edge_s = np.array([0, 1, 2, 31, 32, 61, 62, 63, 64, 100], np.int64)
    ev, es = (a.reshape(-1) for a in np.meshgrid(edge_v, edge_s))
    v = np.concatenate([v1, v2, v3, v4, ev]).astype(np.int64)
    s = np.concatenate([s1, s2, s3, s4, es]).astype(np.int64)
    _assert_equal("round_shift_half_even", driver.run("round_shift_half_even", v, s),
                  nx.round_shift_half_even(v, s), {"v": v, "s": s})
    assert driver.cases["round_shift_half_even"] >= MIN_CASES


def test_round_shift_half_up(driver):
    rng = np.random.default_rng(4)
    n = 110_000
    lim = np.int64(1) << 62                              # numpy's v + 2**(s-1) must not overflow
    v1 = np.clip(_random_bits_i64(rng, n), -lim, lim)
    s1 = rng.integers(1, 63, n)
    s2 = rng.integers(1, 63, n)
    k2 = rng.integers(-(1 << 20), 1 << 20, n) >> rng.integers(0, 20, n)
    v2 = np.clip((k2 << s2) + (np.int64(1) << (s2 - 1)) + rng.integers(-1, 2, n), -lim, lim)
    v = np.concatenate([v1, v2, [0, 1, -1, lim, -lim, lim, -lim]]).astype(np.int64)
    s = np.concatenate([s1, s2, [1, 1, 1, 62, 62, 1, 1]]).astype(np.int64)
    _assert_equal("round_shift_half_up", driver.run("round_shift_half_up", v, s),
                  nx.round_shift_half_up(v, s), {"v": v, "s": s})
    # outside numpy's contract the C++ value is still floor(v / 2**s + 1/2) (exact)
    v_ext = np.array([I64_MAX, I64_MIN, I64_MIN, -(1 << 62) - 1, -(1 << 62), 5, -5], np.int64)
    s_ext = np.array([1, 1, 63, 63, 63, 0, 64], np.int64)
    want = [(int(a) * 2 + (1 << int(b))) // (1 << (int(b) + 1)) if b > 0 else int(a)
            for a, b in zip(v_ext, s_ext)]
    assert driver.run("round_shift_half_up", v_ext, s_ext).tolist() == want
    assert driver.cases["round_shift_half_up"] >= MIN_CASES


# ---------------------------------------------------------------------------
# requantize (Conv / Gemm / MatMul / GAP)
# ---------------------------------------------------------------------------
_EDGE_MULTIPLIERS = np.array(
    [0.0, 2.0 ** -149, 3 * 2.0 ** -149, 2.0 ** -140, 2.0 ** -126 - 2.0 ** -149, 2.0 ** -126, 2.0 ** -64,
     2.0 ** -32, 2.0 ** -25, 2.0 ** -24, 0.5, 1 - 2.0 ** -24, 1.0, 1 + 2.0 ** -23, 1.5, 3.0, 255.0, 256.0,
     2.0 ** 20, 2.0 ** 24, 2.0 ** 100, float(np.finfo(np.float32).max), 1e-6, 1e-3, 0.1, 10.0],
    dtype=np.float32)


def _requant_inputs(rng, n: int):
    cat = rng.random(n)
    m = _loguniform_f32(rng, 1e-6, 10.0, n)
    pow2 = np.ldexp(np.float32(1), rng.integers(-16, 6, n)).astype(np.float32)
    pow2 *= rng.choice(np.array([1.0, 1.5, 1.25, 3.0], np.float32), n)            # few mantissa bits -> ties
    anybits = rng.integers(0, 0x7F800000, n, dtype=np.uint32).view(np.float32)    # any finite >= 0
    edge = rng.choice(_EDGE_MULTIPLIERS, n)
    m = np.where(cat < 0.12, pow2, m)
    m = np.where((cat >= 0.12) & (cat < 0.20), anybits, m)
    m = np.where((cat >= 0.20) & (cat < 0.27), edge, m).astype(np.float32)

    c = rng.random(n)
    sign = np.where(rng.random(n) < 0.5, -1, 1)
    acc = rng.integers(I32_MIN, I32_MAX, n, endpoint=True)                        # int32 accumulators
    small = rng.integers(-5000, 5001, n)
    # int32 accumulators: what the processes pass (ming::requantize takes an int32_t)
    big = np.abs(rng.integers(-(1 << 62) + 1, 1 << 62, n) >> rng.integers(31, 40, n)) * sign
    near24 = ((np.int64(1) << 24) + rng.integers(-70, 70, n)) * sign << rng.integers(0, 7, n)
    kk = rng.integers(1, 8, n)                                                     # float32(acc) ties
    tie24 = (rng.integers(1 << 23, 1 << 24, n) << kk) + (np.int64(1) << (kk - 1))
    tie24 = tie24 * sign
    edges = rng.choice(np.array([0, 1, -1, 2, -2, 127, -128, I32_MAX, I32_MIN, (1 << 24) - 1, 1 << 24,
                                 (1 << 24) + 1, -(1 << 24) - 1, (1 << 25) + 1, -(1 << 25) - 3,
                                 (1 << 30) + 1, -(1 << 30) - 3], np.int64), n)
    acc = np.where(c < 0.25, small, acc)
    acc = np.where((c >= 0.55) & (c < 0.68), big, acc)
    acc = np.where((c >= 0.68) & (c < 0.78), near24, acc)
    acc = np.where((c >= 0.78) & (c < 0.90), tie24, acc)
    acc = np.where(c >= 0.95, edges, acc).astype(np.int64)
    assert np.all((acc >= I32_MIN) & (acc <= I32_MAX))
    return acc, m


def test_requantize(driver):
    rng = np.random.default_rng(5)
    groups = [("requantize", -128, 127, 210_000), ("requantize", -128, 127, 0),
              ("requantize", -20, 100, 30_000), ("requantize", -128, -128, 5_000),
              ("requantize_default", -128, 127, 40_000),
              ("requantize_i32", 0, 255, 40_000), ("requantize_i32", -1000, 1000, 20_000),
              ("requantize_i32", I32_MIN, I32_MAX, 30_000)]
    for fn, qmin, qmax, n in groups:
        if n == 0:
            # exhaustive-ish grid: edge multipliers x edge accumulators x zero points
            accs = np.array([0, 1, -1, 2, -3, 1 << 23, (1 << 24) - 1, 1 << 24, (1 << 24) + 1, (1 << 24) + 3,
                             -(1 << 24) - 1, I32_MAX, I32_MIN, I32_MAX - 1, I32_MIN + 1], np.int64)
            zps = np.array([-128, -127, -1, 0, 1, 5, 127], np.int64)
            a, mm, z = (x.reshape(-1) for x in np.meshgrid(accs, _EDGE_MULTIPLIERS, zps, indexing="ij"))
            acc, m, zp = a.astype(np.int64), mm.astype(np.float32), z.astype(np.int64)
        else:
            acc, m = _requant_inputs(rng, n)
            if qmin >= 0 and qmax <= 255:
                zp = rng.integers(0, 256, n)
            elif qmax - qmin > 1 << 16:
                zp = rng.integers(-(1 << 30), 1 << 30, n) >> rng.integers(0, 31, n)
            else:
                zp = rng.integers(-128, 128, n)
        mant, exp = nx.float32_parts(m)
        want = nx.requantize(acc, m, zp, qmin, qmax)
        if fn == "requantize_default":
            got = driver.run(fn, acc, mant, exp, zp)
        else:
            got = driver.run(fn, acc, mant, exp, zp, qmin, qmax)
        _assert_equal(fn, got, want, {"acc": acc, "M": m, "mant": mant, "exp": exp, "zp": zp,
                                      "qmin": qmin, "qmax": qmax})
    assert driver.cases["requantize"] + driver.cases["requantize_default"] >= MIN_CASES
    assert driver.cases["requantize_i32"] >= 80_000


def test_gap_requant_via_requantize(driver):
    """GlobalAveragePool in C++ = requantize(sum - N*zx, parts(ort_gap_multiplier)) (no own function)."""
    rng = np.random.default_rng(6)
    total = 0
    for _ in range(60):
        n_img = int(rng.choice([4, 49, 64, 196, 1024, 3136]))
        sx, sy = _loguniform_f32(rng, 1e-3, 1.0, 2)
        if rng.random() < 0.5:
            sy = sx
        zx, zy = (int(z) for z in rng.integers(-128, 128, 2))
        ws = rng.integers(-128 * n_img, 127 * n_img + 1, 2048)
        mant, exp = nx.float32_parts(nx.ort_gap_multiplier(sx, sy, n_img))
        got = driver.run("requantize", ws - n_img * zx, mant, exp, zy, -128, 127)
        _assert_equal("gap", got, nx.gap_requant(ws, n_img, sx, zx, sy, zy), {"ws": ws})
        total += ws.size
    assert total >= 100_000


# ---------------------------------------------------------------------------
# fixed point, Add, AveragePool
# ---------------------------------------------------------------------------
def _fixed_point_sets(rng, n_sets: int):
    out = []
    for i in range(n_sets):
        r = rng.random()
        if r < 0.65:
            fp = nx.to_fixed_point(float(np.exp2(rng.uniform(-31.9, 29.9))))
        elif r < 0.9:
            fp = nx.FixedPoint(int(rng.integers(0, 1 << 31)), int(rng.integers(0, 63)))
        else:                                            # power-of-two multiplier: exact ties
            fp = nx.FixedPoint(1 << int(rng.integers(0, 31)), int(rng.integers(1, 63)))
        if i < 6:                                        # extreme shifts
            fp = nx.FixedPoint(int(rng.integers(1 << 30, 1 << 31)), [0, 1, 2, 61, 62, 62][i])
        out.append(fp)
    return out


def test_fixed_point_rescale(driver):
    rng = np.random.default_rng(7)
    per = 128
    xs, ms, ss, offs, wants = [], [], [], [], []
    xs_d, ms_d, ss_d, wants_d = [], [], [], []
    for fp in _fixed_point_sets(rng, 1700):
        c = rng.random(per)
        x = rng.integers(-(1 << 31) + 1, 1 << 31, per)
        x = np.where(c < 0.3, rng.integers(-600, 600, per), x)
        x = np.where(c > 0.95, rng.choice([0, 1, -1, (1 << 31) - 1, -(1 << 31) + 1], per), x).astype(np.int64)
        bound = min(128, 1 << max(61 - fp.shift, 0))   # keep (offset << shift) + x*m inside int64
        off = rng.integers(-bound, bound, per)
        wants.append(nx.fixed_point_rescale(x, fp, "half_even", off))
        xs.append(x)
        ms.append(np.full(per, fp.multiplier))
        ss.append(np.full(per, fp.shift))
        offs.append(off)
        if rng.random() < 0.15:                          # default pre_round_offset = 0
            wants_d.append(nx.fixed_point_rescale(x, fp))
            xs_d.append(x)
            ms_d.append(np.full(per, fp.multiplier))
            ss_d.append(np.full(per, fp.shift))
    x, m, s, off = (np.concatenate(a) for a in (xs, ms, ss, offs))
    _assert_equal("fixed_point_rescale", driver.run("fixed_point_rescale", x, m, s, off),
                  np.concatenate(wants), {"x": x, "m": m, "s": s, "off": off})
    x, m, s = (np.concatenate(a) for a in (xs_d, ms_d, ss_d))
    _assert_equal("fixed_point_rescale_default", driver.run("fixed_point_rescale_default", x, m, s),
                  np.concatenate(wants_d), {"x": x, "m": m, "s": s})
    assert driver.cases["fixed_point_rescale"] >= MIN_CASES


def _add_scales(rng):
    r = rng.random()
    sy = float(_loguniform_f32(rng, 1e-3, 0.5, 1)[0])
    if r < 0.4:                                          # random ratios
        sa, sb = _loguniform_f32(rng, 1e-3, 0.5, 2)
    elif r < 0.7:                                        # residual-like: sB/sA in [0.2, 5]
        sa = float(_loguniform_f32(rng, 1e-3, 0.5, 1)[0])
        sb = sa * float(rng.uniform(0.2, 5.0))
    elif r < 0.9:                                        # power-of-two ratios: exact ties
        sa, sb = sy * 2.0 ** int(rng.integers(-4, 4)), sy * 2.0 ** int(rng.integers(-4, 4))
    else:                                                # very unbalanced: small mb
        sa, sb = sy * float(rng.uniform(0.5, 4.0)), sy * 2.0 ** float(rng.uniform(-14, -6))
        if rng.random() < 0.5:
            sa, sb = sb, sa
    return np.float32(sa), np.float32(sb), np.float32(sy)


def _add_case(fn, a, b, za, zb, zy, qmin, qmax, sa, sb, sy, offset=nx.ORT_X86_DOMAIN_OFFSET):
    """(C++ function, its argument columns, numpy expected) for one scale set."""
    if fn == "add_float_requant":
        subtract = bool(zy & 1)
        c = nx.float_add_constants(sa, sb, sy, subtract)
        want = nx.add_requant(a, sa, za, b, sb, zb, sy, zy, qmin, qmax, subtract=subtract, fused=False)
        return fn, (a, za, b, zb, c.a_mantissa, c.a_align, c.b_mantissa, c.b_align, c.x_shift, c.x_limit,
                    c.divisor, zy, qmin, qmax), want
    c = nx.add_constants(sa, za, sb, zb, sy, zy, offset)
    want = nx.add_requant(a, sa, za, b, sb, zb, sy, zy, qmin, qmax, domain_offset=offset)
    args = (a, b, c.a_multiplier, c.b_multiplier, c.fixed, c.shift, offset, qmin, qmax)
    return fn, (args[:7] if fn == "add_requant_default" else args), want


def _run_grouped(driver, items, names):
    by_fn: dict[str, list] = {}
    for fn, args, want in items:
        by_fn.setdefault(fn, []).append((args, want))
    for fn, lst in by_fn.items():
        arity = FUNCTIONS[fn][0]
        n_each = [max(np.size(x) for x in args) for args, _ in lst]
        cols = [np.concatenate([np.broadcast_to(np.asarray(args[j], np.int64), (k,))
                                for (args, _), k in zip(lst, n_each)]) for j in range(arity)]
        want = np.concatenate([np.asarray(w).astype(np.int64).reshape(-1) for _, w in lst])
        _assert_equal(fn, driver.run(fn, *cols), want, dict(zip(names, cols)))


def test_add_requant(driver):
    """`ming::add_requant` (QLinearAdd) and `ming::add_float_requant` (float Add/Sub) == numerics on random pairs
    of 1,200 scale sets each and on every int8 pair of four (tests/test_eltwise.py checks every pair of more)."""
    rng = np.random.default_rng(8)
    items = []
    per = 256
    for i in range(1000):
        sa, sb, sy = _add_scales(rng)
        za, zb, zy = (int(z) for z in rng.integers(-128, 128, 3))
        qmin, qmax = (-128, 127) if rng.random() < 0.6 else (zy, 127)       # fused Relu: qmin = zy
        a, b = rng.integers(-128, 128, per), rng.integers(-128, 128, per)
        fn = "add_requant_default" if (qmin, qmax) == (-128, 127) and i % 4 == 0 else "add_requant"
        items.append(_add_case(fn, a, b, za, zb, zy, qmin, qmax, sa, sb, sy))
        items.append(_add_case("add_float_requant", a, b, za, zb, zy, qmin, qmax, sa, sb, sy))
    # exhaustive int8 pairs for a few scale sets (incl. power-of-two ratios)
    ga, gb = (g.reshape(-1) for g in np.meshgrid(np.arange(-128, 128), np.arange(-128, 128)))
    for sa, sb, sy, za, zb, zy in [(0.05, 0.05, 0.1, 3, -7, 1), (0.02, 0.08, 0.04, -128, 5, -3),
                                   (0.013, 0.029, 0.031, 11, -2, -128), (0.5, 0.125, 0.25, 0, 1, 7)]:
        for fn in ("add_requant", "add_float_requant"):
            items.append(_add_case(fn, ga, gb, za, zb, zy, -128, 127, np.float32(sa), np.float32(sb),
                                   np.float32(sy)))
    # the int8 domain (session.qdqisint8allowed=1) through the int32-result variant
    for _ in range(200):
        sa, sb, sy = _add_scales(rng)
        za, zb, zy = (int(z) for z in rng.integers(-128, 128, 3))
        a, b = rng.integers(-128, 128, per), rng.integers(-128, 128, per)
        items.append(_add_case("add_requant_i32", a, b, za, zb, zy, -128, 127, sa, sb, sy, offset=0))
    by_fn: dict[str, list] = {}
    for item in items:
        by_fn.setdefault(item[0], []).append(item)
    for fn, group in by_fn.items():
        _run_grouped(driver, group, [f"r{j}" for j in range(FUNCTIONS[fn][0])])
    assert driver.cases["add_requant"] + driver.cases["add_requant_default"] >= MIN_CASES
    assert driver.cases["add_float_requant"] >= MIN_CASES
    assert driver.cases["add_requant_i32"] >= 50_000


def _average_sets(rng, n_sets: int):
    """numerics.window_average_constants of random 3x3 windows (divisors 9, 6, 4: padding left out)."""
    for _ in range(n_sets):
        sx = np.float32(_loguniform_f32(rng, 1e-3, 1.0, 1)[0])
        sy = sx if rng.random() < 0.4 else np.float32(sx * _loguniform_f32(rng, 0.2, 8.0, 1)[0])
        zx, zy = (int(z) for z in rng.integers(-128, 128, 2))
        offset = nx.ORT_X86_DOMAIN_OFFSET if rng.random() < 0.8 else 0
        yield zx, nx.window_average_constants(sx, zx, sy, zy, 9, (4, 6, 9), domain_offset=offset)


def test_average_term_and_add(driver):
    """`ming::average_term` and `ming::average_add` (one float32 term and one float32 addition of
    onnxruntime's AveragePool sum, in units) == numerics on every int8 value of 1,000 scale sets, and on chains of
    random sums."""
    rng = np.random.default_rng(9)
    items = []
    values = np.arange(-128, 128)
    for zx, c in _average_sets(rng, 1000):
        items.append(("average_term", (values, zx, c.mantissa), nx.window_average_terms(values, c.mantissa, zx)))
        elements = rng.integers(-128, 128, (9, 64))
        terms = nx.window_average_terms(elements, c.mantissa, zx)
        partial = terms[0]
        for term in terms[1:]:
            items.append(("average_add", (partial, term), nx.round_to_float32(partial + term)))
            partial = nx.round_to_float32(partial + term)
    _run_grouped(driver, [i for i in items if i[0] == "average_term"], ["x", "x_zp", "mantissa"])
    _run_grouped(driver, [i for i in items if i[0] == "average_add"], ["sum", "term"])
    assert driver.cases["average_term"] >= 256_000 and driver.cases["average_add"] >= 500_000


def test_average_level(driver):
    """`ming::average_level` == numerics.window_average_level on window sums of 100 scale sets: random sums, and
    every threshold and the sum one below it (where the level changes)."""
    rng = np.random.default_rng(10)
    items = []
    for _, c in _average_sets(rng, 100):
        for row in range(len(c.divisors)):
            low, high = int(c.low[row]), int(c.high[row])
            thresholds = c.thresholds[row]
            edges = thresholds[1:c.last + 1] + low
            sums = np.concatenate([rng.integers(-c.bound + 1, c.bound, 64), edges, edges - 1, [low, high, low - 1,
                                                                                                 high + 1]])
            sums = np.clip(sums, 1 - c.bound, c.bound - 1)
            want = nx.window_average_level(sums, np.full(sums.shape, row), c)
            args = (sums, low, high, int(c.drop[row]), int(c.ratio[row]), int(c.offset[row]), c.last, c.qmin,
                    *thresholds)
            items.append(("average_level", args, want))
    _run_grouped(driver, items, [f"r{j}" for j in range(264)])
    assert driver.cases["average_level"] >= 100_000


def test_requantize_shift(driver):
    """ming::requantize_shift (an average's requantization by a power of two) equals numerics.requantize_shift
    on accumulators of every size and every shift of its contract, ties included."""
    rng = np.random.default_rng(12)
    n = 100_000
    # int32 accumulators: what the processes pass (ming::requantize_shift takes an int32_t)
    acc = np.concatenate([_random_bits_i64(rng, n) >> rng.integers(32, 64, n),
                          rng.integers(-(1 << 20), 1 << 20, n), np.array([I32_MIN, I32_MAX, -1, 0, 1], np.int64)])
    shift = rng.integers(0, nx.SHIFT_MAX + 1, acc.size)
    tie = ((acc >> 20) << np.minimum(shift, 40)) | (np.int64(1) << shift) >> 1
    acc = np.where((rng.random(acc.size) < 0.3) & (tie >= I32_MIN) & (tie <= I32_MAX), tie, acc)  # ties
    zp = rng.integers(-128, 128, acc.size)
    relu = rng.random(acc.size) < 0.2  # a ReLU's range: [zp, 127]
    got = driver.run("requantize_shift", acc, shift, zp, np.where(relu, zp, -128), 127)
    want = nx.requantize_shift(acc, shift, zp)
    want = np.where(relu, np.maximum(want, zp), want)
    _assert_equal("requantize_shift", got, want, {"acc": acc, "shift": shift, "zp": zp})


def _narrow_cases(rng):
    """(constants, zp, qmin, qmax, rule) of TFLite layers: Q31 sets with and without double rounding, and LiteRT's
    float rounding of fully connected layers; multipliers down to 2^-12 (accumulators beyond 18 bits)."""
    for index in range(48):
        low = -12 if index % 3 == 0 else -9
        real = np.exp2(rng.uniform(low, -1, 4)) if index % 2 else np.exp2(rng.uniform(low, low + 2, 4))
        exponent = np.floor(np.log2(real)).astype(np.int64) + 1
        multiplier = np.round(real * np.exp2(31 - exponent)).astype(np.int64)
        shift = 31 - exponent
        zp, (qmin, qmax) = int(rng.integers(-128, 128)), ((0, 255) if index % 7 == 3 else (-128, 127))
        if index % 4 == 3:
            m = real.astype(np.float32)
            constants = nx.narrow_float32(m, zp, qmin, qmax)
            rule = lambda a, m=m, zp=zp, qmin=qmin, qmax=qmax: nx.requantize(a, m[:, None], zp, qmin, qmax, half_away=True)
        else:
            double_round = bool(index % 3)
            constants = nx.narrow_fixed_point(multiplier, shift, double_round, zp, qmin, qmax)
            rule = lambda a, mu=multiplier, s=shift, d=double_round, zp=zp, qmin=qmin, qmax=qmax: \
                nx.fixed_point_requantize(a, mu[:, None], s[:, None], d, zp, qmin, qmax)
        if constants is not None:
            yield constants, zp, qmin, qmax, rule
    for zp in (127, -128):  # one output whatever the accumulator: low, high, center at the ends of int32
        for double_round in (False, True):
            rule = lambda a, d=double_round, zp=zp: nx.fixed_point_requantize(a, np.array([[1]]), np.array([[62]]), d,
                                                                              zp)
            constants = nx.narrow_fixed_point(np.array([1]), np.array([62]), double_round, zp)
            assert constants is not None
            yield constants, zp, -128, 127, rule


def test_requantize_narrow(driver):
    """ming::requantize_narrow (18 and 27-bit operands) == numerics.requantize_narrow == the TFLite rule it was
    proved against, at every threshold and its neighbours and on random int32 accumulators, for Q31 and float32
    layers."""
    rng = np.random.default_rng(31)
    columns = {18: [[] for _ in range(12)], 27: [[] for _ in range(12)]}
    for c, zp, qmin, qmax, rule in _narrow_cases(rng):
        channels = len(c.multipliers)
        t = np.minimum(nx.requant_thresholds(rule, channels, qmin, qmax), I32_MAX)
        acc = np.concatenate([t - 1, t, t + 1, rng.integers(c.low - 4096, c.high + 4096, (channels, 2000)),
                              rng.integers(I32_MIN, I32_MAX, (channels, 500), endpoint=True)], axis=1)
        acc = np.clip(acc, I32_MIN, I32_MAX)
        want = rule(acc)
        per_channel = [np.broadcast_to(np.array(v, np.int64)[:, None], acc.shape)
                       for v in (c.multipliers, c.roundings_negative, c.roundings)]
        python = nx.requantize_narrow(acc, *per_channel, c.shift, c.low, c.high, c.center, zp, qmin, qmax)
        assert np.array_equal(python, want)
        for column, values in zip(columns[c.operand_bits], [acc, *per_channel, c.shift, c.low, c.high, c.center, zp,
                                                            qmin, qmax, want]):
            column.append(np.broadcast_to(values, acc.shape).reshape(-1))
    for bits, fn in ((18, "requantize_narrow"), (27, "requantize_narrow_wide")):
        cols = [np.concatenate(column) for column in columns[bits]]
        assert cols[0].size >= MIN_CASES // 4, bits
        got = driver.run(fn, *cols[:11])
        as_int8 = (cols[11] + 128) % 256 - 128  # it returns int8_t: a uint8 output's bits
        _assert_equal(fn, got, as_int8, {"acc": cols[0], "multiplier": cols[1], "shift": cols[4]})


# Vitis's ap_int reduced to what ming::requantize_narrow's synthesis branch and the registers of ming::WindowCursor
# (tests/test_window_cursor.py) need: two's complement wrap-around to W bits on construction, arithmetic in long long
# (exact at these widths, as ap_int's widening operators are), ap_uint's increments.
AP_INT_STAND_IN = """#pragma once
template <int W> struct ap_int {
    static const int width = W;
    long long v;
    template <typename T> ap_int(const T& x) : ap_int(static_cast<long long>(x)) {}
    ap_int(long long x = 0)
        : v(W >= 64 ? x : static_cast<long long>(static_cast<unsigned long long>(x) << (64 - W)) >> (64 - W)) {}
    operator long long() const { return v; }
};
template <int W> struct ap_uint {
    static const int width = W;
    unsigned long long v;
    template <typename T> ap_uint(const T& x) : ap_uint(static_cast<long long>(x)) {}
    ap_uint(long long x = 0) : v(static_cast<unsigned long long>(x) & ((1ULL << W) - 1)) {}
    operator long long() const { return static_cast<long long>(v); }
    ap_uint& operator+=(long long x) { return *this = ap_uint(static_cast<long long>(v) + x); }
    ap_uint& operator++() { return *this += 1; }
    ap_uint operator++(int) { const ap_uint old = *this; *this += 1; return old; }
};
"""


def test_requantize_narrow_synthesis_widths(cpp_work):
    """ming::requantize_narrow as synthesis computes it (no MING_CSIM: ap_int widths, the level in
    NarrowRequant.level_bits bits, the roundings modulo 2^48 as the ROMs hold them) == the TFLite rule."""
    include = cpp_work / "ap_int_stand_in"
    include.mkdir(exist_ok=True)
    (include / "ap_int.h").write_text(AP_INT_STAND_IN)
    cases = "\n".join(f"      case {bits}: y = run<{bits}>(r); break;" for bits in range(9, 25))
    arguments = "r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10]"
    source = ('#include <cstdio>\n#include "ming_numerics.h"\n'
              "template <int L> int run(const long long* r) {\n"
              f"  return r[11] == 18 ? ming::requantize_narrow<ming::Multiplier::dsp, 18, L>({arguments})\n"
              f"                     : ming::requantize_narrow<ming::Multiplier::dsp, 27, L>({arguments});\n}}\n"
              "int main() {\n  long long r[13];\n  for (;;) {\n"
              '    for (int i = 0; i < 13; i++) if (std::scanf("%lld", r + i) != 1) return 0;\n'
              f"    int y = run<48>(r);\n    switch (r[12]) {{\n{cases}\n      default: break;\n    }}\n"
              '    std::printf("%d\\n", y);\n  }\n}\n')
    exe = _compile(source, cpp_work, "narrow_synthesis", ["-std=c++17", "-O1", "-Wall", "-Wno-unknown-pragmas",
                                                          f"-I{include}"])
    rng = np.random.default_rng(32)
    rows, want = [], []
    for c, zp, qmin, qmax, rule in _narrow_cases(rng):
        channels = len(c.multipliers)
        t = np.minimum(nx.requant_thresholds(rule, channels, qmin, qmax), I32_MAX)
        acc = np.concatenate([t - 1, t, rng.integers(c.low - 4096, c.high + 4096, (channels, 200)),
                              rng.integers(I32_MIN, I32_MAX, (channels, 50), endpoint=True),
                              np.tile([I32_MIN, I32_MAX, c.low, c.high, -1, 0], (channels, 1))], axis=1)
        acc = np.clip(acc, I32_MIN, I32_MAX)
        want.append(((rule(acc).astype(np.int64) + 128) % 256 - 128).reshape(-1))  # int8_t: a uint8 output's bits
        assert c.level_bits <= 24 and c.rounding_bits <= nx.NARROW_SUM_BITS
        for k in range(channels):
            constants = (f"{c.multipliers[k]} {nx.narrow_sum_residue(c.roundings_negative[k])} "
                         f"{nx.narrow_sum_residue(c.roundings[k])} {c.shift} {c.low} {c.high} {c.center} {zp} {qmin} "
                         f"{qmax} {c.operand_bits} {max(c.level_bits, 9)}")
            rows += [f"{a} {constants}" for a in acc[k]]
    done = subprocess.run([str(exe)], input="\n".join(rows) + "\n", capture_output=True, text=True, check=True)
    got = np.array(done.stdout.split(), np.int64)
    assert got.size == len(rows) >= 100_000
    assert np.array_equal(got, np.concatenate(want))


# ---------------------------------------------------------------------------
# no undefined behaviour, whatever the arguments
# ---------------------------------------------------------------------------
# Functions whose arguments have the exact widths of their documented domain (ming::int_for / uint_for): in csim an
# argument outside it ends the run with one line (tests/test_numerics_widths.py), so they get in-domain arguments
# only, in the tests above.
CHECKED_DOMAIN = {"requantize", "requantize_default", "requantize_i32", "add_requant", "add_requant_default",
                  "add_requant_i32", "average_term", "average_add", "average_level", "requantize_narrow",
                  "requantize_narrow_wide", "mul_requant_i32", "add_float_requant"}


def test_no_undefined_behaviour(cpp_work):
    """-fsanitize=undefined build on arbitrary (mostly out-of-contract) arguments."""
    probe = subprocess.run([CXX, "-fsanitize=undefined", "-x", "c++", "-", "-o", str(cpp_work / "probe")],
                           input="int main(){return 0;}", capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("UBSan not available")
    exe = _compile(_driver_source(), cpp_work, "driver_ubsan",
                   ["-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-DMING_CSIM", "-fsanitize=undefined",
                    "-fno-sanitize-recover=undefined"])
    ub = _Driver(exe, cpp_work)
    rng = np.random.default_rng(10)
    n = 20_000
    edges64 = np.array([I64_MIN, I64_MIN + 1, -1, 0, 1, I64_MAX, 1 << 62, -(1 << 62)], np.int64)
    edges32 = np.array([I32_MIN, -129, -128, -1, 0, 1, 63, 64, 127, 255, I32_MAX], np.int64)
    for fn, (arity, _) in FUNCTIONS.items():
        if fn in CHECKED_DOMAIN:
            continue
        cols = []
        for j in range(arity):
            if j in NARROW_ARGS.get(fn, set()):
                c = np.where(rng.random(n) < 0.5, rng.integers(-200, 200, n),
                             rng.integers(I32_MIN, I32_MAX, n, endpoint=True))
                c[:edges32.size] = edges32
            else:
                c = _random_bits_i64(rng, n)
                c[:edges64.size] = edges64
            cols.append(rng.permutation(c))
        ub.run(fn, *cols, check_stderr=True)


def test_multiply_pair_is_exact_for_every_int8_triple(cpp_work):
    """ming::multiply_pair (two int8 products in one 27 x 18-bit multiply, AMD WP486) over all 2^24
    (x, w_low, w_high)."""
    exe = _compile(
        '#include <cstdio>\n#include "ming_numerics.h"\n'
        "int main() {\n  long wrong = 0;\n"
        "  for (int x = -128; x < 128; x++)\n    for (int a = -128; a < 128; a++)\n      for (int b = -128; b < 128; b++) {\n"
        "        int32_t low, high;\n"
        "        ming::multiply_pair(static_cast<int8_t>(x), static_cast<int8_t>(a), static_cast<int8_t>(b), low, high);\n"
        "        wrong += low != x * a || high != x * b;\n      }\n"
        '  std::printf("%ld\\n", wrong);\n}\n', cpp_work, "multiply_pair", CXXFLAGS)
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout == "0\n"


# ---------------------------------------------------------------------------
# ming_hls_stream.h stand-in
# ---------------------------------------------------------------------------
@pytest.fixture(scope="session")
def stream_exe(cpp_work) -> Path:
    return _compile(STREAM_TEST_SRC, cpp_work, "stream_test", CXXFLAGS)


def _run_stream(exe: Path, mode: str, leftover_env: str | None = None):
    env = {k: v for k, v in os.environ.items() if k != "MING_CSIM_CHECK_LEFTOVER"}
    if leftover_env is not None:
        env["MING_CSIM_CHECK_LEFTOVER"] = leftover_env
    return subprocess.run([str(exe), mode], capture_output=True, text=True, env=env, timeout=30)


def test_stream_basic(stream_exe):
    proc = _run_stream(stream_exe, "basic", leftover_env="1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "OK" and proc.stderr == ""


@pytest.mark.parametrize("mode,name", [("empty_named", "my_fifo_xyz"), ("empty_unnamed", "unnamed")])
def test_stream_read_empty_aborts(stream_exe, mode, name):
    proc = _run_stream(stream_exe, mode)
    assert proc.returncode != 0
    assert f"'{name}'" in proc.stderr and "read while empty" in proc.stderr
    assert "unreachable" not in proc.stdout


def test_stream_leftover_warning(stream_exe):
    proc = _run_stream(stream_exe, "leftover", leftover_env="1")
    assert proc.returncode == 0
    assert "'left_fifo'" in proc.stderr and "2 leftover" in proc.stderr
    for env in (None, "0"):
        proc = _run_stream(stream_exe, "leftover", leftover_env=env)
        assert proc.returncode == 0 and proc.stderr == ""
