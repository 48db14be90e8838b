"""The deployment package OUT/deploy/: the driver that runs on the board, run here against the C-simulation.

The csim backend goes through the driver's own quantization, packing into 64-bit words, batching and DMA
framing, and the float tail; its outputs must equal `ming reference` bit for bit, image by image.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from ming_py import reference
from ming_py.boards import load_board
from ming_py.build import design
from ming_py.cli import main
from ming_py.contract.ming_errors import DeployError
from ming_py.emit.deploy import CONTRACT_FILES, RUNTIME_FILES
from ming_py.output import write_tree
from ming_py.runtime import ming_driver
from ming_py.runtime import ming_backends
from ming_py.runtime.ming_backends import AXIS_BEAT, mm2s_beats, s2mm_words
from ming_py.runtime.ming_driver import Accelerator

MODELS = ("tiny_cnn", "residual_block", "mlp")


@pytest.fixture(scope="module")
def builds(lifted, tmp_path_factory):
    """builds(name, board="kv260") -> (OUT, lifted graph), written once."""
    cache = {}

    def build(name: str, board: str = "kv260") -> tuple[Path, object]:
        if (name, board) not in cache:
            graph = lifted(name)
            out = tmp_path_factory.mktemp(f"deploy_{name}_{board}") / "out"
            write_tree(design(graph, load_board(board)).files, out)
            cache[name, board] = out, graph
        return cache[name, board]

    return build


def _images(graph, count: int, seed: int = 0) -> np.ndarray:
    """`count` float images, spread over and beyond the input's quantization range."""
    shape = graph.inputs[0].onnx_shape
    return (np.random.default_rng(seed).normal(size=(count, *shape[1:])) * 2).astype(np.float32)


def _reference(graph, images: np.ndarray) -> np.ndarray:
    shape = graph.inputs[0].onnx_shape
    name = graph.outputs[0].name
    return np.stack([reference.run(graph, x.reshape(shape))[name][0] for x in images])


@pytest.mark.parametrize("board", ["kv260", "u55c"])
@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("batch", [1, 8])
def test_csim_backend_equals_reference(builds, name, batch, board):
    """kv260: the driver's DMA model around the testbench; u55c: the data-mover kernels themselves."""
    out, graph = builds(name, board)
    x = _images(graph, batch, seed=batch)
    (y,) = Accelerator(out / "deploy", "csim").run(x).values()
    assert y.dtype == np.float32 and y.shape == (batch, *graph.outputs[0].onnx_shape[1:])
    assert np.array_equal(y, _reference(graph, x))


def test_one_image_in_the_models_shape_comes_back_in_its_shape(builds):
    out, graph = builds("tiny_cnn")
    x = _images(graph, 1)[0][None]
    (y,) = Accelerator(out / "deploy", "csim").run(x).values()
    assert y.shape == graph.outputs[0].onnx_shape
    assert np.array_equal(y, reference.run(graph, x)[graph.outputs[0].name])


def test_batches_split_into_transfers_of_whole_images(builds, tmp_path):
    """--batch 3 on 8 images is three transfers (3, 3, 2), and a DMA limit below a batch splits it too."""
    out, graph = builds("residual_block")
    x = _images(graph, 8, seed=3)
    expected = _reference(graph, x)
    accelerator = Accelerator(out / "deploy", "csim")
    assert np.array_equal(accelerator.run(x, batch=3)[graph.outputs[0].name], expected)
    assert accelerator.timing.images == 8

    words = max(accelerator.input.words, accelerator.record_words)
    # two images' words and a little: transfers of 2
    limited = _deploy_copy(out, tmp_path / "deploy", max_transfer_bytes=2 * 8 * words + 7)
    accelerator = Accelerator(limited, "csim")
    assert accelerator.max_images_per_transfer == 2
    assert np.array_equal(accelerator.run(x)[graph.outputs[0].name], expected)


