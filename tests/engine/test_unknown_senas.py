"""§12.3 item 4: a seña outside the vocabulary, or attached to an action that cannot carry it, is rejected to its
sender alone, is no fault, and replays."""

from __future__ import annotations

import pytest

from referee.engine.actions import Action, ActionKind
from referee.engine.errors import IllegalActionError
from referee.engine.events import EventKind
from referee.engine.match import DecisionKind, Match, StepKind
from referee.engine.replay import match_record, replay, replay_record
from referee.engine.rules import Rules
from referee.engine.senas import Sena
from tests.engine.test_options import answer_non_betting, scripted_match
from tests.support.events import fields

S01 = ["12o 12c 5o 1o", "11o 11c 10o 7o", "1c 2o 4o 4c", "10c 10e 7c 4e"]


def test_unknown_senas_are_rejected_privately_without_a_fault_and_the_log_replays_them() -> None:
    match = Match(Rules(), seed=3)
    seat = match.awaited()[0]
    record = match.reject_unknown_senas(seat, ["#99", "#0"])
    assert record.step.kind is StepKind.UNKNOWN_SENAS
    assert [event.kind for event in record.events] == [EventKind.SENA_REJECTED], "one event for the list"
    assert all(event.to == frozenset({seat}) for event in record.events)
    [event] = record.events
    assert [item["sena"] for item in fields(event)["senas"]] == ["#99", "#0"]
    assert {item["code"] for item in fields(event)["senas"]} == {"not_in_vocabulary"}
    assert match.faults == [0, 0] and match.awaited() == (seat,), "still the same decision, no fault"
    match.apply(seat, Action.mus())
    again = replay(match.rules, match.seed, match.log)
    assert [event.to_json() for event in again.events] == [event.to_json() for event in match.events]
    assert replay_record(match_record(match)).events == again.events


def test_only_an_awaited_seat_can_have_unknown_senas_rejected() -> None:
    match = Match(Rules(), seed=3)
    other = (match.awaited()[0] + 1) % 4
    with pytest.raises(IllegalActionError, match="not asked"):
        match.reject_unknown_senas(other, ["#99"])


@pytest.mark.parametrize(
    "action",
    [Action.envido(2), Action.paso(), Action.ordago()],
    ids=str,
)
def test_senas_on_a_bet_are_outside_every_window_rejected_to_the_sender_and_the_bet_applies(action: Action) -> None:
    match = scripted_match(S01)
    answer_non_betting(match)
    with_senas = Action(action.kind, amount=action.amount, senas=(Sena.DOS_REYES, Sena.CIEGO))
    assert match.is_legal(0, with_senas)
    record = match.apply(0, with_senas)
    [rejected] = [event for event in record.events if event.kind is EventKind.SENA_REJECTED]
    assert [item["sena"] for item in fields(rejected)["senas"]] == ["dos_reyes", "ciego"]
    assert {item["code"] for item in fields(rejected)["senas"]} == {"outside_window"}
    assert rejected.to == frozenset({0})
    assert [sena for sena, _ in record.rejected_senas] == [Sena.DOS_REYES, Sena.CIEGO]
    bets = [event for event in record.events if event.kind is EventKind.BET]
    assert [fields(event)["action"] for event in bets] == [action.kind.value]
    assert not any(event.kind is EventKind.SENA_DELIVERED for event in match.events)
    assert match.faults == [0, 0]
    again = replay_record(match_record(match))
    assert [event.to_json() for event in again.events] == [event.to_json() for event in match.events]


def test_senas_on_a_discard_are_rejected_and_the_discard_applies() -> None:
    match = Match(Rules(), seed=3)
    while match.decision is DecisionKind.MUS:
        match.apply(match.awaited()[0], Action.mus())
    seat = match.awaited()[0]
    discard = Action(ActionKind.DISCARD, cards=match.hands[seat][:2], senas=(Sena.JUEGO,))
    record = match.apply(seat, discard)
    [rejected] = [event for event in record.events if event.kind is EventKind.SENA_REJECTED]
    assert [(item["sena"], item["code"]) for item in fields(rejected)["senas"]] == [("juego", "outside_window")]
    assert seat not in match.awaited() and match.faults == [0, 0]
    assert replay(match.rules, match.seed, match.log).events == match.events


def test_the_rejected_senas_of_one_action_are_one_event_unknown_and_misplaced_together() -> None:
    """Issue 9: an Act's rejections were one event per seña, so one message could grow the record without bound.
    Now one action gives at most one SENA_REJECTED event, listing every rejected seña, and it replays."""
    match = scripted_match(S01)
    answer_non_betting(match)
    record = match.apply(0, Action(ActionKind.PASO, senas=(Sena.DOS_REYES, Sena.CIEGO)), ["#99", "#7"])
    [rejected] = [event for event in record.events if event.kind is EventKind.SENA_REJECTED]
    assert record.events[0] is rejected, "before any other event of the step"
    assert [item["sena"] for item in fields(rejected)["senas"]] == ["#99", "#7", "dos_reyes", "ciego"]
    assert [item["code"] for item in fields(rejected)["senas"]] == ["not_in_vocabulary"] * 2 + ["outside_window"] * 2
    assert record.step.unknown_senas == ("#99", "#7")
    again = replay_record(match_record(match))
    assert [event.to_json() for event in again.events] == [event.to_json() for event in match.events]
