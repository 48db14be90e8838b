"""The architectures users bring (tests/architectures.py), in every format onnxruntime's quantizer writes:
`ming reference` equals onnxruntime on the quantized file, for every output, bit for bit; the C-simulation of
the built accelerator equals it too (each architecture in int8 QDQ and in one other format, so that every
format is C-simulated)."""

from __future__ import annotations

import numpy as np
import pytest

import architectures
from emit_helpers import csim_outputs
from ming_py import reference
from ming_py.errors import MingError
from ming_py.pipeline import lift
from ming_py.ort_session import onnxruntime_session

SEEDS = range(3)
# the second format each architecture is C-simulated in
CSIM_FORMATS = {"mobilenet_v2": "qoperator_uint8", "mobilenet_v3_small": "qdq_uint8",
                "shufflenet_v1": "qdq_uint8", "shufflenet_v2": "qoperator_int8", "yolo_tiny": "qoperator_uint8", "unet": "qdq_uint8"}


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    directory = tmp_path_factory.mktemp("architectures")
    cache = {}

    def build(name: str, fmt: str):
        if (name, fmt) not in cache:
            path = architectures.quantized(name, fmt, directory)
            cache[name, fmt] = path, lift(path)
        return cache[name, fmt]

    return build


def _input(name: str, seed: int) -> np.ndarray:
    shape = architectures.ARCHITECTURES[name].input_shape
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _onnxruntime(path, x: np.ndarray) -> dict[str, np.ndarray]:
    session = onnxruntime_session(str(path))
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {session.get_inputs()[0].name: x})))


def _assert_equal(ours: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert list(ours) == list(expected)
    for name, y in expected.items():
        mine = np.asarray(ours[name])
        assert mine.dtype == y.dtype and mine.shape == y.shape, name
        assert np.array_equal(mine, y), f"{name}: {np.count_nonzero(mine != y)} of {y.size} differ"


QUANTIZED = [(name, fmt) for name in architectures.ARCHITECTURES for fmt in architectures.FORMATS
             if (name, fmt) not in architectures.LEFT_IN_FLOAT]


@pytest.mark.parametrize("name,fmt", QUANTIZED)
def test_reference_equals_onnxruntime(quantized, name, fmt):
    path, graph = quantized(name, fmt)
    for seed in SEEDS:
        x = _input(name, seed)
        ours = reference.run(graph, x)
        _assert_equal({o.name: ours[o.name] for o in graph.outputs}, _onnxruntime(path, x))


@pytest.mark.parametrize("name,fmt", [(name, fmt) for name in architectures.ARCHITECTURES
                                      for fmt in ("qdq_int8", CSIM_FORMATS[name])])
def test_csim_equals_onnxruntime(quantized, tmp_path, name, fmt):
    path, graph = quantized(name, fmt)
    x = _input(name, 11)
    _assert_equal(csim_outputs(graph, tmp_path / "out", x, check_ports=True), _onnxruntime(path, x))


@pytest.mark.unit
@pytest.mark.parametrize("name,fmt", sorted(architectures.LEFT_IN_FLOAT))
def test_a_model_the_quantizer_left_partly_in_float_is_refused_by_name(tmp_path, name, fmt):
    node = architectures.LEFT_IN_FLOAT[name, fmt]
    with pytest.raises(MingError, match=rf"node '{node}' .* in float\)"):
        lift(architectures.quantized(name, fmt, tmp_path))


@pytest.mark.unit
def test_every_format_is_c_simulated():
    assert set(CSIM_FORMATS) == set(architectures.ARCHITECTURES)
    assert set(CSIM_FORMATS.values()) | {"qdq_int8"} == set(architectures.FORMATS)
