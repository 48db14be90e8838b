"""The model's own tensors that ming's golden tensors stand for, and their values from the model's framework with
every intermediate tensor exposed: onnxruntime (the intermediates added as graph outputs, default graph
optimizations) or LiteRT's reference kernels (`BUILTIN_REF`, `experimental_preserve_all_tensors`).

A golden tensor is the output of a lifted node, whose `source` is the model's node (ONNX: its name; TFLite: its
output tensor's name); of several lifted nodes from one model node (a Gemm's Reshape and the Gemm), the last one
stands for the model node's output. In an ONNX model that output is the int8 tensor after the node: its own
(QOperator), or that of the QuantizeLinear reading it, through a Relu or Clip the lifter folded (QDQ).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .ir import Graph, Kernel, Slice
from .model_files import is_tflite
from .ort_session import onnxruntime_session

_FOLDED_ACTIVATIONS = ("Relu", "Clip")  # float ops between an ONNX node and its QuantizeLinear that ming folds
_INTEGER_DTYPES = ("int8", "uint8")


@dataclass(frozen=True)
class ModelTensor:
    name: str  # the model's tensor name
    dtype: str  # the model's element type ("int8", "uint8", "float32", ...)
    scale: float | None
    zero_point: int | None
    channels_last: bool  # a map held as (H, W, C) (TFLite), not (C, H, W)


def model_tensors(model: Path, graph: Graph) -> dict[str, ModelTensor]:
    """The model's tensor each golden tensor stands for (by ming's tensor name), where there is one of as many
    values."""
    found = _tflite_tensors(model, graph) if is_tflite(model) else _onnx_tensors(model, graph)
    return {tensor: model_tensor for tensor, (model_tensor, size) in found.items()
            if size is None or size == int(np.prod(graph.shape_of(tensor)))}


def stand_ins(graph: Graph) -> dict[str, tuple[str, int, int]]:
    """ming's tensor -> (the model node (`source`) whose output it stands for, which output, of how many outputs
    ming knows): the last lifted node of each source, or each of the Slices of a split (output k, in order)."""
    by_source: dict[str, list] = defaultdict(list)
    for node in graph.nodes:
        by_source[node.source].append(node)
    found = {}
    for source, nodes in by_source.items():
        slices = [node for node in nodes if isinstance(node, Slice)]
        pieces = slices if len(slices) > 1 else nodes[-1:]
        found |= {_output_of(node): (source, k, len(pieces)) for k, node in enumerate(pieces)}
    return found


def _output_of(node) -> str:
    return node.output.tensor if isinstance(node, Kernel) else node.output


# ---- ONNX ----------------------------------------------------------------------------------------------------


class _OnnxGraph:
    """An ONNX graph's nodes by name, producers, readers, element types, sizes and constant scalars."""

    def __init__(self, model):
        import onnx

        inferred = onnx.shape_inference.infer_shapes(model)
        graph = inferred.graph
        self.nodes = {node.name: node for node in graph.node if node.name}
        self.producer = {out: node for node in graph.node for out in node.output}
        self.readers = defaultdict(list)
        for node in graph.node:
            for name in node.input:
                self.readers[name].append(node)
        self.types = {info.name: info.type.tensor_type for info in [*graph.value_info, *graph.input, *graph.output]}
        self.constants = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
        self.input_names = {i.name for i in graph.input}

    def dtype(self, name: str) -> str | None:
        import onnx

        kind = self.types.get(name)
        return str(onnx.helper.tensor_dtype_to_np_dtype(kind.elem_type)) if kind is not None and kind.elem_type \
            else None

    def size(self, name: str) -> int | None:
        kind = self.types.get(name)
        if kind is None or not kind.HasField("shape"):
            return None
        return int(np.prod([d.dim_value if d.HasField("dim_value") else 1 for d in kind.shape.dim]))

    def quantized(self, name: str) -> str | None:
        """The integer tensor holding `name`'s values: itself, or a QuantizeLinear's output after it (through
        folded activations)."""
        for _ in range(len(_FOLDED_ACTIVATIONS) + 1):
            if self.dtype(name) in _INTEGER_DTYPES:
                return name
            readers = self.readers.get(name, [])
            quantize = next((r for r in readers if r.op_type == "QuantizeLinear"), None)
            if quantize is not None:
                return quantize.output[0]
            if len(readers) != 1 or readers[0].op_type not in _FOLDED_ACTIVATIONS:
                return None
            name = readers[0].output[0]
        return None

    def quantization(self, name: str) -> tuple[float | None, int | None]:
        """The scale and zero point of the integer tensor `name`: its QuantizeLinear's, or those a DequantizeLinear
        or QLinear op reading it takes right after it."""
        producer = self.producer.get(name)
        if producer is not None and producer.op_type == "QuantizeLinear" and len(producer.input) == 3:
            return self._scalars(producer.input[1], producer.input[2])
        for reader in self.readers.get(name, []):
            if reader.op_type == "DequantizeLinear" or reader.op_type.startswith("QLinear"):
                at = list(reader.input).index(name)
                if at + 2 < len(reader.input):
                    scale, zero_point = self._scalars(reader.input[at + 1], reader.input[at + 2])
                    if scale is not None:
                        return scale, zero_point
        return None, None

    def _scalars(self, scale: str, zero_point: str) -> tuple[float | None, int | None]:
        s, z = self.constants.get(scale), self.constants.get(zero_point)
        if s is None or z is None or s.size != 1 or z.size != 1 or s.dtype.kind != "f" or z.dtype.kind not in "iu":
            return None, None
        return float(s.reshape(-1)[0]), int(z.reshape(-1)[0])


