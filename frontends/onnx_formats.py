"""The quantized ONNX forms ming reads besides int8 QDQ, rewritten into int8 QDQ before IREE, exactly.

* QOperator (`quantize_static(quant_format=QOperator)`, older int8 exports): every quantized operator
  becomes DequantizeLinear(s) -> the float operator -> QuantizeLinear with the same scales and zero points,
  which onnxruntime fuses back into the same QLinear kernels (tests/test_formats.py compares the two op by
  op). A plain operator that reads quantized values directly (MaxPool, Flatten, ...) gets a
  DequantizeLinear in front and a QuantizeLinear with the same parameters behind, the identity on the
  integers for data movement and maxima; at the model's inputs and outputs it stays as it is (a Transpose
  there is a host permutation, `onnx_model`).
* uint8: a uint8 tensor q with zero point z holds the values of the int8 tensor q - 128 with zero point
  z - 128 and the same scale (DequantizeLinear gives the same floats, QuantizeLinear the same integers
  shifted, saturation included). Every uint8 constant is shifted; a uint8 model input or output becomes an
  int8 one whose values the host shifts (`contract/ming_host.py`).
* Weight zero points: weights w with zero point z (uint8 weights have one after the shift) multiply as
  w - z. Where w - z fits int8 the weights become w - z with zero point 0, the form ming's int8 multipliers
  take; elsewhere the model is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
import onnx.version_converter
from onnx import TensorProto, helper, numpy_helper

from ming_py.errors import MingError

QDQ = ("QuantizeLinear", "DequantizeLinear")

# Operators whose integer form equals DequantizeLinear -> operator -> QuantizeLinear with the input's
# scale and zero point: they move values or take maxima, which commute with a monotonic dequantization.
PASS_THROUGH = frozenset({"MaxPool", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Resize",
                          "Pad", "Split", "Slice"})

# QOperator op -> its float op; the quantized operands are (tensor, scale, zero point) triples at
# `_OPERANDS` (default: one at 0), the output's scale and zero point at `_OUTPUT` (default: 3, 4).
FLOAT_OPS = {
    "QLinearConv": "Conv", "QLinearMatMul": "MatMul", "QGemm": "Gemm", "QLinearAdd": "Add", "QLinearMul": "Mul",
    "QLinearConcat": "Concat", "QLinearAveragePool": "AveragePool",
    "QLinearGlobalAveragePool": "GlobalAveragePool", "QLinearSigmoid": "Sigmoid",
    "QLinearLeakyRelu": "LeakyRelu", "QLinearSoftmax": "Softmax",
}
_OPERANDS = {"QLinearConv": (0, 3), "QLinearMatMul": (0, 3), "QGemm": (0, 3), "QLinearAdd": (0, 3),
             "QLinearMul": (0, 3)}
_OUTPUT = {"QLinearConv": 6, "QLinearMatMul": 6, "QGemm": 7, "QLinearAdd": 6, "QLinearMul": 6, "QLinearConcat": 0}
_BIAS = {"QLinearConv": 8, "QGemm": 6}
# attributes of the quantized op that its float op does not have (checked before they are dropped)
_QUANTIZED_ONLY_ATTRIBUTES = {"alpha", "channels_last", "opset"}
_INTEGER_RESULTS = {"ConvInteger", "MatMulInteger", "DynamicQuantizeLinear"}
_WEIGHT_READERS = frozenset({"Conv", "Gemm", "MatMul"})  # their input 1 is the weights


@dataclass(frozen=True)
class ModelTypes:
    """The model's inputs and outputs that were uint8: int8 after the rewrite, their values shifted on the host."""

    uint8_inputs: frozenset[str]
    uint8_outputs: frozenset[str]

    def input_dtype(self, name: str) -> str:
        return "uint8" if name in self.uint8_inputs else "int8"

    def output_dtype(self, name: str) -> str:
        return "uint8" if name in self.uint8_outputs else "int8"


def to_int8_qdq(model: onnx.ModelProto) -> ModelTypes:
    """Rewrite a QOperator, uint8 or mixed model in place into int8 QDQ with weight zero points 0."""
    qoperator_to_qdq(model)
    types = uint8_to_int8(model)
    center_weights(model)
    return types


# ---- constants ---------------------------------------------------------------------------------


