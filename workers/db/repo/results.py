"""Finished matches: a result, its games and vacas and its replay written once, and read back for standings.

Results are the source of truth: standings and ratings are recomputed from `league_results` on every read
(workers/leagues.py). A result is written at most once per match (a unique key), whatever the workers do.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from referee.causes import IncidentCause
from referee.engine.outcome import FaultCause, GameTermination, MatchOutcome, MatchTermination
from referee.engine.outcome import GameResult as EngineGameResult
from referee.engine.outcome import VacaResult as EngineVacaResult
from workers.db.errors import InvalidInput, NotFound
from workers.db.models import Bot, BotVersion, GameResult, Match, MatchResult, MatchStatus, Replay, VacaResult
from workers.db.repo.common import LeagueRef, core_table, database_now, row_id
from workers.db.repo.leagues import get_match, league_id_of
from workers.db.repo.leases import check_worker
from workers.db.repo.replays import pack_replay, parse_record

log = logging.getLogger(__name__)


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


def record_result(
    session: Session,
    match_id: int,
    worker: str,
    outcome: MatchOutcome | Mapping[str, Any],
    replay: Mapping[str, Any] | str,
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

    `outcome` is the engine's `MatchOutcome` or its `outcome_record` mapping; `replay` the `match_record`, or its
    JSON text as the referee wrote it (`dumps_record`: stored as is, once read as a record, not written again);
    `faults` every fault charged (rules §13: illegal_action, timeout, limit), in order, as {seat, cause, detail};
    `incidents` what the referee recorded of the seats' connections and processes (protocol_error, disconnect,
    crash, stall, absent), in order, in the same shape; `decision_seconds` each seat's decision times, stored as a
    summary (`decision_summary`). Bad input raises `InvalidInput` before anything is
    written. Commits, or rolls back the whole session: call it with nothing else pending.
    """
    check_worker(worker)
    match = _match_and_result(session, match_id)
    if match.status is MatchStatus.FINISHED or match.result_id is not None:
        session.rollback()
        return False
    text, record = (replay, parse_record(replay)) if isinstance(replay, str) else (None, replay)
    stale_seed = "seed" in record and record["seed"] != match.seed
    if stale_seed and not (match.status is MatchStatus.RUNNING and match.worker == worker):
        # An attempt that lost its lease, on a deal the match has since left: its result is not this deal's.
        session.rollback()
        log.warning("match_id=%s: worker %s's result is of a deal the match has left; not written", match_id, worker)
        return False
    parsed = _parse_outcome(outcome)
    fault_rows = _parse_causes(faults, "fault", FAULT_CAUSES)
    incident_rows = _parse_causes(incidents, "incident", INCIDENT_CAUSES)
    summaries = decision_summary(decision_seconds)
    replay_format, replay_data, replay_size = pack_replay(record, match.seed, text=text)
    now = now or database_now(session)
    games = [game for game in parsed.games if game.winner is not None]
    # Written as rows of values by statements made once (one INSERT each table, an UPDATE of the match) on the
    # session's connection, not as ORM objects or ORM statements: building and flushing those, or the ORM's
    # handling of a statement, cost more than running it.
    result_row = {
        "match_id": match_id,
        "winner_version_id": match.team0_version_id if parsed.winner == 0 else match.team1_version_id,
        "winner_team": parsed.winner,
        "termination": parsed.termination.value,
        "vacas_team0": parsed.vacas[0],
        "vacas_team1": parsed.vacas[1],
        "games_team0": sum(1 for game in games if game.winner == 0),
        "games_team1": sum(1 for game in games if game.winner == 1),
        "points_team0": sum(game.score[0] for game in parsed.games),
        "points_team1": sum(game.score[1] for game in parsed.games),
        "faults": fault_rows,
        "incidents": incident_rows,
        "decision_seconds": summaries,
        "created_at": now,
    }
    connection = session.connection()
    try:
        connection.execute(_INSERT_RESULT, [result_row])
    except IntegrityError:
        # Another worker's result for this match committed first: keep it, write nothing.
        session.rollback()
        log.info("match_id=%s already had a result; worker %s's result was not written", match_id, worker)
        return False
    try:
        if parsed.games:
            connection.execute(
                _INSERT_GAMES,
                [
                    {
                        "match_id": match_id,
                        "vaca": game.vaca,
                        "game": game.game,
                        "winner_team": game.winner,
                        "score0": game.score[0],
                        "score1": game.score[1],
                        "termination": game.termination.value,
                        "hand_number": game.hand_number,
                    }
                    for game in parsed.games
                ],
            )
        if parsed.vaca_results:
            connection.execute(
                _INSERT_VACAS,
                [
                    {
                        "match_id": match_id,
                        "vaca": vaca.vaca,
                        "winner_team": vaca.winner,
                        "games0": vaca.games[0],
                        "games1": vaca.games[1],
                    }
                    for vaca in parsed.vaca_results
                ],
            )
        replay_row = {
            "match_id": match_id,
            "format": replay_format,
            "data": replay_data,
            "size": replay_size,
            "created_at": now,
        }
        connection.execute(_INSERT_REPLAY, [replay_row])
        connection.execute(_FINISH, {"finished_id": match_id, "finished_at_": now, "finished_worker": worker})
        session.commit()
    except BaseException:
        session.rollback()
        raise
    log.info("match_id=%s result recorded by worker %s: team %s won", match_id, worker, parsed.winner)
    return True


