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


from .array_layout import ArrayPlan
from .epilogues import rule_of
from .kinds import KernelSpec


def plan_arrays(spec: KernelSpec, epilogue=None, line_buffer_memory: str = "bram") -> dict[str, ArrayPlan]:
    """The arrays of a process by role, in declaration order: its kind's, with its epilogue's constants."""
    return spec.process_kind.arrays(spec, epilogue, line_buffer_memory, epilogue_arrays(spec, epilogue))


def epilogue_arrays(spec: KernelSpec, epilogue) -> dict[str, ArrayPlan]:
    """The constant ROMs of a process's epilogue (`ming_py.epilogues`)."""
    return rule_of(epilogue).arrays(epilogue, spec)
