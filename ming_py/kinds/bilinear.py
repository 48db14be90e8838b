"""Bilinear resizing (TFLite's RESIZE_BILINEAR, `ir.BilinearResize`): output pixel (y, x) of a channel is LiteRT's
integer interpolation of the input pixels at rows y0, y1 = rows[y][:2] and columns x0, x1 = cols[x][:2], with the
weights rows[y][2:] and cols[x][2:] in 1/1024 (`reference.bilinear_resize`).

One token per iteration, in alternating phases: before output row y, the input rows up to y1 arrive (a read per
iteration, nothing written); then the OW * T tokens of output row y are written (a write per iteration, nothing
read). The tables make y1 + 1 (the rows an output row needs read) non-decreasing, and y1 <= y0 + 1, so rows y0 and
y1 are always the last two rows read: the line buffer keeps two rows, one per row parity, and each row in two
column banks (even and odd columns), `[row parity][column parity][ceil(W / 2)][T][lanes]`, a word per token. An
output token reads columns x0 and x1 = x0 or x0 + 1 of both rows: one read in each of the four banks (x0 and x0 + 1
differ in parity; where x1 = x0 the value is read once), a write goes to one bank: every bank has one access per
iteration at most. The rows left after the last output row (those no output row uses) are read at the end.

The tables are ROMs indexed by the output row and column (`rows`: the parities of y0 and y1 and wy1; `reads`: the
input rows to read after the row; `columns`: x0, whether x1 = x0 + 1, and wx1). Each lane computes `ming::bilinear`:
two interpolations across and one down, three products on DSP48E2, calibrated as `bilinear_lane_dsp` (yosys, per
lane: 3 DSP48E2 and 208 LUTs; the same datapath in fabric is `bilinear_lane_fabric`, 1,008 LUTs).

Iterations per image: (H * W + OH * OW) * T, T = C / lanes tokens per pixel."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ming_py import primitives
from ming_py.dataflow import KindParams
from ming_py.array_layout import ArrayPlan, Dim, array, spread
from ming_py.loops import Access, Position

from .base import DataMovement, one_lane_count, register

ONE = 1024  # the weights' unit
WEIGHT_BITS = 11  # wx1, wy1: [0, 1023], or [-1024, 1023] where both indices are one (signed)
DATAPATH = "bilinear_lane_dsp"  # the per-lane datapath's entry in ming_py/primitives.json
# cycles from an iteration's start to its write: the ROMs, the line buffer, two DSP48E2 multiply-adds of two
# stages each (across, then down), the rounding and the write
DEPTH = 7


def table_problem(table, size: int, what: str, axis: str) -> str:
    """What makes a row (or column) table unusable for a map of `size` rows (columns), or "" : every entry
    (i0, i1, w0, w1) within the map with i1 = i0 or i0 + 1, w0 + w1 = 1024, w1 in [0, 1023] (in [-1024, 1023]
    where i1 = i0: a border), i0 and i1 non-decreasing (rows: the line buffer keeps the last two rows read)."""
    if not table:
        return f"an empty {what} table"
    for index, entry in enumerate(table):
        if len(entry) != 4:
            return f"{what} {index}: (i0, i1, w0, w1) expected, found {entry}"
        i0, i1, w0, w1 = entry
        if not 0 <= i0 <= i1 < size or i1 - i0 > 1:
            return (f"{what} {index} reads {axis} {i0} and {i1}: both within 0 .. {size - 1}, the second the first "
                    "or the next")
        low = -ONE if i0 == i1 else 0
        if w0 + w1 != ONE or not low <= w1 < ONE:
            return (f"{what} {index} has the weights {w0} and {w1}: they must sum to {ONE} with the second in "
                    f"[{low}, {ONE - 1}]")
    for index, (earlier, later) in enumerate(zip(table, table[1:])):
        if later[0] < earlier[0] or later[1] < earlier[1]:
            return f"{what}s {index} and {index + 1} go back ({axis} {earlier[:2]} then {later[:2]})"
    return ""


Entry = tuple[int, int, int, int]


@dataclass(frozen=True)
class BilinearTables(KindParams):
    """The tables of `ir.BilinearResize`: per output row (y0, y1, wy0, wy1), per output column (x0, x1, wx0, wx1),
    each usable by the line buffer (`table_problem`) for a map as tall and wide as they read."""

    rows: tuple[Entry, ...]
    cols: tuple[Entry, ...]

    def __post_init__(self):
        problem = table_problem(self.rows, _extent(self.rows), "row", "y") or \
            table_problem(self.cols, _extent(self.cols), "column", "x")
        if problem:
            raise ValueError(f"bilinear tables: {problem}")

    def to_json(self) -> dict:
        return {"resize": {"rows": [list(r) for r in self.rows], "cols": [list(c) for c in self.cols]}}

    @classmethod
    def from_json(cls, node: dict) -> BilinearTables | None:
        resize = node.get("resize")
        if resize is None:
            return None
        return cls(*(tuple(tuple(int(v) for v in entry) for entry in resize[axis]) for axis in ("rows", "cols")))


def _extent(table) -> int:
    """The rows (columns) a table reads at most: its last entry's i1 + 1 (the entries do not go back)."""
    return max((entry[1] for entry in table if len(entry) == 4), default=0) + 1


