"""Layers of published networks ming once refused or crashed on, and every geometry and position like them: each is
now built (the build verifies its own C++ against ming reference) and equal to the framework bit for bit, or refused
in one line naming its layer.

- A pooling with a 1x1 window (a strided subsample: Keras ResNetV2's shortcut `MaxPooling2D(1, strides=2)`), max
  or average, any stride, SAME or VALID, at the input, after a conv, beside a strided conv into an ADD; TFLite and
  ONNX. IREE writes it without window loops; ming adds a window of one element back.
- Tensors of one value: a FULLY_CONNECTED of a one-value input or to one unit, followed by every table op LiteRT's
  reference kernels run, by ADD and MUL, or ending the model; TFLite Micro's published hello_world (1 -> 16 -> 16
  -> 1). A multiply-accumulate over one input element (also a conv on a one-channel map with a 1x1 window) is
  one whose reduction loop IREE dropped.
- Grouped convolutions (Keras `Conv2D(groups=g)`) with one channel per group in or out (a DEPTHWISE_CONV_2D, a
  full CONV_2D zero outside each group), as the model's output, on one-row maps, into an ADD or a conv; and any
  window with SAME padding over a one-row (one-column) map (the one row of the window that meets it).
- SSD's head with a symbolic batch: ming's rewrite (batch 1, shape arithmetic folded) keeps the rows a RESHAPE
  that merged the batch gives; a converter crash on a rewritten model says what ming did, not that the model is
  malformed; TFLite_Detection_PostProcess is refused naming the tensors to cut the model at.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter

import one_value_models
import tflite_models
from geometries import Case, Conv, Dense, Join, Pool, check_case
from test_keras_tflite import assert_equal_outputs, litert_reference
from ming_py import reference
from ming_py.build import build
from ming_py.errors import MingError
from ming_py.frontends import tflite_model
from ming_py.frontends.tflite_fold import tensor_name
from ming_py.frontends.tflite_model import _flatbuffer, fix_symbolic_batch, load_tflite
from ming_py.pipeline import lift

DATA = Path(__file__).resolve().parent / "data"

# built: csim == ming reference == the framework, bit for bit
SUPPORTED = {
    # ---- pools with a 1x1 window: a strided subsample ----
    "maxpool_1x1_s2_after_conv": Case("tflite", (4, 8, 8), (Conv(4, (3, 3), padding="same"),
                                                           Pool("max", (1, 1), (2, 2), "valid"))),
    "maxpool_1x1_s2_odd_map_same": Case("tflite", (4, 7, 9), (Conv(6, (3, 3), padding="same"),
                                                              Pool("max", (1, 1), (2, 2), "same"))),
    "avgpool_1x1_s2_same": Case("tflite", (4, 7, 7), (Conv(4, (3, 3), padding="same"),
                                                      Pool("avg", (1, 1), (2, 2), "same"))),
    "maxpool_1x1_s2_on_the_input": Case("tflite", (4, 8, 8), (Pool("max", (1, 1), (2, 2), "valid"),)),
    "avgpool_1x1_s3_on_the_input": Case("tflite", (3, 10, 10), (Pool("avg", (1, 1), (3, 3), "valid"),)),
    "maxpool_1x1_s1x2_then_conv": Case("tflite", (4, 6, 8), (Pool("max", (1, 1), (1, 2), "valid"),
                                                             Conv(4, (3, 3), padding="same"))),
    "avgpool_1x1_s2x1_then_conv": Case("tflite", (4, 8, 6), (Conv(4, (1, 1)), Pool("avg", (1, 1), (2, 1), "same"),
                                                             Conv(4, (3, 3), padding="same"))),
    "maxpool_1x1_s2_one_row": Case("tflite", (4, 1, 9), (Conv(4, (1, 3), padding="same"),
                                                         Pool("max", (1, 1), (1, 2), "same"))),
    # ResNetV2's strided block: the subsampled map beside a strided conv, into an ADD
    "resnet_v2_shortcut_add": Case("tflite", (8, 9, 9), (Join("add", (Pool("max", (1, 1), (2, 2), "valid"),),
                                                              (Conv(8, (3, 3), (2, 2), padding="same"),)),)),
    "resnet_v2_shortcut_add_random_schedule": Case(
        "tflite", (8, 8, 8), (Join("add", (Pool("max", (1, 1), (2, 2), "same"),),
                                   (Conv(8, (3, 3), (2, 2), padding="same"),)),), schedule="random", schedule_seed=5),
    "onnx_qdq_maxpool_1x1_s2": Case("qdq_int8", (4, 8, 8), (Conv(4, (3, 3), padding="same"),
                                                           Pool("max", (1, 1), (2, 2), "valid"))),
    "onnx_qdq_uint8_avgpool_1x1_s2": Case("qdq_uint8", (4, 7, 7), (Conv(4, (3, 3), padding="same"),
                                                                   Pool("avg", (1, 1), (2, 2), "valid"))),
    "onnx_qoperator_maxpool_1x1_s1x2": Case("qoperator_int8", (4, 6, 8), (Conv(4, (1, 1)),
                                                                         Pool("max", (1, 1), (1, 2), "valid"))),
    "onnx_qdq_resnet_v2_shortcut_add": Case("qdq_int8", (8, 9, 9), (
        Conv(8, (1, 1)), Join("add", (Pool("max", (1, 1), (2, 2), "valid"),),
                              (Conv(8, (3, 3), (2, 2), padding=(1, 1, 1, 1)),)),)),
    # ---- one input element per multiply-accumulate ----
    "fully_connected_of_one_value": Case("tflite", (1,), (Dense(16, relu=True), Dense(16), Dense(1))),
    "fully_connected_one_value_to_one_unit": Case("tflite", (1,), (Dense(1),)),
    "conv_1x1_on_a_one_channel_map": Case("tflite", (1, 5, 6), (Conv(4, (1, 1)),)),
    "onnx_gemm_of_one_value": Case("qdq_int8", (1,), (Dense(16), Dense(1))),
    "onnx_qoperator_gemm_of_one_value": Case("qoperator_int8", (1,), (Dense(4), Dense(1))),
    # ---- grouped convolutions ----
    "grouped_one_input_channel_per_group_as_output": Case("tflite", (8, 6, 6), (Conv(8, (3, 3), padding="same",
                                                                                     groups=8),)),
    "grouped_one_input_channel_per_group_multiplier_2": Case("tflite", (4, 5, 5), (
        Conv(8, (3, 3), (2, 2), padding="same", groups=4), Conv(4, (1, 1)))),
    "grouped_one_channel_per_group_on_one_row": Case("tflite", (6, 1, 8), (Conv(6, (1, 3), padding="same",
                                                                                groups=6),)),
    "grouped_one_input_channel_per_group_into_add": Case("tflite", (4, 6, 6), (
        Join("add", (Conv(4, (3, 3), padding="same", groups=4),), ()),)),
    "grouped_one_output_channel_per_group": Case("tflite", (8, 6, 6), (Conv(4, (3, 3), padding="same", groups=4),)),
    "grouped_one_output_channel_per_group_one_row_then_conv": Case("tflite", (6, 1, 7), (
        Conv(3, (1, 3), padding="same", groups=3), Conv(4, (1, 1)))),
    "grouped_one_output_channel_per_group_strided_into_add": Case("tflite", (8, 5, 5), (
        Join("add", (Conv(4, (3, 3), (2, 2), padding="same", groups=4),), (Conv(4, (1, 1), (2, 2), padding="same"),)),)),
    "grouped_dilated_valid_relu": Case("tflite", (4, 7, 5), (Conv(12, (2, 3), (1, 2), (2, 1), padding="valid",
                                                                  groups=4, relu=True),)),
    # ---- windows over a one-row (one-column) map with SAME padding: the one row of the window that meets it ----
    "grouped_3x3_one_channel_per_group_on_one_row": Case("tflite", (8, 1, 16), (Conv(8, (3, 3), padding="same",
                                                                                    groups=8),)),
    "grouped_3x3_two_channels_per_group_on_one_row": Case("tflite", (8, 1, 16), (Conv(8, (3, 3), padding="same",
                                                                                     groups=4),)),
    "depthwise_3x3_on_one_row": Case("tflite", (8, 1, 16), (Conv(8, (3, 3), padding="same", depthwise=True,
                                                                 groups=8),)),
    "depthwise_3x3_multiplier_2_strided_on_one_row": Case("tflite", (4, 1, 6), (
        Conv(8, (3, 3), (2, 2), padding="same", depthwise=True, groups=4, multiplier=2),)),
    "conv_3x3_on_one_row": Case("tflite", (8, 1, 16), (Conv(8, (3, 3), padding="same"),)),
    "conv_3x5_dilated_strided_on_one_column": Case("tflite", (4, 9, 1), (Conv(8, (3, 5), (2, 2), (1, 2),
                                                                              padding="same"),)),
    "conv_2x2_dilated_no_tap_on_the_row": Case("tflite", (4, 1, 5), (Conv(4, (2, 2), (1, 1), (2, 2),
                                                                          padding="same"),)),
    "conv_3x3_on_1x1": Case("tflite", (4, 1, 1), (Conv(4, (3, 3), padding="same"),)),
    "maxpool_3x3_on_one_row": Case("tflite", (4, 1, 9), (Conv(4, (1, 1)), Pool("max", (3, 3), (2, 2), "same"))),
    "avgpool_2x3_on_one_row": Case("tflite", (4, 1, 9), (Conv(4, (1, 1)), Pool("avg", (2, 3), (2, 2), "same"))),
    "maxpool_3x3_on_1x1": Case("tflite", (4, 1, 1), (Conv(4, (1, 1)), Pool("max", (3, 3), (2, 2), "same"))),
    "onnx_grouped_one_channel_per_group": Case("qdq_int8", (8, 6, 6), (Conv(8, (3, 3), padding="same", groups=8),)),
    "onnx_grouped_one_output_channel_per_group": Case("qdq_int8", (8, 6, 6), (Conv(4, (3, 3), padding="same",
                                                                                  groups=4),)),
}

# refused by a MingError naming the layer
REFUSED = {
    # ONNX leaves a conv over one input channel with a 1x1 window in float without its reduction loop
    "onnx_qdq_conv_1x1_on_a_one_channel_map": (Case("qdq_int8", (1, 4, 4), (Conv(4, (1, 1)),)), "conv0"),
    # a strided 1x1 conv on a one-channel map: IREE crops the map and drops its channel axis in one slice
    "conv_1x1_stride_2_on_a_one_channel_map": (Case("tflite", (1, 6, 6), (Conv(4, (1, 1), (2, 2)),)), "conv0_out"),
}

# Keras models as the TFLite converter writes them (tests/generators/keras_tflite_models.py)
KERAS = ("resnet_v2_shortcut.tflite", "strided_subsample_input.tflite", "binary_classifier.tflite",
         "one_value_regressor.tflite", "grouped_conv_shapes.tflite", "grouped_conv_output.tflite")
# LiteRT's BUILTIN_REF resolver registers no ELU
ONE_VALUE = tuple(name for name in one_value_models.MODELS if not name.endswith("_elu"))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SUPPORTED))
def test_geometry_equals_reference_and_framework(name, tmp_path):
    case = SUPPORTED[name]
    outcome = check_case(case, tmp_path)
    assert outcome.status == "equal", f"{name}: {case.describe()}: {outcome}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unsupported_geometry_is_refused_naming_its_layer(name, tmp_path):
    case, layer = REFUSED[name]
    outcome = check_case(case, tmp_path)
    assert outcome.status == "refused", f"{name}: {case.describe()}: {outcome}"
    assert outcome.detail.startswith("MingError:") and f"'{layer}'" in outcome.detail and "\n" not in outcome.detail


def _inputs(graph, seeds=(0, 1, 2)):
    shape = graph.inputs[0].onnx_shape
    yield from (np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8) for seed in seeds)
    yield np.where(np.random.default_rng(3).random(shape) < 0.5, -128, 127).astype(np.int8)
    yield np.full(shape, -128, np.int8)
    yield np.full(shape, 127, np.int8)


def assert_builds_verified_and_equals_litert(path: Path, out: Path) -> None:
    """ming reference == LiteRT's reference kernels on random and extreme inputs, and `ming build` verifies its
    C-simulation against ming reference."""
    graph = lift(path)
    for x in _inputs(graph):
        result = reference.run(graph, x)
        assert_equal_outputs({o.name: result[o.name] for o in graph.outputs}, litert_reference(path, x))
    design = build(path, out)
    verification = json.loads(design.files["report.json"])["verification"]
    assert verification["verified"] and verification["equal"], verification


@pytest.mark.slow
def test_published_hello_world_builds_verified_and_equals_litert(tmp_path):
    """TFLite Micro's hello_world: a one-value input into FULLY_CONNECTED 1 -> 16, a one-unit output."""
    path = DATA / "published" / "hello_world_int8.tflite"
    graph = lift(path)
    assert graph.inputs[0].onnx_shape == (1, 1) and [o.onnx_shape for o in graph.outputs] == [(1, 1)]
    assert_builds_verified_and_equals_litert(path, tmp_path / "out")


