"""The generated Tcl under both of AMD's HLS commands: `vitis-run --mode hls --tcl run_hls.tcl` (Vitis 2023.2 on,
the only one from 2025.1; it passes the script no arguments, so the steps come from MING_HLS_STEPS) and
`vitis_hls -f run_hls.tcl -tclargs STEP ...` (Vitis HLS before 2025.1). Stub executables of both names, on a PATH
that holds nothing else, check their own command line as the real tools parse it, record it, and run the
script in Tcl (tclsh) with stub Vitis commands; the Vivado script build_bitstream.tcl, itself under tclsh with
stub Vivado commands, finds whichever of them is installed and exports the accelerator's IP with it."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tcl_stubs import csynth_files, read_trace, write_csynth
from test_vivado_project import IP_DIR, MODEL, calls_of, run_script

TESTS = Path(__file__).resolve().parent
VITIS_RUN, VITIS_HLS = "vitis-run", "vitis_hls"

# Stands in for vitis-run or vitis_hls (TOOL): refuses a command line the tool would not take (vitis-run:
# exactly `--mode hls --tcl FILE`, no script arguments; vitis_hls: `-f FILE [-tclargs ARG ...]`), appends the
# command line, directory and MING_HLS_STEPS as one JSON line to $STUB_TOOL_LOG, then runs FILE in Tcl after
# tcl_stubs' Vitis stubs (trace in $STUB_VITIS_TRACE, csynth reports from $STUB_CSYNTH), with argv the
# -tclargs words under vitis_hls and, under vitis-run, no argv at all ($STUB_ARGV=unset) or an empty one;
# export_design leaves the IP package's component.xml where Vitis HLS writes it. $STUB_FAIL makes it fail.
TOOL_STUB = r"""#!@PYTHON@
import json, os, sys, tempfile
sys.path.insert(0, @TESTS@)
from tcl_stubs import RECORDER, VITIS_STUBS, run_tcl

TOOL = @TOOL@
EXPORT = '''
proc export_design {args} {
  record export_design {*}$args
  set ip [file join $::project_name solution1 impl ip]
  file mkdir $ip
  set f [open [file join $ip component.xml] w]
  puts $f "<spirit:component/>"
  close $f
}
'''


def script_and_arguments(words):
    if TOOL == "vitis-run":
        options = dict(zip(words[::2], words[1::2]))
        if len(words) != 4 or options.keys() != {"--mode", "--tcl"} or options["--mode"] != "hls":
            sys.exit("vitis-run: takes --mode hls --tcl FILE, not " + " ".join(words))
        return options["--tcl"], None
    if len(words) < 2 or words[0] != "-f" or (len(words) > 2 and words[2] != "-tclargs"):
        sys.exit("vitis_hls: takes -f FILE [-tclargs ARG ...], not " + " ".join(words))
    return words[1], words[3:]


def braced(text):
    return "{" + text + "}"


script, arguments = script_and_arguments(sys.argv[1:])
with open(os.environ["STUB_TOOL_LOG"], "a") as log:
    log.write(json.dumps({"tool": TOOL, "argv": sys.argv[1:], "cwd": os.getcwd(),
                          "MING_HLS_STEPS": os.environ.get("MING_HLS_STEPS")}) + "\n")
if os.environ.get("STUB_FAIL"):
    sys.exit("ERROR: [HLS 200-70] " + TOOL + " stub failure")
if arguments is not None:
    argv = "set argv [list " + " ".join(arguments) + "]\n"
elif os.environ.get("STUB_ARGV") == "unset":
    argv = "unset -nocomplain ::argv ::argc\n"
else:
    argv = "set argv {}\n"
prelude = ("set ::trace_path " + braced(os.environ["STUB_VITIS_TRACE"]) + "\n"
           + "set ::csynth_fixture " + braced(os.environ["STUB_CSYNTH"]) + "\n"
           + RECORDER + VITIS_STUBS + EXPORT + argv + "source " + braced(os.path.abspath(script)) + "\n")
