"""`ming csim`'s verdict: the C-simulation's outputs against the golden model's (`ming reference`) for the same
input, value for value, in one line."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import reference
from .ir import Graph


@dataclass(frozen=True)
class Verdict:
    values: int  # output values compared, over every output and image
    differing: int
    first: str = ""  # where the first differing value is, and both values

    @property
    def equal(self) -> bool:
        return self.differing == 0

    def line(self) -> str:
        if self.equal:
            return f"verdict: the C-simulation equals ming reference on all {self.values:,} output values"
        return (f"verdict: {self.differing:,} of {self.values:,} output values differ from ming reference (first: "
                f"{self.first})")


def golden_outputs(graph: Graph, x: np.ndarray) -> dict[str, np.ndarray]:
    """`ming reference` of one image in the model's input shape, or of N stacked on a first axis (stacked likewise,
    as `ming csim` and OUT/deploy/run.py return them)."""
    if not stacked(graph, x):
        return reference.run(graph, x)
    results = [reference.run(graph, image[None]) for image in x]
    return {name: np.stack([one_image(result[name]) for result in results]) for name in results[0]}


def stacked(graph: Graph, x: np.ndarray) -> bool:
    """Whether `x` is N images stacked on a first axis rather than one image of a model whose batch is 1."""
    shape = tuple(graph.inputs[0].onnx_shape)
    return x.shape != shape and shape[:1] == (1,) and x.shape[1:] == shape[1:]


def one_image(y: np.ndarray) -> np.ndarray:
    """An output of one image without its batch dimension of 1 (`ming_ports.Port.image_shape`)."""
    return y[0] if y.ndim > 1 and y.shape[0] == 1 else y


def verdict(simulated: dict[str, np.ndarray], golden: dict[str, np.ndarray]) -> Verdict:
    values = differing = 0
    first = ""
    for name, want in golden.items():
        got = np.asarray(simulated[name])
        want = np.asarray(want)
        values += want.size
        if got.shape != want.shape:
            differing += want.size
            first = first or f"output '{name}' has shape {got.shape}, ming reference {want.shape}"
            continue
        wrong = np.argwhere(got != want)
        differing += len(wrong)
        if len(wrong) and not first:
            where = tuple(int(i) for i in wrong[0])
            first = f"output '{name}' at {where}: expected {want[where]}, got {got[where]}"
    return Verdict(values, differing, first)
