"""The one mapping between engine values and `mus.v1` messages, both ways: the referee and the SDK import it.

Wire conventions (proto/mus/v1/types.proto): teams are TEAM_0/TEAM_1 (engine teams 0/1); every number counts
from 0, as in the engine (vacas, games within their vaca, hands over the match, mus rounds); rules options
travel as strings (JSON text for numbers, booleans and null; plain text for names); cards carry their
physical rank. What a bot needs travels with the message (the mus round of a seña, the vaca and game of a
game's or vaca's end, whether an órdago stands after a bet), so no edge works a rule out on its own.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, TypeVar, assert_never

from google.protobuf.message import Message

from mus.v1 import play_pb2
from mus.v1 import types_pb2 as pb
from referee.causes import CAUSE_TO_PROTO
from referee.engine.actions import Action, ActionKind
from referee.engine.cards import Card, Suit, sort_hand
from referee.engine.enums import Enum
from referee.engine.errors import MalformedError, MusError
from referee.engine.events import (
    Bet,
    CardsDealt,
    CardsDiscarded,
    CardsReplaced,
    Declared,
    DiscardCounted,
    Event,
    Fault,
    Forfeit,
    GameEnded,
    GameStarted,
    HandEnded,
    HandsShown,
    HandStarted,
    LanceClosed,
    LanceDecided,
    LanceStarted,
    MatchEnded,
    MatchStarted,
    MusCalled,
    MusCut,
    Payload,
    PointsScored,
    RejectedSena,
    SenaDelivered,
    SenaRejected,
    StockReshuffled,
    VacaEnded,
)
from referee.engine.hands import Lance
from referee.engine.legal import KIND_ORDER, LegalAction, LegalActions, listed_bet_max
from referee.engine.match import DecisionKind, Match
from referee.engine.outcome import (
    FaultCause,
    GameResult,
    GameTermination,
    LanceOutcome,
    MatchOutcome,
    MatchTermination,
    MusCutReason,
    ScoreReason,
    VacaResult,
)
from referee.engine.rules import Rules, rules_from_assignments
from referee.engine.seats import partner_of, team_of
from referee.engine.senas import Sena, SenaRejectionCode
from referee.engine.views import SeatView, Standing, view_betting, view_standing


class WireError(MalformedError):
    """A message cannot be read as an engine value: an unset or unknown enum, a card outside the deck."""


_E = TypeVar("_E", bound=Enum)


def _named(engine: type[_E], wire: Any, prefix: str) -> dict[_E, Any]:
    """An engine enum's wire values, matched by name (`Lance.GRANDE` <-> `LANCE_GRANDE`)."""
    return {member: wire.Value(f"{prefix}{member.name}") for member in engine}


_SUIT_TO_PB = _named(Suit, pb.Suit, "SUIT_")
_KIND_TO_PB = _named(ActionKind, pb.ActionKind, "ACTION_KIND_")
_SENA_TO_PB = _named(Sena, pb.Sena, "SENA_")
_LANCE_TO_PB = _named(Lance, pb.Lance, "LANCE_")
_LANCE_OUTCOME_TO_PB = _named(LanceOutcome, pb.LanceOutcome, "LANCE_OUTCOME_")
_GAME_TERMINATION_TO_PB = _named(GameTermination, pb.GameTermination, "GAME_TERMINATION_")
_MATCH_TERMINATION_TO_PB = _named(MatchTermination, pb.MatchTermination, "MATCH_TERMINATION_")
_MUS_CUT_TO_PB = _named(MusCutReason, pb.MusCutReason, "MUS_CUT_REASON_")
_SCORE_REASON_TO_PB = _named(ScoreReason, pb.ScoreReason, "SCORE_REASON_")
_FAULT_CAUSE_TO_PB = {cause: CAUSE_TO_PROTO[cause] for cause in FaultCause}
_DECISION_TO_PB = {
    DecisionKind.MUS: pb.DECISION_KIND_MUS,
    DecisionKind.DISCARD: pb.DECISION_KIND_DISCARD,
    DecisionKind.DECLARE: pb.DECISION_KIND_DECLARE,
    DecisionKind.BET: pb.DECISION_KIND_BET,
    DecisionKind.SENAS: pb.DECISION_KIND_SENA_ROUND,
}
_SENA_REJECTION_TO_PB = {
    SenaRejectionCode.NOT_IN_VOCABULARY: pb.SENA_REJECTION_REASON_UNKNOWN_SENA,
    SenaRejectionCode.FALSE: pb.SENA_REJECTION_REASON_FALSE,
    SenaRejectionCode.OUTSIDE_WINDOW: pb.SENA_REJECTION_REASON_OUTSIDE_WINDOW,
    SenaRejectionCode.OVER_LIMIT: pb.SENA_REJECTION_REASON_OVER_LIMIT,
}
_TEAM_TO_PB = {0: pb.TEAM_0, 1: pb.TEAM_1}


