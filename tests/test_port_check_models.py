"""`ming csim --check-ports` on a built model: the emitted design fits its memory ports, and a line
buffer stripped of its partition and reshape pragmas is reported by process, array and loop."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ming_py.csim import PortConflict, run_csim

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PORT_CONFLICT_EXIT_CODE = 3

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")


def ming(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ming_py.cli", *map(str, args)], capture_output=True, text=True)


def csim(build: Path, output: Path, *options: str) -> subprocess.CompletedProcess:
    return ming("csim", build, *options, "--input", EXAMPLES / "input.npy", "--output", output, "-q")


@pytest.fixture(scope="module")
def tiny_cnn(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny_cnn") / "out"
    result = ming("build", EXAMPLES / "tiny_cnn.onnx", "-o", out, "-q")
    assert result.returncode == 0, result.stderr
    return out


def function_lines(source: list[str], cpp_name: str) -> range:
    """The lines of the process function `cpp_name`: from its signature to the next function's."""
    start = next(i for i, line in enumerate(source) if re.match(rf"static void {cpp_name}\(", line))
    end = next((i for i in range(start + 1, len(source)) if re.match(r"(static )?void \w+\(", source[i])), len(source))
    return range(start, end)


def without_line_buffer_layout(build: Path, out: Path) -> tuple[str, str]:
    """A copy of `build` whose first process with a line buffer lost every pragma naming it:
    (that process's model name, the label of its pipelined loop)."""
    shutil.copytree(build, out)
    report = json.loads((out / "report.json").read_text())
    cpp = out / "hls" / f"{report['cpp_name']}.cpp"
    source = cpp.read_text().splitlines()
    node = next(n for n in report["nodes"] if any(b["name"] == "line_buffer" for b in n.get("buffers", [])))
    lines = function_lines(source, node["cpp_name"])
    pipeline = next(i for i in lines if "HLS_PRAGMA(PIPELINE" in source[i])
    label = next(m[1] for i in reversed(range(lines.start, pipeline)) if (m := re.match(r"\s*(\w+):$", source[i])))
    stripped = [line for i, line in enumerate(source) if not (i in lines and "variable=line_buffer" in line)]
    assert len(stripped) < len(source)
    cpp.write_text("\n".join(stripped) + "\n")
    return node["name"], label


@pytest.mark.parametrize("mode", [(), ("--sequential",)], ids=["concurrent", "sequential"])
def test_the_built_design_fits_its_ports(tiny_cnn, tmp_path, mode):
    normal = csim(tiny_cnn, tmp_path / "normal.npy", *mode)
    checked = csim(tiny_cnn, tmp_path / "checked.npy", "--check-ports", *mode)
    assert normal.returncode == 0, normal.stderr
    assert checked.returncode == 0, checked.stderr
    assert np.array_equal(np.load(tmp_path / "checked.npy"), np.load(tmp_path / "normal.npy"))


@pytest.mark.parametrize("mode", [(), ("--sequential",)], ids=["concurrent", "sequential"])
def test_a_line_buffer_without_its_layout_is_reported(tiny_cnn, tmp_path, mode):
    broken = tmp_path / "broken"
    process, label = without_line_buffer_layout(tiny_cnn, broken)
    assert csim(broken, tmp_path / "normal.npy", *mode).returncode == 0  # only the check sees it
    checked = csim(broken, tmp_path / "checked.npy", "--check-ports", *mode)
    assert checked.returncode == PORT_CONFLICT_EXIT_CODE, checked.stderr
    (line,) = checked.stderr.splitlines()
    assert line.startswith(f"ming: port conflict in {process}, loop {label} ("), line
    assert ": line_buffer: " in line and "per iteration" in line, line
    assert not (tmp_path / "checked.npy").exists()


def test_run_csim_raises_port_conflict(tiny_cnn, tmp_path):
    process, label = without_line_buffer_layout(tiny_cnn, tmp_path / "broken")
    x = np.load(EXAMPLES / "input.npy")
    with pytest.raises(PortConflict) as caught:
        run_csim(tmp_path / "broken", x, check_ports=True)
    conflict = caught.value
    assert (conflict.process, conflict.resource, conflict.loop) == (process, "line_buffer", label)
    assert re.fullmatch(r"\w+\.cpp:\d+", conflict.location)
    assert re.fullmatch(r"\d+ (accesses|reads|writes) .*per iteration.*\d+ (read |write )?ports?", conflict.detail)
