"""Weights streamed from DDR: a process whose weights do not stay on chip reads them once per image, a tile at a
time, through an AXI master port of the top function.

A streamed process (`ProcessSchedule.storage` "weights": "ddr", pinned with `--set PROCESS.weights=ddr` or chosen by
the ILP where the weights outgrow the chip; pointwise, conv and dense processes, `streamed_problem`) buffers its
whole input (the map of a pointwise or conv process, the vector of a dense one), then loops over its output-channel
tiles: the weights of tile t+1 arrive while tile t computes over every output pixel, into the other half of a
ping-pong tile buffer `[2][reduction tiles][lanes]`; a pointwise or conv process writes its outputs into an output
map buffer it streams out in pixel order after the last tile (a dense process's output is in tile order already).
Its loop (`ming_py.kinds.streamed.StreamedLoop`) charges each tile's fetch its `tile_words` iterations,
overlapped with the previous tile's compute, and a burst's latency once, for tile 0. This module holds the rest:
weights_ddr.bin, the report's description of it, and what the ILP budgets streamed weights with: the board's DDR
rate, the capacity rule and each streamed process's m_axi read adapter and fetch loop.

The weights of every streamed process sit in DDR as one packed byte array, `weights_ddr.bin`: per streamed process
in the graph's order, its weight rows (`ProcessKind.weight_rows`: a fold step's weights, output tile outermost) in
`DDR_WORD_BYTES`-byte words, lane u of a row in byte u % 16 of its word u // 16 (zero padding after the row's last
lane). The top function has one m_axi pointer per streamed process (each in its own bundle, `ddr_bundle`, its
offset an s_axilite register: the file's base address plus the process's `first_word` words); a fetch loop of
128-bit words at II=1 per process (`fetch_ddr_weights` of the emitted C++, bursts) feeds the process its words
in order through a stream.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from . import primitives
from .array_layout import BRAM18K_SHAPES, LUTRAM_DEPTH, fifo_storage
from .kinds.streamed import DDR_BURST_LATENCY, DDR_WORD_BYTES, tile_words, words_per_row
from .weights_load import packed_rows

# The m_axi read adapter of each streamed port (AMD UG1399, "M_AXI Interfaces"): bursts of DDR_MAX_BURST words,
# DDR_READ_OUTSTANDING bursts in flight; its read buffer holds their product in words.
DDR_MAX_BURST = 64
DDR_READ_OUTSTANDING = 4
DDR_FILE = "weights_ddr.bin"


def is_streamed(schedule, process) -> bool:
    """Whether the schedule streams the process's weights from DDR."""
    return process.weights is not None and schedule.of(process.name).storage_of("weights") == "ddr"


@dataclass(frozen=True)
class StreamedArray:
    """One streamed process's part of weights_ddr.bin."""

    process: str
    rows: int  # fold steps
    lanes: int  # int8 weights per row
    words_per_row: int
    first_word: int  # its first 128-bit word in weights_ddr.bin
    bands: int = 1  # the times an image reads it (once per band of the process's map)

    @property
    def words(self) -> int:
        return self.rows * self.words_per_row

    @property
    def words_per_image(self) -> int:
        return self.words * self.bands


def streamed_arrays(rows_by_process: dict[str, np.ndarray], bands: dict[str, int] | None = None) -> list[StreamedArray]:
    """Each streamed process's part of weights_ddr.bin; `bands`: process -> the bands of its map (1 if not given)."""
    parts, first = [], 0
    for name, rows in rows_by_process.items():
        part = StreamedArray(name, rows.shape[0], rows.shape[1], words_per_row(rows.shape[1]), first,
                             (bands or {}).get(name, 1))
        parts.append(part)
        first += part.words
    return parts


def ddr_image(rows_by_process: dict[str, np.ndarray]) -> bytes:
    """weights_ddr.bin (see the module's docstring)."""
    return packed_rows(rows_by_process, DDR_WORD_BYTES)


