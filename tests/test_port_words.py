"""The words a port carries per image are bounded as `ming build` bounds maps: metadata (accelerator.json,
host.json) stating more, however consistent its shapes and word counts, is refused in one line before any
buffer is sized from it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ming_py import limits
from ming_py.contract import ming_host
from ming_py.contract import accelerator_schema
from ming_py.runtime import ming_driver

HUGE = 10**10  # values of one image: 1.25e9 words, 9.31 GiB of buffer per image


def reshaped(port: dict, values: int) -> None:
    """`port` consistently made a vector of `values` values: shapes, words and a plain layout."""
    port.update(onnx_shape=[1, values], array_shape=[values], stream_shape=[1, 1, values],
                words=ming_host.words_per_image(values), permutation=[], host_ops=[])


def huge_output(meta: dict, values: int = HUGE) -> dict:
    reshaped(meta["outputs"][0], values)
    meta["max_transfer_bytes"] = max(meta["max_transfer_bytes"], 8 * meta["outputs"][0]["words"])
    return meta


@pytest.fixture
def deploy(example_copy) -> Path:
    return example_copy / "deploy"


def metadata(deploy: Path) -> dict:
    return json.loads((deploy / "accelerator.json").read_text())


def rewrite(deploy: Path, meta: dict) -> None:
    (deploy / "accelerator.json").write_text(json.dumps(meta))


@pytest.mark.unit
def test_the_bounds_are_those_ming_build_applies():
    assert accelerator_schema.MAX_MAP_VALUES == limits.MAX_MAP_VALUES
    assert accelerator_schema.MAX_RECORD_VALUES == limits.MAX_STREAMED_VALUES


def test_a_consistent_huge_output_port_is_refused_before_anything_is_sized(deploy):
    rewrite(deploy, huge_output(metadata(deploy)))
    with pytest.raises(ming_driver.DeployError, match=r"'outputs\[0\].stream_shape' is \[1, 1, 10000000000\]: "
                                                      r"10,000,000,000 values per image, more than the 16,777,216"):
        ming_driver.read_metadata(deploy)


def test_a_map_at_the_bound_passes_and_one_more_value_does_not(deploy):
    rewrite(deploy, huge_output(metadata(deploy), accelerator_schema.MAX_MAP_VALUES))
    ming_driver.read_metadata(deploy)
    rewrite(deploy, huge_output(metadata(deploy), accelerator_schema.MAX_MAP_VALUES + 1))
    with pytest.raises(ming_driver.DeployError, match="more than the 16,777,216 of any map"):
        ming_driver.read_metadata(deploy)


def test_outputs_together_past_what_a_build_streams_are_refused(deploy):
    meta = huge_output(metadata(deploy), accelerator_schema.MAX_MAP_VALUES)
    second = json.loads(json.dumps(meta["outputs"][0])) | {"onnx_name": "second", "index": 1}
    meta["outputs"].append(second)
    meta["max_transfer_bytes"] = 2**40
    rewrite(deploy, meta)
    assert 2 * accelerator_schema.MAX_MAP_VALUES > accelerator_schema.MAX_RECORD_VALUES
    with pytest.raises(ming_driver.DeployError, match="hold 33,554,432 values per image, more than the 24,000,000"):
        ming_driver.read_metadata(deploy)


def test_run_py_refuses_it_in_one_line_without_compiling(deploy, tmp_path):
    rewrite(deploy, huge_output(metadata(deploy)))
    port = metadata(deploy)["input"]
    np.save(tmp_path / "x.npy", np.zeros(port["onnx_shape"], np.float32))
    marker = tmp_path / "compiler-was-called"
    cxx = tmp_path / "cxx"
    cxx.write_text(f"#!/bin/sh\ntouch '{marker}'\nexit 1\n")
    cxx.chmod(0o755)
    result = subprocess.run([sys.executable, deploy / "run.py", "--backend", "csim", "--input", tmp_path / "x.npy",
                             "--output", tmp_path / "y.npy"], capture_output=True, text=True,
                            env=os.environ | {"CXX": str(cxx)})
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "values per image, more than" in lines[0], lines
    assert not marker.exists() and not (tmp_path / "y.npy").exists()
    assert math.prod(metadata(deploy)["outputs"][0]["stream_shape"]) == HUGE
