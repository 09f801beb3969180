"""The rulebook's worked examples and edge cases (rules §5.2, §7, §8.2, §8.3, §8.4, §13), each played on a
scripted hand with the numbers the rulebook gives.

Seat 0 is the mano of hand 0 (team A = seats 0 and 2, team B = seats 1 and 3), as in test_options.py, whose
helpers drive the hands here.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from referee.engine.actions import Action
from referee.engine.cards import FULL_DECK, Card, format_cards, parse_cards
from referee.engine.events import Event, EventKind
from referee.engine.match import DecisionKind, Match
from referee.engine.outcome import GameTermination
from tests.engine.test_options import (
    ALL_PASS,
    HANDS_FOR_THE_MUS,
    S02_HANDS,
    S12_HANDS,
    act,
    decision,
    deck_for,
    events_since,
    kinds,
    scored,
    scripted_match,
)
from tests.support.events import fields

A, B = 0, 1


def census_is_the_deck(match: Match) -> bool:
    """All 40 cards are somewhere, each exactly once (§5.2: 16 in the hands + stock + discard pile = 40)."""
    return sorted(map(str, match.card_census())) == sorted(map(str, FULL_DECK))


def cards_in(events: Sequence[Event], kind: EventKind) -> dict[int, list[Card]]:
    """The cards of every CARDS_DISCARDED / CARDS_REPLACED event, by seat."""
    return {fields(e)["seat"]: list(parse_cards(fields(e)["cards"])) for e in kinds(events, kind)}


# ---------------------------------------------------------------- §8.3 worked examples (negada / deje)

# S02's hands: Grande is played by all four, so both teams take part in every sequence. A = S0 and S2.
DEJE_TABLE = [
    pytest.param(["S0 envido 2", "S1 no_quiero", "S3 no_quiero"], A, 1, id="1-envido-2-refused"),
    pytest.param(["S0 envido 10", "S1 no_quiero", "S3 no_quiero"], A, 1, id="2-envido-10-refused"),
    pytest.param(["S0 envido 2", "S1 mas 4", "S2 no_quiero", "S0 no_quiero"], B, 2, id="3-raise-to-6-refused"),
    pytest.param(
        ["S0 envido 2", "S1 mas 4", "S2 mas 8", "S3 no_quiero", "S1 no_quiero"], A, 6, id="4-raise-to-14-refused"
    ),
    pytest.param(
        ["S0 envido 2", "S1 mas 3", "S2 mas 2", "S3 no_quiero", "S1 no_quiero"], A, 5, id="5-raise-to-7-refused"
    ),
    pytest.param(
        ["S0 envido 2", "S1 mas 2", "S2 mas 3", "S3 mas 5", "S0 no_quiero", "S2 no_quiero"],
        B,
        7,
        id="6-raise-to-12-refused",
    ),
    pytest.param(["S0 envido 2", "S1 ordago", "S2 no_quiero", "S0 no_quiero"], B, 2, id="7-ordago-raise-refused"),
    pytest.param(["S0 ordago", "S1 no_quiero", "S3 no_quiero"], A, 1, id="8-opening-ordago-refused"),
    pytest.param(
        ["S0 envido 2", "S1 mas 2", "S2 mas 2", "S3 no_quiero", "S1 no_quiero"], A, 4, id="9-raise-to-6-refused"
    ),
]


@pytest.mark.parametrize(("sequence", "team", "points"), DEJE_TABLE)
def test_the_worked_examples_table_of_a_refused_bet_8_3(sequence: list[str], team: int, points: int) -> None:
    """ "the team that won by the refusal ... scores, at once, the amount that had already been accepted before the
    last raise, or 1 if nothing had been accepted" (previous_stake, the default)."""
    match = scripted_match(S02_HANDS)
    act(match, *sequence)
    assert scored(match) == [(team, points, "grande", "deje")]
    expected = [0, 0]
    expected[team] = points
    assert match.score == expected, "scored at once, before the tanteo"
    [closed] = kinds(match.events, EventKind.LANCE_CLOSED)
    assert (
        fields(closed)["lance"],
        fields(closed)["outcome"],
        fields(closed)["winner_team"],
    ) == ("grande", "rejected", team)
    assert match.lance is not None and match.lance.value == "chica", "the hand goes on"


