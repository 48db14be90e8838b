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
  cycle, per 64 words), else in BRAM18K at the cheapest port shape (9 x 2048, 18 x 1024, 36 x 512) (README's
  memory anchors, `ming_py.array_layout`);
* control: the token (0..T-1), the pixel in its block row (0..b-1), the buffered row (0..b-2, where b > 2) and the
  input pixel in its row (0..W-1), besides the loop counter.
"""

from __future__ import annotations

import collections
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ming_py import reference
from ming_py.array_layout import memory_cost
from ming_py.dataflow import ProcessSchedule, Schedule
from ming_py.errors import MingError
from ming_py.ir import (AccessMap, AccRequant, AffineExpr, Arg, Concat, DepthToSpace, Graph, GraphInput, GraphOutput,
                        Kernel, Op, Operand, TensorInfo)
from ming_py.kernel import kernel_spec, loop_of, schedule_spec
from ming_py.kinds import kind_of
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

def _graph(name: str, input_shape, output_shape) -> Graph:
    graph = Graph(name)
    graph.tensors["x"] = TensorInfo("x", tuple(input_shape), "i8")
    graph.tensors["y"] = TensorInfo("y", tuple(output_shape), "i8")
    graph.inputs = [GraphInput("x", "x", (1, *input_shape), 0.05, 0, dtype="int8")]
    graph.outputs = [GraphOutput("y", "y", (1, *output_shape), 0.1, 0, dtype="int8")]
    return graph


def alone(c: int, h: int, w: int, block: int) -> Graph:
    """The graph input (block^2 C, H, W) -> DepthToSpace -> the graph output (C, block H, block W)."""
    graph = _graph(f"d2s_{block}", (block * block * c, h, w), (c, block * h, block * w))
    graph.nodes = [DepthToSpace("d2s", "d2s", "x", "y", block)]
    return graph


def _expr(num_dims: int, terms: dict[int, int]) -> AffineExpr:
    return AffineExpr(tuple(terms.get(d, 0) for d in range(num_dims)))


def conv(graph: Graph, name: str, source: str, output: str, out_channels: int, kernel: int = 1, stride: int = 1,
         pad: int = 0, seed: int = 0) -> None:
    """A convolution kernel as the frontend lifts one (dims O, OH, OW, I, KH, KW), requantized as onnxruntime's
    QLinearConv, appended to `graph`."""
    c, h, w = graph.shape_of(source)
    out_h, out_w = (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1
    rng = np.random.default_rng(seed)
    weights = f"{name}_w"
    graph.constants[weights] = rng.integers(-127, 128, (out_channels, c, kernel, kernel)).astype(np.int8)
    graph.tensors[output] = graph.tensors.get(output) or TensorInfo(output, (out_channels, out_h, out_w), "i8")
    dims = 6
    activation = Operand(source, AccessMap(dims, (_expr(dims, {3: 1}), _expr(dims, {1: stride, 4: 1}),
                                                  _expr(dims, {2: stride, 5: 1}))),
                         padding=((0, 0), (pad, pad), (pad, pad)) if pad else (), pad_value=0)
    weight = Operand(weights, AccessMap(dims, tuple(_expr(dims, {d: 1}) for d in (0, 3, 4, 5))))
    epilogue = AccRequant(bias=rng.integers(-500, 500, out_channels).astype(np.int32), x_scale=np.float32(0.05),
                          w_scale=np.full(out_channels, 0.01, np.float32), y_scale=np.float32(0.1) * c * kernel,
                          zero_point=0, channel_dims=(0,))
    graph.nodes.append(Kernel(name, name, (out_channels, out_h, out_w, c, kernel, kernel),
                              ("parallel",) * 3 + ("reduction",) * 3, (activation, weight),
                              Operand(output, AccessMap(dims, tuple(_expr(dims, {d: 1}) for d in (0, 1, 2)))),
                              Op("add", (Arg(2), Op("mul", (Arg(0), Arg(1))))), 0, epilogue, "conv"))


def between_convs(c_in: int, h: int, w: int, c: int, block: int, c_out: int) -> Graph:
    """A transposed convolution as the frontend rewrites it: a 3x3 conv to block^2 C phase channels, DepthToSpace,
    then a 1x1 conv."""
    graph = _graph(f"phases_{block}", (c_in, h, w), (c_out, block * h, block * w))
    conv(graph, "phases", "x", "p", block * block * c, kernel=3, pad=1, seed=1)
    graph.tensors["d"] = TensorInfo("d", (c, block * h, block * w), "i8")
    graph.nodes.append(DepthToSpace("d2s", "d2s", "p", "d", block))
    conv(graph, "mix", "d", "y", c_out, seed=2)
    return graph


def decoder_join(c: int, h: int, w: int, block: int) -> Graph:
    """A U-Net decoder's shape: the input map (C, block H, block W) goes down (a block x block conv of stride block)
    and back up (DepthToSpace), and is concatenated with itself (the skip branch)."""
    graph = _graph(f"join_{block}", (c, block * h, block * w), (2 * c, block * h, block * w))
    conv(graph, "down", "x", "p", block * block * c, kernel=block, stride=block, seed=3)
    graph.tensors["d"] = TensorInfo("d", (c, block * h, block * w), "i8")
    graph.nodes += [DepthToSpace("d2s", "d2s", "p", "d", block), Concat("join", "join", ("d", "x"), "y", 0)]
    return graph


def image(graph: Graph, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, graph.inputs[0].onnx_shape).astype(np.int8)


def d2s_spec(c: int, h: int, w: int, block: int, lanes: int):
    graph = build_stream_graph(alone(c, h, w, block))
    (process,) = graph.processes
    return kernel_spec(graph, process, (), (lanes,), (lanes,))


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


def _moves(loop, side: str) -> list[int]:
    tokens = sum(n * getattr(p, side)[0].count for n, p in loop.runs)
    return loop.token_iterations(side, 0, list(range(tokens)))


@pytest.mark.unit
@pytest.mark.parametrize("c, h, w, block, lanes", GEOMETRIES)
def test_the_loop_moves_every_token_once_in_order_one_per_iteration(c, h, w, block, lanes):
    spec = d2s_spec(c, h, w, block, lanes)
    loop = loop_of(spec)
    t = c // lanes
    assert loop.iterations == h * w * block * (2 * block - 1) * t
    reads, writes = _moves(loop, "reads"), _moves(loop, "writes")
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
    reads, writes = _moves(loop, "reads"), _moves(loop, "writes")
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
    """(memory, BRAM18K, LUT) of the row buffer by the README's anchors."""
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
    loop = loop_of(kernel_spec(graph, process, (), (8,), (8,)))
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

