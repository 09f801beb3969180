"""The SDK side of the wire: `mus.v1` messages to engine values, and engine actions to `mus.v1`.

This is the only SDK module that knows the protobuf shapes (one converter per side). Everything a
bot sees comes out of here in the engine's vocabulary, so a bot behaves the same over gRPC and on the local
table. Wire conventions (types.proto): TEAM_0/TEAM_1 are engine teams 0/1; vaca and game numbers are 0-based
on the wire and 1-based in the engine's events and results; cards carry their physical rank.

Events are decoded by an `EventDecoder`, because a few engine payload fields are not on the wire and follow
from the events before them: the vaca and game numbers of `game_ended`/`vaca_ended`, the mus round of a seña
sent in a lance, and whether a bet is an órdago (rules §8.2: at most one per lance, answered by quiero
or no_quiero only).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from itertools import combinations
from typing import Any, TypeVar

from clients.sdk.errors import ConvertError
from clients.sdk.view import BotView, received_senas
from mus.v1 import play_pb2, types_pb2
from referee.engine.actions import Action, ActionKind
from referee.engine.cards import Card, Suit, format_cards, sort_hand
from referee.engine.errors import MusError
from referee.engine.events import Event, EventKind
from referee.engine.hands import Lance
from referee.engine.match import (
    DecisionKind,
    GameResult,
    GameTermination,
    LanceOutcome,
    MatchOutcome,
    MatchTermination,
    VacaResult,
    partner_of,
    team_of,
)
from referee.engine.rules import Rules, rules_from_assignments
from referee.engine.senas import Sena, SenaRejectionCode

_E = TypeVar("_E", bound=Enum)

# ------------------------------------------------------------------ enums

_SUIT_TO_WIRE: dict[Suit, types_pb2.Suit.ValueType] = {
    Suit.OROS: types_pb2.SUIT_OROS,
    Suit.COPAS: types_pb2.SUIT_COPAS,
    Suit.ESPADAS: types_pb2.SUIT_ESPADAS,
    Suit.BASTOS: types_pb2.SUIT_BASTOS,
}
_SUIT_FROM_WIRE: dict[int, Suit] = {wire: suit for suit, wire in _SUIT_TO_WIRE.items()}

_ACTION_KIND_TO_WIRE: dict[ActionKind, types_pb2.ActionKind.ValueType] = {
    kind: types_pb2.ActionKind.Value(f"ACTION_KIND_{kind.name}") for kind in ActionKind
}
_ACTION_KIND_FROM_WIRE: dict[int, ActionKind] = {wire: kind for kind, wire in _ACTION_KIND_TO_WIRE.items()}

_SENA_TO_WIRE: dict[Sena, types_pb2.Sena.ValueType] = {sena: types_pb2.Sena.Value(f"SENA_{sena.name}") for sena in Sena}
_SENA_FROM_WIRE: dict[int, Sena] = {wire: sena for sena, wire in _SENA_TO_WIRE.items()}

_LANCE_FROM_WIRE: dict[int, Lance] = {types_pb2.Lance.Value(f"LANCE_{lance.name}"): lance for lance in Lance}

_DECISION_FROM_WIRE: dict[int, DecisionKind] = {
    types_pb2.DECISION_KIND_MUS: DecisionKind.MUS,
    types_pb2.DECISION_KIND_DISCARD: DecisionKind.DISCARD,
    types_pb2.DECISION_KIND_DECLARE: DecisionKind.DECLARE,
    types_pb2.DECISION_KIND_BET: DecisionKind.BET,
    types_pb2.DECISION_KIND_SENA_ROUND: DecisionKind.SENAS,
}

_REJECTION_FROM_WIRE: dict[int, SenaRejectionCode] = {
    types_pb2.SENA_REJECTION_REASON_UNKNOWN_SENA: SenaRejectionCode.NOT_IN_VOCABULARY,
    types_pb2.SENA_REJECTION_REASON_FALSE: SenaRejectionCode.FALSE,
    types_pb2.SENA_REJECTION_REASON_OUTSIDE_WINDOW: SenaRejectionCode.OUTSIDE_WINDOW,
    types_pb2.SENA_REJECTION_REASON_OVER_LIMIT: SenaRejectionCode.OVER_LIMIT,
}


# The order in which the engine lists legal actions; a stable sort keeps amounts and discards in order.
_ENGINE_ORDER = {
    kind: index
    for index, kind in enumerate(
        (
            ActionKind.MUS,
            ActionKind.NO_MUS,
            ActionKind.DISCARD,
            ActionKind.DECLARE,
            ActionKind.SENAS,
            ActionKind.PASO,
            ActionKind.QUIERO,
            ActionKind.NO_QUIERO,
            ActionKind.ENVIDO,
            ActionKind.MAS,
            ActionKind.ORDAGO,
        )
    )
}


def _by_name(table: Mapping[int, _E], value: int, what: str) -> _E:
    try:
        return table[value]
    except KeyError:
        raise ConvertError(
            f"{what} {value} is unset or unknown to this SDK (is the SDK older than the referee?)"
        ) from None


def _named(enum_type: Any, prefix: str, value: int, what: str) -> str:
    """The engine's rule name of a wire enum value: `FAULT_CAUSE_TIMEOUT` -> `timeout`."""
    try:
        name = str(enum_type.Name(value))
    except ValueError:
        name = ""
    if not name.startswith(prefix) or name.endswith("_UNSPECIFIED"):
        raise ConvertError(f"{what} {value} is unset or unknown to this SDK")
    return name[len(prefix) :].lower()


