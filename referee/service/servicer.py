"""The gRPC servicers: thin, they check who is calling and hand everything else to the tables.

Every refusal is a gRPC status with a message naming the problem, never a bare UNKNOWN.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import secrets
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NoReturn, Protocol, TypeVar

import grpc

from mus.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    lobby_pb2,
    lobby_pb2_grpc,
    play_pb2,
    watch_pb2,
    watch_pb2_grpc,
)
from mus.v1 import types_pb2 as pb
from referee import wire
from referee.engine.errors import RulesError
from referee.engine.replay import dumps_record
from referee.engine.rules import Rules
from referee.service.lobby import (
    MAX_CALLS_PER_BOT,
    MAX_SESSIONS_PER_BOT,
    Lobby,
    LobbySession,
    StateError,
    is_token_sha256,
)
from referee.service.quota import MessageTooLarge, authenticated, bounded, peer_host
from referee.service.table import (
    PROTOCOL_VERSION,
    Backlog,
    Clock,
    Outbox,
    RateLimiter,
    RateLimits,
    Table,
    TableError,
    TableStatus,
)

log = logging.getLogger(__name__)

JOIN_WAIT_S = 10.0
"""How long a new Play stream may take to send its Join."""

MAX_WAIT_S = 60.0
"""The longest one WaitTable call waits: a worker calls again while its table runs on, so a lost call never
holds an admin call slot for long."""

MESSAGE_RATE = 200.0
MESSAGE_BURST = 400.0
"""What one Play stream may send besides its answers to its open decisions: bursts of `MESSAGE_BURST` messages, then
`MESSAGE_RATE` a second (docs/protocol.md "Limits"); past that the stream ends with RESOURCE_EXHAUSTED."""

MAX_UNREAD = 1_000
"""Messages a seat's stream may hold unread when the seat pings: only its pings add to its stream at its own
say (the table's messages are bounded by the match), so a bot that pings and never reads is cut here instead of
the referee queueing pongs for it without end. An honest bot has at most a hand's events unread."""

RESEND_BURST = 100_000.0
RESEND_RATE = 2_000.0
"""The events one bot's joins may have resent, over all its seats and tables: RESEND_BURST at once (a table's
whole log at the most, `MAX_TABLE_EVENTS`), then RESEND_RATE a second. Each join resends what its seat missed;
a review's three seats rejoining a long match from 0 every second kept the event loop busy 227 ms at the 99th
percentile though each resend was converted as it was sent (stop 34). A Join the table refuses anyway is charged
nothing, and a worker's own referee counts each table apart (`Referee.resends_per_table`)."""

TURN_ACK_LIMIT_S = 5.0
"""How long a gated table waits for its caller to acknowledge a turn (admin Turns) before it ungates itself: a
worker that stopped answering must not hold its table's clocks for ever."""

CLOSE_GRACE_S = 5.0
"""How long a Play stream whose end is queued (its table is over, or it is closed for a protocol error) waits for its
bot to read up to it. Past it the stream is overdue: its seat is detached (it may join again), and the stream counts
against its bot's MAX_UNREAD_ENDS until its call ends."""

MAX_UNREAD_ENDS = 16
"""Overdue Play streams (CLOSE_GRACE_S) of one bot the referee holds before it refuses the bot's next Join. A client
that keeps its receive window shut never reads its stream's end: its call, and its call slot, stay until its
connection closes (hours: the server's `max_connection_age` and its grace), whatever the referee does to the call's
handler, and a review's bot kept two that way at every match it played (helper-84): enough matches, and every slot
of the referee. An honest client's transport takes what it is sent whether or not the bot reads."""

TRANSPORT_LIMIT_BYTES = 1024 * 1024
"""What gRPC itself accepts: larger messages than MAX_MESSAGE_BYTES get through to be refused by name, and
counted as a protocol error once the seat is known."""


read_play_request = bounded(play_pb2.PlayRequest.FromString)
"""A Play message from its bytes as frames read it, as the gRPC servers' interceptor does (`quota.StreamQuota`): one
over MAX_MESSAGE_BYTES is refused by its length (`quota.bounded`)."""


Context = grpc.aio.ServicerContext[Any, Any]


class StreamContext(Protocol):
    """What the Play stream asks of its context, so that it runs on gRPC and on frames (`service.frames`)."""

    async def abort(self, code: grpc.StatusCode, details: str = "") -> NoReturn: ...


class StreamAborted(Exception):
    """A Play stream served without gRPC ended with this status (`RaisingContext.abort`)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


Sink = Callable[[play_pb2.PlayResponse | bytes], bool]
"""Writes a response straight to a stream's connection; False when it takes none (see `DirectOutbox`)."""


class RaisingContext:
    """The context of a Play stream served without gRPC (over frames, or to a seat in the same process): `abort`
    ends the stream by raising `StreamAborted`, as grpc.aio's abort raises out of the handler. `sink`, where the
    stream's server has one, writes a response straight to the connection (`DirectOutbox`)."""

    def __init__(self, sink: Sink | None = None) -> None:
        self.sink = sink

    async def abort(self, code: grpc.StatusCode, details: str = "") -> NoReturn:
        raise StreamAborted(code, details)


class StreamOutbox(asyncio.Queue[play_pb2.PlayResponse | bytes | Backlog | None]):
    """A Play stream's outbox (`Table.attach`) that tells its stream when its end is queued (`ending`): the table
    is over, or the stream is closed for a protocol error."""

    def __init__(self, ending: Callable[[], None]) -> None:
        super().__init__()
        self._ending = ending

    def put_nowait(self, item: play_pb2.PlayResponse | bytes | Backlog | None) -> None:
        super().put_nowait(item)
        if item is None:
            self._ending()


class DirectOutbox(StreamOutbox):
    """A seat's outbox whose responses go straight to its connection (`sink`) while the stream waits for the next
    one: nothing is queued, and no task wakes to write it. A frames seat's decision otherwise took two hops through
    the event loop after the table had made it (the stream's task, then its frames server's), on every decision of
    a pooled league (docs/pool.md has the figures). Only while the stream waits in `get` (so everything before has
    been written) and the queue is empty, and only responses: the end of the stream, a backlog to resend and
    whatever the sink does not take (its connection is closing, or holds WRITE_BUFFER_BYTES the bot has not read)
    are queued as usual, and so is everything after them, so the order holds."""

    def __init__(self, ending: Callable[[], None], sink: Sink) -> None:
        super().__init__(ending)
        self._sink = sink
        self._waiting = False

    def put_nowait(self, item: play_pb2.PlayResponse | bytes | Backlog | None) -> None:
        if self._waiting and isinstance(item, bytes | play_pb2.PlayResponse) and self.empty() and self._sink(item):
            return
        super().put_nowait(item)

    async def get(self) -> play_pb2.PlayResponse | bytes | Backlog | None:
        self._waiting = True
        try:
            return await super().get()
        finally:
            self._waiting = False


_STATUS = {
    name: getattr(grpc.StatusCode, name)
    for name in ("ABORTED", "ALREADY_EXISTS", "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED")
}


KEEP_EXTERNAL_IDS = 100_000
"""CreateTable's external ids remembered (each as its table id and a digest of its request, about 200 bytes), so
that a retry is answered even after its table is no longer kept; the oldest is forgotten past this many."""


class Referee:
    """Every table of this process, the seat tokens that open them, and the admin token."""

    def __init__(
        self,
        admin_token: str | None = None,
        *,
        reconnect_grace_s: float = 5.0,
        keep_finished: int = 1000,
        state_path: Path | None = None,
        resends_per_table: bool = False,
    ):
        """`state_path`: the file that keeps the remote bots' registrations across restarts (lobby.read_state).

        `resends_per_table`: each table's seats have a resend budget of their own (RESEND_RATE), not one per bot
        over all its tables. For a league worker's referee, which plays a duplicate pair's two halves one after the
        other with processes that must never pass each other a thing: a budget the two shared was a channel, the
        first half's processes spending it by a number of their choice after their match, the twin's reading it back
        with Joins (a review, stop 45). A worker's referee plays one match at a time, so the bound holds the same."""
        self.admin_token = admin_token or secrets.token_urlsafe(24)
        self.reconnect_grace_s = reconnect_grace_s
        self.keep_finished = keep_finished
        self.tables: dict[str, Table] = {}
        self._tokens: dict[str, tuple[Table, int]] = {}
        self._external: dict[str, tuple[str, bytes]] = {}
        """CreateTable's external ids, oldest first: the table each created and its request's digest."""
        self._finished: dict[str, None] = {}
        """The finished tables still kept, oldest first."""
        self.lobby = Lobby(rotate_token=self.rotate_seat_token, state_path=state_path)
        self.resends = RateLimits(RESEND_RATE, RESEND_BURST, keep=4 * keep_finished)
        """Per bot name (or per table and bot name, `resends_per_table`), the events its seats' joins have had
        resent (RESEND_RATE)."""
        self.resends_per_table = resends_per_table

    def resend_budget(self, table: Table, seat: int) -> RateLimiter:
        """What a Join for `seat` of `table` is charged the events it has resent from (RESEND_RATE)."""
        name = table.seats[seat].name
        return self.resends[f"{table.table_id}/{name}" if self.resends_per_table else name]

    def create_table(
        self,
        rules: Rules,
        seed: int,
        bot_names: list[str],
        *,
        join_timeout_s: float = 30.0,
        table_id: str | None = None,
        remote_seats: frozenset[int] = frozenset(),
        clock: Clock | None = None,
    ) -> Table:
        """A new table waiting for its four seats; the seat tokens are in `table.seats[i].token`.

        `remote_seats` are offered through the lobby to the remote bots named for them; `clock` is the table's
        (the event loop's by default).
        """
        if len(bot_names) != 4:
            raise ValueError("a table has four seats")
        table_id = table_id or secrets.token_hex(8)
        table = Table(
            table_id,
            rules,
            seed,
            bot_names,
            join_timeout_s=join_timeout_s,
            reconnect_grace_s=self.reconnect_grace_s,
            clock=clock,
            on_finish=self._finished_table,
        )
        self.tables[table_id] = table
        for seat, state in enumerate(table.seats):
            self._tokens[state.token] = (table, seat)
        for seat in sorted(remote_seats):
            self.lobby.offer(table, seat)
        if remote_seats:
            table.excused = partial(self.lobby.busy, table)
        return table

    async def table_or_abort(self, table_id: str, context: Context) -> Table:
        """The table with this id; a call naming no table ends with NOT_FOUND."""
        table = self.tables.get(table_id)
        if table is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no table {table_id!r}")
        return table

    def seat_for_token(self, token: str) -> tuple[Table, int] | None:
        return self._tokens.get(token)

    def rotate_seat_token(self, table: Table, seat: int) -> None:
        """Give a seat a new token and forget the old one (a declined or withdrawn lobby assignment's)."""
        state = table.seats[seat]
        self._tokens.pop(state.token, None)
        state.token = secrets.token_urlsafe(24)
        self._tokens[state.token] = (table, seat)

    def _finished_table(self, table: Table) -> None:
        """Tokens die with the match; the table itself is kept a while for status and replays."""
        self.lobby.table_done(table)
        self._finished[table.table_id] = None
        while len(self._finished) > self.keep_finished:
            self.forget(next(iter(self._finished)))

    def forget(self, table_id: str) -> None:
        """Drop a finished table and its tokens now, before `keep_finished` later ones would: a worker's embedded
        referee, whose worker has taken the match (workers.matches), would otherwise hold a thousand."""
        self._finished.pop(table_id, None)
        table = self.tables.pop(table_id, None)
        for state in table.seats if table is not None else ():
            self._tokens.pop(state.token, None)

    def created_for(self, external_id: str, request: admin_pb2.CreateTableRequest) -> tuple[str, bool] | None:
        """The table an earlier CreateTable with this external id created, and whether it asked the same (None
        if no call named it, or too long ago)."""
        earlier = self._external.get(external_id)
        return None if earlier is None else (earlier[0], earlier[1] == _digest(request))

    def remember(self, external_id: str, table_id: str, request: admin_pb2.CreateTableRequest) -> None:
        self._external[external_id] = (table_id, _digest(request))
        while len(self._external) > KEEP_EXTERNAL_IDS:
            del self._external[next(iter(self._external))]

    def check_admin(self, context: Context) -> bool:
        for key, value in context.invocation_metadata() or ():
            if key == "authorization" and isinstance(value, str) and value.startswith("Bearer "):
                return hmac.compare_digest(value[len("Bearer ") :].encode(), self.admin_token.encode())
        return False


def _digest(request: admin_pb2.CreateTableRequest) -> bytes:
    return hashlib.sha256(request.SerializeToString(deterministic=True)).digest()


def serialize_response(message: play_pb2.PlayResponse | bytes) -> bytes:
    """The Play method's response serializer: the table puts most responses together as wire bytes (`Outbox`)."""
    return message if isinstance(message, bytes) else message.SerializeToString()


class PlayServicer:
    """One bidirectional stream per seat: decisions and events out, actions in."""

    writes_direct = True
    """Whether a stream whose context has a sink writes to it directly (`DirectOutbox`); not where a subclass must
    see every response the stream sends."""

    def __init__(self, referee: Referee) -> None:
        self.referee = referee
        self.unread_ends: dict[str, int] = {}
        """Each bot's overdue streams whose call has not ended (MAX_UNREAD_ENDS)."""

    def add_to_server(self, server: grpc.aio.Server) -> None:
        """As the generated `add_PlayServiceServicer_to_server`, with `serialize_response` for its responses."""
        handlers = {
            "Play": grpc.stream_stream_rpc_method_handler(
                self.Play,
                request_deserializer=play_pb2.PlayRequest.FromString,  # bounded by `quota.StreamQuota`
                response_serializer=serialize_response,
            )
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("mus.v1.PlayService", handlers),))
        server.add_registered_method_handlers("mus.v1.PlayService", handlers)

    async def Play(
        self, request_iterator: AsyncIterator[play_pb2.PlayRequest], context: StreamContext
    ) -> AsyncGenerator[play_pb2.PlayResponse | bytes, None]:
        try:
            async with asyncio.timeout(JOIN_WAIT_S):  # not wait_for: its task could swallow a stop's cancel
                first = await anext(request_iterator)
        except StopAsyncIteration:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the stream closed before sending Join")
        except TimeoutError:
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, f"no Join within {JOIN_WAIT_S:g} s")
        except MessageTooLarge as error:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(error))
        except Exception as error:  # bytes that are not a PlayRequest
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unreadable first message: {type(error).__name__}")
        if first.WhichOneof("message") != "join":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first message of a Play stream must be Join")
        join = first.join
        if join.protocol_version != PROTOCOL_VERSION:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"protocol version {join.protocol_version} is not supported: this referee speaks {PROTOCOL_VERSION}",
            )
        found = self.referee.seat_for_token(join.seat_token)
        if found is None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "unknown or expired seat token")
        table, seat = found
        if self.referee.lobby.unconfirmed(table, seat):
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"seat {seat}'s assignment is not confirmed: accept it on the lobby stream, then join (lobby.proto)",
            )
        refused = table.join_refusal(seat)
        if refused is not None:  # before anything is charged: a refused Join resends nothing
            await context.abort(_STATUS[refused.code], str(refused))
        bot = table.seats[seat].name
        unread = self.unread_ends.get(bot, 0)
        if unread >= MAX_UNREAD_ENDS:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"bot {bot!r} holds {unread} streams that never read their end, the most it may: read each stream to"
                " its status (or close its connection) before joining again",
            )
        missed = table.missed(seat, join.next_seq)
        if missed and not self.referee.resend_budget(table, seat).allow(missed):
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"seat {seat} joined too often: a bot's joins resend at most {RESEND_RATE:g} events a second (this"
                f" one {missed}); wait, then join again",
            )
        ended = asyncio.Event()
        counted: list[bool] = []
        timers: list[asyncio.TimerHandle] = []

        def ending() -> None:
            timers.append(asyncio.get_running_loop().call_later(CLOSE_GRACE_S, overdue))

        def overdue() -> None:
            """The stream has not read its end within CLOSE_GRACE_S: its seat may join again meanwhile, and the
            stream counts against its bot until its call ends (its handler stays: cancelled, it would give back
            nothing of the call's slot, only the count of it)."""
            if not ended.is_set() and not counted:
                counted.append(True)
                self.unread_ends[bot] = self.unread_ends.get(bot, 0) + 1
                table.detach(seat, outbox)

        sink = context.sink if self.writes_direct and isinstance(context, RaisingContext) else None
        outbox: Outbox = StreamOutbox(ending) if sink is None else DirectOutbox(ending, sink)
        try:
            table.attach(
                seat,
                outbox,
                join.next_seq,
                batch=join.batch_events,
                omit_hand_events=join.omit_hand_events,
                bot_name=join.bot_name,
            )
        except TableError as error:
            await context.abort(_STATUS[error.code], str(error))
        authenticated(request_iterator)
        closing: list[tuple[grpc.StatusCode, str]] = []
        reader = asyncio.create_task(self._read(table, seat, request_iterator, outbox, closing))
        try:
            while True:
                message = await outbox.get()
                if message is None:
                    break
                if isinstance(message, Backlog):
                    for response in table.backlog_messages(message):  # each chunk converted once the last is sent
                        yield response
                    continue
                yield message
        finally:
            ended.set()
            reader.cancel()
            for timer in timers:  # a stream that read its end lets go of its table at once, not CLOSE_GRACE_S later
                timer.cancel()
            table.detach(seat, outbox)
            if counted:
                self.unread_ends[bot] -= 1
                if not self.unread_ends[bot]:
                    del self.unread_ends[bot]
        if closing:
            await context.abort(*closing[0])
        if table.status is TableStatus.CANCELLED:
            await context.abort(grpc.StatusCode.ABORTED, f"table {table.table_id} was cancelled: {table.cancel_reason}")

    async def _read(
        self,
        table: Table,
        seat: int,
        requests: AsyncIterator[play_pb2.PlayRequest],
        outbox: Outbox,
        closing: list[tuple[grpc.StatusCode, str]],
    ) -> None:
        """Apply what the seat sends; a protocol error closes its stream with a status naming it (overdue after
        CLOSE_GRACE_S if the bot has not read that far: `Play`)."""
        limiter = RateLimiter(MESSAGE_RATE, MESSAGE_BURST)

        def close(code: grpc.StatusCode, detail: str) -> None:
            table.protocol_error(seat, detail)
            closing.append((code, detail))
            outbox.put_nowait(None)

        try:
            async for request in requests:
                kind = request.WhichOneof("message")
                # An Act answering the seat's open decision is not counted: the match bounds those, and an instant
                # bot whose match runs long answers more than MESSAGE_RATE a second (a review, stop 34).
                answers = kind == "act" and table.asks(seat, request.act.decision_id)
                if not answers and not limiter.allow():
                    limit = f"too many messages: the limit is {MESSAGE_RATE:g} per second"
                    close(grpc.StatusCode.RESOURCE_EXHAUSTED, limit)
                    return
                if kind == "act":
                    problem = table.act_problem(request.act.action)
                    if problem is not None:
                        close(grpc.StatusCode.INVALID_ARGUMENT, problem)
                        return
                    table.act(seat, request.act.decision_id, request.act.action)  # a rejection goes out from the table
                elif kind == "ping":
                    if outbox.qsize() >= MAX_UNREAD:
                        while not outbox.empty():  # never to be read: a rejoin resends the events from next_seq
                            outbox.get_nowait()
                        close(grpc.StatusCode.RESOURCE_EXHAUSTED, f"a ping with {MAX_UNREAD} messages unread")
                        return
                    outbox.put_nowait(play_pb2.PlayResponse(pong=play_pb2.Pong(nonce=request.ping.nonce)))
                elif kind == "join":
                    close(grpc.StatusCode.INVALID_ARGUMENT, "Join may only be the first message of a stream")
                    return
                else:
                    close(grpc.StatusCode.INVALID_ARGUMENT, "an empty PlayRequest: set act or ping")
                    return
        except asyncio.CancelledError:
            raise
        except MessageTooLarge as error:
            close(grpc.StatusCode.RESOURCE_EXHAUSTED, str(error))
        except Exception as error:  # a message the server could not read: garbage bytes
            log.info("table %s seat %d: unreadable stream: %r", table.table_id, seat, error)
            close(grpc.StatusCode.INVALID_ARGUMENT, f"unreadable message: {type(error).__name__}")


