"""Every rules option of rules §14, each shown changing a scripted hand the way the rulebook says.

Hands are scripted with `deck_from_hands` (seat 0 is the mano of hand 0, as in the vectors; team A = seats 0 and
2, team B = seats 1 and 3), so every expected number below is worked out by hand from the rulebook.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from referee.engine.actions import Action, ActionKind
from referee.engine.cards import FULL_DECK, Card, parse_cards
from referee.engine.chance import Setup, deck_from_hands
from referee.engine.errors import IllegalActionError, MatchOverError, RulesError
from referee.engine.events import Event, EventKind
from referee.engine.match import DecisionKind, Match
from referee.engine.outcome import GameTermination, MatchTermination
from referee.engine.rules import OPTION_KEYS, Rules
from referee.engine.selfplay import play_random_match
from referee.engine.senas import Sena
from referee.engine.transcript import render_transcript
from referee.engine.vectors import evaluate_scenario
from tests.conftest import REPO
from tests.support.events import fields

A, B = 0, 1

# ---------------------------------------------------------------- hands used by several tests (vectors' hands)

S01_HANDS = ["12o 12c 5o 1o", "11o 11c 10o 7o", "1c 2o 4o 4c", "10c 10e 7c 4e"]
S02_HANDS = ["12o 7o 5o 4o", "11o 10o 6o 1o", "1c 5c 6c 7c", "2o 4c 10c 11c"]  # also S10's hands
S03_HANDS = ["12o 12c 7o 6o", "11o 11c 11e 4o", "5o 5c 1o 1c", "10o 7c 6c 4c"]
S04_HANDS = ["12o 11o 10o 1o", "12c 3o 11c 7o", "10c 10e 7c 4o", "6o 6c 5o 4c"]
S12_HANDS = ["12o 12c 7o 6o", "11o 11c 10o 4o", "5o 5c 1o 2o", "10c 7c 6c 4c"]
ALL_PASS = ["S0 paso", "S1 paso", "S2 paso", "S3 paso"]


# ---------------------------------------------------------------- helpers


def deck_for(hands: Sequence[str], mano: int = 0) -> list[Card]:
    return deck_from_hands([parse_cards(hand) for hand in hands], mano=mano)


def scripted_match(
    hands: Sequence[str],
    options: Mapping[str, Any] | None = None,
    *,
    start: tuple[int, int] = (0, 0),
    mus: bool = False,
    decks: Mapping[int, Sequence[Card]] | None = None,
) -> Match:
    """Hand 0 deals `hands[k]` to seat k (seat 0 is the mano); without `mus` the hand starts at Grande."""
    setup = Setup(
        first_dealer=3,
        decks={0: deck_for(hands), **(decks or {})},
        start_score=start,
        skip_mus_first_hand=not mus,
    )
    return Match(Rules.from_options(dict(options or {})), seed=0, setup=setup)


def answer_non_betting(match: Match, *, declare: bool = True) -> None:
    """Answer seña rounds with nothing and declarations truthfully, as the scenario vectors do."""
    automatic = (DecisionKind.SENAS, DecisionKind.DECLARE) if declare else (DecisionKind.SENAS,)
    while not match.is_over and match.decision in automatic:
        seat = match.awaited()[0]
        match.apply(seat, match.legal_actions(seat)[0])


def act(match: Match, *lines: str, declare: bool = True) -> None:
    """Apply lines such as `S0 envido 2`, answering seña rounds (and declarations, if `declare`) in between."""
    for line in lines:
        answer_non_betting(match, declare=declare)
        seat, _, action = line.partition(" ")
        match.apply(int(seat[1:]), Action.parse(action))
    answer_non_betting(match, declare=declare)


def scenario(
    hands: Sequence[str],
    actions: Mapping[str, Sequence[str]],
    options: Mapping[str, Any] | None = None,
    start: tuple[int, int] = (0, 0),
) -> dict[str, Any]:
    """One hand through `vectors.evaluate_scenario`: final score, points of the hand, game winner."""
    case = {
        "id": "T",
        "hands": [hand.split() for hand in hands],
        "actions": {lance: list(lines) for lance, lines in actions.items()},
        "config": dict(options or {}),
        "start_score": {"A": start[0], "B": start[1]},
    }
    return evaluate_scenario(case, {})


def final(result: Mapping[str, Any]) -> tuple[int, int]:
    return result["final_score"]["A"], result["final_score"]["B"]


def decision(match: Match) -> DecisionKind | None:
    """The decision asked now (a call, so that mypy does not narrow it across applied actions)."""
    return match.decision


def kinds(events: Sequence[Event], kind: EventKind) -> list[Event]:
    return [event for event in events if event.kind is kind]


def scored(match: Match) -> list[tuple[int, int, str | None, str]]:
    """Every points_scored entry: (team, points, lance, reason)."""
    return [
        (
            fields(e)["team"],
            fields(e)["points"],
            fields(e)["lance"],
            fields(e)["reason"],
        )
        for e in kinds(match.events, EventKind.POINTS_SCORED)
    ]


def events_since(match: Match, start: int) -> list[Event]:
    return match.events[start:]


# ---------------------------------------------------------------- §14 itself: keys, defaults, allowed values


def rulebook_option_rows() -> list[tuple[str, str, str]]:
    """The rows of the §14 table of docs/rules.md: (key, type, allowed values)."""
    text = (REPO / "docs" / "rules.md").read_text()
    section = text[text.index("## 14.") : text.index("Options: the exact effect")]
    rows = []
    for line in section.splitlines():
        match = re.match(r"^\| `(\w+)` \| ([^|]+) \| (.+) \| [\d., ]+ \|$", line)
        if match:
            rows.append((match.group(1), match.group(2).strip(), match.group(3).strip()))
    return rows


def test_the_engine_knows_exactly_the_keys_of_the_14_table_with_its_defaults() -> None:
    rows = rulebook_option_rows()
    assert len(rows) == 34
    assert sorted(key for key, _, _ in rows) == sorted(OPTION_KEYS)
    defaults = Rules().to_options()
    for key, _, allowed in rows:
        [bold] = re.findall(r"\*\*([^*]+)\*\*", allowed)
        try:
            expected = json.loads(bold)
        except json.JSONDecodeError:
            expected = bold
        assert defaults[key] == expected, key
    assert Rules.from_options({}) == Rules()


def enum_and_bool_values() -> list[tuple[str, str, bool]]:
    """(key, JSON value, unsupported?) for every value the table lists for an enum or bool option."""
    out = []
    for key, kind, allowed in rulebook_option_rows():
        if kind not in ("enum", "bool"):
            continue
        for part in allowed.split(r"\|"):
            value = re.search(r"[\w.-]+", part.replace("**", ""))
            assert value is not None
            out.append((key, value.group(0), "unsupported in v1" in part))
    return out


@pytest.mark.parametrize(("key", "value", "unsupported"), enum_and_bool_values())
def test_every_listed_value_is_accepted_unless_unsupported_in_v1_14(key: str, value: str, unsupported: bool) -> None:
    raw: Any = {"true": True, "false": False}.get(value, value)
    if unsupported:
        with pytest.raises(RulesError, match=rf"{key}={value} is unsupported in v1"):
            Rules.from_options({key: raw})
    else:
        assert Rules.from_options({key: raw}).to_options()[key] == raw


@pytest.mark.parametrize(
    "key", ["reveal_hands_at_end", "sena_set", "max_timeouts_before_forfeit", "targetscore", "Deck_mode"]
)
def test_an_unknown_key_is_rejected_removed_keys_included_14(key: str) -> None:
    with pytest.raises(RulesError, match=rf"unknown rules option '{key}'; known options: deck_mode, real_31"):
        Rules.from_options({key: 1})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"deck_mode": "6_reyes"}, "deck_mode must be one of 8_reyes, 4_reyes"),
        ({"real_31": True}, "real_31 must be one of off, 7-7-7-sota, 7-7-7-figure"),
        ({"target_score": 0}, "target_score must be at least 1, got 0"),
        ({"target_score": 30.0}, "target_score must be an integer"),
        ({"target_score": True}, "target_score must be an integer"),
        ({"games_to_win_vaca": 0}, "games_to_win_vaca must be at least 1"),
        ({"vacas_to_win_match": 0}, "vacas_to_win_match must be at least 1"),
        ({"min_bet": 0}, "min_bet must be at least 1"),
        ({"min_raise": 0}, "min_raise must be at least 1"),
        ({"max_total_stake": 1}, "max_total_stake must be at least 2"),
        ({"max_total_stake": "forty"}, 'max_total_stake must be "target_score", an integer or null'),
        ({"max_total_stake": 2.5}, 'max_total_stake must be "target_score", an integer or null'),
        ({"deje_mode": "fem"}, "deje_mode must be one of previous_stake, always_one, fem_plus_one"),
        ({"refused_jugada_bonus_to": "mano"}, "refused_jugada_bonus_to must be one of bettor_team, none, best_cards"),
        ({"paso_point_in_pares_juego": 1}, "paso_point_in_pares_juego must be true or false"),
        ({"punto_bonus": "yes"}, "punto_bonus must be true or false"),
        ({"ordago_resolution": "later"}, "ordago_resolution must be one of immediate, count_prior"),
        ({"response_mode": "loudest"}, "response_mode must be one of"),
        ({"max_mus_rounds": 0}, "max_mus_rounds must be at least 1 or null"),
        ({"max_mus_rounds": "20"}, "max_mus_rounds must be an integer or null"),
        ({"discard_min": 0}, "discard_min must be between 1 and 4"),
        ({"discard_max": 5}, "discard_max must be between 1 and 4"),
        ({"discard_min": 3, "discard_max": 2}, "discard_min (3) must not exceed discard_max (2)"),
        ({"discard_submission": "batch"}, "discard_submission must be one of simultaneous, sequential"),
        ({"replacement_order": "random"}, "replacement_order must be one of mano_first, dealer_first"),
        ({"reshuffle_pool": "none"}, "reshuffle_pool must be one of exclude_pending_own, all_discards"),
        ({"declarations": "never"}, "declarations must be one of automatic, bot_declares"),
        ({"senas_mode": "on"}, "senas_mode must be one of off, voluntary, automatic"),
        ({"sena_truth": "roughly"}, "sena_truth must be one of exact, at_least"),
        ({"sena_la_bonita": None}, "sena_la_bonita must be true or false"),
        ({"max_senas_per_window": -1}, "max_senas_per_window must be at least 0"),
        ({"sena_leak_probability": 1.5}, "sena_leak_probability must be between 0 and 1"),
        ({"sena_leak_probability": -0.1}, "sena_leak_probability must be between 0 and 1"),
        ({"sena_leak_probability": float("nan")}, "sena_leak_probability must be a finite number"),
        ({"sena_leak_probability": 10**400}, "sena_leak_probability is out of range: an integer of 1329 bits"),
        ({"time_bank_s": -(10**400)}, "time_bank_s is out of range"),
        ({"sena_violation_policy": "ignore"}, "sena_violation_policy must be one of reject, reject_and_penalise"),
        ({"decision_timeout_s": 0}, "decision_timeout_s must be above 0"),
        ({"decision_timeout_s": "10"}, "decision_timeout_s must be a number"),
        ({"time_bank_s": -1}, "time_bank_s must be at least 0"),
        ({"time_bank_s": 5_000_000}, "time_bank_s must be at least 0 and at most 86400, got 5000000"),
        ({"time_bank_s": 86400.001}, "time_bank_s must be at least 0 and at most 86400"),
        ({"decision_timeout_s": 1e308}, "decision_timeout_s must be above 0 and at most 3600, got 1e+308"),
        ({"decision_timeout_s": 3600.5}, "decision_timeout_s must be above 0 and at most 3600"),
        ({"max_senas_per_window": 18}, "max_senas_per_window must be at most 17"),
        ({"target_score": 1001}, "target_score must be at most 1000"),
        ({"target_score": 10**9}, "target_score must be at most 1000"),
        ({"max_total_stake": 1001}, "max_total_stake must be at most 1000"),
        ({"illegal_action_policy": "ignore"}, "illegal_action_policy must be one of retry, default_action"),
        ({"max_faults_before_forfeit": 0}, "max_faults_before_forfeit must be at least 1"),
        ({"mus_decision_mode": "anyone"}, "mus_decision_mode must be one of sequential, fem_out_of_turn"),
        ({"first_hand_mus_corrido": "no"}, "first_hand_mus_corrido must be true or false"),
        ({"fem_minimum_hand_ordago_penalty": 0}, "fem_minimum_hand_ordago_penalty must be true or false"),
    ],
)
def test_an_out_of_range_value_is_rejected_naming_the_option_14(options: dict[str, Any], message: str) -> None:
    with pytest.raises(RulesError, match=re.escape(message)):
        Rules.from_options(options)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"deck_mode": "8_reyes"}, "deck_mode must be a DeckMode; got '8_reyes'"),
        ({"target_score": True}, "target_score must be an integer"),
        ({"max_faults_before_forfeit": 2.5}, "max_faults_before_forfeit must be an integer"),
        ({"time_bank_s": 10**400}, "time_bank_s is out of range"),
        ({"sena_la_bonita": 1}, "sena_la_bonita must be true or false"),
    ],
)
def test_a_match_refuses_rules_built_in_python_with_a_value_of_the_wrong_type_14(
    fields: dict[str, Any], message: str
) -> None:
    """A string where an enum belongs would otherwise play another rule (`"8_reyes"` is not `DeckMode.OCHO_REYES`)."""
    with pytest.raises(RulesError, match=re.escape(message)):
        Match(Rules(**fields))


@pytest.mark.parametrize(
    "options",
    [
        {"target_score": 1},
        {"max_total_stake": 2},
        {"max_total_stake": None},
        {"max_total_stake": "target_score"},
        {"max_mus_rounds": 1},
        {"max_mus_rounds": None},
        {"discard_min": 4, "discard_max": 4},
        {"discard_min": 1, "discard_max": 1},
        {"max_senas_per_window": 0},
        {"sena_leak_probability": 0},
        {"sena_leak_probability": 1},
        {"time_bank_s": 0},
        {"time_bank_s": 86400},
        {"decision_timeout_s": 0.001},
        {"decision_timeout_s": 3600},
        {"max_senas_per_window": 17},
        {"target_score": 1000, "max_total_stake": 1000},
        {"max_faults_before_forfeit": 1},
    ],
)
def test_boundary_values_of_the_14_ranges_are_accepted(options: dict[str, Any]) -> None:
    rules = Rules.from_options(options)
    assert all(rules.to_options()[key] == value for key, value in options.items())


# ---------------------------------------------------------------- deck_mode, real_31 (§2, §6.6)


def test_deck_mode_4_reyes_makes_3s_and_2s_plain_cards_so_the_hand_scores_differently_2_2() -> None:
    """S0 holds 3-3-3-2: in 8 reyes R-R-R-A (medias of kings, 31); in 4 reyes medias of 3s worth 11 points."""
    hands = ["3o 3c 3e 2o", "12o 11o 10o 7o", "4o 5o 6o 1o", "4c 5c 6c 1c"]
    # 8 reyes: Grande S0 (3 kings) A+1; Chica S2 (A-4-5-6 ties S3, nearer the mano) A+1; Pares only S0 (medias)
    # A+2; Juego S0 31 beats S1 37 after both pass: A+3 (S0's 31).
    ocho = scenario(hands, {"grande": ALL_PASS, "chica": ALL_PASS, "pares": [], "juego": ["S0 paso", "S1 paso"]})
    assert final(ocho) == (7, 0)
    # 4 reyes: Grande S1 (a real king) B+1; Chica S2 A+1; Pares only S0 (medias of 3s) A+2; Juego only S1 (37) B+2.
    cuatro = scenario(
        hands,
        {"grande": ALL_PASS, "chica": ALL_PASS, "pares": [], "juego": []},
        {"deck_mode": "4_reyes"},
    )
    assert final(cuatro) == (3, 3)


REAL_HANDS = ["12o 11o 10o 1o", "7o 7c 7e {fourth}", "4o 5o 6o 1c", "4c 5c 6c 2o"]
REAL_ACTIONS = {"grande": ALL_PASS, "chica": ALL_PASS, "pares": [], "juego": ["S0 paso", "S1 paso"]}


@pytest.mark.parametrize(
    ("real_31", "fourth", "juego_to"),
    [
        ("off", "10c", A),  # 31 against 31: the tie goes to the mano (S0)
        ("7-7-7-sota", "10c", B),  # the real 31 beats the mano's ordinary 31
        ("7-7-7-sota", "11c", A),  # 7-7-7-caballo is not a real under 7-7-7-sota
        ("7-7-7-figure", "11c", B),
        ("7-7-7-figure", "3c", B),  # in 8 reyes a 3 is a rey, so a figure
        ("7-7-7-sota", "3c", A),
    ],
)
def test_real_31_decides_a_31_against_31_juego_as_configured_6_6(real_31: str, fourth: str, juego_to: int) -> None:
    hands = [hand.format(fourth=fourth) for hand in REAL_HANDS]
    result = scenario(hands, REAL_ACTIONS, {"real_31": real_31})
    # Grande S0 A+1, Chica S2 A+1, Pares only S1 (medias of 7s) B+2, Juego 3 (a 31, real or not) to `juego_to`.
    assert final(result) == ((5, 2) if juego_to == A else (2, 5))


# ---------------------------------------------------------------- target_score and the end of a game (§9.5)


def test_target_score_30_ends_the_game_in_pares_when_b_reaches_31_9_5() -> None:
    """§9.5: S04 from A 10, B 28 to 30: Grande B 29, Chica A 12, Pares B 31 wins; the Juego entry never counts."""
    actions = {
        "grande": ALL_PASS,
        "chica": ["S0 envido 2", "S1 quiero"],
        "pares": ["S1 paso", "S2 paso", "S3 paso"],
        "juego": ["S0 envido 2", "S1 mas 5", "S2 no_quiero", "S0 quiero"],
    }
    to_40 = scenario(S04_HANDS, actions, start=(10, 28))
    assert (final(to_40), to_40["game_winner"]) == ((25, 31), None)
    to_30 = scenario(S04_HANDS, actions, {"target_score": 30}, (10, 28))
    assert (final(to_30), to_30["game_winner"]) == ((12, 31), "B")


def test_the_tanteo_counts_grande_first_so_b_wins_from_36_38_before_a_juego_is_counted_9_5() -> None:
    """§9.5: from A 36, B 38, B wins 2 accepted in Grande; A's 8 accepted in Juego (plus values) never counts."""
    hands = ["12o 11o 10o 1o", "12c 12e 12b 3o", "4o 5o 6o 7o", "4c 5c 6c 7c"]
    match = scripted_match(hands, start=(36, 38))
    act(match, "S0 envido 2", "S1 quiero", *ALL_PASS, "S0 envido 8", "S1 quiero")
    [game] = match.game_results
    assert (game.winner, game.score, game.termination) == (B, (36, 40), GameTermination.TARGET_AT_TANTEO)
    assert scored(match) == [(B, 2, "grande", "tanteo")]


