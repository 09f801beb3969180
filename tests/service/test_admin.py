"""TableAdminService, health and reflection over a real channel (admin.proto, watch.proto, play.proto).

Every admin call needs `authorization: Bearer <admin token>`; refusals are status codes whose message names the
problem. CreateTable validates the rules and the seats and is idempotent by external_id; CancelTable ends the
table's live streams with ABORTED and charges nobody; GetTableStatus reports what the table knows.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from mus.v1 import admin_pb2, admin_pb2_grpc, play_pb2, watch_pb2, watch_pb2_grpc
from mus.v1 import types_pb2 as pb
from referee.engine.rules import Rules
from referee.service import servicer
from referee.service.server import SERVICE_NAMES
from referee.service.servicer import table_status_message
from referee.service.table import Table, TableStatus, reported_name
from referee.wire import rules_to_map
from tests.service.conftest import Running, with_referee
from tests.support.referee_checks import until
from tests.support.seats import WireSeat
from tests.support.stream import PlayStream, StreamResult
from tests.support.wire import random_wire_action

Metadata = tuple[tuple[str, str], ...]


def seats(count: int = 4) -> list[admin_pb2.SeatConfig]:
    return [admin_pb2.SeatConfig(bot_name=f"bot{seat}") for seat in range(count)]


def cancel(table_id: str, reason: str = "") -> admin_pb2.CancelTableRequest:
    return admin_pb2.CancelTableRequest(table_id=table_id, reason=reason)


def auth(running: Running) -> Metadata:
    return (("authorization", f"Bearer {running.referee.admin_token}"),)


async def status_of(call: Awaitable[Any]) -> tuple[str, str]:
    """The status a unary call ended with: ("OK", "") or its code's name and message."""
    try:
        await call
    except grpc.aio.AioRpcError as error:
        return error.code().name, error.details() or ""
    return "OK", ""


def with_admin(
    scenario: Callable[[Running, admin_pb2_grpc.TableAdminServiceAsyncStub], Awaitable[Any]], **options: Any
) -> Any:
    async def run(running: Running) -> Any:
        async with grpc.aio.insecure_channel(running.address) as channel:
            return await scenario(running, admin_pb2_grpc.TableAdminServiceStub(channel))

    return with_referee(run, timeout=30, **options)


def test_admin_calls_without_the_admin_token_are_unauthenticated_and_change_nothing() -> None:
    async def scenario(running: Running, admin: admin_pb2_grpc.TableAdminServiceAsyncStub) -> list[Any]:
        table = running.referee.create_table(Rules(), 1, ["a", "b", "c", "d"])
        running.referee.lobby.register("near", "1" * 64)
        token = running.referee.admin_token
        credentials: dict[str, Metadata] = {
            "none": (),
            "wrong token": (("authorization", "Bearer not-the-admin-token"),),
            "no Bearer scheme": (("authorization", token),),
            "another scheme": (("authorization", f"Basic {token}"),),
            "empty bearer": (("authorization", "Bearer "),),
        }
        tables_before = set(running.referee.tables)
        results = []
        for name, metadata in credentials.items():
            calls: dict[str, Awaitable[Any]] = {
                "CreateTable": admin.CreateTable(admin_pb2.CreateTableRequest(seats=seats()), metadata=metadata),
                "CancelTable": admin.CancelTable(cancel(table.table_id), metadata=metadata),
                "GetTableStatus": admin.GetTableStatus(
                    admin_pb2.GetTableStatusRequest(table_id=table.table_id), metadata=metadata
                ),
                "RegisterRemoteBot": admin.RegisterRemoteBot(
                    admin_pb2.RegisterRemoteBotRequest(bot_name="far", token_sha256="0" * 64), metadata=metadata
                ),
                "RevokeRemoteBot": admin.RevokeRemoteBot(
                    admin_pb2.RevokeRemoteBotRequest(bot_name="near"), metadata=metadata
                ),
                "WaitTable": admin.WaitTable(
                    admin_pb2.WaitTableRequest(table_id=table.table_id, wait_s=5), metadata=metadata
                ),
                "ReportCrash": admin.ReportCrash(
                    admin_pb2.ReportCrashRequest(table_id=table.table_id, seat=0, detail="forged"), metadata=metadata
                ),
                "GetTableReplay": admin.GetTableReplay(
                    admin_pb2.GetTableReplayRequest(table_id=table.table_id), metadata=metadata
                ),
            }
            for rpc, call in calls.items():
                results.append((name, rpc, *await status_of(call)))
        assert set(running.referee.tables) == tables_before, "no table was created"
        assert table.status is TableStatus.WAITING, "the table was not cancelled"
        assert table.incidents == [], "no crash was recorded"
        assert not running.referee.lobby.is_registered("far")
        assert running.referee.lobby.is_registered("near"), "nothing was revoked"
        return results

    for name, rpc, code, details in with_admin(scenario):
        assert code == "UNAUTHENTICATED", (name, rpc, code, details)
        assert "admin token" in details, (name, rpc, details)