@pytest.mark.parametrize(("deje_mode", "points"), [("previous_stake", 4), ("fem_plus_one", 5), ("always_one", 1)])
def test_s12_a_refused_raise_in_pares_pays_4_5_or_1_by_deje_mode_8_3(deje_mode: str, points: int) -> None:
    """ "pares, A envido 4 – B +3 (7) – A no quiero → B scores 4 (default), 5 (fem_plus_one) or 1 (always_one)"."""
    match = scripted_match(S12_HANDS, {"deje_mode": deje_mode})
    act(match, *ALL_PASS, *ALL_PASS)
    assert match.lance is not None and match.lance.value == "pares"
    pares_holders = [fields(e)["seat"] for e in kinds(match.events, EventKind.DECLARED) if fields(e)["has"]]
    assert pares_holders == [0, 1, 2], "holders on both teams: the lance has betting"
    act(match, "S0 envido 4", "S1 mas 3", "S2 no_quiero", "S0 no_quiero")
    assert scored(match) == [(B, points, "pares", "deje")]
    assert match.score == [0, points]


# ---------------------------------------------------------------- §5.2 reshuffle under sequential discards


def discard_step(match: Match, count: int) -> tuple[int, list[Card], list[Event]]:
    """The awaited seat (sequential) throws the first `count` cards of its hand: (seat, thrown, events)."""
    [seat] = match.awaited()
    thrown = list(match.hands[seat][:count])
    record = match.apply(seat, Action.discard(thrown))
    return seat, thrown, list(record.events)


def call_mus(match: Match) -> None:
    for seat in match.speaking_order():
        match.apply(seat, Action.mus())
    assert decision(match) is DecisionKind.DISCARD