def test_the_score_keeps_the_overshoot_s04_from_30_ends_on_45_9_5() -> None:
    actions = {
        "grande": ALL_PASS,
        "chica": ["S0 envido 2", "S1 quiero"],
        "pares": ["S1 paso", "S2 paso", "S3 paso"],
        "juego": ["S0 envido 2", "S1 mas 5", "S2 no_quiero", "S0 quiero"],
    }
    result = scenario(S04_HANDS, actions, start=(30, 0))
    assert (final(result), result["game_winner"]) == ((45, 3), "A")


def test_a_negada_that_reaches_the_target_ends_the_game_at_once_and_nothing_after_counts_9_5() -> None:
    """S08: from A 39, B 20 a refused envido in Grande gives A 40; the tanteo of the hand is never counted."""
    match = scripted_match(S01_HANDS, start=(39, 20))
    act(match, "S0 envido 2", "S1 no_quiero", "S3 no_quiero")
    [game] = match.game_results
    assert (game.winner, game.score, game.termination, game.hand_number) == (
        A,
        (39 + 1, 20),
        GameTermination.TARGET_AT_DEJE,
        0,
    )
    assert scored(match) == [(A, 1, "grande", "deje")]
    assert match.hand_number == 1 and match.score == [0, 0], "the next game starts from 0-0 with a new deal"
    shown = kinds(match.events, EventKind.HANDS_SHOWN)
    assert len(shown) == 1, "the hands are shown when the hand ends on the deje"


