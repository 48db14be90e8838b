"""pytest plugin: a test marked `unit` imports no IREE and starts no C/C++ compiler.

Load it from tests/conftest.py with `pytest_plugins = ["unit_guard"]` (conftest.py puts tests/ on sys.path
first), or on the command line: `PYTHONPATH=tests python -m pytest -p unit_guard ...` (not `-p tests.unit_guard`:
the virtualenv has an unrelated site-packages package named `tests` that shadows this directory).

Around the setup and the call of every test carrying the `unit` mark (teardown is not watched) it

* hides the `iree` modules already imported in the worker (by the collection of a test module that imports the
  product's frontend, or by an earlier non-unit test) from `sys.modules`, and puts a finder first on
  `sys.meta_path` that raises for `iree` and `iree.*`: an import of IREE, direct or through a product module,
  fails whatever the worker ran before;
* makes every non-dunder attribute of those hidden modules raise: a product module imported before the test holds
  them (`from iree.compiler import ir` in the frontend), so using IREE needs no import;
* fails the test when `sys.modules` gained an `iree` entry anyway (a module put there by hand);
* wraps `subprocess.Popen.__init__` (so `subprocess.run`, `check_output`, `os.popen`, asyncio), `os.posix_spawn`,
  `os.posix_spawnp`, `os.system`, the `os.exec*` and `os.spawn*` functions: a program whose basename (of
  argv[0], of `executable=`, or the first word of a shell command) is a C/C++ compiler -- g++, gcc, c++, cc,
  clang, clang++, with a target prefix (x86_64-linux-gnu-g++) or version suffix (g++-12), behind ccache or
  distcc, or the value of $CXX at that moment -- is refused with an error before it starts.

Everything is put back after the phase. A violation fails the test with a message that names what was imported,
used or started, even when the test caught the ImportError or OSError it got (a test that skipped itself on the
ImportError, pytest.importorskip, fails too).

Not seen: what a child process does (a `python -m ming_py.cli ...` child imports IREE even to report a bad
option), and IREE imported at collection time by a test module (the guard watches tests, not modules).
"""

from __future__ import annotations

import importlib.abc
import os
import re
import shlex
import subprocess
import sys
import types

import pytest

MARK = "unit"
COMPILERS = ("g++", "gcc", "c++", "cc", "clang", "clang++")
# a compiler's basename, optionally with a target prefix (x86_64-linux-gnu-g++) and a version suffix (g++-12)
_COMPILER = re.compile(r"(?:[A-Za-z0-9_.]+-)*(?:g\+\+|gcc|c\+\+|cc|clang|clang\+\+)(?:-[0-9][0-9.]*)?")
_WRAPPERS = ("ccache", "distcc", "sccache")
_OWNER = "_ming_unit_guard_owner"  # config attribute: the module object of the copy that acts


class UnitGuardImportError(ImportError):
    """Raised by the finder for an IREE import inside a unit test."""


class UnitGuardSpawnError(OSError):
    """Raised instead of starting a C/C++ compiler inside a unit test."""


class UnitGuardUseError(RuntimeError):
    """Raised when a unit test uses an IREE module imported before it (through a product module holding it)."""


def _is_iree(name: str) -> bool:
    return name == "iree" or name.startswith("iree.")


def _basename(word) -> str:
    return os.path.basename(os.fsdecode(word)) if word not in (None, "") else ""


