"""workers.leagues without the CLI: creating a round robin, standings, match rows and exports over a real SQLite
database, with results recorded as a worker records them."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from sqlmodel import Session

from tests.db.factories import DECISIONS, TEST_SECRET, add_bots, played
from workers import leagues
from workers.db import repo
from workers.db.models import DealMode, LeagueStatus, MatchStatus
from workers.db.session import ensure_schema, make_engine
from workers.tournament import TournamentError

RULES = {"target_score": 30}
"""The rules `tests.db.factories.played` plays under."""


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    """A session on a fresh, migrated SQLite file holding the hosted bots alpha, beta and gamma."""
    engine = make_engine(f"sqlite:///{tmp_path / 'mus.db'}")
    ensure_schema(engine)
    with Session(engine) as db:
        add_bots(db, tmp_path / "bots", "alpha", "beta", "gamma")
        db.commit()
        yield db
    engine.dispose()


def create(session: Session, bots: list[str], matches_per_pairing: int = 2) -> int:
    league = leagues.create_round_robin(
        session,
        "cup",
        bot_names=bots,
        matches_per_pairing=matches_per_pairing,
        options=RULES,
        secret=TEST_SECRET,
    )
    session.commit()
    assert league.id is not None
    return league.id


def record(
    session: Session,
    match_id: int,
    faults: Sequence[Mapping[str, object]],
    incidents: Sequence[Mapping[str, object]] = (),
) -> None:
    """Claim the match and record a played result with these faults and incidents, as a worker would."""
    claimed = repo.claim_match(session, match_id, "host:1", 60.0)
    assert claimed is not None
    outcome, replay = played(claimed.seed)
    assert repo.record_result(session, match_id, "host:1", outcome, replay, faults, DECISIONS, incidents=incidents)


def test_a_round_robin_takes_its_entrants_in_name_order_and_plays_duplicate_pairs(session: Session) -> None:
    league_id = create(session, ["gamma", "alpha", "beta"], matches_per_pairing=4)
    league = repo.get_league(session, league_id)
    assert league.deal_mode is DealMode.DUPLICATE and league.rules == RULES
    assert [entrant.bot_name for entrant in repo.league_entrants(session, league)] == ["alpha", "beta", "gamma"]
    matches = repo.list_matches(session, league)
    assert len(matches) == 3 * 4
    pairs: dict[int | None, list[tuple[int, int, int]]] = {}
    for match in matches:
        pairs.setdefault(match.duplicate_pair, []).append((match.team0_version_id, match.team1_version_id, match.seed))
    assert all((a0, a1, seed_a) == (b1, b0, seed_b) for (a0, a1, seed_a), (b0, b1, seed_b) in pairs.values()), (
        "each pair is one deal with the partnerships swapped"
    )


def test_the_same_entrants_listed_in_another_order_make_the_same_plan(tmp_path: Path) -> None:
    plans = []
    for order in (["alpha", "beta", "gamma"], ["gamma", "beta", "alpha"]):
        engine = make_engine(f"sqlite:///{tmp_path / f'{order[0]}.db'}")
        ensure_schema(engine)
        with Session(engine) as db:
            add_bots(db, tmp_path / order[0], "alpha", "beta", "gamma")
            create(db, order)
            versions = {entrant.version_id: entrant.bot_name for entrant in repo.league_entrants(db, "cup")}
            plans.append(
                [
                    (versions[m.team0_version_id], versions[m.team1_version_id], m.seed)
                    for m in repo.list_matches(db, "cup")
                ]
            )
        engine.dispose()
    assert plans[0] == plans[1]


def test_a_plan_that_cannot_be_made_is_refused_before_anything_is_written(session: Session) -> None:
    with pytest.raises(TournamentError, match="even"):
        create(session, ["alpha", "beta"], matches_per_pairing=3)
    with pytest.raises(repo.NotFound, match="unknown bot"):
        create(session, ["alpha", "nobody"])
    session.rollback()
    assert repo.list_leagues(session) == []


def test_a_remote_entrant_plays_independent_deals_unless_duplicate_is_forced(session: Session) -> None:
    repo.add_remote_bot(session, "far")
    independent = repo.get_league(session, create(session, ["alpha", "far"]))
    entrants = repo.league_entrants(session, independent)
    assert independent.deal_mode is DealMode.INDEPENDENT and leagues.remote_twins(independent, entrants) == []
    forced = leagues.create_round_robin(
        session, "forced", bot_names=["alpha", "far"], matches_per_pairing=2, deal_mode="duplicate"
    )
    assert leagues.remote_twins(forced, repo.league_entrants(session, forced)) == ["far"]


def test_faults_and_incidents_are_counted_for_the_team_of_their_seat(session: Session) -> None:
    league_id = create(session, ["alpha", "beta"])
    first = repo.unfinished_match_ids(session, league_id)[0]
    faults: list[dict[str, object]] = [
        {"seat": 1, "cause": "timeout"},
        {"seat": 3, "cause": "timeout"},
        {"seat": 2, "cause": "illegal_action"},
    ]
    record(session, first, faults, [{"seat": 3, "cause": "crash", "detail": "exit 1"}])
    (result,) = repo.league_results(session, league_id)
    score = leagues.match_score(1, result)
    assert score.faults == ({"illegal_action": 1}, {"timeout": 2})
    assert score.incidents == ({}, {"crash": 1})
    rows = leagues.match_rows(repo.list_matches(session, league_id), repo.league_entrants(session, league_id), {})
    exported = list(
        csv.DictReader(io.StringIO(leagues.csv_text(leagues.export_document(session, league_id)["matches"])))
    )
    assert len(exported) == len(rows) == 2
    finished = next(row for row in exported if row["match_id"] == str(first))
    assert (finished["faults_team0"], finished["faults_team1"]) == ("1", "2")
    assert (finished["incidents_team0"], finished["incidents_team1"]) == ("0", "1")
    assert finished["fault_causes"] == "seat1:timeout;seat3:timeout;seat2:illegal_action"


def test_a_seed_is_shown_only_once_every_match_on_its_deal_has_finished(session: Session) -> None:
    league_id = create(session, ["alpha", "beta"])
    first, second = repo.unfinished_match_ids(session, league_id)

    def seeds() -> list[int | None]:
        results = {result.match_id: result for result in repo.league_results(session, league_id)}
        rows = leagues.match_rows(
            repo.list_matches(session, league_id), repo.league_entrants(session, league_id), results
        )
        return [row["seed"] for row in rows]

    assert seeds() == [None, None]
    record(session, first, [])
    assert seeds() == [None, None], "the twin has yet to play the same deal"
    record(session, second, [])
    matches = repo.list_matches(session, league_id)
    assert seeds() == [match.seed for match in matches]
    assert all(match.status is MatchStatus.FINISHED for match in matches)


def test_the_secret_is_in_the_league_json_only_once_the_league_has_finished(session: Session) -> None:
    league_id = create(session, ["alpha", "beta"])
    assert leagues.league_json(repo.get_league(session, league_id))["secret"] is None
    for match_id in repo.unfinished_match_ids(session, league_id):
        record(session, match_id, [])
    assert repo.finish_league_if_complete(session, league_id)
    league = repo.get_league(session, league_id)
    assert league.status is LeagueStatus.FINISHED
    assert leagues.league_json(league)["secret"] == TEST_SECRET.hex()


def test_the_league_table_fits_every_entrant_on_the_results_and_exports_it(session: Session) -> None:
    league_id = create(session, ["alpha", "beta", "gamma"])
    empty = leagues.league_table(session, league_id)
    assert empty.total == 6 and empty.results == []
    assert {row.bot for row in empty.rows} == {"alpha", "beta", "gamma"}
    assert {row.elo for row in empty.rows} == {1500.0}
    for match_id in repo.unfinished_match_ids(session, league_id)[:4]:
        record(session, match_id, [])
    table = leagues.league_table(session, league_id, anchor="beta")
    assert len(table.results) == len(table.scores) == 4
    assert [score.finished for score in table.scores] == [1, 2, 3, 4]
    assert sum(row.matches for row in table.rows) == 2 * 4
    assert sum(row.wins for row in table.rows) == 4
    assert next(row for row in table.rows if row.bot == "beta").elo == pytest.approx(1500.0)
    assert "beta" in table.reference
    document = leagues.export_document(session, league_id)
    assert document["progress"]["finished"] == 4 and len(document["matches"]) == 6
    assert [row["bot"] for row in document["standings"]] == [
        row.bot for row in leagues.league_table(session, league_id).rows
    ]
    with pytest.raises(TournamentError):
        leagues.league_table(session, league_id, anchor="nobody")


def test_a_persistent_entrant_plays_duplicate_deals(session: Session, tmp_path: Path) -> None:
    """A persistent bot's pooled processes remember the twin they played, as a remote program can, but its pairs
    are played whole by one worker (`workers.play._chains_twin`), so nothing that saw a deal runs beside the
    other twin."""
    folder = tmp_path / "keeper"
    folder.mkdir()
    (folder / "keeper.py").write_text("")
    repo.add_bot(session, "keeper", command=["python", "keeper.py"], folder=folder, language="python", persistent=True)
    pooled = repo.get_league(session, create(session, ["alpha", "keeper"]))
    assert pooled.deal_mode is DealMode.DUPLICATE