@pytest.mark.slow
@pytest.mark.parametrize("name", KERAS)
def test_keras_model_builds_verified_and_equals_litert(tmp_path, name):
    assert_builds_verified_and_equals_litert(DATA / "keras" / name, tmp_path / "out")


@pytest.mark.slow
@pytest.mark.parametrize("name", ONE_VALUE)
def test_one_value_model_builds_verified_and_equals_litert(tmp_path, name):
    assert_builds_verified_and_equals_litert(one_value_models.write(name, tmp_path), tmp_path / "out")


def test_the_resnet_v2_shortcut_is_a_one_element_window_pool():
    """The shortcut's MAX_POOL_2D is a max pooling of a 1x1 window at stride 2, not refused and not folded."""
    graph = lift(DATA / "keras" / "resnet_v2_shortcut.tflite")
    pools = [k for k in graph.kernels() if k.op == "maxpool"]
    assert len(pools) == 2
    for pool in pools:
        window = [pool.dims[d] for d in pool.reduction_dims]
        assert window == [1, 1], pool
        assert sorted(e.coeffs[e.used_dims()[0]] for e in pool.inputs[0].map.results if len(e.used_dims()) == 2) \
            == [2, 2], pool.inputs[0].map


def test_grouped_convs_of_one_channel_per_group_are_whole_convs():
    """Keras' Conv2D(groups=C) of one channel per group is one kernel over the map, not one per group: no
    convolution of the lifted model makes a map of one channel (a group of several channels stays a kernel of
    its own, of its channels)."""
    graph = lift(DATA / "keras" / "grouped_conv_shapes.tflite")
    shapes = [graph.shape_of(k.output.tensor) for k in graph.kernels() if k.op == "conv"]
    assert shapes and all(len(shape) >= 2 and shape[0] > 1 for shape in shapes), shapes


