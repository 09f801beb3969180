"""Play one match between two bot programs on a referee embedded in this process, over real gRPC.

Team 0 (seats 0 and 2) is the first program's partnership and team 1 (seats 1 and 3) the second's; each seat
is its own process. The league runner and `mus match play` both use this.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

from referee.engine.match import Match
from referee.engine.rules import Rules
from referee.service.server import start_server
from referee.service.servicer import Referee
from referee.service.table import Table, TableStatus
from workers.launcher import BotProgram, launch_bot

log = logging.getLogger(__name__)

EXIT_WAIT_S = 5.0
"""How long bot processes get to exit on their own after the match before they are killed."""


@dataclass(frozen=True)
class PlayedMatch:
    """A finished table and where each seat's bot output was written."""

    table: Table
    logs: tuple[Path, ...]

    @property
    def match(self) -> Match:
        assert self.table.match is not None
        return self.table.match


async def play_programs(
    programs: tuple[BotProgram, BotProgram],
    rules: Rules,
    seed: int,
    *,
    log_dir: Path | None = None,
    join_timeout_s: float = 30.0,
) -> PlayedMatch:
    """Run a referee on 127.0.0.1, launch the four seats' processes, and wait for the outcome."""
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="mus-match-"))
    referee = Referee()
    server, port = await start_server(referee, "127.0.0.1:0")
    address = f"127.0.0.1:{port}"
    names = [programs[seat % 2].name for seat in range(4)]
    table = referee.create_table(rules, seed, names, join_timeout_s=join_timeout_s)
    processes: list[asyncio.subprocess.Process] = []
    logs = tuple(log_dir / f"seat{seat}-{names[seat]}.log" for seat in range(4))
    watchers: list[asyncio.Task[None]] = []
    try:
        for seat in range(4):
            process = await launch_bot(programs[seat % 2], address, table.seats[seat].token, log_path=logs[seat])
            processes.append(process)
            watchers.append(asyncio.create_task(_watch_process(table, seat, process)))
        await table.finished.wait()
        await _reap(processes)
    finally:
        for watcher in watchers:
            watcher.cancel()
        for process in processes:
            if process.returncode is None:
                process.kill()
                await process.wait()
        if table.status is not TableStatus.FINISHED:
            table.cancel("the match runner stopped")
        await server.stop(grace=1.0)
    return PlayedMatch(table, logs)


async def _watch_process(table: Table, seat: int, process: asyncio.subprocess.Process) -> None:
    """A bot process that exits before the match ends has crashed: the table stops waiting for it."""
    code = await process.wait()
    if table.status is TableStatus.RUNNING or table.status is TableStatus.WAITING:
        table.report_crash(seat, f"the bot process exited with code {code}")


async def _reap(processes: list[asyncio.subprocess.Process]) -> None:
    """Give bots a moment to exit after the outcome, then terminate the rest."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*(process.wait() for process in processes)), EXIT_WAIT_S)
    for process in processes:
        if process.returncode is None:
            process.terminate()
