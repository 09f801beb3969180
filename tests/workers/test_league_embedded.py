"""End to end on the embedded default: real Celery worker processes on the filesystem broker, SQLite."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import pytest

from tests.workers.conftest import Deployment
from workers import league_run, play
from workers.app import broker_dir, match_queues
from workers.db import repo
from workers.db.errors import Conflict, DbError
from workers.db.models import MatchStatus
from workers.db.session import session_scope
from workers.league_run import RunReport, run_league

pytestmark = pytest.mark.slow  # leagues on real worker processes


def results_per_match(deployment: Deployment, league_id: int) -> dict[int, int]:
    with session_scope(deployment.engine) as session:
        finished = repo.league_results(session, league_id)
        matches = repo.list_matches(session, league_id)
    counts = {match.id: 0 for match in matches if match.id is not None}
    for result in finished:
        counts[result.match_id] += 1
    return counts


def test_a_league_runs_to_the_end_on_real_worker_processes_with_one_result_per_match(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    league_id = deployment.league("small", ["random", "passive"], matches_per_pairing=4)
    seen: list[dict[str, int]] = []
    cores = sorted(os.sched_getaffinity(0))
    set_up: list[object] = []  # each worker's cores, as its preexec_fn is made (`worker_cores`, `mus bench league`)
    real_setup = league_run.worker_preexec

    def noted(given: Collection[int] | None) -> Callable[[], None]:
        set_up.append(given)
        return real_setup(given)

    monkeypatch.setattr(league_run, "worker_preexec", noted)
    report = run_league(
        deployment.engine, "small", workers=2, on_progress=seen.append, worker_cores=lambda index: {cores[-index]}
    )
    assert set_up == [{cores[0]}, {cores[-1]}]
    assert report.completed and not report.interrupted
    assert report.progress["finished"] == report.progress["total"] == 4
    assert set(results_per_match(deployment, league_id).values()) == {1}
    assert seen[0]["finished"] <= seen[-1]["finished"] == 4
    with session_scope(deployment.engine) as session:
        assert repo.get_league(session, "small").status == "finished"
        for match_id in results_per_match(deployment, league_id):
            record = repo.get_replay(session, match_id)
            assert record["steps"], "every match stores its replay"


def test_killing_a_worker_mid_league_loses_nothing_and_double_counts_nothing(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A lease far longer than the test may wait: the run requeues a dead worker's match when it sees the worker
    # die, not when the lease expires (a newcomer's 96-match league waited the whole 60 s lease for it).
    monkeypatch.setenv("MUS_LEASE_S", "600")
    league_id = deployment.league("killed", ["random", "rules"], matches_per_pairing=6)
    reports: list[RunReport] = []
    runner = threading.Thread(target=lambda: reports.append(run_league(deployment.engine, "killed", workers=2)))
    runner.start()
    victim = None
    deadline = time.monotonic() + 60
    while victim is None and time.monotonic() < deadline:
        with session_scope(deployment.engine) as session:
            running = repo.list_matches(session, league_id, status=MatchStatus.RUNNING)
            victim = next((match for match in running if match.worker), None)
        time.sleep(0.05)
    assert victim is not None and victim.worker is not None, "a worker should have claimed a match"
    os.kill(int(victim.worker.rsplit(":", 1)[1]), signal.SIGKILL)
    runner.join(timeout=180)
    assert not runner.is_alive()
    [report] = reports
    assert report.completed and report.progress["finished"] == 6
    assert report.worker_restarts >= 1
    assert set(results_per_match(deployment, league_id).values()) == {1}, "exactly one result per match"
    with session_scope(deployment.engine) as session:
        killed = repo.get_match(session, victim.id or 0)
        assert killed.status == MatchStatus.FINISHED and killed.attempt >= 2
        assert killed.error is not None and "during the match" in killed.error, killed.error


@pytest.mark.parametrize(
    ("in_queue", "resent"), [(3, False), (0, True), (None, True)], ids=["waiting", "empty", "unknown"]
)
def test_a_match_not_yet_taken_is_sent_again_only_if_its_queue_has_nothing_left(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch, in_queue: int | None, resent: bool
) -> None:
    """A league's matches all wait in the queue from its start: resending every match not taken within
    RESEND_AFTER_S queued a league of 3,000 matches three more times over within two minutes. Only a queue that
    holds nothing (the broker lost the messages) or a broker that cannot be asked has them sent again."""
    monkeypatch.setenv("MUS_BROKER_URL", "memory://")  # no worker: the matches stay queued
    monkeypatch.setattr(league_run, "RESEND_AFTER_S", 0.1)
    monkeypatch.setattr(league_run, "POLL_S", 0.02)
    league_id = deployment.league("resent", ["random", "passive"], matches_per_pairing=4)
    sent: list[int] = []
    asked: list[int] = []

    def queue_depth(half: int) -> int | None:
        asked.append(half)
        return in_queue

    runner = threading.Thread(
        target=lambda: run_league(
            deployment.engine, "resent", send=lambda match_id, half: sent.append(match_id), queue_depth=queue_depth
        )
    )
    runner.start()
    time.sleep(1.0)
    with session_scope(deployment.engine) as session:
        repo.pause_league(session, "resent")
    runner.join(timeout=30)
    assert not runner.is_alive()
    with session_scope(deployment.engine) as session:
        ids = {match.id for match in repo.list_matches(session, league_id)}
    assert set(sent) == ids and asked, "every match sent, the queue asked about"
    assert (len(sent) > len(ids)) is resent, f"{len(sent)} messages for {len(ids)} matches"


@pytest.mark.parametrize("deals", ["independent", "duplicate"])
def test_a_match_whose_message_a_later_one_overtook_is_sent_again_though_its_queue_is_not_empty(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch, deals: str
) -> None:
    """A queue is first in, first out: a match still queued a whole period after a match sent later than it was
    claimed lost its message (a worker died between taking it and claiming the match), even while the queue holds
    others' messages (a second run in the folder, a shared MUS_QUEUE): a review's league waited on for hours. Not
    where the matches have duplicate twins: a worker that plays a pair whole claims the twin without taking its
    message, and a review's 1,000-match league had 758 matches sent twice."""
    monkeypatch.setenv("MUS_BROKER_URL", "memory://")  # no worker: the matches stay queued unless claimed here
    monkeypatch.setattr(league_run, "RESEND_AFTER_S", 0.1)
    monkeypatch.setattr(league_run, "POLL_S", 0.02)
    league_id = deployment.league("overtaken", ["random", "passive"], matches_per_pairing=8, deal_mode=deals)
    sent: list[int] = []
    runner = threading.Thread(
        target=lambda: run_league(
            deployment.engine,
            "overtaken",
            send=lambda match_id, half: sent.append(match_id),
            queue_depth=lambda half: 40,  # never empty
        )
    )
    runner.start()
    deadline = time.monotonic() + 10
    while len(sent) < 8 and time.monotonic() < deadline:
        time.sleep(0.02)
    with session_scope(deployment.engine) as session:
        halves = {match.id: match.half for match in repo.queued_matches(session, league_id)}
        first_half = [match_id for match_id in sent if halves[match_id] == halves[sent[0]]]
        assert len(first_half) == 4 and repo.claim_match(session, first_half[2], "w:1", 60) is not None
    time.sleep(1.0)  # several periods
    with session_scope(deployment.engine) as session:
        repo.pause_league(session, "overtaken")
    runner.join(timeout=30)
    assert not runner.is_alive()
    counts = {match_id: sent.count(match_id) for match_id in halves}
    overtaken, claimed, behind = first_half[:2], first_half[2], first_half[3]
    assert [counts[match_id] for match_id in overtaken] == ([2, 2] if deals == "independent" else [1, 1]), counts
    assert counts[claimed] == counts[behind] == 1, "claimed, or sent after the one claimed: not lost"
    assert {counts[match_id] for match_id in halves if halves[match_id] != halves[sent[0]]} == {1}, "nothing taken"


