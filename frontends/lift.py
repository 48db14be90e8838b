"""Lift IREE's linalg-on-tensors module into ming's integer graph IR.

The lifter (`Lifter`) walks the entry function of IREE's module op by op, gives each SSA value a symbolic
value (`lift_values`, which explains the symbolic interpretation of IREE's float code) and builds the graph
(`graph_builder`). Its parts, by concern, are mixins it composes:

    lift_boundary  constants, the model's inputs and outputs, the host tail
    lift_shapes    padding, reshapes, slices, transpositions
    lift_quantize  (de)quantization and integer legalization (epilogues, Add, Mul, Rescale, tables, Concat)
    lift_generic   linalg.generic analysis and integer kernels
    lift_float     float bodies, float pooling and float convolutions
    lift_tosa      TOSA's integer element-wise chains (TFLite models)

What the frontend knows beyond the MLIR comes in as `facts.FrontendFacts`.
"""

from __future__ import annotations

import numpy as np
from iree.compiler import ir

from ming_py.errors import MingError
from ming_py.ir import Graph

from .facts import FrontendFacts, ModelPort
from .graph_builder import GraphBuilder
from .lift_boundary import BoundaryMixin
from .lift_float import FloatMixin
from .lift_generic import GenericMixin
from .lift_quantize import QuantizeMixin
from .lift_shapes import ShapeMixin
from .lift_tosa import TosaMixin
from .lift_values import Empty, FloatPieces, IntChain, IntTensor, Mapped, Padded
from .mlir_attrs import constant_value, location_name, tensor_shape

_PASS_THROUGH = {"iree_tensor_ext.compute_barrier.start", "iree_tensor_ext.compute_barrier.end",
                 "hal.tensor.barrier"}


class Lifter(BoundaryMixin, ShapeMixin, QuantizeMixin, GenericMixin, FloatMixin, TosaMixin):
    """IREE's module -> ming's `Graph` (`run`): walks the entry function, hands each op to the part that reads
    it (`HANDLERS`), and holds what the parts share: every SSA value's symbolic value (`values`), the graph
    being built (`builder`, `graph`) and the frontend's facts (`facts`)."""

    def __init__(self, graph_name: str, inputs: list[ModelPort], outputs: list[ModelPort], facts: FrontendFacts):
        self.builder = GraphBuilder(graph_name, facts.notes)
        self.facts = facts
        self.inputs = inputs
        self.outputs = outputs
        self.values: dict[ir.Value, object] = {}
        self.globals: dict[str, np.ndarray] = {}
        self.quantization: dict[str, tuple[float, int]] = {}  # int8 tensor -> the (scale, zero point) it was given
        self.imported = 0  # model inputs imported so far
        self.last_node = ""  # the name of the last operation's node that had one (`_where`)
        self.block_views: set[str] = set()  # a DepthToSpace's output in IREE's shape of its blocks (not a map)
        self.sum_offsets: dict[str, int] = {}  # window sums of raw int8 values -> what the model's sum adds
        # multiply-accumulate sums of x * w -> what the model's sums of (x - zero point) * w add, per output
        # element (`GenericMixin._without_zero_points`), until the requantization takes it into its bias
        self.mac_offsets: dict[str, np.ndarray] = {}

    @property
    def graph(self) -> Graph:
        """The graph being built (the builder's)."""
        return self.builder.graph

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
        self.builder.drop_unused()
        for tensor in self.mac_offsets:
            if tensor in self.graph.tensors:
                raise MingError(f"layer {self.builder.producer(tensor).source}: its sums, taken without the input's "
                                "zero point, are read other than by its requantization; not supported")
        return self.graph

    def _visit(self, op: ir.Operation) -> None:
        name = op.name
        where = self._where(op)
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

    def _where(self, op: ir.Operation) -> str:
        """The model's node an operation comes from, for messages: by its name and op type (else IREE's
        operation); an operation IREE made without a node's name, by the nearest node before it."""
        node = location_name(op)
        if node == "?":
            return f"IREE's {op.name} after node '{self.last_node}'" if self.last_node else f"IREE's {op.name}"
        self.last_node = node
        return f"node '{node}' ({self.facts.op_types.get(node, op.name)})"

    def _get(self, value: ir.Value, where: str, padded: bool = False) -> object:
        """The symbolic value of an operand; a padded tensor stays `Padded` only for a consumer that takes
        the padding into its window (`padded`), others read the padded map of a `Pad` node."""
        if value not in self.values:
            raise MingError(f"{where}: operand produced by an unsupported operation")
        if isinstance(self.values[value], IntChain):
            self.values[value] = self._materialize(self.values[value], where)
        if isinstance(self.values[value], Mapped) and self.values[value].dtype != "f32":  # TFLite's table node
            self.values[value] = self._tflite_lookup(self.values[value], where)
        if isinstance(self.values[value], Padded) and not padded:
            self.values[value] = self._pad_node(self.values[value], where)
        held = self.values[value]
        if isinstance(held, FloatPieces) and all(isinstance(piece, IntTensor) for _, _, piece in held.pieces):
            self.values[value] = self._concat(held, held.origin, where, lambda piece: piece.name)  # TFLite's
        return self.values[value]

    # The MLIR operations the lifter reads, by name; `_visit` refuses any other (after the pass-through ones).
    HANDLERS = {
        "arith.constant": BoundaryMixin._op_arith_constant,
        "util.global.load": BoundaryMixin._op_util_global_load,
        "hal.tensor.import": BoundaryMixin._op_hal_tensor_import,
        "hal.tensor.export": BoundaryMixin._op_hal_tensor_export,
        "linalg.fill": BoundaryMixin._op_linalg_fill,
        "linalg.generic": GenericMixin._op_linalg_generic,
        "linalg.softmax": BoundaryMixin._op_linalg_softmax,
        "tensor.pad": ShapeMixin._op_tensor_pad,
        "tensor.collapse_shape": ShapeMixin._reshape,
        "tensor.expand_shape": ShapeMixin._reshape,
        "tensor.extract_slice": ShapeMixin._op_tensor_extract_slice,
        "tensor.insert_slice": ShapeMixin._op_tensor_insert_slice,
        "iree_linalg_ext.dequantize_affine": QuantizeMixin._op_iree_linalg_ext_dequantize_affine,
        "iree_linalg_ext.quantize_affine": QuantizeMixin._op_iree_linalg_ext_quantize_affine,
    }
