"""The legal actions of a decision as a value: one entry per kind, with its ranges (rules §5, §7, §8, §12).

A bet of any amount in a range, or a discard of any subset of a hand, is one entry rather than dozens of
actions: what the referee sends, what a bot reads, and what `action in legal` checks. `expand` lists the
concrete actions, in the engine's order, for bots that pick from a list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations

from referee.engine.actions import Action, ActionKind
from referee.engine.cards import Card
from referee.engine.errors import IllegalActionError
from referee.engine.rules import Rules
from referee.engine.senas import Sena

KIND_ORDER: dict[ActionKind, int] = {
    kind: index
    for index, kind in enumerate(
        (
            ActionKind.MUS,
            ActionKind.NO_MUS,
            ActionKind.DISCARD,
            ActionKind.DECLARE,
            ActionKind.SENAS,
            ActionKind.PASO,
            ActionKind.QUIERO,
            ActionKind.NO_QUIERO,
            ActionKind.ENVIDO,
            ActionKind.MAS,
            ActionKind.ORDAGO,
        )
    )
}
"""The order in which legal entries and expanded actions are listed: answers before raises, órdago last."""


@dataclass(frozen=True, slots=True)
class LegalAction:
    """One kind of legal action and its ranges; the fields that do not apply to the kind are 0, False or ().

    ENVIDO and MAS: any amount from `min_amount` to `max_amount`, or above it too when not `capped` (an
    uncapped stake decides the game the same way, rules §8.1; `max_amount` is then where a listing stops).
    DISCARD: any `min_cards`..`max_cards` distinct cards of the hand. DECLARE: the one true answer
    `has_jugada`. MUS, NO_MUS and SENAS: up to `max_senas` señas may ride on the action; `senas` are those that
    would be accepted now (others are rejected one by one, not a fault, rules §12.3 item 4).
    """

    kind: ActionKind
    min_amount: int = 0
    max_amount: int = 0
    capped: bool = True
    min_cards: int = 0
    max_cards: int = 0
    has_jugada: bool = False
    senas: tuple[Sena, ...] = ()
    max_senas: int = 0


MAX_CARDS_PER_ACT = 4
"""A discard names at most the four cards of a hand: a longer list is a protocol error, not an illegal action
whose reason would quote every card."""


def size_problem(senas: int, cards: int, rules: Rules) -> str | None:
    """Why an action with this many señas and cards breaks the protocol before any rule is asked (rules §12.3
    item 4: more señas than `max_senas_per_window` over the network), or None. The referee judges every Act by it
    before reading the Act further, and the SDK's local table judges a bot's actions by it too: a bot that passed
    its local tests with four señas lost its stream on the referee."""
    limit = rules.max_senas_per_window
    if senas > limit:
        return f"an Act carries {senas} señas: at most {limit} (max_senas_per_window)"
    if cards > MAX_CARDS_PER_ACT:
        return f"an Act carries {cards} cards: at most {MAX_CARDS_PER_ACT}"
    return None


def listed_bet_max(rules: Rules, low: int) -> int:
    """Where the listing of an uncapped bet stops: the target score (rules §8.1), at least `low`."""
    return max(rules.target_score, rules.min_bet, low)


@dataclass(frozen=True, slots=True)
class LegalActions:
    """Everything a seat may do now: its entries in `KIND_ORDER` and, for a discard, the hand it discards from.

    Empty when the seat is not asked. `action in legal` holds exactly when `Match.check` accepts the action
    (señas that ride where they cannot are rejected on their own, so they do not make an action illegal).
    """

    entries: tuple[LegalAction, ...] = ()
    cards: tuple[Card, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.entries)

    def entry(self, kind: ActionKind) -> LegalAction | None:
        """The entry of a kind, or None when no action of that kind is legal."""
        for entry in self.entries:
            if entry.kind is kind:
                return entry
        return None

    @property
    def kinds(self) -> tuple[ActionKind, ...]:
        return tuple(entry.kind for entry in self.entries)

    @property
    def acceptable_senas(self) -> tuple[Sena, ...]:
        """The señas that would be accepted on a mus call or in a seña round now; () elsewhere."""
        for entry in self.entries:
            if entry.max_senas:
                return entry.senas
        return ()

    def __contains__(self, action: object) -> bool:
        if not isinstance(action, Action):
            return False
        entry = self.entry(action.kind)
        if entry is None or action.malformed() is not None:
            return False
        kind = entry.kind
        if kind is ActionKind.ENVIDO or kind is ActionKind.MAS:
            return action.amount >= entry.min_amount and (not entry.capped or action.amount <= entry.max_amount)
        if kind is ActionKind.DISCARD:  # distinct cards of the hand, in the hand's order (`Action.discard`)
            cards = action.cards
            in_order = [card for card in self.cards if card in cards]
            return entry.min_cards <= len(cards) <= entry.max_cards and in_order == list(cards)
        if kind is ActionKind.DECLARE:
            return action.has_jugada is entry.has_jugada
        return True

    def expand(self) -> tuple[Action, ...]:
        """Every listed action, in `KIND_ORDER` (amounts ascending, discards by size then hand order). Señas are
        not enumerated, but for a seña round: the empty answer, then each acceptable seña alone."""
        return _expand(self)


@lru_cache(maxsize=1 << 14)
def _expand(legal: LegalActions) -> tuple[Action, ...]:
    out: list[Action] = []
    for entry in legal.entries:
        kind = entry.kind
        if kind is ActionKind.ENVIDO or kind is ActionKind.MAS:
            out.extend(Action(kind, amount=amount) for amount in range(entry.min_amount, entry.max_amount + 1))
        elif kind is ActionKind.DISCARD:
            out.extend(
                Action.discard(cards)
                for size in range(entry.min_cards, entry.max_cards + 1)
                for cards in combinations(legal.cards, size)
            )
        elif kind is ActionKind.DECLARE:
            out.append(Action.declare(entry.has_jugada))
        elif kind is ActionKind.SENAS:
            out.append(Action.send_senas(()))
            out.extend(Action.send_senas((sena,)) for sena in entry.senas)
        else:
            out.append(Action(kind))
    return tuple(out)


# The legal values of the decisions that are not bets, made once per value: the referee lists the legal actions of
# every decision it sends, and building these frozen values (each field set through `object.__setattr__`) cost
# more than working out what they hold. A betting decision's are kept by `betting.betting_legal`.


@lru_cache(maxsize=1 << 10)
def mus_call_legal(senas: tuple[Sena, ...], window: int) -> LegalActions:
    """A mus decision: mus or no mus, each with up to `window` señas, `senas` those that would be accepted."""
    return LegalActions(
        (
            LegalAction(ActionKind.MUS, senas=senas, max_senas=window),
            LegalAction(ActionKind.NO_MUS, senas=senas, max_senas=window),
        )
    )


@lru_cache(maxsize=1 << 10)
def senas_legal(senas: tuple[Sena, ...], window: int) -> LegalActions:
    """A seña round: a list of up to `window` señas, `senas` those that would be accepted."""
    return LegalActions((LegalAction(ActionKind.SENAS, senas=senas, max_senas=window),))


@lru_cache(maxsize=4)
def declare_legal(has_jugada: bool) -> LegalActions:
    """A declaration: the one true answer."""
    return LegalActions((LegalAction(ActionKind.DECLARE, has_jugada=has_jugada),))


@lru_cache(maxsize=1 << 4)
def _discard_entry(low: int, high: int) -> LegalAction:
    return LegalAction(ActionKind.DISCARD, min_cards=low, max_cards=high)


def discard_legal(hand: tuple[Card, ...], low: int, high: int) -> LegalActions:
    """A discard: `low` to `high` distinct cards of `hand`."""
    return LegalActions((_discard_entry(low, high),), hand)


def describe(actions: Sequence[Action]) -> str:
    """A short description of a legal set: amounts given as ranges."""
    parts: list[str] = []
    amounts: dict[ActionKind, list[int]] = {}
    for action in actions:
        if action.kind in (ActionKind.ENVIDO, ActionKind.MAS):
            amounts.setdefault(action.kind, []).append(action.amount)
            continue
        parts.append(str(action))
    for kind, values in amounts.items():
        parts.append(f"{kind.value} {min(values)}..{max(values)}")
    return ", ".join(parts) if parts else "nothing"


class Refusal(IllegalActionError):
    """An action refused for a reason (`why`), its message ending with what is legal now. The legal set is
    described only when the message is read: `is_legal` refuses many actions whose message nobody reads (the
    property tests ask it of every action code at every sampled step)."""

    def __init__(self, why: str, legal: Sequence[Action]) -> None:
        super().__init__(why)
        self.legal = tuple(legal)

    def __str__(self) -> str:
        return f"{self.args[0]} legal: {describe(self.legal)}"
