"""Engine benchmark: decisions and matches per second of random legal play, lance comparisons per second."""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from referee.engine.cards import FULL_DECK, DeckMode
from referee.engine.hands import Lance, best_seat, evaluate
from referee.engine.match import Match
from referee.engine.rules import Rules
from referee.engine.selfplay import random_action


def bench_decisions(matches: int, rules: Rules) -> dict[str, Any]:
    """Play `matches` random matches; time the engine's part of each decision (legal_actions + apply)."""
    per_decision_ns: list[int] = []
    rng = random.Random(12345)
    clock = time.perf_counter_ns
    engine_ns = 0
    start = clock()
    for seed in range(matches):
        match = Match(rules, seed)
        while not match.is_over:
            t0 = clock()
            seat = match.awaited()[0]
            legal = match.legal_actions(seat)
            t1 = clock()
            action = random_action(rng, legal)
            t2 = clock()
            match.apply(seat, action)
            t3 = clock()
            spent = (t1 - t0) + (t3 - t2)
            per_decision_ns.append(spent)
            engine_ns += spent
    wall = (clock() - start) / 1e9
    decisions = len(per_decision_ns)
    ordered = sorted(per_decision_ns)
    return {
        "matches": matches,
        "decisions": decisions,
        "decisions_per_s": decisions / (engine_ns / 1e9),
        "us_per_decision_median": statistics.median(per_decision_ns) / 1000,
        "us_per_decision_p99": ordered[int(0.99 * (decisions - 1))] / 1000,
        "matches_per_s": matches / wall,
        "decisions_per_match": decisions / matches,
    }


def self_play_rate(rules: Rules, seconds: float, seed: int = 1) -> dict[str, float]:
    """Random legal matches played back to back for about `seconds`: matches per second, the engine's ceiling
    for a league of instant bots on one core (`mus bench league` compares its own rate with it)."""
    rng = random.Random(seed)
    played, decisions, start = 0, 0, time.perf_counter()
    while True:
        match = Match(rules, seed + played)
        while not match.is_over:
            seat = match.awaited()[0]
            match.apply(seat, random_action(rng, match.legal_actions(seat)))
            decisions += 1
        played += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return {
                "matches": played,
                "seconds": elapsed,
                "matches_per_s": played / elapsed,
                "decisions_per_match": decisions / played,
            }


def bench_comparisons(rounds: int) -> dict[str, Any]:
    """Evaluate random deals and decide every lance on cards: lance comparisons per second."""
    rng = random.Random(7)
    deals = []
    for _ in range(256):
        deck = list(FULL_DECK)
        rng.shuffle(deck)
        deals.append([deck[i * 4 : i * 4 + 4] for i in range(4)])  # lists: evaluated afresh, not from the cache
    lances = (Lance.GRANDE, Lance.CHICA, Lance.PARES, Lance.JUEGO)
    start = time.perf_counter()
    comparisons = 0
    for index in range(rounds):
        hands = deals[index % len(deals)]
        facts = [evaluate(hand, DeckMode.OCHO_REYES) for hand in hands]
        for lance in lances:
            best_seat(facts, lance, index % 4)
            comparisons += 1
    elapsed = time.perf_counter() - start
    return {"lance_comparisons_per_s": comparisons / elapsed}


def run(matches: int = 300, comparison_rounds: int = 50000) -> dict[str, Any]:
    """The engine benchmark with default rules; one JSON-ready object."""
    result = bench_decisions(matches, Rules())
    result.update(bench_comparisons(comparison_rounds))
    result["target_us_per_decision"] = 40
    return result
