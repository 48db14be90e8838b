"""The designs of the test suite's own model files (tests/data: converters' and frameworks' models, the published
ones) lay out every array of every process as its storage plan says, and the real-converter and published models
fit their memory ports (`ming csim --check-ports`).

An array needs its partition where more lanes read it per iteration than a memory bank has ports; the designs of
other tests often run one lane, where every layout fits. So every model is emitted under random schedules of up
to 8 lanes (tests/emit_helpers.random_schedule, seeded) and its C++ compared with the storage plan, and the
converted and published models are built as `ming build` builds them (the ILP's design for the KV260, built
once per module), checked likewise and C-simulated with the port check. The zoo, architecture and hand-written
TFLite networks are built by their own tests, through the same emitter and its check (emit/layouts.py).
"""

from __future__ import annotations

import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from ming_py.boards import load_board
from ming_py.build import BuildOptions, design
from ming_py.ilp.explore import explore
from ming_py.csim import run_csim
from ming_py.emit.identifiers import cpp_names
from ming_py.emit.layouts import missing_layouts
from ming_py.errors import MingError
from ming_py.process_spec import schedule_spec
from ming_py.output import write_tree
from ming_py.line_buffers import build_stream_graph
from ming_py.pipeline import lift
from ming_py.storage import plan_arrays

from emit_helpers import random_schedule

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"
MODELS = sorted(str(p.relative_to(DATA)) for p in DATA.rglob("*") if p.suffix in (".onnx", ".tflite"))
# the models of converters and of public repositories: C-simulated with the port check
PORT_CHECKED = [name for name in MODELS if name.startswith(("published/", "converted/"))]
SCHEDULE_SEEDS = (0, 1)
MAX_LANES = 8


@dataclass
class Built:
    out: Path  # the written build
    design: object  # ming_py.steps.Design
    graph: object  # the lifted graph


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """`built(name)`: the model's design as `ming build` makes it (the ILP's for the KV260), built once and
    written to a directory; None where ming refuses the model."""
    cache = {}

    def build(name: str) -> Built | None:
        if name not in cache:
            try:
                graph = lift(DATA / name)
                board, solution, _ = explore(build_stream_graph(graph), BuildOptions(board="kv260"))
                result = design(graph, board, solution=solution)
            except MingError:
                cache[name] = None
                return None
            out = tmp_path_factory.mktemp(re.sub(r"\W", "_", name)) / "out"
            write_tree(result.files, out)
            cache[name] = Built(out, result, graph)
        return cache[name]

    return build


def function_text(cpp: str, name: str) -> str:
    start = cpp.index(f"static void {name}(")
    return cpp[start:cpp.index("\n}\n", start)]


def unlaid_arrays(result) -> list[tuple[str, str, str]]:
    """(process, array, pragma) of every array of a process's storage plan whose pragma the written C++ lacks."""
    stream_graph, schedule = result.stream_graph, result.schedule
    names = cpp_names(stream_graph)
    cpp = result.files[f"hls/{names.model}.cpp"]
    missing = []
    for p in stream_graph.processes:
        sched = schedule.of(p.name)
        storage = plan_arrays(schedule_spec(stream_graph, p, schedule), p.epilogue, sched.storage_of("line_buffer"),
                              sched.storage_of("weights"))
        code = function_text(cpp, names.processes[p.name])
        missing += [(p.name, array, pragma) for array, pragma in missing_layouts(code, storage, names.arrays[p.name])]
    return missing


def an_input(graph, seed: int = 0) -> np.ndarray:
    """An image in the model's input shape and type: uniform over the int8/uint8 range, or standard-normal
    floats."""
    port = graph.inputs[0]
    rng = np.random.default_rng(seed)
    if port.dtype == "float32":
        return rng.standard_normal(port.onnx_shape).astype(np.float32)
    low, high = (-128, 128) if port.dtype == "int8" else (0, 256)
    return rng.integers(low, high, port.onnx_shape).astype(port.dtype)


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_every_array_of_every_process_has_its_plans_pragmas(name):
    try:
        graph = lift(DATA / name)
    except MingError as refusal:  # what ming refuses is the business of the model's own tests
        pytest.skip(f"ming refuses {name}: {refusal}")
    stream_graph = build_stream_graph(graph)
    for seed in SCHEDULE_SEEDS:
        schedule = random_schedule(stream_graph, random.Random(f"{name} {seed}"), max_factor=MAX_LANES)
        assert unlaid_arrays(design(graph, load_board("kv260"), schedule)) == [], schedule


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("name", PORT_CHECKED)
def test_a_real_models_design_fits_its_memory_ports(built, name):
    model = built(name)
    assert model is not None, f"ming refuses {name}"
    assert unlaid_arrays(model.design) == []
    outputs = run_csim(model.out, an_input(model.graph), check_ports=True)  # PortConflict where it does not fit
    assert set(outputs) == {o.name for o in model.graph.outputs}
