"""Elo ratings fitted by maximum likelihood over all of a league's results, with 95% intervals.

**Model.** Bradley–Terry on the Elo scale: bot i scores against bot j with expectation
`1 / (1 + 10 ** ((elo_j - elo_i) / 400))`, i.e. a logistic in `r_i - r_j` with `elo = 400 / ln 10 * r`.
Observations come from `results.observations`: a complete duplicate pair is one observation scored 1, 0.5 or
0, an incomplete pair a single match scored 1 or 0 (see that module). A pair's 0.5 enters the likelihood as a
draw does in chess (`s log p + (1 - s) log(1 - p)`).

**Order independence.** The likelihood depends on the results only through, for each pairing, the number of
observations and the total score; both are sums of multiples of 0.5, exact in floating point, and the fit walks
bots and pairings in sorted order. So the same results in any order give bit-for-bit the same ratings. Nothing
is accumulated: every call refits from scratch.

**Prior.** Each bot plays one virtual draw (`prior_draws`, default 1) against a virtual opponent. Without it a
bot that won every observation would have an infinite maximum-likelihood rating; with it, the estimate is
finite and it is the maximum of a proper posterior, whose log is strictly concave, so Newton–Raphson (with step
halving as a safeguard) converges to the unique maximum. The virtual opponent sits at a level the reference then
shifts away: the prior shrinks the spread between bots, not their level. One draw weighs as much as one
duplicate pair, so it matters for a bot with a handful of results and fades as results accumulate.

**Intervals.** From the observed Fisher information: the covariance of the ratings is the inverse of the
negative Hessian of the log-posterior at the maximum, and the reported `sd` is that of the rating *relative to
the reference* (a linear contrast of that covariance). The interval is `elo ± 1.96 sd`. The fit gives each
observation the information of one match, `p(1 - p)`: exact if the twins of a pair always agree, and up to
twice too little if they were independent, so the intervals err on the wide side (by at most √2).

**Reference.** Differences are all the data determine; the level is a stated convention, recorded in each
`Rating.reference`: by default the mean rating of the entrants (every bot in the results, plus `entrants`) is
`anchor_rating`; with `anchor`, that bot is fixed at `anchor_rating` (its sd is 0, and the others' sds are those
of their difference from it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from workers.tournament.errors import TournamentError
from workers.tournament.results import (
    MatchScore,
    Observation,
    check_scores,
    observations,
    pair_key,
    pair_observation,
    single_observation,
)

ELO_PER_LOGIT = 400.0 / math.log(10.0)
"""Elo points per unit of the logistic's argument: a 400-point gap is 10:1 odds."""

Z95 = 1.96
"""Half-width of a two-sided 95% normal interval, in standard deviations."""

DEFAULT_RATING = 1500.0

_MAX_ITERATIONS = 200
_TOLERANCE = 1e-10  # largest Newton step, in logits, at which the fit has converged


@dataclass(frozen=True, slots=True)
class Rating:
    """A bot's fitted Elo with its 95% interval `[low, high] = elo ± 1.96 sd`, relative to `reference`."""

    elo: float
    low: float
    high: float
    sd: float
    reference: str


class EloPoint(NamedTuple):
    """A bot's rating fitted on the first `finished` results of the league (in finish order)."""

    finished: int
    elo: float
    low: float
    high: float


def describe_reference(anchor: str | None, anchor_rating: float, n_bots: int) -> str:
    """The stated reference of a fit, in words, e.g. `mean of the 4 entrants = 1500`."""
    if anchor is None:
        return f"mean of the {n_bots} entrants = {anchor_rating:g}"
    return f"{anchor} = {anchor_rating:g}"


def fit_elo(
    scores: Iterable[MatchScore],
    anchor: str | None = None,
    anchor_rating: float = DEFAULT_RATING,
    *,
    entrants: Iterable[str] = (),
    prior_draws: float = 1.0,
) -> dict[str, Rating]:
    """Maximum-likelihood Elo of every bot from all the results, with 95% intervals (see the module docstring).

    Args:
        scores: the league's finished results, in any order.
        anchor: a bot fixed at `anchor_rating`; None (the default) puts the entrants' mean there instead.
        anchor_rating: the level of the reference.
        entrants: bots to rate even if they have no result yet (they get the prior alone: a wide interval).
            Under the mean reference such a bot makes the mean itself uncertain, which widens every interval;
            that is honest, and it lasts only until the bot's first result.
        prior_draws: the weight of each bot's virtual draw; must be positive.

    Returns:
        Ratings by bot key, for every bot in `scores` and `entrants`; empty if there are none.

    Raises:
        TournamentError: on contradictory results, an anchor that is not among the bots, or a bad prior.
    """
    listed = list(scores)
    bots = _bots(listed, entrants)
    _check_fit_args(bots, anchor, prior_draws)
    totals = _Totals()
    for observation in observations(listed):
        totals.add(observation, +1)
    return _fit(bots, totals, anchor, anchor_rating, prior_draws)