with tempfile.TemporaryDirectory() as scratch:
    path = os.path.join(scratch, "prelude.tcl")
    with open(path, "w") as f:
        f.write(prelude)
    run = run_tcl(path, os.getcwd(), dict(os.environ))
sys.stdout.write(run.stdout)
sys.stderr.write(run.stderr)
sys.exit(run.returncode)
"""


def install_tools(bin_dir: Path, tools: tuple[str, ...]) -> Path:
    """bin_dir holding a stub of each of `tools` and, where one is installed, tclsh (to run the Tcl)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in tools:
        stub = bin_dir / tool
        stub.write_text(TOOL_STUB.replace("@PYTHON@", sys.executable).replace("@TESTS@", repr(str(TESTS)))
                        .replace("@TOOL@", repr(tool)))
        stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    tclsh = shutil.which("tclsh")
    if tclsh and not (bin_dir / "tclsh").exists():
        (bin_dir / "tclsh").symlink_to(tclsh)
    return bin_dir


@pytest.fixture
def out(example_build, tmp_path, monkeypatch):
    """A copy of the example build; the stubs' log, trace and csynth reports (each loop as report.json plans
    it) in tmp_path, and a PATH of tmp_path/bin alone (the tests put the tools they want there)."""
    out = tmp_path / "out"
    shutil.copytree(example_build, out)
    reports = write_csynth(tmp_path / "csynth", csynth_files(json.loads((out / "report.json").read_text())))
    monkeypatch.setenv("STUB_TOOL_LOG", str(tmp_path / "tools.jsonl"))
    monkeypatch.setenv("STUB_VITIS_TRACE", str(tmp_path / "vitis_trace"))
    monkeypatch.setenv("STUB_CSYNTH", str(reports))
    monkeypatch.setenv("PATH", str(install_tools(tmp_path / "bin", ())))
    for variable in ("MING_HLS_STEPS", "STUB_ARGV", "STUB_FAIL"):
        monkeypatch.delenv(variable, raising=False)
    return out


def tool_runs(out: Path) -> list[dict]:
    log = out.parent / "tools.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def vitis_calls(out: Path) -> list[list[str]]:
    return read_trace(out.parent / "vitis_trace")


def design_calls(out: Path) -> list[list[str]]:
    """The Vitis *_design commands run_hls.tcl called, with the words that tell the steps apart."""
    return [[call[0], *[w for w in call[1:3] if w == "-flow" or w == "impl"]] for call in vitis_calls(out)
            if call[0].endswith("_design")]


def documented_command(tool: str, steps: list[str], script: str = "run_hls.tcl") -> tuple[list[str], dict]:
    """The command line and extra environment docs/deployment.md gives for running `steps` under `tool`."""
    if tool == VITIS_RUN:
        return [VITIS_RUN, "--mode", "hls", "--tcl", script], {"MING_HLS_STEPS": " ".join(steps)} if steps else {}
    return [VITIS_HLS, "-f", script, *(["-tclargs", *steps] if steps else [])], {}


def run_tool(out: Path, tool: str, steps: list[str], cwd: Path | None = None, script: str = "run_hls.tcl",
             environment: dict | None = None):
    install_tools(out.parent / "bin", (tool,))
    command, extra = documented_command(tool, steps, script)
    env = {**os.environ, **extra, **(environment or {})}
    return subprocess.run(command, cwd=cwd or out / "hls", env=env, capture_output=True, text=True)


# The *_design calls each set of steps makes, whatever tool runs the script.
STEPS = {
    ("csim",): [["csim_design"]],
    ("synth",): [["csynth_design"]],
    ("cosim",): [["csynth_design"], ["cosim_design"]],
    ("export",): [["csynth_design"], ["export_design"]],
    ("impl",): [["csynth_design"], ["export_design", "-flow", "impl"]],
    ("cosim", "csim", "export"): [["csim_design"], ["csynth_design"], ["cosim_design"], ["export_design"]],
    (): [["csynth_design"]],
}


