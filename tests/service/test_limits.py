"""What one seat's messages can make a table keep is capped (issue 9): past the cap, the seat whose messages made
the record grow the most forfeits.

The table is driven in-process (its outboxes are plain queues): the cap is lowered to just above what the table
already holds right before the flooding seat's message, so the seat that crosses it is known.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import weakref
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from mus.v1 import play_pb2, watch_pb2
from mus.v1 import types_pb2 as pb
from referee import wire
from referee.causes import IncidentCause
from referee.engine.actions import ActionKind
from referee.engine.match import Match, StepKind
from referee.engine.replay import dumps_record
from referee.engine.rules import Rules
from referee.service import servicer as servicer_module
from referee.service import table as table_module
from referee.service.servicer import (
    PlayServicer,
    RaisingContext,
    Referee,
    StreamAborted,
    WatchServicer,
    table_replay_message,
)
from referee.service.table import Outbox, Table, TableStatus
from tests.service.conftest import Running, with_referee
from tests.support.referee_checks import assert_replays_legally, engine_faults, forfeiting_team, match_of, until
from tests.support.stream import PlayStream, first_kind
from tests.support.wire import WireLog, play_seat

ROOMY = Rules.from_options({"decision_timeout_s": 30.0, "time_bank_s": 30.0, "vacas_to_win_match": 3})
FLOODER = 1


def stray_senas_action(table: Table, seat: int) -> pb.Action:
    """A legal action with as many señas as the rules let one Act carry, unknown ones (each one rejected)."""
    match = match_of(table)
    action = wire.action_to_proto(match.legal_actions(seat)[0])
    del action.senas[:]
    action.senas.extend([99] * table.rules.max_senas_per_window)  # type: ignore[list-item]
    return action


async def play_until_flooder_asked(table: Table, decisions: int) -> None:
    """Answer every open decision with a legal action (the flooder with its señas) `decisions` times."""
    for _ in range(decisions):
        seat = sorted(table.decisions)[0]
        decision = table.decisions[seat]
        action = (
            stray_senas_action(table, seat)
            if seat == FLOODER
            else wire.action_to_proto(match_of(table).legal_actions(seat)[0])
        )
        table.act(seat, decision.decision_id, action)
        assert table.status is TableStatus.RUNNING
    while FLOODER not in table.decisions:
        seat = sorted(table.decisions)[0]
        table.act(seat, table.decisions[seat].decision_id, wire.action_to_proto(match_of(table).legal_actions(seat)[0]))


async def running_table() -> Table:
    table = Table("t", ROOMY, 7, ["a", "b", "c", "d"])
    for seat in range(4):
        table.attach(seat, Outbox())
    assert table.status is TableStatus.RUNNING
    return table


def assert_flooder_forfeits_for_limit(table: Table) -> None:
    assert table.status is TableStatus.FINISHED
    assert engine_faults(table)[-1] == (FLOODER, "limit")
    assert forfeiting_team(table) == FLOODER % 2
    assert table.outcome is not None and table.outcome.termination == pb.MATCH_TERMINATION_FORFEIT
    assert any(fault.cause == pb.FAULT_CAUSE_LIMIT and fault.seat == FLOODER for fault in table.outcome.faults)
    assert match_of(table).log[-1].kind is StepKind.LIMIT
    assert_replays_legally(table)  # the forfeit is a step of the record: the match replays exactly


@pytest.mark.parametrize("cap", ["MAX_TABLE_EVENTS", "MAX_RECORD_BYTES"])
def test_the_seat_whose_message_crosses_the_tables_cap_forfeits_with_cause_limit(
    cap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> Table:
        table = await running_table()
        await play_until_flooder_asked(table, 12)
        held = len(match_of(table).events) if cap == "MAX_TABLE_EVENTS" else table.record_bytes
        monkeypatch.setattr(table_module, cap, held)  # the flooder's next message crosses it
        table.act(FLOODER, table.decisions[FLOODER].decision_id, stray_senas_action(table, FLOODER))
        return table

    assert_flooder_forfeits_for_limit(asyncio.run(scenario()))


def test_an_honest_seat_whose_legal_action_crosses_the_cap_a_flooder_filled_does_not_forfeit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seat charged is the one whose messages made the record grow the most, not the one whose message crosses
    the cap: a flooder could bring the record to the brink and leave an honest seat's next action to cross it."""

    async def scenario() -> Table:
        table = await running_table()
        await play_until_flooder_asked(table, 12)
        table.act(FLOODER, table.decisions[FLOODER].decision_id, stray_senas_action(table, FLOODER))
        honest = sorted(table.decisions)[0]
        assert honest != FLOODER
        monkeypatch.setattr(table_module, "MAX_RECORD_BYTES", table.record_bytes)  # its next message crosses it
        legal = wire.action_to_proto(match_of(table).legal_actions(honest)[0])
        table.act(honest, table.decisions[honest].decision_id, legal)
        return table

    table = asyncio.run(scenario())
    assert_flooder_forfeits_for_limit(table)
    assert "seat 1's flagged messages grew it the most" in match_of(table).log[-1].reason


