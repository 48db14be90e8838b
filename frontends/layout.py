"""Channels-last graphs (TFLite's NHWC) in ming's channels-first layout.

IREE keeps a TFLite model's activations as H x W x C tensors; ming streams
C x H x W maps (raster order, channels innermost on the stream, so the bytes
on the bus are the same). `channels_first` transposes every 3-d tensor by
permuting its shape and the access maps and padding of every operand that
reads or writes it; the model's NHWC input and output become a host-side axis
permutation. Constants keep their layout (their maps are unchanged).
"""

from __future__ import annotations

from dataclasses import replace

from ming_py.errors import MingError
from ming_py.ir import AccessMap, Concat, Graph, Kernel, Operand, Pad, Reshape, TensorInfo, Upsample

HWC_TO_CHW = (2, 0, 1)  # new axis i is old axis HWC_TO_CHW[i]
NHWC_TO_NCHW = (0, 3, 1, 2)
_PERMUTATIONS = {3: HWC_TO_CHW, 4: NHWC_TO_NCHW}


def channels_first(graph: Graph) -> Graph:
    moved = {name for name, info in graph.tensors.items()
             if len(info.shape) == 3 or (len(info.shape) == 4 and info.shape[0] == 1)}
    for name in moved:
        info = graph.tensors[name]
        graph.tensors[name] = TensorInfo(name, _permute(info.shape), info.dtype)
    for node in graph.nodes:
        if isinstance(node, Kernel):
            node.inputs = tuple(_operand(o, moved) for o in node.inputs)
            node.output = _operand(node.output, moved)
        elif isinstance(node, Concat) and node.output in moved:
            node.axis = _PERMUTATIONS[len(graph.tensors[node.output].shape)].index(node.axis)
        elif isinstance(node, Pad) and node.output in moved:
            node.padding = _permute(node.padding)
        elif isinstance(node, Upsample) and node.output in moved:
            node.factors = _permute(node.factors)
        elif isinstance(node, Reshape):
            _check_reshape(graph, node, moved)
    graph.inputs = [replace(i, permutation=NHWC_TO_NCHW) if i.tensor in moved and len(i.onnx_shape) == 4 else i
                    for i in graph.inputs]
    graph.outputs = [replace(o, permutation=NHWC_TO_NCHW) if o.tensor in moved and len(o.onnx_shape) == 4 else o
                     for o in graph.outputs]
    return graph


def _permute(items: tuple) -> tuple:
    return tuple(items[a] for a in _PERMUTATIONS[len(items)])


def _operand(operand: Operand, moved: set[str]) -> Operand:
    if operand.tensor not in moved:
        return operand
    amap = AccessMap(operand.map.num_dims, _permute(operand.map.results))
    return replace(operand, map=amap, padding=_permute(operand.padding) if operand.padding else ())


def _check_reshape(graph: Graph, node: Reshape, moved: set[str]) -> None:
    """A reshape keeps its meaning across the transposition when it only adds or drops unit dimensions
    around a moved map, or when the moved map it flattens (or makes) has one channel or is 1 x 1."""
    shapes = [graph.tensors[t].shape for t in (node.input, node.output)]
    if node.input in moved and node.output in moved and _squeezed(shapes[0]) == _squeezed(shapes[1]):
        return
    for tensor, shape in zip((node.input, node.output), shapes):
        if tensor in moved and shape[-3] != 1 and shape[-2:] != (1, 1):  # else HWC and CHW orders agree
            raise MingError(f"node '{node.source}' (Reshape) flattens an H x W x C map in NHWC order; ming streams "
                            "only the flattening of 1 x 1 maps of TFLite models (pool to 1 x 1 first)")


def _squeezed(shape: tuple) -> tuple:
    return tuple(d for d in shape if d != 1)
