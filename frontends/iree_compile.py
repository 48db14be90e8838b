"""The one call of `iree-compile` both frontends make: MLIR in (text or bytecode), linalg text out."""

from __future__ import annotations

import subprocess

from iree.compiler.tools import binaries

from ming_py.ir import MingError


def lower(source: bytes, flags: tuple[str, ...]) -> str:
    """`source` through `iree-compile` with `flags`; its first error line as a MingError."""
    result = subprocess.run([binaries.find_tool("iree-compile"), "-", *flags, "-o", "-"], input=source,
                            capture_output=True)
    if result.returncode != 0:
        message = next((line for line in result.stderr.decode().splitlines() if "error" in line),
                       "iree-compile failed")
        raise MingError(f"IREE could not lower the model: {message.strip()[:200]}")
    return result.stdout.decode()
