"""Checks of the user's options, settings, inputs and paths, made before any slow work."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from ming_py.boards import load_board
from ming_py.build import BuildOptions, build
from ming_py.ilp.budget import Budget
from ming_py.ilp.pins import parse_assignments
from ming_py.errors import MingError
from ming_py.options import (target, build_metadata, check_budget_lists, check_design, check_output_file,
                             clock_mhz, load_input)

pytestmark = pytest.mark.unit

KV260 = load_board("kv260")


@pytest.mark.parametrize("spec, expected", [
    (None, 1123), ("20%", 249), ("100%", 1248), ("0.5%", 6), ("300", 300), (" 1248 ", 1248), ("0", 0), (300, 300),
])
def test_a_budget_is_a_count_or_a_share(spec, expected):
    assert Budget.of(KV260, {"dsp": spec}).dsp == expected


@pytest.mark.parametrize("resource, option, spec, full", [
    ("dsp", "--dsp", "150%", "has 1248 DSP"), ("dsp", "--dsp", "1249", "has 1248 DSP"),
    ("bram18k", "--bram", "100.5%", r"leaves 284 BRAM18K to a design \(288 less 4 its platform keeps\)"),
    ("uram", "--uram", "65", "has 64 URAM"),
    ("lut", "--lut", "200%", r"leaves 110,600 LUT to a design \(117,120 less 6,520 its platform keeps\)"),
    ("dsp", "--dsp", "99999999999999999999999", "has 1248 DSP"),
])
def test_a_budget_above_the_board_is_refused(resource, option, spec, full):
    with pytest.raises(MingError, match=rf"^{option} {spec}: the kv260 {full}; give at most 100%"):
        Budget.of(KV260, {resource: spec})


def test_a_board_without_uram_takes_no_uram_budget():
    assert Budget.of(load_board("pynq-z2"), {"uram": "100%"}).uram == 0
    with pytest.raises(MingError, match="the pynq-z2 has 0 URAM"):
        Budget.of(load_board("pynq-z2"), {"uram": "1"})


@pytest.mark.parametrize("spec", ["inf", "-inf", "nan", "1e400", "1e3", "inf%", "nan%", "", "  ", "abc", "20 %",
                                  "5%%", "300.5", True, "0x10"])
def test_a_budget_that_is_no_finite_number_is_refused(spec):
    with pytest.raises(MingError, match="give a whole count"):
        Budget.of(KV260, {"dsp": spec})


@pytest.mark.parametrize("spec", ["-5%", "-1", "-0.1%"])
def test_a_negative_budget_is_refused(spec):
    with pytest.raises(MingError, match=f"--dsp {spec}: must not be negative"):
        Budget.of(KV260, {"dsp": spec})


def test_every_budget_of_a_sweep_list_is_checked():
    check_budget_lists(KV260, {"dsp": "5%,20%,100%", "bram18k": None, "uram": "0,64", "lut": "50%"})
    with pytest.raises(MingError, match="--dsp 150%: the kv260 has 1248 DSP"):
        check_budget_lists(KV260, {"dsp": "5%,150%"})
    with pytest.raises(MingError, match="--lut nan: give a whole count"):
        check_budget_lists(KV260, {"lut": "10%, nan"})
    for empty in ("5%,,20%", "5%,", ","):
        with pytest.raises(MingError, match="an empty budget in the list"):
            check_budget_lists(KV260, {"dsp": empty})


@pytest.mark.parametrize("text, mhz", [(None, None), ("200", 200.0), ("1", 1.0), ("1000", 1000.0), ("312.5", 312.5),
                                       (250, 250.0)])
def test_a_clock_in_range_is_taken(text, mhz):
    assert clock_mhz(text) == mhz


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e-300", "0", "-5", "0.5", "1000.1", "1e400", "", "abc",
                                  math.nan, math.inf, True])
def test_a_clock_out_of_range_is_refused(text):
    with pytest.raises(MingError, match=r"^--clock .*: give the clock in MHz, a number from 1 to 1000$"):
        clock_mhz(text)


def test_build_checks_its_options_before_anything_else(tmp_path):
    for options, message in [(BuildOptions(clock_mhz=math.nan), "--clock nan"),
                             (BuildOptions(limits={"dsp": "150%"}), "--dsp 150%"),
                             (BuildOptions(objective="fastest"), "--objective fastest"),
                             (BuildOptions(settings={"conv2.unroll.oc": True}), "not an integer"),
                             (BuildOptions(settings={"conv2.oc": 2}), "not a setting"),
                             (BuildOptions(board="nope"), "unknown board"),
                             (BuildOptions(board="pynq-z2", clock_mhz=200.0),
                              "board pynq-z2: clock 200 MHz is above its PL clock limit of 150 MHz")]:
        with pytest.raises(MingError, match=message):
            build(tmp_path / "missing.onnx", tmp_path / "out", options)
    assert check_design(BuildOptions(limits={"dsp": "20%"}, clock_mhz=300.0)).name == "kv260"
    assert not (tmp_path / "out").exists()


def _settings(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("value", ["true", "false", "2.0", "2.5", '"2"', "null", "[2]", "{}"])
def test_a_setting_in_a_file_is_an_integer(tmp_path, value):
    path = _settings(tmp_path, "pins.json", f'{{"conv2": {{"unroll": {{"oc": {value}}}}}, "c.depth": 4}}')
    message = "conv2.unroll.oc is empty" if value == "{}" else f"conv2.unroll.oc={value} is not an integer"
    with pytest.raises(MingError, match=re.escape(message)):
        parse_assignments([], [path])


@pytest.mark.parametrize("value", ["true", "2.0", "2.5", "", "1_0", "0x8", "8k"])
def test_a_setting_on_the_command_line_is_an_integer(value):
    with pytest.raises(MingError, match=f"--set: conv2.unroll.oc={value} is not an integer"):
        parse_assignments([f"conv2.unroll.oc={value}"])


def test_integers_are_taken_from_both(tmp_path):
    path = _settings(tmp_path, "pins.yaml", "conv2:\n  unroll:\n    oc: 8\nconv1_to_pool1.depth: 32\n")
    assert parse_assignments([" conv2.unroll.ic = 2 "], [path]) == {
        "conv2.unroll.oc": 8, "conv1_to_pool1.depth": 32, "conv2.unroll.ic": 2}


@pytest.mark.parametrize("name, text", [
    ("nested_and_flat.json", '{"conv2": {"unroll": {"oc": 8}}, "conv2.unroll.oc": 8}'),
    ("same_object.json", '{"conv2.unroll.oc": 8, "conv2.unroll.oc": 4}'),
    ("same_inner_object.json", '{"conv2": {"unroll": {"oc": 8, "oc": 4}}}'),
    ("half_nested.json", '{"conv2.unroll": {"oc": 8}, "conv2": {"unroll": {"oc": 8}}}'),
    ("same_mapping.yaml", "conv2.unroll.oc: 8\nconv2.unroll.oc: 4\n"),
    ("nested_and_flat.yaml", "conv2:\n  unroll:\n    oc: 8\nconv2.unroll.oc: 4\n"),
    ("same_inner_mapping.yaml", "conv2:\n  unroll: {oc: 8, oc: 8}\n"),
])
def test_a_setting_given_twice_in_one_file_is_refused(tmp_path, name, text):
    with pytest.raises(MingError, match=r"conv2\.unroll\.oc is given twice"):
        parse_assignments([], [_settings(tmp_path, name, text)])


@pytest.mark.parametrize("key", ["conv2.oc", "conv2", "conv2.unroll", "conv2.unroll.oc.x", "conv2.unroll.", ".depth",
                                 "a .depth", ""])
def test_a_setting_name_has_one_of_its_forms(key):
    with pytest.raises(MingError, match="is not a setting; use PROCESS.unroll.LOOP, PROCESS.requantizers, "
                                        "PROCESS.multipliers, PROCESS.line_buffer, PROCESS.weights, PROCESS.bands or "
                                        "CHANNEL.depth"):
        parse_assignments([f"{key}=8"])


def test_a_name_may_hold_any_character_inside(tmp_path):
    """Model node names (a key may name a process by its node) hold slashes, dots, colons, semicolons, spaces."""
    path = tmp_path / "s.yaml"
    path.write_text('"/net/layer1.0/conv 1: a=b;c":\n  unroll: {oc: 8}\n')
    assert parse_assignments([], [path]) == {"/net/layer1.0/conv 1: a=b;c.unroll.oc": 8}
    assert parse_assignments(["model/conv 2.depth=4"]) == {"model/conv 2.depth": 4}


def test_named_settings_take_their_names(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("conv2:\n  multipliers: fabric\n  line_buffer: uram\n")
    assert parse_assignments(["conv1.multipliers=dsp_pair"], [path]) == {
        "conv2.multipliers": "fabric", "conv2.line_buffer": "uram", "conv1.multipliers": "dsp_pair"}
    with pytest.raises(MingError, match="conv2.multipliers=luts is not one of dsp, fabric, dsp_pair"):
        parse_assignments(["conv2.multipliers=luts"])
    with pytest.raises(MingError, match="conv2.unroll.oc=fabric is not an integer"):
        parse_assignments(["conv2.unroll.oc=fabric"])


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "fast", ""])
def test_a_target_is_a_positive_number(value):
    with pytest.raises(MingError, match="--target-fps .*: give a positive number"):
        target(value, "--target-fps")
    assert target("2.5e3", "--target-fps") == 2500.0


@pytest.mark.parametrize("x, message", [
    (np.array([[1.0, np.nan, np.inf]], np.float32), "input has 2 non-finite values"),
    (np.zeros((1, 3), np.float64), "input is float64; give float32"),
    (np.zeros((1, 3), np.float16), "input is float16"),
    (np.zeros((1, 3), np.int64), "input is int64"),
    (np.zeros((1, 3), bool), "input is bool"),
    (np.array([1.0, "a"], object), "holds Python objects"),
])
def test_an_input_is_a_finite_float32_array(tmp_path, x, message):
    np.save(tmp_path / "x.npy", x, allow_pickle=True)
    with pytest.raises(MingError, match=message):
        load_input(tmp_path / "x.npy")


def test_an_input_that_is_no_npy_array_is_refused(tmp_path):
    (tmp_path / "text.npy").write_text("1, 2, 3")
    np.save(tmp_path / "whole.npy", np.ones((2, 3), np.float32))
    (tmp_path / "cut.npy").write_bytes((tmp_path / "whole.npy").read_bytes()[:-5])
    np.savez(tmp_path / "archive.npz", x=np.ones(3, np.float32))
    for name in ("text.npy", "cut.npy", "archive.npz"):
        with pytest.raises(MingError, match="not a .npy array"):
            load_input(tmp_path / name)
    with pytest.raises(MingError, match="input file not found"):
        load_input(tmp_path / "missing.npy")


def test_a_float32_input_is_taken_in_either_byte_order(tmp_path):
    x = np.arange(6, dtype=np.float32).reshape(1, 6)
    np.save(tmp_path / "big.npy", x.astype(">f4"))
    loaded = load_input(tmp_path / "big.npy")
    assert loaded.dtype == np.float32 and np.array_equal(loaded, x)


def test_an_output_file_goes_into_an_existing_directory(tmp_path):
    check_output_file(tmp_path / "y.npy")
    with pytest.raises(MingError, match="the directory .*missing does not exist; create it first"):
        check_output_file(tmp_path / "missing" / "y.npy")
    with pytest.raises(MingError, match="is a directory"):
        check_output_file(tmp_path)
    (tmp_path / "file").write_text("")
    with pytest.raises(MingError, match="file is not a directory"):
        check_output_file(tmp_path / "file" / "y.npy")


HOST = {"model": "net", "input": {"onnx_name": "x", "onnx_shape": [1, 3, 4, 4], "array_shape": [3, 4, 4],
                                  "stream_shape": [3, 4, 4], "words": 6, "scale": 0.1, "zero_point": 0,
                                  "dtype": "float32", "permutation": []},
        "outputs": [{"onnx_name": "y", "onnx_shape": [1, 10], "array_shape": [10], "stream_shape": [10, 1, 1],
                     "words": 2, "scale": 0.1, "zero_point": 0, "dtype": "float32", "permutation": [], "index": 0,
                     "host_ops": [{"kind": "softmax", "axis": 0, "scale": 1.0, "zero_point": 0, "shape": []}]}]}


def _build_dir(tmp_path, host_text: str, sources=("net.cpp", "net_tb.cpp")):
    (tmp_path / "hls").mkdir()
    for name in sources:
        (tmp_path / "hls" / name).write_text("")
    (tmp_path / "host.json").write_text(host_text)
    return tmp_path


def test_a_complete_build_has_its_metadata_and_sources(tmp_path):
    assert build_metadata(_build_dir(tmp_path, json.dumps(HOST))) == HOST


def _without(path: list, value=None) -> dict:
    host = json.loads(json.dumps(HOST))
    *parents, last = path
    inner = host
    for key in parents:
        inner = inner[key]
    if value is None:
        del inner[last]
    else:
        inner[last] = value
    return host


@pytest.mark.parametrize("text, why", [
    ("{", "Expecting property name"),
    ("[]", "no model name"),
    ("{}", "no model name"),
    (json.dumps(_without(["input"])), "no 'input' object"),
    (json.dumps(_without(["outputs", 0, "scale"])), "'outputs[0].scale' is missing or not a number"),
    (json.dumps(_without(["outputs"], [])), "no 'outputs' list"),
    (json.dumps(_without(["outputs", 0, "words"], 2.0)), "'outputs[0].words' is missing or not an integer"),
    (json.dumps(_without(["input", "zero_point"], 0.5)), "'input.zero_point' is missing or not an integer"),
    (json.dumps(_without(["input", "onnx_shape"], [1, "3"])), "'input.onnx_shape' is missing or not a shape"),
    (json.dumps(_without(["outputs", 0, "host_ops"], [{"kind": "softmax"}])), "'outputs[0].host_ops[0].axis'"),
])
def test_a_damaged_host_json_is_an_incomplete_build(tmp_path, text, why):
    expected = re.escape(f"not a complete ming build (host.json: {why}") + ".*; run `ming build` again$"
    with pytest.raises(MingError, match=expected):
        build_metadata(_build_dir(tmp_path, text))


def test_a_build_without_its_cpp_is_incomplete(tmp_path):
    with pytest.raises(MingError, match=r"not a complete ming build \(no hls/net_tb.cpp\)"):
        build_metadata(_build_dir(tmp_path, json.dumps(HOST), sources=("net.cpp",)))


def test_run_csim_refuses_a_non_finite_or_misshapen_input_before_compiling(tmp_path):
    from ming_py.csim import run_csim

    build_dir = _build_dir(tmp_path, json.dumps(HOST))  # its empty C++ would not compile
    x = np.zeros((1, 3, 4, 4), np.float32)
    x[0, 1, 2, 3] = -np.inf
    with pytest.raises(MingError, match="^input has 1 non-finite values"):
        run_csim(build_dir, x)
    with pytest.raises(MingError, match=r"input has shape \(1, 3, 4\); the model takes \(1, 3, 4, 4\) \(one image\) "
                                        r"or \(N, 3, 4, 4\) for N images"):
        run_csim(build_dir, np.zeros((1, 3, 4), np.float32))
