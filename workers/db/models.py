"""The tables of Mus Arena as SQLModel classes.

The migrations in `workers/db/migrations` create exactly these tables; `tests/db` checks that the two agree.
Every constraint and index has a name (from `NAMING_CONVENTION`, or a short explicit name for CHECK
constraints), because SQLite can only alter a table by rebuilding it (Alembic batch mode), which needs the
names. Datetimes are timezone-aware UTC: SQLModel's `UTCDateTime` stores them as UTC (without an offset on
SQLite) and gives them back with `tzinfo=UTC` on both backends. Closed sets of values are `StrEnum`s stored as
short text with a CHECK constraint, not native PostgreSQL enums, so both backends migrate them alike.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""How constraints and indexes are named; the migrations spell out the same names."""


def utc_now() -> datetime:
    """The current time as an aware UTC datetime (what every datetime column holds)."""
    return datetime.now(UTC)


class LeagueStatus(enum.StrEnum):
    """Where a league is in its life: created (matches planned, none played), running, paused (`mus league
    pause`: no worker claims its matches until `mus league run` resumes it), finished, or cancelled (`mus league
    cancel`: ended with the matches it had played, for good)."""

    CREATED = "created"
    RUNNING = "running"
    PAUSED = "paused"
    FINISHED = "finished"
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        """No match of the league will ever be played again: finished or cancelled."""
        return self in (LeagueStatus.FINISHED, LeagueStatus.CANCELLED)


class MatchStatus(enum.StrEnum):
    """Where a match is in its life.

    - `queued`: waiting for a worker; a new match, a voided one (infrastructure failure) and one whose worker's
      lease expired are all queued.
    - `running`: claimed by `worker` until `lease_expires_at`; the worker's heartbeats push the lease on.
    - `finished`: it has a result and a replay (written with this status in one transaction); final.
    - `failed`: given up after repeated infrastructure failures (`void_match(max_attempts=...)`); it has no
      result, is charged to no bot, and `requeue_failed` puts it back in the queue.
    """

    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"


def _text_enum(enum_type: type[enum.StrEnum], name: str) -> sa.Enum:
    """A `StrEnum` column stored as its values in VARCHAR(16); the CHECK constraint is declared separately."""
    return sa.Enum(
        enum_type,
        name=name,
        native_enum=False,
        create_constraint=False,
        length=16,
        values_callable=lambda members: [member.value for member in members],
        validate_strings=True,
    )


def _check_in(column: str, values: list[str]) -> str:
    shown = ", ".join(f"'{value}'" for value in values)
    return f"{column} IN ({shown})"


class _Table(SQLModel, registry=registry(metadata=sa.MetaData(naming_convention=NAMING_CONVENTION))):
    """The base of our tables: its own metadata, so the naming convention touches nothing else."""


metadata: sa.MetaData = _Table.metadata
"""Every table of the schema (Alembic's target metadata)."""


class Bot(_Table, table=True):
    """A bot by name. Hosted bots have program versions; a remote bot dials in with a token (only its hash)."""

    __tablename__ = "bot"
    __table_args__ = (
        sa.UniqueConstraint("name"),
        sa.UniqueConstraint("token_sha256"),
    )

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_type=sa.String(64))
    language: str = Field(sa_type=sa.String(32))
    remote: bool = False
    token_sha256: str | None = Field(default=None, sa_type=sa.String(64))
    removed_at: datetime | None = None
    created_at: datetime = Field(default_factory=utc_now)


class BotVersion(_Table, table=True):
    """One program of a bot, identified by its content hash; results belong to the version that played."""

    __tablename__ = "bot_version"
    __table_args__ = (
        sa.UniqueConstraint("bot_id", "content_hash"),
        sa.UniqueConstraint("bot_id", "number"),
        sa.CheckConstraint("number >= 1", name="number"),
    )

    id: int | None = Field(default=None, primary_key=True)
    bot_id: int = Field(foreign_key="bot.id")
    number: int
    command: list[str] = Field(sa_type=sa.JSON)
    folder: str | None = Field(default=None, sa_type=sa.Text)
    content_hash: str = Field(sa_type=sa.String(64))
    created_at: datetime = Field(default_factory=utc_now)
    registered_at: datetime = Field(default_factory=utc_now)
    """When `mus bot add` last registered this content: the latest is the bot's current version, so
    re-adding an older program (a revert) makes that version current again."""
    persistent: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    """`mus bot add --persistent`: the program plays seat after seat given on its standard input (docs/pool.md),
    so a worker keeps its processes alive across matches; otherwise it is launched for every seat."""
    language: str = Field(default="unknown", sa_type=sa.String(32), sa_column_kwargs={"server_default": "unknown"})
    """The language of this version's program (`Bot.language` is the current version's): a bot's versions may be
    programs in different languages."""