@pytest.mark.parametrize(
    ("pool", "new_stock", "end_stock"), [("exclude_pending_own", 23, 18), ("all_discards", 25, 20)]
)
def test_sequential_discards_reshuffle_the_worked_example_5_2(pool: str, new_stock: int, end_stock: int) -> None:
    """The §5.2 worked example (round 1 all discard 4; round 2 the discards are 3, 4, 2 and 4) played under
    `sequential`: "each player submits and receives his replacements before the next player submits".

    Seat 2 is due a card when the stock is empty: seats 2 and 3 are waiting. exclude_pending_own: "the new stock is
    every discarded card except the waiting players' discards of this round" = 16 + 3 + 4 = 23 (seat 3 has not
    discarded yet); seat 2 takes 1 more and seat 3 takes 4: 18. all_discards: "every discarded card goes into the
    new stock" = 16 + 3 + 4 + 2 = 25, ending at 20. "The set-aside cards join the discard pile when all
    replacements of the round are dealt (in `sequential`, so do the discards made after the reshuffle)."
    """
    deck = deck_for(HANDS_FOR_THE_MUS)
    options = {"senas_mode": "off", "discard_submission": "sequential", "reshuffle_pool": pool, "max_mus_rounds": 3}
    match = scripted_match(HANDS_FOR_THE_MUS, options, mus=True)
    call_mus(match)
    for expected_stock in (20, 16, 12, 8):
        discard_step(match, 4)
        assert len(match.stock) == expected_stock
    assert sorted(map(str, match.discard_pile)) == sorted(map(str, deck[:16])), "round 1 threw the 16 dealt cards"
    round1 = set(deck[:16])

    call_mus(match)
    thrown: dict[int, list[Card]] = {}
    received: dict[int, list[Card]] = {}
    for expected_seat, count, stock_after in ((0, 3, 5), (1, 4, 1)):
        seat, thrown[seat], events = discard_step(match, count)
        assert seat == expected_seat and len(match.stock) == stock_after
        assert not kinds(events, EventKind.STOCK_RESHUFFLED)
        received[seat] = cards_in(events, EventKind.CARDS_REPLACED)[seat]
    assert set(received[0]) == set(deck[32:35]) and set(received[1]) == set(deck[35:39])

    seat, thrown[2], events = discard_step(match, 2)
    assert seat == 2
    [reshuffled] = kinds(events, EventKind.STOCK_RESHUFFLED)
    assert reshuffled.public and fields(reshuffled) == {}, "public, and the stock size is never sent (§4)"
    assert [e.kind for e in events if e.kind is not EventKind.CARDS_DISCARDED] == [
        EventKind.DISCARD_COUNTED,
        EventKind.STOCK_RESHUFFLED,
        EventKind.CARDS_REPLACED,
    ]
    received[2] = cards_in(events, EventKind.CARDS_REPLACED)[2]
    assert deck[39] in received[2], "the last card of the old stock"
    from_new_stock = set(received[2]) - {deck[39]}
    assert len(from_new_stock) == 1
    assert len(match.stock) + 1 == new_stock
    reshuffled_cards = set(match.stock) | from_new_stock
    expected_pool = round1 | set(thrown[0]) | set(thrown[1])
    if pool == "all_discards":
        expected_pool |= set(thrown[2])
    assert reshuffled_cards == expected_pool and len(expected_pool) == new_stock
    assert census_is_the_deck(match)

    seat, thrown[3], events = discard_step(match, 4)
    assert seat == 3
    assert not kinds(events, EventKind.STOCK_RESHUFFLED), "the new stock suffices"
    received[3] = cards_in(events, EventKind.CARDS_REPLACED)[3]
    assert set(received[3]) <= reshuffled_cards
    assert len(match.stock) == end_stock
    pile = thrown[3] if pool == "all_discards" else thrown[2] + thrown[3]
    assert sorted(map(str, match.discard_pile)) == sorted(map(str, pile)), "seat 3's discards join the pile"
    assert census_is_the_deck(match)
    assert len(match.hands[2]) == len(match.hands[3]) == 4
    if pool == "exclude_pending_own":
        for waiting in (2, 3):
            assert not set(received[waiting]) & set(thrown[waiting]), f"seat {waiting} got back its own discard"


# ---------------------------------------------------------------- §5.2 a stock already empty when a round begins


@pytest.mark.parametrize("submission", ["simultaneous", "sequential"])
def test_a_stock_empty_at_the_start_of_a_round_makes_all_four_seats_wait_5_2(submission: str) -> None:
    """ "when a card is due and the stock is empty, the player it is due to and every player after him in the
    dealing order are waiting": the mano is due the first card, so all four wait, and the new stock is the earlier
    discards only (24 cards); "nobody can get back a card he just threw away"."""
    options = {"senas_mode": "off", "discard_submission": submission, "max_mus_rounds": None}
    match = scripted_match(HANDS_FOR_THE_MUS, options, mus=True)
    for count in (4, 2):  # 24 -> 8 -> 0
        call_mus(match)
        while decision(match) is DecisionKind.DISCARD:
            seat = match.awaited()[0]
            match.apply(seat, Action.discard(match.hands[seat][:count]))
    assert match.stock == [] and len(match.discard_pile) == 24
    earlier_discards = set(match.discard_pile)

    call_mus(match)
    start = len(match.events)
    while decision(match) is DecisionKind.DISCARD:
        seat = match.awaited()[0]
        match.apply(seat, Action.discard(match.hands[seat]))
    round3 = events_since(match, start)
    flow = [
        e.kind
        for e in round3
        if e.kind in (EventKind.DISCARD_COUNTED, EventKind.STOCK_RESHUFFLED, EventKind.CARDS_REPLACED)
    ]
    if submission == "simultaneous":
        assert flow == [EventKind.DISCARD_COUNTED] * 4 + [EventKind.STOCK_RESHUFFLED] + [EventKind.CARDS_REPLACED] * 4
    else:
        assert flow == [
            EventKind.DISCARD_COUNTED,
            EventKind.STOCK_RESHUFFLED,
            EventKind.CARDS_REPLACED,
            *[EventKind.DISCARD_COUNTED, EventKind.CARDS_REPLACED] * 3,
        ]
    thrown = cards_in(round3, EventKind.CARDS_DISCARDED)
    received = cards_in(round3, EventKind.CARDS_REPLACED)
    assert all(len(received[seat]) == 4 for seat in range(4))
    for seat in range(4):
        assert not set(received[seat]) & set(thrown[seat]), f"seat {seat} got back its own discard"
    assert set(match.stock) | {card for cards in received.values() for card in cards} == earlier_discards
    assert len(match.stock) == 24 - 16
    all_thrown = [card for cards in thrown.values() for card in cards]
    assert sorted(map(str, match.discard_pile)) == sorted(map(str, all_thrown)), "the set-aside 16 form the pile"
    assert census_is_the_deck(match)


