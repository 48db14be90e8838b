"""The float `linalg.generic`s: element-wise bodies interpreted symbolically (`lift_values`), float pooling
and float (grouped) convolutions turned into integer kernels."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from iree.compiler import ir

from ming_py import numerics
from ming_py.errors import MingError
from ming_py.ir import PARALLEL, AccessMap, Arg, Kernel, Op, Operand

from .facts import QuantizedWeights
from .lift_generic import broadcast_input, kernel_op
from .lift_shapes import unsliced
from .lift_values import (
    Compare,
    Fill,
    FloatProduct,
    FloatValue,
    IntSym,
    IntTensor,
    Padded,
    Term,
    compact,
    is_plain_dequant,
)
from .mlir_attrs import constant_value


class FloatMixin:
    """Of `lift.Lifter`: float generics (`_float_generic`), reductions and convolutions."""

    def _float_generic(self, op, ins, out_init, maps, iterators, dims, block, node, where):
        if any(it != PARALLEL for it in iterators):
            return self._float_reduction(ins, out_init, maps, iterators, dims, block, node, where)
        if not maps[-1].is_identity():
            raise MingError(f"{where}: transposing float tensors is not supported")
        read = {operand for body_op in block.operations for operand in body_op.operands}
        arguments = list(block.arguments)[:len(ins)]
        # an operand the body never reads (IREE keeps the scalar divisor of a mean over one element) is no input;
        # a filled tensor (the zero that mean's sum starts from) reads as its value wherever the map points
        env: dict[ir.Value, object] = {
            argument: np.float32(value.value) if isinstance(value, Fill) else broadcast_input(value, amap, dims, where)
            for argument, value, amap in zip(arguments, ins, maps) if argument in read}
        for body_op in block.operations:
            name = body_op.operation.name
            if name == "linalg.yield":
                value = env[body_op.operands[0]]
                if isinstance(value, (FloatValue, FloatProduct)):
                    return replace(value, origin=node)
                return compact(value) if isinstance(value, np.ndarray) else value
            if name == "linalg.index":
                env[body_op.results[0]] = _index_array(int(body_op.attributes["dim"].value), dims)
                continue
            if name == "arith.constant":
                env[body_op.results[0]] = constant_value(body_op.attributes["value"], body_op.results[0].type)
                continue
            operands = [env[v] if v in env else self._get(v, where) for v in body_op.operands]
            predicate = int(body_op.attributes["predicate"].value) if name == "arith.cmpf" else None
            env[body_op.results[0]] = _float_step(name, operands, dims, predicate, where)
        raise MingError(f"{where}: generic without yield")

    def _float_reduction(self, ins, out_init, maps, iterators, dims, block, node, where):
        """Float max/sum pooling over a dequantized tensor -> integer pooling kernel; a float convolution
        (a grouped one, which IREE leaves in float) -> integer convolution."""
        body = [o.operation.name for o in block.operations]
        if _is_float_mac(block):
            return self._float_mac(ins, out_init, maps, iterators, dims, node, where)
        source = ins[0]
        padding: tuple[tuple[int, int], ...] = ()
        pad_float = 0.0
        if isinstance(source, Padded) and body == ["arith.addf", "linalg.yield"] and source.value != 0.0:
            source = self._pad_node(source, where)  # a sum window pads with zeros: the border is data
        if isinstance(source, Padded):
            padding, pad_float, source = tuple(zip(source.low, source.high)), source.value, source.base
        if not (isinstance(source, FloatValue) and is_plain_dequant(source) and isinstance(out_init, Fill)):
            raise MingError(f"{where}: pooling must consume a dequantized int8 tensor")
        term = source.terms[0]
        zero_point = int(term.offset)
        window = int(np.prod([dims[d] for d, it in enumerate(iterators) if it != PARALLEL]))
        pad_int = -128  # -inf (or lowest float) padding of max pooling: the int8 minimum never wins either
        lowest = float(numerics.ort_dequantize_linear(-128, term.factors[0], zero_point))
        if padding and pad_float >= lowest:
            pad_int = int(numerics.ort_quantize_linear(np.float32(pad_float), term.factors[0], zero_point))
            if float(numerics.ort_dequantize_linear(pad_int, term.factors[0], zero_point)) != pad_float:
                raise MingError(f"{where}: padding value {pad_float} is not representable in int8")
        if body == ["arith.maximumf", "linalg.yield"]:
            if term.factors[0] <= 0 or out_init.value != float("-inf"):
                raise MingError(f"{where}: unsupported max pooling form")
            pad_value, init, dtype, kind, payload = pad_int, -128, "i8", "maxpool", Op("max", (Arg(1), Arg(0)))
            new_term = replace(term, tensor="")
        elif body == ["arith.addf", "linalg.yield"]:
            if out_init.value != 0.0 or (padding and pad_float != 0.0):
                raise MingError(f"{where}: unsupported average pooling form")
            pad_value, init, dtype, kind, payload = zero_point, 0, "i32", "sumpool", Op("add", (Arg(1), Arg(0)))
            new_term = replace(term, tensor="", offset=np.int64(zero_point * window))
        else:
            raise MingError(f"{where}: float reduction {body[:-1]} has no integer form in ming")
        out_shape = tuple(dims[r.single_dim()] for r in maps[-1].results)
        name = self.builder.node_name(node, kind)
        out = self.builder.new_tensor(f"{name}_out", out_shape, dtype)
        self.graph.nodes.append(Kernel(
            name=name, source=node, dims=dims, iterators=iterators,
            inputs=(Operand(term.tensor, maps[0], padding, pad_value),),
            output=Operand(out, maps[-1]), payload=payload, init=init, op=kind))
        return FloatValue(out_shape, (replace(new_term, tensor=out),))

    def _float_mac(self, ins, out_init, maps, iterators, dims, node, where) -> FloatValue:
        """`acc + x * w` over a dequantized int8 activation and dequantized int8 weights: the integer kernel
        sum(x * w) on the int8 values, and the float value IREE's code computes from it, for the
        requantization that follows: (sum - x_zero_point * sum(w)) * x_scale * w_scale + bias."""
        activation, (x_scale, x_zero_point) = _dequantized_operand(ins[0], maps[0], where)
        weights = ins[1]
        if not (isinstance(weights, np.ndarray) and weights.dtype == np.float32):
            raise MingError(f"{where}: a float convolution must multiply by constant weights")
        quantized = self._quantized_weights(node, weights, where)
        kernel_weights = quantized.integers().reshape(weights.shape)
        weight_map, out_map = maps[1], maps[-1]
        weight_dims = [e.single_dim() for e in weight_map.results]
        out_dims = [e.single_dim() for e in out_map.results]
        channel_dims = [d for d in weight_dims if d is not None and iterators[d] == PARALLEL]
        if None in weight_dims + out_dims or not channel_dims or out_dims[:len(channel_dims)] != channel_dims \
                or np.any(np.abs(kernel_weights) > 127):
            raise MingError(f"{where}: unsupported float convolution layout {weight_map} -> {out_map}")
        name = self.builder.kernel_name(node, "conv")
        operands = (activation, Operand(self.builder.constant(node, kernel_weights.astype(np.int8)), weight_map))
        payload = Op("add", (Arg(2), Op("mul", (Arg(0), Arg(1)))))
        out_shape = tuple(dims[d] for d in out_dims)
        out = self.builder.new_tensor(f"{name}_out", out_shape, "i32")
        self.graph.nodes.append(Kernel(
            name=name, source=node, dims=dims, iterators=iterators, inputs=operands, output=Operand(out, out_map),
            payload=payload, init=0, op=kernel_op(payload, self.facts.op_types.get(node, ""), list(operands), "i32")))
        # per output channel (the leading output axes, which index the weights): w_scale and x_zp * sum(w)
        channel_shape = out_shape[:len(channel_dims)] + (1,) * (len(out_shape) - len(channel_dims))
        reduced = tuple(a for a, d in enumerate(weight_dims) if d not in channel_dims)
        weight_sums = kernel_weights.sum(axis=reduced).reshape(channel_shape)
        w_scale = np.broadcast_to(np.asarray(quantized.scale, np.float32).reshape(-1), (weight_sums.size,))
        bias = np.float32(0) if isinstance(out_init, Fill) and out_init.value == 0.0 else out_init
        if not isinstance(bias, (np.ndarray, np.generic)):
            raise MingError(f"{where}: a float convolution must start from a constant bias")
        return FloatValue(out_shape, (Term(out, (x_scale, w_scale.reshape(channel_shape)),
                                           np.int64(x_zero_point) * weight_sums),), np.asarray(bias, np.float32))

    def _quantized_weights(self, node: str, weights: np.ndarray, where: str) -> QuantizedWeights:
        """The model's int8 weights of `node`, checked against the float weights IREE computed from them."""
        quantized = self.facts.weights.get(node)
        if quantized is None:
            raise MingError(f"{where}: float weights without an int8 initializer behind a DequantizeLinear")
        if np.size(quantized.scale) > 1 and quantized.axis != 0:
            raise MingError(f"{where}: weights quantized along axis {quantized.axis}; ming takes per-output-channel "
                            "(axis 0) or per-tensor weight scales")
        dequantized = quantized.dequantized()
        if dequantized.size != weights.size or not np.array_equal(dequantized.reshape(weights.shape), weights):
            raise MingError(f"{where}: the float weights are not the model's int8 weights dequantized")
        return quantized


