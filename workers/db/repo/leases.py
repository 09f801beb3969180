"""The worker protocol: leases on matches, heartbeats, requeues and voids.

A worker claims a queued match (or a running one whose lease has expired) with one conditional UPDATE, so two
workers can never both hold it; it sends heartbeats that push the lease on, and it ends the attempt with
`record_result` (workers/db/repo/results.py) or, on an infrastructure failure, `void_match`, which requeues the
match and is never charged to a bot. Lease times come from the database's clock on PostgreSQL, so workers on
machines whose clocks disagree still agree on when a lease expires. Worker names must be unique per process
(e.g. `host:pid`). Every function here commits before returning: a claim or a heartbeat that is not committed
is invisible to the other workers and, on PostgreSQL, keeps the row locked.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from workers.db.errors import InvalidInput, NotFound
from workers.db.models import League, LeagueStatus, Machine, Match, MatchStatus, Refusal
from workers.db.repo.common import LeagueRef, check_int, database_now
from workers.db.repo.leagues import get_match, half_of, league_entrants, league_id_of, pairing_count
from workers.tournament.deals import derived_seed, parse_secret

log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 4000
"""An infrastructure error is kept for the operator; a whole traceback is cut to this length."""


def claim_match(
    session: Session, match_id: int, worker: str, lease_s: float, *, now: datetime | None = None
) -> Match | None:
    """Take a match to play: a queued one, or a running one whose lease has expired. None if it is not free.

    A conditional UPDATE decides, so of two workers racing for the same match exactly one gets it (on
    PostgreSQL the loser waits for the winner's row lock, then re-checks the condition and finds it false).
    Taking over an expired lease also moves the match to a fresh deal: the old holder's bots may have seen it.
    The attempt count goes up by one; the lease runs `lease_s` seconds from now. Commits.

    The two matches of a duplicate pair never run at the same time: a match whose twin is running with a live
    lease is not free (None; `claim_deferred` then says it is still waiting to be played). Both twins are dealt
    the same cards, and a hosted bot's processes in one twin hold the seats of its rivals in the other: on one
    host, any channel between processes (timing, /proc counters) would tell it their hands. The condition is in
    the same UPDATE (NOT EXISTS a running twin), and two workers claiming both twins at the same instant are
    serialised on the pair (`_lock_pair`), so one of them always sees the other's claim and loses.

    Nor is a match of a paused league free (`pause_league`): None, and not deferred; `mus league run` sends it
    again when it resumes the league. Nor one of a cancelled league (`cancel_league`), ever.
    """
    check_worker(worker)
    lease = _check_lease(lease_s)
    now = now or database_now(session)
    _lock_pair(session, match_id)
    claimed = taken_over = False
    values = {"claim_id": match_id, "claim_worker": worker, "claim_now": now, "claim_expires": now + lease}
    connection = session.connection()  # the statements are made once: the ORM's handling of them cost more
    for takeover in (False, True):
        result = connection.execute(_claim_statement(takeover), values)
        if result.rowcount == 1:
            claimed, taken_over = True, takeover
            break
    if claimed and taken_over:
        # The expired holder's bots may have seen the deal: this attempt plays a fresh one.
        _fresh_deal(session, match_id)
        _expire_matches(session)
    match = session.get(Match, match_id, populate_existing=True)
    session.commit()
    if match is None:
        raise NotFound(f"no match with id {match_id}")
    if not claimed:
        return None
    log.info("match_id=%s claimed by worker %s, attempt %s", match_id, worker, match.attempt)
    return match


_NOT_CLAIMED = (LeagueStatus.PAUSED, LeagueStatus.CANCELLED)
"""Leagues whose matches no worker claims: paused (until `mus league run` resumes them) and cancelled (for good)."""


@cache
def _claim_statement(takeover: bool) -> sa.Update:
    """`claim_match`'s UPDATE of a queued match (or, with `takeover`, of a running one whose lease has expired) whose
    twin is not running on a live lease, in a league that is not paused; made once, bound per call (claim_id,
    claim_worker, claim_now, claim_expires): building it, with its aliased twin, cost more than running it."""
    twin = aliased(Match)
    now = _claim_now()
    no_running_twin = ~(
        sa.select(col(twin.id))
        .where(
            col(twin.league_id) == col(Match.league_id),
            col(twin.duplicate_pair) == col(Match.duplicate_pair),
            col(twin.id) != col(Match.id),
            col(twin.status) == MatchStatus.RUNNING,
            col(twin.lease_expires_at) >= now,
        )
        .exists()
    )
    claimable = (
        sa.and_(col(Match.status) == MatchStatus.RUNNING, col(Match.lease_expires_at) < now)
        if takeover
        else col(Match.status) == MatchStatus.QUEUED
    )
    league_not_paused = ~(
        sa.select(col(League.id))
        .where(col(League.id) == col(Match.league_id), col(League.status).in_(_NOT_CLAIMED))
        .exists()
    )
    return _new_attempt(col(Match.id) == sa.bindparam("claim_id"), claimable, no_running_twin, league_not_paused)


def _claim_now() -> sa.BindParameter[Any]:
    return sa.bindparam("claim_now", type_=sa.inspect(Match).columns["started_at"].type)


def _new_attempt(*conditions: Any) -> sa.Update:
    """The UPDATE that starts an attempt of the match `conditions` select: running under `claim_worker`, its
    lease to `claim_expires`, started at `claim_now` (all bound per call), its attempt counted."""
    now = _claim_now()
    return (
        sa.update(Match)
        .where(*conditions)
        .values(
            status=MatchStatus.RUNNING,
            attempt=col(Match.attempt) + 1,
            worker=sa.bindparam("claim_worker"),
            lease_expires_at=sa.bindparam("claim_expires"),
            heartbeat_at=now,
            started_at=now,
        )
        .execution_options(synchronize_session=False)
    )


def _lock_pair(session: Session, match_id: int) -> None:
    """On PostgreSQL, serialise the claims of a duplicate pair's two matches until this transaction ends.

    Under READ COMMITTED, two UPDATEs of *different* rows (twin A by one worker, twin B by another) could both
    pass their NOT EXISTS check, each before the other commits. A transaction-level advisory lock keyed by
    (league, pair) makes the second claimer wait for the first to commit; its UPDATE, a later statement, then
    reads a fresh snapshot and sees the twin running. An advisory lock rather than row locks of both twins: it
    cannot deadlock with `void_match` or `_fresh_deal`, which lock the two rows in either order. On SQLite a
    write transaction holds the whole database, and the UPDATE is the transaction's first statement (this
    function reads nothing there), so its NOT EXISTS reads the latest commit.
    """
    if session.get_bind().dialect.name != "postgresql":
        return
    session.execute(
        sa.select(sa.func.pg_advisory_xact_lock(col(Match.league_id), col(Match.duplicate_pair))).where(
            col(Match.id) == match_id, col(Match.duplicate_pair).is_not(None)
        )
    )


def claim_twin(
    session: Session, match_id: int, worker: str, lease_s: float, *, now: datetime | None = None
) -> int | None:
    """Take the duplicate twin of `match_id`, which `worker` is playing, to play it next, before the result of
    `match_id` is written: the twin's id, or None if the twin is finished or being played (or the worker no longer
    holds `match_id`).

    For bots whose processes outlive a match (a worker's pool): a process that played one twin remembers its deal,
    and while it runs any later match its host must not be playing the other twin. Played by the same worker right
    after the first (which holds no other match meanwhile), the twin is never played beside anything those
    processes run; taken before the first's result is written, no other worker can claim it in between (the twin
    rule of `claim_match` refuses it while the first is running). Commits. The id only, not the match: the worker
    loads the twin's setup to play it, and an ORM load here cost as much as the claim (about a third of a ms a
    match, `mus bench league --pool`).
    """
    check_worker(worker)
    lease = _check_lease(lease_s)
    now = now or database_now(session)
    _lock_pair(session, match_id)
    connection = session.connection()  # as in `claim_match`
    twin_id = connection.scalar(_twin_statement(), {"held_id": match_id, "held_worker": worker})
    claimed = False
    if twin_id is not None:
        # A paused league's pair in play is finished (as its matches in hand are), and a twin that failed is tried
        # once more: left for later, it could be played by another worker while this one's processes run.
        values = {"twin_id": twin_id, "claim_worker": worker, "claim_now": now, "claim_expires": now + lease}
        claimed = connection.execute(_claim_twin_statement(), values).rowcount == 1
    elif session.scalar(sa.select(col(Match.id)).where(col(Match.id) == match_id)) is None:
        session.commit()
        raise NotFound(f"no match with id {match_id}")
    session.commit()
    if not claimed or twin_id is None:
        return None
    log.info("match_id=%s claimed by worker %s after its twin %s", twin_id, worker, match_id)
    return int(twin_id)


@cache
def _twin_statement() -> sa.Select[int | None]:
    """`claim_twin`'s query: the id of the twin of match `held_id` while `held_worker` is playing it (running, under
    its name), else nothing; made once, bound per call, as `_claim_statement`, and read as columns, not as a
    loaded match: an ORM load cost more than the claim."""
    held = aliased(Match)
    return sa.select(col(Match.id)).where(
        col(held.id) == sa.bindparam("held_id"),
        col(held.status) == MatchStatus.RUNNING,
        col(held.worker) == sa.bindparam("held_worker"),
        col(held.duplicate_pair).is_not(None),
        col(Match.league_id) == col(held.league_id),
        col(Match.duplicate_pair) == col(held.duplicate_pair),
        col(Match.id) != col(held.id),
    )


@cache
def _claim_twin_statement() -> sa.Update:
    """`claim_twin`'s UPDATE of the twin `twin_id` if it is queued or failed; bound per call (twin_id,
    claim_worker, claim_now, claim_expires)."""
    return _new_attempt(
        col(Match.id) == sa.bindparam("twin_id"), col(Match.status).in_((MatchStatus.QUEUED, MatchStatus.FAILED))
    )


def claim_deferred(session: Session, match_id: int, *, now: datetime | None = None) -> bool:
    """After `claim_match` said None: whether the match still waits to be played (queued, or running on an
    expired lease), so it was refused only because its duplicate twin is being played. Its worker sends it
    again shortly instead of dropping it. False for a match that is finished, failed or held by a live worker,
    and for one of a paused or cancelled league.
    """
    now = now or database_now(session)
    match = get_match(session, match_id)
    league_status = session.scalar(sa.select(col(League.status)).where(col(League.id) == match.league_id))
    session.commit()
    if league_status in _NOT_CLAIMED:
        return False  # dropped: resuming a paused league sends its queued matches again
    if match.status is MatchStatus.QUEUED:
        return True
    return match.status is MatchStatus.RUNNING and match.lease_expires_at is not None and match.lease_expires_at < now


def release_claim(session: Session, match_id: int, worker: str, *, error: str | None = None) -> bool:
    """Give back a match this worker has claimed and not started to play: queued again for another worker to take,
    its attempt not counted (a claim that took over an expired lease keeps the fresh deal it moved the match to,
    which nobody has seen), with `error` kept for the operator if given. False if this worker does not hold it.
    Commits."""
    result = session.exec(
        sa.update(Match)
        .where(_held_by(match_id, worker))
        .values(
            status=MatchStatus.QUEUED,
            attempt=col(Match.attempt) - 1,
            worker=None,
            lease_expires_at=None,
            heartbeat_at=None,
            started_at=None,
            **({} if error is None else {"error": error[:MAX_ERROR_CHARS]}),
        )
        .execution_options(synchronize_session=False)
    )
    _expire_matches(session, match_id)
    session.commit()
    return result.rowcount == 1


RECENT_MATCHES = 20
"""The finished matches whose median time is a league's pace (`Pace.match_s`)."""


