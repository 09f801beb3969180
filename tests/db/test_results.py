"""Results: one transaction with the replay and the status, written once however often a worker retries."""

from __future__ import annotations

import json
import math
import threading
import zlib
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from referee.engine.replay import replay_record
from tests.db.factories import DECISIONS, FAULTS, add_bots, finish, forfeited, make_league, played, row_counts
from workers.db import repo
from workers.db.errors import InvalidInput
from workers.db.models import GameResult, MatchResult, MatchStatus, Replay, VacaResult
from workers.db.repo import results as repo_results
from workers.db.session import session_scope


@pytest.fixture
def match_ids(engine: Engine, tmp_path: Path) -> list[int]:
    with session_scope(engine) as session:
        add_bots(session, tmp_path, "alpha", "bravo")
        league = make_league(session, "spring", ["alpha", "bravo"])
        return repo.unfinished_match_ids(session, league.id or 0)


def _claim(engine: Engine, match_id: int, worker: str = "host:1") -> tuple[Any, dict[str, Any]]:
    with session_scope(engine) as session:
        claimed = repo.claim_match(session, match_id, worker, 60.0)
        assert claimed is not None
        return played(claimed.seed)


def test_a_result_is_stored_with_games_vacas_replay_and_status(engine: Engine, match_ids: list[int]) -> None:
    outcome, record = _claim(engine, match_ids[0])
    with session_scope(engine) as session:
        assert repo.record_result(session, match_ids[0], "host:1", outcome, record, FAULTS, DECISIONS)
    with session_scope(engine) as session:
        details = repo.get_match_details(session, match_ids[0])
        match, result = details.match, details.result
        assert match.status is MatchStatus.FINISHED and match.finished_at is not None
        assert match.lease_expires_at is None
        winner_version = match.team0_version_id if outcome.winner == 0 else match.team1_version_id
        assert (result.winner_team, result.winner_version_id) == (outcome.winner, winner_version)
        assert result.termination == outcome.termination.value
        assert (result.vacas_team0, result.vacas_team1) == outcome.vacas
        games = [
            (g.vaca, g.game, g.winner_team, (g.score0, g.score1), g.termination, g.hand_number) for g in details.games
        ]
        assert games == [(g.vaca, g.game, g.winner, g.score, g.termination.value, g.hand_number) for g in outcome.games]
        assert (result.games_team0, result.games_team1) == (
            sum(g.winner == 0 for g in outcome.games),
            sum(g.winner == 1 for g in outcome.games),
        )
        assert (result.points_team0, result.points_team1) == (
            sum(g.score[0] for g in outcome.games),
            sum(g.score[1] for g in outcome.games),
        )
        assert [(v.vaca, v.winner_team, (v.games0, v.games1)) for v in details.vacas] == [
            (v.vaca, v.winner, v.games) for v in outcome.vaca_results
        ]
        assert result.faults == FAULTS
        assert result.decision_seconds[0] == {"seat": 0, "count": 3, "median": 0.02, "p95": 0.03, "max": 0.03}
        assert result.decision_seconds[2] == {"seat": 2, "count": 0, "median": None, "p95": None, "max": None}
        assert repo.get_replay(session, match_ids[0]) == record
        stored = session.exec(select(Replay)).one()
        assert stored.format == "mus-arena/replay/v1" and stored.size > len(stored.data)


def test_the_stored_replay_replays_to_the_stored_result(engine: Engine, match_ids: list[int]) -> None:
    with session_scope(engine) as session:
        assert finish(session, match_ids[0])
    with session_scope(engine) as session:
        replayed = replay_record(repo.get_replay(session, match_ids[0]))
        details = repo.get_match_details(session, match_ids[0])
    assert replayed.outcome is not None
    assert replayed.outcome.winner == details.result.winner_team
    assert [g.score for g in replayed.outcome.games] == [(g.score0, g.score1) for g in details.games]


def test_recording_a_finished_match_again_is_a_no_op(engine: Engine, match_ids: list[int]) -> None:
    outcome, record = _claim(engine, match_ids[0])
    with session_scope(engine) as session:
        assert repo.record_result(session, match_ids[0], "host:1", outcome, record, FAULTS, DECISIONS)
    before = row_counts(engine)
    with session_scope(engine) as session:
        assert not repo.record_result(session, match_ids[0], "host:2", outcome, record, [], [])
        assert repo.get_match(session, match_ids[0]).worker == "host:1"
    assert row_counts(engine) == before
    assert before["match_result"] == before["replay"] == 1


