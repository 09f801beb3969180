"""`mus replay ...`: read, export and verify the stored replays of finished matches.

A stored replay is the engine's replay record (`referee.engine.replay.match_record`): the rules, the seed, the
setup and every step. The engine re-simulates it (`replay_record`) to get the events back, so what is shown is
what the rules produce from those steps, and `verify` can check the stored result against a fresh simulation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from sqlmodel import Session

from referee.engine.chance import Setup
from referee.engine.errors import MusError
from referee.engine.events import Event, Fault, GameStarted, HandStarted
from referee.engine.match import Match
from referee.engine.outcome import MatchOutcome
from referee.engine.replay import EVENTS_VERSION, replay_record, setup_to_json
from referee.engine.rules import Rules
from referee.engine.seats import team_of
from referee.engine.transcript import TEAM_LABEL, render_transcript
from workers.cli.db import echo_json, one_line, open_session
from workers.cli.errors import fail
from workers.cli.noun import noun_app
from workers.db import repo
from workers.db.models import League, MatchResult
from workers.db.models import Match as MatchRow
from workers.db.repo import MatchDetails, MatchSetup
from workers.matches import fault_details
from workers.replays.html import render_html
from workers.tournament.deals import commitment, parse_secret

app = noun_app("Replays of finished matches: show, export, verify.")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
MatchArgument = Annotated[
    str | None, typer.Argument(metavar="MATCH", help="The match id (`mus league status NAME --matches`).")
]
LeagueOption = Annotated[str | None, typer.Option("--league", help="Every finished match of this league instead.")]

EXPORT_FORMATS = ("json", "html")

MAX_MATCH_ID = 2**63 - 1
"""Ids are signed 64-bit integers on both backends; a larger one names no match (and SQLite cannot take it)."""

RESIMULATION_ERRORS = (MusError, KeyError, TypeError, ValueError)
"""What re-simulating a damaged or forged replay record can raise: an illegal step, a malformed one."""


@dataclass(frozen=True, slots=True)
class StoredReplay:
    """A finished match's replay record and who played it."""

    setup: MatchSetup
    record: dict[str, Any]
    result: MatchResult
    """The stored result; its incidents (the seats' connections and processes: crash, disconnect, ...) are not in
    the replay record, whose Fault events are the match's faults."""

    @property
    def incidents(self) -> list[dict[str, Any]]:
        return self.result.incidents

    @property
    def names(self) -> tuple[str, str]:
        """Team 0's and team 1's bots with their versions, e.g. `alpha v2`."""
        team0, team1 = self.setup.teams
        return (f"{team0.bot_name} v{team0.version_number}", f"{team1.bot_name} v{team1.version_number}")

    def teams_json(self) -> list[dict[str, Any]]:
        return [
            {"team": team, "seats": [team, team + 2], "bot": setup.bot_name, "version": setup.version_number}
            for team, setup in enumerate(self.setup.teams)
        ]

    def result_json(self) -> dict[str, Any]:
        """The stored result as `mus league status --matches --json` gives it, without its faults and incidents."""
        result = self.result
        return {
            "winner_team": result.winner_team,
            "winner_bot": self.setup.teams[result.winner_team].bot_name,
            "termination": result.termination,
            "vacas": [result.vacas_team0, result.vacas_team1],
            "games": [result.games_team0, result.games_team1],
            "points": [result.points_team0, result.points_team1],
        }


def parse_match_id(text: str) -> int:
    """A match id as typed: a positive integer, else a one-line error."""
    try:
        match_id = int(text)
    except ValueError:
        fail(f"a match id is a number (see `mus league status NAME --matches`), got {text!r}")
    if not 1 <= match_id <= MAX_MATCH_ID:
        fail(f"no match with id {match_id}: match ids run from 1 to 2**63-1")
    return match_id


