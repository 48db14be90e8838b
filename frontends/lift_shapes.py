"""The lifter's shape and layout operations: padding, reshapes, slices, concatenation pieces and
transpositions of int8 tensors (or of ones dequantized per tensor)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ming_py import numerics
from ming_py.errors import MingError
from ming_py.ir import AccessMap, AffineExpr, DepthToSpace, HostOp, Pad, Permute, Reshape, Slice

from .lift_values import (
    Empty,
    FloatInput,
    FloatPieces,
    FloatValue,
    HostValue,
    IntTensor,
    Padded,
    Sliced,
    compact,
    is_plain_dequant,
)
from .mlir_attrs import location_name, reassociation, tensor_shape


class ShapeMixin:
    """Of `lift.Lifter`: `tensor.pad`, `tensor.collapse_shape`/`expand_shape`, `tensor.extract_slice`/
    `insert_slice`, and transpositions (as `Permute` nodes)."""

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
        if isinstance(base, FloatValue) and is_plain_dequant(base):
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
        name = self.builder.kernel_name(padded.origin, "pad")
        out = self.builder.new_tensor(f"{name}_out", shape, "i8")
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
            self.values[op.results[0]] = compact(full.reshape(shape))
        else:
            raise MingError(f"{where}: cannot reshape a per-channel float value; unsupported layer pattern")

    def _reshape_tensor(self, tensor: str, shape: tuple[int, ...], source: str) -> str:
        """`tensor` in `shape`: a new Reshape node, or the tensor of that shape its chain of reshapes started
        from (a channel shuffle's Reshape -> Transpose -> Reshape comes back to its map's shape)."""
        info = self.graph.tensors[tensor]
        chain = self._reshaped_from(tensor)
        ancestor = next((a for a in chain if self.graph.tensors[a].shape == tuple(shape)), None)
        if ancestor is not None:
            return ancestor
        through_blocks = any(a in self.block_views for a in chain)
        if through_blocks:  # a reshape of IREE's shapes of a DepthToSpace's blocks reads the map itself
            tensor = next((a for a in chain if a not in self.block_views
                           and _holds_a_map(self.graph.tensors[a].shape)), tensor)
        out = self.builder.new_tensor(f"{tensor}_reshaped", shape, info.dtype)
        self.graph.nodes.append(Reshape(self.builder.node_name(f"{source}_reshape", "reshape"), source, tensor, out))
        if through_blocks:
            self.block_views.add(out)  # another of those shapes: the reshapes after it read the map too
        return out

    def _reshaped_from(self, tensor: str) -> list[str]:
        """`tensor` and the tensors its chain of Reshape nodes comes from, the nearest first (every one holds
        the same values in the same row-major order)."""
        made_by = {n.output: n.input for n in self.graph.nodes if isinstance(n, Reshape)}
        chain = [tensor]
        while chain[-1] in made_by:
            chain.append(made_by[chain[-1]])
        return chain

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
        if isinstance(source, np.ndarray) and source.ndim == len(offsets):  # a constant's part (a group's bias)
            window = tuple(slice(o, o + s * t, t) for o, s, t in zip(offsets, sizes, strides))
            self.values[op.results[0]] = source[window].reshape(tensor_shape(op.results[0]))
            return
        dropped = _leading_dropped_axes(offsets, sizes, self._shape(source), tensor_shape(op.results[0])) \
            if isinstance(source, (IntTensor, FloatValue)) else 0
        if dropped > 0:  # a rank-reducing slice of leading unit dims
            source = self._reshaped(source, self._shape(source)[dropped:], location_name(op), where)
            offsets, strides, sizes = offsets[dropped:], strides[dropped:], sizes[dropped:]
        if isinstance(source, (IntTensor, FloatValue)) and strides == (1,) * len(strides):
            axis = self._channel_axis(len(offsets))
            others = [a for a in range(len(offsets)) if a != axis]
            if all(offsets[a] == 0 and sizes[a] == self._shape(source)[a] for a in others):
                self.values[op.results[0]] = self._channel_piece(source, offsets[axis], sizes[axis],
                                                                 tensor_shape(op.results[0]), location_name(op),
                                                                 where)
                return
        if isinstance(source, (IntTensor, FloatValue)) and len(offsets) == len(tensor_shape(op.results[0])):
            source, offsets = self._channels_sliced_first(source, offsets, sizes, strides, location_name(op), where)
        base = source.base if isinstance(source, Padded) else source
        if not (isinstance(base, IntTensor) or (isinstance(base, FloatValue) and is_plain_dequant(base))) \
                or len(offsets) != len(tensor_shape(op.results[0])):
            raise MingError(f"{where}: this slice is not supported; ming takes a range of a map's channels, or a "
                            "slice of rows and columns that a convolution or pool reads (split the channels instead)")
        if not all(use.owner.name == "linalg.generic" for use in op.results[0].uses):
            raise MingError(f"{where}: a slice of rows or columns must feed convolutions or pools directly (its "
                            "strides fold into their windows); split the channels instead, or feed each part to one")
        self.values[op.results[0]] = Sliced(source, offsets, strides)

    def _channels_sliced_first(self, source, offsets, sizes, strides, node: str, where: str):
        """A strided slice that also takes a range of the channels (a group of a strided grouped convolution) as
        a Slice of those channels, then the strided slice of that piece (its window's strides): a kernel reads
        channels from the first of its input's."""
        axis = self._channel_axis(len(offsets))
        shape = self._shape(source)
        if strides[axis] != 1 or (offsets[axis], sizes[axis]) == (0, shape[axis]):
            return source, offsets
        piece_shape = shape[:axis] + (sizes[axis],) + shape[axis + 1:]
        piece = self._channel_piece(source, offsets[axis], sizes[axis], piece_shape, node, where)
        return piece, offsets[:axis] + (0,) + offsets[axis + 1:]

    def _shape(self, value: IntTensor | FloatValue) -> tuple[int, ...]:
        return self.graph.tensors[value.name].shape if isinstance(value, IntTensor) else value.shape

    def _reshaped(self, value: IntTensor | FloatValue, shape, node: str, where: str) -> IntTensor | FloatValue:
        """An int8 tensor, or one dequantized per tensor, in another shape."""
        if isinstance(value, IntTensor):
            return IntTensor(self._reshape_tensor(value.name, shape, node))
        if not is_plain_dequant(value):
            raise MingError(f"{where}: only a tensor dequantized per tensor can be reshaped here")
        term = value.terms[0]
        return FloatValue(shape, (replace(term, tensor=self._reshape_tensor(term.tensor, shape, node)),))

    def _channel_axis(self, rank: int) -> int:
        return rank - 1 if self.facts.channels_last else 0

    def _channel_piece(self, value: IntTensor | FloatValue, start: int, size: int, result_shape, node: str,
                       where: str) -> IntTensor | FloatValue:
        """Channels [start, start + size) of `value` in the slice's own shape `result_shape` (which may drop unit
        axes: IREE's slice of one channel of a one-row map). A Slice takes the channels of a (C, ...) map: a
        channels-last N x H x W x C map loses its batch axis first."""
        shape = self._shape(value)
        if (start, size) == (0, shape[self._channel_axis(len(shape))]):
            return value
        if self.facts.channels_last and len(shape) == 4 and shape[0] == 1:
            value = self._reshaped(value, shape[1:], node, where)
        piece = self._channel_slice(value, start, size, node, where)
        if self._shape(piece) != tuple(result_shape):
            piece = self._reshaped(piece, tuple(result_shape), node, where)
        return piece

    def _channel_slice(self, value: IntTensor | FloatValue, start: int, size: int, node: str,
                       where: str) -> IntTensor | FloatValue:
        """Channels [start, start + size) of an int8 tensor or of one dequantized per tensor (a Slice node)."""
        if isinstance(value, FloatValue):
            if not is_plain_dequant(value):
                raise MingError(f"{where}: only a tensor dequantized per tensor can be split along its channels")
            term = value.terms[0]
            sliced = self._channel_slice(IntTensor(term.tensor), start, size, node, where)
            return FloatValue(self.graph.tensors[sliced.name].shape, (replace(term, tensor=sliced.name),))
        info = self.graph.tensors[value.name]
        axis = self._channel_axis(len(info.shape))
        if (start, size) == (0, info.shape[axis]):
            return value
        name = self.builder.node_name(f"{node}_slice", "slice")
        shape = info.shape[:axis] + (size,) + info.shape[axis + 1:]
        out = self.builder.new_tensor(f"{name}_{start}_{start + size}", shape, info.dtype)
        self.graph.nodes.append(Slice(name, node, value.name, out, start))
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

    def _transposed(self, value, axes: tuple[int, ...], node: str, where: str):
        """An int8 tensor, or one dequantized per tensor, transposed (numpy.transpose's `axes`)."""
        if isinstance(value, FloatValue) and is_plain_dequant(value):
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
        origin = self._reshaped_from(tensor)[-1]  # the tensor a kernel made, as a map
        origin_shape = self.graph.tensors[origin].shape
        map_shape = (int(np.prod(origin_shape[:-2])), *origin_shape[-2:]) if len(origin_shape) >= 3 \
            else origin_shape if self.facts.channels_last else (int(np.prod(origin_shape)),)
        positions = np.arange(int(np.prod(shape))).reshape(shape).transpose(axes)
        if self.facts.channels_last:  # a pixel's channels are consecutive: position = pixel * C + channel
            channels = map_shape[-1]
            positions = positions.reshape(-1, channels)
            order = positions[0]
            pixels = np.arange(len(positions))[:, None] * channels
            moves_values = not np.array_equal(positions, pixels + order)
        else:  # a channel's pixels are consecutive: position = channel * pixel + p
            pixel = int(np.prod(map_shape[1:]))
            positions = positions.reshape(-1, pixel)
            order = positions[:, 0] // pixel
            moves_values = not np.array_equal(positions, order[:, None] * pixel + np.arange(pixel))
        if moves_values and self.facts.channels_last \
                and (block := _depth_to_space_block(positions.reshape(-1), map_shape)) is not None:
            return self._depth_to_space(self._reshape_tensor(origin, map_shape, node), block, node,
                                        tuple(shape[a] for a in axes))
        if moves_values:
            raise MingError(f"{where}: transposing a {shape} tensor by {axes} moves values between pixels; ming "
                            "supports transpositions that reorder the channels of each pixel (a channel shuffle)")
        permuted = self._reshape_tensor(origin, map_shape, node)
        if not np.array_equal(order, np.arange(len(order))):
            base = permuted
            name = self.builder.node_name(node, "permute")
            permuted = self.builder.new_tensor(f"{name}_out", map_shape, self.graph.tensors[base].dtype)
            self.graph.nodes.append(Permute(name, node, base, permuted, tuple(int(c) for c in order)))
        return self._reshape_tensor(permuted, tuple(shape[a] for a in axes), node)

    def _depth_to_space(self, tensor: str, block: int, node: str, shape: tuple[int, ...]) -> str:
        """An H x W x (block^2 C) map's channel blocks moved into pixels (a `DepthToSpace` node), in `shape`."""
        height, width, channels = self.graph.tensors[tensor].shape
        name = self.builder.node_name(node, "depth_to_space")
        out = self.builder.new_tensor(f"{name}_out", (height * block, width * block, channels // block**2),
                                      self.graph.tensors[tensor].dtype)
        self.graph.nodes.append(DepthToSpace(name, node, tensor, out, block))
        view = self._reshape_tensor(out, shape, node)
        self.block_views.add(view)
        return view


# ---- helpers ----------------------------------------------------------------

MAX_MAP_RANK = 4  # N x H x W x C (or H x W x G x F): the most axes of a tensor that ming holds as a map


def _depth_to_space_block(positions: np.ndarray, map_shape: tuple[int, ...]) -> int | None:
    """The block of the depth-to-space that reads an H x W x C map's values in the order `positions` (TFLite's
    DEPTH_TO_SPACE: output pixel (y * b + dy, x * b + dx) channel c is input pixel (y, x) channel
    (dy * b + dx) * C / b^2 + c), or None."""
    if len(map_shape) != 3:
        return None
    height, width, channels = map_shape
    for block in range(2, int(np.sqrt(channels)) + 1):
        if channels % block**2 == 0:
            moved = np.arange(positions.size).reshape(height, width, block, block, channels // block**2)
            if np.array_equal(moved.transpose(0, 2, 1, 3, 4).reshape(-1), positions):
                return block
    return None


def _all_scalar(value: FloatValue) -> bool:
    arrays = [value.bias] + [a for t in value.terms for a in (*t.factors, t.offset)]
    return all(np.size(a) == 1 for a in arrays)


def unsliced(value, amap: AccessMap) -> tuple[object, AccessMap]:
    """A slice's source and the access map into it: index j of the slice is offset + stride * j of its source."""
    if not isinstance(value, Sliced):
        return value, amap
    results = tuple(AffineExpr(tuple(c * stride for c in e.coeffs), e.constant * stride + offset)
                    for e, offset, stride in zip(amap.results, value.offsets, value.strides))
    return value.base, AccessMap(amap.num_dims, results)


def transposition(source: AccessMap, result: AccessMap) -> tuple[int, ...] | None:
    """The axes (numpy.transpose's) of an element-wise op that reads its operand by `source` and writes by
    `result` in another order; None unless both are permutations of the loop dims and differ."""
    source_dims = [e.single_dim() for e in source.results]
    result_dims = [e.single_dim() for e in result.results]
    if source == result or None in source_dims + result_dims or sorted(source_dims) != sorted(result_dims) \
            or len(set(source_dims)) != len(source_dims):
        return None
    return tuple(source_dims.index(d) for d in result_dims)


def _holds_a_map(shape: tuple[int, ...]) -> bool:
    """Whether a tensor of `shape` can be a map or vector ming streams: a vector, a map (H x W x C, L x C), or one
    of them with a batch axis or its channels split in two (N x H x W x C, H x W x G x F). A reshape of a tensor of
    higher rank (IREE's steps between a DEPTH_TO_SPACE's blocks and its output) reads the map it came from."""
    return len(shape) <= MAX_MAP_RANK


def _leading_dropped_axes(offsets, sizes, source_shape, result_shape) -> int:
    """How many leading axes a rank-reducing slice drops whole: axes of one element in the source too (the batch).
    A unit axis it drops that the source has wider (one channel of a map: IREE's slice of a 1-channel part) stays,
    and the piece takes the result's shape."""
    dropped = len(sizes) - len(result_shape)
    leading = 0
    while leading < dropped and sizes[leading] == source_shape[leading] == 1 and offsets[leading] == 0:
        leading += 1
    return leading