# ---------------------------------------------------------------- §8.2 both_answer_most_aggressive and a timeout


@pytest.mark.parametrize(
    ("answer", "check"),
    [
        ("S3 quiero", "accepted"),
        ("S3 mas 3", "raised"),
        ("S3 ordago", "ordago"),
        ("S3 no_quiero", "refused"),
        ("timeout", "refused"),
    ],
)
def test_both_answer_a_timeout_of_the_first_rival_is_a_no_quiero_the_partner_can_overrule_8_2(
    answer: str, check: str
) -> None:
    """ "the first rival in `queue` answers. Then his partner, if a participant, answers after seeing it ... The
    referee keeps the answer ranked highest"; a timeout applies `no_quiero` (§13) and counts one fault."""
    match = scripted_match(S02_HANDS, {"senas_mode": "off", "response_mode": "both_answer_most_aggressive"})
    act(match, "S0 envido 2")
    record = match.apply_timeout(1)
    [fault] = kinds(record.events, EventKind.FAULT)
    assert (fields(fault)["seat"], fields(fault)["cause"]) == (1, "timeout")
    [bet] = kinds(record.events, EventKind.BET)
    assert (fields(bet)["seat"], fields(bet)["action"]) == (1, "no_quiero")
    assert match.faults == [0, 1]
    assert match.awaited() == (3,), "the partner is still asked"
    assert not kinds(match.events, EventKind.POINTS_SCORED)

    if answer == "timeout":
        match.apply_timeout(3)
        assert match.faults == [0, 2]
    else:
        act(match, answer)
    grande = [e for e in kinds(match.events, EventKind.LANCE_CLOSED) if fields(e)["lance"] == "grande"]
    if check == "accepted":
        [closed] = grande
        assert (fields(closed)["outcome"], fields(closed)["stake"]) == ("accepted", 2)
        assert not kinds(match.events, EventKind.POINTS_SCORED)
    elif check == "raised":
        assert not grande and match.betting_totals() == (2, 5, False)
        assert match.awaited() == (0,), "S3 is the proposer; the queue is rivals_after(3) = [0, 2]"
    elif check == "ordago":
        assert not grande and match.betting_totals()[0::2] == (2, True)
        assert match.awaited() == (0,)
    else:
        [closed] = grande
        assert (fields(closed)["outcome"], fields(closed)["winner_team"]) == ("rejected", A)
        assert scored(match) == [(A, 1, "grande", "deje")]


# ---------------------------------------------------------------- §8.4 ordago_resolution = count_prior