def _deploy_copy(out: Path, deploy: Path, **meta_changes) -> Path:
    """A copy of OUT at `deploy`'s parent (its C-simulation paths stay inside that build: the driver refuses
    any other), the copy's deploy/ at `deploy`, with `meta_changes` to its accelerator.json."""
    shutil.copytree(out, deploy.parent, dirs_exist_ok=True, ignore=shutil.ignore_patterns("deploy"))
    shutil.copytree(out / "deploy", deploy)
    meta = json.loads((deploy / "accelerator.json").read_text())
    (deploy / "accelerator.json").write_text(json.dumps(meta | meta_changes))
    return deploy


def test_the_package_runs_with_numpy_alone_and_compiles_the_simulation_itself(builds, tmp_path):
    """`python3 run.py --backend csim` in a copy of OUT with no binary, in a Python that cannot import ming,
    onnx or onnxruntime: the outputs equal `ming reference`."""
    out, graph = builds("tiny_cnn")
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    shutil.rmtree(copy / "deploy" / "csim", ignore_errors=True)
    numpy_only = tmp_path / "site"
    numpy_only.mkdir()
    numpy_dir = Path(np.__file__).parent
    for package in (numpy_dir, numpy_dir.with_name("numpy.libs")):
        if package.exists():
            (numpy_only / package.name).symlink_to(package)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(numpy_only)}
    python = [sys.executable, "-S"]  # no site-packages: only what PYTHONPATH gives
    probe = "import importlib.util as u; print([u.find_spec(m) is None for m in ('ming_py', 'onnx', 'onnxruntime')])"
    assert subprocess.run([*python, "-c", probe], env=env, capture_output=True, text=True, check=True,
                          cwd=tmp_path).stdout.strip() == "[True, True, True]"
    x = _images(graph, 8, seed=5)
    np.save(tmp_path / "x.npy", x)
    result = subprocess.run([*python, str(copy / "deploy" / "run.py"), "--backend", "csim", "--input",
                             str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"), "--batch", "8"],
                            env=env, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (copy / "deploy" / "csim" / "tiny_cnn_csim").is_file()
    assert np.array_equal(np.load(tmp_path / "y.npy"), _reference(graph, x))


def test_the_package_holds_the_runtime_verbatim(builds):
    out, _ = builds("tiny_cnn")
    for package, names in (("ming_py.runtime", RUNTIME_FILES), ("ming_py.contract", CONTRACT_FILES)):
        for name in names:
            assert (out / "deploy" / name).read_text() == resources.files(package).joinpath(name).read_text()
    meta = json.loads((out / "deploy" / "accelerator.json").read_text())
    assert (meta["bitstream"], meta["dma"], meta["max_transfer_bytes"]) == ("tiny_cnn.bit", "axi_dma", 2 ** 26 - 1)
    assert "pynq 3.0" in meta["target"] and "tiny_cnn.bit" in (out / "deploy" / "README.md").read_text()


@pytest.mark.unit
def test_dma_model_frames_a_transfer_as_the_ip_expects():
    words = np.arange(5, dtype=np.uint64) * 0x0101010101010101
    beats = mm2s_beats(words)
    assert beats.dtype.itemsize == 16 and list(beats["last"]) == [0, 0, 0, 0, 1]
    assert (beats["keep"] == 0xFF).all() and np.array_equal(beats["data"], words)
    assert np.array_equal(s2mm_words(beats, 5), words)


@pytest.mark.unit
@pytest.mark.parametrize("change, message", [
    (lambda b: b["last"].__setitem__(2, 1), r"TLAST after 3 of 5 output words: the S2MM transfer would end early"),
    (lambda b: b["last"].__setitem__(4, 0), r"no TLAST in the first 5 output words"),
    (lambda b: b["user"].__setitem__(4, 1), r"wrongly framed input \(TUSER\)"),
    (lambda b: b["keep"].__setitem__(1, 0x0F), r"not whole \(TKEEP\)"),
])
def test_dma_model_refuses_what_a_dma_would_choke_on(change, message):
    beats = mm2s_beats(np.arange(5, dtype=np.uint64))
    change(beats)
    with pytest.raises(DeployError, match=message):
        s2mm_words(beats, 5)


def test_an_early_tlast_reaches_the_driver_as_a_framing_error(builds, tmp_path):
    """The testbench's --axis mode runs the IP on beats as given: a TLAST in the middle of the first image
    comes back as TUSER on that image's last word, which the S2MM model reports."""
    out, graph = builds("residual_block")
    accelerator = Accelerator(out / "deploy", "csim")
    words = accelerator.input.words
    beats = mm2s_beats(np.zeros(2 * words, dtype=np.uint64))
    beats["last"][0] = 1
    beats.tofile(tmp_path / "in")
    subprocess.run([str(accelerator.backend.binary), "--axis", str(tmp_path / "in"), str(tmp_path / "out")],
                   check=True)
    received = np.fromfile(tmp_path / "out", dtype=AXIS_BEAT)
    assert list(np.flatnonzero(received["user"])) == [accelerator.record_words - 1]
    with pytest.raises(DeployError, match="TUSER"):
        s2mm_words(received, 2 * accelerator.record_words)


def test_ming_deploy_is_the_short_form(builds, tmp_path, capsys):
    out, graph = builds("tiny_cnn")
    x = _images(graph, 3, seed=7)
    np.save(tmp_path / "x.npy", x)
    code = main(["deploy", str(out), "--backend", "csim", "--input", str(tmp_path / "x.npy"), "--output",
                 str(tmp_path / "y.npy"), "--batch", "2"])
    assert code == 0 and np.array_equal(np.load(tmp_path / "y.npy"), _reference(graph, x))


@pytest.mark.parametrize("args, message", [
    (["--input", "{bad}"], r"^ming: error: input has shape \(2, 5\); the model takes \(1, 3, 16, 16\)"),
    (["--input", "{x}", "--batch", "0"], r"^ming: error: --batch 0: give a positive number"),
    (["--input", "{x}", "--backend", "pynq"], r"^ming: error: the pynq backend needs PYNQ"),
])
def test_ming_deploy_errors_are_one_line(builds, tmp_path, capsys, args, message):
    out, _ = builds("tiny_cnn")
    np.save(tmp_path / "bad.npy", np.zeros((2, 5), np.float32))
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    args = [a.format(bad=tmp_path / "bad.npy", x=tmp_path / "x.npy") for a in args]
    backend = [] if "--backend" in args else ["--backend", "csim"]
    code = main(["deploy", str(out), *backend, *args, "--output", str(tmp_path / "y.npy")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert __import__("re").search(message, err), err
    assert not (tmp_path / "y.npy").exists()


def test_benchmark_reports_the_accelerator_apart_from_packing(builds, tmp_path, monkeypatch):
    out, graph = builds("tiny_cnn")
    np.save(tmp_path / "x.npy", _images(graph, 4))
    run = Path(out / "deploy" / "run.py")
    result = subprocess.run([sys.executable, str(run), "--backend", "csim", "--input", str(tmp_path / "x.npy"),
                             "--benchmark", "--batch", "4"], capture_output=True, text=True, check=True,
                            env=os.environ | {"PYTHONDONTWRITEBYTECODE": "1"})
    lines = result.stdout.splitlines()
    assert lines[0].endswith("images on the csim backend, 4 per transfer")
    assert [line.split("  ")[1].strip() for line in lines[1:]] == [
        "accelerator (transfer to completion)", "host: quantize and pack", "host: unpack and float tail",
        "end to end"]
    assert all("images/s" in line and line.endswith("us/image") for line in lines[1:])


def test_missing_hardware_files_are_named(builds):
    out, _ = builds("tiny_cnn")
    assert ming_driver.DEFAULT_BACKEND[json.loads((out / "deploy" / "accelerator.json").read_text())["interface"]] \
        == "pynq"
    with pytest.raises(DeployError, match="needs PYNQ|tiny_cnn.bit and tiny_cnn.hwh must be in"):
        Accelerator(out / "deploy", "pynq")


def test_an_alveo_build_defaults_to_xrt_and_names_what_is_missing(builds):
    out, _ = builds("tiny_cnn", "u55c")
    meta = json.loads((out / "deploy" / "accelerator.json").read_text())
    assert ming_driver.DEFAULT_BACKEND[meta["interface"]] == "xrt"
    assert (meta["xclbin"], meta["kernels"]) == ("tiny_cnn.xclbin", {"mm2s": "mm2s", "s2mm": "s2mm"})
    assert "xilinx_u55c_gen3x16_xdma_3_202210_1" in meta["target"]
    with pytest.raises(DeployError, match="needs XRT's Python bindings|tiny_cnn.xclbin is not in"):
        Accelerator(out / "deploy")


FAKE_PYNQ = '''
"""A stand-in for PYNQ: the overlay's AXI DMA (simple mode, as pynq.lib.dma drives it) in front of the
build's C-simulation, so the driver's pynq backend runs unchanged."""
import numpy as np

from ming_py.contract.ming_cxx import compile_csim
from ming_py.runtime.ming_backends import AXIS_BEAT, mm2s_beats
import subprocess, tempfile, pathlib, json

class Buffer(np.ndarray):
    physical_address = 0
    def flush(self): pass
    def invalidate(self): pass

def allocate(shape, dtype):
    return np.zeros(shape, dtype).view(Buffer)

class Channel:
    def __init__(self): self.idle, self.error, self.transferred, self.buffer = True, False, 0, None
    def transfer(self, buffer): self.buffer, self.idle = buffer, False
    def wait(self): pass

class DMA:
    def __init__(self, deploy, drop_tlast):
        meta = json.loads((deploy / "accelerator.json").read_text())
        self.binary, self.drop_tlast = compile_csim(deploy, meta["csim"])[0], drop_tlast
        self.recvchannel, self.sendchannel = Channel(), RunningChannel(self)

class RunningChannel(Channel):
    def __init__(self, dma): super().__init__(); self.dma = dma
    def transfer(self, buffer):  # MM2S starts: the accelerator answers into the S2MM buffer, up to TLAST
        with tempfile.TemporaryDirectory() as tmp:
            sent, received = pathlib.Path(tmp) / "in", pathlib.Path(tmp) / "out"
            beats = mm2s_beats(np.asarray(buffer))
            if self.dma.drop_tlast:
                beats["last"][:] = 0
            beats.tofile(sent)
            subprocess.run([str(self.dma.binary), "--axis", str(sent), str(received)], check=True)
            out = np.fromfile(received, dtype=AXIS_BEAT)
        recv = self.dma.recvchannel
        ends = np.flatnonzero(out["last"])
        if len(ends):  # S2MM stores up to TLAST and goes idle; without TLAST it waits for ever
            count = min(ends[0] + 1, len(recv.buffer))
            recv.buffer[:count] = out["data"][:count]
            recv.transferred, recv.idle = 8 * count, True

class Overlay:
    DROP_TLAST = False
    def __init__(self, bitfile):
        self.axi_dma = DMA(pathlib.Path(bitfile).parent, self.DROP_TLAST)
'''


@pytest.fixture
def fake_pynq(builds, tmp_path, monkeypatch):
    """(deploy dir with a .bit/.hwh pair, the fake pynq module) for tiny_cnn on the KV260."""
    out, graph = builds("tiny_cnn")
    deploy = _deploy_copy(out, tmp_path / "deploy")
    (deploy / "tiny_cnn.bit").write_bytes(b"")
    (deploy / "tiny_cnn.hwh").write_text("")
    (tmp_path / "pynq.py").write_text(FAKE_PYNQ)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pynq", raising=False)
    return deploy, graph


def test_pynq_backend_streams_a_batch_through_the_dma(fake_pynq):
    deploy, graph = fake_pynq
    x = _images(graph, 8, seed=11)
    accelerator = Accelerator(deploy, "pynq")
    assert np.array_equal(accelerator.run(x, batch=4)[graph.outputs[0].name], _reference(graph, x))


def test_pynq_backend_stops_instead_of_hanging_without_tlast(fake_pynq, monkeypatch):
    deploy, graph = fake_pynq
    import pynq

    monkeypatch.setattr(pynq.Overlay, "DROP_TLAST", True)
    monkeypatch.setattr(ming_backends, "DMA_TIMEOUT_SECONDS", 0.2)
    with pytest.raises(DeployError, match=r"S2MM \(output\) transfer of 2 words did not finish in 0.2 s"):
        Accelerator(deploy, "pynq").run(_images(graph, 1))


# ---- the README states what run.py takes and gives --------------------------------------------------------

def _run_py(out: Path, x: np.ndarray, tmp_path: Path, name: str) -> subprocess.CompletedProcess:
    np.save(tmp_path / f"{name}.npy", x)
    return subprocess.run([sys.executable, str(out / "deploy" / "run.py"), "--backend", "csim", "--input",
                           str(tmp_path / f"{name}.npy"), "--output", str(tmp_path / f"{name}_y.npy")],
                          capture_output=True, text=True)


def _refused(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def _readme_statements(readme: str) -> dict:
    """What the README says about x.npy and y.npy, read from its text (one paragraph, lines joined)."""
    text = " ".join(readme.split())
    shape = re.search(r"one in the model's input shape \[([\d, ]+)\]", text)
    takes = re.search(r"The model takes (int8|uint8) values \(scale ([\d.e+-]+), zero point (-?\d+)\)", text)
    outputs = re.findall(r"`([^`]+)` is (float32|int8|uint8), shape \[([\d, ]+)\]", text)
    shift = re.search(r"A uint8 image \(zero point 0\) is refused: save its values shifted to int8, `([^`]+)`", text)
    return {"shape": tuple(int(d) for d in shape[1].split(",")), "takes": takes, "shift": shift and shift[1],
            "outputs": {name: (dtype, tuple(int(d) for d in dims.split(","))) for name, dtype, dims in outputs},
            "away": "halves rounded away from zero, saturated to int8" in text}


@pytest.fixture(scope="module")
def int8_input_build(tmp_path_factory):
    """A TFLite model taking int8 images as TFLite's converter writes them for [0, 1] inputs (scale 1/255, zero
    point -128), built for the KV260: (OUT, model path)."""
    import tflite_models
    from ming_py.pipeline import lift

    directory = tmp_path_factory.mktemp("int8_input")
    model = directory / "pixels.tflite"
    model.write_bytes(tflite_models.tiny_conv(scale=1 / 255, zero_point=-128))
    out = directory / "out"
    write_tree(design(lift(model), load_board("kv260")).files, out)
    return out, model


def test_the_readme_states_what_run_py_takes_and_gives_for_an_int8_input(int8_input_build, tmp_path):
    """Before: the README of an int8-input build and run.py disagreed on float input. After: every statement
    the README makes about x.npy and y.npy is what run.py does: int8 values as they are, float32 images
    quantized with the stated scale and zero point (halves away from zero, as TFLite), a uint8 image refused
    with the stated shift, which run.py then takes; outputs of the stated dtype and shape, N stacked."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    out, model = int8_input_build
    said = _readme_statements((out / "deploy" / "README.md").read_text())
    assert said["takes"] is not None and said["away"] and said["shift"] is not None, said
    dtype, scale, zero_point = said["takes"][1], np.float32(said["takes"][2]), int(said["takes"][3])
    assert (dtype, zero_point, said["shape"]) == ("int8", -128, (1, 8, 8, 3))
    (name, (out_dtype, out_shape)), = said["outputs"].items()

    rng = np.random.default_rng(4)
    images = 3
    levels = rng.integers(-128, 127, (images, *said["shape"][1:]))
    # real values on and between the quantization steps, and beyond the range (saturation)
    x = ((levels - zero_point + rng.choice([0.0, 0.25, 0.5, -0.5], levels.shape)) * scale).astype(np.float32)
    x[0, 0, 0, :] = [-1.0, 2.0, 0.5]
    steps = x / scale  # float32, as the README's round(x / scale)
    ties = np.abs(steps - np.floor(steps)) == 0.5
    readme_q = np.clip(np.sign(steps) * np.floor(np.abs(steps) + 0.5) + zero_point, -128, 127).astype(np.int8)
    half_even = np.clip(np.rint(steps) + zero_point, -128, 127).astype(np.int8)
    assert (readme_q != half_even).any() and ties.any()  # the rounding the README states is checked

    as_int8 = _run_py(out, readme_q, tmp_path, "int8")
    as_float = _run_py(out, x, tmp_path, "float")
    assert as_int8.returncode == 0 and as_float.returncode == 0, as_int8.stderr + as_float.stderr
    y_int8, y_float = np.load(tmp_path / "int8_y.npy"), np.load(tmp_path / "float_y.npy")
    assert str(y_int8.dtype) == out_dtype and y_int8.shape == (images, *out_shape[1:])
    assert np.array_equal(y_float, y_int8)  # float32 images are the README's quantization of them

    interpreter = Interpreter(model_path=str(model), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    for image in range(images):  # and the int8 values are the model's own: TFLite on them gives the same
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], readme_q[image][None])
        interpreter.invoke()
        expected = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
        assert np.array_equal(y_int8[image], expected[0])

    one = _run_py(out, readme_q[:1], tmp_path, "one")
    assert one.returncode == 0 and np.load(tmp_path / "one_y.npy").shape == out_shape

    pixels = (readme_q.astype(np.int16) + 128).astype(np.uint8)  # the same image as uint8 with zero point 0
    line = _refused(_run_py(out, pixels, tmp_path, "uint8"))
    assert said["shift"] in line and "x.astype(numpy.int8)" not in line.replace(said["shift"], "")
    shifted = eval(said["shift"], {"numpy": np, "x": pixels})  # the README's conversion, as written
    assert shifted.dtype == np.int8 and _run_py(out, shifted, tmp_path, "shifted").returncode == 0
    assert np.array_equal(np.load(tmp_path / "shifted_y.npy"), y_int8)

    for refused in (x.astype(np.float64), readme_q.astype(np.int64), readme_q.astype(bool)):  # "Other element types"
        _refused(_run_py(out, refused, tmp_path, "refused"))
    assert not (tmp_path / "refused_y.npy").exists()


def test_the_readme_of_a_float_input_build_states_its_quantization(builds, tmp_path):
    """A float-input model: the README names its scale and zero point and refuses integer arrays; run.py takes
    float32 and refuses int8 with the conversion."""
    out, graph = builds("tiny_cnn")
    text = " ".join((out / "deploy" / "README.md").read_text().split())
    port = graph.inputs[0]
    assert f"quantized with scale {port.scale} and zero point {port.zero_point} as onnxruntime's QuantizeLinear" \
           in text and "halves rounded to even" in text
    assert "Integer arrays (int8 and uint8 too) are refused: save real values as `x.astype(numpy.float32)`" in text
    x = _images(graph, 2)
    assert _run_py(out, x, tmp_path, "float").returncode == 0
    assert "save x.astype(numpy.float32)" in _refused(_run_py(out, np.zeros(x.shape, np.int8), tmp_path, "int8"))


def test_ming_csim_takes_n_stacked_images_like_run_py(builds, tmp_path):
    """`ming csim` on N images stacked on a first axis writes N results, stacked likewise, each equal to `ming
    reference` on its image; one image in the model's shape still comes back in the model's output shape."""
    out, graph = builds("tiny_cnn")
    x = _images(graph, 3, seed=11)
    np.save(tmp_path / "x.npy", x)
    assert main(["csim", str(out), "-q", "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")]) == 0
    y = np.load(tmp_path / "y.npy")
    assert y.shape == (3, *graph.outputs[0].onnx_shape[1:]) and np.array_equal(y, _reference(graph, x))
    np.save(tmp_path / "one.npy", x[:1])
    assert main(["csim", str(out), "-q", "--input", str(tmp_path / "one.npy"), "--output",
                 str(tmp_path / "y1.npy")]) == 0
    assert np.array_equal(np.load(tmp_path / "y1.npy"), reference.run(graph, x[:1])[graph.outputs[0].name])
    assert np.load(tmp_path / "y1.npy").shape == graph.outputs[0].onnx_shape