class DealMode(enum.StrEnum):
    """Which deals a league plays: duplicate pairs (each seed twice, partnerships swapped), or a fresh deal
    for every match (for bots that may remember the twin: remote bots)."""

    DUPLICATE = "duplicate"
    INDEPENDENT = "independent"


class League(_Table, table=True):
    """A round robin between entrants under one set of rules, expanded into match rows when created."""

    __tablename__ = "league"
    __table_args__ = (
        sa.UniqueConstraint("name"),
        sa.CheckConstraint(_check_in("status", [status.value for status in LeagueStatus]), name="status"),
        sa.CheckConstraint("matches_per_pairing >= 1", name="matches_per_pairing"),
        sa.CheckConstraint(_check_in("deal_mode", [mode.value for mode in DealMode]), name="deal_mode"),
    )

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_type=sa.String(64))
    rules: dict[str, Any] = Field(default_factory=dict, sa_type=sa.JSON)
    """Only the options that differ from the defaults (`Rules.changed_options`); time control included."""
    matches_per_pairing: int
    seed: int = Field(sa_type=sa.BigInteger)
    status: LeagueStatus = Field(default=LeagueStatus.CREATED, sa_type=_text_enum(LeagueStatus, "league_status"))
    absent_limit_s: float
    """How long a match with a remote bot may wait for it to show up."""
    secret: str | None = Field(default=None, sa_type=sa.String(64))
    """256 random bits (hex) from which every match seed is derived; never printed or exported before the end.
    None for a league created before secrets existed."""
    commitment: str | None = Field(default=None, sa_type=sa.String(64))
    """SHA-256 (hex) of the secret, printed when the league is created: the deals are fixed in advance."""
    sandbox: bool = Field(default=True, sa_column_kwargs={"server_default": sa.true()})
    """False only for a league created with `--no-sandbox`: its hosted bots run unconfined."""
    deal_mode: DealMode = Field(
        default=DealMode.DUPLICATE,
        sa_type=_text_enum(DealMode, "deal_mode"),
        sa_column_kwargs={"server_default": DealMode.DUPLICATE.value},
    )
    created_at: datetime = Field(default_factory=utc_now)
    finished_at: datetime | None = None


