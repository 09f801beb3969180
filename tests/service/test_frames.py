"""The Play stream over frames (referee/service/frames.py, docs/pool.md "Frames") on a real unix socket.

Honest seats play a whole match with the SDK over frames, and get the engine's outcome; what a hostile process
may write (no Join, an unknown token, a trailer frame, a frame over the size limit, garbage, a flood of
connections) ends its stream with a gRPC status naming the problem and charges its seat a protocol error once
the seat is known, as on gRPC; a seat that closes its connection may join again.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import tempfile
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from clients.bots.random_bot import RandomBot
from clients.frames import STATUS_NAMES, FrameStream, StreamEnded
from clients.sdk.runner import run_bot
from mus.v1 import play_pb2
from referee import wire
from referee.causes import IncidentCause
from referee.engine.rules import Rules
from referee.service import frames
from referee.service.frames import FrameServer
from referee.service.servicer import TRANSPORT_LIMIT_BYTES, DirectOutbox, Referee
from referee.service.table import Outbox, Table, TableStatus

T = TypeVar("T")
NAMES = ["a", "b", "c", "d"]


def with_frames(scenario: Callable[[Referee, str], Awaitable[T]]) -> T:
    """Run `scenario` against a referee serving frames on a socket in a fresh folder."""

    async def main() -> T:
        referee = Referee(reconnect_grace_s=5.0)
        with tempfile.TemporaryDirectory(prefix="mus-frames-") as folder:
            server = await FrameServer(referee, Path(folder) / "play.sock").start()
            try:
                return await asyncio.wait_for(scenario(referee, f"unix:{server.path}"), 60)
            finally:
                await server.stop()

    return asyncio.run(main())


def join(token: str, next_seq: int = 0) -> play_pb2.PlayRequest:
    return play_pb2.PlayRequest(
        join=play_pb2.Join(seat_token=token, bot_name="x", protocol_version=1, batch_events=True, next_seq=next_seq)
    )


def ended(stream: FrameStream) -> tuple[list[str], StreamEnded | None]:
    """The kinds of the responses read until the stream ended, and how it ended (None: OK)."""
    kinds: list[str] = []
    try:
        for response in stream:
            kinds.append(str(response.WhichOneof("message")))
    except StreamEnded as error:
        return kinds, error
    return kinds, None


async def raw(address: str, data: bytes) -> bytes:
    """Write `data` on a new connection and read everything the referee writes until it closes."""
    reader, writer = await asyncio.open_unix_connection(address[len("unix:") :])
    writer.write(data)
    await writer.drain()
    received = await reader.read()
    writer.close()
    return received


def test_four_sdk_seats_play_a_match_over_frames_to_the_engines_outcome() -> None:
    async def scenario(referee: Referee, address: str) -> None:
        table = referee.create_table(Rules(), 7, NAMES)
        outcomes = await asyncio.gather(
            *(
                asyncio.to_thread(run_bot, RandomBot(seed=seat), address, table.seats[seat].token, frames=address)
                for seat in range(4)
            )
        )
        assert table.status is TableStatus.FINISHED and table.match is not None
        assert all(outcome == table.match.outcome for outcome in outcomes)
        assert table.incidents == [] and table.match.faults == [0, 0]

    with_frames(scenario)


def test_an_unknown_token_ends_the_stream_unauthenticated_with_the_referees_words() -> None:
    async def scenario(referee: Referee, address: str) -> None:
        def attempt() -> tuple[list[str], StreamEnded | None]:
            with FrameStream(address) as stream:
                stream.put(join("no-such-token"))
                return ended(stream)

        kinds, error = await asyncio.to_thread(attempt)
        assert kinds == [] and error is not None
        assert error.code == "UNAUTHENTICATED"
        assert error.details == "unknown or expired seat token"

    with_frames(scenario)


def _frame(body: bytes, flags: int = 0) -> bytes:
    return bytes((flags,)) + len(body).to_bytes(4, "big") + body


def _status(received: bytes) -> str:
    """The trailer's text: the last frame of what the referee wrote."""
    assert received, "the referee wrote nothing"
    offset = 0
    while True:
        length = int.from_bytes(received[offset + 1 : offset + 5], "big")
        if received[offset] == frames.TRAILER:
            assert offset + 5 + length == len(received), "the trailer is the last frame"
            return received[offset + 5 :].decode()
        offset += 5 + length


