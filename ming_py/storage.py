"""The storage plan of a process: the layout of every array its loop touches, decided once.

Each array's plan gives the emitted pragmas (ARRAY_PARTITION / ARRAY_RESHAPE per dimension,
BIND_STORAGE) and, from the same numbers, its BRAM18K / URAM / LUT / FF cost in `ilp/cost.py`.
The layouts serve the loops of `ming_py.process_spec` at II=1 with at most one read and one write per
bank and iteration (simple dual-port RAMs, single-port ROMs; `ming csim --check-ports` runs the
code and counts):

Each kind lays out its own arrays (`ProcessKind.arrays` in `ming_py/kinds/`: the line buffer, pixel and
row buffers, weights `[fold steps][lanes]`, tables, accumulators) and each epilogue rule its constants
(`EpilogueRule.arrays` in `ming_py/epilogues/`: per output channel `[tiles][lanes]`, a word per tile).
Each array's layout and cost: `ming_py.array_layout`.
"""

from __future__ import annotations


from dataclasses import replace

from .array_layout import ArrayPlan
from .epilogues import rule_of
from .kinds import ProcessSpec


# "bram": where its size puts a ROM (LUTRAM when small, else BRAM); "ddr": streamed from DDR (`ming_py.weights_ddr`)
WEIGHT_MEMORIES = ("bram", "lutram", "uram", "ddr")


def plan_arrays(spec: ProcessSpec, epilogue=None, line_buffer_memory: str = "bram",
                weight_memory: str = "bram") -> dict[str, ArrayPlan]:
    """The arrays of a process by role, in declaration order: its kind's, with its epilogue's constants, the
    weights moved to `weight_memory` where it is "lutram" (a ROM the bitstream initializes) or "uram" (loaded
    at start through the weight port: `ArrayPlan.loaded`); weights streamed from DDR ("ddr", `spec.ddr_weights`) have
    no weight array, their kind a tile buffer instead."""
    if (weight_memory == "ddr") != spec.ddr_weights:
        raise ValueError(f"weights in {weight_memory} for a spec whose ddr_weights is {spec.ddr_weights}")
    arrays = spec.process_kind.arrays(spec, epilogue, line_buffer_memory, epilogue_arrays(spec, epilogue))
    weights = arrays.get("weights")
    if weight_memory in ("lutram", "uram") and weights is not None and weights.memory != "register":
        arrays["weights"] = replace(weights, memory=weight_memory)
    return arrays


def epilogue_arrays(spec: ProcessSpec, epilogue) -> dict[str, ArrayPlan]:
    """The constant ROMs of a process's epilogue (`ming_py.epilogues`)."""
    return rule_of(epilogue).arrays(epilogue, spec)
