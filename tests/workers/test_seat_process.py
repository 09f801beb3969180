"""A launched seat's process on the referee's event loop (`referee.service.loop`, uvloop where installed): its
output reaches its log and its exit is read, by a pidfd or, where there is none, by a thread. A seat is started
with `subprocess.Popen`, not through the loop: uvloop runs Python in the forked child, which crashed bwrap in a
worker with gRPC's threads (tests/workers/test_remote_bots.py plays such matches)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from referee.service.loop import run
from workers.launcher import BotProgram, launch_bot


async def launched(command: str, log_path: Path, *, kill: bool = False) -> tuple[int | None, int]:
    """(the returncode before the exit was awaited, the exit code) of an unconfined seat running `command`."""
    process = await launch_bot(BotProgram("shell", ("sh", "-c", command)), "unix:/nowhere", "token", log_path=log_path)
    before = process.returncode
    if kill:
        process.kill()
    code = await process.wait()
    assert process.returncode == code
    await process.close()
    return before, code


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "thread"])
def test_a_seat_process_output_and_exit_are_read_on_the_referee_loop(
    pidfd: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not pidfd:
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    log = tmp_path / "seat.log"
    before, code = run(launched("echo to the log; sleep 0.2; exit 3", log))
    assert (before, code) == (None, 3)
    assert "to the log" in log.read_text()


def test_a_killed_seat_process_reads_as_killed(tmp_path: Path) -> None:
    _, code = run(launched("sleep 30", tmp_path / "seat.log", kill=True))
    assert code == -signal.SIGKILL


def test_a_seat_whose_output_a_grandchild_holds_open_leaves_no_descriptor_behind(tmp_path: Path) -> None:
    """The worker's loop outlives its matches: a seat's pipe is closed with the seat even when a process it started
    in a session of its own (out of reach of the seat's process group) still holds the pipe's other end."""

    async def seat() -> tuple[int, int]:
        before = len(os.listdir("/proc/self/fd"))
        program = BotProgram("shell", ("sh", "-c", "setsid sleep 5 & echo started"))
        process = await launch_bot(program, "unix:/nowhere", "token", log_path=tmp_path / "seat.log")
        assert await process.wait() == 0
        await process.close()
        return before, len(os.listdir("/proc/self/fd"))

    before, after = run(seat())
    assert after == before
    assert "started" in (tmp_path / "seat.log").read_text()
