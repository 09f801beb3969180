"""`BotView`: what a bot's `decide` receives, the same value on the local table and over gRPC.

A view holds only what the seat may know (rules §11): its own cards, the public record of the hand and the
private events sent to it. Events are the engine's (`Event` with its typed payload) so one bot reads one
vocabulary everywhere; their `seq` numbers the events this seat was given, from 0, as on the wire.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from referee.engine.actions import Action, ActionKind
from referee.engine.cards import Card
from referee.engine.events import Declared, Event, SenaDelivered
from referee.engine.hands import HandFacts, Lance, evaluate
from referee.engine.legal import LegalActions
from referee.engine.match import DecisionKind
from referee.engine.rules import Rules
from referee.engine.seats import partner_of, team_of
from referee.engine.senas import Sena
from referee.engine.views import SeatView


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

    Counters follow the engine: `vaca`, `game` (within its vaca) and `hand_number` (over the match) count from 0; tuples
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
    legal: LegalActions
    """What is legal, one entry per kind with its ranges (`action in view.legal` checks an action)."""
    legal_actions: tuple[Action, ...]
    """The same, listed one by one (`LegalActions.expand`)."""
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
            declared.seat: declared.has
            for event in self.hand_events
            if isinstance(declared := event.payload, Declared) and declared.lance is lance
        }


def bot_view(
    view: SeatView,
    rules: Rules,
    *,
    decision_time_left_s: float,
    bank_time_left_s: float,
    rejection: str | None = None,
) -> BotView:
    """The `BotView` of the engine's view of a seat asked to decide, on the local table or over the wire."""
    decision = view.decision
    if decision is None:
        raise ValueError(f"seat {view.seat} is not asked to decide now")
    return BotView(
        seat=view.seat,
        mano=view.mano,
        dealer=view.dealer,
        hand_number=view.hand_number,
        vaca=view.vaca,
        game=view.game,
        score=view.score,
        games=view.games,
        vacas=view.vacas,
        faults=view.faults,
        cards=view.cards,
        lance=view.lance,
        decision=decision,
        legal=view.legal,
        legal_actions=view.legal.expand(),
        hand_events=view.hand_events,
        senas_received=received_senas(view.hand_events, view.seat),
        discard_rounds=view.mus_round,
        accepted_total=view.accepted_total,
        pending_total=view.pending_total,
        ordago_pending=view.ordago_pending,
        decision_time_left_s=decision_time_left_s,
        bank_time_left_s=bank_time_left_s,
        rules=rules,
        mus_senas=view.acceptable_senas if decision is DecisionKind.MUS else (),
        rejection=rejection,
    )


def received_senas(hand_events: Sequence[Event], seat: int) -> tuple[ReceivedSena, ...]:
    """The señas of other seats delivered to `seat` this hand, in order, from the engine's events."""
    out: list[ReceivedSena] = []
    for event in hand_events:
        sena = event.payload
        if isinstance(sena, SenaDelivered) and sena.seat != seat:
            out.append(ReceivedSena(seat=sena.seat, sena=sena.sena, lance=sena.lance, mus_round=sena.mus_round))
    return tuple(out)