def test_a_result_that_lost_the_race_is_rolled_back_whole(
    engine: Engine, match_ids: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The early "already finished?" check passes for both writers; the UNIQUE key stops the second."""
    outcome, record = _claim(engine, match_ids[0])
    with session_scope(engine) as late:
        running = repo_results._match_and_result(late, match_ids[0])  # read while the match was still running
        late.rollback()
        with session_scope(engine) as first:
            assert repo.record_result(first, match_ids[0], "host:1", outcome, record, FAULTS, DECISIONS)
        monkeypatch.setattr(repo_results, "_match_and_result", lambda session, match_id: running)
        assert not repo.record_result(late, match_ids[0], "host:2", outcome, record, [], [])
    counts = row_counts(engine)
    assert (counts["match_result"], counts["replay"], counts["game_result"]) == (1, 1, len(outcome.games))


def test_two_workers_recording_at_once_write_one_result(engine: Engine, match_ids: list[int]) -> None:
    outcome, record = _claim(engine, match_ids[0])
    barrier = threading.Barrier(2)
    results: list[bool] = []
    errors: list[BaseException] = []

    def record_it(worker: str) -> None:
        try:
            with session_scope(engine) as session:
                barrier.wait()
                results.append(repo.record_result(session, match_ids[0], worker, outcome, record, FAULTS, DECISIONS))
        except BaseException as error:  # reported in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=record_it, args=(f"host:{n}",)) for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(results) == [False, True]
    assert row_counts(engine)["match_result"] == 1


def test_the_unique_key_refuses_a_second_result_row(engine: Engine, match_ids: list[int]) -> None:
    with session_scope(engine) as session:
        assert finish(session, match_ids[0])
    with pytest.raises(IntegrityError), Session(engine) as session:
        stored = session.exec(select(MatchResult)).one()
        session.add(MatchResult(**stored.model_dump(exclude={"id"})))
        session.commit()


def test_a_forfeit_is_stored_with_the_unfinished_game_and_vaca_unwon(engine: Engine, match_ids: list[int]) -> None:
    _claim(engine, match_ids[0])
    with session_scope(engine) as session:
        outcome, record = forfeited(repo.get_match(session, match_ids[0]).seed)
        faults = [{"seat": 1, "cause": "timeout"}] * 3
        assert repo.record_result(session, match_ids[0], "host:1", outcome, record, faults, [])
        details = repo.get_match_details(session, match_ids[0])
    assert details.result.termination == "forfeit"
    assert details.games[-1].winner_team is None and details.games[-1].termination == "forfeit"
    assert details.vacas[-1].winner_team is None
    assert (details.result.games_team0, details.result.games_team1) == (
        sum(g.winner == 0 for g in outcome.games),
        sum(g.winner == 1 for g in outcome.games),
    )
    assert details.result.faults == [{"seat": 1, "cause": "timeout", "detail": ""}] * 3


def test_faults_and_incidents_are_stored_apart_each_in_order(engine: Engine, match_ids: list[int]) -> None:
    _claim(engine, match_ids[0])
    with session_scope(engine) as session:
        outcome, record = forfeited(repo.get_match(session, match_ids[0]).seed)
        faults = [{"seat": 1, "cause": "timeout"}] * 3
        incidents = [{"seat": 1, "cause": "crash", "detail": "exit 1"}, {"seat": 3, "cause": "disconnect"}]
        assert repo.record_result(session, match_ids[0], "host:1", outcome, record, faults, [], incidents=incidents)
        details = repo.get_match_details(session, match_ids[0])
        league = repo.get_league(session, details.match.league_id)
        (finished,) = repo.league_results(session, league)
    assert details.result.faults == [{"seat": 1, "cause": "timeout", "detail": ""}] * 3
    assert details.result.incidents == [
        {"seat": 1, "cause": "crash", "detail": "exit 1"},
        {"seat": 3, "cause": "disconnect", "detail": ""},
    ]
    assert finished.to_json()["faults"] == details.result.faults
    assert finished.to_json()["incidents"] == details.result.incidents


def test_a_fault_cause_among_the_incidents_is_refused(engine: Engine, match_ids: list[int]) -> None:
    outcome, record = _claim(engine, match_ids[0])
    with session_scope(engine) as session, pytest.raises(InvalidInput, match="incidents have one of"):
        repo.record_result(
            session, match_ids[0], "host:1", outcome, record, [], [], incidents=[{"seat": 0, "cause": "timeout"}]
        )


def test_an_outcome_mapping_is_stored_like_the_outcome(engine: Engine, match_ids: list[int]) -> None:
    outcome, record = _claim(engine, match_ids[0])
    with session_scope(engine) as session:
        assert repo.record_result(session, match_ids[0], "host:1", repo.outcome_record(outcome), record, [], [])
        games = session.exec(select(GameResult).order_by(sa.column("vaca"), sa.column("game"))).all()
        assert [(g.vaca, g.game, g.winner_team) for g in games] == [(g.vaca, g.game, g.winner) for g in outcome.games]
        assert len(session.exec(select(VacaResult)).all()) == len(outcome.vaca_results)


def _text(record: dict[str, Any]) -> str:
    """A record as the referee writes it (`dumps_record`), NaN let through as Python's json writes it."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def test_a_replay_given_as_the_referees_text_is_stored_as_is(engine: Engine, match_ids: list[int]) -> None:
    """A worker hands on the text the referee wrote, not written again: the stored bytes are that text's."""
    outcome, record = _claim(engine, match_ids[0])
    text = _text(record)
    with session_scope(engine) as session:
        assert repo.record_result(session, match_ids[0], "host:1", outcome, text, FAULTS, DECISIONS)
    with session_scope(engine) as session:
        stored = session.exec(select(Replay)).one()
        assert zlib.decompress(stored.data).decode() == text and stored.size == len(text.encode())
        assert repo.get_replay(session, match_ids[0]) == record


def _broken_outcome(outcome: Any) -> dict[str, Any]:
    data = repo.outcome_record(outcome)
    data["games"] = [*data["games"], data["games"][0]]
    return data


BAD_RECORDS: dict[str, tuple[Any, str]] = {
    "winner not a team": (lambda o, r: ({**repo.outcome_record(o), "winner": 2}, r, [], []), "team"),
    "unknown termination": (
        lambda o, r: ({**repo.outcome_record(o), "termination": "boredom"}, r, [], []),
        "termination|boredom",
    ),
    "game listed twice": (lambda o, r: (_broken_outcome(o), r, [], []), "game twice"),
    "no winner field": (
        lambda o, r: ({k: v for k, v in repo.outcome_record(o).items() if k != "winner"}, r, [], []),
        "lacks the field 'winner'",
    ),
    "no games": (lambda o, r: ({**repo.outcome_record(o), "games": []}, r, [], []), "no games"),
    "replay of another seed": (lambda o, r: (o, {**r, "seed": r["seed"] + 1}, [], []), "seed"),
    "replay without format": (lambda o, r: (o, {k: v for k, v in r.items() if k != "format"}, [], []), "format"),
    "replay not JSON": (lambda o, r: (o, {**r, "extra": object()}, [], []), "not JSON"),
    "replay text of another seed": (lambda o, r: (o, _text({**r, "seed": r["seed"] + 1}), [], []), "seed"),
    "replay text not JSON": (lambda o, r: (o, _text(r)[:-1], [], []), "not JSON"),
    "replay text not an object": (lambda o, r: (o, json.dumps([r]), [], []), "not a JSON object"),
    "replay text with NaN": (lambda o, r: (o, _text({**r, "extra": math.nan}), [], []), "NaN is not JSON"),
    "fault on seat 4": (lambda o, r: (o, r, [{"seat": 4, "cause": "timeout"}], []), "seat"),
    "fault without cause": (lambda o, r: (o, r, [{"seat": 1}], []), "cause"),
    "an incident among the faults": (lambda o, r: (o, r, [{"seat": 1, "cause": "crash"}], []), "faults have one of"),
    "negative decision time": (lambda o, r: (o, r, [], [[-1.0]]), "decision time"),
    "five seats of times": (lambda o, r: (o, r, [], [[], [], [], [], []]), "four seats"),
}


@pytest.mark.parametrize("case", list(BAD_RECORDS))
def test_bad_results_are_refused_and_write_nothing(engine: Engine, match_ids: list[int], case: str) -> None:
    make_arguments, message = BAD_RECORDS[case]
    outcome, record = _claim(engine, match_ids[0])
    before = row_counts(engine)
    arguments = make_arguments(outcome, record)
    with session_scope(engine) as session, pytest.raises(InvalidInput, match=message):
        repo.record_result(session, match_ids[0], "host:1", *arguments)
    assert row_counts(engine) == before
    with session_scope(engine) as session:
        assert repo.get_match(session, match_ids[0]).status is MatchStatus.RUNNING


def test_league_results_list_finished_matches_in_finishing_order(engine: Engine, match_ids: list[int]) -> None:
    with session_scope(engine) as session:
        assert finish(session, match_ids[1])
        assert finish(session, match_ids[0])
        results = repo.league_results(session, "spring")
        entrants = {e.bot_name: e.version_id for e in repo.league_entrants(session, "spring")}
    assert [r.match_id for r in results] == [match_ids[1], match_ids[0]]
    later = results[1]
    assert (later.team0_bot, later.team1_bot) == ("alpha", "bravo")
    assert (later.team0_version_id, later.team1_version_id) == (entrants["alpha"], entrants["bravo"])
    assert later.duplicate_pair == results[0].duplicate_pair == 0 and later.seed == results[0].seed
    assert later.faults == tuple(FAULTS)
    assert later.finished_at.utcoffset() is not None
    exported = later.to_json()
    assert exported["teams"][0] == {"bot": "alpha", "version": 1, "version_id": entrants["alpha"]}
    assert exported["finished_at"].endswith("+00:00")


def test_replay_ids_and_missing_replays(engine: Engine, match_ids: list[int]) -> None:
    with session_scope(engine) as session:
        assert finish(session, match_ids[1])
        assert repo.replay_match_ids(session, "spring") == [match_ids[1]]
        with pytest.raises(repo.NotFound, match="has not finished"):
            repo.get_replay(session, match_ids[0])
        with pytest.raises(repo.NotFound, match="no match with id 9999"):
            repo.get_replay(session, 9999)
