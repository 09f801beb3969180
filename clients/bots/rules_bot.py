"""`RulesBot`: a rule-based player that plays sensible Mus from hand strength, position, score and señas.

Every decision starts from one estimate, the chance that the partnership wins the lance being played
(`StrengthModel.team_win_probability`: the bot's own cards, the seat order for ties, the declarations and the
señas received), and turns it into an action with a few thresholds kept in `Style`:

- mus and discards: keep the hand when no discard is expected to improve it enough; otherwise throw the cards
  whose replacement improves it most, which keeps kings, pairs and the figures that build juego;
- señas: tell the partner every true seña that matters for the lances still to come (when `senas_mode` is
  voluntary), once per deal;
- bets: open when the lance is likely won, accept when the stake is worth it against what refusing costs,
  raise when strong, órdago only with a very strong lance or when the rivals are about to win anyway, and
  weigh every stake by how far each team is from the target.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import combinations
from typing import assert_never

from clients.bots.strength import Ranks, Seat, StrengthModel
from clients.sdk.bot import Bot
from clients.sdk.runner import run_main
from clients.sdk.view import BotView
from referee.engine.actions import Action, ActionKind
from referee.engine.events import SenaDelivered
from referee.engine.hands import Lance
from referee.engine.match import DecisionKind
from referee.engine.rules import DejeMode
from referee.engine.senas import Sena

# The señas that inform each lance (rules §12.1), in the order the lances are played.
_SENAS_FOR: dict[Lance, frozenset[Sena]] = {
    Lance.GRANDE: frozenset({Sena.DOS_REYES, Sena.MEDIAS_REYES, Sena.CUATRO_REYES, Sena.LA_BONITA}),
    Lance.CHICA: frozenset({Sena.DOS_ASES, Sena.MEDIAS_ASES, Sena.CUATRO_ASES}),
    Lance.PARES: frozenset(
        {Sena.PARES, Sena.MEDIAS, Sena.DUPLES, Sena.DOS_REYES, Sena.MEDIAS_REYES, Sena.DOS_ASES, Sena.MEDIAS_ASES}
    ),
    Lance.JUEGO: frozenset({Sena.JUEGO, Sena.TREINTA_Y_UNA, Sena.LA_BONITA}),
    Lance.PUNTO: frozenset({Sena.TREINTA, Sena.VEINTINUEVE}),
}
_ORDER = (Lance.GRANDE, Lance.CHICA, Lance.PARES, Lance.JUEGO, Lance.PUNTO)

# Rough values a holder brings to Pares and Juego at the tanteo (rules §9.2), for an unseen hand.
_TYPICAL_VALUE = {Lance.PARES: 1.5, Lance.JUEGO: 2.2}


@dataclass(frozen=True, kw_only=True, slots=True)
class Style:
    """The thresholds of `RulesBot`, as probabilities that the partnership wins the lance."""

    mus_margin: float = 0.25
    """Ask for mus only when the best discard is expected to raise the hand value by this much."""
    open_bet: float = 0.62
    """Open with envido from this chance on."""
    big_bet: float = 0.8
    """Open bigger (and raise) from this chance on."""
    raise_bet: float = 0.78
    """Raise a pending bet from this chance on."""
    ordago: float = 0.98
    """Call órdago from this chance on, whatever the score."""
    ordago_min: float = 0.9
    ordago_edge: float = 0.5
    """Below `ordago`, call órdago when the chance is at least `ordago_min` and beats the chance of winning
    the game by the score (`_race`) by `ordago_edge`."""
    accept_ordago_margin: float = 0.25
    accept_ordago_min: float = 0.3
    accept_ordago_max: float = 0.9
    """Accept an órdago when the chance beats the chance of winning the game by the score (`_race`) by this
    margin, kept in these bounds. The margin stands for what the chance leaves out: a rival who calls órdago
    usually holds a good hand, and refusing costs little while the game goes on."""
    accept_bet_margin: float = 0.1
    """Taken off the chance before weighing a rival's bet, for the same reason."""
    bluff_rate: float = 0.04
    """How often to open with a weak lance anyway, so that an opening bet is not a sure sign of strength."""


