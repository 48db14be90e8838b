"""Models with several outputs (detection heads): every output bit-exact with onnxruntime through the golden
model, the C-simulation, the CLI and the deployment driver.

The accelerator sends an image's outputs one after the other on its one AXI4-Stream output (the output
record), in the order they finish; the FIFO of every later output holds what its producer makes while the
outputs before it are sent, or the processes it shares with them stop (`line_buffers.fifo.record_tokens`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import zoo
from ming_py import reference
from ming_py.build import BuildOptions, design
from ming_py.ilp.explore import explore
from ming_py.csim import CsimDeadlock, compile_csim, run_csim
from ming_py.errors import MingError
from ming_py.emit.reports import report
from ming_py.line_buffers import build_stream_graph
from ming_py.line_buffers.fifo import Dependences, fifo_bits, record_tokens, unit_specs
from ming_py.output import write_tree
from ming_py.pipeline import lift
from ming_py.progress import Progress
from ming_py.runtime.ming_driver import Accelerator
from ming_py.adapters import pack_adapter, record_loop
from ming_py.simulate import simulate
from ming_py.ort_session import onnxruntime_session

INPUT_SHAPE = (1, 3, 8, 8)


def _two_heads(g: zoo._Graph) -> list[str]:
    """A stem shared by a full-resolution head and a stride-2 conv with its own head: YOLO-tiny's two
    outputs at two resolutions, from different depths of one fan-out."""
    stem = g.relu(g.conv("x", "stem", 8, kernel=3, pads="same"), "stem_relu")
    down = g.relu(g.conv(stem, "down", 8, kernel=3, stride=2, pads=1), "down_relu")
    return [g.conv(stem, "head_a", 6, kernel=3, pads="same"), g.conv(down, "head_b", 4, kernel=3, pads="same")]


def _inner_output(g: zoo._Graph) -> list[str]:
    """Output y0 is a layer's result that a later layer reads too (a fan-out to the output and a layer)."""
    stem = g.relu(g.conv("x", "stem", 8, kernel=3, pads="same"), "stem_relu")
    middle = g.conv(stem, "middle", 8, kernel=3, pads="same")
    return [middle, g.conv(middle, "late", 4, kernel=3, stride=2, pads=1)]


def _three_heads(g: zoo._Graph) -> list[str]:
    """Heads at 8x8, 4x4 and 2x2, listed deepest first: the record sends them the other way round."""
    stem = g.relu(g.conv("x", "stem", 8, kernel=3, pads="same"), "stem_relu")
    down1 = g.relu(g.conv(stem, "down1", 8, kernel=3, stride=2, pads=1), "down1_relu")
    down2 = g.relu(g.conv(down1, "down2", 8, kernel=3, stride=2, pads=1), "down2_relu")
    return [g.conv(down2, "head_c", 4, kernel=1), g.conv(stem, "head_a", 4, kernel=1),
            g.conv(down1, "head_b", 4, kernel=3, pads="same")]


MODELS = {"two_heads": _two_heads, "inner_output": _inner_output, "three_heads": _three_heads}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """model(name) -> (quantized .onnx path, lifted graph), made once."""
    directory = tmp_path_factory.mktemp("outputs")
    cache = {}

    def make(name: str):
        if name not in cache:
            g = zoo._Graph(name, INPUT_SHAPE)
            path = zoo.quantize_float_model(g.finish(MODELS[name](g)), directory / f"{name}.onnx", INPUT_SHAPE)
            cache[name] = path, lift(path)
        return cache[name]

    return make


@pytest.fixture(scope="module")
def built(model, tmp_path_factory):
    """built(name, board="kv260") -> (OUT, lifted graph): the ILP's design with its sized FIFOs, written once."""
    cache = {}

    def build(name: str, board: str = "kv260"):
        if (name, board) not in cache:
            _, graph = model(name)
            chosen_board, solution, _ = explore(build_stream_graph(graph), BuildOptions(board=board))
            out = tmp_path_factory.mktemp(f"{name}_{board}") / "out"
            write_tree(design(graph, chosen_board, solution=solution).files, out)
            cache[name, board] = out, graph
        return cache[name, board]

    return build


def _inputs(count: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((count, *INPUT_SHAPE[1:])) * 1.5).astype(np.float32)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_reference_equals_onnxruntime_on_every_output(model, name):
    path, graph = model(name)
    session = onnxruntime_session(str(path))
    names = [o.name for o in session.get_outputs()]
    assert [o.name for o in graph.outputs] == names and len(names) >= 2
    for x in _inputs(4, seed=1):
        x = x[None]
        ours = reference.run(graph, x)
        assert list(ours) == names
        for output, expected in zip(names, session.run(None, {"x": x})):
            assert ours[output].dtype == expected.dtype and np.array_equal(ours[output], expected), output


