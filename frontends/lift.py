"""Lift IREE's linalg-on-tensors module into ming's integer graph IR.

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

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
from iree.compiler import ir

from ming_py import numerics, reference
from ming_py.errors import MingError
from ming_py.ir import (
    MAC_OPS,
    AffineExpr,
    PARALLEL,
    AccessMap,
    AccRequant,
    AddRequant,
    Arg,
    AverageRequant,
    Concat,
    Const,
    Expr,
    Graph,
    GraphInput,
    GraphOutput,
    HostOp,
    Kernel,
    LookupTable,
    MulRequant,
    Op,
    Operand,
    Pad,
    Permute,
    Rescale,
    Reshape,
    Slice,
    TensorInfo,
    Upsample,
)

from . import fixed_point, int_body
from .mlir_attrs import (
    access_map,
    constant_value,
    element_type,
    iterator_kind,
    location_name,
    reassociation,
    tensor_shape,
)

if TYPE_CHECKING:
    from .onnx_tables import NodeTable

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
    """The float result of a node that has a table (`Lifter.tables`): some element-wise function of the
    dequantization of int8 tensor `tensor` with `scale` and `zero_point`, computed by `node`'s generics."""

    tensor: str
    scale: np.float32
    zero_point: int
    node: str


@dataclass(frozen=True)
class HostValue:
    tensor: str
    scale: float
    zero_point: int
    ops: tuple[HostOp, ...]


BIAS_TOLERANCE_LSB = 2.0 ** -10  # what a bias rebuilt from float32 may move an output before rounding

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

    tensor: str | IntSum
    axis: int | None  # the tensor axis the constants vary along (the channels), None: none varies
    steps: tuple[ChainStep, ...]


@dataclass(frozen=True)
class IntSum:
    """The int32 sum of two chains (TFLite's ADD between its input and output RESCALEs)."""

    a: IntChain
    b: IntChain
    shape: tuple[int, ...]


_FLOAT_BINARY = {"arith.mulf", "arith.addf", "arith.divf", "arith.subf"}
_INT_BINARY = {"arith.addi": "add", "arith.subi": "sub", "arith.muli": "mul",
               "arith.maxsi": "max", "arith.minsi": "min"}
_PASS_THROUGH = {"iree_tensor_ext.compute_barrier.start", "iree_tensor_ext.compute_barrier.end",
                 "hal.tensor.barrier"}


def _identifier(text: str) -> str:
    ident = re.sub(r"[^0-9a-zA-Z_]", "_", text).strip("_") or "node"
    return ident if not ident[0].isdigit() else f"n_{ident}"


@dataclass(frozen=True)
class ModelPort:
    """A model input or output as the model declares it, in the order of the entry function's arguments
    or results. `permutation` takes the model's array to the imported tensor's layout (a Transpose next to
    the input or output that the frontend folded away). `integer_dtype` is the model's own type where the
    port holds integers: "int8", or "uint8" imported as int8 (the host shifts the values)."""

    name: str
    shape: tuple[int, ...]
    permutation: tuple[int, ...] = ()
    integer_dtype: str = "int8"


@dataclass(frozen=True)
class QuantizedWeights:
    """A layer's int8 weights as the model stores them behind its DequantizeLinear. IREE hands a grouped
    convolution over in float, its weights dequantized; these turn them back into integers."""

    values: np.ndarray  # int8, the initializer's shape
    scale: np.ndarray  # float32: a scalar, or one per index of `axis`
    zero_point: np.ndarray  # a scalar, or one per index of `axis`
    axis: int

    def integers(self) -> np.ndarray:
        """values - zero point."""
        return self.values.astype(np.int64) - self._along_axis(self.zero_point).astype(np.int64)

    def dequantized(self) -> np.ndarray:
        """float32 (values - zero point) * scale, as DequantizeLinear computes it."""
        return self.integers().astype(np.float32) * self._along_axis(self.scale).astype(np.float32)

    def _along_axis(self, array) -> np.ndarray:
        shape = [1] * self.values.ndim
        shape[self.axis] = -1
        return np.asarray(array).reshape(shape) if np.size(array) > 1 else np.asarray(array)


