"""This deployment's own paths (database file, broker and logs' folders), resolved once (`workers.paths`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.paths import resolved


def test_a_configured_path_resolves_from_the_working_directory_it_is_asked_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        assert resolved(".mus-logs") == (tmp_path / name / ".mus-logs").resolve()
    assert resolved(tmp_path / "one") == (tmp_path / "one").resolve()


def test_a_link_put_in_a_resolved_path_is_seen_by_the_next_process_not_this_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read once: a worker asks for these paths several times a match, and goes on writing where they were."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    before = resolved("logs")
    (tmp_path / "logs").symlink_to(tmp_path / "elsewhere")
    assert resolved("logs") == before == tmp_path.resolve() / "logs"
    assert Path("logs").resolve() == (tmp_path / "elsewhere").resolve()
