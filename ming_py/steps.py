"""The steps of a build, each a function from one value to the next:

    lift     model -> Graph                      (`ming_py.pipeline.lift`)
    stream   Graph -> Streamed                   the stream graph, built once
    explore  Streamed -> Explored                the ILP's schedule, its FIFOs sized (`ming_py.ilp.explore`: the
                                                 sizing may send the ILP back with more memory reserved), and its
                                                 cycle-level simulation
    save     Explored -> SavedDesign             what emit and verify need, without the model (`design_file`)
    emit     SavedDesign -> Design               every file of the build, in memory (with the exploration's
                                                 simulation where it has it, else simulating the design)
    verify   Design -> report's verification     (`ming_py.verify`, in `ming_py.build`)

`ming build` runs them all; `ming emit OUT` reads the SavedDesign the build wrote (OUT/design/) and runs the last
two again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from ming_py.boards import Board, load_board
from ming_py.classify import classify
from ming_py.emit.alveo import alveo_files
from ming_py.emit.deploy import deploy_files
from ming_py.emit.folding import settings_yaml
from ming_py.emit.hls import emit_hls
from ming_py.emit.identifiers import cpp_names
from ming_py.emit.reports import dataflow_mlir, host_data, report, report_json, report_markdown
from ming_py.emit.vivado import vivado_files
from ming_py.ilp import Solution
from ming_py.ilp.explore import explore as explore_schedule
from ming_py.line_buffers import build_stream_graph

from .dataflow import Schedule, StreamGraph
from .design_file import Estimates, ModelFile, SavedDesign, VerificationImage, design_files, schedule_fingerprint
from .errors import MingError
from .ir import Graph
from .options import BuildOptions
from .sample import image_record
from .simulate import HEADLINE, SimResult, headline, simulate_schedule
from .verify import IMAGES
from .weights_ddr import DDR_FILE, ddr_image, ddr_report, streamed_arrays, streamed_bands, streamed_rows
from .weights_load import WEIGHTS_FILE, load_ends, load_report, loaded_arrays, loaded_rows, weights_image


@dataclass
class Streamed:
    graph: Graph
    stream_graph: StreamGraph


@dataclass
class Explored:
    streamed: Streamed
    board: Board
    solution: Solution
    simulated: SimResult  # the cycle-level simulation of the solution's schedule, made by the exploration


@dataclass
class Design:
    """Every output file of a build, in memory, and what they were made of (`graph` None when emitted from a
    saved design: the model is not read again)."""

    graph: Graph | None
    stream_graph: StreamGraph
    schedule: Schedule
    board: Board
    files: dict[str, str | bytes]  # relative path -> text (binary: the testbench's sample, the saved arrays)
    saved: SavedDesign
    solution: Solution | None = None
    report: dict = field(default_factory=dict)  # report.json's data

    def record_verification(self, verification: dict) -> None:
        """report.json's "verification" (its first key) and report.md's account of it."""
        self.report = {"verification": verification} | {k: v for k, v in self.report.items() if k != "verification"}
        self.files["report.json"] = report_json(self.report)
        self.files["report.md"] = report_markdown(self.report)


def stream(graph: Graph) -> Streamed:
    return Streamed(graph, build_stream_graph(graph))


def explore(streamed: Streamed, options: BuildOptions) -> Explored:
    return Explored(streamed, *explore_schedule(streamed.stream_graph, options))


def save(streamed: Streamed, board: Board, schedule: Schedule | None = None, solution: Solution | None = None,
         model: Path | None = None) -> SavedDesign:
    """What emit and verify need of a design: `schedule` (or the solution's, or none unrolled), the solution's
    estimates, and the verification images computed by the golden model of the graph."""
    graph, stream_graph = streamed.graph, streamed.stream_graph
    schedule = schedule or (solution.schedule if solution else Schedule())
    estimates = None if solution is None else \
        Estimates(solution.costs, solution.totals, schedule_fingerprint(schedule), board.name)
    return SavedDesign(stream_graph, schedule, board.name, board.clock_mhz, estimates,
                       {k.name: classify(k).kernel_class for k in graph.kernels()},
                       {name: VerificationImage(*image_record(graph, stream_graph, make(graph)))
                        for name, (_, make) in IMAGES.items()},
                       None if model is None else ModelFile.of(model))


def saved_board(saved: SavedDesign) -> Board:
    return replace(load_board(saved.board), clock_mhz=saved.clock_mhz)


def emit(saved: SavedDesign, graph: Graph | None = None, solution: Solution | None = None,
         simulated: SimResult | None = None) -> Design:
    """Every output file of a saved design, in memory; the design itself included (design/). `simulated`: its
    cycle-level simulation where it is already made."""
    stream_graph, schedule, board = saved.stream_graph, saved.schedule, saved_board(saved)
    data = report(stream_graph, schedule, board, saved.estimates)
    simulated = simulate_schedule(stream_graph, schedule) if simulated is None else simulated
    data["totals"] = with_headline(data["totals"], simulated, board.clock_mhz)
    for node in data["nodes"]:
        node["class"] = saved.classes.get(node["name"], "data_movement")
    files = {f"hls/{name}": text for name, text in emit_hls(stream_graph, schedule, board).items()}
    sample = saved.images["sample"]
    files |= {"hls/input.bin": sample.raw_input, "hls/expected.bin": sample.expected}
    files |= weight_files(stream_graph, schedule, board, data)
    ddr = ddr_weight_files(stream_graph, schedule, data)
    files |= ddr
    streamed = data["totals"].get("weights_ddr")
    if board.interface == "zynq_axis_dma":
        hardware = vivado_files(stream_graph, board, "weights_load" in data["totals"], streamed)
    else:  # refuses a design that streams weights before anything is written for it
        hardware = alveo_files(stream_graph, board, data["totals"].get("weights_load", {}).get("words", 0), streamed)
    files |= deploy_files(stream_graph, board, data["totals"].get("weights_load"), streamed,
                          ddr.get(f"hls/{DDR_FILE}", b""))
    files |= hardware
    files |= {
        "report.json": report_json(data),
        "report.md": report_markdown(data),
        "dataflow.mlir": dataflow_mlir(stream_graph, schedule),
        "host.json": _host_json(saved, board, data["totals"].get("weights_load")),
    }
    if saved.estimates is not None:
        files["settings.yaml"] = settings_yaml(data)
    files |= design_files(saved)
    return Design(graph, stream_graph, schedule, board, files, saved, solution, data)


def with_headline(totals: dict, simulated: SimResult, clock_mhz: float) -> dict:
    """The report's totals with the simulation's headline, whatever the saved estimates say (an edited design has
    none): the latency and interval of a design that completes; none for one that deadlocks (the cycle the
    simulation stopped in is no latency), its deadlock instead."""
    outcome = {"simulated_first_output_cycles": simulated.first_output_cycles, "simulated_deadlock": simulated.deadlock}
    if simulated.deadlock is None:
        return totals | headline(simulated, clock_mhz) | outcome
    return {key: value for key, value in totals.items() if key not in HEADLINE} | outcome


def _host_json(saved: SavedDesign, board: Board, weights: dict | None) -> str:
    """host.json, with the model file it was built from where that is known (for `ming csim --trace`)."""
    host = host_data(saved.stream_graph, board, weights)
    if saved.model_file is not None:
        host["model_file"] = {"path": saved.model_file.path, "sha256": saved.model_file.sha256}
    return json.dumps(host, indent=2) + "\n"


def ddr_weight_files(stream_graph, schedule: Schedule, data: dict) -> dict[str, bytes]:
    """hls/weights_ddr.bin where weights stream from DDR (`ming_py.weights_ddr`), described in the report's totals
    ("weights_ddr"): nothing otherwise."""
    rows = streamed_rows(stream_graph, schedule)
    if not rows:
        return {}
    image = ddr_image(rows)
    ports = {name: cpp_names(stream_graph).arrays[name]["weights"] for name in rows}
    data["totals"]["weights_ddr"] = ddr_report(streamed_arrays(rows, streamed_bands(stream_graph, schedule)), image, ports)
    return {f"hls/{DDR_FILE}": image}


def weight_files(stream_graph, schedule: Schedule, board: Board, data: dict) -> dict[str, bytes]:
    """hls/weights.bin and deploy/weights.bin where weights are in URAM (`ming_py.weights_load`), recorded in the
    report's totals ("weights_load"): nothing otherwise."""
    rows = loaded_rows(stream_graph, schedule)
    if not rows:
        return {}
    image = weights_image(rows)
    parts = loaded_arrays(rows)
    first = simulate_schedule(stream_graph, schedule, starts=load_ends(parts))
    if first.deadlock:  # the loader depends on no image stream: a deadlock here is a bug of ming's
        raise MingError(f"the first image after the weight load deadlocks: {first.deadlock[0]}")
    # the first image after reset, its processes waiting for their weights (the cycle-level simulation)
    data["totals"]["weights_load"] = load_report(parts, image, board.clock_mhz) | {
        "first_image_simulated_cycles": first.cycles}
    return {f"hls/{WEIGHTS_FILE}": image, f"deploy/{WEIGHTS_FILE}": image}
