"""`ming sweep`: rows with the build's resources (FIFOs included), targets as an axis, byte-identical outputs
and the plot."""

from __future__ import annotations

import csv
import json

import pytest

from ming_py.errors import MingError
from ming_py.ilp import sweep
from ming_py.line_buffers import build_stream_graph
from ming_py.ilp.explore import FifosOverBudget
from ming_py.ilp.objectives import TargetMissed
from ming_py.ilp.search import SearchStopped
from ming_py.ilp.solve import NoDesignFits
from ming_py.options import BuildOptions
from test_cli import _not_onnx, assert_clean_error
from test_faults import EXAMPLE, ming

FILES = ("sweep.csv", "sweep.json", "sweep.png")


def test_identical_sweeps_write_identical_files(tmp_path):
    for out in ("a", "b"):
        result = ming("sweep", EXAMPLE, "--dsp", "20%,100%", "-o", tmp_path / out)
        assert result.returncode == 0, result.stderr
    for name in FILES:  # the png too: matplotlib's Agg output is deterministic once its version is left out
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    header = (tmp_path / "a" / "sweep.csv").read_text().splitlines()[0].split(",")
    assert header == list(sweep.COLUMNS) and "solve_seconds" not in header
    lines = result.stdout.splitlines()  # the time of each point goes to the terminal instead
    assert lines[0].split()[-1] == "seconds"
    assert [line.split("]")[-1].strip() for line in lines[1:]] == ["1/2", "2/2"]


def test_a_sweep_row_has_the_builds_resources(tmp_path):
    from ming_py.build import build
    from ming_py.pipeline import lift

    options = BuildOptions(limits={"dsp": "20%"})
    totals = json.loads(build(EXAMPLE, tmp_path / "out", options).files["report.json"])["totals"]
    row = sweep.sweep_row(build_stream_graph(lift(EXAMPLE)), options)
    assert row["dsp_budget"] == 249
    for key in ("dsp", "bram18k", "uram", "lut", "fifo_bram18k", "fifo_lut", "cycles", "latency_us",
                "estimated_cycles", "interval_cycles", "roofline_cycles"):
        assert row[key] == totals[key], key
    assert row["fifo_lut"] > 0  # the FIFOs are in the row's LUTs


def test_targets_are_an_axis_of_one_row_each(tmp_path):
    result = ming("sweep", EXAMPLE, "--dsp", "20%", "--target-fps", "100,10000,1000000", "-q", "-o", tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "sweep.json").read_text())
    rows = data["points"]
    assert [r["target_fps"] for r in rows] == [100, 10000, 1000000]
    assert [r["status"] for r in rows] == ["optimal", "optimal", "target missed"]  # 200 MHz / 349 cycles at best
    for row in rows[:2]:
        assert row["fps"] >= row["target_fps"]
        assert row["fps"] == round(data["clock_mhz"] * 1e6 / row["interval_cycles"], 1)
        assert row["target_latency_us"] is None
    table = list(csv.DictReader((tmp_path / "sweep.csv").open()))
    assert [r["target_fps"] for r in table] == ["100.0", "10000.0", "1000000.0"]
    assert {r["target_latency_us"] for r in table} == {""} and table[2]["cycles"] == ""


def test_a_bad_target_list_is_refused_before_the_import(tmp_path):
    assert_clean_error(ming("sweep", _not_onnx(tmp_path), "--target-fps", "100,,1000", cwd=tmp_path),
                       "--target-fps 100,,1000: an empty target in the list")
    assert_clean_error(ming("sweep", _not_onnx(tmp_path), "--target-latency-us", "5,-1", cwd=tmp_path),
                       "--target-latency-us -1: give a positive number")
    assert not (tmp_path / "sweep").exists()


@pytest.mark.unit
def test_sweep_points_cross_budgets_and_targets():
    points = sweep.sweep_points({"dsp": "5%,20%", "bram18k": None}, {"fps": [100, 1000], "latency_us": [None]})
    assert points == [({"dsp": "5%", "bram18k": None}, 100, None), ({"dsp": "5%", "bram18k": None}, 1000, None),
                      ({"dsp": "20%", "bram18k": None}, 100, None), ({"dsp": "20%", "bram18k": None}, 1000, None)]


def _raising(error: Exception):
    def explore(stream_graph, options):
        raise error

    return explore


