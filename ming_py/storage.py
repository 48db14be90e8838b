"""The storage plan of a process: the layout of every array its loop touches, decided once.

Each array's plan gives the emitted pragmas (ARRAY_PARTITION / ARRAY_RESHAPE per dimension,
BIND_STORAGE) and, from the same numbers, its BRAM18K / URAM / LUT / FF cost in `ilp/cost.py`.
The layouts serve the loops of `ming_py.kernel` at II=1 with at most one read and one write per
bank and iteration (simple dual-port RAMs, single-port ROMs; `ming csim --check-ports` runs the
code and counts):

* line buffer `[copies][rows][W_in][tokens][lanes]`: the lanes of a token are one word (ARRAY_RESHAPE),
  so a token is one write and a window element's U_ic channels one read; the U_k window elements of
  an iteration read U_k copies (complete partition), each written with every token: Vitis HLS does
  not prove that reads at run-time indices fall into different banks of a partitioned array, so no
  bank is chosen at run time;
* weights `[fold steps][lanes]`: one word per fold step holds every weight that step multiplies
  (reshape of the lanes), read once per iteration;
* per-output-channel constants `[tiles][lanes]` likewise; accumulators are registers;
* 256-entry tables `[lanes][tables per lane][256]`: a ROM bank per lane, holding the table of every
  channel the lane carries (lane l of the t-th token of a pixel carries channel t * lanes + l), one
  read per iteration.
* a channel permutation's two pixels `[2][tokens][lanes]` are registers, each written from one input lane.

Memory anchors (UltraScale+): BRAM18K 18 Kib, one port of 9/18/36 bits x 2048/1024/512 words; URAM
4096 x 72 bits; LUTRAM 64 bits per LUT (a ROM), two LUTs per 64 bits for a RAM read and written in
one cycle; registers one FF per bit. A bank of at most `LUTRAM_MAX_BITS`, or at most 64 words deep,
goes to LUTRAM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import numerics
from .ir import (
    AccRequant,
    AverageRequant,
    FixedPointAdd,
    FixedPointAverage,
    FixedPointRequant,
    LookupTable,
    MulRequant,
)
from .kernel import KernelSpec

LUTRAM_MAX_BITS = 1_024
LUTRAM_DEPTH = 64  # words of one LUT; a shallower bank would waste a BRAM's depth
BRAM18K_SHAPES = ((9, 2048), (18, 1024), (36, 512))  # (port width in bits, words)
URAM_SHAPE = (72, 4096)


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
    def storage_type(self) -> str:
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


def _array(role: str, element_bits: int, dims: tuple[Dim, ...], rom: bool, large: str = "bram") -> ArrayPlan:
    """An array in the cheapest memory its banks allow: registers for one word, LUTRAM when small."""
    plan = ArrayPlan(role, element_bits, dims, rom, "bram")
    if plan.words == 1:
        memory = "register"
    elif plan.words * plan.word_bits <= LUTRAM_MAX_BITS or plan.words <= LUTRAM_DEPTH:
        memory = "lutram"
    else:
        memory = large
    return ArrayPlan(role, element_bits, dims, rom, memory)


def line_buffer_rows(spec: KernelSpec) -> int:
    """Rows of the line buffer: the window's rows, plus one when the row being written at a row's
    first column would still be read by the window of the previous row's last position (maps so
    narrow that the window there reaches back to column 0)."""
    w = spec.window
    rows = w.line_buffer_rows
    reaches_first_column = w.in_width - 1 + w.pads[3] - (w.kernel[1] - 1) * w.dilation[1] <= 0
    return rows + (w.pads[1] == 0 and reaches_first_column)


def plan_arrays(spec: KernelSpec, epilogue=None, line_buffer_memory: str = "bram") -> dict[str, ArrayPlan]:
    """The arrays of a process by role, in declaration order."""
    kind = spec.kind
    arrays: dict[str, ArrayPlan] = {}
    if kind in ("conv", "depthwise", "maxpool", "avgpool"):
        arrays["line_buffer"] = _line_buffer(spec, line_buffer_memory)
    elif kind == "pointwise":
        c_in = spec.inputs[0][0]
        lanes = spec.lanes_in[0]
        arrays["pixel"] = _array("pixel", 8, (Dim(2, "complete", factor=2), Dim(c_in // lanes),
                                              spread(lanes, lanes, "reshape")), rom=False)
    elif kind == "dense":
        arrays["row_buffer"] = _row_buffer(spec)
    elif kind == "permute":
        tokens, lanes = spec.tokens_out[0], spec.lanes_out[0]
        arrays["pixel"] = _array("pixel", 8, (Dim(2, "complete", factor=2), spread(tokens, tokens, "partition"),
                                              spread(lanes, lanes, "partition")), rom=False)
    if kind in ("conv", "depthwise", "pointwise", "dense"):
        lanes = math.prod(f for _, f in spec.unroll)
        arrays["weights"] = _array("weights", 8, (Dim(spec.fold), spread(lanes, lanes, "reshape")), rom=True)
    if isinstance(epilogue, (AccRequant, FixedPointRequant)):
        tiles, lanes = spec.tokens_out[0], spec.lanes_out[0]
        for role, bits in requant_constants(epilogue):
            arrays[role] = _array(role, bits, (Dim(tiles), spread(lanes, lanes, "reshape")), rom=True)
    if isinstance(epilogue, AverageRequant) and epilogue.exclude_padding and not epilogue.global_pool:
        for role, bits in (("divisor_multiplier", 64), ("divisor_shift", 32)):
            arrays[role] = _array(role, bits, (Dim(epilogue.count + 1),), rom=True)
    if kind == "broadcast":  # the per-channel vector, written once per image and read at every pixel
        v = spec.vector_input
        lanes = spec.lanes_in[v]
        arrays["vector"] = _array("vector", 8, (Dim(spec.tokens_in[v]), spread(lanes, lanes, "reshape")), rom=False)
    if kind in ("rescale", "table"):
        lanes, per_lane = spec.lanes_in[0], tables_per_lane(spec, epilogue)
        per_lane_dims = (Dim(per_lane),) if per_lane > 1 else ()
        arrays["table"] = _array("table", 8, (spread(lanes, lanes, "partition"), *per_lane_dims, Dim(256)), rom=True)
    if isinstance(epilogue, FixedPointAverage) and kind != "global_avgpool":
        for role, bits in (("divisor_multiplier", 32), ("divisor_shift", 8)):
            arrays[role] = _array(role, bits, (Dim(len(epilogue.multiplier)),), rom=True)
    if isinstance(epilogue, FixedPointAdd):
        lanes = spec.lanes_in[0]
        for role in ("a_table", "b_table"):
            arrays[role] = _array(role, 32, (spread(lanes, lanes, "partition"), Dim(256)), rom=True)
    if kind in ("conv", "depthwise", "pointwise", "dense", "maxpool", "avgpool"):
        arrays["acc"] = ArrayPlan("acc", 32, (Dim(spec.lanes_out[0]),), rom=False, memory="register")
    if kind in ("global_avgpool", "global_maxpool"):
        tokens, lanes = spec.tokens_in[0], spec.lanes_in[0]
        bits = 8 if kind == "global_maxpool" else 32  # a running int8 maximum, or an int32 sum
        arrays["acc"] = _array("acc", bits, (Dim(tokens), spread(lanes, lanes, "reshape")), rom=False)
    if kind == "upsample":
        arrays |= _upsample_buffers(spec)
    return arrays


def tables_per_lane(spec: KernelSpec, epilogue) -> int:
    """The 256-entry tables each lane of a table process holds: one, or with a table per channel, one for
    each channel the lane carries (the tokens of a pixel)."""
    return spec.tokens_in[0] if isinstance(epilogue, LookupTable) and epilogue.groups > 1 else 1


def requant_constants(epilogue) -> tuple[tuple[str, int], ...]:
    """(role, bits) of the per-channel constants of a MAC process's requantization: TFLite's fixed-point
    rule's; the lean datapath's (`ming::requantize_lean`; a shift common to all channels is a constant of
    the code, not a table) where every channel has them, else the exact float32 emulation's."""
    if isinstance(epilogue, FixedPointRequant):
        if epilogue.float32:
            return ("bias", 32), ("mantissa", 32), ("exponent", 32)
        return ("bias", 32), ("multiplier", 32), ("shift", 8)
    lean = numerics.lean_channels(epilogue.multipliers)
    if lean is None:
        return ("bias", 32), ("mantissa", 32), ("exponent", 32)
    if len({c.shift for c in lean}) == 1:
        return ("bias", 32), ("mantissa", 32), ("limit", 32)
    return ("bias", 32), ("mantissa", 32), ("shift", 8), ("limit", 32)


