"""Deliberately broken bots for `mus bot check`'s tests: each breaks the protocol in one way, so that one check
fails with a readable reason (tests/cli/test_bot_check.py).

Run like any hosted bot: `python -m tests.support.broken_bots MODE`, with `MUS_REFEREE` and `MUS_TOKEN` in the
environment. Every mode but the first two plays its seat with the random wire policy of tests/support/wire.py,
answers again after a rejection that leaves its decision open, and joins again with `Join.next_seq` after a
dropped stream, unless its mode says otherwise:

- random: nothing broken (the control).
- never_joins: starts and waits, and never opens a Play stream.
- wrong_version: joins with `Join.protocol_version = 2`, and exits on the refusal.
- no_retry: never answers again after a rejection, even one that leaves its decision open.
- stale_answer: after a rejection sends its last answer again (once per decision and code), whatever the
  rejection's decision and code.
- no_rejoin: exits with status 1 when its stream drops, instead of joining again.
- skip_events: joins again after a drop with a `next_seq` 5 past the next event it expects.
- bad_frames: plays like random over gRPC; offered frames (MUS_FRAMES), it joins there, then sends a frame whose
  flags are not 0, and exits once the referee has closed that stream.
- one_seat: plays like random; with `MUS_SEATS=stdin` (a persistent bot, docs/pool.md) it plays the first seat
  given on its standard input, then exits instead of reading the next.

Two more broken bots are modes of tests/support/misbehaving.py: `illegal` (an illegal action every time) and
`slow` (every answer after its decision time).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
from collections.abc import AsyncIterator

import grpc

from mus.v1 import play_pb2, play_pb2_grpc
from tests.support.wire import random_wire_action

MODES = (
    *("random", "never_joins", "wrong_version", "no_retry", "stale_answer", "no_rejoin", "skip_events", "one_seat"),
    *("bad_frames", "crashes"),
)
TRANSIENT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL)
SKIPPED_EVENTS = 5


def log(mode: str, text: str) -> None:
    print(f"{mode}: {text}", file=sys.stderr, flush=True)


class Seat:
    """One seat over as many streams as it takes, broken in the way its mode says."""

    def __init__(self, mode: str, address: str, token: str) -> None:
        self.mode = mode
        self.address = address
        self.token = token
        self.rng = random.Random(int(os.environ.get("MUS_SEED", "0")))
        self.next_seq = 0
        self.joins = 0
        self.open: play_pb2.DecisionRequest | None = None
        self.last: play_pb2.Act | None = None
        self.resent: set[tuple[int, int]] = set()
        self.asked = 0

    async def run(self) -> int:
        async with grpc.aio.insecure_channel(self.address) as channel:
            stub = play_pb2_grpc.PlayServiceStub(channel)
            while True:
                try:
                    if await self.stream(stub):
                        return 0
                    log(self.mode, "the stream ended before the outcome")
                    return 1
                except grpc.aio.AioRpcError as error:
                    if self.mode == "no_rejoin" or error.code() not in TRANSIENT or not self.joins:
                        status = f"{error.code().name}: {error.details()}"
                        log(self.mode, f"the referee ended the stream: {status}; giving up")
                        return 1
                    log(self.mode, f"the stream dropped ({error.code().name}); joining again")
                    await asyncio.sleep(0.1)

    async def stream(self, stub: play_pb2_grpc.PlayServiceAsyncStub) -> bool:
        """One Play stream: True once the outcome has arrived."""
        outgoing: asyncio.Queue[play_pb2.PlayRequest | None] = asyncio.Queue()
        next_seq = self.next_seq + (SKIPPED_EVENTS if self.mode == "skip_events" and self.joins else 0)
        version = 2 if self.mode == "wrong_version" else 1
        join = play_pb2.Join(
            seat_token=self.token, bot_name=self.mode, bot_version="1", protocol_version=version, next_seq=next_seq
        )
        outgoing.put_nowait(play_pb2.PlayRequest(join=join))

        async def requests() -> AsyncIterator[play_pb2.PlayRequest]:
            while (message := await outgoing.get()) is not None:
                yield message

        def act(request: play_pb2.DecisionRequest) -> None:
            self.last = play_pb2.Act(decision_id=request.decision_id, action=random_wire_action(self.rng, request))
            outgoing.put_nowait(play_pb2.PlayRequest(act=self.last))

        call = stub.Play(requests())
        try:
            async for response in call:
                kind = response.WhichOneof("message")
                if kind == "joined":
                    self.joins += 1
                elif kind == "event":
                    self.next_seq = max(self.next_seq, response.event.seq + 1)
                elif kind == "decision_request":
                    self.open = response.decision_request
                    self.asked += 1
                    if self.mode == "crashes" and self.asked > 2:
                        log(self.mode, "exiting in the middle of the match")
                        os._exit(3)
                    act(self.open)
                elif kind == "action_rejected":
                    rejected = response.action_rejected
                    log(self.mode, f"decision {rejected.decision_id} rejected: {rejected.reason}")
                    if self.mode == "no_retry":
                        continue
                    if self.mode == "stale_answer":
                        again = (rejected.decision_id, rejected.code)
                        if self.last is not None and again not in self.resent:
                            self.resent.add(again)  # once: the referee rejects the copy too
                            outgoing.put_nowait(play_pb2.PlayRequest(act=self.last))
                        continue
                    still_open = self.open is not None and self.open.decision_id == rejected.decision_id
                    if rejected.decision_open and self.open is not None and still_open:
                        act(self.open)
                elif kind == "outcome":
                    return True
        finally:
            outgoing.put_nowait(None)
        return False


async def main(mode: str) -> int:
    if mode == "never_joins":
        log(mode, "started; never joining")
        await asyncio.sleep(3600)
        return 0
    if mode == "bad_frames" and os.environ.get("MUS_FRAMES"):
        reader, writer = await asyncio.open_unix_connection(os.environ["MUS_FRAMES"].removeprefix("unix:"))
        join = play_pb2.Join(seat_token=os.environ["MUS_TOKEN"], bot_name=mode, protocol_version=1)
        body = play_pb2.PlayRequest(join=join).SerializeToString()
        writer.write(bytes((0,)) + len(body).to_bytes(4, "big") + body)
        writer.write(bytes((1, 0, 0, 0, 0)))  # flags 1: no frame the protocol has
        log(mode, f"sent a bad frame; the referee answered {await reader.read()!r}")
        return 0
    if mode == "one_seat" and os.environ.get("MUS_SEATS") == "stdin":
        seat = json.loads(sys.stdin.readline())
        log(mode, "playing the first seat given on stdin; not reading the next")
        return await Seat(mode, seat["referee"], seat["seat_token"]).run()
    return await Seat(mode, os.environ["MUS_REFEREE"], os.environ["MUS_TOKEN"]).run()


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in MODES:
        sys.exit(f"usage: python -m tests.support.broken_bots {{{'|'.join(MODES)}}}")
    sys.exit(asyncio.run(main(sys.argv[1])))