# Juego case. Grande: S0 (R-R-C-S). Chica: S3 (A-4-6-7). Pares: S0 (kings) and S2 (5s) only, team A alone:
# no betting, A's values 1 + 1 = 2. Juego: S0 40 and S1 31, both teams, so S1's 31 wins an órdago for B.
JUEGO_HANDS = ["12o 12c 11o 10o", "11c 10c 7c 4c", "5o 5c 6o 1o", "7e 6e 4e 1c"]
# Punto case. Grande: S0 (R-R-5-A). Chica: S3 (A-4-5-6). Pares: S0 (kings) and S2 (6s) only, team A alone: 2.
# Nobody has juego (26, 28, 20, 16), so Punto is played; S1's 28 wins an órdago for B.
PUNTO_HANDS = ["12o 12c 5o 1o", "11c 10c 7c 2e", "6c 6o 7o 1c", "2c 4e 5e 6e"]


@pytest.mark.parametrize(
    ("hands", "grande", "lance", "start", "entries", "winner", "score", "termination"),
    [
        # A negada in Grande (A +1 at once); the tanteo entries Chica B +1 and Pares A +2 take A to 40 first.
        pytest.param(
            JUEGO_HANDS,
            ["S0 envido 2", "S1 no_quiero", "S3 no_quiero"],
            "juego",
            (37, 10),
            [(A, 1, "grande", "deje"), (B, 1, "chica", "tanteo"), (A, 2, "pares", "tanteo")],
            A,
            (40, 11),
            GameTermination.TARGET_AT_TANTEO,
            id="juego-prior-entries-reach-40",
        ),
        pytest.param(
            JUEGO_HANDS,
            ["S0 envido 2", "S1 no_quiero", "S3 no_quiero"],
            "juego",
            (30, 10),
            [(A, 1, "grande", "deje"), (B, 1, "chica", "tanteo"), (A, 2, "pares", "tanteo")],
            B,
            (33, 11),
            GameTermination.ORDAGO,
            id="juego-ordago-decides",
        ),
        # A refused raise in Grande (B +2 at once); Chica B +1, Pares A +2.
        pytest.param(
            PUNTO_HANDS,
            ["S0 envido 2", "S1 mas 2", "S2 no_quiero", "S0 no_quiero"],
            "punto",
            (38, 10),
            [(B, 2, "grande", "deje"), (B, 1, "chica", "tanteo"), (A, 2, "pares", "tanteo")],
            A,
            (40, 13),
            GameTermination.TARGET_AT_TANTEO,
            id="punto-prior-entries-reach-40",
        ),
        pytest.param(
            PUNTO_HANDS,
            ["S0 envido 2", "S1 mas 2", "S2 no_quiero", "S0 no_quiero"],
            "punto",
            (20, 30),
            [(B, 2, "grande", "deje"), (B, 1, "chica", "tanteo"), (A, 2, "pares", "tanteo")],
            B,
            (22, 33),
            GameTermination.ORDAGO,
            id="punto-ordago-decides",
        ),
    ],
)
def test_count_prior_counts_the_earlier_entries_before_an_ordago_in_juego_or_punto_8_4(
    hands: list[str],
    grande: list[str],
    lance: str,
    start: tuple[int, int],
    entries: list[tuple[int, int, str, str]],
    winner: int,
    score: tuple[int, int],
    termination: GameTermination,
) -> None:
    """count_prior: "the complete tanteo entries (9.5) of the lances before the órdago's lance are counted in order
    (stakes, paso points, pares and juego values, a lance held by one team included); an entry that reaches the
    target wins the game there. Otherwise the órdago decides, and the counters stay as they are after those
    entries"."""
    match = scripted_match(hands, {"ordago_resolution": "count_prior"}, start=start)
    act(match, *grande, *ALL_PASS)
    [pares] = [e for e in kinds(match.events, EventKind.LANCE_CLOSED) if fields(e)["lance"] == "pares"]
    assert fields(pares)["outcome"] == "no_betting", "Pares is held by team A alone"
    assert match.lance is not None and match.lance.value == lance
    act(match, "S0 ordago", "S1 quiero")
    [game] = match.game_results
    assert (game.winner, game.score, game.termination) == (winner, score, termination)
    assert scored(match) == entries
    decided = [(fields(e)["lance"], fields(e)["team"]) for e in kinds(match.events, EventKind.LANCE_DECIDED)]
    if termination is GameTermination.ORDAGO:
        assert decided == [(lance, B)]
    else:
        assert decided == [], "the órdago is never looked at"


