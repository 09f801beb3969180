"""`mus league create/list/status/standings/export` on a real SQLite database, with results written as a worker
writes them (claim, then record a real engine match and its replay)."""

from __future__ import annotations

import csv
import io
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import typer
from sqlmodel import Session
from typer.testing import CliRunner, Result

from referee.engine.chance import first_dealer_of
from referee.engine.replay import match_record
from referee.engine.rules import Rules
from referee.engine.selfplay import play_random_match
from tests.cli.helpers import error_of, row_counts, use_database_copy
from workers.cli import league_cmd, replay_cmd
from workers.db import repo
from workers.db.session import ensure_schema, make_engine, session_scope

runner = CliRunner()

BOTS = ("alpha", "beta", "gamma")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file with the hosted bots alpha, beta and gamma (their folders beside it): built once per
    module and only ever copied (`database`), never opened by a test."""
    root = tmp_path_factory.mktemp("league-template")
    engine = make_engine(f"sqlite:///{root / 'mus.db'}")
    ensure_schema(engine)
    with session_scope(engine) as session:
        for name in BOTS:
            folder = root / "bots" / name
            folder.mkdir(parents=True)
            (folder / "bot.py").write_text(f"NAME = {name!r}\n")
            repo.add_bot(session, name, command=["python", "bot.py"], folder=folder, language="python")
    engine.dispose()
    return root / "mus.db"


@pytest.fixture
def database(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test's own copy of `template` as MUS_DATABASE_URL; the working directory is the test's own folder."""
    monkeypatch.setenv("COLUMNS", "200")
    return use_database_copy(template, tmp_path, monkeypatch)


def ok(*args: str) -> Result:
    result = runner.invoke(league_cmd.app, list(args))
    assert result.exit_code == 0, result.output
    return result


def play(
    url: str, league: str, count: int, *, faults_on_seat: int | None = None, crash_on_seat: int | None = None
) -> list[int]:
    """Play the league's next `count` matches as a worker would: claim, then record a random match's result.

    The random policy differs between the twins of a pair (its seed is the match id), so pairs can split.
    """
    engine = make_engine(url)
    played: list[int] = []
    with Session(engine) as session:
        row = repo.get_league(session, league)
        rules = Rules.from_options(row.rules)
        for match_id in repo.unfinished_match_ids(session, row)[:count]:
            claimed = repo.claim_match(session, match_id, "test:1", 60.0)
            assert claimed is not None
            match = play_random_match(rules, claimed.seed, policy_seed=match_id)
            assert match.outcome is not None
            faults = [] if faults_on_seat is None else [{"seat": faults_on_seat, "cause": "timeout", "detail": "slow"}]
            incidents = [] if crash_on_seat is None else [{"seat": crash_on_seat, "cause": "crash", "detail": "exit 1"}]
            assert repo.record_result(
                session,
                match_id,
                "test:1",
                match.outcome,
                match_record(match),
                faults,
                [[0.1], [], [], []],
                incidents=incidents,
            )
            played.append(match_id)
    engine.dispose()
    return played


def test_create_expands_the_round_robin_into_duplicate_pairs_with_the_mano_balanced(database: str) -> None:
    data = json.loads(ok("create", "cup", "--bots", "gamma,alpha,beta", "--json").stdout)
    assert data["league"] == "cup" and data["deal_mode"] == "duplicate" and data["matches"] == 3 * 8
    assert len(data["commitment"]) == 64 and data["secret"] is None and "seed" not in data
    assert [entrant["bot"] for entrant in data["entrants"]] == ["alpha", "beta", "gamma"]
    engine = make_engine(database)
    with Session(engine) as session:
        matches = repo.list_matches(session, "cup")
        versions = {entrant.version_id: entrant.bot_name for entrant in repo.league_entrants(session, "cup")}
    engine.dispose()
    assert len(matches) == 24 and all(match.status.value == "queued" for match in matches)
    pairs: dict[int | None, list[tuple[str, str, int]]] = {}
    for match in matches:
        teams = (versions[match.team0_version_id], versions[match.team1_version_id])
        pairs.setdefault(match.duplicate_pair, []).append((*teams, match.seed))
    for (a0, a1, seed_a), (b0, b1, seed_b) in pairs.values():
        assert (a0, a1) == (b1, b0) and seed_a == seed_b, "a pair is one seed with the partnerships swapped"
    # Each bot holds the first hand's mano equally often: the first dealer visits every seat in each pairing.
    mano_holders: Counter[str] = Counter()
    for match in matches:
        mano_seat = (first_dealer_of(match.seed) + 1) % 4
        team_version = (match.team0_version_id, match.team1_version_id)[mano_seat % 2]
        mano_holders[versions[team_version]] += 1
    assert mano_holders == {"alpha": 8, "beta": 8, "gamma": 8}


