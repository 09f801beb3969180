"""The C++ example bot (clients/cpp): built with its Makefile, then real matches over real gRPC on loopback against
the Python random bot and against itself, a dropped connection joined again, and one-line errors.

Skipped, with the reason, only where there is no C++ toolchain for grpc++ (g++, pkg-config, libgrpc++-dev).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clients.cpp.build import build_bot, missing_toolchain
from referee.engine.events import EventKind
from referee.engine.match import Match
from referee.engine.outcome import MatchTermination
from referee.engine.replay import match_record, replay_record
from referee.engine.rules import Rules
from referee.service.server import start_server
from referee.service.servicer import Referee
from referee.service.table import Incident, Table, TableStatus
from tests.support.frames_seat import refused_over_frames
from tests.support.pooled_seats import check_two_clean_seats_per_process, two_seats_in_a_row
from tests.support.proxy import DropOnceProxy, play_refused, play_table
from workers.cli.main import app
from workers.launcher import BotProgram, resolve_program
from workers.matches import PlayedMatch, play_programs

pytestmark = pytest.mark.slow  # every test runs the built C++ bot as a process

EXIT_MARK = "exit status"


@pytest.fixture(scope="module")
def cpp_bot() -> Path:
    """The built bot (`make -C clients/cpp`); skipped, with the reason, where there is no toolchain for it."""
    missing = missing_toolchain()
    if missing is not None:
        pytest.skip(f"C++ bot not built: {missing}")
    return build_bot()


def _reporting(bot: Path) -> BotProgram:
    """The C++ bot, run by a shell that writes its exit status to the seat's log once it has exited."""
    return BotProgram("cpp-random", ("sh", "-c", f'"$0"; echo "{EXIT_MARK} $?" >&2', str(bot)))


def _play(teams: tuple[BotProgram, BotProgram], seed: int) -> PlayedMatch:
    return asyncio.run(play_programs(teams, Rules(), seed))


def _check_finished_cleanly(match: Match, incidents: Sequence[Incident], logs: Iterable[Path]) -> None:
    """Finished normally, with no fault, no incident, every C++ seat exited 0, and a replay that re-simulates."""
    assert not incidents
    assert [event for event in match.events if event.kind is EventKind.FAULT] == []
    assert match.outcome is not None and match.outcome.termination is MatchTermination.NORMAL
    assert match.outcome.faults == (0, 0)
    for path in logs:
        text = path.read_text()
        if path.name.endswith("cpp-random.log"):
            assert f"{EXIT_MARK} 0" in text, text
            assert "rejected" not in text, text
    record = json.loads(json.dumps(match_record(match)))
    again = replay_record(record)
    assert again.outcome == match.outcome
    assert json.loads(json.dumps(match_record(again))) == record


@pytest.mark.parametrize(
    ("seed", "sides"),
    [(1, ("cpp", "random")), (2, ("random", "cpp")), (3, ("cpp", "cpp"))],
    ids=["cpp-vs-random", "random-vs-cpp", "cpp-vs-cpp"],
)
def test_the_cpp_bot_plays_whole_matches_over_the_frames_it_is_offered(
    cpp_bot: Path, seed: int, sides: tuple[str, str]
) -> None:
    """Launched by a worker's own referee, each seat is offered frames (MUS_FRAMES) and takes them; the whole
    match over gRPC is the drop test's below, on a standalone referee that offers none."""
    programs = {"cpp": _reporting(cpp_bot), "random": resolve_program("random")}
    played = _play((programs[sides[0]], programs[sides[1]]), seed)
    _check_finished_cleanly(played.match, played.incidents, played.logs.values())
    assert played.match.log, "no decision was made"
    for seat in range(4):
        if sides[seat % 2] == "cpp":
            assert "playing the seat over frames at unix:" in played.logs[seat].read_text()


def test_the_same_match_seed_plays_the_same_match(cpp_bot: Path) -> None:
    """Without MUS_SEED, each seat seeds itself from its seat and its first cards, which the match seed fixes."""
    matches = [_play((_reporting(cpp_bot), _reporting(cpp_bot)), seed=11) for _ in range(2)]
    for played in matches:
        _check_finished_cleanly(played.match, played.incidents, played.logs.values())
    # Each seat's own actions, in order (simultaneous discards may reach the referee in any order).
    first, second = (
        [[str(step) for step in played.match.log if step.seat == seat] for seat in range(4)] for played in matches
    )
    assert first == second
    assert matches[0].match.outcome == matches[1].match.outcome


