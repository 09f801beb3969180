"""One table: a match on the engine, its four seats' streams, their clocks, faults and spectators.

A table is driven by one asyncio event loop and every method is synchronous, so a step of the match is never
interleaved with another: no locks, and one slow or hostile bot only ever waits on its own clock. The rules'
clocks are those of rules §13: a decision has `decision_timeout_s`, then draws on the seat's bank; a seña
round has `decision_timeout_s` only. The rules' faults (illegal action, timeout, limit) are the engine's; beside
them the table records incidents, what happened to a seat's connection or process (`IncidentCause`). The two are
kept apart and each is listed once, in order (types.proto `FaultCause`): a timeout is never also an incident.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import itertools
import json
import logging
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from mus.v1 import play_pb2
from mus.v1 import types_pb2 as pb
from referee import wire
from referee.causes import CAUSE_TO_PROTO, IncidentCause
from referee.engine import clocks
from referee.engine.errors import IllegalActionError, MalformedError
from referee.engine.events import Event, HandStarted, SenaDelivered
from referee.engine.legal import size_problem
from referee.engine.match import DecisionKind, Match, Step
from referee.engine.rules import IllegalActionPolicy, Rules
from referee.engine.views import SeatLog

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
EVENT_DELAY_S = 0.05
"""How long a batching seat that is not asked may wait for its events: they ride with its next decision when that
comes first, so a step costs one message (the asked seat's) instead of one per seat."""


MAX_TABLE_EVENTS = 100_000
"""The most engine events a table keeps. The longest of 20 random matches of 3 vacas of 3 games has under 900;
a flood past this cap forfeits the seat whose message crosses it (FAULT_CAUSE_LIMIT)."""

MAX_EXCUSES = 4
"""How many times a table's join deadline moves on for a remote bot busy with its other matches (`Table.excused`):
a table waits at most five join timeouts in all, so a bot that plays slowly holds the workers waiting on it that
long at most."""

MAX_RECORD_BYTES = 6 * 1024 * 1024
"""The most bytes of replay record (its steps and events as JSON, plus incidents and decision times) a table
may grow to before the seat whose message crosses it forfeits (FAULT_CAUSE_LIMIT). The worker fetches a
replay with a 16 MiB message limit (workers/matches.py REPLAY_MESSAGE_BYTES): staying well under it, with room
for what one message adds past the cap and the forfeit's own events, no replay a table produces can be too big
to fetch, so no seat can turn its own flood into a voided match. A legal match writes under 100 KiB."""

EVENT_JSON_FACTOR = 6
EVENT_JSON_SLACK = 256
"""An event's JSON in the record is at most EVENT_JSON_FACTOR times its wire bytes plus EVENT_JSON_SLACK (a
string's character escapes at worst 6 to 1, field names and zero values that the wire omits; the largest excess
over the factor in random matches with long fault reasons is under 80 bytes). The table adds this bound as it
publishes and JSON-encodes the events only when the bound could cross MAX_RECORD_BYTES: a legal match never
pays for encoding its events twice, and the cap is still checked on the exact bytes."""

MAX_INCIDENTS = 1_000
"""The most incidents a table records (a seat reconnecting to break the protocol again and again)."""
JOIN_BURST = 10
JOIN_RATE = 1.0
"""Joins of one seat that the table takes: bursts of `JOIN_BURST`, then `JOIN_RATE` a second. Each join resends
the seat what it missed (the whole match, from `next_seq` 0), so a seat joining in a loop would keep its referee's
core busy for every other table of the process; an honest seat joins once, and again after a drop."""


def reported_name(bot_name: str) -> str:
    """`Join.bot_name` as reports show it: printable characters only, at most 64, trimmed (a bot chooses it)."""
    return "".join(char for char in bot_name if char.isprintable())[:64].strip()


class RateLimiter:
    """A token bucket: bursts of `burst`, then `rate` a second (a stream's messages, a seat's joins)."""

    def __init__(self, rate: float, burst: float, now: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.capacity, self.tokens = rate, burst, burst
        self.now = now
        self.updated = now()

    def allow(self, cost: float = 1.0) -> bool:
        """Take `cost` tokens if there are that many now."""
        if not self.ready(cost):
            return False
        self.tokens -= cost
        return True

    def ready(self, cost: float = 1.0) -> bool:
        """Whether `allow(cost)` would allow it now, without taking anything."""
        now = self.now()
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        return self.tokens >= cost


class RateLimits:
    """A `RateLimiter` per key (a host, a bot), made on first use. A bucket that has filled up again is as good as
    a new one, so once `keep` keys are known those are forgotten: keys a client can invent (its addresses) do not
    pile up."""

    def __init__(self, rate: float, burst: float, keep: int) -> None:
        self.rate, self.burst, self.keep = rate, burst, keep
        self.buckets: dict[str, RateLimiter] = {}

    def __getitem__(self, key: str) -> RateLimiter:
        bucket = self.buckets.get(key)
        if bucket is None:
            if len(self.buckets) >= self.keep:
                for known, full in list(self.buckets.items()):
                    if full.ready(full.capacity):
                        del self.buckets[known]
            bucket = self.buckets[key] = RateLimiter(self.rate, self.burst)
        return bucket


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Where a table reads the time and arms its deadlines: the join deadline, decision deadlines and time banks
    (rules §13), reconnect grace periods. The event loop's by default (`LoopClock`); tests pass a fake clock that
    they advance instead of sleeping."""

    def now(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[..., object], *args: object) -> Timer: ...


@dataclass(frozen=True, slots=True)
class LoopClock:
    """The event loop's timers, and the monotonic clock: asyncio's loop reads the same clock, but uvloop's reads
    it to the millisecond, and only once per turn of the loop (`referee.service.loop`), and a seat's decision times
    are recorded as read here."""

    loop: asyncio.AbstractEventLoop

    def now(self) -> float:
        return time.monotonic()

    def call_later(self, delay: float, callback: Callable[..., object], *args: object) -> Timer:
        return self.loop.call_later(delay, callback, *args)


class TableStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"
    CANCELLED = "cancelled"


class TableError(Exception):
    """A request the table refuses; `code` is the gRPC status name the servicer maps it to."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _live(event: Event) -> bool:
    """Whether a live Watch shows the event: a public one, but no seña. A seña on a live stream would tell anyone
    watching, the sender's team included, that it leaked (rules §12.3 item 5)."""
    return event.to is None and not isinstance(event.payload, SenaDelivered)


def _json_bytes(entry: dict[str, object]) -> int:
    """The length of one line of a replay record's steps or events, as `dumps_record` writes it."""
    return len(json.dumps(entry, ensure_ascii=False, separators=(",", ":"))) + 1


@functools.lru_cache(maxsize=1 << 12)
def _step_json_bytes(step: Step) -> int:
    """`_json_bytes` of a step. Most steps of a match are the same few values (a seat's paso, mus, quiero), and
    encoding each one cost about a tenth of the referee's work per decision."""
    return _json_bytes(step.to_json())


@dataclass(slots=True)
class _Decision:
    """An open decision of one seat."""

    decision_id: int
    kind: DecisionKind
    asked_at: float
    deadline: float
    """When it times out: the seat's bank changes only when one of its decisions closes (`clocks.allowed_s`)."""


BACKLOG_CHUNK = 64
"""Events of a rejoin's resend converted at a time (`Backlog`)."""


@dataclass(frozen=True, slots=True)
class Backlog:
    """The events a (re)joining seat missed, its seqs `start` to `end` (excluded): converted `BACKLOG_CHUNK` at a
    time as its stream sends them (`Table.backlog_messages`), not all at once when it joins. A match may reach
    MAX_TABLE_EVENTS: a review's rejoins of an 8,000-event match held the referee's event loop, and every table's
    decisions, 300 ms and more each time (stop 34)."""

    seat: int
    start: int
    end: int
    batch: bool


Outbox = asyncio.Queue[play_pb2.PlayResponse | bytes | Backlog | None]
"""A seat's stream's outgoing messages: a PlayResponse, or one already serialized (the events and decision
requests, put together as wire bytes), or the events a rejoin missed (`Backlog`, which the stream expands with
`Table.backlog_messages`); None ends the stream. The Play method's serializer takes the first two
(`servicer.serialize_response`)."""


@dataclass(slots=True)
class _Seat:
    """A seat's connection state, clock and records."""

    name: str
    token: str
    bank: float
    joins: RateLimiter
    """The seat's joins (`JOIN_BURST`), on its table's clock."""
    outbox: Outbox | None = None
    joined: bool = False
    joined_as: str = ""
    """`Join.bot_name` of the seat's latest stream (trimmed, printable, at most 64 characters): for reports."""
    gone: bool = False
    """The seat will not answer any more (crashed, absent, or disconnected past the grace period): its
    decisions time out at once."""
    grace: Timer | None = None
    join_limit_met: bool = False
    """A join was refused by `joins`: recorded once as an incident, the later refusals are not."""
    last_decision_id: int = 0
    asked: set[int] = field(default_factory=set)
    """Every decision id issued to this seat: an Act with any other id is NOT_ASKED."""
    decision_seconds: list[float] = field(default_factory=list)
    batch: bool = False
    """The seat asked for Update messages (Join.batch_events): a step's events and decision in one message."""
    omit_hand_events: bool = False
    """The seat keeps the hand's events itself (Join.omit_hand_events): its views carry none."""
    grace_deferred: bool = False
    """Its stream ended while it could not run (`Table.turns`): its reconnect grace starts when it is next asked."""
    pending_events: list[bytes] = field(default_factory=list)
    """Events for the next Update, as its wire entries (`wire.stream_entry`)."""
    pending_update: bytes | None = None
    """The seat's new decision request, as wire bytes (`wire.decision_request_bytes`); it leaves with the pending
    events in one Update at the flush."""


@dataclass(frozen=True, slots=True)
class Incident:
    """Something that happened to a seat's connection or process; not a fault (rules §13)."""

    seat: int
    cause: IncidentCause
    detail: str


class Table:
    """A match and everything the referee needs to run it over streams."""

    def __init__(
        self,
        table_id: str,
        rules: Rules,
        seed: int,
        bot_names: list[str],
        *,
        join_timeout_s: float = 30.0,
        reconnect_grace_s: float = 5.0,
        clock: Clock | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        on_finish: Callable[[Table], None] | None = None,
    ) -> None:
        self.table_id = table_id
        self.rules = rules
        self.seed = seed
        self.loop = loop or asyncio.get_running_loop()
        self.clock = clock or LoopClock(self.loop)
        self.reconnect_grace_s = reconnect_grace_s
        self.bot_names = tuple(bot_names)
        """The bots' names by seat, as `MatchStarted.bot_names` tells every seat."""
        self.seats = [
            _Seat(
                name, secrets.token_urlsafe(24), rules.time_bank_s, RateLimiter(JOIN_RATE, JOIN_BURST, self.clock.now)
            )
            for name in bot_names
        ]
        self.status = TableStatus.WAITING
        self.cancel_reason = ""
        self.match: Match | None = None
        self.views: SeatLog | None = None
        """What each seat has been shown: its views are built from it (the engine's, as the local table's)."""
        self._view_bytes = wire.SeatViewBytes()
        """Serializes a seat's view for its decision request, from the match (the fields `SeatLog.view` reads)."""
        self._hand_view: list[list[bytes]] = [[], [], [], []]
        """Per seat that wants them in its views (not `omit_hand_events`), what the events of the current hand add
        to its SeatView, as wire bytes (`wire.view_entries`). The match's log is the only copy of the events: a
        seat's stream, the spectators' and the replay are converted from it when asked (`SeatLog`)."""
        self._live_seq = 0
        """How many public events a live Watch has been shown: the seq of the next one (`live_messages`)."""
        self.watchers: set[asyncio.Queue[pb.Event | pb.Outcome | None]] = set()
        self.incidents: list[Incident] = []
        self.decisions: dict[int, _Decision] = {}
        self._next_decision_id = 1
        self._published = 0
        self._timer: Timer | None = None
        self._timer_at = 0.0
        """The clock time `_timer` fires at."""
        self._event_timer: asyncio.TimerHandle | None = None
        self._on_finish = on_finish
        self.turns: Callable[[frozenset[int]], asyncio.Future[None] | None] | None = None
        """Set where the seats' processes can be stopped (a league worker's hosted seats, `workers.launcher.
        TurnGate`): told which seats may run whenever that changes, those with a decision open while the match
        runs and all four once it has ended. A gated table never asks both partners at once: in a simultaneous
        step the second is asked when the first has answered, so partners never run at the same time. Where the
        seats may run only later (a seat that is to stop is not yet frozen), `turns` answers a future, and the
        table is held until it is done: no decision times out, and each open decision's clock is set back by the
        time it was held (`_released`)."""
        self._running = frozenset(range(4))
        self._held: asyncio.Future[None] | None = None
        self._held_since = 0.0
        self._starting = False
        """All seats joined: the match begins once a gated table's seats are stopped (`_start`)."""
        self.finished = asyncio.Event()
        self.outcome: pb.Outcome | None = None
        self.created_at = self.clock.now()
        self.started_at: float | None = None
        self._record_known = 0
        """Bytes of replay record counted exactly: the steps, the events up to `_events_measured`, the incidents
        and the decision times (`MAX_RECORD_BYTES`)."""
        self._record_bound = 0
        """An upper bound on the JSON of the events published past `_events_measured` (EVENT_JSON_FACTOR)."""
        self._flooded = [0, 0, 0, 0]
        """Per seat, how much the record (known and bound) grew with its flagged messages and its incidents: who is
        charged when a cap is crossed (`_check_limits`). A legal match's whole record is under 100 KiB."""
        self._record_charged = 0
        """The record's known and bound bytes after the last message `_check_limits` saw."""
        self._events_measured = 0
        self._steps_counted = 0
        self.join_timeout_s = join_timeout_s
        self.excused: Callable[[int], bool] | None = None
        """Whether a seat missing at the join deadline is excused: its remote bot is online but busy playing its
        other matches (`Lobby.busy`). The deadline then moves on by `join_timeout_s`, with nothing recorded, at most
        MAX_EXCUSES times."""
        self._excuses = 0
        self._join_timer = self.clock.call_later(join_timeout_s, self._join_timeout)

    # ------------------------------------------------------------------ seats and streams

    def attach(
        self,
        seat: int,
        outbox: Outbox,
        next_seq: int = 0,
        *,
        batch: bool = False,
        omit_hand_events: bool = False,
        bot_name: str = "",
    ) -> None:
        """A seat's stream joined (or rejoined): send Joined, the events it missed, and its open decision.
        `bot_name` is the name the bot gave in its Join (`joined_as`)."""
        state = self.seats[seat]
        refused = self.join_refusal(seat)
        if refused is not None:
            raise refused
        if not state.joins.allow():
            detail = f"joined too often: {JOIN_BURST} joins at once, then {JOIN_RATE:g} a second"
            if not state.join_limit_met:
                state.join_limit_met = True
                self.record_incident(seat, IncidentCause.PROTOCOL_ERROR, detail)
            raise TableError("RESOURCE_EXHAUSTED", f"seat {seat} {detail}: wait, then join again")
        resumed = state.joined
        state.outbox = outbox
        state.joined = True
        state.joined_as = reported_name(bot_name) or state.joined_as
        state.batch = batch
        state.omit_hand_events = omit_hand_events
        state.pending_events, state.pending_update = [], None
        state.grace_deferred = False
        if state.grace is not None:
            state.grace.cancel()
            state.grace = None
        outbox.put_nowait(
            play_pb2.PlayResponse(
                joined=play_pb2.Joined(
                    seat=seat,
                    table_id=self.table_id,
                    rules=wire.rules_to_map(self.rules),
                    protocol_version=PROTOCOL_VERSION,
                    resumed=resumed,
                )
            )
        )
        if self.views is not None and next_seq < (seen := self.views.seen(seat)):
            outbox.put_nowait(Backlog(seat, next_seq, seen, batch))  # before what the table sends from now on
        if (
            self.views is not None and not omit_hand_events
        ):  # its views carry the hand's events, whatever it asked before
            self._hand_view[seat] = [self._view_entry(event, seat) for event in self.views.hand_events(seat)]
        if not self._maybe_start():
            decision = self.decisions.get(seat)
            if decision is not None:
                self._send_decision(seat, decision)
        self._flush(everyone=True)  # a (re)joining seat gets what it missed at once

    def join_refusal(self, seat: int) -> TableError | None:
        """Why a Join for `seat` is refused whoever sends it and whatever it asks (`attach` then raises it), or
        None: the servicer asks before it charges the bot for the events the Join would have resent."""
        if self.status is TableStatus.CANCELLED:
            return TableError("FAILED_PRECONDITION", f"table {self.table_id} was cancelled: {self.cancel_reason}")
        if self.status is TableStatus.FINISHED:
            return TableError("FAILED_PRECONDITION", f"table {self.table_id} has finished")
        if self.seats[seat].outbox is not None:
            return TableError("ALREADY_EXISTS", f"seat {seat} of table {self.table_id} already has a live stream")
        if self.seats[seat].gone and self.status is TableStatus.RUNNING:
            return TableError("FAILED_PRECONDITION", f"seat {seat} was dropped: the reconnect grace period is over")
        return None

    def _send_event(self, state: _Seat, data: bytes) -> None:
        """`data` is the event's wire bytes: a batching seat's Update is parsed from them."""
        self._send_entry(state, wire.stream_entry(data, batch=state.batch))

    def _send_entry(self, state: _Seat, entry: bytes) -> None:
        """`entry` is an event framed for the seat's stream (`wire.stream_entry`)."""
        if state.outbox is None:
            return
        if state.batch:
            state.pending_events.append(entry)
        else:
            state.outbox.put_nowait(entry)

    def _view_entry(self, event: Event, seat: int) -> bytes:
        """What one event of the hand adds to `seat`'s SeatView, as wire bytes (numbered as the seat saw it)."""
        return wire.view_entries(event, self._message(event, seat).SerializeToString(), seat)

    def _message(self, event: Event, recipient: int | None) -> pb.Event:
        """An event as `recipient` (None: a spectator) saw it, numbered in its stream (`Event.seen_by`)."""
        return wire.event_to_proto(event, event.seq, recipient, bot_names=self.bot_names)

    def _flush(self, *, everyone: bool = False) -> None:
        """Send batching seats their pending events and decision as one Update message each.

        A seat with a new decision gets its Update at once. One that is only watching gets its events with its
        next decision or after EVENT_DELAY_S, whichever comes first (`everyone` sends them now).
        """
        waiting = False
        for state in self.seats:
            if not state.batch or (not state.pending_events and state.pending_update is None):
                continue
            if state.pending_update is None and not everyone and state.outbox is not None:
                waiting = True
                continue
            if state.outbox is not None:
                if state.pending_update is not None:
                    state.pending_events.append(wire.update_decision_entry(state.pending_update))
                state.outbox.put_nowait(wire.update_response(b"".join(state.pending_events)))
            state.pending_events, state.pending_update = [], None
        if everyone and self._event_timer is not None:
            self._event_timer.cancel()
            self._event_timer = None
        elif waiting and self._event_timer is None:
            self._event_timer = self.loop.call_later(EVENT_DELAY_S, self._deliver_events)

    def _deliver_events(self) -> None:
        self._event_timer = None
        self._flush(everyone=True)

    def detach(self, seat: int, outbox: Outbox) -> None:
        """A seat's stream ended. A running match gives it the grace period to rejoin."""
        state = self.seats[seat]
        if state.outbox is not outbox:
            return
        state.outbox = None
        if self.status is not TableStatus.RUNNING or state.gone:
            return  # before the start only the join deadline counts (FAULT_CAUSE_DISCONNECT: "while running")
        state.grace = self.clock.call_later(self.reconnect_grace_s, self._grace_over, seat)

    def _grace_over(self, seat: int) -> None:
        state = self.seats[seat]
        state.grace = None
        if state.outbox is not None or self.status not in (TableStatus.RUNNING, TableStatus.WAITING):
            return
        if seat not in self._running:  # it cannot rejoin while it is stopped: its grace starts when it is asked
            state.grace_deferred = True
            return
        self.record_incident(seat, IncidentCause.DISCONNECT, f"no stream for {self.reconnect_grace_s:g} s")
        self._drop(seat)

    def report_crash(self, seat: int, detail: str) -> None:
        """The launcher saw the seat's process exit: it will not answer again."""
        if self.status in (TableStatus.FINISHED, TableStatus.CANCELLED) or self.seats[seat].gone:
            return
        self.record_incident(seat, IncidentCause.CRASH, detail)
        self._drop(seat)

    def protocol_error(self, seat: int, detail: str) -> None:
        """The seat's stream sent something the protocol does not allow; the stream is closed after this."""
        if self.status in (TableStatus.FINISHED, TableStatus.CANCELLED):
            return
        self.record_incident(seat, IncidentCause.PROTOCOL_ERROR, detail)
        self._check_limits(seat, flagged=True)

    def record_incident(self, seat: int, cause: IncidentCause, detail: str) -> None:
        log.info("table %s seat %d: %s (%s)", self.table_id, seat, cause.value, detail)
        if len(self.incidents) >= MAX_INCIDENTS:
            return  # counted as over the cap by `_check_limits`; nothing more is kept
        self.incidents.append(Incident(seat, cause, detail))
        added = len(detail.encode()) + 32
        self._record_known += added
        self._flooded[seat] += added  # charged to the seat it is about, whoever's message comes next
        self._record_charged += added

    def act_problem(self, message: pb.Action) -> str | None:
        """Why an Act's action breaks the protocol before any rule is asked (more señas than a window takes, more
        cards than a hand holds), or None. What one message can cost the referee is bounded by this."""
        return size_problem(len(message.senas), len(message.cards), self.rules)

    @property
    def record_bytes(self) -> int:
        """What the table's replay record has grown to, counted exactly (`MAX_RECORD_BYTES`)."""
        self._count_steps()
        self._measure_events()
        return self._record_known

    def _count_steps(self) -> None:
        match = self.match
        if match is not None:
            for step in match.log[self._steps_counted :]:
                self._record_known += _step_json_bytes(step)
            self._steps_counted = len(match.log)

    def _measure_events(self) -> None:
        """Count the JSON of the events not counted yet exactly, in place of their bound."""
        match = self.match
        if match is not None:
            for event in match.events[self._events_measured :]:
                self._record_known += _json_bytes(event.to_json())
            self._events_measured = len(match.events)
        self._record_bound = 0

    def _over_limit(self) -> str | None:
        match = self.match
        if match is not None:
            self._count_steps()
            if len(match.events) > MAX_TABLE_EVENTS:
                return f"the match record holds {len(match.events)} events: the cap is {MAX_TABLE_EVENTS}"
        if self._record_known + self._record_bound > MAX_RECORD_BYTES:
            self._measure_events()  # the bound could cross the cap: count exactly
        if self._record_known > MAX_RECORD_BYTES:
            return f"the match record has grown to {self._record_known} bytes: the cap is {MAX_RECORD_BYTES}"
        if len(self.incidents) >= MAX_INCIDENTS:
            return f"the table recorded {len(self.incidents)} incidents: the cap is {MAX_INCIDENTS}"
        return None

    def _check_limits(self, seat: int, *, flagged: bool) -> None:
        """After a message of `seat`: when the table outgrows a cap, the seat whose `flagged` messages (with
        rejected señas, illegal, or a protocol error) and incidents made its record grow the most forfeits the
        match (FAULT_CAUSE_LIMIT); where there are none, the seat whose message crossed it. Not simply that seat: a
        flooder could bring the record to the brink and leave an honest seat's next legal action to cross it."""
        if self.status is not TableStatus.RUNNING or self.match is None or self.match.is_over:
            return
        reason = self._over_limit()
        total = self._record_known + self._record_bound
        if flagged:
            self._flooded[seat] += max(total - self._record_charged, 0)
        self._record_charged = total
        if reason is None:
            return
        culprit = max(range(4), key=lambda other: (self._flooded[other], other == seat))
        if self._flooded[culprit]:
            reason = f"{reason}; seat {culprit}'s flagged messages grew it the most ({self._flooded[culprit]} bytes)"
        log.info("table %s seat %d: forfeits for a limit (%s)", self.table_id, culprit, reason)
        self.match.forfeit_for_limit(culprit, reason)
        self._sync()

    def _drop(self, seat: int) -> None:
        state = self.seats[seat]
        state.gone = True
        if state.grace is not None:  # one failure, one incident: a crash is not also a disconnect
            state.grace.cancel()
            state.grace = None
        if self.status is TableStatus.RUNNING:
            self._sync()
        else:
            self._maybe_start()

    def _maybe_start(self) -> bool:
        """Start once every seat is at the table or known never to come (crashed before joining)."""
        if self.status is not TableStatus.WAITING or self._starting:
            return False
        if not all(state.outbox is not None or state.gone for state in self.seats):
            return False
        self._start()
        return True

    def _join_timeout(self) -> None:
        """Seats that never joined are absent: the match starts and their decisions time out at once. Unless one
        is excused (`excused`): a remote bot busy with its other matches is not absent, and the table waits on
        (an operator's review, stop 35: two workers began two matches of a bot that plays one at a time, and the
        second recorded it absent while it played the first)."""
        if self.status is not TableStatus.WAITING or self._starting:
            return
        missing = [seat for seat, state in enumerate(self.seats) if state.outbox is None and not state.gone]
        excused = self.excused
        if excused is not None and self._excuses < MAX_EXCUSES and any(excused(seat) for seat in missing):
            self._excuses += 1
            self._join_timer = self.clock.call_later(self.join_timeout_s, self._join_timeout)
            return
        for seat in missing:
            self.record_incident(seat, IncidentCause.ABSENT, "not at the table at the join deadline")
            self.seats[seat].gone = True
        self._start()

    # ------------------------------------------------------------------ the match

    def _start(self) -> None:
        """Deal, once a gated table's seats are all stopped: none of them runs with its cards until asked."""
        self._join_timer.cancel()
        self._starting = True
        self._gate(frozenset())
        if self._held is not None:
            self._held.add_done_callback(self._begin)
        else:
            self._begin()

    def _begin(self, _: object = None) -> None:
        if self.status is not TableStatus.WAITING:
            return  # cancelled while its seats were being stopped
        self.status = TableStatus.RUNNING
        self.started_at = self.clock.now()
        self.match = Match(self.rules, self.seed)
        self.views = SeatLog(self.match)
        self._sync()

    def _publish(self) -> None:
        """Route the match's new events to the seats and live spectators, each converted and serialized once.

        Each seat gets an event with its own seq (`SeatLog`), framed once per seq however many seats share it;
        only a seña's `leaked` flag depends on the recipient, so those are framed per recipient. Nothing is
        copied: the match's log stays the one copy."""
        views = self.views
        assert views is not None
        seats, hand_view, bot_names = self.seats, self._hand_view, self.bot_names
        for event, seqs in views.update():
            per_recipient = isinstance(event.payload, SenaDelivered)
            if isinstance(event.payload, HandStarted):
                hand_view[:] = [], [], [], []
            base_data = wire.seen_event_bytes(event, None, bot_names)
            framed: dict[tuple[int, bool], bytes] = {}  # the stream entry, by seq and stream kind
            viewed: dict[int, bytes] = {}  # the view entry, by seq: made only for seats that keep views
            for seat, seq in enumerate(seqs):
                if seq < 0:
                    continue
                state = seats[seat]
                if per_recipient:
                    data = wire.event_bytes(wire.seen_event_bytes(event, seat, bot_names), seq)
                    entry = wire.stream_entry(data, batch=state.batch)
                    if not state.omit_hand_events:
                        hand_view[seat].append(wire.view_entries(event, data, seat))
                else:
                    shared = framed.get((seq, state.batch))
                    if shared is None:
                        data = wire.event_bytes(base_data, seq)
                        shared = framed[seq, state.batch] = wire.stream_entry(data, batch=state.batch)
                    entry = shared
                    if not state.omit_hand_events:
                        view_entry = viewed.get(seq)
                        if view_entry is None:
                            view_entry = viewed[seq] = wire.view_entries(event, wire.event_bytes(base_data, seq), seat)
                        hand_view[seat].append(view_entry)
                self._send_entry(state, entry)
            if _live(event):
                if self.watchers:
                    live = pb.Event.FromString(wire.event_bytes(base_data, self._live_seq))
                    for watcher in self.watchers:
                        watcher.put_nowait(live)
                self._live_seq += 1
            self._record_bound += EVENT_JSON_FACTOR * len(base_data) + EVENT_JSON_SLACK

    def _sync(self) -> None:
        """After any step: publish events, close and open decisions, time out dropped seats, re-arm the clock."""
        match = self.match
        assert match is not None
        while True:
            self._publish()
            if match.is_over:
                self._finish()
                return
            awaited = match.awaited()
            for seat in list(self.decisions):
                if seat not in awaited:
                    del self.decisions[seat]
            dropped = next((seat for seat in awaited if self.seats[seat].gone), None)
            if dropped is not None:
                self.decisions.pop(dropped, None)
                match.apply_timeout(dropped)
                continue
            for seat in awaited:
                if seat not in self.decisions and not (self.turns is not None and (seat ^ 2) in self.decisions):
                    self._open_decision(seat)
            break
        if self.turns is not None:
            self._gate(frozenset(self.decisions))
        self._arm_timer()
        self._flush()

    def _gate(self, running: frozenset[int]) -> None:
        """Tell `turns` which seats may run now, when that has changed."""
        if self.turns is not None and running != self._running:
            self._running = running
            held = self.turns(running)
            if held is not None and held is not self._held:
                if self._held is None:
                    self._held_since = self.clock.now()
                self._held = held
                held.add_done_callback(self._released)

    def ungate(self) -> None:
        """Nothing stops this table's seats any more (`turns`' caller went away, or answers too late): every seat
        may run, and the reconnect grace of each whose stream ended while it was stopped starts now. A review
        killed the worker of a remote bot's match: the table was ungated but took the worker's seats, gone with
        it, for stopped still, so their grace never ran; their clocks ran out one decision at a time, 170 s with no
        incident, while the remote bot was held busy (stop 39)."""
        self.turns = None
        self._running = frozenset(range(4))
        for seat, state in enumerate(self.seats):
            if state.grace_deferred:
                state.grace_deferred = False
                state.grace = self.clock.call_later(self.reconnect_grace_s, self._grace_over, seat)

    def _released(self, held: asyncio.Future[None]) -> None:
        """The held seats run: give each open decision back the time it was held, and re-arm the clock."""
        if held is not self._held:
            return
        self._held = None
        if self.status is not TableStatus.RUNNING:
            return
        now = self.clock.now()
        for decision in self.decisions.values():
            delay = now - max(self._held_since, decision.asked_at)
            decision.asked_at += delay
            decision.deadline += delay
        self._arm_timer()

    def _open_decision(self, seat: int) -> None:
        match = self.match
        assert match is not None
        kind = match.decision_kind(seat)
        assert kind is not None
        now = self.clock.now()
        decision = _Decision(
            self._next_decision_id, kind, now, now + clocks.allowed_s(kind, self.seats[seat].bank, self.rules)
        )
        self._next_decision_id += 1
        state = self.seats[seat]
        state.last_decision_id = decision.decision_id
        state.asked.add(decision.decision_id)
        self.decisions[seat] = decision
        if state.grace_deferred:
            state.grace_deferred = False
            state.grace = self.clock.call_later(self.reconnect_grace_s, self._grace_over, seat)
        self._send_decision(seat, decision)

    def _time_left(self, seat: int, decision: _Decision) -> tuple[float, float]:
        """(decision time left, bank left) in seconds for an open decision."""
        elapsed = self.clock.now() - decision.asked_at
        return clocks.time_left(decision.kind, elapsed, self.seats[seat].bank, self.rules)

    def _send_decision(self, seat: int, decision: _Decision) -> None:
        state = self.seats[seat]
        outbox = state.outbox
        if outbox is None:
            return
        match = self.match
        assert match is not None  # the events are routed (`_publish`) before any decision is sent
        left, bank = self._time_left(seat, decision)
        header = play_pb2.DecisionRequest(
            decision_id=decision.decision_id,
            kind=wire.decision_to_proto(decision.kind),
            decision_time_left_ms=int(left * 1000),
            bank_time_left_ms=int(bank * 1000),
        )
        # The request is put together as wire bytes: the view, the hand's events and the legal entries are
        # serialized once, never copied into messages that gRPC would serialize again.
        view_bytes = self._view_bytes(match, seat)
        if not state.omit_hand_events:
            view_bytes += b"".join(self._hand_view[seat])
        request = wire.decision_request_bytes(header, view_bytes, wire.request_legal_bytes(match.legal(seat)))
        if state.batch:
            state.pending_update = request
        else:
            outbox.put_nowait(wire.decision_response(request))

    def _arm_timer(self) -> None:
        """Make sure the clock wakes the table by the earliest deadline of its open decisions.

        A timer already set for that time or earlier is kept: it wakes the table early at worst, and
        `_on_timer` then sets the next one. So an instant bot's decision costs no timer of its own."""
        if not self.decisions:
            return
        deadline = min(decision.deadline for decision in self.decisions.values())
        if self._timer is not None and self._timer_at <= deadline:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        self._timer = self.clock.call_later(max(deadline - self.clock.now(), 0.0), self._on_timer)

    def _on_timer(self) -> None:
        """Time out every decision past its deadline, in speaking order (rules §13)."""
        self._timer = None
        match = self.match
        if match is None or self.status is not TableStatus.RUNNING:
            return
        if self._held is not None:
            return  # no seat can answer while the table is held: `_released` re-arms the clock
        now = self.clock.now()
        due = [
            seat
            for seat in match.awaited()
            if (decision := self.decisions.get(seat)) is not None and now >= decision.deadline
        ]
        if not due:  # woken before the earliest deadline (`_arm_timer` keeps an earlier timer)
            self._arm_timer()
            return
        for seat in due:
            self._timeout(seat, self.decisions[seat])
            if match.is_over:
                break
        self._sync()

    def _timeout(self, seat: int, decision: _Decision) -> None:
        match = self.match
        assert match is not None
        state = self.seats[seat]
        state.bank = clocks.bank_after(decision.kind, self.clock.now() - decision.asked_at, state.bank, self.rules)
        del self.decisions[seat]  # the engine charges the timeout (rules §13); it is no incident as well
        match.apply_timeout(seat)

    def asks(self, seat: int, decision_id: int) -> bool:
        """Whether `decision_id` is the seat's open decision: an Act that answers it is one the match asked for."""
        decision = self.decisions.get(seat)
        return decision is not None and decision.decision_id == decision_id

    def act(self, seat: int, decision_id: int, message: pb.Action) -> play_pb2.ActionRejected | None:
        """A seat's answer. Returns None when applied, else the rejection to send back (rules §13)."""
        match = self.match
        if match is None or self.status is not TableStatus.RUNNING:
            self._reply(
                seat,
                play_pb2.ActionRejected(
                    decision_id=decision_id,
                    code=play_pb2.REJECTION_CODE_DECISION_CLOSED,
                    reason=f"the table is {self.status.value}: no decision is open",
                ),
            )
            return None
        state = self.seats[seat]
        decision = self.decisions.get(seat)
        if decision is None or decision.decision_id != decision_id:
            if decision_id in state.asked:
                # An answer to a decision that already closed (e.g. after its timeout): discarded, no fault.
                self._reply(
                    seat,
                    play_pb2.ActionRejected(
                        decision_id=decision_id,
                        code=play_pb2.REJECTION_CODE_DECISION_CLOSED,
                        reason=f"decision {decision_id} is closed",
                    ),
                )
                return None
            reason = (
                f"seat {seat} was not asked to act (decision {decision_id} is not open for this seat)"
                if decision is None
                else f"decision {decision_id} is not the open decision {decision.decision_id} of seat {seat}"
            )
            self._illegal(seat, decision_id, reason, play_pb2.REJECTION_CODE_NOT_ASKED)
            return None
        now = self.clock.now()
        elapsed = now - decision.asked_at
        if now >= decision.deadline:
            self._reply(
                seat,
                play_pb2.ActionRejected(
                    decision_id=decision_id,
                    code=play_pb2.REJECTION_CODE_DECISION_CLOSED,
                    reason=f"decision {decision_id} timed out before the answer arrived",
                ),
            )
            self._timeout(seat, decision)
            self._sync()
            return None
        try:
            # The engine checks first: an illegal action changes nothing. The rejected señas of one Act are one event.
            unknown = wire.unknown_senas(message)
            step = match.apply(seat, wire.action_from_proto(message), unknown)
        except (MalformedError, IllegalActionError) as error:
            self._illegal(seat, decision_id, str(error), play_pb2.REJECTION_CODE_ILLEGAL_ACTION)
            return None
        state.bank = clocks.bank_after(decision.kind, elapsed, state.bank, self.rules)
        state.decision_seconds.append(elapsed)
        self._record_known += 12  # one double of GetTableReplayResponse.decision_times
        del self.decisions[seat]
        self._sync()
        self._check_limits(seat, flagged=bool(unknown or step.rejected_senas))
        return None

    def _illegal(self, seat: int, decision_id: int, reason: str, code: play_pb2.RejectionCode.ValueType) -> None:
        """Never applied; one fault; the seat may retry within its time unless the policy applies a default."""
        match = self.match
        assert match is not None
        legal_messages = wire.legal_to_proto(match.legal(seat))
        decision = self.decisions.get(seat)
        match.record_illegal_action(seat, reason)
        retry = self.rules.illegal_action_policy is IllegalActionPolicy.RETRY
        if decision is not None and not (retry and not match.is_over):
            del self.decisions[seat]  # the policy applied the default action: this decision is closed
        # `decision_open` speaks of the decision the Act named (play.proto): an id never issued names none, even
        # when the seat has another decision open (that one stays open under `retry`, and its request stands).
        still_open = decision is not None and decision.decision_id == decision_id and seat in self.decisions
        rejection = play_pb2.ActionRejected(
            decision_id=decision_id,
            code=code,
            reason=reason,
            legal_actions=legal_messages if still_open else [],
            fault_counted=True,
            decision_open=still_open,
        )
        if still_open and decision is not None:
            left, bank = self._time_left(seat, decision)
            rejection.decision_time_left_ms = int(left * 1000)
            rejection.bank_time_left_ms = int(bank * 1000)
        self._reply(seat, rejection)  # before the Fault event and, on a forfeit, before the stream closes
        self._sync()
        self._check_limits(seat, flagged=True)
        return None

    def _reply(self, seat: int, rejection: play_pb2.ActionRejected) -> None:
        outbox = self.seats[seat].outbox
        if outbox is not None:
            outbox.put_nowait(play_pb2.PlayResponse(action_rejected=rejection))

    def _finish(self) -> None:
        match = self.match
        assert match is not None and match.outcome is not None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.decisions.clear()
        self._gate(frozenset(range(4)))  # every seat reads the outcome
        self._flush(everyone=True)  # the last events go before the outcome
        self.status = TableStatus.FINISHED
        # The outcome goes to the four seats and to spectators: an incident's cause is public, its detail (a
        # process's exit, a stream's error) stays with the admin API.
        incidents = [pb.Incident(seat=incident.seat, cause=incident.cause) for incident in self.incident_messages()]
        self.outcome = wire.outcome_to_proto(match.outcome, self.faults(), incidents)
        for state in self.seats:
            if state.grace is not None:
                state.grace.cancel()
                state.grace = None
            if state.outbox is not None:
                state.outbox.put_nowait(play_pb2.PlayResponse(outcome=self.outcome))
                state.outbox.put_nowait(None)
        for watcher in self.watchers:
            watcher.put_nowait(self.outcome)
            watcher.put_nowait(None)
        self.finished.set()
        if self._on_finish is not None:
            self._on_finish(self)

    def cancel(self, reason: str) -> None:
        """Stop the table: streams end with ABORTED; nothing more is applied."""
        if self.status in (TableStatus.FINISHED, TableStatus.CANCELLED):
            return
        log.info("table %s cancelled: %s", self.table_id, reason)
        self.status = TableStatus.CANCELLED
        self.cancel_reason = reason
        self._gate(frozenset(range(4)))
        self._join_timer.cancel()
        for timer in (self._timer, self._event_timer):
            if timer is not None:
                timer.cancel()
        for state in self.seats:
            if state.grace is not None:
                state.grace.cancel()
            if state.outbox is not None:
                state.outbox.put_nowait(None)
        for watcher in self.watchers:
            watcher.put_nowait(None)
        self.finished.set()
        if self._on_finish is not None:
            self._on_finish(self)

    # ------------------------------------------------------------------ reports

    def missed(self, seat: int, next_seq: int) -> int:
        """How many events a join of `seat` from `next_seq` would resend."""
        return max(0, self.views.seen(seat) - next_seq) if self.views is not None else 0

    def backlog_messages(self, backlog: Backlog) -> Iterator[bytes]:
        """The responses that carry a `Backlog`'s events as its seat's stream takes them: one a message, or one
        Update of up to BACKLOG_CHUNK of them for a batching seat; each chunk is converted when the stream asks
        for it."""
        for first in range(backlog.start, backlog.end, BACKLOG_CHUNK):
            messages = self.seat_messages(backlog.seat, first, min(first + BACKLOG_CHUNK, backlog.end))
            entries = [wire.stream_entry(message.SerializeToString(), batch=backlog.batch) for message in messages]
            if backlog.batch:
                yield wire.update_response(b"".join(entries))
            else:
                yield from entries

    def seat_messages(self, seat: int, start: int = 0, end: int | None = None) -> list[pb.Event]:
        """The events `seat` has been sent from seq `start` on (to `end`, excluded), as the wire carried them."""
        if self.views is None:
            return []
        return [self._message(event, seat) for event in self.views.events(seat, start, end)]

    def omniscient_messages(self) -> Iterator[pb.Event]:
        """Every event of the match, numbered match-wide: the omniscient log (for the admin, once it is over).
        Converted as it is read: a Watch sends one before it converts the next, and never holds the event loop
        for the whole log of a long match."""
        events = self.match.events if self.match is not None else []
        return (wire.event_to_proto(event, seq, None, bot_names=self.bot_names) for seq, event in enumerate(events))

    def public_messages(self) -> Iterator[pb.Event]:
        """What all four seats see, the señas that leaked included, numbered as a spectator sees them: the
        spectators' log once the match is over. Converted as it is read, as `omniscient_messages`."""
        if self.match is None:
            return iter(())
        return (self._message(event, None) for event in self.match.events_for(None))

    @property
    def live_count(self) -> int:
        """How many events a live Watch has been shown so far: `live_messages` up to here, the rest as they come."""
        return self._live_seq

    def live_messages(self, end: int | None = None) -> Iterator[pb.Event]:
        """The public events less every seña (`_live`), numbered in this list (its first `end`): what a live Watch
        shows. Converted as it is read, as `omniscient_messages`: built whole, a review's Watches of an 8,000-event
        match held the event loop 260 ms (stop 34)."""
        if self.match is None:
            return iter(())
        live = itertools.islice(enumerate(event for event in self.match.events if _live(event)), end)
        return (wire.event_to_proto(event, seq, None, bot_names=self.bot_names) for seq, event in live)

    def faults(self) -> list[pb.Fault]:
        """Every fault charged so far (rules §13), in order: the engine's Fault events. Never an incident."""
        return wire.match_faults(self.match) if self.match is not None else []

    def incident_messages(self) -> list[pb.Incident]:
        """Every incident recorded so far, in order, as the wire carries them. Never a fault."""
        return [
            pb.Incident(seat=incident.seat, cause=CAUSE_TO_PROTO[incident.cause], detail=incident.detail)
            for incident in self.incidents
        ]