def test_create_prints_a_summary_and_stores_only_changed_options(database: str) -> None:
    text = ok("create", "cup", "--bots", "alpha,beta", "--matches-per-pairing", "2", "-o", "target_score=30").stdout
    assert "League cup created: 2 matches" in text and "Rules: target_score=30" in text
    listed = json.loads(ok("list", "--json").stdout)
    assert listed[0]["rules"] == {"target_score": 30} and listed[0]["total"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bots", "alpha,nobody"], "unknown bot(s): nobody"),
        (["--bots", "alpha"], "a round robin needs at least 2 entrants"),
        (["--bots", "alpha,alpha"], "each bot may enter once"),
        (["--bots", "alpha,beta", "--matches-per-pairing", "3"], "matches_per_pairing must be even"),
        (["--bots", "alpha,beta", "--option", "deck_mode=5_reyes"], "deck_mode must be one of"),
        (["--bots", "alpha,beta", "--option", "nonsense"], "nonsense"),
        (["--bots", "alpha,beta", "--seed", "1"], "--seed is gone"),
        (["--bots", "alpha,beta", "--matches-per-pairing", "1002"], "--matches-per-pairing must be at most 1000"),
        (["--bots", "alpha,beta", "--deals", "shuffled"], "unknown --deals 'shuffled'"),
        (["--bots", "alpha,beta", "--absent-limit", "0"], "absent_limit_s must be above 0"),
    ],
)
def test_create_refuses_bad_input_with_one_line_and_writes_nothing(
    database: str, args: list[str], message: str
) -> None:
    before = row_counts(database)
    assert message in error_of(runner.invoke(league_cmd.app, ["create", "cup", *args]))
    assert row_counts(database) == before


def test_create_refuses_a_taken_name_and_a_bad_one(database: str) -> None:
    ok("create", "cup", "--bots", "alpha,beta", "--matches-per-pairing", "2")
    before = row_counts(database)
    assert "a league named 'cup' already exists" in error_of(
        runner.invoke(league_cmd.app, ["create", "cup", "--bots", "alpha,gamma"])
    )
    assert "invalid league name" in error_of(
        runner.invoke(league_cmd.app, ["create", "my cup", "--bots", "alpha,beta"])
    )
    assert row_counts(database) == before


def test_list_shows_each_league_with_its_progress(database: str) -> None:
    assert "No leagues yet" in ok("list").stdout
    ok("create", "cup", "--bots", "alpha,beta", "--matches-per-pairing", "4")
    play(database, "cup", 3)
    text = ok("list").stdout
    assert "cup" in text and "3/4" in text
    (row,) = json.loads(ok("list", "--json").stdout)
    assert (row["league"], row["status"], row["finished"], row["total"], row["entrants"]) == ("cup", "created", 3, 4, 2)


def test_status_counts_matches_per_status_and_shows_the_latest_infrastructure_errors(database: str) -> None:
    ok("create", "cup", "--bots", "alpha,beta,gamma", "--matches-per-pairing", "2")
    play(database, "cup", 2)
    engine = make_engine(database)
    with Session(engine) as session:
        waiting = repo.unfinished_match_ids(session, "cup")
        assert repo.claim_match(session, waiting[0], "host:1", 60.0) is not None
        assert repo.void_match(session, waiting[0], "host:1", "referee died\nTraceback ...", max_attempts=1)
        assert repo.claim_match(session, waiting[1], "host:2", 60.0) is not None
    engine.dispose()
    data = json.loads(ok("status", "cup", "--json").stdout)
    assert {key: data[key] for key in ("total", "finished", "queued", "running", "failed")} == {
        "total": 6,
        "finished": 2,
        "queued": 2,
        "running": 1,
        "failed": 1,
    }
    assert data["errors"] == [
        {
            "match_id": waiting[0],
            "index": data["errors"][0]["index"],
            "status": "failed",
            "attempt": 1,
            "error": "referee died Traceback ...",
        }
    ]
    text = ok("status", "cup").stdout
    assert (
        "2 of 6 matches finished" in text
        and "referee died" in text
        and "`mus league cancel cup` ends the league" in " ".join(text.split())
    )
    listed = json.loads(ok("status", "cup", "--matches", "--json").stdout)["matches"]
    assert [row["status"] for row in listed].count("finished") == 2
    finished = next(row for row in listed if row["result"] is not None)
    assert finished["result"]["winner_bot"] in BOTS
    table = ok("status", "cup", "--matches").stdout
    assert "Matches of cup" in table and "alpha v1" in table
    engine = make_engine(database)
    with engine.begin() as connection:  # a forfeit's games read like a tie (newcomer walkthrough, stop 34)
        connection.exec_driver_sql(
            "UPDATE match_result SET termination = 'forfeit' WHERE match_id = ?", (finished["match_id"],)
        )
    engine.dispose()
    forfeit = next(line for line in ok("status", "cup", "--matches").stdout.splitlines() if "(forfeit)" in line)
    assert f"{finished['result']['winner_bot']} (forfeit)" in forfeit


