"""Playing one league match by id: claim it, run it, store it. The Celery task is a thin wrapper around this.

Idempotent by construction: the match is claimed in the database first (a finished match, or one another live
worker holds, is not claimable, so a redelivered message is a no-op), and the result, its replay and the match
status are written in one transaction behind a unique key. Anything that goes wrong outside the bots (the
referee, a program that cannot start, the database) voids the attempt: the match goes back to the queue, and
nothing is charged to a bot.

A match with a remote bot is played on the standalone referee (`mus referee serve`, at MUS_REFEREE_ADDRESS,
with its admin token in MUS_ADMIN_TOKEN), which offers the remote bot its seats through the lobby; the hosted
side is launched here, pointed at that referee. A remote bot that does not show up within the league's
`absent_limit_s` is `absent`, and its team forfeits: a result like any other. The lease is kept by the
heartbeat for as long as the match waits.

Every hosted seat runs in its own sandbox (workers/launcher.py, docs/sandbox.md) unless the league was created
with `--no-sandbox`. Two things refuse a match before it is played, never charging a bot: a machine without a
sandbox (bubblewrap) or without a bot's folder leaves it to the live machines that have them (`_refuse`), and
fails it where there is none; a bot whose folder no longer has the content hash of its registered version fails it
at once with a message (playing it again would not help: the league plays the version it was created with, and
that program is gone).

A duplicate pair with a hosted bot whose processes outlive a match (`mus bot add --persistent`) is played whole
by one worker: the twin right after the first match, taken before the first's result is written (`_chains_twin`,
`repo.claim_twin`), so no process that saw a deal runs while another worker of its host plays the other twin.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from referee.engine.outcome import MatchOutcome
from referee.engine.rules import Rules
from referee.service.loop import run
from workers import cpu_log
from workers.commands import add_command_line
from workers.db import repo
from workers.db.errors import DbError
from workers.db.models import Match, MatchStatus
from workers.db.repo import MatchSetup, TeamSetup
from workers.db.session import ensure_schema, make_engine, session_scope, sqlite_file
from workers.launcher import INSTALL_HINT, BotProgram, Limits, sandbox_available, under_bound_root
from workers.logs import LOG_DIR_VARIABLE, keep_within_limit, log_limit, log_root
from workers.matches import (
    PlayedMatch,
    RemoteBot,
    fault_records,
    incident_records,
    play_on_referee,
    play_programs,
    run_on_worker_referee,
)
from workers.pool import existing_pool, started_here, worker_pool

log = logging.getLogger(__name__)

LEASE_S = float(os.environ.get("MUS_LEASE_S", "60"))
"""How long a claim lasts without a heartbeat; a worker that dies loses its match after this."""

MAX_ATTEMPTS = 3
"""Infrastructure failures in a row after which a match is marked failed instead of requeued."""

REFEREE_ADDRESS_VARIABLE = "MUS_REFEREE_ADDRESS"
"""The standalone referee (`mus referee serve`) that plays the matches of remote bots, as host:port."""

ADMIN_TOKEN_VARIABLE = "MUS_ADMIN_TOKEN"
"""That referee's admin token."""

ADMIN_ADDRESS_VARIABLE = "MUS_REFEREE_ADMIN_ADDRESS"
"""Where that referee serves its admin API on a server of its own (`mus referee serve --admin-address`), as
host:port; the worker's admin calls go there. Default: MUS_REFEREE_ADDRESS."""

DEFER_S = 3.0
"""The longest a match refused because its duplicate twin is being played waits before it is sent again (the
twins never run at the same time: `repo.claim_match`); before the league's first result, the wait (`twin_wait_s`)."""

MIN_DEFER_S = 0.02
"""The shortest such wait."""

MAX_HAND_OFFS = 10
"""Times one message of a match may be handed off (`play_league_match`) before the worker that has it plays it:
two workers can never pass a match back and forth for ever."""

SendAgain = Callable[[float, bool], None]
"""How a match left for later is sent again: `(delay_s, handed_off)`, handed off or else deferred."""

