"""The storage plan (ming_py/storage.py): layouts that give every bank at most one read and one write
per iteration of the kernels' loops, and the memory they cost."""

from __future__ import annotations

import pytest

from ming_py.dataflow import Window
from ming_py.process_spec import ProcessSpec
from ming_py.array_layout import ArrayPlan, Dim
from ming_py.kinds.window import line_buffer_rows
from ming_py.storage import plan_arrays


def conv(unroll_oc=1, unroll_ic=1, unroll_k=1, width=16, channels=8, kernel=(3, 3), pads=(1, 1, 1, 1), dilation=(1, 1)):
    window = Window(channels, 16, width, 16, 16, width, kernel=kernel, pads=pads, dilation=dilation)
    return ProcessSpec("conv", ((channels, 16, width),), ((16, 16, width),),
                      (("oc", unroll_oc), ("ic", unroll_ic), ("k", unroll_k)), (unroll_ic,), (unroll_oc,), window)


def layout(plan):
    return [(d.partition, d.reshape, d.factor) for d in plan.dims]


def test_a_token_is_one_word_of_the_line_buffer():
    plan = plan_arrays(conv(unroll_ic=8))["line_buffer"]
    # [copies][rows][columns][tokens][lanes]: the 8 lanes of a token one word, one bank
    assert layout(plan) == [("", "", 1)] * 4 + [("", "complete", 8)]
    assert plan.banks == 1 and plan.word_bits == 64 and plan.words == 3 * 16 * 1


def test_each_unrolled_window_element_reads_its_own_copy():
    plan = plan_arrays(conv(unroll_k=3, unroll_ic=2))["line_buffer"]
    assert layout(plan)[0] == ("complete", "", 3) and plan.banks == 3
    assert plan.words == 3 * 16 * 4 and plan.word_bits == 16


def test_one_lane_keeps_one_int8_word():
    plan = plan_arrays(conv())["line_buffer"]
    assert plan.banks == 1 and plan.pragmas == [] and plan.word_bits == 8


def test_a_dense_k_tile_is_its_input_token():
    spec = ProcessSpec("dense", ((16, 2, 2),), ((10, 1, 1),), (("n", 10), ("k", 8)), (16,), (10,))
    with pytest.raises(ValueError, match="run time"):
        spec.check()


def test_a_narrow_map_without_left_padding_keeps_an_extra_row():
    assert line_buffer_rows(conv(width=2, pads=(0, 0, 0, 0), kernel=(3, 3))) == 4
    assert line_buffer_rows(conv(width=16, pads=(0, 0, 0, 0))) == 3


def test_weights_are_one_word_per_fold_step():
    spec = conv(unroll_oc=4, unroll_ic=2)
    weights = plan_arrays(spec)["weights"]
    assert weights.shape == (spec.fold, 8) and weights.words == spec.fold == 4 * 4 * 9
    assert weights.word_bits == 8 * 8 and weights.memory == "bram"  # 144 words of 64 bits: 2 blocks of 36 x 512
    assert weights.cost() == (2, 0, 0, 0)


@pytest.mark.parametrize("words, lanes, blocks", [(512, 8, 2), (1024, 8, 4), (2048, 1, 1), (4096, 4, 8)])
def test_bram_blocks_take_the_cheapest_port_shape(words, lanes, blocks):
    # BRAM18K ports of 9 x 2048, 18 x 1024 or 36 x 512 bits: one int8 in 9 bits, 2 in 18, 4 in 36
    plan = ArrayPlan("weights", 8, (Dim(words), Dim(lanes, reshape="complete", factor=lanes)), True, "bram")
    assert plan.cost()[0] == blocks


def test_fully_unrolled_weights_are_constants():
    weights = plan_arrays(conv(unroll_oc=16, unroll_ic=8, kernel=(1, 1), pads=(0, 0, 0, 0)))["weights"]
    assert weights.memory == "register" and weights.cost() == (0, 0, 0, 0)


def test_accumulators_are_registers():
    acc = plan_arrays(conv(unroll_oc=4))["acc"]
    assert acc.memory == "register" and acc.cost() == (0, 0, 0, 4 * 32)
