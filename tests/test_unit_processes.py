"""Every process kind's pipelined loop (`ming_py.process_spec`) and a conv's storage plan (`ming_py.storage`), over
processes built by hand: no model, no IREE, no compiler.

What is checked comes from the geometry and the rules docs/design-space.md and `ming_py/process_spec.py` state, never from a
recorded run:

* an image moves every token of every stream once: values / lanes tokens per input and output;
* an iteration moves at most one token of each stream, inside its position, so a loop runs at least as many
  iterations as any stream has tokens, and takes iterations + pipeline depth cycles;
* tokens move in stream order, and an output token is written no earlier than the iteration that reads the
  last input token it is computed from (its window's last pixel, the whole vector of a dense layer, ...);
* the iteration counts: a window position takes max(input tokens, fold steps if a window ends at the position
  before, 1) iterations (docs/design-space.md), a fully unrolled conv one padded position per cycle, a dense
  layer its input vector then its fold, an element-wise process one pixel's tokens per pixel;
* the line buffer `[copies][rows][W_in][tokens][lanes]`: U_k banks of rows x W_in x C_in/lanes words of
  8 x lanes bits, in registers, LUTRAM or BRAM18K by docs/design-space.md's rule, at the cheapest BRAM port shape.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ming_py.dataflow import Channel, Port, Process, StreamGraph, Window
from ming_py.ir import AccRequant
from ming_py.process_spec import ProcessSpec, process_spec, loop_of
from ming_py.kinds.bilinear import BilinearTables
from ming_py.kinds.permute import PermuteOrder
from ming_py.kinds.split import SplitRoutes
from ming_py.storage import plan_arrays

try:
    from ming_py.storage import memory_cost
except ImportError:  # the storage plan's cost moved beside the array layouts (ming_py.array_layout)
    from ming_py.array_layout import memory_cost

pytestmark = pytest.mark.unit

WINDOW_KINDS = ("conv", "depthwise", "maxpool", "avgpool", "float_avgpool")
# docs/design-space.md's memory anchors (UltraScale+): BRAM18K port shapes (bits, words), URAM, LUTRAM limits
BRAM18K_SHAPES = ((9, 2048), (18, 1024), (36, 512))
URAM_SHAPE = (72, 4096)
LUTRAM_MAX_BITS, LUTRAM_DEPTH = 1024, 64


# ---------------------------------------------------------------------------
# building one process by hand
# ---------------------------------------------------------------------------

def out_size(size: int, kernel: int, stride: int, dilation: int, pad_low: int, pad_high: int) -> int:
    return (size + pad_low + pad_high - ((kernel - 1) * dilation + 1)) // stride + 1


def window(c_in, h, w, c_out, kernel=(1, 1), stride=(1, 1), dilation=(1, 1), pads=(0, 0, 0, 0), groups=1):
    out_h = out_size(h, kernel[0], stride[0], dilation[0], pads[0], pads[2])
    out_w = out_size(w, kernel[1], stride[1], dilation[1], pads[1], pads[3])
    return Window(c_in, h, w, c_out, out_h, out_w, kernel, stride, dilation, pads, 0, groups)


def graph_of(kind: str, ins, outs, win=None, params=None) -> tuple[StreamGraph, Process]:
    """A graph of one process of `kind` reading streams of shapes `ins` and writing `outs` ((C, H, W) each)."""
    in_names = [f"in{i}" for i in range(len(ins))]
    out_names = [f"out{i}" for i in range(len(outs))]
    channels = {name: Channel(name, "input", "p", *shape) for name, shape in zip(in_names, ins)}
    channels |= {name: Channel(name, "p", "output", *shape) for name, shape in zip(out_names, outs)}
    process = Process("p", kind, "node_p", tuple(in_names), tuple(out_names), window=win, params=params)
    c, h, w = ins[0]
    ports = tuple(Port(name, (1, *shape), name, (1, *shape), 0.1, 0, index=i)
                  for i, (name, shape) in enumerate(zip(out_names, outs)))
    source = Port("in0", (1, c, h, w), "in0", (1, c, h, w), 0.1, 0)
    return StreamGraph("hand", [process], channels, source, ports), process


class Case:
    """A process and one schedule of it."""

    def __init__(self, label, kind, ins, outs, unroll=(), lanes_in=None, lanes_out=None, win=None, params=None):
        self.label, self.kind, self.ins, self.outs, self.win = label, kind, ins, outs, win
        self.params = params
        self.unroll = tuple(unroll)
        self.lanes_in = tuple(lanes_in or (1,) * len(ins))
        self.lanes_out = tuple(lanes_out or (1,) * len(outs))

    def spec(self) -> ProcessSpec:
        graph, process = graph_of(self.kind, self.ins, self.outs, self.win, self.params)
        return process_spec(graph, process, self.unroll, self.lanes_in, self.lanes_out)

    def factor(self, loop: str) -> int:
        return dict(self.unroll).get(loop, 1)

    def __repr__(self):
        return self.label


def conv(label, c_in, h, w, c_out, oc, ic, k, **geometry) -> Case:
    win = window(c_in, h, w, c_out, **geometry)
    return Case(label, "conv", [(c_in, h, w)], [(c_out, win.out_height, win.out_width)],
                [("oc", oc), ("ic", ic), ("k", k)], [ic], [oc], win)


def channelwise(label, kind, c, h, w, lanes, k, **geometry) -> Case:
    win = window(c, h, w, c, **geometry)
    return Case(label, kind, [(c, h, w)], [(c, win.out_height, win.out_width)], [("c", lanes), ("k", k)],
                [lanes], [lanes], win)


def pointwise(label, c_in, h, w, c_out, oc, ic, stride=(1, 1)) -> Case:
    win = window(c_in, h, w, c_out, stride=stride)
    return Case(label, "pointwise", [(c_in, h, w)], [(c_out, win.out_height, win.out_width)],
                [("oc", oc), ("ic", ic)], [ic], [oc], win)


def grouped_conv(label, c_in, h, w, c_out, groups, g, oc, ic, k) -> Case:
    win = window(c_in, h, w, c_out, kernel=(3, 3), pads=(1, 1, 1, 1), groups=groups)
    return Case(label, "conv", [(c_in, h, w)], [(c_out, win.out_height, win.out_width)],
                [("g", g), ("oc", oc), ("ic", ic), ("k", k)], [g * ic], [g * oc], win)


def bilinear_case(label, c, h, w, out_h, out_w, lanes, align_corners=False) -> Case:
    """A bilinear resize by LiteRT's integer tables (half-pixel centres, or aligned corners)."""
    from test_bilinear_resize import litert_axis

    tables = tuple(litert_axis(size, out, align_corners=align_corners, half_pixel_centers=not align_corners)
                   for size, out in ((h, out_h), (w, out_w)))
    return Case(label, "bilinear", [(c, h, w)], [(c, out_h, out_w)], (), [lanes], [lanes], params=BilinearTables(*tables))


