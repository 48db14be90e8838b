"""`ming reference MODEL --dump DIR [--framework]`: every tensor of the golden model, and the first one that differs
from the model's own framework.

The golden model's tensors are ming's (`reference.run_integer`): int8 values, in ming's layout (channels first,
no batch axis; a uint8 model's values shifted by -128 as ming holds them). Each is named after the model's tensor
it stands for where there is one (`framework_tensors.model_tensors`), else after ming's own tensor.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from pathlib import Path

import numpy as np

from .errors import MingError
from .framework_tensors import ModelTensor
from .ir import Graph, Kernel
from .reference import run_integer
from .contract.ming_host import accelerator_input

MAX_FILE_STEM = 100  # characters of a tensor name kept in its file name (TFLite's joined names run to hundreds)


def check_dump_dir(path: Path) -> None:
    """DIR is a new directory in an existing one, or an empty directory (not a symbolic link)."""
    if path.is_symlink():
        raise MingError(f"--dump {path}: is a symbolic link; give a new or empty directory")
    if path.exists():
        if not path.is_dir():
            raise MingError(f"--dump {path}: is not a directory; give a new or empty directory")
        if any(path.iterdir()):
            raise MingError(f"--dump {path}: is not empty; give a new or empty directory")
    elif not path.parent.is_dir():
        raise MingError(f"--dump {path}: its directory {path.parent} does not exist; create it or give another")


def golden_tensors(graph: Graph, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every tensor of the golden model for one image `x` (the model's input, as `reference.run` takes it), by
    ming's tensor name, in dataflow order: the input, then each node's output."""
    graph_input = graph.inputs[0]
    q = accelerator_input(x, graph_input).reshape(graph.shape_of(graph_input.tensor))
    values = run_integer(graph, {graph_input.tensor: q})
    order = [graph_input.tensor] + [node.output.tensor if isinstance(node, Kernel) else node.output
                                    for node in graph.nodes]
    return {tensor: values[tensor] for tensor in dict.fromkeys(order)}


def file_names(tensors: dict[str, str]) -> dict[str, str]:
    """A file name `<name>.npy` for each (ming tensor -> name to give it): the name with every character but
    letters, digits, '.', '-' and '_' as '_', at most MAX_FILE_STEM long, unique ignoring case (`_2`, `_3`, ...)."""
    taken: set[str] = set()
    files = {}
    for tensor, name in tensors.items():
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:MAX_FILE_STEM].lstrip(".") or "tensor"
        candidate, suffix = stem, 2
        while candidate.lower() in taken:
            candidate, suffix = f"{stem}_{suffix}", suffix + 1
        taken.add(candidate.lower())
        files[tensor] = f"{candidate}.npy"
    return files


def write_dump(directory: Path, graph: Graph, values: dict[str, np.ndarray],
               named: dict[str, ModelTensor]) -> dict[str, str]:
    """`values` as .npy files in `directory` (new or empty, `check_dump_dir`) and index.json; the file of each
    tensor. Files are created, never opened through a symbolic link or over an existing file."""
    files = file_names({tensor: named[tensor].name if tensor in named else tensor for tensor in values})
    index = {files[tensor]: _index_entry(graph, tensor, array, named.get(tensor)) for tensor, array in values.items()}
    try:
        directory.mkdir(exist_ok=True)
    except OSError as exc:
        raise MingError(f"--dump {directory}: cannot create it ({exc.strerror}); give a new or empty directory "
                        "you can write in") from None
    with _directory(directory) as fd:
        for tensor, array in values.items():
            buffer = io.BytesIO()
            np.save(buffer, _stored(graph, tensor, array))
            _create(fd, files[tensor], buffer.getvalue(), directory)
        _create(fd, "index.json", (json.dumps(index, indent=2) + "\n").encode(), directory)
    return files


def _stored(graph: Graph, tensor: str, array: np.ndarray) -> np.ndarray:
    info = graph.tensors.get(tensor)
    return array.astype(np.int32 if info is not None and info.dtype == "i32" else np.int8)


def _index_entry(graph: Graph, tensor: str, array: np.ndarray, model: ModelTensor | None) -> dict:
    entry = {"tensor": model.name if model else tensor, "ming_tensor": tensor, "shape": list(array.shape),
             "dtype": str(_stored(graph, tensor, array).dtype)}
    if model is not None and model.scale is not None:
        shift = 128 if model.dtype == "uint8" else 0  # ming holds a uint8 model's values shifted to int8
        entry |= {"scale": model.scale, "zero_point": model.zero_point - shift, "model_dtype": model.dtype}
    return entry


@contextlib.contextmanager
def _directory(directory: Path):
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise MingError(f"--dump {directory}: cannot open it ({exc.strerror}); give a new or empty directory") from None
    try:
        if any(os.scandir(fd)):  # filled (or swapped for another) since it was checked
            raise MingError(f"--dump {directory}: is not empty; give a new or empty directory")
        yield fd
    finally:
        os.close(fd)


def _create(directory_fd: int, name: str, data: bytes, directory: Path) -> None:
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                     dir_fd=directory_fd)
    except OSError as exc:
        raise MingError(f"--dump {directory}: cannot create {name} ({exc.strerror}); give a new or empty "
                        "directory") from None
    with os.fdopen(fd, "wb") as file:
        file.write(data)
