"""The float post-processing after a model's last DequantizeLinear (a detector's box decoding) on the host.

A detector's graph often ends in float: scores through a Sigmoid, boxes decoded with anchors
(`loc * variance * anchor_wh + anchor_xy`, `Exp(loc * variance) * anchor_wh`), then NonMaxSuppression,
TopK, GatherND. The float region of an output is what lies between it and the DequantizeLinears before it.
Where that region holds an op the accelerator has no integer form for (`TAIL_OPS`, `POSTPROCESSING_OPS`):

* a chain from one per-tensor DequantizeLinear to the output through element-wise ops (each with at most
  one constant operand) and reshapes runs on the host (`ming_host.HostOp`): the model compiled for the
  accelerator ends at that DequantizeLinear, and the output gets the chain as its host tail;
* anything else (two computed tensors combined, Slice, Concat, NonMaxSuppression, ...) stops the build
  with the node's name and the `onnx.utils.extract_model` call that cuts the model where its integer part
  ends.

Bit-exactness with onnxruntime: the chain's first element-wise ops whose constants are scalars compute, per
element, a function of one int8 value, so ming runs them in an onnxruntime session on all 256 values (the
DequantizeLinear included) and keeps the table: onnxruntime's own Sigmoid and Exp, whatever their
approximation. After a per-element constant (anchors) the values are no longer one of 256: there ming runs
only Add, Sub, Mul and Div (IEEE float32 in numpy as in onnxruntime) and reshapes, and refuses any other op
by name.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ming_py.ort_session import onnxruntime_session
from ming_py.errors import MingError
from ming_py.ir import Graph, GraphOutput, HostOp
from ming_py.contract.ming_host import INT8_MIN, ort_dequantize_linear

from .onnx_converters import static_shapes
from .onnx_formats import producers_and_consumers

# element-wise ops of one computed input: tabulated while their input is one of 256 values
UNARY_OPS = frozenset({"Sigmoid", "Exp", "Tanh", "Softplus", "Softsign", "Log", "Sqrt", "Erf", "Relu", "LeakyRelu",
                       "HardSigmoid", "HardSwish", "Elu", "Selu", "Neg", "Abs", "Reciprocal", "Clip"})
BINARY_OPS = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}
CONSTANT_FIRST = {"add": "add", "mul": "mul", "sub": "rsub", "div": "rdiv"}
LAYOUT_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity"})
QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})  # in a region: a pair that gives its values back
TAIL_OPS = UNARY_OPS | frozenset(BINARY_OPS)
# detectors' post-processing: never on the accelerator, never in a host tail
POSTPROCESSING_OPS = frozenset({"NonMaxSuppression", "TopK", "GatherND", "GatherElements", "ScatterND", "ArgMax",
                                "ArgMin", "ReduceMax", "ReduceMin", "Where", "Greater", "Less", "NonZero", "Cast",
                                "Gather", "Expand", "Tile", "CumSum", "Range", "RoiAlign"})
TABLE_SIZE = 256


@dataclass(frozen=True)
class HostTail:
    """The float chain of model output `name` (`shape`) that runs on the host after the accelerator."""

    name: str
    shape: tuple[int, ...]
    ops: tuple[HostOp, ...]


@dataclass(frozen=True)
class _Region:
    """The float nodes between an output and the DequantizeLinears of computed tensors before it."""

    output: str
    nodes: tuple[onnx.NodeProto, ...]
    dequantizers: tuple[onnx.NodeProto, ...]


class _Model:
    """The graph's producers, consumers, constants (folded values and constant DequantizeLinears) and shapes."""

    def __init__(self, model: onnx.ModelProto):
        self.model = model
        graph = model.graph
        self.producers, self.consumers = producers_and_consumers(graph)
        self.initializers = {i.name: i for i in graph.initializer}
        self.constant = set(self.initializers)  # and what shape arithmetic computes: constant at batch 1
        self.constant.update(node.output[0] for node in graph.node if node.op_type == "Shape")
        for node in graph.node:
            if node.input and all(name in self.constant for name in node.input if name):
                self.constant.update(node.output)
        self.outputs = [o.name for o in graph.output]
        self.shapes = static_shapes(model)

    def value(self, name: str, reader: onnx.NodeProto) -> np.ndarray:
        """A constant operand's value: an initializer, or a DequantizeLinear of initializers (as onnxruntime)."""
        if name in self.initializers:
            return numpy_helper.to_array(self.initializers[name])
        node = self.producers.get(name)
        if node is not None and node.op_type == "DequantizeLinear" and \
                all(n in self.initializers for n in node.input if n) and _scalar(self, node):
            values, scale = (numpy_helper.to_array(self.initializers[n]) for n in node.input[:2])
            zero_point = numpy_helper.to_array(self.initializers[node.input[2]]) if _input(node, 2) else 0
            return ort_dequantize_linear(values, scale, int(np.asarray(zero_point).reshape(())))
        raise MingError(f"node '{reader.name}' ({reader.op_type}) reads the constant '{name}', which ming cannot "
                        "evaluate (a constant subgraph it does not fold); make it an initializer")

    def readers(self, tensor: str) -> list[onnx.NodeProto]:
        """The nodes that read `tensor`'s values (not a Shape: its result is constant at batch 1)."""
        return [node for node in self.consumers.get(tensor, []) if node.op_type != "Shape"]

    def computed_inputs(self, node: onnx.NodeProto) -> list[str]:
        return [name for name in node.input if name and name not in self.constant]


