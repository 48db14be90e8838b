"""`ming compare`'s readers on reports Vitis HLS and Vivado wrote for public projects (tests/data/vendor_reports/public,
sources and licences in its README): every figure compare takes from them equals the file's own, read by hand, and a
report that lacks a figure degrades to a note or an unknown, never to a traceback."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from ming_py.vendor_reports import (design_wns, hierarchy_rows, module_figures, read_synthesis,
                                    whole_design_utilization)
from ming_py.errors import MingError

PUBLIC = Path(__file__).resolve().parent / "data" / "vendor_reports" / "public"
FINN, HLS4ML = PUBLIC / "finn", PUBLIC / "hls4ml"
INSTRUMENT = "instrument_34u_16u_1u_1u_ap_uint_392_ap_uint_8_s"


def ming(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ming_py.cli", *map(str, args)], capture_output=True, text=True)


def figures_of(path: Path) -> dict:
    return module_figures(ElementTree.parse(path).getroot(), path)


def a_report_with(*functions: str) -> dict:
    """The report.json entries read_synthesis looks at, for processes of these C++ names."""
    return {"cpp_name": "public", "top": "top", "totals": {},
            "nodes": [{"name": f, "cpp_name": f, "pipeline": {"loop": "loop", "ii": 1}} for f in functions]}


# --- Vitis HLS csynth reports ------------------------------------------------------------------------------

def test_a_dataflow_top_of_vivado_hls_2020_gives_its_interval_not_its_latency():
    # <Worst-caseLatency>10, <DataflowPipelineThroughput>8, <Interval-min>8, <Interval-max>8, <DSP48E>73
    assert figures_of(HLS4ML / "myproject_csynth.xml") == {
        "interval": 8, "latency": 10, "dsp": 73, "lut": 2532, "ff": 7969, "bram18k": 0, "uram": 0}


def test_a_dataflow_top_of_vitis_hls_2022_gives_its_interval_not_its_latency():
    # <Worst-caseLatency>3, <Interval-max>1; <DSP> written after <URAM> in this version
    assert figures_of(FINN / "csynth.xml") == {
        "interval": 1, "latency": 3, "dsp": 0, "lut": 2227, "ff": 1654, "bram18k": 0, "uram": 0}


@pytest.mark.parametrize("module, interval, latency, lut, ff", [
    (INSTRUMENT, 1, 2, 1601, 847),  # pipelined (yes(flp)): PipelineInitiationInterval 1 = Interval-max 1
    ("entry_proc", 0, 0, 6, 2),  # not pipelined, latency 0: Interval-max 0
])
def test_csynth_xml_module_information_agrees_with_the_modules_own_reports(tmp_path, module, interval, latency, lut,
                                                                          ff):
    own = figures_of(FINN / f"{module}_csynth.xml")
    assert own == {"interval": interval, "latency": latency, "dsp": 0, "lut": lut, "ff": ff, "bram18k": 0,
                   "uram": 0}
    report_dir = tmp_path / "report"
    report_dir.mkdir()
    shutil.copy(FINN / "csynth.xml", report_dir / "csynth.xml")  # the module's own report left out
    synthesis = read_synthesis(report_dir, a_report_with(module))
    assert synthesis.processes[module] == {"ii": None} | own
    assert synthesis.notes == (f"no {report_dir / f'{module}_csynth.xml'} for process {module}: its interval and "
                               f"area from csynth.xml's ModuleInformation, its II unknown",)
    assert synthesis.target_ns == 3.3 and synthesis.estimated_ns == 2.351


def test_a_process_in_no_report_at_all_is_a_note_and_unknown(tmp_path):
    report_dir = tmp_path / "report"
    report_dir.mkdir()
    shutil.copy(HLS4ML / "myproject_csynth.xml", report_dir / "csynth.xml")  # 2020.1: no ModuleInformation
    synthesis = read_synthesis(report_dir, a_report_with("dense_1"))
    assert synthesis.processes == {}
    assert synthesis.loop_problems == {"dense_1": "no report dense_1_csynth.xml"}
    assert synthesis.notes == (f"no {report_dir / 'dense_1_csynth.xml'} for process dense_1",)
    assert synthesis.top["interval"] == 8 and synthesis.estimated_ns == 4.049


# --- Vivado reports ----------------------------------------------------------------------------------------

def test_the_wns_of_a_vivado_2022_timing_summary():
    assert design_wns(FINN / "timing_summary_routed.rpt") == 0.293


def test_a_versal_utilization_report_names_its_registers_and_dsps_its_own_way():
    # Registers 13948, CLB LUTs 7849, Block RAM Tile 11.5 (= 23 RAMB18), URAM 0, DSP Slices 0
    assert whole_design_utilization(FINN / "full_util_routed.rpt") == {
        "lut": 7849, "ff": 13948, "bram18k": 23.0, "uram": 0, "dsp": 0}


def test_a_7_series_utilization_report_has_no_uram_row():
    # Slice LUTs 1526, Slice Registers 2428, Block RAM Tile 0, DSPs 66; a 7-series part has no URAM
    assert whole_design_utilization(HLS4ML / "vivado_synth.rpt") == {
        "lut": 1526, "ff": 2428, "bram18k": 0, "uram": None, "dsp": 66}


@pytest.mark.parametrize("path", [FINN / "full_util_routed.rpt", HLS4ML / "vivado_synth.rpt",
                                  FINN / "timing_summary_routed.rpt"], ids=lambda p: p.name)
def test_a_report_that_is_not_hierarchical_is_refused_as_such(path):
    with pytest.raises(MingError, match=r"no utilization table with Instance and Module columns"):
        hierarchy_rows(path)


def test_a_utilization_report_is_no_timing_summary(tmp_path):
    with pytest.raises(MingError, match=r"no Design Timing Summary table with a WNS\(ns\) column"):
        design_wns(FINN / "full_util_routed.rpt")


# --- the whole command -------------------------------------------------------------------------------------

@pytest.fixture
def out_with_public_reports(example_build, tmp_path) -> Path:
    """The example build with FINN's csynth.xml, timing summary and utilization where compare looks for them."""
    out = tmp_path / "out"
    shutil.copytree(example_build, out)
    report_dir = out / "hls" / "tiny_cnn_prj" / "solution1" / "syn" / "report"
    vivado = out / "vivado" / "tiny_cnn_vivado"
    report_dir.mkdir(parents=True)
    vivado.mkdir(parents=True)
    shutil.copy(FINN / "csynth.xml", report_dir / "csynth.xml")
    shutil.copy(FINN / "timing_summary_routed.rpt", vivado / "timing_summary_routed.rpt")
    shutil.copy(FINN / "full_util_routed.rpt", vivado / "utilization_routed.rpt")
    return out


