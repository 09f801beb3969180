"""A seeded random match long enough to step through, and what its record says hand by hand."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from referee.engine.replay import match_record
from referee.engine.rules import Rules
from referee.engine.selfplay import play_random_match

SEED = 32
"""With the rules below: 11 hands over 8 games, mus rounds with discards, accepted and refused bets, tanteos."""

RULES = {"games_to_win_vaca": 3, "vacas_to_win_match": 2}
NAMES = ("randombot", "rulesbot")


@dataclass
class HandFacts:
    """One hand as the record tells it, read without the viewer's code."""

    number: int
    dealt: dict[int, list[str]]
    score_at_start: tuple[int, int]
    events: list[dict[str, Any]] = field(default_factory=list)

    def score_at_end(self) -> tuple[int, int]:
        scored = [event["score"] for event in self.events if event["kind"] == "points_scored"]
        return (scored[-1][0], scored[-1][1]) if scored else self.score_at_start


def read_hands(record: dict[str, Any]) -> list[HandFacts]:
    """Cut the record's events into hands; the score at a hand's start follows points and new games."""
    hands: list[HandFacts] = []
    score = (0, 0)
    for event in record["events"]:
        kind = event["kind"]
        if kind == "game_started":
            score = (event["score"][0], event["score"][1])
        elif kind == "hand_started":
            hands.append(HandFacts(event["hand"], {}, score))
        elif kind == "points_scored":
            score = (event["score"][0], event["score"][1])
        if hands and kind not in ("game_started", "match_started"):
            hands[-1].events.append(event)
        if kind == "cards_dealt":
            hands[-1].dealt[event["seat"]] = event["cards"].split()
    return hands


@pytest.fixture(scope="session")
def record() -> dict[str, Any]:
    return match_record(play_random_match(Rules.from_options(RULES), SEED))
