"""`mus bot check`: every example bot passes every check, and each deliberately broken bot fails the check it
breaks, with a reason a bot author can act on. Real bot processes (sandboxed where this machine allows), a real
referee over real gRPC, short clocks and one match per variant.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from clients.cpp.build import build_bot, missing_toolchain
from tests.cli.helpers import error_of, use_database_copy
from workers import checks
from workers.checks import STDIO_HINT, Status, output_tail
from workers.cli.main import app
from workers.db.session import ensure_schema, make_engine
from workers.launcher import BotProgram

REPO = Path(__file__).resolve().parents[2]
JS_DIR = REPO / "clients" / "js"
STDIO_EXAMPLE = REPO / "clients" / "stdio" / "examples" / "first_legal.sh"
JOIN = ["--join-timeout", "20"]
"""20 s to join: a sandboxed Python bot's start took over 5 s in a loaded CI run. A bot that joins does so at once,
so the long deadline costs no time; the one test of a bot that never joins sets its own."""
FAST = ["--matches", "1", "--decision-timeout", "2", *JOIN]
"""One match per variant on a 2 s decision clock: a check of a broken bot takes a few seconds."""
ONE_VARIANT = [*FAST, "--variant", "defaults"]
"""For a broken bot: one legal-play match, then the probe match."""
PASSING = ["--matches", "1", "--decision-timeout", "6", *JOIN]
"""For a good bot, which must pass: a 6 s clock, as one answer of the rules bot took 2.4 s on a loaded CI machine
(median 2 ms). A good bot answers at once, so the longer clock costs no time."""
CHECKS = (
    "handshake",
    "legal_play:defaults",
    "legal_play:4_reyes",
    "legal_play:both_answer",
    "legal_play:bot_declares",
    "legal_play:sequential_discards",
    "legal_play:uncapped",
    "illegal_action_retry",
    "decision_closed",
    "rejoin",
    "deadline",
)

runner = CliRunner()


def check(*args: str) -> tuple[Result, dict[str, Any]]:
    """`mus bot check --json ARGS`: the result and its report."""
    result = runner.invoke(app, ["bot", "check", "--json", *args])
    assert result.exit_code in (0, 1) and not isinstance(result.exception, AssertionError), result.output
    return result, json.loads(result.stdout)


def verdicts(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Each check's (status, summary)."""
    return {item["check"]: (item["status"], item["summary"]) for item in report["checks"]}


def assert_passes(result: Result, report: dict[str, Any]) -> None:
    found = verdicts(report)
    assert tuple(found) == CHECKS, found
    failing = {name: verdict for name, verdict in found.items() if verdict[0] != "pass"}
    assert not failing, failing
    assert report["passed"] is True and result.exit_code == 0
    times = report["decision_seconds"]
    assert times["count"] > 0 and times["max_s"] < times["decision_timeout_s"] == 6


BROKEN = "tests.support.broken_bots"


def broken(mode: str, *args: str, module: str = BROKEN) -> dict[str, tuple[str, str]]:
    """Check a broken bot: it must fail (exit code 1); returns the verdicts."""
    result, report = check(*(args or ONE_VARIANT), "--", sys.executable, "-m", module, mode)
    assert result.exit_code == 1 and report["passed"] is False, report
    return verdicts(report)


# ------------------------------------------------------------------------------------- the example bots pass


@pytest.mark.slow
@pytest.mark.parametrize("bot", ["random", "rules"])
def test_the_python_example_bots_pass_every_check(bot: str) -> None:
    assert_passes(*check(*PASSING, "--", sys.executable, "-m", f"clients.bots.{bot}"))


@pytest.mark.slow
def test_the_cpp_example_bot_passes_every_check() -> None:
    missing = missing_toolchain()
    if missing is not None:
        pytest.skip(f"C++ bot not built: {missing}")
    assert_passes(*check(*PASSING, "--", str(build_bot())))


@pytest.mark.slow
def test_the_javascript_example_bot_passes_every_check(node: str) -> None:
    assert_passes(*check(*PASSING, "--", node, str(JS_DIR / "bot.js")))


@pytest.mark.slow
def test_the_stdio_example_bot_passes_every_check() -> None:
    """The shell bot of clients/stdio/examples, behind the stdio bridge (`--stdio`), as `mus bot add --stdio`."""
    result, report = check(*PASSING, "--stdio", "--", "sh", str(STDIO_EXAMPLE))
    assert_passes(result, report)
    assert report["bot"] == "first_legal" and report["command"][1:4] == ["-m", "clients.stdio", "--"], report


