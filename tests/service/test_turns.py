"""A gated table (`Table.turns`, set where a worker can stop its hosted seats' processes): it says which seats may
run, those with a decision open, and never asks both partners at once. The table is driven in-process (its outboxes
are plain queues); the processes' side is tested in tests/workers/test_sandbox.py."""

from __future__ import annotations

import asyncio

import pytest

from referee import wire
from referee.causes import IncidentCause
from referee.engine.rules import Rules
from referee.service.table import Outbox, Table, TableStatus
from tests.support.clock import FakeClock
from tests.support.referee_checks import assert_replays_legally, match_of

RULES = Rules.from_options({"decision_timeout_s": 30.0, "time_bank_s": 30.0})
"""The defaults' simultaneous discards and seña rounds: steps in which partners are awaited together."""


def gated_table(seed: int, calls: list[frozenset[int]], clock: FakeClock | None = None) -> Table:
    table = Table("t", RULES, seed, ["a", "b", "a", "b"], clock=clock, reconnect_grace_s=5.0)
    table.turns = calls.append
    for seat in range(4):
        table.attach(seat, Outbox())
    return table


def answer(table: Table, seat: int) -> None:
    """The seat's first legal action: the same answer whatever order the seats are asked in."""
    table.act(seat, table.decisions[seat].decision_id, wire.action_to_proto(match_of(table).legal_actions(seat)[0]))


def play_out(table: Table, calls: list[frozenset[int]]) -> int:
    """Answer every open decision until the end; check the gate after each step. How many steps awaited both
    partners of a team (of which the table asked one)."""
    together = 0
    while table.status is TableStatus.RUNNING:
        awaited = set(match_of(table).awaited())
        asked = set(table.decisions)
        assert asked <= awaited and asked, (awaited, asked)
        assert not {0, 2} <= asked and not {1, 3} <= asked, f"partners asked at once: {asked}"
        assert calls[-1] == asked, "the seats that may run are those asked"
        together += {0, 2} <= awaited or {1, 3} <= awaited
        answer(table, min(asked))
    assert calls[-1] == frozenset(range(4)), "every seat runs once the match is over, to read its outcome"
    return together


@pytest.mark.parametrize("seed", range(8))
def test_a_gated_table_asks_one_partner_at_a_time_and_plays_the_match_an_ungated_one_plays(seed: int) -> None:
    async def scenario() -> tuple[Table, Table, int]:
        calls: list[frozenset[int]] = []
        table = gated_table(seed, calls)
        together = play_out(table, calls)
        ungated = Table("u", RULES, seed, ["a", "b", "a", "b"])
        for seat in range(4):
            ungated.attach(seat, Outbox())
        while ungated.status is TableStatus.RUNNING:
            answer(ungated, min(ungated.decisions))
        return table, ungated, together

    table, ungated, together = asyncio.run(scenario())
    assert together > 0, "the defaults' discards await all four seats at once"
    assert_replays_legally(table)
    assert match_of(table).outcome == match_of(ungated).outcome, "the order of a simultaneous step changes nothing"


def test_a_stopped_seat_whose_stream_ended_gets_its_grace_when_it_is_next_asked() -> None:
    """A seat cannot rejoin while its processes are stopped: its reconnect grace runs only once it is asked."""
    asyncio.run(stopped_seat_loses_its_stream())


async def stopped_seat_loses_its_stream() -> None:
    clock, calls = FakeClock(), list[frozenset[int]]()
    table = gated_table(3, calls, clock)
    waiting = next(seat for seat in range(4) if seat not in table.decisions)
    table.detach(waiting, table.seats[waiting].outbox)  # type: ignore[arg-type]
    clock.advance(6.0)
    assert not table.seats[waiting].gone and table.incidents == [], "not dropped while it could not run"
    while waiting not in table.decisions and table.status is TableStatus.RUNNING:
        answer(table, min(table.decisions))
    assert waiting in calls[-1]
    clock.advance(4.9)
    assert not table.seats[waiting].gone
    clock.advance(0.2)
    assert table.seats[waiting].gone
    assert [(incident.seat, incident.cause) for incident in table.incidents] == [(waiting, IncidentCause.DISCONNECT)]


def test_a_held_table_times_nobody_out_and_gives_the_asked_seat_its_whole_clock() -> None:
    """While a seat that is to stop is not yet frozen (inside a long system call), no seat runs: the gate answers
    a future and the table is held. A decision held past its deadline does not time out, and once the asked seat
    runs it has the time it would have had (its clock is set back by the hold)."""
    asyncio.run(held_table())


async def held_table() -> None:
    clock, calls = FakeClock(), list[frozenset[int]]()
    holds: list[asyncio.Future[None]] = []

    def turns(running: frozenset[int]) -> asyncio.Future[None] | None:
        calls.append(running)
        if len(running) == 4:
            return None
        holds.append(asyncio.get_running_loop().create_future())
        return holds[-1]

    table = Table("t", RULES, 5, ["a", "b", "a", "b"], clock=clock, reconnect_grace_s=5.0)
    table.turns = turns
    for seat in range(4):
        table.attach(seat, Outbox())
    assert calls == [frozenset()] and table.match is None, "no seat runs while the cards are dealt"
    holds[-1].set_result(None)
    await asyncio.sleep(0)
    assert table.status is TableStatus.RUNNING and len(holds) == 2
    asked = next(iter(table.decisions))
    before = table._time_left(asked, table.decisions[asked])
    clock.advance(45.0)  # past the decision's 30 s and into its bank: it is held all along
    assert asked in table.decisions and table.status is TableStatus.RUNNING and not table.faults()
    holds[-1].set_result(None)
    await asyncio.sleep(0)  # the future's callbacks run
    assert table._time_left(asked, table.decisions[asked]) == before, "the held time is not the seat's"
    clock.advance(29.0)
    assert asked in table.decisions, "its decision time runs from when it could run"
    answer(table, asked)
    assert table.status is TableStatus.RUNNING and not table.faults() and table.seats[asked].bank == RULES.time_bank_s


def test_an_ungated_table_starts_the_grace_of_the_stopped_seats_whose_streams_ended() -> None:
    """A review killed the worker of a remote bot's match (its seats' processes died with it): the table was
    ungated, yet it took the worker's seats for stopped still, their grace never ran, and their clocks ran out one
    decision at a time, 170 s with no incident, while the remote bot was held busy (stop 39)."""
    asyncio.run(ungated_after_its_worker_died())


async def ungated_after_its_worker_died() -> None:
    clock, calls = FakeClock(), list[frozenset[int]]()
    table = gated_table(3, calls, clock)
    stopped = [seat for seat in range(4) if seat not in table.decisions]
    for seat in stopped:
        table.detach(seat, table.seats[seat].outbox)  # type: ignore[arg-type]
    clock.advance(6.0)
    assert table.incidents == [], "not dropped while it could not run"
    table.ungate()
    clock.advance(4.9)
    assert not any(table.seats[seat].gone for seat in stopped)
    clock.advance(0.2)
    assert all(table.seats[seat].gone for seat in stopped)
    assert sorted((incident.seat, incident.cause) for incident in table.incidents) == [
        (seat, IncidentCause.DISCONNECT) for seat in stopped
    ]
