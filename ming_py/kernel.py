"""The loop of every process, described once: what its emitted C++ runs, what `ilp/cost.py` charges
and what `ming simulate` steps through.

Every process is one flattened loop pipelined at II=1 (emit/templates/process/*.cpp.j2). Its
iterations are grouped by *position*: a padded input position of a sliding window, an input
pixel of a 1x1 conv or an element-wise process, an output pixel of an upsample or pad process,
the input vector and the fold of a dense layer.
In each position the loop reads the position's input tokens (at most one per iteration and input,
spread evenly over the position, the way a producer running at the same pace writes them) and
writes output tokens at fixed iterations, and it spends `max(tokens read, fold steps, 1)`
iterations there. A window process computes, during position
p, the window whose bottom-right element arrived at position p - 1 (so the window is complete in
the line buffer before the first MAC reads it) and has one trailing position after the last
input.

The fold of a MAC process is the sequence of iterations that computes one output position,
output-channel tiles outermost: conv (C_out/U_oc) x (C_in/U_ic) x (K/U_k), depthwise and pooling
(C/U_c) x (K/U_k), 1x1 conv (C_out/U_oc) x (C_in/U_ic), dense (N/U_n) x (K/U_k). An output tile's
accumulators are final in the last iteration of its inner reduction, where its token (U_oc lanes)
is requantized and written. This is the schedule of FINN's sliding-window unit feeding its MVAU
(one pipelined loop, no drain per position) folded into a single process.

A grouped conv (G groups, F = C_out/G output and C_g = C_in/G input channels each) folds
(G/U_g) x (F/U_oc) x (C_g/U_ic) x (K/U_k): an output tile is U_oc channels of one group, or, with
U_g > 1, U_g whole groups (U_oc = F, U_ic = C_g), so that an output token holds consecutive channels
and each iteration reads one input token (U_g x U_ic lanes) of the tile's groups.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from functools import cached_property

from .dataflow import GROUP_LOOP, WINDOW_KINDS, Schedule, StreamGraph, Window

# Pipeline depth of each kind's loop (cycles from an iteration's start to its output write):
# stream read 1, buffer read 2, multiply 3, adder tree log2(terms), requantization 6 (the lean
# datapath: abs and clamp 1, the DSP product 3, fraction compare 1, sign, zero point and saturation 1).
REQUANT_STAGES = 6
# Mul's float32 emulation (`ming::mul_requant`): the 8 x 8-bit product 1, the 17 x 24-bit DSP product 3,
# the two float32 roundings (mask and add) 1 each, the final rounding and saturation 1.
MUL_STAGES = 7


def pipeline_depth(kind: str, terms: int) -> int:
    """Pipeline depth of a kind's loop that sums `terms` products (or window elements) per output lane."""
    tree = math.ceil(math.log2(max(terms, 1)))
    if kind in ("conv", "pointwise", "depthwise", "dense"):
        return 8 + tree + REQUANT_STAGES
    if kind in ("avgpool", "global_avgpool"):
        return 4 + tree + REQUANT_STAGES
    if kind in ("maxpool", "global_maxpool"):
        return 4 + tree
    if kind == "add":
        return 2 + REQUANT_STAGES
    if kind == "mul":
        return 2 + MUL_STAGES
    if kind == "broadcast":  # the vector's register read, then the deeper of the two datapaths
        return 3 + max(REQUANT_STAGES, MUL_STAGES)
    return 2  # rescale and table (a table lookup), concat, split, upsample, pad


def static_banks(kind: str, unroll_k: int, lanes_in: int) -> bool:
    """Whether every buffer read of the loop goes to a bank known at compile time, so that Vitis HLS can
    schedule it at II=1 (it does not prove that reads at run-time indices fall into different banks). A
    window process reads each unrolled window element from its own copy of the line buffer; a dense
    process reads one word of its input vector, so its k tile must be the input token."""
    return unroll_k == lanes_in if kind == "dense" else True


