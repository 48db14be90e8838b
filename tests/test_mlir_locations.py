"""The model node an MLIR operation comes from: `mlir_attrs.location_name` and the lifter's `_where`, which
names the nearest node before an operation IREE made without one."""

from __future__ import annotations

import pytest
from iree.compiler import ir

from ming_py.frontends.facts import FrontendFacts
from ming_py.frontends.lift import Lifter
from ming_py.frontends.mlir_attrs import location_name

MODULE = '''
func.func @f(%x: f32) -> f32 {
  %a = arith.addf %x, %x : f32 loc("act_1")
  %b = arith.addf %a, %a : f32 loc(fused["", "pool_2"])
  %c = arith.addf %b, %b : f32 loc(unknown)
  %d = arith.addf %c, %c : f32 loc("odd \\"name\\"")
  return %d : f32
}
'''


@pytest.fixture
def operations():
    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        module = ir.Module.parse(MODULE)
        (function,) = module.body.operations
        yield [op.operation for op in function.regions[0].blocks[0].operations][:4]


def test_the_name_of_a_node_or_the_first_name_of_a_fused_location_or_none(operations):
    assert [location_name(op) for op in operations] == ["act_1", "pool_2", "?", "odd \\22name\\22"]  # as MLIR prints it


def test_an_operation_without_a_node_is_named_after_the_node_before_it(operations):
    lifter = Lifter("g", [], [], FrontendFacts({"act_1": "LeakyRelu"}, ()))
    assert [lifter._where(op) for op in operations[:3]] == [
        "node 'act_1' (LeakyRelu)", "node 'pool_2' (arith.addf)", "IREE's arith.addf after node 'pool_2'"]
