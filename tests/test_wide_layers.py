"""A layer's output channels do not make the frontend's memory grow past what its limits promise: the proof of a
requantization runs `fixed_point.CHANNEL_BLOCK` channels at a time, and a TRANSPOSE_CONV whose phases would take
more weights than ming holds on chip is refused by name before they are made. The models are written with the
flatbuffer builder of tests/tflite_models.py (the wide ones with a one-image calibration, to stay small)."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

import tflite_models
from test_keras_tflite import assert_equal_outputs, litert_reference
from ming_py import reference
from ming_py.errors import MingError
from ming_py.frontends import fixed_point
from ming_py.frontends.tflite_transpose_conv import transpose_convs_as_phases
from ming_py.limits import MAX_WEIGHT_BYTES
from ming_py.pipeline import lift

# the lift of a 16 -> 4,096 channel 1x1 conv traced 0.5 GB of numpy arrays with every channel proved at once, 40 MB
# by blocks; the bound leaves room for the model's own constants and the interpreter's objects
TRACED_PEAK_BYTES = 256 * 2 ** 20


def wide_pointwise(in_channels: int, out_channels: int) -> bytes:
    """A 1x1 conv on a 1x1 map of `in_channels`, `out_channels` wide, per-channel weight scales."""
    b = tflite_models.TfliteBuilder(seed=1, calibration=1)
    y = b.conv(b.input((1, 1, 1, in_channels)), out_channels, kernel=1, padding="valid", activation=None,
               name="wide")
    return b.build([y], "wide")


def strided_transpose_conv(stride: int, channels: int = 4) -> schema.ModelT:
    """TRANSPOSE_CONV (SAME, kernel 1) of stride `stride` on a 1x1 map of `channels`: a stride x stride output,
    whose output scale is fixed rather than calibrated (the output is never computed in float)."""
    b = tflite_models.TfliteBuilder(seed=2, calibration=1)
    x = b.input((1, 1, 1, channels))
    w_index, _, w_scale = b._weights("deconv_weights", (channels, 1, 1, channels), 0)
    b_index, _ = b._bias("deconv_bias", x, w_scale, channels)
    shape = [1, stride, stride, channels]
    y = b._tensor("deconv_out", shape, tflite_models.INT8, np.float32(0.05), 0)
    options = schema.TransposeConvOptionsT()
    options.padding, options.strideH, options.strideW = schema.Padding.SAME, stride, stride
    b._op("TRANSPOSE_CONV", [b._int32_constant("deconv_shape", shape), w_index, x.index, b_index], [y],
          schema.BuiltinOptions.TransposeConvOptions, options)
    b.quant[y] = (0.05, 0)
    return schema.ModelT.InitFromPackedBuf(bytearray(b.build([tflite_models.Tensor(y, np.zeros((1, *shape[1:])))],
                                                             "deconv")), 0)


def _traced_peak(function) -> int:
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_wide_conv_lifts_in_bounded_memory(tmp_path):
    path = tmp_path / "wide.tflite"
    path.write_bytes(wide_pointwise(16, 4096))
    peak = _traced_peak(lambda: lift(path))
    assert peak < TRACED_PEAK_BYTES, f"the lift traced {peak / 2 ** 20:.0f} MB"


def test_a_requantization_proved_by_blocks_equals_litert(tmp_path):
    """Channels in three blocks, the last one partial: every channel keeps its own multiplier and bias."""
    channels = 2 * fixed_point.CHANNEL_BLOCK + 37
    path = tmp_path / "wide.tflite"
    path.write_bytes(wide_pointwise(8, channels))
    graph = lift(path)
    rng = np.random.default_rng(4)
    for _ in range(3):
        x = rng.integers(-128, 128, (1, 1, 1, 8), dtype=np.int8)
        assert_equal_outputs(reference.run(graph, x), litert_reference(path, x))


@pytest.mark.unit
def test_a_transpose_conv_whose_phases_exceed_the_weights_is_refused_before_they_are_made():
    model = strided_transpose_conv(10_000)
    messages = []

    def rewrite():
        with pytest.raises(MingError) as error:
            transpose_convs_as_phases(model)
        messages.append(str(error.value))

    start = time.monotonic()
    peak = _traced_peak(rewrite)
    assert messages == [
        "node 'deconv_out' (TRANSPOSE_CONV): as a convolution of its 10000x10000 phases its weights take 1,525.9 MiB; "
        f"ming handles up to {MAX_WEIGHT_BYTES // 2 ** 20} MiB (all weights are held on chip); use a smaller stride "
        "(an upsampling before the convolution)"]
    assert peak < TRACED_PEAK_BYTES and time.monotonic() - start < 10


@pytest.mark.unit
def test_a_transpose_conv_whose_phases_fit_is_still_rewritten():
    model = strided_transpose_conv(100)
    transpose_convs_as_phases(model)
    graph = model.subgraphs[0]
    assert [list(graph.tensors[o.outputs[0]].shape) for o in graph.operators] == \
        [[1, 1, 1, 4], [1, 1, 1, 100 * 100 * 4], [1, 100, 100, 4]]
