"""workers.logs: the bots' logs of a machine stay under MUS_LOG_LIMIT, the oldest removed first."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workers import logs, play


def write(path: Path, size: int, age_s: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    when = path.stat().st_mtime - age_s
    os.utime(path, (when, when))


@pytest.fixture(autouse=True)
def fresh_scans(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "_last_scan", {})


@pytest.mark.parametrize(
    ("text", "limit"),
    [("", 2 * 1024**3), ("2G", 2 * 1024**3), ("500M", 500 * 1024**2), ("64KiB", 65536), ("1048576", 1048576)],
)
def test_the_limit_is_a_size_in_bytes_with_an_optional_unit(
    monkeypatch: pytest.MonkeyPatch, text: str, limit: int
) -> None:
    monkeypatch.setenv("MUS_LOG_LIMIT", text)
    assert logs.log_limit() == limit


def test_a_limit_that_is_no_size_is_refused_with_what_to_give_and_off_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUS_LOG_LIMIT", "lots")
    with pytest.raises(ValueError, match="give a size such as 500M or 2G, or off"):
        logs.log_limit()
    monkeypatch.setenv("MUS_LOG_LIMIT", "off")
    assert logs.log_limit() is None


def test_the_oldest_match_folders_and_pool_logs_go_first_and_those_written_lately_stay(tmp_path: Path) -> None:
    """A review's bot wrote its 16 MiB a match until the disk that held the database was full (stop 39). What was
    written in the last KEEP_RECENT_S may be written still (a match under way, a pooled process between seats)."""
    old = logs.KEEP_RECENT_S + 1000
    for number in range(1, 6):  # match-1 is the oldest
        write(tmp_path / f"match-{number}" / "seat0-chatty.log", 1000, age_s=old - number * 100)
        write(tmp_path / f"match-{number}" / "seat2-chatty.log", 1000, age_s=old - number * 100)
    write(tmp_path / "pool" / "chatty-half0-place0-4242-1.log", 1000, age_s=old + 50)  # a crash-looping bot's
    write(tmp_path / "match-6" / "seat0-chatty.log", 5000, age_s=0)  # a match under way
    write(tmp_path / "pool" / "chatty-half0-place0-4242-2.log", 1000, age_s=0)  # its process, between seats
    removed = logs.keep_within_limit(tmp_path, 13_000)  # of 18,000 bytes
    assert removed == [tmp_path / "pool" / "chatty-half0-place0-4242-1.log", tmp_path / "match-1", tmp_path / "match-2"]
    logs._last_scan.clear()
    removed = logs.keep_within_limit(tmp_path, 1)
    assert removed == [tmp_path / f"match-{number}" for number in (3, 4, 5)], "what was written lately stays"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["match-6", "pool"]
    assert [path.name for path in (tmp_path / "pool").iterdir()] == ["chatty-half0-place0-4242-2.log"]


def test_a_folder_is_added_up_at_most_once_every_scan_period_and_not_at_all_without_a_limit(tmp_path: Path) -> None:
    write(tmp_path / "match-1" / "seat0-bot.log", 5000, age_s=logs.KEEP_RECENT_S + 10)
    assert logs.keep_within_limit(tmp_path, None) == []
    assert logs.keep_within_limit(tmp_path, 10_000) == []
    write(tmp_path / "match-2" / "seat0-bot.log", 9000, age_s=0)
    assert logs.keep_within_limit(tmp_path, 10_000) == [], f"looked again within {logs.SCAN_EVERY_S:g} s"
    logs._last_scan.clear()
    assert logs.keep_within_limit(tmp_path, 10_000) == [tmp_path / "match-1"]


def test_a_league_match_makes_room_under_the_limit_before_its_logs_are_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUS_LOG_DIR", str(tmp_path))
    monkeypatch.setenv("MUS_LOG_LIMIT", "1500")
    write(tmp_path / "match-1" / "seat0-bot.log", 1000, age_s=logs.KEEP_RECENT_S + 100)
    write(tmp_path / "match-2" / "seat0-bot.log", 1000, age_s=logs.KEEP_RECENT_S + 50)
    assert play.logs_dir(3) == tmp_path / "match-3"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["match-2"]
