"""`mus league ...`: create a round robin, follow it, rank it, export it.

Deals are secret until played: each league's seeds derive from its secret, of which `create` prints only the
SHA-256 commitment; no output shows the secret before the league has finished, nor the seed of a deal that a
match has yet to play (docs/leagues.md).

The league logic is in `workers.leagues` (creating the round robin, standings, match rows, exports); these
commands parse their arguments and print what it returns.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from sqlmodel import Session

from referee.engine.outcome import MatchTermination
from workers import leagues
from workers.cli.db import domain_errors, echo_json, no_database, one_line, open_session, when
from workers.cli.errors import fail
from workers.cli.noun import noun_app
from workers.cli.rules_cmd import OptionList, parse_options
from workers.cli.run_cmd import run_command
from workers.cli.tables import cli_table, print_table
from workers.db import repo
from workers.db.errors import NotFound
from workers.db.models import DealMode, League, LeagueStatus, MatchStatus
from workers.play import changed_since_added
from workers.tournament import MAX_MATCHES_PER_PAIRING, elo_over_time, plot_elo_over_time

app = noun_app("Leagues: create, run, follow, rank and export round robins of duplicate pairs.")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
LeagueName = Annotated[str, typer.Argument(metavar="NAME", help="The league's name.")]
ExportFormat = Annotated[str, typer.Option("--format", help="csv (one row per match) or json (everything).")]

EXPORT_FORMATS = ("csv", "json")


def describe_rules(rules: dict[str, Any]) -> str:
    """A league's changed rules options as `key=value, ...`, or `defaults`."""
    return ", ".join(f"{key}={value}" for key, value in sorted(rules.items())) or "defaults"


def describe_deals(league: League) -> str:
    """How a league deals, for its text outputs."""
    if league.deal_mode is DealMode.DUPLICATE:
        return "duplicate pairs (each deal twice, partnerships swapped)"
    return "independent (every match its own deal)"


def describe_sandbox(league: League) -> str:
    """Whether a league's hosted bots run confined, for its text outputs."""
    return "on" if league.sandbox else "off (--no-sandbox): hosted bots run unconfined"


def describe_commitment(league: League) -> str:
    """The league's commitment and, once it has finished, its revealed secret."""
    if league.commitment is None:
        return f"none (created before secret deals; public seed {league.seed})"
    secret = repo.revealed_secret(league)
    shown = f"commitment {league.commitment}"
    if secret is not None:
        return f"{shown}; secret (revealed) {secret}"
    return f"{shown}; the secret is revealed when the league finishes"


def _bot_or_none(session: Session, name: str) -> repo.BotInfo | None:
    """The bot, or None where there is none (`create_round_robin` then says so with the other checks)."""
    try:
        return repo.get_bot(session, name)
    except NotFound:
        return None


