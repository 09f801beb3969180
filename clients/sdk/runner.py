"""Play a bot over gRPC: one seat through `PlayService.Play`, or many matches through `LobbyService.Connect`.

The runner owns the wire; the bot sees only `BotView`s, engine events and the outcome, exactly as on the
local table. It answers every decision request with `Bot.decide`, asks again after a rejected action while the
decision is open, rejoins a dropped stream from the next event it expects, and turns the referee's error
statuses into a `RefereeError` that says what went wrong.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from clients.frames import FrameStream, StreamEnded
from clients.sdk.bot import Bot
from clients.sdk.errors import NoAction, RefereeError, SdkError
from clients.sdk.view import bot_view
from mus.v1 import lobby_pb2, play_pb2, types_pb2
from referee.engine.actions import Action
from referee.engine.events import Event, HandStarted
from referee.engine.outcome import MatchOutcome
from referee.engine.rules import Rules
from referee.wire import (
    WireError,
    action_to_proto,
    event_from_proto,
    outcome_from_proto,
    rules_from_proto,
    seat_view_from_proto,
)

if TYPE_CHECKING:  # grpc is imported where a seat is played over gRPC: over frames a bot starts without it
    import asyncio

    import grpc

    from mus.v1 import play_pb2_grpc

logger = logging.getLogger(__name__)

_M = TypeVar("_M")

PROTOCOL_VERSION = 1
"""The protocol version this SDK speaks (play.proto `Join.protocol_version`)."""

ENV_REFEREE = "MUS_REFEREE"
ENV_TOKEN = "MUS_TOKEN"
ENV_FRAMES = "MUS_FRAMES"
"""Where a launched seat may play over frames instead of gRPC (docs/protocol.md, "Frames"); set by a worker's own
referee, absent elsewhere."""

# A dropped connection, not a refusal: worth joining again (play.proto lists the refusals).
_TRANSIENT = frozenset({"UNAVAILABLE", "INTERNAL"})
_REJOIN_LATER = frozenset({"ALREADY_EXISTS", "RESOURCE_EXHAUSTED"})
"""Statuses of a refused rejoin that a later one may get past (docs/protocol.md "Reconnecting")."""


def _setting(value: str | None, variable: str, what: str) -> str:
    found = value if value is not None else os.environ.get(variable)
    if not found:
        raise SdkError(f"no {what}: pass it or set the environment variable {variable}")
    return found


RECONNECT_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 5000))
"""A channel that lost its referee tries again within 5 s, as the SDK's own retries do: with gRPC's default (up
to 120 s) a remote bot took half a minute to see a restarted referee (an operator's review, stop 35)."""


def _channel(address: str, credentials: grpc.ChannelCredentials | None) -> grpc.Channel:
    import grpc

    if credentials is None:
        return grpc.insecure_channel(address, options=RECONNECT_OPTIONS)
    return grpc.secure_channel(address, credentials, options=RECONNECT_OPTIONS)


class _Outbox(Generic[_M]):
    """The request side of a bidirectional stream: a queue that gRPC drains on its own thread."""

    def __init__(self) -> None:
        self._queue: queue.Queue[_M | None] = queue.Queue()

    def put(self, message: _M) -> None:
        self._queue.put(message)

    def close(self) -> None:
        """End the request stream (a half-close) once what was put before is sent."""
        self._queue.put(None)

    def __iter__(self) -> Iterator[_M]:
        while True:
            message = self._queue.get()
            if message is None:
                return
            yield message


class _AsyncOutbox:
    """The request side of a Play handler run in this process (`play_in_process`): an asyncio queue."""

    def __init__(self) -> None:
        import asyncio  # only here: an SDK bot's process never needs it, and it costs 30 ms to start

        self._queue: asyncio.Queue[play_pb2.PlayRequest | None] = asyncio.Queue()

    def put(self, message: play_pb2.PlayRequest) -> None:
        self._queue.put_nowait(message)

    def close(self) -> None:
        self._queue.put_nowait(None)

    async def requests(self) -> AsyncIterator[play_pb2.PlayRequest]:
        while (message := await self._queue.get()) is not None:
            yield message


class _Sends(Protocol):
    """Where a seat's requests go: a gRPC stream's `_Outbox`, a `FrameStream` or an `_AsyncOutbox`."""

    def put(self, message: play_pb2.PlayRequest) -> None: ...

    def close(self) -> None: ...


class _Seat:
    """One bot at one seat, across every stream it needs to finish the match."""

    def __init__(self, bot: Bot, token: str) -> None:
        self.bot = bot
        self.token = token
        self.next_seq = 0
        self.joins = 0
        self.seat: int | None = None
        self.rules: Rules | None = None
        self.outcome: MatchOutcome | None = None
        self._started_hand = -1
        self.hand_events: list[Event] = []
        """The events of the current hand, from its HandStarted: the views' `hand_events` (Join.omit_hand_events)."""
        self._open: play_pb2.DecisionRequest | None = None
        self.transport = "gRPC"
        """How the last stream was played: gRPC, or frames (docs/pool.md), as its log says."""
        self._answered: dict[int, types_pb2.Action] = {}

    def play_stream(self, stub: play_pb2_grpc.PlayServiceStub) -> MatchOutcome:
        """Join (or rejoin from `next_seq`) and play until the outcome; an error status is raised as
        `StreamEnded`, as over frames."""
        import grpc

        outbox: _Outbox[play_pb2.PlayRequest] = _Outbox()
        outbox.put(self._join())
        try:
            return self._play(stub.Play(iter(outbox)), outbox)
        except grpc.RpcError as error:
            code = error.code()
            raise StreamEnded(code.name if code is not None else "UNKNOWN", str(error.details())) from None

    def play_frames(self, address: str) -> MatchOutcome:
        """The same over frames (`clients.frames`)."""
        self.transport = "frames"
        with FrameStream(address) as stream:
            stream.put(self._join())
            return self._play(stream, stream)

    async def play_in_process(self, play: PlayHandler) -> MatchOutcome:
        """The same over a Play handler in this process: its messages, bytes or not, are handled as they come."""
        self.transport = "in-process"
        outbox = _AsyncOutbox()
        outbox.put(self._join())
        try:
            async for message in play(outbox.requests()):
                if isinstance(message, bytes):
                    message = play_pb2.PlayResponse.FromString(message)
                self._handle(message, outbox)
        finally:
            outbox.close()
        return self._outcome()

    def _join(self) -> play_pb2.PlayRequest:
        join = play_pb2.Join(
            seat_token=self.token,
            bot_name=self.bot.name,
            bot_version=self.bot.version,
            protocol_version=PROTOCOL_VERSION,
            next_seq=self.next_seq,
            batch_events=True,  # a step's events and decision in one message: a faster round trip
            omit_hand_events=True,  # the hand's events come once, as events: `hand_events` keeps them
        )
        return play_pb2.PlayRequest(join=join)

    def _play(self, responses: Iterable[play_pb2.PlayResponse], outbox: _Sends) -> MatchOutcome:
        try:
            for response in responses:
                self._handle(response, outbox)
        finally:
            outbox.close()
        return self._outcome()

    def _outcome(self) -> MatchOutcome:
        """The outcome, once the stream has ended: one that ended without it is the referee's failure."""
        if self.outcome is None:
            raise SdkError("the referee closed the stream before sending the outcome")
        return self.outcome

    def _handle(self, response: play_pb2.PlayResponse, outbox: _Sends) -> None:
        which = response.WhichOneof("message")
        if which == "joined":
            self._joined(response.joined)
        elif which == "event":
            self._event(response.event)
        elif which == "update":
            for event in response.update.events:
                self._event(event)
            if response.update.HasField("decision_request"):
                self._request(response.update.decision_request, outbox)
        elif which == "decision_request":
            self._request(response.decision_request, outbox)
        elif which == "action_rejected":
            self._rejected(response.action_rejected, outbox)
        elif which == "outcome":
            self.outcome = outcome_from_proto(response.outcome)
            _call_hook(self.bot.on_outcome, self.outcome)
        elif which == "pong":
            pass
        else:
            logger.warning("seat %s: ignoring a referee message this SDK does not know (%s)", self.seat, which)

    def _request(self, request: play_pb2.DecisionRequest, outbox: _Sends) -> None:
        self._open = request
        answer = self._answered.get(request.decision_id)
        if answer is None:  # a re-sent request after a rejoin keeps the answer already chosen
            answer = self._decide(request)
        self._answered = {request.decision_id: answer}
        outbox.put(play_pb2.PlayRequest(act=play_pb2.Act(decision_id=request.decision_id, action=answer)))

    def _joined(self, joined: play_pb2.Joined) -> None:
        if joined.protocol_version > PROTOCOL_VERSION:
            raise SdkError(f"the referee answered protocol version {joined.protocol_version}; this SDK speaks 1")
        self.joins += 1
        self.seat = joined.seat
        self.rules = rules_from_proto(joined.rules)
        logger.info(
            "seat %d of table %s: joined over %s (resumed=%s)",
            joined.seat,
            joined.table_id,
            self.transport,
            joined.resumed,
        )

    def _event(self, message: types_pb2.Event) -> None:
        if message.seq < self.next_seq:
            return  # already seen before the stream dropped
        self.next_seq = message.seq + 1
        if self.seat is None:
            raise SdkError("the referee sent an event before Joined")
        try:
            event = event_from_proto(message, self.seat)
        except WireError as error:
            logger.warning("seat %s: cannot read event %d: %s", self.seat, message.seq, error)
            return
        if isinstance(event.payload, HandStarted):
            self.hand_events = []
        self.hand_events.append(event)
        _call_hook(self.bot.on_event, event)

    def _decide(
        self, request: play_pb2.DecisionRequest, rejected: play_pb2.ActionRejected | None = None
    ) -> types_pb2.Action:
        """The bot's answer on the wire. A `decide` that raises answers with an unset action, which the referee
        charges as an illegal action, as the local table does (rules §13)."""
        if self.rules is None:
            raise SdkError("the referee asked for a decision before Joined")
        times = request if rejected is None else rejected
        legal = rejected.legal_actions if rejected is not None and rejected.legal_actions else None
        view = bot_view(
            seat_view_from_proto(request, self.rules, legal=legal, hand_events=self.hand_events),
            self.rules,
            decision_time_left_s=times.decision_time_left_ms / 1000,
            bank_time_left_s=times.bank_time_left_ms / 1000,
            rejection=rejected.reason if rejected is not None else None,
        )
        if view.hand_number != self._started_hand:
            self._started_hand = view.hand_number
            _call_hook(self.bot.on_hand_start, view)
        try:
            action = self.bot.decide(view)
            if not isinstance(action, Action):
                raise TypeError(f"decide returned {type(action).__name__}, not an Action")
            return action_to_proto(action)
        except NoAction:
            return types_pb2.Action()  # the bot has logged why
        except Exception:
            logger.warning("seat %s: decide failed; answering with no action (a fault)", self.seat, exc_info=True)
            return types_pb2.Action()

    def _rejected(self, rejected: play_pb2.ActionRejected, outbox: _Sends) -> None:
        code = play_pb2.RejectionCode.Name(rejected.code)
        logger.warning("seat %s: action rejected (%s): %s", self.seat, code, rejected.reason)
        request = self._open
        if not rejected.decision_open or request is None or request.decision_id != rejected.decision_id:
            return
        answer = self._decide(request, rejected)
        self._answered = {request.decision_id: answer}
        outbox.put(play_pb2.PlayRequest(act=play_pb2.Act(decision_id=request.decision_id, action=answer)))


PlayHandler = Callable[[AsyncIterator[play_pb2.PlayRequest]], AsyncIterator[play_pb2.PlayResponse | bytes]]
"""A Play stream served in this process: the requests in, the responses (or their bytes) out."""


async def play_in_process(bot: Bot, token: str, play: PlayHandler) -> MatchOutcome:
    """Play one seat on a referee that runs in this process, with no socket: the SDK's seat logic (joins, views,
    rejected actions) over the referee's own Play handler. For a program that hosts the referee and seats of
    its own beside the bots it runs as processes (`mus bot check`'s reference seats). An error status is the
    handler's exception, raised as it comes."""
    return await _Seat(bot, token).play_in_process(play)


def _call_hook(hook: Callable[[Any], None], argument: object) -> None:
    """A hook that raises is logged and ignored: hooks are advice, never a reason to lose the seat."""
    try:
        hook(argument)
    except Exception:
        logger.warning("%s raised", getattr(hook, "__name__", "a hook"), exc_info=True)


def run_bot(
    bot: Bot,
    address: str | None = None,
    token: str | None = None,
    *,
    grace_s: float = 10.0,
    credentials: grpc.ChannelCredentials | None = None,
    channel: grpc.Channel | None = None,
    frames: str | None = None,
) -> MatchOutcome:
    """Play one seat of one match with `bot` and return the outcome.

    `address` and `token` default to the environment variables MUS_REFEREE and MUS_TOKEN, and then `frames` to
    MUS_FRAMES: a seat the worker offers frames is played over them (less CPU on both sides). A dropped stream
    (UNAVAILABLE, INTERNAL) is joined again with `Join.next_seq`, with a growing pause, for up to `grace_s`
    seconds without a successful join, and so is a join refused RESOURCE_EXHAUSTED (or ALREADY_EXISTS on a
    rejoin); any other error status is raised as a `RefereeError`. `channel`: an
    open channel to `address` to play on (left open), instead of one opened for this seat. `frames`: the seat's
    frames address (a seat line's, docs/pool.md): the seat is played there, over frames, instead of over gRPC.
    """
    if address is None and frames is None and channel is None:
        frames = os.environ.get(ENV_FRAMES) or None
    target = _setting(address, ENV_REFEREE, "referee address")
    seat = _Seat(bot, _setting(token, ENV_TOKEN, "seat token"))
    if frames is not None:
        return _play_seat(seat, lambda: seat.play_frames(frames), frames, grace_s)
    from mus.v1 import play_pb2_grpc

    with contextlib.nullcontext(channel) if channel is not None else _channel(target, credentials) as channel:
        stub = play_pb2_grpc.PlayServiceStub(channel)
        return _play_seat(seat, lambda: seat.play_stream(stub), target, grace_s)


def _play_seat(seat: _Seat, play: Callable[[], MatchOutcome], target: str, grace_s: float) -> MatchOutcome:
    """`play` the seat, again after a dropped stream (see `run_bot`)."""
    pause, lost_since = 0.1, 0.0
    while True:
        joins = seat.joins
        try:
            return play()
        except StreamEnded as error:
            code, details = error.code, error.details
            # A rejoin may race the referee noticing that the old stream ended (play.proto ALREADY_EXISTS), or
            # come too soon after many others (RESOURCE_EXHAUSTED, refusing that join): both are waited out. So is
            # a first join refused RESOURCE_EXHAUSTED: a referee full of streams that never authenticate closes
            # the oldest to make room, and the next try gets in.
            refused = seat.joins == joins and (
                (seat.joins > 0 and code in _REJOIN_LATER) or code == "RESOURCE_EXHAUSTED"
            )
            if code not in _TRANSIENT and not refused:
                raise RefereeError(code, details, what=f"the referee at {target}") from None
            now = time.monotonic()
            if seat.joins > joins or not lost_since:  # the grace period runs from the last good join
                pause, lost_since = 0.1, now
            if now - lost_since > grace_s:
                raise SdkError(
                    f"lost the referee at {target} ({code}: {details}) and could not join again within {grace_s:g} s"
                ) from None
            logger.warning("seat %s: stream dropped (%s); joining again in %.1f s", seat.seat, code, pause)
            time.sleep(pause)
            pause = min(pause * 2, 1.0)  # the referee keeps a dropped seat for a few seconds only


@dataclass
class _Assignment:
    offer: lobby_pb2.MatchAssignment
    thread: threading.Thread | None = None
    result: list[MatchOutcome | BaseException] = field(default_factory=list)


UNKNOWN_TOKEN_RETRY_S = 10.0
"""How long a remote bot whose token the referee does not know yet waits before it asks again."""


def run_remote_bot(
    bot_factory: Callable[[], Bot],
    address: str | None = None,
    bot_token: str | None = None,
    max_concurrent_matches: int = 1,
    *,
    stop: threading.Event | None = None,
    credentials: grpc.ChannelCredentials | None = None,
) -> list[MatchOutcome | BaseException]:
    """Hold a lobby stream and play every confirmed assignment with a fresh bot on its own thread.

    Offers are accepted while fewer than `max_concurrent_matches` matches are open and declined otherwise
    (declining is never a fault). It returns when the referee ends the lobby stream or `stop` is set, after
    the matches in progress finish, with each match's outcome or the error that ended it. `address` and
    `bot_token` default to MUS_REFEREE and MUS_TOKEN.
    """
    if max_concurrent_matches < 1:
        raise SdkError("max_concurrent_matches must be at least 1")
    target = _setting(address, ENV_REFEREE, "referee address")
    token = _setting(bot_token, ENV_TOKEN, "bot token")
    import grpc

    from mus.v1 import lobby_pb2_grpc

    assignments: dict[str, _Assignment] = {}
    with _channel(target, credentials) as channel:
        stub = lobby_pb2_grpc.LobbyServiceStub(channel)
        pause = 0.1
        while stop is None or not stop.is_set():
            outbox: _Outbox[lobby_pb2.ConnectRequest] = _Outbox()
            outbox.put(
                lobby_pb2.ConnectRequest(
                    hello=lobby_pb2.LobbyHello(
                        bot_token=token,
                        max_concurrent_matches=max_concurrent_matches,
                        protocol_version=PROTOCOL_VERSION,
                    )
                )
            )
            responses = stub.Connect(iter(outbox))
            watcher = _cancel_on(stop, responses)
            try:
                for response in responses:
                    pause = 0.1
                    _lobby_message(response, assignments, outbox, bot_factory, target, max_concurrent_matches)
                break  # the referee ended the lobby stream
            except grpc.RpcError as error:
                code = error.code()
                if code is grpc.StatusCode.CANCELLED and stop is not None and stop.is_set():
                    break
                if code is grpc.StatusCode.UNAUTHENTICATED:
                    # The referee learns a remote bot's token when a league that needs it registers it, so a
                    # bot started first is unknown for a while: keep asking, slowly, and say why.
                    logger.warning(
                        "the referee does not know this bot token (yet); asking again in %g s", UNKNOWN_TOKEN_RETRY_S
                    )
                    if _stopped_within(stop, UNKNOWN_TOKEN_RETRY_S):
                        break
                    continue
                if code.name not in _TRANSIENT:
                    raise RefereeError(code.name, str(error.details()), what=f"the lobby at {target}") from None
                logger.warning("lobby stream dropped (%s); connecting again in %.1f s", code.name, pause)
                time.sleep(pause)
                pause = min(pause * 2, 5.0)
            finally:
                outbox.close()
                if watcher is not None:
                    watcher.set()
    results: list[MatchOutcome | BaseException] = []
    for assignment in assignments.values():
        if assignment.thread is not None:
            assignment.thread.join()
            results.extend(assignment.result)
    return results


def _stopped_within(stop: threading.Event | None, seconds: float) -> bool:
    """Wait `seconds`, or less if `stop` is set meanwhile; whether it was."""
    if stop is None:
        time.sleep(seconds)
        return False
    return stop.wait(seconds)


def _cancel_on(stop: threading.Event | None, call: grpc.RpcContext) -> threading.Event | None:
    """Cancel the lobby call when `stop` is set; returns an event that retires the watcher."""
    if stop is None:
        return None
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if stop.wait(0.1):
                call.cancel()
                return

    threading.Thread(target=watch, name="mus-lobby-stop", daemon=True).start()
    return done


def _lobby_message(
    response: lobby_pb2.ConnectResponse,
    assignments: dict[str, _Assignment],
    outbox: _Outbox[lobby_pb2.ConnectRequest],
    bot_factory: Callable[[], Bot],
    address: str,
    limit: int,
) -> None:
    which = response.WhichOneof("message")
    if which == "welcome":
        logger.info("lobby: welcome as %s", response.welcome.bot_name)
    elif which == "assignment":
        offer = response.assignment
        # A match is a table: both seats of the bot's team at one table count once (as the lobby counts).
        busy = {held.offer.table_id for held in assignments.values() if held.thread is None or held.thread.is_alive()}
        if offer.table_id not in busy and len(busy) >= limit:
            outbox.put(
                lobby_pb2.ConnectRequest(
                    decline=lobby_pb2.DeclineAssignment(assignment_id=offer.assignment_id, reason="at capacity")
                )
            )
            return
        assignments[offer.assignment_id] = _Assignment(offer)
        outbox.put(lobby_pb2.ConnectRequest(accept=lobby_pb2.AcceptAssignment(assignment_id=offer.assignment_id)))
    elif which == "confirmed":
        held = assignments.get(response.confirmed.assignment_id)
        if held is None or held.thread is not None:
            return
        held.thread = threading.Thread(
            target=_play_assignment,
            args=(held, bot_factory, address),
            name=f"mus-table-{held.offer.table_id}",
        )
        held.thread.start()
    elif which == "withdrawn":
        withdrawn = assignments.get(response.withdrawn.assignment_id)
        if withdrawn is not None and withdrawn.thread is None:
            del assignments[response.withdrawn.assignment_id]
        logger.info("lobby: offer %s withdrawn: %s", response.withdrawn.assignment_id, response.withdrawn.reason)


def _play_assignment(held: _Assignment, bot_factory: Callable[[], Bot], address: str) -> None:
    offer = held.offer
    try:
        outcome = run_bot(bot_factory(), offer.referee_address or address, offer.seat_token)
    except Exception as error:  # one match failing never stops the others
        logger.error("table %s: %s", offer.table_id, error)
        held.result.append(error)
    else:
        held.result.append(outcome)


ENV_SEATS = "MUS_SEATS"
"""`stdin`: this process plays seat after seat, each given as one JSON line on standard input (docs/protocol.md,
"Seats over standard input"): a league worker keeps it alive across matches."""


@dataclass(frozen=True)
class SeatOffer:
    """One seat handed to a persistent process: where its referee is, the seat's token, and where the seat may be
    played over frames instead of gRPC (docs/pool.md; None when the line names no such place)."""

    referee: str
    seat_token: str
    frames: str | None = None

    @classmethod
    def from_line(cls, line: str) -> SeatOffer:
        """Parse a seat line (`{"referee": ADDRESS, "seat_token": TOKEN, "frames": ADDRESS}`, "frames" optional;
        keys it does not know are ignored); `SdkError` if it is not one."""
        import json

        try:
            data = json.loads(line)
            frames = data.get("frames")
            return cls(str(data["referee"]), str(data["seat_token"]), str(frames) if frames else None)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise SdkError(f"not a seat line ({error}): {line.strip()[:200]!r}") from None


def run_seats(bot_factory: Callable[[], Bot], lines: Iterator[str] | None = None) -> list[MatchOutcome | BaseException]:
    """Play every seat given on `lines` (standard input by default), one after another, each with a fresh bot
    from `bot_factory`, until the input ends; each seat's outcome, or the error that ended it.

    The process, and whatever it keeps at module level (tables, caches, a model), lives across matches; the
    `Bot` instance does not: one instance plays one seat, as everywhere in the SDK. A seat that fails (the
    referee refused, a garbled line) is logged and the next one is played.
    """
    import sys

    results: list[MatchOutcome | BaseException] = []
    channels: dict[str, grpc.Channel] = {}  # a league worker's address stays the same: one channel, seat after seat
    try:
        for line in lines if lines is not None else sys.stdin:
            if not line.strip():
                continue
            try:
                offer = SeatOffer.from_line(line)
                if offer.frames is not None:  # the same stream without HTTP/2: less CPU per decision on both sides
                    outcome = run_bot(bot_factory(), offer.referee, offer.seat_token, frames=offer.frames)
                else:
                    if offer.referee not in channels:
                        for old in channels.values():
                            old.close()
                        channels = {offer.referee: _channel(offer.referee, None)}
                    channel = channels[offer.referee]
                    outcome = run_bot(bot_factory(), offer.referee, offer.seat_token, channel=channel)
            except SdkError as error:
                logger.error("%s", error)
                results.append(error)
            else:
                logger.info("match over: team %d won (%s)", outcome.winner, outcome.termination.value)
                results.append(outcome)
    finally:
        for channel in channels.values():
            channel.close()
    return results


def run_main(bot: Bot) -> int:
    """The body of a bot program's `main()`: play the seat named by MUS_REFEREE and MUS_TOKEN; or, with
    MUS_SEATS=stdin, every seat given on standard input, each with a fresh copy of `bot` as it was given.

    Logs to stderr; a referee error or a missing setting becomes one clear line and exit status 1.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if os.environ.get(ENV_SEATS) == "stdin":
        import copy

        pristine = copy.deepcopy(bot)
        run_seats(lambda: copy.deepcopy(pristine))
        return 0
    try:
        outcome = run_bot(bot)
    except SdkError as error:
        logger.error("%s", error)
        return 1
    logger.info("match over: team %d won (%s)", outcome.winner, outcome.termination.value)
    return 0
