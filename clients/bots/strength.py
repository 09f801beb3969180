"""Hand strength for rule-based bots: how likely a hand, or a partnership, is to win a lance.

Suits never matter (rules §1), so a hand is a multiset of four effective ranks: 330 of them in 8 reyes.
A `StrengthModel` weighs each multiset by how many 4-card hands of the deck have it, evaluates it once with
the engine's `evaluate`, and answers from those tables:

- `team_win_probability`: the chance that this seat or its partner wins a lance against the rivals taking
  part, with ties to the seat nearest the mano (rules §3), where every other hand is drawn from the deck
  and narrowed by what is public: declarations (rules §7) and the señas received (rules §12.3, whose
  truth the referee enforces, so they are facts);
- `hand_value` and `expected_value_after_discard`: a single number for a whole hand, used to decide mus and
  discards (rules §5).

Card removal (the seat's own cards are not in the other hands) is ignored: it moves these estimates by a few
percent and keeps every table small enough to cache.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import combinations_with_replacement
from math import comb, prod

from referee.engine.cards import FULL_DECK, SUITS, Card, DeckMode, effective_rank
from referee.engine.hands import HandFacts, Lance, evaluate
from referee.engine.rules import Real31, Rules, SenaTruth
from referee.engine.senas import Sena, sena_rejection

Ranks = tuple[int, ...]
"""Four effective ranks, high to low."""


@dataclass(frozen=True, slots=True)
class Distribution:
    """A distribution of comparison keys in one lance: distinct keys ascending, with cumulative weights.

    Hands without the lance's jugada are `none`: they lose to every holder.
    """

    keys: tuple[tuple[int, ...], ...]
    cumulative: tuple[float, ...]
    probabilities: tuple[float, ...]
    none: float

    @classmethod
    def build(cls, weighted: Iterable[tuple[tuple[int, ...] | None, float]]) -> Distribution:
        totals: dict[tuple[int, ...], float] = defaultdict(float)
        none = 0.0
        for key, weight in weighted:
            if key is None:
                none += weight
            else:
                totals[key] += weight
        mass = sum(totals.values()) + none
        if mass <= 0:
            raise ValueError("an empty distribution")
        keys = tuple(sorted(totals))
        probabilities = tuple(totals[key] / mass for key in keys)
        cumulative: list[float] = []
        running = none / mass
        for probability in probabilities:
            cumulative.append(running)
            running += probability
        return cls(keys, tuple(cumulative), probabilities, none / mass)

    def below_equal(self, key: tuple[int, ...]) -> tuple[float, float]:
        """(P(a hand is worse than `key`, no jugada included), P(it has exactly `key`))."""
        index = bisect.bisect_left(self.keys, key)
        if index < len(self.keys) and self.keys[index] == key:
            return self.cumulative[index], self.probabilities[index]
        below = self.cumulative[index] if index < len(self.keys) else 1.0
        return below, 0.0

    def items(self) -> Iterable[tuple[tuple[int, ...], float]]:
        return zip(self.keys, self.probabilities, strict=True)


@dataclass(frozen=True, slots=True)
class Seat:
    """Another seat as the model sees it: its place in speaking order and what narrows its hand."""

    position: int
    """0 for the mano .. 3 for the postre; a tie goes to the smaller position."""
    senas: frozenset[Sena] = frozenset()
    """Señas it sent since the last discard: each is true of its hand."""
    holds: bool | None = None
    """What it declared for this lance's jugada; None when not declared (or the lance has no declaration)."""


