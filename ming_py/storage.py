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

Each array's layout and cost: `ming_py.array_layout`.
"""

from __future__ import annotations


from . import numerics
from .array_layout import ArrayPlan, Dim, array, spread
from .ir import (
    AccRequant,
    AverageRequant,
    FixedPointAdd,
    FixedPointAverage,
    FixedPointRequant,
    MulRequant,
)
from .kinds import KernelSpec


def plan_arrays(spec: KernelSpec, epilogue=None, line_buffer_memory: str = "bram") -> dict[str, ArrayPlan]:
    """The arrays of a process by role, in declaration order: its kind's, with its epilogue's constants."""
    return spec.process_kind.arrays(spec, epilogue, line_buffer_memory, epilogue_arrays(spec, epilogue))


def epilogue_arrays(spec: KernelSpec, epilogue) -> dict[str, ArrayPlan]:
    """The per-channel (or per-count) constant ROMs of a process's epilogue: requantization constants
    `[tiles][lanes]` (a word per output tile), the divisors of an average by its number of valid window
    elements, and TFLite's Add tables per lane."""
    arrays: dict[str, ArrayPlan] = {}
    if isinstance(epilogue, (AccRequant, FixedPointRequant)):
        tiles, lanes = spec.tokens_out[0], spec.lanes_out[0]
        for role, bits in requant_constants(epilogue):
            arrays[role] = array(role, bits, (Dim(tiles), spread(lanes, lanes, "reshape")), rom=True)
    if isinstance(epilogue, AverageRequant) and epilogue.exclude_padding and not epilogue.global_pool:
        for role, bits in (("divisor_multiplier", 64), ("divisor_shift", 32)):
            arrays[role] = array(role, bits, (Dim(epilogue.count + 1),), rom=True)
    if isinstance(epilogue, FixedPointAverage) and spec.process_kind.line_buffer:  # a whole map's is a constant
        for role, bits in (("divisor_multiplier", 32), ("divisor_shift", 8)):
            arrays[role] = array(role, bits, (Dim(len(epilogue.multiplier)),), rom=True)
    if isinstance(epilogue, FixedPointAdd):
        lanes = spec.lanes_in[0]
        for role in ("a_table", "b_table"):
            arrays[role] = array(role, 32, (spread(lanes, lanes, "partition"), Dim(256)), rom=True)
    return arrays


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
