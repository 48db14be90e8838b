"""Evaluating access maps over numpy arrays: an operand's values over a kernel's loop dims, and the
valid (not padding) elements of each window of a kernel."""

from __future__ import annotations

import itertools

import numpy as np

from .ir import Kernel, Operand


def gather(array: np.ndarray, operand: Operand, free: tuple[int, ...], dims: tuple[int, ...],
           fixed: dict[int, int]) -> np.ndarray:
    """The operand's values over the `free` loop dims (one axis each, in order), with `fixed` dims pinned.

    Axes of free dims the operand does not use have size 1 (broadcastable).
    """
    ranges = {}
    for axis, d in enumerate(free):
        shape = [1] * len(free)
        shape[axis] = dims[d]
        ranges[d] = np.arange(dims[d]).reshape(shape)
    index = []
    for expr in operand.map.results:
        value = expr.constant + sum(c * fixed[d] for d, c in enumerate(expr.coeffs) if c and d in fixed)
        for d, c in enumerate(expr.coeffs):
            if c and d in ranges:
                value = value + c * ranges[d]
        index.append(np.asarray(value))
    if not index:
        return array.reshape((1,) * len(free))
    gathered = array[tuple(index)]
    return gathered.reshape(gathered.shape + (1,) * (len(free) - gathered.ndim)) if gathered.ndim < len(free) \
        else gathered


def valid_window_counts(kernel: Kernel, input_shape: tuple[int, ...]) -> np.ndarray:
    """Per output position (parallel dims order): window elements that are not padding."""
    operand = kernel.inputs[0]
    ones = np.pad(np.ones(input_shape, dtype=np.int64), operand.padding or ((0, 0),) * len(input_shape))
    parallel, reduction = kernel.parallel_dims, kernel.reduction_dims
    counts = np.zeros(tuple(kernel.dims[d] for d in parallel), dtype=np.int64)
    for point in itertools.product(*(range(kernel.dims[d]) for d in reduction)):
        counts += gather(ones, operand, parallel, kernel.dims, dict(zip(reduction, point)))
    return counts
