"""The folding file every build writes (OUT/settings.yaml): the form --settings reads, the same design when
built with it, the edited design when edited."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from ming_py.emit.folding import _key
from ming_py.ilp.pins import parse_assignments

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tiny_cnn.onnx"


def ming(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ming_py.cli", *map(str, args)], capture_output=True, text=True)


def design_of(out: Path) -> tuple[dict, dict]:
    """Every process's schedule and every channel's lanes and depth, as report.json gives them."""
    report = json.loads((out / "report.json").read_text())
    return ({n["name"]: n["schedule"] for n in report["nodes"]},
            {c["name"]: (c["lanes"], c["fifo_depth"]) for c in report["channels"]})


def test_the_folding_file_holds_every_choice_of_the_design(example_build):
    settings = parse_assignments([], [example_build / "settings.yaml"])
    schedules, channels = design_of(example_build)
    for name, schedule in schedules.items():
        for loop, factor in schedule["unroll"].items():
            assert settings[f"{name}.unroll.{loop}"] == factor
        if "multipliers" in schedule:
            assert settings[f"{name}.multipliers"] == schedule["multipliers"]
    for name, (_, depth) in channels.items():
        assert settings[f"{name}.depth"] == depth
    report = json.loads((example_build / "report.json").read_text())
    text = (example_build / "settings.yaml").read_text()
    for node in report["nodes"]:
        assert f"{node['cycles']:,} cycles, {node['dsp']} DSP" in text  # each process commented with its figures


def test_building_with_the_folding_file_gives_the_same_design(example_build, tmp_path):
    settings = tmp_path / "settings.yaml"
    settings.write_text((example_build / "settings.yaml").read_text())
    result = ming("build", EXAMPLE, "-q", "--settings", settings, "-o", tmp_path / "again")
    assert result.returncode == 0, result.stderr
    assert design_of(tmp_path / "again") == design_of(example_build)
    for path in (example_build / "hls").iterdir():
        assert (tmp_path / "again" / "hls" / path.name).read_bytes() == path.read_bytes()


def test_an_edited_folding_file_gives_the_edited_design(example_build, tmp_path):
    data = yaml.safe_load((example_build / "settings.yaml").read_text())
    k = data["conv2"]["unroll"]["k"]
    assert k > 1
    data["conv2"]["unroll"]["k"] = 1  # the window loop: its lanes, and so its neighbours' pins, stay as they are
    data["fc"]["multipliers"] = "fabric"
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(data))
    result = ming("build", EXAMPLE, "-q", "--settings", edited, "-o", tmp_path / "edited")
    assert result.returncode == 0, result.stderr
    schedules, _ = design_of(tmp_path / "edited")
    assert schedules["conv2"]["unroll"]["k"] == 1
    assert schedules["fc"]["multipliers"] == "fabric"
    report = json.loads((tmp_path / "edited" / "report.json").read_text())
    fc = next(n for n in report["nodes"] if n["name"] == "fc")
    assert fc["resources_by_primitive"].get("dsp", {}).get("mac", 0) == 0  # fabric MACs take no DSP


def test_names_yaml_would_misread_are_quoted(tmp_path):
    names = ["conv1", "/features/features.0/Conv", "model/conv_1/Relu;model/bn_1/FusedBatchNormV3", "yes", "a:b", "[x]",
             "-x", "#1"]
    text = "".join(f"{_key(name)}: {{depth: 3}}\n" for name in names)
    path = tmp_path / "names.yaml"
    path.write_text(text)
    assert list(yaml.safe_load(text)) == names
    settings = parse_assignments([], [path])
    assert settings == {f"{name}.depth": 3 for name in names}