_MATCH = core_table(Match)
_RESULT = core_table(MatchResult)
_STORED: sa.Select[Any] = (
    sa.select(
        _MATCH.c.status,
        _MATCH.c.seed,
        _MATCH.c.worker,
        _MATCH.c.team0_version_id,
        _MATCH.c.team1_version_id,
        _RESULT.c.id.label("result_id"),
    )
    .select_from(_MATCH.outerjoin(_RESULT, _RESULT.c.match_id == _MATCH.c.id))
    .where(_MATCH.c.id == sa.bindparam("stored_id"))
)
"""`record_result`'s read of the match and the id of its result if any; bound per call (stored_id)."""
_INSERT_RESULT = sa.insert(_RESULT)
_INSERT_GAMES = sa.insert(core_table(GameResult))
_INSERT_VACAS = sa.insert(core_table(VacaResult))
_INSERT_REPLAY = sa.insert(core_table(Replay))
_FINISH = (
    sa.update(_MATCH)
    .where(_MATCH.c.id == sa.bindparam("finished_id"))
    .values(
        status=MatchStatus.FINISHED,
        finished_at=sa.bindparam("finished_at_"),
        worker=sa.bindparam("finished_worker"),
        lease_expires_at=None,
    )
)


def _match_and_result(session: Session, match_id: int) -> sa.Row[Any]:
    """What `record_result` reads of the match (status, seed, worker, the teams' versions) and the id of its
    result if it has one (`result_id`): one query, made once and run on the session's connection, read as
    columns, not as a loaded match (an ORM load, or the ORM's handling of the query, cost more than the
    statements that store the result)."""
    row = session.connection().execute(_STORED, {"stored_id": match_id}).first()
    if row is None:
        raise NotFound(f"no match with id {match_id}")
    return row


def outcome_record(outcome: MatchOutcome) -> dict[str, Any]:
    """The engine's `MatchOutcome` as JSON, with the same field names; `record_result` takes either."""
    return outcome.to_json()


def decision_summary(decision_seconds: Sequence[Sequence[float]]) -> list[dict[str, Any]]:
    """Per seat: {seat, count, median, p95, max} of its decision times (nearest-rank p95; None when empty)."""
    if len(decision_seconds) > 4:
        raise InvalidInput("decision_seconds must give at most four seats' lists of seconds")
    summaries: list[dict[str, Any]] = []
    for seat, times in enumerate(decision_seconds):
        values: list[float] = []
        for value in times:
            if not math.isfinite(value) or value < 0:
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
    """The outcome as the engine's value: what goes in the tables comes from one shape only.

    The engine's own value is taken as it is (the engine built it); an outcome given as JSON is checked.
    """
    if isinstance(outcome, MatchOutcome):
        return outcome
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
        seat, cause, detail = entry.get("seat"), entry.get("cause"), entry.get("detail", "")
        if isinstance(seat, bool) or seat not in (0, 1, 2, 3):
            raise InvalidInput(f"{what} {index} must name a seat from 0 to 3, got {seat!r}")
        if not isinstance(cause, str) or not cause:
            raise InvalidInput(f"{what} {index} must name its cause, got {cause!r}")
        if cause not in causes:
            raise InvalidInput(f"{what} {index} has cause {cause!r}; {what}s have one of: {', '.join(sorted(causes))}")
        rows.append({"seat": int(seat), "cause": cause, "detail": "" if detail is None else str(detail)})
    return rows


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
    league_id = league_id_of(session, league)
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
                match_id=row_id(match),
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
