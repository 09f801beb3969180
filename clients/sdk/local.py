"""The local table: four bots play a match in-process on the engine, with no network and no clock.

It gives bots the same `BotView` and the same hooks as the gRPC runner, and applies the referee's fault rules
(rules §13) to what a bot returns, so a bot tried here behaves the same at a real table. It is also how
bots are measured against each other: `play_duplicate` plays one seed twice with the partnerships swapped.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from clients.sdk.bot import Bot
from clients.sdk.errors import NoAction
from clients.sdk.view import BotView, bot_view
from referee.engine.actions import Action, ActionKind
from referee.engine.cards import sort_hand
from referee.engine.chance import Setup
from referee.engine.errors import IllegalActionError, MalformedError, MatchOverError
from referee.engine.events import Event
from referee.engine.legal import size_problem
from referee.engine.match import Match
from referee.engine.outcome import MatchOutcome
from referee.engine.rules import IllegalActionPolicy, Rules
from referee.engine.views import SeatLog

logger = logging.getLogger(__name__)

BotFactory = Callable[[], Bot]
"""Makes a fresh bot for one seat; a match needs four."""


class LocalTable:
    """Four bots, in seat order (seats 0 and 2 are team 0), playing one match on the engine.

    `match` is the engine's `Match`, for tests and replays. `illegal` lists every fault a bot caused, as
    (seat, reason), in order.
    """

    def __init__(
        self, bots: Sequence[Bot], rules: Rules | None = None, seed: int = 0, *, setup: Setup | None = None
    ) -> None:
        if len(bots) != 4:
            raise ValueError(f"a table seats 4 bots in seat order, got {len(bots)}")
        self.bots = tuple(bots)
        self.rules = rules if rules is not None else Rules()
        self.match = Match(self.rules, seed, setup)
        self.illegal: list[tuple[int, str]] = []
        self._log = SeatLog(self.match)
        self._delivered = [0, 0, 0, 0]
        self._started_hand = [-1, -1, -1, -1]
        self._rejection: tuple[int, str] | None = None
        self._outcome_sent = False

    def play(self) -> MatchOutcome:
        """Play the match to its end and return the outcome; every bot's `on_outcome` is called once."""
        while not self.match.is_over:
            self.step()
        self._deliver_events()
        outcome = self.match.outcome
        assert outcome is not None
        if not self._outcome_sent:
            self._outcome_sent = True
            for seat, bot in enumerate(self.bots):
                _hook(seat, bot.on_outcome, outcome)
        return outcome

    def step(self) -> None:
        """Ask the first awaited seat for one decision and apply it, or charge it a fault (rules §13)."""
        match = self.match
        if match.is_over:
            raise MatchOverError("the match is over")
        seat = match.awaited()[0]
        view = self.view(seat)
        bot = self.bots[seat]
        if self._started_hand[seat] != view.hand_number:
            self._started_hand[seat] = view.hand_number
            _hook(seat, bot.on_hand_start, view)
        reason: str | None
        try:
            chosen = bot.decide(view)
        except NoAction as error:  # as over gRPC: no action, a fault, and the bot has logged why
            action, reason = None, f"decide chose no action: {error}"
        except Exception as error:  # a crashing bot is a fault, never the end of the table
            logger.warning("seat %d: decide raised", seat, exc_info=True)
            action, reason = None, f"decide raised {type(error).__name__}: {error}"
        else:
            action, reason = self._vet(seat, chosen)
        self._rejection = None
        if action is not None:
            match.apply(seat, action)
            return
        assert reason is not None
        self.illegal.append((seat, reason))
        match.record_illegal_action(seat, reason)
        retry = self.rules.illegal_action_policy is IllegalActionPolicy.RETRY
        if retry and not match.is_over:
            self._rejection = (seat, reason)

    def view(self, seat: int) -> BotView:
        """The `BotView` of an awaited seat, built from the engine's view as `run_bot` builds it from the wire.

        Events up to now are delivered first (with their `on_event` hooks), so the view and the hooks agree.
        """
        self._deliver_events()
        rejection = self._rejection[1] if self._rejection is not None and self._rejection[0] == seat else None
        rules = self.rules
        return bot_view(
            self._log.view(seat),
            rules,
            decision_time_left_s=rules.decision_timeout_s,
            bank_time_left_s=rules.time_bank_s,
            rejection=rejection,
        )

    def events_seen(self, seat: int) -> tuple[Event, ...]:
        """Every event delivered to `seat` so far, numbered as that seat saw them."""
        return tuple(self._log.events(seat))

    def _vet(self, seat: int, chosen: object) -> tuple[Action | None, str | None]:
        """The action to apply, or why the bot's answer is a fault, as the referee would judge it on the wire.
        A false seña is no fault: the engine rejects it on its own when the action is applied (§12.3 item 4)."""
        if not isinstance(chosen, Action):
            return None, f"decide returned {type(chosen).__name__}, not an Action"
        problem = chosen.malformed()
        if problem is not None:
            return None, problem
        problem = size_problem(len(chosen.senas), len(chosen.cards), self.rules)
        if problem is not None:  # the referee ends the seat's stream for it: a protocol error, not applied
            return None, f"a protocol error at the referee: {problem}"
        action = chosen
        if chosen.kind is ActionKind.DISCARD:  # the referee reads a discard's cards in any order
            action = dataclasses.replace(chosen, cards=sort_hand(chosen.cards))
        try:
            self.match.check(seat, action)
        except (IllegalActionError, MalformedError) as error:
            return None, str(error)
        return action, None

    def _deliver_events(self) -> None:
        """Give each seat the new events it may see, numbered per seat as on the wire, and call `on_event`."""
        self._log.update()
        for seat in range(4):
            for event in self._log.events(seat, self._delivered[seat]):
                _hook(seat, self.bots[seat].on_event, event)
            self._delivered[seat] = self._log.seen(seat)


