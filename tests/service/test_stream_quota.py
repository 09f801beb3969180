"""Streams that need no token (health Watch, reflection) cannot take the referee's call slots from the tables and
the admin API (issue 9: 4,700 `Health/Watch` calls made the worker's `GetTableStatus` fail, and the match void)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mus.v1 import admin_pb2, admin_pb2_grpc
from referee.engine.rules import Rules
from referee.service import quota
from referee.service import server as server_module
from referee.service.server import start_admin_server, start_server
from referee.service.servicer import Referee
from referee.service.table import Table
from tests.support.referee_checks import until
from tests.support.stream import PlayStream, first_kind

TOKEN = "quota-admin-token-0123456789"
AUTH = (("authorization", f"Bearer {TOKEN}"),)


async def flood(address: str, channels: int, calls_per_channel: int) -> tuple[dict[str, int], list[Any]]:
    """Open `channels` connections with `calls_per_channel` Health/Watch calls each; how each call went (held:
    its first answer came, or its status code), and the channels, still holding what was granted."""
    opened = [
        grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)]) for _ in range(channels)
    ]
    stubs: list[Any] = [health_pb2_grpc.HealthStub(channel) for channel in opened]
    calls = [stub.Watch(health_pb2.HealthCheckRequest(service="")) for stub in stubs for _ in range(calls_per_channel)]

    async def first(call: Any) -> str:
        try:
            await call.read()
            return "held"
        except grpc.aio.AioRpcError as error:
            return str(error.code().name)

    counted: dict[str, int] = {}
    for outcome in await asyncio.gather(*(first(call) for call in calls)):
        counted[outcome] = counted.get(outcome, 0) + 1
    return counted, opened


async def admin_status(address: str, table_id: str) -> str:
    async with grpc.aio.insecure_channel(address) as channel:
        admin = admin_pb2_grpc.TableAdminServiceStub(channel)
        try:
            await admin.GetTableStatus(admin_pb2.GetTableStatusRequest(table_id=table_id), metadata=AUTH, timeout=10)
            return "OK"
        except grpc.aio.AioRpcError as error:
            return str(error.code().name)


def test_thousands_of_health_watches_hold_only_their_budget_and_admin_calls_still_succeed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    quotas: list[quota.StreamQuota] = []

    def made() -> quota.StreamQuota:
        quotas.append(quota.StreamQuota())
        return quotas[-1]

    monkeypatch.setattr(server_module, "StreamQuota", made)

    async def scenario() -> tuple[dict[str, int], int, str, str]:
        referee = Referee(TOKEN)
        server, port = await start_server(referee, "127.0.0.1:0")
        try:
            table = referee.create_table(Rules(), 3, ["a", "b", "c", "d"])
            counted, channels = await flood(f"127.0.0.1:{port}", 40, 125)
            held = quotas[0].capped.count
            status = await admin_status(f"127.0.0.1:{port}", table.table_id)
            # A seat joins its table on the same server, past the flood.
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                joined = await first_kind(channel, table.seats[0].token)
            for channel in channels:
                await channel.close()
            await until(lambda: quotas[0].capped.count == 0, what="the closed streams to be counted out")
            table.cancel("done")
            return counted, held, status, joined
        finally:
            await server.stop(grace=None)

    counted, held, status, joined = asyncio.run(scenario())
    assert sum(counted.values()) == 5000
    assert counted["held"] == held <= min(quota.MAX_CAPPED_STREAMS, 40 * quota.MAX_CAPPED_STREAMS_PER_PEER), counted
    # Not held: refused with RESOURCE_EXHAUSTED (some are reset as CANCELLED while thousands are refused at once).
    assert set(counted) <= {"held", "RESOURCE_EXHAUSTED", "CANCELLED"}, counted
    assert status == "OK", "the admin call found a free slot on the same server"
    assert joined == "joined"


def test_the_admin_server_answers_while_the_public_one_is_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the stream budget, and with a small server cap, the flood fills the public server: the admin call
    there is refused, while the same call on the admin server (`--admin-address`), the same referee, succeeds."""
    monkeypatch.setattr(server_module, "MAX_CONCURRENT_RPCS", 200)
    monkeypatch.setattr(
        server_module, "StreamQuota", lambda: quota.StreamQuota(capped_total=10**6, capped_per_peer=10**6)
    )

    async def scenario() -> tuple[dict[str, int], str, str]:
        referee = Referee(TOKEN)
        server, port = await start_server(referee, "127.0.0.1:0")
        admin_server, admin_port = await start_admin_server(referee, "127.0.0.1:0")
        try:
            table = referee.create_table(Rules(), 3, ["a", "b", "c", "d"])
            counted, channels = await flood(f"127.0.0.1:{port}", 3, 100)
            public = await admin_status(f"127.0.0.1:{port}", table.table_id)
            private = await admin_status(f"127.0.0.1:{admin_port}", table.table_id)
            for channel in channels:
                await channel.close()
            table.cancel("done")
            return counted, public, private
        finally:
            await admin_server.stop(grace=None)
            await server.stop(grace=None)

    counted, public, private = asyncio.run(scenario())
    assert counted["held"] == 200 and counted["RESOURCE_EXHAUSTED"] == 100, counted
    assert public == "RESOURCE_EXHAUSTED", "the public server is full"
    assert private == "OK"