def test_the_replay_a_table_produces_stays_within_its_counted_bytes() -> None:
    """The cap is on what the table counts; the replay the worker fetches must not be larger than that (plus its
    header), so MAX_RECORD_BYTES well under 16 MiB bounds every replay."""

    async def scenario() -> Table:
        table = await running_table()
        await play_until_flooder_asked(table, 60)
        return table

    table = asyncio.run(scenario())
    record = dumps_record(match_of(table))
    header = len(
        json.dumps({key: value for key, value in json.loads(record).items() if key not in ("steps", "events")})
    )
    assert len(record) <= table.record_bytes + header + 64
    assert table_module.MAX_RECORD_BYTES * 2 < 16 * 1024 * 1024  # workers/matches.py REPLAY_MESSAGE_BYTES


def test_a_finished_tables_replay_message_is_far_under_the_fetch_limit_at_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> Table:
        table = await running_table()
        await play_until_flooder_asked(table, 4)
        monkeypatch.setattr(table_module, "MAX_RECORD_BYTES", table.record_bytes)
        table.act(FLOODER, table.decisions[FLOODER].decision_id, stray_senas_action(table, FLOODER))
        return table

    table = asyncio.run(scenario())
    assert_flooder_forfeits_for_limit(table)
    assert table_replay_message(table).ByteSize() < 16 * 1024 * 1024


def test_an_act_problem_names_the_cap_on_senas_and_cards() -> None:
    async def scenario() -> tuple[str | None, str | None, str | None]:
        table = Table("t", ROOMY, 7, ["a", "b", "c", "d"])
        three = pb.Action(kind=pb.ACTION_KIND_MUS, senas=[pb.SENA_PARES] * 3)
        four = pb.Action(kind=pb.ACTION_KIND_MUS, senas=[pb.SENA_PARES] * 4)
        cards = pb.Action(kind=pb.ACTION_KIND_DISCARD, cards=[pb.Card(rank=1, suit=pb.SUIT_OROS)] * 5)
        return table.act_problem(three), table.act_problem(four), table.act_problem(cards)

    ok, senas, cards = asyncio.run(scenario())
    assert ok is None
    assert senas is not None and "max_senas_per_window" in senas
    assert cards is not None and "at most 4" in cards


STUBBORN = (
    ActionKind.MUS,
    ActionKind.DISCARD,
    ActionKind.PASO,
    ActionKind.NO_QUIERO,
    ActionKind.DECLARE,
    ActionKind.SENAS,
    ActionKind.NO_MUS,
)
"""The longest honest play: call mus at every chance, throw away the most cards, pass and refuse every bet."""


