"""Weights streamed from DDR (`ming_py.weights_ddr`): the layout of weights_ddr.bin, the streamed loop of pointwise
and dense processes (each weight read once per image, a tile's fetch overlapping the previous tile's compute), the
pin, and builds whose streamed processes the C-simulation verifies bit-exactly, reading the weights through the
top function's m_axi ports, with the cycle simulation taking each streamed loop's cycles."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import numpy as np
import pytest

from emit_helpers import csim
from hand_graphs import assert_traced_loop, conv, image, map_graph
from ming_py import reference
from ming_py.boards import load_board
from ming_py.build import build
from ming_py.dataflow import ProcessSchedule, Schedule, Window
from ming_py.ilp.budget import Budget
from ming_py.ilp.explore import explore
from ming_py.ilp.solve import NoDesignFits
from ming_py.ilp.pins import Pins, resolve
from ming_py.line_buffers import build_stream_graph
from ming_py.errors import MingError
from ming_py.kinds.base import ProcessSpec
from ming_py.options import BuildOptions
from ming_py.process_spec import loop_of, schedule_spec
from ming_py.simulate import simulate_schedule
from ming_py.kinds.streamed import DDR_BURST_LATENCY, DDR_WORD_BYTES, DEPTH_MARGIN, streamed_problem, tile_words
from ming_py.weights_ddr import (DDR_MAX_BURST, DDR_READ_OUTSTANDING, WeightPorts, ddr_bytes_per_cycle, ddr_image,
                                 streamed_arrays, streamed_rows, weight_ports)

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "tiny_cnn.onnx")
# conv1 (3x3, 3 -> 8, padded with its input's zero point) in one output tile and 4 bands of 4 output rows, conv2
# (3x3, 8 -> 16), conv3 (pointwise 16 -> 16 on a 4x4 map, its map buffers in URAM) and fc (dense 64 -> 10) in 8
# and 5 output tiles
DDR_PINS = {"conv1.weights": "ddr", "conv1.unroll.oc": 8, "conv1.bands": 4, "conv2.weights": "ddr",
            "conv3.weights": "ddr", "conv3.unroll.oc": 2, "conv3.line_buffer": "uram", "fc.weights": "ddr",
            "fc.unroll.n": 2}
STREAMED = ["conv1", "conv2", "conv3", "fc"]


@pytest.mark.unit
def test_weights_ddr_bin_holds_each_row_in_whole_128_bit_words_part_after_part():
    rows = {"a": np.arange(2 * 20, dtype=np.int8).reshape(2, 20), "b": np.full((3, 16), -7, dtype=np.int8)}
    words = np.frombuffer(ddr_image(rows), dtype=np.int8).reshape(-1, DDR_WORD_BYTES)
    assert len(words) == 2 * 2 + 3
    assert list(words[1]) == list(rows["a"][0, 16:]) + [0] * 12 and list(words[2]) == list(rows["a"][1, :16])
    assert all(list(w) == [-7] * 16 for w in words[4:])
    parts = streamed_arrays(rows)
    assert [(p.process, p.first_word, p.words, p.words_per_row) for p in parts] == [("a", 0, 4, 2), ("b", 4, 3, 1)]


def _dense(n_unroll: int, ddr: bool) -> ProcessSpec:
    return ProcessSpec("dense", ((64, 1, 1),), ((40, 1, 1),), (("n", n_unroll), ("k", 8)), (8,), (n_unroll,),
                       ddr_weights=ddr)


@pytest.mark.unit
def test_a_streamed_dense_loop_takes_its_vector_then_overlaps_each_tiles_fetch_with_the_previous_tiles_compute():
    spec = _dense(4, True)
    loop = loop_of(spec)
    k_tiles, tiles = 64 // 8, 40 // 4
    assert tile_words(spec) == k_tiles * 2  # 32 weights a row: two 128-bit words
    assert tile_words(spec) * tiles * DDR_WORD_BYTES == 64 * 40  # every weight once per image, no padding here
    assert spec.depth == 17
    # tile 0's and each later tile's 16 words (tile 0's after a burst's latency), the last row (written at the
    # 16th word, read at the next phase's 8th iteration) landed with the margin: 16 - 8 + 17 + 2 iterations
    load, tile = DDR_BURST_LATENCY + 27, 27
    assert loop.iterations == load + (tiles - 1) * tile + k_tiles
    reads = loop.token_iterations("reads", 0, list(range(8)))
    writes = loop.token_iterations("writes", 0, list(range(tiles)))
    assert reads == list(range(8)) and writes[0] == load + k_tiles - 1
    assert all(b - a == tile for a, b in zip(writes, writes[1:]))
    assert loop.iterations > loop_of(_dense(4, False)).iterations  # the weights on chip need no fetch


@pytest.mark.unit
def test_a_streamed_pointwise_loop_writes_its_output_map_after_the_last_tile_in_pixel_order():
    graph = map_graph("pw", (16, 3, 3), (24, 3, 3))
    conv(graph, "pw", "x", "y", 24)
    stream_graph = build_stream_graph(graph)
    (process,) = stream_graph.processes
    schedule = Schedule({"pw": ProcessSchedule((("oc", 4), ("ic", 8)), (("weights", "ddr"),))},
                        {"input_to_pw": 8, "pw_to_output": 4})
    spec = schedule_spec(stream_graph, process, schedule)
    loop = loop_of(spec)
    pixels, tiles, ic_tiles = 9, 24 // 4, 16 // 8
    assert tile_words(spec) == 4 and spec.depth == 17
    # a tile's phase from its first word: its words, the last row landed with the margin (4 - 2 + 17 + 2); the
    # load's from a burst's latency
    computed = (DDR_BURST_LATENCY + 21) + (tiles - 1) * 21 + pixels * ic_tiles
    assert loop.iterations == computed + pixels * tiles  # every output read 22 iterations or more after its write
    writes = loop.token_iterations("writes", 0, list(range(pixels * tiles)))
    assert writes == list(range(computed, computed + pixels * tiles))


def _pointwise(shape: tuple[int, int, int], out_channels: int, unroll_oc: int, unroll_ic: int) -> ProcessSpec:
    c, h, w = shape
    return ProcessSpec("pointwise", (shape,), ((out_channels, h, w),), (("oc", unroll_oc), ("ic", unroll_ic)),
                       (unroll_ic,), (unroll_oc,), Window(c, h, w, out_channels, h, w), ddr_weights=True)


def _conv(shape: tuple[int, int, int], out_channels: int, unroll_oc: int, unroll_ic: int, kernel: int, stride: int,
          pad: int) -> ProcessSpec:
    c, h, w = shape
    h_out, w_out = (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1
    window = Window(c, h, w, out_channels, h_out, w_out, (kernel, kernel), (stride, stride), pads=(pad,) * 4)
    return ProcessSpec("conv", (shape,), ((out_channels, h_out, w_out),),
                       (("oc", unroll_oc), ("ic", unroll_ic), ("k", 1)), (unroll_ic,), (unroll_oc,), window,
                       ddr_weights=True)


def _phase_starts(loop) -> list[int]:
    """The first iteration of each tile's phase, then of the write phase."""
    return [loop.load + t * loop.tile for t in range(loop.tiles)] + [loop.load + (loop.tiles - 1) * loop.tile +
                                                                      loop.last]


