"""Hundreds of tables' seats opening their streams while the referee is busy are all taken, none reset.

grpc.aio takes one new call per method at a time, through the event loop; the calls that arrive meanwhile wait in
grpc's core, which resets them at random past `grpc.server.max_pending_requests` (1,000 by default). At 500
tables that reset honest seats' streams (the bot saw CANCELLED, or INTERNAL on its Join's write) and made them
absent from their tables (`mus bench referee --tables 500`). The referee sets the backlog to the calls it serves
at once (`server.MAX_PENDING_RPCS`).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

from referee.engine.rules import Rules
from referee.service.server import start_server
from referee.service.servicer import Referee

SEATS = 2000
CONNECTIONS = 20

CLIENT = """
import asyncio, json, sys
import grpc
from mus.v1 import play_pb2, play_pb2_grpc

async def main(address, tokens, connections):
    options = [("grpc.use_local_subchannel_pool", 1)]
    channels = [grpc.aio.insecure_channel(address, options=options) for _ in range(connections)]
    calls = [play_pb2_grpc.PlayServiceStub(channels[i % connections]).Play() for i in range(len(tokens))]

    async def join(call, token):
        join = play_pb2.Join(seat_token=token, bot_name="burst", bot_version="1", protocol_version=1)
        try:
            await call.write(play_pb2.PlayRequest(join=join))
        except grpc.aio.AioRpcError as error:
            return error.code().name
        return "sent"

    sent = await asyncio.gather(*map(join, calls, tokens))
    print("sent", flush=True)

    async def first(call, how):
        if how != "sent":
            return how
        try:
            message = await call.read()
        except grpc.aio.AioRpcError as error:
            return error.code().name
        return message.WhichOneof("message") if message is not grpc.aio.EOF else "EOF"

    firsts = await asyncio.gather(*map(first, calls, sent))
    counted = {}
    for how in firsts:
        counted[how] = counted.get(how, 0) + 1
    print(json.dumps(counted), flush=True)
    for call in calls:
        call.cancel()
    for channel in channels:
        await channel.close()

asyncio.run(main(sys.argv[1], sys.stdin.readline().split(), int(sys.argv[2])))
"""


def test_two_thousand_seats_opening_their_streams_while_the_referee_is_busy_all_join() -> None:
    async def scenario() -> dict[str, int]:
        referee = Referee("backlog-admin-token-0123456789")
        server, port = await start_server(referee, "127.0.0.1:0")
        try:
            tables = [referee.create_table(Rules(), seed, ["a", "b", "c", "d"]) for seed in range(SEATS // 4)]
            tokens = [state.token for table in tables for state in table.seats]
            client = subprocess.Popen(
                [sys.executable, "-c", CLIENT, f"127.0.0.1:{port}", str(CONNECTIONS)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=Path(__file__).resolve().parents[2],
            )
            assert client.stdin is not None and client.stdout is not None
            client.stdin.write(" ".join(tokens) + "\n")
            client.stdin.flush()
            # The referee is busy (its event loop blocked here) while every seat opens its stream and writes its
            # Join, and a moment after: the streams wait in grpc's core for the referee to take them.
            assert client.stdout.readline().strip() == "sent"
            time.sleep(1.0)
            line = await asyncio.to_thread(client.stdout.readline)
            client.wait(60)
            for table in tables:
                table.cancel("done")
            counted: dict[str, int] = json.loads(line)
            return counted
        finally:
            await server.stop(grace=None)

    assert asyncio.run(scenario()) == {"joined": SEATS}
