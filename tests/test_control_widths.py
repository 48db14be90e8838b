"""Every pipelined loop of every emitted process keeps its registers at the width of their range and the
logic between them one add, one compare, one boolean combination and one select deep, and moves each
token at the iteration its loop description (ming_py/process_spec.py) says.

What is carried from one iteration of a pipelined loop to the next (the loop's counter, and every
variable declared before the loop and assigned in it) is a register plus the logic computing its next
value, which must settle within one clock for II=1. The rule the emitted code obeys, checked here:

* a register is a `bool` or a `ming::Counter<MAX>` (ap_uint of the width of 0..MAX; for MAX = 0 the
  constant 0, no register), never a plain `int`, `int32_t` or `long`, and MAX is what it needs: the
  C-simulation compiled with -DMING_CHECK_WIDTHS reports the values each register held over an image,
  and its width must be the least that holds them (the control does not depend on the data, so one
  image shows every value); a value outside the width ends the simulation in every C-simulation (too
  narrow). The sliding-window processes' position machine is a `ming::WindowCursor` object
  (ming_window.h) whose members are registers, checked the same way;
* between a register read and a register write stand at most one add, one compare, one boolean
  combination and one select (tests/pipelined_control.py counts them on the longest path of each
  class): the next iteration's predicates are computed one iteration ahead, from registers only.

And the loop keeps the schedule the cost model and `ming simulate` assume: compiled with the port check
and -DMING_TRACE_TOKENS, the C-simulation prints the iteration of every stream read and write, which
must be the one `Loop.token_iterations` gives. Each check names the process, the register or stream
and what differs.
"""

from __future__ import annotations

import collections
import functools
import random
import subprocess
from pathlib import Path

import pytest

import architectures
import zoo
from emit_helpers import random_schedule, stream_graph_of
from ming_py.boards import load_board
from ming_py.build import design
from ming_py.csim import CHECK_PORTS_FLAGS, CXX_FLAGS
from ming_py.emit.identifiers import cpp_names
from ming_py.process_spec import loop_of, schedule_spec
from ming_py.kinds.base import control_counters
from ming_py.output import write_tree
from ming_py.pipeline import lift
from ming_py.contract.ming_cxx import compile_program
from pipelined_control import (CHAIN_LIMIT, REGISTER_TYPE, Declarator, PipelinedLoop, cursor_loop, excess,
                               pipelined_loops, register_chains)

TEMPLATES = Path(__file__).resolve().parents[1] / "emit" / "templates"
ZOO = sorted(zoo.MODELS)
ARCHITECTURES = sorted(architectures.ARCHITECTURES)
TRACE_FLAGS = ("-DMING_TRACE_TOKENS", "-DMING_CHECK_WIDTHS")
CURSOR = cursor_loop((TEMPLATES / "ming_window.h").read_text())


@functools.lru_cache(maxsize=None)
def _graph(name: str, directory: str):
    if name in zoo.MODELS:
        return lift(zoo.quantized_model(name, Path(directory), per_channel=True))
    return lift(architectures.quantized(name, "qdq_int8", Path(directory)))


@pytest.fixture(scope="module")
def directory(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("networks"))


@pytest.fixture(scope="module")
def graph_of(directory):
    return lambda name: _graph(name, directory)


def _schedules(graph):
    """The default schedule, and a random valid one (other lanes, unroll factors and multipliers)."""
    yield None
    yield random_schedule(stream_graph_of(graph), random.Random(f"{graph.name} control"))


def _process_loops(built) -> dict[str, PipelinedLoop]:
    """The pipelined loop of each process, by process name."""
    names = cpp_names(built.stream_graph)
    model = names.model
    loops = {loop.function: loop for loop in pipelined_loops(built.files[f"hls/{model}.cpp"])}
    return {p.name: loops[names.processes[p.name]] for p in built.stream_graph.processes}


def _check_registers(built) -> None:
    for process, loop in _process_loops(built).items():
        where = f"{process} ({loop.function}, loop {loop.label})"
        for name, declared in loop.registers.items():
            assert REGISTER_TYPE.fullmatch(declared.type), f"{where}: register {name} is a {declared.type}"
        for name, chain in register_chains(loop).items():
            assert not excess(chain), f"{where}: {name}'s next value takes {chain} (limit {CHAIN_LIMIT})"


@pytest.mark.parametrize("name", ZOO + ARCHITECTURES)
def test_register_logic_is_one_add_compare_and_select_deep(graph_of, name):
    graph = graph_of(name)
    for schedule in _schedules(graph):
        _check_registers(design(graph, load_board("kv260"), schedule))


def _needed_bits(high: int) -> int:
    return max(high.bit_length(), 1)


