"""`mus bot check -- COMMAND` and `mus match play ... -- COMMAND` ran a command line in the current folder, which
the bot's sandbox bound: run from the project's folder, a review's bot read the broker's messages, every league
seat's log and every other bot's folder under bots/ (stop 44). A command that names a script now runs in the
script's folder, as `mus bot add` takes it; one whose folder holds the deployment's database, broker or logs is
refused, as `mus bot add` and a worker refuse it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.cli.helpers import error_of
from workers.cli.check_cmd import command_program
from workers.cli.main import app
from workers.launcher import INSTALL_HINT, sandbox_available

runner = CliRunner()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder as the README lays it out: its logs, and each bot in bots/NAME/."""
    for name in ("evil", "rival"):
        (tmp_path / "bots" / name).mkdir(parents=True)
        (tmp_path / "bots" / name / f"{name}.py").write_text("raise SystemExit(1)\n")
    (tmp_path / "bots" / "evil" / "weights.json").write_text("{}\n")
    (tmp_path / "evil.py").write_text("raise SystemExit(1)\n")
    (tmp_path / ".mus-logs" / "match-1").mkdir(parents=True)
    (tmp_path / ".mus-logs" / "match-1" / "seat0-rival.log").write_text("my hand: 1o 12c 12e 3b\n")
    for name in ("MUS_DATABASE_URL", "MUS_BROKER_DIR", "MUS_LOG_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_command_naming_a_script_runs_in_the_scripts_folder_alone(project: Path) -> None:
    program = command_program(["python", "bots/evil/evil.py", "--weights", "bots/evil/weights.json", "-v"])
    assert program.cwd == project / "bots" / "evil", "its sandbox binds this folder: not bots/rival, not the logs"
    assert program.command == ("python", "evil.py", "--weights", "weights.json", "-v"), "paths from inside it"
    assert command_program(["python", str(project / "bots" / "evil" / "evil.py")]).cwd == project / "bots" / "evil"
    assert command_program(["bots/evil/evil.py"]).cwd == project / "bots" / "evil"


@pytest.mark.parametrize(
    "args",
    [
        ["bot", "check", "--", "python", "evil.py"],
        ["match", "play", "random", "--", "python", "evil.py"],
        ["match", "play", "evil.py", "random"],
    ],
)
def test_a_bot_whose_folder_holds_the_leagues_logs_is_refused_before_it_runs(project: Path, args: list[str]) -> None:
    error = error_of(runner.invoke(app, args))
    assert str(project / ".mus-logs") in error and "its sandbox binds that folder" in error


def test_a_folder_is_refused_only_for_what_is_there(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default database, broker and logs lie in the current folder: a bot tried in its own folder, where mus
    has never kept a league, is not refused for them."""
    folder = project / "bots" / "evil"
    monkeypatch.chdir(folder)
    assert command_program(["python", "evil.py"]).cwd == folder
    assert command_program(["sh", "-c", "exec python evil.py"]).cwd == folder, "no script named: the current folder"


@pytest.mark.skipif(not sandbox_available(), reason=INSTALL_HINT)
@pytest.mark.parametrize(
    "args", [["bot", "check", "--", "python", "bots/evil/evil.py"], ["match", "play", "random", "random"]]
)
def test_logs_under_a_root_every_sandbox_binds_are_refused_whatever_the_bots_folder(
    project: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """A project laid out in the venv (or under /usr/src/app): every seat's sandbox binds it whole, so any bot read
    the logs there (a review, helper-85)."""
    monkeypatch.setattr(sys, "prefix", str(project))
    error = error_of(runner.invoke(app, args))
    assert f"{project / '.mus-logs'} lies under {project}, which every bot's sandbox binds read-only" in error, error
    assert "set MUS_LOG_DIR to a place outside" in error, error
    unconfined = runner.invoke(app, ["match", "play", "random", "random", "--no-sandbox", "--option", "target_score=5"])
    assert unconfined.exit_code == 0, "without a sandbox, nothing is bound: the bots run unconfined anyway"