@app.command("create")
def create_command(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The new league's name.")],
    bots: Annotated[
        str, typer.Option("--bots", help="The entrants, comma-separated: a,b,c (each its current version).")
    ],
    matches_per_pairing: Annotated[
        int,
        typer.Option(help="Matches per pairing: even, at most 1000; a multiple of 8 balances the mano exactly."),
    ] = leagues.DEFAULT_MATCHES_PER_PAIRING,
    option: OptionList = None,
    deals: Annotated[
        str | None,
        typer.Option(
            "--deals",
            help="duplicate (each deal twice, partnerships swapped) or independent (every match its own deal). "
            "Default: independent if an entrant is a remote bot (it could remember the twin), else duplicate.",
        ),
    ] = None,
    no_sandbox: Annotated[
        bool,
        typer.Option(
            "--no-sandbox", help="Run this league's hosted bots unconfined (only for bots you trust); recorded."
        ),
    ] = False,
    seed: Annotated[int | None, typer.Option(hidden=True, help="Removed: deals come from the league's secret.")] = None,
    absent_limit: Annotated[
        float, typer.Option(help="Seconds a match with a remote bot waits for it to show up.")
    ] = 600.0,
    json_output: JsonFlag = False,
) -> None:
    """Create a round robin between bots, expanded into matches now, its deals fixed by a secret.

    Prints the SHA-256 commitment to the league's secret; the secret is revealed when the league finishes, and
    `mus replay verify --league NAME` then checks that every deal came from it.
    """
    if seed is not None:
        fail(
            "--seed is gone: every league's deals come from its own secret, committed to when it is created "
            "(see docs/leagues.md)"
        )
    if deals is not None and deals not in {mode.value for mode in DealMode}:
        fail(f"unknown --deals {deals!r}: use duplicate or independent")
    if matches_per_pairing > MAX_MATCHES_PER_PAIRING:
        fail(f"--matches-per-pairing must be at most {MAX_MATCHES_PER_PAIRING}, got {matches_per_pairing}")
    names = [bot.strip() for bot in bots.split(",") if bot.strip()]
    options = parse_options(option)
    with open_session(reads=True) as session:  # no database: no bot to enter, so none is made
        for bot_name in names:  # a hosted entrant whose folder changed would void every match of the league
            info = _bot_or_none(session, bot_name)
            version = info.current if info is not None and not info.bot.remote else None
            if version is not None and (changed := changed_since_added(bot_name, version.number, version)):
                fail(changed)
        league = leagues.create_round_robin(
            session,
            name,
            bot_names=names,
            matches_per_pairing=matches_per_pairing,
            options=options,
            absent_limit_s=absent_limit,
            deal_mode=deals,
            sandbox=not no_sandbox,
        )
        entrants = repo.league_entrants(session, league)
        planned = repo.league_progress(session, league)["total"]
    remote = leagues.remote_twins(league, entrants)
    warnings = []
    if remote:
        warnings.append(
            f"remote bot(s) {', '.join(remote)} play duplicate deals: a remote program can remember the cards of "
            "a twin it has played and use them in the other; use --deals independent unless you trust it"
        )
    for line in warnings:
        typer.echo(f"warning: {line}", err=True)
    warning = "; ".join(warnings) or None
    if json_output:
        echo_json(
            {
                **leagues.league_json(league),
                "matches": planned,
                "entrants": leagues.entrants_json(entrants),
                "warning": warning,
            }
        )
        return
    pairings = len(entrants) * (len(entrants) - 1) // 2
    plural = "pairing" if pairings == 1 else "pairings"
    typer.echo(f"League {name} created: {planned} matches ({pairings} {plural} x {matches_per_pairing}).")
    typer.echo("Entrants: " + ", ".join(f"{entrant.bot_name} v{entrant.version_number}" for entrant in entrants))
    typer.echo(f"Rules: {describe_rules(league.rules)}")
    typer.echo(f"Deals: {describe_deals(league)}")
    typer.echo(f"Sandbox: {describe_sandbox(league)}")
    typer.echo(f"Commitment (SHA-256 of the league's secret): {league.commitment}")
    typer.echo(
        "  Every match's deals derive from that secret, revealed when the league finishes: "
        f"`mus replay verify --league {name}` then checks them."
    )
    typer.echo(f"Run it with `mus league run {name}`.")


# ------------------------------------------------------------------------------------------------------------
# `mus league run NAME` is registered on this `app` by workers/cli/main.py from workers/cli/run_cmd.py.
# ------------------------------------------------------------------------------------------------------------


@app.command("list")
def list_command(json_output: JsonFlag = False) -> None:
    """List the leagues with their progress."""
    with open_session(reads=True) as session:
        rows = [
            (league, repo.league_progress(session, league), len(repo.league_entrants(session, league)))
            for league in repo.list_leagues(session)
        ]
    if json_output:
        echo_json([{**leagues.league_json(league), **progress, "entrants": n} for league, progress, n in rows])
        return
    if not rows:
        if not no_database(session):
            typer.echo("No leagues yet: create one with `mus league create NAME --bots a,b,c`.")
        return
    table = cli_table(title="Leagues")
    for column in ("league", "status", "bots", "finished", "deals", "sandbox", "rules", "created"):
        table.add_column(column, justify="right" if column in ("bots", "finished") else "left")
    for league, progress, n in rows:
        failed = f", {progress['failed']} failed" if progress["failed"] else ""
        table.add_row(
            league.name,
            league.status.value,
            str(n),
            f"{progress['finished']}/{progress['total']}{failed}",
            league.deal_mode.value,
            "on" if league.sandbox else "off",
            describe_rules(league.rules),
            when(league.created_at)[:10],  # the day (UTC); `list --json` gives the time
        )
    print_table(table)


