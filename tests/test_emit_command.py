"""`ming emit OUT`: a build's files written again from its saved design (OUT/design/), byte for byte when nothing
changed; an edited schedule emitted and verified against the saved expected outputs; a design ming cannot use
refused in one line, OUT left as it was."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import architectures
import tflite_models
from test_faults import EXAMPLE, ming


def tree(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def built(model: Path, out: Path, *options) -> Path:
    result = ming("build", model, "-q", "-o", out, *options)
    assert result.returncode == 0, result.stderr
    return out


def emitted(out: Path, *options) -> dict[str, bytes]:
    result = ming("emit", out, "-q", *options)
    assert result.returncode == 0, result.stderr
    return tree(out)


def edit(out: Path, change) -> None:
    path = out / "design" / "design.json"
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


@pytest.fixture(scope="module")
def residual_build(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("residual")
    model = directory / "residual.tflite"
    model.write_bytes(tflite_models.residual())
    return built(model, directory / "out")


def test_the_example_emits_byte_identical(example_copy):
    before = tree(example_copy)
    assert {name for name in before if name.startswith("design/")} >= {"design/design.json", "design/arrays/0.npy"}
    assert emitted(example_copy) == before


def test_a_tflite_residual_network_emits_byte_identical(residual_build, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(residual_build, out)
    assert emitted(out) == tree(residual_build)


def test_an_onnx_network_with_split_and_concat_emits_byte_identical(tmp_path):
    model = architectures.quantized("shufflenet_v2", "qdq_int8", tmp_path)
    out = built(model, tmp_path / "out")
    kinds = {node["kind"] for node in json.loads((out / "report.json").read_text())["nodes"]}
    assert {"split", "concat"} <= kinds
    before = tree(out)
    assert emitted(out) == before


def test_an_edited_schedule_is_emitted_and_verified(example_copy):
    before = tree(example_copy)

    def fold_conv2(document):
        document["schedule"]["processes"]["conv2"]["unroll"] = [["oc", 2], ["ic", 8], ["k", 3]]

    edit(example_copy, fold_conv2)
    after = emitted(example_copy)
    assert after["hls/tiny_cnn.cpp"] != before["hls/tiny_cnn.cpp"]
    report = json.loads(after["report.json"])
    assert report["verification"]["equal"] is True and report["verification"]["verified"] is True
    conv2 = next(node for node in report["nodes"] if node["name"] == "conv2")
    assert conv2["schedule"]["unroll"]["k"] == 3
    assert "settings.yaml" not in after and "cycles" not in conv2  # the ILP's estimates were for another schedule
    assert after["hls/expected.bin"] == before["hls/expected.bin"]


def test_another_board_is_emitted_for_it(example_copy):
    after = emitted(example_copy, "--board", "u55c")
    assert json.loads(after["host.json"])["board"] == "u55c"
    assert any(name.startswith("vitis/") for name in after) and not any(name.startswith("vivado/") for name in after)


def test_a_schedule_that_deadlocks_is_refused_and_nothing_written(residual_build, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(residual_build, out)
    edit(out, lambda document: document["schedule"]["depths"].update({c: 1 for c in document["schedule"]["depths"]}))
    before = tree(out)
    result = ming("emit", out, "-q")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("ming: error: ") and "deadlocks (ming simulate:" in result.stderr
    assert "Traceback" not in result.stderr and tree(out) == before


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(version=7), "version: 7 is not version 4"),
    (lambda d: d["schedule"]["processes"]["conv2"].update(unroll=[["oc", 3]]), "unroll oc=3 does not divide"),
    (lambda d: d["schedule"]["lanes"].update(conv1_to_pool1="8"), "schedule.lanes.conv1_to_pool1: expected int"),
    (lambda d: d.update(images={}), "images: [], not the images"),
    (lambda d: d.update(clock_mhz=0), "clock_mhz: 0 (a number from 1 to 1000"),
    (lambda d: d["stream_graph"]["processes"][0]["window"].update(groups=0), "window: groups 0 (each at least 1)"),
    (lambda d: d["estimates"]["totals"].pop("estimated_latency_us"),
     "estimates.totals.estimated_latency_us: missing or malformed"),
])
def test_an_invalid_edit_is_refused_in_one_line(example_copy, change, message):
    edit(example_copy, change)
    before = tree(example_copy)
    result = ming("emit", example_copy, "-q")
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and tree(example_copy) == before
    assert "Traceback" not in result.stderr


def test_a_directory_without_a_design_is_refused(tmp_path):
    result = ming("emit", tmp_path / "nothing", "-q")
    assert result.returncode == 2 and "holds no saved design" in result.stderr, result.stderr


def test_emit_without_verification_says_so(example_copy):
    after = emitted(example_copy, "--no-verify")
    assert json.loads(after["report.json"])["verification"]["verified"] is False


def test_the_example_model_is_where_host_json_says(example_build):
    host = json.loads((example_build / "host.json").read_text())
    design = json.loads((example_build / "design" / "design.json").read_text())
    assert design["model_file"] == host["model_file"] and Path(host["model_file"]["path"]) == EXAMPLE.resolve()