def stubborn_match(rules: Rules, seed: int) -> Match:
    """A match whose every seat plays `STUBBORN`'s first available kind (the largest discard)."""
    match = Match(rules, seed)
    while not match.is_over:
        seat = match.awaited()[0]
        legal = match.legal_actions(seat)
        kind = next(kind for kind in STUBBORN if any(action.kind is kind for action in legal))
        choices = [action for action in legal if action.kind is kind]
        match.apply(seat, max(choices, key=lambda action: len(action.cards)))
    return match


@pytest.mark.parametrize("seed", range(3))
def test_the_longest_honest_match_of_the_default_rules_stays_under_both_caps(seed: int) -> None:
    """docs/protocol.md, "Limits": a few hundred events as bots usually play; up to about 14,000 events and
    1.5 MB when every seat calls mus at every chance and passes every bet: far under the caps, so no honest
    seat forfeits for them under the default rules."""
    match = stubborn_match(Rules(), seed)
    assert match.outcome is not None
    assert 5_000 < len(match.events) < table_module.MAX_TABLE_EVENTS // 5
    assert len(dumps_record(match).encode()) < table_module.MAX_RECORD_BYTES // 3


def test_a_seat_that_pings_and_never_reads_is_cut_at_the_unread_cap_and_its_backlog_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only pings add to a seat's stream at its own say: past MAX_UNREAD messages unread, a ping ends the stream
    (RESOURCE_EXHAUSTED, a protocol error), the seat's requests are read no further, and what it left unread is
    dropped (a rejoin resends the events from next_seq) instead of the referee queueing pongs without end."""
    monkeypatch.setattr(servicer_module, "MAX_UNREAD", 50)
    sent = 0

    async def scenario() -> tuple[int, StreamAborted, list[tuple[int, IncidentCause]]]:
        referee = Referee()
        table = referee.create_table(Rules(), 5, ["a", "b", "c", "d"])

        async def requests() -> AsyncIterator[play_pb2.PlayRequest]:
            nonlocal sent
            join = play_pb2.Join(seat_token=table.seats[1].token, bot_name="b", protocol_version=1)
            yield play_pb2.PlayRequest(join=join)
            for nonce in range(300):  # within the rate limit's burst of 400
                sent += 1
                yield play_pb2.PlayRequest(ping=play_pb2.Ping(nonce=nonce))

        stream = PlayServicer(referee).Play(requests(), RaisingContext())
        await anext(stream)  # Joined: then the bot reads nothing while it pings
        await asyncio.sleep(0.2)
        received = 0
        with pytest.raises(StreamAborted) as aborted:
            async for _ in stream:
                received += 1
        incidents = [(incident.seat, incident.cause) for incident in table.incidents]
        table.cancel("the test is over")
        return received, aborted.value, incidents

    received, aborted, incidents = asyncio.run(scenario())
    assert (aborted.code, aborted.details) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "a ping with 50 messages unread")
    assert received == 0, "the backlog it never read is dropped, not written"
    assert sent == 51, "its requests are read no further than the ping past the cap"
    assert incidents == [(1, IncidentCause.PROTOCOL_ERROR)]


def test_a_stream_closed_for_a_protocol_error_whose_bot_does_not_read_is_cut_after_the_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bot whose transport is full (it does not read: gRPC's flow control blocks the write of its next message)
    never reads the end of its stream: after CLOSE_GRACE_S its seat is detached instead of held for as long as its
    connection lives, and the stream counts against its bot (MAX_UNREAD_ENDS) until its call ends."""
    monkeypatch.setattr(servicer_module, "MAX_UNREAD", 50)
    monkeypatch.setattr(servicer_module, "CLOSE_GRACE_S", 0.2)

    async def scenario() -> tuple[bool, bool, list[tuple[int, IncidentCause]], list[dict[str, int]]]:
        referee = Referee()
        table = referee.create_table(Rules(), 5, ["a", "b", "c", "d"])
        play = PlayServicer(referee)

        async def requests() -> AsyncIterator[play_pb2.PlayRequest]:
            join = play_pb2.Join(seat_token=table.seats[1].token, bot_name="b", protocol_version=1)
            yield play_pb2.PlayRequest(join=join)
            for nonce in range(300):
                yield play_pb2.PlayRequest(ping=play_pb2.Ping(nonce=nonce))
            await asyncio.Event().wait()  # the connection stays open

        async def stalled_transport() -> None:
            async with contextlib.aclosing(play.Play(requests(), RaisingContext())) as responses:
                async for _ in responses:
                    await asyncio.Event().wait()  # the bot never takes this message: the write never returns

        writer = asyncio.create_task(stalled_transport())
        await asyncio.sleep(0.1)
        charged = table.seats[1].outbox is not None and bool(table.incidents)  # charged, still attached
        counts = [dict(play.unread_ends)]
        await asyncio.sleep(0.3)
        incidents = [(incident.seat, incident.cause) for incident in table.incidents]
        detached = table.seats[1].outbox is None
        counts.append(dict(play.unread_ends))
        writer.cancel()  # its call ends (its connection closes)
        with contextlib.suppress(asyncio.CancelledError):
            await writer
        counts.append(dict(play.unread_ends))
        table.cancel("the test is over")
        return charged, detached, incidents, counts

    charged, detached, incidents, counts = asyncio.run(scenario())
    assert charged, "the protocol error is charged at once; the stream waits the grace for the bot to read"
    assert detached, "then the seat is detached"
    assert incidents == [(1, IncidentCause.PROTOCOL_ERROR)]
    assert counts == [{}, {"b": 1}, {}], "overdue, it counts against its bot until its call ends"