class Lifter:
    def __init__(self, graph_name: str, inputs: list[ModelPort], outputs: list[ModelPort], op_types: dict[str, str],
                 notes: tuple[str, ...] = (), tables: dict[str, NodeTable] | None = None,
                 resizes: dict[str, tuple[int, ...]] | None = None,
                 weights: dict[str, QuantizedWeights] | None = None, transposes: dict[str, str] | None = None):
        self.graph = Graph(_identifier(graph_name), notes=list(notes))
        self.op_types = op_types  # model node name -> op type, to name kernels for people
        self.tables = tables or {}  # model node name -> its element-wise function of int8 values
        self.resizes = resizes or {}  # nearest Resize node name -> its integer factor per axis (onnx_geometry)
        self.weights = weights or {}  # model node name -> its int8 weights
        # (de)quantization node -> the Transpose it wraps, whose transposition IREE hands over in its name
        self.transposes = transposes or {}
        self.inputs = inputs
        self.outputs = outputs
        self.values: dict[ir.Value, object] = {}
        self.globals: dict[str, np.ndarray] = {}
        self.quantization: dict[str, tuple[float, int]] = {}  # int8 tensor -> the (scale, zero point) it was given
        self.imported = 0  # model inputs imported so far
        self.sum_offsets: dict[str, int] = {}  # window sums of raw int8 values -> what the model's sum adds

    # ---- naming and graph construction ----

    def _fresh(self, base: str) -> str:
        name = _identifier(base)
        taken = self.graph.tensors.keys() | self.graph.constants.keys() | {n.name for n in self.graph.nodes}
        if name not in taken:
            return name
        i = 2
        while f"{name}_{i}" in taken:
            i += 1
        return f"{name}_{i}"

    def _new_tensor(self, base: str, shape: tuple[int, ...], dtype: str) -> str:
        name = self._fresh(base)
        self.graph.tensors[name] = TensorInfo(name, tuple(shape), dtype)
        return name

    def _constant(self, base: str, array: np.ndarray) -> str:
        name = self._fresh(f"{base}_const")
        self.graph.constants[name] = np.ascontiguousarray(array)
        return name

    def _kernel_name(self, node: str, kind: str) -> str:
        """A fresh name after the model's node, or after what the kernel computes where IREE lost the node."""
        return self._fresh(node if node not in ("?", "main") else kind)

    def _producer(self, tensor: str) -> Kernel | None:
        for node in self.graph.nodes:
            if isinstance(node, Kernel) and node.output.tensor == tensor:
                return node
        return None

    # ---- driver ----

    def run(self, module: ir.Module) -> Graph:
        functions = {}
        for op in module.body.operations:
            name = op.operation.name
            if name == "util.global":
                sym = str(op.attributes["sym_name"]).strip('"')
                init = op.attributes["initial_value"]
                self.globals[sym] = constant_value(init, init.type)
            elif name == "util.func":
                functions[str(op.attributes["sym_name"]).strip('"')] = op
        # the ONNX import's entry is the body of `<name>$async`; the TOSA import's is the function itself
        func = next((f for n, f in functions.items() if n.endswith("$async")), None) or \
            (next(iter(functions.values())) if len(functions) == 1 else None)
        if func is None:
            raise MingError("IREE output has no entry function; is the model empty?")
        for op in func.regions[0].blocks[0].operations:
            self._visit(op.operation)
        self._drop_unused()
        return self.graph

    def _visit(self, op: ir.Operation) -> None:
        name = op.name
        where = f"node '{location_name(op)}' ({name})"
        handler = self.HANDLERS.get(name)
        if name in _PASS_THROUGH:
            for src, res in zip(op.operands, op.results):
                self.values[res] = self.values.get(src)
        elif handler is not None:
            handler(self, op, where)
        elif name in ("tensor.empty",):
            self.values[op.results[0]] = Empty(tensor_shape(op.results[0]))
        elif name in ("util.null", "hal.fence.create", "hal.devices.get", "util.return"):
            return
        else:
            raise MingError(f"{where}: operation {name} is not supported by ming yet")

    def _get(self, value: ir.Value, where: str, padded: bool = False) -> object:
        """The symbolic value of an operand; a padded tensor stays `Padded` only for a consumer that takes
        the padding into its window (`padded`), others read the padded map of a `Pad` node."""
        if value not in self.values:
            raise MingError(f"{where}: operand produced by an unsupported operation")
        if isinstance(self.values[value], IntChain):
            self.values[value] = self._materialize(self.values[value], where)
        if isinstance(self.values[value], Padded) and not padded:
            self.values[value] = self._pad_node(self.values[value], where)
        held = self.values[value]
        if isinstance(held, FloatPieces) and all(isinstance(piece, IntTensor) for _, _, piece in held.pieces):
            self.values[value] = self._concat(held, held.origin, where, lambda piece: piece.name)  # TFLite's
        return self.values[value]

    # ---- simple ops ----

    def _op_arith_constant(self, op, where):
        self.values[op.results[0]] = constant_value(op.attributes["value"], op.results[0].type)

    def _op_util_global_load(self, op, where):
        self.values[op.results[0]] = self.globals[str(op.attributes["global"]).lstrip("@").strip('"')]

    def _op_hal_tensor_import(self, op, where):
        port = self.inputs[self.imported]
        self.imported += 1
        shape = tensor_shape(op.results[0])
        dtype = element_type(op.results[0])
        if dtype == "f32":
            self.values[op.results[0]] = FloatInput(port.name, shape)
        elif dtype == "i8":  # the model takes int8 (or uint8) values: no quantization on the host
            tensor = self._new_tensor(port.name, shape, "i8")
            self.graph.inputs.append(GraphInput(port.name, tensor, port.shape, 1.0, 0, port.integer_dtype,
                                                port.permutation))
            self.values[op.results[0]] = IntTensor(tensor)
        else:
            raise MingError(f"input '{port.name}' is {dtype}; ming takes float32, int8 or uint8 model inputs")

    def _op_linalg_fill(self, op, where):
        value = self._get(op.operands[0], where)
        self.values[op.results[0]] = Fill(float(value))

    def _op_tensor_pad(self, op, where):
        source = self._get(op.operands[0], where, padded=True)
        low = tuple(op.attributes["static_low"])
        high = tuple(op.attributes["static_high"])
        if any(v < 0 for v in low + high):
            raise MingError(f"{where}: dynamic padding is not supported")
        yield_op = list(op.regions[0].blocks[0].operations)[-1]
        pad = float(self._get(yield_op.operands[0], where))
        if isinstance(source, Padded) and source.value == pad:  # a Pad before a window's own padding: merged
            low = tuple(a + b for a, b in zip(source.low, low))
            high = tuple(a + b for a, b in zip(source.high, high))
            source = source.base
        elif isinstance(source, Padded):
            source = self._pad_node(source, where)
        self.values[op.results[0]] = Padded(source, low, high, pad, location_name(op))

    def _pad_node(self, padded: Padded, where: str) -> IntTensor | FloatValue:
        """The padded map as a `Pad` node of its int8 tensor (a border no window absorbs)."""
        base = padded.base
        if isinstance(base, FloatValue) and _is_plain_dequant(base):
            term = base.terms[0]
            value = int(numerics.ort_quantize_linear(np.float32(padded.value), term.factors[0], int(term.offset)))
            if float(numerics.ort_dequantize_linear(value, term.factors[0], int(term.offset))) != padded.value:
                raise MingError(f"{where}: padding value {padded.value} is not representable in int8")
            tensor = self._pad_tensor(term.tensor, padded, value)
            return FloatValue(self.graph.tensors[tensor].shape, (replace(term, tensor=tensor),))
        if isinstance(base, IntTensor) and self.graph.tensors[base.name].dtype == "i8":
            return IntTensor(self._pad_tensor(base.name, padded, int(padded.value)))
        raise MingError(f"{where}: padding of this value is not supported")

    def _pad_tensor(self, tensor: str, padded: Padded, value: int) -> str:
        padding = tuple(zip(padded.low, padded.high))
        shape = tuple(n + low + high for n, (low, high) in zip(self.graph.tensors[tensor].shape, padding))
        name = self._kernel_name(padded.origin, "pad")
        out = self._new_tensor(f"{name}_out", shape, "i8")
        self.graph.nodes.append(Pad(name, padded.origin, tensor, out, padding, value))
        return out

    def _reshape(self, op, where):
        source = self._get(op.operands[0], where, padded=True)
        shape = tensor_shape(op.results[0])
        if isinstance(source, IntTensor):
            self.values[op.results[0]] = IntTensor(self._reshape_tensor(source.name, shape, location_name(op)))
        elif isinstance(source, FloatInput):
            self.values[op.results[0]] = FloatInput(source.name, shape)
        elif isinstance(source, Empty):
            self.values[op.results[0]] = Empty(shape)
        elif isinstance(source, HostValue):
            self.values[op.results[0]] = replace(source, ops=source.ops + (HostOp("reshape", shape=shape),))
        elif isinstance(source, FloatValue) and _all_scalar(source):
            terms = tuple(replace(t, tensor=self._reshape_tensor(t.tensor, shape, location_name(op)))
                          for t in source.terms)
            self.values[op.results[0]] = FloatValue(shape, terms, source.bias)
        elif isinstance(source, Padded) and isinstance(source.base, IntTensor):
            expand = op.name == "tensor.expand_shape"
            self.values[op.results[0]] = self._reshape_padded(source, reassociation(op), expand, shape,
                                                              location_name(op), where)
        elif isinstance(source, np.ndarray) and source.size == np.prod(tensor_shape(op.operands[0])):
            self.values[op.results[0]] = source.reshape(shape)
        elif isinstance(source, np.ndarray):  # a broadcast constant kept compact (a bias)
            full = np.broadcast_to(source, tensor_shape(op.operands[0]))
            self.values[op.results[0]] = _compact(full.reshape(shape))
        else:
            raise MingError(f"{where}: cannot reshape a per-channel float value; unsupported layer pattern")

    def _reshape_tensor(self, tensor: str, shape: tuple[int, ...], source: str) -> str:
        info = self.graph.tensors[tensor]
        if info.shape == tuple(shape):
            return tensor
        for node in self.graph.nodes:
            if isinstance(node, Reshape) and node.output == tensor and self.graph.tensors[node.input].shape == shape:
                return node.input
        out = self._new_tensor(f"{tensor}_reshaped", shape, info.dtype)
        self.graph.nodes.append(Reshape(self._fresh(f"{source}_reshape"), source, tensor, out))
        return out

    def _reshape_padded(self, source: Padded, groups: list[list[int]], expand: bool, shape, node, where) -> Padded:
        """A reshape of a padded tensor that splits or merges only unpadded axes (a grouped convolution's
        channels into groups): the tensor is reshaped, the padding stays on its axes."""
        base_shape = self.graph.tensors[source.base.name].shape
        low, high, unpadded = [], [], []
        for axis, group in enumerate(groups):  # axis of the collapsed side, `group` its expanded axes
            pieces = group if expand else [axis]  # axes of the result
            padded_axes = [axis] if expand else group  # axes of the source
            if len(group) == 1:
                low.append(source.low[padded_axes[0]])
                high.append(source.high[padded_axes[0]])
                unpadded.append(base_shape[padded_axes[0]])
                continue
            if any(source.low[a] or source.high[a] for a in padded_axes):
                raise MingError(f"{where}: reshaping a padded axis is not supported")
            low += [0] * len(pieces)
            high += [0] * len(pieces)
            unpadded += [shape[a] for a in pieces] if expand else [int(np.prod([base_shape[a] for a in group]))]
        tensor = self._reshape_tensor(source.base.name, tuple(unpadded), node)
        return Padded(IntTensor(tensor), tuple(low), tuple(high), source.value)

    def _op_tensor_extract_slice(self, op, where):
        source = self._get(op.operands[0], where, padded=True)
        offsets = tuple(op.attributes["static_offsets"])
        strides = tuple(op.attributes["static_strides"])
        sizes = tuple(op.attributes["static_sizes"])
        dropped = len(offsets) - len(tensor_shape(op.results[0]))
        if dropped > 0 and isinstance(source, (IntTensor, FloatValue)) and sizes[:dropped] == (1,) * dropped \
                and offsets[:dropped] == (0,) * dropped:  # a rank-reducing slice of leading unit dims
            source = self._reshaped(source, self._shape(source)[dropped:], location_name(op), where)
            offsets, strides, sizes = offsets[dropped:], strides[dropped:], sizes[dropped:]
        if isinstance(source, (IntTensor, FloatValue)) and strides == (1,) * len(strides) \
                and offsets[1:] == (0,) * (len(offsets) - 1) and sizes[1:] == self._shape(source)[1:]:
            self.values[op.results[0]] = self._channel_slice(source, offsets[0], sizes[0], location_name(op), where)
            return
        base = source.base if isinstance(source, Padded) else source
        if not (isinstance(base, IntTensor) or (isinstance(base, FloatValue) and _is_plain_dequant(base))) \
                or len(offsets) != len(tensor_shape(op.results[0])):
            raise MingError(f"{where}: this slice is not supported")
        if not all(use.owner.name == "linalg.generic" for use in op.results[0].uses):
            raise MingError(f"{where}: a slice must feed kernels directly (its strides fold into their windows)")
        self.values[op.results[0]] = Sliced(source, offsets, strides)

    def _shape(self, value: IntTensor | FloatValue) -> tuple[int, ...]:
        return self.graph.tensors[value.name].shape if isinstance(value, IntTensor) else value.shape

    def _reshaped(self, value: IntTensor | FloatValue, shape, node: str, where: str) -> IntTensor | FloatValue:
        """An int8 tensor, or one dequantized per tensor, in another shape."""
        if isinstance(value, IntTensor):
            return IntTensor(self._reshape_tensor(value.name, shape, node))
        if not _is_plain_dequant(value):
            raise MingError(f"{where}: only a tensor dequantized per tensor can be reshaped here")
        term = value.terms[0]
        return FloatValue(shape, (replace(term, tensor=self._reshape_tensor(term.tensor, shape, node)),))

    def _channel_slice(self, value: IntTensor | FloatValue, start: int, size: int, node: str,
                       where: str) -> IntTensor | FloatValue:
        """Channels [start, start + size) of an int8 tensor or of one dequantized per tensor (a Slice node)."""
        if isinstance(value, FloatValue):
            if not _is_plain_dequant(value):
                raise MingError(f"{where}: only a tensor dequantized per tensor can be split along its channels")
            term = value.terms[0]
            sliced = self._channel_slice(IntTensor(term.tensor), start, size, node, where)
            return FloatValue((size,) + value.shape[1:], (replace(term, tensor=sliced.name),))
        info = self.graph.tensors[value.name]
        if (start, size) == (0, info.shape[0]):
            return value
        out = self._new_tensor(f"{node}_{start}_{start + size}", (size,) + info.shape[1:], info.dtype)
        self.graph.nodes.append(Slice(self._fresh(f"{node}_slice"), node, value.name, out, start))
        return IntTensor(out)

    def _op_tensor_insert_slice(self, op, where):
        source = self._get(op.operands[0], where)
        dest = self.values.get(op.operands[1])  # pieces so far: not yet a Concat
        offsets = tuple(op.attributes["static_offsets"])
        sizes = tuple(op.attributes["static_sizes"])
        if not isinstance(source, (FloatValue, IntTensor)):
            raise MingError(f"{where}: insert_slice of this value is not supported")
        pieces = dest.pieces if isinstance(dest, FloatPieces) else ()
        if not isinstance(dest, (FloatPieces, Empty)):
            raise MingError(f"{where}: insert_slice into a computed tensor is not supported")
        self.values[op.results[0]] = FloatPieces(tensor_shape(op.results[0]), pieces + ((offsets, sizes, source),),
                                                 location_name(op))

    def _op_hal_tensor_export(self, op, where):
        value = self._get(op.operands[0], where)
        port = self.outputs[len(self.graph.outputs)]
        name, shape, permutation = port.name, port.shape, port.permutation
        if isinstance(value, HostValue):
            quantized = [op.kind for op in value.ops if op.kind != "reshape"][-1] == "quantize"
            out = GraphOutput(name, value.tensor, shape, value.scale, value.zero_point, value.ops,
                              port.integer_dtype if quantized else "float32", permutation)
        elif isinstance(value, FloatValue) and len(value.terms) == 1 and _is_plain_dequant(value):
            term = value.terms[0]
            out = GraphOutput(name, term.tensor, shape, float(term.factors[0]), int(term.offset),
                              permutation=permutation)
        elif isinstance(value, IntTensor) and self.graph.tensors[value.name].dtype == "i8":
            scale, zero_point = self.quantization.get(value.name, (1.0, 0))
            out = GraphOutput(name, value.name, shape, scale, zero_point, dtype="int8", permutation=permutation)
        else:
            raise MingError(f"output '{name}': must be the dequantized int8 result of a layer "
                            "(add a QuantizeLinear/DequantizeLinear pair before it)")
        self.graph.outputs.append(out)

    # ---- quantization boundaries ----

    def _scale_and_zero_point(self, op, where):
        ins = list(op.operands)[:-1]  # the last operand is the destination
        scale = self._get(ins[1], where)
        zero_point = self._get(ins[2], where) if len(ins) > 2 else np.int64(0)
        return scale, zero_point

    def _op_iree_linalg_ext_dequantize_affine(self, op, where):
        source = self._in_output_order(op, self._get(op.operands[0], where, padded=True), where)
        scale, zero_point = self._scale_and_zero_point(op, where)
        if isinstance(source, HostValue):
            self.values[op.results[0]] = replace(
                source, ops=source.ops + (HostOp("dequantize", scale=float(scale), zero_point=int(zero_point)),))
            return
        padded = source if isinstance(source, Padded) else None
        if padded is not None:
            source = padded.base
        if not isinstance(source, IntTensor) or np.ndim(scale) or np.ndim(zero_point):
            raise MingError(f"{where}: only per-tensor dequantization of activations is supported")
        self._note_input_quantization(source.name, float(scale), int(zero_point))
        value = FloatValue(self.graph.tensors[source.name].shape,
                           (Term(source.name, (np.float32(scale),), np.int64(zero_point)),))
        if padded is not None:
            pad = float(numerics.ort_dequantize_linear(int(padded.value), scale, int(zero_point)))
            value = Padded(value, padded.low, padded.high, pad, padded.origin)
        self.values[op.results[0]] = value

    def _op_iree_linalg_ext_quantize_affine(self, op, where):
        source = self._in_output_order(op, self._get(op.operands[0], where, padded=True), where)
        scale, zero_point = self._scale_and_zero_point(op, where)
        scale, zero_point = np.float32(scale), int(zero_point)
        qmin, qmax = int(op.attributes["quant_min"].value), int(op.attributes["quant_max"].value)
        if (qmin, qmax) != (-128, 127) or element_type(op.results[0]) != "i8":
            raise MingError(f"{where}: only signed int8 quantization is supported; "
                            "quantize with activation_type=QuantType.QInt8")
        node = location_name(op)
        result = self._quantize(source, scale, zero_point, node, where)
        if isinstance(result, IntTensor):
            self.quantization.setdefault(result.name, (float(scale), zero_point))
        self.values[op.results[0]] = result

    def _in_output_order(self, op, value, where):
        """The operand of a (de)quantization in its result's axis order (it may transpose, as a Transpose
        between a DequantizeLinear and a QuantizeLinear becomes)."""
        maps = [access_map(a, where) for a in op.attributes["indexing_maps"]]
        if maps[0] == maps[-1]:
            return value
        axes = _transposition(maps[0], maps[-1])
        if axes is None:
            raise MingError(f"{where}: access {maps[0]} -> {maps[-1]} is not a transposition")
        node = self.transposes.get(location_name(op), location_name(op))
        return self._transposed(value, axes, node, f"node '{node}' (Transpose)")

    def _transposed(self, value, axes: tuple[int, ...], node: str, where: str):
        """An int8 tensor, or one dequantized per tensor, transposed (numpy.transpose's `axes`)."""
        if isinstance(value, FloatValue) and _is_plain_dequant(value):
            term = value.terms[0]
            permuted = self._transposed(IntTensor(term.tensor), axes, node, where)
            return FloatValue(self.graph.tensors[permuted.name].shape, (replace(term, tensor=permuted.name),))
        if not isinstance(value, IntTensor):
            raise MingError(f"{where}: transposing this value is not supported")
        return IntTensor(self._transpose_tensor(value.name, axes, node, where))

    def _transpose_tensor(self, tensor: str, axes: tuple[int, ...], node: str, where: str) -> str:
        """A transposed tensor as a `Permute` of the channels of the map it reshapes (Reshape -> Transpose ->
        Reshape, ShuffleNet's channel shuffle), reshaped to the transposed shape. Any other transposition
        moves values between pixels, which a stream cannot do."""
        shape = self.graph.tensors[tensor].shape
        origin = tensor  # reshapes keep the order of the values: the tensor a kernel made, as a (C, H, W) map
        while (reshape := next((n for n in self.graph.nodes if isinstance(n, Reshape) and n.output == origin),
                               None)) is not None:
            origin = reshape.input
        origin_shape = self.graph.tensors[origin].shape
        map_shape = (int(np.prod(origin_shape[:-2])), *origin_shape[-2:]) if len(origin_shape) >= 3 \
            else (int(np.prod(origin_shape)),)
        pixel = int(np.prod(map_shape[1:]))
        positions = np.arange(int(np.prod(shape))).reshape(shape).transpose(axes).reshape(-1, pixel)
        order = positions[:, 0] // pixel
        if not np.array_equal(positions, order[:, None] * pixel + np.arange(pixel)):
            raise MingError(f"{where}: transposing a {shape} tensor by {axes} moves values between pixels; ming "
                            "supports transpositions that reorder the channels of each pixel (a channel shuffle)")
        permuted = self._reshape_tensor(origin, map_shape, node)
        if not np.array_equal(order, np.arange(len(order))):
            base = permuted
            permuted = self._new_tensor(f"{node}_out", map_shape, self.graph.tensors[base].dtype)
            self.graph.nodes.append(Permute(self._fresh(node), node, base, permuted, tuple(int(c) for c in order)))
        return self._reshape_tensor(permuted, tuple(shape[a] for a in axes), node)

    def _note_input_quantization(self, tensor: str, scale: float, zero_point: int) -> None:
        """An int8 model input's scale and zero point, for reports, from the first dequantization of it."""
        for i, graph_input in enumerate(self.graph.inputs):
            if graph_input.tensor == tensor and graph_input.dtype != "float32" and graph_input.scale == 1.0:
                self.graph.inputs[i] = replace(graph_input, scale=scale, zero_point=zero_point)

    def _quantize(self, source, scale, zero_point, node, where):
        node = getattr(source, "origin", "") or node
        if isinstance(source, FloatInput):
            tensor = self._new_tensor(f"{source.name}_q", source.shape, "i8")
            port = next(p for p in self.inputs if p.name == source.name)
            self.graph.inputs.append(GraphInput(source.name, tensor, port.shape, float(scale), zero_point,
                                                permutation=port.permutation))
            return IntTensor(tensor)
        if isinstance(source, HostValue):
            return replace(source, ops=source.ops + (HostOp("quantize", scale=float(scale), zero_point=zero_point),))
        if isinstance(source, FloatPieces):
            return self._quantize_pieces(source, scale, zero_point, node, where)
        if isinstance(source, Mapped):
            return self._lookup(source, scale, zero_point, where)
        if isinstance(source, Padded):  # Q(Pad(x, c)) is Pad(Q(x), Q(c))
            base = self._quantize(source.base, scale, zero_point, node, where)
            value = numerics.ort_quantize_linear(np.float32(source.value), scale, zero_point)
            return Padded(base, source.low, source.high, float(value), source.origin)
        if isinstance(source, FloatProduct):
            return self._mul(source, scale, zero_point, node, where)
        if not isinstance(source, FloatValue):
            raise MingError(f"{where}: cannot quantize this value")
        if source.clamp is not None and not _is_plain_dequant(replace(source, clamp=None)):
            source = self._drop_exact_clamp(source, scale, zero_point, where)
        if len(source.terms) == 2:
            return self._add(source, scale, zero_point, node, where)
        if len(source.terms) != 1:
            raise MingError(f"{where}: a sum of {len(source.terms)} tensors is not supported")
        term = source.terms[0]
        producer = self._producer(term.tensor)
        if producer is not None and producer.op in MAC_OPS and producer.epilogue is None:
            return self._requantize_accumulator(producer, source, scale, zero_point, where)
        if producer is not None and producer.op == "sumpool" and producer.epilogue is None:
            return self._requantize_average(producer, source, scale, zero_point, where)
        if source.clamp is not None and _is_plain_dequant(replace(source, clamp=None)):
            low, high = (numerics.ort_quantize_linear(np.float32(bound), scale, zero_point) for bound in source.clamp)
            return self._rescale(term, scale, zero_point, node, int(low), int(high))
        if _is_plain_dequant(source):
            if np.float32(term.factors[0]) == scale and int(term.offset) == zero_point:
                return IntTensor(term.tensor)
            return self._rescale(term, scale, zero_point, node)
        raise MingError(f"{where}: this requantization pattern is not supported")

    def _drop_exact_clamp(self, value: FloatValue, scale, zero_point, where) -> FloatValue:
        """A Relu/Clip of a layer's float result right before QuantizeLinear, as converters write fused
        activations. Quantizing is monotonic, so the clamp changes no int8 output exactly when its bounds
        quantize to the ends of the int8 range or beyond (onnxruntime drops it then, too)."""
        low, high = (int(numerics.ort_quantize_linear(np.float32(b), scale, zero_point)) for b in value.clamp)
        if low > -128 or high < 127:
            op = self.op_types.get(value.origin, "Relu/Clip")
            raise MingError(f"node '{value.origin}' ({op}) before QuantizeLinear clamps the int8 output to "
                            f"[{low}, {high}]; ming fuses it only when it changes nothing (output zero point -128 "
                            "for Relu, a clip range covering the quantized range); quantize the output with "
                            "that range")
        return replace(value, clamp=None)

    def _requantize_accumulator(self, kernel: Kernel, value: FloatValue, scale, zero_point, where):
        term = value.terms[0]
        if len(term.factors) != 2 or term.divisor != 1.0:
            raise MingError(f"{where}: unexpected requantization chain after {kernel.source}")
        # nothing varies per channel: the output's channels are its first axis (a single output has none)
        axes = _channel_axes([term.offset, value.bias, *term.factors]) or ((0,) if value.shape else ())

        def per_channel(array, dtype) -> np.ndarray:
            return _per_channel(array, value.shape, axes, dtype)

        x_scale, w_scale = np.float32(term.factors[0]), per_channel(term.factors[1], np.float32)
        if np.ndim(term.factors[0]) and np.size(term.factors[0]) > 1:
            x_scale, w_scale = np.float32(term.factors[1]), per_channel(term.factors[0], np.float32)
        correction = per_channel(term.offset, np.int64)
        bias_float = per_channel(value.bias, np.float64)
        acc_scale = np.float64(x_scale) * w_scale.astype(np.float64)
        # IREE folds the int32 bias's DequantizeLinear into a float32 constant, which holds the integer only
        # to float32 precision (2^-24 relative: tens of units for the huge biases of dead channels). What
        # matters is the error that rounding leaves in the output, in output LSB, on channels whose output
        # is not saturated whatever the input.
        bias_units = bias_float / acc_scale
        bias_int = np.rint(bias_units)
        multiplier = acc_scale / np.float64(scale)
        error_lsb = np.abs(bias_units - bias_int) * multiplier
        reach = self._accumulator_reach(kernel) + np.abs(correction)
        always_saturated = ((bias_int + reach) * multiplier + zero_point < -129) | \
                           ((bias_int - reach) * multiplier + zero_point > 128)
        error_lsb[always_saturated] = 0.0
        if np.any(error_lsb > BIAS_TOLERANCE_LSB) or np.any(np.abs(bias_int) >= 2 ** 31):
            worst = int(np.argmax(error_lsb))
            raise MingError(f"{where}: bias of {kernel.source} is not an int32 multiple of input*weight scale "
                            f"(channel {worst} is {error_lsb[worst]:.3g} output LSB away); quantize the bias to "
                            "int32 with scale input_scale * weight_scale")
        kernel.epilogue = AccRequant(
            bias=(bias_int.astype(np.int64) - correction).astype(np.int32),
            x_scale=np.float32(x_scale), w_scale=w_scale.astype(np.float32), y_scale=np.float32(scale),
            zero_point=zero_point, channel_dims=tuple(kernel.output.map.results[a].single_dim() for a in axes))
        self._retype(kernel.output.tensor, "i8")
        return IntTensor(kernel.output.tensor)

    def _accumulator_reach(self, kernel: Kernel) -> float:
        """A bound on |sum of x * w| of a multiply-accumulate kernel over int8 inputs x."""
        weights = [self.graph.constants[o.tensor] for o in kernel.inputs if o.tensor in self.graph.constants]
        largest = max((int(np.abs(w.astype(np.int64)).max()) for w in weights if w.size), default=128)
        return 128.0 * largest * int(np.prod([kernel.dims[d] for d in kernel.reduction_dims]))

    def _requantize_average(self, kernel: Kernel, value: FloatValue, scale, zero_point, where):
        term = value.terms[0]
        window = int(np.prod([kernel.dims[d] for d in kernel.reduction_dims]))
        valid = reference.valid_window_counts(kernel, self.graph.shape_of(kernel.inputs[0].tensor))
        valid = np.transpose(valid, [kernel.parallel_dims.index(e.single_dim()) for e in kernel.output.map.results])
        divisor = np.broadcast_to(term.divisor, valid.shape)
        exclude_padding = not np.all(divisor == window)  # ONNX count_include_pad=0 with effective padding
        if exclude_padding and not np.array_equal(divisor, valid):
            raise MingError(f"{where}: average pooling divisor is neither the window size nor the valid count")
        if len(term.factors) != 1 or np.ndim(term.offset) or value.bias.any():
            raise MingError(f"{where}: unsupported average pooling form")
        input_shape = self.graph.shape_of(kernel.inputs[0].tensor)
        channels = kernel.dims[kernel.parallel_dims[0]]
        global_pool = not kernel.inputs[0].padding and window * channels == int(np.prod(input_shape))
        kernel.epilogue = AverageRequant(
            count=window, x_scale=np.float32(term.factors[0]), x_zero_point=int(term.offset) // window,
            y_scale=np.float32(scale), zero_point=zero_point, exclude_padding=exclude_padding and not global_pool,
            global_pool=global_pool)
        self._retype(kernel.output.tensor, "i8")
        return IntTensor(kernel.output.tensor)

    def _add(self, value: FloatValue, scale, zero_point, node, where):
        plain = all(_is_plain_dequant(FloatValue(value.shape, (replace(t, map=None, negated=False),)))
                    for t in value.terms)
        a, b = value.terms
        if not plain or np.any(value.bias) or a.negated:
            raise MingError(f"{where}: only the sum or difference of two dequantized int8 tensors is supported")
        epilogue = AddRequant(np.float32(a.factors[0]), int(a.offset), np.float32(b.factors[0]), int(b.offset),
                              np.float32(scale), zero_point, subtract=b.negated)
        operands = (self._broadcast_operand(a, value.shape, where), self._broadcast_operand(b, value.shape, where))
        return self._binary_kernel(self._fresh(node), node, "add", operands, value.shape, epilogue,
                                   "sub" if b.negated else "add")

    def _mul(self, value: FloatProduct, scale, zero_point, node, where):
        a, b = value.a, value.b
        epilogue = MulRequant(np.float32(a.factors[0]), int(a.offset), np.float32(b.factors[0]), int(b.offset),
                              np.float32(scale), zero_point)
        try:
            numerics.mul_parts(epilogue.multiplier)
        except ValueError as error:
            raise MingError(f"node '{node}' (Mul): {error}; the product of the input scales over the output "
                            "scale must lie in that range (quantize the output with another scale)") from None
        operands = (self._broadcast_operand(a, value.shape, where), self._broadcast_operand(b, value.shape, where))
        return self._binary_kernel(self._fresh(node), node, "mul", operands, value.shape, epilogue)

    def _broadcast_operand(self, term: Term, shape: tuple[int, ...], where: str) -> Operand:
        """The operand reading `term`'s tensor at every point of `shape` (broadcast along the dims its map
        leaves out)."""
        amap = term.map or AccessMap.identity(len(shape))
        if tuple(self.graph.tensors[term.tensor].shape) != tuple(shape[e.single_dim()] for e in amap.results):
            raise MingError(f"{where}: operand {self.graph.tensors[term.tensor].shape} does not broadcast to "
                            f"{shape}")
        return Operand(term.tensor, amap)

    def _rescale(self, term: Term, scale, zero_point, node, qmin=-128, qmax=127) -> IntTensor:
        shape = self.graph.tensors[term.tensor].shape
        out = self._new_tensor(f"{node}_rescaled", shape, "i8")
        identity = AccessMap.identity(len(shape))
        self.graph.nodes.append(Kernel(
            name=self._fresh(f"{node}_rescale"), source=node, dims=shape, iterators=(PARALLEL,) * len(shape),
            inputs=(Operand(term.tensor, identity),), output=Operand(out, identity), payload=Arg(0), init=None,
            op="rescale",
            epilogue=Rescale(np.float32(term.factors[0]), int(term.offset), np.float32(scale), zero_point,
                             qmin, qmax)))
        return IntTensor(out)

    def _lookup(self, value: Mapped, scale, zero_point, where) -> IntTensor:
        """The quantized result of a node that has a table: a kernel looking its input up in the table."""
        table = self.tables[value.node]
        label = f"node '{value.node}' ({table.op})"
        lowered = (value.scale, value.zero_point, np.float32(scale), zero_point)
        tabulated = (table.x_scale, table.x_zero_point, table.y_scale, table.y_zero_point)
        if lowered != tabulated:
            raise MingError(f"{label}: IREE maps scale {lowered[0]} zero point {lowered[1]} to scale {lowered[2]} "
                            f"zero point {lowered[3]}, not as the model's DequantizeLinear and QuantizeLinear "
                            f"around it ({tabulated[0]}, {tabulated[1]} to {tabulated[2]}, {tabulated[3]}); "
                            "give the node its own QuantizeLinear/DequantizeLinear pairs")
        shape = self.graph.tensors[value.tensor].shape
        channel_dim = None
        if len(table.values) > 1:
            channel_dim = _same_axis(table.axis, table.shape, shape)
            if channel_dim is None:
                raise MingError(f"{label}: its tables differ along axis {table.axis} of {table.shape}, which IREE's "
                                f"tensor {shape} does not show; ming tabulates per-tensor and per-channel ops")
        name = self._kernel_name(value.node, "table")
        out = self._new_tensor(f"{name}_out", shape, "i8")
        identity = AccessMap.identity(len(shape))
        self.graph.nodes.append(Kernel(
            name=name, source=value.node, dims=shape, iterators=(PARALLEL,) * len(shape),
            inputs=(Operand(value.tensor, identity),), output=Operand(out, identity), payload=Arg(0), init=None,
            op="table", epilogue=LookupTable(table.values, channel_dim, table.op)))
        return IntTensor(out)

    def _quantize_pieces(self, value: FloatPieces, scale, zero_point, node, where):
        def quantized(piece) -> str:
            return self._quantize(piece, scale, zero_point, node, where).name

        return self._concat(value, node, where, quantized)

    def _concat(self, value: FloatPieces, node, where, piece_tensor) -> IntTensor:
        """A Concat node of the pieces (int8 tensors, or float ones `piece_tensor` quantizes)."""
        varying = {i for (offsets, _, _) in value.pieces for i, o in enumerate(offsets) if o}
        if len(varying) != 1:
            raise MingError(f"{where}: only concatenation along one axis is supported")
        axis = varying.pop()
        first = value.pieces[0][2]
        rank = len(self.graph.tensors[first.name].shape if isinstance(first, IntTensor) else first.shape)
        lead = len(value.shape) - rank
        if lead < 0 or any(d != 1 for d in value.shape[:lead]):
            raise MingError(f"{where}: unsupported concatenation shape")
        pieces = sorted(value.pieces, key=lambda p: p[0][axis])
        inputs = []
        position = 0
        for offsets, sizes, piece in pieces:
            if offsets[axis] != position or any(o for i, o in enumerate(offsets) if i != axis):
                raise MingError(f"{where}: concatenation pieces do not tile the output")
            position += sizes[axis]
            inputs.append(self._reshape_tensor(piece_tensor(piece), tuple(sizes[lead:]), node))
        if position != value.shape[axis]:
            raise MingError(f"{where}: concatenation pieces do not cover the output")
        name = self._fresh(node)
        out = self._new_tensor(f"{name}_out", value.shape[lead:], "i8")
        self.graph.nodes.append(Concat(name, node, tuple(inputs), out, axis - lead))
        return IntTensor(self._reshape_tensor(out, value.shape, node))

    def _retype(self, tensor: str, dtype: str) -> None:
        info = self.graph.tensors[tensor]
        self.graph.tensors[tensor] = TensorInfo(info.name, info.shape, dtype)

    # ---- softmax: host tail ----

    def _op_linalg_softmax(self, op, where):
        source = self._get(op.operands[0], where)
        if not (isinstance(source, FloatValue) and len(source.terms) == 1 and _is_plain_dequant(source)):
            raise MingError(f"{where}: Softmax must consume a dequantized int8 tensor")
        term = source.terms[0]
        axis = int(op.attributes["dimension"].value)
        self.values[op.results[0]] = HostValue(term.tensor, float(term.factors[0]), int(term.offset),
                                               (HostOp("softmax", axis=axis),))

    # ---- linalg.generic ----

    def _op_linalg_generic(self, op, where):
        segments = list(op.attributes["operandSegmentSizes"])
        n_in = segments[0]
        out_init = self._get(op.operands[n_in], where)
        maps = [access_map(a, where) for a in op.attributes["indexing_maps"]]
        iterators = tuple(iterator_kind(a) for a in op.attributes["iterator_types"])
        dims = _loop_bounds(maps, [v for v in op.operands[:n_in + 1]], len(iterators), where)
        block = op.regions[0].blocks[0]
        result = op.results[0]
        node = location_name(op)
        windowed = any(it != PARALLEL for it in iterators)  # a reduction takes padding into its window
        if n_in == 0 and node in self.resizes:
            self.values[result] = self._upsample(block, node, tensor_shape(result), where)
            return
        if node in self.tables:
            mapped = self._mapped(op, n_in, maps, node, where)
            if mapped is not None:
                self.values[result] = mapped
                return
        copied = self.values.get(op.operands[0]) if n_in == 1 and _copies_its_input(block) else None
        axes = _transposition(maps[0], maps[-1]) if isinstance(copied, (IntTensor, FloatValue)) else None
        if axes is not None:  # a Transpose
            self.values[result] = self._transposed(self._get(op.operands[0], where), axes, node, where)
            return
        if element_type(result) == "f32":
            ins = [self._get(v, where, padded=windowed) for v in op.operands[:n_in]]
            self.values[result] = self._float_generic(op, ins, out_init, maps, iterators, dims, block, node, where)
            return
        raw = [self.values.get(v) for v in op.operands[:n_in]]
        if all(it == PARALLEL for it in iterators) and all(m.is_identity() or isinstance(v, np.ndarray)
                                                           for v, m in zip(raw, maps)):
            tensors = [i for i, v in enumerate(raw) if isinstance(v, (IntTensor, IntChain, IntSum))]
            if not tensors:
                self.values[result] = self._fold_constants(raw, maps, dims, block, where)
                return
            if len(tensors) == 1 and all(isinstance(v, np.ndarray) for i, v in enumerate(raw) if i != tensors[0]):
                source = raw[tensors[0]]
                if isinstance(source, IntChain) and source.steps[-1].dtype == "i8" and element_type(result) != "i8":
                    raw[tensors[0]] = self._get(op.operands[tensors[0]], where)  # an int8 tensor of the model
                self.values[result] = self._chain(raw, maps, dims, block, tensors[0], element_type(result), node,
                                                  where)
                return
            if len(raw) == 2 and len(tensors) == 2 and _int_payload(block, where) == Op("add", (Arg(0), Arg(1))):
                chains = [v if isinstance(v, IntChain) else IntChain(v.name, None, ()) for v in raw]
                self.values[result] = IntSum(*chains, dims)
                return
        elif any(isinstance(v, IntSum) for v in raw):
            raise MingError(f"{where}: the sum of two tensors must be requantized before other operations")
        payload = _int_payload(block, where)
        if n_in == 1 and isinstance(out_init, Fill) and out_init.value == 0 and element_type(result) == "i32" \
                and isinstance(payload, Op) and payload.name == "add" and set(payload.args) == {Arg(0), Arg(1)}:
            summed = self._sum_reduction(raw[0], maps, iterators, dims, node, result, where)
            if summed is not None:
                self.values[result] = summed
                return
        ins = [self._get(v, where, padded=windowed) for v in op.operands[:n_in]]
        self.values[result] = self._int_generic(ins, out_init, maps, iterators, dims, block, node, result, where)

    def _mapped(self, op, n_in, maps, node, where) -> Mapped | None:
        """A generic of a node that has a table, reading the node's dequantized int8 input (or the result of
        an earlier generic of the node: IREE splits some ops into several) besides constants: the node's
        value as a function of that input, whatever the body computes (the table is the truth). None for a
        generic of constants alone."""
        sources = set()
        for value, amap in zip(op.operands[:n_in], maps):
            held = self._get(value, where)
            if isinstance(held, (np.ndarray, np.generic, Fill, Empty)):
                continue
            if isinstance(held, Mapped) and held.node == node:
                source = held
            elif isinstance(held, FloatValue) and _is_plain_dequant(held):
                term = held.terms[0]
                source = Mapped(term.tensor, np.float32(term.factors[0]), int(term.offset), node)
            else:
                raise MingError(f"{where}: node '{node}' ({self.tables[node].op}) computes with a value other "
                                "than its dequantized int8 input")
            if not amap.is_identity():
                raise MingError(f"{where}: node '{node}' ({self.tables[node].op}) reads its input other than "
                                "element by element")
            sources.add(source)
        if len(sources) > 1:
            raise MingError(f"{where}: node '{node}' ({self.tables[node].op}) reads more than one int8 tensor")
        if sources and not maps[-1].is_identity():
            raise MingError(f"{where}: node '{node}' ({self.tables[node].op}) writes its result transposed")
        return sources.pop() if sources else None

    def _sum_reduction(self, source, maps, iterators, dims, node, result, where) -> IntTensor | None:
        """TFLite's MEAN as TOSA writes it: int8 values less their zero point (a RESCALE to int32), summed
        over one axis, then over the next (a second reduction of the first's sums). Read as one window sum of
        the raw int8 values (a global pool), the zero point times the count kept as the sum's offset."""
        if isinstance(source, IntChain) and isinstance(source.tensor, str) and source.axis is None \
                and self.graph.tensors[source.tensor].dtype == "i8":
            values = np.arange(-128, 128, dtype=np.int64).reshape(-1, 1)
            offsets = fixed_point.run_steps(source.steps, values, 1)[:, 0] - values[:, 0]
            if np.any(offsets != offsets[0]):
                return None
            name = self._kernel_name(node, "sumpool")
            out = self._new_tensor(f"{name}_out", tensor_shape(result), "i32")
            self.graph.nodes.append(Kernel(
                name=name, source=node, dims=dims, iterators=iterators,
                inputs=(Operand(source.tensor, maps[0]),), output=Operand(out, maps[1]),
                payload=Op("add", (Arg(1), Arg(0))), init=0, op="sumpool"))
            count = int(np.prod([dims[d] for d, it in enumerate(iterators) if it != PARALLEL]))
            self.sum_offsets[out] = int(offsets[0]) * count
            return IntTensor(out)
        producer = self._producer(source.name) if isinstance(source, IntTensor) else None
        if producer is None or producer.op != "sumpool" or producer.epilogue is not None \
                or source.name not in self.sum_offsets:
            return None
        merged = _merge_reductions(producer, maps, iterators, dims, where)
        out = self._new_tensor(f"{producer.name}_total", tensor_shape(result), "i32")
        merged.output = Operand(out, merged.output.map)
        self.graph.nodes[self.graph.nodes.index(producer)] = merged
        count = int(np.prod([dims[d] for d, it in enumerate(iterators) if it != PARALLEL]))
        self.sum_offsets[out] = self.sum_offsets[source.name] * count
        return IntTensor(out)

    def _upsample(self, block, node: str, shape: tuple[int, ...], where: str) -> FloatValue:
        """A nearest Resize: IREE's generic computes every output element's source index and reads the
        dequantized source with `tensor.extract`. The index arithmetic is not interpreted; the node's
        factors come from the model (`self.resizes`), and the int8 source is upsampled before dequantizing."""
        extracts = [o for o in block.operations if o.operation.name == "tensor.extract"]
        if len(extracts) != 1:
            raise MingError(f"{where}: unexpected form of a nearest Resize")
        source = self._get(extracts[0].operands[0], where)
        if not (isinstance(source, FloatValue) and _is_plain_dequant(source)):
            raise MingError(f"{where}: Resize must consume a dequantized int8 tensor")
        term = source.terms[0]
        in_shape = self.graph.tensors[term.tensor].shape
        factors = self.resizes[node][len(self.resizes[node]) - len(in_shape):]  # IREE drops the batch axis
        if tuple(n * f for n, f in zip(in_shape, factors)) != tuple(shape):
            raise MingError(f"{where}: Resize of a {in_shape} map to {shape} is not an upsampling by {factors}")
        if all(f == 1 for f in factors):
            return source
        name = self._kernel_name(node, "upsample")
        out = self._new_tensor(f"{name}_out", shape, "i8")
        self.graph.nodes.append(Upsample(name, node, term.tensor, out, factors))
        return FloatValue(tuple(shape), (replace(term, tensor=out),))

    # ---- integer element-wise chains (TOSA) ----

    def _fold_constants(self, values, maps, dims, block, where) -> np.ndarray:
        args = [_broadcast_input(np.asarray(v, np.int64), m, dims, where) for v, m in zip(values, maps)]
        result = int_body.evaluate(block, args + [np.int64(0)], where=where)[None]
        return _compact(np.broadcast_to(result, dims).copy())

    def _chain(self, values, maps, dims, block, position, dtype, node, where) -> IntChain:
        source = values[position]
        chain = source if isinstance(source, IntChain) else \
            IntChain(source if isinstance(source, IntSum) else source.name, None, ())
        axis = chain.axis
        constants = []
        for i, (value, amap) in enumerate(zip(values, maps)):
            if i == position:
                continue
            array = _broadcast_input(np.asarray(value, np.int64), amap, dims, where)
            varying = [a for a, size in enumerate(np.shape(array)) if size > 1]
            if len(varying) > 1 or (varying and axis is not None and varying[0] != axis):
                raise MingError(f"{where}: integer constants varying along several axes are not supported")
            if varying:
                axis = varying[0]
            constants.append((i, array))
        step = ChainStep(block, position, tuple(constants), dtype, node, where)
        return IntChain(chain.tensor, axis, chain.steps + (step,))

    def _materialize(self, chain: IntChain, where: str) -> IntTensor:
        """The integer tensor a chain computes, as an epilogue of the kernel producing its source."""
        if isinstance(chain.tensor, IntSum):
            return self._fixed_point_add(chain.tensor, chain, where)
        producer = self._producer(chain.tensor)
        if producer is not None and producer.op in MAC_OPS and producer.epilogue is None \
                and chain.steps[-1].dtype == "i8":
            channel_dim = self._channel_dim(producer, chain)
            producer.epilogue = fixed_point.requant_of(chain, (channel_dim,), producer.dims[channel_dim], where)
            self._retype(producer.output.tensor, "i8")
            return IntTensor(producer.output.tensor)
        if producer is not None and producer.op == "sumpool" and producer.epilogue is None \
                and producer.output.tensor in self.sum_offsets:  # a MEAN: the rescale of a global sum
            channel_dim = self._channel_dim(producer, chain)
            epilogue = fixed_point.requant_of(chain, (channel_dim,), producer.dims[channel_dim], where)
            epilogue.bias = numerics.wrap_i32(epilogue.bias.astype(np.int64)
                                              + self.sum_offsets[producer.output.tensor]).astype(np.int32)
            producer.epilogue = epilogue
            self._retype(producer.output.tensor, "i8")
            return IntTensor(producer.output.tensor)
        if producer is not None and producer.op == "sumpool" and producer.epilogue is None:
            valid = reference.valid_window_counts(producer, self.graph.shape_of(producer.inputs[0].tensor))
            order = [producer.parallel_dims.index(e.single_dim()) for e in producer.output.map.results]
            valid = np.transpose(valid, order)[..., 0]  # over the output's rows and columns
            producer.epilogue = fixed_point.average_of(chain, valid, where)
            self._retype(producer.output.tensor, "i8")
            return IntTensor(producer.output.tensor)
        raise MingError(f"{where}: this integer arithmetic after {producer.source if producer else chain.tensor} "
                        "has no form in ming yet")

    def _fixed_point_add(self, total: IntSum, chain: IntChain, where: str) -> IntTensor:
        a, b = total.a, total.b
        if any(isinstance(c.tensor, IntSum) or self.graph.tensors[c.tensor].dtype != "i8" or c.axis is not None
               for c in (a, b)):
            raise MingError(f"{where}: only the sum of two per-tensor rescaled int8 tensors is supported")
        shape = total.shape
        if self.graph.tensors[a.tensor].shape != shape or self.graph.tensors[b.tensor].shape != shape:
            raise MingError(f"{where}: broadcasting Add is not supported")
        node = chain.steps[-1].node
        identity = AccessMap.identity(len(shape))
        return self._binary_kernel(self._kernel_name(node, "add"), node, "add",
                                   (Operand(a.tensor, identity), Operand(b.tensor, identity)), shape,
                                   fixed_point.add_of(a, b, chain.steps, where))

    def _binary_kernel(self, name: str, node: str, op: str, operands: tuple[Operand, Operand], shape,
                       epilogue, payload: str = "") -> IntTensor:
        """The element-wise sum or difference (`op` "add", `payload` "add" or "sub") or product ("mul") of
        two int8 operands over `shape`, requantized by `epilogue`."""
        out = self._new_tensor(f"{name}_out", shape, "i8")
        payload = Op(payload or op, (Arg(0), Arg(1)))
        self.graph.nodes.append(Kernel(
            name=name, source=node, dims=shape, iterators=(PARALLEL,) * len(shape), inputs=operands,
            output=Operand(out, AccessMap.identity(len(shape))), payload=payload, init=None, op=op,
            epilogue=epilogue))
        return IntTensor(out)

    def _channel_dim(self, kernel: Kernel, chain: IntChain) -> int:
        """The loop dim of `kernel` that indexes the channels of its output (TFLite: the last axis)."""
        results = kernel.output.map.results
        axis = chain.axis if chain.axis is not None else len(results) - 1
        return results[axis].single_dim()

    def _int_generic(self, ins, out_init, maps, iterators, dims, block, node, result, where) -> IntTensor:
        payload = _int_payload(block, where)
        # TOSA's pooling passes the window's shape as an empty tensor the body never reads
        args = list(block.arguments)
        kept = [i for i, value in enumerate(ins) if not (isinstance(value, Empty) and not list(args[i].uses))]
        payload = _renumber(payload, {old: new for new, old in enumerate(kept + [len(ins)])})
        operands = [self._operand(ins[i], maps[i], node, where) for i in kept]
        init = int(out_init.value) if isinstance(out_init, Fill) else None
        if not isinstance(out_init, (Fill, Empty)):
            raise MingError(f"{where}: in-place update of a computed tensor is not supported")
        dtype = element_type(result)
        if dtype not in ("i8", "i32"):
            raise MingError(f"{where}: element type {dtype} is not supported")
        kind = _kernel_op(payload, self.op_types.get(node, ""), operands, dtype) if init is not None \
            else "elementwise"
        name = self._kernel_name(node, kind)
        out = self._new_tensor(f"{name}_out", tensor_shape(result), dtype)
        self.graph.nodes.append(Kernel(
            name=name, source=node, dims=dims, iterators=iterators, inputs=tuple(operands),
            output=Operand(out, maps[-1]), payload=payload, init=init, op=kind))
        return IntTensor(out)

    def _operand(self, value, amap: AccessMap, node: str, where: str) -> Operand:
        value, amap = _unsliced(value, amap)
        if isinstance(value, IntTensor):
            return Operand(value.name, amap)
        if isinstance(value, Padded) and isinstance(value.base, IntTensor):
            return Operand(value.base.name, amap, tuple(zip(value.low, value.high)), int(value.value))
        if isinstance(value, np.ndarray) and value.dtype.kind == "i":
            return Operand(self._constant(node, value), amap)
        raise MingError(f"{where}: unsupported operand for an integer kernel")

    def _float_generic(self, op, ins, out_init, maps, iterators, dims, block, node, where):
        if any(it != PARALLEL for it in iterators):
            return self._float_reduction(ins, out_init, maps, iterators, dims, block, node, where)
        if not maps[-1].is_identity():
            raise MingError(f"{where}: transposing float tensors is not supported")
        symbols = [_broadcast_input(value, amap, dims, where) for value, amap in zip(ins, maps)]
        env: dict[ir.Value, object] = dict(zip(list(block.arguments)[:len(ins)], symbols))
        for body_op in block.operations:
            name = body_op.operation.name
            if name == "linalg.yield":
                value = env[body_op.operands[0]]
                if isinstance(value, (FloatValue, FloatProduct)):
                    return replace(value, origin=node)
                return _compact(value) if isinstance(value, np.ndarray) else value
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
        if not (isinstance(source, FloatValue) and _is_plain_dequant(source) and isinstance(out_init, Fill)):
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
        name = self._fresh(node)
        out = self._new_tensor(f"{name}_out", out_shape, dtype)
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
        name = self._kernel_name(node, "conv")
        operands = (activation, Operand(self._constant(node, kernel_weights.astype(np.int8)), weight_map))
        payload = Op("add", (Arg(2), Op("mul", (Arg(0), Arg(1)))))
        out_shape = tuple(dims[d] for d in out_dims)
        out = self._new_tensor(f"{name}_out", out_shape, "i32")
        self.graph.nodes.append(Kernel(
            name=name, source=node, dims=dims, iterators=iterators, inputs=operands, output=Operand(out, out_map),
            payload=payload, init=0, op=_kernel_op(payload, self.op_types.get(node, ""), list(operands), "i32")))
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
        quantized = self.weights.get(node)
        if quantized is None:
            raise MingError(f"{where}: float weights without an int8 initializer behind a DequantizeLinear")
        if np.size(quantized.scale) > 1 and quantized.axis != 0:
            raise MingError(f"{where}: weights quantized along axis {quantized.axis}; ming takes per-output-channel "
                            "(axis 0) or per-tensor weight scales")
        dequantized = quantized.dequantized()
        if dequantized.size != weights.size or not np.array_equal(dequantized.reshape(weights.shape), weights):
            raise MingError(f"{where}: the float weights are not the model's int8 weights dequantized")
        return quantized

    def _drop_unused(self) -> None:
        """Remove nodes whose results nothing reads (e.g. float bias broadcasts folded away)."""
        live = {o.tensor for o in self.graph.outputs}
        kept = []
        for node in reversed(self.graph.nodes):
            outputs = {node.output.tensor} if isinstance(node, Kernel) else {node.output}
            if outputs & live:
                kept.append(node)
                live |= _node_inputs(node)
        self.graph.nodes = kept[::-1]
        used = live | {i.tensor for i in self.graph.inputs}
        self.graph.tensors = {k: v for k, v in self.graph.tensors.items() if k in used}
        self.graph.constants = {k: v for k, v in self.graph.constants.items() if k in used}

    # The MLIR operations the lifter reads, by name; `_visit` refuses any other (after the pass-through ones).
    HANDLERS = {
        "arith.constant": _op_arith_constant,
        "util.global.load": _op_util_global_load,
        "hal.tensor.import": _op_hal_tensor_import,
        "hal.tensor.export": _op_hal_tensor_export,
        "linalg.fill": _op_linalg_fill,
        "linalg.generic": _op_linalg_generic,
        "linalg.softmax": _op_linalg_softmax,
        "tensor.pad": _op_tensor_pad,
        "tensor.collapse_shape": _reshape,
        "tensor.expand_shape": _reshape,
        "tensor.extract_slice": _op_tensor_extract_slice,
        "tensor.insert_slice": _op_tensor_insert_slice,
        "iree_linalg_ext.dequantize_affine": _op_iree_linalg_ext_dequantize_affine,
        "iree_linalg_ext.quantize_affine": _op_iree_linalg_ext_quantize_affine,
    }


