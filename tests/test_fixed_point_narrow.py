"""The narrow datapath of TFLite's requantization (numerics.requantize_narrow, ming::requantize_narrow) equals the
rule it replaces: TOSA's fixed-point RESCALE (numerics.fixed_point_requantize, with and without double rounding)
and LiteRT's FULLY_CONNECTED float rounding (numerics.requantize with half_away).

numerics.narrow_constants proves the equality over every int32 accumulator from the rule's thresholds (both are
monotone); these tests check the proof's conclusion where it can fail: at every threshold and its neighbours, on
random int32 accumulators, for random multiplier sets, near-ties and the layers' own constants, and that the
search refuses where no constants fit (the layer then keeps the rule as written)."""

from __future__ import annotations

import numpy as np
import pytest

from ming_py import numerics as nx
from ming_py.epilogues import rule_of
from ming_py.ir import FixedPointRequant


RANDOM_ACCUMULATORS = 1_000_000


def q31(real: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TFLite's QuantizeMultiplier: a Q31 multiplier in [2^30, 2^31) and the shift 31 + right shift."""
    exponent = np.floor(np.log2(real)).astype(np.int64) + 1
    multiplier = np.round(real * np.exp2(31 - exponent)).astype(np.int64)
    carry = multiplier == 1 << 31
    return np.where(carry, 1 << 30, multiplier), 31 - exponent + carry


def fixed_point(acc, multiplier, shift, double_round, zp, qmin=-128, qmax=127):
    return nx.fixed_point_requantize(acc, multiplier[:, None], shift[:, None], double_round, zp, qmin, qmax)


def narrow(acc, c: nx.NarrowRequant, zp, qmin=-128, qmax=127):
    column = lambda values: np.array(values, np.int64)[:, None]  # noqa: E731
    return nx.requantize_narrow(acc, column(c.multipliers), column(c.roundings_negative), column(c.roundings),
                                c.shift, c.low, c.high, c.center, zp, qmin, qmax)


def probes(rule, channels: int, qmin: int, qmax: int, rng) -> np.ndarray:
    """[channels, n]: every threshold and its neighbours, the int32 ends, zero, and random int32 values, half of them
    within the layer's unsaturated range."""
    t = np.minimum(nx.requant_thresholds(rule, channels, qmin, qmax), nx.I32_MAX)
    edges = np.concatenate([t - 2, t - 1, t, t + 1], axis=1)
    fixed = np.tile([nx.I32_MIN, nx.I32_MIN + 1, -1, 0, 1, nx.I32_MAX - 1, nx.I32_MAX], (channels, 1))
    span = max(int(np.abs(t).max()) * 2, 1)
    near = rng.integers(-span, span, (channels, RANDOM_ACCUMULATORS // 2))
    anywhere = rng.integers(nx.I32_MIN, nx.I32_MAX, (channels, RANDOM_ACCUMULATORS // 2), endpoint=True)
    return np.clip(np.concatenate([edges, fixed, near, anywhere], axis=1), nx.I32_MIN, nx.I32_MAX)


def assert_equal(expected: np.ndarray, got: np.ndarray, acc: np.ndarray, label) -> None:
    bad = np.argwhere(expected != got)
    assert bad.size == 0, (label, [(int(acc[i, j]), int(expected[i, j]), int(got[i, j])) for i, j in bad[:5]])


def random_sets(rng, count: int):
    """(multiplier, shift, zp) sets of 4 channels: real multipliers 2^-12 .. 2^-1, some sets with the real
    multiplier just beside a power of two or with a Q31 multiplier of many trailing ones/zeros (near-ties of the
    rounding)."""
    for index in range(count):
        real = np.exp2(rng.uniform(-9.9, -1, 4)) if index % 7 else np.exp2(rng.uniform(-12, -1, 4))
        if index % 5 == 1:
            real = np.exp2(np.round(np.log2(real))) * (1 + rng.choice([-1, 1], 4) * 2.0 ** -rng.integers(20, 30, 4))
        multiplier, shift = q31(real)
        if index % 5 == 2:
            multiplier = (multiplier | 0xFFFF) if index % 2 else (multiplier & ~0xFFFF)
        yield multiplier, shift, int(rng.integers(-128, 128))


# every test of this module is a unit test but the 300 sets, which run in the full suite; the unit tier checks
# the first 75 of them (the same draws: one seed, the same order)
@pytest.mark.parametrize("sets, least_proved", [pytest.param(75, 50, marks=pytest.mark.unit, id="75-sets"),
                                                pytest.param(300, 200, id="300-sets")])
def test_narrow_equals_the_fixed_point_rule_for_random_sets(sets, least_proved):
    rng = np.random.default_rng(2024)
    proved = refused = 0
    for index, (multiplier, shift, zp) in enumerate(random_sets(rng, sets)):
        double_round = bool(index % 2)
        c = nx.narrow_fixed_point(multiplier, shift, double_round, zp)
        if c is None:
            refused += 1
            continue
        proved += 1
        if index % 25:  # every set at its thresholds; one in 25 also on 10^6 random accumulators per channel
            rule = lambda a: fixed_point(a, multiplier, shift, double_round, zp)  # noqa: E731
            t = np.minimum(nx.requant_thresholds(rule, len(multiplier), -128, 127), nx.I32_MAX)
            acc = np.concatenate([t - 2, t - 1, t, t + 1], axis=1)
        else:
            acc = probes(lambda a: fixed_point(a, multiplier, shift, double_round, zp), len(multiplier), -128, 127,
                         rng)
        assert_equal(fixed_point(acc, multiplier, shift, double_round, zp), narrow(acc, c, zp), acc,
                     (multiplier, shift, double_round, zp))
    assert proved >= least_proved and refused >= 1  # e.g. channels whose multipliers are too far apart for one shift


@pytest.mark.unit
@pytest.mark.parametrize("double_round", [False, True])
@pytest.mark.parametrize("zp, qmin, qmax", [(-128, -128, 127), (0, -128, 127), (127, -128, 127), (-37, -128, 127),
                                            (3, 0, 255)])
def test_narrow_equals_the_fixed_point_rule_on_a_million_accumulators(double_round, zp, qmin, qmax):
    rng = np.random.default_rng(zp + 128 + 1000 * double_round)
    multiplier, shift = q31(np.array([0.00311, 0.0054, 0.0017, 0.0026]))
    c = nx.narrow_fixed_point(multiplier, shift, double_round, zp, qmin, qmax)
    assert c is not None
    rule = lambda a: fixed_point(a, multiplier, shift, double_round, zp, qmin, qmax)  # noqa: E731
    acc = probes(rule, len(multiplier), qmin, qmax, rng)
    assert_equal(rule(acc), narrow(acc, c, zp, qmin, qmax), acc, (double_round, zp))
    assert all(m < 1 << nx.NARROW_MULTIPLIER_BITS for m in c.multipliers)
    assert -(1 << 17) <= c.low - c.center and c.high - c.center < 1 << 17


# the unit tier checks the first zero point's layer (the same draws as the full suite's first)
@pytest.mark.parametrize("zero_points", [pytest.param((-128,), marks=pytest.mark.unit, id="one-layer"),
                                         pytest.param((-128, 4, 127), id="three-layers")])
def test_narrow_equals_the_float_rule_of_fully_connected_layers(zero_points):
    rng = np.random.default_rng(77)
    for zp in zero_points:
        m = np.exp2(rng.uniform(-9, -7, 6)).astype(np.float32)  # one common shift: a spread of 4x
        m[0] = np.float32(2.0 ** -7)  # products that are exact halves: ties of the rounding half away from zero
        c = nx.narrow_float32(m, zp)
        assert c is not None
        rule = lambda a: nx.requantize(a, m[:, None], zp, -128, 127, half_away=True)  # noqa: E731
        acc = probes(rule, len(m), -128, 127, rng)
        assert_equal(rule(acc), narrow(acc, c, zp), acc, zp)


@pytest.mark.unit
def test_double_rounding_needs_the_rounding_of_each_sign():
    """TOSA's double rounding adds +-2^30 by the accumulator's sign: the two roundings differ."""
    multiplier, shift = q31(np.array([0.0037]))
    c = nx.narrow_fixed_point(multiplier, shift, True, 5)
    assert c is not None and c.roundings_negative[0] < c.roundings[0]


@pytest.mark.unit
def test_the_search_refuses_where_the_proof_fails():
    multiplier, shift = q31(np.array([2.0 ** -16]))  # 255 levels span 2^24 accumulators: 27 bits, two DSP48E2
    assert nx.narrow_fixed_point(multiplier, shift, True, 0).operand_bits == nx.NARROW_WIDE_OPERAND_BITS
    multiplier, shift = q31(np.array([2.0 ** -20]))  # 2^28 accumulators: more than 27 bits
    assert nx.narrow_fixed_point(multiplier, shift, True, 0) is None
    multiplier, shift = q31(np.array([0.01, 0.00001]))  # one channel of a layer is enough to refuse
    assert nx.narrow_fixed_point(multiplier, shift, True, 0) is None
    assert nx.narrow_fixed_point(np.array([3 << 30]), np.array([31]), True, 0) is None  # real multiplier >= 1
    # int32 wrap-around at the ends: the rule is not monotone
    assert nx.narrow_fixed_point(np.array([(1 << 31) - 1]), np.array([31]), False, 100) is None
    assert nx.narrow_fixed_point(np.array([1 << 31]), np.array([40]), True, 0) is None  # not a Q31 multiplier
    assert nx.narrow_float32(np.array([1.5], np.float32), 0) is None


@pytest.mark.unit
@pytest.mark.parametrize("zp", [127, -128, 0, 5])
@pytest.mark.parametrize("double_round", [False, True])
def test_constants_fit_int32_where_a_level_is_reached_by_every_accumulator_or_by_none(zp, double_round):
    """A multiplier of 2^-62 gives one output whatever the accumulator: the thresholds of the other levels are
    I32_MIN or 2^31, outside int32 once one below or one above. The constants the C++ takes as int32_t (low, high,
    center) stay within int32, and the datapath still equals the rule at both ends."""
    multiplier, shift = np.array([1]), np.array([62])
    c = nx.narrow_fixed_point(multiplier, shift, double_round, zp)
    if c is None:
        return
    assert all(nx.I32_MIN <= v <= nx.I32_MAX for v in (c.low, c.high, c.center)), c
    acc = np.array([[nx.I32_MIN, nx.I32_MIN + 1, -1, 0, 1, nx.I32_MAX - 1, nx.I32_MAX]])
    assert_equal(fixed_point(acc, multiplier, shift, double_round, zp), narrow(acc, c, zp), acc, zp)


@pytest.mark.unit
def test_the_roundings_fit_the_sum_and_the_level_its_bits():
    """The roundings the ROMs hold have at most the sum's 48 bits, and the shifted sum at the clamp's ends (its
    extremes) fits the level bits the C++ computes in."""
    multiplier, shift = q31(np.exp2(np.random.default_rng(5).uniform(-10, -9, 16)))
    c = nx.narrow_fixed_point(multiplier, shift, True, -3)
    assert c is not None and c.rounding_bits <= nx.NARROW_SUM_BITS
    assert all(nx.narrow_sum_residue(r) == r for r in c.roundings + c.roundings_negative if abs(r) < 1 << 47)
    assert nx.narrow_sum_residue(1 << 47) == -(1 << 47) and nx.narrow_sum_residue(-1) == -1
    acc = np.tile([nx.I32_MIN, c.low, c.high, nx.I32_MAX], (len(c.multipliers), 1))
    column = lambda values: np.array(values, np.int64)[:, None]  # noqa: E731
    level = ((np.clip(acc, c.low, c.high) - c.center) * column(c.multipliers)
             + np.where(acc < 0, column(c.roundings_negative), column(c.roundings))) >> c.shift
    assert np.all(level >= -(1 << (c.level_bits - 1))) and np.all(level < 1 << (c.level_bits - 1))
    assert c.level_bits <= 16  # channels within an octave: the level is a few bits wider than the output


@pytest.mark.unit
def test_the_epilogue_falls_back_to_the_rule_as_written():
    def epilogue(real, narrow=True):
        multiplier, shift = q31(np.array(real))
        return FixedPointRequant(bias=np.zeros(len(real), np.int32), multiplier=multiplier.astype(np.int32),
                                 shift=shift, zero_point=-128, channel_dims=(0,), narrow=narrow)

    rule = rule_of(epilogue([0.003]))
    assert rule.datapath(epilogue([0.003, 0.004])) == "narrow"
    assert rule.datapath(epilogue([0.0003, 0.0004])) == "narrow, 27-bit operand"
    assert rule.datapath(epilogue([0.003, 2.0 ** -21])) == "fixed point 32 x 32"
    constants = dict(rule.constants(epilogue([0.003, 0.004])))
    assert constants["multiplier"] == nx.NARROW_MULTIPLIER_BITS and constants["rounding"] <= 48
    assert rule.datapath(epilogue([0.003, 0.004], narrow=False)) == "fixed point 32 x 32"  # BuildOptions' switch
