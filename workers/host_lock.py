"""The host's play lock: on one machine, the bots of one match run at a time, whatever worker plays it.

Two processes running at the same time on one machine can pass bits through the CPU they share (one spins in
time slots, the other times its own loop). Within a worker the turn gate and the pool see to it that no two
processes that must not talk run together (`workers.launcher.TurnGate`, `stop_all`). Across workers they could:
a security review (stop 36) ran two workers on one machine, and a bot's process in one worker's match passed the
cards it was dealt, through a process of the same author's in the other worker's match, into the first match's twin
(the duplicate deal, seats swapped) and to its partner, about 22 bits a second.

So a worker holds this lock from before any process of a match may run until every process of the match has
exited or is frozen (`workers.matches.play_programs`, `play_on_referee`; `mus bot check`'s matches too), and
while it thaws its pooled processes for them to exit (`BotPool.close`): the matches of one machine's workers
are played one at a time, and their other work (claims, results, replays, starting the next table) overlaps.
More workers on one machine still share its bookkeeping; more machines play more matches at once.

The lock is an exclusive `flock` on one file for the whole machine (`MUS_HOST_LOCK`, default
`/dev/shm/mus-arena-play.lock`): every worker of the machine must see the same file (workers in separate containers
of one machine must be given one they share). A bot's sandbox has a /dev of its own: it cannot take the lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

HOST_LOCK_VARIABLE = "MUS_HOST_LOCK"
"""The lock file every worker of this machine shares; unset, `default_lock_path()`."""

POLL_S = 0.001
"""How often a worker waiting for another's match looks again: a match lasts tens of milliseconds at least."""


def default_lock_path() -> Path:
    """/dev/shm's, which every process of the machine sees (a container has its own); else the temporary folder's."""
    shared = Path("/dev/shm")
    return (shared if shared.is_dir() else Path(tempfile.gettempdir())) / "mus-arena-play.lock"


def lock_path() -> Path:
    return Path(os.environ.get(HOST_LOCK_VARIABLE) or default_lock_path())


def _open_lock() -> int:
    fd = os.open(lock_path(), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    with contextlib.suppress(OSError):  # another user's file: it is theirs to open to all
        os.fchmod(fd, 0o666)  # every user's workers of the machine take the same lock
    return fd


@contextlib.asynccontextmanager
async def host_play_lock() -> AsyncIterator[None]:
    """Hold the machine's play lock for the block, waiting (without blocking the event loop) while another match
    of this machine holds it."""
    fd = _open_lock()
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await asyncio.sleep(POLL_S)
        yield
    finally:
        os.close(fd)  # the lock goes with the file's last descriptor


@contextlib.contextmanager
def holding_host_play_lock() -> Iterator[None]:
    """`host_play_lock` for code that runs no event loop (a pool closed at a worker's exit): it blocks meanwhile."""
    fd = _open_lock()
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
