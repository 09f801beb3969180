"""A bare-wire bot client for the referee tests: speaks mus.v1 directly, with pluggable misbehaviour.

It does not use the SDK on purpose, so that the tests exercise exactly what arrives on the wire.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import grpc

from clients.bots.wire_random import random_wire_action as random_wire_action  # the one random wire policy
from mus.v1 import play_pb2, play_pb2_grpc
from mus.v1 import types_pb2 as pb


@dataclass
class WireLog:
    """Everything one seat received, in order."""

    messages: list[play_pb2.PlayResponse] = field(default_factory=list)
    status: grpc.StatusCode | None = None
    details: str = ""
    updates: int = 0
    """How many Update messages arrived (batching seats)."""

    @property
    def outcome(self) -> pb.Outcome | None:
        for message in reversed(self.messages):
            if message.WhichOneof("message") == "outcome":
                return message.outcome
        return None

    def of(self, kind: str) -> list[play_pb2.PlayResponse]:
        return [message for message in self.messages if message.WhichOneof("message") == kind]


async def play_seat(
    address: str, token: str, seed: int, *, next_seq: int = 0, log: WireLog | None = None, batch: bool = False
) -> WireLog:
    """Join with `token` and answer every decision with a random legal action until the stream ends.

    With `batch`, the seat asks for Update messages; the log records their events and requests one by one,
    as the unbatched stream would have sent them, and counts the messages in `log.updates`.
    """
    rng = random.Random(seed)
    log = log if log is not None else WireLog()
    outgoing: asyncio.Queue[play_pb2.PlayRequest | None] = asyncio.Queue()
    join = play_pb2.Join(
        seat_token=token, bot_name="wire", bot_version="1", protocol_version=1, next_seq=next_seq, batch_events=batch
    )
    outgoing.put_nowait(play_pb2.PlayRequest(join=join))

    async def requests() -> AsyncIterator[play_pb2.PlayRequest]:
        while (message := await outgoing.get()) is not None:
            yield message

    async with grpc.aio.insecure_channel(address) as channel:
        call = play_pb2_grpc.PlayServiceStub(channel).Play(requests())
        try:
            async for response in call:
                if response.WhichOneof("message") == "update":
                    log.updates += 1
                    unpacked = [play_pb2.PlayResponse(event=event) for event in response.update.events]
                    if response.update.HasField("decision_request"):
                        unpacked.append(play_pb2.PlayResponse(decision_request=response.update.decision_request))
                else:
                    unpacked = [response]
                for message in unpacked:
                    log.messages.append(message)
                    if message.WhichOneof("message") == "decision_request":
                        request = message.decision_request
                        act = play_pb2.Act(decision_id=request.decision_id, action=random_wire_action(rng, request))
                        outgoing.put_nowait(play_pb2.PlayRequest(act=act))
        except grpc.aio.AioRpcError as error:
            log.status, log.details = error.code(), error.details() or ""
        finally:
            outgoing.put_nowait(None)
    return log
