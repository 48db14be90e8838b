"""The lifter's TOSA-only paths (TFLite models): integer element-wise chains (bias addition, zero-point
correction, RESCALE, clamp) read as one fixed-point epilogue of the producing kernel (`fixed_point`), the sum
of two chains (ADD), the maximum or minimum of two (MAXIMUM, MINIMUM), and MEAN's sums over one axis after
another."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ming_py import numerics
from ming_py.access import valid_window_counts
from ming_py.errors import MingError
from ming_py.ir import MAC_OPS, PARALLEL, AccessMap, AffineExpr, Arg, Kernel, LookupTable, Op, Operand, Reshape

from . import fixed_point, int_body
from .lift_generic import broadcast_input
from .lift_values import ChainStep, IntChain, IntExtremum, IntProduct, IntSum, IntTensor, compact
from .mlir_attrs import tensor_shape


class TosaMixin:
    """Of `lift.Lifter`: integer element-wise chains and sums (`IntChain`, `IntSum`), materialized into
    epilogues when read (`_materialize`), and TFLite's MEAN (`_sum_reduction`)."""

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
            name = self.builder.kernel_name(node, "sumpool")
            out = self.builder.new_tensor(f"{name}_out", tensor_shape(result), "i32")
            self.graph.nodes.append(Kernel(
                name=name, source=node, dims=dims, iterators=iterators,
                inputs=(Operand(source.tensor, maps[0]),), output=Operand(out, maps[1]),
                payload=Op("add", (Arg(1), Arg(0))), init=0, op="sumpool"))
            count = int(np.prod([dims[d] for d, it in enumerate(iterators) if it != PARALLEL]))
            self.sum_offsets[out] = int(offsets[0]) * count
            return IntTensor(out)
        producer = self.builder.producer(source.name) if isinstance(source, IntTensor) else None
        if producer is None or producer.op != "sumpool" or producer.epilogue is not None \
                or source.name not in self.sum_offsets:
            return None
        merged = _merge_reductions(producer, maps, iterators, dims, where)
        out = self.builder.new_tensor(f"{producer.name}_total", tensor_shape(result), "i32")
        merged.output = Operand(out, merged.output.map)
        self.graph.nodes[self.graph.nodes.index(producer)] = merged
        count = int(np.prod([dims[d] for d, it in enumerate(iterators) if it != PARALLEL]))
        self.sum_offsets[out] = self.sum_offsets[source.name] * count
        return IntTensor(out)

    def _fold_constants(self, values, maps, dims, block, where) -> np.ndarray:
        args = [broadcast_input(np.asarray(v, np.int64), m, dims, where) for v, m in zip(values, maps)]
        result = int_body.evaluate(block, args + [np.int64(0)], where=where)[None]
        return compact(np.broadcast_to(result, dims).copy())

    def _chain(self, values, maps, dims, block, position, dtype, node, where) -> IntChain:
        source = values[position]
        chain = source if isinstance(source, IntChain) else \
            IntChain(source if isinstance(source, (IntSum, IntProduct, IntExtremum)) else source.name, None, ())
        axis = chain.axis
        constants = []
        for i, (value, amap) in enumerate(zip(values, maps)):
            if i == position:
                continue
            array = broadcast_input(np.asarray(value, np.int64), amap, dims, where)
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
        if isinstance(chain.tensor, IntProduct):
            return self._fixed_point_mul(chain.tensor, chain, where)
        if isinstance(chain.tensor, IntExtremum):
            return self._extremum(chain.tensor, chain, where)
        producer = self.builder.producer(chain.tensor)
        if producer is not None and producer.op in MAC_OPS and producer.epilogue is None \
                and chain.steps[-1].dtype == "i8":
            producer.epilogue = self._requant_over_channels(producer, chain, where)
            self._add_mac_offset(producer, chain.axis, 1, where)
            self.builder.retype(producer.output.tensor, "i8")
            return IntTensor(producer.output.tensor)
        grouped = self._grouped_sums(chain)
        if grouped is not None:
            return self._requantize_groups(grouped, chain, where)
        if producer is not None and producer.op == "sumpool" and producer.epilogue is None \
                and producer.output.tensor in self.sum_offsets:  # a MEAN: the rescale of a global sum
            epilogue = self._requant_over_channels(producer, chain, where)
            epilogue.bias = numerics.wrap_i32(epilogue.bias.astype(np.int64)
                                              + self.sum_offsets[producer.output.tensor]).astype(np.int32)
            producer.epilogue = epilogue
            self.builder.retype(producer.output.tensor, "i8")
            return IntTensor(producer.output.tensor)
        if producer is not None and producer.op == "sumpool" and producer.epilogue is None:
            valid = valid_window_counts(producer, self.graph.shape_of(producer.inputs[0].tensor))
            order = [producer.parallel_dims.index(e.single_dim()) for e in producer.output.map.results]
            valid = np.transpose(valid, order)[..., 0]  # over the output's rows and columns
            producer.epilogue = fixed_point.average_of(chain, valid, where)
            self.builder.retype(producer.output.tensor, "i8")
            return IntTensor(producer.output.tensor)
        if isinstance(chain.tensor, str) and self.graph.tensors[chain.tensor].dtype == "i8" \
                and chain.steps[-1].dtype == "i8":
            return self._int8_chain(chain)
        raise MingError(f"{where}: this integer arithmetic after {producer.source if producer else chain.tensor} "
                        "has no form in ming yet")

    def _int8_chain(self, chain: IntChain) -> IntTensor:
        """An int8 -> int8 chain read after its producer's epilogue (TOSA's MEAN over a 1 x 1 map: a RESCALE to
        int32 less the zero point, a RESCALE back to int8; MAXIMUM or MINIMUM of a map and a constant, a scalar
        or one per channel): its value at every int8 input in every channel as a table, evaluated exactly (one
        table where the channels agree, one per channel where its constants differ along them); the source
        itself where that is the identity. The table is named after the node's TFLite op, or TOSA's RESCALE:
        upper case, which tells the table rule it is TFLite's."""
        shape = self.graph.tensors[chain.tensor].shape
        channels = 1 if chain.axis is None else shape[chain.axis]
        values = np.repeat(np.arange(-128, 128, dtype=np.int64).reshape(-1, 1), channels, axis=1)
        tables = fixed_point.run_steps(chain.steps, values, channels).T  # [channel][x + 128]
        if np.array_equal(tables, values.T):
            return IntTensor(chain.tensor)
        per_channel = bool(np.any(tables != tables[:1]))
        node = chain.steps[-1].node
        name = self.builder.kernel_name(node, "table")
        out = self.builder.new_tensor(f"{name}_out", shape, "i8")
        identity = AccessMap.identity(len(shape))
        table = LookupTable((tables if per_channel else tables[:1]).astype(np.int8),
                            chain.axis if per_channel else None, self.facts.op_types.get(node, "RESCALE"))
        self.graph.nodes.append(Kernel(
            name=name, source=node, dims=shape, iterators=(PARALLEL,) * len(shape),
            inputs=(Operand(chain.tensor, identity),), output=Operand(out, identity), payload=Arg(0), init=None,
            op="table", epilogue=table))
        return IntTensor(out)

    def _fixed_point_add(self, total: IntSum, chain: IntChain, where: str) -> IntTensor:
        a, b = total.a, total.b
        if any(not isinstance(c.tensor, str) or self.graph.tensors[c.tensor].dtype != "i8" or c.axis is not None
               for c in (a, b)):
            raise MingError(f"{where}: only the sum of two per-tensor rescaled int8 tensors is supported")
        shape = total.shape
        if self.graph.tensors[a.tensor].shape != shape or self.graph.tensors[b.tensor].shape != shape:
            raise MingError(f"{where}: broadcasting Add is not supported")
        node = chain.steps[-1].node
        identity = AccessMap.identity(len(shape))
        return self._binary_kernel(self.builder.kernel_name(node, "add"), node, "add",
                                   (Operand(a.tensor, identity), Operand(b.tensor, identity)), shape,
                                   fixed_point.add_of(a, b, chain.steps, where))

    def _extremum(self, extremum: IntExtremum, chain: IntChain, where: str) -> IntTensor:
        """TFLite's MAXIMUM or MINIMUM: LiteRT's reference kernel compares the raw int8 values, and the converter
        gives both inputs and the output one scale and zero point (the op's SameOperandsAndResultsScale), so
        IREE's RESCALEs around its int32 compare are identities. Each is proved one on all 256 int8 values (the
        output's with its clamp); then the kernel compares the two int8 tensors, with no requantization."""
        node = extremum.node
        label = self.facts.op_types.get(node) or {"max": "MAXIMUM", "min": "MINIMUM"}[extremum.op]
        operands = (extremum.a, extremum.b)
        if any(not isinstance(o.tensor, str) or self.graph.tensors[o.tensor].dtype != "i8" for o in operands):
            raise MingError(f"node '{node}' ({label}) compares a value other than an int8 tensor of the model; ming "
                            f"takes {label} of two int8 tensors")
        values = np.arange(-128, 128, dtype=np.int64).reshape(-1, 1)
        final = chain.steps[-1].dtype if chain.steps else "i8"
        if final != "i8" or not all(o.axis is None and _is_identity(o.steps, values) for o in operands + (chain,)):
            raise MingError(f"node '{node}' ({label}) has inputs quantized differently from its output; ming takes "
                            "MAXIMUM/MINIMUM with equal scales and zero points, as the TFLite converter writes them")
        identity = AccessMap.identity(len(extremum.shape))
        return self._binary_kernel(self.builder.kernel_name(node, extremum.op), node, extremum.op,
                                   tuple(Operand(o.tensor, identity) for o in operands), extremum.shape, None)

    def _add_mac_offset(self, kernel: Kernel, axis: int | None, channel_axes: int, where: str) -> None:
        """Add to the bias of `kernel`'s requantization what the model's sums add to its sums of x * w (the
        input's zero point times the window's weights, `GenericMixin._without_zero_points`); its channels are
        the last `channel_axes` axes of its output, or its axis `axis` (one axis)."""
        offset = self.mac_offsets.pop(kernel.output.tensor, None)
        if offset is None:
            return
        rank = offset.ndim
        axes = list(range(rank - channel_axes, rank)) if axis is None or channel_axes > 1 else [axis]
        if any(offset.shape[a] != 1 for a in range(rank) if a not in axes):
            raise MingError(f"{where}: the input zero point's correction of {kernel.source} varies along the "
                            "map, not only along its channels; not supported")
        per_channel = offset.reshape(-1)
        bias = kernel.epilogue.bias.astype(np.int64) + per_channel
        kernel.epilogue.bias = numerics.wrap_i32(np.broadcast_to(bias, kernel.epilogue.bias.shape)).astype(np.int32)

    def _grouped_sums(self, chain: IntChain) -> tuple[Kernel, Reshape] | None:
        """The multiply-accumulate kernel and the reshape whose merged last axes `chain` requantizes, or None: a
        TFLite depthwise convolution with a depth multiplier M (IREE's depthwise_conv_2d_nhwc_hwcm_q) writes
        its sums as ... x C x M, channel c * M + m reading input channel c, and collapses C x M into the
        channels before the bias and the RESCALE."""
        if not isinstance(chain.tensor, str) or chain.steps[-1].dtype != "i8":
            return None
        reshape = next((n for n in self.graph.nodes if isinstance(n, Reshape) and n.output == chain.tensor), None)
        kernel = self.builder.producer(reshape.input) if reshape is not None else None
        if kernel is None or kernel.op not in MAC_OPS or kernel.epilogue is not None:
            return None
        sums, merged = self.graph.tensors[reshape.input].shape, self.graph.tensors[reshape.output].shape
        channels_axis = len(merged) - 1
        if len(sums) < 2 or merged != sums[:-2] + (sums[-2] * sums[-1],) \
                or chain.axis not in (None, channels_axis) \
                or any(e.single_dim() is None for e in kernel.output.map.results[-2:]):
            return None
        return kernel, reshape

    def _requantize_groups(self, grouped: tuple[Kernel, Reshape], chain: IntChain, where: str) -> IntTensor:
        """`chain` as the requantization of the kernel's sums over its last two output axes (group, channel in
        the group: the channel index is the row-major index over their loop dims); the reshape then merges
        int8 values."""
        kernel, reshape = grouped
        channel_dims = tuple(e.single_dim() for e in kernel.output.map.results[-2:])
        channels = kernel.dims[channel_dims[0]] * kernel.dims[channel_dims[1]]
        kernel.epilogue = fixed_point.requant_of(chain, channel_dims, channels, where)
        self._add_mac_offset(kernel, None, 2, where)
        self.builder.retype(kernel.output.tensor, "i8")
        self.builder.retype(reshape.output, "i8")
        return IntTensor(reshape.output)

    def _requant_over_channels(self, kernel: Kernel, chain: IntChain, where: str):
        """`chain` as the requantization of `kernel`'s sums, per channel of its output; an output of one value
        (IREE folds a 1 x 1 result, a one-unit FULLY_CONNECTED's, into a scalar) is one channel."""
        if not kernel.output.map.results:
            return fixed_point.requant_of(chain, (), 1, where)
        channel_dim = self._channel_dim(kernel, chain)
        return fixed_point.requant_of(chain, (channel_dim,), kernel.dims[channel_dim], where)

    def _channel_dim(self, kernel: Kernel, chain: IntChain) -> int:
        """The loop dim of `kernel` that indexes the channels of its output (TFLite: the last axis)."""
        results = kernel.output.map.results
        axis = chain.axis if chain.axis is not None else len(results) - 1
        return results[axis].single_dim()


# ---- helpers ----------------------------------------------------------------


def _is_identity(steps, values: np.ndarray) -> bool:
    """Whether the chain's steps give back every one of `values` (probes, 1), exactly."""
    return np.array_equal(fixed_point.run_steps(steps, values, 1), values)


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
