"""ming's cache directory (C-simulation binaries, build locks): private to its user.

Whatever ming runs or locks from the cache must have been put there by the same user: a directory that
another user can write in (a shared MING_CACHE_DIR of mode 1777) would let them plant a binary or a lock
symlink. So every directory of the cache is the user's own, not writable by group or others, and never a
symbolic link; anything else is refused with one line before it is used.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import MingError

PRIVATE_MODE = 0o700


def cache_root() -> Path:
    root = os.environ.get("MING_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"),
                                                           "ming")
    return Path(os.path.abspath(root))


def private_dir(*parts: str) -> Path:
    """The cache directory `parts` below the root, created (mode 0700) where missing; every level from the
    root down checked to be this user's own directory that nobody else can write in."""
    path = cache_root()
    _make_private(path, parents=True)
    for part in parts:
        path = path / part
        _make_private(path)
    return path


def _make_private(path: Path, parents: bool = False) -> None:
    if parents:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # FileExistsError: a file on the way
            why = "a file is in the way" if isinstance(exc, FileExistsError) else exc.strerror
            raise MingError(f"cannot create ming's cache directory {path} ({why}); set MING_CACHE_DIR to a "
                            "writable directory of your own") from None
    try:
        os.mkdir(path, PRIVATE_MODE)
    except FileExistsError:
        pass
    except OSError as exc:
        raise MingError(f"cannot create ming's cache directory {path} ({exc.strerror}); set MING_CACHE_DIR to a "
                        "writable directory of your own") from None
    problem = _not_private(path)
    if problem:
        raise MingError(f"ming's cache directory {path} {problem}; set MING_CACHE_DIR to a directory of your own "
                        "that only you can write (mode 0700)")


def _not_private(path: Path) -> str | None:
    """Why `path` cannot hold what ming will run or lock, None when it is a private directory."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    return not_only_yours(info)


def not_only_yours(info: os.stat_result) -> str | None:
    """Why another user could change what `info` describes, None when it is this user's and only they can
    write it."""
    if info.st_uid != os.geteuid():
        return "belongs to another user"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "can be written by other users"
    return None


def open_lock(directory: Path, name: str) -> int:
    """A descriptor of the lock file `name` in the private `directory`, created (mode 0600) if missing and
    never through a symbolic link."""
    path = directory / name
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise MingError(f"cannot open the lock {path} ({exc.strerror}); remove it, ming creates it again") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        os.close(fd)
        raise MingError(f"the lock {path} is not a regular file of yours; remove it, ming creates it again")
    return fd
