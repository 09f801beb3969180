"""The migrations run up, down and up again on SQLite and PostgreSQL, and build exactly the models' schema."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Engine

from workers.db import session
from workers.db.models import metadata
from workers.db.session import downgrade_schema, ensure_schema, head_revision, schema_revision

TABLES = {table.name for table in metadata.sorted_tables}


def _tables(engine: Engine) -> set[str]:
    with engine.connect() as connection:
        return set(sa.inspect(connection).get_table_names()) - {"alembic_version"}


def _schema_differences(engine: Engine) -> list[object]:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True, "target_metadata": metadata})
        return list(compare_metadata(context, metadata))


def test_migrations_run_up_down_and_up_again(empty_engine_factory: Callable[[], Engine]) -> None:
    engine = empty_engine_factory()
    assert schema_revision(engine) is None

    ensure_schema(engine)
    assert schema_revision(engine) == head_revision()
    assert _tables(engine) == TABLES

    downgrade_schema(engine)
    assert schema_revision(engine) is None
    assert _tables(engine) == set()

    ensure_schema(engine)
    assert schema_revision(engine) == head_revision()
    assert _tables(engine) == TABLES


def test_migrated_schema_matches_the_models(empty_engine_factory: Callable[[], Engine]) -> None:
    engine = empty_engine_factory()
    ensure_schema(engine)
    assert _schema_differences(engine) == []


def test_ensure_schema_at_head_changes_nothing(empty_engine_factory: Callable[[], Engine]) -> None:
    engine = empty_engine_factory()
    ensure_schema(engine)
    with engine.begin() as connection:
        connection.execute(
            sa.text("INSERT INTO bot (name, language, remote, created_at) VALUES ('kept', 'python', false, :now)"),
            {"now": "2026-01-01 00:00:00"},
        )
    ensure_schema(engine)
    with engine.connect() as connection:
        assert connection.execute(sa.text("SELECT name FROM bot")).scalars().all() == ["kept"]


def test_processes_starting_together_migrate_once(empty_engine_factory: Callable[[], Engine]) -> None:
    engine = empty_engine_factory()
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def start() -> None:
        barrier.wait()
        try:
            ensure_schema(engine)
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=start) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert schema_revision(engine) == head_revision()
    assert _tables(engine) == TABLES


BROKEN_REVISION = '''"""A migration that fails halfway: it creates a table, then breaks a constraint."""

import sqlalchemy as sa
from alembic import op

revision = "0099"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("scratch", sa.Column("id", sa.Integer(), primary_key=True))
    op.execute("INSERT INTO bot (name) VALUES (NULL)")


def downgrade() -> None:
    op.drop_table("scratch")
'''


def test_a_failing_migration_leaves_the_database_at_its_previous_revision(
    empty_engine_factory: Callable[[], Engine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = empty_engine_factory()
    ensure_schema(engine)
    previous = head_revision()
    migrations = tmp_path / "migrations"
    shutil.copytree(session.MIGRATIONS_DIR, migrations, ignore=shutil.ignore_patterns("__pycache__"))
    (migrations / "versions" / "0099_broken.py").write_text(BROKEN_REVISION.replace("{head}", previous))
    monkeypatch.setattr(session, "MIGRATIONS_DIR", migrations)

    with pytest.raises(sa.exc.IntegrityError):
        ensure_schema(engine)
    assert schema_revision(engine) == previous
    assert _tables(engine) == TABLES


def test_revision_0003_moves_the_incidents_out_of_the_faults_and_drops_the_stalls_that_repeated_timeouts(
    empty_engine_factory: Callable[[], Engine], tmp_path: Path
) -> None:
    """Before 0003 a result listed the incidents in `faults`, after the faults, and a `stall` with every timeout."""
    from tests.db.factories import add_bots, make_league, played
    from workers.db import repo
    from workers.db.session import session_scope

    engine = empty_engine_factory()
    ensure_schema(engine)
    with session_scope(engine) as db:
        add_bots(db, tmp_path, "alpha", "bravo")
        league = make_league(db, "spring", ["alpha", "bravo"])
        match_id = repo.unfinished_match_ids(db, league.id or 0)[0]
        claimed = repo.claim_match(db, match_id, "host:1", 60.0)
        assert claimed is not None
        outcome, record = played(claimed.seed)
        faults = [{"seat": 1, "cause": "timeout"}]
        incidents = [{"seat": 3, "cause": "crash", "detail": "exit 1"}]
        assert repo.record_result(db, match_id, "host:1", outcome, record, faults, [], incidents=incidents)
    downgrade_schema(engine, "0002")
    with engine.begin() as connection:
        (old,) = connection.execute(sa.text("SELECT faults FROM match_result")).scalars().all()
        old = json.loads(old) if isinstance(old, str) else old
        assert [entry["cause"] for entry in old] == ["timeout", "crash"], "0002 stored them together"
        stalled = [*old[:1], {"seat": 1, "cause": "stall", "detail": "silent"}, *old[1:]]
        connection.execute(sa.text("UPDATE match_result SET faults = :faults"), {"faults": json.dumps(stalled)})
    ensure_schema(engine)
    with engine.connect() as connection:
        row = connection.execute(sa.text("SELECT faults, incidents FROM match_result")).one()
    stored_faults, stored_incidents = (json.loads(value) if isinstance(value, str) else value for value in row)
    assert stored_faults == [{"seat": 1, "cause": "timeout", "detail": ""}]
    assert stored_incidents == [{"seat": 3, "cause": "crash", "detail": "exit 1"}]


def test_revision_0004_drops_the_rating_snapshots_and_its_downgrade_brings_the_table_back_empty(
    empty_engine_factory: Callable[[], Engine],
) -> None:
    """Nothing read a snapshot (standings are recomputed from the results), so 0004 drops the table."""
    engine = empty_engine_factory()
    ensure_schema(engine)
    assert "rating_snapshot" not in _tables(engine)
    downgrade_schema(engine, "0003")
    assert "rating_snapshot" in _tables(engine)
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "INSERT INTO league (name, rules, matches_per_pairing, seed, status, absent_limit_s, created_at) "
                "VALUES ('spring', '{}', 2, 0, 'created', 600, :now)"
            ),
            {"now": "2026-01-01 00:00:00"},
        )
        connection.execute(
            sa.text(
                "INSERT INTO rating_snapshot (league_id, computed_at, finished_matches, ratings) "
                "SELECT id, :now, 0, '[]' FROM league"
            ),
            {"now": "2026-01-01 00:00:00"},
        )
    ensure_schema(engine)
    assert schema_revision(engine) == head_revision()
    assert _tables(engine) == TABLES
    downgrade_schema(engine, "0003")
    with engine.connect() as connection:
        assert connection.execute(sa.text("SELECT count(*) FROM rating_snapshot")).scalar_one() == 0


def test_revision_0008_gives_each_stored_version_its_bots_language(
    empty_engine_factory: Callable[[], Engine], tmp_path: Path
) -> None:
    """Before 0008 only the bot had a language, its latest version's: `mus bot show` listed a python version 1 as
    shell once a shell version 2 was added (newcomer walkthrough, stop 33)."""
    from tests.db.factories import add_bots
    from workers.db.session import session_scope

    engine = empty_engine_factory()
    ensure_schema(engine)
    with session_scope(engine) as db:
        add_bots(db, tmp_path, "alpha")
    downgrade_schema(engine, "0007")
    with engine.begin() as connection:
        connection.execute(sa.text("UPDATE bot SET language = 'cpp'"))
    ensure_schema(engine)
    assert _schema_differences(engine) == []
    with engine.connect() as connection:
        assert connection.execute(sa.text("SELECT language FROM bot_version")).scalars().all() == ["cpp"]
