"""Faults and incidents are two things (types.proto `FaultCause`, issue 10).

A fault counts against the seat's team (rules §13: illegal action, timeout, limit) and is a public Fault event;
an incident is what happened to a seat's connection or process. `Outcome.faults` lists every fault once, in the
order charged, and nothing else; `Outcome.incidents` every incident, in the order recorded; the admin API says
the same. A bot may join again after its stream was ended for a protocol error.
"""

from __future__ import annotations

import asyncio

import grpc

from mus.v1 import admin_pb2, admin_pb2_grpc, play_pb2
from mus.v1 import types_pb2 as pb
from referee.causes import CAUSE_FROM_PROTO, CAUSE_TO_PROTO, IncidentCause
from referee.engine.outcome import FaultCause
from referee.engine.rules import Rules
from tests.service.conftest import Running, with_referee
from tests.support.clock import FakeClock, pass_the_join_deadline
from tests.support.seats import WireSeat
from tests.support.wire import play_seat

NAMES = ["bot0", "bot1", "bot2", "bot3"]
ROOMY = Rules.from_options({"decision_timeout_s": 5.0, "time_bank_s": 5.0})


async def admin_views(
    running: Running, table_id: str
) -> tuple[admin_pb2.GetTableStatusResponse, admin_pb2.GetTableReplayResponse]:
    auth = (("authorization", f"Bearer {running.referee.admin_token}"),)
    async with grpc.aio.insecure_channel(running.address) as channel:
        stub = admin_pb2_grpc.TableAdminServiceStub(channel)
        status = await stub.GetTableStatus(admin_pb2.GetTableStatusRequest(table_id=table_id), metadata=auth)
        replay = await stub.GetTableReplay(admin_pb2.GetTableReplayRequest(table_id=table_id), metadata=auth)
    return status, replay


def test_an_absent_seat_is_one_incident_and_its_timeouts_are_the_faults_each_listed_once_in_order() -> None:
    async def scenario(running: Running) -> None:
        clock = FakeClock()
        table = running.referee.create_table(Rules(), 9, NAMES, clock=clock)
        playing = asyncio.gather(*(play_seat(running.address, table.seats[seat].token, seat) for seat in range(3)))
        await pass_the_join_deadline(table, clock, joined=3)
        await playing
        outcome = table.outcome
        assert outcome is not None and outcome.termination == pb.MATCH_TERMINATION_FORFEIT
        assert list(outcome.faults) == [
            pb.Fault(seat=3, cause=pb.FAULT_CAUSE_TIMEOUT, team_faults=count) for count in (1, 2, 3)
        ], "the faults: the absent seat's timeouts, in order, and no incident among them"
        assert list(outcome.incidents) == [pb.Incident(seat=3, cause=pb.FAULT_CAUSE_ABSENT)], "no detail: it is public"
        status, replay = await admin_views(running, table.table_id)
        assert list(status.faults) == list(outcome.faults)
        detailed = [pb.Incident(seat=3, cause=pb.FAULT_CAUSE_ABSENT, detail="not at the table at the join deadline")]
        assert list(status.incidents) == list(replay.incidents) == detailed, "the admin API gives the detail"

    with_referee(scenario)


def test_a_seat_rejoins_after_a_protocol_error_which_is_an_incident_and_no_fault() -> None:
    async def scenario(running: Running) -> None:
        table = running.referee.create_table(ROOMY, 4, NAMES)
        others = [asyncio.create_task(play_seat(running.address, table.seats[seat].token, seat)) for seat in (0, 1, 3)]
        culprit = WireSeat(running.address, table.seats[2].token, seed=2)
        await culprit.join()
        assert await culprit.play(stop=lambda message: message.WhichOneof("message") == "decision_request")
        assert culprit.stream is not None
        again = play_pb2.Join(seat_token=table.seats[2].token, protocol_version=1)
        await culprit.stream.send(play_pb2.PlayRequest(join=again))  # a second Join: a protocol error
        assert not await culprit.play()
        assert culprit.last.code == "INVALID_ARGUMENT", culprit.last
        seen = len(culprit.events())
        await culprit.run(next_seq=seen)  # the same seat token joins again, where it left off
        assert culprit.last.code == "OK", culprit.last
        await asyncio.gather(*others)
        joined = culprit.of("joined")
        assert [message.joined.resumed for message in joined] == [False, True]
        outcome = table.outcome
        assert outcome is not None and outcome.termination == pb.MATCH_TERMINATION_NORMAL
        assert list(outcome.faults) == [], "a protocol error counts no fault"
        assert [(incident.seat, incident.cause) for incident in outcome.incidents] == [
            (2, pb.FAULT_CAUSE_PROTOCOL_ERROR)
        ]

    with_referee(scenario)


def test_one_enum_of_causes_the_rules_faults_and_the_tables_incidents_split_it_without_overlap() -> None:
    wire = {value.name.removeprefix("FAULT_CAUSE_").lower() for value in pb.FaultCause.DESCRIPTOR.values}
    wire -= {"unspecified"}
    faults = {cause.value for cause in FaultCause}
    incidents = {cause.value for cause in IncidentCause}
    assert faults | incidents == wire and not faults & incidents
    assert faults == {"illegal_action", "timeout", "limit"}
    # One table each way: every cause has its own wire value, and comes back as itself.
    assert set(CAUSE_TO_PROTO) == {*FaultCause, *IncidentCause}
    assert sorted(CAUSE_TO_PROTO.values()) == sorted(set(pb.FaultCause.values()) - {pb.FAULT_CAUSE_UNSPECIFIED})
    assert all(CAUSE_FROM_PROTO[wire_cause] is cause for cause, wire_cause in CAUSE_TO_PROTO.items())
    assert all(pb.FaultCause.Name(CAUSE_TO_PROTO[cause]).endswith(cause.value.upper()) for cause in CAUSE_TO_PROTO)