@dataclass(frozen=True)
class Pace:
    """How a match's league is being played at this moment: what a worker reads before it leaves the match for
    later (`workers.play`), when its twin is being played or when other workers play its half already."""

    match_s: float | None
    """The median time of the league's last `RECENT_MATCHES` finished matches, in seconds; None before the first."""
    twin_elapsed_s: float | None
    """How long the match's duplicate twin has been played, in seconds; None when it is not being played."""
    waiting: int
    """The other matches of its half (`half_of`) waiting in the queue."""
    others: int
    """Other workers that have the match's processes warm, as far as the database tells: playing its half (holding
    one of its matches on a live lease, or having finished one within the last two `match_s`) and having played
    both of its teams' bot versions in that half, in the league's last `RECENT_MATCHES` results or in hand."""
    free_in_s: float | None
    """How soon the first of those workers is free, at the league's pace: 0 for one between matches, else what its
    match in hand has left, `match_s` less its time so far, or half its time so far once that is more (a match
    past the pace is likely a long one); None without such a worker or without a pace."""


def league_pace(session: Session, match_id: int, worker: str, *, now: datetime | None = None) -> Pace:
    """The pace of `match_id`'s league as `worker` sees it (`Pace`). Four reads: a worker asks only before it
    defers a match, or before it plays one for which it would start pooled processes. Commits."""
    now = now or database_now(session)
    match = get_match(session, match_id)
    half = half_of(match.team0_version_id, match.team1_version_id)
    in_half = (
        col(Match.team0_version_id) > col(Match.team1_version_id)
        if half
        else col(Match.team0_version_id) < col(Match.team1_version_id)
    )
    in_league = col(Match.league_id) == match.league_id
    recent = session.execute(
        sa.select(
            col(Match.started_at),
            col(Match.finished_at),
            col(Match.worker),
            col(Match.team0_version_id),
            col(Match.team1_version_id),
        )
        .where(in_league, col(Match.status) == MatchStatus.FINISHED)
        .order_by(col(Match.finished_at).desc())
        .limit(RECENT_MATCHES)
    ).all()
    durations = [(end - start).total_seconds() for start, end, *_ in recent if start is not None and end is not None]
    match_s = statistics.median(durations) if durations else None
    running = session.execute(
        sa.select(
            col(Match.id),
            col(Match.duplicate_pair),
            col(Match.started_at),
            col(Match.worker),
            col(Match.team0_version_id),
            col(Match.team1_version_id),
        ).where(in_league, col(Match.status) == MatchStatus.RUNNING, col(Match.lease_expires_at) >= now)
    ).all()
    elapsed = {other_id: (now - started).total_seconds() if started else 0.0 for other_id, _, started, *_ in running}
    twin_elapsed_s = next(
        (
            elapsed[other_id]
            for other_id, pair, *_ in running
            if other_id != match_id and pair is not None and pair == match.duplicate_pair
        ),
        None,
    )
    # Each worker holding a match of the league (of either half), and how long it has played it.
    busy = {holder: elapsed[other_id] for other_id, _, _, holder, *_ in running if holder is not None}
    versions = {match.team0_version_id, match.team1_version_id}
    played: dict[str, set[int]] = {}  # by worker, the bot versions of its recent matches of the half
    active: set[str] = set()  # the workers playing the half now, or a moment ago
    since = now - timedelta(seconds=2 * match_s) if match_s is not None else now
    for _, end, holder, team0, team1 in recent:
        if holder is not None and half_of(team0, team1) == half:
            played.setdefault(holder, set()).update((team0, team1))
            if end is not None and end >= since:
                active.add(holder)
    for *_, holder, team0, team1 in running:
        if holder is not None and half_of(team0, team1) == half:
            played.setdefault(holder, set()).update((team0, team1))
            active.add(holder)
    others = {holder for holder in active if holder != worker and versions <= played[holder]}
    free_in_s = None
    if others and match_s is not None:
        free_in_s = min(max(match_s - busy[other], busy[other] / 2) if other in busy else 0.0 for other in others)
    waiting = session.scalar(
        sa.select(sa.func.count()).where(
            in_league, in_half, col(Match.status) == MatchStatus.QUEUED, col(Match.id) != match_id
        )
    )
    session.commit()
    return Pace(match_s, twin_elapsed_s, int(waiting or 0), len(others), free_in_s)