# ---- helpers ----------------------------------------------------------------

_FLOAT_BINARY = {"arith.mulf", "arith.addf", "arith.divf", "arith.subf"}
_NUMERIC = {
    "arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply, "arith.maxsi": np.maximum,
    "arith.minsi": np.minimum, "arith.index_cast": lambda x: x.astype(np.int64),
    "arith.sitofp": lambda x: x.astype(np.float32),
}
_GREATER = {2, 3, 9, 10}  # arith.cmpf predicates ogt, oge, ugt, uge
_LESS = {4, 5, 11, 12}  # olt, ole, ult, ule


def _index_array(dim: int, dims: tuple[int, ...]) -> np.ndarray:
    shape = [1] * len(dims)
    shape[dim] = dims[dim]
    return np.arange(dims[dim], dtype=np.int64).reshape(shape)


def _float_step(name, operands, dims, predicate, where):
    """One op of a float element-wise body, on symbolic or numeric operands."""
    if name in _NUMERIC and all(isinstance(o, (np.ndarray, np.generic)) for o in operands):
        return np.asarray(_NUMERIC[name](*operands))
    if name == "arith.subi" and isinstance(operands[0], IntTensor):
        return IntSym(operands[0].name, np.asarray(operands[1]).astype(np.int64))
    if name == "arith.sitofp":
        source = operands[0]
        if isinstance(source, IntTensor):
            source = IntSym(source.name, np.int64(0))
        if not isinstance(source, IntSym):
            raise MingError(f"{where}: unsupported int-to-float conversion")
        return FloatValue(dims, (Term(source.tensor, (), source.offset),))
    if name in _FLOAT_BINARY:
        return _float_binary(name, operands[0], operands[1], dims, where)
    if name == "arith.cmpf" and predicate in _GREATER | _LESS:
        return Compare(predicate in _GREATER, operands[0], operands[1])
    if name == "arith.select" and isinstance(operands[0], Compare):
        return _select(operands[0], operands[1], operands[2], where)
    if name in ("arith.maximumf", "arith.minimumf"):
        value, bound = (operands[0], operands[1]) if isinstance(operands[0], FloatValue) else operands[::-1]
        return _clamp(value, bound, name == "arith.maximumf", where)
    raise MingError(f"{where}: float operation {name} has no integer form in ming")


