"""Which kernel onnxruntime's default CPU session runs for each Add and AveragePool of a QDQ model, and which
QDQ Convs it leaves in float32 (`float_convs`), from the graph alone.

On x86 (`session.qdqisint8allowed` 0) onnxruntime first gives every consumer of a shared DequantizeLinear its
own copy (EnsureUniqueDQForNodeUnit), then rewrites an int8 QuantizeLinear -> DequantizeLinear pair to uint8
where the QuantizeLinear's output reaches exactly one consumer (QDQS8ToU8Transformer). A QDQ Add becomes
QLinearAdd only where its two inputs and its output then have one type: that type's kernel. Elsewhere (a
residual Add whose input has fan-out) it runs in float, DQ -> Add -> Q. AveragePool likewise becomes
QLinearAveragePool. Sub has no QLinear kernel; a QOperator QLinearAdd or QLinearAveragePool runs as it is written. docs/numerics.md §4.1; tests/test_eltwise.py checks this against the graph
onnxruntime optimizes.

An AveragePool left in float sums its windows in the order of the float32 kernel onnxruntime picks for it
(`float_averages`, docs/numerics.md §1.5).
"""

from __future__ import annotations

import pathlib
import platform
from dataclasses import dataclass

import onnx
from onnx import TensorProto

from ming_py.errors import MingError
from ming_py.numerics import AVERAGE_BY_COLUMNS, AVERAGE_BY_ROWS

from .onnx_formats import element_types, producers_and_consumers

FLOAT = "float"
_TYPES = {TensorProto.INT8: "int8", TensorProto.UINT8: "uint8"}


class _RewrittenTypes:
    """The element types of a QDQ model's quantized tensors once onnxruntime's x86 session has given every
    consumer of a shared DequantizeLinear its own copy and rewritten single-consumer int8 Q -> DQ pairs to uint8."""

    def __init__(self, model: onnx.ModelProto):
        graph = model.graph
        self.producers, self.consumers = producers_and_consumers(graph)
        self.outputs = {o.name for o in graph.output}
        self.types = element_types(model)

    def reach(self, tensor: str) -> int:
        """Consumers of `tensor` once every shared DequantizeLinear reading it is copied per consumer."""
        readers = self.consumers.get(tensor, [])
        if any(r.op_type != "DequantizeLinear" for r in readers) or tensor in self.outputs:
            return 2
        return sum(len(self.consumers.get(r.output[0], [])) + (r.output[0] in self.outputs) for r in readers)

    def dequantized(self, dequantize: onnx.NodeProto) -> str | None:
        """The type DequantizeLinear `dequantize` reads after the rewrite."""
        source = dequantize.input[0]
        kind = _TYPES.get(self.types.get(source))
        quantize = self.producers.get(source)
        if kind == "int8" and quantize is not None and quantize.op_type == "QuantizeLinear" \
                and self.reach(source) == 1:
            return "uint8"
        return kind

    def quantized(self, node: onnx.NodeProto, activations: tuple[str, ...] = ("Relu",)) -> str | None:
        """The type of the QuantizeLinear that alone reads `node`'s output (through one of `activations`, which
        onnxruntime folds into the QuantizeLinear's range) after the rewrite; None without one."""
        readers = self.consumers.get(node.output[0], [])
        if len(readers) == 1 and readers[0].op_type in activations:
            readers = self.consumers.get(readers[0].output[0], [])
        if len(readers) != 1 or readers[0].op_type != "QuantizeLinear":
            return None
        output = readers[0].output[0]
        kind = _TYPES.get(self.types.get(output))
        return "uint8" if kind == "int8" and self.reach(output) == 1 else kind

    def input_dequantized(self, node: onnx.NodeProto, at: int) -> str | None:
        """The type `node`'s input `at` is dequantized from after the rewrite; None where no DequantizeLinear
        produces it."""
        producer = self.producers.get(node.input[at]) if at < len(node.input) else None
        return self.dequantized(producer) if producer is not None and producer.op_type == "DequantizeLinear" \
            else None


def qlinear_kernels(model: onnx.ModelProto) -> dict[str, str]:
    """Per Add, AveragePool, QLinearAdd or QLinearAveragePool node name (and a Relu's right after an Add):
    "uint8" or "int8" (the QLinear kernel of that type) or "float"."""
    rewritten = _RewrittenTypes(model)
    kernels = {}
    for node in model.graph.node:
        if node.op_type in ("QLinearAdd", "QLinearAveragePool"):
            kernels[node.name] = _TYPES.get(rewritten.types.get(node.output[0]), FLOAT)
        elif node.op_type in ("Add", "AveragePool"):
            inputs = [rewritten.producers.get(name) for name in node.input]
            if any(p is None or p.op_type != "DequantizeLinear" for p in inputs):
                kernels[node.name] = FLOAT
                continue
            found = {rewritten.dequantized(p) for p in inputs} | {rewritten.quantized(node)}
            kernels[node.name] = found.pop() if len(found) == 1 and None not in found else FLOAT
            for reader in rewritten.consumers.get(node.output[0], []):  # IREE may name the sum after a Relu it fuses
                if reader.op_type == "Relu":
                    kernels[reader.name] = kernels[node.name]
    return kernels


