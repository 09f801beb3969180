"""§12.3 item 4: a seña outside the vocabulary is rejected to its sender alone, is no fault, and replays."""

from __future__ import annotations

import pytest

from referee.engine.actions import Action
from referee.engine.errors import IllegalActionError
from referee.engine.events import EventKind
from referee.engine.match import Match, StepKind
from referee.engine.replay import match_record, replay, replay_record
from referee.engine.rules import Rules


def test_unknown_senas_are_rejected_privately_without_a_fault_and_the_log_replays_them() -> None:
    match = Match(Rules(), seed=3)
    seat = match.awaited()[0]
    record = match.reject_unknown_senas(seat, ["#99", "#0"])
    assert record.step.kind is StepKind.UNKNOWN_SENAS
    assert [event.kind for event in record.events] == [EventKind.SENA_REJECTED] * 2
    assert all(event.to == frozenset({seat}) for event in record.events)
    assert [event.data["sena"] for event in record.events] == ["#99", "#0"]
    assert {event.data["code"] for event in record.events} == {"not_in_vocabulary"}
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
