"""`ming build` verifies itself: the emitted C++ is C-simulated on two images and compared with ming reference
before anything is written; a difference stops the build (exit 3) and installs nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import zoo
from ming_py import build as build_module
from ming_py.build import BuildOptions, build
from ming_py.cli import main
from ming_py.ilp.pins import parse_assignments
from ming_py.reference import run_integer
from ming_py.sample import extreme_input

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tiny_cnn.onnx"


def test_a_build_records_what_it_verified(tmp_path):
    out = tmp_path / "out"
    build(EXAMPLE, out)
    verification = json.loads((out / "report.json").read_text())["verification"]
    assert verification["verified"] and verification["equal"]
    assert [image["name"] for image in verification["images"]] == ["sample", "extremes"]
    assert verification["values"] == 2 * 10 and all(image["differing"] == 0 for image in verification["images"])
    assert (out / "report.md").read_text().splitlines()[2].startswith("Verified: ")
    host = json.loads((out / "host.json").read_text())
    assert host["model_file"]["path"] == str(EXAMPLE)


def test_no_verify_says_so_in_the_first_line(tmp_path):
    out = tmp_path / "out"
    assert main(["build", str(EXAMPLE), "-q", "--no-verify", "-o", str(out)]) == 0
    assert "not verified" in (out / "report.md").read_text().splitlines()[0]
    assert json.loads((out / "report.json").read_text())["verification"]["verified"] is False


def test_the_extreme_image_is_at_the_ends_of_the_range():
    from ming_py.pipeline import lift

    graph = lift(EXAMPLE)
    q = extreme_input(graph)
    assert set(np.unique(q)) == {-128, 127}
    assert (q.reshape(-1)[: q.size // 3] == 127).all()
    run_integer(graph, {graph.inputs[0].tensor: q})  # a valid input of the golden model


def _corrupt_one_weight(monkeypatch, process: str):
    """`ming build` emits a design whose `process` has one weight changed (as a bug in the emitter would)."""
    design = build_module.design_of

    def corrupted(*args, **kwargs):
        result = design(*args, **kwargs)
        name = next(n for n in result.files if n.endswith("_weights.h"))
        text = result.files[name]
        start = text.index(f"{process}_weights")
        first = re.compile(r"-?\d+").search(text, text.index("{", start))
        value = int(first.group())
        result.files[name] = text[:first.start()] + str(value + 1 if value < 127 else value - 1) + text[first.end():]
        return result

    monkeypatch.setattr(build_module, "design_of", corrupted)


def test_a_design_that_differs_stops_the_build_and_writes_nothing(tmp_path, monkeypatch, capsys):
    _corrupt_one_weight(monkeypatch, "conv2")
    out, kept = tmp_path / "out", tmp_path / "kept"
    assert main(["build", str(EXAMPLE), "-q", "-o", str(out), "--keep-failed", str(kept)]) == 3
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1, error
    assert "does not compute what ming reference computes" in error[0] and "conv2" in error[0], error[0]
    assert not out.exists()
    verification = json.loads((kept / "report.json").read_text())["verification"]
    assert verification["verified"] and not verification["equal"]
    assert "verification FAILED" in (kept / "report.md").read_text().splitlines()[0]


def test_a_former_build_stays_as_it_was(tmp_path, monkeypatch):
    out = tmp_path / "out"
    build(EXAMPLE, out)
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    _corrupt_one_weight(monkeypatch, "conv1")
    with pytest.raises(build_module.VerificationFailed, match="conv1"):
        build(EXAMPLE, out)
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def _one_layer(tmp_path, name: str, input_shape, **conv) -> Path:
    g = zoo._Graph(name, input_shape)
    model = g.finish(g.conv("x", name, conv.pop("cout"), **conv))
    return zoo.quantize_float_model(model, tmp_path / f"{name}.onnx", input_shape, per_channel=True)


# Loops that run on past their map: the shared requantizers' last turns (REQUANT_STEPS iterations after the
# last position) step the position counters past the map's last row unless the row counter stops there.
RUN_ON = {
    # MobileNetV1-0.25 at 96's depthwise 3x3/2 on 6x6 with TFLite SAME pads, 8 lanes, 1 requantizer
    "depthwise_drain": ((1, 32, 6, 6), dict(cout=32, kernel=3, stride=2, pads=[0, 0, 1, 1], group=32),
                        ["depthwise_drain.unroll.c=8", "depthwise_drain.requantizers=1"]),
    "conv_drain": ((1, 8, 3, 3), dict(cout=32, kernel=3, pads=1),
                   ["conv_drain.unroll.oc=16", "conv_drain.requantizers=1"]),
    "pointwise_drain": ((1, 16, 3, 3), dict(cout=64, kernel=1),
                        ["pointwise_drain.unroll.oc=16", "pointwise_drain.unroll.ic=1",
                         "pointwise_drain.requantizers=1"]),
    "pointwise_column_drain": ((1, 16, 4, 1), dict(cout=64, kernel=1),
                               ["pointwise_column_drain.unroll.oc=16", "pointwise_column_drain.unroll.ic=1",
                                "pointwise_column_drain.requantizers=1"]),
    "column_drain": ((1, 8, 5, 1), dict(cout=32, kernel=(3, 1), pads=[1, 0, 1, 0]),
                     ["column_drain.unroll.oc=16", "column_drain.requantizers=1"]),
}


@pytest.mark.parametrize("name", sorted(RUN_ON))
def test_loops_that_run_on_past_the_map_keep_their_counters(tmp_path, name):
    shape, conv, pins = RUN_ON[name]
    model = _one_layer(tmp_path, name, shape, **conv)
    result = build(model, tmp_path / "out", BuildOptions(settings=parse_assignments(pins)))
    verification = json.loads(result.files["report.json"])["verification"]
    assert verification["equal"], verification


def test_a_compile_past_its_time_bound_is_stopped_and_leaves_nothing(tmp_path, monkeypatch):
    from ming_py.contract.ming_cxx import compile_program
    from ming_py.contract.ming_errors import DeployError

    slow = tmp_path / "slow-c++"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    monkeypatch.setenv("CXX", str(slow))
    binary = tmp_path / "bin" / "model_csim"
    with pytest.raises(DeployError, match="took more than 0.5 s"):
        compile_program([tmp_path / "a.cpp"], [], (), binary, seconds=0.5)
    assert list(binary.parent.iterdir()) == []


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e9", "ten"])
def test_the_verification_bound_is_checked(monkeypatch, value):
    from ming_py.errors import MingError
    from ming_py.verify import verify_seconds

    monkeypatch.setenv("MING_VERIFY_SECONDS", value)
    with pytest.raises(MingError, match="MING_VERIFY_SECONDS"):
        verify_seconds()