def test_play_streams_that_never_send_their_join_hold_only_their_budget_and_a_seat_still_joins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Silent streams count against their connection's budget once they have waited past the grace: from then on
    the connection's new streams are refused, and a seat on another connection still joins."""
    quotas: list[quota.StreamQuota] = []

    def made() -> quota.StreamQuota:
        quotas.append(quota.StreamQuota(waiting_per_peer=64, grace_s=0.2))
        return quotas[-1]

    monkeypatch.setattr(server_module, "StreamQuota", made)

    async def scenario() -> tuple[dict[str, int], int, str]:
        referee = Referee(TOKEN)
        server, port = await start_server(referee, "127.0.0.1:0")
        try:
            table = referee.create_table(Rules(), 3, ["a", "b", "c", "d"])
            waiting = quotas[0].waiting
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as silent:
                streams = [PlayStream(silent, f"silent {number}") for number in range(64)]
                await until(lambda: sum(waiting.by_peer.values()) == 64, what="64 streams waiting past the grace")
                late = [PlayStream(silent, f"late {number}") for number in range(36)]
                await until(lambda: all(stream.call.done() for stream in late), what="the late ones refused")
                counted: dict[str, int] = {}
                for stream in streams + late:
                    outcome = "held" if not stream.call.done() else (await stream.call.code()).name
                    counted[outcome] = counted.get(outcome, 0) + 1
                held = waiting.count
                own_connection = [("grpc.use_local_subchannel_pool", 1)]
                async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=own_connection) as channel:
                    joined = await first_kind(channel, table.seats[0].token)
                for stream in streams:
                    stream.call.cancel()
                await until(lambda: waiting.count == 0 and not waiting.by_peer, what="the streams counted out")
            table.cancel("done")
            return counted, held, joined
        finally:
            await server.stop(grace=None)

    counted, held, joined = asyncio.run(scenario())
    assert held == 64 == counted["held"], counted
    assert counted["RESOURCE_EXHAUSTED"] == 36, counted
    assert joined == "joined", "a seat on another connection joins its table"