# ---- helpers ---------------------------------------------------------------


def _node_inputs(node) -> set[str]:
    if isinstance(node, Kernel):
        return {o.tensor for o in node.inputs}
    if isinstance(node, Concat):
        return set(node.inputs)
    return {node.input}


def _index_array(dim: int, dims: tuple[int, ...]) -> np.ndarray:
    shape = [1] * len(dims)
    shape[dim] = dims[dim]
    return np.arange(dims[dim], dtype=np.int64).reshape(shape)


_NUMERIC = {
    "arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply, "arith.maxsi": np.maximum,
    "arith.minsi": np.minimum, "arith.index_cast": lambda x: x.astype(np.int64),
    "arith.sitofp": lambda x: x.astype(np.float32),
}
_GREATER = {2, 3, 9, 10}  # arith.cmpf predicates ogt, oge, ugt, uge
_LESS = {4, 5, 11, 12}  # olt, ole, ult, ule


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
    if _is_plain_dequant(base) and base.terms[0].factors[0] <= 0:
        raise MingError(f"{where}: Relu/Clip must follow a dequantized int8 tensor with a positive scale")
    low, high = value.clamp or (float("-inf"), float("inf"))
    bound = float(bound)
    return replace(value, clamp=(max(low, bound), high) if is_max else (low, min(high, bound)))


