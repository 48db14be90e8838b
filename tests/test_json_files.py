"""Every JSON file ming reads and did not just write (a calibration or settings file, a build's report.json and
host.json, the deployed accelerator.json) is bounded in nesting: a document 100,000 levels deep, far under the
size caps, is one line naming the file, never the parser's RecursionError."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ming_py import csim
from ming_py.contract import ming_json
from ming_py.calibration import load_calibration
from ming_py.errors import MingError
from ming_py.runtime import ming_driver

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tiny_cnn.onnx"
VENDOR_REPORTS = Path(__file__).resolve().parent / "data" / "vendor_reports"
DEEP = "[" * 100_000 + "]" * 100_000  # 200 KB: under every size cap


def ming(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ming_py.cli", *map(str, args)], capture_output=True, text=True)


def assert_one_line(result: subprocess.CompletedProcess, prefix: str, *fragments: str) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def out(example_copy) -> Path:
    return example_copy


def deep_file(path: Path) -> Path:
    path.write_text(DEEP)
    return path


# --- the reader ------------------------------------------------------------------------------------------------

@pytest.mark.unit
def test_nesting_is_counted_flat_up_to_the_limit():
    limit = ming_json.MAX_JSON_DEPTH
    assert ming_json.json_document("[" * limit + "]" * limit) is not None
    for text in ("[" * (limit + 1) + "]" * (limit + 1), DEEP, "{" * 100_000):
        with pytest.raises(ValueError, match=f"nested deeper than {limit} levels"):
            ming_json.json_document(text)


@pytest.mark.unit
def test_brackets_inside_strings_are_not_nesting():
    text = json.dumps({"name": "[" * 1000 + '\\"{' * 1000})
    assert ming_json.json_document(text) == json.loads(text)


@pytest.mark.unit
def test_nan_and_infinity_only_where_allowed():
    assert ming_json.json_document("[Infinity]") == [float("inf")]
    for constant in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(ValueError, match=f"{constant} is not a number JSON allows"):
            ming_json.json_document(f"[{constant}]", allow_nan=False)


@pytest.mark.unit
def test_the_reader_caps_the_size_and_reads_only_regular_files(tmp_path):
    big = tmp_path / "big.json"
    big.write_text(json.dumps(["x" * 100]))
    with pytest.raises(ValueError, match="larger than 64 bytes"):
        ming_json.read_json(big, max_bytes=64)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        ming_json.read_json(fifo)


@pytest.mark.unit
def test_a_deep_calibration_file_is_a_ming_error(tmp_path):
    with pytest.raises(MingError, match="not a ming calibration file .*nested deeper than 64 levels"):
        load_calibration(deep_file(tmp_path / "calibration.json"))


@pytest.mark.unit
def test_a_deep_report_names_no_process_for_a_port_conflict(tmp_path):
    deep_file(tmp_path / "report.json")
    assert csim.process_name(tmp_path, "conv1_process") == "conv1_process"


# --- through every command -------------------------------------------------------------------------------------

def test_build_with_a_deep_calibration_file(tmp_path):
    calibration = deep_file(tmp_path / "calibration.json")
    assert_one_line(ming("build", EXAMPLE, "-q", "-o", tmp_path / "out", "--calibration", calibration),
                    "ming: error: ", str(calibration), "nested deeper than 64 levels")


def test_build_with_a_deep_settings_file(tmp_path):
    settings = deep_file(tmp_path / "settings.json")
    assert_one_line(ming("build", EXAMPLE, "-q", "-o", tmp_path / "out", "--settings", settings),
                    "ming: error: ", str(settings), "nested deeper than 64 levels")


def test_compare_does_not_overwrite_a_deep_file_it_cannot_read(out, tmp_path):
    for tool in ("hls", "vivado"):
        shutil.copytree(VENDOR_REPORTS / tool, out / tool, dirs_exist_ok=True)
    target = deep_file(tmp_path / "calibration.json")
    assert_one_line(ming("compare", out, "--write-calibration", target), "ming: error: ", str(target),
                    "not a ming calibration file")
    assert target.read_text() == DEEP


@pytest.mark.parametrize("command", ["compare", "simulate"])
def test_a_deep_report_json(out, command):
    deep_file(out / "report.json")
    assert_one_line(ming(command, out), "ming: error: ", str(out / "report.json"), "nested deeper than 64 levels")


def test_csim_with_a_deep_host_json(out, tmp_path):
    deep_file(out / "host.json")
    assert_one_line(ming("csim", out, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy"),
                    "ming: error: ", "host.json", "nested deeper than 64 levels")


def test_run_py_with_a_deep_accelerator_json(out, tmp_path):
    deep_file(out / "deploy" / "accelerator.json")
    result = subprocess.run([sys.executable, out / "deploy" / "run.py", "--backend", "csim", "--input",
                             tmp_path / "x.npy", "--output", tmp_path / "y.npy"], capture_output=True, text=True)
    assert_one_line(result, "error: ", "accelerator.json", "nested deeper than 64 levels")
    with pytest.raises(ming_driver.DeployError, match="nested deeper than 64 levels"):
        ming_driver.read_metadata(out / "deploy")


def test_the_trace_check_of_a_deep_report_json_leaves_it_to_the_csim(out):
    from ming_py.pipeline import lift
    from ming_py.trace import check_same_channels

    deep_file(out / "report.json")
    assert check_same_channels(out, EXAMPLE, lift(EXAMPLE)) is None
