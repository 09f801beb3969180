"""Replays: a finished match's record, stored compressed, and which of them may be shown."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any

from sqlmodel import Session, col, select

from workers.db.errors import InvalidInput, NotFound
from workers.db.models import League, LeagueStatus, Match, MatchStatus, Replay
from workers.db.repo.common import LeagueRef
from workers.db.repo.leagues import get_match, league_id_of


def pack_replay(record: Mapping[str, Any], seed: int, *, text: str | None = None) -> tuple[str, bytes, int]:
    """A match's replay record as stored: (format, zlib-compressed JSON, uncompressed size); it must name its
    format, be of the match's seed and be JSON. `text`: the record as JSON already (`parse_record` read it from
    it), stored as is rather than written again."""
    replay_format = record.get("format")
    if not isinstance(replay_format, str) or not replay_format or len(replay_format) > 64:
        raise InvalidInput(f"the replay record has no valid format, got {replay_format!r}")
    if "seed" in record and record["seed"] != seed:
        raise InvalidInput(f"the replay's seed {record['seed']!r} is not the match's seed {seed}")
    if text is None:
        try:
            text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as error:
            raise InvalidInput(f"the replay record is not JSON: {error}") from None
    data = text.encode()
    return replay_format, zlib.compress(data, 6), len(data)


def parse_record(text: str) -> dict[str, Any]:
    """A replay record given as JSON text (as the referee writes it, `dumps_record`): a JSON object, with no NaN
    or infinity (which `pack_replay` refuses in a record given as values), else `InvalidInput`."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    try:
        record = json.loads(text, parse_constant=refuse)
    except ValueError as error:
        raise InvalidInput(f"the replay record is not JSON: {error}") from None
    if not isinstance(record, dict):
        raise InvalidInput("the replay record is not a JSON object")
    return record


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
    league_id = league_id_of(session, league)
    ids = session.exec(
        select(Match.id)
        .join(Replay, col(Replay.match_id) == col(Match.id))
        .where(col(Match.league_id) == league_id)
        .order_by(col(Match.index))
    ).all()
    return [match_id for match_id in ids if match_id is not None]


def unplayed_twin(session: Session, match_id: int) -> Match | None:
    """The match's duplicate twin if it is dealt the same cards and has not finished yet: until it has, the
    match's replay (and its seed) would show the twin's bots the deals they are about to play. None in a cancelled
    league: its twins are never played, and its secret is published."""
    match = get_match(session, match_id)
    if match.duplicate_pair is None:
        return None
    if session.scalar(select(League.status).where(col(League.id) == match.league_id)) is LeagueStatus.CANCELLED:
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