def test_a_deje_that_reaches_the_target_ends_the_game_before_earlier_paso_points_are_counted_9_5() -> None:
    """S12 from A 38, B 36: B's deje of 4 in Pares reaches 40 at once; A's Grande and Chica paso points never count."""
    match = scripted_match(S12_HANDS, start=(38, 36))
    act(match, *ALL_PASS, *ALL_PASS, "S0 envido 4", "S1 mas 3", "S2 no_quiero", "S0 no_quiero")
    [game] = match.game_results
    assert (game.winner, game.score, game.termination) == (B, (38, 40), GameTermination.TARGET_AT_DEJE)
    assert scored(match) == [(B, 4, "pares", "deje")]


# ---------------------------------------------------------------- games_to_win_vaca, vacas_to_win_match (§10)

KINGS_FOR_THE_MANO = ["12o 12c 12e 12b", "4o 5o 6o 7o", "4c 5c 6c 7c", "4e 5e 6e 7e"]


def ordago_every_hand(options: Mapping[str, Any], hands: int = 12) -> Match:
    """Each hand the mano (who holds the four kings) cuts the mus and calls órdago in Grande; it is accepted.

    The first dealer is seat 3, so hand k has mano k % 4 and the games go to A, B, A, B, ...
    """
    decks = {k: deck_for(KINGS_FOR_THE_MANO, mano=k % 4) for k in range(hands)}
    setup = Setup(first_dealer=3, decks=decks)
    match = Match(Rules.from_options({"senas_mode": "off", **options}), seed=0, setup=setup)
    while not match.is_over:
        mano = match.mano
        match.apply(mano, Action.no_mus())
        match.apply(mano, Action.ordago())
        match.apply((mano + 1) % 4, Action.quiero())
    return match


def test_games_to_win_vaca_default_is_best_of_three_10() -> None:
    match = ordago_every_hand({})
    assert match.outcome is not None
    assert [game.winner for game in match.outcome.games] == [A, B, A]
    assert [(v.winner, v.games) for v in match.outcome.vaca_results] == [(A, (2, 1))]
    assert all(game.termination is GameTermination.ORDAGO and game.score == (0, 0) for game in match.outcome.games)


def test_games_to_win_vaca_3_plays_first_to_three_games_10() -> None:
    match = ordago_every_hand({"games_to_win_vaca": 3})
    assert match.outcome is not None
    assert [game.winner for game in match.outcome.games] == [A, B, A, B, A]
    assert [(v.winner, v.games) for v in match.outcome.vaca_results] == [(A, (3, 2))]


def test_games_to_win_vaca_1_ends_the_match_after_one_game_10() -> None:
    match = ordago_every_hand({"games_to_win_vaca": 1})
    assert match.outcome is not None
    assert [game.winner for game in match.outcome.games] == [A]


def test_vacas_to_win_match_2_plays_vacas_until_one_team_has_two_10() -> None:
    match = ordago_every_hand({"vacas_to_win_match": 2})
    assert match.outcome is not None
    assert [game.winner for game in match.outcome.games] == [A, B, A, B, A, B, A, B, A]
    assert [(v.vaca, v.winner, v.games) for v in match.outcome.vaca_results] == [
        (0, A, (2, 1)),
        (1, B, (1, 2)),
        (2, A, (2, 1)),
    ]
    assert (match.outcome.winner, match.outcome.vacas, match.outcome.termination) == (
        A,
        (2, 1),
        MatchTermination.NORMAL,
    )
    assert [(game.vaca, game.game) for game in match.outcome.games] == [
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 0),
        (1, 1),
        (1, 2),
        (2, 0),
        (2, 1),
        (2, 2),
    ], "vacas and games count from 0"


# ---------------------------------------------------------------- min_bet, min_raise, max_total_stake (§8.1)


def betting_match(options: Mapping[str, Any] | None = None) -> Match:
    match = scripted_match(S02_HANDS, {"senas_mode": "off", **(options or {})})
    assert match.decision is DecisionKind.BET and match.awaited() == (0,)
    return match


def amounts(match: Match, kind: ActionKind) -> list[int]:
    return [a.amount for a in match.legal_actions(match.awaited()[0]) if a.kind is kind]


def test_min_bet_sets_the_smallest_opening_envido_8_1() -> None:
    default = betting_match()
    assert amounts(default, ActionKind.ENVIDO)[0] == 2
    with pytest.raises(IllegalActionError, match="envido 1 is below min_bet 2"):
        default.apply(0, Action.envido(1))
    five = betting_match({"min_bet": 5})
    assert amounts(five, ActionKind.ENVIDO)[0] == 5
    assert not five.is_legal(0, Action.envido(4))
    act(five, "S0 envido 5", "S1 quiero")
    assert five.lance is not None and five.lance.value == "chica"
    one = betting_match({"min_bet": 1})
    act(one, "S0 envido 1", "S1 no_quiero", "S3 no_quiero")
    assert scored(one) == [(A, 1, "grande", "deje")]


