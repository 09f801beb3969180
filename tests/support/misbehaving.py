"""Misbehaving bots for the referee's tests: one program, one mode per misbehaviour.

Run like any hosted bot: `python -m tests.support.misbehaving MODE`, with `MUS_REFEREE` (host:port) and
`MUS_TOKEN` (its seat token) in the environment; `other_seat` also reads `MUS_OTHER_TOKEN`, and `MUS_SEED` seeds
the random policy. It speaks the bare wire (a raw Play stream with identity serializers, so it can send bytes
that are not a PlayRequest) and, when it is done, prints one JSON line on stdout: its `Report`, everything it
sent and every status and rejection it got back, for the test to check against the referee's records.

Any mode also honours `MUS_HOLD_FILE`: it holds its first answer until that file exists, which lets a test
keep a table from ending before another one has started.

Modes (each plays its own seat with the random policy of tests/support/wire.py unless said otherwise):
- random: plays normally.
- slow: answers each decision `MUS_SLOW_EXTRA_S` (default 0.12 s) after its decision time ran out, so it draws
  on its bank until the bank is gone and its decisions time out.
- silent: joins and never answers.
- crash: answers `MUS_CRASH_AFTER` decisions (default 3), then exits with status 1 on the next one.
- illegal: always answers with an illegal action (a bet past the cap, a card it does not hold, the wrong
  declaration, a kind not legal now, a kind that is not a Mus action), again after every rejection.
- out_of_turn: plays its decisions, and meanwhile acts when not asked: with a stale id (its own last answered
  decision), another seat's decision id, id 0, an id never issued; and, when asked, with a made-up id first.
- wrong_token: tries a random token and an empty token, then joins with its own and plays.
- other_seat: plays its seat and, once the match runs, tries to take `MUS_OTHER_TOKEN`'s seat and its own seat
  again on second streams.
- garbage: sends bytes that are not a PlayRequest: as the first message of a stream, then in a running match.
- oversized: sends a message above the referee's 64 KiB limit: as the first message, then in a running match.
- sena_flood: on its first decision, answers with a legal kind carrying 60,000 unknown señas (60 KB, under the
  64 KiB message limit, far over max_senas_per_window), then never comes back (over grpc's synchronous API: see
  `flood`).
- flood: once the match runs, sends thousands of pings and stale acts as fast as the stream takes them (over
  grpc's synchronous API: see `flood`).
"""

from __future__ import annotations

import asyncio
import faulthandler
import json
import os
import queue
import random
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import grpc

from mus.v1 import play_pb2, play_pb2_grpc
from mus.v1 import types_pb2 as pb
from tests.support.stream import PlayStream, StreamResult
from tests.support.wire import random_wire_action

REPO = Path(__file__).resolve().parents[2]
GARBAGE = b"\x0a\xff\xff\xff\xff\x0f"
"""Field 1 (join) with a length that runs past the end: no protobuf parser accepts it."""
OVERSIZED_BYTES = 100 * 1024
"""Well above the referee's MAX_MESSAGE_BYTES (64 KiB)."""
NEVER_ISSUED_ID = 10**15
FLOOD_MESSAGES = 5000


@dataclass
class DecisionNote:
    decision_id: int
    kind: str
    decision_time_left_ms: int
    bank_time_left_ms: int


@dataclass
class ActNote:
    """One Act sent: `category` says what it was meant to test ("in_turn" for an honest answer)."""

    decision_id: int
    kind: str
    category: str
    seconds_after_request: float = 0.0


@dataclass
class RejectionNote:
    decision_id: int
    code: str
    reason: str
    fault_counted: bool
    decision_open: bool
    legal_actions: int


