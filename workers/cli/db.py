"""What the database commands share: opening the database, and turning domain errors into one line and exit 1.

Every command that reads or writes the database runs inside `open_session()`: the database named by
`MUS_DATABASE_URL` (default `./mus.db`) is migrated to the current schema, the command's work is one
transaction, and a domain error (bad input, an unknown bot, league or match, a conflict) rolls it back whole and
becomes `error: <message>` with exit code 1. So a refused command never leaves anything half-written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import sqlalchemy as sa
import typer
from sqlmodel import Session

from referee.engine.errors import MusError
from workers.cli.errors import fail
from workers.db import repo
from workers.db.errors import DatabaseInBotFolder, DbError
from workers.db.session import ensure_schema, make_engine, session_scope, sqlite_file
from workers.replays.html import ReplayFormatError
from workers.tournament.errors import TournamentError

DOMAIN_ERRORS: tuple[type[Exception], ...] = (DbError, TournamentError, MusError, ReplayFormatError)
"""Errors whose message is meant for the user as it is: one line that names the thing and what is wrong."""


@contextmanager
def domain_errors() -> Iterator[None]:
    """Turn a domain error raised in the block into `error: <message>` on stderr and exit code 1."""
    try:
        yield
    except DOMAIN_ERRORS as error:
        fail(one_line(str(error)))


NO_DATABASE = "mus.no_database"
"""`session.info` key: the session reads an empty database in memory, as there is none (`open_session(reads=True)`)."""


def no_database(session: Session) -> bool:
    """Whether `session` found no database: a list then says nothing of adding one (the stderr note says where)."""
    return bool(session.info.get(NO_DATABASE))


@contextmanager
def open_session(*, reads: bool = False) -> Iterator[Session]:
    """A session on the database of `MUS_DATABASE_URL`, migrated to head; the block is one transaction.

    A command that only `reads` (or finds nothing to change where there is no database: `mus bot remove` and
    `check NAME`, `mus league create`, `pause` and `cancel`) creates no SQLite file: where there is none it reads
    an empty database in memory (`mus bot list` run in a bot's folder would otherwise leave a `mus.db` there, and
    the bot's content would change), and says so on stderr, since a command run from the wrong folder would
    otherwise only find no bot or no league.

    The transaction commits when the block ends and rolls back if it raises, a `typer.Exit` from `fail` included.
    Domain errors and a database that cannot be opened become a one-line error and exit code 1. A SQLite file
    this command creates is made with mode 0600, and is marked in `session.info` so that `repo.add_bot` can
    refuse to create it inside the bot's own folder (`mus bot add` run from there); it is then removed again.
    """
    path = sqlite_file()
    existed = path is None or path.exists()
    with domain_errors():
        unmade = reads and path is not None and not existed and path.parent.is_dir()
        engine = make_engine("sqlite://" if unmade else None)
    created = path if not existed and path is not None and path.exists() else None
    if unmade:
        typer.echo(
            f"note: there is no database at {path} (MUS_DATABASE_URL, default ./mus.db): nothing is registered"
            " here. Run mus from the folder where you added your bots, or set MUS_DATABASE_URL.",
            err=True,
        )
    refused = False
    try:
        try:
            ensure_schema(engine)
            with session_scope(engine) as session:
                if created is not None:
                    session.info[repo.NEW_DATABASE] = str(created)
                if unmade:
                    session.info[NO_DATABASE] = True
                yield session
        except DatabaseInBotFolder as error:
            refused = True
            fail(one_line(str(error)))
        except DOMAIN_ERRORS as error:
            fail(one_line(str(error)))
        except sa.exc.OperationalError as error:
            unusable(engine, error)
    finally:
        engine.dispose()
        if refused and created is not None:
            _remove_database(created)


def shown_url(engine: sa.Engine) -> str:
    """The engine's database URL as the CLI shows it: its password masked."""
    return engine.url.render_as_string(hide_password=True)


def unusable(engine: sa.Engine, error: sa.exc.OperationalError) -> NoReturn:
    """The one-line error of a database that cannot be reached or opened, and exit code 1."""
    fail(one_line(f"cannot use the database {shown_url(engine)}: {error.orig}"))


def _remove_database(path: Path) -> None:
    """Take back a database file this command created where it must not be, with its WAL files."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def one_line(message: str) -> str:
    """A message on one line: the CLI's errors never spill over several."""
    return " ".join(message.split())


def echo_json(value: Any) -> None:
    """Print one JSON document on stdout (datetimes as ISO 8601 text)."""
    typer.echo(json.dumps(value, ensure_ascii=False, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def iso(moment: datetime | None) -> str | None:
    """A stored time as ISO 8601 text for JSON, None kept."""
    return moment.isoformat() if moment is not None else None


def when(moment: datetime | None) -> str:
    """A stored time for a table: UTC to the minute, or a dash."""
    return moment.strftime("%Y-%m-%d %H:%M") if moment is not None else "-"