def _reverse(table: Mapping[_E, Any]) -> dict[int, _E]:
    return {wire: member for member, wire in table.items()}


_SUIT_FROM_PB = _reverse(_SUIT_TO_PB)
_KIND_FROM_PB = _reverse(_KIND_TO_PB)
_SENA_FROM_PB = _reverse(_SENA_TO_PB)
_LANCE_FROM_PB = _reverse(_LANCE_TO_PB)
_LANCE_OUTCOME_FROM_PB = _reverse(_LANCE_OUTCOME_TO_PB)
_GAME_TERMINATION_FROM_PB = _reverse(_GAME_TERMINATION_TO_PB)
_MATCH_TERMINATION_FROM_PB = _reverse(_MATCH_TERMINATION_TO_PB)
_MUS_CUT_FROM_PB = _reverse(_MUS_CUT_TO_PB)
_SCORE_REASON_FROM_PB = _reverse(_SCORE_REASON_TO_PB)
_FAULT_CAUSE_FROM_PB = _reverse(_FAULT_CAUSE_TO_PB)
_DECISION_FROM_PB = _reverse(_DECISION_TO_PB)
_SENA_REJECTION_FROM_PB = _reverse(_SENA_REJECTION_TO_PB)


def _read(table: Mapping[int, _E], value: int, what: str, *, unset: str = "") -> _E:
    """`table[value]`, else a `WireError`: an unset value (0) is named apart from an unknown one, with `unset`'s
    explanation when given (an unset value is no sign of an older program)."""
    try:
        return table[value]
    except KeyError:
        if value == 0:
            raise WireError(f"{what} is unset{unset}") from None
        raise WireError(f"{what} {value} is unknown (is this program older than the referee?)") from None


# ------------------------------------------------------------------ small values


def team_to_proto(team: int | None) -> pb.Team.ValueType:
    """Team 0 or 1; None (no winner) is TEAM_UNSPECIFIED."""
    return _TEAM_TO_PB[team] if team is not None else pb.TEAM_UNSPECIFIED


def team_from_proto(value: int) -> int | None:
    """TEAM_0 -> 0, TEAM_1 -> 1, TEAM_UNSPECIFIED -> None (a result without a winner)."""
    if value == pb.TEAM_UNSPECIFIED:
        return None
    if value == pb.TEAM_0:
        return 0
    if value == pb.TEAM_1:
        return 1
    raise WireError(f"team {value} is unknown")


def _team(value: int, what: str) -> int:
    team = team_from_proto(value)
    if team is None:
        raise WireError(f"{what} names no team")
    return team


def lance_to_proto(lance: Lance | None) -> pb.Lance.ValueType:
    """A lance; None (the mus phase) is LANCE_UNSPECIFIED."""
    return _LANCE_TO_PB[lance] if lance is not None else pb.LANCE_UNSPECIFIED


def lance_from_proto(value: int) -> Lance | None:
    """A wire lance; LANCE_UNSPECIFIED (the mus phase) is None."""
    return None if value == pb.LANCE_UNSPECIFIED else _read(_LANCE_FROM_PB, value, "lance")


def _lance(value: int) -> Lance:
    lance = lance_from_proto(value)
    if lance is None:
        raise WireError("the event names no lance")
    return lance


def decision_to_proto(kind: DecisionKind) -> pb.DecisionKind.ValueType:
    return _DECISION_TO_PB[kind]


def decision_from_proto(value: int) -> DecisionKind:
    """A wire decision kind; DECISION_KIND_SENA_ROUND is the engine's `SENAS`."""
    return _read(_DECISION_FROM_PB, value, "decision kind")


def action_kind_from_proto(value: int) -> ActionKind:
    return _read(_KIND_FROM_PB, value, "action kind")


def sena_to_proto(sena: Sena) -> pb.Sena.ValueType:
    return pb.Sena.ValueType(_SENA_TO_PB[sena])


def sena_from_proto(value: int) -> Sena:
    """A wire seña id; SENA_UNSPECIFIED or an id outside the vocabulary is a `WireError`."""
    return _read(_SENA_FROM_PB, value, "seña")


def card_to_proto(card: Card) -> pb.Card:
    """A card as the wire carries it: physical rank and suit."""
    return pb.Card(rank=card.rank, suit=_SUIT_TO_PB[card.suit])


@lru_cache(maxsize=1 << 14)
def _cards_to_proto(cards: tuple[Card, ...]) -> tuple[pb.Card, ...]:
    """Built once per hand of cards; a repeated field copies them in."""
    return tuple(card_to_proto(card) for card in cards)


def card_from_proto(message: pb.Card) -> Card:
    """A wire card; an unknown rank or suit is a `WireError`."""
    suit = _read(_SUIT_FROM_PB, message.suit, "suit")
    try:
        return Card(message.rank, suit)
    except MusError as error:
        raise WireError(str(error)) from None


