"""The Vivado project of a Zynq build: OUT/vivado/build_bitstream.tcl.

The script exports the HLS accelerator as an IP (when OUT/hls has not yet), builds a block
design around it (the processing system with its board preset and PL clock, an AXI DMA in
simple mode whose two streams run through the accelerator, SmartConnects to the processing
system's master and high-performance slave ports, one clock and one reset for everything),
runs implementation to a bitstream, reads the routed design's timing summary and utilization
and, when WNS and WHS are not negative and no resource is over 100 % of the device, copies the
bitstream and its hardware handoff to OUT/deploy/<model>.bit and .hwh, the pair a PYNQ overlay
loads (otherwise it stops with an error naming the figures and copies nothing).

Board facts (part, board part, carrier connections, the processing system's ports, pins and
properties) come from the board database; this module decides the names of the cells and
what connects to what, and the template lays the Tcl out.
"""

from __future__ import annotations

from dataclasses import dataclass

from ming_py import __version__
from ming_py.boards import Board, ProcessingSystem, Zynq, check_clock
from ming_py.dataflow import StreamGraph
from ming_py.errors import MingError

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
class Cell:
    name: str
    vlnv: str
    properties: tuple[tuple[str, str], ...] = ()
    set_by_hand: tuple[str, ...] = ()  # properties Vivado would otherwise derive from the connections


def vivado_files(graph: StreamGraph, board: Board, loaded: bool = False) -> dict[str, str]:
    """The files of OUT/vivado/, as {path relative to OUT: text}, for a board with a [zynq] table; `loaded`:
    the accelerator has a weight port (weights in URAM), fed by a DMA of its own."""
    _check_board(board)
    model = cpp_names(graph).model
    context = _context(model, board, loaded)
    return {SCRIPT: environment().get_template(TEMPLATE).render(context)}


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
