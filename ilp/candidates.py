"""The candidates of each process: every valid schedule (unroll factors, lanes, line-buffer and weight memories,
multipliers, shared requantizers) that keeps its pins, their costs, and the pruning that leaves the ILP only the
affordable, undominated ones."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np

from ming_py.boards import Board
from ming_py.calibration import Calibration
from ming_py.dataflow import StreamGraph, divisors
from ming_py.errors import MingError
from ming_py.epilogues import rule_of
from ming_py.process_spec import process_spec
from ming_py.kinds import kind_of, trip_counts
from ming_py.kinds.base import shared_requantizers
from ming_py.kinds.window import whole_groups
from ming_py.storage import plan_arrays
from ming_py.kinds.streamed import band_options, streamed_problem
from ming_py.weights_ddr import exceeds_chip

from .budget import RESOURCES, Budget
from .pins import Pins, line_buffer_memory
from .cost import Choice, Cost, process_cost


MAX_UNROLL = 64  # per loop; beyond it an int8 layer of a small CNN gains nothing
# The largest weight array per bank the ILP may move from BRAM to LUTRAM: one BRAM18K's bits, 288 LUTs as a
# 64-bit-a-LUT ROM (`ming_py.array_layout`); larger ones cost more LUTs than a BRAM18K saves is worth.
LUTRAM_WEIGHT_BITS = 18_432
_PARETO_BLOCK = 64  # rows of the pairwise comparison at a time (`_undominated`)


def candidates(graph: StreamGraph, process, pins: Pins | None = None, uram: bool = False,
               weight_memories: tuple[str, ...] = ("bram",), bands: bool = False) -> list[Choice]:
    """Every valid schedule of one process (lanes tied to the parallelism they feed) that keeps its pins, its
    weights in each of `weight_memories` (`weight_options`; from DDR in bands of its map where `bands`)."""
    pins = pins or Pins()
    unroll_pins = pins.unroll.get(process.name, {})
    kind = kind_of(process.kind)
    trips = trip_counts(graph, process)
    ins = [graph.channels[c] for c in process.inputs]
    outs = [graph.channels[c] for c in process.outputs]
    loops = list(trips)
    options = [[unroll_pins[loop]] if loop in unroll_pins else [d for d in divisors(trips[loop]) if d <= MAX_UNROLL]
               for loop in loops]
    # where the line buffer sits, or the map buffers of a loop streaming its weights from DDR (`streamed_map_buffers`)
    memories = ["bram", "uram"] if uram and (kind.line_buffer or kind.streamed_maps) else ["bram"]
    if process.name in pins.line_buffers:
        memories = [m for m in memories if m == pins.line_buffers[process.name]]
    multiplier_pin = pins.multipliers.get(process.name)
    requantizers = pins.requantizers.get(process.name)  # none but 0 beside weights pinned to DDR (`pins.resolve`)
    result = []
    for factors in itertools.product(*options):
        unroll = dict(zip(loops, factors))
        if not whole_groups(process.window, unroll):
            continue
        for lanes_in, lanes_out in kind.lane_options(unroll, ins, outs, process.params, MAX_UNROLL):
            if not kind.static_banks(unroll.get("k", 1), lanes_in[0]):
                continue
            sharing = _requantizer_options(graph, process, unroll, lanes_in, lanes_out, requantizers)
            weights = weight_options(graph, process, unroll, lanes_in, lanes_out, pins, weight_memories, bands)
            for memory in memories:
                for multipliers in kind.multiplier_choices(unroll):
                    if multiplier_pin is not None and multipliers != multiplier_pin:
                        continue
                    for count in sharing:
                        for weight_memory, band_count in weights:
                            if weight_memory == "ddr" and count:
                                continue  # a streamed loop takes one requantizer per output lane
                            if memory == "uram" and not kind.line_buffer and weight_memory != "ddr":
                                continue  # only a streamed loop's map buffers: no buffer for URAM
                            if memory == "uram" and process.name in pins.line_buffers and \
                                    line_buffer_memory(graph, process, tuple(unroll.items()), lanes_in, lanes_out,
                                                       memory, weight_memory == "ddr", band_count) != memory:
                                continue  # the pinned URAM holds this schedule's buffer only where it is too large
                                # for LUTRAM
                            result.append(Choice(tuple(unroll.items()), lanes_in, lanes_out, memory, multipliers,
                                                 count, weight_memory, band_count))
    return result


def weight_options(graph: StreamGraph, process, unroll, lanes_in, lanes_out, pins: Pins,
                   offered: tuple[str, ...], bands: bool = False) -> tuple[tuple[str, int], ...]:
    """Where a candidate's weights may go, each with the bands of its map (1 but for weights from DDR): the pinned
    memory, else "bram" (a ROM where its size puts it: LUTRAM when small, else BRAM) and, among `offered`, for
    weights that would take BRAM: URAM, and LUTRAM where they are small (at most one BRAM18K's bits a bank:
    LUTRAM_WEIGHT_BITS), and DDR where its kind streams them (`ming_py.weights_ddr`): the whole map, and where
    `bands` in each of `_band_options` (a pinned band count: that one)."""
    if process.weights is None:
        return (("bram", 1),)
    spec = process_spec(graph, process, tuple(unroll.items()), lanes_in, lanes_out)
    if process.name in pins.weights:
        pinned = pins.weights[process.name]
        if pinned != "ddr":
            return ((pinned, 1),)
        counts = (pins.bands[process.name],) if process.name in pins.bands else _band_options(spec) if bands else (1,)
        return tuple(("ddr", b) for b in counts if _streams(spec, b))
    if offered == ("bram",):
        return (("bram", 1),)
    rom = plan_arrays(spec, process.epilogue)["weights"]
    if rom.memory != "bram":
        return (("bram", 1),)
    counts = _band_options(spec) if bands else (1,)
    streamed = tuple(("ddr", b) for b in counts if _streams(spec, b)) if "ddr" in offered else ()
    return tuple((m, 1) for m in offered
                 if m != "ddr" and (m != "lutram" or rom.bits <= LUTRAM_WEIGHT_BITS * rom.banks)) + streamed


def _band_options(spec) -> tuple[int, ...]:
    """The bands a streamed loop is offered (`ming_py.kinds.streamed.band_options`): the whole map, and bands of a
    power of two output rows (1, 2, 4, ...), each fewer rows a smaller map buffer and more reads of the weights;
    the other divisors lie between two of these in both."""
    height = spec.outputs[0][1]
    return tuple(b for b in band_options(spec) if b == 1 or (height // b) & (height // b - 1) == 0)


def _streams(spec, bands: int = 1) -> bool:
    """Whether the spec's loop may stream its weights from DDR (with one requantizer per lane) in `bands`."""
    return not streamed_problem(replace(spec, ddr_weights=True, bands=bands))


