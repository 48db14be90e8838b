"""TFLite's fixed-point requantizer (ming::requantize_fixed_point) is charged as the C++ builds it: where the emitted
call passes its multiplier and shift as constants of the code (ADD, MUL, an average over the whole map) the cost
model charges the constant model (`requant_fixed_point`), where it reads them from ROMs (per channel after a MAC,
by the valid count of a window's average) the model with the variable rounding and shift
(`requant_fixed_point_rom`). Processes built by hand, one per case: no model, no IREE, no compiler.

Each case checks three things against each other: the datapath `lane_datapath` names for the process, the
requantizer LUTs and DSPs `process_cost` charges, and the emitted C++ of the process (emit_hls), whose call reads a
ROM or takes a literal. The Verilog model both entries are synthesized from (benchmarks/calibration/
requant_fixed_point.v) is simulated with Icarus Verilog against numerics.fixed_point_requantize, at the constants
it is calibrated at and with multipliers and shifts as ROM inputs (skipped where iverilog is not on the PATH)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ming_py import numerics, primitives
from ming_py.boards import load_board
from ming_py.dataflow import Channel, Port, Process, ProcessSchedule, Schedule, StreamGraph, Window
from ming_py.emit.hls import emit_hls
from ming_py.epilogues import lane_cost, lane_datapath
from ming_py.epilogues.base import FIXED_POINT, FIXED_POINT_FROM_ROMS, LANE_PRIMITIVES
from ming_py.ilp.cost import HLS_LUT_OVERHEAD, Choice, process_cost
from ming_py.ir import FixedPointAdd, FixedPointAverage, FixedPointMul, FixedPointRequant
from ming_py.process_spec import process_spec
from ming_py.storage import plan_arrays
from test_primitives import needs_iverilog, simulate

pytestmark = pytest.mark.unit

C, H, W = 4, 5, 5
LANES = 2


def q31(real) -> tuple[np.ndarray, np.ndarray]:
    """TFLite's QuantizeMultiplier of positive reals: a Q31 multiplier and the shift 31 + right shift."""
    fixed = [numerics.to_fixed_point(float(r)) for r in np.atleast_1d(real)]
    return np.array([f.multiplier for f in fixed], np.int64), np.array([f.shift for f in fixed], np.int64)


def mac_requant(real, narrow: bool = False) -> FixedPointRequant:
    multiplier, shift = q31(real)
    return FixedPointRequant(bias=np.arange(len(multiplier), dtype=np.int32) * 7, multiplier=multiplier.astype(np.int32),
                             shift=shift, zero_point=-5, channel_dims=(0,), narrow=narrow)


def average(window: int) -> FixedPointAverage:
    """TOSA's reciprocal of each valid count 1 .. window (index 0 unused)."""
    multiplier, shift = q31([1.0 / n for n in range(1, window + 1)])
    return FixedPointAverage(np.concatenate([[0], multiplier]).astype(np.int32),
                             np.concatenate([[0], shift]).astype(np.int32), zero_point=3)


def add() -> FixedPointAdd:
    values = np.arange(-128, 128, dtype=np.int64)
    return FixedPointAdd(((values + 5) << 20).astype(np.int32), ((values - 9) << 19).astype(np.int32),
                         1_140_768_826, 48, -128)


def graph_of(kind: str, ins, out, epilogue, win=None, weights=None) -> StreamGraph:
    """One process `p` of `kind` reading streams of shapes `ins` and writing `out` ((C, H, W) each)."""
    names = [f"in{i}" for i in range(len(ins))]
    channels = {name: Channel(name, "input", "p", *shape) for name, shape in zip(names, ins)}
    channels["out"] = Channel("out", "p", "output", *out)
    process = Process("p", kind, "node_p", tuple(names), ("out",), window=win, weights=weights, epilogue=epilogue)
    source = Port("in0", (1, *ins[0]), "in0", (1, *ins[0]), 0.1, 0)
    return StreamGraph("hand", [process], channels, source, (Port("out", (1, *out), "out", (1, *out), 0.1, 0),))


def conv_graph(epilogue) -> StreamGraph:
    weights = np.random.default_rng(3).integers(-127, 128, (C, C, 9)).astype(np.int8)
    return graph_of("conv", [(C, H, W)], (C, H, W), epilogue, Window(C, H, W, C, H, W, (3, 3), pads=(1, 1, 1, 1)),
                    weights)


def pointwise_graph(epilogue) -> StreamGraph:
    weights = np.random.default_rng(4).integers(-127, 128, (C, C)).astype(np.int8)
    return graph_of("pointwise", [(C, H, W)], (C, H, W), epilogue, Window(C, H, W, C, H, W), weights)


