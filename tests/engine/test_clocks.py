"""The clocks of rules §13 as the engine states them (`referee.engine.clocks`): the referee's table keeps the time
and asks these for what a decision may take and what it costs the bank."""

from __future__ import annotations

import pytest

from referee.engine import clocks
from referee.engine.actions import Action, ActionKind
from referee.engine.errors import IllegalActionError
from referee.engine.match import DecisionKind, Match
from referee.engine.rules import Rules

RULES = Rules.from_options({"decision_timeout_s": 10, "time_bank_s": 60})
BANKED = [kind for kind in DecisionKind if kind is not DecisionKind.SENAS]


@pytest.mark.parametrize("kind", BANKED)
def test_a_decision_runs_past_its_time_on_the_bank_and_times_out_when_both_are_spent(kind: DecisionKind) -> None:
    assert clocks.draws_on_bank(kind)
    assert clocks.allowed_s(kind, 60.0, RULES) == 70.0
    assert clocks.time_left(kind, 4.0, 60.0, RULES) == (6.0, 60.0), "within its time the bank is untouched"
    assert clocks.time_left(kind, 25.0, 60.0, RULES) == (0.0, 45.0), "past it, the bank runs down"
    assert clocks.time_left(kind, 90.0, 60.0, RULES) == (0.0, 0.0)
    assert clocks.bank_after(kind, 4.0, 60.0, RULES) == 60.0
    assert clocks.bank_after(kind, 25.0, 60.0, RULES) == 45.0
    assert clocks.bank_after(kind, 70.0, 60.0, RULES) == 0.0, "a timeout spends the whole bank"


def test_a_sena_round_has_its_decision_time_only_and_never_touches_the_bank() -> None:
    kind = DecisionKind.SENAS
    assert not clocks.draws_on_bank(kind)
    assert clocks.allowed_s(kind, 60.0, RULES) == 10.0
    assert clocks.time_left(kind, 4.0, 60.0, RULES) == (6.0, 0.0), "a seña round reports no bank"
    assert clocks.time_left(kind, 12.0, 60.0, RULES) == (0.0, 0.0)
    assert clocks.bank_after(kind, 12.0, 60.0, RULES) == 60.0, "its timeout leaves the bank as it was"


def test_a_sena_round_takes_only_a_list_of_senas_and_says_so() -> None:
    match = Match(Rules.from_options({"senas_mode": "voluntary"}), 3)
    while match.decision is not DecisionKind.SENAS:
        seat = match.awaited()[0]
        match.apply(seat, match.legal_actions(seat)[0])
    seat = match.awaited()[0]
    with pytest.raises(IllegalActionError, match="not an answer to a seña round: send a list of señas"):
        match.check(seat, Action(ActionKind.PASO))
    match.check(seat, Action(ActionKind.SENAS))
