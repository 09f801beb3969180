"""The embedded broker writes a message under a name no consumer takes, then renames it: never read half-written."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery.concurrency.solo import TaskPool as SoloPool
from celery.signals import worker_process_init, worker_process_shutdown
from celery.worker import state
from kombu.connection import Connection
from kombu.entity import Exchange, Queue

from workers import app as app_module
from workers import launcher, matches, play
from workers.app import (
    broker_settings,
    later,
    make_app,
    make_broker_folders,
    match_queues,
    send_match,
    waiting_messages,
)
from workers.broker import DELAY_HEADER, MAX_DELAY_S, SCHEME
from workers.pool import worker_pool


@pytest.fixture(autouse=True, scope="module")
def _in_a_folder_of_its_own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """kombu's filesystem transport keeps the exchanges' bindings in ./control unless told, and a process declares
    a queue's binding once: one such folder for the module, not the project's."""
    folder = tmp_path_factory.mktemp("broker-cwd")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        yield


def connect(folder: Path) -> Connection:
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder), "store_processed": False}
    return Connection(f"{SCHEME}://", transport_options=options)  # type: ignore[no-untyped-call]


def test_a_message_is_renamed_into_place_whole_and_read_back(tmp_path: Path) -> None:
    with connect(tmp_path) as connection:
        queue = connection.SimpleQueue("mus")
        queue.put({"match_id": 7})
        assert [path.name for path in (tmp_path / "mus").iterdir() if path.name.endswith(".partial")] == []
        assert queue.get(timeout=2).payload == {"match_id": 7}
        queue.close()


def test_the_consumers_name_appears_only_once_the_message_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    renames: list[tuple[bytes, bool]] = []

    def replace(source: str, destination: str) -> None:
        renames.append((Path(source).read_bytes(), Path(destination).exists()))
        real_replace(source, destination)

    real_replace = os.replace
    monkeypatch.setattr("workers.broker.os.replace", replace)
    with connect(tmp_path) as connection:
        queue = connection.SimpleQueue("mus")
        queue.put({"match_id": 8})
        assert queue.get(timeout=2).payload == {"match_id": 8}
        queue.close()
    assert renames and not any(existed for _, existed in renames), "a new name, never one a consumer could hold"
    for written, _ in renames:
        assert isinstance(json.loads(written), dict), "whole before it gets a name consumers take"


def test_messages_sent_within_one_millisecond_are_taken_in_the_order_sent(tmp_path: Path) -> None:
    """`mus league run` sends a whole league at once, in the order the workers should play it."""
    with connect(tmp_path) as connection:
        queue = connection.SimpleQueue("mus")
        for index in range(30):
            queue.put({"match_id": index})
        assert [queue.get(timeout=2).payload["match_id"] for _ in range(30)] == list(range(30))
        queue.close()


def test_a_message_sent_for_later_stays_in_its_queue_until_it_is_due(tmp_path: Path) -> None:
    """A deferred match (workers.app.later): no worker may take it early, and it waits behind nothing sent after."""
    with connect(tmp_path) as connection:
        queue = connection.SimpleQueue("mus")
        due = time.monotonic() + 1.0
        queue.put({"match_id": 1}, headers={DELAY_HEADER: 1.0})
        queue.put({"match_id": 2})
        assert queue.get_nowait().payload == {"match_id": 2}, "sent later, due sooner"
        with pytest.raises(queue.Empty):
            queue.get_nowait()
        time.sleep(max(due - time.monotonic(), 0) + 0.01)
        assert queue.get_nowait().payload == {"match_id": 1}
        assert [path.name for path in (tmp_path / "mus").iterdir()] == [], "taken, read and removed"
        queue.close()


def test_a_message_written_before_the_machine_last_booted_is_due_now(tmp_path: Path) -> None:
    """Its name holds a due time of the old boot's monotonic clock, which may be far ahead of the new one."""
    with connect(tmp_path) as connection:
        queue = connection.SimpleQueue("mus")
        queue.put({"match_id": 3})
        (written,) = (tmp_path / "mus").iterdir()
        later_boot = f"{time.monotonic_ns() + int(10 * MAX_DELAY_S * 1e9):020d}" + written.name[20:]
        written.rename(tmp_path / "mus" / later_boot)
        assert queue.get_nowait().payload == {"match_id": 3}
        queue.put({"match_id": 4}, headers={DELAY_HEADER: 10 * MAX_DELAY_S})
        (held,) = (tmp_path / "mus").iterdir()
        assert int(held.name[:20]) <= time.monotonic_ns() + int(MAX_DELAY_S * 1e9), "a delay is at most MAX_DELAY_S"
        with pytest.raises(queue.Empty):
            queue.get_nowait()
        queue.close()


