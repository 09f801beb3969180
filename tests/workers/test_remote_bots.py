"""Remote bots in a league: matches played on a real standalone referee (`mus referee serve`), offered to a
real remote bot process through the lobby, stored like hosted matches; absence and a missing referee."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from mus.v1 import admin_pb2, admin_pb2_grpc
from referee.engine.replay import replay_record
from tests.docs.test_protocol_examples import extract
from tests.workers.conftest import EXAMPLE_COMMANDS, Deployment
from workers import matches, play
from workers.cli.replay_cmd import verify_replay
from workers.db import repo
from workers.db.models import MatchStatus
from workers.db.session import session_scope
from workers.matches import RemoteBot, register_remote_bots
from workers.tournament import schedule_round_robin

pytestmark = pytest.mark.slow  # `mus referee serve` and bots as processes

ADMIN_TOKEN = "remote-bots-admin-t0ken"
REMOTE = "faraway"


@dataclass
class StandaloneReferee:
    address: str
    process: subprocess.Popen[str]

    def admin(self) -> tuple[admin_pb2_grpc.TableAdminServiceStub, tuple[tuple[str, str], ...], grpc.Channel]:
        channel = grpc.insecure_channel(self.address)
        return admin_pb2_grpc.TableAdminServiceStub(channel), (("authorization", f"Bearer {ADMIN_TOKEN}"),), channel


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def referee(tmp_path: Path) -> Iterator[StandaloneReferee]:
    """`mus referee serve` on a free port, as its own process; its address is the end of its first line."""
    env = dict(os.environ, MUS_ADMIN_TOKEN=ADMIN_TOKEN)
    with (tmp_path / "referee.log").open("w") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "workers.cli.main", "referee", "serve", "--address", "127.0.0.1:0"],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env=env,
        )
    killer = threading.Timer(30, process.kill)  # a referee that never prints its first line fails the test
    killer.start()
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
    finally:
        killer.cancel()
    try:
        assert line.startswith("referee listening on 127.0.0.1:"), (line, (tmp_path / "referee.log").read_text())
        yield StandaloneReferee(line.split()[-1], process)
    finally:
        _stop(process)


@pytest.fixture
def worker_env(deployment: Deployment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployment]:
    """`play_league_match` in this process, on this test's database (its engine is cached per process)."""
    play.database.cache_clear()
    monkeypatch.delenv("MUS_REFEREE_ADDRESS", raising=False)
    monkeypatch.delenv("MUS_ADMIN_TOKEN", raising=False)
    yield deployment
    play.database().dispose()
    play.database.cache_clear()


def remote_league(deployment: Deployment, name: str, *, absent_limit_s: float) -> tuple[int, list[int], str]:
    """A league of the remote bot against `random` (a hosted program): its id, its match ids and the token."""
    plan = schedule_round_robin([REMOTE, "random"], 2, 11)
    with session_scope(deployment.engine) as session:
        token = repo.add_remote_bot(session, REMOTE, language="python")
        repo.add_bot(session, "random", command=EXAMPLE_COMMANDS["random"], folder=None, language="python")
        league = repo.create_league(
            session,
            name,
            bot_names=[REMOTE, "random"],
            matches=[
                {"team0": m.team0, "team1": m.team1, "seed": m.seed, "duplicate_pair": m.duplicate_pair} for m in plan
            ],
            options={"target_score": 15},
            matches_per_pairing=2,
            seed=11,
            absent_limit_s=absent_limit_s,
        )
        assert league.id is not None
        match_ids = [match.id for match in repo.list_matches(session, league.id) if match.id is not None]
    return league.id, match_ids, token


def start_remote_bot(
    referee: StandaloneReferee, token: str, log_path: Path, command: list[str] | None = None
) -> subprocess.Popen[str]:
    """The remote bot as its own program (the SDK's random bot unless `command`), on the lobby; returns once the
    referee has welcomed it."""
    # Registered first, as `mus league run` does for a league's remote entrants: an unknown token is refused.
    register_remote_bots(referee.address, ADMIN_TOKEN, [RemoteBot(REMOTE, repo.token_sha256(token))])
    env = dict(os.environ, MUS_REFEREE=referee.address, MUS_TOKEN=token)
    # One match at a time: the lobby counts tables, and both seats of the bot's team at one table are one match.
    bot = "clients.bots.random_bot:RandomBot"
    command = command or [sys.executable, "-m", "clients.sdk", bot, "--remote", "--max-matches", "1"]
    with log_path.open("w") as output:
        process = subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
    deadline = time.monotonic() + 30
    while f"welcome as {REMOTE}" not in log_path.read_text():
        assert process.poll() is None, log_path.read_text()
        assert time.monotonic() < deadline, log_path.read_text()
        time.sleep(0.05)
    return process


