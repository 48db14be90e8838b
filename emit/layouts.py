"""The guard that every array of a process's storage plan is laid out in its emitted C++ function.

The storage plan (`ming_py.storage`, `ArrayPlan.pragmas`) is the one source of every array's partition,
reshape and storage: the process templates lay the plan out through the macros of
`templates/process/macros.j2` (`declare` for a local array where it is declared, `constants` once per
template for the constant tables of the weights header). A template that forgets an array leaves Vitis HLS
its default layout (one dual-port RAM for an array that several lanes read each cycle: II > 1), which the
C-simulation cannot see. So `emit.hls` renders each process on its own and `check_layouts` compares its text
with the plan: every array of the plan must have each of its pragmas, else an internal error names the
process and the array.
"""

from __future__ import annotations

import re

from ming_py.array_layout import ArrayPlan

PRAGMA = re.compile(r"HLS_PRAGMA\((\w+)((?:\s+\w+=[^\s)]+)*)\s*\)")
SETTING = re.compile(r"(\w+)=([^\s)]+)")


class MissingLayout(RuntimeError):
    """An internal error of ming: a process template left an array of its storage plan without its layout."""


Pragma = tuple[str, frozenset]  # (directive, {(option, value)})


def stated_pragmas(code: str) -> set[Pragma]:
    """Every HLS_PRAGMA of `code` as (directive, its options)."""
    return {(m[1], frozenset(SETTING.findall(m[2]))) for m in PRAGMA.finditer(code)}


def planned_pragmas(name: str, plan: ArrayPlan) -> list[Pragma]:
    """The pragmas the plan gives the array `name`: a partition or reshape per laid-out dimension (all of it
    in registers: a complete partition), and its storage unless in registers."""
    result = []
    for directive, split, factor, dim in plan.pragmas:
        options = {"variable": name, "type": split, "dim": str(dim)}
        if split == "cyclic":
            options["factor"] = str(factor)
        result.append((directive, frozenset(options.items())))
    if plan.memory != "register":
        result.append(("BIND_STORAGE", frozenset({"variable": name, "type": plan.storage_type,
                                                  "impl": plan.memory}.items())))
    return result


def array_names(storage: dict[str, ArrayPlan], constants: dict[str, str]) -> dict[str, str]:
    """role -> C++ name of every array of the plan: a ROM is the weights header's constant table
    (`constants`, role -> name), any other array the local named by its role."""
    return {role: constants[role] if plan.rom else role for role, plan in storage.items()}


def missing_layouts(code: str, storage: dict[str, ArrayPlan], constants: dict[str, str]) -> list[tuple[str, str]]:
    """(array, directive) of every pragma of the plan that `code` lacks, in the plan's order."""
    stated = stated_pragmas(code)
    names = array_names(storage, constants)
    return [(names[role], directive) for role, plan in storage.items()
            for directive, options in planned_pragmas(names[role], plan) if (directive, options) not in stated]


def check_layouts(process: str, function: str, code: str, storage: dict[str, ArrayPlan],
                  constants: dict[str, str]) -> None:
    """Raises `MissingLayout` naming the process (model name and C++ function) and each array of its plan
    whose pragmas its emitted `code` lacks."""
    missing = missing_layouts(code, storage, constants)
    if missing:
        arrays = ", ".join(f"{array} ({directive})" for array, directive in missing)
        raise MissingLayout(f"internal error: process {process} ({function}): the emitted C++ lacks the storage "
                            f"plan's pragmas of {arrays}; its template must lay out every array of the plan "
                            "(emit/templates/process/macros.j2: declare, constants)")
