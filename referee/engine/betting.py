"""The betting state machine of one lance: the legal bets, the stakes, the answers, the deje (rules §8).

`Betting` holds a lance's state and its transitions on the stake; `Match` applies the actions, publishes the
events and closes the lance with a `LanceResult`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from referee.engine.actions import Action, ActionKind
from referee.engine.hands import Lance
from referee.engine.legal import LegalAction, LegalActions, Refusal
from referee.engine.outcome import LanceOutcome
from referee.engine.rules import DejeMode, Rules
from referee.engine.seats import rivals_after

_LEGAL_PASO, _LEGAL_ORDAGO = LegalAction(ActionKind.PASO), LegalAction(ActionKind.ORDAGO)
_LEGAL_QUIERO, _LEGAL_NO_QUIERO = LegalAction(ActionKind.QUIERO), LegalAction(ActionKind.NO_QUIERO)
_PASO, _NO_QUIERO = Action.paso(), Action.no_quiero()


@lru_cache(maxsize=4096)
def betting_legal(
    pending: int | None, ordago: bool, min_bet: int, min_raise: int, cap: int | None, target: int
) -> LegalActions:
    """The legal betting actions of a lance state (rules §8.2), cached: they depend on little. Uncapped bets
    are listed up to the target score (`listed_bet_max`)."""
    if ordago:
        return LegalActions((_LEGAL_QUIERO, _LEGAL_NO_QUIERO))
    capped = cap is not None
    high = cap if cap is not None else max(target, min_bet)
    if pending is None:
        envido = LegalAction(ActionKind.ENVIDO, min_amount=min_bet, max_amount=high, capped=capped)
        return LegalActions((_LEGAL_PASO, envido, _LEGAL_ORDAGO))
    mas_high = high - pending if cap is not None else max(high, min_raise)
    mas = LegalAction(ActionKind.MAS, min_amount=min_raise, max_amount=mas_high, capped=capped)
    raises = (mas,) if min_raise <= mas_high else ()
    return LegalActions((_LEGAL_QUIERO, _LEGAL_NO_QUIERO, *raises, _LEGAL_ORDAGO))


@lru_cache(maxsize=4096)
def betting_menu(
    pending: int | None, ordago: bool, min_bet: int, min_raise: int, cap: int | None, target: int
) -> tuple[Action, ...]:
    """The betting actions of a lance state, listed (`betting_legal`), cached."""
    return betting_legal(pending, ordago, min_bet, min_raise, cap, target).expand()


@dataclass(slots=True)
class LanceResult:
    """How a lance closed, and what the tanteo needs to count it (rules §8, §9.2)."""

    lance: Lance
    outcome: LanceOutcome
    participants: tuple[int, ...]
    stake: int = 0
    refusal_winner: int | None = None


@dataclass(slots=True)
class Betting:
    """The betting state of one lance (rules §8.2)."""

    lance: Lance
    participants: tuple[int, ...]
    queue: list[int]
    accepted: int = 0
    pending: int | None = None
    ordago: bool = False
    proposer: int | None = None
    first_answer: tuple[int, Action] | None = None
    """In `both_answer_most_aggressive`, the first rival's answer while his partner answers."""

    def legal(self, rules: Rules) -> LegalActions:
        return betting_legal(
            self.pending, self.ordago, rules.min_bet, rules.min_raise, rules.stake_cap, rules.target_score
        )

    def menu(self, rules: Rules) -> tuple[Action, ...]:
        return betting_menu(
            self.pending, self.ordago, rules.min_bet, rules.min_raise, rules.stake_cap, rules.target_score
        )

    def default_action(self) -> Action:
        """A timeout's action (rules §13): paso before any bet, else no quiero."""
        return _PASO if self.pending is None and not self.ordago else _NO_QUIERO

    def check_amount(self, action: Action, rules: Rules) -> None:
        """Raise `IllegalActionError` unless an envido or mas has an amount legal now (rules §8.1, §8.2)."""
        cap = rules.stake_cap
        if action.kind is ActionKind.ENVIDO:
            if self.pending is not None or self.ordago:
                raise Refusal("envido opens a lance; a bet is pending,", self.menu(rules))
            if action.amount < rules.min_bet:
                raise Refusal(f"envido {action.amount} is below min_bet {rules.min_bet};", self.menu(rules))
            if cap is not None and action.amount > cap:
                raise Refusal(
                    f"envido {action.amount} is above the stake cap {cap} (max_total_stake);", self.menu(rules)
                )
            return
        if self.pending is None or self.ordago:
            what = "an órdago cannot be raised" if self.ordago else "no bet is pending to raise"
            raise Refusal(f"mas {action.amount}: {what};", self.menu(rules))
        if action.amount < rules.min_raise:
            raise Refusal(f"mas {action.amount} is below min_raise {rules.min_raise};", self.menu(rules))
        if cap is not None and self.pending + action.amount > cap:
            raise Refusal(
                f"mas {action.amount} takes the stake to {self.pending + action.amount}, "
                f"above the cap {cap} (max_total_stake);",
                self.menu(rules),
            )

    def totals_after(self, action: Action) -> tuple[int | None, int, bool]:
        """The pending, accepted and órdago totals that `action` leaves on the table, as a Bet event shows them."""
        pending, accepted, ordago = self.pending, self.accepted, self.ordago
        kind = action.kind
        if kind is ActionKind.ENVIDO:
            pending = action.amount
        elif kind is ActionKind.MAS:
            accepted, pending = pending or 0, (pending or 0) + action.amount
        elif kind is ActionKind.ORDAGO:
            accepted, ordago = pending or 0, True
        elif kind is ActionKind.QUIERO and not ordago:
            accepted = pending or 0
        return pending, accepted, ordago

    def open(self, seat: int, action: Action) -> None:
        """An envido or órdago opens the betting; the rivals answer, from the one after `seat` (rules §8.2)."""
        if action.kind is ActionKind.ENVIDO:
            self.pending = action.amount
        else:
            self.ordago = True
        self.proposer = seat
        self.queue = rivals_after(seat, self.participants)

    def raise_stake(self, seat: int, action: Action) -> None:
        """A mas or órdago answers a pending bet: it is accepted, and the new one is proposed (rules §8.2)."""
        assert self.pending is not None
        self.accepted = self.pending
        if action.kind is ActionKind.MAS:
            self.pending += action.amount
        else:
            self.ordago = True
        self.proposer = seat
        self.queue = rivals_after(seat, self.participants)


def deje_points(mode: DejeMode, lance: Lance, accepted: int) -> int:
    """What a refused bet pays its proposer's team at once (rules §8.3)."""
    if mode is DejeMode.ALWAYS_ONE or accepted == 0:
        return 1
    if mode is DejeMode.FEM_PLUS_ONE and lance in (Lance.PARES, Lance.JUEGO, Lance.PUNTO):
        return accepted + 1
    return accepted


_AGGRESSION = {ActionKind.NO_QUIERO: 0, ActionKind.QUIERO: 1, ActionKind.MAS: 2, ActionKind.ORDAGO: 3}


def aggression(action: Action) -> tuple[int, int]:
    """Rank of an answer in both-answer mode: órdago > larger raise > quiero > no quiero (rules §8.2)."""
    return (_AGGRESSION[action.kind], action.amount)
