"""`mus match play` with real bot processes, and `mus referee serve` as a real server process."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from typer.testing import CliRunner

from workers.cli import referee_cmd
from workers.cli.main import app
from workers.cli.match_cmd import team_names

runner = CliRunner()


@pytest.mark.slow
def test_match_play_runs_the_example_bots_as_processes_and_reports_the_result_as_json() -> None:
    result = runner.invoke(app, ["match", "play", "rules", "random", "--seed", "4", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["teams"] == {"0": "rules", "1": "random"}
    assert data["winner"] in ("rules", "random") and data["termination"] in ("normal", "forfeit")
    assert data["games"] and all(game["score"] for game in data["games"])
    assert data["faults"] == [], "the example bots never fault"


@pytest.mark.slow
def test_match_play_prints_the_transcript_and_the_result_line() -> None:
    result = runner.invoke(app, ["match", "play", "random", "random", "--seed", "2"])
    assert result.exit_code == 0, result.output
    assert "--- Hand 0:" in result.stdout and re.search(r"Result: random \(team [01]\) wins", result.stdout)
    assert "Team 0 (seats 0, 2): random; team 1 (seats 1, 3): random\n" in result.stdout


@pytest.mark.slow
def test_a_crashing_program_is_a_crash_incident_its_timeouts_are_its_faults_and_its_team_forfeits(
    tmp_path: Path,
) -> None:
    crasher = tmp_path / "crash.py"
    crasher.write_text("import sys\nsys.exit(3)\n")
    result = runner.invoke(app, ["match", "play", "rules", str(crasher), "--json"])
    assert result.exit_code == 3, "a forfeit exits 3, for scripts"
    data = json.loads(result.stdout)
    assert data["winner"] == "rules" and data["termination"] == "forfeit" and data["exit_status"] == 3
    assert {fault["cause"] for fault in data["faults"] if fault["bot"] == "crash"} == {"timeout"}
    assert [incident["cause"] for incident in data["incidents"] if incident["bot"] == "crash"] == ["crash"] * 2
    assert data["incidents"] == [incident for incident in data["incidents"] if incident["bot"] == "crash"]


@pytest.mark.slow
def test_a_forfeit_is_summarised_per_team_and_cause_and_exits_3(tmp_path: Path) -> None:
    crasher = tmp_path / "crash.py"
    crasher.write_text("import sys\nprint('crash: giving up', file=sys.stderr)\nsys.exit(3)\n")
    result = runner.invoke(app, ["match", "play", "rules", str(crasher), "--quiet"])
    assert result.exit_code == 3, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Result: rules wins (forfeit)")
    assert lines[1] == "Faults: rules (team 0) 0; crash (team 1) 3: timeout 3", lines
    assert lines[2] == "Incidents: rules (team 0) 0; crash (team 1) 2: crash 2", lines
    assert any(line.startswith("  incident: seat 1 (crash) crash: ") for line in lines), lines
    assert lines[-1] == "exit status 3: the match ended by forfeit"
    folder = next(line.split(": ", 1)[1] for line in lines if line.startswith("bot output: "))
    assert "crash: giving up" in (Path(folder) / "seat1-crash.log").read_text()
    # ... and quoted: a newcomer's program that could not start lost by forfeit with no word of why.
    assert "seat 1:   crash: giving up" in lines and "seat 3:   crash: giving up" in lines, lines


NAMED_BOT = """
from clients.bots.random_bot import RandomBot
from clients.sdk import run_bot


class Named(RandomBot):
    name = "{name}"


