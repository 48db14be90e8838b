"""Writes tests/data/detectors/*.onnx: small int8 QDQ detectors shaped like the published ones ming is given.

* `face_detector_pot.onnx` — a face detector as a vendor quantizer writes it: opset 12, symbolic batch,
  power-of-two quantization scales, per-tensor weights. Three feature maps' heads (scores, box centres, box
  sizes) are flattened to (batch, anchors, k) by Reshapes whose shapes are computed from the map
  (`Shape -> Gather -> Unsqueeze -> Concat` and `Shape -> Slice -> Concat`, as PyTorch writes `x.view(x.size(0),
  -1, k)`), concatenated in int8, and decoded in float after the last DequantizeLinear: `Sigmoid` of the
  scores, `centres * 0.1 * anchor_wh + anchor_xy`, `Exp(sizes * 0.2) * anchor_wh`.
* `ssd_tile.onnx` — an SSD head as tf2onnx writes it (opset 13, NHWC input with a Transpose after it): the
  anchor grid made in the graph from `Range -> Cast -> Mul -> Add -> Unsqueeze -> Expand -> Concat ->
  Reshape`, tiled over the batch by `Tile` (repeats from `Shape -> Slice -> Concat`), zero offsets from
  `ConstantOfShape`; boxes decoded as `loc * variance * anchor_wh + anchor_xy`, scores by `Sigmoid`.

Power-of-two scales: onnxruntime's `quantize_static` has no option for them, so the generator rounds every
activation and weight scale it wrote to the nearest power of two (log2 rounded) and requantizes the weights
with the rounded scale (int8, per tensor, zero point 0), the form Vitis AI's quantizer (vai_q_onnx, power-of-two
mode) gives. The model is then still a valid QDQ model; its calibration is merely coarser.

The face detectors' heads are int8 up to the decoding (Transpose, Reshape and Concat wrapped in QDQ, as a
vendor quantizer leaves them); the SSD's heads are float after their convolutions. The decoding stays float
in both, as exporters leave it. Run with ming's venv (onnx, onnxruntime only):

    .venv/bin/python tests/generators/detector_models.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

OUT = Path(__file__).resolve().parents[1] / "data" / "detectors"
SEED = 11
# a vendor quantizer wraps the heads' Transpose, Reshape and Concat in QDQ too; tf2onnx-like heads stay float
VENDOR_OPS = ["Conv", "Relu", "Transpose", "Reshape", "Concat"]
FLOAT_HEAD_OPS = ["Conv", "Relu"]


class _Builder:
    """Nodes, initializers and fresh names of one float graph."""

    def __init__(self, seed: int):
        self.nodes, self.initializers = [], []
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def constant(self, stem: str, value) -> str:
        name = self.name(stem)
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs, stem: str | None = None, **attributes) -> str:
        name = self.name(stem or op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [name], name=name, **attributes))
        return name

    def conv(self, x: str, cin: int, cout: int, kernel: int, stride: int, relu: bool, stem: str) -> str:
        weights = (self.rng.standard_normal((cout, cin, kernel, kernel)) / np.sqrt(cin * kernel * kernel))
        bias = self.rng.standard_normal(cout) * 0.1
        y = self.node("Conv", [x, self.constant(f"{stem}_w", weights.astype(np.float32)),
                               self.constant(f"{stem}_b", bias.astype(np.float32))], stem,
                      kernel_shape=[kernel, kernel], strides=[stride, stride], pads=[kernel // 2] * 4)
        return self.node("Relu", [y], f"{stem}_relu") if relu else y


def _flatten_by_gather(b: _Builder, x: str, k: int) -> str:
    """x (N, C, H, W) -> (N, H*W*C/k, k) with N from Shape -> Gather -> Unsqueeze -> Concat (opset 12)."""
    nhwc = b.node("Transpose", [x], perm=[0, 2, 3, 1])
    batch = b.node("Unsqueeze", [b.node("Gather", [b.node("Shape", [nhwc]), b.constant("zero", np.int64(0))],
                                        axis=0)], axes=[0])
    shape = b.node("Concat", [batch, b.constant("rest", np.array([-1, k], np.int64))], axis=0)
    return b.node("Reshape", [nhwc, shape])


def _flatten_by_slice(b: _Builder, x: str, k: int) -> str:
    """x (N, C, H, W) -> (N, H*W*C/k, k) with N from Shape -> Slice -> Concat."""
    nhwc = b.node("Transpose", [x], perm=[0, 2, 3, 1])
    batch = b.node("Slice", [b.node("Shape", [nhwc]), b.constant("start", np.array([0], np.int64)),
                             b.constant("end", np.array([1], np.int64))])
    shape = b.node("Concat", [batch, b.constant("rest", np.array([-1, k], np.int64))], axis=0)
    return b.node("Reshape", [nhwc, shape])


def _unsqueeze(b: _Builder, x: str, axis: int) -> str:
    """Unsqueeze of opset 13 (axes as an input)."""
    return b.node("Unsqueeze", [x, b.constant("axes", np.array([axis], np.int64))])


def _anchors(maps, per_position: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Anchor centres and sizes (1, anchors, 2) in the order the flattened heads give (row, column, anchor)."""
    centres, sizes = [], []
    for side in maps:
        step = size / side
        for row in range(side):
            for column in range(side):
                for a in range(per_position):
                    centres.append(((column + 0.5) * step, (row + 0.5) * step))
                    sizes.append((step * (1 + a), step * (1 + a)))
    return (np.array(centres, np.float32)[None], np.array(sizes, np.float32)[None])


