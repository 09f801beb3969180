"""Self-play with random legal actions: the interim demo, the benchmark and the property tests use it."""

from __future__ import annotations

import random
from collections.abc import Sequence

from referee.engine.actions import Action
from referee.engine.chance import Setup
from referee.engine.match import Match
from referee.engine.rules import Rules


def random_action(rng: random.Random, legal: Sequence[Action]) -> Action:
    """A random legal action: first a kind uniformly, then one of its amounts or card sets.

    Choosing the kind first keeps bets of every size possible without letting the many bet amounts drown
    out paso, quiero and the rest, so random matches look like Mus and visit every lance outcome.
    """
    kinds: dict[object, list[Action]] = {}
    for action in legal:
        kinds.setdefault(action.kind, []).append(action)
    options = list(kinds.values())
    return rng.choice(rng.choice(options))


def play_random_match(rules: Rules, seed: int, policy_seed: int | None = None, setup: Setup | None = None) -> Match:
    """Play a whole match with `random_action` for every awaited seat, in speaking order."""
    match = Match(rules, seed, setup)
    rng = random.Random(seed if policy_seed is None else policy_seed)
    while not match.is_over:
        seat = match.awaited()[0]
        match.apply(seat, random_action(rng, match.legal_actions(seat)))
    return match
