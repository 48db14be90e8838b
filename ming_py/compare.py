"""`ming compare OUT`: a build's plan (OUT/report.json) against what Vitis HLS and Vivado made of it.

Where the vendor tools leave their reports in a build directory:

    OUT/hls/<model>_prj/solution1/syn/report/      `vitis_hls -f run_hls.tcl -tclargs synth` (in OUT/hls)
        csynth.xml                                  the top: target and estimated clock, latency, area
        <function>_csynth.xml                       per module: a process's latency and area
        <function>_Pipeline_<loop>_csynth.xml       the module Vitis HLS may make of a process's pipelined loop
    OUT/vivado/<model>_vivado/                      `vivado -mode batch -source build_bitstream.tcl` (in OUT/vivado)
        timing_summary_routed.rpt                   WNS in its Design Timing Summary
        utilization_hierarchical_routed.rpt         post-route resources per instance
        utilization_routed.rpt                      post-route resources of the whole design

Per process: II (the pipelined loop's PipelineII) and cycles (the module's worst-case latency) from C synthesis;
DSP, LUT, FF, BRAM18K and URAM post-route where the hierarchical report holds the process, else from C synthesis.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

from . import calibration
from .calibration import RESOURCES
from .errors import MingError

METRICS = ("ii", "cycles") + RESOURCES
LABELS = {"ii": "II", "cycles": "cycles", "dsp": "DSP", "lut": "LUT", "ff": "FF", "bram18k": "BRAM18K",
          "uram": "URAM"}
TOLERANCE = 0.10
SOURCES = {"csynth": "C synthesis", "post-route": "post-route"}

HLS_STEP = "vitis_hls -f run_hls.tcl -tclargs synth"
VIVADO_STEP = "vivado -mode batch -source build_bitstream.tcl"
TIMING_REPORT = "timing_summary_routed.rpt"
UTILIZATION_REPORT = "utilization_routed.rpt"
HIERARCHICAL_REPORT = "utilization_hierarchical_routed.rpt"
ACCELERATOR_CELL = "accelerator"  # the block design's cell of the accelerator (emit/vivado.py)

# csynth's AreaEstimates/Resources elements; Vitis HLS versions name the DSPs DSP48E or DSP
AREA_ELEMENTS = {"dsp": ("DSP", "DSP48E"), "lut": ("LUT",), "ff": ("FF",), "bram18k": ("BRAM_18K",),
                 "uram": ("URAM",)}
# report_utilization's Site Types (UltraScale+, 7 series) and how many BRAM18K one counts for
SITES = {"lut": (("CLB LUTs", "Slice LUTs"), 1), "ff": (("CLB Registers", "Slice Registers"), 1),
         "bram18k": (("Block RAM Tile",), 2), "uram": (("URAM",), 1), "dsp": (("DSPs",), 1)}


@dataclass(frozen=True)
class Synthesis:
    """What the csynth reports hold: figures by process cpp_name, each a dict metric -> value (None: unknown)."""

    directory: Path
    target_ns: float | None
    estimated_ns: float | None  # the slowest estimate of the top and the processes' modules
    top: dict
    processes: dict[str, dict]
    loop_problems: dict[str, str]  # cpp_name -> why its pipelined loop has no II
    notes: tuple[str, ...]


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


# --- the comparison ----------------------------------------------------------------------------------------

def compare_build(out: str | Path) -> Comparison:
    out = Path(out)
    report = load_report(out)
    model = report["cpp_name"]
    hls_dir = out / "hls" / f"{model}_prj" / "solution1" / "syn" / "report"
    vivado_dir = out / "vivado" / f"{model}_vivado"
    synthesis = read_synthesis(hls_dir, report)
    implementation = read_implementation(vivado_dir, report)
    if synthesis is None and implementation is None:
        raise MingError(f"{out}: no vendor reports to compare: neither {hls_dir / 'csynth.xml'} (run `{HLS_STEP}` in "
                        f"{out / 'hls'}) nor {vivado_dir / TIMING_REPORT} (run `{VIVADO_STEP}` in {out / 'vivado'})")
    notes = _missing_notes(out, hls_dir, vivado_dir, synthesis, implementation)
    result = _result(out, report, synthesis, implementation, notes)
    return Comparison(report, synthesis, implementation, result)


def load_report(out: Path) -> dict:
    path = out / "report.json"
    if not path.is_file():
        raise MingError(f"{out}: not a ming build directory (no report.json); run `ming build` first")
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise MingError(f"{path}: not a report.json ming wrote ({' '.join(str(exc).split())})") from None
    if not isinstance(report, dict):
        raise MingError(f"{path}: not a report.json ming wrote (not a JSON object)")
    missing = [key for key in ("cpp_name", "top", "nodes", "totals") if key not in report]
    if missing:
        raise MingError(f"{path}: not a report.json ming wrote (no {', '.join(missing)})")
    return report


def _missing_notes(out: Path, hls_dir: Path, vivado_dir: Path, synthesis: Synthesis | None,
                   implementation: Implementation | None) -> list[str]:
    notes = []
    if synthesis is None:
        notes.append(f"no C synthesis reports ({hls_dir / 'csynth.xml'}): II and cycles not compared; run "
                     f"`{HLS_STEP}` in {out / 'hls'}")
    else:
        notes += synthesis.notes
    if implementation is None:
        notes.append(f"no post-route reports ({vivado_dir / TIMING_REPORT}): resources from C synthesis; run "
                     f"`{VIVADO_STEP}` in {out / 'vivado'}")
    else:
        notes += implementation.notes
    return notes


def _result(out: Path, report: dict, synthesis: Synthesis | None, implementation: Implementation | None,
            notes: list[str]) -> dict:
    processes = [_process_entry(node, synthesis, implementation) for node in report["nodes"]]
    totals = _totals_entry(report, synthesis, implementation)
    clock = _clock(report, synthesis, implementation)
    return {
        "build": str(out), "model": report.get("model"), "board": report.get("board"), "part": report.get("part"),
        "clock_mhz": report.get("clock_mhz"), "tolerance": TOLERANCE,
        "reports": {"hls": str(synthesis.directory) if synthesis else None,
                    "vivado": str(implementation.directory) if implementation else None},
        "notes": notes, "clock": clock, "processes": processes, "totals": totals,
        "whole_design": implementation.whole_design if implementation else None,
        "flagged": _flagged(processes, totals),
        "missed": _missed_ii(report, synthesis) + ([clock["missed"]] if clock["missed"] else []),
    }


def _process_entry(node: dict, synthesis: Synthesis | None, implementation: Implementation | None) -> dict:
    function = node["cpp_name"]
    synthesized = synthesis.processes.get(function, {}) if synthesis else {}
    routed = implementation.processes.get(function) if implementation else None
    planned = {"ii": (node.get("pipeline") or {}).get("ii")} | {m: node.get(m) for m in METRICS if m != "ii"}
    figures = {}
    for metric in METRICS:
        if metric in RESOURCES and routed is not None:
            achieved, source = routed.get(metric), "post-route"
        else:
            achieved, source = synthesized.get(metric), "csynth" if synthesis else None
        figures[metric] = _figure(planned[metric], achieved, source)
    return {"name": node["name"], "cpp_name": function, "kind": node.get("kind"), "figures": figures}


def _totals_entry(report: dict, synthesis: Synthesis | None, implementation: Implementation | None) -> dict:
    totals = report["totals"]
    figures = {"cycles": _figure(totals.get("cycles"), synthesis.top.get("cycles") if synthesis else None,
                                 "csynth" if synthesis else None)}
    accelerator = implementation.accelerator if implementation else None
    for resource in RESOURCES:
        if accelerator is not None:
            figures[resource] = _figure(totals.get(resource), accelerator.get(resource), "post-route")
        else:
            figures[resource] = _figure(totals.get(resource), synthesis.top.get(resource) if synthesis else None,
                                        "csynth" if synthesis else None)
    return {"name": "total", "figures": figures}


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


def _flagged(processes: list[dict], totals: dict) -> list[dict]:
    return [{"process": entry["name"], "metric": metric} | {key: figure[key] for key in
                                                           ("planned", "achieved", "source", "difference")}
            for entry in processes + [totals] for metric, figure in entry["figures"].items() if figure["flagged"]]


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
    if target is None and report.get("clock_mhz"):
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


# --- Vitis HLS: csynth reports -----------------------------------------------------------------------------

def read_synthesis(directory: Path, report: dict) -> Synthesis | None:
    top_path = directory / "csynth.xml"
    if not top_path.is_file():
        return None
    top = _xml(top_path)
    target = _number(top, "UserAssignments/TargetClockPeriod")
    periods = [_number(top, "PerformanceEstimates/SummaryOfTimingAnalysis/EstimatedClockPeriod")]
    processes, loop_problems, notes = {}, {}, []
    for node in report["nodes"]:
        function = node["cpp_name"]
        own = directory / f"{function}_csynth.xml"
        if not own.is_file():
            loop_problems[function] = f"no report {own.name}"
            notes.append(f"no {own} for process {node['name']}")
            continue
        module = _xml(own)
        periods.append(_number(module, "PerformanceEstimates/SummaryOfTimingAnalysis/EstimatedClockPeriod"))
        ii, problem = _loop_ii(directory, function, node["pipeline"]["loop"])
        if problem:
            loop_problems[function] = problem
        processes[function] = {"ii": ii} | _latency_and_area(module)
    known = [period for period in periods if period is not None]
    return Synthesis(directory=directory, target_ns=target, estimated_ns=max(known) if known else None,
                     top=_latency_and_area(top), processes=processes, loop_problems=loop_problems,
                     notes=tuple(notes))


def _latency_and_area(root: ElementTree.Element) -> dict:
    figures = {"cycles": _number(root, "PerformanceEstimates/SummaryOfOverallLatency/Worst-caseLatency")}
    for resource, names in AREA_ELEMENTS.items():
        values = [_number(root, f"AreaEstimates/Resources/{name}") for name in names]
        figures[resource] = next((value for value in values if value is not None), None)
    return figures


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
        ii = _parse_number(text)
        if ii is None:
            return None, f"loop {label} is not pipelined (PipelineII '{text}' in {path.name})"
        return ii, None
    return None, f"no loop {label} in {function}_csynth.xml or {function}_Pipeline_*_csynth.xml"


def _xml(path: Path) -> ElementTree.Element:
    """A csynth report's root. Reports have no DTD; one with entity declarations is refused unread."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise MingError(f"{path}: cannot read it ({exc.strerror})") from None
    if b"<!ENTITY" in data or b"<!DOCTYPE" in data:
        raise MingError(f"{path}: declares a DTD or entities, which no csynth report does")
    try:
        return ElementTree.fromstring(data)
    except ElementTree.ParseError as exc:
        raise MingError(f"{path}: not a csynth XML report ({exc})") from None


