"""Targets met where they are checked: on the cycle-level simulation of the built design (`ilp.simulated_targets`),
and the simulated latency as the build's headline."""

from __future__ import annotations

import json
import math
import re
from types import SimpleNamespace

import pytest

from ming_py.boards import load_board
from ming_py.ilp import simulated_targets
from ming_py.ilp.explore import explore
from ming_py.ilp.objectives import TargetMissed, Targets
from ming_py.line_buffers import build_stream_graph
from ming_py.options import BuildOptions
from ming_py.simulate import SimResult

from test_faults import ming

BOARD = load_board("kv260")


def simulated(cycles: int, interval: int | None = None) -> SimResult:
    """A simulation whose latency is `cycles` and whose interval is `interval` (one process busy that long)."""
    interval = cycles if interval is None else interval
    return SimResult(cycles, 1, {}, {}, None, {}, finish={"p": interval}, start={"p": 0})


def found(estimate: int, cycles: int, interval: int | None = None):
    """A design the model estimates at `estimate` cycles and the simulation runs in `cycles`."""
    return SimpleNamespace(totals={"cycles": estimate, "throughput_cycles": estimate}), simulated(cycles, interval)


@pytest.mark.unit
def test_a_missed_latency_target_is_solved_again_tightened_by_the_simulation():
    asked = Targets(latency_us=1000 / BOARD.clock_mhz)  # 1,000 cycles
    given = []
    designs = iter([found(990, 1100), found(890, 980)])

    def design(targets):
        given.append(targets)
        return next(designs)

    solution, result = simulated_targets.meeting_targets(design, None, asked, BOARD)
    assert result.cycles == 980 and solution.totals["cycles"] == 890  # the first design that meets it
    assert given[0] == asked
    # the model's 990 cycles scaled by 1,000 / 1,100 simulated, the bound half a cycle past it
    assert math.floor(given[1].latency_us * BOARD.clock_mhz) == math.floor(990 * 1000 / 1100) == 900


@pytest.mark.unit
def test_a_target_no_design_meets_in_simulation_names_the_best_miss():
    asked = Targets(latency_us=1000 / BOARD.clock_mhz)
    designs = iter([found(990, 1100), found(899, 1050), found(850, 1020), found(800, 1060), found(780, 1090)])
    with pytest.raises(TargetMissed) as missed:
        simulated_targets.meeting_targets(lambda targets: next(designs), None, asked, BOARD)
    text = str(missed.value)
    assert "\n" not in text
    assert text == ("--target-latency-us 5: the best design takes 5.10 us in the cycle-level simulation (1,020 "
                    "cycles at 200 MHz, the target 1,000), 2.0 % over (the best of 5 designs, the targets rescaled "
                    "after each miss); relax the target or raise the budget")


@pytest.mark.unit
def test_a_throughput_target_is_checked_on_the_simulated_interval():
    asked = Targets(fps=BOARD.clock_mhz * 1e6 / 500)  # one image per 500 cycles
    given = []
    designs = iter([found(480, 2000, 520), found(450, 2000, 490)])

    def design(targets):
        given.append(targets)
        return next(designs)

    _, result = simulated_targets.meeting_targets(design, None, asked, BOARD)
    assert result.interval_cycles == 490
    assert math.floor(BOARD.clock_mhz * 1e6 / given[1].fps) == min(math.floor(480 * 500 / 520), 479) == 461


@pytest.mark.unit
def test_a_missed_throughput_target_names_the_simulated_images_per_second():
    asked = Targets(fps=BOARD.clock_mhz * 1e6 / 400)  # 500,000 images/s
    designs = iter([found(390, 2000, 500)])

    def design(targets):
        try:
            return next(designs)
        except StopIteration:
            raise TargetMissed("no design reaches it") from None

    with pytest.raises(TargetMissed) as missed:
        simulated_targets.meeting_targets(design, None, asked, BOARD)
    assert str(missed.value) == ("--target-fps 500000: the best design sustains 400,000.0 images/s in the "
                                 "cycle-level simulation (one image per 500 cycles at 200 MHz, the target 400), "
                                 "20.0 % short (no other design found); relax the target or raise the budget")


