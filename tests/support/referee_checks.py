"""What the referee's tests check about a table after (or during) a match, in one place.

The engine is the oracle: a table's match must replay from its rules, seed and step log to the very same
events (so no illegal action was ever applied), and what went over the wire must be what the engine says each
recipient may see.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from google.protobuf.message import Message

from mus.v1 import play_pb2
from mus.v1 import types_pb2 as pb
from referee.engine.actions import Action
from referee.engine.cards import Card
from referee.engine.events import Fault, Forfeit
from referee.engine.match import DecisionKind, Match, StepKind
from referee.engine.replay import apply_step, replay
from referee.engine.rules import IllegalActionPolicy
from referee.engine.senas import Sena
from referee.service.table import Backlog, Outbox, Table


async def until(predicate: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Wait for a state the table exposes no awaitable for (a stream detached, a timer fired)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.005)


def next_response(outbox: Outbox) -> play_pb2.PlayResponse | None:
    """A seat's next message as the seat reads it: the table sends most of them as wire bytes."""
    message = outbox.get_nowait()
    assert not isinstance(message, Backlog), "a rejoin's missed events: the stream expands them (backlog_messages)"
    return play_pb2.PlayResponse.FromString(message) if isinstance(message, bytes) else message


def match_of(table: Table) -> Match:
    assert table.match is not None, f"table {table.table_id} never started"
    return table.match


def engine_faults(table: Table) -> list[tuple[int, str]]:
    """The rules' faults (rules §13) as (seat, cause), from the engine's own events."""
    return [
        (fault.seat, fault.cause.value) for event in match_of(table).events if isinstance(fault := event.payload, Fault)
    ]


def incidents(table: Table) -> list[tuple[int, str]]:
    """The service's incidents as (seat, cause)."""
    return [(incident.seat, incident.cause) for incident in table.incidents]


def forfeiting_team(table: Table) -> int | None:
    forfeits = [forfeit.team for event in match_of(table).events if isinstance(forfeit := event.payload, Forfeit)]
    assert len(forfeits) <= 1
    return forfeits[0] if forfeits else None


def assert_replays_legally(table: Table) -> None:
    """Every applied action was legal where it was applied: the log replays to the same events.

    `replay` applies each ACTION step through `Match.apply`, which checks it and raises on an illegal one; the
    illegal actions the table refused are ILLEGAL steps (a fault, never applied).
    """
    match = match_of(table)
    replayed = replay(table.rules, table.seed, match.log)
    assert [event.to_json() for event in replayed.events] == [event.to_json() for event in match.events]
    assert replayed.outcome == match.outcome


def action_steps(table: Table, seat: int) -> list[Action]:
    return [
        step.action
        for step in match_of(table).log
        if step.seat == seat and step.kind is StepKind.ACTION and step.action is not None
    ]


@dataclass(frozen=True)
class ExpectedDecision:
    """A decision the table must have asked, with what the engine said at that point."""

    decision_id: int
    seat: int
    kind: DecisionKind
    legal: tuple[Action, ...]
    acceptable_senas: tuple[Sena, ...]
    events_before: int
    """How many engine events existed when it was asked."""
    hand: tuple[Card, ...]
    """The seat's four cards when it was asked."""


def expected_decisions(table: Table) -> dict[int, ExpectedDecision]:
    """Replay the table's log and open decisions as the table does (rules §13 clocks aside).

    A seat gets a new decision id whenever it becomes awaited without an open decision; an answer or a timeout
    closes it, and so does an illegal action under `illegal_action_policy = default_action`. Ids are issued in
    speaking order from 1. Valid for matches in which no seat was dropped (crash, disconnect, absent), whose
    decisions the table times out without ever opening them.
    """
    match = Match(table.rules, table.seed)
    opened: dict[int, int] = {}
    out: dict[int, ExpectedDecision] = {}

    def sync() -> None:
        awaited = match.awaited()
        for seat in list(opened):
            if seat not in awaited:
                del opened[seat]
        for seat in awaited:
            if seat not in opened:
                decision_id = len(out) + 1
                opened[seat] = decision_id
                kind = match.decision_kind(seat)
                assert kind is not None
                out[decision_id] = ExpectedDecision(
                    decision_id,
                    seat,
                    kind,
                    match.legal_actions(seat),
                    match.acceptable_senas(seat),
                    len(match.events),
                    match.hands[seat],
                )

    sync()
    policy = table.rules.illegal_action_policy
    for step in match_of(table).log:
        if step.kind is not StepKind.ILLEGAL or policy is IllegalActionPolicy.DEFAULT_ACTION:
            opened.pop(step.seat, None)
        apply_step(match, step)
        sync()
    return out


def describe_legal(expected: ExpectedDecision, max_senas: int, capped: bool) -> list[pb.LegalAction]:
    """The wire's short form of the engine's legal set, built independently of referee.wire."""
    by_kind: dict[str, list[Action]] = {}
    for action in expected.legal:
        by_kind.setdefault(action.kind.name, []).append(action)
    out: list[pb.LegalAction] = []
    for name, actions in by_kind.items():
        entry = pb.LegalAction(kind=pb.ActionKind.Value(f"ACTION_KIND_{name}"))
        if name in ("ENVIDO", "MAS"):
            entry.min_amount = min(action.amount for action in actions)
            entry.max_amount = max(action.amount for action in actions) if capped else 0
        elif name == "DISCARD":
            entry.min_cards = min(len(action.cards) for action in actions)
            entry.max_cards = max(len(action.cards) for action in actions)
        elif name == "DECLARE":
            entry.has_jugada = actions[0].has_jugada
        elif name in ("MUS", "NO_MUS", "SENAS"):
            entry.max_senas = max_senas
            if max_senas:
                entry.senas.extend(pb.Sena.Value(f"SENA_{sena.name}") for sena in expected.acceptable_senas)
        out.append(entry)
    return sorted(out, key=lambda entry: entry.kind)


def cards_in(message: Message, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], pb.Card]]:
    """Every Card anywhere inside a message, with the field path that leads to it."""
    if isinstance(message, pb.Card):
        yield path, message
        return
    for descriptor, value in message.ListFields():
        if descriptor.message_type is None:
            continue
        if descriptor.message_type.GetOptions().map_entry:
            continue
        if descriptor.is_repeated:
            for index, item in enumerate(value):
                yield from cards_in(item, (*path, f"{descriptor.name}[{index}]"))
        else:
            yield from cards_in(value, (*path, descriptor.name))


def scalars_in(message: Message) -> Iterator[object]:
    """Every scalar value anywhere inside a message (map values and keys included)."""
    for descriptor, value in message.ListFields():
        values = (
            value.values()
            if descriptor.message_type is not None and descriptor.message_type.GetOptions().map_entry
            else None
        )
        if values is not None:
            yield from value.keys()
            for item in values:
                if isinstance(item, Message):
                    yield from scalars_in(item)
                else:
                    yield item
        elif descriptor.message_type is not None:
            items = value if descriptor.is_repeated else [value]
            for item in items:
                yield from scalars_in(item)
        elif descriptor.is_repeated:
            yield from value
        else:
            yield value
