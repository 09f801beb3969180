"""What each seat and a spectator may know (rules §11) and where señas go (rules §12.3).

The central property is the one of an information state: a seat's view does not change when the cards it has
not seen are dealt differently, as long as the public history (and what its partner told it) stays the same.
Matches are driven by the policies of `test_properties`.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from referee.engine.actions import Action, ActionEncoding, ActionKind
from referee.engine.cards import FULL_DECK, Card
from referee.engine.chance import Setup
from referee.engine.errors import IllegalActionError
from referee.engine.events import EventKind
from referee.engine.match import DecisionKind, Match, Step, StepKind
from referee.engine.replay import apply_step
from referee.engine.rules import Rules, SenasMode
from referee.engine.selfplay import random_action
from referee.engine.senas import Sena
from referee.engine.views import SeatLog, public_view, seat_view
from tests.engine.test_options import deck_for
from tests.engine.test_properties import (
    INTENTIONS,
    Played,
    Scenario,
    holds,
    parse_hand,
    patient_policy,
    scenarios,
    sena_accepted,
)
from tests.support.events import fields

VIEWS = settings(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow])
RESAMPLING = settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])

CARD_EVENTS = (EventKind.CARDS_DEALT, EventKind.CARDS_DISCARDED, EventKind.CARDS_REPLACED)


def rules_of(*option_sets: dict[str, Any]) -> st.SearchStrategy[Rules]:
    return st.sampled_from([Rules.from_options(options) for options in option_sets])


VIEW_RULES = rules_of(
    {},
    {"discard_submission": "sequential"},
    {"replacement_order": "dealer_first", "reshuffle_pool": "all_discards"},
    {"declarations": "bot_declares"},
    {"senas_mode": "automatic"},
    {"senas_mode": "off"},
    {"sena_leak_probability": 0.0},
    {"sena_leak_probability": 1.0, "sena_truth": "at_least"},
    {"deck_mode": "4_reyes", "sena_la_bonita": True},
    {"response_mode": "both_answer_most_aggressive", "illegal_action_policy": "default_action"},
)

SENA_RULES = rules_of(
    {},
    {"sena_leak_probability": 0.0},
    {"sena_leak_probability": 1.0},
    {"senas_mode": "automatic"},
    {"senas_mode": "automatic", "sena_leak_probability": 1.0, "deck_mode": "4_reyes"},
    {"senas_mode": "automatic", "sena_truth": "at_least", "sena_la_bonita": True},
    {"sena_truth": "at_least", "sena_la_bonita": True},
    {"max_senas_per_window": 1},
    {"deck_mode": "4_reyes", "sena_leak_probability": 0.5},
    {"senas_mode": "off"},
)


def patient(scenario: Scenario) -> Scenario:
    """The patient policy sends señas, true and false, on mus calls and in every seña round."""
    return dataclasses.replace(scenario, policy="patient")


# ------------------------------------------------------------------------------------- seat views


_live: list[SeatLog] = []


def live_log(match: Match) -> SeatLog:
    """The seat log of the match being played, brought up to date with its latest step: one log a match, kept as
    a table keeps it. A fresh `seat_view` at every step would route the whole match's events again each time,
    which made these property tests quadratic in a match's length (`check_live_views` compares the two)."""
    if not _live or _live[0].match is not match:
        _live[:] = [SeatLog(match)]
    log = _live[0]
    log.update()
    return log


def check_live_views(match: Match) -> None:
    """Each seat's view from the log kept step by step is the view of a fresh log (`seat_view`)."""
    log = live_log(match)
    for seat in range(4):
        assert log.view(seat).to_json() == seat_view(match, seat).to_json(), f"seat {seat}"


