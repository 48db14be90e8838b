"""TFLite's TRANSPOSE_CONV rewritten as PAD, a convolution of its phases and DEPTH_TO_SPACE
(`frontends.tflite_transpose_conv`): the rewritten flatbuffer gives LiteRT's reference kernels the same output
as the original on every value, across kernel sizes, strides and paddings; the forms it cannot take are
refused by name. No IREE: the flatbuffer and LiteRT alone."""

from __future__ import annotations

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

import tflite_models
from test_keras_tflite import litert_reference
from ming_py.errors import MingError
from ming_py.frontends.tflite_model import _flatbuffer, op_name
from ming_py.frontends.tflite_transpose_conv import phase_taps, transpose_convs_as_phases

pytestmark = pytest.mark.unit


def _transpose_conv(b, x, channels, kernel, strides, padding, activation=None, bias=True, per_channel=True,
                    name="deconv"):
    """TRANSPOSE_CONV as the converter writes it: output y = s * i + k - pad (pad from LiteRT's SAME rule)."""
    _, height, width, in_channels = x.calibration.shape
    (kh, kw), (sh, sw) = kernel, strides
    if padding == "same":
        out_h, out_w = height * sh, width * sw
        pad_h, pad_w = (max((height - 1) * s + k - o, 0) // 2 for s, k, o in ((sh, kh, out_h), (sw, kw, out_w)))
    else:
        out_h, out_w = (height - 1) * sh + kh, (width - 1) * sw + kw
        pad_h = pad_w = 0
    w_index, w_float, w_scale = b._weights(f"{name}_weights", (channels, kh, kw, in_channels), 0, per_channel)
    out = np.zeros((1, out_h, out_w, channels))
    for y in range(height):
        for xx in range(width):
            for ky in range(kh):
                for kx in range(kw):
                    oy, ox = y * sh - pad_h + ky, xx * sw - pad_w + kx
                    if 0 <= oy < out_h and 0 <= ox < out_w:
                        out[0, oy, ox] += w_float[:, ky, kx] @ x.calibration[0, y, xx]
    inputs = [b._int32_constant(f"{name}_shape", [1, out_h, out_w, channels]), w_index, x.index]
    if bias:
        b_index, b_float = b._bias(f"{name}_bias", x, np.broadcast_to(w_scale, (channels,)), channels)
        inputs.append(b_index)
        out = out + b_float
    y = b._activation(f"{name}_out", out, activation)
    options = schema.TransposeConvOptionsT()
    options.padding = schema.Padding.SAME if padding == "same" else schema.Padding.VALID
    options.strideH, options.strideW = sh, sw
    options.fusedActivationFunction = tflite_models.ACTIVATIONS[activation]
    b._op("TRANSPOSE_CONV", inputs, [y.index], schema.BuiltinOptions.TransposeConvOptions, options)
    return y


def _model(shape, channels, kernel, strides, padding, **options) -> schema.ModelT:
    b = tflite_models.TfliteBuilder(seed=sum(shape) + kernel[0] * 7 + kernel[1] + strides[0])
    y = _transpose_conv(b, b.input(shape), channels, kernel, strides, padding, **options)
    return schema.ModelT.InitFromPackedBuf(bytearray(b.build([y], "deconv")), 0)


@pytest.mark.parametrize("shape, channels, kernel, stride, padding, options", [
    ((1, 6, 5, 3), 4, 3, 2, "same", {"activation": "relu"}),
    ((1, 4, 4, 2), 3, 2, 2, "same", {}),
    ((1, 4, 4, 2), 3, 4, 2, "same", {"bias": False}),
    ((1, 5, 4, 3), 2, 5, 2, "same", {}),
    ((1, 3, 3, 2), 3, 3, 3, "same", {}),
    ((1, 4, 3, 2), 2, 3, 1, "same", {}),
    ((1, 4, 4, 2), 2, 2, 2, "valid", {}),
    ((1, 3, 3, 2), 4, 4, 2, "valid", {"activation": "relu6"}),
    ((1, 4, 5, 3), 3, (3, 2), 2, "same", {}),
    ((1, 3, 4, 2), 2, (2, 4), 2, "valid", {"per_channel": False}),
    ((1, 4, 4, 2), 3, 3, 2, "same", {"per_channel": False, "bias": False}),
])
def test_phases_and_depth_to_space_equal_litert_reference_transpose_conv(tmp_path, shape, channels, kernel,
                                                                        stride, padding, options):
    kernel = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    model = _model(shape, channels, kernel, (stride, stride), padding, **options)
    original = tmp_path / "original.tflite"
    original.write_bytes(_flatbuffer(model))
    transpose_convs_as_phases(model)
    assert [op_name(model, o) for o in model.subgraphs[0].operators] == ["PAD", "CONV_2D", "DEPTH_TO_SPACE"]
    rewritten = tmp_path / "rewritten.tflite"
    rewritten.write_bytes(_flatbuffer(model))
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = rng.integers(-128, 128, shape, dtype=np.int8)
        expected, ours = litert_reference(original, x), litert_reference(rewritten, x)
        assert list(ours) == list(expected)
        for name, values in expected.items():
            assert np.array_equal(ours[name], values), f"{np.count_nonzero(ours[name] != values)} values differ"


def test_phase_taps_cover_every_tap_once_per_phase_pair():
    """Stride 2, kernel 3, pad 0: output 2m reads x[m - 1] w[2] + x[m] w[0], output 2m + 1 reads x[m] w[1]."""
    low, taps = phase_taps(3, 2, 0)
    assert low == 1 and taps.tolist() == [[2, 0], [-1, 1]]
    for kernel, stride, pad in ((4, 2, 1), (5, 3, 1), (2, 2, 0), (7, 2, 3)):
        _, taps = phase_taps(kernel, stride, pad)
        assert sorted(t for t in taps.reshape(-1) if t >= 0) == list(range(kernel))


@pytest.mark.parametrize("kernel, strides, padding, message", [
    (3, (2, 1), "same", r"strides 2x1; ming takes a transposed convolution with one stride"),
    (3, (2, 2), "valid", r"an output of 9x9 is not 2 times a grid of phases"),
])
def test_a_transpose_conv_ming_cannot_phase_is_refused_by_name(kernel, strides, padding, message):
    model = _model((1, 4, 4, 2), 3, (kernel, kernel), strides, padding)
    with pytest.raises(MingError, match=r"^node 'deconv_out' \(TRANSPOSE_CONV\): " + message):
        transpose_convs_as_phases(model)


def test_a_transpose_conv_whose_output_shape_operand_disagrees_is_refused_by_name():
    model = _model((1, 4, 4, 2), 3, (3, 3), (2, 2), "same")
    graph = model.subgraphs[0]
    shape_tensor = graph.tensors[graph.operators[0].inputs[0]]
    model.buffers[shape_tensor.buffer].data = np.array([1, 9, 8, 3], np.int32).view(np.uint8).copy()
    with pytest.raises(MingError, match=r"^node 'deconv_out' \(TRANSPOSE_CONV\): its output_shape operand "
                                        r"\[1, 9, 8, 3\] is not the shape of its output \[1, 8, 8, 3\]"):
        transpose_convs_as_phases(model)
