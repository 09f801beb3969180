"""A Play stream over frames, for a bot in Python: what a pooled process may play its seats on instead of gRPC.

The seat line of a pooled process names, beside the referee's gRPC address, a `frames` address: a unix socket in
the process's own folder where one connection is one Play stream, in gRPC-Web's message framing (docs/pool.md,
"Frames"). It saves the bot and the referee HTTP/2 and grpc's threads on every decision. The SDK (`run_seats`)
and the instant bot of `mus bench league` use this; it needs only the generated messages, not grpc (whose import
is about half of a small Python bot's start-up).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from urllib.parse import unquote

from mus.v1 import play_pb2

MESSAGE = 0x00
TRAILER = 0x80

STATUS_NAMES = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
]
"""gRPC's status codes by number (`grpc.StatusCode[name]`)."""


class StreamEnded(Exception):
    """The stream ended with a status other than OK: `code`, the gRPC status code's name, and `details`."""

    def __init__(self, code: str, details: str) -> None:
        super().__init__(f"{code}: {details}")
        self.code = code
        self.details = details


class FrameStream:
    """One Play stream on a connection to `address` (`unix:PATH`): `put` a PlayRequest, iterate the responses.

    The iteration ends at the referee's OK status; any other status, or a connection cut without one (UNAVAILABLE:
    worth joining again), raises `StreamEnded`. `close` leaves the stream (the connection's end)."""

    def __init__(self, address: str) -> None:
        if not address.startswith("unix:"):
            raise ValueError(f"frames are spoken on a unix socket, not {address!r}")
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._socket.connect(address[len("unix:") :])
        except OSError as error:
            self._socket.close()
            raise StreamEnded("UNAVAILABLE", f"cannot connect to {address}: {error}") from None
        self._reader = self._socket.makefile("rb")

    def put(self, request: play_pb2.PlayRequest) -> None:
        body = request.SerializeToString()
        with contextlib.suppress(OSError):  # the referee closed the stream: reading says how
            self._socket.sendall(bytes((MESSAGE,)) + len(body).to_bytes(4, "big") + body)

    def __iter__(self) -> Iterator[play_pb2.PlayResponse]:
        while True:
            try:
                header = self._reader.read(5)
                body = self._reader.read(int.from_bytes(header[1:], "big")) if len(header) == 5 else b""
            except OSError as error:  # reset (the referee cut a stalled stream, or refused one past its cap)
                raise StreamEnded("UNAVAILABLE", f"the referee's connection ended: {error}") from None
            if len(header) < 5:
                raise StreamEnded("UNAVAILABLE", "the referee's connection ended without a status")
            if header[0] == MESSAGE:
                yield play_pb2.PlayResponse.FromString(body)
                continue
            code, details = _status(body)
            if code != "OK":
                raise StreamEnded(code, details)
            return

    def close(self) -> None:
        self._reader.close()
        self._socket.close()

    def __enter__(self) -> FrameStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _status(trailer: bytes) -> tuple[str, str]:
    """The status code's name and the message of a trailer frame (`grpc-status: N`, `grpc-message: TEXT`)."""
    fields = {}
    for line in trailer.decode(errors="replace").split("\r\n"):
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    number = fields.get("grpc-status", "")
    code = STATUS_NAMES[int(number)] if number.isdigit() and int(number) < len(STATUS_NAMES) else "UNKNOWN"
    return code, unquote(fields.get("grpc-message", ""))
