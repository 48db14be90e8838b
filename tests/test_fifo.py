"""FIFO sizing: the computed depths let every network run concurrently; smaller skip FIFOs deadlock, and a
deadlocked design's reports say so instead of a latency. A build simulates its final design once."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import zoo
from ming_py import reference
from ming_py.build import BuildOptions, design
from ming_py.ilp.explore import explore
from ming_py.output import write_tree
from ming_py.csim import CsimDeadlock, run_csim
from ming_py.emit.reports import report
from ming_py.simulate import simulate
from ming_py.line_buffers import build_stream_graph
from ming_py.line_buffers.fifo import depths_in_pixels

NETWORKS = ["residual_block", "two_residual_stages", "dw_separable", "lenet", "tiny_cnn", "concat_branches"]


def built(graph, tmp_path, **options):
    board, solution, _ = explore(build_stream_graph(graph), BuildOptions(**options))
    out = tmp_path / "out"
    write_tree(design(graph, board, solution=solution).files, out)
    return out, solution


@pytest.mark.parametrize("name", NETWORKS)
def test_networks_run_concurrently_with_the_computed_depths(lifted, tmp_path, name):
    graph = lifted(name)
    out, _ = built(graph, tmp_path, limits={"dsp": "20%"})
    x = zoo.random_input(name, 2)
    output = graph.outputs[0].name
    assert np.array_equal(run_csim(out, x, concurrent=True)[output], reference.run(graph, x)[output])


def test_skip_fifo_holds_the_line_buffer_lag(lifted):
    """8x8 map, two 3x3 convs with padding 1. A window is computed at the position after its last element,
    which reads its own pixel first: the second conv's first output (window ending at input (1, 1)) needs 11
    pixels of the first's, whose 11th output (window ending at (2, 3)) needs 21 input pixels; the identity
    skip must hold the 20 in between plus one."""
    graph = build_stream_graph(lifted("residual_block"))
    assert depths_in_pixels(graph) == {"input_split_to_block1_add": 21}
    stages = depths_in_pixels(build_stream_graph(lifted("two_residual_stages")))
    # stage 2: a stride-2 3x3 conv then a 3x3 conv (31 pixels) against a strided 1x1 projection (2 pixels)
    assert stages == {"input_split_to_stage1_add": 21, "stage1_add_split_to_stage2_proj": 30}


def forced(graph, tmp_path, depths: dict[str, int]):
    """The design ming builds for `graph`, written with some FIFO depths forced past `ming build`'s checks."""
    board, solution, _ = explore(build_stream_graph(graph), BuildOptions(limits={"dsp": "20%"}))
    schedule = replace(solution.schedule, depths=solution.schedule.depths | depths)
    out = tmp_path / "out"
    write_tree(design(graph, board, schedule=schedule, solution=solution).files, out)
    return out


SKIP = "input_split_to_block1_add"


def test_short_skip_fifo_deadlocks_and_the_report_names_it(lifted, tmp_path):
    graph = lifted("residual_block")
    out = forced(graph, tmp_path, {SKIP: 3})
    with pytest.raises(CsimDeadlock) as error:
        run_csim(out, zoo.random_input("residual_block", 0), concurrent=True)
    assert any(f"write to {SKIP} (full" in line for line in error.value.report)


def test_a_deadlocked_design_reports_its_deadlock_and_no_latency(lifted, tmp_path):
    out = forced(lifted("residual_block"), tmp_path, {SKIP: 3})
    totals = __import__("json").loads((out / "report.json").read_text())["totals"]
    assert not {"cycles", "latency_us", "interval_cycles"} & set(totals)
    assert any(f"write to {SKIP} (full" in line for line in totals["simulated_deadlock"])
    markdown = (out / "report.md").read_text()
    assert "The cycle-level simulation (`ming simulate`) deadlocks: " in markdown and "Latency" not in markdown
    assert f"# The cycle-level simulation deadlocks: {totals['simulated_deadlock'][0]}." in \
        (out / "settings.yaml").read_text()


def ming(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "ming_py.cli", *map(str, args)], capture_output=True, text=True)


def test_simulate_reports_the_forced_deadlock_too(lifted, tmp_path):
    out = forced(lifted("residual_block"), tmp_path, {SKIP: 3})
    result = ming("simulate", out, "--json")
    assert result.returncode == 3
    data = __import__("json").loads(result.stdout)
    assert any(f"write to {SKIP} (full" in line for line in data["deadlock"])


def test_a_pinned_depth_that_deadlocks_stops_the_build_with_the_least_that_completes(quantized, lifted, tmp_path):
    build = ming("build", quantized("residual_block"), "--dsp", "20%", "--set", f"{SKIP}.depth=3", "-q",
                 "-o", tmp_path / "out")
    assert build.returncode == 2 and not (tmp_path / "out").exists()
    (line,) = build.stderr.strip().splitlines()
    assert line.startswith(f"ming: error: --set {SKIP}.depth=3: the design deadlocks with it") and SKIP in line
    least = int(line.rsplit(" ", 1)[1])
    graph = lifted("residual_block")
    board, solution, _ = explore(build_stream_graph(graph), BuildOptions(limits={"dsp": "20%"}, settings={f"{SKIP}.depth": least}))
    stream_graph = build_stream_graph(graph)

    def deadlocks(depth: int) -> bool:
        schedule = replace(solution.schedule, depths=solution.schedule.depths | {SKIP: depth})
        return simulate(report(stream_graph, schedule, board, solution)).deadlock is not None

    assert 3 < least and not deadlocks(least) and deadlocks(least - 1)


