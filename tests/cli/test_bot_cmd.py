"""`mus bot add/list/show/remove` on a real SQLite database: versions by content hash, remote tokens, bad input."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner, Result

from referee.service.lobby import token_sha256
from referee.service.server import start_server
from referee.service.servicer import Referee
from tests.cli.helpers import error_of, row_counts, use_database_copy
from workers import launcher
from workers.cli import bot_cmd, league_cmd
from workers.commands import guess_language, misplaced_options
from workers.db.session import ensure_schema, make_engine
from workers.launcher import own_program_file, resolve_program

runner = CliRunner()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh, migrated SQLite file: migrated once per module and only ever copied (`database`)."""
    path = tmp_path_factory.mktemp("migrated") / "mus.db"
    engine = make_engine(f"sqlite:///{path}")
    ensure_schema(engine)
    engine.dispose()
    return path


@pytest.fixture
def database(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test's own copy of `template` as MUS_DATABASE_URL; the working directory is the test's own folder."""
    monkeypatch.setenv("COLUMNS", "200")
    return use_database_copy(template, tmp_path, monkeypatch)


def bot_program(root: Path, name: str, body: str = "print('paso')\n") -> Path:
    """A bot's folder with its program `bot.py` and a helper module; returns the program's path."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bot.py").write_text(body)
    (folder / "helpers.py").write_text("SEAT = 0\n")
    return folder / "bot.py"


def ok(*args: str) -> Result:
    result = runner.invoke(bot_cmd.app, list(args))
    assert result.exit_code == 0, result.output
    return result


def test_add_registers_the_command_and_the_folder_of_its_file_as_version_1(database: str, tmp_path: Path) -> None:
    program = bot_program(tmp_path, "alpha")
    data = json.loads(ok("add", "alpha", "--json", "--", "python", "alpha/bot.py", "--fast").stdout)
    assert data["bot"] == "alpha" and data["version"] == 1 and data["new_version"] is True
    assert data["folder"] == str(program.parent.resolve())
    assert data["command"] == ["python", "bot.py", "--fast"], "the file is named as seen from the folder it runs in"
    assert data["language"] == "python"


def test_the_same_program_again_is_the_same_version_and_a_changed_one_a_new_version(
    database: str, tmp_path: Path
) -> None:
    program = bot_program(tmp_path, "alpha")
    first = ok("add", "alpha", "--", "python", str(program))
    assert "version 1 registered" in first.stdout
    again = ok("add", "alpha", "--", "python", str(program))
    assert "unchanged, version 1" in again.stdout
    (program.parent / "helpers.py").write_text("SEAT = 1\n")
    changed = json.loads(ok("add", "alpha", "--json", "--", "python", str(program)).stdout)
    assert changed["version"] == 2 and changed["new_version"] is True
    shown = json.loads(ok("show", "alpha", "--json").stdout)
    assert [(v["version"], v["current"]) for v in shown["versions"]] == [(1, False), (2, True)]
    assert shown["versions"][0]["content_hash"] != shown["versions"][1]["content_hash"]


def test_a_new_version_leaves_the_old_results_with_the_old_version(database: str, tmp_path: Path) -> None:
    alpha = bot_program(tmp_path, "alpha")
    ok("add", "alpha", "--", "python", str(alpha))
    ok("add", "beta", "--", "python", str(bot_program(tmp_path, "beta")))
    created = runner.invoke(league_cmd.app, ["create", "old", "--bots", "alpha,beta", "--matches-per-pairing", "2"])
    assert created.exit_code == 0, created.output
    alpha.write_text("print('envido')\n")
    ok("add", "alpha", "--", "python", str(alpha))
    shown = json.loads(ok("show", "alpha", "--json").stdout)
    assert shown["current_version"] == 2
    assert shown["leagues"] == [{"league": "old", "version": 1, "status": "created"}]
    created = runner.invoke(league_cmd.app, ["create", "new", "--bots", "alpha,beta", "--json"])
    assert created.exit_code == 0, created.output
    assert {e["bot"]: e["version"] for e in json.loads(created.stdout)["entrants"]} == {"alpha": 2, "beta": 1}


