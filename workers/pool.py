"""Hosted bots that stay alive across matches: a worker's pool of seat processes, for the bots registered with
`mus bot add --persistent` (`BotProgram.persistent`).

A match then costs its play, not four start-ups. The rules the pool keeps:

- **A process per half and partner.** A bot's process is keyed by the bot, the half of its duplicate pair the
  match is (`half`: 0 or 1, `workers.db.repo.half_of`; the twin is always the other) and which partner it is
  (`seat // 2`: the first seat of each team, 0 or 1, or its second, 2 or 3). Partners are two processes, each in its
  own sandbox, and a bot that meets itself has its other team in two more (keyed by seat); so no process plays two
  seats of one table.
- **Never both halves of a duplicate pair.** The twin of a match is its other half: its processes are not the
  first half's, so whatever a process remembers of a deal, it never plays that deal again from the other side.
  A worker that plays only one half of every pair (the queues: `workers.app.match_queues`) needs two processes a
  bot, not four.
- **Restarts.** A process is replaced when it has exited (a crash: the match charges it as today), after
  `max_seats` seats, when its seat had an incident (it may be stuck), past half its CPU-time limit (an rlimit
  counts the process's life, not a match), and when the bot's program or registered version changes.
- **Frozen between seats.** Every process of the pool is frozen before any process of a match runs, and again
  once the match has ended (`workers.matches.play_programs`, `stop_all`); only a seat's process is thawed, for it
  (`PooledProcess.take`). So a kept process takes no CPU from the matches played meanwhile, nor passes what it
  remembers through the CPU to the processes playing its twin.
- **Limits.** At most `max_processes` processes live at once (least recently used retired first), holding at most
  `max_memory_bytes` of memory together after a match (the largest retired first).
- **A folder of its own.** Each process has its own folder, bound at `/run/mus` in its sandbox; a match's
  referee listens on a socket in it for that process's seat (and nowhere another process can see), named in
  the seat line, and removes it at the end of the match.

Only a persistent bot plays from the pool, because a pooled process must speak the seats-over-stdin protocol
(`workers.launcher.SEATS_VARIABLE`; the SDK's `run_main`, the C++ and JavaScript example bots, the stdio bridge
and `bench/league_bot.py` do). Every other bot is launched per match.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
from collections import OrderedDict
from pathlib import Path

from workers.host_lock import holding_host_play_lock
from workers.launcher import CLOSE_GRACE_S, BotProgram, Freezer, Limits, PooledProcess, open_to_seat, start_pooled
from workers.scratch import own_folder

MAX_SEATS = 500
"""Seats a pooled process plays before it is replaced (bounds what a leak or a grudge can build up)."""

MAX_PROCESSES = 64
"""Pooled processes a worker keeps at once: half of them for each half of the duplicate pairs (`_HALVES`)."""

MAX_MEMORY_BYTES = 4 * 1024**3
"""The memory a worker's pooled processes may hold together between matches, half of it for each half of the
duplicate pairs (each process may hold up to its seat's limit, 1 GiB, for its whole life: a security review had
four idle processes of one bot hold 2.9 GB after its league, and 64 such would exhaust a host). Past its half's
share, the largest processes of the half that just played are retired until the rest fit. Honest bots are far
below: a Python SDK process holds about 40 MB, so 32 of them about 1.3 GB."""

_HALVES = 2
"""Each half of the duplicate pairs has its own share of the pool's caps, and only its own processes are retired to
keep it: with one share, the memory a first match's processes held decided whether the pool retired a process of the
twin's before the twin, whose other process read the restart off the twin's start (a review: a bit a pair)."""


class BotPool:
    """One worker's pooled seat processes for one kind of confinement (`limits`, or None: unconfined)."""

    def __init__(
        self,
        limits: Limits | None,
        *,
        log_dir: Path | None = None,
        max_seats: int = MAX_SEATS,
        max_processes: int = MAX_PROCESSES,
        max_memory_bytes: int = MAX_MEMORY_BYTES,
        retire_cpu_s: float | None = None,
    ) -> None:
        self.limits = limits
        self.root = own_folder("mus-pool")
        """Where each process's own folder is made (a process's sandbox binds its folder, never this one)."""
        self.log_dir = log_dir
        self.max_seats = max_seats
        self.max_processes = max_processes
        self.max_memory_bytes = max_memory_bytes
        self._memory: dict[tuple[str, int, int], int] = {}
        """By key: the memory each process held after its last match (`release`), as its cgroup counted it."""
        self.retire_cpu_s = retire_cpu_s if retire_cpu_s is not None else limits.cpu_s / 2 if limits else None
        """A process that has used this much CPU is replaced after its match (default: half the rlimit)."""
        self.started = 0
        self.retired = 0
        self._processes: OrderedDict[tuple[str, int, int], PooledProcess] = OrderedDict()
        """By bot, half and place (`place`), least recently used first."""
        self._start_cpu_s: dict[str, float] = {}
        """By bot: the CPU-seconds its last new process had used by the end of its first match (`start_cost_s`)."""

    def accepts(self, program: BotProgram) -> bool:
        """Whether `program` plays from this pool (it is persistent), rather than being launched per match."""
        return program.persistent

    def acquire(self, program: BotProgram, half: int, place: int) -> PooledProcess:
        """The live process of `program` for this half and place (`place`), started now if there is none (or it
        has to be replaced)."""
        key = (program.name, half, place)
        current = self._processes.get(key)
        if current is not None and not self._usable(current, program):
            self._retire(key)
            current = None
        if current is None:
            while len(kept := self._kept(half)) >= self._share(self.max_processes):
                self._retire(kept[0])  # its half's least recently used
            log_path = None
            if self.log_dir is not None:
                self.log_dir.mkdir(parents=True, exist_ok=True)
                # The worker's pid: every worker on the machine logs in the same folder.
                log_path = self.log_dir / f"{program.name}-half{half}-place{place}-{os.getpid()}-{self.started}.log"
            # Short: a referee's socket is made in it, and a unix socket's path is at most 107 bytes (matches.py).
            # Named by nothing of the process's: bound at /run/mus, its host path is in bwrap's command line and in
            # the seat's mountinfo, where `h{half}p{place}-` told a process which half it plays (a review, stop 43).
            folder = open_to_seat(Path(tempfile.mkdtemp(prefix="p-", dir=self.root)))
            try:
                current = start_pooled(program, folder, limits=self.limits, log_path=log_path)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            self.started += 1
            self._processes[key] = current
        self._processes.move_to_end(key)
        current.take()
        return current

    def release(self, process: PooledProcess, *, healthy: bool, cpu_s: float | None = None) -> None:
        """After a match: count the seat, and replace the process if it is not `healthy` or has played enough.
        `cpu_s`: its CPU-seconds so far, when the caller has just read them (else they are read here). It runs on
        until its worker freezes the pool as the match ends (`workers.matches.play_programs`)."""
        process.seats_played += 1
        if process.seats_played == 1 and cpu_s is not None:
            self._start_cpu_s[process.program.name] = cpu_s
        key = next((key for key, member in self._processes.items() if member is process), None)
        if key is not None and (not healthy or not process.alive or self._near_cpu_limit(process, cpu_s)):
            self._retire(key)  # killed at once, as every retirement while the worker plays (`_retire`)
        elif key is not None and (held := process.memory_bytes()) is not None:
            self._memory[key] = held
            if not process.confine_memory(held):  # what it is counted by, until its next seat
                self._retire(key)
            while sum((sizes := self._memory_of(key[1])).values()) > self._share(self.max_memory_bytes):
                self._retire(max(sizes, key=sizes.__getitem__))  # its half's largest

    @staticmethod
    def _share(cap: int) -> int:
        """A half's share of one of the pool's caps (`_HALVES`)."""
        return max(1, cap // _HALVES)

    def _kept(self, half: int) -> list[tuple[str, int, int]]:
        """The keys of the processes kept for `half`, least recently used first."""
        return [key for key in self._processes if key[1] == half]

    def _memory_of(self, half: int) -> dict[tuple[str, int, int], int]:
        """What each process kept for `half` held after its last match, where it was counted."""
        return {key: self._memory[key] for key in self._kept(half) if key in self._memory}

    def _usable(self, process: PooledProcess, program: BotProgram) -> bool:
        """Whether `process` may play `program`'s next seat, or has to be replaced first (see the module)."""
        return process.program == program and process.alive and process.seats_played < self.max_seats

    def start_cost_s(self, programs: tuple[BotProgram, BotProgram], half: int) -> float | None:
        """About how long this pool would spend starting processes for a match of `programs` (team 0's, team 1's)
        in `half`: 0 when its live processes can play every pooled seat; None when it would start a bot it has
        never measured here. A start is counted as what the bot's last new process had used by the end of its first
        match (CPU-seconds, as its cgroup counts them: on a worker's own core, about the time it holds the core)."""
        meets_itself = programs[0].name == programs[1].name
        cost = 0.0
        for seat in range(4):
            program = programs[seat % 2]
            if not self.accepts(program):
                continue
            current = self._processes.get((program.name, half, place(seat, meets_itself)))
            if current is not None and self._usable(current, program):
                continue
            measured = self._start_cpu_s.get(program.name)
            if measured is None:
                return None
            cost += measured
        return cost

    def _near_cpu_limit(self, process: PooledProcess, used: float | None) -> bool:
        """Past half its CPU-time limit (an rlimit counts a process's whole life, not a match's): replaced now,
        so that SIGXCPU never lands in the middle of a later match."""
        if self.retire_cpu_s is None:
            return False
        used = process.cpu_s() if used is None else used
        return used is not None and used > self.retire_cpu_s

    def processes(self) -> list[PooledProcess]:
        return list(self._processes.values())

    def freezers(self) -> list[Freezer]:
        """Those of its processes that can be frozen (a v2 cgroup each): what `stop_all` stops."""
        return [member.freezer for member in self._processes.values() if member.freezer is not None]

    def _retire(self, key: tuple[str, int, int], grace_s: float = 0.0) -> None:
        """Stop a process and forget it. While the worker plays, it is killed at once, as it is (frozen between its
        seats): thawed and given its end of input and CLOSE_GRACE_S to exit, a review's process that ignored the end
        of its input held its worker's event loop a second at every retirement (the pool's memory, its count), and
        ran that second beside the machine's other matches. Only `close` gives a grace, under the host's play
        lock."""
        self._memory.pop(key, None)
        process = self._processes.pop(key)
        process.close(grace_s)
        shutil.rmtree(process.socket_dir, ignore_errors=True)
        self.retired += 1

    def close(self) -> None:
        """Stop every pooled process and remove their folders. Every input is closed first, so the processes
        exit together rather than one after the other. Confined ones are thawed for that while this worker holds
        the host's play lock (blocking until another match of the machine has ended): a security review's
        processes that ignored the end of their input ran up to 4 s beside another worker's match (stop 36)."""
        with holding_host_play_lock() if self.limits is not None else contextlib.nullcontext():
            for process in self._processes.values():
                process.end_input()
            while self._processes:
                self._retire(next(iter(self._processes)), grace_s=CLOSE_GRACE_S)
        shutil.rmtree(self.root, ignore_errors=True)


def place(seat: int, meets_itself: bool) -> int:
    """Which of a bot's processes of one half plays `seat`: its partner number (`seat // 2`), or the seat itself
    when the bot meets itself (its two teams are four processes)."""
    return seat if meets_itself else seat // 2


_POOLS: dict[Limits | None, BotPool] = {}


def worker_pool(limits: Limits | None, log_dir: Path | None = None) -> BotPool:
    """This worker process's pool for `limits` (made at its first persistent bot)."""
    pool = _POOLS.get(limits)
    if pool is None:
        pool = _POOLS[limits] = BotPool(limits, log_dir=log_dir)
    return pool


def existing_pool(limits: Limits | None) -> BotPool | None:
    """This worker process's pool for `limits`, if it has made one (`worker_pool`)."""
    return _POOLS.get(limits)


def started_here() -> int:
    """Processes this worker process's pools have started so far (the CPU log's `pool_started`)."""
    return sum(pool.started for pool in _POOLS.values())


@atexit.register
def close_pools() -> None:
    """Stop this worker process's pools (at its exit)."""
    for pool in _POOLS.values():
        with contextlib.suppress(Exception):
            pool.close()
    _POOLS.clear()
