"""Bots, plans and played matches for the database tests: real engine outcomes and replays, not mock-ups."""

from __future__ import annotations

import random
from functools import cache
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session

from referee.engine.match import Match
from referee.engine.outcome import MatchOutcome
from referee.engine.replay import match_record
from referee.engine.rules import Rules
from referee.engine.selfplay import play_random_match, random_action
from workers.db import repo
from workers.db.models import BotVersion, League, metadata

COMMAND = ["python", "bot.py"]
TEST_SECRET = bytes(range(32))
"""A fixed league secret, so the tests' deals (and `played`'s cache) are the same on every run."""
FAULTS = [{"seat": 1, "cause": "timeout", "detail": "no answer in 10.0 s"}]
DECISIONS = [[0.01, 0.02, 0.03], [0.5], [], [0.2, 0.1]]


def bot_folder(root: Path, name: str, body: str = "print('paso')\n") -> Path:
    """A bot program's folder: bot.py and a helper module."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bot.py").write_text(body)
    (folder / "helpers.py").write_text("SEAT = 0\n")
    return folder


def add_bots(session: Session, root: Path, *names: str) -> dict[str, BotVersion]:
    """Hosted bots with one version each."""
    return {
        name: repo.add_bot(session, name, command=COMMAND, folder=bot_folder(root, name), language="python")
        for name in names
    }


def duplicate_plan(names: list[str], *, first_seed: int = 1) -> list[dict[str, Any]]:
    """Every pairing once as a duplicate pair: the same seed twice, teams swapped."""
    plan: list[dict[str, Any]] = []
    pair = 0
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            seed = first_seed + pair
            plan.append({"team0": a, "team1": b, "seed": seed, "duplicate_pair": pair})
            plan.append({"team0": b, "team1": a, "seed": seed, "duplicate_pair": pair})
            pair += 1
    return plan


def make_league(session: Session, name: str, bots: list[str], **overrides: Any) -> League:
    arguments: dict[str, Any] = {
        "bot_names": bots,
        "matches": duplicate_plan(bots),
        "options": {"target_score": 30},
        "matches_per_pairing": 2,
        "seed": 7,
        "absent_limit_s": 120.0,
        "secret": TEST_SECRET,
    }
    arguments.update(overrides)
    return repo.create_league(session, name, **arguments)


@cache
def played(seed: int) -> tuple[MatchOutcome, dict[str, Any]]:
    """A whole random match under the test league's rules: its outcome and its replay record."""
    match = play_random_match(Rules.from_options({"target_score": 30}), seed)
    assert match.outcome is not None
    return match.outcome, match_record(match)


@cache
def forfeited(seed: int) -> tuple[MatchOutcome, dict[str, Any]]:
    """A match that team 1 forfeits (seat 1 times out every time): the last game and vaca have no winner."""
    match = Match(Rules.from_options({"target_score": 30}), seed)
    rng = random.Random(seed)
    while not match.is_over:
        seat = match.awaited()[0]
        if seat == 1:
            match.apply_timeout(seat)
        else:
            match.apply(seat, random_action(rng, match.legal_actions(seat)))
    assert match.outcome is not None
    return match.outcome, match_record(match)


def finish(session: Session, match_id: int, worker: str = "host:1") -> bool:
    """Claim the match and record a played result for it, as a worker would."""
    claimed = repo.claim_match(session, match_id, worker, 60.0)
    assert claimed is not None
    outcome, record = played(claimed.seed)
    return repo.record_result(session, match_id, worker, outcome, record, FAULTS, DECISIONS)


def row_counts(engine: Engine) -> dict[str, int]:
    """How many rows each table holds: to prove an operation wrote nothing."""
    with engine.connect() as connection:
        return {
            table.name: int(connection.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())
            for table in metadata.sorted_tables
        }
