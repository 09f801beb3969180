"""Views: what one seat may know (perfect recall, nothing hidden) and what a spectator sees (rules §11).

`SeatLog` keeps, for each seat, the events it has been shown, numbered as it saw them, and reads only the
events since its last update: the referee's table and the SDK's local table build every view from one, so what
the hidden-information tests check is what a bot is sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from referee.engine.actions import Action
from referee.engine.cards import Card
from referee.engine.events import Event, HandStarted, SenaDelivered
from referee.engine.hands import Lance
from referee.engine.legal import LegalActions
from referee.engine.match import DecisionKind, Match
from referee.engine.senas import Sena


@dataclass(frozen=True, slots=True)
class SeatView:
    """Everything `seat` may know now: its cards, the counters, the betting of the lance, its decision and
    what it may do, and the events of the current hand as it saw them (`hand_events`).

    Numbers count from 0: `hand_number` over the match, `vaca`, `game` within its vaca, `mus_round` (the
    discards the hand has made). `accepted_total` and `pending_total` are the current lance's totals (0 outside
    a bet; `pending_total` is 0 while an órdago is pending, `ordago_pending`). The stock size is never part of a
    view (rules §4).
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
    lance: Lance | None
    mus_round: int
    accepted_total: int
    pending_total: int
    ordago_pending: bool
    decision: DecisionKind | None
    legal: LegalActions
    hand_events: tuple[Event, ...]
    is_over: bool

    @property
    def team(self) -> int:
        return self.seat % 2

    @property
    def legal_actions(self) -> tuple[Action, ...]:
        """The legal actions listed one by one (`LegalActions.expand`)."""
        return self.legal.expand()

    @property
    def acceptable_senas(self) -> tuple[Sena, ...]:
        """On a mus call or in a seña round: the señas that would be accepted now."""
        return self.legal.acceptable_senas

    @property
    def senas_received(self) -> tuple[Event, ...]:
        """Señas this hand that reached this seat from another seat."""
        return tuple(
            event
            for event in self.hand_events
            if isinstance(event.payload, SenaDelivered) and event.payload.seat != self.seat
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
            "lance": self.lance.value if self.lance else None,
            "mus_round": self.mus_round,
            "accepted_total": self.accepted_total,
            "pending_total": self.pending_total,
            "ordago_pending": self.ordago_pending,
            "decision": self.decision.value if self.decision else None,
            "legal_actions": [str(action) for action in self.legal_actions],
            "hand_events": [event.to_json() for event in self.hand_events],
        }


class SeatLog:
    """Which events each seat of one match has been shown, numbered as it saw them, kept up to date from the
    events since the last `update` (the log is never read twice).

    The match's own log is the only copy of the events: per seat this keeps where each of its events sits in
    that log (`positions`, its seq is the index) and the current hand's events as it saw them (`hand`), which
    its views carry. `events` rebuilds a seat's whole stream on demand (a rejoin, a test)."""

    def __init__(self, match: Match) -> None:
        self.match = match
        self.positions: tuple[list[int], list[int], list[int], list[int]] = ([], [], [], [])
        """Per seat, the index in `match.events` of each event it has seen: its seq is the position here."""
        self._hand_start = [0, 0, 0, 0]
        """Per seat, the seq of its current hand's HandStarted."""
        self._hand: tuple[list[Event], list[Event], list[Event], list[Event]] = ([], [], [], [])
        """Per seat, the first events of its current hand as it saw them: `hand_events` numbers the rest when a
        view asks, so an event no view of the hand shows is never copied (the referee's views are mostly of
        one seat)."""
        self._read = 0

    def update(self) -> list[tuple[Event, tuple[int, ...]]]:
        """Route the match's new events to their seats; returns each new event (numbered match-wide) with its
        seq in each seat's stream, by seat (-1 for a seat that does not see it)."""
        log = self.match.events
        start = self._read
        self._read = len(log)
        routed: list[tuple[Event, tuple[int, ...]]] = []
        for index in range(start, len(log)):
            event = log[index]
            to = event.to
            seqs = [-1, -1, -1, -1]
            starts_hand = isinstance(event.payload, HandStarted)
            for seat in range(4) if to is None else sorted(to):
                positions = self.positions[seat]
                seq = seqs[seat] = len(positions)
                positions.append(index)
                if starts_hand:
                    self._hand_start[seat] = seq
                    self._hand[seat].clear()
            routed.append((event, tuple(seqs)))
        return routed

    def hand_events(self, seat: int) -> tuple[Event, ...]:
        """The events of `seat`'s current hand, from its HandStarted on, numbered as it saw them."""
        hand = self._hand[seat]
        positions, log = self.positions[seat], self.match.events
        for seq in range(self._hand_start[seat] + len(hand), len(positions)):
            hand.append(log[positions[seq]].seen_by(seat, seq))
        return tuple(hand)

    def seen(self, seat: int) -> int:
        """How many events `seat` has been shown: the seq its next one gets."""
        return len(self.positions[seat])

    def events(self, seat: int, start: int = 0, end: int | None = None) -> list[Event]:
        """The events `seat` has seen from seq `start` on (to `end`, excluded), numbered as it saw them."""
        log = self.match.events
        return [log[index].seen_by(seat, seq) for seq, index in enumerate(self.positions[seat][start:end], start)]

    def view(self, seat: int) -> SeatView:
        """The view of `seat` now (call `update` first to include the latest events)."""
        match = self.match
        return SeatView(
            *view_standing(match, seat),
            *view_betting(match),
            decision=match.decision_kind(seat),
            legal=match.legal(seat),
            hand_events=self.hand_events(seat),
            is_over=match.is_over,
        )


