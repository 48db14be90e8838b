"""Resource-constrained choice of every process's parallelism (MING §IV-C, Eq. 1).

Each process picks exactly one candidate (one-hot binaries over divisor unroll
factors, MING's unroll constraint). A channel's lane count is its producer's
output parallelism and must equal its consumer's input parallelism (MING's
stream constraint). DSP, BRAM18K, URAM and LUT sums stay within the budget.

Objective `latency` models a pipelined dataflow (Stream-HLS §3, CODO §VI): a
process starts when its producers have emitted their first outputs
(start_v >= start_u + fill_u), finishes no sooner than its own work allows
(finish_v >= start_v + cycles_v, so the slowest process sets the pace) nor than
`drain_v` after its producers finish (finish_v >= finish_u + drain_v); minimise
the finish of the process feeding the output. Objective `sum` is MING's
original sum of process cycles.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field

import pulp

from ming_py.boards import Board
from ming_py.dataflow import ProcessSchedule, Schedule, StreamGraph, divisors
from ming_py.ir import MingError

from .budget import RESOURCES, Budget
from .cost import Choice, Cost, process_cost, storage_plan

MAX_UNROLL = 64  # per loop; beyond it an int8 layer of a small CNN gains nothing


@dataclass
class Solution:
    schedule: Schedule
    choices: dict[str, Choice]
    costs: dict[str, Cost]
    status: str
    solve_seconds: float
    objective: str
    budget: Budget
    totals: dict = field(default_factory=dict)


def candidates(graph: StreamGraph, process, pins: dict[str, int] | None = None,
               uram: bool = False) -> list[Choice]:
    """Every valid schedule of one process (lanes tied to the parallelism they feed)."""
    pins = pins or {}
    trips = graph.trip_counts(process)
    ins = [graph.channels[c] for c in process.inputs]
    outs = [graph.channels[c] for c in process.outputs]
    loops = list(trips)
    options = [[pins[loop]] if loop in pins else [d for d in divisors(trips[loop]) if d <= MAX_UNROLL]
               for loop in loops]
    memories = ["bram", "uram"] if uram and process.window is not None and process.kind != "pointwise" else ["bram"]
    result = []
    for factors in itertools.product(*options):
        unroll = dict(zip(loops, factors))
        for lanes_in, lanes_out in _lanes(process.kind, unroll, ins, outs):
            for memory in memories:
                result.append(Choice(tuple(unroll.items()), lanes_in, lanes_out, memory))
    return result


def _lanes(kind: str, unroll: dict[str, int], ins, outs):
    """(lanes in, lanes out) options: the parallelism a process consumes and produces per cycle."""
    if kind in ("conv", "pointwise"):
        yield (unroll["ic"],), (unroll["oc"],)
    elif kind in ("depthwise", "maxpool", "avgpool", "global_avgpool"):
        yield (unroll["c"],), (unroll["c"],)
    elif kind == "dense":
        for lanes in divisors(ins[0].channels):
            if lanes <= MAX_UNROLL:
                yield (lanes,), (unroll["n"],)
    else:  # add, rescale, concat, split: one lane count throughout
        common = math.gcd(*[c.channels for c in ins + outs])
        for lanes in divisors(common):
            if lanes <= MAX_UNROLL:
                yield (lanes,) * len(ins), (lanes,) * len(outs)


def solve(graph: StreamGraph, board: Board, budget: Budget, objective: str = "latency",
          pins: dict[str, dict[str, int]] | None = None, time_limit: float = 60.0) -> Solution:
    pins = pins or {}
    started = time.perf_counter()
    options = {p.name: candidates(graph, p, pins.get(p.name), uram=budget.uram > 0) for p in graph.processes}
    for name, choices in options.items():
        if not choices:
            raise MingError(f"process {name}: the pinned factors leave no valid schedule")
    costs = {}
    for name in list(options):
        all_costs = [process_cost(graph, graph.process(name), c) for c in options[name]]
        options[name], costs[name] = _pareto(options[name], all_costs)
    problem = pulp.LpProblem("ming_dse", pulp.LpMinimize)
    pick = {name: [pulp.LpVariable(f"x_{i}_{j}", cat="Binary") for j in range(len(choices))]
            for i, (name, choices) in enumerate(options.items())}
    for name, xs in pick.items():
        problem += pulp.lpSum(xs) == 1, f"one_{name}"

    def total(name, attribute):
        return pulp.lpSum(x * getattr(c, attribute) for x, c in zip(pick[name], costs[name]))

    def lanes(name, channel, side):
        process = graph.process(name)
        index = (process.inputs if side == "in" else process.outputs).index(channel)
        return pulp.lpSum(x * getattr(c, f"lanes_{side}")[index] for x, c in zip(pick[name], options[name]))

    for channel in graph.channels.values():
        if channel.producer in pick and channel.consumer in pick:
            problem += (lanes(channel.producer, channel.name, "out") == lanes(channel.consumer, channel.name, "in"),
                        f"lanes_{channel.name}")
    for resource in RESOURCES:
        problem += (pulp.lpSum(total(name, resource) for name in pick) <= getattr(budget, resource),
                    f"budget_{resource}")
    # Pipelined dataflow: a process starts when its inputs' first pixels arrive, emits its first output
    # `fill` later, and finishes no sooner than its own work allows nor than `drain` after its inputs end.
    start = {name: pulp.LpVariable(f"s_{i}", lowBound=0) for i, name in enumerate(pick)}
    finish = {name: pulp.LpVariable(f"f_{i}", lowBound=0) for i, name in enumerate(pick)}
    done = pulp.LpVariable("output_finish", lowBound=0)
    for name in pick:
        problem += finish[name] >= start[name] + total(name, "cycles"), f"work_{name}"
    for channel in graph.channels.values():
        if channel.producer not in pick:
            continue
        if channel.consumer in pick:
            consumer = channel.consumer
            problem += start[consumer] >= start[channel.producer] + total(channel.producer, "fill"), \
                f"fill_{channel.name}"
            problem += finish[consumer] >= finish[channel.producer] + total(consumer, "drain"), \
                f"drain_{channel.name}"
        else:
            problem += done >= finish[channel.producer], f"out_{channel.name}"
    # Among equally fast designs prefer the cheaper: at most one cycle per resource exhausted.
    thrift = pulp.lpSum(total(name, r) * (1.0 / max(getattr(budget, r), 1)) for name in pick for r in RESOURCES)
    if objective == "latency":
        problem += done + thrift
    elif objective == "sum":
        problem += pulp.lpSum(total(name, "cycles") for name in pick) + thrift
    else:
        raise MingError(f"unknown objective {objective!r}; use latency or sum")
    status = problem.solve(_solver(time_limit))
    seconds = time.perf_counter() - started
    if pulp.LpStatus[status] != "Optimal":
        raise MingError(f"no design fits the budget ({_describe(vars(budget))}); the smallest design needs "
                        f"{_describe(smallest_design(graph))}")
    picked = {name: _picked(xs) for name, xs in pick.items()}
    chosen = {name: options[name][j] for name, j in picked.items()}
    chosen_costs = {name: costs[name][j] for name, j in picked.items()}
    size = {"variables": len(problem.variables()), "constraints": len(problem.constraints)}
    return _solution(graph, board, chosen, chosen_costs, objective, budget, pulp.LpStatus[status], seconds, size)


def _picked(xs) -> int:
    return max(range(len(xs)), key=lambda j: xs[j].value() or 0)


def _solver(time_limit: float):
    """PuLP's bundled CBC: deterministic, always present. (HiGHS through highspy solved the test
    networks in the same ~0.1 s, so it would only add a second source of tie-breaking.)"""
    return pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit, threads=1)


def smallest_design(graph: StreamGraph) -> dict[str, int]:
    """Resources of the least parallel design (every factor and lane 1): what any build needs."""
    costs = [process_cost(graph, p, Choice(tuple((loop, 1) for loop in graph.trip_counts(p)),
                                           (1,) * len(p.inputs), (1,) * len(p.outputs)))
             for p in graph.processes]
    return {r: sum(getattr(c, r) for c in costs) for r in RESOURCES}


def _describe(needs: dict[str, int]) -> str:
    names = {"dsp": "DSP", "bram18k": "BRAM18K", "uram": "URAM", "lut": "LUT"}
    return ", ".join(f"{names[r]} {v}" for r, v in needs.items())


def _pareto(choices: list[Choice], costs: list[Cost]) -> tuple[list[Choice], list[Cost]]:
    """Drop candidates another candidate with the same lanes beats or ties on every cost."""
    keys = ("cycles", "fill") + RESOURCES
    kept: list[int] = []
    for i, (choice, cost) in enumerate(zip(choices, costs)):
        group = (choice.lanes_in, choice.lanes_out)
        vector = tuple(getattr(cost, k) for k in keys)
        dominated = False
        for j in kept:
            if (choices[j].lanes_in, choices[j].lanes_out) == group and \
                    all(getattr(costs[j], k) <= v for k, v in zip(keys, vector)):
                dominated = True
                break
        if not dominated:
            kept = [j for j in kept if not ((choices[j].lanes_in, choices[j].lanes_out) == group and
                                            all(v <= getattr(costs[j], k) for k, v in zip(keys, vector)))]
            kept.append(i)
    return [choices[i] for i in kept], [costs[i] for i in kept]


def schedule_of(graph: StreamGraph, chosen: dict[str, Choice]) -> Schedule:
    processes = {}
    lanes = {}
    for name, choice in chosen.items():
        process = graph.process(name)
        processes[name] = ProcessSchedule(choice.unroll, tuple(sorted(storage_plan(process, choice).items())))
        lanes.update(zip(process.outputs, choice.lanes_out))
        for channel, count in zip(process.inputs, choice.lanes_in):
            lanes.setdefault(channel, count)  # the accelerator input: its consumer's parallelism
    return Schedule(processes, lanes)


def _solution(graph, board, chosen, costs, objective, budget, status, seconds, size) -> Solution:
    throughput, latency = estimate(graph, costs)
    macs = sum(_macs(graph, p) for p in graph.processes)
    totals = {r: sum(getattr(c, r) for c in costs.values()) for r in RESOURCES + ("ff",)}
    totals |= {"cycles": latency, "latency_us": round(latency / board.clock_mhz, 3), "throughput_cycles": throughput,
               "roofline_cycles": math.ceil(macs / max(budget.dsp, 1)), "macs": macs,
               # no wall-clock time here: build outputs are byte-identical run to run (it is printed instead)
               "solver": {"status": status, "objective": objective, "budget": vars(budget)} | size}
    return Solution(schedule_of(graph, chosen), chosen, costs, status, seconds, objective, budget, totals)


def estimate(graph: StreamGraph, costs: dict[str, Cost]) -> tuple[int, int]:
    """(throughput cycles, end-to-end latency) under the ILP's latency model (see `solve`)."""
    start = {name: 0 for name in costs}
    finish: dict[str, int] = {}
    latency = 0
    for p in graph.processes:  # topological order
        producers = [graph.channels[c].producer for c in p.inputs if graph.channels[c].producer in costs]
        finish[p.name] = max([start[p.name] + costs[p.name].cycles] +
                             [finish[q] + costs[p.name].drain for q in producers])
        for channel in p.outputs:
            consumer = graph.channels[channel].consumer
            if consumer in start:
                start[consumer] = max(start[consumer], start[p.name] + costs[p.name].fill)
            else:
                latency = max(latency, finish[p.name])
    return max(c.cycles for c in costs.values()), latency


def _macs(graph: StreamGraph, p) -> int:
    trips = graph.trip_counts(p)
    if p.kind in ("conv", "pointwise"):
        w = p.window
        return w.out_height * w.out_width * trips["oc"] * trips["ic"] * trips.get("k", 1)
    if p.kind == "depthwise":
        return p.window.out_height * p.window.out_width * trips["c"] * trips["k"]
    if p.kind == "dense":
        return trips["n"] * trips["k"]
    return 0
