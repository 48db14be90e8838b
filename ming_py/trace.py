"""The first stream where a build's C-simulation leaves the golden model (`ming csim --trace`, the build's check).

The testbench compiled with -DMING_TRACE_STREAMS (ming_hls_stream.h) records every token written to every
stream in write order. Each channel of the StreamGraph carries one tensor of the golden model (a range of its
channels for an output of a split) as a (C, H, W) map in raster order (row, column, channel), the channels of a
pixel packed into the lanes of its tokens. `locate` compares the channels in dataflow order, from the input
on; the first that differs names the process that wrote it: with every input of that process equal to the
golden model, the difference is its own (an edited weight in hls/<model>_weights.h, a wrong kind).
"""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .csim import csim_command, open_csim, to_stream_order
from .dataflow import Channel, StreamGraph
from .errors import MingError
from .ir import Graph, Kernel
from .contract.ming_json import read_json
from .progress import Progress
from .reference import run_integer
from .contract.ming_errors import DeployError
from .contract.ming_ports import Port, input_images
from .contract.ming_host import accelerator_input

TRACE_VARIABLE = "MING_TRACE_FILE"  # where the traced binary writes its record (ming_hls_stream.h)
TRACE_MAGIC = b"MINGTRC1"
_BLOCK_SIZES = struct.Struct("=IQ")  # bytes per token, tokens (host byte order, as the binary wrote them)
_NAME_SIZE = struct.Struct("=I")


@dataclass(frozen=True)
class Divergence:
    """The first channel, in dataflow order, whose tokens differ from the golden model's tensor.

    `token` is the first token that differs (or is missing, or is one too many), `position` its first differing
    value's (row, column, channel of the tensor); `got` is None for a missing value, `expected` None for an
    extra one. `differing` counts the channel's values that differ or are missing, of `values`."""

    channel: str
    process: str  # the channel's producer, as report.json names it ("input": the accelerator's input adapter)
    token: int
    position: tuple[int, int, int] | None
    expected: int | None
    got: int | None
    differing: int
    values: int
    tokens_written: int
    tokens_expected: int | None  # None when nothing was written (the lane count is unknown)

    def __str__(self) -> str:
        where = f"token {self.token}" + (f" (row {self.position[0]}, column {self.position[1]}, channel "
                                         f"{self.position[2]})" if self.position else "")
        if self.tokens_written == 0:
            return f"{self.process} writes nothing to {self.channel} ({self.values} values expected)"
        if self.got is not None and self.expected is not None:
            short = "" if self.tokens_written == self.tokens_expected else \
                f"; {self.tokens_written} of {self.tokens_expected} tokens written"
            return (f"{self.process} writes {self.channel} differently: {where}: expected {self.expected}, got "
                    f"{self.got} ({self.differing} of {self.values} values differ{short})")
        if self.got is None:
            return (f"{self.process} writes only {self.tokens_written} of {self.tokens_expected} tokens to "
                    f"{self.channel}: the first missing is {where}, expected {self.expected}")
        return (f"{self.process} writes {self.tokens_written} tokens to {self.channel}, {self.tokens_expected} "
                f"expected; the first {self.tokens_expected} are right")


@dataclass(frozen=True)
class Carried:
    """What a channel carries: channels [first, first + C) of the golden model's `tensor`."""

    tensor: str
    first: int = 0


def locate(hls_dir: Path, model_name: str, graph: Graph, stream_graph: StreamGraph, q_input: np.ndarray,
           progress: Progress | None = None) -> Divergence | None:
    """Run the traced C-simulation of `hls_dir` (hls/<model_name>.cpp) on the int8 graph input `q_input` (as
    `reference.run_integer` takes it) and compare every channel with the golden model; None when every stream
    equals it. A run that fails although every stream it wrote is right raises MingError with its message."""
    progress = progress or Progress(quiet=True)
    graph_input = graph.inputs[0].tensor
    q = np.asarray(q_input, dtype=np.int64).reshape(graph.shape_of(graph_input))
    values = run_integer(graph, {graph_input: q})
    tokens, failure = run_traced(hls_dir, model_name, stream_graph, q, progress)
    carried = carried_tensors(graph, stream_graph)
    for channel in dataflow_order(stream_graph):
        expected = channel_values(values[carried[channel.name].tensor], carried[channel.name].first, channel)
        divergence = compare_channel(channel, carried[channel.name].first, expected, tokens.get(channel.name))
        if divergence is not None:
            return divergence
    if failure is not None:
        raise MingError(f"the traced C-simulation failed ({failure}), though every stream it wrote equals the "
                        "golden model")
    return None


