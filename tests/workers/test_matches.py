"""workers.matches: one match path. The embedded referee is played through its admin API like the standalone one,
and both give the same result for the same seed and bots. Real referee servers, real bot processes."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import grpc
import pytest

from bench.league import BOT_COMMAND, BOT_SCRIPT
from mus.v1 import admin_pb2, admin_pb2_grpc
from mus.v1 import types_pb2 as pb
from referee.causes import IncidentCause
from referee.engine.replay import dumps_record
from referee.engine.rules import Rules
from referee.engine.selfplay import play_random_match
from referee.service.server import start_admin_server, start_server
from referee.service.servicer import Context, InProcessAdmin, Referee, TableAdminServicer
from referee.service.table import Incident
from workers.launcher import BotProgram, resolve_program
from workers.matches import (
    EmbeddedReferee,
    PlayedMatch,
    RefereeFailure,
    _incidents,
    _resimulated,
    _stop,
    fault_records,
    incident_records,
    play_on_referee,
    play_programs,
    run_on_worker_referee,
)

FAST = Rules.from_options({"games_to_win_vaca": 1, "vacas_to_win_match": 1})
ADMIN_TOKEN = "standalone-admin-token-0123456789"
ENVIRONMENT_MARK = "environment:"


def instant(name: str) -> BotProgram:
    """The benchmark's instant bot: seeded by its seat and cards, so a seed replays the same match."""
    return BotProgram(name, BOT_COMMAND, BOT_SCRIPT.parent)


