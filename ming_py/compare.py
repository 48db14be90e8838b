"""`ming compare OUT`: a build's plan (OUT/report.json) against what Vitis HLS and Vivado made of it.

Where the vendor tools leave their reports in a build directory:

    OUT/hls/<model>_prj/solution1/syn/report/      `MING_HLS_STEPS=synth vitis-run --mode hls --tcl run_hls.tcl` (in OUT/hls)
        csynth.xml                                  the top: target and estimated clock, interval, area
        <function>_csynth.xml                       per module: a process's interval and area
        <function>_Pipeline_<loop>_csynth.xml       the module Vitis HLS may make of a process's pipelined loop
    OUT/vivado/<model>_vivado/                      `vivado -mode batch -source build_bitstream.tcl` (in OUT/vivado)
        timing_summary_routed.rpt                   WNS in its Design Timing Summary
        utilization_hierarchical_routed.rpt         post-route resources per instance
        utilization_routed.rpt                      post-route resources of the whole design
    OUT/hls/<model>_prj/solution1/sim/report/       `MING_HLS_STEPS=cosim vitis-run --mode hls --tcl run_hls.tcl` (in OUT/hls)
        <top>_cosim.rpt                             C/RTL co-simulation: measured latency and interval

Like is compared with like. Throughput: a process's planned cycles per image (report.json `nodes[].cycles`) and the
design's `totals.throughput_cycles` against the initiation interval C synthesis schedules (Interval-max of the
module's and of the top's SummaryOfOverallLatency); II against the pipelined loop's PipelineII. Latency: ming's
`totals.cycles` against the latency C/RTL co-simulation measured, never against csynth's static latency, which for a
dataflow design is only an estimate (UG1399: the real latency of a dataflow region is known after co-simulation); the
csynth figure is shown beside it, labelled as such. DSP, LUT, FF, BRAM18K and URAM post-route where the hierarchical
report holds the process, else from C synthesis.

Every report is read whole but refused above MAX_REPORT_BYTES, and every figure above MAX_FIGURE_DIGITS digits is
refused with one line naming the file: no report can make compare raise anything but a MingError.
"""

from __future__ import annotations

import math
import os
import re
import stat
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

import defusedxml
import defusedxml.ElementTree as SafeElementTree

from . import calibration
from .calibration import RESOURCES
from .errors import MingError
from .contract.ming_json import json_document

METRICS = ("ii", "interval") + RESOURCES
LABELS = {"ii": "II", "interval": "interval", "latency": "latency", "dsp": "DSP", "lut": "LUT", "ff": "FF",
          "bram18k": "BRAM18K", "uram": "URAM"}
TOLERANCE = 0.10
SOURCES = {"csynth": "C synthesis", "post-route": "post-route", "cosim": "C/RTL cosim"}

MAX_REPORT_BYTES = 64 * 2**20  # the largest report read: csynth.xml of a big design is a few MB, a .rpt less
MAX_FIGURE_DIGITS = 12  # the most digits of a cycle count or resource figure (10^12 cycles: 80 min at 200 MHz)
# The most characters of a report an error quotes: enough to recognise a table row or a figure, too few to carry
# a file's content out through an error
MAX_EXCERPT_CHARS = 80
C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # report.json's cpp_name and top name files in the reports

# run_hls.tcl's steps under Vitis 2025.1 on, and under the vitis_hls of earlier releases
HLS_STEP = "`MING_HLS_STEPS=synth vitis-run --mode hls --tcl run_hls.tcl` (or `vitis_hls -f run_hls.tcl -tclargs synth`)"
COSIM_STEP = "`MING_HLS_STEPS=cosim vitis-run --mode hls --tcl run_hls.tcl` (or `vitis_hls -f run_hls.tcl -tclargs cosim`)"
VIVADO_STEP = "vivado -mode batch -source build_bitstream.tcl"
TIMING_REPORT = "timing_summary_routed.rpt"
UTILIZATION_REPORT = "utilization_routed.rpt"
HIERARCHICAL_REPORT = "utilization_hierarchical_routed.rpt"
ACCELERATOR_CELL = "accelerator"  # the block design's cell of the accelerator (emit/vivado.py)

# csynth's AreaEstimates/Resources elements; Vitis HLS versions name the DSPs DSP48E or DSP
AREA_ELEMENTS = {"dsp": ("DSP", "DSP48E"), "lut": ("LUT",), "ff": ("FF",), "bram18k": ("BRAM_18K",),
                 "uram": ("URAM",)}
# report_utilization's Site Types (UltraScale+, 7 series, Versal) and how many BRAM18K one counts for
SITES = {"lut": (("CLB LUTs", "Slice LUTs"), 1), "ff": (("CLB Registers", "Slice Registers", "Registers"), 1),
         "bram18k": (("Block RAM Tile",), 2), "uram": (("URAM",), 1), "dsp": (("DSPs", "DSP Slices"), 1)}