class LeagueEntrant(_Table, table=True):
    """A bot version entered in a league: the version its matches are played (and rated) with."""

    __tablename__ = "league_entrant"
    __table_args__ = (
        sa.UniqueConstraint("league_id", "bot_version_id"),
        sa.Index(None, "bot_version_id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    league_id: int = Field(foreign_key="league.id", ondelete="CASCADE")
    bot_version_id: int = Field(foreign_key="bot_version.id")


class Match(_Table, table=True):
    """One match of a league: two versions (team 0 holds seats 0 and 2), a seed, and its claim by a worker."""

    __tablename__ = "match"
    __table_args__ = (
        sa.UniqueConstraint("league_id", "index"),
        sa.Index(None, "league_id", "status"),
        sa.Index(None, "league_id", "duplicate_pair"),
        sa.Index(None, "status", "lease_expires_at"),
        sa.Index(None, "team0_version_id"),
        sa.Index(None, "team1_version_id"),
        sa.CheckConstraint(_check_in("status", [status.value for status in MatchStatus]), name="status"),
        sa.CheckConstraint("attempt >= 0", name="attempt"),
        sa.CheckConstraint("deal >= 0", name="deal"),
    )

    id: int | None = Field(default=None, primary_key=True)
    league_id: int = Field(foreign_key="league.id", ondelete="CASCADE")
    index: int
    """The match's position in its league's plan, from 0."""
    team0_version_id: int = Field(foreign_key="bot_version.id")
    team1_version_id: int = Field(foreign_key="bot_version.id")
    seed: int = Field(sa_type=sa.BigInteger)
    duplicate_pair: int | None = None
    """The two matches of a duplicate pair share this id (within the league) and the seed, with teams swapped."""
    status: MatchStatus = Field(default=MatchStatus.QUEUED, sa_type=_text_enum(MatchStatus, "match_status"))
    attempt: int = 0
    """How many times a worker has claimed the match."""
    deal: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    """Which of the match's deals it plays: a voided match (and its unfinished twin) moves on to a fresh one."""
    lease_expires_at: datetime | None = None
    heartbeat_at: datetime | None = None
    worker: str | None = Field(default=None, sa_type=sa.String(200))
    error: str | None = Field(default=None, sa_type=sa.Text)
    """The last infrastructure error that voided an attempt; never a bot's fault."""
    created_at: datetime = Field(default_factory=utc_now)
    started_at: datetime | None = None
    finished_at: datetime | None = None


class MatchResult(_Table, table=True):
    """The outcome of a finished match; the UNIQUE match_id makes a second write impossible."""

    __tablename__ = "match_result"
    __table_args__ = (
        sa.UniqueConstraint("match_id"),
        sa.CheckConstraint("winner_team IN (0, 1)", name="winner_team"),
    )

    id: int | None = Field(default=None, primary_key=True)
    match_id: int = Field(foreign_key="match.id", ondelete="CASCADE")
    winner_version_id: int = Field(foreign_key="bot_version.id")
    winner_team: int
    termination: str = Field(sa_type=sa.String(32))
    vacas_team0: int
    vacas_team1: int
    games_team0: int
    games_team1: int
    points_team0: int
    """The sum of team 0's final game scores."""
    points_team1: int
    faults: list[dict[str, Any]] = Field(default_factory=list, sa_type=sa.JSON)
    """Every fault charged in the match (rules §13: illegal_action, timeout, limit), in order: {seat, cause,
    detail}. Never an incident."""
    incidents: list[dict[str, Any]] = Field(default_factory=list, sa_type=sa.JSON)
    """Every incident the referee recorded (a seat's connection or process: protocol_error, disconnect, crash,
    absent), in order: {seat, cause, detail}. Never a fault."""
    decision_seconds: list[dict[str, Any]] = Field(default_factory=list, sa_type=sa.JSON)
    """Per seat: {seat, count, median, p95, max} of its decision times in seconds."""
    created_at: datetime = Field(default_factory=utc_now)


class GameResult(_Table, table=True):
    """One game of a finished match; no winner when a forfeit cut it short."""

    __tablename__ = "game_result"
    __table_args__ = (
        sa.UniqueConstraint("match_id", "vaca", "game"),
        sa.CheckConstraint("winner_team IN (0, 1)", name="winner_team"),
    )

    id: int | None = Field(default=None, primary_key=True)
    match_id: int = Field(foreign_key="match.id", ondelete="CASCADE")
    vaca: int
    game: int
    winner_team: int | None = None
    score0: int
    score1: int
    termination: str = Field(sa_type=sa.String(32))
    hand_number: int


class VacaResult(_Table, table=True):
    """One vaca of a finished match; no winner when a forfeit cut it short."""

    __tablename__ = "vaca_result"
    __table_args__ = (
        sa.UniqueConstraint("match_id", "vaca"),
        sa.CheckConstraint("winner_team IN (0, 1)", name="winner_team"),
    )

    id: int | None = Field(default=None, primary_key=True)
    match_id: int = Field(foreign_key="match.id", ondelete="CASCADE")
    vaca: int
    winner_team: int | None = None
    games0: int
    games1: int


class Replay(_Table, table=True):
    """The complete replay record of a finished match (`match_record`), as zlib-compressed UTF-8 JSON."""

    __tablename__ = "replay"
    __table_args__ = (sa.UniqueConstraint("match_id"),)

    id: int | None = Field(default=None, primary_key=True)
    match_id: int = Field(foreign_key="match.id", ondelete="CASCADE")
    format: str = Field(sa_type=sa.String(64))
    data: bytes = Field(sa_type=sa.LargeBinary)
    size: int
    """The uncompressed size of the JSON in bytes."""
    created_at: datetime = Field(default_factory=utc_now)


class Machine(_Table, table=True):
    """A machine whose workers play league matches (the host part of their names, `workers.play.worker_name`), and
    when one of them was last seen alive: a match refused for what one machine lacks is left to the others
    (`repo.refuse_match`)."""

    __tablename__ = "machine"

    name: str = Field(primary_key=True, sa_type=sa.String(200))
    seen_at: datetime = Field(default_factory=utc_now)


class Refusal(_Table, table=True):
    """What a machine's worker found missing when it refused a match (`repo.refuse_match`): `sandbox`, or
    `folder:ID`, bot version ID's folder. Counted for `REFUSAL_TTL_S` after it was last found so."""

    __tablename__ = "refusal"

    machine: str = Field(primary_key=True, sa_type=sa.String(200))
    lacks: str = Field(primary_key=True, sa_type=sa.String(64))
    at: datetime = Field(default_factory=utc_now)
