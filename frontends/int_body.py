"""Exact evaluation of an integer `linalg.generic` body on numpy arrays.

TOSA's integer ops (rescale, clamp, average-pool division) reach ming as
`arith` code inside element-wise generics. The lifter reads them as ming's
epilogues and checks its reading against this evaluator, which follows the
`arith` semantics bit for bit: values are held as int64 numpy arrays in their
signed two's complement form for their bit width; `extui`, the unsigned
shift and the unsigned compares reinterpret them.
"""

from __future__ import annotations

import numpy as np
from iree.compiler import ir

from ming_py.errors import MingError

from .mlir_attrs import constant_value

_WIDTH = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "index": 64}
# arith.cmpi predicates
_COMPARE = {0: np.equal, 1: np.not_equal, 2: np.less, 3: np.less_equal, 4: np.greater, 5: np.greater_equal}
_UNSIGNED_COMPARE = {6: np.less, 7: np.less_equal, 8: np.greater, 9: np.greater_equal}


def width(value: ir.Value) -> int:
    text = str(value.type)
    if text not in _WIDTH:
        raise MingError(f"integer arithmetic on {text} is not supported")
    return _WIDTH[text]


def wrap(v: np.ndarray, bits: int) -> np.ndarray:
    """`v` as a signed `bits`-bit value (two's complement wrap-around)."""
    v = np.asarray(v, dtype=np.int64)
    if bits >= 64:
        return v
    if bits == 1:
        return v & 1
    half = np.int64(1) << (bits - 1)
    return ((v + half) & ((half << 1) - 1)) - half


def unsigned(v: np.ndarray, bits: int) -> np.ndarray:
    """The unsigned reading of a `bits`-bit value (as uint64)."""
    v = np.asarray(v, dtype=np.int64)
    if bits >= 64:
        return v.astype(np.uint64)  # modulo 2^64
    return (v & ((np.int64(1) << bits) - 1)).astype(np.uint64)


def evaluate(block: ir.Block, args: list[np.ndarray], indices: list[np.ndarray] | None = None,
             where: str = "") -> dict[ir.Value, np.ndarray]:
    """Every SSA value of `block` for block arguments `args` (broadcastable arrays). `indices[d]` is the
    value of `linalg.index d`. Returns the environment; the yielded value is under the key `None`."""
    env: dict = {arg: np.asarray(a, dtype=np.int64) for arg, a in zip(block.arguments, args)}
    for op in block.operations:
        name = op.operation.name
        if name == "linalg.yield":
            env[None] = _value(env, op.operands[0], where)
            return env
        result = op.results[0]
        if name == "arith.constant":
            env[result] = np.asarray(constant_value(op.attributes["value"], result.type), dtype=np.int64)
            continue
        if name == "linalg.index":
            env[result] = np.asarray(indices[int(op.attributes["dim"].value)], dtype=np.int64)
            continue
        values = [_value(env, v, where) for v in op.operands]
        bits = width(result)
        env[result] = _step(name, op, values, [width(v) for v in op.operands], bits, where)
    raise MingError(f"{where}: generic without yield")


def defining_constant(value: ir.Value) -> np.ndarray | None:
    """The value of an `arith.constant` (for example one defined outside the generic), else None."""
    owner = getattr(value.owner, "operation", None)
    if owner is None or owner.name != "arith.constant":
        return None
    return np.asarray(constant_value(owner.attributes["value"], value.type), dtype=np.int64)


def _value(env: dict, value: ir.Value, where: str) -> np.ndarray:
    if value in env:
        return env[value]
    constant = defining_constant(value)
    if constant is None:
        raise MingError(f"{where}: an integer body reads a value defined outside it")
    env[value] = constant
    return constant


def _step(name, op, values, in_bits, bits, where) -> np.ndarray:
    if name in ("arith.extsi", "arith.index_cast"):
        return values[0]
    if name in ("arith.extui", "arith.index_castui"):
        return unsigned(values[0], in_bits[0]).astype(np.int64)
    if name == "arith.trunci":
        return wrap(values[0], bits)
    a = values[0]
    b = values[1] if len(values) > 1 else None
    if name == "arith.addi":
        return wrap(a + b, bits)
    if name == "arith.subi":
        return wrap(a - b, bits)
    if name == "arith.muli":
        return wrap(a * b, bits)
    if name == "arith.andi":
        return wrap(a & b, bits)
    if name == "arith.maxsi":
        return np.maximum(a, b)
    if name == "arith.minsi":
        return np.minimum(a, b)
    if name == "arith.shli":
        return wrap(np.where(b < bits, a << np.minimum(b, 63), 0), bits)
    if name == "arith.shrsi":
        return np.where(b < bits, a >> np.minimum(b, 63), np.where(a < 0, -1, 0))
    if name == "arith.shrui":
        shifted = unsigned(a, bits) >> np.minimum(b, 63).astype(np.uint64)
        return wrap(np.where(b < bits, shifted, 0).astype(np.int64), bits)
    if name == "arith.divui":
        return wrap((unsigned(a, bits) // unsigned(b, bits)).astype(np.int64), bits)
    if name == "arith.cmpi":
        predicate = int(op.attributes["predicate"].value)
        if predicate in _COMPARE:
            return _COMPARE[predicate](a, b).astype(np.int64)
        return _UNSIGNED_COMPARE[predicate](unsigned(a, in_bits[0]), unsigned(b, in_bits[1])).astype(np.int64)
    if name == "arith.select":
        return np.where(a != 0, b, values[2])
    if name == "math.ctlz":
        u = unsigned(a, bits)
        return np.where(u == 0, bits, bits - _bit_length(u)).astype(np.int64)
    raise MingError(f"{where}: operation {name} in an integer body is not supported")


def _bit_length(u: np.ndarray) -> np.ndarray:
    u = np.asarray(u, dtype=np.uint64)
    length = np.zeros(u.shape, dtype=np.int64)
    for shift in (32, 16, 8, 4, 2, 1):
        big = u >= (np.uint64(1) << np.uint64(shift))
        length += np.where(big, shift, 0)
        u = np.where(big, u >> np.uint64(shift), u)
    return length + (u > 0)
