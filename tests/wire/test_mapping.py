"""The wire mapping (`referee.wire`) on hand-built messages: legal actions, actions, events, views, outcomes."""

from __future__ import annotations

import random
from itertools import combinations
from typing import Any

import pytest

from clients.sdk.view import BotView, bot_view
from mus.v1 import play_pb2
from mus.v1 import types_pb2 as pb
from referee.engine.actions import Action, ActionKind
from referee.engine.cards import Card, Suit, parse_cards, sort_hand
from referee.engine.events import EventKind
from referee.engine.hands import Lance
from referee.engine.match import DecisionKind, Match
from referee.engine.outcome import GameTermination, MatchTermination, VacaResult
from referee.engine.rules import Rules
from referee.engine.selfplay import random_action
from referee.engine.senas import Sena
from referee.wire import (
    NO_ACTION,
    WireError,
    action_from_proto,
    action_to_proto,
    card_from_proto,
    event_from_proto,
    legal_from_proto,
    match_faults,
    outcome_from_proto,
    outcome_to_proto,
    rules_from_proto,
    seat_view_from_proto,
)
from tests.support.events import fields

HAND = parse_cards("12o 3c 1e 7b")
RULES = Rules()


def wire_cards(text: str) -> list[pb.Card]:
    suits = {"o": pb.SUIT_OROS, "c": pb.SUIT_COPAS, "e": pb.SUIT_ESPADAS, "b": pb.SUIT_BASTOS}
    return [pb.Card(rank=card.rank, suit=suits[card.suit.value]) for card in parse_cards(text)]


# ------------------------------------------------------------------ legal actions


def test_envido_and_mas_ranges_expand_to_every_amount() -> None:
    legal = [
        pb.LegalAction(kind=pb.ACTION_KIND_QUIERO),
        pb.LegalAction(kind=pb.ACTION_KIND_MAS, min_amount=2, max_amount=5),
        pb.LegalAction(kind=pb.ACTION_KIND_ORDAGO),
    ]
    actions = legal_from_proto(legal, HAND, RULES).expand()
    assert actions == (Action.quiero(), Action.mas(2), Action.mas(3), Action.mas(4), Action.mas(5), Action.ordago())


def test_an_uncapped_range_lists_bets_up_to_the_target_score() -> None:
    rules = Rules.from_options({"target_score": 30, "max_total_stake": None})
    legal = [pb.LegalAction(kind=pb.ACTION_KIND_ENVIDO, min_amount=2, max_amount=0)]
    amounts = [action.amount for action in legal_from_proto(legal, HAND, rules).expand()]
    assert amounts == list(range(2, 31))


def test_the_list_comes_in_the_engine_order_whatever_the_wire_order() -> None:
    legal = [
        pb.LegalAction(kind=pb.ACTION_KIND_MAS, min_amount=2, max_amount=3),
        pb.LegalAction(kind=pb.ACTION_KIND_QUIERO),
        pb.LegalAction(kind=pb.ACTION_KIND_NO_QUIERO),
        pb.LegalAction(kind=pb.ACTION_KIND_ORDAGO),
    ]
    actions = legal_from_proto(legal, HAND, RULES).expand()
    assert [str(action) for action in actions] == ["quiero", "no_quiero", "mas 2", "mas 3", "ordago"]


@pytest.mark.parametrize(("low", "high", "count"), [(1, 4, 15), (2, 3, 10), (4, 4, 1), (1, 1, 4)])
def test_discard_expands_to_every_subset_of_the_hand_in_range(low: int, high: int, count: int) -> None:
    legal = [pb.LegalAction(kind=pb.ACTION_KIND_DISCARD, min_cards=low, max_cards=high)]
    actions = legal_from_proto(legal, sort_hand(HAND), RULES).expand()
    expected = tuple(
        Action.discard(chosen) for size in range(low, high + 1) for chosen in combinations(sort_hand(HAND), size)
    )
    assert actions == expected and len(actions) == count


def test_declare_offers_only_the_true_answer() -> None:
    legal = [pb.LegalAction(kind=pb.ACTION_KIND_DECLARE, has_jugada=True)]
    assert legal_from_proto(legal, HAND, RULES).expand() == (Action.declare(True),)


def test_senas_offer_the_empty_list_and_each_acceptable_sena_alone() -> None:
    legal = [pb.LegalAction(kind=pb.ACTION_KIND_SENAS, max_senas=3, senas=[pb.SENA_DOS_REYES, pb.SENA_CORTAR_MUS])]
    assert legal_from_proto(legal, HAND, RULES).expand() == (
        Action.send_senas(()),
        Action.send_senas((Sena.DOS_REYES,)),
        Action.send_senas((Sena.CORTAR_MUS,)),
    )


