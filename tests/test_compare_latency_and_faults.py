"""`ming compare`: latency against C/RTL co-simulation only (csynth's static latency shown as its estimate), and
every malformed report or report.json is one line and exit code 2, never a traceback."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ming_py import vendor_reports
from ming_py.vendor_reports import read_cosimulation

FIXTURES = Path(__file__).resolve().parent / "data" / "vendor_reports"
sys.path.insert(0, str(FIXTURES))

import make_reports  # noqa: E402

REPORT_DIR, PROJECT_DIR, COSIM = make_reports.REPORT_DIR, make_reports.PROJECT_DIR, make_reports.COSIM_REPORT


def ming(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ming_py.cli", *map(str, args)], capture_output=True, text=True)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ming: error: "), result.stderr
    return lines[0]


@pytest.fixture
def out(example_build, tmp_path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(example_build, out)
    for tool in ("hls", "vivado"):
        shutil.copytree(FIXTURES / tool, out / tool, dirs_exist_ok=True)
    return out


def compare_json(out: Path) -> dict:
    result = ming("compare", out, "--json")
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def replace_in(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


# --- latency: ming's against co-simulation's ---------------------------------------------------------------

def test_the_cosim_report_gives_the_passing_rows_latency_and_na_interval():
    cosim = read_cosimulation(FIXTURES / COSIM)
    assert (cosim.rtl, cosim.status) == ("Verilog", "Pass")
    assert cosim.latency == {"min": 503, "avg": 503, "max": 503}
    assert cosim.interval == {"min": None, "avg": None, "max": None}


def test_latency_is_compared_with_cosim_and_csynth_latency_only_shown(out):
    report = json.loads((out / "report.json").read_text())
    data = compare_json(out)
    planned = report["totals"]["cycles"]
    assert data["latency"]["figure"] == {
        "planned": planned, "achieved": make_reports.COSIM_LATENCY, "source": "cosim",
        "difference": round((make_reports.COSIM_LATENCY - planned) / planned, 4),
        "flagged": abs(make_reports.COSIM_LATENCY - planned) > 0.1 * planned}
    assert data["latency"]["csynth_estimate"] == make_reports.TOP_CSYNTH["latency"]
    assert data["latency"]["estimated_cycles"] == report["totals"]["estimated_cycles"]
    assert data["totals"]["figures"]["interval"]["planned"] == report["totals"]["throughput_cycles"]
    assert data["totals"]["figures"]["interval"]["achieved"] == make_reports.TOP_CSYNTH["interval"]
    text = ming("compare", out).stdout
    assert (f"C/RTL co-simulation (Verilog) {make_reports.COSIM_LATENCY} (min {make_reports.COSIM_LATENCY}, avg "
            f"{make_reports.COSIM_LATENCY}, ") in text
    assert (f"C synthesis's static estimate {make_reports.TOP_CSYNTH['latency']}, not the comparison") in text


def test_a_cosim_latency_over_ten_percent_off_is_flagged(out):
    planned = json.loads((out / "report.json").read_text())["totals"]["cycles"]
    slow = int(planned * 1.5)
    path = out / COSIM
    path.write_text(path.read_text().replace(f"{make_reports.COSIM_LATENCY:>12}|", f"{slow:>12}|"))
    data = compare_json(out)
    assert {"process": "total", "metric": "latency", "planned": planned, "achieved": slow, "source": "cosim",
            "difference": round((slow - planned) / planned, 4)} in data["flagged"]
    assert f"  total latency: {slow:,} (C/RTL cosim), planned {planned:,} (+" in ming("compare", out).stdout


def test_a_cosim_that_failed_is_a_note_and_no_latency(out):
    replace_in(out / COSIM, "| Verilog|    Pass|", "| Verilog|    Fail|")
    data = compare_json(out)
    assert data["latency"]["figure"]["achieved"] is None
    assert f"C/RTL co-simulation did not pass (Verilog: Fail in {out / COSIM}): latency not compared" in data["notes"]


def test_without_a_cosim_report_latency_is_not_compared(out):
    (out / COSIM).unlink()
    data = compare_json(out)
    assert data["latency"]["figure"]["achieved"] is None and data["latency"]["cosim"] is None
    assert data["notes"] == [f"no C/RTL co-simulation report ({out / COSIM}): latency not compared; run "
                             f"`MING_HLS_STEPS=cosim vitis-run --mode hls --tcl run_hls.tcl` (or `vitis_hls -f run_hls.tcl -tclargs cosim`) in {out / 'hls'}"]


def test_a_cosim_report_alone_is_compared(out):
    shutil.rmtree(out / "vivado")
    shutil.rmtree(out / REPORT_DIR)
    data = compare_json(out)
    assert data["latency"]["figure"]["achieved"] == make_reports.COSIM_LATENCY
    assert data["reports"] == {"hls": None, "cosim": str(out / COSIM), "vivado": None}


# --- faults: one line, exit code 2 -------------------------------------------------------------------------

HUGE = "9" * 400


@pytest.mark.parametrize("where, old, new", [
    (REPORT_DIR / "csynth.xml", f"<Interval-max>{make_reports.TOP_CSYNTH['interval']}<", f"<Interval-max>{HUGE}<"),
    (REPORT_DIR / "conv3_csynth.xml", "<PipelineII>2</PipelineII>", f"<PipelineII>{HUGE}</PipelineII>"),
    (REPORT_DIR / "csynth.xml", "<EstimatedClockPeriod>4.381<", f"<EstimatedClockPeriod>0.{HUGE}e999<"),
    (PROJECT_DIR / "timing_summary_routed.rpt", "  0.214  ", f"  {HUGE}.5  "),
    (PROJECT_DIR / "utilization_routed.rpt", "| DSPs ", "| DSPs "),  # replaced below: the DSP count
    (COSIM, f"{make_reports.COSIM_LATENCY:>12}|", f"{HUGE}|"),
], ids=["interval", "ii", "exponent", "wns", "site", "cosim"])
def test_a_figure_of_400_digits_is_one_line_naming_the_file(out, where, old, new):
    path = out / where
    if where.name == "utilization_routed.rpt":
        lines = [line if not line.startswith("| DSPs ") else line.replace(line.split("|")[2], f" {HUGE} ")
                 for line in path.read_text().splitlines()]
        path.write_text("\n".join(lines))
    elif where == COSIM:
        path.write_text(path.read_text().replace(old, new, 1))
    else:
        replace_in(path, old, new)
    line = one_line_error(ming("compare", out))
    assert f"{path}: " in line and "has more than 12 digits" in line


def test_a_hierarchy_row_figure_of_400_digits_is_one_line(out):
    path = out / PROJECT_DIR / vendor_reports.HIERARCHICAL_REPORT
    lines = path.read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if " conv1_U0 " in line)
    cells = lines[row].split("|")
    cells[3] = " " + HUGE + " "
    lines[row] = "|".join(cells)
    path.write_text("\n".join(lines))
    line = one_line_error(ming("compare", out))
    assert f"{path}: conv1_U0: Total LUTs: the figure 999" in line


def test_a_timing_summary_whose_columns_run_together_is_one_line(out):
    path = out / PROJECT_DIR / "timing_summary_routed.rpt"
    text = path.read_text()
    head = next(line for line in text.splitlines() if "WNS(ns)" in line)
    path.write_text(text.replace(head, head.replace("WNS(ns)  TNS(ns)", "WNS(ns) TNS(ns)")))
    line = one_line_error(ming("compare", out))
    assert line == f"ming: error: {path}: the Design Timing Summary has 11 columns and 12 figures"


def test_a_timing_summary_whose_wns_column_is_named_otherwise_is_one_line(out):
    path = out / PROJECT_DIR / "timing_summary_routed.rpt"
    text = path.read_text()
    head = next(line for line in text.splitlines() if "WNS(ns)" in line)
    path.write_text(text.replace(head, head.replace("WNS(ns)", "WNS(ns)_setup")))
    line = one_line_error(ming("compare", out))
    assert line.startswith(f"ming: error: {path}: the Design Timing Summary's columns (WNS(ns)_setup, TNS(ns), ")
    assert line.endswith("have no WNS(ns) of its own (report_timing_summary separates its columns by two spaces)")


def test_a_timing_summary_without_wns_is_one_line(out):
    path = out / PROJECT_DIR / "timing_summary_routed.rpt"
    path.write_text(path.read_text().replace("WNS(ns)", "XNS(ns)"))
    assert "no Design Timing Summary table with a WNS(ns) column" in one_line_error(ming("compare", out))


def test_a_hierarchy_table_whose_instance_column_is_outside_the_bars_is_one_line(out):
    path = out / PROJECT_DIR / vendor_reports.HIERARCHICAL_REPORT
    lines = path.read_text().splitlines()
    head = next(i for i, line in enumerate(lines) if "Instance" in line and "Module" in line)
    lines[head] = lines[head][1:]  # "Instance | Module | ...": a header row without its leading bar
    path.write_text("\n".join(lines))
    line = one_line_error(ming("compare", out))
    assert "no utilization table with Instance and Module columns" in line


@pytest.mark.parametrize("edit, why", [
    (lambda r: r["nodes"][0].pop("pipeline"), "node conv1: no pipeline object"),
    (lambda r: r.update(nodes="conv1"), "nodes is not a list of objects"),
    (lambda r: r["nodes"][1]["pipeline"].update(ii="1"), "node pool1: pipeline.ii is not a number"),
    (lambda r: r["nodes"][2].update(cycles=10 ** 400), "node conv2: cycles is not a number of at most 12 digits"),
    (lambda r: r["nodes"][2].update(cpp_name="../../etc/passwd"), "node conv2: cpp_name is not a C++ name"),
    (lambda r: r["totals"].update(throughput_cycles=[1]), "totals: throughput_cycles is not a number"),
    (lambda r: r.update(totals=[]), "totals is not an object"),
    (lambda r: r.update(top=7), "top is not a C++ name"),
    (lambda r: r["nodes"][3].update(pipeline={"loop": "pixels", "ii": True}), "node conv3: pipeline.ii is not a"),
], ids=["no_pipeline", "nodes_string", "ii_string", "huge_cycles", "path_name", "totals_list", "totals_not_object",
        "top_number", "ii_bool"])
def test_an_edited_report_json_is_one_line_naming_the_field(out, edit, why):
    path = out / "report.json"
    report = json.loads(path.read_text())
    edit(report)
    path.write_text(json.dumps(report))
    line = one_line_error(ming("compare", out))
    assert line.startswith(f"ming: error: {path}: not a report.json ming wrote ({why}"), line


def test_a_report_json_of_a_400_digit_number_is_one_line(out):
    path = out / "report.json"
    path.write_text(path.read_text().replace('"clock_mhz": 200.0', f'"clock_mhz": {HUGE}', 1))
    result = ming("compare", out)
    assert result.returncode in (0, 1), result.stderr  # clock_mhz is only printed: shown as unknown
    assert "at an unknown clock" in result.stdout


@pytest.mark.parametrize("where", [REPORT_DIR / "csynth.xml", PROJECT_DIR / "timing_summary_routed.rpt", COSIM,
                                   Path("report.json")], ids=lambda p: p.name)
def test_a_report_over_the_size_limit_is_refused_unread(out, where):
    path = out / where
    with path.open("ab") as stream:  # a sparse file: large to stat, nothing written to disk
        stream.truncate(vendor_reports.MAX_REPORT_BYTES + 1)
    line = one_line_error(ming("compare", out))
    assert line == (f"ming: error: {path}: {vendor_reports.MAX_REPORT_BYTES + 1:,} bytes, more than the 64 MiB any report "
                    f"of the vendor tools or ming has; not read")