def test_a_consumer_lists_its_queue_again_only_once_it_has_taken_what_it_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mus league run` queues a whole league at once: listing the folder for every message made each take cost
    about 9 ms in a league of 10,000 matches. The other queue's messages are never listed."""
    listed: list[int] = []

    def listdir(path: str) -> list[str]:
        names = real_listdir(path)
        listed.append(len(names))
        return names

    real_listdir = os.listdir
    monkeypatch.setattr("workers.broker.os.listdir", listdir)
    with connect(tmp_path) as connection:
        mine, other = connection.SimpleQueue("mine"), connection.SimpleQueue("other")
        for index in range(200):
            mine.put({"match_id": index})
            other.put({"match_id": 1000 + index})
        listed.clear()
        assert [mine.get_nowait().payload["match_id"] for _ in range(200)] == list(range(200))
        with pytest.raises(mine.Empty):
            mine.get_nowait()
        mine.close()
        other.close()
    assert sum(listed) == 200, f"names listed for 200 messages: {listed}"


def test_two_consumers_of_one_queue_take_each_message_once(tmp_path: Path) -> None:
    """Each keeps its own listing: the names the other took are skipped, not read twice."""
    with connect(tmp_path) as first, connect(tmp_path) as second:
        queues = [first.SimpleQueue("mus"), second.SimpleQueue("mus")]
        for index in range(40):
            queues[0].put({"match_id": index})
        taken = [queues[index % 2].get_nowait().payload["match_id"] for index in range(40)]
        for queue in queues:
            with pytest.raises(queue.Empty):
                queue.get_nowait()
            queue.close()
    assert sorted(taken) == list(range(40))


def test_a_message_sent_while_only_a_later_one_is_listed_is_taken_when_due(tmp_path: Path) -> None:
    """A listing whose first name is not due yet is made again: a message sent since may be due sooner."""
    with connect(tmp_path) as connection:
        queue = connection.SimpleQueue("mus")
        queue.put({"match_id": 1}, headers={DELAY_HEADER: 30.0})
        with pytest.raises(queue.Empty):
            queue.get_nowait()
        queue.put({"match_id": 2})
        assert queue.get_nowait().payload == {"match_id": 2}
        queue.close()


@pytest.mark.parametrize("name", ["team/a", "..", "%2E"])
def test_a_queue_of_any_name_is_a_folder_of_its_own_and_its_messages_are_kept_once_taken(
    tmp_path: Path, name: str
) -> None:
    """MUS_QUEUE names the queues: a slash in it made the taken message's kept name a path into no folder, and the
    message was lost (a review)."""
    processed = tmp_path / "processed"
    processed.mkdir()
    options = {
        "data_folder_in": str(tmp_path / "queue"),
        "data_folder_out": str(tmp_path / "queue"),
        "store_processed": True,
        "processed_folder": str(processed),
    }
    with Connection(f"{SCHEME}://", transport_options=options) as connection:  # type: ignore[no-untyped-call]
        queue = connection.SimpleQueue(Queue(name, Exchange("mus"), routing_key=name))  # type: ignore[no-untyped-call]
        queue.put({"match_id": 5})
        assert [path.parent.parent for path in (tmp_path / "queue").glob("*/*.msg")] == [tmp_path / "queue"]
        assert queue.get_nowait().payload == {"match_id": 5}
        queue.close()
    assert len(list(processed.iterdir())) == 1


def test_a_queue_tells_how_many_messages_wait_in_it_and_is_purged_whole(tmp_path: Path) -> None:
    with connect(tmp_path) as connection:
        channel = connection.default_channel
        queue = connection.SimpleQueue("mus")
        for index in range(5):
            queue.put({"match_id": index})
        queue.get_nowait()
        assert channel.queue_declare(queue="mus", passive=True).message_count == 4
        assert channel.queue_purge("mus") == 4
        assert channel.queue_declare(queue="mus", passive=True).message_count == 0
        with pytest.raises(queue.Empty):
            queue.get_nowait()
        queue.close()


def test_a_delay_is_the_embedded_brokers_header_and_celerys_countdown_elsewhere() -> None:
    embedded = make_app()
    assert str(embedded.conf.broker_url).startswith(SCHEME)
    assert later(embedded, 0.25) == {"headers": {DELAY_HEADER: 0.25}}
    assert later(embedded, 0) == {}
    redis = make_app()
    redis.conf.broker_url = "redis://127.0.0.1:6379/0"
    assert later(redis, 0.25) == {"countdown": 0.25}


def test_an_idle_wait_for_a_message_lasts_its_timeout(tmp_path: Path) -> None:
    with connect(tmp_path) as connection:
        queue = connection.SimpleQueue("mus")
        started = time.monotonic()
        with pytest.raises(queue.Empty):
            queue.get(timeout=0.3)
        assert time.monotonic() - started >= 0.3
        queue.close()


@pytest.mark.parametrize("flag", ["should_stop", "should_terminate"])
def test_a_worker_asked_to_stop_stops_waiting_for_messages_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: str
) -> None:
    """A solo-pool worker reads its stop flags only between waits of up to 2 s: the wait must end on its own."""
    with connect(tmp_path) as connection:
        queue = connection.SimpleQueue("mus")
        monkeypatch.setattr(state, flag, 0)  # Celery's exit code for a warm stop: set, though falsy
        started = time.monotonic()
        with pytest.raises(queue.Empty):
            queue.get(timeout=30)
        assert time.monotonic() - started < 5, "it waited for its timeout"
        queue.close()


def test_a_worker_asked_to_stop_takes_no_message_left_in_its_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Celery's loop drains once more after a warm shutdown's flag is set: Ctrl-C of `mus league run` let a worker
    start one more match, to be cut short and voided (a review, stop 40)."""
    with connect(tmp_path) as connection:
        queue = connection.SimpleQueue("mus")
        queue.put({"match_id": 9})
        monkeypatch.setattr(state, "should_stop", 0)
        with pytest.raises(queue.Empty):
            queue.get(timeout=1)
        monkeypatch.setattr(state, "should_stop", None)
        assert queue.get(timeout=2).payload == {"match_id": 9}, "left for the next worker"
        queue.close()


def reachable(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


@pytest.mark.parametrize("broker", ["embedded", "redis"])
def test_a_worker_takes_its_first_queue_first_and_the_other_only_when_it_is_empty(
    broker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two halves' queues (workers.app.match_queues): a worker prefers its half, with the app's own settings."""
    monkeypatch.setenv("MUS_QUEUE", f"mus-test-{secrets.token_hex(4)}")
    if broker == "redis":
        if not reachable(6379):
            pytest.skip("no Redis on 127.0.0.1:6379")
        monkeypatch.setenv("MUS_BROKER_URL", f"redis://127.0.0.1:6379/{secrets.randbelow(14) + 1}")
    else:
        monkeypatch.delenv("MUS_BROKER_URL", raising=False)
        monkeypatch.setenv("MUS_BROKER_DIR", str(tmp_path / "broker"))
    make_broker_folders()
    settings = broker_settings()
    half0, half1 = (Queue(name, Exchange(name), name) for name in match_queues())  # type: ignore[no-untyped-call]
    got: list[str] = []
    with Connection(settings["broker_url"], transport_options=settings["broker_transport_options"]) as connection:  # type: ignore[no-untyped-call]
        producer = connection.Producer()
        for index in range(3):
            for queue, label in ((half0, "a"), (half1, "b")):
                producer.publish(f"{label}{index}", exchange=queue.exchange, routing_key=queue.name, declare=[queue])

        def take(body: str, message: Any) -> None:
            got.append(body)
            message.ack()

        try:
            with connection.Consumer([half1, half0], callbacks=[take], prefetch_count=1):
                while len(got) < 6:
                    connection.drain_events(timeout=5)
        finally:
            for queue in (half0, half1):
                queue(connection.default_channel).delete()  # type: ignore[no-untyped-call]
    assert got == ["b0", "b1", "b2", "a0", "a1", "a2"]


@pytest.mark.parametrize(
    ("broker", "port"),
    [("embedded", 0), ("redis://127.0.0.1:6379", 6379), ("amqp://guest:guest@127.0.0.1:5672//", 5672)],
)
def test_the_scheduler_is_told_how_many_matches_wait_in_each_halfs_queue(
    broker: str, port: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mus league run` sends a match again only when its half's queue holds nothing (league_run.RESEND_AFTER_S)."""
    monkeypatch.setenv("MUS_QUEUE", f"mus-test-{secrets.token_hex(4)}")
    if port:
        if not reachable(port):
            pytest.skip(f"no broker on 127.0.0.1:{port}")
        monkeypatch.setenv("MUS_BROKER_URL", broker + (f"/{secrets.randbelow(14) + 1}" if port == 6379 else ""))
    else:
        monkeypatch.delenv("MUS_BROKER_URL", raising=False)
        monkeypatch.setenv("MUS_BROKER_DIR", str(tmp_path / "broker"))
    app = make_app()
    try:
        assert waiting_messages(app, 0) == 0, "no such queue yet"
        for match_id in (1, 2, 3):
            send_match(app, match_id, 0)
        assert (waiting_messages(app, 0), waiting_messages(app, 1)) == (3, 0)
    finally:
        with app.connection_for_write() as connection:
            for name in match_queues():
                with contextlib.suppress(Exception):
                    connection.default_channel.queue_delete(name)


