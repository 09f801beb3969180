"""The referee's state file: remote bot registrations (names and token hashes) kept across restarts."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest

from mus.v1 import admin_pb2, admin_pb2_grpc
from referee.service.lobby import STATE_FORMAT, StateError, read_state, token_sha256, write_state
from referee.service.servicer import Referee
from tests.service.conftest import Running, with_referee


def test_registrations_and_revocations_are_written_at_once_and_read_back_by_a_new_referee(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    first = Referee(state_path=state)
    first.lobby.register("alpha", token_sha256("a"))
    first.lobby.register("beta", token_sha256("b"))
    assert read_state(state) == {"alpha": token_sha256("a"), "beta": token_sha256("b")}
    first.lobby.register("beta", token_sha256("b2"))  # a new token replaces (and revokes) the old one
    first.lobby.revoke("alpha")
    second = Referee(state_path=state)
    assert second.lobby.registered() == ["beta"]
    assert second.lobby.authenticate("b2") == "beta"
    assert second.lobby.authenticate("b") is None and second.lobby.authenticate("a") is None
    assert json.loads(state.read_text())["format"] == STATE_FORMAT
    assert [path.name for path in tmp_path.iterdir()] == ["state.json"], "no temporary file is left behind"


def test_a_missing_state_file_is_an_empty_start_and_a_foreign_one_is_refused(tmp_path: Path) -> None:
    assert read_state(tmp_path / "absent.json") == {}
    foreign = tmp_path / "foreign.json"
    foreign.write_text('{"remote_bots": {"x": "' + "0" * 64 + '"}}')
    with pytest.raises(StateError, match="is not a referee state file"):
        Referee(state_path=foreign)
    write_state(foreign, {"x": "0" * 64})
    assert read_state(foreign) == {"x": "0" * 64}


def test_a_state_file_that_cannot_be_written_is_an_internal_status_and_the_registration_holds_in_memory(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")

    async def scenario(running: Running) -> None:
        running.referee.lobby.state_path = blocker / "state.json"  # its folder is a file: every write fails
        auth = (("authorization", f"Bearer {running.referee.admin_token}"),)
        async with grpc.aio.insecure_channel(running.address) as channel:
            stub = admin_pb2_grpc.TableAdminServiceStub(channel)
            request = admin_pb2.RegisterRemoteBotRequest(bot_name="far", token_sha256=token_sha256("t"))
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.RegisterRemoteBot(request, metadata=auth)
        assert refused.value.code() == grpc.StatusCode.INTERNAL
        assert "cannot write the state file" in (refused.value.details() or "")
        assert running.referee.lobby.authenticate("t") == "far"
        renewed = admin_pb2.RegisterRemoteBotRequest(bot_name="far", token_sha256=token_sha256("t2"))
        async with grpc.aio.insecure_channel(running.address) as channel:
            stub = admin_pb2_grpc.TableAdminServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as again:
                await stub.RegisterRemoteBot(renewed, metadata=auth)
        assert again.value.code() == grpc.StatusCode.INTERNAL
        assert running.referee.lobby.authenticate("t2") == "far", "a new token replaces the old one all the same"
        assert running.referee.lobby.authenticate("t") is None

    with_referee(scenario, state_path=tmp_path / "state.json")
