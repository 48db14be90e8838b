"""The graph the lifter builds, and the names it gives tensors, constants and nodes."""

from __future__ import annotations

import re

import numpy as np

from ming_py.ir import Graph, Kernel, TensorInfo, node_inputs


def _identifier(text: str) -> str:
    ident = re.sub(r"[^0-9a-zA-Z_]", "_", text).strip("_") or "node"
    return ident if not ident[0].isdigit() else f"n_{ident}"


NAME_LIMIT = 32  # characters of a model's node name that still name a process


class GraphBuilder:
    """The `Graph` being lifted (`graph`): fresh names after the model's, new tensors and constants, the
    kernel producing a tensor, and the final sweep of nodes nothing reads."""

    def __init__(self, graph_name: str, notes: tuple[str, ...] = ()):
        self.graph = Graph(_identifier(graph_name), notes=list(notes))

    def fresh(self, base: str) -> str:
        name = _identifier(base)
        taken = self.graph.tensors.keys() | self.graph.constants.keys() | {n.name for n in self.graph.nodes}
        if name not in taken:
            return name
        i = 2
        while f"{name}_{i}" in taken:
            i += 1
        return f"{name}_{i}"

    def new_tensor(self, base: str, shape: tuple[int, ...], dtype: str) -> str:
        name = self.fresh(base)
        self.graph.tensors[name] = TensorInfo(name, tuple(shape), dtype)
        return name

    def constant(self, base: str, array: np.ndarray) -> str:
        short = _identifier(base)
        name = self.fresh(f"{short if len(short) <= NAME_LIMIT else 'weights'}_const")
        self.graph.constants[name] = np.ascontiguousarray(array)
        return name

    def node_name(self, node: str, kind: str) -> str:
        """A fresh name after the model's node where it is short, else after what the node computes (`kind`,
        then `kind_2`, ...): TFLite's joined tensor names run to hundreds of characters. The node's full
        name stays its `source` (reports, `--set`)."""
        base = _identifier(node)
        return self.fresh(base if len(base) <= NAME_LIMIT else kind)

    def kernel_name(self, node: str, kind: str) -> str:
        """`node_name`, after what the kernel computes where IREE lost the node (a generic located at "?" or
        at the function)."""
        return self.node_name(kind if node in ("?", "main") else node, kind)

    def producer(self, tensor: str) -> Kernel | None:
        for node in self.graph.nodes:
            if isinstance(node, Kernel) and node.output.tensor == tensor:
                return node
        return None

    def retype(self, tensor: str, dtype: str) -> None:
        info = self.graph.tensors[tensor]
        self.graph.tensors[tensor] = TensorInfo(info.name, info.shape, dtype)

    def drop_unused(self) -> None:
        """Remove nodes whose results nothing reads (e.g. float bias broadcasts folded away)."""
        live = {o.tensor for o in self.graph.outputs}
        kept = []
        for node in reversed(self.graph.nodes):
            outputs = {node.output.tensor} if isinstance(node, Kernel) else {node.output}
            if outputs & live:
                kept.append(node)
                live |= set(node_inputs(node))
        self.graph.nodes = kept[::-1]
        used = live | {i.tensor for i in self.graph.inputs}
        self.graph.tensors = {k: v for k, v in self.graph.tensors.items() if k in used}
        self.graph.constants = {k: v for k, v in self.graph.constants.items() if k in used}
