"""Reconnecting (play.proto Join.next_seq, Joined.resumed; docs/protocol.md "Reconnecting").

A seat whose stream drops may join again within the referee's grace period: it is told `resumed`, gets the
events it missed from `next_seq` on (no gap, no duplicate), then its open decision with the same id, and the
match goes on as if nothing happened. After the grace period the seat is dropped: a `disconnect` incident is
recorded, its decisions time out at once, and joining again is refused with FAILED_PRECONDITION.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import grpc

from mus.v1 import play_pb2
from mus.v1 import types_pb2 as pb
from referee.engine.rules import Rules
from referee.service.table import JOIN_BURST, JOIN_RATE, Table, TableStatus
from tests.service.conftest import Running, with_referee
from tests.support.clock import FakeClock
from tests.support.referee_checks import assert_replays_legally, engine_faults, incidents, until
from tests.support.seats import WireSeat
from tests.support.stream import PlayStream, StreamResult

ROOMY = Rules.from_options({"decision_timeout_s": 3.0, "time_bank_s": 5.0, "vacas_to_win_match": 3})
"""A dropped seat's open decision outlives any reconnection here; three vacas make the match long enough."""
NAMES = ["bot0", "bot1", "bot2", "bot3"]
DROPPER = 2
SHORT_GRACE = 0.3


def kind(message: play_pb2.PlayResponse) -> str:
    return str(message.WhichOneof("message"))


def acted(seat: int, message: play_pb2.PlayResponse) -> bool:
    """Whether the message is the public event of this seat's own mus call or bet."""
    if kind(message) != "event":
        return False
    event = message.event
    payload = event.WhichOneof("payload")
    return (payload == "mus_called" and event.mus_called.seat == seat) or (
        payload == "bet_made" and event.bet_made.seat == seat
    )


@dataclass
class Rejoined:
    table: Table
    dropper: WireSeat
    first_stream: list[play_pb2.PlayResponse]
    second_stream: list[play_pb2.PlayResponse]
    open_before: play_pb2.DecisionRequest | None
    next_seq: int


def assert_clean_finish(table: Table) -> None:
    assert table.status is TableStatus.FINISHED
    assert table.outcome is not None and table.outcome.termination == pb.MATCH_TERMINATION_NORMAL
    assert incidents(table) == [], "a reconnection within the grace period is no incident"
    assert table.faults() == []
    assert_replays_legally(table)


def assert_resumed_without_gap_or_duplicate(result: Rejoined) -> None:
    joined = [message.joined for message in result.second_stream if kind(message) == "joined"]
    assert len(joined) == 1 and kind(result.second_stream[0]) == "joined"
    assert joined[0].resumed and joined[0].seat == DROPPER
    assert not result.first_stream[0].joined.resumed, "a first join is not a resumption"
    events = [message.event for message in result.first_stream + result.second_stream if kind(message) == "event"]
    assert [event.seq for event in events] == list(range(len(events))), "per-seat seq: no gap, no duplicate"
    assert events == result.table.seat_messages(DROPPER), "exactly the events the referee gave this seat"
    resent = [message.event.seq for message in result.second_stream if kind(message) == "event"]
    assert resent[0] == result.next_seq