@pytest.mark.parametrize("tool", [VITIS_RUN, VITIS_HLS])
@pytest.mark.parametrize("steps", list(STEPS), ids=lambda steps: "+".join(steps) or "default")
def test_every_step_runs_under_each_tool(out, tool, steps):
    run = run_tool(out, tool, list(steps))
    assert run.returncode == 0, run.stderr
    assert design_calls(out) == STEPS[steps]
    assert vitis_calls(out)[0] == ["open_project", "-reset", f"{MODEL}_prj"]
    [invocation] = tool_runs(out)
    expected_argv = documented_command(tool, list(steps))[0][1:]
    assert invocation["tool"] == tool and invocation["argv"] == expected_argv
    assert invocation["MING_HLS_STEPS"] == (" ".join(steps) if tool == VITIS_RUN and steps else None)
    if "export" in steps:
        assert (out / IP_DIR / "component.xml").is_file()


@pytest.mark.parametrize("argv", ["unset", "empty"])
def test_vitis_run_needs_no_argv(out, monkeypatch, argv):
    """vitis-run may hand the script no argv variable at all, or an empty one: the steps still come from
    MING_HLS_STEPS, and without it the script synthesizes."""
    monkeypatch.setenv("STUB_ARGV", argv)
    assert run_tool(out, VITIS_RUN, ["csim", "cosim"]).returncode == 0
    assert design_calls(out) == [["csim_design"], ["csynth_design"], ["cosim_design"]]
    assert run_tool(out, VITIS_RUN, []).returncode == 0
    assert design_calls(out) == [["csynth_design"]]


def test_the_variable_takes_commas_too(out):
    assert run_tool(out, VITIS_RUN, [], environment={"MING_HLS_STEPS": " csim,cosim "}).returncode == 0
    assert design_calls(out) == [["csim_design"], ["csynth_design"], ["cosim_design"]]


def test_the_script_works_in_its_own_directory_whatever_the_current_one(out):
    elsewhere = out.parent / "elsewhere"
    elsewhere.mkdir()
    run = run_tool(out, VITIS_RUN, ["synth"], cwd=elsewhere, script=str(out / "hls" / "run_hls.tcl"))
    assert run.returncode == 0, run.stderr
    assert (out / "hls" / f"{MODEL}_prj" / "solution1" / "syn" / "report" / "csynth.xml").is_file()
    assert list(elsewhere.iterdir()) == []


def tcl_error(run) -> str:
    """The (last line of the) Tcl error the run stopped on: tclsh prints it before its stack trace, Python's Tcl
    (where no tclsh is installed) after `_tkinter.TclError: `; a stub tool's own output may come first."""
    marker = "_tkinter.TclError: "
    if marker in run.stderr:
        return run.stderr.rsplit(marker, 1)[1].strip()
    return run.stderr.split("\n    while executing")[0].splitlines()[-1]


def test_steps_given_both_ways_must_agree(out):
    run = run_tool(out, VITIS_HLS, ["csim"], environment={"MING_HLS_STEPS": "synth"})
    assert run.returncode != 0
    assert tcl_error(run) == ("the steps of -tclargs (csim) and of MING_HLS_STEPS (synth) differ: "
                                     "give them one way")
    assert vitis_calls(out) == []
    agreeing = run_tool(out, VITIS_HLS, ["cosim", "csim"], environment={"MING_HLS_STEPS": "csim cosim"})
    assert agreeing.returncode == 0, agreeing.stderr
    assert design_calls(out) == [["csim_design"], ["csynth_design"], ["cosim_design"]]


