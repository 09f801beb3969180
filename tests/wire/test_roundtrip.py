"""Engine -> wire -> engine: what a seat reads from the referee's messages is the engine's own view.

Random matches of every rule variant, faults included, are played on the engine. At every decision the request
the referee's table would send is built as the table builds it (the seat's `SeatView` from a `SeatLog`, its
hand's events as wire bytes, `referee.wire`), read back as the SDK reads it, and must give the very view, and
the very `BotView`, that the local table gives. At the end every seat's events and the outcome must come back
equal. So a bot sees the same thing locally and over gRPC.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clients.sdk.view import bot_view
from mus.v1 import play_pb2
from mus.v1 import types_pb2 as pb
from referee import wire
from referee.engine.enums import Enum
from referee.engine.errors import RulesError
from referee.engine.match import Match
from referee.engine.rules import Rules
from referee.engine.selfplay import random_action
from referee.engine.views import SeatLog, SeatView

SHORT = {"games_to_win_vaca": 1, "vacas_to_win_match": 1, "target_score": 20}
"""One game to 20: a match that still visits every lance and outcome, short enough to play dozens."""


def _variants() -> list[dict[str, Any]]:
    """Every value of every closed-set option, one variant each, and the numeric options' edge values."""
    variants: list[dict[str, Any]] = [{}]
    defaults = Rules()
    for option in dataclasses.fields(Rules):
        default = getattr(defaults, option.name)
        if not isinstance(default, Enum):
            continue
        for member in type(default):
            if member is not default:
                variants.append({option.name: member.value})
    variants += [
        {"max_total_stake": None},
        {"max_total_stake": 10},
        {"sena_leak_probability": 1.0},
        {"sena_leak_probability": 0.0},
        {"max_mus_rounds": 1},
        {"max_senas_per_window": 1},
        {"discard_min": 2, "discard_max": 3},
        {"paso_point_in_pares_juego": True, "punto_bonus": False},
        {"games_to_win_vaca": 2, "vacas_to_win_match": 2, "target_score": 10},
        {"max_faults_before_forfeit": 1},
    ]
    playable = []
    for variant in variants:
        try:
            Rules.from_options({**SHORT, **variant})
        except RulesError:
            continue  # a value the rulebook names but v1 does not play
        playable.append(variant)
    return playable


VARIANTS = _variants()


def request_of(
    log: SeatLog, view: SeatView, decision_id: int, view_bytes: wire.SeatViewBytes
) -> play_pb2.DecisionRequest:
    """The decision request the table sends: counters, legal entries, and the hand's events as wire bytes. The
    counters are read from the match as the table reads them (`view_bytes`, one per match, as a table keeps)."""
    assert view.decision is not None
    message = pb.SeatView.FromString(view_bytes(log.match, view.seat))
    entries = []
    for event in view.hand_events:
        converted = wire.event_to_proto(event, event.seq, view.seat)
        entries.append(wire.view_entries(event, converted.SerializeToString(), view.seat))
    message.MergeFromString(b"".join(entries))
    return play_pb2.DecisionRequest(
        decision_id=decision_id,
        kind=wire.decision_to_proto(view.decision),
        view=message,
        legal_actions=wire.legal_to_proto(view.legal),
        decision_time_left_ms=1500,
        bank_time_left_ms=2500,
    )


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda variant: ",".join(f"{k}={v}" for k, v in variant.items()))
@settings(max_examples=2, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32), fault_rate=st.sampled_from([0.0, 0.05]))
def test_views_events_and_outcomes_survive_the_wire(variant: dict[str, Any], seed: int, fault_rate: float) -> None:
    rules = Rules.from_options({**SHORT, **variant})
    wire_rules = wire.rules_from_map(wire.rules_to_map(rules))
    assert wire_rules == rules
    match = Match(rules, seed)
    log = SeatLog(match)
    view_bytes = wire.SeatViewBytes()
    rng = random.Random(seed)
    decision_id = 0
    while not match.is_over:
        log.update()
        seat = match.awaited()[0]
        view = log.view(seat)
        decision_id += 1
        read = wire.seat_view_from_proto(request_of(log, view, decision_id, view_bytes), wire_rules)
        assert read == view
        local = bot_view(view, rules, decision_time_left_s=1.5, bank_time_left_s=2.5)
        assert bot_view(read, wire_rules, decision_time_left_s=1.5, bank_time_left_s=2.5) == local
        roll = rng.random()
        if roll < fault_rate:
            match.apply_timeout(seat)
        elif roll < 2 * fault_rate:
            match.record_illegal_action(seat, "a test's illegal action")
        else:
            action = random_action(rng, view.legal_actions)
            assert action in view.legal and wire.action_from_proto(wire.action_to_proto(action)) == action
            match.apply(seat, action)
    log.update()
    for seat in range(4):
        seen = log.events(seat)
        sent = [wire.event_to_proto(event, event.seq, seat) for event in seen]
        assert [wire.event_from_proto(pb.Event.FromString(m.SerializeToString()), seat) for m in sent] == seen
    outcome = match.outcome
    assert outcome is not None
    assert wire.outcome_from_proto(wire.outcome_to_proto(outcome, wire.match_faults(match))) == outcome
