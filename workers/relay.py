"""A hosted seat's way to a standalone referee: a gRPC server on a unix socket of the seat's own that relays the
seat's `Play` calls, message by message, over a connection the worker opened to the referee for that seat alone.

The seat's sandbox has no network; the worker is its only way out (docs/sandbox.md). A byte-for-byte forwarder
opened a TCP connection to the referee for each connection the seat opened, and the host's count of TCP sockets
(`TCP: ... alloc` in `/proc/net/sockstat`, host-wide whatever the network namespace) then moved with what the seat
did: a seat could open and close connections for its partner to count, about 3 bits a turn. Here the seat's
connections end at this server, and the worker's one connection for the seat is opened before the seat starts and
kept until it ends: nothing the seat does opens or closes a TCP socket on this host.

Only `Play` is relayed (a hosted seat needs nothing else: its token comes in its Join), at most `max_calls` at once
(a bot needs one, two while it rejoins); any other method is UNIMPLEMENTED here and never reaches the referee. The
messages pass as bytes, unparsed: the referee checks them as it checks any client's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc

from referee.service.server import SERVER_OPTIONS
from referee.service.table import RateLimiter

log = logging.getLogger(__name__)

PLAY_METHOD = "/mus.v1.PlayService/Play"

MAX_SEAT_CALLS = 4
"""`Play` calls one seat may have relayed at once: a bot needs one, two while it rejoins after a cut stream."""

SEAT_CALL_BURST = 10.0
SEAT_CALL_RATE = 1.0
"""`Play` calls one seat may have relayed: bursts of SEAT_CALL_BURST, then SEAT_CALL_RATE a second (the referee takes
a seat's joins at that pace anyway); past it a call is refused here, RESOURCE_EXHAUSTED, and never reaches the
referee. The referee counts each stream that ends without authenticating against its host's budget
(`quota.SILENT_STREAMS_PER_HOST`), and every hosted seat relayed from this machine shares its host: a review's seat
opened and reset Play calls on its socket, drained that budget, and the honest seats of the machine's other matches
were refused their joins until they were absent (helper-81)."""

CONNECT_S = 10.0
"""How long the relay waits for its connection to the referee before the seat starts: past it, the seat starts
anyway and its calls fail as they would on an unreachable referee (the match's admin calls fail first)."""


class SeatRelay:
    """A seat's relay: the server on its socket, and the channel to the referee it relays to."""

    def __init__(self, server: grpc.aio.Server, channel: grpc.aio.Channel) -> None:
        self.server = server
        self.channel = channel

    async def close(self) -> None:
        """Stop relaying: the seat's calls end (CANCELLED), then the connection to the referee closes."""
        await self.server.stop(grace=None)
        await self.channel.close()


async def open_relay(path: Path, address: str, *, max_connections: int, max_calls: int = MAX_SEAT_CALLS) -> SeatRelay:
    """Serve the seat's socket at `path` (at most `max_connections` connections open at once, as on the embedded
    referee's seat sockets), relaying to the referee at `address` (host:port, or unix:path)."""
    channel = grpc.aio.insecure_channel(
        address,
        # A connection of this seat's own: channels to one address otherwise share one, and one seat's calls would
        # count against its neighbours' per-connection budgets on the referee (`referee.service.quota`).
        options=[("grpc.use_local_subchannel_pool", 1), ("grpc.max_receive_message_length", 16 * 1024 * 1024)],
    )
    with contextlib.suppress(TimeoutError, grpc.aio.AioRpcError):
        await asyncio.wait_for(channel.channel_ready(), CONNECT_S)
    upstream: Any = channel.stream_stream(PLAY_METHOD)  # no serializers: the messages pass as bytes
    active = 0
    calls = RateLimiter(SEAT_CALL_RATE, SEAT_CALL_BURST)

    async def play(_: AsyncIterator[bytes], context: Any) -> None:
        nonlocal active
        if active >= max_calls:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"at most {max_calls} Play calls at once")
        if not calls.allow():
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"joined too often: {SEAT_CALL_BURST:g} Play calls at once, then {SEAT_CALL_RATE:g} a second",
            )
        active += 1
        call: Any = upstream(timeout=context.time_remaining())
        sending = asyncio.create_task(_send(context, call))
        try:
            code, details = await _receive(call, context)
        finally:
            active -= 1
            sending.cancel()
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # the call has ended: so has its sending
                await sending
        del call, sending  # the abort's traceback holds this frame: the call would keep the connection open
        if code is not grpc.StatusCode.OK:
            await context.abort(code, details or "")

    handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.stream_stream_rpc_method_handler(play)  # bytes as they are
    server = grpc.aio.server(
        options=[*SERVER_OPTIONS, ("grpc.max_allowed_incoming_connections", max_connections)],
    )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("mus.v1.PlayService", {"Play": handler}),))
    if server.add_insecure_port(f"unix:{path}") == 0:
        await channel.close()
        raise OSError(f"cannot listen on {path}")
    await server.start()
    return SeatRelay(server, channel)


async def _send(context: Any, call: Any) -> None:
    """The seat's messages to the referee (grpc.aio's read/write API on both calls: its iterator API may not be
    mixed with it)."""
    while (message := await context.read()) is not grpc.aio.EOF:
        await call.write(message)
    await call.done_writing()


async def _receive(call: Any, context: Any) -> tuple[grpc.StatusCode, str]:
    """The referee's messages to the seat, then the call's status."""
    try:
        while (message := await call.read()) is not grpc.aio.EOF:
            await context.write(message)  # waits while the seat does not read: the referee's stream then waits
        return await call.code(), await call.details()
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or ""
