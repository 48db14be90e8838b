"""Kernel classification: MING Alg. 1 (sliding-window detection) and Alg. 2 (iterator sets).

A kernel is
  * `parallel`        when all its iterators are parallel,
  * `sliding_window`  when an input access is `s * i_p + delta * i_r` (one
                      parallel and one reduction iterator; stride s, dilation delta),
  * `reduction`       otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from ming_py.ir import PARALLEL, REDUCTION, AffineExpr, Kernel

PARALLEL_CLASS = "parallel"
REDUCTION_CLASS = "reduction"
SLIDING_WINDOW_CLASS = "sliding_window"


@dataclass(frozen=True)
class Classification:
    kernel: str
    kernel_class: str  # PARALLEL_CLASS, REDUCTION_CLASS or SLIDING_WINDOW_CLASS
    # Per sliding (or strided) axis of the activation input, in tensor-axis order.
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    # MING Alg. 2: loop dims for P and R; expressions (as text) for O; dims for W.
    parallel_dims: tuple[int, ...]
    reduction_dims: tuple[int, ...]
    original_exprs: tuple[str, ...]
    window_dims: tuple[int, ...]
    # parallel dims indexing both the activation's and the output's channels: a reduction never crosses them
    # (a grouped convolution's group; every channel of a depthwise convolution or a pooling)
    group_dims: tuple[int, ...] = ()


@dataclass(frozen=True)
class WindowAxis:
    """One spatial axis of a sliding-window access `stride * o + dilation * k`: the window's loop dim k (None:
    the window is one element wide along the axis), the stride and the dilation."""

    window_dim: int | None
    stride: int
    dilation: int


def window_axis(expr: AffineExpr, out_dim: int, iterators) -> WindowAxis:
    """The window along one input axis read as `expr`, whose output position is loop dim `out_dim`; a
    ValueError says what the access is instead ("has an offset", "is not a sliding window")."""
    if expr.constant:
        raise ValueError("has an offset")
    others = [d for d in expr.used_dims() if d != out_dim]
    if expr.coeffs[out_dim] <= 0 or len(others) > 1 or (others and iterators[others[0]] == PARALLEL):
        raise ValueError("is not a sliding window")
    if not others:
        return WindowAxis(None, expr.coeffs[out_dim], 1)
    return WindowAxis(others[0], expr.coeffs[out_dim], expr.coeffs[others[0]])


def detect_sliding_window(kernel: Kernel) -> tuple[bool, int, int]:
    """MING Alg. 1: (is_sliding_window, stride, dilation) from the first matching access."""
    if all(it == PARALLEL for it in kernel.iterators):
        return False, 0, 0
    for operand in kernel.inputs:
        for expr in operand.map.results:
            pair = _parallel_reduction_pair(expr, kernel.iterators)
            if pair is not None:
                return True, pair[0], pair[1]
    return False, 0, 0


def _parallel_reduction_pair(expr: AffineExpr, iterators) -> tuple[int, int] | None:
    """(stride, dilation) if `expr` is `s * i_p + delta * i_r` (plus a constant)."""
    dims = expr.used_dims()
    if len(dims) != 2:
        return None
    iterator_types = [iterators[d] for d in dims]
    if sorted(iterator_types) != [PARALLEL, REDUCTION]:
        return None
    parallel, reduction = (dims[0], dims[1]) if iterator_types[0] == PARALLEL else (dims[1], dims[0])
    return expr.coeffs[parallel], expr.coeffs[reduction]


def iterator_sets(kernel: Kernel):
    """MING Alg. 2: the sets P, R, O, W."""
    parallel: list[int] = []
    reduction: list[int] = []
    original: list[str] = []
    for operand in kernel.inputs:
        for expr in operand.map.results:
            d = expr.single_dim()
            if d is None:
                if str(expr) not in original:
                    original.append(str(expr))
            elif kernel.iterators[d] == PARALLEL:
                if d not in parallel:
                    parallel.append(d)
            elif d not in reduction:
                reduction.append(d)
    window = []
    for expr in kernel.output.map.results:
        d = expr.single_dim()
        if d is not None and kernel.iterators[d] == PARALLEL and d not in parallel and d not in window:
            window.append(d)
    return tuple(sorted(parallel)), tuple(sorted(reduction)), tuple(original), tuple(sorted(window))


def group_dims(kernel: Kernel) -> tuple[int, ...]:
    """The parallel dims a reduction kernel's activation (first input) and output both index directly."""
    if all(it == PARALLEL for it in kernel.iterators):
        return ()
    read = {e.single_dim() for e in kernel.inputs[0].map.results}
    written = {e.single_dim() for e in kernel.output.map.results}
    return tuple(sorted(d for d in read & written if d is not None and kernel.iterators[d] == PARALLEL))


def _strides(kernel: Kernel) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Stride and dilation of each spatial axis of the (first) activation input."""
    strides, dilations = [], []
    operand = kernel.inputs[0]
    for expr in operand.map.results:
        pair = _parallel_reduction_pair(expr, kernel.iterators)
        if pair is not None:
            strides.append(pair[0])
            dilations.append(pair[1])
        elif len(expr.used_dims()) == 1 and expr.coeffs[expr.used_dims()[0]] > 1 \
                and kernel.iterators[expr.used_dims()[0]] == PARALLEL:
            strides.append(expr.coeffs[expr.used_dims()[0]])
            dilations.append(1)
    return tuple(strides), tuple(dilations)


def classify(kernel: Kernel) -> Classification:
    sliding, _, _ = detect_sliding_window(kernel)
    if all(it == PARALLEL for it in kernel.iterators):
        kernel_class = PARALLEL_CLASS
    elif sliding:
        kernel_class = SLIDING_WINDOW_CLASS
    else:
        kernel_class = REDUCTION_CLASS
    stride, dilation = _strides(kernel)
    p, r, o, w = iterator_sets(kernel)
    return Classification(kernel.name, kernel_class, stride, dilation, p, r, o, w, group_dims(kernel))
