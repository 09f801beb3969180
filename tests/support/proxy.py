"""A TCP proxy between a bot and its referee that drops the bot's connection once, mid-match: how the tests of
bots in other languages show that they rejoin a dropped stream with `next_seq`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc

from mus.v1 import play_pb2
from referee.service.servicer import PlayServicer


class DropOnceProxy:
    """A TCP proxy to the referee that cuts the first connection through which `drop_after` bytes have reached the
    bot, and no other. Not simply the first connection: on a loaded machine the bot's first one has ended before
    it carried that much, and the match then played out uncut."""

    def __init__(self, port: int, drop_after: int) -> None:
        self.port = port
        self.drop_after = drop_after
        self.connections = 0
        self.dropped = False

    async def handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.port)
        pipes = [
            asyncio.create_task(self._pipe(client_reader, server_writer, cut=False)),
            asyncio.create_task(self._pipe(server_reader, client_writer, cut=True)),
        ]
        await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        for task in pipes:
            task.cancel()
        for writer in (client_writer, server_writer):
            writer.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, cut: bool) -> None:
        sent = 0
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
                sent += len(data)
                if cut and sent >= self.drop_after and not self.dropped:
                    self.dropped = True
                    return


def refuse_first_joins(monkeypatch: Any) -> dict[str, int]:
    """Make the referee refuse joins RESOURCE_EXHAUSTED, as a referee whose budget of streams waiting to join is
    full does (`referee.service.quota`): the bots in other languages must join again rather than exit. Returns how
    many joins to refuse by seat token, to fill once the table exists. Patch before the server starts (it binds
    the method then)."""
    left: dict[str, int] = {}
    original = PlayServicer.Play

    async def refusing(
        self: PlayServicer, requests: AsyncIterator[play_pb2.PlayRequest], context: Any
    ) -> AsyncIterator[Any]:
        first = await anext(requests)
        token = first.join.seat_token
        if left.get(token, 0) > 0:
            left[token] -= 1
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too many streams waiting to authenticate")

        async def replayed() -> AsyncIterator[play_pb2.PlayRequest]:
            yield first
            async for request in requests:
                yield request

        async for response in original(self, replayed(), context):
            yield response

    monkeypatch.setattr(PlayServicer, "Play", refusing)
    return left
