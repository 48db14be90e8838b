"""The shape arithmetic of TFLite models folded in the flatbuffer (`frontends.tflite_fold`): Keras 3's Flatten
and UpSampling2D chains become constant target shapes, their reshapes get the output shapes they compute, and
what cannot fold is refused by name. No IREE: the flatbuffer alone."""

from __future__ import annotations

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

import tflite_models
from ming_py.errors import MingError
from ming_py.frontends.tflite_fold import constant, fold_shape_arithmetic, gather, op_name, reshaped, strided_slice

pytestmark = pytest.mark.unit
INT32 = tflite_models.INT32


def _slice_options(begin_mask=0, end_mask=0, shrink_axis_mask=0, offset=False, ellipsis_mask=0):
    options = schema.StridedSliceOptionsT()
    options.beginMask, options.endMask, options.shrinkAxisMask = begin_mask, end_mask, shrink_axis_mask
    options.offset, options.ellipsisMask = offset, ellipsis_mask
    return options


SHAPE = np.array([1, 6, 6, 16], np.int32)


@pytest.mark.parametrize("begin, end, strides, options, expected", [
    ([0], [1], [1], _slice_options(shrink_axis_mask=1), 1),  # Flatten's batch
    ([0], [1], [1], _slice_options(begin_mask=1), [1]),  # UpSampling2D's leading dims
    ([0], [2], [1], _slice_options(begin_mask=1), [1, 6]),
    ([2], [0], [1], _slice_options(end_mask=1), [6, 16]),
    ([-1], [0], [1], _slice_options(shrink_axis_mask=1), 16),
    ([1], [2], [1], _slice_options(offset=True), [6, 6]),
    ([3], [0], [-1], _slice_options(end_mask=1), [16, 6, 6, 1]),
    ([0], [4], [2], _slice_options(), [1, 6]),
])
def test_strided_slice_is_tflites(begin, end, strides, options, expected):
    result = strided_slice(SHAPE, np.array(begin), np.array(end), np.array(strides), options)
    assert np.array_equal(result, expected) and np.shape(result) == np.shape(expected)


def test_strided_slice_with_an_ellipsis_is_refused():
    with pytest.raises(MingError, match=r"^node 's' \(STRIDED_SLICE\): a strided slice with an ellipsis"):
        strided_slice(SHAPE, np.array([0]), np.array([1]), np.array([1]), _slice_options(ellipsis_mask=1),
                      "node 's' (STRIDED_SLICE)")


def test_gather_takes_along_its_axis():
    options = schema.GatherOptionsT()
    assert np.array_equal(gather(SHAPE, np.array([1, 2]), options), [6, 6])
    with pytest.raises(MingError, match="outside axis 0"):
        gather(SHAPE, np.array([4]), options)


@pytest.mark.parametrize("shape, target, expected", [
    ([1, 1, 1, 10], [-1, 10], [1, 10]), ([1, 6, 2, 6, 16], [1, 12, 6, 16], [1, 12, 6, 16]),
    ([1, 25, 32], [-1, 25, 32], [1, 25, 32])])
def test_a_reshape_target_resolves_its_minus_one(shape, target, expected):
    assert reshaped(shape, target) == expected


@pytest.mark.parametrize("target", [[-1, -1], [3, 7], [-1, 3]])
def test_a_reshape_to_another_size_is_refused(target):
    with pytest.raises(MingError, match="cannot be reshaped"):
        reshaped([1, 1, 1, 10], target)


# ---- whole chains, as the Keras 3 converter writes them ------------------------------------------------------


def _model(build) -> schema.ModelT:
    """The model `build(builder)` writes (it returns the outputs), read back as the frontend reads a file."""
    b = tflite_models.TfliteBuilder(seed=5)
    data = b.build(build(b), "fold")
    return schema.ModelT.InitFromPackedBuf(bytearray(data), 0)


