"""A seat cannot void its match by flooding the standalone referee (issue 9): the worker retries a referee that is
out of call slots instead of voiding, each hosted seat's forwarder holds only a few connections, and the admin
calls may have a server of their own. Real referee servers, real sockets, real sandboxed processes."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import socket
import struct
import tempfile
import termios
from pathlib import Path
from typing import Any

import grpc
import pytest

from mus.v1 import admin_pb2
from referee.engine.outcome import MatchTermination
from referee.engine.rules import Rules
from referee.service.server import start_admin_server, start_server
from referee.service.servicer import Referee
from tests.workers.test_sandbox import attacks, hostile, needs_bwrap
from workers import matches
from workers.launcher import Limits, resolve_program
from workers.matches import MAX_SEAT_CONNECTIONS, RefereeFailure, _call, _forward, play_on_referee

pytestmark = pytest.mark.slow  # real referee servers and sandboxed processes

FAST = Rules.from_options({"target_score": 5, "decision_timeout_s": 1, "time_bank_s": 1})
TOKEN = "flood-admin-token-0123456789"


@needs_bwrap
@pytest.mark.parametrize("admin_port", ["own", "shared"])
def test_a_seat_that_floods_the_referee_with_health_watches_cannot_void_its_match(
    tmp_path: Path, admin_port: str
) -> None:
    """The tester's attack: a hosted seat opens 5,000 `Health/Watch` streams through its socket. Its forwarder
    keeps 4 connections, the referee at most 8 such streams on each; the match is played to its end and stored,
    whether the worker's admin calls have a port of their own or share the public one."""
    program, _ = hostile(tmp_path, "health")

    async def on_referee() -> matches.PlayedMatch:
        referee = Referee(TOKEN)
        server, port = await start_server(referee, "127.0.0.1:0")
        admin_server, admin = await start_admin_server(referee, "127.0.0.1:0")
        try:
            return await play_on_referee(
                (program, resolve_program("random")),
                FAST,
                5,
                address=f"127.0.0.1:{port}",
                admin_address=f"127.0.0.1:{admin}" if admin_port == "own" else None,
                admin_token=TOKEN,
                log_dir=tmp_path,
                sandbox=Limits(),
            )
        finally:
            await admin_server.stop(grace=None)
            await server.stop(grace=None)

    played = asyncio.run(on_referee())
    assert played.match.outcome is not None, "a result, not a void"
    assert played.match.outcome.termination in (MatchTermination.NORMAL, MatchTermination.FORFEIT)
    assert all(incident.seat % 2 == 0 for incident in played.incidents), "the honest seats are untouched"
    for seat in (0, 2):
        log = played.logs[seat]
        assert log is not None
        (line,) = attacks(log)["health"]
        assert line.startswith("BLOCKED"), line
        counts = dict(part.split("=") for part in line.split()[1].split(","))
        assert int(counts.get("held", 0)) <= MAX_SEAT_CONNECTIONS * 8, line


def test_a_seats_forwarder_holds_only_so_many_connections_and_refuses_the_rest(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[bytes], bytes, bytes]:
        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await reader.read(1024):
                    writer.write(data)
                    await writer.drain()
            writer.close()

        referee = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = referee.sockets[0].getsockname()[1]
        folder = Path(tempfile.mkdtemp(dir=tmp_path))
        forwarder = await _forward(folder / "referee.sock", f"127.0.0.1:{port}", max_connections=2)
        held = [await asyncio.open_unix_connection(str(folder / "referee.sock")) for _ in range(2)]
        answers = []
        for number, (reader, writer) in enumerate(held):
            writer.write(b"hello %d" % number)
            answers.append(await reader.read(1024))
        reader, writer = await asyncio.open_unix_connection(str(folder / "referee.sock"))
        refused = await reader.read(1024)  # closed at once: end of file
        writer.close()
        held[0][1].close()
        await held[0][1].wait_closed()
        # A slot is free again once a connection has ended; the forwarder sees it end when its pipe does.
        again = b""
        for _ in range(100):
            reader, writer = await asyncio.open_unix_connection(str(folder / "referee.sock"))
            writer.write(b"again")
            with contextlib.suppress(ConnectionError):
                again = await reader.read(1024)
            writer.close()
            if again:
                break
            await asyncio.sleep(0.01)
        for _, held_writer in held[1:]:
            held_writer.close()
        forwarder.close()
        referee.close()
        return answers, refused, again

    answers, refused, again = asyncio.run(scenario())
    assert answers == [b"hello 0", b"hello 1"]
    assert refused == b"", "the third connection is closed before it reaches the referee"
    assert again == b"again"


