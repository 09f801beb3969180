"""Hand evaluation: the comparison keys of every lance and the scoring values (rules §6, §9.2).

Every key is a tuple where a larger value is a better hand, so one comparison routine (`best_seat`) decides
every lance, with ties going to the seat nearest the mano.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from referee.engine.cards import Card, DeckMode, effective_rank, point_value
from referee.engine.enums import Enum
from referee.engine.rules import Real31


class Lance(Enum):
    """The lances of a hand, in play order; Punto replaces Juego when nobody has juego (rules §7)."""

    GRANDE = "grande"
    CHICA = "chica"
    PARES = "pares"
    JUEGO = "juego"
    PUNTO = "punto"


class ParesClass(Enum):
    """Pares classes; duples include four of a kind (rules §6.3)."""

    PAR = 1
    MEDIAS = 2
    DUPLES = 3


PARES_VALUE = {ParesClass.PAR: 1, ParesClass.MEDIAS: 2, ParesClass.DUPLES: 3}

# rules §6.4: 31 > 32 > 40 > 37 > 36 > 35 > 34 > 33 (38 and 39 cannot occur).
_JUEGO_ORDER = {31: 8, 32: 7, 40: 6, 37: 5, 36: 4, 35: 3, 34: 2, 33: 1}


@dataclass(frozen=True, slots=True)
class HandFacts:
    """Everything the lances need to know about one seat's four cards, computed once."""

    ranks: tuple[int, ...]
    """Effective ranks, high to low."""
    grande_key: tuple[int, ...]
    chica_key: tuple[int, ...]
    pares_class: ParesClass | None
    pares_key: tuple[int, ...] | None
    total: int
    juego_key: tuple[int, ...] | None
    real_31: bool

    @property
    def has_pares(self) -> bool:
        return self.pares_class is not None

    @property
    def has_juego(self) -> bool:
        return self.juego_key is not None

    @property
    def pares_value(self) -> int:
        """1 for par, 2 for medias, 3 for duples, 0 without pares (rules §6.3)."""
        return PARES_VALUE[self.pares_class] if self.pares_class is not None else 0

    @property
    def juego_value(self) -> int:
        """3 for 31, 2 for any other juego, 0 without juego (rules §6.4)."""
        if self.juego_key is None:
            return 0
        return 3 if self.total == 31 else 2

    def key(self, lance: Lance) -> tuple[int, ...] | None:
        """The comparison key of this hand in a lance; None when it does not hold the jugada."""
        if lance is Lance.GRANDE:
            return self.grande_key
        if lance is Lance.CHICA:
            return self.chica_key
        if lance is Lance.PARES:
            return self.pares_key
        if lance is Lance.JUEGO:
            return self.juego_key
        return (self.total,)


def evaluate(cards: Sequence[Card], deck_mode: DeckMode, real_31: Real31 = Real31.OFF) -> HandFacts:
    """Evaluate four cards under a deck mode and the `real_31` option.

    Suits never count (rules §6): hands with the same printed ranks have the same facts, so they are kept by
    ranks, and the 715 rank combinations of each deck mode are soon all known however many deals a process sees
    (keyed by the cards themselves, a fifth of a match's evaluations were new)."""
    key = (tuple(sorted(card.rank for card in cards)), deck_mode, real_31)
    facts = _FACTS.get(key)
    if facts is None:
        facts = _FACTS[key] = _evaluate(cards, deck_mode, real_31)
    return facts


_FACTS: dict[tuple[tuple[int, ...], DeckMode, Real31], HandFacts] = {}
"""Every hand evaluated so far, by its printed ranks (at most 715 for each deck mode and `real_31`)."""


def _evaluate(cards: Sequence[Card], deck_mode: DeckMode, real_31: Real31) -> HandFacts:
    if len(cards) != 4:
        raise ValueError(f"a Mus hand has 4 cards, got {len(cards)}")
    ranks = tuple(sorted((effective_rank(card, deck_mode) for card in cards), reverse=True))
    total = sum(point_value(card, deck_mode) for card in cards)
    pares_class, pares_key = _pares(ranks)
    is_real = total == 31 and _is_real_31(ranks, cards, real_31)
    juego_key: tuple[int, ...] | None = None
    if total >= 31:
        juego_key = (_JUEGO_ORDER[total], 1 if is_real else 0)
    return HandFacts(
        ranks=ranks,
        grande_key=ranks,
        chica_key=tuple(-rank for rank in reversed(ranks)),
        pares_class=pares_class,
        pares_key=pares_key,
        total=total,
        juego_key=juego_key,
        real_31=is_real,
    )


def _pares(ranks: tuple[int, ...]) -> tuple[ParesClass | None, tuple[int, ...] | None]:
    """Classify by rank counts; unpaired cards never count (rules §6.3)."""
    counts = Counter(ranks)
    groups = sorted(((count, rank) for rank, count in counts.items() if count >= 2), reverse=True)
    if not groups:
        return None, None
    if groups[0][0] == 4:
        rank = groups[0][1]
        return ParesClass.DUPLES, (3, rank, rank)
    if len(groups) == 2:
        high, low = sorted((groups[0][1], groups[1][1]), reverse=True)
        return ParesClass.DUPLES, (3, high, low)
    count, rank = groups[0]
    if count == 3:
        return ParesClass.MEDIAS, (2, rank)
    return ParesClass.PAR, (1, rank)


def _is_real_31(ranks: tuple[int, ...], cards: Sequence[Card], real_31: Real31) -> bool:
    """Three 7s and a sota (or any figure) under the `real_31` option (rules §6.6)."""
    if real_31 is Real31.OFF or ranks.count(7) != 3:
        return False
    fourth = next(card for card in cards if card.rank != 7)
    if real_31 is Real31.SIETE_SIETE_SIETE_SOTA:
        return fourth.rank == 10
    return ranks[0] >= 10


def best_seat(
    facts: Sequence[HandFacts], lance: Lance, mano: int, participants: Iterable[int] | None = None
) -> int | None:
    """The seat that wins a lance on cards; ties go to the seat nearest the mano (rules §3, §6).

    `facts` is indexed by absolute seat. Only `participants` (default: all four) are compared; a seat without
    the jugada never wins. Returns None when nobody holds it.
    """
    allowed = set(participants) if participants is not None else {0, 1, 2, 3}
    best: int | None = None
    best_key: tuple[int, ...] | None = None
    for offset in range(4):
        seat = (mano + offset) % 4
        if seat not in allowed:
            continue
        key = facts[seat].key(lance)
        if key is None:
            continue
        if best_key is None or key > best_key:
            best, best_key = seat, key
    return best
