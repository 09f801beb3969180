"""Events: the complete, ordered record of a match, each with who may see it (rules §11).

One frozen value per kind of event, holding engine values (cards, enums, ints), in an envelope (`Event`) that
adds its sequence number and recipients. Every number counts from 0: vacas, games within their vaca, hands
over the match, mus rounds. `Event.to_json` is the replay file's form (cards in notation, enums by their rule
names); every edge (gRPC, database, HTML) converts from these values.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, ClassVar

from referee.engine.actions import ActionKind
from referee.engine.cards import Card, format_cards
from referee.engine.enums import Enum
from referee.engine.hands import Lance
from referee.engine.outcome import (
    FaultCause,
    GameTermination,
    LanceOutcome,
    MatchTermination,
    MusCutReason,
    ScoreReason,
)
from referee.engine.rules import Rules
from referee.engine.senas import Sena, SenaRejectionCode


class EventKind(Enum):
    """Every kind of event the engine emits; the value is its name in the replay file."""

    MATCH_STARTED = "match_started"
    GAME_STARTED = "game_started"
    HAND_STARTED = "hand_started"
    CARDS_DEALT = "cards_dealt"
    MUS_CALLED = "mus_called"
    CARDS_DISCARDED = "cards_discarded"
    DISCARD_COUNTED = "discard_counted"
    CARDS_REPLACED = "cards_replaced"
    STOCK_RESHUFFLED = "stock_reshuffled"
    MUS_CUT = "mus_cut"
    LANCE_STARTED = "lance_started"
    DECLARED = "declared"
    SENA_DELIVERED = "sena_delivered"
    SENA_REJECTED = "sena_rejected"
    BET = "bet"
    LANCE_CLOSED = "lance_closed"
    POINTS_SCORED = "points_scored"
    HANDS_SHOWN = "hands_shown"
    LANCE_DECIDED = "lance_decided"
    HAND_ENDED = "hand_ended"
    GAME_ENDED = "game_ended"
    VACA_ENDED = "vaca_ended"
    MATCH_ENDED = "match_ended"
    FAULT = "fault"
    FORFEIT = "forfeit"


def _json_value(value: Any) -> Any:
    """A field as the replay file writes it: cards in notation, enums by value, tuples as lists."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple):
        if value and isinstance(value[0], Card):
            return format_cards(value)
        return [_json_value(item) for item in value]
    if isinstance(value, RejectedSena):
        return value.to_json()
    if isinstance(value, Rules):
        return value.to_options()
    return value


_PLAIN = (int, bool, str, type(None))
_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {}
"""Per event class, its JSON fields in order, each with whether its value needs converting (`_json_value`):
worked out once, so that writing an event's JSON (the referee does it for every event, to bound a match's
record) reads only the fields that are not plain values."""


def _plain(hint: Any) -> bool:
    args = typing.get_args(hint)
    return hint in _PLAIN or (bool(args) and typing.get_origin(hint) is not tuple and all(a in _PLAIN for a in args))


class _Payload:
    """What every event value shares: its kind and its JSON fields (the dataclass fields, in order)."""

    __slots__ = ()
    kind: ClassVar[EventKind]

    def to_json(self) -> dict[str, Any]:
        fields = _FIELDS.get(type(self))
        if fields is None:
            hints = typing.get_type_hints(type(self))
            names = [field.name for field in dataclasses.fields(self)]  # type: ignore[arg-type]
            fields = _FIELDS[type(self)] = tuple((name, not _plain(hints[name])) for name in names)
        out: dict[str, Any] = {}
        for name, convert in fields:
            value = getattr(self, name)
            out[name] = _json_value(value) if convert else value
        return out


@dataclass(frozen=True, slots=True)
class MatchStarted(_Payload):
    """The match began: who deals first and the rules (the seed is never told, rules §4.1)."""

    kind: ClassVar[EventKind] = EventKind.MATCH_STARTED
    first_dealer: int
    rules: Rules


@dataclass(frozen=True, slots=True)
class GameStarted(_Payload):
    """A game began, at `score` (0-0 but for a scripted start): `game` counts from 0 within vaca `vaca`."""

    kind: ClassVar[EventKind] = EventKind.GAME_STARTED
    vaca: int
    game: int
    score: tuple[int, int]


@dataclass(frozen=True, slots=True)
class HandStarted(_Payload):
    """Hand `hand` (from 0, over the whole match) began with this mano and dealer."""

    kind: ClassVar[EventKind] = EventKind.HAND_STARTED
    hand: int
    mano: int
    dealer: int