def _op(b, kind, inputs, outputs, options=None):
    options_type = getattr(schema.BuiltinOptions, type(options).__name__[:-1]) if options is not None else 0
    b._op(kind, inputs, outputs, options_type, options)


def _flatten(b):
    """Keras' Flatten of a (batch, 1, 1, 10) map: SHAPE -> STRIDED_SLICE (the batch) -> PACK with 10 -> RESHAPE."""
    x = b.input((1, 1, 1, 10))
    shape = b._tensor("flatten/Shape", (4,), INT32)
    _op(b, "SHAPE", [x.index], [shape], schema.ShapeOptionsT())
    batch = b._tensor("flatten/strided_slice", (), INT32)
    begin, end, stride = (b._int32_constant(n, [v]) for n, v in (("begin", 0), ("end", 1), ("stride", 1)))
    _op(b, "STRIDED_SLICE", [shape, begin, end, stride], [batch], _slice_options(shrink_axis_mask=1))
    target = b._tensor("flatten/Reshape/shape", (2,), INT32)
    pack = schema.PackOptionsT()
    pack.valuesCount = 2
    _op(b, "PACK", [batch, b._int32_constant("ten", 10)], [target], pack)
    y = b._same_quant("flatten/Reshape", x, x.calibration.reshape(b.calibration, 10))
    b.tensors[y.index].shapeSignature = [-1, 10]
    _op(b, "RESHAPE", [x.index, target], [y.index])
    return [y]


def test_keras_flatten_folds_to_a_constant_target_shape():
    model = _model(_flatten)
    fold_shape_arithmetic(model)
    graph = model.subgraphs[0]
    assert [op_name(model, o) for o in graph.operators] == ["RESHAPE"]
    (reshape,) = graph.operators
    assert constant(model, reshape.inputs[1]).tolist() == [1, 10]
    assert list(graph.tensors[reshape.outputs[0]].shape) == [1, 10]


def _upsampled_rows(b):
    """UpSampling2D's repeat along the rows, as the converter writes it for a symbolic batch: the target shape
    is SHAPE's leading dims CONCATENATED with constants, and the output's shape a placeholder [1, 1, 6, 16]."""
    x = b.input((1, 6, 2, 6, 16))
    shape = b._tensor("Repeat/Shape", (5,), INT32)
    _op(b, "SHAPE", [x.index], [shape], schema.ShapeOptionsT())
    leading = b._tensor("Repeat/strided_slice", (1,), INT32)
    begin, end, stride = (b._int32_constant(n, [v]) for n, v in (("begin", 0), ("end", 1), ("stride", 1)))
    _op(b, "STRIDED_SLICE", [shape, begin, end, stride], [leading], _slice_options(begin_mask=1))
    target = b._tensor("Repeat/concat", (4,), INT32)
    concat = schema.ConcatenationOptionsT()
    _op(b, "CONCATENATION", [leading, b._int32_constant("rows", [12]), b._int32_constant("rest", [6, 16])],
        [target], concat)
    y = b._same_quant("Repeat/Reshape_1", x, x.calibration.reshape(b.calibration, 12, 6, 16))
    b.tensors[y.index].shape, b.tensors[y.index].shapeSignature = [1, 1, 6, 16], [-1, -1, 6, 16]
    _op(b, "RESHAPE", [x.index, target], [y.index])
    return [y]


def test_upsampling_reshape_gets_the_shape_its_folded_target_says():
    model = _model(_upsampled_rows)
    fold_shape_arithmetic(model)
    graph = model.subgraphs[0]
    assert [op_name(model, o) for o in graph.operators] == ["RESHAPE"]
    output = graph.tensors[graph.operators[0].outputs[0]]
    assert list(output.shape) == [1, 12, 6, 16] and list(output.shapeSignature) == [1, 12, 6, 16]


