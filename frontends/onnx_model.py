"""ONNX frontend: check the model, import it through IREE, lift it into a Graph.

QOperator and uint8 models are first rewritten into int8 QDQ (`onnx_formats`).

Phases:
  ONNX --(iree onnx_importer, node names kept as locations)--> torch dialect
       --(iree-compile --compile-to=global-optimization
          --iree-global-opt-enable-qdq-to-integer-math)--> linalg on tensors
       --(lift.Lifter)--> ming Graph.
The global-optimization phase is the latest one that still has whole-tensor
`linalg.generic`s (no dispatch regions yet) and already folds QDQ around convs
and matmuls into i8 x i8 -> i32 bodies.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
from iree.compiler import ir
from onnx import numpy_helper
from iree.compiler.extras import onnx_importer

from ming_py.errors import MingError
from ming_py.ir import Graph
from ming_py.model_files import TAKES, foreign_model_problem

from . import iree_compile, onnx_formats
from .onnx_converters import constants_as_initializers, rewrite_converter_idioms
from .onnx_float_activations import quantize_float_activations
from .facts import FrontendFacts, ModelPort, QuantizedWeights
from .lift import Lifter
from .onnx_geometry import check_pads, prepare_resizes
from .onnx_tail import check_float_postprocessing, split_host_tails, with_host_tails
from .ort_kernels import float_averages, float_conv_notes, qlinear_kernels
from .onnx_tables import CONSTANT_OPERAND_OPS, TABLE_OPS, node_tables
from .onnx_windows import whole_map_windows

SUPPORTED_OPS = frozenset({
    "Conv", "Gemm", "MatMul", "MaxPool", "AveragePool", "GlobalAveragePool", "Relu", "Clip",
    "Add", "Sub", "Mul", "Concat", "Split", "Slice", "Flatten", "Reshape", "Transpose", "Softmax", "QuantizeLinear",
    "DequantizeLinear", "Identity", "GlobalMaxPool", "Resize", "Pad",
})

# what the frontend lifts: ops with an integer form, and ops it tabulates (onnx_tables)
ACCEPTED_OPS = SUPPORTED_OPS | TABLE_OPS | CONSTANT_OPERAND_OPS

IREE_FLAGS = (
    "--iree-input-type=onnx",
    "--compile-to=global-optimization",
    "--iree-global-opt-enable-qdq-to-integer-math",
    "--mlir-print-debuginfo",
)


def load_onnx(path: Path) -> onnx.ModelProto:
    if path.is_dir():
        raise MingError(f"{path}: is a directory; pass the path of an int8 QDQ .onnx model")
    if not path.exists():
        raise MingError(f"{path}: file not found; pass the path of an int8 QDQ .onnx model")
    try:
        with open(path, "rb") as file:
            file.read(1)
    except OSError as exc:
        raise MingError(f"{path}: cannot read the model ({exc.strerror or exc}); check its permissions") from None
    try:
        model = onnx.load(str(path))  # with its external data, if any
    except Exception as exc:  # onnx raises several unrelated types for bad files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MingError(foreign_model_problem(path) or f"{path}: not a valid ONNX model ({first[:120]}); {TAKES} "
                        "(.tflite)") from None
    check_names(model)
    name_unnamed_nodes(model)
    check_opsets(model)
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MingError(foreign_model_problem(path) or f"{path}: not a valid ONNX model ({first[:120]})") from None
    return model


def check_names(model: onnx.ModelProto) -> None:
    """Every name UTF-8 text (protobuf hands a name that is not as bytes, which the importer cannot take)."""
    graph = model.graph

    def check(kind: str, name, where: str = "") -> None:
        if isinstance(name, bytes):
            shown = name.decode(errors="backslashreplace")
            raise MingError(f"{kind} '{shown}'{where} has a name that is not UTF-8; rename it (ONNX names are "
                            "UTF-8 text)")

    check("graph", graph.name)
    for value in (*graph.input, *graph.output, *graph.value_info, *graph.initializer):
        check("tensor", value.name)
    for node in graph.node:
        check("node", node.name)
        label = f" (node '{node.name}')" if isinstance(node.name, str) else ""
        for tensor in (*node.input, *node.output):
            check("tensor", tensor, label)


def supported_opsets() -> dict[str, int]:
    """The newest opset of each domain the installed onnx package knows ('' is ai.onnx)."""
    try:
        return {domain: int(versions[1]) for domain, versions in onnx.defs.C.schema_version_map().items()}
    except Exception:  # an onnx without the map: its default domain's newest opset
        return {"": onnx.defs.onnx_opset_version()}


def check_opsets(model: onnx.ModelProto) -> None:
    """Refuse an opset newer than the installed onnx knows: its ops' meaning is unknown to every tool here."""
    supported = supported_opsets()
    for opset in model.opset_import:
        domain = "" if opset.domain in ("", "ai.onnx") else opset.domain
        highest = supported.get(domain)
        if highest is not None and opset.version > highest:
            raise MingError(f"model imports opset {opset.version} of {domain or 'ai.onnx'}, newer than the "
                            f"{highest} the installed onnx {onnx.__version__} supports; re-export it with opset "
                            f"{highest} or older")


