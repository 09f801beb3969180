"""Budgets for the streams anyone may open without a token, in one interceptor (`StreamQuota`).

The server's `maximum_concurrent_rpcs` counts every call in progress together. Without budgets of their own, a
client that needs no token (anyone who can reach the port; a hosted bot's relay passes only `Play`) could
hold every slot, and the tables' `Play` streams and the admin calls would be refused with RESOURCE_EXHAUSTED.
Three kinds of stream are budgeted, each server-wide and per connection, far below the server's cap together; past a
budget a new stream is refused at once with RESOURCE_EXHAUSTED, and every other slot stays for the calls the referee
exists for:

- `CAPPED_METHODS` (grpc.health.v1 `Watch`, reflection) need no token and may stay open indefinitely: they count
  for as long as they are open.
- `FIRST_MESSAGE_METHODS` (`Play`, Lobby `Connect`) carry their token in their first message: they count until it
  arrives (the servicer then checks the token at once). On one connection, only those waiting for longer than
  `FIRST_MESSAGE_GRACE_S` count against its budget, so that an honest harness that opens hundreds of seats' streams
  at once on one connection, each sending its Join straight away, is never cut (its streams may wait a moment while
  the referee is busy); past the grace, a stream beyond its connection's share is closed. The server-wide budget
  counts every waiting stream, and when it is full the oldest waiting stream is closed to make room for the new one
  rather than the new one refused: an honest stream sends its first message at once, so a client that keeps the
  budget full of streams that never authenticate only ever closes its own.

- `WATCH_METHOD` (the spectators' `Watch`) needs no token and stays open while its match runs: it counts while open,
  and `WatchServicer` caps it per host too (an IPv6 host is its /64).

And every request of every method is refused by its length past `MAX_MESSAGE_BYTES`, before it is parsed
(`bounded`): a review's token-less streams each sent a 1 MiB PlayRequest of empty cards (1 KB gzipped, before the
server took only uncompressed messages), and parsing them held the event loop ~50 ms each; every table of the
referee played 30 to 70 times slower (stop 44). A `FIRST_MESSAGE_METHODS` stream that does not authenticate with
its first message (no message, an unreadable or oversized one, a wrong token) counts against its host's budget of
such streams (`SILENT_STREAM_RATE`), so what a host without a token can make the referee parse stays small.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import ipaddress
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import grpc

from referee.service.table import RateLimiter, RateLimits

_Req = TypeVar("_Req")
_Res = TypeVar("_Res")
Context = grpc.aio.ServicerContext[Any, Any]

MAX_MESSAGE_BYTES = 64 * 1024
"""The largest message a client may send; the biggest legitimate one is a few hundred bytes."""


def too_large(size: int) -> str:
    return f"a message of {size} bytes is over the limit of {MAX_MESSAGE_BYTES} bytes"


class MessageTooLarge(ValueError):
    """A request over MAX_MESSAGE_BYTES, refused by its length before it is parsed (`bounded`)."""

    def __init__(self, size: int) -> None:
        super().__init__(too_large(size))


_Message = TypeVar("_Message")


def bounded(read: Callable[[bytes], _Message]) -> Callable[[bytes], _Message]:
    """A request deserializer that refuses a message over MAX_MESSAGE_BYTES by its length (`MessageTooLarge`),
    never parsing it. A servicer reads the error where it reads the message: a seat's is a protocol error."""

    def reader(data: bytes) -> _Message:
        if len(data) > MAX_MESSAGE_BYTES:
            raise MessageTooLarge(len(data))
        return read(data)

    return reader


def authenticated(requests: AsyncIterator[Any]) -> None:
    """Tell the quota of a `FIRST_MESSAGE_METHODS` stream that its first message authenticated it (its servicer
    calls this once the token is good): it then never counts against its host's budget of silent streams."""
    if isinstance(requests, _FirstMessage):
        requests.authenticated = True


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

WATCH_METHOD = "/mus.v1.WatchService/Watch"
"""Spectators' streams: no token, and open as long as the match they follow."""

MAX_WATCH_STREAMS = 512
"""`WATCH_METHOD` streams open at once on the whole server. The servicer caps them per host
(`servicer.MAX_WATCHES_PER_HOST`); a client of many addresses held every call slot of the referee from 70 hosts
(a review, stop 34), and no seat could join."""

