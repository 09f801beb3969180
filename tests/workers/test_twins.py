"""The two matches of a duplicate pair never run at the same time: a worker defers a twin and sends it again
soon, and `mus league run` sends the first halves of the pairs before the second halves."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bench.league import BOT_COMMAND, BOT_SCRIPT, THINK_ENV
from tests.workers.conftest import Deployment
from workers import play, tasks
from workers.app import app, later, make_app, match_queues, send_match
from workers.db import repo
from workers.db.models import MatchStatus
from workers.db.session import session_scope
from workers.launcher import sandbox_available
from workers.league_run import send_order
from workers.matches import EmbeddedReferee
from workers.pool import close_pools


@pytest.fixture(autouse=True)
def fresh_database() -> Iterator[None]:
    """`play.database()` is cached per process: each test has its own deployment's."""
    play.database.cache_clear()
    yield
    play.database.cache_clear()


def twins(deployment: Deployment) -> tuple[int, int]:
    league_id = deployment.league("pairs", ["random", "passive"], matches_per_pairing=2)
    with session_scope(deployment.engine) as session:
        first, second = repo.list_matches(session, league_id)
    assert first.id is not None and second.id is not None
    assert first.duplicate_pair is not None and first.duplicate_pair == second.duplicate_pair
    return first.id, second.id


@pytest.mark.slow
def test_a_worker_defers_a_match_whose_twin_is_being_played_without_touching_it(deployment: Deployment) -> None:
    first, second = twins(deployment)
    with session_scope(deployment.engine) as session:
        assert repo.claim_match(session, first, "elsewhere:1", 60.0) is not None
    assert play.play_league_match(second) == "deferred"
    with session_scope(deployment.engine) as session:
        waiting = repo.get_match(session, second)
        assert (waiting.status, waiting.attempt, waiting.worker, waiting.deal) == (MatchStatus.QUEUED, 0, None, 0)
        assert repo.get_match(session, first).worker == "elsewhere:1", "the twin being played is left alone"
    assert play.play_league_match(first) == "skipped", "a match a live worker holds is not deferred"


def test_the_task_sends_a_match_left_for_later_again_and_counts_its_hand_offs(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[Any, dict[str, Any]]] = []
    allowed: dict[int, bool] = {}

    def play_league_match(match_id: int, *, again: play.SendAgain, may_hand_off: bool) -> str:
        allowed[match_id] = may_hand_off
        if match_id == 7:
            again(0.4, False)
            return "deferred"
        if match_id == 8:
            again(0.0, True)
            return "handed_off"
        return "finished"

    monkeypatch.setattr(tasks, "play_league_match", play_league_match)
    monkeypatch.setattr(tasks.play_match, "apply_async", lambda args, **options: sent.append((args, options)))
    assert [tasks.play_match(7, 2), tasks.play_match(8, 2), tasks.play_match(9)] == [
        "deferred",
        "handed_off",
        "finished",
    ]
    assert tasks.play_match(7) == "deferred"
    assert sent == [
        ((7, 2), {"queue": None, **later(app, 0.4)}),  # called directly: no queue it came from
        ((8, 3), {"queue": None}),
        ((7,), {"queue": None, **later(app, 0.4)}),  # never handed off: the message as any version sends it
    ]
    assert allowed == {7: True, 8: True, 9: True}
    tasks.play_match(8, play.MAX_HAND_OFFS)
    assert not allowed[8], "handed off often enough: played where it is"


def test_a_deferred_match_waits_about_what_its_twin_has_left_at_the_leagues_pace() -> None:
    def wait(match_s: float | None, twin_elapsed_s: float | None) -> float:
        return play.twin_wait_s(repo.Pace(match_s, twin_elapsed_s, waiting=3, others=1, free_in_s=None))

    assert wait(None, 0.1) == play.DEFER_S, "before the league's first result"
    assert wait(0.2, 0.05) == pytest.approx(0.15)
    assert wait(0.2, 0.15) == pytest.approx(0.075), "half its time so far, once that is more than its time left"
    assert wait(0.2, 1.0) == pytest.approx(0.5), "a twin past the pace is asked after less and less often"
    assert wait(0.2, 60.0) == play.DEFER_S
    assert wait(0.2, None) == play.MIN_DEFER_S, "the twin ended since the claim was refused"
    assert wait(0.01, 0.0) == play.MIN_DEFER_S


