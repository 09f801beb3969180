"""Maximum-likelihood Elo: recovers known strengths, ignores order, states its reference, stays finite."""

from __future__ import annotations

import math
import random

import pytest

from tests.tournament.simulate import repeated_pairs, simulate_league
from workers.tournament.errors import TournamentError
from workers.tournament.ratings import fit_elo
from workers.tournament.results import MatchScore

TRUE_ELO = {"low": 1300.0, "mid": 1500.0, "high": 1700.0}


def test_synthetic_leagues_recover_the_true_order_and_values_within_the_intervals() -> None:
    leagues, ordered, covered, total = 30, 0, 0, 0
    for seed in range(leagues):
        ratings = fit_elo(simulate_league(TRUE_ELO, 60, seed))  # 30 pairs per pairing
        ordered += ratings["low"].elo < ratings["mid"].elo < ratings["high"].elo
        for bot, true in TRUE_ELO.items():
            total += 1
            covered += ratings[bot].low <= true <= ratings[bot].high
            assert abs(ratings[bot].elo - true) < 5 * ratings[bot].sd
    assert ordered >= 0.9 * leagues
    assert covered >= 0.85 * total


def test_a_large_league_lands_close_to_the_true_ratings() -> None:
    ratings = fit_elo(simulate_league(TRUE_ELO, 400, seed=7))
    for bot, true in TRUE_ELO.items():
        assert ratings[bot].low <= true <= ratings[bot].high
        assert abs(ratings[bot].elo - true) < 40


def test_the_fit_does_not_depend_on_the_order_or_the_finish_indexes_of_the_results() -> None:
    scores = simulate_league({"a": 1400.0, "b": 1500.0, "c": 1550.0, "d": 1650.0}, 10, seed=3)
    reference = fit_elo(scores)
    rng = random.Random(0)
    for _ in range(5):
        shuffled = scores[:]
        rng.shuffle(shuffled)
        assert fit_elo(shuffled) == reference  # bit for bit
        renumbered = [
            MatchScore(s.team0, s.team1, s.winner, s.duplicate_pair, finished)
            for s, finished in zip(shuffled, rng.sample(range(10_000), len(shuffled)), strict=True)
        ]
        assert fit_elo(renumbered) == reference


def test_by_default_the_entrants_mean_is_the_anchor_rating() -> None:
    ratings = fit_elo(simulate_league(TRUE_ELO, 20, seed=1))
    assert sum(r.elo for r in ratings.values()) / 3 == pytest.approx(1500.0, abs=1e-9)
    assert {r.reference for r in ratings.values()} == {"mean of the 3 entrants = 1500"}
    shifted = fit_elo(simulate_league(TRUE_ELO, 20, seed=1), anchor_rating=1000.0)
    for bot, rating in ratings.items():
        assert shifted[bot].elo == pytest.approx(rating.elo - 500.0, abs=1e-9)
        assert shifted[bot].sd == pytest.approx(rating.sd, abs=1e-9)


def test_a_named_anchor_is_fixed_and_only_the_level_moves() -> None:
    scores = simulate_league(TRUE_ELO, 20, seed=2)
    by_mean = fit_elo(scores)
    by_low = fit_elo(scores, anchor="low", anchor_rating=1300.0)
    assert by_low["low"].elo == 1300.0
    assert by_low["low"].sd == 0.0 and by_low["low"].low == by_low["low"].high == 1300.0
    assert by_low["high"].reference == "low = 1300"
    for bot in TRUE_ELO:
        assert by_low[bot].elo - by_low["low"].elo == pytest.approx(by_mean[bot].elo - by_mean["low"].elo, abs=1e-9)
        if bot != "low":
            # Relative to one bot, a rating carries that bot's uncertainty too.
            assert by_low[bot].sd > by_mean[bot].sd


def test_with_two_bots_the_mean_reference_halves_the_uncertainty_of_their_difference() -> None:
    scores = repeated_pairs("a", "b", [1.0, 0.5, 0.5, 0.0, 1.0], copies=4)
    by_mean, by_b = fit_elo(scores), fit_elo(scores, anchor="b")
    assert by_mean["a"].sd == pytest.approx(by_b["a"].sd / 2)
    assert by_mean["a"].elo - by_mean["b"].elo == pytest.approx(by_b["a"].elo - 1500.0)


def test_an_anchor_that_is_not_rated_is_an_error() -> None:
    with pytest.raises(TournamentError, match="'zeta' is not among the rated bots"):
        fit_elo(simulate_league(TRUE_ELO, 2, seed=0), anchor="zeta")


def test_an_entrant_without_results_is_rated_from_the_prior_with_a_wide_interval() -> None:
    scores = simulate_league(TRUE_ELO, 20, seed=4)
    ratings = fit_elo(scores, entrants=["newcomer"])
    assert ratings["newcomer"].reference == "mean of the 4 entrants = 1500"
    assert ratings["newcomer"].sd > 2 * max(ratings[bot].sd for bot in TRUE_ELO)
    # The mean reference now holds an unknown, so every rating relative to it is less certain.
    without = fit_elo(scores)
    assert all(ratings[bot].sd > without[bot].sd for bot in TRUE_ELO)
    assert fit_elo([]) == {}


def test_a_bot_that_wins_everything_stays_finite_and_on_top() -> None:
    scores = repeated_pairs("ace", "b", [1.0], copies=10)
    scores += repeated_pairs("ace", "c", [1.0], copies=10, start=100)
    scores += repeated_pairs("b", "c", [1.0, 0.5, 0.0, 0.5], copies=3, start=200)
    ratings = fit_elo(scores)
    assert all(math.isfinite(v) for r in ratings.values() for v in (r.elo, r.low, r.high, r.sd))
    assert ratings["ace"].elo == max(r.elo for r in ratings.values())
    assert ratings["ace"].elo - ratings["b"].elo > 300
    with pytest.raises(TournamentError, match="prior_draws must be positive"):
        fit_elo(scores, prior_draws=0.0)


def test_intervals_shrink_as_results_accumulate() -> None:
    few = fit_elo(repeated_pairs("a", "b", [1.0, 1.0, 0.5, 0.0], copies=3))
    many = fit_elo(repeated_pairs("a", "b", [1.0, 1.0, 0.5, 0.0], copies=30))
    for bot in ("a", "b"):
        assert many[bot].sd < few[bot].sd / 2.5  # ~ sqrt(10) times narrower
    assert many["a"].elo > few["a"].elo  # and the prior's pull to the centre fades


def test_a_complete_pair_is_one_observation_not_two() -> None:
    first, second = repeated_pairs("a", "b", [1.0], copies=1)
    one_twin = fit_elo([first])
    both_twins = fit_elo([first, second])
    assert both_twins == one_twin  # the twin confirms the result; it adds no independent observation
    two_matches = fit_elo([first, MatchScore("b", "a", 1, None, 1)])  # two unpaired wins do count twice
    assert two_matches["a"].elo > both_twins["a"].elo
    assert two_matches["a"].sd < both_twins["a"].sd


def test_a_split_pair_is_a_draw() -> None:
    ratings = fit_elo(repeated_pairs("a", "b", [0.5], copies=5))
    assert ratings["a"].elo == pytest.approx(1500.0) and ratings["b"].elo == pytest.approx(1500.0)