@VIEWS
@given(rules=VIEW_RULES, seed=st.integers(0, 2**32 - 1))
def test_a_log_asked_for_views_now_and_then_shows_each_hand_as_a_fresh_log_does(rules: Rules, seed: int) -> None:
    """A table asks for the view of the seat it asks, so a seat's view is built after steps no view showed; its
    hand's events are still every event since its HandStarted, numbered as the seat saw them (`events`)."""
    match, rng = Match(rules, seed), random.Random(seed)
    log = SeatLog(match)
    while not match.is_over:
        log.update()
        for seat in rng.sample(range(4), rng.randint(0, 2)):
            seen = log.events(seat)
            start = max(index for index, event in enumerate(seen) if event.kind is EventKind.HAND_STARTED)
            assert log.view(seat).hand_events == tuple(seen[start:]), seat
        seat = match.awaited()[0]
        match.apply(seat, random_action(rng, match.legal_actions(seat)))


def check_seat_views(match: Match, played: Played) -> None:
    """rules §11: a seat's cards are its own; before the hands are shown, no event it can see carries another
    seat's cards; the show reveals the four hands as they were."""
    for seen in played.record.events:
        if seen.kind in CARD_EVENTS:
            assert seen.to == frozenset({fields(seen)["seat"]}), seen
        elif seen.kind is EventKind.HANDS_SHOWN:
            assert seen.public
            assert [parse_hand(text) for text in fields(seen)["hands"]] == list(played.before.hands)
        elif seen.kind is EventKind.SENA_REJECTED:
            assert seen.to == frozenset({fields(seen)["seat"]}), seen
    log = live_log(match)
    public = public_view(match)
    accepted, pending, ordago = match.betting_totals()
    for seat in range(4):
        view = log.view(seat)
        assert view.cards == match.hands[seat]
        assert view.legal_actions == match.legal_actions(seat)
        # The view is built from positional tuples (`view_standing`, `view_betting`): each field holds its value.
        for name in ("mano", "dealer", "hand_number", "vaca", "game", "score", "games", "vacas", "faults", "lance"):
            assert getattr(view, name) == getattr(public, name), (seat, name)
        betting = (view.mus_round, view.accepted_total, view.pending_total, view.ordago_pending)
        assert betting == (match.discard_rounds, accepted, 0 if ordago else pending, ordago), seat
        assert (view.seat, view.decision, view.is_over) == (seat, match.decision_kind(seat), match.is_over)
        for seen in view.hand_events:
            assert seen.visible_to(seat)
            if seen.kind in CARD_EVENTS:
                assert fields(seen)["seat"] == seat, f"seat {seat} sees {seen}"


def check_public_view(match: Match, played: Played) -> None:
    """rules §11: a spectator sees public events only, and so no card before the hands are shown."""
    view = public_view(match)
    assert all(seen.public for seen in view.events)
    assert all(seen.public for seen in view.hand_events)
    assert not [seen for seen in view.hand_events if seen.kind in (*CARD_EVENTS, EventKind.SENA_REJECTED)]
    assert view.awaited == match.awaited()


@VIEWS
@given(scenario=scenarios(VIEW_RULES))
def test_a_seat_never_sees_another_seats_cards_before_the_hands_are_shown(scenario: Scenario) -> None:
    check_live_views(scenario.play([check_seat_views], max_steps=600))


@VIEWS
@given(scenario=scenarios(VIEW_RULES))
def test_the_spectator_view_holds_only_public_events_and_no_card_before_the_show(scenario: Scenario) -> None:
    match = scenario.play([check_public_view], max_steps=600)
    assert all(seen.public for seen in public_view(match).events)


# ------------------------------------------------------------------------------------- resampling


def quiet_policy(rng: random.Random, match: Match, seat: int) -> Action:
    """The patient policy with few señas: each seña is a signal a resampled deal must repeat."""
    return patient_policy(rng, match, seat, sena_rate=0.1)


def first_hand_steps(rules: Rules, seed: int, setup: Setup, policy_seed: int) -> list[Step]:
    """The steps of hand 0 under the quiet policy, before the step that reshuffles or shows the hands."""
    match = Match(rules, seed, setup)
    rng = random.Random(policy_seed)
    steps: list[Step] = []
    while not match.is_over:
        seat = rng.choice(match.awaited())
        record = match.apply(seat, quiet_policy(rng, match, seat))
        if any(event.kind in (EventKind.HANDS_SHOWN, EventKind.STOCK_RESHUFFLED) for event in record.events):
            break
        steps.append(record.step)
    return steps