def test_min_raise_sets_the_smallest_mas_and_a_refused_small_raise_pays_the_stake_before_it_8_1() -> None:
    default = betting_match()
    act(default, "S0 envido 2")
    assert amounts(default, ActionKind.MAS)[0] == 2
    with pytest.raises(IllegalActionError, match="mas 1 is below min_raise 2"):
        default.apply(1, Action.mas(1))
    one = betting_match({"min_raise": 1})
    act(one, "S0 envido 2", "S1 mas 1", "S2 no_quiero", "S0 no_quiero")
    assert scored(one)[0] == (B, 2, "grande", "deje")


def test_max_total_stake_default_follows_target_score_8_1() -> None:
    forty = betting_match()
    assert amounts(forty, ActionKind.ENVIDO)[-1] == 40
    assert not forty.is_legal(0, Action.envido(41))
    thirty = betting_match({"target_score": 30})
    assert amounts(thirty, ActionKind.ENVIDO)[-1] == 30
    with pytest.raises(IllegalActionError, match=r"envido 31 is above the stake cap 30 \(max_total_stake\)"):
        thirty.apply(0, Action.envido(31))


def test_max_total_stake_a_bet_past_the_cap_is_illegal_and_never_becomes_an_ordago_8_1() -> None:
    match = betting_match({"max_total_stake": 10})
    assert amounts(match, ActionKind.ENVIDO) == list(range(2, 11))
    before = len(match.events)
    with pytest.raises(IllegalActionError, match="above the stake cap 10"):
        match.apply(0, Action.envido(11))
    assert len(match.events) == before and match.awaited() == (0,), "nothing was applied"
    act(match, "S0 envido 8")
    assert amounts(match, ActionKind.MAS) == [2]
    with pytest.raises(IllegalActionError, match=r"mas 3 takes the stake to 11, above the cap 10"):
        match.apply(1, Action.mas(3))
    assert [fields(e)["action"] for e in kinds(match.events, EventKind.BET)] == ["envido"], "no órdago appeared"
    act(match, "S1 mas 2")
    # At the cap no raise is legal: only quiero, no_quiero and órdago.
    assert match.legal_actions(2) == (Action.quiero(), Action.no_quiero(), Action.ordago())
    assert not match.is_legal(2, Action.mas(2))
    act(match, "S2 ordago", "S3 no_quiero", "S1 no_quiero")
    assert scored(match) == [(A, 10, "grande", "deje")], "the refused órdago pays the 10 accepted before it"


def test_max_total_stake_null_lets_a_bet_exceed_the_target_and_the_score_keeps_it_8_1() -> None:
    match = betting_match({"max_total_stake": None})
    act(match, "S0 envido 100", "S1 quiero")
    act(match, *ALL_PASS, *ALL_PASS)  # chica, then punto (nobody holds pares or juego)
    [game] = match.game_results
    # The accepted 100 in Grande goes to S0 (the only rey) at the tanteo: A reaches 100 and wins there.
    assert (game.winner, game.score, game.termination) == (A, (100, 0), GameTermination.TARGET_AT_TANTEO)


# ---------------------------------------------------------------- deje_mode (§8.3)

S02_ACTIONS = {
    "grande": ["S0 envido 2", "S1 mas 3", "S2 mas 2", "S3 no_quiero", "S1 no_quiero"],
    "chica": ["S0 paso", "S1 envido 2", "S2 quiero"],
    "pares": [],
    "punto": ALL_PASS,
}
S12_ACTIONS = {
    "grande": ALL_PASS,
    "chica": ALL_PASS,
    "pares": ["S0 envido 4", "S1 mas 3", "S2 no_quiero", "S0 no_quiero"],
    "juego": ["S0 paso", "S1 paso"],
}
S03_ACTIONS = {
    "grande": ALL_PASS,
    "chica": ALL_PASS,
    "pares": ["S0 paso", "S1 envido 2", "S2 no_quiero", "S0 no_quiero"],
    "juego": ["S0 paso", "S1 paso"],
}


def deje_of(hands: Sequence[str], actions: Mapping[str, Sequence[str]], options: Mapping[str, Any]) -> int:
    match = scripted_match(hands, options)
    act(match, *(line for lines in actions.values() for line in lines))
    [deje] = [points for _, points, _, reason in scored(match) if reason == "deje"]
    return deje


def test_deje_mode_previous_stake_pays_the_stake_accepted_before_the_refused_raise_8_3() -> None:
    assert deje_of(S02_HANDS, S02_ACTIONS, {}) == 5  # grande: 2, +3 (5), +2 (7) refused: 5
    assert deje_of(S12_HANDS, S12_ACTIONS, {}) == 4  # pares: 4, +3 (7) refused: 4
    assert deje_of(S03_HANDS, S03_ACTIONS, {}) == 1  # a refused first bet (negada) pays 1
    assert final(scenario(S12_HANDS, S12_ACTIONS)) == (2, 7)


def test_deje_mode_always_one_pays_one_for_a_refused_raise_8_3() -> None:
    options = {"deje_mode": "always_one"}
    assert deje_of(S02_HANDS, S02_ACTIONS, options) == 1
    assert deje_of(S12_HANDS, S12_ACTIONS, options) == 1
    assert final(scenario(S02_HANDS, S02_ACTIONS, options)) == (1, 3)
    assert final(scenario(S12_HANDS, S12_ACTIONS, options)) == (2, 4)


def test_deje_mode_fem_plus_one_adds_one_only_to_a_refused_raise_in_pares_juego_punto_8_3() -> None:
    options = {"deje_mode": "fem_plus_one"}
    assert deje_of(S12_HANDS, S12_ACTIONS, options) == 5  # pares: 4 + 1
    assert deje_of(S02_HANDS, S02_ACTIONS, options) == 5  # grande pays as previous_stake
    assert deje_of(S03_HANDS, S03_ACTIONS, options) == 1  # a negada in pares still pays 1
    assert final(scenario(S12_HANDS, S12_ACTIONS, options)) == (2, 8)
    # Punto: S0 envido 2, S1 mas 2 (4), S2 no_quiero, S0 no_quiero: B gets 2 + 1; the punto point is unchanged.
    punto = {
        "grande": ALL_PASS,
        "chica": ALL_PASS,
        "pares": [],
        "punto": ["S0 envido 2", "S1 mas 2", "S2 no_quiero", "S0 no_quiero"],
    }
    assert deje_of(S02_HANDS, punto, options) == 3
    # Grande S0 A+1; Chica S3 B+1; punto deje B+3 and the punto point B+1.
    assert final(scenario(S02_HANDS, punto, options)) == (1, 5)
    assert final(scenario(S02_HANDS, punto)) == (1, 4)


# ---------------------------------------------------------------- refused_jugada_bonus_to (§9.2, §14)

S10_REFUSED_PUNTO = {
    "grande": ALL_PASS,
    "chica": ALL_PASS,
    "pares": [],
    "punto": ["S0 envido 2", "S1 no_quiero", "S3 no_quiero"],
}


def test_refused_jugada_bonus_to_bettor_team_pays_the_refusal_winners_own_pares_9_2() -> None:
    """S03: B's bet in pares is refused; B collects its medias (2) although A's duples are better."""
    assert final(scenario(S03_HANDS, S03_ACTIONS)) == (2, 5)
    # §9.4: a refused punto pays the deje at once and the punto point to the bettor's team: A 3, B 1.
    assert final(scenario(S02_HANDS, S10_REFUSED_PUNTO)) == (3, 1)


def test_refused_jugada_bonus_to_best_cards_pays_the_team_with_the_best_pares_9_2() -> None:
    options = {"refused_jugada_bonus_to": "best_cards"}
    # Best pares: S2's duples, so A collects S0's par (1) + S2's duples (3); B keeps its negada and its juego.
    assert final(scenario(S03_HANDS, S03_ACTIONS, options)) == (2 + 4, 1 + 2)
    # Best punto: seat 1 (27), so the punto point goes to B although A won the refusal.
    assert final(scenario(S02_HANDS, S10_REFUSED_PUNTO, options)) == (2, 2)


def test_refused_jugada_bonus_to_none_pays_nothing_at_the_tanteo_for_a_refused_lance_9_2() -> None:
    options = {"refused_jugada_bonus_to": "none"}
    assert final(scenario(S03_HANDS, S03_ACTIONS, options)) == (2, 3)
    assert final(scenario(S02_HANDS, S10_REFUSED_PUNTO, options)) == (2, 1), "no punto point, the deje stays"


# ---------------------------------------------------------------- paso_point_in_pares_juego, punto_bonus (§9.2, §9.4)