def cards_from_proto(messages: Iterable[pb.Card]) -> tuple[Card, ...]:
    return tuple(card_from_proto(card) for card in messages)


# ------------------------------------------------------------------ actions and legal actions


def action_to_proto(action: Action) -> pb.Action:
    """An engine action as a bot sends it; only the fields of its kind are set (types.proto `Action`)."""
    return pb.Action(
        kind=_KIND_TO_PB[action.kind],
        amount=action.amount,
        cards=_cards_to_proto(action.cards),
        has_jugada=action.has_jugada,
        senas=[_SENA_TO_PB[sena] for sena in action.senas],
    )


NO_ACTION = (
    ": the Act carries no action (an SDK, or the stdio bridge, sends none when its bot could not choose or give one:"
    " the seat's log says why)"
)
"""Why an Act's action kind is unset: what the referee's rejection says to the bot and in the fault's detail."""


def action_from_proto(message: pb.Action) -> Action:
    """The engine action a bot sent, every field as sent, or `WireError` naming what cannot be read.

    Whether the fields fit the kind (an amount only on a bet, cards only on a discard) is the engine's call
    (`Action.malformed`), so a bot gets the same answer over the wire as in local play. A seña outside the
    vocabulary does not make the action unreadable: it is left out here and rejected on its own
    (`unknown_senas`, rules §12.3 item 4). A discard's cards are put in the engine's order.
    """
    kind = _read(_KIND_FROM_PB, message.kind, "action kind", unset=NO_ACTION)
    senas = tuple(_SENA_FROM_PB[value] for value in message.senas if value in _SENA_FROM_PB)
    cards = cards_from_proto(message.cards)
    if kind is ActionKind.DISCARD:
        cards = sort_hand(cards)
    return Action(kind, amount=message.amount, cards=cards, has_jugada=message.has_jugada, senas=senas)


def unknown_senas(message: pb.Action) -> list[str]:
    """The señas of a bot's action that are not in the vocabulary, as labels (`#99`), in order."""
    return [f"#{value}" for value in message.senas if value not in _SENA_FROM_PB]


def legal_to_proto(legal: LegalActions) -> list[pb.LegalAction]:
    """One entry per legal kind, with its ranges, in the order of the wire's `ActionKind`; an uncapped bet's
    `max_amount` is 0."""
    entries = [
        pb.LegalAction(
            kind=_KIND_TO_PB[entry.kind],
            min_amount=entry.min_amount,
            max_amount=entry.max_amount if entry.capped else 0,
            min_cards=entry.min_cards,
            max_cards=entry.max_cards,
            has_jugada=entry.has_jugada,
            max_senas=entry.max_senas,
            senas=[_SENA_TO_PB[sena] for sena in entry.senas],
        )
        for entry in legal.entries
    ]
    entries.sort(key=lambda entry: entry.kind)
    return entries


@lru_cache(maxsize=1 << 12)
def request_legal_bytes(legal: LegalActions) -> bytes:
    """`legal_to_proto` as the wire bytes of `DecisionRequest.legal_actions`, built once per legal set: the
    referee merges them into each request instead of copying messages in (see `view_entries`)."""
    key = _entry_key(play_pb2.DecisionRequest, "legal_actions")
    entries = [entry.SerializeToString() for entry in legal_to_proto(legal)]
    return b"".join(key + _varint(len(data)) + data for data in entries)


def legal_from_proto(entries: Iterable[pb.LegalAction], cards: tuple[Card, ...], rules: Rules) -> LegalActions:
    """The referee's legal entries as the engine's value, for a seat holding `cards` under `rules` (an uncapped
    bet is listed up to `listed_bet_max`, as the engine lists it)."""
    out: list[LegalAction] = []
    for entry in entries:
        kind = action_kind_from_proto(entry.kind)
        capped = entry.max_amount != 0
        high = entry.max_amount if capped else listed_bet_max(rules, entry.min_amount)
        is_bet = kind is ActionKind.ENVIDO or kind is ActionKind.MAS
        out.append(
            LegalAction(
                kind,
                min_amount=entry.min_amount,
                max_amount=high if is_bet else 0,
                capped=capped or not is_bet,
                min_cards=entry.min_cards,
                max_cards=entry.max_cards,
                has_jugada=entry.has_jugada,
                senas=tuple(sena_from_proto(sena) for sena in entry.senas),
                max_senas=entry.max_senas,
            )
        )
    out.sort(key=lambda legal: KIND_ORDER[legal.kind])
    has_discard = any(legal.kind is ActionKind.DISCARD for legal in out)
    return LegalActions(tuple(out), cards if has_discard else ())


# ------------------------------------------------------------------ rules


def rules_to_map(rules: Rules) -> dict[str, str]:
    """Every option as wire text: names as they are, other values as JSON."""
    return dict(_rules_items(rules))