@dataclass(frozen=True)
class BilinearValues:
    first_reads: int  # input rows read before output row 0
    most_reads: int  # the most input rows read in one reading phase
    distance: int  # `write_read_distance`
    weight_bits: int
    rows_type: str  # the C++ words of the `rows` and `columns` ROMs (`table_words`)
    columns_type: str


def tables(spec):
    """The (rows, cols) tables of a bilinear process's spec."""
    if spec.params is None:
        raise ValueError("a bilinear process needs its row and column tables (BilinearTables)")
    return spec.params.rows, spec.params.cols


def reads_after(spec) -> tuple[int, tuple[int, ...]]:
    """The input rows read before output row 0, and after each output row (the last: the rows no output row
    uses): row y needs rows 0 .. y1 read."""
    rows, _ = tables(spec)
    height = spec.inputs[0][1]
    needed = [y1 + 1 for _, y1, _, _ in rows]
    return needed[0], tuple(b - a for a, b in zip(needed, needed[1:])) + (height - needed[-1],)


def write_read_distance(spec) -> int:
    """The fewest iterations between a token's store in the line buffer and its first read: column c of the last
    row read before an output row is stored (W - c) T - t iterations before the row's first write and read
    x T + t after it by the first output pixel x that reads it."""
    _, cols = tables(spec)
    width, tokens = spec.inputs[0][2], spec.tokens_in[0]
    first = {}
    for x, (x0, x1, _, _) in enumerate(cols):
        first.setdefault(x0, x)
        first.setdefault(x1, x)
    return tokens * min(x + width - c for c, x in first.items())


def field_bits(maximum: int) -> int:
    return max(maximum.bit_length(), 1)


def table_words(spec) -> dict[str, tuple[int, str, list[int]]]:
    """The ROMs of the tables, role -> (bits of a word: 8, 16 or 32, comment, a word per output row or column),
    fields from bit 0 up:
    rows: y0 odd (1 bit), y1 odd (1), wy1 (11, two's complement);
    reads: the input rows read after the output row (its own ROM: the phase registers take it as it is read);
    columns: wx1 (11, two's complement), x1 = x0 + 1 (1), x0."""
    rows, cols = tables(spec)
    _, after = reads_after(spec)
    weight = (1 << WEIGHT_BITS) - 1
    row_words = [y0 % 2 | y1 % 2 << 1 | (wy1 & weight) << 2 for y0, y1, _, wy1 in rows]
    column_words = [wx1 & weight | (x1 - x0) << WEIGHT_BITS | x0 << WEIGHT_BITS + 1 for x0, x1, _, wx1 in cols]
    column_bits = WEIGHT_BITS + 1 + field_bits(spec.inputs[0][2] - 1)
    word = lambda bits: next(size for size in (8, 16, 32) if bits <= size)
    return {"rows": (word(2 + WEIGHT_BITS), "per output row: y0 odd, y1 odd, wy1 (11 bits)", row_words),
            "reads": (word(field_bits(max(after))), "per output row: the input rows read after it", list(after)),
            "columns": (word(column_bits), "per output column: wx1 (11 bits), x1 = x0 + 1, x0", column_words)}


