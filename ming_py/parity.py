"""Parity of the golden model with onnxruntime, in output LSBs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import reference
from .ir import Graph
from .ort_session import onnxruntime_session


@dataclass(frozen=True)
class Parity:
    max_lsb: int  # largest |ming - onnxruntime| in units of the output's quantization step
    exact: int  # elements equal bit for bit
    total: int

    @property
    def exact_percent(self) -> float:
        return 100.0 * self.exact / self.total if self.total else 100.0

    def merge(self, other: Parity) -> Parity:
        return Parity(max(self.max_lsb, other.max_lsb), self.exact + other.exact, self.total + other.total)


def onnxruntime_outputs(model: str | Path, x: np.ndarray) -> list[np.ndarray]:

    session = onnxruntime_session(str(model))
    return session.run(None, {session.get_inputs()[0].name: x})


def compare(graph: Graph, model: str | Path, x: np.ndarray) -> Parity:
    """Run both on `x`; every output's difference measured in its own LSBs."""
    ours = reference.run(graph, x)
    theirs = onnxruntime_outputs(model, x)
    parity = Parity(0, 0, 0)
    for out, expected in zip(graph.outputs, theirs):
        lsb = _output_step(out)
        diff = np.abs(ours[out.name].astype(np.float64) - expected.astype(np.float64)) / lsb
        parity = parity.merge(Parity(int(np.rint(diff.max())) if diff.size else 0,
                                     int(np.count_nonzero(ours[out.name] == expected)), int(diff.size)))
    return parity


def _output_step(out) -> float:
    """Quantization step of what the output finally holds (the last (de)quantize of a host tail; 1 for the int8
    values of an int8 or uint8 output)."""
    if out.dtype != "float32":
        return 1.0
    scale = out.scale
    for op in out.host_ops:
        if op.kind in ("quantize", "dequantize"):
            scale = op.scale
    return scale