def load_replay(session: Session, match_id: int) -> StoredReplay:
    """A finished match's stored replay (NotFound for an unknown match or one without a replay).

    Refused while its duplicate twin, dealt the same cards, has not finished: the replay would show the deals.
    """
    record = repo.get_replay(session, match_id)
    twin = repo.unplayed_twin(session, match_id)
    if twin is not None:
        fail(
            f"match {match_id}'s replay opens when its duplicate twin, match {twin.id}, dealt the same cards, has "
            "finished"
        )
    result = repo.get_match_details(session, match_id).result
    return StoredReplay(repo.match_setup(session, match_id), record, result)


def resimulate(stored: StoredReplay) -> Match:
    """The match rebuilt by the engine from its stored record; a record that does not replay is an error."""
    try:
        return replay_record(stored.record)
    except RESIMULATION_ERRORS as error:
        fail(f"match {stored.setup.match_id}: the stored replay does not re-simulate: {one_line(str(error))}")


def hand_events(events: Sequence[Event], hand: int) -> list[Event]:
    """The events of hand `hand` (numbered over the whole match, from 0): from its `hand_started` through what
    ended with it (its game, vaca or the match), preceded by the `game_started` of a game it opens."""
    selected: list[Event] = []
    opening: list[Event] = []
    current: int | None = None
    for event in events:
        payload = event.payload
        if isinstance(payload, GameStarted):
            opening = [event]
            current = None
            continue
        if isinstance(payload, HandStarted):
            current = payload.hand
            if current == hand:
                selected.extend(opening)
            opening = []
        if current == hand:
            selected.append(event)
    return selected


def hand_numbers(events: Sequence[Event]) -> list[int]:
    return [started.hand for event in events if isinstance(started := event.payload, HandStarted)]


@app.command("show")
def show_command(
    match: Annotated[str, typer.Argument(metavar="MATCH", help="The match id (`mus league status NAME --matches`).")],
    seat: Annotated[int | None, typer.Option(help="Only what this seat saw (0..3); default: everything.")] = None,
    hand: Annotated[int | None, typer.Option(help="Only this hand (numbered over the match from 0).")] = None,
    json_output: JsonFlag = False,
) -> None:
    """A finished match hand by hand: cards, señas, bets, tanteo; omniscient, or one seat's own view."""
    match_id = parse_match_id(match)
    if seat is not None and not 0 <= seat <= 3:
        fail(f"there is no seat {seat}: seats are 0..3")
    with open_session(reads=True) as session:
        stored = load_replay(session, match_id)
    replayed = resimulate(stored)
    events = replayed.events if seat is None else replayed.events_for(seat)
    if hand is not None:
        hands = hand_numbers(events)
        if hand not in hands:
            shown = f"hands {hands[0]}..{hands[-1]}" if hands else "no hands"
            fail(f"match {match_id} has no hand {hand}: it has {shown}")
        events = hand_events(events, hand)
    setup = stored.setup
    if json_output:
        echo_json(
            {
                "match_id": match_id,
                "league": setup.league_name,
                "index": setup.index,
                "seed": setup.seed,
                "rules": setup.rules,
                "teams": stored.teams_json(),
                "seat": seat,
                "hand": hand,
                "events": [event.to_json() for event in events],
                "incidents": [dict(incident) for incident in stored.incidents],
            }
        )
        return
    names = stored.names
    typer.echo(f"Match {match_id}: league {setup.league_name}, #{setup.index}, seed {setup.seed}")
    typer.echo(f"  {TEAM_LABEL[0]}: {names[0]}; {TEAM_LABEL[1]}: {names[1]}")
    rules = ", ".join(f"{key}={value}" for key, value in sorted(setup.rules.items())) or "defaults"
    typer.echo(f"  rules: {rules}")
    view = "omniscient view" if seat is None else f"seat {seat}'s view ({names[team_of(seat)]})"
    typer.echo(f"  {view}" + (f", hand {hand}" if hand is not None else ""))
    typer.echo(_with_fault_details(render_transcript(events), events, fault_details(replayed)), nl=False)
    for incident in stored.incidents:
        detail = f": {incident['detail']}" if incident.get("detail") else ""
        bot = names[team_of(int(incident["seat"]))]
        typer.echo(f"incident: seat {incident['seat']} ({bot}) {incident['cause']}{detail}")


