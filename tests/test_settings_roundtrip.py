"""The folding file round-trips: the settings.yaml of a design, read back as `ming build --settings` reads it, pins
that design and no other (unroll factors, lanes, multipliers, requantizers, line-buffer and weight memories, FIFO
depths): for a random valid schedule of every test network that lifts in a second or so, for the ILP's design
of a few of every frontend, and for hand-made graphs whose process and channel names YAML or the key form could
misread (no IREE: `unit`). One build end to end: `ming build --settings` of a build's own settings.yaml, and of
the same keyed by the model's node names, gives the same C++ and schedule.

"Pins that design" is checked without solving: among the candidates the ILP would have under the pins
(`ilp.candidates`), the only ones left once every channel's lanes agree between its producer and consumer give
the same schedule. Whatever the ILP then optimises, it has one design to choose."""

from __future__ import annotations

import collections
import json
import random
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from ming_py.boards import load_board
from ming_py.dataflow import Channel, Process, Schedule, StreamGraph
from ming_py.emit.folding import settings_yaml
from ming_py.emit.reports import report
from ming_py.ilp.cost import Choice, process_cost
from ming_py.ilp.pins import Pins, parse_assignments, resolve
from ming_py.ilp.solve import schedule_of
from ming_py.ilp.candidates import candidates

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
WEIGHT_MEMORIES = ("bram", "lutram", "uram")  # every memory a design's weights may take


# ---- the check --------------------------------------------------------------------------------------------


def folding_file(graph: StreamGraph, schedule: Schedule, costs: dict, directory: Path) -> Path:
    """The settings.yaml a build of `schedule` writes (`costs`: its processes' estimates)."""
    data = report(graph, schedule, load_board("kv260"),
                  SimpleNamespace(costs=costs, totals={"solver": {"rule": "the test's schedule"}, "cycles": 1_000,
                                                     "latency_us": 5.0, "estimated_cycles": 990}))
    path = directory / "settings.yaml"
    path.write_text(settings_yaml(data))
    return path


def pinned_choices(graph: StreamGraph, pins: Pins, weight_memories=WEIGHT_MEMORIES) -> dict[str, list[Choice]]:
    """Each process's candidates under `pins` whose lanes its neighbours' candidates can meet."""
    return agreeing({p.name: candidates(graph, p, pins, True, weight_memories) for p in graph.processes}, graph)


def agreeing(options: dict[str, list[Choice]], graph: StreamGraph) -> dict[str, list[Choice]]:
    """`options` less the candidates whose lanes on a channel no candidate of the process at its other end
    shares, until none is left to drop (arc consistency over the lane ties)."""
    ends = [(c, graph.process(c.producer) if c.producer in options else None,
             graph.process(c.consumer) if c.consumer in options else None) for c in graph.channels.values()]
    changed = True
    while changed:
        changed = False
        for channel, producer, consumer in ends:
            if producer is None or consumer is None:
                continue
            out_slot, in_slot = producer.outputs.index(channel.name), consumer.inputs.index(channel.name)
            shared = {c.lanes_out[out_slot] for c in options[producer.name]} & \
                {c.lanes_in[in_slot] for c in options[consumer.name]}
            for name, lanes in ((producer.name, lambda c: c.lanes_out[out_slot]),
                                (consumer.name, lambda c: c.lanes_in[in_slot])):
                kept = [c for c in options[name] if lanes(c) in shared]
                changed |= len(kept) != len(options[name])
                options[name] = kept
    return options


def assert_pins_reproduce(graph: StreamGraph, schedule: Schedule, path: Path):
    """The settings file at `path`, read as --settings reads it, leaves the ILP `schedule` alone: offered every
    weight memory where the design moved some weights, else ROMs where their size puts them (the ILP offers other
    memories only where the ROMs cannot all fit, so some move: `emit.folding._process`)."""
    pins = resolve(parse_assignments([], [path]), graph)
    left = pinned_choices(graph, pins, WEIGHT_MEMORIES if pins.weights else ("bram",))
    for process in graph.processes:
        schedules = {_as_schedule(graph, process.name, c) for c in left[process.name]}
        wanted = (schedule.of(process.name), tuple(schedule.lanes_of(c) for c in process.inputs + process.outputs))
        assert schedules == {wanted}, f"{process.name}: the settings leave {sorted(map(str, schedules))}"
    assert {c: pins.depths[c] for c in graph.channels} == {c: schedule.depth_of(c) for c in graph.channels}


def _as_schedule(graph: StreamGraph, name: str, choice: Choice) -> tuple:
    """The process's schedule and the lanes of its channels under one candidate."""
    process, alone = graph.process(name), schedule_of(graph, {name: choice})
    return alone.of(name), tuple(alone.lanes[c] for c in process.inputs + process.outputs)


