"""ActionRejected says what happened to the decision the Act named (play.proto `ActionRejected`).

`decision_open` is true only when the decision the Act named is still open and may be answered again; then, and
only then, the rejection carries that decision's legal actions and the time left. An answer to a closed decision
or an Act naming an id never issued names no open decision, whatever newer decision the seat has open.
"""

from __future__ import annotations

import asyncio
import random

import grpc

from mus.v1 import play_pb2
from referee.engine.rules import Rules
from tests.service.conftest import Running, with_referee
from tests.support.clock import FakeClock
from tests.support.referee_checks import until
from tests.support.stream import PlayStream
from tests.support.wire import play_seat, random_wire_action

QUICK = Rules.from_options({"decision_timeout_s": 1.0, "time_bank_s": 0.0, "illegal_action_policy": "retry"})
NAMES = ["bot0", "bot1", "bot2", "bot3"]
CULPRIT = 2
NEVER_ISSUED = 10**9


async def rejections_around_a_newer_decision(running: Running) -> list[play_pb2.ActionRejected]:
    """Let the culprit's first decision time out; once its next decision is open, answer the closed one, then send
    an id never issued, then answer the open decision properly and play on to the end. The table's clock is a fake
    one: it jumps past the first decision's deadline once the culprit alone is asked, and stands still after."""
    clock = FakeClock()
    table = running.referee.create_table(QUICK, 7, NAMES, clock=clock)
    others = [
        asyncio.create_task(play_seat(running.address, table.seats[seat].token, seat))
        for seat in range(4)
        if seat != CULPRIT
    ]
    rng = random.Random(1)
    rejected: list[play_pb2.ActionRejected] = []
    first: play_pb2.DecisionRequest | None = None
    async with grpc.aio.insecure_channel(running.address) as channel:
        stream = PlayStream(channel, "culprit")
        await stream.join(table.seats[CULPRIT].token)
        async for message in stream.messages():
            kind = message.WhichOneof("message")
            if kind == "action_rejected":
                rejected.append(message.action_rejected)
                continue
            if kind != "decision_request":
                continue
            request = message.decision_request
            if first is None:
                first = request  # never answered: it times out
                await until(lambda: set(table.decisions) == {CULPRIT}, what="the culprit to be the only seat asked")
                clock.advance(QUICK.decision_timeout_s)
                continue
            if not rejected:
                stale = play_pb2.Act(decision_id=first.decision_id, action=random_wire_action(rng, first))
                await stream.send(play_pb2.PlayRequest(act=stale))
                bogus = play_pb2.Act(decision_id=NEVER_ISSUED, action=random_wire_action(rng, request))
                await stream.send(play_pb2.PlayRequest(act=bogus))
            act = play_pb2.Act(decision_id=request.decision_id, action=random_wire_action(rng, request))
            await stream.send(play_pb2.PlayRequest(act=act))
        await stream.result()
    await asyncio.gather(*others)
    return rejected


def test_a_closed_decision_and_an_unknown_id_are_never_decision_open_while_a_newer_one_is() -> None:
    rejected = with_referee(rejections_around_a_newer_decision, timeout=60)
    assert len(rejected) >= 2, rejected
    closed, not_asked = rejected[0], rejected[1]
    assert closed.code == play_pb2.REJECTION_CODE_DECISION_CLOSED
    assert not closed.decision_open and not closed.fault_counted
    assert list(closed.legal_actions) == [] and closed.decision_time_left_ms == closed.bank_time_left_ms == 0
    assert not_asked.code == play_pb2.REJECTION_CODE_NOT_ASKED and not_asked.decision_id == NEVER_ISSUED
    assert not not_asked.decision_open and not_asked.fault_counted
    assert list(not_asked.legal_actions) == [] and not_asked.decision_time_left_ms == 0
    # The seat's open decision stayed open under `retry`: the proper answer that followed was applied, not rejected.
    assert all(rejection.code == play_pb2.REJECTION_CODE_DECISION_CLOSED for rejection in rejected[2:]), rejected
