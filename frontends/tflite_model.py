"""TFLite frontend: check the model, import it through IREE's TOSA input, lift it into a Graph.

Phases:
  TFLite flatbuffer --(batch fixed, shape arithmetic folded: tflite_fold)
      --(tosa-converter-for-tflite, MLIR bytecode)--> TOSA
      --(iree-compile --iree-input-type=tosa --compile-to=global-optimization)--> integer linalg
      --(lift.Lifter; repeats as Upsample; layout.channels_first)--> ming Graph.
TFLite's int8 arithmetic arrives as integer code (TOSA RESCALE lowered to
64-bit multiply, rounding and shift), which the lifter reads as TFLite's
fixed-point requantization (`fixed_point`). A symbolic batch is fixed to 1
in the flatbuffer's shape signatures before the conversion; the SHAPE,
STRIDED_SLICE, PACK, GATHER and CONCATENATION of int32 shapes that Keras
writes for it then fold to constants. EXPAND_DIMS and SQUEEZE are reshapes;
TILE is taken as Keras' UpSampling2D writes it (a repeat per axis); a RESIZE_NEAREST_NEIGHBOR that repeats
each pixel by whole factors is rewritten that way first (`tflite_fold`), and a RESIZE_BILINEAR by whole
factors too, as the stand-in that its `BilinearResize` (LiteRT's integer tables) replaces after lifting. A
TRANSPOSE_CONV becomes PAD, a convolution of its phases and DEPTH_TO_SPACE (`tflite_transpose_conv`).
"""

from __future__ import annotations

import math
import sys
from collections import Counter
import tempfile
from dataclasses import replace
from pathlib import Path

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema
from iree.compiler import ir

from ming_py.errors import MingError
from ming_py.ir import (Arg, BilinearResize, FixedPointRequant, Graph, Kernel, Pad, Reshape,
                        Upsample, node_inputs)

from .layout import channels_first
from . import iree_compile, isolated
from .facts import FrontendFacts, ModelPort
from .lift import Lifter
from .tflite_grouped import one_channel_groups_as_whole_convs
from .tflite_windows import short_windows_to_the_map_end, unit_axis_windows_as_one_tap
from .tflite_boundary import split_host_boundary, with_host_boundary
from .tflite_fold import RESIZE_OPS, SHAPE_OPS, fold_shape_arithmetic, op_name, resizes_as_repeats, tensor_name
from .tflite_tables import CONSTANT_OPERAND_OPS, TABLE_OPS, node_tables, with_stand_ins
from .tflite_transpose_conv import transpose_convs_as_phases
from .tflite_uint8 import legacy_uint8_as_int8

ACCELERATED_OPS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "AVERAGE_POOL_2D", "MEAN",
                             "CONCATENATION", "MAX_POOL_2D", "RESHAPE", "PAD", "EXPAND_DIMS", "SQUEEZE", "TILE",
                             "SPLIT", "SPLIT_V", "SLICE", "TRANSPOSE", "MAXIMUM", "MINIMUM", "TRANSPOSE_CONV",
                             "DEPTH_TO_SPACE"})
SPLIT_OPS = frozenset({"SPLIT", "SPLIT_V"})  # one output per part
BOUNDARY_OPS = frozenset({"QUANTIZE", "DEQUANTIZE", "SOFTMAX"})  # on the host, at the input or the output
SUPPORTED_OPS = ACCELERATED_OPS | BOUNDARY_OPS | SHAPE_OPS | TABLE_OPS | CONSTANT_OPERAND_OPS | RESIZE_OPS
IREE_FLAGS = (
    "--iree-input-type=tosa",
    "--iree-global-opt-propagate-transposes=false",
    "--compile-to=global-optimization",
    "--mlir-print-debuginfo",
)
_TYPE_NAMES = {value: name for name, value in vars(schema.TensorType).items() if not name.startswith("_")}