# Where a MAC process's int8 products are computed: one per DSP48E2, in LUT fabric, or two that share
# their input per DSP48E2 (AMD WP486: x * (w_high * 2^18 + w_low) on the 27 x 18-bit multiplier).
MULTIPLIERS = ("dsp", "fabric", "dsp_pair")
_SHARED_INPUT_LOOP = {"conv": "oc", "pointwise": "oc", "dense": "n"}  # lanes multiplying the same input


def multiplier_choices(kind: str, unroll: dict[str, int]) -> tuple[str, ...]:
    """The multipliers a process may use: DSPs or fabric; where an even number of lanes share each input,
    pairs take the place of one DSP per lane (half the DSPs for 10 LUTs a lane, always the better trade)."""
    if kind not in ("conv", "pointwise", "depthwise", "dense"):
        return ("dsp",)
    pair = _SHARED_INPUT_LOOP.get(kind)
    return ("dsp_pair", "fabric") if pair is not None and unroll.get(pair, 1) % 2 == 0 else ("dsp", "fabric")


def window_tile(kernel: tuple[int, int], unroll_k: int) -> tuple[int, int]:
    """The rows x columns of the window that one k tile of `unroll_k` elements covers: the widest
    column run that divides both U_k and K_w, the rest in rows (any divisor of K_h * K_w splits so).
    The loop walks the window by tile-row and tile-column counters, so no index is a division."""
    columns = math.gcd(unroll_k, kernel[1])
    rows = unroll_k // columns
    assert kernel[0] % rows == 0, (kernel, unroll_k)
    return rows, columns


def window_order(kernel: tuple[int, int], unroll_k: int) -> list[int]:
    """The window elements (row * K_w + column) in loop order: k tiles in raster order of their
    top-left elements, within a tile rows then columns."""
    (k_h, k_w), (rows, columns) = kernel, window_tile(kernel, unroll_k)
    return [(tile_row + r) * k_w + tile_col + c
            for tile_row in range(0, k_h, rows) for tile_col in range(0, k_w, columns)
            for r in range(rows) for c in range(columns)]


def whole_groups(window: Window | None, unroll: dict[str, int]) -> bool:
    """Whether a grouped conv's tiles that span several groups (U_g > 1) hold whole groups, output and input
    (every other schedule passes)."""
    if unroll.get(GROUP_LOOP, 1) == 1:
        return True
    groups = window.groups
    return unroll.get("oc", 1) == window.out_channels // groups \
        and unroll.get("ic", 1) == window.in_channels // groups


def depth_bound(kind: str) -> int:
    """The deepest a kind's loop gets under any schedule (at most 64 x 64 terms per lane)."""
    return pipeline_depth(kind, 64 * 64)


