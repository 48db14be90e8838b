"""onnxruntime's default x86 session runs a QDQ Conv in float32 (DQ -> Conv -> Q) where an int8 tensor it reads
or writes feeds several nodes: that tensor keeps its int8 Q -> DQ pair beside uint8 neighbours, and QLinearConv
needs one activation type. `frontends.ort_kernels.float_convs` finds these Convs from the graph (checked here
against the graph onnxruntime optimizes); ming computes them as QLinearConv does, and says so: a note when it
imports the model, and `ming reference --framework` names the Conv where onnxruntime's float32 sum differs
(in the model as it is, or only because exposing tensors as outputs gave the Conv's tensors more consumers)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest

import zoo
from frontends.ort_kernels import float_conv_notes, float_convs
from ming_py.framework_tensors import float_conv_note
from ming_py.ort_session import onnxruntime_session

DATA = Path(__file__).parent / "data"
STORED = sorted(str(p.relative_to(DATA)) for folder in ("converted", "detectors", "torch")
                for p in (DATA / folder).glob("*.onnx"))


def fire(tmp_path: Path, activation_type: str = "QInt8") -> Path:
    """SqueezeNet's fire module after a stem: the squeezed tensor feeds two expansion Convs."""
    g = zoo._Graph("fire", (1, 3, 12, 12))
    stem = g.relu(g.conv("x", "stem", 16, kernel=3, pads=1), "stem_relu")
    squeezed = g.relu(g.conv(stem, "squeeze", 8, kernel=1), "squeeze_relu")
    e1 = g.relu(g.conv(squeezed, "expand1x1", 16, kernel=1), "expand1x1_relu")
    e3 = g.relu(g.conv(squeezed, "expand3x3", 16, kernel=3, pads=1), "expand3x3_relu")
    out = g.conv(g.concat([e1, e3], "concat"), "head", 8, kernel=1)
    return zoo.quantize_float_model(g.finish(out), tmp_path / f"fire_{activation_type}.onnx", (1, 3, 12, 12),
                                    per_channel=True, activation_type=activation_type)


def chain(tmp_path: Path) -> Path:
    """Three Convs in a row: every quantized tensor has one consumer."""
    g = zoo._Graph("chain", (1, 3, 12, 12))
    h = g.relu(g.conv("x", "c0", 8, kernel=3, pads=1), "c0_relu")
    h = g.relu(g.conv(h, "c1", 8, kernel=1), "c1_relu")
    return zoo.quantize_float_model(g.finish(g.conv(h, "c2", 8, kernel=1)), tmp_path / "chain.onnx",
                                    (1, 3, 12, 12), per_channel=True)


def onnxruntime_float_convs(path: Path, folder: Path) -> list[str]:
    """The Convs onnxruntime's default CPU session leaves in float (a Conv, not a QLinearConv, in the graph it
    optimizes), in its order."""
    options = onnxruntime.SessionOptions()
    options.optimized_model_filepath = str(folder / "optimized.onnx")
    options.log_severity_level = 3
    onnxruntime_session(str(path), options)
    return [node.name for node in onnx.load(str(folder / "optimized.onnx")).graph.node if node.op_type == "Conv"]


def test_the_convs_reading_a_shared_tensor_are_onnxruntimes_float_convs(tmp_path):
    path = fire(tmp_path)
    ours = float_convs(onnx.load(str(path)))
    assert set(ours) == {"squeeze", "expand1x1", "expand3x3"}  # squeeze writes the shared tensor
    assert sorted(ours) == sorted(onnxruntime_float_convs(path, tmp_path))


def test_uint8_activations_keep_every_conv_fused(tmp_path):
    """A uint8 Q -> DQ pair stays uint8 whatever its consumers: every Conv of the fire module is a QLinearConv."""
    path = fire(tmp_path, "QUInt8")
    assert float_convs(onnx.load(str(path))) == [] == onnxruntime_float_convs(path, tmp_path)


def test_a_chain_of_convs_runs_as_qlinearconv(tmp_path):
    path = chain(tmp_path)
    assert float_convs(onnx.load(str(path))) == [] == onnxruntime_float_convs(path, tmp_path)
    assert float_conv_notes(onnx.load(str(path))) == []


@pytest.mark.parametrize("name", STORED)
def test_float_convs_of_stored_models_are_onnxruntimes(tmp_path, name):
    ours = float_convs(onnx.load(str(DATA / name)))
    assert sorted(ours) == sorted(onnxruntime_float_convs(DATA / name, tmp_path))


def test_the_import_notes_the_float_convs(tmp_path):
    (note,) = float_conv_notes(onnx.load(str(fire(tmp_path))))
    assert note.startswith("onnxruntime's default x86 session runs 3 of the 5 Convs ('squeeze', 'expand1x1', "
                           "'expand3x3') in float32, not as QLinearConv")


def quantized_outputs(path: Path) -> dict[str, str]:
    """Per QuantizeLinear of the model, the float tensor it reads -> its int8 output."""
    return {n.input[0]: n.output[0] for n in onnx.load(str(path)).graph.node if n.op_type == "QuantizeLinear"}


def test_framework_note_tells_a_float_conv_from_one_the_exposure_makes(tmp_path):
    """Exposing every int8 tensor as a graph output gives each one more consumer: every Conv runs in float then.
    The note says whether onnxruntime runs the Conv in float in the model as it is."""
    path = fire(tmp_path)
    quantized = quantized_outputs(path)
    note = float_conv_note(path, quantized["expand1x1_relu_out"], sorted(quantized.values()))
    assert note.startswith("onnxruntime runs Conv 'expand1x1' in float32 (DQ -> Conv -> Q")
    path = chain(tmp_path)
    quantized = quantized_outputs(path)
    note = float_conv_note(path, quantized["c1_relu_out"], sorted(quantized.values()))
    assert note.startswith("exposing the tensors as outputs makes onnxruntime run Conv 'c1' in float32")
    assert float_conv_note(path, quantized["c1_relu_out"], []) is None


def test_ming_reference_equals_onnxruntime_when_it_fuses_every_conv(tmp_path):
    """With session.qdqisint8allowed=1 onnxruntime fuses the fire module's Convs into QLinearConv: ming's integer
    rule is that kernel's, bit for bit."""
    from ming_py.pipeline import lift
    from ming_py.verdict import golden_outputs

    path = fire(tmp_path)
    x = np.random.default_rng(0).standard_normal((1, 3, 12, 12)).astype(np.float32)
    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.qdqisint8allowed", "1")
    session = onnxruntime_session(str(path), options)
    (expected,) = session.run(None, {session.get_inputs()[0].name: x})
    (ours,) = golden_outputs(lift(path), x).values()
    assert np.array_equal(np.asarray(ours).reshape(expected.shape), expected)
