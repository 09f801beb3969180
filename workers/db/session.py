"""Opening the database: its URL, an engine tuned per backend, sessions, and migrating the schema.

Both deployments run this same code: a laptop gets a
SQLite file `./mus.db` in WAL mode, a cluster sets `MUS_DATABASE_URL=postgresql+psycopg://...`. The schema is
only ever created by the Alembic migrations in `workers/db/migrations`, run from Python by `ensure_schema`, so
no `alembic.ini` is needed at run time and both backends get exactly the same tables.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

from workers.db.errors import DbError, InvalidInput

DATABASE_URL_ENV = "MUS_DATABASE_URL"
DEFAULT_DATABASE_FILE = "mus.db"
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

SQLITE_BUSY_TIMEOUT_S = 30.0
"""How long a SQLite writer waits for another process's write to finish before giving up.

Local worker processes write results concurrently; SQLite lets one write at a time, so the others wait.
"""

_MIGRATION_LOCK_KEY = 0x6D75735F6462
"""PostgreSQL advisory lock taken while migrating, so workers starting together migrate one after another."""


def database_url() -> str:
    """`MUS_DATABASE_URL` if set, else the SQLite file `mus.db` in the current directory (as an absolute path).

    The default is resolved now rather than left relative, so a process that later changes directory (a worker
    starting a bot in its folder) keeps using the same file.
    """
    url = os.environ.get(DATABASE_URL_ENV, "").strip()
    if url:
        return url
    return f"sqlite:///{Path.cwd() / DEFAULT_DATABASE_FILE}"


DATABASE_FILE_MODE = 0o600
"""A new SQLite database file is readable and writable by its owner only (SQLite gives its -wal, -shm and
-journal files the database file's mode)."""


def sqlite_file(url: str | sa.URL | None = None) -> Path | None:
    """The file a SQLite URL (default `database_url()`) names, resolved; None for another backend, memory or URI."""
    try:
        parsed = sa.make_url(url if url is not None else database_url())
    except sa.exc.ArgumentError:
        return None
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database).resolve()


def create_private_file(path: Path) -> bool:
    """Create `path` empty with mode 0600 if it does not exist (never loosening an existing file); True if
    this call created it. SQLite then opens the empty file as a new database and creates its WAL files with
    the same mode."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, DATABASE_FILE_MODE)
    except FileExistsError:
        return False
    except OSError as error:
        raise InvalidInput(f"cannot create the database file {path}: {error.strerror or error}") from None
    os.close(descriptor)
    os.chmod(path, DATABASE_FILE_MODE)  # the umask can only take bits away; this makes the mode exact
    return True


def make_engine(url: str | sa.URL | None = None) -> Engine:
    """An engine for `url` (default `database_url()`): SQLite or PostgreSQL through psycopg 3.

    A SQLite file that does not exist yet is created with mode 0600 (`create_private_file`): the database holds
    every league's secret. SQLite gets WAL (readers never block the writer), foreign keys enforced, a busy
    timeout so concurrent writers queue instead of failing, and connections usable from any thread. PostgreSQL
    gets `pool_pre_ping`, so a connection the server dropped is replaced instead of failing a match.
    `postgresql://` means psycopg 3.
    """
    try:
        parsed = sa.make_url(url if url is not None else database_url())
    except sa.exc.ArgumentError as error:
        raise InvalidInput(f"cannot parse the database URL: {error}") from None
    backend = parsed.get_backend_name()
    shown = parsed.render_as_string(hide_password=True)
    if backend == "sqlite":
        if parsed.get_driver_name() != "pysqlite":
            raise InvalidInput(f"unsupported SQLite driver in {shown}: use sqlite:///PATH")
        database = parsed.database
        if database and database != ":memory:" and not database.startswith("file:"):
            path = Path(database).resolve()
            parsed = parsed.set(database=str(path))
            if path.parent.is_dir():
                create_private_file(path)
        engine = sa.create_engine(parsed, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_S})
        sa.event.listen(engine, "connect", _configure_sqlite_connection)
        return engine
    if backend == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        elif parsed.get_driver_name() != "psycopg":
            raise InvalidInput(f"unsupported PostgreSQL driver in {shown}: use postgresql+psycopg://...")
        return sa.create_engine(parsed, pool_pre_ping=True)
    raise InvalidInput(f"unsupported database {shown}: use sqlite:///PATH or postgresql+psycopg://...")


def _configure_sqlite_connection(dbapi_connection: Any, _record: Any) -> None:
    """Per connection: SQLite keeps foreign keys and the busy timeout per connection, WAL per file."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        # In WAL mode NORMAL loses no committed transaction on a process crash, only possibly on power loss.
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A session that commits when the block ends and rolls back if it raises.

    Objects stay usable after the block (`expire_on_commit=False`): the CLI prints what a function returned
    without going back to the database.
    """
    session = Session(engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except Exception:
        session.rollback()
        raise
    except BaseException:
        # An interrupt (Ctrl-C, or a signal raised as one) may land inside a fetch: its connection keeps the
        # statement, and on SQLite its read snapshot, and the next write on it failed at once, "database is locked",
        # once another process had written (`mus league run`'s clean-up after Ctrl-C, stop 45). So it is
        # thrown away, not given back to the pool.
        session.invalidate()
        raise
    finally:
        session.close()


def alembic_config(url: str | None = None) -> Config:
    """Alembic's configuration built in Python: the migrations folder shipped in this package.

    With `url`, Alembic's own commands open that database, e.g. to write a new revision after changing
    `models.py`: `command.revision(alembic_config(url), message="...", autogenerate=True)`.
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def head_revision() -> str:
    """The newest migration's revision id: what `ensure_schema` brings a database to."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the migrations folder has no revision"
    return head


def schema_revision(engine: Engine) -> str | None:
    """The revision the database is at; None for an empty database."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def ensure_schema(engine: Engine) -> None:
    """Run the migrations up to head; a database already at head is left as it is.

    Safe to call from every process at start-up: on PostgreSQL an advisory lock and on SQLite an immediate
    transaction make concurrent callers migrate one after the other, and each migration run is one transaction
    on both backends, so a failure leaves the database at its previous revision.
    """
    _run_migrations(engine, lambda config: command.upgrade(config, "head"))


def downgrade_schema(engine: Engine, revision: str = "base") -> None:
    """Run the migrations down to `revision` ("base" drops every table); for tests and rollbacks."""
    _run_migrations(engine, lambda config: command.downgrade(config, revision))


def _run_migrations(engine: Engine, run: Callable[[Config], None]) -> None:
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # A batch migration rebuilds tables (copy, drop, rename), which foreign keys would block or cascade
            # through; SQLite only lets them be switched outside a transaction. They are checked before commit.
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()
        try:
            with connection.begin():
                if sqlite:
                    # The sqlite3 module leaves DDL outside transactions; an explicit one makes the run atomic.
                    connection.exec_driver_sql("BEGIN IMMEDIATE")
                else:
                    connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
                config = alembic_config()
                config.attributes["connection"] = connection
                run(config)
                if sqlite:
                    _check_sqlite_foreign_keys(connection)
        finally:
            if sqlite:
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")
                connection.commit()


def _check_sqlite_foreign_keys(connection: Connection) -> None:
    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        tables = sorted({str(row[0]) for row in broken})
        raise DbError(f"the migration broke foreign keys in {', '.join(tables)}; nothing was changed")
