"""Every array of a process's storage plan gets its partition and storage pragmas from the plan, in the emitted
C++ (emit/layouts.py checks each rendered process): no model, no IREE, no compiler.

An array read by more lanes per iteration than its memory has ports needs its partition; the check fails the
emission when a template forgets an array. Here: the guard itself (a function lacking one pragma of its plan is
refused, naming the process and the array), the TFLite ADD's per-lane tables (eight lanes each read both tables
every iteration) and a global pool's per-channel requantization constants laid out and charged by the cost
model, over lane counts.
"""

from __future__ import annotations

import numpy as np
import pytest

from ming_py.array_layout import Dim, array, memory_cost, spread
from ming_py.boards import load_board
from ming_py.dataflow import Channel, Port, Process, ProcessSchedule, Schedule, StreamGraph
from ming_py.emit.hls import emit_hls
from ming_py.emit.layouts import MissingLayout, check_layouts, missing_layouts, planned_pragmas, stated_pragmas
from ming_py.ir import FixedPointAdd, FixedPointRequant
from ming_py.ilp.cost import Choice, resources
from ming_py.process_spec import process_spec
from ming_py.storage import plan_arrays

pytestmark = pytest.mark.unit

PORTS = 2  # a BRAM, LUTRAM or URAM bank: two ports (docs/design-space.md, the storage plan)


def one_process_graph(kind: str, ins, out, epilogue) -> tuple[StreamGraph, Process]:
    """A graph of one process of `kind` reading maps `ins` ((C, H, W) each) and writing `out`."""
    names = [f"in{i}" for i in range(len(ins))]
    channels = {name: Channel(name, "input", "p", *shape) for name, shape in zip(names, ins)}
    channels["out0"] = Channel("out0", "p", "output", *out)
    process = Process("p", kind, "node_p", tuple(names), ("out0",), epilogue=epilogue)
    c, h, w = ins[0]
    source = Port("in0", (1, c, h, w), "in0", (1, c, h, w), 0.1, 0)
    sink = Port("out0", (1, *out), "out0", (1, *out), 0.1, 0, index=0)
    return StreamGraph("hand", [process], channels, source, (sink,)), process


def tflite_add() -> FixedPointAdd:
    values = np.arange(-128, 128, dtype=np.int32)
    return FixedPointAdd((values + 5) << 20, (values - 3) << 19, 1_500_000_000, 20, -4)


def global_average() -> FixedPointRequant:
    channels = 16
    return FixedPointRequant(np.arange(channels, dtype=np.int32) * 7, np.full(channels, 1_400_000_000, np.int32),
                             np.full(channels, 40, np.int32), -128, (0,))


CASES = {
    "add": lambda: one_process_graph("add", [(16, 3, 3), (16, 3, 3)], (16, 3, 3), tflite_add()),
    "global_avgpool": lambda: one_process_graph("global_avgpool", [(16, 3, 3)], (16, 1, 1), global_average()),
}


def function_text(cpp: str, name: str) -> str:
    start = cpp.index(f"static void {name}(")
    end = cpp.find("\n}\n", start)
    return cpp[start:end]


def emitted(kind: str, lanes: int) -> tuple[str, dict, dict]:
    """(the C++ function of the one process, its storage plan, its constant arrays' names) at `lanes` lanes."""
    graph, process = CASES[kind]()
    unroll = (("c", lanes),) if kind == "global_avgpool" else ()
    schedule = Schedule({"p": ProcessSchedule(unroll)},
                        {name: lanes for name, channel in graph.channels.items() if channel.channels > 1})
    cpp = emit_hls(graph, schedule, load_board("kv260"))["hand.cpp"]
    spec = process_spec(graph, process, unroll, tuple(schedule.lanes_of(c) for c in process.inputs),
                       (schedule.lanes_of("out0"),))
    storage = plan_arrays(spec, process.epilogue)
    constants = {role: f"p_{role}" for role, plan in storage.items() if plan.rom}
    return function_text(cpp, "p"), storage, constants


# ---------------------------------------------------------------------------
# the guard
# ---------------------------------------------------------------------------