def _same_axis(axis: int, model_shape: tuple[int, ...], shape: tuple[int, ...]) -> int | None:
    """The axis of `shape` that is `axis` (of size > 1) of `model_shape`, where IREE dropped unit dims of
    `model_shape` (the batch, say); None if `shape` is not `model_shape` less unit dims."""
    sizes = [size for size in shape if size != 1]
    if sizes != [size for size in model_shape if size != 1]:
        return None
    return [a for a, size in enumerate(shape) if size != 1][sum(size != 1 for size in model_shape[:axis])]


def _product_factor(value: FloatValue) -> Term | None:
    """The term of a factor of Mul: one dequantized int8 tensor, possibly broadcast."""
    term = value.terms[0] if len(value.terms) == 1 else None
    if term is None or term.negated or not _is_plain_dequant(replace(value, terms=(replace(term, map=None),))):
        return None
    return term


def _all_scalar(value: FloatValue) -> bool:
    arrays = [value.bias] + [a for t in value.terms for a in (*t.factors, t.offset)]
    return all(np.size(a) == 1 for a in arrays)


def _is_plain_dequant(value: FloatValue) -> bool:
    """A single int8 tensor times one scalar scale minus a scalar zero point."""
    if len(value.terms) != 1 or np.any(value.bias) or value.clamp is not None:
        return False
    term = value.terms[0]
    return len(term.factors) == 1 and np.size(term.factors[0]) == 1 and np.size(term.offset) == 1 \
        and np.size(term.divisor) == 1 and term.divisor == 1.0 and term.map is None and not term.negated


