"""The match state machine: deal, mus, lances, betting, tanteo, games, vacas, faults (rules §3-§13).

A `Match` is a pure function of its rules, its seed, an optional scripted setup and the steps applied to it.
Seats are absolute (0..3); team 0 is seats 0 and 2, team 1 is seats 1 and 3. Every decision is asked of the
seats in `awaited()`; `apply` takes a legal action, `check` says why one is not legal, `apply_timeout` and
`record_illegal_action` carry out rules §13. Nothing here does I/O or reads a clock.

`Match` keeps the phases; the rules they apply live beside it: seats and teams in `seats`, chance and
dealing in `chance`, discards in `discards`, the betting of a lance in `betting`, the tanteo's counting in
`scoring`, señas in `senas`, results in `outcome`.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from referee.engine.actions import Action, ActionKind, parse_sena
from referee.engine.betting import Betting, LanceResult, aggression, betting_menu, deje_points
from referee.engine.cards import Card, shuffled_deck, sort_hand
from referee.engine.chance import Setup, deal, deal_rng, first_dealer_of, leak_rng
from referee.engine.discards import cards_in_transit, dealing_order, reshuffle_pool, settled_discards
from referee.engine.enums import Enum
from referee.engine.errors import IllegalActionError, MalformedError, MatchOverError
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
from referee.engine.hands import HandFacts, Lance, best_seat, evaluate
from referee.engine.legal import (
    LegalActions,
    Refusal,
    declare_legal,
    discard_legal,
    mus_call_legal,
    senas_legal,
)
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
from referee.engine.rules import (
    Declarations,
    DiscardSubmission,
    IllegalActionPolicy,
    OrdagoResolution,
    ResponseMode,
    Rules,
    SenasMode,
)
from referee.engine.scoring import tanteo_entry
from referee.engine.seats import partner_of, speaking_order, team_of
from referee.engine.senas import (
    Sena,
    SenaRejection,
    SenaRejectionCode,
    accepted_senas,
    check_unknown_labels,
    sena_verdicts,
    true_hand_senas,
    unknown_rejections,
)

_MUS_CALLS = (Action(ActionKind.MUS), Action(ActionKind.NO_MUS))
"""The mus decision's listed actions: what `LegalActions.expand` gives for it, without the señas' verdicts."""


class DecisionKind(Enum):
    """What an awaited seat is asked to decide."""

    MUS = "mus"
    DISCARD = "discard"
    DECLARE = "declare"
    SENAS = "senas"
    BET = "bet"


class StepKind(Enum):
    """What one entry of the action log is: an action, a timeout, an illegal action's fault, or señas outside
    the vocabulary that a seat sent (rejected to it alone)."""

    ACTION = "action"
    TIMEOUT = "timeout"
    ILLEGAL = "illegal"
    UNKNOWN_SENAS = "unknown_senas"
    LIMIT = "limit"


@dataclass(frozen=True, slots=True)
class Step:
    """One entry of the action log: enough, with the rules, seed and setup, to replay the match."""

    seat: int
    kind: StepKind
    action: Action | None = None
    reason: str = ""
    unknown_senas: tuple[str, ...] = ()
    """Señas outside the vocabulary that came with the action (labels such as `#99`): rejected with the rest."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"seat": self.seat, "kind": self.kind.value}
        if self.action is not None:
            out["action"] = str(self.action)
            if self.action.stray_senas:  # the notation of a bet or discard has no place for señas
                out["senas"] = " ".join(sena.value for sena in self.action.stray_senas)
        if self.unknown_senas:
            out["unknown_senas"] = " ".join(self.unknown_senas)
        if self.reason:
            out["reason"] = self.reason
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Step:
        action = Action.parse(data["action"]) if "action" in data else None
        if action is not None and data.get("senas"):
            action = dataclasses.replace(action, senas=tuple(parse_sena(name) for name in data["senas"].split()))
        unknown = tuple(str(data.get("unknown_senas", "")).split())
        return cls(int(data["seat"]), StepKind(data["kind"]), action, str(data.get("reason", "")), unknown)


@dataclass(frozen=True, slots=True)
class StepRecord:
    """What applying one step did: the step and the events it produced, in order."""

    step: Step
    events: tuple[Event, ...]
    rejected_senas: tuple[tuple[Sena, str], ...] = ()


_NOTHING_LEGAL = LegalActions()
_NO_MUS = Action.no_mus()
_NO_SENAS = Action.send_senas(())


class _GameOver(Exception):
    """Raised inside a hand when the game has just ended, to stop playing and counting the hand at once."""


