"""The epilogue rules, one module per family, and the registry the back end asks (`rule_of`). See
`ming_py.epilogues.base.EpilogueRule` for the aspects every rule defines."""

from __future__ import annotations

from . import average, binary, none, requantize, table
from .base import ASPECTS, CppScalar, EpilogueRule, EpilogueValues, Golden, lane_cost, lane_datapath, registered, rule_of

__all__ = ["ASPECTS", "CppScalar", "EpilogueRule", "EpilogueValues", "Golden", "lane_cost", "lane_datapath", "registered", "rule_of",
           # the rule modules
           "average", "binary", "none", "requantize", "table"]