def test_mus_calls_are_plain_and_their_senas_are_offered_apart() -> None:
    legal = [
        pb.LegalAction(kind=pb.ACTION_KIND_MUS, max_senas=3, senas=[pb.SENA_PARES]),
        pb.LegalAction(kind=pb.ACTION_KIND_NO_MUS, max_senas=3, senas=[pb.SENA_PARES]),
    ]
    assert legal_from_proto(legal, HAND, RULES).expand() == (Action.mus(), Action.no_mus())


def test_an_unknown_legal_kind_is_a_wire_error() -> None:
    with pytest.raises(WireError, match="action kind"):
        legal_from_proto([pb.LegalAction(kind=pb.ACTION_KIND_UNSPECIFIED)], HAND, RULES)


def test_an_act_without_an_action_says_so_and_an_unknown_kind_asks_whether_the_program_is_old() -> None:
    """An SDK answers no action when its bot fails to choose one: the stdio bridge on a line of junk on stdout. The
    rejection said "action kind 0 is unset or unknown (is this program older than the referee?)", which sent a
    newcomer looking for a version mismatch (stop 34)."""
    with pytest.raises(WireError) as unset:
        action_from_proto(pb.Action())
    assert str(unset.value) == "action kind is unset" + NO_ACTION and "seat's log" in NO_ACTION
    with pytest.raises(WireError, match=r"action kind 999 is unknown \(is this program older than the referee\?\)"):
        action_from_proto(pb.Action(kind=999))  # type: ignore[arg-type]  # a kind from a newer protocol


# ------------------------------------------------------------------ actions, cards, rules

ACTIONS = [
    Action.paso(),
    Action.envido(2),
    Action.mas(7),
    Action.quiero(),
    Action.no_quiero(),
    Action.ordago(),
    Action.mus(),
    Action.mus((Sena.DOS_REYES, Sena.CORTAR_MUS)),
    Action.no_mus((Sena.DUPLES,)),
    Action.discard(parse_cards("12o 1e")),
    Action.declare(True),
    Action.declare(False),
    Action.send_senas(()),
    Action.send_senas((Sena.JUEGO, Sena.TREINTA_Y_UNA)),
]


@pytest.mark.parametrize("action", ACTIONS, ids=str)
def test_actions_survive_the_wire_both_ways(action: Action) -> None:
    assert action_from_proto(action_to_proto(action)) == action


def test_an_action_on_the_wire_has_only_its_kinds_fields() -> None:
    message = action_to_proto(Action.discard(parse_cards("7b 12o")))
    assert message.kind == pb.ACTION_KIND_DISCARD and message.amount == 0 and not message.senas
    assert [(card.rank, card.suit) for card in message.cards] == [(12, pb.SUIT_OROS), (7, pb.SUIT_BASTOS)]
    assert action_to_proto(Action.envido(4)) == pb.Action(kind=pb.ACTION_KIND_ENVIDO, amount=4)


def test_an_unset_action_kind_and_a_bad_card_are_wire_errors() -> None:
    with pytest.raises(WireError):
        action_from_proto(pb.Action())
    with pytest.raises(WireError, match="rank 8"):
        card_from_proto(pb.Card(rank=8, suit=pb.SUIT_OROS))
    with pytest.raises(WireError, match="suit"):
        card_from_proto(pb.Card(rank=1))
    assert card_from_proto(pb.Card(rank=3, suit=pb.SUIT_COPAS)) == Card(3, Suit.COPAS)


def test_rules_are_read_from_their_wire_text() -> None:
    wire = {"target_score": "30", "max_total_stake": "null", "deck_mode": "4_reyes", "sena_leak_probability": "0.5"}
    rules = rules_from_proto(wire)
    assert rules == Rules.from_options(
        {"target_score": 30, "max_total_stake": None, "deck_mode": "4_reyes", "sena_leak_probability": 0.5}
    )
    full = {key: value if isinstance(value, str) else _json(value) for key, value in Rules().to_options().items()}
    assert rules_from_proto(full) == Rules()
    with pytest.raises(WireError, match="target_score"):
        rules_from_proto({"target_score": "zero"})


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


# ------------------------------------------------------------------ events

SEAT = 1  # the recipient of the hand-built events below


