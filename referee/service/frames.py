"""The Play stream over frames on a unix socket: what a pooled process may speak instead of gRPC (docs/pool.md).

A persistent process plays seat after seat on its worker's referee. Over gRPC each decision costs HTTP/2 framing,
a trip through grpc's core and its threads on both sides, and several coroutine resumptions in the referee: more
CPU than the decision's rules. The seat line of a pooled process therefore also names a socket in the process's
own folder where the same Play stream is spoken with gRPC-Web's message framing and nothing else:

- One connection is one Play stream: the bot writes `PlayRequest` frames (its Join first), the referee writes
  `PlayResponse` frames, then one trailer frame with the stream's status, and closes the connection. A bot that
  closes its connection (its end of input) has left the stream, as a cancelled gRPC call: it may join again.
- A frame is one flags byte, a 4-byte big-endian length and that many bytes: flags 0x00, a serialized message;
  flags 0x80 (referee to bot only, always last), the status as `grpc-status: N\\r\\ngrpc-message: TEXT\\r\\n`
  (N a gRPC status code number, TEXT percent-encoded as in gRPC's own `grpc-message`).

The stream is the gRPC method's own (`PlayServicer.Play`): the same Join, tokens, limits and statuses. What gRPC
bounds on its own is bounded here: a frame's size (`TRANSPORT_LIMIT_BYTES`; a larger frame, or one that is not a
message, is unreadable: the stream ends INVALID_ARGUMENT, a protocol error once the seat is known) and the
connections open on one socket at once (`MAX_CONNECTIONS`, the next one is closed at once). The socket is in one
process's folder, which only that process's sandbox binds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc

from mus.v1 import play_pb2
from referee.service.servicer import (
    TRANSPORT_LIMIT_BYTES,
    PlayServicer,
    RaisingContext,
    Referee,
    StreamAborted,
    read_play_request,
)

MESSAGE = 0x00
TRAILER = 0x80
HEADER_BYTES = 5

MAX_CONNECTIONS = 4
"""Streams open at once on one process's socket: it plays one seat at a time (a rejoin may overlap the stream it
replaces for a moment). One more connection is closed without a word."""


WRITE_BUFFER_BYTES = 64 * 1024
"""Bytes written and not yet taken by the bot past which the referee waits for it to read (WRITE_STALL_S)."""

WRITE_STALL_S = 5.0
"""How long the referee waits for a bot to read what is already buffered for it before the connection is cut: a
bot that never reads would otherwise hold its stream, and what the table keeps queueing for it, for ever."""


class FrameError(Exception):
    """What a bot wrote is not a frame this side reads."""


def frame(body: bytes, flags: int = MESSAGE) -> bytes:
    return bytes((flags,)) + len(body).to_bytes(4, "big") + body


def trailer(code: grpc.StatusCode, details: str) -> bytes:
    """The last frame of a stream: its status in gRPC's own terms."""
    text = f"grpc-status: {code.value[0]}\r\n" + (f"grpc-message: {_percent_encoded(details)}\r\n" if details else "")
    return frame(text.encode(), TRAILER)


def _percent_encoded(text: str) -> str:
    """As gRPC's `grpc-message`: printable ASCII as it is, but for '%'; every other byte of its UTF-8 as %XX."""
    return "".join(chr(byte) if 0x20 <= byte <= 0x7E and byte != 0x25 else f"%{byte:02X}" for byte in text.encode())


async def _requests(reader: asyncio.StreamReader, left: Callable[[], object]) -> AsyncIterator[play_pb2.PlayRequest]:
    """The bot's PlayRequests; at the end of its connection, `left()` (also inside a frame: a process killed while
    it wrote has left, as a gRPC client whose connection breaks). A frame this side cannot read raises (the stream
    then ends as on gRPC: INVALID_ARGUMENT, and a protocol error once the seat is known)."""
    while True:
        try:
            header = await reader.readexactly(HEADER_BYTES)
            length = int.from_bytes(header[1:], "big")
            if header[0] != MESSAGE:
                raise FrameError(f"frame flags {header[0]:#04x}: a bot sends only messages (0x00)")
            if length > TRANSPORT_LIMIT_BYTES:
                raise FrameError(f"a frame of {length} bytes is over the limit of {TRANSPORT_LIMIT_BYTES} bytes")
            body = await reader.readexactly(length)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):  # an end, or a reset (unread data): it left
            left()
            return
        yield read_play_request(body)


class FrameServer:
    """Play streams over frames on one unix socket (see the module), with the referee's own Play servicer or
    `servicer` (one that also watches the streams: `mus bot check`'s)."""

    def __init__(self, referee: Referee, path: Path, *, servicer: PlayServicer | None = None) -> None:
        self.path = path
        self._play = servicer if servicer is not None else PlayServicer(referee)
        self._server: asyncio.Server | None = None
        self._streams: set[asyncio.Task[None]] = set()
        self.served = 0
        """Streams taken so far (connections past the cap are not)."""

    async def start(self) -> FrameServer:
        # Held before the first await that may be cancelled, so that `stop` always closes it.
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.path), start_serving=False)
        await self._server.start_serving()
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._server is None or len(self._streams) >= MAX_CONNECTIONS:  # stopped, or past the cap
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._streams.add(task)
        self.served += 1
        try:
            await self._stream(reader, writer, task)
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass  # the bot went away (or the server stops): the Play stream was cancelled, as a gRPC call's is
        finally:
            self._streams.discard(task)
            writer.close()

    async def _stream(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, task: asyncio.Task[None]
    ) -> None:
        transport = writer.transport
        code, details = grpc.StatusCode.OK, ""

        def sink(message: play_pb2.PlayResponse | bytes) -> bool:
            """A response written at once (`DirectOutbox`), unless the connection is closing or backed up."""
            if transport.is_closing() or transport.get_write_buffer_size() > WRITE_BUFFER_BYTES:
                return False
            try:
                writer.write(frame(message if isinstance(message, bytes) else message.SerializeToString()))
            except (RuntimeError, OSError):  # inside another seat's Act: this connection's failure stays its own
                return False
            return True

        try:
            # Closed on the way out, whichever: the seat is detached before this returns, not when it is collected.
            context = RaisingContext(sink)
            async with contextlib.aclosing(self._play.Play(_requests(reader, task.cancel), context)) as play:
                async for message in play:
                    if transport.is_closing():  # the bot went away: the rest of a resent backlog is for nobody
                        return
                    body = message if isinstance(message, bytes) else message.SerializeToString()
                    writer.write(frame(body))
                    if transport.get_write_buffer_size() > WRITE_BUFFER_BYTES:  # not buffered for without end
                        try:
                            async with asyncio.timeout(WRITE_STALL_S):
                                await writer.drain()
                        except TimeoutError:
                            transport.abort()  # it stopped reading: it has left, as a stalled gRPC stream would
                            return
        except StreamAborted as aborted:
            code, details = aborted.code, aborted.details
        writer.write(trailer(code, details))
        with contextlib.suppress(ConnectionError, OSError, TimeoutError):
            async with asyncio.timeout(WRITE_STALL_S):
                await writer.drain()

    async def stop(self) -> None:
        """Stop listening, end the streams still open and remove the socket."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._streams):
            task.cancel()
        await asyncio.gather(*self._streams, return_exceptions=True)
        self.path.unlink(missing_ok=True)
