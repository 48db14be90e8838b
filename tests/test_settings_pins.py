"""Settings that cannot apply to their process are refused in one line naming the process, the key and why:
requantizers on a process without requantizers or one that does not share them, multipliers on a process
without MAC lanes, a line buffer in URAM where it sits in LUTRAM at every schedule. A URAM line buffer pin keeps
only the schedules whose line buffer URAM holds. The settings file every build writes loads back;
a name holding "=" is pinned from the command line as from a file."""

from __future__ import annotations

import json

import pytest

import zoo
from ming_py.errors import MingError
from ming_py.ilp.pins import Pins, line_buffer_memory, parse_assignments, resolve
from ming_py.ilp.candidates import candidates
from test_cli import assert_clean_error
from test_faults import EXAMPLE, ming
from test_unit_dse import chain
from test_unit_processes import K3P1, graph_of, window


@pytest.mark.unit
@pytest.mark.parametrize("settings, message", [
    ({"pool.requantizers": 4}, "pool.requantizers: process pool (maxpool) has no requantizers; remove the setting"),
    ({"pool.requantizers": 0}, "pool.requantizers: process pool (maxpool) has no requantizers"),
    ({"pool.multipliers": "dsp"}, "pool.multipliers: process pool (maxpool) has no MAC lanes, so no multipliers to "
                                  "place; remove the setting"),
    ({"pool.multipliers": "fabric"}, "pool.multipliers: process pool (maxpool) has no MAC lanes"),
    ({"pw.line_buffer": "uram"}, "pw.line_buffer: process pw (pointwise) has no line buffer"),
])
def test_a_setting_the_process_does_not_have_is_refused(settings, message):
    with pytest.raises(MingError) as error:
        resolve(settings, chain())
    assert str(error.value).startswith(message), error.value


@pytest.mark.unit
def test_a_multiplier_placement_the_kind_never_offers_is_refused():
    graph, _ = graph_of("depthwise", [(8, 8, 8)], [(8, 8, 8)], window(8, 8, 8, 8, groups=8, **K3P1))
    with pytest.raises(MingError, match="^p.multipliers=dsp_pair: process p \\(depthwise\\) takes multipliers dsp or "
                                        "fabric, never dsp_pair; choose one of those or remove the setting"):
        resolve({"p.multipliers": "dsp_pair"}, graph)
    assert resolve({"p.multipliers": "fabric"}, graph).multipliers == {"p": "fabric"}


@pytest.mark.unit
@pytest.mark.parametrize("process", ["pool", "conv"])
def test_a_line_buffer_too_small_for_uram_is_refused(process):
    small = chain(h=4, w=4, c2=4)  # every line buffer in LUTRAM even at one lane
    with pytest.raises(MingError, match=f"^{process}.line_buffer=uram: process {process}'s line buffer is small "
                                        "enough for LUTRAM at every schedule, where ming keeps it; remove the setting"):
        resolve({f"{process}.line_buffer": "uram"}, small)


@pytest.mark.unit
def test_a_name_holding_an_equals_sign_is_pinned_from_the_command_line_as_from_a_file(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"a=b.depth": 16, "x==y.unroll.oc": 4}))
    given = parse_assignments(["a=b.depth=16", "x==y.unroll.oc = 4"])
    assert given == parse_assignments([], [path]) == {"a=b.depth": 16, "x==y.unroll.oc": 4}
    assert given.written("a=b.depth") == "--set a=b.depth=16"


@pytest.mark.unit
def test_settings_that_apply_are_taken():
    pins = resolve({"conv.requantizers": 0, "conv.multipliers": "fabric", "conv.line_buffer": "uram",
                    "pool.line_buffer": "uram", "pw.requantizers": 2}, chain())
    assert pins.line_buffers == {"conv": "uram", "pool": "uram"} and pins.requantizers == {"conv": 0, "pw": 2}
    assert resolve({"pool.line_buffer": "bram"}, chain(h=4, w=4, c2=4)).line_buffers == {"pool": "bram"}


@pytest.mark.unit
def test_a_uram_line_buffer_pin_keeps_the_schedules_uram_holds():
    graph = chain()
    pool = graph.process("pool")
    kept = candidates(graph, pool, Pins(line_buffers={"pool": "uram"}), uram=True)
    assert kept and all(line_buffer_memory(graph, pool, c.unroll, c.lanes_in, c.lanes_out, "uram") == "uram"
                        for c in kept)
    free = candidates(graph, pool, Pins(), uram=True)
    assert any(line_buffer_memory(graph, pool, c.unroll, c.lanes_in, c.lanes_out, "uram") == "lutram" for c in free)


def test_the_cli_refuses_a_setting_that_cannot_apply(tmp_path):
    out = tmp_path / "out"
    assert_clean_error(ming("build", EXAMPLE, "--set", "pool1.requantizers=4", "-q", "-o", out, timeout=300),
                       "pool1.requantizers: process pool1 (maxpool) has no requantizers; remove the setting")
    assert not out.exists()


def test_a_pinned_uram_line_buffer_is_in_uram(tmp_path):
    out = tmp_path / "out"
    result = ming("build", EXAMPLE, "--set", "pool1.line_buffer=uram", "--no-verify", "-q", "-o", out, timeout=300)
    assert result.returncode == 0, result.stderr
    node = next(n for n in json.loads((out / "report.json").read_text())["nodes"] if n["name"] == "pool1")
    assert node["schedule"]["storage"]["line_buffer"] == "uram" and node["uram"] > 0


@pytest.fixture(scope="module")
def zoo_models(tmp_path_factory):
    directory = tmp_path_factory.mktemp("zoo")
    return {name: zoo.quantized_model(name, directory) for name in ("add_conv_branches", "conv_avgpool2")}


@pytest.mark.parametrize("name", ["add_conv_branches", "conv_avgpool2"])
def test_the_settings_file_a_build_writes_loads_back(zoo_models, tmp_path, name):
    first, second = tmp_path / "first", tmp_path / "second"
    for out, extra in ((first, []), (second, ["--settings", first / "settings.yaml"])):
        result = ming("build", zoo_models[name], *extra, "--no-verify", "-q", "-o", out, timeout=300)
        assert result.returncode == 0, result.stderr
    assert (first / "settings.yaml").read_text() == (second / "settings.yaml").read_text()


def test_a_kind_that_does_not_share_requantizers_refuses_a_count(zoo_models, tmp_path):
    assert_clean_error(ming("build", zoo_models["conv_avgpool2"], "--set", "pool1.requantizers=2", "-q", "-o",
                            tmp_path / "out", timeout=300),
                       "pool1.requantizers=2: process pool1 (float_avgpool) does not share requantizers (it has one "
                       "per output lane); remove the setting or set 0")
