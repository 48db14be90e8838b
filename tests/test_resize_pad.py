"""Nearest Resize (upsampling), standalone Pad, GlobalMaxPool and MaxPool with ceil_mode: the golden model
equals onnxruntime, the C-simulation equals the golden model, and what ming cannot compile stops with one
line naming the node."""

from __future__ import annotations

import json
import random
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import zoo
from emit_helpers import csim, random_schedule, stream_graph_of
from ming_py import reference
from ming_py.boards import load_board
from ming_py.build import BuildOptions, design
from ming_py.ilp.explore import explore
from ming_py.line_buffers import build_stream_graph
from ming_py.frontends.onnx_geometry import COORDINATE_MODES, NEAREST_MODES
from ming_py.errors import MingError
from ming_py.ir import Pad, Upsample
from ming_py.output import write_tree
from ming_py.pipeline import lift
from ming_py.csim import run_csim
from ming_py.ort_session import onnxruntime_session

SEEDS = (0, 1, 2)


def _conv_resize(**resize):
    def build(g):
        h = g.relu(g.conv("x", "conv1", 4, pads=1), "relu1")
        return g.conv(g.resize(h, "up", **resize), "conv2", 4, pads=1)
    return build


def _unet(g):
    skip = g.relu(g.conv("x", "enc1", 4, pads=1), "enc1_relu")                # 4 x 8 x 8
    h = g.relu(g.conv(g.maxpool(skip, "down"), "enc2", 8, pads=1), "enc2_relu")  # 8 x 4 x 4
    h = g.concat([skip, g.resize(h, "up")], "cat")                           # 12 x 8 x 8
    return g.conv(h, "dec", 4, pads=1)


def _pad_into_conv(g):
    return g.conv(g.pad(g.conv("x", "conv1", 4, pads=1), "pad"), "conv2", 4, pads=0)


def _pad_merged(g):
    return g.conv(g.pad(g.conv("x", "conv1", 4, pads=1), "pad", (1, 0, 2, 0)), "conv2", 4, pads=1)


def _pad_before_add(g):
    a = g.pad(g.relu(g.conv("x", "conv1", 4, pads=0), "relu"), "pad", (1, 2, 1, 0))  # 6x6 -> 8x8
    return g.add(a, g.conv("x", "conv1x1", 4, kernel=1), "add")


def _pad_constant(g):
    h = g.pad(g.conv("x", "conv1", 4, pads=1), "pad", (0, 1, 2, 1), value=0.5)
    return g.conv(h, "conv2", 4, pads=1)  # pads with the zero point: a border of its own


def _pad_constant_folded(g):
    return g.conv(g.pad(g.conv("x", "conv1", 4, pads=1), "pad", (1, 1, 1, 1), value=-0.75), "conv2", 4)


def _global_max_pool(g):
    return g.conv(g.global_max_pool(g.conv("x", "conv1", 8, pads=1), "gmp"), "conv2", 4, kernel=1)


def _maxpool_ceil(g):
    return g.maxpool(g.conv("x", "conv1", 4, pads=1), "pool", ceil_mode=1)


MODELS = {
    "resize2": ((1, 3, 8, 8), _conv_resize()),
    "resize2_asymmetric_floor": ((1, 3, 8, 8), _conv_resize(coordinate_transformation_mode="asymmetric",
                                                            nearest_mode="floor")),
    "resize2_pytorch_ceil": ((1, 3, 8, 8), _conv_resize(coordinate_transformation_mode="pytorch_half_pixel",
                                                        nearest_mode="round_prefer_ceil")),
    "resize2_align_corners": ((1, 3, 8, 8), _conv_resize(coordinate_transformation_mode="align_corners")),
    "resize2x3_sizes": ((1, 3, 8, 8), _conv_resize(scales=(2, 3), sizes=True)),
    "resize3_asymmetric_floor": ((1, 3, 6, 6), _conv_resize(scales=(3, 3), coordinate_transformation_mode="asymmetric",
                                                            nearest_mode="floor")),
    "unet": ((1, 3, 8, 8), _unet),
    "pad_into_conv": ((1, 3, 8, 8), _pad_into_conv),
    "pad_merged": ((1, 3, 8, 8), _pad_merged),
    "pad_before_add": ((1, 3, 8, 8), _pad_before_add),
    "pad_constant": ((1, 3, 8, 8), _pad_constant),
    "pad_constant_folded": ((1, 3, 8, 8), _pad_constant_folded),
    "global_max_pool": ((1, 3, 8, 8), _global_max_pool),
    "maxpool_ceil": ((1, 3, 9, 9), _maxpool_ceil),
}
# models whose lifted graphs differ (the resize modes above lift alike): C-simulated
CSIM = ["resize2x3_sizes", "resize3_asymmetric_floor", "unet", "pad_merged", "pad_before_add", "pad_constant",
        "pad_constant_folded", "global_max_pool", "maxpool_ceil"]