def _input(node: onnx.NodeProto, index: int) -> str:
    return node.input[index] if len(node.input) > index else ""


def _scalar(model: _Model, dequantize: onnx.NodeProto) -> bool:
    scale = model.initializers.get(dequantize.input[1])
    return scale is not None and int(np.prod(scale.dims)) == 1


def _region(model: _Model, output: str, requantized: bool = False) -> _Region | None:
    """The float region of `output`; None where the output is not float (a QuantizeLinear in the way).
    `requantized`: through every QDQ around a layout op or Concat, whatever their scales."""
    nodes, dequantizers, stack, seen = [], [], [output], set()
    while stack:
        tensor = stack.pop()
        node = model.producers.get(tensor)
        if node is None or tensor in model.constant or id(node) in seen:
            continue
        seen.add(id(node))
        if node.op_type == "DequantizeLinear":
            quantize = _passed_through(model, node, requantized)
            if quantize is None:
                dequantizers.append(node)
                continue
            nodes += [node, quantize]  # values as they were: a layout op on int8 values between them
            seen.add(id(quantize))
            stack.append(quantize.input[0])
            continue
        if node.op_type == "QuantizeLinear":
            return None
        nodes.append(node)
        stack.extend(node.input)
    order = {id(n): i for i, n in enumerate(model.model.graph.node)}
    return _Region(output, tuple(sorted(nodes, key=lambda n: order[id(n)])),
                   tuple(sorted(dequantizers, key=lambda n: order[id(n)])))


def _passed_through(model: _Model, dequantize: onnx.NodeProto, requantized: bool = False) -> onnx.NodeProto | None:
    """The QuantizeLinear before `dequantize` where the two give back exactly the values of a layout op
    (Transpose, Reshape, Concat, ...) of tensors dequantized with the same scale and zero point (a quantizer
    wraps such ops so; onnxruntime moves int8 values): None otherwise."""
    quantize = model.producers.get(dequantize.input[0])
    if quantize is None or quantize.op_type != "QuantizeLinear" or len(model.readers(quantize.output[0])) != 1:
        return None
    layout = model.producers.get(quantize.input[0])
    if layout is None or layout.op_type not in LAYOUT_OPS | {"Concat"}:
        return None
    params = _parameters(model, quantize)
    sources = [model.producers.get(name) for name in model.computed_inputs(layout)]
    if requantized:
        return quantize if sources and all(s is not None and s.op_type == "DequantizeLinear" for s in sources) \
            else None
    if params is None or _parameters(model, dequantize) != params or not sources or \
            any(s is None or s.op_type != "DequantizeLinear" or _parameters(model, s) != params for s in sources):
        return None
    return quantize


def _parameters(model: _Model, node: onnx.NodeProto) -> tuple | None:
    """A (de)quantization's constant scale and zero point as comparable values (None: not constant)."""
    names = [node.input[1], _input(node, 2)]
    if any(name and name not in model.initializers for name in names):
        return None
    scale, zero_point = (numpy_helper.to_array(model.initializers[n]) if n else np.zeros((), np.int8)
                         for n in names)
    if scale.size != 1 or zero_point.size != 1:
        return None
    return float(scale.reshape(())), int(zero_point.reshape(()))