def test_a_persistent_bot_also_plays_two_seats_in_a_row_from_each_process() -> None:
    """`--persistent` (and a bot added with it): two more matches, its seats given on its processes' stdin."""
    result, report = check(*ONE_VARIANT, "--persistent", "--", sys.executable, "-m", "clients.bots.random")
    found = verdicts(report)
    assert list(found)[-1] == "persistent" and found["persistent"][0] == "pass", found
    assert report["passed"] is True and result.exit_code == 0


def test_a_reference_seat_that_fails_stops_the_check_as_this_machines_error_not_a_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reference seats play in the check's process: one that breaks says nothing about the bot."""

    async def broken_reference(*args: object) -> None:
        raise RuntimeError("the reference seat broke")

    monkeypatch.setattr(checks, "play_in_process", broken_reference)
    refused = error_of(
        runner.invoke(app, ["bot", "check", *ONE_VARIANT, "--", sys.executable, "-m", "clients.bots.random"])
    )
    assert "a reference seat failed: RuntimeError: the reference seat broke" in refused


# ------------------------------------------------------------------------------------- broken bots fail, saying why


@pytest.mark.slow
def test_a_bot_that_never_joins_fails_the_handshake_and_the_rest_is_skipped() -> None:
    found = broken("never_joins", "--join-timeout", "2", "--variant", "defaults")
    status, summary = found["handshake"]
    assert status == "fail" and summary == "seat 0 did not join within 2 s (no Join on a Play stream)"
    assert {verdict[0] for name, verdict in found.items() if name != "handshake"} == {"skip"}
    assert found["rejoin"][1] == "skipped: the handshake failed"


@pytest.mark.slow
def test_a_bot_with_the_wrong_protocol_version_fails_the_handshake_naming_both_versions() -> None:
    status, summary = broken("wrong_version")["handshake"]
    assert status == "fail"
    assert re.fullmatch(
        r"seat [02] sent Join.protocol_version = 2: the referee speaks 1 \(it refused the stream with"
        r" FAILED_PRECONDITION\)",
        summary,
    ), summary


@pytest.mark.slow
def test_a_bot_that_plays_an_illegal_action_every_time_fails_legal_play_with_the_referees_reason() -> None:
    found = broken("illegal", module="tests.support.misbehaving")
    assert found["handshake"][0] == "pass"
    status, summary = found["legal_play:defaults"]
    assert status == "fail"
    assert summary.startswith("match 01-defaults (seed 1): seat 0, request ") and ": ILLEGAL_ACTION: " in summary
    assert summary.endswith("(and 2 more)"), "three illegal actions: the team forfeits"


@pytest.mark.slow
def test_a_bot_broken_over_the_frames_it_is_offered_fails_legal_play_in_those_matches_only() -> None:
    """Every other legal-play match offers frames (MUS_FRAMES), as a league worker's referee does: a bot that
    breaks them is caught, while its matches over gRPC alone pass."""
    command = (sys.executable, "-m", "tests.support.broken_bots", "bad_frames")
    result, report = check(*FAST, "--matches", "2", "--variant", "defaults", "--", *command)
    assert result.exit_code == 1
    found = {item["check"]: item for item in report["checks"]}
    assert found["handshake"]["status"] == found["rejoin"]["status"] == "pass", "the probes' match is over gRPC"
    legal = found["legal_play:defaults"]
    lines = [legal["summary"], *legal["details"]]
    assert legal["status"] == "fail" and "protocol_error: unreadable message: FrameError" in lines[0], legal
    assert any(
        "match 01-defaults (seed 1): seat 0: protocol_error: unreadable message: FrameError" in line for line in lines
    )
    assert not any("02-defaults" in line for line in legal["details"]), "the second match, over gRPC alone, passed"


THIRD_REQUEST_ILLEGAL = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message["type"] == "request":
        wrong = message["number"] == 3 and message["attempt"] == 1
        answer = {"kind": "envido", "amount": -1} if wrong else message["legal"][0]
        print(json.dumps(answer), flush=True)