def heartbeat(session: Session, match_id: int, worker: str, lease_s: float, *, now: datetime | None = None) -> bool:
    """Push the lease on; False if this worker no longer holds the match (it was requeued or taken over),
    in which case the worker should abandon it. Commits."""
    lease = _check_lease(lease_s)
    now = now or database_now(session)
    result = session.exec(
        sa.update(Match)
        .where(_held_by(match_id, worker))
        .values(heartbeat_at=now, lease_expires_at=now + lease)
        .execution_options(synchronize_session=False)
    )
    _expire_matches(session, match_id)
    session.commit()
    return result.rowcount == 1


def requeue_expired(session: Session, league: LeagueRef | None = None, *, now: datetime | None = None) -> int:
    """Put running matches whose lease has expired (their worker died or hung) back in the queue; how many.

    Their attempt is not charged to any bot: the match is played again, on a fresh deal (as `void_match`).
    Commits.
    """
    now = now or database_now(session)
    query = sa.update(Match).where(col(Match.status) == MatchStatus.RUNNING, col(Match.lease_expires_at) < now)
    if league is not None:
        query = query.where(col(Match.league_id) == league_id_of(session, league))
    requeued = session.exec(
        query.values(
            status=MatchStatus.QUEUED,
            worker=None,
            lease_expires_at=None,
            error=sa.literal("the lease expired; worker ") + sa.func.coalesce(col(Match.worker), "unknown"),
        )
        .returning(col(Match.id))
        .execution_options(synchronize_session=False)
    ).all()
    for (match_id,) in requeued:
        _fresh_deal(session, match_id)
    _expire_matches(session)
    session.commit()
    if requeued:
        log.warning("requeued %s match(es) whose worker's lease expired", len(requeued))
    return len(requeued)