def test_standings_rank_the_bots_with_elo_intervals_wins_points_pairs_faults_and_incidents(database: str) -> None:
    ok("create", "cup", "--bots", "alpha,beta,gamma", "--matches-per-pairing", "4")
    play(database, "cup", 10, faults_on_seat=1)
    play(database, "cup", 2, crash_on_seat=0)
    rows = json.loads(ok("standings", "cup", "--json").stdout)
    assert sorted(row["bot"] for row in rows) == list(BOTS)
    for row in rows:
        keys = {"bot", "elo", "elo_low", "elo_high", "matches", "wins", "losses", "pair_score", "faults", "incidents"}
        assert keys <= row.keys()
        assert row["elo_low"] < row["elo"] < row["elo_high"] and row["version"] == 1
        assert row["wins"] + row["losses"] == row["matches"]
    assert sum(row["matches"] for row in rows) == 2 * 12 and sum(row["wins"] for row in rows) == 12
    assert sum(row["faults"].get("timeout", 0) for row in rows) == 10, "a fault is charged to the seat's team's bot"
    assert sum(row["incidents"].get("crash", 0) for row in rows) == 2, "an incident is counted apart"
    assert all("crash" not in row["faults"] for row in rows) and all("timeout" not in row["incidents"] for row in rows)
    assert sum(row["elo"] for row in rows) == pytest.approx(1500 * 3), "the entrants' mean is the reference"
    assert [row["rank"] for row in rows] == sorted(row["rank"] for row in rows)
    text = ok("standings", "cup").stdout
    assert "League cup (created): 12 of 12 matches finished" in text and "±" in text and "timeout" in text
    assert "inciden" in text and "crash" in text, text
    assert "pairs: duplicate-pair score" in text and "/" in text


def test_standings_of_independent_deals_show_no_pairs_column(database: str) -> None:
    """A review's league of independent deals showed every bot's pairs as 0/0 (stop 39)."""
    ok("create", "open", "--bots", "alpha,beta", "--matches-per-pairing", "2", "--deals", "independent")
    play(database, "open", 4)
    text = ok("standings", "open").stdout
    assert "pairs" not in text and "0/0" not in text, text


def test_standings_anchor_fixes_one_bot_and_plot_writes_a_png(database: str, tmp_path: Path) -> None:
    ok("create", "cup", "--bots", "alpha,beta", "--matches-per-pairing", "4")
    play(database, "cup", 4)
    plot = tmp_path / "elo.png"
    rows = json.loads(ok("standings", "cup", "--anchor", "beta", "--plot", str(plot), "--json").stdout)
    beta = next(row for row in rows if row["bot"] == "beta")
    assert beta["elo"] == 1500 and beta["elo_low"] == beta["elo_high"] == 1500
    assert plot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "Elo over time written to" in ok("standings", "cup", "--plot", str(tmp_path / "again.png")).stdout


def test_standings_of_a_league_without_results_rate_every_entrant_at_the_reference(database: str) -> None:
    ok("create", "cup", "--bots", "alpha,beta", "--matches-per-pairing", "2")
    rows = json.loads(ok("standings", "cup", "--json").stdout)
    assert [(row["bot"], row["elo"], row["matches"]) for row in rows] == [("alpha", 1500, 0), ("beta", 1500, 0)]