@pytest.mark.parametrize(
    ("first", "status"),
    [
        (_frame(b"", frames.TRAILER), "grpc-status: 3\r\ngrpc-message: unreadable first message: FrameError\r\n"),
        (
            bytes((0,)) + (TRANSPORT_LIMIT_BYTES + 1).to_bytes(4, "big"),
            "grpc-status: 3\r\ngrpc-message: unreadable first message: FrameError\r\n",
        ),
        (_frame(b"\xff\xff\xff"), "grpc-status: 3\r\ngrpc-message: unreadable first message: DecodeError\r\n"),
        (
            _frame(play_pb2.PlayRequest(ping=play_pb2.Ping(nonce=1)).SerializeToString()),
            "grpc-status: 3\r\ngrpc-message: the first message of a Play stream must be Join\r\n",
        ),
    ],
    ids=["trailer-from-a-bot", "over-the-size-limit", "garbage", "no-join"],
)
def test_a_first_frame_that_is_not_a_join_ends_the_stream_with_a_status_naming_it(first: bytes, status: str) -> None:
    async def scenario(referee: Referee, address: str) -> None:
        assert _status(await raw(address, first)) == status

    with_frames(scenario)


def _seat_problem(table: Table) -> list[tuple[int, IncidentCause]]:
    return [(incident.seat, incident.cause) for incident in table.incidents]


@pytest.mark.parametrize(
    "bad",
    [
        _frame(b"", frames.TRAILER),
        bytes((0,)) + (TRANSPORT_LIMIT_BYTES + 1).to_bytes(4, "big"),
        _frame(play_pb2.PlayRequest().SerializeToString()),
    ],
    ids=["trailer-from-a-bot", "over-the-size-limit", "empty-request"],
)
def test_a_bad_frame_after_the_join_is_the_seats_protocol_error(bad: bytes) -> None:
    async def scenario(referee: Referee, address: str) -> None:
        table = referee.create_table(Rules(), 3, NAMES)
        received = await raw(address, _frame(join(table.seats[2].token).SerializeToString()) + bad)
        assert _status(received).startswith("grpc-status: 3\r\n")
        assert _seat_problem(table) == [(2, IncidentCause.PROTOCOL_ERROR)]

    with_frames(scenario)


def test_a_seat_that_closes_its_connection_joins_again_on_a_new_one() -> None:
    async def scenario(referee: Referee, address: str) -> None:
        table = referee.create_table(Rules(), 5, NAMES)

        def first_stream() -> None:
            with FrameStream(address) as stream:
                stream.put(join(table.seats[0].token))
                assert next(iter(stream)).WhichOneof("message") == "joined"

        await asyncio.to_thread(first_stream)
        await asyncio.sleep(0.2)  # the referee reads the connection's end
        assert not table.seats[0].outbox, "the closed connection left the seat"

        def again() -> play_pb2.Joined:
            with FrameStream(address) as stream:
                stream.put(join(table.seats[0].token, next_seq=0))
                return next(iter(stream)).joined

        assert (await asyncio.to_thread(again)).resumed
        table.cancel("the test is over")

    with_frames(scenario)