@functools.lru_cache(maxsize=None)
def _simulated(name: str, schedule: str, directory: str, scratch: str):
    """The design of `name` built under its default or a random `schedule`, its C-simulation's width report
    {(function, line): (bits, low, high)} and its token trace {(function, stream, side): [iterations]}."""
    graph = _graph(name, directory)
    chosen = random_schedule(stream_graph_of(graph), random.Random(name)) if schedule == "random" else None
    built = design(graph, load_board("kv260"), chosen)
    out = Path(scratch) / f"{name}_{schedule}"
    write_tree(built.files, out)
    hls = out / "hls"
    model = cpp_names(built.stream_graph).model
    binary = out / "trace"
    compile_program([hls / f"{model}.cpp", hls / f"{model}_tb.cpp"], [hls],
                    CXX_FLAGS + CHECK_PORTS_FLAGS + TRACE_FLAGS, binary)
    run = subprocess.run([str(binary), str(hls / "input.bin"), str(out / "output.bin"), str(hls / "expected.bin")],
                         capture_output=True, text=True)
    assert run.returncode == 0, "\n".join(line for line in run.stderr.splitlines()
                                         if not line.startswith(("ming trace: ", "ming widths: ")))[-2000:]
    widths, trace = {}, collections.defaultdict(list)
    for line in run.stderr.splitlines():
        if line.startswith("ming widths: "):  # a function template's name has its arguments, spaces included
            function, number, bits, low, high = line.removeprefix("ming widths: ").rsplit(" ", 4)
            widths[function, int(number)] = (int(bits), int(low), int(high))
        elif line.startswith("ming trace: "):
            function, rest = line.removeprefix("ming trace: ").split(" ", 1)
            stream, side, iteration = rest.rsplit(" ", 2)
            trace[function, stream, side].append(int(iteration))
    return built, widths, dict(trace)


@pytest.fixture(scope="module")
def simulated(directory, tmp_path_factory):
    scratch = str(tmp_path_factory.mktemp("simulations"))
    return lambda name, schedule: _simulated(name, schedule, directory, scratch)


# every network under its default schedule, the zoo under a random one too (other unroll factors and lanes)
SIMULATED = [(name, "default") for name in ZOO + ARCHITECTURES] + [(name, "random") for name in ZOO]


def _counters(loop: PipelinedLoop, widths) -> dict[str, tuple[Declarator, tuple[int, int, int]]]:
    """The loop's counter registers and those of its cursor (ming_window.h), each with its declaration and the
    width, least and greatest value C-simulation reported: 0 bits for a counter of range 0 .. 0, the constant 0
    (ming::Zero). A cursor's counters are reported under the process's function, at their line negated."""
    counters = {}
    for register, declared in loop.registers.items():
        if declared.type != "bool":
            key = (loop.function, declared.line)
            assert key in widths, f"{loop.function}: no width reported for {register} (line {declared.line})"
            counters[register] = (declared, widths[key])
    for cursor in loop.cursors:
        for register, declared in CURSOR.registers.items():
            if declared.type != "bool":
                key = (loop.function, -declared.line)
                assert key in widths, f"{loop.function}: no width reported for {cursor}.{register}"
                counters[f"{cursor}.{register}"] = (declared, widths[key])
    return counters


@pytest.mark.parametrize("name,schedule", SIMULATED)
def test_registers_have_the_width_of_their_range(simulated, name, schedule):
    built, widths, _ = simulated(name, schedule)
    for process, loop in _process_loops(built).items():
        for register, (declared, (bits, low, high)) in _counters(loop, widths).items():
            if bits == 0:
                assert low == high == 0, f"{process}: {register} is the constant 0 and held {low}..{high}"
                continue
            assert low >= 0 and bits == _needed_bits(high), \
                f"{process}: {register} is {declared.type}, {bits} bits, for the values {low}..{high}"


def _unsigned_bits(maximum: int) -> int:
    return max(maximum.bit_length(), 1)  # ming::unsigned_bits (ming_stream.h)


@pytest.mark.parametrize("name,schedule", SIMULATED)
def test_the_cost_model_sizes_the_control_the_code_declares(simulated, name, schedule):
    """The counters the cost model charges (`control_counters`: the kind's `counters`, the loop counter, the shared
    requantizers') are the counter registers of the emitted loop and its cursor, width for width; a counter of
    range 0 .. 0 is the constant 0 in the code and charged nothing."""
    built, widths, _ = simulated(name, schedule)
    graph = built.stream_graph
    for p, (process, loop) in zip(graph.processes, _process_loops(built).items()):
        declared = sorted(bits for _, (bits, _, _) in _counters(loop, widths).values() if bits > 0)
        spec = schedule_spec(graph, p, built.schedule)
        charged = sorted(_unsigned_bits(m) for m in control_counters(spec, p.epilogue, loop_of(spec).iterations)
                         if m > 0)
        assert declared == charged, f"{process}: registers of {declared} bits, the cost model charges {charged}"


