"""Every constant the ONNX frontend folds is counted from its inputs' shapes before it is computed: one past
`MAX_FOLDED_VALUES` (ming_py/limits.py) stops the build in one line naming the node and its op, whether or not
anything reads the node, and a shape with negative dimensions is named with what to do."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

from ming_py.errors import MingError
from ming_py.frontends import onnx_converters
from ming_py.limits import MAX_FOLDED_VALUES
from test_onnx_shape_subgraphs import _constant, _qdq_conv_model

SIDE = 70_000  # SIDE**2 values = 4.9e9 > MAX_FOLDED_VALUES (18 GiB as float32)
ROW, COLUMN = np.ones((1, SIDE), np.float32), np.ones((SIDE, 1), np.float32)
LARGE = np.ones((1 << 12, 1 << 12), np.float32)  # 2**24 values: at the limit, twice is past it


def _dangling(node: onnx.NodeProto, extra) -> onnx.ModelProto:
    """The conv model with `node` beside it: nothing reads its output."""
    return _qdq_conv_model([node, helper.make_node("Identity", ["y"], ["out"], name="identity")], ["out"],
                           extra=extra)


def _never_evaluated(*args):
    raise AssertionError("the folded value was computed before its size was checked")


CASES = [
    ("Add", ["a", "b"], [_constant("a", ROW), _constant("b", COLUMN)]),
    ("Mul", ["a", "b"], [_constant("a", ROW), _constant("b", COLUMN)]),
    ("Where", ["c", "a", "b"], [_constant("c", np.ones((1, 1), bool)), _constant("a", ROW), _constant("b", COLUMN)]),
    ("Max", ["a", "b"], [_constant("a", ROW), _constant("b", COLUMN)]),
    ("Equal", ["a", "b"], [_constant("a", ROW), _constant("b", COLUMN)]),
    ("Concat", ["a", "b"], [_constant("a", LARGE), _constant("b", LARGE)]),
    # 2 x 4096 rows of 4096 values: twice the limit
    ("Gather", ["a", "i"], [_constant("a", np.ones((1 << 12, 1 << 12), np.float32)),
                            _constant("i", np.zeros((2, 1 << 12), np.int64))]),
    ("ConstantOfShape", ["dims"], [_constant("dims", np.array([10 ** 6, 10 ** 6], np.int64))]),
]


@pytest.mark.unit
@pytest.mark.parametrize("op, inputs, extra", CASES, ids=[case[0] for case in CASES])
def test_a_dangling_fold_past_the_limit_is_refused_before_it_is_computed(op, inputs, extra, monkeypatch):
    attributes = {"axis": 0} if op in ("Concat", "Gather") else {}
    model = _dangling(helper.make_node(op, inputs, ["big"], name="the_big_one", **attributes), extra)
    monkeypatch.setattr(onnx_converters, "_evaluate", _never_evaluated)
    with pytest.raises(MingError, match=rf"^node 'the_big_one' \({op}\) computes a constant of [\d,]+ values, "
                                        rf"more than the {MAX_FOLDED_VALUES:,} ming folds"):
        onnx_converters.constants_as_initializers(model)


@pytest.mark.unit
def test_a_broadcast_within_the_limit_still_folds():
    model = _dangling(helper.make_node("Add", ["a", "b"], ["sum"], name="add"),
                      [_constant("a", np.ones((1, 4), np.float32)), _constant("b", np.ones((3, 1), np.float32))])
    onnx_converters.constants_as_initializers(model)
    folded = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}["sum"]
    assert folded.shape == (3, 4) and (folded == 2).all()


@pytest.mark.unit
@pytest.mark.parametrize("op, inputs, extra", [
    ("ConstantOfShape", ["dims"], [_constant("dims", np.array([-3, 4], np.int64))]),
    ("Tile", ["a", "dims"], [_constant("a", np.ones((2, 2), np.float32)), _constant("dims", np.array([2, -1], np.int64))]),
])
def test_negative_dimensions_are_named_with_what_to_do(op, inputs, extra):
    model = _dangling(helper.make_node(op, inputs, ["out_of_shape"], name="negative"), extra)
    with pytest.raises(MingError) as error:
        onnx_converters.constants_as_initializers(model)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"node 'negative' ({op}) gets the negative dimensions ")
    assert "make them the model's static sizes" in message


def test_ming_build_refuses_a_dangling_broadcast_in_one_line(tmp_path):
    path = tmp_path / "broadcast.onnx"
    onnx.save(_dangling(helper.make_node("Add", ["a", "b"], ["big"], name="broadcast_add"),
                        [_constant("a", ROW), _constant("b", COLUMN)]), str(path))
    result = subprocess.run([sys.executable, "-m", "ming_py.cli", "build", str(path), "-q", "-o", str(tmp_path / "o")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        "ming: error: node 'broadcast_add' (Add) computes a constant of 4,900,000,000 values, more than the "
        f"{MAX_FOLDED_VALUES:,} ming folds; check its inputs (a shape computed for a dynamic batch or size must "
        "give batch 1 and the model's static size)")


ANCHORS = np.arange(100_000 * 4, dtype=np.float32).reshape(100_000, 4)  # 400,000 values


@pytest.mark.unit
@pytest.mark.parametrize("axis, indices", [(0, np.arange(0, 100_000, 500)), (-2, np.arange(200)), (1, [3, 0])])
def test_a_gather_is_counted_by_what_it_takes_not_by_data_times_indices(axis, indices):
    """(100000, 4) anchors gathered by 200 indices are 800 values (data x indices would be 80,000,000)."""
    indices = np.asarray(indices, np.int64)
    model = _dangling(helper.make_node("Gather", ["anchors", "i"], ["picked"], name="pick", axis=axis),
                      [_constant("anchors", ANCHORS), _constant("i", indices)])
    onnx_converters.constants_as_initializers(model)
    folded = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}["picked"]
    assert np.array_equal(folded, np.take(ANCHORS, indices, axis=axis))


@pytest.mark.unit
def test_an_expand_of_an_empty_tensor_folds_to_an_empty_tensor():
    """An empty axis broadcasts to an empty axis: nothing is computed however large the other axes."""
    model = _dangling(helper.make_node("Expand", ["empty", "shape"], ["expanded"], name="expand"),
                      [_constant("empty", np.ones((1, 0), np.float32)),
                       _constant("shape", np.array([MAX_FOLDED_VALUES * 2, 1], np.int64))])
    onnx_converters.constants_as_initializers(model)
    folded = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}["expanded"]
    assert folded.shape == (MAX_FOLDED_VALUES * 2, 0)


@pytest.mark.unit
def test_static_shapes_names_the_values_whose_every_dimension_is_a_number():
    """The frontend's other rewrites (windows to the map's end, the host tail) read the shapes from here."""
    model = _qdq_conv_model([], ["y"])
    assert "c" not in onnx_converters.static_shapes(model)  # the batch is symbolic
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    assert onnx_converters.static_shapes(model)["c"] == (1, 4, 4, 4)
