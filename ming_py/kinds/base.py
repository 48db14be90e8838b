"""What a process kind is: every aspect the back end asks of it, and the registry it is asked through.

A process kind (`ProcessKind`) holds everything about one sort of streaming process, in the manner of
FINN's one `HWCustomOp` per op: the loops it may unroll and their trip counts, the lane options a
schedule may give it, its pipeline depth and multipliers, the positions of its loop (what the emitted
C++ runs, `ilp/cost.py` charges and `ming simulate` steps through), its arrays, its cost beyond them,
and what its C++ template needs. `register` refuses a kind that leaves an aspect undefined, so adding a
kind is its module, its template (emit/templates/process/) and the import in `ming_py/kinds/__init__.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ming_py.dataflow import KindParams, Window, divisors
from ming_py.loops import Access, Position

from .streamed import MapBands, StreamedLoop, streamed_counters, streamed_positions, streamed_problem

# Pipeline stages of the requantization datapaths that end most loops: the lean datapath (abs and clamp 1,
# the DSP product 3, fraction compare 1, sign, zero point and saturation 1) and Mul's float32 emulation
# (`ming::mul_requant`: the 8 x 8-bit product 1, the 17 x 24-bit DSP product 3, the two float32 roundings
# (mask and add) 1 each, the final rounding and saturation 1).
REQUANT_STAGES = 6
MUL_STAGES = 7
DEEPEST_TERMS = 64 * 64  # the most products (or window elements) a lane sums under any schedule


@dataclass(frozen=True)
class ProcessSpec:
    """What decides a process's loop: its kind, geometry and schedule."""

    kind: str
    inputs: tuple[tuple[int, int, int], ...]  # (channels, height, width) of each input stream
    outputs: tuple[tuple[int, int, int], ...]
    unroll: tuple[tuple[str, int], ...]
    lanes_in: tuple[int, ...]
    lanes_out: tuple[int, ...]
    window: Window | None = None
    requantizers: int = 0  # requantizers serving the output lanes in turn (`shared_requantizers`); 0: one per lane
    params: KindParams | None = None  # the parameters of its kind (`ProcessKind.params_type`), as its `Process` has them
    ddr_weights: bool = False  # its weights streamed from DDR a tile at a time (`ming_py.weights_ddr`)
    bands: int = 1  # streamed: bands of rows its map is taken in, its weights fetched once per band (`StreamedLoop`)

    @property
    def process_kind(self) -> ProcessKind:
        return kind_of(self.kind)

    def factor(self, loop: str) -> int:
        return dict(self.unroll).get(loop) or self.process_kind.fixed_unroll(self.window).get(loop, 1)

    @property
    def tokens_in(self) -> tuple[int, ...]:
        """Tokens of one input pixel (of the whole input vector for dense), per input."""
        return self.process_kind.tokens_in(self)

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
        return self.process_kind.macs(self)

    @property
    def reduction_tiles(self) -> int:
        """Iterations of one output tile's reduction."""
        return self.process_kind.reduction_tiles(self)

    @property
    def fold(self) -> int:
        """Iterations that compute one output position (all its output tiles)."""
        return self.reduction_tiles * self.tokens_out[0]

    @property
    def requant_lanes(self) -> int:
        """Output lanes requantized per iteration: one requantizer each."""
        return self.requantizers or self.lanes_out[0]

    @property
    def requant_steps(self) -> int:
        """Iterations the requantizers take for one output token: 1, or the turns of shared requantizers, which
        take the lanes of an output token's latched accumulators in the iterations after its reduction ends."""
        return self.lanes_out[0] // self.requant_lanes

    @property
    def requant_delay(self) -> int:
        """Iterations from the end of an output token's reduction to its write (`Loop.write_delay`): shared
        requantizers take the latched accumulators in the `requant_steps` iterations after it (the emitted loop
        runs that many iterations more, which read and compute nothing)."""
        return self.requant_steps if self.requant_steps > 1 else 0

    @property
    def map_bands(self) -> MapBands:
        """The input rows of its bands, where its weights stream from DDR (`ming_py.kinds.streamed.MapBands`)."""
        return MapBands.of(self)

    @property
    def depth(self) -> int:
        """Pipeline depth of the loop: from an iteration's start to its output write."""
        kind = self.process_kind
        return kind.pipeline_depth(kind.summed_terms(self))

    def check(self) -> None:
        """The lane ties the loop relies on (the ILP's candidates always satisfy them)."""
        kind = self.process_kind
        if not kind.lanes_match(self):
            raise ValueError(f"{self.kind}: lanes {self.lanes_in} -> {self.lanes_out} do not match the unroll "
                             f"factors {dict(self.unroll)}")
        problem = kind.lanes_problem(self)
        if problem:
            raise ValueError(problem)
        if self.requantizers and self.requantizers not in shared_requantizers(self):
            raise ValueError(f"{self.kind}: {self.requantizers} requantizers cannot serve its {self.lanes_out[0]} output "
                             f"lanes in turn (choose from {', '.join(map(str, shared_requantizers(self))) or 'none'})")
        if self.ddr_weights:
            problem = streamed_problem(self)
            if problem:
                raise ValueError(problem)
        elif self.bands != 1:
            raise ValueError(f"{self.kind}: bands={self.bands} serve only weights streamed from DDR")
        if not kind.static_banks(self.factor("k"), self.lanes_in[0]):
            raise ValueError(f"{self.kind}: unroll k={self.factor('k')} would read its input vector at banks "
                             f"chosen at run time (k must equal the {self.lanes_in[0]} input lanes)")