# ---- SSD's head: ming's rewrite of a symbolic batch, the converter's failures on it, the post-processing ----

def test_ssd_flat_head_shapes_follow_the_reshapes_not_a_batch_of_one():
    """Box heads flattened with the batch ([-1, 4], the -1 no batch) and concatenated: after ming's rewrite the
    CONCATENATION and the LOGISTIC after it have the anchors' count of rows the RESHAPEs give (a batch of 1 gave
    them one row, which the TFLite converter rejected), as LiteRT computes them."""
    path = DATA / "keras" / "ssd_flat_head.tflite"
    model = load_tflite(path)
    fix_symbolic_batch(model)
    graph = model.subgraphs[0]
    shapes = {tensor_name(graph.tensors[i]): [int(d) for d in graph.tensors[i].shape] for i in graph.outputs}
    interpreter = Interpreter(model_path=str(path))
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"],
                           np.zeros(interpreter.get_input_details()[0]["shape"], np.int8))
    interpreter.invoke()
    expected = {d["name"]: [int(s) for s in interpreter.get_tensor(d["index"]).shape]
                for d in interpreter.get_output_details()}
    assert shapes == expected and sorted(expected.values()) == [[240, 4], [240, 5]]
    for tensor in graph.tensors:
        assert tensor.shapeSignature is None or all(d >= 0 for d in tensor.shapeSignature), tensor_name(tensor)