def case(message: pb.Event, kind: EventKind, data: dict[str, Any], to: frozenset[int] | None = None) -> Any:
    return pytest.param(message, (message.seq, kind, data, to), id=kind.value)


EVENT_CASES = [
    case(
        pb.Event(
            seq=0, match_started=pb.MatchStarted(first_dealer=2, rules={"target_score": "30"}, bot_names=["a"] * 4)
        ),
        EventKind.MATCH_STARTED,
        {"first_dealer": 2, "rules": Rules.from_options({"target_score": 30}).to_options()},
    ),
    case(
        pb.Event(seq=1, game_started=pb.GameStarted(vaca_number=0, game_number=1, score_team_1=4)),
        EventKind.GAME_STARTED,
        {"vaca": 0, "game": 1, "score": [0, 4]},
    ),
    case(
        pb.Event(seq=2, hand_started=pb.HandStarted(hand_number=5, mano=3, dealer=2)),
        EventKind.HAND_STARTED,
        {"hand": 5, "mano": 3, "dealer": 2},
    ),
    case(
        pb.Event(seq=3, cards_dealt=pb.CardsDealt(seat=1, cards=wire_cards("12o 3c 1e 7b"))),
        EventKind.CARDS_DEALT,
        {"seat": 1, "cards": "12o 3c 1e 7b"},
        frozenset({1}),
    ),
    case(
        pb.Event(seq=4, mus_called=pb.MusCalled(seat=3, mus=True)),
        EventKind.MUS_CALLED,
        {"seat": 3, "mus": True},
    ),
    case(
        pb.Event(seq=5, discard_counted=pb.DiscardCounted(seat=0, count=3)),
        EventKind.DISCARD_COUNTED,
        {"seat": 0, "count": 3},
    ),
    case(
        pb.Event(seq=6, cards_discarded=pb.CardsDiscarded(seat=1, cards=wire_cards("1e 7b"))),
        EventKind.CARDS_DISCARDED,
        {"seat": 1, "cards": "1e 7b"},
        frozenset({1}),
    ),
    case(
        pb.Event(seq=7, cards_replaced=pb.CardsReplaced(seat=1, cards=wire_cards("11c 4o"))),
        EventKind.CARDS_REPLACED,
        {"seat": 1, "cards": "11c 4o"},
        frozenset({1}),
    ),
    case(pb.Event(seq=8, stock_reshuffled=pb.StockReshuffled()), EventKind.STOCK_RESHUFFLED, {}),
    case(
        pb.Event(seq=9, mus_cut=pb.MusCut(reason=pb.MUS_CUT_REASON_NO_MUS, seat=0)),
        EventKind.MUS_CUT,
        {"reason": "no_mus", "seat": 0},
    ),
    case(
        pb.Event(seq=10, lance_started=pb.LanceStarted(lance=pb.LANCE_PUNTO)),
        EventKind.LANCE_STARTED,
        {"lance": "punto"},
    ),
    case(
        pb.Event(seq=11, declared=pb.Declared(lance=pb.LANCE_PARES, seat=2, has_jugada=True)),
        EventKind.DECLARED,
        {"lance": "pares", "seat": 2, "has": True},
    ),
    case(
        pb.Event(seq=12, sena_delivered=pb.SenaDelivered(sender=3, sena=pb.SENA_DUPLES, lance=pb.LANCE_CHICA)),
        EventKind.SENA_DELIVERED,
        {"seat": 3, "sena": "duples", "phase": "chica", "mus_round": 0},
        frozenset({1, 3}),
    ),
    case(
        pb.Event(
            seq=13,
            sena_rejected=pb.SenaRejected(
                senas=[
                    pb.RejectedSena(
                        sena=pb.SENA_MEDIAS, reason=pb.SENA_REJECTION_REASON_OUTSIDE_WINDOW, detail="not before chica"
                    ),
                    pb.RejectedSena(sena=99, reason=pb.SENA_REJECTION_REASON_UNKNOWN_SENA, detail="unknown"),  # type: ignore[arg-type]
                ]
            ),
        ),
        EventKind.SENA_REJECTED,
        {
            "seat": SEAT,
            "senas": [
                {"sena": "medias", "code": "outside_window", "reason": "not before chica"},
                {"sena": "#99", "code": "not_in_vocabulary", "reason": "unknown"},
            ],
        },
        frozenset({SEAT}),
    ),
    case(
        pb.Event(
            seq=14,
            bet_made=pb.BetMade(
                lance=pb.LANCE_GRANDE, seat=0, kind=pb.ACTION_KIND_MAS, amount=3, pending_total=5, accepted_total=2
            ),
        ),
        EventKind.BET,
        {"lance": "grande", "seat": 0, "action": "mas", "amount": 3, "pending": 5, "accepted": 2, "ordago": False},
    ),
    case(
        pb.Event(
            seq=15,
            lance_closed=pb.LanceClosed(lance=pb.LANCE_JUEGO, outcome=pb.LANCE_OUTCOME_REJECTED, winner_team=pb.TEAM_1),
        ),
        EventKind.LANCE_CLOSED,
        {"lance": "juego", "outcome": "rejected", "stake": 0, "winner_team": 1},
    ),
    case(
        pb.Event(
            seq=16,
            points_scored=pb.PointsScored(
                team=pb.TEAM_0,
                points=4,
                lance=pb.LANCE_PARES,
                reason=pb.SCORE_REASON_TANTEO,
                score_team_0=12,
                score_team_1=30,
            ),
        ),
        EventKind.POINTS_SCORED,
        {"team": 0, "points": 4, "lance": "pares", "reason": "tanteo", "score": [12, 30]},
    ),
    case(
        pb.Event(
            seq=17,
            hands_shown=pb.HandsShown(
                hands=[
                    pb.Hand(seat=2, cards=wire_cards("5o 5c 5e 5b")),
                    pb.Hand(seat=0, cards=wire_cards("12o 12c 12e 12b")),
                    pb.Hand(seat=3, cards=wire_cards("6o 6c 6e 6b")),
                    pb.Hand(seat=1, cards=wire_cards("1o 1c 1e 1b")),
                ]
            ),
        ),
        EventKind.HANDS_SHOWN,
        {"hands": ["12o 12c 12e 12b", "1o 1c 1e 1b", "5o 5c 5e 5b", "6o 6c 6e 6b"]},
    ),
    case(
        pb.Event(seq=18, lance_decided=pb.LanceDecided(lance=pb.LANCE_GRANDE, winner_seat=3)),
        EventKind.LANCE_DECIDED,
        {"lance": "grande", "seat": 3, "team": 1},
    ),
    case(pb.Event(seq=19, hand_ended=pb.HandEnded(hand_number=5)), EventKind.HAND_ENDED, {"hand": 5}),
    case(
        pb.Event(
            seq=20,
            game_ended=pb.GameEnded(
                winner_team=pb.TEAM_1,
                score_team_0=12,
                score_team_1=41,
                termination=pb.GAME_TERMINATION_TARGET_AT_TANTEO,
                hand_number=5,
                vaca_number=1,
                game_number=2,
            ),
        ),
        EventKind.GAME_ENDED,
        {"vaca": 1, "game": 2, "winner": 1, "score": [12, 41], "termination": "target_at_tanteo", "hand": 5},
    ),
    case(
        pb.Event(seq=21, vaca_ended=pb.VacaEnded(winner_team=pb.TEAM_1, games_team_0=0, games_team_1=2, vaca_number=1)),
        EventKind.VACA_ENDED,
        {"vaca": 1, "winner": 1, "games": [0, 2]},
    ),
    case(
        pb.Event(
            seq=22,
            match_ended=pb.MatchEnded(
                winner_team=pb.TEAM_1, vacas_team_0=0, vacas_team_1=1, termination=pb.MATCH_TERMINATION_NORMAL
            ),
        ),
        EventKind.MATCH_ENDED,
        {"winner": 1, "termination": "normal", "vacas": [0, 1]},
    ),
    case(
        pb.Event(seq=23, fault=pb.Fault(seat=2, cause=pb.FAULT_CAUSE_TIMEOUT, team_faults=2)),
        EventKind.FAULT,
        {"seat": 2, "cause": "timeout", "team": 0, "faults": 2},
    ),
    case(pb.Event(seq=24, forfeit=pb.Forfeit(losing_team=pb.TEAM_0)), EventKind.FORFEIT, {"team": 0}),
]


