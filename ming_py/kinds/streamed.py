"""The loop of a process whose weights stream from DDR (`ming_py.weights_ddr`): the whole input taken, then per
output-channel tile a compute over every output pixel while the next tile's weights arrive, then the buffered outputs
written; the kinds that stream (pointwise, conv, dense) build their positions, counters and template values from
it. A pointwise or conv process may run that loop once per band of output rows (`bands`), its map buffers a band's
(a conv's input map a ring of the rows a band's windows read, `MapBands`) and its weights fetched once per band."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ming_py.loops import Access, Position

DDR_WORD_BYTES = 16  # a 128-bit word of the m_axi port (the KV260's HP ports are 128 bits wide, AMD UG1085 ch. 35)
# Cycles from a burst's read request to its first word: the default `latency` of Vitis HLS's m_axi interface
# (AMD UG1399, "INTERFACE pragma: latency"), the figure the emitted pragma states.
DDR_BURST_LATENCY = 64
# Iterations every gap of a streamed loop keeps beyond the pipeline depth ming assumes (`settle`, the spec's depth):
# the loop's buffers carry no dependence Vitis HLS keeps (macros.j2 `streamed_dependences`), so a value is read
# right only if Vitis HLS schedules the loop no deeper than its least gap; the margin absorbs a schedule a little
# deeper than ming's estimate, and run_hls.tcl stops where csynth's depth exceeds `StreamedLoop.allowed_depth`.
DEPTH_MARGIN = 2
STREAMED_KINDS = ("pointwise", "conv", "dense")


def words_per_row(lanes: int) -> int:
    return math.ceil(lanes / DDR_WORD_BYTES)


def tile_words(spec) -> int:
    """128-bit words of one output tile's weights: its reduction tiles' rows, each padded to whole words."""
    return spec.reduction_tiles * words_per_row(spec.macs)


def streamed_problem(spec) -> str:
    """What keeps a spec from streaming its weights from DDR ("": nothing)."""
    if spec.kind not in STREAMED_KINDS:
        return f"a {spec.kind} process cannot stream its weights from DDR (only {', '.join(STREAMED_KINDS)})"
    if spec.requantizers:
        return "weights from DDR take one requantizer per output lane (set requantizers=0)"
    w = spec.window
    if spec.kind == "pointwise" and (w.groups > 1 or w.stride != (1, 1)):
        return "weights from DDR serve a 1x1 conv of one group and stride 1"
    if spec.kind == "conv" and (w.groups > 1 or w.dilation != (1, 1) or spec.factor("k") > 1):
        return "weights from DDR serve a conv of one group and dilation 1, its window not unrolled (unroll k=1)"
    return bands_problem(spec)


def bands_problem(spec) -> str:
    """What keeps a streamed spec from taking its map in `spec.bands` bands of output rows ("": nothing)."""
    if spec.bands == 1:
        return ""
    if spec.kind not in ("pointwise", "conv"):
        return f"a {spec.kind} process streaming its weights from DDR takes its whole input (bands=1)"
    height = spec.outputs[0][1]
    if spec.bands < 1 or height % spec.bands:
        return f"bands={spec.bands} does not divide the {height} output rows"
    if spec.kind == "conv":
        w = spec.window
        if w.stride[0] > w.kernel[0]:
            return f"a conv whose stride ({w.stride[0]}) exceeds its window ({w.kernel[0]} rows) takes its whole map"
        bands = MapBands.of(spec)
        if bands.ring >= bands.in_rows:
            return f"bands={spec.bands}: a band's windows' rows fill a ring ({bands.ring} rows) of the whole map"
        taken = bands.taken
        if len(set(taken[1:-1])) > 1:
            return f"bands={spec.bands}: its middle bands would take unequal rows ({', '.join(map(str, taken))})"
    return ""


def band_options(spec) -> tuple[int, ...]:
    """The band counts a streamed spec may take its map in (`StreamedLoop.bands`): for a pointwise or conv process
    the divisors of its output rows that `bands_problem` allows, 1 for the others."""
    if spec.kind not in ("pointwise", "conv"):
        return (1,)
    height = spec.outputs[0][1]
    return tuple(b for b in range(1, height + 1) if height % b == 0 and not bands_problem(replace(spec, bands=b)))


@dataclass(frozen=True)
class MapBands:
    """The input rows of a streamed process taking its map in bands of `out_rows` output rows: band b computes
    output rows [b * out_rows, (b + 1) * out_rows), whose windows read the input rows up to `needed[b]` (the last
    band: every row the map has, those past the last any window reads not kept). The input map is a ring of
    `ring` rows, the most a band's windows read (the whole map in one band): input row r in row r % ring, so a
    band's new rows overwrite only rows no later band reads."""

    in_rows: int
    out_rows: int
    bands: int
    stride: int
    kernel: int
    pad_top: int

    @classmethod
    def of(cls, spec) -> MapBands:
        w = spec.window
        kernel, stride, pad = (w.kernel[0], w.stride[0], w.pads[0]) if spec.kind == "conv" else (1, 1, 0)
        return cls(spec.inputs[0][1], spec.outputs[0][1] // spec.bands, spec.bands, stride, kernel, pad)

    def last_read(self, band: int) -> int:
        """The last input row the windows of `band` read."""
        return min(self.in_rows - 1, ((band + 1) * self.out_rows - 1) * self.stride - self.pad_top + self.kernel - 1)

    @property
    def kept(self) -> int:
        """The last input row any window reads: the rows after it are taken, not kept."""
        return self.last_read(self.bands - 1)

    @property
    def taken(self) -> tuple[int, ...]:
        """Input rows each band takes: those after the previous band's up to its own last (the last band: all)."""
        ends = [self.last_read(b) for b in range(self.bands - 1)] + [self.in_rows - 1]
        return tuple(end - start for start, end in zip([-1] + ends, ends))

    @property
    def ring(self) -> int:
        """Rows of the input map: the whole map in one band, else the power of two that holds a band's windows' rows
        (a ring row is then an input row's low bits, no wrap to compare)."""
        if self.bands == 1:
            return self.in_rows
        return 1 << ((self.out_rows - 1) * self.stride + self.kernel - 1).bit_length()


@dataclass(frozen=True)
class StreamedLoop:
    """The phases of a streamed process's loop, in iterations: take the input (`inputs` tokens) while tile 0's
    weights arrive (`load`), compute each output tile (`compute` iterations, `pixels` times a reduction of `rows`
    steps) while the next tile's arrive (`tile`; the last tile its compute alone: `last`), then write the buffered
    outputs (`outputs` tokens, 0 where the compute writes them; `write`, the first `write_lead` iterations idle).

    The fetch: the fetch process (`fetch_ddr_weights`) is a pipelined copy loop whose m_axi read adapter keeps
    DDR_READ_OUTSTANDING bursts of DDR_MAX_BURST words (`ming_py.weights_ddr`) requested, in flight or buffered,
    whether or not the process takes words: more words than a burst's latency (DDR_BURST_LATENCY cycles) passes at
    a word a cycle. So tile 0's words are taken from iteration DDR_BURST_LATENCY of `load` (`first_word`: the
    latency, charged once, passed), every word there when the process takes it, a word an iteration; a later
    tile's in the first `tile_words` iterations of the previous tile's phase. The stream between them (depth 2)
    needs no more room: the adapter's buffer is the run-ahead. That holds only while (1) Vitis HLS infers bursts
    from the fetch loop (a fetch of single reads waits a read's latency for each word) and (2) a burst's read
    latency is at most (DDR_READ_OUTSTANDING - 1) x DDR_MAX_BURST = 192 cycles, the words of the bursts requested
    before it covering its latency at a word a cycle. run_hls.tcl checks neither (Vitis HLS names inferred bursts
    in its synthesis summary and log, not in the loops' csynth XML the script reads); where either fails, the
    process stalls on the stream: slower than the model, its values unchanged.

    Every buffer of the loop is written and read with no dependence Vitis HLS keeps (macros.j2
    `streamed_dependences`), so every value is read `allowed_depth` (the pipeline depth, `settle`, and
    DEPTH_MARGIN) iterations or more after the iteration that writes it, its write landed by then:
    - weight_tile: row r of a tile is written at iteration (r + 1) * words_per_row - 1 of the phase before the one
      that reads it (after `first_word` in `load`), first read at iteration r of its own phase; the gap, least for
      the last row, is at least `phase - tile_words + rows` for a tile's phase of length `phase` and
      `load - first_word - tile_words + rows` for tile 0, which `fetched` keeps at `allowed_depth` or more. The
      fetch fills the half the compute does not read (`half`, `fill`).
    - the input buffer: every token is taken by iteration `inputs` - 1 of `load` and first read in tile 0's phase.
      Where the compute reads it in the order it arrived (`in_order`: pointwise and dense), the token read at
      iteration j of tile 0's phase was taken at iteration j of `load`: the gap is `load` >= `fetched` >=
      `allowed_depth`. A conv's window reads the map out of that order, so its `load` lasts `allowed_depth` - 1
      iterations past the last token.
    - the output buffer: output pixel p of tile t is written at the iteration ending its reduction,
      (p + 1) * rows - 1 of tile t's phase, and read at iteration `write_lead` + p * tiles + t of the write phase;
      the gap, least for the last tile (an earlier tile's write comes a tile's phase earlier, its read one
      iteration earlier) and there linear in p, is least at p = 0 or p = pixels - 1 (`output_gap`);
      `write_lead` lifts it to `allowed_depth`.
    Every phase is two iterations or more (`last`; a write phase of one output has a lead of `allowed_depth` - 2
    or more).

    In bands of output rows (`bands` > 1, pointwise and conv), the loop above runs once per band, `inputs`, `compute`
    and `outputs` a band's (a conv's bands take unequal input rows: `band_inputs`, `MapBands`, the load as long as
    the most), the fetch running on into the next band's tiles. A band's load writes the maps' addresses the band
    before read, and its first tile's weights go to the half of weight_tile the band before did not read last (at
    each band's start the fetch fills and the compute reads the same half, as at the first). An input token read in
    the band's last tile's phase, at its last iteration at the latest, is written again in the next band's load, at
    its first at the earliest: the gap is `write` + 1 or more, and `write` is at least `allowed_depth` - (`last` -
    `compute`) >= `allowed_depth` - 1, `write_lead` lifting the last pixel's output gap (`output_gap`, there
    `last` + `outputs` - `compute`) to `allowed_depth`. In the output map, a token read in a band's write phase is
    written again in the next band's tile phases, after its load (`load` >= `fetched` >= `allowed_depth`)."""

    inputs: int
    compute: int
    tiles: int
    tile_words: int
    words_per_row: int
    outputs: int
    settle: int = 0
    in_order: bool = True
    bands: int = 1
    band_inputs: tuple[int, ...] = ()  # tokens each band takes where they differ (a conv's), `inputs` the most

    @property
    def rows(self) -> int:
        """Rows of a tile's weights: the steps of a reduction."""
        return self.tile_words // self.words_per_row

    @property
    def pixels(self) -> int:
        """The reductions of a tile's compute."""
        return self.compute // self.rows

    @property
    def allowed_depth(self) -> int:
        """The deepest pipeline the loop's gaps allow: `settle` and DEPTH_MARGIN."""
        return self.settle + DEPTH_MARGIN

    @property
    def first_word(self) -> int:
        """The iteration of `load` taking tile 0's first word: its burst's latency after the loop starts."""
        return DDR_BURST_LATENCY

    @property
    def fetched(self) -> int:
        """The fewest iterations of a phase from its first fetched word to its end: the tile's words, the last
        row's write landed `allowed_depth` iterations before the next phase reads it."""
        return max(self.tile_words, self.tile_words - self.rows + self.allowed_depth)

    @property
    def load(self) -> int:
        taken = self.inputs if self.in_order else self.inputs + self.allowed_depth - 1
        return max(taken, self.first_word + self.fetched)

    @property
    def tile(self) -> int:
        return max(self.compute, self.fetched)

    @property
    def last(self) -> int:
        """The last tile's phase: its compute, two iterations at least (whether an iteration ends its phase is
        known one iteration ahead)."""
        return max(self.compute, 2)

    @property
    def first_tile(self) -> int:
        return self.last if self.tiles == 1 else self.tile

    def output_gap(self, pixel: int, tile: int) -> int:
        """Iterations from the write of output pixel `pixel` of tile `tile` into the output buffer to its read, the
        write phase's lead aside."""
        written = (pixel + 1) * self.rows - 1 - (self.tiles - 1 - tile) * self.tile  # from the last tile's start
        read = self.last + pixel * self.tiles + tile
        return read - written

    @property
    def write_lead(self) -> int:
        """Iterations of the write phase before its first output: the least output gap lifted to `allowed_depth`."""
        if not self.outputs:
            return 0
        least = min(self.output_gap(p, self.tiles - 1) for p in (0, self.pixels - 1))
        return max(self.allowed_depth - least, 0)

    @property
    def write(self) -> int:
        return self.write_lead + self.outputs

    @property
    def band(self) -> int:
        """Iterations of a band: the input taken, every tile, the output written."""
        return self.load + (self.tiles - 1) * self.tile + self.last + self.write

    @property
    def longest(self) -> int:
        """The longest phase."""
        return max(self.load, self.tile, self.write)


def streamed_loop(spec, inputs: int, compute: int, outputs: int, in_order: bool = True) -> StreamedLoop:
    return StreamedLoop(inputs, compute, spec.tokens_out[0], tile_words(spec), words_per_row(spec.macs), outputs,
                        spec.depth, in_order, spec.bands)


def map_loop(spec, in_order: bool) -> StreamedLoop:
    """The streamed loop of a pointwise or conv process: the whole input map (or a band of its rows) taken, each
    output tile computed over every output pixel into the output map buffer, then the output map written in pixel
    order; `in_order`: the compute reads the input map in the order it arrived (`StreamedLoop`)."""
    pixels_in, pixels_out = band_pixels(spec)
    loop = streamed_loop(spec, pixels_in * spec.tokens_in[0], pixels_out * spec.reduction_tiles,
                         pixels_out * spec.tokens_out[0], in_order)
    if spec.kind != "conv" or spec.bands == 1:
        return loop
    row_tokens = spec.inputs[0][2] * spec.tokens_in[0]
    taken = tuple(rows * row_tokens for rows in MapBands.of(spec).taken)
    return replace(loop, inputs=max(taken), band_inputs=taken)


def band_pixels(spec) -> tuple[int, int]:
    """Input and output pixels of a band of a streamed process's map (the whole map in one band; a conv's input: the
    rows of its ring, `MapBands`)."""
    (_, h, w), (_, h_out, w_out) = spec.inputs[0], spec.outputs[0]
    rows = MapBands.of(spec).ring if spec.kind == "conv" else h // spec.bands
    return rows * w, h_out * w_out // spec.bands


def streamed_positions(phases: StreamedLoop, tile_writes: Access):
    """The positions of a streamed process's loop (`ming_py.loops`): per band, the input taken, the tiles (writing
    `tile_writes` each), the buffered outputs written."""
    for band in range(phases.bands):
        inputs = phases.band_inputs[band] if phases.band_inputs else phases.inputs
        yield Position(phases.load, (Access(0, 1, inputs),), (Access(),))
        if phases.tiles > 1:
            yield phases.tiles - 1, Position(phases.tile, (Access(),), (tile_writes,))
        yield Position(phases.last, (Access(),), (tile_writes,))
        if phases.outputs:
            yield Position(phases.write, (Access(),), (Access(phases.write_lead, 1, phases.outputs),))


def streamed_counters(phases: StreamedLoop) -> dict[str, int]:
    """The counters a streamed loop's phases and fetch declare (`ProcessKind.loop_counters`)."""
    return {"i": phases.longest - 1, "end": phases.longest - 2, "tile": phases.tiles - 1,
            "fetch_row": phases.rows - 1, "fetch_word": phases.words_per_row - 1,
            "fetch_end": phases.first_word + phases.tile_words,
            "half": 1, "fill": 1}
