"""The hand evaluator against a naive oracle, over every 4-card hand of the 40-card deck (rules §2, §6).

The oracle below uses nothing of the engine but `Card` and `FULL_DECK`: it works from physical ranks, with the
rules as the rulebook states them (count kings, then caballos...; count aces, then 4s...; pares classes by rank
counts; the juego order 31 > 32 > 40 > 37 > ... > 33; the punto total). Every one of the 91,390 hands is
classified both ways, and the order of every lance is compared by sorting all distinct hands both ways.
The evaluator is also pinned by a sha256 of its output over every hand, as PokerKit pins its evaluators.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import random
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import pytest

from referee.engine.cards import FULL_DECK, Card, DeckMode
from referee.engine.hands import HandFacts, Lance, ParesClass, best_seat, evaluate
from referee.engine.rules import Real31

ALL_HANDS: tuple[tuple[Card, ...], ...] = tuple(itertools.combinations(FULL_DECK, 4))
MODES = (DeckMode.OCHO_REYES, DeckMode.CUATRO_REYES)

# ---------------------------------------------------------------- the oracle (physical ranks in, rules out)

REY, CABALLO, SOTA, AS = 12, 11, 10, 1


def oracle_rank(card: Card, mode: DeckMode) -> int:
    """rules §2.1: in 8 reyes every 3 is a rey and every 2 an as, for every purpose."""
    if mode is DeckMode.OCHO_REYES and card.rank == 3:
        return REY
    if mode is DeckMode.OCHO_REYES and card.rank == 2:
        return AS
    return card.rank


def oracle_rank_order(mode: DeckMode) -> list[int]:
    """Effective ranks from high to low (rules §2.1 table, §2.2)."""
    if mode is DeckMode.OCHO_REYES:
        return [REY, CABALLO, SOTA, 7, 6, 5, 4, AS]
    return [REY, CABALLO, SOTA, 7, 6, 5, 4, 3, 2, AS]


def oracle_points(card: Card, mode: DeckMode) -> int:
    """Figures (and, in 8 reyes, the 3) are worth 10; the as (and the 2 in 8 reyes) 1; the rest face value."""
    rank = oracle_rank(card, mode)
    if rank in (REY, CABALLO, SOTA):
        return 10
    return rank


# A comparison reads its two hands' totals or rank counts, and the random tables of
# `test_best_seat_agrees_with_the_oracle_on_random_deals_ties_to_the_mano_3` compare each hand many times: the
# recent ones are kept (a hand is a tuple of frozen cards). A kept Counter is shared: callers only read it.


@functools.lru_cache(maxsize=1024)
def oracle_total(hand: Sequence[Card], mode: DeckMode) -> int:
    return sum(oracle_points(card, mode) for card in hand)


@functools.lru_cache(maxsize=1024)
def counts_of(hand: Sequence[Card], mode: DeckMode) -> Counter[int]:
    return Counter(oracle_rank(card, mode) for card in hand)


def compare_count_vectors(a: list[int], b: list[int]) -> int:
    """More of the first rank wins; on a tie, more of the next rank, and so on."""
    for x, y in zip(a, b, strict=True):
        if x != y:
            return 1 if x > y else -1
    return 0


def cmp_grande(a: Sequence[Card], b: Sequence[Card], mode: DeckMode) -> int:
    """rules §6.1: 'the same as counting kings, then caballos, then sotas, and so on'."""
    ca, cb = counts_of(a, mode), counts_of(b, mode)
    order = oracle_rank_order(mode)
    return compare_count_vectors([ca[r] for r in order], [cb[r] for r in order])


def cmp_chica(a: Sequence[Card], b: Sequence[Card], mode: DeckMode) -> int:
    """rules §6.2: 'the same as counting aces, then 4s, and so on' (lowest ranks first)."""
    ca, cb = counts_of(a, mode), counts_of(b, mode)
    order = list(reversed(oracle_rank_order(mode)))
    return compare_count_vectors([ca[r] for r in order], [cb[r] for r in order])


def pares_class_of(hand: Sequence[Card], mode: DeckMode) -> str | None:
    """rules §6.3: duples = two pairs or four of a kind; medias = three of a kind; par = one pair."""
    counts = sorted(counts_of(hand, mode).values(), reverse=True)
    if counts[0] == 4 or counts[:2] == [2, 2]:
        return "duples"
    if counts[0] == 3:
        return "medias"
    if counts[0] == 2:
        return "par"
    return None


PARES_CLASS_ORDER = {None: 0, "par": 1, "medias": 2, "duples": 3}
PARES_VALUES = {None: 0, "par": 1, "medias": 2, "duples": 3}


def paired_ranks(hand: Sequence[Card], mode: DeckMode) -> list[int]:
    """The ranks of the pairs, higher first; four of a kind counts as two pairs of the same rank."""
    counts = counts_of(hand, mode)
    position = {rank: i for i, rank in enumerate(oracle_rank_order(mode))}
    pairs = [rank for rank, count in counts.items() for _ in range(count // 2)]
    return sorted(pairs, key=lambda rank: position[rank])


def cmp_pares(a: Sequence[Card], b: Sequence[Card], mode: DeckMode) -> int:
    """Class first (duples > medias > par); within a class the pair, trio, or higher then lower pair."""
    class_a, class_b = pares_class_of(a, mode), pares_class_of(b, mode)
    if PARES_CLASS_ORDER[class_a] != PARES_CLASS_ORDER[class_b]:
        return 1 if PARES_CLASS_ORDER[class_a] > PARES_CLASS_ORDER[class_b] else -1
    if class_a is None:
        return 0
    order = oracle_rank_order(mode)
    if class_a == "medias":
        trio_a = next(r for r, n in counts_of(a, mode).items() if n == 3)
        trio_b = next(r for r, n in counts_of(b, mode).items() if n == 3)
        return _higher(trio_a, trio_b, order)
    for rank_a, rank_b in zip(paired_ranks(a, mode), paired_ranks(b, mode), strict=True):
        if rank_a != rank_b:
            return _higher(rank_a, rank_b, order)
    return 0


def _higher(x: int, y: int, order: list[int]) -> int:
    if x == y:
        return 0
    return 1 if order.index(x) < order.index(y) else -1


JUEGO_ORDER = [31, 32, 40, 37, 36, 35, 34, 33]
"""rules §6.4, best first."""


def is_real_31(hand: Sequence[Card], mode: DeckMode, real: Real31) -> bool:
    """rules §6.6: three 7s plus a sota (7-7-7-sota) or any figure, a 3 in 8 reyes included (7-7-7-figure)."""
    if real is Real31.OFF:
        return False
    sevens = [card for card in hand if card.rank == 7]
    if len(sevens) != 3:
        return False
    [fourth] = [card for card in hand if card.rank != 7]
    if real is Real31.SIETE_SIETE_SIETE_SOTA:
        return fourth.rank == 10
    return fourth.rank in (10, 11, 12) or (mode is DeckMode.OCHO_REYES and fourth.rank == 3)


def cmp_juego(a: Sequence[Card], b: Sequence[Card], mode: DeckMode, real: Real31 = Real31.OFF) -> int:
    """Juego (31 or more) beats no juego; 31 > 32 > 40 > 37 > ... > 33; a real 31 beats an ordinary 31."""
    ta, tb = oracle_total(a, mode), oracle_total(b, mode)
    ja, jb = ta >= 31, tb >= 31
    if not ja or not jb:
        return (ja > jb) - (ja < jb)
    if ta != tb:
        return 1 if JUEGO_ORDER.index(ta) < JUEGO_ORDER.index(tb) else -1
    ra, rb = is_real_31(a, mode, real), is_real_31(b, mode, real)
    return (ra > rb) - (ra < rb)


def cmp_punto(a: Sequence[Card], b: Sequence[Card], mode: DeckMode) -> int:
    ta, tb = oracle_total(a, mode), oracle_total(b, mode)
    return (ta > tb) - (ta < tb)


ORACLE_CMP: dict[Lance, Callable[[Sequence[Card], Sequence[Card], DeckMode], int]] = {
    Lance.GRANDE: cmp_grande,
    Lance.CHICA: cmp_chica,
    Lance.PARES: cmp_pares,
    Lance.JUEGO: cmp_juego,
    Lance.PUNTO: cmp_punto,
}


def oracle_holds(hand: Sequence[Card], lance: Lance, mode: DeckMode) -> bool:
    if lance is Lance.PARES:
        return pares_class_of(hand, mode) is not None
    if lance is Lance.JUEGO:
        return oracle_total(hand, mode) >= 31
    return True


def oracle_winner(hands: Sequence[Sequence[Card]], lance: Lance, mode: DeckMode, mano: int) -> int | None:
    """The seat nearest the mano among those no other holder strictly beats (rules §3: ties to the mano)."""
    holders = [(mano + k) % 4 for k in range(4) if oracle_holds(hands[(mano + k) % 4], lance, mode)]
    compare = ORACLE_CMP[lance]
    for seat in holders:
        if all(compare(hands[seat], hands[other], mode) >= 0 for other in holders):
            return seat
    return None


# ---------------------------------------------------------------- the engine's answers, computed once per mode


@functools.cache
def engine_facts(mode: DeckMode) -> tuple[HandFacts, ...]:
    return tuple(evaluate(hand, mode) for hand in ALL_HANDS)


@functools.cache
def oracle_totals(mode: DeckMode) -> tuple[int, ...]:
    """The oracle's total of every hand, in the order of ALL_HANDS: worked out once per mode for every test."""
    return tuple(oracle_total(hand, mode) for hand in ALL_HANDS)


