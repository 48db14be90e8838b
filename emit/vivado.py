"""The Vivado project of a Zynq build: OUT/vivado/build_bitstream.tcl.

The script exports the HLS accelerator as an IP (when OUT/hls has not yet), builds a block
design around it (the processing system with its board preset and PL clock, an AXI DMA in
simple mode whose two streams run through the accelerator, SmartConnects to the processing
system's master and high-performance slave ports, one clock and one reset for everything),
runs implementation to a bitstream, reads the routed design's timing summary and utilization
and, when WNS and WHS are not negative and no resource is over 100 % of the device, copies the
bitstream and its hardware handoff to OUT/deploy/<model>.bit and .hwh, the pair a PYNQ overlay
loads (otherwise it stops with an error naming the figures and copies nothing).

A design whose weights stream from DDR (`ming_py.weights_ddr`) has an accelerator with one AXI
master per streamed process (`m_axi_gmem_<port>`, reads only) and an AXI4-Lite control port
(`s_axi_control`: the pointers' offset registers and ap_start). Its masters reach the DDR through
the high-performance ports the DMA leaves (`WEIGHT_PORTS`, as many as `ming_py.weights_ddr.weight_ports`
gives the weights, the rate the ILP budgets): the largest array first to the port carrying the fewest
words, one SmartConnect per port used; its control port sits beside the DMA's registers behind the processing system's master.

Board facts (part, board part, carrier connections, the processing system's ports, pins and
properties) come from the board database; this module decides the names of the cells and
what connects to what, and the template lays the Tcl out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ming_py import __version__
from ming_py.boards import Board, ProcessingSystem, Zynq, check_clock
from ming_py.dataflow import StreamGraph
from ming_py.errors import MingError
from ming_py.weights_ddr import board_ddr_problem, weight_ports

from .environment import environment
from .hls import ip_identity
from .identifiers import cpp_names

SCRIPT = "vivado/build_bitstream.tcl"
TEMPLATE = "vivado/build_bitstream.tcl.j2"
BLOCK_DESIGN = "system"
JOBS_VARIABLE = "MING_VIVADO_JOBS"
DEFAULT_JOBS = 4

PS, DMA, ACCELERATOR = "zynq_ps", "axi_dma", "accelerator"
# Where weights are in URAM (`ming_py.weights_load`): a second DMA, memory to stream only, feeds the
# accelerator's weight port once at start (the PYNQ driver sends deploy/weights.bin through it).
WEIGHT_DMA = "weight_dma"
CONTROL_SMC, MEMORY_SMC, RESET = "control_smc", "memory_smc", "reset"
ACCELERATOR_CONTROL = "s_axi_control"  # Vitis HLS's name of the s_axilite bundle "control"
SMARTCONNECT = "xilinx.com:ip:smartconnect"
PROC_SYS_RESET = "xilinx.com:ip:proc_sys_reset"
AXI_DMA = "xilinx.com:ip:axi_dma"

STREAM_BITS = 64  # the accelerator's AXI4-Stream TDATA (ming::AxisWord)
LENGTH_BITS = 26  # the widest buffer-length register: transfers of up to 2^26 - 1 bytes
BURST_BEATS = 64

# Extra settings of the board-preset automation rule: the Zynq-7000's DDR and fixed I/O are ports
# of the block design, and the rule must not wire the GP/HP ports itself.
PRESET_EXTRA = {"processing_system7": (("make_external", "FIXED_IO, DDR"), ("Master", "Disable"),
                                       ("Slave", "Disable"))}


@dataclass(frozen=True)
class HighPerformancePort:
    """A PS high-performance slave port for the accelerator's own DDR reads: its pin, its clock pin, the
    processing-system property that opens it and the SmartConnect that feeds it."""

    port: str
    clock_pin: str
    enable: tuple[str, str]
    smartconnect: str


# Per processing system (boards/processing_systems.toml): HP0 carries the DMA's traffic, HP1..HP3 the weights.
# Zynq UltraScale+: S_AXI_HP1..3_FPD are the PS's S_AXI_GP3..5 (AMD UG1085, PS-PL AXI interfaces). The Zynq-7000's
# HP ports are 64 bits wide, narrower than the streamed word: no weights from DDR there (`board_ddr_problem`).
WEIGHT_PORTS = {
    "zynq_ultra_ps_e": tuple(HighPerformancePort(f"S_AXI_HP{hp}_FPD", f"saxihp{hp}_fpd_aclk",
                                                 (f"PSU__USE__S_AXI_GP{hp + 2}", "1"), f"weights_to_hp{hp}")
                             for hp in (1, 2, 3)),
}


@dataclass(frozen=True)
class Cell:
    name: str
    vlnv: str
    properties: tuple[tuple[str, str], ...] = ()
    set_by_hand: tuple[str, ...] = ()  # properties Vivado would otherwise derive from the connections


def vivado_files(graph: StreamGraph, board: Board, loaded: bool = False,
                 streamed: dict | None = None) -> dict[str, str]:
    """The files of OUT/vivado/, as {path relative to OUT: text}, for a board with a [zynq] table; `loaded`:
    the accelerator has a weight port (weights in URAM), fed by a DMA of its own; `streamed`: the report's
    "weights_ddr" where weights stream from DDR (the accelerator's AXI masters and control port)."""
    _check_board(board)
    model = cpp_names(graph).model
    context = _context(model, board, loaded)
    if streamed:
        context |= _streamed_context(context, board, streamed["arrays"])
    return {SCRIPT: environment().get_template(TEMPLATE).render(context)}


def _streamed_context(context: dict, board: Board, arrays: list[dict]) -> dict:
    """The block design of a design with weights streamed from DDR: the weights' HP ports opened
    (`_weight_routes`), a SmartConnect into each from its AXI masters of the accelerator, the accelerator's
    control port on one more master port of the control SmartConnect, their clocks and resets;
    `assign_bd_address` maps the DDR into the masters' address space and the control port into the PS master's,
    as it does the DMA's."""
    routes = _weight_routes(board, arrays)
    cells = tuple(_with_one_more_master(cell) if cell.name == CONTROL_SMC else cell for cell in context["cells"])
    control_port = f"M{int(dict(_control_cell(cells).properties)['NUM_MI']) - 1:02d}_AXI"
    masters = tuple((f"{ACCELERATOR}/m_axi_{array['bundle']}", f"{hp.smartconnect}/S{index:02d}_AXI")
                    for hp, fed in routes for index, array in enumerate(fed))
    smartconnects = tuple(Cell(hp.smartconnect, SMARTCONNECT, (("NUM_SI", str(len(fed))), ("NUM_MI", "1")))
                          for hp, fed in routes)
    (reset_in, ps_resets), (interconnect, interconnect_resets), (peripheral, peripheral_resets) = context["reset_nets"]
    return {
        "ps_config": context["ps_config"] + tuple(hp.enable for hp, _ in routes),
        "cells": cells[:-1] + smartconnects + cells[-1:],
        "interface_nets": context["interface_nets"] + masters
        + tuple((f"{hp.smartconnect}/M00_AXI", f"{PS}/{hp.port}") for hp, _ in routes)
        + ((f"{CONTROL_SMC}/{control_port}", f"{ACCELERATOR}/{ACCELERATOR_CONTROL}"),),
        "clocked_pins": context["clocked_pins"]
        + tuple(pin for hp, _ in routes for pin in (f"{PS}/{hp.clock_pin}", f"{hp.smartconnect}/aclk")),
        "reset_nets": ((reset_in, ps_resets),
                       (interconnect, interconnect_resets + tuple(f"{hp.smartconnect}/aresetn" for hp, _ in routes)),
                       (peripheral, peripheral_resets)),
        "weight_routes": tuple((hp.smartconnect, hp.port, tuple(f"m_axi_{array['bundle']}" for array in fed))
                               for hp, fed in routes),
    }


def _weight_routes(board: Board, arrays: list[dict]) -> tuple[tuple[HighPerformancePort, list[dict]], ...]:
    """The HP ports the weights get on the board (`weight_ports`), each with the streamed arrays it carries (in
    the order of report.json's "weights_ddr" arrays): the array read most an image (its words times the bands of
    its process's map) first to the port carrying the fewest words an image so far (the lowest-numbered of equals),
    so that the ports share the bytes the ILP budgets them together; ports no array reaches left out."""
    ps, given, problem = board.zynq.processing_system, weight_ports(board), board_ddr_problem(board)
    if problem:
        raise MingError(f"{problem}: its block design cannot stream weights from DDR")
    known = WEIGHT_PORTS.get(ps.name, ())
    if given.count > len(known):
        raise MingError(f"board {board.name}: its [ddr] table gives the weights {given.count} high-performance "
                        f"ports, {ps.name} has {len(known)} beside the DMA's")
    ports = known[:given.count]
    carried = [0] * len(ports)
    port_of = {}
    for i in sorted(range(len(arrays)), key=lambda i: (-arrays[i]["words_per_image"], i)):
        port_of[i] = min(range(len(ports)), key=lambda p: (carried[p], p))
        carried[port_of[i]] += arrays[i]["words_per_image"]
    fed = [[a for i, a in enumerate(arrays) if port_of[i] == p] for p in range(len(ports))]
    return tuple((hp, arrays_of) for hp, arrays_of in zip(ports, fed) if arrays_of)


def _control_cell(cells: tuple[Cell, ...]) -> Cell:
    return next(cell for cell in cells if cell.name == CONTROL_SMC)


def _with_one_more_master(cell: Cell) -> Cell:
    properties = tuple((key, str(int(value) + 1) if key == "NUM_MI" else value) for key, value in cell.properties)
    return replace(cell, properties=properties)


def _check_board(board: Board) -> None:
    if board.zynq is None:
        raise MingError(f"board {board.name} has no [zynq] table: the Vivado block design is for Zynq boards "
                        f"(interface zynq_axis_dma), not {board.interface}")
    check_clock(board)


def _context(model: str, board: Board, loaded: bool = False) -> dict:
    zynq = board.zynq
    ps = zynq.processing_system
    ip = ip_identity(model, board)
    accelerator_vlnv = ":".join((ip["vendor"], ip["library"], ip["name"], ip["version"]))
    project = f"{model}_vivado"
    return {
        "model": model, "board": board, "zynq": zynq, "ps": ps,
        "hls_project": f"{model}_prj", "project": project, "bd": BLOCK_DESIGN,
        "wrapper": f"{BLOCK_DESIGN}_wrapper", "jobs_variable": JOBS_VARIABLE, "default_jobs": DEFAULT_JOBS,
        "clock_mhz": f"{board.clock_mhz:g}", "accelerator_vlnv": accelerator_vlnv,
        "ps_cell": PS, "ps_config": _ps_config(ps, board),
        "preset": (("apply_board_preset", "1"),) + PRESET_EXTRA.get(ps.name, ()),
        "cells": _cells(accelerator_vlnv, ps, loaded), "board_files": _board_files(zynq),
        "interface_nets": _interface_nets(ps, loaded), "clock_source": f"{PS}/{ps.clock_pin}",
        "clocked_pins": _clocked_pins(ps, loaded),
        "reset_nets": _reset_nets(ps, loaded), "version": __version__, "weight_dma": WEIGHT_DMA if loaded else None,
        "weight_routes": (),
    }


def _ps_config(ps: ProcessingSystem, board: Board) -> tuple[tuple[str, str], ...]:
    return ((ps.clock_property, f"{board.clock_mhz:g}"),) + ps.enable


def _dma_properties(address_bits: int) -> tuple[tuple[str, str], ...]:
    return (
        ("c_include_sg", "0"), ("c_sg_length_width", str(LENGTH_BITS)),
        ("c_include_mm2s", "1"), ("c_include_s2mm", "1"),
        ("c_m_axi_mm2s_data_width", str(STREAM_BITS)), ("c_m_axis_mm2s_tdata_width", str(STREAM_BITS)),
        ("c_m_axi_s2mm_data_width", str(STREAM_BITS)), ("c_s_axis_s2mm_tdata_width", str(STREAM_BITS)),
        ("c_mm2s_burst_size", str(BURST_BEATS)), ("c_s2mm_burst_size", str(BURST_BEATS)),
        ("c_include_mm2s_dre", "0"), ("c_include_s2mm_dre", "0"),  # PYNQ buffers are page-aligned
        ("c_addr_width", str(address_bits)),
    )


def _weight_dma_properties(address_bits: int) -> tuple[tuple[str, str], ...]:
    """The weight DMA: memory to stream only, the image DMA's widths and length register."""
    return tuple((key, "0" if key == "c_include_s2mm" else value) for key, value in _dma_properties(address_bits)
                 if "s2mm" not in key or key == "c_include_s2mm")


def _cells(accelerator_vlnv: str, ps: ProcessingSystem, loaded: bool = False) -> tuple[Cell, ...]:
    weight_dma = (Cell(WEIGHT_DMA, AXI_DMA, _weight_dma_properties(ps.address_bits)),) if loaded else ()
    return (
        Cell(DMA, AXI_DMA, _dma_properties(ps.address_bits),
             set_by_hand=("c_m_axi_s2mm_data_width", "c_s_axis_s2mm_tdata_width")),
        *weight_dma,
        Cell(ACCELERATOR, accelerator_vlnv),
        Cell(CONTROL_SMC, SMARTCONNECT, (("NUM_SI", "1"), ("NUM_MI", "2" if loaded else "1"))),
        Cell(MEMORY_SMC, SMARTCONNECT, (("NUM_SI", "3" if loaded else "2"), ("NUM_MI", "1"))),
        Cell(RESET, PROC_SYS_RESET),
    )


def _interface_nets(ps: ProcessingSystem, loaded: bool = False) -> tuple[tuple[str, str], ...]:
    """(from, to) interface pins: the two streams through the accelerator, the processing system's
    master to the DMA's registers, and the DMA's two memory masters into the high-performance port; with
    a weight port, the weight DMA's stream into it, its registers and its memory master."""
    weights = ((f"{WEIGHT_DMA}/M_AXIS_MM2S", f"{ACCELERATOR}/s_axis_weights"),
               (f"{CONTROL_SMC}/M01_AXI", f"{WEIGHT_DMA}/S_AXI_LITE"),
               (f"{WEIGHT_DMA}/M_AXI_MM2S", f"{MEMORY_SMC}/S02_AXI")) if loaded else ()
    return weights + (
        (f"{DMA}/M_AXIS_MM2S", f"{ACCELERATOR}/s_axis"),
        (f"{ACCELERATOR}/m_axis", f"{DMA}/S_AXIS_S2MM"),
        (f"{PS}/{ps.master_port}", f"{CONTROL_SMC}/S00_AXI"),
        (f"{CONTROL_SMC}/M00_AXI", f"{DMA}/S_AXI_LITE"),
        (f"{DMA}/M_AXI_MM2S", f"{MEMORY_SMC}/S00_AXI"),
        (f"{DMA}/M_AXI_S2MM", f"{MEMORY_SMC}/S01_AXI"),
        (f"{MEMORY_SMC}/M00_AXI", f"{PS}/{ps.slave_port}"),
    )


def _clocked_pins(ps: ProcessingSystem, loaded: bool = False) -> tuple[str, ...]:
    """Every clock input of the design; all run on the processing system's PL clock 0."""
    weights = (f"{WEIGHT_DMA}/s_axi_lite_aclk", f"{WEIGHT_DMA}/m_axi_mm2s_aclk") if loaded else ()
    return weights + (
        f"{PS}/{ps.master_clock_pin}", f"{PS}/{ps.slave_clock_pin}",
        f"{DMA}/s_axi_lite_aclk", f"{DMA}/m_axi_mm2s_aclk", f"{DMA}/m_axi_s2mm_aclk",  # no m_axi_sg_aclk without SG
        f"{ACCELERATOR}/ap_clk", f"{CONTROL_SMC}/aclk", f"{MEMORY_SMC}/aclk", f"{RESET}/slowest_sync_clk",
    )


def _reset_nets(ps: ProcessingSystem, loaded: bool = False) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(reset output, the reset inputs it drives): the processing system's PL reset into the reset
    block, whose outputs are synchronous to the PL clock."""
    weights = (f"{WEIGHT_DMA}/axi_resetn",) if loaded else ()
    return (
        (f"{PS}/{ps.reset_pin}", (f"{RESET}/ext_reset_in",)),
        (f"{RESET}/interconnect_aresetn", (f"{CONTROL_SMC}/aresetn", f"{MEMORY_SMC}/aresetn")),
        (f"{RESET}/peripheral_aresetn", (f"{DMA}/axi_resetn", *weights, f"{ACCELERATOR}/ap_rst_n")),
    )


def _board_files(zynq: Zynq) -> tuple[str, ...]:
    """The names of the Vivado board files the project needs: the board part's and, for a SOM, those of
    the carrier its connections name (`connector vendor:board:component:version ...`)."""
    carriers = zynq.board_connections.split()[1::2] if zynq.board_connections else []
    return tuple(vlnv.split(":")[1] for vlnv in [zynq.board_part, *carriers])