RECLAIM_EVERY_S = max(LEASE_S / 2, 0.5)
"""How often a live worker looks for matches whose worker died (their lease expired), and says its machine is alive
(`repo.machine_seen`)."""

LIVE_S = 3 * RECLAIM_EVERY_S
"""A machine none of whose workers has said so for this long is taken for gone: a match it could launch is not
left to it (`_refuse`)."""


@dataclass(frozen=True)
class _Played:
    """What a played match leaves to store."""

    outcome: MatchOutcome
    record_json: str
    """The replay record as the referee wrote it (`PlayedMatch.record_json`)."""
    faults: list[dict[str, Any]]
    """The rules' faults, in order (`fault_records`)."""
    incidents: list[dict[str, Any]]
    """The referee's incidents, in order (`incident_records`)."""
    decision_seconds: list[list[float]]
    bots_cpu_s: float | None = None
    """CPU-seconds of the match's seat processes, counted by their cgroups (None: not counted there)."""


def worker_name() -> str:
    """This process as a worker: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


@cache
def database() -> Engine:
    """The database of this process (MUS_DATABASE_URL), migrated to the current schema."""
    engine = make_engine()
    ensure_schema(engine)
    return engine


_INHERITED: list[object] = []
"""The connection pools a forked process found in its parent's engine: kept, never used, never closed."""


def after_fork() -> None:
    """In a process forked from a worker (a prefork worker's child): the engine's connections are the parent's,
    so this process takes new ones. A review killed a `mus worker`'s child: its replacement, forked once the parent
    held a connection (the lease reclaimer's), sent its queries down the parent's socket, and both workers failed
    on each other's statements until a match was left queued with no message (stop 39). The old pool is kept
    here: collected, it would close the parent's SQLite connections from this process too (psycopg 3 closes none
    of another process's)."""
    if database.cache_info().currsize:
        engine = database()
        _INHERITED.append(engine.pool)
        engine.dispose(close=False)


def logs_dir(match_id: int) -> Path:
    """Where the bots' output of a match goes (MUS_LOG_DIR, default ./.mus-logs); made when a seat is launched
    there (a match whose seats are all pooled writes nothing of its own: its processes log in the pool's folder).
    The oldest logs make room first, should they pass MUS_LOG_LIMIT (`workers.logs`)."""
    keep_within_limit(log_root(), log_limit())
    return log_root() / f"match-{match_id}"


def play_league_match(
    match_id: int,
    *,
    worker: str | None = None,
    lease_s: float = LEASE_S,
    again: SendAgain | None = None,
    may_hand_off: bool = True,
) -> str:
    """Play match `match_id` if it is free: 'finished', 'skipped' (finished, failed, held by a live worker, or of a
    paused league), 'deferred' (its duplicate twin is being played: `again` sends it in about what the twin has left),
    'handed_off' (left to the workers already playing its half, see `_hand_off_pause`: `again` sends it now, then
    this worker waits for one of them to be free before it takes new work), 'refused' (this machine lacks what it
    needs: left to others that have it, as a handed-off match, `_refuse`), 'failed' or 'void'. Without `again`, a
    match is never handed off, and a deferred one is not sent. A finished match of a pair with a persistent bot has
    its twin played right after it, in this call (`_chains_twin`); the outcome is the first match's."""
    engine = database()
    worker = worker or worker_name()
    cpu = cpu_log.start(match_id)
    with session_scope(engine) as session:
        if repo.claim_match(session, match_id, worker, lease_s) is None:
            if repo.claim_deferred(session, match_id):
                delay = twin_wait_s(repo.league_pace(session, match_id, worker))
                log.info("match_id=%s waits for its duplicate twin to end: sent again in %.2f s", match_id, delay)
                if again is not None:
                    again(delay, False)
                return "deferred"
            log.info("match_id=%s is not free (finished, held by a live worker or paused): nothing to do", match_id)
            return "skipped"
    return _play_claimed(engine, match_id, worker, lease_s, cpu, again, may_hand_off=may_hand_off)


