"""Where this deployment keeps its own files, resolved once.

The database file, the embedded broker's folder and the logs' folder are named by the operator's configuration (an
environment variable, or a default relative to the working directory), and a worker asks where they are several
times a match: to log, and to refuse a bot whose folder would show them to it (`play.exposed_by`). Each resolve
reads the file system once per component of the path (about 50 µs on the test machine, a match's worth of them
about 1% of a pooled match's CPU). The answer is kept per path and working directory: a symbolic link an operator
puts in the way of a running worker's folders is seen when the worker restarts.
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