def test_connections_past_the_cap_are_closed_at_once_and_the_open_ones_are_not_disturbed() -> None:
    async def scenario(referee: Referee, address: str) -> None:
        path = address[len("unix:") :]
        held = [await asyncio.open_unix_connection(path) for _ in range(frames.MAX_CONNECTIONS)]
        await asyncio.sleep(0.1)
        reader, writer = await asyncio.open_unix_connection(path)
        assert await asyncio.wait_for(reader.read(), 5) == b"", "one more is closed without a word"
        writer.close()
        table = referee.create_table(Rules(), 9, NAMES)
        held_reader, held_writer = held[0]
        held_writer.write(_frame(join(table.seats[1].token).SerializeToString()))
        header = await asyncio.wait_for(held_reader.readexactly(5), 5)
        response = play_pb2.PlayResponse.FromString(await held_reader.readexactly(int.from_bytes(header[1:], "big")))
        assert response.joined.seat == 1
        for _, other in held:
            other.close()
        table.cancel("the test is over")

    with_frames(scenario)


def test_the_frames_client_names_every_grpc_status_code_by_its_number() -> None:
    import grpc

    assert [code.name for code in sorted(grpc.StatusCode, key=lambda code: code.value[0])] == STATUS_NAMES


def test_a_connection_that_ends_inside_a_frame_has_left_its_seat_without_a_protocol_error() -> None:
    """A process killed while it wrote: as a gRPC client whose connection breaks, not a bot breaking the rules."""

    async def scenario(referee: Referee, address: str) -> None:
        table = referee.create_table(Rules(), 4, NAMES)
        act = _frame(play_pb2.PlayRequest(ping=play_pb2.Ping(nonce=2)).SerializeToString())
        reader, writer = await asyncio.open_unix_connection(address[len("unix:") :])
        writer.write(_frame(join(table.seats[3].token).SerializeToString()) + act[:-1])
        writer.write_eof()
        received = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        header = received[:5]
        assert header[0] == frames.MESSAGE and len(received) == 5 + int.from_bytes(header[1:], "big"), (
            "the Joined, then no status: the stream was left, not ended"
        )
        assert not table.seats[3].outbox and table.incidents == []
        table.cancel("the test is over")

    with_frames(scenario)


def test_a_bot_that_dies_with_unread_frames_has_left_its_seat_without_a_protocol_error() -> None:
    """Closing a unix socket with data unread resets it (ECONNRESET): still the bot leaving, not a broken rule."""

    async def scenario(referee: Referee, address: str) -> None:
        table = referee.create_table(Rules(), 6, NAMES)
        reader, writer = await asyncio.open_unix_connection(address[len("unix:") :])
        writer.write(_frame(join(table.seats[2].token).SerializeToString()))
        await asyncio.wait_for(reader.readexactly(5), 5)  # the Joined is there, unread
        writer.transport.abort()
        await asyncio.sleep(0.2)
        assert not table.seats[2].outbox and table.incidents == []
        table.cancel("the test is over")

    with_frames(scenario)


class _StalledTransport:
    """A connection whose bot reads nothing: its buffer stays full."""

    aborted = False
    full = True

    def get_write_buffer_size(self) -> int:
        return frames.WRITE_BUFFER_BYTES + 1 if self.full else 0

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        self.aborted = True


class _StalledWriter:
    def __init__(self) -> None:
        self.transport = _StalledTransport()
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    async def drain(self) -> None:
        await asyncio.Event().wait()  # never: nothing is read


async def _stream_seat_1(writer: _StalledWriter) -> Table:
    """Seat 1 of a new table joins on a frames stream served to `writer` (a connection of the test's own);
    returns the table once the stream has ended (within 5 s)."""
    referee = Referee(reconnect_grace_s=5.0)
    table = referee.create_table(Rules(), 7, NAMES)
    reader = asyncio.StreamReader()
    reader.feed_data(_frame(join(table.seats[1].token).SerializeToString()))
    server = FrameServer(referee, Path("unused.sock"))

    async def stream() -> None:
        task = asyncio.current_task()
        assert task is not None
        await server._stream(reader, writer, task)  # type: ignore[arg-type]  # the test's own connection

    await asyncio.wait_for(stream(), 5)
    return table


