"""A raw Play stream for the referee's tests: send PlayRequests or any bytes, read responses, get the status.

It uses identity serializers on purpose, so a test bot can send bytes that are not a PlayRequest at all.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc

from mus.v1 import play_pb2

PLAY_METHOD = "/mus.v1.PlayService/Play"


@dataclass
class StreamResult:
    """How one Play stream ended, as the client saw it."""

    label: str
    code: str
    details: str
    received: int


class PlayStream:
    """One raw Play stream: send PlayRequests or arbitrary bytes, read PlayResponses, then its status."""

    def __init__(self, channel: grpc.aio.Channel, label: str) -> None:
        self.label = label
        self.received = 0
        self.writing = asyncio.Lock()
        method = channel.stream_stream(
            PLAY_METHOD, request_serializer=_identity, response_deserializer=play_pb2.PlayResponse.FromString
        )
        self.call = method()

    async def send(self, request: play_pb2.PlayRequest) -> bool:
        return await self.send_bytes(request.SerializeToString())

    async def send_bytes(self, data: bytes) -> bool:
        """Write; False once the stream is over (the status tells why)."""
        async with self.writing:  # grpc.aio takes one write at a time; slow and flood bots write from tasks
            try:
                await self.call.write(data)
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                return False
        return True

    async def join(self, token: str, *, bot_name: str = "misbehaving", next_seq: int = 0) -> bool:
        join = play_pb2.Join(seat_token=token, bot_name=bot_name, bot_version="1", protocol_version=1)
        join.next_seq = next_seq
        return await self.send(play_pb2.PlayRequest(join=join))

    async def messages(self) -> AsyncIterator[play_pb2.PlayResponse]:
        while True:
            try:
                message = await self.call.read()
            except grpc.aio.AioRpcError:
                return
            if message is grpc.aio.EOF:
                return
            self.received += 1
            assert isinstance(message, play_pb2.PlayResponse)
            yield message

    async def result(self) -> StreamResult:
        """Wait for the stream's end and return its status (the client half-closes first)."""
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
            await self.call.done_writing()
        code = await self.call.code()
        details = await self.call.details()
        return StreamResult(self.label, code.name, details or "", self.received)

    async def refused(self) -> StreamResult:
        """Half-close, read to the end of a stream the referee is expected to refuse, and return its status."""
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
            await self.call.done_writing()
        async for _ in self.messages():
            pass
        return await self.result()


async def first_kind(channel: grpc.aio.Channel, token: str, *, next_seq: int = 0) -> str:
    """Join with `token` on `channel`, return the kind of the referee's first message ('' if it sent none), and
    hang up: whether a seat gets in."""
    stream = PlayStream(channel, "seat")
    await stream.join(token, next_seq=next_seq)
    kind = ""
    async for message in stream.messages():
        kind = str(message.WhichOneof("message"))
        break
    stream.call.cancel()
    return kind


def _identity(data: bytes) -> bytes:
    return data