def streamed_bands(graph, schedule) -> dict[str, int]:
    """The bands of every streamed process's map (`ProcessSchedule.bands`)."""
    return {p.name: schedule.of(p.name).bands for p in graph.processes if is_streamed(schedule, p)}


def streamed_rows(graph, schedule) -> dict[str, np.ndarray]:
    """The weight rows of every streamed process, in graph order."""
    from .process_spec import schedule_spec

    rows = {}
    for p in graph.processes:
        if is_streamed(schedule, p):
            spec = schedule_spec(graph, p, schedule)
            rows[p.name] = spec.process_kind.weight_rows(p.weights, spec).astype(np.int8)
    return rows


def ddr_bundle(port: str) -> str:
    """The m_axi bundle of a streamed process's port: one per port, so each fetch has its own read adapter."""
    return f"gmem_{port}"


def ddr_report(parts: list[StreamedArray], image: bytes, ports: dict[str, str]) -> dict:
    """What report.json and accelerator.json say of the weights in DDR ("weights_ddr"); `ports`: process -> the
    top function's m_axi port."""
    return {"file": DDR_FILE, "word_bytes": DDR_WORD_BYTES, "words": len(image) // DDR_WORD_BYTES,
            "bytes": len(image), "sha256": hashlib.sha256(image).hexdigest(),
            "burst_latency": DDR_BURST_LATENCY,
            "bytes_per_image": sum(p.words_per_image for p in parts) * DDR_WORD_BYTES,
            "arrays": [{"process": p.process, "port": ports[p.process], "bundle": ddr_bundle(ports[p.process]),
                        "rows": p.rows, "lanes": p.lanes, "words_per_row": p.words_per_row,
                        "first_word": p.first_word, "words": p.words, "offset_bytes": p.first_word * DDR_WORD_BYTES,
                        "words_per_image": p.words_per_image}
                       for p in parts]}


@dataclass(frozen=True)
class WeightPorts:
    """The AXI ports from the PL to the DDR that a board gives streamed weights, and the bytes a PL cycle they
    deliver together."""

    count: int
    bytes_per_cycle: float


def weight_ports(board) -> WeightPorts | None:
    """What the weights streamed from DDR get on the board (`Board.ddr`), the one figure the ILP's bandwidth row
    and the Vivado block design share: on a Zynq board every high-performance port but HP0, which carries the
    DMA's traffic (`emit.vivado.WEIGHT_PORTS`); on an Alveo card one port: link.cfg places every streamed port in
    the board's one memory bank (`emit.alveo`). Their rate is the memory's sustained rate (on an Alveo card its
    one bank's share: the [ddr] peak is the card's banks' sum), or the ports' at the board's clock if less; None for
    a board without a [ddr] table."""
    ddr = board.ddr
    if ddr is None:
        return None
    count, share = (ddr.ports - 1, 1) if board.zynq is not None else (1, 1 / ddr.ports)
    sustained = ddr.peak_bytes_per_s * ddr.sustained_fraction * share / (board.clock_mhz * 1e6)
    return WeightPorts(count, min(sustained, count * ddr.port_bits / 8))


def ddr_bytes_per_cycle(board) -> float | None:
    """Bytes of weights the board's DDR delivers per PL cycle through the ports the weights get (`weight_ports`);
    None for a board without a [ddr] table. The whole design's streamed bytes per image share it; each streamed
    process's own fetch of one DDR_WORD_BYTES word a cycle is its loop's charge."""
    ports = weight_ports(board)
    return None if ports is None else ports.bytes_per_cycle


def board_ddr_problem(board) -> str | None:
    """Why the board cannot stream weights from DDR, or None: it has no [ddr] table, or its ports are narrower
    than the streamed loop's word (each streamed process charges one DDR_WORD_BYTES word a cycle)."""
    if board.ddr is None:
        return f"board {board.name} has no [ddr] table"
    if board.ddr.port_bits < DDR_WORD_BYTES * 8:
        return (f"board {board.name}'s {board.ddr.port_bits}-bit DDR ports are narrower than the streamed loop's "
                f"{DDR_WORD_BYTES * 8}-bit word")
    return None