MAX_WATCHES_PER_HOST = 64
"""Live Watch streams one host may hold at once: the only long call that needs no credentials."""

WATCH_OPEN_RATE = 2.0
WATCH_OPEN_BURST = 64.0
"""Watch streams one host may open: bursts of `WATCH_OPEN_BURST`, then `WATCH_OPEN_RATE` a second. Each sends the
table's log so far; a review re-opening 64 Watches of a long finished match in a loop held the referee's event loop
up to 325 ms at a time, and every table's decisions waited (stop 34)."""


class WatchServicer(watch_pb2_grpc.WatchServiceServicer):
    """Spectators: public events live; the omniscient record only once the match has ended."""

    def __init__(self, referee: Referee) -> None:
        self.referee = referee
        self.watching: dict[str, int] = {}
        """Live Watch streams open per host (MAX_WATCHES_PER_HOST)."""
        self.opening = RateLimits(WATCH_OPEN_RATE, WATCH_OPEN_BURST, keep=4 * MAX_WATCHES_PER_HOST)
        """The Watch streams each host opens (WATCH_OPEN_RATE)."""

    async def Watch(self, request: watch_pb2.WatchRequest, context: Context) -> AsyncIterator[watch_pb2.WatchResponse]:
        host = peer_host(context)
        if self.watching.get(host, 0) >= MAX_WATCHES_PER_HOST:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"too many Watch streams from this host: at most {MAX_WATCHES_PER_HOST}",
            )
        if not self.opening[host].allow():
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"Watch opened too often from this host: {WATCH_OPEN_BURST:g} at once, then {WATCH_OPEN_RATE:g} a"
                " second",
            )
        self.watching[host] = self.watching.get(host, 0) + 1
        try:
            async for response in self._watch(request, context):
                yield response
        finally:
            self.watching[host] -= 1
            if not self.watching[host]:
                del self.watching[host]

    async def _watch(self, request: watch_pb2.WatchRequest, context: Context) -> AsyncIterator[watch_pb2.WatchResponse]:
        if request.omniscient and not self.referee.check_admin(context):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "the omniscient log needs the admin token")
        table = await self.referee.table_or_abort(request.table_id, context)
        if request.omniscient:
            if table.status is not TableStatus.FINISHED:
                await context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"table {table.table_id} is {table.status.value}: the omniscient log opens only once the match"
                    " has finished, never for a cancelled table",
                )
            for event in table.omniscient_messages():  # converted one by one as they are sent, not all at once
                yield watch_pb2.WatchResponse(event=event)
            if table.outcome is not None:
                yield watch_pb2.WatchResponse(outcome=table.outcome)
            return
        if table.status is TableStatus.FINISHED and table.outcome is not None:
            for event in table.public_messages():  # over: the senas that leaked may be shown
                yield watch_pb2.WatchResponse(event=event)
            yield watch_pb2.WatchResponse(outcome=table.outcome)
            return
        queue: asyncio.Queue[pb.Event | pb.Outcome | None] = asyncio.Queue()
        shown = table.live_count  # the events so far come from the log, the later ones through `queue`
        if table.status is TableStatus.CANCELLED:
            queue.put_nowait(None)
        else:
            table.watchers.add(queue)
        try:
            for event in table.live_messages(shown):  # live: no sena at all (rules §12.3 item 5)
                yield watch_pb2.WatchResponse(event=event)
            while (item := await queue.get()) is not None:
                if isinstance(item, pb.Outcome):
                    yield watch_pb2.WatchResponse(outcome=item)
                else:
                    yield watch_pb2.WatchResponse(event=item)
        finally:
            table.watchers.discard(queue)
        if table.status is TableStatus.CANCELLED:
            await context.abort(grpc.StatusCode.ABORTED, f"table {table.table_id} was cancelled: {table.cancel_reason}")