@functools.lru_cache(maxsize=64)
def _rules_items(rules: Rules) -> tuple[tuple[str, str], ...]:
    """`rules_to_map`'s entries, made once per rules (a table sends them in every Joined and its MatchStarted)."""
    options = rules.to_options().items()
    return tuple((key, value if isinstance(value, str) else json.dumps(value)) for key, value in options)


def rules_from_map(options: Mapping[str, str]) -> Rules:
    """Rules from wire text; raises `RulesError` naming a bad option."""
    return _rules_from_items(tuple(sorted(options.items())))


@functools.lru_cache(maxsize=64)
def _rules_from_items(items: tuple[tuple[str, str], ...]) -> Rules:
    """`rules_from_map`'s rules, made once per options (a worker creates every table of a league with the same)."""
    return rules_from_assignments([f"{key}={text}" for key, text in items])


# ------------------------------------------------------------------ events


def event_to_proto(event: Event, seq: int, recipient: int | None, *, bot_names: Sequence[str] = ()) -> pb.Event:
    """One engine event as the wire sees it. `recipient` is the seat it is sent to (None: a spectator or the
    omniscient replay), which decides only the `leaked` flag of a seña. `bot_names` are the table's four names, by
    seat, for `MatchStarted` (the engine plays seats, not bots)."""
    payload = event.payload
    message = pb.Event(seq=seq)
    match payload:
        case MatchStarted():
            message.match_started.first_dealer = payload.first_dealer
            message.match_started.rules.update(rules_to_map(payload.rules))
            message.match_started.bot_names.extend(bot_names)
        case GameStarted():
            started = message.game_started
            started.vaca_number, started.game_number = payload.vaca, payload.game
            started.score_team_0, started.score_team_1 = payload.score
        case HandStarted():
            message.hand_started.hand_number = payload.hand
            message.hand_started.mano = payload.mano
            message.hand_started.dealer = payload.dealer
        case CardsDealt():
            message.cards_dealt.seat = payload.seat
            message.cards_dealt.cards.extend(_cards_to_proto(payload.cards))
        case MusCalled():
            message.mus_called.seat = payload.seat
            message.mus_called.mus = payload.mus
        case DiscardCounted():
            message.discard_counted.seat = payload.seat
            message.discard_counted.count = payload.count
        case CardsDiscarded():
            message.cards_discarded.seat = payload.seat
            message.cards_discarded.cards.extend(_cards_to_proto(payload.cards))
        case CardsReplaced():
            message.cards_replaced.seat = payload.seat
            message.cards_replaced.cards.extend(_cards_to_proto(payload.cards))
        case StockReshuffled():
            message.stock_reshuffled.SetInParent()
        case MusCut():
            message.mus_cut.reason = _MUS_CUT_TO_PB[payload.reason]
            if payload.seat is not None:
                message.mus_cut.seat = payload.seat
        case LanceStarted():
            message.lance_started.lance = _LANCE_TO_PB[payload.lance]
        case Declared():
            message.declared.lance = _LANCE_TO_PB[payload.lance]
            message.declared.seat = payload.seat
            message.declared.has_jugada = payload.has
        case SenaDelivered():
            message.sena_delivered.CopyFrom(_sena_delivered(payload, _leaked(event, recipient)))
        case SenaRejected():
            for item in payload.senas:
                rejected = message.sena_rejected.senas.add()
                # An unknown seña is echoed back as the number the bot sent (its label is `#<number>`).
                label = item.sena
                rejected.sena = _SENA_TO_PB[label] if isinstance(label, Sena) else int(label[1:])  # type: ignore[assignment]
                rejected.reason = _SENA_REJECTION_TO_PB[item.code]
                rejected.detail = item.reason
        case Bet():
            bet = message.bet_made
            bet.lance = _LANCE_TO_PB[payload.lance]
            bet.seat = payload.seat
            bet.kind = _KIND_TO_PB[payload.action]
            bet.amount = payload.amount
            bet.pending_total = 0 if payload.ordago else payload.pending or 0
            bet.accepted_total = payload.accepted
            bet.ordago = payload.ordago
        case LanceClosed():
            closed = message.lance_closed
            closed.lance = _LANCE_TO_PB[payload.lance]
            closed.outcome = _LANCE_OUTCOME_TO_PB[payload.outcome]
            closed.stake = payload.stake
            closed.winner_team = team_to_proto(payload.winner_team)
        case PointsScored():
            points = message.points_scored
            points.team = _TEAM_TO_PB[payload.team]
            points.points = payload.points
            points.lance = lance_to_proto(payload.lance)
            points.reason = _SCORE_REASON_TO_PB[payload.reason]
            points.score_team_0, points.score_team_1 = payload.score
        case HandsShown():
            for seat, cards in enumerate(payload.hands):
                message.hands_shown.hands.add(seat=seat, cards=_cards_to_proto(cards))
        case LanceDecided():
            message.lance_decided.lance = _LANCE_TO_PB[payload.lance]
            message.lance_decided.winner_seat = payload.seat
        case HandEnded():
            message.hand_ended.hand_number = payload.hand
        case GameEnded():
            ended = message.game_ended
            ended.winner_team = team_to_proto(payload.winner)
            ended.score_team_0, ended.score_team_1 = payload.score
            ended.termination = _GAME_TERMINATION_TO_PB[payload.termination]
            ended.hand_number = payload.hand
            ended.vaca_number, ended.game_number = payload.vaca, payload.game
        case VacaEnded():
            vaca = message.vaca_ended
            vaca.winner_team = team_to_proto(payload.winner)
            vaca.games_team_0, vaca.games_team_1 = payload.games
            vaca.vaca_number = payload.vaca
        case MatchEnded():
            ended_match = message.match_ended
            ended_match.winner_team = _TEAM_TO_PB[payload.winner]
            ended_match.vacas_team_0, ended_match.vacas_team_1 = payload.vacas
            ended_match.termination = _MATCH_TERMINATION_TO_PB[payload.termination]
        case Fault():
            message.fault.seat = payload.seat
            message.fault.cause = _FAULT_CAUSE_TO_PB[payload.cause]
            message.fault.team_faults = payload.faults
        case Forfeit():
            message.forfeit.losing_team = _TEAM_TO_PB[payload.team]
        case _:  # pragma: no cover - every kind is handled above
            assert_never(payload)
    return message