def _float_model(name: str, build=None, shape=None) -> onnx.ModelProto:
    shape, build = MODELS[name] if build is None else (shape, build)
    g = zoo._Graph(name, shape)
    return g.finish(build(g))


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    folder = tmp_path_factory.mktemp("resize_pad")
    cache = {}

    def get(name: str):
        if name not in cache:
            cache[name] = zoo.quantize_float_model(_float_model(name), folder / f"{name}.onnx", MODELS[name][0])
        return cache[name]

    return get


@pytest.fixture(scope="module")
def lifted(quantized):
    cache = {}

    def get(name: str):
        if name not in cache:
            cache[name] = lift(quantized(name))
        return cache[name]

    return get


def _input(name: str, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(MODELS[name][0]).astype(np.float32)


def _reference(graph, x):
    return reference.run(graph, x)[graph.outputs[0].name]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_reference_equals_onnxruntime(quantized, lifted, name):
    session = onnxruntime_session(str(quantized(name)))
    graph = lifted(name)
    for seed in SEEDS:
        x = _input(name, seed)
        expected = session.run(None, {"x": x})[0]
        assert np.array_equal(_reference(graph, x), expected), seed


@pytest.mark.parametrize("name", CSIM)
def test_csim_equals_reference(lifted, tmp_path, name):
    """A random schedule (lanes, FIFO depths): the port-checked C-simulation equals the golden model."""
    graph = lifted(name)
    schedule = random_schedule(stream_graph_of(graph), random.Random(name))
    x = _input(name, 5)
    got = csim(graph, tmp_path / "out", x, schedule, check_ports=True)
    assert np.array_equal(got, _reference(graph, x)), schedule


def _nodes(graph, kind):
    return [n for n in graph.nodes if isinstance(n, kind)]


@pytest.mark.parametrize("name, factors", [("resize2", (1, 2, 2)), ("resize2x3_sizes", (1, 2, 3)),
                                           ("resize3_asymmetric_floor", (1, 3, 3))])
def test_upsample_holds_one_row(lifted, name, factors):
    """The Resize is one Upsample node; its process holds one input row and one pixel, never the map."""
    graph = lifted(name)
    (upsample,) = _nodes(graph, Upsample)
    assert upsample.factors == factors and upsample.source == "up"
    stream_graph = stream_graph_of(graph)
    (process,) = [p for p in stream_graph.processes if p.kind == "upsample"]
    channel_in = stream_graph.channels[process.inputs[0]]
    schedule = random_schedule(stream_graph, random.Random(1))
    data = design(graph, load_board("kv260"), schedule).files["report.json"]
    (node,) = [n for n in json.loads(data)["nodes"] if n["kind"] == "upsample"]
    buffers = {b["role"]: b for b in node["buffers"]}
    assert int(np.prod(buffers["row_buffer"]["shape"])) == channel_in.width * channel_in.channels
    assert int(np.prod(buffers["pixel"]["shape"])) == channel_in.channels
    assert buffers["pixel"]["memory"] == "register"


def test_unet_built_by_the_ilp_runs_concurrently(lifted, tmp_path):
    """The U-Net's skip branch waits for the upsampled branch at the Concat: with the FIFO depths and lanes
    `ming build` chooses, the threaded C-simulation over bounded FIFOs neither deadlocks nor differs, and the
    cycle-level simulation completes."""
    graph = lifted("unet")
    board, solution, _ = explore(build_stream_graph(graph), BuildOptions())
    result = design(graph, board, solution=solution)
    totals = json.loads(result.files["report.json"])["totals"]
    assert totals["simulated_deadlock"] is None and totals["cycles"] > 0
    write_tree(result.files, tmp_path / "out")
    x = _input("unet", 9)
    (got,) = run_csim(tmp_path / "out", x, concurrent=True).values()
    assert np.array_equal(got, _reference(graph, x))


@pytest.mark.parametrize("name", ["resize2x3_sizes", "unet", "pad_before_add", "global_max_pool"])
def test_generated_cpp_is_warning_free(lifted, tmp_path, name):
    graph = lifted(name)
    write_tree(design(graph, load_board("kv260"), random_schedule(stream_graph_of(graph), random.Random(2))).files,
               tmp_path)
    hls = tmp_path / "hls"
    result = subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-DMING_CSIM", "-fsyntax-only", "-I",
                             str(hls), str(hls / f"{name}.cpp")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_unnamed_resize(quantized, tmp_path):
    """An unnamed Resize is found by its output's name."""
    model = onnx.load(str(quantized("resize2")))
    (node,) = [n for n in model.graph.node if n.op_type == "Resize"]
    node.name = ""
    onnx.save(model, str(tmp_path / "unnamed.onnx"))
    graph = lift(tmp_path / "unnamed.onnx")
    assert [n.source for n in _nodes(graph, Upsample)] == [node.output[0]]
    x = _input("resize2", 0)
    session = onnxruntime_session(str(tmp_path / "unnamed.onnx"))
    assert np.array_equal(_reference(graph, x), session.run(None, {"x": x})[0])


def test_pad_folds_into_the_next_window(lifted):
    """A zero Pad before a conv is the conv's padding (merged with the conv's own), no node of its own."""
    for name, padding in (("pad_into_conv", ((0, 0), (1, 1), (1, 1))), ("pad_merged", ((0, 0), (2, 3), (1, 1)))):
        graph = lifted(name)
        assert not _nodes(graph, Pad), name
        conv2 = next(k for k in graph.kernels() if k.source == "conv2")
        assert conv2.inputs[0].padding == padding, name


def test_non_zero_pad_value_folds_when_the_window_has_no_padding(lifted):
    graph = lifted("pad_constant_folded")
    assert not _nodes(graph, Pad)
    conv2 = next(k for k in graph.kernels() if k.source == "conv2")
    conv1 = next(k for k in graph.kernels() if k.source == "conv1")
    assert conv2.inputs[0].pad_value != conv1.epilogue.zero_point  # -0.75 quantized, not the zero point


@pytest.mark.parametrize("name", ["pad_before_add", "pad_constant"])
def test_pad_without_a_window_is_its_own_process(lifted, name):
    graph = lifted(name)
    (pad,) = _nodes(graph, Pad)
    assert pad.source == "pad"
    kinds = [p.kind for p in stream_graph_of(graph).processes]
    assert kinds.count("pad") == 1


def test_global_max_pool_streams(lifted):
    kinds = [p.kind for p in stream_graph_of(lifted("global_max_pool")).processes]
    assert "global_maxpool" in kinds


# ---- what ming refuses -----------------------------------------------------------------------------------


def _refused(tmp_path, build, shape=(1, 3, 8, 8)) -> str:
    path = zoo.quantize_float_model(_float_model("refused", build, shape), tmp_path / "refused.onnx", shape)
    with pytest.raises(MingError) as error:
        lift(path)
    message = str(error.value)
    assert "\n" not in message
    return message


@pytest.mark.unit
@pytest.mark.parametrize("resize, expected", [
    ({"mode": "linear"}, "node 'up' (Resize, mode=linear) is not supported"),
    ({"scales": (1.5, 1.5)}, "node 'up' (Resize): scale 1.5 along axis 2 is not an integer factor"),
    ({"coordinate_transformation_mode": "half_pixel", "nearest_mode": "floor"},
     "node 'up' (Resize, coordinate_transformation_mode=half_pixel, nearest_mode=floor) does not repeat"),
    ({"coordinate_transformation_mode": "tf_crop_and_resize"}, "coordinate_transformation_mode=tf_crop_and_resize"),
])
def test_unsupported_resize_is_refused(tmp_path, resize, expected):
    assert expected in _refused(tmp_path, _conv_resize(**resize))


@pytest.mark.unit
@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_unsupported_pad_mode_is_refused(tmp_path, mode):
    def build(g):
        return g.conv(g.pad(g.conv("x", "conv1", 4, pads=1), "pad", mode=mode), "conv2", 4)

    message = _refused(tmp_path, build)
    assert message.startswith(f"node 'pad' (Pad, mode={mode}) is not supported")


@pytest.mark.unit
@pytest.mark.parametrize("factor", [2, 3])
@pytest.mark.parametrize("length", [5, 8])
def test_accepted_resize_modes_repeat_every_pixel_in_onnxruntime(tmp_path, factor, length):
    """Every coordinate_transformation_mode x nearest_mode: ming's frontend accepts the Resize exactly when
    onnxruntime's float Resize repeats every pixel `factor` times, on arange inputs of both parities."""
    from ming_py.frontends.onnx_geometry import resize_factors

    x = np.arange(length * length, dtype=np.float32).reshape(1, 1, length, length)
    for coordinates in COORDINATE_MODES:
        for rounding in NEAREST_MODES:
            node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up", mode="nearest",
                                    coordinate_transformation_mode=coordinates, nearest_mode=rounding)
            scales = numpy_helper.from_array(np.array([1, 1, factor, factor], np.float32), "scales")
            size = length * factor
            graph = helper.make_graph([node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, size, size])],
                                      [scales])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
            model.ir_version = 9
            y = onnxruntime_session(model.SerializeToString()).run(None, {"x": x})[0]
            repeats = np.array_equal(y, x.repeat(factor, 2).repeat(factor, 3))
            try:
                accepted = resize_factors(model) == {"up": (1, 1, factor, factor)}
            except MingError:
                accepted = False
            assert accepted == repeats, (coordinates, rounding)