class TableAdminServicer(admin_pb2_grpc.TableAdminServiceServicer):
    """Create, cancel and inspect tables; every call needs `authorization: Bearer <admin token>`."""

    def __init__(self, referee: Referee) -> None:
        self.referee = referee

    async def _authorize(self, context: Context) -> None:
        if not self.referee.check_admin(context):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "a valid admin token is required (authorization)")

    async def CreateTable(
        self, request: admin_pb2.CreateTableRequest, context: Context
    ) -> admin_pb2.CreateTableResponse:
        await self._authorize(context)
        if len(request.seats) != 4:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"a table has 4 seats, got {len(request.seats)}")
        try:
            options = dict(request.rules)
            rules = wire.rules_from_map(options)
            overrides: dict[str, float] = {}
            if request.HasField("decision_timeout_s"):
                overrides["decision_timeout_s"] = request.decision_timeout_s
            if request.HasField("time_bank_s"):
                overrides["time_bank_s"] = request.time_bank_s
            if overrides:
                rules = rules.with_options(overrides)
        except RulesError as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        earlier = self.referee.created_for(request.external_id, request) if request.external_id else None
        if earlier is not None:
            table_id, same = earlier
            if not same:
                await context.abort(
                    grpc.StatusCode.ALREADY_EXISTS, f"external id {request.external_id!r} names another table"
                )
            kept = self.referee.tables.get(table_id)
            if kept is None:
                await context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"external id {request.external_id!r} named table {table_id}, which ended and is no longer kept",
                )
            table = kept
        else:
            join_timeout = request.join_timeout_s if request.HasField("join_timeout_s") else 30.0
            remote = frozenset(index for index, seat in enumerate(request.seats) if seat.remote)
            unknown = [request.seats[index].bot_name for index in remote]
            unknown = [name for name in unknown if not self.referee.lobby.is_registered(name)]
            if unknown:
                await context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"remote bot {unknown[0]!r} is not registered")
            table = self.referee.create_table(
                rules,
                request.seed,
                [seat.bot_name for seat in request.seats],
                join_timeout_s=join_timeout,
                remote_seats=remote,
            )
            if request.external_id:
                self.referee.remember(request.external_id, table.table_id, request)
        return admin_pb2.CreateTableResponse(
            table_id=table.table_id,
            seat_tokens=[
                "" if seat.remote else state.token for seat, state in zip(request.seats, table.seats, strict=True)
            ],
            rules=wire.rules_to_map(table.rules),
        )

    async def CancelTable(
        self, request: admin_pb2.CancelTableRequest, context: Context
    ) -> admin_pb2.CancelTableResponse:
        await self._authorize(context)
        table = await self.referee.table_or_abort(request.table_id, context)
        if table.status is TableStatus.FINISHED:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"table {table.table_id} has already finished")
        table.cancel(request.reason or "cancelled by the admin")
        return admin_pb2.CancelTableResponse(status=_table_status(table))

    async def GetTableStatus(
        self, request: admin_pb2.GetTableStatusRequest, context: Context
    ) -> admin_pb2.GetTableStatusResponse:
        await self._authorize(context)
        table = await self.referee.table_or_abort(request.table_id, context)
        return table_status_message(table)

    async def WaitTable(self, request: admin_pb2.WaitTableRequest, context: Context) -> admin_pb2.WaitTableResponse:
        await self._authorize(context)
        table = await self.referee.table_or_abort(request.table_id, context)
        if not 0 <= request.wait_s <= MAX_WAIT_S:  # NaN included
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"wait_s must be at least 0 and at most {MAX_WAIT_S:g}"
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(table.finished.wait(), request.wait_s)
        return admin_pb2.WaitTableResponse(table=table_status_message(table))

    async def ReportCrash(
        self, request: admin_pb2.ReportCrashRequest, context: Context
    ) -> admin_pb2.ReportCrashResponse:
        await self._authorize(context)
        table = await self.referee.table_or_abort(request.table_id, context)
        if request.seat > 3:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"there is no seat {request.seat}: seats are 0..3")
        table.report_crash(request.seat, request.detail or "the bot process exited")
        return admin_pb2.ReportCrashResponse()

    async def RegisterRemoteBot(
        self, request: admin_pb2.RegisterRemoteBotRequest, context: Context
    ) -> admin_pb2.RegisterRemoteBotResponse:
        await self._authorize(context)
        digest = request.token_sha256.lower()
        if not request.bot_name or not is_token_sha256(digest):
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "give bot_name and the 64-hex-digit SHA-256 of its token"
            )
        try:
            self.referee.lobby.register(request.bot_name, digest)
        except StateError as error:
            await context.abort(grpc.StatusCode.INTERNAL, f"registered until the referee restarts only: {error}")
        return admin_pb2.RegisterRemoteBotResponse()

    async def RevokeRemoteBot(
        self, request: admin_pb2.RevokeRemoteBotRequest, context: Context
    ) -> admin_pb2.RevokeRemoteBotResponse:
        await self._authorize(context)
        if not request.bot_name:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "give the bot_name to revoke")
        try:
            was_registered, closed = self.referee.lobby.revoke(request.bot_name)
        except StateError as error:
            await context.abort(grpc.StatusCode.INTERNAL, f"revoked, but a restart would restore it: {error}")
        return admin_pb2.RevokeRemoteBotResponse(was_registered=was_registered, sessions_closed=closed)

    async def GetTableReplay(
        self, request: admin_pb2.GetTableReplayRequest, context: Context
    ) -> admin_pb2.GetTableReplayResponse:
        await self._authorize(context)
        table = await self.referee.table_or_abort(request.table_id, context)
        if table.status is not TableStatus.FINISHED or table.match is None:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"table {table.table_id} is {table.status.value}: its replay opens once the match has finished",
            )
        return table_replay_message(table)

    async def Turns(
        self, requests: AsyncIterator[admin_pb2.TurnsRequest], context: Context
    ) -> AsyncIterator[admin_pb2.TurnsResponse]:
        await self._authorize(context)
        first = await anext(aiter(requests), None)
        if first is None:
            return
        table = await self.referee.table_or_abort(first.table_id, context)
        if table.status is not TableStatus.WAITING or table.turns is not None:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"table {table.table_id} is {table.status.value}{' and gated already' if table.turns else ''}:"
                " only a table that has not started can be gated",
            )
        turns = StreamedTurns(table)
        table.turns = turns
        turns(frozenset(range(4)))  # the first turn, at once: every seat runs until the match starts

        async def acknowledge() -> None:
            async for request in requests:
                turns.done(request.done)

        reader = asyncio.create_task(acknowledge())
        ended = asyncio.create_task(table.finished.wait())
        try:
            while True:
                message = asyncio.create_task(turns.outbox.get())
                await asyncio.wait((message, ended, reader), return_when=asyncio.FIRST_COMPLETED)
                if not message.done():
                    message.cancel()
                    while not turns.outbox.empty():  # the table ended: its last turn lets every seat run
                        yield turns.outbox.get_nowait()
                    break  # the table ended, or the caller went away
                yield message.result()
        finally:
            for task in (reader, ended):
                task.cancel()
            turns.close()


