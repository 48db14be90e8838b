"""FIFO storage (`array_layout.fifo_storage`): where a stream FIFO goes and what it takes, by its depth and width, as
docs/design-space.md ("FIFO depths") states it; the ILP's charge for the FIFOs a candidate's lanes widen
(`ilp.fifos`); and one description for the three that must agree: the BIND_STORAGE pragma of every FIFO in the C++,
report.json's per-channel `fifo_storage`, and the totals the budget is checked on. No model, no IREE, no compiler."""

from __future__ import annotations

import math
import re

import pytest

from ming_py.array_layout import SRL_DEPTH, SRL_MAX_BITS, fifo_storage
from ming_py.boards import load_board
from ming_py.emit.hls import emit_hls
from ming_py.emit.reports import report
from ming_py.ilp.fifos import FifoCharge
from ming_py.line_buffers.fifo import DEFAULT_PIXELS, reservation_plan
from ming_py.options import BuildOptions
from test_unit_simulate import chain, residual, strided

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("depth, width, impl, bram18k, lut", [
    (2, 8, "srl", 0, 8),  # a LUT per bit, however shallow
    (128, 8, "srl", 0, 32),  # 1 Kbit: shift registers, 32 words a LUT
    (16, 512, "srl", 0, 512),  # wide and at most 32 deep: a LUT per bit, not a BRAM18K per 36 bits
    (33, 64, "bram", 2, 0),  # past both: two 36-bit BRAM18K side by side
    (64, 512, "bram", 15, 0),  # 32 Kbit, but 512 bits wide: 15 BRAM18K, not the 2 its bits fill
    (2048, 8, "bram", 1, 0),  # 2,048 x 9
    (4096, 8, "bram", 2, 0),
    (1024, 16, "bram", 1, 0),  # 1,024 x 18
])
def test_a_fifo_goes_where_its_depth_and_width_say(depth, width, impl, bram18k, lut):
    storage = fifo_storage(depth, width)
    assert (storage.impl, storage.bram18k, storage.lut) == (impl, bram18k, lut)


@pytest.mark.parametrize("lanes", [1, 2, 3, 4, 8, 16, 32, 64])
def test_every_fifo_holds_its_words_and_takes_a_bram18k_per_36_bits_of_width_in_bram(lanes):
    width = 8 * lanes
    for depth in range(1, 2049):
        storage = fifo_storage(depth, width)
        if storage.impl == "srl":
            assert storage.bram18k == 0 and storage.lut == width * math.ceil(depth / SRL_DEPTH)
            assert depth * width <= SRL_MAX_BITS or depth <= SRL_DEPTH
        else:
            assert storage.lut == 0 and depth > SRL_DEPTH and depth * width > SRL_MAX_BITS
            assert storage.bram18k * 18 * 1024 >= depth * width and storage.bram18k >= math.ceil(width / 36)
        assert storage.bram18k <= fifo_storage(depth + 1, width).bram18k  # deeper never takes fewer BRAM18K


@pytest.mark.parametrize("make", [chain, strided, residual])
def test_a_candidate_is_charged_what_its_lanes_add_to_its_fifos(make):
    """One lane costs nothing beyond the reservation; L lanes cost the FIFO of the same values in words L times
    wider, less the one-lane FIFO's memory (never below nothing)."""
    graph = make()
    plan = reservation_plan(graph)
    fifos = FifoCharge(plan, (DEFAULT_PIXELS,))
    for channel in graph.channels.values():
        one = fifo_storage(plan.depths(DEFAULT_PIXELS)[channel.name], 8)
        for lanes in (l for l in (1, 2, 4, 8, 16) if channel.channels % l == 0):
            values = max(DEFAULT_PIXELS * channel.channels, plan.required.get(channel.name, 0))
            depth = max(2, math.ceil(values / lanes)) + plan.extra.get(channel.name, 0)
            wide = fifo_storage(depth, 8 * lanes)
            assert fifos._beyond_one_lane(channel.name, lanes) == \
                (max(0, wide.bram18k - one.bram18k), max(0, wide.lut - one.lut))
            if lanes == 1:
                assert fifos._beyond_one_lane(channel.name, lanes) == (0, 0)


@pytest.mark.parametrize("make, dsp", [(chain, 1248), (strided, 20), (residual, 1248), (residual, 10)])
def test_the_cpp_the_report_and_the_totals_count_the_same_fifos(make, dsp):
    """Every FIFO's BIND_STORAGE impl in the C++ is report.json's `fifo_storage`, the totals' FIFO memory is their
    sum, and the design with it fits its budget."""
    from ming_py.ilp.explore import explore

    graph = make()
    board, solution, _ = explore(graph, BuildOptions(board="kv260", objective="latency", limits={"dsp": str(dsp)}))
    schedule, totals = solution.schedule, solution.totals
    cpp = emit_hls(graph, schedule, load_board("kv260"))[f"{graph.name}.cpp"]
    bound = dict(re.findall(r"BIND_STORAGE variable=(\w+) type=fifo impl=(\w+)", cpp))
    channels = report(graph, schedule, board, solution)["channels"]
    assert {c["cpp_name"]: c["fifo_storage"]["impl"] for c in channels} == bound
    for c in channels:
        storage = fifo_storage(c["fifo_depth"], 8 * c["lanes"])
        assert c["fifo_storage"] == {"impl": storage.impl, "bram18k": storage.bram18k, "lut": storage.lut}
    assert totals["fifo_bram18k"] == sum(c["fifo_storage"]["bram18k"] for c in channels)
    assert totals["fifo_lut"] == sum(c["fifo_storage"]["lut"] for c in channels)
    budget = totals["solver"]["budget"]
    assert totals["bram18k"] <= budget["bram18k"] and totals["lut"] <= budget["lut"]