def test_count_prior_is_not_the_default_the_same_ordago_wins_at_once_8_4() -> None:
    """immediate (default): "every accepted bet still pending from earlier lances is void ... and so are the paso
    points and the pares/juego values of this hand. Points already scored at once (negadas/dejes) stay"."""
    match = scripted_match(JUEGO_HANDS, start=(37, 10))
    act(match, "S0 envido 2", "S1 no_quiero", "S3 no_quiero", *ALL_PASS, "S0 ordago", "S1 quiero")
    [game] = match.game_results
    assert (game.winner, game.score, game.termination) == (B, (38, 10), GameTermination.ORDAGO)
    assert scored(match) == [(A, 1, "grande", "deje")]


# ---------------------------------------------------------------- §13 declarations = bot_declares, timeouts


def test_bot_declares_a_timeout_applies_the_true_answer_with_one_fault_13() -> None:
    """§13 table: "declarations | automatic: never asked; bot_declares: the true answer"; a timeout "counts one
    fault". S12's hands: pares held by S0, S1 and S2; juego by S0 (33) and S1 (34)."""
    match = scripted_match(S12_HANDS, {"senas_mode": "off", "declarations": "bot_declares"})
    act(match, *ALL_PASS, *ALL_PASS, declare=False)

    def timeout(seat: int, has: bool) -> None:
        assert decision(match) is DecisionKind.DECLARE and match.awaited() == (seat,)
        record = match.apply_timeout(seat)
        assert [(fields(e)["seat"], fields(e)["cause"]) for e in kinds(record.events, EventKind.FAULT)] == [
            (seat, "timeout")
        ]
        [declared] = kinds(record.events, EventKind.DECLARED)
        assert (fields(declared)["seat"], fields(declared)["has"]) == (seat, has)

    timeout(0, True)  # a holder (pair of kings)
    match.apply(1, Action.declare(True))
    match.apply(2, Action.declare(True))
    timeout(3, False)  # a non-holder
    assert match.faults == [1, 1]
    assert decision(match) is DecisionKind.BET
    act(match, "S0 paso", "S1 paso", "S2 paso", declare=False)

    match.apply(0, Action.declare(True))
    timeout(1, True)  # a holder (34)
    timeout(2, False)  # a non-holder (12)
    match.apply(3, Action.declare(False))
    assert match.faults == [2, 2] and not match.is_over
    declared = [
        (fields(e)["lance"], fields(e)["seat"], fields(e)["has"]) for e in kinds(match.events, EventKind.DECLARED)
    ]
    assert declared == [
        ("pares", 0, True),
        ("pares", 1, True),
        ("pares", 2, True),
        ("pares", 3, False),
        ("juego", 0, True),
        ("juego", 1, True),
        ("juego", 2, False),
        ("juego", 3, False),
    ]
    assert [fields(e)["seat"] for e in kinds(match.events, EventKind.FAULT)] == [0, 3, 1, 2]


# ---------------------------------------------------------------- §7 a negada that ends the game


