"""The two matches of a duplicate pair never run at the same time: a twin is not claimable while the other runs."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from tests.db.factories import add_bots, duplicate_plan, finish, make_league
from workers.db import repo
from workers.db.models import Match, MatchStatus
from workers.db.session import session_scope

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
RACES = 25
"""How many times two workers race for the two twins of a pair at the same instant."""


@pytest.fixture
def pairs(engine: Engine, tmp_path: Path) -> list[tuple[int, int]]:
    """A league of four bots: six duplicate pairs, as (first twin, second twin) ids."""
    names = ["alpha", "bravo", "charlie", "delta"]
    with session_scope(engine) as session:
        add_bots(session, tmp_path, *names)
        league = make_league(session, "spring", names, matches=duplicate_plan(names))
        matches = repo.list_matches(session, league.id or 0)
    by_pair: dict[int, list[int]] = {}
    for match in matches:
        assert match.id is not None and match.duplicate_pair is not None
        by_pair.setdefault(match.duplicate_pair, []).append(match.id)
    return [(ids[0], ids[1]) for _, ids in sorted(by_pair.items())]


def test_a_match_is_not_claimable_while_its_twin_runs_on_a_live_lease(
    engine: Engine, pairs: list[tuple[int, int]]
) -> None:
    first, second = pairs[0]
    with session_scope(engine) as session:
        assert repo.claim_match(session, first, "host:1", 30.0, now=NOW) is not None
        assert repo.claim_match(session, second, "host:2", 30.0, now=NOW + timedelta(seconds=29)) is None
        assert repo.claim_deferred(session, second, now=NOW + timedelta(seconds=29))
        refused = repo.get_match(session, second)
        assert (refused.status, refused.attempt, refused.worker) == (MatchStatus.QUEUED, 0, None)
        # Another pair's matches are not held back.
        assert repo.claim_match(session, pairs[1][0], "host:2", 30.0, now=NOW) is not None


def test_a_match_is_claimable_once_its_twin_has_finished(engine: Engine, pairs: list[tuple[int, int]]) -> None:
    first, second = pairs[0]
    with session_scope(engine) as session:
        assert finish(session, first)
        assert not repo.claim_deferred(session, first)  # finished: nothing to defer
        claimed = repo.claim_match(session, second, "host:2", 30.0)
    assert claimed is not None and claimed.attempt == 1


def test_a_match_is_claimable_once_its_twin_was_voided(engine: Engine, pairs: list[tuple[int, int]]) -> None:
    first, second = pairs[0]
    with session_scope(engine) as session:
        assert repo.claim_match(session, first, "host:1", 30.0) is not None
        assert repo.claim_match(session, second, "host:2", 30.0) is None
        assert repo.void_match(session, first, "host:1", "referee unreachable")
        assert repo.claim_match(session, second, "host:2", 30.0) is not None
        # ... and then the voided twin waits in turn.
        assert repo.claim_match(session, first, "host:1", 30.0) is None
        assert repo.claim_deferred(session, first)


def test_a_twin_whose_lease_expired_no_longer_holds_the_other_back(
    engine: Engine, pairs: list[tuple[int, int]]
) -> None:
    first, second = pairs[0]
    with session_scope(engine) as session:
        assert repo.claim_match(session, first, "host:1", 30.0, now=NOW) is not None
        later = NOW + timedelta(seconds=31)
        assert repo.claim_match(session, second, "host:2", 30.0, now=later) is not None
        # The dead worker's match is taken over only once its twin has ended: it waits as any queued twin.
        assert repo.claim_match(session, first, "host:3", 30.0, now=later) is None
        assert repo.claim_deferred(session, first, now=later)


def test_a_match_held_by_a_live_worker_is_not_deferred(engine: Engine, pairs: list[tuple[int, int]]) -> None:
    first, _ = pairs[0]
    with session_scope(engine) as session:
        assert repo.claim_match(session, first, "host:1", 30.0, now=NOW) is not None
        assert repo.claim_match(session, first, "host:2", 30.0, now=NOW) is None
        assert not repo.claim_deferred(session, first, now=NOW)
        assert repo.claim_deferred(session, first, now=NOW + timedelta(seconds=31))


def test_matches_dealt_on_their_own_never_wait_for_each_other(engine: Engine, tmp_path: Path) -> None:
    names = ["alpha", "bravo"]
    with session_scope(engine) as session:
        add_bots(session, tmp_path, *names)
        league = make_league(session, "solo", names, deal_mode="independent")
        ids = repo.unfinished_match_ids(session, league.id or 0)
        assert all(match.duplicate_pair is None for match in repo.list_matches(session, "solo"))
        assert all(repo.claim_match(session, match_id, f"host:{match_id}", 30.0) is not None for match_id in ids)


def test_of_two_workers_claiming_both_twins_at_the_same_instant_exactly_one_wins(
    engine: Engine, pairs: list[tuple[int, int]]
) -> None:
    """The race the NOT EXISTS alone would lose on PostgreSQL: two UPDATEs of different rows, each checking
    the other's row before the other commits. Each round, two threads with their own sessions (connections)
    claim one twin each, released by a barrier; exactly one may win. The loser's match stays queued."""
    for race in range(RACES):
        first, second = pairs[race % len(pairs)]
        results = _claim_at_once(engine, {first: f"host:{race}a", second: f"host:{race}b"})
        winners = [match_id for match_id, claimed in results.items() if claimed is not None]
        assert len(winners) == 1, f"race {race}: {len(winners)} twins claimed at once"
        with session_scope(engine) as session:
            statuses = {match_id: repo.get_match(session, match_id).status for match_id in (first, second)}
            assert sorted(statuses.values()) == [MatchStatus.QUEUED, MatchStatus.RUNNING]
            # Put the winner back, so the next round on this pair races again.
            winner = repo.get_match(session, winners[0])
            assert winner.worker is not None
            assert repo.void_match(session, winners[0], winner.worker, "next round")


def _claim_at_once(engine: Engine, claims: dict[int, str]) -> dict[int, Match | None]:
    """Claim each match (id: worker) in its own thread and session, all released by a barrier at one instant."""
    barrier = threading.Barrier(len(claims))
    results: dict[int, Match | None] = {}
    errors: list[BaseException] = []

    def claim(match_id: int, worker: str) -> None:
        try:
            with session_scope(engine) as session:
                barrier.wait()
                results[match_id] = repo.claim_match(session, match_id, worker, 30.0)
        except BaseException as error:  # reported in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=claim, args=item) for item in claims.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return results


def test_the_twins_of_every_pair_are_the_two_halves_that_a_worker_pool_keeps_apart(
    engine: Engine, pairs: list[tuple[int, int]]
) -> None:
    """workers.pool plays the two halves with different processes: the twins must never be given the same one."""
    with session_scope(engine) as session:
        for first, second in pairs:
            halves = [
                repo.half_of(match.team0_version_id, match.team1_version_id)
                for match in (repo.get_match(session, first), repo.get_match(session, second))
            ]
            assert sorted(halves) == [0, 1], (first, second, halves)
