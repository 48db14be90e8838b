"""The graph IR shared by every stage.

The frontend lifts a model into a `Graph`: integer tensors (int8 activations,
int32 accumulators), constant arrays, and nodes. Compute nodes are `Kernel`s,
each the integer form of one `linalg.generic`: an iteration domain, operands
with affine access maps, a payload expression DAG applied at every iteration
point, and an optional requantization epilogue applied to every finished
output element. Data-movement nodes (`Reshape`, `Concat`, `Upsample`, `Pad`,
`Slice`, `Permute`) carry no arithmetic. What cannot run in integer arithmetic (a final Softmax) is a
`HostOp` tail on a graph output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import numerics
from .contract.ming_host import HostOp  # noqa: F401  (the graph names the host tail with it)

PARALLEL = "parallel"
REDUCTION = "reduction"


@dataclass(frozen=True)
class AffineExpr:
    """`sum(coeffs[d] * d) + constant` over a kernel's loop dims."""

    coeffs: tuple[int, ...]
    constant: int = 0

    def used_dims(self) -> tuple[int, ...]:
        return tuple(d for d, c in enumerate(self.coeffs) if c != 0)

    def single_dim(self) -> int | None:
        """The dim if the expression is exactly `d` (coefficient 1, no constant)."""
        dims = self.used_dims()
        if len(dims) == 1 and self.coeffs[dims[0]] == 1 and self.constant == 0:
            return dims[0]
        return None

    def __str__(self) -> str:
        terms = [f"d{d}" if c == 1 else f"d{d} * {c}" for d, c in enumerate(self.coeffs) if c]
        if self.constant or not terms:
            terms.append(str(self.constant))
        return " + ".join(terms)


@dataclass(frozen=True)
class AccessMap:
    """An affine map from the loop dims to the indices of one operand."""

    num_dims: int
    results: tuple[AffineExpr, ...]

    @staticmethod
    def identity(num_dims: int) -> AccessMap:
        return AccessMap(
            num_dims,
            tuple(AffineExpr(tuple(int(i == d) for i in range(num_dims))) for d in range(num_dims)),
        )

    def is_identity(self) -> bool:
        return len(self.results) == self.num_dims and all(
            e.single_dim() == d for d, e in enumerate(self.results)
        )

    def __str__(self) -> str:
        dims = ", ".join(f"d{i}" for i in range(self.num_dims))
        return f"({dims}) -> ({', '.join(str(e) for e in self.results)})"


# ---- payload expressions -------------------------------------------------

@dataclass(frozen=True)
class Arg:
    """Block argument: inputs 0..n-1, then the accumulator (index n)."""

    index: int


@dataclass(frozen=True)
class Const:
    value: int


@dataclass(frozen=True)
class Op:
    """Integer operation on int32 values: add, sub, mul, max, min."""

    name: str
    args: tuple[Expr, ...]


Expr = Arg | Const | Op
MAC_OPS = ("conv", "gemm", "matmul")  # kernels whose payload is acc + a * b
PAYLOAD_OPS = ("add", "sub", "mul", "max", "min")


# ---- requantization epilogues --------------------------------------------
# Each holds the model's own quantization parameters; `ming_py.numerics`
# derives the integer constants and is the one place rounding is defined.

@dataclass(eq=False)
class AccRequant:
    """int32 accumulator -> int8, as onnxruntime's QLinearConv/QGemm does.

    `bias` already folds the input zero-point correction; `x_scale * w_scale / y_scale`
    is the per-channel multiplier. `channel_dims` are the loop dims indexing them, outermost
    first: the output channel, or a grouped convolution's group and channel in its group (none: a
    single output).
    """

    bias: np.ndarray  # int32 [C]
    x_scale: np.float32
    w_scale: np.ndarray  # float32 [C] (or [1])
    y_scale: np.float32
    zero_point: int
    channel_dims: tuple[int, ...]
    qmin: int = -128
    qmax: int = 127

    @property
    def multipliers(self) -> np.ndarray:
        """float32 x_scale * w_scale / y_scale per output channel, in onnxruntime's order."""
        return np.broadcast_to(numerics.ort_conv_multiplier(self.x_scale, self.w_scale, self.y_scale),
                               self.bias.shape)


@dataclass(eq=False)
class AverageRequant:
    """Sum of the whole map's int8 values -> int8 average (GlobalAveragePool, and AveragePool whose window is
    the whole unpadded map, which onnxruntime runs as one): onnxruntime's exact global-average rule."""

    count: int
    x_scale: np.float32
    x_zero_point: int
    y_scale: np.float32
    zero_point: int
    qmin: int = -128
    qmax: int = 127