@pytest.mark.parametrize("name,schedule", SIMULATED)
def test_tokens_move_at_the_iterations_the_loop_description_says(simulated, name, schedule):
    built, _, trace = simulated(name, schedule)
    graph, schedule, names = built.stream_graph, built.schedule, cpp_names(built.stream_graph)
    for p in graph.processes:
        spec = schedule_spec(graph, p, schedule)
        loop = loop_of(spec)
        for side, channels in (("read", p.inputs), ("write", p.outputs)):
            for index, channel in enumerate(channels):
                moved = trace.get((names.processes[p.name], graph.channels[channel].name, side), [])
                tokens = graph.channels[channel].values // schedule.lanes_of(channel)
                assert len(moved) == tokens, f"{p.name} {side}s {len(moved)} tokens of {channel}, not {tokens}"
                assert moved == loop.token_iterations(side + "s", index, list(range(tokens))), \
                    f"{p.name}: the {side}s of {channel} differ from its loop's"


@pytest.mark.unit
def test_the_axi_adapters_registers_are_narrow_and_their_logic_short():
    """unpack_axis and pack_axis (ming_stream.h), the top function's pipelined loops, obey the same rule (their
    value counts are bounded by the buffer that holds the values)."""
    loops = {loop.function: loop for loop in pipelined_loops((TEMPLATES / "ming_stream.h").read_text())}
    assert set(loops) == {"unpack_axis", "pack_axis"}
    for loop in loops.values():
        assert {name for name, d in loop.registers.items() if not REGISTER_TYPE.fullmatch(d.type)} == set()
        assert {name: excess(chain) for name, chain in register_chains(loop).items() if excess(chain)} == {}
    assert set(loops["pack_axis"].registers) == {"count", "tokens", "words", "i"}


@pytest.mark.unit
def test_the_window_cursors_registers_are_narrow_and_their_logic_short():
    """ming::WindowCursor (ming_window.h), the position machine of the sliding-window processes' loops: its
    members are its registers, `next()` their update."""
    assert {name for name, d in CURSOR.registers.items() if not REGISTER_TYPE.fullmatch(d.type)} == set()
    assert {name: excess(chain) for name, chain in register_chains(CURSOR).items() if excess(chain)} == {}
    assert {"pr", "pc", "read", "window", "step", "token", "top", "left", "top_slot"} <= set(CURSOR.registers)


@pytest.mark.unit
def test_an_int_register_and_a_long_chain_fail_the_check():
    """The check can fail: the window process's next-position logic as it was (plain ints; the next position's
    predicates computed from the counters updated earlier in the same iteration)."""
    source = """
static void window(hls::stream<ming::Pack<1>>& in) {
  constexpr int FOLD = 9, TOKENS_IN = 3, PADDED_W = 6, PADDED_H = 6, PAD_TOP = 1, H_IN = 4, ITERATIONS = 100;
  int pr = 0, pc = 0, step = 0, steps = 1;
  bool window = false;
  window_positions:
  for (int it = 0; it < ITERATIONS; it++) {
    HLS_PRAGMA(PIPELINE II=1)
    if (++step == steps) {
      step = 0;
      window = pr >= 2 && pc >= 2;
      if (++pc == PADDED_W) {
        pc = 0;
        pr++;
      }
      const int next_r = pr - PAD_TOP;
      const bool pixel = pr < PADDED_H && next_r >= 0 && next_r < H_IN;
      steps = window ? FOLD : pixel ? TOKENS_IN : 1;
    }
  }
}
"""
    (loop,) = pipelined_loops(source)
    assert loop.label == "window_positions" and set(loop.registers) == {"pr", "pc", "step", "steps", "window", "it"}
    assert {name for name, d in loop.registers.items() if not REGISTER_TYPE.fullmatch(d.type)} == \
        {"pr", "pc", "step", "steps", "it"}
    chains = register_chains(loop)
    assert excess(chains["steps"]) == {"add": 2, "compare": 2, "select": 2}
    assert not excess(chains["step"]) and not excess(chains["window"])


@pytest.mark.unit
def test_a_tree_of_selects_or_of_boolean_operators_is_one_level_a_select_on_a_select_two():
    source = """
static void f() {
  ming::uint_for<9> a = 0;
  bool p = false, q = false;
  for (ming::uint_for<10> it = 0; it < 10; it++) {
    HLS_PRAGMA(PIPELINE II=1)
    const bool wrap = a == 9;
    if (p) {
      if (wrap) {
        a = 0;
      } else {
        a++;
      }
    }
    const bool r = q ? wrap : p;
    q = !r && p;
    p = q ? true : false;
  }
}
"""
    (loop,) = pipelined_loops(source)
    chains = register_chains(loop)
    assert chains["a"] == {"add": 1, "compare": 1, "logic": 0, "select": 1, "other": 0}
    assert chains["q"] == {"add": 0, "compare": 1, "logic": 1, "select": 1, "other": 0}
    assert excess(chains["p"]) == {"select": 2}  # q's select drives p's