# (label, graph, its unrollable loops at LANES, the datapath the C++ computes)
CASES = [
    ("conv: per-channel multipliers from ROMs", lambda: conv_graph(mac_requant([3e-5, 2e-3, 7e-4, 2.0 ** -21])),
     ("oc", "ic"), FIXED_POINT_FROM_ROMS),
    # one multiplier for every channel: the template still reads it from the per-channel ROMs
    ("pointwise: a per-tensor multiplier, still from ROMs", lambda: pointwise_graph(mac_requant([0.0031] * C)),
     ("oc", "ic"), FIXED_POINT_FROM_ROMS),
    ("avgpool 3x3 pad 1: reciprocals by the valid count from ROMs",
     lambda: graph_of("avgpool", [(C, H, W)], (C, H, W), average(9),
                      Window(C, H, W, C, H, W, (3, 3), pads=(1, 1, 1, 1))), ("c",), FIXED_POINT_FROM_ROMS),
    ("global average: one reciprocal, a constant",
     lambda: graph_of("global_avgpool", [(C, H, W)], (C, 1, 1), average(H * W)), ("c",), FIXED_POINT),
    ("add: multiplier and shift constants", lambda: graph_of("add", [(C, H, W)] * 2, (C, H, W), add()), (),
     FIXED_POINT),
    ("mul as written: multiplier and shift constants",
     lambda: graph_of("mul", [(C, H, W)] * 2, (C, H, W), FixedPointMul(3, -40, 1_234_567_890, 40, 12, narrow=False)),
     (), FIXED_POINT),
]
IDS = [label for label, *_ in CASES]


def choice_of(graph: StreamGraph, loops) -> Choice:
    p = graph.processes[0]
    return Choice(tuple((loop, LANES) for loop in loops), (LANES,) * len(p.inputs), (LANES,))


def schedule_of(graph: StreamGraph, choice: Choice) -> Schedule:
    p = graph.processes[0]
    lanes = dict(zip(p.inputs, choice.lanes_in)) | dict(zip(p.outputs, choice.lanes_out))
    return Schedule({p.name: ProcessSchedule(choice.unroll)}, lanes)


# the position of the multiplier among each call's arguments (the shift follows it)
MULTIPLIER_ARGUMENT = {"requantize_fixed_point": 1, "mul_fixed_point": 4}


def requantizer_calls(cpp: str) -> list[tuple[str, str]]:
    """(multiplier, shift) arguments of every fixed-point requantization call of the C++."""
    found = []
    for function, arguments in re.findall(r"ming::(requantize_fixed_point|mul_fixed_point)<\w+>\(([^;]*?)\);", cpp,
                                          re.S):
        values = [value.strip() for value in re.split(r",(?![^\[]*\])", arguments)]
        at = MULTIPLIER_ARGUMENT[function]
        found.append((values[at], values[at + 1]))
    return found


@pytest.mark.parametrize("label, make, loops, expected", CASES, ids=IDS)
def test_the_cost_model_charges_the_datapath_the_cpp_computes(label, make, loops, expected):
    graph = make()
    p = graph.processes[0]
    choice = choice_of(graph, loops)
    spec = process_spec(graph, p, choice.unroll, choice.lanes_in, choice.lanes_out)
    assert lane_datapath(p.epilogue, plan_arrays(spec, p.epilogue)) == expected

    cost = process_cost(graph, p, choice)
    charged = {(resource, primitive): amount for resource, primitive, amount in cost.parts}
    lut, dsp = lane_cost(expected, choice.multipliers)
    assert charged[("lut", "requantizer")] == pytest.approx(HLS_LUT_OVERHEAD * lut * spec.requant_lanes)
    assert charged[("dsp", "requantizer")] == dsp * spec.requant_lanes

    files = emit_hls(graph, schedule_of(graph, choice), load_board("kv260"))
    (cpp,) = [text for name, text in files.items() if name.endswith(".cpp") and not name.endswith("_tb.cpp")]
    calls = requantizer_calls(cpp)
    assert calls, "no fixed-point requantization in the C++"
    for multiplier, shift in calls:
        from_roms = bool(re.search(r"_multiplier\[", multiplier)) and bool(re.search(r"_shift\[", shift))
        constant = multiplier.isdigit() and (shift.isdigit() or f"constexpr int {shift} = " in cpp)  # a literal or named
        assert (from_roms, constant) == ((True, False) if expected == FIXED_POINT_FROM_ROMS else (False, True)), \
            (multiplier, shift)


def test_the_proved_narrow_datapath_is_neither():
    graph = conv_graph(mac_requant([3.1e-3, 4.7e-3, 2.2e-3, 3.9e-3], narrow=True))
    p = graph.processes[0]
    choice = choice_of(graph, ("oc", "ic"))
    spec = process_spec(graph, p, choice.unroll, choice.lanes_in, choice.lanes_out)
    assert lane_datapath(p.epilogue, plan_arrays(spec, p.epilogue)) == "narrow"


def test_constants_cost_less_than_roms():
    """The variable rounding and the 64-bit barrel shifter are what the ROMs add (yosys: hundreds of LUTs)."""
    constant, rom = (primitives.device_luts(primitives.primitive(LANE_PRIMITIVES[d]))
                     for d in (FIXED_POINT, FIXED_POINT_FROM_ROMS))
    assert constant < rom / 2
    assert primitives.dsp(LANE_PRIMITIVES[FIXED_POINT]) == primitives.dsp(LANE_PRIMITIVES[FIXED_POINT_FROM_ROMS])


