"""Where a worker's CPU goes, match by match: an opt-in log for `mus bench league`.

With `MUS_CPU_LOG` set to a file path, `workers.play.play_league_match` appends one JSON line per played match:

- `database_s`: CPU of this process in the match's database transactions (claim and setup, then the result);
  SQLite runs inside the worker, so this is the database's work and SQLAlchemy's;
- `referee_s`: CPU of this process while the match is played (the embedded referee, the engine, gRPC, the
  launcher and the match runner's bookkeeping);
- `bots_s`: CPU of the seats' processes: from each seat's cgroup where the launcher makes one that counts CPU
  (cpuacct on cgroup v1, cpu.stat on v2: the sandbox and everything in it), else `RUSAGE_CHILDREN` (which
  misses what bwrap's pid namespace leaves for the host's init to reap: most of a sandboxed bot);
- `pool_started`: the pooled processes (workers.pool) the worker started for the match;
- `cpu_before_s`, `cpu_after_s`: this process's CPU (`RUSAGE_SELF`, all threads) when the match was claimed
  and when it was stored, so the reader can tell the worker's own work between matches (Celery, the broker,
  the heartbeat) from its start-up.

It is measured with `getrusage`, not sampled: exact to the kernel's accounting, and costs two system calls.
Without `MUS_CPU_LOG` nothing is measured or written.
"""

from __future__ import annotations

import json
import os
import resource
from dataclasses import asdict, dataclass, field

CPU_LOG_VARIABLE = "MUS_CPU_LOG"


def self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class MatchCpu:
    """The CPU of one match in this worker, filled in as it goes (`lap` adds the time since the last lap)."""

    match_id: int
    pid: int = field(default_factory=os.getpid)
    database_s: float = 0.0
    referee_s: float = 0.0
    bots_s: float = 0.0
    pool_started: int = 0
    """Pooled processes this worker started for the match (workers.pool): a match that started none is warm."""
    cpu_before_s: float = field(default_factory=self_cpu_s)
    cpu_after_s: float = 0.0
    _self: float = 0.0
    _children: float = 0.0

    def __post_init__(self) -> None:
        self._self, self._children = self.cpu_before_s, children_cpu_s()

    def lap(self, component: str, *, bots_s: float | None = None) -> None:
        """Charge this process's CPU since the last lap to `component` (database or referee), and to the bots
        `bots_s` when the seats' cgroups counted it, else the reaped children's CPU."""
        now_self, now_children = self_cpu_s(), children_cpu_s()
        setattr(self, f"{component}_s", getattr(self, f"{component}_s") + now_self - self._self)
        self.bots_s += now_children - self._children if bots_s is None else bots_s
        self._self, self._children = now_self, now_children

    def skip(self) -> None:
        """Charge nothing for the time since the last lap (it counts as the worker's own work)."""
        self._self, self._children = self_cpu_s(), children_cpu_s()

    def write(self) -> None:
        """Append the line to MUS_CPU_LOG (one `write` of one line: lines of several workers never interleave)."""
        path = os.environ.get(CPU_LOG_VARIABLE)
        if not path:
            return
        self.cpu_after_s = self_cpu_s()
        line = json.dumps({key: value for key, value in asdict(self).items() if not key.startswith("_")}) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def start(match_id: int) -> MatchCpu | None:
    """A match's CPU record when MUS_CPU_LOG is set, else None."""
    return MatchCpu(match_id) if os.environ.get(CPU_LOG_VARIABLE) else None