"""
"""A stdio program that answers its request number 3 with an action never legal, the rest with the first legal."""


@pytest.mark.slow
def test_a_failure_names_the_request_by_the_number_a_stdio_program_is_given() -> None:
    """The decision id is the table's, which a stdio program never sees (newcomer walkthrough, stop 34)."""
    result, report = check(*ONE_VARIANT, "--stdio", "--", sys.executable, "-c", THIRD_REQUEST_ILLEGAL)
    assert result.exit_code == 1, result.output
    status, summary = verdicts(report)["legal_play:defaults"]
    assert status == "fail" and re.match(
        r"match 01-defaults \(seed 1\): seat 0, request 3 \(decision \d+, \w+\): ILLEGAL_ACTION: ", summary
    ), summary


@pytest.mark.slow
def test_a_bot_that_crashes_mid_match_fails_legal_play_naming_the_crash_first() -> None:
    """Its decisions then time out: the summary led with "a fault (timeout)", and the crash that caused it came
    after (newcomer walkthrough, stop 34)."""
    status, summary = broken("crashes")["legal_play:defaults"]
    assert status == "fail" and "crash: the bot process exited with code 3" in summary.split(" (and ")[0], summary


@pytest.mark.slow
def test_a_bot_too_slow_for_its_clock_fails_the_deadline_with_its_times() -> None:
    found = broken("slow", "--matches", "1", "--decision-timeout", "0.3", "--variant", "defaults",
                   module="tests.support.misbehaving")  # fmt: skip
    status, summary = found["deadline"]
    assert status == "fail" and "past decision_timeout_s (first: match 01-defaults, seat 0, request " in summary
    assert "(decision_timeout_s = 0.3 s)" in summary and "median " in summary and "max " in summary
    status, summary = found["legal_play:defaults"]
    assert status == "fail" and "timed out (answered after " in summary


@pytest.mark.slow
def test_a_bot_that_does_not_answer_again_after_illegal_action_fails_that_probe() -> None:
    found = broken("no_retry")
    status, summary = found["illegal_action_retry"]
    assert status == "fail" and summary.startswith("after ILLEGAL_ACTION on decision ")
    assert "the bot sent nothing for " in summary and "the decision timed out" in summary
    assert found["legal_play:defaults"][0] == "pass" and found["decision_closed"][0] == "pass"
    assert found["rejoin"][0] == "pass"


@pytest.mark.slow
def test_a_bot_that_answers_a_closed_decision_again_fails_that_probe() -> None:
    found = broken("stale_answer")
    status, summary = found["decision_closed"]
    assert status == "fail" and summary.startswith("after DECISION_CLOSED for decision ")
    assert "again (a closed decision is over: ignore the rejection and carry on)" in summary
    assert found["illegal_action_retry"][0] == "pass" and found["rejoin"][0] == "pass"


@pytest.mark.slow
def test_a_bot_that_does_not_rejoin_after_a_drop_fails_that_probe_quoting_its_output() -> None:
    result, report = check(*ONE_VARIANT, "--", sys.executable, "-m", "tests.support.broken_bots", "no_rejoin")
    assert result.exit_code == 1
    rejoin = next(item for item in report["checks"] if item["check"] == "rejoin")
    assert rejoin["status"] == "fail"
    assert rejoin["summary"] == "after the dropped stream the bot's process ended (the bot process exited with code 1)"
    assert any("UNAVAILABLE" in line and "giving up" in line for line in rejoin["details"]), rejoin["details"]


@pytest.mark.slow
def test_a_bot_that_rejoins_past_its_next_event_fails_that_probe() -> None:
    status, summary = broken("skip_events")["rejoin"]
    assert status == "fail" and summary.startswith("it joined again with next_seq ")
    assert ": it would miss events " in summary


# ------------------------------------------------------------------------------------- the command


@pytest.mark.slow
def test_a_persistent_bot_whose_process_plays_one_seat_fails_that_check_and_only_that_one() -> None:
    result, report = check("--persistent", *ONE_VARIANT, "--", sys.executable, "-m", BROKEN, "one_seat")
    found = verdicts(report)
    failing = {name: verdict for name, verdict in found.items() if verdict[0] != "pass"}
    assert result.exit_code == 1 and list(failing) == ["persistent"], found
    summary = failing["persistent"][1]
    assert summary.startswith("its processes did not last: 4 were started") or (
        "crash: the pooled bot process exited with code 0" in summary  # given its next seat as it was exiting
    ), failing
    details = next(item["details"] for item in report["checks"] if item["check"] == "persistent")
    # What to do about it:
    assert any("reads the next after each seat until its input ends" in line for line in details), details


RAISES = """\
from clients.bots.passive_bot import PassiveBot
from clients.sdk.runner import run_main


class Raises(PassiveBot):
    def decide(self, view):
        raise ValueError("the bug the author must see")


raise SystemExit(run_main(Raises()))
"""