def _tile_buffer_gaps(loop):
    """(write, first read) of every row of every tile in weight_tile: fetched a word an iteration from the start of
    the phase before its own (for tile 0 from the load's iteration DDR_BURST_LATENCY, the burst's latency passed),
    read from the iteration of its row in its own phase."""
    starts = _phase_starts(loop)
    for t in range(loop.tiles):
        fetch = DDR_BURST_LATENCY if t == 0 else starts[t - 1]
        for r in range(loop.rows):
            yield fetch + (r + 1) * loop.words_per_row - 1, starts[t] + r


def _output_buffer_gaps(loop):
    """(write, read) of every output of the output map: written as its pixel's reduction ends in its tile's phase,
    read in pixel order (each pixel's tiles in turn) after the write phase's lead."""
    starts = _phase_starts(loop)
    for p in range(loop.pixels):
        for t in range(loop.tiles):
            yield starts[t] + (p + 1) * loop.rows - 1, starts[-1] + loop.write_lead + p * loop.tiles + t


def _input_map_gaps(spec, loop):
    """(write, first read) of every input token the compute reads: taken one an iteration from the load's start,
    read in tile 0's phase in the template's order (a conv's: output pixel, input tile, window row, column)."""
    (_, h, w), tokens = spec.inputs[0], spec.tokens_in[0]
    if spec.kind == "pointwise":
        yield from ((k, loop.load + k) for k in range(loop.inputs))
        return
    win = spec.window
    first_read = {}
    for o in range(loop.pixels):
        oh, ow = divmod(o, win.out_width)
        for step in range(loop.rows):
            ic, kh, kw = step // win.window_size, step // win.kernel[1] % win.kernel[0], step % win.kernel[1]
            r, c = oh * win.stride[0] + kh - win.pads[0], ow * win.stride[1] + kw - win.pads[1]
            if 0 <= r < h and 0 <= c < w:
                first_read.setdefault((r * w + c) * tokens + ic, loop.load + o * loop.rows + step)
    yield from first_read.items()


def _small_streamed_specs():
    for h, w in [(1, 1), (1, 2), (2, 2), (2, 3), (3, 3)]:
        for c_in, c_out in [(1, 1), (2, 16), (16, 2), (16, 16), (64, 64), (64, 4)]:
            for u_oc in sorted({1, 2, c_out}):
                for u_ic in sorted({1, 4, c_in} & set(range(1, c_in + 1))):
                    if c_in % u_ic or c_out % u_oc:
                        continue
                    yield _pointwise((c_in, h, w), c_out, u_oc, u_ic)
                    if h > 1:
                        yield replace(_pointwise((c_in, h, w), c_out, u_oc, u_ic), bands=h)
                    for kernel, stride, pad in [(3, 1, 1), (3, 2, 1), (2, 1, 0)]:
                        if h + 2 * pad >= kernel and w + 2 * pad >= kernel and c_in <= 16:
                            yield _conv((c_in, h, w), c_out, u_oc, u_ic, kernel, stride, pad)
        for shape, kernel, stride, pad, bands in [((4, 8, 3), 3, 1, 1, 4), ((4, 9, 2), 3, 2, 1, 5),
                                                  ((2, 12, 2), 3, 1, 0, 5), ((4, 8, 2), 1, 1, 0, 8)]:
            for u_oc, u_ic in [(1, 1), (2, 4), (16, 2)]:
                if shape[0] % u_ic == 0:
                    yield replace(_conv(shape, 16, u_oc, u_ic, kernel, stride, pad), bands=bands)
        for n, k in [(2, 1), (16, 16), (4, 64)]:
            yield ProcessSpec("dense", ((k, h, w),), ((n, 1, 1),), (("n", n), ("k", k)), (k,), (n,),
                              ddr_weights=True)


