"""Event fields types.proto promises and a bot in another language reads straight off the wire."""

from __future__ import annotations

import asyncio

from mus.v1 import types_pb2 as pb
from referee.engine.events import EventKind
from referee.engine.rules import Rules
from referee.engine.selfplay import play_random_match
from referee.wire import event_to_proto
from tests.service.conftest import Running, with_referee
from tests.support.events import fields
from tests.support.wire import play_seat

NAMES = ["north", "east", "south", "west"]


def test_lance_closed_names_the_only_holding_team_when_a_lance_has_no_betting() -> None:
    checked = 0
    for seed in range(60):
        match = play_random_match(Rules(), seed)
        holders: dict[str, set[int]] = {}
        for event in match.events:
            if event.kind is EventKind.HAND_STARTED:
                holders = {}
            elif event.kind is EventKind.DECLARED and fields(event)["has"]:
                holders.setdefault(fields(event)["lance"], set()).add(fields(event)["seat"] % 2)
            elif event.kind is EventKind.LANCE_CLOSED and fields(event)["outcome"] == "no_betting":
                (team,) = holders[fields(event)["lance"]]
                closed = event_to_proto(event, 0, None).lance_closed
                assert closed.outcome == pb.LANCE_OUTCOME_NO_BETTING
                assert closed.winner_team == (pb.TEAM_0, pb.TEAM_1)[team], (seed, event)
                checked += 1
    assert checked >= 10, "random matches close many lances without betting"


def test_match_started_carries_the_four_bot_names_by_seat() -> None:
    async def scenario(running: Running) -> None:
        table = running.referee.create_table(Rules(), 3, NAMES)
        logs = await asyncio.gather(
            *(play_seat(running.address, state.token, seat) for seat, state in enumerate(table.seats))
        )
        for log in logs:
            started = log.of("event")[0].event
            assert started.WhichOneof("payload") == "match_started"
            assert list(started.match_started.bot_names) == NAMES
        assert list(next(table.public_messages()).match_started.bot_names) == NAMES, "spectators and replays too"

    with_referee(scenario)