PARES_NAMES = {ParesClass.PAR: "par", ParesClass.MEDIAS: "medias", ParesClass.DUPLES: "duples"}


def engine_key(facts: HandFacts, lance: Lance) -> tuple[int, ...] | None:
    """The engine's comparison key; a lance the hand does not hold compares below every held key."""
    if lance is Lance.PARES and not facts.has_pares:
        return None
    if lance is Lance.JUEGO and not facts.has_juego:
        return None
    return facts.key(lance)


@functools.cache
def engine_keys(mode: DeckMode, lance: Lance) -> tuple[tuple[int, ...] | None, ...]:
    """`engine_key` of every hand, in the order of ALL_HANDS: the order tests and the digest all read them."""
    return tuple(engine_key(fact, lance) for fact in engine_facts(mode))


# ---------------------------------------------------------------- classification of every hand


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.value)
def test_every_hand_is_classified_as_the_oracle_says_6(mode: DeckMode) -> None:
    mismatches: list[str] = []
    for hand, facts, total in zip(ALL_HANDS, engine_facts(mode), oracle_totals(mode), strict=True):
        pares = pares_class_of(hand, mode)
        expected = (
            pares,
            PARES_VALUES[pares],
            total,
            total >= 31,
            (3 if total == 31 else 2) if total >= 31 else 0,
            False,
        )
        got = (
            PARES_NAMES[facts.pares_class] if facts.pares_class is not None else None,
            facts.pares_value,
            facts.total,
            facts.has_juego,
            facts.juego_value,
            facts.real_31,
        )
        if got != expected:
            mismatches.append(f"{' '.join(map(str, hand))}: engine {got}, oracle {expected}")
    assert not mismatches, f"{len(mismatches)} hands differ, e.g. {mismatches[:5]}"


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.value)
def test_juego_totals_are_exactly_those_of_2_3(mode: DeckMode) -> None:
    """rules §2.3: juego totals are 31-37 and 40 (never 38 or 39); punto totals lie in 4..30.

    In 8 reyes no card is worth 2 or 3, so 5 and 6 never occur either (four aces make 4, three aces and a 4 make 7).
    """
    totals = {facts.total for facts in engine_facts(mode)}
    assert {t for t in totals if t >= 31} == {31, 32, 33, 34, 35, 36, 37, 40}
    impossible = {5, 6} if mode is DeckMode.OCHO_REYES else set()
    assert {t for t in totals if t < 31} == set(range(4, 31)) - impossible