def face_detector(concatenated: bool) -> onnx.ModelProto:
    """The heads of the three maps concatenated before decoding (`concatenated`), or decoded per map."""
    b = _Builder(SEED)
    size, per_position = 32, 2
    x = "input"
    f1 = b.conv(b.conv(x, 3, 8, 3, 2, True, "stem"), 8, 16, 3, 2, True, "stage1")  # 8 x 8
    f2 = b.conv(f1, 16, 16, 3, 2, True, "stage2")  # 4 x 4
    f3 = b.conv(f2, 16, 16, 3, 2, True, "stage3")  # 2 x 2
    heads = {"scores": [], "centres": [], "sizes": []}
    for number, (feature, flatten) in enumerate(((f1, _flatten_by_gather), (f2, _flatten_by_slice),
                                                 (f3, _flatten_by_gather))):
        for head, k in (("scores", 1), ("centres", 2), ("sizes", 2)):
            y = b.conv(feature, 16, per_position * k, 1, 1, False, f"{head}{number}")
            heads[head].append(flatten(b, y, k))
    levels = [slice(None)] if concatenated else [slice(number, number + 1) for number in range(3)]
    sides = [(8, 4, 2)] if concatenated else [(8,), (4,), (2,)]
    outputs = []
    for level, maps in zip(levels, sides):
        xy, wh = _anchors(maps, per_position, size)
        suffix = "" if concatenated else str(maps[0])
        scores, centres, sizes = (b.node("Concat", heads[h][level], f"{h}_concat", axis=1) if concatenated
                                  else heads[h][level][0] for h in heads)
        decoded = _decode(b, scores, centres, sizes, xy, wh)
        for (name, k), tensor in zip((("scores", 1), ("centres", 2), ("sizes", 2)), decoded):
            b.nodes.append(helper.make_node("Identity", [tensor], [name + suffix], name=f"{name}{suffix}_output"))
            outputs.append(helper.make_tensor_value_info(name + suffix, TensorProto.FLOAT,
                                                         ["batch", xy.shape[1], k]))
    graph = helper.make_graph(
        b.nodes, "face_detector", [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", 3, size, size])],
        outputs, b.initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])


