"""The referee's edge: engine values to protobuf messages and bot actions back (the one module that does it).

Wire conventions (proto/mus/v1/types.proto): teams are TEAM_0/TEAM_1, vaca and game numbers are 0-based, rules
options travel as strings (JSON text for numbers, booleans and null; plain text for names).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

from google.protobuf.message import Message

from mus.v1 import play_pb2
from mus.v1 import types_pb2 as pb
from referee.engine.actions import Action, ActionKind
from referee.engine.cards import Card, Suit, parse_cards, sort_hand
from referee.engine.errors import MalformedError
from referee.engine.events import Event, EventKind
from referee.engine.match import DecisionKind, FaultCause, GameResult, Match, MatchOutcome, VacaResult, team_of
from referee.engine.rules import Rules, rules_from_assignments
from referee.engine.senas import Sena, SenaRejectionCode
from referee.service.causes import CAUSE_TO_PROTO, IncidentCause

_SUIT_TO_PB = {
    Suit.OROS: pb.SUIT_OROS,
    Suit.COPAS: pb.SUIT_COPAS,
    Suit.ESPADAS: pb.SUIT_ESPADAS,
    Suit.BASTOS: pb.SUIT_BASTOS,
}
_SUIT_FROM_PB = {value: suit for suit, value in _SUIT_TO_PB.items()}
_KIND_TO_PB = {kind: pb.ActionKind.Value(f"ACTION_KIND_{kind.name}") for kind in ActionKind}
_KIND_FROM_PB = {value: kind for kind, value in _KIND_TO_PB.items()}
_KIND_ORDER = {value: index for index, value in enumerate(_KIND_TO_PB.values())}
_SENA_TO_PB = {sena: pb.Sena.Value(f"SENA_{sena.name}") for sena in Sena}
_SENA_FROM_PB = {value: sena for sena, value in _SENA_TO_PB.items()}
_LANCE_TO_PB = {
    "grande": pb.LANCE_GRANDE,
    "chica": pb.LANCE_CHICA,
    "pares": pb.LANCE_PARES,
    "juego": pb.LANCE_JUEGO,
    "punto": pb.LANCE_PUNTO,
}
_DECISION_TO_PB = {
    DecisionKind.MUS: pb.DECISION_KIND_MUS,
    DecisionKind.DISCARD: pb.DECISION_KIND_DISCARD,
    DecisionKind.DECLARE: pb.DECISION_KIND_DECLARE,
    DecisionKind.BET: pb.DECISION_KIND_BET,
    DecisionKind.SENAS: pb.DECISION_KIND_SENA_ROUND,
}
_TEAM_TO_PB = {0: pb.TEAM_0, 1: pb.TEAM_1}
_SENA_REJECTION_TO_PB = {
    SenaRejectionCode.NOT_IN_VOCABULARY.value: pb.SENA_REJECTION_REASON_UNKNOWN_SENA,
    SenaRejectionCode.FALSE.value: pb.SENA_REJECTION_REASON_FALSE,
    SenaRejectionCode.OUTSIDE_WINDOW.value: pb.SENA_REJECTION_REASON_OUTSIDE_WINDOW,
    SenaRejectionCode.OVER_LIMIT.value: pb.SENA_REJECTION_REASON_OVER_LIMIT,
}


def team_to_proto(team: int | None) -> pb.Team.ValueType:
    return _TEAM_TO_PB[team] if team is not None else pb.TEAM_UNSPECIFIED


def lance_to_proto(lance: str | None) -> pb.Lance.ValueType:
    return _LANCE_TO_PB[lance] if lance is not None else pb.LANCE_UNSPECIFIED


def decision_to_proto(kind: DecisionKind) -> pb.DecisionKind.ValueType:
    return _DECISION_TO_PB[kind]


def card_to_proto(card: Card) -> pb.Card:
    return pb.Card(rank=card.rank, suit=_SUIT_TO_PB[card.suit])


def cards_to_proto(cards: Iterable[Card] | str) -> list[pb.Card]:
    """Cards, or a notation string as the engine's events hold them."""
    parsed = parse_cards(cards) if isinstance(cards, str) else cards
    return [card_to_proto(card) for card in parsed]