def delivered(events: Sequence[Any]) -> list[tuple[int, str, str]]:
    """Who sent which seña when: the signals a resampled world must repeat (their visibility is under test)."""
    return [
        (fields(event)["seat"], fields(event)["sena"], fields(event)["phase"])
        for event in events
        if event.kind is EventKind.SENA_DELIVERED
    ]


def declared_lances(match: Match) -> list[str]:
    return [
        fields(event)["lance"]
        for event in match.events
        if event.kind is EventKind.LANCE_STARTED and fields(event)["lance"] in ("pares", "juego")
    ]


def resampled_world(
    rules: Rules,
    setup: Setup,
    seat: int,
    world: Match,
    steps: Sequence[Step],
    hands_before: Sequence[Sequence[tuple[Card, ...]]],
    signals: Sequence[list[tuple[int, str, str]]],
) -> Match | None:
    """Replay `steps` on another deal; None unless the public history and the señas stay the same.

    Other seats' discards are remapped by position in their hand, so the public counts stay the same. The world
    is accepted when every step stays legal, every seña is delivered (or not) as before, and every seat holds
    pares and juego as it declared. These are rules-level conditions: nothing in them looks at what the engine
    shows to `seat`.
    """
    other = Match(rules, world.seed, setup)
    encoding = ActionEncoding(rules)
    declared = declared_lances(world)
    for step, hands, signal in zip(steps, hands_before, signals, strict=True):
        action = step.action
        assert step.kind is StepKind.ACTION and action is not None
        if action.kind is ActionKind.DISCARD and step.seat != seat:
            action = encoding.decode(encoding.encode(action, hands[step.seat]), other.hands[step.seat])
        try:
            record = other.apply(step.seat, action)
        except IllegalActionError:
            return None
        if delivered(record.events) != signal:
            return None
        if declared and other.lance is not None:
            # The hands are final once the lances begin: check the declarations to come at once.
            for lance in declared:
                if any(holds(lance, world.hands[t], rules) != holds(lance, other.hands[t], rules) for t in range(4)):
                    return None
            declared = []
    return other


def view_of(match: Match, seat: int) -> dict[str, Any]:
    log = SeatLog(match)
    log.update()
    return {**log.view(seat).to_json(), "events": [seen.to_json() for seen in log.events(seat)]}


def spectator_view_of(match: Match) -> dict[str, Any]:
    view = public_view(match)
    return {"awaited": view.awaited, "events": [seen.to_json() for seen in view.events]}


