"""ONNX Resize and Pad nodes (they change a map's geometry): what ming can compile of them, read from the
ONNX graph.

IREE lowers a nearest Resize to a float `linalg.generic` whose body computes the source index of
every output element; the lifter does not interpret that body. It takes the node's integer factors
from here instead: ming compiles a nearest Resize whose output index x along every axis reads input
index x // s for an integer factor s (every input value repeated s times), and checks that the
node's coordinate_transformation_mode and nearest_mode give exactly that map, computed with exact
fractions by the ONNX definition. A Pad must add a constant border (mode=constant, constant pads).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import onnx
from onnx import numpy_helper

from ming_py.errors import MingError

# the coordinate transformations whose map ming checks; tf_crop_and_resize reads a region of interest and
# onnxruntime rejects tf_half_pixel_for_nearest
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _attribute(node: onnx.NodeProto, name: str, default):
    for a in node.attribute:
        if a.name == name:
            value = onnx.helper.get_attribute_value(a)
            return value.decode() if isinstance(value, bytes) else value
    return default


def _constant(graph: onnx.GraphProto, name: str) -> np.ndarray | None:
    """An initializer's or a Constant node's value; None for a computed tensor."""
    for init in graph.initializer:
        if init.name == name:
            return numpy_helper.to_array(init)
    for node in graph.node:
        if node.op_type == "Constant" and node.output[0] == name:
            return numpy_helper.to_array(_attribute(node, "value", None))
    return None


def _shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    inferred = onnx.shape_inference.infer_shapes(model).graph
    values = list(inferred.value_info) + list(inferred.input) + list(inferred.output)
    return {v.name: tuple(d.dim_value for d in v.type.tensor_type.shape.dim) for v in values}


def resize_factors(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """Per Resize node (by name): its integer factor along each axis of its input."""
    resizes = [n for n in model.graph.node if n.op_type == "Resize"]
    if not resizes:
        return {}
    shapes = _shapes(model)
    return {node.name: _factors(model.graph, node, shapes.get(node.input[0], ())) for node in resizes}


def prepare_resizes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """Check every Resize (`resize_factors`) and return its factors by node name. The lifter finds IREE's
    generic of a Resize by the node's name, so an unnamed one is named after its output. Every Resize then
    gets the coordinate and rounding modes IREE lowers for any factor, asymmetric with floor: the same map,
    and the lifter takes the factors, not IREE's index arithmetic (IREE 3.13 refuses pytorch_half_pixel and
    align_corners for nearest)."""
    for node in model.graph.node:
        if node.op_type == "Resize" and not node.name:
            node.name = node.output[0]
    factors = resize_factors(model)
    for node in (n for n in model.graph.node if n.op_type == "Resize"):
        kept = [a for a in node.attribute if a.name not in ("coordinate_transformation_mode", "nearest_mode")]
        del node.attribute[:]
        node.attribute.extend(kept + [onnx.helper.make_attribute("coordinate_transformation_mode", "asymmetric"),
                                      onnx.helper.make_attribute("nearest_mode", "floor")])
    return factors


def _factors(graph: onnx.GraphProto, node: onnx.NodeProto, shape: tuple[int, ...]) -> tuple[int, ...]:
    where = f"node '{node.name}' (Resize"
    mode = _attribute(node, "mode", "nearest")
    if mode != "nearest":
        raise MingError(f"{where}, mode={mode}) is not supported; ming upsamples with mode=nearest by integer "
                        "factors")
    coordinates = _attribute(node, "coordinate_transformation_mode", "half_pixel")
    rounding = _attribute(node, "nearest_mode", "round_prefer_floor")
    if coordinates not in COORDINATE_MODES or rounding not in NEAREST_MODES:
        raise MingError(f"{where}, coordinate_transformation_mode={coordinates}, nearest_mode={rounding}) is not "
                        f"supported; ming takes {', '.join(COORDINATE_MODES)} with {', '.join(NEAREST_MODES)}")
    if not shape or not all(shape):
        raise MingError(f"{where}): the shape of its input is unknown; export the model with static shapes")
    if len(node.input) < 3:
        raise MingError(f"{where}) is the opset 10 form (X, scales); re-export the model with opset 11 or later")
    scales = _scales(graph, node, shape, where)
    factors = []
    for axis, scale in enumerate(scales):
        if scale.denominator != 1 or scale < 1:
            raise MingError(f"{where}): scale {float(scale):g} along axis {axis} is not an integer factor; ming "
                            "upsamples by integer factors")
        factors.append(scale.numerator)
    if any(f != 1 for f in factors[:-2]):
        raise MingError(f"{where}) resizes the batch or channel axis; ming upsamples rows and columns")
    for axis, (length, factor) in enumerate(zip(shape, factors)):
        sources = [nearest_source(x, length, factor, coordinates, rounding) for x in range(length * factor)]
        if sources != [x // factor for x in range(length * factor)]:
            raise MingError(f"{where}, coordinate_transformation_mode={coordinates}, nearest_mode={rounding}) "
                            f"does not repeat every value {factor} times along axis {axis}; ming supports "
                            "nearest resizes that do (e.g. half_pixel with round_prefer_floor, asymmetric "
                            "with floor)")
    return tuple(factors)


def _scales(graph: onnx.GraphProto, node: onnx.NodeProto, shape: tuple[int, ...], where: str) -> list[Fraction]:
    """The node's scale along every axis: its `scales` input, or output size / input size from `sizes`."""
    inputs = list(node.input) + [""] * 4
    scales, sizes = inputs[2], inputs[3]
    axes = _attribute(node, "axes", None)
    axes = [a % len(shape) for a in axes] if axes else list(range(len(shape)))
    if _attribute(node, "keep_aspect_ratio_policy", "stretch") != "stretch" and sizes:
        raise MingError(f"{where}): keep_aspect_ratio_policy is not supported; give scales or sizes for every axis")
    given = _constant(graph, scales) if scales else None
    if given is not None and given.size:
        values = [Fraction(float(np.float32(v))) for v in given.reshape(-1)]
    else:
        wanted = _constant(graph, sizes) if sizes else None
        if wanted is None or not wanted.size:
            raise MingError(f"{where}): its scales or sizes are computed in the graph; ming needs constant ones")
        values = [Fraction(int(v), shape[a]) for a, v in zip(axes, wanted.reshape(-1))]
    result = [Fraction(1)] * len(shape)
    for axis, value in zip(axes, values):
        result[axis] = value
    return result


