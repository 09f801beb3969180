"""Issue 11 §4: `mus bot add NAME --remote` registers the token with the referee at once, the lobby welcomes the
bot before any match and keeps it waiting until a table needs it, and the registration (a hash, never the
token) survives a restart of `mus referee serve --state FILE`, as does a revocation."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from typer.testing import CliRunner

from mus.v1 import admin_pb2, admin_pb2_grpc, lobby_pb2, lobby_pb2_grpc
from referee.service.lobby import STATE_FORMAT, token_sha256
from workers.cli import bot_cmd
from workers.cli.main import app
from workers.db.session import ensure_schema, make_engine

pytestmark = pytest.mark.slow  # `mus referee serve` as a process

ADMIN_TOKEN = "registration-admin-t0ken"
runner = CliRunner()
SERVE = [sys.executable, "-m", "workers.cli.main", "referee", "serve"]


class RefereeProcess:
    """`mus referee serve --state FILE` as its own process on a free port."""

    def __init__(self, state: Path, log: Path) -> None:
        env = dict(os.environ, MUS_ADMIN_TOKEN=ADMIN_TOKEN)
        env.pop("MUS_REFEREE_STATE", None)
        with log.open("a") as errors:
            self.process = subprocess.Popen(
                [*SERVE, "--address", "127.0.0.1:0", "--state", str(state)],
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
                env=env,
            )
        killer = threading.Timer(30, self.process.kill)  # a referee that never prints fails the test
        killer.start()
        try:
            assert self.process.stdout is not None
            first = self.process.stdout.readline()
            self.state_line = self.process.stdout.readline()
        finally:
            killer.cancel()
        assert first.startswith("referee listening on 127.0.0.1:"), (first, log.read_text())
        self.address = first.split()[-1]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Lobby:
    """A raw, synchronous lobby stream of a remote bot."""

    def __init__(self, address: str, token: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.outgoing: queue.Queue[lobby_pb2.ConnectRequest | None] = queue.Queue()
        hello = lobby_pb2.LobbyHello(bot_token=token, max_concurrent_matches=1, protocol_version=1)
        self.outgoing.put(lobby_pb2.ConnectRequest(hello=hello))
        self.responses = lobby_pb2_grpc.LobbyServiceStub(self.channel).Connect(
            iter(self.outgoing.get, None), timeout=60
        )

    def read(self) -> lobby_pb2.ConnectResponse:
        return next(self.responses)

    def close(self) -> None:
        self.outgoing.put(None)
        self.responses.cancel()
        self.channel.close()


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'mus.db'}"
    engine = make_engine(url)
    ensure_schema(engine)
    engine.dispose()
    monkeypatch.setenv("MUS_DATABASE_URL", url)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def referees(tmp_path: Path) -> Iterator[list[RefereeProcess]]:
    started: list[RefereeProcess] = []
    yield started
    for referee in started:
        referee.stop()


def welcomed(address: str, token: str) -> str:
    """The name the lobby welcomes this token as; raises grpc.RpcError when it refuses the token."""
    lobby = Lobby(address, token)
    try:
        return lobby.read().welcome.bot_name
    finally:
        lobby.close()


def test_bot_add_remote_registers_at_once_the_bot_waits_in_the_lobby_and_a_restart_keeps_it(
    database: None, referees: list[RefereeProcess], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "referee" / "state.json"
    referees.append(RefereeProcess(state, tmp_path / "referee.log"))
    assert f"remote bots: 0 registered, kept in {state}" in referees[0].state_line
    monkeypatch.setenv("MUS_REFEREE_ADDRESS", referees[0].address)
    monkeypatch.setenv("MUS_ADMIN_TOKEN", ADMIN_TOKEN)
    added = runner.invoke(bot_cmd.app, ["add", "faraway", "--remote", "--json"])
    assert added.exit_code == 0, added.output
    data = json.loads(added.stdout)
    token = data["token"]
    assert data["registered"] is True and "its lobby accepts faraway from now on" in data["referee"]

    # Before any match: welcomed, then it waits on the same stream until a table offers it a seat.
    lobby = Lobby(referees[0].address, token)
    try:
        assert lobby.read().welcome.bot_name == "faraway"
        seats = [admin_pb2.SeatConfig(bot_name="faraway", remote=seat % 2 == 0) for seat in range(4)]
        seats[1].bot_name = seats[3].bot_name = "random"
        with grpc.insecure_channel(referees[0].address) as channel:
            created = admin_pb2_grpc.TableAdminServiceStub(channel).CreateTable(
                admin_pb2.CreateTableRequest(seed=1, seats=seats, join_timeout_s=60),
                metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),),
                timeout=10,
            )
        offered = [lobby.read().assignment for _ in range(2)]
        assert {offer.table_id for offer in offered} == {created.table_id}
        assert sorted(offer.seat for offer in offered) == [0, 2]
    finally:
        lobby.close()

    # The state file: the hash, never the token, mode 0600.
    assert json.loads(state.read_text()) == {"format": STATE_FORMAT, "remote_bots": {"faraway": token_sha256(token)}}
    assert token not in state.read_text()
    assert stat.S_IMODE(state.stat().st_mode) == 0o600

    referees[0].stop()
    referees.append(RefereeProcess(state, tmp_path / "referee.log"))
    assert "remote bots: 1 registered" in referees[1].state_line
    assert welcomed(referees[1].address, token) == "faraway", "the registration survived the restart"

    monkeypatch.setenv("MUS_REFEREE_ADDRESS", referees[1].address)
    removed = runner.invoke(bot_cmd.app, ["remove", "faraway"])
    assert removed.exit_code == 0 and "revoked faraway's old token" in removed.stdout, removed.output
    referees[1].stop()
    referees.append(RefereeProcess(state, tmp_path / "referee.log"))
    with pytest.raises(grpc.RpcError) as refused:
        welcomed(referees[2].address, token)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, "a revoked token stays revoked after a restart"


def test_without_a_referee_bot_add_remote_says_when_the_bot_will_be_registered(
    database: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MUS_REFEREE_ADDRESS", raising=False)
    added = runner.invoke(bot_cmd.app, ["add", "faraway", "--remote"])
    assert added.exit_code == 0, added.output
    assert "No referee is configured (MUS_REFEREE_ADDRESS)" in added.stdout
    assert "registered with the referee when a league worker first needs it" in added.stdout
    data = json.loads(runner.invoke(bot_cmd.app, ["add", "other", "--remote", "--json"]).stdout)
    assert data["registered"] is False and "when a league worker first needs it" in data["referee"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not JSON"),
        ('{"format": "mus-referee-state/1", "remote_bots": {"x": "not-a-hash"}}', "is not a referee state file"),
        ('{"remote_bots": {}}', "is not a referee state file"),
    ],
)
def test_a_state_file_that_cannot_be_read_stops_the_referee_with_one_line(
    tmp_path: Path, content: str, message: str
) -> None:
    state = tmp_path / "state.json"
    state.write_text(content)
    result = runner.invoke(app, ["referee", "serve", "--address", "127.0.0.1:0", "--state", str(state)])
    assert result.exit_code == 1, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def closed_port() -> int:
    """A port of this host nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_bot_add_remote_registers_on_the_referees_admin_address_when_it_has_one(
    database: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a worker calls it: a review's registration went to the public port, its admin port set (stop 39)."""
    public, admin = (closed_port() for _ in range(2))
    monkeypatch.setenv("MUS_REFEREE_ADDRESS", f"127.0.0.1:{public}")
    monkeypatch.setenv("MUS_REFEREE_ADMIN_ADDRESS", f"127.0.0.1:{admin}")
    monkeypatch.setenv("MUS_ADMIN_TOKEN", ADMIN_TOKEN)
    data = json.loads(runner.invoke(bot_cmd.app, ["add", "faraway", "--remote", "--json"]).stdout)
    assert data["registered"] is False and f"failed on the referee at 127.0.0.1:{admin} (UNAVAILABLE" in data["referee"]