def team_from_proto(value: int) -> int | None:
    """TEAM_0 -> 0, TEAM_1 -> 1, TEAM_UNSPECIFIED -> None (a result without a winner)."""
    if value == types_pb2.TEAM_UNSPECIFIED:
        return None
    if value == types_pb2.TEAM_0:
        return 0
    if value == types_pb2.TEAM_1:
        return 1
    raise ConvertError(f"team {value} is unknown to this SDK")


def _team(value: int, what: str) -> int:
    team = team_from_proto(value)
    if team is None:
        raise ConvertError(f"{what} has no team")
    return team


def lance_from_proto(value: int) -> Lance | None:
    """A wire lance; LANCE_UNSPECIFIED (the mus phase) is None."""
    if value == types_pb2.LANCE_UNSPECIFIED:
        return None
    return _by_name(_LANCE_FROM_WIRE, value, "lance")


def _lance(value: int) -> Lance:
    lance = lance_from_proto(value)
    if lance is None:
        raise ConvertError("the event names no lance")
    return lance


def sena_from_proto(value: int) -> Sena:
    """A wire seña id; SENA_UNSPECIFIED or an id this SDK does not know is a `ConvertError`."""
    return _by_name(_SENA_FROM_WIRE, value, "seña")


def sena_to_proto(sena: Sena) -> types_pb2.Sena.ValueType:
    """The wire id of a seña."""
    return _SENA_TO_WIRE[sena]


def decision_kind_from_proto(value: int) -> DecisionKind:
    """A wire decision kind; DECISION_KIND_SENA_ROUND is the engine's `SENAS`."""
    return _by_name(_DECISION_FROM_WIRE, value, "decision kind")


def action_kind_from_proto(value: int) -> ActionKind:
    """A wire action kind; ACTION_KIND_UNSPECIFIED is a `ConvertError`."""
    return _by_name(_ACTION_KIND_FROM_WIRE, value, "action kind")


# ------------------------------------------------------------------ cards, actions, rules


def card_from_proto(card: types_pb2.Card) -> Card:
    """A wire card; an unknown rank or suit is a `ConvertError`."""
    suit = _by_name(_SUIT_FROM_WIRE, card.suit, "suit")
    try:
        return Card(card.rank, suit)
    except MusError as error:
        raise ConvertError(str(error)) from None


def card_to_proto(card: Card) -> types_pb2.Card:
    """A card as the wire carries it: physical rank and suit."""
    return types_pb2.Card(rank=card.rank, suit=_SUIT_TO_WIRE[card.suit])


def _cards(cards: Iterable[types_pb2.Card]) -> tuple[Card, ...]:
    return tuple(card_from_proto(card) for card in cards)


