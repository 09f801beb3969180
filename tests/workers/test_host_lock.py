"""The host's play lock (workers.host_lock): one machine plays one match's bots at a time, whatever worker plays it."""

from __future__ import annotations

import asyncio
import fcntl
import os
import tempfile
import threading
from pathlib import Path

import pytest

from bench.league import BOT_COMMAND, BOT_SCRIPT
from referee.engine.rules import Rules
from workers import host_lock
from workers.checks import VARIANT_NAMES, CheckConfig, CheckReport, run_check
from workers.launcher import BotProgram, Limits, sandbox_available
from workers.matches import PlayedMatch, play_programs
from workers.pool import BotPool

LIMITS = Limits() if sandbox_available() else None
FAST = Rules.from_options({"games_to_win_vaca": 1, "vacas_to_win_match": 1})


def confined_only() -> None:
    if LIMITS is None:
        pytest.skip("no sandbox here: unconfined bots take no host play lock (nothing confines them anyway)")


def launched(name: str) -> BotProgram:
    return BotProgram(name, BOT_COMMAND, BOT_SCRIPT.parent)


def test_two_matches_of_one_machine_are_played_one_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two matches begun at once (two workers of one machine): the second's bots start only once the first's have
    all exited. Played at once, a bot's processes in both could pass each other what they were dealt through the
    CPU they share (a security review, stop 36). The wait does not hold the event loop: both are played on one."""
    confined_only()
    monkeypatch.setenv(host_lock.HOST_LOCK_VARIABLE, str(tmp_path / "play.lock"))

    async def both() -> list[PlayedMatch]:
        return await asyncio.gather(
            *(
                play_programs((launched("a"), launched("b")), FAST, seed, log_dir=tmp_path / str(seed), sandbox=LIMITS)
                for seed in (1, 2)
            )
        )

    first, second = sorted(asyncio.run(both()), key=lambda played: played.launched_at)
    assert first.match.outcome is not None and second.match.outcome is not None
    assert first.exited_at <= second.launched_at, "the second match's bots ran beside the first's"


def test_a_match_waits_while_another_process_of_the_machine_holds_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock is the machine's file (`MUS_HOST_LOCK`), not this process's: a worker waits for another's match."""
    confined_only()
    path = tmp_path / "play.lock"
    monkeypatch.setenv(host_lock.HOST_LOCK_VARIABLE, str(path))
    other = os.open(path, os.O_RDWR | os.O_CREAT)  # another worker's match, as far as the lock can tell
    fcntl.flock(other, fcntl.LOCK_EX)

    async def scenario() -> PlayedMatch:
        match = asyncio.create_task(
            play_programs((launched("a"), launched("b")), FAST, 1, log_dir=tmp_path / "logs", sandbox=LIMITS)
        )
        await asyncio.sleep(0.3)
        assert not match.done() and not (tmp_path / "logs").exists(), "it started while another match held the lock"
        os.close(other)  # that match has ended
        return await asyncio.wait_for(match, 60)

    played = asyncio.run(scenario())
    assert played.match.outcome is not None


def test_every_worker_of_a_machine_takes_the_same_lock_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(host_lock.HOST_LOCK_VARIABLE)
    assert host_lock.lock_path() == host_lock.default_lock_path()
    assert host_lock.default_lock_path().parent in (Path("/dev/shm"), Path(tempfile.gettempdir()))


def test_a_bot_check_match_waits_for_the_lock_like_a_league_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bot checked on a league's machine ran beside its matches for minutes, and took a league seat's cards through
    the CPU (a security review, stop 36)."""
    confined_only()
    path = tmp_path / "play.lock"
    monkeypatch.setenv(host_lock.HOST_LOCK_VARIABLE, str(path))
    other = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(other, fcntl.LOCK_EX)
    logs = tmp_path / "check"
    config = CheckConfig(matches=1, variants=VARIANT_NAMES[:1], sandbox=LIMITS, log_dir=logs)

    async def scenario() -> tuple[bool, CheckReport]:
        check = asyncio.create_task(run_check(launched("checked"), config))
        try:
            await asyncio.sleep(0.5)
            ran = any(logs.rglob("*.log"))
        finally:
            os.close(other)
        return ran, await asyncio.wait_for(check, 300)

    ran, report = asyncio.run(scenario())
    assert not ran, "a seat of the check ran while another match held the lock"
    assert report.results


def test_a_confined_pool_thaws_its_processes_to_exit_only_while_it_holds_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a worker's exit its pool thaws every process so that it can exit: a review's processes that ignored the
    end of their input ran up to 4 s beside another worker's match (stop 36). It waits for that match first."""
    confined_only()
    path = tmp_path / "play.lock"
    monkeypatch.setenv(host_lock.HOST_LOCK_VARIABLE, str(path))
    other = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(other, fcntl.LOCK_EX)
    closing = threading.Thread(target=BotPool(LIMITS, log_dir=tmp_path / "pool").close)
    closing.start()
    closing.join(0.5)
    waited = closing.is_alive()
    os.close(other)
    closing.join(10)
    assert waited, "the pool closed while another match held the lock"
    assert not closing.is_alive()
