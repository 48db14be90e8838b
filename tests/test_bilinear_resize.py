"""BilinearResize (TFLite's RESIZE_BILINEAR, LiteRT's reference_ops::ResizeBilinearInteger) as a `bilinear` process,
over graphs built by hand in the IR with the tables of LiteRT's integer rule (`litert_axis`): the C-simulation equals
`ming reference` value for value, the emitted loop moves every token at the iteration its loop description says
(what `ming simulate` and the FIFO sizing step through), its registers are as narrow as their ranges, and the
process costs what its datapath and buffers say.

The numbers checked, from the geometry and the tables alone (a (C, H, W) map in, (C, OH, OW) out, L lanes, T = C / L
tokens per pixel, rows[y] = (y0, y1, wy0, wy1)):

* iterations: (H * W + OH * OW) * T: before output row y the input rows up to y1 are read (a token per iteration,
  nothing written), then its OW * T tokens are written (nothing read); the rows no output row uses are read last. So
  output row y, pixel x, token t is written in iteration ((y1 + 1) W + y OW + x) T + t;
* the line buffer: [row parity][column parity][ceil(W / 2)][T][L]: four banks of ceil(W / 2) * T words of 8 L bits,
  each read once (an output token: x0 and x1 differ in parity) or written once (an input token) an iteration;
* the datapath (`ming::bilinear`, benchmarks/calibration/bilinear_lane.v, yosys 0.23 `synth_xilinx -family xcup`):
  per lane 3 DSP48E2 (two 9 x 11-bit and one 19 x 11-bit product) and 208 LUTs (primitives.json
  `bilinear_lane_dsp`), charged L times (LUTs times the HLS overhead 1.1);
* control: the rows still to read in a phase (0 .. the most read between two output rows), the output row and
  column, the input column and the token, besides the loop counter.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hand_graphs import (assert_concurrent_csim_with_sized_fifos, assert_traced_loop, conv, csim_checked, image,
                         lanes_schedule, map_graph, moves)
from ming_py import primitives, reference
from ming_py.array_layout import memory_cost
from ming_py.dataflow import Schedule
from ming_py.errors import MingError
from ming_py.frontends.tflite_fold import bilinear_tables
from ming_py.ir import BilinearResize, Concat, Graph, TensorInfo
from ming_py.process_spec import process_spec, loop_of, schedule_spec
from ming_py.kinds.base import control_counters
from ming_py.line_buffers import build_stream_graph
from ming_py.line_buffers.fifo import FifoPlan
from ming_py.simulate import simulate_schedule
from ming_py.storage import plan_arrays

LANE_DSP, LANE_LUT = 3, 208  # yosys's figures of one lane (ming_py/primitives.json "bilinear_lane_dsp")


# ---------------------------------------------------------------------------
# LiteRT's tables
# ---------------------------------------------------------------------------

def litert_axis(in_size: int, out_size: int, align_corners: bool = False, half_pixel_centers: bool = True):
    """The (i0, i1, w0, w1) of every output index along one axis, as ResizeBilinearInteger computes them (the
    frontend's `bilinear_tables`, checked against LiteRT itself in tests/test_tflite_ops.py)."""
    return bilinear_tables(in_size, out_size, align_corners, half_pixel_centers)


def litert_tables(h: int, w: int, out_h: int, out_w: int, align_corners: bool = False):
    return tuple(litert_axis(size, out, align_corners, not align_corners) for size, out in ((h, out_h), (w, out_w)))


@pytest.mark.unit
def test_the_tables_are_litert_s():
    """Spot values: half-pixel 2x (the border weights 1280 and -256), 3x, aligned corners, identity."""
    rows, _ = litert_tables(4, 4, 8, 8)
    assert rows[0] == (0, 0, 1280, -256) and rows[1] == (0, 1, 768, 256) and rows[-1] == (3, 3, 768, 256)
    assert litert_axis(2, 6)[:3] == ((0, 0, 1366, -342), (0, 0, 1025, -1), (0, 1, 684, 340))  # scale 341
    assert litert_axis(3, 5, align_corners=True, half_pixel_centers=False) == (
        (0, 0, 1024, 0), (0, 1, 512, 512), (1, 1, 1024, 0), (1, 2, 512, 512), (2, 2, 1024, 0))
    assert litert_axis(5, 5) == tuple((i, i, 1024, 0) for i in range(5))


# ---------------------------------------------------------------------------
# graphs built by hand
# ---------------------------------------------------------------------------

def alone(c: int, h: int, w: int, out_h: int, out_w: int, align_corners: bool = False, tables=None) -> Graph:
    """The graph input (C, H, W) -> BilinearResize -> the graph output (C, OH, OW)."""
    graph = map_graph(f"resize_{out_h}x{out_w}", (c, h, w), (c, out_h, out_w))
    rows, cols = tables or litert_tables(h, w, out_h, out_w, align_corners)
    graph.nodes = [BilinearResize("resize", "resize", "x", "y", rows, cols)]
    return graph


def between_convs(c_in: int, h: int, w: int, c: int, factor: int, c_out: int) -> Graph:
    """A decoder's upsampling: a 3x3 conv, BilinearResize by `factor` (half-pixel centres), a 1x1 conv."""
    graph = map_graph(f"between_{factor}", (c_in, h, w), (c_out, factor * h, factor * w))
    conv(graph, "before", "x", "p", c, kernel=3, pad=1, seed=1)
    graph.tensors["r"] = TensorInfo("r", (c, factor * h, factor * w), "i8")
    rows, cols = litert_tables(h, w, factor * h, factor * w)
    graph.nodes.append(BilinearResize("resize", "resize", "p", "r", rows, cols))
    conv(graph, "after", "r", "y", c_out, seed=2)
    return graph


def decoder_join(c: int, h: int, w: int, factor: int) -> Graph:
    """A U-Net decoder's shape: the input map (C, f H, f W) goes down (an f x f conv of stride f) and back up
    (BilinearResize by f), and is concatenated with itself (the skip branch)."""
    graph = map_graph(f"join_{factor}", (c, factor * h, factor * w), (2 * c, factor * h, factor * w))
    conv(graph, "down", "x", "p", c, kernel=factor, stride=factor, seed=3)
    graph.tensors["r"] = TensorInfo("r", (c, factor * h, factor * w), "i8")
    rows, cols = litert_tables(h, w, factor * h, factor * w)
    graph.nodes += [BilinearResize("resize", "resize", "p", "r", rows, cols),
                    Concat("join", "join", ("r", "x"), "y", 0)]
    return graph


def resize_spec(c, h, w, out_h, out_w, lanes, align_corners=False, tables=None):
    graph = build_stream_graph(alone(c, h, w, out_h, out_w, align_corners, tables))
    (process,) = graph.processes
    return process_spec(graph, process, (), (lanes,), (lanes,))


# ---------------------------------------------------------------------------
# the stream graph
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_a_bilinear_resize_node_is_one_process_carrying_its_tables():
    graph = alone(3, 2, 5, 4, 10)
    stream_graph = build_stream_graph(graph)
    (process,) = stream_graph.processes
    assert (process.kind, process.source, process.weights, process.window) == ("bilinear", "resize", None, None)
    assert (process.params.rows, process.params.cols) == (graph.nodes[0].rows, graph.nodes[0].cols)
    (inp,), (out,) = process.inputs, process.outputs
    assert (stream_graph.channels[inp].channels, stream_graph.channels[inp].height,
            stream_graph.channels[inp].width) == (3, 2, 5)
    assert (stream_graph.channels[out].channels, stream_graph.channels[out].height,
            stream_graph.channels[out].width) == (3, 4, 10)


@pytest.mark.unit
def test_an_output_that_is_not_the_tables_shape_is_refused_naming_the_layer():
    graph = alone(3, 2, 5, 4, 10)
    graph.tensors["y"] = TensorInfo("y", (3, 4, 9), "i8")
    with pytest.raises(MingError, match=r"^layer resize: bilinear resize to 4 x 10 pixels"):
        build_stream_graph(graph)


@pytest.mark.unit
@pytest.mark.parametrize("change, message", [
    (lambda rows, cols: (rows[:1] + ((0, 2, 512, 512),) + rows[2:], cols), r"row 1 reads y 0 and 2"),
    (lambda rows, cols: (rows, cols[:2] + ((1, 2, 500, 500),) + cols[3:]), r"column 2 has the weights 500 and 500"),
    (lambda rows, cols: (rows, ((0, 1, 1280, -256),) + cols[1:]), r"column 0 has the weights 1280 and -256"),
    (lambda rows, cols: (rows[:2] + ((0, 0, 1024, 0),) + rows[3:], cols), r"rows 1 and 2 go back"),
    (lambda rows, cols: (rows, cols[:-1] + ((4, 5, 1024, 0),)), r"column 9 reads x 4 and 5"),
])
def test_tables_the_line_buffer_cannot_serve_are_refused(change, message):
    rows, cols = change(*litert_tables(4, 5, 8, 10))
    graph = alone(2, 4, 5, 8, 10, tables=(rows, cols))
    with pytest.raises(MingError, match=r"^layer resize: bilinear resize of a 2 x 4 x 5 map: " + message):
        build_stream_graph(graph)


@pytest.mark.unit
def test_report_json_carries_the_tables_so_ming_simulate_rebuilds_the_loop():
    """report.json's node holds the tables ("resize": rows and cols), from which `spec_from_report` (what `ming
    simulate OUT` reads) rebuilds the process's spec and so its loop."""
    import json

    from ming_py.boards import load_board
    from ming_py.build import design
    from ming_py.process_spec import spec_from_report

    graph = alone(2, 3, 4, 7, 5, align_corners=True)
    schedule = Schedule(lanes={name: 2 for name in build_stream_graph(graph).channels})
    built = design(graph, load_board("kv260"), schedule)
    report = json.loads(built.files["report.json"])
    (node,) = [n for n in report["nodes"] if n["kind"] == "bilinear"]
    rows, cols = graph.nodes[0].rows, graph.nodes[0].cols
    assert node["resize"] == {"rows": [list(r) for r in rows], "cols": [list(c) for c in cols]}
    channels = {c["name"]: c for c in report["channels"]}
    (process,) = built.stream_graph.processes
    spec = spec_from_report(node, channels)
    assert spec == schedule_spec(built.stream_graph, process, schedule) and (spec.params.rows, spec.params.cols) == (rows, cols)
    assert loop_of(spec) == loop_of(schedule_spec(built.stream_graph, process, schedule))


# ---------------------------------------------------------------------------
# the datapath's widths (ming::bilinear): the extremes of its linear forms lie at the corners of the int8 box
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_every_intermediate_of_the_datapath_fits_its_declared_width():
    """top = v0 * 1024 + (v1 - v0) * w1 within 18 bits and its product within 19 for every w1 in [0, 1023] (and for
    w1 in [-1024, -1] where v1 = v0); sum = top * 1024 + (bottom - top) * w1 within 28 bits, its product within 29,
    and the rounded result an int8 (`ming_numerics.h`)."""
    corners = np.array([-128, 127])
    w = np.arange(0, 1024)[:, None, None]
    v0, v1 = corners[None, :, None], corners[None, None, :]
    product = (v1 - v0) * w
    top = v0 * 1024 + product
    assert -(1 << 18) <= product.min() and product.max() < 1 << 18
    assert -(1 << 17) <= top.min() and top.max() < 1 << 17
    extremes = np.array([-128 * 1024, 127 * 1024])  # of a row across
    t0, t1 = extremes[None, :, None], extremes[None, None, :]
    down = (t1 - t0) * w
    total = t0 * 1024 + down
    assert -(1 << 28) <= down.min() and down.max() < 1 << 28
    assert -(1 << 27) <= total.min() and total.max() < 1 << 27
    rounded = total + np.where(total > 0, 1 << 19, (1 << 19) - 1)
    assert -(1 << 27) <= rounded.min() and rounded.max() < 1 << 27
    assert (rounded >> 20).min() == -128 and (rounded >> 20).max() == 127
    # a negative weight only where the two values are one: the across (down) value is v0 * 1024 (top * 1024)


@pytest.mark.unit
def test_the_interpolation_across_then_down_is_litert_s_four_products():
    """The lerp form (v0 << 10) + (v1 - v0) w1 across, then down, rounded by floor((s + 2^19 - (s <= 0)) / 2^20),
    equals `reference.bilinear_resize` on random maps under LiteRT's tables (borders with negative weights
    included)."""
    rng = np.random.default_rng(5)
    for h, w, out_h, out_w, aligned in [(3, 4, 6, 8, False), (2, 3, 6, 9, False), (3, 3, 7, 5, True),
                                        (4, 4, 13, 11, False), (5, 6, 2, 3, False)]:
        rows, cols = litert_tables(h, w, out_h, out_w, aligned)
        x = rng.integers(-128, 128, (4, h, w)).astype(np.int64)
        expected = reference.bilinear_resize(x.astype(np.int8), rows, cols)
        y0, y1, _, wy1 = (np.array(v) for v in zip(*rows))
        x0, x1, _, wx1 = (np.array(v) for v in zip(*cols))

        def across(r):
            return x[:, r][:, :, x0] * 1024 + (x[:, r][:, :, x1] - x[:, r][:, :, x0]) * wx1

        top, bottom = across(y0), across(y1)
        total = top * 1024 + (bottom - top) * wy1[:, None]
        result = (total + np.where(total > 0, 1 << 19, (1 << 19) - 1)) >> 20
        assert (result == expected).all()


@pytest.mark.unit
def test_the_calibrated_lane_model_computes_litert_s_rule(tmp_path):
    """benchmarks/calibration/bilinear_lane.v (what `bilinear_lane_dsp` synthesized) simulated in Icarus Verilog:
    the four banks' values chosen by the parities and interpolated equal LiteRT's rounded sum of four products, on
    random and extreme values under the weights of LiteRT's tables (negative border weights with one index)."""
    from test_primitives import needs_iverilog, simulate

    if needs_iverilog.args[0]:
        pytest.skip(needs_iverilog.kwargs["reason"])
    rng = np.random.default_rng(11)
    weights = sorted({w for size, out in ((3, 6), (2, 6), (4, 13), (3, 7)) for *_, w in litert_axis(size, out)}
                     | {w for *_, w in litert_axis(4, 7, True, False)} | {0, 1, 512, 1023})
    count = 4096
    banks = rng.integers(-128, 128, (4, count))
    banks[:, :256] = np.where(rng.random((4, 256)) < 0.5, -128, 127)  # the extremes
    parities = rng.integers(0, 2, (4, count))  # top, bottom, left, right
    across, down = rng.choice(weights, count), rng.choice(weights, count)
    # a negative weight only where the two indices are one: the same bank, the same parity
    parities[3] = np.where(across < 0, parities[2], parities[3])
    parities[1] = np.where(down < 0, parities[0], parities[1])
    names = ("even_even", "even_odd", "odd_even", "odd_odd")
    fields = {name: (8, banks[i]) for i, name in enumerate(names)}
    fields |= {name: (1, parities[i]) for i, name in enumerate(("top_odd", "bottom_odd", "left_odd", "right_odd"))}
    fields |= {"across": (11, across), "down": (11, down)}
    ports = ", ".join(f".{name}({name})" for name in fields)
    (y,) = simulate(tmp_path, "bilinear_lane", fields, [f"  bilinear_lane dut(.clk(clk), {ports}, .y());"],
                    ["dut.y"], 2).T
    value = lambda row, column: banks[row * 2 + column, np.arange(count)]
    top, bottom, left, right = parities
    total = sum(value(r, c) * wy * wx for r, wy in ((top, 1024 - down), (bottom, down))
                for c, wx in ((left, 1024 - across), (right, across)))
    rounded = total + np.where(total > 0, 1 << 19, -(1 << 19))
    assert (y == np.sign(rounded) * (np.abs(rounded) >> 20)).all()


# ---------------------------------------------------------------------------
# the loop: what `ming simulate`, the FIFO sizing and the cost model step through
# ---------------------------------------------------------------------------

GEOMETRIES = [  # (C, H, W, OH, OW, lanes, aligned corners)
    (1, 2, 3, 4, 6, 1, False), (3, 3, 4, 6, 8, 1, False), (4, 3, 2, 6, 4, 2, False), (4, 2, 4, 4, 8, 4, False),
    (2, 2, 3, 6, 9, 1, False), (6, 2, 2, 6, 6, 3, False), (2, 3, 3, 12, 12, 2, False),  # 4x
    (2, 3, 4, 7, 5, 1, True), (4, 4, 3, 9, 7, 2, True), (2, 4, 5, 4, 5, 1, False),  # aligned corners; identity
    (2, 5, 6, 2, 3, 2, False), (1, 1, 1, 3, 2, 1, False),  # a downscale; a single pixel
]


def _geometry_spec(c, h, w, out_h, out_w, lanes, aligned):
    return resize_spec(c, h, w, out_h, out_w, lanes, aligned)


@pytest.mark.unit
@pytest.mark.parametrize("c, h, w, out_h, out_w, lanes, aligned", GEOMETRIES)
def test_the_loop_moves_every_token_once_in_order_one_per_iteration(c, h, w, out_h, out_w, lanes, aligned):
    loop = loop_of(_geometry_spec(c, h, w, out_h, out_w, lanes, aligned))
    t = c // lanes
    assert loop.iterations == (h * w + out_h * out_w) * t
    reads, writes = moves(loop, "reads"), moves(loop, "writes")
    assert len(reads) == h * w * t and len(writes) == out_h * out_w * t
    for moved in (reads, writes):
        assert all(a < b for a, b in zip(moved, moved[1:])) and moved[-1] < loop.iterations
    assert not set(reads) & set(writes)  # alternate phases: an iteration reads or writes
    assert loop.depth == 7


@pytest.mark.unit
@pytest.mark.parametrize("c, h, w, out_h, out_w, lanes, aligned", GEOMETRIES)
def test_each_output_token_is_written_when_its_rows_are_in(c, h, w, out_h, out_w, lanes, aligned):
    """Output row y, pixel x, token t is written in iteration ((y1 + 1) W + y OW + x) T + t, after input row y1
    (and so its four neighbours) has arrived, and while rows y0 and y1 are the last two rows read."""
    rows, cols = litert_tables(h, w, out_h, out_w, aligned)
    loop = loop_of(_geometry_spec(c, h, w, out_h, out_w, lanes, aligned))
    t = c // lanes
    reads, writes = moves(loop, "reads"), moves(loop, "writes")
    for index, written in enumerate(writes):
        pixel, token = divmod(index, t)
        y, x = divmod(pixel, out_w)
        y0, y1 = rows[y][:2]
        assert written == ((y1 + 1) * w + y * out_w + x) * t + token
        assert written > reads[(y1 * w + cols[x][1]) * t + token]
        rows_in = sum(1 for r in reads if r < written) // (w * t)
        assert rows_in == y1 + 1 and y0 >= rows_in - 2


@pytest.mark.unit
@pytest.mark.parametrize("c, h, w, out_h, out_w, lanes, aligned", GEOMETRIES)
def test_the_control_is_the_counters_of_the_loop_at_their_ranges(c, h, w, out_h, out_w, lanes, aligned):
    rows, _ = litert_tables(h, w, out_h, out_w, aligned)
    spec = _geometry_spec(c, h, w, out_h, out_w, lanes, aligned)
    iterations = loop_of(spec).iterations
    needed = [y1 + 1 for _, y1, _, _ in rows]
    most = max(needed[0], *(b - a for a, b in zip(needed, needed[1:])), h - needed[-1])
    assert control_counters(spec, None, iterations) == (iterations, most, out_h - 1, out_w - 1, w - 1, c // lanes - 1)


def expected_lines(c: int, w: int, lanes: int) -> tuple[int, int, int]:
    """(BRAM18K, LUT, words per bank) of the line buffer by docs/design-space.md's memory anchors: four banks of
    ceil(W / 2) * T words of 8 L bits, in LUTRAM when a bank holds at most 1,024 bits or 64 words (2 LUTs per 64
    bits of a RAM read and written), else in BRAM18K at the cheapest port shape."""
    words, word_bits = (w + 1) // 2 * (c // lanes), 8 * lanes
    if words == 1:
        return 0, 0, words
    if words * word_bits <= 1024 or words <= 64:
        return 0, 4 * 2 * math.ceil(words / 64) * word_bits, words
    per_bank = min(math.ceil(word_bits / width) * math.ceil(words / depth)
                   for width, depth in ((9, 2048), (18, 1024), (36, 512)))
    return 4 * per_bank, 0, words


@pytest.mark.unit
@pytest.mark.parametrize("c, w, lanes", [(2, 6, 1), (16, 64, 1), (64, 80, 8), (32, 40, 4), (8, 5, 8)])
def test_the_line_buffer_and_tables_cost_their_words(c, w, lanes):
    spec = resize_spec(c, 3, w, 6, 2 * w, lanes)
    arrays = plan_arrays(spec)
    assert list(arrays) == ["lines", "rows", "reads", "columns"]
    lines = arrays["lines"]
    bram, lut, words = expected_lines(c, w, lanes)
    assert lines.shape == (2, 2, (w + 1) // 2, c // lanes, lanes) and lines.banks == 4 and lines.words == words
    assert memory_cost({"lines": lines}) == (bram, 0, lut, 0)
    # the tables, a word per output row (rows: 13 bits in 16; reads: 8) and column (x0 and 12 bits in 16 or 32): in
    # LUTRAM, 1 LUT per 64 words and bit of a ROM, where small (the anchors above), else BRAM18K
    column_bits = 16 if 12 + max((w - 1).bit_length(), 1) <= 16 else 32
    for role, words, bits in (("rows", 6, 16), ("reads", 6, 8), ("columns", 2 * w, column_bits)):
        plan = arrays[role]
        assert (plan.words, plan.element_bits, plan.rom) == (words, bits, True)
        if words * bits <= 1024 or words <= 64:
            assert plan.memory == "lutram" and memory_cost({role: plan}) == (0, 0, math.ceil(words / 64) * bits, 0)
        else:
            assert plan.memory == "bram" and memory_cost({role: plan}) == (math.ceil(words * bits / 18432), 0, 0, 0)


@pytest.mark.unit
@pytest.mark.parametrize("lanes", [1, 4, 8])
def test_the_cost_model_charges_the_datapath_per_lane_buffers_and_counters(lanes):
    """`ilp/cost.py` charges yosys's lane (3 DSP48E2, 208 LUTs) once per lane, the buffers from the storage plan,
    the control from the counters, and the cycles of the loop."""
    from ming_py.ilp.cost import HLS_LUT_OVERHEAD, Choice, process_cost

    assert (primitives.dsp("bilinear_lane_dsp"), primitives.lut("bilinear_lane_dsp")) == (LANE_DSP, LANE_LUT)
    graph = build_stream_graph(alone(16, 4, 64, 8, 128))
    (process,) = graph.processes
    cost = process_cost(graph, process, Choice((), (lanes,), (lanes,)))
    parts = {(resource, name): amount for resource, name, amount in cost.parts}
    assert parts[("dsp", "logic")] == cost.dsp == LANE_DSP * lanes
    assert parts[("lut", "logic")] == pytest.approx(HLS_LUT_OVERHEAD * LANE_LUT * lanes)
    spec = process_spec(graph, process, (), (lanes,), (lanes,))
    bram, uram, lut, _ = memory_cost(plan_arrays(spec))
    assert (parts.get(("bram18k", "memory"), 0), parts.get(("lut", "memory"), 0)) == (bram, lut) and cost.uram == 0
    loop = loop_of(spec)
    assert loop.iterations == (4 * 64 + 8 * 128) * 16 // lanes
    counters = control_counters(spec, None, loop.iterations)
    assert parts[("lut", "control")] == pytest.approx(
        HLS_LUT_OVERHEAD * sum(primitives.counter_lut(max(m.bit_length(), 1)) for m in counters if m > 0))
    assert cost.cycles >= loop.cycles


# ---------------------------------------------------------------------------
# FIFOs: a join behind a stride-f conv and BilinearResize (a U-Net decoder) neither deadlocks nor over-waits
# ---------------------------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("factor", [2, 3])
def test_the_sized_skip_fifo_completes_and_a_shallower_one_deadlocks(factor):
    """The join's output row y starts with the resize's, which waits for the row y1 of the stride-f conv, so for
    the input's rows up to f (y1 + 1) - 1, all of which the split has written to the skip meanwhile while the join
    has taken its rows before y: the skip must hold (f (y1 + 1) - y) rows of the input at the most. The FIFO sizing
    (from the loops' token moves) gives the skip a depth with which the simulation completes; that need completes
    too, one token less deadlocks."""
    graph = build_stream_graph(decoder_join(2, 3, 4, factor))
    assert "bilinear" in {p.kind for p in graph.processes}
    schedule = lanes_schedule(graph, 2)
    specs = {p.name: schedule_spec(graph, p, schedule) for p in graph.processes}
    plan = FifoPlan(graph, specs, {name: spec.depth for name, spec in specs.items()})
    depths = plan.depths(1)
    (split,) = [p for p in graph.processes if p.kind == "split"]
    skip = next(c for c in split.outputs if graph.channels[c].consumer == "join")
    rows, _ = litert_tables(3, 4, 3 * factor, 4 * factor)
    need = max(factor * (y1 + 1) - y for y, (_, y1, _, _) in enumerate(rows)) * graph.channels[skip].width \
        * graph.channels[skip].channels // 2
    assert plan.required[skip] >= need

    def simulated(skip_depth):
        return simulate_schedule(graph, Schedule(schedule.processes, schedule.lanes, depths | {skip: skip_depth}))

    sized = simulated(depths[skip])
    assert sized.completed, sized.deadlock
    assert simulated(need).completed  # the need is exact: the sizing's loops are the emitted ones
    shallow = simulated(need - 1)
    assert not shallow.completed and any(skip in line for line in shallow.deadlock)


# ---------------------------------------------------------------------------
# the C-simulation
# ---------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("c, h, w, out_h, out_w, lanes, aligned", [
    (3, 3, 4, 6, 8, 1, False), (4, 3, 5, 6, 10, 2, False),  # 2x, half-pixel centres
    (6, 2, 3, 6, 9, 3, False), (2, 3, 3, 9, 9, 1, False),  # 3x
    (2, 3, 4, 7, 5, 1, True), (4, 4, 3, 9, 7, 4, True),  # aligned corners (tables not periodic)
    (2, 4, 5, 4, 5, 2, False),  # identity
    (2, 5, 6, 2, 3, 1, False), (1, 1, 3, 2, 6, 1, False),  # a downscale; a single row
])
def test_csim_equals_the_reference_alone(tmp_path, c, h, w, out_h, out_w, lanes, aligned):
    graph = alone(c, h, w, out_h, out_w, aligned)
    x = image(graph, seed=out_h * 10 + lanes)
    expected = reference.run(graph, x)["y"]
    schedule = Schedule(lanes={name: lanes for name in build_stream_graph(graph).channels})
    y = csim_checked(graph, tmp_path / "out", x, schedule)
    assert y.dtype == expected.dtype == np.int8 and y.shape == expected.shape == (1, c, out_h, out_w)
    assert (y == expected).all()
    if (out_h, out_w) == (h, w):
        assert (expected == x).all()  # the identity tables copy


@pytest.mark.slow
@pytest.mark.parametrize("factor, lanes", [(2, 1), (2, 4), (3, 2)])
def test_csim_equals_the_reference_between_convs(tmp_path, factor, lanes):
    graph = between_convs(3, 3, 4, 4, factor, 2)
    x = image(graph, seed=factor)
    expected = reference.run(graph, x)["y"]
    y = csim_checked(graph, tmp_path / "out", x, lanes_schedule(build_stream_graph(graph), lanes) if lanes > 1 else None)
    assert (y == expected).all()


@pytest.mark.slow
@pytest.mark.parametrize("factor", [2, 3])
def test_concurrent_csim_of_the_join_with_sized_fifos_equals_the_reference(tmp_path, factor):
    """One thread per process over FIFOs of the sized depths: no deadlock, and the values of `ming reference`."""
    assert_concurrent_csim_with_sized_fifos(decoder_join(2, 3, 4, factor), tmp_path / "out")


@pytest.mark.slow
@pytest.mark.parametrize("c, h, w, out_h, out_w, lanes, aligned", [
    (3, 3, 4, 6, 8, 1, False), (4, 2, 3, 6, 9, 2, False), (2, 3, 4, 7, 5, 1, True), (2, 5, 6, 2, 3, 2, False)])
def test_the_emitted_loop_moves_tokens_when_the_loop_description_says(tmp_path, c, h, w, out_h, out_w, lanes,
                                                                      aligned):
    """Compiled with the port check, -DMING_TRACE_TOKENS and -DMING_CHECK_WIDTHS (tests/test_control_widths.py): no
    array bank or stream takes more accesses per iteration than it has ports, every stream read and write happens
    at the iteration `Loop.token_iterations` gives (the loop `ming simulate` steps through), ITERATIONS is the
    loop's iteration count, and every register is as wide as the values it held and as the cost model charges.
    The registers' next values stay within one add, compare, boolean combination and select of registers, but for
    the phase registers set at an output row's end from the `reads` ROM (an asynchronous LUTRAM read, no more)."""
    assert_traced_loop(alone(c, h, w, out_h, out_w, aligned), lanes, tmp_path / "out",
                       (h * w + out_h * out_w) * c // lanes, {"pending": {"other": 1}, "reading": {"other": 1}})