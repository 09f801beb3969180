"""`mus bot check`: a conformance run of one bot program before it enters a league (docs/bot-check.md).

The bot plays short seeded matches against the reference bot (the Python `random` example) on a referee embedded
in this process, over real gRPC, each of the bot's seats its own process (sandboxed when asked, as in a league);
the reference seats play in this process, through the referee's own Play handler:

- the handshake: every seat joins within the limit with `Join.protocol_version = 1`;
- legal play under every option that changes the set of actions (`VARIANTS`): no fault (illegal action,
  timeout) and no incident (protocol error, crash, disconnect, stall);
- the deadline: every answer within `decision_timeout_s` (its decision times, median and max);
- three probes in one more match, on the bot's first seat: an `ILLEGAL_ACTION` for a legal answer (the bot must
  answer the still-open decision again), a stale `DECISION_CLOSED` (it must ignore it and answer its next
  decision), and a dropped stream (it must join again with `Join.next_seq` and answer the re-sent decision);
- for a persistent bot (`mus bot add --persistent`, docs/pool.md), two more matches played as a league worker
  plays it, from a pool: each of its processes must play a seat of each, given on its standard input.

The probes are provoked between the bot and the referee, not inside it: the Play servicer is the referee's own,
wrapped (`_CheckServicer`) so that this module sees every message of the bot's seats and can withhold one, send
one of its own, or end the stream with UNAVAILABLE. The referee's tables, clocks and rules are untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
import re
import shutil
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc

from clients.bots.random_bot import RandomBot
from clients.sdk.runner import play_in_process
from mus.v1 import play_pb2
from mus.v1 import types_pb2 as pb
from referee.causes import IncidentCause
from referee.engine.events import Fault
from referee.engine.rules import Rules
from referee.service.server import SERVER_OPTIONS
from referee.service.servicer import PlayServicer, RaisingContext, Referee, StreamAborted, StreamContext
from referee.service.table import PROTOCOL_VERSION, Table, TableStatus, reported_name
from referee.wire import NO_ACTION
from workers.host_lock import host_play_lock
from workers.launcher import (
    EXAMPLE_BOTS,
    SOCKET_DIR,
    STDIO_BRIDGE,
    BotProcess,
    BotProgram,
    LaunchError,
    Limits,
    Sandbox,
    launch_bot,
    open_to_seat,
)
from workers.logs import own_log_folder
from workers.matches import EmbeddedReferee, RefereeFailure, SeatFrames, play_programs
from workers.pool import BotPool
from workers.scratch import own_folder

REFERENCE = BotProgram("random", tuple(EXAMPLE_BOTS["random"]))
"""The reference opponent: the Python random example bot, which plays every legal action sometimes. Launched as
processes in the persistent check (a league worker's match); played in this process in the others
(`_reference_seat`)."""


@dataclass(frozen=True, slots=True)
class Variant:
    """A set of rules options under which the bot must play legally."""

    name: str
    options: Mapping[str, Any]
    about: str


VARIANTS = (
    Variant("defaults", {}, "the default rules: señas on (senas_mode=voluntary), simultaneous discards"),
    Variant("4_reyes", {"deck_mode": "4_reyes"}, "deck_mode=4_reyes"),
    Variant(
        "both_answer", {"response_mode": "both_answer_most_aggressive"}, "response_mode=both_answer_most_aggressive"
    ),
    Variant("bot_declares", {"declarations": "bot_declares"}, "declarations=bot_declares"),
    Variant("sequential_discards", {"discard_submission": "sequential"}, "discard_submission=sequential"),
    Variant("uncapped", {"max_total_stake": None}, "max_total_stake=null (no cap on stakes)"),
)
"""Every option of rules §14 that changes the set of actions a bot may be offered, one match set each."""

VARIANT_NAMES = tuple(variant.name for variant in VARIANTS)

SHORT_MATCH = {"target_score": 10, "games_to_win_vaca": 3, "vacas_to_win_match": 1, "time_bank_s": 0}
"""A legal-play match: short games (to 10, first to 3 games), and no time bank: every answer must come within
decision_timeout_s."""

PROBE_MATCH = {**SHORT_MATCH, "target_score": 40, "games_to_win_vaca": 5}
"""The probe match: long enough for the three probes; it is stopped as soon as they are done."""

PROBE_AFTER = 2
"""The first probe waits until the bot's seat has been asked this many decisions: it has found its feet."""

MARGIN_S = 0.5
"""What a probe waits past a deadline before it says the bot sent nothing: the referee decides at the deadline."""

TAIL_LINES = 3
"""How many last lines of a seat's output a failure quotes."""

QUOTED_LINE_CHARS = 400
"""The most of one line a failure quotes; the rest is marked cut. At 200 the stdio bridge's advice lost its end
("log to" stderr) behind its own timestamp (newcomer walkthrough, stop 43)."""


class Status(enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check's verdict: `summary` is one line (the reason for a failure); `details` add more lines."""

    check: str
    title: str
    status: Status
    summary: str
    details: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "title": self.title,
            "status": self.status.value,
            "summary": self.summary,
            "details": list(self.details),
        }


@dataclass(frozen=True, slots=True)
class DecisionTimes:
    """The bot's answer times over the legal-play matches, measured at the referee from request to answer."""

    count: int
    median_s: float | None
    max_s: float | None
    decision_timeout_s: float

    def to_json(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "median_s": self.median_s,
            "max_s": self.max_s,
            "decision_timeout_s": self.decision_timeout_s,
        }


@dataclass(frozen=True, slots=True)
class CheckReport:
    """Every check's verdict, in order, and where each seat's output was kept."""

    bot: str
    command: tuple[str, ...]
    results: tuple[CheckResult, ...]
    times: DecisionTimes
    log_dir: Path
    sandboxed: bool
    bot_name: str = ""
    """What the bot calls itself (Join.bot_name), when it joined."""

    @property
    def passed(self) -> bool:
        return all(result.status is Status.PASS for result in self.results)

    def to_json(self) -> dict[str, Any]:
        return {
            "bot": self.bot,
            "bot_name": self.bot_name,
            "command": list(self.command),
            "passed": self.passed,
            "checks": [result.to_json() for result in self.results],
            "decision_seconds": self.times.to_json(),
            "sandboxed": self.sandboxed,
            "logs": str(self.log_dir),
        }


@dataclass(frozen=True, slots=True)
class CheckConfig:
    """How hard to check: matches per variant, clocks, which variants, rules on top, the sandbox's limits."""

    matches: int = 2
    seed: int = 1
    decision_timeout_s: float = 10.0
    join_timeout_s: float = 10.0
    reconnect_grace_s: float = 5.0
    variants: tuple[str, ...] = VARIANT_NAMES
    options: Mapping[str, Any] = field(default_factory=dict)
    """Rules options applied last, over the check's own (rules §14)."""
    sandbox: Limits | None = None
    log_dir: Path | None = None
    jobs: int = 2
    """Matches played at once (after the first, which checks the handshake alone)."""

    def rules(self, base: Mapping[str, Any], variant: Mapping[str, Any]) -> Rules:
        return Rules.from_options({**base, "decision_timeout_s": self.decision_timeout_s, **variant, **self.options})


# ---------------------------------------------------------------------------------------------- what the wire saw


@dataclass(slots=True)
class _Join:
    at: float
    """Seconds after the seat's process was launched."""
    protocol_version: int
    next_seq: int
    bot_name: str
    batch_events: bool


@dataclass(slots=True)
class _Asked:
    decision_id: int
    kind: str
    at: float
    left_ms: int
    bank_ms: int
    legal: list[pb.LegalAction]


@dataclass(slots=True)
class _Verdict:
    passed: bool
    summary: str
    details: tuple[str, ...] = ()


class _Phase(enum.Enum):
    ILLEGAL = "illegal"
    ILLEGAL_SENT = "illegal_sent"
    CLOSED = "closed"
    CLOSED_SENT = "closed_sent"
    DROP = "drop"
    DROPPED = "dropped"
    REJOINED = "rejoined"
    DONE = "done"


@dataclass(slots=True)
class _SeatRecord:
    """What one of the checked bot's seats did and was sent in one match."""

    seat: int
    launched_at: float = 0.0
    joins: list[_Join] = field(default_factory=list)
    asked: dict[int, _Asked] = field(default_factory=dict)
    last_asked: int | None = None
    answers: dict[int, float] = field(default_factory=dict)
    """Seconds from each decision's request to the seat's first answer to it."""
    rejections: list[play_pb2.ActionRejected] = field(default_factory=list)
    """The referee's own rejections (never the probes')."""
    timeouts: list[int] = field(default_factory=list)
    """The decisions that timed out, in order."""
    exit: str = ""
    """How its process ended, when it ended before the match did."""
    log: Path | None = None

    def request(self, decision_id: int) -> str:
        """A decision as the seat's program can find it: "request 5 (decision 17, bet)". The seat's count of its
        requests, from 1, is the `number` a stdio program is given (docs/stdio.md) and the how-manieth call of an
        SDK bot's `decide`; the decision id is the table's, which a stdio program never sees."""
        asked = self.asked.get(decision_id)
        if asked is None:
            return f"decision {decision_id}"
        return f"request {list(self.asked).index(decision_id) + 1} (decision {decision_id}, {asked.kind})"


@dataclass(slots=True)
class _Stream:
    """One Play stream as the servicer sees it."""

    out: asyncio.Queue[play_pb2.PlayResponse | BaseException | None]
    seat: int | None = None
    next_seq: int = 0
    """One more than the seq of the last event this stream delivered."""
    drop: bool = False


class _Watch:
    """The checked bot's seats in one match, and the probes on its first seat when this is the probe match."""

    def __init__(self, referee: Referee, bot_seats: tuple[int, ...], probe_seat: int | None, grace_s: float) -> None:
        self.referee = referee
        self.seats = {seat: _SeatRecord(seat) for seat in bot_seats}
        self.table: Table | None = None
        self.probe_seat = probe_seat
        self.grace_s = grace_s
        self.phase = _Phase.ILLEGAL if probe_seat is not None else _Phase.DONE
        self.verdicts: dict[str, _Verdict] = {}
        self.stop = asyncio.Event()
        self.stop_reason = ""
        self.infrastructure = ""
        """Why this match says nothing about the bot (a sandbox that did not start), or ''."""
        self.joined = asyncio.Event()
        self.join_deadline_passed = False
        self._target: _Asked | None = None
        self._stale = 0
        self._sent_at = 0.0
        self._expected_seq = 0
        self._rejoin: _Join | None = None
        self._timer: asyncio.TimerHandle | None = None

    def halt(self, reason: str) -> None:
        if not self.stop.is_set():
            self.stop_reason = reason
            self.stop.set()

    # ------------------------------------------------------------------ from the bot

    def on_join(self, stream: _Stream, join: play_pb2.Join) -> None:
        found = self.referee.seat_for_token(join.seat_token)
        if found is None or found[0] is not self.table or found[1] not in self.seats:
            return
        seat = found[1]
        stream.seat = seat
        record = self.seats[seat]
        note = _Join(
            time.monotonic() - record.launched_at,
            join.protocol_version,
            join.next_seq,
            reported_name(join.bot_name),
            join.batch_events,
        )
        record.joins.append(note)
        if join.protocol_version != PROTOCOL_VERSION:
            self.halt(f"seat {seat} sent Join.protocol_version = {join.protocol_version}")
        elif len(record.joins) == 1 and all(seat_record.joins for seat_record in self.seats.values()):
            self.joined.set()
        if seat == self.probe_seat and self.phase is _Phase.DROPPED:
            self._rejoined(note)

    def on_act(self, stream: _Stream, act: play_pb2.Act) -> play_pb2.PlayResponse | None:
        """Note an answer; a probe may keep it from the referee and answer it: the response to send back."""
        if stream.seat is None:
            return None
        record = self.seats[stream.seat]
        now = time.monotonic()
        asked = record.asked.get(act.decision_id)
        if asked is not None and act.decision_id not in record.answers:
            record.answers[act.decision_id] = now - asked.at
        if stream.seat != self.probe_seat:
            return None
        target = self._target
        if self.phase is _Phase.ILLEGAL and target is not None and act.decision_id == target.decision_id:
            if now - target.at < (target.left_ms + target.bank_ms) / 1000:
                return self._reject_legal_answer(target, now)
            self._target = None  # a late answer: the decision is closed already; probe a later one
            return None
        if self.phase is _Phase.ILLEGAL_SENT and target is not None:
            waited = now - self._sent_at
            if act.decision_id == target.decision_id:
                self._verdict(
                    "illegal",
                    True,
                    f"after ILLEGAL_ACTION on decision {target.decision_id} ({target.kind}) it answered again"
                    f" in {_seconds(waited)}",
                )
            else:
                self._verdict(
                    "illegal",
                    False,
                    f"after ILLEGAL_ACTION on decision {target.decision_id} ({target.kind}) it answered decision"
                    f" {act.decision_id} instead of answering decision {target.decision_id} again",
                )
            self.phase = _Phase.CLOSED
        elif self.phase is _Phase.CLOSED_SENT and target is not None:
            waited = now - self._sent_at
            if act.decision_id == target.decision_id:
                self._verdict(
                    "closed",
                    True,
                    f"it ignored DECISION_CLOSED for decision {self._stale} and answered decision"
                    f" {target.decision_id} in {_seconds(waited)}",
                )
            elif act.decision_id == self._stale:
                self._verdict(
                    "closed",
                    False,
                    f"after DECISION_CLOSED for decision {self._stale} it answered decision {self._stale} again"
                    " (a closed decision is over: ignore the rejection and carry on)",
                )
            else:
                self._verdict(
                    "closed",
                    False,
                    f"after DECISION_CLOSED for decision {self._stale} it answered decision {act.decision_id}, not"
                    f" its open decision {target.decision_id}",
                )
            self.phase = _Phase.DROP
        elif self.phase is _Phase.REJOINED and target is not None and self._rejoin is not None:
            if act.decision_id == target.decision_id:
                self._verdict("drop", *self._rejoin_summary(target, now))
            else:
                self._verdict(
                    "drop",
                    False,
                    f"after joining again it answered decision {act.decision_id}, not the open decision"
                    f" {target.decision_id} that the referee sent it again",
                )
            self.phase = _Phase.DONE
        return None

    # ------------------------------------------------------------------ to the bot

    def on_response(self, stream: _Stream, response: play_pb2.PlayResponse) -> list[play_pb2.PlayResponse]:
        """What to send for one referee message: it, perhaps after a probe's; [] and `stream.drop` to drop."""
        seat = stream.seat
        if seat is None or seat not in self.seats:
            return [response]
        record = self.seats[seat]
        kind = response.WhichOneof("message")
        request: play_pb2.DecisionRequest | None = None
        events: Sequence[pb.Event] = ()
        if kind == "event":
            events = (response.event,)
        elif kind == "update":
            events = response.update.events
            if response.update.HasField("decision_request"):
                request = response.update.decision_request
        elif kind == "decision_request":
            request = response.decision_request
        elif kind == "action_rejected":
            record.rejections.append(response.action_rejected)
        elif kind == "outcome":
            self._cancel_timer()
        for event in events:  # before the request they come with: a timeout is of the decision asked before
            timed_out = event.WhichOneof("payload") == "fault" and event.fault.cause == pb.FAULT_CAUSE_TIMEOUT
            if timed_out and event.fault.seat == seat and record.last_asked is not None:
                record.timeouts.append(record.last_asked)
        before: list[play_pb2.PlayResponse] = []
        if request is not None:
            probe = self._probe_request(stream, record, request)
            if stream.drop:
                return []  # the message, its events included, is never delivered on this stream
            if probe is not None:
                before.append(probe)
            self._note_request(record, request)
        for event in events:
            stream.next_seq = max(stream.next_seq, event.seq + 1)
        return [*before, response]

    def _note_request(self, record: _SeatRecord, request: play_pb2.DecisionRequest) -> None:
        if request.decision_id in record.asked:
            return  # sent again after a rejoin: the same decision, asked when it was first sent
        record.asked[request.decision_id] = _Asked(
            request.decision_id,
            decision_kind(request.kind),
            time.monotonic(),
            request.decision_time_left_ms,
            request.bank_time_left_ms,
            list(request.legal_actions),
        )
        record.last_asked = request.decision_id

    def _probe_request(
        self, stream: _Stream, record: _SeatRecord, request: play_pb2.DecisionRequest
    ) -> play_pb2.PlayResponse | None:
        """A decision for the probed seat: it may start a probe (a stale rejection first, or a drop)."""
        if record.seat != self.probe_seat:
            return None
        target = self._target
        if self.phase is _Phase.REJOINED and target is not None:
            if request.decision_id == target.decision_id:  # sent again on the new stream, with the time left
                self._arm(request, self._rejoined_but_silent)
            elif request.decision_id not in record.asked:
                self._verdict(
                    "drop",
                    False,
                    f"it joined again, but too late to answer the open decision {target.decision_id}"
                    f" ({target.kind}): it timed out while the bot was away",
                )
                self.phase = _Phase.DONE
            return None
        if request.decision_id in record.asked:
            return None
        # A seat has one decision open at a time: a new one means the probed one closed, unanswered (timed out).
        if self.phase is _Phase.ILLEGAL_SENT:
            self._illegal_but_silent()
        elif self.phase is _Phase.CLOSED_SENT:
            self._closed_but_silent()
        if request.kind == pb.DECISION_KIND_SENA_ROUND:
            return None
        if self.phase is _Phase.ILLEGAL and len(record.asked) >= PROBE_AFTER:
            # The first decision after PROBE_AFTER; a new one means the one chosen before closed unanswered.
            self._note_request(record, request)
            self._target = record.asked[request.decision_id]
        elif self.phase is _Phase.CLOSED and record.last_asked is not None:
            self._stale = record.last_asked
            self._note_request(record, request)
            self._target = record.asked[request.decision_id]
            self.phase = _Phase.CLOSED_SENT
            self._sent_at = time.monotonic()
            self._arm(request, self._closed_but_silent)
            rejection = play_pb2.ActionRejected(
                decision_id=self._stale,
                code=play_pb2.REJECTION_CODE_DECISION_CLOSED,
                reason=f"decision {self._stale} is closed (a conformance probe: ignore it and carry on)",
                decision_open=False,
            )
            return play_pb2.PlayResponse(action_rejected=rejection)
        elif self.phase is _Phase.DROP:
            self._note_request(record, request)
            self._target = record.asked[request.decision_id]
            self.phase = _Phase.DROPPED
            self._sent_at = time.monotonic()
            self._expected_seq = stream.next_seq
            stream.drop = True
            self._cancel_timer()
            self._timer = asyncio.get_running_loop().call_later(self.grace_s + MARGIN_S, self._never_rejoined)
        return None

    # ------------------------------------------------------------------ the probes

    def _reject_legal_answer(self, target: _Asked, now: float) -> play_pb2.PlayResponse:
        """Keep the bot's (legal) answer from the referee and tell the bot it was illegal: the decision stays open
        at the referee, and its clock runs on."""
        elapsed_ms = int((now - target.at) * 1000)
        left_ms = target.left_ms - elapsed_ms
        bank_ms = target.bank_ms + min(left_ms, 0)
        self.phase = _Phase.ILLEGAL_SENT
        self._sent_at = now
        wait = (max(left_ms, 0) + max(bank_ms, 0)) / 1000 + MARGIN_S
        self._timer = asyncio.get_running_loop().call_later(wait, self._illegal_but_silent)
        rejection = play_pb2.ActionRejected(
            decision_id=target.decision_id,
            code=play_pb2.REJECTION_CODE_ILLEGAL_ACTION,
            reason="a conformance probe: this answer is rejected on purpose (no fault is counted); answer again",
            legal_actions=target.legal,
            fault_counted=False,
            decision_open=True,
            decision_time_left_ms=max(left_ms, 0),
            bank_time_left_ms=max(bank_ms, 0),
        )
        return play_pb2.PlayResponse(action_rejected=rejection)

    def _arm(self, request: play_pb2.DecisionRequest, callback: Callable[[], None]) -> None:
        self._cancel_timer()
        wait = (request.decision_time_left_ms + request.bank_time_left_ms) / 1000 + MARGIN_S
        self._timer = asyncio.get_running_loop().call_later(wait, callback)

    def _illegal_but_silent(self) -> None:
        target = self._target
        assert target is not None
        waited = time.monotonic() - self._sent_at
        self._verdict(
            "illegal",
            False,
            f"after ILLEGAL_ACTION on decision {target.decision_id} ({target.kind}) the bot sent nothing for"
            f" {_seconds(waited)}: the decision timed out (an open decision must be answered again)",
        )
        self.phase = _Phase.CLOSED

    def _closed_but_silent(self) -> None:
        target = self._target
        assert target is not None
        waited = time.monotonic() - self._sent_at
        self._verdict(
            "closed",
            False,
            f"after DECISION_CLOSED for decision {self._stale} the bot sent nothing for its open decision"
            f" {target.decision_id} ({target.kind}) for {_seconds(waited)}: it timed out",
        )
        self.phase = _Phase.DROP

    def _never_rejoined(self) -> None:
        self._verdict(
            "drop",
            False,
            f"after its stream was dropped (UNAVAILABLE) the bot did not join again within {self.grace_s:g} s,"
            " the referee's reconnect grace period",
        )
        self.phase = _Phase.DONE

    def _rejoined_but_silent(self) -> None:
        target = self._target
        assert target is not None
        self._verdict(
            "drop",
            False,
            f"it joined again, but sent nothing for the open decision {target.decision_id} ({target.kind}) that"
            " the referee sent it again: it timed out",
        )
        self.phase = _Phase.DONE

    def _rejoined(self, join: _Join) -> None:
        self._cancel_timer()
        self._rejoin = join
        if join.next_seq > self._expected_seq:
            self._verdict(
                "drop",
                False,
                f"it joined again with next_seq {join.next_seq}, but the last event it had received was seq"
                f" {self._expected_seq - 1}: it would miss events {self._expected_seq}..{join.next_seq - 1}"
                " (next_seq is one more than the last seq received)",
            )
            self.phase = _Phase.DONE
            return
        self.phase = _Phase.REJOINED

    def _rejoin_summary(self, target: _Asked, now: float) -> tuple[bool, str, tuple[str, ...]]:
        join = self._rejoin
        assert join is not None
        after = now - self._sent_at
        summary = (
            f"dropped before decision {target.decision_id}; it joined again with next_seq {join.next_seq} and"
            f" answered that decision {_seconds(after)} after the drop"
        )
        details: tuple[str, ...] = ()
        if join.next_seq < self._expected_seq:
            details = (
                f"note: next_seq {join.next_seq} asks again for events it had received (it had them up to seq"
                f" {self._expected_seq - 1}): allowed, but it must skip what it has seen",
            )
        return True, summary, details

    def _verdict(self, probe: str, passed: bool, summary: str, details: tuple[str, ...] = ()) -> None:
        self._cancel_timer()
        if probe not in self.verdicts:
            self.verdicts[probe] = _Verdict(passed, summary, details)
        if len(self.verdicts) == len(PROBES):
            self.halt("the probes are done")

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def process_exited(self, seat: int, detail: str) -> None:
        """A seat's process ended before its match did."""
        if seat not in self.seats:
            return
        record = self.seats[seat]
        record.exit = detail
        if not record.joins:
            self.halt(f"seat {seat}'s process ended before it joined")
        if seat != self.probe_seat:
            return
        probe = {
            _Phase.ILLEGAL_SENT: "illegal",
            _Phase.CLOSED_SENT: "closed",
            _Phase.DROPPED: "drop",
            _Phase.REJOINED: "drop",
        }.get(self.phase)
        if probe is not None:
            stage = {"illegal": "ILLEGAL_ACTION", "closed": "DECISION_CLOSED", "drop": "the dropped stream"}[probe]
            self._verdict(probe, False, f"after {stage} the bot's process ended ({detail})", output_tail(record.log))
            self.phase = _Phase.DONE

    def finish(self, ending: str) -> None:
        """The match is over: what the probes were still waiting for fails, what they never reached is said."""
        self._cancel_timer()
        waiting = {
            _Phase.ILLEGAL_SENT: "illegal",
            _Phase.CLOSED_SENT: "closed",
            _Phase.DROPPED: "drop",
            _Phase.REJOINED: "drop",
        }.get(self.phase)
        if waiting is not None and waiting not in self.verdicts:
            target = self._target.decision_id if self._target else 0
            self._verdict(waiting, False, f"the match ended ({ending}) before the bot answered decision {target}")


def decision_kind(kind: int) -> str:
    """A wire decision kind in words: DECISION_KIND_SENA_ROUND is `sena_round`."""
    if kind not in pb.DecisionKind.values():
        return str(kind)
    return pb.DecisionKind.Name(kind).removeprefix("DECISION_KIND_").lower()  # type: ignore[arg-type]


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def output_tail(path: Path | None) -> tuple[str, ...]:
    """The last lines of a seat's output, to quote in a failure (here and by `mus match play`); where they show no
    error line (`HEADLINE`), the first one above them comes first: Node ends a stack trace with its version and
    the trace's last frames, and the stdio bridge's 'cannot read your answer' came a few lines before the end."""
    if path is None:
        return ()
    try:  # never through a link: one named as a seat's log in a stranger's folder (`logs.own_log_folder`)
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), errors="replace") as log:
            text = log.read()
    except OSError:  # none yet, or a link
        return ()
    lines = [visible(line.strip()) for line in text.splitlines() if line.strip()]
    if not lines:
        return (f"its output ({path.name}) is empty",)
    tail, above = lines[-TAIL_LINES:], lines[-HEADLINE_SEARCH_LINES:-TAIL_LINES]
    shown = any(HEADLINE.search(line) for line in tail)
    headline = None if shown else next((line for line in above if HEADLINE.search(line)), None)
    if headline is None:
        return (f"last lines of its output ({path}):", *(_quoted(line) for line in tail))
    quoted = (headline, *tail)
    return (f"its first error and last lines of output ({path}):", *(_quoted(line) for line in quoted))