Standing = tuple[
    int, int, int, int, int, int, tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int], tuple[Card, ...]
]
"""`SeatView`'s first fields, `seat` to `cards`, in its order: they change once a hand or a discard."""

Betting = tuple[Lance | None, int, int, int, bool]
"""`SeatView`'s fields `lance` to `ordago_pending`, in its order: they change with the steps of a lance."""


def view_standing(match: Match, seat: int) -> Standing:
    """Where the match stands, as `seat`'s view shows it, and its cards. The referee serializes a view from these
    two tuples (`wire.SeatViewBytes`) without building the view: one definition of what a view holds."""
    score, games, vacas, faults = match.score, match.games_won, match.vacas_won, match.faults
    return (
        seat,
        match.mano,
        match.dealer,
        match.hand_number,
        match.vaca_number,
        match.game_number,
        (score[0], score[1]),
        (games[0], games[1]),
        (vacas[0], vacas[1]),
        (faults[0], faults[1]),
        match.hands[seat],
    )


def view_betting(match: Match) -> Betting:
    """The current lance and its betting as a view shows them: `pending_total` is 0 while an órdago is pending."""
    accepted, pending, ordago = match.betting_totals()
    return (match.lance, match.discard_rounds, accepted, 0 if ordago else pending, ordago)


def _counters(match: Match) -> dict[str, Any]:
    """Where the match stands, as every view (a seat's, a spectator's) shows it; every number from 0."""
    return {
        "mano": match.mano,
        "dealer": match.dealer,
        "hand_number": match.hand_number,
        "vaca": match.vaca_number,
        "game": match.game_number,
        "score": (match.score[0], match.score[1]),
        "games": (match.games_won[0], match.games_won[1]),
        "vacas": (match.vacas_won[0], match.vacas_won[1]),
        "faults": (match.faults[0], match.faults[1]),
    }


def seat_view(match: Match, seat: int) -> SeatView:
    """The view of one seat, from a fresh log (tests; a table keeps one `SeatLog` instead)."""
    log = SeatLog(match)
    log.update()
    return log.view(seat)


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
    lance: Lance | None
    awaited: tuple[int, ...]
    events: tuple[Event, ...]
    hand_events: tuple[Event, ...]
    is_over: bool


def public_view(match: Match) -> PublicView:
    """The spectator's view."""
    events = match.events_for(None)
    start = max((index for index, event in enumerate(events) if isinstance(event.payload, HandStarted)), default=0)
    return PublicView(
        **_counters(match),
        lance=match.lance,
        awaited=match.awaited(),
        events=tuple(events),
        hand_events=tuple(events[start:]),
        is_over=match.is_over,
    )
