"""A requantization is proved `fixed_point.CHANNEL_BLOCK` output channels at a time; the parameters ming applies
to all of a layer's channels (output zero point, clamp, rounding) must agree between blocks, and where they do
not the one-line refusal names which differ and what the layer needs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from ming_py.errors import MingError
from ming_py.frontends import fixed_point

CHANNELS = 2 * fixed_point.CHANNEL_BLOCK  # two blocks
SHARED = (3, {True}, -128, 127)  # output zero point, roundings, clamp low, clamp high of the first block


def _blocks_proved_as(second, monkeypatch) -> None:
    """`_proved_parameters` gives SHARED for the first block and `second` for the next."""
    calls = []

    def proved(steps, x, where):
        zero_point, roundings, low, high = SHARED if not calls else second
        calls.append(x.shape[1])
        ones = np.ones(x.shape[1], np.int64)
        return 0 * ones, (1 << 30) * ones, 31 * ones, zero_point, set(roundings), low, high

    monkeypatch.setattr(fixed_point, "_proved_parameters", proved)


REMEDY = ("ming applies one output zero point, one clamp (the fused activation) and one rounding to all of a "
          "layer's channels (per-channel scales and biases are fine): quantize the layer's output per tensor, "
          "with one activation")


@pytest.mark.unit
@pytest.mark.parametrize("second, differing", [
    ((4, {True}, -128, 127), "output zero point differs"),
    ((3, {True}, 0, 127), "clamp differs"),
    ((3, {False}, -128, 127), "rounding differs"),
    ((4, {True, False}, -128, 6), "output zero point and clamp differ"),
])
def test_parameters_that_differ_between_channels_are_named_with_what_to_do(second, differing, monkeypatch):
    _blocks_proved_as(second, monkeypatch)
    with pytest.raises(MingError) as error:
        fixed_point.requant_of(SimpleNamespace(steps=[]), (3,), CHANNELS, "node 'conv'")
    assert str(error.value) == f"node 'conv': the requantization's {differing} between output channels; {REMEDY}"


@pytest.mark.unit
def test_parameters_shared_by_every_block_give_one_requantization(monkeypatch):
    _blocks_proved_as((3, {True, False}, -128, 127), monkeypatch)
    requant = fixed_point.requant_of(SimpleNamespace(steps=[]), (3,), CHANNELS, "node 'conv'")
    assert requant.multiplier.shape == (CHANNELS,)
    assert (requant.zero_point, requant.double_round, requant.qmin, requant.qmax) == (3, True, -128, 127)
