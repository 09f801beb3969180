"""docs/protocol.md's complete minimal bots, extracted from the page and played in a real match against the
`random` bot (`mus match play`, real processes, real gRPC), so the page cannot rot."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from workers.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "protocol.md"
NODE_MODULES = ROOT / "clients" / "js" / "node_modules"
EXAMPLE = re.compile(r"<!-- example: (?P<name>\S+) -->\n```\w*\n(?P<code>.*?)\n```\n", re.DOTALL)
FAST = ["--seed", "3", "--option", "target_score=10", "--json"]

runner = CliRunner()


def examples() -> dict[str, str]:
    """The page's example blocks by file name (`<!-- example: NAME -->` just before the fence)."""
    return {found["name"]: found["code"] + "\n" for found in EXAMPLE.finditer(PAGE.read_text(encoding="utf-8"))}


def extract(name: str, folder: Path) -> Path:
    path = folder / name
    path.write_text(examples()[name], encoding="utf-8")
    return path


def played(args: list[str]) -> dict[str, object]:
    result = runner.invoke(app, ["match", "play", *args])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def assert_clean(data: dict[str, object], name: str) -> None:
    assert data["teams"] == {"0": "random", "1": name}, "named by its Join.bot_name"
    assert data["termination"] == "normal"
    assert data["faults"] == [] and data["incidents"] == [], (data["faults"], data["incidents"])


def test_the_page_holds_the_three_minimal_bots_and_the_remote_one() -> None:
    """The remote one plays a league match in tests/workers/test_remote_bots.py."""
    assert sorted(examples()) == ["minimal_bot.js", "minimal_bot.py", "minimal_bot.sh", "minimal_remote_bot.py"]


@pytest.mark.slow
def test_the_minimal_python_bot_plays_a_clean_match_against_random(tmp_path: Path) -> None:
    bot = extract("minimal_bot.py", tmp_path)
    assert_clean(played(["random", str(bot), *FAST]), "minimal-python")


@pytest.mark.slow
def test_the_minimal_stdio_bot_plays_a_clean_match_against_random(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extract("minimal_bot.sh", tmp_path)
    monkeypatch.chdir(tmp_path)  # a command line runs in the current folder, the one its sandbox binds
    assert_clean(played(["random", "--stdio", *FAST, "--", "sh", "minimal_bot.sh"]), "minimal_bot")


@pytest.mark.slow
def test_the_minimal_javascript_bot_plays_a_clean_match_against_random(
    node: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = extract("minimal_bot.js", tmp_path)
    # Unconfined: the bot's node_modules lie outside its folder, and the environment reaches it only then.
    monkeypatch.setenv("NODE_PATH", str(NODE_MODULES))
    monkeypatch.setenv("MUS_PROTO_DIR", str(ROOT / "proto"))
    assert_clean(played(["random", "--no-sandbox", *FAST, "--", "node", str(bot)]), "minimal-js")
