"""Channels-last graphs (TFLite's NHWC) in ming's channels-first layout.

IREE keeps a TFLite model's activations as H x W x C tensors; ming streams
C x H x W maps (raster order, channels innermost on the stream, so the bytes
on the bus are the same). `channels_first` transposes every 3-d tensor by
permuting its shape and the access maps and padding of every operand that
reads or writes it; the model's NHWC input and output become a host-side axis
permutation. Constants keep their layout (their maps are unchanged).

IREE drops unit axes, so a 2-d tensor is either a map one high or one wide
(L x C, a Conv1D's; transposed to ming's C x L) or a map of one channel
(H x W: the caller names those, `one_channel`, from the model's own shapes;
they keep their layout, which is already ming's 1 x H x W without the unit
axis). A 2-d tensor 1 x C is a vector and stays as it is.

A map whose channels IREE splits over its last two axes, ... x G x F (a
depthwise convolution with a depth multiplier: channel g * F + f reads input
channel g; the caller names them, `split_channels`), becomes G x F x ...,
ming's form of a grouped convolution's output, which a reshape merges into the
G * F channels of a map in the same order.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ming_py.errors import MingError
from ming_py.ir import (AccessMap, Concat, Graph, GraphInput, GraphOutput, Kernel, Operand, Pad, Permute, Reshape,
                        TensorInfo, Upsample)

LC_TO_CL = (1, 0)
HWC_TO_CHW = (2, 0, 1)  # new axis i is old axis HWC_TO_CHW[i]
NHWC_TO_NCHW = (0, 3, 1, 2)
_PERMUTATIONS = {2: LC_TO_CL, 3: HWC_TO_CHW, 4: NHWC_TO_NCHW}


def channels_first(graph: Graph, one_channel: frozenset[str] = frozenset(),
                   split_channels: frozenset[str] = frozenset(), op_types: dict[str, str] | None = None) -> Graph:
    moved = {name: _PERMUTATIONS[len(info.shape)] for name, info in graph.tensors.items()
             if len(info.shape) == 3 or (len(info.shape) == 4 and info.shape[0] == 1)
             or (len(info.shape) == 2 and info.shape[0] != 1 and name not in one_channel)}
    for name in split_channels:  # ... x G x F -> G x F x ...
        rank = len(graph.tensors[name].shape)
        moved[name] = (rank - 2, rank - 1, *range(rank - 2))
    for name, order in moved.items():
        info = graph.tensors[name]
        graph.tensors[name] = TensorInfo(name, _permute(info.shape, order), info.dtype)
    nodes = []
    for node in graph.nodes:
        nodes.append(node)
        if isinstance(node, Kernel):
            node.inputs = tuple(_operand(o, moved) for o in node.inputs)
            node.output = _operand(node.output, moved)
        elif isinstance(node, Concat) and node.output in moved:
            node.axis = _PERMUTATIONS[len(graph.tensors[node.output].shape)].index(node.axis)
        elif isinstance(node, Pad) and node.output in moved:
            node.padding = _permute(node.padding)
        elif isinstance(node, Upsample) and node.output in moved:
            node.factors = _permute(node.factors)
        elif isinstance(node, Reshape) and not _keeps_order(graph, node, moved):
            nodes[-1:] = _flattened_in_nhwc(graph, node, moved, (op_types or {}).get(node.source, "RESHAPE"))
    graph.nodes = nodes
    graph.inputs = [replace(i, permutation=_port_permutation(graph, i, moved, "input")) for i in graph.inputs]
    graph.outputs = [replace(o, permutation=_port_permutation(graph, o, moved, "output")) for o in graph.outputs]
    return graph


def _port_permutation(graph: Graph, port: GraphInput | GraphOutput, moved: dict[str, tuple[int, ...]],
                      role: str) -> tuple:
    """The host permutation of a model input or output: its tensor's own, which needs the tensor to have the
    model's rank, a batch axis first (an N x L x C port's tensor is moved as H x W x C with H = N = 1). A moved
    tensor without one is refused: the host would pass its channels-last values on unpermuted."""
    if port.tensor not in moved:
        return ()
    shape = graph.tensors[port.tensor].shape
    if len(shape) != len(port.onnx_shape) or len(shape) < 3:
        raise MingError(f"model {role} '{port.name}' of shape {list(port.onnx_shape)} reaches ming as a "
                        f"{len(shape)}-d channels-last map; ming reorders only maps with the model's batch axis for "
                        "the host (export the model with a batch axis of 1 and the channels last)")
    return _PERMUTATIONS[len(shape)]


def _permute(items: tuple, order: tuple[int, ...] | None = None) -> tuple:
    return tuple(items[a] for a in (order or _PERMUTATIONS[len(items)]))


def _operand(operand: Operand, moved: dict[str, tuple[int, ...]]) -> Operand:
    if operand.tensor not in moved:
        return operand
    order = moved[operand.tensor]
    amap = AccessMap(operand.map.num_dims, _permute(operand.map.results, order))
    return replace(operand, map=amap, padding=_permute(operand.padding, order) if operand.padding else ())


def _keeps_order(graph: Graph, node: Reshape, moved: dict[str, tuple[int, ...]]) -> bool:
    """Whether a reshape keeps its meaning across the transposition: it only adds or drops unit dimensions
    around a moved map, it merges the G x F channel axes of a split map into G * F channels, or the moved map
    it flattens (or makes) has one channel or is 1 x 1."""
    shapes = [graph.tensors[t].shape for t in (node.input, node.output)]
    if node.input in moved and node.output in moved and _squeezed(shapes[0]) == _squeezed(shapes[1]):
        return True
    if moved.get(node.input, ())[:2] == (len(shapes[0]) - 2, len(shapes[0]) - 1) \
            and shapes[1] == (shapes[0][0] * shapes[0][1],) + shapes[0][2:]:  # split channels merged
        return True
    return all(tensor not in moved or _orders_agree(shape) for tensor, shape in zip((node.input, node.output), shapes))


def _flattened_in_nhwc(graph: Graph, node: Reshape, moved: dict[str, tuple[int, ...]],
                       op: str) -> list[Reshape | Permute]:
    """A Flatten of an H x W x C (or L x C) map into a vector, in TFLite's order (pixel-major), as ming's
    channel-major flatten followed by a `Permute` of the vector, which folds into the weights of the dense
    layers that read it."""
    label = f"node '{node.source}' ({op})"
    if node.input not in moved:
        raise MingError(f"{label} makes an H x W x C map of a vector (a Dense reshaped into a map); ming streams "
                        "maps into dense layers (Flatten -> Dense) but not back (start the decoder from a map)")
    if node.output in moved or len(_squeezed(graph.tensors[node.output].shape)) != 1:
        raise MingError(f"{label} reshapes an H x W x C map into another map, which moves values between pixels; "
                        "ming streams reshapes that flatten a map into a vector (Flatten -> Dense)")
    shape = graph.tensors[node.input].shape
    channel = len(shape) - 3 if len(shape) >= 3 else 0
    channels, pixels = shape[channel], math.prod(shape[channel + 1:])
    # element p * C + c of the pixel-major vector is element c * P + p of the channel-major one
    order = np.arange(channels * pixels).reshape(channels, pixels).T.reshape(-1)
    info = graph.tensors[node.output]
    channel_major = f"{node.output}_channel_major"
    graph.tensors[channel_major] = TensorInfo(channel_major, info.shape, info.dtype)
    return [replace(node, output=channel_major),
            Permute(f"{node.name}_pixel_major", node.source, channel_major, node.output, tuple(int(i) for i in order))]


def _orders_agree(shape: tuple) -> bool:
    """Whether a moved (channels-first) tensor has its values in the same order as before: one channel, or
    one pixel."""
    channel = len(shape) - 3 if len(shape) >= 3 else 0
    return shape[channel] == 1 or math.prod(shape[channel + 1:]) == 1


def _squeezed(shape: tuple) -> tuple:
    return tuple(d for d in shape if d != 1)