def test_a_broker_that_cannot_be_reached_cannot_say_how_many_matches_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Then nobody knows, and `mus league run` sends the match again as before (league_run._Dispatch.lost)."""
    monkeypatch.setenv("MUS_BROKER_URL", "redis://127.0.0.1:1/0")
    started = time.monotonic()
    assert waiting_messages(make_app(), 0) is None
    assert time.monotonic() - started < 3, "one try, not the default channel's retries (about 6 s)"


def test_a_worker_started_without_queues_takes_both_halves() -> None:
    """A plain `celery -A workers.app worker` (no -Q) must not leave half 1's matches waiting forever."""
    assert list(make_app().amqp.queues) == list(match_queues())


def test_a_prefork_workers_child_takes_database_connections_of_its_own_as_it_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`workers.play.after_fork` (tests/db/test_session.py), run on Celery's worker_process_init."""
    called: list[bool] = []
    monkeypatch.setattr(play, "after_fork", lambda: called.append(True))
    receivers = [receiver() for _, receiver in worker_process_init.receivers]  # weak references
    assert app_module._own_connections in receivers
    app_module._own_connections()
    assert called == [True]


def test_a_prefork_workers_child_cleans_up_its_pools_referee_and_seats_folders_as_it_ends() -> None:
    """A child ends with os._exit, which runs no atexit function: a review's warm shutdown of a `mus worker` left
    its child's `mus-pool` folder behind (stop 39). Celery's worker_process_shutdown does the clean-up."""

    async def frames_of(referee: matches.EmbeddedReferee) -> Path:
        return referee.frames_dir

    receivers = [receiver() for _, receiver in worker_process_shutdown.receivers]  # weak references
    assert app_module._clean_up_child in receivers
    pool_root = worker_pool(None).root
    frames = matches.run_on_worker_referee(frames_of)
    launcher._proc_view(launcher.Limits().memory_bytes)
    made = [pool_root, frames, *launcher._OWN_FOLDERS]
    assert len(made) == 3 and all(folder.is_dir() for folder in made)
    app_module._clean_up_child()
    assert not any(folder.exists() for folder in made), made


