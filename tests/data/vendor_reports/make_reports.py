"""Writes the vendor reports `ming compare` reads for the example build (examples/tiny_cnn.onnx on the KV260),
in the layout Vitis HLS 2022.2 and build_bitstream.tcl leave in OUT:

    hls/tiny_cnn_prj/solution1/syn/report/{csynth.xml, <module>_csynth.xml}
    hls/tiny_cnn_prj/solution1/sim/report/tiny_cnn_top_cosim.rpt
    vivado/tiny_cnn_vivado/{timing_summary_routed.rpt, utilization_routed.rpt, utilization_hierarchical_routed.rpt}

As Vitis HLS writes them, every module's SummaryOfOverallLatency has Interval-min and Interval-max (a process that is
not itself pipelined starts again one cycle after it ends: interval = latency + 1), the dataflow top's also
DataflowPipelineThroughput; the co-simulation report has one row per RTL, VHDL not run (NA) and Verilog passed with
one transaction, so its interval is NA.

    python tests/data/vendor_reports/make_reports.py    # rewrites them next to this script

The figures are made up but typical: C synthesis over-estimates LUTs, post-route lands near the plan with a few
processes over 10 % off, conv3's loop misses its II (2 where the plan has 1), and fc's weights went to a RAMB18.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL, TOP, PART = "tiny_cnn", "tiny_cnn_top", "xck26-sfvc784-2LV-c"
REPORT_DIR = Path("hls") / f"{MODEL}_prj" / "solution1" / "syn" / "report"
COSIM_REPORT = Path("hls") / f"{MODEL}_prj" / "solution1" / "sim" / "report" / f"{TOP}_cosim.rpt"
COSIM_LATENCY = 503  # the one transaction's latency, cycles
PROJECT_DIR = Path("vivado") / f"{MODEL}_vivado"
TARGET_NS, ESTIMATED_NS, WNS, WHS = 5.0, 4.381, 0.214, 0.011
IP = "system_accelerator_0"  # the module prefix of the accelerator's instances in the block design


@dataclass(frozen=True)
class Process:
    function: str
    loop: str
    trips: int
    ii: int
    latency: int
    csynth: tuple[int, int, int, int, int]  # DSP, LUT, FF, BRAM18K, URAM (C synthesis)
    routed: tuple[int, int, int, int, int, int]  # LUT, FF, RAMB36, RAMB18, URAM, DSP (post-route)
    pipeline_module: bool  # the loop in a module <function>_Pipeline_<loop> of its own
    dsp_element: str = "DSP"


PROCESSES = (
    Process("conv1", "window_positions", 325, 1, 351, (124, 12604, 16710, 0, 0), (13010, 16230, 0, 0, 0, 124), True),
    Process("pool1", "window_positions", 257, 1, 266, (0, 1130, 1010, 0, 0), (1290, 980, 0, 0, 0, 0), False),
    Process("conv2", "window_positions", 205, 1, 243, (76, 9089, 8403, 0, 0), (8884, 8150, 0, 0, 0, 76), True),
    Process("conv3", "pixels", 77, 2, 245, (20, 3524, 5409, 0, 0), (3598, 5318, 0, 0, 0, 20), False,
            dsp_element="DSP48E"),
    Process("pool2", "window_positions", 27, 1, 36, (0, 729, 877, 0, 0), (659, 900, 0, 0, 0, 0), False),
    Process("fc", "vector", 8, 1, 33, (100, 14020, 17120, 0, 0), (14210, 16880, 0, 1, 0, 96), False),
)
TOP_CSYNTH = {"latency": 488, "interval": 354, "area": (320, 43100, 52529, 2, 0)}
CHANNELS = ("input_to_conv1", "conv1_to_pool1", "pool1_to_conv2", "conv2_to_conv3", "conv3_to_pool2",
            "pool2_to_fc", "fc_to_output")


def csynth_xml(module: str, latency: int | str, interval: int | str, area: tuple, loop: str = "",
               dsp_element: str = "DSP", estimated: float = ESTIMATED_NS) -> str:
    dsp, lut, ff, bram, uram = area
    throughput = f"      <DataflowPipelineThroughput>{interval}</DataflowPipelineThroughput>\n" if module == TOP else ""
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<profile>
  <ReportVersion>
    <Version>2022.2</Version>
  </ReportVersion>
  <UserAssignments>
    <unit>ns</unit>
    <ProductFamily>zynquplus</ProductFamily>
    <Part>{PART}</Part>
    <TopModelName>{module}</TopModelName>
    <TargetClockPeriod>{TARGET_NS:.2f}</TargetClockPeriod>
    <ClockUncertainty>1.35</ClockUncertainty>
    <FlowTarget>vivado</FlowTarget>
  </UserAssignments>
  <PerformanceEstimates>
    <PipelineType>{"dataflow" if module == TOP else "no"}</PipelineType>
    <SummaryOfTimingAnalysis>
      <unit>ns</unit>
      <EstimatedClockPeriod>{estimated:.3f}</EstimatedClockPeriod>
    </SummaryOfTimingAnalysis>
    <SummaryOfOverallLatency>
      <unit>clock cycles</unit>
      <Best-caseLatency>{latency}</Best-caseLatency>
      <Average-caseLatency>{latency}</Average-caseLatency>
      <Worst-caseLatency>{latency}</Worst-caseLatency>
      <Best-caseRealTimeLatency>{_time(latency)}</Best-caseRealTimeLatency>
      <Average-caseRealTimeLatency>{_time(latency)}</Average-caseRealTimeLatency>
      <Worst-caseRealTimeLatency>{_time(latency)}</Worst-caseRealTimeLatency>
{throughput}      <Interval-min>{interval}</Interval-min>
      <Interval-max>{interval}</Interval-max>
    </SummaryOfOverallLatency>
{loop}  </PerformanceEstimates>
  <AreaEstimates>
    <Resources>
      <BRAM_18K>{bram}</BRAM_18K>
      <{dsp_element}>{dsp}</{dsp_element}>
      <FF>{ff}</FF>
      <LUT>{lut}</LUT>
      <URAM>{uram}</URAM>
    </Resources>
    <AvailableResources>
      <BRAM_18K>288</BRAM_18K>
      <{dsp_element}>1248</{dsp_element}>
      <FF>234240</FF>
      <LUT>117120</LUT>
      <URAM>64</URAM>
    </AvailableResources>
  </AreaEstimates>
</profile>
"""


