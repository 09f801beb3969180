"""What a worker checks before it launches a league's hosted bots: the program is still the version that was
added, and there is a sandbox to run it in (unless the league said `--no-sandbox`)."""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.workers.conftest import Deployment
from workers import launcher, play
from workers.cli import match_cmd
from workers.cli.main import app as cli
from workers.db import repo
from workers.db.models import MatchStatus
from workers.db.session import session_scope
from workers.launcher import INSTALL_HINT, sandbox_available

BOT_SOURCE = "from clients.bots.passive_bot import main\n\nmain()\n"


@pytest.fixture(autouse=True)
def fresh_database() -> Iterator[None]:
    """`play.database()` is cached per process: each test has its own deployment's."""
    play.database.cache_clear()
    yield
    play.database.cache_clear()


def league_with_a_folder_bot(deployment: Deployment, *, sandbox: bool = True) -> tuple[int, Path]:
    """A league of one match between a bot in its own folder and the passive example; its match id and folder."""
    folder = deployment.root / "mybot"
    folder.mkdir()
    (folder / "bot.py").write_text(BOT_SOURCE)
    with session_scope(deployment.engine) as session:
        repo.add_bot(session, "mine", command=[sys.executable, "bot.py"], folder=folder, language="python")
        repo.add_bot(
            session, "passive", command=[sys.executable, "-m", "clients.bots.passive"], folder=None, language="python"
        )
        league = repo.create_league(
            session,
            "checked",
            bot_names=["mine", "passive"],
            matches=[{"team0": "mine", "team1": "passive", "seed": 7, "duplicate_pair": None}],
            options={"target_score": 5},
            matches_per_pairing=1,
            seed=7,
            sandbox=sandbox,
        )
        assert league.id is not None
        (match,) = repo.list_matches(session, league.id)
        assert match.id is not None
        return match.id, folder


def match_state(deployment: Deployment, match_id: int) -> tuple[MatchStatus, str]:
    with session_scope(deployment.engine) as session:
        match = repo.get_match(session, match_id)
        return match.status, match.error or ""


@pytest.mark.slow
@pytest.mark.skipif(not sandbox_available(), reason=INSTALL_HINT)
def test_a_bot_folder_changed_since_it_was_added_is_refused_and_the_match_fails_saying_what_to_do(
    deployment: Deployment,
) -> None:
    match_id, folder = league_with_a_folder_bot(deployment)
    (folder / "bot.py").write_text(BOT_SOURCE + "# now it reads the deals\n")
    assert play.play_league_match(match_id) == "failed"
    status, error = match_state(deployment, match_id)
    assert status is MatchStatus.FAILED
    assert "'mine' version 1 changed since it was added" in error and "`mus bot add mine --dir " in error


class SentAgain(list[tuple[float, bool]]):
    """A task's `again` (`play.SendAgain`) that only notes what it was asked."""

    def __call__(self, delay_s: float, handed_off: bool) -> None:
        self.append((delay_s, handed_off))


def test_a_machine_without_a_bots_folder_where_no_other_machine_is_alive_fails_the_match_saying_what_to_do(
    deployment: Deployment,
) -> None:
    """A review's worker on a machine the bot had never been copied to said the bot had changed, and to add it
    again (stop 39): the message says which machine is missing what. With no other machine seen alive, no worker
    could ever play it: it fails at once (three refusals failed it before), on its deal."""
    match_id, folder = league_with_a_folder_bot(deployment)
    with session_scope(deployment.engine) as session:
        dealt = repo.get_match(session, match_id).seed
    shutil.rmtree(folder)
    assert play.play_league_match(match_id, worker="far:1", again=SentAgain()) == "failed"
    status, error = match_state(deployment, match_id)
    assert status is MatchStatus.FAILED
    with session_scope(deployment.engine) as session:
        match = repo.get_match(session, match_id)
        assert (match.deal, match.seed) == (0, dealt), "no bot saw the deal: it stays, and a twin's pair with it"
    assert error == (
        f"refused by worker far:1: the folder of bot 'mine', {folder}, is not on this machine: every machine whose"
        " workers play hosted bots needs each one's folder at the path it was added from; no other machine whose"
        f" workers were seen in the last {play.LIVE_S:g} s has it: give it to one (or start a worker where it is),"
        " then `mus league run` again"
    )


