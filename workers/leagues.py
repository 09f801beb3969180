"""Leagues as the commands see them: create a round robin, and read one back as standings, match rows and exports.

`mus league ...` (workers/cli/league_cmd.py) parses arguments and prints what these functions return; the league
benchmark (bench/league.py) creates its league here too. The pieces they join live elsewhere: the schedule and
the ratings in `workers.tournament` (pure), the rows in `workers.db.repo`.

Standings and Elo are recomputed from the stored results on every read and never stored: results are the source
of truth, and a fit takes milliseconds for a league of a few hundred matches (the rating snapshot that used to be
written when a league finished was never read, and migration 0004 dropped it).

Deals are secret until played: `league_json` shows a league's secret only once it has finished, and
`match_rows` the seed of a match only once every match on that deal has finished (docs/leagues.md).
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import Session

from referee.engine.seats import team_of
from workers.db import repo
from workers.db.models import DealMode, League, LeagueStatus, Match, MatchStatus
from workers.tournament import MatchScore, StandingRow, fit_elo, schedule_round_robin, standings

DEFAULT_MATCHES_PER_PAIRING = 8
"""Four duplicate pairs per pairing: the first dealer then visits all four seats, so with the partnerships
swapped within each pair every bot holds the mano exactly equally often (workers/tournament/schedule.py)."""

CSV_COLUMNS = (
    "match_id",
    "index",
    "seed",
    "duplicate_pair",
    "deal",
    "status",
    "team0_bot",
    "team0_version",
    "team1_bot",
    "team1_version",
    "winner_team",
    "winner_bot",
    "termination",
    "vacas_team0",
    "vacas_team1",
    "games_team0",
    "games_team1",
    "points_team0",
    "points_team1",
    "faults_team0",
    "faults_team1",
    "fault_causes",
    "incidents_team0",
    "incidents_team1",
    "incident_causes",
    "finished_at",
)
"""The columns of a league's CSV export, one row per match of its plan."""


def create_round_robin(
    session: Session,
    name: str,
    *,
    bot_names: Sequence[str],
    matches_per_pairing: int = DEFAULT_MATCHES_PER_PAIRING,
    options: Mapping[str, Any] | None = None,
    absent_limit_s: float = 600.0,
    deal_mode: DealMode | str | None = None,
    sandbox: bool = True,
    secret: bytes | None = None,
) -> League:
    """Create a league: the round robin of the bots (each its current version) expanded into its matches.

    The entrants are taken in name order, so the plan does not depend on the order they were listed in.
    `deal_mode` None: independent deals if an entrant is a remote bot, else duplicate pairs. `secret` is for
    tests and benchmarks (default: fresh random bytes).

    Raises:
        TournamentError: on a plan that cannot be made (fewer than two entrants, one entered twice, an odd
            `matches_per_pairing`).
        DbError: on an unknown bot, a taken or invalid name, or bad options.
    """
    entrants = sorted(bot_names)
    plan = schedule_round_robin(entrants, matches_per_pairing)
    return repo.create_league(
        session,
        name,
        bot_names=entrants,
        matches=[
            {"team0": match.team0, "team1": match.team1, "duplicate_pair": match.duplicate_pair} for match in plan
        ],
        options=options,
        matches_per_pairing=matches_per_pairing,
        absent_limit_s=absent_limit_s,
        deal_mode=deal_mode,
        sandbox=sandbox,
        secret=secret,
    )


def remote_twins(league: League, entrants: Sequence[repo.Entrant]) -> list[str]:
    """The remote entrants of a league that plays duplicate deals: each can remember a twin's cards in the other."""
    if league.deal_mode is not DealMode.DUPLICATE:
        return []
    return [entrant.bot_name for entrant in entrants if entrant.remote]


