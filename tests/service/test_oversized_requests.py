"""A request is refused by its length before it is parsed, and a compressed one before it is inflated (a review,
stop 44): a token-less client's gzip message of about 1 KB inflated to a 1 MiB PlayRequest of empty cards, which the
event loop parsed for ~50 ms before the servicer refused it; a flood of such streams made every table of the referee
play 70 times slower, and the same messages sent uncompressed 30 times slower."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from mus.v1 import play_pb2
from referee.service import quota
from tests.service.conftest import Running, with_referee


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def heavy_act(size: int = 1024 * 1024 - 32) -> bytes:
    """A PlayRequest of about `size` bytes: an Act whose action holds empty cards (it gzips to ~1 KB)."""
    cards = b"\x1a\x00" * (size // 2)
    action = b"\x12" + _varint(len(cards)) + cards
    body = b"\x12" + _varint(len(action)) + action
    play_pb2.PlayRequest.FromString(body)  # a valid message
    return body


async def _status(channel: grpc.aio.Channel, method: str, body: bytes) -> tuple[grpc.StatusCode, str]:
    call: Any = channel.stream_stream(method)(iter([body]))  # type: ignore[arg-type]
    try:
        async for _ in call:
            pass
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or ""
    return grpc.StatusCode.OK, ""


def test_a_compressed_request_is_refused_before_it_is_inflated() -> None:
    async def scenario(running: Running) -> grpc.StatusCode:
        async with grpc.aio.insecure_channel(running.address, compression=grpc.Compression.Gzip) as channel:
            return (await _status(channel, "/mus.v1.PlayService/Play", heavy_act()))[0]

    # Before: RESOURCE_EXHAUSTED from the servicer, once the 1 MiB message had been inflated and parsed. Now grpc's
    # core refuses it (UNIMPLEMENTED; INTERNAL where the client's write races the status).
    assert with_referee(scenario) in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.INTERNAL)


@pytest.mark.parametrize("method", ["/mus.v1.PlayService/Play", "/mus.v1.LobbyService/Connect"])
def test_an_oversized_first_message_is_refused_by_its_length_never_parsed(method: str) -> None:
    """Bytes that are no message at all: parsed, they would be refused as unreadable (INVALID_ARGUMENT)."""
    garbage = b"\xff" * (quota.MAX_MESSAGE_BYTES + 1)

    async def scenario(running: Running) -> tuple[grpc.StatusCode, str]:
        async with grpc.aio.insecure_channel(running.address) as channel:
            return await _status(channel, method, garbage)

    code, details = with_referee(scenario)
    assert code is grpc.StatusCode.RESOURCE_EXHAUSTED, (code, details)
    assert details == f"a message of {quota.MAX_MESSAGE_BYTES + 1} bytes is over the limit of 65536 bytes"


@pytest.mark.parametrize(
    ("body", "refused"),
    [(heavy_act(), grpc.StatusCode.RESOURCE_EXHAUSTED), (b"\xff" * 10, grpc.StatusCode.INVALID_ARGUMENT)],
    ids=["oversized", "unreadable"],
)
def test_an_oversized_or_unreadable_unary_request_is_refused_by_name_before_its_token_is_read(
    caplog: pytest.LogCaptureFixture, body: bytes, refused: grpc.StatusCode
) -> None:
    """The admin API shares the public port unless given one of its own: its requests are bounded too. grpc, which
    reads a request before the servicer runs, logged each unreadable one's traceback as the servicer's error."""

    async def scenario(running: Running) -> grpc.StatusCode:
        async with grpc.aio.insecure_channel(running.address) as channel:
            call: Any = channel.unary_unary("/mus.v1.TableAdminService/CreateTable")
            try:
                await call(body, metadata=(("authorization", "Bearer nobody"),))
            except grpc.aio.AioRpcError as error:
                return error.code()
            return grpc.StatusCode.OK

    assert with_referee(scenario) is refused
    assert "Traceback" not in caplog.text, "refused by name, not logged as the servicer's error (a flood would fill it)"
