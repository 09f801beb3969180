"""Views: what one seat may know (perfect recall, nothing hidden) and what a spectator sees (rules §11)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from referee.engine.actions import Action
from referee.engine.cards import Card
from referee.engine.events import Event, EventKind
from referee.engine.match import DecisionKind, Match


@dataclass(frozen=True, slots=True)
class SeatView:
    """Everything `seat` has seen: its own cards, the public record and the private events sent to it.

    `events` holds the whole match as this seat saw it; `hand_events` the part since the current hand began.
    The stock size is never part of a view (rules §4).
    """

    seat: int
    mano: int
    dealer: int
    hand_number: int
    vaca: int
    game: int
    score: tuple[int, int]
    games: tuple[int, int]
    vacas: tuple[int, int]
    faults: tuple[int, int]
    cards: tuple[Card, ...]
    lance: str | None
    decision: DecisionKind | None
    legal_actions: tuple[Action, ...]
    events: tuple[Event, ...]
    hand_events: tuple[Event, ...]
    is_over: bool

    @property
    def team(self) -> int:
        return self.seat % 2

    @property
    def senas_received(self) -> tuple[Event, ...]:
        """Señas this hand that reached this seat from another seat."""
        return tuple(
            event
            for event in self.hand_events
            if event.kind is EventKind.SENA_DELIVERED and event.data["seat"] != self.seat
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "seat": self.seat,
            "mano": self.mano,
            "dealer": self.dealer,
            "hand_number": self.hand_number,
            "vaca": self.vaca,
            "game": self.game,
            "score": list(self.score),
            "games": list(self.games),
            "vacas": list(self.vacas),
            "faults": list(self.faults),
            "cards": " ".join(map(str, self.cards)),
            "lance": self.lance,
            "decision": self.decision.value if self.decision else None,
            "legal_actions": [str(action) for action in self.legal_actions],
            "hand_events": [event.to_json() for event in self.hand_events],
        }


def _common(match: Match, events: list[Event]) -> dict[str, Any]:
    start = 0
    for index in range(len(events) - 1, -1, -1):
        if events[index].kind is EventKind.HAND_STARTED:
            start = index
            break
    return {
        "mano": match.mano,
        "dealer": match.dealer,
        "hand_number": match.hand_number,
        "vaca": match.vaca_number + 1,
        "game": match.game_number,
        "score": (match.score[0], match.score[1]),
        "games": (match.games_won[0], match.games_won[1]),
        "vacas": (match.vacas_won[0], match.vacas_won[1]),
        "faults": (match.faults[0], match.faults[1]),
        "lance": match.lance.value if match.lance else None,
        "events": tuple(events),
        "hand_events": tuple(events[start:]),
        "is_over": match.is_over,
    }


def seat_view(match: Match, seat: int) -> SeatView:
    """The view of one seat: its own current cards and every event visible to it."""
    events = match.events_for(seat)
    decision = match.decision_kind(seat)
    return SeatView(
        seat=seat,
        cards=match.hands[seat],
        decision=decision,
        legal_actions=match.legal_actions(seat),
        **_common(match, events),
    )


@dataclass(frozen=True, slots=True)
class PublicView:
    """What a spectator sees live: the public events only; no card of any seat until hands are shown."""

    hand_number: int
    mano: int
    dealer: int
    vaca: int
    game: int
    score: tuple[int, int]
    games: tuple[int, int]
    vacas: tuple[int, int]
    faults: tuple[int, int]
    lance: str | None
    awaited: tuple[int, ...]
    events: tuple[Event, ...]
    hand_events: tuple[Event, ...]
    is_over: bool


def public_view(match: Match) -> PublicView:
    """The spectator's view."""
    return PublicView(awaited=match.awaited(), **_common(match, match.events_for(None)))
