"""ONNX detectors as exporters and quantizers write them: shape arithmetic for a dynamic batch folded to
constants (bounded), the float decoding after the last DequantizeLinear run on the host bit for bit as
onnxruntime runs it, and any other float post-processing refused by node name with the cut to make.

The models in tests/data/detectors come from tests/generators/detector_models.py: a QDQ face detector of
opset 12 with power-of-two scales (heads flattened through Shape subgraphs; decoded per map, or concatenated
first) and a tf2onnx-like SSD head whose anchor grid is made in the graph and tiled over the batch."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from emit_helpers import csim_outputs
from ming_py import reference
from ming_py.errors import MingError
from ming_py.frontends import onnx_converters, onnx_model
from ming_py.pipeline import lift
from ming_py.contract import accelerator_schema, ming_host, ming_ports
from ming_py.contract.ming_host import HostOp
from ming_py.ort_session import onnxruntime_session

DETECTORS = Path(__file__).parent / "data" / "detectors"
BUILT = ["face_detector_levels_pot.onnx", "ssd_tile.onnx", "torch_face_levels.onnx"]


def onnxruntime_outputs(path, x: np.ndarray) -> dict[str, np.ndarray]:
    session = onnxruntime_session(str(path))
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {session.get_inputs()[0].name: x})))


def model_input(path, seed: int) -> np.ndarray:
    value = onnx.load(str(path)).graph.input[0]
    shape = [d.dim_value or 1 for d in value.type.tensor_type.shape.dim]
    return (np.random.default_rng(seed).standard_normal(shape) * 2).astype(np.float32)


def assert_bitwise_equal(ours: dict, theirs: dict) -> None:
    assert list(ours) == list(theirs)
    for name, expected in theirs.items():
        got = ours[name]
        assert got.dtype == expected.dtype == np.float32 and got.shape == expected.shape, name
        different = np.count_nonzero(got.view(np.uint32) != expected.view(np.uint32))
        assert different == 0, f"{name}: {different} of {expected.size} values differ from onnxruntime"


# ---- the committed detectors ----------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize("name", ["face_detector_pot.onnx", "face_detector_levels_pot.onnx", "torch_face_levels.onnx",
                                  "torch_face_concat.onnx"])
def test_face_detectors_are_opset_12_with_power_of_two_scales(name):
    model = onnx.load(str(DETECTORS / name))
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [12]
    initializers = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    activations = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    assert activations
    for node in activations + [n for n in model.graph.node if n.op_type == "DequantizeLinear"
                               and initializers.get(n.input[0], np.zeros(1, np.int8)).dtype == np.int8]:
        scale = float(initializers[node.input[1]])
        assert 2.0 ** np.round(np.log2(scale)) == scale, (node.name, scale)
    assert any(n.op_type == "Shape" for n in model.graph.node)


@pytest.mark.parametrize("name", BUILT)
def test_detector_reference_and_host_tail_equal_onnxruntime_bit_for_bit(name):
    path = DETECTORS / name
    graph = lift(path)
    assert all(op.kind != "dequantize" for out in graph.outputs for op in out.host_ops)
    assert {op.kind for out in graph.outputs for op in out.host_ops} >= {"table", "transpose", "mul", "add"}
    for seed in range(4):
        x = model_input(path, seed)
        assert_bitwise_equal(reference.run(graph, x), onnxruntime_outputs(path, x))


@pytest.mark.parametrize("name", BUILT)
def test_detector_c_simulation_with_its_host_tail_equals_onnxruntime(name, tmp_path):
    path = DETECTORS / name
    graph = lift(path)
    x = np.concatenate([model_input(path, seed) for seed in (10, 11)])
    ours = csim_outputs(graph, tmp_path, x)
    theirs = [onnxruntime_outputs(path, image[None]) for image in x]
    assert_bitwise_equal(ours, {k: np.concatenate([t[k] for t in theirs]) for k in theirs[0]})


def test_ming_build_verifies_the_tiled_ssd_and_its_deployment_equals_onnxruntime(tmp_path):
    """`ming build` checks its C++; `ming deploy --backend csim` runs the host tail from the build's metadata
    (host.json, the board's numpy-only ming_host) on a batch: equal to onnxruntime bit for bit."""
    ming = str(Path(sys.executable).parent / "ming")
    path = DETECTORS / "ssd_tile.onnx"
    result = subprocess.run([ming, "build", str(path), "--board", "kv260", "-o", str(tmp_path / "out")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "verified: the C-simulation equals ming reference" in result.stderr
    assert '"table"' in (tmp_path / "out" / "host.json").read_text()
    x = np.concatenate([model_input(path, seed) for seed in (20, 21, 22)])
    np.save(tmp_path / "x.npy", x)
    result = subprocess.run([ming, "deploy", str(tmp_path / "out"), "--input", str(tmp_path / "x.npy"), "--output",
                             str(tmp_path / "y.npz"), "--backend", "csim"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    ours = dict(np.load(tmp_path / "y.npz"))
    theirs = [onnxruntime_outputs(path, image[None]) for image in x]
    assert_bitwise_equal({name: ours[name] for name in theirs[0]},
                         {k: np.concatenate([t[k] for t in theirs]) for k in theirs[0]})


@pytest.mark.parametrize("name, concat, outputs", [("face_detector_pot.onnx", "scores_concat_", 9),
                                                   ("torch_face_concat.onnx", "/Concat_", 6)])
def test_concatenated_heads_are_refused_with_the_cut_that_compiles(tmp_path, name, concat, outputs):
    """Heads flattened (NCHW -> NHWC) and concatenated in int8 before the decoding: refused at the Concat, and
    the cut ming prints (the heads' dequantized convolutions as outputs) builds and equals onnxruntime."""
    path = DETECTORS / name
    with pytest.raises(MingError) as error:
        lift(path)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"node '{concat}") and "(Concat)" in message and "output 'scores'" in message
    call = re.search(r"onnx\.utils\.extract_model\((.*)\), then", message).group(1)
    source, target, inputs, names = eval(f"({call})", {})  # the literal arguments ming printed
    assert source == str(path) and inputs == ["input"] and len(names) == outputs
    cut = tmp_path / target
    onnx.utils.extract_model(source, str(cut), inputs, names)
    graph = lift(cut)
    x = model_input(cut, 0)
    assert_bitwise_equal(reference.run(graph, x), onnxruntime_outputs(cut, x))


# ---- shape arithmetic -----------------------------------------------------------------------------


def _qdq_conv_model(tail, outputs, opset: int = 13, extra=()) -> onnx.ModelProto:
    """input (batch, 2, 4, 4) -> QDQ -> Conv (4 channels) -> QDQ -> `tail` nodes reading 'y' -> outputs."""
    rng = np.random.default_rng(3)
    initializers = [
        numpy_helper.from_array(np.float32(0.03125), "s"), numpy_helper.from_array(np.int8(0), "z"),
        numpy_helper.from_array(rng.integers(-60, 60, (4, 2, 1, 1)).astype(np.int8), "w"),
        numpy_helper.from_array(np.float32(0.0078125), "ws"), numpy_helper.from_array(np.int8(0), "wz"),
        *extra]
    nodes = [helper.make_node("QuantizeLinear", ["input", "s", "z"], ["xq"], name="xq"),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="xd"),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], name="wd"),
             helper.make_node("Conv", ["xd", "wd"], ["c"], name="conv"),
             helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"], name="cq"),
             helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["y"], name="cd"), *tail]
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                         ["batch", 2, 4, 4])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
                              initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    inferred = onnx.shape_inference.infer_shapes(model)
    for output, known in zip(model.graph.output, inferred.graph.output):  # the shapes and types inferred
        output.CopyFrom(known)
    return model


