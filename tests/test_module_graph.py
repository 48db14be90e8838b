"""The product's modules import each other without a cycle (function-level imports included): each stage
builds on the ones before it, never back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# the package ming_py and the folders setuptools maps into it (pyproject.toml: package-dir)
PACKAGES = {"ming_py": "ming_py", "ming_py.kinds": "ming_py/kinds", "ming_py.epilogues": "ming_py/epilogues",
            "ming_py.frontends": "frontends", "ming_py.classify": "classify",
            "ming_py.line_buffers": "line_buffers", "ming_py.ilp": "ilp", "ming_py.emit": "emit",
            "ming_py.boards": "boards", "ming_py.runtime": "runtime", "ming_py.contract": "contract",
            "ming_py.numerics": "ming_py/numerics"}

pytestmark = pytest.mark.unit


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted((REPO / folder).glob("*.py")):
            found[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return found


def import_base(node: ast.ImportFrom, package: str) -> str:
    """The module a `from ... import` names, a relative one resolved against `package` (the importer's)."""
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
    return base


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The product modules `name` imports anywhere in its file."""
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = import_base(node, package)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in known else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {target for target in found if target in known and target != name}


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` (module -> imported modules), None if there is none."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_the_checker_finds_a_cycle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_of_the_product_imports_one_that_imports_it_back():
    found = modules()
    graph = {name: imports(name, path, set(found)) for name, path in found.items()}
    loop = cycle(graph)
    assert loop is None, " -> ".join(loop)