def _leaked(event: Event, recipient: int | None) -> bool:
    """A delivered seña's `leaked` flag as `recipient` (None: a spectator) is told it: never to the sender's team
    (rules §12.3 item 5)."""
    assert isinstance(event.payload, SenaDelivered)
    opponent = recipient is not None and team_of(recipient) != team_of(event.payload.seat)
    return event.to is None and (recipient is None or opponent)


def _sena_delivered(payload: SenaDelivered, leaked: bool) -> pb.SenaDelivered:
    return pb.SenaDelivered(
        sender=payload.seat,
        sena=_SENA_TO_PB[payload.sena],
        lance=lance_to_proto(payload.lance),
        mus_round=payload.mus_round,
        leaked=leaked,
    )


@lru_cache(maxsize=1 << 10)
def _sena_bytes(payload: SenaDelivered, leaked: bool) -> tuple[bytes, bytes]:
    """A delivered seña's event with seq 0 and its SenaDelivered alone (for `senas_received`), as wire bytes."""
    sena = _sena_delivered(payload, leaked)
    return pb.Event(sena_delivered=sena).SerializeToString(), sena.SerializeToString()


def event_from_proto(message: pb.Event, recipient: int) -> Event:
    """One event as `recipient` received it, as the engine's value: `seq` stays the recipient's numbering, `to`
    is what the recipient can tell (a private event is its own; a seña that did not reach the rivals went to
    the sender and partner, who are never told whether it leaked, rules §12.3 item 5)."""
    name = message.WhichOneof("payload")
    to: frozenset[int] | None = None
    payload: Payload
    if name == "match_started":
        payload = MatchStarted(message.match_started.first_dealer, _rules(message.match_started.rules))
    elif name == "game_started":
        started = message.game_started
        score = (started.score_team_0, started.score_team_1)
        payload = GameStarted(started.vaca_number, started.game_number, score)
    elif name == "hand_started":
        hand = message.hand_started
        payload = HandStarted(hand.hand_number, hand.mano, hand.dealer)
    elif name == "cards_dealt":
        to = frozenset({message.cards_dealt.seat})
        payload = CardsDealt(message.cards_dealt.seat, cards_from_proto(message.cards_dealt.cards))
    elif name == "cards_discarded":
        to = frozenset({message.cards_discarded.seat})
        payload = CardsDiscarded(message.cards_discarded.seat, cards_from_proto(message.cards_discarded.cards))
    elif name == "cards_replaced":
        to = frozenset({message.cards_replaced.seat})
        payload = CardsReplaced(message.cards_replaced.seat, cards_from_proto(message.cards_replaced.cards))
    elif name == "mus_called":
        payload = MusCalled(message.mus_called.seat, message.mus_called.mus)
    elif name == "discard_counted":
        payload = DiscardCounted(message.discard_counted.seat, message.discard_counted.count)
    elif name == "stock_reshuffled":
        payload = StockReshuffled()
    elif name == "mus_cut":
        cut = message.mus_cut
        reason = _read(_MUS_CUT_FROM_PB, cut.reason, "mus cut reason")
        payload = MusCut(reason, cut.seat if cut.HasField("seat") else None)
    elif name == "lance_started":
        payload = LanceStarted(_lance(message.lance_started.lance))
    elif name == "declared":
        declared = message.declared
        payload = Declared(_lance(declared.lance), declared.seat, declared.has_jugada)
    elif name == "sena_delivered":
        sena = message.sena_delivered
        payload = SenaDelivered(sena.sender, sena_from_proto(sena.sena), lance_from_proto(sena.lance), sena.mus_round)
        to = None if sena.leaked else frozenset({sena.sender, partner_of(sena.sender)})
    elif name == "sena_rejected":
        to = frozenset({recipient})
        payload = SenaRejected(recipient, tuple(_rejected_sena(item) for item in message.sena_rejected.senas))
    elif name == "bet_made":
        bet = message.bet_made
        accepted, ordago = bet.accepted_total, bet.ordago
        # While an órdago stands, the engine keeps the stake accepted before it as the pending one.
        pending = (accepted or None) if ordago else (bet.pending_total or None)
        kind = action_kind_from_proto(bet.kind)
        payload = Bet(_lance(bet.lance), bet.seat, kind, bet.amount, pending, accepted, ordago)
    elif name == "lance_closed":
        closed = message.lance_closed
        outcome = _read(_LANCE_OUTCOME_FROM_PB, closed.outcome, "lance outcome")
        payload = LanceClosed(_lance(closed.lance), outcome, closed.stake, team_from_proto(closed.winner_team))
    elif name == "points_scored":
        scored = message.points_scored
        payload = PointsScored(
            _team(scored.team, "points_scored"),
            scored.points,
            lance_from_proto(scored.lance),
            _read(_SCORE_REASON_FROM_PB, scored.reason, "score reason"),
            (scored.score_team_0, scored.score_team_1),
        )
    elif name == "hands_shown":
        hands = sorted(message.hands_shown.hands, key=lambda shown: shown.seat)
        payload = HandsShown(tuple(cards_from_proto(shown.cards) for shown in hands))
    elif name == "lance_decided":
        decided = message.lance_decided
        payload = LanceDecided(_lance(decided.lance), decided.winner_seat, team_of(decided.winner_seat))
    elif name == "hand_ended":
        payload = HandEnded(message.hand_ended.hand_number)
    elif name == "game_ended":
        ended = message.game_ended
        payload = GameEnded(
            ended.vaca_number,
            ended.game_number,
            team_from_proto(ended.winner_team),
            (ended.score_team_0, ended.score_team_1),
            _read(_GAME_TERMINATION_FROM_PB, ended.termination, "game termination"),
            ended.hand_number,
        )
    elif name == "vaca_ended":
        vaca = message.vaca_ended
        games = (vaca.games_team_0, vaca.games_team_1)
        payload = VacaEnded(vaca.vaca_number, team_from_proto(vaca.winner_team), games)
    elif name == "match_ended":
        ended_match = message.match_ended
        payload = MatchEnded(
            _team(ended_match.winner_team, "match_ended"),
            _read(_MATCH_TERMINATION_FROM_PB, ended_match.termination, "match termination"),
            (ended_match.vacas_team_0, ended_match.vacas_team_1),
        )
    elif name == "fault":
        fault = message.fault
        cause = _read(_FAULT_CAUSE_FROM_PB, fault.cause, "fault cause")
        payload = Fault(fault.seat, cause, team_of(fault.seat), fault.team_faults)
    elif name == "forfeit":
        payload = Forfeit(_team(message.forfeit.losing_team, "forfeit"))
    else:
        raise WireError(f"event {message.seq} has no payload this program knows ({name})")
    return Event(message.seq, payload, to)


