"""The client side of `mus bench referee`: instant bare-wire bots, the raw ping-pong client, and their tallies.

The round-trip comparison runs this in the benchmark's own process; a load level runs it in several client
processes (`bench.referee_load`), each with its own event loop, whose tallies are merged. Both play against the
server process of `bench.referee_server`. The bots speak mus.v1 directly (no SDK), with `call.write`/`call.read`
on the stream, the same calls the ping-pong client makes, so both sides of the comparison pay the same client
costs.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import grpc

from bench.referee_server import PING_PONG_METHOD
from clients.bots.wire_random import random_wire_action
from mus.v1 import admin_pb2, admin_pb2_grpc, play_pb2, play_pb2_grpc
from mus.v1 import types_pb2 as pb

clock = time.perf_counter_ns

SIMULTANEOUS_KINDS = frozenset({pb.DECISION_KIND_DISCARD})
"""Decision kinds that may be open for several seats at once (simultaneous discards): an Act answering one of
them does not alone cause the next decision request, so it is not timed."""


@dataclass
class Tally:
    """What the bots of one phase saw. Acts and round trips count only when sent inside `window` (ns)."""

    window: tuple[int, int] = (0, 2**63)
    rtt_ns: list[int] = field(default_factory=list)
    rtt_messages: list[int] = field(default_factory=list)
    """For each timed round trip, the messages read on the table's four streams, the DecisionRequest included."""
    join_ns: list[int] = field(default_factory=list)
    """For each stream opened inside the window, from just before it is opened to the return of `call.read` with
    its Joined: how long a new stream waits for the referee to take it and read its Join."""
    acts: int = 0
    request_bytes: list[int] | None = None
    """Serialized sizes of the PlayResponse messages carrying a DecisionRequest, when recorded."""
    matches: int = 0
    faults: int = 0
    timeouts: int = 0
    incidents: int = 0
    """Incidents in the outcomes (a seat absent at the join deadline, disconnected, ...): each makes that seat's
    decisions time out at once, so they explain timeouts that are not the bots' clocks running out."""
    rejections: int = 0
    stream_errors: list[str] = field(default_factory=list)

    def in_window(self, at: int) -> bool:
        return self.window[0] <= at < self.window[1]

    COUNTS: ClassVar[tuple[str, ...]] = ("acts", "matches", "faults", "timeouts", "incidents", "rejections")
    LISTS: ClassVar[tuple[str, ...]] = ("rtt_ns", "rtt_messages", "join_ns", "stream_errors")

    def to_json(self) -> dict[str, Any]:
        """What a client process sends back (`bench.referee_load`)."""
        return {name: getattr(self, name) for name in (*self.COUNTS, *self.LISTS)}

    def add(self, data: dict[str, Any]) -> None:
        """Add another process's tally (`to_json`) to this one."""
        for name in self.COUNTS:
            setattr(self, name, getattr(self, name) + data[name])
        for name in self.LISTS:
            getattr(self, name).extend(data[name])


@dataclass
class _TableProbe:
    """Per table: the one timed Act in flight, whose consequence is the next decision request of the table."""

    tally: Tally
    pending_id: int = 0
    sent_at: int = 0
    messages: int = 0
    """Messages read so far on the table's four streams."""
    messages_at_send: int = 0

    def sent(self, decision_id: int, at: int) -> None:
        self.pending_id, self.sent_at, self.messages_at_send = decision_id, at, self.messages

    def arrived(self, decision_id: int, at: int) -> None:
        if self.pending_id and decision_id > self.pending_id:
            if self.tally.in_window(self.sent_at):
                self.tally.rtt_ns.append(at - self.sent_at)
                self.tally.rtt_messages.append(self.messages - self.messages_at_send)
            self.pending_id = 0


