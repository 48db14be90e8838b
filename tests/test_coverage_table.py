"""docs/supported.md's coverage table is the one `benchmarks/coverage.py --write` renders from docs/coverage.json, and
that record covers every architecture in every format, so the page cannot drift from what was measured."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import architectures

REPO = Path(__file__).resolve().parent.parent


def _coverage_script():
    spec = importlib.util.spec_from_file_location("ming_coverage_benchmark", REPO / "benchmarks" / "coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_table_is_rendered_from_the_recorded_coverage():
    coverage = _coverage_script()
    rows = json.loads(coverage.COVERAGE_JSON.read_text())
    page = coverage.TABLE_PAGE.read_text()
    assert coverage.page_with(page, rows) == page


@pytest.mark.unit
def test_the_record_covers_every_architecture_in_every_format():
    rows = json.loads((REPO / "docs" / "coverage.json").read_text())
    recorded = [(row["architecture"], row["format"]) for row in rows]
    assert recorded == [(name, fmt) for name in architectures.ARCHITECTURES for fmt in architectures.FORMATS]
    for row in rows:
        refused = (row["architecture"], row["format"]) in architectures.LEFT_IN_FLOAT
        assert (row["build"] == "refused") == refused, row