@pytest.mark.parametrize("declarations", ["automatic", "bot_declares"])
@pytest.mark.parametrize(("before", "lances"), [([], ["grande"]), (ALL_PASS, ["grande", "chica"])])
def test_a_negada_that_ends_the_game_in_grande_or_chica_leaves_no_declarations_7(
    declarations: str, before: list[str], lances: list[str]
) -> None:
    """ "If the game ends before a lance, that lance's declarations are never made"; from A 39 a negada gives 40."""
    match = scripted_match(S12_HANDS, {"declarations": declarations}, start=(39, 0))
    act(match, *before, "S0 envido 2", "S1 no_quiero", "S3 no_quiero")
    [game] = match.game_results
    assert (game.winner, game.score, game.termination, game.hand_number) == (
        A,
        (40, 0),
        GameTermination.TARGET_AT_DEJE,
        0,
    )
    assert scored(match) == [(A, 1, lances[-1], "deje")], "the passed Grande's paso point is never counted"
    [next_hand] = [e for e in kinds(match.events, EventKind.HAND_STARTED) if fields(e)["hand"] == 1]
    hand0 = match.events[: match.events.index(next_hand)]
    assert [fields(e)["lance"] for e in kinds(hand0, EventKind.LANCE_STARTED)] == lances
    assert not kinds(hand0, EventKind.DECLARED)
    assert {fields(e)["lance"] for e in kinds(hand0, EventKind.LANCE_CLOSED)} <= set(lances)
    assert not [e for e in hand0 if e.kind is EventKind.BET and fields(e)["lance"] not in lances]
    assert len(kinds(hand0, EventKind.HANDS_SHOWN)) == 1
    assert not any(e.kind is EventKind.DECLARED for e in events_since(match, match.events.index(next_hand)))
    assert decision(match) is DecisionKind.MUS and match.hand_number == 1, "the next hand starts with the mus"


# ---------------------------------------------------------------- §13 default discard with discard_max < 4


@pytest.mark.parametrize(
    ("discard_max", "thrown"),
    [(1, "11o"), (2, "11o 11c"), (3, "11o 11c 10o"), (4, "11o 11c 10o 7o")],
)
def test_a_discard_timeout_throws_discard_max_cards_in_canonical_order_with_one_fault_13(
    discard_max: int, thrown: str
) -> None:
    """§13: "discard | all 4 cards"; when discard_max is below 4 the engine throws the first discard_max cards of
    the hand in its canonical order (README "Where the engine reads the rulebook"). S1 holds C-C-S-7."""
    deck = deck_for(HANDS_FOR_THE_MUS)
    match = scripted_match(HANDS_FOR_THE_MUS, {"senas_mode": "off", "discard_max": discard_max}, mus=True)
    call_mus(match)
    assert format_cards(match.hands[1]) == "11o 11c 10o 7o"
    assert match.default_action(1) == Action.discard(parse_cards(thrown))
    record = match.apply_timeout(1)
    assert [(fields(e)["seat"], fields(e)["cause"]) for e in kinds(record.events, EventKind.FAULT)] == [(1, "timeout")]
    [discarded] = kinds(record.events, EventKind.CARDS_DISCARDED)
    assert (fields(discarded)["seat"], fields(discarded)["cards"]) == (1, thrown)
    assert match.faults == [0, 1]
    for seat in (0, 2, 3):
        match.apply(seat, Action.discard(match.hands[seat][:1]))
    counts = {fields(e)["seat"]: fields(e)["count"] for e in kinds(match.events, EventKind.DISCARD_COUNTED)}
    assert counts == {0: 1, 1: discard_max, 2: 1, 3: 1}
    # mano_first: seat 0 takes card 16, seat 1 the next discard_max cards.
    [replaced] = [e for e in kinds(match.events, EventKind.CARDS_REPLACED) if fields(e)["seat"] == 1]
    assert set(parse_cards(fields(replaced)["cards"])) == set(deck[17 : 17 + discard_max])
    kept = set(parse_cards("11o 11c 10o 7o")) - set(parse_cards(thrown))
    assert set(match.hands[1]) == kept | set(deck[17 : 17 + discard_max])
    assert match.faults == [0, 1] and census_is_the_deck(match)
