"""Integer legalization: the lifter's (de)quantizations, and the integer nodes a quantization makes of a
symbolic float value (the requantizing epilogue of the kernel producing it, an Add, a Mul, a Rescale, a
table lookup, a Concat)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ming_py import numerics
from ming_py.access import valid_window_counts
from ming_py.errors import MingError
from ming_py.ir import (
    MAC_OPS,
    PARALLEL,
    AccessMap,
    AccRequant,
    AddRequant,
    Arg,
    AverageRequant,
    Concat,
    FixedPointMul,
    GraphInput,
    HostOp,
    Kernel,
    LookupTable,
    MulRequant,
    Op,
    Operand,
    Rescale,
    WindowAverage,
)

from . import fixed_point
from .ort_kernels import FLOAT as FLOAT_KERNEL, FloatAverage
from .lift_shapes import transposition
from .lift_values import (
    FloatInput,
    FloatPieces,
    FloatProduct,
    FloatValue,
    HostValue,
    IntChain,
    IntProduct,
    IntTensor,
    Mapped,
    Padded,
    Term,
    is_plain_dequant,
)
from .mlir_attrs import access_map, element_type, location_name

BIAS_TOLERANCE_LSB = 2.0 ** -10  # what a bias rebuilt from float32 may move an output before rounding


class QuantizeMixin:
    """Of `lift.Lifter`: `iree_linalg_ext.dequantize_affine` and `quantize_affine`, and the integer nodes
    (`_quantize`) that legalize the float code between them."""

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
        axes = transposition(maps[0], maps[-1])
        if axes is None:
            raise MingError(f"{where}: access {maps[0]} -> {maps[-1]} is not a transposition")
        node = self.facts.transposes.get(location_name(op), location_name(op))
        return self._transposed(value, axes, node, f"node '{node}' (Transpose)")

    def _note_input_quantization(self, tensor: str, scale: float, zero_point: int) -> None:
        """An int8 model input's scale and zero point, for reports, from the first dequantization of it."""
        for i, graph_input in enumerate(self.graph.inputs):
            if graph_input.tensor == tensor and graph_input.dtype != "float32" and graph_input.scale == 1.0:
                self.graph.inputs[i] = replace(graph_input, scale=scale, zero_point=zero_point)

    def _quantize(self, source, scale, zero_point, node, where):
        node = getattr(source, "origin", "") or node
        if isinstance(source, FloatInput):
            tensor = self.builder.new_tensor(f"{source.name}_q", source.shape, "i8")
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
        if source.clamp is not None and not is_plain_dequant(replace(source, clamp=None)):
            source = self._drop_exact_clamp(source, scale, zero_point, where)
        if len(source.terms) == 2:
            return self._add(source, scale, zero_point, node, where)
        if len(source.terms) != 1:
            raise MingError(f"{where}: a sum of {len(source.terms)} tensors is not supported")
        term = source.terms[0]
        producer = self.builder.producer(term.tensor)
        if producer is not None and producer.op in MAC_OPS and producer.epilogue is None:
            return self._requantize_accumulator(producer, source, scale, zero_point, where)
        if producer is not None and producer.op == "sumpool" and producer.epilogue is None:
            return self._requantize_average(producer, source, scale, zero_point, where)
        if source.clamp is not None and is_plain_dequant(replace(source, clamp=None)):
            low, high = (numerics.ort_quantize_linear(np.float32(bound), scale, zero_point) for bound in source.clamp)
            return self._rescale(term, scale, zero_point, node, int(low), int(high))
        if is_plain_dequant(source):
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
            op = self.facts.op_types.get(value.origin, "Relu/Clip")
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
        self.builder.retype(kernel.output.tensor, "i8")
        return IntTensor(kernel.output.tensor)

    def _accumulator_reach(self, kernel: Kernel) -> float:
        """A bound on |sum of x * w| of a multiply-accumulate kernel over int8 inputs x."""
        weights = [self.graph.constants[o.tensor] for o in kernel.inputs if o.tensor in self.graph.constants]
        largest = max((int(np.abs(w.astype(np.int64)).max()) for w in weights if w.size), default=128)
        return 128.0 * largest * int(np.prod([kernel.dims[d] for d in kernel.reduction_dims]))

    def _requantize_average(self, kernel: Kernel, value: FloatValue, scale, zero_point, where):
        term = value.terms[0]
        window = int(np.prod([kernel.dims[d] for d in kernel.reduction_dims]))
        valid = valid_window_counts(kernel, self.graph.shape_of(kernel.inputs[0].tensor))
        valid = np.transpose(valid, [kernel.parallel_dims.index(e.single_dim()) for e in kernel.output.map.results])
        divisor = np.broadcast_to(term.divisor, valid.shape)
        if self._float_average(kernel).divides_by_unpadded:
            divisor = valid
        exclude_padding = not np.all(divisor == window)  # ONNX count_include_pad=0 with effective padding
        if exclude_padding and not np.array_equal(divisor, valid):
            raise MingError(f"{where}: average pooling divisor is neither the window size nor the valid count")
        if len(term.factors) != 1 or np.ndim(term.offset) or value.bias.any():
            raise MingError(f"{where}: unsupported average pooling form")
        input_shape = self.graph.shape_of(kernel.inputs[0].tensor)
        channels = kernel.dims[kernel.parallel_dims[0]]
        global_pool = not kernel.inputs[0].padding and window * channels == int(np.prod(input_shape))
        x_scale, x_zero_point = np.float32(term.factors[0]), int(term.offset) // window
        if global_pool:
            kernel.epilogue = AverageRequant(count=window, x_scale=x_scale, x_zero_point=x_zero_point,
                                             y_scale=np.float32(scale), zero_point=zero_point)
        else:
            kernel.epilogue = self._window_average(kernel, window, x_scale, x_zero_point, scale, zero_point,
                                                   divisor if exclude_padding else None, where)
        self.builder.retype(kernel.output.tensor, "i8")
        return IntTensor(kernel.output.tensor)

    def _window_average(self, kernel: Kernel, window: int, x_scale, x_zero_point, scale, zero_point, valid, where):
        """onnxruntime's AveragePool over windows of `window` elements (`WindowAverage`): QLinearAveragePool in
        the kernel's domain, or the float kernel where onnxruntime fuses none; `valid`: the divisor by output
        position where padding is left out of it."""
        divisors = (window,) if valid is None else tuple(sorted({int(v) for v in np.unique(valid)}))
        constants = numerics.window_average_constants(x_scale, x_zero_point, np.float32(scale), zero_point, window,
                                                      divisors, domain_offset=self._average_domain(kernel, zero_point))
        if constants is None:
            raise MingError(f"{where}: average pooling from scale {float(x_scale):.6g} to {float(scale):.6g} "
                            "is not supported (an output scale finer than a quarter of the input's over the "
                            "window); requantize the pool's output to a coarser scale")
        by_columns = self._float_average(kernel).order == numerics.AVERAGE_BY_COLUMNS
        return WindowAverage(count=window, constants=constants, exclude_padding=valid is not None,
                             columns=_window_width(kernel, where) if by_columns else 0)

    def _float_average(self, kernel: Kernel) -> FloatAverage:
        """How onnxruntime averages the windows of average pool `kernel`: its float kernel's way where it runs the
        pool in float, QLinearAveragePool's (row-major) otherwise."""
        if self.facts.qlinear_kernels.get(kernel.source) != FLOAT_KERNEL:
            return QLINEAR_AVERAGE
        return self.facts.float_averages.get(kernel.source, QLINEAR_AVERAGE)

    def _average_domain(self, kernel: Kernel, zero_point: int) -> int:
        """The domain offset of the kernel onnxruntime runs for average pool `kernel`: uint8 QLinearAveragePool
        (128), int8 (0), or the float kernel's quantization (`numerics.float_average_domain_offset`)."""
        found = self.facts.qlinear_kernels.get(kernel.source)
        if found == FLOAT_KERNEL:
            return numerics.float_average_domain_offset(zero_point)
        return 0 if found == "int8" else numerics.ORT_X86_DOMAIN_OFFSET

    def _add(self, value: FloatValue, scale, zero_point, node, where):
        plain = all(is_plain_dequant(FloatValue(value.shape, (replace(t, map=None, negated=False),)))
                    for t in value.terms)
        a, b = value.terms
        if not plain or np.any(value.bias) or a.negated:
            raise MingError(f"{where}: only the sum or difference of two dequantized int8 tensors is supported")
        epilogue = AddRequant(np.float32(a.factors[0]), int(a.offset), np.float32(b.factors[0]), int(b.offset),
                              np.float32(scale), zero_point, subtract=b.negated,
                              kernel=self.facts.qlinear_kernels.get(value.origin, "uint8"))
        operands = (self._broadcast_operand(a, value.shape, where), self._broadcast_operand(b, value.shape, where))
        return self._binary_kernel(self.builder.node_name(node, "add"), node, "add", operands, value.shape, epilogue,
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
        return self._binary_kernel(self.builder.node_name(node, "mul"), node, "mul", operands, value.shape, epilogue)

    def _broadcast_operand(self, term: Term, shape: tuple[int, ...], where: str) -> Operand:
        """The operand reading `term`'s tensor at every point of `shape` (broadcast along the dims its map
        leaves out)."""
        amap = term.map or AccessMap.identity(len(shape))
        if tuple(self.graph.tensors[term.tensor].shape) != tuple(shape[e.single_dim()] for e in amap.results):
            raise MingError(f"{where}: operand {self.graph.tensors[term.tensor].shape} does not broadcast to "
                            f"{shape}")
        return Operand(term.tensor, amap)

    def _binary_kernel(self, name: str, node: str, op: str, operands: tuple[Operand, Operand], shape,
                       epilogue, payload: str = "") -> IntTensor:
        """The element-wise sum or difference (`op` "add", `payload` "add" or "sub"), product ("mul"), maximum
        ("max") or minimum ("min") of two int8 operands over `shape`, requantized by `epilogue` (None: the int8
        result as it is)."""
        out = self.builder.new_tensor(f"{name}_out", shape, "i8")
        payload = Op(payload or op, (Arg(0), Arg(1)))
        self.graph.nodes.append(Kernel(
            name=name, source=node, dims=shape, iterators=(PARALLEL,) * len(shape), inputs=operands,
            output=Operand(out, AccessMap.identity(len(shape))), payload=payload, init=None, op=op,
            epilogue=epilogue))
        return IntTensor(out)

    def _rescale(self, term: Term, scale, zero_point, node, qmin=-128, qmax=127) -> IntTensor:
        shape = self.graph.tensors[term.tensor].shape
        name = self.builder.node_name(f"{node}_rescale", "rescale")
        out = self.builder.new_tensor(f"{name}_out", shape, "i8")
        identity = AccessMap.identity(len(shape))
        self.graph.nodes.append(Kernel(
            name=name, source=node, dims=shape, iterators=(PARALLEL,) * len(shape),
            inputs=(Operand(term.tensor, identity),), output=Operand(out, identity), payload=Arg(0), init=None,
            op="rescale",
            epilogue=Rescale(np.float32(term.factors[0]), int(term.offset), np.float32(scale), zero_point,
                             qmin, qmax)))
        return IntTensor(out)

    def _lookup(self, value: Mapped, scale, zero_point, where) -> IntTensor:
        """The quantized result of a node that has a table: a kernel looking its input up in the table."""
        table = self.facts.tables[value.node]
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
        name = self.builder.kernel_name(value.node, "table")
        out = self.builder.new_tensor(f"{name}_out", shape, "i8")
        identity = AccessMap.identity(len(shape))
        self.graph.nodes.append(Kernel(
            name=name, source=value.node, dims=shape, iterators=(PARALLEL,) * len(shape),
            inputs=(Operand(value.tensor, identity),), output=Operand(out, identity), payload=Arg(0), init=None,
            op="table", epilogue=LookupTable(table.values, channel_dim, table.op)))
        return IntTensor(out)

    def _tflite_lookup(self, value: Mapped, where) -> IntTensor:
        """The int8 result of a TFLite node that has a table (`tflite_tables`), read by another node: its last
        generic must give int8 values."""
        table = self.facts.tables[value.node]
        if value.dtype != "i8":
            raise MingError(f"node '{value.node}' ({table.op}): IREE hands a {value.dtype} value of it to another "
                            "node; ming replaces only a whole int8 element-wise op by its table")
        return self._lookup(value, table.y_scale, table.y_zero_point, where)

    def _fixed_point_mul(self, product: IntProduct, chain: IntChain, where: str) -> IntTensor:
        """TFLite's MUL: each int8 input less its zero point (TOSA's RESCALE to int32, checked on every value),
        their product requantized by the chain after it (checked on every pair of values)."""
        node = chain.steps[-1].node
        values = np.arange(-128, 128, dtype=np.int64).reshape(-1, 1)
        offsets = []
        for operand in (product.a, product.b):
            if not isinstance(operand.tensor, str) or self.graph.tensors[operand.tensor].dtype != "i8" \
                    or operand.axis is not None:
                raise MingError(f"node '{node}' (MUL): only the product of two per-tensor int8 tensors is supported")
            shifted = fixed_point.run_steps(operand.steps, values, 1)[:, 0] - values[:, 0]
            if np.any(shifted != shifted[0]):
                raise MingError(f"node '{node}' (MUL): IREE scales an input other than by its zero point; not "
                                "supported")
            offsets.append(int(shifted[0]))
        a, b = (values[:, 0] + offset for offset in offsets)
        products = (a.reshape(-1, 1) * b.reshape(1, -1)).reshape(-1, 1)
        bias, multiplier, shift, zero_point, double_round, low, high = fixed_point.requant_parameters(
            chain.steps, products, where)
        if bias.any():
            raise MingError(f"node '{node}' (MUL): an offset after the product is not supported")
        epilogue = FixedPointMul(offsets[0], offsets[1], int(multiplier[0]), int(shift[0]), zero_point, double_round,
                                 low, high)
        operands = tuple(self._broadcast_operand(Term(o.tensor, (), 0, map=None if m.is_identity() else m),
                                                 product.shape, where)
                         for o, m in zip((product.a, product.b), product.maps))
        return self._binary_kernel(self.builder.kernel_name(node, "mul"), node, "mul", operands, product.shape,
                                   epilogue)

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
        if lead < 0 or any(d != 1 for d in value.shape[:lead]):  # a piece IREE took unit axes from
            lead = _batch_axes(value.shape, axis)
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
        name = self.builder.node_name(node, "concat")
        out = self.builder.new_tensor(f"{name}_out", value.shape[lead:], "i8")
        self.graph.nodes.append(Concat(name, node, tuple(inputs), out, axis - lead))
        return IntTensor(self._reshape_tensor(out, value.shape, node))


# ---- helpers ----------------------------------------------------------------


def _batch_axes(shape: tuple[int, ...], axis: int) -> int:
    """The leading axes of size 1 of a concatenation's result before its axis (the batch IREE keeps on the
    model's tensors): each piece is concatenated in the shape of its slice less them, whatever unit axes IREE
    dropped from the piece itself (a group of one channel of a grouped convolution comes as an H x W map)."""
    lead = 0
    while lead < axis and shape[lead] == 1:
        lead += 1
    return lead


def _same_axis(axis: int, model_shape: tuple[int, ...], shape: tuple[int, ...]) -> int | None:
    """The axis of `shape` that is `axis` (of size > 1) of `model_shape`, where IREE dropped unit dims of
    `model_shape` (the batch, say); None if `shape` is not `model_shape` less unit dims."""
    sizes = [size for size in shape if size != 1]
    if sizes != [size for size in model_shape if size != 1]:
        return None
    return [a for a, size in enumerate(shape) if size != 1][sum(size != 1 for size in model_shape[:axis])]


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


QLINEAR_AVERAGE = FloatAverage(numerics.AVERAGE_BY_ROWS)  # qlinear_pool.cc: row-major, the ONNX divisor


def _window_width(kernel: Kernel, where: str) -> int:
    """The width of a 2-D pooling kernel's window: its reduction dim along the input's last axis, which must be
    the innermost of the window's dims (the golden model and the process read the window in row-major order)."""
    columns = [d for d in kernel.inputs[0].map.results[-1].used_dims() if d in kernel.reduction_dims]
    if len(columns) != 1 or columns[0] != kernel.reduction_dims[-1]:
        raise MingError(f"{where}: average pooling window {kernel.inputs[0].map} is not rows x columns of the map; "
                        "export the pool over an N x C x H x W map")
    return kernel.dims[columns[0]]