print("{name} says hello", flush=True)
run_bot(Named())
"""


@pytest.mark.slow
def test_match_play_names_bots_by_their_join_name_and_keeps_every_seats_output_with_logs(tmp_path: Path) -> None:
    program = tmp_path / "program_file.py"
    program.write_text(NAMED_BOT.format(name="named-bot"))
    logs = tmp_path / "logs"
    result = runner.invoke(
        app,
        ["match", "play", "random", str(program), "--seed", "5", "--logs", str(logs), "--option", "target_score=10"],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Team 0 (seats 0, 2): random; team 1 (seats 1, 3): named-bot\n")
    assert "Faults: random (team 0) 0; named-bot (team 1) 0" in result.stdout
    assert f"bot output: {logs}" in result.stdout, "--logs is shown even when nothing went wrong"
    files = sorted(logs.iterdir())
    assert len(files) == 4, files
    for seat in (1, 3):
        [log] = [path for path in files if path.name.startswith(f"seat{seat}-")]
        assert "named-bot says hello" in log.read_text()
    data = json.loads(
        runner.invoke(app, ["match", "play", str(program), "random", "--json", "--option", "target_score=10"]).stdout
    )
    assert data["teams"] == {"0": "named-bot", "1": "random"} and data["exit_status"] == 0
    assert data["winner"] == ("named-bot", "random")[data["winner_team"]]


def test_bad_bots_and_options_are_one_line_errors() -> None:
    for args, message in (
        (["match", "play", "nosuchbot", "random"], "unknown bot 'nosuchbot'"),
        (["match", "play", "nosuchbot", "random"], "a bot added with `mus bot add` is not taken here"),
        (["match", "play", "random", "bots/nope.py"], "no file 'bots/nope.py'"),
        (["match", "play", "random"], "give two bots"),
        (["match", "play", "random", "random", "--option", "deck_mode=5_reyes"], "deck_mode must be one of"),
        (["match", "play", "random", "random", "--logs", "/proc/no/such/folder"], "cannot create the logs folder"),
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, args
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_referee_serve_answers_health_checks_and_stops_on_sigint() -> None:
    env = dict(os.environ, MUS_ADMIN_TOKEN="t0ken")
    process = subprocess.Popen(
        [sys.executable, "-m", "workers.cli.main", "referee", "serve", "--address", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("referee listening on 127.0.0.1:"), line
        address = line.split()[-1]
        with grpc.insecure_channel(address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            reply = stub.Check(health_pb2.HealthCheckRequest(service="mus.v1.PlayService"), timeout=10)  # type: ignore[attr-defined]
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            time.sleep(0)


def test_referee_serve_takes_its_admin_token_from_a_file_or_the_environment_never_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 9: `--admin-token` put the token where `ps` shows it. It is gone; a file or MUS_ADMIN_TOKEN give it."""
    refused = runner.invoke(app, ["referee", "serve", "--admin-token", "x" * 20])
    assert refused.exit_code == 2 and "No such option" in refused.stderr, refused.stderr
    token_file = tmp_path / "admin-token"
    token_file.write_text("s3cret-s3cret-s3cret\n")
    assert referee_cmd.read_admin_token(token_file) == "s3cret-s3cret-s3cret"
    monkeypatch.setenv("MUS_ADMIN_TOKEN", "from-the-environment")
    assert referee_cmd.read_admin_token(None) == "from-the-environment"
    monkeypatch.delenv("MUS_ADMIN_TOKEN")
    assert referee_cmd.read_admin_token(None) is None
    for content, message in (("short\n", "at least 16 characters"), ("", "at least 16 characters")):
        token_file.write_text(content)
        result = runner.invoke(app, ["referee", "serve", "--admin-token-file", str(token_file)])
        assert result.exit_code == 1 and message in result.stderr, result.stderr
    missing = runner.invoke(app, ["referee", "serve", "--admin-token-file", str(tmp_path / "nope")])
    assert missing.exit_code == 1 and "cannot read the admin token file" in missing.stderr