@dataclass
class Report:
    """What one bot process did and saw; printed as one JSON line when it ends."""

    mode: str
    seat: int | None = None
    resumed: bool = False
    streams: list[StreamResult] = field(default_factory=list)
    decisions: list[DecisionNote] = field(default_factory=list)
    acts: list[ActNote] = field(default_factory=list)
    rejections: list[RejectionNote] = field(default_factory=list)
    event_seqs: list[int] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)
    """Every message received but pongs, in order: its kind, and for an event its payload ("event:fault")."""
    pongs: int = 0
    flood_seconds: float = 0.0
    """flood: from its first message to the end of the stream."""
    outcome: str = ""
    """The Outcome message received, serialized as hex ("" when none came)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Report:
        data: dict[str, Any] = json.loads(text)
        return cls(
            mode=data["mode"],
            seat=data["seat"],
            resumed=data["resumed"],
            streams=[StreamResult(**item) for item in data["streams"]],
            decisions=[DecisionNote(**item) for item in data["decisions"]],
            acts=[ActNote(**item) for item in data["acts"]],
            rejections=[RejectionNote(**item) for item in data["rejections"]],
            event_seqs=data["event_seqs"],
            timeline=data["timeline"],
            pongs=data["pongs"],
            flood_seconds=data["flood_seconds"],
            outcome=data["outcome"],
        )

    def stream(self, label: str) -> StreamResult:
        found = [result for result in self.streams if result.label == label]
        assert len(found) == 1, f"{self.mode}: expected one stream {label!r}, got {self.streams}"
        return found[0]

    def outcome_message(self) -> pb.Outcome | None:
        return pb.Outcome.FromString(bytes.fromhex(self.outcome)) if self.outcome else None


# ---------------------------------------------------------------------------------------------- bots


class SeatBot:
    """Plays one seat over one stream; the modes override the hooks."""

    def __init__(self, channel: grpc.aio.Channel, token: str, report: Report, rng: random.Random) -> None:
        self.channel = channel
        self.token = token
        self.report = report
        self.rng = rng
        self.stream = PlayStream(channel, "seat")
        self.requests: dict[int, play_pb2.DecisionRequest] = {}
        self.asked_at: dict[int, float] = {}
        self.open: set[int] = set()
        self.answered: list[int] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.hold = os.environ.get("MUS_HOLD_FILE")

    async def wait_for_hold(self) -> None:
        """The bot's own wait for the test's signal (a file), polled as a bot would poll anything."""
        assert self.hold is not None
        path, self.hold = Path(self.hold), None
        while not path.exists():
            await asyncio.sleep(0.01)

    async def run(self) -> int:
        await self.stream.join(self.token)
        async for response in self.stream.messages():
            kind = response.WhichOneof("message")
            if kind == "event":
                self.report.timeline.append(f"event:{response.event.WhichOneof('payload')}")
            elif kind != "pong":
                self.report.timeline.append(str(kind))
            if kind == "joined":
                self.report.seat = response.joined.seat
                self.report.resumed = response.joined.resumed
            elif kind == "event":
                self.report.event_seqs.append(response.event.seq)
                await self.on_event(response.event)
            elif kind == "decision_request":
                request = response.decision_request
                self.requests[request.decision_id] = request
                self.asked_at[request.decision_id] = time.monotonic()
                self.open.add(request.decision_id)
                self.report.decisions.append(
                    DecisionNote(
                        request.decision_id,
                        pb.DecisionKind.Name(request.kind),
                        request.decision_time_left_ms,
                        request.bank_time_left_ms,
                    )
                )
                if self.hold is not None:
                    await self.wait_for_hold()
                await self.on_decision(request)
            elif kind == "action_rejected":
                rejection = response.action_rejected
                self.report.rejections.append(
                    RejectionNote(
                        rejection.decision_id,
                        play_pb2.RejectionCode.Name(rejection.code),
                        rejection.reason,
                        rejection.fault_counted,
                        rejection.decision_open,
                        len(rejection.legal_actions),
                    )
                )
                await self.on_rejection(rejection)
            elif kind == "outcome":
                self.report.outcome = response.outcome.SerializeToString().hex()
            elif kind == "pong":
                self.report.pongs += 1
        for task in self.tasks:
            task.cancel()
        self.report.streams.append(await self.stream.result())
        return 0

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def act(self, decision_id: int, action: pb.Action, category: str = "in_turn") -> None:
        asked = self.asked_at.get(decision_id)
        after = time.monotonic() - asked if asked is not None and category == "in_turn" else 0.0
        self.report.acts.append(ActNote(decision_id, kind_name(action.kind), category, round(after, 4)))
        if category == "in_turn":
            self.open.discard(decision_id)
            self.answered.append(decision_id)
        await self.stream.send(play_pb2.PlayRequest(act=play_pb2.Act(decision_id=decision_id, action=action)))

    async def on_event(self, event: pb.Event) -> None:
        pass

    async def on_decision(self, request: play_pb2.DecisionRequest) -> None:
        await self.act(request.decision_id, random_wire_action(self.rng, request))

    async def on_rejection(self, rejection: play_pb2.ActionRejected) -> None:
        pass


class SlowBot(SeatBot):
    """Answers every decision a little after its own time ran out: the bank pays until it is empty."""

    extra_s = float(os.environ.get("MUS_SLOW_EXTRA_S", "0.12"))

    async def on_decision(self, request: play_pb2.DecisionRequest) -> None:
        async def late() -> None:
            await asyncio.sleep(request.decision_time_left_ms / 1000 + self.extra_s)
            await self.act(request.decision_id, random_wire_action(self.rng, request))

        self.spawn(late())


class SilentBot(SeatBot):
    async def on_decision(self, request: play_pb2.DecisionRequest) -> None:
        pass


class CrashBot(SeatBot):
    """Plays a few decisions, then dies mid-stream with a decision open, as a crashing program does."""

    after = int(os.environ.get("MUS_CRASH_AFTER", "3"))

    async def on_decision(self, request: play_pb2.DecisionRequest) -> None:
        if len(self.answered) >= self.after:
            print(self.report.to_json(), flush=True)
            os._exit(1)
        await super().on_decision(request)


def kind_name(kind: int) -> str:
    """An action kind's name, or its number when it is not a Mus action kind."""
    return pb.ActionKind.Name(kind) if kind in pb.ActionKind.values() else str(kind)  # type: ignore[arg-type]