def load_tflite(path: Path) -> schema.ModelT:
    if path.is_dir():
        raise MingError(f"{path}: is a directory; pass the path of an int8 .tflite model")
    if not path.exists():
        raise MingError(f"{path}: file not found; pass the path of an int8 .tflite model")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise MingError(f"{path}: cannot read the model ({exc.strerror or exc}); check its permissions") from None
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise MingError(f"{path}: not a TFLite flatbuffer (no TFL3 identifier)")
    try:
        return schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    except Exception as exc:  # a damaged flatbuffer raises from deep inside the generated reader
        raise MingError(f"{path}: not a valid TFLite model ({type(exc).__name__})") from None


def check_supported(model: schema.ModelT) -> None:
    if len(model.subgraphs or []) != 1:
        raise MingError(f"model has {len(model.subgraphs or [])} subgraphs; ming compiles single-graph models")
    check_structure(model)
    graph = model.subgraphs[0]
    if len(graph.inputs) != 1:
        raise MingError(f"model has {len(graph.inputs)} inputs; ming compiles single-input CNNs")
    if len(graph.outputs) == 0:
        raise MingError("model has no outputs; ming compiles a model with at least one output (re-export it "
                        "with the outputs marked)")
    for index, operator in enumerate(graph.operators):
        kind = op_name(model, operator)
        if kind not in SUPPORTED_OPS:
            output = tensor_name(graph.tensors[operator.outputs[0]]) if len(operator.outputs) else str(index)
            raise MingError(f"node '{output}' ({kind}) is not supported; supported TFLite ops: "
                            + ", ".join(sorted(SUPPORTED_OPS)))
    for index in list(graph.inputs) + list(graph.outputs):
        tensor = graph.tensors[index]
        if tensor.type not in (schema.TensorType.INT8, schema.TensorType.UINT8, schema.TensorType.FLOAT32):
            raise MingError(f"tensor '{tensor_name(tensor)}' is {_TYPE_NAMES.get(tensor.type, tensor.type)}; "
                            "ming compiles int8 models (int8, uint8 or float32 inputs and outputs) and legacy uint8 "
                            "ones")
    if not any(t.type in (schema.TensorType.INT8, schema.TensorType.UINT8) for t in graph.tensors):
        raise MingError("model is not quantized (no int8 tensor); convert it with full integer quantization")
    check_tensors(model)


# ---- the flatbuffer's structure, checked before the (native) TOSA converter reads it ----------------------

# the builtin options an op reads (absent or of another type: the converter fails or reads garbage)
_OPTIONS = {
    "CONV_2D": schema.BuiltinOptions.Conv2DOptions, "DEPTHWISE_CONV_2D": schema.BuiltinOptions.DepthwiseConv2DOptions,
    "FULLY_CONNECTED": schema.BuiltinOptions.FullyConnectedOptions, "ADD": schema.BuiltinOptions.AddOptions,
    "AVERAGE_POOL_2D": schema.BuiltinOptions.Pool2DOptions, "MAX_POOL_2D": schema.BuiltinOptions.Pool2DOptions,
    "MEAN": schema.BuiltinOptions.ReducerOptions, "CONCATENATION": schema.BuiltinOptions.ConcatenationOptions,
    "RESHAPE": schema.BuiltinOptions.ReshapeOptions, "PAD": schema.BuiltinOptions.PadOptions,
    "SOFTMAX": schema.BuiltinOptions.SoftmaxOptions, "QUANTIZE": schema.BuiltinOptions.QuantizeOptions,
    "DEQUANTIZE": schema.BuiltinOptions.DequantizeOptions, "SHAPE": schema.BuiltinOptions.ShapeOptions,
    "STRIDED_SLICE": schema.BuiltinOptions.StridedSliceOptions, "PACK": schema.BuiltinOptions.PackOptions,
    "GATHER": schema.BuiltinOptions.GatherOptions, "EXPAND_DIMS": schema.BuiltinOptions.ExpandDimsOptions,
    "SQUEEZE": schema.BuiltinOptions.SqueezeOptions, "TILE": schema.BuiltinOptions.TileOptions,
    "RESIZE_NEAREST_NEIGHBOR": schema.BuiltinOptions.ResizeNearestNeighborOptions,
    "RESIZE_BILINEAR": schema.BuiltinOptions.ResizeBilinearOptions,
    "SPLIT": schema.BuiltinOptions.SplitOptions, "SPLIT_V": schema.BuiltinOptions.SplitVOptions,
    "SLICE": schema.BuiltinOptions.SliceOptions, "TRANSPOSE": schema.BuiltinOptions.TransposeOptions,
    "MAXIMUM": schema.BuiltinOptions.MaximumMinimumOptions, "MINIMUM": schema.BuiltinOptions.MaximumMinimumOptions,
    "TRANSPOSE_CONV": schema.BuiltinOptions.TransposeConvOptions,
    "DEPTH_TO_SPACE": schema.BuiltinOptions.DepthToSpaceOptions,
}
# ops whose options carry geometry or parameters without a usable default: required
_REQUIRED_OPTIONS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D", "CONCATENATION",
                               "SOFTMAX", "TRANSPOSE_CONV", "DEPTH_TO_SPACE"})