def test_an_unknown_step_in_the_variable_is_named(out):
    run = run_tool(out, VITIS_RUN, [], environment={"MING_HLS_STEPS": "csim sim"})
    assert run.returncode != 0
    assert tcl_error(run) == ("unknown step 'sim': use csim, synth, cosim, export or impl "
                                     "(in MING_HLS_STEPS)")
    assert vitis_calls(out) == []


def test_the_stub_refuses_script_arguments_as_vitis_run_does(out):
    """The stub is as strict as the tool it stands for: vitis-run takes no arguments for the script."""
    install_tools(out.parent / "bin", (VITIS_RUN,))
    run = subprocess.run([VITIS_RUN, "--mode", "hls", "--tcl", "run_hls.tcl", "-tclargs", "csim"], cwd=out / "hls",
                         capture_output=True, text=True)
    assert run.returncode != 0 and "takes --mode hls --tcl FILE" in run.stderr


# --- build_bitstream.tcl: the HLS export with whichever tool is installed ------------------------------------

@pytest.mark.parametrize("tools,used", [((VITIS_RUN,), VITIS_RUN), ((VITIS_HLS,), VITIS_HLS),
                                        ((VITIS_RUN, VITIS_HLS), VITIS_RUN)])
def test_the_bitstream_script_exports_with_the_installed_tool(out, monkeypatch, tools, used):
    install_tools(out.parent / "bin", tools)
    monkeypatch.setenv("MING_HLS_STEPS", "csim")  # left over in the user's shell: the export overrides it
    run, trace = run_script(out)
    assert run.returncode == 0, run.stderr
    hls = out / "hls"
    if used == VITIS_RUN:
        command, shown = [VITIS_RUN, "--mode", "hls", "--tcl", "run_hls.tcl"], "MING_HLS_STEPS=export "
    else:
        command, shown = [VITIS_HLS, "-f", "run_hls.tcl", "-tclargs", "export"], ""
    assert calls_of(trace, "exec") == [[str(hls), *command, ">@stdout", "2>@stderr"]]
    assert f"Exporting the accelerator IP with {used}: {shown}{' '.join(command)} in {hls}" in run.stdout
    [invocation] = tool_runs(out)
    assert invocation["tool"] == used and invocation["cwd"] == str(hls)
    assert invocation["MING_HLS_STEPS"] == ("export" if used == VITIS_RUN else None)
    assert design_calls(out) == [["csynth_design"], ["export_design"]]
    assert (out / IP_DIR / "component.xml").is_file()
    assert (out / "deploy" / f"{MODEL}.bit").is_file()  # the flow went on to the bitstream


def test_the_bitstream_script_stops_in_one_line_without_an_hls_tool(out):
    run, trace = run_script(out)
    assert run.returncode != 0
    assert tcl_error(run) == (
        "neither vitis-run (Vitis 2023.2 and later) nor vitis_hls (Vitis HLS before 2025.1) is on PATH, and "
        f"{out / IP_DIR / 'component.xml'} is not exported yet: source the settings64.sh of your Vitis install first")
    assert trace == [] and tool_runs(out) == []


@pytest.mark.parametrize("tool", [VITIS_RUN, VITIS_HLS])
def test_a_failed_export_names_the_tool_and_its_command(out, monkeypatch, tool):
    install_tools(out.parent / "bin", (tool,))
    monkeypatch.setenv("STUB_FAIL", "1")
    run, trace = run_script(out)
    assert run.returncode != 0
    command = ("MING_HLS_STEPS=export vitis-run --mode hls --tcl run_hls.tcl" if tool == VITIS_RUN
               else "vitis_hls -f run_hls.tcl -tclargs export")
    message = tcl_error(run)
    assert message.startswith(f"{command} in {out / 'hls'} did not export {out / IP_DIR / 'component.xml'} (")
    assert message.endswith(f"; see {out / 'hls' / 'vitis_hls.log'}") == (tool == VITIS_HLS)
    assert f"{tool} stub failure" in run.stderr
    assert [call[0] for call in trace] == ["exec"]