def test_a_bot_that_stops_reading_is_cut_after_the_write_stall_and_has_left_its_seat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past WRITE_BUFFER_BYTES unread, the referee waits WRITE_STALL_S for the bot to read, then aborts the
    connection: the seat has left (as a stalled gRPC stream), is no protocol error, and may join again."""
    monkeypatch.setattr(frames, "WRITE_STALL_S", 0.2)

    async def scenario() -> None:
        writer = _StalledWriter()
        started = asyncio.get_running_loop().time()
        table = await _stream_seat_1(writer)
        assert asyncio.get_running_loop().time() - started >= 0.2, "it waited WRITE_STALL_S for the bot to read"
        assert writer.transport.aborted and len(writer.written) == 1, "the Joined, then the cut: no trailer"
        assert table.seats[1].outbox is None and table.incidents == [], "it left, without a protocol error"
        table.cancel("the test is over")

    asyncio.run(scenario())


def test_nothing_more_is_written_to_a_connection_the_bot_has_closed() -> None:
    """A bot that joins and resets at once, again and again, has the rest of its backlog dropped, not written
    message after message to the dead connection (asyncio would log a warning for each: a flood of the worker's
    log, from a hostile review)."""

    async def scenario() -> None:
        writer = _StalledWriter()
        writer.transport.full = False
        writer.transport.aborted = True  # closed by the bot before the referee writes
        table = await _stream_seat_1(writer)
        assert writer.written == [], "not the Joined, not a trailer: nobody is there to read them"
        assert table.seats[1].outbox is None and table.incidents == [], "it left, without a protocol error"
        table.cancel("the test is over")

    asyncio.run(scenario())


def test_a_reset_connection_is_unavailable_to_the_frames_client_so_an_sdk_seat_joins_again() -> None:
    """A connection reset under the client (the referee cut a stalled stream, or closed one past its cap with the
    Join unread) ends its stream as UNAVAILABLE, as over gRPC: worth joining again, never the seat's crash."""
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "reset.sock")
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(path)
            listener.listen()

            def reset_once() -> None:
                connection, _ = listener.accept()
                connection.recv(1)  # the rest of the Join stays unread: closing now resets the connection
                connection.close()

            server = threading.Thread(target=reset_once)
            server.start()
            with FrameStream(f"unix:{path}") as stream:
                stream.put(join("token"))
                server.join()
                with pytest.raises(StreamEnded) as ended:
                    list(stream)
    assert ended.value.code == "UNAVAILABLE", ended.value


def test_a_server_cancelled_as_it_starts_is_closed_by_stop() -> None:
    """A match cancelled while a seat's frames socket opens (a time limit) leaves nothing listening: `start` holds
    the server before its first await, so the clean-up's `stop` closes it (from a hostile review)."""

    async def scenario() -> None:
        with tempfile.TemporaryDirectory() as folder:
            server = FrameServer(Referee(), Path(folder) / "play.sock")
            starting = asyncio.create_task(server.start())
            await asyncio.sleep(0)  # `start` runs up to its first await, as far as a cancel can reach it
            starting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await starting
            listening = server._server
            assert listening is not None, "held before the await that was cancelled"
            await server.stop()
            assert not listening.is_serving() and not (Path(folder) / "play.sock").exists()

    asyncio.run(scenario())