@lru_cache(maxsize=1 << 14)
def _notation_cards(text: str) -> tuple[pb.Card, ...]:
    """Cards from the notation an event holds, parsed once per notation; a repeated field copies them in."""
    return tuple(card_to_proto(card) for card in parse_cards(text))


def card_from_proto(message: pb.Card) -> Card:
    """A card a bot sent; anything outside the deck is malformed."""
    if message.suit not in _SUIT_FROM_PB:
        raise MalformedError(f"card with unknown suit {message.suit}")
    return Card(message.rank, _SUIT_FROM_PB[message.suit])


def action_from_proto(message: pb.Action) -> Action:
    """The engine action a bot sent, every field as sent, or `MalformedError` naming what cannot be read.

    Whether the fields fit the kind (an amount only on a bet, cards only on a discard) is the engine's call
    (`Action.malformed`), so a bot gets the same answer over the wire as in local play.
    """
    kind = _KIND_FROM_PB.get(message.kind)
    if kind is None:
        raise MalformedError(f"action kind {message.kind} is not a Mus action")
    # A seña outside the vocabulary does not make the action malformed: it is rejected on its own
    # (`unknown_senas`, rules §12.3 item 4); señas on an action that cannot carry them are kept, so that the
    # engine rejects them to the sender.
    senas = tuple(_SENA_FROM_PB[value] for value in message.senas if value in _SENA_FROM_PB)
    cards = tuple(card_from_proto(card) for card in message.cards)
    if kind is ActionKind.DISCARD:
        cards = sort_hand(cards)
    return Action(kind, amount=message.amount, cards=cards, has_jugada=message.has_jugada, senas=senas)


def unknown_senas(message: pb.Action) -> list[str]:
    """The señas of a bot's action that are not in the vocabulary, as labels (`#99`), in order."""
    return [f"#{value}" for value in message.senas if value not in _SENA_FROM_PB]


def action_to_proto(action: Action) -> pb.Action:
    return pb.Action(
        kind=_KIND_TO_PB[action.kind],
        amount=action.amount,
        cards=cards_to_proto(action.cards),
        has_jugada=action.has_jugada,
        senas=[_SENA_TO_PB[sena] for sena in action.senas],
    )


def legal_actions_to_proto(
    match: Match, seat: int, legal: Sequence[Action], acceptable_senas: Sequence[Sena] = ()
) -> list[pb.LegalAction]:
    """The legal set as a short list: one entry per kind, with amount and card-count ranges."""
    rules = match.rules
    out: list[pb.LegalAction] = []
    # A betting menu lists every amount: one pass with identity tests and plain locals, no set or dict keyed
    # by kind (an Enum's hash is computed in Python).
    kinds_seen: list[ActionKind] = []
    envido: list[int] = []  # [lowest, highest] once one is seen
    mas: list[int] = []
    senas_allowed = rules.senas_per_window
    for action in legal:
        kind = action.kind
        if kind is ActionKind.ENVIDO or kind is ActionKind.MAS:
            bounds = envido if kind is ActionKind.ENVIDO else mas
            amount = action.amount
            if not bounds:
                bounds += (amount, amount)
            elif amount < bounds[0]:
                bounds[0] = amount
            elif amount > bounds[1]:
                bounds[1] = amount
            continue
        if kind in kinds_seen:
            continue
        kinds_seen.append(kind)
        if kind is ActionKind.DISCARD:
            out.append(
                pb.LegalAction(kind=pb.ACTION_KIND_DISCARD, min_cards=rules.discard_min, max_cards=rules.discard_max)
            )
        elif kind is ActionKind.DECLARE:
            out.append(pb.LegalAction(kind=pb.ACTION_KIND_DECLARE, has_jugada=action.has_jugada))
        elif kind is ActionKind.MUS or kind is ActionKind.NO_MUS or kind is ActionKind.SENAS:
            out.append(
                pb.LegalAction(
                    kind=_KIND_TO_PB[kind],
                    max_senas=senas_allowed,
                    senas=[_SENA_TO_PB[sena] for sena in acceptable_senas] if senas_allowed else [],
                )
            )
        else:
            out.append(pb.LegalAction(kind=_KIND_TO_PB[kind]))
    uncapped = rules.stake_cap is None
    for wire_kind, bounds in ((pb.ACTION_KIND_ENVIDO, envido), (pb.ACTION_KIND_MAS, mas)):
        if bounds:
            out.append(pb.LegalAction(kind=wire_kind, min_amount=bounds[0], max_amount=0 if uncapped else bounds[1]))
    out.sort(key=lambda legal_action: _KIND_ORDER[legal_action.kind])
    return out


