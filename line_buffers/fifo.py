"""FIFO depths that keep reconverging dataflow graphs from deadlocking (MING §IV-C).

Where a `split` feeds branches that meet again (a residual Add, a Concat), the
branch with the line buffers delivers its first pixel to the join only after the
split has produced many pixels; all that time the split keeps writing the short
branch, whose FIFO must hold those pixels or the split blocks, the long branch
starves and the join waits forever. The lag of a branch is counted in pixels of
the split's output from the geometry of its processes (StreamTensor §5.3's token
model with the line-buffer fill as initial delay); the short branch's first FIFO
gets the difference. The same model sizes the FIFOs of a model's outputs: the
accelerator sends an image's outputs one after the other on its one output
stream, so each output's FIFO holds what its producer makes while the outputs
before it are sent (`record_pixels`, in the order `record_order`). Every other
FIFO holds at least two pixels: a process writes a pixel's tokens in a burst
after computing it and its consumer reads them in a burst, so with less the two
serialise. `ming build` then deepens all
FIFOs (4, 8, 16 pixels) while the cycle-level simulation says it pays and the
budget allows (a strided consumer reads in bursts of rows: tiny_cnn at 5% of the
KV260's DSPs runs 18% faster with 8 pixels than with 2); `--fifo minimal`
shrinks every depth to the least with which, in one simulation, no write waits
(the simulated latency is kept exactly).
"""

from __future__ import annotations

import math

from ming_py.dataflow import Channel, Process, StreamGraph, WINDOW_KINDS
from ming_py.kernel import depth_bound

MIN_DEPTH = 2
DEFAULT_PIXELS = 2  # pixels every FIFO holds at least, so bursts overlap
SLACK_PIXELS = 1  # the pixel a join holds while waiting for its other input