def test_a_waiting_streams_responses_go_straight_to_its_sink_and_never_overtake_queued_ones() -> None:
    """`DirectOutbox`: while the stream waits for its next response, a response is written by the sink at once,
    not queued; the end of the stream is always queued; once one response is queued (the sink refused it: its
    connection backed up), every later one queues behind it, so the bot reads them in the order the table sent."""

    async def scenario() -> None:
        written: list[bytes] = []
        accepting = [True]

        def sink(message: play_pb2.PlayResponse | bytes) -> bool:
            if accepting[0]:
                written.append(message if isinstance(message, bytes) else message.SerializeToString())
            return accepting[0]

        outbox = DirectOutbox(lambda: None, sink)
        outbox.put_nowait(b"before")  # nobody waits yet: queued
        assert await outbox.get() == b"before" and written == []
        waiting = asyncio.create_task(outbox.get())
        await asyncio.sleep(0)
        outbox.put_nowait(b"one")
        outbox.put_nowait(play_pb2.PlayResponse(pong=play_pb2.Pong(nonce=7)))
        assert written == [b"one", play_pb2.PlayResponse(pong=play_pb2.Pong(nonce=7)).SerializeToString()]
        assert outbox.empty() and not waiting.done(), "written, not queued: the stream still waits"
        accepting[0] = False
        outbox.put_nowait(b"refused")
        accepting[0] = True
        outbox.put_nowait(b"after")
        outbox.put_nowait(None)
        assert [await waiting, await outbox.get(), await outbox.get()] == [b"refused", b"after", None]
        assert len(written) == 2, "nothing passed the response the sink refused"

    asyncio.run(scenario())


def test_a_frames_seats_responses_go_through_a_direct_outbox() -> None:
    """Over frames, a seat's Play stream writes the table's responses straight to its connection (`DirectOutbox`).
    (`mus bot check`'s servicer, which must see every response on its way, never does: its probes in
    tests/cli/test_bot_check.py fail when it does.)"""

    async def scenario(referee: Referee, address: str) -> None:
        table = referee.create_table(Rules(), 5, NAMES)
        streams = [FrameStream(address) for _ in range(4)]
        try:
            for seat, stream in enumerate(streams):
                await asyncio.to_thread(stream.put, join(table.seats[seat].token))
            while not all(state.outbox is not None for state in table.seats):
                await asyncio.sleep(0.01)
            assert all(isinstance(state.outbox, DirectOutbox) for state in table.seats)
        finally:
            for stream in streams:
                stream.close()
            table.cancel("the test is over")

    with_frames(scenario)


class _BreakingWriter(_StalledWriter):
    """A connection that takes the Joined, then fails every write (a transport broken under the referee)."""

    def __init__(self) -> None:
        super().__init__()
        self.transport.full = False

    def write(self, data: bytes) -> None:
        if self.written:
            raise RuntimeError("the transport broke")
        super().write(data)


def test_a_frames_seat_whose_connection_breaks_never_breaks_another_seats_act() -> None:
    """The table writes a frames seat's decision inside the Act that opens it, another seat's (`DirectOutbox`): a
    write that fails there is the failing seat's own stream's to meet, and the Act goes through."""

    async def scenario() -> None:
        referee = Referee(reconnect_grace_s=5.0)
        table = referee.create_table(Rules(), 7, NAMES)
        reader = asyncio.StreamReader()
        reader.feed_data(_frame(join(table.seats[1].token).SerializeToString()))
        writer = _BreakingWriter()
        server = FrameServer(referee, Path("unused.sock"))
        stream = asyncio.create_task(server._stream(reader, writer, asyncio.current_task()))  # type: ignore[arg-type]
        while table.seats[1].outbox is None:
            await asyncio.sleep(0.01)
        for seat in (0, 2, 3):
            table.attach(seat, Outbox(), batch=True)
        match = table.match
        assert match is not None
        while 1 not in table.decisions and table.status is TableStatus.RUNNING:
            seat = min(table.decisions)
            table.act(seat, table.decisions[seat].decision_id, wire.action_to_proto(match.legal_actions(seat)[0]))
        assert 1 in table.decisions, "the Act that asked seat 1 went through"
        assert writer.written and isinstance(table.seats[1].outbox, DirectOutbox)
        table.cancel("the test is over")
        with contextlib.suppress(RuntimeError):  # its own stream meets the broken transport, as before
            await asyncio.wait_for(stream, 5)

    asyncio.run(scenario())
