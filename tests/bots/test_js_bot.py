"""The JavaScript example bot (clients/js): installed with `npm ci`, then real matches over real gRPC against the
Python `rules` bot (through `mus match play` and the match runner), a dropped connection joined again, a match
over a unix socket with the bot in a bubblewrap sandbox that holds nothing but its own folder, a small league
run by the CLI, and the remote mode through the referee's lobby.

Skipped, with the reason, only where there is no node or npm.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from referee.engine.events import EventKind
from referee.engine.match import Match
from referee.engine.outcome import MatchTermination
from referee.engine.rules import Rules
from referee.service.lobby import token_sha256
from referee.service.server import start_server
from referee.service.servicer import Referee
from referee.service.table import Incident, Table, TableStatus
from tests.support.frames_seat import refused_over_frames
from tests.support.pooled_seats import check_two_clean_seats_per_process, two_seats_in_a_row
from tests.support.proxy import DropOnceProxy, play_refused, play_table
from workers.cli.main import app
from workers.launcher import BotProcess, BotProgram, launch_bot, resolve_program
from workers.matches import PlayedMatch, play_programs

pytestmark = pytest.mark.slow  # every test runs the JavaScript bot under node

JS_DIR = Path(__file__).resolve().parents[2] / "clients" / "js"
EXIT_MARK = "exit status"
QUICK = {"target_score": 15}  # short games: every match here plays a few hands, not a few dozen


def _reporting(node: str, name: str = "js-bot") -> BotProgram:
    """The JS bot, run by a shell that writes its exit status to the seat's log once it has exited."""
    script = f'"$0" "$@"; echo "{EXIT_MARK} $?" >&2'
    return BotProgram(name, ("sh", "-c", script, node, str(JS_DIR / "bot.js")))


def _check_finished_cleanly(
    match: Match | None, incidents: Sequence[Incident], logs: Sequence[Path], js_seats: set[int]
) -> None:
    """Finished normally, with no fault, no incident, no rejected action, and every JS seat exited 0."""
    assert match is not None and match.outcome is not None, [path.read_text() for path in logs]
    assert not incidents
    assert match.log, "no decision was made"
    assert [event for event in match.events if event.kind is EventKind.FAULT] == []
    assert match.outcome is not None and match.outcome.termination is MatchTermination.NORMAL
    assert match.outcome.faults == (0, 0)
    for seat in js_seats:
        text = logs[seat].read_text()
        assert f"{EXIT_MARK} 0" in text, text
        assert "rejected" not in text and "strategy failed" not in text, text
        assert "outcome:" in text, text


def test_mus_match_play_runs_it_against_the_rules_bot(node: str) -> None:
    """The README's command; `mus match play`'s own options go before the `--`, the bot's command after it."""
    bot = str(JS_DIR / "bot.js")
    result = CliRunner().invoke(app, ["match", "play", "rules", "--seed", "3", "--json", "--", node, bot])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["termination"] == "normal" and data["faults"] == [], data
    assert data["teams"] == {"0": "rules", "1": "js-bot"}, "named by its Join.bot_name, not `node`"


def test_it_plays_a_whole_match_against_the_rules_bot_without_a_fault(node: str) -> None:
    """As team 0 here (the `mus match play` test has it as team 1): no fault, no rejection, exit status 0."""
    programs = (_reporting(node), resolve_program("rules"))
    played: PlayedMatch = asyncio.run(play_programs(programs, Rules.from_options(QUICK), 4))
    _check_finished_cleanly(played.match, played.incidents, [played.logs[seat] for seat in range(4)], {0, 2})
    assert {0, 2} <= {step.seat for step in played.match.log}, "both JS seats decided"
    for seat in (0, 2):  # the frames of its own that a worker's referee offers each seat (MUS_FRAMES)
        assert f"over frames: seat {seat}: " in played.logs[seat].read_text()