@pytest.mark.unit
def test_a_pessimistic_model_falls_back_on_the_fastest_design():
    """The model proves no design meets the target by its estimates, but the fastest design's simulation does:
    the search goes on from the target scaled up, and keeps the fastest design if nothing cheaper meets it."""
    asked = Targets(latency_us=1000 / BOARD.clock_mhz)
    given = []

    def design(targets):
        given.append(targets)
        if len(given) == 1:
            raise TargetMissed("no design within the budget meets it")
        return found(1050, 1010)  # cheaper, but misses

    fastest = found(1100, 950)
    solution, result = simulated_targets.meeting_targets(design, lambda: fastest, asked, BOARD)
    assert result.cycles == 950
    assert math.floor(given[1].latency_us * BOARD.clock_mhz) == math.floor(1100 * 1000 / 950)


def design_figures(graph, **options) -> dict:
    return explore(graph, BuildOptions(**options))[1].totals


@pytest.mark.parametrize("name", ["two_residual_stages", "dw_separable"])
def test_a_latency_target_between_the_fastest_and_the_default_is_met_in_simulation(quantized, lifted, tmp_path,
                                                                                     name):
    graph = build_stream_graph(lifted(name))
    fastest = design_figures(graph, objective="latency")["cycles"]
    default = design_figures(graph)["cycles"]
    target = (min(fastest, default) + max(fastest, default)) // 2
    target_us = target / BOARD.clock_mhz
    out = tmp_path / "out"
    result = ming("build", quantized(name), "--target-latency-us", f"{target_us:g}", "--no-verify", "-q", "-o", out)
    assert result.returncode == 0, result.stderr
    run = ming("simulate", out, "--json")
    assert run.returncode == 0, run.stderr
    cycles = json.loads(run.stdout)["cycles"]
    assert cycles <= target_us * BOARD.clock_mhz, (cycles, target, fastest, default)
    totals = json.loads((out / "report.json").read_text())["totals"]
    assert totals["cycles"] == cycles and totals["latency_us"] == round(cycles / BOARD.clock_mhz, 3)
    assert totals["estimated_cycles"] > 0 and "simulated_cycles" not in totals


def test_an_unreachable_latency_target_is_one_line_with_the_simulated_figures(quantized, lifted, tmp_path):
    graph = build_stream_graph(lifted("two_residual_stages"))
    fastest = design_figures(graph, objective="latency")["cycles"]
    target_us = (fastest - 20) / BOARD.clock_mhz
    result = ming("build", quantized("two_residual_stages"), "--target-latency-us", f"{target_us:g}", "-q",
                  "-o", tmp_path / "out")
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    match = re.fullmatch(r"ming: error: --target-latency-us [0-9.]+: the best design takes ([0-9.]+) us in the "
                         r"cycle-level simulation \(([0-9,]+) cycles at 200 MHz, the target ([0-9,]+)\), [0-9.]+ % over \(.*\); "
                         r"relax the target or raise the budget", lines[0])
    assert match, lines[0]
    cycles, bound = (int(match.group(i).replace(",", "")) for i in (2, 3))
    assert cycles > bound == math.floor(target_us * BOARD.clock_mhz)
    assert not (tmp_path / "out").exists()


def test_the_headline_is_the_simulated_latency_and_report_md_states_both(quantized, tmp_path):
    out = tmp_path / "out"
    assert ming("build", quantized("dw_separable"), "--no-verify", "-q", "-o", out).returncode == 0
    run = ming("simulate", out, "--json")
    simulated_run = json.loads(run.stdout)
    report = json.loads((out / "report.json").read_text())
    totals = report["totals"]
    assert totals["cycles"] == simulated_run["cycles"]
    assert totals["interval_cycles"] == simulated_run["interval_cycles"]
    text = (out / "report.md").read_text()
    difference = 100 * (totals["estimated_cycles"] - totals["cycles"]) / totals["cycles"]
    assert (f"Latency {totals['cycles']:,} cycles = {totals['latency_us']} us at {report['clock_mhz']} MHz in the "
            f"cycle-level simulation") in text
    assert f"the ILP's model estimated {totals['estimated_cycles']:,} cycles" in text
    assert f"({difference:+.1f} %)" in text
    assert f"# Latency: {totals['cycles']:,} cycles" in (out / "settings.yaml").read_text()
