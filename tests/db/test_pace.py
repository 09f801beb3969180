"""What a worker reads before it leaves a match for later (`repo.league_pace`), and how it gives a claimed match
back (`repo.release_claim`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from tests.db.factories import add_bots, duplicate_plan, finish, make_league
from workers.db import repo
from workers.db.models import Match, MatchStatus
from workers.db.session import session_scope

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def halves(engine: Engine, tmp_path: Path) -> dict[int, list[Match]]:
    """A league of four bots (six duplicate pairs): its matches by half, in plan order."""
    names = ["alpha", "bravo", "charlie", "delta"]
    with session_scope(engine) as session:
        add_bots(session, tmp_path, *names)
        league = make_league(session, "spring", names, matches=duplicate_plan(names))
        matches = repo.list_matches(session, league.id or 0)
        session.expunge_all()
    by_half: dict[int, list[Match]] = {0: [], 1: []}
    for match in matches:
        by_half[repo.half_of(match.team0_version_id, match.team1_version_id)].append(match)
    assert len(by_half[0]) == len(by_half[1]) == 6
    return by_half


def ids(matches: list[Match]) -> list[int]:
    return [match.id or 0 for match in matches]


def finished_at(session: Session, match_id: int, seconds: float, ended: datetime, worker: str = "host:1") -> None:
    """Finish the match as `worker`, as if it had been played for `seconds` up to `ended`."""
    assert finish(session, match_id, worker)
    session.execute(
        sa.update(Match)
        .where(col(Match.id) == match_id)
        .values(started_at=ended - timedelta(seconds=seconds), finished_at=ended)
    )
    session.commit()


def test_before_any_result_the_pace_counts_the_half_and_knows_no_match_time(
    engine: Engine, halves: dict[int, list[Match]]
) -> None:
    first, *rest = ids(halves[1])
    with session_scope(engine) as session:
        pace = repo.league_pace(session, first, "me:1", now=NOW)
    assert pace == repo.Pace(match_s=None, twin_elapsed_s=None, waiting=len(rest), others=0, free_in_s=None)


def test_the_pace_is_the_median_of_the_last_results_and_the_running_twin_is_timed(
    engine: Engine, halves: dict[int, list[Match]]
) -> None:
    half0, half1 = ids(halves[0]), ids(halves[1])
    with session_scope(engine) as session:
        for match_id, seconds in zip(half0[:3], (0.1, 0.3, 5.0), strict=True):
            finished_at(session, match_id, seconds, NOW - timedelta(minutes=5))
        # The twin of half1's match of pair 4 is being played, for 0.05 s now.
        twin = next(match for match in halves[0] if match.duplicate_pair == halves[1][4].duplicate_pair)
        assert repo.claim_match(session, twin.id or 0, "host:2", 30.0, now=NOW - timedelta(seconds=0.05))
        pace = repo.league_pace(session, half1[4], "me:1", now=NOW)
    assert pace.match_s == pytest.approx(0.3)
    assert pace.twin_elapsed_s == pytest.approx(0.05)
    assert pace.waiting == 5, "the other queued matches of half 1"
    assert pace.others == 0 and pace.free_in_s is None, "host:2 plays half 0, and half 0's results are old"


def test_the_other_workers_are_those_playing_the_half_now_with_both_of_its_bots(
    engine: Engine, halves: dict[int, list[Match]]
) -> None:
    """Who has the match's processes warm, as far as the database tells: a worker playing its half, now or a moment
    ago, that has played both of its bot versions in that half."""
    target, *rest = halves[1]
    with_x = [m.id or 0 for m in rest if target.team0_version_id in (m.team0_version_id, m.team1_version_id)]
    with_y = [m.id or 0 for m in rest if target.team1_version_id in (m.team0_version_id, m.team1_version_id)]
    assert len(with_x) == len(with_y) == 2
    half0 = ids(halves[0])
    with session_scope(engine) as session:
        assert repo.claim_match(session, target.id or 0, "me:1", 30.0, now=NOW)
        finished_at(session, with_x[0], 1.0, NOW - timedelta(seconds=1), worker="warm:1")
        finished_at(session, with_y[0], 1.0, NOW - timedelta(seconds=1.5), worker="warm:1")
        finished_at(session, with_x[1], 1.0, NOW - timedelta(seconds=1), worker="one-bot:1")
        finished_at(session, half0[0], 1.0, NOW - timedelta(seconds=1), worker="other-half:1")
        pace = repo.league_pace(session, target.id or 0, "me:1", now=NOW)
        assert pace.match_s == pytest.approx(1.0)
        assert (pace.others, pace.free_in_s) == (1, 0.0), "warm:1, between matches; not one-bot, other-half, me"
        # warm:1 begins a match of the half: it is free once that match has had its time at the pace ...
        assert repo.claim_match(session, with_y[1], "warm:1", 30.0, now=NOW - timedelta(seconds=0.25))
        assert repo.league_pace(session, target.id or 0, "me:1", now=NOW).free_in_s == pytest.approx(0.75)
        # ... and past it, in half its time so far: a match past the pace is likely a long one.
        later = NOW + timedelta(seconds=3.75)
        assert repo.league_pace(session, target.id or 0, "me:1", now=later).free_in_s == pytest.approx(2.0)
        # Once its lease has expired, it plays nothing.
        expired = NOW + timedelta(seconds=31)
        assert repo.league_pace(session, target.id or 0, "me:1", now=expired).others == 0


def test_a_released_claim_is_queued_again_as_before_and_only_its_holder_can_release_it(
    engine: Engine, halves: dict[int, list[Match]]
) -> None:
    match_id = ids(halves[0])[0]
    with session_scope(engine) as session:
        assert repo.claim_match(session, match_id, "me:1", 30.0) is not None
        assert not repo.release_claim(session, match_id, "someone-else:1")
        assert repo.release_claim(session, match_id, "me:1")
        match = repo.get_match(session, match_id)
        assert (match.status, match.attempt, match.worker, match.lease_expires_at, match.started_at) == (
            MatchStatus.QUEUED,
            0,
            None,
            None,
            None,
        )
        assert not repo.release_claim(session, match_id, "me:1"), "no longer held"
        claimed = repo.claim_match(session, match_id, "other:1", 30.0)
        assert claimed is not None and claimed.attempt == 1, "the released claim was no attempt"
