"""Chance and dealing: the first dealer, the seeded streams, the deal, and scripted decks (rules §3, §4, §4.1).

A match's chance is fixed by its seed alone, or scripted by a `Setup` for tests and vectors.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from referee.engine.cards import FULL_DECK, Card, sort_hand


@dataclass(frozen=True, slots=True)
class Setup:
    """Scripted chance, for tests and vectors: decks by hand number, a start score, the first dealer.

    A deck lists 40 cards; card i of the first 16 goes to seat `(mano + i) % 4`, the rest is the stock in
    dealing order (rules §4). `skip_mus_first_hand` starts the first hand at Grande, as the scenario
    vectors do (they give the hands after the mus phase).
    """

    first_dealer: int | None = None
    decks: Mapping[int, Sequence[Card]] = field(default_factory=dict)
    start_score: tuple[int, int] = (0, 0)
    skip_mus_first_hand: bool = False


def deck_from_hands(hands: Sequence[Sequence[Card]], mano: int) -> list[Card]:
    """A 40-card deck that deals `hands[k]` to seat `(mano + k) % 4`; the stock is the rest, canonical order."""
    deck: list[Card] = []
    for i in range(4):
        for k in range(4):
            deck.append(hands[k][i])
    used = set(deck)
    if len(used) != 16:
        raise ValueError("the four hands must hold 16 different cards")
    deck.extend(card for card in FULL_DECK if card not in used)
    return deck


def deal(deck: Sequence[Card], mano: int) -> tuple[list[tuple[Card, ...]], list[Card]]:
    """Deal a deck from the mano, one card at a time (rules §4): the four sorted hands and the stock."""
    hands: list[list[Card]] = [[], [], [], []]
    for i in range(16):
        hands[(mano + i) % 4].append(deck[i])
    return [sort_hand(hand) for hand in hands], list(deck[16:])


# Streams derived from the match seed (rules §4.1). Python's `random.Random` seeded with a str hashes it
# with SHA-512, so each stream is fixed by (seed, hand number[, seña index]) on every platform.
def deal_rng(seed: int, hand_number: int) -> random.Random:
    """The deal randomness of one hand: its shuffle and its reshuffles."""
    return random.Random(f"mus/deal/{seed}/{hand_number}")


def leak_rng(seed: int, hand_number: int, sena_index: int) -> random.Random:
    """The leak draw of one delivered seña (rules §12.3 item 5)."""
    return random.Random(f"mus/leak/{seed}/{hand_number}/{sena_index}")


def first_dealer_of(seed: int) -> int:
    """The first dealer, drawn from the match seed alone (rules §3)."""
    return random.Random(f"mus/first_dealer/{seed}").randrange(4)