def card_not_held(cards: list[pb.Card]) -> pb.Card:
    held = {(card.rank, card.suit) for card in cards}
    for suit in (pb.SUIT_OROS, pb.SUIT_COPAS, pb.SUIT_ESPADAS, pb.SUIT_BASTOS):
        for rank in (1, 2, 3, 4, 5, 6, 7, 10, 11, 12):
            if (rank, suit) not in held:
                return pb.Card(rank=rank, suit=suit)
    raise AssertionError("a hand of four cannot hold the whole deck")


def illegal_actions(request: play_pb2.DecisionRequest) -> list[pb.Action]:
    """Actions that are certainly not legal for this decision, of several sorts."""
    legal = {entry.kind: entry for entry in request.legal_actions}
    out: list[pb.Action] = []
    # Malformed, whatever the state: an amount on a legal kind that takes none (types.proto, Action.amount).
    plain = next(kind for kind in legal if kind not in (pb.ACTION_KIND_ENVIDO, pb.ACTION_KIND_MAS))
    out.append(pb.Action(kind=plain, amount=5))
    for kind in (pb.ACTION_KIND_ENVIDO, pb.ACTION_KIND_MAS):
        if kind in legal and legal[kind].max_amount:
            out.append(pb.Action(kind=kind, amount=legal[kind].max_amount + 1))  # past the stake cap
    if pb.ACTION_KIND_DISCARD in legal:
        out.append(pb.Action(kind=pb.ACTION_KIND_DISCARD, cards=[card_not_held(list(request.view.cards))]))
    if pb.ACTION_KIND_DECLARE in legal:
        out.append(pb.Action(kind=pb.ACTION_KIND_DECLARE, has_jugada=not legal[pb.ACTION_KIND_DECLARE].has_jugada))
    wrong_kind = next(kind for kind in (pb.ACTION_KIND_QUIERO, pb.ACTION_KIND_MUS) if kind not in legal)
    out.append(pb.Action(kind=wrong_kind))
    out.append(pb.Action(kind=99))  # type: ignore[arg-type]  # not a Mus action at all
    return out


class IllegalBot(SeatBot):
    """Never sends a legal action; after a rejection that leaves the decision open, tries another."""

    attempts = 0

    async def send_illegal(self, decision_id: int) -> None:
        choices = illegal_actions(self.requests[decision_id])
        action = choices[self.attempts % len(choices)]
        self.attempts += 1
        await self.act(decision_id, action, "illegal")

    async def on_decision(self, request: play_pb2.DecisionRequest) -> None:
        await self.send_illegal(request.decision_id)

    async def on_rejection(self, rejection: play_pb2.ActionRejected) -> None:
        if rejection.decision_open and rejection.decision_id in self.requests:
            await self.send_illegal(rejection.decision_id)


