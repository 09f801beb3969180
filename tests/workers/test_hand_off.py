"""A worker that has played its own half's queue out leaves the other half's matches to the workers already
playing that half when, at the league's pace, they will reach them before it could have started the pooled
processes they need (workers.play `_hand_off_pause`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa
from sqlmodel import col

from bench.league import BOT_COMMAND, BOT_SCRIPT
from tests.db.factories import finish
from tests.workers.conftest import Deployment
from workers import play
from workers.db import repo
from workers.db.models import Match, MatchStatus, utc_now
from workers.db.session import session_scope
from workers.launcher import BotProgram, sandbox_available
from workers.pool import close_pools


@pytest.fixture(autouse=True)
def fresh_database() -> Iterator[None]:
    """`play.database()` is cached per process: each test has its own deployment's."""
    play.database.cache_clear()
    yield
    play.database.cache_clear()
    close_pools()


class Pool:
    """A worker's pool as the hand-off sees it: what starting a match's processes would cost."""

    def __init__(self, cost_s: float | None) -> None:
        self.cost_s = cost_s

    def start_cost_s(self, programs: tuple[BotProgram, BotProgram], half: int) -> float | None:
        return self.cost_s


def league_by_half(deployment: Deployment, match_s: float = 0.01) -> dict[int, list[int]]:
    """Two persistent instant bots, two duplicate pairs; half 0 already played (`match_s` a match, a minute ago) by
    a worker that has gone; the ids of each half's matches. Another worker has just begun half 1's first match."""
    league_id = deployment.league(
        "pooled",
        ["keeper", "other"],
        4,
        command=BOT_COMMAND,
        folder=BOT_SCRIPT.parent,
        persistent={"keeper", "other"},
        options={"games_to_win_vaca": 1, "vacas_to_win_match": 1},
        sandbox=sandbox_available(),
    )
    with session_scope(deployment.engine) as session:
        halves: dict[int, list[int]] = {0: [], 1: []}
        for match in repo.list_matches(session, league_id):
            halves[repo.half_of(match.team0_version_id, match.team1_version_id)].append(match.id or 0)
        ended = utc_now() - timedelta(minutes=1)
        for match_id in halves[0]:
            assert finish(session, match_id, "gone:1")
            session.execute(
                sa.update(Match)
                .where(col(Match.id) == match_id)
                .values(started_at=ended - timedelta(seconds=match_s), finished_at=ended)
            )
        session.commit()
        assert repo.claim_match(session, halves[1][0], "playing:1", 60.0) is not None
    return halves


