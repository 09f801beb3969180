"""`mus league run`: queue a league's unfinished matches and follow them to the end from the database.

On the embedded default it also starts the Celery worker processes (one per core unless told otherwise) on the
embedded broker and stops them when the league is done; with `MUS_BROKER_URL` set it only queues, and the
`mus worker` processes running elsewhere play. Progress, resume and the end are database queries: a match
whose worker died goes back to the queue when its lease expires and is sent again; running the command again
after Ctrl-C queues only what is unfinished. A league paused meanwhile (`mus league pause`) ends the run; running
it again resumes the league.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import grpc
from sqlalchemy.engine import Engine

from workers import broker
from workers.app import broker_dir, is_embedded, make_app, send_match, waiting_messages, worker_queues
from workers.db import repo
from workers.db.errors import Conflict, DbError
from workers.db.models import LeagueStatus, MatchStatus
from workers.db.session import database_url, session_scope, sqlite_file
from workers.launcher import die_with_parent
from workers.matches import RemoteBot, register_remote_bots
from workers.play import ADMIN_TOKEN_VARIABLE, REFEREE_ADDRESS_VARIABLE

log = logging.getLogger(__name__)

POLL_S = 0.25
"""How often progress is read from the database."""

RESEND_AFTER_S = 30.0
"""Every so often the run reads all the league's queued matches (else only those queued again after an attempt,
which it sends at once) and sends again each whose message went this long ago and is lost (`_Dispatch.lost`). A
duplicate is harmless (`play_match` claims the match before it plays) but not free: resending every match still
queued every 30 s made a league of 3,000 matches queue 9,000 more messages in its first two minutes, each a
worker's task."""


INTERRUPT_GRACE_S = 1.0
"""How long Ctrl-C of `mus league run` lets its workers' matches in hand go on to their end (`EmbeddedWorkers.stop`)."""


@dataclass
class _Sent:
    attempt: int
    at: float
    half: int
    order: int
    """How many messages the run had sent before this one: those of one poll are sent at one `at`."""
    paired: bool
    """Its match has a duplicate twin (`_Dispatch`: its claim tells nothing of its message)."""


@dataclass
class _Dispatch:
    """What the run has sent, and which of its messages it takes for lost.

    A queue is first in, first out: once a message sent after a match's own has been taken (its match claimed) for
    a whole RESEND_AFTER_S, the match's own, if it is still queued on the same attempt, went missing (a worker died
    between taking it and claiming the match, a broker lost it). So did every message of a half whose queue holds
    none. Other leagues' messages in a shared queue (a second run in the folder, a shared MUS_QUEUE) hide neither.
    A match of a duplicate pair is no such evidence: a worker that plays a pair whole claims the twin without
    taking its message (`repo.claim_twin`), and counting those claims resent 758 of a 1,000-match league's matches
    (a review, stop 40); there a lost message is sent again once its half's queue is empty. A match deferred for
    its twin (sent again for later) may be taken for lost and sent twice: harmless."""

    queue_depth: Callable[[int], int | None]
    """How many messages wait in a half's queue (`run_league`), asked at most once a half and full read."""
    depths: dict[int, int | None] = field(default_factory=dict)
    sent: dict[int, _Sent] = field(default_factory=dict)
    overtaken: dict[int, int] = field(default_factory=dict)
    """Per half, the `order` of the newest message that had been taken by the last full read."""
    previous: dict[int, int] = field(default_factory=dict)
    """The same as of the full read before: a message sent before it has been overtaken for a whole period."""
    count: int = 0

    def due(self, match: repo.QueuedMatch) -> bool:
        """Whether `match`, read queued, has yet to be sent on its current attempt."""
        last = self.sent.get(match.id)
        return last is None or last.attempt != match.attempt

    def read_all(self, queued: Sequence[repo.QueuedMatch]) -> None:
        """Every queued match, read now: note how far each half's queue has been taken."""
        attempts = {match.id: match.attempt for match in queued}
        overtaken: dict[int, int] = {}
        for match_id, last in self.sent.items():
            if not last.paired and attempts.get(match_id) != last.attempt:  # claimed since it was sent
                overtaken[last.half] = max(overtaken.get(last.half, -1), last.order)
        self.previous, self.overtaken = self.overtaken, overtaken
        self.depths.clear()

    def lost(self, match: repo.QueuedMatch, now: float) -> bool:
        """Whether `match`'s message, sent on its current attempt at least RESEND_AFTER_S ago, is lost."""
        last = self.sent[match.id]
        if now - last.at < RESEND_AFTER_S:
            return False
        if last.order < self.previous.get(match.half, -1):
            return True
        if match.half not in self.depths:
            self.depths[match.half] = self.queue_depth(match.half)
        return not self.depths[match.half]

    def note(self, match: repo.QueuedMatch, now: float) -> None:
        self.sent[match.id] = _Sent(match.attempt, now, match.half, self.count, match.duplicate_pair is not None)
        self.count += 1


