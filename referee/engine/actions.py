"""Actions: one value type for every decision, its notation, and a fixed integer encoding for ML users."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from itertools import combinations

from referee.engine.cards import Card, format_cards, parse_cards, sort_hand
from referee.engine.enums import Enum
from referee.engine.errors import MalformedError
from referee.engine.rules import Rules
from referee.engine.senas import Sena


class ActionKind(Enum):
    """Every kind of decision a seat can make (rules §5, §7, §8.1, §12.3)."""

    MUS = "mus"
    NO_MUS = "no_mus"
    DISCARD = "discard"
    DECLARE = "declare"
    SENAS = "senas"
    PASO = "paso"
    ENVIDO = "envido"
    MAS = "mas"
    QUIERO = "quiero"
    NO_QUIERO = "no_quiero"
    ORDAGO = "ordago"


BETTING_KINDS = frozenset(
    {
        ActionKind.PASO,
        ActionKind.ENVIDO,
        ActionKind.MAS,
        ActionKind.QUIERO,
        ActionKind.NO_QUIERO,
        ActionKind.ORDAGO,
    }
)


# Members read once: an Enum class attribute lookup costs more than a global's on the hot path (`malformed`).
_ENVIDO, _MAS, _DISCARD, _DECLARE = ActionKind.ENVIDO, ActionKind.MAS, ActionKind.DISCARD, ActionKind.DECLARE

SENA_CARRIERS = frozenset({ActionKind.MUS, ActionKind.NO_MUS, ActionKind.SENAS})
"""The actions señas may ride on: a mus call (window (a)) and a seña-round answer (window (b)), rules §12.3."""


@dataclass(frozen=True, slots=True)
class Action:
    """A decision. Only the fields of its kind are set: `amount` for envido/mas, `cards` for a discard,
    `has_jugada` for a declaration, `senas` for a seña-round answer or señas attached to a mus call.

    Señas on any other action are sent outside a window: the engine rejects them to the sender and applies the
    action without them (`stray_senas`, rules §12.3 item 4).
    """

    kind: ActionKind
    amount: int = 0
    cards: tuple[Card, ...] = ()
    has_jugada: bool = False
    senas: tuple[Sena, ...] = ()

    def malformed(self) -> str | None:
        """Why this value cannot be a Mus action at all, whatever the state of the match; None if it can be.

        A wrong type in a field, an amount on an action that takes none or a bet below 1, cards on anything but a
        discard, or a discard that is not 1 to 4 different cards. `Match.check` raises this as `MalformedError`,
        apart from the actions that are well formed but not legal now.
        """
        kind, amount, cards, senas, has_jugada = self.kind, self.amount, self.cards, self.senas, self.has_jugada
        # Exact type tests, each field read once: this runs on every decision (`Match.check`).
        if kind.__class__ is not ActionKind:
            return f"action kind {kind!r} is not an ActionKind"
        if amount.__class__ is not int:
            return f"the amount of {kind.value} must be an int; got {amount!r}"
        if has_jugada is not False and has_jugada is not True:
            return f"has_jugada must be a bool; got {has_jugada!r}"
        if cards.__class__ is not tuple or (cards and not all(card.__class__ is Card for card in cards)):
            return "an action's cards must be a tuple of Card values"
        if senas.__class__ is not tuple or (senas and not all(sena.__class__ is Sena for sena in senas)):
            return "an action's señas must be a tuple of Sena values"
        if kind is _ENVIDO or kind is _MAS:
            if amount < 1:
                return f"{kind.value} needs an amount of at least 1; got {amount}"
        elif amount:
            return f"{kind.value} takes no amount; got {amount}"
        if kind is _DISCARD:
            # Distinct by (rank, suit): hashing a frozen dataclass costs more than hashing its two fields.
            if not 1 <= len(cards) <= 4 or len({(card.rank, card.suit) for card in cards}) != len(cards):
                return f"a discard is 1 to 4 different cards; got {format_cards(cards) or 'none'}"
        elif cards:
            return f"{kind.value} takes no cards; got {format_cards(cards)}"
        if has_jugada and kind is not _DECLARE:
            return f"{kind.value} takes no declaration"
        return None

    @property
    def stray_senas(self) -> tuple[Sena, ...]:
        """Señas attached to an action that cannot carry them."""
        return self.senas if self.senas and self.kind not in SENA_CARRIERS else ()

    def without_senas(self) -> Action:
        return dataclasses.replace(self, senas=()) if self.senas else self

    @classmethod
    def paso(cls) -> Action:
        return cls(ActionKind.PASO)

    @classmethod
    def envido(cls, amount: int) -> Action:
        return cls(ActionKind.ENVIDO, amount=amount)

    @classmethod
    def mas(cls, amount: int) -> Action:
        return cls(ActionKind.MAS, amount=amount)

    @classmethod
    def quiero(cls) -> Action:
        return cls(ActionKind.QUIERO)

    @classmethod
    def no_quiero(cls) -> Action:
        return cls(ActionKind.NO_QUIERO)

    @classmethod
    def ordago(cls) -> Action:
        return cls(ActionKind.ORDAGO)

    @classmethod
    def mus(cls, senas: tuple[Sena, ...] = ()) -> Action:
        return cls(ActionKind.MUS, senas=senas)

    @classmethod
    def no_mus(cls, senas: tuple[Sena, ...] = ()) -> Action:
        return cls(ActionKind.NO_MUS, senas=senas)

    @classmethod
    def discard(cls, cards: tuple[Card, ...] | list[Card]) -> Action:
        return cls(ActionKind.DISCARD, cards=sort_hand(cards))

    @classmethod
    def declare(cls, has_jugada: bool) -> Action:
        return cls(ActionKind.DECLARE, has_jugada=has_jugada)

    @classmethod
    def send_senas(cls, senas: tuple[Sena, ...] = ()) -> Action:
        return cls(ActionKind.SENAS, senas=senas)

    @classmethod
    def parse(cls, text: str) -> Action:
        """Read the notation printed by `str(action)`, e.g. `envido 2`, `discard 12o 3c`, `senas duples`."""
        words = text.split()
        if not words:
            raise MalformedError("empty action")
        name, args = words[0], words[1:]
        try:
            kind = ActionKind(name)
        except ValueError:
            known = ", ".join(kind.value for kind in ActionKind)
            raise MalformedError(f"unknown action {name!r}; actions are {known}") from None
        if kind in (ActionKind.ENVIDO, ActionKind.MAS):
            if len(args) != 1 or not (args[0].isascii() and args[0].isdigit()) or int(args[0]) < 1:
                raise MalformedError(f"{name} takes one positive amount, as in '{name} 2'; got {text!r}")
            return cls(kind, amount=int(args[0]))
        if kind is ActionKind.DISCARD:
            return cls.discard(parse_cards(args))
        if kind is ActionKind.DECLARE:
            if args not in (["yes"], ["no"]):
                raise MalformedError(f"declare takes yes or no; got {text!r}")
            return cls(kind, has_jugada=args == ["yes"])
        if kind in (ActionKind.MUS, ActionKind.NO_MUS, ActionKind.SENAS):
            return cls(kind, senas=tuple(parse_sena(arg) for arg in args))
        if args:
            raise MalformedError(f"{name} takes no arguments; got {text!r}")
        return cls(kind)

    def __str__(self) -> str:
        if self.kind in (ActionKind.ENVIDO, ActionKind.MAS):
            return f"{self.kind.value} {self.amount}"
        if self.kind is ActionKind.DISCARD:
            return f"discard {format_cards(self.cards)}"
        if self.kind is ActionKind.DECLARE:
            return f"declare {'yes' if self.has_jugada else 'no'}"
        if self.kind in SENA_CARRIERS:  # stray señas have no notation: a step logs them apart
            return " ".join([self.kind.value, *(sena.value for sena in self.senas)])
        return str(self.kind.value)


def parse_sena(text: str) -> Sena:
    """A seña id from its name; an unknown name is malformed (rules §12.3 item 1)."""
    try:
        return Sena(text)
    except ValueError:
        raise MalformedError(f"unknown seña {text!r}; señas are {', '.join(sena.value for sena in Sena)}") from None


# The discard masks over the four positions of a hand in canonical order, 1..4 cards, in a fixed order.
DISCARD_MASKS: tuple[tuple[int, ...], ...] = tuple(
    positions for size in (1, 2, 3, 4) for positions in combinations(range(4), size)
)


class ActionEncoding:
    """A fixed integer encoding of actions for machine-learning users.

    The layout depends only on the rules (through the largest bet amount): simple kinds first, then envido
    1..A, mas 1..A, the 15 discard masks over the seat's hand in canonical order (`sort_hand`), then the
    seña-round answers: the empty list and one seña each. Mus calls are encoded without señas.
    Uncapped (`max_total_stake = null`), amounts are encoded up to `target_score`, as `legal_actions` lists them:
    a larger bet is legal but has no code, and decides the game exactly as a bet of the target does (§8.1).
    """

    SIMPLE = (
        ActionKind.PASO,
        ActionKind.QUIERO,
        ActionKind.NO_QUIERO,
        ActionKind.ORDAGO,
        ActionKind.MUS,
        ActionKind.NO_MUS,
    )

    def __init__(self, rules: Rules) -> None:
        cap = rules.stake_cap
        self.max_amount = cap if cap is not None else rules.target_score
        self._envido_base = len(self.SIMPLE) + 2
        self._mas_base = self._envido_base + self.max_amount
        self._discard_base = self._mas_base + self.max_amount
        self._senas_base = self._discard_base + len(DISCARD_MASKS)
        self.size = self._senas_base + 1 + len(Sena)

    def encode(self, action: Action, hand: tuple[Card, ...] = ()) -> int:
        """The integer of an action; a discard is encoded against the seat's current `hand`."""
        kind = action.kind
        if kind in self.SIMPLE and not action.senas:
            return self.SIMPLE.index(kind)
        if kind is ActionKind.DECLARE:
            return len(self.SIMPLE) + (0 if action.has_jugada else 1)
        if kind in (ActionKind.ENVIDO, ActionKind.MAS) and 1 <= action.amount <= self.max_amount:
            base = self._envido_base if kind is ActionKind.ENVIDO else self._mas_base
            return base + action.amount - 1
        if kind is ActionKind.DISCARD:
            ordered = sort_hand(hand)
            try:
                positions = tuple(sorted(ordered.index(card) for card in action.cards))
                return self._discard_base + DISCARD_MASKS.index(positions)
            except ValueError:
                pass
        if kind is ActionKind.SENAS and len(action.senas) <= 1:
            if not action.senas:
                return self._senas_base
            return self._senas_base + 1 + list(Sena).index(action.senas[0])
        raise MalformedError(f"action {action} has no integer encoding")

    def decode(self, code: int, hand: tuple[Card, ...] = ()) -> Action:
        """The action of an integer; a discard mask is read against the seat's current `hand`."""
        if not 0 <= code < self.size:
            raise MalformedError(f"action code {code} is outside 0..{self.size - 1}")
        if code < len(self.SIMPLE):
            return Action(self.SIMPLE[code])
        if code < self._envido_base:
            return Action.declare(code == len(self.SIMPLE))
        if code < self._mas_base:
            return Action.envido(code - self._envido_base + 1)
        if code < self._discard_base:
            return Action.mas(code - self._mas_base + 1)
        if code < self._senas_base:
            ordered = sort_hand(hand)
            if len(ordered) != 4:
                raise MalformedError("decoding a discard needs the seat's four cards")
            return Action.discard([ordered[i] for i in DISCARD_MASKS[code - self._discard_base]])
        if code == self._senas_base:
            return Action.send_senas(())
        return Action.send_senas((list(Sena)[code - self._senas_base - 1],))
