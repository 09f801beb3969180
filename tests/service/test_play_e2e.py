"""Whole matches over real gRPC on loopback: many tables at once, every one finishes cleanly."""

from __future__ import annotations

import asyncio

from referee.engine.rules import Rules
from tests.service.conftest import Running, with_referee
from tests.support.wire import WireLog, play_seat


def test_many_tables_of_random_wire_bots_all_finish_without_faults() -> None:
    async def scenario(running: Running) -> list[list[WireLog]]:
        tables = [running.referee.create_table(Rules(), seed, ["a", "b", "c", "d"]) for seed in range(12)]
        logs = await asyncio.gather(
            *(
                asyncio.gather(
                    *(play_seat(running.address, state.token, 4 * i + seat) for seat, state in enumerate(t.seats))
                )
                for i, t in enumerate(tables)
            )
        )
        for table in tables:
            assert table.status.value == "finished"
            assert table.faults() == []
        return [list(seats) for seats in logs]

    for seats in with_referee(scenario):
        outcomes = {seat.outcome.SerializeToString() for seat in seats if seat.outcome is not None}
        assert len(outcomes) == 1, "all four seats receive the same outcome"
        for seat in seats:
            assert seat.status is None
            assert seat.of("action_rejected") == []
            assert seat.of("decision_request"), "every seat is asked something"