def _hook(seat: int, hook: Callable[[Any], None], argument: object) -> None:
    """Call a bot hook; a hook that raises is logged and ignored (hooks are advice, not decisions)."""
    try:
        hook(argument)
    except Exception:
        logger.warning("seat %d: %s raised", seat, getattr(hook, "__name__", "a hook"), exc_info=True)


@dataclass(frozen=True, slots=True)
class DuplicateOutcome:
    """Both matches of a duplicate deal: the same seed with bot A first as team 0, then as team 1."""

    seed: int
    a_as_team_0: MatchOutcome
    a_as_team_1: MatchOutcome

    @property
    def a_matches_won(self) -> int:
        """Matches bot A won, 0..2."""
        return int(self.a_as_team_0.winner == 0) + int(self.a_as_team_1.winner == 1)

    @property
    def a_games(self) -> tuple[int, int]:
        """(games A won, games with a winner) over both matches; a game cut by a forfeit has no winner."""
        won = played = 0
        for outcome, team in ((self.a_as_team_0, 0), (self.a_as_team_1, 1)):
            for game in outcome.games:
                if game.winner is not None:
                    played += 1
                    won += int(game.winner == team)
        return won, played


def play_duplicate(
    bot_a_factory: BotFactory, bot_b_factory: BotFactory, seed: int = 0, rules: Rules | None = None
) -> DuplicateOutcome:
    """Play `seed` twice, A as team 0 then as team 1, so both sides get the same deals (rules §4.1).

    Every hand's deck depends on the seed and the hand number only, so the luck of the cards cancels out over
    the pair: what is left is the play. Each seat gets a fresh bot from its factory.
    """

    def seats(team_0: BotFactory, team_1: BotFactory) -> list[Bot]:
        return [team_0(), team_1(), team_0(), team_1()]

    first = LocalTable(seats(bot_a_factory, bot_b_factory), rules, seed).play()
    second = LocalTable(seats(bot_b_factory, bot_a_factory), rules, seed).play()
    return DuplicateOutcome(seed, first, second)
