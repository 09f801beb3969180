"""`RandomBot`: a legal action chosen at random. The floor every other bot must clear."""

from __future__ import annotations

import random

from clients.sdk.bot import Bot
from clients.sdk.runner import run_main
from clients.sdk.view import BotView
from referee.engine.actions import Action
from referee.engine.selfplay import random_action


class RandomBot(Bot):
    """Plays a random legal action: a legal kind uniformly, then one action of that kind uniformly.

    Choosing the kind first (the engine's `random_action`, also used by its self-play tests) keeps paso,
    quiero and no_quiero as likely as a bet, instead of letting the many bet amounts and discards drown them.
    `seed` fixes its choices; None draws a fresh seed.
    """

    name = "random"
    version = "1"

    def __init__(self, seed: int | None = None) -> None:
        self.rng = random.Random(seed)

    def decide(self, view: BotView) -> Action:
        return random_action(self.rng, view.legal_actions)


def main() -> None:
    """Play one seat at the referee in MUS_REFEREE with the seat token in MUS_TOKEN."""
    raise SystemExit(run_main(RandomBot()))