# (fewest, most) inputs per op and the positions that may be absent (-1)
_INPUTS = {"CONV_2D": (2, 3), "DEPTHWISE_CONV_2D": (2, 3), "FULLY_CONNECTED": (2, 3), "ADD": (2, 2),
           "AVERAGE_POOL_2D": (1, 1), "MAX_POOL_2D": (1, 1), "MEAN": (2, 2), "CONCATENATION": (1, None),
           "RESHAPE": (1, 2), "PAD": (2, 2), "SOFTMAX": (1, 1), "QUANTIZE": (1, 1), "DEQUANTIZE": (1, 1),
           "SHAPE": (1, 1), "STRIDED_SLICE": (4, 4), "PACK": (1, None), "GATHER": (2, 2), "EXPAND_DIMS": (2, 2),
           "SQUEEZE": (1, 1), "TILE": (2, 2), "RESIZE_NEAREST_NEIGHBOR": (2, 2), "RESIZE_BILINEAR": (2, 2),
           "SPLIT": (2, 2), "SPLIT_V": (3, 3), "SLICE": (3, 3), "TRANSPOSE": (2, 2),
           "MAXIMUM": (2, 2), "MINIMUM": (2, 2), "TRANSPOSE_CONV": (3, 4), "DEPTH_TO_SPACE": (1, 1)}
_OPTIONAL_INPUTS = {"CONV_2D": {2}, "DEPTHWISE_CONV_2D": {2}, "FULLY_CONNECTED": {2}, "TRANSPOSE_CONV": {3}}
_OPTIONS |= {op: schema.BuiltinOptions.NONE for op in TABLE_OPS} | {
    "MUL": schema.BuiltinOptions.MulOptions, "LEAKY_RELU": schema.BuiltinOptions.LeakyReluOptions,
    "HARD_SWISH": schema.BuiltinOptions.HardSwishOptions}
_INPUTS |= {"MUL": (2, 2), "PRELU": (2, 2)} | {op: (1, 1) for op in TABLE_OPS - {"PRELU"}}
_ITEM_SIZES = {schema.TensorType.INT8: 1, schema.TensorType.UINT8: 1, schema.TensorType.BOOL: 1,
               schema.TensorType.INT16: 2, schema.TensorType.FLOAT16: 2, schema.TensorType.INT32: 4,
               schema.TensorType.FLOAT32: 4, schema.TensorType.INT64: 8, schema.TensorType.FLOAT64: 8}
_DAMAGED = "the flatbuffer is damaged or hand-edited; re-export the model with the TFLite converter"