def float_convs(model: onnx.ModelProto) -> list[str]:
    """The QDQ Convs (DequantizeLinear input and weights, one QuantizeLinear after, through a Relu or Clip) that
    onnxruntime's default x86 session runs in float32, DQ -> Conv -> Q, in the model's order.

    ConvNodeGroupSelector (onnxruntime/core/optimizer/qdq_transformer/selectors_actions/qdq_selectors.cc) makes a
    QLinearConv only where the input's and the output's types agree after the S8->U8 rewrite (`_RewrittenTypes`),
    and takes int8 activations only with `session.qdqisint8allowed` (0 on x86). A Conv whose quantized input or
    output has several consumers keeps an int8 Q -> DQ pair beside uint8 neighbours and runs in float: MLAS's
    float32 convolution sums the dequantized products in its own order and QuantizeLinear rounds that sum, which
    differs from the exact integer accumulation ming (and QLinearConv) requantizes where the exact value lies
    within the float sum's rounding error of a rounding boundary (docs/numerics.md §4.1)."""
    rewritten = _RewrittenTypes(model)
    found = []
    for node in model.graph.node:
        if node.op_type != "Conv" or rewritten.input_dequantized(node, 0) is None \
                or rewritten.input_dequantized(node, 1) is None:
            continue
        source, target = rewritten.input_dequantized(node, 0), rewritten.quantized(node, ("Relu", "Clip"))
        if target is None:
            continue
        if source != target or source != "uint8":
            found.append(node.name)
    return found


def float_conv_notes(model: onnx.ModelProto) -> list[str]:
    """One note where onnxruntime runs QDQ Convs of `model` in float32 (`float_convs`): ming computes them as
    QLinearConv does, so onnxruntime's results differ where a float32 sum rounds across a half step."""
    found = float_convs(model)
    if not found:
        return []
    convs = sum(node.op_type == "Conv" for node in model.graph.node)
    named = ", ".join(f"'{name}'" for name in found[:3]) + (", ..." if len(found) > 3 else "")
    return [f"onnxruntime's default x86 session runs {len(found)} of the {convs} Convs ({named}) in float32, not as "
            "QLinearConv (an int8 tensor they read or write feeds several nodes, so its QDQ group is not fused); "
            "ming computes them exactly in integers as QLinearConv does, so onnxruntime's outputs may differ from "
            "ming reference by a step where a float32 sum rounds across a half (onnxruntime fuses them, and agrees, "
            "with session.qdqisint8allowed=1 or for a model quantized with uint8 activations)"]

# mlas/lib/pooling.cpp, MlasPool: the vector kernel takes strides of at most 2 along the width and kernel sides of
# at most 32, and holds a padded row in a reduction buffer of MLAS_POOL_REDUCTION_BUFFER_STACK (2,048) floats less
# MLAS_POOL_REDUCTION_BUFFER_PADDING (3)
MLAS_VECTOR_STRIDE = 2
MLAS_VECTOR_KERNEL = 32
MLAS_REDUCTION_BUFFER = 2048 - 3
FIRST_REFERENCE_AVERAGE_OPSET = 19  # AveragePool-19 runs providers/cpu/nn/pool_functors.h, not MLAS


@dataclass(frozen=True)
class FloatAverage:
    """How onnxruntime's float32 kernel averages the windows of an AveragePool it runs in float."""

    order: str  # numerics.AVERAGE_BY_COLUMNS or AVERAGE_BY_ROWS: the order it sums a window in
    # it divides each window by its unpadded elements although count_include_pad=1 (ceil_mode without pads:
    # pool_functors.h counts a window's elements inside the padded map, which is the map)
    divides_by_unpadded: bool = False