@pytest.mark.slow
def test_a_match_that_would_start_processes_is_handed_off_to_the_worker_playing_its_half(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, second = league_by_half(deployment)[1]
    monkeypatch.setattr(play, "existing_pool", lambda limits: Pool(0.5))
    sent: list[tuple[float, bool]] = []
    outcome = play.play_league_match(second, worker="me:1", again=lambda *sending: sent.append(sending))
    assert outcome == "handed_off" and sent == [(0.0, True)]
    with session_scope(deployment.engine) as session:
        match = repo.get_match(session, second)
        assert (match.status, match.attempt, match.worker, match.started_at) == (MatchStatus.QUEUED, 0, None, None)
    assert play.play_league_match(second, worker="me:1", again=None) == "finished", "without `again`, it plays"


@pytest.mark.slow
def test_a_match_is_played_where_nobody_else_plays_its_half(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = league_by_half(deployment)[1]
    with session_scope(deployment.engine) as session:
        assert repo.void_match(session, first, "playing:1", "that worker stopped")
    monkeypatch.setattr(play, "existing_pool", lambda limits: Pool(0.5))
    sent: list[tuple[float, bool]] = []
    assert play.play_league_match(second, worker="me:1", again=lambda *sending: sent.append(sending)) == "finished"
    assert not sent


@pytest.mark.parametrize(
    ("match_s", "cost_s", "handed_off"),
    [
        (0.01, 0.5, True),  # the other worker is free in 0.01 s at most: sooner than the starts here
        (2.0, 0.5, False),  # its match has about 2 s left: starting here begins the match sooner
        (0.01, 0.0, False),  # nothing to start
        (0.01, None, False),  # a bot this worker has never started: nothing to weigh
    ],
)
def test_the_hand_off_weighs_the_starts_against_when_the_other_worker_is_free(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch, match_s: float, cost_s: float | None, handed_off: bool
) -> None:
    first, second = league_by_half(deployment, match_s)[1]
    monkeypatch.setattr(play, "existing_pool", lambda limits: Pool(cost_s))
    with session_scope(deployment.engine) as session:
        assert repo.claim_match(session, second, "me:1", 60.0) is not None
        began = time.monotonic()  # the other worker's match begins now: it is free in at most its elapsed time / 2
        session.execute(sa.update(Match).where(col(Match.id) == first).values(started_at=utc_now()))
        session.commit()
        pause = play._hand_off_pause(session, repo.match_setup(session, second), "me:1")
        free_in = max(match_s, (time.monotonic() - began) / 2)  # a loaded machine's seconds count too
    if handed_off:
        assert pause is not None and play.MIN_DEFER_S <= pause <= 2 * max(free_in, play.MIN_DEFER_S), "until it is free"
    else:
        assert pause is None


class HalfPool(Pool):
    """A pool with one half's processes warm: starting a match's costs nothing in `warm`, `cost_s` in the other."""

    def __init__(self, warm: int, cost_s: float) -> None:
        super().__init__(cost_s)
        self.warm = warm

    def start_cost_s(self, programs: tuple[BotProgram, BotProgram], half: int) -> float | None:
        return 0.0 if half == self.warm else self.cost_s


@pytest.mark.parametrize("twin_played", [False, True], ids=["twin-to-play", "twin-finished"])
def test_a_pair_played_whole_weighs_its_twins_starts_too(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch, twin_played: bool
) -> None:
    """This worker has the match's half warm but not its twin's, which it would play right after it (a persistent
    bot's pair is played whole): the starts of the twin's processes count, so the match goes to the worker that
    has both warm and is about to be free. Where the twin has finished, only the match's own half counts."""
    league_id = deployment.league(
        "pairs",
        ["keeper", "other"],
        6,
        command=BOT_COMMAND,
        folder=BOT_SCRIPT.parent,
        persistent={"keeper", "other"},
        sandbox=sandbox_available(),
    )
    with session_scope(deployment.engine) as session:
        pairs: dict[int, dict[int, int]] = {}
        for match in repo.list_matches(session, league_id):
            half = repo.half_of(match.team0_version_id, match.team1_version_id)
            pairs.setdefault(match.duplicate_pair or 0, {})[half] = match.id or 0
        done, playing, mine = pairs.values()
        ended = utc_now()
        for match_id in (*done.values(), *((mine[0],) if twin_played else ())):
            assert finish(session, match_id, "playing:1")
            session.execute(
                sa.update(Match)
                .where(col(Match.id) == match_id)
                .values(started_at=ended - timedelta(seconds=0.01), finished_at=ended)
            )
        session.commit()
        assert repo.claim_match(session, playing[1], "playing:1", 60.0) is not None
        assert repo.claim_match(session, mine[1], "me:1", 60.0) is not None
        monkeypatch.setattr(play, "existing_pool", lambda limits: HalfPool(warm=1, cost_s=0.5))
        pause = play._hand_off_pause(session, repo.match_setup(session, mine[1]), "me:1")
    assert (pause is None) == twin_played


def test_a_warm_pool_plays_a_pair_whole_without_asking_the_database_for_its_twin(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where nothing of the pair is to start, its twin's state weighs nothing: every match of a warm pool asked the
    database whether its twin was still to play (stop 41). Where the twin's processes are to start, it asks."""
    halves = league_by_half(deployment)
    asked: list[int] = []
    real = repo.unplayed_twin

    def counted(session: object, match_id: int) -> Match | None:
        asked.append(match_id)
        return real(session, match_id)  # type: ignore[arg-type]

    monkeypatch.setattr(repo, "unplayed_twin", counted)
    mine = halves[1][1]
    with session_scope(deployment.engine) as session:
        setup = repo.match_setup(session, mine)
        assert play._chains_twin(setup), "persistent bots: the pair is played whole"
        monkeypatch.setattr(play, "existing_pool", lambda limits: Pool(0.0))
        assert play._hand_off_pause(session, setup, "me:1") is None
        assert asked == [], "a warm pool: nothing to weigh, nothing asked"
        monkeypatch.setattr(play, "existing_pool", lambda limits: HalfPool(warm=1, cost_s=0.5))
        play._hand_off_pause(session, setup, "me:1")
        assert asked == [mine], "the twin's half is to start: whether the twin is still to play counts"
