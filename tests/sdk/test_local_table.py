"""The local table: hooks, faults for bad answers (rules §13), views, and duplicate deals."""

from __future__ import annotations

import logging
from collections import defaultdict

import pytest

from clients.bots.random_bot import RandomBot
from clients.sdk import NoAction
from clients.sdk.bot import Bot
from clients.sdk.local import LocalTable, play_duplicate
from clients.sdk.view import BotView
from referee.engine.actions import Action, ActionKind
from referee.engine.events import Event, EventKind
from referee.engine.match import DecisionKind, StepKind
from referee.engine.outcome import MatchOutcome, MatchTermination
from referee.engine.rules import Rules
from referee.engine.seats import team_of
from referee.engine.senas import Sena
from referee.engine.views import seat_view
from tests.support.events import fields


class RecordingBot(RandomBot):
    """A random bot that records everything the SDK gives it."""

    def __init__(self, seed: int, label: str = "") -> None:
        super().__init__(seed)
        self.label = label
        self.calls: list[str] = []
        self.events: list[Event] = []
        self.views: list[BotView] = []
        self.hand_starts: list[int] = []
        self.outcomes: list[MatchOutcome] = []

    def decide(self, view: BotView) -> Action:
        self.calls.append("decide")
        self.views.append(view)
        return super().decide(view)

    def on_hand_start(self, view: BotView) -> None:
        self.calls.append("hand_start")
        self.hand_starts.append(view.hand_number)

    def on_event(self, event: Event) -> None:
        self.events.append(event)

    def on_outcome(self, outcome: MatchOutcome) -> None:
        self.outcomes.append(outcome)


class ScriptedBot(RandomBot):
    """Answers its first `bad` decisions with `answer` (or raises it), then plays at random."""

    def __init__(self, answer: object, bad: int = 1) -> None:
        super().__init__(seed=7)
        self.answer = answer
        self.bad = bad
        self.views: list[BotView] = []

    def decide(self, view: BotView) -> Action:
        self.views.append(view)
        if len(self.views) <= self.bad:
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer  # type: ignore[return-value]
        return super().decide(view)


def recording_table(seed: int, rules: Rules | None = None) -> tuple[LocalTable, list[RecordingBot]]:
    bots = [RecordingBot(seed * 4 + seat) for seat in range(4)]
    return LocalTable(bots, rules, seed), bots


def test_hooks_see_every_visible_event_in_order_and_the_outcome_once() -> None:
    table, bots = recording_table(3)
    outcome = table.play()
    for seat, bot in enumerate(bots):
        visible = [event for event in table.match.events if event.visible_to(seat)]
        assert [event.seq for event in bot.events] == list(range(len(visible)))
        assert [(event.kind, fields(event)) for event in bot.events] == [
            (event.kind, fields(event)) for event in visible
        ]
        assert bot.outcomes == [outcome]


def test_on_hand_start_comes_once_before_the_first_decision_of_each_hand() -> None:
    for seed in range(5):
        table, bots = recording_table(seed)
        table.play()
        for bot in bots:
            assert bot.calls[0] == "hand_start"
            hands_decided = sorted({view.hand_number for view in bot.views})
            assert bot.hand_starts == hands_decided
            for index, call in enumerate(bot.calls):
                if call == "hand_start":
                    assert bot.calls[index + 1] == "decide"


def test_views_agree_with_the_engine_seat_view() -> None:
    table, _ = recording_table(11)
    match = table.match
    while not match.is_over:
        seat = match.awaited()[0]
        view = table.view(seat)
        engine = seat_view(match, seat)
        assert (view.seat, view.mano, view.dealer, view.hand_number) == (
            seat,
            engine.mano,
            engine.dealer,
            engine.hand_number,
        )
        assert (view.vaca, view.game, view.score, view.games, view.vacas) == (
            engine.vaca,
            engine.game,
            engine.score,
            engine.games,
            engine.vacas,
        )
        assert view.cards == engine.cards and view.legal_actions == engine.legal_actions
        assert [(e.kind, fields(e)) for e in view.hand_events] == [(e.kind, fields(e)) for e in engine.hand_events]
        assert view.decision is engine.decision
        table.step()


def test_a_sender_never_learns_whether_its_sena_leaked() -> None:
    rules = Rules.from_options({"sena_leak_probability": 1.0})
    table, bots = recording_table(5, rules)
    table.play()
    delivered = [e for e in table.match.events if e.kind is EventKind.SENA_DELIVERED]
    assert delivered, "random bots send señas in seña rounds"
    for seat, bot in enumerate(bots):
        for event in bot.events:
            if event.kind is EventKind.SENA_DELIVERED:
                sender = fields(event)["seat"]
                own_side = team_of(sender) == team_of(seat)
                assert (event.to is None) is not own_side


@pytest.mark.parametrize("policy", ["retry", "default_action"])
def test_an_illegal_action_is_a_fault_and_never_applied(policy: str) -> None:
    rules = Rules.from_options({"illegal_action_policy": policy})
    bad = Action.envido(2)  # never legal on the first decision of a hand (mus)
    table = LocalTable([ScriptedBot(bad), RandomBot(1), RandomBot(2), RandomBot(3)], rules, seed=4)
    match = table.match
    while match.awaited()[0] != 0:  # let the table reach seat 0's first decision
        table.step()
    table.step()
    assert match.faults[0] == 1
    assert table.illegal and table.illegal[0][0] == 0 and "envido 2" in table.illegal[0][1]
    assert match.log[-1].kind is StepKind.ILLEGAL or policy == "default_action"
    faults = [e for e in match.events if e.kind is EventKind.FAULT]
    assert [(fields(e)["seat"], fields(e)["cause"]) for e in faults] == [(0, "illegal_action")]
    assert not any(e.kind is EventKind.BET and fields(e)["seat"] == 0 for e in match.events)
    bot = table.bots[0]
    assert isinstance(bot, ScriptedBot)
    if policy == "retry":
        table.step()  # asked again, told why
        assert bot.views[1].decision is DecisionKind.MUS
        assert bot.views[1].rejection is not None and "envido 2" in bot.views[1].rejection
    else:
        called = [e for e in match.events if e.kind is EventKind.MUS_CALLED and fields(e)["seat"] == 0]
        assert fields(called[0])["mus"] is False  # the default action of §13: no mus
    assert table.play().faults == (1, 0)


