"""The bots' logs of a worker's machine (`MUS_LOG_DIR`), kept under `MUS_LOG_LIMIT`: the oldest go first.

A seat's output is capped at 8 MiB a match (`launcher.Limits.output_bytes`), and a league plays on: a review's bot
wrote its 16 MiB a match, about 36 GB an hour of league on a 2-core machine, until the disk that also holds the
database was full (stop 39). So a worker, before a match and at most every `SCAN_EVERY_S`, adds up the folder and
removes the oldest logs until the rest is under the limit: whole match folders (`match-N`), and the logs of pooled
processes (`pool/*.log`), each counted by its newest write. What was written in the last `KEEP_RECENT_S` is kept:
a match under way (this worker's, or another's on the machine), a pooled process that played a seat meanwhile.
Between two looks the folder may pass the limit by what the seats write meanwhile.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

LOG_DIR_VARIABLE = "MUS_LOG_DIR"
LOG_LIMIT_VARIABLE = "MUS_LOG_LIMIT"
DEFAULT_LIMIT = "2G"
SCAN_EVERY_S = 30.0
"""How often a worker adds up its logs at most: a walk of the folder, a few ms for a league's thousand matches."""

KEEP_RECENT_S = 120.0
"""Logs written this recently are never removed: they may be written still."""

_SIZE = re.compile(r"(\d+)\s*([KMGT]?)i?B?", re.IGNORECASE)
_last_scan: dict[Path, float] = {}
"""When this process last added up each logs folder (`keep_within_limit`)."""


class LogFolderError(ValueError):
    """A logs folder given by path that goes through a link, or cannot be made (`own_log_folder`)."""


def own_log_folder(path: Path) -> Path:
    """`path` as a folder for seat logs, made if need be, refused (`LogFolderError`) where any part of it is a
    link. The worker writes and quotes its seats' logs as itself, often root, and `--logs logs/` in a bot's folder
    is where a stranger's files are: a review's bot folder held a `logs` link, and links named as its seat logs, and
    the checker appended the bot's output to files of its choice, created others, and quoted root's files and its
    own environment, the admin token in it, into its report (helper-87). Files in it are opened without following
    a link (`launcher._CappedLog`, `checks.output_tail`)."""
    absolute = Path(os.path.abspath(path))
    for made in (False, True):
        if absolute.resolve() != absolute:
            raise LogFolderError(
                f"the logs folder {path} goes through a link (to {absolute.resolve()}): give a folder's own path"
            )
        if not made:
            try:
                absolute.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise LogFolderError(f"cannot create the logs folder {str(path)!r}: {error.strerror}") from None
    return absolute


def log_root() -> Path:
    """`MUS_LOG_DIR`, default `./.mus-logs`, as an absolute path."""
    return Path(os.environ.get(LOG_DIR_VARIABLE, ".mus-logs")).resolve()


def log_limit() -> int | None:
    """`MUS_LOG_LIMIT` in bytes (a number with K, M, G or T: `500M`, `2G`); `off` for none. `mus worker` and
    `mus league run` check it as they start (`ValueError`, said in one line), so a wrong one voids no match."""
    text = os.environ.get(LOG_LIMIT_VARIABLE, "").strip() or DEFAULT_LIMIT
    if text.lower() == "off":
        return None
    found = _SIZE.fullmatch(text)
    if found is None:
        raise ValueError(f"{LOG_LIMIT_VARIABLE}={text!r}: give a size such as 500M or 2G, or off")
    number, unit = int(found[1]), found[2].upper()
    return number * 1024 ** ("KMGT".index(unit) + 1) if unit else number


@dataclass(frozen=True, slots=True)
class _Unit:
    """What is removed at once: a match's folder, or a pooled process's log."""

    path: Path
    size: int
    modified: float


def keep_within_limit(root: Path, limit: int | None) -> list[Path]:
    """Remove the oldest logs under `root` until the rest is under `limit` bytes (None: no limit); at most once
    every SCAN_EVERY_S a folder. Returns what was removed."""
    now = time.monotonic()
    if limit is None or now - _last_scan.get(root, -SCAN_EVERY_S) < SCAN_EVERY_S:
        return []
    _last_scan[root] = now
    units = _units(root)
    total = sum(unit.size for unit in units)
    recent = time.time() - KEEP_RECENT_S
    removed = []
    for unit in sorted(units, key=lambda unit: unit.modified):
        if total <= limit or unit.modified > recent:
            break
        if unit.path.is_dir():
            shutil.rmtree(unit.path, ignore_errors=True)
        else:
            unit.path.unlink(missing_ok=True)
        total -= unit.size
        removed.append(unit.path)
    return removed


def _units(root: Path) -> list[_Unit]:
    units = []
    for entry in _entries(root):
        if entry.name.startswith("match-") and entry.is_dir(follow_symlinks=False):
            files = [item.stat(follow_symlinks=False) for item in _entries(Path(entry.path))]
            modified = max((stat.st_mtime for stat in files), default=entry.stat(follow_symlinks=False).st_mtime)
            units.append(_Unit(Path(entry.path), sum(stat.st_size for stat in files), modified))
        elif entry.name == "pool" and entry.is_dir(follow_symlinks=False):
            for item in _entries(Path(entry.path)):
                if item.name.endswith(".log") and item.is_file(follow_symlinks=False):
                    stat = item.stat(follow_symlinks=False)
                    units.append(_Unit(Path(item.path), stat.st_size, stat.st_mtime))
    return units


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as scan:
            return list(scan)
    except OSError:
        return []  # not made yet, or gone
