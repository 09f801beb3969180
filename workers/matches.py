"""Play one match between two bot programs on a referee embedded in this process, over real gRPC; or, when a
side is a remote bot, on the standalone referee (`mus referee serve`), which offers it its seats in the lobby.

Team 0 (seats 0 and 2) is the first program's partnership and team 1 (seats 1 and 3) the second's; each hosted
seat is its own process. The league runner and `mus match play` both use this.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc

from mus.v1 import admin_pb2, admin_pb2_grpc
from mus.v1 import types_pb2 as pb
from referee.engine.events import EventKind
from referee.engine.match import Match
from referee.engine.replay import match_record, replay_record
from referee.engine.rules import Rules
from referee.service import convert
from referee.service.server import start_server
from referee.service.servicer import Referee
from referee.service.table import Incident, IncidentCause, Table, TableStatus
from workers.launcher import BotProgram, launch_bot

log = logging.getLogger(__name__)

EXIT_WAIT_S = 5.0
"""How long bot processes get to exit on their own after the match before they are killed."""


@dataclass(frozen=True)
class PlayedMatch:
    """A finished table and where each seat's bot output was written.

    `launched_at`, `ended_at` and `exited_at` (`time.monotonic`, the table's clock) say when the first bot was
    launched, when the match ended and when the last bot had exited, for `bench.league_probe`.
    """

    table: Table
    logs: tuple[Path, ...]
    launched_at: float = 0.0
    ended_at: float = 0.0
    exited_at: float = 0.0

    @property
    def match(self) -> Match:
        assert self.table.match is not None
        return self.table.match


async def play_programs(
    programs: tuple[BotProgram, BotProgram],
    rules: Rules,
    seed: int,
    *,
    log_dir: Path | None = None,
    join_timeout_s: float = 30.0,
) -> PlayedMatch:
    """Run a referee on 127.0.0.1, launch the four seats' processes, and wait for the outcome."""
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="mus-match-"))
    referee = Referee()
    server, port = await start_server(referee, "127.0.0.1:0")
    address = f"127.0.0.1:{port}"
    names = [programs[seat % 2].name for seat in range(4)]
    table = referee.create_table(rules, seed, names, join_timeout_s=join_timeout_s)
    processes: list[asyncio.subprocess.Process] = []
    logs = tuple(log_dir / f"seat{seat}-{names[seat]}.log" for seat in range(4))
    watchers: list[asyncio.Task[None]] = []
    try:
        launched_at = time.monotonic()
        for seat in range(4):
            process = await launch_bot(programs[seat % 2], address, table.seats[seat].token, log_path=logs[seat])
            processes.append(process)
            watchers.append(asyncio.create_task(_watch_process(table, seat, process)))
        await table.finished.wait()
        ended_at = time.monotonic()
        await _reap(processes)
        exited_at = time.monotonic()
    finally:
        await _stop(watchers, processes)
        if table.status is not TableStatus.FINISHED:
            table.cancel("the match runner stopped")
        await server.stop(grace=1.0)
    return PlayedMatch(table, logs, launched_at, ended_at, exited_at)


async def _watch_process(table: Table, seat: int, process: asyncio.subprocess.Process) -> None:
    """A bot process that exits before the match ends has crashed: the table stops waiting for it."""
    code = await process.wait()
    if table.status is TableStatus.RUNNING or table.status is TableStatus.WAITING:
        table.report_crash(seat, f"the bot process exited with code {code}")


async def _stop(watchers: list[asyncio.Task[None]], processes: list[asyncio.subprocess.Process]) -> None:
    """However a match runner ends: stop watching the bots, and kill any bot process still running."""
    for watcher in watchers:
        watcher.cancel()
    for process in processes:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def _reap(processes: list[asyncio.subprocess.Process]) -> None:
    """Give bots a moment to exit after the outcome, then terminate the rest."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*(process.wait() for process in processes)), EXIT_WAIT_S)
    for process in processes:
        if process.returncode is None:
            process.terminate()


# ------------------------------------------------------------------------------ on the standalone referee

RPC_TIMEOUT_S = 10.0
"""The deadline of one admin call to the standalone referee."""

RPC_RETRY_S = 15.0
"""How long an unreachable referee is retried (per call) before the attempt is given up as an infrastructure
failure; every admin call the worker makes is idempotent (CreateTable through its external_id)."""

POLL_S = 0.25
"""How often the worker asks the standalone referee whether the table has finished."""

REPLAY_MESSAGE_BYTES = 16 * 1024 * 1024
"""The largest replay the worker accepts: what the referee may send (`grpc.max_send_message_length`)."""

_RETRIED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})

_Request = TypeVar("_Request")
_Response = TypeVar("_Response")


class RefereeFailure(RuntimeError):
    """The standalone referee could not be reached, refused a call, or lost the table: never a bot's fault."""