def _needs_host(region: _Region | None) -> bool:
    """Whether `region` is float post-processing of quantized values (a float model's ops are not: the
    frontend names them unsupported or the model unquantized)."""
    return region is not None and bool(region.dequantizers) and \
        any(n.op_type in TAIL_OPS | POSTPROCESSING_OPS for n in region.nodes)


def _chain_problem(model: _Model, region: _Region) -> tuple[onnx.NodeProto, str] | None:
    """The first node (and why) that keeps the region from being a host chain; None for a chain."""
    for node in region.nodes:
        computed = model.computed_inputs(node)
        if node.op_type not in TAIL_OPS | LAYOUT_OPS | QDQ_OPS:
            return node, "is not element-wise"
        if len(computed) != 1:
            return node, f"combines {len(computed)} computed tensors ({', '.join(repr(c) for c in computed)})"
    if len(region.dequantizers) != 1:
        return region.nodes[0], f"reads {len(region.dequantizers)} dequantized tensors"
    dequantize = region.dequantizers[0]
    if not _scalar(model, dequantize):
        return region.nodes[0], f"reads '{dequantize.output[0]}', dequantized per channel"
    tensor = dequantize.output[0]
    for node in region.nodes:
        readers = model.readers(tensor)
        if not any(node is r for r in readers):
            return node, "is not on a single chain from the DequantizeLinear to the output"
        if tensor != dequantize.output[0] and (len(readers) != 1 or tensor in model.outputs):
            return node, f"reads '{tensor}', which other nodes or outputs read too"
        tensor = node.output[0]
    return None


def _cut_advice(model: _Model, path: Path, regions: dict[str, _Region | None], refused: set[str]) -> str:
    """The onnx.utils.extract_model call that keeps the model up to where its integer part ends."""
    graph = model.model.graph
    initializers = set(model.initializers)
    inputs = [v.name for v in graph.input if v.name not in initializers]
    outputs = []
    for output in model.outputs:
        names = [d.output[0] for d in regions[output].dequantizers] if output in refused else [output]
        outputs += [name for name in names if name not in outputs]
    return (f"onnx.utils.extract_model('{path}', '{path.stem}_integer.onnx', {inputs!r}, {outputs!r}), then run "
            "the rest on the host")


def check_float_postprocessing(model: onnx.ModelProto, path: Path) -> None:
    """Refuse a float region after the last DequantizeLinears that is not an element-wise/reshape chain from
    one of them, by node name, with where to cut the model (shape arithmetic counts as constant)."""
    _hosted_regions(_Model(model), path)


def _hosted_regions(model: _Model, path: Path) -> list[_Region]:
    regions = {output: _region(model, output) for output in model.outputs}
    hosted = [output for output in model.outputs if _needs_host(regions[output])]
    problems = {output: _chain_problem(model, regions[output]) for output in hosted}
    for output in hosted:  # a head flattened in int8 (NCHW -> NHWC) only for the post-processing
        heads = _region(model, output, requantized=True)
        if problems[output] is None and _flattens_a_head(heads) and len(heads.nodes) > len(regions[output].nodes):
            regions[output] = heads
            problems[output] = _chain_problem(model, heads) or \
                (_flattens_a_head(heads), "moves a head's values between pixels (NCHW -> NHWC) between "
                                          "quantizations of different scales")
    refused = {output for output, problem in problems.items() if problem is not None}
    if refused:
        output = next(o for o in model.outputs if o in refused)
        node, why = problems[output]
        raise MingError(f"node '{node.name}' ({node.op_type}) in the post-processing of output '{output}' "
                        f"{why}; ming runs only an element-wise/reshape float tail on the host. Cut the model "
                        f"where its integer part ends: {_cut_advice(model, path, regions, refused)}")
    return [regions[output] for output in hosted]


def _flattens_a_head(region: _Region) -> onnx.NodeProto | None:
    """The region's Transpose of a 4-D map from NCHW to NHWC (a detector's head before its Reshape to
    (batch, anchors, k)), which the accelerator does not stream; None if it has none."""
    return next((n for n in region.nodes if n.op_type == "Transpose" and
                 [list(a.ints) for a in n.attribute if a.name == "perm"] == [[0, 2, 3, 1]]), None)


