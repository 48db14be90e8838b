"""The symbolic values the lifter gives IREE's SSA values (`Lifter.values`).

IREE (global-optimization phase, qdq-to-integer-math) leaves integer
`linalg.generic` convolutions and matmuls surrounded by float code: dequantize,
`sitofp`/`mulf`/`addf` requantization chains, float pooling, quantize. The
lifter interprets that float code symbolically: every float tensor is kept as
an affine combination of integer tensors,

    value = sum_t prod(factors_t) * (T_t - offset_t) / divisor_t + bias,

and each `quantize_affine` turns such a combination back into an integer node
with one of the epilogues of `ming_py.ir` (integer legalization). Float code
after the last quantize of an output (a Softmax) becomes a host tail.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from iree.compiler import ir

from ming_py.ir import AccessMap, HostOp


# ---- symbolic values --------------------------------------------------------


@dataclass(frozen=True)
class IntTensor:
    name: str


@dataclass(frozen=True)
class Padded:
    """A tensor padded by `tensor.pad`; becomes padding of the consumer's window, or a `Pad` node where
    the consumer has no window (`Lifter._get`)."""

    base: object  # IntTensor | FloatValue
    low: tuple[int, ...]
    high: tuple[int, ...]
    value: float
    origin: str = ""  # the model's node that pads


@dataclass(frozen=True)
class Sliced:
    """A `tensor.extract_slice` read by kernels: folded into their access maps."""

    base: object  # IntTensor | Padded | FloatValue
    offsets: tuple[int, ...]
    strides: tuple[int, ...]


@dataclass(frozen=True)
class Fill:
    value: float


@dataclass(frozen=True)
class Empty:
    shape: tuple[int, ...]


@dataclass(frozen=True)
class FloatInput:
    name: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Term:
    tensor: str
    factors: tuple[np.ndarray, ...] = ()
    offset: np.ndarray = field(default_factory=lambda: np.int64(0))
    divisor: float | np.ndarray = 1.0  # an array: per-position counts (average pooling)
    # how the value's dims index the tensor where it is broadcast (a per-channel vector read at every
    # pixel); None: the tensor has the value's shape
    map: AccessMap | None = None
    negated: bool = False  # subtracted (Sub)


@dataclass(frozen=True)
class FloatValue:
    shape: tuple[int, ...]
    terms: tuple[Term, ...]
    bias: np.ndarray = field(default_factory=lambda: np.float32(0))
    # (low, high) of a Relu/Clip applied to a single dequantized tensor.
    clamp: tuple[float, float] | None = None
    origin: str = ""  # the ONNX node whose float computation this is (Add, Relu, ...)


@dataclass(frozen=True)
class FloatProduct:
    """The product of two dequantized int8 tensors (Mul), before its QuantizeLinear."""

    shape: tuple[int, ...]
    a: Term
    b: Term
    origin: str = ""


@dataclass(frozen=True)
class Compare:
    """`arith.cmpf` result, consumed by `arith.select` (Relu/Clip)."""

    greater: bool
    lhs: object
    rhs: object


@dataclass(frozen=True)
class IntSym:
    """An integer tensor inside a float generic body, before `sitofp`."""

    tensor: str
    offset: np.ndarray


@dataclass(frozen=True)
class FloatPieces:
    """A float tensor assembled by `tensor.insert_slice` (Concat)."""

    shape: tuple[int, ...]
    pieces: tuple[tuple[tuple[int, ...], tuple[int, ...], FloatValue], ...]
    origin: str = ""


@dataclass(frozen=True)
class Mapped:
    """The result of a node that has a table (`FrontendFacts.tables`): some element-wise function of the
    dequantization of int8 tensor `tensor` with `scale` and `zero_point`, computed by `node`'s generics (in
    float for ONNX; in integers for TFLite, whose last generic gives the node's int8 result)."""

    tensor: str
    scale: np.float32
    zero_point: int
    node: str
    dtype: str = "f32"  # the generic's element type: int8 where the node's result is final (TFLite's tables)


@dataclass(frozen=True)
class HostValue:
    tensor: str
    scale: float
    zero_point: int
    ops: tuple[HostOp, ...]


@dataclass(frozen=True, eq=False)
class ChainStep:
    """One element-wise integer generic applied to the chained value (argument `position` of `block`);
    `constants` are its other arguments, as arrays over the channel axis (or scalars)."""

    block: ir.Block
    position: int
    constants: tuple[tuple[int, np.ndarray], ...]
    dtype: str  # the result's element type
    node: str  # the model's node it comes from
    where: str


@dataclass(frozen=True)
class IntChain:
    """Element-wise integer generics applied to one integer tensor (or to the sum of two chains), read as
    a whole once consumed: TOSA's bias addition, zero-point correction, RESCALE and clamp become one
    epilogue of the producing kernel; the RESCALEs around an addition become an Add."""

    tensor: str | IntSum | IntProduct | IntExtremum
    axis: int | None  # the tensor axis the constants vary along (the channels), None: none varies
    steps: tuple[ChainStep, ...]


@dataclass(frozen=True)
class IntSum:
    """The int32 sum of two chains (TFLite's ADD between its input and output RESCALEs)."""

    a: IntChain
    b: IntChain
    shape: tuple[int, ...]


@dataclass(frozen=True)
class IntProduct:
    """The int32 product of two chains (TFLite's MUL between its input and output RESCALEs), each read through
    its access map over `shape` (a per-channel vector broadcast over a map)."""

    a: IntChain
    b: IntChain
    shape: tuple[int, ...]
    maps: tuple[AccessMap, AccessMap]


@dataclass(frozen=True)
class IntExtremum:
    """The int32 maximum or minimum (`op` "max", "min") of two chains (TFLite's MAXIMUM and MINIMUM between their
    input and output RESCALEs), computed by the generic of `node`."""

    a: IntChain
    b: IntChain
    shape: tuple[int, ...]
    op: str
    node: str


# ---- forms of values --------------------------------------------------------


def is_plain_dequant(value: FloatValue) -> bool:
    """A single int8 tensor times one scalar scale minus a scalar zero point."""
    if len(value.terms) != 1 or np.any(value.bias) or value.clamp is not None:
        return False
    term = value.terms[0]
    return len(term.factors) == 1 and np.size(term.factors[0]) == 1 and np.size(term.offset) == 1 \
        and np.size(term.divisor) == 1 and term.divisor == 1.0 and term.map is None and not term.negated


def compact(array: np.ndarray) -> np.ndarray:
    """Collapse the axes along which a broadcast constant does not vary."""
    for axis in range(array.ndim):
        if array.shape[axis] > 1 and np.all(array == array.take([0], axis=axis)):
            array = array.take([0], axis=axis)
    return array