def _quoted(line: str) -> str:
    return f"  {line[:QUOTED_LINE_CHARS]} [cut]" if len(line) > QUOTED_LINE_CHARS else f"  {line}"


def visible(line: str) -> str:
    """The line with every character a terminal would act on (ESC, BEL, the C1 controls, bidi overrides: all that
    is not printable) written out as an escape: a bot's output is quoted on its checker's terminal, and a review's
    bot set the clipboard (OSC 52) and rewrote lines above through it (stop 39)."""
    if line.isprintable():
        return line
    return "".join(char if char.isprintable() or char == "\t" else ascii(char)[1:-1] for char in line)


HEADLINE = re.compile(r"^[\w.$]*(?:Error|Exception)\b|\b(?:ERROR|FATAL|CRITICAL)\b|^panic:|^error(?:\[\w+\])?:")
"""A line that names what went wrong: an exception's (`TypeError: ...`, Node's `Error: Cannot find module`), a
log line at ERROR or worse (the stdio bridge's, the SDK's), a Go panic or a Rust error."""

HEADLINE_SEARCH_LINES = 200
"""How far up from its end a seat's output is searched for its first error line."""


# ---------------------------------------------------------------------------------------------- the servicer


class _CheckServicer(PlayServicer):
    """The referee's Play servicer, with the checked bot's messages seen (and for the probes, steered) on the way."""

    writes_direct = False  # every response passes `on_response`

    def __init__(self, referee: Referee, watch: _Watch) -> None:
        super().__init__(referee)
        self.watch = watch

    async def Play(
        self, request_iterator: AsyncIterator[play_pb2.PlayRequest], context: StreamContext
    ) -> AsyncGenerator[play_pb2.PlayResponse, None]:
        stream = _Stream(asyncio.Queue())
        inner = super().Play(self._requests(stream, request_iterator), context)

        async def pump() -> None:
            try:
                async for response in inner:  # the probes read every response: the table's bytes are parsed
                    stream.out.put_nowait(
                        play_pb2.PlayResponse.FromString(response) if isinstance(response, bytes) else response
                    )
            except BaseException as error:  # the referee's abort (a status), or this stream's cancellation
                stream.out.put_nowait(error)
                return
            stream.out.put_nowait(None)

        task = asyncio.create_task(pump())
        try:
            while (item := await stream.out.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                for message in self.watch.on_response(stream, item):
                    yield message
                if stream.drop:
                    task.cancel()
                    await asyncio.wait([task])  # the referee sees the stream end before the bot does
                    await context.abort(
                        grpc.StatusCode.UNAVAILABLE,
                        "a conformance probe dropped this stream: join again with Join.next_seq",
                    )
        finally:
            task.cancel()

    async def _requests(
        self, stream: _Stream, requests: AsyncIterator[play_pb2.PlayRequest]
    ) -> AsyncIterator[play_pb2.PlayRequest]:
        async for request in requests:
            kind = request.WhichOneof("message")
            if kind == "join" and stream.seat is None:
                self.watch.on_join(stream, request.join)
            elif kind == "act":
                answer = self.watch.on_act(stream, request.act)
                if answer is not None:
                    stream.out.put_nowait(answer)
                    continue
            yield request


# ---------------------------------------------------------------------------------------------- one match


@dataclass(frozen=True)
class _Played:
    label: str
    seed: int
    bot_seats: tuple[int, ...]
    table: Table
    watch: _Watch


async def _play(
    program: BotProgram,
    rules: Rules,
    seed: int,
    *,
    bot_team: int,
    probe: bool,
    label: str,
    config: CheckConfig,
    log_dir: Path,
    frames: bool = False,
) -> _Played:
    """One match of the bot (team `bot_team`) against the reference bot on a referee of its own, over a unix
    socket in a private folder; it stops early when the handshake fails or the probes are done. With `frames`
    each of the bot's seats is also offered frames on a socket of its own (MUS_FRAMES), as a league worker's
    referee offers them; without, it has gRPC alone, as on the standalone referee.

    Confined, it holds the host's play lock as a league's match does (`workers.host_lock`): a bot checked on a
    league's machine ran beside its matches for minutes, and took a league seat's cards through the CPU (a
    security review, stop 36). So, confined, `--jobs` matches are played one at a time."""
    async with host_play_lock() if config.sandbox is not None else contextlib.nullcontext():
        socket_dir = open_to_seat(own_folder("mus-check"))
        referee = Referee(reconnect_grace_s=config.reconnect_grace_s)
        bot_seats = (bot_team, bot_team + 2)
        watch = _Watch(referee, bot_seats, bot_team if probe else None, config.reconnect_grace_s)
        server = grpc.aio.server(options=SERVER_OPTIONS)
        servicer = _CheckServicer(referee, watch)
        servicer.add_to_server(server)
        host_address = f"unix:{socket_dir / 'referee.sock'}"
        if server.add_insecure_port(host_address) == 0:
            shutil.rmtree(socket_dir, ignore_errors=True)
            raise LaunchError(f"cannot listen on {host_address}")
        await server.start()
        open_to_seat(socket_dir / "referee.sock")
        sandbox = Sandbox(socket_dir, config.sandbox, hidden=log_dir) if config.sandbox is not None else None
        address = f"unix:{SOCKET_DIR}/referee.sock" if sandbox is not None else host_address
        names = [program.name if seat in bot_seats else REFERENCE.name for seat in range(4)]
        table = referee.create_table(rules, seed, names, join_timeout_s=config.join_timeout_s + MARGIN_S)
        watch.table = table
        processes: list[BotProcess] = []
        tasks: list[asyncio.Task[Any]] = []
        frames_dir = own_folder("mus-check-frames")
        """Each of the bot's seats gets a folder of its own in it, which its partner's sandbox does not bind."""
        seat_frames: list[SeatFrames] = []
        try:
            for seat in range(4):
                token = table.seats[seat].token
                if seat not in bot_seats:
                    tasks.append(asyncio.create_task(_reference_seat(referee, watch, token, seed * 4 + seat)))
                    continue
                path = log_dir / f"{label}-seat{seat}-{program.name}.log"
                seat_sandbox, frames_address = sandbox, None
                if frames:
                    seat_frames.append(await SeatFrames.open(referee, frames_dir, servicer))
                    frames_address = seat_frames[-1].address(confined=sandbox is not None)
                    if sandbox is not None:
                        seat_sandbox = replace(sandbox, frames_dir=seat_frames[-1].folder)
                watch.seats[seat].launched_at = time.monotonic()
                watch.seats[seat].log = path
                process = await launch_bot(
                    program, address, token, log_path=path, sandbox=seat_sandbox, frames=frames_address
                )
                processes.append(process)
                tasks.append(asyncio.create_task(_watch_process(table, watch, seat, process)))
            tasks.append(asyncio.create_task(_join_deadline(watch, config.join_timeout_s)))
            ending = asyncio.create_task(table.finished.wait())
            stopped = asyncio.create_task(watch.stop.wait())
            tasks += [ending, stopped]
            await asyncio.wait([ending, stopped], return_when=asyncio.FIRST_COMPLETED)
            if watch.infrastructure:
                raise LaunchError(watch.infrastructure)
            if table.status is not TableStatus.FINISHED:
                table.cancel(watch.stop_reason or "the check stopped")
            watch.finish(_ending(table))
        finally:
            for task in tasks:
                task.cancel()
            if table.status is not TableStatus.FINISHED:
                table.cancel("the check stopped")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(process.wait() for process in processes)), 2.0)
            for process in processes:
                await process.close()
            await asyncio.gather(server.stop(grace=0.5), *(own.close() for own in seat_frames))
            for folder in (socket_dir, frames_dir):
                shutil.rmtree(folder, ignore_errors=True)
        return _Played(label, seed, bot_seats, table, watch)