def _ring_gaps(spec, loop):
    """A conv in bands: (earlier, later) iterations of every write after a read and read after a write of each
    address of its input map's ring, over one image: each band's new rows taken one token an iteration from its
    load's start (row r in ring row r % ring, the rows after the last any window reads not kept), its windows read
    in the template's order in every tile's phase."""
    bands, win = spec.map_bands, spec.window
    (_, h, w), tokens = spec.inputs[0], spec.tokens_in[0]
    starts = _phase_starts(loop)
    events, first_row = [], 0
    for b, taken in enumerate(bands.taken):
        start = b * loop.band
        for k in range(taken * w * tokens):
            row = first_row + k // (w * tokens)
            if row <= bands.kept:
                events.append((start + k, "write", (row % bands.ring, k // tokens % w, k % tokens)))
        first_row += taken
        for t in range(loop.tiles):
            for o in range(loop.pixels):
                oh, ow = b * bands.out_rows + o // win.out_width, o % win.out_width
                for step in range(loop.rows):
                    ic, kh, kw = step // win.window_size, step // win.kernel[1] % win.kernel[0], step % win.kernel[1]
                    r, c = oh * win.stride[0] + kh - win.pads[0], ow * win.stride[1] + kw - win.pads[1]
                    if 0 <= r < h and 0 <= c < w:
                        events.append((start + starts[t] + o * loop.rows + step, "read", (r % bands.ring, c, ic)))
    last: dict = {}
    for at, kind, address in sorted(events):
        before = last.get(address)
        if before is not None and before[1] != kind:
            yield before[0], at
        last[address] = (at, kind)


def _next_band_gaps(loop):
    """(last read in a band, write in the next band) of every address of a pointwise loop's map buffers, in bands:
    an input token read in the last tile's phase at its pixel's reduction, taken again in the next band's load; an
    output read in the write phase, written again in its tile's phase of the next band."""
    if loop.bands == 1:
        return
    starts = _phase_starts(loop)
    if not loop.band_inputs:  # pointwise (a conv's input map: `_ring_gaps`)
        for k in range(loop.inputs):
            yield starts[-2] + k, loop.band + k  # token k is read at iteration k of each tile's phase
    for p in range(loop.pixels):
        for t in range(loop.tiles):
            yield starts[-1] + loop.write_lead + p * loop.tiles + t, loop.band + starts[t] + (p + 1) * loop.rows - 1


@pytest.mark.unit
def test_no_value_of_a_streamed_loops_buffers_is_read_within_the_pipeline_depth_of_its_write():
    """The streamed templates tell Vitis HLS their buffers carry no dependence (macros.j2 `streamed_dependences`):
    on every small map, every value of the tile buffer, the input buffer and the output map is read the pipeline
    depth and its margin or more iterations after the iteration writing it (`StreamedLoop`), and in bands (a band
    of one row) every address is written again in the next band that many iterations or more after its last
    read."""
    checked = 0
    for spec in _small_streamed_specs():
        loop = spec.process_kind.streamed(spec)
        gaps = list(_tile_buffer_gaps(loop))
        if spec.kind == "conv" and spec.bands > 1:
            gaps += list(_ring_gaps(spec, loop)) + list(_output_buffer_gaps(loop)) + list(_next_band_gaps(loop))
        elif spec.kind != "dense":
            gaps += list(_input_map_gaps(spec, loop)) + list(_output_buffer_gaps(loop)) + list(_next_band_gaps(loop))
        else:
            gaps += [(k, loop.load + k) for k in range(loop.inputs)]
        assert loop.allowed_depth == spec.depth + DEPTH_MARGIN
        short = [(written, read) for written, read in gaps if read - written < loop.allowed_depth]
        assert not short, (spec, loop, short[:3])
        checked += len(gaps)
    assert checked > 100_000


def test_a_streamed_pointwise_process_reads_and_writes_at_its_loops_iterations(tmp_path):
    """The port check, the token trace and the counters' widths of a pointwise process streaming its weights, and
    the cycle simulation taking its loop's cycles (`hand_graphs.assert_traced_loop`)."""
    graph = map_graph("pw", (16, 3, 3), (24, 3, 3))
    conv(graph, "pw", "x", "y", 24)
    schedule = {"pw": ProcessSchedule((("oc", 2), ("ic", 2)), (("weights", "ddr"),), "fabric")}
    pixels, tiles, ic_tiles = 9, 12, 8  # each tile's compute longer than any fetch: the phases are the compute's
    depth = 15  # the pipeline's
    load = DDR_BURST_LATENCY + 8 - 8 + depth + DEPTH_MARGIN  # tile 0's 8 words after a burst's latency, landed
    iterations = load + (tiles - 1) * pixels * ic_tiles + pixels * ic_tiles + pixels * tiles
    assert_traced_loop(graph, 2, tmp_path / "out", iterations, processes=schedule)


@pytest.mark.parametrize("bands", [3, 2])
def test_a_streamed_pointwise_process_in_bands_runs_its_loop_once_per_band(tmp_path, bands):
    """In bands of rows (1 and 2 here), the process takes, computes and writes a band at a time, its weights
    fetched again for each band; the port check, the token trace, the counters' widths, the testbench's equality
    with the reference and the cycle simulation (`hand_graphs.assert_traced_loop`)."""
    rows = 6 // bands
    graph = map_graph("pw", (16, 6, 2), (24, 6, 2))
    conv(graph, "pw", "x", "y", 24)
    schedule = {"pw": ProcessSchedule((("oc", 2), ("ic", 2)), (("weights", "ddr"),), "fabric", bands=bands)}
    pixels, tiles, ic_tiles = rows * 2, 12, 8  # a band's pixels
    depth = 15
    load = DDR_BURST_LATENCY + 8 - 8 + depth + DEPTH_MARGIN
    tile = max(pixels * ic_tiles, 8 - 8 + depth + DEPTH_MARGIN)  # a band of 2 pixels: its tile's fetch is longer
    band = load + (tiles - 1) * tile + pixels * ic_tiles + pixels * tiles
    assert_traced_loop(graph, 2, tmp_path / "out", bands * band, processes=schedule)


def _window_then_strided():
    """A padded 3x3 conv on a 6x6 map, then a strided 1x1 conv."""
    graph = map_graph("two", (8, 6, 6), (8, 3, 3))
    conv(graph, "window", "x", "h", 8, kernel=3, pad=1)
    conv(graph, "strided", "h", "y", 8, stride=2)
    return build_stream_graph(graph)


@pytest.mark.unit
def test_weights_ddr_is_refused_where_no_streamed_loop_serves_it():
    stream_graph = _window_then_strided()
    with pytest.raises(MingError, match=r"window.weights=ddr: process window: .*\(unroll k=1\)"):
        resolve({"window.weights": "ddr", "window.unroll.k": 9}, stream_graph)
    with pytest.raises(MingError, match="strided.weights=ddr: .* stride 1"):
        resolve({"strided.weights": "ddr"}, stream_graph)
    assert resolve({"strided.weights": "bram"}, stream_graph).weights == {"strided": "bram"}


@pytest.mark.unit
@pytest.mark.parametrize("shape, kernel, stride, pad, bands, ring, taken, kept", [
    ((8, 16, 5), 3, 2, 1, 4, 8, (4, 4, 4, 4), 15),  # 5 rows for 2 strided windows, to a power of two
    ((8, 6, 5), 3, 1, 1, 3, 4, (3, 2, 1), 5),  # the first band reads a row further down than it has outputs
    ((8, 8, 4), 3, 2, 0, 3, 4, (3, 2, 3), 6),  # row 7 read by no window: taken by the last band, not kept
    ((8, 6, 5), 3, 1, 1, 1, 6, (6,), 5),  # one band: the whole map
])
def test_a_conv_in_bands_takes_the_rows_after_the_previous_bands_into_a_ring(shape, kernel, stride, pad, bands, ring,
                                                                               taken, kept):
    spec = replace(_conv(shape, 16, 2, 2, kernel, stride, pad), bands=bands)
    assert not streamed_problem(spec)
    assert (spec.map_bands.ring, spec.map_bands.taken, spec.map_bands.kept) == (ring, taken, kept)
    loop = spec.process_kind.streamed(spec)
    row_tokens = shape[2] * shape[0] // 2
    assert loop.band_inputs == (tuple(rows * row_tokens for rows in taken) if bands > 1 else ())
    assert loop.load >= max(taken) * row_tokens + loop.allowed_depth - 1  # every band's load the longest's
    assert spec.process_kind.arrays(spec, None, "bram", {})["in_map"].shape[0] == ring


@pytest.mark.unit
def test_bands_are_refused_where_no_banded_loop_serves_them():
    stream_graph = _window_then_strided()
    with pytest.raises(MingError, match="window.bands=2: bands serve a process whose weights stream from DDR; set "
                                        "window.weights=ddr too"):
        resolve({"window.bands": 2}, stream_graph)
    with pytest.raises(MingError, match="window.weights=ddr and window.bands=4: .*bands=4 does not divide the 6 "
                                        "output rows"):
        resolve({"window.weights": "ddr", "window.bands": 4}, stream_graph)
    with pytest.raises(MingError, match="window.bands=0: give the number of bands"):
        resolve({"window.weights": "ddr", "window.bands": 0}, stream_graph)
    assert resolve({"window.weights": "ddr", "window.bands": 3}, stream_graph).bands == {"window": 3}


@pytest.fixture(scope="module")
def ddr_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddr") / "out"
    design = build(EXAMPLE, out, BuildOptions(settings=dict(DDR_PINS)))
    return out, design


def test_pinned_ddr_weights_build_verified_through_the_m_axi_ports(ddr_build):
    out, design = ddr_build
    data = json.loads((out / "report.json").read_text())
    assert data["verification"]["equal"]
    storage = {n["name"]: n["schedule"]["storage"].get("weights") for n in data["nodes"]}
    assert [name for name in storage if storage[name] == "ddr"] == STREAMED
    image = (out / "hls" / "weights_ddr.bin").read_bytes()
    assert image == ddr_image(streamed_rows(design.stream_graph, design.schedule))
    described = data["totals"]["weights_ddr"]
    assert described["bytes"] == len(image) and [a["process"] for a in described["arrays"]] == STREAMED
    cpp = (out / "hls" / "tiny_cnn.cpp").read_text()
    for part in described["arrays"]:
        assert part["bundle"] == f"gmem_{part['port']}"
        assert (f"HLS_PRAGMA(INTERFACE mode=m_axi port={part['port']} bundle={part['bundle']} offset=slave "
                f"depth={part['words']} max_read_burst_length={DDR_MAX_BURST} "
                f"num_read_outstanding={DDR_READ_OUTSTANDING} max_write_burst_length=2 num_write_outstanding=1 "
                f"latency={DDR_BURST_LATENCY})") in cpp
        assert f"HLS_PRAGMA(INTERFACE mode=s_axilite port={part['port']} bundle=control)" in cpp
    assert "ap_ctrl_none" not in cpp and "tiny_cnn_weights.h" in cpp
    assert "fc_weights[" not in (out / "hls" / "tiny_cnn_weights.h").read_text()  # no ROM holds them
    settings = (out / "settings.yaml").read_text()
    # the folding file keeps the pins, with the bands (conv1's pinned, the others' whole maps; conv3's pinned map
    # buffers in URAM)
    bands = {n["name"]: n["schedule"].get("bands", 1) for n in data["nodes"] if n["name"] in STREAMED}
    assert bands == {"conv1": 4, "conv2": 1, "conv3": 1, "fc": 1}
    assert settings.count("  weights: ddr\n  bands: 1\n") == 3 and "  weights: ddr\n  bands: 4\n" in settings
    assert "  line_buffer: uram\n  weights: ddr\n  bands: 1\n\npool2" in settings
    # each streamed process buffers its whole input (and output) map, or a band of its rows
    whole, banded = [n for n in STREAMED if bands[n] == 1], [n for n in STREAMED if bands[n] > 1]
    report_md = (out / "report.md").read_text().replace("\n", " ")
    assert (f"The processes whose weights stream from DDR ({', '.join(whole)}) each buffer their whole input and "
            "output maps") in report_md
    assert ("Streaming their weights from DDR, " + ", ".join(f"{n} ({bands[n]} bands)" for n in banded) +
            " buffer a band of rows of their input and output maps") in report_md


def test_a_streamed_process_keeps_its_map_buffers_in_the_memory_its_schedule_names(ddr_build):
    """conv3's map buffers in URAM (pinned; either may sit in LUTRAM where small, its report counts the URAMs),
    every other streamed process's in BRAM or, small, in LUTRAM; the C++ binds each as its plan says."""
    from test_report_checks import function_body

    out, design = ddr_build
    data = json.loads((out / "report.json").read_text())
    cpp = (out / "hls" / "tiny_cnn.cpp").read_text()
    for node in data["nodes"]:
        if node["name"] not in STREAMED:
            continue
        body = function_body(cpp, node["cpp_name"])
        buffers = {b["role"]: b for b in node["buffers"]}
        maps = [buffers[role]["memory"] for role in ("in_map", "out_map")] if node["kind"] != "dense" else []
        for role, memory in zip(("in_map", "out_map"), maps):
            assert memory in (("uram", "lutram") if node["name"] == "conv3" else ("bram", "lutram")), (node["name"], role)
            assert f"BIND_STORAGE variable={role} type=ram_s2p impl={memory})" in body
        if node["name"] == "conv3":
            assert node["uram"] == maps.count("uram") >= 1 and node["schedule"]["storage"]["line_buffer"] == "uram"
    # a dense process's streamed loop buffers a vector, no map: a line buffer setting is refused in one line
    with pytest.raises(MingError, match=r"^fc.line_buffer: process fc \(dense\) has no line buffer$"):
        resolve({"fc.weights": "ddr", "fc.line_buffer": "uram"}, design.stream_graph)


def test_each_streamed_process_runs_the_pipelined_loop_its_report_names(ddr_build):
    from test_report_checks import function_body, pipelined_loops

    out, _ = ddr_build
    data = json.loads((out / "report.json").read_text())
    cpp = (out / "hls" / "tiny_cnn.cpp").read_text()
    for node in data["nodes"]:
        body = function_body(cpp, node["cpp_name"])
        pipeline = node["pipeline"]
        assert pipelined_loops(body) == [(pipeline["loop"], "ITERATIONS", str(pipeline["ii"]))], node["name"]
        assert f"constexpr int ITERATIONS = {pipeline['trip_count']};" in body, node["name"]


def test_run_hls_checks_each_streamed_loops_pipeline_depth_against_the_depth_its_buffers_allow(ddr_build, tmp_path):
    """Each streamed process's planned loop carries its allowed depth (the spec's depth and the margin): csynth's
    PipelineDepth within it goes on to export, one over it stops the script naming the process; an on-chip
    process's depth is not checked."""
    from tcl_stubs import Synthesis
    from test_report_checks import error_lines, planned_loops, synthesize

    out, design = ddr_build
    data = json.loads((out / "report.json").read_text())
    planned = {loop[0]: loop[4:] for loop in planned_loops((out / "hls" / "check_csynth.tcl").read_text())}
    names = {node["cpp_name"]: node["name"] for node in data["nodes"]}
    allowed = {}
    for function, depth in planned.items():
        spec = schedule_spec(design.stream_graph, design.stream_graph.process(names[function]), design.schedule)
        assert depth == ((str(spec.depth + DEPTH_MARGIN),) if spec.ddr_weights else ()), function
        allowed |= {function: spec.depth + DEPTH_MARGIN} if depth else {}
    assert sorted(names[f] for f in allowed) == sorted(STREAMED)
    run, calls = synthesize(out, tmp_path / "as_planned")
    assert run.returncode == 0, run.stderr
    assert "those whose weights stream from DDR within their pipeline depths" in run.stdout
    on_chip = next(f for f in planned if f not in allowed)
    deep, exact = list(allowed)[:2]
    synthesis = Synthesis(depth={deep: str(allowed[deep] + 1), exact: str(allowed[exact]), on_chip: "999"})
    run, calls = synthesize(out, tmp_path / "deep", synthesis)
    assert run.returncode != 0
    label = data["nodes"][list(names).index(deep)]["pipeline"]["loop"]
    (line,) = error_lines(run)[1:]
    assert line.startswith(f"{deep}: loop {label} at pipeline depth {allowed[deep] + 1}, deeper than the "
                           f"{allowed[deep]} its buffers allow (")
    assert "export_design" not in [c[0] for c in calls]


def test_the_cycle_simulation_takes_each_streamed_loops_cycles_without_deadlock(ddr_build):
    _, design = ddr_build
    simulated = simulate_schedule(design.stream_graph, design.schedule)
    assert simulated.completed and simulated.deadlock is None
    costs = design.solution.costs
    for name in STREAMED:
        process = design.stream_graph.process(name)
        loop = loop_of(schedule_spec(design.stream_graph, process, design.schedule))
        assert simulated.busy[name] == loop.cycles
    assert costs["conv3"].cycles == loop_of(schedule_spec(design.stream_graph, design.stream_graph.process("conv3"),
                                                          design.schedule)).cycles


def _wide_pair(channels: int = 64):
    """Two 1x1 convs of 2 x channels^2 weights each (8 KiB at 64 channels) on a 2x2 map."""
    graph = map_graph("wide", (channels, 2, 2), (channels, 2, 2))
    conv(graph, "up", "x", "h", 2 * channels)
    conv(graph, "down", "h", "y", channels, seed=1)
    return graph


def _weight_memories(solution) -> set[str]:
    return {schedule.storage_of("weights") for schedule in solution.schedule.processes.values()}


def test_the_ilp_streams_weights_from_ddr_only_where_they_outgrow_the_chip(tmp_path):
    """Within 24 BRAM18K, no URAM and 5,000 LUTs (no room for 64 KiB of weights in BRAM, URAM or LUTRAM; room for
    two m_axi read buffers) the ILP streams them, its estimate within 5 % of the simulated latency
    (docs/design-space.md's figure) and the C-simulation equal to `ming reference`; with the board's default budget
    every weight stays on chip."""
    graph = _wide_pair(128)
    stream_graph = build_stream_graph(graph)
    board, solution, simulated = explore(stream_graph, BuildOptions(limits={"bram18k": "24", "uram": "0",
                                                                           "lut": "5000"}))
    assert "ddr" in _weight_memories(solution)
    estimated = solution.totals["estimated_cycles"]
    assert simulated.completed and abs(simulated.cycles - estimated) <= 0.05 * simulated.cycles
    x = image(graph, seed=3)
    assert (csim(graph, tmp_path / "out", x, solution.schedule) == reference.run(graph, x)["y"]).all()
    _, roomy, _ = explore(stream_graph, BuildOptions())
    assert "ddr" not in _weight_memories(roomy)


def test_the_ilp_streams_weights_from_ddr_where_no_design_keeps_them_on_chip_though_the_chip_could_hold_them(tmp_path):
    """Within 30 BRAM18K (67.5 KiB, more than the 64 KiB of weights) no design keeps every weight on chip (a pin
    keeping them there proves it); the ILP, offered DDR after that proof, streams one process's and verifies. At
    40 BRAM18K a design keeps them on chip, and it is the one found without DDR."""
    from ming_py.weights_ddr import exceeds_chip

    stream_graph = build_stream_graph(_wide_pair(128))
    tight = {"bram18k": "30", "uram": "0", "lut": "5000"}
    board = load_board("kv260")
    assert not exceeds_chip(stream_graph, Budget.of(board, tight))
    with pytest.raises(NoDesignFits):
        explore(stream_graph, BuildOptions(limits=tight, settings={"up.weights": "bram", "down.weights": "bram"}))
    _, solution, simulated = explore(stream_graph, BuildOptions(limits=tight))
    assert _weight_memories(solution) == {"bram", "ddr"} and simulated.completed
    graph = _wide_pair(128)
    x = image(graph, seed=5)
    assert (csim(graph, tmp_path / "out", x, solution.schedule) == reference.run(graph, x)["y"]).all()
    _, roomy, _ = explore(stream_graph, BuildOptions(limits=tight | {"bram18k": "40"}))
    assert _weight_memories(roomy) == {"bram"}


def test_a_streamed_conv_process_reads_and_writes_at_its_loops_iterations(tmp_path):
    """A strided, padded 3x3 conv streaming its weights: its window read from the buffered map, padding where it
    leaves it (`hand_graphs.assert_traced_loop`, the C-simulation against `ming reference` included)."""
    graph = map_graph("cv", (8, 5, 5), (16, 3, 3))
    conv(graph, "cv", "x", "y", 16, kernel=3, stride=2, pad=1)
    schedule = {"cv": ProcessSchedule((("oc", 2), ("ic", 2), ("k", 1)), (("weights", "ddr"),), "fabric")}
    rows, depth = 4 * 9, 15  # input tiles x window; the pipeline's depth
    pixels_out, tiles = 9, 8
    load = 25 * 4 + depth + DEPTH_MARGIN - 1  # the window reads the map out of order: the last token landed first
    iterations = load + (tiles - 1) * pixels_out * rows + pixels_out * rows + pixels_out * tiles
    assert_traced_loop(graph, 2, tmp_path / "out", iterations, processes=schedule)


def test_a_streamed_conv_process_in_bands_reads_a_ring_of_the_rows_its_windows_read(tmp_path):
    """A strided, padded 3x3 conv in 4 bands of 2 output rows: each band takes 4 input rows into a ring of 8 (5
    rows for 2 strided windows, to a power of two), computes, writes (`hand_graphs.assert_traced_loop`, the
    C-simulation against `ming reference` included)."""
    graph = map_graph("cv", (8, 16, 5), (16, 8, 3))
    conv(graph, "cv", "x", "y", 16, kernel=3, stride=2, pad=1)
    schedule = {"cv": ProcessSchedule((("oc", 2), ("ic", 2), ("k", 1)), (("weights", "ddr"),), "fabric", bands=4)}
    rows, depth, tiles = 4 * 9, 15, 8  # input tiles x window; the pipeline's depth; output tiles
    pixels_out = 2 * 3  # a band's
    load = max(4 * 5 * 4 + depth + DEPTH_MARGIN - 1, DDR_BURST_LATENCY + rows)  # 4 rows of 5 pixels of 4 tokens
    band = load + (tiles - 1) * pixels_out * rows + pixels_out * rows + pixels_out * tiles
    assert_traced_loop(graph, 2, tmp_path / "out", 4 * band, processes=schedule)


@pytest.mark.parametrize("shape, kernel, stride, pad, bands", [
    ((8, 6, 5), 3, 1, 1, 3),  # rows taken 3, 2, 1 into a ring of 4
    ((8, 8, 4), 3, 2, 0, 3),  # the last input row read by no window: taken, not kept
    ((4, 7, 7), 3, 1, 0, 5),  # unpadded: 3, 1, 1, 1, 1 rows into a ring of 3
])
def test_every_band_geometry_of_a_streamed_conv_equals_the_reference(tmp_path, shape, kernel, stride, pad, bands):
    c, h, w = shape
    h_out, w_out = (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1
    graph = map_graph("cv", shape, (8, h_out, w_out))
    conv(graph, "cv", "x", "y", 8, kernel=kernel, stride=stride, pad=pad)
    schedule = {"cv": ProcessSchedule((("oc", 2), ("ic", 2), ("k", 1)), (("weights", "ddr"),), "fabric",
                                      bands=bands)}
    stream_graph = build_stream_graph(graph)
    spec = schedule_spec(stream_graph, stream_graph.processes[0],
                         Schedule(schedule, {name: 2 for name in stream_graph.channels}))
    assert spec.map_bands.ring < h and not streamed_problem(spec)
    assert_traced_loop(graph, 2, tmp_path / "out", loop_of(spec).iterations, processes=schedule)


# ---- The ILP's DDR candidates: latency rows per candidate, adapter cost, board rate, contradictory pins ----

def _chain(names=("up", "down", "last")):
    """A chain of 1x1 convs on a 2x2 map: 64 channels in, 128 after the first, 64 after the others."""
    graph = map_graph("chain", (64, 2, 2), (64, 2, 2))
    tensors = ["x", "h", "g"][:len(names)] + ["y"]
    for k, name in enumerate(names):
        conv(graph, name, tensors[k], tensors[k + 1], 128 if k == 0 else 64, seed=k)
    return build_stream_graph(graph)


def _forced(model, streamed: bool) -> tuple[dict[str, int], int]:
    """The design `model` picks (CBC) with process "down" forced to stream its weights or keep them on chip, and its
    objective."""
    import pulp

    ddr = [x for x, c in zip(model.pick["down"], model.options["down"]) if c.weights == "ddr"]
    assert ddr and len(ddr) < len(model.pick["down"])
    model.problem += pulp.lpSum(ddr) == int(streamed), "force_down"
    model.problem.solve(pulp.PULP_CBC_CMD(msg=0))
    picked = model.picked({x.name: x.value() for x in model.variables()})
    assert (model.options["down"][picked["down"]].weights == "ddr") == streamed
    return picked, round(pulp.value(model.problem.objective))


def _mixed_model(graph, pins):
    """The latency ILP of `graph` with every process offered its weights on chip and streamed from DDR."""
    from ming_py.ilp.budget import Budget
    from ming_py.ilp.candidates import _pareto, candidates
    from ming_py.ilp.cost import process_cost
    from ming_py.ilp.model import Model

    options, costs = {}, {}
    for p in graph.processes:
        choices = candidates(graph, p, pins, weight_memories=("bram", "ddr"))
        options[p.name], costs[p.name] = _pareto(choices, [process_cost(graph, p, c) for c in choices])
    return Model(graph, options, costs, Budget(dsp=10_000, bram18k=10_000, uram=0, lut=10_000_000), "latency")


@pytest.mark.unit
@pytest.mark.parametrize("streamed", [False, True])
def test_the_ilps_latency_is_the_estimate_of_its_design_whether_a_process_streams_or_not(streamed):
    """A process offered both weights on chip and from DDR between two slow ones, forced to each: the ILP's objective
    is `estimate` of the design it picks (the rows of the other kind of candidate relaxed), not the other kind's
    timing (a streamed process's first outputs wait for its whole input)."""
    stream_graph = _chain()
    slow = {f"{name}.unroll.{loop}": 1 for name in ("up", "last") for loop in ("oc", "ic")}
    model = _mixed_model(stream_graph, resolve(slow, stream_graph))
    picked, objective = _forced(model, streamed)
    assert objective == model.latency_of(picked)


def _big_m_of(model, name: str) -> float:
    """The largest coefficient of `name`'s streamed candidates in the rows that hold only where none is picked."""
    ddr = {x.name for x, c in zip(model.pick[name], model.options[name]) if c.weights == "ddr"}
    return max(abs(coefficient) for row, constraint in model.problem.constraints.items() if row.endswith(
        tuple(f"_chip_{j}" for j in range(10))) for x, coefficient in constraint.items() if x.name in ddr)


@pytest.mark.unit
@pytest.mark.parametrize("streamed", [False, True])
def test_the_ilp_for_designs_no_slower_than_a_design_keeps_its_latency_with_a_big_m_from_it(streamed):
    """`Model.latency_bound`: the model for designs no slower than a design with its weights on chip or streamed
    (forced, as above) gives that design the same objective, `estimate` of it, while its rows of the kind not picked
    are relaxed by that latency plus the process's largest figure, not by the latency of every design (a sum over
    every process's slowest candidate)."""
    from ming_py.ilp.model import Model, _largest_figure

    model = _mixed_model(_chain(), Pins())
    latency = model.latency_of(_forced(model, streamed)[0])

    tight = Model(model.graph, model.options, model.costs, model.budget, "latency", latency_bound=latency)
    assert _big_m_of(tight, "down") == latency + 1 + _largest_figure(tight.costs["down"]) < _big_m_of(model, "down")
    picked, objective = _forced(tight, streamed)
    assert objective == tight.latency_of(picked) == latency


@pytest.mark.unit
def test_the_latency_model_of_candidates_of_both_kinds_is_for_designs_no_slower_than_the_least_interval_design():
    """`objectives.latency_model`: where a process holds candidates of both kinds, the design whose slowest process
    is fastest is searched first and bounds the model (its search's status proves no design fits where none does);
    with one kind, no search and no bound."""
    from ming_py.ilp.objectives import latency_model

    stream_graph = _chain(("up", "down"))
    mixed = _mixed_model(stream_graph, Pins())
    model, interval = latency_model(stream_graph, mixed.options, mixed.costs, mixed.budget, None, 1_000)
    assert interval.status == "optimal"
    assert interval.value == max(mixed.costs[name][j].cycles for name, j in interval.picked.items())
    assert model.latency_bound == model.latency_of(interval.picked) > 0
    none = Budget(dsp=0, bram18k=0, uram=0, lut=0)
    assert latency_model(stream_graph, mixed.options, mixed.costs, none, None, 1_000)[1].status == "infeasible"
    on_chip = {name: [c for c in choices if c.weights != "ddr"] for name, choices in mixed.options.items()}
    costs = {name: [c for c, o in zip(mixed.costs[name], mixed.options[name]) if o.weights != "ddr"]
             for name in on_chip}
    model, interval = latency_model(stream_graph, on_chip, costs, mixed.budget, None, 1_000)
    assert interval is None and model.latency_bound is None


@pytest.mark.unit
def test_a_streamed_candidate_pays_its_m_axi_adapter_and_fetch_loop():
    """Its read buffer (64-word bursts, 4 in flight, 128-bit words: 4 BRAM18K of 512 x 36) beside its own arrays,
    and the adapter's and fetch loop's logic, which an on-chip candidate does not pay."""
    from ming_py.array_layout import memory_cost
    from ming_py.ilp.cost import HLS_LUT_OVERHEAD, Choice, choice_spec, process_cost
    from ming_py.storage import plan_arrays
    from ming_py.weights_ddr import ddr_port_cost, streamed_words

    stream_graph = build_stream_graph(_wide_pair())
    down = stream_graph.process("down")
    ones = (("oc", 1), ("ic", 1), ("k", 1))
    on_chip, streamed = (Choice(ones, (1,), (1,), weights=w) for w in ("bram", "ddr"))
    spec = choice_spec(stream_graph, down, streamed)
    port = ddr_port_cost(streamed_words(spec))
    parts = {(r, p): a for r, p, a in process_cost(stream_graph, down, streamed).parts}
    assert port.bram18k == 4
    assert parts["bram18k", "memory"] == memory_cost(plan_arrays(spec, down.epilogue, "bram", "ddr"))[0] + 4
    assert parts["lut", "ddr_port"] == pytest.approx(HLS_LUT_OVERHEAD * port.lut)
    assert not any(p == "ddr_port" for _, p, _ in process_cost(stream_graph, down, on_chip).parts)


@pytest.mark.unit
def test_the_ilps_ddr_rate_is_the_ports_the_block_design_gives_the_weights():
    """kv260: HP1..HP3 (HP0 is the DMA's), 3 x 16 B a cycle at 200 MHz, below the sustained 19.2 GB/s x 70 %
    (67.2 B a cycle); an Alveo card: the one bank link.cfg places every port in: on the u250 (4 DDR4 banks,
    76.8 GB/s together, 300 MHz) one bank's 70 % of 19.2 GB/s, 44.8 B a cycle, below its 512-bit port's 64."""
    kv260, u250 = load_board("kv260"), load_board("u250")
    assert kv260.clock_mhz == 200 and u250.clock_mhz == 300
    assert weight_ports(kv260) == WeightPorts(3, 48.0) and ddr_bytes_per_cycle(kv260) == 48.0
    assert weight_ports(u250).count == 1 and weight_ports(u250).bytes_per_cycle == pytest.approx(44.8)


def test_a_board_whose_ports_are_narrower_than_the_streamed_word_is_offered_no_ddr():
    """pynq-z2's 64-bit HP ports cannot deliver the streamed loop's 128-bit word a cycle: within a budget where
    the kv260 streams the weights (`test_the_ilp_streams_weights_from_ddr_only_where_they_outgrow_the_chip`) no
    design fits (each resource alone would: the weights leave BRAM only as banks small enough for LUTRAM, at
    schedules that take more LUT), and a pin to DDR is refused in one line."""
    stream_graph = build_stream_graph(_wide_pair(128))
    with pytest.raises(NoDesignFits, match=r"; every design needs at least .*; each fits the budget alone, but no "
                                           r"design fits them all at once: raise .*--bram .*--lut"):
        explore(stream_graph, BuildOptions(board="pynq-z2", limits={"bram18k": "24", "uram": "0", "lut": "5000"}))
    with pytest.raises(MingError, match=r"^down\.weights=ddr: board pynq-z2's 64-bit DDR ports are narrower than "
                                        r"the streamed loop's 128-bit word; keep process down's weights on chip$"):
        explore(stream_graph, BuildOptions(board="pynq-z2", settings={"down.weights": "ddr"}))


@pytest.mark.unit
def test_weights_from_ddr_beside_shared_requantizers_is_refused_naming_the_process():
    graph = map_graph("one", (16, 2, 2), (16, 2, 2))
    conv(graph, "pw", "x", "y", 16)
    with pytest.raises(MingError, match=r"^pw.weights=ddr and pw.requantizers=2: process pw "):
        resolve({"pw.weights": "ddr", "pw.requantizers": 2}, build_stream_graph(graph))
    assert resolve({"pw.weights": "ddr", "pw.requantizers": 0}, build_stream_graph(graph)).weights == {"pw": "ddr"}


@pytest.mark.unit
def test_the_ilp_is_offered_a_streamed_loops_map_buffers_in_uram_and_a_pin_places_them():
    """A streamed candidate of a pointwise process (no line buffer) comes with its map buffers in BRAM and in URAM,
    the URAM one taking no BRAM18K for them; an on-chip one only in BRAM. `line_buffer=uram` keeps the URAM ones,
    and is refused without weights=ddr or where the maps are small enough for LUTRAM at every schedule."""
    from ming_py.ilp.candidates import candidates
    from ming_py.ilp.cost import process_cost

    graph = map_graph("big", (64, 8, 8), (64, 8, 8))
    conv(graph, "pw", "x", "y", 64)
    stream_graph = build_stream_graph(graph)
    pw = stream_graph.process("pw")
    offered = candidates(stream_graph, pw, Pins(), uram=True, weight_memories=("bram", "ddr"))
    assert {c.line_buffer_in for c in offered if c.weights != "ddr"} == {"bram"}
    ones = (("oc", 1), ("ic", 1))
    bram, uram = (next(c for c in offered if c.unroll == ones and c.weights == "ddr" and c.line_buffer_in == m and
                       c.multipliers == "dsp") for m in ("bram", "uram"))
    in_bram, in_uram = (process_cost(stream_graph, pw, c) for c in (bram, uram))
    # 64 pixels x 64 tokens of one int8 lane, in and out: 2 BRAM18K of 2048 x 9 each, or 2 URAM of 4096 x 72
    assert (in_bram.bram18k - in_uram.bram18k, in_uram.uram - in_bram.uram) == (4, 2)
    pins = resolve({"pw.weights": "ddr", "pw.line_buffer": "uram"}, stream_graph)
    pinned = candidates(stream_graph, pw, pins, uram=True, weight_memories=("bram", "ddr"))
    assert pinned and {(c.weights, c.line_buffer_in) for c in pinned} == {("ddr", "uram")}
    assert all(process_cost(stream_graph, pw, c).uram for c in pinned)  # never a schedule whose maps left URAM
    with pytest.raises(MingError, match=r"^pw.line_buffer: process pw \(pointwise\) has no line buffer; the "
                                        r"setting places the map buffers .* set pw.weights=ddr too, or remove it$"):
        resolve({"pw.line_buffer": "uram"}, stream_graph)
    small = map_graph("small", (16, 2, 2), (16, 2, 2))
    conv(small, "pw", "x", "y", 16)
    with pytest.raises(MingError, match=r"^pw.line_buffer=uram: process pw's map buffers are small enough for "
                                        r"LUTRAM at every schedule"):
        resolve({"pw.weights": "ddr", "pw.line_buffer": "uram"}, build_stream_graph(small))


@pytest.mark.unit
@pytest.mark.parametrize("kernel, c_in, c_out", [(1, 16, 1024), (3, 8, 512)])
def test_a_map_buffer_pin_holds_where_only_the_output_map_is_large_enough_for_uram(kernel, c_in, c_out):
    """On a 4x4 map of few input channels the input map sits in LUTRAM, the output map in URAM: the schedule's
    `line_buffer` (what settings.yaml writes) is uram, and pinning it keeps those candidates, for a pointwise and
    for a conv (whose line buffer the pin would name without weights from DDR)."""
    from ming_py.ilp.candidates import candidates
    from ming_py.ilp.cost import storage_plan

    graph = map_graph("wide_out", (c_in, 4, 4), (c_out, 4, 4))
    conv(graph, "cv", "x", "y", c_out, kernel=kernel, pad=kernel // 2)
    stream_graph = build_stream_graph(graph)
    cv = stream_graph.process("cv")
    pins = resolve({"cv.weights": "ddr", "cv.line_buffer": "uram"}, stream_graph)
    pinned = candidates(stream_graph, cv, pins, uram=True, weight_memories=("bram", "ddr"))
    plans = [storage_plan(cv, c, stream_graph) for c in pinned]
    assert any(plan["in_map"] == "lutram" and plan["out_map"] == "uram" for plan in plans)
    assert all(plan["line_buffer"] == "uram" for plan in plans)
