"""The round-robin schedule: every pairing, duplicate twins, mano balance, interleaving, determinism, bad input."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from itertools import combinations

import pytest

from referee.engine.chance import first_dealer_of
from workers.tournament.errors import TournamentError
from workers.tournament.schedule import MatchPlan, duplicate_seed, schedule_round_robin

BOTS = ["alpha", "bravo", "charlie", "delta", "echo"]


def pairing_of(plan: MatchPlan) -> frozenset[str]:
    return frozenset((plan.team0, plan.team1))


def first_mano(plan: MatchPlan) -> int:
    """Hand 0's mano (rules §3): the seat after the first dealer."""
    return (first_dealer_of(plan.seed) + 1) % 4


def test_every_pairing_plays_matches_per_pairing_matches_and_indexes_are_positions() -> None:
    plans = schedule_round_robin(BOTS, 6, league_seed=11)
    assert [plan.index for plan in plans] == list(range(len(plans)))
    counts = Counter(pairing_of(plan) for plan in plans)
    assert counts == {frozenset(pair): 6 for pair in combinations(BOTS, 2)}
    per_bot = Counter(bot for plan in plans for bot in (plan.team0, plan.team1))
    assert per_bot == dict.fromkeys(BOTS, 6 * (len(BOTS) - 1))


def test_duplicate_twins_share_the_seed_with_the_partnerships_swapped_side_by_side() -> None:
    plans = schedule_round_robin(BOTS, 4, league_seed=3)
    by_pair: dict[int, list[MatchPlan]] = defaultdict(list)
    for plan in plans:
        by_pair[plan.duplicate_pair].append(plan)
    assert len(by_pair) == len(plans) // 2
    for first, second in by_pair.values():
        assert first.seed == second.seed
        assert (first.team0, first.team1) == (second.team1, second.team0)
        assert second.index == first.index + 1
        assert first.round == second.round
    seeds = [twins[0].seed for twins in by_pair.values()]
    assert len(set(seeds)) == len(seeds), "different pairs play different deals"
    assert all(0 <= seed < 2**63 for seed in seeds)


@pytest.mark.parametrize("league_seed", [0, 1, 2024])
def test_first_dealer_cycles_evenly_over_the_four_seats_within_each_pairing(league_seed: int) -> None:
    plans = schedule_round_robin(BOTS, 16, league_seed)  # 8 pairs per pairing: each first dealer twice
    dealers: dict[frozenset[str], Counter[int]] = defaultdict(Counter)
    for plan in plans[::2]:  # one plan per pair
        dealers[pairing_of(plan)][first_dealer_of(plan.seed)] += 1
    assert all(counter == {0: 2, 1: 2, 2: 2, 3: 2} for counter in dealers.values())


def test_each_bot_opens_as_mano_equally_often_at_every_seat() -> None:
    plans = schedule_round_robin(BOTS, 8, league_seed=5)
    opened: dict[tuple[frozenset[str], str], Counter[int]] = defaultdict(Counter)
    for plan in plans:
        seat = first_mano(plan)
        holder = plan.team0 if seat % 2 == 0 else plan.team1
        opened[pairing_of(plan), holder][seat] += 1
    for pair in combinations(BOTS, 2):
        for bot in pair:
            # 4 pairs = 8 matches: the bot holds hand 0's mano in 4 of them, once at each of its 4 seats.
            assert opened[frozenset(pair), bot] == {0: 1, 1: 1, 2: 1, 3: 1}


def test_a_pair_count_that_is_not_a_multiple_of_four_is_balanced_to_within_one() -> None:
    plans = schedule_round_robin(BOTS, 12, league_seed=9)  # 6 pairs per pairing
    dealers: dict[frozenset[str], Counter[int]] = defaultdict(Counter)
    for plan in plans[::2]:
        dealers[pairing_of(plan)][first_dealer_of(plan.seed)] += 1
    for counter in dealers.values():
        assert sum(counter.values()) == 6
        assert max(counter.values()) - min(counter[seat] for seat in range(4)) <= 1


def test_a_partly_run_league_has_played_every_pairing_equally_with_complete_pairs() -> None:
    plans = schedule_round_robin(BOTS, 8, league_seed=1)
    per_round = len(list(combinations(BOTS, 2))) * 2
    assert [plan.round for plan in plans] == sorted(plan.round for plan in plans)
    for rounds_done in range(1, 5):
        prefix = plans[: rounds_done * per_round]
        assert set(Counter(pairing_of(plan) for plan in prefix).values()) == {2 * rounds_done}
        assert all(count == 2 for count in Counter(plan.duplicate_pair for plan in prefix).values())
    round0 = Counter(first_dealer_of(plan.seed) for plan in plans[:per_round:2])
    assert len(round0) == 4, "the first round itself spreads the first dealer over the seats"


def test_the_schedule_is_a_function_of_its_inputs() -> None:
    assert schedule_round_robin(BOTS, 4, 42) == schedule_round_robin(BOTS, 4, 42)
    other = schedule_round_robin(BOTS, 4, 43)
    assert [p.seed for p in other] != [p.seed for p in schedule_round_robin(BOTS, 4, 42)]


def test_the_seed_is_the_documented_sha256_derivation() -> None:
    for pairing, round_ in [(0, 0), (3, 1), (7, 5)]:
        for attempt in range(100):
            text = f"mus/league/17/{pairing}/{round_}/{attempt}"
            candidate = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1
            if first_dealer_of(candidate) == (pairing + round_) % 4:
                break
        assert duplicate_seed(17, pairing, round_) == candidate


@pytest.mark.parametrize(
    ("entrants", "matches", "message"),
    [
        (["solo"], 2, "at least 2 entrants"),
        ([], 2, "at least 2 entrants"),
        (["a", "b", "a"], 2, "repeated: a"),
        (["a", ""], 2, "non-empty"),
        (["a", "b"], 3, "even and at least 2"),
        (["a", "b"], 0, "even and at least 2"),
        (["a", "b"], -2, "even and at least 2"),
        (["a", "b"], 2.0, "must be an integer"),
    ],
)
def test_bad_input_is_a_value_error_that_says_what_is_wrong(entrants: list[str], matches: int, message: str) -> None:
    with pytest.raises(TournamentError, match=message):
        schedule_round_robin(entrants, matches, 0)
    with pytest.raises(ValueError):
        schedule_round_robin(entrants, matches, 0)