def test_paso_point_in_pares_juego_adds_one_to_a_passed_pares_but_not_to_a_one_team_juego_9_2() -> None:
    """S01: Pares passed by all four holders gives A 4 + 1; Juego held by B alone has no betting, so no point."""
    actions = {"grande": ALL_PASS, "chica": ALL_PASS, "pares": ALL_PASS, "juego": []}
    assert final(scenario(S01_HANDS, actions)) == (6, 5)
    assert final(scenario(S01_HANDS, actions, {"paso_point_in_pares_juego": True})) == (7, 5)


def test_paso_point_in_pares_juego_adds_one_to_a_passed_juego_but_not_to_a_lance_with_a_bet_9_2() -> None:
    """S03: the refused Pares gets no paso point; the Juego passed by S0 and S1 gives B 2 + 1."""
    assert final(scenario(S03_HANDS, S03_ACTIONS, {"paso_point_in_pares_juego": True})) == (2, 6)


def test_punto_bonus_false_pays_an_accepted_punto_the_bare_stake_9_4() -> None:
    """S10: Punto S0 envido 2, S1 quiero; seat 1's 27 wins: B 2 + 1 by default, 2 without the punto point."""
    actions = {"grande": ALL_PASS, "chica": ALL_PASS, "pares": [], "punto": ["S0 envido 2", "S1 quiero"]}
    assert final(scenario(S02_HANDS, actions)) == (1, 4)
    assert final(scenario(S02_HANDS, actions, {"punto_bonus": False})) == (1, 3)


def test_punto_bonus_false_leaves_a_passed_punto_at_1_and_a_refused_one_at_the_deje_9_4() -> None:
    passed = {"grande": ALL_PASS, "chica": ALL_PASS, "pares": [], "punto": ALL_PASS}
    # Grande S0 A+1, Chica S3 B+1, Punto passed: seat 1's 27 gives B 1 either way.
    assert final(scenario(S02_HANDS, passed)) == final(scenario(S02_HANDS, passed, {"punto_bonus": False})) == (1, 2)
    assert final(scenario(S02_HANDS, S10_REFUSED_PUNTO, {"punto_bonus": False})) == (2, 1)


# ---------------------------------------------------------------- ordago_resolution (§8.4)


def ordago_in_chica(options: Mapping[str, Any], start: tuple[int, int]) -> Match:
    """S02's hands: A (S0) wins Grande on cards, B (S3) wins Chica. 2 accepted in Grande, órdago accepted in Chica."""
    match = scripted_match(S02_HANDS, options, start=start)
    act(match, "S0 envido 2", "S1 quiero", "S0 ordago", "S1 quiero")
    return match


def test_ordago_resolution_immediate_voids_the_accepted_grande_and_the_ordago_decides_8_4() -> None:
    match = ordago_in_chica({}, (39, 25))
    [game] = match.game_results
    assert (game.winner, game.score, game.termination) == (B, (39, 25), GameTermination.ORDAGO)
    assert scored(match) == []


def test_ordago_resolution_count_prior_counts_grande_first_and_a_wins_from_39_25_8_4() -> None:
    match = ordago_in_chica({"ordago_resolution": "count_prior"}, (39, 25))
    [game] = match.game_results
    assert (game.winner, game.score, game.termination) == (A, (41, 25), GameTermination.TARGET_AT_TANTEO)
    assert scored(match) == [(A, 2, "grande", "tanteo")]
    assert not kinds(match.events, EventKind.LANCE_DECIDED), "the órdago is never looked at"


def test_ordago_resolution_count_prior_then_the_ordago_decides_with_the_counters_as_counted_8_4() -> None:
    match = ordago_in_chica({"ordago_resolution": "count_prior"}, (30, 25))
    [game] = match.game_results
    assert (game.winner, game.score, game.termination) == (B, (32, 25), GameTermination.ORDAGO)


# ---------------------------------------------------------------- response_mode (§8.2)


def test_response_mode_sequential_the_first_rivals_raise_is_final_for_his_team_8_2() -> None:
    match = betting_match()
    act(match, "S0 envido 2", "S1 mas 2")
    assert match.awaited() == (2,), "S3 is never asked: the raise is final; rivals_after(1) = [2, 0]"
    no_then_yes = betting_match()
    act(no_then_yes, "S0 envido 2", "S1 no_quiero")
    assert no_then_yes.awaited() == (3,), "a no quiero passes the turn to the partner"
    act(no_then_yes, "S3 quiero")
    assert no_then_yes.lance is not None and no_then_yes.lance.value == "chica", "the quiero prevails"


def test_response_mode_both_answer_the_most_aggressive_answer_stands_s3_raise_example_8_2() -> None:
    """§8.2: S0 envido 2, S1 mas 2, S3 mas 5: S3's raise stands, 7 pending with 2 accepted, queue [0, 2]."""
    match = betting_match({"response_mode": "both_answer_most_aggressive"})
    act(match, "S0 envido 2", "S1 mas 2")
    assert match.awaited() == (3,), "the partner answers after seeing the first answer"
    act(match, "S3 mas 5")
    assert match.awaited() == (0,)
    act(match, "S0 no_quiero")
    assert match.awaited() == (2,)
    act(match, "S2 no_quiero")
    assert scored(match) == [(B, 2, "grande", "deje")], "2 had been accepted before S3's raise"


def test_response_mode_both_answer_a_timeout_of_the_second_rival_leaves_the_first_answer_8_2() -> None:
    raised = betting_match({"response_mode": "both_answer_most_aggressive"})
    act(raised, "S0 envido 2", "S1 mas 2")
    raised.apply_timeout(3)
    assert raised.awaited() == (2,), "S1's raise stands"
    assert raised.faults == [0, 1], "the timeout is still a fault"
    accepted = betting_match({"response_mode": "both_answer_most_aggressive"})
    act(accepted, "S0 envido 2", "S1 quiero")
    accepted.apply_timeout(3)
    assert accepted.lance is not None and accepted.lance.value == "chica"


def test_response_mode_both_answer_between_equal_raises_the_first_stands_8_2() -> None:
    match = betting_match({"response_mode": "both_answer_most_aggressive"})
    act(match, "S0 envido 2", "S1 mas 3", "S3 mas 3")
    assert match.awaited() == (2,), "S1's raise stands, so A answers from rivals_after(1) = [2, 0]"


def test_response_mode_both_answer_a_partner_upgrades_a_quiero_and_a_quiero_beats_a_no_quiero_8_2() -> None:
    options = {"response_mode": "both_answer_most_aggressive"}
    upgraded = betting_match(options)
    act(upgraded, "S0 envido 2", "S1 quiero", "S3 mas 3")
    assert upgraded.awaited() == (0,), "S3's raise stands; A answers"
    kept = betting_match(options)
    act(kept, "S0 envido 2", "S1 quiero", "S3 no_quiero")
    assert kept.lance is not None and kept.lance.value == "chica"
    [closed] = [e for e in kinds(kept.events, EventKind.LANCE_CLOSED) if fields(e)["lance"] == "grande"]
    assert (fields(closed)["outcome"], fields(closed)["stake"]) == ("accepted", 2)
    ordago = betting_match(options)
    act(ordago, "S0 envido 2", "S1 ordago")
    assert ordago.awaited() == (2,), "after an órdago the partner is not asked"


# ---------------------------------------------------------------- mus phase: max_mus_rounds, discards (§5)


def mus_round(match: Match, counts: Sequence[int] = (1, 1, 1, 1)) -> None:
    """All four say mus, then seat k (in speaking order from the mano) discards its first counts[k] cards."""
    for seat in match.speaking_order():
        match.apply(seat, Action.mus())
    order = match.speaking_order()
    while match.decision is DecisionKind.DISCARD:
        seat = match.awaited()[0]
        match.apply(seat, Action.discard(match.hands[seat][: counts[order.index(seat)]]))


def mus_match(options: Mapping[str, Any] | None = None, seed: int = 7) -> Match:
    return Match(Rules.from_options({"senas_mode": "off", **(options or {})}), seed=seed)


def test_max_mus_rounds_cuts_the_mus_after_that_many_discards_5_1() -> None:
    match = mus_match({"max_mus_rounds": 2})
    mus_round(match)
    assert decision(match) is DecisionKind.MUS
    mus_round(match)
    [cut] = kinds(match.events, EventKind.MUS_CUT)
    assert fields(cut)["reason"] == "max_mus_rounds" and cut.public
    assert decision(match) is DecisionKind.BET and match.lance is not None and match.lance.value == "grande"
    assert len(kinds(match.events, EventKind.CARDS_DISCARDED)) == 8


