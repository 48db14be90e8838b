"""ming::WindowCursor (emit/templates/ming_window.h), the position machine of the sliding-window processes,
compiled with g++ and stepped over a grid of geometries: at every iteration its registers say what the loop of
ming_py/kinds/window.py (`ming_py.process_spec.loop_of`, the positions `ming simulate` steps) does there.

Per geometry (kernel 1..5, stride 1..3, dilation 1..2, asymmetric pads 0..2, 1..3 tokens per pixel, folds of
1..4 output tokens, a k tile of one element, a window row or the whole window) a conv's spec gives the loop's
positions, each a padded position (pr, pc) in row-major order and one after the map's last. The cursor must
read the position's tokens at the iterations the loop's reads say, compute the window ending at the previous
position during the positions whose writes say so, walk its k tiles in order, and name the line buffer rows of
the pixel and of the window's first row. Its counters are at the widths `SlidingWindow.counters` charges, a
counter of range 0 the constant ming::Zero. Compiled both for C-simulation (the checked registers) and as
synthesis sees it (ap_uint, from a stand-in of Vitis's ap_int.h).
"""

from __future__ import annotations

import random
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest

from ming_py.dataflow import Window
from ming_py.process_spec import loop_of
from ming_py.kinds.base import ProcessSpec
from ming_py.kinds.window import line_buffer_rows, window_tile
from pipelined_control import cursor_loop
from test_cpp_numerics import AP_INT_STAND_IN

TEMPLATES = Path(__file__).resolve().parents[1] / "emit" / "templates"
CURSOR = cursor_loop((TEMPLATES / "ming_window.h").read_text())
COUNTERS = [name for name, d in CURSOR.registers.items() if d.type != "bool"]
# what the harness prints at each iteration, in order
FIELDS = ("pr", "pc", "row_slot", "read", "token", "window", "step", "top", "left", "top_slot", "row_offset",
          "col_offset")


# maps one column wide, windows reaching back to a row's first column (a line buffer row more), the whole window
# in one k tile
EDGES = [((3, 1), (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), 2, 1, 1),
         ((4, 1), (3, 1), (2, 1), (1, 1), (1, 0, 1, 0), 1, 2, 3),
         ((3, 2), (2, 3), (1, 1), (1, 1), (0, 0, 1, 1), 3, 1, 6),
         ((5, 1), (3, 3), (1, 2), (2, 1), (2, 2, 0, 2), 1, 4, 3)]


def _geometries(count: int = 48):
    """Window geometries with their spec: EDGES, and a fixed sample of the grid with maps as narrow as the
    window allows and a little wider."""
    rng = random.Random("window cursor")
    found = [_spec(*edge) for edge in EDGES]
    while len(found) < count:
        kernel = (rng.randint(1, 5), rng.randint(1, 5))
        stride, dilation = (rng.randint(1, 3), rng.randint(1, 3)), (rng.randint(1, 2), rng.randint(1, 2))
        pads = tuple(rng.randint(0, 2) for _ in range(4))
        spans = [(k - 1) * d for k, d in zip(kernel, dilation)]
        size = [max(span + 1 - pads[axis] - pads[axis + 2], 1) + rng.choice((0, 0, 1, 3)) for axis, span
                in enumerate(spans)]
        tokens, outputs = rng.randint(1, 3), rng.randint(1, 4)
        unroll_k = rng.choice((1, kernel[1], kernel[0] * kernel[1]))
        found.append(_spec(tuple(size), kernel, stride, dilation, pads, tokens, outputs, unroll_k))
    return found


