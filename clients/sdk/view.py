"""`BotView`: what a bot's `decide` receives, the same value on the local table and over gRPC.

A view holds only what the seat may know (rules §11): its own cards, the public record of the hand and the
private events sent to it. Events keep the engine's shape (`Event` with its JSON payload) so one bot reads one
vocabulary everywhere; their `seq` numbers the events this seat was given, from 0, as on the wire.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from referee.engine.actions import Action, ActionKind
from referee.engine.cards import Card
from referee.engine.events import Event, EventKind
from referee.engine.hands import HandFacts, Lance, evaluate
from referee.engine.match import DecisionKind, partner_of, team_of
from referee.engine.rules import Rules
from referee.engine.senas import Sena


@dataclass(frozen=True, slots=True)
class ReceivedSena:
    """A seña another seat sent that reached this seat (rules §12.3 item 5).

    `lance` is the lance of the seña round that carried it, or None when it rode on a mus call; `mus_round`
    is the number of discards the hand had made when it was sent, so a bot can tell a stale seña from before
    a discard (rules §12.3 item 7).
    """

    seat: int
    sena: Sena
    lance: Lance | None
    mus_round: int


@dataclass(frozen=True, kw_only=True)
class BotView:
    """Everything one seat may know when it must decide, plus the legal actions, expanded and concrete.

    Counters follow the engine: `vaca` and `game` count from 1, `hand_number` from 0 over the match; tuples
    indexed by team (team 0 = seats 0 and 2). `accepted_total`, `pending_total` and `ordago_pending` describe
    the betting of the current lance (all zero outside a bet; `pending_total` is 0 while an órdago is
    pending). `rejection` is set when the bot's previous answer to this same decision was refused and it is
    asked again (`illegal_action_policy = retry`, rules §13).

    The class is frozen but not slotted, so that `facts` can be cached on the instance.
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
    decision: DecisionKind
    legal_actions: tuple[Action, ...]
    hand_events: tuple[Event, ...]
    senas_received: tuple[ReceivedSena, ...]
    discard_rounds: int
    accepted_total: int
    pending_total: int
    ordago_pending: bool
    decision_time_left_s: float
    bank_time_left_s: float
    rules: Rules
    mus_senas: tuple[Sena, ...] = ()
    """On a mus decision: the señas that may ride on the call now (true and in their window, §12.3 (a))."""
    rejection: str | None = None

    @property
    def team(self) -> int:
        """This seat's team: 0 for seats 0 and 2, 1 for seats 1 and 3."""
        return team_of(self.seat)

    @property
    def partner(self) -> int:
        """The partner's seat, opposite this one."""
        return partner_of(self.seat)

    @property
    def rivals(self) -> tuple[int, int]:
        """The two opponents' seats, in seat order."""
        low, high = sorted(((self.seat + 1) % 4, (self.seat + 3) % 4))
        return (low, high)

    @property
    def is_mano(self) -> bool:
        """Whether this seat speaks first and wins every tie of the hand (rules §3)."""
        return self.seat == self.mano

    @property
    def is_postre(self) -> bool:
        """Whether this seat speaks last (the dealer) and loses every tie."""
        return self.seat == self.dealer

    @property
    def position(self) -> int:
        """This seat's place in speaking order: 0 for the mano, 3 for the postre."""
        return (self.seat - self.mano) % 4

    @property
    def our_score(self) -> int:
        """This seat's team's score in the current game."""
        return self.score[self.team]

    @property
    def their_score(self) -> int:
        """The rivals' score in the current game."""
        return self.score[1 - self.team]

    @cached_property
    def facts(self) -> HandFacts:
        """Own cards evaluated under these rules; cached because bots ask for it many times per decision."""
        return evaluate(self.cards, self.rules.deck_mode, self.rules.real_31)

    def can(self, kind: ActionKind) -> bool:
        """Whether some legal action has this kind."""
        return any(action.kind is kind for action in self.legal_actions)

    def actions_of(self, kind: ActionKind) -> tuple[Action, ...]:
        """The legal actions of one kind, in the order the referee listed them (amounts ascending)."""
        return tuple(action for action in self.legal_actions if action.kind is kind)

    def declared(self, lance: Lance) -> dict[int, bool]:
        """What each seat declared for Pares or Juego this hand (rules §7); empty before the declarations."""
        return {
            int(event.data["seat"]): bool(event.data["has"])
            for event in self.hand_events
            if event.kind is EventKind.DECLARED and event.data["lance"] == lance.value
        }


def received_senas(hand_events: Sequence[Event], seat: int) -> tuple[ReceivedSena, ...]:
    """The señas of other seats delivered to `seat` this hand, in order, from the engine's events."""
    out: list[ReceivedSena] = []
    for event in hand_events:
        if event.kind is not EventKind.SENA_DELIVERED or event.data["seat"] == seat:
            continue
        phase = event.data["phase"]
        out.append(
            ReceivedSena(
                seat=int(event.data["seat"]),
                sena=Sena(event.data["sena"]),
                lance=None if phase == "mus" else Lance(phase),
                mus_round=int(event.data["mus_round"]),
            )
        )
    return tuple(out)
