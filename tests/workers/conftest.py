"""A league on a fresh embedded deployment in a temporary folder: SQLite file and filesystem broker."""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from workers.db import repo
from workers.db.session import ensure_schema, make_engine, session_scope
from workers.tournament import schedule_round_robin

EXAMPLE_COMMANDS = {
    "random": [sys.executable, "-m", "clients.bots.random"],
    "passive": [sys.executable, "-m", "clients.bots.passive"],
    "rules": [sys.executable, "-m", "clients.bots.rules"],
}


@dataclass
class Deployment:
    root: Path
    engine: Engine

    def league(
        self,
        name: str,
        bots: list[str],
        matches_per_pairing: int = 2,
        seed: int = 1,
        *,
        command: Sequence[str] | None = None,
        folder: Path | None = None,
        persistent: Collection[str] = (),
        options: Mapping[str, Any] | None = None,
        sandbox: bool = True,
        deal_mode: str | None = None,
        own: Mapping[str, tuple[Sequence[str], Path]] | None = None,
    ) -> int:
        """A round robin of `bots`, each running `command` in `folder` when given, else its example bot
        (`EXAMPLE_COMMANDS`), but those `own` gives a command and a folder of their own; the bots named in
        `persistent` play from a worker's pool."""
        plan = schedule_round_robin(bots, matches_per_pairing, seed)
        with session_scope(self.engine) as session:
            for bot in bots:
                bot_command, bot_folder = (own or {}).get(bot, (command, folder))
                repo.add_bot(
                    session,
                    bot,
                    command=list(bot_command) if bot_command is not None else EXAMPLE_COMMANDS[bot],
                    folder=bot_folder,
                    language="python",
                    persistent=bot in persistent,
                )
            league = repo.create_league(
                session,
                name,
                bot_names=bots,
                matches=[
                    {"team0": m.team0, "team1": m.team1, "seed": m.seed, "duplicate_pair": m.duplicate_pair}
                    for m in plan
                ],
                options=dict(options or {}),
                matches_per_pairing=matches_per_pairing,
                seed=seed,
                sandbox=sandbox,
                deal_mode=deal_mode,
            )
            assert league.id is not None
            return league.id


@pytest.fixture
def deployment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployment]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MUS_DATABASE_URL", f"sqlite:///{tmp_path}/mus.db")
    monkeypatch.setenv("MUS_BROKER_DIR", str(tmp_path / "broker"))
    monkeypatch.setenv("MUS_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.delenv("MUS_BROKER_URL", raising=False)
    engine = make_engine()
    ensure_schema(engine)
    yield Deployment(tmp_path, engine)
    engine.dispose()
