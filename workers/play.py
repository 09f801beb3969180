"""Playing one league match by id: claim it, run it, store it. The Celery task is a thin wrapper around this.

Idempotent by construction: the match is claimed in the database first (a finished match, or one another live
worker holds, is not claimable, so a redelivered message is a no-op), and the result, its replay and the match
status are written in one transaction behind a unique key. Anything that goes wrong outside the bots (the
referee, a program that cannot start, the database) voids the attempt: the match goes back to the queue, and
nothing is charged to a bot.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from referee.engine.replay import match_record
from referee.engine.rules import Rules
from referee.service.table import TableStatus
from workers.db import repo
from workers.db.session import ensure_schema, make_engine, session_scope
from workers.launcher import BotProgram
from workers.matches import PlayedMatch, play_programs

log = logging.getLogger(__name__)

LEASE_S = float(os.environ.get("MUS_LEASE_S", "60"))
"""How long a claim lasts without a heartbeat; a worker that dies loses its match after this."""

MAX_ATTEMPTS = 3
"""Infrastructure failures in a row after which a match is marked failed instead of requeued."""


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
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(engine, match_id, worker, lease_s, stop), daemon=True)
    beat.start()
    try:
        if any(team.remote for team in setup.teams):
            raise RuntimeError("remote bots in leagues are not supported by this worker yet")
        programs = tuple(
            BotProgram(team.bot_name, team.command, Path(team.folder) if team.folder else None) for team in setup.teams
        )
        rules = Rules.from_options(setup.rules)
        played = asyncio.run(play_programs((programs[0], programs[1]), rules, setup.seed, log_dir=logs_dir(match_id)))
        if played.table.status is not TableStatus.FINISHED:
            raise RuntimeError(f"the table ended {played.table.status.value}")
    except Exception as error:
        stop.set()
        log.exception("match_id=%s failed outside the bots: voided", match_id)
        with session_scope(engine) as session:
            repo.void_match(session, match_id, worker, f"{type(error).__name__}: {error}", max_attempts=MAX_ATTEMPTS)
        return "void"
    finally:
        stop.set()
    outcome = played.match.outcome
    assert outcome is not None  # a finished table has an outcome
    with session_scope(engine) as session:
        stored = repo.record_result(
            session,
            match_id,
            worker,
            outcome,
            match_record(played.match),
            charged_faults(played),
            [state.decision_seconds for state in played.table.seats],
        )
    log.info("match_id=%s %s", match_id, "stored" if stored else "already had a result")
    return "finished"


def charged_faults(played: PlayedMatch) -> list[dict[str, Any]]:
    """Every fault of the match with its cause: the rules' (timeouts, illegal actions) and the referee's."""
    faults: list[dict[str, Any]] = [
        {"seat": event.data["seat"], "cause": event.data["cause"], "detail": ""}
        for event in played.match.events
        if event.kind.value == "fault"
    ]
    faults += [
        {"seat": incident.seat, "cause": incident.cause, "detail": incident.detail}
        for incident in played.table.incidents
    ]
    return faults


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