@dataclass(frozen=True)
class Synthesis:
    """What the csynth reports hold: figures by process cpp_name, each a dict metric -> value (None: unknown);
    `interval` is Interval-max, `latency` csynth's static Worst-caseLatency (an estimate, shown, never compared)."""

    directory: Path
    target_ns: float | None
    estimated_ns: float | None  # the slowest estimate of the top and the processes' modules
    top: dict
    processes: dict[str, dict]
    loop_problems: dict[str, str]  # cpp_name -> why its pipelined loop has no II
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Cosimulation:
    """The C/RTL co-simulation report's row of the RTL that ran: status and min/avg/max latency and interval in
    cycles (None: NA, as Vitis writes the interval of a single transaction)."""

    path: Path
    rtl: str
    status: str
    latency: dict
    interval: dict


@dataclass(frozen=True)
class Implementation:
    """What the post-route reports hold (None where a report is missing)."""

    directory: Path
    wns_ns: float | None
    accelerator: dict | None
    whole_design: dict | None
    processes: dict[str, dict]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Comparison:
    report: dict
    synthesis: Synthesis | None
    implementation: Implementation | None
    result: dict  # what `--json` prints

    @property
    def missed(self) -> list[str]:
        return self.result["missed"]


@dataclass(frozen=True)
class ReportPaths:
    hls: Path  # the csynth reports
    cosim: Path  # the co-simulation report
    vivado: Path  # the Vivado project's reports


# --- the comparison ----------------------------------------------------------------------------------------

def compare_build(out: str | Path) -> Comparison:
    out = Path(out)
    report = load_report(out)
    paths = report_paths(out, report)
    for directory in (paths.hls, paths.cosim.parent, paths.vivado):
        _check_inside(directory, out)
    synthesis = read_synthesis(paths.hls, report)
    cosimulation = read_cosimulation(paths.cosim)
    implementation = read_implementation(paths.vivado, report)
    if synthesis is None and implementation is None and cosimulation is None:
        raise MingError(f"{out}: no vendor reports to compare: neither {paths.hls / 'csynth.xml'} (run {HLS_STEP} "
                        f"in {out / 'hls'}) nor {paths.vivado / TIMING_REPORT} (run `{VIVADO_STEP}` in "
                        f"{out / 'vivado'})")
    notes = _missing_notes(out, paths, synthesis, cosimulation, implementation)
    result = _result(out, report, synthesis, cosimulation, implementation, notes)
    return Comparison(report, synthesis, implementation, result)


def report_paths(out: Path, report: dict) -> ReportPaths:
    solution = out / "hls" / f"{report['cpp_name']}_prj" / "solution1"
    return ReportPaths(hls=solution / "syn" / "report",
                       cosim=solution / "sim" / "report" / f"{report['top']}_cosim.rpt",
                       vivado=out / "vivado" / f"{report['cpp_name']}_vivado")


def load_report(out: Path) -> dict:
    path = out / "report.json"
    if not path.is_file() and not path.is_symlink():
        raise MingError(f"{out}: not a ming build directory (no report.json); run `ming build` first")
    try:
        report = json_document(_read_bytes(path).decode("utf-8"))
    except ValueError as exc:
        raise MingError(f"{path}: not a report.json ming wrote ({' '.join(str(exc).split())})") from None
    _check_report(path, report)
    return report


def _check_report(path: Path, report) -> None:
    """What compare reads of report.json has the types ming writes; anything else is one line naming the field."""
    def refuse(why: str):
        raise MingError(f"{path}: not a report.json ming wrote ({why}); run `ming build` again")

    if not isinstance(report, dict):
        refuse("not a JSON object")
    missing = [key for key in ("cpp_name", "top", "nodes", "totals") if key not in report]
    if missing:
        refuse(f"no {', '.join(missing)}")
    for key in ("cpp_name", "top"):
        if not isinstance(report[key], str) or not C_NAME.fullmatch(report[key]):
            refuse(f"{key} is not a C++ name")
    if not isinstance(report["nodes"], list) or not all(isinstance(node, dict) for node in report["nodes"]):
        refuse("nodes is not a list of objects")
    if not isinstance(report["totals"], dict):
        refuse("totals is not an object")
    for index, node in enumerate(report["nodes"]):
        problem = _node_problem(node)
        if problem:
            name = _excerpt(node["name"]) if isinstance(node.get("name"), str) else f"nodes[{index}]"
            refuse(f"node {name}: {problem}")
    problem = _figures_problem(report["totals"], ("cycles", "throughput_cycles", "simulated_cycles") + RESOURCES)
    if problem:
        refuse(f"totals: {problem}")


def _node_problem(node: dict) -> str | None:
    if not isinstance(node.get("name"), str):
        return "name is not a string"
    if not isinstance(node.get("cpp_name"), str) or not C_NAME.fullmatch(node["cpp_name"]):
        return "cpp_name is not a C++ name"
    pipeline = node.get("pipeline")
    if not isinstance(pipeline, dict):
        return "no pipeline object"
    if not isinstance(pipeline.get("loop"), str) or not C_NAME.fullmatch(pipeline["loop"]):
        return "pipeline.loop is not a loop label"
    if not _is_figure(pipeline.get("ii")):
        return "pipeline.ii is not a number"
    return _figures_problem(node, ("cycles",) + RESOURCES)