def _rejected_sena(item: pb.RejectedSena) -> RejectedSena:
    # A seña outside the vocabulary comes back as the number that was sent: label it `#<number>`.
    sena: Sena | str = _SENA_FROM_PB.get(item.sena, f"#{item.sena}")
    return RejectedSena(sena, _read(_SENA_REJECTION_FROM_PB, item.reason, "seña rejection reason"), item.detail)


def _rules(options: Mapping[str, str]) -> Rules:
    try:
        return rules_from_map(options)
    except MusError as error:
        raise WireError(f"the referee's rules cannot be read: {error}") from None


def rules_from_proto(options: Mapping[str, str]) -> Rules:
    """A table's rules from `Joined.rules` or `MatchStarted.rules`; unreadable rules are a `WireError`."""
    return _rules(options)


def events_from_proto(messages: Iterable[pb.Event], recipient: int) -> tuple[Event, ...]:
    return tuple(event_from_proto(message, recipient) for message in messages)


def match_faults(match: Match) -> list[pb.Fault]:
    """Every fault of the match (rules §13: illegal action, timeout, limit), in order, from the engine's events."""
    return [
        pb.Fault(seat=fault.seat, cause=_FAULT_CAUSE_TO_PB[fault.cause], team_faults=fault.faults)
        for event in match.events
        if isinstance(fault := event.payload, Fault)
    ]


# ------------------------------------------------------------------ views


