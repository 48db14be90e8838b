"""`ming sweep` takes at most MAX_POINTS points, counted from its lists before any point is built or solved."""

from __future__ import annotations

import pytest

from ming_py.errors import MingError
from ming_py.ilp import sweep
from test_cli import _not_onnx, assert_clean_error
from test_faults import ming


def _numbers(count: int, step: int = 1) -> str:
    return ",".join(str(step * (i + 1)) for i in range(count))


def test_a_sweep_past_the_cap_is_refused_before_the_import(tmp_path):
    out = tmp_path / "sweep"
    result = ming("sweep", _not_onnx(tmp_path), "--dsp", _numbers(1249), "--bram", _numbers(284), "--lut",
                  _numbers(65, 1000), "--target-fps", _numbers(81), "-o", out, timeout=60)
    assert_clean_error(result, "1,249 --dsp x 284 --bram x 65 --lut x 81 --target-fps values make "
                       f"{1249 * 284 * 65 * 81:,} "
                       f"points, more than the {sweep.MAX_POINTS:,} one sweep takes", "split the sweep")
    assert not out.exists()


@pytest.mark.unit
def test_the_points_are_counted_from_every_list():
    lists = {"dsp": _numbers(10), "bram18k": _numbers(10), "uram": None, "lut": None}
    sweep.check_point_count(lists, {"fps": _numbers(10), "latency_us": None})  # exactly the cap
    with pytest.raises(MingError, match="10 --dsp x 10 --bram x 10 --target-fps x 2 --target-latency-us values "
                                        "make 2,000 points, more than the 1,000"):
        sweep.check_point_count(lists, {"fps": _numbers(10), "latency_us": "5,50"})


@pytest.mark.unit
def test_sweep_points_refuses_before_building_a_point():
    lists = {"dsp": _numbers(1000), "bram18k": _numbers(1000), "uram": _numbers(1000), "lut": _numbers(1000)}
    with pytest.raises(MingError, match="make 1,000,000,000,000 points"):
        sweep.sweep_points(lists, {"fps": [None], "latency_us": [None]})
    assert len(sweep.sweep_points({"dsp": _numbers(1000)}, {"fps": [None], "latency_us": [None]})) == 1000
