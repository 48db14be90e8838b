"""HiGHS scratch folders left by a killed ming (`<tmp>/ming-highs-<pid>-...`) are removed by the next run:
only this user's directories named by a process that is gone."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import pytest

from ming_py.ilp import scratch

pytestmark = pytest.mark.unit


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _folder(parent, name: str, age_s: float = scratch.ORPHAN_AGE_S + 60):
    folder = parent / name
    folder.mkdir()
    (folder / "model.mps").write_text("NAME\n")
    then = time.time() - age_s
    os.utime(folder, (then, then))
    return folder


def test_only_folders_of_dead_ming_processes_are_removed(tmp_path):
    dead = _dead_pid()
    orphan = _folder(tmp_path, f"ming-highs-{dead}-abc_123")
    live = _folder(tmp_path, f"ming-highs-{os.getpid()}-abc_123")
    recent = _folder(tmp_path, f"ming-highs-{dead}-recent", age_s=60)  # perhaps a run in another pid namespace
    foreign = _folder(tmp_path, f"ming-highs-{dead}")
    unrelated = _folder(tmp_path, f"other-highs-{dead}-abc")
    target = _folder(tmp_path, "target")
    link = tmp_path / f"ming-highs-{dead}-link"
    link.symlink_to(target, target_is_directory=True)
    plain_file = tmp_path / f"ming-highs-{dead}-file"
    plain_file.write_text("")
    scratch.remove_orphans(str(tmp_path))
    assert not orphan.exists()
    for kept in (live, recent, foreign, unrelated, target, target / "model.mps", plain_file):
        assert kept.exists(), kept
    assert link.is_symlink()


def test_a_run_names_its_folder_by_its_pid_and_clears_orphans(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    orphan = _folder(tmp_path, f"ming-highs-{_dead_pid()}-xyz")
    with scratch.scratch_folder() as folder:
        assert os.path.basename(folder).startswith(f"ming-highs-{os.getpid()}-")
        assert not orphan.exists()
    assert not os.path.exists(folder)


def test_the_ilp_clears_orphans_and_leaves_no_folder(tmp_path, monkeypatch):
    from ming_py.boards import load_board
    from ming_py.ilp import solve
    from test_unit_dse import BOARD, budget, chain

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    orphan = _folder(tmp_path, f"ming-highs-{_dead_pid()}-xyz")
    solve(chain(), load_board(BOARD), budget(60))
    assert not orphan.exists() and not list(tmp_path.iterdir())
