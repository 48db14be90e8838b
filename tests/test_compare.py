"""`ming compare OUT`: the example build's plan against Vitis HLS and Vivado reports (tests/data/vendor_reports,
written by make_reports.py there), and the calibration file `--write-calibration` writes."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ming_py.calibration import FORMAT, Calibration, fit, load_calibration, planned_by_primitive, write_calibration
from ming_py.compare import HIERARCHICAL_REPORT, LABELS, METRICS, RESOURCES
from ming_py.errors import MingError

FIXTURES = Path(__file__).resolve().parent / "data" / "vendor_reports"
sys.path.insert(0, str(FIXTURES))

import make_reports  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tiny_cnn.onnx"
REPORT_DIR = make_reports.REPORT_DIR
PROJECT_DIR = make_reports.PROJECT_DIR


def ming(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ming_py.cli", *map(str, args)], capture_output=True, text=True)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ming: error: "), result.stderr
    return lines[0]


@pytest.fixture
def bare_out(example_copy) -> Path:
    """A copy of the example build, no vendor report in it."""
    return example_copy


@pytest.fixture
def out(bare_out) -> Path:
    """A copy of the example build with the vendor reports where Vitis HLS and build_bitstream.tcl leave them."""
    for tool in ("hls", "vivado"):
        shutil.copytree(FIXTURES / tool, bare_out / tool, dirs_exist_ok=True)
    return bare_out


def report_of(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def compare_json(out: Path, expected_code: int = 1) -> dict:
    result = ming("compare", out, "--json")
    assert result.returncode == expected_code, result.stderr
    return json.loads(result.stdout)


def replace_in(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


# --- the fixtures -------------------------------------------------------------------------------------------

def test_the_fixture_files_are_those_make_reports_writes():
    written = {path.relative_to(FIXTURES) for path in FIXTURES.rglob("*") if path.is_file()
               and path.suffix in (".xml", ".rpt") and path.relative_to(FIXTURES).parts[0] != "public"}
    expected = make_reports.reports()
    assert written == set(expected)
    for relative, text in expected.items():
        assert (FIXTURES / relative).read_text() == text, relative


def test_the_fixtures_hold_every_process_of_the_example(example_build):
    report = report_of(example_build)
    assert report["cpp_name"] == make_reports.MODEL and report["top"] == make_reports.TOP
    assert [node["cpp_name"] for node in report["nodes"]] == [p.function for p in make_reports.PROCESSES]
    assert [node["pipeline"]["loop"] for node in report["nodes"]] == [p.loop for p in make_reports.PROCESSES]
    hierarchy = (FIXTURES / PROJECT_DIR / HIERARCHICAL_REPORT).read_text()
    for node in report["nodes"]:
        assert (FIXTURES / REPORT_DIR / f"{node['cpp_name']}_csynth.xml").is_file()
        assert re.search(rf"^\|\s+{node['cpp_name']}_U0\s+\|", hierarchy, re.MULTILINE), node["cpp_name"]


def test_build_bitstream_writes_the_hierarchical_report_compare_reads(example_build):
    script = (example_build / "vivado" / "build_bitstream.tcl").read_text()
    assert (f"report_utilization -hierarchical -hierarchical_depth 7 -file [file join $project_dir "
            f"{HIERARCHICAL_REPORT}]") in script


# --- what the fixtures should give --------------------------------------------------------------------------

def fixture_achieved() -> dict[str, dict]:
    """The achieved figures the fixtures were made with: per process (by C++ name) and "total"."""
    achieved = {}
    for p in make_reports.PROCESSES:
        lut, ff, ramb36, ramb18, uram, dsp = p.routed
        achieved[p.function] = {"ii": p.ii, "interval": p.latency + 1, "dsp": dsp, "lut": lut, "ff": ff,
                                "bram18k": 2 * ramb36 + ramb18, "uram": uram}
    accelerator = make_reports.design().children[0].children[0]
    assert accelerator.name == "accelerator"
    lut, ff, ramb36, ramb18, uram, dsp = accelerator.totals()
    achieved["total"] = {"interval": make_reports.TOP_CSYNTH["interval"], "dsp": dsp, "lut": lut, "ff": ff,
                         "bram18k": 2 * ramb36 + ramb18, "uram": uram}
    return achieved


def planned_figures(report: dict) -> dict[str, dict]:
    planned = {node["cpp_name"]: {"ii": node["pipeline"]["ii"], "interval": node["cycles"]}
               | {m: node[m] for m in RESOURCES} for node in report["nodes"]}
    planned["total"] = {"interval": report["totals"]["throughput_cycles"]} | {m: report["totals"][m] for m in RESOURCES}
    return planned


def over_tolerance(planned, achieved) -> bool:
    return abs(achieved - planned) > 0.1 * planned if planned else achieved != 0


def expected_flags(report: dict) -> set[tuple[str, str]]:
    planned, achieved = planned_figures(report), fixture_achieved()
    names = {node["cpp_name"]: node["name"] for node in report["nodes"]} | {"total": "total"}
    flags = {(names[scope], metric) for scope, figures in planned.items() for metric, value in figures.items()
             if over_tolerance(value, achieved[scope][metric])}
    if over_tolerance(report["totals"]["cycles"], make_reports.COSIM_LATENCY):
        flags.add(("total", "latency"))
    return flags


def table_rows(stdout: str) -> dict[str, tuple[list[str], list[str]]]:
    """process -> (planned, achieved) cells of the table, in METRICS order."""
    lines = stdout.splitlines()
    rows = {}
    for i, line in enumerate(lines):
        words = line.split()
        if len(words) == 2 + len(METRICS) and words[1] == "planned":
            achieved = lines[i + 1].split()
            assert achieved[0] == "achieved", lines[i + 1]
            rows[words[0]] = (words[2:], achieved[1:1 + len(METRICS)])
    return rows


def table_flags(stdout: str) -> set[tuple[str, str]]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("flagged, over 10% off planned"))
    by_label = {label: metric for metric, label in LABELS.items()}
    flags = set()
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        name, label = line.split(":")[0].split()
        flags.add((name, by_label[label]))
    return flags


def number(cell: str):
    return None if cell == "-" else int(cell.rstrip("*").replace(",", ""))


# --- the comparison -----------------------------------------------------------------------------------------

def test_the_table_lists_every_process_planned_against_achieved(out):
    result = ming("compare", out)
    assert result.returncode == 1, result.stderr
    print(result.stdout)
    report, achieved = report_of(out), fixture_achieved()
    rows = table_rows(result.stdout)
    assert list(rows) == [node["name"] for node in report["nodes"]] + ["total"]
    planned = planned_figures(report)
    for node in report["nodes"]:
        planned_cells, achieved_cells = rows[node["name"]]
        assert [number(c) for c in planned_cells] == [planned[node["cpp_name"]][m] for m in METRICS]
        assert [number(c) for c in achieved_cells] == [achieved[node["cpp_name"]][m] for m in METRICS]
    planned_cells, achieved_cells = rows["total"]
    assert [number(c) for c in planned_cells] == [None] + [planned["total"][m] for m in METRICS[1:]]
    assert [number(c) for c in achieved_cells] == [None] + [achieved["total"][m] for m in METRICS[1:]]
    assert "clock: target 5 ns, C synthesis estimate 4.381 ns, post-route WNS 0.214 ns: met" in result.stdout


def test_exactly_the_differences_over_ten_percent_are_flagged(out):
    result = ming("compare", out)
    report = report_of(out)
    expected = expected_flags(report)
    assert {("conv3", "ii"), ("conv3", "interval"), ("fc", "bram18k")} <= expected  # the fixtures' own misses
    assert len(expected) < 2 * (len(report["nodes"]) + 1)  # a few, not everything
    assert table_flags(result.stdout) == expected
    marked = {(name, metric) for name, (_, achieved) in table_rows(result.stdout).items()
              for metric, cell in zip(METRICS, achieved) if cell.endswith("*")}
    assert marked == {(name, metric) for name, metric in expected if metric in METRICS}


def test_json_agrees_with_the_table(out):
    data = compare_json(out)
    report = report_of(out)
    planned, achieved = planned_figures(report), fixture_achieved()
    assert [entry["name"] for entry in data["processes"]] == [node["name"] for node in report["nodes"]]
    for entry in data["processes"] + [data["totals"]]:
        scope = entry.get("cpp_name", "total")
        for metric, figure in entry["figures"].items():
            assert figure["planned"] == planned[scope][metric]
            assert figure["achieved"] == achieved[scope][metric]
            expected_source = "csynth" if metric in ("ii", "interval") else "post-route"
            assert figure["source"] == expected_source
    assert {(f["process"], f["metric"]) for f in data["flagged"]} == expected_flags(report)
    assert data["missed"] == ["conv3: loop pixels at II 2, planned 1"]
    assert data["clock"] == {"target_ns": 5.0, "hls_estimated_ns": 4.381, "wns_ns": 0.214, "missed": None}
    assert data["notes"] == []


def test_a_missed_ii_exits_1_and_the_fixed_ii_exits_0(out):
    result = ming("compare", out)
    assert result.returncode == 1
    assert result.stdout.splitlines()[-2:] == ["missed: 1", "  conv3: loop pixels at II 2, planned 1"]
    replace_in(out / REPORT_DIR / "conv3_csynth.xml", "<PipelineII>2</PipelineII>", "<PipelineII>1</PipelineII>")
    result = ming("compare", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "missed: none"
    assert compare_json(out, 0)["missed"] == []


@pytest.mark.parametrize("old,new,missed", [
    ("<PipelineII>2</PipelineII>", "<PipelineII>undef</PipelineII>",
     "conv3: loop pixels is not pipelined (PipelineII 'undef' in conv3_csynth.xml)"),
    ("<pixels>", "<pixels_1>", "conv3: no loop pixels in conv3_csynth.xml or conv3_Pipeline_*_csynth.xml"),
], ids=["undef", "no_loop"])
def test_an_unknown_ii_counts_as_missed(out, old, new, missed):
    path = out / REPORT_DIR / "conv3_csynth.xml"
    replace_in(path, old, new)
    if new == "<pixels_1>":
        replace_in(path, "</pixels>", "</pixels_1>")
    data = compare_json(out)
    assert data["missed"] == [missed]
    assert data["processes"][3]["figures"]["ii"]["achieved"] is None


def test_a_module_report_missing_is_a_note_and_a_miss(out):
    (out / REPORT_DIR / "pool2_csynth.xml").unlink()
    data = compare_json(out)
    assert data["notes"] == [f"no {out / REPORT_DIR / 'pool2_csynth.xml'} for process pool2: its interval and area "
                             f"from csynth.xml's ModuleInformation, its II unknown"]
    assert "pool2: no report pool2_csynth.xml" in data["missed"]
    pool2 = data["processes"][4]["figures"]
    assert pool2["ii"]["achieved"] is None
    assert pool2["interval"]["achieved"] == fixture_achieved()["pool2"]["interval"]  # latency + 1, not pipelined
    assert pool2["lut"]["achieved"] == fixture_achieved()["pool2"]["lut"]  # post-route all the same


@pytest.mark.parametrize("where", ["hls", "vivado"])
def test_a_missed_clock_exits_1(out, where):
    replace_in(out / REPORT_DIR / "conv3_csynth.xml", "<PipelineII>2</PipelineII>", "<PipelineII>1</PipelineII>")
    if where == "hls":
        replace_in(out / REPORT_DIR / "csynth.xml", "<EstimatedClockPeriod>4.381<", "<EstimatedClockPeriod>5.412<")
        missed = "clock: C synthesis estimates 5.412 ns, over the target 5 ns"
    else:
        replace_in(out / PROJECT_DIR / "timing_summary_routed.rpt", "  0.214  ", " -0.187  ")
        missed = "clock: post-route WNS -0.187 ns"
    data = compare_json(out)
    assert data["missed"] == [missed]
    assert ming("compare", out).stdout.splitlines()[-1] == f"  {missed}"


def test_without_vivado_reports_csynth_alone_is_compared_with_a_note(out):
    shutil.rmtree(out / "vivado" / PROJECT_DIR.name)
    result = ming("compare", out)
    assert result.returncode == 1, result.stderr
    notes = [line for line in result.stdout.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: no post-route reports ({out / PROJECT_DIR / 'timing_summary_routed.rpt'}): resources "
                     f"from C synthesis; run `vivado -mode batch -source build_bitstream.tcl` in {out / 'vivado'}"]
    data = compare_json(out)
    assert data["reports"]["vivado"] is None and data["clock"]["wns_ns"] is None
    by_function = {p.function: p for p in make_reports.PROCESSES}
    for entry in data["processes"]:
        csynth = dict(zip(("dsp", "lut", "ff", "bram18k", "uram"), by_function[entry["cpp_name"]].csynth))
        assert {r: entry["figures"][r]["achieved"] for r in RESOURCES} == csynth  # conv3's DSP from <DSP48E>
        assert {entry["figures"][r]["source"] for r in RESOURCES} == {"csynth"}
    top = dict(zip(("dsp", "lut", "ff", "bram18k", "uram"), make_reports.TOP_CSYNTH["area"]))
    assert {r: data["totals"]["figures"][r]["achieved"] for r in RESOURCES} == top


def test_without_the_hierarchical_report_resources_come_from_csynth(out):
    (out / PROJECT_DIR / HIERARCHICAL_REPORT).unlink()
    data = compare_json(out)
    assert len(data["notes"]) == 1 and HIERARCHICAL_REPORT in data["notes"][0]
    assert data["clock"]["wns_ns"] == 0.214
    assert {entry["figures"]["lut"]["source"] for entry in data["processes"]} == {"csynth"}


def test_without_hls_reports_vivado_alone_is_compared_with_a_note(out):
    shutil.rmtree(out / "hls" / REPORT_DIR.parts[1])
    data = compare_json(out, 0)
    assert data["notes"] == [f"no C synthesis reports ({out / REPORT_DIR / 'csynth.xml'}): II and intervals not "
                             f"compared; run `MING_HLS_STEPS=synth vitis-run --mode hls --tcl run_hls.tcl` (or `vitis_hls -f run_hls.tcl -tclargs synth`) in {out / 'hls'}",
                             f"no C/RTL co-simulation report ({out / make_reports.COSIM_REPORT}): latency not "
                             f"compared; run `MING_HLS_STEPS=cosim vitis-run --mode hls --tcl run_hls.tcl` (or `vitis_hls -f run_hls.tcl -tclargs cosim`) in {out / 'hls'}"]
    assert data["missed"] == []
    assert {entry["figures"]["ii"]["achieved"] for entry in data["processes"]} == {None}
    assert data["processes"][0]["figures"]["lut"]["achieved"] == fixture_achieved()["conv1"]["lut"]


def test_no_reports_at_all_is_one_line_naming_what_to_run(bare_out):
    line = one_line_error(ming("compare", bare_out))
    assert line == (f"ming: error: {bare_out}: no vendor reports to compare: neither "
                    f"{bare_out / REPORT_DIR / 'csynth.xml'} (run `MING_HLS_STEPS=synth vitis-run --mode hls --tcl run_hls.tcl` (or `vitis_hls -f run_hls.tcl -tclargs synth`) in "
                    f"{bare_out / 'hls'}) nor {bare_out / PROJECT_DIR / 'timing_summary_routed.rpt'} (run `vivado "
                    f"-mode batch -source build_bitstream.tcl` in {bare_out / 'vivado'})")


def test_a_directory_that_is_no_build_is_one_line(tmp_path):
    line = one_line_error(ming("compare", tmp_path))
    assert line == f"ming: error: {tmp_path}: not a ming build directory (no report.json); run `ming build` first"


def test_a_broken_csynth_report_is_one_line(out):
    (out / REPORT_DIR / "csynth.xml").write_text("<profile><UserAssignments>")
    assert f"{out / REPORT_DIR / 'csynth.xml'}: not a csynth XML report" in one_line_error(ming("compare", out))


# --- calibration --------------------------------------------------------------------------------------------

def squared_residual(report: dict, achieved: dict, resource: str, factor) -> float:
    total = 0.0
    for node in report["nodes"]:
        value = achieved[node["name"]][resource]
        predicted = sum(factor(resource, primitive) * amount
                        for primitive, amount in planned_by_primitive(node, resource).items())
        total += (value - predicted) ** 2
    return total


def test_write_calibration_fits_the_achieved_resources_better_than_one(out, tmp_path):
    path = tmp_path / "calibration.json"
    result = ming("compare", out, "--write-calibration", path)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines()[-1] == f"calibration: {path}"
    data = json.loads(path.read_text())
    assert data["format"] == FORMAT and (data["board"], data["part"]) == ("kv260", "xck26-sfvc784-2LV-c")
    assert data["from"] == {"hls": True, "vivado": True, "processes": 6}
    assert sorted(data["factors"]) == sorted(RESOURCES)
    calibration = load_calibration(path)
    report = report_of(out)
    achieved = {node["name"]: fixture_achieved()[node["cpp_name"]] for node in report["nodes"]}
    for resource in ("lut", "ff", "dsp"):
        fitted = squared_residual(report, achieved, resource, calibration.factor)
        unfitted = squared_residual(report, achieved, resource, lambda r, p: 1.0)
        assert fitted < unfitted, resource
    assert data["factors"]["lut"]["process"] > 1.0  # the fixtures' LUTs are over the plan
    first = path.read_bytes()
    assert ming("compare", out, "--write-calibration", path).returncode == 1  # its own file: overwritten
    assert path.read_bytes() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calibration.json", "out"]  # no temporary file left


def test_write_calibration_fits_primitives_report_json_splits(out, tmp_path):
    report = report_of(out)
    for node in report["nodes"]:
        lut = node["lut"]
        node["resources_by_primitive"] = {"lut": {"mac": lut * 0.6, "control": lut * 0.1 + 50, "memory": lut * 0.3 - 50}}
    (out / "report.json").write_text(json.dumps(report))
    path = tmp_path / "calibration.json"
    assert ming("compare", out, "--json", "--write-calibration", path).returncode == 1
    factors = json.loads(path.read_text())["factors"]
    assert sorted(factors["lut"]) == ["control", "mac", "memory", "process"]
    assert sorted(factors["ff"]) == ["process"]


def test_write_calibration_refuses_a_foreign_file_and_a_symbolic_link(out, tmp_path):
    foreign = tmp_path / "notes.json"
    foreign.write_text('{"mine": true}\n')
    line = one_line_error(ming("compare", out, "--write-calibration", foreign))
    assert line == (f"ming: error: {foreign}: exists and is not a ming calibration file; ming overwrites only its "
                    f"own (move it or choose another path)")
    assert foreign.read_text() == '{"mine": true}\n'
    own = tmp_path / "own.json"
    assert ming("compare", out, "--write-calibration", own).returncode == 1
    link = tmp_path / "link.json"
    link.symlink_to(own)
    before = own.read_bytes()
    line = one_line_error(ming("compare", out, "--write-calibration", link))
    assert line.startswith(f"ming: error: {link}: a symbolic link")
    assert own.read_bytes() == before and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "notes.json", "out", "own.json"]


@pytest.mark.parametrize("content,why", [
    (b"{not json", "not a ming calibration file (not JSON"),
    (b"\xff\xfe", "not a ming calibration file (not JSON"),
    (b"[1, 2]", "not a ming calibration file (a JSON list, not an object)"),
    (b'{"format": "other/1", "factors": {}}', "not a ming calibration file (format 'other/1', expected "
                                              "'ming-calibration/1')"),
    (b'{"format": "ming-calibration/1", "factors": {"lut": {"mac": -1.5}}}', "factor lut.mac is -1.5"),
    (b'{"format": "ming-calibration/1", "factors": {"lut": {"mac": NaN}}}', "not JSON: NaN is not a number"),
    (b'{"format": "ming-calibration/1", "factors": {"lut": {"mac": "2"}}}', "factor lut.mac is \"2\""),
    (b'{"format": "ming-calibration/1", "factors": {"lut": {"mac": true}}}', "factor lut.mac is true"),
    (b'{"format": "ming-calibration/1", "factors": {"LUT": {}}}', "unknown resource 'LUT'"),
    (b'{"format": "ming-calibration/1", "factors": [1]}', "\"factors\" must be an object"),
], ids=["syntax", "encoding", "list", "format", "negative", "nan", "string", "bool", "resource", "factors"])
def test_load_calibration_rejects_a_bad_file_with_one_line(tmp_path, content, why):
    path = tmp_path / "calibration.json"
    path.write_bytes(content)
    with pytest.raises(MingError) as error:
        load_calibration(path)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{path}: ") and why in message, message


@pytest.mark.parametrize("kind", ["directory", "fifo", "missing"])
def test_load_calibration_reads_only_a_regular_file(tmp_path, kind):
    path = tmp_path / "calibration.json"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    with pytest.raises(MingError) as error:
        load_calibration(path)
    expected = "no such calibration file" if kind == "missing" else "not a regular file"
    assert str(error.value) == f"{path}: {expected}" + ("" if kind == "missing" else ", so not a ming calibration "
                                                                                     "file")


def test_a_loaded_calibration_falls_back_to_the_process_factor_then_one(tmp_path):
    path = tmp_path / "calibration.json"
    write_calibration(path, {"format": FORMAT, "board": "kv260", "part": "p", "from": {},
                             "factors": {"lut": {"mac": 1.25, "process": 1.1}, "dsp": {"mac": 0.5}}})
    calibration = load_calibration(path)
    assert isinstance(calibration, Calibration) and calibration.board == "kv260"
    assert (calibration.factor("lut", "mac"), calibration.factor("lut", "control"), calibration.factor("dsp", "mac"),
            calibration.factor("dsp", "requantizer"), calibration.factor("ff", "mac")) == (1.25, 1.1, 0.5, 1.0, 1.0)
    assert calibration.digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert hash(calibration) == hash(load_calibration(path)) and calibration == load_calibration(path)
    assert path.read_text() == json.dumps(json.loads(path.read_text()), indent=2, sort_keys=True) + "\n"


def synthetic_report(splits: list[dict[str, float]]) -> dict:
    return {"nodes": [{"name": f"p{i}", "lut": sum(split.values()), "resources_by_primitive": {"lut": split}}
                      for i, split in enumerate(splits)]}


SPLITS = [{"mac": 4200, "control": 700, "memory": 300}, {"mac": 900, "control": 1500, "memory": 2100},
          {"mac": 2500, "control": 400, "memory": 3300}, {"mac": 6100, "control": 2200, "memory": 800},
          {"mac": 300, "control": 900, "memory": 1200}, {"mac": 3600, "control": 3000, "memory": 1900}]


def test_fit_recovers_the_factors_of_separable_primitives():
    truth = {"mac": 1.3, "control": 0.8, "memory": 1.05}
    achieved = {f"p{i}": {"lut": sum(truth[k] * v for k, v in split.items())} for i, split in enumerate(SPLITS)}
    factors = fit(synthetic_report(SPLITS), achieved)["lut"]
    for primitive, value in truth.items():
        assert abs(factors[primitive] - value) < 0.02, factors
    assert set(factors) == {"mac", "control", "memory", "process"}
    assert fit(synthetic_report(SPLITS), achieved)["dsp"] == {}


def test_fit_shares_one_factor_between_primitives_the_data_cannot_separate():
    splits = [{"mac": 10 * x, "requantizer": x} for x in (100, 250, 40, 700)]  # always 10 : 1
    achieved = {f"p{i}": {"lut": 1.2 * sum(split.values())} for i, split in enumerate(splits)}
    factors = fit(synthetic_report(splits), achieved)["lut"]
    assert abs(factors["mac"] - 1.2) < 0.01 and abs(factors["requantizer"] - 1.2) < 0.01, factors
    one_process = fit(synthetic_report(SPLITS[:1]), {"p0": {"lut": 1.1 * sum(SPLITS[0].values())}})["lut"]
    assert max(one_process.values()) - min(one_process.values()) < 0.01, one_process


def test_fit_clamps_to_a_quarter_and_four():
    achieved = {f"p{i}": {"lut": 10 * sum(split.values())} for i, split in enumerate(SPLITS)}
    assert set(fit(synthetic_report(SPLITS), achieved)["lut"].values()) == {4.0}
    achieved = {f"p{i}": {"lut": 0.01 * sum(split.values())} for i, split in enumerate(SPLITS)}
    assert set(fit(synthetic_report(SPLITS), achieved)["lut"].values()) == {0.25}


# --- a build that takes a calibration ------------------------------------------------------------------------

def test_a_build_scales_each_primitive_by_its_calibration_factor_and_records_the_file(example_build, tmp_path):
    """`ming build --calibration FILE`: each process's LUTs are the sum of its primitives' planned amounts times
    their factors (report.json keeps the amounts before calibration, which a later fit starts from), and the
    totals name the file and its digest."""
    path = tmp_path / "calibration.json"
    write_calibration(path, {"format": FORMAT, "factors": {"lut": {"mac": 2.0, "control": 0.5}}})
    out = tmp_path / "calibrated"
    result = ming("build", EXAMPLE, "--board", "kv260", "-o", out, "--calibration", path)
    assert result.returncode == 0, result.stderr
    report = report_of(out)
    calibration = load_calibration(path)
    assert report["totals"]["solver"]["calibration"] == {"file": "calibration.json", "sha256": calibration.digest}
    for node in report["nodes"]:
        lut = node["resources_by_primitive"]["lut"]
        scaled = sum(amount * {"mac": 2.0, "control": 0.5}.get(primitive, 1.0) for primitive, amount in lut.items())
        assert abs(node["lut"] - scaled) <= len(lut), (node["name"], node["lut"], scaled)  # rounding of each amount
    assert "calibration" not in report_of(example_build)["totals"]["solver"]


def test_a_bad_calibration_file_stops_the_build_before_the_import(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text('{"format": "something else"}')
    result = ming("build", EXAMPLE, "-o", tmp_path / "out", "--calibration", path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert str(path) in result.stderr and not (tmp_path / "out").exists()