def check_structure(model: schema.ModelT) -> None:
    """Every index in range, the options each op reads present, every name UTF-8: the TOSA converter
    trusts all of them (an output tensor index out of range crashes it)."""
    graph = model.subgraphs[0]
    graph.tensors, graph.operators = list(graph.tensors or []), list(graph.operators or [])
    graph.inputs = [] if graph.inputs is None else graph.inputs
    graph.outputs = [] if graph.outputs is None else graph.outputs
    codes, buffers, tensors = model.operatorCodes or [], model.buffers or [], graph.tensors
    for index, tensor in enumerate(tensors):
        try:
            (tensor.name or b"").decode()
        except UnicodeDecodeError:
            raise MingError(f"tensor {index} ('{tensor_name(tensor)}') has a name that is not UTF-8; rename it "
                            "(TFLite names are UTF-8 text)") from None
        if not 0 <= tensor.buffer < len(buffers):
            raise MingError(f"tensor '{tensor_name(tensor)}': its buffer index {tensor.buffer} is out of range "
                            f"(the model has {len(buffers)} buffers); {_DAMAGED}")
    for role, indices in (("input", graph.inputs), ("output", graph.outputs)):
        for index in indices:
            if not 0 <= index < len(tensors):
                raise MingError(f"model {role} tensor index {index} is out of range (the model has {len(tensors)} "
                                f"tensors); {_DAMAGED}")
    for position, operator in enumerate(graph.operators):
        outputs = [] if operator.outputs is None else list(operator.outputs)
        inputs = [] if operator.inputs is None else list(operator.inputs)
        label = f"operator {position}"
        if outputs and all(0 <= i < len(tensors) for i in outputs):
            label = f"node '{tensor_name(tensors[outputs[0]])}'"
        if not 0 <= operator.opcodeIndex < len(codes):
            raise MingError(f"{label}: its opcode index {operator.opcodeIndex} is out of range (the model has "
                            f"{len(codes)} operator codes); {_DAMAGED}")
        kind = op_name(model, operator)
        label = f"{label} ({kind})"
        if kind in SPLIT_OPS or kind == "CUSTOM":
            if not outputs:
                raise MingError(f"{label} has no outputs, TFLite's {kind} has one per part; {_DAMAGED}")
        elif len(outputs) != 1:
            raise MingError(f"{label} has {len(outputs)} outputs, TFLite's {kind} has one; {_DAMAGED}")
        for field, values in (("output", outputs), ("input", inputs)):
            for slot, index in enumerate(values):
                if index == -1 and field == "input" and slot in _OPTIONAL_INPUTS.get(kind, ()):
                    continue
                if not 0 <= index < len(tensors):
                    raise MingError(f"{label}: {field} {slot} is tensor index {index}, out of range (the model has "
                                    f"{len(tensors)} tensors); {_DAMAGED}")
        if kind == "CUSTOM":
            raise MingError(_custom_op_refusal(model, operator))
        if kind not in _INPUTS:
            continue  # an op ming does not take: check_supported names it
        fewest, most = _INPUTS[kind]
        if len(inputs) < fewest or (most is not None and len(inputs) > most):
            expected = f"{fewest}" if fewest == most else f"{fewest} or more" if most is None else f"{fewest}-{most}"
            raise MingError(f"{label} has {len(inputs)} inputs, TFLite's {kind} takes {expected}; {_DAMAGED}")
        options_type = operator.builtinOptionsType or 0
        if options_type and (options_type != _OPTIONS[kind] or operator.builtinOptions is None):
            raise MingError(f"{label}: its builtin options are of another op's type ({options_type}); {_DAMAGED}")
        if kind in _REQUIRED_OPTIONS and (not options_type or operator.builtinOptions is None):
            raise MingError(f"{label} has no builtin options ({kind} needs its strides, padding or axis); "
                            f"{_DAMAGED}")


# SSD's box decoding and non-maximum suppression (TensorFlow's object detection API writes it as a custom op)
DETECTION_POSTPROCESS = "TFLite_Detection_PostProcess"


def _custom_op_refusal(model: schema.ModelT, operator) -> str:
    """One line naming a custom op by its code and its first output; for SSD's detection post-processing, the
    tensors to cut the model at (its raw box encodings and class scores: the model's outputs without it)."""
    graph = model.subgraphs[0]
    code = (model.operatorCodes[operator.opcodeIndex].customCode or b"").decode(errors="backslashreplace") or "?"
    outputs = [i for i in (operator.outputs if operator.outputs is not None else []) if i >= 0]
    label = f"node '{tensor_name(graph.tensors[outputs[0]])}'" if outputs else "a node"
    if code == DETECTION_POSTPROCESS:
        inputs = [f"'{tensor_name(graph.tensors[i])}'" for i in list(operator.inputs if operator.inputs is not None else [])[:2] if i >= 0]
        return (f"{label} (custom op {code}: SSD's box decoding and non-maximum suppression) runs on no "
                f"accelerator ming builds; cut the model before it, so that its outputs are the raw box encodings "
                f"and class scores {' and '.join(inputs)}, and decode the boxes and run the suppression on the host "
                f"(with the anchors the op holds)")
    return (f"{label} (custom op {code}) is not supported: ming compiles TFLite builtin ops; cut the model "
            f"before it or re-export it without custom ops")


