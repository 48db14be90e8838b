"""`ming compare OUT`: a build's plan (OUT/report.json) against what Vitis HLS and Vivado made of it (the reports
as vendor_reports.py reads them).

Like is compared with like. Throughput: a process's planned cycles per image (report.json `nodes[].cycles`) and the
design's `totals.throughput_cycles` against the initiation interval C synthesis schedules (Interval-max of the
module's and of the top's SummaryOfOverallLatency); II against the pipelined loop's PipelineII. Latency: ming's
`totals.cycles` (the cycle-level simulation's; the model's `totals.estimated_cycles` beside it) against the latency
C/RTL co-simulation measured, never against csynth's static latency, which for a dataflow design is only an
estimate (UG1399: the real latency of a dataflow region is known after co-simulation); the csynth figure is shown
beside it, labelled as such. DSP, LUT, FF, BRAM18K and URAM post-route where the hierarchical report holds the
process, else from C synthesis.

What compare reads of report.json is checked as it is read: anything but what ming writes is one line naming
the field, and no report can make compare raise anything but a MingError.
"""


from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from . import calibration
from .calibration import RESOURCES
from .errors import MingError
from .contract.ming_json import json_document
from .vendor_reports import (HIERARCHICAL_REPORT, MAX_FIGURE_DIGITS, TIMING_REPORT, Cosimulation, Implementation,
                             Synthesis, check_inside, excerpt, read_bytes, read_cosimulation, read_implementation,
                             read_synthesis)

METRICS = ("ii", "interval") + RESOURCES
LABELS = {"ii": "II", "interval": "interval", "latency": "latency", "dsp": "DSP", "lut": "LUT", "ff": "FF",
          "bram18k": "BRAM18K", "uram": "URAM"}
TOLERANCE = 0.10
SOURCES = {"csynth": "C synthesis", "post-route": "post-route", "cosim": "C/RTL cosim"}

C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # report.json's cpp_name and top name files in the reports

# run_hls.tcl's steps under Vitis 2025.1 on, and under the vitis_hls of earlier releases
HLS_STEP = "`MING_HLS_STEPS=synth vitis-run --mode hls --tcl run_hls.tcl` (or `vitis_hls -f run_hls.tcl -tclargs synth`)"
COSIM_STEP = "`MING_HLS_STEPS=cosim vitis-run --mode hls --tcl run_hls.tcl` (or `vitis_hls -f run_hls.tcl -tclargs cosim`)"
VIVADO_STEP = "vivado -mode batch -source build_bitstream.tcl"


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
        check_inside(directory, out)
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
        report = json_document(read_bytes(path).decode("utf-8"))
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
            name = excerpt(node["name"]) if isinstance(node.get("name"), str) else f"nodes[{index}]"
            refuse(f"node {name}: {problem}")
    problem = _figures_problem(report["totals"], ("cycles", "throughput_cycles", "estimated_cycles") + RESOURCES)
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
    """ming's latency (its cycle-level simulation's, its model's estimate beside it) against the latency
    co-simulation measured (the worst of its transactions); csynth's static estimate is carried along, not
    compared."""
    totals = report["totals"]
    measured = cosimulation.latency["max"] if cosimulation and cosimulation.status == "Pass" else None
    return {"figure": _figure(totals.get("cycles"), measured, "cosim"),
            "estimated_cycles": totals.get("estimated_cycles"),
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
    planned += " (ming's cycle-level simulation"
    if latency["estimated_cycles"] is not None:
        planned += f"; its model's estimate {_text(latency['estimated_cycles'])}"
    planned += ")"
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