def test_between_full_reads_the_run_reads_only_matches_queued_again_and_sends_each_at_once(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading every queued match of a 10,000-match league four times a second cost the run 25-80 ms of CPU a read;
    what it must see at once is a match queued again after an attempt (voided), whose new attempt it sends."""
    monkeypatch.setenv("MUS_BROKER_URL", "memory://")  # no worker: the matches stay queued
    monkeypatch.setattr(league_run, "POLL_S", 0.02)
    league_id = deployment.league("partial", ["random", "passive"], matches_per_pairing=4)
    reads: list[bool] = []
    real_read = repo.queued_matches

    def queued_matches(session: Any, league: Any, *, attempted: bool = False) -> list[repo.QueuedMatch]:
        reads.append(attempted)
        return real_read(session, league, attempted=attempted)

    monkeypatch.setattr(repo, "queued_matches", queued_matches)
    sent: list[int] = []
    runner = threading.Thread(
        target=lambda: run_league(
            deployment.engine, "partial", send=lambda match_id, half: sent.append(match_id), queue_depth=lambda half: 1
        )
    )
    runner.start()
    deadline = time.monotonic() + 10
    while len(sent) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    with session_scope(deployment.engine) as session:
        voided = repo.list_matches(session, league_id)[0].id
        assert voided is not None and repo.claim_match(session, voided, "w:1", 60) is not None
        repo.void_match(session, voided, "w:1", "a worker's failure")
    while sent.count(voided) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)  # a few more polls
    with session_scope(deployment.engine) as session:
        repo.pause_league(session, "partial")
    runner.join(timeout=30)
    assert not runner.is_alive()
    assert sorted(sent) == sorted([*range(min(sent), min(sent) + 4), voided]), "each once, the voided one again"
    assert reads[0] is False and len(reads) > 3 and all(reads[1:]), "after the first, only the attempted ones"


STOPPED_CHILD = """
import signal, sys, time
said = []
def note(signum, frame):
    said.append(signal.Signals(signum).name)
    print(signal.Signals(signum).name, flush=True)
    if sys.argv[1] == "quick" or signum == signal.SIGQUIT:
        time.sleep(0.2)  # the match in hand ends
        sys.exit(0)
signal.signal(signal.SIGTERM, note)
signal.signal(signal.SIGQUIT, note)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


def test_ctrl_c_lets_a_workers_match_in_hand_end_within_its_grace_and_stops_the_others_cold(tmp_path: Path) -> None:
    """A cold shutdown at once voided a match of instant bots that had 70 ms to go, and broke its duplicate pair (7
    of a chaos review's 2,250, stop 40): a worker is asked to stop once its match is done (SIGTERM, Celery's warm
    shutdown), and only one still playing after INTERRUPT_GRACE_S is stopped cold (SIGQUIT, its match voided)."""
    workers = league_run.EmbeddedWorkers(2)
    workers.processes = [
        subprocess.Popen([sys.executable, "-c", STOPPED_CHILD, kind], stdout=subprocess.PIPE)
        for kind in ("quick", "slow")
    ]
    for process in workers.processes:
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"
    workers.stop()
    said = [process.communicate()[0].split() for process in workers.processes]
    assert said == [[b"SIGTERM"], [b"SIGTERM", b"SIGQUIT"]]
    assert [process.returncode for process in workers.processes] == [0, 0]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: a child runs on it, pinned or not")
def test_an_embedded_worker_given_cores_runs_on_them_before_any_code_and_so_does_all_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mus bench league` pins each worker to a core. It pinned the worker's threads once it saw it, from the run's
    progress callback: a 3,000-match league's run queued for seconds first, and by then the worker's pooled bots
    had started on every core (stop 41). Set before the worker's exec, nothing it starts escapes."""
    core = sorted(os.sched_getaffinity(0))[-1]
    monkeypatch.setenv("MUS_BROKER_DIR", str(tmp_path))

    class Shown(league_run.EmbeddedWorkers):
        def command(self, index: int) -> list[str]:
            code = "import subprocess; print(subprocess.check_output(['cat', '/proc/self/status']).decode())"
            return [sys.executable, "-c", code]

    workers = Shown(1, cores=lambda index: {core})
    workers.start()
    assert workers.processes[0].wait(timeout=30) == 0
    status = (tmp_path / "worker-0.log").read_text()
    allowed = next(line for line in status.splitlines() if line.startswith("Cpus_allowed_list:"))
    assert allowed.split()[-1] == str(core), "the worker's child runs on the worker's core"


def test_a_second_run_of_a_league_being_run_is_refused_and_changes_nothing(deployment: Deployment) -> None:
    """Two `mus league run` of one league at once: the second voided the first's running matches as "the
    previous run was interrupted" and started workers of its own (newcomer walkthrough, stop 29)."""
    league_id = deployment.league("twice", ["random", "passive"], matches_per_pairing=2)
    broker = broker_dir()
    broker.mkdir(parents=True, exist_ok=True)
    with (broker / "league-twice.lock").open("a") as held:  # what the first run holds while it runs
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(Conflict, match="'twice' is being run already"):
            run_league(deployment.engine, "twice", workers=1)
    with session_scope(deployment.engine) as session:
        assert repo.get_league(session, "twice").status == "created", "the refused run started nothing"
    report = run_league(deployment.engine, "twice", workers=1)  # the lock goes with its holder
    assert report.completed and set(results_per_match(deployment, league_id).values()) == {1}


def test_a_run_leaves_the_queued_messages_of_another_leagues_run_in_the_folder_alone(deployment: Deployment) -> None:
    """The queues are shared: a second league's run purged the first's messages as it started, and the first's
    matches then waited for the second's end (a review)."""
    league_id = deployment.league("second", ["random", "passive"], matches_per_pairing=2)
    queue = broker_dir() / "queue" / match_queues()[0]
    queue.mkdir(parents=True)
    theirs = queue / f"{time.monotonic_ns() + int(50e9):020d}_{uuid.uuid4()}.msg"  # due later than this league's end
    theirs.write_text("{}")
    with (broker_dir() / "league-first.lock").open("a") as held:  # what the first league's run holds
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        report = run_league(deployment.engine, "second", workers=1)
    assert report.completed and set(results_per_match(deployment, league_id).values()) == {1}
    assert theirs.exists(), "the other run's message is still queued"


def test_a_run_alone_in_the_folder_starts_with_its_queues_empty(deployment: Deployment) -> None:
    """What earlier runs left: messages (an earlier version's in the queue folder itself), and what a killed process
    left half written or taken (a chaos review's `.partial` files, stop 40)."""
    deployment.league("alone", ["random", "passive"], matches_per_pairing=2)
    queue = broker_dir() / "queue"
    (queue / match_queues()[1]).mkdir(parents=True)
    left = [
        queue / f"{time.monotonic_ns() + int(50e9):020d}_{uuid.uuid4()}.{match_queues()[0]}.msg",
        queue / match_queues()[1] / f"{time.monotonic_ns() + int(50e9):020d}_{uuid.uuid4()}.msg",
        queue / match_queues()[1] / f".{uuid.uuid4()}.msg.partial",
        queue / match_queues()[1] / f".{uuid.uuid4()}.msg.taken",
    ]
    for path in left:
        path.write_text("{}")
    assert run_league(deployment.engine, "alone", workers=1).completed
    assert not any(path.exists() for path in left)


def test_a_paused_league_stops_being_played_and_runs_to_the_end_when_run_again(deployment: Deployment) -> None:
    """`mus league pause` from another terminal: the run sees it, its workers take no other match, and the next
    `mus league run` resumes the league where it stopped."""
    league_id = deployment.league("paused", ["random", "passive"], matches_per_pairing=8)
    reports: list[RunReport] = []
    runner = threading.Thread(target=lambda: reports.append(run_league(deployment.engine, "paused", workers=1)))
    runner.start()
    deadline = time.monotonic() + 120
    progress: dict[str, int] = {}
    while not progress.get("finished") and time.monotonic() < deadline:
        time.sleep(0.05)
        with session_scope(deployment.engine) as session:
            progress = repo.league_progress(session, league_id)
    with session_scope(deployment.engine) as session:
        repo.pause_league(session, "paused")
    runner.join(timeout=60)
    assert not runner.is_alive()
    [report] = reports
    assert report.paused and not report.completed and not report.interrupted
    with session_scope(deployment.engine) as session:
        stopped = repo.league_progress(session, league_id)
        assert repo.get_league(session, "paused").status == "paused"
    assert stopped["running"] == 0 and 0 < stopped["finished"] < stopped["total"], stopped
    time.sleep(1.0)
    with session_scope(deployment.engine) as session:
        assert repo.league_progress(session, league_id) == stopped, "nothing was played while it was paused"
    again = run_league(deployment.engine, "paused", workers=1)
    assert again.completed and again.progress["finished"] == 8
    assert set(results_per_match(deployment, league_id).values()) == {1}, "exactly one result per match"


def test_two_workers_play_each_duplicate_pair_of_persistent_bots_whole(deployment: Deployment) -> None:
    """A pooled process remembers a deal it played: each pair is played by one worker, the twin right after the
    first match, so no process that saw a deal runs beside the other twin (docs/leagues.md)."""
    league_id = deployment.league(
        "pooled", ["random", "passive"], matches_per_pairing=8, persistent={"random", "passive"}
    )
    report = run_league(deployment.engine, "pooled", workers=2)
    assert report.completed and report.progress["finished"] == 8
    with session_scope(deployment.engine) as session:
        matches = repo.list_matches(session, league_id)
    pairs: dict[int | None, list[Any]] = {}
    for match in matches:
        pairs.setdefault(match.duplicate_pair, []).append(match)
    assert None not in pairs and len(pairs) == 4 and all(len(pair) == 2 for pair in pairs.values())
    for first, second in (sorted(pair, key=lambda match: match.started_at) for pair in pairs.values()):
        assert first.worker == second.worker, "one worker plays the pair"
        assert first.deal == second.deal, "still a pair: the same deal"
        assert first.finished_at is not None and second.started_at <= first.finished_at, "the twin taken at once"


def test_a_league_interrupted_on_the_embedded_broker_is_paused_so_no_other_runs_workers_play_it_on(
    deployment: Deployment,
) -> None:
    """Two leagues run at once from one folder share the embedded queues: after Ctrl-C of one, the other run's
    workers played its matches on to its end, and it stayed `running`, its secret unrevealed (a chaos review,
    stop 39). Interrupted, it is paused: no worker claims its matches, and running it again resumes it."""
    league_id = deployment.league("stopped", ["random", "passive"], matches_per_pairing=8)

    def ctrl_c_once_a_match_finished(progress: dict[str, int]) -> None:
        if progress.get("finished"):
            raise KeyboardInterrupt  # where a run's Ctrl-C lands: in its loop

    report = run_league(deployment.engine, "stopped", workers=1, on_progress=ctrl_c_once_a_match_finished)
    assert report.interrupted and not report.completed
    with session_scope(deployment.engine) as session:
        assert repo.get_league(session, "stopped").status == "paused"
        waiting = repo.unfinished_match_ids(session, repo.get_league(session, league_id))
    assert waiting and play.play_league_match(waiting[0]) == "skipped", "another run's worker drops its message"
    resumed = run_league(deployment.engine, "stopped", workers=1)
    assert resumed.completed


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_a_run_whose_database_file_goes_away_stops_saying_so(deployment: Deployment, how: str) -> None:
    """A user's `rm mus.db` during a run went unnoticed: the run and its workers wrote on into the removed file, and
    every result was lost when they exited. The run stops, and says why, at its next look."""
    deployment.league("vanishing", ["random", "passive"], matches_per_pairing=8)
    database = deployment.root / "mus.db"
    began = os.stat(database).st_ino

    def remove(progress: dict[str, int]) -> None:
        if database.exists() and os.stat(database).st_ino == began:
            database.unlink()
            if how == "replaced":
                database.write_bytes(b"")

    with pytest.raises(DbError, match=f"the database file {database} was {how}") as raised:
        run_league(deployment.engine, "vanishing", on_progress=remove)
    assert "the run stopped (its workers too)" in str(raised.value)