def _number(root: ElementTree.Element, path: str) -> int | float | None:
    return _parse_number((root.findtext(path) or "").strip())


def _parse_number(text: str) -> int | float | None:
    """An integer or decimal figure; None for undef, '-' and the like."""
    text = text.replace(",", "")
    if re.fullmatch(r"[-+]?\d+", text):
        return int(text)
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+)([eE][-+]?\d+)?", text):
        return float(text)
    return None


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


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise MingError(f"{path}: cannot read it ({exc.strerror})") from None


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
    wns = dict(zip(names, values))["WNS(ns)"]
    return float(wns) if _parse_number(wns) is not None else None


def whole_design_utilization(path: Path) -> dict:
    """Used LUT, FF, BRAM18K, URAM and DSP of the whole routed design (report_utilization's Site Type rows)."""
    rows = {}
    for line in _read_text(path).splitlines():
        cells = [cell.strip() for cell in line.strip().split("|")[1:-1]]
        if len(cells) >= 3 and cells[0].rstrip("*").strip() not in rows:
            rows[cells[0].rstrip("*").strip()] = _parse_number(cells[1])
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
    columns = [cell.strip() for cell in lines[head].strip().split("|")[1:-1]]
    rows = []
    for line in lines[head + 1:]:
        if line.startswith("+"):
            continue
        if not line.startswith("|"):
            break
        cells = line.split("|")[1:-1]
        if len(cells) != len(columns):
            raise MingError(f"{path}: a row of {len(cells)} cells under {len(columns)} columns: {line.strip()}")
        named = dict(zip(columns, cells))
        instance = named["Instance"][1:] if named["Instance"].startswith(" ") else named["Instance"]
        rows.append(HierarchyRow(instance=instance.strip(), module=named["Module"].strip(),
                                 depth=len(instance) - len(instance.lstrip()), figures=_hierarchy_figures(named)))
    return rows