def test_a_bot_answering_its_decisions_faster_than_the_message_rate_is_never_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A review's instant bots, all four calling mus every time, had a seat's stream cut "too many messages": it
    had only answered its decisions, faster than 200 a second (stop 34). Those answers are not counted: with a
    rate of 1 a second and bursts of 2, four instant seats still play their match to the end over real gRPC."""
    monkeypatch.setattr(servicer_module, "MESSAGE_RATE", 1.0)
    monkeypatch.setattr(servicer_module, "MESSAGE_BURST", 2.0)

    async def scenario(running: Running) -> list[WireLog]:
        table = running.referee.create_table(Rules(), 7, ["a", "b", "c", "d"])
        tokens = [state.token for state in table.seats]
        return await asyncio.gather(*(play_seat(running.address, token, seat) for seat, token in enumerate(tokens)))

    logs = with_referee(scenario)
    assert all(log.outcome is not None for log in logs), "every seat saw the outcome"
    assert sum(len(log.of("decision_request")) for log in logs) > 4 * 2, "far more answers than the burst"


@pytest.mark.parametrize("batch", [False, True], ids=["per-message", "batched"])
def test_a_rejoin_converts_the_events_it_missed_as_its_stream_sends_them_not_when_it_joins(
    batch: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review rejoined three seats of an 8,000-event match again and again with next_seq 0: each resend, built
    whole in `attach`, held the referee's event loop 300 ms and more (stop 34). The join queues a `Backlog`; the
    stream converts it a chunk at a time, and the events are exactly those the seat saw, in order."""

    async def scenario() -> tuple[int, list[pb.Event], list[pb.Event]]:
        table = await running_table()
        await play_until_flooder_asked(table, 150)
        seat = 2
        old = table.seats[seat].outbox
        assert old is not None
        table.detach(seat, old)
        converted = 0
        message = Table._message

        def counted(self: Table, event: object, recipient: int | None) -> pb.Event:
            nonlocal converted
            converted += 1
            return message(self, event, recipient)  # type: ignore[arg-type]

        monkeypatch.setattr(Table, "_message", counted)
        outbox: Outbox = asyncio.Queue()
        table.attach(seat, outbox, 0, batch=batch, omit_hand_events=True)  # no view of the hand to rebuild
        at_join = converted
        queued = []
        while not outbox.empty():
            queued.append(outbox.get_nowait())
        backlogs = [item for item in queued if isinstance(item, table_module.Backlog)]
        assert len(backlogs) == 1 and queued.index(backlogs[0]) == 1, "right after Joined, before anything else"
        resent: list[pb.Event] = []
        for data in table.backlog_messages(backlogs[0]):
            response = play_pb2.PlayResponse.FromString(data)
            resent += list(response.update.events) if batch else [response.event]
        return at_join, resent, table.seat_messages(seat)

    at_join, resent, seen = asyncio.run(scenario())
    assert at_join == 0 and len(seen) > 2 * table_module.BACKLOG_CHUNK, (at_join, len(seen))
    assert resent == seen, "every event the seat saw, numbered as it saw them, once, in order"