@pytest.mark.parametrize(
    "answer",
    [RuntimeError("boom"), None, "paso", Action(ActionKind.PASO, amount=-1)],
    ids=["raises", "returns-none", "returns-a-string", "malformed-action"],
)
def test_a_decide_that_keeps_failing_forfeits_the_match_and_never_stops_the_table(answer: object) -> None:
    table = LocalTable([ScriptedBot(answer, bad=10**6), RandomBot(1), RandomBot(2), RandomBot(3)], seed=9)
    outcome = table.play()
    assert outcome.termination is MatchTermination.FORFEIT
    assert outcome.winner == 1
    assert outcome.faults == (3, 0)
    assert all(seat == 0 for seat, _ in table.illegal)


def test_a_decide_that_raises_no_action_is_a_fault_without_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """As over gRPC (`run_bot`): the bot has logged why, so the table only charges the fault."""
    table = LocalTable([ScriptedBot(NoAction("unreadable answer")), RandomBot(1), RandomBot(2), RandomBot(3)], seed=4)
    while table.match.awaited()[0] != 0:
        table.step()
    with caplog.at_level(logging.WARNING):
        table.step()
    assert table.illegal == [(0, "decide chose no action: unreadable answer")]
    assert not [record for record in caplog.records if record.exc_info], "no traceback"


def test_more_senas_than_a_window_takes_is_refused_as_the_referee_refuses_it() -> None:
    """On the referee, an Act with more señas than `max_senas_per_window` is a protocol error (rules §12.3 item 4);
    the local table once took it, dropping the extra señas, so a bot passed its tests and lost its stream."""
    four = (Sena.DOS_REYES, Sena.DOS_ASES, Sena.CIEGO, Sena.PARES)
    rules = Rules.from_options({"max_senas_per_window": 3})
    table = LocalTable([ScriptedBot(Action.mus(four)), RandomBot(1), RandomBot(2), RandomBot(3)], rules, seed=4)
    while table.match.awaited()[0] != 0:
        table.step()
    table.step()
    assert table.illegal == [
        (0, "a protocol error at the referee: an Act carries 4 señas: at most 3 (max_senas_per_window)")
    ]
    three = LocalTable([ScriptedBot(Action.mus(four[:3])), RandomBot(1), RandomBot(2), RandomBot(3)], rules, seed=4)
    while three.match.awaited()[0] != 0:
        three.step()
    three.step()
    assert three.illegal == [], "three are within the bound (a false one among them is rejected on its own)"


def test_a_discard_in_any_card_order_is_the_same_discard() -> None:
    class Backwards(RandomBot):
        def decide(self, view: BotView) -> Action:
            action = super().decide(view)
            if action.kind is ActionKind.DISCARD:
                return Action(ActionKind.DISCARD, cards=tuple(reversed(action.cards)))
            return action

    rules = Rules.from_options({"max_mus_rounds": 3})
    for seed in range(20):
        table = LocalTable([Backwards(seed * 4 + seat) for seat in range(4)], rules, seed)
        table.play()
        assert table.illegal == []


def test_duplicate_play_swaps_the_partnerships_over_the_same_deals() -> None:
    created: list[RecordingBot] = []

    def factory(label: str) -> RecordingBot:
        bot = RecordingBot(len(created), label)
        created.append(bot)
        return bot

    pair = play_duplicate(lambda: factory("A"), lambda: factory("B"), seed=21)
    assert [bot.label for bot in created] == ["A", "B", "A", "B", "B", "A", "B", "A"]
    first, second = created[:4], created[4:]
    dealt: dict[tuple[int, int], list[str]] = defaultdict(list)
    for match_bots in (first, second):
        for seat, bot in enumerate(match_bots):
            hand = -1
            for event in bot.events:
                if event.kind is EventKind.HAND_STARTED:
                    hand = fields(event)["hand"]
                elif event.kind is EventKind.CARDS_DEALT:
                    dealt[(hand, seat)].append(fields(event)["cards"])
    common = [key for key, cards in dealt.items() if len(cards) == 2]
    assert any(hand == 0 for hand, _ in common)
    for key in common:
        assert dealt[key][0] == dealt[key][1], key
    assert pair.a_as_team_0 == first[0].outcomes[0]
    assert pair.a_as_team_1 == second[0].outcomes[0]
    won, played = pair.a_games
    assert 0 <= won <= played and pair.a_matches_won in (0, 1, 2)


def test_a_table_needs_four_bots() -> None:
    with pytest.raises(ValueError, match="4 bots"):
        LocalTable([Bot()] * 3)


def test_the_same_seed_and_bots_replay_the_same_match() -> None:
    logs = []
    for _ in range(2):
        table = LocalTable([RandomBot(seat) for seat in range(4)], seed=5)
        table.play()
        logs.append([step.to_json() for step in table.match.log])
    assert logs[0] == logs[1]