def _play_claimed(
    engine: Engine,
    match_id: int,
    worker: str,
    lease_s: float,
    cpu: cpu_log.MatchCpu | None,
    again: SendAgain | None,
    *,
    may_hand_off: bool,
) -> str:
    """`play_league_match` once this worker holds the match: its outcomes but 'deferred' and 'skipped'."""
    with session_scope(engine) as session:
        setup = repo.match_setup(session, match_id)
        pause = _hand_off_pause(session, setup, worker) if may_hand_off and again is not None else None
        if pause is not None and again is not None:
            if not repo.release_claim(session, match_id, worker):
                log.info("match_id=%s is no longer held by %s (its lease expired): nothing to do", match_id, worker)
                return "skipped"
            log.info("match_id=%s handed off to the workers playing its half; waiting %.3f s", match_id, pause)
            again(0.0, True)
            time.sleep(pause)
            return "handed_off"
        token_hashes = {
            team.bot_name: repo.get_bot(session, team.bot_name).bot.token_sha256 for team in setup.teams if team.remote
        }
        if cpu is not None:
            cpu.lap("database")
        lacking, missing = _missing_folders(setup, worker)
        private = private_paths()  # resolved once a match, for every check below (a link put in place since is seen)
        changed = "" if missing else _exposed_by_folder(setup, private) or _changed_program(setup)
    if cpu is not None:
        cpu.skip()  # the launch checks (content hashes of the bots' folders): the worker's own work
    if missing:  # another machine's worker may have it
        return _refuse(engine, setup, worker, lacking, missing, again, may_hand_off=may_hand_off)
    if changed:
        log.error("match_id=%s refused: %s", match_id, changed)
        with session_scope(engine) as session:
            repo.void_match(session, match_id, worker, changed, max_attempts=1, dealt=False)
        return "failed"
    needs = _needs(setup)
    if "sandbox" in needs and not sandbox_available():
        message = f"refused by worker {worker}: {INSTALL_HINT}, or create the league with --no-sandbox"
        return _refuse(engine, setup, worker, ["sandbox"], message, again, may_hand_off=may_hand_off)
    if "sandbox" in needs and (shown := shown_to_every_seat(private=private)):
        message = f"refused by worker {worker}: {shown}"
        return _refuse(engine, setup, worker, ["sandbox"], message, again, may_hand_off=may_hand_off)
    if found := _REFUSED_HERE.intersection(needs):  # given to this machine since: a folder copied here
        _REFUSED_HERE.difference_update(found)
        with session_scope(engine) as session:
            repo.clear_refusals(session, repo.machine_of(worker), found)
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(engine, match_id, worker, lease_s, stop), daemon=True)
    beat.start()
    started = started_here()
    try:
        played = _play_with_remote_bots(setup, token_hashes) if token_hashes else _play_hosted(setup)
        if cpu is not None:
            cpu.lap("referee", bots_s=played.bots_cpu_s)
            cpu.pool_started = started_here() - started
    except (Exception, asyncio.CancelledError) as error:  # cancelled: a cold shutdown (`workers.app`)
        stop.set()
        log.exception("match_id=%s failed outside the bots: voided", match_id)
        with session_scope(engine) as session:
            repo.void_match(session, match_id, worker, _why_void(error), max_attempts=MAX_ATTEMPTS)
        return "void"
    finally:
        stop.set()
    twin = None
    if _chains_twin(setup):
        with session_scope(engine) as session:
            twin = repo.claim_twin(session, match_id, worker, lease_s)
    with session_scope(engine) as session:
        stored = repo.record_result(
            session,
            match_id,
            worker,
            played.outcome,
            played.record_json,
            played.faults,
            played.decision_seconds,
            incidents=played.incidents,
        )
    if cpu is not None:
        cpu.lap("database")
        cpu.write()
    log.info("match_id=%s %s", match_id, "stored" if stored else "already had a result")
    if twin is not None:
        _play_claimed(engine, twin, worker, lease_s, cpu_log.start(twin), None, may_hand_off=False)
    return "finished"


