"""Throughput and latency targets, and the frugal default: the least resources at a given speed."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from ming_py.boards import load_board
from ming_py.ilp import Budget, solve
from ming_py.ilp.footprint import footprint
from ming_py.ilp import objectives
from ming_py.ilp.objectives import FRUGAL_SLACK, TargetMissed, Targets
from ming_py.line_buffers import build_stream_graph
from ming_py.pipeline import lift

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tiny_cnn.onnx"


@pytest.fixture(scope="module")
def example():
    board = load_board("kv260")
    return build_stream_graph(lift(EXAMPLE)), board, Budget.of(board)


def score(solution):
    """The order "least resources" ranks designs by (largest share of the budget, then the sum of shares)."""
    return footprint(solution.costs.values(), solution.budget)


def fps(solution, board) -> float:
    return board.clock_mhz * 1e6 / solution.totals["throughput_cycles"]


def test_frugal_is_within_its_slack_of_the_fastest_and_no_dearer(example):
    graph, board, budget = example
    fastest = solve(graph, board, budget, "latency")
    frugal = solve(graph, board, budget, "frugal")
    assert frugal.totals["cycles"] <= math.floor(fastest.totals["cycles"] * (1 + FRUGAL_SLACK))
    assert score(frugal) <= score(fastest)
    assert frugal.totals["solver"]["fastest"]["cycles"] == fastest.totals["cycles"]
    assert "within 10 %" in frugal.totals["solver"]["rule"]


@pytest.mark.parametrize("share", ["1", "4", "10"])
def test_a_throughput_target_is_met_with_the_least_resources(example, share):
    graph, board, budget = example
    fastest = solve(graph, board, budget, "latency")
    target = fps(fastest, board) / int(share)
    chosen = solve(graph, board, budget, targets=Targets(fps=target))
    assert fps(chosen, board) >= target
    assert score(chosen) <= score(fastest)  # the fastest design meets every such target too
    assert chosen.totals["solver"]["targets"] == {"fps": target}
    if share == "10":
        assert chosen.totals["dsp"] < fastest.totals["dsp"] and chosen.totals["lut"] < fastest.totals["lut"]


def test_a_latency_target_is_met_with_the_least_resources(example):
    graph, board, budget = example
    fastest = solve(graph, board, budget, "latency")
    target_us = 3 * fastest.totals["latency_us"]
    chosen = solve(graph, board, budget, targets=Targets(latency_us=target_us))
    assert chosen.totals["cycles"] <= target_us * board.clock_mhz
    assert score(chosen) < score(fastest)


def test_both_targets_hold_together(example):
    graph, board, budget = example
    fastest = solve(graph, board, budget, "latency")
    targets = Targets(fps=fps(fastest, board) / 2, latency_us=2 * fastest.totals["latency_us"])
    chosen = solve(graph, board, budget, targets=targets)
    assert fps(chosen, board) >= targets.fps and chosen.totals["latency_us"] <= targets.latency_us


def test_a_target_no_design_meets_names_the_best_one(example):
    graph, board, budget = example
    fastest = solve(graph, board, budget, "latency")
    with pytest.raises(TargetMissed, match=r"--target-latency-us .*: no design within the budget meets it; "
                                           r"the fastest within it takes [0-9.]+ us \(([0-9,]+) cycles") as missed:
        solve(graph, board, budget, targets=Targets(latency_us=fastest.totals["latency_us"] / 2))
    assert f"({fastest.totals['cycles']:,} cycles" in str(missed.value)
    with pytest.raises(TargetMissed, match="--target-fps .*: no design reaches it; process .* alone needs"):
        solve(graph, board, budget, targets=Targets(fps=1e9))


def test_the_best_figure_of_a_missed_target_is_searched_only_when_the_message_is_shown(example, monkeypatch):
    graph, board, budget = example
    fastest = solve(graph, board, budget, "latency")
    searches = []
    best_achievable = objectives._best_achievable
    monkeypatch.setattr(objectives, "_best_achievable", lambda *args: searches.append(args) or best_achievable(*args))
    with pytest.raises(TargetMissed) as missed:
        solve(graph, board, budget, targets=Targets(latency_us=fastest.totals["latency_us"] / 2))
    assert searches == []  # a caller trying other targets throws the message away unread
    shown = str(missed.value)
    assert str(missed.value) == shown and "the fastest within it takes" in shown and len(searches) == 1


def test_a_missed_target_is_one_line_and_exit_2(tmp_path):
    result = subprocess.run([sys.executable, "-m", "ming_py.cli", "build", str(EXAMPLE), "-q", "--target-latency-us",
                             "0.001", "-o", str(tmp_path / "out")], capture_output=True, text=True)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    # the model proves no design meets it; the fastest design's simulation misses it too
    assert len(lines) == 1 and "the best design takes" in lines[0] and "(the fastest design)" in lines[0], \
        result.stderr
    assert not (tmp_path / "out").exists()
