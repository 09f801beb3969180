"""The flooding client of `mus bench referee --flood`: one table whose four seats send the worst messages the
referee's limits allow, as fast as its rate limit lets them, in a process of its own.

Run as `python -m bench.referee_flood ADDRESS SECONDS` with the admin token in `MUS_ADMIN_TOKEN`. Until SECONDS
have passed it creates a table, holds its four seats and, on each seat's stream:

- answers every decision at once with a random legal action carrying `max_senas` unknown señas (as many as an
  Act may carry: each is rejected and recorded), padded with an unknown field to just under the referee's
  64 KiB message limit;
- between answers, sends padded pings at `PINGS_PER_S` a stream, just under the referee's rate limit of 200
  messages a second (after a burst), so every message the referee reads is as large as it accepts.

A match that ends is followed by a new one. `MUS_FLOOD_SENAS` overrides the señas per Act (see SENAS). It
prints one JSON line when done: the messages and bytes sent, the matches played and how each stream ended.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from typing import Any

import grpc

from clients.bots.wire_random import random_wire_action
from mus.v1 import admin_pb2, admin_pb2_grpc, play_pb2

MESSAGE_LIMIT = 64 * 1024
"""The referee's MAX_MESSAGE_BYTES: every message sent here is just under it."""
PINGS_PER_S = int(os.environ.get("MUS_FLOOD_PINGS_PER_S", "180"))
"""Per stream, under the referee's 200 messages a second (its bucket lets a burst of 400 through first), with room
for the Acts; `MUS_FLOOD_PINGS_PER_S=0` sends none (Acts alone)."""
BURST = 300
SENAS = int(os.environ.get("MUS_FLOOD_SENAS", "0"))
"""Unknown señas per Act; 0 (the default): as many as the decision's legal actions allow. Set it (e.g. to 60000,
the Act of issue 9) to measure a referee that does not cap them."""


def padded(message: play_pb2.PlayRequest) -> bytes:
    """The message's bytes plus an unknown length-delimited field, up to just under MESSAGE_LIMIT."""
    data = message.SerializeToString()
    tag = bytes([0xC2, 0x3E])  # field 1000, wire type 2, as a varint
    room = MESSAGE_LIMIT - len(data) - len(tag) - 3 - 16
    length = bytes([(room & 0x7F) | 0x80, ((room >> 7) & 0x7F) | 0x80, room >> 14])
    out = data + tag + length + b"\0" * room
    assert len(out) <= MESSAGE_LIMIT - 16, len(out)
    return out


class Counts:
    def __init__(self) -> None:
        self.messages = 0
        self.bytes = 0
        self.acts = 0
        self.matches = 0
        self.endings: dict[str, int] = {}


async def flood_seat(channel: grpc.aio.Channel, token: str, rng: random.Random, counts: Counts, stop: float) -> None:
    play: Any = channel.stream_stream(
        "/mus.v1.PlayService/Play", request_serializer=None, response_deserializer=play_pb2.PlayResponse.FromString
    )
    call = play()
    join = play_pb2.Join(seat_token=token, bot_name="flood", bot_version="1", protocol_version=1)
    write_lock = asyncio.Lock()

    async def send(data: bytes) -> None:
        async with write_lock:
            await call.write(data)
        counts.messages += 1
        counts.bytes += len(data)

    async def pings() -> None:
        sent = 0
        started = time.monotonic()
        while time.monotonic() < stop:
            allowed = BURST + int((time.monotonic() - started) * PINGS_PER_S)
            while sent < allowed:
                await send(padded(play_pb2.PlayRequest(ping=play_pb2.Ping(nonce=sent))))
                sent += 1
            await asyncio.sleep(0.02)

    pinger: asyncio.Task[None] | None = None
    try:
        await send(play_pb2.PlayRequest(join=join).SerializeToString())
        pinger = asyncio.create_task(pings()) if PINGS_PER_S else None
        while True:
            response = await call.read()
            if not isinstance(response, play_pb2.PlayResponse):
                break
            if response.WhichOneof("message") != "decision_request":
                continue
            request = response.decision_request
            action = random_wire_action(rng, request, senas=False)
            max_senas = SENAS or max((legal.max_senas for legal in request.legal_actions), default=0) or 3
            del action.senas[:]
            action.senas.extend([99] * max_senas)  # type: ignore[list-item]  # unknown on purpose
            await send(padded(play_pb2.PlayRequest(act=play_pb2.Act(decision_id=request.decision_id, action=action))))
            counts.acts += 1
        code = (await call.code()).name
    except grpc.aio.AioRpcError as error:
        code = error.code().name
    finally:
        if pinger is not None:
            pinger.cancel()
    counts.endings[code] = counts.endings.get(code, 0) + 1


async def main(address: str, seconds: float, token: str) -> dict[str, Any]:
    counts = Counts()
    stop = time.monotonic() + seconds
    rng = random.Random(9)
    auth = (("authorization", f"Bearer {token}"),)
    channels = [grpc.aio.insecure_channel(address) for _ in range(4)]
    try:
        admin = admin_pb2_grpc.TableAdminServiceStub(channels[0])
        seed = 90_000
        while time.monotonic() < stop:
            request = admin_pb2.CreateTableRequest(
                seed=seed, seats=[admin_pb2.SeatConfig(bot_name=f"flood-{seat}") for seat in range(4)]
            )
            created = await admin.CreateTable(request, metadata=auth)
            await asyncio.gather(
                *(flood_seat(channels[seat], created.seat_tokens[seat], rng, counts, stop) for seat in range(4))
            )
            counts.matches += 1
            seed += 1
    finally:
        for channel in channels:
            await channel.close()
    return {
        "flood_messages": counts.messages,
        "flood_mb": counts.bytes / 1e6,
        "flood_acts": counts.acts,
        "flood_tables": counts.matches,
        "flood_stream_endings": counts.endings,
    }


if __name__ == "__main__":
    result = asyncio.run(main(sys.argv[1], float(sys.argv[2]), os.environ["MUS_ADMIN_TOKEN"]))
    print(json.dumps(result), flush=True)