class StreamedTurns:
    """A table's `turns` for a caller over admin Turns: each change of the seats that may run is sent as a
    numbered turn, and the table is held until the caller acknowledges it (or TURN_ACK_LIMIT_S has passed)."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.outbox: asyncio.Queue[admin_pb2.TurnsResponse] = asyncio.Queue()
        self._turn = 0
        self._held: dict[int, asyncio.Future[None]] = {}
        self._timer: asyncio.TimerHandle | None = None

    def __call__(self, running: frozenset[int]) -> asyncio.Future[None]:
        self._turn += 1
        self.outbox.put_nowait(admin_pb2.TurnsResponse(turn=self._turn, running_seats=sorted(running)))
        held = self._held[self._turn] = asyncio.get_running_loop().create_future()
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(TURN_ACK_LIMIT_S, self._too_late, self._turn)
        return held

    def done(self, turn: int) -> None:
        """The caller let the seats of `turn` (and of every earlier one) run."""
        for number in [number for number in self._held if number <= turn]:
            future = self._held.pop(number)
            if not future.done():
                future.set_result(None)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._held:
            first = min(self._held)
            self._timer = asyncio.get_running_loop().call_later(TURN_ACK_LIMIT_S, self._too_late, first)

    def _too_late(self, turn: int) -> None:
        log.warning(
            "table %s: turn %d not acknowledged within %g s: ungated", self.table.table_id, turn, TURN_ACK_LIMIT_S
        )
        self._timer = None
        self.close()

    def close(self) -> None:
        """Ungate the table and let its held clocks run."""
        if self.table.turns is self:
            self.table.ungate()
        self.done(self._turn)


class _InProcessCall:
    """The context of an admin call made in this process (`InProcessAdmin`): the caller's metadata, and an abort
    that raises what the gRPC stub would have (`grpc.aio.AioRpcError`, with the servicer's code and message)."""

    def __init__(self, metadata: Sequence[tuple[str, str]]) -> None:
        self._metadata = tuple(metadata)

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    async def abort(self, code: grpc.StatusCode, details: str = "") -> NoReturn:
        raise grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


class InProcessAdmin:
    """The TableAdmin API of a referee in this process, called without a transport: each method is the
    servicer's own (`TableAdminServicer`: the same admin token, checks and messages) and takes what the gRPC
    stub's does, so a caller written for the stub runs on either. A league worker calls its embedded referee
    this way; no socket serves that referee's admin API.

    A call's `timeout` is not enforced: nothing stands between the caller and the servicer that could hang, and
    the only call that waits (WaitTable) is bounded by its own `wait_s`."""

    def __init__(self, referee: Referee) -> None:
        servicer = TableAdminServicer(referee)
        self.CreateTable = _in_process(servicer.CreateTable)
        self.CancelTable = _in_process(servicer.CancelTable)
        self.GetTableStatus = _in_process(servicer.GetTableStatus)
        self.WaitTable = _in_process(servicer.WaitTable)
        self.ReportCrash = _in_process(servicer.ReportCrash)
        self.RegisterRemoteBot = _in_process(servicer.RegisterRemoteBot)
        self.RevokeRemoteBot = _in_process(servicer.RevokeRemoteBot)
        self.GetTableReplay = _in_process(servicer.GetTableReplay)


_Request = TypeVar("_Request")
_Response = TypeVar("_Response")


def _in_process(
    method: Callable[[_Request, Any], Coroutine[Any, Any, _Response]],
) -> Callable[..., Coroutine[Any, Any, _Response]]:
    """A servicer method called as the gRPC stub's is: `method(request, metadata=..., timeout=...)`; whatever it
    raises reaches the caller as an `AioRpcError`, as over gRPC."""

    async def call(
        request: _Request, *, metadata: Sequence[tuple[str, str]] = (), timeout: float | None = None
    ) -> _Response:
        try:
            return await method(request, _InProcessCall(metadata))
        except grpc.aio.AioRpcError:
            raise
        except Exception as error:  # what grpc's server answers for an exception it did not expect
            log.exception("in-process admin call %s failed", type(request).__name__)
            details = f"Unexpected {type(error)}: {error}"
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.UNKNOWN, grpc.aio.Metadata(), grpc.aio.Metadata(), details
            ) from error

    return call