def record_admin_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every admin call any referee of this process serves from now on, as (method, the referee's admin token)."""
    calls: list[tuple[str, str]] = []
    for name in ("CreateTable", "CancelTable", "GetTableStatus", "WaitTable", "ReportCrash", "GetTableReplay"):
        served: Callable[[TableAdminServicer, Any, Context], Coroutine[Any, Any, Any]] = getattr(
            TableAdminServicer, name
        )

        async def recorded(
            self: TableAdminServicer, request: Any, context: Context, *, name: str = name, served: Any = served
        ) -> Any:
            calls.append((name, self.referee.admin_token))
            return await served(self, request, context)

        monkeypatch.setattr(TableAdminServicer, name, recorded)
    return calls


def test_the_embedded_referee_is_played_through_its_admin_api_and_a_reported_crash_is_in_the_result(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The crash of a seat's process reaches the table only through ReportCrash, and the result only through
    GetTableReplay: the incident, with the launcher's detail, is in the match's result. The embedded referee's
    admin token is its own, and no bot sees it."""
    calls = record_admin_calls(monkeypatch)
    quitter = BotProgram(
        "quitter",
        (sys.executable, "-c", f"import os; print({ENVIRONMENT_MARK!r}, dict(os.environ), flush=True); exit(3)"),
    )
    played = asyncio.run(play_programs((quitter, resolve_program("passive")), FAST, 1, log_dir=tmp_path))

    crash = "the bot process exited with code 3"
    assert {(0, IncidentCause.CRASH, crash), (2, IncidentCause.CRASH, crash)} <= {
        (incident.seat, incident.cause, incident.detail) for incident in played.incidents
    }
    assert {"seat": 0, "cause": "crash", "detail": crash} in incident_records(played.incidents), "stored by name"
    assert played.match.outcome is not None and played.match.outcome.winner == 1
    names = [name for name, _ in calls]
    assert names.count("CreateTable") == 1 and names.count("GetTableReplay") == 1 and "WaitTable" in names
    assert names.count("ReportCrash") >= 2, "both of the quitter's seats were reported over the admin API"
    tokens = {token for _, token in calls}
    assert len(tokens) == 1, "one referee, one admin token"
    for seat in (0, 2):
        log = played.logs[seat].read_text()
        assert ENVIRONMENT_MARK in log and "MUS_TOKEN" in log, log
        assert tokens.isdisjoint(log.split("'")), "the admin token is not in a bot's environment"


def test_the_embedded_and_the_standalone_referee_give_the_same_result_for_the_same_seed_and_bots(
    tmp_path: Path,
) -> None:
    programs = (instant("a"), instant("b"))
    for folder in ("embedded", "standalone"):
        (tmp_path / folder).mkdir()

    async def standalone() -> PlayedMatch:
        referee = Referee(ADMIN_TOKEN)
        server, port = await start_server(referee, "127.0.0.1:0")
        admin_server, admin_port = await start_admin_server(referee, "127.0.0.1:0")
        try:
            return await play_on_referee(
                programs,
                FAST,
                5,
                address=f"127.0.0.1:{port}",
                admin_address=f"127.0.0.1:{admin_port}",
                admin_token=ADMIN_TOKEN,
                log_dir=tmp_path / "standalone",
            )
        finally:
            await asyncio.gather(admin_server.stop(None), server.stop(None))

    embedded = asyncio.run(play_programs(programs, FAST, 5, log_dir=tmp_path / "embedded"))
    remote = asyncio.run(standalone())

    assert embedded.match.outcome is not None
    mine, theirs = json.loads(embedded.record_json), json.loads(remote.record_json)
    # Each seat's own steps, in order: the four discards of a mus round reach the referee in any order.
    assert [[step for step in mine["steps"] if step["seat"] == seat] for seat in range(4)] == [
        [step for step in theirs["steps"] if step["seat"] == seat] for seat in range(4)
    ]
    rest = set(mine) - {"steps", "events"}
    assert {key: mine[key] for key in rest} == {key: theirs[key] for key in rest}, "same setup"
    assert embedded.match.outcome == remote.match.outcome
    assert fault_records(embedded.match) == fault_records(remote.match)
    assert embedded.incidents == remote.incidents == ()
    assert embedded.joined_as == remote.joined_as
    assert [len(seconds) for seconds in embedded.decision_seconds] == [
        len(seconds) for seconds in remote.decision_seconds
    ]
    assert embedded.logs.keys() == remote.logs.keys() == {0, 1, 2, 3}
    assert embedded.launched_at <= embedded.started_at <= embedded.ended_at <= embedded.exited_at
    assert remote.launched_at <= remote.started_at <= remote.ended_at <= remote.exited_at


def test_each_launched_seat_is_offered_frames_of_its_own_which_a_bot_may_ignore_and_which_end_with_the_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MUS_FRAMES (docs/protocol.md, "Frames"): the SDK's seats play over it, a bot that ignores it plays over
    gRPC as before, in the same match; each seat's socket is in a folder of its own, gone once the match is."""
    opened: list[Path] = []
    open_seat = EmbeddedReferee.open_seat

    async def recorded(referee: EmbeddedReferee) -> Any:
        frames = await open_seat(referee)
        opened.append(frames.folder)
        return frames

    monkeypatch.setattr(EmbeddedReferee, "open_seat", recorded)
    grpc_only = BotProgram(
        "grpc-only", ("sh", "-c", f'unset MUS_FRAMES; exec "{sys.executable}" -m clients.bots.random')
    )
    played = asyncio.run(play_programs((resolve_program("random"), grpc_only), FAST, 5, log_dir=tmp_path))

    assert played.match.outcome is not None and played.incidents == ()
    for seat in range(4):
        log = played.logs[seat].read_text()
        assert ("joined over frames" if seat % 2 == 0 else "joined over gRPC") in log, log
    assert len(set(opened)) == 4, "a folder and its sockets for each seat"
    assert not any(folder.exists() for folder in opened), "removed with the match"


def test_a_replay_whose_incident_has_the_cause_of_a_fault_is_the_referees_failure() -> None:
    """Incidents come back through the one table of causes; a fault's cause (or none) in their list is refused."""
    replay = admin_pb2.GetTableReplayResponse(
        table_id="t", incidents=[pb.Incident(seat=1, cause=pb.FAULT_CAUSE_ABSENT)]
    )
    assert _incidents(replay) == (Incident(1, IncidentCause.ABSENT, ""),)
    for wrong in (pb.FAULT_CAUSE_TIMEOUT, pb.FAULT_CAUSE_UNSPECIFIED):
        replay.incidents[0].cause = wrong
        with pytest.raises(RefereeFailure, match="names no incident"):
            _incidents(replay)


def test_matches_on_the_worker_referee_share_it_and_an_interrupted_one_is_cleaned_up_before_the_next() -> None:
    cleaned: list[EmbeddedReferee] = []

    async def interrupted(referee: EmbeddedReferee) -> None:
        def interrupt() -> None:  # what a time limit or Ctrl-C does to a worker in the middle of a match
            raise KeyboardInterrupt

        asyncio.get_running_loop().call_later(0.01, interrupt)
        try:
            await asyncio.sleep(30)
        finally:
            cleaned.append(referee)

    with pytest.raises(KeyboardInterrupt):
        run_on_worker_referee(interrupted)
    assert len(cleaned) == 1, "the interrupted match was cancelled and its clean-up ran before the call raised"

    async def played(referee: EmbeddedReferee) -> PlayedMatch:
        return await play_programs((instant("a"), instant("b")), FAST, 5, referee=referee)

    first, second = run_on_worker_referee(played), run_on_worker_referee(played)
    assert first.match.outcome is not None and first.match.outcome == second.match.outcome, "seeded bots, one deal"
    assert first.table_id != second.table_id, "two tables of one referee, which outlived both matches"

    async def held(referee: EmbeddedReferee) -> list[str]:
        return list(referee.referee.tables)

    assert run_on_worker_referee(held) == [], "the referee forgot each table once its match was taken"


def test_a_fetched_replay_is_re_simulated_and_a_record_that_does_not_replay_to_itself_is_the_referees_failure() -> None:
    match = play_random_match(Rules(), 11)
    text = dumps_record(match)
    replayed, record = _resimulated(admin_pb2.GetTableReplayResponse(table_id="t", record_json=text))
    assert replayed.outcome == match.outcome and record == text
    # Other key order is the same record (a referee of another version may write it so).
    reordered = json.dumps(json.loads(text), sort_keys=True)
    assert (
        _resimulated(admin_pb2.GetTableReplayResponse(table_id="t", record_json=reordered))[0].outcome == match.outcome
    )
    tampered = json.loads(text)
    tampered["events"][-1]["seq"] += 1
    with pytest.raises(RefereeFailure, match="does not re-simulate to itself"):
        _resimulated(admin_pb2.GetTableReplayResponse(table_id="t", record_json=json.dumps(tampered)))


def test_the_embedded_referee_serves_its_admin_api_on_no_socket_and_in_process_calls_check_its_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker calls its embedded referee's admin API in process (`InProcessAdmin`): the servicer's own checks,
    refusals raised as the gRPC stub raises them; a seat's sockets (the bots') do not serve that API."""

    async def scenario() -> None:
        embedded = EmbeddedReferee()
        try:
            assert list(embedded.frames_dir.iterdir()) == [], "no socket before a seat is opened"
            seat = await embedded.open_seat()
            assert sorted(path.name for path in seat.folder.iterdir()) == ["play.sock", "referee.sock"]
            async with grpc.aio.insecure_channel(seat.referee_address(confined=False)) as channel:
                stub = admin_pb2_grpc.TableAdminServiceStub(channel)
                auth = (("authorization", f"Bearer {embedded.referee.admin_token}"),)
                with pytest.raises(grpc.aio.AioRpcError) as absent:
                    await stub.GetTableStatus(admin_pb2.GetTableStatusRequest(table_id="t"), metadata=auth)
                assert absent.value.code() == grpc.StatusCode.UNIMPLEMENTED, "not served there, even with the token"
            await seat.close()
            admin = InProcessAdmin(embedded.referee)
            request = admin_pb2.CreateTableRequest(
                seed=3, seats=[admin_pb2.SeatConfig(bot_name=f"b{seat}") for seat in range(4)]
            )
            for token in ("", "Bearer wrong"):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await admin.CreateTable(request, metadata=(("authorization", token),))
                assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            auth = (("authorization", f"Bearer {embedded.referee.admin_token}"),)
            created = await admin.CreateTable(request, metadata=auth)
            assert created.table_id in embedded.referee.tables and len(created.seat_tokens) == 4
            with pytest.raises(grpc.aio.AioRpcError) as early:
                await admin.GetTableReplay(admin_pb2.GetTableReplayRequest(table_id=created.table_id), metadata=auth)
            assert early.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert "replay opens once the match has finished" in str(early.value.details())

            async def broken(self: TableAdminServicer, request: Any, context: Context) -> Any:
                raise RuntimeError("a bug in the servicer")

            monkeypatch.setattr(TableAdminServicer, "GetTableStatus", broken)
            with pytest.raises(grpc.aio.AioRpcError) as unexpected:
                status = admin_pb2.GetTableStatusRequest(table_id=created.table_id)
                await InProcessAdmin(embedded.referee).GetTableStatus(status, metadata=auth)
            assert unexpected.value.code() == grpc.StatusCode.UNKNOWN, "as grpc's server answers an unexpected error"
        finally:
            await embedded.close()

    asyncio.run(scenario())


CHATTY = """\
import sys
sys.stdout.write(("a line a debugging bot writes" * 30 + "\\n") * 2000)  # about 1.8 MiB, more than a pipe holds
sys.stdout.flush()
from clients.bots.random_bot import RandomBot
from clients.sdk import run_bot
run_bot(RandomBot(seed=1))
"""


@pytest.mark.slow
def test_a_seat_whose_log_cannot_be_written_plays_on_and_its_match_ends(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A review's bot filled the logs' disk with the output it may write: the reader of a seat's output died of the
    failed write, the seat's pipe was left unread, and the worker waited for that seat's end for good, holding the
    machine's play lock (stop 39). /dev/full stands for the full disk: the output is dropped, the match plays on."""
    folder = tmp_path / "chatty"
    folder.mkdir()
    (folder / "chatty.py").write_text(CHATTY)
    chatty = BotProgram("chatty", (sys.executable, str(folder / "chatty.py")), folder)
    logs = tmp_path / "logs"
    logs.mkdir()
    for seat in (0, 2):
        (logs / f"seat{seat}-chatty.log").symlink_to("/dev/full")
    played = asyncio.run(asyncio.wait_for(play_programs((chatty, instant("b")), FAST, 3, log_dir=logs), 60))
    assert played.match.outcome is not None and not played.incidents and not fault_records(played.match)
    assert caplog.text.count("the output of a seat is no longer kept") == 2, caplog.text


def test_stopping_a_match_closes_every_seat_though_one_close_raises() -> None:
    """One seat's close that raised left the seats after it running, unfrozen, beside the next matches (a review's
    full disk, stop 39): every seat is closed, then the first failure is raised."""
    closed: list[int] = []

    class Seat:
        def __init__(self, number: int) -> None:
            self.number = number

        async def close(self) -> None:
            if self.number == 0:
                raise OSError(28, "No space left on device")
            await asyncio.sleep(0)
            closed.append(self.number)

    with pytest.raises(OSError, match="No space left"):
        asyncio.run(_stop([], [Seat(number) for number in range(4)]))  # type: ignore[misc]
    assert sorted(closed) == [1, 2, 3]