@pytest.mark.parametrize(
    ("rules", "overrides", "named"),
    [
        ({"nonsense": "1"}, {}, "nonsense"),
        ({"target_score": "abc"}, {}, "target_score"),
        ({"target_score": "0"}, {}, "target_score"),
        ({"decision_timeout_s": "0"}, {}, "decision_timeout_s"),
        ({"sena_leak_probability": "1.5"}, {}, "sena_leak_probability"),
        ({"deck_mode": "6_reyes"}, {}, "deck_mode"),
        ({"mus_decision_mode": "fem_out_of_turn"}, {}, "mus_decision_mode"),
        ({"discard_min": "3", "discard_max": "2"}, {}, "discard_min"),
        ({}, {"decision_timeout_s": -1.0}, "decision_timeout_s"),
        ({}, {"time_bank_s": -0.5}, "time_bank_s"),
        ({}, {"decision_timeout_s": float("nan")}, "decision_timeout_s"),
        ({"time_bank_s": "5000000"}, {}, "time_bank_s must be at least 0 and at most 86400"),
        ({}, {"time_bank_s": 5_000_000.0}, "time_bank_s must be at least 0 and at most 86400"),
        ({}, {"decision_timeout_s": 1e308}, "decision_timeout_s must be above 0 and at most 3600"),
        ({"max_senas_per_window": "60000"}, {}, "max_senas_per_window must be at most 17"),
    ],
)
def test_create_table_with_bad_rules_is_invalid_argument_naming_the_option(
    rules: dict[str, str], overrides: dict[str, float], named: str
) -> None:
    async def scenario(running: Running, admin: admin_pb2_grpc.TableAdminServiceAsyncStub) -> tuple[str, str, int]:
        request = admin_pb2.CreateTableRequest(rules=rules, seats=seats(), **overrides)  # type: ignore[arg-type]
        code, details = await status_of(admin.CreateTable(request, metadata=auth(running)))
        return code, details, len(running.referee.tables)

    code, details, tables = with_admin(scenario)
    assert (code, named in details) == ("INVALID_ARGUMENT", True), details
    assert tables == 0


@pytest.mark.parametrize("count", [0, 3, 5])
def test_create_table_with_other_than_four_seats_is_invalid_argument(count: int) -> None:
    async def scenario(running: Running, admin: admin_pb2_grpc.TableAdminServiceAsyncStub) -> tuple[str, str]:
        request = admin_pb2.CreateTableRequest(seats=seats(count))
        return await status_of(admin.CreateTable(request, metadata=auth(running)))

    code, details = with_admin(scenario)
    assert code == "INVALID_ARGUMENT" and "4 seats" in details and str(count) in details, details


def test_create_table_is_idempotent_by_external_id() -> None:
    async def scenario(running: Running, admin: admin_pb2_grpc.TableAdminServiceAsyncStub) -> None:
        metadata = auth(running)
        request = admin_pb2.CreateTableRequest(
            rules={"target_score": "30"}, seed=7, seats=seats(), external_id="league-1/round-2/match-3"
        )
        first = await admin.CreateTable(request, metadata=metadata)
        again = await admin.CreateTable(request, metadata=metadata)
        assert (again.table_id, list(again.seat_tokens)) == (first.table_id, list(first.seat_tokens))
        assert len(running.referee.tables) == 1
        assert first.rules == rules_to_map(Rules.from_options({"target_score": 30}))

        changed = admin_pb2.CreateTableRequest()
        changed.CopyFrom(request)
        changed.seed = 8
        code, details = await status_of(admin.CreateTable(changed, metadata=metadata))
        assert code == "ALREADY_EXISTS" and "league-1/round-2/match-3" in details, details

        anonymous = admin_pb2.CreateTableRequest(seed=7, seats=seats())
        one = await admin.CreateTable(anonymous, metadata=metadata)
        two = await admin.CreateTable(anonymous, metadata=metadata)
        assert one.table_id != two.table_id, "without an external id every call creates a table"
        assert set(one.seat_tokens).isdisjoint(two.seat_tokens)

    with_admin(scenario)


