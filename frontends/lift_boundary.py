"""The lifter's operations at the model's boundary: constants, the model's inputs and outputs, and the host
tail (a Softmax after the last quantization of an output)."""

from __future__ import annotations

from ming_py.errors import MingError
from ming_py.ir import GraphInput, GraphOutput, HostOp

from .lift_values import Fill, FloatInput, FloatValue, HostValue, IntTensor, is_plain_dequant
from .mlir_attrs import constant_value, element_type, tensor_shape


class BoundaryMixin:
    """Of `lift.Lifter`: constants, `hal.tensor.import`/`export` (the model's ports) and `linalg.softmax`."""

    # ---- simple ops ----

    def _op_arith_constant(self, op, where):
        self.values[op.results[0]] = constant_value(op.attributes["value"], op.results[0].type)

    def _op_util_global_load(self, op, where):
        self.values[op.results[0]] = self.globals[str(op.attributes["global"]).lstrip("@").strip('"')]

    def _op_linalg_fill(self, op, where):
        value = self._get(op.operands[0], where)
        self.values[op.results[0]] = Fill(float(value))

    # ---- the model's inputs and outputs ----

    def _op_hal_tensor_import(self, op, where):
        port = self.inputs[self.imported]
        self.imported += 1
        shape = tensor_shape(op.results[0])
        dtype = element_type(op.results[0])
        if dtype == "f32":
            self.values[op.results[0]] = FloatInput(port.name, shape)
        elif dtype == "i8":  # the model takes int8 (or uint8) values: no quantization on the host
            tensor = self.builder.new_tensor(port.name, shape, "i8")
            self.graph.inputs.append(GraphInput(port.name, tensor, port.shape, 1.0, 0, port.integer_dtype,
                                                port.permutation))
            self.values[op.results[0]] = IntTensor(tensor)
        else:
            raise MingError(f"input '{port.name}' is {dtype}; ming takes float32, int8 or uint8 model inputs")

    def _op_hal_tensor_export(self, op, where):
        value = self._get(op.operands[0], where)
        port = self.outputs[len(self.graph.outputs)]
        name, shape, permutation = port.name, port.shape, port.permutation
        if isinstance(value, HostValue):
            quantized = [op.kind for op in value.ops if op.kind != "reshape"][-1] == "quantize"
            out = GraphOutput(name, value.tensor, shape, value.scale, value.zero_point, value.ops,
                              port.integer_dtype if quantized else "float32", permutation)
        elif isinstance(value, FloatValue) and len(value.terms) == 1 and is_plain_dequant(value):
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

    # ---- softmax: host tail ----

    def _op_linalg_softmax(self, op, where):
        source = self._get(op.operands[0], where)
        if not (isinstance(source, FloatValue) and len(source.terms) == 1 and is_plain_dequant(source)):
            raise MingError(f"{where}: Softmax must consume a dequantized int8 tensor")
        term = source.terms[0]
        axis = int(op.attributes["dimension"].value)
        self.values[op.results[0]] = HostValue(term.tensor, float(term.factors[0]), int(term.offset),
                                               (HostOp("softmax", axis=axis),))