@pytest.mark.parametrize(("message", "expected"), EVENT_CASES)
def test_each_event_kind_decodes_to_the_engine_payload(message: pb.Event, expected: tuple[Any, ...]) -> None:
    event = event_from_proto(message, SEAT)
    assert (event.seq, event.kind, fields(event), event.to) == expected


def test_the_cases_cover_every_event_kind() -> None:
    assert {param.values[1][1] for param in EVENT_CASES} == set(EventKind)


def test_a_leaked_sena_reads_as_public_and_a_sena_keeps_its_mus_round() -> None:
    leaked = pb.Event(sena_delivered=pb.SenaDelivered(sender=0, sena=pb.SENA_JUEGO, mus_round=2, leaked=True))
    event = event_from_proto(leaked, SEAT)
    assert event.to is None and fields(event)["phase"] == "mus" and fields(event)["mus_round"] == 2
    in_lance = pb.SenaDelivered(sender=3, sena=pb.SENA_PARES, lance=pb.LANCE_PARES, mus_round=2)
    assert fields(event_from_proto(pb.Event(sena_delivered=in_lance), SEAT))["mus_round"] == 2, "read, not counted"


def test_a_bet_carries_the_ordago_that_stands_and_the_stake_accepted_before_it() -> None:
    def bet(kind: pb.ActionKind.ValueType, pending: int, accepted: int, ordago: bool) -> dict[str, Any]:
        made = pb.BetMade(
            lance=pb.LANCE_PARES, seat=1, kind=kind, pending_total=pending, accepted_total=accepted, ordago=ordago
        )
        return fields(event_from_proto(pb.Event(bet_made=made), SEAT))

    envido = bet(pb.ACTION_KIND_ENVIDO, 2, 0, False)
    answer = bet(pb.ACTION_KIND_NO_QUIERO, 0, 2, True)
    assert (envido["pending"], envido["accepted"], envido["ordago"]) == (2, 0, False)
    assert (answer["pending"], answer["accepted"], answer["ordago"]) == (2, 2, True), "pending = accepted before it"
    first = bet(pb.ACTION_KIND_ORDAGO, 0, 0, True)
    assert (first["pending"], first["accepted"], first["ordago"]) == (None, 0, True)