# ---------------------------------------------------------------- the order of every lance


def distinct_hands(signatures: Sequence[Hashable]) -> list[int]:
    """One representative hand index per oracle signature (the hands the oracle cannot tell apart)."""
    seen: dict[Hashable, int] = {}
    for index, signature in enumerate(signatures):
        seen.setdefault(signature, index)
    return list(seen.values())


@dataclass(frozen=True)
class LanceCase:
    lance: Lance
    signature: Callable[[Sequence[Card], DeckMode], Hashable]


def rank_multiset(hand: Sequence[Card], mode: DeckMode) -> Hashable:
    return tuple(sorted(oracle_rank(card, mode) for card in hand))


def hand_total(hand: Sequence[Card], mode: DeckMode) -> Hashable:
    return oracle_total(hand, mode)


@functools.cache
def signatures_of(signature: Callable[[Sequence[Card], DeckMode], Hashable], mode: DeckMode) -> tuple[Hashable, ...]:
    """The signature of every hand, in the order of ALL_HANDS: three lances share `rank_multiset`, two `hand_total`."""
    if signature is hand_total:
        return oracle_totals(mode)
    return tuple(signature(hand, mode) for hand in ALL_HANDS)


LANCE_CASES = [
    LanceCase(Lance.GRANDE, rank_multiset),
    LanceCase(Lance.CHICA, rank_multiset),
    LanceCase(Lance.PARES, rank_multiset),
    LanceCase(Lance.JUEGO, hand_total),
    LanceCase(Lance.PUNTO, hand_total),
]


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


