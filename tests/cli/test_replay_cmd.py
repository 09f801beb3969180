"""`mus replay show/export/verify` over replays stored as a worker stores them (real engine matches)."""

from __future__ import annotations

import json
import random
import re
import zlib
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlmodel import Session
from typer.testing import CliRunner, Result

from referee.engine.match import Match
from referee.engine.replay import EVENTS_VERSION, match_record, replay_record
from referee.engine.rules import Rules
from referee.engine.selfplay import play_random_match, random_action
from tests.cli.helpers import error_of, use_database_copy
from tests.support.events import fields
from workers.cli import replay_cmd
from workers.cli.replay_cmd import hand_events
from workers.db import repo
from workers.db.session import ensure_schema, make_engine, session_scope
from workers.matches import fault_records
from workers.tournament import schedule_round_robin

runner = CliRunner()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file with league `cup` (alpha v beta, 4 matches), 3 of them played: built once per
    module and only ever copied (`database`), never opened by a test."""
    path = tmp_path_factory.mktemp("replay-template") / "mus.db"
    engine = make_engine(f"sqlite:///{path}")
    ensure_schema(engine)
    with session_scope(engine) as session:
        for name in ("alpha", "beta"):
            repo.add_bot(session, name, command=["python", f"{name}.py"], folder=None, language="python")
        plan = schedule_round_robin(["alpha", "beta"], 4, 9)
        repo.create_league(
            session,
            "cup",
            bot_names=["alpha", "beta"],
            matches=[
                {"team0": m.team0, "team1": m.team1, "seed": m.seed, "duplicate_pair": m.duplicate_pair} for m in plan
            ],
            options={"target_score": 30},
            matches_per_pairing=4,
            seed=9,
        )
    with Session(engine) as session:
        for match_id in repo.unfinished_match_ids(session, "cup")[:3]:
            claimed = repo.claim_match(session, match_id, "test:1", 60.0)
            assert claimed is not None
            match = play_random_match(Rules.from_options({"target_score": 30}), claimed.seed, policy_seed=match_id)
            assert match.outcome is not None
            incidents = [{"seat": 1, "cause": "disconnect", "detail": "no stream for 5 s"}] if not match_id % 2 else []
            assert repo.record_result(
                session,
                match_id,
                "test:1",
                match.outcome,
                match_record(match),
                [],
                [[], [], [], []],
                incidents=incidents,
            )
    engine.dispose()
    return path


@pytest.fixture
def database(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test's own copy of `template` as MUS_DATABASE_URL; the working directory is the test's own folder."""
    return use_database_copy(template, tmp_path, monkeypatch)


def match_ids(url: str) -> tuple[list[int], int]:
    """The finished matches' ids and the id of the one that has not been played."""
    engine = make_engine(url)
    with Session(engine) as session:
        finished = repo.replay_match_ids(session, "cup")
        (queued,) = repo.unfinished_match_ids(session, "cup")
    engine.dispose()
    return finished, queued


def stored_record(url: str, match_id: int) -> dict[str, object]:
    engine = make_engine(url)
    with Session(engine) as session:
        record = repo.get_replay(session, match_id)
    engine.dispose()
    return record


def execute(url: str, statement: str, **parameters: object) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(sa.text(statement), parameters)
    engine.dispose()


def ok(*args: str) -> Result:
    result = runner.invoke(replay_cmd.app, list(args))
    assert result.exit_code == 0, result.output
    return result


def dealt_seats(text: str) -> set[int]:
    return {int(seat) for seat in re.findall(r"seat (\d) is dealt", text)}


def test_show_prints_the_match_hand_by_hand_omniscient_by_default(database: str) -> None:
    (first, *_), _ = match_ids(database)
    text = ok("show", str(first)).stdout
    assert f"Match {first}: league cup, #0" in text and "alpha v1" in text and "beta v1" in text
    assert "omniscient view" in text and "--- Hand 0:" in text and "Match won by" in text
    assert dealt_seats(text) == {0, 1, 2, 3}
    assert "rules: target_score=30" in text