def test_hundreds_of_honest_seats_on_one_connection_all_join_though_they_wait_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A harness holding a hundred tables' seats on one connection opens their 400 streams, and every one of them
    waits for its Join at once (a busy client writes it a moment late): none is refused, though the connection's
    budget is 64 waiting streams, because none has waited past the grace (long here, so that a slow machine opening
    the streams cannot make the first ones count)."""
    quotas: list[quota.StreamQuota] = []

    def made() -> quota.StreamQuota:
        quotas.append(quota.StreamQuota(waiting_per_peer=64, grace_s=60.0))
        return quotas[-1]

    monkeypatch.setattr(server_module, "StreamQuota", made)

    async def scenario() -> dict[str, int]:
        referee = Referee(TOKEN)
        server, port = await start_server(referee, "127.0.0.1:0")
        try:
            tables = [referee.create_table(Rules(), seed, ["a", "b", "c", "d"]) for seed in range(100)]
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                streams = [PlayStream(channel, f"seat {seat}") for _ in tables for seat in range(4)]
                await until(lambda: quotas[0].waiting.count == 400, what="all 400 streams waiting for their Join")

                async def first_message(stream: PlayStream, token: str) -> str:
                    await stream.join(token)
                    async for message in stream.messages():
                        return str(message.WhichOneof("message"))
                    return (await stream.call.code()).name

                tokens = [state.token for table in tables for state in table.seats]
                firsts = await asyncio.gather(*map(first_message, streams, tokens))
                for stream in streams:
                    stream.call.cancel()
            for table in tables:
                table.cancel("done")
            counted: dict[str, int] = {}
            for first in firsts:
                counted[first] = counted.get(first, 0) + 1
            return counted
        finally:
            await server.stop(grace=None)

    assert asyncio.run(scenario()) == {"joined": 400}


def test_a_client_that_fills_the_servers_budget_with_silent_streams_only_closes_its_own_oldest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A review opened a thousand Play streams on one connection, within the grace, never sending Join, and kept
    reopening them: every honest Join on the referee was refused RESOURCE_EXHAUSTED and its seats lost by forfeit
    (stop 34). When the budget is full the oldest waiting stream makes room; and once past the grace, a connection's
    streams beyond its share are closed, not only its new ones refused."""
    quotas: list[quota.StreamQuota] = []

    def made() -> quota.StreamQuota:
        quotas.append(quota.StreamQuota(waiting_total=50, waiting_per_peer=20, grace_s=60.0))
        return quotas[-1]

    monkeypatch.setattr(server_module, "StreamQuota", made)

    async def scenario() -> tuple[str, str, str, int]:
        referee = Referee(TOKEN)
        server, port = await start_server(referee, "127.0.0.1:0")
        try:
            table = referee.create_table(Rules(), 3, ["a", "b", "c", "d"])
            waiting = quotas[0].waiting
            own_connection = [("grpc.use_local_subchannel_pool", 1)]
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=own_connection) as silent:
                streams = [PlayStream(silent, f"silent {number}") for number in range(50)]
                await until(lambda: waiting.count == 50, what="the budget full of silent streams")
                async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=own_connection) as channel:
                    joined = await first_kind(channel, table.seats[0].token)
                await until(lambda: any(stream.call.done() for stream in streams), what="a silent stream closed")
                closed = next(stream for stream in streams if stream.call.done())  # the first the referee saw
                oldest = (await closed.call.code()).name
                details = str(await closed.call.details())
                still = sum(not stream.call.done() for stream in streams)
                for stream in streams:
                    stream.call.cancel()
            quotas[0].grace_s = 0.2  # a connection past the grace keeps only its share
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=own_connection) as silent:
                late = [PlayStream(silent, f"late {number}") for number in range(30)]
                await until(lambda: sum(stream.call.done() for stream in late) == 10, what="10 closed past its share")
                kept = sum(not stream.call.done() for stream in late)
                for stream in late:
                    stream.call.cancel()
            table.cancel("done")
            return joined, oldest, details, still * 100 + kept
        finally:
            await server.stop(grace=None)

    joined, oldest, details, counts = asyncio.run(scenario())
    assert joined == "joined", "the honest seat joins its table"
    assert oldest == "RESOURCE_EXHAUSTED" and "closed to make room" in details, (oldest, details)
    assert divmod(counts, 100) == (49, 20), "one silent stream made room; the late connection keeps its 20"


def logged_after_a_cancelled_first_read(*, stream_ends_after_s: float | None, turns: int, wait_s: float) -> list[str]:
    """What asyncio logs once a stream waiting for its first message has its call cancelled: `turns` turns of the
    event loop and `wait_s` after its read began; the client's stream ends `stream_ends_after_s` after it began
    (None: it has ended already)."""

    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        logged: list[str] = []
        loop.set_exception_handler(lambda _, context: logged.append(str(context.get("message"))))

        async def gone() -> Any:  # the client's stream
            if stream_ends_after_s is not None:
                await asyncio.sleep(stream_ends_after_s)
            return
            yield

        first = quota._FirstMessage(gone(), quota._Budget(10, 10), "peer", 60.0, {})
        reading = asyncio.ensure_future(anext(aiter(first)))
        for _ in range(turns):
            await asyncio.sleep(0)
        await asyncio.sleep(wait_s)
        reading.cancel()  # the call ends while it waits for its first message
        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
            await reading
        del reading
        await asyncio.sleep(0.1)
        gc.collect()
        await asyncio.sleep(0.01)
        return logged

    return asyncio.run(scenario())


def test_a_waiting_stream_whose_call_ends_leaves_no_unretrieved_read_behind() -> None:
    """A review's churn of streams that never sent their first message filled the referee's log with "Task
    exception was never retrieved", 60 KB a second: the read each left behind when its call ended (stop 34)."""
    assert logged_after_a_cancelled_first_read(stream_ends_after_s=0.05, turns=0, wait_s=0.01) == []


