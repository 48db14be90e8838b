"""Conversions from MLIR binding objects to plain Python/numpy values."""

from __future__ import annotations

import re

import numpy as np
from iree.compiler import ir

from ming_py.errors import MingError
from ming_py.ir import AccessMap, AffineExpr

_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')  # a string MLIR quotes, its escapes kept


def affine_expr(expr: ir.AffineExpr, num_dims: int, where: str) -> AffineExpr:
    """Flatten an affine expression into `sum(c_d * d) + k`; reject mod/floordiv."""
    coeffs = [0] * num_dims
    constant = 0

    def visit(e: ir.AffineExpr, scale: int) -> None:
        nonlocal constant
        if isinstance(e, ir.AffineDimExpr):
            coeffs[e.position] += scale
        elif isinstance(e, ir.AffineConstantExpr):
            constant += scale * e.value
        elif isinstance(e, ir.AffineAddExpr):
            visit(e.lhs, scale)
            visit(e.rhs, scale)
        elif isinstance(e, ir.AffineMulExpr):
            if isinstance(e.rhs, ir.AffineConstantExpr):
                visit(e.lhs, scale * e.rhs.value)
            elif isinstance(e.lhs, ir.AffineConstantExpr):
                visit(e.rhs, scale * e.lhs.value)
            else:
                raise MingError(f"{where}: non-linear access `{e}`; only affine accesses are supported")
        else:
            raise MingError(f"{where}: access `{e}` (mod/floordiv) is not supported")

    visit(expr, 1)
    return AffineExpr(tuple(coeffs), constant)


def access_map(attr: ir.Attribute, where: str) -> AccessMap:
    amap = attr.value
    return AccessMap(amap.n_dims, tuple(affine_expr(e, amap.n_dims, where) for e in amap.results))


def iterator_kind(attr: ir.Attribute) -> str:
    text = str(attr)
    if "reduction" in text:
        return "reduction"
    if "parallel" in text:
        return "parallel"
    raise MingError(f"unknown iterator type {text}")


def constant_value(attr: ir.Attribute, mlir_type: ir.Type) -> np.ndarray:
    """A dense or scalar constant attribute as a numpy array of its element type."""
    if isinstance(attr, (ir.IntegerAttr, ir.FloatAttr)):
        return np.array(attr.value, dtype=numpy_dtype(attr.type))
    if isinstance(attr, ir.DenseElementsAttr):
        shaped = ir.ShapedType(mlir_type)
        dtype = numpy_dtype(shaped.element_type)
        if attr.is_splat:
            splat = attr.get_splat_value()
            return np.full(tuple(shaped.shape), splat.value, dtype=dtype)
        return np.array(attr).astype(dtype, copy=False).reshape(tuple(shaped.shape))
    raise MingError(f"unsupported constant attribute {str(attr)[:60]}")


def numpy_dtype(t: ir.Type) -> np.dtype:
    text = str(t)
    table = {"i1": np.bool_, "i8": np.int8, "i32": np.int32, "i64": np.int64,
             "f32": np.float32, "f64": np.float64, "index": np.int64}
    if text not in table:
        raise MingError(f"unsupported element type {text}")
    return np.dtype(table[text])


def element_type(value: ir.Value) -> str:
    t = value.type
    if isinstance(t, ir.ShapedType) or "tensor<" in str(t):
        return str(ir.ShapedType(t).element_type)
    return str(t)


def tensor_shape(value: ir.Value) -> tuple[int, ...]:
    return tuple(ir.ShapedType(value.type).shape)


def reassociation(op: ir.Operation) -> list[list[int]]:
    """The axis groups of `tensor.expand_shape` / `collapse_shape`: per axis of the collapsed side, the axes of
    the expanded side it spans."""
    return [[int(i.value) for i in group] for group in op.attributes["reassociation"]]


def location_name(op: ir.Operation) -> str:
    """The ONNX node name the importer attached as a NameLoc (the outermost name; of a fused location, its
    first name that is not empty); "?" for an operation without one."""
    names = (name for name in _QUOTED.findall(str(op.location)) if name)
    return next(names, "?")
