"""`mus demo` and `mus league run` end to end through the CLI, on the embedded default in a temporary folder."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.cli.helpers import error_of
from workers.cli.errors import sigterm_as_ctrl_c
from workers.cli.main import app

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "clients" / "bots"


@pytest.fixture
def fresh_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("MUS_DATABASE_URL", "MUS_BROKER_URL", "MUS_BROKER_DIR", "MUS_LOG_DIR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.mark.slow
def test_demo_registers_the_example_bots_plays_the_league_and_prints_standings(fresh_folder: Path) -> None:
    result = runner.invoke(app, ["demo", "--matches-per-pairing", "2", "--workers", "2"])
    assert result.exit_code == 0, result.output
    assert "league demo: all 6 matches finished" in result.stdout
    for bot in ("rules", "random", "passive"):
        assert bot in result.stdout
    assert (fresh_folder / "mus.db").is_file(), "the embedded default keeps its database in ./mus.db"
    bots = json.loads(runner.invoke(app, ["bot", "list", "--json"]).stdout)
    assert {row["bot"]: row["persistent"] for row in bots} == {"rules": True, "random": True, "passive": True}
    assert list((fresh_folder / ".mus-logs" / "pool").glob("*.log")), "the workers played them from their pools"
    standings = runner.invoke(app, ["league", "standings", "demo", "--json"])
    rows = json.loads(standings.stdout)
    assert {row["bot"] for row in rows} == {"rules", "random", "passive"}
    assert sum(row["matches"] for row in rows) == 12, "6 matches, two teams each"
    # A newcomer registered an example bot's name as their own, then ran the demo again: it is told, not silently
    # replaced.
    mine = runner.invoke(
        app, ["bot", "add", "random", "--dir", str(EXAMPLES), "--", "python", "-m", "clients.bots.random"]
    )
    assert mine.exit_code == 0, mine.output
    again = runner.invoke(app, ["demo", "--matches-per-pairing", "2"])
    assert again.exit_code == 0 and "all 6 matches finished" in again.stdout, "a finished demo is not replayed"
    assert "playing on" not in again.stdout, "nor are workers started for it"
    said = " ".join(again.stderr.split())
    assert "note: bot random's current version was 2; the demo made its own, 1 (persistent), current" in said, said
    assert "note: bot rules" not in said, "the demo's own registrations, unchanged, are not remarked on"
    assert ("puts it on your PATH" in result.stdout) == (shutil.which("mus") is None), "where `mus` is, if not on PATH"
    verify = runner.invoke(app, ["replay", "verify", "--league", "demo"])
    assert verify.exit_code == 0, verify.output


def test_a_worker_without_the_leagues_database_refuses_to_start_and_makes_none(
    fresh_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review's worker with a wrong MUS_DATABASE_URL took matches and dropped each one while its league waited;
    one with none made a mus.db of its own and dropped them as unknown."""
    assert "there is no database at" in error_of(runner.invoke(app, ["worker"]))
    assert not (fresh_folder / "mus.db").exists()
    monkeypatch.setenv("MUS_DATABASE_URL", "postgresql+psycopg://postgres:secret@127.0.0.1:1/leagues")
    refused = error_of(runner.invoke(app, ["worker"]))
    assert "cannot use the database postgresql+psycopg://postgres:***@127.0.0.1:1/leagues" in refused, refused
    empty = fresh_folder / "empty.db"
    sqlite3.connect(empty).close()
    monkeypatch.setenv("MUS_DATABASE_URL", f"sqlite:///{empty}")
    assert "holds no leagues: create one there first" in error_of(runner.invoke(app, ["worker"]))


def test_league_run_refuses_a_sandboxed_league_whose_logs_every_sandbox_would_show(
    fresh_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The logs under the venv, which every sandbox binds: a pooled bot read its rivals' live logs (a review,
    helper-85). Refused before any worker starts, saying which setting moves them."""
    for bot in ("random", "passive"):
        added = runner.invoke(
            app, ["bot", "add", bot, "--dir", str(EXAMPLES), "--", "python", "-m", f"clients.bots.{bot}"]
        )
        assert added.exit_code == 0, added.output
    assert runner.invoke(app, ["league", "create", "shown", "--bots", "random,passive"]).exit_code == 0
    venv = fresh_folder / "venv"
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setenv("MUS_LOG_DIR", str(venv / "var" / "mus-logs"))
    refused = " ".join(error_of(runner.invoke(app, ["league", "run", "shown"])).split())
    assert f"league 'shown' is sandboxed, and {venv.resolve() / 'var' / 'mus-logs'} lies under" in refused, refused
    assert "set MUS_LOG_DIR to a place outside" in refused, refused
    status = json.loads(runner.invoke(app, ["league", "status", "shown", "--json"]).stdout)
    assert status["status"] == "created"


def test_league_run_on_a_broker_it_cannot_reach_is_a_one_line_error_and_starts_nothing(
    fresh_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It printed a 155-line traceback, and the league was left 'running' (an operator's review, stop 35)."""
    bots = Path(__file__).resolve().parents[2] / "clients" / "bots"
    for bot in ("random", "passive"):
        added = runner.invoke(app, ["bot", "add", bot, "--dir", str(bots), "--", "python", "-m", f"clients.bots.{bot}"])
        assert added.exit_code == 0, added.output
    assert runner.invoke(app, ["league", "create", "bx", "--bots", "random,passive"]).exit_code == 0
    monkeypatch.setenv("MUS_BROKER_URL", "redis://:secret@127.0.0.1:1/7")
    refused = error_of(runner.invoke(app, ["league", "run", "bx"]))
    assert "cannot reach the broker redis://:**@127.0.0.1:1/7 (MUS_BROKER_URL): " in refused, refused
    status = json.loads(runner.invoke(app, ["league", "status", "bx", "--json"]).stdout)
    assert status["status"] == "created"
    noted = runner.invoke(app, ["league", "run", "bx", "--workers", "3"])  # a review's, which did nothing (stop 39)
    assert "note: --workers is for the embedded broker" in noted.stderr, noted.stderr


