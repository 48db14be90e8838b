"""The golden model: executes a lifted `Graph` with numpy.

Integer kernels run on int64 arrays (no overflow is possible for int8 x int8
sums of the sizes a CNN layer has), vectorized over the iteration space:
multiply-accumulate kernels loop only over the window positions of their
sliding reductions and contract the remaining reduction dims with `einsum`;
other reductions loop over reduction points. Rounding and saturation all come
from `ming_py.numerics`.
"""

from __future__ import annotations

import itertools

import numpy as np

from .access import gather, valid_window_counts
from .epilogues import Golden, rule_of
from .contract.ming_host import accelerator_input, model_output
from .ir import (
    Arg,
    BilinearResize,
    Concat,
    Const,
    DepthToSpace,
    Expr,
    Graph,
    Kernel,
    Op,
    Operand,
    Pad,
    Permute,
    Reshape,
    Slice,
    Upsample,
)

_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def run(graph: Graph, inputs: dict[str, np.ndarray] | np.ndarray) -> dict[str, np.ndarray]:
    """The model's inputs in, its outputs out, as onnxruntime (or TFLite) takes and returns them:
    float32, or int8 where the model's own input or output is int8."""
    if isinstance(inputs, np.ndarray):
        inputs = {graph.inputs[0].name: inputs}
    values: dict[str, np.ndarray] = {}
    for graph_input in graph.inputs:
        x = np.asarray(inputs[graph_input.name])
        if x.shape != graph_input.onnx_shape:
            raise ValueError(f"input '{graph_input.name}' has shape {x.shape}, expected {graph_input.onnx_shape}")
        values[graph_input.tensor] = accelerator_input(x, graph_input).reshape(graph.shape_of(graph_input.tensor))
    run_integer(graph, values)
    return {out.name: model_output(values[out.tensor], out) for out in graph.outputs}