def _dequantized_operand(value, amap: AccessMap, where: str) -> tuple[Operand, tuple[np.float32, int]]:
    """An int8 tensor read through its per-tensor dequantization (possibly sliced and padded) as an operand of
    an integer kernel, and its (scale, zero point)."""
    value, amap = _unsliced(value, amap)
    padded = value if isinstance(value, Padded) else None
    if padded is not None:
        value = padded.base
    if not (isinstance(value, FloatValue) and _is_plain_dequant(value)):
        raise MingError(f"{where}: a float convolution must read a dequantized int8 tensor")
    term = value.terms[0]
    scale, zero_point = np.float32(term.factors[0]), int(term.offset)
    if padded is None:
        return Operand(term.tensor, amap), (scale, zero_point)
    pad_value = int(numerics.ort_quantize_linear(np.float32(padded.value), scale, zero_point))
    if float(numerics.ort_dequantize_linear(pad_value, scale, zero_point)) != padded.value:
        raise MingError(f"{where}: padding value {padded.value} is not representable in int8")
    return Operand(term.tensor, amap, tuple(zip(padded.low, padded.high)), pad_value), (scale, zero_point)


def _unsliced(value, amap: AccessMap) -> tuple[object, AccessMap]:
    """A slice's source and the access map into it: index j of the slice is offset + stride * j of its source."""
    if not isinstance(value, Sliced):
        return value, amap
    results = tuple(AffineExpr(tuple(c * stride for c in e.coeffs), e.constant * stride + offset)
                    for e, offset, stride in zip(amap.results, value.offsets, value.strides))
    return value.base, AccessMap(amap.num_dims, results)


