"""Sliding-window processes: conv, depthwise conv, max and average pooling (and the window geometry the
1x1 conv of `pointwise` shares).

The loop (one position per padded input pixel; `ming_py.process_spec`): a window process computes, during
position p, the window whose bottom-right element arrived at position p - 1 (so the window is complete
in the line buffer before the first MAC reads it) and has one trailing position after the last input.
Its fold is the sequence of iterations that computes one output position, output-channel tiles
outermost: conv (C_out/U_oc) x (C_in/U_ic) x (K/U_k), depthwise and pooling (C/U_c) x (K/U_k). An output
tile's accumulators are final in the last iteration of its inner reduction, where its token (U_oc lanes)
is requantized and written: FINN's sliding-window unit feeding its MVAU (one pipelined loop, no drain per
position) folded into a single process.

A grouped conv (G groups, F = C_out/G output and C_g = C_in/G input channels each) folds
(G/U_g) x (F/U_oc) x (C_g/U_ic) x (K/U_k): an output tile is U_oc channels of one group, or, with
U_g > 1, U_g whole groups (U_oc = F, U_ic = C_g), so that an output token holds consecutive channels
and each iteration reads one input token (U_g x U_ic lanes) of the tile's groups.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ming_py import primitives
from ming_py.array_layout import ArrayPlan, Dim, array, spread
from ming_py.dataflow import GROUP_LOOP, Window
from ming_py.loops import Access, Position

from .base import REQUANT_STAGES, ProcessSpec, ProcessKind, Unweighted, adder_tree, per_pixel_tokens, register
from .streamed import DDR_WORD_BYTES, MapBands, StreamedLoop, band_pixels, map_loop, words_per_row

# Where a MAC process's int8 products are computed: one per DSP48E2, in LUT fabric, or two that share
# their input per DSP48E2 (AMD WP486: x * (w_high * 2^18 + w_low) on the 27 x 18-bit multiplier).
MULTIPLIERS = ("dsp", "fabric", "dsp_pair")
MAC_DEPTH = 8  # stream read 1, buffer read 2, multiply 3, accumulate and write 2, before the adder tree
POOL_DEPTH = 4  # stream read 1, buffer read 2, write 1, before the comparator or adder tree


def mac_multipliers(unroll: dict[str, int], shared_input_loop: str | None) -> tuple[str, ...]:
    """DSPs or fabric; where an even number of lanes share each input (`shared_input_loop`), pairs take the
    place of one DSP per lane (half the DSPs for 10 LUTs a lane, always the better trade)."""
    if shared_input_loop is not None and unroll.get(shared_input_loop, 1) % 2 == 0:
        return ("dsp_pair", "fabric")
    return ("dsp", "fabric")


def window_tile(kernel: tuple[int, int], unroll_k: int) -> tuple[int, int]:
    """The rows x columns of the window that one k tile of `unroll_k` elements covers: the widest
    column run that divides both U_k and K_w, the rest in rows (any divisor of K_h * K_w splits so).
    The loop walks the window by tile-row and tile-column counters, so no index is a division."""
    columns = math.gcd(unroll_k, kernel[1])
    rows = unroll_k // columns
    assert kernel[0] % rows == 0, (kernel, unroll_k)
    return rows, columns


def window_order(kernel: tuple[int, int], unroll_k: int) -> list[int]:
    """The window elements (row * K_w + column) in loop order: k tiles in raster order of their
    top-left elements, within a tile rows then columns."""
    (k_h, k_w), (rows, columns) = kernel, window_tile(kernel, unroll_k)
    return [(tile_row + r) * k_w + tile_col + c
            for tile_row in range(0, k_h, rows) for tile_col in range(0, k_w, columns)
            for r in range(rows) for c in range(columns)]


def whole_groups(window: Window | None, unroll: dict[str, int]) -> bool:
    """Whether a grouped conv's tiles that span several groups (U_g > 1) hold whole groups, output and input
    (every other schedule passes)."""
    if unroll.get(GROUP_LOOP, 1) == 1:
        return True
    groups = window.groups
    return unroll.get("oc", 1) == window.out_channels // groups \
        and unroll.get("ic", 1) == window.in_channels // groups


def grouped_trips(w: Window) -> dict[str, int]:
    """A conv's groups (when there are several), output channels and input channels of one group."""
    trips = {"oc": w.out_channels // w.groups, "ic": w.in_channels // w.groups}
    return {GROUP_LOOP: w.groups} | trips if w.groups > 1 else trips


def grouped_lanes(unroll: dict[str, int], limit: int):
    """A conv's lanes: the input channels and output channels of its tile, times the groups it spans."""
    groups = unroll.get(GROUP_LOOP, 1)
    if groups * max(unroll["ic"], unroll["oc"]) <= limit or groups == 1:
        yield (groups * unroll["ic"],), (groups * unroll["oc"],)


def grouped_lanes_match(spec: ProcessSpec) -> bool:
    groups = spec.factor(GROUP_LOOP)
    return spec.lanes_in[0] == groups * spec.factor("ic") and spec.lanes_out[0] == groups * spec.factor("oc") \
        and whole_groups(spec.window, dict(spec.unroll))


def grouped_weight_rows(weights: np.ndarray, spec: ProcessSpec) -> np.ndarray:
    """[group tile][out tile][in tile][k tile] x [group][out][in][k] lanes."""
    f = spec.factor
    c_out, c_in, k = weights.reshape(weights.shape[0], weights.shape[1], -1).shape
    groups, grouped = spec.window.groups, f(GROUP_LOOP)
    tiled = weights.reshape(groups // grouped, grouped, c_out // groups // f("oc"), f("oc"), c_in // f("ic"),
                            f("ic"), k // f("k"), f("k"))
    return tiled.transpose(0, 2, 4, 6, 1, 3, 5, 7).reshape(spec.fold, -1)


def tiled_weight_rows(weights: np.ndarray, spec: ProcessSpec, outer: str, inner: str) -> np.ndarray:
    """[outer tile][inner tile] x [outer][inner] lanes of a two-loop (rows x columns) weight matrix."""
    rows, cols = weights.shape
    f = spec.factor
    tiled = weights.reshape(rows // f(outer), f(outer), cols // f(inner), f(inner))
    return tiled.transpose(0, 2, 1, 3).reshape(spec.fold, -1)


def grouped_layout(process) -> str:
    grouped = process.window is not None and process.window.groups > 1
    return "in channel of its group" if grouped else "in channel"


def groups_text(window: Window) -> str:
    return f", {window.groups} groups" if window.groups > 1 else ""


def mac_arrays(spec: ProcessSpec, buffers: dict[str, ArrayPlan], constants: dict) -> dict[str, ArrayPlan]:
    """A MAC process's arrays: its input buffers, the weights `[fold steps][lanes]` (one word per fold step
    holds every weight that step multiplies), its epilogue's constants and the accumulators (registers)."""
    lanes = math.prod(f for _, f in spec.unroll)
    weights = array("weights", 8, (Dim(spec.fold), spread(lanes, lanes, "reshape")), rom=True)
    return buffers | {"weights": weights} | constants | accumulators(spec)


def streamed_mac_arrays(spec: ProcessSpec, buffers: dict[str, ArrayPlan], constants: dict) -> dict[str, ArrayPlan]:
    """A MAC process whose weights stream from DDR (`ming_py.weights_ddr`): its input buffers, the ping-pong tile
    buffer `[2][reduction tiles][lanes]` (one half computed from while the other fills), the register a fetched row
    gathers its 128-bit words in, its epilogue's constants and the accumulators."""
    lanes = spec.macs
    tile = array("weight_tile", 8, (Dim(2, "complete", factor=2), Dim(spec.reduction_tiles),
                                    spread(lanes, lanes, "reshape")), rom=False)
    row = ArrayPlan("fetched_row", 8, (Dim(words_per_row(lanes) * DDR_WORD_BYTES),), rom=False, memory="register")
    return buffers | {"weight_tile": tile, "fetched_row": row} | constants | accumulators(spec)


def streamed_map_buffers(spec: ProcessSpec, pixel_dims: tuple[Dim, ...], memory: str) -> dict[str, ArrayPlan]:
    """The input map `[pixel dims][tokens][lanes]` and the output map `[pixels][output tiles][lanes]` (a band's, in
    bands) of a process whose weights stream from DDR (`ming_py.weights_ddr`), in `memory` (BRAM or URAM: the schedule's
    `line_buffer`) where they are too large for LUTRAM. Each is written in one phase of the loop and read in
    another, a word a cycle each way, so a URAM's two ports serve it as they serve a line buffer."""
    (c_in, _, _), lanes_in = spec.inputs[0], spec.lanes_in[0]
    _, pixels_out = band_pixels(spec)
    lanes_out = spec.lanes_out[0]
    in_map = array("in_map", 8, pixel_dims + (Dim(c_in // lanes_in), spread(lanes_in, lanes_in, "reshape")),
                   rom=False, large=memory)
    out_map = array("out_map", 8, (Dim(pixels_out), Dim(spec.tokens_out[0]), spread(lanes_out, lanes_out, "reshape")),
                    rom=False, large=memory)
    return {"in_map": in_map, "out_map": out_map}


def accumulators(spec: ProcessSpec) -> dict[str, ArrayPlan]:
    """The accumulators (registers) and, for shared requantizers, the ones latched for them and the int8 results
    they shift in."""
    lanes = spec.lanes_out[0]
    arrays = {"acc": ArrayPlan("acc", 32, (Dim(lanes),), rom=False, memory="register")}
    if spec.requant_steps > 1:
        arrays["held"] = ArrayPlan("held", 32, (Dim(lanes),), rom=False, memory="register")
        arrays["requantized"] = ArrayPlan("requantized", 8, (Dim(lanes),), rom=False, memory="register")
    return arrays


def window_positions(spec: ProcessSpec):
    tokens_in, tokens_out, fold = spec.tokens_in[0], spec.tokens_out[0], spec.fold
    tile = spec.reduction_tiles
    computing = Access(tile - 1, tile, tokens_out)

    def position(real: bool, emits_before: bool) -> Position:
        reads = tokens_in if real else 0
        iterations = max(reads, fold if emits_before else 0, 1)
        spacing = iterations // reads if reads else 1  # reads spread over the position, as a producer writes
        return Position(iterations, (Access(0, spacing, reads),), (computing if emits_before else Access(),))

    positions = {(real, emits): position(real, emits) for real in (False, True) for emits in (False, True)}
    for count, real, emits_before in position_kinds(spec.window, spec.kind == "pointwise"):
        yield count, positions[real, emits_before]


def window_emits(w: Window, pointwise: bool, row: int, col: int) -> bool:
    """Whether the window whose last element arrives at (row, col) is an output position (padded
    coordinates for a window, input coordinates for a 1x1 conv)."""
    if pointwise:
        top, left = row, col
    else:
        top, left = row - (w.kernel[0] - 1) * w.dilation[0], col - (w.kernel[1] - 1) * w.dilation[1]
    return (top >= 0 and left >= 0 and top % w.stride[0] == 0 and left % w.stride[1] == 0
            and top // w.stride[0] < w.out_height and left // w.stride[1] < w.out_width)


@functools.lru_cache(maxsize=256)
def position_kinds(w: Window, pointwise: bool) -> tuple[tuple[int, bool, bool], ...]:
    """The positions of a window loop in order, run-length: (count, a pixel arrives, the previous position
    ends an output window).

    Counted by row class x column class, never position by position: whether position (row, col) holds
    a pixel and whether it ends an output window are each a row condition and a column condition (see
    `_window_axis`), so a row's runs depend only on its row's two conditions and whether the row before
    ended on an output window; each such row class's runs come from the columns' runs once. The result
    has as many runs as the rows' runs together (O(rows) for stride 1), not one item per position."""
    rows, cols = (w.in_height, w.in_width) if pointwise else (w.padded_height, w.padded_width)
    row_real, row_emits = _window_axis(w, pointwise, 0, rows)
    col_real, col_emits = _window_axis(w, pointwise, 1, cols)
    # the columns 1.. of a row: (count, a pixel arrives in the column, the column before ends a window)
    col_runs: list[list] = []
    for col in range(1, cols):
        key = (col_real(col), col_emits(col - 1))
        if col_runs and col_runs[-1][1:] == list(key):
            col_runs[-1][0] += 1
        else:
            col_runs.append([1, *key])
    last_col_emits = col_emits(cols - 1)
    row_runs: dict[tuple[bool, bool, bool], tuple[tuple[int, bool, bool], ...]] = {}
    kinds: list[tuple[int, bool, bool]] = []

    def extend(runs) -> None:
        for count, real, emits_before in runs:
            if kinds and kinds[-1][1] == real and kinds[-1][2] == emits_before:
                kinds[-1] = (kinds[-1][0] + count, real, emits_before)
            else:
                kinds.append((count, real, emits_before))

    emits_before = False  # the last position of the row before ends a window
    for row in range(rows):
        real, emits = row_real(row), row_emits(row)
        key = (real, emits, emits_before)
        if key not in row_runs:
            runs = [(1, real and col_real(0), emits_before)]
            for count, col_is_real, col_emitted in col_runs:
                runs.append((count, real and col_is_real, emits and col_emitted))
            merged: list[tuple[int, bool, bool]] = []
            for run in runs:
                if merged and merged[-1][1:] == run[1:]:
                    merged[-1] = (merged[-1][0] + run[0], *run[1:])
                else:
                    merged.append(run)
            row_runs[key] = tuple(merged)
        extend(row_runs[key])
        emits_before = emits and last_col_emits
    extend(((1, False, emits_before),))  # the trailing position after the last input
    return tuple(kinds)


def _window_axis(w: Window, pointwise: bool, axis: int, size: int):
    """Of one axis (0 rows, 1 columns) of a window loop's positions: whether index i (< size) lies in the
    input map, and whether it ends an output window along this axis (`window_emits` is the conjunction
    of the two axes')."""
    if pointwise:
        lead, pad = 0, 0
    else:
        lead, pad = (w.kernel[axis] - 1) * w.dilation[axis], w.pads[axis]
    extent = (w.in_height, w.in_width)[axis]
    stride, outs = w.stride[axis], (w.out_height, w.out_width)[axis]

    def real(i: int) -> bool:
        return 0 <= i - pad < extent

    def emits(i: int) -> bool:
        start = i - lead
        return start >= 0 and start % stride == 0 and start // stride < outs

    return real, emits


def reduction_counters(spec: ProcessSpec) -> dict[str, int]:
    """The tile counters of a (grouped) conv's reduction: input tile, output tile and, with groups, the output
    tile in its group tile and the group tile's first input token."""
    w, tokens_in = spec.window, spec.tokens_in[0]
    ic_tiles = w.in_channels // w.groups // spec.factor("ic")
    counters = {"ic_tile": ic_tiles - 1, "oc_tile": spec.tokens_out[0] - 1}
    if w.groups > 1:
        counters |= {"oc_in_group": w.out_channels // w.groups // spec.factor("oc") - 1,
                     "group_token": tokens_in - ic_tiles}
    return counters


def line_buffer_rows(spec: ProcessSpec) -> int:
    """Rows of the line buffer: the window's rows, plus one when the row being written at a row's
    first column would still be read by the window of the previous row's last position (maps so
    narrow that the window there reaches back to column 0)."""
    w = spec.window
    rows = w.line_buffer_rows
    reaches_first_column = w.in_width - 1 + w.pads[3] - (w.kernel[1] - 1) * w.dilation[1] <= 0
    return rows + (w.pads[1] == 0 and reaches_first_column)


def line_buffer(spec: ProcessSpec, memory: str) -> dict[str, ArrayPlan]:
    """`[copies][rows][W_in][tokens][lanes]`: a token is one word (ARRAY_RESHAPE of the lanes), written into
    every copy; each of the U_k window elements an iteration reads comes from its own copy (complete
    partition: Vitis HLS does not prove that reads at run-time indices fall into different banks)."""
    w, lanes, copies = spec.window, spec.lanes_in[0], spec.factor("k")
    dims = (Dim(copies, "complete", factor=copies) if copies > 1 else Dim(1), Dim(line_buffer_rows(spec)),
            Dim(w.in_width), Dim(w.in_channels // lanes), spread(lanes, lanes, "reshape"))
    return {"line_buffer": array("line_buffer", 8, dims, rom=False, large=memory)}


@dataclass(frozen=True)
class WindowValues:
    line_buffer_rows: int
    window_tile: tuple[int, int]  # the window elements one iteration reads (`window_tile`)
    last_top_slot: int  # the greatest line buffer row a window's first row is in: (top - PAD_TOP) mod ROWS


class SlidingWindow(ProcessKind):
    """What every sliding-window kind shares: a line buffer, one position per padded input pixel, one lane
    count per token of a channel-wise kind."""

    needs_window = True
    line_buffer = True
    template = "window"
    pipeline_label = "window_positions"

    def lane_options(self, unroll, ins, outs, params, limit):
        yield (unroll["c"],), (unroll["c"],)

    def lanes_match(self, spec):
        return spec.lanes_in[0] == spec.factor("c") == spec.lanes_out[0]

    def static_banks(self, unroll_k, lanes_in):
        return True  # each unrolled window element from its own copy of the line buffer

    def tokens_in(self, spec):
        return per_pixel_tokens(spec)

    def positions(self, spec):
        return window_positions(spec)

    def view_values(self, spec, process, lanes_in, lanes_out):
        w = spec.window
        rows = line_buffer_rows(spec)
        return WindowValues(rows, window_tile(w.kernel, spec.factor("k")),
                            max((top * w.stride[0] - w.pads[0]) % rows for top in range(w.out_height)))

    def counters(self, spec, epilogue):
        """The counters of its cursor (ming_window.h `ming::WindowCursor`, by member name), then its tiles'."""
        w, tokens_in = spec.window, spec.tokens_in[0]
        values = self.view_values(spec, None, spec.lanes_in, spec.lanes_out)
        (tile_h, tile_w), rows = values.window_tile, values.line_buffer_rows
        position = {"pr": w.padded_height, "pc": w.padded_width - 1, "row_slot": rows - 1,
                    "row_phase": w.stride[0] - 1, "col_phase": w.stride[1] - 1}
        fold = {"step": spec.fold - 1, "token": tokens_in - 1, "gap": spec.fold // tokens_in - 1}
        window = {"top": (w.out_height - 1) * w.stride[0], "left": (w.out_width - 1) * w.stride[1],
                  "top_slot": values.last_top_slot, "row_offset": (w.kernel[0] - tile_h) * w.dilation[0],
                  "col_offset": (w.kernel[1] - tile_w) * w.dilation[1]}
        tiles = reduction_counters(spec) if self.name == "conv" else {"c_tile": tokens_in - 1}
        return position | fold | window | tiles

    def describe(self, process, ins, outs, shapes):
        w = process.window
        geometry = (f"{w.kernel[0]}x{w.kernel[1]}, stride {w.stride[0]}x{w.stride[1]}, "
                    f"dilation {w.dilation[0]}x{w.dilation[1]}, pads {'/'.join(map(str, w.pads))} (t/l/b/r)"
                    f"{groups_text(w)}")
        return f"{process.name} ({process.source}): {self.name} {geometry}: {shapes}"


@register
class Conv(SlidingWindow):
    name = "conv"
    mac = True
    shares_requantizer = True
    unrollable = ("oc", "ic", "k")  # output channels, input channels, window positions
    streamed_template = "conv_ddr"
    streamed_maps = True

    def trip_counts(self, window, ins, outs):
        return grouped_trips(window) | {"k": window.window_size}

    def streamed(self, spec: ProcessSpec) -> StreamedLoop:
        return map_loop(spec, in_order=False)  # its windows read the map out of the order it arrived

    def streamed_registers(self, spec):
        """The input pixel taken, the output pixel computed, its window's reduction; in bands, the ring rows of the
        input row taken and of the window's top, and the band."""
        w, (_, h, width), (_, h_out, w_out) = spec.window, spec.inputs[0], spec.outputs[0]
        taking = {"row": h - 1, "col": width - 1, "token": spec.tokens_in[0] - 1}
        window = {"oh": h_out - 1, "ow": w_out - 1, "top": (h_out - 1) * w.stride[0], "left": (w_out - 1) * w.stride[1],
                  "out_pixel": band_pixels(spec)[1] - 1}
        reduction = {"ic_tile": w.in_channels // spec.factor("ic") - 1, "kh": w.kernel[0] - 1, "kw": w.kernel[1] - 1,
                     "step": spec.reduction_tiles - 1}
        if spec.bands == 1:
            return taking | window | reduction
        bands = MapBands.of(spec)
        step = bands.out_rows * w.stride[0]
        window |= {"oh": bands.out_rows - 1, "top": (bands.out_rows - 1) * w.stride[0]}
        row_tokens = width * spec.tokens_in[0]
        most, later = max(bands.taken) * row_tokens, max(bands.taken[1:]) * row_tokens
        tokens = {"band_tokens": most, "next_tokens": most} | ({"later_tokens": later} if spec.bands > 2 else {})
        return taking | window | reduction | tokens | {"slot": bands.ring - 1, "band": spec.bands - 1,
                                                       "band_top": (spec.bands - 1) * step, "band_slot": bands.ring - 1,
                                                       "band_step": bands.ring - 1}

    def lane_options(self, unroll, ins, outs, params, limit):
        return grouped_lanes(unroll, limit)

    def lanes_match(self, spec):
        return grouped_lanes_match(spec)

    def multiplier_choices(self, unroll):
        return mac_multipliers(unroll, "oc")

    def summed_terms(self, spec):
        return spec.factor("ic") * spec.factor("k")

    def pipeline_depth(self, terms):
        return MAC_DEPTH + adder_tree(terms) + REQUANT_STAGES

    def macs(self, spec):
        return math.prod(f for _, f in spec.unroll)

    def macs_per_image(self, window, trips):
        return window.out_height * window.out_width * math.prod(trips.values())

    def reduction_tiles(self, spec):
        w = spec.window
        return (w.in_channels // w.groups // spec.factor("ic")) * (w.window_size // spec.factor("k"))

    def arrays(self, spec, epilogue, line_buffer_memory, constants):
        if spec.ddr_weights:
            width = spec.inputs[0][2]
            return streamed_mac_arrays(spec, streamed_map_buffers(spec, (Dim(MapBands.of(spec).ring), Dim(width)),
                                                                  line_buffer_memory), constants)
        return mac_arrays(spec, line_buffer(spec, line_buffer_memory), constants)

    def logic_lut(self, spec):
        return 0

    def weight_rows(self, weights, spec):
        return grouped_weight_rows(weights[..., window_order(spec.window.kernel, spec.factor("k"))], spec)

    def weights_layout(self, process):
        return f"[out channel][{grouped_layout(process)}][window position]"


@register
class Depthwise(SlidingWindow):
    name = "depthwise"
    mac = True
    shares_requantizer = True
    unrollable = ("c", "k")

    def trip_counts(self, window, ins, outs):
        return {"c": window.out_channels, "k": window.window_size}

    def multiplier_choices(self, unroll):
        return mac_multipliers(unroll, None)  # every lane multiplies its own channel

    def summed_terms(self, spec):
        return spec.factor("k")

    def pipeline_depth(self, terms):
        return MAC_DEPTH + adder_tree(terms) + REQUANT_STAGES

    def macs(self, spec):
        return math.prod(f for _, f in spec.unroll)

    def macs_per_image(self, window, trips):
        return window.out_height * window.out_width * trips["c"] * trips["k"]

    def reduction_tiles(self, spec):
        return spec.window.window_size // spec.factor("k")

    def arrays(self, spec, epilogue, line_buffer_memory, constants):
        return mac_arrays(spec, line_buffer(spec, line_buffer_memory), constants)

    def logic_lut(self, spec):
        return 0

    def weight_rows(self, weights, spec):
        return tiled_weight_rows(weights[..., window_order(spec.window.kernel, spec.factor("k"))], spec, "c", "k")

    def weights_layout(self, process):
        return "[channel][window position]"


class Pool(Unweighted, SlidingWindow):
    """Max and average pooling over a window: a comparator or adder tree per lane, no weights."""

    unrollable = ("c", "k")

    def trip_counts(self, window, ins, outs):
        return {"c": window.out_channels, "k": window.window_size}

    def summed_terms(self, spec):
        return spec.factor("k")

    def reduction_tiles(self, spec):
        return spec.window.window_size // spec.factor("k")

    def arrays(self, spec, epilogue, line_buffer_memory, constants):
        return line_buffer(spec, line_buffer_memory) | constants | accumulators(spec)


@register
class MaxPool(Pool):
    name = "maxpool"

    def logic_lut(self, spec):
        """A comparator and select per lane and window element of an iteration."""
        return spec.factor("c") * spec.factor("k") * primitives.lut("max_int8")

    def pipeline_depth(self, terms):
        return POOL_DEPTH + adder_tree(terms)


@register
class AvgPool(Pool):
    name = "avgpool"

    def logic_lut(self, spec):
        """An adder tree per lane over the window elements of an iteration, and its accumulator."""
        return spec.factor("c") * primitives.adder_tree_lut(spec.factor("k"))

    def pipeline_depth(self, terms):
        return POOL_DEPTH + adder_tree(terms) + REQUANT_STAGES


# ming::average_term: the 9 x 24-bit product 3, its rounding 1; ming::average_add: the sum 1, its rounding 1;
# ming::average_level: clamp 1, the 16 x 26-bit product 3, the threshold read 1, compare and zero point 1
AVERAGE_TERM_STAGES = 4
AVERAGE_ADD_STAGES = 2
AVERAGE_LEVEL_STAGES = 6


@register
class FloatAvgPool(Pool):
    """onnxruntime's AveragePool over windows (`ming_py.ir.WindowAverage`): per lane, each window element's
    float32 term and the chain of float32 additions over the whole window in row-major order, then the level
    its divisor's thresholds give. The window is unrolled whole: a partial sum carried from one iteration
    to the next would put a chain of roundings on the loop's recurrence."""

    name = "float_avgpool"
    unrollable = ("c",)

    def trip_counts(self, window, ins, outs):
        return {"c": window.out_channels}

    def fixed_unroll(self, window):
        return {"k": window.window_size}

    def logic_lut(self, spec):
        """Each element's term and the additions of the chain, per lane."""
        terms = spec.factor("k")
        return spec.factor("c") * (terms * primitives.lut("average_term")
                                   + (terms - 1) * primitives.lut("average_add"))

    def logic_dsp(self, spec):
        """The terms' 9 x 24-bit products."""
        return spec.factor("c") * spec.factor("k") * primitives.dsp("average_term")

    def pipeline_depth(self, terms):
        return POOL_DEPTH + AVERAGE_TERM_STAGES + AVERAGE_ADD_STAGES * (terms - 1) + AVERAGE_LEVEL_STAGES

    def arrays(self, spec, epilogue, line_buffer_memory, constants):
        return line_buffer(spec, line_buffer_memory) | constants