def league_json(league: League) -> dict[str, Any]:
    """A league's stored settings as JSON: its commitment always, its secret only once it has finished."""
    data: dict[str, Any] = {
        "league": league.name,
        "id": league.id,
        "status": league.status.value,
        "deal_mode": league.deal_mode.value,
        "sandbox": league.sandbox,
        "commitment": league.commitment,
        "secret": repo.revealed_secret(league),
        "matches_per_pairing": league.matches_per_pairing,
        "rules": dict(league.rules),
        "absent_limit_s": league.absent_limit_s,
        "created_at": _iso(league.created_at),
        "finished_at": _iso(league.finished_at),
    }
    if league.secret is None:
        data["seed"] = league.seed  # a league from before secrets: its seeds were public anyway
    return data


def entrants_json(entrants: Sequence[repo.Entrant]) -> list[dict[str, Any]]:
    """The entrants as JSON: bot, version number, remote."""
    return [
        {"bot": entrant.bot_name, "version": entrant.version_number, "remote": entrant.remote} for entrant in entrants
    ]


def match_rows(
    planned: Sequence[Match],
    entrants: Sequence[repo.Entrant],
    results: Mapping[int, repo.FinishedMatch],
    *,
    cancelled: bool = False,
) -> list[dict[str, Any]]:
    """Every match of the plan with its teams and, once finished, its result, as JSON.

    A match's seed is shown only once every match played on that deal has finished (`published_seed`): before,
    it would tell a bot the deals of a match it has yet to play. In a `cancelled` league no match is played again,
    and its secret is published: every finished match's seed is shown.
    """
    teams = {entrant.version_id: (entrant.bot_name, entrant.version_number) for entrant in entrants}
    unplayed = set() if cancelled else unplayed_deals(planned)
    rows: list[dict[str, Any]] = []
    for match in planned:
        assert match.id is not None
        result = results.get(match.id)
        team0 = teams.get(match.team0_version_id, ("?", None))
        team1 = teams.get(match.team1_version_id, ("?", None))
        row: dict[str, Any] = {
            "match_id": match.id,
            "index": match.index,
            "seed": published_seed(match, unplayed),
            "duplicate_pair": match.duplicate_pair,
            "deal": match.deal,
            "status": match.status.value,
            "attempt": match.attempt,
            "teams": [{"bot": team0[0], "version": team0[1]}, {"bot": team1[0], "version": team1[1]}],
            "result": None,
        }
        if result is not None:
            row["result"] = {
                "winner_team": result.winner_team,
                "winner_bot": (result.team0_bot, result.team1_bot)[result.winner_team],
                "termination": result.termination,
                "vacas": list(result.vacas),
                "games": list(result.games),
                "points": list(result.points),
                "faults": [dict(fault) for fault in result.faults],
                "incidents": [dict(incident) for incident in result.incidents],
                "decision_seconds": [dict(summary) for summary in result.decision_seconds],
                "finished_at": _iso(result.finished_at),
            }
        rows.append(row)
    return rows


def unplayed_deals(planned: Sequence[Match]) -> set[tuple[int | None, int]]:
    """The deals some match has yet to finish, as (duplicate pair, seed)."""
    return {(match.duplicate_pair, match.seed) for match in planned if match.status is not MatchStatus.FINISHED}


def published_seed(match: Match, unplayed: set[tuple[int | None, int]]) -> int | None:
    """A match's seed if it may be shown: the match has finished, and so has every match on the same deal (its
    duplicate twin, when they share it); else None."""
    if match.status is not MatchStatus.FINISHED:
        return None
    if match.duplicate_pair is not None and (match.duplicate_pair, match.seed) in unplayed:
        return None
    return match.seed


@dataclass(frozen=True, slots=True)
class LeagueTable:
    """A league's results and the standings fitted on them, as read in one transaction."""

    league: League
    entrants: list[repo.Entrant]
    results: list[repo.FinishedMatch]
    scores: list[MatchScore]
    rows: list[StandingRow]
    reference: str
    """What the ratings are anchored to (the entrants' mean, or the `anchor` bot)."""
    total: int
    """How many matches the league plans, finished or not."""


