"""Property tests over random legal matches: the invariants of rules §4, §5.2, §8, §9.5, §10 and §13.

Matches are driven by two policies: `uniform_policy` (the engine's own `random_action`) and `patient_policy`,
which favours mus, small bets and plain answers so that discards, reshuffles, long hands and the tanteo are
reached, and which sends señas at random, true or false. Faults (timeouts and illegal actions) are injected at a
random rate. One battery of invariants runs on each random match, over the option matrix of every rules variant
of rules §14: each match is played once, checked after every step and then as a whole.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import random
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from referee.engine.actions import Action, ActionEncoding, ActionKind
from referee.engine.cards import FULL_DECK, Card
from referee.engine.chance import Setup
from referee.engine.errors import IllegalActionError
from referee.engine.events import Event, EventKind
from referee.engine.match import DecisionKind, Match, StepKind, StepRecord
from referee.engine.outcome import GameTermination, MatchTermination
from referee.engine.replay import match_record, replay_record
from referee.engine.rules import IllegalActionPolicy, OrdagoResolution, Rules
from referee.engine.selfplay import random_action
from referee.engine.senas import Sena
from tests.support.events import fields

V = TypeVar("V")

MAX_STEPS = 20_000
"""No match may need more steps than this (max_mus_rounds and the policies keep real matches far below)."""


# ------------------------------------------------------------------------------------- events
# Every read of an event's kind or payload goes through these two functions: a change in the shape of events is
# a change here.


def kind_of(event: Event) -> EventKind:
    return event.kind


class Memo:
    """What the checks work out once and read many times, emptied when it holds `limit` values.

    `by_identity` keys a value on its object's id and keeps the object beside it, so the id cannot be reused while
    the entry lives: for frozen values that cost more to hash than to look up (events, betting menus)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.entries: dict[Hashable, tuple[object, Any]] = {}

    def get(self, key: Hashable, compute: Callable[[], V]) -> V:
        entry = self.entries.get(key)
        if entry is None:
            entry = self._put(key, None, compute())
        return cast(V, entry[1])

    def by_identity(self, item: object, compute: Callable[[], V]) -> V:
        entry = self.entries.get(id(item))
        if entry is None or entry[0] is not item:
            entry = self._put(id(item), item, compute())
        return cast(V, entry[1])

    def clear(self) -> None:
        self.entries.clear()

    def _put(self, key: Hashable, item: object, value: Any) -> tuple[object, Any]:
        if len(self.entries) >= self.limit:
            self.entries.clear()
        entry = self.entries[key] = (item, value)
        return entry


_payloads = Memo(100_000)
"""Each event's payload: the checks of one match read every event several times. `run_battery` empties it per
match."""


def payload(event: Event) -> Mapping[str, Any]:
    """The event's payload as the replay file writes it: cards in notation, enums by their rule names."""
    return _payloads.by_identity(event, lambda: fields(event))


# ------------------------------------------------------------------------------------- settings
# The budgets are per parametrized case.

