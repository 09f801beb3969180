"""A remote bot started before any league registered it keeps asking, and joins the lobby once it is known."""

from __future__ import annotations

import asyncio
import threading

import pytest

from clients.bots.random_bot import RandomBot
from clients.sdk import runner
from referee.service.lobby import token_sha256
from tests.service.conftest import Running, with_referee


def test_a_remote_bot_with_a_token_not_yet_registered_retries_until_the_referee_knows_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runner, "UNKNOWN_TOKEN_RETRY_S", 0.1)
    stop = threading.Event()

    async def scenario(running: Running) -> bool:
        bot = asyncio.create_task(
            asyncio.to_thread(runner.run_remote_bot, lambda: RandomBot(0), running.address, "later", stop=stop)
        )
        await asyncio.sleep(0.5)  # a few refused hellos: the bot must still be trying
        assert not bot.done(), "an unknown token is not a reason to give up"
        running.referee.lobby.register("late-bot", token_sha256("later"))
        for _ in range(100):
            if running.referee.lobby.connected("late-bot"):
                break
            await asyncio.sleep(0.05)
        joined = running.referee.lobby.connected("late-bot") == 1
        stop.set()
        await bot
        return joined

    assert with_referee(scenario, timeout=30)