@dataclass(frozen=True)
class DdrPortCost:
    """What one streamed process adds beside its loop (`ilp.cost.resources`, primitive "ddr_port"): its m_axi read
    adapter and its fetch loop (`fetch_ddr_weights`)."""

    bram18k: int
    lut: int
    ff: int
    lutram: int  # LUTs of memories: the adapter's request FIFO and the fetch stream


# The adapter's logic (a labelled estimate, no synthesis of the Vitis HLS adapter is at hand; UG1399 "M_AXI
# Resources" names its parts, not their size): an address counter, a beat counter of a burst, a count of the bursts
# in flight and the read buffer's two pointers, each a yosys-synthesized loop counter (`primitives.counter_lut`);
# a request FIFO of DDR_READ_OUTSTANDING (address, length) entries in LUTRAM (`ming_py.array_layout`'s rule for a
# RAM: two LUTs per bit of 64 words); registers for the request's address and a read beat.
DDR_ADDRESS_BITS = 32  # the word address within weights_ddr.bin the adapter counts (its 64-bit base is a register)
DDR_REQUEST_BITS = 64 + 8  # an AXI read request: address and burst length
FETCH_STREAM_DEPTH = 2  # `fetch_ddr_weights`'s stream to its process


def ddr_port_cost(words: int, bands: int = 1) -> DdrPortCost:
    """The m_axi read adapter and fetch loop of a process that streams its `words` DDR words `bands` times an image:
    the read buffer of DDR_MAX_BURST x DDR_READ_OUTSTANDING words in BRAM18K (by `ming_py.array_layout`'s BRAM18K
    shapes), the adapter's logic (see above) and the fetch loop's word and band counters and stream."""
    buffer_words, word_bits = DDR_MAX_BURST * DDR_READ_OUTSTANDING, DDR_WORD_BYTES * 8
    bram = min(math.ceil(word_bits / width) * math.ceil(buffer_words / depth) for width, depth in BRAM18K_SHAPES)
    counters = (DDR_ADDRESS_BITS, _bits(DDR_MAX_BURST), _bits(DDR_READ_OUTSTANDING), _bits(buffer_words),
                _bits(buffer_words), _bits(words)) + ((_bits(bands - 1),) if bands > 1 else ())
    lut = sum(primitives.counter_lut(b) for b in counters)
    request_fifo = math.ceil(DDR_READ_OUTSTANDING / LUTRAM_DEPTH) * DDR_REQUEST_BITS * 2
    stream = fifo_storage(FETCH_STREAM_DEPTH, word_bits).lut
    return DdrPortCost(bram, lut, sum(counters) + DDR_REQUEST_BITS + word_bits, request_fifo + stream)


def _bits(maximum: int) -> int:
    return max(maximum.bit_length(), 1)


def pass_words(spec) -> int:
    """DDR words of a streamed process's weights: every tile's, read once per band of its map."""
    return tile_words(spec) * spec.tokens_out[0]


def streamed_words(spec) -> int:
    """DDR words a streamed process reads per image."""
    return pass_words(spec) * spec.bands


def streamed_bytes(spec) -> int:
    """Bytes a streamed process reads from DDR per image."""
    return streamed_words(spec) * DDR_WORD_BYTES


BRAM18K_BYTES = 18 * 1024 // 8
URAM_BYTES = 72 * 4096 // 8


def exceeds_chip(graph, budget) -> bool:
    """Whether the weights of `graph` outgrow every on-chip memory of `budget` (BRAM18K and URAM, whole): no
    design keeps them all on chip, so the ILP may stream some from DDR. Line buffers, FIFOs and the other arrays
    are left out of the count: a graph whose weights just fit beside none of them is offered no DDR candidates,
    a conservative rule (DDR only where it is certainly needed)."""
    weights = sum(p.weights.size for p in graph.processes if p.weights is not None)
    return weights > budget.bram18k * BRAM18K_BYTES + budget.uram * URAM_BYTES
