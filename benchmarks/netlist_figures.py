"""The figures of one primitive's netlist as yosys gives them (its `stat` cell counts and the JSON netlist):
LUTs, flip-flops (less the model's input and output registers), DSP48E2s, carry chains as CARRY8s, carry
route-throughs, MUXFs and LUT levels between registers; and the top module's parameters. calibrate.py's module
docstring says what each figure means."""

from __future__ import annotations

import functools
import math
import sys

FF_TYPES = ("FDRE", "FDSE", "FDCE", "FDPE")
LUT_TYPES = tuple(f"LUT{n}" for n in range(1, 7)) + ("INV",)  # yosys's INV is a LUT1
MUXF_TYPES = ("MUXF7", "MUXF8", "MUXF9")


def is_register(cell: dict) -> bool:
    """A flip-flop, or a DSP48E2 using one of its internal pipeline registers."""
    if cell["type"] in FF_TYPES:
        return True
    return cell["type"] == "DSP48E2" and any(name.endswith("REG") and int(value, 2) != 0
                                              for name, value in cell["parameters"].items())


def output_bits(cell: dict) -> list:
    return [bit for port, direction in cell["port_directions"].items() if direction == "output"
            for bit in cell["connections"][port]]


def input_bits(cell: dict) -> list:
    return [bit for port, direction in cell["port_directions"].items() if direction == "input"
            for bit in cell["connections"][port]]


def io_register_bits(module: dict) -> set:
    return {bit for net in module["netnames"].values() if "io_register" in net["attributes"] for bit in net["bits"]}


def lut_levels(module: dict) -> int:
    """LUTs on the longest path between registers (or ports) of the netlist."""
    cells = module["cells"]
    driver = {bit: name for name, cell in cells.items() if not is_register(cell) for bit in output_bits(cell)}

    @functools.lru_cache(maxsize=None)
    def depth(name: str) -> int:  # LUTs on the longest path from a register to this cell's outputs
        cell = cells[name]
        before = max((depth(driver[bit]) for bit in input_bits(cell) if bit in driver), default=0)
        return before + (cell["type"] in LUT_TYPES)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 100_000))
    return max((depth(name) for name, cell in cells.items() if not is_register(cell)), default=0)


def carry8_equivalent(module: dict) -> int:
    """CARRY8 cells of yosys's CARRY4 chains: ceil(k / 2) for a chain of k."""
    carries = {name: cell for name, cell in module["cells"].items() if cell["type"] == "CARRY4"}
    carry_out = {bit: name for name, cell in carries.items() for bit in cell["connections"]["CO"]}
    following = {carry_out[cell["connections"]["CI"][0]]: name for name, cell in carries.items()
                 if cell["connections"]["CI"][0] in carry_out}
    heads = set(carries) - set(following.values())
    total = 0
    for name in sorted(heads):
        length = 1
        while name in following:
            name, length = following[name], length + 1
        total += math.ceil(length / 2)
    return total


def carry_route_through(module: dict) -> int:
    """CARRY4 sum (S) inputs driven by something other than a LUT: a register, a port or a DSP48E2."""
    cells = module["cells"].values()
    from_luts = {bit for cell in cells if cell["type"] in LUT_TYPES for bit in output_bits(cell)}
    return sum(isinstance(bit, int) and bit not in from_luts
               for cell in cells if cell["type"] == "CARRY4" for bit in cell["connections"]["S"])


KNOWN_CELLS = set(FF_TYPES + LUT_TYPES + MUXF_TYPES + ("CARRY4", "DSP48E2"))


def figures(stat: dict[str, int], module: dict) -> dict[str, int]:
    unknown = {kind for kind in stat if kind not in KNOWN_CELLS and not kind.startswith(("RAM", "SRL"))}
    if unknown:
        raise RuntimeError(f"cells the calibration does not count: {sorted(unknown)}")
    io_bits = io_register_bits(module)
    io_ff = sum(cell["type"] in FF_TYPES and cell["connections"]["Q"][0] in io_bits
                for cell in module["cells"].values())
    result = {
        "lut": sum(stat.get(kind, 0) for kind in LUT_TYPES),
        "carry_route_through": carry_route_through(module),
        "ff": sum(stat.get(kind, 0) for kind in FF_TYPES) - io_ff,
        "io_ff": io_ff,
        "dsp": stat.get("DSP48E2", 0),
        "carry4": stat.get("CARRY4", 0),
        "carry8": carry8_equivalent(module),
        "muxf7": stat.get("MUXF7", 0),
        "muxf8": stat.get("MUXF8", 0),
        "levels": lut_levels(module),
    }
    optional = {"muxf9": stat.get("MUXF9", 0),
                "lutram": sum(n for kind, n in stat.items() if kind.startswith("RAM") and not kind.startswith("RAMB")),
                "bram": sum(n for kind, n in stat.items() if kind.startswith("RAMB")),
                "srl": sum(n for kind, n in stat.items() if kind.startswith("SRL"))}
    result.update({key: value for key, value in optional.items() if value})
    return result


def parameters(module: dict) -> dict[str, int]:
    """The top module's parameter values (yosys writes them as bit strings; 32 bits read as two's complement)."""
    def value(bits: str) -> int:
        number = int(bits, 2)
        return number - (1 << 32) if len(bits) == 32 and bits[0] == "1" else number
    return {name: value(bits) for name, bits in sorted(module.get("parameter_default_values", {}).items())}
