"""What the repository's modules share: stored rows' ids, name and range checks, and writers that race.

Only what a user or the database can get wrong is checked (a name's characters, a count's range, a seed that a
BIGINT holds); a value's type is the caller's contract, kept by mypy.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TypeAlias

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, SQLModel

from workers.db.errors import Conflict, InvalidInput
from workers.db.models import Bot, BotVersion, League, Match, utc_now

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
"""Bot and league names: what a shell, a file name and the lobby all take without quoting."""


MAX_SEED = 2**63 - 1
"""Seeds are stored as BIGINT, signed on both backends."""


LeagueRef: TypeAlias = League | int | str
"""A league given as a row, an id or a name."""


def core_table(model: type[SQLModel]) -> sa.Table:
    """A model's Core table, for the statements a worker runs around every match (claim, set-up, result): made
    once and run on the session's connection, they skip the ORM's handling of a statement and its objects, which
    cost more than running them."""
    table = sa.inspect(model).local_table
    assert isinstance(table, sa.Table)
    return table


def row_id(row: Bot | BotVersion | League | Match) -> int:
    """A stored row's id (SQLModel types it `int | None` because it is None before the first flush)."""
    assert row.id is not None, f"{type(row).__name__} has not been flushed"
    return row.id


def check_name(kind: str, name: str) -> None:
    """A bot or league name as the user typed it: one a shell, a file name and the lobby take unquoted."""
    if not NAME_PATTERN.fullmatch(name):
        raise InvalidInput(
            f"invalid {kind} name {name!r}: use 1 to 64 letters, digits, '_', '.', '+' or '-', starting with a "
            "letter or digit"
        )


def check_int(what: str, value: int, *, low: int) -> None:
    """An integer setting that must be at least `low` (a count, a number of attempts)."""
    if value < low:
        raise InvalidInput(f"{what} must be an integer of at least {low}, got {value!r}")


def check_seed(what: str, value: int) -> None:
    """A seed the database can store (a signed BIGINT)."""
    if not 0 <= value <= MAX_SEED:
        raise InvalidInput(f"{what} must be an integer from 0 to 2**63-1, got {value!r}")


def flush_or_conflict(session: Session, message: str) -> None:
    """Flush; a unique key violated here means a concurrent writer won the race: say so as a `Conflict`."""
    try:
        session.flush()
    except IntegrityError:
        session.rollback()
        raise Conflict(message) from None


def database_now(session: Session) -> datetime:
    """Now, by the database server's clock on PostgreSQL (shared by every worker), else by this machine's."""
    if session.get_bind().dialect.name == "postgresql":
        value = session.scalar(sa.select(sa.func.clock_timestamp()))
        assert isinstance(value, datetime)
        return value.astimezone(UTC)
    return utc_now()