class RulesBot(Bot):
    """A sensible rule-based Mus player; see the module docstring. `seed` fixes its occasional bluffs."""

    name = "rules"
    version = "1"

    def __init__(self, seed: int | None = 0, style: Style | None = None) -> None:
        self.rng = random.Random(seed)
        self.style = style if style is not None else Style()

    def decide(self, view: BotView) -> Action:
        decision = view.decision
        if decision is DecisionKind.MUS:
            return self.mus(view)
        if decision is DecisionKind.DISCARD:
            return self.discard(view)
        if decision is DecisionKind.DECLARE:
            return view.legal_actions[0]  # only the true answer is legal (rules §7)
        if decision is DecisionKind.SENAS:
            return self.senas(view)
        if decision is DecisionKind.BET:
            return self.bet(view)
        assert_never(decision)

    # ------------------------------------------------------------------ mus phase

    def mus(self, view: BotView) -> Action:
        """Mus when a discard is expected to improve the hand clearly, or when the partner asked to cut."""
        if Sena.CORTAR_MUS in self._senas_of(view, view.partner):
            return Action.no_mus()
        model = StrengthModel.of(view.rules)
        hand = model.ranks_of(view.cards)
        rules = view.rules
        best = max(
            model.expected_value_after_discard(_without(hand, thrown), hand)
            for size in range(rules.discard_min, rules.discard_max + 1)
            for thrown in combinations(range(4), size)
        )
        wants = best - model.hand_value(hand) > self.style.mus_margin
        return Action.mus() if wants else Action.no_mus()

    def discard(self, view: BotView) -> Action:
        """The legal discard whose replacements give the best expected hand."""
        model = StrengthModel.of(view.rules)
        hand = model.ranks_of(view.cards)

        def expected(action: Action) -> float:
            kept = [card for card in view.cards if card not in action.cards]
            return model.expected_value_after_discard(model.ranks_of(kept), hand)

        return max(view.actions_of(ActionKind.DISCARD), key=expected)

    # ------------------------------------------------------------------ señas

    def senas(self, view: BotView) -> Action:
        """Every acceptable seña that tells the partner about this lance or a later one, not yet told this deal.

        `ciego` goes out only when nothing else is true; intentions are never sent.
        """
        offered = [action.senas[0] for action in view.actions_of(ActionKind.SENAS) if action.senas]
        told = self._senas_of(view, view.seat)
        later = _ORDER[_ORDER.index(view.lance) :] if view.lance is not None else _ORDER
        useful = [sena for sena in offered if sena not in told and any(sena in _SENAS_FOR[lance] for lance in later)]
        if not useful and Sena.CIEGO in offered and Sena.CIEGO not in told:
            useful = [Sena.CIEGO]
        return Action.send_senas(tuple(useful[: view.rules.max_senas_per_window]))

    # ------------------------------------------------------------------ bets

    def win_chance(self, view: BotView) -> float:
        """P(the partnership wins the current lance), from the cards, the seat order and what is public."""
        lance = view.lance
        assert lance is not None
        model = StrengthModel.of(view.rules)
        declared = view.declared(lance) if lance in (Lance.PARES, Lance.JUEGO) else {}

        def takes_part(seat: int) -> bool:
            return declared.get(seat, True)

        def seat(seat: int) -> Seat:
            return Seat(
                position=(seat - view.mano) % 4,
                senas=frozenset(self._senas_of(view, seat)),
                holds=declared.get(seat),
            )

        partner = seat(view.partner) if takes_part(view.partner) else None
        rivals = [seat(rival) for rival in view.rivals if takes_part(rival)]
        hand = model.ranks_of(view.cards)
        return model.team_win_probability(lance, hand, view.position, partner, rivals, punto=lance is Lance.PUNTO)

    def bet(self, view: BotView) -> Action:
        """Open, answer or raise by the chance of winning the lance, the stake, and the score."""
        chance = self.win_chance(view)
        if view.can(ActionKind.PASO):
            return self._open(view, chance)
        if view.ordago_pending:
            return self._answer_ordago(view, chance)
        return self._answer_bet(view, chance)

    def _open(self, view: BotView, chance: float) -> Action:
        style = self.style
        if view.can(ActionKind.ORDAGO) and self._wants_ordago(view, chance):
            return Action.ordago()
        if chance >= style.open_bet or (chance >= 0.3 and self.rng.random() < style.bluff_rate):
            wanted = view.rules.min_bet if chance < style.big_bet else view.rules.min_bet + 2
            action = _nearest(view, ActionKind.ENVIDO, wanted)
            if action is not None:
                return action
        return Action.paso()

    def _answer_ordago(self, view: BotView, chance: float) -> Action:
        """Accept an órdago when the lance is won more often than the game would be won by playing on (the
        score race plus a margin), and always when refusing hands the rivals the game (rules §8.4)."""
        their_need = view.rules.target_score - view.their_score
        if self._refusal_cost(view) >= their_need:
            return Action.quiero()
        style = self.style
        threshold = min(style.accept_ordago_max, max(style.accept_ordago_min, _race(view) + style.accept_ordago_margin))
        return Action.quiero() if chance >= threshold else Action.no_quiero()

    def _wants_ordago(self, view: BotView, chance: float) -> bool:
        """Órdago with a lance that is nearly won, or with a good one when the score makes the game unlikely
        to be won otherwise (the rivals are close to the target, or far ahead)."""
        style = self.style
        return chance >= style.ordago or chance >= max(style.ordago_min, _race(view) + style.ordago_edge)

    def _answer_bet(self, view: BotView, chance: float) -> Action:
        """Compare the expected points of accepting with the sure loss of refusing (rules §8.3, §9.2)."""
        style = self.style
        target = view.rules.target_score
        our_need, their_need = target - view.our_score, target - view.their_score
        refusal = self._refusal_cost(view)
        if view.can(ActionKind.ORDAGO) and self._wants_ordago(view, chance):
            return Action.ordago()
        # Raising past what either team needs to win adds nothing, and without a stake cap (max_total_stake =
        # null) two confident teams would otherwise raise each other for ever.
        room = max(our_need, their_need) - view.pending_total
        if chance >= style.raise_bet and room >= view.rules.min_raise:
            wanted = min(room, max(view.rules.min_raise, view.pending_total if chance >= style.big_bet else 0))
            action = _nearest(view, ActionKind.MAS, wanted)
            if action is not None:
                return action
        ours, theirs = self._values(view)
        gain = min(view.pending_total + ours, our_need)
        loss = min(view.pending_total + theirs, their_need)
        doubted = max(0.0, chance - style.accept_bet_margin)
        accept = doubted * gain - (1 - doubted) * loss
        if refusal >= their_need or accept >= -refusal:
            return Action.quiero()
        return Action.no_quiero()

    def _refusal_cost(self, view: BotView) -> int:
        """Points a refusal gives the rivals at once and at the tanteo (rules §8.3, §9.2)."""
        lance = view.lance
        accepted = view.accepted_total
        mode = view.rules.deje_mode
        if mode is DejeMode.ALWAYS_ONE or accepted == 0:
            deje = 1
        elif mode is DejeMode.FEM_PLUS_ONE and lance in (Lance.PARES, Lance.JUEGO, Lance.PUNTO):
            deje = accepted + 1
        else:
            deje = accepted
        return deje + round(self._values(view)[1])

    def _values(self, view: BotView) -> tuple[float, float]:
        """What Pares, Juego or Punto pay beside the stake, to us and to the rivals (rules §9.2)."""
        lance = view.lance
        if lance is Lance.PUNTO:
            bonus = 1.0 if view.rules.punto_bonus else 0.0
            return bonus, bonus
        if lance not in _TYPICAL_VALUE:
            return 0.0, 0.0
        declared = view.declared(lance)
        facts = view.facts
        mine = float(facts.pares_value if lance is Lance.PARES else facts.juego_value)
        typical = _TYPICAL_VALUE[lance]
        ours = mine + (typical if declared.get(view.partner) else 0.0)
        theirs = typical * sum(1 for rival in view.rivals if declared.get(rival))
        return ours, theirs

    @staticmethod
    def _senas_of(view: BotView, seat: int) -> set[Sena]:
        """The señas `seat` sent since the last discard: what is still true of its hand (rules §12.3)."""
        if seat == view.seat:
            return {
                sent.sena
                for event in view.hand_events
                if isinstance(sent := event.payload, SenaDelivered)
                and sent.seat == seat
                and sent.mus_round == view.discard_rounds
            }
        return {
            sena.sena for sena in view.senas_received if sena.seat == seat and sena.mus_round == view.discard_rounds
        }


def _race(view: BotView) -> float:
    """The chance of winning the game from the score alone between equal teams, as a race to the target:
    the points the rivals still need over the points both teams need."""
    target = view.rules.target_score
    our_need = max(1, target - view.our_score)
    their_need = max(1, target - view.their_score)
    return their_need / (our_need + their_need)


def _without(hand: Ranks, thrown: tuple[int, ...]) -> Ranks:
    return tuple(rank for index, rank in enumerate(hand) if index not in thrown)


def _nearest(view: BotView, kind: ActionKind, amount: int) -> Action | None:
    """The legal bet of `kind` whose amount is nearest `amount`, or None when that kind is not legal."""
    options = view.actions_of(kind)
    if not options:
        return None
    return min(options, key=lambda action: abs(action.amount - amount))


def main() -> None:
    """Play one seat at the referee in MUS_REFEREE with the seat token in MUS_TOKEN."""
    raise SystemExit(run_main(RulesBot()))