class OutOfTurnBot(SeatBot):
    """Answers its own decisions honestly, and acts when it was not asked, with ids it was never given.

    One refused Act at a time: it sends the next only once the last was answered, so the Act that makes its
    team forfeit is its last write (a write racing the end of the stream would hide the status, grpc#36066).
    """

    CATEGORIES = ("stale", "another_seats_id", "zero", "never_issued", "wrong_id_while_asked")
    """Tried in this order, again and again, each at its first chance: an event while not asked, or a decision."""
    ENDINGS = frozenset({"fault", "game_ended", "vaca_ended", "match_ended", "forfeit"})
    """Events after which the stream may end at once: no Act is sent on them. A Fault is one: the fault that
    makes the team forfeit is followed only by the match's end (its refusal was answered just before it)."""
    limit = 40

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.turn = 0
        self.events_seen = 0
        self.unanswered = 0
        self.deferred: play_pb2.DecisionRequest | None = None

    @property
    def category(self) -> str:
        return self.CATEGORIES[self.turn % len(self.CATEGORIES)]

    def another_seats_id(self) -> int | None:
        """An id below this seat's latest one that was not this seat's: it was issued to another seat."""
        mine = set(self.requests)
        return next((candidate for candidate in range(max(mine, default=0), 0, -1) if candidate not in mine), None)

    def may_send(self) -> bool:
        return not self.unanswered and self.turn < self.limit

    async def send_refused(self, decision_id: int, action: pb.Action) -> None:
        category = self.category
        self.turn += 1
        self.unanswered += 1
        await self.act(decision_id, action, category)

    async def on_event(self, event: pb.Event) -> None:
        self.events_seen += 1
        if self.open or not self.may_send() or self.events_seen % 3 or event.WhichOneof("payload") in self.ENDINGS:
            return
        decision_id = {
            "stale": self.answered[-1] if self.answered else None,
            "another_seats_id": self.another_seats_id(),
            "zero": 0,
            "never_issued": NEVER_ISSUED_ID + self.turn,
            "wrong_id_while_asked": None,
        }[self.category]
        if decision_id is not None:
            await self.send_refused(decision_id, pb.Action(kind=pb.ACTION_KIND_PASO))

    async def on_decision(self, request: play_pb2.DecisionRequest) -> None:
        if self.category == "wrong_id_while_asked" and self.may_send():
            self.deferred = request  # answered once the made-up Act below has been refused
            await self.send_refused(request.decision_id + 1_000_000, random_wire_action(self.rng, request))
            return
        await super().on_decision(request)

    async def on_rejection(self, rejection: play_pb2.ActionRejected) -> None:
        self.unanswered = max(self.unanswered - 1, 0)
        if self.deferred is not None:
            request, self.deferred = self.deferred, None
            await super().on_decision(request)


class WrongTokenBot(SeatBot):
    async def run(self) -> int:
        for label, token in (("random_token", secrets.token_urlsafe(24)), ("empty_token", "")):
            stream = PlayStream(self.channel, label)
            await stream.join(token)
            self.report.streams.append(await stream.refused())
        return await super().run()


class OtherSeatBot(SeatBot):
    """Once the match runs (all four seats are live), tries to take a seat that is held by another stream."""

    tried = False

    async def on_decision(self, request: play_pb2.DecisionRequest) -> None:
        if not self.tried:
            self.tried = True
            for label, token in (("stolen_seat", os.environ["MUS_OTHER_TOKEN"]), ("own_seat_again", self.token)):
                stream = PlayStream(self.channel, label)
                await stream.join(token)
                # Were the Join accepted (a first message arrives), this would act for the seat. The Act is sent
                # only then: a write after the referee closed the stream makes grpc.aio's client report INTERNAL
                # instead of the referee's status (grpc/grpc#36066).
                async for _ in stream.messages():
                    act = play_pb2.Act(decision_id=request.decision_id, action=pb.Action(kind=pb.ACTION_KIND_NO_MUS))
                    await stream.send(play_pb2.PlayRequest(act=act))
                    break
                self.report.streams.append(await stream.refused())
        await super().on_decision(request)