def check_scales(model: onnx.ModelProto) -> None:
    """Every constant quantization scale (QDQ and QOperator) finite and positive, naming the node: a zero or
    NaN scale has no integer form (and onnxruntime or TFLite refuse it)."""
    constants = onnx_formats._constants(model.graph)
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx", "com.microsoft"):
            continue
        if node.op_type in onnx_formats.QDQ:
            scales = [onnx_formats._input(node, 1)]
        elif node.op_type in onnx_formats.FLOAT_OPS:
            scales = [scale for _, scale, _ in onnx_formats._operands(node)]
            scales.append(onnx_formats._input(node, onnx_formats._OUTPUT.get(node.op_type, 3)))
        else:
            continue
        for name in scales:
            if name not in constants:
                continue
            try:
                values = numpy_helper.to_array(constants[name]).astype(np.float64).reshape(-1)
            except Exception:  # a tensor of the wrong type or size: the checker or the importer names it
                continue
            bad = values[~(np.isfinite(values) & (values > 0))]
            if bad.size:
                raise MingError(f"node '{node.name}' ({node.op_type}) has quantization scale {float(bad[0])} "
                                f"('{name}'); scales must be finite and positive (re-quantize the model with "
                                "a representative dataset)")


def model_inputs(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    initializers = {i.name for i in graph.initializer}
    return [i for i in graph.input if i.name not in initializers]


def _dims(value: onnx.ValueInfoProto):
    return value.type.tensor_type.shape.dim


def _shape(value: onnx.ValueInfoProto) -> tuple[int, ...]:
    return tuple(d.dim_value for d in _dims(value))


def fix_symbolic_batch(model: onnx.ModelProto) -> list[str]:
    """Give a symbolic (or unknown) leading batch dimension of the inputs and outputs the value 1, as
    converters such as tf2onnx leave it; one note per tensor fixed."""
    notes = []
    for value in list(model_inputs(model.graph)) + list(model.graph.output):
        dims = _dims(value)
        if len(dims) > 1 and not dims[0].dim_value:
            label = dims[0].dim_param or "?"
            dims[0].dim_value = 1  # replaces the dim_param (one field of a oneof)
            notes.append(f"'{value.name}' has a symbolic batch dimension '{label}'; compiled for batch 1")
    if notes:
        del model.graph.value_info[:]  # shape inference derives them again from batch 1
    return notes


def _consumers(graph: onnx.GraphProto, tensor: str) -> list[onnx.NodeProto]:
    return [n for n in graph.node if tensor in n.input]


def _rename_uses(graph: onnx.GraphProto, old: str, new: str) -> None:
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new
        for i, name in enumerate(node.output):
            if name == old:
                node.output[i] = new


def _permutation(node: onnx.NodeProto) -> tuple[int, ...] | None:
    """A Transpose's axes if it keeps the batch axis first (NHWC <-> NCHW), else None."""
    perm = tuple(next((list(a.ints) for a in node.attribute if a.name == "perm"), []))
    return perm if perm and perm[0] == 0 else None


def fold_input_transpose(model: onnx.ModelProto, value: onnx.ValueInfoProto) -> tuple[int, ...]:
    """Remove a Transpose (or a Reshape that is one) that reads the input directly, or through its per-tensor
    DequantizeLinear; the input then has the transposed shape. Returns the permutation (none: ())."""
    graph = model.graph
    consumers = _consumers(graph, value.name)
    if len(consumers) != 1:
        return ()
    node, reader = consumers[0], None
    if node.op_type == "DequantizeLinear" and len(_consumers(graph, node.output[0])) == 1:
        reader, node = node, _consumers(graph, node.output[0])[0]
    shape = _shape(value)
    perm = _permutation(node) if node.op_type == "Transpose" else _reshape_permutation(graph, node, shape)
    if perm is None:
        return ()
    graph.node.remove(node)
    _rename_uses(graph, node.output[0], value.name if reader is None else reader.output[0])
    for dim, axis in zip(_dims(value), perm):
        dim.dim_value = shape[axis]
    return perm


def _reshape_permutation(graph: onnx.GraphProto, node: onnx.NodeProto, shape: tuple[int, ...]):
    """The NHWC <-> NCHW permutation a Reshape of `shape` is, moving only axes of size 1 (tf2onnx writes the
    Transpose of a single-channel NHWC input so), else None."""
    target = next((numpy_helper.to_array(i) for i in graph.initializer if node.op_type == "Reshape"
                   and len(node.input) > 1 and i.name == node.input[1]), None)
    if target is None or len(shape) != 4 or len(target) != 4:
        return None
    target = [shape[i] if d == 0 else int(d) for i, d in enumerate(target)]  # ONNX: 0 copies the dimension
    if -1 in target:  # and -1 is what the others leave
        target[target.index(-1)] = int(np.prod(shape)) // max(1, -int(np.prod(target)))
    for perm in ((0, 3, 1, 2), (0, 2, 3, 1)):
        if tuple(target) == tuple(shape[a] for a in perm):
            return perm
    return None


def fold_output_transpose(model: onnx.ModelProto, value: onnx.ValueInfoProto) -> tuple[int, ...]:
    """Remove a Transpose that writes the output; the output then has the untransposed shape. Returns the
    permutation from the model's output to that layout (none: ())."""
    graph = model.graph
    node = next((n for n in graph.node if value.name in n.output), None)
    if node is None or node.op_type != "Transpose" or _permutation(node) is None:
        return ()
    source = node.input[0]
    if source in {i.name for i in graph.input} | {i.name for i in graph.initializer} | \
            {o.name for o in graph.output}:
        return ()
    perm = _permutation(node)
    shape = _shape(value)
    graph.node.remove(node)
    _rename_uses(graph, source, value.name)
    inverse = tuple(int(a) for a in np.argsort(perm))
    for dim, axis in zip(_dims(value), inverse):
        dim.dim_value = shape[axis]
    return inverse


def check_supported(model: onnx.ModelProto) -> None:
    """Reject inputs and outputs ming cannot compile, naming the tensor and what to do."""
    graph = model.graph
    inputs = model_inputs(graph)
    if len(inputs) != 1:
        raise MingError(f"model has {len(inputs)} inputs; ming compiles single-input CNNs")
    if not graph.output:
        raise MingError("model has no outputs; ming compiles a model with at least one output (re-export it with "
                        "its outputs in graph.output)")
    for value in list(inputs) + list(graph.output):
        dims = value.type.tensor_type.shape.dim
        if any(d.HasField("dim_value") and d.dim_value == 0 for d in dims):
            raise MingError(f"tensor '{value.name}' has a zero dimension {list(_shape(value))}; every dimension "
                            "of a CNN tensor is at least 1 (re-export the model with its real input size)")
        if any(not d.HasField("dim_value") or d.dim_value <= 0 for d in dims):
            raise MingError(f"tensor '{value.name}' has a dynamic shape; export the model with static shapes "
                            "(batch 1)")
        if dims and dims[0].dim_value != 1:
            raise MingError(f"tensor '{value.name}' has batch {dims[0].dim_value}; ming compiles batch 1 "
                            "(re-export with batch size 1)")


# ops ming refuses for a reason a user can act on
REFUSED_WHY = {
    "ReduceMean": "onnxruntime runs a quantized ReduceMean in float, in an order ming does not reproduce bit for "
                  "bit; export a mean over the spatial axes as GlobalAveragePool (PyTorch's AdaptiveAvgPool2d(1) "
                  "with torch.onnx.export(..., dynamo=False)), which onnxruntime and ming run as "
                  "QLinearGlobalAveragePool",
}


def check_operators(model: onnx.ModelProto) -> None:
    """Reject operators ming cannot compile (after the frontend folded what it can)."""
    graph = model.graph
    for node in graph.node:
        if node.domain not in ("", "ai.onnx"):
            raise MingError(f"node '{node.name}' ({node.domain}.{node.op_type}) is not supported; export a QDQ "
                            "model with standard ONNX ops (or QOperator with the ops ming's README lists)")
        if node.op_type in REFUSED_WHY:
            raise MingError(f"node '{node.name}' ({node.op_type}) is not supported: {REFUSED_WHY[node.op_type]}")
        if node.op_type not in ACCEPTED_OPS:
            raise MingError(f"node '{node.name}' ({node.op_type}) is not supported; supported ops: "
                            + ", ".join(sorted(ACCEPTED_OPS)))
    if not any(n.op_type == "QuantizeLinear" for n in graph.node):
        raise MingError("model is not quantized (no QuantizeLinear); quantize it to int8 QDQ with "
                        "onnxruntime.quantization.quantize_static")
    for node in graph.node:
        if node.op_type == "QuantizeLinear" and len(node.input) > 2:
            zero_point = next((i for i in graph.initializer if i.name == node.input[2]), None)
            if zero_point is not None and zero_point.data_type != onnx.TensorProto.INT8:
                raise MingError(f"node '{node.name}' quantizes to {onnx.TensorProto.DataType.Name(zero_point.data_type)}; "
                                "ming takes int8 or uint8 (activation_type=QuantType.QInt8 or QUInt8)")


def quantized_weights(graph: onnx.GraphProto) -> dict[str, QuantizedWeights]:
    """Per Conv node, its int8 weights behind their DequantizeLinear (the lifter turns the float weights IREE
    leaves grouped convolutions with back into them)."""
    producers = {out: node for node in graph.node for out in node.output}
    initializers = {i.name: i for i in graph.initializer}

    def constant(name: str) -> np.ndarray | None:
        return numpy_helper.to_array(initializers[name]) if name in initializers else None

    table = {}
    for node in graph.node:
        dequantize = producers.get(node.input[1]) if node.op_type == "Conv" else None
        if dequantize is None or dequantize.op_type != "DequantizeLinear":
            continue
        values, scale = constant(dequantize.input[0]), constant(dequantize.input[1])
        zero_point = constant(dequantize.input[2]) if len(dequantize.input) > 2 and dequantize.input[2] else 0
        if values is None or scale is None or zero_point is None or values.dtype != np.int8:
            continue
        axis = next((a.i for a in dequantize.attribute if a.name == "axis"), 1)
        table[node.name] = QuantizedWeights(values, scale, np.asarray(zero_point), axis % values.ndim)
    return table


def transpose_wrappers(graph: onnx.GraphProto) -> dict[str, str]:
    """The DequantizeLinear before and the QuantizeLinear after each Transpose, by name -> the Transpose's name
    (IREE folds a transposition of int8 values into the (de)quantization and keeps only its name)."""
    wrappers = {}
    for node in graph.node:
        if node.op_type == "Transpose":
            for neighbour in graph.node:
                if (neighbour.op_type == "DequantizeLinear" and node.input[0] in neighbour.output) or \
                        (neighbour.op_type == "QuantizeLinear" and node.output[0] in neighbour.input):
                    wrappers[neighbour.name] = node.name
    return wrappers


def name_unnamed_nodes(model: onnx.ModelProto) -> None:
    """Give every node without a name of its own (empty, as PyTorch's and tf2onnx's exports leave many, or shared
    with an earlier node) the name of its first output tensor, which a model viewer shows: ming tells nodes apart,
    and names them in its messages and reports, by their names."""
    taken = {node.name for node in model.graph.node if node.name}
    seen: set[str] = set()
    for position, node in enumerate(model.graph.node):
        if node.name and node.name not in seen:
            seen.add(node.name)
            continue
        name = next((tensor for tensor in node.output if tensor), "") or f"{node.op_type}_{position}"
        while name in taken:
            name = f"{name}_{node.op_type}"
        node.name = name
        taken.add(name)
        seen.add(name)


def import_to_linalg(model: onnx.ModelProto, path: Path | None = None) -> str:
    """The model as linalg-on-tensors MLIR text (with ONNX node names as locations)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    context = ir.Context()
    info = onnx_importer.ModelInfo(inferred)
    module = info.create_module(context=context).operation
    onnx_importer.NodeImporter.define_function(info.main_graph, module).import_all()
    torch_mlir = module.get_asm(enable_debug_info=True)
    return iree_compile.lower(torch_mlir.encode(), IREE_FLAGS, str(path) if path else "the model")


def import_onnx(path: str | Path, name: str | None = None) -> Graph:
    """The ONNX model's graph IR, named `name` (default: the file's stem)."""
    path = Path(path)
    model = load_onnx(path)
    constants_as_initializers(model)
    check_scales(model)
    notes = fix_symbolic_batch(model)
    kernels = qlinear_kernels(model)  # of the model as written: onnxruntime runs that one
    notes += float_conv_notes(model)
    averages = float_averages(model, kernels)
    types = onnx_formats.to_int8_qdq(model)
    quantize_float_activations(model, TABLE_OPS)
    check_float_postprocessing(model, path)
    check_supported(model)
    rewrite_converter_idioms(model)
    whole_map_windows(model)
    tails = split_host_tails(model, path)
    inputs = [ModelPort(v.name, _shape(v), integer_dtype=types.input_dtype(v.name)) for v in model_inputs(model.graph)]
    outputs = [ModelPort(v.name, _shape(v), integer_dtype=types.output_dtype(v.name)) for v in model.graph.output]
    inputs = [replace(port, permutation=fold_input_transpose(model, value))
              for port, value in zip(inputs, model_inputs(model.graph))]
    outputs = [replace(port, permutation=fold_output_transpose(model, value))
               for port, value in zip(outputs, model.graph.output)]
    check_operators(model)
    tables = node_tables(model)
    check_pads(model)
    resizes = prepare_resizes(model)
    name_unnamed_nodes(model)  # and the nodes the rewrites above added
    text = import_to_linalg(model, path)
    with ir.Context() as context:
        module = iree_compile.parse(text, context, str(path))
        op_types = {node.name: node.op_type for node in model.graph.node}
        facts = FrontendFacts(op_types, tuple(notes), tables=tables, resizes=resizes,
                              weights=quantized_weights(model.graph), transposes=transpose_wrappers(model.graph),
                              qlinear_kernels=kernels, float_averages=averages)
        return with_host_tails(Lifter(name or path.stem, inputs, outputs, facts).run(module), tails)
