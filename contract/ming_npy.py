"""The user's files of a model's values: the input .npy that `ming reference`, `ming csim` and run.py take
alike, and the output .npy or .npz files they write, atomically.
"""

from __future__ import annotations

import os
import secrets
import zipfile
from pathlib import Path

import numpy as np

try:
    from . import ming_host  # inside the ming package
    from .ming_errors import DeployError
except ImportError:
    import ming_host  # in OUT/deploy, beside this file
    from ming_errors import DeployError


def load_input(path, port=None) -> np.ndarray:
    """The array in the .npy file `path`, as `ming reference` and `ming csim` take it: float32 (no NaN or
    Inf; either byte order), int8 or uint8, at least one value. Anything else is refused in one line:
    float64, float16, other integers, bool, complex, datetime, strings, structured and object arrays,
    .npz archives and files that are not .npy. Given the model's input `port`, an integer array the model
    does not take is refused with the conversion it takes (`ming_host.input_type_problem`)."""
    if not Path(path).is_file():
        raise DeployError(f"{path}: input file not found")
    x = _read_npy(path)
    integers = x.dtype.fields is None and x.dtype.kind in "iu"
    if port is not None and integers and x.size:
        problem = ming_host.input_type_problem(x, port.dtype, port.scale, port.zero_point)
        if problem:
            raise DeployError(f"{path}: {problem}")
    if x.dtype.fields is None and x.dtype in (np.int8, np.uint8):
        pass
    elif integers:
        raise DeployError(f"{path}: input is {x.dtype}; give float32 images (x.astype(numpy.float32)), which every "
                          "model takes (one whose input is int8 or uint8 quantizes them with its input's scale and "
                          "zero point), or such a model's own values as x.astype(numpy.int8) or numpy.uint8")
    elif x.dtype.fields is not None or x.dtype.kind != "f" or x.dtype.itemsize != 4:
        raise DeployError(f"{path}: input is {x.dtype}; give float32 as onnxruntime takes it (or int8/uint8 for a "
                          "model with such an input); save x.astype(numpy.float32)")
    if x.size == 0:
        raise DeployError(f"{path}: input has shape {x.shape}, no values; give at least one image")
    if x.dtype.kind == "f":
        x = x.astype(np.float32)
        bad = int(x.size - np.count_nonzero(np.isfinite(x)))
        if bad:
            raise DeployError(f"{path}: input has {bad} non-finite values (NaN or Inf); int8 quantization needs "
                              "finite inputs")
    return x


def _read_npy(path) -> np.ndarray:
    not_npy = DeployError(f"{path}: not a .npy array; save the input with numpy.save")
    try:
        with open(path, "rb") as file:
            if file.read(len(np.lib.format.MAGIC_PREFIX)) != np.lib.format.MAGIC_PREFIX:
                raise not_npy
            file.seek(0)
            return np.lib.format.read_array(file, allow_pickle=False)
    except DeployError:
        raise
    except OSError as exc:
        raise DeployError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:
        if "allow_pickle" in str(exc):
            raise DeployError(f"{path}: holds Python objects; save a float32 array with numpy.save") from None
        raise not_npy from None
    except Exception:  # numpy raises several unrelated types for a damaged header or data
        raise not_npy from None



def check_output_paths(paths: list, names: list[str]) -> None:
    """`--output` once per model output, in the model's order (`names`), or once as an .npz archive; none of
    them a directory or a symbolic link."""
    for path in paths:
        check_destination(path)
    if len(paths) == len(names) or (len(paths) == 1 and str(paths[0]).endswith(".npz")):
        return
    listed = ", ".join(repr(name) for name in names)
    raise DeployError(f"--output given {len(paths)} times; the model has {len(names)} outputs ({listed}): give "
                      "--output once per output in this order, or one .npz path")


def check_destination(path) -> None:
    """An output path is neither a symbolic link (outputs are renamed into place) nor a directory."""
    if os.path.islink(path):
        raise DeployError(f"--output {path}: is a symbolic link; give the path of a regular file (outputs are "
                          "written beside it and renamed into place, never through a link)")
    if os.path.isdir(path):
        raise DeployError(f"--output {path}: is a directory; give a file name such as {Path(path) / 'y.npy'}")


def save_outputs(paths: list, outputs: dict[str, np.ndarray]) -> None:
    """Each output (by name, in the model's order) to its own .npy path (numpy.save's name: .npy added when
    missing), or all of them to one .npz archive whose keys are the output names (what numpy.load of it gives).

    Atomically: each file is written to a new temporary file in its directory (O_EXCL) and renamed into
    place once all are complete, so a full disk or an interrupt leaves the old files (or none), never a
    short one. A destination that is a symbolic link is refused (DeployError), not written through."""
    if len(paths) == 1 and str(paths[0]).endswith(".npz"):
        def write_archive(file):
            with zipfile.ZipFile(file, "w") as archive:  # numpy.savez's layout; any name is a key
                for name, y in outputs.items():
                    with archive.open(f"{name}.npy", "w") as member:
                        np.lib.format.write_array(member, np.asanyarray(y), allow_pickle=False)

        writes = [(Path(paths[0]), write_archive)]
    else:
        writes = [(Path(str(path) if str(path).endswith(".npy") else f"{path}.npy"),
                   lambda file, y=y: np.lib.format.write_array(file, np.asanyarray(y), allow_pickle=False))
                  for path, y in zip(paths, outputs.values())]
    staged = []
    try:
        for destination, write in writes:
            check_destination(destination)
            staged.append((_write_new(destination, write), destination))
        for temporary, destination in staged:
            check_destination(destination)
            try:
                os.replace(temporary, destination)
            except OSError as exc:
                raise DeployError(f"--output {destination}: cannot write ({exc.strerror or exc})") from None
    finally:
        for temporary, _ in staged:
            Path(temporary).unlink(missing_ok=True)


def _write_new(destination: Path, write) -> Path:
    """A new file beside `destination` (O_EXCL, the umask's permissions) holding what `write` writes."""
    fd = path = None
    try:
        while fd is None:
            path = destination.with_name(f".{destination.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                continue
        with os.fdopen(fd, "wb") as file:
            fd = -1  # the file object owns it now
            write(file)
            file.flush()
            os.fsync(file.fileno())
        return path
    except BaseException as exc:
        if fd is not None:
            if fd >= 0:
                os.close(fd)
            path.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise DeployError(f"--output {destination}: cannot write ({exc.strerror or exc})") from None
        raise