@app.command("status")
def status_command(
    name: LeagueName,
    errors: Annotated[int, typer.Option(help="How many of the latest infrastructure errors to show.")] = 5,
    matches: Annotated[
        bool, typer.Option("--matches", help="Also list every match: its id (for `mus replay`), teams, result.")
    ] = False,
    json_output: JsonFlag = False,
) -> None:
    """How far a league has got: matches per status, and the latest infrastructure errors (never a bot's fault)."""
    with open_session(reads=True) as session:
        league = repo.get_league(session, name)
        progress = repo.league_progress(session, league)
        entrants = repo.league_entrants(session, league)
        planned = repo.list_matches(session, league)
        results = {result.match_id: result for result in repo.league_results(session, league)} if matches else {}
    with_errors = [match for match in planned if match.error]
    with_errors.sort(key=lambda match: (match.started_at is not None, match.started_at, match.index), reverse=True)
    shown: list[dict[str, Any]] = [
        {
            "match_id": match.id,
            "index": match.index,
            "status": match.status.value,
            "attempt": match.attempt,
            "error": one_line(match.error or ""),
        }
        for match in with_errors[: max(errors, 0)]
    ]
    cancelled = league.status is LeagueStatus.CANCELLED
    listed = leagues.match_rows(planned, entrants, results, cancelled=cancelled) if matches else []
    if json_output:
        data = {**leagues.league_json(league), **progress, "entrants": leagues.entrants_json(entrants), "errors": shown}
        if matches:
            data["matches"] = listed
        echo_json(data)
        return
    total, finished = progress["total"], progress["finished"]
    percent = 100.0 * finished / total if total else 0.0
    state = league.status.value
    if league.status is LeagueStatus.RUNNING and not progress[MatchStatus.RUNNING.value] and finished < total:
        state += ", no match in play"  # interrupted, or every match left has failed: nothing plays until a run
    typer.echo(f"League {league.name}: {state}, {finished} of {total} matches finished ({percent:.0f}%)")
    typer.echo("Entrants: " + ", ".join(f"{entrant.bot_name} v{entrant.version_number}" for entrant in entrants))
    typer.echo(f"Rules: {describe_rules(league.rules)}")
    typer.echo(f"Deals: {describe_deals(league)}")
    typer.echo(f"Sandbox: {describe_sandbox(league)}")
    typer.echo(f"Deals fixed in advance: {describe_commitment(league)}")
    table = cli_table()
    table.add_column("status")
    table.add_column("matches", justify="right")
    for status in MatchStatus:
        table.add_row(_status_label(status.value, cancelled), str(progress[status.value]))
    table.add_row("total", str(total))
    print_table(table)
    if league.status is LeagueStatus.PAUSED:
        typer.echo(
            f"Paused (`mus league pause`): no worker takes its matches; `mus league run {league.name}` resumes it."
        )
    if league.status is LeagueStatus.CANCELLED:
        typer.echo("Cancelled (`mus league cancel`): it plays no more matches; its standings count those it played.")
    elif progress[MatchStatus.FAILED.value]:
        typer.echo(
            f"{progress['failed']} failed match(es): fix the cause below, then `mus league run {league.name}` plays"
            f" them again; or `mus league cancel {league.name}` ends the league with what it has played."
        )
    if shown:
        typer.echo("Latest infrastructure errors (not charged to any bot):")
        for entry in shown:
            typer.echo(
                f"  match {entry['match_id']} (#{entry['index']}, {entry['status']}, attempt {entry['attempt']}): "
                f"{_shorten(str(entry['error']), 200)}"
            )
    if matches:
        _print_matches(league.name, listed, cancelled)
    else:
        typer.echo(f"Match ids (for `mus replay show MATCH`): `mus league status {league.name} --matches`.")


