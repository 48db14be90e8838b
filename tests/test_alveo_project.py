"""The Alveo kernel flow (OUT/vitis/): the system C simulation runs mm2s, the accelerator and s2mm on device
buffers and gives the golden model's output for every image of a batch; it fails on any framing fault between
the kernels; the Makefile calls v++ with the platform, kernels and link configuration; link.cfg connects the
ports the kernels declare and puts the buffers in each board's memory bank."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ming_py import reference
from ming_py.boards import load_board
from ming_py.build import design
from ming_py.csim import to_stream_order
from ming_py.emit.alveo import alveo_files, alveo_kernels
from ming_py.emit.identifiers import cpp_names
from ming_py.errors import MingError
from ming_py.line_buffers import build_stream_graph
from ming_py.output import write_tree
from tcl_stubs import Synthesis, csynth_files, provide_tclsh, write_csynth

BANKS = {"u50": "HBM[0]", "u55c": "HBM[0]", "u280": "HBM[0]", "u250": "DDR[0]"}
MODELS = ("tiny_cnn", "residual_block")  # residual_block: two branches joined by an Add


@pytest.fixture(scope="module")
def project(lifted, tmp_path_factory):
    """project(model) -> (OUT, its design) for the u55c, the hls/ and vitis/ trees written once."""
    cache = {}

    def build(name: str):
        if name not in cache:
            graph, board = lifted(name), load_board("u55c")
            result = design(graph, board)
            out = tmp_path_factory.mktemp(name) / "out"
            assert all(name in result.files for name in alveo_files(build_stream_graph(graph), board))
            write_tree(result.files, out)
            cache[name] = out, result
        return cache[name]

    return build


@pytest.fixture(scope="module")
def system_csim(project):
    """system_csim(model) -> the system C simulation, built by `make csim`."""
    cache = {}

    def build(name: str) -> Path:
        if name not in cache:
            vitis = project(name)[0] / "vitis"
            run = subprocess.run(["make", "-s", "csim"], cwd=vitis, capture_output=True, text=True)
            assert run.returncode == 0, run.stderr
            cache[name] = vitis / f"{name}_system_csim"
        return cache[name]

    return build


def _stream_shape(stream_graph, port) -> list[int]:
    c = stream_graph.channels[port.channel]
    return [c.channels, c.height, c.width]


def pack_words(images: np.ndarray) -> bytes:
    """(images, N) int8 values -> the device buffer: ceil(N/8) little-endian 64-bit words per image, the last
    one zero-padded (value i of an image in byte i % 8 of word i / 8)."""
    count, n = images.shape
    padded = np.zeros((count, -(-n // 8) * 8), dtype=np.uint8)
    padded[:, :n] = images.astype(np.int8).view(np.uint8)
    return padded.tobytes()


def unpack_words(data: bytes, count: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The device buffer -> ((count, N) int8 values, the padding bytes after each image's last value)."""
    rows = np.frombuffer(data, dtype=np.uint8).reshape(count, -1)
    return rows[:, :n].view(np.int8), rows[:, n:]


def run_system(binary: Path, tmp_path: Path, data: bytes, images: int | str) -> subprocess.CompletedProcess:
    (tmp_path / "in.bin").write_bytes(data)
    return subprocess.run([str(binary), str(tmp_path / "in.bin"), str(tmp_path / "out.bin"), str(images)],
                          capture_output=True, text=True)