def check_tensors(model: schema.ModelT) -> None:
    """Shapes without zero dimensions, constant data of the size the shape says, and every int8 tensor
    quantized with finite positive scales (a zero scale makes every output -128; TFLite refuses it)."""
    graph = model.subgraphs[0]
    for tensor in graph.tensors:
        name, shape = tensor_name(tensor), [int(d) for d in (tensor.shape if tensor.shape is not None else [])]
        if 0 in shape:
            raise MingError(f"tensor '{name}' has a zero dimension {shape}; every dimension of a CNN tensor is at "
                            "least 1 (re-export the model with its real input size)")
        data = model.buffers[tensor.buffer].data
        size = _ITEM_SIZES.get(tensor.type)
        if data is not None and len(data) and size is not None and all(d > 0 for d in shape) and \
                len(data) != math.prod(shape) * size:
            raise MingError(f"tensor '{name}' has {len(data)} bytes of data, its shape {shape} needs "
                            f"{math.prod(shape) * size}; {_DAMAGED}")
        q = tensor.quantization
        scales = [] if q is None or q.scale is None else [float(s) for s in q.scale]
        zero_points = [] if q is None or q.zeroPoint is None else [int(z) for z in q.zeroPoint]
        if tensor.type == schema.TensorType.INT8 and not scales:
            raise MingError(f"tensor '{name}' is int8 without quantization parameters (scale, zero point); "
                            "convert the model with full integer quantization")
        if not scales:
            continue
        bad = next((s for s in scales if not (math.isfinite(s) and s > 0)), None)
        if bad is not None:
            raise MingError(f"tensor '{name}' has quantization scale {str(np.float32(bad))}; scales must be finite and "
                            "positive (re-quantize the model with a representative dataset)")
        if len(zero_points) != len(scales):
            raise MingError(f"tensor '{name}' has {len(scales)} scales and {len(zero_points)} zero points; "
                            f"{_DAMAGED}")
        if tensor.type == schema.TensorType.INT8 and any(not -128 <= z <= 127 for z in zero_points):
            raise MingError(f"tensor '{name}' has an int8 zero point outside -128..127 ({zero_points[:4]}); "
                            f"{_DAMAGED}")
        if len(scales) > 1:
            axis = q.quantizedDimension
            if not 0 <= axis < len(shape) or shape[axis] != len(scales):
                raise MingError(f"tensor '{name}' has {len(scales)} per-channel scales along dimension {axis} of "
                                f"shape {shape}; {_DAMAGED}")


def fix_symbolic_batch(model: schema.ModelT) -> list[str]:
    """Batch 1 where the shape signature leaves the batch dimension open (-1), with a note per model input;
    then the shape arithmetic over the now static shapes folded to constants (`tflite_fold`), which settles
    the output shape of every RESHAPE that depended on the batch, and of the ops after a RESHAPE that merged
    the batch into another axis (where the leading -1 was no batch)."""
    graph = model.subgraphs[0]
    notes = []
    written = {}  # the signatures as the model wrote them, of the tensors whose leading -1 becomes 1
    for index, tensor in enumerate(graph.tensors):
        signature = tensor.shapeSignature
        if signature is not None and len(signature) > 1 and signature[0] == -1:
            written[index] = [int(d) for d in signature]
            tensor.shapeSignature = [1] + list(signature[1:])
            tensor.shape = [1] + list(tensor.shape[1:])
            if index in graph.inputs:
                notes.append(f"'{tensor_name(tensor)}' has a symbolic batch dimension; compiled for batch 1")
    fold_shape_arithmetic(model, written)
    for index, tensor in enumerate(graph.tensors):
        if tensor.shapeSignature is not None and any(d < 0 for d in tensor.shapeSignature):
            raise MingError(f"tensor '{tensor_name(tensor)}'{_writer(model, index)} has a dynamic shape "
                            f"{[int(d) for d in tensor.shapeSignature]} (negative: known only at run time); convert "
                            "the model with every dimension fixed (a Keras Input or tf.TensorSpec of full shape, "
                            "batch 1)")
    return notes