def _figures_problem(figures: dict, keys: tuple[str, ...]) -> str | None:
    bad = [key for key in keys if figures.get(key) is not None and not _is_figure(figures[key])]
    return f"{bad[0]} is not a number of at most {MAX_FIGURE_DIGITS} digits" if bad else None


def _is_figure(value) -> bool:
    """A count or measure of at most MAX_FIGURE_DIGITS digits (an int is compared as such: a 400-digit one has no
    float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return (isinstance(value, int) or math.isfinite(value)) and abs(value) < 10 ** MAX_FIGURE_DIGITS


def _missing_notes(out: Path, paths: ReportPaths, synthesis: Synthesis | None, cosimulation: Cosimulation | None,
                   implementation: Implementation | None) -> list[str]:
    notes = []
    if synthesis is None:
        notes.append(f"no C synthesis reports ({paths.hls / 'csynth.xml'}): II and intervals not compared; run "
                     f"{HLS_STEP} in {out / 'hls'}")
    else:
        notes += synthesis.notes
    if cosimulation is None:
        notes.append(f"no C/RTL co-simulation report ({paths.cosim}): latency not compared; run {COSIM_STEP} in "
                     f"{out / 'hls'}")
    elif cosimulation.status != "Pass":
        notes.append(f"C/RTL co-simulation did not pass ({cosimulation.rtl}: {cosimulation.status} in "
                     f"{cosimulation.path}): latency not compared")
    if implementation is None:
        notes.append(f"no post-route reports ({paths.vivado / TIMING_REPORT}): resources from C synthesis; run "
                     f"`{VIVADO_STEP}` in {out / 'vivado'}")
    else:
        notes += implementation.notes
    return notes


def _result(out: Path, report: dict, synthesis: Synthesis | None, cosimulation: Cosimulation | None,
            implementation: Implementation | None, notes: list[str]) -> dict:
    processes = [_process_entry(node, synthesis, implementation) for node in report["nodes"]]
    totals = _totals_entry(report, synthesis, implementation)
    latency = _latency_entry(report, synthesis, cosimulation)
    clock = _clock(report, synthesis, implementation)
    return {
        "build": str(out), "model": report.get("model"), "board": report.get("board"), "part": report.get("part"),
        "clock_mhz": report.get("clock_mhz"), "tolerance": TOLERANCE,
        "reports": {"hls": str(synthesis.directory) if synthesis else None,
                    "cosim": str(cosimulation.path) if cosimulation else None,
                    "vivado": str(implementation.directory) if implementation else None},
        "notes": notes, "clock": clock, "processes": processes, "totals": totals, "latency": latency,
        "whole_design": implementation.whole_design if implementation else None,
        "flagged": _flagged(processes, totals, latency),
        "missed": _missed_ii(report, synthesis) + ([clock["missed"]] if clock["missed"] else []),
    }


def _process_entry(node: dict, synthesis: Synthesis | None, implementation: Implementation | None) -> dict:
    function = node["cpp_name"]
    synthesized = synthesis.processes.get(function, {}) if synthesis else {}
    routed = implementation.processes.get(function) if implementation else None
    planned = {"ii": node["pipeline"]["ii"], "interval": node.get("cycles")} | {r: node.get(r) for r in RESOURCES}
    figures = {}
    for metric in METRICS:
        if metric in RESOURCES and routed is not None:
            achieved, source = routed.get(metric), "post-route"
        else:
            achieved, source = synthesized.get(metric), "csynth" if synthesis else None
        figures[metric] = _figure(planned[metric], achieved, source)
    return {"name": node["name"], "cpp_name": function, "kind": node.get("kind"), "figures": figures,
            "csynth_latency_estimate": synthesized.get("latency")}


def _totals_entry(report: dict, synthesis: Synthesis | None, implementation: Implementation | None) -> dict:
    totals = report["totals"]
    figures = {"interval": _figure(totals.get("throughput_cycles"), synthesis.top.get("interval") if synthesis
                                   else None, "csynth" if synthesis else None)}
    accelerator = implementation.accelerator if implementation else None
    for resource in RESOURCES:
        if accelerator is not None:
            figures[resource] = _figure(totals.get(resource), accelerator.get(resource), "post-route")
        else:
            figures[resource] = _figure(totals.get(resource), synthesis.top.get(resource) if synthesis else None,
                                        "csynth" if synthesis else None)
    return {"name": "total", "figures": figures}


def _latency_entry(report: dict, synthesis: Synthesis | None, cosimulation: Cosimulation | None) -> dict:
    """ming's latency (its model's, and the cycle-level simulation's beside it) against the latency co-simulation
    measured (the worst of its transactions); csynth's static estimate is carried along, not compared."""
    totals = report["totals"]
    measured = cosimulation.latency["max"] if cosimulation and cosimulation.status == "Pass" else None
    return {"figure": _figure(totals.get("cycles"), measured, "cosim"),
            "simulated_cycles": totals.get("simulated_cycles"),
            "cosim": ({"rtl": cosimulation.rtl, "status": cosimulation.status, "latency": cosimulation.latency,
                       "interval": cosimulation.interval} if cosimulation else None),
            "csynth_estimate": synthesis.top.get("latency") if synthesis else None}