# ---- random valid schedules ---------------------------------------------------------------------------------


def random_schedule(graph: StreamGraph, seed: int, weight_memories=WEIGHT_MEMORIES) -> tuple[Schedule, dict]:
    """A random schedule the ILP could choose (every process a candidate, lanes agreeing on every channel) with
    random FIFO depths, and its processes' costs."""
    rng = random.Random(seed)
    options = agreeing({p.name: candidates(graph, p, Pins(), True, weight_memories) for p in graph.processes}, graph)
    for process in graph.processes:
        rng.shuffle(options[process.name])
        for choice in options[process.name]:
            trial = agreeing(dict(options) | {process.name: [choice]}, graph)
            if all(trial.values()):
                options = trial
                break
        else:
            raise AssertionError(f"{process.name}: no candidate agrees with its neighbours' lanes")
    chosen = {name: choices[0] for name, choices in options.items()}
    schedule = replace(schedule_of(graph, chosen), depths={c: rng.randint(1, 64) for c in graph.channels})
    return schedule, {name: process_cost(graph, graph.process(name), c) for name, c in chosen.items()}


# ---- hand-made graphs: names YAML and the key form could misread (no IREE) ---------------------------------


AWKWARD = ("/layer1/layer1.0/conv1/Conv", "model/conv2d/BiasAdd", "model_1/conv2d/Relu;model_1/conv2d/Conv2D",
           "a b: c", "yes", "1e3", "x=y", "#1", "[x]")


def awkward_chain(names: tuple[str, str, str], channel_names: tuple[str, ...]) -> StreamGraph:
    """tests/test_unit_dse.chain with its processes and channels renamed."""
    from test_unit_dse import chain

    graph = chain()
    process_names = dict(zip(("conv", "pw", "pool"), names))
    channel_of = dict(zip(graph.channels, channel_names))

    def renamed(p: Process) -> Process:
        return replace(p, name=process_names[p.name], inputs=tuple(channel_of[c] for c in p.inputs),
                       outputs=tuple(channel_of[c] for c in p.outputs))

    channels = {channel_of[c.name]: Channel(channel_of[c.name], process_names.get(c.producer, c.producer),
                                            process_names.get(c.consumer, c.consumer), c.channels, c.height, c.width)
                for c in graph.channels.values()}
    ports = [replace(port, channel=channel_of[port.channel]) for port in (graph.input,) + graph.outputs]
    return StreamGraph(graph.name, [renamed(p) for p in graph.processes], channels, ports[0], tuple(ports[1:]))


NAMINGS = [
    (AWKWARD[:3], AWKWARD[3:7]),
    (AWKWARD[5:8], AWKWARD[:3] + ("conv",)),
    (("p", "q", "r"), ("p", "q", "r", "s")),  # each channel named as a process: CHANNEL.depth beside PROCESS.unroll
]


@pytest.mark.unit
@pytest.mark.parametrize("names, channel_names", NAMINGS)
def test_random_schedules_of_awkwardly_named_processes_round_trip(names, channel_names, tmp_path):
    graph = awkward_chain(names, channel_names)
    for seed in range(4):
        schedule, costs = random_schedule(graph, seed)
        assert_pins_reproduce(graph, schedule, folding_file(graph, schedule, costs, tmp_path))


# ---- every cheap test network (lifted through IREE) ---------------------------------------------------------


def _zoo(name):
    import zoo
    return lambda directory: zoo.quantized_model(name, directory)


def _tflite(name):
    def write(directory):
        import tflite_models
        path = directory / f"{name}.tflite"
        path.write_bytes(getattr(tflite_models, name)())
        return path
    return write


def _file(path):
    return lambda directory: path


def networks() -> dict:
    import zoo

    found = {"example": _file(REPO / "examples" / "tiny_cnn.onnx")}
    found |= {f"zoo/{name}": _zoo(name) for name in sorted(zoo.MODELS)}
    found |= {f"tflite/{name}": _tflite(name) for name in TFLITE}
    for folder in ("converted", "keras", "torch", "published"):
        found |= {f"{folder}/{path.name}": _file(path) for path in sorted((DATA / folder).iterdir())
                  if path.suffix in (".onnx", ".tflite") and f"{folder}/{path.name}" not in LEFT_OUT}
    return found


TFLITE = ("tiny_conv", "every_op", "conv_stack", "residual", "pooled", "float_io", "classifier", "mobilenet",
          "resnet8", "autoencoder", "global_mean", "inception")