def test_the_constant_entry_is_the_costliest_of_its_published_settings():
    entry = primitives.primitive("requant_fixed_point")
    settings = entry["settings"]
    assert len(settings) >= 2 and entry["chosen"] in [s["constants"] for s in settings]
    luts = [primitives.device_luts(s) for s in settings]
    assert primitives.device_luts(entry) == max(luts)


# --- the yosys models compute the rules (Icarus Verilog) ------------------------------------------------------------

def calibration_constants() -> list[dict[str, int]]:
    """The representative constants benchmarks/calibrate.py synthesizes requant_fixed_point at."""
    return [figures["constants"] for figures in primitives.primitive("requant_fixed_point")["settings"]]


def accumulators(rng, thresholds: np.ndarray) -> np.ndarray:
    """Every threshold of the rule and its neighbours, random int32 values near them and anywhere, the int32 ends."""
    t = np.clip(thresholds.reshape(-1), numerics.I32_MIN + 1, numerics.I32_MAX)
    span = max(int(np.abs(t).max()) * 2, 1 << 16)
    return np.concatenate([t - 1, t, rng.integers(-span, span, 2000),
                           rng.integers(numerics.I32_MIN, numerics.I32_MAX, 2000, endpoint=True),
                           [numerics.I32_MIN, numerics.I32_MIN + 1, -1, 0, 1, numerics.I32_MAX]]).astype(np.int64)


@needs_iverilog
@pytest.mark.parametrize("zero_point", [-128, -3, 40])
def test_the_constant_fixed_point_model_computes_the_rule(tmp_path, zero_point):
    """requant_fixed_point with FROM_ROMS 0 at each calibrated setting == numerics.fixed_point_requantize."""
    rng = np.random.default_rng(11)
    settings = calibration_constants()
    instances, expected, acc_all = [], [], None

    def rule(acc, s):
        return numerics.fixed_point_requantize(acc, s["MULTIPLIER"], s["SHIFT"], bool(s["DOUBLE_ROUND"]), zero_point)

    acc_all = np.concatenate([accumulators(rng, numerics.requant_thresholds(
        lambda a, s=s: rule(a, s).reshape(1, -1), 1, -128, 127)) for s in settings])
    for i, s in enumerate(settings):
        instances.append(f"  requant_fixed_point #(.FROM_ROMS(0), .MULTIPLIER({s['MULTIPLIER']}), .SHIFT({s['SHIFT']}), "
                         f".DOUBLE_ROUND({s['DOUBLE_ROUND']}), .ZERO_POINT({zero_point})) dut{i}(.clk(clk), .acc(acc), "
                         f".multiplier(32'sd0), .shift(8'd0), .y());")
        expected.append(rule(acc_all, s))
    y = simulate(tmp_path, "requant_fixed_point", {"acc": (32, acc_all)}, instances,
                 [f"dut{i}.y" for i in range(len(settings))], 2)
    for i, s in enumerate(settings):
        np.testing.assert_array_equal(y[:, i], expected[i], err_msg=str(s))


@needs_iverilog
@pytest.mark.parametrize("double_round", [True, False])
def test_the_rom_fixed_point_model_computes_the_rule(tmp_path, double_round):
    """requant_fixed_point with FROM_ROMS 1, the multiplier and shift inputs drawn per accumulator (Q31
    multipliers of reals 2^-28 .. 2^2, shifts 2 .. 62) == numerics.fixed_point_requantize."""
    rng = np.random.default_rng(12)
    real = np.exp2(rng.uniform(-28, 2, 4000))
    multiplier, shift = q31(real)
    keep = (shift >= 2) & (shift <= 62)
    multiplier, shift = multiplier[keep], shift[keep]
    # mostly accumulators whose output does not saturate (a level times 1 / real, near the rounding's ties)
    levels = rng.integers(-140, 140, len(shift)) + rng.choice([0.0, 0.5, 0.25], len(shift))
    near = np.clip(np.round(levels / real[keep]) + rng.integers(-2, 3, len(shift)), numerics.I32_MIN,
                   numerics.I32_MAX).astype(np.int64)
    acc = np.where(rng.random(len(shift)) < 0.8, near, rng.integers(numerics.I32_MIN, numerics.I32_MAX, len(shift)))
    acc[:4] = [numerics.I32_MIN, numerics.I32_MAX, -1, 0]
    instance = (f"  requant_fixed_point #(.FROM_ROMS(1), .DOUBLE_ROUND({int(double_round)}), .ZERO_POINT(-7)) "
                "dut(.clk(clk), .acc(acc), .multiplier(multiplier), .shift(shift), .y());")
    y = simulate(tmp_path, "requant_fixed_point",
                 {"acc": (32, acc), "multiplier": (32, multiplier), "shift": (8, shift)}, [instance], ["dut.y"], 2)
    np.testing.assert_array_equal(y[:, 0], numerics.fixed_point_requantize(acc, multiplier, shift, double_round, -7))
