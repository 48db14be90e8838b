"""SIGINT and SIGTERM as an exception, so that every `finally` and context manager runs.

With the default handlers SIGTERM kills ming at once (leaving iree-compile or g++
running and staging files behind) and SIGINT prints a traceback. Raising
`Interrupted` in the main thread instead unwinds the stack: `subprocess.run`
kills its child, staging directories and temporary files are removed, and the
CLI exits with 128 + the signal number and one line.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """A termination signal arrived; a BaseException so that `except Exception` does not swallow it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _raise(signum, frame):
    raise Interrupted(signum)


def install() -> None:
    for signum in SIGNALS:
        signal.signal(signum, _raise)


@contextmanager
def deferred():
    """Hold SIGINT/SIGTERM back for a few system calls that must not be separated (a directory swap)."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
