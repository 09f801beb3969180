"""The repository: plain functions over a `Session` that the CLI and the Celery tasks call.

No Celery, no CLI and no tournament logic here (pairings, schedules and Elo live in `workers/tournament`): only
what is stored, how it is found, and the guarantees that only the database can give.

Transactions:
- Bots, leagues, snapshots and every read: the function validates all its input before it writes anything,
  flushes, and leaves the commit to the caller (`session_scope`), so several calls can form one transaction and
  bad input (a `DbError`) leaves nothing half-written.
- The worker protocol (`claim_match`, `heartbeat`, `requeue_expired`, `requeue_failed`, `void_match`,
  `record_result`) commits before returning: a claim or a heartbeat that is not committed is invisible to the
  other workers and, on PostgreSQL, keeps the row locked. Call these on a session with nothing pending.

Leases: a worker claims a queued match (or a running one whose lease has expired) with one conditional
UPDATE, so two workers can never both hold it; it sends heartbeats that push the lease on, and it ends the
attempt with `record_result` or, on an infrastructure failure, `void_match`, which requeues the match and is
never charged to a bot. Lease times come from the database's clock on PostgreSQL, so workers on machines
whose clocks disagree still agree on when a lease expires. Worker names must be unique per process
(e.g. `host:pid`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import secrets
import statistics
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeAlias

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from referee.engine.errors import RulesError
from referee.engine.match import FaultCause, GameTermination, MatchOutcome, MatchTermination
from referee.engine.match import GameResult as EngineGameResult
from referee.engine.match import VacaResult as EngineVacaResult
from referee.engine.rules import Rules
from referee.service.causes import IncidentCause
from workers.db.errors import Conflict, DatabaseInBotFolder, DbError, InvalidInput, NotFound
from workers.db.models import (
    Bot,
    BotVersion,
    DealMode,
    GameResult,
    League,
    LeagueEntrant,
    LeagueStatus,
    Match,
    MatchResult,
    MatchStatus,
    RatingSnapshot,
    Replay,
    VacaResult,
    utc_now,
)
from workers.tournament.deals import commitment, derived_seed, new_secret, parse_secret

__all__ = [
    "BotInfo",
    "Conflict",
    "DbError",
    "Entrant",
    "FinishedMatch",
    "InvalidInput",
    "LeagueRef",
    "MatchDetails",
    "MatchSetup",
    "NotFound",
    "TeamSetup",
    "add_bot",
    "add_remote_bot",
    "check_league_seed",
    "claim_deferred",
    "claim_match",
    "content_hash",
    "create_league",
    "database_now",
    "decision_summary",
    "finish_league_if_complete",
    "get_bot",
    "get_league",
    "get_match",
    "get_match_details",
    "get_replay",
    "heartbeat",
    "latest_rating_snapshot",
    "league_entrants",
    "league_progress",
    "league_results",
    "list_bots",
    "list_leagues",
    "list_matches",
    "match_setup",
    "outcome_record",
    "record_result",
    "remote_bot_for_token",
    "remove_bot",
    "replay_match_ids",
    "requeue_expired",
    "requeue_failed",
    "revealed_secret",
    "rotate_remote_token",
    "save_rating_snapshot",
    "start_league",
    "token_sha256",
    "unfinished_match_ids",
    "unplayed_twin",
    "void_match",
]

log = logging.getLogger(__name__)

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
"""Bot and league names: what a shell, a file name and the lobby all take without quoting."""

SKIPPED_DIRS = frozenset({"__pycache__", ".git"})
"""Folders left out of a bot's content hash: caches and history, not the program."""

SKIPPED_FILES = frozenset({"mus.db", "mus.db-wal", "mus.db-shm", "mus.db-journal"})
"""Files left out of a bot's content hash: the default league database and its WAL files, which change while
leagues run and are never the program (a bot's own data files, whatever their names, are hashed)."""

NEW_DATABASE = "mus_new_database"
"""`session.info` key set by the CLI when this command created the SQLite database file it uses (a path)."""

REMOTE_COMMAND: tuple[str, ...] = ()
"""A remote bot's single version has no command: it runs elsewhere and dials in."""

MAX_SEED = 2**63 - 1
"""Seeds are stored as BIGINT, signed on both backends."""

MAX_ABSENT_LIMIT_S = 86_400.0
"""A match waits at most a day for an absent remote bot (its worker holds the match all that time)."""

MAX_ERROR_CHARS = 4000
"""An infrastructure error is kept for the operator; a whole traceback is cut to this length."""

LeagueRef: TypeAlias = League | int | str
"""A league given as a row, an id or a name."""


# ---------------------------------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class BotInfo:
    """A bot with its versions, by number."""

    bot: Bot
    versions: tuple[BotVersion, ...]

    @property
    def current(self) -> BotVersion | None:
        """The version registered last: the one a new league enters."""
        return _current_version(self.versions)


@dataclass(frozen=True, slots=True)
class Entrant:
    """A league's entrant: which bot, and the version its matches are played with."""

    bot_id: int
    bot_name: str
    remote: bool
    version_id: int
    version_number: int


@dataclass(frozen=True, slots=True)
class TeamSetup:
    """One side of a match as a worker needs it to start (or, for a remote bot, to wait for) the program."""

    bot_name: str
    bot_id: int
    remote: bool
    language: str
    version_id: int
    version_number: int
    command: tuple[str, ...]
    folder: str | None


@dataclass(frozen=True, slots=True)
class MatchSetup:
    """Everything `play_match(match_id)` reads before playing: ids and values only, no ORM objects."""

    match_id: int
    league_id: int
    league_name: str
    index: int
    seed: int
    duplicate_pair: int | None
    rules: dict[str, Any]
    """The league's changed options; `Rules.from_options(rules)` rebuilds the rules."""
    absent_limit_s: float
    status: MatchStatus
    attempt: int
    teams: tuple[TeamSetup, TeamSetup]
    sandbox: bool = True
    """False only for a league created with `--no-sandbox`: its hosted bots run unconfined."""


