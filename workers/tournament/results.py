"""Finished match results as plain values, and how duplicate pairs turn them into observations.

**A pair is one observation.** The two matches of a duplicate pair are played on the same deals, so they are
not two independent measurements of who is stronger: the cards that won the first are there again in the
second, for the other side. A complete pair between A and B is therefore scored as one observation with
score 1 (A won both), 0.5 (one each) or 0 (B won both).

**An incomplete pair** (one twin finished, the other not yet, or voided and rescheduled) counts as a single
match observation, score 1 or 0, until its twin finishes; the pair observation then replaces it. So a league
that is running or was stopped part way has a rating from everything it has played, and the weight of a pair
never exceeds one observation. A match with `duplicate_pair=None` (not part of a pair) is always a single match
observation.

**A broken pair.** A voided match is replayed on a fresh deal (its `deal` number goes up), and so is its twin
if the twin has not been played yet. If the twin had already finished (or was being played), its result stands,
and the two matches no longer share a deal: twins count as a pair only when they were played on the same deal,
so each is then rated as a single match observation and neither counts as a complete pair.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from workers.tournament.errors import TournamentError


def _no_faults() -> tuple[Mapping[str, int], Mapping[str, int]]:
    return ({}, {})


@dataclass(frozen=True, slots=True)
class MatchScore:
    """What the tournament logic needs of one finished match.

    `team0` is the bot that held seats 0 and 2, `team1` seats 1 and 3; `winner` is the winning team (0 or 1),
    a forfeit included. `finished` orders the league's results by when they finished (unique in a league): it
    is only used by `elo_over_time`, never by the fit. `games` and `points` are per team (points: the tanteo
    scored over the match's games); `faults` per team, by cause (the rules' faults: `timeout`, `illegal_action`,
    `limit`); `incidents` per team, by cause (what happened to its seats' connections or processes: `crash`,
    `disconnect`, `protocol_error`, `absent`).
    `deal` is how many times the match was moved to a fresh deal (0 for most).
    The mappings make the value unhashable; it is compared, never hashed.
    """

    team0: str
    team1: str
    winner: int
    duplicate_pair: int | None
    finished: int
    games: tuple[int, int] = (0, 0)
    points: tuple[int, int] = (0, 0)
    faults: tuple[Mapping[str, int], Mapping[str, int]] = field(default_factory=_no_faults)
    incidents: tuple[Mapping[str, int], Mapping[str, int]] = field(default_factory=_no_faults)
    deal: int = 0
    """The match's deal number: twins are a pair only when played on the same deal (see the module docstring)."""

    def __post_init__(self) -> None:
        if not self.team0 or not self.team1 or self.team0 == self.team1:
            raise TournamentError(f"a match needs two different bots, got {self.team0!r} and {self.team1!r}")
        if self.winner not in (0, 1):
            raise TournamentError(f"winner must be team 0 or 1, got {self.winner!r}")
        if min(*self.games, *self.points) < 0:
            raise TournamentError(f"games and points cannot be negative: {self.games}, {self.points}")
        for team_faults in self.faults:
            if any(n < 0 for n in team_faults.values()):
                raise TournamentError(f"fault counts cannot be negative: {self.faults}")
        for team_incidents in self.incidents:
            if any(n < 0 for n in team_incidents.values()):
                raise TournamentError(f"incident counts cannot be negative: {self.incidents}")

    def team_of(self, bot: str) -> int:
        """The team the bot played as in this match."""
        if bot == self.team0:
            return 0
        if bot == self.team1:
            return 1
        raise TournamentError(f"{bot!r} did not play in this match")

    @property
    def winner_bot(self) -> str:
        return self.team0 if self.winner == 0 else self.team1


@dataclass(frozen=True, slots=True)
class Observation:
    """One rating observation: `first` scored `score` against `second` (1 win, 0.5 split pair, 0 loss).

    `first` is the alphabetically smaller key, so the same results always give the same observations.
    `matches` is 2 for a complete duplicate pair, 1 for a single match (incomplete pair or no pair).
    """

    first: str
    second: str
    score: float
    matches: int
    duplicate_pair: int | None

    @property
    def complete_pair(self) -> bool:
        return self.matches == 2


def single_observation(score: MatchScore) -> Observation:
    """A match counted alone: 1 or 0 from the alphabetically first bot's side."""
    first, second = sorted((score.team0, score.team1))
    return Observation(first, second, 1.0 if score.winner_bot == first else 0.0, 1, score.duplicate_pair)


def pair_observation(a: MatchScore, b: MatchScore) -> Observation:
    """Two twins counted as one observation: the first bot's share of the two wins (1, 0.5 or 0)."""
    check_twins(a, b)
    first, second = sorted((a.team0, a.team1))
    wins = (a.winner_bot == first) + (b.winner_bot == first)
    return Observation(first, second, wins / 2, 2, a.duplicate_pair)


def pair_key(score: MatchScore) -> tuple[int, int] | None:
    """What groups twins: their duplicate pair and the deal they were played on; None for a match on its own."""
    return None if score.duplicate_pair is None else (score.duplicate_pair, score.deal)


def check_twins(a: MatchScore, b: MatchScore) -> None:
    """The two matches of a pair are the same two bots with the partnerships swapped, on the same deal."""
    if a.duplicate_pair != b.duplicate_pair or a.duplicate_pair is None or a.deal != b.deal:
        raise TournamentError(f"matches of pairs {a.duplicate_pair} and {b.duplicate_pair} are not twins")
    if (a.team0, a.team1) != (b.team1, b.team0):
        raise TournamentError(
            f"duplicate pair {a.duplicate_pair} must be the same two bots with the partnerships swapped, got "
            f"{a.team0} v {a.team1} and {b.team0} v {b.team1}"
        )


def check_scores(scores: Sequence[MatchScore]) -> None:
    """A league's results: unique finish indexes, at most two matches per pair, twins that match."""
    seen: set[int] = set()
    for score in scores:
        if score.finished in seen:
            raise TournamentError(f"two results share the finish index {score.finished}")
        seen.add(score.finished)
    for (pair, deal), matches in _by_pair(scores).items():
        if len(matches) > 2:
            raise TournamentError(
                f"duplicate pair {pair} has {len(matches)} results on deal {deal}; a pair is two matches"
            )
        if len(matches) == 2:
            check_twins(*matches)


def observations(scores: Iterable[MatchScore]) -> list[Observation]:
    """The rating observations of a set of results (see the module docstring), in a canonical order.

    Raises:
        TournamentError: on results that contradict each other (see `check_scores`).
    """
    listed = list(scores)
    check_scores(listed)
    out = [single_observation(score) for score in listed if score.duplicate_pair is None]
    for matches in _by_pair(listed).values():
        if len(matches) == 1:
            out.append(single_observation(matches[0]))
        else:
            out.append(pair_observation(*matches))
    out.sort(key=lambda o: (o.first, o.second, -1 if o.duplicate_pair is None else o.duplicate_pair, o.score))
    return out


def _by_pair(scores: Iterable[MatchScore]) -> dict[tuple[int, int], list[MatchScore]]:
    grouped: dict[tuple[int, int], list[MatchScore]] = defaultdict(list)
    for score in scores:
        key = pair_key(score)
        if key is not None:
            grouped[key].append(score)
    for matches in grouped.values():
        matches.sort(key=lambda s: s.finished)
    return dict(grouped)