class StrengthModel:
    """Hand tables for one deck mode, `real_31` and `sena_truth`; get one with `StrengthModel.of(rules)`."""

    def __init__(self, deck_mode: DeckMode, real_31: Real31, sena_truth: SenaTruth = SenaTruth.EXACT) -> None:
        self.deck_mode = deck_mode
        self.real_31 = real_31
        self.deck_counts: Counter[int] = Counter(effective_rank(card, deck_mode) for card in FULL_DECK)
        physical: dict[int, int] = {}
        for card in FULL_DECK:
            physical.setdefault(effective_rank(card, deck_mode), card.rank)
        self._physical = physical
        ranks = sorted(self.deck_counts, reverse=True)
        self.hands: dict[Ranks, float] = {}
        for chosen in combinations_with_replacement(ranks, 4):
            counts = Counter(chosen)
            if all(counts[rank] <= self.deck_counts[rank] for rank in counts):
                self.hands[tuple(chosen)] = float(prod(comb(self.deck_counts[r], n) for r, n in counts.items()))
        self._facts: dict[Ranks, HandFacts] = {ranks_: self._evaluate(ranks_) for ranks_ in self.hands}
        self._distributions: dict[tuple[Lance, frozenset[Sena], bool | None, bool], Distribution] = {}
        self._values: dict[Ranks, float] = {}
        self._after_discard: dict[tuple[Ranks, Ranks], float] = {}
        # Only the truth of señas is read from these rules; la_bonita is allowed so that it can be read at all.
        self._rules = Rules(deck_mode=deck_mode, real_31=real_31, sena_truth=sena_truth, sena_la_bonita=True)

    @staticmethod
    def of(rules: Rules) -> StrengthModel:
        """The shared model of these rules' deck, built once per process (about 330 hands)."""
        return _model(rules.deck_mode, rules.real_31, rules.sena_truth)

    def _evaluate(self, ranks: Ranks) -> HandFacts:
        counts: Counter[int] = Counter()
        cards: list[Card] = []
        for rank in ranks:
            cards.append(Card(self._physical[rank], SUITS[counts[rank]]))
            counts[rank] += 1
        return evaluate(cards, self.deck_mode, self.real_31)

    def ranks_of(self, cards: Sequence[Card]) -> Ranks:
        return tuple(sorted((effective_rank(card, self.deck_mode) for card in cards), reverse=True))

    def facts_of(self, ranks: Ranks) -> HandFacts:
        return self._facts[ranks]

    # ------------------------------------------------------------------ lances

    def distribution(self, lance: Lance, seat: Seat = Seat(0), *, punto: bool = False) -> Distribution:
        """The keys another seat may hold in `lance`, given its señas and declaration.

        `punto`: Punto is being played, so nobody holds juego (rules §7).
        """
        cache_key = (lance, seat.senas, seat.holds, punto)
        found = self._distributions.get(cache_key)
        if found is not None:
            return found
        allowed = self._sena_filter(seat.senas)

        def fits(facts: HandFacts) -> bool:
            if punto and facts.has_juego:
                return False
            if seat.holds is not None and lance in (Lance.PARES, Lance.JUEGO):
                held = facts.has_pares if lance is Lance.PARES else facts.has_juego
                if held != seat.holds:
                    return False
            return allowed(facts)

        chosen = [(ranks, weight) for ranks, weight in self.hands.items() if fits(self._facts[ranks])]
        if not chosen:  # inconsistent information (stale señas): fall back to what the declarations say
            chosen = [
                (ranks, weight) for ranks, weight in self.hands.items() if not (punto and self._facts[ranks].has_juego)
            ]
        distribution = Distribution.build((self._facts[ranks].key(lance), weight) for ranks, weight in chosen)
        self._distributions[cache_key] = distribution
        return distribution

    def _sena_filter(self, senas: frozenset[Sena]) -> Callable[[HandFacts], bool]:
        rules = self._rules

        def allowed(facts: HandFacts) -> bool:
            # Chica is a window where every seña is allowed, so only truth is checked (rules §12.3).
            return all(sena_rejection(sena, facts, rules, Lance.CHICA) is None for sena in senas)

        return allowed

    def team_win_probability(
        self,
        lance: Lance,
        mine: Ranks,
        position: int,
        partner: Seat | None,
        rivals: Sequence[Seat],
        *,
        punto: bool = False,
    ) -> float:
        """P(this seat or its partner wins `lance` against `rivals`), ties to the nearer the mano.

        `partner` is None when the partner takes no part (no jugada in Pares or Juego); `rivals` are the
        rivals taking part. The other hands are independent draws from their distributions.
        """
        my_key = self._facts[mine].key(lance)
        if my_key is None and partner is None:
            return 0.0
        rival_tables = [(self.distribution(lance, rival, punto=punto), rival.position) for rival in rivals]

        def rivals_lose(key: tuple[int, ...], at: int) -> float:
            chance = 1.0
            for table, rival_position in rival_tables:
                below, equal = table.below_equal(key)
                chance *= below + (equal if rival_position > at else 0.0)
            return chance

        if partner is None:
            assert my_key is not None
            return rivals_lose(my_key, position)
        partner_table = self.distribution(lance, partner, punto=punto)
        total = 0.0
        for key, probability in partner_table.items():
            best, at = key, partner.position
            if my_key is not None and (my_key > key or (my_key == key and position < partner.position)):
                best, at = my_key, position
            total += probability * rivals_lose(best, at)
        if partner_table.none > 0 and my_key is not None:
            total += partner_table.none * rivals_lose(my_key, position)
        return total

    # ------------------------------------------------------------------ whole hands

    def beat_single(self, lance: Lance, ranks: Ranks) -> float:
        """P(this hand beats one random hand in `lance`), ties counted half; no jugada never wins."""
        key = self._facts[ranks].key(lance)
        if key is None:
            return 0.0
        below, equal = self.distribution(lance).below_equal(key)
        return below + equal / 2

    def hand_value(self, ranks: Ranks) -> float:
        """One number for a whole hand: how well it plays every lance, the jugada values included.

        Squares reward dominance: a lance is won against three hands, not one. The weights follow what each
        lance pays (rules §9.2): Pares and Juego add their values, Juego most.
        """
        found = self._values.get(ranks)
        if found is not None:
            return found
        facts = self._facts[ranks]
        value = self.beat_single(Lance.GRANDE, ranks) ** 2 + 0.8 * self.beat_single(Lance.CHICA, ranks) ** 2
        if facts.has_pares:
            value += self.beat_single(Lance.PARES, ranks) ** 2 + 0.3 * facts.pares_value
        if facts.has_juego:
            value += 1.2 * self.beat_single(Lance.JUEGO, ranks) ** 2 + 0.4 * facts.juego_value
        else:
            value += 0.3 * self.beat_single(Lance.PUNTO, ranks) ** 2
        self._values[ranks] = value
        return value

    def expected_value_after_discard(self, kept: Ranks, hand: Ranks) -> float:
        """The mean `hand_value` after keeping `kept` from `hand` and drawing the rest from the deck."""
        cache_key = (kept, hand)
        found = self._after_discard.get(cache_key)
        if found is not None:
            return found
        remaining = Counter(self.deck_counts)
        remaining.subtract(Counter(hand))
        draw = 4 - len(kept)
        total = weight_sum = 0.0
        ranks = sorted(rank for rank, count in remaining.items() if count > 0)
        for drawn in combinations_with_replacement(ranks, draw):
            counts = Counter(drawn)
            weight = float(prod(comb(remaining[rank], n) for rank, n in counts.items()))
            if weight == 0:
                continue
            after = tuple(sorted(kept + drawn, reverse=True))
            total += weight * self.hand_value(after)
            weight_sum += weight
        value = total / weight_sum if weight_sum else self.hand_value(hand)
        self._after_discard[cache_key] = value
        return value


@cache
def _model(deck_mode: DeckMode, real_31: Real31, sena_truth: SenaTruth) -> StrengthModel:
    return StrengthModel(deck_mode, real_31, sena_truth)
