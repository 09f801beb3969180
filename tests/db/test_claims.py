"""Claims and leases: one worker per match, expired leases requeued, infrastructure failures never charged."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.db.factories import add_bots, duplicate_plan, finish, make_league, row_counts
from workers.db import repo
from workers.db.errors import Conflict, InvalidInput, NotFound
from workers.db.models import LeagueStatus, Match, MatchStatus
from workers.db.session import session_scope

T = TypeVar("T")
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def match_ids(engine: Engine, tmp_path: Path) -> list[int]:
    """A league of four bots: twelve queued matches."""
    names = ["alpha", "bravo", "charlie", "delta"]
    with session_scope(engine) as session:
        add_bots(session, tmp_path, *names)
        league = make_league(session, "spring", names, matches=duplicate_plan(names))
        return repo.unfinished_match_ids(session, league.id or 0)


def test_claiming_a_queued_match_starts_an_attempt(engine: Engine, match_ids: list[int]) -> None:
    with session_scope(engine) as session:
        match = repo.claim_match(session, match_ids[0], "host:1", 30.0, now=NOW)
    assert match is not None
    assert match.status is MatchStatus.RUNNING
    assert match.attempt == 1
    assert match.worker == "host:1"
    assert match.lease_expires_at == NOW + timedelta(seconds=30)
    assert match.heartbeat_at == match.started_at == NOW


def test_a_running_match_cannot_be_claimed_until_its_lease_expires(engine: Engine, match_ids: list[int]) -> None:
    with session_scope(engine) as session:
        assert repo.claim_match(session, match_ids[0], "host:1", 30.0, now=NOW) is not None
        assert repo.claim_match(session, match_ids[0], "host:2", 30.0, now=NOW + timedelta(seconds=29)) is None
        taken = repo.claim_match(session, match_ids[0], "host:2", 30.0, now=NOW + timedelta(seconds=31))
    assert taken is not None
    assert (taken.worker, taken.attempt) == ("host:2", 2)


def test_heartbeats_extend_the_lease_only_for_the_worker_holding_it(engine: Engine, match_ids: list[int]) -> None:
    with session_scope(engine) as session:
        repo.claim_match(session, match_ids[0], "host:1", 30.0, now=NOW)
        assert repo.heartbeat(session, match_ids[0], "host:1", 30.0, now=NOW + timedelta(seconds=20))
        assert not repo.heartbeat(session, match_ids[0], "host:2", 30.0, now=NOW + timedelta(seconds=20))
        # The lease now runs to NOW + 50 s: a claim at NOW + 40 s finds the match still held.
        assert repo.claim_match(session, match_ids[0], "host:2", 30.0, now=NOW + timedelta(seconds=40)) is None
        assert not repo.heartbeat(session, match_ids[1], "host:1", 30.0, now=NOW)  # never claimed


def test_expired_leases_are_requeued(engine: Engine, match_ids: list[int]) -> None:
    with session_scope(engine) as session:
        repo.claim_match(session, match_ids[0], "host:1", 30.0, now=NOW)
        repo.claim_match(session, match_ids[2], "host:2", 90.0, now=NOW)  # another pair: [1] is [0]'s twin
        assert repo.requeue_expired(session, "spring", now=NOW + timedelta(seconds=10)) == 0
        assert repo.requeue_expired(session, "spring", now=NOW + timedelta(seconds=60)) == 1
        dead, alive = repo.get_match(session, match_ids[0]), repo.get_match(session, match_ids[2])
        assert dead.status is MatchStatus.QUEUED and dead.worker is None and dead.lease_expires_at is None
        assert dead.error is not None and "host:1" in dead.error
        assert alive.status is MatchStatus.RUNNING
        assert repo.league_progress(session, "spring")["running"] == 1
        again = repo.claim_match(session, match_ids[0], "host:3", 30.0, now=NOW + timedelta(seconds=61))
    assert again is not None and again.attempt == 2


def test_a_voided_match_goes_back_to_the_queue_without_a_result(engine: Engine, match_ids: list[int]) -> None:
    before = row_counts(engine)
    with session_scope(engine) as session:
        repo.claim_match(session, match_ids[0], "host:1", 30.0)
        assert not repo.void_match(session, match_ids[0], "host:2", "not mine")
        assert repo.void_match(session, match_ids[0], "host:1", "referee unreachable: connection refused")
        voided = repo.get_match(session, match_ids[0])
        assert voided.status is MatchStatus.QUEUED and voided.worker is None
        assert voided.error == "referee unreachable: connection refused"
        assert not repo.void_match(session, match_ids[0], "host:1", "again")  # no longer held
    assert row_counts(engine) == before


def test_a_match_that_keeps_failing_stops_after_max_attempts_and_can_be_retried(
    engine: Engine, match_ids: list[int]
) -> None:
    with session_scope(engine) as session:
        for attempt in (1, 2, 3):
            claimed = repo.claim_match(session, match_ids[0], "host:1", 30.0)
            assert claimed is not None and claimed.attempt == attempt
            assert repo.void_match(session, match_ids[0], "host:1", "sandbox failed to start", max_attempts=3)
        assert repo.get_match(session, match_ids[0]).status is MatchStatus.FAILED
        assert repo.claim_match(session, match_ids[0], "host:1", 30.0) is None
        assert repo.league_progress(session, "spring")["failed"] == 1
        assert match_ids[0] in repo.unfinished_match_ids(session, "spring")
        assert repo.requeue_failed(session, "spring") == 1
        assert repo.claim_match(session, match_ids[0], "host:1", 30.0) is not None


def test_claim_arguments_are_checked(engine: Engine, match_ids: list[int]) -> None:
    with session_scope(engine) as session:
        with pytest.raises(InvalidInput, match="lease"):
            repo.claim_match(session, match_ids[0], "host:1", 0)
        with pytest.raises(InvalidInput, match="worker"):
            repo.claim_match(session, match_ids[0], "", 30.0)
        with pytest.raises(NotFound, match="no match with id 9999"):
            repo.claim_match(session, 9999, "host:1", 30.0)


def _race(engine: Engine, workers: int, action: Callable[[Session, str], T]) -> list[T]:
    """Run `action` in `workers` threads, each with its own session, released at the same instant."""
    barrier = threading.Barrier(workers)
    results: list[T] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(worker: str) -> None:
        try:
            with session_scope(engine) as session:
                barrier.wait()
                result = action(session, worker)
            with lock:
                results.append(result)
        except BaseException as error:  # reported in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(f"host:{n}",)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return results


def _claim(match_id: int, session: Session, worker: str) -> Match | None:
    return repo.claim_match(session, match_id, worker, 30.0)


def test_of_two_workers_claiming_at_once_exactly_one_wins(engine: Engine, match_ids: list[int]) -> None:
    for match_id in match_ids[::2]:  # one match of each duplicate pair: a twin waits while the other runs
        claims = _race(engine, 2, functools.partial(_claim, match_id))
        winners = [claim for claim in claims if claim is not None]
        assert len(winners) == 1, f"match {match_id}: {len(winners)} winners"
        with session_scope(engine) as session:
            stored = repo.get_match(session, match_id)
            assert stored.attempt == 1 and stored.worker == winners[0].worker


def test_no_worker_claims_a_match_of_a_paused_league_until_it_is_run_again(
    engine: Engine, match_ids: list[int]
) -> None:
    with session_scope(engine) as session:
        running = repo.claim_match(session, match_ids[0], "host:1", 30.0, now=NOW)
        assert running is not None
        league = repo.pause_league(session, "spring")
        session.commit()
        assert league.status is LeagueStatus.PAUSED
        assert repo.claim_match(session, match_ids[-1], "host:2", 30.0, now=NOW) is None
        assert not repo.claim_deferred(session, match_ids[-1], now=NOW), "dropped, not sent again and again"
        # Nor is a match whose worker died taken over while the league is paused.
        assert repo.claim_match(session, match_ids[0], "host:2", 30.0, now=NOW + timedelta(seconds=31)) is None
        assert repo.heartbeat(session, match_ids[0], "host:1", 30.0, now=NOW + timedelta(seconds=1)), (
            "a match in hand plays on"
        )
        repo.start_league(session, "spring")  # `mus league run` resumes it
        session.commit()
        resumed = repo.claim_match(session, match_ids[-1], "host:2", 30.0, now=NOW)
    assert resumed is not None and resumed.worker == "host:2"


def test_a_finished_league_cannot_be_paused(engine: Engine, match_ids: list[int]) -> None:
    with session_scope(engine) as session:
        for match_id in match_ids:
            assert finish(session, match_id)
        assert repo.finish_league_if_complete(session, "spring")
        session.commit()
        with pytest.raises(Conflict, match="finished"):
            repo.pause_league(session, "spring")


def test_a_cancelled_league_plays_no_more_matches_and_publishes_its_secret(
    engine: Engine, match_ids: list[int]
) -> None:
    """`mus league cancel`: refused while a match is played on a live lease (its seats would play a deal whose
    secret is published), then no claim, no deferral, no run, and the secret out; it stays cancelled."""
    with session_scope(engine) as session:
        assert finish(session, match_ids[0])
        assert repo.claim_match(session, match_ids[2], "host:1", 30.0, now=NOW) is not None
        with pytest.raises(Conflict, match="1 match\\(es\\) being played"):
            repo.cancel_league(session, "spring", now=NOW + timedelta(seconds=1))
        session.rollback()
        assert repo.revealed_secret(repo.get_league(session, "spring")) is None
        league = repo.cancel_league(session, "spring", now=NOW + timedelta(seconds=31))  # its worker died
        session.commit()
        assert league.status is LeagueStatus.CANCELLED and league.finished_at is not None
        assert repo.revealed_secret(league) == league.secret is not None
        assert repo.claim_match(session, match_ids[-1], "host:2", 30.0, now=NOW) is None
        assert repo.claim_match(session, match_ids[2], "host:2", 30.0, now=NOW + timedelta(seconds=60)) is None
        assert not repo.claim_deferred(session, match_ids[-1], now=NOW), "dropped, not sent again"
        for refused in (repo.start_league, repo.pause_league, repo.cancel_league):
            with pytest.raises(Conflict, match="cancelled"):
                refused(session, "spring")
        assert not repo.finish_league_if_complete(session, "spring")
        assert repo.get_league(session, "spring").status is LeagueStatus.CANCELLED
        assert repo.league_progress(session, "spring")["finished"] == 1


def test_a_finished_league_cannot_be_cancelled(engine: Engine, match_ids: list[int]) -> None:
    with session_scope(engine) as session:
        for match_id in match_ids:
            assert finish(session, match_id)
        with pytest.raises(Conflict, match="played every match"):
            repo.cancel_league(session, "spring")
        session.rollback()
        assert repo.finish_league_if_complete(session, "spring")
        session.commit()
        with pytest.raises(Conflict, match="finished"):
            repo.cancel_league(session, "spring")


def test_failure_causes_count_the_failed_matches_by_error(engine: Engine, match_ids: list[int]) -> None:
    with session_scope(engine) as session:
        for match_id, error in zip(match_ids[:3], ("bot changed", "no referee", "bot changed"), strict=True):
            assert repo.claim_match(session, match_id, "host:1", 30.0) is not None
            assert repo.void_match(session, match_id, "host:1", error, max_attempts=1)
        assert repo.failure_causes(session, "spring") == {"bot changed": 2, "no referee": 1}


def test_a_match_finds_its_twin_without_reading_the_rest_of_its_league(engine: Engine, match_ids: list[int]) -> None:
    """Each league match looks up its twin several times as it is claimed and played. The `(league_id, status)`
    index narrowed those look-ups to the league only: every match of it was read (in a 3,000-match league the
    worker's database work a match fell from 3.2 to 2.7 ms with the index, stop 41). Every read of the match table
    goes through an index down to the pair, or the match's own id, or the matches of one status."""
    if engine.dialect.name != "sqlite":
        pytest.skip("the query plans read are SQLite's (EXPLAIN QUERY PLAN)")
    statements: list[tuple[str, Sequence[Any]]] = []

    def note(_conn: object, _cursor: object, statement: str, parameters: Sequence[Any], *_: object) -> None:
        statements.append((statement, parameters))

    first = match_ids[0]
    sa.event.listen(engine, "before_cursor_execute", note)
    try:
        with session_scope(engine) as session:
            assert repo.claim_match(session, first, "host:1", 30.0, now=NOW) is not None
            assert repo.unplayed_twin(session, first) is not None
            assert repo.claim_twin(session, first, "host:1", 30.0, now=NOW) is not None
    finally:
        sa.event.remove(engine, "before_cursor_execute", note)
    reads = []
    with engine.connect() as connection:
        for statement, parameters in statements:
            if '"match"' in statement and statement.lstrip().upper().startswith(("SELECT", "UPDATE")):
                plan = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
                reads += [row[3] for row in plan if " match" in row[3]]
    assert reads, "the look-ups were seen"
    whole_league = [read for read in reads if read.startswith("SCAN") or read.endswith("(league_id=?)")]
    assert not whole_league, reads


def _twin_of(session: Session, match_id: int) -> int:
    match = repo.get_match(session, match_id)
    return next(
        other.id
        for other in repo.list_matches(session, match.league_id)
        if other.duplicate_pair == match.duplicate_pair and other.id != match_id and other.id is not None
    )


def test_the_worker_playing_a_match_takes_its_twin_before_the_result_and_nobody_else_can(
    engine: Engine, match_ids: list[int]
) -> None:
    with session_scope(engine) as session:
        first = match_ids[0]
        twin = _twin_of(session, first)
        assert repo.claim_twin(session, first, "host:1", 30.0, now=NOW) is None, "it does not hold the first"
        assert repo.claim_match(session, first, "host:1", 30.0, now=NOW) is not None
        assert repo.claim_twin(session, first, "host:2", 30.0, now=NOW) is None, "another worker's match"
        assert repo.claim_twin(session, first, "host:1", 30.0, now=NOW + timedelta(seconds=5)) == twin
        taken = repo.get_match(session, twin)
        assert (taken.status, taken.worker, taken.attempt) == (MatchStatus.RUNNING, "host:1", 1)
        assert taken.lease_expires_at == NOW + timedelta(seconds=35)
        assert repo.claim_match(session, twin, "host:2", 30.0, now=NOW + timedelta(seconds=6)) is None
        assert not repo.claim_deferred(session, twin, now=NOW + timedelta(seconds=6)), "held: the message is dropped"
        assert repo.claim_twin(session, first, "host:1", 30.0, now=NOW) is None, "taken once"
        other = next(match_id for match_id in match_ids if match_id not in (first, twin))
        assert repo.claim_match(session, other, "host:3", 30.0, now=NOW) is not None
        repo.pause_league(session, "spring")
        session.commit()
        finishing = repo.claim_twin(session, other, "host:3", 30.0, now=NOW)
        assert finishing is not None, "a pair in play is finished, as a paused league's matches in hand are"
        third = next(match_id for match_id in match_ids if match_id not in (first, twin, other, finishing))
        third_twin = _twin_of(session, third)
        repo.start_league(session, "spring")
        session.commit()
        assert repo.claim_match(session, third_twin, "host:4", 30.0, now=NOW) is not None
        assert repo.void_match(session, third_twin, "host:4", "broken", max_attempts=1)
        assert repo.get_match(session, third_twin).status is MatchStatus.FAILED
        assert repo.claim_match(session, third, "host:4", 30.0, now=NOW) is not None
        assert repo.claim_twin(session, third, "host:4", 30.0, now=NOW) == third_twin
        assert repo.get_match(session, third_twin).attempt == 2, "a failed twin: once more"


def test_a_refused_match_is_left_to_the_live_machines_that_have_not_refused_what_it_needs(engine: Engine) -> None:
    """A machine without a bot's folder (or a sandbox) names the machines whose workers may launch the match: those
    seen alive lately that have refused none of what it needs; none means it can be played nowhere now."""
    live_s = 90.0
    needs = ["folder:1", "folder:2", "sandbox"]
    with session_scope(engine) as session:
        assert repo.refuse_match(session, "far:1", needs=needs, lacks=["folder:1"], live_s=live_s, now=NOW) == []
        repo.machine_seen(session, "near", now=NOW - timedelta(seconds=60))
        repo.machine_seen(session, "gone", now=NOW - timedelta(seconds=91))
        repo.machine_seen(session, "blind", now=NOW)
        assert repo.refuse_match(session, "blind:7", needs=needs, lacks=["sandbox"], live_s=live_s, now=NOW) == ["near"]
        assert repo.refuse_match(session, "far:2", needs=needs, lacks=["folder:1"], live_s=live_s, now=NOW) == [
            "near"
        ], "a machine seen 91 s ago is gone; one refused is not left the match, whichever worker of it refused"
        # A match that needs only what the machines that refused others lack is theirs again.
        assert repo.refuse_match(session, "near:3", needs=["folder:2"], lacks=["folder:2"], live_s=live_s, now=NOW) == [
            "blind",
            "far",
        ]
        # A refusal counts for REFUSAL_TTL_S after it was last made; a worker that finds what it lacked clears it.
        later = NOW + timedelta(seconds=repo.REFUSAL_TTL_S + 1)
        for machine in ("near", "blind"):
            repo.machine_seen(session, machine, now=later)
        assert repo.refuse_match(session, "far:1", needs=needs, lacks=["folder:1"], live_s=live_s, now=later) == [
            "blind",
            "near",
        ]
        repo.clear_refusals(session, "far", ["folder:1"])
        assert repo.refuse_match(session, "near:4", needs=needs, lacks=["folder:2"], live_s=live_s, now=later) == [
            "blind",
            "far",
        ]


def test_a_released_claim_keeps_the_reason_it_was_given_back(engine: Engine, match_ids: list[int]) -> None:
    with session_scope(engine) as session:
        repo.claim_match(session, match_ids[0], "far:1", 30.0, now=NOW)
        assert repo.release_claim(session, match_ids[0], "far:1", error="no folder here; left to near")
        match = repo.get_match(session, match_ids[0])
    assert (match.status, match.attempt, match.worker, match.error) == (
        MatchStatus.QUEUED,
        0,
        None,
        "no folder here; left to near",
    )
