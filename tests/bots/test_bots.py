"""The example bots: always legal under every rules variant, and RulesBot clearly beats RandomBot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from clients.bots.measure import measure
from clients.bots.random_bot import RandomBot
from clients.bots.rules_bot import RulesBot
from clients.sdk.bot import Bot
from clients.sdk.local import LocalTable
from referee.engine.events import EventKind
from referee.engine.rules import Rules
from tests.support.events import fields

REPO = Path(__file__).resolve().parents[2]

VARIANTS = [
    {},
    {"deck_mode": "4_reyes", "real_31": "7-7-7-figure"},
    {"real_31": "7-7-7-sota", "sena_la_bonita": True, "sena_truth": "at_least"},
    {"target_score": 30, "games_to_win_vaca": 3, "vacas_to_win_match": 2},
    {"max_total_stake": None, "min_bet": 1, "min_raise": 1},
    {"max_total_stake": 10, "deje_mode": "always_one", "punto_bonus": False},
    {"deje_mode": "fem_plus_one", "refused_jugada_bonus_to": "best_cards", "paso_point_in_pares_juego": True},
    {"ordago_resolution": "count_prior", "response_mode": "both_answer_most_aggressive"},
    {"max_mus_rounds": 1, "discard_min": 2, "discard_max": 3},
    {"max_mus_rounds": None, "discard_submission": "sequential", "replacement_order": "dealer_first"},
    {"reshuffle_pool": "all_discards", "declarations": "bot_declares"},
    {"senas_mode": "off"},
    {"senas_mode": "automatic", "sena_leak_probability": 1.0},
    {"max_senas_per_window": 1, "sena_leak_probability": 0.0},
    {"illegal_action_policy": "default_action", "max_faults_before_forfeit": 1},
]


def ids(options: dict[str, object]) -> str:
    return ",".join(f"{key}={value}" for key, value in options.items()) or "defaults"


def play(bots: list[Bot], rules: Rules, seed: int) -> LocalTable:
    table = LocalTable(bots, rules, seed)
    table.play()
    return table


@pytest.mark.parametrize("options", VARIANTS, ids=ids)
def test_random_bot_only_plays_legal_actions(options: dict[str, object]) -> None:
    rules = Rules.from_options(options)
    for seed in range(60):
        table = play([RandomBot(seed * 4 + seat) for seat in range(4)], rules, seed)
        assert table.illegal == [], table.illegal[:1]


@pytest.mark.parametrize("options", VARIANTS, ids=ids)
def test_rules_bot_only_plays_legal_actions_and_only_true_senas(options: dict[str, object]) -> None:
    rules = Rules.from_options(options)
    for seed in range(20):
        bots: list[Bot] = [RulesBot(seed), RandomBot(seed), RulesBot(seed + 1), RulesBot(seed + 2)]
        table = play(bots, rules, seed)
        assert table.illegal == [], table.illegal[:1]
        rejected = [event for event in table.match.events if event.kind is EventKind.SENA_REJECTED]
        assert [event for event in rejected if fields(event)["seat"] != 1] == []


def test_rules_bot_tells_its_partner_what_it_holds() -> None:
    table = play([RulesBot(0), RandomBot(1), RulesBot(2), RandomBot(3)], Rules(), seed=3)
    sent = [e for e in table.match.events if e.kind is EventKind.SENA_DELIVERED and fields(e)["seat"] in (0, 2)]
    assert sent


def test_rules_bot_beats_random_bot_over_duplicate_deals() -> None:
    result = measure(lambda seed: RulesBot(seed), lambda seed: RandomBot(seed), pairs=40, first_seed=0)
    assert result.matches.played == 80
    assert result.matches.rate > 0.6 and result.matches.low > 0.5
    assert result.games.rate > 0.6
    assert result.faults == (0, 0)


@pytest.mark.parametrize("module", ["clients.bots.random", "clients.bots.rules"])
def test_the_bot_programs_say_what_is_missing_and_exit_1(module: str) -> None:
    env = {"PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", module], cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert "MUS_REFEREE" in done.stderr