def test_show_lists_the_matchs_incidents_after_the_transcript_and_in_json(database: str) -> None:
    finished, _ = match_ids(database)
    with_incident = next(match_id for match_id in finished if not match_id % 2)
    text = ok("show", str(with_incident)).stdout
    assert text.rstrip().endswith("incident: seat 1 (beta v1) disconnect: no stream for 5 s") or text.rstrip().endswith(
        "incident: seat 1 (alpha v1) disconnect: no stream for 5 s"
    ), text[-300:]
    data = json.loads(ok("show", str(with_incident), "--json").stdout)
    assert data["incidents"] == [{"seat": 1, "cause": "disconnect", "detail": "no stream for 5 s"}]
    without = next(match_id for match_id in finished if match_id % 2)
    assert "incident:" not in ok("show", str(without)).stdout
    assert json.loads(ok("show", str(without), "--json").stdout)["incidents"] == []


def test_show_with_a_seat_prints_only_what_that_seat_saw(database: str) -> None:
    (first, *_), _ = match_ids(database)
    text = ok("show", str(first), "--seat", "1").stdout
    assert "seat 1's view" in text
    before_showdown = "\n".join(line for line in text.splitlines() if "hands shown" not in line)
    assert dealt_seats(before_showdown) == {1}, "a seat sees only its own cards dealt"
    events = json.loads(ok("show", str(first), "--seat", "1", "--json").stdout)["events"]
    assert all("to" not in event or 1 in event["to"] for event in events)


def test_show_with_a_hand_prints_only_that_hand(database: str) -> None:
    (first, *_), _ = match_ids(database)
    match = replay_record(stored_record(database, first))
    hands = [fields(event)["hand"] for event in match.events if event.kind.value == "hand_started"]
    last = hands[-1]
    text = ok("show", str(first), "--hand", str(last)).stdout
    assert re.findall(r"--- Hand (\d+):", text) == [str(last)]
    assert "Match won by" in text, "the last hand carries the end of the match"
    data = json.loads(ok("show", str(first), "--hand", "0", "--json").stdout)
    kinds = [event["kind"] for event in data["events"]]
    assert kinds[:2] == ["game_started", "hand_started"] and data["hand"] == 0 and data["seat"] is None
    assert sum(kind == "hand_started" for kind in kinds) == 1


def test_hand_events_attach_a_game_start_to_the_hand_that_opens_the_game() -> None:
    match = play_random_match(Rules(), 3)
    pieces = [hand_events(match.events, hand) for hand in range(match.hand_number + 1)]
    covered = [event.seq for piece in pieces for event in piece]
    assert covered == sorted(covered) and len(covered) == len(set(covered))
    assert set(covered) == {event.seq for event in match.events[1:]}, "every event but match_started, once"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", "999"], "no match with id 999"),
        (["show", "match-3"], "a match id is a number"),
        (["verify", "x"], "a match id is a number"),
        (["show", "QUEUED"], "has no replay: it has not finished"),
        (["show", "FIRST", "--seat", "4"], "there is no seat 4"),
        (["show", "FIRST", "--hand", "99"], "has no hand 99"),
        (["export", "999"], "no match with id 999"),
        (["export", "FIRST", "--format", "pdf"], "unknown export format 'pdf'"),
        (["export"], "give either a match id or --league NAME"),
        (["export", "FIRST", "--league", "cup"], "give either a match id or --league NAME"),
        (["export", "--league", "nowhere"], "no league named 'nowhere'"),
        (["verify", "999"], "no match with id 999"),
        (["verify", "QUEUED"], "has no result: it has not finished"),
        (["verify"], "give either a match id or --league NAME"),
        (["verify", "--league", "nowhere"], "no league named 'nowhere'"),
    ],
)
def test_bad_input_is_a_one_line_error(database: str, args: list[str], message: str) -> None:
    (first, *_), queued = match_ids(database)
    args = [{"FIRST": str(first), "QUEUED": str(queued)}.get(arg, arg) for arg in args]
    assert message in error_of(runner.invoke(replay_cmd.app, args))