def action_to_proto(action: Action) -> types_pb2.Action:
    """An engine action as the bot sends it; only the fields of its kind are set (types.proto `Action`)."""
    return types_pb2.Action(
        kind=_ACTION_KIND_TO_WIRE[action.kind],
        amount=action.amount,
        cards=[card_to_proto(card) for card in action.cards],
        has_jugada=action.has_jugada,
        senas=[_SENA_TO_WIRE[sena] for sena in action.senas],
    )


def action_from_proto(action: types_pb2.Action) -> Action:
    """A wire action as an engine value; discards are put in the engine's canonical card order."""
    kind = action_kind_from_proto(action.kind)
    senas = tuple(sena_from_proto(sena) for sena in action.senas)
    if kind is ActionKind.DISCARD:
        return Action(kind, cards=sort_hand(_cards(action.cards)))
    return Action(kind, amount=action.amount, cards=_cards(action.cards), has_jugada=action.has_jugada, senas=senas)


def rules_from_proto(rules: Mapping[str, str]) -> Rules:
    """The table's rules from the wire map (values as text, types.proto); validated by the engine."""
    try:
        return rules_from_assignments([f"{key}={value}" for key, value in sorted(rules.items())])
    except MusError as error:
        raise ConvertError(f"the referee's rules are not valid for this SDK: {error}") from None


def legal_actions_from_proto(
    entries: Iterable[types_pb2.LegalAction], cards: Sequence[Card], rules: Rules
) -> tuple[Action, ...]:
    """Expand the referee's compact legal list into concrete engine actions, in the engine's order.

    ENVIDO/MAS: every amount of `min_amount..max_amount`, where a `max_amount` of 0 (no cap) lists up to the
    target score, as the engine does (rules §8.1). DISCARD: every subset of the seat's cards with
    `min_cards..max_cards` cards. DECLARE: the one true answer. SENAS: the empty list, then each acceptable
    seña alone (any list of acceptable señas is legal too). MUS/NO_MUS: the plain calls. The list comes in the
    engine's order (paso, quiero, no_quiero, envido, mas, órdago), so a bot sees the same list as on the local
    table.
    """
    out: list[Action] = []
    for entry in entries:
        kind = action_kind_from_proto(entry.kind)
        if kind in (ActionKind.ENVIDO, ActionKind.MAS):
            low = max(entry.min_amount, 1)
            high = entry.max_amount or max(rules.target_score, rules.min_bet, low)
            out.extend(Action(kind, amount=amount) for amount in range(low, high + 1))
        elif kind is ActionKind.DISCARD:
            hand = sort_hand(cards)
            out.extend(
                Action.discard(chosen)
                for size in range(entry.min_cards, entry.max_cards + 1)
                for chosen in combinations(hand, size)
            )
        elif kind is ActionKind.DECLARE:
            out.append(Action.declare(entry.has_jugada))
        elif kind is ActionKind.SENAS:
            out.append(Action.send_senas(()))
            out.extend(Action.send_senas((sena_from_proto(sena),)) for sena in entry.senas)
        else:
            out.append(Action(kind))
    return tuple(sorted(out, key=lambda action: _ENGINE_ORDER[action.kind]))


def mus_senas_from_proto(entries: Iterable[types_pb2.LegalAction]) -> tuple[Sena, ...]:
    """The señas that may ride on a mus call, from the MUS or NO_MUS entry (rules §12.3 window (a))."""
    for entry in entries:
        if entry.kind in (types_pb2.ACTION_KIND_MUS, types_pb2.ACTION_KIND_NO_MUS) and entry.max_senas > 0:
            return tuple(sena_from_proto(sena) for sena in entry.senas)
    return ()


# ------------------------------------------------------------------ events


