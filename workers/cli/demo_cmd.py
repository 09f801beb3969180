"""`mus demo`: the example bots in a small duplicate round robin, end to end, in one command."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer
from sqlmodel import Session

import clients.bots
from workers import leagues
from workers.app import is_embedded
from workers.cli import league_cmd
from workers.cli.db import open_session
from workers.cli.run_cmd import run_command
from workers.db import repo
from workers.db.models import BotVersion
from workers.db.session import database_url
from workers.launcher import INSTALL_HINT, sandbox_available
from workers.league_run import default_worker_count

DEMO_BOTS = ("rules", "random", "passive")
DEMO_LEAGUE = "demo"


def _current(session: Session, name: str) -> BotVersion | None:
    """The bot's current version, or None where there is no such bot (or it is remote)."""
    try:
        return repo.get_bot(session, name).current
    except repo.NotFound:
        return None


def demo_command(
    matches_per_pairing: Annotated[int, typer.Option(min=2, help="Matches per pairing (duplicate pairs).")] = 4,
    workers: Annotated[int | None, typer.Option(min=1, help="Embedded worker processes.")] = None,
) -> None:
    """Register the example bots (persistent: docs/pool.md), run the league `demo` on real worker processes, print
    its standings."""
    folder = Path(clients.bots.__file__).parent
    with open_session() as session:
        for name in DEMO_BOTS:
            before = _current(session, name)
            version = repo.add_bot(
                session,
                name,
                command=[sys.executable, "-m", f"clients.bots.{name}"],
                folder=str(folder),
                language="python",
                persistent=True,  # run_main plays seat after seat: each worker keeps their processes (docs/pool.md)
            )
            if before is not None and (before.number, before.persistent) != (version.number, version.persistent):
                # A newcomer's own registration of an example bot's name was replaced without a word.
                typer.echo(
                    f"note: bot {name}'s current version was {before.number}"
                    f"{' (persistent)' if before.persistent else ''}; the demo made its own, {version.number}"
                    " (persistent), current: `mus bot add` yours again to enter it in a new league",
                    err=True,
                )
        known = {league.name for league in repo.list_leagues(session)}
        if DEMO_LEAGUE not in known:
            # The example bots are the project's own code: without a sandbox here they run unconfined.
            sandbox = sandbox_available()
            if not sandbox:
                typer.echo(f"note: the demo's bots run unconfined ({INSTALL_HINT})", err=True)
            league = leagues.create_round_robin(
                session,
                DEMO_LEAGUE,
                bot_names=DEMO_BOTS,
                matches_per_pairing=matches_per_pairing,
                sandbox=sandbox,
            )
            planned = repo.league_progress(session, league)["total"]
            typer.echo(f"league {DEMO_LEAGUE}: {planned} matches between {', '.join(DEMO_BOTS)}")
    if not is_embedded():
        broker = os.environ["MUS_BROKER_URL"]
        typer.echo(f"MUS_BROKER_URL is set: the matches are played by `mus worker` processes on {broker}")
    run_command(DEMO_LEAGUE, workers=workers or default_worker_count(sandboxed=sandbox_available()))
    league_cmd.standings_command(name=DEMO_LEAGUE)
    typer.echo(
        f"\nResults and replays are in {database_url()}. `mus league status demo --matches` lists the matches;"
        " `mus replay show MATCH` prints one hand by hand; `mus replay export MATCH --format html` writes a page"
        " to open in a browser; `mus replay verify --league demo` re-simulates them all."
    )
    if shutil.which("mus") is None:  # `make demo` runs .venv/bin/mus without putting it on PATH
        scripts = Path(sys.executable).parent  # the venv's, unresolved: its python is a symlink
        typer.echo(f"`mus` is {scripts / 'mus'}: `source {scripts / 'activate'}` puts it on your PATH.")