def test_a_pinned_depth_past_the_budget_stops_the_build(quantized, tmp_path):
    build = ming("build", quantized("residual_block"), "--set", f"{SKIP}.depth=100000000", "-q", "-o", tmp_path / "out")
    assert build.returncode == 2 and not (tmp_path / "out").exists()
    (line,) = build.stderr.strip().splitlines()
    assert line.startswith(f"ming: error: --set {SKIP}.depth=100000000: with it the design needs ") and "BRAM18K" in line


def test_simulate_json_and_minimal_fifos(quantized, lifted, tmp_path):
    import json

    model = quantized("two_residual_stages")
    assert ming("build", model, "--dsp", "20%", "-q", "-o", tmp_path / "sized").returncode == 0
    assert ming("build", model, "--dsp", "20%", "--fifo", "minimal", "-q", "-o", tmp_path / "minimal").returncode == 0
    results = {}
    for variant in ("sized", "minimal"):
        run = ming("simulate", tmp_path / variant, "--json")
        assert run.returncode == 0, run.stderr
        results[variant] = json.loads(run.stdout)
        assert {"cycles", "first_output_cycles", "stalls", "fifo_peak"} <= results[variant].keys()
        report = json.loads((tmp_path / variant / "report.json").read_text())
        assert report["totals"]["cycles"] == results[variant]["cycles"]
        assert all(results[variant]["fifo_peak"][c["name"]] <= c["fifo_depth"] for c in report["channels"])
    assert results["minimal"]["cycles"] <= results["sized"]["cycles"]

    def fifo_bits(variant):
        channels = json.loads((tmp_path / variant / "report.json").read_text())["channels"]
        return sum(c["fifo_depth"] * c["lanes"] * 8 for c in channels)

    assert fifo_bits("minimal") < fifo_bits("sized")
    # the simulator follows the processes' read/write order, so what it completes cannot deadlock for real
    x = zoo.random_input("two_residual_stages", 3)
    graph = lifted("two_residual_stages")
    assert np.array_equal(run_csim(tmp_path / "minimal", x, concurrent=True)[graph.outputs[0].name],
                          reference.run(graph, x)[graph.outputs[0].name])


@pytest.mark.parametrize("name", ["two_residual_stages", "concat_branches", "tiny_cnn"])
def test_minimal_fifos_keep_every_token_on_time(lifted, name):
    """--fifo minimal: every FIFO as deep as one simulation says, no deeper, and the run cycle for cycle the same."""
    graph = lifted(name)
    stream_graph = build_stream_graph(graph)
    board, sized, _ = explore(build_stream_graph(graph), BuildOptions(limits={"dsp": "20%"}))
    _, minimal, _ = explore(build_stream_graph(graph), BuildOptions(limits={"dsp": "20%"}, minimal_fifos=True))
    assert minimal.schedule.lanes == sized.schedule.lanes

    def run(schedule):
        return simulate(report(stream_graph, schedule, board, sized))

    before, after = run(sized.schedule), run(minimal.schedule)
    assert after.deadlock is None
    assert (after.cycles, after.finish, after.stalls) == (before.cycles, before.finish, before.stalls)
    depths = {c: minimal.schedule.depth_of(c) for c in stream_graph.channels}
    assert all(depths[c] <= sized.schedule.depth_of(c) for c in depths)
    assert sum(depths.values()) < sum(sized.schedule.depth_of(c) for c in depths)
    # no deeper than needed: in the shrunk run some write of every shrunk FIFO waits for its last slot
    assert all(after.fifo_need[c] == d for c, d in depths.items() if d < sized.schedule.depth_of(c))
    # and a token less delays a write: the run differs somewhere, though not always in its latency
    channel = max(depths, key=lambda c: (depths[c], c))
    shallower = run(replace(minimal.schedule, depths=minimal.schedule.depths | {channel: depths[channel] - 1}))
    assert (shallower.cycles, shallower.finish, shallower.stalls, shallower.fifo_peak) != \
        (after.cycles, after.finish, after.stalls, after.fifo_peak)


@pytest.mark.parametrize("minimal_fifos", [False, True])
def test_a_build_simulates_its_final_design_once(lifted, monkeypatch, minimal_fifos):
    from ming_py import simulate as simulation, steps
    from ming_py.build import design_of
    from ming_py.ilp import explore as exploration

    schedules = []

    def counted(graph, schedule, *args, **kwargs):
        schedules.append(schedule)
        return simulation.simulate_schedule(graph, schedule, *args, **kwargs)

    monkeypatch.setattr(exploration, "simulate_schedule", counted)
    monkeypatch.setattr(steps, "simulate_schedule", counted)
    explored = steps.explore(steps.stream(lifted("residual_block")), BuildOptions(minimal_fifos=minimal_fifos))
    result = design_of(explored.streamed, explored.board, solution=explored.solution, simulated=explored.simulated)
    assert schedules.count(explored.solution.schedule) == 1
    assert result.report["totals"]["cycles"] == explored.simulated.cycles