@pytest.mark.slow
def test_a_match_stopped_by_sigterm_stops_its_seats_removes_its_folders_and_exits_143(tmp_path: Path) -> None:
    """`kill` (SIGTERM) cancels `mus match play` as Ctrl-C would: Python's default for it would exit at once and
    leave the referee's folders in the temporary directory and the seats' processes running."""
    started = tmp_path / "started"
    started.mkdir()
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text(
        "import os, pathlib, sys, time\npathlib.Path(sys.argv[1], str(os.getpid())).touch()\ntime.sleep(600)\n"
    )
    temporary = Path(tempfile.mkdtemp(prefix="mus-t"))  # short: the seats' sockets are made in it (AF_UNIX paths)
    command = ["match", "play", "random", "--no-sandbox", "--", sys.executable, str(sleeper), str(started)]
    process = subprocess.Popen(
        [sys.executable, "-m", "workers.cli.main", *command],
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, TMPDIR=str(temporary)),
    )
    try:
        deadline = time.monotonic() + 30
        while len(list(started.iterdir())) < 2 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        pids = [int(path.name) for path in started.iterdir()]
        assert len(pids) == 2, "both seats of the sleeper are running (the match waits for them to join)"
        assert list(temporary.glob("mus-referee-*")), "the referee's folders exist while it runs"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 143
    finally:
        if process.poll() is None:
            process.kill()
    assert process.stderr is not None and "terminated (SIGTERM)" in process.stderr.read()
    left = [path.name.split("-")[1] for path in temporary.iterdir()]
    shutil.rmtree(temporary)
    assert left == ["match"], "the referee's folders are removed; the bots' output is kept, as after any match"
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_temporary_folder_too_long_for_unix_sockets_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The referee's sockets are made under TMPDIR: past 107 bytes, binding one failed with a traceback."""
    long_folder = tmp_path / ("x" * 90)
    long_folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long_folder))
    result = runner.invoke(app, ["match", "play", "random", "random", "--seed", "1"])
    assert result.exit_code == 1, result.output
    assert "too long a path for the referee's unix sockets" in result.stderr and "TMPDIR" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_result_line_names_each_games_winner() -> None:
    """ "games: 0-0 (ordago), 14-54 (target_at_tanteo)" did not say who won: an órdago ends a game at its score
    (newcomer walkthrough, stop 33)."""
    from workers.cli.match_cmd import describe_result

    game = {"vaca": 1, "game": 1, "hand": 3}
    result = {
        "teams": {"0": "mybot", "1": "random"},
        "winner": "mybot",
        "termination": "normal",
        "games": [
            {**game, "winner_team": 0, "score": [0, 0], "termination": "ordago"},
            {**game, "winner_team": 1, "score": [14, 54], "termination": "target_at_tanteo"},
            {**game, "winner_team": 1, "score": [16, 20], "termination": "ordago"},
        ],
        "faults": [],
        "incidents": [],
    }
    first = describe_result(result).splitlines()[0]
    assert first == (  # the winner's points first
        "Result: mybot wins (normal); games: mybot by órdago (at 0-0), random 54-14 (target_at_tanteo),"
        " random by órdago (at 20-16)"
    )


def test_two_teams_whose_bots_join_under_one_name_are_told_apart_by_their_team() -> None:
    """Every `bot.js` joins as "bot": `Result: bot wins (forfeit)` named neither team (newcomer, stop 34)."""
    played: Any = SimpleNamespace(joined_as=["bot", "bot", "bot", "bot"])
    assert team_names(played, ("a", "b")) == ("bot (team 0)", "bot (team 1)")
    played.joined_as = ["alpha", "", "alpha", "beta"]
    assert team_names(played, ("a", "b")) == ("alpha", "beta")


@pytest.mark.parametrize("command", [["match", "play", "random", "random"], ["bot", "check", "--", "random"]])
def test_a_logs_folder_through_a_link_is_a_one_line_error(tmp_path: Path, command: list[str]) -> None:
    """A stranger's bot folder held a `logs` link, and `--logs logs/` in it (the documented habit) had the checker
    write and quote files of the bot's choosing as root (helper-87)."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "logs").symlink_to(tmp_path / "elsewhere")
    at = command.index("--") if "--" in command else len(command)
    result = runner.invoke(app, [*command[:at], "--logs", str(tmp_path / "logs"), *command[at:]])
    assert result.exit_code == 1, result.output
    assert "goes through a link" in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not any((tmp_path / "elsewhere").iterdir()), "nothing was written through the link"
