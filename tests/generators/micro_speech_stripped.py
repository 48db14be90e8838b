"""Writes micro_speech without its input RESHAPE: the published TFLite Micro keyword spotter
(tests/data/published/micro_speech_quantized.tflite) reshapes its 1x1960 input to 1x49x40x1 before a
DEPTHWISE_CONV_2D of depth multiplier 8 (one input channel, eight outputs, a 10x8 kernel, stride 2, SAME),
FULLY_CONNECTED and SOFTMAX. `stripped()` removes that RESHAPE in the flatbuffer itself (no TensorFlow): the
model's input becomes the RESHAPE's output tensor, 1x49x40x1 with the same quantization, and the RESHAPE's
now unused shape constant goes too; every other tensor (weights, biases, scales) is the published one.

    python tests/generators/micro_speech_stripped.py OUT.tflite

writes it to OUT.tflite; the tests call `stripped()` (tests/test_depth_multiplier.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import flatbuffers
from ai_edge_litert import schema_py_generated as schema

from ming_py.frontends import tflite_fold

PUBLISHED = Path(__file__).resolve().parents[1] / "data" / "published" / "micro_speech_quantized.tflite"


def stripped(path: Path = PUBLISHED) -> bytes:
    """The model at `path` with its input RESHAPE removed: the graph input is the RESHAPE's output."""
    data = path.read_bytes()
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAs(data, 0))
    graph = model.subgraphs[0]
    first = graph.operators[0]
    if tflite_fold.op_name(model, first) != "RESHAPE" or list(first.inputs[:1]) != list(graph.inputs):
        raise ValueError(f"{path}: the first operator is not a RESHAPE of the model's input")
    graph.operators = graph.operators[1:]
    graph.inputs = [first.outputs[0]]
    unused = [i for i in first.inputs[1:] if not any(i in op.inputs for op in graph.operators)]
    _remove_tensors(graph, set(unused) | {first.inputs[0]})
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _remove_tensors(graph, removed: set[int]) -> None:
    """Drop the tensors `removed` (no operator reads or writes them) and renumber the rest."""
    kept = [i for i in range(len(graph.tensors)) if i not in removed]
    index = {old: new for new, old in enumerate(kept)}
    graph.tensors = [graph.tensors[i] for i in kept]
    for op in graph.operators:
        op.inputs = [index[i] if i >= 0 else i for i in op.inputs]
        op.outputs = [index[i] for i in op.outputs]
    graph.inputs = [index[i] for i in graph.inputs]
    graph.outputs = [index[i] for i in graph.outputs]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT.tflite")
    Path(sys.argv[1]).write_bytes(stripped())