def float_averages(model: onnx.ModelProto, kernels: dict[str, str]) -> dict[str, FloatAverage]:
    """Per 2-D AveragePool that onnxruntime runs in float (`kernels`, `qlinear_kernels`' answer, says "float"):
    how its float32 kernel averages a window (`numerics.window_average_sum`)."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    shapes = _shapes(model)
    return {node.name: _float_average(node, opset, shapes.get(node.input[0]))
            for node in model.graph.node
            if node.op_type == "AveragePool" and kernels.get(node.name) == FLOAT
            and len(_ints(node, "kernel_shape")) == 2}


def _float_average(node: onnx.NodeProto, opset: int, shape: tuple[int, ...] | None) -> FloatAverage:
    """The kernel onnxruntime 1.32 runs for float AveragePool `node` (input `shape`, if known) on this machine:
    AveragePool-19 and later (AveragePoolV19, pool_functors.h), opset 7-18 with ceil_mode and count_include_pad
    (pool.cc sends them to the same loop, onnxruntime PR 29629), a pool the NchwcTransformer takes
    (nchwc_transformer.cc TransformPool: 4-D, channels a multiple of the NCHWc block; MlasNchwcPool) and MLAS's
    generic kernel sum by rows; MLAS's vector kernel (MlasPool2DVectorKernel) by columns."""
    ceil_includes_pads = bool(_int(node, "ceil_mode") and _int(node, "count_include_pad"))
    if ceil_includes_pads and not any(_pads(node)):  # the padded map is the map
        return FloatAverage(AVERAGE_BY_ROWS, divides_by_unpadded=True)
    if ceil_includes_pads and _overhangs(node, shape):
        raise MingError(f"node '{node.name}' (AveragePool, ceil_mode=1, count_include_pad=1, pads {_pads(node)}): "
                        "onnxruntime runs it in float (its int8 input feeds several nodes) and divides its last "
                        "windows by their elements inside the padded map, which ming does not reproduce; export the "
                        "pool with ceil_mode=0 or without pads")
    if opset >= FIRST_REFERENCE_AVERAGE_OPSET or ceil_includes_pads:
        return FloatAverage(AVERAGE_BY_ROWS)
    if shape is not None and len(shape) == 4 and shape[1] > 0 and shape[1] % nchwc_block_size() == 0:
        return FloatAverage(AVERAGE_BY_ROWS)
    return FloatAverage(AVERAGE_BY_COLUMNS if _mlas_vector_kernel(node, shape) else AVERAGE_BY_ROWS)


def _overhangs(node: onnx.NodeProto, shape: tuple[int, ...] | None) -> bool:
    """Whether ceil_mode gives pool `node` a window that runs past the padded map (onnxruntime's
    PoolAttributes::ComputeOutputSize: no window starts past the map and its leading pad)."""
    if shape is None or len(shape) != 4 or not all(shape[2:]):
        return True
    kernel, strides, pads = _ints(node, "kernel_shape"), _ints(node, "strides") or [1, 1], _pads(node)
    for axis in range(2):
        size, head, tail = shape[2 + axis], pads[axis], pads[2 + axis]
        padded = size + head + tail
        outputs = -(-(padded - kernel[axis]) // strides[axis]) + 1
        if (outputs - 1) * strides[axis] >= size + head:
            outputs -= 1
        if (outputs - 1) * strides[axis] + kernel[axis] > padded:
            return True
    return False


def _pads(node: onnx.NodeProto) -> list[int]:
    """The pool's pads (top, left, bottom, right); auto_pad SAME_* as at most kernel - 1 at the end."""
    kernel = _ints(node, "kernel_shape")
    if _attribute(node, "auto_pad", b"NOTSET") not in (b"NOTSET", b"VALID"):
        return [0, 0, kernel[0] - 1, kernel[1] - 1]
    return _ints(node, "pads") or [0, 0, 0, 0]


def _mlas_vector_kernel(node: onnx.NodeProto, shape: tuple[int, ...] | None) -> bool:
    """Whether MlasPool takes its vector kernel for 2-D pool `node` (mlas/lib/pooling.cpp): not a pool of the
    whole map (its global kernel), a stride of at most 2 along the width, no kernel side over 32, the padded
    width within the reduction buffer."""
    kernel, strides, pads = _ints(node, "kernel_shape"), _ints(node, "strides") or [1, 1], _pads(node)
    width = shape[3] if shape is not None and len(shape) == 4 else 0
    whole_map = shape is not None and list(shape[2:]) == kernel and strides == [1, 1] and not any(pads)
    return (not whole_map and strides[1] <= MLAS_VECTOR_STRIDE and max(kernel) <= MLAS_VECTOR_KERNEL
            and pads[1] + pads[3] + width <= MLAS_REDUCTION_BUFFER)


def nchwc_block_size() -> int:
    """MlasNchwcGetBlockSize() on this machine (mlas/lib/platform.cpp): on x86-64 16 with AVX512F, else 8; 1
    (onnxruntime registers no NchwcTransformer) on other machines, as ming's other onnxruntime rules assume
    x86-64."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return 1
    try:
        flags = pathlib.Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return 8
    return 16 if "avx512f" in flags else 8


def _shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape that shape inference gives (unknown dimensions as 0)."""
    try:
        graph = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # an inconsistent model: ming's checks report it later in their own words
        graph = model.graph
    return {v.name: tuple(d.dim_value for d in v.type.tensor_type.shape.dim)
            for v in (*graph.value_info, *graph.input, *graph.output) if v.type.tensor_type.HasField("shape")}


def _attribute(node: onnx.NodeProto, name: str, default):
    return next((onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == name), default)


def _ints(node: onnx.NodeProto, name: str) -> list[int]:
    return [int(v) for v in _attribute(node, name, [])]


def _int(node: onnx.NodeProto, name: str) -> int:
    return int(_attribute(node, name, 0))
