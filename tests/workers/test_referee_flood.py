"""A seat cannot void its match by flooding the standalone referee (issue 9): the worker retries a referee that is
out of call slots instead of voiding, each hosted seat's relay holds only a few connections and relays only `Play`
(tests/workers/test_relay.py), and the admin calls may have a server of their own. Real referee servers, real
sockets, real sandboxed processes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest

from mus.v1 import admin_pb2
from referee.engine.outcome import MatchTermination
from referee.engine.rules import Rules
from referee.service.server import start_admin_server, start_server
from referee.service.servicer import Referee
from tests.workers.test_sandbox import attacks, hostile, needs_bwrap
from workers import matches
from workers.launcher import Limits, resolve_program
from workers.matches import MAX_SEAT_CONNECTIONS, RefereeFailure, _call, play_on_referee

pytestmark = pytest.mark.slow  # real referee servers and sandboxed processes

FAST = Rules.from_options({"target_score": 5, "decision_timeout_s": 1, "time_bank_s": 1})
TOKEN = "flood-admin-token-0123456789"


@needs_bwrap
@pytest.mark.parametrize("admin_port", ["own", "shared"])
def test_a_seat_that_floods_the_referee_with_health_watches_cannot_void_its_match(
    tmp_path: Path, admin_port: str
) -> None:
    """The tester's attack: a hosted seat opens 5,000 `Health/Watch` streams through its socket. Its relay keeps 4
    connections and relays no Watch; the match is played to its end and stored,
    whether the worker's admin calls have a port of their own or share the public one."""
    program, _ = hostile(tmp_path, "health")

    async def on_referee() -> matches.PlayedMatch:
        referee = Referee(TOKEN)
        server, port = await start_server(referee, "127.0.0.1:0")
        admin_server, admin = await start_admin_server(referee, "127.0.0.1:0")
        try:
            return await play_on_referee(
                (program, resolve_program("random")),
                FAST,
                5,
                address=f"127.0.0.1:{port}",
                admin_address=f"127.0.0.1:{admin}" if admin_port == "own" else None,
                admin_token=TOKEN,
                log_dir=tmp_path,
                sandbox=Limits(),
            )
        finally:
            await admin_server.stop(grace=None)
            await server.stop(grace=None)

    played = asyncio.run(on_referee())
    assert played.match.outcome is not None, "a result, not a void"
    assert played.match.outcome.termination in (MatchTermination.NORMAL, MatchTermination.FORFEIT)
    assert all(incident.seat % 2 == 0 for incident in played.incidents), "the honest seats are untouched"
    for seat in (0, 2):
        log = played.logs[seat]
        assert log is not None
        (line,) = attacks(log)["health"]
        assert line.startswith("BLOCKED"), line
        counts = dict(part.split("=") for part in line.split()[1].split(","))
        assert int(counts.get("held", 0)) <= MAX_SEAT_CONNECTIONS * 8, line


class _Exhausted:
    """An admin method that says RESOURCE_EXHAUSTED `times` times, then answers."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.calls = 0

    async def __call__(self, request: Any, **_: Any) -> str:
        self.calls += 1
        if self.calls <= self.times:
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                grpc.aio.Metadata(),
                grpc.aio.Metadata(),
                details="Concurrent RPC limit exceeded!",
            )
        return "answered"


def test_a_referee_out_of_call_slots_is_retried_like_an_unreachable_one_not_a_refusal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    request = admin_pb2.GetTableStatusRequest(table_id="t")
    method = _Exhausted(times=3)
    answer: str = asyncio.run(_call(method, request, (), "here"))
    assert (answer, method.calls) == ("answered", 4)

    monkeypatch.setattr(matches, "RPC_RETRY_S", 0.15)
    with pytest.raises(RefereeFailure, match="RESOURCE_EXHAUSTED"):
        asyncio.run(_call(_Exhausted(times=1000), request, (), "here"))
    patient = _Exhausted(times=3)  # 0.7 s of pauses: past RPC_RETRY_S, within the poll's patience
    assert asyncio.run(_call(patient, request, (), "here", patience_s=30)) == "answered"
