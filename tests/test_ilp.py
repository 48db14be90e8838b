"""Design-space exploration: cost models, the resource ILP, budgets, pins and sweeps."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zoo
from emit_helpers import stream_graph_of
from ming_py import reference
from ming_py.boards import load_board
from ming_py.build import BuildOptions, design
from ming_py.ilp.explore import explore
from ming_py.line_buffers import build_stream_graph
from ming_py.output import write_tree
from ming_py.csim import run_csim
from ming_py.process_spec import validate_schedule
from ming_py.ilp import Budget, Choice, process_cost, solve
from ming_py.ilp.candidates import smallest_design
from ming_py.ilp.pins import Pins
from ming_py.errors import MingError

NETWORKS = ["tiny_cnn", "lenet", "two_residual_stages", "dw_separable", "residual_block", "concat_branches"]


@pytest.fixture(scope="module")
def graphs(lifted):
    return {name: stream_graph_of(lifted(name)) for name in NETWORKS}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          derandomize=True)
@given(name=st.sampled_from(NETWORKS), board=st.sampled_from(["kv260", "zcu104", "ultra96v2", "pynq-z2", "u50"]),
       dsp=st.sampled_from(["3%", "5%", "20%", "50%", "100%"]), bram=st.sampled_from(["10%", "50%", "100%"]),
       objective=st.sampled_from(["latency", "sum"]))
def test_every_schedule_respects_every_budget(graphs, name, board, dsp, bram, objective):
    graph, target = graphs[name], load_board(board)
    budget = Budget.of(target, {"dsp": dsp, "bram18k": bram})
    try:
        solution = solve(graph, target, budget, objective)
    except MingError as exc:
        assert "no design fits" in str(exc)
        needs = smallest_design(graph)
        assert any(needs[r] > getattr(budget, r) for r in needs)  # infeasible only when even the least design is
        return
    assert validate_schedule(graph, solution.schedule) == []
    for resource in ("dsp", "bram18k", "uram", "lut"):
        assert solution.totals[resource] <= getattr(budget, resource), resource
    assert solution.totals["cycles"] >= solution.totals["roofline_cycles"]  # the roofline bounds every design
    for channel in graph.channels.values():  # MING's stream constraint
        if channel.producer in solution.choices and channel.consumer in solution.choices:
            producer, consumer = graph.process(channel.producer), graph.process(channel.consumer)
            assert solution.choices[producer.name].lanes_out[producer.outputs.index(channel.name)] == \
                solution.choices[consumer.name].lanes_in[consumer.inputs.index(channel.name)]


@pytest.mark.parametrize("name", NETWORKS)
def test_more_dsp_is_never_slower(graphs, name):
    """Latency never grows with the DSP share, and with the LUTs held to 10 % (so the fabric cannot take all the
    MACs) the DSPs pay off."""
    board = load_board("kv260")
    for lut in ("100%", "10%"):
        latencies = [solve(graphs[name], board, Budget.of(board, {"dsp": share, "lut": lut})).totals["cycles"]
                     for share in ("3%", "5%", "10%", "20%", "50%", "100%")]
        assert latencies == sorted(latencies, reverse=True), lut
    assert latencies[0] > latencies[-1]


@pytest.mark.parametrize("name", NETWORKS)
def test_every_network_fits_a_small_dsp_share_with_fabric_multipliers(graphs, name):
    """At 3 % of the KV260's DSPs (37) every test network builds: MACs go to LUT fabric or share DSPs
    in pairs where their DSPs would not fit, and the design stays within every budget."""
    board = load_board("kv260")
    budget = Budget.of(board, {"dsp": "3%"})
    solution = solve(graphs[name], board, budget)
    assert solution.totals["dsp"] <= budget.dsp and solution.totals["lut"] <= budget.lut
    multipliers = {choice.multipliers for choice in solution.choices.values()}
    dsp_only = sum(process_cost(graphs[name], graphs[name].process(p), Choice(c.unroll, c.lanes_in, c.lanes_out,
                                                                                 c.line_buffer_in)).dsp
                   for p, c in solution.choices.items())
    assert multipliers != {"dsp"} and dsp_only > budget.dsp  # the same schedule all in DSPs would not fit


@pytest.mark.parametrize("name,share", [("tiny_cnn", "5%"), ("two_residual_stages", "20%"), ("lenet", "100%"),
                                        ("concat_branches", "10%")])
def test_ilp_scheduled_designs_simulate_exactly(lifted, tmp_path, name, share):
    graph = lifted(name)
    board, solution, _ = explore(build_stream_graph(graph), BuildOptions(limits={"dsp": share}))
    assert any(f > 1 for choice in solution.choices.values() for _, f in choice.unroll)
    write_tree(design(graph, board, solution=solution).files, tmp_path / "out")
    x = zoo.random_input(name, 4)
    output = graph.outputs[0].name
    assert np.array_equal(run_csim(tmp_path / "out", x)[output], reference.run(graph, x)[output])


def test_latency_objective_beats_sum_on_its_own_measure(graphs):
    board = load_board("kv260")
    budget = Budget.of(board, {"dsp": "20%"})
    latency = solve(graphs["two_residual_stages"], board, budget, "latency").totals["cycles"]
    summed = solve(graphs["two_residual_stages"], board, budget, "sum").totals["cycles"]
    assert latency <= summed


def test_pins_are_respected(graphs):
    board = load_board("kv260")
    graph = graphs["tiny_cnn"]
    pins = Pins(unroll={"conv2": {"oc": 4, "ic": 2}}, multipliers={"conv2": "fabric"})
    solution = solve(graph, board, Budget.of(board), pins=pins)
    assert solution.choices["conv2"].factor("oc") == 4 and solution.choices["conv2"].factor("ic") == 2
    assert solution.choices["conv2"].multipliers == "fabric"


def test_cost_model_trends(graphs):
    graph = graphs["tiny_cnn"]
    conv2 = graph.process("conv2")
    slow = process_cost(graph, conv2, Choice((("oc", 1), ("ic", 1), ("k", 1)), (1,), (1,)))
    fast = process_cost(graph, conv2, Choice((("oc", 4), ("ic", 8), ("k", 3)), (8,), (4,)))
    assert fast.cycles < slow.cycles
    assert fast.dsp == 4 * 8 * 3 + 2 * 4 and slow.dsp == 1 + 2  # MAC lanes + 2 per requantization lane


def ming(*args):
    return subprocess.run([sys.executable, "-m", "ming_py.cli", *map(str, args)], capture_output=True, text=True)


def test_infeasible_budget_names_the_least_any_design_needs(quantized, tmp_path):
    """500 LUTs hold no design (each process's control alone takes 300); a DSP budget no longer stops one,
    the fabric takes the multipliers."""
    result = ming("build", quantized("tiny_cnn"), "--lut", "500", "-o", tmp_path / "out")
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert "no design fits" in last and "every design needs at least" in last
    assert "LUT 500 is what --lut allows" in last
    assert not (tmp_path / "out").exists()


def test_conflicting_and_invalid_pins_are_clear_errors(quantized, tmp_path):
    model = quantized("tiny_cnn")
    settings_file = tmp_path / "pins.json"
    settings_file.write_text(json.dumps({"conv2": {"unroll": {"oc": 8}}}))
    conflict = ming("build", model, "--set", "conv2.unroll.oc=4", "--settings", settings_file, "-o", tmp_path / "a")
    assert conflict.returncode == 2 and "conflicting settings for conv2.unroll.oc" in conflict.stderr
    invalid = ming("build", model, "--set", "conv2.unroll.oc=3", "-o", tmp_path / "b")
    assert invalid.returncode == 2 and "must divide" in invalid.stderr
    unknown = ming("build", model, "--set", "nope.unroll.oc=2", "-o", tmp_path / "c")
    assert unknown.returncode == 2 and "not a setting of this design" in unknown.stderr
    assert not any((tmp_path / d).exists() for d in "abc")


def test_pinned_build_reports_the_pinned_factors(quantized, tmp_path):
    settings_file = tmp_path / "pins.yaml"
    settings_file.write_text("conv2.unroll.oc: 8\nconv1_to_pool1.depth: 32\n")
    result = ming("build", quantized("tiny_cnn"), "--settings", settings_file, "--dsp", "30%", "-q",
                  "-o", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    conv2 = next(n for n in data["nodes"] if n["name"] == "conv2")
    assert conv2["schedule"]["unroll"]["oc"] == 8
    assert next(c for c in data["channels"] if c["name"] == "conv1_to_pool1")["fifo_depth"] == 32
    totals = data["totals"]
    for key in ("cycles", "latency_us", "dsp", "bram18k", "uram", "lut", "roofline_cycles", "solver"):
        assert key in totals
    assert totals["dsp"] <= int(0.3 * 1248)
    for node in data["nodes"]:
        assert {"cycles", "dsp", "bram18k", "uram", "lut"} <= node.keys()


def test_sweep_writes_table_csv_json_and_plot(quantized, tmp_path):
    result = ming("sweep", quantized("lenet"), "--board", "kv260", "--dsp", "5%,20%,100%", "-o", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") >= 4 and "3/3" in result.stdout
    rows = json.loads((tmp_path / "sweep.json").read_text())["points"]
    assert [r["dsp_budget"] for r in rows] == [62, 249, 1248]
    cycles = [r["cycles"] for r in rows]
    assert cycles == sorted(cycles, reverse=True)
    assert (tmp_path / "sweep.csv").read_text().splitlines()[0].startswith("dsp_budget,")
    assert (tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tight_budget_needs_a_search_and_gives_one_design(graphs):
    board = load_board("kv260")
    budget = Budget.of(board, {"dsp": "20%"})
    graph = graphs["two_residual_stages"]
    assert solve(graph, board, budget, node_limit=0).status != "optimal"  # the root alone does not prove it
    first, second = solve(graph, board, budget), solve(graph, board, budget)
    assert first.status == second.status == "optimal"
    assert first.choices == second.choices and first.schedule == second.schedule
    assert first.totals == second.totals


def test_builds_in_separate_processes_are_byte_identical(quantized, tmp_path):
    model = quantized("two_residual_stages")
    for out in ("a", "b"):
        result = ming("build", model, "--dsp", "20%", "-q", "-o", tmp_path / out)
        assert result.returncode == 0, result.stderr
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert Path("report.json") in files
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_status_says_optimal_only_when_proven(graphs):
    board = load_board("kv260")
    budget = Budget.of(board, {"dsp": "20%"})
    graph = graphs["two_residual_stages"]
    stopped = solve(graph, board, budget, node_limit=0)
    proven = solve(graph, board, budget)
    gap = re.fullmatch(r"feasible \(gap (\d+(?:\.\d+)?)%\)", stopped.status)
    assert gap and float(gap.group(1)) > 0
    assert stopped.totals["solver"]["status"] == stopped.status
    assert proven.status == proven.totals["solver"]["status"] == "optimal"
    assert stopped.totals["cycles"] >= proven.totals["cycles"]
    # the gap is measured against a true lower bound: the optimum lies inside it
    assert proven.totals["cycles"] >= stopped.totals["cycles"] * (1 - float(gap.group(1)) / 100) - 1


def test_no_design_fits_shows_the_users_budget(quantized, tmp_path):
    result = ming("build", quantized("tiny_cnn"), "--lut", "1", "-o", tmp_path / "out")
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert "no design fits the budget (" in last and "LUT 1;" in last
    assert "the FIFOs need LUT" in last and "LUT -" not in last


def _overshooting(exploration, repair_fails: bool):
    """`_sized_design` whose first design's sized FIFOs take 3 BRAM18K and 155 LUTs more than the search set aside
    and charged for them, and (with `repair_fails`) where no design has the unroll factors the search is given; the
    calls' pins and reservations, and the first solution and its charge."""
    sized = exploration._sized_design
    calls, first = [], []

    def sized_design(stream_graph, board, budget, options, pins, fifos, reserved, targets, known):
        calls.append((pins, dict(reserved)))
        if len(calls) == 1:
            solution = sized(stream_graph, board, budget, options, pins, fifos, reserved, targets, known)[0]
            charged = fifos.total(solution.choices)
            first.extend((solution, charged))
            raise exploration.FifosOverBudget("over", {"fifo_bram18k": reserved["bram18k"] + charged["bram18k"] + 3,
                                                       "fifo_lut": reserved["lut"] + charged["lut"] + 155}, solution)
        if pins.unroll and repair_fails:
            raise exploration.NoDesignFits("none with those unroll factors")
        return sized(stream_graph, board, budget, options, pins, fifos, reserved, targets, known)
    return sized_design, calls, first


@pytest.mark.parametrize("repair_fails", [False, True])
def test_fifos_sized_past_the_reservation_are_reserved_and_solved_again(lifted, monkeypatch, repair_fails):
    """When the sized FIFOs take more than the search set aside and charged for them, the schedule is solved once
    more with the difference set aside as well (that design no longer fits), not refused: first with the unroll
    factors of the fastest design the frugal design was measured against, then with the frugal design's (small
    searches), and where no design has them, over every unroll factor."""
    from ming_py.ilp import explore as exploration

    sized_design, calls, first = _overshooting(exploration, repair_fails)
    monkeypatch.setattr(exploration, "_sized_design", sized_design)
    _, solution, _ = exploration.explore(build_stream_graph(lifted("tiny_cnn")), BuildOptions(board="kv260"))
    (pins, reserved), repairs = calls[0], calls[1:]
    chosen = {name: dict(process.unroll) for name, process in first[0].schedule.processes.items()}
    tried = [first[0].fastest_unrolls] + ([chosen] if chosen != first[0].fastest_unrolls else [])
    assert not pins.unroll and first[0].fastest_unrolls
    assert all(kept == {"bram18k": reserved["bram18k"] + 3, "lut": reserved["lut"] + 155} for _, kept in repairs)
    if repair_fails:
        assert [kept_pins.unroll for kept_pins, _ in repairs[:-1]] == tried and repairs[-1][0] == pins
    else:
        assert len(repairs) == 1 and repairs[0][0].unroll == tried[0]
        assert {name: dict(process.unroll) for name, process in solution.schedule.processes.items()} == tried[0]
        assert solution.totals["solver"]["rule"].endswith(exploration.UNROLLS_KEPT)


def test_a_design_whose_fifos_overshoot_again_is_solved_again_with_more_set_aside_then_refused(lifted, monkeypatch):
    """Where the design solved again takes more for its FIFOs than was set aside and charged too, it is solved again
    with that difference set aside as well, REPAIRS times at most, then the build stops on the FIFOs (exit 2, not
    a design over budget)."""
    from ming_py.ilp import explore as exploration

    sized, calls = exploration._sized_design, []

    def overshooting(stream_graph, board, budget, options, pins, fifos, reserved, targets, known):
        calls.append((bool(pins.unroll), dict(reserved)))
        solution = sized(stream_graph, board, budget, options, pins, fifos, reserved, targets, known)[0]
        charged = fifos.total(solution.choices)
        raise exploration.FifosOverBudget("over", {"fifo_bram18k": reserved["bram18k"] + charged["bram18k"] + 2,
                                                   "fifo_lut": reserved["lut"] + charged["lut"] + 10}, solution)

    monkeypatch.setattr(exploration, "_sized_design", overshooting)
    with pytest.raises(exploration.FifosOverBudget):
        exploration.explore(build_stream_graph(lifted("tiny_cnn")), BuildOptions(board="kv260"))
    over_every_unroll = [reserved for kept, reserved in calls if not kept]
    first = over_every_unroll[0]
    assert over_every_unroll == [{"bram18k": first["bram18k"] + 2 * k, "lut": first["lut"] + 10 * k}
                                 for k in range(exploration.REPAIRS + 1)]
    assert all(reserved in over_every_unroll[1:] for kept, reserved in calls if kept)


def _least_of_each(costs) -> dict[str, int]:
    """Per resource, the sum over processes of the least any of the process's candidates needs."""
    return {r: sum(min(getattr(c, r) for c in candidates) for candidates in costs.values())
            for r in ("dsp", "bram18k", "uram", "lut")}


def _needs(figures: dict[str, int]) -> str:
    return ", ".join(f"{unit} {figures[r]}" for r, unit in
                     (("dsp", "DSP"), ("bram18k", "BRAM18K"), ("uram", "URAM"), ("lut", "LUT")))


@pytest.mark.unit
def test_no_design_fits_reports_the_least_of_the_candidates_the_ilp_was_given():
    """Two dense layers on the kv260 within 2,500 LUT: the bound is the sum over processes of the least any of
    their candidates (weights in URAM or LUTRAM, streamed from DDR) needs, the FIFOs' memory added; not the
    least parallel design with its weights as BRAM ROMs, which needs far more BRAM18K."""
    import hand_graphs
    from ming_py.ilp.budget import with_weight_port
    from ming_py.ilp.candidates import candidates_and_costs, weight_port_reservation
    from ming_py.ilp.solve import NoDesignFits

    graph = hand_graphs.map_graph("dense", (1024, 1, 1), (64, 1, 1))
    hand_graphs.conv(graph, "fc", "x", "h", 536)
    hand_graphs.conv(graph, "head", "h", "y", 64, seed=1)
    stream_graph, kv260 = build_stream_graph(graph), load_board("kv260")
    budget, fifos = Budget.of(kv260, {"lut": "2500"}), {"bram18k": 4, "lut": 100}
    with pytest.raises(NoDesignFits) as info:
        solve(stream_graph, kv260, budget, reserved=fifos)
    # the candidates of the search that offers weights from DDR (the first, without them, found no design either)
    less_fifos = Budget(**{r: getattr(budget, r) - fifos.get(r, 0) for r in ("dsp", "bram18k", "uram", "lut")})
    port = weight_port_reservation(stream_graph, kv260, less_fifos, None)
    given = with_weight_port(kv260, budget, port)
    available = Budget(**{r: getattr(given, r) - fifos.get(r, 0) for r in ("dsp", "bram18k", "uram", "lut")})
    options, costs = candidates_and_costs(stream_graph, Pins(), available, None, None, True, True)
    assert set(costs) == {"fc", "head"} and any(c.weights == "ddr" for cs in options.values() for c in cs)
    bound = {r: v + fifos.get(r, 0) for r, v in _least_of_each(costs).items()}
    message = str(info.value)
    assert f"every design needs at least {_needs(bound)} with the FIFOs (" in message
    assert bound["bram18k"] < given.bram18k < smallest_design(stream_graph)["bram18k"] + fifos["bram18k"]
    assert bound["lut"] > 2500 and "LUT 2,500 is what --lut allows" in message
    assert not any(f"{unit} {getattr(given, r):,} is" in message for r, unit in
                   (("dsp", "DSP"), ("bram18k", "BRAM18K"), ("uram", "URAM")))  # only LUT is short


@pytest.mark.unit
def test_no_design_fits_where_each_resource_fits_alone_says_the_combination_does_not():
    """A 3x3 convolution within DSP 5, no BRAM18K and 1,600 LUT: each process at its least of each fits, but
    within 1,600 LUT its candidates need either a BRAM18K or 6 DSP. The ILP proves it; the error says each fits
    alone and names the options to raise; 6 DSP hold a design."""
    import hand_graphs
    from ming_py.ilp.candidates import candidates_and_costs
    from ming_py.ilp.solve import NoDesignFits

    graph = hand_graphs.map_graph("one", (8, 6, 6), (8, 6, 6))
    hand_graphs.conv(graph, "c", "x", "y", 8, kernel=3, pad=1)
    stream_graph, kv260 = build_stream_graph(graph), load_board("kv260")
    budget = Budget(dsp=5, bram18k=0, uram=0, lut=1600)
    _, costs = candidates_and_costs(stream_graph, Pins(), budget, None)
    least = _least_of_each(costs)
    assert all(least[r] <= getattr(budget, r) for r in least)
    within = [c for c in costs["c"] if all(getattr(c, r) <= getattr(budget, r) for r in least)]
    assert within == []
    with pytest.raises(NoDesignFits) as info:
        solve(stream_graph, kv260, budget)
    assert str(info.value) == (
        f"no design fits the budget (DSP 5, BRAM18K 0, URAM 0, LUT 1600); every design needs at least "
        f"{_needs(least)} (each process at its least of each); each fits the budget alone, but no design fits them "
        f"all at once: raise --dsp (at most 1,248), --bram (at most 284) or --lut (at most 110,600)")
    solution = solve(stream_graph, kv260, Budget(dsp=6, bram18k=0, uram=0, lut=1600))
    assert solution.totals["dsp"] == 6 and solution.totals["bram18k"] == 0
