"""The stream trace (`ming csim --trace`, `ming_py.trace.locate`): the first stream where a build's C-simulation
leaves the golden model names the process that wrote it; and `ming reference --dump [--framework]`."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ming_py import cli
from ming_py.dataflow import Channel
from ming_py.line_buffers import build_stream_graph
from ming_py.pipeline import lift
from ming_py.reference import run_integer
from ming_py.trace import TRACE_MAGIC, channel_values, compare_channel, locate, read_trace

ROOT = Path(__file__).resolve().parent.parent
TINY_CNN = ROOT / "examples" / "tiny_cnn.onnx"
DS_CNN_TFLITE = ROOT / "tests" / "data" / "converted" / "ds_cnn.tflite"


def ming(capsys, *args) -> subprocess.CompletedProcess:
    """`ming ARGS` in this process (the IREE import and the compiled C-simulations shared with the other tests)."""
    code = cli.main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, captured.out, captured.err)


def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def tiny():
    graph = lift(TINY_CNN)
    return graph, build_stream_graph(graph)


def image(graph, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, graph.shape_of(graph.inputs[0].tensor))


def copy_build(example_build: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(example_build, out)
    return out


def edit_first_weight(out: Path, array: str) -> None:
    """The first int8 of the constant array `array` in hls/tiny_cnn_weights.h set far from its value."""
    header = out / "hls" / "tiny_cnn_weights.h"
    text = header.read_text()
    declared = re.search(rf"int8_t {array}\[[^=]*=\s*\{{\s*\{{?\s*(-?\d+)", text)
    assert declared, f"{array} not found in {header}"
    old = int(declared[1])
    header.write_text(text[:declared.start(1)] + str(127 if old < 0 else -128) + text[declared.end(1):])


def write_fewer_tokens(out: Path, process: str, tokens: int) -> None:
    """`process`'s first `out.write(...)` in hls/tiny_cnn.cpp done only for its first `tokens` tokens."""
    source = out / "hls" / "tiny_cnn.cpp"
    text = source.read_text()
    start = text.index(f"static void {process}(")
    write = re.compile(r"out\.write\(([^;]*)\);").search(text, start)
    text = (text[:write.start()] + f"if (trace_test_written++ < {tokens}) out.write({write[1]});"
            + text[write.end():])
    source.write_text(text.replace(f"static void {process}(", f"static int trace_test_written = 0;\n"
                                                             f"static void {process}(", 1))


def test_trace_names_the_conv_whose_weight_was_edited(example_build, tmp_path, tiny):
    graph, stream_graph = tiny
    out = copy_build(example_build, tmp_path)
    edit_first_weight(out, "conv2_weights")
    q = image(graph)
    divergence = locate(out / "hls", "tiny_cnn", graph, stream_graph, q)
    assert divergence is not None
    assert (divergence.process, divergence.channel) == ("conv2", "conv2_to_conv3")  # not conv1 or pool1 before it
    golden = run_integer(graph, {graph.inputs[0].tensor: q})["conv2_out"]
    row, column, channel = divergence.position
    assert divergence.expected == golden[channel, row, column] != divergence.got
    assert 0 < divergence.differing <= divergence.values == golden.size
    assert divergence.tokens_written == divergence.tokens_expected
    line = str(divergence)
    assert "\n" not in line
    assert re.fullmatch(rf"conv2 writes conv2_to_conv3 differently: token {divergence.token} \(row {row}, column "
                        rf"{column}, channel {channel}\): expected {divergence.expected}, got {divergence.got} "
                        rf"\({divergence.differing} of {golden.size} values differ\)", line), line


def test_trace_of_the_build_as_ming_wrote_it_finds_every_stream_equal(example_build, tiny):
    graph, stream_graph = tiny
    assert locate(example_build / "hls", "tiny_cnn", graph, stream_graph, image(graph, seed=3)) is None


def test_trace_names_a_process_that_writes_too_few_tokens(example_build, tmp_path, tiny):
    """conv2 stops writing after 5 tokens: conv3 then reads an empty stream and the run aborts; the tokens written
    until then are in the trace, and conv2 is named."""
    graph, stream_graph = tiny
    out = copy_build(example_build, tmp_path)
    write_fewer_tokens(out, "conv2", 5)
    divergence = locate(out / "hls", "tiny_cnn", graph, stream_graph, image(graph))
    assert divergence is not None and (divergence.process, divergence.channel) == ("conv2", "conv2_to_conv3")
    assert divergence.tokens_written == 5 < divergence.tokens_expected
    assert (divergence.token, divergence.got) == (5, None)  # the 5 tokens are right: the first missing one is named
    assert str(divergence).startswith(f"conv2 writes only 5 of {divergence.tokens_expected} tokens to "
                                      "conv2_to_conv3: the first missing is token 5 (row ")