def test_export_html_writes_one_self_contained_page_named_after_the_match(database: str, tmp_path: Path) -> None:
    (first, *_), _ = match_ids(database)
    assert f"replay written to match-{first}.html" in ok("export", str(first)).stdout
    page = (tmp_path / f"match-{first}.html").read_text()
    assert page.startswith("<!DOCTYPE html>") or page.lower().startswith("<!doctype html>")
    assert "alpha v1" in page and "beta v1" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "the page loads nothing from anywhere"


def test_export_json_is_the_stored_record_and_replays(database: str, tmp_path: Path) -> None:
    (first, *_), _ = match_ids(database)
    exported = json.loads(ok("export", str(first), "--format", "json", "--output", "-").stdout)
    played = exported.pop("match")
    assert (played["match_id"], played["league"]) == (first, "cup"), "who played it: the record alone does not say"
    assert [(team["bot"], team["seats"]) for team in played["teams"]] == [("alpha", [0, 2]), ("beta", [1, 3])]
    outcome = replay_record(exported).outcome
    assert outcome is not None and played["result"] == {
        "winner_team": outcome.winner,
        "winner_bot": ("alpha", "beta")[outcome.winner],
        "termination": outcome.termination.value,
        "vacas": list(outcome.vacas),
        "games": [sum(game.winner == team for game in outcome.games) for team in (0, 1)],
        "points": [sum(game.score[team] for game in outcome.games) for team in (0, 1)],
    }, "and who won: the record tells it only to a re-simulation"
    record = exported
    assert record == stored_record(database, first)
    assert replay_record({"match": played, **record}).outcome is not None, "the export re-simulates as it is"
    target = tmp_path / "out.json"
    ok("export", str(first), "--format", "json", "-o", str(target))
    assert json.loads(target.read_text()) == {"match": played, **record}


def test_export_league_writes_every_replay_into_a_folder(database: str, tmp_path: Path) -> None:
    finished, _ = match_ids(database)
    text = ok("export", "--league", "cup").stdout
    # The third match's twin has not been played: its replay would show that twin's deals.
    assert "2 replay(s) written to replays-cup" in text and "1 more withheld until their duplicate twins" in text
    assert sorted(path.name for path in (tmp_path / "replays-cup").iterdir()) == sorted(
        f"match-{match_id}.html" for match_id in finished[:2]
    )
    ok("export", "--league", "cup", "--format", "json", "--output", str(tmp_path / "records"))
    assert len(list((tmp_path / "records").glob("match-*.json"))) == 2


def test_verify_re_simulates_and_accepts_honest_results(database: str) -> None:
    finished, _ = match_ids(database)
    first, note = ok("verify", str(finished[0])).stdout.strip().splitlines()
    assert first == f"match {finished[0]} (#0): OK" and note.startswith("Seeds not checked: the league has not")
    text = ok("verify", "--league", "cup").stdout
    assert text.count(": OK") == 3
    data = json.loads(ok("verify", "--league", "cup", "--json").stdout)
    assert (data["checked"], data["ok"], data["mismatches"]) == (3, 3, 0)


def test_verify_reports_a_stored_result_that_the_replay_contradicts_and_exits_1(database: str) -> None:
    finished, _ = match_ids(database)
    execute(
        database,
        "UPDATE match_result SET winner_team = 1 - winner_team, points_team0 = points_team0 + 5 WHERE match_id = :id",
        id=finished[1],
    )
    result = runner.invoke(replay_cmd.app, ["verify", "--league", "cup"])
    assert "1 of 3 match(es) do not replay to their stored result" in error_of(result)
    lines = result.stdout.strip().splitlines()
    assert lines[0].endswith(": OK") and lines[2].endswith(": OK")
    assert lines[1].startswith(f"match {finished[1]} (#1): MISMATCH: winner team: stored")
    assert "points: stored" in lines[1] and "winning version id" in lines[1]
    data = json.loads(runner.invoke(replay_cmd.app, ["verify", str(finished[1]), "--json"]).stdout)
    assert data["mismatches"] == 1 and data["matches"][0]["ok"] is False


