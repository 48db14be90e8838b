"""No 64-bit integer type in an emitted design's datapath: the processes' C++ and their constant tables take the
widths of their ranges (`ming::int_for`, `ming::uint_for`, `ming::rom_int`, `ming::rom_uint`: ming_widths.h), as
the cost model charges them. Every zoo network (AveragePool over windows, padded and not, QLinearAdd, Sub, Mul,
...) is emitted under random schedules and its model C++ and weights header read; the functions these call are
checked in ming_numerics.h by tests/test_numerics_widths.py."""

from __future__ import annotations

import random
import re

import pytest

import zoo
from emit_helpers import random_schedule, stream_graph_of
from ming_py.boards import load_board
from ming_py.build import design

SIXTY_FOUR_BITS = re.compile(r"\b(?:u?int64_t|u?int_least64_t|u?int_fast64_t|long long|long)\b|\b\d+U?LL?\b"
                             r"|ap_u?int<(?:6[4-9]|[7-9]\d|\d{3,})>")


def sixty_four_bit_lines(files: dict) -> list[str]:
    """(file: line) of every line of the model's C++ and weights header naming a 64-bit integer type."""
    return [f"{name}: {line.strip()}" for name, text in sorted(files.items())
            if name.startswith("hls/") and name.endswith(("_weights.h", ".cpp")) and not name.endswith("_tb.cpp")
            for line in text.splitlines() if SIXTY_FOUR_BITS.search(line.split("//")[0])]


def test_the_pattern_finds_what_it_looks_for():
    files = {"hls/m.cpp": "  const int64_t x = 1;\n  y = f(3LL);\n  ap_int<64> z;  // long long in a comment\n",
             "hls/m_weights.h": "static const long w[2] = {1, 2};\n", "hls/m_tb.cpp": "long long n;\n"}
    assert len(sixty_four_bit_lines(files)) == 4


@pytest.mark.parametrize("name", sorted(zoo.MODELS))
def test_no_64_bit_integer_in_an_emitted_design(lifted, name):
    graph = lifted(name, per_channel=True)
    stream_graph = stream_graph_of(graph)
    for seed in (0, 1):
        schedule = random_schedule(stream_graph, random.Random(f"{name} {seed}"), max_factor=4)
        assert sixty_four_bit_lines(design(graph, load_board("kv260"), schedule).files) == []
