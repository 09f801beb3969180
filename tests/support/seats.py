"""In-process wire seats for tests that must steer a seat at a precise moment: hold an answer, drop the stream,
rejoin with `next_seq`. Same bare wire as tests/support/wire.py, same random policy, over tests/support/stream.py.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from mus.v1 import play_pb2
from mus.v1 import types_pb2 as pb
from tests.support.stream import PlayStream, StreamResult
from tests.support.wire import random_wire_action

Policy = Callable[[random.Random, play_pb2.DecisionRequest], pb.Action]


@dataclass
class WireSeat:
    """One seat played from the test's own event loop; `messages` keeps everything received, every stream."""

    address: str
    token: str
    seed: int = 0
    policy: Policy = random_wire_action
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    """Decisions are answered only while the gate is set (it starts set)."""
    messages: list[play_pb2.PlayResponse] = field(default_factory=list)
    streams: list[StreamResult] = field(default_factory=list)
    stream: PlayStream | None = None
    channel: grpc.aio.Channel | None = None
    open_decision: play_pb2.DecisionRequest | None = None
    asked: dict[int, play_pb2.DecisionRequest] = field(default_factory=dict)
    pending: set[asyncio.Task[None]] = field(default_factory=set)
    sent: list[play_pb2.Act] = field(default_factory=list)
    """Every Act this seat sent, in order."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.gate.set()

    async def join(self, next_seq: int = 0) -> None:
        self.channel = grpc.aio.insecure_channel(self.address)
        self.stream = PlayStream(self.channel, f"stream{len(self.streams)}")
        await self.stream.join(self.token, bot_name="wire-seat", next_seq=next_seq)

    async def play(self, stop: Callable[[play_pb2.PlayResponse], bool] | None = None) -> bool:
        """Answer decisions (behind the gate, while reading on) until `stop` says so (True, the stream stays open)
        or the stream ends (False, its status recorded)."""
        stream = self.stream
        assert stream is not None
        async for message in stream.messages():
            self.messages.append(message)
            kind = message.WhichOneof("message")
            if kind == "decision_request":
                self.open_decision = message.decision_request
                self.asked[message.decision_request.decision_id] = message.decision_request
            elif kind == "action_rejected" and message.action_rejected.decision_open:
                # illegal_action_policy = retry: the same decision may be answered again.
                self.open_decision = self.asked.get(message.action_rejected.decision_id)
            if stop is not None and stop(message):
                return True
            if self.open_decision is not None and kind in ("decision_request", "action_rejected"):
                request, self.open_decision = self.open_decision, None
                self.pending.add(asyncio.create_task(self.answer(request)))
        self.streams.append(await stream.result())
        await self.close()
        return False

    async def answer(self, request: play_pb2.DecisionRequest) -> None:
        stream = self.stream
        assert stream is not None
        await self.gate.wait()
        act = play_pb2.Act(decision_id=request.decision_id, action=self.policy(self.rng, request))
        self.sent.append(act)
        await stream.send(play_pb2.PlayRequest(act=act))

    async def drop(self) -> None:
        """Vanish without a word, as a broken connection does."""
        assert self.stream is not None
        self.stream.call.cancel()
        self.streams.append(StreamResult(self.stream.label, "DROPPED", "", self.stream.received))
        await self.close()

    async def close(self) -> None:
        for task in self.pending:
            task.cancel()
        self.pending.clear()
        if self.channel is not None:
            await self.channel.close()
        self.channel = None
        self.stream = None

    async def run(self, next_seq: int = 0) -> WireSeat:
        """Join and play to the end of the stream."""
        await self.join(next_seq)
        await self.play()
        return self

    def of(self, kind: str) -> list[play_pb2.PlayResponse]:
        return [message for message in self.messages if message.WhichOneof("message") == kind]

    def events(self) -> list[pb.Event]:
        return [message.event for message in self.of("event")]

    @property
    def last(self) -> StreamResult:
        return self.streams[-1]