def test_export_writes_every_match_as_csv_and_everything_as_json(database: str, tmp_path: Path) -> None:
    ok("create", "cup", "--bots", "alpha,beta", "--matches-per-pairing", "4")
    played = play(database, "cup", 3, faults_on_seat=2, crash_on_seat=1)
    rows = list(csv.DictReader(io.StringIO(ok("export", "cup", "--format", "csv").stdout)))
    assert len(rows) == 4 and [row["status"] for row in rows].count("finished") == 3
    first = next(row for row in rows if int(row["match_id"]) == played[0])
    assert first["winner_bot"] in ("alpha", "beta") and first["faults_team0"] == "1"
    assert first["fault_causes"] == "seat2:timeout"
    assert first["incidents_team1"] == "1" and first["incident_causes"] == "seat1:crash"
    queued = next(row for row in rows if row["status"] == "queued")
    assert queued["winner_bot"] == "" and queued["team0_bot"] in ("alpha", "beta")
    target = tmp_path / "cup.json"
    assert "4 matches exported" in ok("export", "cup", "--format", "json", "--output", str(target)).stdout
    document = json.loads(target.read_text())
    assert document["league"]["league"] == "cup" and document["progress"]["finished"] == 3
    assert len(document["matches"]) == 4 and len(document["standings"]) == 2
    league = json.loads(ok("export", "cup").stdout)["league"]
    assert league["secret"] is None and len(league["commitment"]) == 64


@pytest.mark.parametrize(
    "args",
    [
        ["status", "nowhere"],
        ["status", "nowhere", "--json"],
        ["standings", "nowhere"],
        ["export", "nowhere", "--format", "csv"],
        ["pause", "nowhere"],
    ],
)
def test_an_unknown_league_is_a_one_line_error(database: str, args: list[str]) -> None:
    assert "no league named 'nowhere'" in error_of(runner.invoke(league_cmd.app, args))


def test_bad_standings_and_export_options_are_one_line_errors(database: str, tmp_path: Path) -> None:
    ok("create", "cup", "--bots", "alpha,beta", "--matches-per-pairing", "2")
    assert "the anchor 'nobody' is not among the rated bots" in error_of(
        runner.invoke(league_cmd.app, ["standings", "cup", "--anchor", "nobody"])
    )
    assert "unknown export format 'xml'" in error_of(
        runner.invoke(league_cmd.app, ["export", "cup", "--format", "xml"])
    )
    assert "cannot write" in error_of(
        runner.invoke(league_cmd.app, ["export", "cup", "--output", str(tmp_path / "no" / "such" / "file.csv")])
    )
    assert "cannot write the plot" in error_of(
        runner.invoke(league_cmd.app, ["standings", "cup", "--plot", str(tmp_path / "no" / "such" / "elo.png")])
    )


