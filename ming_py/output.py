"""The output directory: ming removes or replaces only what it wrote, atomically, one build at a time.

Ownership: every tree ming writes holds a marker file (`MARKER`) that lists the files it wrote (the
manifest, sorted). A build may write OUT only if OUT does not exist, is an empty directory, or holds the
marker and nothing but the files the marker lists (and their directories); never the current directory or
one of its parents, never a directory holding one of the build's inputs (the model, a settings file), never
a regular file or a symbolic link. Anything else in OUT (a file the user put there, a Vitis project, a
symbolic link) stops the build with one line naming it: ming never removes what it did not write.

Atomicity: the new tree is written beside OUT (`.OUT.ming-new`, marker first, every file created anew and
never through a symbolic link) and swapped in by renames only, after OUT is checked again (under the lock,
with SIGINT/SIGTERM deferred): still ming's, nothing foreign in it, every directory of it writable so that
the old tree can go. The old tree (`.OUT.ming-old`) is then removed file by file from its manifest, marker
last, so that a tree interrupted while being removed is still recognisably ming's. Whatever moment a
signal (even SIGKILL) arrives, OUT is the old tree or the complete new one, and the next build removes the
staging directories left behind. What appeared in OUT between the check and the swap is not removed: it
is left in `.OUT.ming-old` and named.

Concurrency: a build holds an exclusive lock on OUT (a lock file in ming's private cache directory, see
cache.py, keyed by OUT's real path) from before the import until the swap; a second build into the same
OUT stops at once with one line.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import os
import stat
from contextlib import contextmanager
from pathlib import Path

from . import interrupt
from .cache import open_lock, private_dir
from .errors import MingError

MARKER = ".ming-build"
MARKER_TEXT = ("This directory was written by ming (`ming build` or `ming sweep`). The next build into it removes\n"
               "the files listed below and nothing else; anything else in it stops that build.\n")
_LIST = b"files:\n"
_MARKER_LIMIT = 1 << 24  # a marker of ming's lists a few hundred names
_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2  # linux/fs.h
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_UNLISTED = "unlisted"  # a marker without a list of files (written by an earlier ming)


def staging_paths(out: Path) -> tuple[Path, Path]:
    """(new tree, old tree) beside OUT."""
    return out.parent / f".{out.name}.ming-new", out.parent / f".{out.name}.ming-old"


# --- checks -------------------------------------------------------------------------------------------------------

def check_output(out: str | Path, inputs: list[str | Path] = ()) -> Path:
    """OUT as an absolute path, after refusing every place ming must not replace (see the module doc)."""
    given = str(out)
    absolute = Path(os.path.abspath(out))
    if absolute.is_symlink():
        raise MingError(f"-o {given}: is a symbolic link; pass the directory it points to or a new one")
    out = absolute.resolve()
    if out == Path(out.anchor):
        raise MingError(f"-o {given}: is the file system root; pass a new directory for the build")
    cwd = Path.cwd().resolve()
    if out == cwd or out in cwd.parents:
        raise MingError(f"-o {given}: is the current directory or one of its parents; ming replaces OUT as a "
                        "whole, pass a new directory such as out/")
    for item in inputs:  # as given (a symbolic link inside OUT is in OUT) and where it leads
        for path in (Path(os.path.abspath(item)), Path(item).resolve()):
            if any(path == place or place in path.parents for place in (absolute, out)):
                raise MingError(f"-o {given}: holds the input {item}; pass a directory that does not contain "
                                "the build's inputs")
    parent = _existing_ancestor(out.parent)
    if not parent.is_dir():
        raise MingError(f"-o {given}: {parent} is not a directory; pass a path in a directory")
    _check_replaceable(out, given)
    if not os.access(parent, os.W_OK | os.X_OK, effective_ids=True):
        raise MingError(f"-o {given}: cannot write in {parent} (permission denied); pass a writable place")
    return out


def _existing_ancestor(path: Path) -> Path:
    while not os.path.lexists(path):
        path = path.parent
    return path


def _check_replaceable(out: Path, given: str) -> None:
    """Refuse OUT unless a swap may replace it: missing, an empty directory, or ming's tree with nothing else
    in it and every directory of it writable (so that the old tree can be removed once the new one is in)."""
    try:
        info = os.lstat(out)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise MingError(f"-o {given}: is a symbolic link; pass the directory it points to or a new one")
    if not stat.S_ISDIR(info.st_mode):
        raise MingError(f"-o {given}: exists and is not a directory; ming writes a directory, pass another path")
    listed = _listed(out)
    if listed is None:
        if os.listdir(out):
            raise MingError(f"-o {given}: is not empty and was not written by ming (no {MARKER}); pass a new or "
                            "empty directory")
        return
    if listed == _UNLISTED:
        raise MingError(f"-o {given}: was written by an earlier ming whose {MARKER} does not list its files; "
                        f"move out anything of yours, remove {out} and build again")
    directories: list[Path] = []
    foreign = _walk(out, listed, remove=False, directories=directories)
    if foreign:
        raise MingError(f"-o {given}: {_entries(out, foreign)} not written by ming; ming removes only what it "
                        f"wrote: move {_them(foreign)} out of {out} (or remove {_them(foreign)}) and build again")
    for directory in directories:
        if not os.access(directory, os.W_OK | os.X_OK, effective_ids=True):
            raise MingError(f"-o {given}: cannot remove the previous build's files from {directory} (permission "
                            f"denied); make it writable (chmod u+w {directory}) and build again")


def _entries(root: Path, relative: list[str]) -> str:
    """'root/a was' or 'root/a and N more entries were' (relative: sorted, the first named)."""
    first = root / relative[0]
    more = len(relative) - 1
    return f"{first} was" if not more else f"{first} and {more} more entr{'y' if more == 1 else 'ies'} were"


def _them(relative: list[str]) -> str:
    return "it" if len(relative) == 1 else "them"


# --- the manifest -------------------------------------------------------------------------------------------------

def manifest(files) -> bytes:
    """The marker's bytes for a tree of `files` (relative paths): the text, then one path a line, sorted."""
    names = sorted(files)
    for name in names:
        _check_relative(name)
    return MARKER_TEXT.encode() + _LIST + b"".join(os.fsencode(name) + b"\n" for name in names)


