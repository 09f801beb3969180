"""Round-robin schedules of duplicate pairs (rules §4.1), with the first dealer balanced over the seats.

A league is expanded into matches up front (progress, resume and standings are then queries), so
the schedule is a pure function of the entrants and the number of matches per pairing. (Its `seed`s are public
placeholders for tests and benchmarks: a league's real seeds come from its secret, `workers/tournament/deals.py`.)

**Duplicate pairs.** Every pairing {A, B} plays `matches_per_pairing / 2` duplicate pairs. A pair is two
matches with the same seed and the partnerships swapped: A holds seats 0 and 2 in one and seats 1 and 3 in the
other. The engine derives every hand's deck and the first dealer from the seed and the hand number alone
(rules §4.1), so both bots are dealt the same cards from the same seats and the luck of the deal cancels
out of the pair.

**Seed derivation.** The seed of round `r` of pairing `p` (pairings numbered in `combinations(entrants, 2)`
order, rounds from 0) is the first of the candidates

    int.from_bytes(sha256(f"mus/league/{league_seed}/{p}/{r}/{attempt}").digest()[:8], "big") >> 1

for attempt = 0, 1, 2, ... (a 63-bit non-negative integer, so it fits a signed 64-bit database column) whose
`first_dealer_of(seed)` is `(p + r) % 4`. This rejection sampling takes four candidates on average.

**Mano balance.** Hand h's mano is seat `(first_dealer + 1 + h) % 4` (rules §3). Within a pair each bot
sits at every seat's team exactly once, so each bot holds the first hand's mano in exactly one of the twins.
Across a pairing's pairs the first dealer cycles over the four seats, so every seat (and, with the swap, each
bot at every seat) opens as mano equally often: exactly when the number of pairs is a multiple of 4, to within
one pair otherwise. The offset `p` staggers the cycle between pairings so that round 0 of the league is itself
spread over the four seats.

**Order.** Matches are listed round by round (round 0 of every pairing, then round 1, ...), the twins of a pair
next to each other. A league that is stopped part way has then played every pairing about equally often, with
its pairs complete and its first dealers spread. Which twin comes first alternates with the round.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations, count

from referee.engine.chance import first_dealer_of
from workers.tournament.errors import TournamentError

MAX_MATCHES_PER_PAIRING = 1000
"""More would take weeks to play and only make a typo expensive: creating the league writes every match row."""


@dataclass(frozen=True, slots=True)
class MatchPlan:
    """One scheduled match: its position in the league, who plays which partnership, its seed and its pair.

    `team0` holds seats 0 and 2, `team1` seats 1 and 3. The two matches of a duplicate pair share
    `duplicate_pair` and `seed`, with the teams swapped. `round` is the pair's round within its pairing.

    `seed` is only a public, reproducible placeholder (tests and benchmarks play it directly): a league's real
    seeds are derived from its secret when it is created (`workers/tournament/deals.py`), with the same first
    dealer.
    """

    index: int
    team0: str
    team1: str
    seed: int
    duplicate_pair: int
    round: int
    first_dealer: int = 0
    """The first dealer of the pair's deals, `(pairing + round) % 4`: `deals.first_dealer_target` of the pair."""


def duplicate_seed(league_seed: int, pairing: int, round: int) -> int:
    """The seed of a duplicate pair: the first hash candidate whose first dealer is `(pairing + round) % 4`.

    See the module docstring for the derivation; it is part of the league's reproducibility contract, so a change
    here changes every league's deals.
    """
    target = (pairing + round) % 4
    for attempt in count():
        digest = hashlib.sha256(f"mus/league/{league_seed}/{pairing}/{round}/{attempt}".encode()).digest()
        seed = int.from_bytes(digest[:8], "big") >> 1
        if first_dealer_of(seed) == target:
            return seed
    raise AssertionError("unreachable: count() never ends")


def schedule_round_robin(entrants: Sequence[str], matches_per_pairing: int, league_seed: int = 0) -> list[MatchPlan]:
    """Every unordered pairing of the entrants, `matches_per_pairing` matches each, as duplicate pairs.

    Args:
        entrants: the bots' keys, at least two, all different; their order fixes the pairing numbers (and so
            the seeds), so pass them in a stable order (e.g. as stored with the league).
        matches_per_pairing: even, from 2 (a duplicate pair is two matches) to `MAX_MATCHES_PER_PAIRING`.
        league_seed: the root of the plan's placeholder seeds (see `MatchPlan`); a league's deals do not use it.

    Raises:
        TournamentError: (a `ValueError`) on fewer than two entrants, repeated or empty keys, or an odd or too
            small `matches_per_pairing`.
    """
    names = list(entrants)
    if len(names) < 2:
        raise TournamentError(f"a round robin needs at least 2 entrants, got {len(names)}")
    for name in names:
        if not isinstance(name, str) or not name:
            raise TournamentError(f"an entrant must be a non-empty bot key, got {name!r}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise TournamentError(f"each bot may enter once; repeated: {', '.join(repeated)}")
    if isinstance(matches_per_pairing, bool) or not isinstance(matches_per_pairing, int):
        raise TournamentError(f"matches_per_pairing must be an integer, got {matches_per_pairing!r}")
    if matches_per_pairing < 2 or matches_per_pairing % 2:
        raise TournamentError(
            f"matches_per_pairing must be even and at least 2 (each duplicate pair is two matches with the "
            f"partnerships swapped), got {matches_per_pairing}"
        )
    if matches_per_pairing > MAX_MATCHES_PER_PAIRING:
        raise TournamentError(
            f"matches_per_pairing must be at most {MAX_MATCHES_PER_PAIRING}, got {matches_per_pairing}"
        )
    if isinstance(league_seed, bool) or not isinstance(league_seed, int):
        raise TournamentError(f"league_seed must be an integer, got {league_seed!r}")

    pairings = list(combinations(names, 2))
    plans: list[MatchPlan] = []
    for round_ in range(matches_per_pairing // 2):
        for pairing, (a, b) in enumerate(pairings):
            pair_id = round_ * len(pairings) + pairing
            seed = duplicate_seed(league_seed, pairing, round_)
            first, second = (a, b) if round_ % 2 == 0 else (b, a)
            dealer = (pairing + round_) % 4
            plans.append(MatchPlan(len(plans), first, second, seed, pair_id, round_, dealer))
            plans.append(MatchPlan(len(plans), second, first, seed, pair_id, round_, dealer))
    return plans