def average_shift(epilogue) -> numerics.ShiftRequant | None:
    """The rounding shift an average's requantization is when its multiplier is a power of two."""
    e = epilogue
    if not isinstance(e, AverageRequant):
        return None
    return numerics.average_shift(e.x_scale, e.x_zero_point, e.y_scale, e.zero_point, e.count, e.global_pool,
                                  e.exclude_padding)


def requant_datapath(epilogue) -> str:
    """The requantization datapath a process's lanes carry: "lean" (`ming::requantize_lean` with one
    shift), "lean, shift by channel", "exact" (`ming::requantize`), "float32 product" (`ming::mul_requant`),
    "shift" (`ming::requantize_shift`, an average by a power of two) or "fixed point" (Add, Sub,
    AveragePool)."""
    if isinstance(epilogue, FixedPointRequant) and epilogue.float32:
        return "exact"  # the float32 emulation of `ming::requantize`, rounding half away
    if isinstance(epilogue, (FixedPointRequant, FixedPointAdd, FixedPointAverage)):
        return "fixed point 32 x 32"
    if isinstance(epilogue, AccRequant):
        roles = [role for role, _ in requant_constants(epilogue)]
        return "exact" if "exponent" in roles else "lean, shift by channel" if "shift" in roles else "lean"
    if isinstance(epilogue, MulRequant):
        return "float32 product"
    if average_shift(epilogue) is not None:
        return "shift"
    if isinstance(epilogue, AverageRequant) and epilogue.global_pool:
        multiplier = numerics.ort_gap_multiplier(epilogue.x_scale, epilogue.y_scale, epilogue.count)
        return "lean" if numerics.lean_requant(multiplier) is not None else "exact"
    return "fixed point"