async def _reference_seat(referee: Referee, watch: _Watch, token: str, seed: int) -> None:
    """A reference seat: the random example bot played in this process through the referee's own Play handler
    (`clients.sdk.play_in_process`). The opponents are the check's, not the bot's: launched as processes they
    were half of every match's start-up, and the bot's seats see the same messages either way. One that fails
    stops the check as a broken sandbox does: the match would say nothing about the bot."""
    servicer = PlayServicer(referee)
    context = RaisingContext()
    try:
        await play_in_process(RandomBot(seed), token, lambda requests: servicer.Play(requests, context))
    except StreamAborted:
        pass  # the table ended the stream (the check cancelled it)
    except Exception as error:
        watch.infrastructure = f"a reference seat failed: {type(error).__name__}: {error}"
        watch.halt(watch.infrastructure)


async def _watch_process(table: Table, watch: _Watch, seat: int, process: BotProcess) -> None:
    """A seat whose process exits before the match ends has crashed (the table is told, as in a league)."""
    code = await process.wait()
    if process.sandbox_failed:
        watch.infrastructure = f"the sandbox of seat {seat} did not start: {process.sandbox_failed}"
        watch.halt(watch.infrastructure)
        return
    if table.status in (TableStatus.RUNNING, TableStatus.WAITING):
        detail = process.describe_exit(code)
        table.report_crash(seat, detail)
        watch.process_exited(seat, detail)


