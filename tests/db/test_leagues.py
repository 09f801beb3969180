"""Leagues: created with entrants and every match in one transaction, or not at all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from tests.db.factories import TEST_SECRET, add_bots, duplicate_plan, finish, make_league, played, row_counts
from workers.db import repo
from workers.db.errors import Conflict, DbError, InvalidInput, NotFound
from workers.db.models import LeagueStatus, MatchStatus
from workers.db.session import session_scope
from workers.tournament.deals import derived_seed


def test_creating_a_league_writes_it_with_entrants_and_matches(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as session:
        versions = add_bots(session, tmp_path, "alpha", "bravo", "charlie")
        league = make_league(session, "spring", ["alpha", "bravo", "charlie"])
    assert league.status is LeagueStatus.CREATED
    assert league.rules == {"target_score": 30}
    with session_scope(engine) as session:
        entrants = repo.league_entrants(session, "spring")
        matches = repo.list_matches(session, "spring")
        assert [(e.bot_name, e.version_id) for e in entrants] == [(n, v.id) for n, v in versions.items()]
        assert [m.index for m in matches] == list(range(6))
        first, second = matches[0], matches[1]
        assert (first.team0_version_id, first.team1_version_id) == (versions["alpha"].id, versions["bravo"].id)
        assert (second.team0_version_id, second.team1_version_id) == (versions["bravo"].id, versions["alpha"].id)
        assert first.seed == second.seed and first.duplicate_pair == second.duplicate_pair == 0
        assert all(m.status is MatchStatus.QUEUED and m.attempt == 0 for m in matches)
        assert repo.league_progress(session, "spring") == {
            "total": 6,
            "queued": 6,
            "running": 0,
            "finished": 0,
            "failed": 0,
        }
        assert [lg.name for lg in repo.list_leagues(session)] == ["spring"]


def test_only_options_that_differ_from_the_defaults_are_stored(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as session:
        add_bots(session, tmp_path, "alpha", "bravo")
        league = make_league(
            session, "spring", ["alpha", "bravo"], options={"target_score": 40, "decision_timeout_s": 2.5}
        )
    assert league.rules == {"decision_timeout_s": 2.5}


def test_a_league_with_an_unknown_bot_writes_nothing(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as session:
        add_bots(session, tmp_path, "alpha", "bravo")
    before = row_counts(engine)
    # The caller even swallows the error and commits: nothing may have been written by then.
    with session_scope(engine) as session, pytest.raises(NotFound, match=r"unknown bot.*ghost"):
        make_league(session, "spring", ["alpha", "bravo", "ghost"])
    assert row_counts(engine) == before


BAD_PLANS: dict[str, tuple[dict[str, Any], type[DbError], str]] = {
    "team not entered": (
        {"matches": [{"team0": "alpha", "team1": "zulu", "seed": 1, "duplicate_pair": None}]},
        InvalidInput,
        "not an entrant",
    ),
    "pair without the teams swapped": (
        {
            "matches": [
                {"team0": "alpha", "team1": "bravo", "duplicate_pair": 0},
                {"team0": "alpha", "team1": "bravo", "duplicate_pair": 0},
            ]
        },
        InvalidInput,
        "swap the teams",
    ),
    "legacy league seed too large": ({"seed": 2**64 - 1}, InvalidInput, "seed"),
    "no team": ({"matches": [{"team0": "alpha"}]}, InvalidInput, "lacks team1"),
    "unknown deal mode": ({"deal_mode": "shuffled"}, InvalidInput, "unknown deal mode"),
    "short secret": ({"secret": b"x" * 31}, InvalidInput, "32 bytes"),
    "no matches": ({"matches": []}, InvalidInput, "at least one match"),
    "unknown option": ({"options": {"target_scroe": 30}}, InvalidInput, "unknown rules option"),
    "bad option value": ({"options": {"target_score": 0}}, InvalidInput, "target_score"),
    "bot entered twice": ({"bot_names": ["alpha", "bravo", "alpha"]}, InvalidInput, "entered twice"),
    "no pairing count": ({"matches_per_pairing": 0}, InvalidInput, "matches_per_pairing"),
    "no absence limit": ({"absent_limit_s": 0}, InvalidInput, "absent_limit_s"),
    "endless absence limit": ({"absent_limit_s": 1e308}, InvalidInput, "at most 86400 seconds"),
}


@pytest.mark.parametrize("case", list(BAD_PLANS))
def test_a_bad_league_is_refused_and_writes_nothing(engine: Engine, tmp_path: Path, case: str) -> None:
    overrides, error, message = BAD_PLANS[case]
    with session_scope(engine) as session:
        add_bots(session, tmp_path, "alpha", "bravo")
    before = row_counts(engine)
    with session_scope(engine) as session, pytest.raises(error, match=message):
        make_league(session, "spring", ["alpha", "bravo"], **overrides)
    assert row_counts(engine) == before


def test_league_names_are_unique(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as session:
        add_bots(session, tmp_path, "alpha", "bravo")
        make_league(session, "spring", ["alpha", "bravo"])
    with session_scope(engine) as session, pytest.raises(Conflict, match="already exists"):
        make_league(session, "spring", ["alpha", "bravo"])


def test_progress_and_league_status_follow_the_matches(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as session:
        add_bots(session, tmp_path, "alpha", "bravo")
        league = make_league(session, "spring", ["alpha", "bravo"], matches=duplicate_plan(["alpha", "bravo"]))
        league_id = league.id or 0
        assert repo.start_league(session, league_id).status is LeagueStatus.RUNNING
    with session_scope(engine) as session:
        first, second = repo.unfinished_match_ids(session, league_id)
        assert finish(session, first)
        assert repo.claim_match(session, second, "host:2", 60.0) is not None
        assert repo.league_progress(session, league_id) == {
            "total": 2,
            "queued": 0,
            "running": 1,
            "finished": 1,
            "failed": 0,
        }
        assert repo.unfinished_match_ids(session, league_id) == [second]
        assert not repo.finish_league_if_complete(session, league_id)
        outcome, record = played(repo.get_match(session, second).seed)
        assert repo.record_result(session, second, "host:2", outcome, record, [], [])
    with session_scope(engine) as session:
        assert repo.finish_league_if_complete(session, league_id)
        finished = repo.get_league(session, "spring")
        assert finished.status is LeagueStatus.FINISHED and finished.finished_at is not None
        assert repo.start_league(session, league_id).status is LeagueStatus.FINISHED


def test_unknown_leagues_are_reported(engine: Engine) -> None:
    with session_scope(engine) as session:
        with pytest.raises(NotFound, match="no league named 'winter'"):
            repo.league_progress(session, "winter")
        with pytest.raises(NotFound, match="no league with id 99"):
            repo.get_league(session, 99)


def test_match_setup_gives_a_worker_everything_to_play(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as session:
        add_bots(session, tmp_path, "alpha")
        repo.add_remote_bot(session, "faraway")
        league = make_league(session, "spring", ["alpha", "faraway"], options={"time_bank_s": 5.0})
        match_id = repo.unfinished_match_ids(session, league.id or 0)[1]
        setup = repo.match_setup(session, match_id)
    # A remote entrant: independent deals by default, each match its own seed from the league's secret.
    expected = derived_seed(TEST_SECRET, league="spring", duplicate_pair=None, index=1, deal=0, pairings=1)
    assert (setup.league_name, setup.index, setup.seed, setup.duplicate_pair) == ("spring", 1, expected, None)
    assert setup.rules == {"time_bank_s": 5.0} and setup.absent_limit_s == 120.0
    assert setup.status is MatchStatus.QUEUED and setup.attempt == 0
    team0, team1 = setup.teams
    assert (team0.bot_name, team0.remote, team0.command) == ("faraway", True, ())
    assert (team1.bot_name, team1.remote, team1.command) == ("alpha", False, ("python", "bot.py"))
    assert team1.folder == str((tmp_path / "alpha").resolve())


def test_queued_matches_lists_only_the_queued_ones_in_plan_order_with_their_attempts(
    engine: Engine, tmp_path: Path
) -> None:
    with session_scope(engine) as session:
        add_bots(session, tmp_path, "alpha", "bravo", "charlie")
        make_league(session, "spring", ["alpha", "bravo", "charlie"])
        matches = repo.list_matches(session, "spring")
        assert repo.claim_match(session, matches[0].id or 0, "w:1", 60.0) is not None
        queued = repo.queued_matches(session, "spring")
        rest = repo.list_matches(session, "spring")[1:]
        assert [match.id for match in queued] == [match.id for match in rest], "the claimed one is not queued"
        assert [(match.attempt, match.index, match.duplicate_pair) for match in queued] == [
            (match.attempt, match.index, match.duplicate_pair) for match in rest
        ]


def test_a_worker_finishes_the_running_leagues_whose_matches_have_all_finished(engine: Engine, tmp_path: Path) -> None:
    """Played by workers that no `mus league run` followed, a league stayed 'running', its secret unpublished (an
    operator's review, stop 35): a worker's reclaimer now finishes it (`finish_complete_leagues`)."""
    with session_scope(engine) as session:
        add_bots(session, tmp_path, "alpha", "bravo")
        for name in ("done", "half"):
            make_league(session, name, ["alpha", "bravo"])
            repo.start_league(session, name)
    with session_scope(engine) as session:
        for name, played_here in (("done", 2), ("half", 1)):
            for match_id in repo.unfinished_match_ids(session, name)[:played_here]:
                assert finish(session, match_id)
    with session_scope(engine) as session:
        assert repo.finish_complete_leagues(session) == ["done"]
    with session_scope(engine) as session:
        statuses = {name: repo.get_league(session, name).status for name in ("done", "half")}
        assert statuses == {"done": LeagueStatus.FINISHED, "half": LeagueStatus.RUNNING}
        assert repo.finish_complete_leagues(session) == []
