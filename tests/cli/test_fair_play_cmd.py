"""Fair play at the CLI: deals committed to and secret until played, verified at the end, deal modes, the sandbox
flag, bounded input, and a database that stays private and out of bot folders."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlmodel import Session
from typer.testing import CliRunner, Result

from referee.engine.replay import match_record
from referee.engine.rules import Rules
from referee.engine.selfplay import play_random_match
from tests.cli.helpers import error_of, use_database_copy
from workers.cli import bot_cmd, league_cmd, replay_cmd
from workers.cli.main import app
from workers.db import repo
from workers.db.session import ensure_schema, make_engine, session_scope

runner = CliRunner()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file with the hosted bots alpha and beta and the remote bot far: built once per module and
    only ever copied (`database`), never opened by a test."""
    path = tmp_path_factory.mktemp("fair-play-template") / "mus.db"
    engine = make_engine(f"sqlite:///{path}")
    ensure_schema(engine)
    with session_scope(engine) as session:
        for name in ("alpha", "beta"):
            repo.add_bot(session, name, command=["python", f"{name}.py"], folder=None, language="python")
        repo.add_remote_bot(session, "far")
    engine.dispose()
    return path


@pytest.fixture
def database(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test's own copy of `template` as MUS_DATABASE_URL; the working directory is the test's own folder."""
    monkeypatch.setenv("COLUMNS", "250")
    return use_database_copy(template, tmp_path, monkeypatch)


def ok(cli: object, *args: str) -> Result:
    result = runner.invoke(cli, list(args))  # type: ignore[arg-type]
    assert result.exit_code == 0, result.output
    return result


def play(url: str, league: str, count: int | None = None) -> None:
    """Play the league's next matches as a worker would, and finish the league when none is left."""
    engine = make_engine(url)
    with Session(engine) as session:
        row = repo.get_league(session, league)
        for match_id in repo.unfinished_match_ids(session, row)[:count]:
            claimed = repo.claim_match(session, match_id, "test:1", 60.0)
            assert claimed is not None
            match = play_random_match(Rules.from_options(row.rules), claimed.seed, policy_seed=match_id)
            assert match.outcome is not None
            assert repo.record_result(session, match_id, "test:1", match.outcome, match_record(match), [], [])
        repo.finish_league_if_complete(session, league)
        session.commit()
    engine.dispose()


def execute(url: str, statement: str, **values: object) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(sa.text(statement), values)
    engine.dispose()


def stored(url: str, league: str) -> tuple[str, list[int]]:
    """The league's secret and its matches' seeds, read from the database as only the operator can."""
    engine = make_engine(url)
    with Session(engine) as session:
        row = repo.get_league(session, league)
        assert row.secret is not None
        seeds = [match.seed for match in repo.list_matches(session, league)]
    engine.dispose()
    return row.secret, seeds


def outputs(league: str) -> str:
    """Everything the league commands print about a league."""
    runs = [
        ("list",),
        ("list", "--json"),
        ("status", league),
        ("status", league, "--json", "--matches"),
        ("status", league, "--matches"),
        ("standings", league),
        ("standings", league, "--json"),
        ("export", league),
        ("export", league, "--format", "csv"),
    ]
    return "\n".join(ok(league_cmd.app, *args).output for args in runs)


def test_create_commits_to_the_secret_and_no_output_shows_it_or_an_unplayed_seed(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = ok(
        league_cmd.app, "create", "cup", "--bots", "alpha,beta", "--matches-per-pairing", "4", "-o", "target_score=30"
    )
    secret, seeds = stored(database, "cup")
    assert f"Commitment (SHA-256 of the league's secret): {hashlib.sha256(bytes.fromhex(secret)).hexdigest()}" in (
        created.stdout
    )
    play(database, "cup", 3)  # the fourth match's twin (the third) has finished: that deal is still unplayed
    text = outputs("cup") + created.output
    assert secret not in text
    for seed in seeds[2:]:
        assert str(seed) not in text, "the seed of a deal a match has yet to play"
    listed = json.loads(ok(league_cmd.app, "status", "cup", "--json", "--matches").stdout)
    assert [row["seed"] for row in listed["matches"]] == [seeds[0], seeds[1], None, None]
    # Its second pair is half played: the standings say why it does not count yet (a newcomer read 5/7 unexplained).
    assert "Pairs: twins count as a pair only when both were played on one deal" in " ".join(
        ok(league_cmd.app, "standings", "cup").stdout.split()
    )
    monkeypatch.delenv("COLUMNS", raising=False)  # piped, as here: the table whole, however wide (not 80 columns)
    table = ok(league_cmd.app, "status", "cup", "--matches").stdout
    assert str(seeds[0]) in table and str(seeds[1]) in table, "a played deal's seed is in the text table too"
    assert "…" not in table and max(len(line) for line in table.splitlines()) > 80, table
    assert listed["secret"] is None and listed["commitment"] == hashlib.sha256(bytes.fromhex(secret)).hexdigest()
    rows = list(csv.DictReader(io.StringIO(ok(league_cmd.app, "export", "cup", "--format", "csv").stdout)))
    assert [row["seed"] for row in rows] == [str(seeds[0]), str(seeds[1]), "", ""]
    refused = runner.invoke(replay_cmd.app, ["show", str(listed["matches"][2]["match_id"]), "--json"])
    assert "opens when its duplicate twin" in error_of(refused)


def test_the_secret_is_revealed_at_the_end_and_verify_checks_every_seed_against_it(database: str) -> None:
    ok(league_cmd.app, "create", "cup", "--bots", "alpha,beta", "--matches-per-pairing", "2", "-o", "target_score=30")
    secret, _ = stored(database, "cup")
    play(database, "cup")
    data = json.loads(ok(league_cmd.app, "status", "cup", "--json").stdout)
    assert data["status"] == "finished" and data["secret"] == secret
    assert hashlib.sha256(bytes.fromhex(data["secret"])).hexdigest() == data["commitment"]
    assert f"secret (revealed) {secret}" in ok(league_cmd.app, "status", "cup").stdout
    assert json.loads(ok(league_cmd.app, "export", "cup").stdout)["league"]["secret"] == secret
    assert "Pairs: twins count" not in ok(league_cmd.app, "standings", "cup").stdout, "its one pair is whole"
    verified = ok(replay_cmd.app, "verify", "--league", "cup")
    assert "Seeds: 2 of 2 derive from the league's revealed secret." in verified.stdout
    report = json.loads(ok(replay_cmd.app, "verify", "--league", "cup", "--json").stdout)
    assert all(entry["seed_verified"] for entry in report["matches"])

    # A seed chosen after the fact (the replay and the match changed together, so the replay still re-simulates).
    first = report["matches"][0]["match_id"]
    engine = make_engine(database)
    with Session(engine) as session:
        record = repo.get_replay(session, first)
    engine.dispose()
    forged = play_random_match(Rules.from_options({"target_score": 30}), 12345, policy_seed=1)
    assert forged.outcome is not None
    execute(database, "UPDATE match SET seed = 12345 WHERE id = :id", id=first)
    record = match_record(forged)
    execute(
        database,
        "UPDATE replay SET data = :data WHERE match_id = :id",
        data=zlib.compress(json.dumps(record).encode()),
        id=first,
    )
    tampered = runner.invoke(replay_cmd.app, ["verify", "--league", "cup"])
    assert tampered.exit_code == 1 and "the seed 12345 is not derived from the league's secret" in tampered.stdout

    # A secret swapped after the fact no longer hashes to the commitment printed when the league was created.
    execute(database, "UPDATE league SET secret = :secret", secret="ab" * 32)
    swapped = runner.invoke(replay_cmd.app, ["verify", "--league", "cup"])
    assert swapped.exit_code == 1 and "does not hash to its commitment" in swapped.stdout


def test_a_league_with_a_remote_bot_plays_independent_deals_unless_duplicate_is_forced_with_a_warning(
    database: str,
) -> None:
    data = json.loads(ok(league_cmd.app, "create", "open", "--bots", "alpha,far", "--json").stdout)
    assert data["deal_mode"] == "independent" and data["warning"] is None
    status = json.loads(ok(league_cmd.app, "status", "open", "--json", "--matches").stdout)
    assert {row["duplicate_pair"] for row in status["matches"]} == {None}
    assert "Deals: independent" in ok(league_cmd.app, "status", "open").stdout
    forced = ok(league_cmd.app, "create", "dup", "--bots", "alpha,far", "--deals", "duplicate")
    assert "warning: remote bot(s) far play duplicate deals" in forced.stderr
    assert "Deals: duplicate pairs" in forced.stdout
    hosted = json.loads(
        ok(league_cmd.app, "create", "home", "--bots", "alpha,beta", "--deals", "independent", "--json").stdout
    )
    assert hosted["deal_mode"] == "independent"
    rows = json.loads(ok(league_cmd.app, "standings", "home", "--json").stdout)
    assert {row["deal_mode"] for row in rows} == {"independent"}


def test_a_league_with_a_persistent_bot_plays_duplicate_deals_without_a_warning(database: str) -> None:
    """Its pairs are played whole by one worker (docs/leagues.md): nothing to warn of, unlike a remote bot's."""
    engine = make_engine(database)
    with session_scope(engine) as session:
        repo.add_bot(
            session, "keeper", command=["python", "keeper.py"], folder=None, language="python", persistent=True
        )
    engine.dispose()
    data = json.loads(ok(league_cmd.app, "create", "open", "--bots", "alpha,keeper", "--json").stdout)
    assert data["deal_mode"] == "duplicate" and data["warning"] is None


def test_no_sandbox_is_recorded_and_shown_by_status_and_standings(database: str) -> None:
    created = json.loads(ok(league_cmd.app, "create", "cup", "--bots", "alpha,beta", "--no-sandbox", "--json").stdout)
    assert created["sandbox"] is False
    assert "Sandbox: off (--no-sandbox)" in ok(league_cmd.app, "status", "cup").stdout
    assert json.loads(ok(league_cmd.app, "status", "cup", "--json").stdout)["sandbox"] is False
    assert "Sandbox: off (--no-sandbox)" in ok(league_cmd.app, "standings", "cup").stdout
    assert {row["sandbox"] for row in json.loads(ok(league_cmd.app, "standings", "cup", "--json").stdout)} == {False}
    ok(league_cmd.app, "create", "safe", "--bots", "alpha,beta")
    assert "Sandbox: on" in ok(league_cmd.app, "status", "safe").stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["league", "create", "cup", "--bots", "alpha,beta", "--matches-per-pairing", "100000"], "at most 1000"),
        (["league", "create", "cup", "--bots", "alpha,beta", "-o", "target_score=" + "[" * 100_000], "too deeply"),
        (["rules", "play", "-o", "target_score=" + "[" * 100_000], "too deeply"),
        (["league", "create", "cup", "--bots", "alpha,far", "--absent-limit", "1e308"], "at most 86400 seconds"),
        (["replay", "show", str(2**63)], "match ids run from 1 to 2**63-1"),
        (["replay", "export", str(2**64)], "match ids run from 1 to 2**63-1"),
        (["replay", "verify", "99999999999999999999999"], "match ids run from 1 to 2**63-1"),
    ],
)
def test_input_past_its_bounds_is_a_one_line_error(database: str, args: list[str], message: str) -> None:
    assert message in error_of(runner.invoke(app, args))


