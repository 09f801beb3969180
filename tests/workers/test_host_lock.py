"""The host's play lock (workers.host_lock): one machine plays one match's bots at a time, whatever worker plays it."""

from __future__ import annotations

import asyncio
import fcntl
import os
import tempfile
from pathlib import Path

import pytest

from bench.league import BOT_COMMAND, BOT_SCRIPT
from referee.engine.rules import Rules
from workers import host_lock
from workers.launcher import BotProgram, Limits, sandbox_available
from workers.matches import PlayedMatch, play_programs

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
