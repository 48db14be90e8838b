"""The lean requantization datapath (numerics.requantize_lean, ming::requantize_lean) equals the exact
emulation of onnxruntime's float32 rule (numerics.requantize) over every accumulator value.

Both are monotonic in |acc| and odd-symmetric before the zero point, and |acc| >= limit saturates
every int8/uint8 output in both (the lean datapath clamps |acc| to the limit), so equality over
|acc| in [0, limit] for every zero point decides equality over all int32 accumulators. The tests
check that range exhaustively, for a grid of multipliers and for every channel of the zoo's MAC
layers and global average pools (their accumulators' reachable range, from the weights and the
int8 input range, on both sides of the limit).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import zoo
from ming_py import numerics as nx
from ming_py.ir import AccRequant, AverageRequant
from ming_py.pipeline import lift
from line_buffers.streaming import build_stream_graph

TEMPLATES = Path(__file__).resolve().parents[1] / "emit" / "templates"
SATURATED = nx.LEAN_SATURATING


def exact_magnitude(a: np.ndarray, multiplier: np.float32) -> np.ndarray:
    return nx.requantize(a, multiplier, 0, nx.I32_MIN, nx.I32_MAX).astype(np.int64)


def assert_lean_exact(multiplier: np.float32, constants: nx.LeanRequant) -> int:
    """Every |acc| in [0, limit + 2]: the magnitudes agree below the limit, both saturate from it on."""
    a = np.arange(constants.limit + 3, dtype=np.int64)
    exact = exact_magnitude(a, multiplier)
    lean = nx.lean_magnitude(np.minimum(a, constants.limit), constants.mantissa, constants.shift)
    below = a < constants.limit
    mismatch = np.flatnonzero(below & (exact != lean))
    assert mismatch.size == 0, (multiplier, constants, a[mismatch[:5]], exact[mismatch[:5]], lean[mismatch[:5]])
    assert (exact[~below] >= SATURATED).all() and (lean[~below] >= SATURATED).all()
    assert exact[constants.limit - 1] < SATURATED  # the least saturating magnitude
    return a.size


GRID = sorted({np.float32(2.0 ** e) for e in np.random.default_rng(7).uniform(-12, 2, 48)}
              | {np.float32(v) for v in (0.5, 0.25, 1.0, 3.0, 0.75, 2.0 ** -14, 1.5 * 2.0 ** -13)}
              | {np.nextafter(np.float32(0.5), np.float32(0)), np.nextafter(np.float32(0.5), np.float32(1))}
              | {np.float32(np.uint32(0x3B7FFFFF).view(np.float32))})  # mantissa all ones


def test_lean_equals_exact_over_every_accumulator_for_a_grid_of_multipliers():
    checked = sum(assert_lean_exact(m, nx.lean_requant(m)) for m in GRID)
    assert checked > 10_000_000


@pytest.mark.unit
def test_the_common_shift_scales_mantissas_without_changing_a_result():
    multipliers = np.array([0.003, 0.0021, 0.0052, 0.0011], np.float32)
    lean = nx.lean_channels(multipliers)
    assert len({c.shift for c in lean}) == 1 and max(c.mantissa for c in lean) >= 1 << 24
    for m, c in zip(multipliers, lean):
        assert_lean_exact(m, c)


@pytest.mark.unit
def test_multipliers_without_a_lean_datapath():
    assert nx.lean_requant(np.float32(2.0 ** -16)) is None  # the limit would pass 2^24: float32(acc) rounds
    assert nx.lean_requant(np.float32(0.0)) is None
    assert nx.lean_channels(np.array([0.01, 2.0 ** -20], np.float32)) is None


@pytest.mark.unit
@pytest.mark.parametrize("zero_point, qmin, qmax", [(-128, -128, 127), (0, -128, 127), (127, -128, 127),
                                                     (-37, -128, 127), (0, 0, 255), (200, 0, 255)])
def test_signs_zero_points_and_saturation(zero_point, qmin, qmax):
    m = np.float32(0.0037)
    c = nx.lean_requant(m)
    acc = np.arange(-c.limit - 5, c.limit + 6, dtype=np.int64)
    acc = np.concatenate([acc, [nx.I32_MIN + 1, nx.I32_MAX, -(1 << 24) - 1, 1 << 24]])
    lean = nx.requantize_lean(acc, c.mantissa, c.shift, c.limit, zero_point, qmin, qmax)
    assert np.array_equal(lean, nx.requantize(acc, m, zero_point, qmin, qmax))


def reachable(weights: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per output channel, the least and greatest accumulator over int8 inputs."""
    w = weights.reshape(weights.shape[0], -1).astype(np.int64)
    low = bias + np.where(w > 0, w * -128, w * 127).sum(axis=1)
    high = bias + np.where(w > 0, w * 127, w * -128).sum(axis=1)
    return low, high