def test_a_new_database_file_is_private_and_so_are_its_wal_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MUS_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    assert "faraway" in ok(bot_cmd.app, "add", "faraway", "--remote").stdout
    database = tmp_path / "mus.db"
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
    engine = make_engine(f"sqlite:///{database}")
    with engine.connect() as connection:  # keep a connection open: the WAL files exist while it does
        connection.exec_driver_sql("SELECT count(*) FROM league").fetchall()
        for suffix in ("-wal", "-shm"):
            path = Path(f"{database}{suffix}")
            assert path.exists() and stat.S_IMODE(path.stat().st_mode) == 0o600, suffix
    engine.dispose()


def test_bot_add_inside_the_bots_folder_does_not_create_a_database_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Said "the folder holds mus.db" of a file only mus would have made, and to move the bot (newcomer, stop 33):
    the fix is to run mus from the project folder."""
    folder = tmp_path / "mybot"
    folder.mkdir()
    (folder / "bot.py").write_text("print('paso')\n")
    monkeypatch.delenv("MUS_DATABASE_URL", raising=False)
    monkeypatch.chdir(folder)
    result = runner.invoke(app, ["bot", "add", "mybot", "--", "python", "bot.py"])
    message = error_of(result)
    assert f"mus is run from inside the bot's folder {folder}" in message and f"({folder / 'mus.db'})" in message
    assert f"`mus bot add mybot --dir {folder} -- python bot.py`" in message, "the way out, not a folder of its own"
    assert sorted(path.name for path in folder.iterdir()) == ["bot.py"], "no database left in the bot's folder"


def test_the_commands_a_message_gives_to_add_a_bot_again_keep_every_choice_it_was_added_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newcomer pasted the hints: from the bot's folder, and after editing a persistent stdio bot. Both dropped
    `--stdio` and `--persistent`, and registered a bot that did not start or no longer persisted (stop 34)."""
    monkeypatch.delenv("MUS_DATABASE_URL", raising=False)
    folder = tmp_path / "bots" / "shbot"
    folder.mkdir(parents=True)
    (folder / "bot.sh").write_text("read line\n")
    monkeypatch.chdir(folder)
    inside = error_of(
        runner.invoke(app, ["bot", "add", "shbot", "--stdio", "--persistent", "--language", "sh", "--", "sh", "bot.sh"])
    )
    again = f"mus bot add shbot --stdio --persistent --dir {folder} --language sh -- sh bot.sh"
    assert f"`{again}`" in inside, inside
    monkeypatch.chdir(tmp_path)
    added = runner.invoke(app, again.split()[1:])
    assert added.exit_code == 0 and "version 1 registered (sh)" in added.stdout, added.output
    (folder / "bot.sh").write_text("read line\necho changed >&2\n")
    changed = error_of(runner.invoke(app, ["league", "create", "spring", "--bots", "shbot,random"]))
    readd = f"mus bot add shbot --stdio --persistent --dir {folder} --language sh -- sh bot.sh"
    assert f"`{readd}`" in changed, changed
    pasted = runner.invoke(app, readd.split()[1:])
    assert "version 2 registered (sh)" in pasted.stdout and not pasted.stderr, pasted.output
    (version,) = [
        v for v in json.loads(runner.invoke(app, ["bot", "show", "shbot", "--json"]).stdout)["versions"] if v["current"]
    ]
    assert version["persistent"] and version["command"][:4] == ["python", "-m", "clients.stdio", "--"]