def loaded_weight_memories(graph: StreamGraph, budget: Budget, calibration,
                           streams_ddr: bool = True, offer_ddr: bool = False) -> tuple[str, ...]:
    """The weight memories the ILP may choose beyond ROMs where their size puts them: URAM (loaded at start
    through the weight port, `ming_py.weights_load`) and LUTRAM, offered only where the smallest design with
    ROM weights needs more BRAM than the budget holds, so that every design that fits with ROMs keeps them (no
    weight port, nothing to load); and DDR (`ming_py.weights_ddr`) only where the weights outgrow the budget's
    on-chip memories or (`offer_ddr`) where a search without them found no design (`ilp.solve.solve`), so that every
    design that can keep its weights on chip does, and the board can stream them (`streams_ddr`:
    `ming_py.weights_ddr.board_ddr_problem` finds none). A pinned process's weights go where its pin says
    (`weight_options`)."""
    ddr = ("ddr",) if streams_ddr and (offer_ddr or exceeds_chip(graph, budget)) else ()
    if smallest_design(graph, calibration)["bram18k"] <= budget.bram18k:
        return ("bram",) + ddr
    return ("bram", "lutram") + (("uram",) if budget.uram > 0 else ()) + ddr


def weight_port_reservation(graph: StreamGraph, board: Board, budget: Budget, calibration,
                            pins: Pins | None = None) -> dict[str, int]:
    """What the weight port's DMA takes (the board's `[weight_port]`) where the design may have URAM weights (the
    ILP may choose them, `loaded_weight_memories`, or a pin puts them there), set aside before the ILP chooses;
    nothing where every weight stays a ROM."""
    pinned = pins is not None and "uram" in pins.weights.values()
    if not board.weight_port or not (pinned or "uram" in loaded_weight_memories(graph, budget, calibration)):
        return {}
    return {r: getattr(board.weight_port, r) for r in RESOURCES if getattr(board.weight_port, r)}


