"""Shared fixtures: the model zoo, quantized once per session."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import zoo  # noqa: E402

# a test marked `unit` fails if it imports IREE or starts a C++ compiler (tests/unit_guard.py)
pytest_plugins = ["unit_guard"]


@pytest.fixture(scope="session", autouse=True)
def csim_cache(tmp_path_factory):
    """Compiled C-simulations go to a per-session cache, not the user's, shared by the session's xdist
    workers (their base directories are siblings) so that a design one worker compiled runs in the other
    without compiling again (the cache locks its entries and verifies each binary before it runs)."""
    import os

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    os.environ["MING_CACHE_DIR"] = str(shared / "csim_cache")


@pytest.fixture(scope="session")
def example_build(tmp_path_factory) -> Path:
    """OUT of `ming build examples/tiny_cnn.onnx` (kv260), without a compiled C-simulation; shared: copy it
    before changing anything in it."""
    import subprocess

    out = tmp_path_factory.mktemp("example_build") / "out"
    model = Path(__file__).resolve().parent.parent / "examples" / "tiny_cnn.onnx"
    result = subprocess.run([sys.executable, "-m", "ming_py.cli", "build", str(model), "-q", "-o", str(out)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture
def example_copy(example_build, tmp_path) -> Path:
    """A copy of `example_build` (tmp_path/out) a test may change."""
    out = tmp_path / "out"
    shutil.copytree(example_build, out)
    return out


@pytest.fixture(scope="session")
def zoo_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("zoo")


@pytest.fixture(scope="session")
def quantized(zoo_dir):
    """quantized(name, per_channel=False) -> path of the QDQ model, built once."""
    cache: dict[tuple[str, bool], Path] = {}

    def build(name: str, per_channel: bool = False) -> Path:
        key = (name, per_channel)
        if key not in cache:
            cache[key] = zoo.quantized_model(name, zoo_dir, per_channel=per_channel)
        return cache[key]

    return build


@pytest.fixture(scope="session")
def lifted(quantized):
    """lifted(name, per_channel=False) -> the lifted Graph, built once."""
    from ming_py.pipeline import lift

    cache = {}

    def build(name: str, per_channel: bool = False):
        key = (name, per_channel)
        if key not in cache:
            cache[key] = lift(quantized(name, per_channel))
        return cache[key]

    return build


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A fresh private ming cache for this test (MING_CACHE_DIR), and a clean compiler identity cache."""
    from ming_py import csim

    root = tmp_path / "cache"
    monkeypatch.setenv("MING_CACHE_DIR", str(root))
    csim._compiler_identity.cache_clear()
    yield root
    csim._compiler_identity.cache_clear()
