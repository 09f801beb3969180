"""Playing one league match by id: claim it, run it, store it. The Celery task is a thin wrapper around this.

Idempotent by construction: the match is claimed in the database first (a finished match, or one another live
worker holds, is not claimable, so a redelivered message is a no-op), and the result, its replay and the match
status are written in one transaction behind a unique key. Anything that goes wrong outside the bots (the
referee, a program that cannot start, the database) voids the attempt: the match goes back to the queue, and
nothing is charged to a bot.

A match with a remote bot is played on the standalone referee (`mus referee serve`, at MUS_REFEREE_ADDRESS,
with its admin token in MUS_ADMIN_TOKEN), which offers the remote bot its seats through the lobby; the hosted
side is launched here, pointed at that referee. A remote bot that does not show up within the league's
`absent_limit_s` is `absent`, and its team forfeits: a result like any other. The lease is kept by the
heartbeat for as long as the match waits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from referee.engine.match import MatchOutcome
from referee.engine.replay import match_record
from referee.engine.rules import Rules
from referee.service.table import TableStatus
from workers.db import repo
from workers.db.repo import MatchSetup, TeamSetup
from workers.db.session import ensure_schema, make_engine, session_scope
from workers.launcher import BotProgram
from workers.matches import RemoteBot, fault_records, incident_records, play_on_referee, play_programs

log = logging.getLogger(__name__)

LEASE_S = float(os.environ.get("MUS_LEASE_S", "60"))
"""How long a claim lasts without a heartbeat; a worker that dies loses its match after this."""

MAX_ATTEMPTS = 3
"""Infrastructure failures in a row after which a match is marked failed instead of requeued."""

REFEREE_ADDRESS_VARIABLE = "MUS_REFEREE_ADDRESS"
"""The standalone referee (`mus referee serve`) that plays the matches of remote bots, as host:port."""

ADMIN_TOKEN_VARIABLE = "MUS_ADMIN_TOKEN"
"""That referee's admin token."""


@dataclass(frozen=True)
class _Played:
    """What a played match leaves to store."""

    outcome: MatchOutcome
    record: dict[str, Any]
    faults: list[dict[str, Any]]
    """The rules' faults, in order (`fault_records`)."""
    incidents: list[dict[str, Any]]
    """The referee's incidents, in order (`incident_records`)."""
    decision_seconds: list[list[float]]


def worker_name() -> str:
    """This process as a worker: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


@cache
def database() -> Engine:
    """The database of this process (MUS_DATABASE_URL), migrated to the current schema."""
    engine = make_engine()
    ensure_schema(engine)
    return engine


def logs_dir(match_id: int) -> Path:
    """Where the bots' output of a match goes (MUS_LOG_DIR, default ./.mus-logs)."""
    folder = Path(os.environ.get("MUS_LOG_DIR", ".mus-logs")).resolve() / f"match-{match_id}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def play_league_match(match_id: int, *, worker: str | None = None, lease_s: float = LEASE_S) -> str:
    """Play match `match_id` if it is free: 'finished', 'skipped' (not claimable) or 'void' (infrastructure)."""
    engine = database()
    worker = worker or worker_name()
    with session_scope(engine) as session:
        if repo.claim_match(session, match_id, worker, lease_s) is None:
            log.info("match_id=%s is not free (finished or held by a live worker): nothing to do", match_id)
            return "skipped"
        setup = repo.match_setup(session, match_id)
        token_hashes = {
            team.bot_name: repo.get_bot(session, team.bot_name).bot.token_sha256 for team in setup.teams if team.remote
        }
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(engine, match_id, worker, lease_s, stop), daemon=True)
    beat.start()
    try:
        played = _play_with_remote_bots(setup, token_hashes) if token_hashes else _play_hosted(setup)
    except Exception as error:
        stop.set()
        log.exception("match_id=%s failed outside the bots: voided", match_id)
        with session_scope(engine) as session:
            repo.void_match(session, match_id, worker, f"{type(error).__name__}: {error}", max_attempts=MAX_ATTEMPTS)
        return "void"
    finally:
        stop.set()
    with session_scope(engine) as session:
        stored = repo.record_result(
            session,
            match_id,
            worker,
            played.outcome,
            played.record,
            played.faults,
            played.decision_seconds,
            incidents=played.incidents,
        )
    log.info("match_id=%s %s", match_id, "stored" if stored else "already had a result")
    return "finished"


def _play_hosted(setup: MatchSetup) -> _Played:
    """Both sides are programs: play them against a referee embedded in this worker."""
    programs = tuple(_program(team) for team in setup.teams)
    rules = Rules.from_options(setup.rules)
    played = asyncio.run(play_programs((programs[0], programs[1]), rules, setup.seed, log_dir=logs_dir(setup.match_id)))
    if played.table.status is not TableStatus.FINISHED:
        raise RuntimeError(f"the table ended {played.table.status.value}")
    outcome = played.match.outcome
    assert outcome is not None  # a finished table has an outcome
    return _Played(
        outcome,
        match_record(played.match),
        fault_records(played.match),
        incident_records(played.table.incidents),
        [state.decision_seconds for state in played.table.seats],
    )


def _play_with_remote_bots(setup: MatchSetup, token_hashes: dict[str, str | None]) -> _Played:
    """A remote side: play on the standalone referee, which offers the remote bot its seats in the lobby.

    Its seats wait up to the league's `absent_limit_s`; the hosted side is launched here. A missing setting or
    an unreachable referee raises (the attempt is voided, nobody is charged).
    """
    address = os.environ.get(REFEREE_ADDRESS_VARIABLE, "").strip()
    if not address:
        raise RuntimeError(f"remote bots need {REFEREE_ADDRESS_VARIABLE} (mus referee serve)")
    admin_token = os.environ.get(ADMIN_TOKEN_VARIABLE, "")
    if not admin_token:
        raise RuntimeError(f"remote bots need {ADMIN_TOKEN_VARIABLE} (the admin token of the referee at {address})")
    teams: list[BotProgram | RemoteBot] = []
    for team in setup.teams:
        if not team.remote:
            teams.append(_program(team))
            continue
        token_hash = token_hashes.get(team.bot_name)
        if not token_hash:
            raise RuntimeError(f"remote bot {team.bot_name!r} has no token (it was removed)")
        teams.append(RemoteBot(team.bot_name, token_hash))
    played = asyncio.run(
        play_on_referee(
            (teams[0], teams[1]),
            Rules.from_options(setup.rules),
            setup.seed,
            address=address,
            admin_token=admin_token,
            external_id=f"{setup.league_name}/{setup.match_id}/{setup.attempt}",
            join_timeout_s=setup.absent_limit_s,
            log_dir=logs_dir(setup.match_id),
        )
    )
    outcome = played.match.outcome
    assert outcome is not None  # checked when the replay was re-simulated
    return _Played(
        outcome,
        played.record,
        fault_records(played.match),
        incident_records(played.incidents),
        [list(seconds) for seconds in played.decision_seconds],
    )


def _program(team: TeamSetup) -> BotProgram:
    return BotProgram(team.bot_name, team.command, Path(team.folder) if team.folder else None)


def _heartbeat(engine: Engine, match_id: int, worker: str, lease_s: float, stop: threading.Event) -> None:
    """Keep the lease while the match runs, so no other worker takes it over."""
    while not stop.wait(lease_s / 3):
        try:
            with session_scope(engine) as session:
                if not repo.heartbeat(session, match_id, worker, lease_s):
                    log.warning("match_id=%s: lease lost by %s", match_id, worker)
                    return
        except Exception:
            log.exception("match_id=%s: heartbeat failed; retrying", match_id)
