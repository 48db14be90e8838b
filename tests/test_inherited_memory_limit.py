"""An address-space limit ming inherits (`ulimit -v`, `prlimit --as`) below the one it gives its frontend
children: the child's limit is lowered to the inherited one, so the import runs and the limit ming reports
is the one that applies."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from ming_py.frontends import isolated
from test_faults import EXAMPLE

GIB = 2 ** 30
INHERITED = 8 * GIB  # below the child's limit asked for here, above what ming itself needs
ASKED_MB = 32768


def _inherit_limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (INHERITED, INHERITED))


def _environment() -> dict[str, str]:
    return {**os.environ, isolated.MEMORY_VARIABLE: str(ASKED_MB)}


@pytest.mark.unit
def test_the_limit_is_lowered_to_the_inherited_soft_and_hard_limits():
    infinity = resource.RLIM_INFINITY
    assert isolated.clamp_to_inherited(ASKED_MB, (infinity, infinity)) == ASKED_MB
    assert isolated.clamp_to_inherited(ASKED_MB, (8 * GIB, infinity)) == 8192
    assert isolated.clamp_to_inherited(ASKED_MB, (infinity, 6 * GIB)) == 6144
    assert isolated.clamp_to_inherited(ASKED_MB, (4 * GIB, 6 * GIB)) == 4096
    assert isolated.clamp_to_inherited(2048, (4 * GIB, 6 * GIB)) == 2048


@pytest.mark.unit
def test_the_reported_limit_is_the_inherited_one():
    program = "from ming_py.frontends import isolated; print(isolated.memory_mb())"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                            env=_environment(), preexec_fn=_inherit_limit, timeout=60)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == INHERITED // 2 ** 20


@pytest.mark.unit
def test_a_child_runs_under_an_inherited_limit():
    program = "from ming_py.frontends import isolated; import sys; " \
              "sys.stdout.buffer.write(isolated.run([sys.executable, '-c', 'print(42)'], 'a child', 'm.onnx'))"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                            env=_environment(), preexec_fn=_inherit_limit, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "42"


def test_the_import_runs_under_an_inherited_limit():
    result = subprocess.run([sys.executable, "-m", "ming_py.cli", "analyze", str(EXAMPLE)], capture_output=True,
                            text=True, env=_environment(), preexec_fn=_inherit_limit, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "kernels" in result.stdout and not result.stderr