@dataclass(frozen=True, slots=True)
class RemoteBot:
    """A bot that runs elsewhere: registered with the referee by the SHA-256 of its token, it is offered its
    seats through the lobby."""

    name: str
    token_sha256: str


@dataclass(frozen=True)
class RefereeMatch:
    """A match played on the standalone referee, as its replay tells it."""

    table_id: str
    match: Match
    """Re-simulated from the referee's replay record (rules, seed, steps): its outcome is the match's."""
    record: dict[str, Any]
    """The referee's replay record (`match_record`), checked against the re-simulation."""
    incidents: tuple[Incident, ...]
    decision_seconds: tuple[tuple[float, ...], ...]
    """Each seat's decision times, in seat order."""
    logs: tuple[Path | None, ...]
    """Where each hosted seat's bot output was written (None for a remote seat)."""


def register_remote_bots(address: str, admin_token: str, bots: Sequence[RemoteBot]) -> None:
    """Tell the referee about remote bots before their first match, so they can hold their lobby stream now
    (a bot the referee does not know is refused). Raises `grpc.RpcError` when the referee refuses or is away."""
    auth = (("authorization", f"Bearer {admin_token}"),)
    with grpc.insecure_channel(address) as channel:
        admin = admin_pb2_grpc.TableAdminServiceStub(channel)
        for bot in bots:
            request = admin_pb2.RegisterRemoteBotRequest(bot_name=bot.name, token_sha256=bot.token_sha256)
            admin.RegisterRemoteBot(request, metadata=auth, timeout=10)


async def play_on_referee(
    teams: tuple[BotProgram | RemoteBot, BotProgram | RemoteBot],
    rules: Rules,
    seed: int,
    *,
    address: str,
    admin_token: str,
    external_id: str = "",
    join_timeout_s: float = 30.0,
    log_dir: Path | None = None,
) -> RefereeMatch:
    """Play a match on the standalone referee at `address` and return it once it has finished.

    Registers each remote bot (RegisterRemoteBot), creates the table (its remote seats are offered through the
    lobby; `external_id` makes a retried creation return the same table), launches the hosted seats' programs
    pointed at that referee, waits for the end, and fetches the replay (GetTableReplay). Every seat has
    `join_timeout_s` to join; one that has not is `absent` and its decisions time out at once. Raises
    `RefereeFailure` when the referee is unreachable or the table does not finish (cancelled, lost), and
    cancels the table when anything here fails before its end.
    """
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="mus-match-"))
    names = [teams[seat % 2].name for seat in range(4)]
    remote = [isinstance(teams[seat % 2], RemoteBot) for seat in range(4)]
    auth = (("authorization", f"Bearer {admin_token}"),)
    options = [("grpc.max_receive_message_length", REPLAY_MESSAGE_BYTES)]
    async with grpc.aio.insecure_channel(address, options=options) as channel:
        admin = admin_pb2_grpc.TableAdminServiceStub(channel)
        for bot in {team.name: team for team in teams if isinstance(team, RemoteBot)}.values():
            await _call(
                admin.RegisterRemoteBot,
                admin_pb2.RegisterRemoteBotRequest(bot_name=bot.name, token_sha256=bot.token_sha256),
                auth,
                address,
            )
        request = admin_pb2.CreateTableRequest(
            rules=convert.rules_to_map(rules),
            seed=seed,
            seats=[admin_pb2.SeatConfig(bot_name=names[seat], remote=remote[seat]) for seat in range(4)],
            join_timeout_s=join_timeout_s,
            external_id=external_id,
        )
        created = await _call(admin.CreateTable, request, auth, address)
        table_id = created.table_id
        logs = tuple(None if remote[seat] else log_dir / f"seat{seat}-{names[seat]}.log" for seat in range(4))
        processes: list[asyncio.subprocess.Process] = []
        watchers: list[asyncio.Task[None]] = []
        ended = False
        try:
            for seat in range(4):
                side, log_path = teams[seat % 2], logs[seat]
                if isinstance(side, BotProgram):
                    process = await launch_bot(side, address, created.seat_tokens[seat], log_path=log_path)
                    processes.append(process)
                    watchers.append(asyncio.create_task(_report_crash(admin, auth, table_id, seat, process)))
            status = await _wait_for_end(admin, table_id, auth, address)
            ended = True
            for watcher in watchers:
                watcher.cancel()
            await _reap(processes)
            if status.status != admin_pb2.TABLE_STATUS_FINISHED:
                raise RefereeFailure(f"table {table_id} on the referee at {address} was cancelled")
            replay = await _call(
                admin.GetTableReplay, admin_pb2.GetTableReplayRequest(table_id=table_id), auth, address
            )
        finally:
            await _stop(watchers, processes)
            if not ended:
                with contextlib.suppress(Exception):
                    await admin.CancelTable(
                        admin_pb2.CancelTableRequest(table_id=table_id, reason="the match runner stopped"),
                        metadata=auth,
                        timeout=RPC_TIMEOUT_S,
                    )
    return _referee_match(replay, logs)


