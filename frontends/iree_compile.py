"""The one call of `iree-compile` both frontends make: MLIR in (text or bytecode), linalg text out.

It runs under `isolated`'s bounds (MING_IMPORT_MEMORY_MB, MING_IMPORT_SECONDS): a crash, the time or
the memory limit is one line naming the model.
"""

from __future__ import annotations

from iree.compiler.tools import binaries

from ming_py.errors import MingError

from . import isolated, lowered_cache


def lower(source: bytes, flags: tuple[str, ...], model: str = "the model") -> str:
    """`source` through `iree-compile` with `flags`; its first error line as a MingError."""
    try:
        tool = binaries.find_tool("iree-compile")
    except Exception as exc:  # not installed, or its package broken
        raise MingError(f"iree-compile not found ({str(exc).splitlines()[0][:120] if str(exc) else exc!r}); "
                        "reinstall ming's dependencies (iree-base-compiler)") from None
    entry = lowered_cache.key(tool, flags, source)
    cached = lowered_cache.load(entry)
    if cached is not None:
        return cached
    try:
        output = isolated.run([tool, "-", *flags, "-o", "-"], "iree-compile", model, stdin=source)
    except MingError as exc:
        message = str(exc)
        prefix = f"iree-compile failed on {model}: "
        if message.startswith(prefix):  # its own error: the model's op it could not lower
            raise MingError(f"IREE could not lower {model}: {message[len(prefix):]}") from None
        raise
    text = output.decode()
    lowered_cache.store(entry, text)
    return text


def parse(text: str, context, model: str = "the model"):
    """The lowered MLIR text as a module in `context`; IREE output ming's bindings cannot read as one line."""
    from iree.compiler import ir

    try:
        return ir.Module.parse(text, context)
    except ir.MLIRError as exc:
        detail = next((line.strip() for line in str(exc).splitlines() if "error" in line.lower()
                       and "Unable to parse" not in line), str(exc).splitlines()[0] if str(exc) else "")
        raise MingError(f"IREE lowered {model} to code ming cannot read ({detail[:160]}); the model uses an op or "
                        "type outside ming's int8 subset") from None