def rules_to_map(rules: Rules) -> dict[str, str]:
    """Every option as wire text: names as they are, other values as JSON."""
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in rules.to_options().items()}


def rules_from_map(options: Mapping[str, str]) -> Rules:
    """Rules from wire text; raises `RulesError` naming a bad option."""
    return rules_from_assignments([f"{key}={text}" for key, text in options.items()])


def event_to_proto(event: Event, seq: int, recipient: int | None, *, bot_names: Sequence[str] = ()) -> pb.Event:
    """One engine event as the wire sees it. `recipient` is the seat it is sent to (None: a spectator or the
    omniscient replay), which decides only the `leaked` flag of a seña. `bot_names` are the table's four names, by
    seat, for `MatchStarted` (the engine plays seats, not bots)."""
    data = event.data
    kind = event.kind
    message = pb.Event(seq=seq)
    if kind is EventKind.MATCH_STARTED:
        message.match_started.first_dealer = data["first_dealer"]
        message.match_started.rules.update(
            {key: value if isinstance(value, str) else json.dumps(value) for key, value in data["rules"].items()}
        )
        message.match_started.bot_names.extend(bot_names)
    elif kind is EventKind.GAME_STARTED:
        message.game_started.vaca_number = data["vaca"] - 1
        message.game_started.game_number = data["game"] - 1
    elif kind is EventKind.HAND_STARTED:
        message.hand_started.hand_number = data["hand"]
        message.hand_started.mano = data["mano"]
        message.hand_started.dealer = data["dealer"]
    elif kind is EventKind.CARDS_DEALT:
        message.cards_dealt.seat = data["seat"]
        message.cards_dealt.cards.extend(_notation_cards(data["cards"]))
    elif kind is EventKind.MUS_CALLED:
        message.mus_called.seat = data["seat"]
        message.mus_called.mus = data["mus"]
    elif kind is EventKind.DISCARD_COUNTED:
        message.discard_counted.seat = data["seat"]
        message.discard_counted.count = data["count"]
    elif kind is EventKind.CARDS_DISCARDED:
        message.cards_discarded.seat = data["seat"]
        message.cards_discarded.cards.extend(_notation_cards(data["cards"]))
    elif kind is EventKind.CARDS_REPLACED:
        message.cards_replaced.seat = data["seat"]
        message.cards_replaced.cards.extend(_notation_cards(data["cards"]))
    elif kind is EventKind.STOCK_RESHUFFLED:
        message.stock_reshuffled.SetInParent()
    elif kind is EventKind.MUS_CUT:
        reason = pb.MUS_CUT_REASON_NO_MUS if data["reason"] == "no_mus" else pb.MUS_CUT_REASON_MAX_MUS_ROUNDS
        message.mus_cut.reason = reason
        if data["seat"] is not None:
            message.mus_cut.seat = data["seat"]
    elif kind is EventKind.LANCE_STARTED:
        message.lance_started.lance = lance_to_proto(data["lance"])
    elif kind is EventKind.DECLARED:
        message.declared.lance = lance_to_proto(data["lance"])
        message.declared.seat = data["seat"]
        message.declared.has_jugada = data["has"]
    elif kind is EventKind.SENA_DELIVERED:
        sena = message.sena_delivered
        sena.sender = data["seat"]
        sena.sena = _SENA_TO_PB[Sena(data["sena"])]
        if data["phase"] == "mus":
            sena.mus_round = data["mus_round"]
        else:
            sena.lance = lance_to_proto(data["phase"])
        opponent = recipient is not None and team_of(recipient) != team_of(data["seat"])
        sena.leaked = event.to is None and (recipient is None or opponent)
    elif kind is EventKind.SENA_REJECTED:
        for item in data.get("senas", [data]):  # events_version < 3: one seña per event
            name = item["sena"]
            rejected = message.sena_rejected.senas.add()
            # An unknown seña is echoed back as the number the bot sent (its label is `#<number>`).
            rejected.sena = int(name[1:]) if name.startswith("#") else _SENA_TO_PB[Sena(name)]  # type: ignore[assignment]
            rejected.reason = _SENA_REJECTION_TO_PB[item["code"]]
            rejected.detail = item["reason"]
    elif kind is EventKind.BET:
        bet = message.bet_made
        bet.lance = lance_to_proto(data["lance"])
        bet.seat = data["seat"]
        bet.kind = _KIND_TO_PB[ActionKind(data["action"])]
        bet.amount = data["amount"]
        bet.pending_total = data["pending"] or 0
        bet.accepted_total = data["accepted"]
    elif kind is EventKind.LANCE_CLOSED:
        closed = message.lance_closed
        closed.lance = lance_to_proto(data["lance"])
        closed.outcome = pb.LanceOutcome.Value(f"LANCE_OUTCOME_{data['outcome'].upper()}")
        closed.stake = data["stake"]
        closed.winner_team = team_to_proto(data["winner_team"])
    elif kind is EventKind.POINTS_SCORED:
        points = message.points_scored
        points.team = team_to_proto(data["team"])
        points.points = data["points"]
        points.lance = lance_to_proto(data["lance"])
        points.reason = pb.SCORE_REASON_DEJE if data["reason"] == "deje" else pb.SCORE_REASON_TANTEO
        points.score_team_0, points.score_team_1 = data["score"]
    elif kind is EventKind.HANDS_SHOWN:
        for seat, cards in enumerate(data["hands"]):
            message.hands_shown.hands.add(seat=seat, cards=_notation_cards(cards))
    elif kind is EventKind.LANCE_DECIDED:
        message.lance_decided.lance = lance_to_proto(data["lance"])
        message.lance_decided.winner_seat = data["seat"]
    elif kind is EventKind.HAND_ENDED:
        message.hand_ended.hand_number = data["hand"]
    elif kind is EventKind.GAME_ENDED:
        ended = message.game_ended
        ended.winner_team = team_to_proto(data["winner"])
        ended.score_team_0, ended.score_team_1 = data["score"]
        ended.termination = pb.GameTermination.Value(f"GAME_TERMINATION_{data['termination'].upper()}")
        ended.hand_number = data["hand"]
    elif kind is EventKind.VACA_ENDED:
        message.vaca_ended.winner_team = team_to_proto(data["winner"])
        message.vaca_ended.games_team_0, message.vaca_ended.games_team_1 = data["games"]
    elif kind is EventKind.MATCH_ENDED:
        ended_match = message.match_ended
        ended_match.winner_team = team_to_proto(data["winner"])
        ended_match.vacas_team_0, ended_match.vacas_team_1 = data["vacas"]
        ended_match.termination = pb.MatchTermination.Value(f"MATCH_TERMINATION_{data['termination'].upper()}")
    elif kind is EventKind.FAULT:
        message.fault.seat = data["seat"]
        message.fault.cause = CAUSE_TO_PROTO[FaultCause(data["cause"])]
        message.fault.team_faults = data["faults"]
    elif kind is EventKind.FORFEIT:
        message.forfeit.losing_team = team_to_proto(data["team"])
    else:  # pragma: no cover - every kind is handled above
        raise AssertionError(f"no conversion for event {kind}")
    return message