def test_a_machine_without_a_bots_folder_leaves_the_match_to_a_live_machine_that_may_have_it(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A league on two machines, one of which was never given a bot's folder: its refusals used to count as the
    match's attempts, and after three the match failed, though the other machine's workers could play it. Now the
    match goes back to the queue for them, uncounted, and this worker waits about a match's time before it takes
    more work (so one of theirs is free to take it)."""
    monkeypatch.setattr(play, "DEFER_S", 0.01)
    match_id, folder = league_with_a_folder_bot(deployment)
    with session_scope(deployment.engine) as session:
        repo.machine_seen(session, "near")  # a worker of another machine, seen alive just now
    shutil.rmtree(folder)
    for attempt in range(5):
        again = SentAgain()
        assert play.play_league_match(match_id, worker=f"far:{attempt}", again=again) == "refused"
        assert again == [(0.0, True)], "sent again at once, to any worker (the message counts as handed off)"
        status, error = match_state(deployment, match_id)
        assert status is MatchStatus.QUEUED
        assert error.endswith(
            "is not on this machine: every machine whose workers play hosted bots needs each one's"
            " folder at the path it was added from; left to the workers of near"
        )
        with session_scope(deployment.engine) as session:
            assert repo.get_match(session, match_id).attempt == 0, "a refusal is no attempt"
    # Its message passed on MAX_HAND_OFFS times (the other machine's workers may not take this queue), or asked
    # without a way to send it again: the attempts count, as before, so it never loops for ever.
    assert play.play_league_match(match_id, worker="far:9", again=SentAgain(), may_hand_off=False) == "void"
    assert play.play_league_match(match_id, worker="far:9") == "void"
    assert play.play_league_match(match_id, worker="far:9") == "void"
    assert match_state(deployment, match_id)[0] is MatchStatus.FAILED


@pytest.mark.slow
@pytest.mark.skipif(not sandbox_available(), reason=INSTALL_HINT)
def test_an_unchanged_folder_bot_plays_its_league_match_in_the_sandbox(deployment: Deployment) -> None:
    match_id, _ = league_with_a_folder_bot(deployment)
    assert play.play_league_match(match_id) == "finished"
    assert match_state(deployment, match_id)[0] is MatchStatus.FINISHED


def test_a_worker_without_a_sandbox_refuses_the_match_and_says_how_to_install_one(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(play, "sandbox_available", lambda: False)  # this machine as one without bwrap
    monkeypatch.setattr(play, "DEFER_S", 0.01)
    match_id, _ = league_with_a_folder_bot(deployment)
    with session_scope(deployment.engine) as session:
        repo.machine_seen(session, "near")
    assert play.play_league_match(match_id, worker="far:1", again=SentAgain()) == "refused"
    status, error = match_state(deployment, match_id)
    assert status is MatchStatus.QUEUED, "another machine's worker, one with a sandbox, may take it"
    assert "apt-get install bubblewrap" in error and "--no-sandbox" in error
    assert error.endswith("left to the workers of near")
    with session_scope(deployment.engine) as session:
        repo.refuse_match(session, "near:1", needs=["sandbox"], lacks=["sandbox"], live_s=play.LIVE_S)
    assert play.play_league_match(match_id, worker="far:1", again=SentAgain()) == "failed", "nowhere to play"


def test_a_machine_given_the_folder_it_lacked_clears_its_refusal(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Copied to the machine after its worker refused a match, the folder is found by that worker's next claim:
    the machine is left matches that need it again (its refusal would otherwise count for REFUSAL_TTL_S)."""
    monkeypatch.setattr(play, "DEFER_S", 0.01)
    monkeypatch.setattr(play, "_play_hosted", lambda setup: (_ for _ in ()).throw(RuntimeError("not played here")))
    match_id, folder = league_with_a_folder_bot(deployment)
    with session_scope(deployment.engine) as session:
        repo.machine_seen(session, "near")
    moved = folder.rename(folder.with_name("elsewhere"))
    assert play.play_league_match(match_id, worker="far:1", again=SentAgain()) == "refused"
    moved.rename(folder)
    assert play.play_league_match(match_id, worker="far:1", again=SentAgain()) == "void", "launched, then failed"
    with session_scope(deployment.engine) as session:
        setup = repo.match_setup(session, match_id)
        needs = [f"folder:{team.version_id}" for team in setup.teams if team.folder]
        assert repo.refuse_match(session, "near:1", needs=needs, lacks=needs, live_s=play.LIVE_S) == ["far"]


@pytest.mark.parametrize(
    "ended",
    [
        asyncio.CancelledError(),  # the solo pool's, as `workers.app` has it (stop 39)
        NotImplementedError("<class 'celery.concurrency.solo.TaskPool'> does not implement kill_job"),  # Celery's
    ],
)
def test_a_match_ended_by_the_workers_cold_shutdown_is_voided_and_says_so_not_what_the_pool_raised(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch, ended: BaseException
) -> None:
    """Ctrl-C of `mus league run` stops its solo workers cold: the match in hand is cancelled, or ends with
    whatever a pool raises into it, which `league status` showed as its error."""
    from celery.worker import state

    def stopped_cold(setup: object) -> object:
        monkeypatch.setattr(state, "should_terminate", 1)  # what the worker sets before it stops the task
        raise ended

    monkeypatch.setattr(play, "_play_hosted", stopped_cold)
    match_id, _ = league_with_a_folder_bot(deployment)
    assert play.play_league_match(match_id) == "void"
    status, error = match_state(deployment, match_id)
    assert status is MatchStatus.QUEUED and error.startswith("the worker was stopped during the match"), error


@pytest.mark.slow
def test_a_no_sandbox_league_plays_on_a_worker_without_a_sandbox(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(play, "sandbox_available", lambda: False)
    match_id, _ = league_with_a_folder_bot(deployment, sandbox=False)
    with session_scope(deployment.engine) as session:
        assert repo.match_setup(session, match_id).sandbox is False
    assert play.play_league_match(match_id) == "finished"


@pytest.mark.slow
def test_match_play_runs_unconfined_with_a_one_line_note_where_there_is_no_sandbox(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(match_cmd, "sandbox_available", lambda: False)
    result = CliRunner().invoke(cli, ["match", "play", "random", "passive", "--quiet", "-o", "target_score=5"])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.output.splitlines() if line.startswith("note:")]
    assert notes == [f"note: the bots run unconfined ({INSTALL_HINT})"]
    assert "apt-get install bubblewrap" in INSTALL_HINT
    assert "Result:" in result.output


def test_a_bot_whose_folder_holds_the_database_is_refused_before_its_sandbox_would_show_it(
    deployment: Deployment,
) -> None:
    with session_scope(deployment.engine) as session:
        for name, folder in (("careless", deployment.root), ("passive", None)):
            command = [sys.executable, "-m", "clients.bots.passive"]
            repo.add_bot(session, name, command=command, folder=folder, language="python")
        league = repo.create_league(
            session,
            "exposed",
            bot_names=["careless", "passive"],
            matches=[{"team0": "careless", "team1": "passive", "seed": 7, "duplicate_pair": None}],
            options={"target_score": 5},
            matches_per_pairing=1,
            seed=7,
        )
        assert league.id is not None
        (match,) = repo.list_matches(session, league.id)
        assert match.id is not None
    assert play.play_league_match(match.id) == "failed"
    status, error = match_state(deployment, match.id)
    assert status is MatchStatus.FAILED
    assert f"holds {deployment.root / 'mus.db'}" in error and "a folder of its own" in error


def test_a_link_put_in_place_of_the_logs_folder_since_the_worker_started_is_seen_at_the_next_check(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check resolves the deployment's folders anew each time: whoever can write beside the logs' folder and swaps
    it for a link into a bot's folder has the next match of that bot refused (a review, stop 42)."""
    bot, logs = deployment.root / "bot", deployment.root / "logs"
    (bot / "inside").mkdir(parents=True)
    logs.mkdir()
    monkeypatch.setenv("MUS_LOG_DIR", str(logs))
    assert play.exposed_by(bot) is None
    logs.rmdir()
    logs.symlink_to(bot / "inside")
    assert play.exposed_by(bot) == (bot / "inside").resolve()


def own_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """The roots every sandbox binds moved under `tmp_path`: a system folder, a venv (`sys.prefix` and
    `sys.base_prefix`) and a project holding the packages; each resolved."""
    system, venv, project = (tmp_path / name for name in ("usr", "venv", "project"))
    for folder in (system, venv, project / "clients"):
        folder.mkdir(parents=True)
    monkeypatch.setattr(launcher, "SYSTEM_DIRS", (str(system),))
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "base_prefix", str(venv))
    monkeypatch.setattr(launcher, "_PROJECT", project)
    return system.resolve(), venv.resolve(), project.resolve()


def test_what_lies_under_a_root_every_sandbox_binds_is_found_with_that_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review (helper-85): the logs, the database, the broker's folder or the temporary folder under /usr, the venv
    or the project's packages are read by every seat, whatever its own folder."""
    system, venv, project = own_roots(tmp_path, monkeypatch)
    packages = (project / "clients", project / "referee", project / "proto" / "gen" / "python")
    assert launcher.bound_roots() == (system, venv, *packages)
    logs = venv / "var" / "mus-logs"  # need not exist yet: a worker makes it
    assert launcher.under_bound_root([tmp_path / "mus.db", logs]) == (logs, venv)
    assert launcher.under_bound_root([tmp_path / "mus.db", tmp_path / "usr-logs", tmp_path / "venv2"]) is None
    (tmp_path / "logs").symlink_to(system)  # a link to a bound root is seen through
    assert launcher.under_bound_root([tmp_path / "logs" / "pool"]) == (system / "pool", system)
    inside = project / "clients" / "bots" / "mine"
    assert launcher.under_bound_root([inside]) == (inside, project / "clients")
    assert launcher.example_folder(project / "clients" / "bots") and not launcher.example_folder(inside)


def test_each_private_path_under_a_bound_root_is_named_with_the_setting_that_moves_it(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, venv, _ = own_roots(deployment.root, monkeypatch)
    assert play.shown_to_every_seat() == "", "the deployment's own folder is bound by no sandbox"
    for setting, value in (
        ("MUS_LOG_DIR", str(venv / "logs")),
        ("MUS_DATABASE_URL", f"sqlite:///{venv}/app/mus.db"),
        ("MUS_BROKER_DIR", str(venv / "broker")),
    ):
        with monkeypatch.context() as moved:
            moved.setenv(setting, value)
            shown = play.shown_to_every_seat()
            assert f"lies under {venv}, which every bot's sandbox binds read-only" in shown, shown
            assert f"set {setting} to a place outside {venv}" in shown, shown
            assert play.shown_to_every_seat(existing=True) == "", "not there: `mus match play` makes none of them"
    monkeypatch.setattr(tempfile, "tempdir", str(venv / "tmp"))
    assert f"{venv / 'tmp'} lies under {venv}" in play.shown_to_every_seat()
    assert "set TMPDIR to a place outside" in play.shown_to_every_seat()


@pytest.mark.skipif(not sandbox_available(), reason=INSTALL_HINT)
def test_a_sandboxed_match_whose_logs_lie_under_a_bound_root_is_refused_before_any_seat_starts(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review (helper-85): a pooled bot read its rivals' live logs 93 times in one match, the log root lying
    under the venv. The worker refuses, naming the folder, the root and the setting."""
    match_id, _ = league_with_a_folder_bot(deployment)
    _, venv, _ = own_roots(deployment.root, monkeypatch)
    monkeypatch.setenv("MUS_LOG_DIR", str(venv / "var" / "mus-logs"))
    assert play.play_league_match(match_id) == "failed"
    status, error = match_state(deployment, match_id)
    assert status is MatchStatus.FAILED
    assert f"{venv / 'var' / 'mus-logs'} lies under {venv}" in error and "set MUS_LOG_DIR" in error, error


def test_a_match_whose_bots_folders_lie_one_inside_the_other_is_refused(tmp_path: Path) -> None:
    """Bots registered before `mus bot add` refused nested folders: the worker refuses their match, which would
    bind one bot's folder, and the other's files in it, into its sandbox (helper-87). One folder shared by two
    variants of a bot is not nested."""
    (tmp_path / "bots" / "victim").mkdir(parents=True)

    def setup(first: Path, second: Path) -> repo.MatchSetup:
        teams = [
            repo.TeamSetup(name, index, False, "python", index, 1, ("python", "bot.py"), str(folder), "hash")
            for index, (name, folder) in enumerate((("evil", first), ("victim", second)))
        ]
        return type("Setup", (), {"teams": teams})()  # type: ignore[no-any-return]

    nested = play._exposed_by_folder(setup(tmp_path / "bots", tmp_path / "bots" / "victim"), {})
    assert "lie one inside the other" in nested and "'evil'" in nested and "'victim'" in nested, nested
    assert play._exposed_by_folder(setup(tmp_path / "bots" / "victim", tmp_path / "bots"), {}) != ""
    assert play._exposed_by_folder(setup(tmp_path / "bots" / "victim", tmp_path / "bots" / "victim"), {}) == ""
    assert play._exposed_by_folder(setup(tmp_path / "bots" / "victim", tmp_path / "bots" / "vic"), {}) == ""