class Match:
    """A whole match of Mus between two partnerships, from the first deal to the match result."""

    def __init__(self, rules: Rules | None = None, seed: int = 0, setup: Setup | None = None) -> None:
        self.rules = rules if rules is not None else Rules()
        self.rules.validate()
        self.seed = seed
        self.setup = setup if setup is not None else Setup()
        self.events: list[Event] = []
        self.log: list[Step] = []
        self.outcome: MatchOutcome | None = None
        self.score = list(self.setup.start_score)
        self.games_won = [0, 0]
        self.vacas_won = [0, 0]
        self.faults = [0, 0]
        self.game_results: list[GameResult] = []
        self.vaca_results: list[VacaResult] = []
        self.vaca_number = 0
        """The vaca being played, from 0."""
        self.game_number = 0
        """The game being played within its vaca, from 0."""
        self.hand_number = 0
        """The hand being played, from 0 over the whole match."""
        self._hands_started = 0
        first_dealer = self.setup.first_dealer
        self.first_dealer = first_dealer_of(seed) if first_dealer is None else first_dealer
        self.mano = self.first_dealer  # becomes the first mano in _start_hand
        self.dealer = self.first_dealer
        self.hands: list[tuple[Card, ...]] = [(), (), (), ()]
        self._held: list[tuple[HandFacts, dict[Lance | None, tuple[Sena, ...]]] | None] = [None, None, None, None]
        """Per seat, the facts of the hand it holds and the señas accepted from it by window (None: not worked
        out yet). A deal or a discard changes the hand and drops its entry (`_facts_of`)."""
        self.stock: list[Card] = []
        self.discard_pile: list[Card] = []
        self.lance: Lance | None = None
        self.decision: DecisionKind | None = None
        self._rng = random.Random(0)
        self._senas_delivered = 0
        self._rejection: Event | None = None
        """The SENA_REJECTED event of the step being applied: the step's later rejections join it."""
        self._hands_shown = False
        self._auto_sent: list[set[Sena]] = [set(), set(), set(), set()]
        self._mus_turn = 0
        self._discards_done = 0
        self._round_discards: dict[int, tuple[Card, ...]] = {}
        self._discard_order: list[int] = []
        self._set_aside: list[Card] = []
        self._consumed: set[int] = set()
        self._lance_index = 0
        self._declare_queue: list[int] = []
        self._sena_queue: list[int] = []
        self._betting: Betting | None = None
        self._results: dict[Lance, LanceResult] = {}
        self._awaited: tuple[int, ...] | None = None
        """`awaited()` as last computed; every change of whom the match waits for (`_dispatch`, `_forfeit`)
        drops it. The edges ask for it several times a decision (`check`, `legal`, `decision_kind`)."""
        # The seed fixes every deal, so it is never part of an event: seats must not learn it (rules §4.1).
        self._emit(MatchStarted(self.first_dealer, self.rules))
        self._start_game()
        try:
            self._start_hand()
        except _GameOver:
            self._after_game()

    # ------------------------------------------------------------------ queries

    @property
    def is_over(self) -> bool:
        return self.outcome is not None

    def speaking_order(self) -> tuple[int, ...]:
        """The seats from the mano in speaking order (rules §1)."""
        return speaking_order(self.mano)

    def awaited(self) -> tuple[int, ...]:
        """The seats whose decision the match waits for, in speaking order; empty once the match is over."""
        awaited = self._awaited
        if awaited is None:
            awaited = self._awaited = self._waiting_for()
        return awaited

    def _waiting_for(self) -> tuple[int, ...]:
        if self.outcome is not None or self.decision is None:
            return ()
        kind = self.decision
        if kind is DecisionKind.MUS:
            return ((self.mano + self._mus_turn) % 4,)
        if kind is DecisionKind.DISCARD:
            if self.rules.discard_submission is DiscardSubmission.SEQUENTIAL:
                return (self._discard_order[len(self._round_discards)],)
            return tuple(seat for seat in self.speaking_order() if seat not in self._round_discards)
        if kind is DecisionKind.DECLARE:
            return (self._declare_queue[0],)
        if kind is DecisionKind.SENAS:
            return (self._sena_queue[0],)
        betting = self._betting
        assert betting is not None
        if betting.first_answer is not None:
            return (betting.queue[1],)
        return (betting.queue[0],)

    def decision_kind(self, seat: int) -> DecisionKind | None:
        """What `seat` is asked now, or None when it is not awaited."""
        return self.decision if seat in self.awaited() else None

    def legal_actions(self, seat: int) -> tuple[Action, ...]:
        """The legal actions of an awaited seat, in a stable order; empty for a seat that is not awaited.

        Señas attached to a mus call are not enumerated (any list may ride on the call). In a seña round the
        list holds the empty answer and each seña that would be accepted now; any other list is legal too, and
        its false señas are rejected one by one (`acceptable_senas`). With an
        uncapped stake (`max_total_stake = null`) bets are listed up to the target score; larger ones are legal
        too and decide the game the same way (rules §8.1).
        """
        if seat in self.awaited():
            if self.decision is DecisionKind.BET:
                return self._betting_actions()
            if self.decision is DecisionKind.MUS:  # no seña is listed on a call: skip judging them (`legal`)
                return _MUS_CALLS
        return self.legal(seat).expand()

    def legal(self, seat: int) -> LegalActions:
        """The legal actions of a seat as one entry per kind with its ranges; empty when it is not awaited."""
        if seat not in self.awaited():
            return _NOTHING_LEGAL
        kind = self.decision
        rules = self.rules
        if kind is DecisionKind.MUS:
            window = rules.senas_per_window
            return mus_call_legal(self._acceptable_senas(seat, None) if window else (), window)
        if kind is DecisionKind.DISCARD:
            return discard_legal(self.hands[seat], rules.discard_min, rules.discard_max)
        if kind is DecisionKind.DECLARE:
            return declare_legal(self._holds(seat, self._declaring_lance()))
        if kind is DecisionKind.SENAS:
            return senas_legal(self._acceptable_senas(seat, self.lance), rules.senas_per_window)
        betting = self._betting
        assert betting is not None
        return betting.legal(rules)

    def _betting_actions(self) -> tuple[Action, ...]:
        betting = self._betting
        assert betting is not None
        rules = self.rules  # betting_menu called directly: this is the engine's hottest query
        return betting_menu(
            betting.pending, betting.ordago, rules.min_bet, rules.min_raise, rules.stake_cap, rules.target_score
        )

    def check(self, seat: int, action: Action) -> None:
        """Return if `action` is legal for `seat` now. Otherwise raise `MalformedError` when it could never be a
        Mus action (`Action.malformed`), or `IllegalActionError` saying why it is not legal now and what is."""
        if self.outcome is not None:
            raise MatchOverError("the match is over")
        problem = action.malformed()
        if problem is not None:
            raise MalformedError(problem)
        if not 0 <= seat <= 3:
            raise IllegalActionError(f"there is no seat {seat}: seats are 0..3")
        awaited = self.awaited()
        if seat not in awaited:
            waiting = ", ".join(map(str, awaited))
            raise IllegalActionError(f"seat {seat} is not asked to act now: the match waits for seat {waiting}")
        kind = self.decision
        assert kind is not None
        action = action.without_senas() if action.stray_senas else action  # rejected on their own in `apply`
        if kind is DecisionKind.MUS and action.kind in (ActionKind.MUS, ActionKind.NO_MUS):
            return
        if kind is DecisionKind.SENAS:
            if action.kind is ActionKind.SENAS:
                return  # any list is legal: each seña is then accepted or rejected on its own (rules §12.3)
            raise IllegalActionError(f"{action} is not an answer to a seña round: send a list of señas")
        if kind is DecisionKind.BET and action.kind in (ActionKind.ENVIDO, ActionKind.MAS):
            betting = self._betting
            assert betting is not None
            betting.check_amount(action, self.rules)
            return
        if kind is DecisionKind.DISCARD or kind is DecisionKind.DECLARE:
            # Judged by the entry, not by listing: a discard's list is up to 15 actions made for each new hand.
            judged = self.legal(seat)
            if action not in judged:
                raise Refusal(f"{action} is not legal for seat {seat} now ({kind.value} decision);", judged.expand())
            return
        legal = self.legal_actions(seat)
        if action not in legal:
            raise Refusal(f"{action} is not legal for seat {seat} now ({kind.value} decision);", legal)

    def is_legal(self, seat: int, action: Action) -> bool:
        """Whether `check` would accept the action."""
        try:
            self.check(seat, action)
        except (IllegalActionError, MalformedError):
            return False
        return True

    def default_action(self, seat: int) -> Action:
        """The action a timeout applies for an awaited seat (rules §13)."""
        if seat not in self.awaited():
            raise IllegalActionError(f"seat {seat} is not asked to act now")
        kind = self.decision
        if kind is DecisionKind.MUS:
            return _NO_MUS
        if kind is DecisionKind.DISCARD:
            return Action.discard(self.hands[seat][: self.rules.discard_max])
        if kind is DecisionKind.DECLARE:
            return self.legal_actions(seat)[0]
        if kind is DecisionKind.SENAS:
            return _NO_SENAS
        betting = self._betting
        assert betting is not None
        return betting.default_action()

    # ------------------------------------------------------------------ steps

    def apply(self, seat: int, action: Action, unknown_senas: Sequence[str] = ()) -> StepRecord:
        """Apply a legal action of an awaited seat; an illegal one raises and changes nothing.

        Señas ride on an action without deciding its legality (rules §12.3 item 4): on a mus call or in a
        seña round, each seña of the list is checked on its own, the false ones are rejected (the sender alone is
        told, in the record and a private event) and the rest are delivered. Señas on any other action are sent
        outside a window and all rejected. `unknown_senas` are señas outside the vocabulary that came with the
        action (labels such as `#99`, which `Sena` cannot hold), all rejected. A rejection is not a fault, and
        the rejections of one action are one event, before any other event of the step.
        """
        self.check(seat, action)
        check_unknown_labels(unknown_senas)
        start = len(self.events)
        step = Step(seat, StepKind.ACTION, action, unknown_senas=tuple(unknown_senas))
        self.log.append(step)
        self._rejection = None
        if unknown_senas:
            self._note_rejections(seat, unknown_rejections(unknown_senas))
        stray = action.stray_senas
        if stray:
            text = "señas ride only on a mus call or in a seña round (rules §12.3 item 3)"
            self._note_rejections(
                seat, [(sena, SenaRejection(SenaRejectionCode.OUTSIDE_WINDOW, text)) for sena in stray]
            )
            action = action.without_senas()
        rejected = self._dispatch(seat, action)
        if stray:
            rejected = tuple((sena, text) for sena in stray) + rejected
        return StepRecord(step, tuple(self.events[start:]), rejected)

    def apply_timeout(self, seat: int) -> StepRecord:
        """A seat's decision time and bank ran out: count a fault and apply the default action (rules §13).

        A seña round that times out sends an empty list and is not a fault.
        """
        if self.outcome is not None:
            raise MatchOverError("the match is over")
        if seat not in self.awaited():
            raise IllegalActionError(f"seat {seat} is not asked to act now, so it cannot time out")
        start = len(self.events)
        step = Step(seat, StepKind.TIMEOUT)
        self.log.append(step)
        action = self.default_action(seat)
        if self.decision is DecisionKind.SENAS or self._fault(seat, FaultCause.TIMEOUT):
            self._dispatch(seat, action)
        return StepRecord(step, tuple(self.events[start:]))

    def record_illegal_action(self, seat: int, reason: str) -> StepRecord:
        """An illegal action (or one from a seat not asked) arrived: it is never applied; count one fault.

        Under `illegal_action_policy = default_action` an awaited seat then gets its default action; under
        `retry` it is still awaited. A forfeit ends the match at once (rules §13).
        """
        if self.outcome is not None:
            raise MatchOverError("the match is over")
        if not 0 <= seat <= 3:
            raise IllegalActionError(f"there is no seat {seat}")
        start = len(self.events)
        step = Step(seat, StepKind.ILLEGAL, reason=reason)
        self.log.append(step)
        awaited = seat in self.awaited()
        if (
            self._fault(seat, FaultCause.ILLEGAL_ACTION)
            and awaited
            and self.rules.illegal_action_policy is IllegalActionPolicy.DEFAULT_ACTION
        ):
            self._dispatch(seat, self.default_action(seat))
        return StepRecord(step, tuple(self.events[start:]))

    def reject_unknown_senas(self, seat: int, labels: Sequence[str]) -> StepRecord:
        """Señas outside the vocabulary (`labels` name them, e.g. `#99`) that an awaited seat sent with its
        answer: each is rejected to the sender alone, not a fault, nobody else learns anything (§12.3 item 4).

        The edge that reads bot messages calls this before applying the rest of the answer; the engine's own
        `Sena` cannot hold such values.
        """
        if self.outcome is not None:
            raise MatchOverError("the match is over")
        if seat not in self.awaited():
            raise IllegalActionError(f"seat {seat} is not asked to act now")
        if not labels:
            raise IllegalActionError("give the unknown señas as non-empty labels without spaces")
        check_unknown_labels(labels)
        start = len(self.events)
        step = Step(seat, StepKind.UNKNOWN_SENAS, reason=" ".join(labels))
        self.log.append(step)
        self._rejection = None
        self._note_rejections(seat, unknown_rejections(labels))
        return StepRecord(step, tuple(self.events[start:]))

    def forfeit_for_limit(self, seat: int, reason: str) -> StepRecord:
        """The seat made the match's record outgrow the limit its host keeps (a flood of señas or illegal
        actions): one fault of cause `limit`, and its team forfeits at once, whatever the fault count.

        The limit is the host's, not a rule: the engine records the step so that the match replays exactly.
        """
        if self.outcome is not None:
            raise MatchOverError("the match is over")
        if not 0 <= seat <= 3:
            raise IllegalActionError(f"there is no seat {seat}")
        start = len(self.events)
        step = Step(seat, StepKind.LIMIT, reason=reason)
        self.log.append(step)
        team = team_of(seat)
        self.faults[team] += 1
        self._emit(Fault(seat, FaultCause.LIMIT, team, self.faults[team]))
        self._forfeit(team)
        return StepRecord(step, tuple(self.events[start:]))

    def _fault(self, seat: int, cause: FaultCause) -> bool:
        """Count a fault; end the match by forfeit at the limit. Returns whether the match goes on."""
        team = team_of(seat)
        self.faults[team] += 1
        self._emit(Fault(seat, cause, team, self.faults[team]))
        if self.faults[team] >= self.rules.max_faults_before_forfeit:
            self._forfeit(team)
            return False
        return True

    def _dispatch(self, seat: int, action: Action) -> tuple[tuple[Sena, str], ...]:
        kind = self.decision
        rejected: tuple[tuple[Sena, str], ...] = ()
        try:
            if kind is DecisionKind.MUS:
                rejected = self._mus_call(seat, action)
            elif kind is DecisionKind.DISCARD:
                self._discard(seat, action.cards)
            elif kind is DecisionKind.DECLARE:
                self._declare(seat, action.has_jugada)
            elif kind is DecisionKind.SENAS:
                rejected = self._sena_answer(seat, action.senas)
            else:
                self._bet(seat, action)
        except _GameOver:
            self._after_game()
        finally:
            self._awaited = None
        return rejected

    # ------------------------------------------------------------------ events

    def _emit(self, payload: Payload, to: frozenset[int] | None = None) -> Event:
        event = Event(len(self.events), payload, to)
        self.events.append(event)
        return event

    def _add_points(self, team: int, points: int, lance: Lance | None, reason: ScoreReason) -> None:
        """Score one entry and stop the game the moment a team reaches the target (rules §9.5)."""
        if points <= 0:
            return
        self.score[team] += points
        self._emit(PointsScored(team, points, lance, reason, (self.score[0], self.score[1])))
        if self.score[team] >= self.rules.target_score:
            deje = reason is ScoreReason.DEJE
            termination = GameTermination.TARGET_AT_DEJE if deje else GameTermination.TARGET_AT_TANTEO
            self._end_game(team, termination)

    # ------------------------------------------------------------------ games, hands

    def _start_game(self) -> None:
        self.game_number = self.games_won[0] + self.games_won[1]  # a game with no winner ends the match
        self._emit(GameStarted(self.vaca_number, self.game_number, (self.score[0], self.score[1])))

    def _start_hand(self) -> None:
        self.hand_number = self._hands_started
        self._hands_started += 1
        self.dealer = self.mano
        self.mano = (self.mano + 1) % 4
        number = self.hand_number
        self._rng = deal_rng(self.seed, number)
        scripted = self.setup.decks.get(number)
        deck = list(scripted) if scripted is not None else shuffled_deck(self._rng)
        self.hands, self.stock = deal(deck, self.mano)
        self._held = [None, None, None, None]
        self.discard_pile = []
        self._senas_delivered = 0
        self._hands_shown = False
        self._auto_sent = [set(), set(), set(), set()]
        self._discards_done = 0
        self._results = {}
        self._lance_index = 0
        self.lance = None
        self._betting = None
        self._emit(HandStarted(number, self.mano, self.dealer))
        for seat in self.speaking_order():
            self._emit(CardsDealt(seat, self.hands[seat]), frozenset({seat}))
        if number == 0 and self.setup.skip_mus_first_hand:
            self._start_lances()
        else:
            self._start_mus_round()

    def _end_game(self, winner: int, termination: GameTermination) -> None:
        """Record the game; `_GameOver` then unwinds the hand so nothing after this point is counted."""
        self._show_hands()
        self._emit(HandEnded(self.hand_number))
        self._record_game(winner, termination)
        self.games_won[winner] += 1
        if self.games_won[winner] >= self.rules.games_to_win_vaca:
            self._record_vaca(winner, (self.games_won[0], self.games_won[1]))
            self.vacas_won[winner] += 1
            self.games_won = [0, 0]
            if self.vacas_won[winner] >= self.rules.vacas_to_win_match:
                self._end_match(winner, MatchTermination.NORMAL)
        raise _GameOver

    def _record_game(self, winner: int | None, termination: GameTermination) -> None:
        score = (self.score[0], self.score[1])
        result = GameResult(self.vaca_number, self.game_number, winner, score, termination, self.hand_number)
        self.game_results.append(result)
        self._emit(GameEnded(result.vaca, result.game, winner, score, termination, self.hand_number))

    def _record_vaca(self, winner: int | None, games: tuple[int, int]) -> None:
        self.vaca_results.append(VacaResult(self.vaca_number, winner, games))
        self._emit(VacaEnded(self.vaca_number, winner, games))
        self.vaca_number += 1

    def _after_game(self) -> None:
        """After a game ends: the next game from 0-0 with a new deal, unless the match is over."""
        self.decision = None
        if self.outcome is not None:
            return
        self.score = [0, 0]
        self._start_game()
        self._start_hand()

    def _end_match(self, winner: int, termination: MatchTermination) -> None:
        self.outcome = MatchOutcome(
            winner=winner,
            termination=termination,
            vacas=(self.vacas_won[0], self.vacas_won[1]),
            games=tuple(self.game_results),
            vaca_results=tuple(self.vaca_results),
            faults=(self.faults[0], self.faults[1]),
        )
        self.decision = None
        self._emit(MatchEnded(winner, termination, (self.vacas_won[0], self.vacas_won[1])))

    def _forfeit(self, team: int) -> None:
        """A team reached the fault limit: the other team wins the match; the game in progress has no winner."""
        self._awaited = None
        self._emit(Forfeit(team))
        self._record_game(None, GameTermination.FORFEIT)
        # types.proto: a forfeit ends the vaca in progress too, with no winner (Outcome.vacas includes it).
        self._record_vaca(None, (self.games_won[0], self.games_won[1]))
        self._end_match(1 - team, MatchTermination.FORFEIT)

    def _show_hands(self) -> None:
        """Every seat sees the four current hands when a hand ends (rules §11), once per hand."""
        if self._hands_shown:
            return
        self._hands_shown = True
        self._emit(HandsShown(tuple(self.hands)))

    # ------------------------------------------------------------------ mus phase

    def _start_mus_round(self) -> None:
        self.decision = DecisionKind.MUS
        self._mus_turn = 0

    def _mus_call(self, seat: int, action: Action) -> tuple[tuple[Sena, str], ...]:
        """Señas ride on the call and are delivered before it (rules §12.3 item 3a)."""
        rejected: tuple[tuple[Sena, str], ...] = ()
        if self.rules.senas_mode is SenasMode.AUTOMATIC:
            text = "senas_mode is automatic: the referee sends señas"
            automatic = [(sena, SenaRejection(SenaRejectionCode.OUTSIDE_WINDOW, text)) for sena in action.senas]
            self._note_rejections(seat, automatic)
            rejected = tuple((sena, text) for sena in action.senas)
            self._send_automatic_senas(seat, None)
        elif action.senas:
            rejected = self._send_sena_list(seat, action.senas, None)
        wants = action.kind is ActionKind.MUS
        self._emit(MusCalled(seat, wants))
        if not wants:
            self._emit(MusCut(MusCutReason.NO_MUS, seat))
            self._start_lances()
        elif self._mus_turn == 3:
            self._start_discards()
        else:
            self._mus_turn += 1
        return rejected

    def _start_discards(self) -> None:
        self.decision = DecisionKind.DISCARD
        self._round_discards = {}
        self._discard_order = dealing_order(self.speaking_order(), self.rules.replacement_order)
        self._set_aside = []
        self._consumed = set()

    def _discard(self, seat: int, cards: tuple[Card, ...]) -> None:
        self._round_discards[seat] = cards
        self._emit(CardsDiscarded(seat, cards), frozenset({seat}))
        if self.rules.discard_submission is DiscardSubmission.SEQUENTIAL:
            self._emit(DiscardCounted(seat, len(cards)))
            self._replace(seat)
            if len(self._round_discards) == 4:
                self._finish_discard_round()
            return
        if len(self._round_discards) < 4:
            return
        # rules §5.2: the counts are published together, then the replacements are dealt.
        for other in self.speaking_order():
            self._emit(DiscardCounted(other, len(self._round_discards[other])))
        for other in self._discard_order:
            self._replace(other)
        self._finish_discard_round()

    def _replace(self, seat: int) -> None:
        """Deal a seat its replacements, reshuffling the discards when the stock runs out (rules §5.2)."""
        thrown = self._round_discards[seat]
        kept = [card for card in self.hands[seat] if card not in thrown]
        received: list[Card] = []
        for _ in thrown:
            if not self.stock:
                self._reshuffle(seat)
            received.append(self.stock.pop(0))
        self.hands[seat] = sort_hand(kept + received)
        self._held[seat] = None
        self._emit(CardsReplaced(seat, sort_hand(received)), frozenset({seat}))

    def _reshuffle(self, due: int) -> None:
        """The stock ran out before `due` was served: reshuffle the pool into a new stock (rules §5.2)."""
        pool = reshuffle_pool(
            self.discard_pile, self._discard_order, due, self._round_discards, self._consumed, self.rules.reshuffle_pool
        )
        self.discard_pile = []
        self._rng.shuffle(pool)
        self.stock = pool
        self._emit(StockReshuffled())

    def _finish_discard_round(self) -> None:
        self.discard_pile.extend(settled_discards(self._discard_order, self._round_discards, self._consumed))
        self._round_discards = {}
        self._discards_done += 1
        limit = self.rules.max_mus_rounds
        if limit is not None and self._discards_done >= limit:
            self._emit(MusCut(MusCutReason.MAX_MUS_ROUNDS, None))
            self._start_lances()
        else:
            self._start_mus_round()

    # ------------------------------------------------------------------ lances

    def _start_lances(self) -> None:
        self._lance_index = 0
        self._next_lance()

    def _next_lance(self) -> None:
        """Open the next lance, or count the tanteo when all are closed (rules §7)."""
        order = (Lance.GRANDE, Lance.CHICA, Lance.PARES, Lance.JUEGO)
        if self._lance_index >= len(order):
            self._tanteo()
            return
        lance = order[self._lance_index]
        self._lance_index += 1
        self.lance = lance
        self._emit(LanceStarted(lance))
        if lance in (Lance.PARES, Lance.JUEGO):
            self._declare_queue = list(self.speaking_order())
            if self.rules.declarations is Declarations.BOT_DECLARES:
                self.decision = DecisionKind.DECLARE
                return
            for seat in self._declare_queue:
                self._emit(Declared(lance, seat, self._holds(seat, lance)))
            self._declare_queue = []
        self._after_declarations()

    def _declaring_lance(self) -> Lance:
        assert self.lance is not None
        return self.lance

    def _holds(self, seat: int, lance: Lance) -> bool:
        facts = self._facts_of(seat)[0]
        if lance is Lance.PARES:
            return facts.has_pares
        if lance is Lance.JUEGO:
            return facts.has_juego
        return True

    def _declare(self, seat: int, has_jugada: bool) -> None:
        lance = self._declaring_lance()
        self._declare_queue.pop(0)
        self._emit(Declared(lance, seat, has_jugada))
        if not self._declare_queue:
            self._after_declarations()

    def _after_declarations(self) -> None:
        lance = self.lance
        assert lance is not None
        participants = tuple(seat for seat in self.speaking_order() if self._holds(seat, lance))
        if lance is Lance.JUEGO and not participants:
            # rules §7: nobody has juego, so Punto is played at once, by all four.
            lance = Lance.PUNTO
            self.lance = lance
            self._emit(LanceStarted(lance))
            participants = self.speaking_order()
        teams = {team_of(seat) for seat in participants}
        if len(teams) < 2:
            outcome = LanceOutcome.SKIPPED if not participants else LanceOutcome.NO_BETTING
            self._close_lance(LanceResult(lance, outcome, participants))
            return
        self._betting = Betting(lance, participants, list(participants))
        self._sena_queue = list(self.speaking_order())
        if self.rules.senas_mode is SenasMode.VOLUNTARY and self.rules.max_senas_per_window > 0:
            self.decision = DecisionKind.SENAS
            return
        if self.rules.senas_mode is SenasMode.AUTOMATIC:
            for seat in self._sena_queue:
                self._send_automatic_senas(seat, lance)
        self._sena_queue = []
        self.decision = DecisionKind.BET

    def _close_lance(self, result: LanceResult, deje: int = 0) -> None:
        """Close the lance, then score a refused bet's deje at once (rules §8.3): so the lance is closed even
        when the deje ends the game, as types.proto orders a hand (LanceClosed, then PointsScored)."""
        self._results[result.lance] = result
        self._betting = None
        winner = result.refusal_winner
        if result.outcome is LanceOutcome.NO_BETTING:
            winner = team_of(result.participants[0])  # rules §7: the only team that holds the jugada
        self._emit(LanceClosed(result.lance, result.outcome, result.stake, winner))
        if deje:
            assert result.refusal_winner is not None
            self._add_points(result.refusal_winner, deje, result.lance, ScoreReason.DEJE)
        self._next_lance()

    # ------------------------------------------------------------------ señas

    @property
    def facts(self) -> list[HandFacts]:
        """The facts of each seat's hand, by seat."""
        return [self._facts_of(seat)[0] for seat in range(4)]

    def _facts_of(self, seat: int) -> tuple[HandFacts, dict[Lance | None, tuple[Sena, ...]]]:
        """The facts of `seat`'s hand and the señas accepted from it so far, worked out once per hand held: the
        referee lists the acceptable señas at every mus and seña decision."""
        held = self._held[seat]
        if held is None:
            held = self._held[seat] = (evaluate(self.hands[seat], self.rules.deck_mode, self.rules.real_31), {})
        return held

    def _acceptable_senas(self, seat: int, lance: Lance | None) -> tuple[Sena, ...]:
        facts, accepted = self._facts_of(seat)
        senas = accepted.get(lance)
        if senas is None:
            senas = accepted[lance] = accepted_senas(facts, self.rules, lance)
        return senas

    def _sena_verdicts(self, seat: int, senas: Sequence[Sena], lance: Lance | None) -> list[SenaRejection | None]:
        """For each seña of a list, why it is rejected, or None when it is delivered (rules §12.3)."""
        return sena_verdicts(senas, self._facts_of(seat)[0], self.rules, lance)

    def _sena_answer(self, seat: int, senas: tuple[Sena, ...]) -> tuple[tuple[Sena, str], ...]:
        self._sena_queue.pop(0)
        rejected = self._send_sena_list(seat, senas, self.lance)
        if not self._sena_queue:
            self.decision = DecisionKind.BET
        return rejected

    def _send_sena_list(self, seat: int, senas: Sequence[Sena], lance: Lance | None) -> tuple[tuple[Sena, str], ...]:
        verdicts = self._sena_verdicts(seat, senas, lance)
        rejected = tuple((sena, reason) for sena, reason in zip(senas, verdicts, strict=True) if reason is not None)
        self._note_rejections(seat, rejected)
        for sena, reason in zip(senas, verdicts, strict=True):
            if reason is None:
                self._deliver(seat, sena, lance)
        return tuple((sena, str(reason)) for sena, reason in rejected)

    def _note_rejections(self, seat: int, rejected: Sequence[tuple[Sena | str, SenaRejection]]) -> None:
        """Only the sender learns that a seña was rejected, and why (rules §12.3 item 4): one event per step,
        listing every rejected seña of the action, so what an action costs the record does not grow with it."""
        if not rejected:
            return
        entries = tuple(RejectedSena(sena, reason.code, reason.text) for sena, reason in rejected)
        event = self._rejection
        if event is not None and self.events and self.events[-1] is event:
            assert isinstance(event.payload, SenaRejected)
            joined = SenaRejected(seat, event.payload.senas + entries)
            self._rejection = self.events[-1] = Event(event.seq, joined, event.to)
            return
        self._rejection = self._emit(SenaRejected(seat, entries), frozenset({seat}))

    def _send_automatic_senas(self, seat: int, lance: Lance | None) -> None:
        """Automatic mode: each true hand-fact seña once per hand, at its first allowed window (§12.3 item 6)."""
        for sena in true_hand_senas(self._facts_of(seat)[0], self.rules, lance):
            if sena not in self._auto_sent[seat]:
                self._auto_sent[seat].add(sena)
                self._deliver(seat, sena, lance)

    def _deliver(self, seat: int, sena: Sena, lance: Lance | None) -> None:
        """The partner always receives a seña; both rivals with `sena_leak_probability` (§12.3 item 5)."""
        probability = self.rules.sena_leak_probability
        index = self._senas_delivered
        self._senas_delivered += 1
        leaked = leak_rng(self.seed, self.hand_number, index).random() < probability
        to = None if leaked else frozenset({seat, partner_of(seat)})
        self._emit(SenaDelivered(seat, sena, lance, self._discards_done), to)

    # ------------------------------------------------------------------ betting

    def _bet(self, seat: int, action: Action) -> None:
        betting = self._betting
        assert betting is not None
        both = self.rules.response_mode is ResponseMode.BOTH_ANSWER_MOST_AGGRESSIVE
        if betting.pending is None and not betting.ordago:
            self._emit_bet(betting, seat, action)
            self._open_action(betting, seat, action)
            return
        if not both:
            self._emit_bet(betting, seat, action)
            self._answer(betting, seat, action, final=False)
            return
        # rules §8.2 both_answer_most_aggressive: the partner answers after seeing the first answer (not
        # after an órdago); the most aggressive answer stands, as if its author had acted alone.
        first = betting.first_answer
        if first is None and action.kind is not ActionKind.ORDAGO and len(betting.queue) > 1:
            self._emit_bet(betting, seat, action)
            betting.first_answer = (seat, action)
            return
        betting.first_answer = None
        answers = [first, (seat, action)] if first is not None else [(seat, action)]
        chosen_seat, chosen = max(answers, key=lambda answer: aggression(answer[1]))
        self._emit_bet(betting, seat, action, standing=chosen)
        self._answer(betting, chosen_seat, chosen, final=True)

    def _emit_bet(self, betting: Betting, seat: int, action: Action, standing: Action | None = None) -> None:
        """Publish a betting action with the totals it leaves on the table (accepted, pending, órdago).

        `standing`: in both-answer mode, the answer that prevails once the second rival has answered; the
        second answer's event carries the totals of that answer, which may be the partner's (rules §8.2).
        """
        pending, accepted, ordago = betting.totals_after(standing or action)
        self._emit(Bet(betting.lance, seat, action.kind, action.amount, pending, accepted, ordago))

    def _open_action(self, betting: Betting, seat: int, action: Action) -> None:
        if action.kind is ActionKind.PASO:
            betting.queue.pop(0)
            if not betting.queue:
                self._close_lance(LanceResult(betting.lance, LanceOutcome.PASSED, betting.participants))
            return
        betting.open(seat, action)

    def _answer(self, betting: Betting, seat: int, action: Action, *, final: bool) -> None:
        """Apply an answer to a pending bet. `final`: a no_quiero refuses for the whole team (both-answer mode)."""
        kind = action.kind
        if kind is ActionKind.QUIERO:
            if betting.ordago:
                self._ordago_accepted(betting)
                return
            assert betting.pending is not None
            self._close_lance(
                LanceResult(betting.lance, LanceOutcome.ACCEPTED, betting.participants, stake=betting.pending)
            )
            return
        if kind is ActionKind.NO_QUIERO:
            if not final:
                betting.queue.pop(0)
                if betting.queue:
                    return
            self._refused(betting)
            return
        betting.raise_stake(seat, action)

    def _refused(self, betting: Betting) -> None:
        """rules §8.3: the refusing team concedes; the proposer's team scores the deje at once."""
        assert betting.proposer is not None
        winner = team_of(betting.proposer)
        points = deje_points(self.rules.deje_mode, betting.lance, betting.accepted)
        result = LanceResult(betting.lance, LanceOutcome.REJECTED, betting.participants, refusal_winner=winner)
        self._close_lance(result, deje=points)

    def _ordago_accepted(self, betting: Betting) -> None:
        """rules §8.4: hands shown, the lance decided on cards, the game won at once."""
        lance = betting.lance
        self._results[lance] = LanceResult(lance, LanceOutcome.ORDAGO_ACCEPTED, betting.participants)
        self._emit(LanceClosed(lance, LanceOutcome.ORDAGO_ACCEPTED, 0, None))
        self._show_hands()  # rules §8.4: play stops and all four hands are shown
        if self.rules.ordago_resolution is OrdagoResolution.COUNT_PRIOR:
            for prior in (Lance.GRANDE, Lance.CHICA, Lance.PARES, Lance.JUEGO):
                if prior is lance or (prior is Lance.JUEGO and lance is Lance.PUNTO):
                    break
                self._tanteo_entry(prior)
        winner_seat = best_seat(self.facts, lance, self.mano, betting.participants)
        assert winner_seat is not None
        self._emit(LanceDecided(lance, winner_seat, team_of(winner_seat)))
        self._end_game(team_of(winner_seat), GameTermination.ORDAGO)

    # ------------------------------------------------------------------ tanteo

    def _tanteo(self) -> None:
        """Count every lance in order, stopping the moment a team reaches the target (rules §9)."""
        self.decision = None
        self.lance = None
        self._show_hands()  # rules §9.1: the tanteo is counted after the four hands are shown
        for lance in (Lance.GRANDE, Lance.CHICA, Lance.PARES, Lance.JUEGO, Lance.PUNTO):
            self._tanteo_entry(lance)
        self._emit(HandEnded(self.hand_number))
        self._start_hand()

    def _tanteo_entry(self, lance: Lance) -> None:
        """One lance's entry: everything it pays at the tanteo, to one team (rules §9.2, §9.5)."""
        entry = tanteo_entry(self._results.get(lance), self.facts, self.mano, self.rules)
        if entry is not None:
            self._add_points(entry[0], entry[1], lance, ScoreReason.TANTEO)

    def betting_totals(self) -> tuple[int, int, bool]:
        """The current lance's accepted and pending totals and whether an órdago is pending (0, 0, False)."""
        betting = self._betting
        if betting is None:
            return (0, 0, False)
        return (betting.accepted, betting.pending or 0, betting.ordago)

    @property
    def discard_rounds(self) -> int:
        """How many discards the current hand has had (public: everybody saw them)."""
        return self._discards_done

    def acceptable_senas(self, seat: int) -> tuple[Sena, ...]:
        """The señas an awaited seat could send now and have accepted (mus call or seña round), else ()."""
        if seat not in self.awaited() or self.decision not in (DecisionKind.MUS, DecisionKind.SENAS):
            return ()
        if not self.rules.senas_per_window:
            return ()
        return self._acceptable_senas(seat, self.lance if self.decision is DecisionKind.SENAS else None)

    def card_census(self) -> list[Card]:
        """Every card where it is now: hands, stock, discard pile and this round's discards in transit.

        The 40 cards are always all there exactly once (rules §5.2); tests check it after every step.
        """
        cards = [card for hand in self.hands for card in hand]
        cards += self.stock + self.discard_pile
        cards += cards_in_transit(self.hands, self._round_discards, self._consumed)
        return cards

    # ------------------------------------------------------------------ views

    def events_for(self, seat: int | None) -> list[Event]:
        """Every event a seat has seen, in order and numbered as it saw them (None: a spectator's public events).

        `Event.seen_by` says why each recipient has its own numbering; `events` keeps the match-wide one.
        """
        visible = (event for event in self.events if event.to is None or (seat is not None and seat in event.to))
        return [event.seen_by(seat, index) for index, event in enumerate(visible)]