@pytest.mark.slow
def test_an_sdk_bot_whose_decide_raises_is_shown_its_own_error_from_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK sends no action when the bot raised (the referee says "action kind is unset"): the check quotes the
    seat's output, where the SDK printed the exception (a newcomer saw only the unset kind), and each rejection
    once (it saw the same line three times)."""
    (tmp_path / "raises.py").write_text(RAISES)
    monkeypatch.chdir(tmp_path)  # the bot's folder: its sandbox binds it
    result, report = check(*ONE_VARIANT, "--", sys.executable, "raises.py")
    assert result.exit_code == 1
    legal = next(item for item in report["checks"] if item["check"] == "legal_play:defaults")
    assert legal["status"] == "fail" and "unset" in legal["summary"], legal
    assert any("the bug the author must see" in line for line in legal["details"]), legal
    assert len(set(legal["details"])) == len(legal["details"]), legal


@pytest.mark.slow
def test_the_text_report_has_a_line_per_check_and_the_failures_reasons(tmp_path: Path) -> None:
    args = ["bot", "check", *ONE_VARIANT, "--logs", str(tmp_path), "--"]
    result = runner.invoke(app, [*args, sys.executable, "-m", "tests.support.broken_bots", "wrong_version"])
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert re.match(r"✗ handshake and protocol version: seat [02] sent Join.protocol_version = 2: ", lines[0])
    assert "- legal play: defaults: skipped: the handshake failed" in lines
    name = Path(sys.executable).name
    assert lines[-1] == (
        f"Failed: {name} (calling itself wrong_version) did not pass 6 of 6 checks. Its seats' output: {tmp_path}"
    )
    logs = {path.name for path in tmp_path.iterdir()}
    # the bot's two seats; the reference seats play in the check's own process and write no log
    assert logs == {f"01-defaults-seat0-{name}.log", f"01-defaults-seat2-{name}.log"}, logs


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh, migrated SQLite file: migrated once per module and only ever copied (`database`)."""
    path = tmp_path_factory.mktemp("migrated") / "mus.db"
    engine = make_engine(f"sqlite:///{path}")
    ensure_schema(engine)
    engine.dispose()
    return path