MAX_WATCH_STREAMS_PER_PEER = 64
"""The same, on one connection (the servicer's per-host cap is the same number)."""

SILENT_STREAMS_PER_HOST = 256.0
SILENT_STREAM_RATE = 20.0
"""`FIRST_MESSAGE_METHODS` streams one host may open that end without authenticating (without their first message:
closed by the client, closed to make room, or past the referee's wait; or with one that is unreadable, oversized or
of a wrong token): bursts of SILENT_STREAMS_PER_HOST, then SILENT_STREAM_RATE a second; past it the host's new such
streams are refused at once, before any work. An honest client sends its first message at once; a review's churn of
silent streams from 40 connections held the event loop up to 939 ms (stop 34), another's oversized first messages
stalled every table (stop 44)."""

MAX_CAPPED_STREAMS_PER_PEER = 8
"""Such streams open at once on one connection (`context.peer()`: address and port)."""

FIRST_MESSAGE_METHODS = frozenset({"/mus.v1.PlayService/Play", "/mus.v1.LobbyService/Connect"})
"""Streams that authenticate with their first message (Join with a seat token, LobbyHello with a bot token)."""

MAX_WAITING_FOR_FIRST_MESSAGE = 1024
"""Such streams open at once on the whole server that have not sent their first message yet. An honest bot sends
it at once; without this cap, anyone could hold thousands of slots for `JOIN_WAIT_S` each, again and again."""

MAX_WAITING_FOR_FIRST_MESSAGE_PER_PEER = 64
"""The same, on one connection, counting only the streams that have waited past `FIRST_MESSAGE_GRACE_S`."""

FIRST_MESSAGE_GRACE_S = 2.0
"""How long a stream may wait for its first message before it counts against its connection's budget. An honest
client writes it right after opening the stream: a busy client or referee may take a moment, never this long."""


class _Budget:
    """Streams counted server-wide and per connection; a new one is refused past either limit."""

    def __init__(self, total: int, per_peer: int) -> None:
        self.total = total
        self.per_peer = per_peer
        self.count = 0
        self.by_peer: dict[str, int] = {}
        """What counts against each connection's budget."""

    def full(self, peer: str) -> str | None:
        """Why a new stream on `peer` is refused, or None."""
        if self.count >= self.total:
            return f"at most {self.total} on the server"
        if self.by_peer.get(peer, 0) >= self.per_peer:
            return f"at most {self.per_peer} on this connection"
        return None

    def add_peer(self, peer: str) -> None:
        self.by_peer[peer] = self.by_peer.get(peer, 0) + 1

    def remove_peer(self, peer: str) -> None:
        left = self.by_peer.get(peer, 0) - 1
        if left > 0:
            self.by_peer[peer] = left
        else:
            self.by_peer.pop(peer, None)


class _Evicted(BaseException):
    """A waiting stream closed to make room (`_FirstMessage.evict`). A BaseException: it passes through the
    servicers' handling of an unreadable first message to `StreamQuota`, which ends the call with its status."""


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class _FirstMessage:
    """The request stream of a `FIRST_MESSAGE_METHODS` call: counted in the budget until its first message arrives
    (or it ends, or it is evicted), then passed through without a layer of its own."""

    def __init__(
        self, requests: AsyncIterator[Any], budget: _Budget, peer: str, grace_s: float, queue: dict[_FirstMessage, None]
    ) -> None:
        self.requests = requests
        self.budget = budget
        self.peer = peer
        self.counted = True
        self.answered = False
        """Its first message arrived."""
        self.authenticated = False
        """Its servicer found the first message's token good (`authenticated`)."""
        self.stale = False
        self.queue = queue
        """Every counted waiting stream, oldest first: the one evicted when the server's budget is full."""
        queue[self] = None
        self.evicted = asyncio.get_running_loop().create_future()
        budget.count += 1
        self.timer: asyncio.TimerHandle | None = asyncio.get_running_loop().call_later(grace_s, self._grace_over)

    def _grace_over(self) -> None:
        self.timer = None
        if self.counted:
            self.stale = True
            self.budget.add_peer(self.peer)
            if self.budget.by_peer[self.peer] > self.budget.per_peer:
                self.evict()  # its connection holds more than its share of streams that never authenticate

    def evict(self) -> None:
        """Close this stream to make room: it stops counting now, and its call ends RESOURCE_EXHAUSTED."""
        self.release()
        if not self.evicted.done():
            self.evicted.set_result(None)

    def release(self) -> None:
        if not self.counted:
            return
        self.counted = False
        self.queue.pop(self, None)
        self.budget.count -= 1
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.stale:
            self.budget.remove_peer(self.peer)

    def __aiter__(self) -> _FirstMessage:
        return self

    def __anext__(self) -> Awaitable[Any]:
        if self.counted or self.evicted.done():
            return self._first()
        return self.requests.__anext__()

    async def _first(self) -> Any:
        try:
            if self.evicted.done():
                raise _Evicted
            message = asyncio.ensure_future(self.requests.__anext__())
            try:
                done, _ = await asyncio.wait((message, self.evicted), return_when=asyncio.FIRST_COMPLETED)
            finally:  # evicted, or the call ended (cancelled): whatever its read raises now is of no interest
                message.cancel()
                # Else asyncio logs each one (a review's flood, 60 KB/s), a read that ended as the call was cancelled
                # too (another's, 85 KB/s, stop 39).
                message.add_done_callback(_retrieved)
            if message not in done:
                raise _Evicted
            first = message.result()
            self.answered = True
            return first
        finally:
            self.release()