def _is_float_mac(block) -> bool:
    """Whether a generic's body is `out + in0 * in1` in float."""
    ops = list(block.operations)
    if [o.operation.name for o in ops] != ["arith.mulf", "arith.addf", "linalg.yield"]:
        return False
    a, b, out = block.arguments
    mul, add, done = ops
    return set(mul.operands) == {a, b} and set(add.operands) == {out, mul.results[0]} \
        and done.operands[0] == add.results[0]


def _copies_its_input(block) -> bool:
    """Whether a generic's body is `linalg.yield` of its first argument."""
    ops = list(block.operations)
    return len(ops) == 1 and ops[0].operation.name == "linalg.yield" and ops[0].operands[0] == block.arguments[0]


def _transposition(source: AccessMap, result: AccessMap) -> tuple[int, ...] | None:
    """The axes (numpy.transpose's) of an element-wise op that reads its operand by `source` and writes by
    `result` in another order; None unless both are permutations of the loop dims and differ."""
    source_dims = [e.single_dim() for e in source.results]
    result_dims = [e.single_dim() for e in result.results]
    if source == result or None in source_dims + result_dims or sorted(source_dims) != sorted(result_dims) \
            or len(set(source_dims)) != len(source_dims):
        return None
    return tuple(source_dims.index(d) for d in result_dims)


