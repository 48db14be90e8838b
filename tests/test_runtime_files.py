"""The deployed driver's C-simulation stamp and ming's readers of report.json and calibration files meet odd files
without hanging, writing through a planted link or raising past their one-line errors."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from ming_py import csim
from ming_py.calibration import MAX_BYTES, load_calibration
from ming_py.errors import MingError
from ming_py.contract import ming_cxx
from ming_py.runtime import ming_driver

JOIN_SECONDS = 10.0  # far above the milliseconds the hash of a few small files takes; a hang never ends


def small_csim(deploy: Path) -> dict:
    deploy.mkdir()
    (deploy.parent / "hls").mkdir()
    (deploy.parent / "hls" / "m.cpp").write_text("int main() { return 0; }\n")
    (deploy.parent / "hls" / "m.h").write_text("// header\n")
    return {"sources": ["../hls/m.cpp"], "include": ["../hls"]}


@pytest.mark.unit
def test_a_fifo_among_the_headers_is_hashed_as_unreadable_without_waiting(tmp_path):
    deploy = tmp_path / "deploy"
    csim_data = small_csim(deploy)
    before = ming_cxx.csim_inputs(deploy, csim_data)
    fifo = tmp_path / "hls" / "planted.h"
    os.mkfifo(fifo)
    found = []
    worker = threading.Thread(target=lambda: found.append(ming_cxx.csim_inputs(deploy, csim_data)), daemon=True)
    worker.start()
    worker.join(JOIN_SECONDS)
    if worker.is_alive():  # release the reader blocked in open() before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join()
        pytest.fail("csim_inputs waited on a FIFO header")
    assert found and found[0] != before


@pytest.mark.unit
def test_the_stamp_is_written_through_a_new_file_not_a_planted_link(tmp_path):
    binary = tmp_path / "m_csim"
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    stamp = ming_cxx.stamp_path(binary)
    os.link(victim, stamp.with_name(f".{stamp.name}.{os.getpid()}"))
    ming_cxx._write_stamp(binary, "a" * 64, "b" * 64)
    assert victim.read_text() == "keep me\n"
    assert stamp.read_text() == f"{'a' * 64} {'b' * 64}\n"


@pytest.mark.unit
def test_a_stamp_that_cannot_be_removed_is_a_deploy_error(tmp_path):
    binary = tmp_path / "m_csim"
    ming_cxx.stamp_path(binary).mkdir()
    with pytest.raises(ming_driver.DeployError, match=r"cannot remove the stale stamp .*m_csim\.sha256"):
        ming_cxx._remove_stamp(binary)


@pytest.mark.unit
@pytest.mark.parametrize("report", [{"nodes": 5}, {"nodes": [{"cpp_name": "f"}]}, [1, 2], {"nodes": None}])
def test_a_report_of_the_wrong_shape_names_no_process(tmp_path, report):
    (tmp_path / "report.json").write_text(json.dumps(report))
    assert csim.process_name(tmp_path, "f") == "f"


@pytest.mark.unit
def test_a_calibration_file_is_read_as_every_json_file_is(tmp_path):
    big = tmp_path / "big.json"
    big.write_text(" " * (MAX_BYTES + 1))
    with pytest.raises(MingError, match=f"larger than {MAX_BYTES:,} bytes, so not a ming calibration file"):
        load_calibration(big)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(MingError, match="not a regular file, so not a ming calibration file"):
        load_calibration(fifo)
    with pytest.raises(MingError, match="no such calibration file"):
        load_calibration(tmp_path / "missing.json")
