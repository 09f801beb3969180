"""`run_bot` and `run_remote_bot` against small scripted referees on a real gRPC server (127.0.0.1:0).

The scripted servicers check what the SDK sends and answer like the referee's contract (play.proto,
lobby.proto) says; the real referee is tested end to end with the SDK elsewhere.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from clients.bots.random_bot import RandomBot
from clients.sdk.bot import Bot
from clients.sdk.errors import RefereeError, SdkError
from clients.sdk.runner import run_bot, run_remote_bot
from clients.sdk.view import BotView
from mus.v1 import lobby_pb2, lobby_pb2_grpc, play_pb2, play_pb2_grpc
from mus.v1 import types_pb2 as pb
from referee.engine.actions import Action
from referee.engine.events import Event, EventKind
from referee.engine.outcome import MatchOutcome

OUTCOME = pb.Outcome(
    winner_team=pb.TEAM_1,
    termination=pb.MATCH_TERMINATION_NORMAL,
    games=[pb.GameResult(winner_team=pb.TEAM_1, score_team_1=40, termination=pb.GAME_TERMINATION_ORDAGO)],
    vacas=[pb.VacaResult(winner_team=pb.TEAM_1, games_team_1=1)],
    vacas_team_1=1,
)
CARDS = [
    pb.Card(rank=12, suit=pb.SUIT_OROS),
    pb.Card(rank=3, suit=pb.SUIT_COPAS),
    pb.Card(rank=1, suit=pb.SUIT_ESPADAS),
    pb.Card(rank=7, suit=pb.SUIT_BASTOS),
]
MUS_LEGAL = [pb.LegalAction(kind=pb.ACTION_KIND_MUS), pb.LegalAction(kind=pb.ACTION_KIND_NO_MUS)]


def event(seq: int, **payload: object) -> play_pb2.PlayResponse:
    return play_pb2.PlayResponse(event=pb.Event(seq=seq, **payload))  # type: ignore[arg-type]


def mus_request(decision_id: int) -> play_pb2.PlayResponse:
    view = pb.SeatView(seat=1, mano=1, dealer=0, cards=CARDS)
    view.events_this_hand.extend(
        [
            pb.Event(seq=0, hand_started=pb.HandStarted(hand_number=0, mano=1, dealer=0)),
            pb.Event(seq=1, cards_dealt=pb.CardsDealt(seat=1, cards=CARDS)),
        ]
    )
    request = play_pb2.DecisionRequest(
        decision_id=decision_id,
        kind=pb.DECISION_KIND_MUS,
        view=view,
        legal_actions=MUS_LEGAL,
        decision_time_left_ms=10000,
        bank_time_left_ms=60000,
    )
    return play_pb2.PlayResponse(decision_request=request)


class ScriptedReferee(play_pb2_grpc.PlayServiceServicer):
    """One seat's match in two streams: a decision, a rejection and a retry, a dropped stream, a rejoin."""

    def __init__(self, refused_rejoins: tuple[tuple[grpc.StatusCode, str], ...] = (), refused_joins: int = 0) -> None:
        self.joins: list[play_pb2.Join] = []
        self.acts: list[play_pb2.Act] = []
        self.refused_rejoins = list(refused_rejoins)
        """The statuses the rejoins after the drop get, one each, before one is taken."""
        self.refused_joins = refused_joins
        """How many first joins are refused RESOURCE_EXHAUSTED (a referee full of streams waiting for theirs)."""

    def Play(
        self, request_iterator: Iterator[play_pb2.PlayRequest], context: grpc.ServicerContext
    ) -> Iterator[play_pb2.PlayResponse]:
        join = next(request_iterator).join
        if self.refused_joins:
            self.refused_joins -= 1
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too many streams waiting to authenticate")
        self.joins.append(join)
        if join.seat_token != "seat-token":
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "unknown seat token")
        rules = {"target_score": "30"}
        if len(self.joins) == 1:
            yield play_pb2.PlayResponse(joined=play_pb2.Joined(seat=1, table_id="t1", rules=rules, protocol_version=1))
            yield event(0, hand_started=pb.HandStarted(hand_number=0, mano=1, dealer=0))
            yield event(1, cards_dealt=pb.CardsDealt(seat=1, cards=CARDS))
            yield mus_request(7)
            self.acts.append(next(request_iterator).act)
            yield play_pb2.PlayResponse(
                action_rejected=play_pb2.ActionRejected(
                    decision_id=7,
                    code=play_pb2.REJECTION_CODE_ILLEGAL_ACTION,
                    reason="paso is not legal now",
                    legal_actions=MUS_LEGAL,
                    fault_counted=True,
                    decision_open=True,
                    decision_time_left_ms=4000,
                    bank_time_left_ms=60000,
                )
            )
            self.acts.append(next(request_iterator).act)
            yield event(2, mus_called=pb.MusCalled(seat=1, mus=True))
            context.abort(grpc.StatusCode.UNAVAILABLE, "the network went away")
        if self.refused_rejoins:
            context.abort(*self.refused_rejoins.pop(0))
        yield play_pb2.PlayResponse(
            joined=play_pb2.Joined(seat=1, table_id="t1", rules=rules, protocol_version=1, resumed=True)
        )
        yield event(2, mus_called=pb.MusCalled(seat=1, mus=True))  # a duplicate the bot must not see twice
        yield event(3, mus_called=pb.MusCalled(seat=2, mus=False))
        yield play_pb2.PlayResponse(outcome=OUTCOME)


