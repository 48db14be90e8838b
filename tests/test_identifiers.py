"""Safe C++ identifiers: any node or model name builds, compiles and C-simulates bit-exact.

Unit tests of `emit.identifiers` (keywords, reserved patterns, collisions, determinism), a
check of its reserved names against the local compiler's headers, and end-to-end builds of
models whose node and graph names are C++ keywords, reserved or colliding identifiers.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import zoo
from emit_helpers import csim
from ming_py import reference
from ming_py.boards import load_board
from ming_py.build import design
from ming_py.csim import CsimDeadlock, run_csim
from ming_py.dataflow import Channel, Port, Process, Schedule, StreamGraph, Window
from ming_py.emit.identifiers import (
    HEADER_NAMES,
    TEMPLATES,
    Namer,
    c_string,
    comment_text,
    cpp_names,
    identifier_base,
    is_reserved,
    markdown_cell,
    mlir_string,
)
from ming_py.errors import MingError
from ming_py.line_buffers import build_stream_graph
from ming_py.pipeline import lift

CLEAN = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def assert_clean(identifier: str) -> None:
    assert CLEAN.fullmatch(identifier) and "__" not in identifier and not identifier.endswith("_"), identifier
    assert not is_reserved(identifier), identifier


# ---- the sanitizer ---------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize("name", ["conv1", "relu", "pool1", "fc2", "block1_conv1", "Conv", "x", "dw1_relu",
                                  "conv3x3_s2", "n_1conv", "layer_t", "stride"])
def test_valid_names_are_kept(name):
    assert identifier_base(name) == name and not is_reserved(name)
    assert Namer().claim_all([name], "node") == {name: name}


@pytest.mark.unit
@pytest.mark.parametrize("name", [
    # C, C++ keywords and alternative tokens, main
    "int", "for", "class", "main", "and", "or", "not", "xor_eq", "bitand", "co_await", "concept", "restrict",
    "typeof", "char8_t", "final", "import", "module",
    # namespaces and helpers of the emitted code and its headers, the top function's ports
    "std", "hls", "ming", "ming_csim", "HLS_PRAGMA", "unpack_axis", "pack_axis", "Pack", "AxisWord",
    "requantize", "dataflow", "stream", "s_axis", "m_axis", "MING_CSIM_CONCURRENT",
    # the standard headers' macros, typedefs and variables; Vitis HLS
    "NULL", "EOF", "assert", "errno", "stdin", "offsetof", "int8_t", "size_t", "FILE", "timezone", "ap_int",
    "ap_uint", "linux",
])
def test_keywords_and_reserved_names_get_a_suffix(name):
    assert is_reserved(name)
    assert identifier_base(name) == name
    assert Namer().claim_all([name], "node") == {name: f"{name}_1"}


@pytest.mark.unit
@pytest.mark.parametrize("name", ["_Upper", "_lower", "__x", "a__b", "x__", "std1", "a-b", "1x", "", "a b"])
def test_reserved_patterns_and_invalid_names(name):
    assert is_reserved(name)
    assert_clean(Namer().claim_all([name], "node")[name])


@pytest.mark.unit
@pytest.mark.parametrize("name, base", [
    ("a-b", "a_b"), ("conv/1", "conv_1"), ("/model/conv1/Conv", "model_conv1_Conv"), ("1conv", "n_1conv"),
    ("123", "n_123"), ("__x", "x"), ("_Upper", "Upper"), ("a__b", "a_b"), ("x__", "x"), ("a.b", "a_b"),
    ("", "node"), ("___", "node"), ("café", "cafe"), ("ｃｏｎｖ", "conv"), ("卷积", "u5377_u79ef"),
    ("conv→relu", "conv_u2192_relu"), ("line\nbreak", "line_break"), ("my-model", "my_model"),
])
def test_identifier_base(name, base):
    assert identifier_base(name) == base
    assert_clean(base)


@pytest.mark.unit
def test_collisions_get_numeric_suffixes_in_sorted_order():
    names = ["a.b", "a_b", "a-b", "int", "int_1", "Conv", "conv", "x", "x_1", "x_2"]
    expected = {"a_b": "a_b", "a-b": "a_b_1", "a.b": "a_b_2",  # the name that is its own identifier keeps it
                "int_1": "int_1", "int": "int_2",  # a suffix never takes a name another node has
                "Conv": "Conv", "conv": "conv_1",  # unique ignoring case (RTL and file names)
                "x": "x", "x_1": "x_1", "x_2": "x_2"}
    for seed in range(5):
        shuffled = names[:]
        random.Random(seed).shuffle(shuffled)
        assert Namer().claim_all(shuffled, "node") == expected


@pytest.mark.unit
def test_derived_identifiers_are_claimed_with_their_stem():
    namer = Namer()
    assert namer.claim("conv", lambda stem: [stem, f"{stem}_weights"]) == "conv"
    assert namer.claim("conv_weights") == "conv_weights_1"
    assert namer.claim("conv") == "conv_1"
    # a stem whose derived name is reserved moves on, though the stem alone would be free
    assert Namer().claim("pthread_cleanup", lambda stem: [stem, f"{stem}_push"]) == "pthread_cleanup_1"


def _graph(name: str, processes: list[tuple[str, bool]]) -> StreamGraph:
    """A chain input -> processes -> output; (name, has weights)."""
    chain = ["input"] + [p for p, _ in processes] + ["output"]
    channels = {f"{a}_to_{b}": Channel(f"{a}_to_{b}", a, b, 4, 8, 8) for a, b in zip(chain, chain[1:])}
    window = Window(4, 8, 8, 4, 8, 8, kernel=(3, 3), pads=(1, 1, 1, 1))
    procs = [Process(p, "conv" if weights else "maxpool", p, (f"{a}_to_{p}",), (f"{p}_to_{b}",), window=window,
                     weights=np.zeros((4, 4, 9), np.int8) if weights else None)
             for a, (p, weights), b in zip(chain, processes, chain[2:])]
    return StreamGraph(name, procs, channels, Port(f"input_to_{chain[1]}", (4, 8, 8), "x", (1, 4, 8, 8), 1.0, 0),
                       (Port(f"{chain[-2]}_to_output", (4, 8, 8), "y", (1, 4, 8, 8), 1.0, 0),))


def _all_identifiers(names) -> list[str]:
    return ([names.top, names.dataflow, names.input_values, *names.output_values] + list(names.processes.values())
            + list(names.channels.values()) + [a for arrays in names.arrays.values() for a in arrays.values()])


@pytest.mark.unit
def test_cpp_names_of_a_stream_graph_are_unique_and_stable():
    processes = [("conv", True), ("conv_weights", True), ("net_top", False), ("input_to_conv", False),
                 ("int", True), ("NET_INPUT_VALUES", False), ("relu", False)]
    graph = _graph("net", processes)
    names = cpp_names(graph)
    identifiers = _all_identifiers(names)
    assert len({i.lower() for i in identifiers}) == len(identifiers)
    for identifier in identifiers:
        assert_clean(identifier)
    assert (names.model, names.top, names.dataflow) == ("net", "net_top", "net_dataflow")
    assert names.input_values == "NET_INPUT_VALUES"
    assert names.processes == {"conv": "conv", "conv_weights": "conv_weights_1", "net_top": "net_top_1",
                               "input_to_conv": "input_to_conv", "int": "int_1",
                               "NET_INPUT_VALUES": "NET_INPUT_VALUES_1", "relu": "relu"}
    assert names.arrays["conv"] == {"weights": "conv_weights"} and names.arrays["relu"] == {}
    assert names.arrays["int"] == {"weights": "int_1_weights"}
    assert names.channels["input_to_conv"] == "input_to_conv_1"  # the node keeps the name, the channel moves
    assert names.channels["conv_to_conv_weights"] == "conv_to_conv_weights"
    # the same graph with its processes in another order gets the same identifiers
    for seed in range(3):
        shuffled = processes[:]
        random.Random(seed).shuffle(shuffled)
        again = cpp_names(_graph("net", shuffled))
        assert all(again.processes[p] == names.processes[p] for p, _ in processes)


@pytest.mark.unit
@pytest.mark.parametrize("graph_name, stem", [
    ("net", "net"), ("class", "class_1"), ("int", "int_1"), ("my-model", "my_model"), ("123", "n_123"),
    ("", "model"), ("ming_stream", "ming_stream_1"), ("Hls_Stream", "Hls_Stream_1"),
    ("ming_numerics", "ming_numerics_1"), ("con", "con_1"), ("LPT1", "LPT1_1"), ("m" * 300, "m" * 100),
])
def test_model_names_give_safe_file_stems(graph_name, stem):
    names = cpp_names(_graph(graph_name, [("conv", True)]))
    assert names.model == stem and names.top == f"{stem}_top"
    assert names.processes["conv"] == "conv"  # the model name itself is not an identifier a node competes for


@pytest.mark.unit
def test_a_process_may_share_the_model_name():
    names = cpp_names(_graph("conv", [("conv", True)]))
    assert names.model == "conv" and names.processes["conv"] == "conv" and names.top == "conv_top"


@pytest.mark.unit
def test_text_escapes():
    nasty = 'a"b\\c\nd|e??=f\u2028'
    comment = comment_text(nasty + "\\")
    assert "\n" not in comment and "\u2028" not in comment and not comment.endswith("\\")
    assert "\n" not in markdown_cell(nasty) and "|" not in markdown_cell(nasty).replace("\\|", "")
    mlir = mlir_string(nasty)
    assert '"' not in mlir.replace('\\22', "") and "\n" not in mlir
    assert "??" not in c_string(nasty) and "\n" not in c_string(nasty)


@needs_gxx
def test_c_string_prints_the_name(tmp_path):
    names = ['a"b', "back\\slash", "tri??=graph", "line\nbreak", "卷积", "%s%d"]
    source = "#include <cstdio>\nint main() {\n" + "".join(
        f'  std::printf("%s\\n", "{c_string(name)}");\n' for name in names) + "  return 0;\n}\n"
    (tmp_path / "names.cpp").write_text(source)
    subprocess.run(["g++", "-std=c++17", "-Wall", "-Werror", "-o", str(tmp_path / "names"),
                    str(tmp_path / "names.cpp")], check=True)
    out = subprocess.run([str(tmp_path / "names")], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ['a"b', "back\\slash", "tri??=graph", "line\\nbreak", "卷积", "%s%d"]


# ---- the reserved names against the local compiler ----------------------------------------


@pytest.mark.unit
def test_header_names_are_found():
    assert {"ming", "ming_csim", "hls", "HLS_PRAGMA", "MING_PRAGMA_TEXT", "Pack", "AxisWord", "kValuesPerWord",
            "ArrayOf", "Array", "unpack_axis", "pack_axis", "requantize", "add_requant", "average_level",
            "detail", "dataflow", "process", "fifo", "stream"} <= HEADER_NAMES
    assert not {"pixel", "in", "out", "token", "DEPTH", "defined"} & HEADER_NAMES  # parameters, not declarations


@needs_gxx
def test_reserved_names_cover_the_headers_of_the_emitted_code(tmp_path):
    """Every macro of the emitted translation units is reserved, and every other identifier of their
    preprocessed text that is not reserved can name a process function and be called."""
    for header in TEMPLATES.glob("*.h"):
        shutil.copy(header, tmp_path / header.name)
    includes = '#include "ming_stream.h"\n#include "ming_numerics.h"\n#include <cstdio>\n#include <vector>\n'
    (tmp_path / "tu.cpp").write_text(includes)
    modes = [["-std=c++17", "-DMING_CSIM"], ["-std=c++17", "-DMING_CSIM", "-DMING_CSIM_CONCURRENT", "-pthread"]]

    def gxx(*args: str) -> str:
        return subprocess.run(["g++", *args, "-I", str(tmp_path), str(tmp_path / "tu.cpp")],
                              capture_output=True, text=True, check=True).stdout

    macros = {line.split()[1].split("(")[0] for mode in modes for line in gxx(*mode, "-dM", "-E").splitlines()}
    assert sorted(m for m in macros if not m.startswith("_") and not is_reserved(m)) == []
    tokens = sorted(set(re.findall(r"\b[A-Za-z_]\w*\b", gxx(*modes[1], "-E", "-P"))))
    free = [t for t in tokens if not is_reserved(t)]
    assert len(free) > 100  # std's members, parameters, ... are fine as identifiers
    stream = "hls::stream<ming::Pack<1>>&"
    probe = includes + "".join(f"static void {t}({stream} in, {stream} out) {{ out.write(in.read()); }}\n"
                               for t in free)
    probe += f"void probe({stream} probe_a, {stream} probe_b) {{\n" + "".join(
        f"  {t}(probe_a, probe_b);\n" for t in free) + "}\n"
    (tmp_path / "tu.cpp").write_text(probe)
    result = subprocess.run(["g++", *modes[1], "-fsyntax-only", "-I", str(tmp_path), str(tmp_path / "tu.cpp")],
                            capture_output=True, text=True)
    first = includes.count("\n") + 1  # the line of the first definition
    lines = {int(line) for line in re.findall(r"tu\.cpp:(\d+):\d+: error", result.stderr)}
    failing = sorted({free[line - first] for line in lines if 0 <= line - first < len(free)})
    assert result.returncode == 0, failing or result.stderr[:2000]


# ---- end to end: build, compile, C-simulate ------------------------------------------------


def _quantize(g: zoo._Graph, out: str, path: Path, graph_name: str | None = None) -> Path:
    model = g.finish(out)
    path = zoo.quantize_float_model(model, path, g.input_shape)
    if graph_name is not None:  # e.g. empty, which onnx.checker refuses for a float model
        quantized = onnx.load(str(path))
        quantized.graph.name = graph_name
        onnx.save(quantized, str(path))
    return path


def keyword_model(directory: Path) -> Path:
    """Graph `class`; nodes int, for, class (max pool), a-b and a_b (the same identifier), main (Add), 1x."""
    g = zoo._Graph("class", (1, 4, 8, 8))
    h = g.conv("x", "int", 4, pads=1)
    h = g.conv(h, "for", 4, kernel=1)
    h = g.maxpool(h, "class")
    a = g.conv(h, "a-b", 4, pads=1)
    b = g.conv(h, "a_b", 4, kernel=1)
    h = g.add(a, b, "main")
    return _quantize(g, g.conv(h, "1x", 4, kernel=1), directory / "class.onnx")


def colliding_model(directory: Path) -> Path:
    """Graph `net`; node names taken by the generated code (top function, weights array, a channel, namespaces,
    a header macro and typedef), reserved patterns and non-ASCII names."""
    g = zoo._Graph("net", (1, 4, 8, 8))
    h = g.conv("x", "conv", 4, pads=1)               # its weights: conv_weights
    h = g.conv(h, "conv_weights", 4, kernel=1)       # channel conv -> conv_weights: conv_to_conv_weights
    h = g.maxpool(h, "conv_to_conv_weights", kernel=2, stride=1)
    h = g.conv(h, "net_top", 4, kernel=1)
    h = g.conv(h, "ming", 4, pads=1)
    h = g.avgpool(h, "NULL", kernel=3, stride=1, pads=1)
    h = g.conv(h, "hls", 4, kernel=1)
    h = g.conv(h, "int8_t", 4, kernel=1)
    h = g.conv(h, "a__b", 4, kernel=1)
    h = g.conv(h, "_Upper", 4, kernel=1)
    h = g.conv(h, "卷积", 4, kernel=1)
    return _quantize(g, g.conv(h, "stdin", 4, kernel=1), directory / "net.onnx")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    directory = tmp_path_factory.mktemp("identifier_models")
    cache = {}

    def get(name: str):
        if name not in cache:
            path = {"keywords": keyword_model, "collisions": colliding_model}[name](directory)
            cache[name] = path, lift(path)
        return cache[name]

    return get


def _check_build(out: Path, graph, x: np.ndarray, concurrent: bool = True) -> dict:
    """The build in `out` is warning-free C++, names things as the graph does, and C-simulates bit-exact
    (sequentially; and concurrently over deep FIFOs)."""
    host = json.loads((out / "host.json").read_text())
    stem, hls = host["model"], out / "hls"
    assert_clean(stem)
    result = subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-DMING_CSIM", "-fsyntax-only",
                             "-I", str(hls), str(hls / f"{stem}.cpp"), str(hls / f"{stem}_tb.cpp")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["model"] == graph.name == host["graph"] and report["cpp_name"] == stem
    assert host["top"] == report["top"] == f"{stem}_top"
    assert f"set_top {stem}_top" in (hls / "run_hls.tcl").read_text()
    for entry in report["nodes"] + report["channels"]:
        assert_clean(entry["cpp_name"])
    cpp = (hls / f"{stem}.cpp").read_text()
    for node in report["nodes"]:
        assert f"static void {node['cpp_name']}(" in cpp
    expected = reference.run(graph, x)[graph.outputs[0].name]
    assert np.array_equal(run_csim(out, x)[graph.outputs[0].name], expected)
    if concurrent:
        deep = Schedule(depths={c: 100_000 for c in build_stream_graph(graph).channels})
        assert np.array_equal(csim(graph, out.with_name(out.name + "_deep"), x, deep, concurrent=True), expected)
    return report


@needs_gxx
def test_keyword_names_build_and_csim_bit_exact(models, tmp_path, monkeypatch):
    _, graph = models("keywords")
    x = np.random.default_rng(0).standard_normal((1, 4, 8, 8)).astype(np.float32)
    result = design(graph, load_board("kv260"))
    out = tmp_path / "out"
    csim(graph, out, x)  # writes the build
    report = _check_build(out, graph, x, concurrent=False)
    cpp = {n["name"]: n["cpp_name"] for n in report["nodes"]}
    sources = {n["name"]: n["source"] for n in report["nodes"]}
    assert cpp["int"] == "int_1" and cpp["for"] == "for_1" and cpp["class"] == "class_1" and cpp["main"] == "main_1"
    assert {"int", "for", "class", "main", "1x", "a-b", "a_b"} <= set(sources.values())
    assert (out / "hls" / "class_1.cpp").is_file() and json.loads((out / "host.json").read_text())["model"] == "class_1"
    markdown = (out / "report.md").read_text()
    assert "| int (C++ int_1) | int | conv |" in markdown and "| main (C++ main_1) | main | add |" in markdown
    # the names in the DATAFLOW region's C-simulation labels are the graph's
    assert '{"int", [&] { int_1(' in result.files["hls/class_1.cpp"]
    # dataflow.mlir parses, names processes as the graph does and gives the identifier where it differs
    from iree.compiler import ir

    context = ir.Context()
    context.allow_unregistered_dialects = True
    module = ir.Module.parse(result.files["dataflow.mlir"], context)
    ops = list(module.body.operations[0].regions[0].blocks[0].operations)
    attributes = {str(op.attributes["name"]).strip('"'): op.attributes for op in ops
                  if op.operation.name == "dfg.process"}
    assert set(attributes) == set(cpp)
    assert str(attributes["int"]["cpp_name"]).strip('"') == "int_1" and "cpp_name" not in attributes["a_b"]
    # a deadlock of the concurrent C-simulation (FIFOs 2 deep where the branches meet again at `main`)
    # names the processes and channels as the graph does
    monkeypatch.setenv("MING_CSIM_DEADLOCK_SECONDS", "0.2")
    with pytest.raises(CsimDeadlock) as deadlock:
        run_csim(out, x, concurrent=True)
    channels = {c["name"] for c in report["channels"]}
    for line in deadlock.value.report:
        process, channel = re.fullmatch(r"\s*(\S+) waits to (?:read from|write to) (\S+) \(.*", line).groups()
        assert process in set(cpp) | {"unpack_axis", "pack_axis", "class_1_dataflow"} and channel in channels, line
    assert any(line.split()[0] == "main" for line in deadlock.value.report), deadlock.value.report


@needs_gxx
def test_names_colliding_with_generated_identifiers_csim_bit_exact(models, tmp_path):
    _, graph = models("collisions")
    x = np.random.default_rng(1).standard_normal((1, 4, 8, 8)).astype(np.float32)
    out = tmp_path / "out"
    csim(graph, out, x)
    report = _check_build(out, graph, x)
    cpp = {n["source"]: n["cpp_name"] for n in report["nodes"] if n["kind"] != "split"}
    assert cpp["conv"] == "conv" and cpp["conv_weights"] == "conv_weights_1"
    assert cpp["net_top"] == "net_top_1" and report["top"] == "net_top"
    assert cpp["conv_to_conv_weights"] == "conv_to_conv_weights"
    channels = {c["name"]: c["cpp_name"] for c in report["channels"]}
    assert channels["conv_to_conv_weights"] == "conv_to_conv_weights_1"
    for name in ("ming", "NULL", "hls", "int8_t", "stdin"):
        assert cpp[name] == f"{name}_1"
    assert cpp["a__b"] == "a_b" and channels["a__b_to_Upper"] == "a_b_to_Upper"  # `__` is reserved
    identifiers = [n["cpp_name"] for n in report["nodes"]] + list(channels.values())
    assert len({i.lower() for i in identifiers}) == len(identifiers)


def test_builds_are_byte_identical(models):
    path, graph = models("collisions")
    first = design(graph, load_board("kv260")).files
    assert design(graph, load_board("kv260")).files == first
    assert design(lift(path), load_board("kv260")).files == first


@needs_gxx
@pytest.mark.parametrize("file_name, stem", [
    ("my-model.onnx", "my_model"), ("123.onnx", "n_123"), ("int.onnx", "int_1"), ("ming_stream.onnx", "ming_stream_1"),
    ("ming_check.onnx", "ming_check_1"),
])
def test_model_names_build_and_csim_bit_exact(tmp_path, file_name, stem):
    """The design is named after the model file (converters give every model the same graph name)."""
    g = zoo._Graph("single", (1, 2, 8, 8))
    path = _quantize(g, g.conv("x", "conv", 4, pads=1), tmp_path / file_name, "tf2onnx")
    graph = lift(path)
    x = np.random.default_rng(2).standard_normal((1, 2, 8, 8)).astype(np.float32)
    out = tmp_path / "out"
    csim(graph, out, x)
    _check_build(out, graph, x, concurrent=False)
    assert json.loads((out / "host.json").read_text())["model"] == stem
    assert sorted(p.name for p in (out / "hls").iterdir()) == sorted(
        [f"{stem}.cpp", f"{stem}.h", f"{stem}_weights.h", f"{stem}_tb.cpp", "ming_stream.h", "ming_widths.h", "ming_numerics.h",
         "ming_window.h", "ming_check.h", "ming_hls_stream.h", "run_hls.tcl", "check_csynth.tcl", "input.bin",
         "expected.bin"])


def test_name_option_names_the_design(tmp_path):
    g = zoo._Graph("single", (1, 2, 8, 8))
    path = _quantize(g, g.conv("x", "conv", 4, pads=1), tmp_path / "model.onnx")
    result = ming("build", path, "--name", "kws-v2", "-o", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "out" / "host.json").read_text())["model"] == "kws_v2"
    assert (tmp_path / "out" / "hls" / "kws_v2.cpp").is_file()
    refused = ming("build", path, "--name", "a b", "-o", tmp_path / "out2")
    assert refused.returncode == 2 and "--name 'a b'" in refused.stderr and not (tmp_path / "out2").exists()


def ming(*args):
    return subprocess.run([sys.executable, "-m", "ming_py.cli", *map(str, args)], capture_output=True, text=True)


@needs_gxx
def test_cli_build_pins_and_csim_with_keyword_names(models, tmp_path):
    """The finding: a node named `int` built with exit 0 and then failed to compile. Pins name the node."""
    path, graph = models("keywords")
    out = tmp_path / "out"
    build = ming("build", path, "--board", "kv260", "-o", out, "-q", "--set", "int.unroll.oc=2",
                 "--set", "int_to_for.depth=5")
    assert build.returncode == 0, build.stderr
    report = json.loads((out / "report.json").read_text())
    node = next(n for n in report["nodes"] if n["name"] == "int")
    assert node["schedule"]["unroll"]["oc"] == 2 and node["cpp_name"] == "int_1"
    assert next(c for c in report["channels"] if c["name"] == "int_to_for")["fifo_depth"] == 5
    cpp = (out / "hls" / "class_1.cpp").read_text()
    body = cpp[cpp.index("static void int_1("):cpp.index("static void for_1(")]
    assert "constexpr int UNROLL_OC = 2," in body
    assert ', 5> int_to_for("int_to_for");' in cpp
    x = np.random.default_rng(3).standard_normal((1, 4, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    run = ming("csim", out, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy", "-q")
    assert run.returncode == 0, run.stderr
    ref = ming("reference", path, "--input", tmp_path / "x.npy", "--output", tmp_path / "r.npy")
    assert ref.returncode == 0, ref.stderr
    assert np.array_equal(np.load(tmp_path / "y.npy"), np.load(tmp_path / "r.npy"))
