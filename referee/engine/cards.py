"""Cards, the 40-card Spanish deck, notation and the seeded shuffle (rules §1, §2, §4)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from referee.engine.enums import Enum
from referee.engine.errors import MalformedError

RANKS: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 10, 11, 12)
"""Physical ranks: 1 = as, 10 = sota, 11 = caballo, 12 = rey."""


class Suit(Enum):
    """The four suits. Suits never matter for ranking (rules §1)."""

    OROS = "o"
    COPAS = "c"
    ESPADAS = "e"
    BASTOS = "b"


SUITS: tuple[Suit, ...] = (Suit.OROS, Suit.COPAS, Suit.ESPADAS, Suit.BASTOS)
_SUIT_BY_LETTER = {suit.value: suit for suit in SUITS}


class DeckMode(Enum):
    """Whether 3s and 2s play as reyes and ases (rules §2.1, §2.2)."""

    OCHO_REYES = "8_reyes"
    CUATRO_REYES = "4_reyes"


@dataclass(frozen=True, slots=True)
class Card:
    """One physical card. Its notation is `<rank><suit>`, for example `12o` or `3c`."""

    rank: int
    suit: Suit

    def __post_init__(self) -> None:
        if self.rank not in RANKS:
            raise MalformedError(f"no card has rank {self.rank}: ranks are {', '.join(map(str, RANKS))}")

    @classmethod
    def parse(cls, text: str) -> Card:
        """Parse notation such as `12o`; raises `MalformedError` naming what is wrong."""
        text = text.strip()
        if len(text) < 2 or text[-1] not in _SUIT_BY_LETTER or not (text[:-1].isascii() and text[:-1].isdigit()):
            raise MalformedError(
                f"unknown card {text!r}: write <rank><suit>, rank in 1..7,10,11,12 and suit in o,c,e,b"
            )
        rank = int(text[:-1])
        if rank not in RANKS:
            raise MalformedError(f"unknown card {text!r}: rank {rank} is not in the Spanish 40-card deck")
        return cls(rank, _SUIT_BY_LETTER[text[-1]])

    def __str__(self) -> str:
        return f"{self.rank}{self.suit.value}"

    @property
    def index(self) -> int:
        """A dense index 0..39 (rank-major), used by encodings and sets."""
        return RANKS.index(self.rank) * 4 + SUITS.index(self.suit)


FULL_DECK: tuple[Card, ...] = tuple(Card(rank, suit) for rank in RANKS for suit in SUITS)
"""The 40 cards in a fixed canonical order; the seeded shuffle starts from this order."""


def parse_cards(text: str | Iterable[str]) -> tuple[Card, ...]:
    """Parse `"12o 3c 1e 7b"` (or a list of card strings) into cards, rejecting duplicates."""
    parts = text.split() if isinstance(text, str) else list(text)
    cards = tuple(Card.parse(part) for part in parts)
    if len(set(cards)) != len(cards):
        raise MalformedError(f"the same card appears twice in {' '.join(parts)!r}")
    return cards


def format_cards(cards: Iterable[Card]) -> str:
    """Print cards in notation, separated by spaces; `parse_cards` reads it back."""
    return " ".join(str(card) for card in cards)


# Effective ranks are small ints ordered low -> high: A=1, 2..7, S=10, C=11, R=12. In 8 reyes a 3 is a
# rey (12) and a 2 is an as (1) for every purpose (rules §2.1).
_EFFECTIVE_8 = {1: 1, 2: 1, 3: 12, 4: 4, 5: 5, 6: 6, 7: 7, 10: 10, 11: 11, 12: 12}
_EFFECTIVE_4 = {rank: rank for rank in RANKS}


def effective_rank(card: Card, deck_mode: DeckMode) -> int:
    """The rank a card plays as: 12 = R, 11 = C, 10 = S, 7..2, 1 = A (rules §2)."""
    table = _EFFECTIVE_8 if deck_mode is DeckMode.OCHO_REYES else _EFFECTIVE_4
    return table[card.rank]


def point_value(card: Card, deck_mode: DeckMode) -> int:
    """Points for juego and punto: figures 10, others face value, as 1 (rules §2)."""
    rank = effective_rank(card, deck_mode)
    return 10 if rank >= 10 else rank


def shuffled_deck(rng: random.Random) -> list[Card]:
    """A new deck shuffled with the injected generator (rules §4.1)."""
    deck = list(FULL_DECK)
    rng.shuffle(deck)
    return deck


def sort_hand(cards: Sequence[Card]) -> tuple[Card, ...]:
    """Canonical order of a hand: physical rank high to low, then suit; says nothing hidden."""
    return tuple(sorted(cards, key=lambda card: (-card.rank, SUITS.index(card.suit))))