def _figure(planned, achieved, source: str | None) -> dict:
    """planned against achieved; `difference` is (achieved - planned) / planned, None where planned is 0 and
    achieved is not (flagged: something the plan did not count)."""
    difference, flagged = None, False
    if planned is not None and achieved is not None:
        if planned:
            difference = round((achieved - planned) / planned, 4)
            flagged = abs(achieved - planned) > TOLERANCE * abs(planned)
        else:
            difference = 0.0 if achieved == 0 else None
            flagged = achieved != 0
    return {"planned": planned, "achieved": achieved, "source": source if achieved is not None else None,
            "difference": difference, "flagged": flagged}


def _flagged(processes: list[dict], totals: dict, latency: dict) -> list[dict]:
    scopes = [(entry["name"], entry["figures"]) for entry in processes + [totals]]
    scopes.append(("total", {"latency": latency["figure"]}))
    return [{"process": name, "metric": metric} | {key: figure[key] for key in
                                                  ("planned", "achieved", "source", "difference")}
            for name, figures in scopes for metric, figure in figures.items() if figure["flagged"]]


def _missed_ii(report: dict, synthesis: Synthesis | None) -> list[str]:
    if synthesis is None:
        return []
    missed = []
    for node in report["nodes"]:
        function, planned = node["cpp_name"], node["pipeline"]["ii"]
        achieved = synthesis.processes.get(function, {}).get("ii")
        if achieved is None:
            missed.append(f"{node['name']}: {synthesis.loop_problems.get(function, 'no II')}")
        elif achieved > planned:
            missed.append(f"{node['name']}: loop {node['pipeline']['loop']} at II {achieved}, planned {planned}")
    return missed


def _clock(report: dict, synthesis: Synthesis | None, implementation: Implementation | None) -> dict:
    target = synthesis.target_ns if synthesis and synthesis.target_ns is not None else None
    if target is None and _is_figure(report.get("clock_mhz")) and report["clock_mhz"] > 0:
        target = round(1000.0 / report["clock_mhz"], 3)
    estimated = synthesis.estimated_ns if synthesis else None
    wns = implementation.wns_ns if implementation else None
    problems = []
    if estimated is not None and target is not None and estimated > target:
        problems.append(f"C synthesis estimates {estimated:g} ns, over the target {target:g} ns")
    if wns is not None and wns < 0:
        problems.append(f"post-route WNS {wns:g} ns")
    return {"target_ns": target, "hls_estimated_ns": estimated, "wns_ns": wns,
            "missed": f"clock: {'; '.join(problems)}" if problems else None}


def achieved_resources(comparison: Comparison) -> dict[str, dict]:
    """process name -> resource -> achieved amount (post-route where known, else C synthesis; None: unknown)."""
    return {entry["name"]: {resource: entry["figures"][resource]["achieved"] for resource in RESOURCES}
            for entry in comparison.result["processes"]}


def calibration_data(comparison: Comparison) -> dict:
    """The calibration file fitted to the comparison's achieved resources."""
    achieved = achieved_resources(comparison)
    processes = sum(any(value is not None for value in figures.values()) for figures in achieved.values())
    if not processes:
        raise MingError(f"{comparison.result['build']}: no per-process resources in the reports to fit a "
                        f"calibration to (they come from the modules' csynth reports or {HIERARCHICAL_REPORT})")
    factors = calibration.fit(comparison.report, achieved)
    return calibration.document(comparison.report, factors, hls=comparison.synthesis is not None,
                                vivado=comparison.implementation is not None, processes=processes)


# --- reading reports ---------------------------------------------------------------------------------------

def _check_inside(directory: Path, out: Path) -> None:
    """A directory of reports that exists lies inside the build `out` once symbolic links are followed: compare
    reads nothing of another folder's."""
    if not os.path.lexists(directory):
        return
    real, build = directory.resolve(), out.resolve()
    if build not in real.parents:
        raise MingError(f"{directory}: leads out of the build {out} (a symbolic link to {real}); compare reads "
                        f"only reports inside the build: replace the link by the reports themselves")


def _read_bytes(path: Path) -> bytes:
    """A report whole, refused above MAX_REPORT_BYTES before it is read; never through a symbolic link, never
    anything but a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if os.path.islink(path):
            raise MingError(f"{path}: a symbolic link; compare reads no report through one (copy the report "
                            f"itself into the build)") from None
        raise MingError(f"{path}: cannot read it ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise MingError(f"{path}: not a regular file, so not a report of the vendor tools or ming; not read")
        if info.st_size > MAX_REPORT_BYTES:
            raise MingError(f"{path}: {info.st_size:,} bytes, more than the {MAX_REPORT_BYTES // 2**20} MiB any "
                            f"report of the vendor tools or ming has; not read")
        try:
            data = file.read(MAX_REPORT_BYTES + 1)
        except OSError as exc:
            raise MingError(f"{path}: cannot read it ({exc.strerror})") from None
    if len(data) > MAX_REPORT_BYTES:
        raise MingError(f"{path}: more than the {MAX_REPORT_BYTES // 2**20} MiB any report of the vendor tools or "
                        f"ming has; not read")
    return data


def _excerpt(text: str) -> str:
    """At most MAX_EXCERPT_CHARS of a report's text, for an error to quote."""
    text = " ".join(text.split())
    return text if len(text) <= MAX_EXCERPT_CHARS else text[:MAX_EXCERPT_CHARS] + "..."


