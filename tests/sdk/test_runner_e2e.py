"""SDK bots against the real referee on 127.0.0.1:0: whole matches, and the same match as on the local table.

The referee is deterministic (a match is its rules, seed and actions) and so are seeded bots, so if the SDK
gives a bot the same view over gRPC as on the local table, both play the very same match.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from clients.bots.random_bot import RandomBot
from clients.bots.rules_bot import RulesBot
from clients.sdk.bot import Bot
from clients.sdk.local import LocalTable
from clients.sdk.runner import run_bot
from clients.sdk.view import BotView
from referee.engine.actions import Action
from referee.engine.outcome import MatchOutcome
from referee.engine.rules import Rules
from tests.service.conftest import Running, with_referee


class Recorded(Bot):
    """Wraps a bot and records every view it got (clocks zeroed: they differ) and every action it chose."""

    def __init__(self, inner: Bot) -> None:
        self.inner = inner
        self.decisions: list[tuple[BotView, Action]] = []

    def decide(self, view: BotView) -> Action:
        action = self.inner.decide(view)
        self.decisions.append((dataclasses.replace(view, decision_time_left_s=0, bank_time_left_s=0), action))
        return action


def lineup(seed: int) -> list[Recorded]:
    return [Recorded(bot) for bot in (RulesBot(seed), RandomBot(seed + 1), RulesBot(seed + 2), RandomBot(seed + 3))]


@pytest.mark.parametrize(
    "options",
    [{}, {"senas_mode": "voluntary", "sena_leak_probability": 1.0, "declarations": "bot_declares"}],
    ids=["defaults", "leaky-senas-declarations"],
)
def test_sdk_bots_play_the_same_matches_over_grpc_as_on_the_local_table(options: dict[str, object]) -> None:
    rules = Rules.from_options(options)
    seeds = range(3)

    async def scenario(running: Running) -> list[tuple[list[MatchOutcome], list[Recorded]]]:
        results = []
        for seed in seeds:
            table = running.referee.create_table(rules, seed, ["rules", "random", "rules", "random"])
            bots = lineup(seed)
            outcomes = await asyncio.gather(
                *(
                    asyncio.to_thread(run_bot, bot, running.address, state.token, grace_s=5)
                    for bot, state in zip(bots, table.seats, strict=True)
                )
            )
            assert table.status.value == "finished"
            assert table.faults() == []
            results.append((list(outcomes), bots))
        return results

    remote = with_referee(scenario)
    for seed, (outcomes, remote_bots) in zip(seeds, remote, strict=True):
        local_bots = lineup(seed)
        local = LocalTable(local_bots, rules, seed).play()
        assert outcomes == [local] * 4
        for remote_bot, local_bot in zip(remote_bots, local_bots, strict=True):
            assert len(remote_bot.decisions) == len(local_bot.decisions) > 0
            for (remote_view, remote_action), (local_view, local_action) in zip(
                remote_bot.decisions, local_bot.decisions, strict=True
            ):
                assert remote_view == local_view
                assert remote_action == local_action
