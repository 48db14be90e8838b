from .kernels import (
    PARALLEL_KIND,
    REDUCTION_KIND,
    SLIDING_WINDOW_KIND,
    Classification,
    WindowAxis,
    classify,
    detect_sliding_window,
    iterator_sets,
    window_axis,
)

__all__ = [
    "PARALLEL_KIND", "REDUCTION_KIND", "SLIDING_WINDOW_KIND", "Classification", "classify",
    "detect_sliding_window", "iterator_sets", "WindowAxis", "window_axis",
]