@dataclass(eq=False)
class AddRequant:
    """Two int8 inputs with their own scales -> int8 sum (Add), or difference a - b (Sub, `subtract`)."""

    a_scale: np.float32
    a_zero_point: int
    b_scale: np.float32
    b_zero_point: int
    y_scale: np.float32
    zero_point: int
    qmin: int = -128
    qmax: int = 127
    subtract: bool = False
    # the kernel onnxruntime runs (`frontends.ort_kernels`): QLinearAdd on "uint8" or "int8", or "float"
    kernel: str = "uint8"


@dataclass(eq=False)
class MulRequant:
    """Two int8 inputs with their own scales -> int8 product (Mul), as onnxruntime's QLinearMul computes it
    (`numerics.mul_requant`)."""

    a_scale: np.float32
    a_zero_point: int
    b_scale: np.float32
    b_zero_point: int
    y_scale: np.float32
    zero_point: int
    qmin: int = -128
    qmax: int = 127

    @property
    def multiplier(self) -> np.float32:
        return numerics.mul_multiplier(self.a_scale, self.b_scale, self.y_scale)


@dataclass(eq=False)
class Rescale:
    """One int8 input re-expressed in another scale (Concat inputs, requantize, Relu/Clip).

    A 256-entry table of onnxruntime's DequantizeLinear -> QuantizeLinear, then a
    clamp to [qmin, qmax] (the quantized Relu/Clip bounds).
    """

    x_scale: np.float32
    x_zero_point: int
    y_scale: np.float32
    zero_point: int
    qmin: int = -128
    qmax: int = 127


@dataclass(eq=False)
class LookupTable:
    """One int8 input mapped through 256-entry tables (an activation between DequantizeLinear and
    QuantizeLinear): y = table[group, x + 128], the group the index along `channel_dim` where the tables
    differ per channel (one table per channel), 0 where one table serves all."""

    table: np.ndarray  # int8 [groups, 256]
    channel_dim: int | None  # the loop dim indexing the groups (None: one group)
    function: str  # what the tables compute, for people (the model's op: Sigmoid, PRelu, ...)

    @property
    def groups(self) -> int:
        return self.table.shape[0]


@dataclass(eq=False)
class FixedPointRequant:
    """int32 accumulator -> int8 in TFLite's integer arithmetic (TOSA RESCALE, scale32): per channel
    y = sat(((acc + bias) * multiplier + round) >> shift) + zero_point), with TFLite's double rounding
    where `double_round` and shift > 31 (`numerics.fixed_point_requantize`). TFLite int8 models.
    `channel_dims` as in `AccRequant`."""

    bias: np.ndarray  # int32 [C], the input zero-point correction folded in
    multiplier: np.ndarray  # int32 [C], Q31
    shift: np.ndarray  # int [C], right shift (31 + TFLite's right shift)
    zero_point: int
    channel_dims: tuple[int, ...]
    double_round: bool = True
    qmin: int = -128
    qmax: int = 127
    # LiteRT's reference FULLY_CONNECTED rounds in float instead: sat(round_half_away(f32(f32(acc) *
    # f32(multiplier * 2^-shift))) + zero_point) (`numerics.requantize` with half_away)
    float32: bool = False
    narrow: bool = True  # by the narrow datapath where it is proved (False: the rule as written)

    @property
    def float_multipliers(self) -> np.ndarray:
        return (self.multiplier.astype(np.float64) * np.exp2(-self.shift.astype(np.float64))).astype(np.float32)


@dataclass(eq=False)
class FixedPointAdd:
    """Two int8 inputs -> int8 sum in TFLite's integer arithmetic (ADD): each input is scaled to int32 by a
    table of its 256 values (TOSA's RESCALEs of (x - zero point) << 20), the int32 sum is requantized as
    `FixedPointRequant` is (with `multiplier`, `shift`)."""

    a_table: np.ndarray  # int32 [256], index x + 128
    b_table: np.ndarray
    multiplier: int
    shift: int
    zero_point: int
    double_round: bool = True
    qmin: int = -128
    qmax: int = 127


@dataclass(eq=False)
class WindowAverage:
    """Window elements of int8 values -> int8 average as onnxruntime's AveragePool computes it (QLinearAveragePool,
    or DQ -> AveragePool -> Q in float where it fuses none): a float32 sum of the window's elements, then the
    divisor, the output scale and zero point in float32, all in `constants` (`numerics.window_average_constants`
    of the scales, zero points, onnxruntime's domain and the divisors, a row each). With `exclude_padding` (ONNX
    count_include_pad=0 with padding) a window's divisor is its count of unpadded elements; otherwise the one
    divisor is the window size `count`. `columns` 0 sums the window in row-major order; `columns` = the window's
    width sums each column down its rows, then the columns' sums left to right (`numerics.AVERAGE_BY_COLUMNS`)."""

    count: int
    constants: numerics.WindowAverageConstants
    exclude_padding: bool = False
    columns: int = 0


