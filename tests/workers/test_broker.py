"""The embedded broker writes a message under a name no consumer takes, then renames it: never read half-written."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from celery.worker import state
from kombu.connection import Connection

from workers.broker import SCHEME


def connect(folder: Path) -> Connection:
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder), "store_processed": False}
    return Connection(f"{SCHEME}://", transport_options=options)  # type: ignore[no-untyped-call]


def test_a_message_is_renamed_into_place_whole_and_read_back(tmp_path: Path) -> None:
    with connect(tmp_path) as connection:
        queue = connection.SimpleQueue("mus")
        queue.put({"match_id": 7})
        assert [path.name for path in tmp_path.iterdir() if path.name.endswith(".partial")] == []
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
