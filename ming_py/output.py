"""The output directory: ming replaces only what it wrote, atomically, one build at a time.

Ownership: every tree ming writes holds a marker file (`MARKER`). A build may
write OUT only if OUT does not exist, is an empty directory, or holds the
marker; never the current directory or one of its parents, never a directory
holding one of the build's own inputs, never a regular file or a symbolic link.

Atomicity: the new tree is written beside OUT (`.OUT.ming-new`) and swapped in
by renames only; the old tree is removed afterwards, marker last, so that a
tree interrupted while being removed is still recognisably ming's. Whatever
moment a signal (even SIGKILL) arrives, OUT is the old tree or the complete new
one, and the next build removes the staging directories left behind.

Concurrency: a build holds an exclusive lock on OUT (a lock file in ming's private
cache directory, see cache.py, keyed by OUT's real path) from before the import until the swap; a
second build into the same OUT stops at once with one line.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import os
import shutil
import stat
from contextlib import contextmanager
from pathlib import Path

from . import interrupt
from .cache import open_lock, private_dir
from .ir import MingError

MARKER = ".ming-build"
MARKER_TEXT = "This directory was written by `ming build`; ming replaces it on the next build into it.\n"
_RENAME_EXCHANGE = 2  # linux/fs.h


def staging_paths(out: Path) -> tuple[Path, Path]:
    """(new tree, old tree) beside OUT."""
    return out.parent / f".{out.name}.ming-new", out.parent / f".{out.name}.ming-old"


def check_output(out: str | Path, inputs: list[str | Path] = ()) -> Path:
    """OUT as an absolute path, after refusing every place ming must not replace (see the module doc)."""
    given = str(out)
    out = Path(os.path.abspath(out))
    if out.is_symlink():
        raise MingError(f"-o {given}: is a symbolic link; pass the directory it points to or a new one")
    out = out.resolve()
    if out == Path(out.anchor):
        raise MingError(f"-o {given}: is the file system root; pass a new directory for the build")
    cwd = Path.cwd().resolve()
    if out == cwd or out in cwd.parents:
        raise MingError(f"-o {given}: is the current directory or one of its parents; ming replaces OUT as a "
                        "whole, pass a new directory such as out/")
    for item in inputs:
        path = Path(item).resolve()
        if path == out or out in path.parents:
            raise MingError(f"-o {given}: holds the input {item}; pass a directory that does not contain the "
                            "build's inputs")
    if out.exists():
        if not out.is_dir():
            raise MingError(f"-o {given}: exists and is not a directory; ming writes a directory, pass another path")
        if not _owned(out) and any(out.iterdir()):
            raise MingError(f"-o {given}: is not empty and was not written by ming (no {MARKER}); pass a new or "
                            "empty directory")
    parent = _existing_ancestor(out.parent)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise MingError(f"-o {given}: cannot write in {parent} (permission denied); pass a writable place")
    return out


def _owned(tree: Path) -> bool:
    return (tree / MARKER).is_file() and not (tree / MARKER).is_symlink()


def _existing_ancestor(path: Path) -> Path:
    while not path.exists():
        path = path.parent
    return path


@contextmanager
def output_lock(out: Path):
    """Exclusive ownership of OUT for one build; a second build into OUT stops with one line."""
    fd = open_lock(private_dir("locks"), hashlib.sha256(str(out).encode()).hexdigest()[:32] + ".lock")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise MingError(f"-o {out}: another ming build is writing this directory; wait for it or pass "
                            "another -o") from None
        yield
    finally:
        os.close(fd)


def write_tree(files: dict[str, str | bytes], out: str | Path, inputs: list[str | Path] = ()) -> None:
    """Write `files` (relative path -> text) as the tree OUT: the old tree or the complete new one, never less."""
    out = check_output(out, inputs)
    with output_lock(out):
        replace_tree(files, out)


def replace_tree(files: dict[str, str | bytes], out: Path) -> None:
    """The swap itself; the caller holds `output_lock(out)` and has checked OUT with `check_output`."""
    new, old = staging_paths(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        recover(out)
        try:
            _write_staging(files, new, out)
            with interrupt.deferred():
                _swap(new, out, old)
        except BaseException:
            remove_owned(new)
            raise
        remove_owned(old)
    except OSError as exc:  # a full disk, a permission taken away meanwhile: one line, OUT as it was
        raise MingError(f"-o {out}: cannot write {exc.filename or out} ({exc.strerror})") from None


def _write_staging(files: dict[str, str | bytes], new: Path, out: Path) -> None:
    new.mkdir()  # the umask's mode, as for any directory the user creates
    (new / MARKER).write_text(MARKER_TEXT, encoding="utf-8")
    for relative, content in sorted(files.items()):
        path = new / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    if out.exists():
        os.chmod(new, stat.S_IMODE(out.stat().st_mode))  # a rebuild keeps OUT's permissions


def _swap(new: Path, out: Path, old: Path) -> None:
    """Put `new` at `out`; the previous tree of `out`, if any, ends at `old`."""
    if out.exists():
        if _exchange(new, out):
            new.rename(old)
            return
        out.rename(old)
    new.rename(out)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two paths (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(error, os.strerror(error), str(b))


def recover(out: Path) -> None:
    """Finish what an interrupted build left: restore OUT if it went missing mid-swap, drop staging trees."""
    new, old = staging_paths(out)
    if not out.exists() and old.exists() and _owned(old):
        old.rename(out)
    for stale in (new, old):
        if stale.exists() and not stale.is_symlink() and stale.is_dir():
            if not _owned(stale) and any(stale.iterdir()):
                raise MingError(f"{stale}: exists and was not written by ming; remove or rename it")
            remove_owned(stale)


def remove_owned(tree: Path) -> None:
    """Remove a tree ming wrote, the marker last (an interrupted removal leaves a tree still known as ming's)."""
    if not tree.is_dir() or tree.is_symlink():
        return
    for entry in tree.iterdir():
        if entry.name == MARKER:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    (tree / MARKER).unlink(missing_ok=True)
    tree.rmdir()