@pytest.mark.parametrize("images", [1, 8])
@pytest.mark.parametrize("name", MODELS)
def test_system_csim_gives_the_golden_output_for_every_image(project, system_csim, tmp_path, name, images):
    _, result = project(name)
    graph, stream_graph = result.graph, result.stream_graph
    inp, outp = _stream_shape(stream_graph, stream_graph.input), _stream_shape(stream_graph, stream_graph.outputs[0])
    rng = np.random.default_rng(images)
    q = rng.integers(-128, 128, size=(images, *graph.shape_of(graph.inputs[0].tensor)), dtype=np.int64)
    golden = np.stack([to_stream_order(reference.run_integer(graph, {graph.inputs[0].tensor: x})[graph.outputs[0].tensor],
                                       outp) for x in q]).astype(np.int8)
    run = run_system(system_csim(name), tmp_path, pack_words(np.stack([to_stream_order(x, inp) for x in q])), images)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"PASS: {images} image")
    values, padding = unpack_words((tmp_path / "out.bin").read_bytes(), images, golden.shape[1])
    assert (values == golden).all()
    assert not padding.any()
    assert len(set(golden.ravel().tolist())) > 1  # not a degenerate output


@pytest.mark.parametrize("words", [-1, 1])
def test_system_csim_refuses_a_wrong_size_input(project, system_csim, tmp_path, words):
    _, result = project("tiny_cnn")
    n = result.stream_graph.channels[result.stream_graph.input.channel].values
    data = bytes(2 * -(-n // 8) * 8 + 8 * words)
    run = run_system(system_csim("tiny_cnn"), tmp_path, data, 2)
    assert run.returncode == 1
    assert run.stderr.count("\n") == 1 and f"holds {len(data)} bytes, expected {2 * -(-n // 8) * 8}" in run.stderr
    assert not (tmp_path / "out.bin").exists()


@pytest.mark.parametrize("argv", [[], ["in.bin", "out.bin"], ["in.bin", "out.bin", "0"], ["in.bin", "out.bin", "-3"],
                                  ["in.bin", "out.bin", "2x"], ["in.bin", "out.bin", "1", "extra"]])
def test_system_csim_usage_errors_exit_2(system_csim, tmp_path, argv):
    run = subprocess.run([str(system_csim("tiny_cnn")), *argv], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.startswith("usage: ")


# An accelerator stand-in with one fault, chosen at run time by the environment variable FAULT; its output values
# are zero. Linked with the real data movers and system testbench in place of ../hls/<model>.cpp.
FAULTY_ACCELERATOR = r"""
#include <cstdlib>
#include <string>
#include "data_movers.h"

void TOP(hls::stream<ming::AxisWord>& s_axis, hls::stream<ming::AxisWord>& m_axis) {
  const char* chosen = std::getenv("FAULT");
  const std::string fault = chosen ? chosen : "";
  bool ends_packet = false;
  for (int i = 0; i < kInputWords - (fault == "short_read" ? 1 : 0); i++) {
    ends_packet = s_axis.read().last;
  }
  const int words = kOutputWords + (fault == "extra_word" ? 1 : 0);
  for (int i = 0; i < words; i++) {
    const bool image_end = i == words - 1;
    ming::AxisWord beat;
    beat.data = fault == "padding" && image_end ? uint64_t{1} << 63 : 0;
    beat.keep = fault == "partial_keep" && image_end ? 0x03 : 0xFF;
    beat.strb = 0xFF;
    beat.user = fault == "tuser" && image_end;
    beat.last = image_end && (ends_packet || fault == "tlast_per_image");
    m_axis.write(beat);
  }
}
"""


@pytest.fixture(scope="module")
def faulty_system(project, tmp_path_factory):
    out, result = project("tiny_cnn")
    vitis, top = out / "vitis", cpp_names(result.stream_graph).top
    build = tmp_path_factory.mktemp("faulty")
    (build / "accelerator.cpp").write_text(FAULTY_ACCELERATOR.replace("TOP", top))
    binary = build / "faulty_system"
    subprocess.run(["g++", "-std=c++17", "-O1", "-DMING_CSIM", "-I", str(vitis), "-I", str(out / "hls"),
                    str(vitis / "mm2s.cpp"), str(vitis / "s2mm.cpp"), str(vitis / "system_tb.cpp"),
                    str(build / "accelerator.cpp"), "-o", str(binary)], check=True)
    return binary, result


@pytest.mark.parametrize("fault,message", [
    ("tlast_per_image", "tiny_cnn_top -> s2mm: TLAST set on word 1 (image 0) of a 6-word packet"),
    ("partial_keep", "tiny_cnn_top -> s2mm: word 1 (image 0) has TKEEP/TSTRB 0x03/0xff, expected 0xff/0xff"),
    ("tuser", "tiny_cnn_top -> s2mm: TUSER set on word 1 (image 0)"),
    ("padding", "output image 0: padding byte 7 of output 0's last word is not zero"),
    ("extra_word", "tiny_cnn_top -> s2mm: 9 words, expected 6 (3 images of 2 words)"),
    ("short_read", "tiny_cnn_top input: 3 words left over"),
])
def test_system_csim_fails_on_a_framing_fault(faulty_system, tmp_path, monkeypatch, fault, message):
    binary, result = faulty_system
    n = result.stream_graph.channels[result.stream_graph.input.channel].values
    data = bytes(3 * -(-n // 8) * 8)
    monkeypatch.delenv("FAULT", raising=False)
    assert run_system(binary, tmp_path, data, 3).returncode == 0  # the stand-in itself is sound
    monkeypatch.setenv("FAULT", fault)
    run = run_system(binary, tmp_path, data, 3)
    assert run.returncode == 1
    assert run.stderr.count("\n") == 1 and run.stderr.startswith(message), run.stderr


def make_dry_run(vitis: Path, *args: str) -> list[list[str]]:
    """The commands `make` would run, each as its list of words."""
    run = subprocess.run(["make", "-n", *args], cwd=vitis, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return [shlex.split(line) for line in run.stdout.splitlines() if line.strip()]


def _option(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


@pytest.mark.parametrize("target", ["hw", "hw_emu"])
def test_makefile_builds_the_xclbin_with_v_plus_plus(project, target):
    out, result = project("tiny_cnn")
    board, vitis = result.board, out / "vitis"
    commands = make_dry_run(vitis, *([] if target == "hw" else [f"TARGET={target}"]))
    compiles = {_option(c, "-k"): c for c in commands if c[:2] == ["v++", "-c"]}
    sources = {"mm2s": "mm2s.cpp", "tiny_cnn_top": "../hls/tiny_cnn.cpp", "s2mm": "s2mm.cpp"}
    assert set(compiles) == set(sources)
    for kernel, words in compiles.items():
        assert _option(words, "-t") == target and _option(words, "--platform") == board.platform
        assert _option(words, "-o") == f"{kernel}.{target}.xo" and words[-1] == sources[kernel]
        assert _option(words, "--hls.clock") == f"300000000:{kernel}" and "-I../hls" in words
        assert _option(words, "--advanced.prop") == f"kernel.{kernel}.kernel_flags=-std=c++17"
        assert (vitis / words[-1]).is_file()
    [link] = [c for c in commands if c[:2] == ["v++", "-l"]]
    assert _option(link, "-t") == target and _option(link, "--platform") == board.platform
    assert _option(link, "--config") == "link.cfg" and _option(link, "--kernel_frequency") == "300"
    assert _option(link, "-o") == f"tiny_cnn.{target}.xclbin"
    assert sorted(w for w in link if w.endswith(".xo")) == sorted(f"{k}.{target}.xo" for k in sources)
    copies = [c for c in commands if c[0] == "cp"]
    emconfig = [c for c in commands if c[0] == "emconfigutil"]
    if target == "hw":
        assert copies == [["cp", "tiny_cnn.hw.xclbin", "../deploy/tiny_cnn.xclbin"]] and not emconfig
    else:
        assert not copies and emconfig == [["emconfigutil", "--platform", board.platform, "--od", "."]]
    assert commands.index(link) > max(commands.index(c) for c in compiles.values())


def test_makefile_deploys_the_hw_xclbin_and_takes_another_platform(project):
    vitis = project("tiny_cnn")[0] / "vitis"
    commands = make_dry_run(vitis, "deploy", "TARGET=hw_emu", "PLATFORM=my_platform")
    assert {_option(c, "-t") for c in commands if c[0] == "v++"} == {"hw"}
    assert {_option(c, "--platform") for c in commands if c[0] == "v++"} == {"my_platform"}
    assert commands[-1] == ["cp", "tiny_cnn.hw.xclbin", "../deploy/tiny_cnn.xclbin"]
    run = subprocess.run(["make", "-n", "TARGET=sw_emu"], cwd=vitis, capture_output=True, text=True)
    assert run.returncode != 0 and "TARGET must be hw or hw_emu, not 'sw_emu'" in run.stderr


def test_makefile_documents_its_use(project):
    text = (project("tiny_cnn")[0] / "vitis" / "Makefile").read_text()
    header = "".join(line for line in text.splitlines(keepends=True) if line.startswith("#"))
    for words in ("make TARGET=hw_emu", "make csim", "make clean", "IN.bin OUT.bin IMAGES",
                  "xilinx_u55c_gen3x16_xdma_3_202210_1", "Vitis 2022.2 or later", "XRT 2022.2 or later", "hw_emu"):
        assert words in header
    assert re.search(r"^PLATFORM \?= xilinx_u55c_gen3x16_xdma_3_202210_1$", text, re.M)
    assert re.search(r"^TARGET \?= hw$", text, re.M)


# v++ -c as far as the accelerator's .xo rule sees it: writes the -o file and, for the kernel -k, the csynth
# reports of $CSYNTH_FIXTURE where Vitis 2022.2 leaves them, <temp_dir>/<kernel>/<kernel>/<kernel>/solution/syn/report.
V_PLUS_PLUS_STUB = """#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    -o) output=$2; shift ;;
    -k) kernel=$2; shift ;;
    --temp_dir) temp_dir=$2; shift ;;
  esac
  shift
done
reports=$temp_dir/$kernel/$kernel/$kernel/solution/syn/report
mkdir -p "$reports" && cp "$CSYNTH_FIXTURE"/* "$reports" && echo xo > "$output"
"""


def make_accelerator_xo(vitis: Path, tmp_path: Path, reports: dict[str, str]) -> subprocess.CompletedProcess:
    """`make <top>.hw.xo` in a copy of `vitis` (and ../hls), v++ -c stubbed to leave the csynth `reports`."""
    bin_dir, fixture = tmp_path / "bin", write_csynth(tmp_path / "csynth", reports)
    bin_dir.mkdir()
    (bin_dir / "v++").write_text(V_PLUS_PLUS_STUB)
    (bin_dir / "v++").chmod(0o755)
    provide_tclsh(bin_dir)
    copy = tmp_path / "out"
    shutil.copytree(vitis, copy / "vitis")
    shutil.copytree(vitis.parent / "hls", copy / "hls")
    env = os.environ | {"PATH": f"{bin_dir}:{os.environ['PATH']}", "CSYNTH_FIXTURE": str(fixture)}
    return subprocess.run(["make", "tiny_cnn_top.hw.xo"], cwd=copy / "vitis", capture_output=True, text=True, env=env)


def test_makefile_checks_the_accelerators_csynth_and_deletes_an_xo_that_misses_the_plan(project, tmp_path):
    """The accelerator's .xo rule runs ../hls/check_csynth.tcl on the reports v++ -c leaves under its --temp_dir:
    a synthesis as report.json plans keeps the .xo, one loop over its planned II stops make and deletes it."""
    out, _ = project("tiny_cnn")
    report = json.loads((out / "report.json").read_text())
    run = make_accelerator_xo(out / "vitis", tmp_path / "planned", csynth_files(report))
    assert run.returncode == 0, run.stderr
    assert "C synthesis as planned" in run.stdout
    assert (tmp_path / "planned" / "out" / "vitis" / "tiny_cnn_top.hw.xo").is_file()
    node = report["nodes"][1]
    slower = str(node["pipeline"]["ii"] + 1)
    run = make_accelerator_xo(out / "vitis", tmp_path / "slow", csynth_files(report, Synthesis(ii={node["cpp_name"]: slower})))
    assert run.returncode != 0
    assert f"{node['cpp_name']}: loop {node['pipeline']['loop']} at II {slower}, planned {node['pipeline']['ii']}" in run.stderr
    assert not (tmp_path / "slow" / "out" / "vitis" / "tiny_cnn_top.hw.xo").exists()


def _declared_parameters(source: str, function: str) -> list[str]:
    """The parameter names of `function`'s definition or declaration in C++ `source`."""
    match = re.search(rf"\bvoid {function}\(([^)]*)\)", source)
    return [re.findall(r"\w+", p)[-1] for p in match.group(1).split(",")]


@pytest.mark.parametrize("board_name", sorted(BANKS))
def test_link_config_connects_the_kernels_and_places_the_buffers(project, board_name):
    out, result = project("tiny_cnn")
    files = alveo_files(result.stream_graph, load_board(board_name))
    lines = [line for line in files["vitis/link.cfg"].splitlines() if line and not line.startswith("#")]
    bank = BANKS[board_name]
    assert lines == [
        "[connectivity]",
        "nk=mm2s:1:mm2s_1",
        "nk=tiny_cnn_top:1:tiny_cnn_top_1",
        "nk=s2mm:1:s2mm_1",
        "stream_connect=mm2s_1.m_axis:tiny_cnn_top_1.s_axis",
        "stream_connect=tiny_cnn_top_1.m_axis:s2mm_1.s_axis",
        f"sp=mm2s_1.src:{bank}",
        f"sp=s2mm_1.dst:{bank}",
    ]
    # Every port link.cfg names is a parameter of its kernel.
    assert _declared_parameters(files["vitis/mm2s.cpp"], "mm2s") == ["src", "m_axis", "images"]
    assert _declared_parameters(files["vitis/s2mm.cpp"], "s2mm") == ["s_axis", "dst", "images"]
    hls_header = (out / "hls" / "tiny_cnn.h").read_text()
    assert _declared_parameters(hls_header, "tiny_cnn_top") == ["s_axis", "m_axis"]


@pytest.mark.parametrize("board", [load_board("kv260"), replace(load_board("u55c"), alveo=None),
                                   replace(load_board("u55c"), platform=None)], ids=["zynq", "no_alveo", "no_platform"])
def test_boards_without_the_alveo_flow_are_refused(lifted, board):
    with pytest.raises(MingError) as error:
        alveo_files(build_stream_graph(lifted("tiny_cnn")), board)
    assert "\n" not in str(error.value) and f"board {board.name} has no Alveo kernel flow" in str(error.value)


def test_the_host_driver_finds_these_kernels_and_sources(project):
    """deploy/accelerator.json (what the host driver reads) names the data movers' kernels, the xclbin the Makefile
    deploys and the system C simulation's sources."""
    out, result = project("tiny_cnn")
    meta = json.loads((out / "deploy" / "accelerator.json").read_text())
    kernels = alveo_kernels(result.stream_graph)
    assert meta["kernels"] == {"mm2s": kernels.mm2s, "s2mm": kernels.s2mm}
    assert make_dry_run(out / "vitis", "deploy")[-1] == ["cp", "tiny_cnn.hw.xclbin", f"../deploy/{meta['xclbin']}"]
    assert {Path(s).name for s in meta["csim"]["sources"]} == {"mm2s.cpp", "s2mm.cpp", "system_tb.cpp", "tiny_cnn.cpp"}
    assert all((out / "deploy" / source).is_file() for source in meta["csim"]["sources"])