@pytest.fixture
def database(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test's own copy of `template` as MUS_DATABASE_URL; the working directory is the test's own folder."""
    return use_database_copy(template, tmp_path, monkeypatch)


@pytest.mark.slow
def test_a_registered_bot_is_checked_by_name_from_its_own_folder(database: str, tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "bot.py").write_text("from clients.bots.random_bot import main\n\nmain()\n")
    added = runner.invoke(app, ["bot", "add", "mine", "--", sys.executable, "mine/bot.py"])
    assert added.exit_code == 0, added.output
    assert added.stdout.splitlines()[-1] == "Check it before a league: mus bot check mine"
    result, report = check(*ONE_VARIANT, "mine")
    assert result.exit_code == 0 and report["passed"], report
    assert report["bot"] == "mine" and report["command"] == [sys.executable, "bot.py"]


@pytest.mark.slow
def test_bot_add_check_runs_the_check_on_the_new_version_and_fails_with_it(database: str, tmp_path: Path) -> None:
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "bot.py").write_text("print('not a bot yet')\n")  # exits at once: it never joins
    result = runner.invoke(app, ["bot", "add", "old", "--check", "--json", "--", sys.executable, "old/bot.py"])
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["bot"] == "old" and data["version"] == 1, "the bot is registered whatever the check says"
    handshake = data["check"]["checks"][0]
    assert handshake["check"] == "handshake" and handshake["status"] == "fail"
    assert re.fullmatch(r"seat [02]'s process ended before it joined \(the bot process exited with code 0\)",
                        handshake["summary"]), handshake  # fmt: skip
    assert STDIO_HINT in handshake["details"], "a review's Perl bot, checked without --stdio, was told nothing more"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give a registered bot's NAME, or its command after `--`"),
        (["mine", "--", "python", "bot.py"], "give a registered bot's NAME or a command after `--`, not both"),
        (["--variant", "5_reyes", "--", "python"], "unknown variant '5_reyes': the variants are defaults, 4_reyes"),
        (["--matches", "0", "--", "python"], "--matches must be at least 1"),
        (["--option", "deck_mode=5_reyes", "--", "python"], "deck_mode must be one of"),
        (["--", "no-such-program-here"], "unknown bot 'no-such-program-here'"),
    ],
    ids=["nothing", "both", "variant", "matches", "option", "program"],
)
def test_bad_arguments_are_one_line_errors(args: list[str], message: str) -> None:
    said = error_of(runner.invoke(app, ["bot", "check", *args]))
    assert message in said
    if args[-1:] == ["no-such-program-here"]:  # not told to give, after `--`, the command it gave there (helper-64)
        assert "`mus bot check NAME` checks it" in " ".join(said.split()), said


def test_a_remote_or_unknown_bot_by_name_is_a_one_line_error(database: str) -> None:
    assert runner.invoke(app, ["bot", "add", "faraway", "--remote"]).exit_code == 0
    assert "bot 'faraway' is a remote bot" in error_of(runner.invoke(app, ["bot", "check", "faraway"]))
    assert "nobody" in error_of(runner.invoke(app, ["bot", "check", "nobody"]))
    for flag in ("--stdio", "--persistent"):
        refused = error_of(runner.invoke(app, ["bot", "check", flag, "faraway"]))
        assert "--stdio and --persistent go with `-- COMMAND`" in refused


@pytest.mark.parametrize(
    ("status", "given", "kept"),
    [(Status.PASS, False, False), (Status.FAIL, False, True), (Status.PASS, True, True)],
    ids=["passed-temp", "failed-temp", "passed-given"],
)
def test_a_passing_check_removes_the_temp_folder_of_its_seats_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: Status, given: bool, kept: bool
) -> None:
    """Every `mus bot check` left a mus-check-logs-* folder in /tmp, pass or fail (newcomer walkthrough, stop
    33): a failed check names its folder, so that one stays, and so does a folder given with --logs."""
    from workers.checks import CheckReport, CheckResult, DecisionTimes
    from workers.cli import check_cmd

    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "seat0.log").write_text("paso\n")

    async def checked(program: object, config: object, **hooks: object) -> CheckReport:
        result = CheckResult("handshake", "handshake", status, "ok")
        return CheckReport("bot", ("bot",), (result,), DecisionTimes(0, None, None, 2.0), folder, False)

    monkeypatch.setattr(check_cmd, "run_check", checked)
    config = check_cmd.check_config(logs=folder if given else None)
    check_cmd.check_program(BotProgram("bot", ("bot",)), config, json_output=False)
    assert folder.exists() == kept


def test_a_failures_quoted_output_starts_at_the_error_line_above_a_stack_traces_last_frames(tmp_path: Path) -> None:
    """A newcomer's Node bot was quoted `at Function.executeUserEntryPoint ... Node.js v20`: the error, 13 lines up,
    was left out (helper-62). A plain tail is quoted as it was."""
    node = tmp_path / "node.log"
    node.write_text(
        "/bots/js/bot.js:12\n    const client = new PlayClient(address);\n                   ^\n\n"
        "TypeError: Channel target must be a string\n"
        + "".join(f"    at frame{index} (node:internal/modules:{index})\n" for index in range(9))
        + "\nNode.js v20.20.2\n"
    )
    quoted = output_tail(node)
    assert quoted[0].startswith("its first error and last lines of output") and quoted[1] == (
        "  TypeError: Channel target must be a string"
    ), quoted
    assert quoted[-1] == "  Node.js v20.20.2", quoted
    bridge = tmp_path / "bridge.log"
    bridge.write_text(
        'x stdio-bridge ERROR request 1: cannot read your answer "thinking...": not JSON. Only answers go to stdout\n'
        + "x stdio-bridge INFO seat 1: fault\n" * 4
    )
    assert "cannot read your answer" in output_tail(bridge)[1], output_tail(bridge)
    plain = tmp_path / "plain.log"
    plain.write_text("one\ntwo\nthree\nfour\n")
    assert output_tail(plain)[1:] == ("  two", "  three", "  four")
    # The bridge's advice behind its timestamp, about 230 characters, was cut before its end at 200 (stop 43).
    advice = (
        '2026-12-06 15:05:06,993 stdio-bridge ERROR request 1: cannot read your answer "thinking...": not JSON'
        " (Expecting value: line 1 column 1 (char 0)). Only answers go to stdout, one JSON line each; log to stderr"
    )
    plain.write_text(f"{advice}\n{'x' * 1000}\n")
    assert output_tail(plain)[1:] == (f"  {advice}", f"  {'x' * 400} [cut]"), output_tail(plain)


def test_a_quoted_output_shows_what_a_terminal_would_act_on_as_escapes(tmp_path: Path) -> None:
    """A review's bot wrote OSC 52 (set the clipboard), a window title and cursor moves that hid the lines above
    onto the terminal of whoever checked it (stop 39): quoted, each is written out, the rest as it was."""
    log = tmp_path / "seat.log"
    log.write_text("Error: \x1b]52;c;ZWNobyBwd25lZA==\x1b\\ \x1b]0;title\x07\x1b[1A\x1b[2K\x9b2J \u202eé\tok\n")
    quoted = output_tail(log)
    written_out = r"\x1b]52;c;ZWNobyBwd25lZA==\x1b\ \x1b]0;title\x07\x1b[1A\x1b[2K\x9b2J \u202e"
    assert quoted[1] == f"  Error: {written_out}é\tok", quoted
    assert all(char.isprintable() or char == "\t" for line in quoted for char in line), quoted


UNFLUSHED = """import json, sys
out = open(sys.stdout.fileno(), "w", buffering=65536)  # a C program's stdout on a pipe: answers sit in its buffer
for line in sys.stdin:
    message = json.loads(line)
    if message["type"] == "request":
        out.write(json.dumps(message["legal"][0] | {"number": message["number"]}) + "\\n")
"""


@pytest.mark.slow
def test_a_stdio_program_that_does_not_flush_its_answers_is_told_so_in_the_output_the_check_quotes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newcomer's C bot forgot to flush: its seats only timed out, its output empty of any hint (helper-62)."""
    (tmp_path / "unflushed.py").write_text(UNFLUSHED)
    monkeypatch.chdir(tmp_path)
    args = ["--matches", "1", "--decision-timeout", "1", *JOIN, "--variant", "defaults", "--stdio"]
    result, report = check(*args, "--", "python3", "unflushed.py")
    assert result.exit_code == 1
    legal = next(item for item in report["checks"] if item["check"] == "legal_play:defaults")
    assert "timed out (no answer" in legal["summary"], legal
    assert any("its stdout is not flushed: flush after each line" in line for line in legal["details"]), legal
    played = runner.invoke(
        app,
        [
            "match",
            "play",
            "random",
            "-o",
            "decision_timeout_s=1",
            "-o",
            "time_bank_s=0",
            "--stdio",
            "--",
            "python3",
            "unflushed.py",
        ],
    )
    assert played.exit_code == 3 and "its stdout is not flushed" in played.stdout, played.output


@pytest.mark.slow
def test_a_probe_not_reached_counts_the_decisions_of_each_of_the_bots_seats(tmp_path: Path) -> None:
    """A bot that prints garbage forfeits on its partner seat's answers before its probed seat is asked: the skip
    said "after seat 0 was asked 0 decisions", read as a miscount (newcomer walkthrough, stop 43)."""
    (tmp_path / "garbage.sh").write_text("while read line; do echo thinking...; done\n")
    result, report = check(*ONE_VARIANT, "--stdio", "--", "sh", str(tmp_path / "garbage.sh"))
    assert result.exit_code == 1, result.output
    status, summary = verdicts(report)["illegal_action_retry"]
    assert status == "skip" and re.search(r"after its seats were asked \d+ \(seat 0\) and \d+ \(seat 2\)", summary)


def test_the_summary_names_a_command_by_its_program_and_the_name_it_gives_itself_only_beside_it(tmp_path: Path) -> None:
    """A review's bot, `python evil.py`, called itself `random`: the summary said "Passed: random" (stop 44)."""
    from rich.console import Console

    from workers.checks import CheckReport, CheckResult, DecisionTimes
    from workers.cli.check_cmd import print_summary

    passed = (CheckResult("handshake", "Handshake", Status.PASS, "joined"),)
    times = DecisionTimes(0, None, None, 10.0)

    def summary(report: CheckReport, name: str | None = None) -> str:
        console = Console(record=True, width=200)
        print_summary(console, report, name)
        return console.export_text().strip()

    claims = CheckReport("evil", ("python", "evil.py"), passed, times, tmp_path, True, bot_name="random")
    assert summary(claims) == "Passed: evil (calling itself random) passed all 1 checks."
    assert summary(claims, "evil") == "Passed: evil (calling itself random) passed all 1 checks."
    honest = CheckReport("mybot", ("python", "mybot.py"), passed, times, tmp_path, True, bot_name="mybot")
    assert summary(honest) == "Passed: mybot passed all 1 checks."