def requeue_failed(session: Session, league: LeagueRef) -> int:
    """Give the league's failed matches another chance (`mus league run` again); how many. Commits."""
    result = session.exec(
        sa.update(Match)
        .where(col(Match.league_id) == league_id_of(session, league), col(Match.status) == MatchStatus.FAILED)
        .values(status=MatchStatus.QUEUED)
        .execution_options(synchronize_session=False)
    )
    _expire_matches(session)
    session.commit()
    return int(result.rowcount)


def void_match(
    session: Session,
    match_id: int,
    worker: str,
    error: str,
    *,
    max_attempts: int | None = None,
    dealt: bool = True,
) -> bool:
    """End an attempt that failed for an infrastructure reason: no result, nothing charged to a bot.

    Its bots may have seen its deal, so the match moves on to a fresh one (`_fresh_deal`), and so does its
    duplicate twin if the twin is not finished or being played; a twin that is keeps its deal, and the two are no
    longer a pair. Not `dealt` (refused before any of its bots started: a machine without a bot's folder, or
    without a sandbox), the match keeps its deal and its twin. The match goes back to the queue with the
    error kept for the operator, or to `failed` once it has been attempted `max_attempts` times, so a match that
    can never run does not loop forever. False (and nothing changed) if this worker no longer holds the match.
    Commits.
    """
    if max_attempts is not None:
        check_int("max_attempts", max_attempts, low=1)
    status: Any = MatchStatus.QUEUED
    if max_attempts is not None:
        status = sa.case((col(Match.attempt) >= max_attempts, MatchStatus.FAILED), else_=MatchStatus.QUEUED)
    result = session.exec(
        sa.update(Match)
        .where(_held_by(match_id, worker))
        .values(status=status, worker=None, lease_expires_at=None, error=str(error)[:MAX_ERROR_CHARS] or "voided")
        .execution_options(synchronize_session=False)
    )
    voided = result.rowcount == 1
    if voided and dealt:
        _fresh_deal(session, match_id)
    _expire_matches(session)
    session.commit()
    if voided:
        log.warning("match_id=%s voided by worker %s (not charged to a bot): %s", match_id, worker, error)
    return voided