def _compare_keys(a: tuple[int, ...] | None, b: tuple[int, ...] | None) -> int:
    if a is None or b is None:
        return (a is not None) - (b is not None)
    return (a > b) - (a < b)


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.value)
@pytest.mark.parametrize("case", LANCE_CASES, ids=lambda case: case.lance.value)
def test_every_lance_orders_all_hands_as_the_oracle_does_6(mode: DeckMode, case: LanceCase) -> None:
    """Hands the oracle cannot tell apart get one engine key, and sorting the distinct hands either way agrees."""
    lance = case.lance
    keys = engine_keys(mode, lance)
    signatures = signatures_of(case.signature, mode)
    keys_by_signature: dict[Hashable, set[tuple[int, ...] | None]] = {}
    for signature, key in zip(signatures, keys, strict=True):
        keys_by_signature.setdefault(signature, set()).add(key)
    split = {sig: keys for sig, keys in keys_by_signature.items() if len(keys) > 1}
    assert not split, f"hands the oracle ranks equal get different {lance.value} keys: {list(split.items())[:3]}"

    reps = distinct_hands(signatures)
    oracle = ORACLE_CMP[lance]

    def oracle_cmp(i: int, j: int) -> int:
        return oracle(ALL_HANDS[i], ALL_HANDS[j], mode)

    def engine_cmp(i: int, j: int) -> int:
        return _compare_keys(keys[i], keys[j])

    # Two weak orders are the same if a list sorted by either one has the same relation at every adjacent pair
    # under both; checking both sortings guards against a non-transitive comparison on either side.
    for sort_by, check in ((oracle_cmp, engine_cmp), (engine_cmp, oracle_cmp)):
        ordered = sorted(reps, key=functools.cmp_to_key(sort_by))
        for i, j in itertools.pairwise(ordered):
            assert _sign(sort_by(i, j)) == _sign(check(i, j)), (
                f"{lance.value}: {' '.join(map(str, ALL_HANDS[i]))} vs {' '.join(map(str, ALL_HANDS[j]))}: "
                f"oracle {oracle_cmp(i, j)}, engine {engine_cmp(i, j)}"
            )
    assert len(reps) > 1


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.value)
def test_best_seat_agrees_with_the_oracle_on_random_deals_ties_to_the_mano_3(mode: DeckMode) -> None:
    """Deal 3,000 random tables; every lance's winner, with ties to the seat nearest the mano, matches."""
    rng = random.Random(f"oracle/{mode.value}")
    ties = 0
    for _ in range(3000):
        deck = list(FULL_DECK)
        rng.shuffle(deck)
        hands = [tuple(deck[4 * seat : 4 * seat + 4]) for seat in range(4)]
        mano = rng.randrange(4)
        facts = [evaluate(hand, mode) for hand in hands]
        for lance in (Lance.GRANDE, Lance.CHICA, Lance.PARES, Lance.JUEGO, Lance.PUNTO):
            participants = [seat for seat in range(4) if oracle_holds(hands[seat], lance, mode)]
            expected = oracle_winner(hands, lance, mode, mano)
            assert best_seat(facts, lance, mano, participants) == expected, (lance, hands, mano)
            if expected is not None and any(
                other != expected and ORACLE_CMP[lance](hands[other], hands[expected], mode) == 0
                for other in participants
            ):
                ties += 1
    assert ties > 100, "the sample should contain many ties decided by mano order"