def _chains_twin(setup: MatchSetup) -> bool:
    """Whether this worker plays the match's duplicate twin itself, right after it (`repo.claim_twin`): where a
    hosted bot of it keeps its processes across matches. Those processes remember the deal; played by another
    worker, the twin could run beside them on the same host, which could tell its seats the deal (docs/leagues.md)."""
    return setup.duplicate_pair is not None and any(team.persistent and not team.remote for team in setup.teams)


def _why_void(error: BaseException) -> str:
    """What a voided match's error says. A worker's cold shutdown (Ctrl-C of `mus league run`, SIGQUIT) ends the
    match in hand: it is cancelled (`workers.app`), or, with a pool that raises into it, ends with what that raises
    (the solo pool's "does not implement kill_job", which `mus league status` showed a newcomer as the match's
    infrastructure error)."""
    from celery.worker import state  # the worker's own shutdown flags, set before it stops the task in hand

    if state.should_terminate:
        return "the worker was stopped during the match (cold shutdown: Ctrl-C of mus league run, or SIGQUIT)"
    return f"{type(error).__name__}: {error}"


def twin_wait_s(pace: repo.Pace) -> float:
    """How soon to try again a match whose twin is being played: about what the twin has left at the league's
    pace, its median time less the twin's so far, or half the twin's time so far once that is more (a twin past
    the pace is likely a long match: it is asked after less and less often); at least a quarter of the median and
    `MIN_DEFER_S`, at most `DEFER_S`. `DEFER_S` before the league's first result; `MIN_DEFER_S` when the twin has
    ended since the claim was refused."""
    if pace.match_s is None:
        return DEFER_S
    if pace.twin_elapsed_s is None:
        return MIN_DEFER_S
    left = max(pace.match_s - pace.twin_elapsed_s, pace.twin_elapsed_s / 2)
    return min(DEFER_S, max(left, pace.match_s / 4, MIN_DEFER_S))


def _hand_off_pause(session: Session, setup: MatchSetup, worker: str) -> float | None:
    """Whether to leave a claimed match to the other workers playing its half, and if so how long to wait before
    taking new work (until one of them is free to take it, jittered so that two workers never keep stepping aside
    in step); None: play.

    A worker that has played its own half's queue out takes the other half's matches, and for them it would start
    that half's pooled processes (a pool never plays both halves of a pair with one process: workers.pool). When
    the workers already playing that half would begin this match sooner, at the league's pace (once their current
    matches and the half's waiting ones are played), than this worker could have started those processes, starting
    them only makes the league end later. Where this worker would play the pair whole (`_chains_twin`), the starts
    weighed are both halves'."""
    if any(team.remote for team in setup.teams):
        return None
    pool = existing_pool(_limits(setup))
    if pool is None:
        return None
    programs = (_program(setup.teams[0]), _program(setup.teams[1]))
    half = repo.half_of(setup.teams[0].version_id, setup.teams[1].version_id)
    start_s = pool.start_cost_s(programs, half)
    if start_s is not None and _chains_twin(setup):
        # Played here, its twin follows at once (`_chains_twin`): the pair's starts are both halves'. The database
        # is asked whether the twin is still to play only when its starts count: a warm pool's every match asked
        # it, about half a millisecond of the worker's CPU in a 3,000-match league (stop 41).
        twin_s = pool.start_cost_s((programs[1], programs[0]), 1 - half)
        if twin_s != 0 and repo.unplayed_twin(session, setup.match_id) is not None:
            start_s = None if twin_s is None else start_s + twin_s
    if not start_s:  # nothing to start, or a bot this pool has never started (no measure to weigh)
        return None
    pace = repo.league_pace(session, setup.match_id, worker)
    if pace.free_in_s is None or pace.match_s is None:
        return None
    # Handed off, it is played after the other workers' matches in hand and the half's waiting ones; here, after
    # the starts. The same match either way: what counts is which begins first.
    if pace.free_in_s + pace.waiting * pace.match_s / pace.others >= start_s:
        return None
    return min(max(pace.free_in_s, MIN_DEFER_S) * random.uniform(1.0, 2.0), DEFER_S)