def _read_text(path: Path) -> str:
    return _read_bytes(path).decode("utf-8", errors="replace")


def _parse_number(text: str, where: str) -> int | float | None:
    """An integer or decimal figure; None for undef, NA, '-' and the like; one line naming `where` for a figure of
    more than MAX_FIGURE_DIGITS digits (no cycle count or resource is that large)."""
    text = text.replace(",", "").strip()
    match = re.fullmatch(r"[-+]?(\d*)(\.\d*)?([eE][-+]?\d+)?", text)
    if not match or not re.search(r"\d", match.group(1) + (match.group(2) or "")):
        return None
    whole, fraction, exponent = match.groups()
    if len(whole.lstrip("0")) > MAX_FIGURE_DIGITS or (exponent and abs(int(exponent[1:][:4])) > MAX_FIGURE_DIGITS):
        raise MingError(f"{where}: the figure {text[:24]}{'...' if len(text) > 24 else ''} has more than "
                        f"{MAX_FIGURE_DIGITS} digits, which no report of the vendor tools holds")
    if fraction is None and exponent is None:
        return int(text)
    return float(text)


# --- Vitis HLS: csynth reports -----------------------------------------------------------------------------

def read_synthesis(directory: Path, report: dict) -> Synthesis | None:
    """The top's figures from csynth.xml; a process's from <function>_csynth.xml, else from csynth.xml's
    ModuleInformation (Vitis HLS 2022.2 lists every module there, with its latency, area and II but
    no loops, so the II stays unknown)."""
    top_path = directory / "csynth.xml"
    if not top_path.is_file():
        return None
    top = _xml(top_path)
    listed = _listed_modules(top)
    target = _number(top, "UserAssignments/TargetClockPeriod", top_path)
    periods = [_number(top, TIMING_ESTIMATE, top_path)]
    processes, loop_problems, notes = {}, {}, []
    for node in report["nodes"]:
        function = node["cpp_name"]
        own = directory / f"{function}_csynth.xml"
        if own.is_file():
            module = _xml(own)
            periods.append(_number(module, TIMING_ESTIMATE, own))
            ii, problem = _loop_ii(directory, function, node["pipeline"]["loop"])
            if problem:
                loop_problems[function] = problem
            processes[function] = {"ii": ii} | module_figures(module, own)
            continue
        loop_problems[function] = f"no report {own.name}"
        if function in listed:
            module = listed[function]
            periods.append(_number(module, TIMING_ESTIMATE, top_path))
            processes[function] = {"ii": None} | module_figures(module, top_path)
            notes.append(f"no {own} for process {node['name']}: its interval and area from csynth.xml's "
                         f"ModuleInformation, its II unknown")
        else:
            notes.append(f"no {own} for process {node['name']}")
    known = [period for period in periods if period is not None]
    return Synthesis(directory=directory, target_ns=target, estimated_ns=max(known) if known else None,
                     top=module_figures(top, top_path), processes=processes, loop_problems=loop_problems,
                     notes=tuple(notes))


TIMING_ESTIMATE = "PerformanceEstimates/SummaryOfTimingAnalysis/EstimatedClockPeriod"


def _listed_modules(top: ElementTree.Element) -> dict[str, ElementTree.Element]:
    """csynth.xml's ModuleInformation/Module elements by Name (none in Vivado HLS 2020.1's)."""
    return {module.findtext("Name", "").strip(): module for module in top.findall("ModuleInformation/Module")}


def module_figures(root: ElementTree.Element, path: Path) -> dict:
    """A module's interval (below), static latency estimate (Worst-caseLatency) and area, from a csynth report's
    root or a ModuleInformation/Module element (the same PerformanceEstimates and AreaEstimates inside)."""
    overall = "PerformanceEstimates/SummaryOfOverallLatency"
    figures = {"interval": _interval(root, path),
               "latency": _number(root, f"{overall}/Worst-caseLatency", path)}
    for resource, names in AREA_ELEMENTS.items():
        values = [_number(root, f"AreaEstimates/Resources/{name}", path) for name in names]
        figures[resource] = next((value for value in values if value is not None), None)
    return figures


def _interval(root: ElementTree.Element, path: Path) -> int | float | None:
    """The cycles between two starts of the module, as Vitis HLS reports it: Interval-max where the report has it
    (a module's own report, every version); in csynth.xml's ModuleInformation, which has none, a dataflow module's
    DataflowPipelineThroughput, a pipelined one's PipelineInitiationInterval, and for a module that is not pipelined
    its worst-case latency + 1 (it starts again the cycle after it is done, as its own report's Interval-max says;
    0 for a module of latency 0, as FINN's entry_proc_csynth.xml in tests/data/vendor_reports/public says)."""
    overall = "PerformanceEstimates/SummaryOfOverallLatency"
    for element in ("Interval-max", "DataflowPipelineThroughput"):
        value = _number(root, f"{overall}/{element}", path)
        if value is not None:
            return value
    if (root.findtext(f"{overall}/PipelineType") or "no").strip() != "no":
        return _number(root, f"{overall}/PipelineInitiationInterval", path) or None
    latency = _number(root, f"{overall}/Worst-caseLatency", path)
    return latency + 1 if latency else latency


