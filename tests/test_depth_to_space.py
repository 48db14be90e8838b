"""DepthToSpace (TFLite's DEPTH_TO_SPACE, the phases of a transposed convolution) as a `depth_to_space` process,
over graphs built by hand in the IR: the C-simulation equals `ming reference` value for value, the emitted loop
moves every token at the iteration its loop description says (what `ming simulate` and the FIFO sizing step
through), its registers are as narrow as their ranges, and the row buffer costs what its size says.

The numbers checked, from the geometry alone (a (b*b*C, H, W) map in, (C, b*H, b*W) out, L lanes, T = C / L tokens
per output pixel):

* iterations: H * W * b * (2b - 1) * T: while an input row arrives, b*b*T per pixel (the b*T of dy = 0 written as
  they are read); then the b - 1 buffered output rows, T per output pixel, with nothing read;
* the row buffer: W * (b - 1) * b * T words of 8 * L bits (W * (b - 1) * b * C int8 values), one word per token;
  in LUTRAM when it holds at most 1,024 bits or 64 words (2 LUTs per 64 bits of a RAM read and written in one
  cycle, per 64 words), else in BRAM18K at the cheapest port shape (9 x 2048, 18 x 1024, 36 x 512)
  (docs/design-space.md's memory anchors, `ming_py.array_layout`);
* control: the token (0..T-1), the pixel in its block row (0..b-1), the buffered row (0..b-2, where b > 2) and the
  input pixel in its row (0..W-1), besides the loop counter.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hand_graphs import (assert_concurrent_csim_with_sized_fifos, assert_traced_loop, conv, csim_checked, image,
                         lanes_schedule, map_graph, moves)
from ming_py import reference
from ming_py.array_layout import memory_cost
from ming_py.dataflow import Schedule
from ming_py.errors import MingError
from ming_py.ir import Concat, DepthToSpace, Graph, TensorInfo
from ming_py.process_spec import process_spec, loop_of, schedule_spec
from ming_py.kinds.base import control_counters
from ming_py.line_buffers import build_stream_graph
from ming_py.line_buffers.fifo import FifoPlan
from ming_py.simulate import simulate_schedule
from ming_py.storage import plan_arrays

BRAM18K_SHAPES = ((9, 2048), (18, 1024), (36, 512))
LUTRAM_MAX_BITS, LUTRAM_DEPTH = 1024, 64


# ---------------------------------------------------------------------------
# graphs built by hand
# ---------------------------------------------------------------------------

def alone(c: int, h: int, w: int, block: int) -> Graph:
    """The graph input (block^2 C, H, W) -> DepthToSpace -> the graph output (C, block H, block W)."""
    graph = map_graph(f"d2s_{block}", (block * block * c, h, w), (c, block * h, block * w))
    graph.nodes = [DepthToSpace("d2s", "d2s", "x", "y", block)]
    return graph


def between_convs(c_in: int, h: int, w: int, c: int, block: int, c_out: int) -> Graph:
    """A transposed convolution as the frontend rewrites it: a 3x3 conv to block^2 C phase channels, DepthToSpace,
    then a 1x1 conv."""
    graph = map_graph(f"phases_{block}", (c_in, h, w), (c_out, block * h, block * w))
    conv(graph, "phases", "x", "p", block * block * c, kernel=3, pad=1, seed=1)
    graph.tensors["d"] = TensorInfo("d", (c, block * h, block * w), "i8")
    graph.nodes.append(DepthToSpace("d2s", "d2s", "p", "d", block))
    conv(graph, "mix", "d", "y", c_out, seed=2)
    return graph


def decoder_join(c: int, h: int, w: int, block: int) -> Graph:
    """A U-Net decoder's shape: the input map (C, block H, block W) goes down (a block x block conv of stride block)
    and back up (DepthToSpace), and is concatenated with itself (the skip branch)."""
    graph = map_graph(f"join_{block}", (c, block * h, block * w), (2 * c, block * h, block * w))
    conv(graph, "down", "x", "p", block * block * c, kernel=block, stride=block, seed=3)
    graph.tensors["d"] = TensorInfo("d", (c, block * h, block * w), "i8")
    graph.nodes += [DepthToSpace("d2s", "d2s", "p", "d", block), Concat("join", "join", ("d", "x"), "y", 0)]
    return graph


def d2s_spec(c: int, h: int, w: int, block: int, lanes: int):
    graph = build_stream_graph(alone(c, h, w, block))
    (process,) = graph.processes
    return process_spec(graph, process, (), (lanes,), (lanes,))


# ---------------------------------------------------------------------------
# the stream graph
# ---------------------------------------------------------------------------

@pytest.mark.unit
def test_a_depth_to_space_node_is_one_process_reading_and_writing_the_maps():
    graph = build_stream_graph(alone(3, 2, 5, 2))
    (process,) = graph.processes
    assert (process.kind, process.source, process.weights, process.window) == ("depth_to_space", "d2s", None, None)
    (inp,), (out,) = process.inputs, process.outputs
    assert (graph.channels[inp].channels, graph.channels[inp].height, graph.channels[inp].width) == (12, 2, 5)
    assert (graph.channels[out].channels, graph.channels[out].height, graph.channels[out].width) == (3, 4, 10)


@pytest.mark.unit
def test_an_output_that_is_not_the_blocks_of_the_input_is_refused_naming_the_layer():
    graph = alone(3, 2, 5, 2)
    graph.tensors["y"] = TensorInfo("y", (3, 4, 5), "i8")
    with pytest.raises(MingError, match=r"^layer d2s: depth to space with block 2 takes"):
        build_stream_graph(graph)


# ---------------------------------------------------------------------------
# the loop: what `ming simulate`, the FIFO sizing and the cost model step through
# ---------------------------------------------------------------------------

GEOMETRIES = [  # (C, H, W, block, lanes)
    (1, 2, 3, 2, 1), (3, 2, 3, 2, 1), (4, 3, 2, 2, 2), (4, 2, 4, 2, 4), (2, 2, 3, 3, 1), (4, 2, 2, 3, 2),
    (6, 1, 4, 3, 3), (2, 3, 3, 4, 2),
]


@pytest.mark.unit
@pytest.mark.parametrize("c, h, w, block, lanes", GEOMETRIES)
def test_the_loop_moves_every_token_once_in_order_one_per_iteration(c, h, w, block, lanes):
    spec = d2s_spec(c, h, w, block, lanes)
    loop = loop_of(spec)
    t = c // lanes
    assert loop.iterations == h * w * block * (2 * block - 1) * t
    reads, writes = moves(loop, "reads"), moves(loop, "writes")
    assert len(reads) == h * w * block * block * t == len(writes)
    for moved in (reads, writes):
        assert all(a < b for a, b in zip(moved, moved[1:])) and moved[-1] < loop.iterations
    assert loop.depth == 2


@pytest.mark.unit
@pytest.mark.parametrize("c, h, w, block, lanes", GEOMETRIES)
def test_each_output_token_is_written_in_or_after_the_iteration_that_reads_it(c, h, w, block, lanes):
    """Output token t of pixel (Y, X) is input token ((Y mod b) b + X mod b) T + t of pixel (Y div b, X div b); the
    tokens of block row dy = 0 are written in the very iteration that reads them, and a whole input row arrives
    before its buffered rows are written."""
    loop = loop_of(d2s_spec(c, h, w, block, lanes))
    t = c // lanes
    reads, writes = moves(loop, "reads"), moves(loop, "writes")
    for index, written in enumerate(writes):
        pixel, token = divmod(index, t)
        y_out, x_out = divmod(pixel, block * w)
        (y, dy), (x, dx) = divmod(y_out, block), divmod(x_out, block)
        source = (y * w + x) * block * block * t + (dy * block + dx) * t + token
        if dy == 0:
            assert written == reads[source]
        else:
            assert written > reads[((y + 1) * w - 1) * block * block * t + block * block * t - 1]


@pytest.mark.unit
@pytest.mark.parametrize("c, h, w, block, lanes", GEOMETRIES)
def test_the_control_is_the_counters_of_the_loop_at_their_ranges(c, h, w, block, lanes):
    spec = d2s_spec(c, h, w, block, lanes)
    iterations = loop_of(spec).iterations
    slot = (block - 2,) if block > 2 else ()
    assert control_counters(spec, None, iterations) == (iterations, c // lanes - 1, block - 1, *slot, w - 1)


def expected_row_buffer(c: int, w: int, block: int, lanes: int) -> tuple[str, int, int]:
    """(memory, BRAM18K, LUT) of the row buffer by docs/design-space.md's anchors."""
    words, word_bits = w * (block - 1) * block * (c // lanes), 8 * lanes
    assert words * word_bits == 8 * w * (block - 1) * block * c
    if words == 1:
        return "register", 0, 0
    if words * word_bits <= LUTRAM_MAX_BITS or words <= LUTRAM_DEPTH:
        return "lutram", 0, 2 * math.ceil(words / 64) * word_bits
    return "bram", min(math.ceil(word_bits / width) * math.ceil(words / depth) for width, depth in BRAM18K_SHAPES), 0


@pytest.mark.unit
@pytest.mark.parametrize("c, w, block, lanes", [
    (2, 3, 2, 1),     # 12 words: LUTRAM
    (4, 8, 3, 2),     # 96 words of 16 bits, 1,536 bits: BRAM18K, one 18 x 1024 bank
    (16, 64, 2, 1),   # 2,048 words of 8 bits: one 9 x 2048 BRAM18K
    (16, 64, 2, 8),   # 256 words of 64 bits: two 36 x 512 BRAM18K
    (32, 40, 2, 4),   # 640 words of 32 bits: 36 x 512 twice
    (8, 52, 4, 8),    # 624 words of 64 bits: 36 x 512, two wide and two deep
    (8, 4, 2, 8),     # 8 words of 64 bits: LUTRAM
])
def test_the_row_buffer_costs_its_words_by_the_memory_anchors(c, w, block, lanes):
    spec = d2s_spec(c, 2, w, block, lanes)
    arrays = plan_arrays(spec)
    assert list(arrays) == ["row_buffer"]
    plan = arrays["row_buffer"]
    assert plan.shape == (w, block - 1, block, c // lanes, lanes) and plan.banks == 1
    assert plan.words == w * (block - 1) * block * c // lanes and plan.word_bits == 8 * lanes
    memory, bram, lut = expected_row_buffer(c, w, block, lanes)
    assert plan.memory == memory
    assert memory_cost(arrays) == (bram, 0, lut, 0)


@pytest.mark.unit
def test_the_cost_model_charges_the_row_buffer_and_counters():
    """`ilp/cost.py` takes the row buffer from the storage plan (two 36 x 512 BRAM18K for 256 words of 64 bits) and
    the control from the counters, and the process's cycles from its loop."""
    from ming_py import primitives
    from ming_py.ilp.cost import HLS_LUT_OVERHEAD, Choice, process_cost

    graph = build_stream_graph(alone(16, 4, 64, 2))
    (process,) = graph.processes
    cost = process_cost(graph, process, Choice((), (8,), (8,)))
    parts = {(resource, name): amount for resource, name, amount in cost.parts}
    assert parts[("bram18k", "memory")] == cost.bram18k == 2
    assert ("lut", "memory") not in parts and cost.dsp == cost.uram == 0
    loop = loop_of(process_spec(graph, process, (), (8,), (8,)))
    assert loop.iterations == 4 * 64 * 2 * 3 * 2
    counters = (loop.iterations, 1, 1, 63)  # the loop counter, t, dx, the input pixel in its row
    assert parts[("lut", "control")] == pytest.approx(
        HLS_LUT_OVERHEAD * sum(primitives.counter_lut(max(m.bit_length(), 1)) for m in counters))
    assert cost.cycles >= loop.cycles


@pytest.mark.unit
def test_a_block_of_one_is_a_copy_with_no_buffer():
    spec = d2s_spec(4, 3, 3, 1, 2)
    assert plan_arrays(spec) == {} and loop_of(spec).iterations == 3 * 3 * 2
    assert control_counters(spec, None, 18) == (18,)


# ---------------------------------------------------------------------------
# FIFOs: a join behind a stride-b conv and DepthToSpace (a U-Net decoder) neither deadlocks nor over-waits
# ---------------------------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("block", [2, 3])
def test_the_sized_skip_fifo_completes_and_a_shallower_one_deadlocks(block):
    """The skip branch of the join waits while the stride-b conv and DepthToSpace take b input rows and the
    buffered rows follow: the FIFO sizing (line_buffers/fifo.py, from the loops' token moves) gives its head a depth
    with which the simulation completes. The skip must hold what the split writes before the join's first token,
    (b - 1) rows and b pixels of the input; with one token less the design deadlocks."""
    graph = build_stream_graph(decoder_join(2, 3, 4, block))
    assert "depth_to_space" in {p.kind for p in graph.processes}
    schedule = lanes_schedule(graph, 2)
    specs = {p.name: schedule_spec(graph, p, schedule) for p in graph.processes}
    plan = FifoPlan(graph, specs, {name: spec.depth for name, spec in specs.items()})
    depths = plan.depths(1)
    (split,) = [p for p in graph.processes if p.kind == "split"]
    skip = next(c for c in split.outputs if graph.channels[c].consumer == "join")
    # the join's first token waits for the conv's first output: b - 1 rows and b pixels of the input, all of which
    # the split has written to the skip meanwhile
    need = ((block - 1) * graph.channels[skip].width + block) * graph.channels[skip].channels // 2
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
@pytest.mark.parametrize("c, h, w, block, lanes", [(3, 2, 3, 2, 1), (4, 3, 2, 2, 4), (2, 2, 3, 3, 1), (4, 2, 2, 3, 2),
                                                   (2, 2, 3, 4, 2)])
def test_csim_equals_the_reference_alone(tmp_path, c, h, w, block, lanes):
    graph = alone(c, h, w, block)
    x = image(graph, seed=block * 10 + lanes)
    expected = reference.run(graph, x)["y"]
    schedule = Schedule(lanes={name: lanes for name in build_stream_graph(graph).channels})
    y = csim_checked(graph, tmp_path / "out", x, schedule)
    assert y.dtype == expected.dtype == np.int8 and y.shape == expected.shape
    assert (y == expected).all()
    # the reference is the one in the IR's definition: channel (dy b + dx) C + k of (Y, X) at (Y b + dy, X b + dx)
    x0 = x[0]
    for k, yy, xx in [(0, 0, 0), (c - 1, block * h - 1, block * w - 1), (c // 2, 1, block * w - 2)]:
        assert expected[0, k, yy, xx] == x0[((yy % block) * block + xx % block) * c + k, yy // block, xx // block]


@pytest.mark.slow
@pytest.mark.parametrize("block, lanes", [(2, 1), (2, 4), (3, 2)])
def test_csim_equals_the_reference_between_convs(tmp_path, block, lanes):
    graph = between_convs(3, 3, 4, 4, block, 2)
    x = image(graph, seed=block)
    expected = reference.run(graph, x)["y"]
    y = csim_checked(graph, tmp_path / "out", x, lanes_schedule(build_stream_graph(graph), lanes) if lanes > 1 else None)
    assert (y == expected).all()


@pytest.mark.slow
@pytest.mark.parametrize("block", [2, 3])
def test_concurrent_csim_of_the_join_with_sized_fifos_equals_the_reference(tmp_path, block):
    """One thread per process over FIFOs of the sized depths: no deadlock, and the values of `ming reference`."""
    assert_concurrent_csim_with_sized_fifos(decoder_join(2, 3, 4, block), tmp_path / "out")


@pytest.mark.slow
@pytest.mark.parametrize("c, h, w, block, lanes", [(3, 2, 3, 2, 1), (4, 2, 3, 2, 2), (2, 2, 3, 3, 1), (6, 2, 2, 3, 3)])
def test_the_emitted_loop_moves_tokens_when_the_loop_description_says(tmp_path, c, h, w, block, lanes):
    """Compiled with the port check, -DMING_TRACE_TOKENS and -DMING_CHECK_WIDTHS (tests/test_control_widths.py): no
    array bank or stream takes more accesses per iteration than it has ports, every stream read and write happens
    at the iteration `Loop.token_iterations` gives (the loop `ming simulate` steps through), ITERATIONS is the
    loop's iteration count, and every register is as wide as the values it held and as the cost model charges."""
    assert_traced_loop(alone(c, h, w, block), lanes, tmp_path / "out", h * w * block * (2 * block - 1) * c // lanes)