def test_a_concatenation_of_maps_is_not_folded():
    def build(b):
        x = b.input((1, 2, 2, 3))
        return [b.concat([x, x], name="maps")]

    model = _model(build)
    fold_shape_arithmetic(model)
    assert [op_name(model, o) for o in model.subgraphs[0].operators] == ["CONCATENATION"]


def test_a_shape_of_a_symbolic_dimension_is_refused_by_name():
    def build(b):
        outputs = _flatten(b)
        b.tensors[b.inputs[0]].shapeSignature = [1, -1, 1, 10]
        return outputs

    with pytest.raises(MingError, match=r"^node 'flatten/Shape' \(SHAPE\) reads the shape \[1, -1, 1, 10\]"):
        fold_shape_arithmetic(_model(build))


def test_shape_arithmetic_on_run_time_values_is_refused_by_name():
    def build(b):
        x = b.input((1, 2, 2, 3))
        begin = b._tensor("computed_begin", (1,), INT32)  # no data, no producer: known only at run time
        sliced = b._tensor("sliced", (1,), INT32)
        shape = b._tensor("x_shape", (4,), INT32)
        _op(b, "SHAPE", [x.index], [shape], schema.ShapeOptionsT())
        _op(b, "STRIDED_SLICE", [shape, begin, b._int32_constant("end", [1]), b._int32_constant("stride", [1])],
            [sliced], _slice_options())
        return [x]

    with pytest.raises(MingError, match=r"^node 'sliced' \(STRIDED_SLICE\) reads a value known only at run time"):
        fold_shape_arithmetic(_model(build))


def _pack_of_unequal_vectors(b):
    x = b.input((1, 2, 2, 3))
    packed = b._tensor("packed", (2, 2), INT32)
    _op(b, "PACK", [b._int32_constant("two", [1, 2]), b._int32_constant("three", [1, 2, 3])], [packed],
        schema.PackOptionsT())
    return [x]


def _concatenation_past_its_axes(b):
    x = b.input((1, 2, 2, 3))
    joined = b._tensor("joined", (4,), INT32)
    concat = schema.ConcatenationOptionsT()
    concat.axis = 3
    _op(b, "CONCATENATION", [b._int32_constant("left", [1, 2]), b._int32_constant("right", [3, 4])], [joined],
        concat)
    return [x]


@pytest.mark.parametrize("build, node", [(_pack_of_unequal_vectors, "'packed' (PACK)"),
                                         (_concatenation_past_its_axes, "'joined' (CONCATENATION)")])
def test_constants_numpy_cannot_combine_are_one_line_naming_the_node(build, node):
    """numpy's ValueError (stacking [2] with [3]) and AxisError (axis 3 of vectors) become the node's MingError."""
    with pytest.raises(MingError, match=rf"^node {node.replace('(', '[(]').replace(')', '[)]')}: its constant "
                                        "operands do not fold") as error:
        fold_shape_arithmetic(_model(build))
    assert "\n" not in str(error.value)


def _sliced_map(b, end):
    """x[:, :end[1], :end[2], :end[3]] of an int8 map: Keras' slicing, a STRIDED_SLICE of values."""
    x = b.input((1, 4, 4, 3))
    sliced = b._same_quant("sliced_map", x, x.calibration[:, :end[1], :end[2], :end[3]])
    begin, end, stride = (b._int32_constant(n, v) for n, v in (("b", [0, 0, 0, 0]), ("e", end),
                                                                  ("s", [1, 1, 1, 1])))
    _op(b, "STRIDED_SLICE", [x.index, begin, end, stride], [sliced.index], _slice_options())
    return [sliced]


def test_a_strided_slice_of_an_int8_map_is_no_shape_arithmetic_and_stays():
    model = _model(lambda b: _sliced_map(b, [1, 4, 4, 2]))
    fold_shape_arithmetic(model)
    assert [op_name(model, o) for o in model.subgraphs[0].operators] == ["STRIDED_SLICE"]
