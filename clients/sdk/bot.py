"""`Bot`: the one class a bot author subclasses. Write `decide`; the hooks are optional."""

from __future__ import annotations

from clients.sdk.view import BotView
from referee.engine.actions import Action
from referee.engine.events import Event
from referee.engine.outcome import MatchOutcome


class Bot:
    """A Mus bot for one seat of one match.

    The SDK makes a fresh call for every decision the seat is asked (`decide`), on the local table
    (`clients.sdk.local.LocalTable`) and over gRPC (`clients.sdk.runner.run_bot`) alike. One instance plays
    one seat, so per-hand state may live on `self`. Hooks, in the order they come:

    - `on_event(event)`: every event this seat is given, in order (its own private ones included);
    - `on_hand_start(view)`: before the seat's first decision of each hand it is asked to decide in;
    - `on_outcome(outcome)`: once, when the match ends.

    An exception raised by `decide`, or a return value that is not a legal action, is a fault for the seat's
    team (rules §13); the SDK never lets it stop the match.
    """

    name: str = "bot"
    version: str = "0"

    def decide(self, view: BotView) -> Action:
        """Choose one of `view.legal_actions` (or, in a seña round, any list of acceptable señas)."""
        raise NotImplementedError(f"{type(self).__name__} must implement decide(view)")

    def on_hand_start(self, view: BotView) -> None:
        """Called before the seat's first decision of each hand, with that decision's view."""

    def on_event(self, event: Event) -> None:
        """Called for every event this seat is given, in order."""

    def on_outcome(self, outcome: MatchOutcome) -> None:
        """Called once with the result of the match."""
