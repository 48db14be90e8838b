"""FIFO sizing: the computed depths let every network run concurrently; smaller skip FIFOs deadlock."""

from __future__ import annotations

import numpy as np
import pytest

import zoo
from ming_py import reference
from ming_py.build import BuildOptions, design, explore, write_tree
from ming_py.csim import CsimDeadlock, run_csim
from ming_py.line_buffers import build_stream_graph
from ming_py.line_buffers.fifo import depths_in_pixels

NETWORKS = ["residual_block", "two_residual_stages", "dw_separable", "lenet", "tiny_cnn", "concat_branches"]


def built(graph, tmp_path, **options):
    board, solution = explore(graph, BuildOptions(**options))
    out = tmp_path / "out"
    write_tree(design(graph, board, solution=solution).files, out)
    return out, solution


@pytest.mark.parametrize("name", NETWORKS)
def test_networks_run_concurrently_with_the_computed_depths(lifted, tmp_path, name):
    graph = lifted(name)
    out, _ = built(graph, tmp_path, limits={"dsp": "20%"})
    x = zoo.random_input(name, 2)
    assert np.array_equal(run_csim(out, x, concurrent=True), reference.run(graph, x)[graph.outputs[0].name])


def test_skip_fifo_holds_the_line_buffer_lag(lifted):
    """8x8 map, two 3x3 convs with padding 1: the second conv's first output needs 10 pixels of the first's,
    which need 19 input pixels; the identity skip must hold the 18 in between plus one."""
    graph = build_stream_graph(lifted("residual_block"))
    assert depths_in_pixels(graph) == {"input_split_to_block1_add": 19}
    stages = depths_in_pixels(build_stream_graph(lifted("two_residual_stages")))
    # stage 2: a stride-2 3x3 conv then a 3x3 conv (28 pixels) against a strided 1x1 projection (1 pixel)
    assert stages == {"input_split_to_stage1_add": 19, "stage1_add_split_to_stage2_proj": 28}


def test_short_skip_fifo_deadlocks_and_the_report_names_it(lifted, tmp_path):
    graph = lifted("residual_block")
    skip = "input_split_to_block1_add"
    out, solution = built(graph, tmp_path, settings={f"{skip}.depth": 3})
    assert solution.schedule.depth_of(skip) == 3
    with pytest.raises(CsimDeadlock) as error:
        run_csim(out, zoo.random_input("residual_block", 0), concurrent=True)
    assert any(f"write to {skip} (full" in line for line in error.value.report)
