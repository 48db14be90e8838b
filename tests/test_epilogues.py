"""The epilogue rules: one per IR epilogue class, each defining every aspect, their datapaths costed and their
C++ calls present as templates."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest

from ming_py import ir
from ming_py.emit.environment import TEMPLATES
from ming_py.epilogues import ASPECTS, EpilogueRule, registered, rule_of
from ming_py.epilogues.base import LANE_PRIMITIVES, register

pytestmark = pytest.mark.unit

RULES = Path(__file__).resolve().parent.parent / "ming_py" / "epilogues"


def test_every_ir_epilogue_has_a_rule_defining_every_aspect():
    classes = set(typing.get_args(ir.Epilogue)) | {type(None)}
    assert set(registered()) == classes
    for cls, rule in registered().items():
        assert rule.ir_type is cls
        for aspect in ASPECTS:
            assert getattr(type(rule), aspect) is not getattr(EpilogueRule, aspect), f"{type(rule).__name__}: {aspect}"


def test_a_rule_missing_an_aspect_is_refused_and_an_unknown_epilogue_is_named():
    class Half(EpilogueRule):
        ir_type = int

    with pytest.raises(TypeError, match="does not define golden"):
        register(Half)
    with pytest.raises(TypeError, match="unknown epilogue int"):
        rule_of(3)


def test_the_c_calls_are_the_rules_templates():
    """Every template a rule's values name (`EpilogueValues.template`) exists, and every template serves a rule:
    a rule cannot fall through to another's C++ call."""
    named = set()
    for path in RULES.glob("*.py"):
        named |= {first or second for first, second in
                  re.findall(r'Values\("(\w+)"|template="(\w+)"', path.read_text())}
    templates = {path.stem for path in (TEMPLATES / "epilogues").glob("*.j2")}
    assert named == templates
    for name in templates:
        text = (TEMPLATES / "epilogues" / f"{name}.j2").read_text()
        assert len(re.findall(r"\{% macro (value|binary)\(", text)) == 1, name


def test_every_rule_datapath_has_a_lane_cost():
    named = r'"((?:lean|exact|fixed point|float32 product|shift|sum of two products|float sum)[^"]*)"'
    datapaths = set()
    for path in RULES.glob("*.py"):
        datapaths |= set(re.findall(named, path.read_text()))
    assert datapaths and datapaths <= set(LANE_PRIMITIVES)