class FirstPasoThenMus(Bot):
    name = "scripted"
    version = "2"

    def __init__(self) -> None:
        self.views: list[BotView] = []
        self.events: list[Event] = []
        self.hand_starts = 0
        self.outcomes: list[MatchOutcome] = []

    def decide(self, view: BotView) -> Action:
        self.views.append(view)
        return Action.paso() if len(self.views) == 1 else Action.mus()

    def on_hand_start(self, view: BotView) -> None:
        self.hand_starts += 1

    def on_event(self, event: Event) -> None:
        self.events.append(event)

    def on_outcome(self, outcome: MatchOutcome) -> None:
        self.outcomes.append(outcome)


@pytest.fixture
def server() -> Iterator[tuple[grpc.Server, str]]:
    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    port = grpc_server.add_insecure_port("127.0.0.1:0")
    yield grpc_server, f"127.0.0.1:{port}"
    grpc_server.stop(grace=None)


def test_run_bot_plays_retries_after_a_rejection_and_rejoins_from_the_next_event(
    server: tuple[grpc.Server, str],
) -> None:
    grpc_server, address = server
    referee = ScriptedReferee()
    play_pb2_grpc.add_PlayServiceServicer_to_server(referee, grpc_server)
    grpc_server.start()
    bot = FirstPasoThenMus()
    outcome = run_bot(bot, address, "seat-token", grace_s=5)
    assert outcome.winner == 1 and outcome.games[0].termination.value == "ordago"
    assert bot.outcomes == [outcome]
    first, second = referee.joins
    assert (first.seat_token, first.bot_name, first.bot_version, first.protocol_version, first.next_seq) == (
        "seat-token",
        "scripted",
        "2",
        1,
        0,
    )
    assert second.next_seq == 3
    assert [act.decision_id for act in referee.acts] == [7, 7]
    assert [act.action.kind for act in referee.acts] == [pb.ACTION_KIND_PASO, pb.ACTION_KIND_MUS]
    retry = bot.views[1]
    assert bot.views[0].rejection is None and retry.rejection == "paso is not legal now"
    assert retry.decision_time_left_s == 4.0 and retry.rules.target_score == 30
    assert [e.seq for e in bot.events] == [0, 1, 2, 3]
    assert [e.kind for e in bot.events] == [
        EventKind.HAND_STARTED,
        EventKind.CARDS_DEALT,
        EventKind.MUS_CALLED,
        EventKind.MUS_CALLED,
    ]
    assert bot.hand_starts == 1


def test_a_rejoin_refused_as_too_soon_or_racing_the_old_stream_is_tried_again(server: tuple[grpc.Server, str]) -> None:
    """ALREADY_EXISTS (the referee still holds the old stream) and RESOURCE_EXHAUSTED (too many joins at once,
    `table.JOIN_BURST`) refuse only that join: the seat waits and joins again, and plays on."""
    grpc_server, address = server
    referee = ScriptedReferee(
        refused_rejoins=(
            (grpc.StatusCode.ALREADY_EXISTS, "seat 1 of table t1 already has a live stream"),
            (grpc.StatusCode.RESOURCE_EXHAUSTED, "seat 1 joined too often: wait, then join again"),
        )
    )
    play_pb2_grpc.add_PlayServiceServicer_to_server(referee, grpc_server)
    grpc_server.start()
    outcome = run_bot(FirstPasoThenMus(), address, "seat-token", grace_s=5)
    assert outcome.winner == 1
    assert [join.next_seq for join in referee.joins] == [0, 3, 3, 3]


def test_a_first_join_refused_as_resource_exhausted_is_tried_again(server: tuple[grpc.Server, str]) -> None:
    """A referee full of streams waiting for their Join refuses a new one RESOURCE_EXHAUSTED: the seat waits and
    joins again instead of exiting, which a review turned into two crashes and a forfeit (stop 34)."""
    grpc_server, address = server
    referee = ScriptedReferee(refused_joins=2)
    play_pb2_grpc.add_PlayServiceServicer_to_server(referee, grpc_server)
    grpc_server.start()
    assert run_bot(FirstPasoThenMus(), address, "seat-token", grace_s=5).winner == 1
    assert referee.refused_joins == 0 and [join.next_seq for join in referee.joins] == [0, 3]