def _status_label(status: str, cancelled: bool) -> str:
    """A match status as the tables show it: in a cancelled league a queued match will never be played (a chaos
    review read its cancelled league's 'queued' as matches still to come, stop 39)."""
    return "not played" if cancelled and status == MatchStatus.QUEUED.value else status


def _print_matches(league: str, rows: list[dict[str, Any]], cancelled: bool) -> None:
    table = cli_table(title=f"Matches of {league}")
    for column in ("id", "#", "pair", "team 0 (seats 0+2)", "team 1 (seats 1+3)", "status", "winner", "games", "seed"):
        table.add_column(column, justify="right" if column in ("id", "#", "pair", "seed") else "left")
    for row in rows:
        result = row["result"]
        team0, team1 = (f"{team['bot']} v{team['version']}" for team in row["teams"])
        table.add_row(
            str(row["match_id"]),
            str(row["index"]),
            "-" if row["duplicate_pair"] is None else str(row["duplicate_pair"]),
            team0,
            team1,
            _status_label(row["status"], cancelled),
            _winner(result),
            f"{result['games'][0]}-{result['games'][1]}" if result else "",
            "" if row["seed"] is None else str(row["seed"]),  # published once its deal is played out (docs/leagues.md)
        )
    print_table(table)


def _winner(result: dict[str, Any] | None) -> str:
    """The winner of a finished match, and how when it was not played out (a forfeit's games read like a tie)."""
    if result is None:
        return ""
    how = result["termination"]
    return result["winner_bot"] if how == MatchTermination.NORMAL.value else f"{result['winner_bot']} ({how})"


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _causes_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{cause} {count}" for cause, count in sorted(counts.items()) if count) or "-"


def _change_status(change: Callable[[Session, str], League], name: str, json_output: bool) -> dict[str, int] | None:
    """Pause or cancel a league (`change`) and return its progress to print; with `json_output`, print the league
    and its progress as JSON instead and return None."""
    with open_session(reads=True) as session:  # no database: no league to change
        league = change(session, name)
        progress = repo.league_progress(session, league)
        data = {**leagues.league_json(league), **progress}
    if json_output:
        echo_json(data)
        return None
    return progress


@app.command("pause")
def pause_command(name: LeagueName, json_output: JsonFlag = False) -> None:
    """Stop a league on every worker: none takes another of its matches, those in hand finish; `mus league run
    NAME` resumes it."""
    progress = _change_status(repo.pause_league, name, json_output)
    if progress is None:
        return
    typer.echo(
        f"league {name} paused: no worker takes another of its matches ({progress['queued']} queued); the"
        f" {progress['running']} being played finish (a pair with a persistent bot finishes whole: its twin is played"
        f" right after it). `mus league run {name}` resumes it."
    )


@app.command("cancel")
def cancel_command(name: LeagueName, json_output: JsonFlag = False) -> None:
    """End a league for good with the matches it has played: its standings count them, its secret is published and
    its bots may be removed. For a league that cannot finish (a bot's folder changed since it was entered) or that
    is no longer wanted. Matches being played must end first (`mus league pause NAME`)."""
    progress = _change_status(repo.cancel_league, name, json_output)
    if progress is None:
        return
    if not progress["finished"]:
        typer.echo(
            f"league {name} cancelled before any of its {progress['total']} matches finished: none will be played"
        )
        return
    typer.echo(
        f"league {name} cancelled: {progress['finished']} of {progress['total']} matches played, the others never"
        f" will be. `mus league standings {name}` counts the played ones; `mus replay verify --league {name}` checks"
        " their deals against the published secret."
    )