@pytest.mark.slow
def test_a_real_worker_plays_a_deferred_match_soon_after_its_twin_ends_with_no_league_run(
    deployment: Deployment,
) -> None:
    """No `mus league run` resends anything: the deferred match is played only because the task sent itself, back
    to the queue it came from (the worker here takes only half 1's queue)."""
    first, second = twins(deployment)
    with session_scope(deployment.engine) as session:
        assert repo.claim_match(session, first, "elsewhere:1", 600.0) is not None
    command = [sys.executable, "-m", "celery", "-A", "workers.app", "worker", "--pool=solo", "--loglevel=WARNING"]
    command += ["-Q", match_queues()[1]]
    log = deployment.root / "worker.log"
    with log.open("wb") as output:
        worker = subprocess.Popen(command, cwd=deployment.root, env=dict(os.environ), stdout=output, stderr=output)
    try:
        send_match(make_app(), second, 1)
        deadline = time.monotonic() + 60
        while messages(deployment) < 2 and time.monotonic() < deadline:  # the task has sent itself again
            time.sleep(0.1)
        assert messages(deployment) >= 2, log.read_text(errors="replace")
        with session_scope(deployment.engine) as session:
            assert repo.get_match(session, second).status is MatchStatus.QUEUED, "deferred, not played"
            assert repo.void_match(session, first, "elsewhere:1", "its worker gave it up")  # the twin has ended
        status = MatchStatus.QUEUED
        while status is not MatchStatus.FINISHED and time.monotonic() < deadline:
            time.sleep(0.1)
            with session_scope(deployment.engine) as session:
                status = repo.get_match(session, second).status
        assert status is MatchStatus.FINISHED, log.read_text(errors="replace")
    finally:
        worker.kill()
        worker.wait()


@pytest.mark.slow
def test_a_solo_worker_plays_a_deferred_match_that_comes_due_mid_match_after_that_match(
    deployment: Deployment,
) -> None:
    """Under Celery's countdown, a solo worker on the embedded broker ran a due task from its timer thread, beside
    the match in hand, on its one referee: the deferred match failed ('This event loop is already running') and was
    voided onto a fresh deal. The broker now holds the message back (workers.app.later): it waits its turn."""
    league_id = deployment.league(
        "slow",
        ["slow0", "slow1"],
        4,
        command=BOT_COMMAND,
        folder=BOT_SCRIPT.parent,
        sandbox=False,  # the bots see the worker's environment: its think time
    )
    with session_scope(deployment.engine) as session:
        by_pair: dict[tuple[int, int], int] = {}
        for match in repo.list_matches(session, league_id):
            half = repo.half_of(match.team0_version_id, match.team1_version_id)
            by_pair[match.duplicate_pair or 0, half] = match.id or 0
    pair, other = sorted({key[0] for key in by_pair})
    deferred, playing = by_pair[pair, 1], by_pair[other, 1]
    with session_scope(deployment.engine) as session:
        assert repo.claim_match(session, by_pair[pair, 0], "elsewhere:1", 600.0) is not None
    command = [sys.executable, "-m", "celery", "-A", "workers.app", "worker", "--pool=solo", "--loglevel=INFO"]
    command += ["-Q", match_queues()[1]]
    log = deployment.root / "worker.log"
    env = dict(os.environ, **{THINK_ENV: "100"})  # a match of about 4 s: longer than the deferral (DEFER_S)
    with log.open("wb") as output:
        worker = subprocess.Popen(command, cwd=deployment.root, env=env, stdout=output, stderr=output)
    try:
        send_match(make_app(), deferred, 1)
        deadline = time.monotonic() + 60
        while messages(deployment) < 2 and time.monotonic() < deadline:  # deferred: the task sent itself again
            time.sleep(0.05)
        time.sleep(0.5)  # under a countdown, the worker has taken the message into its timer by now
        with session_scope(deployment.engine) as session:
            assert repo.void_match(session, by_pair[pair, 0], "elsewhere:1", "its worker gave it up")
        send_match(make_app(), playing, 1)  # taken at once, and still being played when the deferral is due
        done = False
        while not done and time.monotonic() < deadline:
            time.sleep(0.2)
            with session_scope(deployment.engine) as session:
                done = all(repo.get_match(session, m).status is MatchStatus.FINISHED for m in (deferred, playing))
        assert done, log.read_text(errors="replace")
        with session_scope(deployment.engine) as session:
            first, second = repo.get_match(session, playing), repo.get_match(session, deferred)
            twin = repo.get_match(session, by_pair[pair, 0])
            assert (second.attempt, second.error) == (1, None), log.read_text(errors="replace")
            assert second.deal == twin.deal == 1, "the deal the voided twin moved the pair to: never voided itself"
            assert first.finished_at is not None and second.started_at is not None
            assert second.started_at >= first.finished_at, "after the match in hand, not beside it"
    finally:
        worker.kill()
        worker.wait()