def _time(latency: int | str) -> str:
    return f"{latency * TARGET_NS:g} ns" if isinstance(latency, int) else latency


def loop_xml(p: Process) -> str:
    depth = p.latency - (p.trips - 1) * p.ii - 2
    return f"""    <SummaryOfLoopLatency>
      <{p.loop}>
        <Slack>{TARGET_NS - ESTIMATED_NS:.2f}</Slack>
        <TripCount>{p.trips}</TripCount>
        <Latency>{(p.trips - 1) * p.ii + depth}</Latency>
        <AbsoluteTimeLatency>{((p.trips - 1) * p.ii + depth) * TARGET_NS:g} ns</AbsoluteTimeLatency>
        <IterationLatency>{depth}</IterationLatency>
        <PipelineDepth>{depth}</PipelineDepth>
        <PipelineII>{p.ii}</PipelineII>
      </{p.loop}>
    </SummaryOfLoopLatency>
"""


def module_information() -> str:
    """csynth.xml's ModuleInformation as Vitis HLS 2022.2 writes it: per module the latency and area, no Interval;
    a module that is not pipelined has PipelineType no (its interval is its latency + 1)."""
    modules = []
    for p in PROCESSES:
        dsp, lut, ff, bram, uram = p.csynth
        modules.append(f"""    <Module>
      <Name>{p.function}</Name>
      <PerformanceEstimates>
        <SummaryOfTimingAnalysis>
          <TargetClockPeriod>{TARGET_NS:.2f}</TargetClockPeriod>
          <ClockUncertainty>1.35</ClockUncertainty>
          <EstimatedClockPeriod>{ESTIMATED_NS - 0.4:.3f}</EstimatedClockPeriod>
        </SummaryOfTimingAnalysis>
        <SummaryOfOverallLatency>
          <Best-caseLatency>{p.latency}</Best-caseLatency>
          <Average-caseLatency>{p.latency}</Average-caseLatency>
          <Worst-caseLatency>{p.latency}</Worst-caseLatency>
          <Best-caseRealTimeLatency>{_time(p.latency)}</Best-caseRealTimeLatency>
          <Average-caseRealTimeLatency>{_time(p.latency)}</Average-caseRealTimeLatency>
          <Worst-caseRealTimeLatency>{_time(p.latency)}</Worst-caseRealTimeLatency>
          <PipelineType>no</PipelineType>
        </SummaryOfOverallLatency>
      </PerformanceEstimates>
      <AreaEstimates>
        <Resources>
          <BRAM_18K>{bram}</BRAM_18K>
          <{p.dsp_element}>{dsp}</{p.dsp_element}>
          <FF>{ff}</FF>
          <LUT>{lut}</LUT>
          <URAM>{uram}</URAM>
        </Resources>
      </AreaEstimates>
    </Module>
""")
    return "  <ModuleInformation>\n" + "".join(modules) + "  </ModuleInformation>\n"


