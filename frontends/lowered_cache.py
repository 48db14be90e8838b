"""The cache of `iree-compile`'s output: <cache>/lowered/<key>.mlir, the linalg text a model lowered to.

Lowering runs IREE's constant evaluation, which JIT-compiles every constant expression of the model: about 3 s
on a small model, most of an import. A rebuild of the same model (a sweep point, `ming compare`, a changed
option) reads the text again instead. The key hashes the iree-compile binary (its path, size and modification
time, and the installed package's version), the flags and the source; a changed IREE lowers anew.

What the cache holds is only parsed, never run, and each file starts with the sha256 of the text that follows:
a file that does not match it (truncated, edited) is lowered again into place. Files are written through a
temporary file and renamed, never through a symbolic link. The cache is a convenience: where its directory
cannot be used, the model is lowered as if it were empty (the C-simulation's cache reports the directory).
Entries beyond MAX_BYTES in all are removed oldest first, and only files of this cache's own name pattern.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tempfile
from importlib import metadata
from pathlib import Path

from ming_py.cache import not_only_yours, private_dir
from ming_py.errors import MingError

KEY_VERSION = b"ming lowered cache 1"
MAX_BYTES = 512 * 1024 * 1024
_ENTRY = re.compile(r"^[0-9a-f]{40}\.mlir$")


def key(tool: str, flags: tuple[str, ...], source: bytes) -> str:
    info = os.stat(tool)
    try:
        version = metadata.version("iree-base-compiler")
    except metadata.PackageNotFoundError:
        version = "unknown"
    digest = hashlib.sha256(KEY_VERSION + b"\0")
    for part in (os.path.realpath(tool), str(info.st_size), str(info.st_mtime_ns), version, *flags):
        digest.update(part.encode() + b"\0")
    digest.update(b"\0" + source)
    return digest.hexdigest()[:40]


def _directory() -> Path | None:
    try:
        return private_dir("lowered")
    except MingError:
        return None


def load(entry: str) -> str | None:
    """The cached text of `entry`, None where there is none or it does not match its sha256."""
    directory = _directory()
    if directory is None:
        return None
    try:
        fd = os.open(directory / f"{entry}.mlir", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or not_only_yours(info):
            return None
        recorded, _, text = file.read().partition(b"\n")
    if hashlib.sha256(text).hexdigest().encode() != recorded:
        return None
    os.utime(directory / f"{entry}.mlir", follow_symlinks=False)  # recently used: pruned last
    return text.decode()


def store(entry: str, text: str) -> None:
    """Keep `text` as `entry` (atomically: a reader sees the whole file or none), then prune the cache."""
    directory = _directory()
    if directory is None:
        return
    data = text.encode()
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".lowered-")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(hashlib.sha256(data).hexdigest().encode() + b"\n" + data)
        os.replace(temporary, directory / f"{entry}.mlir")
    except OSError:  # a full disk: the model was lowered, the cache only misses it
        Path(temporary).unlink(missing_ok=True)
        return
    _prune(directory)


def _prune(directory: Path) -> None:
    entries = []
    for name in os.listdir(directory):
        if _ENTRY.match(name):
            try:
                info = os.lstat(directory / name)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                entries.append((info.st_mtime_ns, name, info.st_size))
    total = sum(size for _, _, size in entries)
    for _, name, size in sorted(entries):
        if total <= MAX_BYTES:
            break
        (directory / name).unlink(missing_ok=True)
        total -= size