def match_faults(match: Match) -> list[pb.Fault]:
    """Every fault of the match (rules §13: illegal action, timeout, limit), in order, from the engine's events."""
    return [
        pb.Fault(
            seat=event.data["seat"],
            cause=CAUSE_TO_PROTO[FaultCause(event.data["cause"])],
            team_faults=event.data["faults"],
        )
        for event in match.events
        if event.kind is EventKind.FAULT
    ]


def incident_to_proto(seat: int, cause: IncidentCause, detail: str) -> pb.Incident:
    """An incident (a seat's connection or process; not a fault) as the wire carries it."""
    return pb.Incident(seat=seat, cause=CAUSE_TO_PROTO[cause], detail=detail)


def seat_counters_to_proto(match: Match, seat: int) -> pb.SeatView:
    """A seat's view without the events of the hand: the table adds those as wire bytes (`view_entries`), in place
    inside the message that carries the view, to copy none of them."""
    betting = match.betting_totals()
    return pb.SeatView(
        seat=seat,
        mano=match.mano,
        dealer=match.dealer,
        hand_number=max(match.hand_number, 0),
        vaca_number=match.vaca_number,
        game_number=max(match.game_number - 1, 0),
        score_team_0=match.score[0],
        score_team_1=match.score[1],
        games_team_0=match.games_won[0],
        games_team_1=match.games_won[1],
        vacas_team_0=match.vacas_won[0],
        vacas_team_1=match.vacas_won[1],
        cards=cards_to_proto(match.hands[seat]),
        faults_team_0=match.faults[0],
        faults_team_1=match.faults[1],
        lance=lance_to_proto(match.lance.value if match.lance else None),
        discard_rounds=match.discard_rounds,
        accepted_total=betting[0],
        pending_total=0 if betting[2] else betting[1],
        ordago_pending=betting[2],
    )


