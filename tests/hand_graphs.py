"""IR graphs built by hand for the data-movement kinds' tests (tests/test_depth_to_space.py,
tests/test_bilinear_resize.py): a map in and a map out, a convolution as the frontend lifts one, a schedule of
one lane count, the C-simulation with the port check, and the token-trace check of one process's loop."""

from __future__ import annotations

import collections
import math
import subprocess
from pathlib import Path

import numpy as np

from ming_py.dataflow import ProcessSchedule, Schedule
from ming_py.ir import (AccessMap, AccRequant, AffineExpr, Arg, Graph, GraphInput, GraphOutput, Kernel, Op, Operand,
                        TensorInfo)
from ming_py.kinds import kind_of


def map_graph(name: str, input_shape, output_shape) -> Graph:
    graph = Graph(name)
    graph.tensors["x"] = TensorInfo("x", tuple(input_shape), "i8")
    graph.tensors["y"] = TensorInfo("y", tuple(output_shape), "i8")
    graph.inputs = [GraphInput("x", "x", (1, *input_shape), 0.05, 0, dtype="int8")]
    graph.outputs = [GraphOutput("y", "y", (1, *output_shape), 0.1, 0, dtype="int8")]
    return graph


def affine(num_dims: int, terms: dict[int, int]) -> AffineExpr:
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
    activation = Operand(source, AccessMap(dims, (affine(dims, {3: 1}), affine(dims, {1: stride, 4: 1}),
                                                  affine(dims, {2: stride, 5: 1}))),
                         padding=((0, 0), (pad, pad), (pad, pad)) if pad else (), pad_value=0)
    weight = Operand(weights, AccessMap(dims, tuple(affine(dims, {d: 1}) for d in (0, 3, 4, 5))))
    epilogue = AccRequant(bias=rng.integers(-500, 500, out_channels).astype(np.int32), x_scale=np.float32(0.05),
                          w_scale=np.full(out_channels, 0.01, np.float32), y_scale=np.float32(0.1) * c * kernel,
                          zero_point=0, channel_dims=(0,))
    graph.nodes.append(Kernel(name, name, (out_channels, out_h, out_w, c, kernel, kernel),
                              ("parallel",) * 3 + ("reduction",) * 3, (activation, weight),
                              Operand(output, AccessMap(dims, tuple(affine(dims, {d: 1}) for d in (0, 1, 2)))),
                              Op("add", (Arg(2), Op("mul", (Arg(0), Arg(1))))), 0, epilogue, "conv"))


def image(graph: Graph, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, graph.inputs[0].onnx_shape).astype(np.int8)


def moves(loop, side: str) -> list[int]:
    tokens = sum(n * getattr(p, side)[0].count for n, p in loop.runs)
    return loop.token_iterations(side, 0, list(range(tokens)))


def lanes_schedule(graph, lanes: int) -> Schedule:
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


def csim_checked(graph, out: Path, x, schedule=None, concurrent=False):
    from emit_helpers import csim

    return csim(graph, out, x, schedule, concurrent=concurrent, check_ports=True)


def assert_traced_loop(graph: Graph, lanes: int, out: Path, iterations: int, excesses: dict | None = None,
                       processes: dict | None = None) -> None:
    """`graph`, one process between its input and output at `lanes` lanes (its `ProcessSchedule` from `processes`
    where given), compiled with the port check,
    -DMING_TRACE_TOKENS and -DMING_CHECK_WIDTHS (tests/test_control_widths.py): no array bank or stream takes more
    accesses per iteration than it has ports, every stream read and write happens at the iteration
    `Loop.token_iterations` gives (the loop `ming simulate` steps through), ITERATIONS is `iterations`, every
    register is as wide as the values it held and as the cost model charges, the registers' next values stay
    within one step of logic but for `excesses`, and the cycle simulation takes the loop's cycles."""
    from ming_py.boards import load_board
    from ming_py.build import design
    from ming_py.csim import CHECK_PORTS_FLAGS, CXX_FLAGS, weights_environment
    from ming_py.emit.identifiers import cpp_names
    from ming_py.process_spec import loop_of, schedule_spec
    from ming_py.kinds.base import control_counters
    from ming_py.line_buffers import build_stream_graph
    from ming_py.output import write_tree
    from ming_py.contract.ming_cxx import compile_program
    from ming_py.simulate import simulate_schedule
    from pipelined_control import REGISTER_TYPE, excess, pipelined_loops, register_chains

    stream_graph = build_stream_graph(graph)
    schedule = Schedule(processes or {}, lanes={name: lanes for name in stream_graph.channels})
    built = design(graph, load_board("kv260"), schedule)
    write_tree(built.files, out)
    names = cpp_names(built.stream_graph)
    hls = out / "hls"
    binary = out / "trace"
    compile_program([hls / f"{names.model}.cpp", hls / f"{names.model}_tb.cpp"], [hls],
                    CXX_FLAGS + CHECK_PORTS_FLAGS + ("-DMING_TRACE_TOKENS", "-DMING_CHECK_WIDTHS"), binary)
    run = subprocess.run([str(binary), str(hls / "input.bin"), str(out / "output.bin"), str(hls / "expected.bin")],
                         capture_output=True, text=True, **weights_environment(hls))
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
    for side, channel in (("read", process.inputs[0]), ("write", process.outputs[0])):
        tokens = built.stream_graph.channels[channel].values // lanes
        assert trace[function, channel, side] == loop.token_iterations(side + "s", 0, list(range(tokens)))
    cpp = built.files[f"hls/{names.model}.cpp"]
    assert f"constexpr int ITERATIONS = {iterations};" in cpp
    (emitted,) = [p for p in pipelined_loops(cpp) if p.function == function]
    for name, declared in emitted.registers.items():
        assert REGISTER_TYPE.fullmatch(declared.type), f"register {name} is a {declared.type}"
    assert {name: excess(chain) for name, chain in register_chains(emitted).items() if excess(chain)} == \
        (excesses or {})
    counters = [d for d in emitted.registers.values() if d.type != "bool"]
    for d in counters:
        bits, low, high = widths[function, d.line]
        if bits == 0:  # a counter of range 0 is the constant ming::Zero
            assert low == high == 0, d
        else:
            assert low >= 0 and bits == max(high.bit_length(), 1), d
    declared = sorted(bits for bits, _, _ in (widths[function, d.line] for d in counters) if bits > 0)
    charged = sorted(m.bit_length() for m in control_counters(spec, None, loop.iterations) if m > 0)
    assert declared == charged
    simulated = simulate_schedule(built.stream_graph, schedule)
    assert simulated.completed and simulated.busy[process.name] == loop.cycles


def assert_concurrent_csim_with_sized_fifos(graph: Graph, out: Path, lanes: int = 2) -> None:
    """One thread per process over FIFOs of the depths ming sizes (`FifoPlan`): no deadlock, and the values of
    `ming reference`."""
    from ming_py import reference
    from ming_py.process_spec import schedule_spec
    from ming_py.line_buffers import build_stream_graph
    from ming_py.line_buffers.fifo import FifoPlan

    stream_graph = build_stream_graph(graph)
    schedule = lanes_schedule(stream_graph, lanes)
    specs = {p.name: schedule_spec(stream_graph, p, schedule) for p in stream_graph.processes}
    depths = FifoPlan(stream_graph, specs, {name: spec.depth for name, spec in specs.items()}).depths(1)
    x = image(graph, seed=7)
    y = csim_checked(graph, out, x, Schedule(schedule.processes, schedule.lanes, depths), concurrent=True)
    assert (y == reference.run(graph, x)["y"]).all()
