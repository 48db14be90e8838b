"""Running generated Tcl scripts without the AMD tools: tclsh, or Python's own Tcl interpreter where no
tclsh is installed, sourcing a prelude of stub procedures before the script."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

FIELD, RECORD = "\x1f", "\x1e"

# `record NAME ARG ...` appends one call to the trace file ::trace_path (the prelude sets the variable
# first): the words joined by FIELD, each call ended by RECORD, so arguments may hold spaces and quotes.
RECORDER = r"""
set ::trace [open $::trace_path w]
fconfigure $::trace -encoding utf-8 -translation lf
proc record {args} {
  puts -nonewline $::trace "[join $args \x1f]\x1e"
  flush $::trace
}
"""


def run_tcl(script: Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Runs the Tcl file `script` in `cwd`; a Tcl error makes the return code non-zero with the message on
    stderr."""
    tclsh = shutil.which("tclsh", path=(env or {}).get("PATH"))
    if tclsh:
        return subprocess.run([tclsh, str(script)], capture_output=True, text=True, cwd=cwd, env=env)
    program = "import sys, tkinter\ntkinter.Tcl().evalfile(sys.argv[1])\n"
    return subprocess.run([sys.executable, "-c", program, str(script)], capture_output=True, text=True, cwd=cwd,
                          env=env)


# `tclsh SCRIPT ARGS...` on Python's own Tcl interpreter, for commands that call tclsh where none is installed.
TCLSH_SHIM = """#!{python}
import sys, tkinter
tcl = tkinter.Tcl()
tcl.setvar("argv0", sys.argv[1])
tcl.setvar("argv", tcl.call("list", *sys.argv[2:]))
tcl.setvar("argc", len(sys.argv) - 2)
try:
    tcl.evalfile(sys.argv[1])
except tkinter.TclError as error:
    sys.exit(str(error))
"""


def provide_tclsh(bin_dir: Path) -> None:
    """A `tclsh` in `bin_dir` running Python's Tcl where no tclsh is installed."""
    if shutil.which("tclsh") is None:
        (bin_dir / "tclsh").write_text(TCLSH_SHIM.format(python=sys.executable))
        (bin_dir / "tclsh").chmod(0o755)


def read_trace(path: Path) -> list[list[str]]:
    """The calls `record` wrote to `path`, each as its list of words."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return [call.split(FIELD) for call in text.split(RECORD) if call]


# --- Vitis HLS: run_hls.tcl ---------------------------------------------------------------------------------

VITIS_COMMANDS = ("open_project", "set_top", "add_files", "open_solution", "set_part", "create_clock", "csim_design",
                  "csynth_design", "cosim_design", "export_design")

# Every Vitis command is recorded; open_project remembers the project, and csynth_design leaves the reports
# of ::csynth_fixture (a directory, or "" for none) in <project>/solution1/syn/report, as Vitis HLS writes them,
# after removing what an earlier synthesis left there (and `exit` where the interpreter has none).
VITIS_STUBS = r"""
if {![llength [info commands exit]]} {
  proc exit {{code 0}} { if {$code} { error "exit $code" } }
}
foreach command {set_top add_files open_solution set_part create_clock csim_design cosim_design export_design} {
  proc $command {args} "record $command {*}\$args"
}
proc open_project {args} {
  record open_project {*}$args
  set ::project_name [lindex $args end]
}
proc csynth_design {args} {
  record csynth_design {*}$args
  set report_dir [file join $::project_name solution1 syn report]
  file delete -force [file join $::project_name solution1 syn]
  file mkdir $report_dir
  if {$::csynth_fixture ne ""} {
    foreach path [glob -nocomplain -directory $::csynth_fixture *] {
      file copy $path $report_dir
    }
  }
}
"""


def run_hls_script(hls: Path, *tclargs: str, reports: Path | None = None) -> tuple[subprocess.CompletedProcess, list]:
    """Sources HLS/run_hls.tcl with `-tclargs tclargs` after the Vitis stubs, csynth_design handing back the
    report files in `reports`: (the finished process, the trace of Vitis calls)."""
    with tempfile.TemporaryDirectory(prefix="run_hls_") as scratch:
        trace = Path(scratch) / "trace"
        script = Path(scratch) / "stub_vitis.tcl"
        script.write_text(f"set ::trace_path {{{trace}}}\nset ::csynth_fixture {{{reports or ''}}}\n{RECORDER}"
                          f"{VITIS_STUBS}set argv [list {' '.join(tclargs)}]\nsource run_hls.tcl\n")
        run = run_tcl(script, hls)
        return run, read_trace(trace)


@dataclass
class Synthesis:
    """What a csynth run reports of each process (by C++ function) where it differs from report.json's plan."""

    ii: dict[str, str] = field(default_factory=dict)  # PipelineII
    trip_count: dict[str, str] = field(default_factory=dict)  # TripCount
    depth: dict[str, str] = field(default_factory=dict)  # PipelineDepth (12 elsewhere)
    clock_ns: dict[str, float] = field(default_factory=dict)  # EstimatedClockPeriod of the function's modules
    top_clock_ns: float | None = None  # EstimatedClockPeriod of the whole design
    missing_loop: tuple[str, ...] = ()  # functions whose loop is in no report
    missing_module: tuple[str, ...] = ()  # functions without a report of their own