@dataclass(eq=False)
class FixedPointAverage:
    """Window sum of raw int8 values -> int8 average in TFLite's integer arithmetic (AVERAGE_POOL_2D): the
    sum over the window's valid (unpadded) elements, requantized by TOSA's reciprocal of their number,
    `multiplier[valid]` and `shift[valid]` (index 0 unused). With `domain` (a legacy uint8 model's average,
    `frontends.tflite_uint8`) the sum is that of the values plus `domain`, the model's own uint8 values, and the
    average less `domain`: the sum is never negative, so it rounds as LiteRT's uint8 kernel does."""

    multiplier: np.ndarray  # int32 [window size + 1]
    shift: np.ndarray  # int [window size + 1]
    zero_point: int
    double_round: bool = False
    qmin: int = -128
    qmax: int = 127
    domain: int = 0  # added to every valid element before the division (the zero point then less it)


@dataclass(eq=False)
class FixedPointMul:
    """Two int8 inputs -> int8 product in TFLite's integer arithmetic (MUL, LiteRT's reference
    `MulElementwise`): (a + a_offset) * (b + b_offset), the offsets the inputs' negated zero points, requantized
    as `FixedPointRequant` is (with `multiplier`, `shift`)."""

    a_offset: int
    b_offset: int
    multiplier: int
    shift: int
    zero_point: int
    double_round: bool = True
    qmin: int = -128
    qmax: int = 127
    narrow: bool = True  # by the narrow datapath where it is proved (False: the rule as written)


Epilogue = (AccRequant | AverageRequant | WindowAverage | AddRequant | MulRequant | Rescale | LookupTable
            | FixedPointRequant | FixedPointAdd | FixedPointAverage | FixedPointMul)


# ---- graph ---------------------------------------------------------------

@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str  # "i8" | "i32"


@dataclass(frozen=True)
class Operand:
    """A kernel input or output: a tensor (or constant) and its access map.

    With `padding`, the map addresses the tensor padded by `(low, high)` per
    tensor dim with `pad_value`; the padding is never materialised.
    """

    tensor: str
    map: AccessMap
    padding: tuple[tuple[int, int], ...] = ()
    pad_value: int = 0


@dataclass(eq=False)
class Kernel:
    name: str
    source: str  # the ONNX node it comes from
    dims: tuple[int, ...]
    iterators: tuple[str, ...]
    inputs: tuple[Operand, ...]
    output: Operand
    payload: Expr
    init: int | None  # accumulator start value; None for element-wise kernels
    epilogue: Epilogue | None = None
    # What the kernel computes, for people: one of MAC_OPS, "maxpool", "sumpool",
    # "add" (Add, Sub), "mul", "rescale", "table", "elementwise".
    op: str = ""

    @property
    def parallel_dims(self) -> tuple[int, ...]:
        return tuple(d for d, it in enumerate(self.iterators) if it == PARALLEL)

    @property
    def reduction_dims(self) -> tuple[int, ...]:
        return tuple(d for d, it in enumerate(self.iterators) if it == REDUCTION)


@dataclass(eq=False)
class Reshape:
    name: str
    source: str
    input: str
    output: str


@dataclass(eq=False)
class Concat:
    name: str
    source: str
    inputs: tuple[str, ...]
    output: str
    axis: int


@dataclass(eq=False)
class Upsample:
    """Nearest-neighbour upsampling by integer factors: output index x of axis a reads input index
    x // factors[a] (each value repeated factors[a] times along the axis; Resize mode=nearest)."""

    name: str
    source: str
    input: str
    output: str
    factors: tuple[int, ...]  # per tensor axis


@dataclass(eq=False)
class BilinearResize:
    """TFLite's int8 RESIZE_BILINEAR (reference_ops::ResizeBilinearInteger): output pixel (y, x) of a channel is
    the four input values at rows (y0, y1) = rows[y][:2] and columns (x0, x1) = cols[x][:2], each times its
    row weight and column weight in 1/1024 (rows[y][2:], cols[x][2:]), summed, plus 2^19 away from zero and
    divided by 2^20 toward zero. The weights of a row or column sum to 1024 (one may be negative where
    y0 = y1 at a border); a (C, H, W) map in, a (C, OH, OW) one out."""

    name: str
    source: str
    input: str
    output: str
    rows: tuple[tuple[int, int, int, int], ...]  # per output row: y0, y1, weight of y0, weight of y1
    cols: tuple[tuple[int, int, int, int], ...]  # per output column: x0, x1, weight of x0, weight of x1