@RESAMPLING
@given(
    rules=VIEW_RULES,
    seed=st.integers(0, 2**32 - 1),
    deck=st.permutations(FULL_DECK),
    first_dealer=st.integers(0, 3),
    policy_seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_a_seat_view_does_not_change_when_the_hidden_cards_are_dealt_otherwise(
    rules: Rules, seed: int, deck: list[Card], first_dealer: int, policy_seed: int, data: st.DataObject
) -> None:
    setup = Setup(decks={0: deck}, first_dealer=first_dealer)
    steps = first_hand_steps(rules, seed, setup, policy_seed)
    world = Match(rules, seed, setup)
    hands_before, signals, lances_from = [], [], len(steps)
    for index, step in enumerate(steps):
        hands_before.append(tuple(world.hands))
        start = len(world.events)
        apply_step(world, step)
        signals.append(delivered(world.events[start:]))
        if world.lance is not None:
            lances_from = min(lances_from, index + 1)
    # Any point of the hand, with the lances (where most public information is) drawn as often as the rest.
    end = data.draw(st.sampled_from(range(len(steps) + 1)) | st.sampled_from(range(lances_from, len(steps) + 1)))
    seat = data.draw(st.integers(0, 3), label="seat")
    world = Match(rules, seed, setup)
    for step in steps[:end]:
        apply_step(world, step)
    # The cards `seat` has seen stay where they are; every other card may be anywhere else in the deck.
    seen = {
        card
        for shown in world.events
        if shown.kind in (EventKind.CARDS_DEALT, EventKind.CARDS_REPLACED) and fields(shown)["seat"] == seat
        for card in parse_hand(fields(shown)["cards"])
    }
    hidden = [index for index, card in enumerate(deck) if card not in seen]
    rng = random.Random(data.draw(st.integers(0, 2**32 - 1), label="resampling seed"))
    accepted = 0
    for _ in range(150):
        cards = [deck[index] for index in hidden]
        rng.shuffle(cards)
        other_deck = list(deck)
        for index, card in zip(hidden, cards, strict=True):
            other_deck[index] = card
        other_setup = Setup(decks={0: other_deck}, first_dealer=first_dealer)
        other = resampled_world(rules, other_setup, seat, world, steps[:end], hands_before[:end], signals[:end])
        if other is None:
            continue
        assert other.hands[seat] == world.hands[seat]
        assert view_of(other, seat) == view_of(world, seat)
        assert spectator_view_of(other) == spectator_view_of(world)
        accepted += 1
        if accepted == 3:
            break
    phase = world.lance.value if world.lance and world.decision else str(world.decision and world.decision.value)
    event(f"{accepted} resamples at {phase}")


@VIEWS
@given(
    rules=rules_of({"senas_mode": "off"}, {"sena_leak_probability": 0.0}, {"sena_leak_probability": 1.0}),
    seeds=st.lists(st.integers(0, 2**32 - 1), min_size=2, max_size=2, unique=True),
    deck=st.permutations(FULL_DECK),
    first_dealer=st.integers(0, 3),
    policy_seed=st.integers(0, 2**32 - 1),
)
def test_views_do_not_depend_on_the_match_seed_once_the_deal_is_fixed(
    rules: Rules, seeds: list[int], deck: list[Card], first_dealer: int, policy_seed: int
) -> None:
    """rules §4.1, §11: the seed fixes every deal, so no view may reveal it; two seeds that deal the same
    cards (and draw no leak, at probability 0 or 1) look the same to every seat and to a spectator."""
    setup = Setup(decks={0: deck}, first_dealer=first_dealer)
    steps = first_hand_steps(rules, seeds[0], setup, policy_seed)
    worlds = [Match(rules, seed, setup) for seed in seeds]
    for world in worlds:
        for step in steps:
            apply_step(world, step)
    for seat in range(4):
        assert view_of(worlds[0], seat) == view_of(worlds[1], seat)
    assert spectator_view_of(worlds[0]) == spectator_view_of(worlds[1])


# ------------------------------------------------------------------------------------- señas
@functools.lru_cache(maxsize=4096)
def automatic_senas(cards: tuple[Card, ...], rules: Rules, phase: str) -> tuple[Sena, ...]:
    """rules §12.3 item 6: the true hand-fact señas allowed in a window, in the order of the §12.1 table
    (`max_senas_per_window` does not apply to them). Kept per hand, rules and window: each step of a hand asks
    again about the same four hands."""
    voluntary = dataclasses.replace(rules, senas_mode=SenasMode.VOLUNTARY, max_senas_per_window=1)
    return tuple(sena for sena in Sena if sena not in INTENTIONS and sena_accepted(sena, cards, voluntary, phase, 0))


def check_sena_verdicts(match: Match, played: Played) -> None:
    """rules §12.3 items 4 and 6: each seña of a list is delivered when it is true, in its window and among the
    first `max_senas_per_window`; otherwise it is rejected, only the sender is told, and nothing is delivered."""
    step = played.record.step
    action = step.action
    events = played.record.events
    rejected = [
        (item["sena"], seen.to)
        for seen in events
        if seen.kind is EventKind.SENA_REJECTED
        for item in fields(seen)["senas"]
    ]
    assert sum(seen.kind is EventKind.SENA_REJECTED for seen in events) <= 1, "one event per action"
    if action is None or action.kind not in (ActionKind.MUS, ActionKind.NO_MUS, ActionKind.SENAS):
        assert not rejected, events
        return
    seat = step.seat
    cards = played.before.hands[seat]
    # A seña round answer belongs to the lance in progress (the step cannot close it: betting follows).
    phase = "mus" if action.kind is not ActionKind.SENAS else match.lance.value if match.lance else ""
    verdicts = [sena_accepted(sena, cards, match.rules, phase, index) for index, sena in enumerate(action.senas)]
    refused = [sena.value for sena, ok in zip(action.senas, verdicts, strict=True) if not ok]
    assert rejected == [(sena, frozenset({seat})) for sena in refused], (str(action), cards, phase)
    assert [sena.value for sena, _ in played.record.rejected_senas] == refused
    if match.rules.senas_mode.value == "voluntary":
        sent = [
            (fields(seen)["sena"], fields(seen)["phase"])
            for seen in events
            if seen.kind is EventKind.SENA_DELIVERED and fields(seen)["seat"] == seat
        ]
        accepted = [(sena.value, phase) for sena, ok in zip(action.senas, verdicts, strict=True) if ok]
        assert sent == accepted, (str(action), cards, phase)


def check_delivery_audience(match: Match, played: Played) -> None:
    """rules §12.3 item 5: the sender's partner always receives a seña, both rivals or neither do; never at
    probability 0, always at 1; with señas off nothing is ever delivered."""
    rules = match.rules
    for seen in played.record.events:
        if seen.kind is not EventKind.SENA_DELIVERED:
            continue
        assert rules.senas_mode.value != "off", seen
        sender = fields(seen)["seat"]
        assert seen.to in (None, frozenset({sender, (sender + 2) % 4})), seen
        if rules.sena_leak_probability == 0.0:
            assert seen.to is not None, seen
        if rules.sena_leak_probability == 1.0:
            assert seen.to is None, seen
        for seat in (sender, (sender + 2) % 4):  # a view renumbers its events: the same one has the same payload
            hand_events = live_log(match).view(seat).hand_events
            assert any(mine.payload is seen.payload for mine in hand_events), (seat, seen)


@dataclasses.dataclass
class AutomaticSenas:
    """rules §12.3 item 6: the referee sends each true hand-fact seña of each seat once per hand, at the first
    window that allows it (the seat's own mus call, or the seña round of a lance with betting), in §12.1 order."""

    hand: int = -1
    sent: list[set[str]] = dataclasses.field(default_factory=list)

    def __call__(self, match: Match, played: Played) -> None:
        rules = match.rules
        if rules.senas_mode is not SenasMode.AUTOMATIC:
            return
        events = played.record.events
        if match.hand_number != self.hand:
            self.hand, self.sent = match.hand_number, [set(), set(), set(), set()]
        callers = [fields(seen)["seat"] for seen in events if seen.kind is EventKind.MUS_CALLED]
        self.expect(rules, events, "mus", callers, played.before.hands)
        if any(seen.kind is EventKind.HAND_ENDED for seen in events):
            # Lances that start in a step that ends the hand have no betting, so no seña round.
            assert all(fields(seen)["phase"] == "mus" for seen in events if seen.kind is EventKind.SENA_DELIVERED)
            return
        for started in events:
            if started.kind is EventKind.LANCE_STARTED:
                lance = fields(started)["lance"]
                holders = [seat for seat in range(4) if holds(lance, match.hands[seat], rules)]
                if len({seat % 2 for seat in holders}) == 2:
                    order = [(match.mano + k) % 4 for k in range(4)]
                    self.expect(rules, events, lance, order, tuple(match.hands))

    def expect(
        self, rules: Rules, events: Sequence[Any], phase: str, seats: list[int], hands: Sequence[tuple[Card, ...]]
    ) -> None:
        sent = [
            (fields(seen)["seat"], fields(seen)["sena"])
            for seen in events
            if seen.kind is EventKind.SENA_DELIVERED and fields(seen)["phase"] == phase
        ]
        expected = []
        for seat in seats:
            for sena in automatic_senas(hands[seat], rules, phase):
                if sena.value not in self.sent[seat]:
                    expected.append((seat, sena.value))
                    self.sent[seat].add(sena.value)
        assert sent == expected, (phase, [" ".join(map(str, hand)) for hand in hands])


@VIEWS
@given(scenario=scenarios(SENA_RULES))
def test_a_sena_is_delivered_when_true_in_its_window_and_otherwise_rejected_to_the_sender_alone(
    scenario: Scenario,
) -> None:
    patient(scenario).play([check_sena_verdicts], max_steps=800)


@VIEWS
@given(scenario=scenarios(SENA_RULES))
def test_a_delivered_sena_reaches_the_senders_team_and_both_rivals_or_neither(scenario: Scenario) -> None:
    check_live_views(patient(scenario).play([check_delivery_audience], max_steps=800))


@VIEWS
@given(scenario=scenarios(rules_of({"senas_mode": "off"}, {"senas_mode": "off", "max_senas_per_window": 0})))
def test_with_senas_off_nothing_is_ever_delivered(scenario: Scenario) -> None:
    match = patient(scenario).play([check_sena_verdicts, check_delivery_audience], max_steps=800)
    assert not any(seen.kind is EventKind.SENA_DELIVERED for seen in match.events)
    sent = sum(len(step.action.senas) for step in match.log if step.action is not None)
    assert sum(len(fields(seen)["senas"]) for seen in match.events if seen.kind is EventKind.SENA_REJECTED) == sent


@VIEWS
@given(
    scenario=scenarios(
        rules_of(
            *(
                {**options, "senas_mode": "automatic"}
                for options in (
                    {},
                    {"sena_truth": "at_least", "sena_la_bonita": True},
                    {"deck_mode": "4_reyes"},
                    {"declarations": "bot_declares", "max_mus_rounds": 1},
                    {"discard_submission": "sequential"},
                )
            )
        )
    )
)
def test_automatic_senas_are_true_sent_once_per_seat_and_hand_and_mus_call_senas_are_rejected(
    scenario: Scenario,
) -> None:
    check_live_views(
        patient(scenario).play([AutomaticSenas(), check_sena_verdicts, check_delivery_audience], max_steps=800)
    )


def check_acceptable_senas(match: Match, played: Played) -> None:
    """`acceptable_senas` names exactly the señas a mus call or a seña round would deliver now (§12.3 items 3-4),
    the same verdicts `check_sena_verdicts` holds `apply` to."""
    rules = match.rules
    for seat in match.awaited():
        kind = match.decision_kind(seat)
        acceptable = match.acceptable_senas(seat)
        if kind not in (DecisionKind.MUS, DecisionKind.SENAS) or rules.senas_mode is not SenasMode.VOLUNTARY:
            assert acceptable == (), (seat, kind, acceptable)
            continue
        window = "mus" if kind is DecisionKind.MUS else match.lance.value if match.lance else ""
        hand = match.hands[seat]
        assert set(acceptable) == {sena for sena in Sena if sena_accepted(sena, hand, rules, window, 0)}, (
            seat,
            window,
            " ".join(map(str, hand)),
            [sena.value for sena in acceptable],
        )


@VIEWS
@example(scenario=Scenario(Rules.from_options({"max_senas_per_window": 0}), 1, "patient", 1, 0.0, None))
@given(
    scenario=scenarios(
        rules_of(
            {},
            {"max_senas_per_window": 1},
            {"max_senas_per_window": 0},
            {"sena_truth": "at_least", "sena_la_bonita": True},
            {"senas_mode": "automatic"},
            {"senas_mode": "off"},
        )
    )
)
def test_acceptable_senas_are_exactly_those_a_mus_call_or_sena_round_would_deliver(scenario: Scenario) -> None:
    patient(scenario).play([check_acceptable_senas], max_steps=300)


def leaks(match: Match) -> dict[tuple[int, int], bool]:
    """Whether the i-th seña delivered in hand h leaked, by (h, i)."""
    out: dict[tuple[int, int], bool] = {}
    hand, index = -1, 0
    for seen in match.events:
        if seen.kind is EventKind.HAND_STARTED:
            hand, index = fields(seen)["hand"], 0
        elif seen.kind is EventKind.SENA_DELIVERED:
            out[hand, index] = seen.public
            index += 1
    return out


def without_leaks(match: Match) -> list[dict[str, Any]]:
    """The event log with who saw each seña, and the leak probability itself, left out."""
    out = []
    for seen in match.events:
        data = seen.to_json()
        if seen.kind is EventKind.SENA_DELIVERED:
            data.pop("to", None)
        if seen.kind is EventKind.MATCH_STARTED:
            data["rules"] = {**data["rules"], "sena_leak_probability": None}
        out.append(data)
    return out


@VIEWS
@given(scenario=scenarios(SENA_RULES, faults=False), probability=st.sampled_from((0.0, 0.2, 0.5, 1.0)))
def test_the_leak_draws_are_reproducible_and_change_nothing_but_who_sees_a_sena(
    scenario: Scenario, probability: float
) -> None:
    """rules §4.1, §12.3 item 5: the same seed gives the same leaks; the leak probability never changes a
    deal, a replacement card or anything else but the audience of a seña."""
    scenario = patient(scenario)
    first, again = scenario.play(max_steps=800), scenario.play(max_steps=800)
    assert leaks(first) == leaks(again)
    other_rules = scenario.rules.with_options({"sena_leak_probability": probability})
    other = dataclasses.replace(scenario, rules=other_rules).play(max_steps=800)
    assert without_leaks(other) == without_leaks(first)


@VIEWS
@given(
    seed=st.integers(0, 2**32 - 1),
    decks=st.lists(st.permutations(FULL_DECK), min_size=2, max_size=2),
    policy_seeds=st.lists(st.integers(0, 2**32 - 1), min_size=2, max_size=2),
)
def test_the_leak_draws_do_not_depend_on_the_deal(seed: int, decks: list[list[Card]], policy_seeds: list[int]) -> None:
    """rules §4.1: the leak of the i-th seña delivered in a hand depends on the seed, the hand and i only."""
    rules = Rules.from_options({"sena_leak_probability": 0.5})
    matches = []
    for deck, policy_seed in zip(decks, policy_seeds, strict=True):
        scenario = Scenario(rules, seed, "patient", policy_seed, 0.0, Setup(decks={0: deck}))
        matches.append(scenario.play(max_steps=800))
    first, second = (leaks(match) for match in matches)
    common = first.keys() & second.keys()
    assert all(first[key] == second[key] for key in common)
    event(f"common leak draws: {min(len(common), 20) // 5 * 5}+")


# ------------------------------------------------------------------------ what the numbering of events reveals

S01 = ["12o 12c 5o 1o", "11o 11c 10o 7o", "1c 2o 4o 4c", "10c 10e 7c 4e"]


def after_grande_senas(senas_of_seat_0: tuple[Sena, ...], leak: float = 0.0, seed: int = 0) -> Match:
    """S01 at Grande: seat 0 sends `senas_of_seat_0` in the seña round, the others nothing, then seat 0 passes.
    The deal is fixed, so the seed draws only the leaks."""
    setup = Setup(first_dealer=3, decks={0: deck_for(S01)}, skip_mus_first_hand=True)
    match = Match(Rules.from_options({"sena_leak_probability": leak}), seed, setup)
    for seat in range(4):
        match.apply(seat, Action.send_senas(senas_of_seat_0 if seat == 0 else ()))
    match.apply(0, Action.paso())
    return match


def test_a_seat_cannot_tell_from_its_events_whether_a_seña_it_did_not_see_was_sent() -> None:
    """§12.3 items 4 and 5: a rejected seña reaches nobody but its sender, and an unleaked one only his partner.
    A view numbers its own events, so neither leaves a gap in another seat's view or the spectator's."""
    silent = after_grande_senas(())
    rejected = after_grande_senas((Sena.CUATRO_ASES,))  # seat 0 holds R-R-5-A: false
    private = after_grande_senas((Sena.DOS_REYES,))  # true, and the leak never happens
    for seat in (1, 2, 3):
        assert view_of(rejected, seat) == view_of(silent, seat)
    for seat in (1, 3):
        assert view_of(private, seat) == view_of(silent, seat)
    assert spectator_view_of(private) == spectator_view_of(rejected) == spectator_view_of(silent)
    for match in (silent, rejected, private):
        for viewer in (None, 0, 1, 2, 3):
            assert [seen.seq for seen in match.events_for(viewer)] == list(range(len(match.events_for(viewer))))


def test_the_sender_and_his_partner_are_not_told_whether_a_seña_leaked() -> None:
    """§12.3 item 5: the rivals learn of a seña when the leak draw succeeds; its sender's team never learns which."""
    by_leak: dict[bool, Match] = {}
    for seed in range(100):
        match = after_grande_senas((Sena.DOS_REYES,), 0.5, seed)
        (delivery,) = [seen for seen in match.events if seen.kind is EventKind.SENA_DELIVERED]
        by_leak.setdefault(delivery.public, match)
    leaked, private = by_leak[True], by_leak[False]
    for seat in (0, 2):
        assert view_of(leaked, seat) == view_of(private, seat)
    for seat in (1, 3):
        assert any(seen.kind is EventKind.SENA_DELIVERED for seen in seat_view(leaked, seat).hand_events)
        assert view_of(leaked, seat) != view_of(private, seat)


# ------------------------------------------------------------------------ what an event may carry

# Every payload field of every event kind. A field that is not here (a stock size, a seed, a hidden card) fails
# the test below before it can reach a view: rules §4 keeps the stock size out of every view, §4.1 the seed.
EVENT_FIELDS: dict[EventKind, frozenset[str]] = {
    kind: frozenset(fields)
    for kind, fields in {
        EventKind.MATCH_STARTED: ("first_dealer", "rules"),
        EventKind.GAME_STARTED: ("game", "score", "vaca"),
        EventKind.HAND_STARTED: ("dealer", "hand", "mano"),
        EventKind.CARDS_DEALT: ("cards", "seat"),
        EventKind.MUS_CALLED: ("mus", "seat"),
        EventKind.CARDS_DISCARDED: ("cards", "seat"),
        EventKind.DISCARD_COUNTED: ("count", "seat"),
        EventKind.CARDS_REPLACED: ("cards", "seat"),
        EventKind.STOCK_RESHUFFLED: (),
        EventKind.MUS_CUT: ("reason", "seat"),
        EventKind.LANCE_STARTED: ("lance",),
        EventKind.DECLARED: ("has", "lance", "seat"),
        EventKind.SENA_DELIVERED: ("mus_round", "phase", "seat", "sena"),
        EventKind.SENA_REJECTED: ("seat", "senas"),
        EventKind.BET: ("accepted", "action", "amount", "lance", "ordago", "pending", "seat"),
        EventKind.LANCE_CLOSED: ("lance", "outcome", "stake", "winner_team"),
        EventKind.POINTS_SCORED: ("lance", "points", "reason", "score", "team"),
        EventKind.HANDS_SHOWN: ("hands",),
        EventKind.LANCE_DECIDED: ("lance", "seat", "team"),
        EventKind.HAND_ENDED: ("hand",),
        EventKind.GAME_ENDED: ("game", "hand", "score", "termination", "vaca", "winner"),
        EventKind.VACA_ENDED: ("games", "vaca", "winner"),
        EventKind.MATCH_ENDED: ("termination", "vacas", "winner"),
        EventKind.FAULT: ("cause", "faults", "seat", "team"),
        EventKind.FORFEIT: ("team",),
    }.items()
}


def test_the_event_schema_names_every_kind() -> None:
    assert set(EVENT_FIELDS) == set(EventKind)


@VIEWS
@given(
    scenario=scenarios(
        rules_of({"max_mus_rounds": None, "discard_submission": "sequential"}, {"max_faults_before_forfeit": 1})
    )
    | scenarios(VIEW_RULES)
)
def test_events_carry_exactly_their_schema_so_no_stock_size_or_seed_reaches_a_view(scenario: Scenario) -> None:
    match = patient(scenario).play(max_steps=800)
    for seen in match.events:
        assert set(fields(seen)) == EVENT_FIELDS[seen.kind], seen