def _select(compare: Compare, if_true, if_false, where):
    """`select(a > b, a, b)` is max(a, b); `select(a > b, b, a)` is min(a, b) (and mirrored for <)."""
    a, b = compare.lhs, compare.rhs
    if if_true is a and if_false is b:
        is_max = compare.greater
    elif if_true is b and if_false is a:
        is_max = not compare.greater
    else:
        raise MingError(f"{where}: unsupported select pattern")
    value, bound = (a, b) if isinstance(a, FloatValue) else (b, a)
    return _clamp(value, bound, is_max, where)


def _clamp(value, bound, is_max: bool, where) -> FloatValue:
    if not isinstance(value, FloatValue) or np.size(bound) != 1:
        raise MingError(f"{where}: only Relu/Clip by constants of a dequantized tensor is supported")
    base = replace(value, clamp=None)
    if is_plain_dequant(base) and base.terms[0].factors[0] <= 0:
        raise MingError(f"{where}: Relu/Clip must follow a dequantized int8 tensor with a positive scale")
    low, high = value.clamp or (float("-inf"), float("inf"))
    bound = float(bound)
    return replace(value, clamp=(max(low, bound), high) if is_max else (low, min(high, bound)))


def _product_factor(value: FloatValue) -> Term | None:
    """The term of a factor of Mul: one dequantized int8 tensor, possibly broadcast."""
    term = value.terms[0] if len(value.terms) == 1 else None
    if term is None or term.negated or not is_plain_dequant(replace(value, terms=(replace(term, map=None),))):
        return None
    return term