def match_score(finished: int, result: repo.FinishedMatch) -> MatchScore:
    """A stored result as the tournament logic takes it: bots by name, faults and incidents per team by cause."""
    faults: tuple[Counter[str], Counter[str]] = (Counter(), Counter())
    for fault in result.faults:
        faults[team_of(int(fault["seat"]))][str(fault["cause"])] += 1
    incidents: tuple[Counter[str], Counter[str]] = (Counter(), Counter())
    for incident in result.incidents:
        incidents[team_of(int(incident["seat"]))][str(incident["cause"])] += 1
    return MatchScore(
        team0=result.team0_bot,
        team1=result.team1_bot,
        winner=result.winner_team,
        duplicate_pair=result.duplicate_pair,
        deal=result.deal,
        finished=finished,
        games=result.games,
        points=result.points,
        faults=(dict(faults[0]), dict(faults[1])),
        incidents=(dict(incidents[0]), dict(incidents[1])),
    )


def league_table(session: Session, league: repo.LeagueRef, anchor: str | None = None) -> LeagueTable:
    """Read a league's results and fit its standings (Elo by maximum likelihood over every result).

    `anchor`: the bot fixed at 1500 (default: the entrants' mean is 1500).

    Raises:
        NotFound: no such league. TournamentError: `anchor` is not an entrant.
    """
    row = repo.get_league(session, league)
    entrants = repo.league_entrants(session, row)
    results = repo.league_results(session, row)
    total = repo.league_progress(session, row)["total"]
    # league_results lists results in the order they finished: that order is the Elo-over-time axis.
    scores = [match_score(n, result) for n, result in enumerate(results, start=1)]
    ratings = fit_elo(scores, anchor, entrants=[entrant.bot_name for entrant in entrants])
    rows = standings(scores, ratings)
    reference = next(iter(ratings.values())).reference if ratings else ""
    return LeagueTable(row, entrants, results, scores, rows, reference, total)


def export_document(session: Session, league: repo.LeagueRef) -> dict[str, Any]:
    """Everything about a league as one JSON document: settings, entrants, progress, standings and every match
    of its plan with its result (`mus league export --format json`; `csv_text` of its `matches` is the CSV)."""
    table = league_table(session, league)
    planned = repo.list_matches(session, table.league)
    progress = repo.league_progress(session, table.league)
    results = {result.match_id: result for result in table.results}
    return {
        "league": league_json(table.league),
        "entrants": entrants_json(table.entrants),
        "progress": progress,
        "standings": [row.to_json() for row in table.rows],
        "rating_reference": table.reference,
        "matches": match_rows(
            planned, table.entrants, results, cancelled=table.league.status is LeagueStatus.CANCELLED
        ),
    }


def csv_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """`match_rows` as CSV (`CSV_COLUMNS`): one line per match, faults and incidents counted per team."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        result = row["result"] or {}
        faults = result.get("faults", [])
        incidents = result.get("incidents", [])
        flat: dict[str, Any] = {
            "match_id": row["match_id"],
            "index": row["index"],
            "seed": row["seed"],
            "duplicate_pair": row["duplicate_pair"],
            "deal": row["deal"],
            "status": row["status"],
            "team0_bot": row["teams"][0]["bot"],
            "team0_version": row["teams"][0]["version"],
            "team1_bot": row["teams"][1]["bot"],
            "team1_version": row["teams"][1]["version"],
            "winner_team": result.get("winner_team"),
            "winner_bot": result.get("winner_bot"),
            "termination": result.get("termination"),
            "finished_at": result.get("finished_at"),
        }
        for key in ("vacas", "games", "points"):
            pair = result.get(key) or [None, None]
            flat[f"{key}_team0"], flat[f"{key}_team1"] = pair
        if result:
            for kind, entries in (("faults", faults), ("incidents", incidents)):
                per_team = Counter(team_of(entry["seat"]) for entry in entries)
                flat[f"{kind}_team0"], flat[f"{kind}_team1"] = per_team[0], per_team[1]
            flat["fault_causes"] = ";".join(f"seat{fault['seat']}:{fault['cause']}" for fault in faults)
            flat["incident_causes"] = ";".join(f"seat{incident['seat']}:{incident['cause']}" for incident in incidents)
        writer.writerow(flat)
    return buffer.getvalue()


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None
