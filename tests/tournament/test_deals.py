"""Match seeds from a league's secret: pinned derivation, commitment, and nothing a seat sees that derives a seed."""

from __future__ import annotations

import hashlib
import hmac
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from referee.engine.chance import first_dealer_of
from referee.engine.rules import Rules
from referee.engine.selfplay import play_random_match
from workers.tournament.deals import (
    commitment,
    deal_key,
    derived_seed,
    first_dealer_target,
    match_seed,
    parse_secret,
    seed_message,
)
from workers.tournament.errors import TournamentError
from workers.tournament.schedule import schedule_round_robin

SECRET = bytes(range(32))


def test_the_seed_is_the_first_hmac_candidate_with_the_planned_first_dealer() -> None:
    """The derivation that docs/leagues.md publishes, spelled out independently: anyone can re-check a league."""
    for deal in (0, 1):
        candidates = []
        for attempt in range(64):
            message = f"mus-arena/match-seed/v1\nspring\npair:3\ndeal {deal}\nattempt {attempt}".encode()
            digest = hmac.new(SECRET, message, hashlib.sha256).digest()
            candidates.append(int.from_bytes(digest[:8], "big") >> 1)
        target = first_dealer_target(3, 3)
        expected = next(seed for seed in candidates if first_dealer_of(seed) == target)
        assert derived_seed(SECRET, league="spring", duplicate_pair=3, index=6, deal=deal, pairings=3) == expected
        assert 0 <= expected < 2**63


def test_the_commitment_is_the_sha256_of_the_secret_bytes() -> None:
    assert commitment(SECRET) == hashlib.sha256(SECRET).hexdigest()
    assert parse_secret(SECRET.hex()) == SECRET
    for bad in ("zz" * 32, SECRET.hex()[:-2]):
        with pytest.raises(TournamentError):
            parse_secret(bad)


def test_identities_and_deals_give_different_seeds_and_twins_the_same() -> None:
    seeds = {
        derived_seed(SECRET, league=league, duplicate_pair=pair, index=index, deal=deal, pairings=3)
        for league in ("spring", "summer")
        for pair, index in ((None, 0), (None, 1), (0, 0), (1, 2))
        for deal in (0, 1, 2)
    }
    assert len(seeds) == 2 * 4 * 3
    twin_a = derived_seed(SECRET, league="spring", duplicate_pair=5, index=10, deal=0, pairings=3)
    twin_b = derived_seed(SECRET, league="spring", duplicate_pair=5, index=11, deal=0, pairings=3)
    assert twin_a == twin_b
    assert deal_key(duplicate_pair=5, index=10) == "pair:5" and deal_key(duplicate_pair=None, index=7) == "match:7"


def test_the_first_dealers_are_the_schedules_so_the_mano_stays_balanced() -> None:
    names = ["a", "b", "c", "d"]
    for plan in schedule_round_robin(names, 16):
        assert plan.first_dealer == first_dealer_target(plan.duplicate_pair, 6)
        seed = derived_seed(
            SECRET, league="x", duplicate_pair=plan.duplicate_pair, index=plan.index, deal=0, pairings=6
        )
        assert first_dealer_of(seed) == plan.first_dealer


def test_a_newline_cannot_forge_another_identity() -> None:
    with pytest.raises(TournamentError, match="newline"):
        seed_message("spring\npair:1", "pair:2", 0, 0)
    with pytest.raises(TournamentError):
        match_seed(b"short", league="spring", key="pair:0", deal=0, first_dealer=0)


@settings(max_examples=8, deadline=None)
@given(secret=st.binary(min_size=32, max_size=32), index=st.integers(0, 10_000), deal=st.integers(0, 3))
def test_no_seat_view_contains_what_derives_its_seed(secret: bytes, index: int, deal: int) -> None:
    """What a seat sees (its own events: its cards, the others' actions, scores) holds neither the seed nor the
    secret nor the HMAC digest it comes from; the seed is the HMAC of a 256-bit secret, not a small number that a
    seat could search for by dealing candidates and comparing them with its cards (the attack on 31-bit seeds)."""
    seed = derived_seed(secret, league="spring", duplicate_pair=None, index=index, deal=deal, pairings=1)
    match = play_random_match(Rules.from_options({"target_score": 10}), seed)
    numbers_in_views: set[int] = set()
    for seat in range(4):
        text = json.dumps([event.to_json() for event in match.events_for(seat)])
        assert str(seed) not in text and secret.hex() not in text and commitment(secret) not in text
        numbers_in_views.update(int(number) for number in re.findall(r"\d+", text))
    assert seed not in numbers_in_views
    assert secret not in json.dumps([event.to_json() for event in match.events]).encode()