def _fresh_deal(session: Session, match_id: int) -> None:
    """Move a match its caller holds (or has just requeued, in this transaction) on to a fresh deal.

    No bot ever sees a deal twice: the match's deal number goes past its own and its twin's, and its seed is
    derived again from the league's secret. Its duplicate twin moves with it, to the same fresh deal, if the twin
    is queued or failed; a twin that is finished or being played keeps its deal (its result stands), and the two
    are then no longer a pair (`workers/tournament/results.py`). A league created before secrets existed keeps
    its public seeds. Does not commit.
    """
    match = session.get(Match, match_id, populate_existing=True)
    assert match is not None, "the caller holds the match"
    league = session.get(League, match.league_id)
    assert league is not None, "a match's league is a foreign key"
    if league.secret is None:
        return
    twin = None
    if match.duplicate_pair is not None:
        twin = session.exec(
            select(Match)
            .where(
                col(Match.league_id) == match.league_id,
                col(Match.duplicate_pair) == match.duplicate_pair,
                col(Match.id) != match_id,
            )
            .execution_options(populate_existing=True)
        ).first()
    deal = max(match.deal, twin.deal if twin is not None else 0) + 1
    seed = derived_seed(
        parse_secret(league.secret),
        league=league.name,
        duplicate_pair=match.duplicate_pair,
        index=match.index,
        deal=deal,
        pairings=pairing_count(len(league_entrants(session, league))),
    )
    session.exec(
        sa.update(Match)
        .where(col(Match.id) == match_id)
        .values(deal=deal, seed=seed)
        .execution_options(synchronize_session=False)
    )
    if twin is not None:
        moved = session.exec(
            sa.update(Match)
            .where(
                col(Match.id) == twin.id,
                col(Match.deal) == twin.deal,
                col(Match.status).in_([MatchStatus.QUEUED, MatchStatus.FAILED]),
            )
            .values(deal=deal, seed=seed)
            .execution_options(synchronize_session=False)
        )
        if moved.rowcount != 1:
            log.info(
                "match_id=%s moved to deal %s without its twin %s (finished or being played): the pair is broken",
                match_id,
                deal,
                twin.id,
            )
    log.info("match_id=%s moved to a fresh deal %s", match_id, deal)