def _missing_folders(setup: MatchSetup, worker: str) -> tuple[list[str], str]:
    """What of the match's needs (`_needs`) is missing on this machine, its hosted sides' folders that are not here
    (a machine they were never copied to; a review's worker said the bot had changed, and to add it again), and
    why, naming the first; ([], '') where all are here."""
    missing = [team for team in setup.teams if not team.remote and team.folder and not Path(team.folder).is_dir()]
    if not missing:
        return [], ""
    first = missing[0]
    return [_folder_need(team) for team in missing], (
        f"refused by worker {worker}: the folder of bot {first.bot_name!r}, {first.folder}, is not on this machine:"
        " every machine whose workers play hosted bots needs each one's folder at the path it was added from"
    )


def _needs(setup: MatchSetup) -> list[str]:
    """What a machine must have to launch the match's hosted sides (`repo.refuse_match`): each one's folder
    (`folder:ID` of its version), and a sandbox unless the league was created with --no-sandbox."""
    hosted = [team for team in setup.teams if not team.remote]
    return [_folder_need(team) for team in hosted if team.folder] + (["sandbox"] if hosted and setup.sandbox else [])


def _folder_need(team: TeamSetup) -> str:
    return f"folder:{team.version_id}"


_REFUSED_HERE: set[str] = set()
"""What this process has recorded its machine as lacking (`_refuse`): should it find them later (a folder copied
here), the record goes (`repo.clear_refusals`)."""


def _refuse(
    engine: Engine,
    setup: MatchSetup,
    worker: str,
    lacks: list[str],
    why: str,
    again: SendAgain | None,
    *,
    may_hand_off: bool,
) -> str:
    """Give back a claimed match this machine cannot launch (`lacks`: bots' folders, a sandbox), before any of its
    bots started, so on the same deal. 'refused': left to the live machines that can (`repo.refuse_match`), `again`
    sends it now and this worker waits about a match's time before it takes new work, so that one of theirs is
    free to take it; its attempt is not counted. 'failed': no live machine can, so no worker could ever play it
    (the message says what to do). 'void' without `again`, or once its message has been passed on MAX_HAND_OFFS
    times (a machine that can, seen alive, may not take this queue): its attempt counts, and after MAX_ATTEMPTS
    it fails, so it never loops for ever."""
    log.error("match_id=%s %s", setup.match_id, why)
    _REFUSED_HERE.update(lacks)
    with session_scope(engine) as session:
        capable = repo.refuse_match(session, worker, needs=_needs(setup), lacks=lacks, live_s=LIVE_S)
        if not capable:
            alone = (
                f"{why}; no other machine whose workers were seen in the last {LIVE_S:g} s has it: give it to one"
                " (or start a worker where it is), then `mus league run` again"
            )
            voided = repo.void_match(session, setup.match_id, worker, alone, max_attempts=1, dealt=False)
            return "failed" if voided else "skipped"
        left = f"{why}; left to the workers of {', '.join(capable)}"
        if again is None or not may_hand_off:
            voided = repo.void_match(session, setup.match_id, worker, left, max_attempts=MAX_ATTEMPTS, dealt=False)
            return "void" if voided else "skipped"
        if not repo.release_claim(session, setup.match_id, worker, error=left):
            return "skipped"
        pace = repo.league_pace(session, setup.match_id, worker)
    log.warning("match_id=%s left to the workers of %s", setup.match_id, ", ".join(capable))
    again(0.0, True)
    time.sleep(min(max(pace.match_s or DEFER_S, MIN_DEFER_S) * random.uniform(1.0, 2.0), DEFER_S))
    return "refused"


