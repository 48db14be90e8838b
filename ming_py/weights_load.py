"""The weight load path: weights in URAM, which the bitstream cannot initialize (UltraScale+, AMD UG573).

A process whose weights the schedule puts in URAM (`ProcessSchedule.storage` "weights": "uram",
`ming_py.array_layout.ArrayPlan.loaded`) keeps them in a RAM the accelerator fills once, at start, through a
second AXI4-Stream port of the top function, `s_axis_weights` (64-bit beats, TLAST on the last). The top
function's loader process (`<model>_load_weights`) reads the beats of the first call and hands each
loaded process its own (a `ming::Pack<8>` stream of depth 2, one beat a cycle); each such process reads its
beats in a load loop on its first call, before its first input token, and writes one row (every weight of a
fold step, one URAM word) per `beats` beats. Later calls of both find the weights loaded and skip it.

Deadlock-free by construction: the loader reads only the weight port and writes each process's beats in
turn; a loaded process reads all of its beats before anything else, so every beat the loader writes is
taken, whatever the image streams hold. Images wait behind the load only once (before the first image's
first token), so the per-image schedule, FIFO depths and cycle model are those of the steady state; the
load time is reported apart (`load_report`).

`weights.bin` (hls/ and deploy/) holds the beats in the order the loader reads them: per loaded process in
the graph's order, per row, `beats` little-endian 64-bit words, lane u of a row in byte u % 8 of its word
u // 8 (zero padding after the row's last lane). `accelerator.json` and host.json's "weights" describe it.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from . import primitives
from .array_layout import ArrayPlan, fifo_storage

BEAT_LANES = 8  # int8 weights per 64-bit beat of the weight port
STREAM_DEPTH = 2  # the loader's stream to each loaded process
LOAD_DEPTH = 3  # cycles from a beat's read by the loader to its row's write in URAM (read, forward, write)
WEIGHTS_FILE = "weights.bin"


def beats_per_row(lanes: int) -> int:
    return math.ceil(lanes / BEAT_LANES)


@dataclass(frozen=True)
class LoaderCost:
    """The load path's share of one loaded process (`ilp.cost.resources`): LUTs and FFs of its load loop and of
    the loader's loop over its beats, the yosys synthesis `weight_load` (benchmarks/calibration/weight_load.v,
    `ming_py.primitives`) at its beats per row, and the LUTs of the stream between them
    (`array_layout.fifo_storage`: shift registers)."""

    lut: int
    ff: int
    fifo_lut: int


def loader_cost(weights: ArrayPlan) -> LoaderCost:
    figures = primitives.weight_load(beats_per_row(weights.word_bits // 8))
    return LoaderCost(primitives.device_luts(figures), figures["ff"], fifo_storage(STREAM_DEPTH, 8 * BEAT_LANES).lut)


@dataclass(frozen=True)
class LoadedArray:
    """One loaded process's part of weights.bin."""

    process: str  # the process (the graph's name)
    rows: int  # fold steps: URAM words
    lanes: int  # int8 weights per row
    beats: int  # 64-bit beats per row
    first_word: int  # its first beat in weights.bin

    @property
    def words(self) -> int:
        return self.rows * self.beats


def loaded_arrays(rows_by_process: dict[str, np.ndarray]) -> list[LoadedArray]:
    """The parts of weights.bin for the loaded processes' weight rows (`ProcessKind.weight_rows`), in order."""
    parts, first = [], 0
    for name, rows in rows_by_process.items():
        part = LoadedArray(name, rows.shape[0], rows.shape[1], beats_per_row(rows.shape[1]), first)
        parts.append(part)
        first += part.words
    return parts


def weights_image(rows_by_process: dict[str, np.ndarray]) -> bytes:
    """weights.bin: every loaded process's rows as the loader reads them (see the module's docstring)."""
    return packed_rows(rows_by_process, BEAT_LANES)


def packed_rows(rows_by_process: dict[str, np.ndarray], word_bytes: int) -> bytes:
    """Every process's int8 weight rows in order, each row zero-padded to whole `word_bytes`-byte words: the
    layout of weights.bin (64-bit beats) and of weights_ddr.bin (`ming_py.weights_ddr`, 128-bit words)."""
    pieces = []
    for rows in rows_by_process.values():
        lanes = rows.shape[1]
        padded = np.zeros((rows.shape[0], math.ceil(lanes / word_bytes) * word_bytes), dtype=np.int8)
        padded[:, :lanes] = rows
        pieces.append(padded.reshape(-1).tobytes())
    return b"".join(pieces)


def load_cycles(parts: list[LoadedArray]) -> int:
    """Cycles of the load at one beat a cycle: every beat through the loader, the last row's write after it."""
    return sum(p.words for p in parts) + LOAD_DEPTH if parts else 0


def load_ends(parts: list[LoadedArray]) -> dict[str, int]:
    """Per loaded process, the cycle after its last row is written: the loader sends the parts in turn."""
    return {p.process: p.first_word + p.words + LOAD_DEPTH for p in parts}


def load_report(parts: list[LoadedArray], image: bytes, clock_mhz: float) -> dict:
    """What report.json, host.json and accelerator.json say of the load ("weights")."""
    cycles = load_cycles(parts)
    return {"file": WEIGHTS_FILE, "port": "s_axis_weights", "words": len(image) // 8, "bytes": len(image),
            "sha256": hashlib.sha256(image).hexdigest(), "load_cycles": cycles,
            "load_us": round(cycles / clock_mhz, 3),
            "arrays": [{"process": p.process, "rows": p.rows, "lanes": p.lanes, "beats_per_row": p.beats,
                        "first_word": p.first_word, "words": p.words} for p in parts]}


def is_loaded(schedule, process) -> bool:
    """Whether the schedule puts the process's weights in URAM (loaded at start)."""
    return process.weights is not None and schedule.of(process.name).storage_of("weights") == "uram"


def loaded_rows(graph, schedule) -> dict[str, np.ndarray]:
    """The weight rows ([fold step][lane], `ProcessKind.weight_rows`) of every loaded process, in graph order."""
    from .process_spec import schedule_spec

    rows = {}
    for p in graph.processes:
        if is_loaded(schedule, p):
            spec = schedule_spec(graph, p, schedule)
            rows[p.name] = spec.process_kind.weight_rows(p.weights, spec).astype(np.int8)
    return rows
