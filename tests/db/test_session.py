"""Where the database is and how each backend is opened: SQLite WAL by default, PostgreSQL by URL."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from workers import play
from workers.db.errors import InvalidInput
from workers.db.models import Bot
from workers.db.session import DATABASE_URL_ENV, database_url, make_engine, session_scope


def test_default_database_is_mus_db_in_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert database_url() == f"sqlite:///{tmp_path / 'mus.db'}"


def test_mus_database_url_selects_the_database(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATABASE_URL_ENV, "postgresql+psycopg://league@db.example/mus")
    assert database_url() == "postgresql+psycopg://league@db.example/mus"


def test_relative_sqlite_path_is_fixed_when_the_engine_is_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    engine = make_engine("sqlite:///./mus.db")
    assert engine.url.database == str(tmp_path / "mus.db")


def test_plain_postgresql_url_means_psycopg_3() -> None:
    engine = make_engine("postgresql://league:secret@db.example/mus")
    assert engine.url.drivername == "postgresql+psycopg"


@pytest.mark.parametrize(
    "url", ["mysql://league@db.example/mus", "postgresql+asyncpg://db.example/mus", "not a url", "sqlite+aiosqlite://"]
)
def test_unsupported_databases_are_refused_with_a_message(url: str) -> None:
    with pytest.raises(InvalidInput, match=r"database|driver|URL"):
        make_engine(url)


def test_password_is_not_shown_in_errors() -> None:
    with pytest.raises(InvalidInput) as raised:
        make_engine("mysql://league:hunter2@db.example/mus")
    assert "hunter2" not in str(raised.value)


def test_sqlite_runs_in_wal_mode_with_foreign_keys(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'mus.db'}")
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert int(connection.exec_driver_sql("PRAGMA busy_timeout").scalar() or 0) >= 1000


def test_session_scope_commits_or_rolls_back(engine: Engine) -> None:
    with session_scope(engine) as session:
        session.add(Bot(name="kept", language="python"))
    with pytest.raises(RuntimeError), session_scope(engine) as session:
        session.add(Bot(name="dropped", language="python"))
        session.flush()
        raise RuntimeError("the command failed")
    with session_scope(engine) as session:
        assert session.exec(select(Bot.name)).all() == ["kept"]


def test_a_session_interrupted_inside_a_fetch_leaves_no_connection_that_cannot_write(
    tmp_path: Path, sqlite_template: Path
) -> None:
    """Ctrl-C landed inside a fetch of `mus league run`'s loop; its clean-up's first write then failed at once with
    "database is locked": the pooled connection still held the fetch's statement, and with it a read snapshot that
    another process's commit had made stale (stop 45). An interrupted session's connection is thrown away."""
    path = tmp_path / "mus.db"
    shutil.copyfile(sqlite_template, path)
    engine = make_engine(f"sqlite:///{path}")
    with session_scope(engine) as session:
        session.add_all(Bot(name=f"bot{number}", language="python") for number in range(50))

    def fetch(session: Session) -> None:
        rows = session.connection().exec_driver_sql("SELECT name FROM bot")
        rows.fetchone()
        raise KeyboardInterrupt  # as a signal lands inside the fetch: `rows` lives on in the traceback

    try:
        with session_scope(engine) as session:
            fetch(session)
    except KeyboardInterrupt:  # the clean-up runs here, as `mus league run`'s does
        with sqlite3.connect(path) as other:  # another process writes meanwhile (a worker)
            other.execute("UPDATE bot SET language = 'cpp' WHERE name = 'bot7'")
        with session_scope(engine) as session:
            session.add(Bot(name="after", language="python"))
    with session_scope(engine) as session:
        assert session.exec(select(Bot.name).where(Bot.name == "after")).one() == "after"


def test_objects_stay_readable_after_the_session_ends(engine: Engine) -> None:
    with session_scope(engine) as session:
        bot = Bot(name="kept", language="python")
        session.add(bot)
    assert bot.name == "kept"
    assert bot.created_at.utcoffset() is not None


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
def test_a_process_forked_from_a_worker_takes_connections_of_its_own(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prefork worker's child, forked once the parent held a connection, sent its queries down the parent's
    socket: both failed on each other's prepared statements, and a match was left queued with no message (a
    review, stop 39). After `after_fork` the child connects anew, and the parent's connection goes on."""
    url = (
        request.getfixturevalue("postgres_database") if backend == "postgresql" else f"sqlite:///{tmp_path / 'mus.db'}"
    )
    monkeypatch.setenv(DATABASE_URL_ENV, url)
    play.database.cache_clear()
    whose = (
        "SELECT pg_backend_pid()"
        if backend == "postgresql"
        else "SELECT file FROM pragma_database_list WHERE name = 'main'"  # a connection's own, checked below
    )
    try:
        engine = play.database()
        with engine.connect() as connection:
            parents = connection.exec_driver_sql(whose).scalar()
            parent_connection = connection.connection.dbapi_connection
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # the child: as `workers.app` on worker_process_init
            try:
                play.after_fork()
                with play.database().connect() as connection:
                    backend_pid = connection.exec_driver_sql(whose).scalar()
                    inherited = connection.connection.dbapi_connection is parent_connection
                os.write(write, f"{backend_pid}|{inherited}".encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as answer:
            childs, used_inherited = answer.read().split("|")
        os.waitpid(child, 0)
        assert used_inherited == "False", "the child used the connection it inherited"
        if backend == "postgresql":
            assert childs != str(parents), "the child's queries went to the parent's server process"
        with engine.connect() as connection:  # the parent's own connection still answers
            assert connection.exec_driver_sql(whose).scalar() == parents
            assert connection.connection.dbapi_connection is parent_connection
    finally:
        play.database.cache_clear()