def _onnx_tensors(path: Path, graph: Graph) -> dict[str, tuple[ModelTensor, int | None]]:
    from ming_py.frontends.onnx_model import load_onnx

    onnx_graph = _OnnxGraph(load_onnx(path))
    found = {graph.inputs[0].tensor: onnx_graph.quantized(graph.inputs[0].name)}
    for tensor, (source, k, outputs) in stand_ins(graph).items():
        node = onnx_graph.nodes.get(source)
        if node is not None and (len(node.output) == outputs or k == 0 < len(node.output)):
            found[tensor] = onnx_graph.quantized(node.output[k])
    return {tensor: (ModelTensor(name, onnx_graph.dtype(name), *onnx_graph.quantization(name), channels_last=False),
                     onnx_graph.size(name)) for tensor, name in found.items() if name is not None}


def onnxruntime_values(path: Path, x: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
    """onnxruntime's values of the tensors `names` for the model's input `x`: each added as a graph output."""
    import onnx

    model = onnx.load(str(path))
    known = _OnnxGraph(model)
    inputs = [i.name for i in model.graph.input if i.name not in known.constants]
    exposed = _exposed(model, known, names)
    session = onnxruntime_session(model.SerializeToString())
    fetched = [name for name in names if name in exposed]
    values = dict(zip(fetched, session.run(fetched, {inputs[0]: x})))
    return values | {name: x for name in names if name == inputs[0]}


def _exposed(model, known: _OnnxGraph, names: list[str]) -> set[str]:
    """Adds the tensors `names` to `model`'s graph outputs (those it has); the graph's outputs now."""
    import onnx

    exposed = {out.name for out in model.graph.output}
    for name in names:
        if name not in exposed and name not in known.input_names and name in known.types:
            model.graph.output.append(onnx.helper.make_tensor_value_info(name, known.types[name].elem_type, None))
            exposed.add(name)
    return exposed


def float_conv_note(path: Path, tensor: str, names: list[str]) -> str | None:
    """Why onnxruntime's value of `tensor` (the int8 output of a QDQ Conv) may differ from ming's when `names` are
    exposed as graph outputs: onnxruntime runs that Conv in float32 (`frontends.ort_kernels.float_convs`), in the
    model as it is or only once the exposed tensors give its quantized input or output more consumers."""
    import onnx

    from ming_py.frontends.ort_kernels import float_convs

    model = onnx.load(str(path))
    known = _OnnxGraph(model)
    conv = _conv_writing(known, tensor)
    if conv is None:
        return None
    as_is = set(float_convs(model))
    _exposed(model, known, names)
    if conv in as_is:
        return (f"onnxruntime runs Conv '{conv}' in float32 (DQ -> Conv -> Q: an int8 tensor of its input or output "
                "feeds several nodes, so it keeps int8 beside uint8 neighbours and the QDQ group is not fused); ming "
                "computes the Conv exactly in integers as QLinearConv does, and the float32 sum rounds across a half "
                "step at the values that differ (onnxruntime fuses it with session.qdqisint8allowed=1 or for a model "
                "quantized with uint8 activations)")
    if conv in float_convs(model):
        return (f"exposing the tensors as outputs makes onnxruntime run Conv '{conv}' in float32 (its int8 input or "
                "output now has several consumers); in the model as it is onnxruntime fuses it into QLinearConv, "
                "which ming equals: this difference is the exposure's, compare the model's outputs instead")
    return None


def _conv_writing(known: _OnnxGraph, tensor: str) -> str | None:
    """The Conv whose output the QuantizeLinear writing `tensor` quantizes (through a folded Relu or Clip)."""
    quantize = known.producer.get(tensor)
    if quantize is None or quantize.op_type != "QuantizeLinear":
        return None
    node = known.producer.get(quantize.input[0])
    if node is not None and node.op_type in _FOLDED_ACTIVATIONS:
        node = known.producer.get(node.input[0])
    return node.name if node is not None and node.op_type == "Conv" else None


# ---- TFLite --------------------------------------------------------------------------------------------------


def _tflite_tensors(path: Path, graph: Graph) -> dict[str, tuple[ModelTensor, int | None]]:
    from ai_edge_litert import schema_py_generated as schema

    from ming_py.frontends.tflite_model import load_tflite

    types = {value: name.lower() for name, value in vars(schema.TensorType).items() if not name.startswith("_")}
    tensors = {(t.name or b"").decode(errors="backslashreplace"): t for t in load_tflite(path).subgraphs[0].tensors}
    wanted = {graph.inputs[0].tensor: graph.inputs[0].name} | {
        tensor: source for tensor, (source, k, _) in stand_ins(graph).items() if k == 0}
    found = {}
    for tensor, name in wanted.items():
        model_tensor = tensors.get(name)
        if model_tensor is None or types.get(model_tensor.type) not in _INTEGER_DTYPES:
            continue
        q = model_tensor.quantization
        per_tensor = q is not None and q.scale is not None and len(q.scale) == 1
        found[tensor] = (ModelTensor(name, types[model_tensor.type], float(np.float32(q.scale[0])) if per_tensor
                                     else None, int(q.zeroPoint[0]) if per_tensor else None, channels_last=True),
                         int(np.prod(model_tensor.shape)) if model_tensor.shape is not None else None)
    return found


def litert_values(path: Path, x: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
    """LiteRT's reference kernels' values of the tensors `names` for the model's input `x`."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interpreter = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                              experimental_preserve_all_tensors=True)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    index = {detail["name"]: detail["index"] for detail in interpreter.get_tensor_details()}
    return {name: np.array(interpreter.get_tensor(index[name])) for name in names if name in index}


def framework_values(path: Path, x: np.ndarray, names: list[str]) -> tuple[str, dict[str, np.ndarray]]:
    """The framework's name and its values of the model's tensors `names` for the input `x`."""
    if is_tflite(path):
        return "LiteRT", litert_values(path, x, names)
    return "onnxruntime", onnxruntime_values(path, x, names)


# ---- comparison ----------------------------------------------------------------------------------------------


def in_ming_layout(value: np.ndarray, tensor: ModelTensor, shape: tuple[int, ...]) -> np.ndarray | None:
    """The framework's `value` of `tensor` as ming holds it (its `shape`: channels first, no batch axis; a uint8
    tensor's values shifted by -128), None when it has another number of values, or is float with no scale to
    compare it by."""
    array = np.asarray(value)
    if array.size != int(np.prod(shape)) or (array.dtype.kind == "f" and tensor.scale is None):
        return None
    array = array.astype(np.float64) if array.dtype.kind == "f" else \
        array.astype(np.int64) - (128 if tensor.dtype == "uint8" else 0)
    body = array.shape[1:] if array.ndim == len(shape) + 1 and array.shape[0] == 1 else array.shape
    if tensor.channels_last and tuple(body[-1:] + body[:-1]) == tuple(shape):  # (H, W, C) -> (C, H, W), C may be 1
        return np.moveaxis(array.reshape(body), -1, 0)
    squeezed, target = [d for d in array.shape if d != 1], [d for d in shape if d != 1]
    rotated = squeezed[-1:] + squeezed[:-1]  # (H, W, C) -> (C, H, W)
    if rotated == target and (tensor.channels_last or squeezed != target):
        return np.moveaxis(array.reshape(squeezed), -1, 0).reshape(shape)
    return array.reshape(shape)  # the same order (a vector, a map channels first, a reshape)


def _differences(ours: np.ndarray, theirs: np.ndarray, tensor: ModelTensor) -> np.ndarray:
    """The indices where the framework's value differs from ming's: as integers, or where the framework's is
    float, ming's dequantized against it (within half a step)."""
    if theirs.dtype.kind == "f":
        dequantized = (ours - (tensor.zero_point - (128 if tensor.dtype == "uint8" else 0))) * tensor.scale
        return np.argwhere(np.abs(dequantized - theirs) > tensor.scale / 2)
    return np.argwhere(ours != theirs)


def compare(golden: dict[str, np.ndarray], named: dict[str, ModelTensor], theirs: dict[str, np.ndarray],
            framework: str) -> tuple[str | None, int, str | None]:
    """One line on the first golden tensor (in `golden`'s order) that differs from the framework's (None when
    every shared tensor agrees), how many tensors were compared, and the model's name of that tensor."""
    compared = 0
    for tensor, ours in golden.items():
        model_tensor = named.get(tensor)
        value = theirs.get(model_tensor.name) if model_tensor is not None else None
        theirs_here = in_ming_layout(value, model_tensor, ours.shape) if value is not None else None
        if theirs_here is None:
            continue
        compared += 1
        wrong = _differences(ours, theirs_here, model_tensor)
        if len(wrong):
            at = tuple(int(i) for i in wrong[0])
            return (f"{model_tensor.name} (ming's {tensor}) differs from {framework}: {len(wrong)} of {ours.size} "
                    f"values, the first at {list(at)} of ming's {list(ours.shape)}: ming {int(ours[at])}, {framework} "
                    f"{_shown(theirs_here[at])}"), compared, model_tensor.name
    return None, compared, None


def _shown(value) -> str:
    return f"{float(value):g}" if isinstance(value, (float, np.floating)) else str(int(value))
