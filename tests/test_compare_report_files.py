"""`ming compare OUT` reads only reports inside OUT: never through a symbolic link, never a directory that leads
out of the build; what an error quotes of a report is a bounded excerpt; report.json's names become paths only
as C identifiers; and the XML reports are parsed with entities and DTDs refused (defusedxml), in any encoding."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ming_py import vendor_reports

VENDOR_REPORTS = Path(__file__).resolve().parent / "data" / "vendor_reports"
HLS_REPORTS = Path("hls") / "tiny_cnn_prj" / "solution1" / "syn" / "report"
VIVADO_REPORTS = Path("vivado") / "tiny_cnn_vivado"
SECRET = "the-secret-line-outside-the-build"

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<profile><UserAssignments><TargetClockPeriod>&lol9;</TargetClockPeriod></UserAssignments></profile>
"""
EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE profile [<!ENTITY secret SYSTEM "file://{path}">]>
<profile><UserAssignments><TargetClockPeriod>&secret;</TargetClockPeriod></UserAssignments></profile>
"""


def ming(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ming_py.cli", *map(str, args)], capture_output=True, text=True)


def one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ming: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def out(example_build, tmp_path) -> Path:
    """A copy of the example build with the vendor reports where Vitis HLS and build_bitstream.tcl leave them."""
    out = tmp_path / "build" / "out"
    shutil.copytree(example_build, out)
    for tool in ("hls", "vivado"):
        shutil.copytree(VENDOR_REPORTS / tool, out / tool, dirs_exist_ok=True)
    return out


@pytest.fixture
def secret(tmp_path) -> Path:
    """A file outside the build shaped like a hierarchical utilization table whose second row is malformed, so
    that a reader that followed a link to it would quote that row."""
    path = tmp_path / "secret.rpt"
    path.write_text(f"| Instance | Module | Total LUTs |\n| {SECRET} |\n")
    return path


# --- symbolic links and folders outside the build ----------------------------------------------------------------

def test_a_report_that_is_a_symbolic_link_is_refused_unread(out, secret):
    report = out / VIVADO_REPORTS / vendor_reports.HIERARCHICAL_REPORT
    report.unlink()
    report.symlink_to(secret)
    line = one_line_error(ming("compare", out), str(report), "a symbolic link")
    assert SECRET not in line


def test_report_json_that_is_a_symbolic_link_is_refused(out, tmp_path):
    outside = tmp_path / "report.json"
    shutil.move(out / "report.json", outside)
    (out / "report.json").symlink_to(outside)
    one_line_error(ming("compare", out), str(out / "report.json"), "a symbolic link")


@pytest.mark.parametrize("folder", [VIVADO_REPORTS, HLS_REPORTS, Path("hls")])
def test_a_report_folder_leading_out_of_the_build_is_refused(out, tmp_path, folder):
    outside = tmp_path / "elsewhere"
    shutil.move(out / folder, outside)
    (out / folder).symlink_to(outside, target_is_directory=True)
    one_line_error(ming("compare", out), "leads out of the build")


def test_an_error_quotes_a_bounded_excerpt_of_a_report_inside_the_build(out):
    report = out / VIVADO_REPORTS / vendor_reports.HIERARCHICAL_REPORT
    text = report.read_text()
    head = next(line for line in text.splitlines() if "Instance" in line and "Module" in line)
    tail = "x" * 5000 + SECRET
    report.write_text(text.replace(head, head + f"\n| short row | {tail} |", 1))
    line = one_line_error(ming("compare", out), str(report), "a row of 2 cells")
    assert SECRET not in line and "x" * (vendor_reports.MAX_EXCERPT_CHARS + 1) not in line


@pytest.mark.parametrize("field", ["cpp_name", "top"])
def test_report_names_become_paths_only_as_c_identifiers(out, field):
    report = json.loads((out / "report.json").read_text())
    report[field] = "../../../elsewhere"
    (out / "report.json").write_text(json.dumps(report))
    one_line_error(ming("compare", out), f"{field} is not a C++ name")


# --- XML -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_billion_laughs_in_csynth_xml_is_refused(out, encoding):
    csynth = out / HLS_REPORTS / "csynth.xml"
    csynth.write_bytes(BILLION_LAUGHS.replace('"1.0"?>', f'"1.0" encoding="{encoding}"?>').encode(encoding))
    one_line_error(ming("compare", out), str(csynth), "declares a DTD or entities")


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_an_external_entity_in_a_module_report_is_refused(out, secret, encoding):
    module = next((out / HLS_REPORTS).glob("*_Pipeline_*_csynth.xml"))
    text = EXTERNAL_ENTITY.format(path=secret).replace('"1.0"?>', f'"1.0" encoding="{encoding}"?>')
    module.write_bytes(text.encode(encoding))
    line = one_line_error(ming("compare", out), str(module), "declares a DTD or entities")
    assert SECRET not in line
