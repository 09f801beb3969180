"""The relay between a hosted seat's unix socket and a standalone referee (`workers.relay`): nothing a seat does
opens or closes a TCP socket on the worker's host, whose count every seat can read (`/proc/net/sockstat`), and only
`Play` reaches the referee. Real gRPC servers on loopback, real sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mus.v1 import play_pb2, play_pb2_grpc
from referee.service.server import start_server
from referee.service.servicer import Referee
from workers.relay import MAX_SEAT_CALLS, open_relay


def tcp_sockets(port: int) -> list[tuple[str, int, int]]:
    """The TCP sockets of this network namespace connected to `port`, from their client side: (state, bytes queued
    to send, bytes received and not read), as `/proc/net/tcp` and `tcp6` list them (grpc may open either)."""
    found = []
    lines = [line for name in ("tcp", "tcp6") for line in Path(f"/proc/self/net/{name}").read_text().splitlines()[1:]]
    for line in lines:
        fields = line.split()
        remote_port = int(fields[2].split(":")[1], 16)
        if remote_port == port:
            sent, received = (int(part, 16) for part in fields[4].split(":"))
            found.append((fields[3], sent, received))
    return found


ESTABLISHED = "01"


def established(port: int) -> int:
    return sum(1 for state, _, _ in tcp_sockets(port) if state == ESTABLISHED)


def join(token: str) -> play_pb2.PlayRequest:
    return play_pb2.PlayRequest(join=play_pb2.Join(seat_token=token, bot_name="relayed", protocol_version=1))


def test_a_seat_opens_and_closes_no_tcp_socket_and_reaches_the_referee_only_with_play(tmp_path: Path) -> None:
    async def scenario() -> dict[str, Any]:
        server, port = await start_server(Referee("admin-token"), "127.0.0.1:0")
        path = tmp_path / "referee.sock"
        relay = await open_relay(path, f"127.0.0.1:{port}", max_connections=4)
        seen: dict[str, Any] = {"before": established(port), "during": set()}
        try:
            for _ in range(6):  # a seat that connects, calls and hangs up again and again
                async with grpc.aio.insecure_channel(f"unix:{path}") as channel:
                    call = play_pb2_grpc.PlayServiceStub(channel).Play(iter([join("not-a-seat-token")]))
                    with pytest.raises(grpc.aio.AioRpcError) as refused:
                        async for _ in call:
                            pass
                    seen["refused"] = refused.value.code(), refused.value.details()
                    seen["during"].add(established(port))
                seen["during"].add(established(port))
            async with grpc.aio.insecure_channel(f"unix:{path}") as channel:
                health: Any = health_pb2_grpc.HealthStub(channel)  # typed for the sync channel only
                with pytest.raises(grpc.aio.AioRpcError) as other:
                    await health.Check(health_pb2.HealthCheckRequest())
                seen["health"] = other.value.code()
                stub = play_pb2_grpc.PlayServiceStub(channel)
                held = [stub.Play() for _ in range(MAX_SEAT_CALLS)]  # no Join yet: the referee waits for one
                await asyncio.sleep(0.3)
                extra = stub.Play()
                with pytest.raises(grpc.aio.AioRpcError) as exhausted:
                    await extra.read()
                seen["extra"] = exhausted.value.code(), exhausted.value.details()
                seen["held"] = [call.done() for call in held]
                for call in held:
                    call.cancel()
        finally:
            await relay.close()
            for _ in range(500):  # the connection is shut down in grpc's own threads (2 s were short once, loaded)
                if not established(port):
                    break
                await asyncio.sleep(0.02)
            seen["after"] = established(port)
            await server.stop(grace=None)
        return seen

    seen = asyncio.run(scenario())
    assert seen["before"] == 1, "the seat's connection to the referee is opened before the seat starts"
    assert seen["during"] == {1}, "and it stays the one, whatever the seat opens or closes"
    assert seen["after"] == 0
    code, details = seen["refused"]
    assert code is grpc.StatusCode.PERMISSION_DENIED or "token" in details, (code, details)  # the referee's answer
    assert seen["health"] is grpc.StatusCode.UNIMPLEMENTED, "only Play is relayed"
    assert seen["extra"] == (grpc.StatusCode.RESOURCE_EXHAUSTED, f"at most {MAX_SEAT_CALLS} Play calls at once")
    assert seen["held"] == [False] * MAX_SEAT_CALLS


class _Talker(play_pb2_grpc.PlayServiceServicer):
    """A referee that answers a Play with 8 MiB at once, then waits for the seat to hang up."""

    async def Play(self, request_iterator: AsyncIterator[Any], context: Any) -> AsyncIterator[play_pb2.PlayResponse]:
        await anext(aiter(request_iterator))
        for _ in range(128):
            yield play_pb2.PlayResponse(joined=play_pb2.Joined(table_id="x" * 65536))
        await asyncio.Event().wait()


def test_what_the_referee_sends_a_seat_that_does_not_read_waits_in_memory_not_in_the_hosts_tcp_buffers(
    tmp_path: Path,
) -> None:
    """The host's TCP buffers are counted host-wide (/proc/net/sockstat's TCP mem, which a seat reads): a seat that
    stops reading must not leave the referee's messages in them for its partner to count."""

    async def scenario() -> list[tuple[str, int, int]]:
        server = grpc.aio.server()
        play_pb2_grpc.add_PlayServiceServicer_to_server(_Talker(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        path = tmp_path / "referee.sock"
        relay = await open_relay(path, f"127.0.0.1:{port}", max_connections=4)
        try:
            async with grpc.aio.insecure_channel(f"unix:{path}") as channel:
                call = play_pb2_grpc.PlayServiceStub(channel).Play()
                await call.write(join("t"))
                await asyncio.sleep(1.0)  # the referee has sent all it can; the seat reads nothing
                queues = tcp_sockets(port)
                call.cancel()
        finally:
            await relay.close()
            await server.stop(grace=None)
        return queues

    ((state, sent, received),) = asyncio.run(scenario())
    assert state == ESTABLISHED
    assert (sent, received) == (0, 0), "nothing waits in the relay's TCP socket"


def test_a_seat_cannot_spend_its_hosts_budget_of_streams_that_do_not_authenticate(tmp_path: Path) -> None:
    """Every hosted seat relayed from one machine is one host to the referee, with one budget of streams that end
    without authenticating (`quota.SILENT_STREAMS_PER_HOST`). A review's seat drained it through its relay, and the
    machine's honest seats were refused their joins until they were absent (helper-81)."""

    async def scenario() -> tuple[int, int]:
        server, port = await start_server(Referee("admin-token"), "127.0.0.1:0")
        path = tmp_path / "referee.sock"
        relay = await open_relay(path, f"127.0.0.1:{port}", max_connections=4)
        refused_here = 0
        try:
            async with grpc.aio.insecure_channel(f"unix:{path}") as channel:
                stub = play_pb2_grpc.PlayServiceStub(channel)
                for _ in range(300):  # more than the host's burst of silent streams
                    call = stub.Play(iter([join("not-a-seat-token")]))
                    try:
                        async for _ in call:
                            pass
                    except grpc.aio.AioRpcError as error:
                        refused_here += "joined too often" in (error.details() or "")
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as honest:  # another seat of the same host
                call = play_pb2_grpc.PlayServiceStub(honest).Play(iter([join("not-a-seat-token")]))
                with pytest.raises(grpc.aio.AioRpcError) as answered:
                    async for _ in call:
                        pass
                honest_refused = int("ended without authenticating" in (answered.value.details() or ""))
        finally:
            await relay.close()
            await server.stop(grace=None)
        return refused_here, honest_refused

    refused_here, honest_refused = asyncio.run(scenario())
    assert refused_here >= 280, "the relay refuses a seat's calls past its pace, before the referee sees them"
    assert not honest_refused, "the host's other seats are still heard"