def _lanes_schedule(graph, lanes: int) -> Schedule:
    """Every channel at `lanes` lanes where they divide its channels (else at their greatest common divisor), the
    convs' unroll tied to them."""
    channel_lanes = {name: math.gcd(lanes, c.channels) for name, c in graph.channels.items()}
    processes = {}
    for p in graph.processes:
        if p.kind in ("conv", "pointwise"):
            unroll = (("oc", channel_lanes[p.outputs[0]]), ("ic", channel_lanes[p.inputs[0]]))
            unroll += (("k", 1),) if p.kind == "conv" else ()
            processes[p.name] = ProcessSchedule(unroll, multipliers=kind_of(p.kind).multiplier_choices(dict(unroll))[0])
    return Schedule(processes, channel_lanes)


@pytest.mark.unit
@pytest.mark.parametrize("block", [2, 3])
def test_the_sized_skip_fifo_completes_and_a_shallower_one_deadlocks(block):
    """The skip branch of the join waits while the stride-b conv and DepthToSpace take b input rows and the
    buffered rows follow: the FIFO sizing (line_buffers/fifo.py, from the loops' token moves) gives its head a depth
    with which the simulation completes. The skip must hold what the split writes before the join's first token,
    (b - 1) rows and b pixels of the input; with one token less the design deadlocks."""
    graph = build_stream_graph(decoder_join(2, 3, 4, block))
    assert "depth_to_space" in {p.kind for p in graph.processes}
    schedule = _lanes_schedule(graph, 2)
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

def _csim(graph, out: Path, x, schedule=None, concurrent=False):
    from emit_helpers import csim

    return csim(graph, out, x, schedule, concurrent=concurrent, check_ports=True)


@pytest.mark.slow
@pytest.mark.parametrize("c, h, w, block, lanes", [(3, 2, 3, 2, 1), (4, 3, 2, 2, 4), (2, 2, 3, 3, 1), (4, 2, 2, 3, 2),
                                                   (2, 2, 3, 4, 2)])
def test_csim_equals_the_reference_alone(tmp_path, c, h, w, block, lanes):
    graph = alone(c, h, w, block)
    x = image(graph, seed=block * 10 + lanes)
    expected = reference.run(graph, x)["y"]
    schedule = Schedule(lanes={name: lanes for name in build_stream_graph(graph).channels})
    y = _csim(graph, tmp_path / "out", x, schedule)
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
    y = _csim(graph, tmp_path / "out", x, _lanes_schedule(build_stream_graph(graph), lanes) if lanes > 1 else None)
    assert (y == expected).all()


