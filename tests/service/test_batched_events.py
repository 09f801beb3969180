"""Join.batch_events: the same events and decisions as the plain stream, in fewer messages."""

from __future__ import annotations

import asyncio
import random

from clients.bots.wire_random import random_wire_action
from mus.v1 import play_pb2
from mus.v1 import types_pb2 as pb
from referee import wire
from referee.engine.rules import Rules
from referee.service.table import EVENT_DELAY_S, Outbox, Table, TableStatus
from tests.service.conftest import Running, with_referee
from tests.support.referee_checks import next_response
from tests.support.wire import WireLog, play_seat


def test_batching_seats_receive_exactly_their_events_and_decisions_in_one_message_per_step() -> None:
    async def scenario(running: Running) -> None:
        for seed in range(4):
            table = running.referee.create_table(Rules(), seed, ["a", "b", "c", "d"])
            # Seats 0 and 2 batch, 1 and 3 do not: one table, both kinds of stream.
            logs: list[WireLog] = list(
                await asyncio.gather(
                    *(
                        play_seat(running.address, state.token, 10 * seed + seat, batch=seat % 2 == 0)
                        for seat, state in enumerate(table.seats)
                    )
                )
            )
            assert table.status.value == "finished" and table.faults() == []
            match = table.match
            assert match is not None
            for seat, log in enumerate(logs):
                assert log.status is None and log.outcome is not None
                received = [message.event for message in log.of("event")]
                expected = [
                    wire.event_to_proto(event, seq, seat, bot_names=table.bot_names)
                    for seq, event in enumerate(match.events_for(seat))
                ]
                assert received == expected, f"seat {seat}: every event, in order, with its seq"
                requests = log.of("decision_request")
                assert requests, "every seat decided something"
                if seat % 2 == 0:
                    assert 0 < log.updates < len(received), "fewer messages than events"
                else:
                    assert log.updates == 0

    with_referee(scenario)


def test_a_batching_seat_that_is_not_asked_gets_its_events_with_its_next_decision_or_after_the_delay() -> None:
    """One message per step (the asked seat's); watching seats' events wait at most EVENT_DELAY_S."""

    async def scenario() -> None:
        table = Table("t", Rules(), 3, ["a", "b", "c", "d"])
        outboxes: list[Outbox] = [asyncio.Queue() for _ in range(4)]
        for seat, outbox in enumerate(outboxes):
            table.attach(seat, outbox, batch=True)
        events: list[list[pb.Event]] = [[], [], [], []]
        requests: dict[int, play_pb2.DecisionRequest] = {}

        def drain(seat: int) -> int:
            count = 0
            while not outboxes[seat].empty():
                message = next_response(outboxes[seat])
                count += 1
                if message is not None and message.WhichOneof("message") == "update":
                    events[seat].extend(message.update.events)
                    if message.update.HasField("decision_request"):
                        requests[seat] = message.update.decision_request
            return count

        rng = random.Random(3)
        timer_checks = 0
        for _ in range(4):
            drain(_)
        while table.status is TableStatus.RUNNING:
            seat = min(table.decisions)
            request = requests.pop(seat)
            assert request.decision_id == table.decisions[seat].decision_id
            table.act(seat, request.decision_id, random_wire_action(rng, request))
            if table.status is not TableStatus.RUNNING:
                break
            for other in range(4):
                sent = drain(other)
                if other in requests:
                    assert sent == 1, "a newly asked seat gets one Update: its events and its request"
                elif other not in table.decisions:
                    assert sent == 0, "a seat that is not asked gets nothing yet"
            if timer_checks < 5 and len(table.decisions) == 1:
                timer_checks += 1
                await asyncio.sleep(EVENT_DELAY_S * 3)
                watching = [other for other in range(4) if other not in table.decisions]
                assert all(drain(other) <= 1 for other in watching)
                for other in watching:
                    assert len(events[other]) == len(table.seat_messages(other)), "the delay delivered every event"
        for seat in range(4):
            drain(seat)
            assert events[seat] == table.seat_messages(seat), f"seat {seat}: every event exactly once, in order"
        assert timer_checks == 5

    asyncio.run(scenario())


def test_a_seat_that_keeps_its_own_hand_events_gets_views_without_them_and_loses_nothing() -> None:
    """Join.omit_hand_events: the hand's events cross the wire once, as events; the view the seat builds from them
    with `referee.wire` is the one a seat without the flag reads from its requests."""

    async def scenario() -> None:
        table = Table("t", Rules(), 5, ["a", "b", "c", "d"])
        outboxes: list[Outbox] = [asyncio.Queue() for _ in range(4)]
        for seat, outbox in enumerate(outboxes):
            table.attach(seat, outbox, batch=True, omit_hand_events=seat == 0)
        rng = random.Random(5)
        hand: list[list[pb.Event]] = [[], [], [], []]
        rules = Rules()
        compared = 0
        while table.status is TableStatus.RUNNING:
            request: play_pb2.DecisionRequest | None = None
            asked = min(table.decisions)
            for seat, outbox in enumerate(outboxes):
                while not outbox.empty():
                    message = next_response(outbox)
                    if message is None or message.WhichOneof("message") != "update":
                        continue
                    for event in message.update.events:
                        if event.WhichOneof("payload") == "hand_started":
                            hand[seat] = []
                        hand[seat].append(event)
                    if message.update.HasField("decision_request") and seat == asked:
                        request = message.update.decision_request
            assert request is not None
            view = request.view
            if asked == 0:
                assert not view.events_this_hand and not view.senas_received, "the seat keeps them itself"
                own = [wire.event_from_proto(event, 0) for event in hand[0]]
                assert table.views is not None
                assert wire.seat_view_from_proto(request, rules, hand_events=own) == table.views.view(0)
                compared += 1
            else:
                assert list(view.events_this_hand) == hand[asked], "the others still get them in the view"
            table.act(asked, request.decision_id, random_wire_action(rng, request))
        assert compared > 10

    asyncio.run(scenario())
