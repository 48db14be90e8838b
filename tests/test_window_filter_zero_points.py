"""The TFLite window rewrites fill filter taps with int8 0, which adds nothing only where the filters' zero point
is 0: a window to the map's end, and a one-tap row where no tap reads the map, are rewritten for such filters
only; filters of another zero point are left as they were (and a tap taken from the filters is kept whatever
their zero point)."""

from __future__ import annotations

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

import tflite_models
from ming_py.frontends.tflite_windows import short_windows_to_the_map_end, unit_axis_windows_as_one_tap


def _conv(input_shape, kernel, stride, padding: str, depthwise: bool = False,
          dilation: tuple[int, int] = (1, 1)) -> schema.ModelT:
    b = tflite_models.TfliteBuilder(seed=4, calibration=1)
    y = b.conv(b.input(input_shape), 4, kernel=kernel, stride=stride, padding=padding, activation=None,
               depthwise=depthwise, name="conv")
    model = schema.ModelT.InitFromPackedBuf(bytearray(b.build([y], "conv")), 0)
    options = model.subgraphs[0].operators[0].builtinOptions
    options.dilationHFactor, options.dilationWFactor = dilation
    return model


def _with_filter_zero_points(model: schema.ModelT, zero_point: int) -> schema.ModelT:
    """The model with its filters' every zero point set to `zero_point`."""
    graph = model.subgraphs[0]
    quantization = graph.tensors[graph.operators[0].inputs[1]].quantization
    quantization.zeroPoint = [zero_point] * len(quantization.zeroPoint)
    return model


def _filters_and_options(model: schema.ModelT):
    graph = model.subgraphs[0]
    operator = graph.operators[0]
    filters = graph.tensors[operator.inputs[1]]
    return [int(d) for d in filters.shape], bytes(bytearray(model.buffers[filters.buffer].data)), \
        dict(vars(operator.builtinOptions))


SHORT_WINDOWS = {  # one position of a 3x3 window stops short of the 8x8 map's end
    "conv": lambda: _conv((1, 8, 8, 2), 3, 6, "valid"),
    "depthwise": lambda: _conv((1, 8, 8, 4), 3, 6, "valid", depthwise=True),
}
# a 2x2 window of dilation 2 over a map one row high and one column wide: SAME pads one before, no tap reads it
NO_TAP = lambda: _conv((1, 1, 1, 2), 2, 1, "same", dilation=(2, 2))  # noqa: E731
# each model with the rewrite that would fill its filters
REWRITES = [(SHORT_WINDOWS["conv"], short_windows_to_the_map_end),
            (SHORT_WINDOWS["depthwise"], short_windows_to_the_map_end), (NO_TAP, unit_axis_windows_as_one_tap)]
REWRITE_IDS = ["short_conv", "short_depthwise", "one_tap_reading_padding"]


@pytest.mark.unit
@pytest.mark.parametrize("make, rewrite", REWRITES, ids=REWRITE_IDS)
def test_filters_of_a_nonzero_zero_point_are_not_filled_with_zeros(make, rewrite):
    model = _with_filter_zero_points(make(), 3)
    before = _filters_and_options(model)
    rewrite(model)
    assert _filters_and_options(model) == before


@pytest.mark.unit
@pytest.mark.parametrize("make, rewrite", REWRITES, ids=REWRITE_IDS)
def test_filters_of_zero_point_0_are_still_filled_with_zeros(make, rewrite):
    model = make()
    before = _filters_and_options(model)
    rewrite(model)
    shape, data, _ = _filters_and_options(model)
    assert shape != before[0] and (np.frombuffer(data, np.int8) == 0).any()


@pytest.mark.unit
def test_a_tap_that_reads_the_map_is_taken_whatever_the_zero_point():
    model = _with_filter_zero_points(_conv((1, 1, 8, 2), 3, 1, "same"), 3)  # the middle row reads the map
    graph = model.subgraphs[0]
    filters = np.frombuffer(bytes(bytearray(model.buffers[graph.tensors[graph.operators[0].inputs[1]].buffer].data)),
                            np.int8).reshape(4, 3, 3, 2)
    unit_axis_windows_as_one_tap(model)
    row = graph.tensors[graph.operators[0].inputs[1]]
    assert row.shape == [4, 1, 3, 2]
    assert np.array_equal(np.frombuffer(bytes(bytearray(model.buffers[row.buffer].data)), np.int8).reshape(row.shape),
                          filters[:, 1:2])