def test_league_run_on_a_broker_says_when_no_worker_takes_a_match_and_that_a_stopped_run_only_stops_following(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newcomer's `mus league run` on Redis with no `mus worker` waited silently, and after Ctrl-C said
    "interrupted" while the workers played on (newcomer walkthrough, stop 29)."""
    from workers.cli import run_cmd
    from workers.league_run import RunReport

    monkeypatch.setenv("MUS_DATABASE_URL", f"sqlite:///{tmp_path / 'mus.db'}")
    (tmp_path / "mus.db").touch()  # an empty SQLite database: `run` refuses where there is none
    monkeypatch.setenv("MUS_BROKER_URL", "redis://127.0.0.1:6379/15")
    monkeypatch.setattr(run_cmd, "NO_WORKER_HINT_S", 0.2)
    idle = {"total": 4, "finished": 0, "running": 0, "queued": 4, "failed": 0}

    def nobody_plays(engine: object, name: str, **options: Any) -> RunReport:
        options["on_progress"](idle)
        time.sleep(0.3)
        options["on_progress"](idle)
        return RunReport(idle, completed=False, interrupted=True)

    monkeypatch.setattr(run_cmd, "run_league", nobody_plays)
    result = runner.invoke(league_cmd.app, ["run", "spring"])
    assert result.exit_code == 130, result.output
    said = " ".join(result.output.split())  # as the console wrapped it
    assert said.count("no worker has taken a match in 0.2 s: is a `mus worker` running on this MUS_BROKER_URL") == 1
    assert "stopped following: 0/4 matches finished; the mus workers go on playing" in said


def test_pause_stops_a_league_on_every_worker_until_it_is_run_again(database: str) -> None:
    ok("create", "cup", "--bots", "alpha,beta", "--matches-per-pairing", "2")
    play(database, "cup", 1)
    said = ok("pause", "cup").stdout
    assert "league cup paused" in said and "(1 queued)" in said and "`mus league run cup` resumes it" in said
    assert json.loads(ok("status", "cup", "--json").stdout)["status"] == "paused"
    again = json.loads(ok("pause", "cup", "--json").stdout)
    assert (again["league"], again["status"], again["queued"], again["finished"]) == ("cup", "paused", 1, 1)
    assert "no worker takes its matches; `mus league run cup` resumes it" in " ".join(
        ok("status", "cup").stdout.split()
    )
    (row,) = json.loads(ok("list", "--json").stdout)
    assert row["status"] == "paused"
    engine = make_engine(database)
    with Session(engine) as session:
        (waiting,) = repo.unfinished_match_ids(session, "cup")
        assert repo.claim_match(session, waiting, "host:1", 60.0) is None, "no worker takes it"
    engine.dispose()
    play(database, "cup", 0)
    with Session(make_engine(database)) as session:
        repo.start_league(session, "cup")  # what `mus league run cup` does first
        session.commit()
    play(database, "cup", 1)
    assert "finished: there is nothing left to pause" in error_of(runner.invoke(league_cmd.app, ["pause", "cup"]))


def test_cancel_ends_a_league_that_cannot_finish_for_good(database: str, tmp_path: Path) -> None:
    """A newcomer edited a bot entered in a league: its matches failed, `run` said to run again, and nothing could
    end the league or free the bot (newcomer walkthrough, stop 33)."""
    ok("create", "cup", "--bots", "alpha,beta", "--matches-per-pairing", "2")
    (played,) = play(database, "cup", 1)

    def seed_shown() -> object:
        rows = json.loads(ok("status", "cup", "--matches", "--json").stdout)["matches"]
        return next(row["seed"] for row in rows if row["match_id"] == played)

    assert seed_shown() is None, "its twin, on the same deal, is still to be played"
    said = " ".join(ok("cancel", "cup").stdout.split())
    assert "league cup cancelled: 1 of 2 matches played, the others never will be" in said
    # Its twin never will be, and the secret is published: the played match's deal is no secret (an operator
    # could not open the replays of the matches its standings count, a review, stop 35).
    assert seed_shown() is not None
    shown = runner.invoke(replay_cmd.app, ["show", str(played)])
    assert shown.exit_code == 0 and "--- Hand 0:" in shown.stdout, shown.output
    status = json.loads(ok("status", "cup", "--json").stdout)
    assert (status["status"], status["finished"], status["queued"]) == ("cancelled", 1, 1)
    assert status["secret"] is not None, "published: the league plays no more"
    listed = ok("status", "cup", "--matches").stdout
    assert "Cancelled (`mus league cancel`): it plays no more matches" in " ".join(listed.split())
    assert "not played" in listed and "queued" not in listed, "its twin is not still to come"
    refused = runner.invoke(league_cmd.app, ["run", "cup"])
    assert refused.exit_code != 0 and "league 'cup' was cancelled" in error_of(refused)
    assert "playing on" not in refused.output and not (tmp_path / ".mus-broker").exists(), "no worker started"
    assert "was cancelled: there is nothing left to cancel" in error_of(
        runner.invoke(league_cmd.app, ["cancel", "cup"])
    )


def test_a_league_with_no_finished_match_ranks_nobody_and_its_cancel_offers_nothing_to_count(database: str) -> None:
    """Cancelled before any match, a league's standings ranked every entrant 1st at 1500 ± 482, the prior alone,
    and `cancel` offered the standings and a verify of no replay (newcomer walkthrough, stop 33)."""
    ok("create", "cup", "--bots", "alpha,beta", "--matches-per-pairing", "2")
    assert ok("standings", "cup").stdout.startswith(
        "League cup (created): 0 of 2 matches finished: nothing to rank yet.\n"
    )
    said = ok("cancel", "cup").stdout
    assert said == "league cup cancelled before any of its 2 matches finished: none will be played\n"
    shown = ok("standings", "cup").stdout.splitlines()
    assert shown[0] == "League cup (cancelled): 0 of 2 matches finished: nothing to rank." and "Elo" not in shown[1]
    rows = json.loads(ok("standings", "cup", "--json").stdout)
    assert [row["bot"] for row in rows] == ["alpha", "beta"], "--json still lists the entrants"


def test_league_run_starts_nothing_for_an_unknown_or_finished_league(database: str, tmp_path: Path) -> None:
    unknown = runner.invoke(league_cmd.app, ["run", "nosuch"])
    assert unknown.exit_code != 0 and "no league named 'nosuch' (`mus league list` names them)" in error_of(unknown)
    assert unknown.stdout == "", "not even the blank line of a progress bar never shown"
    ok("create", "cup", "--bots", "alpha,beta", "--matches-per-pairing", "2")
    play(database, "cup", 2)
    with Session(make_engine(database)) as session:
        assert repo.finish_league_if_complete(session, "cup")
        session.commit()
    finished = ok("run", "cup")
    assert "league cup: all 2 matches finished" in finished.stdout
    for result in (unknown, finished):
        assert "playing on" not in result.output
    assert not (tmp_path / ".mus-broker").exists(), "no worker, broker folder or run lock"


def test_a_run_with_failed_matches_says_why_and_how_to_end_the_league(capsys: pytest.CaptureFixture[str]) -> None:
    from workers.cli import run_cmd
    from workers.league_run import RunReport

    counts = {"total": 8, "finished": 2, "running": 0, "queued": 0, "failed": 6}
    causes = {f"cause {index}": 6 - index for index in range(4)}
    with pytest.raises(typer.Exit) as ended:
        run_cmd.summarize("cup", RunReport(counts, completed=False, failures=causes))
    assert ended.value.exit_code == 1
    said = capsys.readouterr().err
    assert "6 match(es) failed for reasons outside the bots, charged to no bot:" in said
    assert "6 x cause 0" in said and "4 x cause 2" in said and "cause 3" not in said
    assert "and 1 other cause(s): `mus league status cup`" in said
    assert "`mus league cancel cup` ends the league" in " ".join(said.split())
    assert "The worker logs are in " in said and ".mus-broker" in said
    with pytest.raises(typer.Exit):  # on a cluster: not this folder's .mus-broker, which does not exist there
        run_cmd.summarize("cup", RunReport(counts, completed=False, failures=causes), embedded=False)
    said = " ".join(capsys.readouterr().err.split())
    assert ".mus-broker" not in said and "their matches' logs (MUS_LOG_DIR" in said and "are on their machines" in said


def test_a_paused_runs_last_line_counts_the_matches_still_being_played(capsys: pytest.CaptureFixture[str]) -> None:
    """An operator read a pause's '1/6 finished' while its second match was still being played."""
    from workers.cli import run_cmd
    from workers.league_run import RunReport

    counts = {"total": 6, "finished": 1, "running": 1, "queued": 4}
    with pytest.raises(typer.Exit) as ended:
        run_cmd.summarize("cup", RunReport(counts, completed=False, paused=True), embedded=False)
    assert ended.value.exit_code == 0
    said = " ".join(capsys.readouterr().out.split())
    assert said.startswith("paused: 1/6 matches finished, 1 still being played (they finish); no worker takes"), said


def test_league_run_refuses_remote_bots_with_no_referee_to_play_them_on(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the embedded broker the run's workers inherit its environment: with no standalone referee every match of
    a remote bot failed, three times each, after a warning (newcomer walkthrough, stop 33)."""
    from workers.cli import bot_cmd

    monkeypatch.delenv("MUS_REFEREE_ADDRESS", raising=False)
    assert runner.invoke(bot_cmd.app, ["add", "faraway", "--remote"]).exit_code == 0
    ok("create", "cup", "--bots", "alpha,faraway", "--matches-per-pairing", "2")
    refused = runner.invoke(league_cmd.app, ["run", "cup"])
    message = error_of(refused)
    assert "league 'cup' has remote bots (faraway)" in message and "MUS_REFEREE_ADDRESS and MUS_ADMIN_TOKEN" in message
    assert "`mus league cancel cup`" in message
    assert json.loads(ok("status", "cup", "--json").stdout)["status"] == "created", "left as it was"
    assert not (tmp_path / ".mus-broker").exists(), "no worker started"


def test_status_says_when_a_running_league_has_no_match_in_play(database: str) -> None:
    """A league interrupted with Ctrl-C, or whose matches left have all failed, still said just "running"
    (newcomer walkthrough, stop 33)."""
    ok("create", "cup", "--bots", "alpha,beta", "--matches-per-pairing", "2")
    engine = make_engine(database)
    with Session(engine) as session:
        repo.start_league(session, "cup")
        session.commit()
        assert "League cup: running, no match in play, 0 of 2" in ok("status", "cup").stdout
        first = repo.unfinished_match_ids(session, "cup")[0]
        assert repo.claim_match(session, first, "host:1", 60.0) is not None
    engine.dispose()
    assert "League cup: running, 0 of 2 matches finished" in ok("status", "cup").stdout
