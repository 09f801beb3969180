"""Synthetic leagues for the rating tests: bots of known Elo playing a scheduled round robin."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping

from workers.tournament.results import MatchScore
from workers.tournament.schedule import schedule_round_robin


def expected_score(elo: float, other: float) -> float:
    return 1.0 / (1.0 + math.pow(10.0, (other - elo) / 400.0))


def simulate_league(true_elo: Mapping[str, float], matches_per_pairing: int, seed: int) -> list[MatchScore]:
    """Every scheduled match won by team 0 with the Elo model's probability (twins drawn independently)."""
    rng = random.Random(seed)
    scores = []
    for plan in schedule_round_robin(sorted(true_elo), matches_per_pairing, seed):
        p = expected_score(true_elo[plan.team0], true_elo[plan.team1])
        winner = 0 if rng.random() < p else 1
        scores.append(MatchScore(plan.team0, plan.team1, winner, plan.duplicate_pair, plan.index))
    return scores


def repeated_pairs(a: str, b: str, pair_scores: list[float], copies: int, start: int = 0) -> list[MatchScore]:
    """Duplicate pairs between a and b with the given scores for a (1, 0.5, 0), repeated `copies` times."""
    scores: list[MatchScore] = []
    for score in pair_scores * copies:
        pair = start + len(scores) // 2
        first = 0 if score >= 0.5 else 1  # a (team 0) wins the first twin unless it lost both
        second = 1 if score == 1.0 else 0  # in the second twin a is team 1
        scores.append(MatchScore(a, b, first, pair, start + len(scores)))
        scores.append(MatchScore(b, a, second, pair, start + len(scores)))
    return scores