def _loop_ii(directory: Path, function: str, label: str) -> tuple[int | float | None, str | None]:
    """The PipelineII of the process's loop, looked for as run_hls.tcl does: in <function>_Pipeline_<label>,
    any other <function>_Pipeline_*, then <function>'s own report; or None and why."""
    candidates = [directory / f"{function}_Pipeline_{label}_csynth.xml"]
    candidates += [path for path in sorted(directory.glob(f"{function}_Pipeline_*_csynth.xml"))
                   if path not in candidates]
    candidates.append(directory / f"{function}_csynth.xml")
    for path in candidates:
        if not path.is_file():
            continue
        summary = _xml(path).find("PerformanceEstimates/SummaryOfLoopLatency")
        loop = next(summary.iter(label), None) if summary is not None else None
        if loop is None:
            continue
        text = (loop.findtext("PipelineII") or "").strip()
        ii = _parse_number(text, f"{path}: {label}/PipelineII")
        if ii is None:
            return None, f"loop {label} is not pipelined (PipelineII '{_excerpt(text)}' in {path.name})"
        return ii, None
    return None, f"no loop {label} in {function}_csynth.xml or {function}_Pipeline_*_csynth.xml"


def _xml(path: Path) -> ElementTree.Element:
    """A csynth report's root. Reports have no DTD: one is refused by the parser itself (defusedxml), whatever
    the file's encoding, before any entity is expanded or fetched."""
    try:
        return SafeElementTree.fromstring(_read_bytes(path), forbid_dtd=True)
    except defusedxml.DefusedXmlException:
        raise MingError(f"{path}: declares a DTD or entities, which no csynth report does; not read") from None
    except ElementTree.ParseError as exc:
        raise MingError(f"{path}: not a csynth XML report ({exc})") from None


def _number(root: ElementTree.Element, element: str, path: Path) -> int | float | None:
    return _parse_number(root.findtext(element) or "", f"{path}: {element}")


# --- Vitis HLS: the C/RTL co-simulation report -------------------------------------------------------------

def read_cosimulation(path: Path) -> Cosimulation | None:
    """The co-simulation report's RTL row that passed (else the first one that ran), or None without a report.
    Its table (Vivado HLS and Vitis HLS alike):
        | RTL | Status | Latency min | avg | max | Interval min | avg | max | Total Execution Time |
    """
    if not path.is_file():
        return None
    rows = [cells for cells in (_cells(line) for line in _read_text(path).splitlines())
            if len(cells) >= 8 and cells[0] in ("Verilog", "VHDL")]
    ran = [cells for cells in rows if cells[1] != "NA"]
    if not ran:
        raise MingError(f"{path}: no Verilog or VHDL row that ran in its RTL | Status | Latency | Interval table "
                        f"(a C/RTL co-simulation report of Vitis HLS)")
    cells = next((cells for cells in ran if cells[1] == "Pass"), ran[0])
    where = f"{path}: {cells[0]}"
    figures = [_parse_number(cell, where) for cell in cells[2:8]]
    return Cosimulation(path=path, rtl=cells[0], status=cells[1],
                        latency=dict(zip(("min", "avg", "max"), figures[:3])),
                        interval=dict(zip(("min", "avg", "max"), figures[3:])))


def _cells(line: str) -> list[str]:
    line = line.strip()
    if not line.startswith("|"):
        return []
    return [cell.strip() for cell in line.strip("|").split("|")]


# --- Vivado: post-route reports ----------------------------------------------------------------------------

def read_implementation(directory: Path, report: dict) -> Implementation | None:
    timing, flat, hierarchical = (directory / name for name in (TIMING_REPORT, UTILIZATION_REPORT,
                                                                HIERARCHICAL_REPORT))
    if not any(path.is_file() for path in (timing, flat, hierarchical)):
        return None
    notes = []
    wns = None
    if timing.is_file():
        wns = design_wns(timing)
    else:
        notes.append(f"no {timing}: post-route timing not compared")
    whole_design = whole_design_utilization(flat) if flat.is_file() else None
    accelerator, processes = None, {}
    if hierarchical.is_file():
        rows = hierarchy_rows(hierarchical)
        accelerator, processes = _accelerator_rows(rows, report)
        if accelerator is None:
            notes.append(f"no instance of {report['top']} in {hierarchical}: resources from C synthesis")
        for node in report["nodes"] if accelerator is not None else ():
            if node["cpp_name"] not in processes:
                notes.append(f"no instance of process {node['name']} ({node['cpp_name']}_U0) in {hierarchical}: its "
                             f"resources from C synthesis")
    else:
        notes.append(f"no {hierarchical} (build_bitstream.tcl writes it with report_utilization -hierarchical): "
                     f"per-process resources from C synthesis")
    return Implementation(directory=directory, wns_ns=wns, accelerator=accelerator, whole_design=whole_design,
                          processes=processes, notes=tuple(notes))


