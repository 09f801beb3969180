"""The standings table: counts per bot, duplicate-pair score, faults and incidents by cause, ranking by Elo, JSON
rows."""

from __future__ import annotations

import json

import pytest

from workers.tournament.errors import TournamentError
from workers.tournament.ratings import Rating, fit_elo
from workers.tournament.results import MatchScore
from workers.tournament.standings import StandingRow, standings

RESULTS = [
    # pair 0, a v b: a wins both
    MatchScore("a", "b", 0, 0, 0, games=(2, 1), points=(80, 61), faults=({}, {"timeout": 1})),
    MatchScore("b", "a", 1, 0, 1, games=(0, 2), points=(30, 80)),
    # pair 1, a v c: split
    MatchScore("a", "c", 1, 1, 2, games=(1, 2), points=(70, 95), faults=({"illegal_action": 2}, {})),
    MatchScore("c", "a", 1, 1, 3, games=(1, 2), points=(66, 88), faults=({"timeout": 1}, {"timeout": 1})),
    # pair 2, b v c: only one twin so far, b won it when c forfeited on faults
    MatchScore(
        "b",
        "c",
        0,
        2,
        4,
        games=(1, 0),
        points=(40, 12),
        faults=({}, {"timeout": 3}),
        incidents=({}, {"crash": 1, "disconnect": 0}),
    ),
]


def row_of(rows: list[StandingRow], bot: str) -> StandingRow:
    return next(row for row in rows if row.bot == bot)


def test_rows_count_matches_games_points_pairs_and_faults_by_cause() -> None:
    rows = standings(RESULTS, fit_elo(RESULTS))
    a, b, c = (row_of(rows, bot) for bot in "abc")
    assert (a.matches, a.wins, a.losses) == (4, 3, 1)
    assert (a.games_won, a.games_lost) == (2 + 2 + 1 + 2, 1 + 0 + 2 + 1)
    assert (a.points_for, a.points_against) == (80 + 80 + 70 + 88, 61 + 30 + 95 + 66)
    assert (a.pair_score, a.pairs) == (1.5, 2)
    assert a.faults == {"illegal_action": 2, "timeout": 1}
    assert (b.matches, b.wins, b.losses, b.pair_score, b.pairs) == (3, 1, 2, 0.0, 1)  # an incomplete pair has
    assert (c.matches, c.wins, c.losses, c.pair_score, c.pairs) == (3, 1, 2, 0.5, 1)  # no pair score yet
    assert b.faults == {"timeout": 1}
    assert c.faults == {"timeout": 4}


def test_incidents_are_counted_apart_from_faults_by_cause() -> None:
    rows = standings(RESULTS, fit_elo(RESULTS))
    a, b, c = (row_of(rows, bot) for bot in "abc")
    assert c.incidents == {"crash": 1}  # a zero count is not listed
    assert "crash" not in c.faults, "an incident is never counted as a fault"
    assert a.incidents == b.incidents == {}


def test_rows_are_ranked_by_elo_and_carry_its_interval() -> None:
    ratings = fit_elo(RESULTS)
    rows = standings(RESULTS, ratings)
    assert [row.rank for row in rows] == [1, 2, 3]
    assert [row.elo for row in rows] == sorted((r.elo for r in ratings.values()), reverse=True)
    for row in rows:
        assert (row.elo, row.elo_low, row.elo_high) == (
            ratings[row.bot].elo,
            ratings[row.bot].low,
            ratings[row.bot].high,
        )


def test_equal_elo_shares_a_rank_and_entrants_without_results_get_an_empty_row() -> None:
    rating = Rating(1500.0, 1400.0, 1600.0, 51.0, "mean of the 3 entrants = 1500")
    ratings = {"x": rating, "y": rating, "z": Rating(1450.0, 1300.0, 1600.0, 76.5, rating.reference)}
    rows = standings([], ratings)
    assert [(row.rank, row.bot) for row in rows] == [(1, "x"), (1, "y"), (3, "z")]
    assert rows[2].matches == rows[2].wins == rows[2].pairs == 0 and rows[2].faults == {}


def test_a_bot_with_results_but_no_rating_is_an_error() -> None:
    with pytest.raises(TournamentError, match="'c' has results but no rating"):
        standings(RESULTS, {bot: r for bot, r in fit_elo(RESULTS).items() if bot != "c"})


def test_rows_serialise_to_json_and_back() -> None:
    rows = standings(RESULTS, fit_elo(RESULTS))
    text = json.dumps([row.to_json() for row in rows])
    loaded = json.loads(text)
    assert [StandingRow(**data) for data in loaded] == rows
    assert set(loaded[0]) == {
        "rank",
        "bot",
        "elo",
        "elo_low",
        "elo_high",
        "matches",
        "wins",
        "losses",
        "games_won",
        "games_lost",
        "points_for",
        "points_against",
        "pair_score",
        "pairs",
        "faults",
        "incidents",
    }
