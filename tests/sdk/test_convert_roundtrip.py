"""Engine -> wire (the referee's convert) -> engine (the SDK's convert) keeps events, views and actions.

Random matches are played on the local table; at every decision the request the referee would send is built
with `referee.service.convert` exactly as its table does, read back with `clients.sdk.convert`, and must give
the very `BotView` the local table gives. So a bot sees the same thing locally and over gRPC.
"""

from __future__ import annotations

import random

import pytest

from clients.sdk.bot import Bot
from clients.sdk.convert import EventDecoder, action_from_proto, action_to_proto, outcome_from_proto, view_from_request
from clients.sdk.local import LocalTable
from mus.v1 import play_pb2
from mus.v1 import types_pb2 as pb
from referee.engine.rules import Rules
from referee.engine.selfplay import random_action
from referee.service import convert as service

VARIANTS = [
    {},
    {"sena_leak_probability": 1.0, "max_mus_rounds": 2},
    {"senas_mode": "automatic", "declarations": "bot_declares", "deck_mode": "4_reyes"},
    {"max_total_stake": None, "target_score": 30, "response_mode": "both_answer_most_aggressive"},
    {"discard_submission": "sequential", "replacement_order": "dealer_first", "games_to_win_vaca": 1},
    {"illegal_action_policy": "default_action", "ordago_resolution": "count_prior", "discard_min": 2},
]


class _Wire:
    """What the referee's table sends one seat: its events numbered per seat, and decision requests."""

    def __init__(self, table: LocalTable, seat: int) -> None:
        self.table = table
        self.seat = seat
        self.events: list[pb.Event] = []
        self.hand_start = 0
        self.published = 0

    def publish(self) -> None:
        match = self.table.match
        for event in match.events[self.published :]:
            if event.visible_to(self.seat):
                message = service.event_to_proto(event, len(self.events), self.seat)
                if message.WhichOneof("payload") == "hand_started":
                    self.hand_start = len(self.events)
                self.events.append(message)
        self.published = len(match.events)

    def request(self, decision_id: int) -> play_pb2.DecisionRequest:
        match = self.table.match
        kind = match.decision_kind(self.seat)
        assert kind is not None
        view = service.seat_counters_to_proto(match, self.seat)
        hand_events = self.events[self.hand_start :]
        view.MergeFromString(b"".join(service.view_entries(e, e.SerializeToString(), self.seat) for e in hand_events))
        return play_pb2.DecisionRequest(
            decision_id=decision_id,
            kind=service.decision_to_proto(kind),
            view=view,
            legal_actions=service.legal_actions_to_proto(
                match, self.seat, match.legal_actions(self.seat), match.acceptable_senas(self.seat)
            ),
            decision_time_left_ms=int(match.rules.decision_timeout_s * 1000),
            bank_time_left_ms=int(match.rules.time_bank_s * 1000),
        )


@pytest.mark.parametrize("options", VARIANTS, ids=lambda options: ",".join(options) or "defaults")
def test_views_events_actions_and_outcomes_survive_the_round_trip(options: dict[str, object]) -> None:
    rules = Rules.from_options(options)
    wire_rules = service.rules_from_map(service.rules_to_map(rules))
    assert wire_rules == rules
    for seed in range(6):
        table = LocalTable([Bot(), Bot(), Bot(), Bot()], rules, seed)
        wires = [_Wire(table, seat) for seat in range(4)]
        rng = random.Random(seed)
        match = table.match
        decision_id = 0
        while not match.is_over:
            seat = match.awaited()[0]
            local = table.view(seat)
            wire = wires[seat]
            wire.publish()
            decision_id += 1
            remote = view_from_request(wire.request(decision_id), wire_rules)
            assert remote == local
            action = random_action(rng, local.legal_actions)
            assert service.action_from_proto(action_to_proto(action)) == action
            assert action_from_proto(service.action_to_proto(action)) == action
            match.apply(seat, action)
        table.play()  # delivers the last events
        for seat, wire in enumerate(wires):
            wire.publish()
            decoder = EventDecoder(seat)
            assert tuple(decoder.decode(message) for message in wire.events) == table.events_seen(seat)
        outcome = match.outcome
        assert outcome is not None
        assert outcome_from_proto(service.outcome_to_proto(outcome, service.match_faults(match))) == outcome
