"""Pure tournament logic: round-robin schedules of duplicate pairs, results, Elo ratings and standings.

Nothing here does I/O (except `plot_elo_over_time`, which writes the PNG it is asked for), touches the database or
knows Celery: the league runner stores `MatchPlan`s as rows, turns finished rows into `MatchScore`s, and asks
this package for ratings and standings, recomputed from the results every time (results are the source
of truth).
"""

from __future__ import annotations

from workers.tournament.deals import commitment, deal_key, derived_seed, new_secret, parse_secret
from workers.tournament.errors import TournamentError
from workers.tournament.ratings import EloPoint, Rating, elo_over_time, fit_elo
from workers.tournament.results import MatchScore, Observation, observations
from workers.tournament.schedule import MAX_MATCHES_PER_PAIRING, MatchPlan, duplicate_seed, schedule_round_robin
from workers.tournament.standings import StandingRow, plot_elo_over_time, standings

__all__ = [
    "MAX_MATCHES_PER_PAIRING",
    "EloPoint",
    "MatchPlan",
    "MatchScore",
    "Observation",
    "Rating",
    "StandingRow",
    "TournamentError",
    "commitment",
    "deal_key",
    "derived_seed",
    "duplicate_seed",
    "elo_over_time",
    "fit_elo",
    "new_secret",
    "observations",
    "parse_secret",
    "plot_elo_over_time",
    "schedule_round_robin",
    "standings",
]