class GarbageBot(SeatBot):
    sent = False

    async def run(self) -> int:
        first = PlayStream(self.channel, "garbage_first")
        await first.send_bytes(GARBAGE)
        self.report.streams.append(await first.refused())
        return await super().run()

    async def on_decision(self, request: play_pb2.DecisionRequest) -> None:
        if not self.sent:
            self.sent = True
            await self.stream.send_bytes(GARBAGE)


class OversizedBot(SeatBot):
    sent = False

    async def run(self) -> int:
        first = PlayStream(self.channel, "oversized_first")
        await first.join(self.token, bot_name="x" * OVERSIZED_BYTES)
        self.report.streams.append(await first.refused())
        return await super().run()

    async def on_decision(self, request: play_pb2.DecisionRequest) -> None:
        if not self.sent:
            self.sent = True
            cards = [pb.Card(rank=1, suit=pb.SUIT_OROS)] * (OVERSIZED_BYTES // 4)
            action = pb.Action(kind=pb.ACTION_KIND_DISCARD, cards=cards)
            act = play_pb2.PlayRequest(act=play_pb2.Act(decision_id=request.decision_id, action=action))
            assert act.ByteSize() > OVERSIZED_BYTES
            await self.stream.send(act)


SENA_FLOOD = 60_000
"""Unknown señas in one Act: a varint each, 60 KB, just under the referee's 64 KiB message limit."""


def flood(address: str, token: str, report: Report, rng: random.Random, *, senas: bool = False) -> int:
    """Answer the first decision, then send pings and stale re-sends of that answer as fast as grpc takes them; or,
    with `senas`, answer it with `SENA_FLOOD` unknown señas (the attack of issue 9) and send nothing more.

    These modes use grpc's synchronous API on purpose: when a write races the end of the stream, as a flood
    always does and as a 60 KB message the referee refuses as soon as it has read it may, a grpc.aio client
    reports INTERNAL "Internal error from Core" in place of the status the server sent (grpc/grpc#36066), and the
    test must see the referee's real answer.
    """
    outgoing: queue.Queue[play_pb2.PlayRequest | None] = queue.Queue()
    join = play_pb2.Join(seat_token=token, bot_name="flood", bot_version="1", protocol_version=1)
    outgoing.put(play_pb2.PlayRequest(join=join))

    def requests() -> Iterator[play_pb2.PlayRequest]:
        while (message := outgoing.get()) is not None:
            yield message

    received = 0
    flooding = False
    started = 0.0
    channel = grpc.insecure_channel(address)
    try:
        call = play_pb2_grpc.PlayServiceStub(channel).Play(requests())
        try:
            for response in call:
                received += 1
                kind = response.WhichOneof("message")
                if kind == "joined":
                    report.seat = response.joined.seat
                elif kind == "event":
                    report.event_seqs.append(response.event.seq)
                elif kind == "pong":
                    report.pongs += 1
                elif kind == "action_rejected":
                    rejection = response.action_rejected
                    report.rejections.append(
                        RejectionNote(
                            rejection.decision_id,
                            play_pb2.RejectionCode.Name(rejection.code),
                            rejection.reason,
                            rejection.fault_counted,
                            rejection.decision_open,
                            len(rejection.legal_actions),
                        )
                    )
                elif kind == "decision_request" and not flooding:
                    flooding = True
                    request = response.decision_request
                    act = play_pb2.Act(decision_id=request.decision_id, action=random_wire_action(rng, request))
                    if senas:
                        act.action.senas.extend([99] * SENA_FLOOD)  # type: ignore[list-item]
                        assert 60_000 <= play_pb2.PlayRequest(act=act).ByteSize() < 64 * 1024
                    category = "sena_flood" if senas else "in_turn"
                    report.acts.append(ActNote(request.decision_id, kind_name(act.action.kind), category))
                    outgoing.put(play_pb2.PlayRequest(act=act))
                    started = time.monotonic()
                    if senas:
                        continue
                    for index in range(FLOOD_MESSAGES):
                        ping = play_pb2.PlayRequest(ping=play_pb2.Ping(nonce=index))
                        outgoing.put(play_pb2.PlayRequest(act=act) if index % 10 == 9 else ping)
        except grpc.RpcError:
            pass
        finally:
            outgoing.put(None)
        report.flood_seconds = time.monotonic() - started if flooding else 0.0
        report.streams.append(StreamResult("seat", call.code().name, call.details() or "", received))
    finally:
        close_or_leave(channel)
    return 0


CLOSE_WAIT_S = 5.0
"""How long `close_or_leave` waits for grpc to close the flood's channel."""


def close_or_leave(channel: grpc.Channel) -> None:
    """Close the channel, or leave it to the process's end (`main`'s `os._exit`) if grpc has not closed it within
    CLOSE_WAIT_S, with every thread's stack on stderr. Once in about ten CI runs a flood bot never ended after
    the referee had cut its stream: the referee's answer is what the test checks, not grpc's client threads."""
    closer = threading.Thread(target=channel.close, daemon=True)
    closer.start()
    closer.join(CLOSE_WAIT_S)
    if closer.is_alive():
        print(f"grpc had not closed the channel after {CLOSE_WAIT_S:g} s; left to the process's end:", file=sys.stderr)
        faulthandler.dump_traceback(all_threads=True)


BOTS: dict[str, Callable[[grpc.aio.Channel, str, Report, random.Random], SeatBot]] = {
    "random": SeatBot,
    "slow": SlowBot,
    "silent": SilentBot,
    "crash": CrashBot,
    "illegal": IllegalBot,
    "out_of_turn": OutOfTurnBot,
    "wrong_token": WrongTokenBot,
    "other_seat": OtherSeatBot,
    "garbage": GarbageBot,
    "oversized": OversizedBot,
}
MODES = (*BOTS, "flood", "sena_flood")


async def main(mode: str) -> int:
    report = Report(mode)
    rng = random.Random(int(os.environ.get("MUS_SEED", "0")))
    address, token = os.environ["MUS_REFEREE"], os.environ["MUS_TOKEN"]
    if mode in ("flood", "sena_flood"):
        status = await asyncio.to_thread(flood, address, token, report, rng, senas=mode == "sena_flood")
        print(report.to_json(), flush=True)
        sys.stderr.flush()
        os._exit(status)  # not waiting on grpc's threads at the interpreter's exit (`close_or_leave`)
    async with grpc.aio.insecure_channel(address) as channel:
        status = await BOTS[mode](channel, token, report, rng).run()
    print(report.to_json(), flush=True)
    return status


# ---------------------------------------------------------------------------------------------- the launcher side


@dataclass
class BotRun:
    """A finished bot process: its exit status, its report and what it wrote on stderr."""

    mode: str
    returncode: int
    report: Report | None
    stderr: str


async def launch(
    mode: str, address: str, token: str, *, seed: int = 0, env: dict[str, str] | None = None
) -> asyncio.subprocess.Process:
    """Start one bot process the way the launcher starts hosted bots: MUS_REFEREE and MUS_TOKEN."""
    environment = {**os.environ, "MUS_REFEREE": address, "MUS_TOKEN": token, "MUS_SEED": str(seed), **(env or {})}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.misbehaving",
        mode,
        cwd=REPO,
        env=environment,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


COLLECT_S = 30.0
"""How long a misbehaving bot may take to end, less than its tests' own time limits: one that has not ended is
killed, and its stderr, with every thread's stack, shown (a CI run's flood bot never ended, and only its test's
timeout said anything)."""


async def collect(mode: str, process: asyncio.subprocess.Process) -> BotRun:
    """Wait for the process to exit and read its report; one still running after COLLECT_S is killed, and the
    failure quotes what it wrote on stderr."""
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), COLLECT_S)
    except TimeoutError:
        process.send_signal(signal.SIGUSR1)  # its threads' stacks to stderr (`faulthandler`, below)
        await asyncio.sleep(0.5)
        process.kill()
        _, stderr = await process.communicate()
        raise AssertionError(
            f"the {mode} bot had not ended after {COLLECT_S:g} s; its stderr:\n{stderr.decode(errors='replace')}"
        ) from None
    lines = stdout.decode().strip().splitlines()
    report = Report.from_json(lines[-1]) if lines else None
    assert process.returncode is not None
    return BotRun(mode, process.returncode, report, stderr.decode())


if __name__ == "__main__":
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # where it hangs, should it (`collect`)
    if len(sys.argv) != 2 or sys.argv[1] not in MODES:
        sys.exit(f"usage: python -m tests.support.misbehaving {{{'|'.join(MODES)}}}")
    sys.exit(asyncio.run(main(sys.argv[1])))
