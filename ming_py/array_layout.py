"""How one array is laid out and what it costs: dimensions split into banks (ARRAY_PARTITION) or packed
into words (ARRAY_RESHAPE), and the memory its banks go to (`ming_py.storage` plans every array of a
process with these).

Memory anchors (UltraScale+): BRAM18K 18 Kib, one port of 9/18/36 bits x 2048/1024/512 words; URAM
4096 x 72 bits; LUTRAM 64 bits per LUT (a ROM), two LUTs per 64 bits for a RAM read and written in
one cycle; registers one FF per bit. A bank of at most `LUTRAM_MAX_BITS`, or at most 64 words deep,
goes to LUTRAM. A stream FIFO (`fifo_storage`): shift registers (SRL32: one LUT holds 32 words of one bit, UG574)
or BRAM18K by the same shapes, as its BIND_STORAGE pragma says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LUTRAM_MAX_BITS = 1_024
LUTRAM_DEPTH = 64  # words of one LUT; a shallower bank would waste a BRAM's depth
BRAM18K_SHAPES = ((9, 2048), (18, 1024), (36, 512))  # (port width in bits, words)
URAM_SHAPE = (72, 4096)
SRL_DEPTH = 32  # words one LUT holds of one bit as a shift register (SRL32, UG574)
# Vitis HLS's auto_srl_max_bits (UG1399 config_storage): a FIFO of at most this many bits goes to shift registers
SRL_MAX_BITS = 1_024


@dataclass(frozen=True)
class Dim:
    """How one dimension is laid out: split into banks (partition) or packed into words (reshape)."""

    size: int
    partition: str = ""  # "", "cyclic", "complete"
    reshape: str = ""    # "", "cyclic", "complete"
    factor: int = 1

    @property
    def banks(self) -> int:
        return {"cyclic": self.factor, "complete": self.size}.get(self.partition, 1)

    @property
    def addresses(self) -> int:
        if self.partition == "complete" or self.reshape == "complete":
            return 1
        if self.partition == "cyclic" or self.reshape == "cyclic":
            return math.ceil(self.size / self.factor)
        return self.size

    @property
    def lanes(self) -> int:
        """Elements of this dimension in one word."""
        return {"cyclic": self.factor, "complete": self.size}.get(self.reshape, 1)


def spread(size: int, factor: int, how: str) -> Dim:
    """`size` split (how="partition") or packed (how="reshape") `factor` ways; complete when factor >= size."""
    if factor <= 1:
        return Dim(size)
    kind = "complete" if factor >= size else "cyclic"
    return Dim(size, **{how: kind}, factor=size if kind == "complete" else factor)


@dataclass(frozen=True)
class ArrayPlan:
    role: str
    element_bits: int
    dims: tuple[Dim, ...]
    rom: bool
    memory: str  # "register", "lutram", "bram" or "uram"

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.dims)

    @property
    def banks(self) -> int:
        return math.prod(d.banks for d in self.dims)

    @property
    def bits(self) -> int:
        return self.element_bits * math.prod(self.shape)

    @property
    def words(self) -> int:
        """Words per bank."""
        return math.prod(d.addresses for d in self.dims)

    @property
    def word_bits(self) -> int:
        return self.element_bits * math.prod(d.lanes for d in self.dims)

    @property
    def loaded(self) -> bool:
        """Constants the bitstream cannot initialize (URAM, UG573): written once at start through the
        accelerator's weight port (`ming_py.weights_load`), then only read."""
        return self.rom and self.memory == "uram"

    @property
    def storage_type(self) -> str:
        """One port serves a loaded ROM: its load loop writes it before its compute loop reads it."""
        if self.loaded:
            return "ram_1p"
        return "rom_1p" if self.rom else "ram_s2p"

    @property
    def pragmas(self) -> list[tuple[str, str, int, int]]:
        """(ARRAY_PARTITION | ARRAY_RESHAPE, type, factor, dim) per laid-out dimension (dim 1-based)."""
        result = []
        if self.memory == "register":
            return [("ARRAY_PARTITION", "complete", 0, 0)]
        for number, d in enumerate(self.dims, 1):
            if d.partition:
                result.append(("ARRAY_PARTITION", d.partition, d.factor, number))
            if d.reshape:
                result.append(("ARRAY_RESHAPE", d.reshape, d.factor, number))
        return result

    def cost(self) -> tuple[int, int, int, int]:
        """(BRAM18K, URAM, LUT, FF)."""
        if self.memory == "register":
            return 0, 0, 0, 0 if self.rom else self.bits
        if self.memory == "lutram":
            return 0, 0, self.banks * math.ceil(self.words / 64) * self.word_bits * (1 if self.rom else 2), 0
        if self.memory == "uram":
            width, depth = URAM_SHAPE
            return 0, self.banks * math.ceil(self.word_bits / width) * math.ceil(self.words / depth), 0, 0
        per_bank = min(math.ceil(self.word_bits / width) * math.ceil(self.words / depth)
                       for width, depth in BRAM18K_SHAPES)
        return self.banks * per_bank, 0, 0, 0


@dataclass(frozen=True)
class FifoStorage:
    """Where a stream FIFO goes and what it takes: `impl` is its BIND_STORAGE impl ("srl" or "bram")."""

    impl: str
    bram18k: int
    lut: int


def fifo_storage(depth: int, width_bits: int) -> FifoStorage:
    """A FIFO of `depth` words of `width_bits` bits: shift registers, a LUT per bit per SRL_DEPTH words, where it is
    small (SRL_MAX_BITS) or at most SRL_DEPTH deep (a LUT per bit, where BRAM would take a BRAM18K per 36 bits of its
    width, some 9 LUTs' share of the budget a bit on every board: 321-407 LUTs per BRAM18K); else BRAM18K, as many as
    the cheapest shape takes."""
    if depth * width_bits <= SRL_MAX_BITS or depth <= SRL_DEPTH:
        return FifoStorage("srl", 0, width_bits * math.ceil(depth / SRL_DEPTH))
    bram = min(math.ceil(width_bits / width) * math.ceil(depth / words) for width, words in BRAM18K_SHAPES)
    return FifoStorage("bram", bram, 0)


def array(role: str, element_bits: int, dims: tuple[Dim, ...], rom: bool, large: str = "bram") -> ArrayPlan:
    """An array in the cheapest memory its banks allow: registers for one word, LUTRAM when small."""
    plan = ArrayPlan(role, element_bits, dims, rom, "bram")
    if plan.words == 1:
        memory = "register"
    elif plan.words * plan.word_bits <= LUTRAM_MAX_BITS or plan.words <= LUTRAM_DEPTH:
        memory = "lutram"
    else:
        memory = large
    return ArrayPlan(role, element_bits, dims, rom, memory)


def memory_cost(arrays: dict[str, ArrayPlan]) -> tuple[int, int, int, int]:
    """(BRAM18K, URAM, LUT, FF) of a process's arrays."""
    costs = [a.cost() for a in arrays.values()]
    return tuple(sum(c[i] for c in costs) for i in range(4))