class EventDecoder:
    """Decodes one recipient's wire events, in order, into engine `Event` values with the engine's payloads.

    Keep one decoder per stream (or per list of a hand's events): it remembers the current vaca and game, the
    discards of the hand and the lances with an órdago, which the engine's payloads carry and the wire leaves
    to be worked out. `seq` stays the recipient's own numbering; `to` is what the recipient can tell: a private
    event goes to its seat, a seña that did not reach the rivals to the sender and partner (rules §12.3:
    the sender and partner are never told whether it leaked).
    """

    def __init__(self, seat: int, *, vaca: int = 1, game: int = 1) -> None:
        self.seat = seat
        self.vaca = vaca
        self.game = game
        self._discards_counted = 0
        self._ordago_lances: set[Lance] = set()

    def decode(self, message: types_pb2.Event) -> Event:
        """One event; raises `ConvertError` on a payload this SDK does not know."""
        name = message.WhichOneof("payload")
        if name is None:
            raise ConvertError(f"event {message.seq} has no payload")
        kind = EventKind.BET if name == "bet_made" else EventKind(name)
        to: frozenset[int] | None = None
        data: dict[str, Any]
        if kind is EventKind.MATCH_STARTED:
            started = message.match_started
            data = {"first_dealer": started.first_dealer, "rules": rules_from_proto(started.rules).to_options()}
        elif kind is EventKind.GAME_STARTED:
            self.vaca = message.game_started.vaca_number + 1
            self.game = message.game_started.game_number + 1
            data = {"vaca": self.vaca, "game": self.game, "score": [0, 0]}
        elif kind is EventKind.HAND_STARTED:
            hand = message.hand_started
            self._discards_counted = 0
            self._ordago_lances = set()
            data = {"hand": hand.hand_number, "mano": hand.mano, "dealer": hand.dealer}
        elif kind in (EventKind.CARDS_DEALT, EventKind.CARDS_DISCARDED, EventKind.CARDS_REPLACED):
            private = getattr(message, name)
            to = frozenset({private.seat})
            data = {"seat": private.seat, "cards": format_cards(_cards(private.cards))}
        elif kind is EventKind.MUS_CALLED:
            data = {"seat": message.mus_called.seat, "mus": message.mus_called.mus}
        elif kind is EventKind.DISCARD_COUNTED:
            self._discards_counted += 1
            data = {"seat": message.discard_counted.seat, "count": message.discard_counted.count}
        elif kind is EventKind.STOCK_RESHUFFLED:
            data = {}
        elif kind is EventKind.MUS_CUT:
            cut = message.mus_cut
            reason = _named(types_pb2.MusCutReason, "MUS_CUT_REASON_", cut.reason, "mus cut reason")
            data = {"reason": reason, "seat": cut.seat if cut.HasField("seat") else None}
        elif kind is EventKind.LANCE_STARTED:
            data = {"lance": _lance(message.lance_started.lance).value}
        elif kind is EventKind.DECLARED:
            declared = message.declared
            data = {"lance": _lance(declared.lance).value, "seat": declared.seat, "has": declared.has_jugada}
        elif kind is EventKind.SENA_DELIVERED:
            data, to = self._sena_delivered(message.sena_delivered)
        elif kind is EventKind.SENA_REJECTED:
            to = frozenset({self.seat})
            data = {
                "seat": self.seat,
                "senas": [
                    {
                        # A seña outside the vocabulary comes back as the number that was sent: label it `#<number>`.
                        "sena": sena_from_proto(rejected.sena).value
                        if rejected.sena in _SENA_FROM_WIRE
                        else f"#{rejected.sena}",
                        "code": _by_name(_REJECTION_FROM_WIRE, rejected.reason, "seña rejection reason").value,
                        "reason": rejected.detail,
                    }
                    for rejected in message.sena_rejected.senas
                ],
            }
        elif kind is EventKind.BET:
            data = self._bet(message.bet_made)
        elif kind is EventKind.LANCE_CLOSED:
            data = self._lance_closed(message.lance_closed)
        elif kind is EventKind.POINTS_SCORED:
            scored = message.points_scored
            lance = lance_from_proto(scored.lance)
            data = {
                "team": _team(scored.team, "points_scored"),
                "points": scored.points,
                "lance": lance.value if lance is not None else None,
                "reason": _named(types_pb2.ScoreReason, "SCORE_REASON_", scored.reason, "score reason"),
                "score": [scored.score_team_0, scored.score_team_1],
            }
        elif kind is EventKind.HANDS_SHOWN:
            hands = sorted(message.hands_shown.hands, key=lambda shown: shown.seat)
            data = {"hands": [format_cards(_cards(shown.cards)) for shown in hands]}
        elif kind is EventKind.LANCE_DECIDED:
            decided = message.lance_decided
            seat = decided.winner_seat
            data = {"lance": _lance(decided.lance).value, "seat": seat, "team": team_of(seat)}
        elif kind is EventKind.HAND_ENDED:
            data = {"hand": message.hand_ended.hand_number}
        elif kind is EventKind.GAME_ENDED:
            ended = message.game_ended
            termination = _named(types_pb2.GameTermination, "GAME_TERMINATION_", ended.termination, "termination")
            data = {
                "vaca": self.vaca,
                "game": self.game,
                "winner": team_from_proto(ended.winner_team),
                "score": [ended.score_team_0, ended.score_team_1],
                "termination": termination,
                "hand": ended.hand_number,
            }
        elif kind is EventKind.VACA_ENDED:
            vaca = message.vaca_ended
            data = {
                "vaca": self.vaca,
                "winner": team_from_proto(vaca.winner_team),
                "games": [vaca.games_team_0, vaca.games_team_1],
            }
        elif kind is EventKind.MATCH_ENDED:
            ended_match = message.match_ended
            termination = _named(
                types_pb2.MatchTermination, "MATCH_TERMINATION_", ended_match.termination, "match termination"
            )
            data = {
                "winner": _team(ended_match.winner_team, "match_ended"),
                "termination": termination,
                "vacas": [ended_match.vacas_team_0, ended_match.vacas_team_1],
            }
        elif kind is EventKind.FAULT:
            fault = message.fault
            data = {
                "seat": fault.seat,
                "cause": _named(types_pb2.FaultCause, "FAULT_CAUSE_", fault.cause, "fault cause"),
                "team": team_of(fault.seat),
                "faults": fault.team_faults,
            }
        else:
            assert kind is EventKind.FORFEIT
            data = {"team": _team(message.forfeit.losing_team, "forfeit")}
        return Event(message.seq, kind, data, to)

    def _sena_delivered(self, sena: types_pb2.SenaDelivered) -> tuple[dict[str, Any], frozenset[int] | None]:
        lance = lance_from_proto(sena.lance)
        # The engine records the hand's discard count with every seña; the wire only for mus-call señas.
        mus_round = sena.mus_round if lance is None else self._discards_counted // 4
        data = {
            "seat": sena.sender,
            "sena": sena_from_proto(sena.sena).value,
            "phase": "mus" if lance is None else lance.value,
            "mus_round": mus_round,
        }
        to = None if sena.leaked else frozenset({sena.sender, partner_of(sena.sender)})
        return data, to

    def _bet(self, bet: types_pb2.BetMade) -> dict[str, Any]:
        """The engine's bet payload. While an órdago stands the engine keeps the stake accepted before it as
        both `accepted` and `pending` (None when the órdago opened the lance); the wire sends pending 0."""
        lance = _lance(bet.lance)
        kind = action_kind_from_proto(bet.kind)
        if kind is ActionKind.ORDAGO:
            self._ordago_lances.add(lance)
        ordago = lance in self._ordago_lances
        accepted = bet.accepted_total
        if ordago:
            pending: int | None = accepted or None
        else:
            pending = bet.pending_total or None
        return {
            "lance": lance.value,
            "seat": bet.seat,
            "action": kind.value,
            "amount": bet.amount,
            "pending": pending,
            "accepted": accepted,
            "ordago": ordago,
        }

    @staticmethod
    def _lance_closed(closed: types_pb2.LanceClosed) -> dict[str, Any]:
        """The engine's payload: `stake` only for an accepted bet (the wire also names the deje paid, which stays in
        points_scored), `winner_team` after a refusal and for the one holding team of a lance without betting."""
        outcome = LanceOutcome(_named(types_pb2.LanceOutcome, "LANCE_OUTCOME_", closed.outcome, "lance outcome"))
        return {
            "lance": _lance(closed.lance).value,
            "outcome": outcome.value,
            "stake": closed.stake if outcome is LanceOutcome.ACCEPTED else 0,
            "winner_team": team_from_proto(closed.winner_team)
            if outcome in (LanceOutcome.REJECTED, LanceOutcome.NO_BETTING)
            else None,
        }


