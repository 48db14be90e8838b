"""The HiGHS sessions' scratch folders, `<tmp>/ming-highs-<pid>-<random>`, named by the ming process that owns them.

A folder is removed on every way out of its session (`search.HighsSession`) but one: a SIGKILL (the OOM killer, `kill -9`) leaves it
behind, up to a few MB of MPS model each. Before making a folder, ming removes the folders of that naming
whose owner process is gone and that nothing has touched for ORPHAN_AGE_S: only directories (never a symlink,
never followed), only this user's, only names ming gives. The age guards a run in another pid namespace (a
container sharing /tmp under the same user), whose live process this one cannot see.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator

PREFIX = "ming-highs-"
ORPHAN_AGE_S = 6 * 3600  # far beyond one HiGHS run (the node limits end the longest in minutes)
# the names tempfile.TemporaryDirectory gives under prefix `ming-highs-<pid>-`
_NAME = re.compile(rf"^{PREFIX}(\d+)-[A-Za-z0-9_]+$")


@contextlib.contextmanager
def scratch_folder() -> Iterator[str]:
    """A fresh folder for one HiGHS session, removed on the way out; orphans of dead ones are removed first."""
    remove_orphans(tempfile.gettempdir())
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}{os.getpid()}-") as folder:
        yield folder


def remove_orphans(parent: str) -> None:
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        if _is_orphan(parent, name):
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)  # another ming may be removing it too


def _is_orphan(parent: str, name: str) -> bool:
    match = _NAME.match(name)
    if not match:
        return False
    try:
        status = os.lstat(os.path.join(parent, name))
    except OSError:
        return False
    return stat.S_ISDIR(status.st_mode) and status.st_uid == os.getuid() \
        and time.time() - status.st_mtime > ORPHAN_AGE_S and not _alive(int(match.group(1)))


def _alive(pid: int) -> bool:
    if pid <= 0:
        return True  # not a process id: keep the folder
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process, or a number no process has: keep the folder
    return True
