"""Events: the complete, ordered record of a match, each with who may see it (rules §11).

Payloads are plain JSON values (cards in notation, enums by their rule names), so the event log is the replay
file as it stands and every edge (gRPC, database, HTML) converts from one shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from referee.engine.enums import Enum


class EventKind(Enum):
    """Every kind of event the engine emits."""

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


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened. `to` is the set of seats that see it; None means every seat (public)."""

    seq: int
    kind: EventKind
    data: dict[str, Any]
    to: frozenset[int] | None = None

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
        if self.kind is EventKind.SENA_DELIVERED and seat is not None:
            sender = int(self.data["seat"])
            pair = frozenset({sender, (sender + 2) % 4})  # partners sit opposite (rules §3)
            to = pair if seat in pair else None
        return Event(seq, self.kind, self.data, to)

    def to_json(self) -> dict[str, Any]:
        """The event as a JSON object: `seq`, `kind`, its payload and, if private, `to`."""
        out: dict[str, Any] = {"seq": self.seq, "kind": self.kind.value, **self.data}
        if self.to is not None:
            out["to"] = sorted(self.to)
        return out
