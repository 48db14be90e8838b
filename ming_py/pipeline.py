"""The pipeline driver: runs the stages in order, each a function of the previous one's IR."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ming_py.classify import Classification, classify
from ming_py.frontends.onnx_model import import_onnx

from .errors import MingError
from .ir import MAC_OPS, Graph, Kernel
from .limits import check_limits
from .model_files import foreign_model_problem, is_tflite


@dataclass(frozen=True)
class KernelReport:
    kernel: Kernel
    classification: Classification
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    macs: int

    def as_dict(self) -> dict:
        c = self.classification
        return {
            "name": self.kernel.name, "source": self.kernel.source, "op": self.kernel.op, "class": c.kernel_class,
            "stride": list(c.stride), "dilation": list(c.dilation),
            "P": list(c.parallel_dims), "R": list(c.reduction_dims), "O": list(c.original_exprs),
            "W": list(c.window_dims), "G": list(c.group_dims), "in_shape": list(self.in_shape),
            "out_shape": list(self.out_shape),
            "macs": self.macs,
        }


def lift(model: str | Path, name: str | None = None) -> Graph:
    """The model's graph IR (TFLite through the TFLite frontend, anything else as ONNX), within ming's limits,
    named `name` or after the file (a converter's graph name is the same for every model it writes)."""
    problem = foreign_model_problem(model)  # Keras, PyTorch, TensorFlow: how to export them, not a parse error
    if problem:
        raise MingError(problem)
    if is_tflite(model):  # by its name, or by its flatbuffer identifier whatever its name
        from ming_py.frontends.tflite_model import import_tflite

        graph = import_tflite(model, name or Path(model).stem)
    else:
        graph = import_onnx(model, name or Path(model).stem)
    if not graph.nodes:
        raise MingError(f"{Path(model).name}: the model computes nothing between its input and its outputs "
                        "(no layer for the accelerator); compile a model with at least one layer")
    check_limits(graph)  # before any stage walks the image token by token
    return graph


def analyze(graph: Graph) -> list[KernelReport]:
    reports = []
    for kernel in graph.kernels():
        macs = int(np.prod(kernel.dims)) if kernel.op in MAC_OPS else 0
        reports.append(KernelReport(kernel, classify(kernel), graph.shape_of(kernel.inputs[0].tensor),
                                    graph.shape_of(kernel.output.tensor), macs))
    return reports
