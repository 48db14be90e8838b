from .kernels import (
    PARALLEL_CLASS,
    REDUCTION_CLASS,
    SLIDING_WINDOW_CLASS,
    Classification,
    WindowAxis,
    classify,
    detect_sliding_window,
    iterator_sets,
    window_axis,
)

__all__ = [
    "PARALLEL_CLASS", "REDUCTION_CLASS", "SLIDING_WINDOW_CLASS", "Classification", "classify",
    "detect_sliding_window", "iterator_sets", "WindowAxis", "window_axis",
]
