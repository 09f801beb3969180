"""`bench.referee_server.ActTimes`: the engine's part of an Act counts every call the Act makes into the match.

`act_over_engine_in_referee` puts the Act over it; `engine_us_per_decision_median` counts the awaited seat, its
legal actions and the step, so the Act's engine part must count the same, not the step alone.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from bench.referee_server import ActTimes
from referee import wire
from referee.engine.legal import LegalActions
from referee.engine.match import Match
from referee.engine.rules import Rules
from referee.engine.selfplay import random_action
from referee.service.table import Table

SLOW_LEGAL_S = 0.002


def _play_acts(acts: int) -> None:
    """Answer `acts` decisions of one table with random legal actions, through `Table.act`."""

    async def play() -> None:
        table = Table("t", Rules(), 7, ["a", "b", "c", "d"])
        outboxes: list[asyncio.Queue[Any]] = [asyncio.Queue() for _ in range(4)]
        for seat, outbox in enumerate(outboxes):
            table.attach(seat, outbox, batch=True)
        rng = random.Random(7)
        for _ in range(acts):
            match = table.match
            assert match is not None and not match.is_over
            seat, decision = next(iter(table.decisions.items()))
            action = random_action(rng, match.legal(seat).expand())
            table.act(seat, decision.decision_id, wire.action_to_proto(action))
        table.cancel("done")

    asyncio.run(play())


def test_the_engine_part_of_an_act_counts_the_next_decisions_legal_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    """A `Match.legal` made slow shows in the engine's part of each Act (the referee asks it for the next
    decision's request), and no more than the Act itself."""
    legal = Match.legal

    def slow_legal(match: Match, seat: int) -> LegalActions:
        deadline = time.perf_counter() + SLOW_LEGAL_S
        while time.perf_counter() < deadline:
            pass
        return legal(match, seat)

    monkeypatch.setattr(Match, "legal", slow_legal)
    times = ActTimes()
    times.start()
    try:
        _play_acts(12)
    finally:
        result = times.stop()
    assert Match.legal is slow_legal and Table.act.__name__ == "act", "stop puts the methods back"
    assert result["count"] == 12
    assert result["engine_median_us"] >= SLOW_LEGAL_S * 1e6
    assert result["engine_median_us"] <= result["median_us"]