def _with_fault_details(transcript: str, events: Sequence[Event], details: Mapping[Fault, str]) -> str:
    """The transcript with the referee's reason after each fault it has one for (an illegal action's: "envido 1 is
    below min_bet 2; legal: ..."), which the Fault event does not carry. A transcript line of one is `fault: ...`,
    in the order of the events."""
    reasons = iter([details.get(fault, "") for event in events if isinstance(fault := event.payload, Fault)])
    lines = transcript.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if line.lstrip().startswith("fault: ") and (reason := next(reasons, "")):
            lines[index] = f"{line.rstrip()}: {reason}\n"
    return "".join(lines)


@app.command("export")
def export_command(
    match: MatchArgument = None,
    league: LeagueOption = None,
    export_format: Annotated[
        str,
        typer.Option(
            "--format",
            help=(
                "html (one self-contained page) or json (the replay record, with `match`: its id, league, teams and"
                " result)."
            ),
        ),
    ] = "html",
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="The file to write (`-`: standard output); with --league, a folder. Default: match-<id>.<format> "
            "(with --league, in the folder replays-<league>).",
        ),
    ] = None,
) -> None:
    """Export a match's replay (or every replay of a league): one self-contained HTML page, or the JSON record."""
    if export_format not in EXPORT_FORMATS:
        fail(f"unknown export format {export_format!r}: use {' or '.join(EXPORT_FORMATS)}")
    if (match is None) == (league is None):
        fail("give either a match id or --league NAME")
    match_id = parse_match_id(match) if match is not None else None
    withheld = 0
    with open_session(reads=True) as session:
        match_ids = [match_id] if match_id is not None else repo.replay_match_ids(session, league or "")
        if match_id is None:
            shown = [one for one in match_ids if repo.unplayed_twin(session, one) is None]
            withheld, match_ids = len(match_ids) - len(shown), shown
        stored = [load_replay(session, one) for one in match_ids]
    if league is not None:
        folder = output if output is not None else Path(f"replays-{league}")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            fail(f"cannot create the folder {folder}: {error.strerror or error}")
        for replay in stored:
            _write(folder / f"match-{replay.setup.match_id}.{export_format}", _export_text(replay, export_format))
        typer.echo(f"League {league}: {len(stored)} replay(s) written to {folder}")
        if withheld:
            typer.echo(f"{withheld} more withheld until their duplicate twins, dealt the same cards, have finished.")
        return
    replay = stored[0]
    text = _export_text(replay, export_format)
    if output is not None and str(output) == "-":
        typer.echo(text, nl=False)
        return
    path = output if output is not None else Path(f"match-{replay.setup.match_id}.{export_format}")
    _write(path, text)
    typer.echo(f"Match {replay.setup.match_id}: replay written to {path}")


def _export_text(replay: StoredReplay, export_format: str) -> str:
    if export_format == "json":
        # The stored record, which re-simulates as it is (`replay_record` reads its own keys), with who played it:
        # the record alone names no match, league or bot.
        setup = replay.setup
        played = {
            "match_id": setup.match_id,
            "league": setup.league_name,
            "index": setup.index,
            "teams": replay.teams_json(),
            "result": replay.result_json(),
        }
        return json.dumps({"match": played, **replay.record}, ensure_ascii=False) + "\n"
    setup = replay.setup
    names = replay.names
    title = f"{setup.league_name} #{setup.index} (match {setup.match_id}): {names[0]} v {names[1]}"
    return render_html(replay.record, title=title, names=names)


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        fail(f"cannot write {path}: {error.strerror or error}")


