"""Databases for the tests of `workers/db`: a SQLite file per test, and PostgreSQL when it is reachable.

PostgreSQL: each test run (each xdist worker) creates its own database `mus_test_<random>` through the
`postgres` maintenance database and drops it at the end (one database, since each drop costs a checkpoint).
Its `public` schema is migrated once and emptied before each test; the migration tests get a schema of their
own (`migrations`, through the connection's search_path), wiped before each. Set `MUS_TEST_POSTGRES_URL` to use
another server; if none answers, the PostgreSQL cases are skipped with the reason.

SQLite: each test gets its own file, a copy of one migrated once per run (the migration tests migrate theirs).
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from psycopg import sql
from sqlalchemy.engine import Engine

from workers.db.models import metadata
from workers.db.session import ensure_schema, make_engine

ADMIN_URL = os.environ.get("MUS_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
"""A PostgreSQL server's maintenance database, where test databases are created and dropped."""

BACKENDS = ["sqlite", "postgresql"]
MIGRATION_SCHEMA = "migrations"


class PostgresServer:
    """Creates databases for one test run and drops them all at the end."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.created: list[str] = []

    def _admin(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.admin_url, autocommit=True, connect_timeout=3)

    def create_database(self) -> str:
        """A new empty database; its SQLAlchemy URL."""
        name = f"mus_test_{secrets.token_hex(6)}"
        with self._admin() as connection:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            # Tests need not survive a power cut: commits skip the WAL flush, which a busy disk makes slow.
            connection.execute(sql.SQL("ALTER DATABASE {} SET synchronous_commit TO off").format(sql.Identifier(name)))
        self.created.append(name)
        url = sa.make_url(self.admin_url).set(drivername="postgresql+psycopg", database=name)
        return url.render_as_string(hide_password=False)

    def drop_all(self) -> None:
        with self._admin() as connection:
            for name in self.created:
                connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        self.created.clear()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    try:
        with psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=3):
            pass
    except psycopg.Error as error:
        reason = " ".join(str(error).split())
        pytest.skip(f"PostgreSQL is not reachable at {ADMIN_URL} (set MUS_TEST_POSTGRES_URL): {reason}")
    server = PostgresServer(ADMIN_URL)
    yield server
    server.drop_all()


@pytest.fixture(scope="session")
def postgres_database(postgres: PostgresServer) -> str:
    """The test run's PostgreSQL database: its URL."""
    return postgres.create_database()


@pytest.fixture(scope="session")
def postgres_engine(postgres_database: str) -> Iterator[Engine]:
    """The test run's database, migrated once, emptied before each test that uses it."""
    engine = make_engine(postgres_database)
    ensure_schema(engine)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "mus.db"
    engine = make_engine(f"sqlite:///{path}")
    ensure_schema(engine)
    engine.dispose()  # the last connection to close checkpoints the WAL into the file
    return path


def _empty_tables(engine: Engine) -> None:
    # DELETE, not TRUNCATE: on tables this small it is much faster, and ids need not restart.
    with engine.begin() as connection:
        for table in reversed(metadata.sorted_tables):
            connection.execute(table.delete())


@pytest.fixture(params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """A migrated, empty database on each backend."""
    if request.param == "sqlite":
        path = tmp_path / "mus.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        sqlite_engine = make_engine(f"sqlite:///{path}")
        yield sqlite_engine
        sqlite_engine.dispose()
        return
    postgres_engine: Engine = request.getfixturevalue("postgres_engine")
    _empty_tables(postgres_engine)
    yield postgres_engine


@pytest.fixture(params=BACKENDS)
def empty_engine_factory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[], Engine]]:
    """Makes fresh, empty (unmigrated) databases on each backend: for the migration tests."""
    engines: list[Engine] = []

    def make() -> Engine:
        if request.param == "sqlite":
            engines.append(make_engine(f"sqlite:///{tmp_path_factory.mktemp('db') / 'mus.db'}"))
            return engines[-1]
        for made in engines:
            made.dispose()
        url = sa.make_url(request.getfixturevalue("postgres_database"))
        engines.append(make_engine(url.update_query_dict({"options": f"-csearch_path={MIGRATION_SCHEMA}"})))
        with engines[-1].begin() as connection:
            connection.exec_driver_sql(f"DROP SCHEMA IF EXISTS {MIGRATION_SCHEMA} CASCADE")
            connection.exec_driver_sql(f"CREATE SCHEMA {MIGRATION_SCHEMA}")
        return engines[-1]

    yield make
    for made in engines:
        made.dispose()