def test_verify_reports_stored_faults_that_are_not_the_replays_fault_events(database: str) -> None:
    """The stored faults are exactly the match's Fault events (rules §13); an incident stored among them, or a
    fault the match never charged, is a mismatch."""
    finished, _ = match_ids(database)
    execute(
        database,
        "UPDATE match_result SET faults = :faults WHERE match_id = :id",
        faults=json.dumps([{"seat": 2, "cause": "crash", "detail": ""}]),
        id=finished[0],
    )
    result = runner.invoke(replay_cmd.app, ["verify", str(finished[0])])
    assert result.exit_code == 1
    assert "MISMATCH: faults (seat, cause): stored [(2, 'crash')], replayed []" in result.stdout


def test_verify_reports_a_replay_whose_steps_were_tampered_with(database: str) -> None:
    finished, _ = match_ids(database)
    record = stored_record(database, finished[0])
    steps = record["steps"]
    assert isinstance(steps, list)
    record["steps"] = steps[:-3]
    data = json.dumps(record).encode()
    execute(database, "UPDATE replay SET data = :data WHERE match_id = :id", data=zlib.compress(data), id=finished[0])
    result = runner.invoke(replay_cmd.app, ["verify", str(finished[0])])
    assert result.exit_code == 1
    assert "MISMATCH: the replay ends before the match does" in result.stdout
    record["seed"] = 12345
    record["steps"] = steps
    data = json.dumps(record).encode()
    execute(database, "UPDATE replay SET data = :data WHERE match_id = :id", data=zlib.compress(data), id=finished[0])
    result = runner.invoke(replay_cmd.app, ["verify", str(finished[0])])
    assert result.exit_code == 1 and "the replay's seed 12345 is not the match's seed" in result.stdout


def test_verify_compares_the_event_log_only_with_one_the_same_engine_writes(database: str) -> None:
    """A replay from before `EVENTS_VERSION` still verifies its result and steps, and says its events were not
    compared; a current one whose events differ from the re-simulation is a mismatch."""
    finished, _ = match_ids(database)
    record = stored_record(database, finished[0])
    events = record["events"]
    assert isinstance(events, list) and record["events_version"] == EVENTS_VERSION
    events[1], events[2] = events[2], events[1]

    def store() -> None:
        data = zlib.compress(json.dumps(record).encode())
        execute(database, "UPDATE replay SET data = :data WHERE match_id = :id", data=data, id=finished[0])

    store()
    result = runner.invoke(replay_cmd.app, ["verify", str(finished[0])])
    assert result.exit_code == 1 and "the stored event log differs from the re-simulation from event 1" in result.stdout
    del record["events_version"]
    store()
    text = ok("verify", str(finished[0])).stdout.strip()
    assert text.startswith(f"match {finished[0]} (#0): OK (its event log was written by an older engine")
    entry = json.loads(ok("verify", str(finished[0]), "--json").stdout)["matches"][0]
    assert entry["ok"] is True and "events_version 1" in entry["note"]


def test_show_gives_the_referees_reason_for_each_illegal_action_and_the_stored_fault_keeps_it(database: str) -> None:
    """`replay show` said "fault: seat 0 illegal_action (1 for its team)" and nothing of why, which only the HTML
    page showed (newcomer walkthrough, stop 34)."""
    _, queued = match_ids(database)
    rules = Rules.from_options({"target_score": 30})
    engine = make_engine(database)
    with Session(engine) as session:
        claimed = repo.claim_match(session, queued, "test:1", 60.0)
        assert claimed is not None
        match = Match(rules, claimed.seed)
        rng = random.Random(queued)
        seat = match.awaited()[0]
        match.record_illegal_action(seat, "envido 1 is below min_bet 2")
        while not match.is_over:
            turn = match.awaited()[0]
            match.apply(turn, random_action(rng, match.legal_actions(turn)))
        assert match.outcome is not None
        faults = fault_records(match)
        assert faults[0] == {"seat": seat, "cause": "illegal_action", "detail": "envido 1 is below min_bet 2"}
        assert repo.record_result(
            session, queued, "test:1", match.outcome, match_record(match), faults, [[], [], [], []]
        )
    engine.dispose()
    shown = ok("show", str(queued)).stdout
    assert f"fault: seat {seat} illegal_action (1 for its team): envido 1 is below min_bet 2\n" in shown