def _decode(b: _Builder, scores: str, centres: str, sizes: str, anchor_xy: np.ndarray,
            anchor_wh: np.ndarray) -> tuple[str, str, str]:
    """Sigmoid(scores), centres * 0.1 * anchor_wh + anchor_xy, Exp(sizes * 0.2) * anchor_wh."""
    wh = b.constant("anchor_wh", anchor_wh)
    return (b.node("Sigmoid", [scores], "scores_sigmoid"),
            b.node("Add", [b.node("Mul", [b.node("Mul", [centres, b.constant("variance", np.float32(0.1))]), wh]),
                           b.constant("anchor_xy", anchor_xy)], "centres_decoded"),
            b.node("Mul", [b.node("Exp", [b.node("Mul", [sizes, b.constant("variance", np.float32(0.2))])]), wh],
                   "sizes_decoded"))


def ssd_tile() -> onnx.ModelProto:
    b = _Builder(SEED + 1)
    size, side, per_position = 16, 4, 2
    x = "input"
    nchw = b.node("Transpose", [x], "input_nchw", perm=[0, 3, 1, 2])
    feature = b.conv(b.conv(nchw, 3, 8, 3, 2, True, "stem"), 8, 16, 3, 2, True, "stage1")  # 4 x 4
    loc = _flatten_by_slice(b, b.conv(feature, 16, 4 * per_position, 1, 1, False, "loc"), 4)
    cls = _flatten_by_slice(b, b.conv(feature, 16, per_position, 1, 1, False, "cls"), 1)
    # the anchor grid in the graph: (column, row) centres of a side x side grid, per_position anchors each
    anchors = side * side * per_position
    steps = b.node("Add", [b.node("Mul", [b.node("Cast", [b.node("Range", [
        b.constant("start", np.int64(0)), b.constant("limit", np.int64(side)), b.constant("delta", np.int64(1))])],
        to=TensorProto.FLOAT), b.constant("step", np.float32(size / side))]),
        b.constant("half", np.float32(size / side / 2))])
    grid_shape = b.constant("grid", np.array([side, side], np.int64))
    columns = b.node("Expand", [_unsqueeze(b, steps, 0), grid_shape])
    rows = b.node("Expand", [_unsqueeze(b, steps, 1), grid_shape])
    grid = b.node("Concat", [_unsqueeze(b, columns, 2), _unsqueeze(b, rows, 2)], axis=2)  # (side, side, 2)
    per_anchor = b.node("Expand", [_unsqueeze(b, grid, 2), b.constant("anchor_grid", np.array(
        [side, side, per_position, 2], np.int64))])
    centres = b.node("Reshape", [per_anchor, b.constant("centres_shape", np.array([1, anchors, 2], np.int64))])
    sizes = b.node("Add", [b.node("ConstantOfShape", [b.constant("sizes_shape", np.array([1, anchors, 2], np.int64))],
                                  value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0])),
                           b.constant("size", np.float32(size / side))])
    anchor_wh = b.node("Concat", [sizes, sizes], axis=2)  # (1, anchors, 4): w, h, w, h
    anchor_xy = b.node("Concat", [centres, b.node("ConstantOfShape", [b.constant(
        "zeros_shape", np.array([1, anchors, 2], np.int64))])], axis=2)  # x, y, 0, 0
    repeats = b.node("Concat", [b.node("Slice", [b.node("Shape", [x]), b.constant("start", np.array([0], np.int64)),
                                                 b.constant("end", np.array([1], np.int64))]),
                                b.constant("ones", np.array([1, 1], np.int64))], axis=0)
    tiled_wh = b.node("Tile", [anchor_wh, repeats], "anchor_wh_tiled")
    tiled_xy = b.node("Tile", [anchor_xy, repeats], "anchor_xy_tiled")
    boxes = b.node("Add", [b.node("Mul", [b.node("Mul", [loc, b.constant("variance", np.float32(0.1))]),
                                          tiled_wh]), tiled_xy], "boxes_decoded")
    scores = b.node("Sigmoid", [cls], "scores_sigmoid")
    b.nodes.append(helper.make_node("Identity", [boxes], ["boxes"], name="boxes_output"))
    b.nodes.append(helper.make_node("Identity", [scores], ["scores"], name="scores_output"))
    graph = helper.make_graph(
        b.nodes, "ssd_tile",
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["unk__0", size, size, 3])],
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["unk__0", anchors, 4]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["unk__0", anchors, 1])], b.initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _constant_nodes(model: onnx.ModelProto) -> list[str]:
    """The nodes that compute from constants only (the anchor grid): exporters leave them float."""
    constant = {i.name for i in model.graph.initializer}
    names = []
    for node in model.graph.node:
        if all(name in constant for name in node.input if name):
            constant.update(node.output)
            names.append(node.name)
    return names