def test_a_crashing_decide_answers_with_no_action_so_the_referee_counts_a_fault(
    server: tuple[grpc.Server, str],
) -> None:
    grpc_server, address = server
    referee = ScriptedReferee()
    play_pb2_grpc.add_PlayServiceServicer_to_server(referee, grpc_server)
    grpc_server.start()

    class Crashes(FirstPasoThenMus):
        def decide(self, view: BotView) -> Action:
            if not self.views:
                self.views.append(view)
                raise RuntimeError("a bug in the bot")
            return super().decide(view)

    run_bot(Crashes(), address, "seat-token", grace_s=5)
    assert [act.action.kind for act in referee.acts] == [pb.ACTION_KIND_UNSPECIFIED, pb.ACTION_KIND_MUS]


def test_a_refused_join_is_a_referee_error_that_names_the_status(server: tuple[grpc.Server, str]) -> None:
    grpc_server, address = server
    play_pb2_grpc.add_PlayServiceServicer_to_server(ScriptedReferee(), grpc_server)
    grpc_server.start()
    with pytest.raises(RefereeError, match="UNAUTHENTICATED: unknown seat token") as caught:
        run_bot(RandomBot(0), address, "stolen")
    assert caught.value.code == "UNAUTHENTICATED"


def test_missing_settings_are_an_sdk_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MUS_REFEREE", raising=False)
    with pytest.raises(SdkError, match="MUS_REFEREE"):
        run_bot(RandomBot(0), token="t")


def test_an_unreachable_referee_gives_up_after_the_grace_period() -> None:
    with pytest.raises(SdkError, match=r"could not join again within 0\.3 s"):
        run_bot(RandomBot(0), "127.0.0.1:1", "t", grace_s=0.3)


class ScriptedLobby(lobby_pb2_grpc.LobbyServiceServicer):
    """Offers two seats to a bot that plays one match at a time; the first match waits for `release`."""

    def __init__(self, address: str, referee: BlockingReferee) -> None:
        self.address = address
        self.referee = referee
        self.hello: lobby_pb2.LobbyHello | None = None
        self.answers: list[str] = []

    def Connect(
        self, request_iterator: Iterator[lobby_pb2.ConnectRequest], context: grpc.ServicerContext
    ) -> Iterator[lobby_pb2.ConnectResponse]:
        self.hello = next(request_iterator).hello
        yield lobby_pb2.ConnectResponse(welcome=lobby_pb2.LobbyWelcome(bot_name="remote", protocol_version=1))
        offer = lobby_pb2.MatchAssignment(
            assignment_id="a1", table_id="t1", seat_token="seat-a1", referee_address=self.address
        )
        yield lobby_pb2.ConnectResponse(assignment=offer)
        self.answers.append(next(request_iterator).WhichOneof("message") or "")
        yield lobby_pb2.ConnectResponse(confirmed=lobby_pb2.AssignmentConfirmed(assignment_id="a1"))
        assert self.referee.joined.wait(10)
        second = lobby_pb2.MatchAssignment(
            assignment_id="a2", table_id="t2", seat_token="seat-a2", referee_address=self.address
        )
        yield lobby_pb2.ConnectResponse(assignment=second)
        self.answers.append(next(request_iterator).WhichOneof("message") or "")
        self.referee.release.set()


class BlockingReferee(play_pb2_grpc.PlayServiceServicer):
    def __init__(self) -> None:
        self.joined = threading.Event()
        self.release = threading.Event()
        self.tokens: list[str] = []

    def Play(
        self, request_iterator: Iterator[play_pb2.PlayRequest], context: grpc.ServicerContext
    ) -> Iterator[play_pb2.PlayResponse]:
        self.tokens.append(next(request_iterator).join.seat_token)
        yield play_pb2.PlayResponse(joined=play_pb2.Joined(seat=2, table_id="t", protocol_version=1))
        self.joined.set()
        assert self.release.wait(10)
        yield play_pb2.PlayResponse(outcome=OUTCOME)


def test_run_remote_bot_accepts_up_to_its_limit_and_plays_each_confirmed_match(
    server: tuple[grpc.Server, str],
) -> None:
    grpc_server, address = server
    referee = BlockingReferee()
    lobby = ScriptedLobby(address, referee)
    play_pb2_grpc.add_PlayServiceServicer_to_server(referee, grpc_server)
    lobby_pb2_grpc.add_LobbyServiceServicer_to_server(lobby, grpc_server)
    grpc_server.start()
    results = run_remote_bot(lambda: RandomBot(0), address, "bot-token", max_concurrent_matches=1)
    assert lobby.hello is not None
    assert (lobby.hello.bot_token, lobby.hello.max_concurrent_matches, lobby.hello.protocol_version) == (
        "bot-token",
        1,
        1,
    )
    assert lobby.answers == ["accept", "decline"]
    assert referee.tokens == ["seat-a1"]
    assert len(results) == 1 and isinstance(results[0], MatchOutcome) and results[0].winner == 1