def messages(deployment: Deployment) -> int:
    """How many task messages the embedded broker has seen (queued or processed)."""
    folder = deployment.root / "broker"
    return sum(1 for path in folder.glob("*/*.msg") if path.parent.name in ("queue", "processed"))


def queued(match_id: int, index: int, half: int) -> repo.QueuedMatch:
    return repo.QueuedMatch(match_id, 0, index, index // 2, half)


def test_league_run_sends_half_0_in_plan_order_then_half_1_from_the_middle_of_the_plan() -> None:
    """A worker that prefers half 0 and one that prefers half 1 start half a league apart: never on one pair."""
    halves = [queued(10 + index, index, (index + index // 2) % 2) for index in range(8)]
    order = [match.id for match in send_order(list(reversed(halves)))]
    assert order == [10, 13, 14, 17, 15, 16, 11, 12]
    pairs = {match.id: match.duplicate_pair for match in halves}
    first, second = order[:4], order[4:]
    assert all(pairs[one] != pairs[other] for one, other in zip(first, second, strict=True))


def test_a_twin_left_alone_in_the_queue_is_sent_with_its_half() -> None:
    # The half-0 twin of pair 0 has finished: its other half waits for nothing.
    assert [match.id for match in send_order([queued(11, 1, 1), queued(12, 2, 0), queued(13, 3, 1)])] == [12, 13, 11]


@pytest.mark.slow
@pytest.mark.parametrize("persistent", [True, False], ids=["persistent", "launched-per-match"])
def test_a_pair_with_a_persistent_bot_is_played_whole_by_one_worker_the_twin_right_after(
    deployment: Deployment, persistent: bool
) -> None:
    """A pooled process remembers the deal of the twin it played: played by another worker, the other twin could
    run beside it on the host. So its worker takes the twin before it writes the first's result, and plays it."""
    league_id = deployment.league(
        "pooled",
        ["keeper", "other"],
        2,
        command=BOT_COMMAND,
        folder=BOT_SCRIPT.parent,
        persistent={"keeper"} if persistent else (),
        options={"games_to_win_vaca": 1, "vacas_to_win_match": 1},
        sandbox=sandbox_available(),
    )
    with session_scope(deployment.engine) as session:
        first, second = (match.id or 0 for match in repo.list_matches(session, league_id))
    try:
        assert play.play_league_match(first, worker="me:1") == "finished"
    finally:
        close_pools()
    with session_scope(deployment.engine) as session:
        played, twin = repo.get_match(session, first), repo.get_match(session, second)
        assert played.status is MatchStatus.FINISHED and played.worker == "me:1"
        if persistent:
            assert (twin.status, twin.worker, twin.attempt) == (MatchStatus.FINISHED, "me:1", 1)
            assert twin.deal == played.deal, "the same deal: a duplicate pair"
            assert twin.started_at is not None and played.finished_at is not None
            assert twin.started_at <= played.finished_at, "taken before the first's result was written"
        else:
            assert (twin.status, twin.worker) == (MatchStatus.QUEUED, None), "its processes did not outlive it"
    assert play.play_league_match(second, worker="other:1") == ("skipped" if persistent else "finished")


def test_a_workers_referee_keeps_each_tables_resend_budget_apart() -> None:
    """A worker's referee plays a duplicate pair's halves one after the other: no budget of a bot's may span its
    tables, or the first half's processes could leave the twin's a number (tests/service/test_limits.py)."""

    async def made() -> bool:
        embedded = EmbeddedReferee()
        try:
            return embedded.referee.resends_per_table
        finally:
            await embedded.close()

    assert asyncio.run(made())