def _check_relative(name: str) -> None:
    parts = name.split("/")
    if (name == MARKER or "\n" in name or "\0" in name
            or any(part in ("", ".", "..") for part in parts)):
        raise ValueError(f"not a relative file path ming may write: {name!r}")


def _listed(tree: Path) -> frozenset[str] | str | None:
    """The files the marker of `tree` lists; None without a marker (a regular file), _UNLISTED for a marker
    without a valid list."""
    try:
        fd = os.open(tree / MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR):
            return None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = b""
        while len(data) <= _MARKER_LIMIT:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    head, found, body = data.partition(b"\n" + _LIST)
    if not found or len(data) > _MARKER_LIMIT or (body and not body.endswith(b"\n")):
        return _UNLISTED
    names = frozenset(os.fsdecode(line) for line in body.split(b"\n")[:-1] if line) if body else frozenset()
    try:
        for name in names:
            _check_relative(name)
    except ValueError:
        return _UNLISTED
    return names


def _directories(listed: frozenset[str]) -> frozenset[str]:
    return frozenset("/".join(name.split("/")[:depth]) for name in listed for depth in range(1, name.count("/") + 1))


def _walk(tree: Path, listed: frozenset[str], remove: bool, directories: list[Path] | None = None) -> list[str]:
    """The entries of `tree` ming did not write (relative, sorted; a foreign directory as one entry), never
    following a symbolic link; with `remove`, every listed file and listed directory left empty is removed.
    `directories` receives the tree's directories that hold listed files (the tree itself first)."""
    owned_dirs = _directories(listed)
    foreign: list[str] = []

    def visit(dir_fd: int, path: Path, prefix: str) -> None:
        if directories is not None:
            directories.append(path)
        for name in sorted(os.listdir(dir_fd)):
            relative = prefix + name
            try:
                mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(mode) and relative in owned_dirs:
                try:
                    sub = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise OSError(exc.errno, exc.strerror, str(path / name)) from None
                    foreign.append(relative)  # replaced by a symbolic link meanwhile
                    continue
                before = len(foreign)
                try:
                    visit(sub, path / name, relative + "/")
                finally:
                    os.close(sub)
                if remove and len(foreign) == before:
                    _rmdir(dir_fd, name, path, relative, foreign)
            elif stat.S_ISREG(mode) and (relative in listed or relative == MARKER):
                if remove and relative != MARKER:
                    _call(os.unlink, name, dir_fd, path)
            else:
                foreign.append(relative)

    fd = os.open(tree, _DIR_FLAGS)
    try:
        visit(fd, tree, "")
        if remove and not foreign:
            _call(os.unlink, MARKER, fd, tree, missing_ok=True)
    finally:
        os.close(fd)
    if remove and not foreign:
        _rmdir(None, tree, tree.parent, "", foreign)
    return sorted(foreign)