def test_an_event_without_payload_or_with_an_unset_enum_is_a_wire_error() -> None:
    with pytest.raises(WireError, match="no payload"):
        event_from_proto(pb.Event(seq=3), SEAT)
    with pytest.raises(WireError, match="lance"):
        event_from_proto(pb.Event(lance_started=pb.LanceStarted()), SEAT)
    with pytest.raises(WireError, match="fault cause"):
        event_from_proto(pb.Event(fault=pb.Fault(seat=1)), SEAT)


# ------------------------------------------------------------------ views and outcomes


def view_of(
    request: play_pb2.DecisionRequest, *, rejection: str | None = None, legal: list[pb.LegalAction] | None = None
) -> BotView:
    """The `BotView` the runner builds from a request."""
    view = seat_view_from_proto(request, RULES, legal=legal)
    times = request.decision_time_left_ms / 1000, request.bank_time_left_ms / 1000
    return bot_view(view, RULES, decision_time_left_s=times[0], bank_time_left_s=times[1], rejection=rejection)


def test_a_decision_request_becomes_a_bot_view() -> None:
    events = [
        pb.Event(seq=40, hand_started=pb.HandStarted(hand_number=3, mano=2, dealer=1)),
        pb.Event(seq=41, cards_dealt=pb.CardsDealt(seat=SEAT, cards=wire_cards("12o 3c 1e 7b"))),
        pb.Event(seq=42, sena_delivered=pb.SenaDelivered(sender=3, sena=pb.SENA_DOS_REYES, lance=pb.LANCE_GRANDE)),
        pb.Event(
            seq=43,
            bet_made=pb.BetMade(lance=pb.LANCE_GRANDE, seat=2, kind=pb.ACTION_KIND_ENVIDO, amount=2, pending_total=2),
        ),
    ]
    view = pb.SeatView(
        seat=SEAT,
        mano=2,
        dealer=1,
        hand_number=3,
        vaca_number=0,
        game_number=1,
        score_team_0=10,
        score_team_1=20,
        games_team_0=1,
        vacas_team_1=0,
        cards=wire_cards("12o 3c 1e 7b"),
        events_this_hand=events,
        senas_received=[events[2].sena_delivered],
        faults_team_1=1,
        lance=pb.LANCE_GRANDE,
        accepted_total=0,
        pending_total=2,
    )
    request = play_pb2.DecisionRequest(
        decision_id=9,
        kind=pb.DECISION_KIND_BET,
        view=view,
        legal_actions=[
            pb.LegalAction(kind=pb.ACTION_KIND_QUIERO),
            pb.LegalAction(kind=pb.ACTION_KIND_NO_QUIERO),
            pb.LegalAction(kind=pb.ACTION_KIND_MAS, min_amount=2, max_amount=38),
            pb.LegalAction(kind=pb.ACTION_KIND_ORDAGO),
        ],
        decision_time_left_ms=9500,
        bank_time_left_ms=60000,
    )
    bot_view = view_of(request)
    assert (bot_view.seat, bot_view.team, bot_view.partner, bot_view.mano, bot_view.dealer) == (1, 1, 3, 2, 1)
    assert (bot_view.hand_number, bot_view.vaca, bot_view.game) == (3, 0, 1), "every number counts from 0"
    assert (bot_view.score, bot_view.games, bot_view.vacas, bot_view.faults) == ((10, 20), (1, 0), (0, 0), (0, 1))
    assert bot_view.cards == parse_cards("12o 3c 1e 7b")
    assert bot_view.lance is Lance.GRANDE and bot_view.decision is DecisionKind.BET
    assert len(bot_view.legal_actions) == 3 + 37 and bot_view.can(ActionKind.MAS)
    assert [event.seq for event in bot_view.hand_events] == [40, 41, 42, 43]
    assert [(s.seat, s.sena, s.lance) for s in bot_view.senas_received] == [(3, Sena.DOS_REYES, Lance.GRANDE)]
    assert (bot_view.accepted_total, bot_view.pending_total, bot_view.ordago_pending) == (0, 2, False)
    assert (bot_view.decision_time_left_s, bot_view.bank_time_left_s) == (9.5, 60.0)
    assert bot_view.position == 3 and bot_view.is_postre and not bot_view.is_mano and bot_view.rivals == (0, 2)
    assert bot_view.facts.total == 10 + 10 + 1 + 7 and bot_view.rejection is None
    retried = view_of(request, rejection="no", legal=[pb.LegalAction(kind=pb.ACTION_KIND_QUIERO)])
    assert retried.rejection == "no" and retried.legal_actions == (Action.quiero(),)