def worker_preexec(cores: Collection[int] | None) -> Callable[[], None]:
    """A worker's `preexec_fn`: it dies with this process, on `cores` if given (only prctl, getppid and
    sched_setaffinity run between fork and exec). `mus bench league` starts its pinned processes with it too."""
    arm = die_with_parent()
    if cores is None:
        return arm

    def setup() -> None:
        arm()
        os.sched_setaffinity(0, cores)

    return setup


@dataclass
class EmbeddedWorkers:
    """Celery worker processes started for one `mus league run` on the embedded broker."""

    count: int
    environment: Callable[[int], Mapping[str, str]] = lambda index: {}
    """What the `index`th worker's environment adds to this process's (`mus bench league`: a host play lock each)."""
    cores: Callable[[int], Collection[int] | None] = lambda index: None
    """The cores the `index`th worker may run on (`mus bench league`: one each), set before it runs any code, so
    that everything it starts, its bots included, inherits them; None: this process's."""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    restarts: int = 0

    def command(self, index: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "workers.app",
            "worker",
            "--pool=solo",
            "--loglevel=WARNING",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-n",
            f"mus-embedded-{index}@%h",
            "-Q",
            worker_queues(index % 2),
        ]

    def start(self) -> None:
        for index in range(self.count):
            self.processes.append(self._spawn(index))

    def _spawn(self, index: int) -> subprocess.Popen[bytes]:
        env = {**os.environ, **self.environment(index)}
        env["MUS_DATABASE_URL"] = database_url()
        env["MUS_BROKER_DIR"] = str(broker_dir())
        log_file = broker_dir() / f"worker-{index}.log"
        with log_file.open("ab") as output:
            # The workers die with this process (kill -9 included); their sandboxed bots die with them (bwrap's
            # --die-with-parent). PR_SET_PDEATHSIG fires when the thread that started them ends: run_league's.
            return subprocess.Popen(
                self.command(index),
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=worker_preexec(self.cores(index)),
            )

    def revive(self) -> dict[str, str]:
        """Replace the worker processes that died; what became of each, by its worker name (`worker_names`), so
        that its match is requeued now rather than when its lease expires."""
        dead: dict[str, str] = {}
        for index, process in enumerate(self.processes):
            if process.poll() is not None:
                log.warning("embedded worker %d exited with %s; starting another", index, process.returncode)
                dead[_worker_name(process)] = f"exited with {process.returncode}"
                self.processes[index] = self._spawn(index)
                self.restarts += 1
        return dead

    def worker_names(self) -> set[str]:
        return {_worker_name(process) for process in self.processes}

    def stop(self, *, finished: bool = False) -> None:
        """Ask every worker to stop once the task in hand is done (Celery's warm shutdown), then kill stragglers
        after a few seconds. `finished`: the league's last result is stored, but its worker may still be closing the
        match (its log lines, `MUS_CPU_LOG`), which a cold shutdown cut short. Interrupted (Ctrl-C): a worker whose
        match has not ended within INTERRUPT_GRACE_S is stopped at once (cold shutdown: its match is voided, and
        played again on a fresh deal). Cold at once voided a match of instant bots that had 70 ms to go, and broke
        its duplicate pair: 7 pairs of a chaos review's 2,250 (stop 40)."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        if not finished:
            deadline = time.monotonic() + INTERRUPT_GRACE_S
            for process in self.processes:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=max(deadline - time.monotonic(), 0.01))
            for process in self.processes:
                if process.poll() is None:
                    process.send_signal(signal.SIGQUIT)
        deadline = time.monotonic() + 5
        for process in self.processes:
            remaining = max(deadline - time.monotonic(), 0.1)
            try:
                process.wait(timeout=remaining)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _worker_name(process: subprocess.Popen[bytes]) -> str:
    """An embedded worker's name in the database, as it gives it (`workers.play.worker_name`: host and pid)."""
    import socket

    return f"{socket.gethostname()}:{process.pid}"


