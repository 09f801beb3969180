"""Where a league match's time goes: `play_league_match`'s steps, played in this process and timed one by one.

Each probed match is one of the benchmark league's matches, run as a worker runs it (`workers.play`): claim it
and read its setup in the database, start a referee on a unix socket and the four seats' bot processes, each in
its sandbox where this machine has one (`workers.launcher.launch_bot`), play, let the bots exit, write the
result and the replay. The phases:

- `claim_ms`: `repo.claim_match` and `repo.match_setup`, one transaction each (SQLite file in WAL mode);
- `startup_ms`: from launching the first of the four bot processes to the table's start (all four joined): the
  bots' interpreter and import start-up, which they pay in parallel;
- `play_ms`: from the table's start to its outcome (the decisions, over gRPC);
- `exit_ms`: from the outcome to the exit of the last bot process (`workers.matches` waits for it before
  returning, so the worker does too);
- `record_ms`: `repo.record_result` (result, games, vacas, replay and status in one transaction);
- `bot_cpu_ms` and `worker_cpu_ms`: CPU time (user + system) of the four seats, from their cgroups where the
  launcher makes ones that count CPU (else the reaped children's, which misses most of a sandboxed bot), and
  of this process (the referee and the steps above) per match.

These are medians over the probed matches. The broker's share is not here: it is the gap each worker leaves
between two matches in the league runs (`gap_ms` of each configuration).
"""

from __future__ import annotations

import resource
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from referee.engine.rules import Rules
from workers.db import repo
from workers.db.session import session_scope
from workers.launcher import BotProgram, Limits, sandbox_available
from workers.matches import (
    EmbeddedReferee,
    PlayedMatch,
    fault_records,
    incident_records,
    play_programs,
    run_on_worker_referee,
)
from workers.pool import BotPool

PROBE_WORKER = "bench-probe:0"


@dataclass(frozen=True)
class Phases:
    claim_ms: float
    startup_ms: float
    play_ms: float
    exit_ms: float
    record_ms: float
    bot_cpu_ms: float
    worker_cpu_ms: float
    decisions: int


def _cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


async def _play(
    program: BotProgram, rules: Rules, seed: int, log_dir: Path, pool: BotPool | None, referee: EmbeddedReferee
) -> tuple[PlayedMatch, float, float, float]:
    """One match played by `workers.matches.play_programs` on this process's long-lived referee, as a worker
    plays it; returns it with its start-up, play and exit times."""
    played = await play_programs(
        (program, program), rules, seed, log_dir=log_dir, sandbox=probe_limits(), pool=pool, referee=referee
    )
    startup = played.started_at - played.launched_at
    return played, startup, played.ended_at - played.started_at, played.exited_at - played.ended_at


def probe_limits() -> Limits | None:
    """The seats' sandbox, as a league's worker plays them (workers.play._limits), where this machine has one."""
    return Limits() if sandbox_available() else None


def probe_match(
    engine: Engine, match_id: int, program: BotProgram, log_dir: Path, pool: BotPool | None = None
) -> Phases:
    """Play league match `match_id` with `program` in every seat, as `workers.play.play_league_match` does (with
    a `pool`, by its live processes: `startup_ms` is then only the time the four seats take to join)."""
    cpu_self, cpu_children = _cpu_seconds(resource.RUSAGE_SELF), _cpu_seconds(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with session_scope(engine) as session:
        if repo.claim_match(session, match_id, PROBE_WORKER, 600.0) is None:
            raise RuntimeError(f"the probe could not claim match {match_id}")
        setup = repo.match_setup(session, match_id)
    claimed = time.perf_counter()
    rules = Rules.from_options(setup.rules)
    played, startup_s, play_s, exit_s = run_on_worker_referee(
        lambda referee: _play(program, rules, setup.seed, log_dir, pool, referee)
    )
    outcome = played.match.outcome
    assert outcome is not None
    recording = time.perf_counter()
    with session_scope(engine) as session:
        repo.record_result(
            session,
            match_id,
            PROBE_WORKER,
            outcome,
            played.record_json,
            fault_records(played.match),
            [list(seconds) for seconds in played.decision_seconds],
            incidents=incident_records(played.incidents),
        )
    recorded = time.perf_counter()
    return Phases(
        claim_ms=1000 * (claimed - start),
        startup_ms=1000 * startup_s,
        play_ms=1000 * play_s,
        exit_ms=1000 * exit_s,
        record_ms=1000 * (recorded - recording),
        bot_cpu_ms=1000
        * (
            played.bots_cpu_s
            if played.bots_cpu_s is not None
            else _cpu_seconds(resource.RUSAGE_CHILDREN) - cpu_children
        ),
        worker_cpu_ms=1000 * (_cpu_seconds(resource.RUSAGE_SELF) - cpu_self),
        decisions=len(played.match.log),
    )


def summarize(phases: list[Phases]) -> dict[str, Any]:
    """Medians of each phase over the probed matches, and the wall time of a match in the worker."""
    if not phases:
        return {}
    fields = ("claim_ms", "startup_ms", "play_ms", "exit_ms", "record_ms", "bot_cpu_ms", "worker_cpu_ms")
    summary: dict[str, Any] = {"matches": len(phases)}
    for name in fields:
        summary[name] = round(statistics.median(getattr(phase, name) for phase in phases), 1)
    summary["decisions_per_match"] = statistics.median(phase.decisions for phase in phases)
    summary["match_ms"] = round(
        sum(summary[name] for name in ("claim_ms", "startup_ms", "play_ms", "exit_ms", "record_ms")), 1
    )
    return summary