def pad_case(label, c, h, w, pads, lanes) -> Case:
    top, left, bottom, right = pads
    win = Window(c, h, w, c, h + top + bottom, w + left + right, pads=pads)
    return Case(label, "pad", [(c, h, w)], [(c, h + top + bottom, w + left + right)], (), [lanes], [lanes], win)


K3P1 = dict(kernel=(3, 3), pads=(1, 1, 1, 1))
CASES = [
    conv("conv3x3_folded", 4, 6, 6, 8, 1, 1, 1, **K3P1),
    conv("conv3x3_tiled", 4, 6, 6, 8, 2, 2, 3, **K3P1),
    conv("conv3x3_unrolled", 4, 6, 6, 8, 8, 4, 9, **K3P1),
    conv("conv3x3_s2_asym_pad", 2, 7, 7, 4, 2, 1, 3, kernel=(3, 3), stride=(2, 2), pads=(1, 1, 0, 0)),
    conv("conv3x3_d2", 2, 8, 8, 2, 1, 2, 9, kernel=(3, 3), dilation=(2, 2), pads=(2, 2, 2, 2)),
    conv("conv2x3_rect", 3, 5, 6, 2, 2, 3, 3, kernel=(2, 3), pads=(0, 1, 1, 1)),
    conv("conv3x3_valid", 2, 6, 5, 2, 2, 2, 1, kernel=(3, 3)),
    grouped_conv("conv_grouped_one_group_per_tile", 4, 5, 5, 4, 2, 1, 1, 2, 3),
    grouped_conv("conv_grouped_whole_groups", 4, 5, 5, 4, 2, 2, 2, 2, 9),
    channelwise("depthwise_folded", "depthwise", 4, 6, 6, 1, 1, **K3P1),
    channelwise("depthwise_tiled", "depthwise", 4, 6, 6, 2, 3, **K3P1),
    channelwise("depthwise_s2", "depthwise", 4, 7, 7, 4, 9, kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1)),
    channelwise("maxpool2x2_s2", "maxpool", 4, 6, 6, 2, 2, kernel=(2, 2), stride=(2, 2)),
    channelwise("maxpool3x3_s2_p1", "maxpool", 2, 7, 7, 1, 1, kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1)),
    channelwise("avgpool3x3_s2_p1", "avgpool", 2, 7, 7, 2, 3, kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1)),
    Case("float_avgpool3x3_s2_p1", "float_avgpool", [(2, 7, 7)], [(2, 4, 4)], [("c", 2)], [2], [2],
         window(2, 7, 7, 2, kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1))),
    pointwise("pointwise_folded", 8, 4, 4, 4, 1, 1),
    pointwise("pointwise_tiled", 8, 4, 4, 4, 2, 4),
    pointwise("pointwise_s2", 4, 6, 6, 4, 4, 2, stride=(2, 2)),
    Case("dense_folded", "dense", [(4, 2, 2)], [(5, 1, 1)], [("n", 1), ("k", 1)]),
    Case("dense_tiled", "dense", [(4, 2, 2)], [(5, 1, 1)], [("n", 5), ("k", 4)], [4], [5]),
    Case("global_avgpool_1", "global_avgpool", [(4, 3, 3)], [(4, 1, 1)], [("c", 1)]),
    Case("global_avgpool_4", "global_avgpool", [(4, 3, 3)], [(4, 1, 1)], [("c", 4)], [4], [4]),
    Case("global_maxpool_2", "global_maxpool", [(4, 3, 5)], [(4, 1, 1)], [("c", 2)], [2], [2]),
    Case("add", "add", [(4, 3, 3), (4, 3, 3)], [(4, 3, 3)], (), [2, 2], [2]),
    Case("mul", "mul", [(4, 3, 3), (4, 3, 3)], [(4, 3, 3)], (), [4, 4], [4]),
    Case("max", "max", [(4, 3, 3), (4, 3, 3)], [(4, 3, 3)], (), [2, 2], [2]),
    Case("min", "min", [(4, 3, 3), (4, 3, 3)], [(4, 3, 3)], (), [1, 1], [1]),
    Case("broadcast_vector_second", "broadcast", [(4, 3, 3), (4, 1, 1)], [(4, 3, 3)], (), [2, 2], [2]),
    Case("broadcast_vector_first", "broadcast", [(4, 1, 1), (4, 3, 3)], [(4, 3, 3)], (), [1, 1], [1]),
    Case("broadcast_scalar", "broadcast", [(4, 3, 3), (1, 1, 1)], [(4, 3, 3)], (), [2, 1], [2]),
    Case("rescale", "rescale", [(4, 3, 3)], [(4, 3, 3)], (), [1], [1]),
    Case("table", "table", [(4, 3, 3)], [(4, 3, 3)], (), [4], [4]),
    Case("concat", "concat", [(2, 3, 3), (4, 3, 3)], [(6, 3, 3)], (), [2, 2], [2]),
    Case("split_copies", "split", [(6, 3, 3)], [(6, 3, 3), (6, 3, 3)], (), [3], [3, 3]),
    Case("split_routes", "split", [(6, 3, 3)], [(2, 3, 3), (4, 3, 3)], (), [2], [2, 2], params=SplitRoutes(((0, 2), (2, 4)))),
    Case("upsample_2x3", "upsample", [(2, 3, 3)], [(2, 6, 9)], (), [1], [1]),
    Case("upsample_2x2_lanes", "upsample", [(4, 2, 3)], [(4, 4, 6)], (), [2], [2]),
    Case("depth_to_space_2", "depth_to_space", [(8, 2, 3)], [(2, 4, 6)], (), [1], [1]),
    Case("depth_to_space_3_lanes", "depth_to_space", [(18, 2, 2)], [(2, 6, 6)], (), [2], [2]),
    bilinear_case("bilinear_2x", 2, 3, 4, 6, 8, 1),
    bilinear_case("bilinear_3x_lanes", 4, 2, 3, 6, 9, 2),
    bilinear_case("bilinear_align_corners", 2, 3, 3, 7, 5, 2, align_corners=True),
    bilinear_case("bilinear_down", 2, 5, 6, 2, 3, 1),
    pad_case("pad_asym", 2, 3, 3, (1, 2, 0, 1), 1),
    pad_case("pad_lanes", 4, 2, 3, (1, 0, 1, 0), 2),
    Case("permute", "permute", [(4, 3, 3)], [(4, 3, 3)], (), [1], [1], params=PermuteOrder((2, 0, 3, 1))),
    Case("permute_lanes", "permute", [(4, 2, 3)], [(4, 2, 3)], (), [2], [2], params=PermuteOrder((3, 2, 1, 0))),
]
KINDS = {"conv", "depthwise", "pointwise", "dense", "maxpool", "avgpool", "float_avgpool", "global_avgpool", "global_maxpool", "add",
         "mul", "max", "min", "broadcast", "rescale", "table", "concat", "split", "upsample", "depth_to_space", "pad", "permute",
         "bilinear"}