def input_pixels_needed(graph: StreamGraph, p: Process, outputs: int, slot: int = 0) -> int:
    """Pixels of input `slot` `p` reads (raster order) before it has written `outputs` output pixels."""
    channel_in = graph.channels[p.inputs[slot]]
    if outputs <= 0:
        return 0
    if p.kind == "broadcast" and channel_in.pixels == 1 < graph.channels[p.outputs[0]].pixels:
        return 1  # the vector, read whole before the first pixel
    if p.kind in WINDOW_KINDS:
        # the window ending at padded position (row, col) is computed at the next position, which reads
        # its own pixel first (ming_py/kernel.py)
        w = p.window
        oh, ow = divmod(outputs - 1, w.out_width)
        row = oh * w.stride[0] + (w.kernel[0] - 1) * w.dilation[0]
        col = ow * w.stride[1] + (w.kernel[1] - 1) * w.dilation[1] + 1
        if col == w.padded_width:
            row, col = row + 1, 0
        return _pixels_up_to(w, row - w.pads[0], col - w.pads[1])
    if p.kind == "pointwise":
        w = p.window
        oh, ow = divmod(outputs - 1, w.out_width)
        return min(oh * w.stride[0] * w.in_width + ow * w.stride[1] + 2, w.in_height * w.in_width)
    if p.kind in ("dense", "global_avgpool", "global_maxpool"):
        return channel_in.pixels
    if p.kind == "pad":
        row, col = divmod(outputs - 1, p.window.padded_width)
        return _pixels_up_to(p.window, row - p.window.pads[0], col - p.window.pads[1])
    if p.kind == "upsample":  # a row's first copy reads its pixels as it goes, later copies need all of it
        channel_out = graph.channels[p.outputs[0]]
        rows, cols = channel_out.height // channel_in.height, channel_out.width // channel_in.width
        row, col = divmod(outputs - 1, channel_out.width)
        if row % rows == 0:
            return row // rows * channel_in.width + col // cols + 1
        return (row // rows + 1) * channel_in.width
    if p.kind == "permute":  # writes a pixel while it reads the next
        return min(outputs + 1, channel_in.pixels)
    return outputs  # element-wise: one pixel in, one pixel out


def _pixels_up_to(w, row: int, col: int) -> int:
    """Input pixels in raster order up to and including input coordinates (row, col), which may lie
    in the padding."""
    if row < 0:
        return 0
    if row >= w.in_height:
        return w.in_height * w.in_width
    return row * w.in_width + min(max(col + 1, 0), w.in_width)


def split_pixels_needed(graph: StreamGraph, channel: Channel, split: str, pixels: int) -> int | None:
    """Pixels `split` must emit before `channel` has carried `pixels` pixels; None if `split` does not feed it."""
    if channel.producer == split:
        return pixels
    producer = next((p for p in graph.processes if p.name == channel.producer), None)
    if producer is None:  # the accelerator input
        return None
    upstream = [split_pixels_needed(graph, graph.channels[c], split, input_pixels_needed(graph, producer, pixels, slot))
                for slot, c in enumerate(producer.inputs)]
    upstream = [n for n in upstream if n is not None]
    return max(upstream) if upstream else None


def pixels_made(graph: StreamGraph, channel: Channel, split: str, pixels: int) -> int:
    """The most pixels `channel` can have carried once `split` has emitted `pixels` (the inverse of
    `split_pixels_needed`)."""
    low, high = 0, channel.pixels
    while low < high:
        middle = (low + high + 1) // 2
        if split_pixels_needed(graph, channel, split, middle) <= pixels:
            low = middle
        else:
            high = middle - 1
    return low


def record_order(graph: StreamGraph) -> list[int]:
    """The order in which an image's outputs leave the accelerator (indexes into `graph.outputs`): by when
    each is complete, the input pixels its last pixel needs, then the deepest pipeline to it (both
    whatever the schedule), then the model's order. The output writer sends all of an output before the
    next, so every later output's FIFO holds what its producer makes meanwhile (`record_pixels`); the
    order in which they finish keeps that least."""
    source = graph.channels[graph.input.channel].producer
    depths = {p.name: depth_bound(p.kind) for p in graph.processes}

    def completion(index: int) -> tuple[int, int, int]:
        channel = graph.channels[graph.outputs[index].channel]
        return (split_pixels_needed(graph, channel, source, channel.pixels),
                split_latency(graph, channel, source, depths), index)

    return sorted(range(len(graph.outputs)), key=completion)


def record_pixels(graph: StreamGraph) -> dict[str, int]:
    """Per output channel, the pixels its FIFO must hold while the output writer sends the outputs before
    it in the record: all its producer makes from the input pixels those outputs need, plus the slack,
    at most the whole output. With less, the producer would stop, and with it the processes it shares with
    the output being sent (a split feeding both) before that output is complete (only outputs that need
    more than nothing)."""
    source = graph.channels[graph.input.channel].producer
    pixels: dict[str, int] = {}
    sent = 0  # input pixels the outputs sent so far need
    for port in graph.outputs:
        channel = graph.channels[port.channel]
        made = pixels_made(graph, channel, source, sent) if sent else 0
        if made:
            pixels[channel.name] = min(made + SLACK_PIXELS, channel.pixels)
        sent = max(sent, split_pixels_needed(graph, channel, source, channel.pixels))
    return pixels


def depths_in_pixels(graph: StreamGraph) -> dict[str, int]:
    """Per channel, the pixels its FIFO must hold for the line buffers' lag and for the outputs sent before
    its own (only channels that need more than the minimum)."""
    skips = _short_branch_excess(graph, lambda channel, split: split_pixels_needed(graph, channel, split, 1),
                                 SLACK_PIXELS)
    record = record_pixels(graph)
    return {name: max(skips.get(name, 0), record.get(name, 0)) for name in sorted(skips.keys() | record.keys())}


def latency_tokens(graph: StreamGraph, latency: dict[str, int]) -> dict[str, int]:
    """Per channel, the tokens its FIFO must hold besides the pixels of `depths_in_pixels` for the pipeline
    depths (`latency`, cycles per process) on the long branch: for so many cycles after taking a token a
    process has not written what it makes of it, while the split goes on writing the short branch, at most
    one token a cycle."""
    return _short_branch_excess(graph, lambda channel, split: split_latency(graph, channel, split, latency), 0)


def split_latency(graph: StreamGraph, channel: Channel, split: str, latency: dict[str, int]) -> int | None:
    """Pipeline cycles from `split` to `channel` along the deepest path; None if `split` does not feed it."""
    if channel.producer == split:
        return 0
    producer = next((p for p in graph.processes if p.name == channel.producer), None)
    if producer is None:
        return None
    upstream = [split_latency(graph, graph.channels[c], split, latency) for c in producer.inputs]
    upstream = [n for n in upstream if n is not None]
    return latency[producer.name] + max(upstream) if upstream else None


def _short_branch_excess(graph: StreamGraph, lag_of, slack: int) -> dict[str, int]:
    """Per head channel of a split's short branch, how far the longest branch to the same join lags behind
    it (`lag_of(channel, split)`), plus `slack`."""
    excess: dict[str, int] = {}
    for split in (p for p in graph.processes if p.kind == "split"):
        for join in (p for p in graph.processes if len(p.inputs) > 1):
            branches = {}
            for channel_name in join.inputs:
                lag = lag_of(graph.channels[channel_name], split.name)
                heads = _branch_heads(graph, split.name, channel_name)
                if lag is not None:
                    branches[channel_name] = (lag, heads)
            head_sets = [heads for _, heads in branches.values()]
            if len(branches) < 2 or any(a & b for a, b in zip(head_sets, head_sets[1:])):
                continue  # the branches do not diverge at this split (a nearer split separates them)
            longest = max(lag for lag, _ in branches.values())
            for lag, heads in branches.values():
                for head in heads:
                    if longest > lag:
                        excess[head] = max(excess.get(head, 0), longest - lag + slack)
    return excess


def _branch_heads(graph: StreamGraph, split: str, channel_name: str) -> frozenset[str]:
    """The split's output channels on the paths that end in `channel_name`."""
    channel = graph.channels[channel_name]
    if channel.producer == split:
        return frozenset({channel.name})
    producer = next((p for p in graph.processes if p.name == channel.producer), None)
    if producer is None:
        return frozenset()
    return frozenset().union(*(_branch_heads(graph, split, c) for c in producer.inputs))


def fifo_depths(graph: StreamGraph, lanes: dict[str, int], latency: dict[str, int],
                least_pixels: int = DEFAULT_PIXELS) -> dict[str, int]:
    """Depth in tokens of every channel under the given lane counts and pipeline depths."""
    pixels = depths_in_pixels(graph)
    extra = latency_tokens(graph, latency)
    depths = {}
    for name, channel in graph.channels.items():
        tokens_per_pixel = channel.channels // lanes.get(name, 1)
        depths[name] = max(MIN_DEPTH, max(pixels.get(name, 0), least_pixels) * tokens_per_pixel) + extra.get(name, 0)
    return depths


def fifo_bits(graph: StreamGraph, least_pixels: int = DEFAULT_PIXELS) -> dict[str, int]:
    """Storage of every channel's sized FIFO in bits whatever the schedule: pixels x channels x 8, with the
    pipeline depths at their deepest and a token as wide as a pixel."""
    pixels = depths_in_pixels(graph)
    extra = latency_tokens(graph, {p.name: depth_bound(p.kind) for p in graph.processes})
    return {name: (max(pixels.get(name, 0), least_pixels) + extra.get(name, 0)) * c.channels * 8
            for name, c in graph.channels.items()}


def fifo_memory(bits: int, width_bits: int = 8) -> tuple[int, int]:
    """(BRAM18K, LUT) of one FIFO: shift registers/LUTRAM up to 1 Kbit, BRAM beyond."""
    if bits <= 1024:
        return 0, math.ceil(bits / 32)
    return max(math.ceil(bits / 18_432), math.ceil(width_bits / 36)), 0
