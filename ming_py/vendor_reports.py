"""The vendor tools' reports in a build directory, read into figures: Vitis HLS's csynth XML (`Synthesis`), its
C/RTL co-simulation report (`Cosimulation`) and Vivado's post-route timing and utilization reports
(`Implementation`). `ming compare` (compare.py) sets them against the plan.

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

Every report is read whole but refused above MAX_REPORT_BYTES, and every figure above MAX_FIGURE_DIGITS digits is
refused with one line naming the file: no report can make compare raise anything but a MingError.
"""

from __future__ import annotations

import os
import re
import stat
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

import defusedxml
import defusedxml.ElementTree as SafeElementTree

from .errors import MingError

MAX_REPORT_BYTES = 64 * 2**20  # the largest report read: csynth.xml of a big design is a few MB, a .rpt less
MAX_FIGURE_DIGITS = 12  # the most digits of a cycle count or resource figure (10^12 cycles: 80 min at 200 MHz)
# The most characters of a report an error quotes: enough to recognise a table row or a figure, too few to carry
# a file's content out through an error
MAX_EXCERPT_CHARS = 80
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



def check_inside(directory: Path, out: Path) -> None:
    """A directory of reports that exists lies inside the build `out` once symbolic links are followed: compare
    reads nothing of another folder's."""
    if not os.path.lexists(directory):
        return
    real, build = directory.resolve(), out.resolve()
    if build not in real.parents:
        raise MingError(f"{directory}: leads out of the build {out} (a symbolic link to {real}); compare reads "
                        f"only reports inside the build: replace the link by the reports themselves")


def read_bytes(path: Path) -> bytes:
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


def excerpt(text: str) -> str:
    """At most MAX_EXCERPT_CHARS of a report's text, for an error to quote."""
    text = " ".join(text.split())
    return text if len(text) <= MAX_EXCERPT_CHARS else text[:MAX_EXCERPT_CHARS] + "..."


def _read_text(path: Path) -> str:
    return read_bytes(path).decode("utf-8", errors="replace")


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
    """The PipelineII of the process's loop, looked for as check_csynth.tcl does: in <function>_Pipeline_<label>,
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
            return None, f"loop {label} is not pipelined (PipelineII '{excerpt(text)}' in {path.name})"
        return ii, None
    return None, f"no loop {label} in {function}_csynth.xml or {function}_Pipeline_*_csynth.xml"


def _xml(path: Path) -> ElementTree.Element:
    """A csynth report's root. Reports have no DTD: one is refused by the parser itself (defusedxml), whatever
    the file's encoding, before any entity is expanded or fetched."""
    try:
        return SafeElementTree.fromstring(read_bytes(path), forbid_dtd=True)
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
        raise MingError(f"{path}: the Design Timing Summary's columns ({excerpt(', '.join(names))}) have no WNS(ns) "
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
            rows[site] = _parse_number(cells[1], f"{path}: {excerpt(site)}")
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
            raise MingError(f"{path}: a row of {len(cells)} cells under {len(columns)} columns: {excerpt(line)}")
        named = dict(zip(columns, cells))
        instance = named["Instance"][1:] if named["Instance"].startswith(" ") else named["Instance"]
        rows.append(HierarchyRow(instance=instance.strip(), module=named["Module"].strip(),
                                 depth=len(instance) - len(instance.lstrip()),
                                 figures=_hierarchy_figures(named, f"{path}: {excerpt(instance)}")))
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