def test_every_kind_has_a_case():
    assert {case.kind for case in CASES} == KINDS


# ---------------------------------------------------------------------------
# reading a loop: the iteration of every token move
# ---------------------------------------------------------------------------

def moves(loop, side: str, index: int) -> list[int]:
    """The iteration in which each token of input (`side` "reads") or output ("writes") `index` moves, in
    token order, expanded from the loop's runs of positions."""
    result, done = [], 0
    for repeat, position in loop.runs:
        access = getattr(position, side)[index]
        offsets = [access.first + access.stride * i for i in range(access.count)]
        for r in range(repeat):
            result.extend(done + r * position.iterations + offset for offset in offsets)
        done += repeat * position.iterations
    return result


def tokens(shape, lanes) -> int:
    c, h, w = shape
    return c // lanes * h * w


def pixel_tokens(shape, lanes) -> int:
    return shape[0] // lanes


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_an_image_moves_every_token_of_every_stream_once(case):
    loop = loop_of(case.spec())
    for i, (shape, lanes) in enumerate(zip(case.ins, case.lanes_in)):
        assert len(moves(loop, "reads", i)) == tokens(shape, lanes), f"input {i}"
    for i, (shape, lanes) in enumerate(zip(case.outs, case.lanes_out)):
        assert len(moves(loop, "writes", i)) == tokens(shape, lanes), f"output {i}"


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_an_iteration_moves_at_most_one_token_of_a_stream_inside_its_position(case):
    loop = loop_of(case.spec())
    for repeat, position in loop.runs:
        assert repeat >= 1 and position.iterations >= 1
        for access in position.reads + position.writes:
            offsets = [access.first + access.stride * i for i in range(access.count)]
            assert len(set(offsets)) == len(offsets), access
            assert all(0 <= offset < position.iterations for offset in offsets), (access, position.iterations)
    streams = [tokens(s, lanes) for s, lanes in zip(case.ins, case.lanes_in)] + \
              [tokens(s, lanes) for s, lanes in zip(case.outs, case.lanes_out)]
    assert loop.iterations == sum(repeat * position.iterations for repeat, position in loop.runs)
    assert loop.iterations >= max(streams)
    assert loop.depth >= 1
    assert loop.cycles == loop.iterations + loop.depth


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_tokens_move_in_stream_order(case):
    loop = loop_of(case.spec())
    for side, count in (("reads", len(case.ins)), ("writes", len(case.outs))):
        for i in range(count):
            its = moves(loop, side, i)
            assert all(a < b for a, b in zip(its, its[1:])), f"{side} {i} out of order"