def test_a_referee_connection_reset_ends_its_pipe_quietly_and_frees_its_slot(tmp_path: Path) -> None:
    """A connection the referee's side resets (RST, not a clean close) ends at the forwarder without an error, and
    its slot is free again: the bot's side sees its end of file."""

    async def scenario() -> tuple[bytes, bytes]:
        async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(1024)
            # SO_LINGER with a zero timeout: close() sends RST, so the forwarder's read fails with ECONNRESET.
            writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()

        referee = await asyncio.start_server(reset, "127.0.0.1", 0)
        port = referee.sockets[0].getsockname()[1]
        folder = Path(tempfile.mkdtemp(dir=tmp_path))
        forwarder = await _forward(folder / "referee.sock", f"127.0.0.1:{port}", max_connections=1)
        ends = []
        for attempt in (b"first", b"second"):  # one slot: the second connection gets it only once the first ended
            reader, writer = await asyncio.open_unix_connection(str(folder / "referee.sock"))
            writer.write(attempt)
            with contextlib.suppress(ConnectionError):
                ends.append(await asyncio.wait_for(reader.read(1024), 10))
            writer.close()
        forwarder.close()
        referee.close()
        return ends[0], ends[1]

    assert asyncio.run(scenario()) == (b"", b"")


class _Exhausted:
    """An admin method that says RESOURCE_EXHAUSTED `times` times, then answers."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.calls = 0

    async def __call__(self, request: Any, **_: Any) -> str:
        self.calls += 1
        if self.calls <= self.times:
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                grpc.aio.Metadata(),
                grpc.aio.Metadata(),
                details="Concurrent RPC limit exceeded!",
            )
        return "answered"


def test_a_referee_out_of_call_slots_is_retried_like_an_unreachable_one_not_a_refusal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    request = admin_pb2.GetTableStatusRequest(table_id="t")
    method = _Exhausted(times=3)
    answer: str = asyncio.run(_call(method, request, (), "here"))
    assert (answer, method.calls) == ("answered", 4)

    monkeypatch.setattr(matches, "RPC_RETRY_S", 0.15)
    with pytest.raises(RefereeFailure, match="RESOURCE_EXHAUSTED"):
        asyncio.run(_call(_Exhausted(times=1000), request, (), "here"))
    patient = _Exhausted(times=3)  # 0.7 s of pauses: past RPC_RETRY_S, within the poll's patience
    assert asyncio.run(_call(patient, request, (), "here", patience_s=30)) == "answered"


def test_a_seats_forwarder_takes_what_the_referee_sends_at_once_whether_the_seat_reads_or_not(tmp_path: Path) -> None:
    """The host's TCP buffers are counted host-wide (/proc/net/sockstat's TCP mem, which a seat reads): what the
    referee sends a seat that does not read waits in the worker's memory, never in the kernel's TCP buffers."""

    async def scenario() -> tuple[int, int]:
        sent = asyncio.Event()
        queued: list[int] = []

        async def talk(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b"x" * (4 * 1024 * 1024))
            await writer.drain()  # returns once the kernel took it: the forwarder read it, or its buffers hold it
            await asyncio.sleep(0.3)
            tcp = writer.get_extra_info("socket")
            queued.append(struct.unpack("i", fcntl.ioctl(tcp.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0])
            sent.set()
            await reader.read()

        referee = await asyncio.start_server(talk, "127.0.0.1", 0)
        port = referee.sockets[0].getsockname()[1]
        folder = Path(tempfile.mkdtemp(dir=tmp_path))
        forwarder = await _forward(folder / "referee.sock", f"127.0.0.1:{port}", max_connections=1)
        reader, writer = await asyncio.open_unix_connection(str(folder / "referee.sock"), limit=1024)
        writer.write(b"hello")  # the forwarder connects to the referee on the seat's first connection
        await asyncio.wait_for(sent.wait(), 10.0)
        unread_by_seat = 0
        with contextlib.suppress(TimeoutError):
            while chunk := await asyncio.wait_for(reader.read(1 << 20), 0.5):
                unread_by_seat += len(chunk)
        writer.close()
        forwarder.close()
        referee.close()
        return queued[0], unread_by_seat

    queued, delivered = asyncio.run(scenario())
    assert queued == 0, f"{queued} bytes still in the referee's TCP send queue"
    assert delivered == 4 * 1024 * 1024, "and all of it reaches the seat once it reads"
