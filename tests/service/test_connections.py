"""Connection limits of the referee's server (issue 9: 3,000 idle connections were held, one fd each)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from bench.referee_connections import IdlePeer
from mus.v1 import watch_pb2, watch_pb2_grpc
from referee.engine.rules import Rules
from referee.service import quota
from referee.service import server as server_module
from referee.service import servicer as servicer_module
from tests.service.conftest import Running, with_referee
from tests.support.referee_checks import until
from tests.support.stream import first_kind


def test_an_idle_connection_that_answers_keepalive_pings_is_closed_after_the_idle_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    options = [
        (key, 300 if key == "grpc.max_connection_idle_ms" else value) for key, value in server_module.SERVER_OPTIONS
    ]
    monkeypatch.setattr(server_module, "SERVER_OPTIONS", options)

    async def scenario(running: Running) -> IdlePeer:
        host, port = running.address.rsplit(":", 1)
        peer = IdlePeer()
        await peer.hold(host, int(port), time.monotonic() + 10)  # returns when the referee closes it
        return peer

    peer = with_referee(scenario, timeout=20)
    assert peer.goaway and peer.closed


def test_one_host_may_hold_only_so_many_live_watch_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servicer_module, "MAX_WATCHES_PER_HOST", 2)

    async def scenario(running: Running) -> tuple[list[str], str]:
        table = running.referee.create_table(Rules(), 3, ["a", "b", "c", "d"])
        async with grpc.aio.insecure_channel(running.address) as channel:
            stub = watch_pb2_grpc.WatchServiceStub(channel)
            held = [stub.Watch(watch_pb2.WatchRequest(table_id=table.table_id)) for _ in range(2)]
            await until(lambda: len(table.watchers) == 2, what="both watches to be live")
            third = stub.Watch(watch_pb2.WatchRequest(table_id=table.table_id))
            try:
                async for _ in third:
                    pass
                refused = "OK"
            except grpc.aio.AioRpcError as error:
                refused = f"{error.code().name}: {error.details()}"
            table.cancel("done")
            endings = []
            for call in held:
                try:
                    async for _ in call:
                        pass
                except grpc.aio.AioRpcError as error:
                    endings.append(error.code().name)
            return endings, refused

    endings, refused = with_referee(scenario, timeout=20)
    assert refused.startswith("RESOURCE_EXHAUSTED") and "too many Watch streams" in refused, refused
    assert endings == ["ABORTED", "ABORTED"]


def test_one_host_may_open_only_so_many_watch_streams_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each Watch sends the table's log so far: a review that re-opened 64 Watches of a long match in a loop held
    the referee's event loop up to 325 ms at a time (stop 34). Past a burst, a host's opens are refused."""
    monkeypatch.setattr(servicer_module, "WATCH_OPEN_BURST", 3.0)
    monkeypatch.setattr(servicer_module, "WATCH_OPEN_RATE", 0.01)

    async def scenario(running: Running) -> list[str]:
        table = running.referee.create_table(Rules(), 3, ["a", "b", "c", "d"])
        table.cancel("a cancelled table: each Watch ends at once")
        ends = []
        async with grpc.aio.insecure_channel(running.address) as channel:
            stub = watch_pb2_grpc.WatchServiceStub(channel)
            for _ in range(4):
                try:
                    async for _ in stub.Watch(watch_pb2.WatchRequest(table_id=table.table_id)):
                        pass
                    ends.append("OK")
                except grpc.aio.AioRpcError as error:
                    ends.append(f"{error.code().name}: {error.details()}")
        return ends

    ends = with_referee(scenario, timeout=20)
    assert [end.split(":")[0] for end in ends] == ["ABORTED"] * 3 + ["RESOURCE_EXHAUSTED"], ends
    assert "Watch opened too often from this host" in ends[-1]


def test_watch_streams_have_a_budget_of_their_own_on_the_whole_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """A review held every one of the referee's 4,096 call slots with Watch streams from 70 addresses (the cap per
    host did not stop it), and no seat could join any table (stop 34). Past the server's Watch budget, a Watch is
    refused; a seat still joins."""
    monkeypatch.setattr(server_module, "StreamQuota", lambda: quota.StreamQuota(watch_total=3))

    async def scenario(running: Running) -> tuple[str, str]:
        table = running.referee.create_table(Rules(), 3, ["a", "b", "c", "d"])
        async with grpc.aio.insecure_channel(running.address) as channel:
            stub = watch_pb2_grpc.WatchServiceStub(channel)
            held = [stub.Watch(watch_pb2.WatchRequest(table_id=table.table_id)) for _ in range(3)]
            await until(lambda: len(table.watchers) == 3, what="three watches to be live")
            try:
                async for _ in stub.Watch(watch_pb2.WatchRequest(table_id=table.table_id)):
                    pass
                refused = "OK"
            except grpc.aio.AioRpcError as error:
                refused = f"{error.code().name}: {error.details()}"
            joined = await first_kind(channel, table.seats[0].token)
            for call in held:
                call.cancel()
            table.cancel("done")
        return refused, joined

    refused, joined = with_referee(scenario, timeout=20)
    assert refused == "RESOURCE_EXHAUSTED: too many Watch streams: at most 3 on the server", refused
    assert joined == "joined"


@pytest.mark.parametrize(
    ("peer", "host"),
    [
        ("ipv4:10.1.2.3:5678", "ipv4:10.1.2.3"),
        ("ipv6:[2001:db8:1:2:aaaa::1]:5678", "ipv6:2001:db8:1:2::/64"),
        ("ipv6:[2001:db8:1:2:bbbb::9]:80", "ipv6:2001:db8:1:2::/64"),
        ("unix:/run/mus/referee.sock", "unix:/run/mus/referee.sock"),
    ],
)
def test_a_host_is_its_address_or_for_ipv6_its_64_network(peer: str, host: str) -> None:
    """One client commonly holds a whole IPv6 /64: counted per address, its Watch cap would be no cap (stop 34)."""
    context: Any = SimpleNamespace(peer=lambda: peer)
    assert quota.peer_host(context) == host