def test_a_reading_command_where_there_is_no_database_says_so_and_creates_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from a bot's folder, `mus bot list` said "No bots yet: add one" and `league standings` "no league": a
    newcomer would have registered bots into a second database (newcomer walkthrough, stop 33)."""
    monkeypatch.delenv("MUS_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    for command in (["bot", "list"], ["league", "list"], ["league", "standings", "spring"]):
        result = runner.invoke(app, command)
        said = " ".join(result.stderr.split())
        assert f"note: there is no database at {tmp_path / 'mus.db'}" in said and "set MUS_DATABASE_URL" in said
        assert "yet" not in result.stdout, "no invitation to add a bot or create a league here"
    run = runner.invoke(app, ["league", "run", "spring"])
    assert run.exit_code == 1 and f"there is no database at {tmp_path / 'mus.db'}" in run.stderr
    for command in (  # nothing to change where there is nothing registered (newcomer walkthrough, stop 34)
        ["league", "create", "spring", "--bots", "alpha,beta"],
        ["league", "pause", "spring"],
        ["league", "cancel", "spring"],
        ["bot", "remove", "alpha"],
        ["bot", "check", "alpha"],
    ):
        refused = runner.invoke(app, command)
        assert refused.exit_code == 1 and "note: there is no database" in refused.stderr, (command, refused.output)
    assert list(tmp_path.iterdir()) == [], "nothing made"
    assert runner.invoke(app, ["bot", "add", "faraway", "--remote"]).exit_code == 0
    assert "no database" not in runner.invoke(app, ["bot", "list"]).stderr


def test_bot_add_refuses_a_folder_that_holds_the_database_as_a_bot_in_the_project_folder_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newcomer added the README's bot from the project folder: it was accepted, and every match of its league
    then failed, its folder holding mus.db. `mus bot add` refuses it at once; a folder of its own is taken."""
    monkeypatch.delenv("MUS_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, ["bot", "add", "faraway", "--remote"]).exit_code == 0 and (tmp_path / "mus.db").exists()
    (tmp_path / "mybot.py").write_text("print('paso')\n")
    message = error_of(runner.invoke(app, ["bot", "add", "mybot", "--", "python", "mybot.py"]))
    assert f"the folder {tmp_path} holds {tmp_path / 'mus.db'}" in message and "bots/mybot/" in message
    (tmp_path / "bots" / "mybot").mkdir(parents=True)
    (tmp_path / "bots" / "mybot" / "mybot.py").write_text("print('paso')\n")
    added = runner.invoke(app, ["bot", "add", "mybot", "--", "python", "bots/mybot/mybot.py"])
    assert added.exit_code == 0 and "version 1 registered" in added.output, added.output


def test_mus_bot_add_run_in_the_bots_folder_leaves_nothing_there(tmp_path: Path) -> None:
    """A fresh `mus` process (the CLI runner above imports the project once, elsewhere): importing the Celery app
    made the embedded broker's folders in the working directory, so `mus bot add` run in the bot's folder left a
    .mus-broker there, which its sandbox would show and which refused the next `mus bot add` of it."""
    (tmp_path / "bot.py").write_text("print('paso')\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith("MUS_")}
    for command in (["bot", "add", "mybot", "--", "python", "bot.py"], ["bot", "list"], ["league", "list"]):
        subprocess.run([sys.executable, "-m", "workers.cli.main", *command], cwd=tmp_path, env=env, capture_output=True)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bot.py"]


def test_commands_that_only_read_leave_no_database_where_there_was_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newcomer ran `mus bot list` in a bot's folder: it left a mus.db there, and the bot's content changed."""
    monkeypatch.delenv("MUS_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    for command in (["bot", "list"], ["bot", "list", "--json"], ["league", "list"]):
        assert runner.invoke(app, command).exit_code == 0, command
    for command in (["bot", "show", "nobody"], ["league", "status", "nothing"], ["league", "standings", "nothing"]):
        refused = runner.invoke(app, command)
        assert refused.exit_code == 1 and refused.stderr.splitlines()[-1].startswith("error: "), command
    assert list(tmp_path.iterdir()) == []


def test_a_bots_content_hash_never_includes_the_database_files(tmp_path: Path) -> None:
    folder = tmp_path / "mybot"
    folder.mkdir()
    (folder / "bot.py").write_text("print('paso')\n")
    before = repo.content_hash(["python", "bot.py"], folder)
    for name in ("mus.db", "mus.db-wal", "mus.db-shm", "mus.db-journal"):
        (folder / name).write_bytes(b"league data that changes while leagues run")
    assert repo.content_hash(["python", "bot.py"], folder) == before
    (folder / "book.db").write_bytes(b"the bot's own data")
    assert repo.content_hash(["python", "bot.py"], folder) != before


def test_league_create_refuses_an_entrant_whose_folder_changed_since_it_was_added(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newcomer edited an added bot, created a league with it (accepted) and every match then failed, the league
    stuck unfinished: the change is caught when the league is created, before anything is planned."""
    monkeypatch.delenv("MUS_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bots" / "mybot").mkdir(parents=True)
    (tmp_path / "bots" / "mybot" / "mybot.py").write_text("print('paso')\n")
    assert runner.invoke(app, ["bot", "add", "mybot", "--", "python", "bots/mybot/mybot.py"]).exit_code == 0
    (tmp_path / "bots" / "mybot" / "mybot.py").write_text("print('envido')\n")
    message = error_of(runner.invoke(app, ["league", "create", "spring", "--bots", "mybot,random"]))
    assert "bot 'mybot' version 1 changed since it was added" in message and "restore it" in message
    folder = (tmp_path / "bots" / "mybot").resolve()
    readd = f"`mus bot add mybot --dir {folder} -- python mybot.py`"
    assert readd in message, "the whole command: a bare `mus bot add mybot` is refused (newcomer re-check, stop 33)"
    added = runner.invoke(app, ["bot", "add", "mybot", "--dir", str(folder), "--", "python", "mybot.py"])
    assert added.exit_code == 0 and "version 2 registered" in added.stdout and not added.stderr, added.output
    assert runner.invoke(app, ["league", "status", "spring"]).exit_code != 0, "no league was made"


def _shell_bot(folder: Path, name: str) -> Path:
    """An executable program `name` in `folder` (made) that plays as the random bot; returns its path."""
    folder.mkdir(parents=True)
    program = folder / name
    program.write_text("#!/bin/sh\nexec python3 -m clients.bots.random\n")
    program.chmod(0o755)
    return program


def test_bot_add_refuses_a_program_that_lies_in_another_bots_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox binds a bot's program wherever it lies (an interpreter outside /usr must be): naming another
    bot's program as one's own would run that bot as another's (a review's finding, stop 29)."""
    monkeypatch.delenv("MUS_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    victim = _shell_bot(tmp_path / "bots" / "victim", "bot").parent
    assert runner.invoke(app, ["bot", "add", "victim", "--", "./bots/victim/bot"]).exit_code == 0
    (tmp_path / "bots" / "evil").mkdir()
    message = error_of(runner.invoke(app, ["bot", "add", "evil", "--dir", "bots/evil", "--", str(victim / "bot")]))
    assert f"the program {victim / 'bot'} lies in the folder of bot 'victim'" in message
    again = runner.invoke(app, ["bot", "add", "victim", "--", "./bots/victim/bot"])
    assert again.exit_code == 0, again.output
    message = error_of(runner.invoke(app, ["bot", "add", "evil", "--dir", "bots", "--", "./victim/bot"]))
    assert f"the folder {(tmp_path / 'bots').resolve()} holds {victim / 'bot'}, the program of bot 'victim'" in message


@pytest.mark.parametrize("stdio", [False, True], ids=["grpc", "stdio"])
def test_two_bots_may_share_one_folder_however_their_program_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stdio: bool
) -> None:
    """A persistent variant under a name of its own (clients/js/README's jsbot and jskeeper): the folder is each
    bot's own, whether given with --dir or as the program's path. A newcomer's re-check (stop 43) had the path form
    refused as another bot's program, and then the first bot's own command refused too, while --dir passed."""
    monkeypatch.delenv("MUS_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    _shell_bot(tmp_path / "bots" / "cbot", "cbot")
    bridge = ["--stdio"] if stdio else []
    for name, options, program in [
        ("cbot", [], "bots/cbot/cbot"),
        ("ckeeper", ["--persistent"], "bots/cbot/cbot"),
        ("cbot", [], "bots/cbot/cbot"),
        ("ckeeper2", ["--persistent", "--dir", "bots/cbot"], "./cbot"),
    ]:
        added = runner.invoke(app, ["bot", "add", name, *bridge, *options, "--", program])
        assert added.exit_code == 0, (name, added.output)


@pytest.mark.parametrize("stdio", [False, True], ids=["grpc", "stdio"])
def test_bot_add_refuses_a_folder_that_holds_another_bots_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stdio: bool
) -> None:
    """The other way round: a bot whose program lies outside its folder (an engine of its own, run as an
    interpreter), then another bot whose folder holds it: that bot's sandbox would show it the first one's program.
    Behind the stdio bridge the program is the bridged one (stop 43: the stored command's `python` was looked at)."""
    monkeypatch.delenv("MUS_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    engine = _shell_bot(tmp_path / "tools", "engine")
    (tmp_path / "bots" / "victim").mkdir(parents=True)
    (tmp_path / "bots" / "victim" / "bot.txt").write_text("options\n")
    bridge = ["--stdio"] if stdio else []
    added = runner.invoke(app, ["bot", "add", "victim", *bridge, "--dir", "bots/victim", "--", str(engine)])
    assert added.exit_code == 0, added.output
    (tmp_path / "tools" / "evil.py").write_text("print('paso')\n")
    message = error_of(runner.invoke(app, ["bot", "add", "evil", "--", "python3", "tools/evil.py"]))
    assert f"the folder {engine.parent} holds {engine}, the program of bot 'victim'" in message