def test_a_live_watch_converts_the_log_as_it_sends_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A review's Watches of a long live match each had its whole log converted before anything was sent, 260 ms
    of the referee's event loop (stop 34): the first response costs one conversion, and all of them come in order."""

    async def scenario() -> tuple[int, list[int], int]:
        referee = Referee()
        table = referee.create_table(ROOMY, 7, ["a", "b", "c", "d"])
        for seat in range(4):
            table.attach(seat, Outbox())
        await play_until_flooder_asked(table, 150)
        converted = 0
        convert = wire.event_to_proto

        def counted(*args: Any, **kwargs: Any) -> pb.Event:
            nonlocal converted
            converted += 1
            return convert(*args, **kwargs)

        monkeypatch.setattr(wire, "event_to_proto", counted)
        context: Any = SimpleNamespace(peer=lambda: "ipv4:10.0.0.1:1")
        watch: Any = WatchServicer(referee).Watch(watch_pb2.WatchRequest(table_id=table.table_id), context)
        seqs = [(await anext(watch)).event.seq]
        at_first = converted
        shown = table.live_count
        while len(seqs) < shown:
            seqs.append((await anext(watch)).event.seq)
        await watch.aclose()
        return at_first, seqs, shown

    at_first, seqs, shown = asyncio.run(scenario())
    assert at_first == 1 and shown > 100
    assert seqs == list(range(shown))


async def join_in_process(referee: Referee, table: Table, seat: int, next_seq: int) -> str:
    """A Join on a stream served in this process: the first response's kind, or the status that ended it."""

    async def requests() -> AsyncIterator[play_pb2.PlayRequest]:
        join = play_pb2.Join(seat_token=table.seats[seat].token, bot_name="x", protocol_version=1, next_seq=next_seq)
        yield play_pb2.PlayRequest(join=join)
        await asyncio.Event().wait()

    stream = PlayServicer(referee).Play(requests(), RaisingContext())
    try:
        first = await anext(stream)
    except StreamAborted as aborted:
        return aborted.code.name
    finally:
        await stream.aclose()
    return str(first.WhichOneof("message")) if isinstance(first, play_pb2.PlayResponse) else "bytes"


