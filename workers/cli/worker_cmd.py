"""`mus worker`: a Celery worker that plays league matches (for the distributed mode, one per machine)."""

from __future__ import annotations

import logging
import os
from typing import Annotated

import sqlalchemy as sa
import typer

from workers.app import broker_dir, is_embedded, make_app, worker_queues
from workers.cli.db import shown_url, unusable
from workers.cli.errors import fail
from workers.db.models import Match
from workers.db.repo.common import core_table
from workers.db.session import database_url, make_engine, sqlite_file
from workers.launcher import INSTALL_HINT, sandbox_available
from workers.league_run import default_worker_count
from workers.logs import log_limit
from workers.play import shown_to_every_seat


def worker_command(
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Worker processes, each playing a match at a time (default: 1: one machine plays one match's bots at"
            " a time, docs/pool.md).",
        ),
    ] = None,
    loglevel: Annotated[str, typer.Option(help="Celery log level.")] = "INFO",
    prefer_half: Annotated[
        int,
        typer.Option(
            min=0,
            max=1,
            help="Take this half of the duplicate pairs first (0 or 1), the other only when none is left:"
            " with two or more workers, give half of them 1 and each needs half the persistent bots' processes"
            " (docs/pool.md). On RabbitMQ both halves come as they come.",
        ),
    ] = 0,
) -> None:
    """Play the matches queued on MUS_BROKER_URL (or, without it, on the embedded broker of this folder)."""
    logging.basicConfig(level=loglevel.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    check_database()
    if is_embedded():
        typer.echo(f"no MUS_BROKER_URL: serving the embedded broker in {broker_dir()}", err=True)
    if not sandbox_available():
        typer.echo(f"warning: {INSTALL_HINT}; hosted bots are refused except in --no-sandbox leagues", err=True)
    elif shown := shown_to_every_seat():
        typer.echo(f"warning: {shown}; hosted bots are refused except in --no-sandbox leagues", err=True)
    app = make_app()
    app.worker_main(
        [
            "worker",
            f"--concurrency={concurrency or default_worker_count()}",
            f"--loglevel={loglevel}",
            # A node name of its own: two workers of one machine named alike (Celery's default, celery@host) are
            # one node, and on RabbitMQ the second dies at once on the node's exclusive queue (RESOURCE_LOCKED).
            f"--hostname=mus-{os.getpid()}@%h",
            "--pool=prefork",
            f"--queues={worker_queues(prefer_half)}",
        ]
    )


def check_log_limit() -> None:
    """A wrong MUS_LOG_LIMIT in one line, before any worker starts (it would void each match it played)."""
    try:
        log_limit()
    except ValueError as error:
        fail(str(error))


def check_database() -> None:
    """Refuse to start with a wrong MUS_LOG_LIMIT, or without the leagues' database: a worker plays the matches it
    is sent, as their database says. A review's worker with a wrong MUS_DATABASE_URL took matches and dropped each
    one with an error while its league waited; one with none made a `mus.db` of its own in its folder and dropped
    them as unknown."""
    check_log_limit()
    path = sqlite_file()
    if path is not None and not path.exists():
        fail(
            f"there is no database at {path} (MUS_DATABASE_URL, default ./mus.db): a worker plays the matches of"
            " the leagues in it. Run it from the folder where the leagues were created, or set MUS_DATABASE_URL"
            " to their database (on every machine of a distributed league)."
        )
    engine = make_engine(database_url())
    try:
        with engine.connect() as connection:
            if not sa.inspect(connection).has_table(core_table(Match).name):
                fail(f"the database {shown_url(engine)} holds no leagues: create one there first (mus league create)")
    except sa.exc.OperationalError as error:
        unusable(engine, error)
    finally:
        engine.dispose()
