"""Join.batch_events: the same events and decisions as the plain stream, in fewer messages."""

from __future__ import annotations

import asyncio

from referee.engine.rules import Rules
from referee.service import convert
from tests.service.conftest import Running, with_referee
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
            assert table.status.value == "finished" and table.all_faults() == []
            match = table.match
            assert match is not None
            for seat, log in enumerate(logs):
                assert log.status is None and log.outcome is not None
                received = [message.event for message in log.of("event")]
                expected = [
                    convert.event_to_proto(event, seq, seat) for seq, event in enumerate(match.events_for(seat))
                ]
                assert received == expected, f"seat {seat}: every event, in order, with its seq"
                requests = log.of("decision_request")
                assert requests, "every seat decided something"
                if seat % 2 == 0:
                    assert 0 < log.updates < len(received), "fewer messages than events"
                else:
                    assert log.updates == 0

    with_referee(scenario)
