"""Results into observations: a complete duplicate pair is one observation, an incomplete one a single match."""

from __future__ import annotations

import pytest

from workers.tournament.errors import TournamentError
from workers.tournament.ratings import elo_over_time, fit_elo
from workers.tournament.results import MatchScore, Observation, observations
from workers.tournament.standings import standings


def match(team0: str, team1: str, winner: int, pair: int | None, finished: int) -> MatchScore:
    return MatchScore(team0, team1, winner, pair, finished)


@pytest.mark.parametrize(
    ("winners", "score"),
    [((0, 1), 1.0), ((1, 0), 0.0), ((0, 0), 0.5), ((1, 1), 0.5)],
)
def test_a_complete_pair_is_one_observation_scored_from_both_twins(winners: tuple[int, int], score: float) -> None:
    # "a" is team 0 in the first twin and team 1 in the second: (0, 1) means "a" won both.
    twins = [match("a", "b", winners[0], 7, 0), match("b", "a", winners[1], 7, 1)]
    assert observations(twins) == [Observation("a", "b", score, 2, 7)]


def test_an_incomplete_pair_counts_as_a_single_match_until_its_twin_finishes() -> None:
    assert observations([match("b", "a", 1, 3, 0)]) == [Observation("a", "b", 1.0, 1, 3)]
    assert observations([match("b", "a", 0, None, 0)]) == [Observation("a", "b", 0.0, 1, None)]


def test_observations_do_not_depend_on_the_order_of_the_results() -> None:
    results = [
        match("a", "b", 0, 0, 0),
        match("c", "a", 1, 1, 1),
        match("b", "a", 0, 0, 2),
        match("b", "c", 1, None, 3),
    ]
    assert observations(results) == observations(results[::-1])
    assert len(observations(results)) == 3


def test_twins_must_be_the_same_bots_with_the_partnerships_swapped() -> None:
    with pytest.raises(TournamentError, match="partnerships swapped"):
        observations([match("a", "b", 0, 0, 0), match("a", "b", 0, 0, 1)])
    with pytest.raises(TournamentError, match="partnerships swapped"):
        observations([match("a", "b", 0, 0, 0), match("c", "a", 0, 0, 1)])


def test_a_pair_holds_at_most_two_matches_and_finish_indexes_are_unique() -> None:
    with pytest.raises(TournamentError, match="has 3 results"):
        observations([match("a", "b", 0, 0, 0), match("b", "a", 0, 0, 1), match("a", "b", 1, 0, 2)])
    with pytest.raises(TournamentError, match="finish index 4"):
        observations([match("a", "b", 0, 0, 4), match("b", "a", 0, 0, 4)])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"team0": "a", "team1": "a", "winner": 0},
        {"team0": "a", "team1": "", "winner": 0},
        {"team0": "a", "team1": "b", "winner": 2},
        {"team0": "a", "team1": "b", "winner": 0, "games": (-1, 0)},
        {"team0": "a", "team1": "b", "winner": 0, "faults": ({"timeout": -1}, {})},
    ],
)
def test_a_match_score_rejects_impossible_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        MatchScore(duplicate_pair=None, finished=0, **kwargs)  # type: ignore[arg-type]


def test_twins_played_on_different_deals_are_two_single_matches_not_a_pair() -> None:
    """A voided twin replayed on a fresh deal while the other had finished: both results stand, each rated
    alone (the luck of the deal no longer cancels between them), and neither is a complete pair."""
    finished_twin = MatchScore("a", "b", 0, 4, 0, deal=0)
    replayed_twin = MatchScore("b", "a", 0, 4, 1, deal=1)
    assert observations([finished_twin, replayed_twin]) == [
        Observation("a", "b", 0.0, 1, 4),
        Observation("a", "b", 1.0, 1, 4),
    ]
    rows = {row.bot: row for row in standings([finished_twin, replayed_twin], fit_elo([finished_twin, replayed_twin]))}
    assert rows["a"].pairs == rows["b"].pairs == 0 and rows["a"].matches == rows["b"].matches == 2
    series = elo_over_time([finished_twin, replayed_twin])
    assert series["a"][-1].elo == pytest.approx(fit_elo([finished_twin, replayed_twin])["a"].elo)
    # Both twins moved to the same fresh deal together: a pair again.
    together = [MatchScore("a", "b", 0, 4, 0, deal=1), MatchScore("b", "a", 0, 4, 1, deal=1)]
    assert observations(together) == [Observation("a", "b", 0.5, 2, 4)]
