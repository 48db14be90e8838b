"""tests/unit_guard.py, the plugin that keeps the `unit` tier free of IREE and of C/C++ compilers: it fails a unit
test that imports IREE (also one an earlier test of the worker imported, also when the test catches the
ImportError) or starts a compiler (subprocess, shell, os.posix_spawn, $CXX), and leaves other tests alone.

One inner pytest run over a scratch directory holds every case; the scratch directory has a fake `iree` package,
so no real IREE is imported, and the guard refuses a compiler before it starts, so none runs either."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import unit_guard

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parent

CASES = '''
import os
import subprocess
import sys
import types

import pytest

unit = pytest.mark.unit


def test_plain_non_unit_imports_iree():
    import iree.compiler.ir  # not a unit test: allowed
    import uses_iree  # a module holding an IREE module, as the product's frontends do
    assert iree.compiler.FAKE and uses_iree.fake()


@unit
def test_clean_unit():
    import json
    assert json.loads("[1]") == [1]
    subprocess.run([sys.executable, "-c", "pass"], check=True)  # not a compiler: allowed


@unit
def test_unit_imports_iree():
    import iree.compiler  # noqa: F401


@unit
def test_unit_imports_iree_submodule_already_loaded():
    # test_plain_non_unit_imports_iree ran first in this worker: the module is in sys.modules
    from iree.compiler import ir  # noqa: F401


@unit
def test_unit_uses_iree_through_a_module_imported_before():
    import uses_iree  # in sys.modules already: no import of IREE happens here
    uses_iree.fake()


@unit
def test_unit_may_look_at_a_module_holding_iree():
    import uses_iree
    assert uses_iree.compiler.__name__ == "iree.compiler"  # dunders of a hidden module stay readable


@unit
def test_unit_swallows_the_import_error():
    try:
        import iree  # noqa: F401
    except ImportError:
        pass


@unit
def test_unit_importorskip_iree():
    pytest.importorskip("iree.compiler")


@unit
def test_unit_puts_iree_in_sys_modules():
    sys.modules["iree.handmade"] = types.ModuleType("iree.handmade")


@unit
def test_unit_runs_gxx():
    subprocess.run(["g++", "--version"], capture_output=True)


@unit
def test_unit_runs_versioned_gcc_by_path():
    subprocess.run(["/usr/bin/x86_64-linux-gnu-gcc-12", "-c", "x.c"], capture_output=True)


@unit
def test_unit_runs_cc_through_the_shell():
    subprocess.run("CFLAGS=-O2 cc --version", shell=True, capture_output=True)


@unit
def test_unit_runs_cxx_env(monkeypatch):
    monkeypatch.setenv("CXX", "/opt/weird/my-cxx-wrapper")
    subprocess.run(["/opt/weird/my-cxx-wrapper", "-v"], capture_output=True)


@unit
def test_unit_posix_spawn_clang():
    os.posix_spawn("/usr/bin/clang++", ["clang++", "--version"], os.environ)


@unit
def test_unit_os_system_gxx():
    os.system("g++ --version >/dev/null 2>&1")


@unit
def test_unit_swallows_the_spawn_error():
    try:
        subprocess.check_output(["c++", "--version"])
    except OSError:
        pass


@unit
def test_unit_in_fixture_setup(gxx_in_setup):
    pass


@pytest.fixture
def gxx_in_setup():
    subprocess.run(["gcc", "--version"], capture_output=True)


def test_non_unit_after_unit_tests_sees_everything_restored():
    import iree.compiler
    assert iree.compiler.FAKE
    assert "iree.compiler.ir" in sys.modules  # hidden during the unit tests, put back after them
    assert not any(finder.__class__.__name__ == "_IreeBlocker" for finder in sys.meta_path)
    assert subprocess.Popen.__init__.__module__ == "subprocess"
    assert os.system.__module__ == "posix" and os.posix_spawn.__module__ == "posix"
    import uses_iree
    assert uses_iree.fake() and type(uses_iree.compiler) is types.ModuleType
'''

EXPECTED = {  # test -> (outcome, words the failure message must contain)
    "test_plain_non_unit_imports_iree": ("passed", ()),
    "test_clean_unit": ("passed", ()),
    "test_unit_imports_iree": ("failed", ("imported IREE module 'iree'",)),
    "test_unit_imports_iree_submodule_already_loaded": ("failed", ("imported IREE module 'iree'",)),
    "test_unit_uses_iree_through_a_module_imported_before": ("failed", ("used IREE module 'iree.compiler' "
                                                                          "(attribute 'FAKE')",)),
    "test_unit_may_look_at_a_module_holding_iree": ("passed", ()),
    "test_unit_swallows_the_import_error": ("failed", ("imported IREE module 'iree'",)),
    "test_unit_importorskip_iree": ("failed", ("imported IREE module 'iree'",)),
    "test_unit_puts_iree_in_sys_modules": ("failed", ("sys.modules gained", "iree.handmade")),
    "test_unit_runs_gxx": ("failed", ("C/C++ compiler 'g++'", "g++ --version")),
    "test_unit_runs_versioned_gcc_by_path": ("failed", ("'x86_64-linux-gnu-gcc-12'",)),
    "test_unit_runs_cc_through_the_shell": ("failed", ("compiler 'cc'", "shell")),
    "test_unit_runs_cxx_env": ("failed", ("my-cxx-wrapper",)),
    "test_unit_posix_spawn_clang": ("failed", ("'clang++'", "os.posix_spawn")),
    "test_unit_os_system_gxx": ("failed", ("'g++'", "os.system")),
    "test_unit_swallows_the_spawn_error": ("failed", ("'c++'",)),
    "test_unit_in_fixture_setup": ("failed", ("'gcc'",)),
    "test_non_unit_after_unit_tests_sees_everything_restored": ("passed", ()),
}


@pytest.fixture(scope="module")
def inner_run(tmp_path_factory):
    """{test name: (outcome, failure message)} of the inner run, in one worker, tests in file order."""
    root = tmp_path_factory.mktemp("unit_guard_cases")
    (root / "pytest.ini").write_text("[pytest]\nmarkers =\n    unit: the unit tier\n")
    (root / "iree" / "compiler").mkdir(parents=True)
    (root / "iree" / "__init__.py").write_text("")
    (root / "iree" / "compiler" / "__init__.py").write_text("FAKE = True\n")
    (root / "iree" / "compiler" / "ir.py").write_text("")
    (root / "uses_iree.py").write_text("import iree.compiler as compiler\n\n\ndef fake():\n    return compiler.FAKE\n")
    (root / "test_cases.py").write_text(textwrap.dedent(CASES))
    junit = root / "junit.xml"
    env = {k: v for k, v in os.environ.items() if k not in ("CXX", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(root)])
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "unit_guard", "-p", "no:cacheprovider",
                          "-p", "no:xdist", "-p", "no:randomly", "-q", f"--junitxml={junit}", "test_cases.py"],
                         cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert junit.exists(), run.stdout + run.stderr
    results = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        skipped = case.find("skipped")
        if problem is not None:
            results[case.get("name")] = ("failed", (problem.get("message") or "") + (problem.text or ""))
        elif skipped is not None:
            results[case.get("name")] = ("skipped", skipped.get("message") or "")
        else:
            results[case.get("name")] = ("passed", "")
    return results


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_guard_fails_exactly_the_unit_tests_that_import_iree_or_run_a_compiler(inner_run, name):
    outcome, words = EXPECTED[name]
    got, message = inner_run[name]
    assert got == outcome, f"{name}: {got} ({message[:800]})"
    for word in words:
        assert word in message, f"{name}: {word!r} not in {message[:800]!r}"
    if outcome == "failed":
        assert "broke the unit tier" in message


def test_the_inner_run_ran_every_case(inner_run):
    assert set(inner_run) == set(EXPECTED)


@pytest.mark.parametrize("argv, found", [
    (["g++", "-O2"], "g++"), (["/usr/bin/gcc"], "gcc"), (["c++"], "c++"), (["cc"], "cc"), (["clang"], "clang"),
    (["clang++-17"], "clang++-17"), (["aarch64-linux-gnu-g++"], "aarch64-linux-gnu-g++"),
    (["ccache", "g++", "x.cpp"], "g++"), ("g++ -c x.cpp", "g++"),
    ([sys.executable, "-c", "pass"], None), (["cbc", "model.mps"], None), (["iree-compile"], None),
    (["clang-format"], None), (["gccgo"], None), (["ld"], None), ("echo g++", None),
])
def test_compiler_names(argv, found, monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    assert unit_guard.compiler_in(argv) == found


def test_cxx_names_a_compiler(monkeypatch):
    monkeypatch.setenv("CXX", "/opt/tools/fancy-compiler --flag")
    assert unit_guard.compiler_in(["fancy-compiler", "x.cpp"]) == "fancy-compiler"
    assert unit_guard.compiler_in(["/opt/tools/fancy-compiler"]) == "fancy-compiler"
    monkeypatch.delenv("CXX")
    assert unit_guard.compiler_in(["fancy-compiler", "x.cpp"]) is None
