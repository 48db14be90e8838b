"""The Alveo kernel flow: OUT/vitis/, the accelerator between two data movers in one xclbin.

The accelerator of `OUT/hls/` is free-running (`ap_ctrl_none`, AXI4-Stream in and out). On an Alveo
card two more kernels feed it from device memory: `mm2s` reads the input images and streams them to
`<model>_top` as one packet, `s2mm` writes its output images back. `link.cfg` wires
the three compute units together and places both buffers in the board's memory bank; the Makefile
builds the xclbin with v++ and the system C simulation with g++. Images are stored as 64-bit
little-endian words, 8 int8 values each, in stream order (row, column, channel), an image's last
word zero-padded: the accelerator's AXI4-Stream framing, so the data movers copy words unchanged.

Where weights stream from DDR (`ming_py.weights_ddr`) the accelerator is a kernel the host starts instead
(ap_ctrl_chain, Vitis's default, one run per image): link.cfg places each of its AXI masters
(`m_axi_gmem_<port>`) in the board's memory bank, the host gives each port's part of weights_ddr.bin as a
buffer there, filled once, and system_tb.cpp passes the same parts to the calls of the top function.
"""

from __future__ import annotations

from dataclasses import dataclass

from ming_py import __version__
from ming_py.boards import Board
from ming_py.dataflow import StreamGraph
from ming_py.errors import MingError
from ming_py.contract.ming_host import words_per_image

from .environment import environment
from .identifiers import comment_text, cpp_names
from .reports import record_words

# OUT/vitis/<file> -> its template under emit/templates/
TEMPLATES = {
    "data_movers.h": "vitis/data_movers.h.j2",
    "mm2s.cpp": "vitis/mm2s.cpp.j2",
    "s2mm.cpp": "vitis/s2mm.cpp.j2",
    "system_tb.cpp": "vitis/system_tb.cpp.j2",
    "link.cfg": "vitis/link.cfg.j2",
    "Makefile": "vitis/Makefile.j2",
}


@dataclass(frozen=True)
class AlveoKernels:
    """The kernels of the xclbin; each has one compute unit, `compute_unit(kernel)`."""

    mm2s: str
    accelerator: str
    s2mm: str
    mm2s_weights: str = "mm2s_weights"  # the weights' mover, where weights are in URAM (`ming_py.weights_load`)

    @staticmethod
    def compute_unit(kernel: str) -> str:
        return f"{kernel}_1"


def alveo_kernels(graph: StreamGraph) -> AlveoKernels:
    """The data movers are plain `mm2s` and `s2mm`: one model per xclbin, and no name of the model's C++ can
    clash with them (the processes are static functions of hls/<model>.cpp, the rest carry the model's name)."""
    return AlveoKernels(mm2s="mm2s", accelerator=cpp_names(graph).top, s2mm="s2mm")


def alveo_files(graph: StreamGraph, board: Board, weight_words: int = 0,
                streamed: dict | None = None) -> dict[str, str]:
    """The files of OUT/vitis/, as {path relative to OUT: text}; `weight_words`: the words of weights.bin where
    weights are in URAM (a fourth kernel, `mm2s_weights`, feeds the accelerator's weight port once); `streamed`:
    the report's "weights_ddr" where weights stream from DDR (each m_axi port of the accelerator placed in the
    board's memory bank)."""
    if board.alveo is None or board.platform is None:
        raise MingError(f"board {board.name} has no Alveo kernel flow (it needs an [alveo] table and a Vitis "
                        f"platform; its interface is {board.interface})")
    env = environment()
    context = _context(graph, board, weight_words, streamed)
    templates = TEMPLATES | ({"mm2s_weights.cpp": "vitis/mm2s_weights.cpp.j2"} if weight_words else {})
    return {f"vitis/{name}": env.get_template(template).render(context) for name, template in templates.items()}


def _context(graph: StreamGraph, board: Board, weight_words: int = 0, streamed: dict | None = None) -> dict:
    names = cpp_names(graph)
    kernels = alveo_kernels(graph)
    in_values = graph.channels[graph.input.channel].values
    model = {
        "name": names.model, "title": comment_text(graph.name), "top": names.top,
        "input_values": names.input_values, "output_values": names.output_values,
        "in_values": in_values, "in_words": words_per_image(in_values), "out_words": record_words(graph),
        "weight_words": weight_words,
        "streamed": [{"bundle": array["bundle"], "first_word": array["first_word"]}
                     for array in (streamed or {}).get("arrays", ())],
        "ddr_words": (streamed or {}).get("words", 0),
    }
    cu = {role: AlveoKernels.compute_unit(getattr(kernels, role))
          for role in ("mm2s", "accelerator", "s2mm", "mm2s_weights")}
    return {
        "model": model, "kernels": kernels, "cu": cu, "board": board, "version": __version__,
        "memory": board.alveo.memory, "platform": board.platform,
        "clock_mhz": f"{board.clock_mhz:g}", "clock_hz": round(board.clock_mhz * 1e6),
    }