def _constants(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    """Initializers and the tensors of Constant nodes, by name."""
    tensors = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            tensors[node.output[0]] = node.attribute[0].t
    return tensors


def _input(node: onnx.NodeProto, position: int) -> str:
    """The node's input at `position`, '' where it is absent."""
    return node.input[position] if position < len(node.input) else ""


def _attributes(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _label(node: onnx.NodeProto) -> str:
    op = f"{node.domain}.{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type
    return f"node '{node.name}' ({op})"


class FreshNames:
    """Node and tensor names not yet in the graph."""

    def __init__(self, graph: onnx.GraphProto):
        self.taken = {n.name for n in graph.node} | {t for n in graph.node for t in (*n.input, *n.output)} | \
            {t.name for t in graph.initializer} | {v.name for v in (*graph.input, *graph.output)}

    def fresh(self, base: str) -> str:
        name, i = base, 2
        while name in self.taken:
            name, i = f"{base}_{i}", i + 1
        self.taken.add(name)
        return name


# ---- QOperator -> QDQ ----------------------------------------------------------------------------


def qoperator_to_qdq(model: onnx.ModelProto) -> None:
    """Rewrite every quantized operator of the model in place into DequantizeLinear -> float op ->
    QuantizeLinear (see the module's docstring)."""
    _QdqWriter(model).run()


class _QdqWriter:
    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self.graph = model.graph
        self.constants = _constants(model.graph)
        self.names = FreshNames(model.graph)
        self.nodes: list[onnx.NodeProto] = []
        self.params: dict[str, tuple[str, str]] = {}  # quantized activation -> (scale, zero point)
        self.dequantized: dict[tuple[str, str, str], str] = {}  # (tensor, scale, zero point) -> float tensor
        self._note_integer_inputs()

    def run(self) -> None:
        if not any(n.op_type in FLOAT_OPS or n.op_type in _INTEGER_RESULTS for n in self.graph.node):
            return  # QDQ already
        for node in self.graph.node:
            self._visit(node)
        del self.graph.node[:]
        self.graph.node.extend(self.nodes)
        del self.graph.value_info[:]  # integer types of rewritten tensors are float now; inferred again
        self._raise_opset()

    def _note_integer_inputs(self) -> None:
        """A model input of quantized values takes its scale and zero point from the op that reads it."""
        inputs = {v.name for v in self.graph.input} - set(self.constants)
        for node in self.graph.node:
            if node.op_type == "DequantizeLinear":
                triples = [(node.input[0], _input(node, 1), _input(node, 2))]
            else:
                triples = _operands(node) if node.op_type in FLOAT_OPS else []
            for tensor, scale, zero_point in triples:
                if tensor in inputs:
                    self.params.setdefault(tensor, (scale, zero_point))

    def _visit(self, node: onnx.NodeProto) -> None:
        if node.op_type in _INTEGER_RESULTS:
            raise MingError(f"{_label(node)} computes with dynamically quantized integers; ming compiles statically "
                            "quantized models: quantize with onnxruntime.quantization.quantize_static")
        if node.op_type in FLOAT_OPS and node.domain in ("", "ai.onnx", "com.microsoft"):
            self._rewrite(node)
            return
        if node.op_type.startswith("QLinear"):
            raise MingError(f"{_label(node)} is not supported; ming takes these quantized operators: "
                            + ", ".join(sorted(FLOAT_OPS)))
        read = [t for t in node.input if t in self.params]
        if node.op_type == "QuantizeLinear":
            self.params[node.output[0]] = (node.input[1], _input(node, 2))
        elif read and node.op_type in PASS_THROUGH and read == [node.input[0]]:
            for output in node.output:
                self.params[output] = self.params[node.input[0]]
            if not self._at_model_boundary(node):  # a Transpose there is a host permutation (onnx_model)
                self._pass_through(node)
                return
        elif read and node.op_type != "DequantizeLinear":
            raise MingError(f"{_label(node)} reads the quantized tensor '{read[0]}' directly; ming reads quantized "
                            "tensors through DequantizeLinear or onnxruntime's QLinear operators")
        self.nodes.append(node)

    def _at_model_boundary(self, node: onnx.NodeProto) -> bool:
        return node.input[0] in {v.name for v in self.graph.input} or \
            node.output[0] in {v.name for v in self.graph.output}

    def _pass_through(self, node: onnx.NodeProto) -> None:
        scale, zero_point = self.params[node.input[0]]
        rewritten = onnx.NodeProto()
        rewritten.CopyFrom(node)
        rewritten.input[0] = self._dequantize(node.input[0], scale, zero_point)
        if node.op_type == "Pad" and _input(node, 2):  # the quantized pad value
            rewritten.input[2] = self._dequantize(node.input[2], scale, zero_point)
        for i, output in enumerate(node.output):  # one for most, several for a Split
            rewritten.output[i] = self.names.fresh(f"{output}_float")
        self.nodes.append(rewritten)
        for float_output, output in zip(rewritten.output, node.output):
            self._quantize(float_output, scale, zero_point, output)

    def _rewrite(self, node: onnx.NodeProto) -> None:
        floats = [self._dequantize(t, s, z, self._weight_axis(node) if i == 1 else None)
                  for i, (t, s, z) in enumerate(_operands(node))]
        bias = _input(node, _BIAS.get(node.op_type, len(node.input)))
        if bias:
            floats.append(self._bias(node, bias))
        output = _input(node, _OUTPUT.get(node.op_type, 3))
        result = self.names.fresh(f"{node.output[0]}_float") if output else node.output[0]
        self.nodes.append(helper.make_node(FLOAT_OPS[node.op_type], floats, [result], name=node.name,
                                           **self._float_attributes(node)))
        if output:
            zero_point = _input(node, _OUTPUT.get(node.op_type, 3) + 1) or self._default_zero_point(node)
            self._quantize(result, output, zero_point, node.output[0])

    def _dequantize(self, tensor: str, scale: str, zero_point: str, axis: int | None = None) -> str:
        key = (tensor, scale, zero_point)
        if key not in self.dequantized:
            output = self.names.fresh(f"{tensor}_dequantized")
            inputs = [tensor, scale] + ([zero_point] if zero_point else [])
            attributes = {"axis": axis} if axis is not None else {}
            self.nodes.append(helper.make_node("DequantizeLinear", inputs, [output],
                                               name=self.names.fresh(f"{tensor}_DequantizeLinear"), **attributes))
            self.dequantized[key] = output
        return self.dequantized[key]

    def _quantize(self, tensor: str, scale: str, zero_point: str, output: str) -> None:
        inputs = [tensor, scale] + ([zero_point] if zero_point else [])
        self.nodes.append(helper.make_node("QuantizeLinear", inputs, [output],
                                           name=self.names.fresh(f"{output}_QuantizeLinear")))
        self.params[output] = (scale, zero_point)

    def _weight_axis(self, node: onnx.NodeProto) -> int | None:
        """The axis of the output channels in the weights (operand 1) where their scale is per channel."""
        _, scale, _ = _operands(node)[1]
        if node.op_type not in ("QLinearConv", "QLinearMatMul", "QGemm") or self._constant(node, scale).size == 1:
            return None
        if node.op_type == "QLinearConv":
            return 0
        if node.op_type == "QGemm":
            return 0 if _attributes(node).get("transB", 0) else 1
        weights = self.constants.get(node.input[3])
        if weights is None:
            raise MingError(f"{_label(node)} has a per-channel scale for a second operand that is not constant; "
                            "ming multiplies activations by constant weights")
        return len(weights.dims) - 1

    def _bias(self, node: onnx.NodeProto, bias: str) -> str:
        """The int32 bias, dequantized with scale input scale * weight scale (float32) and zero point 0."""
        (_, x_scale, _), (_, w_scale, _) = _operands(node)
        scale = (np.float32(self._constant(node, x_scale).reshape(())) *
                 self._constant(node, w_scale).astype(np.float32).reshape(-1)).astype(np.float32)
        if scale.size == 1:
            scale = scale.reshape(())
        scale_name = self.names.fresh(f"{bias}_scale")
        zero_name = self.names.fresh(f"{bias}_zero_point")
        self.graph.initializer.extend([numpy_helper.from_array(scale, scale_name),
                                       numpy_helper.from_array(np.zeros(scale.shape, np.int32), zero_name)])
        channels_axis = len(self.constants[bias].dims) - 1 if bias in self.constants else 0  # (C,), Gemm's (1, N)
        return self._dequantize(bias, scale_name, zero_name, channels_axis if scale.size > 1 else None)

    def _default_zero_point(self, node: onnx.NodeProto) -> str:
        """An explicit zero point 0 for an output whose zero point is left out, of the input's integer type
        (QuantizeLinear without one would write uint8)."""
        _, _, operand_zero_point = _operands(node)[0]
        dtype = self.constants[operand_zero_point].data_type if operand_zero_point in self.constants \
            else TensorProto.UINT8
        name = self.names.fresh(f"{node.output[0]}_zero_point")
        self.graph.initializer.append(helper.make_tensor(name, dtype, [], [0]))
        return name

    def _float_attributes(self, node: onnx.NodeProto) -> dict:
        attributes = _attributes(node)
        if node.op_type == "QGemm" and attributes.get("alpha", 1.0) != 1.0:
            raise MingError(f"{_label(node)} has alpha={attributes['alpha']}; ming compiles QGemm with alpha 1")
        if attributes.get("channels_last", 0):
            raise MingError(f"{_label(node)} has channels_last=1; ming compiles channels-first (NCHW) pooling")
        if node.op_type == "QLinearSoftmax" and attributes.get("opset", 13) < 13 and \
                attributes.get("axis", -1) not in (-1, self._rank(node.input[0]) - 1):
            raise MingError(f"{_label(node)} is a Softmax of opset {attributes['opset']} over axis "
                            f"{attributes.get('axis')} of the flattened tensor; ming takes a Softmax over the last "
                            "axis")
        if node.op_type == "QLinearLeakyRelu":
            return {"alpha": attributes.get("alpha", 0.01)}
        return {k: v for k, v in attributes.items() if k not in _QUANTIZED_ONLY_ATTRIBUTES}

    def _rank(self, tensor: str) -> int:
        known = {v.name: v for v in (*self.graph.value_info, *self.graph.input, *self.graph.output)}
        return len(known[tensor].type.tensor_type.shape.dim) if tensor in known else -1

    def _constant(self, node: onnx.NodeProto, name: str) -> np.ndarray:
        if name not in self.constants:
            raise MingError(f"{_label(node)} reads the scale '{name}', which is not a constant; ming needs constant "
                            "quantization parameters")
        return numpy_helper.to_array(self.constants[name])

    def _raise_opset(self) -> None:
        """Per-channel DequantizeLinear (axis) needs opset 13; older models are converted to it."""
        default = next((o for o in self.model.opset_import if o.domain in ("", "ai.onnx")), None)
        has_axis = any(a.name == "axis" for n in self.nodes if n.op_type in QDQ for a in n.attribute)
        if default is None or default.version >= 13 or not has_axis:
            return
        try:
            converted = onnx.version_converter.convert_version(self.model, 13)
        except Exception as exc:  # the converter raises several unrelated types
            raise MingError(f"model of opset {default.version}: per-channel quantization needs opset 13 and the "
                            f"conversion failed ({str(exc).strip().splitlines()[0][:100]}); re-export with "
                            "opset 13 or newer") from None
        self.model.CopyFrom(converted)


def _operands(node: onnx.NodeProto) -> list[tuple[str, str, str]]:
    """(tensor, scale, zero point) of every quantized value the QOperator node reads."""
    starts = range(2, len(node.input), 3) if node.op_type == "QLinearConcat" else _OPERANDS.get(node.op_type, (0,))
    return [(node.input[i], _input(node, i + 1), _input(node, i + 2)) for i in starts]


def producers_and_consumers(graph: onnx.GraphProto) -> tuple[dict[str, onnx.NodeProto],
                                                              dict[str, list[onnx.NodeProto]]]:
    """The node writing each tensor, and the nodes reading it (in graph order, a node once per input)."""
    producers = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    return producers, consumers


# ---- uint8 -> int8 --------------------------------------------------------------------------------


def uint8_to_int8(model: onnx.ModelProto) -> ModelTypes:
    """Shift every uint8 tensor of a QDQ model in place to int8 (see the module's docstring)."""
    graph = model.graph
    types = element_types(model)
    _explicit_zero_points(graph, types)
    constants = _constants(graph)
    for node in graph.node:
        for position, tensor in enumerate(node.input):
            if types.get(tensor) == TensorProto.UINT8:
                _check_shiftable(node, position, tensor, tensor in constants)
    for tensor in constants.values():
        if tensor.data_type == TensorProto.UINT8:
            values = numpy_helper.to_array(tensor).astype(np.int16) - 128
            tensor.CopyFrom(numpy_helper.from_array(values.astype(np.int8), tensor.name))
    inputs = [name for name in _retype(graph.input) if name not in constants]  # old models list initializers too
    shifted = ModelTypes(frozenset(inputs), frozenset(_retype(graph.output)))
    _retype(graph.value_info)
    return shifted


def element_types(model: onnx.ModelProto) -> dict[str, int]:
    """Every tensor's element type (TensorProto enum) that shape inference, the initializers and the Constant
    nodes give."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # an inconsistent model: ming's checks report it later in their own words
        inferred = model
    graph = inferred.graph
    types = {v.name: v.type.tensor_type.elem_type for v in (*graph.value_info, *graph.input, *graph.output)}
    types.update({name: t.data_type for name, t in _constants(graph).items()})
    return types


def _explicit_zero_points(graph: onnx.GraphProto, types: dict[str, int]) -> None:
    """Give the uint8 zero point 0 that QuantizeLinear and DequantizeLinear of uint8 assume when it is left out
    a name, so that shifting the constants shifts it too."""
    names = FreshNames(graph)
    for node in graph.node:
        if node.op_type not in QDQ:
            continue
        uint8 = node.op_type == "QuantizeLinear" or types.get(node.input[0]) == TensorProto.UINT8
        if not _input(node, 2) and uint8:
            name = names.fresh(f"{node.name or node.output[0]}_zero_point")
            graph.initializer.append(helper.make_tensor(name, TensorProto.UINT8, [], [0]))
            while len(node.input) < 2:
                node.input.append("")
            node.input.append(name)


def _check_shiftable(node: onnx.NodeProto, position: int, tensor: str, constant: bool) -> None:
    """uint8 values may be read where shifting them by -128 changes nothing but their representation."""
    if node.op_type == "DequantizeLinear" and position in (0, 2):
        return
    if node.op_type == "QuantizeLinear" and position == 2 and constant:
        return
    if node.op_type in PASS_THROUGH and position == 0:
        return
    raise MingError(f"{_label(node)} computes on the uint8 tensor '{tensor}'; ming reads uint8 tensors through "
                    "DequantizeLinear or onnxruntime's QLinear operators")


def _retype(values) -> list[str]:
    """Make the uint8 values int8; their names."""
    names = []
    for value in values:
        if value.type.tensor_type.elem_type == TensorProto.UINT8:
            value.type.tensor_type.elem_type = TensorProto.INT8
            names.append(value.name)
    return names


# ---- weight zero points ---------------------------------------------------------------------------


def center_weights(model: onnx.ModelProto) -> None:
    """Weights with a nonzero zero point become w - zero point with zero point 0 (see the module's docstring)."""
    graph = model.graph
    constants = _constants(graph)
    readers = {(t, i): n for n in graph.node for i, t in enumerate(n.input)}
    names = FreshNames(graph)
    for node in graph.node:
        zero_point = _input(node, 2)
        if node.op_type != "DequantizeLinear" or node.input[0] not in constants or zero_point not in constants:
            continue
        reader = readers.get((node.output[0], 1))
        z = numpy_helper.to_array(constants[zero_point]).astype(np.int64)
        if reader is None or reader.op_type not in _WEIGHT_READERS or not z.any():
            continue
        w = numpy_helper.to_array(constants[node.input[0]]).astype(np.int64)
        axis = _attributes(node).get("axis", 1) % max(w.ndim, 1)
        centered = w - (z.reshape([-1 if a == axis else 1 for a in range(w.ndim)]) if z.size > 1 else z)
        if centered.min() < -128 or centered.max() > 127:
            raise MingError(f"{_label(reader)}: its weights '{node.input[0]}' minus their zero point span "
                            f"[{centered.min()}, {centered.max()}], beyond int8 (ming multiplies int8 weights); "
                            "quantize the weights symmetrically (weight_type=QuantType.QInt8)")
        weights, zeros = names.fresh(f"{node.input[0]}_centered"), names.fresh(f"{zero_point}_centered")
        graph.initializer.extend([numpy_helper.from_array(centered.astype(np.int8), weights),
                                  numpy_helper.from_array(np.zeros(z.shape, np.int8), zeros)])
        node.input[0], node.input[2] = weights, zeros
