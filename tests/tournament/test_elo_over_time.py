"""The Elo-over-time series: every point a fresh fit of a prefix of the results in finish order."""

from __future__ import annotations

import random

import pytest

from tests.tournament.simulate import simulate_league
from workers.tournament.errors import TournamentError
from workers.tournament.ratings import EloPoint, elo_over_time, fit_elo

TRUE_ELO = {"a": 1350.0, "b": 1500.0, "c": 1650.0}


def test_every_point_is_the_fit_of_its_prefix_never_an_accumulated_update() -> None:
    scores = simulate_league(TRUE_ELO, 8, seed=5)
    random.Random(1).shuffle(scores)  # the series follows `finished`, not the list order
    series = elo_over_time(scores)
    in_order = sorted(scores, key=lambda s: s.finished)
    for n in range(1, len(in_order) + 1):
        ratings = fit_elo(in_order[:n], entrants=TRUE_ELO)
        for bot, points in series.items():
            at_n = [p for p in points if p.finished == n]
            if at_n:
                rating = ratings[bot]
                assert at_n == [EloPoint(n, rating.elo, rating.low, rating.high)]


def test_a_series_starts_at_the_bots_first_result_and_ends_at_the_current_ratings() -> None:
    scores = simulate_league(TRUE_ELO, 4, seed=6)
    series = elo_over_time(scores)
    first_result = {bot: min(s.finished for s in scores if bot in (s.team0, s.team1)) + 1 for bot in TRUE_ELO}
    final = fit_elo(scores)
    for bot in TRUE_ELO:
        assert series[bot][0].finished == first_result[bot]
        assert [p.finished for p in series[bot]] == list(range(first_result[bot], len(scores) + 1))
        assert series[bot][-1] == EloPoint(len(scores), final[bot].elo, final[bot].low, final[bot].high)


def test_every_thins_the_series_but_keeps_the_last_result() -> None:
    scores = simulate_league(TRUE_ELO, 6, seed=8)  # 18 results
    series = elo_over_time(scores, every=5, anchor="b")
    assert [p.finished for p in series["b"]] == [5, 10, 15, 18]
    assert all(p.elo == 1500.0 for p in series["b"])
    with pytest.raises(TournamentError, match="every must be at least 1"):
        elo_over_time(scores, every=0)


def test_no_results_no_series() -> None:
    assert elo_over_time([]) == {}
