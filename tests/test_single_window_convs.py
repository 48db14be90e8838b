"""Convolutions whose stride is larger than their window, with a single output position (along one axis or
both) that leaves the map's last rows or columns unread: in TFLite and in ONNX (QDQ and QOperator), with one
input channel or several, VALID or padded, dilated, depthwise. Each is built, C-simulated and equal to `ming
reference` and the framework, bit for bit (tests/geometries.py)."""

from __future__ import annotations

import pytest

from geometries import Case, Conv, check_case

SINGLE_WINDOWS = {
    "tflite_3x3_stride_6_on_8x8_one_channel": Case("tflite", (1, 8, 8), (Conv(4, (3, 3), (6, 6)),)),
    "tflite_3x3_stride_6x1_on_8x9_one_channel": Case("tflite", (1, 8, 9), (Conv(4, (3, 3), (6, 1)),)),
    "tflite_3x3_stride_8_same_on_8x8": Case("tflite", (3, 8, 8), (Conv(4, (3, 3), (8, 8), padding="same"),)),
    "tflite_2x2_dilated_2_stride_5_on_5x5": Case("tflite", (2, 5, 5), (Conv(4, (2, 2), (5, 5), (2, 2)),)),
    "tflite_depthwise_3x3_stride_6_on_8x8": Case(
        "tflite", (3, 8, 8), (Conv(3, (3, 3), (6, 6), depthwise=True, groups=3),)),
    "qdq_3x3_stride_6_on_8x8": Case("qdq_int8", (2, 8, 8), (Conv(4, (3, 3), (6, 6)),)),
    "qdq_3x3_stride_6_on_8x8_one_channel": Case("qdq_int8", (1, 8, 8), (Conv(4, (3, 3), (6, 6)),)),
    "qdq_3x3_stride_6x1_on_8x9": Case("qdq_int8", (2, 8, 9), (Conv(4, (3, 3), (6, 1)),)),
    "qdq_3x3_stride_7_padded_on_8x8": Case("qdq_int8", (3, 8, 8), (Conv(4, (3, 3), (7, 7), padding=(1, 1, 1, 1)),)),
    "qdq_2x2_dilated_2_stride_5_on_5x5": Case("qdq_int8", (2, 5, 5), (Conv(4, (2, 2), (5, 5), (2, 2)),)),
    "qoperator_3x3_stride_6_on_8x8": Case("qoperator_int8", (2, 8, 8), (Conv(4, (3, 3), (6, 6)),)),
    # a strided 1x1 conv on a 2x2 map: its one position reads the map's first pixel only
    "tflite_1x1_stride_2_on_2x2": Case("tflite", (4, 2, 2), (Conv(4, (1, 1), (2, 2)),)),
    "qdq_1x1_stride_2_on_2x2": Case("qdq_int8", (4, 2, 2), (Conv(4, (1, 1), (2, 2)),)),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SINGLE_WINDOWS))
def test_a_single_window_short_of_the_map_equals_reference_and_framework(name, tmp_path):
    case = SINGLE_WINDOWS[name]
    outcome = check_case(case, tmp_path)
    assert outcome.status == "equal", f"{name}: {case.describe()}: {outcome}"
