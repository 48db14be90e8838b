"""`linalg.generic` analysis: which of its forms a generic is (a table's node, a nearest Resize, a
Transpose, float code, TOSA's integer element-wise chains and sums, an integer kernel), and the integer
kernels IREE hands over as such (convolutions, matmuls, pooling)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from iree.compiler import ir

from ming_py.errors import MingError
from ming_py.ir import MAC_OPS, PARALLEL, REDUCTION, AccessMap, AffineExpr, Arg, Const, Expr, Kernel, Op, Operand, \
    Upsample

from .lift_shapes import transposition, unsliced
from .lift_values import (
    Empty,
    Fill,
    FloatValue,
    IntChain,
    IntExtremum,
    IntProduct,
    IntSum,
    IntTensor,
    Mapped,
    Padded,
    compact,
    is_plain_dequant,
)
from .mlir_attrs import access_map, element_type, iterator_kind, location_name, tensor_shape


class GenericMixin:
    """Of `lift.Lifter`: `linalg.generic`, dispatched by its form (`_op_linalg_generic`) to the other parts."""

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
        if n_in == 0 and node in self.facts.resizes:
            self.values[result] = self._upsample(_extracted(block, where), node, tensor_shape(result), where)
            return
        if n_in == 1 and node in self.facts.resizes and _copies_its_input(block):  # of a 1x1 map: a broadcast
            self.values[result] = self._upsample(op.operands[0], node, tensor_shape(result), where)
            return
        if _drops_unit_window(op, n_in, maps, iterators, self.values):
            self.values[result] = self._dropped_unit_window(op, n_in, maps, iterators, dims, block, node, where)
            return
        if node in self.facts.tables:
            mapped = self._mapped(op, n_in, maps, node, where)
            if mapped is not None:
                self.values[result] = replace(mapped, dtype=element_type(result))
                return
        copied = self.values.get(op.operands[0]) if n_in == 1 and _copies_its_input(block) else None
        axes = transposition(maps[0], maps[-1]) if isinstance(copied, (IntTensor, FloatValue)) else None
        if axes is not None:  # a Transpose
            self.values[result] = self._transposed(self._get(op.operands[0], where), axes, node, where)
            return
        if element_type(result) == "f32":
            ins = [self._get(v, where, padded=windowed) for v in op.operands[:n_in]]
            self.values[result] = self._float_generic(op, ins, out_init, maps, iterators, dims, block, node, where)
            return
        raw = [self._get(v, where) if isinstance(self.values.get(v), Mapped) else self.values.get(v)
               for v in op.operands[:n_in]]  # a TFLite table node's result is read as its int8 table lookup
        product = self._int_product(raw, maps, iterators, dims, block, where)
        if product is not None:
            self.values[result] = product
            return
        extremum = self._int_extremum(op, raw, maps, iterators, dims, block, node, where)
        if extremum is not None:
            self.values[result] = extremum
            return
        if all(it == PARALLEL for it in iterators) and all(m.is_identity() or isinstance(v, np.ndarray)
                                                           for v, m in zip(raw, maps)):
            tensors = [i for i, v in enumerate(raw)
                       if isinstance(v, (IntTensor, IntChain, IntSum, IntProduct, IntExtremum))]
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
        elif any(isinstance(v, (IntSum, IntExtremum)) for v in raw):
            raise MingError(f"{where}: the sum, maximum or minimum of two tensors must be requantized before other "
                            "operations")
        payload = _int_payload(block, where)
        if n_in == 1 and isinstance(out_init, Fill) and out_init.value == 0 and element_type(result) == "i32" \
                and isinstance(payload, Op) and payload.name == "add" and set(payload.args) == {Arg(0), Arg(1)}:
            summed = self._sum_reduction(raw[0], maps, iterators, dims, node, result, where)
            if summed is not None:
                self.values[result] = summed
                return
        ins = [self._get(v, where, padded=windowed) for v in op.operands[:n_in]]
        self.values[result] = self._int_generic(ins, out_init, maps, iterators, dims, block, node, result, where)

    def _dropped_unit_window(self, op, n_in, maps, iterators, dims, block, node, where):
        """A generic IREE wrote without its reduction loops because each runs once (`_drops_unit_window`): the
        same generic with them back, the fill as its init. A pooling's one-element window (a strided subsample,
        Keras ResNetV2's `MaxPooling2D(1, strides=2)`): a reduction dim of size 1 per strided axis of the input
        (stride * o + k). A multiply-accumulate over one input element (a FULLY_CONNECTED of a one-value input,
        a conv on a one-channel map whose window is one pixel): one reduction dim of size 1, the activation's
        last axis (its channel) and the weights' first. Then a pooling or multiply-accumulate like any other,
        float (ONNX) or integer (TFLite)."""
        values = [self.values.get(v) for v in op.operands[:n_in]]
        fill = next(i for i, v in enumerate(values) if isinstance(v, Fill))
        read = [i for i, v in enumerate(values) if i != fill and not isinstance(v, Empty)]
        if len(read) == 1:
            ins, maps, added = self._one_element_pool_window(op, read[0], maps[read[0]], maps[-1], where)
        elif element_type(op.results[0]) == "f32":
            raise MingError(f"node '{node}' ({self.facts.op_types.get(node, 'a float multiply-accumulate')}) "
                            "multiplies one input element per output (one input channel or feature, a 1x1 "
                            "window); ming takes such a layer from TFLite, not in ONNX's float form")
        else:
            ins, maps = self._one_element_mac_operands(op, read, maps, node, where)
            added = 1
        iterators = tuple(iterators) + (REDUCTION,) * added
        dims = tuple(dims) + (1,) * added
        if element_type(op.results[0]) == "f32":
            return self._float_reduction(ins, values[fill], maps, iterators, dims, block, node, where)
        payload = _renumber(_int_payload(block, where), {old: new for new, old in enumerate(read + [fill])})
        return self._int_generic(ins, values[fill], maps, iterators, dims, block, node, op.results[0], where,
                                 payload=payload)

    def _one_element_pool_window(self, op, source: int, source_map: AccessMap, out_map: AccessMap, where):
        """The input of a one-element pooling, its map with a window dim of size 1 on each strided axis and the
        output's map; the number of window dims."""
        strided = [i for i, e in enumerate(source_map.results) if _stride_of(e) > 1]
        first = source_map.num_dims
        window = {axis: first + n for n, axis in enumerate(strided)}
        ins = [self._get(op.operands[source], where, padded=True)]
        return ins, [_widened(source_map, len(strided), window), _widened(out_map, len(strided), {})], len(strided)

    def _one_element_mac_operands(self, op, read: list[int], maps, node: str, where: str):
        """The activation and the weights of a one-element multiply-accumulate, each with an axis of size 1 for
        its reduction dim (the activation's last, the weights' first), and their maps and the output's."""
        k = maps[-1].num_dims
        ins, new_maps = [], []
        for i in read:
            value = self._get(op.operands[i], where)
            results = maps[i].results
            if isinstance(value, np.ndarray):
                value = value.reshape((1,) + value.shape)
                position = 0
            elif isinstance(value, IntTensor):
                shape = self.graph.tensors[value.name].shape
                value = IntTensor(self._reshape_tensor(value.name, tuple(shape) + (1,), node))
                position = len(results)
            else:
                raise MingError(f"{where}: unsupported operand of a multiply-accumulate over one element")
            widened = _widened(maps[i], 1, {})
            unit = AffineExpr(tuple(int(d == k) for d in range(k + 1)))
            new_maps.append(AccessMap(k + 1, widened.results[:position] + (unit,) + widened.results[position:]))
            ins.append(value)
        return ins, new_maps + [_widened(maps[-1], 1, {})]

    def _mapped(self, op, n_in, maps, node, where) -> Mapped | None:
        """A generic of a node that has a table, reading the node's dequantized int8 input (TFLite: the int8
        input itself), or the result of an earlier generic of the node (IREE splits some ops into several),
        besides constants: the node's value as a function of that input, whatever the body computes (the table
        is the truth). None for a generic of constants alone."""
        sources = set()
        table = self.facts.tables[node]
        for value, amap in zip(op.operands[:n_in], maps):
            held = self.values.get(value)
            if not (isinstance(held, Mapped) and held.node == node):  # an earlier generic of the node stays as is
                held = self._get(value, where)
            if isinstance(held, (np.ndarray, np.generic, Fill, Empty)):
                continue
            if isinstance(held, Mapped) and held.node == node:
                source = replace(held, dtype=Mapped.dtype)
            elif isinstance(held, FloatValue) and is_plain_dequant(held):
                term = held.terms[0]
                source = Mapped(term.tensor, np.float32(term.factors[0]), int(term.offset), node)
            elif isinstance(held, IntTensor) and self.graph.tensors[held.name].dtype == "i8":  # TFLite's int8 input
                source = Mapped(held.name, table.x_scale, table.x_zero_point, node)
            else:
                raise MingError(f"node '{node}' ({self.facts.tables[node].op}) computes with a value other than its "
                                f"int8 input; {TABLE_FORM}")
            if not amap.is_identity():
                raise MingError(f"node '{node}' ({self.facts.tables[node].op}) reads its input other than element by "
                                f"element; {TABLE_FORM}")
            sources.add(source)
        if len(sources) > 1:
            raise MingError(f"node '{node}' ({self.facts.tables[node].op}) reads more than one int8 tensor; "
                            f"{TABLE_FORM}")
        if sources and not maps[-1].is_identity():
            raise MingError(f"node '{node}' ({self.facts.tables[node].op}) writes its result transposed; {TABLE_FORM}")
        return sources.pop() if sources else None

    def _int_product(self, raw, maps, iterators, dims, block, where) -> IntProduct | None:
        """TFLite's MUL of two maps, or of a map and a per-channel vector (a squeeze-and-excitation gate): the
        product of two int32 chains, each read element by element or broadcast along the dims its map leaves
        out (MUL(x, x): one chain squared), multiplied in int32 (`_int_payload` drops casts, so a body in other
        widths is no product of this form). None for any other generic."""
        if not all(isinstance(v, (IntTensor, IntChain)) for v in raw) or any(it != PARALLEL for it in iterators) \
                or not maps[-1].is_identity() or not all(m.is_identity() or _is_projection(m) for m in maps[:-1]) \
                or not _all_i32(block):
            return None
        if len(raw) == 1 and _squares_its_input(block):
            raw, maps = raw * 2, [maps[0], maps[0], maps[-1]]
        elif len(raw) != 2 or _int_payload(block, where) != Op("mul", (Arg(0), Arg(1))):
            return None
        chains = [v if isinstance(v, IntChain) else IntChain(v.name, None, ()) for v in raw]
        if any(not isinstance(c.tensor, str) or (c.steps and c.steps[-1].dtype != "i32") for c in chains):
            return None
        return IntProduct(chains[0], chains[1], tuple(dims), (maps[0], maps[1]))

    def _int_extremum(self, op, raw, maps, iterators, dims, block, node, where) -> IntTensor | IntExtremum | None:
        """TFLite's MAXIMUM and MINIMUM of two tensors: IREE compares the two chains that rescale each int8 input
        to int32 (`arith.maxsi`, `arith.minsi`) and rescales the result back to int8. The compare of two chains
        read element by element, materialized when its output chain is read (`TosaMixin._extremum`); a compare
        in int8 itself, at once. One line naming the node where an operand is broadcast over the other; None for
        any other generic (a compare with a constant is an element-wise chain of its one tensor)."""
        tensors = [v for v in raw if isinstance(v, (IntTensor, IntChain))]
        if len(raw) != 2 or len(tensors) != 2 or any(it != PARALLEL for it in iterators) or not _all_int(block):
            return None
        payload = _int_payload(block, where)
        if not (isinstance(payload, Op) and payload.name in ("max", "min") and set(payload.args) == {Arg(0), Arg(1)}):
            return None
        label = self.facts.op_types.get(node) or {"max": "MAXIMUM", "min": "MINIMUM"}[payload.name]
        if not all(m.is_identity() for m in maps):
            raise MingError(f"node '{node}' ({label}) broadcasts one operand over the other; ming takes "
                            f"{label} of two tensors of one shape")
        chains = []
        for i, value in enumerate(raw):
            if isinstance(value, IntChain) and value.steps and value.steps[-1].dtype == "i8":
                value = self._get(op.operands[i], where)  # an int8 tensor of the model, its requantization done
            chains.append(value if isinstance(value, IntChain) else IntChain(value.name, None, ()))
        extremum = IntExtremum(chains[0], chains[1], tuple(dims), payload.name, node)
        if element_type(op.results[0]) == "i8":  # no rescale after the compare
            return self._materialize(IntChain(extremum, None, ()), where)
        return extremum

    def _upsample(self, value: ir.Value, node: str, shape: tuple[int, ...], where: str) -> FloatValue:
        """A nearest Resize of `value`: IREE's generic computes every output element's source index and reads
        the dequantized source with `tensor.extract`, or, from a 1x1 map, broadcasts it (IREE dropped its unit
        axes, given back here). The index arithmetic is not interpreted; the node's factors come from the model
        (`self.facts.resizes`), and the int8 source is upsampled before dequantizing."""
        source = self._get(value, where)
        if not (isinstance(source, FloatValue) and is_plain_dequant(source)):
            raise MingError(f"{where}: Resize must consume a dequantized int8 tensor")
        term = source.terms[0]
        factors = self.facts.resizes[node][len(self.facts.resizes[node]) - len(shape):]  # IREE drops the batch axis
        in_shape = self.graph.tensors[term.tensor].shape
        if len(in_shape) < len(shape) and int(np.prod(in_shape)) * int(np.prod(factors)) == int(np.prod(shape)):
            in_shape = tuple(n // f for n, f in zip(shape, factors))
            term = replace(term, tensor=self._reshape_tensor(term.tensor, in_shape, node))
        if tuple(n * f for n, f in zip(in_shape, factors)) != tuple(shape):
            raise MingError(f"{where}: Resize of a {in_shape} map to {shape} is not an upsampling by {factors}")
        if all(f == 1 for f in factors):
            return source
        name = self.builder.kernel_name(node, "upsample")
        out = self.builder.new_tensor(f"{name}_out", shape, "i8")
        self.graph.nodes.append(Upsample(name, node, term.tensor, out, factors))
        return FloatValue(tuple(shape), (replace(term, tensor=out),))

    def _int_generic(self, ins, out_init, maps, iterators, dims, block, node, result, where,
                     payload: Expr | None = None) -> IntTensor:
        """The integer kernel of a generic; `payload`: its body over `ins` and the accumulator, where the
        caller rewrote the generic (the block's own body otherwise)."""
        kept = list(range(len(ins)))
        if payload is None:
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
        kind = kernel_op(payload, self.facts.op_types.get(node, ""), operands, dtype) if init is not None \
            else "elementwise"
        offset = None
        if kind in MAC_OPS:
            payload, operands, offset = self._without_zero_points(payload, operands, dims, iterators, maps[-1],
                                                                  node, where)
        name = self.builder.kernel_name(node, kind)
        out = self.builder.new_tensor(f"{name}_out", tensor_shape(result), dtype)
        self.graph.nodes.append(Kernel(
            name=name, source=node, dims=dims, iterators=iterators, inputs=tuple(operands),
            output=Operand(out, maps[-1]), payload=payload, init=init, op=kind))
        if offset is not None:
            self.mac_offsets[out] = offset
        return IntTensor(out)

    def _without_zero_points(self, payload: Expr, operands: list[Operand], dims, iterators, out_map: AccessMap,
                             node: str, where: str) -> tuple[Expr, list[Operand], np.ndarray | None]:
        """A multiply-accumulate kernel in the form every MAC kernel of the graph has (`MAC_OPS`: acc + x * w,
        the int8 activation times the int8 weights as they are), and the offset its sums then differ from the
        model's by (None: none), per element of its output (an int64 array over the output's axes, of size 1
        along the axes it does not vary over).

        IREE writes a quantized convolution it does not rewrite itself (TOSA's depthwise convolution with a
        depth multiplier, `linalg.depthwise_conv_2d_nhwc_hwcm_q`) as acc + (x - x_zp) * (w - w_zp) with scalar
        zero points. The weights' zero point is taken into the weights (w - w_zp, which must stay int8), the
        input's into the offset -x_zp * sum(w - w_zp) over the window: the padding holds x_zp, so every
        window element of the model's sum, padding included, is (x - x_zp) * w, and the streamed sum of x * w
        is the model's plus x_zp * sum(w). The offset is added to the bias of the kernel's requantization."""
        n = len(operands)
        terms = _mac_terms(payload, n)
        if terms is None:
            raise MingError(f"{where}: multiply-accumulate body {payload} is not acc + (x - zero point) * "
                            "(w - zero point); not supported")
        (a, za), (b, zb) = terms
        if za is None and zb is None:
            return payload, operands, None
        constants = self.graph.constants
        zero_points = [_scalar_zero_point(z, operands, constants, where) for z in (za, zb)]
        is_weight = [operands[i].tensor in constants and bool(operands[i].map.results) for i in (a, b)]
        if is_weight.count(True) != 1:
            raise MingError(f"{where}: a multiply-accumulate with zero points must multiply an activation by "
                            "constant weights")
        (x, x_zp), (w, w_zp) = ((a, zero_points[0]), (b, zero_points[1])) if is_weight[1] else \
            ((b, zero_points[1]), (a, zero_points[0]))
        activation, weight = operands[x], operands[w]
        weights = constants[weight.tensor].astype(np.int64) - w_zp
        if np.any(weights < -128) or np.any(weights > 127):
            raise MingError(f"{where}: weights less their zero point {w_zp} leave int8; ming multiplies int8 "
                            "weights (quantize them symmetrically)")
        if w_zp:
            weight = replace(weight, tensor=self.builder.constant(node, weights.astype(np.int8)))
        offset = None
        if x_zp:
            if activation.padding and any(p != (0, 0) for p in activation.padding) \
                    and activation.pad_value != x_zp:
                raise MingError(f"{where}: the input is padded with {activation.pad_value}, not its zero point "
                                f"{x_zp}; not supported")
            offset = -x_zp * _weight_sums(weights, weight.map, dims, iterators, out_map, where)
        kept = sorted((x, w))
        operands = [activation if i == x else weight for i in kept]
        first, second = (0, 1) if kept[0] == x else (1, 0)
        plain = Op("add", (Arg(2), Op("mul", (Arg(first), Arg(second)))))
        return plain, operands, offset

    def _operand(self, value, amap: AccessMap, node: str, where: str) -> Operand:
        value, amap = unsliced(value, amap)
        if isinstance(value, IntTensor):
            return Operand(value.name, amap)
        if isinstance(value, Padded) and isinstance(value.base, IntTensor):
            return Operand(value.base.name, amap, tuple(zip(value.low, value.high)), int(value.value))
        if isinstance(value, np.ndarray) and value.dtype.kind == "i":
            return Operand(self.builder.constant(node, value), amap)
        raise MingError(f"{where}: unsupported operand for an integer kernel")


# ---- helpers ----------------------------------------------------------------


# what to do about an element-wise op (a lookup table) that IREE hands over in another form
TABLE_FORM = ("ming takes it as an element-wise op of one int8 tensor between QuantizeLinear/DequantizeLinear; "
              "if the model has it so, please report the model")
_INT_BINARY = {"arith.addi": "add", "arith.subi": "sub", "arith.muli": "mul",
               "arith.maxsi": "max", "arith.minsi": "min"}


def _stride_of(expr: AffineExpr) -> int:
    """The coefficient of an access `s * d` (one dim, no offset); 0 for any other access."""
    dims = expr.used_dims()
    return expr.coeffs[dims[0]] if len(dims) == 1 and not expr.constant else 0


def _widened(amap: AccessMap, added: int, unit_terms: dict[int, int]) -> AccessMap:
    """`amap` over `added` more loop dims; result i plus the new dim unit_terms[i] where given."""
    num_dims = amap.num_dims + added
    results = []
    for i, e in enumerate(amap.results):
        coeffs = list(e.coeffs) + [0] * added
        if i in unit_terms:
            coeffs[unit_terms[i]] = 1
        results.append(AffineExpr(tuple(coeffs), e.constant))
    return AccessMap(num_dims, tuple(results))


def _drops_unit_window(op, n_in: int, maps, iterators, values) -> bool:
    """Whether a generic is a pooling or a multiply-accumulate whose reduction loops IREE dropped because each
    runs once: every iterator parallel, the init (a fill) read as an input element by element and an empty
    tensor as the init; and either one input read at a stride beside the pooling's empty window shape (a 1x1
    pool; at stride 1 IREE folds it away), or two inputs that read disjoint dims (an activation and weights
    that share no axis: no channel of a depthwise conv)."""
    if n_in != 3 or any(it != PARALLEL for it in iterators) or not isinstance(values.get(op.operands[n_in]), Empty):
        return False
    held = [values.get(v) for v in op.operands[:n_in]]
    fills = [i for i, v in enumerate(held) if isinstance(v, Fill)]
    if len(fills) != 1 or maps[fills[0]] != maps[-1]:
        return False
    args = list(op.regions[0].blocks[0].arguments)
    if not list(args[fills[0]].uses) or list(args[n_in].uses):
        return False
    others = [i for i in range(n_in) if i != fills[0]]
    windows = [i for i in others if isinstance(held[i], Empty) and not maps[i].results and not list(args[i].uses)]
    if len(windows) == 1:
        source = next(i for i in others if i != windows[0])
        return any(_stride_of(e) > 1 for e in maps[source].results)
    read = [set(d for e in maps[i].results for d in e.used_dims()) for i in others]
    return not windows and not (read[0] & read[1])


def _copies_its_input(block) -> bool:
    """Whether a generic's body is `linalg.yield` of its first argument."""
    ops = list(block.operations)
    return len(ops) == 1 and ops[0].operation.name == "linalg.yield" and ops[0].operands[0] == block.arguments[0]


def _squares_its_input(block) -> bool:
    """Whether a generic's body is `linalg.yield` of its first argument times itself."""
    ops = list(block.operations)
    return len(ops) == 2 and ops[0].operation.name == "arith.muli" and ops[1].operation.name == "linalg.yield" \
        and list(ops[0].operands) == [block.arguments[0]] * 2 and ops[1].operands[0] == ops[0].results[0]


def _all_int(block) -> bool:
    """Whether every argument of a generic's body and every value it computes is an integer of one width (the
    compare of two int32 values, or of two int8 ones)."""
    values = list(block.arguments) + [r for body_op in block.operations for r in body_op.results]
    return len({str(value.type) for value in values}) == 1 and str(values[0].type) in ("i8", "i32")


def _all_i32(block) -> bool:
    """Whether every argument of a generic's body and every value it computes is an i32 (no cast, no other
    width)."""
    values = list(block.arguments) + [r for body_op in block.operations for r in body_op.results]
    return all(str(value.type) == "i32" for value in values)


def _extracted(block, where: str) -> ir.Value:
    """The tensor a nearest Resize's generic reads with its one `tensor.extract`."""
    extracts = [o for o in block.operations if o.operation.name == "tensor.extract"]
    if len(extracts) != 1:
        raise MingError(f"{where}: unexpected form of a nearest Resize")
    return extracts[0].operands[0]


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


def broadcast_input(value, amap: AccessMap, dims, where):
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
        return compact(moved.reshape(shape))
    if isinstance(value, FloatValue) and not amap.is_identity() and is_plain_dequant(value) \
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


def _mac_terms(payload: Expr, n_inputs: int):
    """((a, za), (b, zb)) of a body acc + (in_a - za) * (in_b - zb), where acc is the argument after the n
    inputs and each zero point is an argument, a constant or None (no subtraction); None for another body."""
    if not (isinstance(payload, Op) and payload.name == "add" and len(payload.args) == 2):
        return None
    acc, product = payload.args
    if isinstance(product, Arg):
        acc, product = product, acc
    if acc != Arg(n_inputs) or not (isinstance(product, Op) and product.name == "mul" and len(product.args) == 2):
        return None
    terms = []
    for factor in product.args:
        if isinstance(factor, Op) and factor.name == "sub" and isinstance(factor.args[0], Arg) \
                and isinstance(factor.args[1], (Arg, Const)):
            factor, zero_point = factor.args
        else:
            zero_point = None
        if not (isinstance(factor, Arg) and factor.index < n_inputs):
            return None
        terms.append((factor.index, zero_point))
    return tuple(terms)


def _scalar_zero_point(zero_point, operands: list[Operand], constants, where: str) -> int:
    """The value of a zero point subtracted in a multiply-accumulate body: a constant, or a scalar constant
    input."""
    if zero_point is None:
        return 0
    if isinstance(zero_point, Const):
        return int(zero_point.value)
    operand = operands[zero_point.index]
    value = constants.get(operand.tensor)
    if value is None or np.size(value) != 1:
        raise MingError(f"{where}: a zero point of a multiply-accumulate that is not one constant is not "
                        "supported")
    return int(np.asarray(value).reshape(-1)[0])


def _weight_sums(weights: np.ndarray, weight_map: AccessMap, dims, iterators, out_map: AccessMap,
                 where: str) -> np.ndarray:
    """The sum of the weights a kernel multiplies into each output element, over its reduction dims, as an
    int64 array over the output's axes (size 1 along the axes the weights do not depend on)."""
    weight_dims = [e.single_dim() for e in weight_map.results]
    out_dims = [e.single_dim() for e in out_map.results]
    if None in weight_dims or None in out_dims or len(set(weight_dims)) != len(weight_dims):
        raise MingError(f"{where}: weights read as {weight_map} with zero points are not supported")
    reduced = tuple(axis for axis, d in enumerate(weight_dims) if iterators[d] != PARALLEL)
    kept = [d for d in weight_dims if iterators[d] == PARALLEL]
    if any(d not in out_dims for d in kept):
        raise MingError(f"{where}: weights read as {weight_map} with zero points are not supported")
    sums = weights.sum(axis=reduced)  # over the kept dims, in the weights' order
    unread = [d for d, kind in enumerate(iterators) if kind != PARALLEL and d not in weight_dims]
    sums = sums * int(np.prod([dims[d] for d in unread]))  # reduction dims the weights do not vary along
    order = sorted(range(len(kept)), key=lambda i: out_dims.index(kept[i]))
    return sums.transpose(order).reshape([dims[d] if d in kept else 1 for d in out_dims]).astype(np.int64)


def kernel_op(payload: Expr, onnx_op: str, operands: list[Operand], dtype: str) -> str:
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


def _renumber(expr: Expr, mapping: dict[int, int]) -> Expr:
    if isinstance(expr, Arg):
        return Arg(mapping[expr.index])
    if isinstance(expr, Op):
        return Op(expr.name, tuple(_renumber(a, mapping) for a in expr.args))
    return expr