@app.command("standings")
def standings_command(
    name: LeagueName,
    anchor: Annotated[
        str | None, typer.Option(help="Fix this bot at 1500 instead of the entrants' mean (the reference).")
    ] = None,
    plot: Annotated[
        Path | None, typer.Option(help="Also write the Elo-over-time plot (with 95% bands) to this PNG file.")
    ] = None,
    json_output: JsonFlag = False,
) -> None:
    """The league table: rank, Elo ± 95% interval, won/lost, games, points, duplicate-pair score, faults, incidents.

    Faults (rules §13: illegal action, timeout, limit) count toward a forfeit; incidents (crash, disconnect,
    protocol error, absent) are what happened to a bot's connections or processes, listed apart.
    """
    with open_session(reads=True) as session:
        table_data = leagues.league_table(session, name, anchor)
    versions = {entrant.bot_name: entrant.version_number for entrant in table_data.entrants}
    if plot is not None:
        with domain_errors():
            series = elo_over_time(table_data.scores, anchor, entrants=list(versions))
        try:
            plot_elo_over_time(series, plot, title=f"League {table_data.league.name}: Elo over time (95% intervals)")
        except OSError as error:
            fail(f"cannot write the plot to {plot}: {error.strerror or error}")
    if json_output:
        league = table_data.league
        echo_json(
            [
                {
                    **row.to_json(),
                    "version": versions.get(row.bot),
                    "deal_mode": league.deal_mode.value,
                    "sandbox": league.sandbox,
                }
                for row in table_data.rows
            ]
        )
        return
    league = table_data.league
    title = f"League {league.name} ({league.status.value}): {len(table_data.results)} of {table_data.total} matches"
    if not table_data.results:  # every entrant would rank 1st at 1500 ± 482, the prior alone
        typer.echo(f"{title} finished: nothing to rank{'' if league.status.ended else ' yet'}.")
        typer.echo(f"Deals: {describe_deals(league)}. Sandbox: {describe_sandbox(league)}.")
        return
    duplicate = league.deal_mode is DealMode.DUPLICATE  # independent deals have no pairs (a review's 0/0)
    table = cli_table(
        title=f"{title} finished",
        caption=f"Elo by maximum likelihood over every result ({table_data.reference})"
        + ("; pairs: duplicate-pair score over complete pairs (1 both won, 0.5 split)." if duplicate else "."),
    )
    columns = ("#", "bot", "Elo ± 95%", "W", "L", "games", "points", *(("pairs",) if duplicate else ()))
    for column in (*columns, "faults", "incidents"):
        left = column in ("bot", "faults", "incidents")
        table.add_column(column, justify="left" if left else "right", no_wrap=column not in ("faults", "incidents"))
    for row in table_data.rows:
        half = (row.elo_high - row.elo_low) / 2
        table.add_row(
            str(row.rank),
            f"{row.bot} v{versions.get(row.bot, '?')}",
            f"{row.elo:.0f} ± {half:.0f}",
            str(row.wins),
            str(row.losses),
            f"{row.games_won}-{row.games_lost}",
            f"{row.points_for}-{row.points_against}",
            *((f"{row.pair_score:g}/{row.pairs}",) if duplicate else ()),
            _causes_text(dict(row.faults)),
            _causes_text(dict(row.incidents)),
        )
    print_table(table)
    typer.echo(f"Deals: {describe_deals(league)}. Sandbox: {describe_sandbox(league)}.")
    if duplicate and any(2 * row.pairs < row.wins + row.losses for row in table_data.rows):
        typer.echo(
            "Pairs: twins count as a pair only when both were played on one deal. A match played again (after"
            " Ctrl-C, a failure or a lost lease) moves to a fresh deal, and its twin, if already finished, keeps its"
            " own: those two count as single results (docs/leagues.md). Unfinished pairs count later."
        )
    if plot is not None:
        typer.echo(f"Elo over time written to {plot}")


@app.command("export")
def export_command(
    name: LeagueName,
    export_format: ExportFormat = "json",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file instead of standard output.")
    ] = None,
) -> None:
    """Export a league: every match of its plan with its result (csv), or that plus settings and standings (json)."""
    if export_format not in EXPORT_FORMATS:
        fail(f"unknown export format {export_format!r}: use {' or '.join(EXPORT_FORMATS)}")
    with open_session(reads=True) as session:
        document = leagues.export_document(session, name)
    rows = document["matches"]
    if export_format == "json":
        text = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    else:
        text = leagues.csv_text(rows)
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as error:
        fail(f"cannot write {output}: {error.strerror or error}")
    typer.echo(f"League {document['league']['league']}: {len(rows)} matches exported to {output}")


app.command("run")(run_command)
