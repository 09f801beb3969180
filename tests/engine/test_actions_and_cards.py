"""Notation and errors: cards and actions round-trip, the integer encoding round-trips, and every error says why.

rules §1 (card notation), §8.1 (betting actions), §13 (the sender of an illegal action is told why, with the
legal actions when it was asked), §14 (rules options are validated).
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from referee.engine.actions import Action, ActionEncoding, ActionKind
from referee.engine.cards import FULL_DECK, RANKS, SUITS, Card, Suit, format_cards, parse_cards, sort_hand
from referee.engine.chance import Setup, deck_from_hands
from referee.engine.errors import IllegalActionError, MalformedError, MatchOverError, MusError, RulesError
from referee.engine.match import DecisionKind, Match
from referee.engine.replay import match_record, replay_record
from referee.engine.rules import Rules, parse_option_assignment, rules_from_assignments
from referee.engine.selfplay import play_random_match, random_action
from referee.engine.senas import Sena

# ---------------------------------------------------------------- cards (§1)


def test_every_card_notation_round_trips_1() -> None:
    texts = [str(card) for card in FULL_DECK]
    assert len(set(texts)) == 40
    assert {text[:-1] for text in texts} == {str(rank) for rank in RANKS}
    assert {text[-1] for text in texts} == {"o", "c", "e", "b"}
    for card in FULL_DECK:
        assert Card.parse(str(card)) == card
    assert parse_cards(format_cards(FULL_DECK)) == FULL_DECK
    assert parse_cards(texts) == FULL_DECK, "a list of card strings parses too"
    assert sorted(card.index for card in FULL_DECK) == list(range(40))


def test_sort_hand_is_canonical_and_format_cards_reads_back() -> None:
    hand = parse_cards("1o 12b 3c 12o")
    assert format_cards(sort_hand(hand)) == "12o 12b 3c 1o"
    assert sort_hand(sort_hand(hand)) == sort_hand(hand)
    assert parse_cards(format_cards(hand)) == hand


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("13o", "rank 13 is not in the Spanish 40-card deck"),
        ("8c", "rank 8 is not in the Spanish 40-card deck"),
        ("9e", "rank 9 is not in the Spanish 40-card deck"),
        ("0b", "rank 0 is not in the Spanish 40-card deck"),
        ("12x", "write <rank><suit>"),
        ("12O", "write <rank><suit>"),
        ("12", "write <rank><suit>"),
        ("o", "write <rank><suit>"),
        ("-1o", "write <rank><suit>"),
        ("1 2o", "write <rank><suit>"),
        ("12o 12o", "the same card appears twice"),
        ("12o 1c 12o", "the same card appears twice"),
    ],
)
def test_parse_cards_rejects_bad_notation_with_a_malformed_error_1(text: str, message: str) -> None:
    with pytest.raises(MalformedError, match=message):
        parse_cards(text.split(" ") if text == "1 2o" else text)


@pytest.mark.parametrize("text", ["²o", "1²c", "³e"])
def test_parse_cards_rejects_non_ascii_digits_with_a_malformed_error_1(text: str) -> None:
    """'²'.isdigit() is true but int('²') fails: the engine must still answer with its own MalformedError."""
    with pytest.raises(MalformedError):
        Card.parse(text)


def test_a_card_of_no_rank_cannot_be_built() -> None:
    with pytest.raises(MalformedError, match="no card has rank 8"):
        Card(8, Suit.OROS)
    assert len(SUITS) == 4


def test_the_error_types_keep_malformed_input_apart_from_illegal_actions() -> None:
    for error in (MalformedError, IllegalActionError, RulesError):
        assert issubclass(error, MusError) and issubclass(error, ValueError)
    assert not issubclass(MalformedError, IllegalActionError)
    assert not issubclass(IllegalActionError, MalformedError)
    assert not issubclass(RulesError, MalformedError | IllegalActionError)
    assert issubclass(MatchOverError, IllegalActionError)


# ---------------------------------------------------------------- action notation (§8.1)

ACTION_TEXTS = {
    ActionKind.PASO: ["paso"],
    ActionKind.ENVIDO: ["envido 2", "envido 1", "envido 40", "envido 1000"],
    ActionKind.MAS: ["mas 2", "mas 5", "mas 38"],
    ActionKind.QUIERO: ["quiero"],
    ActionKind.NO_QUIERO: ["no_quiero"],
    ActionKind.ORDAGO: ["ordago"],
    ActionKind.MUS: ["mus", "mus dos_reyes", "mus cortar_mus envidar_mas"],
    ActionKind.NO_MUS: ["no_mus", "no_mus treinta_y_una"],
    ActionKind.DISCARD: ["discard 12o", "discard 12o 3c", "discard 7o 5c 2e 1b"],
    ActionKind.DECLARE: ["declare yes", "declare no"],
    ActionKind.SENAS: ["senas", "senas duples", "senas dos_ases pares la_bonita"],
}


def test_the_notation_table_covers_every_action_kind() -> None:
    assert set(ACTION_TEXTS) == set(ActionKind)


@pytest.mark.parametrize("text", [text for texts in ACTION_TEXTS.values() for text in texts])
def test_action_notation_round_trips_8_1(text: str) -> None:
    action = Action.parse(text)
    assert str(action) == text
    assert Action.parse(str(action)) == action


def test_action_constructors_print_the_notation_they_parse_from() -> None:
    built = [
        Action.paso(),
        Action.envido(3),
        Action.mas(2),
        Action.quiero(),
        Action.no_quiero(),
        Action.ordago(),
        Action.mus(),
        Action.mus((Sena.PARES,)),
        Action.no_mus(),
        Action.discard(parse_cards("1o 12c")),
        Action.declare(True),
        Action.declare(False),
        Action.send_senas(()),
        Action.send_senas((Sena.CIEGO, Sena.ENVIDAR_MAS)),
    ]
    assert {action.kind for action in built} == set(ActionKind)
    for action in built:
        assert Action.parse(str(action)) == action
    assert str(Action.discard(parse_cards("1o 12c"))) == "discard 12c 1o", "a discard is kept in canonical order"


def test_every_action_of_seeded_self_play_round_trips_through_its_notation() -> None:
    seen: set[ActionKind] = set()
    for seed in range(30):
        match = play_random_match(Rules.from_options({"declarations": "bot_declares"}), seed)
        for step in match.log:
            assert step.action is not None
            assert Action.parse(str(step.action)) == step.action
            seen.add(step.action.kind)
    assert seen == set(ActionKind)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty action"),
        ("   ", "empty action"),
        ("bet 2", "unknown action 'bet'; actions are mus, no_mus, discard"),
        ("Paso", "unknown action 'Paso'"),
        ("envido", "envido takes one positive amount"),
        ("envido two", "envido takes one positive amount"),
        ("envido 0", "envido takes one positive amount"),
        ("envido -2", "envido takes one positive amount"),
        ("envido 2 3", "envido takes one positive amount"),
        ("mas", "mas takes one positive amount"),
        ("paso now", "paso takes no arguments"),
        ("ordago 40", "ordago takes no arguments"),
        ("declare maybe", "declare takes yes or no"),
        ("declare", "declare takes yes or no"),
        ("mus bogus", "unknown seña 'bogus'"),
        ("senas reyes", "unknown seña 'reyes'"),
        ("discard 13o", "unknown card '13o'"),
        ("discard 12o 12o", "the same card appears twice"),
        ("envido ²", "envido takes one positive amount"),
    ],
)
def test_action_parse_rejects_bad_notation_with_a_malformed_error_8_1(text: str, message: str) -> None:
    with pytest.raises(MalformedError, match=message):
        Action.parse(text)


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (Action(ActionKind.ENVIDO, amount=0), "envido needs an amount of at least 1; got 0"),
        (Action(ActionKind.MAS, amount=-2), "mas needs an amount of at least 1; got -2"),
        (Action(ActionKind.PASO, amount=5), "paso takes no amount; got 5"),
        (Action(ActionKind.ENVIDO, amount=True), "the amount of envido must be an int; got True"),
        (Action(ActionKind.QUIERO, cards=parse_cards("12o")), "quiero takes no cards; got 12o"),
        (Action(ActionKind.DISCARD), "a discard is 1 to 4 different cards; got none"),
        (Action(ActionKind.DISCARD, cards=(Card(12, Suit.OROS),) * 2), "a discard is 1 to 4 different cards"),
        (Action(ActionKind.DISCARD, cards=parse_cards("1o 2o 3o 4o 5o")), "a discard is 1 to 4 different cards"),
        (Action(ActionKind.MUS, has_jugada=True), "mus takes no declaration"),
        (Action("paso"), "action kind 'paso' is not an ActionKind"),  # type: ignore[arg-type]
        (Action(ActionKind.SENAS, senas=("duples",)), "señas must be a tuple of Sena values"),  # type: ignore[arg-type]
    ],
)
def test_check_says_malformed_for_a_value_that_is_no_mus_action_in_any_state(action: Action, message: str) -> None:
    """Two errors apart: a malformed action (`MalformedError`) whatever the state, and a well-formed one that is
    not legal now (`IllegalActionError`, naming what is)."""
    match = Match(Rules(), seed=3)
    seat = match.awaited()[0]
    with pytest.raises(MalformedError, match=re.escape(message)):
        match.check(seat, action)
    assert not match.is_legal(seat, action)
    with pytest.raises(MalformedError):
        match.apply(seat, action)
    assert match.log == [] and match.awaited() == (seat,), "nothing was applied"
    with pytest.raises(IllegalActionError, match="legal: mus, no_mus"):
        match.check(seat, Action.paso())


# ---------------------------------------------------------------- the integer encoding


@pytest.mark.parametrize(
    "options",
    [{}, {"target_score": 30}, {"max_total_stake": 10}, {"max_total_stake": None}, {"sena_la_bonita": True}],
)
def test_action_encoding_decodes_every_code_and_encodes_it_back(options: dict[str, Any]) -> None:
    rules = Rules.from_options(options)
    encoding = ActionEncoding(rules)
    cap = rules.stake_cap if rules.stake_cap is not None else rules.target_score
    assert encoding.max_amount == cap
    assert encoding.size == 6 + 2 + 2 * cap + 15 + 1 + len(Sena)
    hand = parse_cards("12o 7c 3e 1b")
    decoded = [encoding.decode(code, hand) for code in range(encoding.size)]
    assert len(set(decoded)) == encoding.size, "every code means a different action"
    for code, action in enumerate(decoded):
        assert encoding.encode(action, hand) == code
    assert {action.kind for action in decoded} == set(ActionKind)
    discards = [action for action in decoded if action.kind is ActionKind.DISCARD]
    assert len(discards) == 15 and {len(action.cards) for action in discards} == {1, 2, 3, 4}


def test_action_encoding_round_trips_every_legal_action_of_seeded_self_play() -> None:
    rules = Rules.from_options({"declarations": "bot_declares"})
    encoding = ActionEncoding(rules)
    checked = 0
    for seed in range(20):
        match = Match(rules, seed)
        rng = random.Random(seed)
        while not match.is_over:
            seat = match.awaited()[0]
            hand = match.hands[seat]
            for action in match.legal_actions(seat):
                if action.kind is ActionKind.SENAS and len(action.senas) > 1:
                    continue
                assert encoding.decode(encoding.encode(action, hand), hand) == action
                checked += 1
            match.apply(seat, random_action(rng, match.legal_actions(seat)))
    assert checked > 1000


@pytest.mark.parametrize("code", [-1, 10_000])
def test_action_encoding_rejects_a_code_out_of_range(code: int) -> None:
    with pytest.raises(MalformedError, match=r"outside 0\.\."):
        ActionEncoding(Rules()).decode(code)


def test_action_encoding_rejects_what_it_cannot_encode() -> None:
    encoding = ActionEncoding(Rules())
    hand = parse_cards("12o 7c 3e 1b")
    for action in (
        Action.mus((Sena.PARES,)),  # mus calls are encoded without señas
        Action.envido(41),  # above the cap
        Action.discard(parse_cards("5o")),  # not in the hand
        Action.send_senas((Sena.PARES, Sena.DUPLES)),  # one seña at most
    ):
        with pytest.raises(MalformedError, match="has no integer encoding"):
            encoding.encode(action, hand)
    first_discard = encoding.encode(Action.discard(hand[:1]), hand)
    with pytest.raises(MalformedError, match="needs the seat's four cards"):
        encoding.decode(first_discard)


# ---------------------------------------------------------------- illegal actions say what is legal (§13)

HANDS = ["12o 7o 5o 4o", "11o 10o 6o 1o", "1c 5c 6c 7c", "2o 4c 10c 11c"]


def grande(options: dict[str, Any] | None = None) -> Match:
    """Hand 0 at Grande, seat 0 the mano, no seña rounds."""
    deck = deck_from_hands([parse_cards(hand) for hand in HANDS], mano=0)
    setup = Setup(first_dealer=3, decks={0: deck}, skip_mus_first_hand=True)
    match = Match(Rules.from_options({"senas_mode": "off", **(options or {})}), seed=0, setup=setup)
    assert match.decision is DecisionKind.BET and match.awaited() == (0,)
    return match


def rejected(match: Match, seat: int, action: Action) -> str:
    """The message of the IllegalActionError, after checking that nothing at all was applied."""
    events, log, awaited = len(match.events), len(match.log), match.awaited()
    with pytest.raises(IllegalActionError) as error:
        match.apply(seat, action)
    assert (len(match.events), len(match.log), match.awaited()) == (events, log, awaited)
    assert not match.is_legal(seat, action)
    return str(error.value)


OPEN_LEGAL = "legal: paso, ordago, envido 2..40"
PENDING_LEGAL = "legal: quiero, no_quiero, ordago, mas 2..38"


ENVIDO_2 = [(0, Action.envido(2))]
ORDAGO = [(0, Action.ordago())]


@pytest.mark.parametrize(
    ("setup_lines", "seat", "action", "why", "legal"),
    [
        ([], 0, Action.quiero(), "quiero is not legal for seat 0 now (bet decision)", OPEN_LEGAL),
        ([], 0, Action.no_mus(), "no_mus is not legal for seat 0 now (bet decision)", OPEN_LEGAL),
        ([], 0, Action.mas(2), "mas 2: no bet is pending to raise", OPEN_LEGAL),
        ([], 0, Action.envido(1), "envido 1 is below min_bet 2", OPEN_LEGAL),
        ([], 0, Action.envido(41), "envido 41 is above the stake cap 40", OPEN_LEGAL),
        (ENVIDO_2, 1, Action.paso(), "paso is not legal for seat 1 now (bet decision)", PENDING_LEGAL),
        (ENVIDO_2, 1, Action.envido(4), "envido opens a lance", PENDING_LEGAL),
        (ENVIDO_2, 1, Action.mas(1), "mas 1 is below min_raise 2", PENDING_LEGAL),
        (ENVIDO_2, 1, Action.mas(39), "mas 39 takes the stake to 41, above the cap 40", PENDING_LEGAL),
        (ORDAGO, 1, Action.mas(2), "mas 2: an órdago cannot be raised", "legal: quiero, no_quiero"),
        (ORDAGO, 1, Action.ordago(), "ordago is not legal for seat 1 now (bet decision)", "legal: quiero, no_quiero"),
    ],
)
def test_an_illegal_bet_names_why_and_what_is_legal_13(
    setup_lines: list[tuple[int, Action]], seat: int, action: Action, why: str, legal: str
) -> None:
    """§13: the sender is told why, with the legal actions when it was asked (errors.IllegalActionError says so)."""
    match = grande()
    for who, what in setup_lines:
        match.apply(who, what)
    message = rejected(match, seat, action)
    assert why in message
    assert message.endswith(legal), message


def test_an_illegal_mus_call_discard_or_declaration_names_the_legal_set_13() -> None:
    deck = deck_from_hands([parse_cards(hand) for hand in HANDS], mano=0)
    match = Match(
        Rules.from_options({"senas_mode": "off", "declarations": "bot_declares", "discard_max": 1}),
        seed=0,
        setup=Setup(first_dealer=3, decks={0: deck}),
    )
    assert rejected(match, 0, Action.paso()) == "paso is not legal for seat 0 now (mus decision); legal: mus, no_mus"
    for seat in range(4):
        match.apply(seat, Action.mus())
    message = rejected(match, 0, Action.discard(match.hands[0][:2]))
    assert message.startswith("discard 12o 7o is not legal for seat 0 now (discard decision); legal: discard 12o,")
    assert message.count("discard") == 1 + 1 + 4
    for seat in range(4):
        match.apply(seat, Action.discard(match.hands[seat][:1]))
    match.apply(0, Action.no_mus())
    for seat in [0, 1, 2, 3] * 2:  # Grande and Chica passed
        match.apply(seat, Action.paso())
    assert match.decision is DecisionKind.DECLARE
    truth = match.legal_actions(0)[0]
    lie = Action.declare(not truth.has_jugada)
    assert rejected(match, 0, lie) == f"{lie} is not legal for seat 0 now (declare decision); legal: {truth}"


def test_an_out_of_turn_action_names_the_awaited_seat_13() -> None:
    match = grande()
    assert rejected(match, 2, Action.paso()) == "seat 2 is not asked to act now: the match waits for seat 0"
    match.apply(0, Action.envido(2))
    assert rejected(match, 3, Action.quiero()) == "seat 3 is not asked to act now: the match waits for seat 1"
    with pytest.raises(IllegalActionError, match=r"there is no seat 4: seats are 0\.\.3"):
        match.apply(4, Action.quiero())
    with pytest.raises(IllegalActionError, match="seat 0 is not asked to act now, so it cannot time out"):
        match.apply_timeout(0)


def test_an_out_of_turn_discard_names_every_seat_still_awaited_13() -> None:
    match = Match(Rules.from_options({"senas_mode": "off"}), seed=5)
    for seat in match.speaking_order():
        match.apply(seat, Action.mus())
    first, *others = match.speaking_order()
    match.apply(first, Action.discard(match.hands[first][:1]))
    waits = ", ".join(map(str, others))
    message = rejected(match, first, Action.discard(match.hands[first][:1]))
    assert message == f"seat {first} is not asked to act now: the match waits for seat {waits}"


def test_nothing_can_be_applied_once_the_match_is_over() -> None:
    match = play_random_match(Rules(), 1)
    assert match.is_over and match.awaited() == () and match.legal_actions(0) == ()
    with pytest.raises(MatchOverError, match="the match is over"):
        match.apply(0, Action.paso())
    with pytest.raises(MatchOverError):
        match.apply_timeout(0)
    with pytest.raises(MatchOverError):
        match.record_illegal_action(0, "late")


# ---------------------------------------------------------------- rules validation messages (§14)


def test_rules_errors_name_the_option_the_value_and_what_is_allowed_14() -> None:
    with pytest.raises(RulesError) as unknown:
        Rules.from_options({"reveal_hands_at_end": True})
    assert str(unknown.value).startswith("unknown rules option 'reveal_hands_at_end'; known options: deck_mode,")
    assert all(key in str(unknown.value) for key in Rules().to_options())
    with pytest.raises(RulesError, match=r'^rules option deck_mode must be one of 8_reyes, 4_reyes; got "4"$'):
        Rules.from_options({"deck_mode": "4"})
    with pytest.raises(RulesError, match=r"^rules option target_score must be at least 1, got -3$"):
        Rules.from_options({"target_score": -3})
    with pytest.raises(RulesError, match=r"^rules option min_bet must be an integer; got 2.5$"):
        Rules.from_options({"min_bet": 2.5})
    with pytest.raises(RulesError, match=r"^rules option mus_decision_mode=fem_out_of_turn is unsupported in v1"):
        Rules.from_options({"mus_decision_mode": "fem_out_of_turn"})


def test_rules_from_command_line_assignments_read_json_values_14() -> None:
    rules = rules_from_assignments(["target_score=30", "deck_mode=4_reyes", "max_total_stake=null"])
    assert (rules.target_score, rules.deck_mode.value, rules.max_total_stake) == (30, "4_reyes", None)
    assert parse_option_assignment(" real_31 = 7-7-7-sota ") == ("real_31", "7-7-7-sota")
    assert parse_option_assignment("sena_leak_probability=0.5") == ("sena_leak_probability", 0.5)
    for text in ("target_score", "=30", ""):
        with pytest.raises(RulesError, match="must be written key=value"):
            parse_option_assignment(text)
    with pytest.raises(RulesError, match="punto_bonus must be true or false"):
        rules_from_assignments(["punto_bonus=yes"])


def test_with_options_validates_the_changed_rules_14() -> None:
    rules = Rules().with_options({"target_score": 30})
    assert rules.stake_cap == 30 and rules.changed_options() == {"target_score": 30}
    with pytest.raises(RulesError, match="discard_min \\(4\\) must not exceed discard_max \\(3\\)"):
        Rules().with_options({"discard_min": 4, "discard_max": 3})


# ---------------------------------------------------------------- any action value at any moment

ANY_ACTION = st.builds(
    Action,
    kind=st.sampled_from(ActionKind),
    amount=st.integers(-2, 45),
    cards=st.lists(st.sampled_from(FULL_DECK), max_size=5).map(tuple),
    has_jugada=st.booleans(),
    senas=st.lists(st.sampled_from(Sena), max_size=3).map(tuple),
)


# Changes to a legal action: stray señas, an amount, cards or a declaration where they may not belong.
CHANGES: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {},
    optional={
        "senas": st.lists(st.sampled_from(Sena), min_size=1, max_size=3).map(tuple),
        "amount": st.integers(-1, 3),
        "cards": st.lists(st.sampled_from(FULL_DECK), max_size=2).map(tuple),
        "has_jugada": st.booleans(),
    },
)


@settings(deadline=None, max_examples=60)
@given(
    options=st.sampled_from([{}, {"declarations": "bot_declares"}, {"discard_submission": "sequential"}]),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_any_action_value_is_applied_only_when_check_passes_and_a_refused_one_changes_nothing(
    options: dict[str, Any], seed: int, data: st.DataObject
) -> None:
    """Between random legal steps, any seat sends any `Action` value: `check` and `apply` agree, a refusal is one
    of the two engine errors and leaves the match as it was, and the log still replays the same match."""
    match = Match(Rules.from_options(options), seed)
    rng = random.Random(seed)
    for _ in range(80):
        if match.is_over:
            break
        if data.draw(st.booleans(), label="near a legal action"):
            seat = match.awaited()[0]
            legal = data.draw(st.sampled_from(match.legal_actions(seat)), label="legal")
            action = dataclasses.replace(legal, **data.draw(CHANGES, label="changes"))
        else:
            seat = data.draw(st.integers(-1, 4), label="seat")
            action = data.draw(ANY_ACTION, label="action")
        before = (len(match.events), len(match.log), match.awaited(), list(match.score), list(match.faults))
        try:
            match.check(seat, action)
        except (MalformedError, IllegalActionError) as error:
            with pytest.raises(type(error)):
                match.apply(seat, action)
            assert (len(match.events), len(match.log), match.awaited(), list(match.score), list(match.faults)) == before
        else:
            match.apply(seat, action)
        if not match.is_over:
            awaited = match.awaited()[0]
            match.apply(awaited, random_action(rng, match.legal_actions(awaited)))
    assert replay_record(json.loads(json.dumps(match_record(match)))).events == match.events
