"""The compiler and the deployment runtime meet only in the contract: the compiler (ming_py and the folders mapped
into it) imports nothing of the runtime, the runtime nothing of the compiler, and the contract neither, so that
OUT/deploy/ runs on a board without ming and the compiler never depends on the driver's code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_module_graph import PACKAGES, import_base

REPO = Path(__file__).resolve().parent.parent
# the folders setuptools maps into ming_py (test_module_graph.PACKAGES), by side of the boundary
RUNTIME = {"ming_py.runtime": "runtime"}
CONTRACT = {"ming_py.contract": "contract"}
COMPILER = {package: folder for package, folder in PACKAGES.items() if package not in RUNTIME | CONTRACT}

pytestmark = pytest.mark.unit


def modules(packages: dict[str, str]) -> dict[str, Path]:
    """{module name: file} of every .py in the folders of `packages`."""
    return {package if path.stem == "__init__" else f"{package}.{path.stem}": path
            for package, folder in packages.items() for path in sorted((REPO / folder).glob("*.py"))}


def flat_names(packages: dict[str, str]) -> set[str]:
    """The names the modules of `packages` are imported by where they sit flat (OUT/deploy/), and their folders
    (but ming_py: the parent of every package)."""
    names = {path.stem for path in modules(packages).values() if path.stem != "__init__"} | set(packages.values())
    return names - {"ming_py"} - {folder for folder in packages.values() if "/" in folder}


def imported(name: str, path: Path) -> set[str]:
    """Every module `name` imports anywhere in its file, relative imports resolved, `from a import b` as a.b."""
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = import_base(node, package)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def crossings(side: dict[str, str], forbidden: dict[str, str]) -> list[str]:
    """"module -> import" for every import of a module of `side` that reaches a module of `forbidden`, by its
    package name or by the flat name it has in OUT/deploy/."""
    names, flat = set(modules(forbidden)) | set(forbidden), flat_names(forbidden)

    def reaches(target: str) -> bool:
        return target in names or target.rpartition(".")[0] in names - {"ming_py"} or target.split(".")[0] in flat

    return sorted(f"{name} -> {target}" for name, path in modules(side).items()
                  for target in imported(name, path) if reaches(target))


def test_the_compiler_imports_nothing_of_the_runtime():
    assert crossings(COMPILER, RUNTIME) == []


def test_the_runtime_imports_nothing_of_the_compiler():
    assert crossings(RUNTIME, COMPILER) == []


def test_the_contract_imports_neither_side():
    assert crossings(CONTRACT, COMPILER | RUNTIME) == []


def test_the_check_sees_relative_and_flat_imports(tmp_path):
    source = "from ..runtime import ming_driver\nimport ming_backends\nfrom ..contract import ming_host\n"
    path = tmp_path / "x.py"
    path.write_text(source)
    found = imported("ming_py.emit.x", path)
    assert {"ming_py.runtime.ming_driver", "ming_backends", "ming_py.contract.ming_host"} <= found
