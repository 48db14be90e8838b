"""Shared requantizers: fewer requantizers than output lanes take a token's lanes in turn in the iterations after
its reduction ends. The port-checked C-simulation equals the reference bit for bit (onnxruntime's lean and exact
rules, TFLite's fixed-point rule), the loop's writes leave them time, and the ILP, cost model and simulation
follow the same description."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

import tflite_models
import zoo
from emit_helpers import csim, random_schedule, stream_graph_of
from ming_py import reference
from ming_py.epilogues import rule_of
from ming_py.process_spec import loop_of, schedule_spec
from ming_py.kinds.base import shared_requantizers
from ming_py.line_buffers import fifo
from ming_py.simulate import _program
from ming_py.pipeline import lift


def fewest_requantizers(stream_graph, schedule):
    """`schedule` with every process that can share its requantizers on the fewest."""
    processes = dict(schedule.processes)
    for p in stream_graph.processes:
        if rule_of(p.epilogue).datapath(p.epilogue) is None:
            continue
        shared = shared_requantizers(schedule_spec(stream_graph, p, replace(schedule, processes=processes)))
        if shared:
            processes[p.name] = replace(processes[p.name], requantizers=shared[0])
    return replace(schedule, processes=processes)


def shared_schedule(graph, seed: str):
    """A random schedule (folded enough that its MAC processes can share) on the fewest requantizers."""
    stream_graph = stream_graph_of(graph)
    rng = random.Random(seed)
    for _ in range(20):
        schedule = fewest_requantizers(stream_graph, random_schedule(stream_graph, rng, max_factor=4))
        if any(s.requantizers for s in schedule.processes.values()):
            return stream_graph, schedule
    raise AssertionError(f"{seed}: no schedule shares a requantizer")


@pytest.mark.parametrize("name", ["tiny_cnn", "dw_separable", "conv_flatten_matmul", "residual_block", "lenet"])
def test_shared_requantizers_are_bit_exact(lifted, tmp_path, name):
    graph = lifted(name, per_channel=True)
    _, schedule = shared_schedule(graph, name)
    x = zoo.random_input(name, 3)
    got = csim(graph, tmp_path / "out", x, schedule, check_ports=True)
    assert np.array_equal(got, reference.run(graph, x)[graph.outputs[0].name])


@pytest.mark.parametrize("name", ["conv_stack", "mobilenet"])
def test_shared_fixed_point_requantizers_are_bit_exact(tmp_path, name):
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(getattr(tflite_models, name)())
    graph = lift(path)
    _, schedule = shared_schedule(graph, name)
    x = np.random.default_rng(5).integers(-128, 128, graph.inputs[0].onnx_shape).astype(np.int8)
    got = csim(graph, tmp_path / "out", x, schedule, check_ports=True)
    assert np.array_equal(got, reference.run(graph, x)[graph.outputs[0].name])


@pytest.mark.parametrize("name", ["tiny_cnn", "dw_separable", "conv_flatten_matmul"])
def test_writes_leave_the_requantizers_their_turns(lifted, name):
    """Consecutive output tokens of a process are at least `requant_steps` iterations apart, so latched
    accumulators are taken before the next reduction's end overwrites them."""
    graph = lifted(name)
    stream_graph, schedule = shared_schedule(graph, name)
    checked = 0
    for p in stream_graph.processes:
        spec = schedule_spec(stream_graph, p, schedule)
        if spec.requant_steps == 1:
            continue
        loop = loop_of(spec)
        tokens = stream_graph.channels[p.outputs[0]].values // spec.lanes_out[0]
        writes = loop.token_iterations("writes", 0, list(range(tokens)))
        assert min(np.diff(writes)) >= spec.requant_steps, p.name
        # the FIFO sizing and the simulation take the writes where the loop does (requant_delay later)
        assert fifo.token_iterations(loop, "writes", 0).tolist() == writes
        assert simulated_writes(loop, len(p.inputs), len(p.outputs)) == writes
        checked += 1
    assert checked


def simulated_writes(loop, inputs: int, outputs: int) -> list[int]:
    """The iterations of the first output's writes in the simulator's program of `loop`."""
    channels = [object() for _ in range(inputs + outputs)]
    first_output = channels[inputs]
    iterations, base = [], 0
    for repeat, length, events in _program(loop, channels[:inputs], channels[inputs:]):
        for _ in range(repeat):
            iterations += [base + offset for offset, channel, write in events if write and channel is first_output]
            base += length
    assert base == loop.iterations
    return iterations