TABLE = array("table", 32, (spread(8, 8, "partition"), Dim(256)), rom=True)
BUFFER = array("buffer", 8, (Dim(2, "complete", factor=2), Dim(20), spread(8, 4, "reshape")), rom=False)
LAID_OUT = """
  ming::Array<int8_t, 2, 20, 8> buffer;
  HLS_PRAGMA(ARRAY_PARTITION variable=buffer type=complete dim=1)
  HLS_PRAGMA(ARRAY_RESHAPE variable=buffer type=cyclic factor=4 dim=3)
  HLS_PRAGMA(BIND_STORAGE variable=buffer type=ram_s2p impl=lutram)
  HLS_PRAGMA(ARRAY_PARTITION variable=p_table type=complete dim=1)
  HLS_PRAGMA(BIND_STORAGE variable=p_table type=rom_1p impl=bram)
"""


def test_the_plans_pragmas_are_read_back_from_the_text():
    assert set(planned_pragmas("buffer", BUFFER)) | set(planned_pragmas("p_table", TABLE)) == stated_pragmas(LAID_OUT)
    assert missing_layouts(LAID_OUT, {"table": TABLE, "buffer": BUFFER}, {"table": "p_table"}) == []


@pytest.mark.parametrize("dropped", ["type=complete dim=1)\n  HLS_PRAGMA(BIND_STORAGE variable=p_table",
                                     "ARRAY_RESHAPE variable=buffer type=cyclic factor=4 dim=3"])
def test_a_function_lacking_a_pragma_of_its_plan_is_refused_by_name(dropped):
    line = next(l for l in LAID_OUT.splitlines() if dropped.split(")")[0] in l)
    code = LAID_OUT.replace(line + "\n", "")
    array_name = "p_table" if "p_table" in line else "buffer"
    with pytest.raises(MissingLayout) as caught:
        check_layouts("node_p", "p", code, {"table": TABLE, "buffer": BUFFER}, {"table": "p_table"})
    message = str(caught.value)
    assert message.startswith("internal error: process node_p (p):"), message
    assert f"{array_name} (" in message and message.count("(ARRAY_") == 1, message


def test_a_pragma_with_another_factor_or_memory_is_not_the_plans():
    wrong = LAID_OUT.replace("factor=4", "factor=2").replace("impl=bram", "impl=lutram")
    assert missing_layouts(wrong, {"table": TABLE, "buffer": BUFFER}, {"table": "p_table"}) == [
        ("p_table", "BIND_STORAGE"), ("buffer", "ARRAY_RESHAPE")]


# ---------------------------------------------------------------------------
# the processes whose templates once forgot their constants
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("lanes", [1, 2, 4, 8, 16])
def test_a_tflite_adds_tables_give_each_lane_its_own_bank(lanes):
    code, storage, constants = emitted("add", lanes)
    assert set(storage) == {"a_table", "b_table"}
    for role in ("a_table", "b_table"):
        plan = storage[role]
        reads_per_bank = lanes / plan.banks  # every lane reads its table once per iteration
        assert plan.banks == lanes and reads_per_bank <= PORTS
        assert f"{constants[role]}[l][" in code
    assert missing_layouts(code, storage, constants) == []
    partitioned = "HLS_PRAGMA(ARRAY_PARTITION variable=p_a_table type=complete dim=1)" in code
    assert partitioned == (lanes > 1)


@pytest.mark.parametrize("lanes", [1, 2, 4, 8])
def test_the_cost_model_charges_the_add_tables_banks(lanes):
    _, storage, _ = emitted("add", lanes)
    # 256 int32 words: one BRAM18K (36 x 512) per bank, a bank per lane and table
    assert memory_cost(storage) == (2 * lanes, 0, 0, 0)
    graph, process = CASES["add"]()
    spec = process_spec(graph, process, (), (lanes, lanes), (lanes,))
    parts = resources(graph, process, Choice((), (lanes, lanes), (lanes,)), spec, 9)
    assert ("bram18k", "memory", 2 * lanes) in parts


@pytest.mark.parametrize("lanes", [1, 2, 4, 16])
def test_a_global_pools_requantization_constants_are_laid_out(lanes):
    code, storage, constants = emitted("global_avgpool", lanes)
    assert {"multiplier", "acc"} <= set(storage)
    assert constants and missing_layouts(code, storage, constants) == []
    for role, name in constants.items():
        assert f"variable={name} " in code