@register
class Bilinear(DataMovement):
    name = "bilinear"
    template = "bilinear"
    pipeline_label = "tokens"
    params_type = BilinearTables

    def lane_options(self, unroll, ins, outs, params, limit):
        return one_lane_count(ins, outs, limit)

    def pipeline_depth(self, terms):
        return DEPTH

    def positions(self, spec):
        (_, _, w), (_, out_h, out_w) = spec.inputs[0], spec.outputs[0]
        tokens = spec.tokens_in[0]
        reading = Position(tokens, (Access(0, 1, tokens),), (Access(),))  # an input pixel into the line buffer
        writing = Position(tokens, (Access(),), (Access(0, 1, tokens),))  # an output pixel from it
        first, after = reads_after(spec)
        yield first * w, reading
        for y in range(out_h):
            yield out_w, writing
            if after[y]:
                yield after[y] * w, reading

    def arrays(self, spec, epilogue, line_buffer_memory, constants):
        """The line buffer `[2][2][ceil(W / 2)][T][lanes]` (row parity and column parity: four banks, each read or
        written at most once an iteration; lanes packed into a token's word), and the ROMs `rows`, `reads` and
        `columns` (`table_words`), one entry each read an iteration; `reads` always in LUTRAM (an asynchronous read:
        it sets the phase registers at an output row's end)."""
        (_, _, w), tokens, lanes = spec.inputs[0], spec.tokens_in[0], spec.lanes_in[0]
        lines = array("lines", 8, (Dim(2, "complete", factor=2), Dim(2, "complete", factor=2), Dim((w + 1) // 2),
                                   Dim(tokens), spread(lanes, lanes, "reshape")), rom=False)
        plans = {role: array(role, bits, (Dim(len(values)),), rom=True)
                 for role, (bits, _, values) in table_words(spec).items()}
        if plans["reads"].memory != "register":  # read without latency, whatever its size
            plans["reads"] = ArrayPlan("reads", plans["reads"].element_bits, plans["reads"].dims, True, "lutram")
        return {"lines": lines} | plans | constants

    def constant_tables(self, spec, process):
        return {role: (f"uint{bits}_t", np.array(values, dtype=f"uint{bits}"), comment)
                for role, (bits, comment, values) in table_words(spec).items()}

    def logic_lut(self, spec):
        """The per-lane datapath (`ming::bilinear`), yosys's figure."""
        return spec.lanes_out[0] * primitives.lut(DATAPATH)

    def logic_dsp(self, spec):
        """Its three products per lane on DSP48E2."""
        return spec.lanes_out[0] * primitives.dsp(DATAPATH)

    def counters(self, spec, epilogue):
        """The input rows still to read in a reading phase, the output row, the output column, the input column
        and the token in its pixel."""
        (_, _, w), (_, out_h, out_w) = spec.inputs[0], spec.outputs[0]
        first, after = reads_after(spec)
        return {"pending": max(first, *after), "y": out_h - 1, "x": out_w - 1, "col": w - 1, "t": spec.tokens_in[0] - 1}

    def view_values(self, spec, process, lanes_in, lanes_out):
        first, after = reads_after(spec)
        words = {role: f"uint{bits}_t" for role, (bits, _, _) in table_words(spec).items()}
        return BilinearValues(first, max(first, *after), write_read_distance(spec), WEIGHT_BITS, words["rows"],
                              words["columns"])

    def describe(self, process, ins, outs, shapes):
        return f"{process.name} ({process.source}): bilinear resize: {shapes}"