@dataclass
class RunReport:
    """How a run ended: the league's counts and whether it completed."""

    progress: dict[str, int]
    completed: bool
    interrupted: bool = False
    paused: bool = False
    """Someone paused the league (`mus league pause`) while it ran."""
    cancelled: bool = False
    """Someone cancelled the league (`mus league cancel`) while it ran."""
    failures: dict[str, int] = field(default_factory=dict)
    """Why its failed matches failed: each error, and how many matches it stopped (`repo.failure_causes`)."""
    worker_restarts: int = 0


def default_worker_count(*, sandboxed: bool = True) -> int:
    """One worker where the bots are confined: one machine plays one match's bots at a time, whatever its workers
    (the host's play lock, docs/pool.md), and each more worker starts pooled processes of its own (`mus demo`, 2
    cores: 5.2-5.4 s with one, 6.7-6.8 s with two). One a core for a `--no-sandbox` league, which takes no lock."""
    return 1 if sandboxed else max(os.cpu_count() or 1, 1)


def run_league(
    engine: Engine,
    league_name: str,
    *,
    workers: int | None = None,
    on_progress: Callable[[dict[str, int]], None] = lambda progress: None,
    send: Callable[[int, int], None] | None = None,
    queue_depth: Callable[[int], int | None] | None = None,
    on_start: Callable[[], None] = lambda: None,
    worker_environment: Callable[[int], Mapping[str, str]] = lambda index: {},
    worker_cores: Callable[[int], Collection[int] | None] = lambda index: None,
) -> RunReport:
    """Queue the league's unfinished matches and wait until none is left (or Ctrl-C). `send(match_id, half)`;
    `queue_depth(half)`: how many messages wait in that half's queue (`workers.app.waiting_messages`, RESEND_AFTER_S);
    `on_start()` before any worker starts; `worker_environment(index)`: what the embedded broker's `index`th
    worker's environment adds to this process's, and `worker_cores(index)` the cores it runs on (None: this
    process's). A league that has ended starts nothing: a finished one reports its
    counts, a cancelled one is refused (Conflict), as is an unknown name (NotFound) and, on the embedded broker,
    a league with remote bots and no standalone referee to play them on; a `MUS_BROKER_URL` that cannot be reached
    raises kombu's OperationalError before anything is changed."""
    with session_scope(engine) as session:
        league = repo.get_league(session, league_name)
        if league.status is LeagueStatus.CANCELLED:
            repo.start_league(session, league)  # raises Conflict, saying why
        if league.status is LeagueStatus.FINISHED:
            return RunReport(repo.league_progress(session, league), completed=True)
        remote = [entrant.bot_name for entrant in repo.league_entrants(session, league) if entrant.remote]
        if (
            remote
            and is_embedded()
            and not (os.environ.get(REFEREE_ADDRESS_VARIABLE) and os.environ.get(ADMIN_TOKEN_VARIABLE))
        ):
            # This run's workers inherit this environment: every match of a remote bot would fail.
            names = ", ".join(remote)
            raise Conflict(
                f"league {league_name!r} has remote bots ({names}): their matches are played on a standalone"
                f" referee, so set {REFEREE_ADDRESS_VARIABLE} and {ADMIN_TOKEN_VARIABLE} (README, remote bots), or"
                f" `mus league cancel {league_name}`"
            )
    if not is_embedded() and send is None:
        # A broker that cannot be reached fails here (kombu's OperationalError), before the league is started.
        with make_app().connection_for_write() as connection:
            connection.ensure_connection(max_retries=1)
    with _one_run(league_name) if is_embedded() else contextlib.nullcontext():
        on_start()
        return _run(engine, league_name, workers, on_progress, send, queue_depth, worker_environment, worker_cores)