class ProcessKind:
    """One kind of streaming process. Subclasses define every attribute and method in `ASPECTS`; family
    bases define the ones their kinds share (`Unweighted` and `DataMovement` below; `SlidingWindow` and
    `Pool` in window.py, `GlobalPool`, `Eltwise`, `TableKind`)."""

    # --- what it is ---
    name: str = None  # the `Process.kind` it serves
    unrollable: tuple[str, ...] = None  # the loops a schedule may unroll (name -> what it counts in `trip_counts`)
    needs_window: bool = None  # its process carries a `Window` (its geometry)
    line_buffer: bool = None  # it keeps input rows in a line buffer (BRAM or URAM)
    mac: bool = None  # it multiplies weights in MAC lanes (DSPs or fabric) and requantizes their sums
    shares_requantizer: bool = None  # its template lets fewer requantizers than output lanes take them in turn
    # --- emission: emit/templates/process/<template>.cpp.j2 and the label of its one pipelined loop ---
    template: str = None
    pipeline_label: str = None
    # the template of its loop with weights streamed from DDR (`ming_py.weights_ddr`, same label), or None
    streamed_template: str | None = None
    # its streamed loop buffers its input and output maps (`ming_py.kinds.window.streamed_map_buffers`), in the
    # memory its schedule's `line_buffer` names
    streamed_maps: bool = False
    # the frozen dataclass of its own parameters (`Process.params`), with `to_json()` (its keys of a report.json
    # node) and `from_json(node)`; None: it has none
    params_type: type | None = None

    def trip_counts(self, window: Window | None, ins, outs) -> dict[str, int]:
        """Trip count of each unrollable loop (`ins`/`outs`: the process's `Channel`s)."""
        raise NotImplementedError

    def lane_options(self, unroll: dict[str, int], ins, outs, params, limit: int):
        """(lanes in, lanes out) a schedule with `unroll` may give it: the parallelism it consumes and
        produces per cycle (no more than `limit` lanes); `params`: its process's (`params_type`)."""
        raise NotImplementedError

    def lanes_match(self, spec: ProcessSpec) -> bool:
        """Whether the spec's lanes are one of `lane_options` for its unroll factors."""
        raise NotImplementedError

    def lanes_problem(self, spec: ProcessSpec) -> str:
        """What its parameters refuse of the spec's lanes ("": nothing)."""
        return ""

    def multiplier_choices(self, unroll: dict[str, int]) -> tuple[str, ...]:
        """Where its int8 products may be computed (`ming_py.kinds.window.MULTIPLIERS`)."""
        raise NotImplementedError

    def static_banks(self, unroll_k: int, lanes_in: int) -> bool:
        """Whether every buffer read of the loop goes to a bank known at compile time."""
        raise NotImplementedError

    def summed_terms(self, spec: ProcessSpec) -> int:
        """Products (or window elements) one output lane sums per iteration."""
        raise NotImplementedError

    def pipeline_depth(self, terms: int) -> int:
        """Cycles from an iteration's start to its output write, summing `terms` per lane."""
        raise NotImplementedError

    def tokens_in(self, spec: ProcessSpec) -> tuple[int, ...]:
        raise NotImplementedError

    def macs(self, spec: ProcessSpec) -> int:
        raise NotImplementedError

    def macs_per_image(self, window: Window | None, trips: dict[str, int]) -> int:
        """Multiply-accumulates of one image."""
        raise NotImplementedError

    def reduction_tiles(self, spec: ProcessSpec) -> int:
        raise NotImplementedError

    def positions(self, spec: ProcessSpec):
        """The positions of its loop in order: `Position`s or runs (count, Position) (`ming_py.loops`)."""
        raise NotImplementedError

    def arrays(self, spec: ProcessSpec, epilogue, line_buffer_memory: str, constants: dict) -> dict:
        """Its arrays by role in declaration order (`ming_py.array_layout.ArrayPlan`), with `constants`
        (its epilogue's per-channel arrays, `ming_py.storage.epilogue_arrays`) where they belong."""
        raise NotImplementedError

    def logic_lut(self, spec: ProcessSpec) -> int:
        """LUTs of its own datapath beyond control, MAC lanes, requantization and arrays."""
        raise NotImplementedError

    def logic_dsp(self, spec: ProcessSpec) -> int:
        """DSPs of its own datapath beyond MAC lanes and requantization."""
        return 0

    def constant_tables(self, spec: ProcessSpec, process) -> dict:
        """Its own constant tables beyond weights and epilogue: role (a ROM of `arrays`) -> (C type, values,
        comment), declared in the weights header as `<process>_<role>`."""
        return {}

    def fixed_unroll(self, window: Window | None) -> dict[str, int]:
        """Loops it always unrolls by a set factor: not among its trip counts, not the schedule's to choose."""
        return {}

    def counters(self, spec: ProcessSpec, epilogue) -> dict[str, int]:
        """The greatest value of each `ming::Counter` register its template declares before its loop (the loop
        counter and the shared requantizers' excepted: `control_counters`), by the register's name there, in
        declaration order: the control the cost model sizes by their widths. A counter of greatest value 0 is the
        constant 0 in the code (ming_widths.h `ming::Zero`), no register, and charged nothing."""
        raise NotImplementedError

    def view_values(self, spec: ProcessSpec, process, lanes_in, lanes_out):
        """The numbers its template needs beyond every process's (`emit.hls.ProcessView.kind_values`): a frozen
        dataclass of its own, or None."""
        raise NotImplementedError

    def describe(self, process, ins, outs, shapes: str) -> str:
        """The comment above its C++ function (`shapes`: "C x H x W + ... -> C x H x W")."""
        raise NotImplementedError

    def weight_rows(self, weights, spec: ProcessSpec):
        """Its weights (`Process.weights`) as [fold step][lane]: the row a fold step reads holds every
        weight its MAC lanes multiply, in the loop's order."""
        raise NotImplementedError

    def weights_layout(self, process) -> str:
        """The index order of `Process.weights`, for the comment of its constant array."""
        raise NotImplementedError

    # --- weights streamed from DDR (`ming_py.weights_ddr`), for a kind with a `streamed_template` ---
    def streamed(self, spec: ProcessSpec) -> StreamedLoop:
        """The phases of its loop with weights streamed from DDR (`ming_py.kinds.streamed`)."""
        raise NotImplementedError(f"{self.name} cannot stream its weights from DDR")

    def streamed_tile_writes(self, spec: ProcessSpec) -> Access:
        """The output tokens a tile's phase of its streamed loop writes (none: it fills its output map buffer)."""
        return Access()

    def streamed_registers(self, spec: ProcessSpec) -> dict[str, int]:
        """Its streamed template's counters beyond the phases' (`streamed_counters`), as `counters` gives them."""
        raise NotImplementedError(f"{self.name} cannot stream its weights from DDR")

    # --- the loop a spec runs: the streamed one where its weights come from DDR, `positions` etc. otherwise ---
    def loop_positions(self, spec: ProcessSpec):
        if spec.ddr_weights:
            return streamed_positions(self.streamed(spec), self.streamed_tile_writes(spec))
        return self.positions(spec)

    def loop_counters(self, spec: ProcessSpec, epilogue) -> dict[str, int]:
        if spec.ddr_weights:
            return streamed_counters(self.streamed(spec)) | self.streamed_registers(spec)
        return self.counters(spec, epilogue)

    def template_values(self, spec: ProcessSpec, process, lanes_in, lanes_out):
        """The numbers its template needs beyond every process's (`emit.hls.ProcessView.kind_values`)."""
        if spec.ddr_weights:
            return self.streamed(spec)
        return self.view_values(spec, process, lanes_in, lanes_out)

    @property
    def templates(self) -> tuple[str, ...]:
        """Every template of its loops: weights on chip, and streamed from DDR where it can."""
        return (self.template,) + ((self.streamed_template,) if self.streamed_template else ())

    @property
    def depth_bound(self) -> int:
        """The deepest its loop gets under any schedule."""
        return self.pipeline_depth(DEEPEST_TERMS)