class SeatViewBytes:
    """The views of one match's seats without the events of the hand, as wire bytes, straight from the match (the
    same fields `SeatLog.view` reads: `view_standing`, `view_betting`). The referee adds the events as wire bytes
    too (`view_entries`), in place inside the message that carries the view, to copy none of them.

    Two halves: where the match stands with the seat's cards, serialized again only when they change (once a hand
    or a discard), kept per seat; and the lance's betting, kept by value. Concatenated, they parse as one
    SeatView."""

    def __init__(self) -> None:
        self._standing: list[tuple[Standing | None, bytes]] = [(None, b"")] * 4

    def __call__(self, match: Match, seat: int) -> bytes:
        standing = view_standing(match, seat)
        known, data = self._standing[seat]
        if known != standing:
            data = _view_standing(*standing)
            self._standing[seat] = (standing, data)
        return data + _view_betting(*view_betting(match))


def _view_standing(
    seat: int,
    mano: int,
    dealer: int,
    hand_number: int,
    vaca: int,
    game: int,
    score: tuple[int, int],
    games: tuple[int, int],
    vacas: tuple[int, int],
    faults: tuple[int, int],
    cards: tuple[Card, ...],
) -> bytes:
    return pb.SeatView(
        seat=seat,
        mano=mano,
        dealer=dealer,
        hand_number=hand_number,
        vaca_number=vaca,
        game_number=game,
        score_team_0=score[0],
        score_team_1=score[1],
        games_team_0=games[0],
        games_team_1=games[1],
        vacas_team_0=vacas[0],
        vacas_team_1=vacas[1],
        cards=_cards_to_proto(cards),
        faults_team_0=faults[0],
        faults_team_1=faults[1],
    ).SerializeToString()


@lru_cache(maxsize=1 << 10)
def _view_betting(lance: Lance | None, mus_round: int, accepted: int, pending: int, ordago: bool) -> bytes:
    return pb.SeatView(
        lance=lance_to_proto(lance),
        discard_rounds=mus_round,
        accepted_total=accepted,
        pending_total=pending,
        ordago_pending=ordago,
    ).SerializeToString()


def seat_view_from_proto(
    request: play_pb2.DecisionRequest,
    rules: Rules,
    *,
    legal: Iterable[pb.LegalAction] | None = None,
    hand_events: Sequence[Event] | None = None,
) -> SeatView:
    """The engine's view of a decision request, under the table's rules (from `Joined`). `legal` replaces the
    request's legal actions (after a rejection); `hand_events` its events of the hand (when the seat keeps its
    own, `Join.omit_hand_events`)."""
    view = request.view
    cards = cards_from_proto(view.cards)
    events = events_from_proto(view.events_this_hand, view.seat) if hand_events is None else tuple(hand_events)
    return SeatView(
        seat=view.seat,
        mano=view.mano,
        dealer=view.dealer,
        hand_number=view.hand_number,
        vaca=view.vaca_number,
        game=view.game_number,
        score=(view.score_team_0, view.score_team_1),
        games=(view.games_team_0, view.games_team_1),
        vacas=(view.vacas_team_0, view.vacas_team_1),
        faults=(view.faults_team_0, view.faults_team_1),
        cards=cards,
        lance=lance_from_proto(view.lance),
        mus_round=view.discard_rounds,
        accepted_total=view.accepted_total,
        pending_total=view.pending_total,
        ordago_pending=view.ordago_pending,
        decision=decision_from_proto(request.kind),
        legal=legal_from_proto(request.legal_actions if legal is None else legal, cards, rules),
        hand_events=events,
        is_over=False,
    )


# The referee's responses are put together from wire bytes, not message by message: appending a message to a
# repeated field copies it (about 1-2 µs each with upb), and a message built only to be serialized is serialized
# again by gRPC. The table concatenates entries (an event's, a view's, a request's) and sends the bytes as they
# are; a reader that parses them appends repeated entries in order, whatever fields they interleave.

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


_RESPONSE_EVENT_KEY = _entry_key(play_pb2.PlayResponse, "event")
_RESPONSE_DECISION_KEY = _entry_key(play_pb2.PlayResponse, "decision_request")
_RESPONSE_UPDATE_KEY = _entry_key(play_pb2.PlayResponse, "update")
_UPDATE_DECISION_KEY = _entry_key(play_pb2.Update, "decision_request")
_REQUEST_VIEW_KEY = _entry_key(play_pb2.DecisionRequest, "view")


def decision_request_bytes(request: play_pb2.DecisionRequest, view: bytes, legal: bytes) -> bytes:
    """A DecisionRequest as wire bytes: `request` without its view and legal actions, the view's bytes (one
    field: a message field sent twice is merged by some parsers and replaced by others) and the legal entries
    (`request_legal_bytes`)."""
    return request.SerializeToString() + _REQUEST_VIEW_KEY + _varint(len(view)) + view + legal


def decision_response(request: bytes) -> bytes:
    """A PlayResponse carrying a decision request (`decision_request_bytes`), as wire bytes."""
    return _RESPONSE_DECISION_KEY + _varint(len(request)) + request