def _run(
    engine: Engine,
    league_name: str,
    workers: int | None,
    on_progress: Callable[[dict[str, int]], None],
    send: Callable[[int, int], None] | None,
    queue_depth: Callable[[int], int | None] | None,
    worker_environment: Callable[[int], Mapping[str, str]],
    worker_cores: Callable[[int], Collection[int] | None],
) -> RunReport:
    app = make_app()  # configured from this moment's environment (the broker a test or a user points at)
    send = send or (lambda match_id, half: send_match(app, match_id, half))
    queue_depth = queue_depth or (lambda half: waiting_messages(app, half))
    with session_scope(engine) as session:
        league = repo.get_league(session, league_name)
        league_id = league.id
        sandboxed = league.sandbox
        assert league_id is not None
        remote = [
            RemoteBot(entrant.bot_name, repo.get_bot(session, entrant.bot_name).bot.token_sha256 or "")
            for entrant in repo.league_entrants(session, league_id)
            if entrant.remote
        ]
        repo.start_league(session, league)
        repo.requeue_failed(session, league)
    _register_remote(remote)
    count = workers or default_worker_count(sandboxed=sandboxed)
    embedded = EmbeddedWorkers(count, worker_environment, worker_cores) if is_embedded() else None
    if embedded is not None:
        if not _another_run(league_name):
            _purge_embedded_queue()
        with session_scope(engine) as session:
            # No worker of ours is alive yet: whatever an interrupted run left running is stale.
            for match in repo.list_matches(session, league_id, status=MatchStatus.RUNNING):
                if match.id is not None and match.worker:
                    repo.void_match(session, match.id, match.worker, "the previous run was interrupted")
        embedded.start()
    dispatch = _Dispatch(queue_depth)
    database = _DatabaseFile.of(engine)
    progress: dict[str, int] = {}
    read_all_at = 0.0  # when to read every queued match again (RESEND_AFTER_S)
    try:
        while True:
            read_all = time.monotonic() >= read_all_at
            with session_scope(engine) as session:
                status = repo.get_league(session, league_id).status
                repo.requeue_expired(session, league_id)
                queued = send_order(repo.queued_matches(session, league_id, attempted=not read_all))
                progress = repo.league_progress(session, league_id)
            if read_all:
                read_all_at = time.monotonic() + RESEND_AFTER_S
                dispatch.read_all(queued)
            if status in (LeagueStatus.PAUSED, LeagueStatus.CANCELLED):
                # `mus league pause` or `cancel`, from any terminal: no worker claims a match of it any more
                on_progress(progress)
                if embedded is not None:
                    _stop_embedded(engine, league_id, embedded, f"the league was {status.value}", finished=True)
                    with session_scope(engine) as session:
                        progress = repo.league_progress(session, league_id)
                cancelled = status is LeagueStatus.CANCELLED
                return RunReport(progress, completed=False, paused=not cancelled, cancelled=cancelled)
            if database is not None and (gone := database.gone()):
                if embedded is not None:
                    embedded.stop()
                raise DbError(gone)
            now = time.monotonic()
            for waiting in queued:
                if dispatch.due(waiting) or (read_all and dispatch.lost(waiting, now)):
                    send(waiting.id, waiting.half)
                    dispatch.note(waiting, now)
            on_progress(progress)
            if progress["finished"] + progress.get("failed", 0) >= progress["total"]:
                break
            if embedded is not None and (dead := embedded.revive()):
                with session_scope(engine) as session:
                    for match in repo.list_matches(session, league_id, status=MatchStatus.RUNNING):
                        if match.id is not None and match.worker in dead:
                            why = f"embedded worker {match.worker} {dead[match.worker]} during the match"
                            repo.void_match(session, match.id, match.worker, why)
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        with _not_interrupted():
            return _interrupted(engine, league_id, embedded)
    if embedded is not None:
        embedded.stop(finished=True)
    with session_scope(engine) as session:
        repo.finish_league_if_complete(session, league_id)
        failures = repo.failure_causes(session, league_id) if progress.get("failed") else {}
    return RunReport(
        progress,
        completed=progress["finished"] >= progress["total"],
        worker_restarts=embedded.restarts if embedded else 0,
        failures=failures,
    )