def _expire_matches(session: Session, match_id: int | None = None) -> None:
    """Forget what the session holds of matches a bulk UPDATE changed (all, or one), so reads reload them."""
    for row in list(session.identity_map.values()):
        if isinstance(row, Match) and (match_id is None or row.id == match_id):
            session.expire(row)


REFUSAL_TTL_S = 600.0
"""How long a machine's refusal counts after it was last made (`refuse_match`): what a machine lacked may have been
given to it since (a folder copied, bubblewrap installed), which only a worker that refused there notices
(`clear_refusals`)."""


def machine_of(worker: str) -> str:
    """The machine of a worker named `host:pid` (`workers.play.worker_name`)."""
    return worker.rpartition(":")[0] or worker


def machine_seen(session: Session, machine: str, *, now: datetime | None = None) -> None:
    """Note that a worker of `machine` is alive now (`workers.play.start_reclaimer`, every few seconds). Commits."""
    now = now or database_now(session)
    _upsert(session, Machine, {"name": machine, "seen_at": now}, ("name",), {"seen_at": now})
    session.commit()


def refuse_match(
    session: Session,
    worker: str,
    *,
    needs: Collection[str],
    lacks: Collection[str],
    live_s: float,
    now: datetime | None = None,
) -> list[str]:
    """Record that `worker`'s machine lacks `lacks` (`sandbox`, or `folder:ID`: bot version ID's folder) to launch a
    match that `needs` them, and name the machines that may launch it: those whose workers were seen within `live_s`
    (`machine_seen`) and that have refused none of what it needs within `REFUSAL_TTL_S`. [] where there is none: the
    match can be played nowhere now. Commits; the match itself is the caller's to give back (`release_claim`) or to
    fail (`void_match`)."""
    check_worker(worker)
    machine = machine_of(worker)
    now = now or database_now(session)
    for lacking in lacks:
        _upsert(session, Refusal, {"machine": machine, "lacks": lacking, "at": now}, ("machine", "lacks"), {"at": now})
    _upsert(session, Machine, {"name": machine, "seen_at": now}, ("name",), {"seen_at": now})
    live = session.scalars(sa.select(col(Machine.name)).where(col(Machine.seen_at) >= now - timedelta(seconds=live_s)))
    refused = session.scalars(
        sa.select(col(Refusal.machine)).where(
            col(Refusal.lacks).in_(list(needs)), col(Refusal.at) >= now - timedelta(seconds=REFUSAL_TTL_S)
        )
    )
    capable = sorted(set(live) - set(refused))
    session.commit()
    return capable


def clear_refusals(session: Session, machine: str, lacks: Collection[str]) -> None:
    """Forget that `machine` lacked `lacks`: one of its workers has found them since. Commits."""
    session.exec(
        sa.delete(Refusal)
        .where(col(Refusal.machine) == machine, col(Refusal.lacks).in_(list(lacks)))
        .execution_options(synchronize_session=False)
    )
    session.commit()


def _upsert(
    session: Session,
    table: type[Machine] | type[Refusal],
    values: dict[str, Any],
    keys: Sequence[str],
    update: dict[str, Any],
) -> None:
    """Insert a row, or update the one with its `keys` (one statement: two workers may write the same row at once)."""
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    session.execute(dialect.insert(table).values(values).on_conflict_do_update(index_elements=list(keys), set_=update))


def _held_by(match_id: int, worker: str) -> sa.ColumnElement[bool]:
    return sa.and_(col(Match.id) == match_id, col(Match.status) == MatchStatus.RUNNING, col(Match.worker) == worker)


def check_worker(worker: str) -> None:
    """A worker's name (`host:pid`, or MUS_WORKER_NAME) as stored with the matches it holds."""
    if not worker.strip() or len(worker) > 200:
        raise InvalidInput(f"a worker name must be 1 to 200 characters, got {worker!r}")


def _check_lease(lease_s: float) -> timedelta:
    if not (math.isfinite(lease_s) and lease_s > 0):
        raise InvalidInput(f"a lease must be a positive number of seconds, got {lease_s!r}")
    return timedelta(seconds=lease_s)