# ---------------------------------------------------------------- real 31 and ties to the mano


def cards(text: str) -> tuple[Card, ...]:
    return tuple(Card.parse(part) for part in text.split())


@functools.cache
def hands_with_31_or_a_7(mode: DeckMode) -> tuple[tuple[tuple[Card, ...], int], ...]:
    """Every hand (with its oracle total) that totals 31 or holds a 7: the others have nothing to flag, and
    skipping them keeps the test fast."""
    return tuple(
        (hand, total)
        for hand, total in zip(ALL_HANDS, oracle_totals(mode), strict=True)
        if total == 31 or any(card.rank == 7 for card in hand)
    )


@pytest.mark.parametrize("real", list(Real31), ids=lambda real: real.value)
@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.value)
def test_real_31_flag_matches_the_oracle_on_every_hand_6_6(mode: DeckMode, real: Real31) -> None:
    flagged = 0
    for hand, total in hands_with_31_or_a_7(mode):
        facts = evaluate(hand, mode, real)
        expected = total == 31 and is_real_31(hand, mode, real)
        assert facts.real_31 is expected, (hand, mode, real)
        flagged += expected
        if facts.has_juego:
            assert facts.juego_value == (3 if facts.total == 31 else 2), "a real 31 still scores 3"
    assert (flagged > 0) is (real is not Real31.OFF)


@pytest.mark.parametrize(
    ("real", "ordinary", "special", "winner"),
    [
        (Real31.OFF, "12o 11o 10o 1o", "7o 7c 7e 10c", 0),  # no real 31: a tie on 31, to the mano
        (Real31.SIETE_SIETE_SIETE_SOTA, "12o 11o 10o 1o", "7o 7c 7e 10c", 1),
        (Real31.SIETE_SIETE_SIETE_SOTA, "12o 11o 10o 1o", "7o 7c 7e 11c", 0),  # a caballo is not a sota
        (Real31.SIETE_SIETE_SIETE_FIGURE, "12o 11o 10o 1o", "7o 7c 7e 11c", 1),
        (Real31.SIETE_SIETE_SIETE_FIGURE, "12o 11o 10o 1o", "7o 7c 7e 3c", 1),  # in 8 reyes a 3 is a figure
        (Real31.SIETE_SIETE_SIETE_SOTA, "12o 11o 10o 1o", "7o 7c 7e 3c", 0),
    ],
)
def test_real_31_beats_an_ordinary_31_only_when_the_option_says_so_6_6(
    real: Real31, ordinary: str, special: str, winner: int
) -> None:
    hands = [cards(ordinary), cards(special), cards("4o 5o 6o 4c"), cards("5c 6c 4e 5e")]
    facts = [evaluate(hand, DeckMode.OCHO_REYES, real) for hand in hands]
    assert [f.total for f in facts[:2]] == [31, 31]
    assert best_seat(facts, Lance.JUEGO, mano=0, participants=[0, 1]) == winner
    assert facts[winner].juego_value == 3


