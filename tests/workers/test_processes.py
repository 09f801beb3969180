"""Processes a league starts do not outlive it, and any live worker takes back the matches of a dead one."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.workers.conftest import Deployment
from workers import launcher, play
from workers.db import repo
from workers.db.models import LeagueStatus, Machine, MatchStatus
from workers.db.session import session_scope
from workers.launcher import INSTALL_HINT, sandbox_available

pytestmark = pytest.mark.slow  # real worker processes, killed and restarted


@pytest.fixture(autouse=True)
def fresh_database() -> Iterator[None]:
    """`play.database()` is cached per process: each test has its own deployment's."""
    play.database.cache_clear()
    yield
    play.database.cache_clear()


def claimed_by_a_dead_worker(deployment: Deployment, league_id: int) -> int:
    """Claim the league's first match as a worker that died an hour ago: its lease has long expired."""
    with session_scope(deployment.engine) as session:
        match_id = repo.list_matches(session, league_id)[0].id
        assert match_id is not None
        long_ago = repo.database_now(session) - timedelta(hours=1)
        assert repo.claim_match(session, match_id, "gone:1", 60, now=long_ago) is not None
    return match_id


def test_any_live_worker_requeues_and_resends_a_match_whose_lease_expired(deployment: Deployment) -> None:
    league_id = deployment.league("orphans", ["random", "passive"], matches_per_pairing=2)
    match_id = claimed_by_a_dead_worker(deployment, league_id)
    sent: list[tuple[int, int]] = []
    arrived = threading.Event()

    def send(match_id: int, half: int) -> None:
        sent.append((match_id, half))
        arrived.set()

    stop = play.start_reclaimer(deployment.engine, send, every_s=0.05)
    try:
        assert arrived.wait(10), "the reclaimer found the orphaned match"
    finally:
        stop.set()
    with session_scope(deployment.engine) as session:
        match = repo.get_match(session, match_id)
        assert match.status is MatchStatus.QUEUED
        assert sent == [(match_id, repo.half_of(match.team0_version_id, match.team1_version_id))], "to its half's queue"
        seen = session.get(Machine, repo.machine_of(play.worker_name()))
        assert seen is not None, "and says its machine is alive (a match refused elsewhere may be left to it)"
    assert play.play_league_match(match_id) == "finished", "the message it sent is played like any other"
    assert play.reclaim_expired(deployment.engine, send) == [], "nothing left to reclaim"
    # Played out, with no `mus league run` to follow it to its end, the league is finished by the reclaimer.
    with session_scope(deployment.engine) as session:
        repo.start_league(session, league_id)
        rest = repo.unfinished_match_ids(session, league_id)
    assert [play.play_league_match(match_id) for match_id in rest] == ["finished"] * len(rest)
    stop = play.start_reclaimer(deployment.engine, send, every_s=0.05)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with session_scope(deployment.engine) as session:
                if repo.get_league(session, league_id).status is LeagueStatus.FINISHED:
                    break
            time.sleep(0.05)
        else:
            pytest.fail("the reclaimer did not finish the played-out league")
    finally:
        stop.set()