def quantize(model: onnx.ModelProto, out: Path, ops: list[str], samples: int = 8) -> Path:
    """int8 QDQ of the layers of `ops` (not of the constant anchor grid), calibrated on seeded standard-normal
    inputs."""
    shape = [1 if isinstance(d, str) or not d else d for d in
             (dim.dim_param or dim.dim_value for dim in model.graph.input[0].type.tensor_type.shape.dim)]
    rng = np.random.default_rng(SEED)
    data = iter([{"input": rng.standard_normal(shape).astype(np.float32)} for _ in range(samples)])

    class Reader(CalibrationDataReader):
        def get_next(self):
            return next(data, None)

    with tempfile.TemporaryDirectory() as tmp:
        float_path = Path(tmp) / "float.onnx"
        onnx.save(model, str(float_path))
        quantize_static(str(float_path), str(out), Reader(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=False,
                        op_types_to_quantize=ops, nodes_to_exclude=_constant_nodes(model))
    return out


def power_of_two_scales(path: Path) -> None:
    """Round every activation and weight scale to the nearest power of two and requantize the int8 weights
    with it; each int32 bias gets the product of its layer's new input and weight scales (as a quantizer
    writes it) and is requantized with that."""
    model = onnx.load(str(path))
    initializers = {i.name: i for i in model.graph.initializer}
    producers = {o: n for n in model.graph.node for o in n.output}
    biases = {}
    for node in model.graph.node:
        if node.op_type == "Conv" and len(node.input) > 2:
            biases[producers[node.input[2]].name] = (producers[node.input[0]], producers[node.input[1]])
    for node in model.graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") and node.name not in biases:
            old = numpy_helper.to_array(initializers[node.input[1]]).astype(np.float64)
            _rescale(node, initializers, (2.0 ** np.round(np.log2(old))).astype(np.float32))
    for node in model.graph.node:
        if node.name in biases:
            x, w = (numpy_helper.to_array(initializers[n.input[1]]) for n in biases[node.name])
            _rescale(node, initializers, (x * w).astype(np.float32))
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def _rescale(node: onnx.NodeProto, initializers: dict, new: np.ndarray) -> None:
    """Give the (de)quantization `node` the scale `new`, requantizing its constant integers (weights, biases)."""
    scale = initializers[node.input[1]]
    old = numpy_helper.to_array(scale).astype(np.float64)
    if node.op_type == "DequantizeLinear" and node.input[0] in initializers:
        values = initializers[node.input[0]]
        integers = numpy_helper.to_array(values)
        info = np.iinfo(integers.dtype)
        requantized = np.clip(np.rint(integers.astype(np.float64) * old / new), info.min, info.max)
        values.CopyFrom(numpy_helper.from_array(requantized.astype(integers.dtype), values.name))
    scale.CopyFrom(numpy_helper.from_array(new.reshape(old.shape), scale.name))


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for concatenated, name in ((True, "face_detector_pot.onnx"), (False, "face_detector_levels_pot.onnx")):
        power_of_two_scales(quantize(face_detector(concatenated), OUT / name, VENDOR_OPS))
    quantize(ssd_tile(), OUT / "ssd_tile.onnx", FLOAT_HEAD_OPS)
    for path in sorted(OUT.glob("*.onnx")):
        model = onnx.load(str(path))
        print(path.name, path.stat().st_size, "bytes, opset", model.opset_import[0].version, file=sys.stderr)


if __name__ == "__main__":
    main()
