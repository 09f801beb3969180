"""A TCP proxy between a bot and its referee that drops the bot's connection once, mid-match: how the tests of
bots in other languages show that they rejoin a dropped stream with `next_seq`."""

from __future__ import annotations

import asyncio
import contextlib


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