def test_read_trace_joins_the_blocks_of_a_stream_and_ignores_a_block_cut_short():
    def block(name: str, tokens: list[list[int]]) -> bytes:
        return (struct.pack("=I", len(name)) + name.encode() + struct.pack("=IQ", len(tokens[0]), len(tokens))
                + np.array(tokens, np.int8).tobytes())

    data = TRACE_MAGIC + block("a_to_b", [[1, 2], [3, 4]]) + block("s", [[-1]]) + block("a_to_b", [[5, 6]])
    traced = read_trace(data + block("cut", [[7, 8], [9, 10]])[:-3])
    assert sorted(traced) == ["a_to_b", "s"]
    assert traced["a_to_b"].tolist() == [[1, 2], [3, 4], [5, 6]] and traced["s"].tolist() == [[-1]]


def test_compare_channel_positions_a_split_output_in_its_tensor():
    """A channel carrying channels 4..7 of a (8, 2, 3) tensor: value i of the stream is pixel i // 4, channel
    4 + i % 4; a difference at stream value 9 is token 4 of 2 lanes, row 0, column 2, channel 5."""
    tensor = np.arange(8 * 2 * 3).reshape(8, 2, 3) % 100
    channel = Channel("split_to_b", "split", "b", 4, 2, 3)
    expected = channel_values(tensor, 4, channel)
    assert expected[:4].tolist() == tensor[4:, 0, 0].tolist()
    got = expected.copy()
    got[9] += 1
    divergence = compare_channel(channel, 4, expected, got.astype(np.int8).reshape(-1, 2))
    assert (divergence.token, divergence.position, divergence.differing) == (4, (0, 2, 5), 1)
    assert compare_channel(channel, 4, expected, expected.astype(np.int8).reshape(-1, 2)) is None


def test_csim_trace_prints_the_process_whose_stream_differs(example_build, tmp_path):
    """Through the installed command, as a user runs it."""
    out = copy_build(example_build, tmp_path)
    edit_first_weight(out, "conv2_weights")
    np.save(tmp_path / "x.npy", np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32))
    result = subprocess.run([sys.executable, "-m", "ming_py.cli", "csim", str(out), "--input", str(tmp_path / "x.npy"),
                             "--output", str(tmp_path / "y.npy"), "--sequential", "--trace", "-q"],
                            capture_output=True, text=True)
    assert result.returncode == 3, result.stderr  # the C-simulation ran; its output differs
    trace, verdict = result.stdout.splitlines()
    assert re.fullmatch(r"trace: conv2 writes conv2_to_conv3 differently: token \d+ \(row \d+, column \d+, channel "
                        r"\d+\): expected -?\d+, got -?\d+ \(\d+ of 256 values differ\)", trace), trace
    assert re.fullmatch(r"verdict: \d+ of 10 output values differ from ming reference \(first: output '\w+' at "
                        r"\(\d+(, \d+)*\): expected \S+, got \S+\)", verdict), verdict
    assert (tmp_path / "y.npy").is_file()  # the C-simulation's output is written as without --trace