@pytest.mark.parametrize("per_table", [False, True])
def test_no_seats_joins_spend_a_resend_budget_another_table_of_a_workers_referee_reads(
    monkeypatch: pytest.MonkeyPatch, per_table: bool
) -> None:
    """A review's first half of a duplicate pair, its match over, sent Joins on its finished seat asking for a
    number of events of its choice; its twin, on the same worker's referee, read the number back from when its own
    probing Joins were refused "joined too often" (stop 45). A Join the table refuses anyway is charged nothing, on
    any referee; and on a worker's (`resends_per_table`) one table's joins never touch another's budget."""
    monkeypatch.setattr(servicer_module, "RESEND_BURST", 30.0)
    monkeypatch.setattr(servicer_module, "RESEND_RATE", 0.001)

    async def scenario() -> tuple[list[str], list[str], str]:
        referee = Referee(resends_per_table=per_table)
        first = referee.create_table(ROOMY, 7, ["a", "b", "a", "b"])
        for seat in range(4):
            first.attach(seat, Outbox())
        await play_until_flooder_asked(first, 40)
        seen = first.missed(0, 0)
        assert seen > 30
        live = [await join_in_process(referee, first, 0, 0) for _ in range(3)]  # its stream is still held
        first.cancel("over")
        over = [await join_in_process(referee, first, 0, 0) for _ in range(3)]
        twin = referee.create_table(ROOMY, 7, ["a", "b", "a", "b"])
        for seat in range(4):
            twin.attach(seat, Outbox())
        await play_until_flooder_asked(twin, 40)
        twin.detach(0, twin.seats[0].outbox)  # type: ignore[arg-type]
        rejoined = await join_in_process(referee, twin, 0, twin.missed(0, 0) - 25)  # 25 events: within 30
        twin.cancel("over")
        return live, over, rejoined

    live, over, rejoined = asyncio.run(scenario())
    assert live == ["ALREADY_EXISTS"] * 3 and over == ["FAILED_PRECONDITION"] * 3, "refused, not charged"
    assert rejoined == "joined", "the twin's seat rejoins: nothing of the first table's was charged to it"


def test_a_workers_referee_keeps_one_resend_budget_per_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """What one table's rejoins have had resent leaves another table's budget whole on a worker's referee, and
    spends the bot's one budget on any other."""
    monkeypatch.setattr(servicer_module, "RESEND_BURST", 30.0)
    monkeypatch.setattr(servicer_module, "RESEND_RATE", 0.001)

    async def rejoins(per_table: bool) -> list[str]:
        referee = Referee(resends_per_table=per_table)
        kinds = []
        for seed in (7, 8):
            table = referee.create_table(ROOMY, seed, ["a", "b", "a", "b"])
            for seat in range(4):
                table.attach(seat, Outbox())
            await play_until_flooder_asked(table, 40)
            table.detach(0, table.seats[0].outbox)  # type: ignore[arg-type]
            kinds.append(await join_in_process(referee, table, 0, table.missed(0, 0) - 25))
            table.cancel("over")
        return kinds

    assert asyncio.run(rejoins(True)) == ["joined", "joined"]
    assert asyncio.run(rejoins(False)) == ["joined", "RESOURCE_EXHAUSTED"]


def test_a_bots_rejoins_resend_only_so_many_events_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """A review's three seats rejoined a long match from seq 0 every second: converted as it was sent, the resend
    still kept the event loop busy, p99 227 ms (stop 34). A bot's joins have only so many events resent a second,
    over all its seats and tables; a rejoin that missed nothing costs nothing."""
    monkeypatch.setattr(servicer_module, "RESEND_BURST", 30.0)
    monkeypatch.setattr(servicer_module, "RESEND_RATE", 0.001)

    async def scenario(running: Running) -> tuple[list[tuple[str, str]], str]:
        table = running.referee.create_table(ROOMY, 7, ["a", "b", "c", "d"])
        for seat in range(4):
            table.attach(seat, Outbox())
        await play_until_flooder_asked(table, 40)
        seat = 2
        old = table.seats[seat].outbox
        assert old is not None
        table.detach(seat, old)
        seen = table.missed(seat, 0)
        assert seen > 30
        ends = []
        async with grpc.aio.insecure_channel(running.address) as channel:
            for next_seq in (seen - 20, 0):  # 20 events fit in the budget, then the whole log does not
                stream = PlayStream(channel, f"from {next_seq}")
                await stream.join(table.seats[seat].token, next_seq=next_seq)
                async for message in stream.messages():
                    ends.append((str(message.WhichOneof("message")), ""))
                    break
                else:
                    result = await stream.refused()
                    ends.append((result.code, result.details))
                stream.call.cancel()
                await until(lambda: table.seats[seat].outbox is None, what="the stream to end")
            first = await first_kind(channel, table.seats[seat].token, next_seq=seen)
        table.cancel("done")
        return ends, first

    ends, first = with_referee(scenario)
    assert ends[0] == ("joined", ""), ends
    code, details = ends[1]
    assert code == "RESOURCE_EXHAUSTED" and "a bot's joins resend at most" in details, ends
    assert first == "joined", "a rejoin that missed nothing is never refused"


