"""Leagues, their entrants and their planned matches: created all at once, then read by status and progress.

A league is expanded into match rows when it is created, each with the seed its identity derives from the
league's secret, so progress, resume and standings are queries and a league either exists whole or not at all.
`match_setup` is what a worker reads before it plays one of those matches.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from referee.engine.errors import RulesError
from referee.engine.rules import Rules
from workers.db.errors import Conflict, InvalidInput, NotFound
from workers.db.models import (
    Bot,
    BotVersion,
    DealMode,
    League,
    LeagueEntrant,
    LeagueStatus,
    Match,
    MatchStatus,
    utc_now,
)
from workers.db.repo.bots import current_version
from workers.db.repo.common import (
    LeagueRef,
    check_int,
    check_name,
    check_seed,
    core_table,
    database_now,
    flush_or_conflict,
    row_id,
)
from workers.tournament.deals import commitment, derived_seed, new_secret, parse_secret

MAX_ABSENT_LIMIT_S = 86_400.0
"""A match waits at most a day for an absent remote bot (its worker holds the match all that time)."""


@dataclass(frozen=True, slots=True)
class Entrant:
    """A league's entrant: which bot, and the version its matches are played with."""

    bot_id: int
    bot_name: str
    remote: bool
    version_id: int
    version_number: int
    persistent: bool = False
    """Its version plays seat after seat from one process (`mus bot add --persistent`, workers/pool.py)."""


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
    content_hash: str
    """The version's content hash as registered: the worker checks the folder still has it before launching."""
    persistent: bool = False
    """The version plays seat after seat from one process (`mus bot add --persistent`, workers/pool.py)."""


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