def test_csim_ends_with_a_verdict(example_build, tmp_path, capsys):
    out = copy_build(example_build, tmp_path)
    np.save(tmp_path / "x.npy", np.random.default_rng(2).standard_normal((3, 3, 16, 16)).astype(np.float32))
    args = ("csim", out, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy", "-q")
    result = ming(capsys, *args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "verdict: the C-simulation equals ming reference on all 30 output values"
    edit_first_weight(out, "conv2_weights")
    result = ming(capsys, *args)
    assert result.returncode == 3, result.stderr
    assert re.fullmatch(r"verdict: \d+ of 30 output values differ from ming reference \(first: output '\w+' at "
                        r"\(\d+(, \d+)*\): expected \S+, got \S+\)", result.stdout.splitlines()[-1]), result.stdout


def test_csim_trace_needs_the_model_the_build_was_made_from(example_build, tmp_path, capsys):
    out = copy_build(example_build, tmp_path)
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    args = ("csim", out, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy", "--sequential", "-q")
    host_file = out / "host.json"
    host = json.loads(host_file.read_text())
    assert host["model_file"]["path"] == str(TINY_CNN)
    host_file.write_text(json.dumps(host | {"model_file": {"path": str(tmp_path / "gone.onnx"),
                                                           "sha256": host["model_file"]["sha256"]}}))
    assert_one_line_error(ming(capsys, *args, "--trace"), "gone.onnx", "is gone", "--model PATH")
    host_file.write_text(json.dumps(host | {"model_file": {"path": str(TINY_CNN), "sha256": "0" * 64}}))
    assert_one_line_error(ming(capsys, *args, "--trace"), "has changed since the build", "--model PATH")
    assert not (tmp_path / "y.npy").exists()  # refused before the C-simulation
    assert_one_line_error(ming(capsys, *args, "--model", tmp_path / "gone.onnx"), "gone.onnx")
    assert not (tmp_path / "y.npy").exists()
    result = ming(capsys, *args)  # without a model there is no verdict, and it says why
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith("verdict: none (the model ") and "--model PATH" in result.stdout
    result = ming(capsys, *args, "--trace", "--model", TINY_CNN)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ("trace: every stream equals the golden model\n"
                             "verdict: the C-simulation equals ming reference on all 10 output values\n")


# ---- ming reference --dump [--framework] -------------------------------------------------------------------


def test_reference_dump_writes_every_golden_tensor_named_after_the_model(tmp_path, tiny, capsys):
    graph, _ = tiny
    x = np.random.default_rng(2).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    dump = tmp_path / "dump"
    result = ming(capsys, "reference", TINY_CNN, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy",
                  "--dump", dump)
    assert result.returncode == 0, result.stderr
    index = json.loads((dump / "index.json").read_text())
    assert sorted(p.name for p in dump.iterdir()) == sorted([*index, "index.json"])
    by_ming_tensor = {entry["ming_tensor"]: (name, entry) for name, entry in index.items()}
    assert by_ming_tensor["conv2_out"][0] == "relu2_out_QuantizeLinear_Output.npy"  # the int8 tensor after conv2
    assert by_ming_tensor["x_q"][0] == "x_QuantizeLinear_Output.npy"
    from ming_py.contract.ming_host import accelerator_input

    golden = run_integer(graph, {graph.inputs[0].tensor: accelerator_input(x, graph.inputs[0])
                                 .reshape(graph.shape_of(graph.inputs[0].tensor))})
    for tensor in ["x_q"] + [n.output.tensor for n in graph.kernels()]:
        name, entry = by_ming_tensor[tensor]
        saved = np.load(dump / name)
        assert saved.dtype == np.int8 and entry["dtype"] == "int8" and entry["shape"] == list(saved.shape)
        assert np.array_equal(saved, golden[tensor]), tensor
    conv1 = by_ming_tensor["conv1_out"][1]
    assert conv1["tensor"] == "relu1_out_QuantizeLinear_Output" and conv1["zero_point"] == -128 and conv1["scale"] > 0


def test_reference_dump_takes_only_a_new_or_empty_directory(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    args = ("reference", TINY_CNN, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy")
    full = tmp_path / "full"
    full.mkdir()
    (full / "mine.txt").write_text("mine")
    assert_one_line_error(ming(capsys, *args, "--dump", full), "is not empty")
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    assert_one_line_error(ming(capsys, *args, "--dump", tmp_path / "link"), "symbolic link")
    assert_one_line_error(ming(capsys, *args, "--framework"), "--framework", "--dump DIR")
    assert list(target.iterdir()) == [] and [p.name for p in full.iterdir()] == ["mine.txt"]
    assert not (tmp_path / "y.npy").exists()


@pytest.mark.parametrize("model, framework, shared", [(TINY_CNN, "onnxruntime", 7), (DS_CNN_TFLITE, "LiteRT", 10)])
def test_reference_framework_finds_every_shared_tensor_equal(tmp_path, model, framework, shared, capsys):
    """onnxruntime (QDQ, channels first) and LiteRT's reference kernels (channels last) compared tensor by tensor
    in ming's layout: a wrong layout or zero point would make them differ."""
    graph = lift(model)
    shape, dtype = graph.inputs[0].onnx_shape, graph.inputs[0].dtype
    rng = np.random.default_rng(4)
    x = rng.integers(-128, 128, shape).astype(np.int8) if dtype == "int8" else rng.standard_normal(shape).astype(
        np.float32)
    np.save(tmp_path / "x.npy", x)
    result = ming(capsys, "reference", model, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy",
                  "--dump", tmp_path / "dump", "--framework")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == f"framework: all {shared} tensors shared with {framework} agree"


def test_reference_framework_names_the_first_tensor_that_differs(tmp_path, monkeypatch, capsys):
    """The framework's conv2 and fc outputs made to differ: the line names conv2's, the first in dataflow order,
    and the exit code is 3."""
    from ming_py import framework_tensors

    real = framework_tensors.framework_values

    def differing(path, x, names):
        framework, values = real(path, x, names)
        for name in ("fc_out_QuantizeLinear_Output", "relu2_out_QuantizeLinear_Output"):
            values[name] = values[name].copy()
            values[name].reshape(-1)[5] ^= 1
        return framework, values

    monkeypatch.setattr(framework_tensors, "framework_values", differing)
    np.save(tmp_path / "x.npy", np.random.default_rng(5).standard_normal((1, 3, 16, 16)).astype(np.float32))
    result = ming(capsys, "reference", TINY_CNN, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npy",
                  "--dump", tmp_path / "dump", "--framework")
    line, note = result.stdout.splitlines()[-2:]
    assert result.returncode == 3, result.stderr
    # conv2 runs as QLinearConv in the model as it is, in float once its tensors are exposed as outputs
    assert note.startswith("framework: note: exposing the tensors as outputs makes onnxruntime run Conv 'conv2'")
    assert re.fullmatch(r"framework: relu2_out_QuantizeLinear_Output \(ming's conv2_out\) differs from onnxruntime: "
                        r"1 of 256 values, the first at \[0, 1, 1\] of ming's \[16, 4, 4\]: ming -?\d+, onnxruntime "
                        r"-?\d+", line), line