def _folded(model: onnx.ModelProto) -> onnx.ModelProto:
    onnx_converters.constants_as_initializers(model)
    onnx_model.fix_symbolic_batch(model)
    onnx_converters.rewrite_converter_idioms(model)
    return model


def _constant(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


@pytest.mark.unit
def test_shape_of_a_reshape_shaped_by_another_shape_subgraph_folds():
    """Two levels: the second Shape reads a Reshape whose shape only the first fold makes static."""
    tail = [helper.make_node("Shape", ["y"], ["s1"], name="shape1"),
            helper.make_node("Gather", ["s1", "zero"], ["b1"], name="gather1", axis=0),
            helper.make_node("Unsqueeze", ["b1", "axes"], ["b1u"], name="unsqueeze1"),
            helper.make_node("Concat", ["b1u", "rest1"], ["shape_a"], name="concat1", axis=0),
            helper.make_node("Reshape", ["y", "shape_a"], ["r1"], name="reshape1"),
            helper.make_node("Shape", ["r1"], ["s2"], name="shape2"),
            helper.make_node("Slice", ["s2", "start", "end"], ["b2"], name="slice2"),
            helper.make_node("Concat", ["b2", "rest2"], ["shape_b"], name="concat2", axis=0),
            helper.make_node("Reshape", ["r1", "shape_b"], ["out"], name="reshape2")]
    extra = [_constant("zero", np.int64(0)), _constant("axes", np.array([0], np.int64)),
             _constant("rest1", np.array([-1, 2], np.int64)), _constant("start", np.array([0], np.int64)),
             _constant("end", np.array([1], np.int64)), _constant("rest2", np.array([4, -1], np.int64))]
    model = _folded(_qdq_conv_model(tail, ["out"], extra=extra))
    assert not {"Shape", "Gather", "Slice", "Unsqueeze", "Concat"} & {n.op_type for n in model.graph.node}
    initializers = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    assert initializers["shape_a"].tolist() == [1, -1, 2] and initializers["shape_b"].tolist() == [1, 4, -1]


@pytest.mark.unit
def test_size_of_a_map_folds_into_the_reshape_it_shapes():
    """x.view(-1, x.numel() // 4): Size -> Div -> Unsqueeze -> Concat -> Reshape."""
    tail = [helper.make_node("Size", ["y"], ["n"], name="size"),
            helper.make_node("Div", ["n", "four"], ["per_row"], name="div"),
            helper.make_node("Unsqueeze", ["per_row", "axes"], ["per_row1"], name="unsqueeze"),
            helper.make_node("Concat", ["rows", "per_row1"], ["shape"], name="concat", axis=0),
            helper.make_node("Reshape", ["y", "shape"], ["out"], name="reshape")]
    extra = [_constant("four", np.int64(4)), _constant("axes", np.array([0], np.int64)),
             _constant("rows", np.array([4], np.int64))]
    model = _folded(_qdq_conv_model(tail, ["out"], extra=extra))
    assert not {"Size", "Div", "Unsqueeze", "Concat"} & {n.op_type for n in model.graph.node}
    assert {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}["shape"].tolist() == [4, 16]


@pytest.mark.unit
def test_anchor_grid_subgraph_folds_to_onnxruntimes_values():
    """Range, Cast, Mul, Expand, ConstantOfShape and a Tile over the batch fold to what onnxruntime computes."""
    nodes = [helper.make_node("Range", ["r0", "r1", "r2"], ["range"], name="range"),
             helper.make_node("Cast", ["range"], ["cast"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Mul", ["cast", "step"], ["steps"], name="mul"),
             helper.make_node("Expand", ["steps", "grid"], ["grid_x"], name="expand"),
             helper.make_node("ConstantOfShape", ["grid"], ["ones"], name="cos",
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.5])),
             helper.make_node("Add", ["grid_x", "ones"], ["anchors"], name="add"),
             helper.make_node("Shape", ["input"], ["shape"], name="shape"),
             helper.make_node("Slice", ["shape", "start", "end"], ["batch"], name="slice"),
             helper.make_node("Concat", ["batch", "one"], ["repeats"], name="repeats", axis=0),
             helper.make_node("Tile", ["anchors", "repeats"], ["tiled"], name="tile"),
             helper.make_node("Unsqueeze", ["tiled", "axes"], ["tiled4"], name="unsq"),
             helper.make_node("Mul", ["y", "tiled4"], ["out"], name="decode")]
    extra = [_constant("r0", np.int64(0)), _constant("r1", np.int64(4)), _constant("r2", np.int64(1)),
             _constant("step", np.float32(0.75)), _constant("grid", np.array([4, 4], np.int64)),
             _constant("start", np.array([0], np.int64)), _constant("end", np.array([1], np.int64)),
             _constant("one", np.array([1], np.int64)), _constant("axes", np.array([0], np.int64))]
    model = _qdq_conv_model(nodes, ["out"], extra=extra)
    expected = onnxruntime_session(
        helper.make_model(helper.make_graph(
            model.graph.node[6:17], "anchors", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                               [1, 2, 4, 4])],
            [helper.make_tensor_value_info("tiled4", TensorProto.FLOAT, None)], list(model.graph.initializer)),
            opset_imports=model.opset_import).SerializeToString()).run(
        None, {"input": np.zeros((1, 2, 4, 4), np.float32)})[0]
    model = _folded(model)
    assert [n.op_type for n in model.graph.node if n.op_type not in ("QuantizeLinear", "DequantizeLinear")] == \
        ["Conv", "Mul"]
    folded = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}["tiled4"]
    assert folded.shape == expected.shape == (1, 4, 4) and folded.tobytes() == expected.tobytes()