def test_a_wire_outcome_becomes_the_engine_outcome() -> None:
    outcome = pb.Outcome(
        winner_team=pb.TEAM_1,
        termination=pb.MATCH_TERMINATION_FORFEIT,
        games=[
            pb.GameResult(
                vaca_number=0,
                game_number=0,
                winner_team=pb.TEAM_1,
                score_team_0=3,
                score_team_1=40,
                termination=pb.GAME_TERMINATION_TARGET_AT_DEJE,
                hand_number=4,
            ),
            pb.GameResult(vaca_number=0, game_number=1, termination=pb.GAME_TERMINATION_FORFEIT, hand_number=6),
        ],
        vacas=[pb.VacaResult(vaca_number=0, games_team_1=1)],
        vacas_team_0=0,
        vacas_team_1=0,
        faults=[
            pb.Fault(seat=0, cause=pb.FAULT_CAUSE_TIMEOUT, team_faults=1),
            pb.Fault(seat=2, cause=pb.FAULT_CAUSE_CRASH, team_faults=2),
        ],
    )
    engine = outcome_from_proto(outcome)
    assert engine.winner == 1 and engine.termination is MatchTermination.FORFEIT
    assert [(g.vaca, g.game, g.winner, g.score, g.termination) for g in engine.games] == [
        (0, 0, 1, (3, 40), GameTermination.TARGET_AT_DEJE),
        (0, 1, None, (0, 0), GameTermination.FORFEIT),
    ]
    assert engine.vaca_results == (VacaResult(0, None, (0, 1)),), "the vaca cut short by the forfeit is kept"
    assert engine.faults == (2, 0)


def test_the_outcome_of_a_forfeited_match_survives_the_wire_with_its_unfinished_vaca() -> None:
    """The engine keeps the vaca a forfeit cuts short (no winner, the games won in it); so does the SDK."""
    rules = Rules.from_options({"vacas_to_win_match": 2, "games_to_win_vaca": 2})
    match = Match(rules, 5)
    rng = random.Random(5)
    while not match.games_won[0] + match.games_won[1] and not match.vacas_won[0] + match.vacas_won[1]:
        seat = match.awaited()[0]
        match.apply(seat, random_action(rng, match.legal_actions(seat)))
    while not match.is_over:
        match.record_illegal_action(match.awaited()[0], "a test's illegal action")
    outcome = match.outcome
    assert outcome is not None and outcome.termination is MatchTermination.FORFEIT
    assert outcome.vaca_results[-1].winner is None
    assert outcome_from_proto(outcome_to_proto(outcome, match_faults(match))) == outcome