# networks left out: the largest (each lifts and enumerates its candidates for several seconds) and those ming
# refuses
LEFT_OUT = {"keras/mobilenet_v2.tflite", "keras/mobilenet_v3_small.tflite",
            "keras/mobilenet_v3_small_minimalistic.tflite", "keras/efficientnet_lite_block.tflite",
            "published/mobilenet_v1_0.25_128_quant.tflite", "published/vww_96_int8.tflite",
            "published/pretrainedResnet_quant.tflite",
            "keras/dense_to_map.tflite", "keras/ssd_flat_head.tflite", "keras/ssd_head.tflite", "torch/fake_quant.onnx",
            "torch/pt2e_x86.onnx", "torch/pt2e_xnnpack.onnx", "torch/pt2e_xnnpack_int32_bias.onnx"}
NETWORKS = networks()


@pytest.fixture(scope="module")
def designs(tmp_path_factory):
    """design(name) -> the network's stream graph, or None where ming refuses it."""
    from ming_py import steps
    from ming_py.errors import MingError
    from ming_py.pipeline import lift

    directory = tmp_path_factory.mktemp("models")
    cache = {}

    def design(name):
        if name not in cache:
            try:
                cache[name] = steps.stream(lift(NETWORKS[name](directory)))
            except MingError:
                cache[name] = None
        return cache[name]

    return design


def lifted(designs, name):
    streamed = designs(name)
    if streamed is None:
        pytest.skip("ming refuses the network")
    return streamed


# the ILP's designs, FIFOs sized, as `ming build` makes them: a few networks of every frontend and shape (the ILP
# takes seconds a network; tests/build_hashes.py rebuilds them all)
BUILT = ("example", "zoo/add_conv_branches", "zoo/concat_branches", "zoo/lenet", "tflite/residual",
         "tflite/classifier", "torch/eager_ptq.onnx", "converted/mobilenet.onnx")


@pytest.mark.parametrize("name", BUILT)
def test_the_folding_file_pins_the_ilp_design(designs, name, tmp_path):
    from ming_py import steps
    from ming_py.options import BuildOptions

    streamed = lifted(designs, name)
    graph, solution = streamed.stream_graph, steps.explore(streamed, BuildOptions()).solution
    assert_pins_reproduce(graph, solution.schedule, folding_file(graph, solution.schedule, solution.costs, tmp_path))


@pytest.mark.parametrize("name", NETWORKS)
def test_the_folding_file_pins_a_random_schedule(designs, name, tmp_path):
    graph = lifted(designs, name).stream_graph
    schedule, costs = random_schedule(graph, seed=sum(map(ord, name)))
    assert_pins_reproduce(graph, schedule, folding_file(graph, schedule, costs, tmp_path))


# ---- end to end: ming build, then ming build --settings of its settings.yaml -------------------------------


def ming(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ming_py.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def built(out: Path) -> tuple[dict, dict]:
    """The C++ of a build and its report's schedule (each process's and each channel's lanes and depth)."""
    report_data = json.loads((out / "report.json").read_text())
    return ({path.name: path.read_bytes() for path in sorted((out / "hls").glob("*.cpp"))},
            {"nodes": {n["name"]: n["schedule"] for n in report_data["nodes"]},
             "channels": {c["name"]: (c["lanes"], c["fifo_depth"]) for c in report_data["channels"]}})


def test_a_pytorch_export_rebuilt_from_its_settings_file_is_the_same_design(tmp_path):
    """PyTorch names its nodes /layer/layer.0/conv/Conv; the settings file, as written and keyed by those names
    (the reader takes a process's model node name too), builds the same C++."""
    import yaml

    from ming_py.emit.folding import _key

    model = DATA / "torch" / "eager_ptq.onnx"
    first = tmp_path / "first"
    result = ming("build", model, "--no-verify", "-q", "-o", first)
    assert result.returncode == 0, result.stderr
    copy = tmp_path / "copy.yaml"
    shutil.copy(first / "settings.yaml", copy)
    nodes = json.loads((first / "report.json").read_text())["nodes"]
    computing = collections.Counter(n["source"] for n in nodes)
    sources = {n["name"]: n["source"] for n in nodes if computing[n["source"]] == 1}  # a node one process computes
    assert any("/" in source for source in sources.values()), sources
    settings = yaml.safe_load(copy.read_text())
    by_source = tmp_path / "by_source.yaml"
    by_source.write_text("".join(f"{_key(sources.get(name, name))}: {json.dumps(value)}\n"
                                 for name, value in settings.items()))
    for settings_file in (copy, by_source):
        again = tmp_path / settings_file.stem
        result = ming("build", model, "--settings", settings_file, "--no-verify", "-q", "-o", again)
        assert result.returncode == 0, result.stderr
        assert built(again) == built(first)