@dataclass(frozen=True, slots=True)
class CardsDealt(_Payload):
    """The four cards dealt to a seat (private to it)."""

    kind: ClassVar[EventKind] = EventKind.CARDS_DEALT
    seat: int
    cards: tuple[Card, ...]


@dataclass(frozen=True, slots=True)
class MusCalled(_Payload):
    kind: ClassVar[EventKind] = EventKind.MUS_CALLED
    seat: int
    mus: bool


@dataclass(frozen=True, slots=True)
class CardsDiscarded(_Payload):
    """The cards a seat threw (private to it)."""

    kind: ClassVar[EventKind] = EventKind.CARDS_DISCARDED
    seat: int
    cards: tuple[Card, ...]


@dataclass(frozen=True, slots=True)
class DiscardCounted(_Payload):
    """How many cards a seat threw (public, rules §5.2)."""

    kind: ClassVar[EventKind] = EventKind.DISCARD_COUNTED
    seat: int
    count: int


@dataclass(frozen=True, slots=True)
class CardsReplaced(_Payload):
    """The cards a seat received for its discard (private to it)."""

    kind: ClassVar[EventKind] = EventKind.CARDS_REPLACED
    seat: int
    cards: tuple[Card, ...]


@dataclass(frozen=True, slots=True)
class StockReshuffled(_Payload):
    kind: ClassVar[EventKind] = EventKind.STOCK_RESHUFFLED


@dataclass(frozen=True, slots=True)
class MusCut(_Payload):
    """The mus phase ended: a seat's no_mus (`seat`), or the round limit (`seat` None)."""

    kind: ClassVar[EventKind] = EventKind.MUS_CUT
    reason: MusCutReason
    seat: int | None


@dataclass(frozen=True, slots=True)
class LanceStarted(_Payload):
    kind: ClassVar[EventKind] = EventKind.LANCE_STARTED
    lance: Lance


@dataclass(frozen=True, slots=True)
class Declared(_Payload):
    """Whether a seat holds the jugada of Pares or Juego (rules §7)."""

    kind: ClassVar[EventKind] = EventKind.DECLARED
    lance: Lance
    seat: int
    has: bool


@dataclass(frozen=True, slots=True)
class SenaDelivered(_Payload):
    """A seña reached its sender's partner (and both rivals if it leaked: the recipients say which).

    `lance` is the lance of the seña round that carried it, None when it rode on a mus call; `mus_round` is the
    number of discards the hand had made when it was sent (rules §12.3 item 7).
    """

    kind: ClassVar[EventKind] = EventKind.SENA_DELIVERED
    seat: int
    sena: Sena
    lance: Lance | None
    mus_round: int

    def to_json(self) -> dict[str, Any]:
        phase = self.lance.value if self.lance is not None else "mus"
        return {"seat": self.seat, "sena": self.sena.value, "phase": phase, "mus_round": self.mus_round}


