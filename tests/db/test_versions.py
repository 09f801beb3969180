"""A changed program becomes a new version, and the old results stay with the old version."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine

from tests.db.factories import COMMAND, add_bots, finish, make_league
from workers.db import repo
from workers.db.session import session_scope


def test_changing_a_file_makes_a_new_version_and_old_results_keep_the_old_one(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as session:
        first = add_bots(session, tmp_path, "alpha", "bravo")["alpha"]
        spring = make_league(session, "spring", ["alpha", "bravo"])
        spring_id = spring.id
        for match_id in repo.unfinished_match_ids(session, spring_id or 0):
            assert finish(session, match_id)

    (tmp_path / "alpha" / "helpers.py").write_text("SEAT = 2  # a smarter bot\n")
    with session_scope(engine) as session:
        second = repo.add_bot(session, "alpha", command=COMMAND, folder=tmp_path / "alpha", language="python")
        summer = make_league(session, "summer", ["alpha", "bravo"])
        summer_id = summer.id

    assert second.number == 2
    assert second.id != first.id
    assert second.content_hash != first.content_hash
    with session_scope(engine) as session:
        spring_results = repo.league_results(session, spring_id or 0)
        assert {(r.team0_bot, r.team0_version) for r in spring_results} == {("alpha", 1), ("bravo", 1)}
        assert {r.team0_version_id for r in spring_results} | {r.team1_version_id for r in spring_results} == {
            first.id,
            repo.get_bot(session, "bravo").versions[0].id,
        }
        entrants = {e.bot_name: e.version_number for e in repo.league_entrants(session, summer_id or 0)}
        assert entrants == {"alpha": 2, "bravo": 1}
        setup = repo.match_setup(session, repo.unfinished_match_ids(session, summer_id or 0)[0])
        alpha = next(team for team in setup.teams if team.bot_name == "alpha")
        assert alpha.version_id == second.id


def test_re_adding_an_older_program_makes_its_version_current_again(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as session:
        first = add_bots(session, tmp_path, "alpha", "bravo")["alpha"]
    helpers = tmp_path / "alpha" / "helpers.py"
    original = helpers.read_text()
    helpers.write_text("SEAT = 2  # an experiment\n")
    with session_scope(engine) as session:
        second = repo.add_bot(session, "alpha", command=COMMAND, folder=tmp_path / "alpha", language="python")
    helpers.write_text(original)
    with session_scope(engine) as session:
        reverted = repo.add_bot(session, "alpha", command=COMMAND, folder=tmp_path / "alpha", language="python")
        info = repo.get_bot(session, "alpha")
        league = make_league(session, "autumn", ["alpha", "bravo"])
        entrants = {e.bot_name: e.version_id for e in repo.league_entrants(session, league.id or 0)}
    assert (first.number, second.number, reverted.number) == (1, 2, 1)
    assert [v.number for v in info.versions] == [1, 2]
    assert info.current is not None and info.current.id == first.id
    assert entrants["alpha"] == first.id
