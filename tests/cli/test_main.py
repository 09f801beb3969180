"""The root of `mus`: every noun is listed, and a noun's command imports only what that noun needs."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from workers.cli.main import NOUNS, app


def test_the_help_lists_every_noun_in_order_and_an_unknown_one_is_a_usage_error() -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["--help"])
    assert listed.exit_code == 0, listed.output
    names = [match.group(1) for line in listed.output.splitlines() if (match := re.match(r"│ (\S+) ", line))]
    assert [name for name in names if name in NOUNS] == list(NOUNS)
    unknown = runner.invoke(app, ["nope"])
    assert unknown.exit_code == 2 and "No such command 'nope'." in unknown.output


def test_a_misspelt_noun_is_answered_with_the_nouns_near_it() -> None:
    """The nouns are loaded only when used: Typer, which suggests from the commands it holds, had none to offer
    (a newcomer's `mus leage run`, stop 43); a noun's own commands it suggests itself."""
    runner = CliRunner()
    misspelt = runner.invoke(app, ["leage", "run", "spring"])
    assert misspelt.exit_code == 2 and "No such command 'leage'. Did you mean 'league'?" in misspelt.output
    inner = runner.invoke(app, ["league", "stauts", "spring"])
    assert inner.exit_code == 2 and "No such command 'stauts'. Did you mean 'status'?" in inner.output


def test_version_prints_the_installed_version() -> None:
    """A newcomer's `mus --version` was a usage error."""
    from importlib.metadata import version

    said = CliRunner().invoke(app, ["--version"])
    assert said.exit_code == 0 and said.output == f"mus-arena {version('mus-arena')}\n"


def test_the_referee_and_the_rules_start_without_the_database_celery_or_the_other_nouns() -> None:
    """In a fresh interpreter, as `mus referee serve` and `mus rules` start: their help is printed without
    importing what only the league side needs."""
    heavy = ("sqlmodel", "sqlalchemy", "celery", "alembic", "workers.checks", "workers.cli.bot_cmd")
    for noun in (["referee", "serve"], ["rules", "eval"]):
        code = (
            "import sys\n"
            "from typer.testing import CliRunner\n"
            "from workers.cli.main import app\n"
            f"result = CliRunner().invoke(app, {[*noun, '--help']!r})\n"
            "assert result.exit_code == 0, result.output\n"
            f"print(sorted(name for name in {heavy!r} if name in sys.modules))\n"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert done.stdout.strip() == "[]", (noun, done.stdout, done.stderr)


def test_help_joins_a_docstrings_lines_and_names_arguments_in_capitals(monkeypatch: pytest.MonkeyPatch) -> None:
    """A newcomer's `mus bot add --help` broke sentences where the source's lines ended ("the stored command is
    the" / "stdio bridge...") and wrote the arguments `{name}`, not NAME as the README does (stop 33)."""
    monkeypatch.setenv("COLUMNS", "300")
    shown = CliRunner().invoke(app, ["bot", "add", "--help"])
    assert shown.exit_code == 0, shown.output
    assert "the stored command is the stdio bridge followed by it" in shown.output, shown.output
    usage = next(line for line in shown.output.splitlines() if "Usage:" in line)
    assert "NAME" in usage and "COMMAND" in usage and "{name}" not in usage, usage