def run_integer(graph: Graph, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Execute every node on integer tensors; `values` holds the graph inputs and receives the rest."""
    for node in graph.nodes:
        if isinstance(node, Kernel):
            values[node.output.tensor] = run_kernel(node, graph.constants, values)
        elif isinstance(node, Reshape):
            values[node.output] = values[node.input].reshape(graph.shape_of(node.output))
        elif isinstance(node, Concat):
            values[node.output] = np.concatenate([values[i] for i in node.inputs], axis=node.axis)
        elif isinstance(node, Upsample):
            values[node.output] = upsample(values[node.input], node.factors)
        elif isinstance(node, BilinearResize):
            values[node.output] = bilinear_resize(values[node.input], node.rows, node.cols)
        elif isinstance(node, DepthToSpace):
            values[node.output] = depth_to_space(values[node.input], node.block)
        elif isinstance(node, Pad):
            values[node.output] = np.pad(values[node.input], node.padding, constant_values=node.value)
        elif isinstance(node, Slice):
            values[node.output] = values[node.input][node.start:node.start + graph.shape_of(node.output)[0]]
        elif isinstance(node, Permute):
            values[node.output] = values[node.input][np.array(node.order)]
    return values


def bilinear_resize(array: np.ndarray, rows, cols) -> np.ndarray:
    """A (..., H, W) int8 map resized by LiteRT's integer bilinear rule (`ir.BilinearResize`)."""
    y0, y1, wy0, wy1 = (np.array(column, np.int64) for column in zip(*rows))
    x0, x1, wx0, wx1 = (np.array(column, np.int64) for column in zip(*cols))
    values = array.astype(np.int64)
    total = (values[..., y0[:, None], x0[None, :]] * (wy0[:, None] * wx0[None, :])
             + values[..., y1[:, None], x0[None, :]] * (wy1[:, None] * wx0[None, :])
             + values[..., y0[:, None], x1[None, :]] * (wy0[:, None] * wx1[None, :])
             + values[..., y1[:, None], x1[None, :]] * (wy1[:, None] * wx1[None, :]))
    rounded = total + np.where(total > 0, 1 << 19, -(1 << 19))
    return (np.sign(rounded) * (np.abs(rounded) >> 20)).astype(array.dtype)  # C++'s division, toward zero


def depth_to_space(array: np.ndarray, block: int) -> np.ndarray:
    """A (block^2 C, H, W) map's channel (dy * block + dx) * C + c at (y, x) moved to channel c at
    (y * block + dy, x * block + dx)."""
    *leading, channels, height, width = array.shape
    blocks = array.reshape(-1, block, block, channels // block**2, height, width)  # [n, dy, dx, c, y, x]
    moved = blocks.transpose(0, 3, 4, 1, 5, 2)  # [n, c, y, dy, x, dx]
    return moved.reshape(*leading, channels // block**2, height * block, width * block)


def upsample(array: np.ndarray, factors: tuple[int, ...]) -> np.ndarray:
    """Every value repeated `factors[a]` times along axis a (nearest-neighbour upsampling)."""
    for axis, factor in enumerate(factors):
        array = np.repeat(array, factor, axis=axis)
    return array


# ---- kernels -----------------------------------------------------------------


def run_kernel(kernel: Kernel, constants: dict[str, np.ndarray], values: dict[str, np.ndarray]) -> np.ndarray:
    arrays = [_operand_array(o, constants, values) for o in kernel.inputs]
    parallel = kernel.parallel_dims
    if kernel.init is None:
        result = _elementwise(kernel, arrays, parallel)
    elif rule_of(kernel.epilogue).reads_inputs():
        result = _window_elements(kernel, arrays, parallel)
    elif _mac_operands(kernel.payload, len(arrays)) is not None:
        result = _mac(kernel, arrays, parallel) + kernel.init
    else:
        result = _reduce(kernel, arrays, parallel)
    input_shape = _unpadded_shape(kernel.inputs[0], constants, values)
    result = _apply_epilogue(kernel, result, parallel, input_shape)
    return _to_output_layout(kernel, result, parallel)


def _operand_array(operand: Operand, constants, values) -> np.ndarray:
    array = constants[operand.tensor] if operand.tensor in constants else values[operand.tensor]
    array = array.astype(np.int64)
    if operand.padding:
        array = np.pad(array, operand.padding, constant_values=operand.pad_value)
    return array


def _eval(expr: Expr, args: list) -> np.ndarray:
    if isinstance(expr, Arg):
        return args[expr.index]
    if isinstance(expr, Const):
        return np.int64(expr.value)
    return _BINARY[expr.name](*(_eval(a, args) for a in expr.args))


def _elementwise(kernel: Kernel, arrays, parallel) -> np.ndarray:
    gathered = [gather(a, o, parallel, kernel.dims, {}) for a, o in zip(arrays, kernel.inputs)]
    shape = tuple(kernel.dims[d] for d in parallel)
    if rule_of(kernel.epilogue).reads_inputs():
        return [np.broadcast_to(g, shape) for g in gathered]  # the epilogue reads the inputs directly
    return np.broadcast_to(_eval(kernel.payload, gathered), shape)


def _mac_operands(payload: Expr, n_inputs: int) -> tuple[int, int] | None:
    """(a, b) when the payload is `acc + in_a * in_b`."""
    if not (isinstance(payload, Op) and payload.name == "add"):
        return None
    acc, product = payload.args
    if isinstance(product, Arg):
        acc, product = product, acc
    if not (isinstance(acc, Arg) and acc.index == n_inputs and isinstance(product, Op) and product.name == "mul"):
        return None
    a, b = product.args
    if isinstance(a, Arg) and isinstance(b, Arg) and a.index < n_inputs and b.index < n_inputs:
        return a.index, b.index
    return None


def _mac(kernel: Kernel, arrays, parallel) -> np.ndarray:
    """Sum over reduction dims of in_a * in_b: loop over window dims, einsum over the rest."""
    a, b = _mac_operands(kernel.payload, len(arrays))
    windowed = sorted({d for o in kernel.inputs for e in o.map.results if len(e.used_dims()) > 1
                       for d in e.used_dims() if d in kernel.reduction_dims})
    contracted = tuple(d for d in kernel.reduction_dims if d not in windowed)
    free = parallel + contracted
    letters = {d: chr(ord("a") + i) for i, d in enumerate(free)}
    out_spec = "".join(letters[d] for d in parallel)
    total = np.zeros(tuple(kernel.dims[d] for d in parallel), dtype=np.int64)
    for point in itertools.product(*(range(kernel.dims[d]) for d in windowed)):
        fixed = dict(zip(windowed, point))
        lhs, lhs_spec = _squeezed(arrays[a], kernel.inputs[a], free, kernel.dims, fixed, letters)
        rhs, rhs_spec = _squeezed(arrays[b], kernel.inputs[b], free, kernel.dims, fixed, letters)
        total += np.einsum(f"{lhs_spec},{rhs_spec}->{out_spec}", lhs, rhs)
    return total


def _squeezed(array, operand: Operand, free, dims, fixed, letters) -> tuple[np.ndarray, str]:
    """The gathered operand without the axes of free dims it does not use, and its einsum subscripts."""
    used = {d for e in operand.map.results for d in e.used_dims()}
    gathered = gather(array, operand, free, dims, fixed)
    unused = tuple(axis for axis, d in enumerate(free) if d not in used)
    return gathered.squeeze(unused), "".join(letters[d] for d in free if d in used)


def _reduce(kernel: Kernel, arrays, parallel) -> np.ndarray:
    reduction = kernel.reduction_dims
    acc = np.full(tuple(kernel.dims[d] for d in parallel), kernel.init, dtype=np.int64)
    for point in itertools.product(*(range(kernel.dims[d]) for d in reduction)):
        fixed = dict(zip(reduction, point))
        args = [gather(a, o, parallel, kernel.dims, fixed) for a, o in zip(arrays, kernel.inputs)]
        acc = np.broadcast_to(_eval(kernel.payload, args + [acc]), acc.shape).copy()
    return acc


def _window_elements(kernel: Kernel, arrays, parallel) -> list[np.ndarray]:
    """A reduction's input values in its order (row-major over the window), for an epilogue that reads them."""
    reduction = kernel.reduction_dims
    return [gather(arrays[0], kernel.inputs[0], parallel, kernel.dims, dict(zip(reduction, point)))
            for point in itertools.product(*(range(kernel.dims[d]) for d in reduction))]


def _unpadded_shape(operand: Operand, constants, values) -> tuple[int, ...]:
    return (constants[operand.tensor] if operand.tensor in constants else values[operand.tensor]).shape


def _apply_epilogue(kernel: Kernel, result, parallel, input_shape) -> np.ndarray:
    """The kernel's epilogue rule (`ming_py.epilogues`) on its result."""
    epilogue = kernel.epilogue
    channel_dims = getattr(epilogue, "channel_dims", ())
    innermost = len(kernel.dims) - 1
    span_scalar = tuple(i for i, o in enumerate(kernel.inputs)
                        if len(kernel.inputs) == 2 and not any(innermost in e.used_dims() for e in o.map.results))
    context = Golden(per_channel=lambda values: _along_channels(values, channel_dims, kernel.dims, parallel),
                     valid=lambda: valid_window_counts(kernel, input_shape), parallel=tuple(parallel),
                     span_scalar=span_scalar)
    return rule_of(epilogue).golden(epilogue, result, context)


def _along_channels(values: np.ndarray, channel_dims: tuple[int, ...], dims, parallel) -> np.ndarray:
    """Per-channel constants (one per output channel, or a scalar) broadcastable over the parallel dims: the
    channel index is the row-major index over `channel_dims` (a grouped convolution's group, then the channel
    in its group)."""
    values = np.broadcast_to(values, (int(np.prod([dims[d] for d in channel_dims])),))
    by_dim = values.reshape([dims[d] for d in channel_dims])
    order = sorted(range(len(channel_dims)), key=lambda i: parallel.index(channel_dims[i]))
    shape = [dims[d] if d in channel_dims else 1 for d in parallel]
    return by_dim.transpose(order).reshape(shape)


def _to_output_layout(kernel: Kernel, result: np.ndarray, parallel) -> np.ndarray:
    order = [parallel.index(e.single_dim()) for e in kernel.output.map.results]
    return np.transpose(np.asarray(result, dtype=np.int64), order)