def nearest_source(x: int, length: int, factor: int, coordinates: str, rounding: str) -> int:
    """The input index ONNX's nearest Resize reads for output index x along an axis of `length` values
    resized to `length * factor` (exact arithmetic; onnxruntime's float32 meets no tie these maps do not)."""
    resized = length * factor
    if coordinates == "align_corners":
        original = Fraction(0) if resized == 1 else Fraction(x * (length - 1), resized - 1)
    elif coordinates == "asymmetric":
        original = Fraction(x, factor)
    elif coordinates == "pytorch_half_pixel" and resized == 1:
        original = Fraction(0)
    else:  # half_pixel, pytorch_half_pixel, half_pixel_symmetric (no offset at an integer scale)
        original = (x + Fraction(1, 2)) / factor - Fraction(1, 2)
    floor, ceil = math.floor(original), math.ceil(original)
    if rounding == "floor":
        index = floor
    elif rounding == "ceil":
        index = ceil
    elif original - floor == Fraction(1, 2):
        index = floor if rounding == "round_prefer_floor" else ceil
    else:
        index = round(original)
    return min(max(index, 0), length - 1)


def check_pads(model: onnx.ModelProto) -> None:
    """Reject Pad nodes other than a constant border of constant size."""
    graph = model.graph
    for node in (n for n in graph.node if n.op_type == "Pad"):
        mode = _attribute(node, "mode", "constant")
        where = f"node '{node.name}' (Pad, mode={mode})"
        if mode != "constant":
            raise MingError(f"{where} is not supported; ming pads with a constant value (mode=constant)")
        if len(node.input) == 1:  # before opset 11 the pads are an attribute
            pads = np.asarray(_attribute(node, "pads", []))
        else:
            pads = _constant(graph, node.input[1]) if node.input[1] else None
        if pads is None:
            raise MingError(f"{where}: its pads are computed in the graph; ming needs constant pads")
        if np.any(pads < 0):
            raise MingError(f"{where}: negative pads crop the map; ming supports non-negative pads only")
