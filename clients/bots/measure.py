"""Measure one bot against another with duplicate deals on the local table, with 95% intervals.

`python -m clients.bots.measure --pairs 200` plays RulesBot against RandomBot on 200 seeds, each seed twice with
the partnerships swapped (`play_duplicate`), and prints the match and game win rates of the first bot.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from clients.bots.random_bot import RandomBot
from clients.bots.rules_bot import RulesBot
from clients.sdk.bot import Bot
from clients.sdk.local import DuplicateOutcome, play_duplicate
from referee.engine.rules import Rules

Z95 = 1.959963984540054


@dataclass(frozen=True, slots=True)
class Rate:
    """A win rate and its 95% interval."""

    won: int
    played: int
    low: float
    high: float

    @property
    def rate(self) -> float:
        return self.won / self.played if self.played else 0.0

    def __str__(self) -> str:
        return f"{self.rate:.3f} [{self.low:.3f}, {self.high:.3f}] ({self.won}/{self.played})"


@dataclass(frozen=True, slots=True)
class Measurement:
    """The first bot's results over duplicate pairs."""

    pairs: int
    matches: Rate
    games: Rate
    faults: tuple[int, int]
    """Faults charged to the first bot's and to the second bot's team over all matches."""


def clustered_rate(won: Sequence[int], played: Sequence[int]) -> Rate:
    """A ratio of wins with a 95% interval that treats each duplicate pair as one sample.

    The two matches of a pair share their deals, so they are not independent: the standard error comes from
    the spread between pairs (the ratio estimator's linearisation), not from a binomial count.
    """
    n = len(won)
    total_won, total_played = sum(won), sum(played)
    rate = total_won / total_played if total_played else 0.0
    if n < 2 or not total_played:
        return Rate(total_won, total_played, 0.0, 1.0)
    mean_played = total_played / n
    residuals = [w - rate * p for w, p in zip(won, played, strict=True)]
    error = math.sqrt(sum(r * r for r in residuals) / (n * (n - 1))) / mean_played
    return Rate(total_won, total_played, max(0.0, rate - Z95 * error), min(1.0, rate + Z95 * error))


def seeded(make: Callable[[int], Bot], start: int) -> Callable[[], Bot]:
    """A factory that gives each new bot the next seed from `start`, so a measurement replays exactly."""
    seeds = itertools.count(start)
    return lambda: make(next(seeds))


def measure(
    bot_a: Callable[[int], Bot],
    bot_b: Callable[[int], Bot],
    *,
    pairs: int,
    first_seed: int = 0,
    rules: Rules | None = None,
) -> Measurement:
    """Play `pairs` duplicate pairs on seeds `first_seed..` and collect the first bot's results."""
    outcomes: list[DuplicateOutcome] = []
    for seed in range(first_seed, first_seed + pairs):
        outcomes.append(play_duplicate(seeded(bot_a, seed * 8), seeded(bot_b, seed * 8 + 4), seed, rules))
    matches = clustered_rate([pair.a_matches_won for pair in outcomes], [2] * len(outcomes))
    games = clustered_rate([pair.a_games[0] for pair in outcomes], [pair.a_games[1] for pair in outcomes])
    faults_a = sum(pair.a_as_team_0.faults[0] + pair.a_as_team_1.faults[1] for pair in outcomes)
    faults_b = sum(pair.a_as_team_0.faults[1] + pair.a_as_team_1.faults[0] for pair in outcomes)
    return Measurement(pairs, matches, games, (faults_a, faults_b))


def main(argv: Sequence[str] | None = None) -> None:
    """Print RulesBot's win rates against RandomBot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=200, help="duplicate pairs to play (two matches each)")
    parser.add_argument("--seed", type=int, default=0, help="the first match seed")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    result = measure(lambda seed: RulesBot(seed), lambda seed: RandomBot(seed), pairs=args.pairs, first_seed=args.seed)
    elapsed = time.perf_counter() - started
    print(f"RulesBot vs RandomBot, {result.pairs} duplicate pairs ({2 * result.pairs} matches), default rules")
    print(f"match win rate: {result.matches}")
    print(f"game win rate:  {result.games}")
    print(f"faults (rules, random): {result.faults}")
    print(f"{elapsed:.1f} s")


if __name__ == "__main__":
    main()