# every attribute and method above but `depth_bound`, which follows from `pipeline_depth`, and the defaults
# `params_type`, `lanes_problem`, `logic_dsp`, `constant_tables` and `fixed_unroll`
ASPECTS = ("name", "unrollable", "needs_window", "line_buffer", "mac", "shares_requantizer", "template", "pipeline_label", "trip_counts",
           "lane_options", "lanes_match", "multiplier_choices", "static_banks", "summed_terms", "pipeline_depth",
           "tokens_in", "macs", "macs_per_image", "reduction_tiles", "positions", "arrays", "logic_lut", "counters",
           "view_values", "describe", "weight_rows", "weights_layout")

# what a kind with a `streamed_template` defines besides
STREAMED_ASPECTS = ("streamed", "streamed_registers")


def _undefined(cls: type, aspect: str) -> bool:
    return getattr(cls, aspect) is getattr(ProcessKind, aspect)


class Unweighted(ProcessKind):
    """The aspects of a kind without weights: no MAC lanes, no product to place, no weight rows."""

    mac = False
    shares_requantizer = False

    def multiplier_choices(self, unroll):
        return ("dsp",)

    def macs(self, spec):
        return 0

    def macs_per_image(self, window, trips):
        return 0

    def logic_lut(self, spec):
        return 0

    def weight_rows(self, weights, spec):
        raise ValueError(f"a {self.name} process has no weights")

    def weights_layout(self, process):
        raise ValueError(f"a {self.name} process has no weights")