@pytest.mark.unit
@pytest.mark.parametrize("op, inputs, extra", [
    ("ConstantOfShape", ["huge"], [_constant("huge", np.array([1, 1 << 14, 1 << 14], np.int64))]),
    ("Tile", ["small", "huge"], [_constant("small", np.ones((4, 4), np.float32)),
                                 _constant("huge", np.array([1 << 12, 1 << 12], np.int64))]),
    ("Expand", ["small", "huge"], [_constant("small", np.ones((1, 4), np.float32)),
                                   _constant("huge", np.array([1 << 23, 4], np.int64))]),
    ("Range", ["r0", "r1", "r2"], [_constant("r0", np.float32(0)), _constant("r1", np.float32(1e9)),
                                   _constant("r2", np.float32(1))]),
])
def test_a_folded_constant_beyond_the_limit_is_refused_by_name_before_it_is_made(op, inputs, extra):
    tail = [helper.make_node(op, inputs, ["big"], name="the_big_one"),
            helper.make_node("Identity", ["y"], ["out"], name="identity")]
    model = _qdq_conv_model(tail, ["out"], extra=extra)
    with pytest.raises(MingError, match=rf"^node 'the_big_one' \({op}\) computes a constant of [\d,]+ values, "
                                        r"more than the 16,777,216 ming folds"):
        onnx_converters.constants_as_initializers(model)