@pytest.mark.slow
@pytest.mark.parametrize("block", [2, 3])
def test_concurrent_csim_of_the_join_with_sized_fifos_equals_the_reference(tmp_path, block):
    """One thread per process over FIFOs of the sized depths: no deadlock, and the values of `ming reference`."""
    graph = decoder_join(2, 3, 4, block)
    stream_graph = build_stream_graph(graph)
    schedule = _lanes_schedule(stream_graph, 2)
    specs = {p.name: schedule_spec(stream_graph, p, schedule) for p in stream_graph.processes}
    depths = FifoPlan(stream_graph, specs, {name: spec.depth for name, spec in specs.items()}).depths(1)
    x = image(graph, seed=7)
    y = _csim(graph, tmp_path / "out", x, Schedule(schedule.processes, schedule.lanes, depths), concurrent=True)
    assert (y == reference.run(graph, x)["y"]).all()


@pytest.mark.slow
@pytest.mark.parametrize("c, h, w, block, lanes", [(3, 2, 3, 2, 1), (4, 2, 3, 2, 2), (2, 2, 3, 3, 1), (6, 2, 2, 3, 3)])
def test_the_emitted_loop_moves_tokens_when_the_loop_description_says(tmp_path, c, h, w, block, lanes):
    """Compiled with the port check, -DMING_TRACE_TOKENS and -DMING_CHECK_WIDTHS (tests/test_control_widths.py): no
    array bank or stream takes more accesses per iteration than it has ports, every stream read and write happens
    at the iteration `Loop.token_iterations` gives (the loop `ming simulate` steps through), ITERATIONS is the
    loop's iteration count, and every register is as wide as the values it held and as the cost model charges."""
    from ming_py.build import design
    from ming_py.boards import load_board
    from ming_py.csim import CHECK_PORTS_FLAGS, CXX_FLAGS
    from ming_py.emit.identifiers import cpp_names
    from ming_py.output import write_tree
    from ming_py.runtime.ming_driver import compile_program
    from pipelined_control import REGISTER_TYPE, excess, pipelined_loops, register_chains

    graph = alone(c, h, w, block)
    stream_graph = build_stream_graph(graph)
    schedule = Schedule(lanes={name: lanes for name in stream_graph.channels})
    built = design(graph, load_board("kv260"), schedule)
    out = tmp_path / "out"
    write_tree(built.files, out)
    names = cpp_names(built.stream_graph)
    hls = out / "hls"
    binary = out / "trace"
    compile_program([hls / f"{names.model}.cpp", hls / f"{names.model}_tb.cpp"], [hls],
                    CXX_FLAGS + CHECK_PORTS_FLAGS + ("-DMING_TRACE_TOKENS", "-DMING_CHECK_WIDTHS"), binary)
    run = subprocess.run([str(binary), str(hls / "input.bin"), str(out / "output.bin"), str(hls / "expected.bin")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    trace, widths = collections.defaultdict(list), {}
    for line in run.stderr.splitlines():
        if line.startswith("ming trace: "):
            function, rest = line.removeprefix("ming trace: ").split(" ", 1)
            stream, side, iteration = rest.rsplit(" ", 2)
            trace[function, stream, side].append(int(iteration))
        elif line.startswith("ming widths: "):
            function, number, bits, low, high = line.removeprefix("ming widths: ").rsplit(" ", 4)
            widths[function, int(number)] = (int(bits), int(low), int(high))
    (process,) = built.stream_graph.processes
    spec = schedule_spec(built.stream_graph, process, schedule)
    loop = loop_of(spec)
    function = names.processes[process.name]
    for side, channel, index in (("read", process.inputs[0], 0), ("write", process.outputs[0], 0)):
        tokens = built.stream_graph.channels[channel].values // lanes
        assert trace[function, channel, side] == loop.token_iterations(side + "s", index, list(range(tokens)))
    cpp = built.files[f"hls/{names.model}.cpp"]
    assert f"constexpr int ITERATIONS = {h * w * block * (2 * block - 1) * c // lanes};" in cpp
    (emitted,) = [p for p in pipelined_loops(cpp) if p.function == function]
    for name, declared in emitted.registers.items():
        assert REGISTER_TYPE.fullmatch(declared.type), f"register {name} is a {declared.type}"
    assert {name: excess(chain) for name, chain in register_chains(emitted).items() if excess(chain)} == {}
    declared = sorted(widths[function, d.line][0] for d in emitted.registers.values() if d.type != "bool")
    for d in emitted.registers.values():
        if d.type != "bool":
            bits, low, high = widths[function, d.line]
            assert low >= 0 and bits == max(high.bit_length(), 1), d
    charged = sorted(max(m.bit_length(), 1) for m in control_counters(spec, None, loop.iterations))
    assert declared == charged
    # and the cycle-level simulation of the design takes the loop's cycles in the process
    simulated = simulate_schedule(built.stream_graph, schedule)
    assert simulated.completed and simulated.busy[process.name] == loop.cycles