async def _join_deadline(watch: _Watch, join_timeout_s: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(watch.joined.wait(), join_timeout_s)
    if not watch.joined.is_set():
        watch.join_deadline_passed = True
        watch.halt(f"not every seat of the bot joined within {join_timeout_s:g} s")


def _ending(table: Table) -> str:
    if table.status is TableStatus.CANCELLED:
        return "stopped"
    match = table.match
    if match is None or match.outcome is None:
        return str(table.status.value)
    return str(match.outcome.termination.value)


# ---------------------------------------------------------------------------------------------- verdicts


STDIO_HINT = (
    "a program that reads requests on stdin and answers on stdout (docs/stdio.md) plays behind the stdio bridge:"
    " `mus bot check --stdio -- COMMAND`, `mus bot add NAME --stdio -- COMMAND`"
)
"""Said when a seat that is not behind the bridge never joined (a review's Perl bot, checked without --stdio)."""


def _handshake(played: _Played, join_timeout_s: float, *, bridged: bool) -> CheckResult:
    title = "handshake and protocol version"
    problems: list[str] = []
    waiting: list[str] = []
    """Seats that had not joined yet when another seat's failure stopped the match: said last."""
    details: list[str] = []
    watch = played.watch
    for seat, record in watch.seats.items():
        if not record.joins:
            if record.exit:
                problems.append(f"seat {seat}'s process ended before it joined ({record.exit})")
            elif watch.join_deadline_passed:
                problems.append(f"seat {seat} did not join within {join_timeout_s:g} s (no Join on a Play stream)")
            else:
                waiting.append(f"seat {seat} had not joined yet when the check stopped ({watch.stop_reason})")
                continue
            details += output_tail(record.log)
            continue
        first = record.joins[0]
        if first.protocol_version != PROTOCOL_VERSION:
            problems.append(
                f"seat {seat} sent Join.protocol_version = {first.protocol_version}: the referee speaks"
                f" {PROTOCOL_VERSION} (it refused the stream with FAILED_PRECONDITION)"
            )
            details += output_tail(record.log)
        elif first.at > join_timeout_s:
            problems.append(f"seat {seat} joined after {_seconds(first.at)}: the limit is {join_timeout_s:g} s")
    problems += waiting
    if not bridged and any(not record.joins for record in watch.seats.values()) and problems:
        details.append(STDIO_HINT)
    if problems:
        return CheckResult("handshake", title, Status.FAIL, problems[0], (*problems[1:], *details))
    joins = [record.joins[0] for record in played.watch.seats.values()]
    slowest = max(join.at for join in joins)
    names = sorted({join.bot_name or "(none)" for join in joins})
    batch = "on" if all(join.batch_events for join in joins) else "off"
    return CheckResult(
        "handshake",
        title,
        Status.PASS,
        f"both seats joined with protocol_version {PROTOCOL_VERSION} within {_seconds(slowest)} of their launch"
        f" (limit {join_timeout_s:g} s); bot_name {', '.join(names)}; batch_events {batch}",
    )


def _match_problems(played: _Played, decision_timeout_s: float) -> list[str]:
    """Every fault and incident of the bot's seats in one match, each in words."""
    table, watch = played.table, played.watch
    where = f"match {played.label} (seed {played.seed})"
    stopped = (
        [f"{where}: the match was stopped: {table.cancel_reason}"] if table.status is TableStatus.CANCELLED else []
    )
    problems: list[str] = []
    match = table.match
    illegal = {seat: [r for r in record.rejections if r.fault_counted] for seat, record in watch.seats.items()}
    timeouts = {seat: list(record.timeouts) for seat, record in watch.seats.items()}
    for event in match.events if match is not None else ():
        fault = event.payload
        if not isinstance(fault, Fault) or fault.seat not in watch.seats:
            continue
        seat, cause = fault.seat, fault.cause.value
        record = watch.seats[seat]
        if cause == "illegal_action" and illegal[seat]:
            rejection = illegal[seat].pop(0)
            code = play_pb2.RejectionCode.Name(rejection.code).removeprefix("REJECTION_CODE_")
            problems.append(
                f"{where}: seat {seat}, {record.request(rejection.decision_id)}: {code}: {rejection.reason}"
            )
        elif cause == "timeout" and timeouts[seat]:
            decision_id = timeouts[seat].pop(0)
            late = record.answers.get(decision_id)
            answer = f"answered after {_seconds(late)}" if late is not None else "no answer"
            problems.append(
                f"{where}: seat {seat}, {record.request(decision_id)}: timed out ({answer}; decision_timeout_s ="
                f" {decision_timeout_s:g} s)"
            )
        else:
            problems.append(f"{where}: seat {seat}: a fault ({cause})")
    # What happened to a seat's process or connection first: it is usually why its decisions timed out (a
    # program that does not start showed "a fault (timeout)" before its crash, stop 34).
    incidents = [
        f"{where}: seat {incident.seat}: {incident.cause}: {incident.detail}"
        for incident in table.incidents
        if incident.seat in watch.seats and incident.cause != "stall"  # a stall is its decision's timeout
    ]
    return [*stopped, *incidents, *problems]


def _legal_play(variant: Variant, played: Sequence[_Played], decision_timeout_s: float) -> CheckResult:
    title = f"legal play: {variant.name}"
    said = Counter(problem for one in played for problem in _match_problems(one, decision_timeout_s))
    # Once each, counted: an SDK whose bot raises sends the same empty Act again after each rejection.
    problems = [problem if count == 1 else f"{problem} ({count} times)" for problem, count in said.items()]
    decisions = sum(len(record.asked) for one in played for record in one.watch.seats.values())
    if problems:
        tails: list[str] = []
        for one in played:
            for seat, record in one.watch.seats.items():
                # A crash, or an Act without an action: an SDK sends none when its bot raised, and says why in
                # its output (a newcomer's exception showed as "action kind is unset", its traceback unquoted). A
                # timeout too: the stdio bridge says there when a program's answers do not come (not flushed).
                crashed = any(i.seat == seat and i.cause in ("crash", "protocol_error") for i in one.table.incidents)
                if crashed or record.timeouts or any(NO_ACTION in r.reason for r in record.rejections):
                    tails += output_tail(record.log)
        summary = problems[0] if len(problems) == 1 else f"{problems[0]} (and {len(problems) - 1} more)"
        return CheckResult(f"legal_play:{variant.name}", title, Status.FAIL, summary, (*problems[1:8], *tails))
    matches = f"{len(played)} match{'es' if len(played) != 1 else ''}"
    return CheckResult(
        f"legal_play:{variant.name}",
        title,
        Status.PASS,
        f"{variant.about}: {matches}, {decisions} decisions, no fault, no incident",
    )


def _deadline(played: Sequence[_Played], decision_timeout_s: float) -> tuple[CheckResult, DecisionTimes]:
    title = "answers within the deadline"
    seconds: list[float] = []
    late: list[str] = []
    silent: list[str] = []
    unanswered_senas = 0
    for one in played:
        for seat, record in one.watch.seats.items():
            seconds += record.answers.values()
            for decision_id, took in record.answers.items():
                if took > decision_timeout_s:
                    late.append(f"match {one.label}, seat {seat}, {record.request(decision_id)}: {_seconds(took)}")
            for decision_id in record.timeouts:
                if decision_id not in record.answers:
                    silent.append(f"match {one.label}, seat {seat}, {record.request(decision_id)}")
            unanswered_senas += sum(
                1
                for asked in record.asked.values()
                if asked.kind == "sena_round"
                and asked.decision_id not in record.answers
                and asked.decision_id != record.last_asked  # the match may have ended while it was open
            )
    times = DecisionTimes(
        len(seconds),
        statistics.median(seconds) if seconds else None,
        max(seconds) if seconds else None,
        decision_timeout_s,
    )
    spread = (
        f"median {_seconds(times.median_s)}, max {_seconds(times.max_s)}"
        if times.median_s is not None and times.max_s is not None
        else "no answer at all"
    )
    answers = f"{times.count} answer{'s' if times.count != 1 else ''}"
    measured = f"{answers}: {spread} (decision_timeout_s = {decision_timeout_s:g} s)"
    if late or silent:
        parts = []
        if late:
            parts.append(f"{len(late)} past decision_timeout_s (first: {late[0]})")
        if silent:
            parts.append(f"{len(silent)} never answered before the timeout (first: {silent[0]})")
        return CheckResult("deadline", title, Status.FAIL, f"{'; '.join(parts)}; {measured}"), times
    if not seconds:
        return CheckResult("deadline", title, Status.FAIL, "the bot answered no decision"), times
    notes: tuple[str, ...] = ()
    if unanswered_senas:
        notes = (
            f"note: {unanswered_senas} seña-round request(s) never answered: legal (an empty list, no fault), but"
            " each one holds the match for decision_timeout_s; answer SENAS with an empty list at once instead",
        )
    return CheckResult("deadline", title, Status.PASS, measured, notes), times


PROBES = (
    ("illegal", "illegal_action_retry", "answers again after ILLEGAL_ACTION"),
    ("closed", "decision_closed", "carries on after DECISION_CLOSED"),
    ("drop", "rejoin", "joins again after a dropped stream"),
)


def _probe_results(played: _Played | None, skipped: str = "") -> list[CheckResult]:
    results: list[CheckResult] = []
    for key, check, title in PROBES:
        if played is None:
            results.append(CheckResult(check, title, Status.SKIP, skipped))
            continue
        verdict = played.watch.verdicts.get(key)
        if verdict is None:
            # Every seat of the bot's: the probed one may not have been asked at all when its partner's answers
            # ended the match ("after seat 0 was asked 0 decisions" read as a miscount: newcomer, stop 43).
            counts = [(seat, len(played.watch.seats[seat].asked)) for seat in played.bot_seats]
            said = " and ".join(f"{asked} (seat {seat})" for seat, asked in counts)
            reason = (
                f"not reached: the probe match ended ({_ending(played.table)}) after its seats were asked {said}"
                " decisions"
            )
            results.append(CheckResult(check, title, Status.SKIP, reason))
            continue
        status = Status.PASS if verdict.passed else Status.FAIL
        results.append(CheckResult(check, title, status, verdict.summary, verdict.details))
    return results


PERSISTENT = ("persistent", "two seats in a row from one process")

PERSISTENT_HINT = (
    "a persistent bot is given each seat as a JSON line on its standard input (MUS_SEATS=stdin; no MUS_REFEREE,"
    " no MUS_TOKEN), and reads the next after each seat until its input ends, never exiting in between: the SDK's"
    " run_main, the C++ and JavaScript example bots and the stdio bridge do (docs/pool.md, docs/protocol.md)"
)
"""Said under a failed persistent check: a newcomer's bot, which used run_bot, failed it with only its error."""

PERSISTENT_PAUSE_S = 0.5
"""Between the two matches, where nothing freezes the processes (no cgroup v2): a process that exits after its
seat has then exited, and the verdict says so. Where they are frozen as their match ends (docs/pool.md), one that
exits after its seat does so when it is given its next, a crash in the second match, which PERSISTENT_HINT
explains: no pause would change that."""


async def _persistent(program: BotProgram, config: CheckConfig, log_dir: Path, seed: int) -> CheckResult:
    """Two short matches against the reference bot with the bot's seats played from a pool, on one referee that
    outlives them, as a league worker plays a persistent bot: its processes for seats 0 and 2 must each play a
    seat of both matches (given the same referee address twice)."""
    check, title = PERSISTENT
    folder = own_log_folder(log_dir / "persistent")
    pool = BotPool(config.sandbox, log_dir=folder)
    referee = EmbeddedReferee()
    problems: list[str] = []
    try:
        for number in range(2):
            if number and not pool.freezers():
                await asyncio.sleep(PERSISTENT_PAUSE_S)
            match_logs = own_log_folder(folder / f"match{number + 1}")
            where = f"match {number + 1} of 2"
            try:
                played = await play_programs(
                    (program, REFERENCE),
                    config.rules(SHORT_MATCH, {}),
                    seed + number,
                    log_dir=match_logs,
                    join_timeout_s=config.join_timeout_s,
                    sandbox=config.sandbox,
                    pool=pool,
                    referee=referee,
                )
            except RefereeFailure as failure:
                problems.append(f"{where}: the match was stopped: {failure}")
                continue
            problems += [
                f"{where}: seat {incident.seat}: {incident.cause}: {incident.detail}"
                for incident in played.incidents
                if incident.seat in (0, 2) and incident.cause is not IncidentCause.STALL
            ]
        started = pool.started
    finally:
        await asyncio.to_thread(pool.close)  # it waits for the host's play lock: another job's match may hold it
        await referee.close()
    if not problems and started > 2:
        problems.append(
            f"its processes did not last: {started} were started for 2 seats each of 2 processes (a persistent bot"
            " reads the next seat line on its standard input after a seat, and exits only at the end of it)"
        )
    if problems:
        tails = [line for log in sorted(folder.glob("*.log")) for line in output_tail(log)]
        summary = problems[0] if len(problems) == 1 else f"{problems[0]} (and {len(problems) - 1} more)"
        return CheckResult(check, title, Status.FAIL, summary, (*problems[1:8], PERSISTENT_HINT, *tails))
    return CheckResult(
        check,
        title,
        Status.PASS,
        "with MUS_SEATS=stdin, its 2 processes (seats 0 and 2) each played a seat of 2 matches, given on standard"
        " input, without an incident",
    )


# ---------------------------------------------------------------------------------------------- the run


async def run_check(
    program: BotProgram,
    config: CheckConfig,
    *,
    on_progress: Callable[[str], None] | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
) -> CheckReport:
    """Run every check on `program` and return the verdicts; `on_progress` hears what is being played,
    `on_result` each verdict as soon as it is known. Raises `LaunchError` when a program cannot be started
    (or its sandbox fails): that is this machine's problem, not a verdict on the bot."""
    log_dir = own_log_folder(config.log_dir or Path(tempfile.mkdtemp(prefix="mus-check-logs-")).resolve())
    results: list[CheckResult] = []

    def report(result: CheckResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    def progress(text: str) -> None:
        if on_progress is not None:
            on_progress(text)

    variants = [variant for variant in VARIANTS if variant.name in config.variants]
    bot_name = ""

    def named(played: _Played) -> None:
        nonlocal bot_name
        joins = [join for record in played.watch.seats.values() for join in record.joins]
        bot_name = bot_name or next((join.bot_name for join in joins if join.bot_name), "")

    plan = [(variant, number) for variant in variants for number in range(config.matches)]
    total = len(plan) + 1
    jobs = asyncio.Semaphore(max(config.jobs, 1))
    played_count = 0

    async def play(index: int, rules: Rules, *, team: int, probe: bool, label: str, frames: bool) -> _Played:
        nonlocal played_count
        async with jobs:
            one = await _play(
                program,
                rules,
                config.seed + index,
                bot_team=team,
                probe=probe,
                label=label,
                config=config,
                log_dir=log_dir,
                frames=frames,
            )
        played_count += 1
        named(one)
        progress(f"{played_count} of {total} matches played")
        return one

    def legal_match(index: int) -> Coroutine[Any, Any, _Played]:
        variant, number = plan[index]
        label = f"{index + 1:02d}-{variant.name}"
        # Every other match offers frames, as a league worker's referee does; the others gRPC alone, as the
        # standalone referee: a bot plays on both in a league.
        rules = config.rules(SHORT_MATCH, variant.options)
        return play(index, rules, team=number % 2, probe=False, label=label, frames=index % 2 == 0)

    def probe_match() -> Coroutine[Any, Any, _Played]:
        label = f"{len(plan) + 1:02d}-probes"
        return play(len(plan), config.rules(PROBE_MATCH, {}), team=0, probe=True, label=label, frames=False)

    progress("the handshake: the first match")
    first = await (legal_match(0) if plan else probe_match())
    shake = _handshake(first, config.join_timeout_s, bridged=tuple(program.command[1:3]) == STDIO_BRIDGE[:2])
    report(shake)
    times = DecisionTimes(0, None, None, config.decision_timeout_s)
    if shake.status is not Status.PASS:
        skipped = "skipped: the handshake failed"
        for variant in variants:
            report(CheckResult(f"legal_play:{variant.name}", f"legal play: {variant.name}", Status.SKIP, skipped))
        for result in _probe_results(None, skipped):
            report(result)
        report(CheckResult("deadline", "answers within the deadline", Status.SKIP, skipped))
        if program.persistent:
            report(CheckResult(*PERSISTENT, Status.SKIP, skipped))
    else:
        # The other matches, `config.jobs` at a time: a match's time is mostly its four processes starting.
        probing = asyncio.create_task(probe_match()) if plan else None
        matches = [asyncio.create_task(legal_match(index)) for index in range(1, len(plan))]
        try:
            legal: list[_Played] = [first] if plan else []
            for variant in variants:  # each variant's line as soon as its matches are over
                while len(legal) < len(plan) and plan[len(legal)][0] is variant:
                    legal.append(await matches[len(legal) - 1])
                of_variant = [one for (each, _), one in zip(plan, legal, strict=False) if each is variant]
                report(_legal_play(variant, of_variant, config.decision_timeout_s))
            probe = await probing if probing is not None else first
        finally:
            for task in [*matches, *([probing] if probing is not None else [])]:
                task.cancel()
            await asyncio.gather(*matches, *([probing] if probing is not None else []), return_exceptions=True)
        for result in _probe_results(probe):
            report(result)
        if legal:
            deadline, times = _deadline(legal, config.decision_timeout_s)
            report(deadline)
        if program.persistent:
            progress("a persistent bot: two more matches, its seats from one process each")
            report(await _persistent(program, config, log_dir, config.seed + len(plan) + 1))
    sandboxed = config.sandbox is not None
    return CheckReport(program.name, program.command, tuple(results), times, log_dir, sandboxed, bot_name)
