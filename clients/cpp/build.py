"""Build the C++ example bot from Python (`make -C clients/cpp`), for the tests and `mus bench league --bot cpp`.

The build takes a lock on the Makefile, so that concurrent callers (pytest-xdist workers, a benchmark) never run
two makes in the same folder at once.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

CPP_DIR = Path(__file__).resolve().parent
BOT = CPP_DIR / "build" / "mus-random-bot"
BUILD_TIMEOUT_S = 900


class BuildError(Exception):
    """The bot cannot be built here; the message says why in one line."""


def missing_toolchain() -> str | None:
    """Why the C++ bot cannot be built on this machine, or None when it can."""
    for tool in ("g++", "make", "pkg-config"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (see clients/cpp/README.md)"
    if subprocess.run(["pkg-config", "--exists", "grpc++"], check=False).returncode != 0:
        return "pkg-config does not find grpc++ (apt-get install libgrpc++-dev; see clients/cpp/README.md)"
    return None


def build_bot() -> Path:
    """The built bot's path, after an (incremental) `make`; raises `BuildError`."""
    missing = missing_toolchain()
    if missing is not None:
        raise BuildError(missing)
    with (CPP_DIR / "Makefile").open() as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(
            ["make", "-s", "-C", str(CPP_DIR), "-j", str(os.cpu_count() or 1)],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["make failed"]
        raise BuildError(f"make -C clients/cpp failed: {lines[-1]}")
    if not os.access(BOT, os.X_OK):
        raise BuildError(f"the build did not write {BOT}")
    return BOT
