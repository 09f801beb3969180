"""The stdio bridge (clients/stdio) and its example shell bot: real matches through the real referee, with real
subprocesses on both sides of the bridge (the bridge, and the program it runs).

Proved here: the shell bot plays whole matches against the Python `random` bot (`mus match play --stdio`, and in a
bubblewrap sandbox, and in a league of `mus bot add --stdio` bots); a program sees the documented lines in order
(hello, events, requests with the time left, outcome, then the end of its input), its stderr reaches the seat's
log and its environment holds no seat token; an answer naming another request is dropped; an unreadable or
illegal answer is rejected, told to the program, and asked again; a program that exits mid-match is a crash.
Tests that need bubblewrap skip, with the reason, where it is missing.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clients.stdio.lines import AnswerError, action_from_json, action_to_json, answer_number, dump
from referee.causes import IncidentCause
from referee.engine.actions import Action, ActionKind
from referee.engine.cards import parse_cards
from referee.engine.events import EventKind
from referee.engine.outcome import MatchTermination
from referee.engine.rules import Rules
from referee.wire import legal_from_proto
from tests.support.events import fields
from tests.support.pooled_seats import check_two_clean_seats_per_process, two_seats_in_a_row
from workers.cli.main import app
from workers.launcher import BotProgram, Limits, resolve_program, sandbox_available, stdio_program
from workers.matches import PlayedMatch, play_programs

EXAMPLE = Path(__file__).resolve().parents[2] / "clients" / "stdio" / "examples" / "first_legal.sh"
QUICK = {"target_score": 15}  # short games: a few hands per match
NO_SANDBOX_REASON = "bubblewrap is missing or cannot make a sandbox here"


def _shell_bot(script: str, name: str = "stdio-test") -> BotProgram:
    """A stdio program given as a shell script, run behind the bridge."""
    return stdio_program(BotProgram(name, ("sh", "-c", script)))


def _play(team_1: BotProgram, *, seed: int = 3, options: dict[str, object] | None = None) -> PlayedMatch:
    rules = Rules.from_options({**QUICK, **(options or {})})
    return asyncio.run(play_programs((resolve_program("random"), team_1), rules, seed))


def _faults(played: PlayedMatch) -> list[dict[str, object]]:
    return [fields(event) for event in played.match.events if event.kind is EventKind.FAULT]


def _check_clean(played: PlayedMatch) -> None:
    logs = [path.read_text() for path in played.logs.values()]
    assert played.incidents == (), logs
    assert _faults(played) == [], logs
    outcome = played.match.outcome
    assert outcome is not None and outcome.termination is MatchTermination.NORMAL, logs
    assert {1, 3} <= {step.seat for step in played.match.log}, "both stdio seats decided"


# ------------------------------------------------------------------------------------------------ the lines


def test_every_legal_answer_reads_back_as_the_same_action() -> None:
    """`legal` entries are answers: each one, sent back verbatim, is the action it stands for; and each is a flat
    object (no `{` inside), which is what lets a shell script cut it out of the line."""
    from mus.v1 import types_pb2

    cards = parse_cards("12o 3c 7e 1b")
    rules = Rules()
    entries = [
        types_pb2.LegalAction(kind=types_pb2.ACTION_KIND_DISCARD, min_cards=1, max_cards=4),
        types_pb2.LegalAction(kind=types_pb2.ACTION_KIND_ENVIDO, min_amount=2, max_amount=40),
        types_pb2.LegalAction(kind=types_pb2.ACTION_KIND_DECLARE, has_jugada=True),
        types_pb2.LegalAction(kind=types_pb2.ACTION_KIND_SENAS, senas=[types_pb2.SENA_DOS_REYES], max_senas=3),
        types_pb2.LegalAction(kind=types_pb2.ACTION_KIND_PASO),
        types_pb2.LegalAction(kind=types_pb2.ACTION_KIND_MUS),
    ]
    actions = legal_from_proto(entries, cards, rules).expand()
    assert len(actions) > 50
    for action in [*actions, Action.mus(senas=tuple(actions[-1].senas))]:
        line = dump(action_to_json(action)).decode()
        assert line.count("{") == 1 and line.endswith("}\n"), line
        assert action_from_json(line) == action, line


def test_an_answer_that_is_not_an_action_says_why() -> None:
    cases = {
        "paso": "not JSON",
        "[1]": "not a JSON object",
        '{"amount":2}': 'no "kind"',
        '{"kind":"raise"}': "unknown kind 'raise'",
        '{"kind":"envido","amount":"2"}': '"amount" must be an integer',
        '{"kind":"discard","cards":["13o"]}': "unknown card '13o'",
        '{"kind":"mus","senas":["nothing"]}': "unknown seña 'nothing'",
        '{"kind":"paso","amount":2}': "paso takes no amount",
        '{"kind":"declare","has_jugada":"yes"}': '"has_jugada" must be true or false',
        "[" * 30_000: "nested too deep",  # a review's answer: the bridge's log showed a RecursionError (stop 39)
    }
    for line, reason in cases.items():
        with pytest.raises(AnswerError, match=reason):
            action_from_json(line)
    assert answer_number("[" * 30_000) is None
    # The engine's card notation as one string is read too, and a discard comes out in canonical order.
    assert action_from_json('{"kind":"discard","cards":"3c 12o"}') == Action.discard(parse_cards("12o 3c"))
    assert action_from_json('{"type":"action","kind":"envido","amount":3}') == Action(ActionKind.ENVIDO, amount=3)


# ------------------------------------------------------------------------------------------------ matches


@pytest.mark.slow
def test_mus_match_play_stdio_plays_the_shell_bot_against_random_without_a_fault() -> None:
    """The documented command: `--stdio` makes BOT_B, the command after `--`, a stdio program. Sandboxed where
    this machine has bubblewrap, as `mus match play` runs its bots."""
    result = CliRunner().invoke(
        app, ["match", "play", "random", "--seed", "3", "--json", "--stdio", "--", "sh", str(EXAMPLE)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["teams"] == {"0": "random", "1": "first_legal"}, data
    assert data["termination"] == "normal" and data["faults"] == [], data


@pytest.mark.slow
def test_a_stdio_script_named_by_an_absolute_path_elsewhere_plays_from_its_own_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newcomer ran `mus match play random --stdio -- sh /abs/path/bot.sh` from another folder: the sandbox bound
    the current folder, not the script's, and the bot could not open its script. Its own folder is bound now."""
    (tmp_path / "here").mkdir()
    (tmp_path / "elsewhere").mkdir()
    script = tmp_path / "elsewhere" / EXAMPLE.name
    shutil.copy(EXAMPLE, script)
    monkeypatch.chdir(tmp_path / "here")
    result = CliRunner().invoke(
        app, ["match", "play", "random", "--seed", "3", "--json", "--stdio", "--", "sh", str(script)]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["faults"] == []
    # mus bot check ran such a command in the current folder still (a second newcomer): one rule for both now.
    result = CliRunner().invoke(app, ["bot", "check", "--json", "--stdio", "--", "sh", str(script)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["passed"], result.stdout


@pytest.mark.slow
def test_a_program_reads_hello_events_requests_and_the_outcome_then_its_input_ends(tmp_path: Path) -> None:
    """Unconfined, so the program can keep a copy of what it read: the lines come in the documented order, every
    request carries the time left and its legal answers, and the program's stderr is in the seat's log."""
    script = (
        f'echo "token: ${{MUS_TOKEN:-none}} referee: ${{MUS_REFEREE:-none}} frames: ${{MUS_FRAMES:-none}}" >&2; '
        f'tee "{tmp_path}/seat$$.jsonl" | sh {EXAMPLE}; echo "input ended" >&2'
    )
    played = _play(_shell_bot(script), seed=5)
    _check_clean(played)
    copies = sorted(tmp_path.glob("seat*.jsonl"))
    assert len(copies) == 2, copies  # one per stdio seat
    for copy in copies:
        lines = [json.loads(line) for line in copy.read_text().splitlines()]
        types = [line["type"] for line in lines]
        assert types[0] == "hello" and lines[0]["protocol"] == 1, lines[0]
        assert types[-1] == "outcome" and types.count("outcome") == 1, types[-3:]
        assert set(types) == {"hello", "event", "request", "outcome"}, set(types)
        assert types[1] == "event" and lines[1]["kind"] == "match_started", lines[1]
        requests = [line for line in lines if line["type"] == "request"]
        assert requests and all(request["legal"] and request["decision_time_left_ms"] > 0 for request in requests)
        assert all(len(request["cards"]) == 4 and request["attempt"] == 1 for request in requests)
        assert [request["number"] for request in requests] == list(range(1, len(requests) + 1))
        outcome = lines[-1]
        assert outcome["termination"] == "normal" and outcome["won"] == (outcome["winner"] == requests[0]["team"])
    for seat in (1, 3):
        log = played.logs[seat].read_text()
        assert "first_legal: outcome:" in log and "input ended" in log, log
        assert "token: none referee: none frames: none" in log, "the program talks to the bridge only"
        assert "joined over frames" in log, "the bridge took the frames of its own that its seat was offered"


@pytest.mark.slow
def test_an_unreadable_answer_is_rejected_told_and_asked_again(tmp_path: Path) -> None:
    """A program whose first answer is garbage and second is an illegal action: each costs the fault of an
    illegal action (the referee's rule), each is told in a `rejected` line with the reason, and the same decision
    is asked again (attempt 2, 3), where the ready-made answer is played. The match goes on to its end."""
    script = r"""
n=0
while IFS= read -r line; do
    case $line in
    '{"type":"rejected"'*) echo "told: $line" >&2 ;;
    '{"type":"request"'*)
        n=$((n + 1))
        case $line in *'"attempt":1,'*) ;; *) echo "asked again: $line" >&2 ;; esac
        if [ $n -eq 1 ]; then echo 'this is not JSON'
        elif [ $n -eq 2 ]; then echo '{"kind":"envido","amount":99}'
        else legal=${line#*\"legal\":\[}; echo "${legal%%\}*}}"
        fi ;;
    esac
done
"""
    played = _play(_shell_bot(script), options={"max_faults_before_forfeit": 10})
    logs = [path.read_text() for path in played.logs.values()]
    faults = _faults(played)
    assert [fault["cause"] for fault in faults] == ["illegal_action"] * 4, faults  # two per stdio seat
    assert {fault["seat"] for fault in faults} == {1, 3}
    for seat in (1, 3):
        log = logs[seat]
        told = [json.loads(line.removeprefix("told: ")) for line in log.splitlines() if line.startswith("told: ")]
        assert len(told) == 2, log
        assert "could not read your answer: not JSON" in told[0]["reason"] and told[0]["answer"] == "this is not JSON"
        assert "the Act carries no action" in told[0]["reason"] and "older than the referee" not in told[0]["reason"]
        assert 'request 1: cannot read your answer "this is not JSON": not JSON' in log, "the seat's log quotes it"
        assert "Traceback" not in log, "one line, not the SDK's traceback"
        assert told[1]["answer"] == '{"kind":"envido","amount":99}' and told[1]["number"] == 1, told[1]
        assert "could not read" not in told[1]["reason"] and told[1]["reason"], told[1]
        again = [json.loads(line.removeprefix("asked again: ")) for line in log.splitlines() if "asked again: " in line]
        assert [request["attempt"] for request in again] == [2, 3], again
        assert [request["rejection"] for request in again] == [told[0]["reason"], told[1]["reason"]]
        assert again[0]["number"] == again[1]["number"] == 1
    assert played.match.outcome is not None and played.match.outcome.termination is MatchTermination.NORMAL


@pytest.mark.slow
def test_an_answer_that_echoes_another_request_number_is_dropped() -> None:
    """A program that answers every request twice, first with a stale answer that names request 0: the bridge
    drops those and plays the others; no fault."""
    script = r"""
while IFS= read -r line; do
    case $line in
    '{"type":"request"'*)
        echo '{"number":0,"kind":"envido","amount":99}'
        legal=${line#*\"legal\":\[}; echo "${legal%%\}*}}" ;;
    esac
done
"""
    played = _play(_shell_bot(script))
    _check_clean(played)
    assert "dropped an answer to request 1 while" not in played.logs[1].read_text()
    assert "dropped an answer to request 0 while request 1 is open" in played.logs[1].read_text()


@pytest.mark.slow
def test_a_program_that_exits_mid_match_is_a_crash_of_its_seat() -> None:
    """The program answers two requests and exits 3: the bridge exits with its status, the referee records a
    crash for both stdio seats, and the bridge's log says what happened."""
    script = r"""
n=0
while IFS= read -r line; do
    case $line in
    '{"type":"request"'*)
        n=$((n + 1)); [ $n -gt 2 ] && exit 3
        legal=${line#*\"legal\":\[}; echo "${legal%%\}*}}" ;;
    esac
done
"""
    played = _play(_shell_bot(script))
    logs = [path.read_text() for path in played.logs.values()]
    crashes = [incident for incident in played.incidents if incident.cause is IncidentCause.CRASH]
    assert {incident.seat for incident in crashes} == {1, 3}, played.incidents
    assert all("exited with code 3" in incident.detail for incident in crashes), crashes
    for seat in (1, 3):
        assert "the seat has crashed (the bridge exits with 3" in logs[seat], logs[seat]


# ------------------------------------------------------------------------------------------------ sandboxed


@pytest.mark.slow
def test_in_a_bubblewrap_sandbox_the_bridge_runs_the_program_beside_it() -> None:
    """Both the bridge and the shell program in each seat's sandbox (the bridge's Python and clients/ are bound
    into every sandbox; the script's folder is the bot's folder): a whole match, no fault, no incident."""
    if not sandbox_available():
        pytest.skip(NO_SANDBOX_REASON)
    program = stdio_program(BotProgram("first_legal", ("sh", EXAMPLE.name), EXAMPLE.parent))
    rules = Rules.from_options(QUICK)
    played = asyncio.run(play_programs((resolve_program("random"), program), rules, 7, sandbox=Limits()))
    _check_clean(played)
    for seat in (1, 3):
        assert "first_legal: outcome:" in played.logs[seat].read_text()


@pytest.mark.slow
def test_a_league_of_a_bot_added_with_stdio_plays_sandboxed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`mus bot add NAME --stdio -- sh first_legal.sh` stores the bridge in front of the program (one content
    hash, no special case in the worker), and `mus league run` plays it in its sandbox against `random`."""
    if not sandbox_available():
        pytest.skip(NO_SANDBOX_REASON)
    monkeypatch.chdir(tmp_path)
    for name in ("MUS_DATABASE_URL", "MUS_BROKER_URL", "MUS_BROKER_DIR", "MUS_LOG_DIR"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "shbot"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / EXAMPLE.name)
    runner = CliRunner()

    def ok(*args: str) -> str:
        result = runner.invoke(app, list(args))
        assert result.exit_code == 0, result.output
        return result.stdout

    added = json.loads(ok("bot", "add", "shbot", "--stdio", "--json", "--", "sh", f"shbot/{EXAMPLE.name}"))
    assert added["command"] == ["python", "-m", "clients.stdio", "--", "sh", EXAMPLE.name], added
    assert added["language"] == "shell" and added["folder"] == str(folder), added
    ok("bot", "add", "rnd", "--json", "--", "python", "-m", "clients.bots.random")
    ok("league", "create", "shcup", "--bots", "shbot,rnd", "--matches-per-pairing", "2",
       "--option", "target_score=10", "--json")  # fmt: skip
    ok("league", "run", "shcup", "--workers", "1")
    exported = json.loads(ok("league", "export", "shcup", "--format", "json"))
    assert len(exported["matches"]) == 2
    for match in exported["matches"]:
        result = match["result"]
        assert result is not None and result["termination"] == "normal" and result["faults"] == [], match


def test_stdio_is_refused_with_remote_and_the_bridge_needs_a_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MUS_DATABASE_URL", f"sqlite:///{tmp_path / 'mus.db'}")
    result = CliRunner().invoke(app, ["bot", "add", "x", "--remote", "--stdio"])
    assert result.exit_code == 1 and "no --stdio" in result.stderr, result.output
    done = subprocess.run(
        [sys.executable, "-m", "clients.stdio"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2 and "give the program after `--`" in done.stderr, done.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "clients.stdio", "--", "/nonexistent/bot"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": os.environ.get("PATH", ""), "MUS_REFEREE": "unix:/nonexistent", "MUS_TOKEN": "t"},
    )
    assert missing.returncode == 1 and "cannot start /nonexistent/bot" in missing.stderr, missing.stderr


def test_with_seats_on_stdin_the_bridge_plays_two_seats_in_a_row_starting_the_program_for_each(
    tmp_path: Path,
) -> None:
    """MUS_SEATS=stdin (a persistent bot, docs/pool.md): the bridge's process lives across both matches; the
    program behind it, whose line protocol is one match long, is started for each seat; the bridge plays both
    seats over the frames the seat lines offer."""
    bridged = stdio_program(BotProgram("first_legal", ("sh", EXAMPLE.name), EXAMPLE.parent))
    program = BotProgram(bridged.name, bridged.command, bridged.cwd, persistent=True)
    result = two_seats_in_a_row(program, resolve_program("random"), Rules.from_options(QUICK), tmp_path / "pool")
    check_two_clean_seats_per_process(result)
    for log in result.logs:
        assert log.count("first_legal: outcome:") == 2 and "end of input after 2 seat(s)" in log, log
        assert log.count("joined over frames") == 2, f"both seats were played over the seat lines' frames: {log}"