def _writer(model: schema.ModelT, tensor: int) -> str:
    """' (written by OP)' for the operator that writes the tensor, or nothing for a model input."""
    for operator in model.subgraphs[0].operators:
        if tensor in list(operator.outputs):
            return f" (written by {op_name(model, operator)})"
    return ""


def _flatbuffer(model: schema.ModelT) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def import_to_linalg(model: schema.ModelT, path: Path, rewritten: str = "") -> str:
    """The model as integer linalg-on-tensors MLIR text, through TOSA bytecode; the converter runs in a
    child process (`isolated`): a malformed model that crashes it costs the child, not ming. `rewritten`: what
    ming changed in the flatbuffer (`rewrites`), said where the converter fails."""
    with tempfile.TemporaryDirectory(prefix="ming-") as scratch:  # the converter reads and writes files
        staged, tosa = Path(scratch) / "model.tflite", Path(scratch) / "model.mlirbc"
        staged.write_bytes(_flatbuffer(model))
        isolated.run([sys.executable, "-m", "ming_py.frontends.tosa_convert", str(staged), str(tosa)],
                     "the TFLite converter", str(path), rewritten=rewritten)
        bytecode = tosa.read_bytes()
    return iree_compile.lower(bytecode, IREE_FLAGS, str(path))


def _op_counts(model: schema.ModelT) -> Counter:
    return Counter(op_name(model, op) for op in model.subgraphs[0].operators)


def _signatures(model: schema.ModelT) -> list:
    return [None if t.shapeSignature is None else [int(d) for d in t.shapeSignature]
            for t in model.subgraphs[0].tensors]


def rewrites(before: Counter, after: Counter, shapes_set: bool) -> str:
    """What ming changed in a flatbuffer, in words ("" for nothing): the batch fixed, the ops it removed and
    added (shape arithmetic folded, resizes, transposed and grouped convolutions rewritten, the host's ops)."""
    removed = before - after
    added = after - before
    parts = ["set the model's symbolic shapes to static ones (batch 1)"] if shapes_set else []
    if removed:
        parts.append("removed " + ", ".join(f"{n} {kind}" for kind, n in sorted(removed.items())))
    if added:
        parts.append("added " + ", ".join(f"{n} {kind}" for kind, n in sorted(added.items())))
    return "; ".join(parts)


def _port(graph, index: int) -> ModelPort:
    tensor = graph.tensors[index]
    return ModelPort(tensor_name(tensor), tuple(int(d) for d in tensor.shape))


def import_tflite(path: str | Path, name: str | None = None) -> Graph:
    """The TFLite model's graph IR, named `name` (default: the file's stem)."""
    path = Path(path)
    model = load_tflite(path)
    check_supported(model)
    ops_before, signatures_before = _op_counts(model), _signatures(model)
    notes = fix_symbolic_batch(model)
    legacy = legacy_uint8_as_int8(model)  # a uint8 model as the int8 one of the same integers shifted by -128
    resizes = resizes_as_repeats(model)
    transpose_convs_as_phases(model)
    unit_axis_windows_as_one_tap(model)
    short_windows_to_the_map_end(model)
    one_channel_groups_as_whole_convs(model)
    boundary = split_host_boundary(model)
    graph = model.subgraphs[0]
    for operator in graph.operators:
        if op_name(model, operator) in BOUNDARY_OPS:
            raise MingError(f"node '{tensor_name(graph.tensors[operator.outputs[0]])}' ({op_name(model, operator)}) "
                            "is supported only as the model's first ops (QUANTIZE after the input) or last "
                            "(SOFTMAX, QUANTIZE, DEQUANTIZE before an output), which run on the host")
    tables = node_tables(model, str(path))
    staged = with_stand_ins(model)
    rewritten = rewrites(ops_before, _op_counts(staged), _signatures(model) != signatures_before)
    text = import_to_linalg(staged, path, rewritten)
    name = name or path.stem
    op_types = {tensor_name(graph.tensors[op.outputs[0]]): op_name(model, op) for op in graph.operators}
    with ir.Context() as context:
        module = iree_compile.parse(text, context, str(path))
        lifted = Lifter(name, [_port(graph, i) for i in graph.inputs], [_port(graph, i) for i in graph.outputs],
                        FrontendFacts(op_types, tuple(notes), tables=tables, channels_last=True)).run(module)
    shapes = {tensor_name(t): tuple(int(d) for d in t.shape) for t in graph.tensors if t.shape is not None}
    lifted = _repeats_as_upsampling(lifted, op_types)
    for upsample in (n for n in lifted.nodes if isinstance(n, Upsample) and n.source in resizes.tiles):
        upsample.source = resizes.tiles[upsample.source]  # a resize written as repeats is named by its own output
        if upsample.source in resizes.bilinear:
            rows, cols = resizes.bilinear[upsample.source]
            lifted.nodes[lifted.nodes.index(upsample)] = BilinearResize(
                upsample.name.replace("upsample", "bilinear", 1), upsample.source, upsample.input, upsample.output,
                rows, cols)
    graph_ir = channels_first(lifted, _one_channel_maps(lifted, shapes), _split_channel_maps(lifted), op_types)
    return legacy.finish(with_host_boundary(_reference_rounding(graph_ir, op_types), model, boundary))