# ---------------------------------------------------------------------------
# what each output token is computed from (its last input token per input), from the geometry alone
# ---------------------------------------------------------------------------

def _window_last_pixel(win: Window, kind: str, oy: int, ox: int) -> tuple[int, int]:
    """The input pixel of the window of output (oy, ox) that arrives last (raster order), padding excluded."""
    if kind == "pointwise":
        return oy * win.stride[0], ox * win.stride[1]
    rows = [oy * win.stride[0] - win.pads[0] + i * win.dilation[0] for i in range(win.kernel[0])]
    cols = [ox * win.stride[1] - win.pads[1] + j * win.dilation[1] for j in range(win.kernel[1])]
    rows = [r for r in rows if 0 <= r < win.in_height]
    cols = [c for c in cols if 0 <= c < win.in_width]
    assert rows and cols, "a window entirely in the padding"
    return max(rows), max(cols)


def dependencies(case: Case) -> list[list[list[int | None]]]:
    """[output][token] -> per input, the last input token (number in the image) the output token needs, or None."""
    kind = case.kind
    ins = [tokens(s, l) for s, l in zip(case.ins, case.lanes_in)]
    per_in = [pixel_tokens(s, l) for s, l in zip(case.ins, case.lanes_in)]
    result = []
    for o, (shape, lanes) in enumerate(zip(case.outs, case.lanes_out)):
        _, out_h, out_w = shape
        t_out = pixel_tokens(shape, lanes)
        needs = []
        for q in range(out_h * out_w):
            oy, ox = divmod(q, out_w)
            for t in range(t_out):
                if kind in ("dense", "global_avgpool", "global_maxpool"):
                    needs.append([ins[0] - 1])
                elif kind in WINDOW_KINDS or kind == "pointwise":
                    y, x = _window_last_pixel(case.win, kind, oy, ox)
                    pixel = y * case.win.in_width + x
                    whole = kind in ("conv", "pointwise")  # every output channel reads every input channel
                    needs.append([pixel * per_in[0] + (per_in[0] - 1 if whole else t)])
                elif kind in ("add", "mul", "max", "min", "rescale", "table"):
                    needs.append([q * per_in[i] + t for i in range(len(ins))])
                elif kind == "broadcast":
                    vector = next(i for i, s in enumerate(case.ins) if s != shape)
                    needs.append([ins[i] - 1 if i == vector else q * per_in[i] + t for i in range(len(ins))])
                elif kind == "split":
                    first = case.params.routes[o][0] // lanes if case.params else 0
                    needs.append([q * per_in[0] + first + t])
                elif kind == "concat":
                    offsets = np.cumsum([0] + per_in)
                    owner = int(np.searchsorted(offsets, t, side="right") - 1)
                    needs.append([q * per_in[i] + t - offsets[i] if i == owner else None for i in range(len(ins))])
                elif kind == "permute":  # an output token gathers channels from anywhere in its pixel
                    needs.append([q * per_in[0] + per_in[0] - 1])
                elif kind == "upsample":
                    sh, sw = out_h // case.ins[0][1], out_w // case.ins[0][2]
                    needs.append([(oy // sh * case.ins[0][2] + ox // sw) * per_in[0] + t])
                elif kind == "depth_to_space":  # output (y b + dy, x b + dx) channel c: input (y, x), (dy b + dx) C + c
                    block = out_h // case.ins[0][1]
                    y, dy, x, dx = oy // block, oy % block, ox // block, ox % block
                    needs.append([(y * case.ins[0][2] + x) * per_in[0] + (dy * block + dx) * t_out + t])
                elif kind == "bilinear":  # the last of its four neighbours to arrive: (y1, x1)
                    y1, x1 = case.params.rows[oy][1], case.params.cols[ox][1]
                    needs.append([(y1 * case.ins[0][2] + x1) * per_in[0] + t])
                elif kind == "pad":
                    top, left, _, _ = case.win.pads
                    y, x = oy - top, ox - left
                    inside = 0 <= y < case.ins[0][1] and 0 <= x < case.ins[0][2]
                    needs.append([(y * case.ins[0][2] + x) * per_in[0] + t if inside else None])
                else:
                    raise AssertionError(kind)
        result.append(needs)
    return result


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_an_output_token_is_written_no_earlier_than_the_inputs_it_is_computed_from(case):
    loop = loop_of(case.spec())
    reads = [moves(loop, "reads", i) for i in range(len(case.ins))]
    for o, needs in enumerate(dependencies(case)):
        writes = moves(loop, "writes", o)
        assert len(writes) == len(needs)
        for token, (written, need) in enumerate(zip(writes, needs)):
            for i, last in enumerate(need):
                if last is not None:
                    assert written >= reads[i][last], \
                        f"output {o} token {token} written in iteration {written}, before input {i} token {last} " \
                        f"(read in {reads[i][last]})"


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_fill_is_the_first_write_and_drain_the_last_write_after_the_last_read(case):
    """fill counts the cycles to the first output token (its iteration + 1, then the pipeline depth); drain the
    cycles from the last input token to the last output token (docs/design-space.md, "The cost model")."""
    loop = loop_of(case.spec())
    first_write = min(moves(loop, "writes", o)[0] for o in range(len(case.outs)))
    last_write = max(moves(loop, "writes", o)[-1] for o in range(len(case.outs)))
    last_read = max(moves(loop, "reads", i)[-1] for i in range(len(case.ins)))
    assert loop.fill == first_write + 1 + loop.depth
    assert loop.drain == max(last_write - last_read, 0) + loop.depth
    assert loop.depth < loop.fill <= loop.cycles


@pytest.mark.parametrize("case", [c for c in CASES if c.kind in ("dense", "global_avgpool", "global_maxpool")],
                         ids=repr)
def test_a_reduction_over_the_whole_input_writes_after_its_last_read(case):
    loop = loop_of(case.spec())
    assert loop.fill > moves(loop, "reads", 0)[-1] + loop.depth
    # then one output token per iteration: the last one t_out - 1 iterations after the first (or the fold's)
    assert loop.drain >= loop.depth + 1


ELEMENT_WISE = ("add", "mul", "max", "min", "rescale", "table")


@pytest.mark.parametrize("case", [c for c in CASES if c.kind in ELEMENT_WISE], ids=repr)
def test_an_element_wise_process_writes_each_token_in_the_iteration_that_reads_it(case):
    loop = loop_of(case.spec())
    writes = moves(loop, "writes", 0)
    for i in range(len(case.ins)):
        assert moves(loop, "reads", i) == writes
    assert loop.drain == loop.depth
    assert loop.fill == loop.depth + 1


# ---------------------------------------------------------------------------
# iteration counts
# ---------------------------------------------------------------------------

def window_positions(win: Window, kind: str):
    """(a pixel arrives, the position ends an output window) of each position of a window loop in raster
    order: every padded input position (every input pixel for a 1x1 conv)."""
    pointwise = kind == "pointwise"
    rows, cols = (win.in_height, win.in_width) if pointwise else (win.padded_height, win.padded_width)
    lead = (0, 0) if pointwise else ((win.kernel[0] - 1) * win.dilation[0], (win.kernel[1] - 1) * win.dilation[1])
    pads = (0, 0) if pointwise else (win.pads[0], win.pads[1])
    for r in range(rows):
        for c in range(cols):
            real = 0 <= r - pads[0] < win.in_height and 0 <= c - pads[1] < win.in_width
            top, left = r - lead[0], c - lead[1]
            ends = (top >= 0 and left >= 0 and top % win.stride[0] == 0 and left % win.stride[1] == 0
                    and top // win.stride[0] < win.out_height and left // win.stride[1] < win.out_width)
            yield real, ends


def fold(case: Case) -> int:
    """Iterations computing one output position (docs/design-space.md): conv (G/U_g) (C_out/G/U_oc) (C_in/G/U_ic)
    (K/U_k), depthwise and pooling (C/U_c) (K/U_k), 1x1 conv (C_out/U_oc) (C_in/U_ic), dense (N/U_n) (K/U_k); an exact
    average (float_avgpool) unrolls its window whole: C/U_c."""
    f = case.factor
    if case.kind == "float_avgpool":
        return case.win.out_channels // f("c")
    if case.kind == "dense":
        return case.outs[0][0] // f("n") * (tokens(case.ins[0], 1) // f("k"))
    w = case.win
    if case.kind in ("conv", "pointwise"):
        k = w.window_size // f("k") if case.kind == "conv" else 1
        return w.groups // f("g") * (w.out_channels // w.groups // f("oc")) * (w.in_channels // w.groups // f("ic")) * k
    return w.out_channels // f("c") * (w.window_size // f("k"))


def expected_iterations(case: Case) -> int:
    t_in = [pixel_tokens(s, l) for s, l in zip(case.ins, case.lanes_in)]
    t_out = [pixel_tokens(s, l) for s, l in zip(case.outs, case.lanes_out)]
    kind = case.kind
    if kind in WINDOW_KINDS or kind == "pointwise":
        # docs/design-space.md: a position takes max(input tokens, fold steps if a window ends there, 1) iterations, the
        # window ending at the previous position computed there; one trailing position after the last input
        total, ended = 0, False
        for real, ends in window_positions(case.win, kind):
            total += max(t_in[0] if real else 0, fold(case) if ended else 0, 1)
            ended = ends
        return total + max(fold(case) if ended else 0, 1)
    if kind == "dense":  # the input vector, then the fold
        return tokens(case.ins[0], case.lanes_in[0]) + fold(case)
    h, w = case.ins[0][1:] if kind != "broadcast" else case.outs[0][1:]
    if kind in ("global_avgpool", "global_maxpool"):  # every pixel's tokens, then the results
        return h * w * t_in[0] + t_out[0]
    if kind in ("add", "mul", "max", "min", "rescale", "table", "split"):  # one token of every stream per iteration
        return h * w * max(t_in + t_out)
    if kind == "concat":  # the inputs' tokens of a pixel one after the other
        return h * w * sum(t_in)
    if kind == "broadcast":  # the vector once, then one map token per iteration
        vector = next(i for i, s in enumerate(case.ins) if s != case.outs[0])
        return t_in[vector] + h * w * t_out[0]
    if kind in ("upsample", "pad"):  # one output token per iteration
        return tokens(case.outs[0], case.lanes_out[0])
    if kind == "depth_to_space":  # per input row: its tokens as they arrive, then the b - 1 buffered rows
        block = case.outs[0][1] // h
        return h * w * block * (2 * block - 1) * t_out[0]
    if kind == "bilinear":  # every input token read and every output token written, one per iteration
        return h * w * t_in[0] + tokens(case.outs[0], case.lanes_out[0])
    if kind == "permute":  # a pixel read while the previous one is written, one trailing pixel
        return t_in[0] + (h * w - 1) * max(t_in[0], t_out[0]) + t_out[0]
    raise AssertionError(kind)


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_iteration_count_follows_from_the_geometry(case):
    assert loop_of(case.spec()).iterations == expected_iterations(case)


def test_a_fully_unrolled_conv_takes_one_padded_position_per_cycle():
    """docs/design-space.md: a fully unrolled conv consumes one padded input position per cycle; the window whose last
    element arrives at position p is computed (and its token written) at position p + 1."""
    case = next(c for c in CASES if c.label == "conv3x3_unrolled")
    win = case.win
    loop = loop_of(case.spec())
    positions = win.padded_height * win.padded_width
    assert loop.iterations == positions + 1
    writes = moves(loop, "writes", 0)
    lead = (win.kernel[0] - 1) * win.dilation[0], (win.kernel[1] - 1) * win.dilation[1]
    for q, written in enumerate(writes):
        oy, ox = divmod(q, win.out_width)
        last = (oy * win.stride[0] + lead[0]) * win.padded_width + ox * win.stride[1] + lead[1]
        assert written == last + 1


def test_more_unrolling_never_takes_more_iterations():
    folded, tiled, unrolled = (next(c for c in CASES if c.label == f"conv3x3_{s}")
                               for s in ("folded", "tiled", "unrolled"))
    counts = [loop_of(c.spec()).iterations for c in (folded, tiled, unrolled)]
    assert counts[0] >= counts[1] >= counts[2]
    assert counts[0] > counts[2]
    # a fold of 8 x 4 x 9 iterations per output position dominates the folded loop
    assert counts[0] >= folded.win.out_height * folded.win.out_width * fold(folded)


@pytest.mark.parametrize("kind, ins, outs, unroll, lanes_in, lanes_out, win", [
    # a conv's lanes are its ic (in) and oc (out) factors
    ("conv", [(4, 5, 5)], [(4, 5, 5)], [("oc", 2), ("ic", 2), ("k", 1)], [4], [2],
     window(4, 5, 5, 4, kernel=(3, 3), pads=(1, 1, 1, 1))),
    # a depthwise conv keeps its lanes: c in and out
    ("depthwise", [(4, 5, 5)], [(4, 5, 5)], [("c", 2), ("k", 1)], [2], [4],
     window(4, 5, 5, 4, kernel=(3, 3), pads=(1, 1, 1, 1))),
    # a dense layer's k tile is its input token (a bank known at compile time)
    ("dense", [(4, 2, 2)], [(5, 1, 1)], [("n", 1), ("k", 2)], [4], [1], None),
    # element-wise: one lane count on every stream
    ("add", [(4, 3, 3), (4, 3, 3)], [(4, 3, 3)], (), [2, 4], [2], None),
])
def test_lanes_that_do_not_match_the_schedule_are_refused(kind, ins, outs, unroll, lanes_in, lanes_out, win):
    graph, process = graph_of(kind, ins, outs, win)
    with pytest.raises(ValueError):
        loop_of(process_spec(graph, process, tuple(unroll), tuple(lanes_in), tuple(lanes_out)))


# ---------------------------------------------------------------------------
# storage: a conv's line buffer, weights and constants
# ---------------------------------------------------------------------------

def accumulator_requant(channels: int) -> AccRequant:
    return AccRequant(bias=np.arange(channels, dtype=np.int32), x_scale=np.float32(0.02),
                      w_scale=np.full(channels, 0.01, np.float32), y_scale=np.float32(0.05), zero_point=3,
                      channel_dims=(1,))


def memory_of(words: int, word_bits: int, large: str = "bram") -> str:
    """docs/design-space.md: a bank of one word is registers, one of at most 1 Kbit or 64 words LUTRAM, else BRAM
    (or URAM)."""
    if words == 1:
        return "register"
    if words * word_bits <= LUTRAM_MAX_BITS or words <= LUTRAM_DEPTH:
        return "lutram"
    return large


def bram18k_per_bank(words: int, word_bits: int) -> int:
    """The cheapest BRAM18K port shape: 9 x 2048, 18 x 1024 or 36 x 512 (docs/design-space.md)."""
    return min(math.ceil(word_bits / width) * math.ceil(words / depth) for width, depth in BRAM18K_SHAPES)


LINE_BUFFERS = [
    # (label, c_in, h, w, c_out, oc, ic, k, geometry)
    ("folded_bram", 16, 8, 32, 4, 1, 1, 1, K3P1),      # 3 rows x 32 x 16 = 1536 words of 8 bits: one 9 x 2048
    ("k3_copies", 16, 8, 32, 4, 1, 1, 3, K3P1),        # three copies of it
    ("lanes4_36bit", 16, 8, 32, 4, 1, 4, 9, K3P1),     # 384 words of 32 bits: one 36 x 512 per copy
    ("lanes8_two_per_bank", 16, 8, 32, 8, 8, 8, 1, K3P1),  # 192 words of 64 bits: two 36 x 512
    ("dilated_5_rows", 4, 10, 40, 4, 1, 1, 1, dict(kernel=(3, 3), dilation=(2, 2), pads=(2, 2, 2, 2))),
    ("small_lutram", 2, 4, 4, 2, 1, 1, 1, K3P1),       # 3 x 4 x 2 = 24 words: LUTRAM
    ("shallow_lutram", 16, 4, 4, 4, 1, 4, 1, K3P1),    # 48 words of 32 bits: over 1 Kbit, but 64 words at most
    ("wide_rows_5x5", 3, 12, 64, 4, 4, 3, 5, dict(kernel=(5, 5), pads=(2, 2, 2, 2))),
]


@pytest.mark.parametrize("label, c_in, h, w, c_out, oc, ic, k, geometry", LINE_BUFFERS,
                         ids=[b[0] for b in LINE_BUFFERS])
def test_line_buffer_banks_words_and_memory(label, c_in, h, w, c_out, oc, ic, k, geometry):
    case = conv(label, c_in, h, w, c_out, oc, ic, k, **geometry)
    spec = case.spec()
    win = case.win
    arrays = plan_arrays(spec, accumulator_requant(c_out), "bram")
    buffer = arrays["line_buffer"]
    rows = (win.kernel[0] - 1) * win.dilation[0] + 1
    words = rows * win.in_width * (c_in // ic)
    assert buffer.banks == k  # one copy per window element an iteration reads
    assert buffer.word_bits == 8 * ic  # the lanes of a token in one word
    assert buffer.words == words
    assert buffer.bits == 8 * k * rows * win.in_width * c_in
    assert not buffer.rom
    assert buffer.memory == memory_of(words, 8 * ic)
    bram, uram, lut, ff = buffer.cost()
    if buffer.memory == "bram":
        assert (bram, uram, lut, ff) == (k * bram18k_per_bank(words, 8 * ic), 0, 0, 0)
    elif buffer.memory == "lutram":  # a RAM: two LUTs per 64 bits of a bit column
        assert (bram, uram, ff) == (0, 0, 0) and lut == k * math.ceil(words / 64) * 8 * ic * 2


def test_line_buffer_bram_counts_by_port_shape():
    """The figures of LINE_BUFFERS's comments, worked out by hand from docs/design-space.md's port shapes."""
    expected = {"folded_bram": 1, "k3_copies": 3, "lanes4_36bit": 9, "lanes8_two_per_bank": 2}
    for label, c_in, h, w, c_out, oc, ic, k, geometry in LINE_BUFFERS:
        if label in expected:
            spec = conv(label, c_in, h, w, c_out, oc, ic, k, **geometry).spec()
            assert plan_arrays(spec, None, "bram")["line_buffer"].cost()[0] == expected[label], label


@pytest.mark.parametrize("label, c_in, h, w, c_out, oc, ic, k, geometry",
                         [b for b in LINE_BUFFERS if "lutram" not in b[0]], ids=[b[0] for b in LINE_BUFFERS
                                                                                 if "lutram" not in b[0]])
def test_a_line_buffer_in_uram_takes_72_x_4096_blocks(label, c_in, h, w, c_out, oc, ic, k, geometry):
    spec = conv(label, c_in, h, w, c_out, oc, ic, k, **geometry).spec()
    buffer = plan_arrays(spec, None, "uram")["line_buffer"]
    assert buffer.memory == "uram"
    width, depth = URAM_SHAPE
    assert buffer.cost() == (0, k * math.ceil(8 * ic / width) * math.ceil(buffer.words / depth), 0, 0)
    # the layout does not depend on the memory
    assert (buffer.banks, buffer.words, buffer.word_bits) == \
        tuple(getattr(plan_arrays(spec, None, "bram")["line_buffer"], a) for a in ("banks", "words", "word_bits"))


@pytest.mark.parametrize("case", [c for c in CASES if c.kind in ("conv", "pointwise", "depthwise", "dense")],
                         ids=repr)
def test_weights_are_a_word_per_fold_step_and_constants_a_word_per_output_tile(case):
    spec = case.spec()
    c_out = case.outs[0][0]
    arrays = plan_arrays(spec, accumulator_requant(c_out), "bram")
    weights = arrays["weights"]
    lanes = math.prod(f for _, f in case.unroll)  # every weight an iteration multiplies
    assert weights.rom
    assert weights.words == fold(case)
    assert weights.word_bits == 8 * lanes
    assert weights.bits == 8 * lanes * weights.words
    tiles, lanes_out = c_out // case.lanes_out[0], case.lanes_out[0]
    constants = [a for role, a in arrays.items() if role not in ("weights", "line_buffer", "row_buffer", "pixel",
                                                                 "acc")]
    assert "bias" in arrays and constants
    for a in constants:
        assert a.rom and a.words == tiles and a.word_bits % lanes_out == 0, a
    assert arrays["bias"].word_bits == 32 * lanes_out


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_memory_cost_adds_up_the_arrays(case):
    epilogue = accumulator_requant(case.outs[0][0]) if case.kind in ("conv", "pointwise", "depthwise", "dense") \
        else None
    arrays = plan_arrays(case.spec(), epilogue, "bram")
    total = memory_cost(arrays)
    assert len(total) == 4 and all(x >= 0 for x in total)
    assert tuple(total) == tuple(sum(a.cost()[i] for a in arrays.values()) for i in range(4))
    for a in arrays.values():
        assert a.banks >= 1 and a.words >= 1 and a.bits == a.banks * a.words * a.word_bits or a.memory == "register"


def test_a_dense_row_buffer_holds_the_input_vector_in_tokens():
    case = next(c for c in CASES if c.label == "dense_tiled")
    buffer = plan_arrays(case.spec(), None, "bram")["row_buffer"]
    assert buffer.words == tokens(case.ins[0], case.lanes_in[0])
    assert buffer.word_bits == 8 * case.lanes_in[0]
    assert buffer.banks == 1