async def _report_crash(
    admin: admin_pb2_grpc.TableAdminServiceAsyncStub,
    auth: Sequence[tuple[str, str]],
    table_id: str,
    seat: int,
    process: asyncio.subprocess.Process,
) -> None:
    """A hosted bot that exits before its table ends has crashed: tell the referee, as the embedded one is told.

    Cancelled once the table has ended; a report that cannot be delivered leaves the referee to charge a
    disconnect after its grace period instead.
    """
    code = await process.wait()
    with contextlib.suppress(grpc.RpcError):
        await admin.ReportCrash(
            admin_pb2.ReportCrashRequest(
                table_id=table_id, seat=seat, detail=f"the bot process exited with code {code}"
            ),
            metadata=auth,
            timeout=RPC_TIMEOUT_S,
        )


def _referee_match(replay: admin_pb2.GetTableReplayResponse, logs: tuple[Path | None, ...]) -> RefereeMatch:
    """The fetched replay, re-simulated: a record that does not replay to itself is the referee's failure."""
    record = json.loads(replay.record_json)
    if not isinstance(record, dict):
        raise RefereeFailure(f"table {replay.table_id}: the replay record is not a JSON object")
    match = replay_record(record)
    if match.outcome is None:
        raise RefereeFailure(f"table {replay.table_id}: the replay ends before the match does")
    if json.loads(json.dumps(match_record(match))) != record:
        raise RefereeFailure(f"table {replay.table_id}: the replay record does not re-simulate to itself")
    seconds: list[tuple[float, ...]] = [(), (), (), ()]
    for times in replay.decision_times:
        if times.seat < 4:
            seconds[times.seat] = tuple(times.seconds)
    incidents = tuple(
        Incident(incident.seat, IncidentCause(fault_cause_name(incident.cause)), incident.detail)
        for incident in replay.incidents
    )
    return RefereeMatch(replay.table_id, match, record, incidents, tuple(seconds), logs)


def fault_cause_name(cause: pb.FaultCause.ValueType) -> str:
    """A wire fault cause as the engine and the database name it: FAULT_CAUSE_ABSENT is `absent`."""
    return pb.FaultCause.Name(cause).removeprefix("FAULT_CAUSE_").lower()


async def _wait_for_end(
    admin: admin_pb2_grpc.TableAdminServiceAsyncStub,
    table_id: str,
    auth: Sequence[tuple[str, str]],
    address: str,
) -> admin_pb2.GetTableStatusResponse:
    """Poll the table until it has finished or was cancelled."""
    request = admin_pb2.GetTableStatusRequest(table_id=table_id)
    ended = (admin_pb2.TABLE_STATUS_FINISHED, admin_pb2.TABLE_STATUS_CANCELLED)
    while True:
        status = await _call(admin.GetTableStatus, request, auth, address)
        if status.status in ended:
            return status
        await asyncio.sleep(POLL_S)


async def _call(
    method: grpc.aio.UnaryUnaryMultiCallable[_Request, _Response],
    request: _Request,
    auth: Sequence[tuple[str, str]],
    address: str,
) -> _Response:
    """One admin call, retried while the referee is unreachable (for up to RPC_RETRY_S); `RefereeFailure`
    when it stays unreachable or refuses."""
    name = type(request).__name__.removesuffix("Request")
    deadline = time.monotonic() + RPC_RETRY_S
    pause = 0.1
    while True:
        try:
            return await method(request, metadata=tuple(auth), timeout=RPC_TIMEOUT_S)
        except grpc.aio.AioRpcError as error:
            code = error.code()
            if code in _RETRIED and time.monotonic() + pause < deadline:
                log.warning("%s on the referee at %s: %s; retrying in %.1f s", name, address, code.name, pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 2.0)
                continue
            what = "is unreachable" if code in _RETRIED else "refused it"
            raise RefereeFailure(f"{name}: the referee at {address} {what} ({code.name}: {error.details()})") from None


def fault_records(match: Match) -> list[dict[str, Any]]:
    """The rules' faults (rules §13: illegal_action, timeout, limit), in the order charged, from the engine's Fault
    events, as {seat, cause, detail}. Never an incident: those are `incident_records`."""
    return [
        {"seat": event.data["seat"], "cause": event.data["cause"], "detail": ""}
        for event in match.events
        if event.kind is EventKind.FAULT
    ]


def incident_records(incidents: Iterable[Incident]) -> list[dict[str, Any]]:
    """The referee's incidents (a seat's connection or process: protocol_error, disconnect, crash, absent), in the
    order recorded, as {seat, cause, detail}. Never a fault."""
    return [{"seat": incident.seat, "cause": incident.cause.value, "detail": incident.detail} for incident in incidents]