# ---- float tails ------------------------------------------------------------------------------------


def _lift_model(model: onnx.ModelProto, tmp_path: Path) -> tuple[Path, object]:
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    return path, lift(path)


def test_constant_first_and_dequantized_constants_run_on_the_host_bit_for_bit(tmp_path):
    """c - x, c / x with a per-element c, a quantized constant (anchors behind a DequantizeLinear), and the
    scalar steps tabulated: Neg, Tanh, Div by a scalar."""
    rng = np.random.default_rng(5)
    tail = [helper.make_node("Div", ["y", "two"], ["t_a"], name="halve"),
            helper.make_node("Tanh", ["t_a"], ["t_b"], name="tanh"),
            helper.make_node("Neg", ["t_b"], ["t_c"], name="neg"),
            helper.make_node("Sub", ["anchors", "t_c"], ["t_d"], name="sub_from"),
            helper.make_node("DequantizeLinear", ["anchors_q", "as", "az"], ["anchors_d"], name="anchors_dq"),
            helper.make_node("Div", ["anchors_d", "t_d"], ["t_e"], name="divide_into"),
            helper.make_node("Mul", ["t_e", "anchors_d"], ["out"], name="mul")]
    extra = [_constant("two", np.float32(2.0)),
             _constant("anchors", (rng.standard_normal((4, 4, 4)) + 3).astype(np.float32)),
             _constant("anchors_q", rng.integers(1, 100, (1, 4, 1, 4)).astype(np.int8)),
             _constant("as", np.float32(0.05)), _constant("az", np.int8(-3))]
    path, graph = _lift_model(_qdq_conv_model(tail, ["out"], extra=extra), tmp_path)
    assert [op.kind for op in graph.outputs[0].host_ops] == ["table", "reshape", "rsub", "rdiv", "mul", "reshape"]
    for seed in range(3):
        x = model_input(path, seed)
        assert_bitwise_equal(reference.run(graph, x), onnxruntime_outputs(path, x))