class LobbyServicer(lobby_pb2_grpc.LobbyServiceServicer):
    """Remote bots wait here for seats: hello with a bot token, then offers to accept or decline."""

    def __init__(self, referee: Referee) -> None:
        self.referee = referee
        self.calls: dict[str, int] = {}
        """Each bot's `Connect` calls in progress, its closed sessions still ending included (MAX_CALLS_PER_BOT)."""

    async def Connect(
        self, request_iterator: AsyncIterator[lobby_pb2.ConnectRequest], context: Context
    ) -> AsyncIterator[lobby_pb2.ConnectResponse]:
        try:
            async with asyncio.timeout(JOIN_WAIT_S):  # not wait_for: its task could swallow a stop's cancel
                first = await anext(request_iterator)
        except StopAsyncIteration:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the stream closed before sending LobbyHello")
        except TimeoutError:
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, f"no LobbyHello within {JOIN_WAIT_S:g} s")
        except MessageTooLarge as error:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(error))
        except Exception as error:  # bytes that are not a ConnectRequest
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unreadable first message: {type(error).__name__}")
        if first.WhichOneof("message") != "hello":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first lobby message must be LobbyHello")
        hello = first.hello
        if hello.protocol_version != PROTOCOL_VERSION:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"protocol version {hello.protocol_version} is not supported: this referee speaks {PROTOCOL_VERSION}",
            )
        name = self.referee.lobby.authenticate(hello.bot_token)
        if name is None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "unknown bot token")
        if not 1 <= hello.max_concurrent_matches <= 64:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "max_concurrent_matches must be 1..64")
        authenticated(request_iterator)
        held = self.calls.get(name, 0)
        if held >= MAX_CALLS_PER_BOT:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"bot {name!r} holds {held} lobby streams, the most it may: its closed sessions end once their client"
                " has read them to the end",
            )
        self.calls[name] = held + 1
        try:
            session = self._session(name, hello.max_concurrent_matches, request_iterator, context)
            async with contextlib.aclosing(session) as messages:
                async for message in messages:
                    yield message
        finally:
            self.calls[name] -= 1
            if not self.calls[name]:
                del self.calls[name]

    async def _session(
        self,
        name: str,
        capacity: int,
        request_iterator: AsyncIterator[lobby_pb2.ConnectRequest],
        context: Context,
    ) -> AsyncGenerator[lobby_pb2.ConnectResponse, None]:
        outbox: asyncio.Queue[lobby_pb2.ConnectResponse | None] = asyncio.Queue()
        session = LobbySession(name, capacity, outbox)
        outbox.put_nowait(
            lobby_pb2.ConnectResponse(welcome=lobby_pb2.LobbyWelcome(bot_name=name, protocol_version=PROTOCOL_VERSION))
        )
        self.referee.lobby.connect(session)
        reader = asyncio.create_task(self._read(session, request_iterator))
        try:
            while (message := await outbox.get()) is not None:
                yield message
        finally:
            reader.cancel()
            self.referee.lobby.disconnect(session)
        if session.revoked:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, f"the token of bot {name!r} was revoked")
        if session.replaced:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"bot {name!r} opened more than {MAX_SESSIONS_PER_BOT} lobby sessions: this, its oldest, is closed",
            )

    async def _read(self, session: LobbySession, requests: AsyncIterator[lobby_pb2.ConnectRequest]) -> None:
        limiter = RateLimiter(rate=20.0, burst=100.0)
        try:
            async for request in requests:
                if not limiter.allow():
                    break
                kind = request.WhichOneof("message")
                if kind == "accept":
                    reply = self.referee.lobby.accept(session, request.accept.assignment_id)
                    if reply is not None:
                        session.outbox.put_nowait(reply)
                elif kind == "decline":
                    self.referee.lobby.decline(session, request.decline.assignment_id)
                else:
                    break
        except asyncio.CancelledError:
            raise
        except Exception as error:  # an unreadable or oversized message ends the session
            log.info("lobby session of %s: unreadable stream: %r", session.bot_name, error)
        session.outbox.put_nowait(None)