@pytest.mark.parametrize("command", [["league", "run", "bx"], ["worker"]])
def test_a_wrong_log_limit_stops_a_worker_before_it_starts_in_one_line_and_no_other_command(
    fresh_folder: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """Read as the worker module was imported, a review's `MUS_LOG_LIMIT=1.5G` ended every mus command in a
    traceback (stop 39): now only the commands that start workers stop on it, in one line."""
    monkeypatch.setenv("MUS_LOG_LIMIT", "1.5G")
    refused = error_of(runner.invoke(app, command))
    assert refused == "error: MUS_LOG_LIMIT='1.5G': give a size such as 500M or 2G, or off", refused
    assert runner.invoke(app, ["bot", "list"]).exit_code == 0


def test_league_run_of_an_unknown_league_is_a_one_line_error(fresh_folder: Path) -> None:
    result = runner.invoke(app, ["league", "run", "nope"])
    assert result.exit_code == 1
    assert "nope" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "signals",
    [[signal.SIGTERM], [signal.SIGINT, signal.SIGTERM], [signal.SIGINT, signal.SIGINT, signal.SIGINT]],
    ids=["term", "again", "thrice"],
)
def test_league_run_stopped_by_sigterm_or_a_second_ctrl_c_pauses_the_league_with_no_match_left_running(
    fresh_folder: Path, signals: list[signal.Signals]
) -> None:
    """A chaos review's `kill` of the run (a container or service stopping sends SIGTERM) or its second Ctrl-C
    left a match running and the league open to another run's workers until the next run (stop 39). Each now ends
    as Ctrl-C does: the workers stopped, their matches voided, the league paused. A third signal leaves the
    clean-up (a database that does not answer), still in one line."""
    for bot in ("random", "passive"):
        added = runner.invoke(
            app, ["bot", "add", bot, "--dir", str(EXAMPLES), "--", "python", "-m", f"clients.bots.{bot}"]
        )
        assert added.exit_code == 0, added.output
    assert (
        runner.invoke(
            app, ["league", "create", "st", "--bots", "random,passive", "--matches-per-pairing", "40"]
        ).exit_code
        == 0
    )
    run = subprocess.Popen(
        [sys.executable, "-c", "from workers.cli.main import app; app()", "league", "run", "st"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with sqlite3.connect(fresh_folder / "mus.db") as db:
                if db.execute("SELECT count(*) FROM match WHERE status = 'running'").fetchone()[0]:
                    break
            time.sleep(0.05)
        for signum in signals:
            run.send_signal(signum)
            time.sleep(0.05)
        output, _ = run.communicate(timeout=60)
    finally:
        run.kill()
    said = output.decode()
    assert run.returncode == (143 if signals == [signal.SIGTERM] else 130), said
    assert ("terminated (SIGTERM): " in said) == (signals == [signal.SIGTERM]), said
    assert "Traceback" not in said and "Aborted" not in said, said
    if len(signals) == 3:  # the clean-up left, or not: the one before it may have come before the clean-up began
        assert "run `mus league run st` again" in said, said
        return
    with sqlite3.connect(fresh_folder / "mus.db") as db:
        assert db.execute("SELECT status FROM league WHERE name = 'st'").fetchone() == ("paused",)
        assert db.execute("SELECT count(*) FROM match WHERE status = 'running'").fetchone() == (0,)


def test_only_the_first_of_sigterm_and_ctrl_c_interrupts_and_the_next_waits_for_the_clean_up() -> None:
    """Both pending after one call into C (a busy database), the second interrupted the clean-up of the first
    before it could begin: the league stayed open and its matches running (a review, stop 40)."""
    with sigterm_as_ctrl_c() as interrupted:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        os.kill(os.getpid(), signal.SIGINT)  # during the clean-up
        time.sleep(0.05)
    assert interrupted == [signal.SIGTERM]
