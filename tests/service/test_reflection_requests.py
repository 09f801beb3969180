"""A reflection stream needs no token: what it sends is bounded like any client's (a review, helper-81). One garbage
message a stream had grpc log the servicer's traceback each time (1.8 MB of log a second from one client), and a
stream pipelining valid requests had ~22,000 descriptors of ~9 KB a second sent back, slowing every table."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2

from referee.service import quota
from tests.service.conftest import Running, with_referee

METHOD = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"


async def _status(channel: grpc.aio.Channel, bodies: list[bytes]) -> tuple[grpc.StatusCode, str, int]:
    call: Any = channel.stream_stream(METHOD)(iter(bodies))  # type: ignore[arg-type]
    answers = 0
    try:
        async for _ in call:
            answers += 1
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or "", answers
    return grpc.StatusCode.OK, "", answers


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        (b"\xff" * 10, grpc.StatusCode.INVALID_ARGUMENT),
        (b"\xff" * (quota.MAX_MESSAGE_BYTES + 1), grpc.StatusCode.RESOURCE_EXHAUSTED),
    ],
    ids=["unreadable", "oversized"],
)
def test_an_unreadable_reflection_request_is_refused_by_name_not_logged(
    caplog: pytest.LogCaptureFixture, body: bytes, refused: grpc.StatusCode
) -> None:
    async def scenario(running: Running) -> grpc.StatusCode:
        async with grpc.aio.insecure_channel(running.address) as channel:
            return (await _status(channel, [body]))[0]

    assert with_referee(scenario) is refused
    assert "Traceback" not in caplog.text, "refused by name, not logged as the servicer's error (a flood fills it)"


def test_a_reflection_stream_that_floods_is_ended() -> None:
    request = reflection_pb2.ServerReflectionRequest(list_services="").SerializeToString()

    async def scenario(running: Running) -> tuple[grpc.StatusCode, str, int]:
        async with grpc.aio.insecure_channel(running.address) as channel:
            ok = await _status(channel, [request] * 5)
            assert ok[0] is grpc.StatusCode.OK and ok[2] == 5, ok  # a tool's few requests are answered
            return await _status(channel, [request] * 1000)

    code, details, answers = with_referee(scenario)
    # RESOURCE_EXHAUSTED; INTERNAL where the client's writes race the status (as in test_oversized_requests).
    assert code in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL), (code, details)
    assert answers <= quota.CAPPED_MESSAGE_BURST + 5


def test_new_reflection_streams_get_no_new_allowance() -> None:
    """Counted per stream, a review's client opened a new reflection stream each time one was ended: 3,200
    descriptors a second from one connection, every table 3.3 times slower (helper-84). One host's streams share
    one allowance: ten streams in a row get no more answers together than one."""
    request = reflection_pb2.ServerReflectionRequest(list_services="").SerializeToString()

    async def scenario(running: Running) -> int:
        async with grpc.aio.insecure_channel(running.address) as channel:
            answered = 0
            for _ in range(10):
                answered += (await _status(channel, [request] * 150))[2]
            return answered

    answers = with_referee(scenario)
    assert answers <= quota.CAPPED_MESSAGE_BURST + 10 * quota.CAPPED_MESSAGE_RATE, answers