def test_outputs_are_sent_in_the_order_they_finish(model):
    """three_heads lists the 2x2 head first; it finishes last (every head needs the whole input, the 2x2
    one through the deepest pipeline), so the record is head_a, head_b, head_c."""
    _, graph = model("three_heads")
    stream_graph = build_stream_graph(graph)
    assert [(p.onnx_name, p.index) for p in stream_graph.outputs] == [("y1", 1), ("y2", 2), ("y0", 0)]
    assert [p.channel for p in stream_graph.outputs] == ["head_a_to_output", "head_b_to_output",
                                                         "head_c_to_output"]


def test_later_outputs_fifos_hold_what_is_made_meanwhile_and_the_ilp_counts_them(model):
    """Both heads of two_heads need the last input pixel, so all of head_b (4x4) is made before head_a is
    sent; that FIFO's memory is reserved before the ILP runs."""
    stream_graph = build_stream_graph(model("two_heads")[1])
    assert record_tokens(Dependences(stream_graph, unit_specs(stream_graph))) == {"head_b_to_output": 16 * 4}
    assert fifo_bits(stream_graph)["head_b_to_output"] == 16 * 4 * 8
    assert fifo_bits(stream_graph)["head_a_to_output"] == 2 * 6 * 8  # the first output: two pixels as usual