def _repeats_as_upsampling(graph: Graph, op_types: dict[str, str]) -> Graph:
    """Keras 3's UpSampling2D (`ops.repeat` per axis: EXPAND_DIMS, TILE along the new axis, RESHAPE into the
    axis before it) as `Upsample` nodes: IREE writes each repeat as a copy of the int8 map along a new axis
    (a generic whose input leaves that dim out) and a collapse of that axis into the one before, which is
    every value repeated along that axis, nearest upsampling. A repeat along rows then columns is one node."""
    for kernel in [k for k in graph.kernels() if op_types.get(k.source) == "TILE"]:
        _collapse_first(graph, kernel)
        axis = _repeated_axis(graph, kernel)
        if axis is None:
            raise MingError(f"node '{kernel.source}' (TILE): ming takes TILE only as a repeat of every value "
                            "along an axis (Keras' UpSampling2D: EXPAND_DIMS, TILE along the new axis, RESHAPE "
                            "into the axis before it)")
        collapse = next(n for n in graph.nodes if isinstance(n, Reshape) and n.input == kernel.output.tensor)
        source = kernel.inputs[0].tensor
        factors = [1] * len(graph.tensors[source].shape)
        factors[axis] = kernel.dims[axis + 1]
        name = kernel.name.replace("elementwise", "upsample", 1)
        name = kernel.name if name in {n.name for n in graph.nodes} else name
        upsample = Upsample(name, kernel.source, source, collapse.output, tuple(factors))
        graph.nodes[graph.nodes.index(kernel)] = upsample
        graph.nodes.remove(collapse)
        del graph.tensors[kernel.output.tensor]
        _merge_upsampling(graph, upsample)
    return graph


def _collapse_first(graph: Graph, kernel: Kernel) -> None:
    """IREE writes a repeat that the model outputs as a reshape to 5-d (batch kept) and one to the output's
    4-d shape: its first reshape then collapses the repeat's axis instead, the second adds the batch."""
    first = [n for n in graph.nodes if kernel.output.tensor in node_inputs(n)]
    if len(first) != 1 or not isinstance(first[0], Reshape):
        return
    middle = first[0].output
    second = [n for n in graph.nodes if middle in node_inputs(n)]
    if len(second) != 1 or not isinstance(second[0], Reshape) or any(o.tensor == middle for o in graph.outputs):
        return
    shape = graph.tensors[second[0].output].shape
    if len(shape) == len(kernel.dims) and shape[0] == 1 and math.prod(shape) == math.prod(kernel.dims):
        graph.tensors[middle] = replace(graph.tensors[middle], shape=tuple(shape[1:]))