@app.command("verify")
def verify_command(
    match: MatchArgument = None,
    league: LeagueOption = None,
    json_output: JsonFlag = False,
) -> None:
    """Re-simulate matches from the rules, the seed and the actions, and check their stored results; once the
    league has finished, also check its revealed secret against its commitment and every seed against the secret.

    Prints OK or MISMATCH (with what differs) per match; exits with code 1 if any match does not verify.
    """
    if (match is None) == (league is None):
        fail("give either a match id or --league NAME")
    match_id = parse_match_id(match) if match is not None else None
    checked: list[dict[str, Any]] = []
    with open_session(reads=True) as session:
        match_ids = [match_id] if match_id is not None else repo.replay_match_ids(session, league or "")
        for one in match_ids:
            details = repo.get_match_details(session, one)
            record = repo.get_replay(session, one)
            league_row = repo.get_league(session, details.match.league_id)
            problems = verify_replay(details, record, league_row.rules)
            seed_problems, seed_note = verify_deal(session, league_row, details.match)
            problems.extend(seed_problems)
            entry: dict[str, Any] = {
                "match_id": one,
                "index": details.match.index,
                "ok": not problems,
                "seed_verified": seed_note is None and not seed_problems,
                "problems": problems,
            }
            note = older_events_note(record)
            if note is not None:
                entry["note"] = note
            if seed_note is not None:
                entry["seed_note"] = seed_note
            checked.append(entry)
    mismatches = sum(1 for entry in checked if not entry["ok"])
    if json_output:
        echo_json(
            {"checked": len(checked), "ok": len(checked) - mismatches, "mismatches": mismatches, "matches": checked}
        )
    else:
        if not checked:
            typer.echo(f"League {league} has no finished match to verify.")
        for entry in checked:
            where = f"match {entry['match_id']} (#{entry['index']})"
            if entry["ok"]:
                typer.echo(f"{where}: OK" + (f" ({entry['note']})" if "note" in entry else ""))
            else:
                typer.echo(f"{where}: MISMATCH: {'; '.join(entry['problems'])}")
        verified = sum(1 for entry in checked if entry["seed_verified"])
        if verified:
            typer.echo(f"Seeds: {verified} of {len(checked)} derive from the league's revealed secret.")
        for seed_note in sorted({entry["seed_note"] for entry in checked if "seed_note" in entry}):
            typer.echo(f"Seeds not checked: {seed_note}.")
    if mismatches:
        fail(f"{mismatches} of {len(checked)} match(es) do not replay to their stored result")


def verify_deal(session: Session, league: League, match: MatchRow) -> tuple[list[str], str | None]:
    """Whether the match's seed is the one its league's secret derives for it: (problems, note).

    Only a finished league's secret is revealed, so before the end the seed cannot be checked (a note says so);
    a league from before secret deals has public seeds and nothing to check.
    """
    if league.secret is None or league.commitment is None:
        return [], "the league predates secret deals: its seeds were public"
    secret = repo.revealed_secret(league)
    if secret is None:
        return [], "the league has not finished: its secret, which the seeds derive from, is revealed when it does"
    try:
        hashed = commitment(parse_secret(secret))
    except ValueError as error:
        return [f"the league's revealed secret is malformed: {error}"], None
    if hashed != league.commitment:
        return [f"the league's revealed secret does not hash to its commitment {league.commitment}"], None
    problem = repo.check_league_seed(session, league, match, secret)
    return ([problem] if problem else []), None


