"""Weights in URAM, loaded at start through the weight port (`ming_py.weights_load`): the layout of weights.bin,
the ILP's choice of weight memory, and builds whose weights sit in URAM, verified by the build and equal to
`ming reference` and onnxruntime through `ming csim` and the deployment driver's C-simulation, each loading
weights.bin through the port."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import architectures
from ming_py import reference
from ming_py.array_layout import ArrayPlan, Dim
from ming_py.build import build
from ming_py.csim import run_csim
from ming_py.errors import MingError
from ming_py.options import BuildOptions
from ming_py.pipeline import lift
from ming_py.weights_load import (BEAT_LANES, load_cycles, loaded_arrays, loader_cost, weights_image)
from ming_py.ort_session import onnxruntime_session

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "tiny_cnn.onnx")
URAM_PINS = {"conv2.weights": "uram", "fc.weights": "uram"}


@pytest.mark.unit
def test_weights_image_puts_lane_u_of_a_row_in_byte_u_mod_8_of_its_word_u_div_8():
    rows = {"a": np.arange(2 * 10, dtype=np.int8).reshape(2, 10) - 5, "b": np.full((3, 4), -7, dtype=np.int8)}
    words = np.frombuffer(weights_image(rows), dtype=np.int8).reshape(-1, 8)
    assert len(words) == 2 * 2 + 3  # a: 2 rows of 2 beats, b: 3 rows of 1 beat
    assert list(words[0]) == list(rows["a"][0, :8]) and list(words[1]) == list(rows["a"][0, 8:]) + [0] * 6
    assert list(words[3]) == list(rows["a"][1, 8:]) + [0] * 6
    assert all(list(w) == [-7] * 4 + [0] * 4 for w in words[4:])
    parts = loaded_arrays(rows)
    assert [(p.process, p.first_word, p.words, p.beats) for p in parts] == [("a", 0, 4, 2), ("b", 4, 3, 1)]
    assert load_cycles(parts) > 7 and load_cycles([]) == 0


@pytest.mark.unit
def test_a_uram_weight_array_is_a_one_port_ram_costed_by_its_72_bit_words_and_its_loader():
    plan = ArrayPlan("weights", 8, (Dim(5000), Dim(16, reshape="complete", factor=16)), rom=True, memory="uram")
    assert plan.loaded and plan.storage_type == "ram_1p"
    assert plan.cost()[1] == 2 * 2  # 128-bit words: two URAMs wide, 5000 rows: two deep
    rom = ArrayPlan("weights", 8, plan.dims, rom=True, memory="bram")
    assert not rom.loaded and rom.storage_type == "rom_1p"
    cost = loader_cost(plan)
    # the row register at least: the beat of a row of two held until its last arrives
    assert cost.lut > 0 and cost.ff >= 8 * BEAT_LANES and cost.fifo_lut > 0


@pytest.fixture(scope="module")
def pinned_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("uram") / "out"
    design = build(EXAMPLE, out, BuildOptions(settings=dict(URAM_PINS)))
    return out, design


def _onnxruntime(path, x: np.ndarray) -> dict[str, np.ndarray]:
    session = onnxruntime_session(str(path))
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {session.get_inputs()[0].name: x})))


def _example_input(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 3, 16, 16)).astype(np.float32)


def test_pinned_uram_weights_build_verified_with_the_weight_port(pinned_build):
    out, design = pinned_build
    data = json.loads((out / "report.json").read_text())
    storage = {n["name"]: n["schedule"]["storage"].get("weights") for n in data["nodes"]}
    assert storage["conv2"] == storage["fc"] == "uram"
    assert data["verification"]["equal"]
    load = data["totals"]["weights_load"]
    image = (out / "hls" / "weights.bin").read_bytes()
    assert (out / "deploy" / "weights.bin").read_bytes() == image
    assert load["bytes"] == len(image) and [a["process"] for a in load["arrays"]] == ["conv2", "fc"]
    assert json.loads((out / "deploy" / "accelerator.json").read_text())["weights"]["sha256"] == load["sha256"]
    assert "weights.bin" in (out / "report.md").read_text()
    cpp = (out / "hls" / "tiny_cnn.cpp").read_text()
    assert "HLS_PRAGMA(BIND_STORAGE variable=conv2_weights type=ram_1p impl=uram)" in cpp
    assert "HLS_PRAGMA(INTERFACE mode=axis port=s_axis_weights)" in cpp
    assert "weight_dma/M_AXIS_MM2S" in (out / "vivado" / "build_bitstream.tcl").read_text()
    # the weights are no longer constants of the header: they come through the port only
    header = (out / "hls" / "tiny_cnn_weights.h").read_text()
    assert "static int8_t conv2_weights[" in header and "static const int8_t conv2_weights" not in header


def test_pinned_uram_weights_csim_equals_reference_and_onnxruntime(pinned_build):
    out, design = pinned_build
    graph = lift(EXAMPLE)
    for seed in range(2):
        x = _example_input(seed)
        ours = run_csim(out, x, concurrent=True, check_ports=True)
        golden = reference.run(graph, x)
        expected = _onnxruntime(EXAMPLE, x)
        for name, y in expected.items():
            assert np.array_equal(ours[name], golden[name]) and np.array_equal(ours[name], y), name


@pytest.mark.parametrize("unroll, lanes", [
    ({"conv2.unroll.oc": 4, "conv2.unroll.ic": 1, "conv2.unroll.k": 3, "fc.unroll.n": 2, "fc.unroll.k": 2},
     {"conv2": 12, "fc": 4}),
    ({"conv2.unroll.oc": 2, "conv2.unroll.ic": 1, "conv2.unroll.k": 9, "fc.unroll.n": 1, "fc.unroll.k": 1},
     {"conv2": 18, "fc": 1}),
])
def test_uram_rows_of_one_two_and_three_beats_partly_filled_load_and_verify(tmp_path, unroll, lanes):
    """A URAM row is written with its last 64-bit beat, the beats before it held (`load_weights`): rows of one
    beat (4 and 1 lanes), two (12) and three (18), the last beat partly filled, load the weights the reference
    computes with (the build verifies its C++ against `ming reference`; the pinned build above has rows of 96 and
    80 lanes, 12 and 10 full beats)."""
    out = tmp_path / "out"
    build(EXAMPLE, out, BuildOptions(settings=dict(URAM_PINS) | unroll))
    data = json.loads((out / "report.json").read_text())
    rows = {n["name"]: b["shape"][1] for n in data["nodes"] for b in n["buffers"] if b["role"] == "weights"}
    assert {name: rows[name] for name in lanes} == lanes
    assert data["verification"]["equal"]


def test_the_deployment_driver_loads_the_weights_in_its_csim_backend(pinned_build, tmp_path):
    out, _ = pinned_build
    x = np.stack([_example_input(seed)[0] for seed in range(3)])
    np.save(tmp_path / "x.npy", x)
    run = subprocess.run([sys.executable, str(out / "deploy" / "run.py"), "--backend", "csim", "--input",
                          str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    expected = _onnxruntime(EXAMPLE, x[:1])
    name = next(iter(expected))
    assert np.array_equal(np.load(tmp_path / "y.npy")[:1], expected[name])


def test_a_testbench_without_its_weights_stops_with_one_line(pinned_build, tmp_path):
    out, _ = pinned_build
    moved = tmp_path / "weights.bin"
    (out / "hls" / "weights.bin").rename(moved)
    try:
        with pytest.raises(MingError, match="cannot read the 224 weight words"):
            run_csim(out, _example_input(0))
    finally:
        moved.rename(out / "hls" / "weights.bin")


def test_uram_weights_on_a_process_without_weights_are_refused(tmp_path):
    with pytest.raises(MingError, match="pool1.weights: process pool1 .* has no weights"):
        build(EXAMPLE, tmp_path / "out", BuildOptions(settings={"pool1.weights": "uram"}), verify=False)


def test_a_build_whose_weights_fit_as_roms_has_no_weight_port(tmp_path):
    out = tmp_path / "out"
    build(EXAMPLE, out, BuildOptions(), verify=False)
    assert not (out / "hls" / "weights.bin").exists()
    assert "s_axis_weights" not in (out / "hls" / "tiny_cnn.cpp").read_text()
    assert "weights" not in json.loads((out / "deploy" / "accelerator.json").read_text())
    assert "weight_dma" not in (out / "vivado" / "build_bitstream.tcl").read_text()


def test_a_bram_budget_below_the_rom_weights_makes_the_ilp_move_weights_out_of_bram(tmp_path):
    """MobileNetV2's smallest design with ROM weights needs 14 BRAM18K; at 4 (2 of them the FIFOs') the ILP
    puts weights in LUTRAM or URAM, and the design it builds is verified and equals onnxruntime."""
    path = architectures.quantized("mobilenet_v2", "qdq_int8", tmp_path)
    out = tmp_path / "out"
    build(path, out, BuildOptions(limits={"bram18k": "4", "lut": "100%"}, settings={"classifier.weights": "uram"}))
    data = json.loads((out / "report.json").read_text())
    assert data["totals"]["bram18k"] <= 4
    memories = {n["schedule"]["storage"].get("weights") for n in data["nodes"]} - {None}
    assert "uram" in memories and "bram" not in memories
    x = np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype(np.float32)
    ours, expected = run_csim(out, x), _onnxruntime(path, x)
    for name, y in expected.items():
        assert np.array_equal(ours[name], y), name


def test_the_alveo_flow_streams_the_weights_through_its_own_mover(tmp_path):
    out = tmp_path / "out"
    build(EXAMPLE, out, BuildOptions(board="u55c", settings=dict(URAM_PINS)))
    link = (out / "vitis" / "link.cfg").read_text()
    assert "stream_connect=mm2s_weights_1.m_axis:tiny_cnn_top_1.s_axis_weights" in link
    assert json.loads((out / "deploy" / "accelerator.json").read_text())["weights"]["kernel"] == "mm2s_weights"
    x = np.stack([_example_input(seed)[0] for seed in range(2)])
    np.save(tmp_path / "x.npy", x)
    run = subprocess.run([sys.executable, str(out / "deploy" / "run.py"), "--backend", "csim", "--input",
                          str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    expected = _onnxruntime(EXAMPLE, x[1:2])
    assert np.array_equal(np.load(tmp_path / "y.npy")[1:2], next(iter(expected.values())))