@dataclass(eq=False)
class DepthToSpace:
    """Blocks of channels moved into pixels (TFLite's DEPTH_TO_SPACE, ONNX DepthToSpace in DCR mode; a
    transposed convolution's phases): channel (dy * block + dx) * C + c of input pixel (y, x) is channel c of
    output pixel (y * block + dy, x * block + dx). A (block^2 C, H, W) map in, a (C, block H, block W) one out."""

    name: str
    source: str
    input: str
    output: str
    block: int


@dataclass(eq=False)
class Pad:
    """A constant border: `padding` (low, high) per tensor axis, filled with the int8 `value` (a
    standalone Pad that no window consumer absorbs)."""

    name: str
    source: str
    input: str
    output: str
    padding: tuple[tuple[int, int], ...]
    value: int


@dataclass(eq=False)
class Slice:
    """The channels [start, start + size) of a (C, ...) tensor: one piece of an ONNX Split or Slice."""

    name: str
    source: str
    input: str
    output: str
    start: int


@dataclass(eq=False)
class Permute:
    """The channels of a (C, ...) tensor reordered: output channel c is input channel `order[c]` (ShuffleNet's
    channel shuffle, Reshape -> Transpose -> Reshape)."""

    name: str
    source: str
    input: str
    output: str
    order: tuple[int, ...]


Node = Kernel | Reshape | Concat | Upsample | BilinearResize | DepthToSpace | Pad | Slice | Permute


def node_inputs(node: Node) -> tuple[str, ...]:
    """The tensors (and constants) a node reads."""
    if isinstance(node, Kernel):
        return tuple(o.tensor for o in node.inputs)
    return tuple(node.inputs) if isinstance(node, Concat) else (node.input,)


@dataclass(frozen=True)
class GraphInput:
    """A model input: float32 quantized on entry, q = sat(rne(x / scale) + zero_point), int8 as it is, or uint8
    shifted by -128 (the frontend shifted the model's uint8 tensors to int8 alike).

    `host_ops` (empty: none) are the model's own steps right after its input that the host runs, in order, on
    the int8 values of the model's array (`scale` and `zero_point` are theirs): TFLite's QUANTIZE of integers
    ("tflite_requantize"), a DEQUANTIZE and QUANTIZE pair ("dequantize", "tflite_quantize"), RESHAPE and
    TRANSPOSE ("reshape", "transpose"). `permutation` (empty: none) then takes
    the array to the graph tensor's layout: a Transpose right after the input (NHWC models) is a host
    reordering, not hardware (`ming_host.accelerator_input`).
    """

    name: str  # the model's input name
    tensor: str  # int8 graph tensor
    onnx_shape: tuple[int, ...]  # the model's input shape
    scale: float
    zero_point: int
    dtype: str = "float32"  # the model's input type: "float32", "int8" or "uint8"
    permutation: tuple[int, ...] = ()
    quantizer: str = "onnxruntime"  # whose rounding quantizes a float input: "onnxruntime" or "tflite"
    host_ops: tuple[HostOp, ...] = ()


@dataclass(frozen=True)
class GraphOutput:
    """An int8 tensor leaving the accelerator: run through `host_ops` (`ming_host.host_tail`: TFLite's Softmax and
    QUANTIZE of integers, the model's RESHAPE and TRANSPOSE, dequantization and float steps), or int8 as it is
    (uint8: shifted by +128).

    The model's output is the tensor's values with their axes permuted back (see `GraphInput`).
    """

    name: str  # the model's output name
    tensor: str
    onnx_shape: tuple[int, ...]  # the model's output shape
    scale: float
    zero_point: int
    host_ops: tuple[HostOp, ...] = ()
    dtype: str = "float32"  # the model's output type: "float32", "int8" or "uint8"
    permutation: tuple[int, ...] = ()


@dataclass(eq=False)
class Graph:
    name: str
    inputs: list[GraphInput] = field(default_factory=list)
    outputs: list[GraphOutput] = field(default_factory=list)
    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the frontend assumed (a symbolic batch fixed to 1)

    def kernels(self) -> list[Kernel]:
        return [n for n in self.nodes if isinstance(n, Kernel)]

    def shape_of(self, name: str) -> tuple[int, ...]:
        if name in self.constants:
            return tuple(self.constants[name].shape)
        return self.tensors[name].shape