def test_dir_sets_the_folder_and_language_can_be_given(database: str, tmp_path: Path) -> None:
    folder = tmp_path / "javabot"
    folder.mkdir()
    (folder / "Bot.jar").write_bytes(b"PK\x03\x04")
    data = json.loads(
        ok("add", "jay", "--dir", str(folder), "--language", "kotlin", "--json", "--", "java", "-jar", "Bot.jar").stdout
    )
    assert data["folder"] == str(folder.resolve()) and data["language"] == "kotlin"
    assert data["command"] == ["java", "-jar", "Bot.jar"]
    without = json.loads(ok("add", "loose", "--json", "--", "some-binary", "--level", "3").stdout)
    assert without["folder"] is None and without["language"] == "unknown"


def test_an_interpreter_given_by_its_path_is_not_the_bots_folder(database: str, tmp_path: Path) -> None:
    program = bot_program(tmp_path, "alpha")
    data = json.loads(ok("add", "alpha", "--json", "--", sys.executable, str(program)).stdout)
    assert data["folder"] == str(program.parent.resolve())
    module = json.loads(ok("add", "beta", "--json", "--", sys.executable, "-m", "clients.bots.random").stdout)
    assert module["folder"] is None and module["language"] == "python"
    binary = tmp_path / "gamma" / "run"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n")
    compiled = json.loads(ok("add", "gamma", "--json", "--", "gamma/run", "--fast").stdout)
    assert compiled["folder"] == str(binary.parent.resolve()) and compiled["command"] == ["./run", "--fast"]
    # A newcomer's compiled stdio bot, named by its absolute path: registered with no folder, it could not start in
    # its sandbox (behind the bridge, only the bot's folder holds the program). Its folder is the bot's.
    (tmp_path / "delta").mkdir()
    shutil.copy(binary, tmp_path / "delta" / "run")
    stdio = json.loads(ok("add", "delta", "--stdio", "--json", "--", str(tmp_path / "delta" / "run")).stdout)
    assert stdio["folder"] == str((tmp_path / "delta").resolve()), stdio
    assert stdio["command"] == ["python", "-m", "clients.stdio", "--", "./run"], stdio
    system = json.loads(ok("add", "epsilon", "--json", "--", shutil.which("python3") or "", "-c", "pass").stdout)
    assert system["folder"] is None, "a runtime on PATH is not the bot's"


def test_a_venvs_python_is_a_runtime_and_a_data_file_does_not_choose_the_folder(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review (helper-64): a venv's `python`, not on PATH, was taken for the bot's own program and followed to
    the system interpreter (the folder /usr/bin, 412 MB hashed); a data file named by an absolute path chose the
    folder a command ran in."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "python").symlink_to(sys.executable)
    assert own_program_file(str(venv / "bin" / "python")) is None
    registered = json.loads(ok("add", "vb", "--json", "--", str(venv / "bin" / "python"), "-m", "mybot").stdout)
    assert registered["folder"] is None and registered["command"][0] == str(venv / "bin" / "python"), registered
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bot.py").write_text("pass\n")
    run = resolve_program("venv/bin/python bot.py")
    assert run.cwd == tmp_path.resolve() and run.command == ("venv/bin/python", "bot.py"), run
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "book.json").write_text("{}")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "mybot").write_text("#!/bin/sh\n")
    book = str(tmp_path / "data" / "book.json")
    assert resolve_program(f"bin/mybot --book {book}").cwd == (tmp_path / "bin").resolve()
    assert resolve_program(f"python3 -m mybot --book {book}").cwd == tmp_path.resolve()