def compiler_in(argv, executable=None) -> str | None:
    """The compiler `argv` (a list, or a shell command string) would start, or None."""
    if isinstance(argv, (str, bytes, os.PathLike)) and not isinstance(argv, (list, tuple)):
        text = os.fsdecode(argv)
        try:
            words = shlex.split(text)
        except ValueError:
            words = text.split()
        # a shell command: skip leading VAR=value assignments
        while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
            words.pop(0)
    else:
        words = [os.fsdecode(w) if isinstance(w, (bytes, os.PathLike)) else str(w) for w in argv]
    programs = [_basename(executable)] if executable else []
    if words:
        programs.append(_basename(words[0]))
        if _basename(words[0]) in _WRAPPERS and len(words) > 1:
            programs.append(_basename(words[1]))
    cxx = os.environ.get("CXX", "").strip()
    cxx_names = set()
    if cxx:
        try:
            first = shlex.split(cxx)[0]
        except (ValueError, IndexError):
            first = cxx.split()[0] if cxx.split() else cxx
        cxx_names = {cxx, first, _basename(first)}
    for program in programs:
        if program and (_COMPILER.fullmatch(program) or program in COMPILERS or program in cxx_names):
            return program
    if words and (words[0] in cxx_names):
        return words[0]
    return None


class _IreeBlocker(importlib.abc.MetaPathFinder):
    def __init__(self, guard: _Guard):
        self.guard = guard

    def find_spec(self, name, path=None, target=None):
        if _is_iree(name):
            message = f"imported IREE module {name!r}"
            self.guard.record(message)
            raise UnitGuardImportError(f"unit test {self.guard.nodeid}: {message} (a unit test must not import IREE)")
        return None