def split_host_tails(model: onnx.ModelProto, path: Path) -> dict[str, HostTail]:
    """Move, in place, the float chains after the last DequantizeLinear of the outputs to the host: the
    output becomes that DequantizeLinear's value (a new tensor per output); returns the chains by the new
    output names. Refuses a float region that is not such a chain as `check_float_postprocessing` does."""
    graph_model = _Model(model)
    tails = {}
    for region in _hosted_regions(graph_model, path):
        for tensor in (region.output, region.dequantizers[0].output[0]):
            if tensor not in graph_model.shapes:
                raise MingError(f"tensor '{tensor}' has a dynamic shape; export the model with static shapes "
                                "(batch 1)")
        ops = _host_ops(graph_model, region, path)
        tails[_detach(graph_model, region)] = HostTail(region.output, graph_model.shapes[region.output], ops)
    return tails


def _host_ops(model: _Model, region: _Region, path: Path) -> tuple[HostOp, ...]:
    """The host steps of a chain: onnxruntime's table of its first element-wise steps with scalar constants,
    then reshapes, transposes and element-wise steps with constants."""
    dequantize = region.dequantizers[0]
    tabulated, layout, rest = _split_prefix(model, region.nodes)
    ops = [HostOp("table", values=tuple(float(v) for v in _table(model, dequantize, tabulated)))] if tabulated \
        else []
    ops.append(HostOp("reshape", shape=model.shapes[dequantize.output[0]]))
    ops += [_layout_op(model, node) for node in layout]
    for node in rest:
        ops += [_layout_op(model, node)] if node.op_type in LAYOUT_OPS | QDQ_OPS else [_binary_op(model, node, path)]
    ops.append(HostOp("reshape", shape=model.shapes[region.output]))
    return tuple(op for op in ops if op is not None)


def _split_prefix(model: _Model, nodes) -> tuple[list, list, list]:
    """(element-wise nodes tabulated, layout nodes among them, the nodes after them)."""
    tabulated, layout = [], []
    for position, node in enumerate(nodes):
        if node.op_type in LAYOUT_OPS | QDQ_OPS:
            layout.append(node)
        elif node.op_type in UNARY_OPS or (node.op_type in BINARY_OPS and _constant_size(model, node) == 1):
            tabulated.append(node)
        else:
            return tabulated, layout, list(nodes[position:])
    return tabulated, layout, []


def _constant_size(model: _Model, node: onnx.NodeProto) -> int:
    constants = [name for name in node.input if name and name in model.constant]
    return max((model.value(name, node).size for name in constants), default=1)


def _layout_op(model: _Model, node: onnx.NodeProto) -> HostOp | None:
    if node.op_type == "Identity" or node.op_type in QDQ_OPS:
        return None
    if node.op_type == "Transpose":
        rank = len(model.shapes[node.input[0]])
        perm = next((tuple(a.ints) for a in node.attribute if a.name == "perm"), tuple(range(rank))[::-1])
        return HostOp("transpose", axes=tuple(int(p) for p in perm))
    if node.output[0] not in model.shapes:
        raise MingError(f"node '{node.name}' ({node.op_type}) has no static output shape; export the model with "
                        "static shapes (batch 1)")
    return HostOp("reshape", shape=model.shapes[node.output[0]])


def _binary_op(model: _Model, node: onnx.NodeProto, path: Path) -> HostOp:
    """An Add, Sub, Mul or Div of the chain's values and a constant (anchors), as IEEE float32 on the host."""
    if node.op_type not in BINARY_OPS:
        raise MingError(f"node '{node.name}' ({node.op_type}) follows a per-element constant in the float "
                        "post-processing, so its inputs are not each one of 256 values ming can tabulate with "
                        f"onnxruntime's own kernel, and ming does not reproduce onnxruntime's {node.op_type} "
                        f"otherwise; cut the model before it (onnx.utils.extract_model on '{path}')")
    (computed,) = model.computed_inputs(node)
    constant_name = next(name for name in node.input if name and name != computed)
    constant = model.value(constant_name, node)
    if constant.dtype != np.float32:
        raise MingError(f"node '{node.name}' ({node.op_type}) computes in {constant.dtype}; ming's host tail "
                        "computes in float32")
    shape = model.shapes[computed]
    if tuple(np.broadcast_shapes(shape, constant.shape)) != tuple(shape):
        raise MingError(f"node '{node.name}' ({node.op_type}) broadcasts '{computed}' {list(shape)} to a larger "
                        f"shape with '{constant_name}' {list(constant.shape)}; ming's host tail keeps the "
                        "accelerator output's size (give the constant the tensor's shape)")
    while constant.ndim > len(shape):
        constant = constant.reshape(constant.shape[1:])
    kind = BINARY_OPS[node.op_type]
    if node.input[0] == constant_name:
        kind = CONSTANT_FIRST[kind]
    return HostOp(kind, shape=tuple(constant.shape), values=tuple(float(v) for v in constant.reshape(-1)))