def test_compare_prints_the_public_reports_figures_and_notes_what_they_lack(out_with_public_reports):
    out = out_with_public_reports
    result = ming("compare", out)
    print(result.stdout)
    assert result.returncode == 1, result.stderr  # no process's loop in these reports: every II missed
    report = json.loads((out / "report.json").read_text())
    lines = result.stdout.splitlines()
    total = lines[next(i for i, line in enumerate(lines) if line.startswith("total ")) + 1].split()
    assert total[:3] == ["achieved", "-", "1*"]  # the top's Interval-max 1 against throughput_cycles
    assert (f"latency, cycles per image: planned {report['totals']['cycles']:,} (ming's cycle-level simulation; its "
            f"model's estimate {report['totals']['estimated_cycles']:,}), no C/RTL co-simulation: not compared; C "
            f"synthesis's static estimate 3, not the comparison") in result.stdout
    assert "clock: target 3.3 ns, C synthesis estimate 2.351 ns, post-route WNS 0.293 ns: met" in result.stdout
    assert ("post-route, whole design (with the DMA and interconnect): LUT 7,849, FF 13,948, BRAM18K 23, URAM 0, "
            "DSP 0") in result.stdout
    data = json.loads(ming("compare", out, "--json").stdout)
    assert data["totals"]["figures"]["interval"] == {
        "planned": report["totals"]["throughput_cycles"], "achieved": 1, "source": "csynth",
        "difference": round((1 - report["totals"]["throughput_cycles"]) / report["totals"]["throughput_cycles"], 4),
        "flagged": True}
    assert data["latency"]["csynth_estimate"] == 3 and data["latency"]["figure"]["achieved"] is None
    assert data["missed"] == [f"{node['name']}: no report {node['cpp_name']}_csynth.xml" for node in report["nodes"]]
    assert len(data["notes"]) == len(report["nodes"]) + 2  # each process's report, the cosim report, the hierarchy