async def _play_seat(
    channel: grpc.aio.Channel, token: str, rng: random.Random, probe: _TableProbe, tally: Tally
) -> pb.Outcome | None:
    """Join with `token` and answer every decision at once with a random legal action; returns the outcome."""
    opened_at = clock()
    call = play_pb2_grpc.PlayServiceStub(channel).Play()
    # Batched like the SDK's bots: a step's events and decision arrive as one Update message.
    join = play_pb2.Join(seat_token=token, bot_name="instant", bot_version="1", protocol_version=1, batch_events=True)
    outcome: pb.Outcome | None = None
    try:
        await call.write(play_pb2.PlayRequest(join=join))
        while True:
            response = await call.read()
            if not isinstance(response, play_pb2.PlayResponse):
                break  # grpc.aio.EOF
            received_at = clock()
            probe.messages += 1
            kind = response.WhichOneof("message")
            request: play_pb2.DecisionRequest | None = None
            if kind == "decision_request":
                request = response.decision_request
            elif kind == "update" and response.update.HasField("decision_request"):
                request = response.update.decision_request
            if request is not None:
                probe.arrived(request.decision_id, received_at)
                if tally.request_bytes is not None:
                    tally.request_bytes.append(request.ByteSize())
                act = play_pb2.Act(decision_id=request.decision_id, action=random_wire_action(rng, request))
                message = play_pb2.PlayRequest(act=act)
                sent_at = clock()
                if request.kind not in SIMULTANEOUS_KINDS:
                    probe.sent(request.decision_id, sent_at)
                if tally.in_window(sent_at):
                    tally.acts += 1
                await call.write(message)
            elif kind == "joined" and tally.in_window(opened_at):
                tally.join_ns.append(received_at - opened_at)
            elif kind == "action_rejected":
                tally.rejections += 1
            elif kind == "outcome":
                outcome = response.outcome
        await call.done_writing()
    except grpc.aio.AioRpcError as error:
        tally.stream_errors.append(f"{error.code().name}: {error.details()}")
    return outcome


@dataclass
class Admin:
    """The referee's TableAdmin service with its bearer token."""

    stub: admin_pb2_grpc.TableAdminServiceAsyncStub
    token: str
    rules: dict[str, str] = field(default_factory=dict)

    async def create_table(self, seed: int) -> admin_pb2.CreateTableResponse:
        request = admin_pb2.CreateTableRequest(
            rules=self.rules, seed=seed, seats=[admin_pb2.SeatConfig(bot_name=f"instant-{seat}") for seat in range(4)]
        )
        return await self.stub.CreateTable(request, metadata=[("authorization", f"Bearer {self.token}")])


async def play_match(admin: Admin, channels: Sequence[grpc.aio.Channel], seed: int, tally: Tally) -> None:
    """Create a table and play one whole match on it with four instant bots, one stream per channel."""
    created = await admin.create_table(seed)
    probe = _TableProbe(tally)
    outcomes = await asyncio.gather(
        *(
            _play_seat(channel, token, random.Random(seed * 4 + seat), probe, tally)
            for seat, (channel, token) in enumerate(zip(channels, created.seat_tokens, strict=True))
        )
    )
    outcome = outcomes[0]
    if outcome is None:
        return
    tally.matches += 1
    tally.faults += len(outcome.faults)
    tally.timeouts += sum(1 for fault in outcome.faults if fault.cause == pb.FAULT_CAUSE_TIMEOUT)
    tally.incidents += len(outcome.incidents)


@contextlib.asynccontextmanager
async def four_channels(address: str) -> AsyncIterator[list[grpc.aio.Channel]]:
    """One channel per bot, as four bot processes would have; kept across the matches of a table slot.

    Each has a connection of its own (a local subchannel pool), as separate processes would: channels of one
    process to one address otherwise share a single connection, whose streams the referee budgets per connection.
    """
    options = [("grpc.use_local_subchannel_pool", 1)]
    channels = [grpc.aio.insecure_channel(address, options=options) for _ in range(4)]
    try:
        yield channels
    finally:
        for channel in channels:
            await channel.close()


async def play_matches(address: str, admin: Admin, seeds: Iterable[int], tally: Tally) -> None:
    """One table slot: the matches of `seeds`, one after the other."""
    async with four_channels(address) as channels:
        for seed in seeds:
            await play_match(admin, channels, seed, tally)


async def play_until(address: str, admin: Admin, stop_at: int, first_seed: int, tally: Tally) -> None:
    """One table slot: matches back to back until `stop_at` (ns); the match in progress then is played out."""
    async with four_channels(address) as channels:
        seed = first_seed
        while clock() < stop_at:
            await play_match(admin, channels, seed, tally)
            seed += 1


async def ping_pong(channel: grpc.aio.Channel, payload: bytes, exchanges: int) -> list[int]:
    """Round trips of `payload` on one bidirectional stream of the trivial echo servicer, in ns."""
    exchange: grpc.aio.StreamStreamMultiCallable[bytes, bytes] = channel.stream_stream(PING_PONG_METHOD)
    call = exchange()
    samples: list[int] = []
    for _ in range(exchanges):
        sent_at = clock()
        await call.write(payload)
        reply = await call.read()
        samples.append(clock() - sent_at)
        if not isinstance(reply, bytes) or len(reply) != len(payload):
            raise RuntimeError("the ping-pong servicer did not echo the message")
    await call.done_writing()
    if await call.code() != grpc.StatusCode.OK:
        raise RuntimeError(f"the ping-pong stream ended with {await call.code()}")
    return samples
