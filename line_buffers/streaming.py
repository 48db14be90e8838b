"""Streaming architecture (MING §IV-B): one process per kernel, streams in between.

Every intermediate tensor becomes a channel carrying its (C, H, W) map in raster
order. Sliding-window processes keep a line buffer of (K_h - 1) * dilation
previous rows plus the current one and a K_h x K_w x C window; padding is
generated at the borders. Regular reductions keep a row buffer (dense layers)
or per-channel accumulators (global pooling); element-wise processes work one
pixel at a time. An upsample keeps one input row (and the pixel being
repeated), a depth-to-space process the blocks dy >= 1 of one input row;
a pad process inserts a border no window absorbed and holds nothing. A
tensor read by several processes goes through a `split` process (one stream
per consumer, CODO's fan-out rule); a channel slice (ONNX Split,
Slice) is a split output carrying a range of the channels. A Flatten feeding a
dense layer costs nothing: the dense weights are permuted at compile time to
the stream's (row, column, channel) order. A channel permutation (a channel
shuffle) read only by layers that multiply every channel of a pixel by its own
weights costs nothing either (their weights are permuted); otherwise a
`permute` process reorders the channels of each pixel.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ming_py.classify import window_axis
from ming_py.dataflow import Channel, Port, Process, StreamGraph, Window
from ming_py.errors import MingError
from ming_py.ir import (
    MAC_OPS,
    REDUCTION,
    AddRequant,
    Arg,
    BilinearResize,
    Concat,
    DepthToSpace,
    FixedPointAdd,
    FixedPointMul,
    Graph,
    Kernel,
    LookupTable,
    MulRequant,
    Op,
    Operand,
    Pad,
    Permute,
    Rescale,
    Reshape,
    Slice,
    Upsample,
    WindowAverage,
    node_inputs,
)
from ming_py.kinds.bilinear import BilinearTables, table_problem
from ming_py.kinds.permute import PermuteOrder
from ming_py.kinds.split import SplitRoutes
from ming_py.contract.ming_host import input_layout_shape

from .fifo import record_order

INPUT, OUTPUT = "input", "output"


@dataclass(frozen=True)
class _View:
    """How a graph tensor is carried: by the stream of `source`, channels [first, first + C) of it, as a map
    of shape `shape` (C, H, W); with `order`, the tensor's channel c is the stream's channel first + order[c]
    (a channel permutation folded into the layers that read it); with `flat_order`, a vector's element i is
    element flat_order[i] of the map flattened (a transposition before a Flatten, folded into a dense layer)."""

    source: str  # producing process name, or INPUT
    shape: tuple[int, int, int]
    logical: tuple[int, ...]  # the tensor's own shape
    first: int = 0
    order: tuple[int, ...] | None = None
    flat_order: tuple[int, ...] | None = None


def stream_shape(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(C, H, W) of a tensor: leading unit dims dropped, vectors are 1 x 1 maps, C x L maps one row; more
    leading dims split the channels (a grouped convolution's groups), in the same order."""
    dims = list(shape)
    while len(dims) > 3 and dims[0] == 1:
        dims.pop(0)
    if len(dims) > 3:
        dims = [int(np.prod(dims[:-2])), *dims[-2:]]
    if len(dims) == 2 and dims[0] == 1:
        dims.pop(0)
    if len(dims) <= 1:  # a vector, or a scalar
        return (dims[0] if dims else 1, 1, 1)
    if len(dims) == 2:  # a map 1 high or 1 wide (IREE drops the unit axis): one row, unless its producer says
        return (dims[0], 1, dims[1])  # it is a column (`_Builder._oriented`)
    return tuple(dims)


def channel_axis(shape: tuple[int, ...]) -> int:
    """The axis of a tensor that its stream carries as channels (`stream_shape` drops leading unit axes)."""
    return len(shape) - 3 if len(shape) >= 3 else len(shape) - 1


def build_stream_graph(graph: Graph) -> StreamGraph:
    if len(graph.inputs) != 1:
        raise MingError(f"ming build supports one input (model has {len(graph.inputs)})")
    stream_graph = _Builder(graph).run()
    stream_graph.outputs = tuple(stream_graph.outputs[i] for i in record_order(stream_graph))
    return stream_graph


