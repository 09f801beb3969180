"""Two matches in a row with a persistent bot's seats played from a worker's pool (docs/pool.md): each of its
processes gets a seat line on its standard input for the first match, then another for the second."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from referee.engine.events import Fault
from referee.engine.outcome import MatchTermination
from referee.engine.rules import Rules
from workers.launcher import BotProgram, Limits, sandbox_available
from workers.matches import PlayedMatch, play_programs
from workers.pool import BotPool


@dataclass(frozen=True)
class TwoSeats:
    played: tuple[PlayedMatch, PlayedMatch]
    pids: tuple[dict[int, int], dict[int, int]]
    """The persistent bot's process per place (workers.pool.place: partner 0 or 1), in each match."""
    logs: tuple[str, ...]
    """The output of each of its processes, over both matches."""
    started: int
    """Processes the pool started in all."""


def two_seats_in_a_row(program: BotProgram, opponent: BotProgram, rules: Rules, log_dir: Path) -> TwoSeats:
    """`program` (persistent) as team 0 against `opponent` (launched per match), twice, from one pool; sandboxed
    where this machine can, as a league plays."""
    limits = Limits() if sandbox_available() else None
    pool = BotPool(limits, log_dir=log_dir)
    played: list[PlayedMatch] = []
    pids: list[dict[int, int]] = []
    try:
        for seed in (1, 2):
            played.append(asyncio.run(play_programs((program, opponent), rules, seed, sandbox=limits, pool=pool)))
            pids.append({place: member.pid for (_, _, place), member in pool._processes.items()})
        started = pool.started
    finally:
        pool.close()
    logs = tuple(path.read_text(errors="replace") for path in sorted(log_dir.glob("*.log")))
    return TwoSeats((played[0], played[1]), (pids[0], pids[1]), logs, started)


def check_two_clean_seats_per_process(result: TwoSeats) -> None:
    """Both matches finished normally without a fault or an incident, and the same two processes (partners 0 and
    1) played the persistent bot's seats in both."""
    for played in result.played:
        logs = [*result.logs, *(path.read_text() for path in played.logs.values() if path.exists())]
        assert played.incidents == (), logs
        assert [event for event in played.match.events if isinstance(event.payload, Fault)] == [], logs
        outcome = played.match.outcome
        assert outcome is not None and outcome.termination is MatchTermination.NORMAL
        assert {0, 2} <= {step.seat for step in played.match.log}, "both of its seats decided"
    assert sorted(result.pids[0]) == [0, 1] and result.pids[0] == result.pids[1], "one process per partner, kept"
    assert result.started == 2 and len(result.logs) == 2
