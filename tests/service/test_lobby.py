"""Remote bots through the lobby: registration, offers, accept and decline, absence."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from mus.v1 import admin_pb2, admin_pb2_grpc, lobby_pb2, lobby_pb2_grpc
from referee.service import lobby as lobby_module
from referee.service.lobby import MAX_CALLS_PER_BOT, MAX_SESSIONS_PER_BOT, token_sha256
from tests.service.conftest import Running, with_referee
from tests.support.stream import PlayStream, StreamResult
from tests.support.wire import play_seat


class LobbyClient:
    """A raw lobby stream: send requests, read responses one at a time."""

    def __init__(self, channel: grpc.aio.Channel, token: str, capacity: int = 1) -> None:
        self.outgoing: asyncio.Queue[lobby_pb2.ConnectRequest | None] = asyncio.Queue()
        self.outgoing.put_nowait(
            lobby_pb2.ConnectRequest(
                hello=lobby_pb2.LobbyHello(bot_token=token, max_concurrent_matches=capacity, protocol_version=1)
            )
        )
        self.call = lobby_pb2_grpc.LobbyServiceStub(channel).Connect(self._requests())

    async def _requests(self) -> AsyncIterator[lobby_pb2.ConnectRequest]:
        while (message := await self.outgoing.get()) is not None:
            yield message

    async def read(self) -> lobby_pb2.ConnectResponse:
        return await asyncio.wait_for(self.call.read(), 10)  # type: ignore[arg-type]

    def send(self, message: lobby_pb2.ConnectRequest | None) -> None:
        self.outgoing.put_nowait(message)


async def accept_and_play(
    running: Running, lobby: LobbyClient, created: admin_pb2.CreateTableResponse, offer: lobby_pb2.MatchAssignment
) -> Any:
    """Accept `offer` (its seat confirmed), play the table's four seats to the end, return the referee's table."""
    lobby.send(lobby_pb2.ConnectRequest(accept=lobby_pb2.AcceptAssignment(assignment_id=offer.assignment_id)))
    assert (await lobby.read()).confirmed.assignment_id == offer.assignment_id
    tokens = list(created.seat_tokens)
    tokens[offer.seat] = offer.seat_token
    logs = await asyncio.gather(*(play_seat(running.address, token, seat) for seat, token in enumerate(tokens)))
    assert all(log.outcome is not None for log in logs)
    return running.referee.tables[created.table_id]


def admin(running: Running) -> tuple[admin_pb2_grpc.TableAdminServiceAsyncStub, tuple[tuple[str, str], ...]]:
    channel = grpc.aio.insecure_channel(running.address)
    return admin_pb2_grpc.TableAdminServiceStub(channel), (("authorization", f"Bearer {running.referee.admin_token}"),)


def remote_table_request(remote_seats: set[int]) -> admin_pb2.CreateTableRequest:
    seats = [
        admin_pb2.SeatConfig(bot_name="far" if seat in remote_seats else f"local{seat}", remote=seat in remote_seats)
        for seat in range(4)
    ]
    return admin_pb2.CreateTableRequest(seed=5, seats=seats, join_timeout_s=3.0)


def test_a_remote_bot_is_offered_its_seat_accepts_and_plays_the_match_to_the_end() -> None:
    async def scenario(running: Running) -> None:
        stub, auth = admin(running)
        await stub.RegisterRemoteBot(
            admin_pb2.RegisterRemoteBotRequest(bot_name="far", token_sha256=token_sha256("secret")), metadata=auth
        )
        async with grpc.aio.insecure_channel(running.address) as channel:
            lobby = LobbyClient(channel, "secret")
            welcome = await lobby.read()
            assert welcome.welcome.bot_name == "far"
            created = await stub.CreateTable(remote_table_request({1}), metadata=auth)
            assert created.seat_tokens[1] == "", "a remote seat's token is never handed to the caller"
            offer = (await lobby.read()).assignment
            assert offer.table_id == created.table_id and offer.seat == 1
            assert offer.referee_address == running.address
            table = await accept_and_play(running, lobby, created, offer)
            assert table.status.value == "finished" and table.incidents == []
            lobby.send(None)

    with_referee(scenario)


def test_a_declined_offer_goes_to_another_session_and_an_untaken_seat_is_absent() -> None:
    async def scenario(running: Running) -> None:
        stub, auth = admin(running)
        await stub.RegisterRemoteBot(
            admin_pb2.RegisterRemoteBotRequest(bot_name="far", token_sha256=token_sha256("secret")), metadata=auth
        )
        async with grpc.aio.insecure_channel(running.address) as channel:
            first = LobbyClient(channel, "secret")
            await first.read()  # welcomed first, so it is offered first
            second = LobbyClient(channel, "secret")
            await second.read()
            created = await stub.CreateTable(remote_table_request({3}), metadata=auth)
            offered_to, other = first, second
            response = await first.read()
            offer = response.assignment
            offered_to.send(
                lobby_pb2.ConnectRequest(decline=lobby_pb2.DeclineAssignment(assignment_id=offer.assignment_id))
            )
            assert (await offered_to.read()).withdrawn.assignment_id == offer.assignment_id
            again = (await other.read()).assignment
            assert again.assignment_id == offer.assignment_id and again.seat == 3
            other.send(lobby_pb2.ConnectRequest(decline=lobby_pb2.DeclineAssignment(assignment_id=again.assignment_id)))
            assert (await other.read()).withdrawn.assignment_id == offer.assignment_id
            tokens = list(created.seat_tokens)
            await asyncio.gather(*(play_seat(running.address, tokens[seat], seat) for seat in range(3)))
            table = running.referee.tables[created.table_id]
            assert next((incident.seat, incident.cause) for incident in table.incidents) == (3, "absent")
            assert table.status.value == "finished"
            assert table.match is not None and table.match.outcome is not None
            assert table.match.outcome.winner == 0, "the team of the absent seat forfeits"
            first.send(None)
            second.send(None)

    with_referee(scenario)


def test_a_remote_bot_busy_with_its_other_match_is_not_absent_the_table_waits_for_it_a_while() -> None:
    """Two workers began two matches of a bot that plays one at a time: the second recorded it absent while it
    played the first, and its team forfeited (an operator's review, stop 35). The table waits MAX_EXCUSES join
    timeouts more at most: a bot that plays slowly holds a worker waiting on it that long."""

    async def scenario(running: Running) -> None:
        stub, auth = admin(running)
        await register(running, "secret")
        async with grpc.aio.insecure_channel(running.address) as channel:
            lobby, playing, offer = await offered(running, channel, "secret")  # a session with room for one match
            lobby.send(lobby_pb2.ConnectRequest(accept=lobby_pb2.AcceptAssignment(assignment_id=offer.assignment_id)))
            assert (await lobby.read()).confirmed.assignment_id == offer.assignment_id
            tokens = list(playing.seat_tokens)
            tokens[1] = offer.seat_token
            streams = [PlayStream(channel, f"seat {seat}") for seat in range(4)]  # they join, then never answer
            for stream, token in zip(streams, tokens, strict=True):
                assert await stream.join(token)
            first = running.referee.tables[playing.table_id]
            while first.status.value != "running":
                await asyncio.sleep(0.01)
            request = remote_table_request({1})
            request.join_timeout_s = 0.4
            waiting = await stub.CreateTable(request, metadata=auth)
            second = running.referee.tables[waiting.table_id]
            await asyncio.sleep(1.0)  # two join deadlines
            assert second.status.value == "waiting" and second.incidents == [], "busy, not absent"
            await asyncio.sleep(1.4)  # the fifth deadline, at 2.0 s: MAX_EXCUSES = 4
            assert first.status.value == "running", "still busy"
            assert {(incident.seat, incident.cause) for incident in second.incidents} == {
                (seat, "absent") for seat in range(4)
            }, "no seat joined it"
            await stub.CancelTable(
                admin_pb2.CancelTableRequest(table_id=playing.table_id, reason="over"), metadata=auth
            )
            for stream in streams:
                stream.call.cancel()
            lobby.send(None)

    with_referee(scenario)


def test_an_offer_a_session_let_lapse_is_offered_to_it_again_a_moment_later(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lapsed offer passed its session over for good: with one session, the bot was never offered its seat again,
    nor any later one behind it, and was recorded absent (a review, stop 35)."""
    monkeypatch.setattr(lobby_module, "OFFER_RESPONSE_S", 0.2)

    async def scenario(running: Running) -> None:
        await register(running, "secret")
        async with grpc.aio.insecure_channel(running.address) as channel:
            lobby, created, first = await offered(running, channel, "secret")  # not answered
            assert (await lobby.read()).withdrawn.assignment_id == first.assignment_id
            again = (await lobby.read()).assignment
            assert again.table_id == created.table_id and again.seat == 1 and again.seat_token != first.seat_token
            lobby.send(None)

    with_referee(scenario)


@pytest.mark.parametrize(("token", "code"), [("wrong", grpc.StatusCode.UNAUTHENTICATED)])
def test_a_lobby_hello_with_an_unknown_token_is_refused(token: str, code: grpc.StatusCode) -> None:
    async def scenario(running: Running) -> None:
        async with grpc.aio.insecure_channel(running.address) as channel:
            lobby = LobbyClient(channel, token)
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await lobby.read()
            assert raised.value.code() == code and "unknown bot token" in (raised.value.details() or "")

    with_referee(scenario)


def test_creating_a_table_for_an_unregistered_remote_bot_fails_with_a_clear_status() -> None:
    async def scenario(running: Running) -> None:
        stub, auth = admin(running)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.CreateTable(remote_table_request({0}), metadata=auth)
        assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "'far' is not registered" in (raised.value.details() or "")

    with_referee(scenario)


async def offered(
    running: Running, channel: grpc.aio.Channel, token: str
) -> tuple[LobbyClient, admin_pb2.CreateTableResponse, lobby_pb2.MatchAssignment]:
    """A lobby session with `token` (registered), welcomed; a new table with seat 1 remote; the offer of that seat."""
    stub, auth = admin(running)
    lobby = LobbyClient(channel, token)
    await lobby.read()
    created = await stub.CreateTable(remote_table_request({1}), metadata=auth)
    return lobby, created, (await lobby.read()).assignment


async def refused_join(address: str, token: str, label: str) -> StreamResult:
    async with grpc.aio.insecure_channel(address) as channel:
        stream = PlayStream(channel, label)
        await stream.join(token)
        return await stream.refused()


async def register(running: Running, token: str) -> None:
    stub, auth = admin(running)
    request = admin_pb2.RegisterRemoteBotRequest(bot_name="far", token_sha256=token_sha256(token))
    await stub.RegisterRemoteBot(request, metadata=auth)


def test_a_revoked_token_is_refused_its_lobby_stream_ends_and_its_offer_is_withdrawn_with_its_seat_token() -> None:
    """Issue 9: after `mus bot remove` and a re-add, the old token still worked and its open lobby session kept
    getting seats. RevokeRemoteBot forgets the token, ends the session with UNAUTHENTICATED and withdraws the
    offer it held: that offer's seat token never joins, and the seat goes to the bot's new registration."""

    async def scenario(running: Running) -> None:
        stub, auth = admin(running)
        await register(running, "old")
        async with grpc.aio.insecure_channel(running.address) as channel:
            lobby, created, offer = await offered(running, channel, "old")
            revoked = await stub.RevokeRemoteBot(admin_pb2.RevokeRemoteBotRequest(bot_name="far"), metadata=auth)
            assert (revoked.was_registered, revoked.sessions_closed) == (True, 1)
            assert (await lobby.read()).withdrawn.assignment_id == offer.assignment_id
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                await lobby.read()
            assert ended.value.code() == grpc.StatusCode.UNAUTHENTICATED and "revoked" in (ended.value.details() or "")
            again = LobbyClient(channel, "old")
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await again.read()
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            stale = await refused_join(running.address, offer.seat_token, "withdrawn_offer")
            assert stale.code == "UNAUTHENTICATED", stale

            await register(running, "new")
            fresh = LobbyClient(channel, "new")
            await fresh.read()
            offered_again = (await fresh.read()).assignment
            assert offered_again.table_id == created.table_id and offered_again.seat == 1
            assert offered_again.seat_token != offer.seat_token
            fresh.send(None)
            unknown = await stub.RevokeRemoteBot(admin_pb2.RevokeRemoteBotRequest(bot_name="nobody"), metadata=auth)
            assert (unknown.was_registered, unknown.sessions_closed) == (False, 0)
            with pytest.raises(grpc.aio.AioRpcError) as no_admin:
                await stub.RevokeRemoteBot(admin_pb2.RevokeRemoteBotRequest(bot_name="far"))
            assert no_admin.value.code() == grpc.StatusCode.UNAUTHENTICATED

    with_referee(scenario)


def test_registering_a_new_token_for_a_known_bot_revokes_the_old_one() -> None:
    async def scenario(running: Running) -> None:
        await register(running, "old")
        async with grpc.aio.insecure_channel(running.address) as channel:
            lobby = LobbyClient(channel, "old")
            await lobby.read()
            await register(running, "old")  # the same hash again changes nothing
            assert running.referee.lobby.connected("far") == 1
            await register(running, "new")
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                await lobby.read()
            assert ended.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert running.referee.lobby.authenticate("old") is None
            assert running.referee.lobby.authenticate("new") == "far"

    with_referee(scenario)


def test_a_declined_offers_seat_token_never_joins_and_the_seat_comes_back_to_the_session_that_declined_it() -> None:
    """A one-session bot declines while its last match ends (the lobby frees its capacity first): the seat comes
    back to it a moment later (DECLINE_RETRY_S), with a new seat token. Passed over for good, it was charged
    `absent` (a newcomer's league with two workers, stop 29)."""

    async def scenario(running: Running) -> None:
        await register(running, "secret")
        async with grpc.aio.insecure_channel(running.address) as channel:
            lobby, created, offer = await offered(running, channel, "secret")
            lobby.send(
                lobby_pb2.ConnectRequest(
                    decline=lobby_pb2.DeclineAssignment(assignment_id=offer.assignment_id, reason="at capacity")
                )
            )
            assert (await lobby.read()).withdrawn.assignment_id == offer.assignment_id
            result = await refused_join(running.address, offer.seat_token, "declined")
            assert result.code == "UNAUTHENTICATED", result
            again = (await lobby.read()).assignment
            assert again.table_id == created.table_id and again.seat == 1 and again.seat_token != offer.seat_token
            table = await accept_and_play(running, lobby, created, again)
            assert table.incidents == [], "nobody absent"
            lobby.send(None)

    with_referee(scenario)


def test_an_offers_seat_token_joins_only_once_the_offer_is_confirmed() -> None:
    """A review joined with the seat token of an offer it had not accepted, then declined the offer: the stream
    kept the seat, past `max_concurrent_matches` and a revoked token (stop 34). lobby.proto: the token is valid
    for Play only once confirmed."""

    async def scenario(running: Running) -> None:
        await register(running, "secret")
        async with grpc.aio.insecure_channel(running.address) as channel:
            lobby, created, offer = await offered(running, channel, "secret")
            early = await refused_join(running.address, offer.seat_token, "unconfirmed")
            assert early.code == "FAILED_PRECONDITION" and "not confirmed" in early.details, early
            table = await accept_and_play(running, lobby, created, offer)
            assert table.incidents == [], "once confirmed, the same token joins"
            lobby.send(None)

    with_referee(scenario)


def test_a_garbage_first_lobby_message_gets_a_status_not_a_traceback() -> None:
    async def scenario(running: Running) -> tuple[grpc.StatusCode, str]:
        async with grpc.aio.insecure_channel(running.address) as channel:
            connect: Any = channel.stream_stream(
                "/mus.v1.LobbyService/Connect", request_serializer=None, response_deserializer=None
            )
            call = connect(iter([b"\x0a\xff\xff\xff\xff\x0f"]))
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                async for _ in call:
                    pass
            return raised.value.code(), raised.value.details() or ""

    code, details = with_referee(scenario)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "unreadable first message" in details, (code, details)


def test_a_bot_may_hold_several_lobby_sessions_and_a_tables_two_seats_go_to_one_of_them() -> None:
    """lobby.proto: a bot that runs on several machines holds one session on each; each is welcomed (never
    ALREADY_EXISTS) and has its own max_concurrent_matches. The two seats of the bot's team at one table are
    offered to one session, so a bot that runs one process gets both offers of its match."""

    async def scenario(running: Running) -> None:
        stub, auth = admin(running)
        await register(running, "secret")
        async with grpc.aio.insecure_channel(running.address) as channel:
            first = LobbyClient(channel, "secret")
            assert (await first.read()).welcome.bot_name == "far"
            second = LobbyClient(channel, "secret")
            assert (await second.read()).welcome.bot_name == "far", "a second session is welcomed"
            created = await stub.CreateTable(remote_table_request({1, 3}), metadata=auth)
            offers = [(await first.read()).assignment, (await first.read()).assignment]
            assert {offer.table_id for offer in offers} == {created.table_id}
            assert sorted(offer.seat for offer in offers) == [1, 3], "both seats of the team, to one session"
            other = await stub.CreateTable(remote_table_request({1, 3}), metadata=auth)
            busy_elsewhere = [(await second.read()).assignment, (await second.read()).assignment]
            assert {offer.table_id for offer in busy_elsewhere} == {other.table_id}, "capacity is per session"
            first.send(None)
            second.send(None)

    with_referee(scenario)


def test_a_bot_holds_at_most_so_many_lobby_sessions_and_one_more_closes_its_oldest() -> None:
    """A review held 4,096 lobby sessions with one token, all the referee's call slots: no seat could join any
    table (stop 34). A bot's ninth session closes its first, RESOURCE_EXHAUSTED; the others stay."""

    async def scenario(running: Running) -> tuple[list[str], int]:
        await register(running, "secret")
        async with grpc.aio.insecure_channel(running.address) as channel:
            sessions = []
            for _ in range(MAX_SESSIONS_PER_BOT):  # one after the other: the first is the oldest
                sessions.append(LobbyClient(channel, "secret"))
                assert (await sessions[-1].read()).welcome.bot_name == "far"
            extra = LobbyClient(channel, "secret")
            assert (await extra.read()).welcome.bot_name == "far"
            with pytest.raises(grpc.aio.AioRpcError) as closed:
                await sessions[0].read()
            open_ones = running.referee.lobby.connected("far")
            for session in [*sessions[1:], extra]:
                session.send(None)
            return [closed.value.code().name, closed.value.details() or ""], open_ones

    (code, details), open_ones = with_referee(scenario)
    assert code == "RESOURCE_EXHAUSTED" and "this, its oldest, is closed" in details, details
    assert open_ones == MAX_SESSIONS_PER_BOT


def test_a_bot_whose_closed_sessions_never_read_their_end_holds_no_more_lobby_calls_than_its_share() -> None:
    """A review's client kept its receive window shut and never read: each session closed to make room stayed
    stuck writing its welcome, its call slot held for the connection's life, and 4,500 streams with one token held
    every slot of the referee (helper-84). Past MAX_CALLS_PER_BOT calls, the bot's next Connect is refused."""
    shut = [("grpc.http2.lookahead_bytes", 1), ("grpc.http2.bdp_probe", 0)]
    hello = lobby_pb2.LobbyHello(bot_token="secret", max_concurrent_matches=1, protocol_version=1)

    async def scenario(running: Running) -> list[tuple[str, str]]:
        await register(running, "secret")
        held = asyncio.Event()

        async def requests() -> AsyncIterator[lobby_pb2.ConnectRequest]:
            yield lobby_pb2.ConnectRequest(hello=hello)
            await held.wait()

        async def ended(call: Any) -> tuple[str, str]:
            try:
                code = await asyncio.wait_for(call.code(), 3.0)
            except TimeoutError:
                return "held", ""
            return code.name, await call.details()

        async with grpc.aio.insecure_channel(running.address, options=shut) as channel:
            stub = lobby_pb2_grpc.LobbyServiceStub(channel)
            calls = [stub.Connect(requests()) for _ in range(3 * MAX_CALLS_PER_BOT)]
            return await asyncio.gather(*(ended(call) for call in calls))

    ends = with_referee(scenario)
    refused = [details for code, details in ends if code == "RESOURCE_EXHAUSTED"]
    assert len(refused) == 2 * MAX_CALLS_PER_BOT, ends
    assert all(f"holds {MAX_CALLS_PER_BOT} lobby streams, the most it may" in details for details in refused), refused


def test_a_remote_bot_waiting_at_a_table_it_has_joined_is_busy_not_absent_at_its_next() -> None:
    """A review's bot M kept its one session full with a running match, so a table T it shared with an honest bot H
    waited for it (M busy, excused). H had joined T at once and its one session was full with T, not yet begun:
    taken for idle, H was recorded absent at its next table and forfeited it (helper-84). A bot at every seat it
    was given, waiting for its rivals, is busy as one playing."""

    def table(names: list[str], remote: set[int]) -> admin_pb2.CreateTableRequest:
        seats = [admin_pb2.SeatConfig(bot_name=name, remote=seat in remote) for seat, name in enumerate(names)]
        return admin_pb2.CreateTableRequest(seed=5, seats=seats, join_timeout_s=0.4)

    async def take(lobby: LobbyClient, channel: grpc.aio.Channel, offers: int) -> list[PlayStream]:
        """Accept `offers` offers of the session and join their seats."""
        given = [(await lobby.read()).assignment for _ in range(offers)]
        for offer in given:
            lobby.send(lobby_pb2.ConnectRequest(accept=lobby_pb2.AcceptAssignment(assignment_id=offer.assignment_id)))
        assert {(await lobby.read()).confirmed.assignment_id for _ in given} == {offer.assignment_id for offer in given}
        streams = [PlayStream(channel, f"seat {offer.seat}") for offer in given]
        for stream, offer in zip(streams, given, strict=True):
            assert await stream.join(offer.seat_token)
        return streams

    async def scenario(running: Running) -> tuple[str, list[Any]]:
        stub, auth = admin(running)
        for name, token in (("far", "m-secret"), ("near", "h-secret")):
            request = admin_pb2.RegisterRemoteBotRequest(bot_name=name, token_sha256=token_sha256(token))
            await stub.RegisterRemoteBot(request, metadata=auth)
        async with grpc.aio.insecure_channel(running.address) as channel:
            far = LobbyClient(channel, "m-secret")
            await far.read()
            running_table = await stub.CreateTable(table(["far", "x", "far", "x"], {0, 2}), metadata=auth)
            streams = await take(far, channel, 2)
            for seat in (1, 3):
                streams.append(PlayStream(channel, f"hosted {seat}"))
                assert await streams[-1].join(running_table.seat_tokens[seat])
            shared = await stub.CreateTable(table(["far", "near", "far", "near"], {0, 1, 2, 3}), metadata=auth)
            near = LobbyClient(channel, "h-secret")
            await near.read()
            streams += await take(near, channel, 2)  # near joins the shared table at once; far is busy
            created = await stub.CreateTable(table(["near", "y", "near", "y"], {0, 2}), metadata=auth)
            await asyncio.sleep(1.0)  # two join deadlines of its next table
            shared_status = running.referee.tables[shared.table_id].status.value
            nexts = running.referee.tables[created.table_id]
            status, incidents = nexts.status.value, list(nexts.incidents)
            for table_id in (running_table.table_id, shared.table_id, created.table_id):
                with contextlib.suppress(grpc.aio.AioRpcError):  # one already over (without the fix: `created`)
                    await stub.CancelTable(
                        admin_pb2.CancelTableRequest(table_id=table_id, reason="over"), metadata=auth
                    )
            for stream in streams:
                stream.call.cancel()
            far.send(None)
            near.send(None)
            assert shared_status == "waiting", "the shared table waits for far, busy with its running match"
            return status, incidents

    status, incidents = with_referee(scenario)
    assert status == "waiting" and incidents == [], (status, incidents)