def drop_and_rejoin(*, drop_with_decision_open: bool) -> Rejoined:
    async def scenario(running: Running) -> Rejoined:
        table = running.referee.create_table(ROOMY, 41 if drop_with_decision_open else 42, NAMES)
        others = [
            asyncio.create_task(WireSeat(running.address, table.seats[seat].token, seed=seat).run())
            for seat in range(4)
            if seat != DROPPER
        ]
        dropper = WireSeat(running.address, table.seats[DROPPER].token, seed=DROPPER)
        await dropper.join()
        asked = 0

        def stop(message: play_pb2.PlayResponse) -> bool:
            nonlocal asked
            if kind(message) == "decision_request":
                asked += 1
                return drop_with_decision_open and asked == 4
            return not drop_with_decision_open and asked >= 3 and acted(DROPPER, message)

        assert await dropper.play(stop), "the match ended before the seat dropped"
        first_stream = list(dropper.messages)
        open_before = dropper.open_decision
        next_seq = max(message.event.seq for message in first_stream if kind(message) == "event") + 1
        await dropper.drop()
        await until(lambda: table.seats[DROPPER].outbox is None, what="the referee to see the stream end")
        if not drop_with_decision_open:
            # Stay away while the others play on, until the match needs this seat again.
            await until(lambda: DROPPER in table.decisions, what="the next decision of the dropped seat")
            assert len(table.seat_messages(DROPPER)) > next_seq, "events happened while the seat was away"
        await dropper.join(next_seq)
        await dropper.play()
        await asyncio.gather(*others)
        second_stream = dropper.messages[len(first_stream) :]
        return Rejoined(table, dropper, first_stream, second_stream, open_before, next_seq)

    return with_referee(scenario, timeout=40, reconnect_grace_s=5.0)


def test_a_seat_that_drops_with_a_decision_open_rejoins_and_gets_the_same_decision_again() -> None:
    result = drop_and_rejoin(drop_with_decision_open=True)
    assert_clean_finish(result.table)
    assert_resumed_without_gap_or_duplicate(result)
    before = result.open_before
    assert before is not None
    again = next(message.decision_request for message in result.second_stream if kind(message) == "decision_request")
    assert again.decision_id == before.decision_id, "the open decision is sent again with the same id"
    assert (again.kind, list(again.legal_actions), again.view.cards) == (
        before.kind,
        list(before.legal_actions),
        before.view.cards,
    )
    assert again.decision_time_left_ms + again.bank_time_left_ms <= before.decision_time_left_ms + (
        before.bank_time_left_ms
    ), "with the time left now"
    decision_at = next(i for i, message in enumerate(result.second_stream) if kind(message) == "decision_request")
    assert all(kind(message) in ("joined", "event") for message in result.second_stream[:decision_at])
    assert result.dropper.last.code == "OK"
    assert result.dropper.of("action_rejected") == []


def test_a_seat_that_drops_between_decisions_rejoins_and_gets_the_events_it_missed() -> None:
    result = drop_and_rejoin(drop_with_decision_open=False)
    assert_clean_finish(result.table)
    assert_resumed_without_gap_or_duplicate(result)
    decision_at = next(i for i, message in enumerate(result.second_stream) if kind(message) == "decision_request")
    missed = [message for message in result.second_stream[:decision_at] if kind(message) == "event"]
    assert missed, "the events played while it was away come first"
    assert result.second_stream[decision_at].decision_request.view.events_this_hand[-1] == missed[-1].event
    assert result.dropper.last.code == "OK"


def test_a_seat_that_rejoins_after_the_grace_period_is_refused_and_a_disconnect_is_recorded() -> None:
    holder = (DROPPER + 1) % 4
    rules = ROOMY.with_options({"max_faults_before_forfeit": 1000})

    async def scenario(running: Running) -> tuple[Table, StreamResult, TableStatus]:
        clock = FakeClock()
        table = running.referee.create_table(rules, 43, NAMES, clock=clock)
        seats = {seat: WireSeat(running.address, table.seats[seat].token, seed=seat) for seat in range(4)}
        others = [asyncio.create_task(seats[seat].run()) for seat in range(4) if seat != DROPPER]
        dropper = seats[DROPPER]
        await dropper.join()
        asked = 0

        def stop(message: play_pb2.PlayResponse) -> bool:
            nonlocal asked
            asked += kind(message) == "decision_request"
            return asked == 3

        assert await dropper.play(stop)
        seats[holder].gate.clear()  # the match will wait on this seat: it must still run when the seat comes back
        await dropper.drop()
        await until(lambda: table.seats[DROPPER].outbox is None, what="the referee to see the stream end")
        clock.advance(SHORT_GRACE)  # the grace period runs out
        assert incidents(table) != []
        status = table.status
        async with grpc.aio.insecure_channel(running.address) as channel:
            late = PlayStream(channel, "late")
            await late.join(table.seats[DROPPER].token)
            refused = await late.refused()
        seats[holder].gate.set()
        await asyncio.gather(*others)
        return table, refused, status

    table, refused, status = with_referee(scenario, timeout=40, reconnect_grace_s=SHORT_GRACE)
    assert status is TableStatus.RUNNING
    assert refused.code == "FAILED_PRECONDITION" and "grace" in refused.details, refused
    assert refused.received == 0
    assert incidents(table) == [(DROPPER, "disconnect")]
    assert {seat for seat, _ in engine_faults(table)} == {DROPPER}
    assert {cause for _, cause in engine_faults(table)} == {"timeout"}, "its decisions time out from then on"
    assert table.status is TableStatus.FINISHED
    assert_replays_legally(table)


