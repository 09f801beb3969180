"""The distributed mode on this machine's services: PostgreSQL for the database, Redis (and RabbitMQ) as broker,
and `mus worker` processes that play what `mus league run` only queues. Skipped, with the reason, where a
service is absent."""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlmodel import col

from tests.db.conftest import ADMIN_URL, PostgresServer
from tests.workers.conftest import Deployment
from workers.db.models import Machine, Refusal
from workers.db.session import ensure_schema, make_engine, session_scope
from workers.launcher import sandbox_available
from workers.league_run import RunReport, run_league

pytestmark = pytest.mark.slow  # a league on real workers and a real broker


def reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture
def postgres_url() -> Iterator[str]:
    server = PostgresServer(ADMIN_URL)
    try:
        url = server.create_database()
    except Exception as error:  # psycopg.Error or a refused connection
        pytest.skip(f"PostgreSQL is not reachable at {ADMIN_URL}: {' '.join(str(error).split())}")
    yield url
    server.drop_all()


@pytest.mark.parametrize(
    ("broker", "host", "port"),
    [
        (f"redis://127.0.0.1:6379/{secrets.randbelow(14) + 1}", "127.0.0.1", 6379),
        ("amqp://guest:guest@127.0.0.1:5672//", "127.0.0.1", 5672),
    ],
    ids=["redis", "rabbitmq"],
)
def test_mus_workers_play_a_league_queued_on_a_real_broker_into_postgresql(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_url: str, broker: str, host: str, port: int
) -> None:
    if not reachable(host, port):
        pytest.skip(f"no broker listening on {host}:{port}")
    queue = f"mus-test-{secrets.token_hex(4)}"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MUS_DATABASE_URL", postgres_url)
    monkeypatch.setenv("MUS_BROKER_URL", broker)
    monkeypatch.setenv("MUS_QUEUE", queue)
    monkeypatch.setenv("MUS_LOG_DIR", str(tmp_path / "logs"))
    engine = make_engine(postgres_url)
    ensure_schema(engine)
    deployment = Deployment(tmp_path, engine)
    deployment.league("cluster", ["random", "passive"], matches_per_pairing=4)
    workers = [
        subprocess.Popen(
            [
                *(sys.executable, "-m", "workers.cli.main", "worker", "--concurrency", "1"),
                *("--loglevel", "WARNING", "--prefer-half", str(index % 2)),
            ],
            env=dict(os.environ),
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / f"worker{index}.log").open("wb"),
        )
        for index in range(2)
    ]
    try:
        report = run_league(engine, "cluster")
        # Both were still serving: two `mus worker` of one machine are two Celery nodes (on RabbitMQ the second of
        # two that share a node name died at once, on its node's exclusive queue, RESOURCE_LOCKED).
        exited = {index: worker.poll() for index, worker in enumerate(workers) if worker.poll() is not None}
        assert exited == {}, [(tmp_path / f"worker{index}.log").read_text()[-2000:] for index in exited]
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
        engine.dispose()
    assert report.completed and report.progress["finished"] == report.progress["total"] == 4
    assert report.worker_restarts == 0, "nothing embedded is started in the distributed mode"


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="a second machine needs root's unshare"
)
def test_a_match_refused_by_a_machine_without_a_bots_folder_is_played_by_another_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_url: str
) -> None:
    """Two machines, one never given a bot's folder (a worker in namespaces of its own: another host name, the
    folder's parent hidden). Its refusals used to count as the matches' attempts, three failed a match; now each
    match it refuses is left to the other machine, and the league completes with nothing failed."""
    if not reachable("127.0.0.1", 6379):
        pytest.skip("no Redis listening on 127.0.0.1:6379")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MUS_DATABASE_URL", postgres_url)
    monkeypatch.setenv("MUS_BROKER_URL", f"redis://127.0.0.1:6379/{secrets.randbelow(14) + 1}")
    monkeypatch.setenv("MUS_QUEUE", f"mus-test-{secrets.token_hex(4)}")
    monkeypatch.setenv("MUS_LOG_DIR", str(tmp_path / "logs"))
    engine = make_engine(postgres_url)
    ensure_schema(engine)
    bots = tmp_path / "bots"
    (bots / "mine").mkdir(parents=True)
    (bots / "mine" / "bot.py").write_text("from clients.bots.passive_bot import main\n\nmain()\n")
    Deployment(tmp_path, engine).league(
        "two-machines",
        ["mine", "passive"],
        matches_per_pairing=4,
        seed=3,
        options={"target_score": 5},
        sandbox=sandbox_available(),
        own={"mine": ([sys.executable, "bot.py"], bots / "mine")},
    )
    far = f"far-{secrets.token_hex(3)}"
    worker = [sys.executable, "-m", "workers.cli.main", "worker", "--concurrency", "1", "--loglevel", "INFO"]
    hidden = f"hostname {far} && mount -t tmpfs tmpfs {shlex.quote(str(bots))} && exec {shlex.join(worker)}"
    commands = {
        "near": worker,
        far: ["unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c", hidden],
    }
    workers = {
        name: subprocess.Popen(
            command, env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=(tmp_path / f"{name}.log").open("wb")
        )
        for name, command in commands.items()
    }

    def seen() -> set[str]:
        with session_scope(engine) as session:
            return set(session.scalars(sa.select(col(Machine.name))))

    def refused() -> list[Refusal]:
        with session_scope(engine) as session:
            return list(session.scalars(sa.select(Refusal)))

    try:
        assert wait_for(lambda: far in seen() and len(seen()) == 2, 60), seen()
        # The near machine's worker is stopped, not gone (seen a moment ago): the far one takes the matches first.
        workers["near"].send_signal(signal.SIGSTOP)
        run = threading.Thread(target=lambda: reports.append(run_league(engine, "two-machines")), daemon=True)
        reports: list[RunReport] = []
        run.start()
        assert wait_for(lambda: bool(refused()), 60), (tmp_path / f"{far}.log").read_text()[-3000:]
        workers["near"].send_signal(signal.SIGCONT)
        run.join(120)
        assert reports, "the league ended"
    finally:
        for process in workers.values():
            process.send_signal(signal.SIGCONT)
            process.terminate()
        for process in workers.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        engine.dispose()
    assert reports[0].completed and reports[0].progress == {"finished": 4, "total": 4} | {
        key: 0 for key in reports[0].progress if key not in ("finished", "total")
    }
    assert {(refusal.machine, refusal.lacks.split(":")[0]) for refusal in refused()} == {(far, "folder")}
    far_log = (tmp_path / f"{far}.log").read_text()
    assert "is not on this machine" in far_log and "left to the workers of" in far_log


def wait_for(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False