def _spec(size, kernel, stride, dilation, pads, tokens, outputs, unroll_k) -> ProcessSpec:
    """A conv of `tokens` input channels (one lane, one per tile) and `outputs` output tokens (one lane):
    a fold of tokens x k tiles x outputs iterations."""
    padded = [size[axis] + pads[axis] + pads[axis + 2] for axis in (0, 1)]
    out = [(padded[axis] - (kernel[axis] - 1) * dilation[axis] - 1) // stride[axis] + 1 for axis in (0, 1)]
    window = Window(tokens, size[0], size[1], outputs, out[0], out[1], kernel, stride, dilation, pads)
    return ProcessSpec("conv", ((tokens, *size),), ((outputs, *out),), (("oc", 1), ("ic", 1), ("k", unroll_k)),
                      (1,), (1,), window)


def _parameters(spec: ProcessSpec, holds_last: bool) -> str:
    w = spec.window
    rows = line_buffer_rows(spec)
    last_top_slot = max((top * w.stride[0] - w.pads[0]) % rows for top in range(w.out_height))
    tile = window_tile(w.kernel, spec.factor("k"))
    values = (w.in_height, w.in_width, w.out_height, w.out_width, *w.kernel, *w.stride, *w.dilation, w.pads[0],
              w.pads[1], w.padded_height, w.padded_width, rows, last_top_slot, *tile, spec.tokens_in[0], spec.fold)
    return ", ".join(map(str, values)) + (", true" if holds_last else ", false")


# the iterations run after the loop's positions with HOLDS_LAST (shared requantizers' last turns)
EXTRA = 2


def _cases():
    """(spec, HOLDS_LAST): as the template sets it (a map one column wide), and set for every other geometry with
    EXTRA iterations after the last position."""
    return [(spec, spec.window.padded_width == 1 or i % 2 == 1) for i, spec in enumerate(_geometries())]


def _harness(cases) -> str:
    widths = ", ".join(f"width_of(c.{name})" for name in COUNTERS)
    formats = " ".join(["%d"] * len(FIELDS))
    printed = ", ".join(f"static_cast<int>(c.{name})" for name in FIELDS)
    runs = "\n".join(f"  run<{_parameters(spec, holds)}>({i}, {loop_of(spec).iterations + (EXTRA if holds else 0)});"
                     for i, (spec, holds) in enumerate(cases))
    return f"""#include <cstdio>
#include "ming_window.h"

template <typename T>
constexpr int width_of(const T&) {{
  return T::width;
}}

template <int H_IN, int W_IN, int H_OUT, int W_OUT, int K_H, int K_W, int S_H, int S_W, int D_H, int D_W,
          int PAD_TOP, int PAD_LEFT, int PADDED_H, int PADDED_W, int ROWS, int LAST_TOP_SLOT, int UNROLL_KH,
          int UNROLL_KW, int TOKENS_IN, int FOLD, bool HOLDS_LAST>
void run(int geometry, int iterations) {{
  ming::WindowCursor<H_IN, W_IN, H_OUT, W_OUT, K_H, K_W, S_H, S_W, D_H, D_W, PAD_TOP, PAD_LEFT, PADDED_H, PADDED_W,
                     ROWS, LAST_TOP_SLOT, UNROLL_KH, UNROLL_KW, TOKENS_IN, FOLD, HOLDS_LAST> c;
  const int widths[] = {{{widths}}};
  std::printf("geometry %d", geometry);
  for (int width : widths) std::printf(" %d", width);
  std::printf("\\n");
  for (int it = 0; it < iterations; it++) {{
    std::printf("{formats}\\n", {printed});
    c.next();
  }}
}}

int main() {{
{runs}
  return 0;
}}
"""


def _expected(spec: ProcessSpec, extra: int) -> list[tuple[int, ...]]:
    """Each iteration's FIELDS from the loop's positions: the k tiles in raster order, each window's from its
    first (a fold is a whole number of window walks)."""
    w = spec.window
    rows = line_buffer_rows(spec)
    span_h, span_w = (w.kernel[0] - 1) * w.dilation[0], (w.kernel[1] - 1) * w.dilation[1]
    tile_h, tile_w = window_tile(w.kernel, spec.factor("k"))
    tiles_w = w.kernel[1] // tile_w
    k_tiles = tiles_w * (w.kernel[0] // tile_h)
    assert spec.fold % k_tiles == 0
    expected, n, window = [], 0, (0, 0, 0)
    for count, position in loop_of(spec).runs:
        for _ in range(count):
            pr, pc = divmod(n, w.padded_width)
            emits = position.writes[0].count > 0
            if emits:
                top, left = divmod(n - 1, w.padded_width)
                top, left = top - span_h, left - span_w
                window = (top, left, (top - w.pads[0]) % rows)
            reads = set(position.reads[0].offsets())
            for i in range(position.iterations):
                token = position.reads[0].offsets().index(i) if i in reads else None
                tile_row, tile_col = divmod(i % k_tiles, tiles_w) if emits else (0, 0)
                expected.append((pr, pc, (pr - w.pads[0]) % rows, i in reads, token, emits, i, *window,
                                 tile_row * tile_h * w.dilation[0], tile_col * tile_w * w.dilation[1]))
            n += 1
    return expected + [(w.padded_height, None, None, False, None, False, None, *window, 0, 0)] * extra


def _compare(spec: ProcessSpec, got: list[tuple[int, ...]], want: list[tuple], where: str) -> None:
    assert len(got) == len(want), f"{where}: {len(got)} iterations, the loop takes {len(want)}"
    for it, (g, e) in enumerate(zip(got, want)):
        checked = {name: (a, b) for name, a, b in zip(FIELDS, g, e)
                   if b is not None and not (name in ("top", "left", "top_slot") and not e[FIELDS.index("window")])}
        wrong = {name: pair for name, pair in checked.items() if pair[0] != pair[1]}
        assert not wrong, f"{where}: iteration {it}: (cursor, loop) {wrong}"


def _unsigned_bits(maximum: int) -> int:
    return max(maximum.bit_length(), 1)


@lru_cache(maxsize=None)
def _run(flags: tuple[str, ...], directory: str) -> str:
    cases = _cases()
    source = Path(directory) / "cursor.cpp"
    source.write_text(_harness(cases))
    binary = Path(directory) / "cursor"
    built = subprocess.run(["g++", *flags, f"-I{TEMPLATES}", f"-I{directory}", str(source), "-o", str(binary)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    run = subprocess.run([str(binary)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def _check_output(stdout: str) -> None:
    cases = _cases()
    blocks = stdout.split("geometry ")[1:]
    assert len(blocks) == len(cases)
    for block, (spec, holds) in zip(blocks, cases):
        header, *lines = block.strip().splitlines()
        number, *widths = map(int, header.split())
        w = spec.window
        where = (f"geometry {number}: {w.in_height}x{w.in_width}, kernel {w.kernel}, stride {w.stride}, dilation "
                 f"{w.dilation}, pads {w.pads}, tokens {spec.tokens_in[0]}, fold {spec.fold}, k {spec.factor('k')}"
                 f"{', holds the last position' if holds else ''}")
        counters = spec.process_kind.counters(spec, None)
        charged = {name: _unsigned_bits(m) if m else 0 for name, m in counters.items() if name in COUNTERS}
        assert dict(zip(COUNTERS, widths)) == charged, f"{where}: the cursor's widths differ from the charged"
        got = [tuple(map(int, line.split())) for line in lines]
        _compare(spec, got, _expected(spec, EXTRA if holds else 0), where)


@pytest.mark.unit
def test_the_counters_name_the_cursors_registers():
    """`SlidingWindow.counters` names the cursor's counters (ming_window.h), then the tile counters the template
    declares."""
    spec = _geometries(1)[0]
    names = list(spec.process_kind.counters(spec, None))
    assert names[:len(COUNTERS)] == COUNTERS
    assert names[len(COUNTERS):] == ["ic_tile", "oc_tile"]


def test_the_cursor_steps_through_the_loops_positions(tmp_path):
    _check_output(_run(("-std=c++14", "-O1", "-DMING_CSIM"), str(tmp_path)))


def test_the_cursor_as_synthesis_compiles_it(tmp_path):
    """Without MING_CSIM: ap_uint registers (a stand-in of Vitis's ap_int.h) and ming::Zero constants."""
    (tmp_path / "ap_int.h").write_text(AP_INT_STAND_IN)
    _check_output(_run(("-std=c++14", "-O1", "-w"), str(tmp_path)))


def test_a_counter_of_range_zero_is_the_constant_zero(tmp_path):
    """ming::Counter<0> holds no register: its updates compile to nothing, and C-simulation ends where one would
    make it anything but 0."""
    source = tmp_path / "zero.cpp"
    source.write_text('#include <cstdio>\n#include "ming_widths.h"\n'
                      "int main(int argc, char**) {\n"
                      "  ming::Counter<0> zero = 0;\n  ming::Counter<1> one = 0;\n"
                      "  static_assert(ming::Counter<0>::width == 0 && ming::Counter<1>::width == 1, \"widths\");\n"
                      "  zero = 0;\n  one++;\n"
                      "  std::printf(\"%d %d\\n\", static_cast<int>(zero), static_cast<int>(one));\n"
                      "  if (argc > 1) zero++;\n  return 0;\n}\n")
    binary = tmp_path / "zero"
    subprocess.run(["g++", "-std=c++14", "-DMING_CSIM", f"-I{TEMPLATES}", str(source), "-o", str(binary)], check=True)
    assert subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout == "0 1\n"
    run = subprocess.run([str(binary), "more"], capture_output=True, text=True)
    assert run.returncode != 0 and "does not fit the constant 0" in run.stderr


@pytest.mark.unit
def test_the_geometries_cover_the_grid():
    geometries = [(s.window, s.tokens_in[0], s.fold) for s in _geometries()]
    assert {w.kernel[0] for w, _, _ in geometries} == {1, 2, 3, 4, 5}
    assert {w.stride[0] for w, _, _ in geometries} == {1, 2, 3}
    assert {w.dilation[1] for w, _, _ in geometries} == {1, 2}
    assert {p for w, _, _ in geometries for p in w.pads} == {0, 1, 2}
    assert {t for _, t, _ in geometries} == {1, 2, 3}
    assert any(w.padded_width == 1 for w, _, _ in geometries)