def test_mus_seed_seeds_the_bot(cpp_bot: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUS_SEED", "12345")
    played = _play((_reporting(cpp_bot), resolve_program("random")), seed=5)
    _check_finished_cleanly(played.match, played.incidents, played.logs.values())


def test_mus_match_play_runs_the_built_program(cpp_bot: Path) -> None:
    """The README's command: `mus match play random -- clients/cpp/build/mus-random-bot`."""
    result = CliRunner().invoke(app, ["match", "play", "random", "--seed", "6", "--json", "--", str(cpp_bot)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["teams"] == {"0": "random", "1": "cpp-random"}, "named by its Join.bot_name"
    assert data["termination"] == "normal" and data["faults"] == []


async def _play_with_a_drop(
    bot: Path, log_dir: Path, seed: int
) -> tuple[list[int | None], DropOnceProxy, Table, tuple[Path, ...]]:
    """Four C++ seats; seat 0 reaches the referee through a proxy that cuts its connection mid-match."""
    referee = Referee()
    server, port = await start_server(referee, "127.0.0.1:0")
    proxy = DropOnceProxy(port, drop_after=3000)
    proxy_server = await asyncio.start_server(proxy.handle, "127.0.0.1", 0)
    proxy_port = proxy_server.sockets[0].getsockname()[1]
    program = _reporting(bot)
    table = referee.create_table(Rules(), seed, [program.name] * 4)
    logs = tuple(log_dir / f"seat{seat}-cpp-random.log" for seat in range(4))
    addresses = [f"127.0.0.1:{proxy_port if seat == 0 else port}" for seat in range(4)]
    try:
        codes = await play_table(table, [program] * 4, addresses, logs)
    finally:
        proxy_server.close()
        await server.stop(grace=1.0)
    return codes, proxy, table, logs


def test_a_dropped_connection_is_joined_again_from_the_next_event(cpp_bot: Path, tmp_path: Path) -> None:
    codes, proxy, table, logs = asyncio.run(_play_with_a_drop(cpp_bot, tmp_path, seed=21))
    assert proxy.dropped, "the match ended before the proxy cut the connection: lower drop_after"
    assert codes == [0, 0, 0, 0]
    assert table.status is TableStatus.FINISHED and table.match is not None
    _check_finished_cleanly(table.match, table.incidents, logs)
    log = logs[0].read_text()
    assert "stream ended (UNAVAILABLE" in log and "joined again from event" in log, log
    assert proxy.connections >= 2


def test_a_join_refused_as_resource_exhausted_is_tried_again(
    cpp_bot: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A referee full of streams waiting to join refuses a new one RESOURCE_EXHAUSTED and closes its oldest to make
    room: the bot joins again instead of exiting (a review's flood turned that into a crash and a forfeit)."""
    logs = tuple(tmp_path / f"seat{seat}-cpp-random.log" for seat in range(4))
    codes, table, refusals = play_refused(monkeypatch, Rules(), 23, [_reporting(cpp_bot)] * 4, [0], logs)
    assert codes == [0, 0, 0, 0] and table.status is TableStatus.FINISHED
    assert not any(refusals.values()), "seat 0 was refused twice"
    assert "stream ended (RESOURCE_EXHAUSTED" in logs[0].read_text()


def _run_bot(bot: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bot)], env=env, capture_output=True, text=True, timeout=60, check=False)


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MUS_REFEREE": "127.0.0.1:1"}, "MUS_TOKEN is not set"),
        ({"MUS_TOKEN": "t"}, "MUS_REFEREE is not set"),
        (
            {"MUS_REFEREE": "127.0.0.1:1", "MUS_TOKEN": "t", "MUS_SEED": "-3"},
            "MUS_SEED must be an unsigned 64-bit integer",
        ),
    ],
    ids=["no-token", "no-referee", "bad-seed"],
)
def test_a_missing_setting_is_a_one_line_error(cpp_bot: Path, env: dict[str, str], message: str) -> None:
    line = _one_line_error(_run_bot(cpp_bot, env))
    assert line.startswith("cpp-random: ") and message in line


async def _join_with_a_token_the_referee_does_not_know(bot: Path) -> subprocess.CompletedProcess[str]:
    server, port = await start_server(Referee(), "127.0.0.1:0")
    try:
        process = await asyncio.create_subprocess_exec(
            str(bot),
            env={"MUS_REFEREE": f"127.0.0.1:{port}", "MUS_TOKEN": "not-a-seat-token"},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 30)
    finally:
        await server.stop(grace=None)
    assert process.returncode is not None
    return subprocess.CompletedProcess([str(bot)], process.returncode, out.decode(), err.decode())


def test_a_refused_stream_is_a_one_line_error(cpp_bot: Path) -> None:
    line = _one_line_error(asyncio.run(_join_with_a_token_the_referee_does_not_know(cpp_bot)))
    assert "UNAUTHENTICATED" in line, line


def test_an_unreachable_referee_is_tried_for_its_patience_then_a_failure(cpp_bot: Path) -> None:
    """The bot keeps joining again for 10 s (docs/protocol.md, "Reconnecting"), then exits with one line."""
    with _free_port() as port:
        done = _run_bot(cpp_bot, {"MUS_REFEREE": f"127.0.0.1:{port}", "MUS_TOKEN": "t"})
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert all("joining again" in line for line in lines[:-1]) and len(lines) > 1, done.stderr
    assert "lost the referee" in lines[-1] and "UNAVAILABLE" in lines[-1] and "within 10 s" in lines[-1], done.stderr
    assert len(lines) > 10, "a pause growing to 1 s: a dozen attempts in 10 s"


@contextlib.contextmanager
def _free_port() -> Iterator[int]:
    """A loopback port nobody listens on (bound without listening, so nothing else takes it meanwhile)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_with_seats_on_stdin_one_process_plays_two_seats_in_a_row(cpp_bot: Path, tmp_path: Path) -> None:
    """MUS_SEATS=stdin (a persistent bot, docs/pool.md): each of its two processes plays a seat of each match, over
    the frames the seat lines offer."""
    program = BotProgram("cpp-random", (str(cpp_bot),), cpp_bot.parent, persistent=True)
    result = two_seats_in_a_row(program, resolve_program("random"), Rules(), tmp_path / "pool")
    check_two_clean_seats_per_process(result)
    for log in result.logs:
        assert log.count(": outcome ") == 2 and "end of input after 2 seat(s)" in log, log
        assert log.count("playing the seat over frames") == 2, f"both seats went over the lines' frames: {log}"


def test_a_seat_refused_over_frames_is_logged_with_the_referees_status_and_the_next_line_read(
    cpp_bot: Path, tmp_path: Path
) -> None:
    """The trailer frame's status reaches the bot as a gRPC status would (docs/pool.md, "Frames")."""
    log = refused_over_frames([str(cpp_bot)], tmp_path)
    assert "ended the stream: UNAUTHENTICATED: unknown or expired seat token" in log, log
    assert "end of input after 0 seat(s)" in log, log
