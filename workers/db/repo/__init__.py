"""The repository: plain functions over a `Session` that the CLI and the Celery tasks call, one module per aggregate.

- `bots`: bots and their versions (content hashes, remote tokens);
- `leagues`: leagues, their entrants and their planned matches (what a worker reads to play one);
- `leases`: the worker protocol (claims, heartbeats, requeues, voids, fresh deals);
- `results`: finished matches (a result written once; the league's results read back for standings);
- `replays`: the stored replay records.

Callers write `from workers.db import repo` and `repo.add_bot(...)`: this package re-exports each module's public
functions and values, so a caller need not know which aggregate a function belongs to.

No Celery, no CLI and no tournament logic here (pairings, schedules and Elo live in `workers/tournament`): only
what is stored, how it is found, and the guarantees that only the database can give. What the types already
guarantee is not checked again; what a user or another process supplies is (names, options, plans, lease
lengths, outcomes given as JSON, faults, replay records).

Transactions:
- Bots, leagues and every read: the function validates all its input before it writes anything, flushes, and
  leaves the commit to the caller (`session_scope`), so several calls can form one transaction and bad input (a
  `DbError`) leaves nothing half-written.
- The worker protocol (`leases`, and `results.record_result`) commits before returning: a claim or a heartbeat
  that is not committed is invisible to the other workers and, on PostgreSQL, keeps the row locked. Call these on
  a session with nothing pending.
"""

from __future__ import annotations

from workers.db.errors import Conflict, DbError, InvalidInput, NotFound
from workers.db.repo.bots import (
    NEW_DATABASE,
    BotInfo,
    add_bot,
    add_remote_bot,
    check_bot_input,
    content_hash,
    current_content_hash,
    get_bot,
    list_bots,
    remote_bot_for_token,
    remove_bot,
    rotate_remote_token,
    token_sha256,
)
from workers.db.repo.common import LeagueRef, database_now
from workers.db.repo.leagues import (
    Entrant,
    MatchSetup,
    QueuedMatch,
    TeamSetup,
    cancel_league,
    check_league_seed,
    create_league,
    failure_causes,
    finish_complete_leagues,
    finish_league_if_complete,
    get_league,
    get_match,
    half_of,
    league_entrants,
    league_progress,
    list_leagues,
    list_matches,
    match_setup,
    pause_league,
    queued_matches,
    revealed_secret,
    start_league,
    unfinished_match_ids,
)
from workers.db.repo.leases import (
    REFUSAL_TTL_S,
    Pace,
    claim_deferred,
    claim_match,
    claim_twin,
    clear_refusals,
    heartbeat,
    league_pace,
    machine_of,
    machine_seen,
    refuse_match,
    release_claim,
    requeue_expired,
    requeue_failed,
    void_match,
)
from workers.db.repo.replays import get_replay, replay_match_ids, unplayed_twin
from workers.db.repo.results import (
    FinishedMatch,
    MatchDetails,
    decision_summary,
    get_match_details,
    league_results,
    outcome_record,
    record_result,
)

__all__ = [
    "NEW_DATABASE",
    "REFUSAL_TTL_S",
    "BotInfo",
    "Conflict",
    "DbError",
    "Entrant",
    "FinishedMatch",
    "InvalidInput",
    "LeagueRef",
    "MatchDetails",
    "MatchSetup",
    "NotFound",
    "Pace",
    "QueuedMatch",
    "TeamSetup",
    "add_bot",
    "add_remote_bot",
    "cancel_league",
    "check_bot_input",
    "check_league_seed",
    "claim_deferred",
    "claim_match",
    "claim_twin",
    "clear_refusals",
    "content_hash",
    "create_league",
    "current_content_hash",
    "database_now",
    "decision_summary",
    "failure_causes",
    "finish_complete_leagues",
    "finish_league_if_complete",
    "get_bot",
    "get_league",
    "get_match",
    "get_match_details",
    "get_replay",
    "half_of",
    "heartbeat",
    "league_entrants",
    "league_pace",
    "league_progress",
    "league_results",
    "list_bots",
    "list_leagues",
    "list_matches",
    "machine_of",
    "machine_seen",
    "match_setup",
    "outcome_record",
    "pause_league",
    "queued_matches",
    "record_result",
    "refuse_match",
    "release_claim",
    "remote_bot_for_token",
    "remove_bot",
    "replay_match_ids",
    "requeue_expired",
    "requeue_failed",
    "revealed_secret",
    "rotate_remote_token",
    "start_league",
    "token_sha256",
    "unfinished_match_ids",
    "unplayed_twin",
    "void_match",
]