def _changed_program(setup: MatchSetup) -> str:
    """Why a hosted side cannot be launched as registered (its folder changed since `mus bot add`), or ''."""
    for team in setup.teams:
        if not team.remote and (changed := changed_since_added(team.bot_name, team.version_number, team)):
            return changed
    return ""


def changed_since_added(bot_name: str, number: int, version: _Registered) -> str:
    """Why version `number` of hosted bot `bot_name` can no longer be launched as registered (its command or
    folder no longer has its content hash), or ''. A worker refuses such a match; `mus league create` such an
    entrant, before its league is planned."""
    try:
        now = repo.current_content_hash(version.command, version.folder)
    except DbError as error:
        now = f"unreadable ({error})"
    if now == version.content_hash:
        return ""
    where = f"its folder {version.folder} on {socket.gethostname()}" if version.folder else "its command"
    readd = add_command_line(
        bot_name, version.command, version.folder, persistent=version.persistent, language=version.language
    )
    return (
        f"bot {bot_name!r} version {number} changed since it was added ({where} no longer has its content hash):"
        f" restore it to play this version, or `{readd}` the new version and enter it in a new league"
    )


class _Registered(Protocol):
    """What a registered program version is hashed from, and the hash it had (`BotVersion`, `TeamSetup`)."""

    @property
    def command(self) -> Sequence[str]: ...
    @property
    def folder(self) -> str | None: ...
    @property
    def content_hash(self) -> str: ...
    @property
    def persistent(self) -> bool: ...
    @property
    def language(self) -> str: ...


def exposed_by(folder: Path, *, existing: bool = False, private: Mapping[Path, str] | None = None) -> Path | None:
    """This deployment's database file, broker folder, logs or temporary folder (`private_paths`), if `folder`
    holds one of them (a bot's folder is bound into its sandbox, so the bot could read them: a bot added from the
    project's root, say); else None. `mus bot add` refuses such a folder, and a worker refuses a match whose bot's
    folder has come to hold one; `mus match play` and `mus bot check`, which make none of them, a folder that holds
    one that is there (`existing`)."""
    folder = folder.resolve()
    private = private_paths() if private is None else private
    return next((path for path in private if path.is_relative_to(folder) and (not existing or path.exists())), None)


def private_paths() -> dict[Path, str]:
    """What no seat may read, each with the setting that moves it: this deployment's database file (its -wal and
    -shm lie beside it), the embedded broker's folder, the logs, and the temporary folder where the seats' sockets
    are made (to a worker that is not root, its seats are the same user, by their user namespace)."""
    from workers.app import broker_dir  # not at import: the app module makes the embedded broker's folders

    paths = {
        sqlite_file(): "MUS_DATABASE_URL",
        broker_dir(): "MUS_BROKER_DIR",
        log_root(): LOG_DIR_VARIABLE,
        Path(tempfile.gettempdir()).resolve(): "TMPDIR",
    }
    return {path: setting for path, setting in paths.items() if path is not None}


def shown_to_every_seat(*, existing: bool = False, private: Mapping[Path, str] | None = None) -> str:
    """Why a sandboxed seat would read one of this deployment's private files (`private_paths`) where it lies,
    under a folder every sandbox binds whole (`under_bound_root`: /usr, the venv...), or ''. A worker refuses a
    sandboxed match then, and `mus league run` a sandboxed league; `mus match play` and `mus bot check`, which make
    none of them, only for those that are there (`existing`). `private`: `private_paths()`, if the caller has them."""
    private = private_paths() if private is None else private
    if (found := under_bound_root(path for path in private if not existing or path.exists())) is None:
        return ""
    path, root = found
    default = "" if private[path] == "TMPDIR" else " (or, for its default, run mus from a folder outside it)"
    return (
        f"{path} lies under {root}, which every bot's sandbox binds read-only, so every bot could read it: set"
        f" {private[path]} to a place outside {root}{default}"
    )