def events_from_proto(
    messages: Iterable[types_pb2.Event], seat: int, *, vaca: int = 1, game: int = 1
) -> tuple[Event, ...]:
    """A run of one recipient's events, decoded in order with one `EventDecoder`."""
    decoder = EventDecoder(seat, vaca=vaca, game=game)
    return tuple(decoder.decode(message) for message in messages)


# ------------------------------------------------------------------ views and outcomes


def view_from_request(
    request: play_pb2.DecisionRequest,
    rules: Rules,
    *,
    rejection: str | None = None,
    legal: Iterable[types_pb2.LegalAction] | None = None,
    decision_time_left_ms: int | None = None,
    bank_time_left_ms: int | None = None,
) -> BotView:
    """The `BotView` of a decision request, with the table's rules from `Joined`.

    On a retry after `ActionRejected`, pass its reason, legal actions and time left: they replace the
    request's.
    """
    view = request.view
    vaca, game = view.vaca_number + 1, view.game_number + 1
    events = events_from_proto(view.events_this_hand, view.seat, vaca=vaca, game=game)
    cards = _cards(view.cards)
    entries = list(request.legal_actions if legal is None else legal)
    decision_ms = request.decision_time_left_ms if decision_time_left_ms is None else decision_time_left_ms
    bank_ms = request.bank_time_left_ms if bank_time_left_ms is None else bank_time_left_ms
    return BotView(
        seat=view.seat,
        mano=view.mano,
        dealer=view.dealer,
        hand_number=view.hand_number,
        vaca=vaca,
        game=game,
        score=(view.score_team_0, view.score_team_1),
        games=(view.games_team_0, view.games_team_1),
        vacas=(view.vacas_team_0, view.vacas_team_1),
        faults=(view.faults_team_0, view.faults_team_1),
        cards=cards,
        lance=lance_from_proto(view.lance),
        decision=decision_kind_from_proto(request.kind),
        legal_actions=legal_actions_from_proto(entries, cards, rules),
        hand_events=events,
        senas_received=received_senas(events, view.seat),
        discard_rounds=view.discard_rounds,
        accepted_total=view.accepted_total,
        pending_total=0 if view.ordago_pending else view.pending_total,
        ordago_pending=view.ordago_pending,
        decision_time_left_s=decision_ms / 1000,
        bank_time_left_s=bank_ms / 1000,
        rules=rules,
        mus_senas=mus_senas_from_proto(entries),
        rejection=rejection,
    )