@pytest.mark.unit
@pytest.mark.parametrize("error, status", [(NoDesignFits, "infeasible"), (TargetMissed, "target missed"),
                                           (SearchStopped, "unsolved"), (FifosOverBudget, "FIFOs over budget")])
def test_a_point_without_a_design_has_a_status(monkeypatch, error, status):
    monkeypatch.setattr(sweep, "explore", _raising(error("no design")))
    row = sweep.sweep_row(None, BuildOptions(limits={"dsp": "5%"}, target_fps=100.0))
    # --dsp 5% of the KV260's 1,248; the default shares of what its block design leaves of the others
    assert row == {"dsp_budget": 62, "bram18k_budget": 255, "uram_budget": 57, "lut_budget": 77420,
                   "target_fps": 100.0, "target_latency_us": None, "status": status}


@pytest.mark.unit
def test_any_other_error_stops_the_sweep(monkeypatch):
    monkeypatch.setattr(sweep, "explore", _raising(MingError("pinned depth")))
    with pytest.raises(MingError, match="pinned depth"):
        sweep.sweep_row(None, BuildOptions())


def _row(dsp_budget: int, bram18k_budget: int, cycles: int, **given) -> dict:
    return {"dsp_budget": dsp_budget, "bram18k_budget": bram18k_budget, "uram_budget": 64, "lut_budget": 81984,
            "target_fps": None, "target_latency_us": None, "status": "optimal", "cycles": cycles,
            "latency_us": cycles / 200, "estimated_cycles": cycles, "interval_cycles": cycles // 2,
            "fps": 200e6 / (cycles // 2),
            "roofline_cycles": 10_000 // dsp_budget, "ratio": 1.0, "dsp": dsp_budget // 2, "bram18k": 10, "uram": 0,
            "lut": 5000, "fifo_bram18k": 0, "fifo_lut": 40} | given


@pytest.mark.unit
def test_the_plot_has_one_line_per_bram_budget_and_the_roofline():
    rows = [_row(dsp, bram, 100_000 // dsp + bram) for bram in (144, 288) for dsp in (62, 249, 1248)]
    rows.append({k: v for k, v in _row(12, 144, 1000).items() if k in sweep.COLUMNS[:6]} | {"status": "infeasible"})
    figure = sweep.figure(rows, "tiny_cnn on kv260")
    [axis] = figure.axes
    latency = [line for line in axis.get_lines() if line.get_label().startswith("latency")]
    interval = [line for line in axis.get_lines() if line.get_label().startswith("interval")]
    assert [line.get_label() for line in latency] == ["latency (BRAM18K budget 144)", "latency (BRAM18K budget 288)"]
    assert len({line.get_color() for line in latency}) == 2
    assert all(line.get_linestyle() == "-" and line.get_marker() == "o" for line in latency)
    assert all(line.get_linestyle() == "--" and line.get_marker() == "s" for line in interval) and len(interval) == 2
    assert list(latency[0].get_xdata()) == [62, 249, 1248]
    legend = [text.get_text() for text in axis.get_legend().get_texts()]
    assert legend == ["BRAM18K budget 144", "BRAM18K budget 288", "latency", "interval",
                      "roofline: MACs / MAC lanes the budget holds"]
    assert len(axis.texts) == 0 and axis.get_xscale() == axis.get_yscale() == "log"
    assert axis.get_ylabel() == "cycles" and figure.get_suptitle() == "tiny_cnn on kv260"
    assert sweep.plot(rows, "tiny_cnn on kv260")[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.unit
def test_rows_with_targets_are_plotted_against_the_dsp_they_use():
    rows = [_row(dsp, 288, 50_000, target_fps=fps, dsp=used) for fps, used in ((100.0, 0), (1000.0, 12))
            for dsp in (62, 249)]
    [axis] = sweep.figure(rows, "tiny_cnn on kv260", clock_mhz=200).axes
    assert axis.get_xlabel().startswith("DSP used") and axis.get_xscale() == "symlog"  # a design of no DSP
    latency = [line for line in axis.get_lines() if line.get_label().startswith("latency")]
    assert [line.get_label() for line in latency] == ["latency (fps ≥ 100)", "latency (fps ≥ 1000)"]
    assert [list(line.get_xdata()) for line in latency] == [[0, 0], [12, 12]]
    bounds = sorted(line.get_ydata()[0] for line in axis.get_lines() if line.get_linestyle() == ":")
    assert bounds == [200_000, 2_000_000]  # the interval each target allows at 200 MHz
