"""The league table behind `mus league standings`, and the Elo-over-time plot behind `--plot FILE.png`.

Standings are recomputed from the results and the ratings fitted on them (never kept as running totals), so a
resumed, re-run or re-fitted league always shows the same table for the same results.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from workers.tournament.errors import TournamentError
from workers.tournament.ratings import EloPoint, Rating
from workers.tournament.results import MatchScore, observations


@dataclass(frozen=True, slots=True)
class StandingRow:
    """One bot's line of the table.

    `pair_score` sums the bot's complete duplicate pairs (1 both won, 0.5 split, 0 both lost) over `pairs`
    complete pairs: the luck of the deal cancels out of it, so it is the fairest raw count of the table.
    `faults` counts the bot's faults by cause over all its matches (rules §13: they count toward a forfeit);
    `incidents` counts, apart, what happened to its seats' connections and processes (crash, disconnect, ...).
    """

    rank: int
    bot: str
    elo: float
    elo_low: float
    elo_high: float
    matches: int
    wins: int
    losses: int
    games_won: int
    games_lost: int
    points_for: int
    points_against: int
    pair_score: float
    pairs: int
    faults: Mapping[str, int] = field(default_factory=dict)
    incidents: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (plain str, int, float and dict values), the shape of `--json` output rows."""
        return {
            "rank": self.rank,
            "bot": self.bot,
            "elo": self.elo,
            "elo_low": self.elo_low,
            "elo_high": self.elo_high,
            "matches": self.matches,
            "wins": self.wins,
            "losses": self.losses,
            "games_won": self.games_won,
            "games_lost": self.games_lost,
            "points_for": self.points_for,
            "points_against": self.points_against,
            "pair_score": self.pair_score,
            "pairs": self.pairs,
            "faults": dict(sorted(self.faults.items())),
            "incidents": dict(sorted(self.incidents.items())),
        }


@dataclass
class _Tally:
    matches: int = 0
    wins: int = 0
    games_won: int = 0
    games_lost: int = 0
    points_for: int = 0
    points_against: int = 0
    pair_score: float = 0.0
    pairs: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    incidents: Counter[str] = field(default_factory=Counter)


def standings(results: Iterable[MatchScore], ratings: Mapping[str, Rating]) -> list[StandingRow]:
    """The table: one row per bot in the results or the ratings, ranked by Elo (best first).

    Bots with equal Elo (to a millionth of a point) share a rank, the next rank skipping as in "1, 2, 2, 4";
    rows of equal Elo are listed by pair score, then wins, then key.

    Raises:
        TournamentError: if a bot of the results has no rating, or the results contradict each other.
    """
    listed = list(results)
    tallies: dict[str, _Tally] = {bot: _Tally() for bot in ratings}
    for score in listed:
        for team, bot in enumerate((score.team0, score.team1)):
            if bot not in ratings:
                raise TournamentError(f"{bot!r} has results but no rating: fit the ratings on the same results")
            tally = tallies[bot]
            tally.matches += 1
            tally.wins += score.winner == team
            tally.games_won += score.games[team]
            tally.games_lost += score.games[1 - team]
            tally.points_for += score.points[team]
            tally.points_against += score.points[1 - team]
            tally.faults.update({cause: n for cause, n in score.faults[team].items() if n})
            tally.incidents.update({cause: n for cause, n in score.incidents[team].items() if n})
    for observation in observations(listed):
        if observation.complete_pair:
            tallies[observation.first].pair_score += observation.score
            tallies[observation.second].pair_score += 1.0 - observation.score
            tallies[observation.first].pairs += 1
            tallies[observation.second].pairs += 1

    order = sorted(tallies, key=lambda bot: (-ratings[bot].elo, -tallies[bot].pair_score, -tallies[bot].wins, bot))
    rows: list[StandingRow] = []
    for position, bot in enumerate(order, start=1):
        rating, tally = ratings[bot], tallies[bot]
        rank = position
        if rows and round(rows[-1].elo, 6) == round(rating.elo, 6):
            rank = rows[-1].rank
        rows.append(
            StandingRow(
                rank=rank,
                bot=bot,
                elo=rating.elo,
                elo_low=rating.low,
                elo_high=rating.high,
                matches=tally.matches,
                wins=tally.wins,
                losses=tally.matches - tally.wins,
                games_won=tally.games_won,
                games_lost=tally.games_lost,
                points_for=tally.points_for,
                points_against=tally.points_against,
                pair_score=tally.pair_score,
                pairs=tally.pairs,
                faults=dict(sorted(tally.faults.items())),
                incidents=dict(sorted(tally.incidents.items())),
            )
        )
    return rows


def plot_elo_over_time(
    series: Mapping[str, list[EloPoint]],
    path: str | os.PathLike[str],
    *,
    title: str = "Elo over time (95% intervals)",
) -> None:
    """Write a PNG: one line per bot (its Elo after each finished result) with its 95% band shaded.

    Drawn on a bare `Figure` with the Agg canvas, so it needs no display and leaves pyplot's global state alone
    (safe in a worker or a CLI process). The legend lists bots best first by their latest Elo.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9.0, 5.0), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    drawn = [(bot, points) for bot, points in series.items() if points]
    drawn.sort(key=lambda item: (-item[1][-1].elo, item[0]))
    for bot, points in drawn:
        xs = [p.finished for p in points]
        (line,) = axes.plot(
            xs, [p.elo for p in points], label=bot, marker="o" if len(points) == 1 else None, linewidth=1.5
        )
        axes.fill_between(xs, [p.low for p in points], [p.high for p in points], color=line.get_color(), alpha=0.15)
    if drawn:
        axes.legend(loc="best", fontsize="small")
    else:
        axes.text(0.5, 0.5, "no results yet", ha="center", va="center", transform=axes.transAxes)
    axes.set_xlabel("finished matches")
    axes.set_ylabel("Elo")
    axes.set_title(title)
    axes.grid(True, alpha=0.3)
    figure.savefig(os.fspath(path), format="png", dpi=100)