def _line_buffer(spec: KernelSpec, memory: str) -> ArrayPlan:
    """`[copies][rows][W_in][tokens][lanes]`: a token is one word, written into every copy; each of the
    U_k window elements an iteration reads comes from its own copy (a bank known at compile time)."""
    w, lanes, copies = spec.window, spec.lanes_in[0], spec.factor("k")
    dims = (Dim(copies, "complete", factor=copies) if copies > 1 else Dim(1), Dim(line_buffer_rows(spec)),
            Dim(w.in_width), Dim(w.in_channels // lanes), spread(lanes, lanes, "reshape"))
    return _array("line_buffer", 8, dims, rom=False, large=memory)


def _row_buffer(spec: KernelSpec) -> ArrayPlan:
    """The dense layer's input vector `[tokens][lanes]`: a token written per iteration, then one read per
    iteration (the k tile is a token)."""
    lanes = spec.lanes_in[0]
    return _array("row_buffer", 8, (Dim(spec.tokens_in[0]), spread(lanes, lanes, "reshape")), rom=False)


def upsample_factors(spec: KernelSpec) -> tuple[int, int]:
    """(rows, columns) an upsample process repeats each input pixel."""
    (_, h, w), (_, out_h, out_w) = spec.inputs[0], spec.outputs[0]
    return out_h // h, out_w // w


def _upsample_buffers(spec: KernelSpec) -> dict[str, ArrayPlan]:
    """The pixel buffer `[tokens][lanes]` (registers: the copies of a pixel in the row being read follow
    it by a pixel's tokens, too close to read back from RAM) and the row buffer `[W_in][tokens][lanes]`
    (a token is one word, written once in the row's first copy and read once in each later one)."""
    (_, _, w), tokens, lanes = spec.inputs[0], spec.tokens_in[0], spec.lanes_in[0]
    rows, cols = upsample_factors(spec)
    arrays = {}
    if cols > 1:
        arrays["pixel"] = ArrayPlan("pixel", 8, (Dim(tokens, "complete", factor=tokens),
                                                 spread(lanes, lanes, "reshape")), rom=False, memory="register")
    if rows > 1:
        arrays["row_buffer"] = _array("row_buffer", 8, (Dim(w), Dim(tokens), spread(lanes, lanes, "reshape")),
                                      rom=False)
    return arrays


def memory_cost(arrays: dict[str, ArrayPlan]) -> tuple[int, int, int, int]:
    """(BRAM18K, URAM, LUT, FF) of a process's arrays."""
    costs = [a.cost() for a in arrays.values()]
    return tuple(sum(c[i] for c in costs) for i in range(4))