class StreamQuota(grpc.aio.ServerInterceptor):
    """Refuses a budgeted stream with RESOURCE_EXHAUSTED once its kind's budget is full (see the module)."""

    def __init__(
        self,
        *,
        capped_total: int = MAX_CAPPED_STREAMS,
        capped_per_peer: int = MAX_CAPPED_STREAMS_PER_PEER,
        waiting_total: int = MAX_WAITING_FOR_FIRST_MESSAGE,
        waiting_per_peer: int = MAX_WAITING_FOR_FIRST_MESSAGE_PER_PEER,
        grace_s: float = FIRST_MESSAGE_GRACE_S,
        watch_total: int = MAX_WATCH_STREAMS,
        watch_per_peer: int = MAX_WATCH_STREAMS_PER_PEER,
        silent_burst: float = SILENT_STREAMS_PER_HOST,
        silent_rate: float = SILENT_STREAM_RATE,
    ) -> None:
        self.capped = _Budget(capped_total, capped_per_peer)
        """Open `CAPPED_METHODS` streams."""
        self.waiting = _Budget(waiting_total, waiting_per_peer)
        """`FIRST_MESSAGE_METHODS` streams waiting for their first message."""
        self.waiting_streams: dict[_FirstMessage, None] = {}
        """Those streams, oldest first."""
        self.grace_s = grace_s
        self.watches = _Budget(watch_total, watch_per_peer)
        """Open `WATCH_METHOD` streams."""
        self.capped_messages = RateLimits(CAPPED_MESSAGE_RATE, CAPPED_MESSAGE_BURST, keep=MAX_CAPPED_STREAMS)
        """Per host, the requests of its `CAPPED_METHODS` streams (CAPPED_MESSAGE_RATE)."""
        self.silent = RateLimits(silent_rate, silent_burst, keep=MAX_CAPPED_STREAMS)
        """Per host, its streams that ended without authenticating (SILENT_STREAM_RATE)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[_Req, _Res] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[_Req, _Res] | None:
        found = await continuation(handler_call_details)
        method = handler_call_details.method
        if found is None:
            return found
        handler = _bounded_handler(found)
        if method in FIRST_MESSAGE_METHODS and handler.stream_stream is not None:
            behavior = self._until_first_message(handler.stream_stream)
        elif method == WATCH_METHOD and handler.unary_stream is not None:
            behavior = self._while_open(handler.unary_stream, self.watches, "Watch streams")
            return grpc.unary_stream_rpc_method_handler(
                behavior,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        elif method in CAPPED_METHODS and handler.unary_stream is not None:
            behavior = self._while_open(handler.unary_stream)
            return grpc.unary_stream_rpc_method_handler(
                behavior,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        elif method in CAPPED_METHODS and handler.stream_stream is not None:
            behavior = self._while_open(_checked_requests(handler.stream_stream, self.capped_messages))
        else:
            return handler
        return grpc.stream_stream_rpc_method_handler(
            behavior,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    @staticmethod
    async def _refuse_if_full(budget: _Budget, peer: str, context: Context, what: str) -> None:
        reason = budget.full(peer)
        if reason is not None:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"too many {what}: {reason}")

    def _until_first_message(self, behavior: Callable[..., Any]) -> Callable[..., Any]:
        """A Play or Lobby handler (an async generator), its request stream counted until the first message.

        It is wrapped in a coroutine that writes the responses itself, as grpc.aio would for the generator: a
        wrapping generator would add a layer to every message of every stream."""

        async def call(requests: AsyncIterator[Any], context: Context) -> None:
            peer, host = context.peer() or "", peer_host(context)
            if not self.silent[host].ready():
                await context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    "too many streams from this host ended without authenticating: send the first message (Join,"
                    " LobbyHello, with a good token) right after opening the stream, and wait before opening more",
                )
            if self.waiting.by_peer.get(peer, 0) >= self.waiting.per_peer:
                await context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"too many streams waiting to authenticate: at most {self.waiting.per_peer} on this connection",
                )
            if self.waiting.count >= self.waiting.total:
                # Full: the oldest waiting stream makes room, not this one. Refused, every honest Join was shut out
                # by a client that held the budget full of streams that never authenticate (a review, stop 34);
                # an honest stream sends its first message at once, so it is never the oldest for long.
                next(iter(self.waiting_streams)).evict()
            first = _FirstMessage(requests, self.waiting, peer, self.grace_s, self.waiting_streams)
            try:
                # Closed on the way out, whichever: a call cancelled inside a write (its connection gone) runs the
                # handler's clean-up at once, not when the garbage collector finds its generator.
                async with contextlib.aclosing(behavior(first, context)) as responses:
                    async for response in responses:
                        await context.write(response)
            except _Evicted:
                await context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"closed to make room: no first message while {self.waiting.total} streams waited for theirs",
                )
            finally:
                if not first.authenticated:
                    self.silent[host].allow()
                first.release()

        return call

    def _while_open(
        self, behavior: Callable[..., Any], budget: _Budget | None = None, what: str = "such streams"
    ) -> Callable[..., Any]:
        """The method's behavior, counted in `budget` (default: `capped`) while it runs (a coroutine, like Health's,
        or an async generator)."""
        counted = budget if budget is not None else self.capped

        async def enter(context: Context) -> str:
            peer = context.peer() or ""
            await self._refuse_if_full(counted, peer, context, what)
            counted.count += 1
            counted.add_peer(peer)
            return peer

        def leave(peer: str) -> None:
            counted.count -= 1
            counted.remove_peer(peer)

        if inspect.isasyncgenfunction(behavior):

            async def stream(request: Any, context: Context) -> AsyncIterator[Any]:
                peer = await enter(context)
                try:
                    async for response in behavior(request, context):
                        yield response
                finally:
                    leave(peer)

            return stream

        async def call(request: Any, context: Context) -> Any:
            peer = await enter(context)
            try:
                return await behavior(request, context)
            finally:
                leave(peer)

        return call


CAPPED_MESSAGE_RATE = 20.0
CAPPED_MESSAGE_BURST = 100.0
"""What one host's `CAPPED_METHODS` request streams (reflection) may send, all of them together: bursts of
CAPPED_MESSAGE_BURST requests, then CAPPED_MESSAGE_RATE a second; past that the stream that sent one more ends
RESOURCE_EXHAUSTED. A tool that lists the services sends a handful; unbounded, one token-less connection had ~22,000
descriptors of ~9 KB a second sent back (200 MB/s) and every table of the referee played 4 times slower (a review,
helper-81). Counted per stream, a review's client opened new streams as fast as it used them up: 3,200 descriptors
a second from one connection, and the tables played 3.3 times slower (helper-84)."""


class _Refused(BaseException):
    """A `CAPPED_METHODS` request that ends its stream (`_checked_requests`): a BaseException, so that it passes
    through the servicer's own handling to the wrapper, which ends the call with its status."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