def elo_over_time(
    scores: Iterable[MatchScore],
    anchor: str | None = None,
    anchor_rating: float = DEFAULT_RATING,
    *,
    entrants: Iterable[str] = (),
    prior_draws: float = 1.0,
    every: int = 1,
) -> dict[str, list[EloPoint]]:
    """Each bot's Elo after every `every`-th result in finish order, each point a full refit of that prefix.

    A point is exactly `fit_elo(first `finished` results, entrants=every bot of the league)`, never an update of
    the previous point: the reference is the same throughout (the bots of all the results plus `entrants`), so
    the mean reference does not jump when a bot plays its first match. A bot's series starts at its first
    result. The last result is always a point, so the series ends at the league's current ratings.

    Raises:
        TournamentError: as `fit_elo`, or if `every` is not positive.
    """
    if every < 1:
        raise TournamentError(f"every must be at least 1, got {every}")
    listed = sorted(scores, key=lambda s: s.finished)
    check_scores(listed)
    bots = _bots(listed, entrants)
    _check_fit_args(bots, anchor, prior_draws)
    totals = _Totals()
    waiting: dict[tuple[int, int], MatchScore] = {}  # incomplete pairs (by pair and deal): their finished twin
    played: set[str] = set()
    series: dict[str, list[EloPoint]] = {}
    for n, score in enumerate(listed, start=1):
        # The same observations as `observations(listed[:n])`: an incomplete pair's single observation is
        # replaced by the pair observation when its twin finishes.
        pair = pair_key(score)
        if pair is not None and pair in waiting:
            twin = waiting.pop(pair)
            totals.add(single_observation(twin), -1)
            totals.add(pair_observation(twin, score), +1)
        else:
            totals.add(single_observation(score), +1)
            if pair is not None:
                waiting[pair] = score
        played.update((score.team0, score.team1))
        if n % every and n != len(listed):
            continue
        ratings = _fit(bots, totals, anchor, anchor_rating, prior_draws)
        for bot in sorted(played):
            rating = ratings[bot]
            series.setdefault(bot, []).append(EloPoint(n, rating.elo, rating.low, rating.high))
    return series


class _Totals:
    """The sufficient statistics of the likelihood: per pairing (first, second), observations and score sum.

    Both are sums of multiples of 0.5, so adding and removing observations in any order is exact.
    """

    def __init__(self) -> None:
        self.by_pairing: dict[tuple[str, str], tuple[float, float]] = {}

    def add(self, observation: Observation, sign: int) -> None:
        key = (observation.first, observation.second)
        count, total = self.by_pairing.get(key, (0.0, 0.0))
        count += sign
        total += sign * observation.score
        if count:
            self.by_pairing[key] = (count, total)
        else:
            del self.by_pairing[key]


def _bots(scores: Sequence[MatchScore], entrants: Iterable[str]) -> list[str]:
    names = {bot for score in scores for bot in (score.team0, score.team1)}
    names.update(entrants)
    return sorted(names)


def _check_fit_args(bots: Sequence[str], anchor: str | None, prior_draws: float) -> None:
    if not prior_draws > 0 or math.isinf(prior_draws):
        raise TournamentError(f"prior_draws must be positive and finite (it keeps ratings finite), got {prior_draws}")
    if anchor is not None and anchor not in bots:
        raise TournamentError(f"the anchor {anchor!r} is not among the rated bots ({', '.join(bots) or 'none'})")