def _is_hierarchy_head(line: str) -> bool:
    cells = [cell.strip() for cell in line.strip().split("|")]
    return "Instance" in cells and "Module" in cells


def _hierarchy_figures(named: dict[str, str]) -> dict:
    def column(*names: str):
        return next((_parse_number(named[name].strip()) for name in names if name in named), None)

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

def table(comparison: Comparison) -> str:
    result = comparison.result
    lines = [f"{result['model']} on {result['board']} ({result['part']}) at {result['clock_mhz']:g} MHz: planned "
             f"(report.json) against achieved"]
    for tool, label in (("hls", "C synthesis"), ("vivado", "post-route")):
        if result["reports"][tool]:
            lines.append(f"{label}: {result['reports'][tool]}")
    lines += [f"note: {note}" for note in result["notes"]]
    lines += ["", *_figures_table(result), "", _clock_line(result["clock"])]
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


def _clock_line(clock: dict) -> str:
    parts = [f"target {clock['target_ns']:g} ns" if clock["target_ns"] is not None else "target unknown"]
    if clock["hls_estimated_ns"] is not None:
        parts.append(f"C synthesis estimate {clock['hls_estimated_ns']:g} ns")
    if clock["wns_ns"] is not None:
        parts.append(f"post-route WNS {clock['wns_ns']:g} ns")
    return f"clock: {', '.join(parts)}: {'missed' if clock['missed'] else 'met'}"