def update_decision_entry(request: bytes) -> bytes:
    """A decision request's bytes as the `decision_request` of an Update (beside its `stream_entry` events)."""
    return _UPDATE_DECISION_KEY + _varint(len(request)) + request


def update_response(entries: bytes) -> bytes:
    """A PlayResponse carrying an Update of these entries, as wire bytes."""
    return _RESPONSE_UPDATE_KEY + _varint(len(entries)) + entries


@lru_cache(maxsize=1 << 12)
def _payload_bytes(payload: Payload) -> bytes:
    return event_to_proto(Event(0, payload), 0, None).SerializeToString()


def seen_event_bytes(event: Event, recipient: int | None, bot_names: Sequence[str]) -> bytes:
    """An event's wire bytes with seq 0 (`event_bytes` adds a seq) as `recipient` (None: a spectator) sees it.
    Only a delivered seña's `leaked` flag depends on the recipient. Kept by payload: most events of a match (a
    paso, a lance started, a mus called, a seña) are values every match repeats."""
    payload = event.payload
    if isinstance(payload, SenaDelivered):
        return _sena_bytes(payload, _leaked(event, recipient))[0]
    if isinstance(payload, MatchStarted):  # the bot names are not in the payload
        return event_to_proto(event, 0, None, bot_names=bot_names).SerializeToString()
    return _payload_bytes(payload)


def stream_entry(data: bytes, *, batch: bool) -> bytes:
    """An event's bytes as an entry of a seat's stream: of `Update.events` for a batching seat, else a whole
    PlayResponse."""
    return (_UPDATE_EVENT_KEY if batch else _RESPONSE_EVENT_KEY) + _varint(len(data)) + data


def view_entries(event: Event, data: bytes, seat: int) -> bytes:
    """What an event of the hand adds to `seat`'s SeatView, as wire bytes: the event, and a seña from another
    seat also in `senas_received`. `data` is the event's bytes as `seat` sees it (`seen_event_bytes`, its seq
    added)."""
    entries = _VIEW_EVENT_KEY + _varint(len(data)) + data
    payload = event.payload
    if isinstance(payload, SenaDelivered) and payload.seat != seat:
        sena = _sena_bytes(payload, _leaked(event, seat))[1]
        entries += _VIEW_SENA_KEY + _varint(len(sena)) + sena
    return entries


# ------------------------------------------------------------------ outcomes


def _game_result(result: GameResult) -> pb.GameResult:
    return pb.GameResult(
        vaca_number=result.vaca,
        game_number=result.game,
        winner_team=team_to_proto(result.winner),
        score_team_0=result.score[0],
        score_team_1=result.score[1],
        termination=_GAME_TERMINATION_TO_PB[result.termination],
        hand_number=result.hand_number,
    )


def outcome_to_proto(
    outcome: MatchOutcome, faults: Sequence[pb.Fault] = (), incidents: Sequence[pb.Incident] = ()
) -> pb.Outcome:
    """The match result; `faults` are the rules' faults of the match (`match_faults`), `incidents` the table's."""
    return pb.Outcome(
        winner_team=_TEAM_TO_PB[outcome.winner],
        termination=_MATCH_TERMINATION_TO_PB[outcome.termination],
        games=[_game_result(game) for game in outcome.games],
        vacas=[
            pb.VacaResult(
                vaca_number=vaca.vaca,
                winner_team=team_to_proto(vaca.winner),
                games_team_0=vaca.games[0],
                games_team_1=vaca.games[1],
            )
            for vaca in outcome.vaca_results
        ],
        vacas_team_0=outcome.vacas[0],
        vacas_team_1=outcome.vacas[1],
        faults=list(faults),
        incidents=list(incidents),
    )


def outcome_from_proto(outcome: pb.Outcome) -> MatchOutcome:
    """The engine's `MatchOutcome` of a wire `Outcome`: every game and vaca, the one a forfeit cut short included
    (no winner, the games won in it); the faults become counts per team (incidents count nothing)."""
    games = tuple(
        GameResult(
            vaca=game.vaca_number,
            game=game.game_number,
            winner=team_from_proto(game.winner_team),
            score=(game.score_team_0, game.score_team_1),
            termination=_read(_GAME_TERMINATION_FROM_PB, game.termination, "game termination"),
            hand_number=game.hand_number,
        )
        for game in outcome.games
    )
    vacas = tuple(
        VacaResult(vaca.vaca_number, team_from_proto(vaca.winner_team), (vaca.games_team_0, vaca.games_team_1))
        for vaca in outcome.vacas
    )
    faults = [0, 0]
    for fault in outcome.faults:
        faults[team_of(fault.seat)] += 1
    return MatchOutcome(
        winner=_team(outcome.winner_team, "the outcome"),
        termination=_read(_MATCH_TERMINATION_FROM_PB, outcome.termination, "match termination"),
        vacas=(outcome.vacas_team_0, outcome.vacas_team_1),
        games=games,
        vaca_results=vacas,
        faults=(faults[0], faults[1]),
    )