def test_a_bot_whose_streams_never_read_their_end_is_refused_its_next_join(monkeypatch: pytest.MonkeyPatch) -> None:
    """A review's client kept its receive window shut: at every match its bot played, its two streams never took
    their end, and each call held one of the referee's call slots for as long as its connection lived
    (helper-84). Past MAX_UNREAD_ENDS such streams, the bot's next Join is refused; other bots join as ever."""
    monkeypatch.setattr(servicer_module, "CLOSE_GRACE_S", 0.2)
    monkeypatch.setattr(servicer_module, "MAX_UNREAD_ENDS", 1)
    shut = [("grpc.http2.lookahead_bytes", 1), ("grpc.http2.bdp_probe", 0)]

    async def scenario(running: Running) -> tuple[str, str, bool]:
        first = running.referee.create_table(Rules(), 5, ["shut", "b", "c", "d"])
        second = running.referee.create_table(Rules(), 6, ["shut", "b", "c", "d"])
        async with grpc.aio.insecure_channel(running.address, options=shut) as channel:
            stuck = PlayStream(channel, "shut")
            assert await stuck.join(first.seats[0].token)  # its Joined is never read: the window stays shut
            await until(lambda: first.seats[0].outbox is not None)
            first.cancel("over")  # its end is queued, and never read
            await until(lambda: first.seats[0].outbox is None)  # overdue: detached
            refused = await refused_join_of(running, second.seats[0].token)
            async with grpc.aio.insecure_channel(running.address) as other:
                joined = await first_kind(other, second.seats[1].token) == "joined"
            second.cancel("over")
            stuck.call.cancel()
            return refused.code, refused.details, joined

    code, details, joined = with_referee(scenario)
    assert code == "RESOURCE_EXHAUSTED" and "1 streams that never read their end" in details, (code, details)
    assert joined, "another bot joins as ever"


async def refused_join_of(running: Running, token: str) -> Any:
    async with grpc.aio.insecure_channel(running.address) as channel:
        stream = PlayStream(channel, "shut again")
        await stream.join(token)
        return await stream.refused()


def test_a_stream_that_reads_its_end_lets_go_of_its_table_at_once() -> None:
    """A stream's end starts its CLOSE_GRACE_S wait for the bot to read up to it (`MAX_UNREAD_ENDS`); read, the wait
    is over: the table is not kept for those seconds by every stream of every match (a worker plays dozens a
    second, and forgets each table once it has its result)."""

    async def scenario() -> bool:
        referee = Referee()
        table = referee.create_table(Rules(), 5, ["a", "b", "c", "d"])
        token = table.seats[1].token

        async def requests() -> AsyncIterator[play_pb2.PlayRequest]:
            yield play_pb2.PlayRequest(join=play_pb2.Join(seat_token=token, bot_name="b", protocol_version=1))
            await asyncio.Event().wait()

        async def read_to_the_end() -> None:
            with contextlib.suppress(StreamAborted):
                async for _ in PlayServicer(referee).Play(requests(), RaisingContext()):
                    pass

        reader = asyncio.create_task(read_to_the_end())
        await until(lambda: table.seats[1].outbox is not None)
        table.cancel("over")
        await reader
        gone = weakref.ref(table)
        referee.forget(table.table_id)
        table = None  # type: ignore[assignment]
        gc.collect()
        return gone() is None

    assert asyncio.run(scenario()), "the table is held after its stream read its end"