def csynth_files() -> dict[str, str]:
    top = csynth_xml(TOP, TOP_CSYNTH["latency"], TOP_CSYNTH["interval"], TOP_CSYNTH["area"])
    files = {"csynth.xml": top.replace("</profile>", module_information() + "</profile>")}
    for p in PROCESSES:
        own_loop = "" if p.pipeline_module else loop_xml(p)
        files[f"{p.function}_csynth.xml"] = csynth_xml(p.function, p.latency, p.latency + 1, p.csynth, own_loop,
                                                       p.dsp_element, ESTIMATED_NS - 0.4)
        if p.pipeline_module:
            dsp, lut, ff, bram, uram = p.csynth
            inner = (dsp, lut * 9 // 10, ff * 9 // 10, bram, uram)
            files[f"{p.function}_Pipeline_{p.loop}_csynth.xml"] = csynth_xml(
                f"{p.function}_Pipeline_{p.loop}", p.latency - 4, p.latency - 4, inner, loop_xml(p),
                p.dsp_element, ESTIMATED_NS)
    return files


# --- Vivado ------------------------------------------------------------------------------------------------

@dataclass
class Instance:
    name: str
    module: str
    own: tuple[int, int, int, int, int, int] = (0, 0, 0, 0, 0, 0)  # LUT, FF, RAMB36, RAMB18, URAM, DSP
    children: tuple = ()

    def totals(self) -> tuple[int, ...]:
        sums = list(self.own)
        for child in self.children:
            sums = [a + b for a, b in zip(sums, child.totals())]
        return tuple(sums)


def design() -> Instance:
    """The routed block design's hierarchy, as report_utilization -hierarchical lists it."""
    processes = []
    for i, p in enumerate(PROCESSES):
        pipeline = ()
        if p.pipeline_module:
            lut, ff, ramb36, ramb18, uram, dsp = p.routed
            inner = (lut * 9 // 10, ff * 9 // 10, ramb36, ramb18, uram, dsp)
            pipeline = (Instance(f"grp_{p.function}_Pipeline_{p.loop}_fu_{90 + 8 * i}",
                                 f"{IP}_{p.function}_Pipeline_{p.loop}", inner),)
            own = tuple(a - b for a, b in zip(p.routed, inner))
        else:
            own = p.routed
        processes.append(Instance(f"{p.function}_U0", f"{IP}_{p.function}", own, pipeline))
    fifos = [Instance(f"{channel}_U", f"{IP}_fifo_w64_d2_S", (23 + i, 14 + i, 0, 0, 0, 0))
             for i, channel in enumerate(CHANNELS[1:-1])]
    dataflow = Instance(f"{MODEL}_dataflow_U0", f"{IP}_{MODEL}_dataflow", (4, 2, 0, 0, 0, 0),
                        tuple(processes[:1] + fifos[:1] + processes[1:2] + fifos[1:2] + processes[2:3] + fifos[2:3]
                              + processes[3:4] + fifos[3:4] + processes[4:5] + fifos[4:5] + processes[5:]))
    accelerator_inside = Instance("inst", f"{IP}_{TOP}", (12, 8, 0, 0, 0, 0), (
        Instance("framing_U", f"{IP}_fifo_w2_d2_S", (9, 8, 0, 0, 0, 0)),
        Instance("fc_to_output_U", f"{IP}_fifo_w80_d2_S", (31, 20, 0, 0, 0, 0)),
        Instance("input_to_conv1_U", f"{IP}_fifo_w24_d2_S", (19, 12, 0, 0, 0, 0)),
        Instance("pack_axis_10_10_U0", f"{IP}_pack_axis_10_10_s", (142, 171, 0, 0, 0, 0)),
        dataflow,
        Instance("unpack_axis_768_3_U0", f"{IP}_unpack_axis_768_3_s", (168, 201, 0, 0, 0, 0)),
    ))
    return Instance("system_wrapper", "(top)", children=(Instance("system_i", "system", children=(
        Instance("accelerator", IP, children=(accelerator_inside,)),
        Instance("axi_dma", "system_axi_dma_0", (1874, 2893, 1, 2, 0, 0)),
        Instance("control_smc", "system_control_smc_0", (1021, 1533, 0, 0, 0, 0)),
        Instance("memory_smc", "system_memory_smc_0", (1388, 2240, 0, 0, 0, 0)),
        Instance("reset", "system_reset_0", (18, 40, 0, 0, 0, 0)),
        Instance("zynq_ps", "system_zynq_ps_0", (0, 0, 0, 0, 0, 0)),
    )),))


def _rows(instance: Instance, depth: int = 0):
    yield depth, instance
    for child in instance.children:
        yield from _rows(child, depth + 1)


def hierarchical_report() -> str:
    columns = ("Instance", "Module", "Total LUTs", "Logic LUTs", "LUTRAMs", "SRLs", "FFs", "RAMB36", "RAMB18",
               "URAM", "DSP Blocks")
    rows = []
    for depth, instance in _rows(design()):
        lut, ff, ramb36, ramb18, uram, dsp = instance.totals()
        srl = lut // 97
        lutram = lut // 211
        rows.append((" " * (2 * depth) + instance.name, instance.module, lut, lut - srl - lutram, lutram, srl, ff,
                     ramb36, ramb18, uram, dsp))
    widths = [max(len(str(c)) for c in column) for column in zip(columns, *rows)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    head = "|" + "|".join(f" {name:^{w}} " for name, w in zip(columns, widths)) + "|"
    body = ["|" + "|".join(f" {cell:<{w}} " if i == 0 else f" {cell:>{w}} " for i, (cell, w) in
                           enumerate(zip(row, widths))) + "|" for row in rows]
    table = "\n".join([rule, head, rule, *body, rule])
    return f"""Copyright 1986-2022 Xilinx, Inc. All Rights Reserved.
---------------------------------------------------------------------------------------------------------------------
| Tool Version : Vivado v.2022.2 (lin64) Build 3671981 Fri Oct 14 04:59:54 MDT 2022
| Date         : Tue Mar  5 14:02:11 2024
| Host         : build-server running 64-bit Ubuntu 22.04.3 LTS
| Command      : report_utilization -hierarchical -hierarchical_depth 7 -file utilization_hierarchical_routed.rpt
| Design       : system_wrapper
| Device       : {PART}
| Speed File   : -2LV
| Design State : Routed
---------------------------------------------------------------------------------------------------------------------

Utilization Design Information

Table of Contents
-----------------
1. Utilization by Hierarchy

1. Utilization by Hierarchy
---------------------------

{table}
* Note: The sum of lower-level cells may be larger than their parent cells total, due to cross-hierarchy LUT combining


"""


def utilization_report() -> str:
    lut, ff, ramb36, ramb18, uram, dsp = design().totals()
    tiles = ramb36 + ramb18 / 2
    rule = "+----------------------------+--------+-------+------------+-----------+-------+"
    head = "|          Site Type         |  Used  | Fixed | Prohibited | Available | Util% |"

    def row(site: str, used: float, available: int) -> str:
        return f"| {site:<26} | {used:>6g} | {0:>5} | {0:>10} | {available:>9} | {100 * used / available:>5.2f} |"

    return "\n".join([
        "Copyright 1986-2022 Xilinx, Inc. All Rights Reserved.",
        "| Command      : report_utilization -file utilization_routed.rpt",
        "| Design       : system_wrapper", f"| Device       : {PART}", "| Design State : Routed", "",
        "1. CLB Logic", "------------", "", rule, head, rule, row("CLB LUTs*", lut, 117120),
        row("  LUT as Logic", lut - lut // 97, 117120), row("CLB Registers", ff, 234240), rule, "",
        "2. BLOCKRAM", "-----------", "", rule, head, rule, row("Block RAM Tile", tiles, 144),
        row("  RAMB36/FIFO*", ramb36, 144), row("  RAMB18", ramb18, 288), row("URAM", uram, 64), rule, "",
        "3. ARITHMETIC", "-------------", "", rule, head, rule, row("DSPs", dsp, 1248), rule, "",
        "* Warning! LUT value is adjusted to account for LUT combining.", ""])


def timing_summary_report() -> str:
    names = ("WNS(ns)", "TNS(ns)", "TNS Failing Endpoints", "TNS Total Endpoints", "WHS(ns)", "THS(ns)",
             "THS Failing Endpoints", "THS Total Endpoints", "WPWS(ns)", "TPWS(ns)", "TPWS Failing Endpoints",
             "TPWS Total Endpoints")
    values = (f"{WNS:.3f}", "0.000", "0", "118342", f"{WHS:.3f}", "0.000", "0", "118342", "1.500", "0.000", "0",
              "50911")
    widths = [max(len(n), len(v)) for n, v in zip(names, values)]
    return "\n".join([
        "Copyright 1986-2022 Xilinx, Inc. All Rights Reserved.",
        "| Command      : report_timing_summary -file timing_summary_routed.rpt",
        "| Design       : system_wrapper", "| Device       : xck26-sfvc784", "| Design State : Routed", "",
        "------------------------------------------------------------------------------------------------",
        "| Design Timing Summary",
        "| ---------------------",
        "------------------------------------------------------------------------------------------------", "",
        "    " + "  ".join(n.rjust(w) for n, w in zip(names, widths)) + "  ",
        "    " + "  ".join(("-" * len(n)).rjust(w) for n, w in zip(names, widths)) + "  ",
        "    " + "  ".join(v.rjust(w) for v, w in zip(values, widths)) + "  ", "", "",
        "All user specified timing constraints are met.", ""])


def cosim_report() -> str:
    rule = "+--------+--------+" + "+".join(["-" * 12] * 3) + "+" + "+".join(["-" * 12] * 3) + "+" + "-" * 22 + "+"
    latency = [str(COSIM_LATENCY)] * 3
    return "\n".join([
        "================================================================",
        f"== Vitis HLS Report for '{TOP}'",
        "================================================================",
        "+ General Information: ",
        "    * Date:           Tue Mar  5 13:41:07 2024",
        "    * Version:        2022.2 (Build 3670227 on Oct 13 2022)",
        f"    * Project:        {MODEL}_prj",
        "    * Solution:       solution1 (Vivado IP Flow Target)",
        "    * Product family: zynquplus",
        f"    * Target device:  {PART}",
        "", "",
        "================================================================",
        "== C/RTL Co-Simulation Report",
        "================================================================",
        rule,
        "|        |        |" + f"{'Latency(Clock Cycles)':^38}|{'Interval(Clock Cycles)':^38}|" + f"{'Total Execution Time':^22}|",
        "+  RTL   + Status +" + "+".join(["-" * 12] * 3) + "+" + "+".join(["-" * 12] * 3) + "+" + f"{'(Clock Cycles)':^22}+",
        "|        |        |" + "|".join(f"{'min':^12}|{'avg':^12}|{'max':^12}".split("|") * 2) + "|" + " " * 22 + "|",
        rule,
        "|    VHDL|      NA|" + "|".join(f"{'NA':>12}" for _ in range(6)) + f"|{'NA':>22}|",
        "| Verilog|    Pass|" + "|".join(f"{cell:>12}" for cell in latency + ["NA"] * 3) + f"|{COSIM_LATENCY:>22}|",
        rule, "", ""])


def reports() -> dict[Path, str]:
    files = {REPORT_DIR / name: text for name, text in csynth_files().items()}
    files[COSIM_REPORT] = cosim_report()
    files[PROJECT_DIR / "timing_summary_routed.rpt"] = timing_summary_report()
    files[PROJECT_DIR / "utilization_routed.rpt"] = utilization_report()
    files[PROJECT_DIR / "utilization_hierarchical_routed.rpt"] = hierarchical_report()
    return files


def main() -> None:
    for relative, text in sorted(reports().items()):
        path = HERE / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(relative)


if __name__ == "__main__":
    main()
