"""Targets and calibration factors out of the range ming computes with are refused up front, in one line: none
reaches the import or the ILP to overflow there (a 400-digit integer, 1e308, 1e-308), and the arithmetic that
uses them is checked for finiteness as well."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ming_py.boards import load_board
from ming_py.calibration import FACTOR_RANGE, Calibration, load_calibration
from ming_py.errors import MingError
from ming_py.ilp import Choice, process_cost, solve
from ming_py.ilp.objectives import Targets
from ming_py.options import TARGET_RANGE, target
from test_cli import _not_onnx, assert_clean_error
from test_faults import EXAMPLE, ming
from test_unit_dse import BOARD, budget, chain

HUGE_INTEGER = int("9" * 400)


@pytest.mark.unit
@pytest.mark.parametrize("value", ["1e-308", "1e308", "1e-7", "2e12", "9" * 400, HUGE_INTEGER, -HUGE_INTEGER, 1e308])
def test_a_target_out_of_range_is_refused(value):
    with pytest.raises(MingError, match=r"^--target-fps .*: give a positive number from 1e-06 to 1e\+12"):
        target(value, "--target-fps")


@pytest.mark.unit
def test_a_target_at_either_end_of_the_range_is_taken():
    low, high = TARGET_RANGE
    assert target(str(low), "--target-fps") == low and target(high, "--target-latency-us") == high
    assert target(10 ** 6, "--target-fps") == 1e6


@pytest.mark.unit
@pytest.mark.parametrize("factor, shown", [("9" * 400, "an integer of 400 digits"), ("1e308", "1e+308"),
                                           ("1e-308", "1e-308"), ("1001", "1001")])
def test_a_calibration_factor_out_of_range_is_refused(tmp_path, factor, shown):
    path = tmp_path / "calibration.json"
    path.write_text('{"format": "ming-calibration/1", "factors": {"lut": {"mac": %s}}}' % factor)
    with pytest.raises(MingError) as error:
        load_calibration(path)
    assert str(error.value).startswith(f"{path}: factor lut.mac is {shown}: factors are numbers from 0.001 to 1000")


@pytest.mark.unit
def test_a_factor_at_either_end_of_the_range_is_taken(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text('{"format": "ming-calibration/1", "factors": {"lut": {"mac": 0.001, "process": 1000}}}')
    assert load_calibration(path).factor("lut", "mac") == FACTOR_RANGE[0]
    assert load_calibration(path).factor("lut", "other") == FACTOR_RANGE[1]


@pytest.mark.unit
def test_a_calibrated_amount_that_overflows_is_refused_naming_the_process():
    graph = chain()
    calibration = Calibration(factors=(("lut", (("process", 1e308),)),), path=Path("c.json"), digest="")
    choice = Choice((("oc", 1), ("ic", 1)), (1,), (1,))
    with pytest.raises(MingError, match=r"^process pw: its calibrated lut is not finite \(inf\); check the calibration"):
        process_cost(graph, graph.process("pw"), choice, calibration)


@pytest.mark.unit
@pytest.mark.parametrize("targets, option", [(Targets(fps=1e-308), "--target-fps 1e-308"),
                                             (Targets(latency_us=1e308), "--target-latency-us 1e+308")])
def test_the_cycles_a_target_implies_are_checked(targets, option):
    with pytest.raises(MingError, match=f"^{re.escape(option)}: implies inf cycles at .* MHz, more than the"):
        solve(chain(), load_board(BOARD), budget(200), targets=targets)


@pytest.mark.parametrize("args, message", [
    (["--target-fps", "1e-308"], "--target-fps 1e-308: give a positive number from 1e-06 to 1e+12"),
    (["--target-latency-us", "1e308"], "--target-latency-us 1e308: give a positive number from 1e-06 to 1e+12"),
])
def test_the_build_refuses_a_target_before_the_import(tmp_path, args, message):
    out = tmp_path / "out"
    assert_clean_error(ming("build", _not_onnx(tmp_path), *args, "-o", out, timeout=60), message)
    assert not out.exists()


def test_the_sweep_refuses_a_target_before_the_import(tmp_path):
    out = tmp_path / "sweep"
    assert_clean_error(ming("sweep", _not_onnx(tmp_path), "--target-latency-us", "100,1e308", "-o", out, timeout=60),
                       "--target-latency-us 1e308: give a positive number from 1e-06 to 1e+12")
    assert not out.exists()


def test_the_build_refuses_a_huge_calibration_factor(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text('{"format": "ming-calibration/1", "factors": {"lut": {"mac": %s}}}' % ("9" * 400))
    assert_clean_error(ming("build", EXAMPLE, "--calibration", path, "-o", tmp_path / "out", timeout=120),
                       f"{path}: factor lut.mac is an integer of 400 digits")
    assert not (tmp_path / "out").exists()