def _repeated_axis(graph: Graph, kernel: Kernel) -> int | None:
    """The axis of its input along which `kernel` repeats every value (a copy along a new loop dim, collapsed
    into the dim before it by its only reader), or None."""
    if kernel.epilogue is not None or kernel.payload != Arg(0) or len(kernel.inputs) != 1 \
            or not kernel.output.map.is_identity() or any(o.tensor == kernel.output.tensor for o in graph.outputs):
        return None
    read = [e.single_dim() for e in kernel.inputs[0].map.results]
    new = [d for d in range(len(kernel.dims)) if d not in read]
    readers = [n for n in graph.nodes if kernel.output.tensor in node_inputs(n)]
    if len(new) != 1 or new[0] == 0 or read != [d for d in range(len(kernel.dims)) if d != new[0]] \
            or len(readers) != 1 or not isinstance(readers[0], Reshape):
        return None
    dims, d = list(kernel.dims), new[0]
    merged = tuple(dims[:d - 1] + [dims[d - 1] * dims[d]] + dims[d + 1:])
    return d - 1 if graph.tensors[readers[0].output].shape == merged else None


def _merge_upsampling(graph: Graph, upsample: Upsample) -> None:
    """`upsample` and an upsampling of its input whose only reader it is, as one node."""
    earlier = next((n for n in graph.nodes if isinstance(n, Upsample) and n.output == upsample.input), None)
    if earlier is None or any(o.tensor == earlier.output for o in graph.outputs) or \
            [n for n in graph.nodes if earlier.output in node_inputs(n)] != [upsample]:
        return
    del graph.tensors[earlier.output]
    earlier.output = upsample.output
    earlier.factors = tuple(a * b for a, b in zip(earlier.factors, upsample.factors))
    graph.nodes.remove(upsample)


def _one_channel_maps(graph: Graph, shapes: dict[str, tuple[int, ...]]) -> frozenset[str]:
    """The 2-d tensors that are H x W maps of one channel (IREE dropped C = 1), told apart from the L x C
    maps IREE makes of maps one high or one wide by the NHWC shape each comes from: a kernel's TFLite
    source tensor, the input of a reshape that drops unit axes; pads and upsamplings keep it."""
    def dropped_channel(nhwc: tuple[int, ...], shape: tuple[int, ...]) -> bool:
        return len(shape) == 2 and len(nhwc) >= 3 and nhwc[-1] == 1 and tuple(d for d in nhwc if d != 1) == shape

    one_channel = {i.tensor for i in graph.inputs if dropped_channel(i.onnx_shape, graph.tensors[i.tensor].shape)}
    for node in graph.nodes:
        if isinstance(node, Kernel) and dropped_channel(shapes.get(node.source, ()),
                                                        graph.tensors[node.output.tensor].shape):
            one_channel.add(node.output.tensor)
        elif isinstance(node, Reshape) and (node.input in one_channel or dropped_channel(
                graph.tensors[node.input].shape, graph.tensors[node.output].shape)):
            one_channel.add(node.output)
        elif isinstance(node, (Pad, Upsample)) and node.input in one_channel:
            one_channel.add(node.output)
    return frozenset(one_channel)


def _split_channel_maps(graph: Graph) -> frozenset[str]:
    """The tensors of the kernels whose channels span their last two output axes (... x C x M: a depthwise
    convolution with depth multiplier M, whose requantization runs over both, `lift_tosa._requantize_groups`)."""
    split = set()
    for kernel in graph.kernels():
        channel_dims = tuple(getattr(kernel.epilogue, "channel_dims", ()))
        results = kernel.output.map.results
        if len(channel_dims) == 2 and len(results) >= 2 \
                and tuple(e.single_dim() for e in results[-2:]) == channel_dims:
            split.add(kernel.output.tensor)
    return frozenset(split)


def _reference_rounding(graph: Graph, op_types: dict[str, str]) -> Graph:
    """TOSA rounds every requantization the same way (TFLite's MultiplyByQuantizedMultiplier); LiteRT's
    reference FULLY_CONNECTED rounds f32(acc) * f32(multiplier) half away from zero instead (measured
    equal on every output in tests/test_tflite.py). ming follows the reference kernels."""
    for kernel in graph.kernels():
        if op_types.get(kernel.source) == "FULLY_CONNECTED" and isinstance(kernel.epilogue, FixedPointRequant):
            kernel.epilogue.float32 = True
    return graph