def test_a_cold_shutdown_cancels_the_match_in_hand_at_its_next_await_and_raises_nothing_into_it() -> None:
    """Celery's cold shutdown (Ctrl-C of `mus league run`) calls the solo pool's terminate_job from its signal
    handler, in the thread that plays the match: Celery's raised NotImplementedError into whatever ran there, and a
    review's landed in the referee's read of a seat's stream, which charged the seat a protocol error (stop 39)."""
    seen: list[object] = []

    async def playing(referee: matches.EmbeddedReferee) -> None:
        try:
            while True:
                try:
                    await asyncio.sleep(0.001)
                except Exception as error:  # as the referee's reads do: what lands here is the bot's doing
                    seen.append(error)
        finally:
            seen.append("cleaned up")

    previous = signal.signal(signal.SIGUSR1, lambda *_: SoloPool.terminate_job(None, 0))
    try:
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        with pytest.raises(asyncio.CancelledError):
            matches.run_on_worker_referee(playing)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert seen == ["cleaned up"]
    assert not matches.stop_match_in_hand(), "no match in hand any more"


@pytest.mark.skipif(os.geteuid() != 0, reason="Celery warns only a worker started as root")
def test_a_worker_started_as_root_is_not_warned_against_it_and_accepts_json_only() -> None:
    """The docs ask root of a worker that plays strangers' bots (a seat runs as a user of its own); Celery warned
    such a worker against it in every log, against the docs (newcomer walkthrough, stop 43). Its warning is about
    pickle: the app accepts JSON only."""
    from celery.exceptions import SecurityWarning
    from celery.platforms import check_privileges
    from celery.signals import celeryd_init

    app = app_module.app
    assert list(app.conf.accept_content) == ["json"] and app.conf.task_serializer == "json"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        celeryd_init.send(sender="test@host", instance=None, conf=app.conf, options={})  # as a worker starts
        check_privileges(app.conf.accept_content)
    assert not [warning for warning in caught if issubclass(warning.category, SecurityWarning)]