def _call(function, name: str, dir_fd: int, path: Path, missing_ok: bool = False) -> None:
    try:
        function(name, dir_fd=dir_fd)
    except FileNotFoundError:
        if not missing_ok:
            raise
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path / name)) from None


def _rmdir(dir_fd: int | None, name, path: Path, relative: str, foreign: list[str]) -> None:
    """Remove an emptied directory; what appeared in it meanwhile stays, and is named."""
    try:
        if dir_fd is None:
            os.rmdir(name)
        else:
            os.rmdir(name, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise OSError(exc.errno, exc.strerror, str(path / name if dir_fd is not None else name)) from None
        target = Path(name) if dir_fd is None else path / name
        foreign += [f"{relative}/{entry}" if relative else entry for entry in sorted(os.listdir(target))]


def remove_owned(tree: Path) -> list[str]:
    """Remove what ming wrote in `tree` (the files its marker lists, the marker last, then the directory);
    an empty directory without a marker goes too. Returns what is left: the entries ming did not write
    (relative, sorted), [] once the tree is gone. Never follows a symbolic link."""
    try:
        info = os.lstat(tree)
    except FileNotFoundError:
        return []
    if not stat.S_ISDIR(info.st_mode):
        return [""]
    listed = _listed(tree)
    if listed is None or listed == _UNLISTED:
        entries = sorted(os.listdir(tree))
        if not entries:
            os.rmdir(tree)
        return entries
    return _walk(tree, listed, remove=True)


# --- the lock -----------------------------------------------------------------------------------------------------

@contextmanager
def output_lock(out: Path):
    """Exclusive ownership of OUT for one build; a second build into OUT stops with one line."""
    fd = open_lock(private_dir("locks"), hashlib.sha256(os.fsencode(str(out))).hexdigest()[:32] + ".lock")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise MingError(f"-o {out}: another ming build is writing this directory; wait for it or pass "
                            "another -o") from None
        yield
    finally:
        os.close(fd)


# --- writing ------------------------------------------------------------------------------------------------------

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
            _write_staging(files, new)
            with interrupt.deferred():
                _check_replaceable(out, str(out))  # again: OUT may have changed while the build ran
                previous = _swap(new, out, old)
            _sync_directory(out.parent)  # the swap itself on disk
        except BaseException:
            remove_owned(new)
            raise
    except OSError as exc:  # a full disk, a permission taken away meanwhile: one line, OUT as it was
        raise MingError(f"-o {out}: cannot write {exc.filename or out} ({exc.strerror})") from None
    if previous is not None:
        _remove_previous(out, previous)


def _remove_previous(out: Path, previous: Path) -> None:
    """Remove the tree the swap put aside; name what stays there and what to do."""
    try:
        left = remove_owned(previous)
    except OSError as exc:
        raise MingError(f"-o {out}: the new build is in place, but the previous one in {previous} could not be "
                        f"removed ({exc.strerror}: {exc.filename}); make it writable (chmod -R u+w {previous}) "
                        "and the next build removes it") from None
    if left:
        raise MingError(f"-o {out}: the new build is in place, but {_entries(previous, left)} not written by ming "
                        f"(put in {out} while the build ran) and kept in {previous}: move what you need out of "
                        f"{previous}, then remove it")


def _write_staging(files: dict[str, str | bytes], new: Path) -> None:
    """The new tree in a fresh directory: the marker first, every file created there (O_EXCL, O_NOFOLLOW)."""
    listing = manifest(files)
    os.mkdir(new)  # the umask's mode, as for any directory the user creates; fails if anything is there
    root = os.open(new, _DIR_FLAGS)
    opened = {"": root}
    try:
        _write_file(root, MARKER, listing, new / MARKER)
        for relative, content in sorted(files.items()):
            *parents, name = relative.split("/")
            dir_fd = root
            for depth in range(1, len(parents) + 1):
                key = "/".join(parents[:depth])
                if key not in opened:
                    try:
                        os.mkdir(parents[depth - 1], dir_fd=dir_fd)
                        opened[key] = os.open(parents[depth - 1], _DIR_FLAGS, dir_fd=dir_fd)
                    except OSError as exc:
                        raise OSError(exc.errno, exc.strerror, str(new / key)) from None
                dir_fd = opened[key]
            data = content if isinstance(content, bytes) else content.encode("utf-8")
            _write_file(dir_fd, name, data, new / relative)
        for fd in opened.values():  # the directories' entries on disk too
            os.fsync(fd)
    finally:
        for fd in opened.values():
            os.close(fd)


def _write_file(dir_fd: int, name: str, data: bytes, path: Path) -> None:
    """Create `name` in `dir_fd` (never an existing file, never through a symbolic link) holding `data`."""
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                     dir_fd=dir_fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)  # on disk before the swap makes it OUT's (a power cut leaves no empty file)
        finally:
            os.close(fd)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from None