class DataMovement(Unweighted):
    """A kind that moves or maps values without a reduction: nothing to unroll beyond its lanes, one lane
    count on every stream, int8 lanes with no product (a two-stage loop: read, write), no weights."""

    unrollable = ()
    needs_window = False
    line_buffer = False

    def trip_counts(self, window, ins, outs):
        return {}

    def lanes_match(self, spec):
        return len(set(spec.lanes_in + spec.lanes_out)) == 1

    def static_banks(self, unroll_k, lanes_in):
        return True

    def summed_terms(self, spec):
        return 1

    def pipeline_depth(self, terms):
        return 2

    def tokens_in(self, spec):
        return per_pixel_tokens(spec)

    def reduction_tiles(self, spec):
        raise ValueError(f"a {self.name} process has no reduction")

    def arrays(self, spec, epilogue, line_buffer_memory, constants):
        return dict(constants)

    def counters(self, spec, epilogue):
        return {"t": spec.tokens_in[0] - 1}  # the token's place in its pixel

    def view_values(self, spec, process, lanes_in, lanes_out):
        return None

    def describe(self, process, ins, outs, shapes):
        return f"{process.name} ({process.source}): {self.name}: {shapes}"


def per_pixel_tokens(spec: ProcessSpec) -> tuple[int, ...]:
    """Tokens of one pixel of each input."""
    return tuple(c // lanes for (c, _, _), lanes in zip(spec.inputs, spec.lanes_in))


def one_lane_count(ins, outs, limit: int, firsts: tuple[int, ...] = ()):
    """Lane options of a process with one lane count throughout (`firsts`: channels a token must start at, a
    split's routes' first channels)."""
    common = math.gcd(*[c.channels for c in ins + outs], *firsts)
    for lanes in divisors(common):
        if lanes <= limit:
            yield (lanes,) * len(ins), (lanes,) * len(outs)


def pixel_positions(spec: ProcessSpec, reads, writes):
    """A loop of one position per pixel that moves `reads` and `writes` (an `Access` per input and output)
    and takes as many iterations as its most tokens."""
    _, h, w = spec.outputs[0]
    yield h * w, Position(max(spec.tokens_in + spec.tokens_out), tuple(reads), tuple(writes))


def shared_requantizers(spec: ProcessSpec) -> tuple[int, ...]:
    """The requantizer counts below one per lane that may serve a MAC process's output lanes in turn: each
    takes `lanes / count` consecutive iterations per output token, which must fit between two ends of a
    reduction (`reduction_tiles` iterations apart at the closest), so that latched accumulators are taken
    before the next token's overwrite them."""
    if not spec.process_kind.shares_requantizer:
        return ()
    lanes, spacing = spec.lanes_out[0], spec.reduction_tiles
    return tuple(r for r in divisors(lanes) if r < lanes and lanes // r <= spacing)


def control_counters(spec: ProcessSpec, epilogue, trip_count: int) -> tuple[int, ...]:
    """The greatest value of every counter register of a process's loop: the loop counter (0..trip count), its
    kind's (`ProcessKind.loop_counters`) and the shared requantizers' turn and constant row."""
    shared = (spec.requant_steps - 1, spec.tokens_out[0] * spec.requant_steps - 1) if spec.requant_steps > 1 else ()
    return (trip_count,) + tuple(spec.process_kind.loop_counters(spec, epilogue).values()) + shared


def adder_tree(terms: int) -> int:
    """Stages of an adder tree over `terms` values."""
    return math.ceil(math.log2(max(terms, 1)))


# ---- the registry -----------------------------------------------------------------

_REGISTRY: dict[str, ProcessKind] = {}


def register(cls: type[ProcessKind]) -> type[ProcessKind]:
    """Class decorator: one instance of `cls` serves processes of kind `cls.name`."""
    missing = [aspect for aspect in ASPECTS if _undefined(cls, aspect)]
    if cls.streamed_template:
        missing += [aspect for aspect in STREAMED_ASPECTS if _undefined(cls, aspect)]
    if missing:
        raise TypeError(f"process kind {cls.__name__} does not define {', '.join(missing)}")
    if cls.params_type is not None and not _is_params_type(cls.params_type):
        raise TypeError(f"process kind {cls.__name__}: its params_type {cls.params_type.__name__} is not a frozen "
                        "dataclass of ming_py.dataflow.KindParams with to_json() and from_json(node)")
    if cls.name in _REGISTRY:
        raise TypeError(f"process kind {cls.name!r} is registered twice")
    _REGISTRY[cls.name] = cls()
    return cls


def _is_params_type(cls: type) -> bool:
    frozen = issubclass(cls, KindParams) and cls.__dataclass_params__.frozen
    return frozen and callable(getattr(cls, "to_json", None)) and callable(getattr(cls, "from_json", None))


def kind_of(name: str) -> ProcessKind:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown process kind {name!r}") from None


def registered() -> dict[str, ProcessKind]:
    return dict(_REGISTRY)
