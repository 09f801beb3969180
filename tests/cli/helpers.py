"""What the CLI tests share: reading a refused command's one-line error, counting rows to prove that a
refused command wrote nothing, and copying a database prepared once per module."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import Result

from workers.db.models import metadata


def error_of(result: Result) -> str:
    """The one-line error of a refused command (exit code 1, not a crash)."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def row_counts(url: str) -> dict[str, int]:
    """How many rows each table of the database holds."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return {
                table.name: int(connection.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())
                for table in metadata.sorted_tables
            }
    finally:
        engine.dispose()


def use_database_copy(template: Path, folder: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A copy of the SQLite file `template` (with its WAL, if one was left) in `folder`, as MUS_DATABASE_URL, with
    `folder` as the working directory; returns its URL.

    A module migrates and fills its database once and each test gets a copy of its own: a file copy instead of
    the migrations per test, and no test sees another's writes."""
    target = folder / template.name
    for suffix in ("", "-wal"):
        source = Path(f"{template}{suffix}")
        if source.exists():
            shutil.copy2(source, f"{target}{suffix}")
    url = f"sqlite:///{target}"
    monkeypatch.setenv("MUS_DATABASE_URL", url)
    monkeypatch.chdir(folder)
    return url