def _table(model: _Model, dequantize: onnx.NodeProto, nodes) -> np.ndarray:
    """onnxruntime's results of `dequantize` then `nodes` (element-wise, scalar constants) for every int8
    value -128..127, in an onnxruntime session with default options (the kernels the model runs with)."""
    initializers = {name: model.value(name, dequantize) for name in dequantize.input[1:] if name}
    copied = [helper.make_node("DequantizeLinear", ["q", *dequantize.input[1:]], ["dequantized"],
                               name=dequantize.name)]
    previous = "dequantized"
    for number, node in enumerate(nodes):
        (computed,) = model.computed_inputs(node)
        duplicate = onnx.NodeProto()
        duplicate.CopyFrom(node)
        for i, name in enumerate(node.input):
            if name == computed:
                duplicate.input[i] = previous
            elif name:
                initializers[name] = model.value(name, node)
        duplicate.output[0] = previous = f"step_{number}"
        copied.append(duplicate)
    graph = helper.make_graph(
        copied, "table", [helper.make_tensor_value_info("q", TensorProto.INT8, [TABLE_SIZE])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), name) for name, v in initializers.items()])
    table_model = helper.make_model(graph, opset_imports=list(model.model.opset_import))
    table_model.ir_version = model.model.ir_version
    session = onnxruntime_session(table_model.SerializeToString())
    (values,) = session.run(None, {"q": np.arange(INT8_MIN, INT8_MIN + TABLE_SIZE, dtype=np.int8)})
    values = np.asarray(values, np.float32).reshape(-1)
    if values.size != TABLE_SIZE:
        raise MingError(f"node '{nodes[-1].name}' ({nodes[-1].op_type}) changes its input's size; ming tabulates "
                        "element-wise ops only")
    return values


def _detach(model: _Model, region: _Region) -> str:
    """Make the model end at a copy of the chain's DequantizeLinear in place of the chain; its output's name."""
    graph = model.model.graph
    dequantize = region.dequantizers[0]
    name = _fresh(model, f"{region.output}_dequantized")
    copy = helper.make_node("DequantizeLinear", list(dequantize.input), [name], name=_fresh(model, name),
                            **{a.name: helper.get_attribute_value(a) for a in dequantize.attribute})
    graph.node.insert(list(graph.node).index(dequantize) + 1, copy)
    for node in region.nodes:
        graph.node.remove(node)
    position = model.outputs.index(region.output)
    value = helper.make_tensor_value_info(name, TensorProto.FLOAT, list(model.shapes[dequantize.output[0]]))
    graph.output.remove(graph.output[position])
    graph.output.insert(position, value)
    model.outputs[position] = name
    if not any(dequantize.output[0] in n.input for n in graph.node) and dequantize.output[0] not in model.outputs:
        graph.node.remove(dequantize)
    return name


def _fresh(model: _Model, stem: str) -> str:
    taken = set(model.producers) | set(model.initializers) | {n.name for n in model.model.graph.node}
    name, number = stem, 0
    while name in taken:
        number += 1
        name = f"{stem}_{number}"
    model.producers[name] = None  # taken from now on
    return name


def with_host_tails(graph: Graph, tails: dict[str, HostTail]) -> Graph:
    """The graph's outputs that end at a detached chain's DequantizeLinear given back their model's name, shape
    and the chain as host steps."""
    graph.outputs = [_with_tail(out, tails[out.name]) if out.name in tails else out for out in graph.outputs]
    return graph


def _with_tail(out: GraphOutput, tail: HostTail) -> GraphOutput:
    if out.dtype != "float32" or out.permutation or any(op.kind != "reshape" for op in out.host_ops):
        raise MingError(f"output '{tail.name}': ming cannot run its float post-processing after the host steps "
                        f"{[op.kind for op in out.host_ops]} of '{out.name}'")
    first = tail.ops[:1] if tail.ops[0].kind == "table" else ()
    return replace(out, name=tail.name, onnx_shape=tail.shape, host_ops=first + out.host_ops + tail.ops[len(first):])