@pytest.mark.parametrize(("limit", "rounds"), [(20, 19), (None, 30)])
def test_max_mus_rounds_default_20_and_null_keep_asking_for_mus_5_1(limit: int | None, rounds: int) -> None:
    match = mus_match({"max_mus_rounds": limit})
    for _ in range(rounds):
        mus_round(match)
    assert match.decision is DecisionKind.MUS and not kinds(match.events, EventKind.MUS_CUT)
    if limit is not None:
        mus_round(match)
        assert [fields(e)["reason"] for e in kinds(match.events, EventKind.MUS_CUT)] == ["max_mus_rounds"]
    assert sorted(map(str, match.card_census())) == sorted(map(str, FULL_DECK))


def to_discard_step(match: Match) -> None:
    for seat in match.speaking_order():
        match.apply(seat, Action.mus())
    assert match.decision is DecisionKind.DISCARD


@pytest.mark.parametrize(
    ("options", "sizes", "count"),
    [({}, {1, 2, 3, 4}, 15), ({"discard_min": 2}, {2, 3, 4}, 11), ({"discard_max": 2}, {1, 2}, 10)],
)
def test_discard_min_and_max_bound_the_legal_discards_5_2(options: dict[str, int], sizes: set[int], count: int) -> None:
    match = mus_match(options)
    to_discard_step(match)
    seat = match.awaited()[0]
    legal = match.legal_actions(seat)
    assert {len(a.cards) for a in legal} == sizes and len(legal) == count
    hand = match.hands[seat]
    for size in {1, 2, 3, 4} - sizes:
        with pytest.raises(IllegalActionError, match="is not legal"):
            match.apply(seat, Action.discard(hand[:size]))


def test_discard_submission_simultaneous_publishes_no_count_until_all_four_have_submitted_5_2() -> None:
    match = mus_match()
    to_discard_step(match)
    assert match.awaited() == match.speaking_order(), "all four choose at once"
    start = len(match.events)
    for k, seat in enumerate(match.speaking_order()[:3]):
        match.apply(seat, Action.discard(match.hands[seat][: k + 1]))
        assert not kinds(events_since(match, start), EventKind.DISCARD_COUNTED)
        assert not kinds(events_since(match, start), EventKind.CARDS_REPLACED)
    last = match.speaking_order()[3]
    match.apply(last, Action.discard(match.hands[last][:4]))
    after = [e for e in events_since(match, start) if e.kind in (EventKind.DISCARD_COUNTED, EventKind.CARDS_REPLACED)]
    assert [e.kind for e in after] == [EventKind.DISCARD_COUNTED] * 4 + [EventKind.CARDS_REPLACED] * 4
    assert [fields(e)["count"] for e in after[:4]] == [1, 2, 3, 4] and all(e.public for e in after[:4])
    assert all(e.to == frozenset({fields(e)["seat"]}) for e in after[4:]), "replacements are private"


def test_discard_submission_sequential_publishes_each_count_at_once_and_deals_before_the_next_seat_5_2() -> None:
    match = mus_match({"discard_submission": "sequential"})
    to_discard_step(match)
    for k, seat in enumerate(match.speaking_order()):
        assert match.awaited() == (seat,)
        start = len(match.events)
        match.apply(seat, Action.discard(match.hands[seat][: k + 1]))
        counted = kinds(events_since(match, start), EventKind.DISCARD_COUNTED)
        replaced = kinds(events_since(match, start), EventKind.CARDS_REPLACED)
        assert [(fields(e)["seat"], fields(e)["count"], e.public) for e in counted] == [(seat, k + 1, True)]
        assert [fields(e)["seat"] for e in replaced] == [seat]


HANDS_FOR_THE_MUS = ["12o 12c 5o 1o", "11o 11c 10o 7o", "1c 2o 4o 4c", "10c 10e 7c 4e"]


@pytest.mark.parametrize(
    ("order", "dealt"),
    [("mano_first", [0, 1, 2, 3]), ("dealer_first", [3, 2, 1, 0])],
)
def test_replacement_order_decides_which_stock_cards_each_seat_receives_5_2(order: str, dealt: list[int]) -> None:
    """Each seat discards one card; the stock is dealt from card 16 in the order of `replacement_order`."""
    deck = deck_for(HANDS_FOR_THE_MUS)
    match = scripted_match(HANDS_FOR_THE_MUS, {"senas_mode": "off", "replacement_order": order}, mus=True)
    mus_round(match)
    received = {fields(e)["seat"]: fields(e)["cards"] for e in kinds(match.events, EventKind.CARDS_REPLACED)}
    assert received == {seat: str(deck[16 + position]) for position, seat in enumerate(dealt)}


def test_replacement_order_dealer_first_also_orders_sequential_submissions_5_2() -> None:
    match = scripted_match(
        HANDS_FOR_THE_MUS,
        {"senas_mode": "off", "replacement_order": "dealer_first", "discard_submission": "sequential"},
        mus=True,
    )
    to_discard_step(match)
    asked = []
    while match.decision is DecisionKind.DISCARD:
        seat = match.awaited()[0]
        asked.append(seat)
        match.apply(seat, Action.discard(match.hands[seat][:1]))
    assert asked == [3, 2, 1, 0]


def reshuffle_example(pool: str) -> tuple[Match, list[Card], dict[int, list[Card]], dict[int, list[Card]]]:
    """§5.2 worked example: round 1 all discard 4; round 2 the discards are 3, 4, 2 and 4."""
    deck = deck_for(HANDS_FOR_THE_MUS)
    match = scripted_match(
        HANDS_FOR_THE_MUS, {"senas_mode": "off", "reshuffle_pool": pool, "max_mus_rounds": 2}, mus=True
    )
    mus_round(match, (4, 4, 4, 4))
    round2_start = len(match.events)
    mus_round(match, (3, 4, 2, 4))
    thrown = {
        fields(e)["seat"]: list(parse_cards(fields(e)["cards"]))
        for e in kinds(events_since(match, round2_start), EventKind.CARDS_DISCARDED)
    }
    received = {
        fields(e)["seat"]: list(parse_cards(fields(e)["cards"]))
        for e in kinds(events_since(match, round2_start), EventKind.CARDS_REPLACED)
    }
    return match, deck, thrown, received


def test_reshuffle_pool_exclude_pending_own_builds_a_23_card_stock_without_the_waiting_seats_discards_5_2() -> None:
    match, deck, thrown, received = reshuffle_example("exclude_pending_own")
    assert len(kinds(match.events, EventKind.STOCK_RESHUFFLED)) == 1
    # Round 1 used stock cards 16..31; round 2 deals 32..34 to seat 0, 35..38 to seat 1, 39 to seat 2.
    assert set(received[0]) == set(deck[32:35]) and set(received[1]) == set(deck[35:39])
    assert deck[39] in received[2]
    new_stock = set(deck[:16]) | set(thrown[0]) | set(thrown[1])  # round-1 discards + seats 0 and 1 of round 2
    assert len(new_stock) == 23
    from_new = (set(received[2]) - {deck[39]}) | set(received[3])
    assert len(from_new) == 5 and from_new <= new_stock
    assert not from_new & (set(thrown[2]) | set(thrown[3])), "a waiting seat never gets back a card it just threw"
    assert set(match.stock) | from_new == new_stock and len(match.stock) == 18
    assert sorted(map(str, match.discard_pile)) == sorted(map(str, thrown[2] + thrown[3])), "6 set aside"
    assert len(match.card_census()) == 40 and set(match.card_census()) == set(deck)


def test_reshuffle_pool_all_discards_builds_a_29_card_stock_that_ends_at_24_5_2() -> None:
    match, deck, thrown, received = reshuffle_example("all_discards")
    new_stock = set(deck[:16]) | {card for cards in thrown.values() for card in cards}
    assert len(new_stock) == 29
    from_new = (set(received[2]) - {deck[39]}) | set(received[3])
    assert from_new <= new_stock
    assert set(match.stock) | from_new == new_stock and len(match.stock) == 24
    assert match.discard_pile == []


# ---------------------------------------------------------------- declarations (§7)


def test_declarations_bot_declares_asks_each_seat_and_a_false_answer_is_illegal_7() -> None:
    match = scripted_match(S01_HANDS, {"senas_mode": "off", "declarations": "bot_declares"})
    act(match, *ALL_PASS, *ALL_PASS, declare=False)
    assert decision(match) is DecisionKind.DECLARE and match.awaited() == (0,)
    assert match.legal_actions(0) == (Action.declare(True),)
    with pytest.raises(IllegalActionError, match="declare no is not legal for seat 0"):
        match.apply(0, Action.declare(False))
    for seat in range(4):  # everyone holds pares in S01
        match.apply(seat, Action.declare(True))
    assert decision(match) is DecisionKind.BET
    act(match, *ALL_PASS, declare=False)
    # Juego: seats 1 and 3 hold it (37, 31); seats 0 and 2 must say no.
    assert decision(match) is DecisionKind.DECLARE
    assert match.legal_actions(0) == (Action.declare(False),)
    assert not match.is_legal(0, Action.declare(True))
    declared = [(fields(e)["seat"], fields(e)["has"]) for e in kinds(match.events, EventKind.DECLARED)]
    assert declared == [(0, True), (1, True), (2, True), (3, True)]