def verify_replay(details: MatchDetails, record: Mapping[str, Any], league_rules: Mapping[str, Any]) -> list[str]:
    """What differs between a stored result and the re-simulation of its replay; empty when they agree.

    The match is re-simulated from the league's rules, the match's seed and the replay's steps, with the deals
    coming from the seed: the replay's own rules, seed and setup are only checked against those.
    """
    match_row, problems = details.match, []
    if record.get("seed") != match_row.seed:
        problems.append(f"the replay's seed {record.get('seed')!r} is not the match's seed {match_row.seed}")
    try:
        expected = Rules.from_options(league_rules).changed_options()
        recorded = Rules.from_options(record.get("rules", {})).changed_options()
        if recorded != expected:
            problems.append(f"the replay's rules {recorded} are not the league's {expected}")
    except RESIMULATION_ERRORS as error:
        problems.append(f"the replay's rules are invalid: {one_line(str(error))}")
    if record.get("setup", {}) not in ({}, setup_to_json(Setup())):
        problems.append("the replay scripts its own deals (setup); a league match deals from its seed")
    try:
        match = replay_record({"rules": dict(league_rules), "seed": match_row.seed, "steps": record["steps"]})
    except RESIMULATION_ERRORS as error:
        return [*problems, f"the replay does not re-simulate: {one_line(str(error))}"]
    if match.outcome is None:
        return [*problems, "the replay ends before the match does"]
    problems.extend(compare_outcome(details, match.outcome))
    stored_faults = [(fault.get("seat"), fault.get("cause")) for fault in details.result.faults]
    replayed_faults = [
        (fault.seat, fault.cause.value) for event in match.events if isinstance(fault := event.payload, Fault)
    ]
    if stored_faults != replayed_faults:
        problems.append(f"faults (seat, cause): stored {stored_faults}, replayed {replayed_faults}")
    if "events" in record and stored_events_version(record) == EVENTS_VERSION:
        replayed = [event.to_json() for event in match.events]
        stored_events = list(record["events"])
        if replayed != stored_events:
            at = next(
                (i for i, (a, b) in enumerate(zip(replayed, stored_events, strict=False)) if a != b),
                min(len(replayed), len(stored_events)),
            )
            problems.append(
                f"the stored event log differs from the re-simulation from event {at} "
                f"({len(stored_events)} stored, {len(replayed)} replayed)"
            )
    return problems


def stored_events_version(record: Mapping[str, Any]) -> object:
    """The engine version that wrote a replay's event log (`EVENTS_VERSION`); 1 for records older than it."""
    return record.get("events_version", 1)


def older_events_note(record: Mapping[str, Any]) -> str | None:
    """Why a replay's stored event log was not compared with the re-simulation, or None when it was."""
    version = stored_events_version(record)
    if "events" not in record or version == EVENTS_VERSION:
        return None
    return (
        f"its event log was written by an older engine (events_version {version}, now {EVENTS_VERSION}): "
        "the result and the steps verify; the stored events are not compared"
    )


def compare_outcome(details: MatchDetails, outcome: MatchOutcome) -> list[str]:
    """What differs between the stored result, games and vacas and the replayed outcome."""
    result, match_row = details.result, details.match
    problems: list[str] = []

    def check(what: str, stored: Any, replayed: Any) -> None:
        if stored != replayed:
            problems.append(f"{what}: stored {stored}, replayed {replayed}")

    check("winner team", result.winner_team, outcome.winner)
    check("termination", result.termination, outcome.termination.value)
    check("vacas", [result.vacas_team0, result.vacas_team1], list(outcome.vacas))
    won = [game for game in outcome.games if game.winner is not None]
    check(
        "games won",
        [result.games_team0, result.games_team1],
        [sum(1 for game in won if game.winner == team) for team in (0, 1)],
    )
    check(
        "points",
        [result.points_team0, result.points_team1],
        [sum(game.score[team] for game in outcome.games) for team in (0, 1)],
    )
    winner_version = (match_row.team0_version_id, match_row.team1_version_id)[result.winner_team]
    check("winning version id", result.winner_version_id, winner_version)
    stored_games = [
        (game.vaca, game.game, game.winner_team, (game.score0, game.score1), game.termination, game.hand_number)
        for game in details.games
    ]
    replayed_games = [
        (game.vaca, game.game, game.winner, game.score, game.termination.value, game.hand_number)
        for game in outcome.games
    ]
    check("number of games", len(stored_games), len(replayed_games))
    for stored_game, replayed_game in zip(stored_games, replayed_games, strict=False):
        if stored_game[2:] != replayed_game[2:]:  # games in order: their place is their number
            check(
                f"vaca {replayed_game[0]} game {replayed_game[1]} (winner, score, end, hand)",
                stored_game[2:],
                replayed_game[2:],
            )
            break
    # Vacas in order, by winner and games: their place is their number (stored from 1 before events_version 5).
    stored_vacas = [(vaca.winner_team, (vaca.games0, vaca.games1)) for vaca in details.vacas]
    replayed_vacas = [(vaca.winner, vaca.games) for vaca in outcome.vaca_results]
    check("vaca results (winner, games)", stored_vacas, replayed_vacas)
    return problems
