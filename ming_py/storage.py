"""The storage plan of a process: the layout of every array its loop touches, decided once.

Each array's plan gives the emitted pragmas (ARRAY_PARTITION / ARRAY_RESHAPE per dimension,
BIND_STORAGE) and, from the same numbers, its BRAM18K / URAM / LUT / FF cost in `ilp/cost.py`.
The layouts serve the loops of `ming_py.kernel` at II=1 with at most one read and one write per
bank and iteration (simple dual-port RAMs, single-port ROMs; `ming csim --check-ports` runs the
code and counts):

Each kind lays out its own arrays (`ProcessKind.arrays` in `ming_py/kinds/`: the line buffer, pixel and
row buffers, weights `[fold steps][lanes]`, tables, accumulators) and each epilogue rule its constants
(`EpilogueRule.arrays` in `ming_py/epilogues/`: per output channel `[tiles][lanes]`, a word per tile).
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
