"""Caps on the streams anyone may open without a token: grpc.health.v1 `Watch` and reflection (`StreamQuota`),
and Play and Lobby streams that have not sent their first message, which carries the token (`FirstMessageQuota`).

The server's `maximum_concurrent_rpcs` counts every call in progress together. Without a cap of their own, a
client that needs no token (a hosted bot through its worker's forwarder, or anyone who can reach the port) could
hold every slot with `Health/Watch` streams, and the tables' `Play` streams and the admin calls would be refused
with RESOURCE_EXHAUSTED. These streams get a budget of their own, far below the server's cap, server-wide and per
connection: past it a new one is refused at once with RESOURCE_EXHAUSTED, and every other slot stays for the
calls the referee exists for. (The spectators' `Watch` has its own per-host cap in `WatchServicer`.)
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

_Req = TypeVar("_Req")
_Res = TypeVar("_Res")

CAPPED_METHODS = frozenset(
    {
        "/grpc.health.v1.Health/Watch",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    }
)
"""Streams that need no token and may stay open indefinitely."""

MAX_CAPPED_STREAMS = 256
"""Such streams open at once on the whole server (a health checker needs one)."""

MAX_CAPPED_STREAMS_PER_PEER = 8
"""Such streams open at once on one connection (`context.peer()`: address and port)."""


class StreamQuota(grpc.aio.ServerInterceptor):
    """Refuses a capped stream with RESOURCE_EXHAUSTED once `total` are open, or `per_peer` on its connection."""

    def __init__(
        self,
        methods: frozenset[str] = CAPPED_METHODS,
        *,
        total: int = MAX_CAPPED_STREAMS,
        per_peer: int = MAX_CAPPED_STREAMS_PER_PEER,
    ) -> None:
        self.methods = methods
        self.total = total
        self.per_peer = per_peer
        self.open: dict[str, int] = {}
        """Capped streams open per peer."""

    @property
    def open_total(self) -> int:
        return sum(self.open.values())

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[_Req, _Res] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[_Req, _Res] | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method not in self.methods:
            return handler
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._capped(handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_stream is not None:
            return grpc.stream_stream_rpc_method_handler(
                self._capped(handler.stream_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    async def _enter(self, context: grpc.aio.ServicerContext[Any, Any]) -> str:
        peer = context.peer() or ""
        if self.open_total >= self.total:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"too many such streams: at most {self.total}")
        if self.open.get(peer, 0) >= self.per_peer:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED, f"too many such streams on this connection: at most {self.per_peer}"
            )
        self.open[peer] = self.open.get(peer, 0) + 1
        return peer

    def _leave(self, peer: str) -> None:
        left = self.open.get(peer, 0) - 1
        if left > 0:
            self.open[peer] = left
        else:
            self.open.pop(peer, None)

    def _capped(self, behavior: Callable[..., Any]) -> Callable[..., Any]:
        """The method's behavior, counted while it runs (a coroutine, like Health's, or an async generator)."""
        if inspect.isasyncgenfunction(behavior):

            async def stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
                peer = await self._enter(context)
                try:
                    async for response in behavior(request, context):
                        yield response
                finally:
                    self._leave(peer)

            return stream

        async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            peer = await self._enter(context)
            try:
                return await behavior(request, context)
            finally:
                self._leave(peer)

        return call


FIRST_MESSAGE_METHODS = frozenset({"/mus.v1.PlayService/Play", "/mus.v1.LobbyService/Connect"})
"""Streams that authenticate with their first message (Join with a seat token, LobbyHello with a bot token)."""

MAX_WAITING_FOR_FIRST_MESSAGE = 1024
"""Such streams open at once on the whole server that have not sent their first message yet. An honest bot sends
it at once; without this cap, anyone could hold thousands of slots for `JOIN_WAIT_S` each, again and again."""

MAX_WAITING_FOR_FIRST_MESSAGE_PER_PEER = 64
"""The same, on one connection: a hosted seat (at most 4 connections through its forwarder) holds at most 256."""


class FirstMessageQuota(grpc.aio.ServerInterceptor):
    """Refuses a Play or Lobby stream with RESOURCE_EXHAUSTED while `total` others (or `per_peer` on its connection)
    wait for their first message.

    Once its first message has arrived (the servicer then checks the token at once), a stream no longer counts:
    what a seat may hold after that is bounded by the tables and their tokens.
    """

    def __init__(
        self,
        methods: frozenset[str] = FIRST_MESSAGE_METHODS,
        *,
        total: int = MAX_WAITING_FOR_FIRST_MESSAGE,
        per_peer: int = MAX_WAITING_FOR_FIRST_MESSAGE_PER_PEER,
    ) -> None:
        self.methods = methods
        self.total = total
        self.per_peer = per_peer
        self.waiting: dict[str, int] = {}
        """Streams waiting for their first message, per peer."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[_Req, _Res] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[_Req, _Res] | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler.stream_stream is None or handler_call_details.method not in self.methods:
            return handler
        return grpc.stream_stream_rpc_method_handler(
            self._counted(handler.stream_stream),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _counted(self, behavior: Callable[..., Any]) -> Callable[..., Any]:
        async def stream(
            requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            peer = context.peer() or ""
            if sum(self.waiting.values()) >= self.total or self.waiting.get(peer, 0) >= self.per_peer:
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too many streams waiting to authenticate")
            self.waiting[peer] = self.waiting.get(peer, 0) + 1
            counted = True

            def release() -> None:
                nonlocal counted
                if counted:
                    counted = False
                    left = self.waiting[peer] - 1
                    if left:
                        self.waiting[peer] = left
                    else:
                        del self.waiting[peer]

            async def first_then_rest() -> AsyncIterator[Any]:
                try:
                    first = await anext(requests)
                except StopAsyncIteration:
                    return  # the stream closed first: the servicer sees the end, as it would unwrapped
                finally:
                    release()
                yield first
                async for request in requests:
                    yield request

            try:
                async for response in behavior(first_then_rest(), context):
                    yield response
            finally:
                release()

        return stream
