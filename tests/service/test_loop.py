"""The referee's event loop (`referee.service.loop`): uvloop's where it is installed, and what a table reads of
the time on it."""

from __future__ import annotations

import asyncio
import time

import pytest

from referee.service.loop import new_event_loop, run
from referee.service.table import LoopClock


def test_the_referee_runs_on_uvloop_where_it_is_installed() -> None:
    uvloop = pytest.importorskip("uvloop")

    async def loop_type() -> type:
        return type(asyncio.get_running_loop())

    assert run(loop_type()) is uvloop.Loop
    loop = new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


def test_a_table_reads_the_time_as_it_passes_within_one_turn_of_the_loop() -> None:
    """uvloop's own clock is read once a turn, to the millisecond: a seat's decision times, read in the callback
    that takes its answer, would be whole milliseconds, and those of a turn that waited behind other tables' work
    would all read its start."""

    async def within_one_callback() -> float:
        clock = LoopClock(asyncio.get_running_loop())
        before = clock.now()
        end = time.monotonic() + 0.0025
        while time.monotonic() < end:
            pass
        return clock.now() - before

    assert run(within_one_callback()) >= 0.0025