def test_a_folder_that_holds_far_more_than_a_bot_is_refused_and_a_stdio_program_outside_any_is_warned_of(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program named by its path in the temporary folder itself (or a home folder) made all of it the bot's
    folder, hashed and shown to the bot; a stdio program in a folder on PATH was registered with none, and could
    not start behind the bridge (helper-64)."""
    loose = Path(tempfile.gettempdir()) / f"loose-bot-{os.getpid()}"
    loose.write_text("#!/bin/sh\n")
    try:
        refused = " ".join(error_of(runner.invoke(bot_cmd.app, ["add", "loose", "--", str(loose)])).split())
    finally:
        loose.unlink()
    assert "all of which would be hashed and shown to the bot" in refused, refused
    (tmp_path / "pbin").mkdir()
    (tmp_path / "pbin" / "cbot").write_text("#!/bin/sh\n")
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / "pbin"), os.environ["PATH"]]))
    said = " ".join(ok("add", "onpath", "--stdio", "--", str(tmp_path / "pbin" / "cbot")).stderr.split())
    assert "lies neither in a bot folder nor in the system's" in said and "--dir FOLDER -- ./PROGRAM" in said, said


def test_a_bot_folder_under_a_root_every_sandbox_binds_is_refused_but_the_example_bots_are_not(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bot's files under /usr or the venv (`WORKDIR /usr/src/app`, the usual Python image) are bound into every
    other bot's sandbox too (a review, helper-85); the example bots, in the project's packages, are there on purpose."""
    venv = tmp_path / "venv"
    program = bot_program(venv / "app" / "bots", "mine")
    monkeypatch.setattr(sys, "prefix", str(venv))
    refused = " ".join(error_of(runner.invoke(bot_cmd.app, ["add", "mine", "--", "python", str(program)])).split())
    assert f"the folder {program.parent.resolve()} lies under {venv.resolve()}, which every bot's sandbox" in refused
    assert "every other bot would read this one's files" in refused and "--dir bots/mine" in refused, refused
    assert runner.invoke(bot_cmd.app, ["show", "mine"]).exit_code != 0, "nothing registered"
    examples = Path(__file__).resolve().parents[2] / "clients" / "bots"
    ok("add", "rnd", "--dir", str(examples), "--", "python", "-m", "clients.bots.random")
    project = tmp_path / "project"  # a stranger's bot beside the examples: every seat reads it (helper-87)
    beside = bot_program(project / "clients" / "bots", "contrib")
    monkeypatch.setattr(launcher, "_PROJECT", project)
    refused = error_of(runner.invoke(bot_cmd.app, ["add", "contrib", "--", "python", str(beside)]))
    assert f"lies under {(project / 'clients').resolve()}, which every bot's sandbox" in " ".join(refused.split())


def test_a_bot_folder_inside_or_around_another_bots_folder_is_refused(database: str, tmp_path: Path) -> None:
    """A review added a bot with the folder `bots/` and another with `bots/victim/`, in either order: the first read
    the second's files in a league match, though neither's program (python) lay in the other's folder (helper-87)."""
    victim = bot_program(tmp_path / "bots", "victim")
    ok("add", "victim", "--", "python", str(victim))
    evil = tmp_path / "bots" / "evil.py"
    evil.write_text("print('paso')\n")
    around = " ".join(error_of(runner.invoke(bot_cmd.app, ["add", "evil", "--", "python", str(evil)])).split())
    assert f"the folder {evil.parent.resolve()} and {victim.parent.resolve()}, the folder of bot 'victim'" in around
    assert "lie one inside the other" in around, around
    inner = bot_program(victim.parent, "inner")
    inside = error_of(runner.invoke(bot_cmd.app, ["add", "inner", "--", "python", str(inner)]))
    assert "the folder of bot 'victim', lie one inside the other" in " ".join(inside.split()), inside
    ok("add", "victim2", "--dir", str(victim.parent), "--", "python", str(victim))  # one folder, shared: allowed
    ok("add", "beside", "--", "python", str(bot_program(tmp_path / "bots", "beside")))


def test_add_warns_of_a_program_this_machine_cannot_find_and_of_a_new_language(database: str, tmp_path: Path) -> None:
    """A newcomer's `mus bot add ghost -- nosuchcommand` was taken silently, and every match then charged the bot a
    crash; following the stdio example under the name `mybot` made a shell bot of their Python one without a word
    (newcomer walkthrough, stop 33)."""
    bot_program(tmp_path, "alpha")
    ghost = ok("add", "ghost", "--", "nosuchcommand-xyz", "--x")
    said = " ".join(ghost.stderr.split())
    assert "warning: the command names 'nosuchcommand-xyz', which is not on PATH on this machine" in said
    missing = ok("add", "gone", "--", "./nothere.sh")
    assert "'./nothere.sh', which is no file here" in " ".join(missing.stderr.split())
    quiet = ok("add", "gone2", "--json", "--", "./nothere.sh")  # JSON on stdout, the warning still on stderr
    assert json.loads(quiet.stdout)["bot"] == "gone2" and "which is no file here" in " ".join(quiet.stderr.split())
    # A newcomer followed a hint to `-- python mybot.py` from the project folder: a version that could not start,
    # and no machine could run it (its folder is hashed here): refused, not registered with a warning (stop 43).
    script = " ".join(error_of(runner.invoke(bot_cmd.app, ["add", "beta", "--", "python", "mybot.py"])).split())
    assert "the command names 'mybot.py', which is no file here" in script and "bots/NAME/NAME.py" in script
    assert runner.invoke(bot_cmd.app, ["show", "beta"]).exit_code != 0, "nothing registered"
    assert "warning" not in ok("add", "alpha", "--", "python", "alpha/bot.py").stderr
    # With --dir, the command's words are taken from that folder: a newcomer's typo was told to give them from here.
    typo = " ".join(
        error_of(runner.invoke(bot_cmd.app, ["add", "typo", "--dir", "alpha", "--", "python", "bott.py"])).split()
    )
    assert f"'bott.py', which is no file in {(tmp_path / 'alpha').resolve()}" in typo, typo
    assert "Give paths from the bot's folder (--dir) or from the folder you run mus in" in typo, typo
    (tmp_path / "alpha" / "bot.sh").write_text("echo paso\n")
    switched = " ".join(ok("add", "alpha", "--", "sh", "alpha/bot.sh").stderr.split())
    assert "note: bot alpha was a python bot (`python bot.py`); its new version is shell" in switched
    versions = json.loads(ok("show", "alpha", "--json").stdout)["versions"]
    assert [(version["version"], version["language"]) for version in versions] == [(1, "python"), (2, "shell")]


def test_add_with_a_failing_check_says_the_bot_stays_registered(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workers.cli import check_cmd

    class Failed:
        passed = False

    monkeypatch.setattr(check_cmd, "check_registered", lambda name, json_output: Failed())
    bot_program(tmp_path, "alpha")
    result = runner.invoke(bot_cmd.app, ["add", "alpha", "--check", "--", "python", "alpha/bot.py"])
    assert result.exit_code == 1
    said = " ".join(result.stderr.split())
    assert (
        "Bot alpha stays registered (version 1): fix it and `mus bot add` it again, or `mus bot remove alpha`" in said
    )


def test_the_language_is_guessed_from_the_interpreter_or_the_file() -> None:
    assert guess_language(["/usr/bin/python3.11", "-m", "bot"]) == "python"
    assert guess_language(["node", "bot.js"]) == "javascript"
    assert guess_language(["java", "-jar", "bot.jar"]) == "java"
    assert guess_language(["./run", "main.go"]) == "go"
    assert guess_language(["./mybot"]) == "unknown"
    # A newcomer's awk bot was registered `unknown` (stop 43).
    assert guess_language(["awk", "-f", "bot.awk"]) == "awk" and guess_language(["./run", "bot.awk"]) == "awk"


def test_remote_prints_a_token_once_and_stores_only_its_hash(database: str) -> None:
    token = json.loads(ok("add", "faraway", "--remote", "--json").stdout)["token"]
    assert len(token) >= 32
    engine = sa.create_engine(database)
    with engine.connect() as connection:
        stored = connection.execute(sa.text("SELECT token_sha256, remote FROM bot WHERE name = 'faraway'")).one()
    engine.dispose()
    assert stored == (hashlib.sha256(token.encode()).hexdigest(), True)
    shown = ok("show", "faraway")
    assert "remote" in shown.stdout and token not in shown.stdout
    assert token not in ok("show", "faraway", "--json").stdout
    text = ok("add", "other", "--remote").stdout
    assert "shown only this once" in text and "MUS_TOKEN" in text


def test_list_shows_every_bot_and_all_includes_removed_ones(database: str, tmp_path: Path) -> None:
    assert "No bots yet" in ok("list").stdout
    ok("add", "alpha", "--", "python", str(bot_program(tmp_path, "alpha")))
    ok("add", "beta", "--remote")
    table = ok("list").stdout
    assert "alpha" in table and "beta" in table and "remote" in table
    rows = json.loads(ok("list", "--json").stdout)
    assert [(row["bot"], row["remote"], row["current_version"]) for row in rows] == [
        ("alpha", False, 1),
        ("beta", True, 1),
    ]
    ok("remove", "beta")
    assert [row["bot"] for row in json.loads(ok("list", "--json").stdout)] == ["alpha"]
    everything = json.loads(ok("list", "--all", "--json").stdout)
    assert [row["bot"] for row in everything] == ["alpha", "beta"] and everything[1]["removed_at"] is not None


def test_show_says_when_a_version_was_added_and_when_it_was_made_current_again(database: str, tmp_path: Path) -> None:
    """A version added again after a later one (a revert) is current again: `show` said only "registered" with
    the latest time, and an old version looked newer than the next (newcomer walkthrough, stop 43)."""
    program = bot_program(tmp_path, "alpha")
    ok("add", "alpha", "--", "python", str(program))
    program.write_text("print('envido')\n")
    ok("add", "alpha", "--", "python", str(program))
    program.write_text("print('paso')\n")
    ok("add", "alpha", "--", "python", str(program))
    with make_engine(database).begin() as connection:  # version 1 was first added an hour before the others
        connection.execute(sa.text("UPDATE bot_version SET created_at = '2026-01-01 00:00:00' WHERE number = 1"))
    text = ok("show", "alpha").stdout
    assert "Version 1 (current), added 2026-01-01 00:00, last registered " in text, text
    assert "Version 2, added " in text and "Version 2, added 2026-01-01" not in text, text
    versions = json.loads(ok("show", "alpha", "--json").stdout)["versions"]
    assert versions[0]["created_at"][:10] == "2026-01-01", versions


def test_show_prints_each_version_whole_on_a_narrow_terminal(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table folded the hash, the command and the folder into columns a few letters wide at 80 columns (and cut
    them with an ellipsis before that): each version is a few lines, each value whole on one."""
    program = bot_program(tmp_path / "a-rather-long-folder-name" / "inside-another-one", "alpha")
    ok("add", "alpha", "--", "python", str(program))
    ok("add", "alpha", "--persistent", "--", "python", str(program))
    monkeypatch.setenv("COLUMNS", "80")
    text = ok("show", "alpha").stdout
    assert "Bot alpha: hosted program, python" in text and "Leagues: none" in text
    versions = json.loads(ok("show", "alpha", "--json").stdout)["versions"]
    assert len(versions) == 1, "adding the same program again sets persistent anew"
    assert "Version 1 (current), added " in text
    assert f"\n  command: python {program.name}\n" in text
    assert f"\n  folder:  {program.parent.resolve()}\n" in text
    assert f"\n  hash:    {versions[0]['content_hash']}\n" in text
    assert "\n  runs:    persistent (seat after seat from one process)\n" in text
    assert "…" not in text


def test_options_of_mus_given_after_the_double_dash_are_pointed_out(database: str, tmp_path: Path) -> None:
    """`mus bot check -- node bot.js --stdio` failed with "exited with code 0" and no word of why (stop 34)."""
    program = bot_program(tmp_path, "alpha")
    added = ok("add", "alpha", "--", "python", str(program), "--persistent")
    assert "note: --persistent is after `--`, so the bot's program gets it, not mus" in added.stderr
    assert json.loads(ok("show", "alpha", "--json").stdout)["persistent"] is False
    assert misplaced_options(["node", "bot.js", "--stdio", "--dir=x"]).startswith("note: --stdio, --dir=x are after")
    assert misplaced_options(["python", "-m", "clients.stdio", "--", "node", "bot.js"]) == ""


def test_persistent_is_chosen_at_add_shown_by_list_and_show_and_set_anew_by_adding_again(
    database: str, tmp_path: Path
) -> None:
    program = bot_program(tmp_path, "alpha")
    added = ok("add", "alpha", "--persistent", "--", "python", str(program))
    assert "runs:    persistent" in added.stdout
    ok("add", "beta", "--", "python", str(bot_program(tmp_path, "beta")))
    rows = json.loads(ok("list", "--json").stdout)
    assert [(row["bot"], row["persistent"]) for row in rows] == [("alpha", True), ("beta", False)]
    assert "hosted, persistent" in ok("list").stdout
    shown = json.loads(ok("show", "alpha", "--json").stdout)
    assert [(v["version"], v["persistent"]) for v in shown["versions"]] == [(1, True)]
    assert "persistent" in ok("show", "alpha").stdout
    again = json.loads(ok("add", "alpha", "--json", "--", "python", str(program)).stdout)
    assert again["version"] == 1 and again["new_version"] is False and again["persistent"] is False, (
        "the same program added without --persistent: the same version, now launched per seat"
    )
    said = ok("add", "alpha", "--persistent", "--", "python", str(program)).stdout
    assert "Bot alpha: unchanged, version 1 is its current version, and now runs persistent." in said, (
        "a newcomer saw only 'unchanged' while `bot list` said the choice had flipped"
    )
    same = ok("add", "alpha", "--persistent", "--", "python", str(program)).stdout
    assert "Bot alpha: unchanged, version 1 is its current version.\n" in same


def test_remove_retires_a_bot_but_not_while_an_unfinished_league_needs_it(database: str, tmp_path: Path) -> None:
    ok("add", "alpha", "--", "python", str(bot_program(tmp_path, "alpha")))
    ok("add", "beta", "--", "python", str(bot_program(tmp_path, "beta")))
    ok("add", "gamma", "--", "python", str(bot_program(tmp_path, "gamma")))
    created = runner.invoke(league_cmd.app, ["create", "cup", "--bots", "alpha,beta", "--matches-per-pairing", "2"])
    assert created.exit_code == 0, created.output
    refused = runner.invoke(bot_cmd.app, ["remove", "alpha"])
    assert "still needed by league(s) cup" in error_of(refused)
    assert json.loads(ok("show", "alpha", "--json").stdout)["removed_at"] is None
    assert "removed" in ok("remove", "gamma").stdout
    assert "no bot named 'gamma'" in error_of(runner.invoke(bot_cmd.app, ["remove", "gamma"]))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", "nobody"], "no bot named 'nobody'"),
        (["remove", "nobody"], "no bot named 'nobody'"),
        (["add", "bad name", "--", "python", "x.py"], "invalid bot name 'bad name'"),
        (["add", "alpha"], "give the command that runs the bot after `--`"),
        (["add", "alpha", "--remote", "--", "python", "x.py"], "a remote bot runs elsewhere"),
        (["add", "alpha", "--remote", "--persistent"], "a remote bot runs elsewhere"),
        (["add", "alpha", "--dir", "no/such/folder", "--", "python", "x.py"], "is not a directory"),
        (["add", "alpha", "--language", "x" * 40, "--", "python", "x.py"], "a bot language must be 1 to 32 characters"),
    ],
)
def test_bad_input_is_a_one_line_error_and_writes_nothing(database: str, args: list[str], message: str) -> None:
    result = runner.invoke(bot_cmd.app, args)
    assert message in error_of(result)
    assert sum(row_counts(database).values()) == 0


def test_a_database_that_cannot_be_used_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUS_DATABASE_URL", "mysql://somewhere/mus")
    assert "unsupported database" in error_of(runner.invoke(bot_cmd.app, ["list"]))
    monkeypatch.setenv("MUS_DATABASE_URL", f"sqlite:///{tmp_path / 'no' / 'such' / 'mus.db'}")
    assert "cannot use the database" in error_of(runner.invoke(bot_cmd.app, ["list"]))


def test_a_name_keeps_its_kind_and_a_refused_add_writes_nothing(database: str, tmp_path: Path) -> None:
    program = bot_program(tmp_path, "alpha")
    ok("add", "alpha", "--", "python", str(program))
    ok("add", "faraway", "--remote")
    before = row_counts(database)
    assert "bot 'alpha' already exists" in error_of(runner.invoke(bot_cmd.app, ["add", "alpha", "--remote"]))
    refused = runner.invoke(bot_cmd.app, ["add", "faraway", "--", "python", str(program)])
    assert "is a remote bot" in error_of(refused)
    assert row_counts(database) == before


@pytest.fixture
def live_referee() -> Iterator[Referee]:
    """A real referee on 127.0.0.1:0 serving from its own thread's event loop."""
    referee = Referee()
    started = threading.Event()
    stop: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
    ports: list[int] = []

    async def serve() -> None:
        server, port = await start_server(referee)
        stopping = asyncio.Event()
        stop.append((asyncio.get_running_loop(), stopping))
        ports.append(port)
        started.set()
        await stopping.wait()
        await server.stop(None)

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert started.wait(10)
    referee.lobby.referee_address = f"127.0.0.1:{ports[0]}"
    yield referee
    loop, stopping = stop[0]
    loop.call_soon_threadsafe(stopping.set)
    thread.join(10)


def test_removing_and_readding_a_remote_bot_revokes_its_old_token_on_the_referee(
    database: str, live_referee: Referee, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 9: after `mus bot remove` and a re-add, the old token still worked on the referee."""
    old = json.loads(ok("add", "faraway", "--remote", "--json").stdout)["token"]
    live_referee.lobby.register("faraway", token_sha256(old))  # as a league's worker does before a match
    monkeypatch.setenv("MUS_REFEREE_ADDRESS", live_referee.lobby.referee_address)
    monkeypatch.setenv("MUS_ADMIN_TOKEN", live_referee.admin_token)
    removed = ok("remove", "faraway").stdout
    assert "revoked faraway's old token" in removed, removed
    assert live_referee.lobby.authenticate(old) is None
    live_referee.lobby.register("faraway", token_sha256(old))
    readded = json.loads(ok("add", "faraway", "--remote", "--json").stdout)
    assert readded["registered"] is True and "the old token is revoked there" in readded["referee"]
    assert live_referee.lobby.authenticate(old) is None
    assert live_referee.lobby.authenticate(readded["token"]) == "faraway", "the new token is registered at once"


def test_without_a_referee_remove_says_the_old_token_lives_until_the_next_registration(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MUS_REFEREE_ADDRESS", raising=False)
    ok("add", "faraway", "--remote")
    removed = ok("remove", "faraway").stdout
    assert "No referee is configured (MUS_REFEREE_ADDRESS)" in removed and "next registers" in removed, removed
