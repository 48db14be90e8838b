"""FIFO depths over the whole image: behind 1x1 convs, strides and upsamples the lag between a split's
branches grows along rows, so a skip FIFO sized for the first token deadlocks; the depths ming sizes hold
the largest lag of any token (`line_buffers.fifo.waiting_tokens`), and `ming build` checks by simulation
that the design it emits completes.

yolo_tiny is the detector shape (conv/LeakyRelu backbone, 1x1 convs on the small map, a 2x nearest
Resize, a skip Concat, two heads); the architectures are also built at 32 x 32 so that the lags grow."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import architectures
from ming_py import reference
from ming_py.build import BuildOptions, design
from ming_py.ilp.explore import explore
from ming_py.ilp.explore import schedule_specs
from ming_py.csim import run_csim
from ming_py.emit.reports import report
from ming_py.line_buffers import build_stream_graph
from ming_py.line_buffers.fifo import Dependences, waiting_tokens
from ming_py.output import write_tree
from ming_py.pipeline import lift
from ming_py.simulate import simulate

BRANCHING = ["yolo_tiny", "unet", "shufflenet_v2", "mobilenet_v2", "mobilenet_v3_small"]


@pytest.fixture(scope="module")
def lifted_architecture(tmp_path_factory):
    directory = tmp_path_factory.mktemp("whole_image")
    cache = {}

    def build(name: str, fmt: str = "qdq_int8", size: int | None = None):
        if (name, fmt, size) not in cache:
            cache[name, fmt, size] = lift(architectures.quantized(name, fmt, directory, size=size))
        return cache[name, fmt, size]

    return build


def _input(graph, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(graph.inputs[0].onnx_shape).astype(np.float32)


def _simulated(stream_graph, schedule, board, solution):
    return simulate(report(stream_graph, schedule, board, solution))


@pytest.mark.parametrize("name", ["yolo_tiny", "unet"])
def test_a_skip_fifo_sized_for_the_first_token_deadlocks_and_the_whole_image_lag_is_exact(lifted_architecture,
                                                                                          name):
    graph = lifted_architecture(name)
    stream_graph = build_stream_graph(graph)
    board, solution, _ = explore(build_stream_graph(graph), BuildOptions(limits={"dsp": "20%"}))
    waiting = waiting_tokens(Dependences(stream_graph, schedule_specs(stream_graph, solution)))
    growing = {key: w for key, w in waiting.items() if w.max() > w[0] > 0}
    assert growing, f"{name}: no branch whose lag grows along the image"
    for (head, join), w in growing.items():
        assert solution.schedule.depth_of(head) >= w.max()

        def completes(depth: int) -> bool:
            schedule = replace(solution.schedule, depths=solution.schedule.depths | {head: depth})
            return _simulated(stream_graph, schedule, board, solution).deadlock is None

        assert not completes(int(w[0]) + 1), f"{head} -> {join}: the first token's lag is enough"
        assert completes(int(w.max()))


@pytest.mark.parametrize("fmt", list(architectures.FORMATS))
def test_the_detector_runs_concurrently_in_every_format(lifted_architecture, tmp_path, fmt):
    graph = lifted_architecture("yolo_tiny", fmt)
    board, solution, _ = explore(build_stream_graph(graph), BuildOptions())
    write_tree(design(graph, board, solution=solution).files, tmp_path / "out")
    x = _input(graph, 5)
    expected = reference.run(graph, x)
    got = run_csim(tmp_path / "out", x, concurrent=True)
    assert list(got) == [o.name for o in graph.outputs]
    for output in got:
        assert np.array_equal(got[output], expected[output]), output


@pytest.mark.slow
def test_the_detector_on_larger_maps_runs_concurrently(lifted_architecture, tmp_path):
    graph = lifted_architecture("yolo_tiny", "qdq_int8", 32)
    board, solution, _ = explore(build_stream_graph(graph), BuildOptions(limits={"dsp": "5%"}))
    write_tree(design(graph, board, solution=solution).files, tmp_path / "out")
    x = _input(graph, 6)
    expected = reference.run(graph, x)
    got = run_csim(tmp_path / "out", x, concurrent=True)
    for output in got:
        assert np.array_equal(got[output], expected[output]), output


@pytest.mark.parametrize("name", BRANCHING)
@pytest.mark.parametrize("dsp", ["5%", "20%"])
def test_branching_networks_on_larger_maps_complete_with_the_depths_ming_sizes(lifted_architecture, name, dsp):
    """`explore` stops on a design its simulation deadlocks; beyond that, every head holds its largest lag."""
    graph = lifted_architecture(name, "qdq_int8", 32)
    stream_graph = build_stream_graph(graph)
    board, solution, _ = explore(build_stream_graph(graph), BuildOptions(limits={"dsp": dsp}))
    assert _simulated(stream_graph, solution.schedule, board, solution).completed
    waiting = waiting_tokens(Dependences(stream_graph, schedule_specs(stream_graph, solution)))
    for (head, _), w in waiting.items():
        assert solution.schedule.depth_of(head) >= w.max(), head