def _exposed_by_folder(setup: MatchSetup, private: Mapping[Path, str]) -> str:
    """Why a hosted side's folder cannot be bound into its sandbox (`exposed_by`, `nested_folders`), or ''."""
    for team in setup.teams:
        if team.remote or not team.folder:
            continue
        if (path := exposed_by(Path(team.folder), private=private)) is not None:
            return (
                f"bot {team.bot_name!r}: its folder {Path(team.folder).resolve()} holds {path}, which its sandbox"
                " would show it; move the bot to a folder of its own and `mus bot add` it from there"
            )
    first, second = (Path(team.folder) if team.folder and not team.remote else None for team in setup.teams)
    if first is not None and second is not None and nested_folders(first, second):
        return (
            f"the folders of bots {setup.teams[0].bot_name!r} ({first.resolve()}) and {setup.teams[1].bot_name!r}"
            f" ({second.resolve()}) lie one inside the other, and a sandbox binds a bot's folder whole: each bot"
            " needs a folder of its own, `mus bot add` from there"
        )
    return ""


def nested_folders(one: Path, other: Path) -> bool:
    """Whether one of two bots' folders lies inside the other (equal ones are one bot's, shared by its variants):
    the sandbox binds a bot's folder whole, and a review's bot added with `bots/` read the files of the bot in
    `bots/victim/`, its opening book, in a league match (helper-87)."""
    one, other = one.resolve(), other.resolve()
    return one != other and (one.is_relative_to(other) or other.is_relative_to(one))


def _limits(setup: MatchSetup) -> Limits | None:
    """The sandbox of every hosted seat, or None for a league created with `--no-sandbox`."""
    return Limits() if setup.sandbox else None


def _play_hosted(setup: MatchSetup) -> _Played:
    """Both sides are programs: play them against the referee embedded in this worker, which outlives the match
    (`run_on_worker_referee`)."""
    programs = tuple(_program(team) for team in setup.teams)
    rules = Rules.from_options(setup.rules)
    limits = _limits(setup)
    pool = None
    if any(program.persistent for program in programs):
        pool = worker_pool(limits, log_root() / "pool")
    played = run_on_worker_referee(
        lambda referee: play_programs(
            (programs[0], programs[1]),
            rules,
            setup.seed,
            log_dir=logs_dir(setup.match_id),
            sandbox=limits,
            pool=pool,
            referee=referee,
            half=repo.half_of(setup.teams[0].version_id, setup.teams[1].version_id),
            label=f"{setup.league_name}/{setup.match_id}/{setup.attempt}",
        )
    )
    return _to_store(played)


def _play_with_remote_bots(setup: MatchSetup, token_hashes: dict[str, str | None]) -> _Played:
    """A remote side: play on the standalone referee, which offers the remote bot its seats in the lobby.

    Its seats wait up to the league's `absent_limit_s`; the hosted side is launched here. A missing setting or
    an unreachable referee raises (the attempt is voided, nobody is charged).
    """
    address = os.environ.get(REFEREE_ADDRESS_VARIABLE, "").strip()
    if not address:
        raise RuntimeError(f"remote bots need {REFEREE_ADDRESS_VARIABLE} (mus referee serve)")
    admin_token = os.environ.get(ADMIN_TOKEN_VARIABLE, "")
    if not admin_token:
        raise RuntimeError(f"remote bots need {ADMIN_TOKEN_VARIABLE} (the admin token of the referee at {address})")
    teams: list[BotProgram | RemoteBot] = []
    for team in setup.teams:
        if not team.remote:
            teams.append(_program(team))
            continue
        token_hash = token_hashes.get(team.bot_name)
        if not token_hash:
            raise RuntimeError(f"remote bot {team.bot_name!r} has no token (it was removed)")
        teams.append(RemoteBot(team.bot_name, token_hash))
    played = run(
        play_on_referee(
            (teams[0], teams[1]),
            Rules.from_options(setup.rules),
            setup.seed,
            address=address,
            admin_address=os.environ.get(ADMIN_ADDRESS_VARIABLE, "").strip() or None,
            admin_token=admin_token,
            external_id=f"{setup.league_name}/{setup.match_id}/{setup.attempt}",
            join_timeout_s=setup.absent_limit_s,
            log_dir=logs_dir(setup.match_id),
            sandbox=_limits(setup),
        )
    )
    return _to_store(played)