def assert_channel_exact(multiplier: np.float32, constants: nx.LeanRequant, zero_point: int, low: int,
                         high: int) -> None:
    """Every reachable accumulator within one past the limit on either side, and the extremes."""
    span = constants.limit + 1
    acc = np.arange(max(low, -span), min(high, span) + 1, dtype=np.int64)
    acc = np.concatenate([acc, [low, high]])
    lean = nx.requantize_lean(acc, constants.mantissa, constants.shift, constants.limit, zero_point)
    assert np.array_equal(lean, nx.requantize(acc, multiplier, zero_point)), (multiplier, constants)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tiny_cnn", "residual_block", "dw_separable", "lenet"])
def test_every_channel_of_the_zoo_is_exact(name, quantized):
    graph = build_stream_graph(lift(quantized(name, per_channel=True)))
    layers = 0
    for p in graph.processes:
        e = p.epilogue
        if isinstance(e, AccRequant):
            lean = nx.lean_channels(e.multipliers)
            assert lean is not None, p.name
            lows, highs = reachable(p.weights, e.bias.astype(np.int64))
            for m, c, low, high in zip(e.multipliers, lean, lows, highs):
                assert_channel_exact(m, c, e.zero_point, int(low), int(high))
            layers += 1
        elif isinstance(e, AverageRequant):
            m = nx.ort_gap_multiplier(e.x_scale, e.y_scale, e.count)
            window = e.count * 255  # sum of raw int8 values minus count * zero point
            assert_channel_exact(m, nx.lean_requant(m), e.zero_point, -window, window)
            layers += 1
    assert layers > 0


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_cpp_equals_python(tmp_path):
    """ming::requantize_lean == numerics.requantize_lean over every accumulator within 3 of the limits,
    for a grid of constants and zero points."""
    source = tmp_path / "lean.cpp"
    source.write_text(
        '#include <cstdio>\n#include "ming_numerics.h"\n'
        "int main() {\n  unsigned mantissa, shift, limit;\n  int zero_point, low, high;\n"
        '  while (std::scanf("%u %u %u %d %d %d", &mantissa, &shift, &limit, &zero_point, &low, &high) == 6) {\n'
        "    for (int acc = low; acc <= high; acc++) {\n"
        "      std::putchar(ming::requantize_lean(acc, mantissa, shift, limit, zero_point) & 0xFF);\n"
        "    }\n  }\n}\n")
    binary = tmp_path / "lean"
    subprocess.run(["g++", "-std=c++17", "-O2", "-DMING_CSIM", f"-I{TEMPLATES}", str(source), "-o", str(binary)],
                   check=True)
    lines, expected = [], []
    for m in GRID[::3] + [np.float32(0.003)]:
        c = nx.lean_requant(m)
        for zero_point in (-128, 0, 51):
            low, high = -c.limit - 3, c.limit + 3
            lines.append(f"{c.mantissa} {c.shift} {c.limit} {zero_point} {low} {high}")
            expected.append(nx.requantize_lean(np.arange(low, high + 1), c.mantissa, c.shift, c.limit, zero_point))
    result = subprocess.run([str(binary)], input="\n".join(lines).encode(), capture_output=True, check=True)
    assert np.array_equal(np.frombuffer(result.stdout, np.int8), np.concatenate(expected))