def design_wns(path: Path) -> float | None:
    """WNS(ns) of report_timing_summary's Design Timing Summary table (None: NA, an unconstrained design)."""
    lines = _read_text(path).splitlines()
    table = next((i for i, line in enumerate(lines) if re.match(r"^\|\s*Design Timing Summary", line)), None)
    head = next((i for i in range(table, len(lines)) if "WNS(ns)" in lines[i]), None) if table is not None else None
    if head is None:
        raise MingError(f"{path}: no Design Timing Summary table with a WNS(ns) column")
    names = re.findall(r"\S+(?: \S+)*", lines[head])
    values = next((line.split() for line in lines[head + 1:] if re.search(r"[^-\s]", line)), [])
    if len(values) != len(names):
        raise MingError(f"{path}: the Design Timing Summary has {len(names)} columns and {len(values)} figures")
    if "WNS(ns)" not in names:
        raise MingError(f"{path}: the Design Timing Summary's columns ({_excerpt(', '.join(names))}) have no WNS(ns) "
                        f"of its own (report_timing_summary separates its columns by two spaces)")
    wns = _parse_number(dict(zip(names, values))["WNS(ns)"], f"{path}: WNS(ns)")
    return float(wns) if wns is not None else None


def whole_design_utilization(path: Path) -> dict:
    """Used LUT, FF, BRAM18K, URAM and DSP of the whole routed design (report_utilization's Site Type rows)."""
    rows = {}
    for line in _read_text(path).splitlines():
        cells = [cell.strip() for cell in line.strip().split("|")[1:-1]]
        if len(cells) >= 3 and cells[0].rstrip("*").strip() not in rows:
            site = cells[0].rstrip("*").strip()
            rows[site] = _parse_number(cells[1], f"{path}: {_excerpt(site)}")
    figures = {}
    for resource, (sites, per_site) in SITES.items():
        used = next((rows[site] for site in sites if rows.get(site) is not None), None)
        figures[resource] = used * per_site if used is not None else None
    return figures


@dataclass(frozen=True)
class HierarchyRow:
    instance: str
    module: str
    depth: int
    figures: dict


def hierarchy_rows(path: Path) -> list[HierarchyRow]:
    """The rows of report_utilization -hierarchical: Instance (indented by depth) | Module | Total LUTs | ... |
    FFs | RAMB36 | RAMB18 | URAM | DSP Blocks (DSP48 Blocks on 7 series)."""
    lines = _read_text(path).splitlines()
    head = next((i for i, line in enumerate(lines) if _is_hierarchy_head(line)), None)
    if head is None:
        raise MingError(f"{path}: no utilization table with Instance and Module columns (report_utilization "
                        f"-hierarchical)")
    columns = _table_cells(lines[head])
    rows = []
    for line in lines[head + 1:]:
        if line.startswith("+"):
            continue
        if not line.startswith("|"):
            break
        cells = line.split("|")[1:-1]
        if len(cells) != len(columns):
            raise MingError(f"{path}: a row of {len(cells)} cells under {len(columns)} columns: {_excerpt(line)}")
        named = dict(zip(columns, cells))
        instance = named["Instance"][1:] if named["Instance"].startswith(" ") else named["Instance"]
        rows.append(HierarchyRow(instance=instance.strip(), module=named["Module"].strip(),
                                 depth=len(instance) - len(instance.lstrip()),
                                 figures=_hierarchy_figures(named, f"{path}: {_excerpt(instance)}")))
    return rows


def _table_cells(line: str) -> list[str]:
    """The cells of a table row `| a | b |` (none where the line is no such row)."""
    line = line.strip()
    if not (line.startswith("|") and line.endswith("|")):
        return []
    return [cell.strip() for cell in line.split("|")[1:-1]]


def _is_hierarchy_head(line: str) -> bool:
    cells = _table_cells(line)
    return "Instance" in cells and "Module" in cells


def _hierarchy_figures(named: dict[str, str], where: str) -> dict:
    def column(*names: str):
        return next((_parse_number(named[name], f"{where}: {name}") for name in names if name in named), None)

    ramb36, ramb18 = column("RAMB36"), column("RAMB18")
    bram = 2 * ramb36 + ramb18 if ramb36 is not None and ramb18 is not None else None
    return {"lut": column("Total LUTs"), "ff": column("FFs"), "bram18k": bram, "uram": column("URAM"),
            "dsp": column("DSP Blocks", "DSP48 Blocks", "DSPs")}


def _accelerator_rows(rows: list[HierarchyRow], report: dict) -> tuple[dict | None, dict[str, dict]]:
    """The accelerator's figures and, below it, the shallowest instance of each process."""
    top = next((i for i, row in enumerate(rows) if _names_function(row, report["top"])), None)
    if top is None:
        top = next((i for i, row in enumerate(rows) if row.instance == ACCELERATOR_CELL), None)
    if top is None:
        return None, {}
    below = []
    for row in rows[top + 1:]:
        if row.depth <= rows[top].depth:
            break
        below.append(row)
    functions = sorted((node["cpp_name"] for node in report["nodes"]), key=len, reverse=True)
    found: dict[str, HierarchyRow] = {}
    for row in below:
        function = next((f for f in functions if _names_function(row, f)), None)
        if function is not None and (function not in found or row.depth < found[function].depth):
            found[function] = row
    return rows[top].figures, {function: row.figures for function, row in found.items()}