@dataclass(frozen=True, slots=True)
class RejectedSena:
    """One seña that was not delivered: the seña (or the label of one outside the vocabulary, `#99`) and why."""

    sena: Sena | str
    code: SenaRejectionCode
    reason: str

    def to_json(self) -> dict[str, Any]:
        sena = self.sena.value if isinstance(self.sena, Sena) else self.sena
        return {"sena": sena, "code": self.code.value, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class SenaRejected(_Payload):
    """The señas of one step that were rejected, told to the sender alone (rules §12.3 item 4)."""

    kind: ClassVar[EventKind] = EventKind.SENA_REJECTED
    seat: int
    senas: tuple[RejectedSena, ...]


@dataclass(frozen=True, slots=True)
class Bet(_Payload):
    """A betting action and the totals it leaves: `accepted` and `pending` (None when nothing is pending), and
    whether an órdago stands. While an órdago stands, `pending` holds the stake accepted before it."""

    kind: ClassVar[EventKind] = EventKind.BET
    lance: Lance
    seat: int
    action: ActionKind
    amount: int
    pending: int | None
    accepted: int
    ordago: bool


@dataclass(frozen=True, slots=True)
class LanceClosed(_Payload):
    """A lance's betting ended. `stake` is the accepted bet; `winner_team` the team that won a refused bet or the
    only team holding the jugada (`no_betting`), else None."""

    kind: ClassVar[EventKind] = EventKind.LANCE_CLOSED
    lance: Lance
    outcome: LanceOutcome
    stake: int
    winner_team: int | None


@dataclass(frozen=True, slots=True)
class PointsScored(_Payload):
    """Points to a team, with the score they leave; `lance` None for points outside a lance."""

    kind: ClassVar[EventKind] = EventKind.POINTS_SCORED
    team: int
    points: int
    lance: Lance | None
    reason: ScoreReason
    score: tuple[int, int]


@dataclass(frozen=True, slots=True)
class HandsShown(_Payload):
    """The four hands, by seat, shown at the end of a hand (rules §11)."""

    kind: ClassVar[EventKind] = EventKind.HANDS_SHOWN
    hands: tuple[tuple[Card, ...], ...]

    def to_json(self) -> dict[str, Any]:
        return {"hands": [format_cards(hand) for hand in self.hands]}


@dataclass(frozen=True, slots=True)
class LanceDecided(_Payload):
    """An accepted órdago's lance, decided on the cards (rules §8.4)."""

    kind: ClassVar[EventKind] = EventKind.LANCE_DECIDED
    lance: Lance
    seat: int
    team: int


@dataclass(frozen=True, slots=True)
class HandEnded(_Payload):
    kind: ClassVar[EventKind] = EventKind.HAND_ENDED
    hand: int


@dataclass(frozen=True, slots=True)
class GameEnded(_Payload):
    """A game ended in hand `hand`: its winner (None after a forfeit), final score and how it ended."""

    kind: ClassVar[EventKind] = EventKind.GAME_ENDED
    vaca: int
    game: int
    winner: int | None
    score: tuple[int, int]
    termination: GameTermination
    hand: int


@dataclass(frozen=True, slots=True)
class VacaEnded(_Payload):
    """A vaca ended: its winner (None when a forfeit cut it short) and the games each team won in it."""

    kind: ClassVar[EventKind] = EventKind.VACA_ENDED
    vaca: int
    winner: int | None
    games: tuple[int, int]


@dataclass(frozen=True, slots=True)
class MatchEnded(_Payload):
    kind: ClassVar[EventKind] = EventKind.MATCH_ENDED
    winner: int
    termination: MatchTermination
    vacas: tuple[int, int]


@dataclass(frozen=True, slots=True)
class Fault(_Payload):
    """A fault charged to a seat's team (rules §13); `faults` is the team's count with it."""

    kind: ClassVar[EventKind] = EventKind.FAULT
    seat: int
    cause: FaultCause
    team: int
    faults: int


@dataclass(frozen=True, slots=True)
class Forfeit(_Payload):
    """`team` reached the fault limit and loses the match (rules §13)."""

    kind: ClassVar[EventKind] = EventKind.FORFEIT
    team: int


Payload = (
    MatchStarted
    | GameStarted
    | HandStarted
    | CardsDealt
    | MusCalled
    | CardsDiscarded
    | DiscardCounted
    | CardsReplaced
    | StockReshuffled
    | MusCut
    | LanceStarted
    | Declared
    | SenaDelivered
    | SenaRejected
    | Bet
    | LanceClosed
    | PointsScored
    | HandsShown
    | LanceDecided
    | HandEnded
    | GameEnded
    | VacaEnded
    | MatchEnded
    | Fault
    | Forfeit
)
"""Any event value."""


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened, in its envelope: `seq` numbers it in its recipient's stream, `to` is the set of
    seats that see it (None: every seat, public), `payload` what happened."""

    seq: int
    payload: Payload
    to: frozenset[int] | None = None

    @property
    def kind(self) -> EventKind:
        return self.payload.kind

    def visible_to(self, seat: int) -> bool:
        """Whether this seat may see the event."""
        return self.to is None or seat in self.to

    @property
    def public(self) -> bool:
        return self.to is None

    def seen_by(self, seat: int | None, seq: int) -> Event:
        """The event as `seat` receives it (None: a spectator), numbered `seq` in that recipient's own stream.

        Numbering per recipient keeps the events a seat may not see from leaving gaps (a rejected seña, a seña
        that did not leak). A delivered seña reads as sent to the sender and his partner for both of them: they
        are never told whether it leaked to the rivals (rules §12.3 item 5).
        """
        to = self.to
        payload = self.payload
        if seat is not None and isinstance(payload, SenaDelivered):
            sender = payload.seat
            pair = frozenset({sender, (sender + 2) % 4})  # partners sit opposite (rules §3)
            to = pair if seat in pair else None
        return Event(seq, payload, to)

    def to_json(self) -> dict[str, Any]:
        """The event as a JSON object: `seq`, `kind`, its payload and, if private, `to`."""
        out: dict[str, Any] = {"seq": self.seq, "kind": self.kind.value, **self.payload.to_json()}
        if self.to is not None:
            out["to"] = sorted(self.to)
        return out