def _to_store(played: PlayedMatch) -> _Played:
    """What the database keeps of a played match, whichever referee played it."""
    outcome = played.match.outcome
    assert outcome is not None  # a finished match's (`_resimulated` and `_finished` refuse any other)
    return _Played(
        outcome,
        played.record_json,
        fault_records(played.match),
        incident_records(played.incidents),
        [list(seconds) for seconds in played.decision_seconds],
        played.bots_cpu_s,
    )


def _program(team: TeamSetup) -> BotProgram:
    folder = Path(team.folder) if team.folder else None
    return BotProgram(team.bot_name, team.command, folder, version=str(team.version_id), persistent=team.persistent)


def _heartbeat(engine: Engine, match_id: int, worker: str, lease_s: float, stop: threading.Event) -> None:
    """Keep the lease while the match runs, so no other worker takes it over."""
    while not stop.wait(lease_s / 3):
        try:
            with session_scope(engine) as session:
                if not repo.heartbeat(session, match_id, worker, lease_s):
                    log.warning("match_id=%s: lease lost by %s", match_id, worker)
                    return
        except Exception:
            log.exception("match_id=%s: heartbeat failed; retrying", match_id)


# ------------------------------------------------------------------------------ expired leases


def reclaim_expired(engine: Engine, send: Callable[[int, int], None]) -> list[int]:
    """Requeue every running match whose lease has expired (its worker died or hung) and send it again.

    Any live worker runs this (`start_reclaimer`), not only `mus league run`: a league queued on a broker by a
    run that has since stopped still finishes. Both queries use one `now`, so exactly the matches found are
    requeued; a duplicate message is harmless (`play_match` claims before it plays). `send(match_id, half)`.
    """
    with session_scope(engine) as session:
        now = repo.database_now(session)
        expired = session.exec(
            select(Match.id, Match.team0_version_id, Match.team1_version_id).where(
                col(Match.status) == MatchStatus.RUNNING, col(Match.lease_expires_at) < now
            )
        ).all()
        if expired:
            repo.requeue_expired(session, now=now)
    sent = []
    for match_id, team0, team1 in expired:
        if match_id is not None:
            send(match_id, repo.half_of(team0, team1))
            sent.append(match_id)
    return sent


def start_reclaimer(
    engine: Engine, send: Callable[[int, int], None], every_s: float = RECLAIM_EVERY_S
) -> threading.Event:
    """Run `reclaim_expired` every `every_s` seconds on a daemon thread, until the returned event is set, and finish
    the leagues whose matches have all finished (`repo.finish_complete_leagues`)."""
    stop = threading.Event()
    machine = repo.machine_of(worker_name())

    def loop() -> None:
        while True:
            try:
                with session_scope(engine) as session:
                    repo.machine_seen(session, machine)
            except Exception:
                log.exception("saying this machine's workers are alive failed; trying again in %.1f s", every_s)
            if stop.wait(every_s):
                return
            try:
                reclaimed = reclaim_expired(engine, send)
            except Exception:
                log.exception("reclaiming expired leases failed; trying again in %.1f s", every_s)
                continue
            if reclaimed:
                log.warning("requeued and sent again match(es) %s: their worker's lease expired", reclaimed)
            try:
                with session_scope(engine) as session:
                    finished = repo.finish_complete_leagues(session)
            except Exception:
                log.exception("finishing complete leagues failed; trying again in %.1f s", every_s)
                continue
            for name in finished:
                log.info("league %s finished: every match has its result (its secret is published)", name)

    threading.Thread(target=loop, name="mus-reclaimer", daemon=True).start()
    return stop
