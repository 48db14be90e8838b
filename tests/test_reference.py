"""`ming reference` against onnxruntime on the model zoo: equal (`==`) on every value, save one documented
case where onnxruntime runs a layer in float."""

from __future__ import annotations

import pytest

import zoo
from ming_py import parity

SEEDS = (0, 1, 2)

# (model, per channel): why ming's integer rules cannot equal onnxruntime there, and the measured bound (LSB)
NOT_EXACT = {
    # on x86 onnxruntime leaves the conv whose input has fan-out unfused (docs/numerics.md §4): MLAS's float
    # summation order, which no integer rule reproduces
    ("residual_block", True): 1,
}

MODELS = sorted(zoo.MODELS)


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("name", MODELS)
def test_reference_matches_onnxruntime(lifted, quantized, name, per_channel):
    graph = lifted(name, per_channel)
    model = quantized(name, per_channel)
    result = parity.Parity(0, 0, 0)
    for seed in SEEDS:
        result = result.merge(parity.compare(graph, model, zoo.random_input(name, seed)))
    print(f"{name} per_channel={per_channel}: max {result.max_lsb} LSB, {result.exact_percent:.2f}% exact")
    if (name, per_channel) in NOT_EXACT:
        assert result.max_lsb <= NOT_EXACT[name, per_channel]
    else:
        assert result.exact == result.total, f"{result.total - result.exact} elements differ"