def test_bad_arguments_and_missing_settings_are_one_line_errors(node: str) -> None:
    bot = str(JS_DIR / "bot.js")
    cases = [
        ([bot, "--json"], {"MUS_REFEREE": "127.0.0.1:1", "MUS_TOKEN": "t"}, 'unknown argument "--json"'),
        ([bot], {"MUS_TOKEN": "t"}, "MUS_REFEREE is not set"),
        ([bot], {"MUS_REFEREE": "127.0.0.1:1"}, "MUS_TOKEN is not set"),
        ([bot, "--remote", "--max-matches", "0"], {}, "--max-matches takes an integer >= 1"),
        ([bot], {"MUS_REFEREE": "127.0.0.1:1", "MUS_TOKEN": "t", "MUS_PROTO_DIR": "/nowhere"}, "MUS_PROTO_DIR"),
        ([bot, "--strategy", "/nowhere.js"], {"MUS_REFEREE": "127.0.0.1:1", "MUS_TOKEN": "t"}, "cannot load"),
        # A newcomer's relative path, taken from the folder the bot ran in, not the bot's (stop 43): it says so.
        (
            [bot, "--strategy", "mine.js"],
            {"MUS_REFEREE": "127.0.0.1:1", "MUS_TOKEN": "t"},
            f"cannot load the strategy mine.js (a path from the folder the bot runs in, {Path.cwd()})",
        ),
    ]
    for argv, env, message in cases:
        done = subprocess.run([node, *argv], env=env, capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 1, (argv, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("js-bot: ") and message in lines[0], (argv, done.stderr)


def test_an_unknown_seat_token_is_a_one_line_error(node: str) -> None:
    async def run() -> subprocess.CompletedProcess[str]:
        server, port = await start_server(Referee(), "127.0.0.1:0")
        try:
            env = {"MUS_REFEREE": f"127.0.0.1:{port}", "MUS_TOKEN": "not-a-seat-token"}
            process = await asyncio.create_subprocess_exec(
                node, str(JS_DIR / "bot.js"), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
            )
            out, err = await asyncio.wait_for(process.communicate(), 30)
        finally:
            await server.stop(grace=None)
        return subprocess.CompletedProcess([], process.returncode or 0, out.decode(), err.decode())

    done = asyncio.run(run())
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "UNAUTHENTICATED" in lines[0], done.stderr


SPOILED_ONCE = """
const builtin = require(%s);
let spoiled = false;
// The first bet decision gets an action of the wrong kind: an illegal action, rejected with one fault.
exports.chooseAction = (request, rules) => {
  if (!spoiled && request.kind === 'DECISION_KIND_BET') {
    spoiled = true;
    return { kind: 'ACTION_KIND_DISCARD', cards: [] };
  }
  return builtin.chooseAction(request, rules);
};
"""


def test_an_illegal_action_is_answered_again_with_a_legal_one(node: str, tmp_path: Path) -> None:
    """Under illegal_action_policy = retry the decision stays open: the bot answers it again and plays on."""
    strategy = tmp_path / "spoiled.js"
    strategy.write_text(SPOILED_ONCE % json.dumps(str(JS_DIR / "strategy.js")))
    script = f'"$0" "$@"; echo "{EXIT_MARK} $?" >&2'
    spoiled = BotProgram("js-bot", ("sh", "-c", script, node, str(JS_DIR / "bot.js"), "--strategy", str(strategy)))
    played = asyncio.run(play_programs((spoiled, resolve_program("rules")), Rules.from_options(QUICK), 12))
    match = played.match
    assert match.outcome is not None and match.outcome.termination is MatchTermination.NORMAL
    assert match.outcome.faults == (2, 0), "one illegal action per JS seat"
    for seat in (0, 2):
        log = played.logs[seat].read_text()
        assert log.count("action rejected (REJECTION_CODE_ILLEGAL_ACTION)") == 1, log
        assert f"{EXIT_MARK} 0" in log, log


# ------------------------------------------------------------------------------------- a dropped connection


def test_a_dropped_connection_is_joined_again_from_the_next_event(node: str, tmp_path: Path) -> None:
    async def run() -> tuple[list[int | None], DropOnceProxy, Table, tuple[Path, ...]]:
        referee = Referee()
        server, port = await start_server(referee, "127.0.0.1:0")
        proxy = DropOnceProxy(port, drop_after=3000)
        proxy_server = await asyncio.start_server(proxy.handle, "127.0.0.1", 0)
        proxy_port = proxy_server.sockets[0].getsockname()[1]
        table = referee.create_table(Rules.from_options(QUICK), 21, ["js-bot", "rules"] * 2)
        programs = [_reporting(node), resolve_program("rules")] * 2
        addresses = [f"127.0.0.1:{proxy_port if seat == 0 else port}" for seat in range(4)]
        logs = tuple(tmp_path / f"seat{seat}.log" for seat in range(4))
        try:
            codes = await play_table(table, programs, addresses, logs)
        finally:
            proxy_server.close()
            await server.stop(grace=1.0)
        return codes, proxy, table, logs

    codes, proxy, table, logs = asyncio.run(run())
    assert proxy.dropped, "the match ended before the proxy cut the connection: lower drop_after"
    assert codes == [0, 0, 0, 0]
    assert table.status is TableStatus.FINISHED
    _check_finished_cleanly(table.match, table.incidents, logs, {0, 2})
    log = logs[0].read_text()
    assert "stream ended (" in log and "joined again from event" in log, log
    assert proxy.connections >= 2


def test_a_join_refused_as_resource_exhausted_is_tried_again(
    node: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A referee full of streams waiting to join refuses a new one RESOURCE_EXHAUSTED and closes its oldest to make
    room: the bot joins again instead of exiting (a review's flood turned that into a crash and a forfeit)."""
    logs = tuple(tmp_path / f"seat{seat}.log" for seat in range(4))
    programs = [_reporting(node), resolve_program("rules")] * 2
    codes, table, refusals = play_refused(monkeypatch, Rules.from_options(QUICK), 22, programs, [0, 2], logs)
    assert codes == [0, 0, 0, 0] and table.status is TableStatus.FINISHED
    assert not any(refusals.values()), "each JS seat was refused twice"
    assert "stream ended (RESOURCE_EXHAUSTED" in logs[0].read_text()


# ------------------------------------------------------------------------------------- a unix socket, sandboxed


def _sandbox_command(socket_dir: Path) -> list[str] | None:
    """bwrap with no network, only /usr, the bot's folder (read-only) and the referee's socket folder; None
    where bubblewrap is missing or cannot make a sandbox here."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    command = [
        bwrap, "--unshare-all", "--die-with-parent", "--clearenv",
        "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
        "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
        "--ro-bind", str(JS_DIR), "/bot", "--bind", str(socket_dir), "/run/mus", "--chdir", "/bot",
    ]  # fmt: skip
    probe = subprocess.run([*command, "/usr/bin/node", "-e", "0"], capture_output=True, timeout=30, check=False)
    return command if probe.returncode == 0 else None


@contextlib.contextmanager
def _short_dir() -> Iterator[Path]:
    """A folder whose path is short enough for a unix socket (108 bytes at most)."""
    path = Path(tempfile.mkdtemp(prefix="mus-js-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_it_plays_over_a_unix_socket_in_a_sandbox_with_only_its_own_folder(node: str, tmp_path: Path) -> None:
    with _short_dir() as socket_dir:
        sandbox = _sandbox_command(socket_dir)
        if sandbox is None:
            pytest.skip("bubblewrap is missing or cannot make a sandbox here")
        socket = socket_dir / "referee.sock"
        inside = f"unix:/run/mus/{socket.name}"
        # The seat token comes from the launcher's environment, which the sandbox clears: pass it in by name.
        script = (
            f'{shlex.join(sandbox)} --setenv MUS_REFEREE {inside} --setenv MUS_TOKEN "$MUS_TOKEN" '
            f'/usr/bin/node bot.js; echo "{EXIT_MARK} $?" >&2'
        )
        sandboxed = BotProgram("js-bot", ("sh", "-c", script))

        async def run() -> tuple[list[int | None], Table, tuple[Path, ...]]:
            referee = Referee()
            server, _ = await start_server(referee, f"unix:{socket}")
            table = referee.create_table(Rules.from_options(QUICK), 8, ["rules", "js-bot"] * 2)
            logs = tuple(tmp_path / f"seat{seat}.log" for seat in range(4))
            try:
                codes = await play_table(table, [resolve_program("rules"), sandboxed] * 2, [f"unix:{socket}"] * 4, logs)
            finally:
                await server.stop(grace=1.0)
            return codes, table, logs

        codes, table, logs = asyncio.run(run())
    assert codes == [0, 0, 0, 0], [path.read_text() for path in logs]
    assert table.status is TableStatus.FINISHED
    _check_finished_cleanly(table.match, table.incidents, logs, {1, 3})


# ------------------------------------------------------------------------------------- remote, through the lobby


async def _wait_for_line(path: Path, text: str, process: asyncio.subprocess.Process, within_s: float = 30) -> None:
    deadline = time.monotonic() + within_s
    while text not in path.read_text():
        assert process.returncode is None and time.monotonic() < deadline, path.read_text()
        await asyncio.sleep(0.05)


def test_remote_mode_takes_both_seats_of_a_match_from_the_lobby(node: str, tmp_path: Path) -> None:
    token = "js-remote-t0ken"
    log_path = tmp_path / "remote.log"

    async def run() -> tuple[int | None, Table, tuple[Path, ...]]:
        referee = Referee()
        server, port = await start_server(referee, "127.0.0.1:0")
        env = dict(os.environ, MUS_REFEREE=f"127.0.0.1:{port}", MUS_TOKEN=token)
        with log_path.open("w") as output:
            bot = await asyncio.create_subprocess_exec(
                node, str(JS_DIR / "bot.js"), "--remote", "--matches", "1", env=env, stdout=output, stderr=output
            )
        hosted: list[BotProcess] = []
        logs = tuple(tmp_path / f"seat{seat}.log" for seat in range(4))
        try:
            # Its token is unknown until a league registers it: the bot waits and asks again.
            await _wait_for_line(log_path, "does not know this bot token yet", bot)
            referee.lobby.register("jsremote", token_sha256(token))
            await _wait_for_line(log_path, "welcome as jsremote", bot)
            names = ["jsremote", "rules"] * 2
            table = referee.create_table(Rules.from_options(QUICK), 9, names, remote_seats=frozenset({0, 2}))
            for seat in (1, 3):
                program = resolve_program("rules")
                hosted.append(
                    await launch_bot(program, f"127.0.0.1:{port}", table.seats[seat].token, log_path=logs[seat])
                )
            await asyncio.wait_for(table.finished.wait(), 60)
            code = await asyncio.wait_for(bot.wait(), 15)
        finally:
            if bot.returncode is None:
                bot.kill()
                await bot.wait()
            for process in hosted:
                await process.close()
            await server.stop(grace=1.0)
        return code, table, logs

    code, table, _ = asyncio.run(run())
    log = log_path.read_text()
    assert code == 0, log
    assert log.count("lobby: accepted seat") == 2, "two offers, one per seat of the bot's team"
    assert "1 match(es) played" in log and "rejected" not in log, log
    assert table.status is TableStatus.FINISHED and table.incidents == []
    match = table.match
    assert match is not None and match.outcome is not None
    assert match.outcome.termination is MatchTermination.NORMAL and match.outcome.faults == (0, 0)
    assert {step.seat for step in match.log} >= {0, 2}, "both remote seats decided"


ADMIN_TOKEN = "js-remote-admin-t0ken"


@contextlib.contextmanager
def _standalone_referee(log_path: Path) -> Iterator[str]:
    """`mus referee serve` on a free port, as its own process; yields its address (the end of its first line)."""
    env = dict(os.environ, MUS_ADMIN_TOKEN=ADMIN_TOKEN)
    command = [sys.executable, "-m", "workers.cli.main", "referee", "serve", "--address", "127.0.0.1:0"]
    with log_path.open("w") as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True, env=env)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("referee listening on 127.0.0.1:"), (line, log_path.read_text())
        yield line.split()[-1]
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_a_league_plays_it_hosted_and_remote_on_mus_referee_serve(
    node: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small league by the CLI between the bot registered as a hosted program (`mus bot add --dir`) and the same
    bot as a remote one (`mus bot add --remote`): the remote one waits in the lobby of `mus referee serve` before
    its token is known, and `mus league run` registers it and plays both matches through it."""
    monkeypatch.chdir(tmp_path)
    for name in ("MUS_DATABASE_URL", "MUS_BROKER_URL", "MUS_BROKER_DIR", "MUS_LOG_DIR"):
        monkeypatch.delenv(name, raising=False)
    runner = CliRunner()

    def ok(*args: str) -> str:
        result = runner.invoke(app, list(args))
        assert result.exit_code == 0, result.output
        return result.stdout

    added = json.loads(ok("bot", "add", "jshosted", "--language", "javascript", "--dir", str(JS_DIR), "--json", "--",
                          node, "bot.js"))  # fmt: skip
    assert added["new_version"] and added["language"] == "javascript" and added["command"] == [node, "bot.js"], added
    token = json.loads(ok("bot", "add", "jsremote", "--remote", "--language", "javascript", "--json"))["token"]
    ok("league", "create", "jscup", "--bots", "jshosted,jsremote", "--matches-per-pairing", "2",
       "--option", "target_score=10", "--absent-limit", "30", "--json")  # fmt: skip
    bot_log = tmp_path / "remote-bot.log"
    with _standalone_referee(tmp_path / "referee.log") as address:
        env = dict(os.environ, MUS_REFEREE=address, MUS_TOKEN=token)
        with bot_log.open("w") as output:
            bot = subprocess.Popen(
                [node, str(JS_DIR / "bot.js"), "--remote", "--matches", "2"], stdout=output, stderr=output, env=env
            )
        try:
            deadline = time.monotonic() + 30
            while "does not know this bot token yet" not in bot_log.read_text():
                assert bot.poll() is None and time.monotonic() < deadline, bot_log.read_text()
                time.sleep(0.05)
            monkeypatch.setenv("MUS_REFEREE_ADDRESS", address)
            monkeypatch.setenv("MUS_ADMIN_TOKEN", ADMIN_TOKEN)
            ok("league", "run", "jscup", "--workers", "1")
            assert bot.wait(timeout=15) == 0, bot_log.read_text()
        finally:
            if bot.poll() is None:
                bot.kill()
                bot.wait()
    log = bot_log.read_text()
    assert log.count("lobby: accepted seat") == 4 and "2 match(es) played" in log, log
    assert "rejected" not in log, log
    status = json.loads(ok("league", "status", "jscup", "--json"))
    assert status["finished"] == status["total"] == 2, status
    exported = json.loads(ok("league", "export", "jscup", "--format", "json"))
    for match in exported["matches"]:
        assert {team["bot"] for team in match["teams"]} == {"jshosted", "jsremote"}, match
        result = match["result"]
        assert result is not None and result["termination"] == "normal" and result["faults"] == [], match


def test_with_seats_on_stdin_one_process_plays_two_seats_in_a_row(node: str, tmp_path: Path) -> None:
    """MUS_SEATS=stdin (a persistent bot, docs/pool.md): each of its two processes plays a seat of each match, over
    the frames the seat lines offer."""
    program = BotProgram("js-bot", (node, "bot.js"), JS_DIR, persistent=True)
    result = two_seats_in_a_row(program, resolve_program("rules"), Rules.from_options(QUICK), tmp_path / "pool")
    check_two_clean_seats_per_process(result)
    for log in result.logs:
        assert log.count("outcome:") == 2 and "end of input after 2 seat(s)" in log, log
        assert "rejected" not in log and "strategy failed" not in log, log
        assert log.count("over frames: seat") >= 2, f"both seats were played over the seat line's frames: {log}"


def test_a_seat_refused_over_frames_is_logged_with_the_referees_status_and_the_next_line_read(
    node: str, tmp_path: Path
) -> None:
    """The trailer frame's status reaches the bot as a gRPC status would (docs/pool.md, "Frames")."""
    log = refused_over_frames([node, str(JS_DIR / "bot.js")], tmp_path)
    assert "ended the stream: UNAUTHENTICATED: unknown or expired seat token" in log, log
    assert "end of input after 0 seat(s)" in log, log