def test_a_retried_create_table_whose_table_is_no_longer_kept_gets_a_status_naming_it() -> None:
    """The referee keeps `keep_finished` finished tables; a retry after that must not fail with UNKNOWN."""

    async def scenario(running: Running, admin: admin_pb2_grpc.TableAdminServiceAsyncStub) -> tuple[str, str]:
        request = admin_pb2.CreateTableRequest(seed=7, seats=seats(), external_id="match-9", join_timeout_s=0.05)
        first = await admin.CreateTable(request, metadata=auth(running))
        table = running.referee.tables[first.table_id]
        await table.finished.wait()  # nobody joins: four absent seats, a forfeit
        assert first.table_id not in running.referee.tables
        return await status_of(admin.CreateTable(request, metadata=auth(running)))

    code, details = with_admin(scenario, keep_finished=0)
    assert code != "UNKNOWN", details
    assert "match-9" in details, details


def test_external_ids_are_remembered_past_their_tables_and_the_oldest_forgotten_past_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker's retry is answered after its table is gone, but a referee that serves a long league does not
    keep every request it was ever sent."""
    monkeypatch.setattr(servicer, "KEEP_EXTERNAL_IDS", 2)

    async def scenario(running: Running, admin: admin_pb2_grpc.TableAdminServiceAsyncStub) -> None:
        def request(name: str) -> admin_pb2.CreateTableRequest:
            return admin_pb2.CreateTableRequest(seed=7, seats=seats(), external_id=name)

        first = await admin.CreateTable(request("match-1"), metadata=auth(running))
        running.referee.tables[first.table_id].cancel("this test is done with it")
        running.referee.forget(first.table_id)
        assert first.table_id not in running.referee.tables
        code, details = await status_of(admin.CreateTable(request("match-1"), metadata=auth(running)))
        assert code == "FAILED_PRECONDITION" and "no longer kept" in details, details
        second = await admin.CreateTable(request("match-2"), metadata=auth(running))
        assert (await admin.CreateTable(request("match-2"), metadata=auth(running))).table_id == second.table_id
        await admin.CreateTable(request("match-3"), metadata=auth(running))
        again = await admin.CreateTable(request("match-1"), metadata=auth(running))
        assert again.table_id != first.table_id, "forgotten past the bound: a new table"
        for table in running.referee.tables.values():
            table.cancel("this test is done with it")

    with_admin(scenario)


async def hold_a_running_table(running: Running, table: Table) -> tuple[list[WireSeat], list[asyncio.Task[WireSeat]]]:
    """Four wire seats; seat 0 holds its first answer, so the match is running and waits on it."""
    wire = [WireSeat(running.address, state.token, seed=seat) for seat, state in enumerate(table.seats)]
    wire[0].gate.clear()
    playing = [asyncio.create_task(seat.run()) for seat in wire]
    await until(lambda: 0 in table.decisions, what="the match to run and wait on seat 0")
    return wire, playing


def test_cancel_table_ends_live_play_streams_with_aborted_and_charges_nobody() -> None:
    async def scenario(running: Running, admin: admin_pb2_grpc.TableAdminServiceAsyncStub) -> None:
        metadata = auth(running)
        running_table = running.referee.create_table(Rules(), 3, ["a", "b", "c", "d"])
        wire, playing = await hold_a_running_table(running, running_table)
        waiting_table = running.referee.create_table(Rules(), 4, ["a", "b", "c", "d"])
        early = [WireSeat(running.address, waiting_table.seats[seat].token) for seat in (0, 1)]
        waiting = [asyncio.create_task(seat.run()) for seat in early]
        await until(lambda: all(waiting_table.seats[seat].joined for seat in (0, 1)), what="two seats to join")

        for table in (running_table, waiting_table):
            reply = await admin.CancelTable(cancel(table.table_id, "withdrawn"), metadata=metadata)
            assert reply.status == admin_pb2.TABLE_STATUS_CANCELLED
        await asyncio.gather(*playing, *waiting)
        for seat in [*wire, *early]:
            assert seat.last.code == "ABORTED" and "cancelled" in seat.last.details, seat.last
            assert not seat.of("outcome")

        status = await admin.GetTableStatus(
            admin_pb2.GetTableStatusRequest(table_id=running_table.table_id), metadata=metadata
        )
        assert status.status == admin_pb2.TABLE_STATUS_CANCELLED
        assert not status.HasField("outcome") and list(status.faults) == []
        assert running_table.incidents == [] and running_table.faults() == []
        again = await admin.CancelTable(cancel(running_table.table_id), metadata=metadata)
        assert again.status == admin_pb2.TABLE_STATUS_CANCELLED, "cancelling a cancelled table changes nothing"

    with_admin(scenario)


def test_the_aborted_status_of_a_cancelled_table_names_the_reason() -> None:
    """admin.proto CancelTableRequest.reason: "Why, in words, for logs and for the seats' ABORTED status message"."""

    async def scenario(running: Running, admin: admin_pb2_grpc.TableAdminServiceAsyncStub) -> list[StreamResult]:
        table = running.referee.create_table(Rules(), 5, ["a", "b", "c", "d"])
        wire, playing = await hold_a_running_table(running, table)
        await admin.CancelTable(cancel(table.table_id, "the league round was withdrawn"), metadata=auth(running))
        await asyncio.gather(*playing)
        return [seat.last for seat in wire]

    for result in with_admin(scenario):
        assert result.code == "ABORTED" and "the league round was withdrawn" in result.details, result


def test_a_live_watch_of_a_cancelled_table_ends_with_aborted() -> None:
    """watch.proto: ABORTED ends "a live watch whose table is cancelled"."""

    async def scenario(running: Running, admin: admin_pb2_grpc.TableAdminServiceAsyncStub) -> tuple[str, str]:
        table = running.referee.create_table(Rules(), 6, ["a", "b", "c", "d"])
        _, playing = await hold_a_running_table(running, table)
        async with grpc.aio.insecure_channel(running.address) as channel:
            call = watch_pb2_grpc.WatchServiceStub(channel).Watch(watch_pb2.WatchRequest(table_id=table.table_id))
            first = await call.read()
            assert isinstance(first, watch_pb2.WatchResponse) and first.event.HasField("match_started")
            await admin.CancelTable(cancel(table.table_id), metadata=auth(running))
            with contextlib.suppress(grpc.aio.AioRpcError):  # read() raises on a status other than OK
                while await call.read() is not grpc.aio.EOF:
                    pass
            code, details = (await call.code()).name, await call.details()
        await asyncio.gather(*playing)
        return code, details

    code, details = with_admin(scenario)
    assert code == "ABORTED" and "cancelled" in details, (code, details)


def test_a_seat_token_of_a_cancelled_table_is_refused_with_failed_precondition() -> None:
    """play.proto: FAILED_PRECONDITION when "the table is finished or cancelled"."""

    async def scenario(running: Running, admin: admin_pb2_grpc.TableAdminServiceAsyncStub) -> StreamResult:
        table = running.referee.create_table(Rules(), 7, ["a", "b", "c", "d"])
        await admin.CancelTable(cancel(table.table_id), metadata=auth(running))
        async with grpc.aio.insecure_channel(running.address) as channel:
            stream = PlayStream(channel, "after_cancel")
            await stream.join(table.seats[0].token)
            return await stream.refused()

    result = with_admin(scenario)
    assert result.code == "FAILED_PRECONDITION" and "cancelled" in result.details, result


def test_cancelling_a_finished_table_is_a_failed_precondition_and_an_unknown_one_not_found() -> None:
    async def scenario(running: Running, admin: admin_pb2_grpc.TableAdminServiceAsyncStub) -> list[tuple[str, str]]:
        table = running.referee.create_table(Rules(), 8, ["a", "b", "c", "d"])
        await asyncio.gather(*(WireSeat(running.address, s.token, seed=i).run() for i, s in enumerate(table.seats)))
        metadata = auth(running)
        return [
            await status_of(admin.CancelTable(cancel(table.table_id), metadata=metadata)),
            await status_of(admin.CancelTable(cancel("no-such"), metadata=metadata)),
            await status_of(
                admin.GetTableStatus(admin_pb2.GetTableStatusRequest(table_id="no-such"), metadata=metadata)
            ),
        ]

    finished, cancel_unknown, status_unknown = with_admin(scenario)
    assert finished[0] == "FAILED_PRECONDITION" and "finished" in finished[1], finished
    for code, details in (cancel_unknown, status_unknown):
        assert code == "NOT_FOUND" and "no-such" in details, (code, details)


def test_get_table_status_reports_seats_score_faults_and_outcome() -> None:
    rules = Rules.from_options({"decision_timeout_s": 3.0, "time_bank_s": 5.0})

    async def scenario(running: Running, admin: admin_pb2_grpc.TableAdminServiceAsyncStub) -> None:
        metadata = auth(running)
        table = running.referee.create_table(rules, 9, ["north", "east", "south", "west"])

        async def status() -> admin_pb2.GetTableStatusResponse:
            return await admin.GetTableStatus(
                admin_pb2.GetTableStatusRequest(table_id=table.table_id), metadata=metadata
            )

        waiting = await status()
        assert (waiting.table_id, waiting.status) == (table.table_id, admin_pb2.TABLE_STATUS_WAITING)
        assert [(s.seat, s.bot_name, s.joined, s.connected) for s in waiting.seats] == [
            (0, "north", False, False),
            (1, "east", False, False),
            (2, "south", False, False),
            (3, "west", False, False),
        ]
        assert waiting.rules == rules_to_map(rules)
        assert not waiting.HasField("outcome") and list(waiting.faults) == []
        assert not waiting.HasField("started_after_s")
        assert [s.joined_as for s in waiting.seats] == [""] * 4

        wire = [WireSeat(running.address, state.token, seed=seat) for seat, state in enumerate(table.seats)]
        faulty = wire[1]

        def illegal_once(rng: random.Random, request: play_pb2.DecisionRequest) -> pb.Action:
            if not faulty.of("action_rejected"):
                faulty.gate.clear()  # after this illegal action the seat holds, so the match waits on it
                return pb.Action(kind=99)  # type: ignore[arg-type]
            return random_wire_action(rng, request)

        faulty.policy = illegal_once
        playing = [asyncio.create_task(seat.run()) for seat in wire]
        await until(lambda: table.match is not None and table.match.faults[1] == 1, what="the illegal action")
        middle = await status()
        match = table.match
        assert match is not None
        assert middle.status == admin_pb2.TABLE_STATUS_RUNNING
        assert [(s.joined, s.connected) for s in middle.seats] == [(True, True)] * 4
        assert [s.joined_as for s in middle.seats] == ["wire-seat"] * 4, "the name each seat gave in its Join"
        assert table.started_at is not None
        assert middle.started_after_s == table.started_at - table.created_at
        assert (middle.score_team_0, middle.score_team_1) == tuple(match.score)
        assert (middle.games_team_0, middle.games_team_1) == tuple(match.games_won)
        assert (middle.faults_team_0, middle.faults_team_1) == (0, 1)
        assert list(middle.faults) == [pb.Fault(seat=1, cause=pb.FAULT_CAUSE_ILLEGAL_ACTION, team_faults=1)]
        assert middle.hand_number == match.hand_number
        assert not middle.HasField("outcome")

        faulty.gate.set()
        await asyncio.gather(*playing)
        final = await status()
        assert final.status == admin_pb2.TABLE_STATUS_FINISHED
        assert final.outcome == table.outcome
        assert list(final.faults) == list(table.outcome.faults) == table.faults()
        assert (final.faults_team_0, final.faults_team_1) == tuple(match.faults)
        assert (final.vacas_team_0, final.vacas_team_1) == tuple(match.vacas_won)
        assert (final.score_team_0, final.score_team_1) == tuple(match.score)
        assert final.hand_number == match.hand_number
        assert [(s.joined, s.connected) for s in final.seats] == [(True, False)] * 4

    with_admin(scenario)


def test_wait_table_answers_when_the_table_ends_or_when_wait_s_has_passed() -> None:
    """A worker's long poll: a call that waits returns with the table's state once it has ended (here cancelled);
    `wait_s` bounds the wait, a table that has ended answers at once, and a bad wait or table is refused."""

    async def scenario(running: Running, admin: admin_pb2_grpc.TableAdminServiceAsyncStub) -> list[tuple[str, str]]:
        metadata = auth(running)
        table = running.referee.create_table(Rules(), 4, ["a", "b", "c", "d"])

        def wait(wait_s: float, table_id: str = table.table_id) -> Any:
            return admin.WaitTable(admin_pb2.WaitTableRequest(table_id=table_id, wait_s=wait_s), metadata=metadata)

        still = await wait(0)
        assert still.table.status == admin_pb2.TABLE_STATUS_WAITING, "wait_s over, the table has not ended"
        waiting = asyncio.ensure_future(wait(60))
        await until(lambda: bool(table.finished._waiters), what="the call to wait on the table")
        assert not waiting.done()
        await admin.CancelTable(cancel(table.table_id, "over"), metadata=metadata)
        ended = await waiting
        assert ended.table == table_status_message(table)
        assert ended.table.status == admin_pb2.TABLE_STATUS_CANCELLED
        again = await wait(60)
        assert again.table.status == admin_pb2.TABLE_STATUS_CANCELLED, "an ended table answers at once"
        return [await status_of(call) for call in (wait(-1), wait(61), wait(float("nan")), wait(1, "no-such"))]

    refusals = with_admin(scenario)
    assert [code for code, _ in refusals] == ["INVALID_ARGUMENT"] * 3 + ["NOT_FOUND"], refusals
    assert all("wait_s must be at least 0 and at most 60" in details for _, details in refusals[:3]), refusals


def test_the_health_check_serves_every_service() -> None:
    async def scenario(running: Running) -> dict[str, str]:
        async with grpc.aio.insecure_channel(running.address) as channel:
            health: Any = health_pb2_grpc.HealthStub(channel)  # grpc_health's stub is typed for the sync channel only
            statuses = {}
            for service in ("", *SERVICE_NAMES):
                reply = await health.Check(health_pb2.HealthCheckRequest(service=service))
                statuses[service] = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
            unknown = await status_of(health.Check(health_pb2.HealthCheckRequest(service="mus.v1.Nothing")))
            statuses["mus.v1.Nothing"] = unknown[0]
            return statuses

    statuses = with_referee(scenario, timeout=30)
    assert set(SERVICE_NAMES) >= {"mus.v1.PlayService", "mus.v1.WatchService", "mus.v1.TableAdminService"}
    assert statuses == {**{service: "SERVING" for service in ("", *SERVICE_NAMES)}, "mus.v1.Nothing": "NOT_FOUND"}


def test_reflection_lists_the_services_and_describes_them() -> None:
    async def scenario(running: Running) -> tuple[set[str], bytes]:
        async with grpc.aio.insecure_channel(running.address) as channel:
            untyped: Any = channel  # grpc_reflection's stub is typed for the sync channel only
            reflection: Any = reflection_pb2_grpc.ServerReflectionStub(untyped)
            call = reflection.ServerReflectionInfo(
                iter(
                    [
                        reflection_pb2.ServerReflectionRequest(list_services=""),
                        reflection_pb2.ServerReflectionRequest(file_containing_symbol="mus.v1.PlayService"),
                    ]
                )
            )
            replies = [reply async for reply in call]
        listed = {service.name for service in replies[0].list_services_response.service}
        return listed, replies[1].file_descriptor_response.file_descriptor_proto[0]

    listed, descriptor = with_referee(scenario, timeout=30)
    assert listed >= {
        "mus.v1.PlayService",
        "mus.v1.WatchService",
        "mus.v1.TableAdminService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    }
    assert b"mus/v1/play.proto" in descriptor


def test_a_bots_own_name_is_reported_printable_trimmed_and_at_most_64_characters() -> None:
    """`Join.bot_name` is the bot's to choose: what the table reports (`joined_as`) and what `mus bot check`
    prints go through `reported_name`."""
    assert reported_name("  mybot  ") == "mybot"
    assert reported_name("evil\x1b[2J\nname\x00") == "evil[2Jname"
    assert reported_name("x" * 10_000) == "x" * 64


def test_turns_gates_a_table_that_has_not_started_and_holds_it_until_each_turn_is_acknowledged() -> None:
    """admin Turns (for a worker whose seats play on a standalone referee): the first turn, at once, lets every
    seat run; once all four have joined, a turn that lets none run comes before the deal, and the match begins only
    when it is acknowledged; then each turn names the seats with a decision open, never both partners, and the
    stream ends after the last turn (every seat) when the table ends."""

    async def scenario(running: Running, admin: admin_pb2_grpc.TableAdminServiceAsyncStub) -> None:
        table = running.referee.create_table(Rules(), 6, ["a", "b", "c", "d"])
        stranger = admin.Turns(metadata=(("authorization", "Bearer a-seat-token"),))  # refused before it writes
        assert (await status_of(stranger.read()))[0] == "UNAUTHENTICATED" and table.turns is None
        call = admin.Turns(metadata=auth(running))
        await call.write(admin_pb2.TurnsRequest(table_id=table.table_id))
        first = await call.read()
        assert isinstance(first, admin_pb2.TurnsResponse)
        assert (first.turn, list(first.running_seats)) == (1, [0, 1, 2, 3])
        await call.write(admin_pb2.TurnsRequest(done=1))
        again = admin.Turns(metadata=auth(running))
        await again.write(admin_pb2.TurnsRequest(table_id=table.table_id))
        assert await status_of(again.read()) == (
            "FAILED_PRECONDITION",
            f"table {table.table_id} is waiting and gated already: only a table that has not started can be gated",
        )
        playing = [
            asyncio.create_task(WireSeat(running.address, state.token, seed=seat).run())
            for seat, state in enumerate(table.seats)
        ]
        stopped = await call.read()
        assert isinstance(stopped, admin_pb2.TurnsResponse) and list(stopped.running_seats) == []
        await asyncio.sleep(0.2)
        assert table.started_at is None and table.match is None, "no deal before the seats are stopped"
        await call.write(admin_pb2.TurnsRequest(done=stopped.turn))
        turns = []
        finished_first = False
        try:
            while isinstance(turn := await call.read(), admin_pb2.TurnsResponse):
                turns.append(set(turn.running_seats))
                if len(turn.running_seats) < 4:  # the last turn, every seat, ends the stream: nothing to acknowledge
                    await call.write(admin_pb2.TurnsRequest(done=turn.turn))
        except grpc.aio.AioRpcError:
            # Nothing stops these seats (no worker freezes them): on a loaded machine they may play the match out
            # while this reads its turns, and an acknowledgement then meets a stream the table has ended.
            finished_first = True
        await asyncio.gather(*playing)
        assert table.status is TableStatus.FINISHED and table.incidents == [] and table.faults() == []
        assert (finished_first or turns[-1] == {0, 1, 2, 3}) and all(turns[:-1])
        assert not any({0, 2} <= seats or {1, 3} <= seats for seats in turns[:-1]), "partners never run at once"
        late = admin.Turns(metadata=auth(running))
        await late.write(admin_pb2.TurnsRequest(table_id=table.table_id))
        assert (await status_of(late.read()))[0] == "FAILED_PRECONDITION", "a table that ended cannot be gated"

    with_admin(scenario)


def test_a_table_whose_turns_are_not_acknowledged_or_whose_stream_ends_is_ungated_and_plays_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(servicer, "TURN_ACK_LIMIT_S", 0.3)

    async def scenario(running: Running, admin: admin_pb2_grpc.TableAdminServiceAsyncStub) -> None:
        silent, dropped = (running.referee.create_table(Rules(), seed, ["a", "b", "c", "d"]) for seed in (7, 8))
        calls = []
        for table in (silent, dropped):
            call = admin.Turns(metadata=auth(running))
            await call.write(admin_pb2.TurnsRequest(table_id=table.table_id))
            assert isinstance(await call.read(), admin_pb2.TurnsResponse)
            calls.append(call)
        calls[1].cancel()  # the worker went away
        await until(lambda: dropped.turns is None, what="the dropped stream to ungate its table")
        playing = [
            asyncio.create_task(WireSeat(running.address, state.token, seed=seat).run())
            for table in (silent, dropped)
            for seat, state in enumerate(table.seats)
        ]
        await asyncio.gather(*playing)  # the silent one: ungated 0.3 s after its first unacknowledged turn
        for table in (silent, dropped):
            assert table.status is TableStatus.FINISHED and table.turns is None and table.faults() == []

    with_admin(scenario)
