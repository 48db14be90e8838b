"""Concurrent C-simulation: one thread per process over FIFOs of the scheduled depth, with deadlock detection.

Sequential csim (Vitis's: processes one after another over unbounded streams) cannot see a
deadlock; compiled with -DMING_CSIM_CONCURRENT the same generated C++ runs every dataflow
process on its own thread, blocks on full / empty FIFOs and reports a deadlock.
"""

from __future__ import annotations

import subprocess
import time

import numpy as np
import pytest

import zoo
from emit_helpers import csim, stream_graph_of
from ming_py import reference
from ming_py.csim import CONCURRENT_FLAGS, CsimDeadlock
from ming_py.dataflow import Schedule

NETWORKS = ["residual_block", "two_residual_stages", "dw_separable", "lenet", "tiny_cnn", "concat_branches"]
DEEP = 100_000  # deeper than any of these maps: no FIFO ever fills


def reference_output(graph, x):
    return reference.run(graph, x)[graph.outputs[0].name]


def deep_schedule(stream_graph) -> Schedule:
    return Schedule(depths={c: DEEP for c in stream_graph.channels})


def skip_channel(stream_graph) -> str:
    """residual_block's identity skip: the channel from the split straight into the add."""
    kinds = {p.name: p.kind for p in stream_graph.processes}
    (name,) = [c.name for c in stream_graph.channels.values()
               if kinds.get(c.producer) == "split" and kinds.get(c.consumer) == "add"]
    return name


def shallow_skip_schedule(stream_graph) -> Schedule:
    """Every FIFO 2 deep, the skip FIFO 1 deep: the split fills it long before the conv branch delivers."""
    skip = skip_channel(stream_graph)
    return Schedule(depths={c: 1 if c == skip else 2 for c in stream_graph.channels})


@pytest.mark.parametrize("name", NETWORKS)
def test_concurrent_csim_equals_reference(lifted, tmp_path, name):
    graph = lifted(name)
    x = zoo.random_input(name, 3)
    got = csim(graph, tmp_path / "out", x, deep_schedule(stream_graph_of(graph)), concurrent=True)
    assert np.array_equal(got, reference_output(graph, x))


def test_shallow_skip_fifo_deadlocks(lifted, tmp_path):
    graph = lifted("residual_block")
    stream_graph = stream_graph_of(graph)
    skip = skip_channel(stream_graph)
    split = stream_graph.channels[skip].producer
    start = time.monotonic()
    with pytest.raises(CsimDeadlock) as caught:
        csim(graph, tmp_path / "out", zoo.random_input("residual_block", 0), shallow_skip_schedule(stream_graph),
             concurrent=True)
    assert time.monotonic() - start < 15  # compile (~2 s) + detection (~1 s)
    error = caught.value
    lines = str(error).splitlines()
    assert lines[0] == "deadlock: every process is blocked"
    assert lines[1:] == error.report and error.report
    assert f"  {split} waits to write to {skip} (full, 1/1)" in error.report, error.report
    for line in error.report:
        assert line.startswith("  ") and " waits to " in line
        assert line.endswith("(empty, 0/2)") or line.endswith("(full, 2/2)") or line.endswith("(full, 1/1)"), line
    # Every process of the design is blocked, so every one is named.
    named = {line.split()[0] for line in error.report}
    assert {p.name for p in stream_graph.processes} <= named


def test_sequential_csim_cannot_see_that_deadlock(lifted, tmp_path):
    graph = lifted("residual_block")
    x = zoo.random_input("residual_block", 0)
    got = csim(graph, tmp_path / "out", x, shallow_skip_schedule(stream_graph_of(graph)))
    assert np.array_equal(got, reference_output(graph, x))


def test_deep_fifos_remove_the_deadlock(lifted, tmp_path):
    graph = lifted("residual_block")
    stream_graph = stream_graph_of(graph)
    x = zoo.random_input("residual_block", 0)
    assert np.array_equal(csim(graph, tmp_path / "all", x, deep_schedule(stream_graph), concurrent=True),
                          reference_output(graph, x))
    # Deepening the skip FIFO alone is enough; the other FIFOs stay 2 deep.
    depths = {c: 2 for c in stream_graph.channels} | {skip_channel(stream_graph): DEEP}
    assert np.array_equal(csim(graph, tmp_path / "skip", x, Schedule(depths=depths), concurrent=True),
                          reference_output(graph, x))


def test_deadlock_timeout_is_configurable(lifted, tmp_path, monkeypatch):
    graph = lifted("residual_block")
    schedule = shallow_skip_schedule(stream_graph_of(graph))
    x = zoo.random_input("residual_block", 0)
    with pytest.raises(CsimDeadlock):  # warm the compile cache
        csim(graph, tmp_path / "out", x, schedule, concurrent=True)
    monkeypatch.setenv("MING_CSIM_DEADLOCK_SECONDS", "2.5")
    start = time.monotonic()
    with pytest.raises(CsimDeadlock):
        csim(graph, tmp_path / "out", x, schedule, concurrent=True)
    assert time.monotonic() - start >= 2.5


def test_no_false_deadlock_under_constant_blocking(lifted, tmp_path, monkeypatch):
    """Depth-1 FIFOs everywhere on a chain: processes block all the time but always progress."""
    monkeypatch.setenv("MING_CSIM_DEADLOCK_SECONDS", "0.05")
    graph = lifted("tiny_cnn")
    x = zoo.random_input("tiny_cnn", 1)
    schedule = Schedule(depths={c: 1 for c in stream_graph_of(graph).channels})
    assert np.array_equal(csim(graph, tmp_path / "out", x, schedule, concurrent=True), reference_output(graph, x))


@pytest.mark.parametrize("concurrent", [False, True], ids=["sequential", "concurrent"])
def test_generated_cpp_is_warning_free_in_both_modes(lifted, tmp_path, concurrent):
    from ming_py.boards import load_board
    from ming_py.build import design
    from ming_py.output import write_tree

    flags = list(CONCURRENT_FLAGS) if concurrent else []
    for name in ("residual_block", "lenet", "concat_branches"):
        out = tmp_path / name
        write_tree(design(lifted(name), load_board("kv260")).files, out)
        hls = out / "hls"
        # The first one fully optimized too: -O2 enables more warnings (e.g. -Wmaybe-uninitialized).
        mode = ["-O2", "-o", str(tmp_path / f"{name}_csim")] if name == "residual_block" else ["-fsyntax-only"]
        result = subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-DMING_CSIM", *flags, *mode,
                                 "-I", str(hls), str(hls / f"{name}.cpp"), str(hls / f"{name}_tb.cpp")],
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr


def test_streams_carry_their_depth_and_the_synthesis_path_stays_plain(lifted):
    from ming_py.boards import load_board
    from ming_py.build import design

    graph = lifted("residual_block")
    stream_graph = stream_graph_of(graph)
    schedule = shallow_skip_schedule(stream_graph)
    text = design(graph, load_board("kv260"), schedule).files["hls/residual_block.cpp"]
    for channel in stream_graph.channels:
        assert f'hls::stream<ming::Pack<1>, {schedule.depth_of(channel)}> {channel}("{channel}");' in text
    assert "HLS_PRAGMA(STREAM" not in text
    regions = text.split("#ifdef MING_CSIM_CONCURRENT")[1:]
    assert len(regions) == 2  # the dataflow region and the top
    for region in regions:
        threaded, rest = region.split("#else", 1)
        plain = rest.split("#endif", 1)[0]
        assert "ming_csim::dataflow({" in threaded
        assert "ming_csim" not in plain and "[&]" not in plain and plain.count(");") == threaded.count("}},")