def _requantizer_options(graph: StreamGraph, process, unroll, lanes_in, lanes_out,
                         pinned: int | None) -> tuple[int, ...]:
    """One requantizer per lane (0), and the fewest that can take the lanes in turn: a requantizer count between
    them would only save a few cycles of pipeline depth. A pinned count where the lanes allow it (0, or the
    lanes themselves: one per lane)."""
    if rule_of(process.epilogue).datapath(process.epilogue) is None:
        return (0,)
    shared = shared_requantizers(process_spec(graph, process, tuple(unroll.items()), lanes_in, lanes_out))
    if pinned is None:
        return (0,) + shared[:1]
    if pinned in (0, lanes_out[0]):
        return (0,)
    return (pinned,) if pinned in shared else ()


def fast_enough(graph, options, costs, limit: int):
    """The candidates a design of latency <= `limit` may hold (`Model.too_slow`)."""
    earliest = earliest_starts(graph, costs)
    return keep_candidates(options, costs, lambda name, c: earliest[name] + c.progress[-1] <= limit)


def keep_candidates(options, costs, wanted):
    """The candidates (and their costs) for which `wanted(process name, cost)` holds."""
    kept = {name: [j for j, c in enumerate(costs[name]) if wanted(name, c)] for name in options}
    return ({name: [options[name][j] for j in kept[name]] for name in options},
            {name: [costs[name][j] for j in kept[name]] for name in costs})


def candidates_and_costs(graph: StreamGraph, pins: Pins, budget: Budget, calibration, known: dict | None = None,
                         streams_ddr: bool = True, offer_ddr: bool = False, bands: bool = False):
    """Every process's candidates under the pins and their costs, the dominated ones left out; DDR weights only
    where the board can stream them (`streams_ddr`), and where `loaded_weight_memories` offers them, in bands of
    their maps where `bands`. `known` keeps them across the solves of one exploration with the same graph, pins and
    calibration (targets solved again, FIFO memory reserved anew): they depend on the budget only through the
    memories it offers the weights."""
    weight_memories = loaded_weight_memories(graph, budget, calibration, streams_ddr, offer_ddr)
    key = (weight_memories, budget.uram > 0, bands)
    if known is None or key not in known:
        found = _candidates_and_costs(graph, pins, budget, calibration, weight_memories, bands)
        if known is None:
            return found
        known[key] = found
    return known[key]


def _candidates_and_costs(graph: StreamGraph, pins: Pins, budget: Budget, calibration, weight_memories, bands: bool):
    options = {p.name: candidates(graph, p, pins, budget.uram > 0, weight_memories, bands) for p in graph.processes}
    for name, choices in options.items():
        if not choices:
            pinned = f" and {pins.requantizers[name]} requantizers" if name in pins.requantizers else ""
            raise MingError(f"process {name}: the pinned settings{pinned} leave no valid schedule (shared "
                            f"requantizers need lanes / requantizers <= the iterations of a reduction; multipliers "
                            f"dsp_pair need an even unroll of the loop that shares the input; a line buffer in URAM "
                            f"needs lanes few enough that it is too large for LUTRAM)")
    costs = {}
    for name in list(options):
        process, timings = graph.process(name), {}
        all_costs = [process_cost(graph, process, c, calibration, timings) for c in options[name]]
        options[name], costs[name] = _pareto(options[name], all_costs)
    return options, costs