@dataclass(frozen=True, slots=True)
class FinishedMatch:
    """One finished match as standings need it: who played which team, and how it ended."""

    match_id: int
    index: int
    seed: int
    duplicate_pair: int | None
    deal: int
    team0_bot: str
    team1_bot: str
    team0_version_id: int
    team1_version_id: int
    team0_version: int
    team1_version: int
    winner_team: int
    winner_version_id: int
    termination: str
    vacas: tuple[int, int]
    games: tuple[int, int]
    points: tuple[int, int]
    faults: tuple[dict[str, Any], ...]
    """The rules' faults, in order: {seat, cause, detail}."""
    incidents: tuple[dict[str, Any], ...]
    """The referee's incidents, in order: {seat, cause, detail}."""
    decision_seconds: tuple[dict[str, Any], ...]
    finished_at: datetime

    def to_json(self) -> dict[str, Any]:
        """JSON types only, for `--json` and exports."""
        return {
            "match_id": self.match_id,
            "index": self.index,
            "seed": self.seed,
            "duplicate_pair": self.duplicate_pair,
            "deal": self.deal,
            "teams": [
                {"bot": self.team0_bot, "version": self.team0_version, "version_id": self.team0_version_id},
                {"bot": self.team1_bot, "version": self.team1_version, "version_id": self.team1_version_id},
            ],
            "winner_team": self.winner_team,
            "winner_version_id": self.winner_version_id,
            "termination": self.termination,
            "vacas": list(self.vacas),
            "games": list(self.games),
            "points": list(self.points),
            "faults": [dict(fault) for fault in self.faults],
            "incidents": [dict(incident) for incident in self.incidents],
            "decision_seconds": [dict(summary) for summary in self.decision_seconds],
            "finished_at": self.finished_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class MatchDetails:
    """A finished match's stored result with its games and vacas, in order (to show or verify a replay)."""

    match: Match
    result: MatchResult
    games: tuple[GameResult, ...]
    vacas: tuple[VacaResult, ...]


# ------------------------------------------------------------------------------------------------------ bots


def token_sha256(token: str) -> str:
    """How a remote bot's token is stored: the same digest the referee's lobby checks."""
    return hashlib.sha256(token.encode()).hexdigest()


def content_hash(command: Sequence[str], folder: str | Path | None) -> str:
    """SHA-256 over the command line and every file under `folder` (path-sorted), skipping caches, .git and
    the default database files (`SKIPPED_FILES`).

    Each part is framed (its relative path and length go in before its bytes), so moving bytes from one file
    to another, or renaming a file, changes the hash. The folder's own location does not count: the same
    program copied elsewhere is the same version.
    """
    words = _check_command(command)
    digest = hashlib.sha256(b"mus-arena/bot-content/v1\0")
    digest.update(json.dumps(words, ensure_ascii=False).encode() + b"\0")
    if folder is None:
        return digest.hexdigest()
    root = Path(folder)
    if not root.is_dir():
        raise NotFound(f"bot folder {str(root)!r} is not a directory")
    for relative, path in _bot_files(root):
        try:
            data = path.read_bytes()
        except OSError as error:
            raise InvalidInput(f"cannot read {path}: {error.strerror or error}") from None
        digest.update(f"{relative}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def _bot_files(root: Path) -> list[tuple[str, Path]]:
    files: list[tuple[str, Path]] = []
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = [name for name in subdirectories if name not in SKIPPED_DIRS]
        for name in names:
            if name in SKIPPED_FILES:
                continue
            path = Path(directory) / name
            if path.is_file():
                files.append((path.relative_to(root).as_posix(), path))
    return sorted(files)


def add_bot(
    session: Session, name: str, *, command: Sequence[str], folder: str | Path | None, language: str
) -> BotVersion:
    """Register a hosted bot's program: the bot and version 1, a new version when the content hash changed,
    or the existing version when it did not. Either way that version becomes the bot's current one.

    Results belong to the version that played, so a changed program never inherits (or spoils) the old
    program's record. Re-adding a removed bot restores it.
    """
    _check_name("bot", name)
    words = _check_command(command)
    if not words:
        raise InvalidInput(f"bot {name!r} needs a command to run")
    language = _check_language(language)
    _refuse_new_database_in(session, folder)
    digest = content_hash(words, folder)
    stored_folder = str(Path(folder).resolve()) if folder is not None else None
    bot = _find_bot(session, name)
    if bot is None:
        bot = Bot(name=name, language=language)
        session.add(bot)
        _flush_or_conflict(session, f"bot {name!r} was added at the same time by someone else; try again")
    elif bot.remote:
        raise Conflict(f"bot {name!r} is a remote bot; a hosted bot needs another name")
    else:
        bot.language = language
        bot.removed_at = None
    bot_id = _id(bot)
    existing = session.exec(
        select(BotVersion).where(col(BotVersion.bot_id) == bot_id, col(BotVersion.content_hash) == digest)
    ).first()
    if existing is not None:
        # Same content: the same version, current again. Keep its folder up to date: the old one may be gone.
        existing.folder = stored_folder
        existing.registered_at = utc_now()
        session.flush()
        return existing
    version = BotVersion(
        bot_id=bot_id,
        number=_next_version_number(session, bot_id),
        command=words,
        folder=stored_folder,
        content_hash=digest,
    )
    session.add(version)
    _flush_or_conflict(session, f"bot {name!r} got a new version at the same time from someone else; try again")
    return version


def _refuse_new_database_in(session: Session, folder: str | Path | None) -> None:
    """Refuse a command that just created its SQLite database inside the bot's folder (`mus bot add` run from
    the bot's own folder with the default `./mus.db`): the bot could read it, and it is not the project's."""
    created = session.info.get(NEW_DATABASE)
    if folder is None or not created:
        return
    database, root = Path(created).resolve(), Path(folder).resolve()
    if database.is_relative_to(root):
        raise DatabaseInBotFolder(
            f"refusing to create the database {database} inside the bot's folder {root}: run mus from the "
            "project folder, or set MUS_DATABASE_URL"
        )


def add_remote_bot(session: Session, name: str, *, language: str = "unknown") -> str:
    """Register a bot that runs elsewhere and dials in; returns its token, which is shown only this once.

    Only the token's SHA-256 is stored, so a leaked database does not let anyone play as the bot.
    Re-adding a removed remote bot restores it with a new token.
    """
    _check_name("bot", name)
    language = _check_language(language)
    bot = _find_bot(session, name)
    if bot is not None and bot.removed_at is None:
        raise Conflict(f"bot {name!r} already exists")
    if bot is not None and not bot.remote:
        raise Conflict(f"bot {name!r} was a hosted bot; a remote bot needs another name")
    token = secrets.token_urlsafe(32)
    if bot is None:
        bot = Bot(name=name, language=language, remote=True)
        session.add(bot)
    bot.token_sha256 = token_sha256(token)
    bot.removed_at = None
    _flush_or_conflict(session, f"bot {name!r} was added at the same time by someone else; try again")
    bot_id = _id(bot)
    digest = content_hash(REMOTE_COMMAND, None)
    has_version = session.exec(select(BotVersion.id).where(col(BotVersion.bot_id) == bot_id)).first()
    if has_version is None:
        session.add(BotVersion(bot_id=bot_id, number=1, command=list(REMOTE_COMMAND), content_hash=digest))
        session.flush()
    return token


def rotate_remote_token(session: Session, name: str) -> str:
    """Give a remote bot a new token (the old one stops working); returns it, shown only this once."""
    bot = _active_bot(session, name)
    if not bot.remote:
        raise Conflict(f"bot {name!r} is not a remote bot; it has no token")
    token = secrets.token_urlsafe(32)
    bot.token_sha256 = token_sha256(token)
    session.flush()
    return token


def remote_bot_for_token(session: Session, token: str) -> Bot | None:
    """The active remote bot this token belongs to, if any."""
    return session.exec(
        select(Bot).where(
            col(Bot.token_sha256) == token_sha256(token), col(Bot.remote).is_(True), col(Bot.removed_at).is_(None)
        )
    ).first()


def list_bots(session: Session, *, include_removed: bool = False) -> list[BotInfo]:
    """Bots by name, each with its versions."""
    query = select(Bot).order_by(col(Bot.name))
    if not include_removed:
        query = query.where(col(Bot.removed_at).is_(None))
    bots = list(session.exec(query).all())
    versions: dict[int, list[BotVersion]] = {}
    if bots:
        rows = session.exec(
            select(BotVersion)
            .where(col(BotVersion.bot_id).in_([_id(bot) for bot in bots]))
            .order_by(col(BotVersion.bot_id), col(BotVersion.number))
        ).all()
        for version in rows:
            versions.setdefault(version.bot_id, []).append(version)
    return [BotInfo(bot, tuple(versions.get(_id(bot), ()))) for bot in bots]


def get_bot(session: Session, name: str) -> BotInfo:
    """A bot by name (a removed one too, marked by `removed_at`) with its versions."""
    bot = _find_bot(session, name)
    if bot is None:
        raise NotFound(f"no bot named {name!r}")
    versions = session.exec(
        select(BotVersion).where(col(BotVersion.bot_id) == _id(bot)).order_by(col(BotVersion.number))
    ).all()
    return BotInfo(bot, tuple(versions))


def remove_bot(session: Session, name: str) -> Bot:
    """Retire a bot: it enters no new league and a remote bot's token stops working; its results stay.

    Refused while a league that has not finished has it as an entrant: its matches still need the program.
    """
    bot = _active_bot(session, name)
    leagues = session.exec(
        select(League.name)
        .join(LeagueEntrant, col(LeagueEntrant.league_id) == col(League.id))
        .join(BotVersion, col(BotVersion.id) == col(LeagueEntrant.bot_version_id))
        .where(
            col(BotVersion.bot_id) == _id(bot),
            col(League.status).in_([LeagueStatus.CREATED, LeagueStatus.RUNNING]),
        )
        .distinct()
        .order_by(col(League.name))
    ).all()
    if leagues:
        raise Conflict(f"bot {name!r} is still needed by league(s) {', '.join(leagues)} that have not finished")
    bot.removed_at = utc_now()
    bot.token_sha256 = None
    session.flush()
    return bot


def _find_bot(session: Session, name: str) -> Bot | None:
    return session.exec(select(Bot).where(col(Bot.name) == name)).first()


def _active_bot(session: Session, name: str) -> Bot:
    bot = _find_bot(session, name)
    if bot is None or bot.removed_at is not None:
        raise NotFound(f"no bot named {name!r}")
    return bot


def _current_version(versions: Sequence[BotVersion]) -> BotVersion | None:
    return max(versions, key=lambda version: (version.registered_at, version.number), default=None)


def _next_version_number(session: Session, bot_id: int) -> int:
    highest = session.exec(select(sa.func.max(BotVersion.number)).where(col(BotVersion.bot_id) == bot_id)).one()
    return 1 if highest is None else int(highest) + 1


def _check_command(command: Sequence[str]) -> list[str]:
    if isinstance(command, str) or not all(isinstance(word, str) for word in command):
        raise InvalidInput("a bot command must be a list of strings")
    return list(command)


def _check_language(language: str) -> str:
    language = language.strip() if isinstance(language, str) else ""
    if not language or len(language) > 32:
        raise InvalidInput(f"a bot language must be 1 to 32 characters, got {language!r}")
    return language


# --------------------------------------------------------------------------------------------------- leagues


def create_league(
    session: Session,
    name: str,
    *,
    bot_names: Sequence[str],
    matches: Sequence[Mapping[str, Any]],
    options: Mapping[str, Any] | None,
    matches_per_pairing: int,
    seed: int = 0,
    absent_limit_s: float = 600.0,
    deal_mode: DealMode | str | None = None,
    sandbox: bool = True,
    secret: bytes | None = None,
) -> League:
    """Create a league with its entrants (each bot's current version) and every match, all or nothing.

    `matches` is the plan from `workers/tournament`, in order: mappings with `team0` and `team1` (bot names;
    team 0 holds seats 0 and 2) and `duplicate_pair` (None, or an id shared by the two matches of a pair, which
    swap the teams). A `seed` in a plan entry is ignored: every match's seed is derived from the league's
    secret (`workers/tournament/deals.py`; `secret` is for tests, default: 32 fresh random bytes), and only its
    SHA-256, the league's commitment, is ever shown before the league finishes. `seed` is kept for callers of
    the old signature and stored as the league's legacy seed; no deal depends on it.

    `deal_mode`: duplicate pairs (as planned), or independent deals (every match its own deal, no pairs). By
    default a league with a remote entrant plays independent deals (a remote program can remember the twin's
    cards), any other duplicate pairs. `sandbox=False` records `--no-sandbox`: its hosted bots run unconfined.

    `options` are rules options (rules §14, time control included); only those that differ from the defaults
    are stored. Everything is checked before the first row is written, so an unknown bot or a bad plan leaves
    nothing behind.
    """
    _check_name("league", name)
    rules = _check_rules(options)
    _check_int("matches_per_pairing", matches_per_pairing, low=1)
    _check_seed("the league seed", seed)
    if isinstance(absent_limit_s, bool) or not isinstance(absent_limit_s, int | float):
        raise InvalidInput(f"absent_limit_s must be a number of seconds, got {absent_limit_s!r}")
    if not (math.isfinite(absent_limit_s) and absent_limit_s > 0):
        raise InvalidInput(f"absent_limit_s must be above 0, got {absent_limit_s}")
    if absent_limit_s > MAX_ABSENT_LIMIT_S:
        raise InvalidInput(f"absent_limit_s must be at most {MAX_ABSENT_LIMIT_S:g} seconds, got {absent_limit_s:g}")
    if not isinstance(sandbox, bool):
        raise InvalidInput(f"sandbox must be True or False, got {sandbox!r}")
    if deal_mode is not None:
        try:
            deal_mode = DealMode(deal_mode)
        except ValueError:
            modes = " or ".join(mode.value for mode in DealMode)
            raise InvalidInput(f"unknown deal mode {deal_mode!r}: use {modes}") from None
    if isinstance(bot_names, str):
        raise InvalidInput("bot_names must be a list of names, not one string")
    names = list(bot_names)
    if not names:
        raise InvalidInput("a league needs entrants")
    if not all(isinstance(bot, str) for bot in names):
        raise InvalidInput("bot names must be strings")
    duplicates = sorted({bot for bot in names if names.count(bot) > 1})
    if duplicates:
        raise InvalidInput(f"bot(s) entered twice: {', '.join(duplicates)}")
    plan = _check_plan(matches, set(names))
    if session.exec(select(League.id).where(col(League.name) == name)).first() is not None:
        raise Conflict(f"a league named {name!r} already exists")
    versions = _entrant_versions(session, names)
    remote = session.exec(select(Bot.name).where(col(Bot.name).in_(names), col(Bot.remote).is_(True))).all()
    mode = deal_mode if deal_mode is not None else DealMode.INDEPENDENT if remote else DealMode.DUPLICATE
    if mode is DealMode.INDEPENDENT:
        plan = [(team0, team1, None) for team0, team1, _ in plan]
    secret = new_secret() if secret is None else secret
    try:
        committed = commitment(secret)
    except ValueError as error:
        raise InvalidInput(str(error)) from None
    pairings = _pairings(len(names))

    league = League(
        name=name,
        rules=rules,
        matches_per_pairing=matches_per_pairing,
        seed=seed,
        absent_limit_s=float(absent_limit_s),
        secret=secret.hex(),
        commitment=committed,
        sandbox=sandbox,
        deal_mode=mode,
    )
    session.add(league)
    _flush_or_conflict(session, f"a league named {name!r} was created at the same time; pick another name")
    league_id = _id(league)
    session.add_all(LeagueEntrant(league_id=league_id, bot_version_id=_id(versions[bot])) for bot in names)
    session.add_all(
        Match(
            league_id=league_id,
            index=index,
            team0_version_id=_id(versions[team0]),
            team1_version_id=_id(versions[team1]),
            seed=derived_seed(secret, league=name, duplicate_pair=pair, index=index, deal=0, pairings=pairings),
            duplicate_pair=pair,
            deal=0,
        )
        for index, (team0, team1, pair) in enumerate(plan)
    )
    session.flush()
    return league


def _pairings(entrants: int) -> int:
    """How many pairings a round robin of `entrants` has (at least 1: it fixes each slot's first dealer)."""
    return max(entrants * (entrants - 1) // 2, 1)


def revealed_secret(league: League) -> str | None:
    """The league's secret (hex), but only once the league has finished: before that, nobody sees it."""
    return league.secret if league.status is LeagueStatus.FINISHED else None


def check_league_seed(session: Session, league: League, match: Match, secret_hex: str) -> str | None:
    """Why `match`'s seed is not the one its identity and deal derive from the revealed secret; None if it is."""
    try:
        secret = parse_secret(secret_hex)
    except ValueError as error:
        return str(error)
    pairings = _pairings(len(league_entrants(session, league)))
    expected = derived_seed(
        secret,
        league=league.name,
        duplicate_pair=match.duplicate_pair,
        index=match.index,
        deal=match.deal,
        pairings=pairings,
    )
    if expected != match.seed:
        return f"the seed {match.seed} is not derived from the league's secret (deal {match.deal})"
    return None


def _check_rules(options: Mapping[str, Any] | None) -> dict[str, Any]:
    try:
        return Rules.from_options(options or {}).changed_options()
    except RulesError as error:
        raise InvalidInput(str(error)) from None


def _check_plan(matches: Sequence[Mapping[str, Any]], entrants: set[str]) -> list[tuple[str, str, int | None]]:
    if not matches:
        raise InvalidInput("a league needs at least one match")
    plan: list[tuple[str, str, int | None]] = []
    for index, match in enumerate(matches):
        where = f"match {index} of the plan"
        if not isinstance(match, Mapping):
            raise InvalidInput(f"{where} must be a mapping with team0, team1 and duplicate_pair")
        missing = [key for key in ("team0", "team1") if key not in match]
        if missing:
            raise InvalidInput(f"{where} lacks {', '.join(missing)}")
        team0, team1 = match["team0"], match["team1"]
        for team in (team0, team1):
            if not isinstance(team, str) or team not in entrants:
                raise InvalidInput(f"{where}: {team!r} is not an entrant of the league")
        if team0 == team1:
            raise InvalidInput(f"{where}: {team0!r} cannot play against itself")
        pair = match.get("duplicate_pair")
        if pair is not None:
            _check_int(f"the duplicate_pair of {where}", pair, low=0)
        plan.append((team0, team1, pair))
    pairs: dict[int, list[tuple[str, str, int | None]]] = {}
    for entry in plan:
        if entry[2] is not None:
            pairs.setdefault(entry[2], []).append(entry)
    for pair, members in sorted(pairs.items()):
        if len(members) > 2:
            raise InvalidInput(f"duplicate pair {pair} has {len(members)} matches; a pair has at most two")
        if len(members) == 2:
            (a0, a1, _), (b0, b1, _) = members
            if (a0, a1) != (b1, b0):
                raise InvalidInput(f"the matches of duplicate pair {pair} must swap the teams")
    return plan


def _entrant_versions(session: Session, names: list[str]) -> dict[str, BotVersion]:
    bots = {
        bot.name: bot
        for bot in session.exec(select(Bot).where(col(Bot.name).in_(names), col(Bot.removed_at).is_(None))).all()
    }
    unknown = [name for name in names if name not in bots]
    if unknown:
        raise NotFound(f"unknown bot(s): {', '.join(unknown)}")
    versions: dict[int, list[BotVersion]] = {}
    for row in session.exec(
        select(BotVersion).where(col(BotVersion.bot_id).in_([_id(bot) for bot in bots.values()]))
    ).all():
        versions.setdefault(row.bot_id, []).append(row)
    current: dict[str, BotVersion] = {}
    for name in names:
        version = _current_version(versions.get(_id(bots[name]), []))
        if version is None:
            raise Conflict(f"bot {name!r} has no version to enter")
        current[name] = version
    return current


def get_league(session: Session, league: LeagueRef) -> League:
    """A league by name or id (a row is looked up again, so its status is current)."""
    if isinstance(league, League):
        league = _id(league)
    if isinstance(league, int):
        found = session.get(League, league, populate_existing=True)
        if found is None:
            raise NotFound(f"no league with id {league}")
        return found
    by_name = session.exec(
        select(League).where(col(League.name) == league).execution_options(populate_existing=True)
    ).first()
    if by_name is None:
        raise NotFound(f"no league named {league!r}")
    return by_name


def list_leagues(session: Session) -> list[League]:
    """Every league, oldest first."""
    return list(session.exec(select(League).order_by(col(League.id))).all())


def league_entrants(session: Session, league: LeagueRef) -> list[Entrant]:
    """A league's entrants by bot name, with the versions they play with."""
    league_id = _league_id(session, league)
    rows = session.exec(
        select(Bot, BotVersion)
        .join(BotVersion, col(BotVersion.bot_id) == col(Bot.id))
        .join(LeagueEntrant, col(LeagueEntrant.bot_version_id) == col(BotVersion.id))
        .where(col(LeagueEntrant.league_id) == league_id)
        .order_by(col(Bot.name))
    ).all()
    return [Entrant(_id(bot), bot.name, bot.remote, _id(version), version.number) for bot, version in rows]


def start_league(session: Session, league: LeagueRef) -> League:
    """Mark a created league running (`mus league run`); a running or finished league is left as it is."""
    row = get_league(session, league)
    if row.status is LeagueStatus.CREATED:
        row.status = LeagueStatus.RUNNING
        session.flush()
    return row


def finish_league_if_complete(session: Session, league: LeagueRef) -> bool:
    """Mark the league finished once every match is; True when this call finished it."""
    row = get_league(session, league)
    if row.status is LeagueStatus.FINISHED:
        return False
    open_matches = session.exec(
        select(sa.func.count())
        .select_from(Match)
        .where(col(Match.league_id) == _id(row), col(Match.status) != MatchStatus.FINISHED)
    ).one()
    if open_matches:
        return False
    row.status = LeagueStatus.FINISHED
    row.finished_at = utc_now()
    session.flush()
    return True


def league_progress(session: Session, league: LeagueRef) -> dict[str, int]:
    """How many matches the league has, and how many are in each status: {total, finished, queued, ...}."""
    league_id = _league_id(session, league)
    counts = {status.value: 0 for status in MatchStatus}
    rows = session.exec(
        select(Match.status, sa.func.count()).where(col(Match.league_id) == league_id).group_by(col(Match.status))
    ).all()
    for status, count in rows:
        counts[MatchStatus(status).value] = int(count)
    return {"total": sum(counts.values()), **counts}


def unfinished_match_ids(session: Session, league: LeagueRef) -> list[int]:
    """The ids of the league's matches that have no result yet, in plan order: what `league run` resumes."""
    league_id = _league_id(session, league)
    ids = session.exec(
        select(Match.id)
        .where(col(Match.league_id) == league_id, col(Match.status) != MatchStatus.FINISHED)
        .order_by(col(Match.index))
    ).all()
    return [match_id for match_id in ids if match_id is not None]


def list_matches(session: Session, league: LeagueRef, *, status: MatchStatus | None = None) -> list[Match]:
    """The league's matches in plan order, optionally only those in one status."""
    league_id = _league_id(session, league)
    query = select(Match).where(col(Match.league_id) == league_id)
    if status is not None:
        query = query.where(col(Match.status) == status)
    query = query.order_by(col(Match.index)).execution_options(populate_existing=True)
    return list(session.exec(query).all())


def get_match(session: Session, match_id: int) -> Match:
    """A match by id, read afresh (a worker elsewhere may have changed it since this session last looked)."""
    match = session.get(Match, match_id, populate_existing=True)
    if match is None:
        raise NotFound(f"no match with id {match_id}")
    return match


def match_setup(session: Session, match_id: int) -> MatchSetup:
    """What a worker needs to play the match: rules, seed, and each team's program."""
    match = get_match(session, match_id)
    league = get_league(session, match.league_id)
    teams = tuple(_team_setup(session, version_id) for version_id in (match.team0_version_id, match.team1_version_id))
    return MatchSetup(
        match_id=match_id,
        league_id=_id(league),
        league_name=league.name,
        index=match.index,
        seed=match.seed,
        duplicate_pair=match.duplicate_pair,
        rules=dict(league.rules),
        absent_limit_s=league.absent_limit_s,
        status=match.status,
        attempt=match.attempt,
        teams=(teams[0], teams[1]),
        sandbox=league.sandbox,
    )


def _team_setup(session: Session, version_id: int) -> TeamSetup:
    version = session.get(BotVersion, version_id)
    assert version is not None, "a match's versions are foreign keys"
    bot = session.get(Bot, version.bot_id)
    assert bot is not None, "a version's bot is a foreign key"
    return TeamSetup(
        bot_name=bot.name,
        bot_id=_id(bot),
        remote=bot.remote,
        language=bot.language,
        version_id=version_id,
        version_number=version.number,
        command=tuple(version.command),
        folder=version.folder,
    )


# ----------------------------------------------------------------------------------------- worker protocol


def database_now(session: Session) -> datetime:
    """Now, by the database server's clock on PostgreSQL (shared by every worker), else by this machine's."""
    if session.get_bind().dialect.name == "postgresql":
        value = session.scalar(sa.select(sa.func.clock_timestamp()))
        assert isinstance(value, datetime)
        return value.astimezone(UTC)
    return utc_now()


def claim_match(
    session: Session, match_id: int, worker: str, lease_s: float, *, now: datetime | None = None
) -> Match | None:
    """Take a match to play: a queued one, or a running one whose lease has expired. None if it is not free.

    A conditional UPDATE decides, so of two workers racing for the same match exactly one gets it (on
    PostgreSQL the loser waits for the winner's row lock, then re-checks the condition and finds it false).
    Taking over an expired lease also moves the match to a fresh deal: the old holder's bots may have seen it.
    The attempt count goes up by one; the lease runs `lease_s` seconds from now. Commits.

    The two matches of a duplicate pair never run at the same time: a match whose twin is running with a live
    lease is not free (None; `claim_deferred` then says it is still waiting to be played). Both twins are dealt
    the same cards, and a hosted bot's processes in one twin hold the seats of its rivals in the other: on one
    host, any channel between processes (timing, /proc counters) would tell it their hands. The condition is in
    the same UPDATE (NOT EXISTS a running twin), and two workers claiming both twins at the same instant are
    serialised on the pair (`_lock_pair`), so one of them always sees the other's claim and loses.
    """
    _check_worker(worker)
    lease = _check_lease(lease_s)
    now = now or database_now(session)
    _lock_pair(session, match_id)
    twin = aliased(Match)
    no_running_twin = ~(
        sa.select(col(twin.id))
        .where(
            col(twin.league_id) == col(Match.league_id),
            col(twin.duplicate_pair) == col(Match.duplicate_pair),
            col(twin.id) != col(Match.id),
            col(twin.status) == MatchStatus.RUNNING,
            col(twin.lease_expires_at) >= now,
        )
        .exists()
    )
    claimed = taken_over = False
    for takeover, claimable in (
        (False, col(Match.status) == MatchStatus.QUEUED),
        (True, sa.and_(col(Match.status) == MatchStatus.RUNNING, col(Match.lease_expires_at) < now)),
    ):
        result = session.exec(
            sa.update(Match)
            .where(col(Match.id) == match_id, claimable, no_running_twin)
            .values(
                status=MatchStatus.RUNNING,
                attempt=col(Match.attempt) + 1,
                worker=worker,
                lease_expires_at=now + lease,
                heartbeat_at=now,
                started_at=now,
            )
            .execution_options(synchronize_session=False)
        )
        if result.rowcount == 1:
            claimed, taken_over = True, takeover
            break
    if claimed and taken_over:
        # The expired holder's bots may have seen the deal: this attempt plays a fresh one.
        _fresh_deal(session, match_id)
        _expire_matches(session)
    match = session.get(Match, match_id, populate_existing=True)
    session.commit()
    if match is None:
        raise NotFound(f"no match with id {match_id}")
    if not claimed:
        return None
    log.info("match_id=%s claimed by worker %s, attempt %s", match_id, worker, match.attempt)
    return match


def _lock_pair(session: Session, match_id: int) -> None:
    """On PostgreSQL, serialise the claims of a duplicate pair's two matches until this transaction ends.

    Under READ COMMITTED, two UPDATEs of *different* rows (twin A by one worker, twin B by another) could both
    pass their NOT EXISTS check, each before the other commits. A transaction-level advisory lock keyed by
    (league, pair) makes the second claimer wait for the first to commit; its UPDATE, a later statement, then
    reads a fresh snapshot and sees the twin running. An advisory lock rather than row locks of both twins: it
    cannot deadlock with `void_match` or `_fresh_deal`, which lock the two rows in either order. On SQLite a
    write transaction holds the whole database, and the UPDATE is the transaction's first statement (this
    function reads nothing there), so its NOT EXISTS reads the latest commit.
    """
    if session.get_bind().dialect.name != "postgresql":
        return
    session.execute(
        sa.select(sa.func.pg_advisory_xact_lock(col(Match.league_id), col(Match.duplicate_pair))).where(
            col(Match.id) == match_id, col(Match.duplicate_pair).is_not(None)
        )
    )


def claim_deferred(session: Session, match_id: int, *, now: datetime | None = None) -> bool:
    """After `claim_match` said None: whether the match still waits to be played (queued, or running on an
    expired lease), so it was refused only because its duplicate twin is being played. Its worker sends it
    again shortly instead of dropping it. False for a match that is finished, failed or held by a live worker.
    """
    now = now or database_now(session)
    match = get_match(session, match_id)
    session.commit()
    if match.status is MatchStatus.QUEUED:
        return True
    return match.status is MatchStatus.RUNNING and match.lease_expires_at is not None and match.lease_expires_at < now


def heartbeat(session: Session, match_id: int, worker: str, lease_s: float, *, now: datetime | None = None) -> bool:
    """Push the lease on; False if this worker no longer holds the match (it was requeued or taken over),
    in which case the worker should abandon it. Commits."""
    lease = _check_lease(lease_s)
    now = now or database_now(session)
    result = session.exec(
        sa.update(Match)
        .where(_held_by(match_id, worker))
        .values(heartbeat_at=now, lease_expires_at=now + lease)
        .execution_options(synchronize_session=False)
    )
    _expire_matches(session, match_id)
    session.commit()
    return result.rowcount == 1


def requeue_expired(session: Session, league: LeagueRef | None = None, *, now: datetime | None = None) -> int:
    """Put running matches whose lease has expired (their worker died or hung) back in the queue; how many.

    Their attempt is not charged to any bot: the match is played again, on a fresh deal (as `void_match`).
    Commits.
    """
    now = now or database_now(session)
    query = sa.update(Match).where(col(Match.status) == MatchStatus.RUNNING, col(Match.lease_expires_at) < now)
    if league is not None:
        query = query.where(col(Match.league_id) == _league_id(session, league))
    requeued = session.exec(
        query.values(
            status=MatchStatus.QUEUED,
            worker=None,
            lease_expires_at=None,
            error=sa.literal("the lease expired; worker ") + sa.func.coalesce(col(Match.worker), "unknown"),
        )
        .returning(col(Match.id))
        .execution_options(synchronize_session=False)
    ).all()
    for (match_id,) in requeued:
        _fresh_deal(session, match_id)
    _expire_matches(session)
    session.commit()
    if requeued:
        log.warning("requeued %s match(es) whose worker's lease expired", len(requeued))
    return len(requeued)


def requeue_failed(session: Session, league: LeagueRef) -> int:
    """Give the league's failed matches another chance (`mus league run` again); how many. Commits."""
    result = session.exec(
        sa.update(Match)
        .where(col(Match.league_id) == _league_id(session, league), col(Match.status) == MatchStatus.FAILED)
        .values(status=MatchStatus.QUEUED)
        .execution_options(synchronize_session=False)
    )
    _expire_matches(session)
    session.commit()
    return int(result.rowcount)


def void_match(session: Session, match_id: int, worker: str, error: str, *, max_attempts: int | None = None) -> bool:
    """End an attempt that failed for an infrastructure reason: no result, nothing charged to a bot.

    Its bots may have seen its deal, so the match moves on to a fresh one (`_fresh_deal`), and so does its
    duplicate twin if the twin is not finished or being played. The match goes back to the queue with the
    error kept for the operator, or to `failed` once it has been attempted `max_attempts` times, so a match that
    can never run does not loop forever. False (and nothing changed) if this worker no longer holds the match.
    Commits.
    """
    if max_attempts is not None:
        _check_int("max_attempts", max_attempts, low=1)
    status: Any = MatchStatus.QUEUED
    if max_attempts is not None:
        status = sa.case((col(Match.attempt) >= max_attempts, MatchStatus.FAILED), else_=MatchStatus.QUEUED)
    result = session.exec(
        sa.update(Match)
        .where(_held_by(match_id, worker))
        .values(status=status, worker=None, lease_expires_at=None, error=str(error)[:MAX_ERROR_CHARS] or "voided")
        .execution_options(synchronize_session=False)
    )
    voided = result.rowcount == 1
    if voided:
        _fresh_deal(session, match_id)
    _expire_matches(session)
    session.commit()
    if voided:
        log.warning("match_id=%s voided by worker %s (not charged to a bot): %s", match_id, worker, error)
    return voided


def record_result(
    session: Session,
    match_id: int,
    worker: str,
    outcome: MatchOutcome | Mapping[str, Any],
    replay: Mapping[str, Any],
    faults: Sequence[Mapping[str, Any]],
    decision_seconds: Sequence[Sequence[float]],
    *,
    incidents: Sequence[Mapping[str, Any]] = (),
    now: datetime | None = None,
) -> bool:
    """Store a finished match: its result, games, vacas and replay, and mark it finished, in one transaction.

    Idempotent: if the match already has a result this returns False and changes nothing. The UNIQUE key on
    `match_result.match_id` makes that hold even when two workers finish the same match at once: the second
    insert fails, its transaction is rolled back whole. A result from a worker whose lease has expired is
    still accepted if it comes first and the match is still on the deal it played; once the match has moved to
    a fresh deal (requeued, or taken over), such a stale result returns False and is not written.

    `outcome` is the engine's `MatchOutcome` or its `outcome_record` mapping; `replay` the `match_record`;
    `faults` every fault charged (rules §13: illegal_action, timeout, limit), in order, as {seat, cause, detail};
    `incidents` what the referee recorded of the seats' connections and processes (protocol_error, disconnect,
    crash, stall, absent), in order, in the same shape; `decision_seconds` each seat's decision times, stored as a
    summary (`decision_summary`). Bad input raises `InvalidInput` before anything is
    written. Commits, or rolls back the whole session: call it with nothing else pending.
    """
    _check_worker(worker)
    match = get_match(session, match_id)
    if match.status is MatchStatus.FINISHED or _has_result(session, match_id):
        session.rollback()
        return False
    stale_seed = isinstance(replay, Mapping) and "seed" in replay and replay["seed"] != match.seed
    if stale_seed and not (match.status is MatchStatus.RUNNING and match.worker == worker):
        # An attempt that lost its lease, on a deal the match has since left: its result is not this deal's.
        session.rollback()
        log.warning("match_id=%s: worker %s's result is of a deal the match has left; not written", match_id, worker)
        return False
    parsed = _parse_outcome(outcome)
    fault_rows = _parse_causes(faults, "fault", FAULT_CAUSES)
    incident_rows = _parse_causes(incidents, "incident", INCIDENT_CAUSES)
    summaries = decision_summary(decision_seconds)
    replay_format, replay_data, replay_size = _pack_replay(replay, match.seed)
    now = now or database_now(session)
    games = [game for game in parsed.games if game.winner is not None]
    session.add(
        MatchResult(
            match_id=match_id,
            winner_version_id=match.team0_version_id if parsed.winner == 0 else match.team1_version_id,
            winner_team=parsed.winner,
            termination=parsed.termination.value,
            vacas_team0=parsed.vacas[0],
            vacas_team1=parsed.vacas[1],
            games_team0=sum(1 for game in games if game.winner == 0),
            games_team1=sum(1 for game in games if game.winner == 1),
            points_team0=sum(game.score[0] for game in parsed.games),
            points_team1=sum(game.score[1] for game in parsed.games),
            faults=fault_rows,
            incidents=incident_rows,
            decision_seconds=summaries,
            created_at=now,
        )
    )
    try:
        session.flush()
    except IntegrityError:
        # Another worker's result for this match committed first: keep it, write nothing.
        session.rollback()
        log.info("match_id=%s already had a result; worker %s's result was not written", match_id, worker)
        return False
    try:
        session.add_all(
            GameResult(
                match_id=match_id,
                vaca=game.vaca,
                game=game.game,
                winner_team=game.winner,
                score0=game.score[0],
                score1=game.score[1],
                termination=game.termination.value,
                hand_number=game.hand_number,
            )
            for game in parsed.games
        )
        session.add_all(
            VacaResult(
                match_id=match_id, vaca=vaca.vaca, winner_team=vaca.winner, games0=vaca.games[0], games1=vaca.games[1]
            )
            for vaca in parsed.vaca_results
        )
        session.add(Replay(match_id=match_id, format=replay_format, data=replay_data, size=replay_size, created_at=now))
        match.status = MatchStatus.FINISHED
        match.finished_at = now
        match.worker = worker
        match.lease_expires_at = None
        session.commit()
    except BaseException:
        session.rollback()
        raise
    log.info("match_id=%s result recorded by worker %s: team %s won", match_id, worker, parsed.winner)
    return True


def _fresh_deal(session: Session, match_id: int) -> None:
    """Move a match its caller holds (or has just requeued, in this transaction) on to a fresh deal.

    No bot ever sees a deal twice: the match's deal number goes past its own and its twin's, and its seed is
    derived again from the league's secret. Its duplicate twin moves with it, to the same fresh deal, if the twin
    is queued or failed; a twin that is finished or being played keeps its deal (its result stands), and the two
    are then no longer a pair (`workers/tournament/results.py`). A league created before secrets existed keeps
    its public seeds. Does not commit.
    """
    match = session.get(Match, match_id, populate_existing=True)
    assert match is not None, "the caller holds the match"
    league = session.get(League, match.league_id)
    assert league is not None, "a match's league is a foreign key"
    if league.secret is None:
        return
    twin = None
    if match.duplicate_pair is not None:
        twin = session.exec(
            select(Match)
            .where(
                col(Match.league_id) == match.league_id,
                col(Match.duplicate_pair) == match.duplicate_pair,
                col(Match.id) != match_id,
            )
            .execution_options(populate_existing=True)
        ).first()
    deal = max(match.deal, twin.deal if twin is not None else 0) + 1
    seed = derived_seed(
        parse_secret(league.secret),
        league=league.name,
        duplicate_pair=match.duplicate_pair,
        index=match.index,
        deal=deal,
        pairings=_pairings(len(league_entrants(session, league))),
    )
    session.exec(
        sa.update(Match)
        .where(col(Match.id) == match_id)
        .values(deal=deal, seed=seed)
        .execution_options(synchronize_session=False)
    )
    if twin is not None:
        moved = session.exec(
            sa.update(Match)
            .where(
                col(Match.id) == twin.id,
                col(Match.deal) == twin.deal,
                col(Match.status).in_([MatchStatus.QUEUED, MatchStatus.FAILED]),
            )
            .values(deal=deal, seed=seed)
            .execution_options(synchronize_session=False)
        )
        if moved.rowcount != 1:
            log.info(
                "match_id=%s moved to deal %s without its twin %s (finished or being played): the pair is broken",
                match_id,
                deal,
                twin.id,
            )
    log.info("match_id=%s moved to a fresh deal %s", match_id, deal)


def _expire_matches(session: Session, match_id: int | None = None) -> None:
    """Forget what the session holds of matches a bulk UPDATE changed (all, or one), so reads reload them."""
    for row in list(session.identity_map.values()):
        if isinstance(row, Match) and (match_id is None or row.id == match_id):
            session.expire(row)


def _held_by(match_id: int, worker: str) -> sa.ColumnElement[bool]:
    return sa.and_(col(Match.id) == match_id, col(Match.status) == MatchStatus.RUNNING, col(Match.worker) == worker)


def _has_result(session: Session, match_id: int) -> bool:
    return session.exec(select(MatchResult.id).where(col(MatchResult.match_id) == match_id)).first() is not None


def _check_worker(worker: str) -> None:
    if not isinstance(worker, str) or not worker.strip() or len(worker) > 200:
        raise InvalidInput(f"a worker name must be 1 to 200 characters, got {worker!r}")


def _check_lease(lease_s: float) -> timedelta:
    if (
        isinstance(lease_s, bool)
        or not isinstance(lease_s, int | float)
        or not (math.isfinite(lease_s) and lease_s > 0)
    ):
        raise InvalidInput(f"a lease must be a positive number of seconds, got {lease_s!r}")
    return timedelta(seconds=lease_s)


# ------------------------------------------------------------------------------------------ results, records


def outcome_record(outcome: MatchOutcome) -> dict[str, Any]:
    """The engine's `MatchOutcome` as JSON, with the same field names; `record_result` takes either."""
    return outcome.to_json()


def decision_summary(decision_seconds: Sequence[Sequence[float]]) -> list[dict[str, Any]]:
    """Per seat: {seat, count, median, p95, max} of its decision times (nearest-rank p95; None when empty)."""
    if isinstance(decision_seconds, str | bytes) or len(decision_seconds) > 4:
        raise InvalidInput("decision_seconds must give at most four seats' lists of seconds")
    summaries: list[dict[str, Any]] = []
    for seat, times in enumerate(decision_seconds):
        values: list[float] = []
        for value in times:
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise InvalidInput(f"seat {seat} has a decision time that is not a non-negative number: {value!r}")
            values.append(float(value))
        values.sort()
        summaries.append(
            {
                "seat": seat,
                "count": len(values),
                "median": statistics.median(values) if values else None,
                "p95": values[max(math.ceil(0.95 * len(values)) - 1, 0)] if values else None,
                "max": values[-1] if values else None,
            }
        )
    return summaries


def _parse_outcome(outcome: MatchOutcome | Mapping[str, Any]) -> MatchOutcome:
    """The outcome as the engine's value, checked: what goes in the tables comes from one shape only."""
    if isinstance(outcome, MatchOutcome):
        parsed = outcome
    else:
        try:
            parsed = MatchOutcome(
                winner=_team(outcome["winner"]),
                termination=MatchTermination(outcome["termination"]),
                vacas=_pair(outcome["vacas"]),
                games=tuple(
                    EngineGameResult(
                        vaca=_count(game["vaca"]),
                        game=_count(game["game"]),
                        winner=None if game.get("winner") is None else _team(game["winner"]),
                        score=_pair(game["score"]),
                        termination=GameTermination(game["termination"]),
                        hand_number=_count(game["hand_number"]),
                    )
                    for game in outcome["games"]
                ),
                vaca_results=tuple(
                    EngineVacaResult(
                        vaca=_count(vaca["vaca"]),
                        winner=None if vaca.get("winner") is None else _team(vaca["winner"]),
                        games=_pair(vaca["games"]),
                    )
                    for vaca in outcome.get("vaca_results", ())
                ),
                faults=_pair(outcome.get("faults", (0, 0))),
            )
        except KeyError as error:
            raise InvalidInput(f"the match outcome lacks the field {error.args[0]!r}") from None
        except (TypeError, ValueError) as error:
            raise InvalidInput(f"the match outcome is malformed: {error}") from None
    if parsed.winner not in (0, 1):
        raise InvalidInput(f"the match outcome's winner must be team 0 or 1, got {parsed.winner!r}")
    if not parsed.games:
        raise InvalidInput("the match outcome has no games")
    game_keys = [(game.vaca, game.game) for game in parsed.games]
    if len(set(game_keys)) != len(game_keys):
        raise InvalidInput("the match outcome lists a game twice")
    vaca_keys = [vaca.vaca for vaca in parsed.vaca_results]
    if len(set(vaca_keys)) != len(vaca_keys):
        raise InvalidInput("the match outcome lists a vaca twice")
    return parsed


def _team(value: Any) -> int:
    if isinstance(value, bool) or value not in (0, 1):
        raise ValueError(f"a team must be 0 or 1, got {value!r}")
    return int(value)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a non-negative integer, got {value!r}")
    return value


def _pair(value: Any) -> tuple[int, int]:
    if isinstance(value, str | bytes | Mapping) or len(value) != 2:
        raise ValueError(f"expected two integers, got {value!r}")
    return (_count(value[0]), _count(value[1]))


FAULT_CAUSES = frozenset(cause.value for cause in FaultCause)
"""The causes of faults (rules §13), as stored: types.proto `FaultCause` names, lowercase."""

INCIDENT_CAUSES = frozenset(cause.value for cause in IncidentCause)
"""The causes of incidents (a seat's connection or process), as stored: the other `FaultCause` names."""


def _parse_causes(entries: Sequence[Mapping[str, Any]], what: str, causes: frozenset[str]) -> list[dict[str, Any]]:
    """Faults or incidents as stored: {seat, cause, detail}, each cause one of `causes` (never the other kind)."""
    rows: list[dict[str, Any]] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise InvalidInput(f"{what} {index} must be a mapping with seat, cause and detail")
        seat, cause, detail = entry.get("seat"), entry.get("cause"), entry.get("detail", "")
        if isinstance(seat, bool) or seat not in (0, 1, 2, 3):
            raise InvalidInput(f"{what} {index} must name a seat from 0 to 3, got {seat!r}")
        if not isinstance(cause, str) or not cause:
            raise InvalidInput(f"{what} {index} must name its cause, got {cause!r}")
        if cause not in causes:
            raise InvalidInput(f"{what} {index} has cause {cause!r}; {what}s have one of: {', '.join(sorted(causes))}")
        rows.append({"seat": int(seat), "cause": cause, "detail": "" if detail is None else str(detail)})
    return rows


def _pack_replay(record: Mapping[str, Any], seed: int) -> tuple[str, bytes, int]:
    if not isinstance(record, Mapping):
        raise InvalidInput("the replay must be a replay record (a mapping)")
    replay_format = record.get("format")
    if not isinstance(replay_format, str) or not replay_format or len(replay_format) > 64:
        raise InvalidInput(f"the replay record has no valid format, got {replay_format!r}")
    if "seed" in record and record["seed"] != seed:
        raise InvalidInput(f"the replay's seed {record['seed']!r} is not the match's seed {seed}")
    try:
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise InvalidInput(f"the replay record is not JSON: {error}") from None
    data = text.encode()
    return replay_format, zlib.compress(data, 6), len(data)


def get_replay(session: Session, match_id: int) -> dict[str, Any]:
    """A finished match's replay record, decompressed (`replay_record` re-simulates it)."""
    replay = session.exec(select(Replay).where(col(Replay.match_id) == match_id)).first()
    if replay is None:
        get_match(session, match_id)
        raise NotFound(f"match {match_id} has no replay: it has not finished")
    record = json.loads(zlib.decompress(replay.data).decode())
    assert isinstance(record, dict)
    return record


def replay_match_ids(session: Session, league: LeagueRef) -> list[int]:
    """The ids of the league's matches that have a replay, in plan order (`mus replay export --league`)."""
    league_id = _league_id(session, league)
    ids = session.exec(
        select(Match.id)
        .join(Replay, col(Replay.match_id) == col(Match.id))
        .where(col(Match.league_id) == league_id)
        .order_by(col(Match.index))
    ).all()
    return [match_id for match_id in ids if match_id is not None]


def unplayed_twin(session: Session, match_id: int) -> Match | None:
    """The match's duplicate twin if it is dealt the same cards and has not finished yet: until it has, the
    match's replay (and its seed) would show the twin's bots the deals they are about to play."""
    match = get_match(session, match_id)
    if match.duplicate_pair is None:
        return None
    return session.exec(
        select(Match).where(
            col(Match.league_id) == match.league_id,
            col(Match.duplicate_pair) == match.duplicate_pair,
            col(Match.id) != match_id,
            col(Match.seed) == match.seed,
            col(Match.status) != MatchStatus.FINISHED,
        )
    ).first()


def get_match_details(session: Session, match_id: int) -> MatchDetails:
    """A finished match's stored result, games and vacas (to show a replay next to it, or verify it)."""
    match = get_match(session, match_id)
    result = session.exec(select(MatchResult).where(col(MatchResult.match_id) == match_id)).first()
    if result is None:
        raise NotFound(f"match {match_id} has no result: it has not finished")
    games = session.exec(
        select(GameResult)
        .where(col(GameResult.match_id) == match_id)
        .order_by(col(GameResult.vaca), col(GameResult.game))
    ).all()
    vacas = session.exec(
        select(VacaResult).where(col(VacaResult.match_id) == match_id).order_by(col(VacaResult.vaca))
    ).all()
    return MatchDetails(match, result, tuple(games), tuple(vacas))


def league_results(session: Session, league: LeagueRef) -> list[FinishedMatch]:
    """Every finished match of the league in the order they finished: what standings and ratings need."""
    league_id = _league_id(session, league)
    rows = session.exec(
        select(Match, MatchResult)
        .join(MatchResult, col(MatchResult.match_id) == col(Match.id))
        .where(col(Match.league_id) == league_id)
        .order_by(col(Match.finished_at), col(Match.id))
    ).all()
    version_ids = {version_id for match, _ in rows for version_id in (match.team0_version_id, match.team1_version_id)}
    versions: dict[int, tuple[str, int]] = {}
    if version_ids:
        for version_id, number, bot_name in session.exec(
            select(BotVersion.id, BotVersion.number, Bot.name)
            .join(Bot, col(Bot.id) == col(BotVersion.bot_id))
            .where(col(BotVersion.id).in_(version_ids))
        ).all():
            assert version_id is not None
            versions[version_id] = (bot_name, number)
    finished: list[FinishedMatch] = []
    for match, result in rows:
        bot0, number0 = versions[match.team0_version_id]
        bot1, number1 = versions[match.team1_version_id]
        assert match.finished_at is not None, "a match with a result is finished"
        finished.append(
            FinishedMatch(
                match_id=_id(match),
                index=match.index,
                seed=match.seed,
                duplicate_pair=match.duplicate_pair,
                deal=match.deal,
                team0_bot=bot0,
                team1_bot=bot1,
                team0_version_id=match.team0_version_id,
                team1_version_id=match.team1_version_id,
                team0_version=number0,
                team1_version=number1,
                winner_team=result.winner_team,
                winner_version_id=result.winner_version_id,
                termination=result.termination,
                vacas=(result.vacas_team0, result.vacas_team1),
                games=(result.games_team0, result.games_team1),
                points=(result.points_team0, result.points_team1),
                faults=tuple(result.faults),
                incidents=tuple(result.incidents),
                decision_seconds=tuple(result.decision_seconds),
                finished_at=match.finished_at,
            )
        )
    return finished


def save_rating_snapshot(session: Session, league: LeagueRef, ratings: Any, *, finished_matches: int) -> RatingSnapshot:
    """Keep ratings computed (by `workers/tournament`) from `finished_matches` results; `ratings` is JSON."""
    league_id = _league_id(session, league)
    _check_int("finished_matches", finished_matches, low=0)
    try:
        ratings = json.loads(json.dumps(ratings, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise InvalidInput(f"ratings must be JSON: {error}") from None
    snapshot = RatingSnapshot(league_id=league_id, finished_matches=finished_matches, ratings=ratings)
    session.add(snapshot)
    session.flush()
    return snapshot


def latest_rating_snapshot(session: Session, league: LeagueRef) -> RatingSnapshot | None:
    """The league's most recent rating snapshot, if any."""
    league_id = _league_id(session, league)
    return session.exec(
        select(RatingSnapshot)
        .where(col(RatingSnapshot.league_id) == league_id)
        .order_by(col(RatingSnapshot.computed_at).desc(), col(RatingSnapshot.id).desc())
    ).first()


# ------------------------------------------------------------------------------------------------- helpers


def _id(row: Bot | BotVersion | League | Match) -> int:
    """A stored row's id (SQLModel types it `int | None` because it is None before the first flush)."""
    assert row.id is not None, f"{type(row).__name__} has not been flushed"
    return row.id


def _league_id(session: Session, league: LeagueRef) -> int:
    if isinstance(league, League):
        return _id(league)
    return _id(get_league(session, league))


def _check_name(kind: str, name: str) -> None:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidInput(
            f"invalid {kind} name {name!r}: use 1 to 64 letters, digits, '_', '.', '+' or '-', starting with a "
            "letter or digit"
        )


def _check_int(what: str, value: Any, *, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidInput(f"{what} must be an integer of at least {low}, got {value!r}")


def _check_seed(what: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        raise InvalidInput(f"{what} must be an integer from 0 to 2**63-1, got {value!r}")


def _flush_or_conflict(session: Session, message: str) -> None:
    """Flush; a unique key violated here means a concurrent writer won the race: say so as a `Conflict`."""
    try:
        session.flush()
    except IntegrityError:
        session.rollback()
        raise Conflict(message) from None