def test_declarations_automatic_never_asks_and_announces_the_truth_7() -> None:
    match = scripted_match(S01_HANDS, {"senas_mode": "off"})
    act(match, *ALL_PASS, *ALL_PASS)
    assert match.decision is DecisionKind.BET
    declared = [
        (fields(e)["lance"], fields(e)["seat"], fields(e)["has"]) for e in kinds(match.events, EventKind.DECLARED)
    ]
    assert declared == [("pares", 0, True), ("pares", 1, True), ("pares", 2, True), ("pares", 3, True)]


# ---------------------------------------------------------------- señas (§12.3)

BONITA_HANDS = ["12o 12c 12e 1o", "11o 11c 10o 7o", "1c 2o 4o 4c", "10c 10e 7c 4e"]  # S0: R-R-R-A = 31


def sena_verdicts(options: Mapping[str, Any], senas: Sequence[Sena], seat: int = 0) -> list[tuple[str, str]]:
    """Send a seña list in the Grande seña round; return the rejections (seña, reason)."""
    match = scripted_match(BONITA_HANDS, options)
    assert match.decision is DecisionKind.SENAS and match.awaited() == (0,)
    record = match.apply(seat, Action.send_senas(tuple(senas)))
    return [(sena.value, reason) for sena, reason in record.rejected_senas]


def test_senas_mode_voluntary_runs_a_sena_round_before_each_betting_lance_12_3() -> None:
    match = scripted_match(S01_HANDS)
    assert match.decision is DecisionKind.SENAS
    asked = []
    while match.decision is DecisionKind.SENAS:
        asked.append(match.awaited()[0])
        match.apply(asked[-1], Action.send_senas(()))
    assert asked == [0, 1, 2, 3] and match.decision is DecisionKind.BET


def test_senas_mode_off_has_no_windows_and_rejects_every_sena_12_3() -> None:
    match = scripted_match(S01_HANDS, {"senas_mode": "off"}, mus=True)
    record = match.apply(0, Action.mus((Sena.DOS_REYES,)))
    assert [(s.value, r) for s, r in record.rejected_senas] == [("dos_reyes", "señas are off (senas_mode=off)")]
    assert not kinds(match.events, EventKind.SENA_DELIVERED)
    match.apply(1, Action.no_mus())
    assert match.decision is DecisionKind.BET, "no seña round"


def test_senas_mode_automatic_sends_every_true_sena_once_and_rejects_chosen_ones_12_3() -> None:
    match = scripted_match(S01_HANDS, {"senas_mode": "automatic", "sena_leak_probability": 0.0}, mus=True)
    record = match.apply(0, Action.mus((Sena.CIEGO,)))
    assert [s.value for s, _ in record.rejected_senas] == ["ciego"]
    # S0 holds R-R-5-A: a pair of kings, 26 points.
    assert [fields(e)["sena"] for e in kinds(match.events, EventKind.SENA_DELIVERED)] == [
        "dos_reyes",
        "pares",
    ]
    match.apply(1, Action.no_mus())
    assert match.decision is DecisionKind.BET, "no seat is asked for señas"
    delivered = [
        (fields(e)["seat"], fields(e)["sena"], fields(e)["phase"])
        for e in kinds(match.events, EventKind.SENA_DELIVERED)
    ]
    # S1 C-C-S-7 (par, 37) had its mus window; S2 A-A-4-4 (2 = as: dos_ases, duples) and S3 S-S-7-4 (par, 31)
    # get theirs at Grande. Nothing is sent twice.
    assert delivered == [
        (0, "dos_reyes", "mus"),
        (0, "pares", "mus"),
        (1, "pares", "mus"),
        (1, "juego", "mus"),
        (2, "dos_ases", "grande"),
        (2, "duples", "grande"),
        (3, "pares", "grande"),
        (3, "treinta_y_una", "grande"),
    ]


def test_sena_truth_exact_rejects_dos_reyes_with_three_kings_and_at_least_accepts_it_12_3() -> None:
    exact = sena_verdicts({}, [Sena.DOS_REYES, Sena.MEDIAS_REYES, Sena.PARES])
    assert [sena for sena, _ in exact] == ["dos_reyes", "pares"]
    at_least = sena_verdicts({"sena_truth": "at_least"}, [Sena.DOS_REYES, Sena.MEDIAS_REYES, Sena.PARES])
    assert [sena for sena, _ in at_least] == ["pares"], "the class señas stay exact"


def test_sena_la_bonita_is_outside_the_vocabulary_unless_the_option_is_on_12_1() -> None:
    off = sena_verdicts({}, [Sena.LA_BONITA])
    assert off == [("la_bonita", "la_bonita is not in the vocabulary unless sena_la_bonita is true")]
    assert sena_verdicts({"sena_la_bonita": True}, [Sena.LA_BONITA]) == []
    with_true = scripted_match(S01_HANDS, {"sena_la_bonita": True})
    [(_, reason)] = with_true.apply(0, Action.send_senas((Sena.LA_BONITA,))).rejected_senas
    assert reason == "la_bonita is false for this hand", "R-R-5-A is not la bonita"


@pytest.mark.parametrize(("limit", "delivered"), [(3, 3), (1, 1)])
def test_max_senas_per_window_rejects_the_senas_beyond_the_first_n_12_3(limit: int, delivered: int) -> None:
    senas = [Sena.MEDIAS_REYES, Sena.TREINTA_Y_UNA, Sena.CORTAR_MUS, Sena.ENVIDAR_MAS]  # all true for R-R-R-A
    rejected = sena_verdicts({"max_senas_per_window": limit}, senas)
    assert [sena for sena, _ in rejected] == [s.value for s in senas[delivered:]]
    assert all(reason == f"beyond the first {limit} señas of the list (max_senas_per_window)" for _, reason in rejected)


def test_max_senas_per_window_0_means_no_sena_round_is_asked_12_3() -> None:
    match = scripted_match(S01_HANDS, {"max_senas_per_window": 0})
    assert match.decision is DecisionKind.BET


@pytest.mark.parametrize(("probability", "public"), [(0.0, False), (1.0, True)])
def test_sena_leak_probability_0_keeps_senas_with_the_partner_and_1_makes_them_public_12_3(
    probability: float, public: bool
) -> None:
    match = scripted_match(BONITA_HANDS, {"sena_leak_probability": probability})
    match.apply(0, Action.send_senas((Sena.MEDIAS_REYES,)))
    [event] = kinds(match.events, EventKind.SENA_DELIVERED)
    assert event.to == (None if public else frozenset({0, 2}))
    assert all(event.visible_to(seat) is (public or seat in (0, 2)) for seat in range(4))


def test_sena_leak_probability_02_leaks_about_one_sena_in_five_12_3() -> None:
    rules = Rules.from_options({"senas_mode": "automatic", "games_to_win_vaca": 3})
    delivered = [
        event for seed in range(40) for event in kinds(play_random_match(rules, seed).events, EventKind.SENA_DELIVERED)
    ]
    assert len(delivered) > 300
    leaked = sum(event.public for event in delivered) / len(delivered)
    assert 0.15 < leaked < 0.25
    assert all(
        event.public or event.to == frozenset({fields(event)["seat"], (fields(event)["seat"] + 2) % 4})
        for event in delivered
    )


def test_sena_violation_policy_reject_tells_only_the_sender_and_is_no_fault_12_3() -> None:
    match = scripted_match(S01_HANDS)
    record = match.apply(0, Action.send_senas((Sena.CUATRO_ASES, Sena.DOS_REYES)))
    assert [(s.value, r) for s, r in record.rejected_senas] == [("cuatro_ases", "cuatro_ases is false for this hand")]
    [rejected] = kinds(match.events, EventKind.SENA_REJECTED)
    assert rejected.to == frozenset({0})
    [delivered] = kinds(match.events, EventKind.SENA_DELIVERED)
    assert fields(delivered)["sena"] == "dos_reyes"
    assert match.faults == [0, 0] and not kinds(match.events, EventKind.FAULT)
    with pytest.raises(RulesError, match="sena_violation_policy=reject_and_penalise is unsupported in v1"):
        Rules.from_options({"sena_violation_policy": "reject_and_penalise"})