def test_two_real_31s_tie_and_the_one_nearer_the_mano_wins_6_6() -> None:
    """A deck has only four 7s, so two reales never meet at one table; the comparison still ties them."""
    real = Real31.SIETE_SIETE_SIETE_SOTA
    the_real = evaluate(cards("7o 7c 7e 10c"), DeckMode.OCHO_REYES, real)
    ordinary = evaluate(cards("12o 11o 10o 1e"), DeckMode.OCHO_REYES, real)
    no_juego = evaluate(cards("4o 5o 6o 4c"), DeckMode.OCHO_REYES, real)
    table = [no_juego, ordinary, the_real, the_real]
    assert best_seat(table, Lance.JUEGO, mano=0) == 2
    assert best_seat(table, Lance.JUEGO, mano=3) == 3
    assert best_seat(table, Lance.JUEGO, mano=1) == 2, "seat 1's ordinary 31 loses to a real 31"


@pytest.mark.parametrize(
    ("lance", "hands", "mano", "winner"),
    [
        # Grande: equal keys on seats 1 and 3; seat 1 is nearer a mano of 0, seat 3 nearer a mano of 2.
        (Lance.GRANDE, ["4o 5o 6o 1o", "12o 11o 7o 1c", "4c 5c 6c 1e", "12c 11c 7c 1b"], 0, 1),
        (Lance.GRANDE, ["4o 5o 6o 1o", "12o 11o 7o 1c", "4c 5c 6c 1e", "12c 11c 7c 1b"], 2, 3),
        # Chica: 2 = as in 8 reyes, so A-4-5-6 from seats 0 and 3 tie.
        (Lance.CHICA, ["1o 4o 5o 6o", "12o 11o 10o 7o", "12c 11c 10c 7c", "2c 4c 5c 6c"], 3, 3),
        (Lance.CHICA, ["1o 4o 5o 6o", "12o 11o 10o 7o", "12c 11c 10c 7c", "2c 4c 5c 6c"], 1, 3),
        (Lance.CHICA, ["1o 4o 5o 6o", "12o 11o 10o 7o", "12c 11c 10c 7c", "2c 4c 5c 6c"], 2, 3),
        (Lance.CHICA, ["1o 4o 5o 6o", "12o 11o 10o 7o", "12c 11c 10c 7c", "2c 4c 5c 6c"], 0, 0),
        # Pares (P11 style): medias of kings R-R-R-A and R-R-R-C tie; unpaired cards never count.
        (Lance.PARES, ["4o 5o 6o 7o", "12o 12c 3o 1o", "4c 5c 6c 7c", "12e 3c 12b 11o"], 0, 1),
        (Lance.PARES, ["4o 5o 6o 7o", "12o 12c 3o 1o", "4c 5c 6c 7c", "12e 3c 12b 11o"], 2, 3),
        # Juego (J05 style): 33 for the mano, 31 for seats 1 and 3: seat 1 wins, the mano's worse juego is ignored.
        (Lance.JUEGO, ["10o 11o 7o 6o", "12o 11c 10c 1o", "4o 5o 6c 1c", "12c 11e 10e 1e"], 0, 1),
        (Lance.JUEGO, ["10o 11o 7o 6o", "12o 11c 10c 1o", "4o 5o 6c 1c", "12c 11e 10e 1e"], 2, 3),
        # Punto: 27 for seats 0 and 2.
        (Lance.PUNTO, ["10o 11o 6o 1o", "4o 5o 6c 1c", "10c 11c 6e 1e", "4c 5c 6b 1b"], 1, 2),
        (Lance.PUNTO, ["10o 11o 6o 1o", "4o 5o 6c 1c", "10c 11c 6e 1e", "4c 5c 6b 1b"], 3, 0),
    ],
)
def test_a_tie_goes_to_the_seat_nearest_the_mano_3(lance: Lance, hands: list[str], mano: int, winner: int) -> None:
    facts = [evaluate(cards(hand), DeckMode.OCHO_REYES) for hand in hands]
    parsed = [cards(hand) for hand in hands]
    assert oracle_winner(parsed, lance, DeckMode.OCHO_REYES, mano) == winner  # the case means what it says
    assert best_seat(facts, lance, mano) == winner