def run_traced(hls_dir: Path, model_name: str, stream_graph: StreamGraph, q: np.ndarray,
               progress: Progress) -> tuple[dict[str, np.ndarray], str | None]:
    """The tokens every stream was written, by stream name ((tokens, lanes) int8), and the last line of the run's
    error when it failed (a stream read while empty ends it; the tokens written until then are kept)."""
    binary, fd = open_csim(hls_dir, model_name, progress, trace=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            in_file, out_file, trace_file = (Path(tmp) / name for name in ("input.bin", "output.bin", "trace.bin"))
            c = stream_graph.channels[stream_graph.input.channel]
            to_stream_order(q, [c.channels, c.height, c.width]).astype(np.int8).tofile(in_file)
            command, how = csim_command(binary, fd, hls_dir)
            environment = how.pop("env", os.environ) | {TRACE_VARIABLE: str(trace_file)}
            with progress.step("running the traced C-simulation"):
                result = subprocess.run([*command, str(in_file), str(out_file)], capture_output=True, text=True,
                                        env=environment, **how)
            if not trace_file.is_file():
                raise MingError(f"the traced C-simulation wrote no trace: {_last_line(result.stderr)}")
            tokens = read_trace(trace_file.read_bytes())
    finally:
        os.close(fd)
    return tokens, None if result.returncode == 0 else _last_line(result.stderr)


def _last_line(stderr: str) -> str:
    return (stderr.strip().splitlines() or ["(no message)"])[-1]


def read_trace(data: bytes) -> dict[str, np.ndarray]:
    """The tokens of every stream of a trace file (see ming_hls_stream.h), (tokens, bytes per token) int8 arrays
    by stream name; the blocks of one name joined in order (two streams of one name and different token widths:
the first one's). A block cut short (a crash while writing) ends the trace."""
    if not data.startswith(TRACE_MAGIC):
        raise MingError("the stream trace does not start with its format's mark; remove the cached C-simulation "
                        "binaries (ming's cache directory, csim/) and run again")
    blocks: dict[str, list[np.ndarray]] = {}
    offset = len(TRACE_MAGIC)
    while offset + _NAME_SIZE.size <= len(data):
        (name_bytes,) = _NAME_SIZE.unpack_from(data, offset)
        start = offset + _NAME_SIZE.size + name_bytes
        if start + _BLOCK_SIZES.size > len(data):
            break
        token_bytes, count = _BLOCK_SIZES.unpack_from(data, start)
        first = start + _BLOCK_SIZES.size
        if token_bytes == 0 or first + token_bytes * count > len(data):
            break
        name = data[offset + _NAME_SIZE.size:start].decode("utf-8", "surrogateescape")
        tokens = np.frombuffer(data, np.int8, token_bytes * count, first).reshape(count, token_bytes)
        blocks.setdefault(name, []).append(tokens)
        offset = first + token_bytes * count
    return {name: np.concatenate([part for part in parts if part.shape[1] == parts[0].shape[1]])
            for name, parts in blocks.items()}


def dataflow_order(stream_graph: StreamGraph) -> list[Channel]:
    """The channels, each after every channel its producer reads: the input's, then each process's outputs in
    the processes' (topological) order."""
    names = [stream_graph.input.channel] + [c for p in stream_graph.processes for c in p.outputs]
    return [stream_graph.channels[name] for name in names]


def carried_tensors(graph: Graph, stream_graph: StreamGraph) -> dict[str, Carried]:
    """What every channel carries: a process's output channel its node's output tensor, a split's outputs their
    routes of the tensor its input carries."""
    nodes = {node.name: node for node in graph.nodes}
    carried = {stream_graph.input.channel: Carried(graph.inputs[0].tensor)}
    for process in stream_graph.processes:
        if process.kind == "split":
            source = carried[process.inputs[0]]
            routes = process.params.routes if process.params else [(0, None)] * len(process.outputs)
            carried |= {out: Carried(source.tensor, source.first + first)
                        for out, (first, _) in zip(process.outputs, routes)}
            continue
        node = nodes.get(process.name)
        if node is None:
            raise MingError(f"process {process.name} has no node of that name in the model's graph; the build "
                            "and the model differ: build again")
        (output,) = process.outputs
        carried[output] = Carried(node.output.tensor if isinstance(node, Kernel) else node.output)
    return carried


def channel_values(tensor: np.ndarray, first: int, channel: Channel) -> np.ndarray:
    """The values `channel` carries of the golden model's `tensor`, in stream order: the tensor as a (C, H, W) map
    of the channel's pixels, channels [first, first + channel.channels) of it."""
    pixels = channel.height * channel.width
    as_map = tensor.reshape(tensor.size // pixels, channel.height, channel.width)
    return to_stream_order(as_map[first:first + channel.channels], [channel.channels, channel.height, channel.width])


def compare_channel(channel: Channel, first: int, expected: np.ndarray, tokens: np.ndarray | None
                    ) -> Divergence | None:
    """The divergence of `channel`'s traced tokens ((tokens, lanes), None: never written) from the values it should
    carry (`expected`, stream order), None when they are equal."""
    lanes = tokens.shape[1] if tokens is not None and tokens.size else None
    got = tokens.reshape(-1).astype(np.int64) if lanes else np.zeros(0, np.int64)
    shared = min(got.size, expected.size)
    wrong = np.flatnonzero(got[:shared] != expected[:shared])
    if wrong.size == 0 and got.size == expected.size:
        return None
    index = int(wrong[0]) if wrong.size else shared
    position = _position(index, first, channel) if index < expected.size else None
    return Divergence(
        channel=channel.name, process=channel.producer, token=index // lanes if lanes else 0, position=position,
        expected=int(expected[index]) if index < expected.size else None,
        got=int(got[index]) if index < got.size else None,
        differing=int(wrong.size) + max(expected.size - got.size, 0), values=int(expected.size),
        tokens_written=len(tokens) if tokens is not None else 0,
        tokens_expected=-(-expected.size // lanes) if lanes else None)


def _position(index: int, first: int, channel: Channel) -> tuple[int, int, int]:
    """(row, column, channel of the tensor) of value `index` of a channel in stream order."""
    pixel, offset = divmod(index, channel.channels)
    row, column = divmod(pixel, channel.width)
    return row, column, first + offset


# ---- `ming csim OUT --trace` --------------------------------------------------------------------------------


def recorded_model(build_dir: Path, host: dict, model: Path | None = None) -> Path:
    """The model `build_dir` was built from: `model` when given, else the file host.json's "model_file" names,
    refused (one line) when it is gone or its sha256 is not the one recorded at the build."""
    if model is not None:
        from .options import check_model

        check_model(model)
        return model
    record = host.get("model_file")
    if not isinstance(record, dict) or not isinstance(record.get("path"), str) or \
            not isinstance(record.get("sha256"), str):
        raise MingError(f"{build_dir}: host.json does not say which model the build was made from; pass --model "
                        "PATH, the model you built it from")
    path = Path(record["path"])
    if not path.is_file():
        raise MingError(f"the model {path} this build was made from is gone; pass --model PATH, the model you "
                        "built it from")
    if hashlib.sha256(path.read_bytes()).hexdigest() != record["sha256"]:
        raise MingError(f"the model {path} has changed since the build (its sha256 differs from host.json's); pass "
                        "--model PATH, the model you built it from")
    return path


def trace_build(build_dir: Path, host: dict, graph: Graph, x: np.ndarray, progress: Progress) -> Divergence | None:
    """`locate` on the first image of `x` (as `ming csim` takes it) for the build in `build_dir` of the golden model
    `graph` (`check_same_channels`)."""
    from ming_py.line_buffers import build_stream_graph

    port = Port.of(host["input"])
    try:
        image = input_images(x, port)[0]
    except DeployError as exc:
        raise MingError(str(exc)) from None
    q = accelerator_input(image.reshape(port.onnx_shape), port)
    return locate(build_dir / "hls", host["model"], graph, build_stream_graph(graph), q, progress)


def check_same_channels(build_dir: Path, model: Path, graph: Graph) -> None:
    """Every channel of the build (report.json) is one of the streaming graph of `graph`'s, of the same shape."""
    from ming_py.line_buffers import build_stream_graph

    stream_graph = build_stream_graph(graph)
    try:
        built = read_json(build_dir / "report.json")["channels"]
        shapes = {c["name"]: list(c["shape"]) for c in built}
    except (OSError, ValueError, KeyError, TypeError):
        return  # the C-simulation's own checks stand
    for name, shape in shapes.items():
        channel = stream_graph.channels.get(name)
        if channel is None or [channel.channels, channel.height, channel.width] != shape:
            raise MingError(f"{model} is not the model {build_dir} was built from (its channel {name} differs); pass "
                            "--model PATH, the model you built it from")