def test_a_false_sena_in_a_sena_round_is_rejected_not_an_illegal_action_12_3() -> None:
    """§12.3 item 4 and §13: a false seña is rejected on its own and is no fault, so it is not an illegal action:
    `check`/`is_legal` must agree with `apply`, which accepts the list (as it does for señas on a mus call)."""
    match = scripted_match(S01_HANDS)
    false_list = Action.send_senas((Sena.CUATRO_ASES,))
    assert match.is_legal(0, false_list)
    match.check(0, false_list)
    mus_call = scripted_match(S01_HANDS, mus=True)
    assert mus_call.is_legal(0, Action.mus((Sena.CUATRO_ASES,)))


def test_senas_on_a_mus_call_are_delivered_before_the_call_is_applied_12_3() -> None:
    match = scripted_match(S01_HANDS, {"sena_leak_probability": 0.0}, mus=True)
    record = match.apply(0, Action.mus((Sena.DOS_REYES, Sena.MEDIAS)))
    assert [e.kind for e in record.events] == [
        EventKind.SENA_REJECTED,  # medias: not before the grande lance is over (and false here)
        EventKind.SENA_DELIVERED,
        EventKind.MUS_CALLED,
    ]
    assert fields(record.events[0])["senas"][0]["sena"] == "medias" and fields(record.events[1])["sena"] == "dos_reyes"


def test_a_sena_round_timeout_sends_nothing_and_is_no_fault_12_3() -> None:
    match = scripted_match(S01_HANDS)
    record = match.apply_timeout(0)
    assert not kinds(record.events, EventKind.FAULT) and match.faults == [0, 0]
    assert match.decision is DecisionKind.SENAS and match.awaited() == (1,)


# ---------------------------------------------------------------- clocks and faults (§13)


def test_decision_timeout_s_and_time_bank_s_are_validated_but_the_engine_reads_no_clock_13() -> None:
    with pytest.raises(RulesError, match="decision_timeout_s must be above 0"):
        Rules.from_options({"decision_timeout_s": 0})
    with pytest.raises(RulesError, match="time_bank_s must be at least 0"):
        Rules.from_options({"time_bank_s": -0.5})
    quick = Rules.from_options({"decision_timeout_s": 0.001, "time_bank_s": 0})
    assert (quick.decision_timeout_s, quick.time_bank_s) == (0.001, 0.0)
    for seed in (1, 2):
        assert render_transcript(play_random_match(quick, seed).events) == render_transcript(
            play_random_match(Rules(), seed).events
        )


def test_illegal_action_policy_retry_counts_a_fault_and_keeps_the_seat_awaited_13() -> None:
    match = betting_match()
    record = match.record_illegal_action(0, "quiero with no bet pending")
    [fault] = kinds(record.events, EventKind.FAULT)
    assert (
        fields(fault)["seat"],
        fields(fault)["cause"],
        fields(fault)["faults"],
        fault.public,
    ) == (
        0,
        "illegal_action",
        1,
        True,
    )
    assert match.awaited() == (0,) and match.faults == [1, 0]
    assert not kinds(record.events, EventKind.BET)


def test_illegal_action_policy_default_action_applies_paso_or_no_quiero_at_once_13() -> None:
    match = betting_match({"illegal_action_policy": "default_action"})
    record = match.record_illegal_action(0, "garbage")
    [bet] = kinds(record.events, EventKind.BET)
    assert (fields(bet)["seat"], fields(bet)["action"]) == (0, "paso")
    assert match.awaited() == (1,)
    act(match, "S1 envido 2")
    record = match.record_illegal_action(2, "garbage")
    [bet] = kinds(record.events, EventKind.BET)
    assert (fields(bet)["seat"], fields(bet)["action"]) == (2, "no_quiero")
    assert match.awaited() == (0,) and match.faults == [2, 0]


def test_a_fault_from_a_seat_not_asked_counts_for_its_team_and_changes_nothing_else_13() -> None:
    match = betting_match({"illegal_action_policy": "default_action"})
    match.record_illegal_action(3, "out of turn")
    assert match.faults == [0, 1] and match.awaited() == (0,)
    assert not kinds(match.events, EventKind.BET)


def test_max_faults_before_forfeit_ends_the_match_for_nobody_and_shows_no_hands_13() -> None:
    """Game 1 is won by A on a negada (S08); in game 2 team A makes 3 faults and forfeits the match."""
    match = scripted_match(S01_HANDS, {"senas_mode": "off"}, start=(39, 20))
    act(match, "S0 envido 2", "S1 no_quiero", "S3 no_quiero")
    assert match.game_results[0].winner == A and not match.is_over
    hand_start = len(match.events)
    assert match.awaited() == (1,), "hand 1: seat 1 is the mano and is asked for mus"
    match.record_illegal_action(0, "one, from a seat not asked")
    match.record_illegal_action(2, "two")
    match.record_illegal_action(1, "a B fault does not count for A")
    assert not match.is_over and match.faults == [2, 1]
    match.record_illegal_action(0, "three")
    assert match.outcome is not None
    assert (match.outcome.winner, match.outcome.termination, match.outcome.faults) == (
        B,
        MatchTermination.FORFEIT,
        (3, 1),
    )
    first, second = match.outcome.games
    assert (first.winner, first.termination) == (A, GameTermination.TARGET_AT_DEJE)
    assert (second.winner, second.termination, second.score) == (None, GameTermination.FORFEIT, (0, 0))
    assert match.outcome.vacas == (0, 0), "the vaca cut short is won by nobody"
    [vaca] = match.outcome.vaca_results
    assert (vaca.winner, vaca.games) == (None, (1, 0))
    after = events_since(match, hand_start)
    assert not kinds(after, EventKind.HANDS_SHOWN), "a forfeit ends the match without a reveal"
    assert [fields(e)["team"] for e in kinds(after, EventKind.FORFEIT)] == [A]
    assert match.awaited() == ()
    with pytest.raises(MatchOverError):
        match.apply(1, Action.mus())


def test_max_faults_before_forfeit_1_forfeits_on_the_first_fault_13() -> None:
    match = betting_match({"max_faults_before_forfeit": 1})
    match.apply_timeout(0)
    assert match.outcome is not None
    assert (match.outcome.winner, match.outcome.termination) == (B, MatchTermination.FORFEIT)
    assert [fields(e)["cause"] for e in kinds(match.events, EventKind.FAULT)] == ["timeout"]
    assert not kinds(match.events, EventKind.BET), "the default action is not applied after the forfeit"


# ---------------------------------------------------------------- unsupported in v1 (§5.1, §8.5, §16)


def test_fem_minimum_hand_ordago_penalty_true_is_rejected_and_false_is_the_default_8_5() -> None:
    with pytest.raises(RulesError, match="fem_minimum_hand_ordago_penalty=true is unsupported in v1"):
        Rules.from_options({"fem_minimum_hand_ordago_penalty": True})
    assert Rules.from_options({"fem_minimum_hand_ordago_penalty": False}) == Rules()


def test_mus_decision_mode_sequential_the_first_no_mus_cuts_and_fem_out_of_turn_is_rejected_5_1() -> None:
    with pytest.raises(RulesError, match="mus_decision_mode=fem_out_of_turn is unsupported in v1"):
        Rules.from_options({"mus_decision_mode": "fem_out_of_turn"})
    match = scripted_match(S01_HANDS, {"senas_mode": "off", "mus_decision_mode": "sequential"}, mus=True)
    assert match.awaited() == (0,)
    match.apply(0, Action.mus())
    assert match.awaited() == (1,)
    match.apply(1, Action.no_mus())
    [cut] = kinds(match.events, EventKind.MUS_CUT)
    assert (fields(cut)["reason"], fields(cut)["seat"]) == ("no_mus", 1)
    assert match.decision is DecisionKind.BET and match.awaited() == (0,), "the mano speaks first in Grande"
    assert [fields(e)["seat"] for e in kinds(match.events, EventKind.MUS_CALLED)] == [0, 1]


def test_first_hand_mus_corrido_true_is_rejected_and_false_deals_a_normal_first_hand_5_1() -> None:
    with pytest.raises(RulesError, match="first_hand_mus_corrido=true is unsupported in v1"):
        Rules.from_options({"first_hand_mus_corrido": True})
    match = Match(Rules.from_options({"first_hand_mus_corrido": False}), seed=3)
    assert match.decision is DecisionKind.MUS and match.awaited() == (match.mano,)