def test_a_league_with_a_remote_bot_is_played_on_the_standalone_referee_and_stored_like_any_other(
    worker_env: Deployment, referee: StandaloneReferee, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    league_id, match_ids, token = remote_league(worker_env, "remote-league", absent_limit_s=30)
    bot = start_remote_bot(referee, token, tmp_path / "remote-bot.log")
    monkeypatch.setenv("MUS_REFEREE_ADDRESS", referee.address)
    monkeypatch.setenv("MUS_ADMIN_TOKEN", ADMIN_TOKEN)
    try:
        assert [play.play_league_match(match_id) for match_id in match_ids] == ["finished", "finished"]
        assert play.play_league_match(match_ids[0]) == "skipped", "a finished match is not played again"
    finally:
        _stop(bot)
    with session_scope(worker_env.engine) as session:
        assert repo.league_progress(session, league_id)["finished"] == 2
        results = {result.match_id: result for result in repo.league_results(session, league_id)}
        assert sorted(results) == sorted(match_ids)
        rules = repo.get_league(session, league_id).rules
        for match_id in match_ids:
            result, record = results[match_id], repo.get_replay(session, match_id)
            outcome = replay_record(record).outcome
            assert outcome is not None and outcome.winner == result.winner_team
            assert outcome.termination.value == result.termination == "normal", result.faults
            assert not [incident for incident in result.incidents if incident["cause"] == "absent"], result.incidents
            assert all(summary["count"] > 0 for summary in result.decision_seconds), result.decision_seconds
            assert verify_replay(repo.get_match_details(session, match_id), record, rules) == []
            match = repo.get_match(session, match_id)
            assert match.attempt == 1 and match.error is None


def test_the_minimal_remote_bot_of_docs_protocol_plays_its_league_matches_clean(
    worker_env: Deployment, referee: StandaloneReferee, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """docs/protocol.md's remote bot over raw gRPC, extracted from the page (a newcomer had none to start from,
    stop 39)."""
    league_id, match_ids, token = remote_league(worker_env, "raw-remote", absent_limit_s=30)
    program = extract("minimal_remote_bot.py", tmp_path)
    bot = start_remote_bot(referee, token, tmp_path / "raw-remote.log", [sys.executable, str(program)])
    monkeypatch.setenv("MUS_REFEREE_ADDRESS", referee.address)
    monkeypatch.setenv("MUS_ADMIN_TOKEN", ADMIN_TOKEN)
    try:
        assert [play.play_league_match(match_id) for match_id in match_ids] == ["finished", "finished"]
    finally:
        _stop(bot)
    with session_scope(worker_env.engine) as session:
        for result in repo.league_results(session, league_id):
            assert result.termination == "normal" and not result.faults and not result.incidents, result


def test_an_offline_remote_bot_is_absent_after_the_league_limit_and_its_team_forfeits(
    worker_env: Deployment, referee: StandaloneReferee, monkeypatch: pytest.MonkeyPatch
) -> None:
    league_id, match_ids, _token = remote_league(worker_env, "remote-offline", absent_limit_s=2)
    monkeypatch.setenv("MUS_REFEREE_ADDRESS", referee.address)
    monkeypatch.setenv("MUS_ADMIN_TOKEN", ADMIN_TOKEN)
    started = time.monotonic()
    assert play.play_league_match(match_ids[0]) == "finished"
    assert time.monotonic() - started >= 2, "the match waited for the remote bot up to the league's limit"
    with session_scope(worker_env.engine) as session:
        [result] = repo.league_results(session, league_id)
        remote_team = 0 if result.team0_bot == REMOTE else 1
        assert result.winner_team == 1 - remote_team
        assert result.termination == "forfeit"
        absent = sorted(incident["seat"] for incident in result.incidents if incident["cause"] == "absent")
        assert absent == [remote_team, remote_team + 2], result.incidents
        assert {fault["cause"] for fault in result.faults} == {"timeout"}, "its faults are its seats' timeouts"
        assert all(fault["seat"] % 2 == remote_team for fault in result.faults), "the hosted side is not charged"
        record = repo.get_replay(session, match_ids[0])
        rules = repo.get_league(session, league_id).rules
        assert verify_replay(repo.get_match_details(session, match_ids[0]), record, rules) == []


def test_without_a_standalone_referee_a_remote_match_is_voided_and_charged_to_nobody(
    worker_env: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    league_id, match_ids, _token = remote_league(worker_env, "remote-nowhere", absent_limit_s=30)
    assert play.play_league_match(match_ids[0]) == "void"
    monkeypatch.setenv("MUS_REFEREE_ADDRESS", "127.0.0.1:1")  # nothing listens there
    monkeypatch.setenv("MUS_ADMIN_TOKEN", ADMIN_TOKEN)
    monkeypatch.setattr(matches, "RPC_RETRY_S", 0.5)
    assert play.play_league_match(match_ids[1]) == "void"
    with session_scope(worker_env.engine) as session:
        assert repo.league_results(session, league_id) == []
        unset, unreachable = (repo.get_match(session, match_id) for match_id in match_ids)
        assert unset.status == MatchStatus.QUEUED and unset.attempt == 1
        assert "remote bots need MUS_REFEREE_ADDRESS (mus referee serve)" in (unset.error or "")
        assert unreachable.status == MatchStatus.QUEUED and unreachable.attempt == 1
        assert "the referee (127.0.0.1:1) is unreachable" in (unreachable.error or ""), unreachable.error


def test_a_table_replay_is_served_only_once_the_table_has_finished(referee: StandaloneReferee) -> None:
    stub, auth, channel = referee.admin()
    with channel:
        with pytest.raises(grpc.RpcError) as unknown:
            stub.GetTableReplay(admin_pb2.GetTableReplayRequest(table_id="nope"), metadata=auth, timeout=10)
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
        seats = [admin_pb2.SeatConfig(bot_name=f"seat{seat}") for seat in range(4)]
        created = stub.CreateTable(admin_pb2.CreateTableRequest(seed=3, seats=seats), metadata=auth, timeout=10)
        with pytest.raises(grpc.RpcError) as waiting:
            stub.GetTableReplay(admin_pb2.GetTableReplayRequest(table_id=created.table_id), metadata=auth, timeout=10)
        assert waiting.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "has finished" in (waiting.value.details() or "")
        with pytest.raises(grpc.RpcError) as anonymous:
            stub.GetTableReplay(admin_pb2.GetTableReplayRequest(table_id=created.table_id), timeout=10)
        assert anonymous.value.code() == grpc.StatusCode.UNAUTHENTICATED
        stub.CancelTable(admin_pb2.CancelTableRequest(table_id=created.table_id), metadata=auth, timeout=10)


def test_a_hosted_bot_that_crashes_on_the_standalone_referee_is_charged_a_crash(
    worker_env: Deployment, referee: StandaloneReferee, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    crasher = tmp_path / "crash.py"
    crasher.write_text("import sys\nsys.exit(3)\n")
    plan = schedule_round_robin([REMOTE, "crasher"], 2, 5)
    with session_scope(worker_env.engine) as session:
        token = repo.add_remote_bot(session, REMOTE, language="python")
        repo.add_bot(session, "crasher", command=[sys.executable, str(crasher)], folder=None, language="python")
        league = repo.create_league(
            session,
            "remote-crash",
            bot_names=[REMOTE, "crasher"],
            matches=[
                {"team0": m.team0, "team1": m.team1, "seed": m.seed, "duplicate_pair": m.duplicate_pair} for m in plan
            ],
            options={},
            matches_per_pairing=2,
            seed=5,
            absent_limit_s=30,
        )
        assert league.id is not None
        match_id = repo.list_matches(session, league.id)[0].id
    assert match_id is not None
    bot = start_remote_bot(referee, token, tmp_path / "remote-bot.log")
    monkeypatch.setenv("MUS_REFEREE_ADDRESS", referee.address)
    monkeypatch.setenv("MUS_ADMIN_TOKEN", ADMIN_TOKEN)
    try:
        assert play.play_league_match(match_id) == "finished"
    finally:
        _stop(bot)
    with session_scope(worker_env.engine) as session:
        [result] = repo.league_results(session, league.id)
        crasher_team = 0 if result.team0_bot == "crasher" else 1
        assert result.termination == "forfeit" and result.winner_team == 1 - crasher_team
        crashed = sorted(incident["seat"] for incident in result.incidents if incident["cause"] == "crash")
        assert crashed == [crasher_team, crasher_team + 2], result.incidents
        assert [incident["cause"] for incident in result.incidents] == ["crash", "crash"], result.incidents