def csynth_files(report: dict, synthesis: Synthesis | None = None, reflow: bool = False) -> dict[str, str]:
    """The csynth reports Vitis HLS writes to <proj>/solution1/syn/report for the build whose report.json is
    `report`, each loop as planned unless `synthesis` says otherwise: csynth.xml for the top and
    <module>_csynth.xml per module, in Vitis HLS's layout (ReportVersion, UserAssignments, PerformanceEstimates
    with SummaryOfTimingAnalysis, SummaryOfOverallLatency, SummaryOfLoopLatency/<label> and
    SummaryOfViolations, AreaEstimates, InterfaceSummary). The loop of every other process is its own module
    <function>_Pipeline_<label>, the others' stay in the function's report, as Vitis HLS does either way.
    `reflow`: the same reports with other whitespace, line ends and attributes on the elements."""
    synthesis = synthesis or Synthesis()
    target = 1000.0 / report["clock_mhz"]
    files = {}
    for index, node in enumerate(report["nodes"]):
        function, planned = node["cpp_name"], node["pipeline"]
        if function in synthesis.missing_module:
            continue
        label = planned["loop"]
        ii = synthesis.ii.get(function, str(planned["ii"]))
        trips = synthesis.trip_count.get(function, str(planned["trip_count"]))
        clock = synthesis.clock_ns.get(function, round(target * 0.72, 3))
        depth = synthesis.depth.get(function, "12")
        loop = None if function in synthesis.missing_loop else _loop_xml(label, trips, ii, depth, target, clock)
        if index % 2 == 0 and loop is not None:
            module = f"{function}_Pipeline_{label}"
            files[f"{module}_csynth.xml"] = _module_xml(report, module, clock, loop,
                                                        "loop auto-rewind stp (delay=0 cycles)")
            files[f"{function}_csynth.xml"] = _module_xml(report, function, clock, None, "no")
        else:
            files[f"{function}_csynth.xml"] = _module_xml(report, function, clock, loop, "no")
    clock = synthesis.top_clock_ns or max([round(target * 0.72, 3), *synthesis.clock_ns.values()])
    files[f"{report['top']}_csynth.xml"] = _module_xml(report, report["top"], clock, None, "dataflow")
    files["csynth.xml"] = _top_xml(report, clock, sorted(files))
    if reflow:
        files = {name: _reflowed(text) for name, text in files.items()}
    return files