class _Guard:
    """The watch over one phase (setup or call) of one unit test."""

    def __init__(self, nodeid: str):
        self.nodeid = nodeid
        self.violations: list[str] = []
        self.hidden: dict[str, object] = {}
        self.classes: list[tuple[object, type]] = []  # (hidden IREE module, its own class)
        self.patched: list[tuple[object, str, object]] = []
        self.finder = _IreeBlocker(self)

    def record(self, message: str) -> None:
        if message not in self.violations:
            self.violations.append(message)

    def check_spawn(self, how: str, argv, executable=None) -> None:
        program = compiler_in(argv, executable)
        if program is not None:
            shown = argv if isinstance(argv, (str, bytes)) else " ".join(map(str, argv))
            message = f"started the C/C++ compiler {program!r} ({how}: {shown})"
            self.record(message)
            raise UnitGuardSpawnError(f"unit test {self.nodeid}: {message} (a unit test must not start a compiler)")

    # -- install / uninstall ---------------------------------------------------------------------------

    def install(self) -> None:
        self.hidden = {name: module for name, module in sys.modules.items() if _is_iree(name)}
        for name in self.hidden:
            del sys.modules[name]
        self._poison(self.hidden.values())
        sys.meta_path.insert(0, self.finder)
        self._patch_spawning()

    def _poison(self, modules) -> None:
        """Make every attribute of the hidden IREE modules (but dunders) raise: a product module imported before
        the test holds them (`from iree.compiler import ir`), so using IREE needs no import."""
        guard = self
        poisoned: dict[type, type] = {}
        for module in modules:
            own = type(module)
            if not isinstance(module, types.ModuleType):
                continue
            if own not in poisoned:
                def __getattribute__(self, name, _own=own):
                    if name.startswith("__") and name.endswith("__"):
                        return _own.__getattribute__(self, name)
                    module_name = _own.__getattribute__(self, "__name__")
                    message = f"used IREE module {module_name!r} (attribute {name!r}) imported before the test"
                    guard.record(message)
                    raise UnitGuardUseError(f"unit test {guard.nodeid}: {message} (a unit test must not use IREE)")
                poisoned[own] = type(f"UnitGuarded{own.__name__.capitalize()}", (own,),
                                     {"__getattribute__": __getattribute__, "__slots__": ()})
            try:
                module.__class__ = poisoned[own]
            except TypeError:  # a module type that refuses it: left as it is
                continue
            self.classes.append((module, own))

    def uninstall(self) -> None:
        for module, own in reversed(self.classes):
            module.__class__ = own
        self.classes.clear()
        for owner, attribute, original in reversed(self.patched):
            setattr(owner, attribute, original)
        self.patched.clear()
        while self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        gained = sorted(name for name in sys.modules if _is_iree(name))
        if gained:
            self.record(f"sys.modules gained IREE module(s) {', '.join(gained)}")
        sys.modules.update(self.hidden)
        self.hidden = {}

    def _patch(self, owner, attribute: str, make) -> None:
        original = getattr(owner, attribute, None)
        if original is None:
            return
        self.patched.append((owner, attribute, original))
        setattr(owner, attribute, make(original))

    def _patch_spawning(self) -> None:
        guard = self

        def popen_init(original):
            def __init__(self, args, *rest, **kwargs):
                executable = kwargs.get("executable")
                if executable is None and len(rest) >= 2:  # Popen(args, bufsize, executable, ...)
                    executable = rest[1]
                if kwargs.get("shell") or (len(rest) >= 8 and rest[7]):
                    guard.check_spawn("subprocess, shell", args if isinstance(args, (str, bytes)) else
                                      " ".join(map(str, args)))
                else:
                    guard.check_spawn("subprocess", [args] if isinstance(args, (str, bytes, os.PathLike)) else args,
                                      executable)
                return original(self, args, *rest, **kwargs)
            return __init__

        def spawn(name):
            def make(original):
                def wrapper(path, argv, *rest, **kwargs):
                    guard.check_spawn(f"os.{name}", list(argv) or [path], path)
                    return original(path, argv, *rest, **kwargs)
                return wrapper
            return make

        def spawn_mode(name):  # os.spawnv(mode, path, args, ...)
            def make(original):
                def wrapper(mode, path, argv, *rest, **kwargs):
                    guard.check_spawn(f"os.{name}", list(argv) or [path], path)
                    return original(mode, path, argv, *rest, **kwargs)
                return wrapper
            return make

        def spawn_list(name):  # os.execl(path, arg0, ...), os.spawnl(mode, path, arg0, ...)
            def make(original):
                def wrapper(*args):
                    path, argv = (args[1], args[2:]) if name.startswith("spawn") else (args[0], args[1:])
                    if name.endswith("e"):
                        argv = argv[:-1]
                    guard.check_spawn(f"os.{name}", list(argv) or [path], path)
                    return original(*args)
                return wrapper
            return make

        def system(original):
            def wrapper(command):
                guard.check_spawn("os.system", command)
                return original(command)
            return wrapper

        self._patch(subprocess.Popen, "__init__", popen_init)
        for name in ("posix_spawn", "posix_spawnp", "execv", "execve", "execvp", "execvpe"):
            self._patch(os, name, spawn(name))
        for name in ("spawnv", "spawnve", "spawnvp", "spawnvpe"):
            self._patch(os, name, spawn_mode(name))
        for name in ("execl", "execle", "execlp", "execlpe", "spawnl", "spawnle", "spawnlp", "spawnlpe"):
            self._patch(os, name, spawn_list(name))
        self._patch(os, "system", system)


def _acts(config) -> bool:
    return getattr(config, _OWNER, None) is sys.modules[__name__]


def pytest_configure(config):
    if getattr(config, _OWNER, None) is None:
        setattr(config, _OWNER, sys.modules[__name__])
    config.addinivalue_line("markers", f"{MARK}: no IREE import and no C++ compile (`pytest -m {MARK}`)")


def _guarded_phase(item):
    """Generator body of the setup and call wrappers."""
    if not _acts(item.config) or item.get_closest_marker(MARK) is None:
        return (yield)
    guard = _Guard(item.nodeid)
    guard.install()
    try:
        result = yield
    except BaseException as error:
        guard.uninstall()
        if guard.violations:
            raise pytest.fail.Exception(_message(item, guard), pytrace=False) from error
        raise
    guard.uninstall()
    if guard.violations:
        pytest.fail(_message(item, guard), pytrace=False)
    return result


def _message(item, guard: _Guard) -> str:
    return f"unit test {item.nodeid} broke the unit tier: " + "; ".join(guard.violations)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    return (yield from _guarded_phase(item))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    return (yield from _guarded_phase(item))