BATTERY = settings(deadline=None, max_examples=8, suppress_health_check=[HealthCheck.too_slow])
SAMPLED = settings(deadline=None, max_examples=20, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------------------- option matrix
# One point per rules variant of rules §14 (and two mixes); the battery runs over it.

OPTION_MATRIX: tuple[tuple[str, Mapping[str, Any]], ...] = (
    ("defaults", {}),
    ("discard_sequential", {"discard_submission": "sequential"}),
    ("dealer_first", {"replacement_order": "dealer_first"}),
    ("all_discards", {"reshuffle_pool": "all_discards"}),
    (
        "sequential_dealer_first_all_discards",
        {"discard_submission": "sequential", "replacement_order": "dealer_first", "reshuffle_pool": "all_discards"},
    ),
    ("discard_2_to_3", {"discard_min": 2, "discard_max": 3}),
    ("discard_exactly_4", {"discard_min": 4}),
    ("discard_at_most_1", {"discard_max": 1}),
    ("max_mus_rounds_1", {"max_mus_rounds": 1}),
    ("max_mus_rounds_unlimited", {"max_mus_rounds": None}),
    ("cuatro_reyes", {"deck_mode": "4_reyes"}),
    ("real_31_figure", {"real_31": "7-7-7-figure", "deck_mode": "4_reyes"}),
    ("real_31_sota", {"real_31": "7-7-7-sota"}),
    ("target_30", {"target_score": 30}),
    ("three_games_two_vacas", {"games_to_win_vaca": 3, "vacas_to_win_match": 2}),
    ("uncapped_stake", {"max_total_stake": None}),
    ("stake_cap_10", {"max_total_stake": 10}),
    ("small_bets", {"min_bet": 1, "min_raise": 1, "max_total_stake": 5}),
    ("deje_always_one", {"deje_mode": "always_one"}),
    ("deje_fem_plus_one", {"deje_mode": "fem_plus_one"}),
    ("bonus_to_best_cards_paso_point", {"refused_jugada_bonus_to": "best_cards", "paso_point_in_pares_juego": True}),
    ("no_bonus_no_punto_bonus", {"refused_jugada_bonus_to": "none", "punto_bonus": False}),
    ("both_answer", {"response_mode": "both_answer_most_aggressive"}),
    ("count_prior", {"ordago_resolution": "count_prior"}),
    ("count_prior_target_30", {"ordago_resolution": "count_prior", "target_score": 30}),
    ("bot_declares", {"declarations": "bot_declares"}),
    ("senas_off", {"senas_mode": "off"}),
    ("senas_automatic", {"senas_mode": "automatic"}),
    ("senas_at_least_bonita", {"sena_truth": "at_least", "sena_la_bonita": True}),
    ("one_sena_per_window", {"max_senas_per_window": 1}),
    ("no_sena_round", {"max_senas_per_window": 0}),
    ("never_leak", {"sena_leak_probability": 0.0}),
    ("always_leak", {"sena_leak_probability": 1.0}),
    ("default_action", {"illegal_action_policy": "default_action"}),
    ("default_action_one_fault", {"illegal_action_policy": "default_action", "max_faults_before_forfeit": 1}),
    ("ten_faults", {"max_faults_before_forfeit": 10}),
    (
        "mixed_a",
        {
            "discard_submission": "sequential",
            "response_mode": "both_answer_most_aggressive",
            "ordago_resolution": "count_prior",
            "declarations": "bot_declares",
            "senas_mode": "automatic",
            "target_score": 30,
        },
    ),
    (
        "mixed_b",
        {
            "replacement_order": "dealer_first",
            "max_mus_rounds": None,
            "deck_mode": "4_reyes",
            "max_total_stake": None,
            "deje_mode": "fem_plus_one",
            "illegal_action_policy": "default_action",
            "games_to_win_vaca": 1,
            "vacas_to_win_match": 2,
        },
    ),
)

ALL_RULES = st.sampled_from([Rules.from_options(options) for _, options in OPTION_MATRIX])


# ------------------------------------------------------------------------------------- policies

Policy = Callable[[random.Random, Match, int], Action]


def uniform_policy(rng: random.Random, match: Match, seat: int) -> Action:
    """The engine's own random legal action."""
    return random_action(rng, match.legal_actions(seat))


SENAS = tuple(Sena)


def random_senas(rng: random.Random) -> tuple[Sena, ...]:
    """0 to 4 señas from the whole vocabulary, true or false, sometimes more than a window allows."""
    return tuple(rng.choice(SENAS) for _ in range(rng.choice((0, 0, 1, 1, 2, 4))))


_bet_weights = Memo(4096)
"""`patient_policy`'s cumulative weights per betting menu: the engine hands out one cached tuple per lance state,
so each menu is weighed once, not at every bet."""


def bet_weights(legal: tuple[Action, ...]) -> list[float]:
    """Cumulative weights over a betting menu: plain answers 4, small bets 1, big bets 0.01, órdago 0.03."""

    def weigh() -> list[float]:
        weights = []
        for action in legal:
            if action.kind in (ActionKind.PASO, ActionKind.QUIERO, ActionKind.NO_QUIERO):
                weights.append(4.0)
            elif action.kind is ActionKind.ORDAGO:
                weights.append(0.03)
            else:
                weights.append(1.0 if action.amount <= 4 else 0.01)
        return list(itertools.accumulate(weights))

    return _bet_weights.by_identity(legal, weigh)


def patient_policy(rng: random.Random, match: Match, seat: int, *, sena_rate: float = 1.0) -> Action:
    """Says mus often (less and less within a hand, so unlimited mus rounds end), bets small, rarely órdago.

    It sends random señas, true or false, on 30% of its mus calls and in every seña round (times `sena_rate`).
    """
    kind = match.decision_kind(seat)
    legal = match.legal_actions(seat)
    if kind is DecisionKind.MUS:
        senas = random_senas(rng) if rng.random() < 0.3 * sena_rate else ()
        wants = rng.random() < 0.95 * 0.9**match.discard_rounds
        return Action.mus(senas) if wants else Action.no_mus(senas)
    if kind is DecisionKind.DISCARD:
        # A size first, then the cards: more cards go than uniformly over card sets, so the stock runs out.
        size = rng.choice(sorted({len(action.cards) for action in legal}))
        return rng.choice([action for action in legal if len(action.cards) == size])
    if kind is DecisionKind.SENAS:
        # Any list: apply() checks each seña on its own and rejects the false ones (rules §12.3 item 4).
        return Action.send_senas(random_senas(rng) if rng.random() < sena_rate else ())
    if kind is DecisionKind.BET:
        return rng.choices(legal, cum_weights=bet_weights(legal))[0]
    return rng.choice(legal)


POLICIES: dict[str, Policy] = {"uniform": uniform_policy, "patient": patient_policy}


# ------------------------------------------------------------------------------------- driving
# A match is played step by step; every check sees the state before the step and its record.


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The state a check compares across one step."""

    hands: tuple[tuple[Card, ...], ...]
    score: tuple[int, int]
    faults: tuple[int, int]
    awaited: tuple[int, ...]
    decision: DecisionKind | None
    events: int

    @classmethod
    def of(cls, match: Match) -> Snapshot:
        return cls(
            tuple(match.hands),
            (match.score[0], match.score[1]),
            (match.faults[0], match.faults[1]),
            match.awaited(),
            match.decision,
            len(match.events),
        )


@dataclass(frozen=True, slots=True)
class Played:
    """One step as played: the state before it, its record, and what the default action alone would have done."""

    before: Snapshot
    record: StepRecord
    default_only: Match | None
    """For a timeout, or an illegal action under `default_action`: a copy of the match with only the default
    action applied (no fault), to compare with."""


Check = Callable[[Match, Played], None]


@dataclass(frozen=True, slots=True)
class Scenario:
    rules: Rules
    seed: int
    policy: str
    policy_seed: int
    fault_rate: float
    setup: Setup | None
    variant: str = "?"
    """The name of the rules variant in OPTION_MATRIX, for failure messages."""

    def play(self, checks: Sequence[Check] = (), max_steps: int = MAX_STEPS) -> Match:
        return play_match(self, checks, max_steps)


def illegal_action(rng: random.Random, match: Match, seat: int) -> Action:
    """A well-formed action that is not legal for `seat` now (any action, for a seat that is not asked)."""
    encoding = ActionEncoding(match.rules)
    legal = set(match.legal_actions(seat))
    for _ in range(200):
        action = encoding.decode(rng.randrange(encoding.size), match.hands[seat])
        if action not in legal and not (action.kind is ActionKind.SENAS and match.decision is DecisionKind.SENAS):
            return action
    return Action.envido(10_000) if match.decision is not DecisionKind.BET else Action.mus()


def table_default(match: Match, seat: int) -> Action:
    """The default action of the rules §13 table for an awaited seat."""
    kind = match.decision_kind(seat)
    legal = match.legal_actions(seat)
    if kind is DecisionKind.MUS:
        return Action.no_mus()
    if kind is DecisionKind.DISCARD:
        # "All 4 cards"; when discard_max forbids that, the most the rules allow (the table does not say which).
        engine_choice = match.default_action(seat)
        assert len(engine_choice.cards) == match.rules.discard_max and engine_choice in legal, engine_choice
        return engine_choice
    if kind is DecisionKind.DECLARE:
        (truthful,) = legal
        return truthful
    if kind is DecisionKind.SENAS:
        return Action.send_senas(())
    return Action.paso() if Action.paso() in legal else Action.no_quiero()


def with_default_only(match: Match, seat: int) -> Match:
    """A copy of the match where `seat` played the §13 default action (and committed no fault).

    The copy has lists of its own for the records that grow with the match (events, steps, results) but shares
    their items, which are frozen: deep-copying every event at every fault made a step cost the match's length.
    """
    records = (match.events, match.log, match.game_results, match.vaca_results)
    twin = copy.deepcopy(match, {id(items): list(items) for items in records})
    twin.apply(seat, table_default(twin, seat))
    return twin


def take_step(match: Match, rng: random.Random, policy: Policy, fault_rate: float) -> Played:
    """One step: usually the policy's action of an awaited seat, sometimes a timeout or an illegal action."""
    before = Snapshot.of(match)
    awaited = match.awaited()
    roll = rng.random()
    if roll < fault_rate / 2:
        seat = rng.choice(awaited)
        twin = with_default_only(match, seat)  # before the timeout changes the match
        return Played(before, match.apply_timeout(seat), twin)
    if roll < fault_rate:
        seat = rng.randrange(4)
        action = illegal_action(rng, match, seat)
        with pytest.raises(IllegalActionError) as error:
            match.check(seat, action)
        assert Snapshot.of(match) == before, "check() changed the match"
        asked = seat in awaited and match.rules.illegal_action_policy is IllegalActionPolicy.DEFAULT_ACTION
        default_only = with_default_only(match, seat) if asked else None
        return Played(before, match.record_illegal_action(seat, str(error.value)), default_only)
    seat = rng.choice(awaited)
    return Played(before, match.apply(seat, policy(rng, match, seat)), None)


def play_match(scenario: Scenario, checks: Sequence[Check] = (), max_steps: int = MAX_STEPS) -> Match:
    """Play until the match ends (it must, within MAX_STEPS) or until `max_steps` when that is smaller."""
    match = Match(scenario.rules, scenario.seed, scenario.setup)
    rng = random.Random(scenario.policy_seed)
    policy = POLICIES[scenario.policy]
    for _ in range(max_steps):
        if match.is_over:
            return match
        played = take_step(match, rng, policy, scenario.fault_rate)
        for check in checks:
            check(match, played)
    assert match.is_over or max_steps < MAX_STEPS, f"the match did not end within {MAX_STEPS} steps"
    return match


@st.composite
def scenarios(
    draw: st.DrawFn,
    rules: st.SearchStrategy[Rules],
    faults: bool = True,
    variant: str = "?",
    fault_rates: Sequence[float] = (0.0, 0.0, 0.004, 0.02),
) -> Scenario:
    """A match: rules, a seed, a policy and its seed, a fault rate, and sometimes a start score near the end."""
    chosen = draw(rules)
    target = chosen.target_score
    start = draw(
        st.one_of(
            st.just((0, 0)),
            st.tuples(st.integers(max(0, target - 8), target - 1), st.integers(max(0, target - 8), target - 1)),
        )
    )
    return Scenario(
        rules=chosen,
        seed=draw(st.integers(0, 2**32 - 1)),
        policy=draw(st.sampled_from(sorted(POLICIES))),
        policy_seed=draw(st.integers(0, 2**32 - 1)),
        fault_rate=draw(st.sampled_from(fault_rates)) if faults else 0.0,
        setup=Setup(start_score=start) if start != (0, 0) else None,
        variant=variant,
    )


# ------------------------------------------------------------------------------------- oracles
# Written from the rulebook (§2, §6, §8, §9, §12) without the engine's own evaluator, so a bug there cannot hide.


def effective_ranks(cards: Sequence[Card], rules: Rules) -> list[int]:
    """rules §2.1: in 8 reyes every 3 is a rey (12) and every 2 an as (1); in 4 reyes ranks are physical."""
    if rules.deck_mode.value == "8_reyes":
        return [12 if card.rank == 3 else 1 if card.rank == 2 else card.rank for card in cards]
    return [card.rank for card in cards]


def points_total(cards: Sequence[Card], rules: Rules) -> int:
    """rules §2: figures are worth 10, the others their face value, the as 1."""
    return sum(10 if rank >= 10 else rank for rank in effective_ranks(cards, rules))


def pares_class(cards: Sequence[Card], rules: Rules) -> str | None:
    """rules §6.3: duples (two pairs or four of a kind), medias (three of a kind), par, or None."""
    counts = sorted(Counter(effective_ranks(cards, rules)).values(), reverse=True)
    if counts[0] == 4 or counts[:2] == [2, 2]:
        return "duples"
    return {3: "medias", 2: "par"}.get(counts[0])


def holds(lance: str, cards: Sequence[Card], rules: Rules) -> bool:
    """Whether a hand takes part in a lance (rules §7)."""
    if lance == "pares":
        return pares_class(cards, rules) is not None
    if lance == "juego":
        return points_total(cards, rules) >= 31
    return True


def parse_hand(text: str) -> tuple[Card, ...]:
    return tuple(Card.parse(word) for word in text.split())


def cards_of(text: str) -> set[str]:
    return set(text.split())


COUNT_SENAS = {
    Sena.DOS_REYES: (12, 2),
    Sena.MEDIAS_REYES: (12, 3),
    Sena.CUATRO_REYES: (12, 4),
    Sena.DOS_ASES: (1, 2),
    Sena.MEDIAS_ASES: (1, 3),
    Sena.CUATRO_ASES: (1, 4),
}
INTENTIONS = (Sena.CORTAR_MUS, Sena.ENVIDAR_MAS)


def fact_is_true(sena: Sena, cards: Sequence[Card], rules: Rules) -> bool:
    """A hand-fact seña (not ciego, not an intention) on the sender's current cards."""
    ranks = effective_ranks(cards, rules)
    total = points_total(cards, rules)
    if sena in COUNT_SENAS:
        rank, count = COUNT_SENAS[sena]
        return ranks.count(rank) >= count if rules.sena_truth.value == "at_least" else ranks.count(rank) == count
    if sena in (Sena.PARES, Sena.MEDIAS, Sena.DUPLES):
        return pares_class(cards, rules) == {Sena.PARES: "par", Sena.MEDIAS: "medias", Sena.DUPLES: "duples"}[sena]
    if sena is Sena.LA_BONITA:
        return sorted(ranks) == [1, 12, 12, 12]
    return {Sena.JUEGO: total > 31, Sena.TREINTA_Y_UNA: total == 31, Sena.TREINTA: total == 30}.get(sena, total == 29)


def sena_accepted(sena: Sena, cards: Sequence[Card], rules: Rules, phase: str, position: int) -> bool:
    """rules §12.3: the verdict on the `position`-th seña of a list sent in `phase` ("mus" or a lance)."""
    if rules.senas_mode.value != "voluntary" or position >= rules.max_senas_per_window:
        return False
    if sena is Sena.LA_BONITA and not rules.sena_la_bonita:
        return False
    if sena is Sena.MEDIAS and phase in ("mus", "grande"):
        return False
    if sena in INTENTIONS:
        return True
    if sena is Sena.CIEGO:
        facts = [other for other in Sena if other not in (*INTENTIONS, Sena.CIEGO)]
        allowed = [other for other in facts if other is not Sena.LA_BONITA or rules.sena_la_bonita]
        return not any(fact_is_true(other, cards, rules) for other in allowed)
    return fact_is_true(sena, cards, rules)


_JUEGO_ORDER = {31: 8, 32: 7, 40: 6, 37: 5, 36: 4, 35: 3, 34: 2, 33: 1}


def is_real_31(cards: Sequence[Card], rules: Rules) -> bool:
    """rules §6.6: three 7s and a sota (or, with 7-7-7-figure, any figure; a 3 is one in 8 reyes)."""
    ranks = effective_ranks(cards, rules)
    if rules.real_31.value == "off" or ranks.count(7) != 3 or points_total(cards, rules) != 31:
        return False
    fourth = next(card for card, rank in zip(cards, ranks, strict=True) if rank != 7)
    return fourth.rank == 10 if rules.real_31.value == "7-7-7-sota" else max(ranks) >= 10


def lance_key(lance: str, cards: Sequence[Card], rules: Rules) -> tuple[int, ...] | None:
    """A key that is larger for the better hand in a lance (rules §6), None without the jugada."""
    ranks = sorted(effective_ranks(cards, rules), reverse=True)
    total = points_total(cards, rules)
    if lance == "grande":
        return tuple(ranks)
    if lance == "chica":
        return tuple(-rank for rank in reversed(ranks))
    if lance == "pares":
        counts = Counter(ranks)
        kind = pares_class(cards, rules)
        if kind == "duples":
            pairs = sorted((rank for rank, count in counts.items() for _ in range(count // 2)), reverse=True)
            return (3, *pairs)
        if kind is None:
            return None
        return (2 if kind == "medias" else 1, max(rank for rank, count in counts.items() if count >= 2))
    if lance == "juego":
        return (_JUEGO_ORDER[total], int(is_real_31(cards, rules))) if total >= 31 else None
    return (total,)


def best_of(lance: str, hands: Sequence[Sequence[Card]], mano: int, rules: Rules) -> int | None:
    """The seat that wins a lance on cards among its holders; ties go to the seat nearest the mano (§3)."""
    best: int | None = None
    best_key: tuple[int, ...] | None = None
    for seat in ((mano + k) % 4 for k in range(4)):
        key = lance_key(lance, hands[seat], rules)
        if key is not None and (best_key is None or key > best_key):
            best, best_key = seat, key
    return best


def team_values(lance: str, team: int, hands: Sequence[Sequence[Card]], rules: Rules) -> int:
    """rules §9.2: pares 1/2/3 and juego 3 (31) or 2 for each holder of the team."""
    values = 0
    for seat in (team, team + 2):
        if lance == "pares":
            values += {"par": 1, "medias": 2, "duples": 3}.get(pares_class(hands[seat], rules) or "", 0)
        elif points_total(hands[seat], rules) >= 31:
            values += 3 if points_total(hands[seat], rules) == 31 else 2
    return values


LANCE_ORDER = ("grande", "chica", "pares", "juego", "punto")


def tanteo_entries(
    results: Mapping[str, tuple[str, int, int | None]], hands: Sequence[Sequence[Card]], mano: int, rules: Rules
) -> list[tuple[int, int, str]]:
    """What each lance pays at the tanteo, in order, as (team, points, lance): rules §9.2, §9.4 and §14."""
    entries: list[tuple[int, int, str]] = []
    for lance in LANCE_ORDER:
        if lance not in results:
            continue
        outcome, stake, refusal_team = results[lance]
        best = best_of(lance, hands, mano, rules)
        best_team = best % 2 if best is not None else None
        bonus_team = {"bettor_team": refusal_team, "best_cards": best_team, "none": None}[
            rules.refused_jugada_bonus_to.value
        ]
        team: int | None = None
        points = 0
        if lance in ("grande", "chica"):
            team, points = best_team, {"passed": 1, "accepted": stake}.get(outcome, 0)
        elif lance == "punto":
            bonus = 1 if rules.punto_bonus else 0
            if outcome == "rejected":
                team, points = bonus_team, bonus
            else:
                team, points = best_team, {"passed": 1, "accepted": stake + bonus}.get(outcome, 0)
        elif outcome == "no_betting":
            team = next(seat % 2 for seat in range(4) if holds(lance, hands[seat], rules))
            points = team_values(lance, team, hands, rules)
        elif outcome in ("passed", "accepted") and best_team is not None:
            paso = 1 if outcome == "passed" and rules.paso_point_in_pares_juego else 0
            team, points = (
                best_team,
                (stake if outcome == "accepted" else paso) + team_values(lance, best_team, hands, rules),
            )
        elif outcome == "rejected" and bonus_team is not None:
            team, points = bonus_team, team_values(lance, bonus_team, hands, rules)
        if team is not None and points > 0:
            entries.append((team, points, lance))
    return entries


_AGGRESSION = {"no_quiero": 0, "quiero": 1, "mas": 2, "ordago": 3}


@dataclass(slots=True)
class BettingModel:
    """The betting state machine of rules §8.2 and the deje of §8.3, written from the rulebook."""

    rules: Rules
    lance: str
    participants: tuple[int, ...]
    queue: list[int]
    accepted: int = 0
    pending: int | None = None
    ordago: bool = False
    proposer: int | None = None
    first: tuple[int, str, int] | None = None

    @property
    def turn(self) -> int:
        return self.queue[1] if self.first is not None else self.queue[0]

    def rivals_after(self, seat: int) -> list[int]:
        seats = ((seat + k) % 4 for k in (1, 2, 3))
        return [other for other in seats if other in self.participants and other % 2 != seat % 2]

    def act(self, seat: int, kind: str, amount: int) -> tuple[str, int, int | None, int] | None:
        """Apply one betting action; when it closes the lance: (outcome, stake, winner team, deje points)."""
        assert seat == self.turn, f"seat {seat} bet in {self.lance}; §8.2 asks seat {self.turn}"
        cap = self.rules.stake_cap
        if self.pending is None and not self.ordago:
            if kind == "paso":
                self.queue.pop(0)
                return ("passed", 0, None, 0) if not self.queue else None
            if kind == "envido":
                assert amount >= self.rules.min_bet and (cap is None or amount <= cap), amount
                self.pending = amount
            else:
                assert kind == "ordago", kind
                self.ordago = True
            self.proposer, self.queue = seat, self.rivals_after(seat)
            return None
        if self.rules.response_mode.value == "both_answer_most_aggressive":
            if self.first is None and kind != "ordago" and len(self.queue) > 1:
                self.first = (seat, kind, amount)
                return None
            answers = [self.first, (seat, kind, amount)] if self.first is not None else [(seat, kind, amount)]
            self.first = None
            chosen = max(answers, key=lambda answer: (_AGGRESSION[answer[1]], answer[2]))  # the first of equals
            return self.answer(*chosen, final=True)
        return self.answer(seat, kind, amount, final=False)

    def answer(self, seat: int, kind: str, amount: int, *, final: bool) -> tuple[str, int, int | None, int] | None:
        if kind == "quiero":
            return ("ordago_accepted", 0, None, 0) if self.ordago else ("accepted", self.pending or 0, None, 0)
        if kind == "no_quiero":
            if not final:
                self.queue.pop(0)
                if self.queue:
                    return None
            assert self.proposer is not None
            return ("rejected", 0, self.proposer % 2, self.deje())
        assert not self.ordago and self.pending is not None, f"{kind} answers an órdago"
        self.accepted = self.pending
        if kind == "mas":
            cap = self.rules.stake_cap
            assert amount >= self.rules.min_raise and (cap is None or self.pending + amount <= cap), amount
            self.pending += amount
        else:
            assert kind == "ordago", kind
            self.ordago = True
        self.proposer, self.queue = seat, self.rivals_after(seat)
        return None

    def deje(self) -> int:
        """rules §8.3 and §14 deje_mode."""
        mode = self.rules.deje_mode.value
        if mode == "always_one" or self.accepted == 0:
            return 1
        if mode == "fem_plus_one" and self.lance in ("pares", "juego", "punto"):
            return self.accepted + 1
        return self.accepted


# ------------------------------------------------------------------------------------- checks after every step

TARGET_TERMINATIONS = {GameTermination.TARGET_AT_TANTEO.value: "tanteo", GameTermination.TARGET_AT_DEJE.value: "deje"}


def sorted_cards(cards: Iterable[Card]) -> list[Card]:
    return sorted(cards, key=lambda card: card.index)


DECK = frozenset(FULL_DECK)


def check_cards(match: Match, played: Played) -> None:
    """rules §4, §5.2: the 40 cards are all somewhere, once each; every hand holds 4 different cards."""
    census = match.card_census()
    if len(census) != len(DECK) or set(census) != DECK:  # 40 places holding the 40 cards: each once, none missing
        counts = Counter(census)
        duplicates = [card for card, count in counts.items() if count > 1]
        assert not duplicates, f"cards twice after {played.record.step}: {duplicates}"
        assert counts.keys() == DECK, f"cards missing after {played.record.step}: {sorted_cards(DECK - set(counts))}"
    for seat, hand in enumerate(match.hands):
        assert len(hand) == 4 == len(set(hand)), f"seat {seat} holds {hand}"


_decoded = Memo(4096)
"""Every code's action by encoding (its largest amount) and hand: a hand is held over several sampled steps, and
only the discard masks depend on it, so each hand's codes are decoded once rather than at every sampled step."""


def decode_every_code(encoding: ActionEncoding, hand: tuple[Card, ...]) -> tuple[Action, ...]:
    """`encoding.decode(code, hand)` for every code, in code order."""
    return _decoded.get(
        (encoding.max_amount, hand), lambda: tuple(encoding.decode(code, hand) for code in range(encoding.size))
    )


def check_legal_sets(match: Match, played: Played) -> None:
    """`legal_actions` and `check` agree on every integer code for the awaited seats; a seat that is not asked
    has no legal action and is refused every action an awaited seat may take now (the same refusal, whatever the
    action, comes first in `check`: trying every code on it too would be three quarters of this check's work)."""
    encoding = ActionEncoding(match.rules)
    awaited = match.awaited()
    lance = match.lance.value if match.lance is not None else ""
    for seat in set(range(4)) - set(awaited):
        assert match.legal_actions(seat) == (), f"seat {seat} is not asked but has legal actions"
        for other in awaited:
            for action in match.legal_actions(other):
                assert not match.is_legal(seat, action), f"seat {seat} is not asked but may play {action}"
    for seat in awaited:
        hand = match.hands[seat]
        legal = match.legal_actions(seat)
        listed = set(legal)
        sena_round = match.decision_kind(seat) is DecisionKind.SENAS
        for code, action in enumerate(decode_every_code(encoding, hand)):
            if action.kind is ActionKind.SENAS and sena_round:
                # Any list answers a seña round (docstrings of check/apply): false señas are rejected one by one
                # (§12.3 item 4); the legal list names the empty answer and each seña that would be accepted.
                assert match.is_legal(seat, action), action
                accepted = not action.senas or sena_accepted(action.senas[0], hand, match.rules, lance, 0)
                assert (action in listed) == accepted, (str(action), hand, lance)
                continue
            assert match.is_legal(seat, action) == (action in listed), (
                f"seat {seat}, {match.decision}: check says {match.is_legal(seat, action)} for {action} (code {code})"
            )
        for action in legal:
            assert encoding.decode(encoding.encode(action, hand), hand) == action


def check_scores_and_game_ends(match: Match, played: Played) -> None:
    """rules §9.5, §8.4, §13: scores only grow within a game; a game ends exactly when a team reaches the
    target (the winner >= target > the loser), by an accepted órdago (no points for it), or by forfeit."""
    rules = match.rules
    target = rules.target_score
    running = list(played.before.score)
    reached: int | None = None
    last_reason: str | None = None
    ordago_lance: str | None = None
    decided_team: int | None = None
    forfeit = False
    for event in played.record.events:
        data = payload(event)
        if kind_of(event) is EventKind.POINTS_SCORED:
            assert reached is None, f"points scored after team {reached} reached the target: {event}"
            assert data["points"] > 0, event
            running[data["team"]] += data["points"]
            assert data["score"] == running, (event, running)
            last_reason = data["reason"]
            if ordago_lance is not None:
                # Only count_prior counts anything at an accepted órdago: the entries of earlier lances.
                assert rules.ordago_resolution is OrdagoResolution.COUNT_PRIOR, event
                assert data["reason"] == "tanteo", event
                assert LANCE_ORDER.index(data["lance"]) < LANCE_ORDER.index(ordago_lance), event
            if running[data["team"]] >= target:
                reached = data["team"]
        elif kind_of(event) is EventKind.LANCE_CLOSED and data["outcome"] == "ordago_accepted":
            ordago_lance = data["lance"]
        elif kind_of(event) is EventKind.LANCE_DECIDED:
            decided_team = data["team"]
        elif kind_of(event) is EventKind.FORFEIT:
            forfeit = True
        elif kind_of(event) is EventKind.GAME_ENDED:
            termination, winner = data["termination"], data["winner"]
            assert data["score"] == running, (event, running)
            if termination in TARGET_TERMINATIONS:
                assert reached == winner, (event, reached)
                assert running[winner] >= target > running[1 - winner], event
                assert last_reason == TARGET_TERMINATIONS[termination], (event, last_reason)
            elif termination == GameTermination.ORDAGO.value:
                assert ordago_lance is not None and reached is None, event
                assert max(running) < target, event
                assert winner == decided_team, event
            else:
                assert termination == GameTermination.FORFEIT.value, event
                assert forfeit and winner is None and reached is None, event
            reached = ordago_lance = decided_team = None
        elif kind_of(event) is EventKind.GAME_STARTED:
            assert data["score"] == [0, 0], event
            running = [0, 0]
    assert reached is None, f"team {reached} reached the target and the game went on"
    assert ordago_lance is None, "an accepted órdago did not end the game"
    if not match.is_over:
        assert list(match.score) == running


def check_faults(match: Match, played: Played) -> None:
    """rules §13: every timeout and illegal action is one public fault (a seña-round timeout is none); at
    `max_faults_before_forfeit` the team loses the match at once, with no hands shown."""
    rules = match.rules
    step = played.record.step
    events = played.record.events
    faults = [index for index, event in enumerate(events) if kind_of(event) is EventKind.FAULT]
    counts = list(played.before.faults)
    for index in faults:
        event = events[index]
        assert event.public and payload(event)["seat"] == step.seat, event
        team = payload(event)["team"]
        assert team == step.seat % 2
        counts[team] += 1
        assert payload(event)["faults"] == counts[team], event
    assert list(match.faults) == counts
    if step.kind is StepKind.ACTION:
        assert not faults, events
    elif step.kind is StepKind.TIMEOUT:
        expected = 0 if played.before.decision is DecisionKind.SENAS else 1
        assert len(faults) == expected, f"a timeout in a {played.before.decision} decision gave {len(faults)} faults"
        assert all(payload(events[index])["cause"] == "timeout" for index in faults)
    else:
        assert len(faults) == 1 and payload(events[faults[0]])["cause"] == "illegal_action", events
    losing = [team for team in (0, 1) if counts[team] >= rules.max_faults_before_forfeit]
    if any(played.before.faults[team] < counts[team] for team in losing):
        # The limit was reached in this step: forfeit at once, nothing else happens, nothing is shown; the game
        # and the vaca in progress end with no winner.
        (team,) = losing
        after = [kind_of(event) for event in events[faults[-1] + 1 :]]
        assert after == [EventKind.FORFEIT, EventKind.GAME_ENDED, EventKind.VACA_ENDED, EventKind.MATCH_ENDED], after
        assert payload(events[-2])["winner"] is None
        assert match.outcome is not None
        assert match.outcome.termination is MatchTermination.FORFEIT and match.outcome.winner == 1 - team
        assert match.game_results[-1].winner is None
        assert match.game_results[-1].termination is GameTermination.FORFEIT
        return
    assert match.outcome is None or match.outcome.termination is MatchTermination.NORMAL


def effects(events: Sequence[Event]) -> list[tuple[str, Mapping[str, Any], list[int] | None]]:
    """Events without their sequence numbers, to compare two runs that differ by a fault event."""
    return [
        (kind_of(event).value, payload(event), sorted(event.to) if event.to is not None else None) for event in events
    ]


def check_illegal_actions_and_timeouts(match: Match, played: Played) -> None:
    """rules §13: an illegal action is never applied. Under `retry`, or from a seat that was not asked, it
    changes nothing but the fault count; otherwise the default action follows, exactly as if applied alone."""
    step = played.record.step
    if step.kind is StepKind.ACTION or (match.outcome and match.outcome.termination is MatchTermination.FORFEIT):
        return
    before = played.before
    after_fault = [event for event in played.record.events if kind_of(event) is not EventKind.FAULT]
    twin = played.default_only
    if twin is None:
        assert step.kind is StepKind.ILLEGAL
        assert after_fault == [], after_fault
        assert tuple(match.hands) == before.hands and tuple(match.score) == before.score
        assert match.awaited() == before.awaited and match.decision is before.decision
        return
    assert tuple(match.hands) == tuple(twin.hands)
    assert match.score == twin.score
    assert match.awaited() == twin.awaited() and match.decision is twin.decision
    assert effects(after_fault) == effects(twin.events[before.events :])


# ------------------------------------------------------------------------------------- checks over a whole match


def check_outcome(match: Match) -> None:
    """rules §9.5, §10, §13: the outcome agrees with the games, the vacas and the faults."""
    rules = match.rules
    outcome = match.outcome
    assert outcome is not None
    assert kind_of(match.events[-1]) is EventKind.MATCH_ENDED
    assert payload(match.events[-1])["winner"] == outcome.winner
    assert outcome.games == tuple(match.game_results)
    assert outcome.vaca_results == tuple(match.vaca_results)
    assert outcome.faults == (match.faults[0], match.faults[1])
    ended = [payload(event) for event in match.events if kind_of(event) is EventKind.GAME_ENDED]
    assert [(data["winner"], tuple(data["score"]), data["termination"]) for data in ended] == [
        (game.winner, game.score, game.termination.value) for game in outcome.games
    ]
    games, vacas, vaca, game, hand = [0, 0], [0, 0], 0, -1, -1  # vacas and games count from 0
    vaca_results: list[tuple[int, int | None, tuple[int, int]]] = []
    for index, result in enumerate(outcome.games):
        last = index == len(outcome.games) - 1
        game += 1
        assert (result.vaca, result.game) == (vaca, game), result
        assert result.hand_number >= hand
        hand = result.hand_number
        if result.termination is GameTermination.FORFEIT:
            assert last and result.winner is None, result
            vaca_results.append((vaca, None, (games[0], games[1])))  # the vaca in progress has no winner either
            break
        winner = result.winner
        assert winner in (0, 1), result
        if result.termination is GameTermination.ORDAGO:
            assert max(result.score) < rules.target_score, result
        else:
            assert result.score[winner] >= rules.target_score > result.score[1 - winner], result
        games[winner] += 1
        if games[winner] == rules.games_to_win_vaca:
            vaca_results.append((vaca, winner, (games[0], games[1])))
            vacas[winner] += 1
            games, vaca, game = [0, 0], vaca + 1, -1
            if vacas[winner] == rules.vacas_to_win_match:
                assert last, "the match went on after a team won it"
    assert [(v.vaca, v.winner, v.games) for v in outcome.vaca_results] == vaca_results
    assert outcome.vacas == (vacas[0], vacas[1])
    if outcome.termination is MatchTermination.NORMAL:
        assert vacas[outcome.winner] == rules.vacas_to_win_match > vacas[1 - outcome.winner]
        assert outcome.games[-1].winner == outcome.winner
        assert max(outcome.faults) < rules.max_faults_before_forfeit
    else:
        assert outcome.games[-1].termination is GameTermination.FORFEIT
        assert outcome.faults[1 - outcome.winner] >= rules.max_faults_before_forfeit > outcome.faults[outcome.winner]


def event_log(match: Match) -> list[dict[str, Any]]:
    return [event.to_json() for event in match.events]


def same_event_log(replayed: Match, match: Match) -> bool:
    """Whether both matches write the same event log. Equal events (frozen values) write equal JSON, so only
    unequal ones are written out and compared as JSON."""
    return replayed.events == match.events or event_log(replayed) == event_log(match)


def check_replays(match: Match) -> None:
    """rules §4.1: the same rules, seed, setup and steps give the same match, event for event, here from the
    match's replay record after a trip through JSON text (`replay_record` parses it and calls `replay`)."""
    record = json.loads(json.dumps(match_record(match)))
    again = replay_record(record)
    assert same_event_log(again, match)
    assert again.outcome == match.outcome


def hands_of(match: Match) -> list[list[Event]]:
    """The event log cut into hands, each from its `hand_started` to the next one."""
    hands: list[list[Event]] = []
    for event in match.events:
        if kind_of(event) is EventKind.HAND_STARTED:
            hands.append([])
        if hands:
            hands[-1].append(event)
    return hands


@dataclass(slots=True)
class HandState:
    mano: int
    mus_calls: int = 0
    discard_counts: int = 0
    lances: list[str] = dataclasses.field(default_factory=list)
    declared: dict[str, list[tuple[int, bool]]] = dataclasses.field(default_factory=dict)
    betting: BettingModel | None = None
    closing: tuple[str, int, int | None, int] | None = None
    deje_paid: bool = False


def check_hand_protocol(match: Match) -> None:
    """Over the whole event log: the mano rotates every hand (§3); mus calls go round from the mano and stop at
    max_mus_rounds (§5.1); lances come in order, declarations are made in speaking order and are true (§7); every
    bet comes from the seat §8.2 asks, and each lance closes, and each refusal pays, as §8.2 and §8.3 say."""
    rules = match.rules
    both = rules.response_mode.value == "both_answer_most_aggressive"
    next_mano = (match.first_dealer + 1) % 4
    hand: HandState | None = None
    for index, event in enumerate(match.events):
        data = payload(event)
        kind = kind_of(event)
        if kind is EventKind.HAND_STARTED:
            assert (data["mano"], data["dealer"]) == (next_mano, (next_mano + 3) % 4), event
            hand = HandState(mano=next_mano)
            next_mano = (next_mano + 1) % 4
            continue
        if hand is None or kind in (EventKind.FAULT, EventKind.MATCH_STARTED, EventKind.GAME_STARTED):
            continue
        if kind is EventKind.MUS_CALLED:
            assert not hand.lances and data["seat"] == (hand.mano + hand.mus_calls) % 4, event
            limit = rules.max_mus_rounds
            assert limit is None or hand.discard_counts // 4 < limit, "a mus call after max_mus_rounds discards"
            hand.mus_calls += 1
        elif kind is EventKind.DISCARD_COUNTED:
            hand.discard_counts += 1
            hand.mus_calls = 0
        elif kind is EventKind.MUS_CUT:
            if data["reason"] == "max_mus_rounds":
                assert hand.discard_counts == 4 * (rules.max_mus_rounds or 0), event
            else:
                assert data["seat"] == (hand.mano + hand.mus_calls - 1) % 4, event
        elif kind is EventKind.LANCE_STARTED:
            lance = data["lance"]
            expected = ("grande", "chica", "pares", "juego", "punto")[len(hand.lances)]
            assert lance == expected, (hand.lances, lance)
            if lance == "punto":
                assert [has for _, has in hand.declared["juego"]] == [False] * 4
            hand.lances.append(lance)
            hand.declared[lance] = []
            hand.betting = hand.closing = None
            hand.deje_paid = False
        elif kind is EventKind.DECLARED:
            lance = hand.lances[-1]
            assert data["lance"] == lance in ("pares", "juego") and event.public, event
            assert data["seat"] == (hand.mano + len(hand.declared[lance])) % 4, event
            hand.declared[lance].append((data["seat"], data["has"]))
        elif kind is EventKind.BET:
            lance = hand.lances[-1]
            assert data["lance"] == lance and hand.closing is None, event
            if hand.betting is None:
                order = tuple((hand.mano + k) % 4 for k in range(4))
                if lance in ("pares", "juego"):
                    order = tuple(seat for seat, has in hand.declared[lance] if has)
                assert len({seat % 2 for seat in order}) == 2, f"betting in {lance} held by one team: {event}"
                hand.betting = BettingModel(rules, lance, order, list(order))
            model = hand.betting
            opening = model.pending is None and not model.ordago
            hand.closing = model.act(data["seat"], data["action"], data["amount"])
            # In both-answer mode a first answer waits for the partner's; the second carries the standing totals.
            if opening or not both or model.first is None:
                totals: tuple[int | None, int | None, bool] = (model.pending, model.accepted, model.ordago)
                if hand.closing is not None and hand.closing[0] == "accepted":
                    totals = (model.pending, model.pending, False)
                assert (data["pending"], data["accepted"], data["ordago"]) == totals, (event, totals)
        elif kind is EventKind.POINTS_SCORED and data["reason"] == "deje":
            closing = hand.closing
            assert closing is not None and closing[0] == "rejected" and not hand.deje_paid, event
            assert (data["team"], data["points"], data["lance"]) == (closing[2], closing[3], hand.lances[-1]), event
            hand.deje_paid = True
        elif kind is EventKind.LANCE_CLOSED:
            lance = hand.lances[-1]
            assert data["lance"] == lance, event
            if hand.betting is None:
                holders = [seat for seat, has in hand.declared.get(lance, []) if has]
                assert lance in ("pares", "juego") and len({seat % 2 for seat in holders}) < 2, event
                assert data["outcome"] == ("no_betting" if holders else "skipped"), event
                assert data["winner_team"] == (holders[0] % 2 if holders else None), event
            else:
                closing = hand.closing
                assert closing is not None, f"{lance} closed while §8.2 still waits for seat {hand.betting.turn}"
                outcome, stake, winner, _ = closing
                assert (data["outcome"], data["stake"], data["winner_team"]) == (outcome, stake, winner), event
                assert not hand.deje_paid, event
                if outcome == "rejected":  # §8.3: the deje is scored at once, as soon as the lance closes
                    following = match.events[index + 1]
                    assert kind_of(following) is EventKind.POINTS_SCORED and payload(following)["reason"] == "deje", (
                        event
                    )
        elif kind is EventKind.HANDS_SHOWN:
            shown = [parse_hand(text) for text in data["hands"]]
            for lance, declarations in hand.declared.items():
                for seat, has in declarations:
                    assert has == holds(lance, shown[seat], rules), f"seat {seat} declared {has} in {lance}: {shown}"
        elif kind is EventKind.GAME_ENDED:
            hand.betting = hand.closing = None


@dataclass(slots=True)
class DiscardRound:
    """One hand's cards as the omniscient event log tells them, for `check_discards_and_stock`."""

    mano: int
    order: list[int]
    hands: dict[int, set[str]]
    stock: set[str]
    pile: set[str] = dataclasses.field(default_factory=set)
    thrown: dict[int, set[str]] = dataclasses.field(default_factory=dict)
    counted: list[int] = dataclasses.field(default_factory=list)
    replaced: list[int] = dataclasses.field(default_factory=list)
    reshuffled: bool = False
    reshuffle_due: bool = False


def check_discards_and_stock(match: Match) -> None:
    """rules §4 and §5.2 over the event log: discards of discard_min..discard_max cards of one's own hand;
    counts published together (simultaneous) or at once (sequential); replacements dealt in `replacement_order`
    from the stock; when it runs out, a new stock of the discards, without the waiting seats' own discards of the
    round under `exclude_pending_own` (so nobody gets back a card he just threw away); the show is the hands."""
    rules = match.rules
    sequential = rules.discard_submission.value == "sequential"
    exclude_own = rules.reshuffle_pool.value == "exclude_pending_own"
    state: DiscardRound | None = None
    for event in match.events:
        data = payload(event)
        if kind_of(event) is EventKind.HAND_STARTED:
            order = [(data["mano"] + k) % 4 for k in range(4)]
            if rules.replacement_order.value == "dealer_first":
                order.reverse()
            state = DiscardRound(data["mano"], order, {}, {str(card) for card in FULL_DECK})
        elif state is None:
            continue
        elif kind_of(event) is EventKind.CARDS_DEALT:
            state.hands[data["seat"]] = cards_of(data["cards"])
            state.stock -= cards_of(data["cards"])
        elif kind_of(event) is EventKind.CARDS_DISCARDED:
            seat, thrown = data["seat"], cards_of(data["cards"])
            assert thrown <= state.hands[seat] and rules.discard_min <= len(thrown) <= rules.discard_max, event
            assert sequential or (seat not in state.thrown and not state.counted), event
            if sequential:
                assert seat == state.order[len(state.thrown)] and len(state.replaced) == len(state.thrown), event
            state.thrown[seat] = thrown
            state.pile |= thrown
        elif kind_of(event) is EventKind.DISCARD_COUNTED:
            seat = data["seat"]
            assert data["count"] == len(state.thrown[seat]), event
            if not sequential:
                # Published together, in speaking order, once all four have chosen and before any replacement.
                assert len(state.thrown) == 4 and not state.replaced, event
                assert seat == (state.mano + len(state.counted)) % 4, event
            state.counted.append(seat)
        elif kind_of(event) is EventKind.STOCK_RESHUFFLED:
            assert not state.reshuffled, "two reshuffles in one discard round"
            state.reshuffled = state.reshuffle_due = True
        elif kind_of(event) is EventKind.CARDS_REPLACED:
            seat, received = data["seat"], cards_of(data["cards"])
            assert seat == state.order[len(state.replaced)] and seat in state.counted, event
            assert len(received) == len(state.thrown[seat]), event
            if state.reshuffle_due:
                state.reshuffle_due = False
                # The stock ran out during this seat's block: it and the seats after it are waiting.
                assert len(state.stock) < len(received), event
                waiting = state.order[state.order.index(seat) :]
                kept = set().union(*(state.thrown.get(w, set()) for w in waiting)) if exclude_own else set()
                state.stock |= state.pile - kept
                state.pile = set(kept)
            assert received <= state.stock, f"{received - state.stock} did not come from the stock: {event}"
            if exclude_own:
                assert not received & state.thrown[seat], f"seat {seat} got back its own discards: {event}"
            state.stock -= received
            state.hands[seat] = (state.hands[seat] - state.thrown[seat]) | received
            state.replaced.append(seat)
            if len(state.replaced) == 4:
                state.thrown, state.counted, state.replaced, state.reshuffled = {}, [], [], False
        elif kind_of(event) is EventKind.HANDS_SHOWN:
            assert [cards_of(text) for text in data["hands"]] == [state.hands[seat] for seat in range(4)], event


def check_tanteo(match: Match) -> None:
    """rules §9: the tanteo pays, lance by lance and in order, what the table of §9.2 says, stopping at the
    target; an accepted órdago is decided on cards among the lance's holders (§8.4), after count_prior's entries."""
    rules = match.rules
    for hand_events in hands_of(match):
        shown = [e for e in hand_events if kind_of(e) is EventKind.HANDS_SHOWN]
        ended = [payload(e)["termination"] for e in hand_events if kind_of(e) is EventKind.GAME_ENDED]
        if not shown or ended == ["target_at_deje"]:
            continue  # a forfeit, or a game won on a deje: no tanteo
        hands = [parse_hand(text) for text in payload(shown[0])["hands"]]
        mano = payload(hand_events[0])["mano"]
        results: dict[str, tuple[str, int, int | None]] = {}
        ordago: str | None = None
        for seen in hand_events:
            if kind_of(seen) is EventKind.LANCE_CLOSED:
                if payload(seen)["outcome"] == "ordago_accepted":
                    ordago = payload(seen)["lance"]
                    break
                results[payload(seen)["lance"]] = (
                    payload(seen)["outcome"],
                    payload(seen)["stake"],
                    payload(seen)["winner_team"],
                )
        paid = [
            (payload(e)["team"], payload(e)["points"], payload(e)["lance"])
            for e in hand_events
            if kind_of(e) is EventKind.POINTS_SCORED and payload(e)["reason"] == "tanteo"
        ]
        if ordago is not None and rules.ordago_resolution.value == "immediate":
            assert paid == [], paid
            results = {}
        expected = tanteo_entries(results, hands, mano, rules)
        context = (payload(shown[0])["hands"], mano, results)
        assert paid == expected[: len(paid)], (paid, expected, context)
        if len(paid) < len(expected):
            assert ended == ["target_at_tanteo"], (paid, expected, context)
        if ordago is not None and ended == ["ordago"]:
            decided = [payload(e)["seat"] for e in hand_events if kind_of(e) is EventKind.LANCE_DECIDED]
            assert decided == [best_of(ordago, hands, mano, rules)], (ordago, decided, context)


# ------------------------------------------------------------------------------------- the battery


def check_tanteo_after_the_show(match: Match) -> None:
    """rules §9.1 item 2: tanteo points are counted "after all four hands are shown" (FEM C.VII-9); §8.4: at an
    accepted órdago "all four hands are shown and the current lance is decided on cards" (then count_prior counts)."""
    shown = False
    for event in match.events:
        kind = kind_of(event)
        if kind is EventKind.HAND_STARTED:
            shown = False
        elif kind is EventKind.HANDS_SHOWN:
            shown = True
        elif kind is EventKind.LANCE_DECIDED or (
            kind is EventKind.POINTS_SCORED and payload(event)["reason"] == "tanteo"
        ):
            assert shown, f"{event.to_json()} comes before the hands are shown"


LEGAL_SET_RATE = 0.05
"""The share of steps, drawn at random over each match, after which the legal sets are compared with `check` over
the whole action encoding (~120 codes per seat): the dearest invariant, so it samples steps rather than take all."""

FAULT_RATES = (0.0, 0.0, 0.004, 0.01, 0.02, 0.05)
"""A third of the matches without faults; the others up to a rate that forfeits most matches."""

STEP_INVARIANTS: tuple[tuple[str, Check], ...] = (
    ("all 40 cards, four per hand (§4, §5.2)", check_cards),
    (
        "scores never drop; games end only at the target, by órdago or by forfeit (§9.5, §8.4, §13)",
        check_scores_and_game_ends,
    ),
    ("faults counted per team; the limit forfeits at once (§13)", check_faults),
    ("an illegal action is never applied; a timeout is its default action (§13)", check_illegal_actions_and_timeouts),
)
"""Checked after every step of every match: (name, check)."""

LEGAL_SETS = "legal_actions agrees with check over the whole action encoding"

MATCH_INVARIANTS: tuple[tuple[str, Callable[[Match], None]], ...] = (
    ("turns, declarations and the betting state machine (§3, §5.1, §7, §8.2, §8.3)", check_hand_protocol),
    ("discards and replacements follow the stock and the reshuffle rules (§4, §5.2)", check_discards_and_stock),
    ("the tanteo is counted after the hands are shown (§9.1, §8.4)", check_tanteo_after_the_show),
    ("the tanteo pays each lance what the scoring table says (§9, §8.4)", check_tanteo),
    ("the outcome agrees with the games, the vacas and the faults (§9.5, §10, §13)", check_outcome),
    ("the replay file replays to the same events (§4.1)", check_replays),
)
"""Checked once each match is over: (name, check)."""


class InvariantBroken(AssertionError):
    """An invariant failed: the message names it, the rules variant and the scenario that reproduces it."""


def broken(name: str, scenario: Scenario, where: str, error: AssertionError) -> InvariantBroken:
    return InvariantBroken(
        f"invariant broken: {name}\n  rules variant {scenario.variant}, seed {scenario.seed}, {scenario.policy} "
        f"policy with seed {scenario.policy_seed}, fault rate {scenario.fault_rate}, setup {scenario.setup}\n"
        f"  {where}: {error}"
    )


def run_battery(scenario: Scenario) -> Match:
    """Play the scenario's match once and check every invariant on it: after each step, then over the whole match."""
    _payloads.clear()
    match = Match(scenario.rules, scenario.seed, scenario.setup)
    rng = random.Random(scenario.policy_seed)
    sampler = random.Random(scenario.policy_seed ^ scenario.seed)  # which steps get the legal-set check
    policy = POLICIES[scenario.policy]
    for index in range(MAX_STEPS):
        if match.is_over:
            break
        played = take_step(match, rng, policy, scenario.fault_rate)
        for name, check in STEP_INVARIANTS:
            try:
                check(match, played)
            except AssertionError as error:
                raise broken(name, scenario, f"after step {index} ({played.record.step})", error) from error
        if index == 0 or sampler.random() < LEGAL_SET_RATE:
            try:
                check_legal_sets(match, played)
            except AssertionError as error:
                raise broken(LEGAL_SETS, scenario, f"after step {index} ({played.record.step})", error) from error
    assert match.is_over, f"the match did not end within {MAX_STEPS} steps: {scenario}"
    for name, whole in MATCH_INVARIANTS:
        try:
            whole(match)
        except AssertionError as error:
            raise broken(name, scenario, f"over the match of {len(match.log)} steps", error) from error
    return match


# ------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize(
    ("variant", "rules"), [pytest.param(name, Rules.from_options(options), id=name) for name, options in OPTION_MATRIX]
)
@BATTERY
@given(data=st.data())
def test_every_invariant_holds_on_random_matches_of_every_rules_variant(
    variant: str, rules: Rules, data: st.DataObject
) -> None:
    run_battery(data.draw(scenarios(st.just(rules), variant=variant, fault_rates=FAULT_RATES)))


@SAMPLED
@given(
    rules=ALL_RULES,
    seed=st.integers(0, 2**32 - 1),
    deck=st.permutations(FULL_DECK),
    first_dealer=st.integers(0, 3),
    policy_seed=st.integers(0, 2**32 - 1),
)
def test_a_deck_deals_card_i_to_seat_mano_plus_i_and_replacements_from_card_16_on(
    rules: Rules, seed: int, deck: list[Card], first_dealer: int, policy_seed: int
) -> None:
    """rules §4: card i < 16 goes to seat (mano + i) % 4; the stock is dealt in deck order, card 16 first."""
    setup = Setup(decks={0: deck}, first_dealer=first_dealer)
    match = Scenario(rules, seed, "patient", policy_seed, 0.0, setup).play(max_steps=300)
    mano = (first_dealer + 1) % 4
    first_hand = match.events[: next((e.seq for e in match.events if kind_of(e) is EventKind.HAND_ENDED), None)]
    dealt = {
        payload(e)["seat"]: cards_of(payload(e)["cards"]) for e in first_hand if kind_of(e) is EventKind.CARDS_DEALT
    }
    assert dealt == {seat: {str(deck[i]) for i in range(16) if (mano + i) % 4 == seat} for seat in range(4)}
    position = 16
    for event in first_hand:
        if kind_of(event) is EventKind.STOCK_RESHUFFLED:
            break
        if kind_of(event) is EventKind.CARDS_REPLACED:
            received = cards_of(payload(event)["cards"])
            assert received == {str(card) for card in deck[position : position + len(received)]}, event
            position += len(received)


@SAMPLED
@given(scenario=scenarios(ALL_RULES), other_policy_seed=st.integers(0, 2**32 - 1))
def test_the_deal_of_every_hand_depends_only_on_the_seed_and_the_hand_number(
    scenario: Scenario, other_policy_seed: int
) -> None:
    """rules §4.1: no action, seña, leak or timeout changes a hand's deck (nor the first dealer)."""

    def deals(match: Match) -> dict[int, list[Any]]:
        out: dict[int, list[Any]] = {}
        hand = -1
        for event in match.events:
            if kind_of(event) is EventKind.HAND_STARTED:
                hand = payload(event)["hand"]
                out[hand] = [payload(event)["mano"]]
            elif kind_of(event) is EventKind.CARDS_DEALT:
                out[hand].append((payload(event)["seat"], payload(event)["cards"]))
        return out

    first = deals(scenario.play())
    second = deals(dataclasses.replace(scenario, policy_seed=other_policy_seed, policy="patient").play())
    for hand in first.keys() & second.keys():
        assert first[hand] == second[hand], f"hand {hand} was dealt differently"