@dataclass(frozen=True)
class KernelSpec:
    """What decides a process's loop: its kind, geometry and schedule."""

    kind: str
    inputs: tuple[tuple[int, int, int], ...]  # (channels, height, width) of each input stream
    outputs: tuple[tuple[int, int, int], ...]
    unroll: tuple[tuple[str, int], ...]
    lanes_in: tuple[int, ...]
    lanes_out: tuple[int, ...]
    window: Window | None = None
    routes: tuple[tuple[int, int], ...] = ()  # split: per output, (first channel, channels); empty: all

    def factor(self, loop: str) -> int:
        return dict(self.unroll).get(loop, 1)

    @property
    def tokens_in(self) -> tuple[int, ...]:
        """Tokens of one input pixel (of the whole input vector for dense), per input."""
        if self.kind == "dense":
            (c, h, w), = self.inputs
            return (c * h * w // self.lanes_in[0],)
        return tuple(c // lanes for (c, _, _), lanes in zip(self.inputs, self.lanes_in))

    @property
    def vector_input(self) -> int:
        """A broadcast process's input read once per image: the one that is not the output's shape."""
        return next(i for i, shape in enumerate(self.inputs) if shape != self.outputs[0])

    @property
    def tokens_out(self) -> tuple[int, ...]:
        return tuple(c // lanes for (c, _, _), lanes in zip(self.outputs, self.lanes_out))

    @property
    def macs(self) -> int:
        """Multiply-accumulate lanes (DSPs of the MAC array)."""
        if self.kind in ("conv", "pointwise", "dense", "depthwise"):
            return math.prod(f for _, f in self.unroll)
        return 0

    @property
    def reduction_tiles(self) -> int:
        """Iterations of one output tile's reduction."""
        w = self.window
        return {
            "conv": lambda: (w.in_channels // w.groups // self.factor("ic")) * (w.window_size // self.factor("k")),
            "pointwise": lambda: w.in_channels // w.groups // self.factor("ic"),
            "depthwise": lambda: w.window_size // self.factor("k"),
            "maxpool": lambda: w.window_size // self.factor("k"),
            "avgpool": lambda: w.window_size // self.factor("k"),
            "dense": lambda: self.inputs[0][0] * self.inputs[0][1] * self.inputs[0][2] // self.factor("k"),
        }[self.kind]()

    @property
    def fold(self) -> int:
        """Iterations that compute one output position (all its output tiles)."""
        return self.reduction_tiles * self.tokens_out[0]

    @property
    def depth(self) -> int:
        """Pipeline depth of the loop."""
        terms = {"maxpool": self.factor("k"), "avgpool": self.factor("k")}.get(
            self.kind, math.prod(f for loop, f in self.unroll if loop in ("ic", "k")))
        return pipeline_depth(self.kind, terms)

    def check(self) -> None:
        """The lane ties the loop relies on (the ILP's candidates always satisfy them)."""
        if self.kind in ("conv", "pointwise"):
            groups = self.factor(GROUP_LOOP)
            ok = self.lanes_in[0] == groups * self.factor("ic") and self.lanes_out[0] == groups * self.factor("oc") \
                and whole_groups(self.window, dict(self.unroll))
        elif self.kind in ("depthwise", "maxpool", "avgpool", "global_avgpool", "global_maxpool"):
            ok = self.lanes_in[0] == self.factor("c") == self.lanes_out[0]
        elif self.kind == "dense":
            ok = self.lanes_out[0] == self.factor("n")
        elif self.kind == "broadcast":  # a scalar is one token of one lane
            v = self.vector_input
            ok = self.lanes_in[1 - v] == self.lanes_out[0] and \
                self.lanes_in[v] == (1 if self.inputs[v][0] == 1 else self.lanes_out[0])
        else:
            ok = len(set(self.lanes_in + self.lanes_out)) == 1
        if not ok:
            raise ValueError(f"{self.kind}: lanes {self.lanes_in} -> {self.lanes_out} do not match the unroll "
                             f"factors {dict(self.unroll)}")
        if any(first % lanes for (first, _), lanes in zip(self.routes, self.lanes_out)):
            raise ValueError(f"split: lanes {self.lanes_out} do not divide the first channels of its outputs "
                             f"{[first for first, _ in self.routes]}")
        if not static_banks(self.kind, self.factor("k"), self.lanes_in[0]):
            raise ValueError(f"{self.kind}: unroll k={self.factor('k')} would read its input vector at banks "
                             f"chosen at run time (k must equal the {self.lanes_in[0]} input lanes)")


@dataclass(frozen=True)
class Access:
    """Tokens moved at iterations first, first + stride, ... of a position (`count` of them)."""

    first: int = 0
    stride: int = 1
    count: int = 0

    def offsets(self) -> range:
        return range(self.first, self.first + self.stride * self.count, self.stride)

    @property
    def last(self) -> int:
        return self.first + self.stride * (self.count - 1)


@dataclass(frozen=True)
class Position:
    iterations: int
    reads: tuple[Access, ...]   # per input
    writes: tuple[Access, ...]  # per output


@dataclass(frozen=True)
class Loop:
    """A process's pipelined loop: its positions in order (run-length: (repeat, position))."""

    depth: int
    runs: tuple[tuple[int, Position], ...]

    @cached_property
    def iterations(self) -> int:
        return sum(n * p.iterations for n, p in self.runs)

    @cached_property
    def cycles(self) -> int:
        """Cycles of one image with every token there when the loop wants it."""
        return self.iterations + self.depth

    @cached_property
    def fill(self) -> int:
        """Cycles from the loop's start to its first output token."""
        done = 0
        for n, p in self.runs:
            writes = [a.first for a in p.writes if a.count]
            if writes:
                return done + min(writes) + 1 + self.depth
            done += n * p.iterations
        return self.cycles

    @cached_property
    def drain(self) -> int:
        """Cycles from its last input token to its last output token."""
        last_read = last_write = None
        done = 0
        for n, p in self.runs:
            reads = [a.last for a in p.reads if a.count]
            writes = [a.last for a in p.writes if a.count]
            if reads:
                last_read = done + (n - 1) * p.iterations + max(reads)
            if writes:
                last_write = done + (n - 1) * p.iterations + max(writes)
            done += n * p.iterations
        return max(last_write - last_read, 0) + self.depth

    def token_iterations(self, side: str, index: int, tokens: list[int]) -> list[int]:
        """The iteration in which each of `tokens` (ascending token numbers of one image) of input or
        output `index` moves (`side` "reads" or "writes")."""
        result = []
        wanted = iter(tokens)
        token = next(wanted, None)
        moved = done = 0  # tokens before the run, iterations before the run
        for n, p in self.runs:
            access = getattr(p, side)[index]
            while token is not None and token < moved + n * access.count:
                position, nth = divmod(token - moved, access.count)
                result.append(done + position * p.iterations + access.first + nth * access.stride)
                token = next(wanted, None)
            moved += n * access.count
            done += n * p.iterations
        if token is not None:
            raise ValueError(f"token {token} of {side} {index}: the loop moves only {moved}")
        return result


def loop_of(spec: KernelSpec) -> Loop:
    spec.check()
    if spec.kind in WINDOW_KINDS or spec.kind == "pointwise":
        runs = _window_positions(spec)
    elif spec.kind == "dense":
        runs = _dense_positions(spec)
    elif spec.kind in ("global_avgpool", "global_maxpool"):
        runs = _global_pool_positions(spec)
    elif spec.kind == "upsample":
        runs = _upsample_positions(spec)
    elif spec.kind == "pad":
        runs = _pad_positions(spec)
    elif spec.kind == "broadcast":
        runs = _broadcast_positions(spec)
    elif spec.kind == "permute":
        runs = _permute_positions(spec)
    else:
        runs = _elementwise_positions(spec)
    return Loop(spec.depth, tuple(_merged(runs)))


def window_emits(w: Window, kind: str, row: int, col: int) -> bool:
    """Whether the window whose last element arrives at (row, col) is an output position (padded
    coordinates for a window, input coordinates for a 1x1 conv)."""
    if kind == "pointwise":
        top, left = row, col
    else:
        top, left = row - (w.kernel[0] - 1) * w.dilation[0], col - (w.kernel[1] - 1) * w.dilation[1]
    return (top >= 0 and left >= 0 and top % w.stride[0] == 0 and left % w.stride[1] == 0
            and top // w.stride[0] < w.out_height and left // w.stride[1] < w.out_width)


def _window_positions(spec: KernelSpec):
    tokens_in, tokens_out, fold = spec.tokens_in[0], spec.tokens_out[0], spec.fold
    tile = spec.reduction_tiles
    computing = Access(tile - 1, tile, tokens_out)

    def position(real: bool, emits_before: bool) -> Position:
        reads = tokens_in if real else 0
        iterations = max(reads, fold if emits_before else 0, 1)
        spacing = iterations // reads if reads else 1  # reads spread over the position, as a producer writes
        return Position(iterations, (Access(0, spacing, reads),), (computing if emits_before else Access(),))

    positions = {(real, emits): position(real, emits) for real in (False, True) for emits in (False, True)}
    for count, real, emits_before in _position_kinds(spec.window, spec.kind):
        yield count, positions[real, emits_before]


@functools.lru_cache(maxsize=256)
def _position_kinds(w: Window, kind: str) -> tuple[tuple[int, bool, bool], ...]:
    """The positions of a window loop in order, run-length: (count, a pixel arrives, the previous position
    ends an output window).

    Counted by row class x column class, never position by position: whether position (row, col) holds
    a pixel and whether it ends an output window are each a row condition and a column condition (see
    `_window_axis`), so a row's runs depend only on its row's two conditions and whether the row before
    ended on an output window; each such row class's runs come from the columns' runs once. The result
    has as many runs as the rows' runs together (O(rows) for stride 1), not one item per position."""
    pointwise = kind == "pointwise"
    rows, cols = (w.in_height, w.in_width) if pointwise else (w.padded_height, w.padded_width)
    row_real, row_emits = _window_axis(w, kind, 0, rows)
    col_real, col_emits = _window_axis(w, kind, 1, cols)
    # the columns 1.. of a row: (count, a pixel arrives in the column, the column before ends a window)
    col_runs: list[list] = []
    for col in range(1, cols):
        key = (col_real(col), col_emits(col - 1))
        if col_runs and col_runs[-1][1:] == list(key):
            col_runs[-1][0] += 1
        else:
            col_runs.append([1, *key])
    last_col_emits = col_emits(cols - 1)
    row_runs: dict[tuple[bool, bool, bool], tuple[tuple[int, bool, bool], ...]] = {}
    kinds: list[tuple[int, bool, bool]] = []

    def extend(runs) -> None:
        for count, real, emits_before in runs:
            if kinds and kinds[-1][1] == real and kinds[-1][2] == emits_before:
                kinds[-1] = (kinds[-1][0] + count, real, emits_before)
            else:
                kinds.append((count, real, emits_before))

    emits_before = False  # the last position of the row before ends a window
    for row in range(rows):
        real, emits = row_real(row), row_emits(row)
        key = (real, emits, emits_before)
        if key not in row_runs:
            runs = [(1, real and col_real(0), emits_before)]
            for count, col_is_real, col_emitted in col_runs:
                runs.append((count, real and col_is_real, emits and col_emitted))
            merged: list[tuple[int, bool, bool]] = []
            for run in runs:
                if merged and merged[-1][1:] == run[1:]:
                    merged[-1] = (merged[-1][0] + run[0], *run[1:])
                else:
                    merged.append(run)
            row_runs[key] = tuple(merged)
        extend(row_runs[key])
        emits_before = emits and last_col_emits
    extend(((1, False, emits_before),))  # the trailing position after the last input
    return tuple(kinds)


def _window_axis(w: Window, kind: str, axis: int, size: int):
    """Of one axis (0 rows, 1 columns) of a window loop's positions: whether index i (< size) lies in the
    input map, and whether it ends an output window along this axis (`window_emits` is the conjunction
    of the two axes')."""
    if kind == "pointwise":
        lead, pad = 0, 0
    else:
        lead, pad = (w.kernel[axis] - 1) * w.dilation[axis], w.pads[axis]
    extent = (w.in_height, w.in_width)[axis]
    stride, outs = w.stride[axis], (w.out_height, w.out_width)[axis]

    def real(i: int) -> bool:
        return 0 <= i - pad < extent

    def emits(i: int) -> bool:
        start = i - lead
        return start >= 0 and start % stride == 0 and start // stride < outs

    return real, emits


def _dense_positions(spec: KernelSpec):
    tokens_in = spec.tokens_in[0]
    tile = spec.reduction_tiles
    yield Position(tokens_in + spec.fold, (Access(0, 1, tokens_in),),
                   (Access(tokens_in + tile - 1, tile, spec.tokens_out[0]),))


def _global_pool_positions(spec: KernelSpec):
    c, h, w = spec.inputs[0]
    tokens_in, tokens_out = spec.tokens_in[0], spec.tokens_out[0]
    for _ in range(h * w):
        yield Position(tokens_in, (Access(0, 1, tokens_in),), (Access(),))
    yield Position(tokens_out, (Access(),), (Access(0, 1, tokens_out),))


def _upsample_positions(spec: KernelSpec):
    """One output pixel per position, a token per iteration: the first copy of an input pixel in the first
    copy of its row reads the pixel's tokens as it writes them; its other copies come from the pixel and
    row buffers."""
    (_, h, w), (_, out_h, out_w) = spec.inputs[0], spec.outputs[0]
    rows, cols = out_h // h, out_w // w
    tokens = spec.tokens_out[0]
    arriving = Position(tokens, (Access(0, 1, tokens),), (Access(0, 1, tokens),))
    repeated = Position(tokens, (Access(),), (Access(0, 1, tokens),))
    for _ in range(h):
        for _ in range(w):
            yield arriving
            if cols > 1:
                yield cols - 1, repeated
        if rows > 1:
            yield (rows - 1) * out_w, repeated


def _pad_positions(spec: KernelSpec):
    """One padded position per output pixel, a token per iteration: an input pixel's tokens are read as
    they are written, a border pixel's are the pad value."""
    w, tokens = spec.window, spec.tokens_out[0]
    inside = Position(tokens, (Access(0, 1, tokens),), (Access(0, 1, tokens),))
    border = Position(tokens, (Access(),), (Access(0, 1, tokens),))
    top, left, bottom, right = w.pads
    if top:
        yield top * w.padded_width, border
    for _ in range(w.in_height):
        if left:
            yield left, border
        yield w.in_width, inside
        if right:
            yield right, border
    if bottom:
        yield bottom * w.padded_width, border


def _broadcast_positions(spec: KernelSpec):
    """The vector's tokens into an array, then one map token in and one out per iteration, the map
    token t of every pixel combined with the vector's token t."""
    v = spec.vector_input
    _, h, w = spec.outputs[0]
    reads = [Access(), Access()]
    reads[v] = Access(0, 1, spec.tokens_in[v])
    yield Position(spec.tokens_in[v], tuple(reads), (Access(),))
    reads = [Access(), Access()]
    reads[1 - v] = Access(0, 1, spec.tokens_in[1 - v])
    for _ in range(h * w):
        yield Position(spec.tokens_out[0], tuple(reads), (Access(0, 1, spec.tokens_out[0]),))


def _permute_positions(spec: KernelSpec):
    """A pixel's tokens are read into one of two pixel registers while the previous pixel's permuted tokens
    are written from the other; one trailing position writes the last pixel."""
    _, h, w = spec.inputs[0]
    tokens_in, tokens_out = spec.tokens_in[0], spec.tokens_out[0]
    reads, writes = Access(0, 1, tokens_in), Access(0, 1, tokens_out)
    yield Position(tokens_in, (reads,), (Access(),))
    if h * w > 1:
        yield h * w - 1, Position(max(tokens_in, tokens_out), (reads,), (writes,))
    yield Position(tokens_out, (Access(),), (writes,))


def _elementwise_positions(spec: KernelSpec):
    """add, mul, rescale, table, split: one token of every input and output per iteration (a split output
    carrying a range of the channels: the tokens of its range); concat: the inputs' tokens one after the
    other, each written on at once."""
    _, h, w = spec.outputs[0]
    if spec.kind == "concat":
        offsets = [0]
        for t in spec.tokens_in:
            offsets.append(offsets[-1] + t)
        reads = tuple(Access(o, 1, t) for o, t in zip(offsets, spec.tokens_in))
    else:
        reads = tuple(Access(0, 1, t) for t in spec.tokens_in)
    firsts = [first // lanes for (first, _), lanes in zip(spec.routes, spec.lanes_out)] or [0] * len(spec.tokens_out)
    writes = tuple(Access(first, 1, t) for first, t in zip(firsts, spec.tokens_out))
    for _ in range(h * w):
        yield Position(max(spec.tokens_in + spec.tokens_out), reads, writes)


def _merged(positions):
    """Runs of equal positions; an item may already be a run (count, position)."""
    run, count = None, 0
    for item in positions:
        n, p = item if isinstance(item, tuple) else (1, item)
        if p is run or p == run:
            count += n
            continue
        if run is not None:
            yield count, run
        run, count = p, n
    if run is not None:
        yield count, run


def kernel_spec(graph, process, unroll, lanes_in, lanes_out) -> KernelSpec:
    """The spec of a process of a `StreamGraph` under a schedule."""
    shape = lambda name: (graph.channels[name].channels, graph.channels[name].height, graph.channels[name].width)
    return KernelSpec(process.kind, tuple(shape(c) for c in process.inputs), tuple(shape(c) for c in process.outputs),
                      tuple(unroll), tuple(lanes_in), tuple(lanes_out), process.window, process.routes)


def spec_from_report(node: dict, channels: dict[str, dict]) -> KernelSpec:
    """The spec of a process from report.json (`node` from "nodes", `channels` by name from "channels")."""
    window = node.get("window")
    if window is not None:
        window = Window(**{k: tuple(v) if isinstance(v, list) else v for k, v in window.items()})
    schedule = node["schedule"]
    return KernelSpec(node["kind"], tuple(tuple(channels[c]["shape"]) for c in node["inputs"]),
                      tuple(tuple(channels[c]["shape"]) for c in node["outputs"]),
                      tuple(schedule.get("unroll", {}).items()),
                      tuple(channels[c]["lanes"] for c in node["inputs"]),
                      tuple(channels[c]["lanes"] for c in node["outputs"]), window,
                      tuple(tuple(route) for route in node.get("routes", ())))


def validate_schedule(graph: StreamGraph, schedule: Schedule) -> list[str]:
    """Problems that make a schedule invalid for `graph` (empty when valid)."""
    problems = []
    for process in graph.processes:
        trips = graph.trip_counts(process)
        for loop, factor in schedule.of(process.name).unroll:
            if loop not in trips:
                problems.append(f"{process.name}: loop '{loop}' cannot be unrolled (choose from {sorted(trips)})")
            elif factor < 1 or trips[loop] % factor:
                problems.append(f"{process.name}: unroll {loop}={factor} does not divide its trip count "
                                f"{trips[loop]}")
    if not problems:
        for process in graph.processes:
            sched = schedule.of(process.name)
            spec = kernel_spec(graph, process, sched.unroll,
                               [schedule.lanes_of(c) for c in process.inputs],
                               [schedule.lanes_of(c) for c in process.outputs])
            try:
                spec.check()
            except ValueError as error:
                problems.append(f"{process.name}: {error}")
            choices = multiplier_choices(process.kind, dict(sched.unroll))
            if sched.multipliers not in choices:
                problems.append(f"{process.name}: multipliers '{sched.multipliers}' (choose from {', '.join(choices)})")
    for name, channel in graph.channels.items():
        lanes = schedule.lanes_of(name)
        if lanes < 1 or channel.channels % lanes:
            problems.append(f"channel {name}: {lanes} lanes do not divide its {channel.channels} channels")
        if schedule.depth_of(name) < 1:
            problems.append(f"channel {name}: FIFO depth must be at least 1")
    return problems