def _loop_bounds(maps, values, num_dims, where) -> tuple[int, ...]:
    bounds: list[int | None] = [None] * num_dims
    for amap, value in zip(maps, values):
        shape = tensor_shape(value) if "tensor<" in str(value.type) else ()
        for expr, size in zip(amap.results, shape):
            d = expr.single_dim()
            if d is not None and bounds[d] is None:
                bounds[d] = size
    if any(b is None for b in bounds):
        raise MingError(f"{where}: cannot infer loop bounds from the access maps")
    return tuple(bounds)


def _broadcast_input(value, amap: AccessMap, dims, where):
    """Constants become arrays broadcastable to the iteration space; tensors pass through."""
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return value
        order = [e.single_dim() for e in amap.results]
        if None in order:
            raise MingError(f"{where}: unsupported constant access map {amap}")
        moved = np.moveaxis(value, list(range(value.ndim)), np.argsort(np.argsort(order)).tolist())
        shape = [1] * len(dims)
        for d, size in zip(sorted(order), moved.shape):
            shape[d] = size
        return _compact(moved.reshape(shape))
    if isinstance(value, FloatValue) and not amap.is_identity() and _is_plain_dequant(value) \
            and _is_projection(amap):  # a vector (or scalar) broadcast over the other dims (Mul, Add, Sub)
        return FloatValue(dims, (replace(value.terms[0], map=amap),))
    if isinstance(value, (IntTensor, FloatValue)):
        if not amap.is_identity():
            raise MingError(f"{where}: non-identity access in a float generic is not supported")
        return value
    raise MingError(f"{where}: unsupported float generic operand")


