"""The distributed mode on this machine's services: PostgreSQL for the database, Redis (and RabbitMQ) as broker,
and `mus worker` processes that play what `mus league run` only queues. Skipped, with the reason, where a
service is absent."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.db.conftest import ADMIN_URL, PostgresServer
from tests.workers.conftest import Deployment
from workers.db.session import ensure_schema, make_engine
from workers.league_run import run_league

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