@pytest.mark.parametrize("name", ["ssd_head.tflite", "ssd_flat_head.tflite"])
def test_ssd_head_converts_after_the_rewrite(name):
    """The rewritten SSD heads convert; what ming then refuses is the head's RESHAPE of a map into rows of
    boxes, by name (not the converter failing on ming's rewrite)."""
    with pytest.raises(MingError) as error:
        lift(DATA / "keras" / name)
    message = str(error.value)
    assert "(RESHAPE)" in message and "converter" not in message and "\n" not in message, message


def _crashing_converter(monkeypatch):
    """The TOSA converter replaced by a process that dies of SIGSEGV (what a converter bug does)."""
    real = tflite_model.isolated.run

    def crash(command, what, model, **kwargs):
        if what != "the TFLite converter":
            return real(command, what, model, **kwargs)
        return real([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], what, model,
                    **kwargs)

    monkeypatch.setattr(tflite_model.isolated, "run", crash)


def test_a_converter_crash_on_a_rewritten_model_says_what_ming_did(monkeypatch):
    _crashing_converter(monkeypatch)
    with pytest.raises(MingError) as error:
        lift(DATA / "keras" / "mobilenet_v3_small_minimalistic.tflite")  # a symbolic batch, a Flatten's SHAPE ops
    message = str(error.value)
    assert "crashed (signal SEGV) on ming's rewrite" in message and "malformed" not in message, message
    assert "static ones (batch 1)" in message and "SHAPE" in message and "report" in message, message
    assert "\n" not in message


