"""Deals nobody can know in advance: seeds from the league's secret, a fresh deal for a replayed match, deal modes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.db.factories import TEST_SECRET, add_bots, duplicate_plan, finish, make_league, played
from workers.db import repo
from workers.db.models import DealMode, LeagueStatus, Match, MatchStatus
from workers.db.session import session_scope
from workers.tournament.deals import commitment, derived_seed

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NAMES = ["alpha", "bravo", "charlie"]


@pytest.fixture
def match_ids(engine: Engine, tmp_path: Path) -> list[int]:
    """A duplicate league of three hosted bots: three pairs, six queued matches."""
    with session_scope(engine) as session:
        add_bots(session, tmp_path, *NAMES)
        league = make_league(session, "spring", NAMES, matches=duplicate_plan(NAMES))
        return repo.unfinished_match_ids(session, league.id or 0)


def matches(engine: Engine) -> list[Match]:
    with session_scope(engine) as session:
        return repo.list_matches(session, "spring")


def expected_seed(match: Match, deal: int) -> int:
    return derived_seed(
        TEST_SECRET, league="spring", duplicate_pair=match.duplicate_pair, index=match.index, deal=deal, pairings=3
    )


def test_every_seed_derives_from_the_secret_and_only_its_commitment_is_stored_in_clear(
    engine: Engine, match_ids: list[int]
) -> None:
    with session_scope(engine) as session:
        league = repo.get_league(session, "spring")
        assert league.commitment == commitment(TEST_SECRET) and league.secret == TEST_SECRET.hex()
        assert league.deal_mode is DealMode.DUPLICATE and league.sandbox is True
        assert repo.revealed_secret(league) is None, "not before the league has finished"
    rows = matches(engine)
    assert all(row.seed == expected_seed(row, 0) and row.deal == 0 for row in rows)
    assert rows[0].seed == rows[1].seed != rows[2].seed, "twins share a deal; pairs do not"
    with session_scope(engine) as session:
        league = repo.get_league(session, "spring")
        assert all(repo.check_league_seed(session, league, row, TEST_SECRET.hex()) is None for row in rows)
        assert repo.check_league_seed(session, league, rows[0], bytes(32).hex()) is not None, "another secret"


def test_a_fresh_secret_per_league_by_default(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as session:
        add_bots(session, tmp_path, "alpha", "bravo")
        first = make_league(session, "one", ["alpha", "bravo"], secret=None)
        second = make_league(session, "two", ["alpha", "bravo"], secret=None)
        assert first.secret != second.secret and first.secret is not None and len(first.secret) == 64
        seeds = {row.seed for name in ("one", "two") for row in repo.list_matches(session, name)}
    assert len(seeds) == 2, "two leagues, one pair each: two different deals"


def test_a_voided_match_and_its_unplayed_twin_move_to_the_same_fresh_deal(engine: Engine, match_ids: list[int]) -> None:
    before = matches(engine)
    with session_scope(engine) as session:
        assert repo.claim_match(session, match_ids[0], "host:1", 30.0) is not None
        assert repo.void_match(session, match_ids[0], "host:1", "the broker went away")
    first, twin, other = matches(engine)[:3]
    assert first.deal == twin.deal == 1 and first.seed == twin.seed == expected_seed(first, 1)
    assert first.seed != before[0].seed, "the bots of the voided attempt never see its deal again"
    assert (other.deal, other.seed) == (0, before[2].seed), "other pairs keep their deals"
    assert first.status is MatchStatus.QUEUED and twin.status is MatchStatus.QUEUED


def test_a_voided_match_whose_twin_finished_plays_a_fresh_deal_alone(engine: Engine, match_ids: list[int]) -> None:
    with session_scope(engine) as session:
        assert finish(session, match_ids[1])
        assert repo.claim_match(session, match_ids[0], "host:1", 30.0) is not None
        assert repo.void_match(session, match_ids[0], "host:1", "the broker went away")
    voided, twin = matches(engine)[:2]
    assert (twin.deal, twin.status) == (0, MatchStatus.FINISHED), "the twin's result stands on its deal"
    assert voided.deal == 1 and voided.seed == expected_seed(voided, 1) != twin.seed
    with session_scope(engine) as session:
        assert finish(session, match_ids[0])
        results = {result.match_id: result for result in repo.league_results(session, "spring")}
    assert (results[match_ids[0]].deal, results[match_ids[1]].deal) == (1, 0)


def test_a_match_refused_before_its_bots_started_keeps_its_deal_and_its_twin(
    engine: Engine, match_ids: list[int]
) -> None:
    """A machine without a bot's folder (or without a sandbox) refuses a match before any process saw its deal: a
    fresh deal would only part it from its twin, whose result stands on the deal they share."""
    with session_scope(engine) as session:
        assert finish(session, match_ids[1])
        assert repo.claim_match(session, match_ids[0], "far:1", 30.0) is not None
        assert repo.void_match(session, match_ids[0], "far:1", "no folder here", dealt=False)
    refused, twin = matches(engine)[:2]
    assert (refused.deal, refused.status) == (0, MatchStatus.QUEUED) and refused.seed == twin.seed
    with session_scope(engine) as session:
        assert finish(session, match_ids[0], "near:1")
        results = {result.match_id: result for result in repo.league_results(session, "spring")}
    assert results[match_ids[0]].deal == results[match_ids[1]].deal == 0


def test_a_voided_match_whose_twin_is_being_played_leaves_the_twin_alone(engine: Engine, match_ids: list[int]) -> None:
    with session_scope(engine) as session:
        # Twins never run at once, unless a worker's lease expired and it voids its match after all.
        assert repo.claim_match(session, match_ids[0], "host:1", 30.0, now=NOW) is not None
        assert repo.claim_match(session, match_ids[1], "host:2", 30.0, now=NOW + timedelta(seconds=31)) is not None
        assert repo.void_match(session, match_ids[0], "host:1", "lost the referee")
        voided, twin = repo.list_matches(session, "spring")[:2]
        assert (voided.deal, twin.deal) == (1, 0)
        # The twin's worker still records the deal it played.
        assert finish_claimed(session, match_ids[1], "host:2", twin.seed)
        # Voided again: past both deals, never back to one a bot has seen.
        assert repo.claim_match(session, match_ids[0], "host:1", 30.0) is not None
        assert repo.void_match(session, match_ids[0], "host:1", "lost the referee again")
        assert repo.get_match(session, match_ids[0]).deal == 2


def finish_claimed(session: Session, match_id: int, worker: str, seed: int) -> bool:
    """Record a result played on `seed` for a match this worker claimed (perhaps long ago)."""
    outcome, record = played(seed)
    return repo.record_result(session, match_id, worker, outcome, record, [], [])


def test_an_expired_lease_requeues_the_match_on_a_fresh_deal_and_its_late_result_is_dropped(
    engine: Engine, match_ids: list[int]
) -> None:
    with session_scope(engine) as session:
        old_seed = repo.get_match(session, match_ids[2]).seed
        assert repo.claim_match(session, match_ids[2], "host:1", 30.0, now=NOW) is not None
        assert repo.requeue_expired(session, now=NOW + timedelta(seconds=31)) == 1
        moved = repo.get_match(session, match_ids[2])
        assert moved.deal == 1 and moved.seed != old_seed and moved.status is MatchStatus.QUEUED
        assert repo.get_match(session, match_ids[3]).deal == 1, "its unplayed twin moves with it"
        # The worker that lost its lease comes back with the old deal's result: not this deal's, not written.
        assert not finish_claimed(session, match_ids[2], "host:1", old_seed)
        assert repo.get_match(session, match_ids[2]).status is MatchStatus.QUEUED


def test_taking_over_an_expired_lease_plays_a_fresh_deal(engine: Engine, match_ids: list[int]) -> None:
    with session_scope(engine) as session:
        old_seed = repo.get_match(session, match_ids[4]).seed
        assert repo.claim_match(session, match_ids[4], "host:1", 30.0, now=NOW) is not None
        taken = repo.claim_match(session, match_ids[4], "host:2", 30.0, now=NOW + timedelta(seconds=31))
        assert taken is not None and taken.deal == 1 and taken.seed != old_seed and taken.worker == "host:2"
        assert not finish_claimed(session, match_ids[4], "host:1", old_seed), "the old holder's result is stale"
        assert finish_claimed(session, match_ids[4], "host:2", taken.seed)


def test_a_league_with_a_remote_entrant_plays_independent_deals_by_default(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as session:
        add_bots(session, tmp_path, "alpha")
        repo.add_remote_bot(session, "faraway")
        league = make_league(session, "spring", ["alpha", "faraway"])
        assert league.deal_mode is DealMode.INDEPENDENT
        rows = repo.list_matches(session, "spring")
        assert all(row.duplicate_pair is None for row in rows)
        assert rows[0].seed != rows[1].seed, "every match its own deal"
        forced = make_league(session, "summer", ["alpha", "faraway"], deal_mode="duplicate")
        assert forced.deal_mode is DealMode.DUPLICATE
        twins = repo.list_matches(session, "summer")
        assert twins[0].seed == twins[1].seed and twins[0].duplicate_pair == 0


def test_hosted_bots_play_duplicate_deals_by_default_and_independent_on_request(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as session:
        add_bots(session, tmp_path, "alpha", "bravo")
        assert make_league(session, "spring", ["alpha", "bravo"]).deal_mode is DealMode.DUPLICATE
        league = make_league(session, "summer", ["alpha", "bravo"], deal_mode=DealMode.INDEPENDENT, sandbox=False)
        assert league.deal_mode is DealMode.INDEPENDENT and league.sandbox is False
        assert [row.duplicate_pair for row in repo.list_matches(session, "summer")] == [None, None]


def test_the_secret_is_revealed_once_the_league_has_finished(engine: Engine, match_ids: list[int]) -> None:
    with session_scope(engine) as session:
        for match_id in match_ids:
            assert finish(session, match_id)
        assert repo.finish_league_if_complete(session, "spring")
        league = repo.get_league(session, "spring")
        assert league.status is LeagueStatus.FINISHED and repo.revealed_secret(league) == TEST_SECRET.hex()