def descendants(root: int) -> set[int]:
    """Every live process below `root` (by parent pid)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.add(child)
            stack.append(child)
    return found


def all_exit(pids: set[int], timeout_s: float) -> set[int]:
    """Wait (on pidfds, no polling) until every pid has exited; the ones still alive after `timeout_s`."""
    fds: dict[int, int] = {}
    for pid in pids:
        try:
            fds[os.pidfd_open(pid)] = pid
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + timeout_s
    try:
        while fds and (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select(list(fds), [], [], left)
            for fd in ready:
                os.close(fd)
                del fds[fd]
        return set(fds.values())
    finally:
        for fd in fds:
            os.close(fd)


@pytest.mark.skipif(not sandbox_available(), reason=INSTALL_HINT)
def test_nothing_a_league_run_started_outlives_its_kill_9(deployment: Deployment) -> None:
    league_id = deployment.league("killed", ["rules", "random"], matches_per_pairing=2)
    mus = Path(sys.executable).parent / "mus"
    run = subprocess.Popen(
        [str(mus), "league", "run", "killed", "--workers", "1"],
        cwd=deployment.root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        started: set[int] = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until a match is running and its four sandboxes are up
            with session_scope(deployment.engine) as session:
                running = repo.list_matches(session, league_id, status=MatchStatus.RUNNING)
            started = descendants(run.pid)
            commands = [_command(pid) for pid in started]
            if running and sum(command.startswith(b"bwrap") for command in commands) >= 4:
                break
            time.sleep(0.05)
        else:
            pytest.fail("no match got under way")
        run.send_signal(signal.SIGKILL)
        run.wait()
        assert all_exit(started, 15) == set(), "embedded workers, bwrap and the bots all died with the run"
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


def _command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_a_lone_celery_worker_takes_back_and_plays_a_match_whose_worker_died(deployment: Deployment) -> None:
    """No `mus league run` is alive: the worker's own reclaimer requeues the orphan and sends it to itself."""
    league_id = deployment.league("alone", ["random", "passive"], matches_per_pairing=2)
    match_id = claimed_by_a_dead_worker(deployment, league_id)
    env = dict(os.environ, MUS_LEASE_S="1")  # the reclaimer looks every 0.5 s
    command = [sys.executable, "-m", "celery", "-A", "workers.app", "worker", "--pool=solo", "--loglevel=WARNING"]
    with (deployment.root / "worker.log").open("wb") as output:
        worker = subprocess.Popen(command, cwd=deployment.root, env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        status = MatchStatus.RUNNING
        while status is not MatchStatus.FINISHED and time.monotonic() < deadline:
            time.sleep(0.1)
            with session_scope(deployment.engine) as session:
                status = repo.get_match(session, match_id).status
        assert status is MatchStatus.FINISHED, (deployment.root / "worker.log").read_text()
    finally:
        worker.kill()
        worker.wait()


@pytest.mark.parametrize("with_input", [False, True], ids=["seat", "pooled"])
def test_a_seats_output_and_input_pipes_are_sealed_so_its_own_uid_cannot_open_them_again(with_input: bool) -> None:
    """Where the worker is not root a user namespace maps its uid to the bot's, which then owned its output pipe:
    a review's bot opened /proc/self/fd/1 for reading and took the sandbox's start line out, so its crash passed for
    a sandbox that never started and its match was voided onto a fresh deal (stop 43). The pipes' inodes are mode 0
    from before the fork (an open checks the mode; the ends passed still read and write)."""
    probe = "import os; print(oct(os.fstat(1).st_mode & 0o777), oct(os.fstat(0).st_mode & 0o777), flush=True)"
    process = launcher._spawn([sys.executable, "-c", probe], None, None, None, with_input=with_input)
    try:
        assert process.stdout is not None
        output = process.stdout.read().decode()
        assert os.fstat(process.stdout.fileno()).st_mode & 0o777 == 0
    finally:
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=30)
        assert process.stdout is not None
        process.stdout.close()
    assert output.split() == ["0o0", "0o0" if with_input else "0o666"], output


def test_the_output_before_a_sandboxs_start_line_is_kept_bounded_and_searched_once() -> None:
    """A review's bot, its start line taken out, wrote 600 MiB: all of it was kept in the worker's memory and
    searched again after every read, on the referee's event loop (stop 43)."""
    kept = bytearray()
    for _ in range(200):  # 12.5 MiB with no start line
        assert launcher._before_start(kept, b"x" * 65536) is None
        assert len(kept) <= launcher.SETUP_OUTPUT_BYTES
    marker = launcher.STARTED_MARKER
    assert launcher._before_start(kept, b"y" + marker[:5]) is None, "a start line split across two reads"
    found = launcher._before_start(kept, marker[5:] + b"the bot's first line\n")
    assert found is not None and found.endswith(b"y" + b"the bot's first line\n") and marker not in found
    assert kept.endswith(b"xy") and len(kept) <= launcher.SETUP_OUTPUT_BYTES, "what came before the line, bounded"
    quick = bytearray()
    assert launcher._before_start(quick, b"bwrap: setting up\n" + marker + b"hello\n") == b"bwrap: setting up\nhello\n"