def test_a_converter_crash_on_a_model_ming_did_not_rewrite_is_the_model(monkeypatch, tmp_path):
    _crashing_converter(monkeypatch)
    path = one_value_models.write("fc_1_unit_then_logistic", tmp_path)  # a static batch, nothing to rewrite
    with pytest.raises(MingError) as error:
        lift(path)
    message = str(error.value)
    assert "crashed on" in message and "probably malformed" in message and "rewrite" not in message, message


def test_detection_postprocess_is_refused_naming_where_to_cut(tmp_path):
    path = tmp_path / "ssd_with_postprocess.tflite"
    path.write_bytes(_with_detection_postprocess())
    with pytest.raises(MingError) as error:
        lift(path)
    message = str(error.value)
    assert "TFLite_Detection_PostProcess" in message and "cut the model" in message, message
    assert "'raw_boxes_out' and 'scores_out'" in message and "\n" not in message, message


def _with_detection_postprocess() -> bytes:
    """A small SSD head (raw boxes [1, 48, 4], LOGISTIC class scores [1, 48, 5]) ending in the object detection
    API's TFLite_Detection_PostProcess custom op (boxes, classes, scores, count)."""
    b = tflite_models.TfliteBuilder(seed=1)
    y = b.conv(b.input((1, 4, 4, 3)), 8, kernel=3, name="conv")
    boxes = b.reshape(b.conv(y, 12, kernel=1, activation=None, name="box"), (1, 48, 4), name="raw_boxes")
    scores = b.reshape(b.conv(y, 15, kernel=1, activation=None, name="cls"), (1, 48, 5), name="raw_scores")
    scores = b.elementwise(scores, "LOGISTIC", name="scores")
    model = schema.ModelT.InitFromPackedBuf(bytearray(b.build([boxes, scores], "ssd")), 0)
    graph = model.subgraphs[0]
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.CUSTOM
    code.customCode, code.version = b"TFLite_Detection_PostProcess", 1
    model.operatorCodes.append(code)

    def tensor(name, shape):
        new = schema.TensorT()
        new.name, new.shape, new.type = name.encode(), shape, schema.TensorType.FLOAT32
        model.buffers.append(schema.BufferT())
        new.buffer = len(model.buffers) - 1
        graph.tensors.append(new)
        return len(graph.tensors) - 1

    anchors = tensor("anchors", [48, 4])
    outputs = [tensor("TFLite_Detection_PostProcess", [1, 10, 4])] + \
        [tensor(f"TFLite_Detection_PostProcess:{i}", [1, 10]) for i in (1, 2)] + \
        [tensor("TFLite_Detection_PostProcess:3", [1])]
    operator = schema.OperatorT()
    operator.opcodeIndex, operator.outputs = len(model.operatorCodes) - 1, outputs
    operator.inputs = [graph.outputs[0], graph.outputs[1], anchors]
    graph.operators.append(operator)
    graph.outputs = outputs
    return _flatbuffer(model)