def least_needs(costs: dict[str, list[Cost]]) -> dict[str, dict[str, int]]:
    """Per resource, per process, the least any of its candidates needs."""
    return {r: {name: min(getattr(c, r) for c in costs[name]) for name in costs} for r in RESOURCES}


def affordable(options, costs, budget: Budget):
    """The candidates that fit the budget beside every other process at its least (the others cannot)."""
    least = least_needs(costs)
    spare = {r: getattr(budget, r) - sum(least[r].values()) for r in RESOURCES}
    return keep_candidates(options, costs,
                           lambda name, c: all(getattr(c, r) - least[r][name] <= spare[r] for r in RESOURCES))


def smallest_design(graph: StreamGraph, calibration: Calibration | None = None) -> dict[str, int]:
    """Resources of the least parallel design (every factor and lane 1), each at the multipliers that
    need least of it: what any build needs."""
    needs = dict.fromkeys(RESOURCES, 0)
    for p in graph.processes:
        ones = tuple((loop, 1) for loop in trip_counts(graph, p))
        costs = [process_cost(graph, p, Choice(ones, (1,) * len(p.inputs), (1,) * len(p.outputs), multipliers=m),
                              calibration)
                 for m in kind_of(p.kind).multiplier_choices(dict(ones))]
        for r in RESOURCES:
            needs[r] += min(getattr(c, r) for c in costs)
    return needs


def _pareto(choices: list[Choice], costs: list[Cost]) -> tuple[list[Choice], list[Cost]]:
    """Drop candidates another candidate with the same lanes beats or ties on every cost: of candidates that tie on
    every cost, the first is kept."""
    groups: dict[tuple, list[int]] = {}
    for i, choice in enumerate(choices):
        groups.setdefault((choice.lanes_in, choice.lanes_out), []).append(i)
    kept = sorted(i for members in groups.values() for i in _undominated(members, costs))
    return [choices[i] for i in kept], [costs[i] for i in kept]


def _undominated(members: list[int], costs: list[Cost]) -> list[int]:
    """The members no other member beats or ties on every cost (of ties, the first). Pairwise, _PARETO_BLOCK rows at a
    time, so that memory grows with the members times the costs, not with the members squared."""
    vectors = np.array([costs[i].vector + tuple(getattr(costs[i], r) for r in RESOURCES) for i in members],
                       dtype=np.int64)
    order = np.arange(len(members))
    kept = []
    for begin in range(0, len(members), _PARETO_BLOCK):
        rows = vectors[begin:begin + _PARETO_BLOCK]
        # [i, j]: member j is no worse than member i on every cost
        no_worse = (vectors[None, :, :] <= rows[:, None, :]).all(axis=2)
        tied = (vectors[None, :, :] == rows[:, None, :]).all(axis=2)
        beaten = (no_worse & (~tied | (order[None, :] < order[begin:begin + _PARETO_BLOCK, None]))).any(axis=1)
        kept += [members[begin + k] for k in np.flatnonzero(~beaten)]
    return kept


def earliest_starts(graph: StreamGraph, costs: dict[str, list[Cost]]) -> dict[str, int]:
    """A lower bound on each process's start in any design: the longest path of its producers' least fills."""
    start = dict.fromkeys(costs, 0)
    for p in graph.processes:  # topological order
        fill = min(c.fill for c in costs[p.name])
        for channel in p.outputs:
            consumer = graph.channels[channel].consumer
            if consumer in start:
                start[consumer] = max(start[consumer], start[p.name] + fill)
    return start