def write_csynth(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def _loop_xml(label: str, trips: str, ii: str, depth: str, target: float, clock: float) -> str:
    numbers = trips.isdigit() and ii.isdigit() and depth.isdigit()
    latency = (int(trips) - 1) * int(ii) + int(depth) if numbers else "undef"
    return (f"<SummaryOfLoopLatency>\n<{label}>\n<Slack>{target - clock:.2f}</Slack>\n<TripCount>{trips}</TripCount>\n"
            f"<Latency>{latency}</Latency>\n<AbsoluteTimeLatency>{latency}</AbsoluteTimeLatency>\n"
            f"<PipelineII>{ii}</PipelineII>\n<PipelineDepth>{depth}</PipelineDepth>\n<InstanceList>\n"
            f"</InstanceList>\n</{label}>\n</SummaryOfLoopLatency>\n")


def _module_xml(report: dict, module: str, clock: float, loops: str | None, pipeline_type: str) -> str:
    target = 1000.0 / report["clock_mhz"]
    violations = ""
    if loops is not None:  # the loop is named again among the violations: the checker must not read it there
        label = loops.split("\n")[1].strip("<>")
        violations = (f"<SummaryOfLoopViolations>\n<{label}>\n<Name>{label}</Name>\n<IssueType>-</IssueType>\n"
                      f"<ViolationType>-</ViolationType>\n<SourceLocation>{report['cpp_name']}.cpp:60</SourceLocation>\n"
                      f"</{label}>\n</SummaryOfLoopViolations>\n")
    return (f"<profile>\n\n<ReportVersion>\n<Version>2022.2</Version>\n</ReportVersion>\n\n"
            f"<UserAssignments>\n<unit>ns</unit>\n<ProductFamily>zynquplus</ProductFamily>\n<Part>{report['part']}</Part>\n"
            f"<TopModelName>{module}</TopModelName>\n<TargetClockPeriod>{target:.2f}</TargetClockPeriod>\n"
            f"<ClockUncertainty>{target * 0.27:.2f}</ClockUncertainty>\n<FlowTarget>vivado</FlowTarget>\n"
            f"</UserAssignments>\n\n<PerformanceEstimates>\n<PipelineType>{pipeline_type}</PipelineType>\n"
            f"<SummaryOfTimingAnalysis>\n<unit>ns</unit>\n<EstimatedClockPeriod>{clock:.3f}</EstimatedClockPeriod>\n"
            f"</SummaryOfTimingAnalysis>\n<SummaryOfOverallLatency>\n<unit>clock cycles</unit>\n"
            + "".join(f"<{k}>undef</{k}>\n" for k in ("Best-caseLatency", "Average-caseLatency", "Worst-caseLatency",
                                                     "Best-caseRealTimeLatency", "Average-caseRealTimeLatency",
                                                     "Worst-caseRealTimeLatency", "Interval-min", "Interval-max"))
            + f"</SummaryOfOverallLatency>\n{loops or ''}<SummaryOfViolations>\n<IssueType>-</IssueType>\n"
            f"<ViolationType>-</ViolationType>\n<SourceLocation>{report['cpp_name']}.cpp:9</SourceLocation>\n"
            f"{violations}</SummaryOfViolations>\n</PerformanceEstimates>\n\n"
            f"<AreaEstimates>\n<Resources>\n<BRAM_18K>2</BRAM_18K>\n<DSP>1</DSP>\n<FF>812</FF>\n<LUT>1337</LUT>\n"
            f"<URAM>0</URAM>\n</Resources>\n<AvailableResources>\n<BRAM_18K>288</BRAM_18K>\n<DSP>1248</DSP>\n"
            f"<FF>234240</FF>\n<LUT>117120</LUT>\n<URAM>64</URAM>\n</AvailableResources>\n</AreaEstimates>\n\n"
            f"<InterfaceSummary>\n<RtlPorts>\n<name>ap_clk</name>\n<Object>{module}</Object>\n<Type>return value</Type>\n"
            f"<Scope></Scope>\n<IOProtocol>ap_ctrl_hs</IOProtocol>\n<IOConfig></IOConfig>\n<Dir>in</Dir>\n<Bits>1</Bits>\n"
            f"<Attribute>control</Attribute>\n</RtlPorts>\n</InterfaceSummary>\n\n</profile>\n")


def _top_xml(report: dict, clock: float, modules: list[str]) -> str:
    """csynth.xml: indented, and with the design hierarchy after the interface (loops are in the modules' reports)."""
    target = 1000.0 / report["clock_mhz"]
    instances = "".join(
        f"                <Instance>\n                    <InstName>{m}_U0</InstName>\n"
        f"                    <ModuleName>{m}</ModuleName>\n                    <IsCompInst>true</IsCompInst>\n"
        f"                </Instance>\n" for m in (name.removesuffix("_csynth.xml") for name in modules))
    return (f"<profile>\n    <ReportVersion>\n        <Version>2022.2</Version>\n    </ReportVersion>\n"
            f"    <UserAssignments>\n        <unit>ns</unit>\n        <ProductFamily>zynquplus</ProductFamily>\n"
            f"        <Part>{report['part']}</Part>\n        <TopModelName>{report['top']}</TopModelName>\n"
            f"        <TargetClockPeriod>{target:.2f}</TargetClockPeriod>\n"
            f"        <ClockUncertainty>{target * 0.27:.2f}</ClockUncertainty>\n        <FlowTarget>vivado</FlowTarget>\n"
            f"    </UserAssignments>\n    <PerformanceEstimates>\n        <PipelineType>dataflow</PipelineType>\n"
            f"        <SummaryOfTimingAnalysis>\n            <unit>ns</unit>\n"
            f"            <EstimatedClockPeriod>{clock:.3f}</EstimatedClockPeriod>\n        </SummaryOfTimingAnalysis>\n"
            f"        <SummaryOfOverallLatency>\n            <unit>clock cycles</unit>\n"
            f"            <Best-caseLatency>undef</Best-caseLatency>\n            <Interval-min>undef</Interval-min>\n"
            f"        </SummaryOfOverallLatency>\n    </PerformanceEstimates>\n    <AreaEstimates>\n        <Resources>\n"
            f"            <BRAM_18K>12</BRAM_18K>\n            <DSP>6</DSP>\n            <FF>9012</FF>\n"
            f"            <LUT>11042</LUT>\n            <URAM>0</URAM>\n        </Resources>\n    </AreaEstimates>\n"
            f"    <InterfaceSummary>\n        <RtlPorts>\n            <name>ap_clk</name>\n"
            f"            <Object>{report['top']}</Object>\n            <Scope/>\n        </RtlPorts>\n"
            f"    </InterfaceSummary>\n    <RTLDesignHierarchy>\n        <TopModule MAX_DEPTH=\"8\">\n"
            f"            <ModuleName>{report['top']}</ModuleName>\n            <InstancesList>\n{instances}"
            f"            </InstancesList>\n        </TopModule>\n    </RTLDesignHierarchy>\n</profile>\n")


def _reflowed(text: str) -> str:
    """The same XML with tabs and CRLF line ends, spaces inside the tags and two attributes (in either order) on
    every element that holds text."""
    import re

    flip = [False]

    def attributes(match: re.Match) -> str:
        flip[0] = not flip[0]
        pair = ['unit="x"', 'kind="y"'][::-1 if flip[0] else 1]
        return f"<{match.group(1)} {pair[0]}\t{pair[1]} >{match.group(2)}</{match.group(1)} >"

    text = re.sub(r"<([A-Za-z_][\w-]*)>([^<>]*)</\1>", attributes, text)
    return "\r\n".join("\t" + line.strip() for line in text.splitlines()) + "\r\n"


# --- Vivado: build_bitstream.tcl's post-route reports ---------------------------------------------------------

def timing_summary_report(wns: str, whs: str, design: str = "system_wrapper", part: str = "xck26-sfvc784-2LV-c") -> str:
    """report_timing_summary's text as Vivado writes it, with the Design Timing Summary's WNS and WHS."""
    failing_setup = "0" if not wns.startswith("-") else "17"
    failing_hold = "0" if not whs.startswith("-") else "3"
    tns = "0.000" if failing_setup == "0" else "-8.412"
    ths = "0.000" if failing_hold == "0" else "-0.061"
    met = ("All user specified timing constraints are met." if failing_setup == failing_hold == "0" else
           "Timing constraints are not met.")
    return f"""Copyright 1986-2022 Xilinx, Inc. All Rights Reserved.
---------------------------------------------------------------------------------------------------------------------
| Tool Version : Vivado v.2022.2 (lin64) Build 3671981 Fri Oct 14 04:59:54 MDT 2022
| Command      : report_timing_summary -file timing_summary_routed.rpt
| Design       : {design}
| Device       : {part.split('-')[0]}-{part.split('-')[1]}
| Speed File   : -2LV  PRODUCTION 1.30 05-15-2022
| Design State : Routed
---------------------------------------------------------------------------------------------------------------------

Timing Summary Report

------------------------------------------------------------------------------------------------
| Timer Settings
| --------------
------------------------------------------------------------------------------------------------

  Enable Multi Corner Analysis               :  Yes
  Enable Pessimism Removal                   :  Yes


check_timing report

Table of Contents
-----------------
1. checking no_clock (0)
2. checking constant_clock (0)


1. checking no_clock (0)
------------------------
 There are 0 register/latch pins with no clock driven by root clock pin.



------------------------------------------------------------------------------------------------
| Design Timing Summary
| ---------------------
------------------------------------------------------------------------------------------------

    WNS(ns)      TNS(ns)  TNS Failing Endpoints  TNS Total Endpoints      WHS(ns)      THS(ns)  THS Failing Endpoints  THS Total Endpoints     WPWS(ns)     TPWS(ns)  TPWS Failing Endpoints  TPWS Total Endpoints  
    -------      -------  ---------------------  -------------------      -------      -------  ---------------------  -------------------     --------     --------  ----------------------  --------------------  
{wns:>11}  {tns:>11}  {failing_setup:>21}  {'41234':>19}  {whs:>11}  {ths:>11}  {failing_hold:>21}  {'41234':>19}  {'1.500':>11}  {'0.000':>11}  {'0':>22}  {'16421':>20}  


{met}


------------------------------------------------------------------------------------------------
| Clock Summary
| -------------
------------------------------------------------------------------------------------------------

Clock       Waveform(ns)         Period(ns)      Frequency(MHz)
-----       ------------         ----------      --------------
clk_pl_0    {{0.000 2.500}}        5.000           200.000

"""


def utilization_report(board, used: dict[str, float], design: str = "system_wrapper") -> str:
    """report_utilization's text as Vivado writes it for the board's device, with `used` LUT, FF, BRAM (tiles),
    URAM and DSP (the rest a small design's)."""
    ultrascale = board.family != "Zynq-7000"
    rows = {"LUT": ("CLB LUTs" if ultrascale else "Slice LUTs", board.lut),
            "FF": ("CLB Registers" if ultrascale else "Slice Registers", board.ff),
            "BRAM": ("Block RAM Tile", board.bram18k / 2), "URAM": ("URAM", board.uram), "DSP": ("DSPs", board.dsp)}

    def row(resource: str, width: int = 26) -> str:
        site, available = rows[resource]
        value = used.get(resource, 0)
        shown = f"{value:g}"
        util = f"{100.0 * value / available:.2f}" if available else "0.00"
        return f"| {site:<{width}} | {shown:>6} | {0:>5} | {0:>10} | {available:>9g} | {util:>6} |\n"

    rule = f"+{'-' * 28}+{'-' * 8}+{'-' * 7}+{'-' * 12}+{'-' * 11}+{'-' * 8}+\n"
    head = f"| {'Site Type':^26} | {'Used':^6} | Fixed | Prohibited | Available | {'Util%':^6} |\n"
    logic = "CLB Logic" if ultrascale else "Slice Logic"
    io = "I/O" if ultrascale else "IO and GT Specific"
    as_logic = row("LUT").replace(f"| {rows['LUT'][0]:<26} |", f"| {'  LUT as Logic':<26} |")
    memory = rule + head + rule + row("BRAM") + (row("URAM") if ultrascale else "") + rule
    return f"""Copyright 1986-2022 Xilinx, Inc. All Rights Reserved.
---------------------------------------------------------------------------------------------------------------------
| Tool Version : Vivado v.2022.2 (lin64) Build 3671981 Fri Oct 14 04:59:54 MDT 2022
| Command      : report_utilization -file utilization_routed.rpt
| Design       : {design}
| Device       : {board.part}
| Speed File   : -2
| Design State : Routed
---------------------------------------------------------------------------------------------------------------------

Utilization Design Information

Table of Contents
-----------------
1. {logic}
2. {'BLOCKRAM' if ultrascale else 'Memory'}
3. {'ARITHMETIC' if ultrascale else 'DSP'}
4. {io}

1. {logic}
{'-' * (len(logic) + 3)}

{rule}{head}{rule}{row("LUT")}{as_logic}{row("FF")}{rule}

2. {'BLOCKRAM' if ultrascale else 'Memory'}
{'-' * (3 + len('BLOCKRAM' if ultrascale else 'Memory'))}

{memory}

3. {'ARITHMETIC' if ultrascale else 'DSP'}
{'-' * (3 + len('ARITHMETIC' if ultrascale else 'DSP'))}

{rule}{head}{rule}{row("DSP")}{rule}

4. {io}
{'-' * (len(io) + 3)}

{rule}{head}{rule}| {'Bonded IOPADs':<26} | {214:>6} | {214:>5} | {0:>10} | {214:>9} | 100.00 |
{rule}
"""


# Stubs of the post-route commands: report_timing_summary and report_utilization write the files
# ::timing_fixture and ::utilization_fixture hold to their -file.
VIVADO_REPORT_STUBS = r"""
proc open_run {args} { record open_run {*}$args }
proc copy_fixture {fixture command args} {
  record $command {*}$args
  file copy -force $fixture [lindex $args [expr {[lsearch -exact $args -file] + 1}]]
}
proc report_timing_summary {args} { copy_fixture $::timing_fixture report_timing_summary {*}$args }
proc report_utilization {args} { copy_fixture $::utilization_fixture report_utilization {*}$args }
"""