class _Builder:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.views: dict[str, _View] = {}
        self.processes: list[Process] = []
        self.streams: dict[str, tuple[int, int, int]] = {}  # per stream source, its map
        # per stream source: (consumer process, input slot, the channels it reads: (first, count)), in graph order
        self.consumers: dict[str, list[tuple[str, int, tuple[int, int]]]] = {}

    def run(self) -> StreamGraph:
        graph = self.graph
        graph_input = graph.inputs[0]
        shape = graph.shape_of(graph_input.tensor)  # IREE drops unit dims: take the map from the ONNX shape
        model_shape = input_layout_shape(graph_input)
        self.streams[INPUT] = stream_shape(model_shape)
        self.views[graph_input.tensor] = _View(INPUT, self.streams[INPUT], shape)
        for node in graph.nodes:
            if isinstance(node, (Reshape, Slice)) or (isinstance(node, Permute) and self._folds(node.output)):
                self.views[node.output] = self._moved(node)
                continue
            process, input_tensors, output_tensor = self._process(node)
            self.processes.append(process)
            for slot, tensor in enumerate(input_tensors):
                self._read(tensor, process.name, slot)
            out_shape = graph.shape_of(output_tensor)
            self.streams[process.name] = self._oriented(process, input_tensors, out_shape)
            self.views[output_tensor] = _View(process.name, self.streams[process.name], out_shape)
        for index, graph_output in enumerate(graph.outputs):
            self._read(graph_output.tensor, OUTPUT, index)
        channels, output_channels = self._connect()
        input_channel = next(c.name for c in channels.values() if c.producer == INPUT)
        input_port = Port(input_channel, shape, graph_input.name, graph_input.onnx_shape, graph_input.scale,
                          graph_input.zero_point, graph_input.host_ops, graph_input.dtype, graph_input.permutation,
                          graph_input.quantizer)
        output_ports = tuple(
            Port(output_channels[index], self.views[out.tensor].logical, out.name, out.onnx_shape, out.scale,
                 out.zero_point, out.host_ops, out.dtype, out.permutation, index=index)
            for index, out in enumerate(graph.outputs))
        return StreamGraph(graph.name, list(self.processes), channels, input_port, output_ports)

    def _oriented(self, process: Process, input_tensors: list[str], out_shape) -> tuple[int, int, int]:
        """The (C, H, W) a process streams: a window's own output map (a grouped convolution's G x F x L
        output 1 high or 1 wide is a map of G * F channels), a map 1 high or 1 wide as its input was where the
        pixels are the same (IREE keeps only C x L of either)."""
        if process.window is not None:
            window = process.window
            return (window.out_channels, window.out_height, window.out_width)
        shape = stream_shape(out_shape)
        if len(_squeezed(out_shape)) != 2:
            return shape
        inputs = [self.views[t].shape for t in input_tensors if t in self.views]
        same = [s for s in inputs if s[1] * s[2] == shape[1] * shape[2] and 1 in s[1:]]
        return (shape[0], *same[0][1:]) if same else shape

    # ---- views: data movement without a process ----

    def _moved(self, node: Reshape | Slice | Permute) -> _View:
        """The view of a Reshape, a channel Slice or a folded Permute's output."""
        view = self.views[node.input]
        logical = self.graph.shape_of(node.output)
        if isinstance(node, Reshape):
            return replace(view, logical=logical)
        if isinstance(node, Permute) and len(view.logical) == 1 and view.order is None and view.flat_order is None:
            return replace(view, logical=logical, flat_order=tuple(node.order))
        _, h, w = self._map_input(node.input, node.name)
        if isinstance(node, Permute):
            order = node.order if view.order is None else tuple(view.order[i] for i in node.order)
            return replace(view, logical=logical, order=order)
        if view.order is not None:
            raise MingError(f"layer {node.source}: a channel slice of a permuted map is not supported")
        return replace(view, shape=(logical[0], h, w), logical=logical, first=view.first + node.start)

    def _read(self, tensor: str, consumer: str, slot: int) -> None:
        view = self.views[tensor]
        self.consumers.setdefault(view.source, []).append((consumer, slot, (view.first, view.shape[0])))

    def _folds(self, tensor: str) -> bool:
        """Whether every reader of `tensor` (through reshapes) multiplies each channel of a pixel by its own
        weights (a 1x1 or full conv, a dense layer): a permutation of its channels is then a permutation of
        their weights."""
        readers = [n for n in self.graph.nodes if tensor in node_inputs(n)]
        if any(o.tensor == tensor for o in self.graph.outputs) or not readers:
            return False
        for node in readers:
            if isinstance(node, Reshape):
                if not self._folds(node.output):
                    return False
                continue
            activation = next((o for o in node.inputs if o.tensor not in self.graph.constants), None) \
                if isinstance(node, Kernel) and node.op in MAC_OPS else None
            channel = activation.map.results[0].single_dim() if activation is not None else None
            if activation is None or activation.tensor != tensor or channel is None \
                    or node.iterators[channel] != REDUCTION:
                return False
        return True

    # ---- channels and fan-out ----

    def _connect(self) -> tuple[dict[str, Channel], dict[int, str]]:
        """The channels by name, and the channel of each model output (the accelerator's output port reads
        output i at slot i)."""
        channels: dict[str, Channel] = {}
        inputs: dict[str, dict[int, str]] = {p.name: {} for p in self.processes}  # process -> slot -> channel
        outputs: dict[str, list[str]] = {p.name: [] for p in self.processes}

        def add(producer: str, consumer: str, slot: int, shape) -> None:
            name = f"{producer}_to_{consumer}"
            if name in channels:  # the same tensor feeds two operands of one process
                name = f"{name}_{slot}"
            channels[name] = Channel(name, producer, consumer, *shape)
            outputs.setdefault(producer, []).append(name)
            inputs.setdefault(consumer, {})[slot] = name

        splits = []
        for source in [INPUT] + [p.name for p in self.processes]:
            consumers = self.consumers.get(source, [])
            if not consumers:
                raise MingError(f"layer {source}: its result is never used")
            shape = self.streams[source]
            whole = (0, shape[0])
            if len(consumers) == 1 and consumers[0][2] == whole:
                add(source, *consumers[0][:2], shape)
                continue
            routes = tuple(channels_read for _, _, channels_read in consumers)
            split = Process(f"{source}_split", "split", source, (), (),
                            params=None if all(r == whole for r in routes) else SplitRoutes(routes))
            add(source, split.name, 0, shape)
            for consumer, slot, (_, count) in consumers:
                add(split.name, consumer, slot, (count, *shape[1:]))
            splits.append(split)
        self.processes = _topological([
            replace(p, inputs=tuple(inputs[p.name][slot] for slot in sorted(inputs[p.name])),
                    outputs=tuple(outputs[p.name]))
            for p in self.processes + splits])
        return {name: channels[name] for name in sorted(channels)}, inputs[OUTPUT]

    # ---- one process per node ----

    def _process(self, node) -> tuple[Process, list[str], str]:
        if isinstance(node, Permute):
            self._map_input(node.input, node.name)
            return (Process(node.name, "permute", node.source, (), (), params=PermuteOrder(tuple(node.order))),
                    [node.input], node.output)
        if isinstance(node, Concat):
            shapes = [self._map_input(t, node.name) for t in node.inputs]
            if node.axis != 0 or any(s[1:] != shapes[0][1:] for s in shapes):
                raise MingError(f"layer {node.source}: only channel concatenation of equal-size maps streams")
            return Process(node.name, "concat", node.source, (), ()), list(node.inputs), node.output
        if isinstance(node, Upsample):
            return self._upsample(node), [node.input], node.output
        if isinstance(node, DepthToSpace):
            return self._depth_to_space(node), [node.input], node.output
        if isinstance(node, BilinearResize):
            return self._bilinear(node), [node.input], node.output
        if isinstance(node, Pad):
            return self._pad(node), [node.input], node.output
        kernel: Kernel = node
        activations = [o for o in kernel.inputs if o.tensor not in self.graph.constants]
        out_shape = self.graph.shape_of(kernel.output.tensor)
        if kernel.op in MAC_OPS and not _multiplies_activation_by_weights(kernel, self.graph.constants):
            raise MingError(f"layer {kernel.source}: its multiply-accumulate `{kernel.payload}` over "
                            f"{len(kernel.inputs)} inputs is not acc + x * w of an activation x and constant "
                            "weights w; not supported")
        if kernel.op in MAC_OPS and len(out_shape) <= 1 and not _one_window_position(kernel, activations[0]):
            return self._dense(kernel, activations[0]), [activations[0].tensor], kernel.output.tensor
        if kernel.op in MAC_OPS or kernel.op in ("maxpool", "sumpool"):
            if len(out_shape) == 1 and kernel.op not in MAC_OPS:  # a pool over the whole map
                self._map_input(activations[0].tensor, kernel.name)
                kind = "global_avgpool" if kernel.op == "sumpool" else "global_maxpool"
                return (Process(kernel.name, kind, kernel.source, (), (), epilogue=kernel.epilogue),
                        [activations[0].tensor], kernel.output.tensor)
            return self._window(kernel, activations[0]), [activations[0].tensor], kernel.output.tensor
        if kernel.op in ("add", "mul") and isinstance(kernel.epilogue,
                                                         (AddRequant, MulRequant, FixedPointAdd, FixedPointMul)) \
                or kernel.op in ("max", "min") and kernel.epilogue is None:
            return (Process(kernel.name, self._binary_kind(kernel), kernel.source, (), (), epilogue=kernel.epilogue),
                    [o.tensor for o in kernel.inputs], kernel.output.tensor)
        if isinstance(kernel.epilogue, (Rescale, LookupTable)):
            self._map_input(kernel.inputs[0].tensor, kernel.name)
            per_channel = isinstance(kernel.epilogue, LookupTable) and kernel.epilogue.channel_dim is not None
            if per_channel and kernel.epilogue.channel_dim != _streamed_channel_dim(kernel, out_shape):
                raise MingError(f"layer {kernel.source}: its per-channel tables run along axis "
                                f"{kernel.epilogue.channel_dim} of {out_shape}, not along the channels it streams")
            kind = "rescale" if isinstance(kernel.epilogue, Rescale) else "table"
            return (Process(kernel.name, kind, kernel.source, (), (), epilogue=kernel.epilogue),
                    [kernel.inputs[0].tensor], kernel.output.tensor)
        raise MingError(f"layer {kernel.source}: {kernel.op} kernels cannot be streamed yet")

    def _binary_kind(self, kernel: Kernel) -> str:
        """"add", "mul", "max" or "min" for two maps of one shape; "broadcast" for a map and a vector (or scalar)
        read at every pixel (Add, Sub, Mul: the lifter gives MAXIMUM and MINIMUM two maps of one shape)."""
        for operand in kernel.inputs:
            self._map_input(operand.tensor, kernel.name)
        broadcast = [o for o in kernel.inputs if len(o.map.results) < len(kernel.dims)]
        if not broadcast:
            return kernel.op
        read = [e.single_dim() for e in broadcast[0].map.results]
        channel = kernel.output.map.results[0].single_dim()
        if len(kernel.dims) != 3 or read not in ([channel], []):
            raise MingError(f"layer {kernel.source}: only a per-channel vector or a scalar broadcasts over a map "
                            f"(this operand is read as {broadcast[0].map})")
        return "broadcast"

    def _map_input(self, tensor: str, layer: str) -> tuple[int, int, int]:
        """The (C, H, W) of an input that must arrive as the map it logically is (its channels may be split
        into groups)."""
        view = self.views[tensor]
        if view.flat_order is not None:
            raise MingError(f"layer {layer}: consumes a transposed and flattened map; only a dense layer "
                            "(Gemm/MatMul) reads one")
        if _squeezed(view.logical) != _squeezed(view.shape) and \
                (len(view.logical) <= 3 or stream_shape(view.logical) != view.shape):
            raise MingError(f"layer {layer}: consumes a reshaped map ({view.shape} viewed as {view.logical}); "
                            "only Flatten into Gemm/MatMul is streamed")
        return view.shape

    def _upsample(self, node: Upsample) -> Process:
        c, h, w = self._map_input(node.input, node.name)
        rows, cols = node.factors[-2:]
        if any(f != 1 for f in node.factors[:-2]) or \
                stream_shape(self.graph.shape_of(node.output)) != (c, h * rows, w * cols):
            raise MingError(f"layer {node.source}: only the rows and columns of a C x H x W map are upsampled")
        return Process(node.name, "upsample", node.source, (), ())

    def _depth_to_space(self, node: DepthToSpace) -> Process:
        c, h, w = self._map_input(node.input, node.name)
        block = node.block
        if block < 1 or c % (block * block) or \
                stream_shape(self.graph.shape_of(node.output)) != (c // (block * block), h * block, w * block):
            raise MingError(f"layer {node.source}: depth to space with block {block} takes a (block^2 C) x H x W map "
                            f"to C x {block}H x {block}W ({c} x {h} x {w} in, "
                            f"{'x'.join(map(str, self.graph.shape_of(node.output)))} out)")
        return Process(node.name, "depth_to_space", node.source, (), ())

    def _bilinear(self, node: BilinearResize) -> Process:
        c, h, w = self._map_input(node.input, node.name)
        out_shape = stream_shape(self.graph.shape_of(node.output))
        if out_shape != (c, len(node.rows), len(node.cols)):
            raise MingError(f"layer {node.source}: bilinear resize to {len(node.rows)} x {len(node.cols)} pixels "
                            f"(its row and column tables) keeps the {c} channels of its {c} x {h} x {w} map, but "
                            f"its output is {'x'.join(map(str, self.graph.shape_of(node.output)))}")
        rows, cols = tuple(map(tuple, node.rows)), tuple(map(tuple, node.cols))
        problem = table_problem(rows, h, "row", "y") or table_problem(cols, w, "column", "x")
        if problem:
            raise MingError(f"layer {node.source}: bilinear resize of a {c} x {h} x {w} map: {problem}")
        return Process(node.name, "bilinear", node.source, (), (), params=BilinearTables(rows, cols))

    def _pad(self, node: Pad) -> Process:
        c, h, w = self._map_input(node.input, node.name)
        (top, bottom), (left, right) = node.padding[-2:]
        if any(p != (0, 0) for p in node.padding[:-2]) or len(node.padding) < 2:
            raise MingError(f"layer {node.source}: padding along channels is not supported; ming pads rows and "
                            "columns")
        window = Window(in_channels=c, in_height=h, in_width=w, out_channels=c, out_height=h + top + bottom,
                        out_width=w + left + right, pads=(top, left, bottom, right), pad_value=node.value)
        return Process(node.name, "pad", node.source, (), (), window=window)

    def _window(self, kernel: Kernel, activation: Operand) -> Process:
        """A sliding window or 1x1 process. The output's channel dims are the group (if any, the one the
        activation's channels share) and the channel in the group; the activation's are the group and the
        input channel in the group: a conv (no group), a grouped conv, or a depthwise conv (neither
        channel dim in the group)."""
        c, h, w = self._map_input(activation.tensor, kernel.name)
        channel_exprs, row_expr, col_expr = self._spatial_exprs(activation, (c, h, w), kernel)
        out_channel_dims, oh_dim, ow_dim = _output_dims(kernel, row_expr, col_expr)
        in_channel_dims = [e.single_dim() for e in channel_exprs]
        group_dim = in_channel_dims[0] if in_channel_dims and in_channel_dims[0] in out_channel_dims[:1] else None
        in_group, out_group = in_channel_dims[group_dim is not None:], out_channel_dims[group_dim is not None:]
        if None in in_group or len(in_group) > 1 or len(out_group) > 1 \
                or any(kernel.iterators[d] != REDUCTION for d in in_group):
            raise MingError(f"layer {kernel.source}: channel access {activation.map} -> {kernel.output.map} is not "
                            "a convolution's")
        kh_dim, stride_h, dilation_h = _spatial(row_expr, oh_dim, kernel, "row")
        kw_dim, stride_w, dilation_w = _spatial(col_expr, ow_dim, kernel, "column")
        padding = list(activation.padding or ((0, 0),) * len(activation.map.results))
        if any(p != (0, 0) for p in padding[:len(channel_exprs)]):
            raise MingError(f"layer {kernel.source}: padding along channels is not supported")
        if row_expr is None:
            padding.insert(len(channel_exprs), (0, 0))
        if col_expr is None:
            padding.append((0, 0))
        groups = kernel.dims[group_dim] if group_dim is not None else 1
        out_channels = int(np.prod([kernel.dims[d] for d in out_channel_dims]))
        channelwise = not in_group and not out_group and group_dim is not None  # depthwise and pooling
        window = Window(
            in_channels=c, in_height=h, in_width=w, out_channels=out_channels,
            out_height=kernel.dims[oh_dim] if oh_dim is not None else 1,
            out_width=kernel.dims[ow_dim] if ow_dim is not None else 1,
            kernel=(kernel.dims[kh_dim] if kh_dim is not None else 1, kernel.dims[kw_dim] if kw_dim is not None else 1),
            stride=(stride_h, stride_w), dilation=(dilation_h, dilation_w),
            pads=(padding[-2][0], padding[-1][0], padding[-2][1], padding[-1][1]), pad_value=activation.pad_value,
            groups=1 if channelwise else groups)
        window = _single_position_strides(window, oh_dim is None, ow_dim is None)
        if kernel.op in ("maxpool", "sumpool"):
            kind = {"maxpool": "maxpool", "sumpool": "avgpool"}[kernel.op]
            if isinstance(kernel.epilogue, WindowAverage):  # onnxruntime's float32 sum, element by element
                kind = "float_avgpool"
            return Process(kernel.name, kind, kernel.source, (), (), window=window, epilogue=kernel.epilogue)
        weight = next(o for o in kernel.inputs if o.tensor in self.graph.constants)
        array = self.graph.constants[weight.tensor]
        if channelwise:
            weights = _gather(array, weight, kernel.dims, [group_dim, kh_dim, kw_dim])
            return Process(kernel.name, "depthwise", kernel.source, (), (), window=window,
                           weights=weights.reshape(window.out_channels, -1), epilogue=kernel.epilogue)
        order = [group_dim, *(out_group or [None]), *(in_group or [None]), kh_dim, kw_dim]
        weights = _gather(array, weight, kernel.dims, order).reshape(out_channels, c // groups, -1)
        weights = weights[:, self._stream_channels(activation.tensor, c // groups)]
        if window.kernel == (1, 1) and window.pads == (0, 0, 0, 0):
            return Process(kernel.name, "pointwise", kernel.source, (), (), window=window,
                           weights=weights.reshape(out_channels, -1), epilogue=kernel.epilogue)
        return Process(kernel.name, "conv", kernel.source, (), (), window=window, weights=weights,
                       epilogue=kernel.epilogue)

    def _spatial_exprs(self, activation: Operand, shape: tuple[int, int, int], kernel: Kernel):
        """The activation's channel accesses, and its row and column accesses (None where IREE dropped a unit
        axis of the map: a map 1 high or 1 wide, or a single input channel)."""
        *channel_exprs, row_expr, col_expr = (None, None, *activation.map.results)
        c, h, w = shape
        if len(_squeezed(self.graph.shape_of(activation.tensor))) == 2 and 1 in (h, w) and c > 1:
            *channel_exprs, spatial = activation.map.results
            row_expr, col_expr = (spatial, None) if w == 1 else (None, spatial)
        channel_exprs = [e for e in channel_exprs if e is not None]
        if not channel_exprs and c != 1:
            raise MingError(f"layer {kernel.source}: input access {activation.map} is not a C x H x W map (maps of "
                            "a single channel inside the network are not supported); give the layer and the one "
                            "before it at least two channels")
        return channel_exprs, row_expr, col_expr

    def _stream_channels(self, tensor: str, channels: int) -> np.ndarray:
        """Per stream channel of `tensor`'s view, the tensor channel it carries (a folded permutation; the
        identity over `channels` without one)."""
        order = self.views[tensor].order
        return np.arange(channels) if order is None else np.argsort(order)

    def _dense(self, kernel: Kernel, activation: Operand) -> Process:
        view = self.views[activation.tensor]
        n_dim = kernel.output.map.results[0].single_dim() if kernel.output.map.results else None
        k_dims = [e.single_dim() for e in activation.map.results]
        one_channel = tuple(view.shape) == (1, *view.logical)  # an H x W map of one channel (IREE dropped C)
        whole_map = len(k_dims) > 1 and None not in k_dims and len(set(k_dims)) == len(k_dims) \
            and (tuple(view.logical) == tuple(view.shape) or one_channel) and len(view.logical) == len(k_dims)
        if not whole_map:  # else a window as large as the map (IREE writes such a convolution as a contraction)
            if len(view.logical) != 1 and stream_shape(view.logical) != (int(np.prod(view.logical)), 1, 1):
                raise MingError(f"layer {kernel.source}: dense layer over a {view.logical} tensor is not supported")
            k_dims = k_dims[-1:]
        weight = next(o for o in kernel.inputs if o.tensor in self.graph.constants)
        weights = _gather(self.graph.constants[weight.tensor], weight, kernel.dims, [n_dim, *k_dims])
        if whole_map:
            weights = _zero_beyond_window(weights, tuple(view.logical), kernel.source)
        weights = weights.reshape(weights.shape[0], -1)  # flat index channel * H * W + row * W + col
        if view.flat_order is not None:  # the dense layer reads element i of the map at flat index flat_order[i]
            weights = weights[:, np.argsort(view.flat_order)]
        c, h, w = view.shape
        # stream position j = (row * W + col) * C + channel holds flat index channel * H * W + row * W + col
        # (of the tensor channel the stream channel carries)
        flat = np.arange(c * h * w).reshape(c, h, w)[self._stream_channels(activation.tensor, c)]
        stream_to_flat = flat.transpose(1, 2, 0).reshape(-1)
        return Process(kernel.name, "dense", kernel.source, (), (), weights=weights[:, stream_to_flat],
                       epilogue=kernel.epilogue)


def _multiplies_activation_by_weights(kernel: Kernel, constants) -> bool:
    """Whether the kernel computes acc + x * w of its two inputs, one an activation and the other constant
    weights, the values as they are: what every multiply-accumulate process computes (a zero point left in the
    body, acc + (x - zp) * w, would be dropped; the frontend folds it into the bias)."""
    payload, inputs = kernel.payload, kernel.inputs
    if len(inputs) != 2 or sum(o.tensor in constants for o in inputs) != 1:
        return False
    if not (isinstance(payload, Op) and payload.name == "add" and len(payload.args) == 2):
        return False
    acc, product = payload.args if isinstance(payload.args[0], Arg) and payload.args[0].index == 2 \
        else payload.args[::-1]
    return acc == Arg(2) and isinstance(product, Op) and product.name == "mul" \
        and sorted(a.index for a in product.args if isinstance(a, Arg)) == [0, 1]


def _streamed_channel_dim(kernel: Kernel, out_shape) -> int | None:
    """The loop dim of the channels `kernel` streams; None for an output of one value (IREE folds a 1 x 1 x 1
    map into a scalar)."""
    if not kernel.output.map.results:
        return None
    return kernel.output.map.results[channel_axis(out_shape)].single_dim()


def _one_window_position(kernel: Kernel, activation: Operand) -> bool:
    """Whether a kernel of a single output pixel is a window, not a dense layer: a depthwise one (its output
    channel indexes the input) or one over padding (TOSA drops the 1 x 1 output of either, and the channel axis
    too where there is one channel: a dense layer never reads padding)."""
    if any(p != (0, 0) for p in activation.padding):
        return True
    if not kernel.output.map.results:
        return False
    channel = set(kernel.output.map.results[0].used_dims())
    return any(channel & set(e.used_dims()) for e in activation.map.results)


def _squeezed(shape) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


def _single_position_strides(window: Window, one_high: bool, one_wide: bool) -> Window:
    """An output 1 high or 1 wide whose axis IREE dropped has no stride in the access: the one that leaves a
    single window position along it (any larger one computes the same)."""
    (kh, kw), (dh, dw) = window.kernel, window.dilation
    stride_h = window.padded_height - dh * (kh - 1) if one_high else window.stride[0]
    stride_w = window.padded_width - dw * (kw - 1) if one_wide else window.stride[1]
    return replace(window, stride=(max(stride_h, 1), max(stride_w, 1)))


def _output_dims(kernel: Kernel, row_expr, col_expr) -> tuple[list[int], int | None, int | None]:
    """The output's channel dims and its row and column dims (None: the map is 1 high or 1 wide there, an
    axis IREE dropped): the spatial dims are those the input's row and column accesses slide with."""
    out_dims = [e.single_dim() for e in kernel.output.map.results]
    if None in out_dims:
        raise MingError(f"layer {kernel.source}: output access {kernel.output.map} is not a C x H x W map")
    sliding = [e.used_dims() if e is not None else () for e in (row_expr, col_expr)]
    oh_dim, ow_dim = ([d for d in out_dims if d in dims][-1:] or [None] for dims in sliding)
    oh_dim, ow_dim = oh_dim[0], ow_dim[0]
    channel_dims = [d for d in out_dims if d not in (oh_dim, ow_dim)]
    if len(channel_dims) + (oh_dim is not None) + (ow_dim is not None) != len(out_dims) or not channel_dims:
        raise MingError(f"layer {kernel.source}: output access {kernel.output.map} is not a C x H x W map (maps of "
                        "a single channel inside the network are not supported); give the layer and the one before it "
                        "at least two channels")
    return channel_dims, oh_dim, ow_dim


def _spatial(expr, out_dim: int | None, kernel: Kernel, what: str) -> tuple[int | None, int, int]:
    """(window dim, stride, dilation) of a `stride * o + dilation * k` access (`classify.window_axis`); an
    absent axis (None: IREE dropped it, 1 wide) has no window, and an output 1 wide there no stride."""
    if expr is None:
        return None, 1, 1
    if out_dim is None:
        window = [d for d in expr.used_dims() if kernel.iterators[d] == REDUCTION]
        if expr.constant or len(window) != len(expr.used_dims()) or len(window) > 1:
            raise MingError(f"layer {kernel.source}: {what} access `{expr}` is not a sliding window")
        return (window[0], 1, expr.coeffs[window[0]]) if window else (None, 1, 1)
    try:
        axis = window_axis(expr, out_dim, kernel.iterators)
    except ValueError as reason:
        raise MingError(f"layer {kernel.source}: {what} access `{expr}` {reason}") from None
    return axis.window_dim, axis.stride, axis.dilation


def _zero_beyond_window(weights: np.ndarray, logical: tuple[int, ...], source: str) -> np.ndarray:
    """The weights (N, *window) of a window at the map's origin that never reads the map's last rows or columns
    (a VALID convolution whose one output position leaves them out), extended with zeros to the whole map (N,
    *logical)."""
    short = [size - extent for size, extent in zip(logical, weights.shape[1:])]
    if any(gap < 0 for gap in short):
        raise MingError(f"layer {source}: its window of {weights.shape[1:]} over a {logical} map reads beyond "
                        "the map; not supported (a bug in ming, please report it)")
    return np.pad(weights, [(0, 0)] + [(0, gap) for gap in short])


def _gather(array: np.ndarray, operand: Operand, dims: tuple[int, ...], order: list[int | None]) -> np.ndarray:
    """The constant indexed by the loop dims in `order` (None: a unit axis)."""
    grids = np.meshgrid(*[np.arange(dims[d]) if d is not None else np.arange(1) for d in order], indexing="ij")
    position = {d: g for d, g in zip(order, grids) if d is not None}
    index = []
    for expr in operand.map.results:
        value = np.full(grids[0].shape, expr.constant)
        for d, c in enumerate(expr.coeffs):
            if c:
                if d not in position:
                    raise MingError(f"weight access {operand.map} uses an unexpected loop")
                value = value + c * position[d]
        index.append(value)
    return array[tuple(index)]


def _topological(processes: list[Process]) -> list[Process]:
    producer_of = {c: p.name for p in processes for c in p.outputs}
    done: set[str] = set()
    ordered: list[Process] = []
    pending = list(processes)
    while pending:
        for p in pending:
            if all(producer_of.get(c, INPUT) in done | {INPUT} for c in p.inputs):
                ordered.append(p)
                done.add(p.name)
                pending.remove(p)
                break
        else:
            raise MingError("the dataflow graph has a cycle")
    return ordered