def _table_status(table: Table) -> admin_pb2.TableStatus.ValueType:
    return admin_pb2.TableStatus.Value(f"TABLE_STATUS_{table.status.name}")


def table_status_message(table: Table) -> admin_pb2.GetTableStatusResponse:
    """A table's status as the admin API reports it."""
    response = admin_pb2.GetTableStatusResponse(
        table_id=table.table_id,
        status=_table_status(table),
        seats=[
            admin_pb2.SeatStatus(
                seat=seat,
                bot_name=state.name,
                joined=state.joined,
                connected=state.outbox is not None,
                joined_as=state.joined_as,
            )
            for seat, state in enumerate(table.seats)
        ],
        rules=wire.rules_to_map(table.rules),
        faults=table.faults(),
        incidents=table.incident_messages(),
    )
    if table.started_at is not None:
        response.started_after_s = table.started_at - table.created_at
    match = table.match
    if match is not None:
        response.hand_number = max(match.hand_number, 0)
        response.score_team_0, response.score_team_1 = match.score
        response.games_team_0, response.games_team_1 = match.games_won
        response.vacas_team_0, response.vacas_team_1 = match.vacas_won
        response.faults_team_0, response.faults_team_1 = match.faults
    if table.outcome is not None:
        response.outcome.CopyFrom(table.outcome)
    return response


def table_replay_message(table: Table) -> admin_pb2.GetTableReplayResponse:
    """A finished table's replay record, incidents and decision times as the admin API reports them."""
    assert table.match is not None
    return admin_pb2.GetTableReplayResponse(
        table_id=table.table_id,
        record_json=dumps_record(table.match),
        incidents=table.incident_messages(),
        decision_times=[
            admin_pb2.SeatDecisionTimes(seat=seat, seconds=state.decision_seconds)
            for seat, state in enumerate(table.seats)
        ],
    )
