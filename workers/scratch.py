"""A worker's own folders under the temporary folder, which the next worker removes if their maker was killed.

A worker removes its folders as it ends (the pool's, the referee's socket folders, the seats' /proc copies), but
a worker killed with SIGKILL, or by the out-of-memory killer, runs no cleanup: a league host's /tmp then kept a
`mus-pool-*` folder, its processes' folders and sockets, for every killed worker. So each such folder is named
with the pid of the process that made it (`PREFIX-PID-random`), and the first folder a process makes with a
prefix removes that prefix's folders whose maker no longer runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

_swept: set[tuple[str, int]] = set()
"""The prefixes this process has swept (by pid: a forked worker sweeps again, its parent may be gone)."""


def own_folder(prefix: str) -> Path:
    """A new private folder `PREFIX-PID-random` under the temporary folder, for this process's life."""
    if (prefix, os.getpid()) not in _swept:
        sweep(prefix)
        _swept.add((prefix, os.getpid()))
    return Path(tempfile.mkdtemp(prefix=f"{prefix}-{os.getpid()}-"))


def sweep(prefix: str) -> list[Path]:
    """Remove the folders `own_folder(prefix)` made in processes that have ended; returns them."""
    removed = []
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix}-*-*"):
        maker = folder.name[len(prefix) + 1 :].partition("-")[0]
        if maker.isdigit() and folder.is_dir() and not folder.is_symlink() and not _running(int(maker)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _running(pid: int) -> bool:
    """Whether a process `pid` runs (another user's counts: its folder is not ours to judge)."""
    if pid <= 0:
        return True  # not a process's pid: kill would signal a group
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
