"""A table clock that stands still until the test moves it (referee/service/table.py `Clock`).

A test of a deadline (a decision's timeout, a time bank, the join deadline, a reconnect grace period) advances
this clock past it instead of sleeping: the table's timers fire at once, in deadline order, each at its own time.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from referee.service.table import Table
from tests.support.referee_checks import until


@dataclass(order=True)
class FakeTimer:
    when: float
    order: int
    callback: Callable[..., object] = field(compare=False)
    args: tuple[object, ...] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """Time that moves only in `advance`; timers armed with `call_later` fire there, never on their own."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._timers: list[FakeTimer] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Callable[..., object], *args: object) -> FakeTimer:
        timer = FakeTimer(self._now + max(delay, 0.0), next(self._order), callback, args)
        heapq.heappush(self._timers, timer)
        return timer

    def next_deadline(self) -> float | None:
        """When the next live timer fires, or None."""
        while self._timers and self._timers[0].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0].when if self._timers else None

    def advance(self, seconds: float) -> None:
        """Move time on by `seconds`, firing every timer due by then (those they arm too) at its own deadline."""
        end = self._now + seconds
        while (deadline := self.next_deadline()) is not None and deadline <= end:
            timer = heapq.heappop(self._timers)
            self._now = max(self._now, timer.when)
            timer.callback(*timer.args)
        self._now = end

    def advance_to_next_deadline(self) -> float:
        """Move time to the next timer's deadline and fire it (and any due at that moment); returns the step."""
        deadline = self.next_deadline()
        assert deadline is not None, "no timer is armed: nothing would ever happen"
        step = max(deadline - self._now, 0.0)
        self.advance(step)
        return step


async def run_out_the_clock(table: Table, clock: FakeClock, seat: int) -> None:
    """Until the match ends: whenever `seat` is the only one the match waits on, jump to its deadline.

    The other seats answer in real time and are never timed out: time moves only while none of them is asked.
    """
    while not table.finished.is_set():
        await until(
            lambda: table.finished.is_set() or set(table.decisions) == {seat},
            timeout=30,
            what=f"seat {seat} to be the only one asked",
        )
        if not table.finished.is_set():
            clock.advance_to_next_deadline()


async def pass_the_join_deadline(table: Table, clock: FakeClock, joined: int) -> None:
    """Once `joined` seats have joined, jump to the table's join deadline: the others are absent."""
    await until(
        lambda: sum(state.outbox is not None for state in table.seats) == joined, what=f"{joined} seats to join"
    )
    clock.advance_to_next_deadline()
