"""What the tests of bots in other languages play them through: a TCP proxy between a bot and its referee that drops
the bot's connection once, mid-match (they rejoin with `next_seq`), a referee that refuses their joins, and a table
of four launched programs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import grpc

from mus.v1 import play_pb2
from referee.engine.rules import Rules
from referee.service.server import start_server
from referee.service.servicer import PlayServicer, Referee
from referee.service.table import Table
from workers.launcher import BotProcess, BotProgram, launch_bot


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


async def play_table(
    table: Table, programs: Sequence[BotProgram], addresses: Sequence[str], logs: Sequence[Path]
) -> list[int | None]:
    """Launch the four seats' programs at their addresses; wait for the outcome and for every process to exit;
    their exit codes."""
    processes: list[BotProcess] = []
    try:
        for seat in range(4):
            processes.append(
                await launch_bot(programs[seat], addresses[seat], table.seats[seat].token, log_path=logs[seat])
            )
        await asyncio.wait_for(table.finished.wait(), 60)
        await asyncio.wait_for(asyncio.gather(*(process.wait() for process in processes)), 10)
    finally:
        for process in processes:
            if process.returncode is None:
                process.kill()
                await process.wait()
    return [process.returncode for process in processes]


def play_refused(
    monkeypatch: Any,
    rules: Rules,
    seed: int,
    programs: Sequence[BotProgram],
    refused_seats: Sequence[int],
    logs: Sequence[Path],
) -> tuple[list[int | None], Table, dict[str, int]]:
    """Play the four `programs` on a new referee that refuses the first two joins of each of `refused_seats`
    RESOURCE_EXHAUSTED (`refuse_first_joins`): their exit codes, the table, and the refusals left by seat token
    (none, once every refused seat has joined again)."""
    refusals = refuse_first_joins(monkeypatch)

    async def run() -> tuple[list[int | None], Table]:
        referee = Referee()
        server, port = await start_server(referee, "127.0.0.1:0")
        table = referee.create_table(rules, seed, [program.name for program in programs])
        refusals.update({table.seats[seat].token: 2 for seat in refused_seats})
        try:
            return await play_table(table, programs, [f"127.0.0.1:{port}"] * 4, logs), table
        finally:
            await server.stop(grace=1.0)

    codes, table = asyncio.run(run())
    return codes, table, refusals
