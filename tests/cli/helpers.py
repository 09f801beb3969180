"""What the CLI tests share: reading a refused command's one-line error, and counting rows to prove that a
refused command wrote nothing."""

from __future__ import annotations

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