def _names_function(row: HierarchyRow, function: str) -> bool:
    """Whether the instance is one of `function`: Vitis HLS names a dataflow process's instance <function>_U0, a
    called function's grp_<function>_fu_<n>, and the module <function> (prefixed with the IP's name in a block
    design)."""
    if row.instance == f"{function}_U0" or re.fullmatch(rf"grp_{re.escape(function)}_fu_\d+", row.instance):
        return True
    return row.module == function or row.module.endswith(f"_{function}")


# --- the table ---------------------------------------------------------------------------------------------

INTERVAL_LEGEND = ("interval: cycles from one image to the next (planned: a process's cycles per image, the design's "
                   "throughput_cycles; achieved: csynth's Interval-max)")

def table(comparison: Comparison) -> str:
    result = comparison.result
    clock = f"{result['clock_mhz']:g} MHz" if _is_figure(result["clock_mhz"]) else "an unknown clock"
    lines = [f"{result['model']} on {result['board']} ({result['part']}) at {clock}: planned (report.json) against "
             f"achieved"]
    for tool, label in (("hls", "C synthesis"), ("cosim", "C/RTL co-simulation"), ("vivado", "post-route")):
        if result["reports"][tool]:
            lines.append(f"{label}: {result['reports'][tool]}")
    lines += [f"note: {note}" for note in result["notes"]]
    lines += ["", INTERVAL_LEGEND, *_figures_table(result), "", _latency_line(result["latency"]),
              _clock_line(result["clock"])]
    if result["whole_design"]:
        lines.append("post-route, whole design (with the DMA and interconnect): " + ", ".join(
            f"{LABELS[r]} {_text(v)}" for r, v in result["whole_design"].items() if v is not None))
    lines.append(f"flagged, over {TOLERANCE:.0%} off planned (*): "
                 + (str(len(result["flagged"])) if result["flagged"] else "none"))
    lines += [f"  {_flag_line(entry)}" for entry in result["flagged"]]
    lines.append("missed: " + ("none" if not result["missed"] else str(len(result["missed"]))))
    lines += [f"  {line}" for line in result["missed"]]
    return "\n".join(lines)


def _figures_table(result: dict) -> list[str]:
    header = ["process", "", *(LABELS[m] for m in METRICS), "resources from"]
    rows = [header]
    for entry in result["processes"] + [result["totals"]]:
        figures = entry["figures"]
        planned = [_text(figures[m]["planned"]) if m in figures else "-" for m in METRICS]
        achieved = [_achieved_text(figures[m]) if m in figures else "-" for m in METRICS]
        sources = {figures[r]["source"] for r in RESOURCES if figures[r]["source"]}
        rows.append([entry["name"], "planned", *planned, ""])
        rows.append(["", "achieved", *achieved, ", ".join(SOURCES[s] for s in sorted(sources)) or "-"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) if i in (0, 1, len(header) - 1) else cell.rjust(w)
                      for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in rows]


def _achieved_text(figure: dict) -> str:
    return _text(figure["achieved"]) + ("*" if figure["flagged"] else "")


def _text(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


def _flag_line(entry: dict) -> str:
    difference = "not planned" if entry["difference"] is None else f"{entry['difference']:+.1%}"
    return (f"{entry['process']} {LABELS[entry['metric']]}: {_text(entry['achieved'])} "
            f"({SOURCES[entry['source']]}), planned {_text(entry['planned'])} ({difference})")


def _latency_line(latency: dict) -> str:
    figure = latency["figure"]
    planned = f"planned {_text(figure['planned'])}"
    if latency["simulated_cycles"] is not None:
        planned += f" (ming's model; its cycle-level simulation {_text(latency['simulated_cycles'])})"
    cosim = latency["cosim"]
    if figure["achieved"] is not None:
        difference = "" if figure["difference"] is None else f", {figure['difference']:+.1%}"
        measured = (f"C/RTL co-simulation ({cosim['rtl']}) {_achieved_text(figure)} (min "
                    f"{_text(cosim['latency']['min'])}, avg {_text(cosim['latency']['avg'])}{difference})")
    elif cosim is not None:
        measured = f"C/RTL co-simulation ({cosim['rtl']}) {cosim['status']}: not compared"
    else:
        measured = "no C/RTL co-simulation: not compared"
    estimate = latency["csynth_estimate"]
    csynth = (f"; C synthesis's static estimate {_text(estimate)}, not the comparison (a dataflow design's latency "
              f"is known only from co-simulation, UG1399)" if estimate is not None else "")
    return f"latency, cycles per image: {planned}, {measured}{csynth}"


def _clock_line(clock: dict) -> str:
    parts = [f"target {clock['target_ns']:g} ns" if clock["target_ns"] is not None else "target unknown"]
    if clock["hls_estimated_ns"] is not None:
        parts.append(f"C synthesis estimate {clock['hls_estimated_ns']:g} ns")
    if clock["wns_ns"] is not None:
        parts.append(f"post-route WNS {clock['wns_ns']:g} ns")
    return f"clock: {', '.join(parts)}: {'missed' if clock['missed'] else 'met'}"
