"""`python -m clients.sdk BOT`: finding the bot class by module or by file."""

from __future__ import annotations

from pathlib import Path

import pytest

from clients.bots.rules_bot import RulesBot
from clients.sdk.__main__ import load_bot_class, main
from clients.sdk.bot import Bot
from clients.sdk.errors import SdkError


def test_a_bot_class_is_found_by_module_or_by_file(tmp_path: Path) -> None:
    assert load_bot_class("clients.bots.rules_bot:RulesBot") is RulesBot
    source = tmp_path / "mybot.py"
    source.write_text(
        "from clients.sdk import Bot\n"
        "class Mine(Bot):\n"
        "    def decide(self, view):\n"
        "        return view.legal_actions[0]\n"
    )
    found = load_bot_class(f"{source}:Mine")
    assert issubclass(found, Bot) and found.__name__ == "Mine"


@pytest.mark.parametrize("spec", ["RulesBot", "clients.bots.rules_bot:Style", "missing.py:Bot"])
def test_a_bad_bot_name_is_a_clear_error(spec: str) -> None:
    with pytest.raises(SdkError):
        load_bot_class(spec)


def test_the_program_exits_1_on_a_bad_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nope"]) == 1
    assert "module:Class" in capsys.readouterr().err