@pytest.mark.parametrize("turns", range(4))
def test_a_read_that_ended_as_its_call_was_cancelled_is_retrieved_too(turns: int) -> None:
    """A review's bot opened streams on its seat's socket and cancelled each at once: the stream's end and the
    call's cancel came in one turn of the loop, the read had already ended (StopAsyncIteration), and each such call
    left a traceback in the worker's log, 85 KB a second outside the seat's output cap (stop 39). `turns`: when
    the cancel comes, counted in turns of the event loop after the read began."""
    assert logged_after_a_cancelled_first_read(stream_ends_after_s=None, turns=turns, wait_s=0) == []


@pytest.fixture
def silent_quotas(monkeypatch: pytest.MonkeyPatch) -> list[quota.StreamQuota]:
    """The quota of each referee started in the test, whose hosts' silent-stream budgets hold 3, then almost none."""
    quotas: list[quota.StreamQuota] = []

    def made() -> quota.StreamQuota:
        quotas.append(quota.StreamQuota(silent_burst=3, silent_rate=0.001))
        return quotas[-1]

    monkeypatch.setattr(server_module, "StreamQuota", made)
    return quotas


@contextlib.asynccontextmanager
async def one_table() -> AsyncIterator[tuple[grpc.aio.Channel, Table]]:
    """A referee with one table, and a connection to it; the table is cancelled and the referee stopped after."""
    referee = Referee(TOKEN)
    server, port = await start_server(referee, "127.0.0.1:0")
    try:
        table = referee.create_table(Rules(), 3, ["a", "b", "c", "d"])
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield channel, table
        table.cancel("done")
    finally:
        await server.stop(grace=None)


def test_a_host_whose_streams_keep_ending_silent_is_refused_at_once_for_a_while(
    silent_quotas: list[quota.StreamQuota],
) -> None:
    """A review churned Play streams that never sent Join from 40 connections, each under its connection's share:
    opening and closing them held the referee's event loop up to 939 ms (stop 34). Past a burst of such streams a
    host's new ones are refused before any work; a host whose streams send their first message is never counted."""

    async def scenario() -> tuple[list[str], str, str]:
        async with one_table() as (channel, table):
            for seat in range(4):  # honest joins first: they count for nothing
                stream = PlayStream(channel, f"seat {seat}")
                await stream.join(table.seats[seat].token)
                async for _ in stream.messages():
                    break
                stream.call.cancel()
            for number in range(3):  # then three streams closed before their Join
                silent = PlayStream(channel, f"silent {number}")
                await until(lambda: silent_quotas[0].waiting.count == 1, what="the silent stream waiting")
                silent.call.cancel()
                await until(lambda: silent_quotas[0].waiting.count == 0, what="the silent stream counted out")
            counted = [f"{host}: {bucket.tokens:.0f}" for host, bucket in silent_quotas[0].silent.buckets.items()]
            late = PlayStream(channel, "late")
            await late.join(table.seats[0].token)
            refused = await late.refused()
        return counted, refused.code, refused.details

    counted, code, details = asyncio.run(scenario())
    assert len(counted) == 1 and counted[0].endswith("127.0.0.1: 0"), counted  # one host, its bucket empty
    assert code == "RESOURCE_EXHAUSTED" and "ended without authenticating" in details, (code, details)


def test_streams_whose_first_message_does_not_authenticate_count_as_silent_ones(
    silent_quotas: list[quota.StreamQuota],
) -> None:
    """A first message is parsed before its token is read: a review's token-less streams each sent one as large as
    the referee takes, and every table slowed (stop 44). A stream whose first message is unreadable, too large or of
    a wrong token counts against its host as one that sent none."""

    async def scenario() -> tuple[list[str], str, str]:
        async with one_table() as (channel, table):
            codes = []
            for number in range(3):
                stream = PlayStream(channel, f"wrong token {number}")
                await stream.join("not-a-seat-token")
                codes.append((await stream.refused()).code)
            late = PlayStream(channel, "late")
            await late.join(table.seats[0].token)
            refused = await late.refused()
        return codes, refused.code, refused.details

    codes, code, details = asyncio.run(scenario())
    assert codes == ["UNAUTHENTICATED"] * 3
    assert code == "RESOURCE_EXHAUSTED" and "ended without authenticating" in details, (code, details)