def outcome_from_proto(outcome: types_pb2.Outcome) -> MatchOutcome:
    """The engine's `MatchOutcome` of a wire `Outcome`.

    Numbers become 1-based. A vaca cut short by a forfeit is kept, as the engine keeps it: a `VacaResult` whose
    winner is None, with the games won in it before the forfeit. The faults become counts per team.
    """
    games = tuple(
        GameResult(
            vaca=game.vaca_number + 1,
            game=game.game_number + 1,
            winner=team_from_proto(game.winner_team),
            score=(game.score_team_0, game.score_team_1),
            termination=GameTermination(
                _named(types_pb2.GameTermination, "GAME_TERMINATION_", game.termination, "game termination")
            ),
            hand_number=game.hand_number,
        )
        for game in outcome.games
    )
    vacas = [
        VacaResult(vaca.vaca_number + 1, team_from_proto(vaca.winner_team), (vaca.games_team_0, vaca.games_team_1))
        for vaca in outcome.vacas
    ]
    faults = [0, 0]
    for fault in outcome.faults:
        faults[team_of(fault.seat)] += 1
    termination = _named(types_pb2.MatchTermination, "MATCH_TERMINATION_", outcome.termination, "match termination")
    return MatchOutcome(
        winner=_team(outcome.winner_team, "the outcome"),
        termination=MatchTermination(termination),
        vacas=(outcome.vacas_team_0, outcome.vacas_team_1),
        games=games,
        vaca_results=tuple(vacas),
        faults=(faults[0], faults[1]),
    )