def _is_projection(amap: AccessMap) -> bool:
    """The map reads some of the dims, each as it is and in order (d0, d1, d2) -> (d0)."""
    dims = [e.single_dim() for e in amap.results]
    return None not in dims and dims == sorted(set(dims))


def _compact(array: np.ndarray) -> np.ndarray:
    """Collapse the axes along which a broadcast constant does not vary."""
    for axis in range(array.ndim):
        if array.shape[axis] > 1 and np.all(array == array.take([0], axis=axis)):
            array = array.take([0], axis=axis)
    return array


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
    divisor = float(rhs) if np.size(rhs) == 1 else _compact(rhs.astype(np.float64))
    terms = tuple(replace(t, divisor=t.divisor * divisor) for t in lhs.terms)
    return FloatValue(dims, terms, lhs.bias / rhs)


def _channel_axes(arrays) -> tuple[int, ...]:
    """The axes per-channel constants vary along: one, or adjacent ones (a grouped convolution's group and
    channel in its group, the channel index running row-major over them)."""
    axes = sorted({a for arr in arrays for a, size in enumerate(np.shape(arr)) if size > 1})
    if axes != list(range(axes[0], axes[-1] + 1) if axes else []):
        raise MingError(f"per-channel quantization along axes {axes} that are not adjacent")
    return tuple(axes)


def _per_channel(array, shape, axes, dtype) -> np.ndarray:
    """A scalar or per-channel constant over `shape` (varying along `axes` at most) as one value per channel."""
    full = np.broadcast_to(np.asarray(array), shape)
    return full[tuple(slice(None) if a in axes else 0 for a in range(len(shape)))].reshape(-1).astype(dtype)


def _int_payload(block, where) -> Expr:
    args = list(block.arguments)
    env: dict[ir.Value, Expr] = {a: Arg(i) for i, a in enumerate(args)}
    for body_op in block.operations:
        name = body_op.operation.name
        if name == "linalg.yield":
            return env[body_op.operands[0]]
        if name in ("arith.extsi", "arith.trunci"):
            env[body_op.results[0]] = env[body_op.operands[0]]
        elif name in _INT_BINARY:
            env[body_op.results[0]] = Op(_INT_BINARY[name], tuple(env[v] for v in body_op.operands))
        elif name == "arith.constant":
            env[body_op.results[0]] = Const(int(body_op.attributes["value"].value))
        else:
            raise MingError(f"{where}: operation {name} in a kernel body is not supported")
    raise MingError(f"{where}: kernel body without yield")


def _kernel_op(payload: Expr, onnx_op: str, operands: list[Operand], dtype: str) -> str:
    """'conv', 'gemm' or 'matmul' for `acc + a * b` bodies (named after the model's op, or by the shape of
    the access when there is none); 'maxpool' for an int8 running max, 'sumpool' for an int8 window sum;
    'reduce' otherwise."""
    is_mac = isinstance(payload, Op) and payload.name == "add" and any(
        isinstance(a, Op) and a.name == "mul" for a in payload.args)
    if isinstance(payload, Op) and payload.name == "max" and dtype == "i8" and len(operands) == 1:
        return "maxpool"
    if isinstance(payload, Op) and payload.name == "add" and set(payload.args) == {Arg(0), Arg(1)} \
            and dtype == "i32" and len(operands) == 1:
        return "sumpool"
    if not is_mac:
        return "reduce"
    if onnx_op:
        return {"Conv": "conv", "Gemm": "gemm", "CONV_2D": "conv", "DEPTHWISE_CONV_2D": "conv",
                "FULLY_CONNECTED": "gemm"}.get(onnx_op, "matmul")
    sliding = any(len(e.used_dims()) > 1 for o in operands for e in o.map.results)
    return "conv" if sliding else "gemm"


def _merge_reductions(first: Kernel, maps, iterators, dims, where) -> Kernel:
    """`first` followed by a sum over some of its parallel dims (`maps`, `iterators` over `dims`), as one
    kernel over `first`'s dims: the second's loop dim j is the first's dim producing its operand's axis."""
    produced = [e.single_dim() for e in first.output.map.results]
    read = [e.single_dim() for e in maps[0].results]
    written = [e.single_dim() for e in maps[1].results]
    if None in produced + read + written or len(read) != len(produced):
        raise MingError(f"{where}: unsupported sum of sums")
    to_first = dict(zip(read, produced))
    merged = list(first.iterators)
    for d, kind in enumerate(iterators):
        if kind != PARALLEL:
            merged[to_first[d]] = kind
    output = AccessMap(len(first.dims), tuple(AffineExpr(tuple(int(i == to_first[d]) for i in range(len(first.dims))))
                                              for d in written))
    return replace(first, iterators=tuple(merged), output=Operand(first.output.tensor, output))


def _renumber(expr: Expr, mapping: dict[int, int]) -> Expr:
    if isinstance(expr, Arg):
        return Arg(mapping[expr.index])
    if isinstance(expr, Op):
        return Op(expr.name, tuple(_renumber(a, mapping) for a in expr.args))
    return expr