def half_of(team0_version_id: int, team1_version_id: int) -> int:
    """Which half of its duplicate pair a match is: 0 when team 0's bot version has the lower id, else 1. The twin
    swaps the teams, so it is always the other half (in a league no bot meets itself); a worker's pool plays the
    two with different processes (workers.pool), and the queues send each half to workers that prefer it
    (workers.app.match_queues). Read from the match alone: no query, the same for every reader."""
    return int(team0_version_id > team1_version_id)


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
    cards: docs/leagues.md), any other duplicate pairs (a pair with a persistent bot is played whole by one
    worker: `workers.play`). `sandbox=False` records `--no-sandbox`: its hosted bots run unconfined.

    `options` are rules options (rules §14, time control included); only those that differ from the defaults
    are stored. Everything is checked before the first row is written, so an unknown bot or a bad plan leaves
    nothing behind.
    """
    check_name("league", name)
    rules = _check_rules(options)
    check_int("matches_per_pairing", matches_per_pairing, low=1)
    check_seed("the league seed", seed)
    if not (math.isfinite(absent_limit_s) and absent_limit_s > 0):
        raise InvalidInput(f"absent_limit_s must be above 0, got {absent_limit_s}")
    if absent_limit_s > MAX_ABSENT_LIMIT_S:
        raise InvalidInput(f"absent_limit_s must be at most {MAX_ABSENT_LIMIT_S:g} seconds, got {absent_limit_s:g}")
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
    pairings = pairing_count(len(names))

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
    flush_or_conflict(session, f"a league named {name!r} was created at the same time; pick another name")
    league_id = row_id(league)
    session.add_all(LeagueEntrant(league_id=league_id, bot_version_id=row_id(versions[bot])) for bot in names)
    session.add_all(
        Match(
            league_id=league_id,
            index=index,
            team0_version_id=row_id(versions[team0]),
            team1_version_id=row_id(versions[team1]),
            seed=derived_seed(secret, league=name, duplicate_pair=pair, index=index, deal=0, pairings=pairings),
            duplicate_pair=pair,
            deal=0,
        )
        for index, (team0, team1, pair) in enumerate(plan)
    )
    session.flush()
    return league


def pairing_count(entrants: int) -> int:
    """How many pairings a round robin of `entrants` has (at least 1: it fixes each slot's first dealer)."""
    return max(entrants * (entrants - 1) // 2, 1)


def revealed_secret(league: League) -> str | None:
    """The league's secret (hex), but only once the league has ended (finished, or cancelled with no match in
    play: `cancel_league`): before that, nobody sees it."""
    return league.secret if league.status.ended else None


def check_league_seed(session: Session, league: League, match: Match, secret_hex: str) -> str | None:
    """Why `match`'s seed is not the one its identity and deal derive from the revealed secret; None if it is."""
    try:
        secret = parse_secret(secret_hex)
    except ValueError as error:
        return str(error)
    pairings = pairing_count(len(league_entrants(session, league)))
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
        if pair is not None and (isinstance(pair, bool) or not isinstance(pair, int) or pair < 0):
            raise InvalidInput(f"the duplicate_pair of {where} must be an integer of at least 0, got {pair!r}")
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
        select(BotVersion).where(col(BotVersion.bot_id).in_([row_id(bot) for bot in bots.values()]))
    ).all():
        versions.setdefault(row.bot_id, []).append(row)
    current: dict[str, BotVersion] = {}
    for name in names:
        version = current_version(versions.get(row_id(bots[name]), []))
        if version is None:
            raise Conflict(f"bot {name!r} has no version to enter")
        current[name] = version
    return current


def get_league(session: Session, league: LeagueRef) -> League:
    """A league by name or id (a row is looked up again, so its status is current)."""
    if isinstance(league, League):
        league = row_id(league)
    if isinstance(league, int):
        found = session.get(League, league, populate_existing=True)
        if found is None:
            raise NotFound(f"no league with id {league}")
        return found
    by_name = session.exec(
        select(League).where(col(League.name) == league).execution_options(populate_existing=True)
    ).first()
    if by_name is None:
        raise NotFound(f"no league named {league!r} (`mus league list` names them)")
    return by_name


def list_leagues(session: Session) -> list[League]:
    """Every league, oldest first."""
    return list(session.exec(select(League).order_by(col(League.id))).all())


def league_entrants(session: Session, league: LeagueRef) -> list[Entrant]:
    """A league's entrants by bot name, with the versions they play with."""
    league_id = league_id_of(session, league)
    rows = session.exec(
        select(Bot, BotVersion)
        .join(BotVersion, col(BotVersion.bot_id) == col(Bot.id))
        .join(LeagueEntrant, col(LeagueEntrant.bot_version_id) == col(BotVersion.id))
        .where(col(LeagueEntrant.league_id) == league_id)
        .order_by(col(Bot.name))
    ).all()
    return [
        Entrant(row_id(bot), bot.name, bot.remote, row_id(version), version.number, version.persistent)
        for bot, version in rows
    ]


def start_league(session: Session, league: LeagueRef) -> League:
    """Mark a created or paused league running (`mus league run`); a running or finished one is left as it is, and
    a cancelled one cannot run again (Conflict)."""
    row = get_league(session, league)
    if row.status is LeagueStatus.CANCELLED:
        raise Conflict(f"league {row.name!r} was cancelled: it plays no more matches (`mus league status`)")
    if row.status in (LeagueStatus.CREATED, LeagueStatus.PAUSED):
        row.status = LeagueStatus.RUNNING
        session.flush()
    return row


def pause_league(session: Session, league: LeagueRef) -> League:
    """Pause a league (`mus league pause`): from the commit on, no worker claims its matches (`claim_match`), on
    any broker and any machine; those being played finish. A league whose matches have all finished cannot be
    paused (Conflict)."""
    row = get_league(session, league)
    if row.status is LeagueStatus.CANCELLED:
        raise Conflict(f"league {row.name!r} was cancelled: there is nothing left to pause")
    if row.status is LeagueStatus.FINISHED or not unfinished_match_ids(session, row):
        raise Conflict(f"league {row.name!r} is finished: there is nothing left to pause")
    if row.status is not LeagueStatus.PAUSED:
        row.status = LeagueStatus.PAUSED
        session.flush()
    return row


def cancel_league(session: Session, league: LeagueRef, *, now: datetime | None = None) -> League:
    """End a league for good with the matches it has played (`mus league cancel`): no worker claims its others
    (`claim_match`), its standings count what was played, its secret is published (`revealed_secret`) and its bots
    may be removed. For a league that cannot finish (a bot's folder changed since it was entered, a remote bot
    with no referee) or that is no longer wanted.

    Refused (Conflict) for a league that has ended, and while a match of it is being played on a live lease: its
    seats would then be playing a deal whose secret is published. `mus league pause` first lets those end.
    """
    row = get_league(session, league)
    if row.status.ended:
        ended = "has finished" if row.status is LeagueStatus.FINISHED else "was cancelled"
        raise Conflict(f"league {row.name!r} {ended}: there is nothing left to cancel")
    if not unfinished_match_ids(session, row):
        raise Conflict(f"league {row.name!r} has played every match: `mus league run {row.name}` finishes it")
    now = now or database_now(session)
    playing = session.exec(
        select(sa.func.count())
        .select_from(Match)
        .where(
            col(Match.league_id) == row_id(row),
            col(Match.status) == MatchStatus.RUNNING,
            col(Match.lease_expires_at) >= now,
        )
    ).one()
    if playing:
        raise Conflict(
            f"league {row.name!r} has {playing} match(es) being played: `mus league pause {row.name}`, then cancel"
            " it once they have ended"
        )
    row.status = LeagueStatus.CANCELLED
    row.finished_at = utc_now()
    session.flush()
    return row


def finish_league_if_complete(session: Session, league: LeagueRef) -> bool:
    """Mark the league finished once every match is; True when this call finished it (never a cancelled one)."""
    row = get_league(session, league)
    if row.status.ended:
        return False
    open_matches = session.exec(
        select(sa.func.count())
        .select_from(Match)
        .where(col(Match.league_id) == row_id(row), col(Match.status) != MatchStatus.FINISHED)
    ).one()
    if open_matches:
        return False
    row.status = LeagueStatus.FINISHED
    row.finished_at = utc_now()
    session.flush()
    return True


def finish_complete_leagues(session: Session) -> list[str]:
    """Finish every running league whose matches have all finished (`finish_league_if_complete`); their names.
    A worker does it now and then: a league played by workers that no `mus league run` follows to its end stayed
    'running', its secret unpublished, until someone ran it again (an operator's review, stop 35)."""
    unfinished = (
        sa.select(col(Match.id))
        .where(col(Match.league_id) == col(League.id), col(Match.status) != MatchStatus.FINISHED)
        .exists()
    )
    complete = session.exec(select(League).where(col(League.status) == LeagueStatus.RUNNING, ~unfinished)).all()
    return [league.name for league in complete if finish_league_if_complete(session, league)]


def league_progress(session: Session, league: LeagueRef) -> dict[str, int]:
    """How many matches the league has, and how many are in each status: {total, finished, queued, ...}."""
    league_id = league_id_of(session, league)
    counts = {status.value: 0 for status in MatchStatus}
    rows = session.exec(
        select(Match.status, sa.func.count()).where(col(Match.league_id) == league_id).group_by(col(Match.status))
    ).all()
    for status, count in rows:
        counts[MatchStatus(status).value] = int(count)
    return {"total": sum(counts.values()), **counts}


def unfinished_match_ids(session: Session, league: LeagueRef) -> list[int]:
    """The ids of the league's matches that have no result yet, in plan order: what `league run` resumes."""
    league_id = league_id_of(session, league)
    ids = session.exec(
        select(Match.id)
        .where(col(Match.league_id) == league_id, col(Match.status) != MatchStatus.FINISHED)
        .order_by(col(Match.index))
    ).all()
    return [match_id for match_id in ids if match_id is not None]


def failure_causes(session: Session, league: LeagueRef) -> dict[str, int]:
    """Why the league's failed matches failed: each error (`Match.error`), and how many it stopped, most first."""
    league_id = league_id_of(session, league)
    rows = session.exec(
        select(Match.error, sa.func.count())
        .where(col(Match.league_id) == league_id, col(Match.status) == MatchStatus.FAILED)
        .group_by(col(Match.error))
        .order_by(sa.func.count().desc(), col(Match.error))
    ).all()
    return {error or "no reason recorded": int(count) for error, count in rows}


def list_matches(session: Session, league: LeagueRef, *, status: MatchStatus | None = None) -> list[Match]:
    """The league's matches in plan order, optionally only those in one status."""
    league_id = league_id_of(session, league)
    query = select(Match).where(col(Match.league_id) == league_id)
    if status is not None:
        query = query.where(col(Match.status) == status)
    query = query.order_by(col(Match.index)).execution_options(populate_existing=True)
    return list(session.exec(query).all())


@dataclass(frozen=True, slots=True)
class QueuedMatch:
    """What the scheduler needs of a queued match to send it (`workers.league_run`)."""

    id: int
    attempt: int
    index: int
    duplicate_pair: int | None
    half: int = 0
    """Which half of its duplicate pair it is (`half_of`): the queue it is sent to."""


def queued_matches(session: Session, league: LeagueRef, *, attempted: bool = False) -> list[QueuedMatch]:
    """The league's queued matches in plan order, a few columns each (`attempted`: only those claimed before, and
    queued again: voided, or their lease expired). The scheduler reads the attempted ones on every poll: all of a
    league of 10,000 matches cost it 25-80 ms of CPU a read, four times a second."""
    league_id = league_id_of(session, league)
    columns = (
        Match.id,
        Match.attempt,
        Match.index,
        Match.duplicate_pair,
        Match.team0_version_id,
        Match.team1_version_id,
    )
    rows = session.execute(
        sa.select(*(col(column) for column in columns))
        .where(
            col(Match.league_id) == league_id,
            col(Match.status) == MatchStatus.QUEUED,
            *((col(Match.attempt) > 0,) if attempted else ()),
        )
        .order_by(col(Match.index))
    ).all()
    return [
        QueuedMatch(match_id, attempt, index, pair, half_of(team0, team1))
        for match_id, attempt, index, pair, team0, team1 in rows
        if match_id is not None
    ]


def get_match(session: Session, match_id: int) -> Match:
    """A match by id, read afresh (a worker elsewhere may have changed it since this session last looked)."""
    match = session.get(Match, match_id, populate_existing=True)
    if match is None:
        raise NotFound(f"no match with id {match_id}")
    return match


def match_setup(session: Session, match_id: int) -> MatchSetup:
    """What a worker needs to play the match: rules, seed, and each team's program. One query (the match, its
    league, and each team's version and bot), run before every match, read as columns (`core_table`)."""
    row = session.connection().execute(_setup_statement(), {"setup_match_id": match_id}).first()
    if row is None:
        raise NotFound(f"no match with id {match_id}")
    found = row._mapping
    return MatchSetup(
        match_id=match_id,
        league_id=found["league_id"],
        league_name=found["league_name"],
        index=found["index"],
        seed=found["seed"],
        duplicate_pair=found["duplicate_pair"],
        rules=dict(found["rules"]),
        absent_limit_s=found["absent_limit_s"],
        status=found["status"],
        attempt=found["attempt"],
        teams=(_team_setup(found, 0), _team_setup(found, 1)),
        sandbox=found["sandbox"],
    )


_TEAM_BOT = ("name", "id", "remote", "language")
_TEAM_VERSION = ("id", "number", "command", "folder", "content_hash", "persistent")


@cache
def _setup_statement() -> sa.Select[Any]:
    """`match_setup`'s query, made once (its aliases cost more to build than the query to run); each team's
    columns are labelled `bot{team}_{column}` and `version{team}_{column}`."""
    match, league = core_table(Match), core_table(League)
    versions = [core_table(BotVersion).alias(f"version{team}") for team in (0, 1)]
    bots = [core_table(Bot).alias(f"bot{team}") for team in (0, 1)]
    teams = [
        column.label(f"{table.name}_{column.name}")
        for team in (0, 1)
        for table, names in ((bots[team], _TEAM_BOT), (versions[team], _TEAM_VERSION))
        for column in (table.c[name] for name in names)
    ]
    return (
        sa.select(
            match.c.index,
            match.c.seed,
            match.c.duplicate_pair,
            match.c.status,
            match.c.attempt,
            league.c.id.label("league_id"),
            league.c.name.label("league_name"),
            league.c.rules,
            league.c.absent_limit_s,
            league.c.sandbox,
            *teams,
        )
        .select_from(
            match.join(league, league.c.id == match.c.league_id)
            .join(versions[0], versions[0].c.id == match.c.team0_version_id)
            .join(bots[0], bots[0].c.id == versions[0].c.bot_id)
            .join(versions[1], versions[1].c.id == match.c.team1_version_id)
            .join(bots[1], bots[1].c.id == versions[1].c.bot_id)
        )
        .where(match.c.id == sa.bindparam("setup_match_id"))
    )


def _team_setup(found: sa.RowMapping, team: int) -> TeamSetup:
    bot, version = f"bot{team}_", f"version{team}_"
    return TeamSetup(
        bot_name=found[bot + "name"],
        bot_id=found[bot + "id"],
        remote=found[bot + "remote"],
        language=found[bot + "language"],
        version_id=found[version + "id"],
        version_number=found[version + "number"],
        command=tuple(found[version + "command"]),
        folder=found[version + "folder"],
        content_hash=found[version + "content_hash"],
        persistent=found[version + "persistent"],
    )


def league_id_of(session: Session, league: LeagueRef) -> int:
    if isinstance(league, League):
        return row_id(league)
    return row_id(get_league(session, league))
