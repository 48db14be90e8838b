"""Geometries the generated tier (tests/geometries.py) found crashing with a raw exception instead of a MingError:
each is now built, C-simulated and equal to `ming reference` and the framework, or refused in one line naming its
layer."""

from __future__ import annotations

import pytest

from geometries import Case, Conv, Dense, Join, Pool, check_case

# built: csim == ming reference == the framework, bit for bit
SUPPORTED = {
    # a one-unit FULLY_CONNECTED: IREE folds its 1 x 1 output into a scalar, an output of one channel
    "fully_connected_1_unit_on_a_vector": Case("tflite", (8,), (Dense(1),)),
    "fully_connected_1_unit_on_a_map": Case("tflite", (3, 4, 4), (Dense(1),)),
    "fully_connected_1_unit_after_depthwise": Case(
        "tflite", (3, 5, 5), (Conv(3, (3, 3), depthwise=True, groups=3), Dense(1))),
    # a 1x1 depthwise conv (a per-channel table) on a 1x1x1 map: its output is a scalar too
    "depthwise_1x1_on_1x1x1": Case("tflite", (1, 1, 1), (Conv(1, (1, 1), padding="same", depthwise=True),)),
    # one 4x4 window position that never reads the map's last column (or row): a dense layer over the whole
    # map whose weights are zero there
    "conv_4x4_stride_1x2_valid_on_4x5": Case("tflite", (2, 4, 5), (Conv(4, (4, 4), (1, 2), padding="valid"),)),
    "conv_4x4_stride_2x1_valid_on_5x4": Case("tflite", (2, 5, 4), (Conv(4, (4, 4), (2, 1), padding="valid"),)),
    # ONNX AveragePool with ceil_mode on a one-row (or one-column) output: IREE's divisor is a one-element tensor
    "onnx_avgpool_ceil_one_row_qdq": Case(
        "qdq_int8", (4, 2, 6), (Conv(4, (1, 1)), Pool("avg", (2, 2), (2, 2), "valid", ceil_mode=1))),
    "onnx_avgpool_ceil_one_row_qoperator": Case(
        "qoperator_int8", (4, 2, 6), (Conv(4, (1, 1)), Pool("avg", (2, 2), (2, 2), "valid", ceil_mode=1))),
    "onnx_avgpool_ceil_one_column_qdq": Case(
        "qdq_int8", (4, 6, 2), (Conv(4, (1, 1)), Pool("avg", (2, 2), (2, 2), "valid", ceil_mode=1))),
    # a TFLite grouped conv on a one-row map, IREE's one slice of the input's channels per group (rank-reduced
    # where the group has one channel)
    "grouped_conv_3x3_same_one_channel_per_group_on_one_row": Case(
        "tflite", (5, 1, 16), (Conv(20, (3, 3), padding="same", groups=5),)),
    "grouped_conv_1x3_same_one_channel_per_group_on_one_row": Case(
        "tflite", (5, 1, 16), (Conv(10, (1, 3), padding="same", groups=5),)),
    # a strided 1x1 grouped conv in TFLite: IREE's strided slice of each group's channels
    "grouped_conv_1x1_stride_2_same": Case("tflite", (24, 3, 3), (Conv(16, (1, 1), (2, 2), padding="same", groups=8),)),
    "grouped_conv_1x1_stride_2x1_then_conv": Case(
        "tflite", (6, 5, 5), (Conv(6, (1, 1), (2, 1), padding="valid", groups=3), Conv(4, (3, 3)))),
    # a SAME window over a 1x1x1 map: its one tap that meets the map (tflite_windows), a 1x1 window
    "add_of_maxpool_and_conv_on_1x1x1": Case("tflite", (1, 1, 1), (Join(
        "add", (Pool("max", (1, 2), (1, 2), "same"),), (Conv(1, (1, 2), (1, 2), padding="same"),)),)),
    "conv_1x2_same_on_1x1x1": Case("tflite", (1, 1, 1), (Conv(1, (1, 2), (1, 2), padding="same"),)),
}

# refused by a MingError naming the layer
REFUSED = {
    # a window over padding whose output is one value (one channel, 1 x 1): a map of a single channel (ONNX: TFLite's
    # SAME windows on a 1x1x1 map are their one tap, above)
    "onnx_conv_1x2_padded_on_1x1x1": (Case("qdq_int8", (1, 1, 1), (Conv(1, (1, 2), (1, 2), padding=(0, 0, 0, 1)),)),
                                      "conv0"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SUPPORTED))
def test_supported_geometry_equals_reference_and_framework(name, tmp_path):
    case = SUPPORTED[name]
    outcome = check_case(case, tmp_path)
    assert outcome.status == "equal", f"{name}: {case.describe()}: {outcome}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unsupported_geometry_is_refused_naming_its_layer(name, tmp_path):
    case, layer = REFUSED[name]
    outcome = check_case(case, tmp_path)
    assert outcome.status == "refused", f"{name}: {case.describe()}: {outcome}"
    assert outcome.detail.startswith("MingError:") and layer in outcome.detail and "\n" not in outcome.detail
