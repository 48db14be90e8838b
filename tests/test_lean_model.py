"""The yosys model of the lean requantization (benchmarks/calibration/requant_lean.v, calibrated into
requant_lean_dsp, requant_lean_dsp_shift_by_channel and requant_lean_fabric) computes what ming::requantize_lean
computes: numerics.requantize_lean, simulated with Icarus Verilog (skipped where iverilog is not on the PATH), with
the shift a constant of the process and from the per-channel ROM, on the constants numerics.lean_requant gives for
random float32 multipliers, at every output threshold and its neighbours, random accumulators and the int32 ends."""

from __future__ import annotations

import numpy as np
import pytest

from ming_py import numerics
from test_primitives import needs_iverilog, simulate

pytestmark = pytest.mark.unit


def lean_constants(rng, count: int) -> list[numerics.LeanRequant]:
    found = []
    while len(found) < count:
        c = numerics.lean_requant(np.float32(np.exp2(rng.uniform(-14, 0))))
        if c is not None:
            found.append(c)
    return found


def near_halves(c: numerics.LeanRequant) -> np.ndarray:
    """Accumulators whose product lies nearest one half above each whole part (the float32 rounding's band
    decides them), both signs."""
    whole = np.arange(0, 1 << 11)
    centre = np.round((whole + 0.5) * 2.0 ** c.shift / c.mantissa).astype(np.int64)
    acc = (centre[:, None] + np.arange(-1, 2)).reshape(-1)
    acc = acc[(acc >= 0) & (acc <= c.limit)]
    return np.concatenate([acc, -acc])


def accumulators(rng, c: numerics.LeanRequant, zero_point: int) -> np.ndarray:
    """Every output threshold of the channel and its neighbours, products near one half, random values, the int32
    ends."""
    thresholds = numerics.requant_thresholds(
        lambda acc: numerics.requantize_lean(acc, c.mantissa, c.shift, c.limit, zero_point), 1, -128, 127)
    t = np.clip(thresholds.reshape(-1), numerics.I32_MIN + 1, numerics.I32_MAX)
    span = int(c.limit) * 2 + 16
    return np.concatenate([t - 1, t, near_halves(c), rng.integers(-span, span, 200),
                           rng.integers(numerics.I32_MIN, numerics.I32_MAX, 20, endpoint=True),
                           [numerics.I32_MIN, -1, 0, numerics.I32_MAX]]).astype(np.int64)


@needs_iverilog
@pytest.mark.parametrize("zero_point", [-128, -3, 17])
def test_the_lean_model_computes_the_lean_rule(tmp_path, zero_point):
    rng = np.random.default_rng(zero_point + 200)
    channels = lean_constants(rng, 12)
    columns = {name: [] for name in ("acc", "mantissa", "limit", "shift")}
    for c in channels:
        acc = accumulators(rng, c, zero_point)
        columns["acc"].append(acc)
        for name in ("mantissa", "limit", "shift"):
            columns[name].append(np.full(len(acc), getattr(c, name), np.int64))
    fields = {name: (8 if name == "shift" else 32, np.concatenate(values)) for name, values in columns.items()}
    ports = ".clk(clk), .acc(acc), .mantissa(mantissa), .limit(limit), .shift(shift), .y()"
    # the ROM's shift (an input), and one instance per distinct shift as the constant of its process
    shifts = sorted({c.shift for c in channels})
    instances = [f"  requant_lean #(.SHIFT_BY_CHANNEL(1), .ZERO_POINT({zero_point})) by_channel({ports});"]
    instances += [f"  requant_lean #(.SHIFT({s}), .ZERO_POINT({zero_point})) constant{s}({ports});" for s in shifts]
    outputs = ["by_channel.y"] + [f"constant{s}.y" for s in shifts]
    y = simulate(tmp_path, "requant_lean", fields, instances, outputs, 2)
    acc, mantissa, limit, shift = (fields[name][1] for name in ("acc", "mantissa", "limit", "shift"))
    expected = numerics.requantize_lean(acc, mantissa, shift, limit, zero_point)
    np.testing.assert_array_equal(y[:, 0], expected)
    for column, s in enumerate(shifts, start=1):
        mine = shift == s
        np.testing.assert_array_equal(y[mine, column], expected[mine], err_msg=f"constant shift {s}")