@pytest.mark.parametrize(
    ("better", "worse", "lance"),
    [
        ("12o 12c 11o 2o", "12e 12b 7o 4o", Lance.GRANDE),  # G01: R-R-C-2 beats R-R-7-4
        ("10o 5o 4o 1o", "7o 7c 7e 7b", Lance.GRANDE),  # rank, not sum: a single sota beats four sevens
        ("11o 10o 2o 2c", "12o 12c 4o 1o", Lance.CHICA),  # C-S-2-2 beats R-R-4-A (a 2 is an as)
        ("12o 12c 1o 1c", "11o 11c 11e 11b", Lance.PARES),  # P05: duples R-R-A-A > C-C-C-C
        ("11o 11c 11e 11b", "4o 4c 1e 1b", Lance.PARES),  # C-C-C-C > 4-4-A-A
        ("12o 12c 4o 4c", "11o 11c 11e 11b", Lance.PARES),  # P06
        ("12o 12c 12e 12b", "3o 3c 11e 11b", Lance.PARES),  # four kings > R-R-C-C
        ("1o 1c 2e 5o", "12o 12c 4o 5c", Lance.PARES),  # medias (of aces) > par (of kings)
        ("10o 10c 10e 1o", "10b 11o 11c 11e", Lance.JUEGO),  # 31 > 40
        ("10o 10c 10e 11o", "10b 11c 11e 7o", Lance.JUEGO),  # 40 > 37
        ("10o 10c 6e 1o", "10b 11c 6o 1c", Lance.PUNTO),  # 27 and 27: equal, so the mano's seat 0 wins
    ],
)
def test_rulebook_comparison_examples_hold_in_oracle_and_engine_6(better: str, worse: str, lance: Lance) -> None:
    a, b = cards(better), cards(worse)
    mode = DeckMode.OCHO_REYES
    expected = 0 if lance is Lance.PUNTO else 1
    assert ORACLE_CMP[lance](a, b, mode) == expected
    facts = [evaluate(b, mode), evaluate(a, mode), evaluate(b, mode), evaluate(b, mode)]
    assert best_seat(facts, lance, mano=0) == (1 if expected else 0)


# ---------------------------------------------------------------- the evaluator pinned by a hash of its output


def evaluator_digest(mode: DeckMode) -> str:
    """sha256 over every hand: its classification, values, and its position in the order of every lance.

    Positions are dense ranks of the engine's keys, so the hash pins behaviour, not the shape of the key tuples.
    """
    facts = engine_facts(mode)
    positions: dict[Lance, list[int]] = {}
    for lance in (Lance.GRANDE, Lance.CHICA, Lance.PARES, Lance.JUEGO, Lance.PUNTO):
        keys = engine_keys(mode, lance)
        distinct = sorted({key for key in keys if key is not None})
        index = {key: i + 1 for i, key in enumerate(distinct)}
        positions[lance] = [index[key] if key is not None else 0 for key in keys]
    digest = hashlib.sha256()
    for i, (hand, fact) in enumerate(zip(ALL_HANDS, facts, strict=True)):
        pares = PARES_NAMES[fact.pares_class] if fact.pares_class is not None else "-"
        ranks = ",".join(str(position[i]) for position in positions.values())
        line = f"{' '.join(map(str, hand))}|{pares}|{fact.pares_value}|{fact.total}|{fact.juego_value}|{ranks}\n"
        digest.update(line.encode())
    return digest.hexdigest()


PINNED_DIGESTS = {
    DeckMode.OCHO_REYES: "913e9ec900dc4ad7a2ff51ceb5d81fe2c6a05e1919dcee04e8db2df90bb6251a",
    DeckMode.CUATRO_REYES: "d9b19ee960f557724b6848ced305ced1325ece557a14d35d68c456dae26a6f20",
}


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.value)
def test_evaluator_output_over_every_hand_is_pinned_by_sha256(mode: DeckMode) -> None:
    assert evaluator_digest(mode) == PINNED_DIGESTS[mode], (
        "the evaluator's output changed; if the oracle tests pass and the change is intended, update the hash"
    )