def _checked_requests(behavior: Callable[..., Any], sent: RateLimits) -> Callable[..., Any]:
    """A request-streaming handler (reflection's) whose requests are read here: an unreadable or oversized one
    ends the call by name, where grpc logged each one's traceback as the servicer's error (a review's token-less
    flood of one garbage message a stream wrote 1.8 MB of log a second, helper-81), and a flood of them from one
    host ends it too (CAPPED_MESSAGE_RATE, counted in `sent`)."""

    async def checked(requests: AsyncIterator[Any], limiter: RateLimiter) -> AsyncIterator[Any]:
        while True:
            try:
                request = await anext(requests)
            except StopAsyncIteration:
                return
            except Exception as error:  # bytes that are no such message, or too many
                raise _Refused(*_refusal(error)) from None
            if not limiter.allow():
                raise _Refused(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"too many messages: the limit is {CAPPED_MESSAGE_RATE:g} per second",
                )
            yield request

    async def stream(requests: AsyncIterator[Any], context: Context) -> AsyncIterator[Any]:
        try:
            async for response in behavior(checked(requests, sent[peer_host(context)]), context):
                yield response
        except _Refused as refused:
            await context.abort(refused.code, refused.details)

    return stream


class _Unreadable:
    """A unary request that could not be read (oversized, or no such message), in the place of the request: its
    call is refused by name, where grpc, which calls the deserializer itself, would log each one's traceback as an
    error of the servicer's (a flood of them would fill the referee's log)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def refuse(self, context: Context) -> NoReturn:
        await context.abort(*_refusal(self.error))


def _refusal(error: Exception) -> tuple[grpc.StatusCode, str]:
    """The status that refuses a request that could not be read (`bounded`): by name, never logged."""
    if isinstance(error, MessageTooLarge):
        return grpc.StatusCode.RESOURCE_EXHAUSTED, str(error)
    return grpc.StatusCode.INVALID_ARGUMENT, f"unreadable request: {type(error).__name__}"


def _bounded_handler(handler: grpc.RpcMethodHandler[_Req, _Res]) -> grpc.RpcMethodHandler[_Req, _Res]:
    """The handler with its requests `bounded`; a unary request that cannot be read refused by name
    (`_Unreadable`). A streamed request's servicer reads the error where it reads the message."""
    read = handler.request_deserializer
    if read is None:
        return handler
    replace: Callable[..., grpc.RpcMethodHandler[_Req, _Res]] = handler._replace  # type: ignore[attr-defined]
    checked = bounded(read)
    if handler.request_streaming:
        return replace(request_deserializer=checked)

    def lenient(data: bytes) -> Any:
        try:
            return checked(data)
        except Exception as error:  # bytes that are no such message
            return _Unreadable(error)

    if handler.unary_unary is not None:
        unary: Any = handler.unary_unary  # the aio servicer's coroutine (grpc's stubs type the sync one)

        async def call(request: Any, context: Context) -> Any:
            if isinstance(request, _Unreadable):
                await request.refuse(context)
            return await unary(request, context)

        return replace(request_deserializer=lenient, unary_unary=call)
    streaming: Any = handler.unary_stream
    if inspect.isasyncgenfunction(streaming):

        async def stream(request: Any, context: Context) -> AsyncIterator[Any]:
            if isinstance(request, _Unreadable):
                await request.refuse(context)
            async for response in streaming(request, context):
                yield response

        return replace(request_deserializer=lenient, unary_stream=stream)

    async def written(request: Any, context: Context) -> Any:  # one that writes its responses itself (Health's)
        if isinstance(request, _Unreadable):
            await request.refuse(context)
        return await streaming(request, context)

    return replace(request_deserializer=lenient, unary_stream=written)


def peer_host(context: Context) -> str:
    """The caller's host, without its port (`ipv4:1.2.3.4:5678` -> `ipv4:1.2.3.4`); an IPv6 address's /64, which
    one client commonly holds whole (`ipv6:[2001:db8::1]:5678` -> `ipv6:2001:db8::/64`); a unix socket as it is."""
    peer = context.peer() or ""
    if peer.startswith("ipv6:"):
        address = peer.removeprefix("ipv6:").rsplit(":", 1)[0].strip("[]").split("%")[0]
        with contextlib.suppress(ValueError):
            return f"ipv6:{ipaddress.IPv6Network(f'{address}/64', strict=False)}"
    return peer.rsplit(":", 1)[0] if peer.startswith(("ipv4:", "ipv6:")) else peer