# Repeated message fields are filled from wire bytes, not message by message: appending a message to a
# repeated field copies it (about 1-2 µs each with upb), while parsing the concatenated entries of a whole
# hand costs about as much as one append. Parsing appends in order, whatever fields the entries interleave.


_SMALL_VARINTS = tuple(bytes((value,)) for value in range(0x80))


def _varint(value: int) -> bytes:
    if value < 0x80:  # most lengths and keys
        return _SMALL_VARINTS[value]
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _entry_key(message: type[Message], field: str) -> bytes:
    """The wire key of a length-delimited field (protobuf encoding: field number, wire type 2)."""
    return _varint(message.DESCRIPTOR.fields_by_name[field].number << 3 | 2)


_SEQ_KEY = _varint(pb.Event.DESCRIPTOR.fields_by_name["seq"].number << 3)  # a varint field: wire type 0
_VIEW_EVENT_KEY = _entry_key(pb.SeatView, "events_this_hand")
_VIEW_SENA_KEY = _entry_key(pb.SeatView, "senas_received")
_UPDATE_EVENT_KEY = _entry_key(play_pb2.Update, "events")


def event_bytes(payload: bytes, seq: int) -> bytes:
    """The wire bytes of an event from those of its payload (an event serialized with seq 0) and its seq.

    A parser reads fields in any order, and a message parsed from these bytes serializes canonically.
    """
    return _SEQ_KEY + _varint(seq) + payload if seq else payload


def update_entry(data: bytes) -> bytes:
    """An event's bytes as one entry of `Update.events`."""
    return _UPDATE_EVENT_KEY + _varint(len(data)) + data


def view_entries(event: pb.Event, data: bytes, seat: int) -> bytes:
    """What an event of the hand adds to `seat`'s SeatView, as wire bytes: the event, and a seña from another
    seat also in `senas_received`. `data` is the event's serialized bytes."""
    entries = _VIEW_EVENT_KEY + _varint(len(data)) + data
    if event.WhichOneof("payload") == "sena_delivered" and event.sena_delivered.sender != seat:
        sena = event.sena_delivered.SerializeToString()
        entries += _VIEW_SENA_KEY + _varint(len(sena)) + sena
    return entries


def _game_result(result: GameResult) -> pb.GameResult:
    return pb.GameResult(
        vaca_number=result.vaca - 1,
        game_number=result.game - 1,
        winner_team=team_to_proto(result.winner),
        score_team_0=result.score[0],
        score_team_1=result.score[1],
        termination=pb.GameTermination.Value(f"GAME_TERMINATION_{result.termination.name}"),
        hand_number=result.hand_number,
    )


def _vaca_result(result: VacaResult) -> pb.VacaResult:
    return pb.VacaResult(
        vaca_number=result.vaca - 1,
        winner_team=team_to_proto(result.winner),
        games_team_0=result.games[0],
        games_team_1=result.games[1],
    )


def outcome_to_proto(
    outcome: MatchOutcome, faults: Sequence[pb.Fault] = (), incidents: Sequence[pb.Incident] = ()
) -> pb.Outcome:
    """The match result; `faults` are the rules' faults of the match (`match_faults`), `incidents` the table's."""
    return pb.Outcome(
        winner_team=team_to_proto(outcome.winner),
        termination=pb.MatchTermination.Value(f"MATCH_TERMINATION_{outcome.termination.name}"),
        games=[_game_result(game) for game in outcome.games],
        vacas=[_vaca_result(vaca) for vaca in outcome.vaca_results],
        vacas_team_0=outcome.vacas[0],
        vacas_team_1=outcome.vacas[1],
        faults=list(faults),
        incidents=list(incidents),
    )
