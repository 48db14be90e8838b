"""The MIP model (PuLP): one-hot candidates per process, lanes tied per channel, budget rows, and the goal (the
latency model's output finish, the sum of cycles, the slowest process, or the least footprint); with `estimate`,
the same latency model evaluated for a chosen design."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pulp

from ming_py.adapters import pack_adapter
from ming_py.dataflow import StreamGraph

from .budget import RESOURCES, Budget
from ming_py.weights_ddr import streamed_bytes

from .cost import (PROGRESS_SAMPLES, Choice, Cost, choice_spec, first_fractions, input_fractions, samples_after,
                   starved_cover, starved_rows)
from .footprint import LARGEST_STEP, Footprint, counted, footprint, objective_value, weight
from .footprint import shares as resource_shares
from .candidates import affordable, fast_enough

INTEGRAL = 1e-6  # a time within this of an integer is that integer (the solver's tolerances are tighter)


class Model:
    """The ILP: one-hot candidates per process, lanes tied per channel, budget rows, and its goal:
    "latency" (the latency model's output finish), "sum" (of process cycles), "interval" (the slowest process)
    or "resources" (the least `footprint` within the user's budget, `budget` plus the `reserved` FIFO memory),
    the last optionally with the latency model bounded by `latency_limit`. Where candidates stream their weights
    from DDR, `ddr_rate` (bytes a cycle, the board's `ming_py.weights_ddr.ddr_bytes_per_cycle`) bounds the bytes
    an image reads by the cycles it takes (`_ddr_row`). `latency_bound`: the model is for designs no slower (a
    known design's latency, `objectives.latency_model`), which its big-M rows are taken from (`_big_m`), as they
    are from `latency_limit`; slower designs may be left out."""

    def __init__(self, graph: StreamGraph, options, costs, budget: Budget, goal: str, latency_limit: int | None = None,
                 reserved: dict[str, int] | None = None, ddr_rate: float | None = None,
                 latency_bound: int | None = None):
        self.graph, self.options, self.costs, self.budget = graph, options, costs, budget
        self.goal, self.latency_limit, self.ddr_rate = goal, latency_limit, ddr_rate
        self.latency_bound = latency_limit if latency_limit is not None else latency_bound
        self.reserved = reserved or {}
        self.every_latency = None
        self.whole = replace(budget, **{r: getattr(budget, r) + v for r, v in self.reserved.items()})
        problem = pulp.LpProblem("ming_dse", pulp.LpMinimize)
        self.pick = {name: [pulp.LpVariable(f"x_{i}_{j}", cat="Binary") for j in range(len(choices))]
                     for i, (name, choices) in enumerate(options.items())}
        for name, xs in self.pick.items():
            problem += pulp.lpSum(xs) == 1, f"one_{name}"
        self.timing = self._timing_classes(problem)
        for c, channel in enumerate(graph.channels.values()):
            if channel.producer in self.pick and channel.consumer in self.pick:
                self._tie_lanes(problem, c, channel)
        for resource in RESOURCES:
            problem += (pulp.lpSum(self.total(name, resource) for name in self.pick) <= getattr(budget, resource),
                        f"budget_{resource}")
        if goal == "latency":
            problem += self._latency(graph, problem)
        elif goal == "sum":
            problem += pulp.lpSum(self.timed(name, lambda c: c.cycles) for name in self.pick)
        elif goal == "interval":
            interval = pulp.LpVariable("interval", lowBound=0, cat="Integer")
            for name in self.pick:
                problem += interval >= self.timed(name, lambda c: c.cycles), f"interval_{name}"
            self._ddr_row(problem, interval)
            problem += interval
        else:
            if latency_limit is not None:
                problem += self._latency(graph, problem) <= latency_limit, "latency_limit"
            problem += self._footprint(problem)
        self.problem = problem

    def _footprint(self, problem):
        """`footprint.objective_value` of the chosen design: an integer `largest` no less than every resource's
        share (the FIFOs' included) in LARGEST_STEPs, weighted above the processes' shares summed."""
        self.shares = {name: [resource_shares(c, self.whole) for c in self.costs[name]] for name in self.pick}
        held = resource_shares(dict.fromkeys(RESOURCES, 0) | self.reserved, self.whole)
        largest = pulp.LpVariable("largest_share", lowBound=0, cat="Integer")
        for r in counted(self.whole):
            used = pulp.lpSum(x * s[r] for name, xs in self.pick.items() for x, s in zip(xs, self.shares[name]))
            problem += LARGEST_STEP * largest >= held[r] + used, f"largest_{r}"
        total = pulp.lpSum(x * sum(s.values()) for name, xs in self.pick.items()
                           for x, s in zip(xs, self.shares[name]))
        return weight(len(self.pick), self.whole) * largest + total

    def footprint(self, picked: dict[str, int]) -> Footprint:
        """A design's footprint within the user's budget (its processes and the reserved FIFO memory)."""
        return footprint((self.costs[name][j] for name, j in picked.items()), self.whole, self.reserved)

    def _timing_classes(self, problem) -> dict[str, list[tuple[pulp.LpVariable, Cost]]]:
        """Per process, a variable per distinct timing (cycles, fill, progress curve, lags, pushes, row gaps, first
        lags) weighing as much as the candidates with it: the timing constraints name these rather than every
        candidate (the same LP with fewer non-zeros: candidates differing only in their multipliers or resources
        share a timing; resnet8_32 has 1,365 timings for 4,714 candidates)."""
        classes = {}
        for i, (name, xs) in enumerate(self.pick.items()):
            members: dict[tuple, tuple[Cost, list]] = {}
            for x, c in zip(xs, self.costs[name]):
                timing = (c.cycles, c.fill, tuple(c.progress), tuple(map(tuple, c.lags)),
                          tuple(map(tuple, c.pushes)), tuple(map(tuple, c.row_gaps)), tuple(c.first_lags))
                members.setdefault(timing, (c, []))[1].append(x)
            classes[name] = []
            for k, (cost, group) in enumerate(members.values()):
                timing = group[0]
                if len(group) > 1:
                    timing = pulp.LpVariable(f"timing_{i}_{k}", lowBound=0, upBound=1)
                    problem += pulp.lpSum(group) == timing, f"timing_{i}_{k}"
                classes[name].append((timing, cost))
        return classes

    def timed(self, name: str, figure):
        """The chosen candidate's `figure(cost)` of a timing figure, through its timing class."""
        return pulp.lpSum(t * figure(c) for t, c in self.timing[name])

    def too_slow(self, bound: float) -> list:
        """The candidates no design of latency <= `bound` within the budget holds, by propagation to a fixed
        point: an image is done no sooner than every process wrote its last token, a process starts no sooner
        than the least fills of the paths into it allow, and a candidate must fit the budget beside every
        other process at the least it needs to be that fast (domain propagation)."""
        alive, costs = {name: list(range(len(xs))) for name, xs in self.pick.items()}, self.costs
        while all(costs.values()):
            fast = fast_enough(self.graph, alive, costs, bound)
            kept = affordable(*fast, self.budget) if all(fast[1].values()) else fast
            if kept[0] == alive:
                break
            alive, costs = kept
        survivors = {name: set(indices) for name, indices in alive.items()}
        return [x for name, xs in self.pick.items() for j, x in enumerate(xs) if j not in survivors[name]]

    def _tie_lanes(self, problem, c: int, channel) -> None:
        """A channel's lanes: per lane count, the producer's candidates giving it weigh as much as the
        consumer's taking it. Where there are several counts, a binary per count names the chosen one:
        the same LP, but branching on it splits the designs by lanes (all of a skeleton's candidates at
        once) rather than one candidate at a time (with CBC, resnet8_32 at 100 %: 37 s to 20 s, proven)."""
        choices = sorted(self._lanes_choices(self.graph, channel).items())
        for lanes, (made, taken) in choices:
            problem += pulp.lpSum(made) == pulp.lpSum(taken), f"lanes_{channel.name}_{lanes}"
            if len(choices) > 1:
                problem += pulp.lpSum(made) == pulp.LpVariable(f"y_{c}_{lanes}", cat="Binary"), \
                    f"named_{channel.name}_{lanes}"

    def total(self, name: str, attribute: str):
        return self.sample(name, lambda c: getattr(c, attribute))

    def _lanes_choices(self, graph: StreamGraph, channel) -> dict[int, tuple[list, list]]:
        """Per lane count, the producer's and the consumer's candidates that give it. Tying each count's
        two sums (rather than the two weighted lane sums) keeps the LP from mixing 1 and 3 lanes into 2."""
        out = graph.process(channel.producer).outputs.index(channel.name)
        into = graph.process(channel.consumer).inputs.index(channel.name)
        by_lanes: dict[int, tuple[list, list]] = {}
        for x, choice in zip(self.pick[channel.producer], self.options[channel.producer]):
            by_lanes.setdefault(choice.lanes_out[out], ([], []))[0].append(x)
        for x, choice in zip(self.pick[channel.consumer], self.options[channel.consumer]):
            by_lanes.setdefault(choice.lanes_in[into], ([], []))[1].append(x)
        return by_lanes

    def _latency(self, graph: StreamGraph, problem):
        """Pipelined dataflow: a process starts when its inputs' first tokens arrive and finishes no sooner
        than its own work allows. Its first output token is no earlier than its fill from its start, nor than
        the arrival of the input tokens it waits for (`first_fractions`) plus its first lag: a window's first rows
        come at its producer's pace, not all at once. In between, its progress curve (the output token at j/K of
        an image, K = PROGRESS_SAMPLES) is no earlier than its own pace allows, from its start and from the previous
        point, nor than the matching input token's arrival plus the process's lag, nor than each of its
        producer's points plus the push to the first of its own points that follows that token's read (the
        producer's point exactly, where the lag interpolates between two), nor than its own pace plus the
        producer's row gaps it waits out (`_starved`). Integer start and finish
        times make the objective integral, so a bound within 0.5 of the incumbent proves it."""
        start = {name: pulp.LpVariable(f"s_{i}", lowBound=0, cat="Integer") for i, name in enumerate(self.pick)}
        first = {name: pulp.LpVariable(f"a_{i}", lowBound=0) for i, name in enumerate(self.pick)}
        finish = {name: pulp.LpVariable(f"f_{i}", lowBound=0, cat="Integer") for i, name in enumerate(self.pick)}
        point = {name: [pulp.LpVariable(f"t_{i}_{j}", lowBound=0) for j in range(PROGRESS_SAMPLES)]
                 for i, name in enumerate(self.pick)}
        done = pulp.LpVariable("output_finish", lowBound=0, cat="Integer")
        self._ddr_row(problem, done)
        for name in self.pick:
            problem += finish[name] >= start[name] + self.timed(name, lambda c: c.cycles), f"work_{name}"
            problem += first[name] >= start[name] + self.timed(name, lambda c: c.fill), f"first_{name}"
            curve = [self.timed(name, lambda c, j=j: c.progress[j]) for j in range(PROGRESS_SAMPLES)]
            for j, at in enumerate(curve):
                problem += point[name][j] >= start[name] + at, f"pace_{name}_{j}"
                if j:
                    step = self.timed(name, lambda c, j=j: c.progress[j] - c.progress[j - 1])
                    problem += point[name][j] >= point[name][j - 1] + step, f"step_{name}_{j}"
            tail = self.timed(name, lambda c: c.cycles - c.progress[-1])
            problem += finish[name] >= point[name][-1] + tail, f"tail_{name}"
            problem += done >= point[name][-1], f"written_{name}"
        for channel in graph.channels.values():
            if channel.producer not in self.pick:
                continue
            if channel.consumer in self.pick:
                consumer, producer = channel.consumer, channel.producer
                problem += start[consumer] >= first[producer], f"fill_{channel.name}"
                into = graph.process(consumer).inputs.index(channel.name)
                arrivals = [first[producer]] + point[producer]
                for form, slack, suffix in self._weight_variants(consumer):
                    process = graph.process(consumer)
                    waits = at_share(arrivals, first_fractions(graph, process, *form)[into])
                    first_lag = self.timed(consumer, lambda c: c.first_lags[into])
                    problem += first[consumer] >= waits + first_lag - slack, f"first_{channel.name}{suffix}"
                    for j, share in enumerate(input_fractions(graph, process, *form)[into]):
                        lag = self.timed(consumer, lambda c, j=j: c.lags[into][j])
                        arrival = at_share(arrivals, share)
                        problem += point[consumer][j] >= arrival + lag - slack, f"lag_{channel.name}{suffix}_{j}"
                    for k, j in enumerate(samples_after(graph, process, *form)[into]):
                        if j is not None:
                            push = self.timed(consumer, lambda c, k=k: c.pushes[into][k])
                            problem += (point[consumer][j] >= point[producer][k] + push - slack,
                                        f"push_{channel.name}{suffix}_{k}")
                self._starved(graph, problem, channel, start, point)
            else:
                problem += done >= finish[channel.producer], f"out_{channel.name}"
        if len(graph.outputs) > 1:
            problem += done >= self._record(graph, problem, finish), "record"
        return done

    def _weight_variants(self, name: str) -> list[tuple[tuple[bool, int], object, str]]:
        """The input timings of a process's candidates (`input_fractions` and `samples_after` of its loop with
        weights on chip or streamed from DDR, in bands): (`Choice.loop_form`, slack, row-name suffix) per form its
        candidates hold. Where it has several, each form's rows hold only where a candidate of that form is
        picked: the others' are relaxed by `_big_m`, so the rows bound the chosen candidate's points as `estimate`
        does."""
        forms: dict[tuple[bool, int], list] = {}
        for x, choice in zip(self.pick[name], self.options[name]):
            forms.setdefault(choice.loop_form, []).append(x)
        if len(forms) <= 1:  # one form, or no candidate left (a model with no design)
            return [(next(iter(forms), (False, 1)), 0, "")]
        big_m = self._big_m(name)
        ddr = pulp.lpSum(x for (streamed, _), xs in forms.items() if streamed for x in xs)
        return [((streamed, bands), big_m * (1 - pulp.lpSum(xs)) if streamed else big_m * ddr,
                 f"_ddr{bands if bands > 1 else ''}" if streamed else "_chip")
                for (streamed, bands), xs in sorted(forms.items())]

    def _big_m(self, name: str) -> int:
        """What lifts a row of `name`'s kind not picked: more than any of them asks of the least schedule of a design
        the model is for. Each asks that a time of `name` (its first output or a point) follow a time of its
        producer (its first output or a point) by one of `name`'s figures. In the least schedule of a design of
        latency L every point is at most L (the image is done after each process's last point, and the points
        rise), and so is the first output of every process with a consumer (which starts after it and before its
        own first point): so L plus `name`'s largest figure, L the latency bound where the model has one (a big-M
        as small as it may be keeps the LP's bound tight and its numbers well scaled, `objectives.latency_model`),
        else the latency of every design."""
        every = self._every_latency()
        if self.latency_bound is None:
            return every
        return min(every, 1 + self.latency_bound + _largest_figure(self.costs[name]))

    def _every_latency(self) -> int:
        """A bound on the latency of the least schedule of every design: each process's largest figure, summed (each
        of its times is its producer's plus at most one of them)."""
        if self.every_latency is None:
            self.every_latency = 1 + sum(map(_largest_figure, self.costs.values()))
        return self.every_latency

    def _ddr_row(self, problem, cycles) -> None:
        """The weights an image streams from DDR arrive within `cycles` (its latency, or the interval) at the
        board's DDR rate (`ddr_rate`): a necessary bound, the DDR shared by every streamed process (each process's
        loop charges its own fetches, a word a cycle). No row where no candidate streams."""
        streamed = [(x, streamed_bytes(choice_spec(self.graph, self.graph.process(name), choice)))
                    for name, xs in self.pick.items() for x, choice in zip(xs, self.options[name])
                    if choice.weights == "ddr"]
        if streamed and self.ddr_rate:
            problem += pulp.lpSum(x * size for x, size in streamed) <= self.ddr_rate * cycles, "ddr_bandwidth"

    def _starved(self, graph: StreamGraph, problem, channel, start, point) -> None:
        """The consumer's progress is no earlier than its own pace from its start plus the gaps between its
        producer's rows before the token it waits for, less what the deepest FIFO the sizing may give keeps it
        busy through in each (`cost.row_gaps`, `cost.starved_cover`): through a FIFO of a few pixels, a producer
        that writes faster than its consumer reads is held to its pace, and the consumer waits out every gap."""
        producer, consumer = channel.producer, channel.consumer
        out = graph.process(producer).outputs.index(channel.name)
        into = graph.process(consumer).inputs.index(channel.name)
        cover = starved_cover(graph, channel.name)
        for j, rows in enumerate(starved_rows(graph, graph.process(consumer))[into]):
            if rows:
                own = self.timed(consumer, lambda c, j=j: c.progress[j] - rows * cover * c.cycles)
                gaps = self.timed(producer, lambda c, j=j: c.row_gaps[out][j])
                problem += point[consumer][j] >= start[consumer] + own + gaps, f"starved_{channel.name}_{j}"

    def _record(self, graph: StreamGraph, problem, finish):
        """When the output writer has sent an image's record: each output once its producer finished and
        the writer has sent the outputs before it and its own words."""
        first, *later = [graph.channels[port.channel] for port in graph.outputs]
        sent = finish[first.producer]
        for k, channel in enumerate(later, 1):
            writing = pulp.lpSum(x * writer_cycles(graph, channel, choice)
                                 for x, choice in zip(self.pick[channel.producer], self.options[channel.producer]))
            at = pulp.LpVariable(f"record_{k}", lowBound=0)
            problem += at >= finish[channel.producer], f"record_{k}_made"
            problem += at >= sent + writing, f"record_{k}_sent"
            sent = at
        return sent

    def sample(self, name: str, figure):
        """The chosen candidate's `figure(cost)`."""
        return pulp.lpSum(x * figure(c) for x, c in zip(self.pick[name], self.costs[name]))

    def variables(self) -> list:
        return [x for xs in self.pick.values() for x in xs]

    def picked(self, values: dict[str, float] | None) -> dict[str, int] | None:
        """The design the solver's values describe; None unless they are one (it also reports the values of
        a search that stopped before it found any design)."""
        if values is None or any(0.0001 < values.get(x.name, 0.0) < 0.9999 for x in self.variables()):
            return None
        picked = {}
        for name, xs in self.pick.items():
            ones = [j for j, x in enumerate(xs) if values.get(x.name, 0.0) >= 0.9999]
            if len(ones) != 1:
                return None
            picked[name] = ones[0]
        return picked if self.fits(picked) and self._lanes_agree(picked) else None

    def _lanes_agree(self, picked: dict[str, int]) -> bool:
        for channel in self.graph.channels.values():
            if channel.producer in picked and channel.consumer in picked:
                producer, consumer = self.graph.process(channel.producer), self.graph.process(channel.consumer)
                made = self.options[producer.name][picked[producer.name]].lanes_out[producer.outputs.index(channel.name)]
                taken = self.options[consumer.name][picked[consumer.name]].lanes_in[consumer.inputs.index(channel.name)]
                if made != taken:
                    return False
        return True

    def value_of(self, picked: dict[str, int]) -> int:
        """The objective of a design, as the ILP counts it."""
        costs = {name: self.costs[name][j] for name, j in picked.items()}
        if self.goal == "sum":
            return sum(c.cycles for c in costs.values())
        if self.goal == "interval":
            return max(c.cycles for c in costs.values())
        if self.goal == "resources":
            return objective_value(self.footprint(picked), len(self.pick), self.whole)
        return self.latency_of(picked)

    def latency_of(self, picked: dict[str, int]) -> int:
        return design_latency(self.graph, self.options, self.costs, picked)

    def fits(self, picked: dict[str, int]) -> bool:
        within = all(sum(getattr(self.costs[name][j], r) for name, j in picked.items()) <= getattr(self.budget, r)
                     for r in RESOURCES)
        return within and (self.latency_limit is None or self.latency_of(picked) <= self.latency_limit)

    def describe(self, picked: dict[str, int], reserved: dict[str, int]) -> dict[str, int]:
        """A design's latency and resources (with the `reserved` FIFO memory), as report.json gives them."""
        used = {r: sum(getattr(self.costs[name][j], r) for name, j in picked.items()) + reserved.get(r, 0)
                for r in RESOURCES}
        return {"cycles": self.latency_of(picked)} | used


def _largest_figure(costs: list[Cost]) -> int:
    """The largest cycles, fill, progress, lag, push, row gap or first lag of any of a process's candidates."""
    return max(max((c.cycles, c.fill) + c.progress + sum(c.lags, ()) + sum(c.pushes, ()) + sum(c.row_gaps, ())
                   + c.first_lags) for c in costs)


@dataclass(frozen=True)
class Timeline:
    """Per process, the least times `Model._latency`'s rows allow: its start, the write of its first output
    token, its progress curve (the output tokens at 1/K, ..., K/K) and its finish."""
    start: dict[str, int]
    first: dict[str, float]
    point: dict[str, list]
    finish: dict[str, float]


def timeline(graph: StreamGraph, costs: dict[str, Cost], choices: dict[str, Choice]) -> Timeline:
    """The least schedule of the design `choices` under the latency model."""
    times = Timeline(dict.fromkeys(costs, 0), {}, {}, {})
    for p in graph.processes:  # topological order
        cost = costs[p.name]
        first = times.first[p.name] = _first(graph, p, costs, choices, times)
        curve = times.point[p.name] = _curve(graph, p, costs, choices, times)
        times.finish[p.name] = max(times.start[p.name] + cost.cycles, curve[-1] + cost.cycles - cost.progress[-1])
        for channel in p.outputs:
            consumer = graph.channels[channel].consumer
            if consumer in costs:  # an integer in the ILP
                times.start[consumer] = max(times.start[consumer], math.ceil(first - INTEGRAL))
    return times


def estimate(graph: StreamGraph, costs: dict[str, Cost], choices: dict[str, Choice]) -> tuple[int, int]:
    """(throughput cycles, end-to-end latency) under the ILP's latency model (see `Model._latency`)."""
    times = timeline(graph, costs, choices)
    head, *later = [graph.channels[port.channel] for port in graph.outputs]
    sent = times.finish[head.producer]
    for channel in later:
        sent = max(times.finish[channel.producer], sent + writer_cycles(graph, channel, choices[channel.producer]))
    finished = [times.finish[p.name] for p in graph.processes
                if any(graph.channels[c].consumer not in costs for c in p.outputs)]
    written = max(curve[-1] for curve in times.point.values())
    return max(c.cycles for c in costs.values()), math.ceil(max(*finished, sent, written))


def design_latency(graph: StreamGraph, options, costs, picked: dict[str, int]) -> int:
    """The latency `estimate` gives the design `picked` (a candidate of each process, by index)."""
    return estimate(graph, {name: costs[name][j] for name, j in picked.items()},
                    {name: options[name][j] for name, j in picked.items()})[1]


def _first(graph: StreamGraph, p, costs: dict[str, Cost], choices: dict[str, Choice], times: Timeline) -> float:
    """When `p` writes its first output token, as `Model._latency`'s rows bound it (its producers' in `times`)."""
    cost, form = costs[p.name], choices[p.name].loop_form
    bounds = [times.start[p.name] + cost.fill]
    for c, share, lag in zip(p.inputs, first_fractions(graph, p, *form), cost.first_lags):
        producer = graph.channels[c].producer
        if producer in costs:
            bounds.append(at_share([times.first[producer]] + times.point[producer], share) + lag)
    return max(bounds)


def _curve(graph: StreamGraph, p, costs: dict[str, Cost], choices: dict[str, Choice], times: Timeline) -> list:
    """The progress curve of `p`, as `Model._latency`'s rows bound it (its producers' in `times`)."""
    cost, curve, start = costs[p.name], [], times.start[p.name]
    form = choices[p.name].loop_form
    for j, at in enumerate(cost.progress):
        bounds = [start + at]
        if j:
            bounds.append(curve[-1] + at - cost.progress[j - 1])
        for i, (c, shares, after) in enumerate(zip(p.inputs, input_fractions(graph, p, *form),
                                                   samples_after(graph, p, *form))):
            producer = graph.channels[c].producer
            if producer in costs:
                produced = times.point[producer]
                bounds.append(at_share([times.first[producer]] + produced, shares[j]) + cost.lags[i][j])
                bounds += [produced[k] + cost.pushes[i][k] for k, pushed in enumerate(after) if pushed == j]
                bounds.append(_starved_at(graph, p, i, j, costs, start))
        curve.append(max(bounds))
    return curve


def _starved_at(graph: StreamGraph, p, into: int, j: int, costs: dict[str, Cost], start: int) -> float:
    """`Model._starved`'s bound on the point j of `p` (started at `start`) from its input `into`."""
    channel = graph.channels[p.inputs[into]]
    rows = starved_rows(graph, p)[into][j]
    if not rows:
        return 0
    gaps = costs[channel.producer].row_gaps[graph.process(channel.producer).outputs.index(channel.name)][j]
    cost = costs[p.name]
    return start + cost.progress[j] - rows * starved_cover(graph, channel.name) * cost.cycles + gaps


def writer_cycles(graph: StreamGraph, channel, choice: Choice) -> int:
    """The output writer's cycles for one image of the accelerator output `channel` (its `pack_axis`)."""
    producer = graph.process(channel.producer)
    return pack_adapter(channel.values, choice.lanes_out[producer.outputs.index(channel.name)]).cycles


def at_share(curve: list, share: float):
    """A progress curve's time at `share` of the tokens: `curve` holds the first token's time and the
    times at 1/K, ..., K/K; in between, linear (a linear expression of ILP variables, or a number)."""
    position = share * PROGRESS_SAMPLES
    below = min(int(position), PROGRESS_SAMPLES - 1)
    weight = position - below
    if weight <= 0:
        return curve[below]
    return curve[below] * (1 - weight) + curve[below + 1] * weight
