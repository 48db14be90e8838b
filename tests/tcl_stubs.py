"""Running generated Tcl scripts without the AMD tools: tclsh, or Python's own Tcl interpreter where no
tclsh is installed, sourcing a prelude of stub procedures before the script."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

FIELD, RECORD = "\x1f", "\x1e"

# `record NAME ARG ...` appends one call to the trace file ::trace_path (the prelude sets the variable
# first): the words joined by FIELD, each call ended by RECORD, so arguments may hold spaces and quotes.
RECORDER = r"""
set ::trace [open $::trace_path w]
fconfigure $::trace -encoding utf-8 -translation lf
proc record {args} {
  puts -nonewline $::trace "[join $args \x1f]\x1e"
  flush $::trace
}
"""


def run_tcl(script: Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Runs the Tcl file `script` in `cwd`; a Tcl error makes the return code non-zero with the message on
    stderr."""
    tclsh = shutil.which("tclsh", path=(env or {}).get("PATH"))
    if tclsh:
        return subprocess.run([tclsh, str(script)], capture_output=True, text=True, cwd=cwd, env=env)
    program = "import sys, tkinter\ntkinter.Tcl().evalfile(sys.argv[1])\n"
    return subprocess.run([sys.executable, "-c", program, str(script)], capture_output=True, text=True, cwd=cwd,
                          env=env)


def read_trace(path: Path) -> list[list[str]]:
    """The calls `record` wrote to `path`, each as its list of words."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return [call.split(FIELD) for call in text.split(RECORD) if call]