@dataclass(frozen=True)
class _DatabaseFile:
    """The SQLite file a run writes to, as it was when the run began: removed or replaced during the run (a user's
    `rm mus.db`), the run and its workers wrote on into the old file, which nothing could read again, and lost
    every result when they exited (an earlier review)."""

    path: Path
    identity: tuple[int, int]

    @classmethod
    def of(cls, engine: Engine) -> _DatabaseFile | None:
        path = sqlite_file(engine.url)
        if path is None:
            return None
        try:
            found = path.stat()
        except OSError:
            return None
        return cls(path, (found.st_dev, found.st_ino))

    def gone(self) -> str:
        """Why the run must stop (the file is no longer the one it began with), or ''."""
        try:
            found = self.path.stat()
        except OSError:
            found = None
        if found is not None and (found.st_dev, found.st_ino) == self.identity:
            return ""
        what = "removed" if found is None else "replaced by another file"
        return (
            f"the database file {self.path} was {what} while the league ran: the run stopped (its workers too), for"
            " what they would write next would go to the old file and be lost. Restore the file from a backup and"
            " `mus league run` again, or start again on a new database"
        )


def _interrupted(engine: Engine, league_id: int, embedded: EmbeddedWorkers | None) -> RunReport:
    """Ctrl-C (or SIGTERM, `mus league run`): this run's workers stopped, their matches voided, the league paused."""
    if embedded is not None:
        _stop_embedded(engine, league_id, embedded, "the run was interrupted (Ctrl-C or SIGTERM)")
        with session_scope(engine) as session, contextlib.suppress(Conflict):  # Conflict: nothing left to play
            # Paused, as `mus league pause` pauses it: another league's run in this folder shares the queues,
            # and its workers played this league's matches on to its end (a chaos review, stop 39).
            repo.pause_league(session, league_id)
    with session_scope(engine) as session:
        return RunReport(repo.league_progress(session, league_id), completed=False, interrupted=True)


