"""Where this deployment keeps its own files, resolved once.

The database file, the embedded broker's folder and the logs' folder are named by the operator's configuration (an
environment variable, or a default relative to the working directory), and a worker asks where they are several
times a match. Each resolve reads the file system once per component of the path (about 20-50 µs on the test
machine). The answer is kept per path and working directory: a worker goes on writing where its folders were when
it first asked, and a symbolic link put in their way since is followed by the next process. The check that no
bot's folder holds them (`play.exposed_by`) resolves them again every time.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path


def resolved(path: str | Path) -> Path:
    """`Path(path).resolve()`, read from the file system once per path and working directory."""
    return _resolved(str(path), os.getcwd())


@lru_cache(maxsize=64)
def _resolved(path: str, cwd: str) -> Path:
    return (Path(cwd) / path).resolve()