def _sync_directory(path: Path) -> None:
    fd = os.open(path, _DIR_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _swap(new: Path, out: Path, old: Path) -> Path | None:
    """Put `new` at `out` (which `_check_replaceable` just accepted); returns where the previous tree of
    `out` went (None if there was none)."""
    if os.path.lexists(out):
        os.chmod(new, stat.S_IMODE(os.lstat(out).st_mode))  # a rebuild keeps OUT's permissions
        if _exchange(new, out):
            try:
                _rename(new, old)
            except OSError:
                return new  # the previous tree stays under the staging name; removed just the same
            return old
        os.rename(out, old)
        try:
            os.rename(new, out)
        except BaseException:
            os.rename(old, out)
            raise
        return old
    try:
        _rename(new, out)
    except FileExistsError:
        raise MingError(f"-o {out}: was created by someone else while the build ran; ming left it as it is, "
                        "pass another -o or build again") from None
    return None


def _renameat2(a: Path, b: Path, flags: int) -> bool:
    """renameat2(2) with `flags`; False where unsupported (not Linux, an old kernel or file system)."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), flags) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(error, os.strerror(error), str(b))


def _rename(a: Path, b: Path) -> None:
    """Rename `a` to `b`, never replacing what is at `b` (FileExistsError) where the system allows."""
    try:
        done = _renameat2(a, b, _RENAME_NOREPLACE)
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise FileExistsError(exc.errno, exc.strerror, str(b)) from None
        raise
    if not done:
        os.rename(a, b)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two paths (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    return _renameat2(a, b, _RENAME_EXCHANGE)


def recover(out: Path) -> None:
    """Finish what an interrupted build left: restore OUT if it went missing mid-swap, drop staging trees
    (only what ming wrote in them; anything else stops the build, named)."""
    new, old = staging_paths(out)
    if not os.path.lexists(out) and os.path.isdir(old) and not old.is_symlink() and _listed(old) is not None:
        os.rename(old, out)
    for stale in (new, old):
        if not os.path.lexists(stale):
            continue
        if stale.is_symlink() or not stale.is_dir():
            raise MingError(f"{stale}: is in the way of ming's staging directory and was not written by ming; "
                            "move it away, then build again")
        try:
            left = remove_owned(stale)
        except OSError as exc:
            raise MingError(f"{stale}: left by an earlier build into {out} and cannot be removed ({exc.strerror}: "
                            f"{exc.filename}); make it writable (chmod -R u+w {stale}) or remove it, then build "
                            "again") from None
        if left:
            raise MingError(f"{stale}: left by an earlier build into {out}; {_entries(stale, left)} not written by "
                            f"ming: move what you need out of {stale}, then remove it and build again")