def test_a_seat_that_leaves_while_the_table_waits_and_returns_before_the_start_plays_normally() -> None:
    """FAULT_CAUSE_DISCONNECT is for a seat gone "while the match was running"; before the start, only the join
    deadline counts (a seat that has not come back by then is absent)."""

    async def scenario(running: Running) -> tuple[Table, list[WireSeat]]:
        clock = FakeClock()
        table = running.referee.create_table(ROOMY, 44, NAMES, join_timeout_s=20.0, clock=clock)
        early = WireSeat(running.address, table.seats[0].token, seed=0)
        await early.join()
        assert await early.play(lambda message: kind(message) == "joined")
        await early.drop()
        await until(lambda: table.seats[0].outbox is None, what="the referee to see the stream end")
        clock.advance(3 * SHORT_GRACE)  # longer than the grace period: time passing is the subject
        seats = [early] + [WireSeat(running.address, table.seats[seat].token, seed=seat) for seat in range(1, 4)]
        await asyncio.gather(*(seat.run() for seat in seats))
        return table, seats

    table, seats = with_referee(scenario, timeout=40, reconnect_grace_s=SHORT_GRACE)
    assert seats[0].of("joined")[-1].joined.resumed
    assert_clean_finish(table)
    for seat in seats:
        assert seat.last.code == "OK"


def test_a_seat_that_joins_in_a_loop_is_refused_past_its_burst_until_its_clock_allows_one_more() -> None:
    """Each join resends what the seat missed: past `JOIN_BURST` joins, one is taken a second (`JOIN_RATE`).
    A refused join is RESOURCE_EXHAUSTED before anything is sent, and one `protocol_error` incident says so,
    however many are refused; the seat then joins when its clock allows, and the match plays normally."""

    async def scenario(running: Running) -> tuple[Table, list[StreamResult], list[WireSeat]]:
        clock = FakeClock()
        table = running.referee.create_table(ROOMY, 45, NAMES, join_timeout_s=20.0, clock=clock)
        looping = WireSeat(running.address, table.seats[0].token, seed=0)
        for _ in range(JOIN_BURST):
            await looping.join()
            assert await looping.play(lambda message: kind(message) == "joined")
            await looping.drop()
            await until(lambda: table.seats[0].outbox is None, what="the referee to see the stream end")
        refused = []
        async with grpc.aio.insecure_channel(running.address) as channel:
            for attempt in range(2):
                stream = PlayStream(channel, f"refused {attempt}")
                await stream.join(table.seats[0].token)
                refused.append(await stream.refused())
        clock.advance(1 / JOIN_RATE)
        seats = [looping] + [WireSeat(running.address, table.seats[seat].token, seed=seat) for seat in range(1, 4)]
        await asyncio.gather(*(seat.run() for seat in seats))
        return table, refused, seats

    table, refused, seats = with_referee(scenario, timeout=40)
    for result in refused:
        assert result.code == "RESOURCE_EXHAUSTED" and "joined too often" in result.details, result
        assert result.received == 0, "a refused join is sent nothing"
    assert incidents(table) == [(0, "protocol_error")], "one incident for the refused joins"
    assert table.status is TableStatus.FINISHED and table.faults() == []
    assert seats[0].of("joined")[-1].joined.resumed
    for seat in seats:
        assert seat.last.code == "OK"