def test_an_activation_at_an_output_runs_on_the_host_for_every_int8_value(tmp_path):
    """Q -> DQ -> Sigmoid as the whole model: the accelerator passes the int8 values, the host tabulates
    onnxruntime's Sigmoid; all 256 values equal onnxruntime's."""
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quantize"),
         helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="dequantize"),
         helper.make_node("Sigmoid", ["d"], ["y"], name="act")],
        "bare", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        initializer=[_constant("s", np.float32(0.05)), _constant("z", np.int8(3))])
    path, lifted = _lift_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
                               tmp_path)
    x = ((np.arange(256, dtype=np.float32) - 131) * np.float32(0.05)).reshape(1, 4, 8, 8)
    assert_bitwise_equal(reference.run(lifted, x), onnxruntime_outputs(path, x))


def _refusal(model: onnx.ModelProto, tmp_path: Path) -> str:
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    with pytest.raises(MingError) as error:
        lift(path)
    message = str(error.value)
    assert "\n" not in message
    return message


def test_non_maximum_suppression_is_refused_with_the_cut(tmp_path):
    tail = [helper.make_node("Reshape", ["y", "boxes_shape"], ["boxes"], name="boxes"),
            helper.make_node("Reshape", ["y", "scores_shape"], ["scores"], name="scores"),
            helper.make_node("NonMaxSuppression", ["boxes", "scores", "top", "iou"], ["selected"], name="nms")]
    extra = [_constant("boxes_shape", np.array([1, 16, 4], np.int64)),
             _constant("scores_shape", np.array([1, 4, 16], np.int64)),
             _constant("top", np.array([5], np.int64)), _constant("iou", np.array([0.5], np.float32))]
    model = _qdq_conv_model(tail, ["selected"], extra=extra)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("selected", TensorProto.INT64, ["selected", 3]))
    message = _refusal(model, tmp_path)
    assert message.startswith("node 'nms' (NonMaxSuppression) in the post-processing of output 'selected' "
                              "is not element-wise")
    assert f"onnx.utils.extract_model('{tmp_path / 'm.onnx'}', 'm_integer.onnx', ['input'], ['y'])" in message


def test_a_decoding_that_slices_and_concatenates_is_refused_with_the_cut(tmp_path):
    tail = [helper.make_node("Slice", ["y", "s0", "s1", "axis"], ["xy"], name="slice_xy"),
            helper.make_node("Slice", ["y", "s1", "s2", "axis"], ["wh"], name="slice_wh"),
            helper.make_node("Exp", ["wh"], ["wh_exp"], name="exp"),
            helper.make_node("Concat", ["xy", "wh_exp"], ["out"], name="boxes", axis=1),
            helper.make_node("Sigmoid", ["y"], ["scores"], name="sigmoid")]
    extra = [_constant("s0", np.array([0], np.int64)), _constant("s1", np.array([2], np.int64)),
             _constant("s2", np.array([4], np.int64)), _constant("axis", np.array([1], np.int64))]
    message = _refusal(_qdq_conv_model(tail, ["out", "scores"], extra=extra), tmp_path)
    assert message.startswith("node 'slice_xy' (Slice) in the post-processing of output 'out' is not "
                              "element-wise")
    assert message.endswith("['input'], ['y', 'scores']), then run the rest on the host")


def test_a_float_op_after_a_per_element_constant_is_refused_by_name(tmp_path):
    tail = [helper.make_node("Mul", ["y", "anchors"], ["a"], name="scale_by_anchors"),
            helper.make_node("Exp", ["a"], ["out"], name="exp_after_anchors")]
    extra = [_constant("anchors", np.linspace(0.5, 2, 64, dtype=np.float32).reshape(1, 4, 4, 4))]
    message = _refusal(_qdq_conv_model(tail, ["out"], extra=extra), tmp_path)
    assert message.startswith("node 'exp_after_anchors' (Exp) follows a per-element constant")


