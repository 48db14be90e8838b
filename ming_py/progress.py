"""Concise progress lines on stderr: what runs, how long it took, what was written."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager


class Progress:
    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.start = time.perf_counter()

    @contextmanager
    def step(self, text: str):
        """Announce a step before it runs (so long ones show they are running), then its time."""
        if not self.quiet:
            print(f"ming: {text} ...", end="", file=sys.stderr, flush=True)
        began = time.perf_counter()
        try:
            yield
        except BaseException:
            if not self.quiet:
                print(" failed", file=sys.stderr, flush=True)
            raise
        if not self.quiet:
            print(f" {time.perf_counter() - began:.1f} s", file=sys.stderr, flush=True)

    def note(self, text: str) -> None:
        if not self.quiet:
            print(f"ming: {text}", file=sys.stderr, flush=True)

    def elapsed(self) -> float:
        return time.perf_counter() - self.start