@contextlib.contextmanager
def _not_interrupted() -> Iterator[None]:
    """Ctrl-C pressed again (or SIGTERM) while the run stops its workers would cut that short, and leave their
    matches running and the league open to another run's workers (a chaos review's double Ctrl-C, stop 39): the
    first such signal is answered with a line and waits (stopping the workers takes a few seconds at most,
    `EmbeddedWorkers.stop`), the next one interrupts the clean-up, for a database that does not answer. In the
    main thread only, where signals are handled."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.getsignal(signum) for signum in signals}
    asked: list[int] = []

    def again(signum: int, frame: FrameType | None) -> None:
        asked.append(signum)
        if len(asked) == 1:
            print(
                "stopping the workers (a match not over within a second is voided); once more to leave them as they"
                " are",
                file=sys.stderr,
            )
            return
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)
        raise KeyboardInterrupt

    for signum in signals:
        signal.signal(signum, again)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def _stop_embedded(
    engine: Engine, league_id: int, embedded: EmbeddedWorkers, why: str, *, finished: bool = False
) -> None:
    """Stop this run's workers (`finished`: once the match in hand is done, or 5 s) and put back in the queue the
    matches they still held: played again, on a fresh deal, when the league next runs."""
    names = embedded.worker_names()
    embedded.stop(finished=finished)
    with session_scope(engine) as session:
        for match in repo.list_matches(session, league_id, status=MatchStatus.RUNNING):
            if match.id is not None and match.worker in names:
                repo.void_match(session, match.id, match.worker, why)


def _run_lock(league_name: str) -> Path:
    """The file whose lock a league's `mus league run` holds while it runs (`_one_run`)."""
    return broker_dir() / f"league-{league_name}.lock"


@contextlib.contextmanager
def _one_run(league_name: str) -> Iterator[None]:
    """One `mus league run` of a league at a time on an embedded broker: a second one voided the first's running
    matches as "the previous run was interrupted" and started workers of its own (a newcomer's two runs at once).
    The lock is the kernel's: it goes with the process that held it, however that process ends."""
    broker_dir().mkdir(parents=True, exist_ok=True)
    with _run_lock(league_name).open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Conflict(
                f"league {league_name!r} is being run already (another `mus league run` in this folder): wait for"
                " it, or stop it (Ctrl-C) and run again"
            ) from None
        yield


def send_order(matches: Sequence[repo.QueuedMatch]) -> list[repo.QueuedMatch]:
    """The order to send queued matches in: half 0's in plan order, then half 1's in plan order from the middle
    of the plan on (each goes to its half's queue: `workers.app.send_match`).

    The two matches of a pair never run at the same time (`repo.claim_match`): a worker that takes a twin while
    the other is being played has to put it back (`deferred`). A worker that prefers half 0 plays the plan from
    its start and one that prefers half 1 from its middle, so the two never reach the same pair together; a
    single worker plays every pair's half 0 before any half 1, the twins half a league apart.
    """
    ordered = sorted(matches, key=lambda match: match.index)
    first = [match for match in ordered if match.half == 0]
    second = [match for match in ordered if match.half == 1]
    middle = len(second) // 2
    return first + second[middle:] + second[:middle]


def _register_remote(bots: list[RemoteBot]) -> None:
    """Register the league's remote bots with the standalone referee up front (workers do it again per match)."""
    address, admin_token = os.environ.get(REFEREE_ADDRESS_VARIABLE, ""), os.environ.get(ADMIN_TOKEN_VARIABLE, "")
    if not bots:
        return
    if not address or not admin_token:
        log.warning("remote bots in this league need MUS_REFEREE_ADDRESS and MUS_ADMIN_TOKEN; their matches will fail")
        return
    try:
        register_remote_bots(address, admin_token, [bot for bot in bots if bot.token_sha256])
    except grpc.RpcError as error:
        log.warning("could not register the remote bots with the referee at %s: %s", address, error)


def _another_run(league_name: str) -> bool:
    """Whether another league's `mus league run` is under way in this folder (it holds its lock, `_one_run`): the
    queues are shared, and purging them would drop its messages (a review's league then waited for the other's end)."""
    for path in broker_dir().glob(_run_lock("*").name):
        if path == _run_lock(league_name):
            continue  # this run's own
        with path.open("a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
    return False


def _purge_embedded_queue() -> None:
    """Old messages of earlier runs are only hints; start the embedded queues empty. Only while no other run is
    under way in the folder (`_another_run`)."""
    broker.clear(broker_dir() / "queue", broker_dir() / "processed")
