"""What a frontend knows about the model beyond IREE's MLIR, handed to the lifter (`lift.Lifter`).

IREE keeps little of the model: each op's location (the model's node name) and the arithmetic. A frontend
reads the model itself for the rest: the model's ports as the model declares them (`ModelPort`), and
`FrontendFacts`, which the ONNX frontend fills (node types, tables, resizes, weights, transposes) and the
TFLite frontend fills in part (node types, notes and the tables of its element-wise ops).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .onnx_tables import NodeTable
    from .ort_kernels import FloatAverage


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


@dataclass(frozen=True)
class FrontendFacts:
    """The frontend's facts about the model, each keyed by the model's node name (which IREE keeps as the
    location of the ops it lowers the node to). A field the frontend does not know stays empty."""

    # model node name -> its op type (ONNX's op_type; TFLite's builtin operator, by its output tensor's name),
    # to name kernels for people, to tell a convolution from a matmul and to word errors
    op_types: dict[str, str] = field(default_factory=dict)
    # what the frontend assumed on the way in (a symbolic batch fixed to 1): the graph's notes for reports
    notes: tuple[str, ...] = ()
    # model node name -> its element-wise function of int8 values (`onnx_tables`, `tflite_tables`): the lifter
    # looks the node's input up in the table instead of interpreting its generics
    tables: dict[str, NodeTable] = field(default_factory=dict)
    # nearest Resize node name -> its integer factor per axis (`onnx_geometry`): IREE's generic computes
    # indices, which the lifter does not interpret
    resizes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # model node name -> its int8 weights (a Conv's, behind their DequantizeLinear): IREE hands a grouped
    # convolution over in float, its weights dequantized
    weights: dict[str, QuantizedWeights] = field(default_factory=dict)
    # (de)quantization node -> the Transpose it wraps, whose transposition IREE hands over in its name
    transposes: dict[str, str] = field(default_factory=dict)
    # Add or AveragePool node name (and that of a Relu fused after an Add) -> the kernel onnxruntime runs for it
    # (`frontends.ort_kernels`: "uint8" or "int8" QLinearAdd, or "float")
    qlinear_kernels: dict[str, str] = field(default_factory=dict)
    # AveragePool node name -> how onnxruntime's float32 kernel averages its windows where it runs the pool in
    # float (`frontends.ort_kernels.float_averages`: the order of the sum, the divisor)
    float_averages: dict[str, FloatAverage] = field(default_factory=dict)
    # the model's maps are H x W x C (TFLite's NHWC; `layout.channels_first` moves them after lifting): a
    # channel slice or shuffle runs along the last axis
    channels_last: bool = False