@pytest.mark.unit
@pytest.mark.parametrize("parts", [[(384, 6), (64, 4)], [(10, 2), (3, 1), (64, 8)]])
def test_the_output_writer_costs_what_the_simulation_runs(parts):
    """`ming simulate`'s output port runs each output's pack_axis loop after the other; the ILP charges the
    writer the same: the sum of the loops' cycles."""
    assert record_loop(parts).cycles == sum(pack_adapter(values, lanes).cycles for values, lanes in parts)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_testbench_and_concurrent_csim_equal_the_reference_on_every_output(built, tmp_path, name):
    """The testbench's own compare with expected.bin (the record of every output) passes; the concurrent
    C-simulation over FIFOs of the built depths does not deadlock and equals the reference."""
    out, graph = built(name)
    hls = out / "hls"
    host = json.loads((out / "host.json").read_text())
    binary = compile_csim(hls, host["model"], Progress(quiet=True))
    run = subprocess.run([str(binary), str(hls / "input.bin"), str(tmp_path / "y.bin"), str(hls / "expected.bin")],
                         capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.startswith("PASS: all"), run.stderr
    record = sum(np.prod(o["stream_shape"]) for o in host["outputs"])
    assert (hls / "expected.bin").stat().st_size == record
    for seed in range(2):
        x = _inputs(1, seed)
        got, expected = run_csim(out, x, concurrent=True), reference.run(graph, x)
        assert list(got) == list(expected)
        for output in expected:
            assert np.array_equal(got[output], expected[output]), output


def test_a_shallow_fifo_for_a_later_output_deadlocks(model, tmp_path):
    """With head_b's FIFO at two tokens, head_b stops while head_a is sent, and with it the stem's split
    that head_a waits for: `ming build` refuses the pinned depth, and the design forced past it deadlocks in
    the concurrent C-simulation and in `ming simulate`."""
    _, graph = model("two_heads")
    with pytest.raises(MingError, match="^--set head_b_to_output.depth=2: the design deadlocks with it"):
        explore(build_stream_graph(graph), BuildOptions(settings={"head_b_to_output.depth": 2}))
    board, solution, _ = explore(build_stream_graph(graph), BuildOptions())
    solution.schedule = replace(solution.schedule, depths=solution.schedule.depths | {"head_b_to_output": 2})
    assert simulate(report(build_stream_graph(graph), solution.schedule, board, solution)).deadlock
    out = tmp_path / "out"
    write_tree(design(graph, board, solution=solution).files, out)
    with pytest.raises(CsimDeadlock) as error:
        run_csim(out, _inputs(1, 0), concurrent=True)
    assert any("head_b waits to write to head_b_to_output (full, 2/2)" in line for line in error.value.report)
    sized = replace(solution.schedule, depths=solution.schedule.depths | {"head_b_to_output": 16})
    assert simulate(report(build_stream_graph(graph), sized, board, solution)).deadlock is None


def ming(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ming_py.cli", *map(str, args)], capture_output=True, text=True)


def test_cli_writes_one_file_per_output_or_one_npz(model, built, tmp_path):
    path, graph = model("two_heads")
    out, _ = built("two_heads")
    x = _inputs(1, 5)
    np.save(tmp_path / "x.npy", x)
    expected = reference.run(graph, x)
    for command, target in (("reference", path), ("csim", out)):
        files = [tmp_path / f"{command}_{k}.npy" for k in range(2)]
        run = ming(command, target, "--input", tmp_path / "x.npy", "--output", files[0], "--output", files[1])
        assert run.returncode == 0, run.stderr
        for file, name in zip(files, expected):
            assert np.array_equal(np.load(file), expected[name])
        archive = tmp_path / f"{command}.npz"
        run = ming(command, target, "--input", tmp_path / "x.npy", "--output", archive)
        assert run.returncode == 0, run.stderr
        with np.load(archive) as arrays:
            assert sorted(arrays.files) == ["y0", "y1"]
            for name in expected:
                assert np.array_equal(arrays[name], expected[name])


@pytest.mark.parametrize("command", ["reference", "csim", "deploy"])
def test_a_wrong_number_of_outputs_is_one_error_and_writes_nothing(model, built, tmp_path, command):
    path, _ = model("two_heads")
    out, _ = built("two_heads")
    np.save(tmp_path / "x.npy", _inputs(1, 0))
    target = path if command == "reference" else out
    files = [tmp_path / f"y{k}.npy" for k in range(3)]
    for given in ((files,) if command == "reference" else (files[:1], files)):  # reference: one import is enough
        outputs = [arg for file in given for arg in ("--output", file)]
        run = ming(command, target, "--input", tmp_path / "x.npy", *outputs)
        assert run.returncode == 2
        assert run.stderr.strip() == (f"ming: error: --output given {len(given)} times; the model has 2 outputs "
                                      "('y0', 'y1'): give --output once per output in this order, or one .npz path")
        assert not any(file.exists() for file in files)


@pytest.mark.parametrize("board", ["kv260", "u55c"])
@pytest.mark.parametrize("batch", [1, 4])
def test_deploy_driver_on_the_csim_backend_gives_every_output(built, board, batch):
    """kv260: the DMA model around the testbench; u55c: the data movers, whose buffers hold whole records."""
    out, graph = built("three_heads", board)
    x = _inputs(batch, seed=batch)
    got = Accelerator(out / "deploy", "csim").run(x)
    assert list(got) == [o.name for o in graph.outputs]
    for output in graph.outputs:
        expected = np.stack([reference.run(graph, image[None])[output.name][0] for image in x])
        assert got[output.name].shape == (batch, *output.onnx_shape[1:])
        assert np.array_equal(got[output.name], expected), output.name


def test_run_py_takes_an_output_per_model_output(built, tmp_path):
    out, graph = built("inner_output")
    x = _inputs(3, seed=9)
    np.save(tmp_path / "x.npy", x)
    run = subprocess.run([sys.executable, str(out / "deploy" / "run.py"), "--backend", "csim", "--input",
                          str(tmp_path / "x.npy"), "--output", str(tmp_path / "a.npy"), "--output",
                          str(tmp_path / "b.npy")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    for file, output in zip(("a.npy", "b.npy"), graph.outputs):
        expected = np.stack([reference.run(graph, image[None])[output.name][0] for image in x])
        assert np.array_equal(np.load(tmp_path / file), expected)


def test_tflite_model_with_two_outputs(tmp_path):
    """A float output (DEQUANTIZE on the host) and an int8 one: each equals TFLite's reference kernels, and
    the C-simulation equals the reference."""
    import tflite_models
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    b = tflite_models.TfliteBuilder(seed=7)
    x = b.input((1, 8, 8, 3))
    stem = b.conv(x, 8, name="stem")
    near = b.dequantize(b.conv(stem, 4, activation=None, name="near"), name="near_float")
    far = b.conv(b.conv(stem, 8, stride=2, name="down"), 4, activation=None, name="far")
    path = tmp_path / "heads.tflite"
    path.write_bytes(b.build([near, far], "heads"))
    graph = lift(path)
    interpreter = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    details = interpreter.get_output_details()
    assert [(o.name, o.dtype) for o in graph.outputs] == [(d["name"], np.dtype(d["dtype"]).name) for d in details]
    assert [o.dtype for o in graph.outputs] == ["float32", "int8"]
    board, solution, _ = explore(build_stream_graph(graph), BuildOptions())
    write_tree(design(graph, board, solution=solution).files, tmp_path / "out")
    for seed in range(2):
        image = np.random.default_rng(seed).integers(-128, 128, (1, 8, 8, 3)).astype(np.int8)
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], image)
        interpreter.invoke()
        ours, simulated = reference.run(graph, image), run_csim(tmp_path / "out", image, concurrent=True)
        for detail in details:
            expected = interpreter.get_tensor(detail["index"])
            assert ours[detail["name"]].dtype == expected.dtype
            assert np.array_equal(ours[detail["name"]], expected), detail["name"]
            assert np.array_equal(simulated[detail["name"]], expected), detail["name"]