def _float_binary(name, lhs, rhs, dims, where):
    if isinstance(lhs, FloatValue) and lhs.clamp is not None:
        raise MingError(f"{where}: arithmetic on a clamped value has no integer form in ming")
    if isinstance(rhs, FloatValue) and not isinstance(lhs, FloatValue) and name in ("arith.mulf", "arith.addf"):
        lhs, rhs = rhs, lhs
    if not isinstance(lhs, FloatValue):
        raise MingError(f"{where}: unsupported float expression")
    if name == "arith.addf" and isinstance(rhs, FloatValue):
        return FloatValue(dims, lhs.terms + rhs.terms, lhs.bias + rhs.bias)
    if name == "arith.subf" and isinstance(rhs, FloatValue):
        negated = tuple(replace(t, negated=not t.negated) for t in rhs.terms)
        return FloatValue(dims, lhs.terms + negated, lhs.bias - rhs.bias)
    if name == "arith.mulf" and isinstance(rhs, FloatValue):
        factors = [_product_factor(v) for v in (lhs, rhs)]
        if None in factors:
            raise MingError(f"{where}: only the product of two dequantized int8 tensors has an integer form")
        return FloatProduct(dims, *factors)
    if isinstance(rhs, FloatValue):
        raise MingError(f"{where}: {name} of two activations has no integer form")
    rhs = np.asarray(rhs)
    if name == "arith.addf":
        return FloatValue(dims, lhs.terms, lhs.bias + rhs.astype(np.float32))
    if name == "arith.subf":
        return FloatValue(dims, lhs.terms, lhs.bias - rhs.astype(np.float32))
    if name == "arith.mulf":
        terms = tuple(replace(t, factors=t.factors + (rhs.astype(np.float32),)) for t in lhs.terms)
        return FloatValue(dims, terms, lhs.bias * rhs)
    if name != "arith.divf":
        raise MingError(f"{where}: unsupported float expression")
    # one divisor of any rank (IREE gives a one-row ceil_mode AveragePool a 1 x 1 x 1 x 1 tensor of them)
    divisor = float(rhs.reshape(())) if np.size(rhs) == 1 else compact(rhs.astype(np.float64))
    terms = tuple(replace(t, divisor=t.divisor * divisor) for t in lhs.terms)
    return FloatValue(dims, terms, lhs.bias / rhs)


def _dequantized_operand(value, amap: AccessMap, where: str) -> tuple[Operand, tuple[np.float32, int]]:
    """An int8 tensor read through its per-tensor dequantization (possibly sliced and padded) as an operand of
    an integer kernel, and its (scale, zero point)."""
    value, amap = unsliced(value, amap)
    padded = value if isinstance(value, Padded) else None
    if padded is not None:
        value = padded.base
    if not (isinstance(value, FloatValue) and is_plain_dequant(value)):
        raise MingError(f"{where}: a float convolution must read a dequantized int8 tensor")
    term = value.terms[0]
    scale, zero_point = np.float32(term.factors[0]), int(term.offset)
    if padded is None:
        return Operand(term.tensor, amap), (scale, zero_point)
    pad_value = int(numerics.ort_quantize_linear(np.float32(padded.value), scale, zero_point))
    if float(numerics.ort_dequantize_linear(pad_value, scale, zero_point)) != padded.value:
        raise MingError(f"{where}: padding value {padded.value} is not representable in int8")
    return Operand(term.tensor, amap, tuple(zip(padded.low, padded.high)), pad_value), (scale, zero_point)


def _is_float_mac(block) -> bool:
    """Whether a generic's body is `out + in0 * in1` in float."""
    ops = list(block.operations)
    if [o.operation.name for o in ops] != ["arith.mulf", "arith.addf", "linalg.yield"]:
        return False
    a, b, out = block.arguments
    mul, add, done = ops
    return set(mul.operands) == {a, b} and set(add.operands) == {out, mul.results[0]} \
        and done.operands[0] == add.results[0]