def _fit(
    bots: Sequence[str], totals: _Totals, anchor: str | None, anchor_rating: float, prior_draws: float
) -> dict[str, Rating]:
    n = len(bots)
    if n == 0:
        return {}
    index = {bot: i for i, bot in enumerate(bots)}
    pairings = [(index[a], index[b], count, total) for (a, b), (count, total) in sorted(totals.by_pairing.items())]

    r = [0.0] * n  # logits; the virtual opponent is at 0
    value = _log_posterior(r, pairings, prior_draws)
    for _ in range(_MAX_ITERATIONS):
        gradient, information = _derivatives(r, pairings, prior_draws)
        step = _solve(_cholesky(information), gradient)
        scale = 1.0
        while True:  # step halving: Newton on a concave function only needs it far from the maximum
            candidate = [x + scale * d for x, d in zip(r, step, strict=True)]
            candidate_value = _log_posterior(candidate, pairings, prior_draws)
            if candidate_value >= value - 1e-12 * (1.0 + abs(value)) or scale < 1e-6:
                break
            scale /= 2
        r, value = candidate, candidate_value
        if max(abs(scale * d) for d in step) < _TOLERANCE:
            break
    else:
        raise AssertionError("Newton-Raphson did not converge on a strictly concave log-posterior")

    _, information = _derivatives(r, pairings, prior_draws)
    covariance = _inverse(_cholesky(information))
    # The reported rating is the contrast r_i - ref, ref = mean(r) or r_anchor; its variance is w' C w.
    if anchor is None:
        weights = [1.0 / n] * n
    else:
        weights = [0.0] * n
        weights[index[anchor]] = 1.0
    level = sum(w * x for w, x in zip(weights, r, strict=True))
    cw = [sum(covariance[i][j] * weights[j] for j in range(n)) for i in range(n)]
    wcw = sum(w * c for w, c in zip(weights, cw, strict=True))
    reference = describe_reference(anchor, anchor_rating, n)
    out: dict[str, Rating] = {}
    for bot, i in index.items():
        variance = max(covariance[i][i] - 2.0 * cw[i] + wcw, 0.0)
        sd = ELO_PER_LOGIT * math.sqrt(variance)
        if bot == anchor:
            sd = 0.0
        elo = anchor_rating + ELO_PER_LOGIT * (r[i] - level)
        if bot == anchor:
            elo = anchor_rating
        out[bot] = Rating(elo, elo - Z95 * sd, elo + Z95 * sd, sd, reference)
    return out


def _log_sigmoid(x: float) -> float:
    if x >= 0:
        return -math.log1p(math.exp(-x))
    return x - math.log1p(math.exp(x))


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _log_posterior(r: Sequence[float], pairings: Sequence[tuple[int, int, float, float]], prior: float) -> float:
    value = 0.0
    for i, j, count, total in pairings:
        d = r[i] - r[j]
        value += total * _log_sigmoid(d) + (count - total) * _log_sigmoid(-d)
    for x in r:
        value += prior * 0.5 * (_log_sigmoid(x) + _log_sigmoid(-x))
    return value


def _derivatives(
    r: Sequence[float], pairings: Sequence[tuple[int, int, float, float]], prior: float
) -> tuple[list[float], list[list[float]]]:
    """The gradient of the log-posterior and its negative Hessian (the observed information)."""
    n = len(r)
    gradient = [0.0] * n
    information = [[0.0] * n for _ in range(n)]
    for i, j, count, total in pairings:
        p = _sigmoid(r[i] - r[j])
        g = total - count * p
        h = count * p * (1.0 - p)
        gradient[i] += g
        gradient[j] -= g
        information[i][i] += h
        information[j][j] += h
        information[i][j] -= h
        information[j][i] -= h
    for i, x in enumerate(r):
        p = _sigmoid(x)
        gradient[i] += prior * (0.5 - p)
        information[i][i] += prior * p * (1.0 - p)
    return gradient, information


def _cholesky(a: Sequence[Sequence[float]]) -> list[list[float]]:
    """Lower-triangular L with L L' = a, for a symmetric positive definite a (the prior guarantees it)."""
    n = len(a)
    lower = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            s = a[i][j] - sum(lower[i][k] * lower[j][k] for k in range(j))
            if i == j:
                assert s > 0, "the information matrix must be positive definite"
                lower[i][i] = math.sqrt(s)
            else:
                lower[i][j] = s / lower[j][j]
    return lower


def _solve(lower: Sequence[Sequence[float]], b: Sequence[float]) -> list[float]:
    """x with L L' x = b."""
    n = len(b)
    y = [0.0] * n
    for i in range(n):
        y[i] = (b[i] - sum(lower[i][k] * y[k] for k in range(i))) / lower[i][i]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (y[i] - sum(lower[k][i] * x[k] for k in range(i + 1, n))) / lower[i][i]
    return x


def _inverse(lower: Sequence[Sequence[float]]) -> list[list[float]]:
    n = len(lower)
    columns = [_solve(lower, [1.0 if k == j else 0.0 for k in range(n)]) for j in range(n)]
    return [[columns[j][i] for j in range(n)] for i in range(n)]
