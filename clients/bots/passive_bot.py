"""`PassiveBot`: never bets and never accepts; cuts the mus at once. A baseline that plays only its cards."""

from __future__ import annotations

from clients.sdk.bot import Bot
from clients.sdk.runner import run_main
from clients.sdk.view import BotView
from referee.engine.actions import Action, ActionKind

_PREFERENCE = (
    ActionKind.NO_MUS,
    ActionKind.PASO,
    ActionKind.NO_QUIERO,
    ActionKind.DECLARE,
    ActionKind.SENAS,
    ActionKind.DISCARD,
)


class PassiveBot(Bot):
    """Takes the first available of: no mus, paso, no quiero, the true declaration, no señas, a discard.

    It wins points only when everybody passes and its cards are best, so any bot that bets sensibly should
    beat it; it is the league's check that betting is worth something.
    """

    name = "passive"
    version = "1"

    def decide(self, view: BotView) -> Action:
        for kind in _PREFERENCE:
            actions = view.actions_of(kind)
            if actions:
                return actions[0]
        return view.legal_actions[0]


def main() -> None:
    """Play one seat at the referee in MUS_REFEREE with the seat token in MUS_TOKEN."""
    raise SystemExit(run_main(PassiveBot()))