def test_a_broadcast_to_a_larger_shape_is_refused_by_name(tmp_path):
    tail = [helper.make_node("Reshape", ["y", "column"], ["t_column"], name="to_column"),
            helper.make_node("Mul", ["t_column", "wide"], ["out"], name="widen")]
    extra = [_constant("column", np.array([1, 64, 1], np.int64)), _constant("wide", np.ones((1, 64, 2), np.float32))]
    message = _refusal(_qdq_conv_model(tail, ["out"], extra=extra), tmp_path)
    assert message.startswith("node 'widen' (Mul) broadcasts 't_column' [1, 64, 1] to a larger shape")


# ---- the host steps and their metadata ---------------------------------------------------------------


def _port(host_ops, shape=(1, 4, 2)) -> ming_ports.Port:
    values = int(np.prod(shape))
    return ming_ports.Port("y", tuple(shape), tuple(shape), (values, 1, 1), 0.25, 3, values,
                            ming_host.words_per_image(values), "float32", (), tuple(host_ops))


@pytest.mark.unit
def test_float_steps_of_a_batch_equal_each_image():
    rng = np.random.default_rng(0)
    table = tuple(float(v) for v in np.tanh(np.arange(-128, 128) / 16).astype(np.float32))
    ops = (HostOp("table", values=table), HostOp("reshape", shape=(1, 4, 2)), HostOp("transpose", axes=(0, 2, 1)),
           HostOp("rdiv", shape=(2, 4), values=tuple(rng.standard_normal(8).tolist())),
           HostOp("sub", shape=(4,), values=(1.0, 2.0, 3.0, 4.0)), HostOp("reshape", shape=(1, 4, 2)))
    port = _port(ops)
    q = rng.integers(-128, 128, (5, 1, 4, 2)).astype(np.int8)
    batch = ming_host.model_output_of_images(q, port)
    alone = np.stack([ming_host.model_output(image, port) for image in q])
    assert batch.dtype == np.float32 and batch.tobytes() == alone.tobytes()
    first = np.asarray(table, np.float32)[q[0].astype(np.int64) + 128].reshape(1, 4, 2).transpose(0, 2, 1)
    expected = (np.float32(1) * np.asarray(ops[3].values, np.float32).reshape(2, 4) / first
                - np.array([1, 2, 3, 4], np.float32)).reshape(1, 4, 2)
    assert batch[0].tobytes() == expected.astype(np.float32).tobytes()


@pytest.mark.unit
@pytest.mark.parametrize("op, problem", [
    ({"kind": "table", "values": [0.0] * 255}, "has 255 numbers, not the 256 of an int8 table"),
    ({"kind": "mul", "shape": [3], "values": [1.0, 2.0]}, "has 2 numbers, not the 3 of shape [3]"),
    ({"kind": "add", "shape": [3], "values": [1.0, 2.0, 3.0]}, "does not broadcast to the values' shape [1, 4, 2]"),
    ({"kind": "transpose", "axes": [0, 1]}, "is [0, 1], not a permutation of the 3 axes of [1, 4, 2]"),
])
def test_host_metadata_with_a_malformed_float_step_is_named(op, problem):
    step = {"kind": "reshape", "axis": -1, "scale": 1.0, "zero_point": 0, "shape": [1, 4, 2]}
    bad = {"axis": -1, "scale": 1.0, "zero_point": 0, "shape": []} | op
    port = {"onnx_name": "y", "onnx_shape": [1, 4, 2], "array_shape": [1, 4, 2], "stream_shape": [8, 1, 1],
            "words": 1, "scale": 0.25, "zero_point": 3, "dtype": "float32", "permutation": [], "index": 0,
            "host_ops": [step, bad]}
    host = {"model": "m", "input": port | {"host_ops": []}, "outputs": [port]}
    assert problem in (accelerator_schema.host_problem(host) or "")
